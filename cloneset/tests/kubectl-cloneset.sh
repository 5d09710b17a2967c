#!/usr/bin/env bash
# The OpenKruise CloneSet walkthrough with a real kubectl: kruise-sim (3 nodes, kubelet)
# plus the kruise-cloneset binary, its CRD and webhooks registered as a user would.
#
#   KRUISE_BIN_DIR=.../debug cloneset/tests/kubectl-cloneset.sh
set -euo pipefail

# shellcheck source=testkit/scenario-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../testkit/scenario-lib.sh"
scenario_init

start_cluster kruise-sim --nodes 3
start_family cloneset
pass "kruise-cloneset running against kruise-sim (webhooks registered)"

cat >"$WORK/cloneset.yaml" <<'YAML'
apiVersion: apps.kruise.io/v1beta1
kind: CloneSet
metadata:
  name: sample
  labels: {app: sample}
spec:
  replicas: 3
  selector:
    matchLabels: {app: sample}
  template:
    metadata:
      labels: {app: sample}
    spec:
      containers:
      - name: nginx
        image: nginx:alpine
YAML
"$KUBECTL" apply -f "$WORK/cloneset.yaml" >/dev/null
wait_for 60 "3 ready pods" pods_ready app=sample 3
for p in $("$KUBECTL" get pods -l app=sample -o jsonpath='{.items[*].metadata.name}'); do
  [[ "$p" =~ ^sample-[a-z0-9]{5}$ ]] || fail "pod name $p is not sample-xxxxx"
done
pass "create 3 replicas: pods sample-xxxxx, all Ready"

wait_for 30 "status readyReplicas 3" bash -c "[[ \$('$KUBECTL' get cloneset sample -o jsonpath='{.status.readyReplicas}') == 3 ]]"
header="$("$KUBECTL" get cloneset sample | sed -n 1p)"
for col in NAME DESIRED UPDATED UPDATED_READY READY TOTAL AGE; do
  assert_contains "$header" "$col" "kubectl get cloneset shows $col"
done
pass "kubectl get cloneset shows the printer columns"

# Scale to 5 one pod at a time: scaleStrategy.maxUnavailable 1 with minReadySeconds 3 lets
# the next pod be created only once the previous one has been ready for 3 seconds.
"$KUBECTL" patch cloneset sample --type merge \
  -p '{"spec":{"replicas":5,"minReadySeconds":3,"scaleStrategy":{"maxUnavailable":1}}}' >/dev/null
max_unready=0
deadline=$((SECONDS + 90))
until pods_ready app=sample 5; do
  (( SECONDS < deadline )) || fail "timed out waiting for 5 ready pods"
  unready=$("$KUBECTL" get pods -l app=sample -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -vc True || true)
  (( unready > max_unready )) && max_unready=$unready
  sleep 0.2
done
(( max_unready <= 1 )) || fail "scale-up had $max_unready pods unready at once (scaleStrategy.maxUnavailable 1)"
# The newest pod was created at least minReadySeconds after the one before it became ready
# (timestamps have second precision: 3 s become at least 2).
read -r second_created first_ready < <("$KUBECTL" get pods -l app=sample --sort-by=.metadata.creationTimestamp \
  -o jsonpath='{range .items[*]}{.metadata.creationTimestamp} {.status.conditions[?(@.type=="Ready")].lastTransitionTime}{"\n"}{end}' \
  | tail -2 | python3 -c 'import sys,datetime as d
rows=[l.split() for l in sys.stdin]
t=lambda s: d.datetime.strptime(s,"%Y-%m-%dT%H:%M:%SZ").timestamp()
print(int(t(rows[1][0])), int(t(rows[0][1])))')
(( second_created - first_ready >= 2 )) || fail "the 5th pod came $((second_created - first_ready))s after the 4th was ready (minReadySeconds 3)"
pass "scale to 5 with scaleStrategy.maxUnavailable 1 and minReadySeconds 3: one pod at a time"

victim="$("$KUBECTL" get pods -l app=sample -o jsonpath='{.items[0].metadata.name}')"
"$KUBECTL" patch cloneset sample --type merge -p "{\"spec\":{\"scaleStrategy\":{\"podsToDelete\":[\"$victim\"]}}}" >/dev/null
wait_for 60 "$victim deleted" bash -c "! '$KUBECTL' get pod '$victim' >/dev/null 2>&1"
wait_for 60 "5 ready pods again" pods_ready app=sample 5
pass "podsToDelete removes exactly $victim and the CloneSet replaces it"

before="$("$KUBECTL" get pods -l app=sample -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.uid}{"\n"}{end}' | sort)"
"$KUBECTL" patch cloneset sample --type merge \
  -p '{"spec":{"updateStrategy":{"rollingUpdate":{"podUpdatePolicy":"InPlaceIfPossible","maxUnavailable":"100%"}},"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:mainline"}]}}}}' >/dev/null
updated() {
  local out; out=$("$KUBECTL" get pods -l app=sample -o jsonpath='{range .items[*]}{.status.containerStatuses[0].image}/{.status.containerStatuses[0].restartCount}/{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
  [[ "$(grep -c '^nginx:mainline/1/True$' <<<"$out")" == 5 ]]
}
wait_for 120 "5 pods updated in place" updated
after="$("$KUBECTL" get pods -l app=sample -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.uid}{"\n"}{end}' | sort)"
assert_eq "$after" "$before" "in-place update keeps pod names and uids"
events="$("$KUBECTL" get events -o jsonpath='{range .items[*]}{.reason}{"\n"}{end}')"
assert_contains "$events" "SuccessfulUpdatePodInPlace" "SuccessfulUpdatePodInPlace events"
pass "InPlaceIfPossible image change: same names and uids, restartCount 1, SuccessfulUpdatePodInPlace"

"$KUBECTL" patch cloneset sample --type merge \
  -p '{"spec":{"updateStrategy":{"rollingUpdate":{"partition":2}},"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:stable"}]}}}}' >/dev/null
partitioned() {
  local out; out=$("$KUBECTL" get pods -l app=sample -o jsonpath='{range .items[*]}{.status.containerStatuses[0].image}{"\n"}{end}')
  [[ "$(grep -c '^nginx:mainline$' <<<"$out")" == 2 && "$(grep -c '^nginx:stable$' <<<"$out")" == 3 ]]
}
wait_for 120 "3 updated, 2 kept by partition" partitioned
wait_for 30 "status updatedReplicas 3" bash -c "[[ \$('$KUBECTL' get cloneset sample -o jsonpath='{.status.updatedReplicas}') == 3 ]]"
pass "partition: 2 leaves exactly 2 pods on the old revision"

# OpenKruise's own config/samples CloneSet (v1alpha1), applied unchanged in a namespace of
# its own: stored with OpenKruise's template defaults and named revision as OpenKruise names
# it (sample-744d4796cc, computed by OpenKruise's code in Go for this manifest).
"$KUBECTL" create namespace samples >/dev/null
"$KUBECTL" apply -n samples -f "$(dirname "${BASH_SOURCE[0]}")/fixtures/openkruise/apps_v1alpha1_cloneset.yaml" >/dev/null
wait_for 60 "5 ready sample pods" bash -c "[[ \$('$KUBECTL' get cloneset -n samples sample -o jsonpath='{.status.readyReplicas}') == 5 ]]"
stored=$("$KUBECTL" get cloneset -n samples sample -o jsonpath='{.spec.template.spec.containers[0].imagePullPolicy} {.spec.template.spec.containers[0].terminationMessagePath} {.spec.template.spec.dnsPolicy} {.spec.template.spec.restartPolicy} {.spec.template.spec.schedulerName} {.spec.template.spec.terminationGracePeriodSeconds}')
assert_eq "$stored" "Always /dev/termination-log ClusterFirst Always default-scheduler 30" "the sample's template defaults"
assert_eq "$("$KUBECTL" get cloneset -n samples sample -o jsonpath='{.status.updateRevision}')" \
  "sample-744d4796cc" "the sample's revision name (OpenKruise's)"
wide=$("$KUBECTL" get cloneset -n samples sample -o wide --no-headers)
assert_contains "$wide" " main " "-o wide CONTAINERS shows the first container"
assert_contains "$wide" " nginx:alpine" "-o wide IMAGES shows the first image"
pass "OpenKruise's config/samples CloneSet applies unchanged: defaulted template, revision sample-744d4796cc, -o wide columns"

echo "kubectl cloneset walkthrough: all checks passed ($("$KUBECTL" version --client 2>/dev/null | sed -n 1p))"
