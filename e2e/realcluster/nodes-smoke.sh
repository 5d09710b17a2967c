#!/usr/bin/env bash
# Simulated nodes against a real control plane: starts `kruise-sim nodes` against
# KUBECONFIG (a cluster from up.sh), then checks with kubectl that the real
# scheduler and controllers work with them: the nodes are Ready and untainted, a
# Deployment's pods become Ready on them, a container image change restarts the
# container in place (same uid, restartCount 1), a Job completes, a DaemonSet
# runs a pod on each node, a deleted pod goes away. Removes its namespace and Node objects at the end, so later suites
# see no nodes without a kubelet. Prints one line per check, then
# `N passed, M failed`; exits non-zero if any check failed.
#
# KRUISE_SIM: the kruise-sim binary (default: KRUISE_BIN_DIR/kruise-sim, else
# built with cargo). KUBECTL
# (default kubectl). SMOKE_TIMEOUT: seconds per check (default 60).
set -uo pipefail

: "${KUBECONFIG:?set KUBECONFIG, e.g. eval \"\$(up.sh start DIR)\"}"
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$script_dir/../.." && pwd)"
timeout_seconds="${SMOKE_TIMEOUT:-60}"
kubectl="${KUBECTL:-kubectl}"
namespace="nodes-smoke-$(date +%s)-$$"
prefix="smoke-node"
# shellcheck source=e2e/realcluster/smoke-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/smoke-lib.sh"

k() { "$kubectl" --request-timeout=10s "$@"; }
kn() { k -n "$namespace" "$@"; }

if [[ -z ${KRUISE_SIM:-} && -n ${KRUISE_BIN_DIR:-} ]]; then
	KRUISE_SIM="$KRUISE_BIN_DIR/kruise-sim"
elif [[ -z ${KRUISE_SIM:-} ]]; then
	(cd "$root" && cargo build -q -p kruise-sim --bin kruise-sim) || exit 1
	KRUISE_SIM="${CARGO_TARGET_DIR:-$root/target}/debug/kruise-sim"
fi

work=$(mktemp -d)
nodes_pid=
cleanup() {
	# The namespace goes first, while the kubelet still finishes its pods' deletions.
	k delete namespace "$namespace" --timeout=60s >/dev/null 2>&1
	[[ -n $nodes_pid ]] && kill "$nodes_pid" 2>/dev/null && wait "$nodes_pid" 2>/dev/null
	k delete node "$prefix-0" "$prefix-1" --wait=false >/dev/null 2>&1
	if ((failed > 0)); then
		echo "--- last lines of kruise-sim nodes' log" >&2
		tail -n 30 "$work/nodes.log" >&2
	fi
	rm -rf "$work"
}
trap cleanup EXIT

"$KRUISE_SIM" nodes --kubeconfig "$KUBECONFIG" --nodes 2 --node-prefix "$prefix" \
	>"$work/nodes.log" 2>&1 &
nodes_pid=$!
eventually "kruise-sim nodes registers $prefix-0 and $prefix-1" \
	grep -q 'kruise-sim nodes: 2 Ready' "$work/nodes.log"

node_ready_untainted() {
	equals "True,True,|" k get nodes "$prefix-0" "$prefix-1" -o \
		jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status},{end}|{.items[*].spec.taints[*].key}'
}
eventually "both nodes Ready, without the not-ready taint" node_ready_untainted
eventually "both nodes hold a Lease in kube-node-lease" \
	equals "$prefix-0 $prefix-1" k -n kube-node-lease get leases "$prefix-0" "$prefix-1" \
	-o jsonpath='{.items[*].spec.holderIdentity}'

k create namespace "$namespace" >/dev/null
eventually "namespace has its default ServiceAccount" kn get serviceaccount default

kn create deployment web --image=nginx:1.25 --replicas=3 >/dev/null
ready_on_our_nodes() {
	local out
	out=$(kn get pods -l app=web -o \
		jsonpath='{range .items[*]}{.spec.nodeName} {.status.phase} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}') || return 1
	echo "$out"
	[[ $(grep -cE "^$prefix-[01] Running True$" <<<"$out") == 3 && $(wc -l <<<"$out") == 3 ]]
}
eventually "a Deployment's 3 pods are scheduled to the simulated nodes and Ready" ready_on_our_nodes
eventually "the Deployment reports 3 available replicas" \
	equals 3 kn get deployment web -o jsonpath='{.status.availableReplicas}'

pod=$(kn get pods -l app=web -o jsonpath='{.items[0].metadata.name}')
uid=$(kn get pod "$pod" -o jsonpath='{.metadata.uid}')
ip=$(kn get pod "$pod" -o jsonpath='{.status.podIP}')
kn set image "pod/$pod" nginx=nginx:1.26 >/dev/null
eventually "an image change restarts the container in place (same uid and IP, restartCount 1, Ready)" \
	equals "$uid $ip nginx:1.26 1 True" kn get pod "$pod" -o \
	jsonpath='{.metadata.uid} {.status.podIP} {.status.containerStatuses[0].image} {.status.containerStatuses[0].restartCount} {.status.conditions[?(@.type=="Ready")].status}'

kn apply -f - >/dev/null <<'YAML'
apiVersion: batch/v1
kind: Job
metadata: {name: once}
spec:
  template:
    metadata:
      annotations: {sim.kruise.io/exit-after: 1s}
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox, command: ["true"]}]
YAML
eventually "a Job's pod exits 0 (sim.kruise.io/exit-after) and the Job completes" \
	equals "True" kn get job once -o jsonpath='{.status.conditions[?(@.type=="Complete")].status}'
eventually "the Job's pod is Succeeded" \
	equals "Succeeded" kn get pods -l job-name=once -o jsonpath='{.items[0].status.phase}'

kn apply -f - >/dev/null <<'YAML'
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      containers: [{name: agent, image: busybox}]
YAML
daemon_ready_on_our_nodes() {
	local out
	out=$(kn get pods -l app=agent -o \
		jsonpath='{range .items[*]}{.spec.nodeName} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | sort) || return 1
	echo "$out"
	[[ $(grep -cE "^$prefix-[01] True$" <<<"$out") == 2 ]]
}
eventually "a DaemonSet runs a Ready pod on each simulated node" daemon_ready_on_our_nodes

kn delete pod "$pod" --wait=false >/dev/null
eventually "a deleted pod goes away (the kubelet's final delete)" \
	equals "" kn get pods --field-selector "metadata.name=$pod" -o name
eventually "the Deployment replaces it: 3 Ready pods again" ready_on_our_nodes
eventually "the kubelet recorded a Killing event for it" \
	equals "Killing" kn get events --field-selector "involvedObject.uid=$uid,reason=Killing" \
	-o jsonpath='{.items[0].reason}'

echo "$passed passed, $failed failed"
((failed == 0))
