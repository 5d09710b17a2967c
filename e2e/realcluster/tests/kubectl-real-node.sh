#!/usr/bin/env bash
# In-place updates on a real node: the real kubelet, containerd and runc of `up.sh start DIR
# --real-node` restart only the container whose image changed. One simulated node runs
# beside the real one; every workload here is pinned to the real node. The families run
#   - as processes against the real control plane (REALNODE_INSTALL=processes, the
#     default, as the other realcluster scenarios run them), or
#   - as pods on the real node (REALNODE_INSTALL=helm): each family's image assembled by
#     images/build-oci.sh from its binary, pushed to the node's registry, and
#     charts/kruise-rs installed with `helm install`, as a user installs it.
#
#   eval "$(e2e/realcluster/up.sh start DIR --real-node)"
#   KRUISE_E2E_KUBECONFIG=$KUBECONFIG KRUISE_BIN_DIR=.../debug [REALNODE_INSTALL=helm] \
#     e2e/realcluster/tests/kubectl-real-node.sh
set -euo pipefail

# shellcheck source=testkit/scenario-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../../testkit/scenario-lib.sh"
[[ -n "${KRUISE_E2E_KUBECONFIG:-}" ]] || fail "set KRUISE_E2E_KUBECONFIG to a cluster started with up.sh start DIR --real-node"
node_env="$(dirname "$KRUISE_E2E_KUBECONFIG")/node/env"
[[ -f "$node_env" ]] || fail "no $node_env: start the cluster with up.sh start DIR --real-node"
# shellcheck disable=SC1090
source "$node_env"
scenario_init

HELM="${HELM:-helm}"
install="${REALNODE_INSTALL:-processes}"
# install_chart: every family's image in the node's registry, then the chart, one replica
# each, the node agents on the node's containerd socket; returns when every Deployment and
# DaemonSet is ready.
chart_families() { # the chart's subcharts but the library one
  local chart
  for chart in "$ROOT"/charts/kruise-rs/charts/*/; do
    chart=$(basename "$chart")
    [[ $chart == kruise-family ]] || echo "$chart"
  done
}
install_chart() {
  # A tag of this run's own: the node keeps images, and an earlier run's under the same tag
  # would be used instead (pull policy IfNotPresent).
  local family binary images="$WORK/images" tag="e2e-$E2E_NAMESPACE"
  mkdir -p "$images/bin"
  for family in $(chart_families); do
    # Debug builds without their debug info: a fifth of the size, the same code.
    for binary in "kruise-$family" "kruise-$family-agent"; do
      [[ -x "${KRUISE_BIN_DIR:-}/$binary" ]] || continue
      strip --strip-debug -o "$images/bin/$binary" "$KRUISE_BIN_DIR/$binary"
    done
    bash "$ROOT/images/build-oci.sh" "$images/bin/kruise-$family" "$images/$family" "$tag" >/dev/null
    skopeo copy -q --dest-tls-verify=false "oci:$images/$family:$tag" "docker://$REGISTRY/kruise-rs/kruise-$family:$tag"
  done
  local -a values=(--set "global.image.registry=$REGISTRY/kruise-rs" --set "global.image.tag=$tag")
  for family in $(chart_families); do
    values+=(--set "$family.replicas=1")
  done
  for family in crr imagepull; do
    values+=(--set "$family.agent.hostVarRun=$(dirname "$CRI_SOCK")" --set "$family.agent.criSocket=$(basename "$CRI_SOCK")")
  done
  "$HELM" install kruise-rs "$ROOT/charts/kruise-rs" -n kruise-system "${values[@]}" \
    --wait --timeout 5m >"$WORK/helm-install.log" 2>&1 || {
    cat "$WORK/helm-install.log" >&2
    "$KUBECTL" get pods -n kruise-system -o wide >&2
    fail "helm install"
  }
  HELM_RELEASE=kruise-rs
}
# At exit, after the scenario's own cleanup (its namespace while the families still run),
# the release goes too, so the next run installs afresh.
uninstall_chart() {
  [[ -z "${HELM_RELEASE:-}" ]] ||
    "$HELM" uninstall "$HELM_RELEASE" -n kruise-system --kubeconfig "$KRUISE_E2E_KUBECONFIG" --wait --timeout 2m >/dev/null 2>&1 || true
}
trap 'scenario_cleanup; uninstall_chart' EXIT
case "$install" in
  processes)
    start_cluster kruise-playground --nodes 1 --agent-node "$NODE=$CRI_SOCK" \
      --controllers cloneset,statefulset,daemonset,sidecarset,webhook,crr,imagepull
    pass "families running as processes against the real control plane, beside the real node $NODE"
    ;;
  helm)
    start_cluster kruise-sim --nodes 1
    install_chart
    pods=$("$KUBECTL" get pods -n kruise-system -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -cx "$NODE")
    pass "helm install: every family running as pods from its image ($pods on $NODE, node agents included)"
    ;;
  *) fail "REALNODE_INSTALL is processes or helm, not $install" ;;
esac

# A container that stops as soon as it is asked to (sh ignores SIGTERM as PID 1 otherwise,
# and every restart would wait out the grace period).
container() { # container NAME IMAGE
  printf '{"name": "%s", "image": "%s", "command": ["sh", "-c", "trap \\"exit 0\\" TERM; while true; do sleep 1; done"]}' "$1" "$2"
}
pod_spec() { # pod_spec [EXTRA_FIELDS]: two containers, main and side, pinned to the real node
  printf '{"nodeSelector": {"kubernetes.io/hostname": "%s"}, "containers": [%s, %s]%s}' \
    "$NODE" "$(container main "$IMAGE_1")" "$(container side "$IMAGE_1")" "${1:+, $1}"
}

# snapshot SELECTOR: per pod (by name): uid, IP, node, then each container's name, ID,
# restart count and image ID.
snapshot() {
  "$KUBECTL" get pods -l "$1" -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.uid} {.status.podIP} {.spec.nodeName}{range .status.containerStatuses[*]} {.name}={.containerID},{.restartCount},{.imageID}{end}{"\n"}{end}' | sort
}
# field POD CONTAINER PART: from a snapshot line, ID, restarts or imageID of CONTAINER.
field() {
  local line="$1" container="$2" part="$3" entry
  entry=$(tr ' ' '\n' <<<"$line" | grep "^$container=")
  entry=${entry#*=}
  case "$part" in
    id) cut -d, -f1 <<<"$entry" ;;
    restarts) cut -d, -f2 <<<"$entry" ;;
    image) cut -d, -f3 <<<"$entry" ;;
  esac
}
manifest_url() { local image="${1#*/}"; echo "${image%:*}/manifests/${image##*:}"; }
digest_2=$(curl -sf -I -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
  "http://$REGISTRY/v2/$(manifest_url "$IMAGE_2")" | tr -d '\r' | awk -F': ' 'tolower($1) == "docker-content-digest" {print $2}')
[[ -n "$digest_2" ]] || fail "the registry serves no digest for $IMAGE_2"

# check_in_place SELECTOR BEFORE WHAT: every pod of BEFORE kept its uid, IP and node; main
# restarted once into busybox:2's digest; side kept its container.
check_in_place() {
  local selector="$1" before="$2" what="$3" after line old
  after=$(snapshot "$selector")
  [[ $(wc -l <<<"$after") == $(wc -l <<<"$before") ]] || fail "$what: pods changed: $before -> $after"
  while read -r line; do
    old=$(grep "^${line%% *} " <<<"$before") || fail "$what: ${line%% *} is a new pod: before: $before"
    assert_eq "$(cut -d' ' -f2-4 <<<"$line")" "$(cut -d' ' -f2-4 <<<"$old")" "$what: ${line%% *} keeps uid, IP and node"
    assert_eq "$(field "$line" main restarts)" "$(($(field "$old" main restarts) + 1))" "$what: ${line%% *} main restarted once"
    [[ $(field "$line" main id) != "$(field "$old" main id)" ]] || fail "$what: ${line%% *} main is the same container"
    assert_contains "$(field "$line" main image)" "$digest_2" "$what: ${line%% *} main runs busybox:2's digest"
    assert_eq "$(field "$line" side id)" "$(field "$old" side id)" "$what: ${line%% *} side untouched"
    assert_eq "$(field "$line" side restarts)" "$(field "$old" side restarts)" "$what: ${line%% *} side restart count"
  done <<<"$after"
}
main_image_is() { # main_image_is SELECTOR N IMAGE: N pods, all ready, main running IMAGE
  local images
  images=$("$KUBECTL" get pods -l "$1" -o jsonpath='{range .items[*]}{.status.containerStatuses[?(@.name=="main")].image}{"\n"}{end}')
  pods_ready "$1" "$2" && [[ $(grep -cxF "$3" <<<"$images") == "$2" ]]
}
set_main_image() { # set_main_image RESOURCE IMAGE [EXTRA_SPEC_JSON]
  "$KUBECTL" patch "$1" --type merge -p "{\"spec\": {\"template\": {\"spec\": {\"containers\": [$(container main "$2"), $(container side "$IMAGE_1")]}}}${3:+, $3}}" >/dev/null
}

# --- CloneSet
cat <<JSON | "$KUBECTL" apply -f - >/dev/null
{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "metadata": {"name": "clone"},
 "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "clone"}},
  "updateStrategy": {"type": "InPlaceIfPossible", "maxUnavailable": 1},
  "template": {"metadata": {"labels": {"app": "clone"}}, "spec": $(pod_spec)}}}
JSON
wait_for 120 "2 ready CloneSet pods on $NODE" pods_ready app=clone 2
before=$(snapshot app=clone)
for ip in $(cut -d' ' -f3 <<<"$before"); do
  [[ $ip == 10.* ]] || fail "pod IP $ip is not from the node's pod network"
done
set_main_image cloneset/clone "$IMAGE_2"
wait_for 120 "the CloneSet's pods on busybox:2" main_image_is app=clone 2 "$IMAGE_2"
check_in_place app=clone "$before" CloneSet
for pod in $("$KUBECTL" get pods -l app=clone -o name); do
  assert_eq "$("$KUBECTL" get "$pod" -o jsonpath='{.status.conditions[?(@.type=="InPlaceUpdateReady")].status}')" True "$pod InPlaceUpdateReady"
done
pass "CloneSet in-place update on real containers: same pods, IPs and node; only main restarted, into busybox:2's digest"

# An image that cannot be pulled: one pod at a time (maxUnavailable 1) goes unready and the
# rollout stops there; the other pod is not touched.
before=$(snapshot app=clone)
set_main_image cloneset/clone "$REGISTRY/e2e/missing:1"
# main_waiting REASONS: the pods whose main container waits for one of REASONS (a regex).
main_waiting() {
  "$KUBECTL" get pods -l app=clone -o jsonpath='{range .items[*]}{.metadata.name} {.status.containerStatuses[?(@.name=="main")].state.waiting.reason}{"\n"}{end}' |
    grep -E " ($1)$"
}
# Once its first pull failed, the kubelet's waiting reason for main alternates between the pull's
# errors and CrashLoopBackOff: the container it killed for the new image counts as a failed
# start, so the restart back-off applies between pull attempts too.
stuck_pod() { main_waiting 'ErrImagePull|ImagePullBackOff|CrashLoopBackOff'; }
wait_for 120 "a pod waiting on the missing image" main_waiting 'ErrImagePull|ImagePullBackOff'
sleep_until=$((SECONDS + 10)) # the rollout must stay where it is: watch it for a while
while ((SECONDS < sleep_until)); do
  [[ $(stuck_pod | wc -l) == 1 ]] || fail "more than one pod on the missing image (maxUnavailable 1): $(stuck_pod)"
  sleep 1
done
stuck=$(stuck_pod | cut -d' ' -f1) || fail "no pod waiting on the missing image after 10 s: $(snapshot app=clone)"
other=$(grep -v "^$stuck " <<<"$before") || fail "no pod besides $stuck: before: $before"
assert_eq "$(grep "^${other%% *} " <<<"$(snapshot app=clone)")" "$other" "the pod the rollout did not reach"
assert_eq "$("$KUBECTL" get pod "$stuck" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" False "$stuck not ready"
set_main_image cloneset/clone "$IMAGE_2"
wait_for 120 "the CloneSet back on busybox:2" main_image_is app=clone 2 "$IMAGE_2"
pass "a missing image: one pod not ready, the rollout paused at maxUnavailable 1, the other pod untouched; fixed by the next update"

# --- Another tag of the same digest: the image ID does not change and containerd 1.6 keeps
# naming the digest's first tag in the status, so only the CRR agent's
# runtime-containers-meta (the kubelet's hash of the container it restarted) completes it.
before=$(snapshot app=clone)
set_main_image cloneset/clone "$IMAGE_2_AGAIN"
clone_updated() {
  local generation observed updated updated_ready
  read -r generation observed updated updated_ready < <("$KUBECTL" get cloneset clone \
    -o jsonpath='{.metadata.generation} {.status.observedGeneration} {.status.updatedReplicas} {.status.updatedReadyReplicas}')
  [[ $generation == "$observed" && $updated == 2 && $updated_ready == 2 ]]
}
wait_for 120 "the CloneSet's 2 pods updated and ready on busybox:2-again" clone_updated
check_in_place app=clone "$before" "CloneSet (same digest)"
assert_eq "$("$KUBECTL" get pods -l app=clone -o jsonpath='{range .items[*]}{.status.containerStatuses[?(@.name=="main")].image}{"\n"}{end}' | sort -u)" \
  "$IMAGE_2" "the status still names the digest's first tag"
assert_eq "$("$KUBECTL" get pods -l app=clone -o jsonpath='{range .items[*]}{.metadata.annotations.apps\.kruise\.io/runtime-containers-meta}{"\n"}{end}' | grep -c plainHash)" \
  2 "runtime-containers-meta written on both pods"
pass "a new tag of the same digest: restarted in place, completed by the agent's runtime-containers-meta"

# in_place_rollout RESOURCE SELECTOR N WHAT (the workload applied): its N pods ready, main
# changed to busybox:2, every pod updated in place (check_in_place).
in_place_rollout() {
  local resource="$1" selector="$2" n="$3" what="$4" before
  wait_for 120 "$n ready $what pods on $NODE" pods_ready "$selector" "$n"
  before=$(snapshot "$selector")
  set_main_image "$resource" "$IMAGE_2"
  wait_for 120 "the $what's pods on busybox:2" main_image_is "$selector" "$n" "$IMAGE_2"
  check_in_place "$selector" "$before" "$what"
  pass "$what in-place update on real containers"
}

# --- Advanced StatefulSet
cat <<JSON | "$KUBECTL" apply -f - >/dev/null
{"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "metadata": {"name": "sts"},
 "spec": {"replicas": 2, "serviceName": "sts", "selector": {"matchLabels": {"app": "sts"}},
  "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}},
  "template": {"metadata": {"labels": {"app": "sts"}},
   "spec": $(pod_spec '"readinessGates": [{"conditionType": "InPlaceUpdateReady"}]')}}}
JSON
in_place_rollout statefulset.apps.kruise.io/sts app=sts 2 "Advanced StatefulSet"

# --- Advanced DaemonSet (its pods only on the real node)
cat <<JSON | "$KUBECTL" apply -f - >/dev/null
{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "DaemonSet", "metadata": {"name": "ds"},
 "spec": {"selector": {"matchLabels": {"app": "ds"}},
  "updateStrategy": {"rollingUpdate": {"rollingUpdateType": "InPlaceIfPossible"}},
  "template": {"metadata": {"labels": {"app": "ds"}}, "spec": $(pod_spec)}}}
JSON
in_place_rollout daemonset.apps.kruise.io/ds app=ds 1 "Advanced DaemonSet"

# --- SidecarSet: the injected sidecar is upgraded in place; the app container is not touched
cat <<JSON | "$KUBECTL" apply -f - >/dev/null
{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet", "metadata": {"name": "side-$E2E_NAMESPACE"},
 "spec": {"selector": {"matchLabels": {"app": "with-sidecar"}}, "namespace": "$E2E_NAMESPACE",
  "updateStrategy": {"maxUnavailable": 1},
  "containers": [$(container main "$IMAGE_1")]}}
JSON
cat <<JSON | "$KUBECTL" apply -f - >/dev/null
{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "metadata": {"name": "with-sidecar"},
 "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "with-sidecar"}},
  "template": {"metadata": {"labels": {"app": "with-sidecar"}},
   "spec": {"nodeSelector": {"kubernetes.io/hostname": "$NODE"}, "containers": [$(container side "$IMAGE_1")]}}}}
JSON
wait_for 120 "the pod with its injected sidecar ready" pods_ready app=with-sidecar 1
assert_eq "$("$KUBECTL" get pods -l app=with-sidecar -o jsonpath='{.items[0].spec.containers[*].name}')" "main side" "the sidecar injected first"
before=$(snapshot app=with-sidecar)
"$KUBECTL" patch sidecarset "side-$E2E_NAMESPACE" --type merge -p "{\"spec\": {\"containers\": [$(container main "$IMAGE_2")]}}" >/dev/null
wait_for 120 "the sidecar on busybox:2" main_image_is app=with-sidecar 1 "$IMAGE_2"
check_in_place app=with-sidecar "$before" SidecarSet
"$KUBECTL" delete sidecarset "side-$E2E_NAMESPACE" >/dev/null
pass "SidecarSet sidecar upgrade in place on real containers: the app container untouched"

# --- SidecarSet hot upgrade: a sidecar serving on a port (images/hotserver, answering with
# its image's version) is upgraded with no moment when the port does not answer: the idle
# container starts the new version beside the working one (both listen, SO_REUSEPORT; its
# postStart hook returns once it listens), then the old one goes to the empty image (with
# net.ipv4.tcp_migrate_req its queued connections move to the new listener). A client
# requests the pod's port throughout.
cat <<JSON | "$KUBECTL" apply -f - >/dev/null
{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet", "metadata": {"name": "hot-$E2E_NAMESPACE"},
 "spec": {"selector": {"matchLabels": {"app": "hot"}}, "namespace": "$E2E_NAMESPACE",
  "containers": [{"name": "proxy", "image": "$HOTSERVER_1",
   "lifecycle": {"postStart": {"exec": {"command": ["/hotserver", "wait"]}}},
   "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "$HOTSERVER_EMPTY"}}]}}
JSON
cat <<JSON | "$KUBECTL" apply -f - >/dev/null
{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "metadata": {"name": "hot"},
 "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "hot"}},
  "template": {"metadata": {"labels": {"app": "hot"}},
   "spec": {"nodeSelector": {"kubernetes.io/hostname": "$NODE"},
    "securityContext": {"sysctls": [{"name": "net.ipv4.tcp_migrate_req", "value": "1"}]},
    "containers": [$(container app "$IMAGE_1")]}}}}
JSON
wait_for 120 "the pod with its hot-upgrade sidecar ready" pods_ready app=hot 1
assert_eq "$("$KUBECTL" get pods -l app=hot -o jsonpath='{.items[0].spec.containers[*].image}')" \
  "$HOTSERVER_1 $HOTSERVER_EMPTY $IMAGE_1" "proxy-1 working, proxy-2 on the empty image"
hot_ip=$("$KUBECTL" get pods -l app=hot -o jsonpath='{.items[0].status.podIP}')
assert_eq "$(curl -s --max-time 2 "http://$hot_ip:8080/")" 1 "the sidecar answers with version 1"
before=$(snapshot app=hot)
# One request every 10 ms on a new connection, each answer (or FAIL and curl's exit code:
# 7 refused, 56 reset, 28 no answer in 10 s) a line. What is checked is that no request
# goes unanswered, not how fast: a container restart on a loaded node can stall one.
probe_log="$WORK/hot-upgrade-probe.log"
(while [[ ! -e "$WORK/hot-upgrade-stop" ]]; do
  curl -s --max-time 10 "http://$hot_ip:8080/" || echo "FAIL $?"
  sleep 0.01
done >"$probe_log") &
probe=$!
"$KUBECTL" patch sidecarset "hot-$E2E_NAMESPACE" --type json \
  -p "[{\"op\": \"replace\", \"path\": \"/spec/containers/0/image\", \"value\": \"$HOTSERVER_2\"}]" >/dev/null
hot_swapped() { # proxy-2 serving version 2, proxy-1 back on the empty image, all running
  [[ $("$KUBECTL" get pods -l app=hot -o jsonpath='{range .items[0].status.containerStatuses[*]}{.name}={.image},{.ready} {end}') == \
    "app=$IMAGE_1,true proxy-1=$HOTSERVER_EMPTY,true proxy-2=$HOTSERVER_2,true " ]]
}
wait_for 120 "proxy-2 on version 2 and proxy-1 on the empty image" hot_swapped
answered_by_2() { [[ $(tail -20 "$probe_log" | grep -cx 2) == 20 ]]; }
wait_for 30 "20 answers in a row from version 2 after the swap" answered_by_2
touch "$WORK/hot-upgrade-stop"
wait "$probe"
after=$(snapshot app=hot)
requests=$(wc -l <"$probe_log")
assert_eq "$(grep -vcx '[12]' "$probe_log")" 0 "requests not answered by version 1 or 2 during the hot upgrade (of $requests): $(grep -vx '[12]' "$probe_log" | sort | uniq -c | tr '\n' ' ')"
assert_eq "$(head -1 "$probe_log")/$(tail -1 "$probe_log")" 1/2 "the first and last answers' versions"
assert_eq "$(cut -d' ' -f2-4 <<<"$after")" "$(cut -d' ' -f2-4 <<<"$before")" "hot upgrade keeps uid, IP and node"
assert_eq "$(field "$after" app id)" "$(field "$before" app id)" "the app container untouched by the hot upgrade"
assert_eq "$(field "$after" proxy-2 restarts)" "$(($(field "$before" proxy-2 restarts) + 1))" "proxy-2 restarted once, into version 2"
assert_eq "$(field "$after" proxy-1 restarts)" "$(($(field "$before" proxy-1 restarts) + 1))" "proxy-1 restarted once, onto the empty image"
"$KUBECTL" delete sidecarset "hot-$E2E_NAMESPACE" >/dev/null
pass "SidecarSet hot upgrade on real containers: $requests requests across the swap, every one answered ($(grep -cx 1 "$probe_log") by version 1, then $(grep -cx 2 "$probe_log") by version 2)"

# --- ContainerRecreateRequest: the node agent recreates a container through the real
# containerd; its preStop hook runs first; the pod keeps its IP and its volume.
cat <<JSON | "$KUBECTL" apply -f - >/dev/null
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "recreate", "labels": {"app": "recreate"}},
 "spec": {"nodeSelector": {"kubernetes.io/hostname": "$NODE"},
  "volumes": [{"name": "shared", "emptyDir": {}}],
  "containers": [
   $(container main "$IMAGE_1" | sed 's/}$/, "volumeMounts": [{"name": "shared", "mountPath": "\/shared"}], "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "echo stopped >> \/shared\/prestop"]}}}}/'),
   $(container side "$IMAGE_1" | sed 's/}$/, "volumeMounts": [{"name": "shared", "mountPath": "\/shared"}]}/')]}}
JSON
wait_for 120 "the pod recreate ready" pods_ready app=recreate 1
before=$(snapshot app=recreate)
cat <<'JSON' | "$KUBECTL" apply -f - >/dev/null
{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "ContainerRecreateRequest", "metadata": {"name": "recreate-main"},
 "spec": {"podName": "recreate", "containers": [{"name": "main"}],
  "strategy": {"failurePolicy": "Fail", "orderedRecreate": false}}}
JSON
crr_phase() { [[ $("$KUBECTL" get crr recreate-main -o jsonpath='{.status.phase}') == "$1" ]]; }
wait_for 120 "the ContainerRecreateRequest Completed" crr_phase Completed
wait_for 60 "the pod recreate ready again" pods_ready app=recreate 1
after=$(snapshot app=recreate)
assert_eq "$(cut -d' ' -f2-4 <<<"$after")" "$(cut -d' ' -f2-4 <<<"$before")" "recreate keeps uid, IP and node"
assert_eq "$(field "$after" main restarts)" "$(($(field "$before" main restarts) + 1))" "main recreated once"
[[ $(field "$after" main id) != "$(field "$before" main id)" ]] || fail "main is the same container after the recreate"
assert_eq "$(field "$after" side id)" "$(field "$before" side id)" "side untouched by the recreate"
assert_eq "$("$KUBECTL" exec recreate -c side -- cat /shared/prestop)" stopped "the preStop hook ran, into the kept volume"
pass "ContainerRecreateRequest on real containers: main recreated after its preStop hook; IP, volume and side kept"

# --- ImagePullJob: the node agent pulls into the real containerd's image store.
pulled_image="$REGISTRY/e2e/busybox:pull-$E2E_NAMESPACE"
skopeo copy -q --src-tls-verify=false --dest-tls-verify=false "docker://$IMAGE_1" "docker://$pulled_image"
in_store() { ctr -a "$CRI_SOCK" -n k8s.io images ls -q | grep -qxF "$1"; }
# expect_in_store IMAGE: the image is in the store; a ctr call can fail while containerd is
# busy, so a few tries, and on failure what the store and the node's NodeImage hold.
expect_in_store() {
  local try
  for try in 1 2 3 4 5; do
    in_store "$1" && return 0
    sleep 1
  done
  echo "--- containerd's images (k8s.io):" >&2
  ctr -a "$CRI_SOCK" -n k8s.io images ls -q >&2 || true
  echo "--- NodeImage $NODE:" >&2
  "$KUBECTL" get nodeimage "$NODE" -o yaml >&2 || true
  fail "$1 is not in containerd's image store after the job"
}
in_store "$pulled_image" && fail "$pulled_image is in containerd's store before the job"
cat <<JSON | "$KUBECTL" apply -f - >/dev/null
{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "ImagePullJob", "metadata": {"name": "pull"},
 "spec": {"image": "$pulled_image", "selector": {"names": ["$NODE"]},
  "completionPolicy": {"type": "Always"}}}
JSON
job_succeeded() { [[ $("$KUBECTL" get imagepulljob pull -o jsonpath='{.status.succeeded}') == 1 ]]; }
wait_for 120 "the ImagePullJob succeeded on $NODE" job_succeeded
expect_in_store "$pulled_image"
pass "ImagePullJob: the image is in the real containerd's store on $NODE"

# ... from a registry that wants a login, given as the job's pull secret.
assert_eq "$(curl -s -o /dev/null -w '%{http_code}' "http://$PRIVATE_REGISTRY/v2/")" 401 "the private registry without a login"
private_image="$PRIVATE_REGISTRY/e2e/private:$E2E_NAMESPACE"
skopeo copy -q --src-tls-verify=false --dest-tls-verify=false \
  --src-creds "$PRIVATE_USER:$PRIVATE_PASSWORD" --dest-creds "$PRIVATE_USER:$PRIVATE_PASSWORD" \
  "docker://$PRIVATE_IMAGE" "docker://$private_image"
"$KUBECTL" create secret docker-registry private-registry --docker-server="$PRIVATE_REGISTRY" \
  --docker-username="$PRIVATE_USER" --docker-password="$PRIVATE_PASSWORD" >/dev/null
cat <<JSON | "$KUBECTL" apply -f - >/dev/null
{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "ImagePullJob", "metadata": {"name": "pull-private"},
 "spec": {"image": "$private_image", "pullSecrets": ["private-registry"], "selector": {"names": ["$NODE"]},
  "completionPolicy": {"type": "Always"}}}
JSON
private_succeeded() { [[ $("$KUBECTL" get imagepulljob pull-private -o jsonpath='{.status.succeeded}') == 1 ]]; }
wait_for 120 "the ImagePullJob with a pull secret succeeded on $NODE" private_succeeded
expect_in_store "$private_image"
pass "ImagePullJob with a pull secret: the image from the registry that wants a login is in the store"

# --- Container launch priority: with `Ordered`, the second container is started only once
# the first is ready (it makes itself ready after 3 s); the real kubelet holds it until its
# barrier key exists (CreateContainerConfigError meanwhile).
cat <<JSON | "$KUBECTL" apply -f - >/dev/null
{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "ordered", "labels": {"app": "ordered"},
  "annotations": {"apps.kruise.io/container-launch-priority": "Ordered"}},
 "spec": {"nodeSelector": {"kubernetes.io/hostname": "$NODE"},
  "containers": [
   {"name": "first", "image": "$IMAGE_1",
    "command": ["sh", "-c", "trap \"exit 0\" TERM; sleep 3; touch /tmp/ready; while true; do sleep 1; done"],
    "readinessProbe": {"exec": {"command": ["test", "-f", "/tmp/ready"]}, "periodSeconds": 1}},
   $(container second "$IMAGE_1")]}}
JSON
wait_for 120 "the ordered pod ready" pods_ready app=ordered 1
started_at() { # started_at CONTAINER: seconds since the epoch
  date -d "$("$KUBECTL" get pod ordered -o jsonpath="{.status.containerStatuses[?(@.name==\"$1\")].state.running.startedAt}")" +%s
}
first=$(started_at first)
second=$(started_at second)
((second - first >= 3)) || fail "second started ${second}s, first ${first}s: not after first was ready"
assert_eq "$("$KUBECTL" get pod ordered -o jsonpath='{.metadata.annotations.apps\.kruise\.io/container-launch-priority-completed}')" true "launch priority completed"
pass "container launch priority on the real kubelet: second started $((second - first)) s after first, once first was ready"

# --- helm uninstall: nothing of the release is left calling a removed Service. The
# binaries still run while helm deletes the webhook configurations (it deletes them
# before the Deployments) and must not put them back.
if [[ "$install" == helm ]]; then
  "$HELM" uninstall "$HELM_RELEASE" -n kruise-system --wait --timeout 2m >"$WORK/helm-uninstall.log" 2>&1 || {
    cat "$WORK/helm-uninstall.log" >&2
    fail "helm uninstall"
  }
  HELM_RELEASE=""
  left=$("$KUBECTL" get mutatingwebhookconfigurations,validatingwebhookconfigurations -o name | grep kruise- || true)
  [[ -z "$left" ]] || fail "webhook configurations left after helm uninstall: $left"
  pass "helm uninstall removes every webhook configuration (none put back by the stopping binaries)"
fi
