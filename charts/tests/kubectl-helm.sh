#!/usr/bin/env bash
# The umbrella chart installed with helm into the simulated cluster (`kruise-sim up`, no
# controllers), kubectl and helm as the real clients: install into a namespace created
# beforehand without special labels creates every rendered object; `helm upgrade
# --reuse-values` of one family's image changes only that family's Deployment; `helm
# uninstall` keeps the CRDs and the CloneSets (OpenKruise charts#20, K#1095, K#1840).
# The simulated kubelet does not run the images: the Deployments stay unavailable.
set -euo pipefail
# shellcheck source=testkit/scenario-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../testkit/scenario-lib.sh"
scenario_init
HELM="${HELM:-helm}"
PYTHON="${PYTHON:-python3}"
chart="$ROOT/charts/kruise-rs"
export HELM_CACHE_HOME="$WORK/helm-cache" HELM_CONFIG_HOME="$WORK/helm-config" HELM_DATA_HOME="$WORK/helm-data"
# Any namespace the user creates (kruise-sim, like a kubeadm cluster with OpenKruise's
# habits, already has kruise-system).
NS=kruise-rs

start_cluster kruise-sim --nodes 1

# A CloneSet from before the install (its CRD applied by hand, as a migration would find it).
"$KUBECTL" apply -f - >/dev/null <<<"$("$(kruise_bin kruise-cloneset)" crd)"
"$KUBECTL" apply -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: {name: kept, namespace: default}
spec:
  replicas: 0
  selector: {matchLabels: {app: kept}}
  template:
    metadata: {labels: {app: kept}}
    spec: {containers: [{name: main, image: busybox:1.36}]}
YAML

"$KUBECTL" create namespace "$NS" >/dev/null
"$HELM" install kr "$chart" -n "$NS" >"$WORK/install.log" 2>&1 || { cat "$WORK/install.log" >&2; fail "helm install"; }
"$HELM" get manifest kr -n "$NS" >"$WORK/manifest.yaml"
objects=$("$PYTHON" - "$WORK/manifest.yaml" <<'PY'
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d:
        ns = d["metadata"].get("namespace", "")
        print(f'{d["kind"]} {d["metadata"]["name"]} {ns}')
PY
)
count=0
while read -r kind name ns; do
  "$KUBECTL" get "$kind" "$name" ${ns:+-n "$ns"} -o name >/dev/null 2>&1 || fail "helm install did not create $kind $name"
  count=$((count + 1))
done <<<"$objects"
(( count >= 20 )) || fail "only $count objects rendered"
for crd in clonesets.apps.kruise.io sidecarsets.apps.kruise.io; do
  "$KUBECTL" get crd "$crd" -o name >/dev/null || fail "CRD $crd not installed"
done
pass "helm install into a pre-created namespace creates all $count rendered objects and the CRDs"

# resource_versions: kind/name resourceVersion of every object of the release.
resource_versions() {
  while read -r kind name ns; do
    echo "$kind/$name $("$KUBECTL" get "$kind" "$name" ${ns:+-n "$ns"} -o jsonpath='{.metadata.resourceVersion}')"
  done <<<"$objects"
}
resource_versions >"$WORK/before"
"$HELM" upgrade kr "$chart" -n "$NS" --reuse-values --set cloneset.image.tag=0.1.1-upgrade >"$WORK/upgrade.log" 2>&1 \
  || { cat "$WORK/upgrade.log" >&2; fail "helm upgrade"; }
resource_versions >"$WORK/after"
changed=$(diff "$WORK/before" "$WORK/after" | grep '^>' | cut -d' ' -f2 | tr '\n' ' ' || true)
assert_eq "$changed" "Deployment/kruise-cloneset " "objects helm upgrade of cloneset's image changed"
assert_eq "$("$KUBECTL" get deploy kruise-cloneset -n "$NS" -o jsonpath='{.spec.template.spec.containers[0].image}')" \
  "ghcr.io/kruise-rs/kruise-cloneset:0.1.1-upgrade" "kruise-cloneset's image after the upgrade"
pass "helm upgrade --reuse-values of one family changes only its Deployment"

"$HELM" uninstall kr -n "$NS" >"$WORK/uninstall.log" 2>&1 || { cat "$WORK/uninstall.log" >&2; fail "helm uninstall"; }
for crd in clonesets.apps.kruise.io sidecarsets.apps.kruise.io; do
  "$KUBECTL" get crd "$crd" -o name >/dev/null || fail "helm uninstall deleted CRD $crd"
done
"$KUBECTL" get clone kept -n default -o name >/dev/null || fail "helm uninstall deleted the CloneSet"
# The namespace's `default` ServiceAccount is kube-controller-manager's (and kruise-sim's), not the release's.
left=$("$KUBECTL" get deploy,svc,sa,role,rolebinding,pdb -n "$NS" -o name | grep -cvx 'serviceaccount/default' || true)
assert_eq "$left" "0" "release objects left in $NS after uninstall"
pass "helm uninstall removes the release and keeps the CRDs and the CloneSet"
