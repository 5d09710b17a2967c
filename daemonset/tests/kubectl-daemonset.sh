#!/usr/bin/env bash
# The Advanced DaemonSet walkthrough with a real kubectl: kruise-sim (5 nodes, kubelet)
# plus the kruise-daemonset binary, its CRD and webhooks registered as a user would.
# Placement by nodeSelector as nodes get a label, a rolling update bounded by
# rollingUpdate.selector, then by partition, a maxSurge update, cordon and taints, and
# OpenKruise's printer columns, and an in-place update keeping names and uids.
#
#   KRUISE_BIN_DIR=.../debug daemonset/tests/kubectl-daemonset.sh
set -euo pipefail

# shellcheck source=testkit/scenario-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../testkit/scenario-lib.sh"
scenario_init

start_cluster kruise-sim --nodes 5
start_family daemonset
pass "kruise-daemonset running against kruise-sim (webhooks registered)"

mapfile -t NODES < <("$KUBECTL" get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort)
[[ "${#NODES[@]}" == 5 ]] || fail "expected 5 nodes, got ${#NODES[@]}"

"$KUBECTL" apply -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1alpha1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      nodeSelector: {color: blue}
      containers:
      - name: main
        image: nginx:1.25
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: "100%"
YAML
# node_images: "node=image" of the live pods, sorted.
node_images() {
  "$KUBECTL" get pods -l app=agent -o json \
    | python3 -c 'import json,sys; print(" ".join(sorted(p["spec"].get("nodeName","?")+"="+p["spec"]["containers"][0]["image"] for p in json.load(sys.stdin)["items"] if not p["metadata"].get("deletionTimestamp"))))'
}
# expect_images WANT: node_images is WANT and every pod is Ready.
expect_images() { [[ "$(node_images)" == "$1" ]] && pods_ready app=agent "$(wc -w <<<"$1")"; }
wait_for 30 "status observed" status_observed ads agent
assert_eq "$(node_images)" "" "no pod before a node is blue"

"$KUBECTL" label node "${NODES[0]}" "${NODES[1]}" color=blue >/dev/null
wait_for 60 "pods on the two blue nodes" expect_images "${NODES[0]}=nginx:1.25 ${NODES[1]}=nginx:1.25"
"$KUBECTL" label node "${NODES[2]}" "${NODES[3]}" "${NODES[4]}" color=blue >/dev/null
all() { local out=() n; for n in "${NODES[@]}"; do out+=("$n=$1"); done; echo "${out[*]}"; }
wait_for 60 "a pod on every node" expect_images "$(all nginx:1.25)"
pass "nodeSelector color=blue places pods only as nodes get the label"

header="$("$KUBECTL" get ads agent | sed -n 1p)"
for col in NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE AGE; do
  assert_contains "$header" "$col" "kubectl get ads shows $col"
done
assert_contains "$("$KUBECTL" get ads agent -o wide | sed -n 1p)" "IMAGES" "-o wide shows IMAGES"
wait_for 30 "DESIRED 5, AVAILABLE 5" bash -c "[[ \"\$('$KUBECTL' get ads agent --no-headers | awk '{print \$2, \$6}')\" == '5 5' ]]"
pass "kubectl get ads shows OpenKruise's columns"

# rollingUpdate.selector: only the canary node is updated.
"$KUBECTL" label node "${NODES[1]}" canary=yes >/dev/null
"$KUBECTL" patch ads agent --type merge -p '{"spec":{"updateStrategy":{"rollingUpdate":{"selector":{"matchLabels":{"canary":"yes"}}}},
  "template":{"spec":{"containers":[{"name":"main","image":"nginx:1.26"}]}}}}' >/dev/null
want="${NODES[0]}=nginx:1.25 ${NODES[1]}=nginx:1.26 ${NODES[2]}=nginx:1.25 ${NODES[3]}=nginx:1.25 ${NODES[4]}=nginx:1.25"
wait_for 60 "only the canary node updated" expect_images "$want"
wait_for 30 "status observed" status_observed ads agent
assert_eq "$(node_images)" "$want" "rollingUpdate.selector updates only matching nodes"
pass "rollingUpdate.selector updates only matching nodes"

# partition 2: the selector goes, two nodes stay old.
"$KUBECTL" patch ads agent --type json -p '[{"op":"remove","path":"/spec/updateStrategy/rollingUpdate/selector"},
  {"op":"add","path":"/spec/updateStrategy/rollingUpdate/partition","value":2}]' >/dev/null
old_count() { node_images | tr ' ' '\n' | grep -c '=nginx:1.25$' || true; }
partitioned() { [[ "$(old_count)" == 2 ]] && pods_ready app=agent 5; }
wait_for 60 "three nodes updated, two kept old" partitioned
wait_for 30 "status observed" status_observed ads agent
assert_eq "$(old_count)" "2" "partition: 2 keeps 2 nodes old"
pass "partition: 2 keeps 2 nodes old"

# maxSurge 1: each node gets its new pod before the old one goes.
"$KUBECTL" patch ads agent --type merge -p '{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0,"maxUnavailable":0,"maxSurge":1}},
  "template":{"spec":{"containers":[{"name":"main","image":"nginx:1.27"}]}}}}' >/dev/null
# surge_step: fails the scenario if a node is ever left without a pod; true once done.
surge_step() {
  local pods n
  pods="$("$KUBECTL" get pods -l app=agent -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}')"
  for n in "${NODES[@]}"; do grep -qx "$n" <<<"$pods" || echo "$n" >>"$WORK/surge-gap"; done
  expect_images "$(all nginx:1.27)"
}
wait_for 120 "every node on nginx:1.27, none ever without a pod" surge_step
[[ ! -s "$WORK/surge-gap" ]] || fail "nodes left without a pod during the surge: $(sort -u "$WORK/surge-gap" | tr '\n' ' ')"
pass "maxSurge 1 replaces every pod, creating before deleting"

# Cordon and taints: unschedulable and NoSchedule keep the pod, NoExecute removes it.
"$KUBECTL" cordon "${NODES[4]}" >/dev/null
"$KUBECTL" taint node "${NODES[3]}" maintenance=yes:NoSchedule >/dev/null
wait_for 30 "status: one node no longer desired" bash -c "[[ \"\$('$KUBECTL' get ads agent -o jsonpath='{.status.desiredNumberScheduled}/{.status.numberMisscheduled}')\" == '4/1' ]]"
assert_eq "$(node_images)" "$(all nginx:1.27)" "cordoned and NoSchedule-tainted nodes keep their pods"
"$KUBECTL" taint node "${NODES[3]}" maintenance=yes:NoExecute >/dev/null
want="${NODES[0]}=nginx:1.27 ${NODES[1]}=nginx:1.27 ${NODES[2]}=nginx:1.27 ${NODES[4]}=nginx:1.27"
wait_for 60 "the NoExecute node's pod removed" expect_images "$want"
pass "a tainted node loses its pod only for NoExecute; a cordoned node keeps it"

# InPlaceIfPossible: an image change restarts the containers of the same pods.
names_uids() {
  "$KUBECTL" get pods -l app=agent -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.uid}{"\n"}{end}' | sort | tr '\n' ' '
}
before="$(names_uids)"
"$KUBECTL" patch ads agent --type merge -p '{"spec":{"updateStrategy":{"rollingUpdate":{"rollingUpdateType":"InPlaceIfPossible","maxSurge":0,"maxUnavailable":"100%"}},
  "template":{"spec":{"containers":[{"name":"main","image":"nginx:1.28"}]}}}}' >/dev/null
want="${NODES[0]}=nginx:1.28 ${NODES[1]}=nginx:1.28 ${NODES[2]}=nginx:1.28 ${NODES[4]}=nginx:1.28"
wait_for 60 "every pod on nginx:1.28 and Ready" expect_images "$want"
wait_for 30 "status observed" status_observed ads agent
assert_eq "$(names_uids)" "$before" "InPlaceIfPossible keeps pod names and uids"
restarts="$("$KUBECTL" get pods -l app=agent -o jsonpath='{range .items[*]}{.status.containerStatuses[0].restartCount}{" "}{end}')"
assert_eq "$restarts" "1 1 1 1 " "each pod restarted once"
pass "InPlaceIfPossible image change keeps names and uids with restartCount 1"
