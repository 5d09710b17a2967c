#!/usr/bin/env bash
# A real node (e2e/realcluster/node.sh: containerd, runc and the CNI plugins from Debian's
# packages, the kubelet and kube-proxy from Kubernetes' Go modules) on the real control
# plane, and in-place updates observed on real containers there
# (e2e/realcluster/tests/kubectl-real-node.sh; docs/real-node.md): first with the families
# as processes, then as pods from their images, installed with helm, and uninstalled.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need_kubectl
build_workspace
go version
export REALCLUSTER_BIN="$HOME/.cache/kruise-realcluster-bin"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# The smoke checks are the realcluster stage's.
REALCLUSTER_REAL_NODE=1 REALCLUSTER_SMOKE=0 bash "$root/e2e/realcluster/ci.sh" "$dir" \
  bash -c 'export KRUISE_E2E_KUBECONFIG="$KUBECONFIG"
    REALNODE_INSTALL=processes bash "$1/e2e/realcluster/tests/kubectl-real-node.sh"
    REALNODE_INSTALL=helm bash "$1/e2e/realcluster/tests/kubectl-real-node.sh"' _ "$root"
