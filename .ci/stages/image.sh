#!/usr/bin/env bash
# A family's image under containerd: assembled as an OCI layout from the debug binary
# (images/build-oci.sh), pushed to a registry on loopback, pulled and run by a real
# containerd from Debian's packages (../shared/recipes/containerd-cri.sh).
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need_kubectl
build_workspace
CONTAINERD_RECIPE="${CONTAINERD_RECIPE:-$root/../shared/recipes/containerd-cri.sh}" \
  bash "$root/images/tests/container-start.sh" cloneset
