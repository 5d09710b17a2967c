#!/usr/bin/env bash
# Smoke test of a control plane started by up.sh: the API server answers,
# the controller manager's controllers act on what is created, the scheduler
# looks at pods and binds one to a Node object, CRDs serve custom objects,
# and admission and conversion webhooks are called. Uses kubectl from PATH and
# KUBECONFIG from the environment. With no kubelets, pods never run; that
# is expected here. Prints one line per check, then `N passed, M failed`, and
# exits non-zero if any check failed.
set -uo pipefail

: "${KUBECONFIG:?set KUBECONFIG, e.g. eval \"\$(up.sh start DIR)\"}"
timeout_seconds="${SMOKE_TIMEOUT:-60}"
namespace="smoke-$(date +%s)-$$"
group="smoke.kruise-rs.test"
# shellcheck source=e2e/realcluster/smoke-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/smoke-lib.sh"

k() { kubectl --request-timeout=10s "$@"; }

pods_owned_by_replicaset_of() {
	local deployment=$1 replicaset owner
	replicaset=$(k -n "$namespace" get replicasets -l "app=$deployment" \
		-o jsonpath='{.items[0].metadata.name}') || return 1
	[[ -n $replicaset ]] || return 1
	owner=$(k -n "$namespace" get pods -l "app=$deployment" \
		-o jsonpath='{range .items[*]}{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}{"\n"}{end}' |
		sort -u) || return 1
	equals "ReplicaSet/$replicaset" echo "$owner"
}

pod_count() {
	k -n "$namespace" get pods -l "app=$1" -o name | wc -l | tr -d ' '
}

cleanup() {
	k delete namespace "$namespace" --wait=false >/dev/null 2>&1
	k delete crd "widgets.$group" "gadgets.$group" --wait=false >/dev/null 2>&1
	k delete validatingwebhookconfiguration "$namespace" >/dev/null 2>&1
	k delete node "$namespace" --wait=false >/dev/null 2>&1
}
trap cleanup EXIT

# --- API server and namespaces ---------------------------------------------
eventually "kubectl get ns lists default and kube-system" \
	bash -c 'kubectl get ns -o name | grep -qx namespace/default && kubectl get ns -o name | grep -qx namespace/kube-system'
if k create namespace "$namespace" >/dev/null; then
	pass "namespace $namespace created"
else
	fail "namespace $namespace created"
fi
eventually "service account controller adds the default service account" \
	k -n "$namespace" get serviceaccount default
eventually "root CA publisher adds kube-root-ca.crt" \
	k -n "$namespace" get configmap kube-root-ca.crt

# --- Deployment -> ReplicaSet -> Pods (Pending: no nodes) ------------------
k -n "$namespace" apply -f - >/dev/null <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: main
        image: registry.k8s.io/pause:3.10
EOF
eventually "deployment controller creates a ReplicaSet owned by the Deployment" \
	equals "Deployment/web" k -n "$namespace" get replicasets -l app=web \
	-o jsonpath='{.items[0].metadata.ownerReferences[0].kind}/{.items[0].metadata.ownerReferences[0].name}'
eventually "replicaset controller creates 3 pods" equals 3 pod_count web
eventually "every pod is owned by that ReplicaSet" pods_owned_by_replicaset_of web
eventually "scheduler marks the pods unschedulable (no nodes yet)" \
	bash -c "kubectl -n $namespace get pods -l app=web \
		-o jsonpath='{range .items[*]}{.status.conditions[?(@.type==\"PodScheduled\")].reason}{\"\n\"}{end}' |
		sort -u | grep -qx Unschedulable"
eventually "deployment status counts 3 replicas" \
	equals 3 k -n "$namespace" get deployment web -o jsonpath='{.status.replicas}'
k -n "$namespace" scale deployment web --replicas=1 >/dev/null
eventually "scaling the Deployment to 1 leaves 1 pod" equals 1 pod_count web

# --- The scheduler binds a pod to a Node object (no kubelet behind it) ------
# The node is tainted so only the pod made for it goes there; everything else
# stays Pending. TaintNodesByCondition adds not-ready on creation; with no
# node lifecycle controller nothing else would take it off.
node="$namespace"
k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $node
  labels: {kubernetes.io/hostname: $node}
spec:
  taints:
  - {key: $group/only, value: "true", effect: NoSchedule}
status:
  capacity: {cpu: "4", memory: 8Gi, pods: "110"}
  allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
  conditions:
  - {type: Ready, status: "True", reason: KubeletReady, message: "no kubelet: smoke.sh"}
EOF
k taint node "$node" node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1
k -n "$namespace" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: placed
spec:
  tolerations:
  - {key: $group/only, operator: Exists, effect: NoSchedule}
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
EOF
eventually "scheduler binds a pod to a Ready, schedulable Node" \
	equals "$node" k -n "$namespace" get pod placed -o jsonpath='{.spec.nodeName}'
# No kubelet would confirm a graceful deletion, so the bound pod goes at once.
k -n "$namespace" delete pod placed --grace-period=0 --force >/dev/null 2>&1
k delete node "$node" >/dev/null

# --- StatefulSet and Job ---------------------------------------------------
k -n "$namespace" apply -f - >/dev/null <<'EOF'
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  replicas: 2
  serviceName: db
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
      - name: main
        image: registry.k8s.io/pause:3.10
---
apiVersion: batch/v1
kind: Job
metadata:
  name: once
spec:
  template:
    metadata:
      labels: {app: once}
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: registry.k8s.io/pause:3.10
EOF
# OrderedReady: db-1 waits for db-0 to become Ready, which needs a node.
eventually "statefulset controller creates db-0 and only db-0" equals "pod/db-0" \
	k -n "$namespace" get pods -l app=db -o name
eventually "job controller creates the Job's pod" equals 1 pod_count once

# --- CustomResourceDefinition and a custom object --------------------------
k apply -f - >/dev/null <<EOF
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.$group
spec:
  group: $group
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
EOF
eventually "CRD becomes Established" \
	k wait --for=condition=Established --timeout=5s "crd/widgets.$group"
widget_file=$(mktemp)
cat >"$widget_file" <<EOF
apiVersion: $group/v1
kind: Widget
metadata:
  name: first
spec:
  size: 3
EOF
# Retried: kubectl's discovery may not know the new group for a moment.
eventually "custom object is created" k -n "$namespace" apply -f "$widget_file"
rm -f "$widget_file"
eventually "custom object reads back with its spec" \
	equals 3 k -n "$namespace" get "widgets.$group" first -o jsonpath='{.spec.size}'

# --- Admission and conversion webhooks are called --------------------------
# Nothing listens on 127.0.0.1:1, so a request that reaches either webhook
# fails with the API server's "failed calling webhook" / conversion error;
# that error proves the API server called out. Both are scoped to this run.
k apply -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: $namespace
webhooks:
- name: reject.$group
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 2
  clientConfig:
    url: https://127.0.0.1:1/validate
  namespaceSelector:
    matchLabels: {kubernetes.io/metadata.name: $namespace}
  objectSelector:
    matchLabels: {smoke-webhook: call}
  rules:
  - apiGroups: [""]
    apiVersions: [v1]
    operations: [CREATE]
    resources: [configmaps]
EOF
webhook_rejects() {
	local output
	output=$(k -n "$namespace" apply --dry-run=server -f - 2>&1 <<EOW
apiVersion: v1
kind: ConfigMap
metadata:
  name: called
  labels: {smoke-webhook: call}
EOW
	)
	echo "$output"
	[[ $output == *"failed calling webhook"* ]]
}
eventually "validating admission webhook is called (and fails closed)" webhook_rejects
if k -n "$namespace" create configmap not-selected >/dev/null; then
	pass "objects the webhook does not select are admitted"
else
	fail "objects the webhook does not select are admitted"
fi
k delete validatingwebhookconfiguration "$namespace" >/dev/null

k apply -f - >/dev/null <<EOF
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.$group
spec:
  group: $group
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig:
        url: https://127.0.0.1:1/convert
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
EOF
gadget_file=$(mktemp)
cat >"$gadget_file" <<EOF
apiVersion: $group/v1
kind: Gadget
metadata:
  name: first
EOF
eventually "object of a CRD with a conversion webhook is stored at its storage version" \
	bash -c "kubectl wait --for=condition=Established --timeout=5s crd/gadgets.$group &&
		kubectl -n $namespace apply -f $gadget_file"
rm -f "$gadget_file"
conversion_webhook_called() {
	local output
	output=$(k -n "$namespace" get "gadgets.v2.$group" first -o name 2>&1)
	echo "$output"
	[[ $output == *"conversion webhook"* ]]
}
eventually "reading it at another version calls the conversion webhook" conversion_webhook_called
# Gone before the namespace is deleted: the namespace controller would read
# gadgets at the preferred version v2 and stall on the failing conversion.
if k delete crd "gadgets.$group" --timeout=30s >/dev/null; then
	pass "CRD with the failing conversion webhook and its object are deleted"
else
	fail "CRD with the failing conversion webhook and its object are deleted"
fi

# --- Garbage collection and namespace deletion ----------------------------
k -n "$namespace" delete deployment web --wait=false >/dev/null
# A successful, empty list: a failing kubectl must not count as "gone".
none_left_of_web() {
	local output
	output=$(k -n "$namespace" get replicasets,pods -l app=web -o name) || return 1
	echo "$output"
	[[ -z $output ]]
}
eventually "garbage collector removes the Deployment's ReplicaSet and pods" none_left_of_web
namespace_not_found() {
	local output
	output=$(k get namespace "$namespace" -o name 2>&1)
	echo "$output"
	[[ $output == *"(NotFound)"* ]]
}
k delete namespace "$namespace" --wait=false >/dev/null
eventually "namespace controller empties and removes the namespace" namespace_not_found

echo "$passed passed, $failed failed"
((failed == 0))
