#!/usr/bin/env bash
# BroadcastJob and AdvancedCronJob with a real kubectl: kruise-sim (4 nodes; its scheduler
# binds the pods, its kubelet runs them to their `sim.kruise.io/exit-after` exit) plus the
# kruise-broadcastjob binary, its CRDs and webhooks registered as a user would.
#
#   KRUISE_BIN_DIR=.../debug broadcastjob/tests/kubectl-broadcastjob.sh
set -euo pipefail

# shellcheck source=testkit/scenario-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../testkit/scenario-lib.sh"
scenario_init

start_cluster kruise-sim --nodes 4
start_family broadcastjob
pass "kruise-broadcastjob running against kruise-sim (webhooks registered)"

# bcj NAME EXTRA_SPEC EXIT_CODE: a BroadcastJob whose pods exit after 1s with EXIT_CODE.
bcj() {
  cat <<YAML
apiVersion: apps.kruise.io/v1beta1
kind: BroadcastJob
metadata:
  name: $1
spec:
$2
  template:
    metadata:
      annotations:
        sim.kruise.io/exit-after: 1s
        sim.kruise.io/exit-code: "$3"
    spec:
      restartPolicy: Never
      containers:
      - name: work
        image: busybox:1.36
YAML
}
field() { "$KUBECTL" get bcj "$1" -o jsonpath="{$2}" 2>/dev/null; }
phase_is() { [[ "$(field "$1" .status.phase)" == "$2" ]]; }
gone() { ! "$KUBECTL" get bcj "$1" >/dev/null 2>&1; }

bcj everywhere "  completionPolicy: {ttlSecondsAfterFinished: 3}" 0 | "$KUBECTL" apply -f - >/dev/null
wait_for 60 "BroadcastJob everywhere completed" phase_is everywhere completed
assert_eq "$(field everywhere .status.succeeded)/$(field everywhere .status.desired)" "4/4" "succeeded/desired"
nodes=$("$KUBECTL" get pods -l broadcastjob-name=everywhere -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u | wc -l)
assert_eq "$nodes" "4" "nodes that ran a pod"
table=$("$KUBECTL" get bcj everywhere)
assert_contains "$table" "DESIRED" "kubectl get bcj header"
assert_contains "$(head -1 <<<"$table" | tr -s ' ')" "NAME DESIRED ACTIVE SUCCEEDED FAILED AGE" "kubectl get bcj columns"
assert_contains "$(tail -1 <<<"$table" | tr -s ' ')" "everywhere 4 0 4 0" "kubectl get bcj row"
pass "a BroadcastJob on 4 nodes completes with 4 succeeded; kubectl get bcj shows OpenKruise's columns"
wait_for 30 "BroadcastJob everywhere deleted by its TTL" gone everywhere
pass "ttlSecondsAfterFinished deletes the finished job"

# parallelism 1: never more than one pod running at a time.
bcj serial "  parallelism: 1" 0 | "$KUBECTL" apply -f - >/dev/null
most=0
deadline=$((SECONDS + 90))
until phase_is serial completed; do
  (( SECONDS < deadline )) || fail "BroadcastJob serial did not complete"
  running=$("$KUBECTL" get pods -l broadcastjob-name=serial -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c -E '^(Pending|Running)$' || true)
  (( running > most )) && most=$running
  sleep 0.2
done
assert_eq "$most" "1" "most pods running at once with parallelism 1"
assert_eq "$(field serial .status.succeeded)" "4" "succeeded"
pass "parallelism: 1 runs one node at a time"

# FailFast (the default): a failing container fails the job and no pod is left running.
bcj failing "  parallelism: 2" 1 | "$KUBECTL" apply -f - >/dev/null
wait_for 60 "BroadcastJob failing failed" phase_is failing failed
assert_eq "$(field failing '.status.conditions[0].reason')" "failed pod is found" "failure reason"
no_running() { ! "$KUBECTL" get pods -l broadcastjob-name=failing -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -q -E '^(Pending|Running)$'; }
wait_for 30 "no pod of failing running" no_running
pass "a failing container with FailFast fails the job, no pod left running"

# Admission: 422 with the field.
out=$(bcj invalid "  paused: false" 0 | sed 's/restartPolicy: Never/restartPolicy: Always/' | "$KUBECTL" apply -f - 2>&1 || true)
assert_contains "$out" 'spec.template.spec.restartPolicy: Invalid value: "Always": pod restartPolicy can only be Never or OnFailure' "invalid BroadcastJob refused"
out=$("$KUBECTL" apply -f - 2>&1 <<'YAML' || true
apiVersion: apps.kruise.io/v1alpha1
kind: AdvancedCronJob
metadata: {name: nowhere}
spec:
  schedule: "0 0 * * *"
  timeZone: Asia/Nowhere
  template:
    jobTemplate:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers: [{name: c, image: busybox}]
YAML
)
assert_contains "$out" 'spec.timeZone: Invalid value: "Asia/Nowhere": unknown time zone Asia/Nowhere' "invalid timeZone refused"
pass "invalid objects are refused at admission with the field"

# AdvancedCronJob: a child per run (a test schedule: every 3 seconds).
"$KUBECTL" apply -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1alpha1
kind: AdvancedCronJob
metadata: {name: tick}
spec:
  schedule: "@every 3s"
  timeZone: Europe/Berlin
  template:
    jobTemplate:
      spec:
        template:
          metadata:
            annotations: {sim.kruise.io/exit-after: 200ms}
          spec:
            restartPolicy: Never
            containers: [{name: c, image: busybox:1.36}]
YAML
has_child() { "$KUBECTL" get jobs -o jsonpath='{.items[*].metadata.name}' | grep -q -E 'tick-[0-9]{10}'; }
wait_for 30 "a Job of AdvancedCronJob tick" has_child
scheduled() { [[ -n "$("$KUBECTL" get acj tick -o jsonpath='{.status.lastScheduleTime}')" ]]; }
wait_for 30 "lastScheduleTime of tick" scheduled
table=$("$KUBECTL" get acj tick)
assert_contains "$(head -1 <<<"$table" | tr -s ' ')" "NAME SCHEDULE TYPE LASTSCHEDULETIME AGE" "kubectl get acj columns"
assert_contains "$(tail -1 <<<"$table" | tr -s ' ')" "tick @every 3s Job" "kubectl get acj row"
annotation=$("$KUBECTL" get jobs -o jsonpath='{.items[0].metadata.annotations.apps\.kruise\.io/scheduled-at}')
[[ "$annotation" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$ ]] || fail "scheduled-at annotation: $annotation"
pass "an AdvancedCronJob creates its child Jobs; kubectl get acj shows OpenKruise's columns"
