#!/usr/bin/env bash
# kubectl end-to-end check of kruise-sim: starts `kruise-sim up` on a free port and
# drives it with a real kubectl, asserting every outcome.
#
#   KUBECTL=kubectl.1.27 sim/tests/kubectl-e2e.sh
#   KRUISE_BIN_DIR=.../debug sim/tests/kubectl-e2e.sh   (skips the cargo build)
set -euo pipefail

# shellcheck source=testkit/scenario-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../testkit/scenario-lib.sh"
scenario_init

start_cluster kruise-sim
assert_contains "$(cat "$CLUSTER_LOG")" "export KUBECONFIG=$KUBECONFIG; kubectl get ns" "up prints the kubectl command"
pass "kruise-sim up ($(grep -o 'http://[0-9.:]*' "$CLUSTER_LOG"))"

out="$("$KUBECTL" get ns)"
assert_contains "$out" "default" "get ns lists default"
assert_contains "$out" "kube-system" "get ns lists kube-system"
pass "kubectl get ns"

# Imperative creates (kubectl >= 1.32 sends these as protobuf).
out="$("$KUBECTL" create namespace e2e)"
assert_contains "$out" "namespace/e2e created" "create namespace"
out="$("$KUBECTL" -n e2e create configmap settings --from-literal=mode=fast)"
assert_contains "$out" "configmap/settings created" "create configmap"
assert_eq "$("$KUBECTL" -n e2e get configmap settings -o jsonpath='{.data.mode}')" "fast" "configmap data"
pass "kubectl create namespace / configmap"

cat >"$WORK/crd.yaml" <<'YAML'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: clonesets.apps.kruise.io
spec:
  group: apps.kruise.io
  names: {kind: CloneSet, listKind: CloneSetList, plural: clonesets, singular: cloneset, shortNames: [clone], categories: [all, kruise]}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.labelSelector}
    additionalPrinterColumns:
    - {name: DESIRED, type: integer, jsonPath: .spec.replicas, description: The desired number of pods.}
    - {name: UPDATED, type: integer, jsonPath: .status.updatedReplicas}
    - {name: UPDATED_READY, type: integer, jsonPath: .status.updatedReadyReplicas}
    - {name: READY, type: integer, jsonPath: .status.readyReplicas}
    - {name: TOTAL, type: integer, jsonPath: .status.replicas}
    - {name: AGE, type: date, jsonPath: .metadata.creationTimestamp}
YAML
cat >"$WORK/cloneset.yaml" <<'YAML'
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: demo
  labels: {app: demo}
spec:
  replicas: 3
  selector:
    matchLabels: {app: demo}
  template:
    metadata:
      labels: {app: demo}
    spec:
      containers:
      - name: main
        image: nginx:1.25
YAML
cat >"$WORK/deployment.yaml" <<'YAML'
apiVersion: apps/v1
kind: Deployment
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
      - name: web
        image: nginx:1.25
        env: [{name: A, value: "1"}]
      - name: sidecar
        image: busybox:1.36
YAML

out="$("$KUBECTL" apply -f "$WORK/crd.yaml")"
assert_contains "$out" "customresourcedefinition.apiextensions.k8s.io/clonesets.apps.kruise.io created" "apply CRD"
out="$("$KUBECTL" wait --for=condition=Established --timeout=10s crd/clonesets.apps.kruise.io)"
assert_contains "$out" "condition met" "CRD established"
out="$("$KUBECTL" apply -f "$WORK/cloneset.yaml")"
assert_contains "$out" "cloneset.apps.kruise.io/demo created" "apply CloneSet"
pass "apply a CRD and an object"

out="$("$KUBECTL" get cloneset demo)"
header="$(head -1 <<<"$out" | tr -s ' ')"
assert_eq "$header" "NAME DESIRED UPDATED UPDATED_READY READY TOTAL AGE" "printer column header"
row="$(sed -n 2p <<<"$out" | tr -s ' ')"
[[ "$row" =~ ^demo\ 3\ +[0-9]+s$ ]] || fail "printer column row: got '$row'"
out="$("$KUBECTL" get clone)"
assert_contains "$out" "demo" "short name"
out="$("$KUBECTL" get kruise)"
assert_contains "$out" "demo" "category"
pass "get with printer columns, short name and category"

# apply twice: the second run is a no-op that leaves resourceVersion alone.
rv1="$("$KUBECTL" get cloneset demo -o jsonpath='{.metadata.resourceVersion}')"
out="$("$KUBECTL" apply -f "$WORK/cloneset.yaml")"
assert_contains "$out" "cloneset.apps.kruise.io/demo unchanged" "second apply"
rv2="$("$KUBECTL" get cloneset demo -o jsonpath='{.metadata.resourceVersion}')"
assert_eq "$rv2" "$rv1" "resourceVersion after an idempotent apply"
pass "kubectl apply twice is idempotent"

# get -w sees a change.
"$KUBECTL" get clonesets -w >"$WORK/watch.out" 2>&1 &
WATCH_PID=$!
PIDS+=("$WATCH_PID")
wait_for 10 "get -w to print the initial row" grep -q '^demo' "$WORK/watch.out"
"$KUBECTL" patch cloneset demo --type=merge -p '{"spec":{"replicas":7}}' >/dev/null
wait_for 10 "get -w to print the change" grep -Eq '^demo +7 ' "$WORK/watch.out"
kill "$WATCH_PID"; wait "$WATCH_PID" 2>/dev/null || true
pass "get -w sees a change"

# patch: merge, JSON and strategic.
out="$("$KUBECTL" patch cloneset demo --type=merge -p '{"spec":{"replicas":4}}')"
assert_contains "$out" "cloneset.apps.kruise.io/demo patched" "merge patch"
assert_eq "$("$KUBECTL" get cloneset demo -o jsonpath='{.spec.replicas}')" "4" "replicas after merge patch"
out="$("$KUBECTL" patch cloneset demo --type=json -p '[{"op":"replace","path":"/spec/replicas","value":5}]')"
assert_contains "$out" "patched" "json patch"
assert_eq "$("$KUBECTL" get cloneset demo -o jsonpath='{.spec.replicas}')" "5" "replicas after json patch"
if out="$("$KUBECTL" patch cloneset demo --type=strategic -p '{"spec":{"replicas":9}}' 2>&1)"; then
  fail "strategic merge patch on a custom resource must fail, got: $out"
fi
assert_contains "$out" "application/strategic-merge-patch+json is not supported" "SMP on a CR is rejected"
out="$("$KUBECTL" apply -f "$WORK/deployment.yaml")"
assert_contains "$out" "deployment.apps/web created" "apply deployment"
"$KUBECTL" patch deployment web --type=strategic \
  -p '{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.26","env":[{"name":"B","value":"2"}]}]}}}}' >/dev/null
images="$("$KUBECTL" get deployment web -o jsonpath='{range .spec.template.spec.containers[*]}{.name}={.image} {end}')"
assert_eq "$images" "web=nginx:1.26 sidecar=busybox:1.36 " "strategic merge by container name"
envs="$("$KUBECTL" get deployment web -o jsonpath='{.spec.template.spec.containers[0].env[*].name}')"
assert_eq "$envs" "A B" "strategic merge of env by name"
pass "patch: merge, json and strategic"

# Server-side field validation: kubectl sends fieldValidation=Strict by default, so a
# typo'd field is refused; --validate=warn stores the object and prints a warning.
cat >"$WORK/typo.yaml" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata:
  name: typo
dataa:
  mode: fast
YAML
if out="$("$KUBECTL" apply -f "$WORK/typo.yaml" 2>&1)"; then
  fail "apply of a manifest with an unknown field must fail, got: $out"
fi
assert_contains "$out" 'strict decoding error: unknown field "dataa"' "strict field validation"
out="$("$KUBECTL" apply --validate=warn -f "$WORK/typo.yaml" 2>&1)"
assert_contains "$out" 'Warning: unknown field "dataa"' "warn field validation"
assert_contains "$out" "configmap/typo created" "warned apply stores the object"
pass "kubectl apply: unknown fields refused (strict) or warned about"

# scale through the CRD's scale subresource.
out="$("$KUBECTL" scale cloneset demo --replicas=6)"
assert_contains "$out" "cloneset.apps.kruise.io/demo scaled" "kubectl scale"
assert_eq "$("$KUBECTL" get cloneset demo -o jsonpath='{.spec.replicas}')" "6" "replicas after scale"
assert_eq "$("$KUBECTL" get --raw /apis/apps.kruise.io/v1alpha1/namespaces/default/clonesets/demo/scale | grep -o '"replicas":6' | sed -n 1p)" '"replicas":6' "scale subresource"
pass "scale on a CRD with a scale subresource"

# describe shows events recorded for the object.
uid="$("$KUBECTL" get cloneset demo -o jsonpath='{.metadata.uid}')"
cat >"$WORK/event.yaml" <<YAML
apiVersion: v1
kind: Event
metadata:
  name: demo.e2e
type: Normal
reason: SuccessfulCreate
message: create Pod demo-abcde in cloneset demo success
involvedObject:
  apiVersion: apps.kruise.io/v1alpha1
  kind: CloneSet
  name: demo
  namespace: default
  uid: $uid
source:
  component: cloneset-controller
firstTimestamp: "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
lastTimestamp: "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
count: 1
YAML
"$KUBECTL" create -f "$WORK/event.yaml" >/dev/null
out="$("$KUBECTL" describe cloneset demo)"
assert_contains "$out" "Events:" "describe has an Events section"
assert_contains "$out" "SuccessfulCreate" "describe shows the event reason"
assert_contains "$out" "create Pod demo-abcde in cloneset demo success" "describe shows the event message"
pass "describe shows events"

# delete of a missing object.
if out="$("$KUBECTL" delete cloneset nothere 2>&1)"; then
  fail "deleting a missing object must fail, got: $out"
fi
assert_contains "$out" 'Error from server (NotFound): clonesets.apps.kruise.io "nothere" not found' "delete missing"
out="$("$KUBECTL" delete cloneset demo)"
assert_contains "$out" 'cloneset.apps.kruise.io "demo" deleted' "delete existing"
pass "delete (missing object is NotFound)"

# The cluster part (`up` defaults to 3 nodes with a scheduler and kubelet).
assert_eq "$("$KUBECTL" get nodes -o name | wc -l | tr -d ' ')" "3" "kubectl get nodes lists 3 nodes"
out="$("$KUBECTL" get nodes)"
assert_contains "$out" "sim-node-0" "get nodes shows sim-node-0"
assert_contains "$out" "Ready" "get nodes shows Ready"
pass "get nodes"
cat >"$WORK/pod.yaml" <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: e2e-web
spec:
  containers:
  - name: a
    image: nginx:1.25
  - name: b
    image: redis:7
YAML
"$KUBECTL" create -f "$WORK/pod.yaml" >/dev/null
"$KUBECTL" wait --for=condition=Ready pod/e2e-web --timeout=30s >/dev/null || fail "pod e2e-web never became Ready"
b_id="$("$KUBECTL" get pod e2e-web -o jsonpath='{.status.containerStatuses[1].containerID}')"
"$KUBECTL" patch pod e2e-web -p '{"spec":{"containers":[{"name":"a","image":"nginx:1.26"}]}}' >/dev/null
wait_for 30 "container a to restart" bash -c "[[ \"\$('$KUBECTL' get pod e2e-web -o jsonpath='{.status.containerStatuses[0].restartCount}/{.status.containerStatuses[0].ready}')\" == 1/true ]]"
assert_eq "$("$KUBECTL" get pod e2e-web -o jsonpath='{.status.containerStatuses[1].restartCount}')" "0" "other container not restarted"
assert_eq "$("$KUBECTL" get pod e2e-web -o jsonpath='{.status.containerStatuses[1].containerID}')" "$b_id" "other container keeps its containerID"
pass "pod Ready (kubectl wait) and an image patch restarts only that container"
"$KUBECTL" delete pod e2e-web --timeout=30s >/dev/null || fail "graceful pod delete did not complete"
pass "graceful pod delete completes"

# Jobs run by the simulated Job controller; delete --cascade=orphan keeps the pods,
# --cascade=foreground removes them before the Job.
for j in keep drop; do
  cat <<YAML | "$KUBECTL" create -f - >/dev/null
apiVersion: batch/v1
kind: Job
metadata:
  name: e2e-$j
spec:
  parallelism: 2
  completions: 2
  template:
    metadata:
      annotations:
        sim.kruise.io/exit-after: 10m
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox:1.36
YAML
done
wait_for 30 "both Jobs to run 2 pods" bash -c "[[ \"\$('$KUBECTL' get pods -l job-name=e2e-keep --field-selector=status.phase=Running -o name | wc -l | tr -d ' ')\$('$KUBECTL' get pods -l job-name=e2e-drop --field-selector=status.phase=Running -o name | wc -l | tr -d ' ')\" == 22 ]]"
assert_eq "$("$KUBECTL" get job e2e-keep -o jsonpath='{.status.active}')" "2" "job status.active"
pass "a Job runs its pods (Job controller)"
"$KUBECTL" delete job e2e-keep --cascade=orphan >/dev/null
assert_eq "$("$KUBECTL" get pods -l job-name=e2e-keep -o name | wc -l | tr -d ' ')" "2" "orphaned pods stay"
owners="$("$KUBECTL" get pods -l job-name=e2e-keep -o jsonpath='{.items[*].metadata.ownerReferences}')"
assert_eq "$owners" "" "orphaned pods lose their ownerReferences"
pass "delete --cascade=orphan leaves the pods"
"$KUBECTL" delete job e2e-drop --cascade=foreground --timeout=30s >/dev/null || fail "foreground delete did not complete"
assert_eq "$("$KUBECTL" get pods -l job-name=e2e-drop -o name | wc -l | tr -d ' ')" "0" "foreground deletion removed the pods"
assert_eq "$("$KUBECTL" get job e2e-drop --ignore-not-found -o name)" "" "the Job is gone after its pods"
pass "delete --cascade=foreground removes the pods, then the Job"

# Deployments run by the simulated Deployment and ReplicaSet controllers: the flows a user
# runs with kubectl rollout.
"$KUBECTL" create deployment e2e-app --image=nginx:1.25 --replicas=3 >/dev/null
"$KUBECTL" rollout status deployment/e2e-app --timeout=60s >/dev/null || fail "rollout status of a new Deployment"
assert_eq "$("$KUBECTL" get deployment e2e-app -o jsonpath='{.status.readyReplicas}/{.status.updatedReplicas}')" "3/3" "deployment ready and updated"
"$KUBECTL" set image deployment/e2e-app nginx=nginx:1.26 >/dev/null
"$KUBECTL" rollout status deployment/e2e-app --timeout=60s >/dev/null || fail "rollout status after set image"
images="$("$KUBECTL" get pods -l app=e2e-app -o jsonpath='{range .items[*]}{.spec.containers[0].image} {end}')"
assert_eq "$images" "nginx:1.26 nginx:1.26 nginx:1.26 " "every pod on the new image"
history="$("$KUBECTL" rollout history deployment/e2e-app)"
assert_contains "$history" "2 " "rollout history lists revision 2"
"$KUBECTL" rollout undo deployment/e2e-app >/dev/null
"$KUBECTL" rollout status deployment/e2e-app --timeout=60s >/dev/null || fail "rollout status after undo"
assert_eq "$("$KUBECTL" get deployment e2e-app -o jsonpath='{.spec.template.spec.containers[0].image}')" "nginx:1.25" "undo restores the template"
assert_eq "$("$KUBECTL" get deployment e2e-app -o jsonpath='{.metadata.annotations.deployment\.kubernetes\.io/revision}')" "3" "undo is revision 3"
"$KUBECTL" scale deployment e2e-app --replicas=1 >/dev/null
wait_for 30 "one pod left" bash -c "[[ \"\$('$KUBECTL' get pods -l app=e2e-app --field-selector=status.phase=Running -o name | wc -l | tr -d ' ')\" == 1 ]]"
assert_eq "$("$KUBECTL" get rs -l app=e2e-app -o name | wc -l | tr -d ' ')" "2" "two ReplicaSets, one per template"
pass "kubectl create deployment / rollout status / set image / rollout undo / scale"

echo "kubectl e2e: all checks passed ($("$KUBECTL" version --client 2>/dev/null | sed -n 1p))"
