#!/usr/bin/env bash
# ContainerRecreateRequest with a real kubectl: `kruise-playground up` with CloneSet and
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
start_cluster kruise-playground --nodes 2 --cri-dir "$WORK/cri" --controllers cloneset,crr
pass "kruise-playground up with CloneSet and kruise-crr (an agent per node)"

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
