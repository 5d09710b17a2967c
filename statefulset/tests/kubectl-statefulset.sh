#!/usr/bin/env bash
# The OpenKruise Advanced StatefulSet walkthrough with a real kubectl: kruise-sim (3 nodes,
# kubelet) plus the kruise-statefulset binary, its CRD and webhooks registered as a user
# would. The manifest is OpenKruise's sample shape (config/samples) with a claim template.
#
#   KRUISE_BIN_DIR=.../debug statefulset/tests/kubectl-statefulset.sh
set -euo pipefail

# shellcheck source=testkit/scenario-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../testkit/scenario-lib.sh"
scenario_init

start_cluster kruise-sim --nodes 3
start_family statefulset
pass "kruise-statefulset running against kruise-sim (webhooks registered)"

cat >"$WORK/statefulset.yaml" <<'YAML'
apiVersion: apps.kruise.io/v1beta1
kind: StatefulSet
metadata:
  name: sample
spec:
  replicas: 3
  serviceName: sample
  selector:
    matchLabels: {app: sample}
  template:
    metadata:
      labels: {app: sample}
    spec:
      readinessGates:
      - conditionType: InPlaceUpdateReady
      containers:
      - name: main
        image: nginx:alpine
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      podUpdatePolicy: InPlaceIfPossible
  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1Gi
YAML
"$KUBECTL" apply -f "$WORK/statefulset.yaml" >/dev/null
wait_for 60 "3 ready pods" pods_ready app=sample 3
names="$("$KUBECTL" get pods -l app=sample -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort | tr '\n' ' ')"
assert_eq "$names" "sample-0 sample-1 sample-2 " "pods are sample-0..2"
# events_in_order REASON: the messages of the events with REASON, oldest write first.
events_in_order() {
  "$KUBECTL" get events -o jsonpath='{range .items[*]}{.metadata.resourceVersion} {.reason} {.message}{"\n"}{end}' \
    | awk -v r="$1" '$2 == r' | sort -n | cut -d' ' -f3-
}
order="$(events_in_order SuccessfulCreate | grep -o 'Pod sample-[0-9]*' | tr '\n' ' ')"
assert_eq "$order" "Pod sample-0 Pod sample-1 Pod sample-2 " "created in ordinal order"
claims="$("$KUBECTL" get pvc -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort | tr '\n' ' ')"
assert_eq "$claims" "data-sample-0 data-sample-1 data-sample-2 " "one claim per ordinal"
assert_eq "$("$KUBECTL" get pod sample-1 -o jsonpath='{.spec.hostname}.{.spec.subdomain}')" "sample-1.sample" "hostname and subdomain"
pass "OpenKruise's sample: 3 ordinals ready in order, each with its claim"

wait_for 30 "status readyReplicas 3" bash -c "[[ \$('$KUBECTL' get asts sample -o jsonpath='{.status.readyReplicas}') == 3 ]]"
header="$("$KUBECTL" get asts sample | sed -n 1p)"
for col in NAME DESIRED CURRENT UPDATED READY AGE; do
  assert_contains "$header" "$col" "kubectl get asts shows $col"
done
wide="$("$KUBECTL" get asts sample -o wide | sed -n 1p)"
assert_contains "$wide" "IMAGES" "kubectl get -o wide shows IMAGES"
pass "kubectl get asts shows OpenKruise's printer columns"

before="$("$KUBECTL" get pods -l app=sample -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.uid}{"\n"}{end}' | sort)"
"$KUBECTL" patch asts sample --type merge \
  -p '{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"nginx:mainline"}]}}}}' >/dev/null
updated() {
  local out; out=$("$KUBECTL" get pods -l app=sample -o jsonpath='{range .items[*]}{.status.containerStatuses[0].image}/{.status.containerStatuses[0].restartCount}/{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
  [[ "$(grep -c '^nginx:mainline/1/True$' <<<"$out")" == 3 ]]
}
wait_for 120 "3 pods updated in place" updated
after="$("$KUBECTL" get pods -l app=sample -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.uid}{"\n"}{end}' | sort)"
assert_eq "$after" "$before" "in-place update keeps pod names and uids"
order="$(events_in_order SuccessfulUpdatePodInPlace | grep -o 'pod sample-[0-9]*' | tr '\n' ' ')"
assert_eq "$order" "pod sample-2 pod sample-1 pod sample-0 " "updated in descending order"
pass "InPlaceIfPossible image change: same uids, restartCount 1, descending"

policy="$("$KUBECTL" get asts sample -o jsonpath='{.spec.podManagementPolicy}/{.spec.updateStrategy.rollingUpdate.maxUnavailable}/{.spec.persistentVolumeClaimRetentionPolicy.whenScaled}')"
assert_eq "$policy" "OrderedReady/1/Retain" "the defaulting webhook filled in OpenKruise's defaults"
if out="$("$KUBECTL" patch asts sample --type merge -p '{"spec":{"updateStrategy":{"rollingUpdate":{"maxUnavailable":2}}}}' 2>&1)"; then
  fail "maxUnavailable 2 with OrderedReady was admitted"
fi
assert_contains "$out" "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 2: can only work with Parallel PodManagementPolicyType" "the denial names the field"
pass "webhooks: defaults written, an invalid change refused with its field path"

sed -e 's/name: sample$/name: reserved/' -e 's/app: sample/app: reserved/g' -e 's/serviceName: sample/serviceName: reserved/' \
  -e 's/^  replicas: 3$/  replicas: 3\n  reserveOrdinals: [1]\n  podManagementPolicy: Parallel/' \
  "$WORK/statefulset.yaml" >"$WORK/reserved.yaml"
"$KUBECTL" apply -f "$WORK/reserved.yaml" >/dev/null
wait_for 60 "3 ready reserved pods" pods_ready app=reserved 3
names="$("$KUBECTL" get pods -l app=reserved -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort | tr '\n' ' ')"
assert_eq "$names" "reserved-0 reserved-2 reserved-3 " "reserveOrdinals [1] with replicas 3"
pass "reserveOrdinals: [1] with replicas 3 -> pods 0, 2, 3"

# K#2102: read and written back through v1alpha1 (as a UI preferring it would), the set
# keeps reserveOrdinals.
assert_eq "$("$KUBECTL" get statefulsets.v1alpha1.apps.kruise.io reserved -o jsonpath='{.apiVersion} {.spec.reserveOrdinals}')" \
  "apps.kruise.io/v1alpha1 [1]" "the v1alpha1 view shows reserveOrdinals"
"$KUBECTL" get statefulsets.v1alpha1.apps.kruise.io reserved -o json \
  | python3 -c 'import json,sys; o=json.load(sys.stdin); o["spec"]["replicas"]=4; json.dump(o,sys.stdout)' \
  | "$KUBECTL" replace -f - >/dev/null
assert_eq "$("$KUBECTL" get statefulsets.v1beta1.apps.kruise.io reserved -o jsonpath='{.spec.reserveOrdinals}')" "[1]" "kept in storage"
wait_for 60 "4 ready reserved pods" pods_ready app=reserved 4
names="$("$KUBECTL" get pods -l app=reserved -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort | tr '\n' ' ')"
assert_eq "$names" "reserved-0 reserved-2 reserved-3 reserved-4 " "scaled to 4 past the reserved ordinal"
pass "an edit through v1alpha1 keeps reserveOrdinals (K#2102)"

reserved_claims() {
  "$KUBECTL" get pvc -l app=reserved -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort | tr '\n' ' '
}
assert_eq "$(reserved_claims)" "data-reserved-0 data-reserved-2 data-reserved-3 data-reserved-4 " "one claim per ordinal"
wait_for 30 "claims bound" bash -c "[[ \$('$KUBECTL' get pvc data-reserved-4 -o jsonpath='{.status.phase}/{.status.capacity.storage}') == Bound/1Gi ]]"
"$KUBECTL" patch asts reserved --type merge \
  -p '{"spec":{"persistentVolumeClaimRetentionPolicy":{"whenScaled":"Delete"}}}' >/dev/null
"$KUBECTL" scale asts reserved --replicas 2 >/dev/null
wait_for 60 "reserved scaled to 2" bash -c "[[ \$('$KUBECTL' get pods -l app=reserved -o jsonpath='{.items[*].metadata.name}') == 'reserved-0 reserved-2' ]]"
assert_eq "$("$KUBECTL" get asts reserved -o jsonpath='{.spec.replicas}')" "2" "the scale subresource set spec.replicas"
pass "kubectl scale asts (scale subresource): reserved-3 and reserved-4 removed"
only_kept_claims() { [[ "$(reserved_claims)" == "data-reserved-0 data-reserved-2 " ]]; }
wait_for 60 "the claims of reserved-3 and reserved-4 deleted" only_kept_claims
pass "whenScaled: Delete: scaling down removed the scaled-away ordinals' claims"

echo "kubectl statefulset walkthrough: all checks passed ($("$KUBECTL" version --client 2>/dev/null | sed -n 1p))"
