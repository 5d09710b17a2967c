#!/usr/bin/env bash
# Assembles a kruise-rs family's container image as an OCI layout, without a container
# build daemon: the binary (as cargo built it; and `<binary>-agent` where it lies beside it,
# for kruise-crr and kruise-imagepull), the shared libraries it links (glibc,
# libgcc_s, libm, the loader: a distroless-style runtime with no shell or package
# manager), the CA bundle, /etc/passwd and /etc/group with the non-root user 65532, and a config that
# runs `kruise-<family> run` as that user. `Dockerfile` builds the same image with docker
# or buildah where a registry with Rust images is reachable.
#   usage: images/build-oci.sh BINARY LAYOUT_DIR [TAG]   (TAG default: the binary's version)
# Needs umoci (Debian package). Prints the image's compressed size.
set -euo pipefail
binary=$(realpath "$1")
layout="$2"
name=$(basename "$binary")
tag="${3:-$("$binary" --version 2>/dev/null | awk '{print $2}')}"
[[ -n "$tag" ]] || tag=latest
command -v umoci >/dev/null || { echo "build-oci.sh: umoci not found (apt-get install umoci)" >&2; exit 1; }

rootfs=$(mktemp -d)
trap 'rm -rf "$rootfs"' EXIT
mkdir -p "$rootfs"/{etc,tmp}
chmod 1777 "$rootfs/tmp"
install -m 0755 "$binary" "$rootfs/$name"
# A family with a node agent ships its agent-only binary beside it (`/kruise-<family>-agent`,
# the command of the chart's DaemonSet), built by the same `cargo build`.
agent="$(dirname "$binary")/$name-agent"
[[ ! -x "$agent" ]] || install -m 0755 "$agent" "$rootfs/$name-agent"
# The entrypoint every kruise-rs image shares (the Dockerfile's too).
ln -s "$name" "$rootfs/entrypoint"
# The loader and every library the binary links, at the paths the binary looks them up.
ldd "$binary" | awk '/=> \// {print $3} /^[ \t]*\// {print $1}' | sort -u | while read -r lib; do
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
done
# The system's CA bundle (distroless images carry one too): the TLS client loads the
# platform's roots when it starts, even where the API server's CA is given.
ca_bundle=/etc/ssl/certs/ca-certificates.crt
[[ -f "$ca_bundle" ]] || { echo "build-oci.sh: $ca_bundle not found (apt-get install ca-certificates)" >&2; exit 1; }
mkdir -p "$rootfs/etc/ssl/certs"
cp -L "$ca_bundle" "$rootfs/etc/ssl/certs/"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$rootfs/etc/group"

rm -rf "$layout"
umoci init --layout "$layout"
umoci new --image "$layout:$tag"
umoci insert --image "$layout:$tag" "$rootfs" / >/dev/null
umoci config --image "$layout:$tag" \
  --config.user 65532:65532 --config.workingdir / \
  --config.entrypoint /entrypoint --config.cmd run \
  --config.exposedports 9876/tcp --config.exposedports 8080/tcp --config.exposedports 8081/tcp \
  --config.label "org.opencontainers.image.title=$name" \
  --config.label "org.opencontainers.image.version=$tag" \
  --config.label "org.opencontainers.image.source=https://github.com/kruise-rs/kruise-rs" \
  --config.label "org.opencontainers.image.licenses=Apache-2.0"
umoci gc --layout "$layout"
size=$(find "$layout/blobs" -type f -printf '%s\n' | awk '{s+=$1} END {printf "%.1f MiB", s/1048576}')
echo "$name:$tag -> $layout ($size compressed)"
