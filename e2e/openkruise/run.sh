#!/usr/bin/env bash
# Runs OpenKruise's own e2e specs (github.com/openkruise/kruise test/e2e, v1.8.3, built
# by `go test -c` from this module) against kruise-rs on the cluster of KUBECONFIG (the
# real control plane of e2e/realcluster): testkit/scenario-lib.sh's start_cluster, with
# KRUISE_E2E_KUBECONFIG set, starts `kruise-sim nodes`, their node agents and the kruise-rs
# families there (instead of kruise-manager and kruise-daemon) with the e2e job's feature gates (FEATURE_GATES overrides
# them), then the suite runs the specs whose names match FOCUS.
#
#   KUBECONFIG=/tmp/kcp/kubeconfig e2e/openkruise/run.sh 'CloneSet Scaling'
#
# OPENKRUISE_E2E_REAL_NODE: the directory of `up.sh start DIR --real-node`; the specs then
# run on its real node alone (kubelet, containerd, the public images they name served by
# stand-ins through containerd's mirrors, claims on host-path volumes), with the node agents
# on its containerd socket, and no simulated node.
# OPENKRUISE_E2E_TARGET=playground: no real control plane; the specs run on `kruise-playground
# up` (kruise-sim with its nodes and every family), as a user trying kruise-rs first would.
# OPENKRUISE_E2E_SKIP: a regular expression of spec names to leave out of FOCUS.
# OPENKRUISE_E2E_BIN: the test binary (default ~/.cache/kruise-openkruise-e2e/
# openkruise-e2e.test, built when missing; the Go caches stay where `go env` puts them).
set -euo pipefail

target="${OPENKRUISE_E2E_TARGET:-realcluster}"
if [[ $target == playground ]]; then
	unset KRUISE_E2E_KUBECONFIG
else
	: "${KUBECONFIG:?set KUBECONFIG, e.g. eval \"\$(e2e/realcluster/up.sh start DIR)\", or OPENKRUISE_E2E_TARGET=playground}"
	export KRUISE_E2E_KUBECONFIG="$KUBECONFIG"
fi
[[ $# -eq 1 ]] || {
	echo "usage: $0 FOCUS (a regular expression over spec names)" >&2
	exit 2
}
focus=$1
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${OPENKRUISE_E2E_BIN:-$HOME/.cache/kruise-openkruise-e2e/openkruise-e2e.test}"
if [[ ! -x $bin ]]; then
	(cd "$script_dir" && go test -c -o "$bin" github.com/openkruise/kruise/test/e2e)
fi

# The feature gates OpenKruise's e2e job starts kruise-manager with (its
# config/manager/manager.yaml), which its specs assume (e.g. PreparingUpdateAsUpdate).
export FEATURE_GATES="${FEATURE_GATES:-AllAlpha=true,AllBeta=true,EnableExternalCerts=false,TemplateNoDefaults=false}"
# shellcheck source=testkit/scenario-lib.sh
source "$script_dir/../../testkit/scenario-lib.sh"
scenario_init
# Node agents too, as OpenKruise's install runs kruise-daemon on every node: on the real
# node's containerd, or (`--cri-dir`) on the fake CRI runtime each simulated node serves.
# The StorageClasses OpenKruise's e2e cluster (kind) has and its specs name: `standard`, the
# default, and the two the Advanced StatefulSet resize specs look up; provisioned by the
# controller manager's host-path provisioner on a real node, by `kruise-sim nodes`
# otherwise (which binds claims at once and resizes none).
if [[ -n ${OPENKRUISE_E2E_REAL_NODE:-} ]]; then
  node_env="$OPENKRUISE_E2E_REAL_NODE/node/env"
  [[ -f $node_env ]] || { echo "no $node_env: start it with up.sh start DIR --real-node" >&2; exit 2; }
  start_cluster kruise-playground --nodes 0 \
    --agent-node "$(sed -n 's/^NODE=//p' "$node_env")=$(sed -n 's/^CRI_SOCK=//p' "$node_env")"
  provisioner=kubernetes.io/host-path
else
  start_cluster kruise-playground --cri-dir "$WORK/cri"
  provisioner=sim.kruise.io/provisioner
fi
for class in standard:true:false allow-volume-expansion:false:true disallow-volume-expansion:false:false; do
  IFS=: read -r name default expandable <<<"$class"
  "$KUBECTL" get storageclass "$name" >/dev/null 2>&1 || "$KUBECTL" apply -f - >/dev/null <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $name
  annotations: {storageclass.kubernetes.io/is-default-class: "$default"}
provisioner: $provisioner
allowVolumeExpansion: $expandable
reclaimPolicy: Delete
volumeBindingMode: Immediate
EOF
done
# Every node has its NodeImage before the specs start, as on a cluster installed a while
# ago: the image specs count NodeImages against nodes, and kruise-imagepull (like
# OpenKruise) creates a node's NodeImage only once the node has been Ready for
# --nodeimage-creation-delay (30 s).
every_node_has_its_nodeimage() {
  local nodes images
  nodes=$("$KUBECTL" get nodes -o name | wc -l)
  images=$("$KUBECTL" get nodeimages -o name -l '!apps.kruise.io/fake-nodeimage' | wc -l)
  [[ $nodes -gt 0 && $images -eq $nodes ]]
}
wait_for 120 "a NodeImage for every node" every_node_has_its_nodeimage
# The suite makes a namespace per spec; its kubeconfig is the scenario's. The whole
# output goes to OPENKRUISE_E2E_LOG (default: a new file under /tmp); the summary and
# the failed specs are printed.
log="${OPENKRUISE_E2E_LOG:-$(mktemp -t openkruise-e2e.XXXXXX)}"
skip=()
[[ -z ${OPENKRUISE_E2E_SKIP:-} ]] || skip=(-ginkgo.skip="$OPENKRUISE_E2E_SKIP")
"$bin" -test.timeout 60m -ginkgo.focus="$focus" "${skip[@]}" -ginkgo.noColor -ginkgo.v >"$log" 2>&1 || true
grep -E '^(\[Fail\]|Ran |SUCCESS!|FAIL!)' "$log" || true
# Each failed spec's own report (ginkgo's block from "• Failure" to the next rule: the
# step, the assertion's message and where it failed), so a CI log says why without the file.
awk '/^• (Failure|Panic)/ {show = 1; lines = 0} show && lines++ < 80 {print} /^-----+$/ {show = 0}' "$log"
echo "full output: $log"
grep -q '^SUCCESS!' "$log"
