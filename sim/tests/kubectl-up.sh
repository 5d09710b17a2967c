#!/usr/bin/env bash
# `kruise-sim up` as the README's first command: the simulated cluster with every family
# built so far running in-process (`--controllers all`, the default). A user applies a
# CloneSet with kubectl and scales it, with nothing else started.
#
#   KRUISE_SIM=.../kruise-sim sim/tests/kubectl-up.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
KUBECTL="${KUBECTL:-kubectl}"
# shellcheck source=sim/tests/scenario-lib.sh
source "$ROOT/sim/tests/scenario-lib.sh"
scenario_init

if [[ -z "${KRUISE_SIM:-}" ]]; then
  (cd "$ROOT" && cargo build -q -p kruise-sim)
fi
KRUISE_SIM="${KRUISE_SIM:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/kruise-sim}"

"$KRUISE_SIM" up --port 0 --kubeconfig "$KUBECONFIG" >"$WORK/sim.log" 2>&1 &
PIDS+=($!)
wait_for 60 "kruise-sim up" grep -q '^export KUBECONFIG=' "$WORK/sim.log"
assert_contains "$(cat "$WORK/sim.log")" "controllers running in-process: cloneset, sidecarset, webhook" "up's banner"
assert_contains "$("$KUBECTL" get crd -o name)" "clonesets.apps.kruise.io" "CloneSet CRD installed by up"
pass "kruise-sim up runs the CloneSet family in-process"

ready_pods() { # ready_pods APP N: exactly N pods labelled app=APP, all Ready
  local out; out=$("$KUBECTL" get pods -l "app=$1" -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
  [[ "$(grep -c True <<<"$out")" == "$2" && "$(wc -l <<<"$out")" == "$2" ]]
}
"$KUBECTL" apply -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1beta1
kind: CloneSet
metadata:
  name: demo
spec:
  replicas: 2
  selector:
    matchLabels: {app: demo}
  template:
    metadata:
      labels: {app: demo}
    spec:
      containers:
      - name: main
        image: nginx:alpine
YAML
wait_for 60 "2 ready pods" ready_pods demo 2
pass "a CloneSet applied with kubectl gets 2 ready pods"
"$KUBECTL" scale cloneset demo --replicas 3 >/dev/null
wait_for 60 "3 ready pods" ready_pods demo 3
pass "kubectl scale cloneset reaches 3 ready pods"

# The defaulting webhook answered (served in-process over HTTPS): defaults are filled in.
assert_eq "$("$KUBECTL" get cloneset demo -o jsonpath='{.spec.updateStrategy.type}')" "RollingUpdate" "defaulted update strategy"
assert_eq "$("$KUBECTL" get cloneset demo -o jsonpath='{.spec.updateStrategy.rollingUpdate.maxUnavailable}')" "20%" "defaulted maxUnavailable"
pass "CloneSet defaults applied by the in-process webhook"

# An OpenKruise v1alpha1 manifest applies unchanged: stored as v1beta1 through the
# CloneSet conversion webhook, read back in either version.
"$KUBECTL" apply -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: legacy
spec:
  replicas: 2
  selector:
    matchLabels: {app: legacy}
  updateStrategy:
    type: InPlaceIfPossible
  template:
    metadata:
      labels: {app: legacy}
    spec:
      containers:
      - name: main
        image: nginx:alpine
YAML
wait_for 60 "2 ready legacy pods" ready_pods legacy 2
assert_eq "$("$KUBECTL" get clonesets.v1beta1.apps.kruise.io legacy -o jsonpath='{.spec.updateStrategy.rollingUpdate.podUpdatePolicy}')" "InPlaceIfPossible" "v1beta1 view"
assert_eq "$("$KUBECTL" get clonesets.v1alpha1.apps.kruise.io legacy -o jsonpath='{.spec.updateStrategy.type}')" "InPlaceIfPossible" "v1alpha1 view"
pass "a v1alpha1 CloneSet applies unchanged and reads back in both versions (conversion webhook)"
