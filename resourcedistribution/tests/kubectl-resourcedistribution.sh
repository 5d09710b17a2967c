#!/usr/bin/env bash
# ResourceDistribution with a real kubectl: `kruise-playground up` with kruise-resourcedistribution
# in-process. A user distributes a Secret to the namespaces labelled for it and to one
# listed, reads the result with `kubectl get distributor` (TOTAL / SUCCEED / FAILED) and the
# conditions, labels a new namespace in, sees a conflict reported and left alone, and the
# webhook refuses what OpenKruise's refuses, with its messages.
#
#   KRUISE_BIN_DIR=.../debug resourcedistribution/tests/kubectl-resourcedistribution.sh
set -euo pipefail

# shellcheck source=testkit/scenario-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../testkit/scenario-lib.sh"
scenario_init

start_cluster kruise-playground --nodes 0 --controllers resourcedistribution
pass "kruise-playground up with kruise-resourcedistribution"

"$KUBECTL" create namespace app-1 >/dev/null
"$KUBECTL" label namespace app-1 shared-creds=yes >/dev/null
"$KUBECTL" create namespace app-2 >/dev/null
"$KUBECTL" create namespace legacy >/dev/null
# legacy already has a Secret of that name, not the distribution's.
"$KUBECTL" create secret generic registry-creds -n legacy --from-literal=token=theirs >/dev/null

"$KUBECTL" apply -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1alpha1
kind: ResourceDistribution
metadata:
  name: registry-creds
spec:
  resource:
    apiVersion: v1
    kind: Secret
    metadata:
      name: registry-creds
    type: Opaque
    stringData:
      token: ours
  targets:
    includedNamespaces:
      list:
      - name: legacy
    namespaceLabelSelector:
      matchLabels:
        shared-creds: "yes"
YAML

synced() {
  [[ "$("$KUBECTL" get distributor registry-creds -o jsonpath='{.status.desired}/{.status.succeeded}/{.status.failed}')" == "$1" ]]
}
wait_for 30 "TOTAL 2, SUCCEED 1, FAILED 1" synced 2/1/1
table=$("$KUBECTL" get distributor registry-creds)
assert_contains "$table" "TOTAL" "kubectl get's columns"
assert_contains "$table" "SUCCEED" "kubectl get's columns"
token=$("$KUBECTL" get secret registry-creds -n app-1 -o jsonpath='{.data.token}' | base64 -d)
assert_eq "$token" "ours" "the copy in app-1"
conflict=$("$KUBECTL" get distributor registry-creds -o jsonpath='{.status.conditions[?(@.type=="ConflictOccurred")].failedNamespace[0]}')
assert_eq "$conflict" "legacy" "the conflicting namespace in ConflictOccurred"
theirs=$("$KUBECTL" get secret registry-creds -n legacy -o jsonpath='{.data.token}' | base64 -d)
assert_eq "$theirs" "theirs" "the foreign Secret left alone"
pass "a Secret distributed by label and by name; a same-named foreign Secret reported, untouched"

"$KUBECTL" label namespace app-2 shared-creds=yes >/dev/null
wait_for 30 "TOTAL 3, SUCCEED 2 after labelling app-2 in" synced 3/2/1
"$KUBECTL" get secret registry-creds -n app-2 >/dev/null || fail "the copy in app-2"
"$KUBECTL" label namespace app-1 shared-creds- >/dev/null
gone() { ! "$KUBECTL" get secret registry-creds -n app-1 >/dev/null 2>&1; }
wait_for 30 "the copy in app-1 deleted once app-1 is labelled out" gone
pass "namespaces labelled in get a copy, labelled out lose it"

refused=$("$KUBECTL" apply -f - 2>&1 <<'YAML' || true
apiVersion: apps.kruise.io/v1alpha1
kind: ResourceDistribution
metadata:
  name: not-a-secret
spec:
  resource:
    apiVersion: v1
    kind: Pod
    metadata:
      name: p
  targets:
    allNamespaces: true
YAML
)
assert_contains "$refused" "vresourcedistribution.kb.io" "the webhook refusing a Pod"
assert_contains "$refused" "unknown or unsupported resource GroupKind, only support [Secret ConfigMap]" "OpenKruise's message"
refused=$("$KUBECTL" apply -f - 2>&1 <<'YAML' || true
apiVersion: apps.kruise.io/v1alpha1
kind: ResourceDistribution
metadata:
  name: ambiguous
spec:
  resource:
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: c
  targets:
    includedNamespaces: {list: [{name: app-1}]}
    excludedNamespaces: {list: [{name: app-1}]}
YAML
)
assert_contains "$refused" "ambiguous targets because namespace [app-1] is in both IncludedNamespaces.List and ExcludedNamespaces.List" "OpenKruise's message"
refused=$("$KUBECTL" apply -f - 2>&1 <<'YAML' || true
apiVersion: apps.kruise.io/v1alpha1
kind: ResourceDistribution
metadata:
  name: bad-key
spec:
  resource:
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: c
    data:
      "not a key": x
  targets:
    allNamespaces: true
YAML
)
assert_contains "$refused" "failed to dry-run to validate spec.resource" "the dry run's refusal"
"$KUBECTL" patch distributor registry-creds --type merge -p '{"spec":{"resource":{"metadata":{"name":"renamed"}}}}' >"$WORK/rename.log" 2>&1 && fail "a renamed resource was accepted"
assert_contains "$(cat "$WORK/rename.log")" "resource apiVersion, kind, and name are immutable" "OpenKruise's message"
pass "the webhook refuses another kind, ambiguous targets, a resource the API server refuses and a rename"

"$KUBECTL" delete distributor registry-creds >/dev/null
collected() { ! "$KUBECTL" get secret registry-creds -n app-2 >/dev/null 2>&1; }
wait_for 30 "the copies collected with the distribution" collected
theirs=$("$KUBECTL" get secret registry-creds -n legacy -o jsonpath='{.data.token}' | base64 -d)
assert_eq "$theirs" "theirs" "the foreign Secret still there"
pass "deleting the distribution deletes its copies, and only them"
