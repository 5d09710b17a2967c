#!/usr/bin/env bash
# A family's image, as images/build-oci.sh assembles it, under a real containerd (the
# machine recipe `containerd-cri.sh`: containerd, runc, skopeo and a registry on loopback,
# all from Debian's packages): pushed to the registry, pulled by containerd, started with a
# read-only root filesystem and host networking against kruise-sim, it runs as user 65532
# and answers /healthz, and /readyz once its CRD is installed.
#   usage: images/tests/container-start.sh FAMILY
# Environment: KRUISE_BIN_DIR (the binaries), CONTAINERD_RECIPE (default
# ../shared/recipes/containerd-cri.sh beside the repository). Needs root.
set -euo pipefail
# shellcheck source=testkit/scenario-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../testkit/scenario-lib.sh"
family="${1:?usage: container-start.sh FAMILY}"
recipe="${CONTAINERD_RECIPE:-$ROOT/../shared/recipes/containerd-cri.sh}"
[[ -f "$recipe" ]] || fail "the containerd recipe is not at $recipe (set CONTAINERD_RECIPE)"
scenario_init
containerd_dir="$WORK/containerd"
container="kruise-$family-start-test"

bash "$recipe" start "$containerd_dir" >"$WORK/containerd-start.log" 2>&1 || { cat "$WORK/containerd-start.log" >&2; fail "starting containerd"; }
# shellcheck disable=SC1091
source "$containerd_dir/env"
ctr_() { ctr -a "$CRI_SOCK" -n kruise-rs-images "$@"; }
stop_containerd() {
  ctr_ tasks kill -s SIGKILL "$container" >/dev/null 2>&1 || true
  ctr_ tasks rm -f "$container" >/dev/null 2>&1 || true
  ctr_ containers rm "$container" >/dev/null 2>&1 || true
  bash "$recipe" stop "$containerd_dir" >/dev/null 2>&1 || true
}
trap 'stop_containerd; scenario_cleanup' EXIT

image="$REGISTRY/kruise-rs/kruise-$family:ci"
bash "$ROOT/images/build-oci.sh" "$(kruise_bin "kruise-$family")" "$WORK/layout" ci
skopeo copy -q --dest-tls-verify=false "oci:$WORK/layout:ci" "docker://$image"
ctr_ images pull --plain-http "$image" >/dev/null
pass "kruise-$family's image built, pushed and pulled by containerd"

start_cluster kruise-sim --nodes 0
mkdir -p "$WORK/config"
cp "$KUBECONFIG" "$WORK/config/kubeconfig"
health=$(free_port)
ctr_ run -d --net-host --read-only \
  --mount "type=bind,src=$WORK/config,dst=/config,options=rbind:ro" \
  "$image" "$container" /entrypoint run --kubeconfig /config/kubeconfig --leader-elect=false \
  --health-addr "127.0.0.1:$health" --metrics-addr "127.0.0.1:$(free_port)" \
  --webhook-port "$(free_port)" --webhook-host 127.0.0.1 --webhook-bind-address 127.0.0.1 \
  --webhook-namespace default >/dev/null
wait_for 60 "/healthz of the container" curl -sf "http://127.0.0.1:$health/healthz"
pid=$(ctr_ tasks ls | awk -v c="$container" '$1 == c {print $2}')
assert_eq "$(ps -o uid= -p "$pid" | tr -d ' ')" "65532" "the container's user"
crds="$("$(kruise_bin "kruise-$family")" crd)"
[[ -z "$crds" ]] || "$KUBECTL" apply -f - >/dev/null <<<"$crds"
wait_for 60 "/readyz of the container" curl -sf "http://127.0.0.1:$health/readyz"
pass "kruise-$family runs from its image under containerd: user 65532, read-only root, /healthz and /readyz"
