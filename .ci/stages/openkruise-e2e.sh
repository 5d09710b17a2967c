#!/usr/bin/env bash
# OpenKruise's own e2e specs that pass on kruise-rs (docs/e2e.md), on the real control plane
# with kruise-sim's nodes and the families in kruise-playground (e2e/openkruise/run.sh). The
# suite's binary is built once (~8 min cold) and kept in ~/.cache/kruise-openkruise-e2e.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need_kubectl
build_workspace
export REALCLUSTER_BIN="$HOME/.cache/kruise-realcluster-bin"
focus='CloneSet Scaling|SidecarSet Injecting functionality|regard preparing-update pod as update when scaling|ContainerRecreateRequest|CloneSet Updating with inplace resource in-place update image and resource|should upgrade resources and image one by one'
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# The smoke checks are the realcluster stage's.
REALCLUSTER_SMOKE=0 bash "$root/e2e/realcluster/ci.sh" "$dir" "$root/e2e/openkruise/run.sh" "$focus"
