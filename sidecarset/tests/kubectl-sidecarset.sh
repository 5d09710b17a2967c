#!/usr/bin/env bash
# The OpenKruise SidecarSet walkthrough with a real kubectl on `kruise-playground up` (its
# default `--controllers all`: kruise-sidecarset, kruise-webhook and kruise-cloneset
# in-process):
# the v1alpha1 test-sidecarset manifest applies unchanged, pods of a CloneSet get sidecar1
# injected, an image change upgrades the sidecar in place (same pods, app untouched), and a
# canary selector upgrades only the labelled pod.
#
#   KRUISE_BIN_DIR=.../debug sidecarset/tests/kubectl-sidecarset.sh
set -euo pipefail

# shellcheck source=testkit/scenario-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../testkit/scenario-lib.sh"
scenario_init

start_cluster kruise-playground
banner=$(grep '^controllers running' "$CLUSTER_LOG")
for name in sidecarset webhook; do assert_contains "$banner" " $name" "up's banner"; done

# OpenKruise's config/samples SidecarSet, applied unchanged: its resourcesPolicy spells two
# fields the published CRD does not have (targetContainerMode, resourceExpr), so kubectl's
# default strict field validation refuses it as kube-apiserver refuses it with OpenKruise's
# CRD installed.
sample_out=$("$KUBECTL" apply -f "$(dirname "${BASH_SOURCE[0]}")/fixtures/openkruise/apps_v1alpha1_sidecarset.yaml" 2>&1 || true)
assert_contains "$sample_out" 'strict decoding error: unknown field "spec.containers[1].resourcesPolicy.resourceExpr", unknown field "spec.containers[1].resourcesPolicy.targetContainerMode"' \
  "the config/samples SidecarSet is refused for its unknown fields"
pass "OpenKruise's config/samples SidecarSet applies unchanged and is refused as OpenKruise's CRD refuses it"

# The same sample with those two field names spelled as the CRD has them: admitted, and its
# dynamic-resource-sidecar gets resources computed from the pod's large-engine-v4 container
# (max(cpu*50%, 50m) over a 200m limit and a 60m request); a pod without that container is
# refused with OpenKruise's message.
sed -e 's/targetContainerMode:/targetContainersMode:/' -e 's/resourceExpr:/resourcesExpr:/' \
  "$(dirname "${BASH_SOURCE[0]}")/fixtures/openkruise/apps_v1alpha1_sidecarset.yaml" | "$KUBECTL" apply -f - >/dev/null
guestbook_pod() { # NAME CONTAINER
  cat <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $1
  labels: {app.kubernetes.io/name: guestbook-with-sidecar}
spec:
  containers:
  - name: $2
    image: nginx:alpine
    resources:
      limits: {cpu: 200m, memory: 1Gi}
      requests: {cpu: 60m, memory: 512Mi}
YAML
}
injected_engine_pod() {
  guestbook_pod engine-1 large-engine-v4 | "$KUBECTL" apply -f - >/dev/null 2>&1 || return 1
  [[ -n "$("$KUBECTL" get pod engine-1 -o jsonpath='{.spec.containers[?(@.name=="dynamic-resource-sidecar")].name}')" ]] \
    || { "$KUBECTL" delete pod engine-1 --wait=false >/dev/null; false; }
}
wait_for 60 "a guestbook pod with the sidecars injected" injected_engine_pod
assert_eq "$("$KUBECTL" get pod engine-1 -o jsonpath='{.spec.containers[?(@.name=="dynamic-resource-sidecar")].resources}')" \
  '{"limits":{"cpu":"100m","memory":"200Mi"},"requests":{"cpu":"50m","memory":"100Mi"}}' \
  "dynamic-resource-sidecar resources computed from large-engine-v4"
refused=$(guestbook_pod engine-2 small-engine | "$KUBECTL" apply -f - 2>&1 || true)
assert_contains "$refused" 'no containers match the regex pattern "^large-engine-v4$"' \
  "a pod without large-engine-v4 is refused"
"$KUBECTL" delete pod engine-1 --wait=false >/dev/null
"$KUBECTL" delete sidecarset guestbook-sidecar >/dev/null
pass "the corrected config/samples SidecarSet sizes its sidecar from large-engine-v4 and refuses pods without it"

# OpenKruise's test-sidecarset, as its docs publish it (v1alpha1). The defaulting webhook
# may still be registering: apply until the stored object carries its hash annotation.
sidecarset_yaml() {
  cat <<YAML
apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata:
  name: test-sidecarset
spec:
  selector:
    matchLabels:
      app: nginx
  updateStrategy:
    type: RollingUpdate
    maxUnavailable: 1
  containers:
  - name: sidecar1
    image: $1
    command: ["sleep", "999d"]
    volumeMounts:
    - name: log-volume
      mountPath: /var/log
  volumes:
  - name: log-volume
    emptyDir: {}
YAML
}
hashed() {
  sidecarset_yaml centos:6.7 | "$KUBECTL" apply -f - >/dev/null
  [[ -n "$("$KUBECTL" get sidecarset test-sidecarset -o jsonpath='{.metadata.annotations.kruise\.io/sidecarset-hash}')" ]] \
    || { "$KUBECTL" delete sidecarset test-sidecarset >/dev/null; false; }
}
wait_for 60 "test-sidecarset defaulted by its webhook" hashed
assert_eq "$("$KUBECTL" get sidecarsets.v1beta1.apps.kruise.io test-sidecarset -o jsonpath='{.spec.containers[0].podInjectPolicy}')" \
  "BeforeAppContainer" "defaulted podInjectPolicy (v1beta1 view)"
pass "the v1alpha1 test-sidecarset applies unchanged and is defaulted"

# kruise-webhook narrows its pod webhook to the SidecarSet's selector once it sees it.
entry() {
  "$KUBECTL" get mutatingwebhookconfiguration kruise-mutating-webhook-configuration \
    -o jsonpath='{range .webhooks[*]}{.objectSelector.matchLabels.app}{"\n"}{end}' | grep -x nginx >/dev/null
}
wait_for 60 "the pod webhook entry for app=nginx" entry
pass "kruise-webhook scoped a pod webhook entry to app=nginx"

"$KUBECTL" apply -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: nginx
spec:
  replicas: 3
  selector:
    matchLabels: {app: nginx}
  template:
    metadata:
      labels: {app: nginx}
    spec:
      containers:
      - name: nginx
        image: nginx:alpine
YAML
sidecarset_counts() { # MATCHED UPDATED READY from kubectl get sidecarset
  "$KUBECTL" get sidecarset test-sidecarset --no-headers | awk '{print $2, $3, $4}'
}
counts_are() { [[ "$(sidecarset_counts)" == "$1" ]]; }
wait_for 90 "3 matched, updated, ready" counts_are "3 3 3"
containers=$("$KUBECTL" get pods -l app=nginx -o jsonpath='{range .items[*]}{.spec.containers[*].name}{"\n"}{end}' | sort -u)
assert_eq "$containers" "sidecar1 nginx" "containers of every pod (sidecar first)"
assert_eq "$("$KUBECTL" get pods -l app=nginx -o jsonpath='{.items[0].spec.volumes[?(@.name=="log-volume")].name}')" \
  "log-volume" "the sidecar's volume merged into the pod"
assert_contains "$("$KUBECTL" get pods -l app=nginx -o jsonpath='{.items[0].spec.containers[0].env}')" \
  '"name":"IS_INJECTED","value":"true"' "IS_INJECTED env"
assert_contains "$("$KUBECTL" get sidecarset)" "MATCHED" "printer columns"
pass "every pod of the CloneSet got sidecar1 injected; kubectl get sidecarset shows 3 3 3"

# Its revisions live in the kruise namespace (POD_NAMESPACE, unset here: kruise-system), not
# in the namespace `up` names for the webhook Service (default).
revisions_in() {
  "$KUBECTL" get controllerrevisions -n "$1" -l kruise.io/sidecarset-name=test-sidecarset -o name
}
has_revision() { [[ -n "$(revisions_in kruise-system)" ]]; }
wait_for 30 "a test-sidecarset revision in kruise-system" has_revision
assert_eq "$(revisions_in default)" "" "no SidecarSet revision in the webhook's namespace"
pass "SidecarSet revisions are kept in kruise-system"

before=$("$KUBECTL" get pods -l app=nginx -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.uid}{"\n"}{end}' | sort)

# The image patch: only the image changes, so the sidecar is upgraded in place.
sidecarset_yaml centos:7 | "$KUBECTL" apply -f - >/dev/null
images_are() {
  [[ "$("$KUBECTL" get pods -l app=nginx -o jsonpath='{range .items[*]}{.spec.containers[0].image}{"\n"}{end}' | sort -u)" == "$1" ]]
}
wait_for 90 "every sidecar on centos:7" images_are "centos:7"
wait_for 60 "3 matched, updated, ready" counts_are "3 3 3"
after=$("$KUBECTL" get pods -l app=nginx -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.uid}{"\n"}{end}' | sort)
assert_eq "$after" "$before" "same pod names and uids"
restarts=$("$KUBECTL" get pods -l app=nginx -o jsonpath='{range .items[*]}{.status.containerStatuses[?(@.name=="sidecar1")].restartCount}/{.status.containerStatuses[?(@.name=="nginx")].restartCount}{"\n"}{end}' | sort -u)
assert_eq "$restarts" "1/0" "sidecar1 restarted once, nginx not at all"
assert_eq "$("$KUBECTL" get pods -l app=nginx -o jsonpath='{.items[0].status.conditions[?(@.type=="SidecarSetUpgradable")].status}')" \
  "True" "SidecarSetUpgradable condition"
pass "the image patch upgraded sidecar1 in place on all 3 pods (same names and uids, nginx untouched)"

# Canary by label: only pods labelled canary.release=true take the next image.
canary=$("$KUBECTL" get pods -l app=nginx -o jsonpath='{.items[0].metadata.name}')
"$KUBECTL" label pod "$canary" canary.release=true >/dev/null
"$KUBECTL" patch sidecarset test-sidecarset --type merge \
  -p '{"spec":{"updateStrategy":{"selector":{"matchLabels":{"canary.release":"true"}}}}}' >/dev/null
sidecarset_yaml centos:8 | "$KUBECTL" apply -f - >/dev/null
wait_for 60 "1 of 3 updated" counts_are "3 1 3"
upgraded=$("$KUBECTL" get pods -l app=nginx -o jsonpath='{range .items[?(@.spec.containers[0].image=="centos:8")]}{.metadata.name}{"\n"}{end}')
assert_eq "$upgraded" "$canary" "only the canary pod upgraded"
pass "a canary selector upgrades only the labelled pod"

"$KUBECTL" patch sidecarset test-sidecarset --type merge -p '{"spec":{"updateStrategy":{"selector":null}}}' >/dev/null
wait_for 90 "every sidecar on centos:8" images_are "centos:8"
wait_for 60 "3 matched, updated, ready" counts_are "3 3 3"
pass "with the selector removed, the rest follow"
