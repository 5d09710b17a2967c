#!/usr/bin/env bash
# Least-privilege RBAC, checked against what the code calls: kruise-sim with `--authorize`
# (requests with a token held to the stored Roles and ClusterRoles, 403 as kube-apiserver),
# the chart installed with helm (its ServiceAccounts, roles and bindings), and each
# family's binary run as its ServiceAccount (leader election, certificates, webhook
# publishing, caches, controllers). A CloneSet is created, updated in place and scaled
# down, an Advanced StatefulSet with a claim template likewise, a BroadcastJob runs on
# every node, a SidecarSet injects into new pods, an Advanced DaemonSet rolls out, and the
# node agents (as their own ServiceAccounts, on the simulated nodes' CRI sockets) pull an
# ImagePullJob's image and recreate a container for a ContainerRecreateRequest, and a
# ResourceDistribution copies a Secret into two namespaces; no request of any family or
# agent may be forbidden. ResourceDistribution, off by default, is enabled for it.
set -euo pipefail
# shellcheck source=testkit/scenario-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../testkit/scenario-lib.sh"
scenario_init
HELM="${HELM:-helm}"
export HELM_CACHE_HOME="$WORK/helm-cache" HELM_CONFIG_HOME="$WORK/helm-config" HELM_DATA_HOME="$WORK/helm-data"
NS=kruise-rs

start_cluster kruise-sim --nodes 2 --authorize --cri-dir "$WORK/cri"
"$KUBECTL" create namespace "$NS" >/dev/null
"$HELM" install kr "$ROOT/charts/kruise-rs" -n "$NS" --set resourcedistribution.enabled=true >"$WORK/install.log" 2>&1 || { cat "$WORK/install.log" >&2; fail "helm install"; }

# start_as FAMILY: kruise-FAMILY as its ServiceAccount (a kubeconfig whose token names it),
# with the chart's arguments; webhooks reached on 127.0.0.1 (no cluster network here).
start_as() {
  local family="$1" bin health kubeconfig="$WORK/$1.kubeconfig"
  bin=$(kruise_bin "kruise-$family") || exit 1
  "$KUBECTL" config view --raw --minify >"$kubeconfig"
  KUBECONFIG="$kubeconfig" "$KUBECTL" config set-credentials "kruise-$family" \
    --token="system:serviceaccount:$NS:kruise-$family" >/dev/null
  KUBECONFIG="$kubeconfig" "$KUBECTL" config set-context --current --user="kruise-$family" >/dev/null
  health=$(free_port)
  # POD_NAMESPACE as the chart's Deployment sets it from the downward API.
  POD_NAMESPACE="$NS" "$bin" run --kubeconfig "$kubeconfig" --leader-elect=true --leader-elect-namespace "$NS" \
    --metrics-addr "127.0.0.1:$(free_port)" --health-addr "127.0.0.1:$health" \
    --webhook-port "$(free_port)" --webhook-host 127.0.0.1 --webhook-bind-address 127.0.0.1 \
    --webhook-namespace "$NS" >"$WORK/kruise-$family.log" 2>&1 &
  PIDS+=($!)
  wait_for 60 "kruise-$family ready as its ServiceAccount" curl -sf "http://127.0.0.1:$health/readyz"
}
families=(cloneset statefulset broadcastjob daemonset imagepull crr protection resourcedistribution sidecarset webhook)
for family in "${families[@]}"; do start_as "$family"; done
lease_holder() { "$KUBECTL" get lease "kruise-$1" -n "$NS" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
for family in "${families[@]}"; do
  wait_for 30 "kruise-$family holding its lease" test -n "$(lease_holder "$family")"
done
pass "every family starts as its ServiceAccount: lease, certificates, webhooks, caches"

# agent_as FAMILY NODE: `kruise-FAMILY agent` for NODE as the agent's ServiceAccount, on the
# node's fake CRI socket.
agent_as() {
  local family="$1" node="$2" bin kubeconfig="$WORK/$1-agent.kubeconfig"
  bin=$(kruise_bin "kruise-$family") || exit 1
  "$KUBECTL" config view --raw --minify >"$kubeconfig"
  KUBECONFIG="$kubeconfig" "$KUBECTL" config set-credentials "kruise-$family-agent" \
    --token="system:serviceaccount:$NS:kruise-$family-agent" >/dev/null
  KUBECONFIG="$kubeconfig" "$KUBECTL" config set-context --current --user="kruise-$family-agent" >/dev/null
  "$bin" agent --kubeconfig "$kubeconfig" --node-name "$node" --cri-socket "$WORK/cri/$node.sock" \
    >>"$WORK/kruise-$family-agent.log" 2>&1 &
  PIDS+=($!)
}
for node in sim-node-0 sim-node-1; do agent_as imagepull "$node"; agent_as crr "$node"; done

"$KUBECTL" apply -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1beta1
kind: SidecarSet
metadata: {name: logger}
spec:
  selector: {matchLabels: {side: "yes"}}
  containers:
  - {name: logger, image: busybox:1.36}
---
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: {name: demo, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: demo}}
  updateStrategy: {type: InPlaceIfPossible}
  template:
    metadata: {labels: {app: demo, side: "yes"}}
    spec:
      containers:
      - {name: main, image: busybox:1.36}
YAML
wait_for 60 "2 ready CloneSet pods" pods_ready app=demo 2
containers=$("$KUBECTL" get pods -l app=demo -o jsonpath='{.items[0].spec.containers[*].name}')
assert_contains "$containers" "logger" "the SidecarSet's container in a CloneSet pod"
uids=$("$KUBECTL" get pods -l app=demo -o jsonpath='{.items[*].metadata.uid}')
"$KUBECTL" patch clone demo --type merge -p '{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"busybox:1.37"}]}}}}' >/dev/null
updated() {
  [[ "$("$KUBECTL" get pods -l app=demo -o jsonpath='{.items[*].metadata.uid}')" == "$uids" ]] &&
  status_observed clone demo && [[ "$("$KUBECTL" get clone demo -o jsonpath='{.status.updatedReadyReplicas}')" == 2 ]]
}
wait_for 60 "an in-place update of both pods" updated
"$KUBECTL" scale clone demo --replicas=1 >/dev/null
wait_for 60 "1 pod after scaling down" pods_ready app=demo 1
"$KUBECTL" apply -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1beta1
kind: StatefulSet
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  serviceName: web
  selector: {matchLabels: {app: web}}
  podManagementPolicy: Parallel
  updateStrategy:
    type: RollingUpdate
    rollingUpdate: {podUpdatePolicy: InPlaceIfPossible, maxUnavailable: 2}
  template:
    metadata: {labels: {app: web}}
    spec:
      readinessGates: [{conditionType: InPlaceUpdateReady}]
      containers:
      - name: main
        image: busybox:1.36
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
YAML
wait_for 60 "2 ready StatefulSet pods" pods_ready app=web 2
"$KUBECTL" get pvc data-web-0 data-web-1 -o name >/dev/null || fail "the StatefulSet's claims"
web_uids=$("$KUBECTL" get pods -l app=web -o jsonpath='{.items[*].metadata.uid}')
"$KUBECTL" patch asts web --type json -p '[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"busybox:1.37"}]' >/dev/null
web_updated() {
  [[ "$("$KUBECTL" get pods -l app=web -o jsonpath='{.items[*].metadata.uid}')" == "$web_uids" ]] &&
  status_observed asts web && [[ "$("$KUBECTL" get asts web -o jsonpath='{.status.updatedReadyReplicas}')" == 2 ]]
}
wait_for 60 "an in-place update of both StatefulSet pods" web_updated
"$KUBECTL" scale asts web --replicas=1 >/dev/null
wait_for 60 "1 StatefulSet pod after scaling down" pods_ready app=web 1
"$KUBECTL" apply -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1alpha1
kind: BroadcastJob
metadata: {name: everywhere, namespace: default}
spec:
  completionPolicy: {type: Always}
  template:
    metadata:
      annotations: {sim.kruise.io/exit-after: 200ms}
    spec:
      restartPolicy: Never
      containers:
      - {name: once, image: busybox:1.36}
YAML
bcj_done() { [[ "$("$KUBECTL" get bcj everywhere -o jsonpath='{.status.succeeded}')" == 2 ]]; }
wait_for 60 "the BroadcastJob succeeding on both nodes" bcj_done
# A node gets its NodeImage once it has been Ready for --nodeimage-creation-delay (30 s); a
# job before that finds no node to pull on.
nodeimages() { [[ "$("$KUBECTL" get nodeimages -o name | wc -l)" == 2 ]]; }
wait_for 60 "a NodeImage per node" nodeimages
"$KUBECTL" apply -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1beta1
kind: DaemonSet
metadata: {name: node-exporter, namespace: default}
spec:
  selector: {matchLabels: {app: node-exporter}}
  template:
    metadata: {labels: {app: node-exporter}}
    spec:
      containers:
      - {name: main, image: busybox:1.36}
---
apiVersion: apps.kruise.io/v1beta1
kind: ImagePullJob
metadata: {name: prepull, namespace: default}
spec:
  image: busybox:1.37
  completionPolicy: {type: Always}
YAML
wait_for 60 "a DaemonSet pod on each node" pods_ready app=node-exporter 2
"$KUBECTL" patch ads node-exporter --type json -p '[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"busybox:1.37"}]' >/dev/null
ads_updated() { status_observed ads node-exporter && [[ "$("$KUBECTL" get ads node-exporter -o jsonpath='{.status.updatedNumberScheduled}')" == 2 ]] && pods_ready app=node-exporter 2; }
wait_for 60 "the DaemonSet updated on both nodes" ads_updated
ipj_done() { [[ "$("$KUBECTL" get imagepulljob prepull -o jsonpath='{.status.succeeded}')" == 2 ]]; }
wait_for 60 "the ImagePullJob pulled on both nodes through their agents" ipj_done
pod=$("$KUBECTL" get pods -l app=demo -o jsonpath='{.items[0].metadata.name}')
"$KUBECTL" apply -f - >/dev/null <<YAML
apiVersion: apps.kruise.io/v1beta1
kind: ContainerRecreateRequest
metadata: {name: restart-main, namespace: default}
spec:
  podName: $pod
  containers: [{name: main}]
YAML
crr_done() { [[ "$("$KUBECTL" get crr restart-main -o jsonpath='{.status.phase}')" == Completed ]]; }
wait_for 60 "the ContainerRecreateRequest completed by the node's agent" crr_done
"$KUBECTL" create namespace team-a >/dev/null
"$KUBECTL" create namespace team-b >/dev/null
"$KUBECTL" apply -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1alpha1
kind: ResourceDistribution
metadata: {name: shared-token}
spec:
  resource:
    apiVersion: v1
    kind: Secret
    metadata: {name: shared-token}
    stringData: {token: abc}
  targets:
    includedNamespaces: {list: [{name: team-a}, {name: team-b}]}
YAML
rd_done() { [[ "$("$KUBECTL" get resourcedistribution shared-token -o jsonpath='{.status.succeeded}')" == 2 ]]; }
wait_for 60 "the ResourceDistribution's Secret in both namespaces" rd_done
"$KUBECTL" get secret shared-token -n team-b -o name >/dev/null || fail "the distributed Secret in team-b"
pass "CloneSet and Advanced StatefulSet create, in-place update and scale-down, a BroadcastJob on every node, SidecarSet injection, an Advanced DaemonSet rollout, an ImagePullJob and a ContainerRecreateRequest through the node agents, a ResourceDistribution's copies, all as the ServiceAccounts"

forbidden=$(grep -h "forbidden by RBAC" "$CLUSTER_LOG" || true)
[[ -z "$forbidden" ]] || fail "requests the chart's roles do not allow:
$forbidden"
for log in "${families[@]/#/kruise-}" kruise-imagepull-agent kruise-crr-agent; do
  ! grep -qi "forbidden" "$WORK/$log.log" || fail "$log logged a forbidden request: $(grep -i forbidden "$WORK/$log.log" | head -3)"
done
pass "no request of any family was forbidden by the chart's RBAC"
