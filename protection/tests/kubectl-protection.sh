#!/usr/bin/env bash
# PodUnavailableBudget and deletion protection with a real kubectl: kruise-sim (3 nodes,
# pods Ready 15 s after they start, so a replacement cannot refill the budget mid-scenario),
# kruise-protection (the PUB controller), kruise-cloneset, and kruise-webhook serving the
# protection family's validating pod step and deletion-protection webhooks
# (`--enable=protection`, gate ResourcesDeletionProtection on).
#
#   KRUISE_BIN_DIR=.../debug protection/tests/kubectl-protection.sh
set -euo pipefail

# shellcheck source=testkit/scenario-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../testkit/scenario-lib.sh"
scenario_init

start_cluster kruise-sim --nodes 3 --ready-delay 15s
start_family protection
start_family cloneset
start_family webhook --enable=protection --feature-gates=ResourcesDeletionProtection=true
pass "kruise-protection, kruise-cloneset and kruise-webhook running against kruise-sim"

NS="$("$KUBECTL" config view --minify -o jsonpath='{..namespace}')"
NS="${NS:-default}"

"$KUBECTL" apply -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1beta1
kind: CloneSet
metadata:
  name: web
spec:
  replicas: 4
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:alpine
---
apiVersion: policy.kruise.io/v1alpha1
kind: PodUnavailableBudget
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  maxUnavailable: 1
YAML
wait_for 90 "4 ready pods" pods_ready app=web 4
wait_for 60 "the budget allows 1 of 4" bash -c \
  "[[ \$('$KUBECTL' get pub web -o jsonpath='{.status.unavailableAllowed}/{.status.currentAvailable}/{.status.desiredAvailable}/{.status.totalReplicas}') == 1/4/3/4 ]]"
header="$("$KUBECTL" get pub web | sed -n 1p)"
assert_eq "$(tr -s ' ' <<<"$header")" "NAME ALLOWED CURRENT DESIRED TOTAL" "kubectl get pub shows OpenKruise's columns"
row="$("$KUBECTL" get pub web --no-headers | tr -s ' ')"
assert_eq "$row" "web 1 4 3 4" "kubectl get pub web"
pass "kubectl get pub: NAME ALLOWED CURRENT DESIRED TOTAL, web 1 4 3 4"

# The webhook entries follow the budgets kruise-webhook watches.
wait_for 30 "the validating pod webhook published" bash -c \
  "'$KUBECTL' get validatingwebhookconfiguration kruise-validating-webhook-configuration -o jsonpath='{.webhooks[*].name}' | grep -q vpodeviction.kb.io"

mapfile -t pods < <("$KUBECTL" get pods -l app=web -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
evict() {
  "$KUBECTL" create --raw "/api/v1/namespaces/$NS/pods/$1/eviction" -f - <<JSON
{"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "$1", "namespace": "$NS"}}
JSON
}
evict "${pods[0]}" >/dev/null 2>"$WORK/evict-0.err" || fail "the first eviction was refused: $(cat "$WORK/evict-0.err")"
pass "the first eviction spends the budget"

refused='podunavailablebudget.policy.kruise.io "web" is forbidden: pub unavailable allowed is negative'
if evict "${pods[1]}" >/dev/null 2>"$WORK/evict-1.err"; then fail "a second eviction went through"; fi
assert_contains "$(cat "$WORK/evict-1.err")" "TooManyRequests" "a refused eviction is 429"
assert_contains "$(cat "$WORK/evict-1.err")" "admission webhook \"vpodeviction.kb.io\" denied the request: $refused" "eviction refusal message"
pass "the second eviction is refused with 429: $refused"

if "$KUBECTL" delete pod "${pods[2]}" --wait=false >/dev/null 2>"$WORK/delete.err"; then fail "kubectl delete pod went through"; fi
assert_contains "$(cat "$WORK/delete.err")" "admission webhook \"vpod.kb.io\" denied the request: $refused" "deletion refusal message"
pass "kubectl delete pod is refused: $refused"

# Deletion protection: a Cascading namespace holds while it has pods.
"$KUBECTL" create namespace cascade >/dev/null
"$KUBECTL" label namespace cascade policy.kruise.io/delete-protection=Cascading >/dev/null
"$KUBECTL" -n cascade run lone --image=nginx:alpine --restart=Never >/dev/null
wait_for 30 "the deletion webhooks published" bash -c \
  "'$KUBECTL' get validatingwebhookconfiguration kruise-validating-webhook-configuration -o jsonpath='{.webhooks[*].name}' | grep -q vnamespace.kb.io"
if "$KUBECTL" delete namespace cascade --wait=false >/dev/null 2>"$WORK/ns.err"; then fail "a Cascading namespace with a pod was deleted"; fi
assert_contains "$(cat "$WORK/ns.err")" \
  'admission webhook "vnamespace.kb.io" denied the request: forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and active pods 1>0' \
  "namespace refusal message"
pass "a namespace labelled Cascading cannot be deleted while it has a pod"

"$KUBECTL" -n cascade delete pod lone --grace-period=0 --force >/dev/null 2>&1
wait_for 30 "the pod gone" bash -c "[[ -z \$('$KUBECTL' -n cascade get pods -o name) ]]"
"$KUBECTL" delete namespace cascade --wait=false >/dev/null || fail "deleting the empty Cascading namespace"
pass "and can be deleted once it has none"
