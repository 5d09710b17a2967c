#!/usr/bin/env bash
# OpenKruise's own kruise-manager (v1.8.3, built unmodified from its Go module) on
# `kruise-sim up`: kruise-sim must be a cluster a real Kubernetes client stack runs on
# (client-go and controller-runtime with protobuf bodies, admission requests as
# kube-apiserver sends them, its webhooks called back). With OpenKruise's CRDs and webhook
# configurations installed as its kustomize install names them, a CloneSet gets its pods,
# ready with the InPlaceUpdateReady gate its webhook adds, and an image change updates them in place.
#
#   e2e/openkruise/kruise-manager-on-sim.sh     (needs go; KRUISE_BIN_DIR as for the scenarios)
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=testkit/scenario-lib.sh
source "$script_dir/../../testkit/scenario-lib.sh"
scenario_init

manager="${KRUISE_MANAGER_BIN:-$HOME/.cache/kruise-openkruise-e2e/kruise-manager}"
[[ -x $manager ]] || (cd "$script_dir" && go build -o "$manager" github.com/openkruise/kruise) \
  || fail "building kruise-manager from github.com/openkruise/kruise"
kruise_src=$(cd "$script_dir" && go list -m -f '{{.Dir}}' github.com/openkruise/kruise)

start_cluster kruise-sim
"$KUBECTL" apply --server-side -f "$kruise_src/config/crd/bases" >/dev/null
"$KUBECTL" get namespace kruise-system >/dev/null 2>&1 || "$KUBECTL" create namespace kruise-system >/dev/null
# config/default's kustomize names: the `kruise-` prefix, namespace kruise-system.
sed -e 's/name: \(mutating\|validating\)-webhook-configuration/name: kruise-\1-webhook-configuration/' \
  -e 's/namespace: system/namespace: kruise-system/' -e 's/name: webhook-service/name: kruise-webhook-service/' \
  "$kruise_src/config/webhook/manifests.yaml" | "$KUBECTL" apply -f - >/dev/null
# Its webhook server on 127.0.0.1 (WEBHOOK_HOST: the configurations get a URL, not the
# Service), certificates its own, no leader election.
WEBHOOK_HOST=127.0.0.1 WEBHOOK_PORT="$(free_port)" POD_NAMESPACE=kruise-system \
  WEBHOOK_CERT_DIR="$WORK/certs" "$manager" --kubeconfig="$KUBECONFIG" \
  --enable-leader-election=false --metrics-addr="127.0.0.1:$(free_port)" \
  --health-probe-addr="127.0.0.1:$(free_port)" \
  --feature-gates=AllAlpha=true,AllBeta=true,EnableExternalCerts=false,TemplateNoDefaults=false \
  >"$WORK/kruise-manager.log" 2>&1 &
PIDS+=($!)
wait_for 60 "kruise-manager's CloneSet controller" grep -q 'Starting workers.*"controller"="cloneset-controller"' "$WORK/kruise-manager.log"
# Its webhook publishes itself in the configurations before it serves.
wait_for 60 "kruise-manager's webhook configured" bash -c \
  "'$KUBECTL' get mutatingwebhookconfiguration kruise-mutating-webhook-configuration -o jsonpath='{.webhooks[0].clientConfig.url}' | grep -q 127.0.0.1"
pass "kruise-manager v1.8.3 runs on kruise-sim"

cat <<'YAML' | "$KUBECTL" apply -f - >/dev/null
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: {name: demo}
spec:
  replicas: 3
  selector: {matchLabels: {app: demo}}
  updateStrategy: {type: InPlaceIfPossible}
  template:
    metadata: {labels: {app: demo}}
    spec: {containers: [{name: main, image: nginx:1.25}]}
YAML
ready_gated() {
  [[ "$("$KUBECTL" get pods -l app=demo -o jsonpath='{range .items[*]}{.spec.readinessGates[0].conditionType}{.status.conditions[?(@.type=="InPlaceUpdateReady")].status}{.status.conditions[?(@.type=="Ready")].status} {end}')" == "InPlaceUpdateReadyTrueTrue InPlaceUpdateReadyTrueTrue InPlaceUpdateReadyTrueTrue " ]]
}
wait_for 60 "3 pods Ready with OpenKruise's InPlaceUpdateReady gate" ready_gated
names="$("$KUBECTL" get pods -l app=demo -o jsonpath='{.items[*].metadata.name}')"
pass "a CloneSet's pods made and ready (kruise-manager's controller and webhook)"
"$KUBECTL" patch cloneset demo --type=merge -p '{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"nginx:1.26"}]}}}}' >/dev/null
updated_in_place() {
  [[ "$("$KUBECTL" get pods -l app=demo -o jsonpath='{range .items[*]}{.spec.containers[0].image}/{.status.containerStatuses[0].restartCount} {end}')" == "nginx:1.26/1 nginx:1.26/1 nginx:1.26/1 " ]] \
    && [[ "$("$KUBECTL" get cloneset demo -o jsonpath='{.status.updatedReadyReplicas}')" == 3 ]]
}
wait_for 90 "every pod updated in place and ready" updated_in_place
assert_eq "$("$KUBECTL" get pods -l app=demo -o jsonpath='{.items[*].metadata.name}')" "$names" "the same pods"
pass "an image change updated the pods in place (same names, one restart each)"
