#!/usr/bin/env bash
# A real node (e2e/realcluster/node.sh: containerd, runc and the CNI plugins from Debian's
# packages, the kubelet and kube-proxy from Kubernetes' Go modules) on the real control
# plane, and in-place updates observed on real containers there
# (e2e/realcluster/tests/kubectl-real-node.sh; docs/real-node.md): first with the families
# as processes, then as pods from their images, installed with helm, and uninstalled; then
# OpenKruise's own e2e specs that need a real runtime (docs/e2e.md, "On the real node").
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need_kubectl
build_workspace
go version
export REALCLUSTER_BIN="$HOME/.cache/kruise-realcluster-bin"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# The smoke checks are the realcluster stage's.
# The specs of OpenKruise's suite that need a real runtime and pass on it.
focus='in-place update images with the same imageID|in-place update two container images with priorities, should not update the next'
focus+='|DisablePVCReuse=true|VolumeClaimTemplate changes'
focus+='|should provide basic identity|Scaling should happen in predictable order and halt'
REALCLUSTER_REAL_NODE=1 REALCLUSTER_SMOKE=0 bash "$root/e2e/realcluster/ci.sh" "$dir" \
  bash -c 'set -e
    export KRUISE_E2E_KUBECONFIG="$KUBECONFIG"
    REALNODE_INSTALL=processes bash "$1/e2e/realcluster/tests/kubectl-real-node.sh"
    REALNODE_INSTALL=helm bash "$1/e2e/realcluster/tests/kubectl-real-node.sh"
    OPENKRUISE_E2E_REAL_NODE="$2" bash "$1/e2e/openkruise/run.sh" "$3"' _ "$root" "$dir" "$focus"
