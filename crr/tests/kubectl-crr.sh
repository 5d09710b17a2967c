#!/usr/bin/env bash
# ContainerRecreateRequest with a real kubectl: `kruise-playground up` with CloneSet,
# kruise-webhook (its pod chain runs the crr family's launch-priority step) and
# kruise-crr in-process, one kruise-crr agent per simulated node on that node's fake CRI
# socket (its kubelet restarts a stopped container with a new containerID and
# restartCount+1). `kubectl create -f crr.yaml` goes through kruise-crr's webhook, which
# fills the request from the pod.
#
#   KRUISE_BIN_DIR=.../debug crr/tests/kubectl-crr.sh
set -euo pipefail

# shellcheck source=testkit/scenario-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../testkit/scenario-lib.sh"
scenario_init

mkdir -p "$WORK/cri"
start_cluster kruise-playground --nodes 2 --cri-dir "$WORK/cri" --controllers cloneset,crr,webhook
pass "kruise-playground up with CloneSet, kruise-crr (an agent per node) and kruise-webhook"

"$KUBECTL" apply -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1beta1
kind: CloneSet
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: nginx:1.27
        lifecycle:
          preStop:
            exec:
              command: ["sh", "-c", "echo bye"]
      - name: sidecar
        image: busybox:1.36
YAML
wait_for 60 "the CloneSet's pod ready" pods_ready app=web 1
pod=$("$KUBECTL" get pods -l app=web -o jsonpath='{.items[0].metadata.name}')
uid=$("$KUBECTL" get pod "$pod" -o jsonpath='{.metadata.uid}')
restarts() { "$KUBECTL" get pod "$pod" -o jsonpath="{.status.containerStatuses[?(@.name==\"$1\")].restartCount}"; }
app_before=$(restarts app)
sidecar_before=$(restarts sidecar)

cat >"$WORK/crr.yaml" <<YAML
apiVersion: apps.kruise.io/v1alpha1
kind: ContainerRecreateRequest
metadata:
  name: recreate-web
spec:
  podName: $pod
  containers:
  - name: app
  - name: sidecar
  strategy:
    orderedRecreate: true
YAML
"$KUBECTL" create -f "$WORK/crr.yaml" >/dev/null
field() { "$KUBECTL" get crr recreate-web -o jsonpath="{$1}" 2>/dev/null; }
assert_eq "$(field '.metadata.labels.crr\.apps\.kruise\.io/pod-uid')" "$uid" "the webhook's pod-uid label"
assert_contains "$(field '.spec.containers[0].statusContext.containerID')" "containerd://" "the webhook's statusContext"
assert_eq "$(field '.spec.strategy.failurePolicy')" "Fail" "the defaulted failurePolicy"
pass "kubectl create -f crr.yaml: the webhook filled the request from the pod"

completed() { [[ "$(field .status.phase)" == Completed ]]; }
wait_for 90 "the request completed" completed
assert_eq "$(field '.status.containerRecreateStates[*].phase')" "Succeeded Succeeded" "container phases"
assert_eq "$(restarts app)" "$((app_before + 1))" "app restartCount"
assert_eq "$(restarts sidecar)" "$((sidecar_before + 1))" "sidecar restartCount"
assert_eq "$("$KUBECTL" get pod "$pod" -o jsonpath='{.metadata.uid}')" "$uid" "pod uid"
pass "both containers recreated in place: restartCount +1, pod name and uid unchanged"

table=$("$KUBECTL" get crr recreate-web)
assert_contains "$(head -1 <<<"$table" | tr -s ' ')" "NAME PHASE POD NODE AGE" "kubectl get crr columns"
node=$("$KUBECTL" get pod "$pod" -o jsonpath='{.spec.nodeName}')
assert_contains "$(tail -1 <<<"$table" | tr -s ' ')" "recreate-web Completed $pod $node" "kubectl get crr row"
active=$("$KUBECTL" get crr recreate-web -o jsonpath='{.metadata.labels}')
[[ "$active" != *crr.apps.kruise.io/active* ]] || fail "the active label stays after completion: $active"
pass "kubectl get crr shows OpenKruise's columns; a finished request is no longer active"

# Container launch priority: kruise-webhook's pod chain (the crr step) adds the barrier env,
# kruise-crr's controller opens the keys as containers become ready, and the kubelet holds
# each container until its key exists. A ready delay of 1 s puts each start in a later
# second than the one before (the status's times have whole seconds).
"$KUBECTL" apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: ordered
  annotations:
    apps.kruise.io/container-launch-priority: Ordered
    sim.kruise.io/ready-delay: 1s
spec:
  containers:
  - {name: first, image: busybox:1.36}
  - {name: second, image: busybox:1.36}
  - {name: third, image: busybox:1.36}
YAML
barrier_key() { "$KUBECTL" get pod ordered -o jsonpath="{.spec.containers[?(@.name==\"$1\")].env[?(@.name==\"KRUISE_CONTAINER_BARRIER\")].valueFrom.configMapKeyRef.key}"; }
assert_eq "$(barrier_key first) $(barrier_key second) $(barrier_key third)" "p_0 p_-1 p_-2" "barrier keys from the webhook"
ordered_ready() { [[ "$("$KUBECTL" get pod ordered -o jsonpath='{.status.containerStatuses[*].ready}')" == "true true true" ]]; }
wait_for 60 "the ordered pod's containers ready" ordered_ready
started_at() { "$KUBECTL" get pod ordered -o jsonpath="{.status.containerStatuses[?(@.name==\"$1\")].state.running.startedAt}"; }
first=$(started_at first) second=$(started_at second) third=$(started_at third)
[[ "$first" < "$second" && "$second" < "$third" ]] || fail "containers did not start in order: $first $second $third"
assert_eq "$("$KUBECTL" get configmap ordered-barrier -o jsonpath='{.data}')" '{"p_-1":"true","p_-2":"true","p_0":"true"}' "the barrier's keys"
completed_annotation() { [[ "$("$KUBECTL" get pod ordered -o jsonpath='{.metadata.annotations.apps\.kruise\.io/container-launch-priority-completed}')" == true ]]; }
wait_for 30 "the launch-priority-completed annotation" completed_annotation
pass "a pod with container-launch-priority: Ordered starts its containers in order"
