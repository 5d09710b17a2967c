#!/usr/bin/env bash
# ImagePullJob and NodeImage with a real kubectl: kruise-playground (5 simulated nodes,
# each with a fake CRI socket) running the imagepull family in-process — its controllers,
# its webhooks, and its node agent once per node, pulling through that node's CRI — and the
# CloneSet family, whose in-place rollout pre-downloads its new image.
#
#   KRUISE_BIN_DIR=.../debug imagepull/tests/kubectl-imagepull.sh
set -euo pipefail

# shellcheck source=testkit/scenario-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../testkit/scenario-lib.sh"
scenario_init

mkdir -p "$WORK/cri"
# The CloneSet family beside it, with image pre-download on; its two later images take 10 s
# to pull (well above a rollout's own time on a loaded machine), every other image 50 ms.
SLOW_PULL_MS=10000
export FEATURE_GATES=PreDownloadImageForInPlaceUpdate=true
start_cluster kruise-playground --nodes 5 --cri-dir "$WORK/cri" --controllers imagepull,cloneset \
  --image-pull registry.local/web:v2=10s --image-pull registry.local/web:v3=10s
pass "kruise-playground up with the imagepull and cloneset families and an agent per node"

# One NodeImage per Ready node (after --nodeimage-creation-delay, 30s).
node_images() { [[ "$("$KUBECTL" get nodeimages -o name | wc -l)" -eq "$1" ]]; }
wait_for 90 "five NodeImages" node_images 5
table=$("$KUBECTL" get nodeimages)
assert_contains "$(head -1 <<<"$table" | tr -s ' ')" "NAME DESIRED PULLING SUCCEED FAILED AGE" "kubectl get nodeimage columns"
pass "one NodeImage per node; kubectl get nodeimage shows OpenKruise's columns"

# Three of the five nodes, by label.
for node in sim-node-0 sim-node-2 sim-node-4; do "$KUBECTL" label node "$node" pool=pre >/dev/null; done
mirrored() { [[ "$("$KUBECTL" get nodeimages -l pool=pre -o name | wc -l)" -eq 3 ]]; }
wait_for 30 "node labels mirrored on their NodeImages" mirrored

"$KUBECTL" apply -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1beta1
kind: ImagePullJob
metadata:
  name: warm
spec:
  image: nginx:1.25
  parallelism: 1
  selector:
    matchLabels:
      pool: pre
  completionPolicy:
    type: Always
    ttlSecondsAfterFinished: 10
YAML
field() { "$KUBECTL" get imagepulljob warm -o jsonpath="{$1}" 2>/dev/null; }
completed() { [[ -n "$(field .status.completionTime)" ]]; }
most=0
deadline=$((SECONDS + 120))
until completed; do
  (( SECONDS < deadline )) || fail "ImagePullJob warm did not complete"
  active=$(field .status.active)
  (( ${active:-0} > most )) && most=${active:-0}
  sleep 0.2
done
(( most <= 1 )) || fail "more than one node pulling at once ($most) with parallelism 1"
assert_eq "$(field .status.succeeded)/$(field .status.desired)" "3/3" "succeeded/desired"
assert_eq "$(field .status.message)" "job has completed" "message"
table=$("$KUBECTL" get imagepulljob warm)
assert_contains "$(head -1 <<<"$table" | tr -s ' ')" "NAME TOTAL ACTIVE SUCCEED FAILED AGE" "kubectl get imagepulljob columns"
assert_contains "$(tail -1 <<<"$table" | tr -s ' ')" "warm 3 0 3 0" "kubectl get imagepulljob row"
pass "an ImagePullJob on 3 of 5 nodes by label with parallelism 1 completes with 3 succeeded"

for node in sim-node-0 sim-node-2 sim-node-4; do
  phase=$("$KUBECTL" get nodeimage "$node" -o jsonpath='{.status.imageStatuses.nginx.tags[0].phase}')
  assert_eq "$phase" "Succeeded" "nginx:1.25 on $node"
  id=$("$KUBECTL" get nodeimage "$node" -o jsonpath='{.status.imageStatuses.nginx.tags[0].imageID}')
  assert_contains "$id" "docker.io/library/nginx@sha256:" "imageID on $node"
done
for node in sim-node-1 sim-node-3; do
  assert_eq "$("$KUBECTL" get nodeimage "$node" -o jsonpath='{.spec.images}')" "" "no image on $node"
done
pass "the labelled nodes' NodeImages show the image pulled with its imageID; the others have none"

gone() { ! "$KUBECTL" get imagepulljob warm >/dev/null 2>&1; }
wait_for 60 "ImagePullJob warm deleted by its TTL" gone
untagged() { [[ -z "$("$KUBECTL" get nodeimage sim-node-0 -o jsonpath='{.spec.images}')" ]]; }
wait_for 30 "the tag leaves the NodeImages with its job" untagged
pass "ttlSecondsAfterFinished deletes the job, and its tags leave the NodeImages"

# Admission: 422 with the field.
out=$("$KUBECTL" apply -f - 2>&1 <<'YAML' || true
apiVersion: apps.kruise.io/v1alpha1
kind: ImagePullJob
metadata:
  name: invalid
spec:
  image: nginx
  parallelism: "50%"
YAML
)
assert_contains "$out" 'spec.parallelism: Invalid value: "50%": parallelism does not support percentage value' "invalid ImagePullJob refused"
pass "an invalid ImagePullJob is refused with the field"

# Pre-download: a CloneSet of 5 pods held by its partition changes its image; the new
# image's ImagePullJob, owned by the CloneSet, pulls on the nodes of the old pods before any
# pod updates (on 5 nodes at once: imagePreDownloadParallelism). Released (every pod at
# once), the rollout takes less than one pull; the
# next image, changed with every pod in one batch, is not pre-downloaded (the revision is
# labelled ignored, as OpenKruise does) and its rollout pays the pull.
"$KUBECTL" apply -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1beta1
kind: CloneSet
metadata:
  name: web
spec:
  replicas: 5
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: main
        image: registry.local/web:v1
  updateStrategy:
    rollingUpdate:
      podUpdatePolicy: InPlaceIfPossible
      partition: 5
      maxUnavailable: 1
      inPlaceUpdateStrategy:
        imagePreDownloadParallelism: 5
YAML
cs() { "$KUBECTL" get cloneset web -o jsonpath="{$1}"; }
all_ready() { [[ "$(cs .status.readyReplicas)" == 5 ]]; }
wait_for 90 "CloneSet web: 5 pods ready" all_ready
set_image() {
  "$KUBECTL" patch cloneset web --type merge \
    -p "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"main\",\"image\":\"$1\"}]}}}}" >/dev/null
}
set_image registry.local/web:v2
jobs_for() {
  "$KUBECTL" get imagepulljobs -o jsonpath="{range .items[?(@.spec.image==\"$1\")]}{.metadata.name}{end}"
}
has_job() { [[ -n "$(jobs_for registry.local/web:v2)" ]]; }
wait_for 30 "the pre-download ImagePullJob for web:v2" has_job
job=$(jobs_for registry.local/web:v2)
assert_eq "$("$KUBECTL" get imagepulljob "$job" -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}')" \
  "CloneSet/web" "the pre-download job's owner"
assert_contains "$job" "-main" "the job is named after the revision and the container"
assert_eq "$("$KUBECTL" get imagepulljob "$job" -o jsonpath='{.spec.parallelism}')" "5" "the job's parallelism"
assert_eq "$(cs .status.updatedReplicas)" "0" "pods updated before the pull"
pulled() {
  local progress; progress=$("$KUBECTL" get imagepulljob "$job" -o jsonpath='{.status.succeeded}/{.status.desired}')
  [[ "$progress" =~ ^([1-9][0-9]*)/([0-9]+)$ && "${BASH_REMATCH[1]}" == "${BASH_REMATCH[2]}" ]]
}
wait_for 90 "the pre-download job pulled on every node of the old pods" pulled
assert_eq "$(cs .status.updatedReplicas)" "0" "pods updated while the job pulled"
pass "a CloneSet in-place rollout with pre-download creates the ImagePullJob first and it pulls on the pods' nodes"

# timed_rollout PATCH: applies the merge PATCH to the CloneSet and sets ROLLOUT_MS to the
# milliseconds until every pod is updated and ready.
timed_rollout() {
  local start; start=$(date +%s%N)
  "$KUBECTL" patch cloneset web --type merge -p "$1" >/dev/null
  # Until the controller reads the patch, the previous rollout's status already reads
  # "every pod updated": hence status_observed.
  rolled_out() {
    status_observed cloneset web &&
      [[ "$(cs .status.updatedReadyReplicas)" == 5 && "$(cs .status.currentRevision)" == "$(cs .status.updateRevision)" ]]
  }
  wait_for 90 "every pod of CloneSet web updated and ready" rolled_out
  ROLLOUT_MS=$(( ($(date +%s%N) - start) / 1000000 ))
}
timed_rollout '{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0,"maxUnavailable":"100%"}}}}'
with_ms=$ROLLOUT_MS
(( with_ms < SLOW_PULL_MS )) || fail "the pre-downloaded rollout took ${with_ms} ms, at least one pull (${SLOW_PULL_MS} ms)"
gone() { [[ -z "$(jobs_for registry.local/web:v2)" ]]; }
wait_for 30 "the pre-download job deleted once rolled out" gone
timed_rollout '{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"registry.local/web:v3"}]}}}}'
without_ms=$ROLLOUT_MS
(( without_ms >= SLOW_PULL_MS )) || fail "the rollout without pre-download took ${without_ms} ms, less than a pull"
assert_eq "$(jobs_for registry.local/web:v3)" "" "a job for an image whose pods update in one batch"
ignored=$("$KUBECTL" get controllerrevisions -l apps.kruise.io/image-predownload-ignored=true -o name | wc -l)
(( ignored >= 1 )) || fail "no revision labelled apps.kruise.io/image-predownload-ignored"
pass "the pre-downloaded pods updated in ${with_ms} ms, without pre-download ${without_ms} ms (one pull: ${SLOW_PULL_MS} ms); the job is deleted once rolled out"
