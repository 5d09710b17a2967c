#!/usr/bin/env bash
# ImagePullJob and NodeImage with a real kubectl: kruise-playground (5 simulated nodes,
# each with a fake CRI socket) running the imagepull family in-process — its controllers,
# its webhooks, and its node agent once per node, pulling through that node's CRI.
#
#   KRUISE_BIN_DIR=.../debug imagepull/tests/kubectl-imagepull.sh
set -euo pipefail

# shellcheck source=testkit/scenario-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../testkit/scenario-lib.sh"
scenario_init

mkdir -p "$WORK/cri"
start_cluster kruise-playground --nodes 5 --cri-dir "$WORK/cri" --controllers imagepull
pass "kruise-playground up with the imagepull family and an agent per node"

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
