#!/usr/bin/env bash
# `kruise-playground up` as the README's first command: the simulated cluster with every
# registered family running in-process (`--controllers all`, the default). A user applies a
# CloneSet with kubectl and scales it, with nothing else started.
#
#   KRUISE_BIN_DIR=.../debug playground/tests/kubectl-up.sh   (KUBECTL=... to pick a kubectl)
set -euo pipefail

# shellcheck source=testkit/scenario-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../testkit/scenario-lib.sh"
scenario_init

start_cluster kruise-playground
banner="$(cat "$CLUSTER_LOG")"
families="$("$(kruise_bin kruise-playground)" families | cut -f1 | paste -sd, | sed 's/,/, /g')"
assert_contains "$banner" "controllers running in-process: $families" "up's banner names every registered family"
crds="$("$KUBECTL" get crd -o name)"
while IFS=$'\t' read -r name _ family_crds _; do
  [[ "$family_crds" == "-" ]] && continue
  for crd in ${family_crds//,/ }; do
    assert_contains "$crds" "$crd" "$name's CRD installed by up"
  done
done < <("$(kruise_bin kruise-playground)" families)
pass "kruise-playground up runs every registered family in-process ($families), CRDs installed"

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
wait_for 60 "2 ready pods" pods_ready app=demo 2
pass "a CloneSet applied with kubectl gets 2 ready pods"
"$KUBECTL" scale cloneset demo --replicas 3 >/dev/null
wait_for 60 "3 ready pods" pods_ready app=demo 3
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
wait_for 60 "2 ready legacy pods" pods_ready app=legacy 2
assert_eq "$("$KUBECTL" get clonesets.v1beta1.apps.kruise.io legacy -o jsonpath='{.spec.updateStrategy.rollingUpdate.podUpdatePolicy}')" "InPlaceIfPossible" "v1beta1 view"
assert_eq "$("$KUBECTL" get clonesets.v1alpha1.apps.kruise.io legacy -o jsonpath='{.spec.updateStrategy.type}')" "InPlaceIfPossible" "v1alpha1 view"
pass "a v1alpha1 CloneSet applies unchanged and reads back in both versions (conversion webhook)"
