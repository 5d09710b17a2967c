#!/usr/bin/env bash
# OpenKruise's own e2e specs that pass on kruise-rs (docs/e2e.md), on the real control plane
# with kruise-sim's nodes and the families in kruise-playground (e2e/openkruise/run.sh). The
# suite's binary is built once (~8 min cold) and kept in ~/.cache/kruise-openkruise-e2e,
# as is OpenKruise's kruise-manager, which runs on `kruise-sim up` first.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need_kubectl
build_workspace
export REALCLUSTER_BIN="$HOME/.cache/kruise-realcluster-bin"
# A fixed subset per family (docs/e2e.md has every spec's result): the quick passing ones.
focus='CloneSet Scaling|SidecarSet Injecting functionality|regard preparing-update pod as update when scaling|ContainerRecreateRequest|CloneSet Updating with inplace resource in-place update image and resource|should upgrade resources and image one by one'
focus+='|cold sidecar container failed image, and only update one pod|pre-download for new image'
focus+='|should run and stop simple daemon|should only inplace image if update daemonset image'
focus+='|succeeds for parallelism < number of node'
focus+='|pull an image on one real node|pull two images on one real node|never completion pull job with updated pull secrets'
focus+='|run with no container priority'
focus+='|selector pods and scale down deployment ignore|selector pods and delete deployment ignore'
focus+='|Service deletion|Ingress deletion|ns should be protected'
focus+='|recreate update when pod qos changed|Decreasing .start.ordinal|Should recreate evicted statefulset'
focus+='|recreate_expand_vct_with_sc_can_expand'
focus+='|ResourceDistribution.*namespace event checker'
# OpenKruise's own kruise-manager on kruise-sim (built beside the suite, sharing its caches).
step "kruise-manager v1.8.3 on kruise-sim up"
bash "$root/e2e/openkruise/kruise-manager-on-sim.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# The smoke checks are the realcluster stage's.
REALCLUSTER_SMOKE=0 bash "$root/e2e/realcluster/ci.sh" "$dir" "$root/e2e/openkruise/run.sh" "$focus"
