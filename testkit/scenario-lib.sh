# The kubectl scenarios' library (sourced, not run): a work directory and the processes a
# scenario starts, stopped when it exits (with the end of their logs if it failed); the
# simulated cluster (`kruise-sim up` or `kruise-playground up`); a family's binary with its
# CRDs; pods ready; assertions that print what was expected and what came back; polling
# with a deadline.
#
# Environment: KUBECTL (default kubectl); KRUISE_BIN_DIR, where kruise-sim,
# kruise-playground and the kruise-<family> binaries are (.ci/run sets it); when unset, a
# binary is built with cargo the first time a scenario needs it. KRUISE_E2E_KUBECONFIG: run
# against that API server (e.g. the real control plane of e2e/realcluster) instead of
# starting kruise-sim: see start_cluster.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KUBECTL="${KUBECTL:-kubectl}"

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok - $*"; }

# assert_contains HAYSTACK NEEDLE WHAT
assert_contains() {
  if [[ "$1" != *"$2"* ]]; then
    printf 'FAIL: %s\n  expected to contain: %s\n  got:\n%s\n' "$3" "$2" "$1" >&2
    exit 1
  fi
}
assert_eq() {
  [[ "$1" == "$2" ]] || fail "$3: expected '$2', got '$1'"
}

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND until it succeeds.
wait_for() {
  local secs="$1" what="$2"; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    (( SECONDS < deadline )) || fail "timed out after ${secs}s waiting for $what"
    sleep 0.1
  done
}

# scenario_init: a work directory (WORK) with the kubeconfig and kubectl's discovery cache
# (a previous simulator on the same port may have served other CRDs), and PIDS, whose
# processes are stopped when the scenario exits.
scenario_init() {
  command -v "$KUBECTL" >/dev/null || fail "kubectl not found: $KUBECTL"
  WORK="$(mktemp -d)"
  PIDS=()
  E2E_CRDS=()
  trap scenario_cleanup EXIT
  export KUBECONFIG="$WORK/kubeconfig"
  export KUBECACHEDIR="$WORK/kube-cache"
}
scenario_cleanup() {
  local status=$?
  # A failed scenario shows the end of the logs of what it started, as they were when it
  # failed (before the shutdown's own lines).
  if (( status != 0 )); then
    for log in "$WORK"/*.log; do
      [[ -f "$log" ]] || continue
      echo "--- last lines of $(basename "$log")" >&2
      tail -n 40 "$log" >&2
    done
    if [[ -n "${E2E_NAMESPACE:-}" ]]; then
      echo "--- last events in $E2E_NAMESPACE" >&2
      "$KUBECTL" get events -n "$E2E_NAMESPACE" --sort-by=.lastTimestamp 2>&1 | tail -n 40 >&2 || true
    fi
    # The whole logs, where the caller wants them (KRUISE_E2E_KEEP_LOGS=DIR).
    if [[ -n "${KRUISE_E2E_KEEP_LOGS:-}" ]]; then
      mkdir -p "$KRUISE_E2E_KEEP_LOGS" && cp "$WORK"/*.log "$KRUISE_E2E_KEEP_LOGS"/ 2>/dev/null || true
    fi
  fi
  [[ -z "${KRUISE_E2E_KUBECONFIG:-}" ]] || external_cleanup
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}

# kruise_bin NAME: the path of the binary NAME (kruise-sim, kruise-playground,
# kruise-<family>), from KRUISE_BIN_DIR or built with cargo.
kruise_bin() {
  local name="$1"
  if [[ -n "${KRUISE_BIN_DIR:-}" ]]; then
    [[ -x "$KRUISE_BIN_DIR/$name" ]] || fail "$name not found in KRUISE_BIN_DIR=$KRUISE_BIN_DIR"
    echo "$KRUISE_BIN_DIR/$name"
    return
  fi
  (cd "$ROOT" && cargo build -q -p "$name" --bin "$name") >&2 || fail "building $name"
  echo "${CARGO_TARGET_DIR:-$ROOT/target}/debug/$name"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_cluster BINARY [FLAGS...]: `BINARY up` (kruise-sim: the bare cluster;
# kruise-playground: with the families in-process) on a free port with the scenario's
# kubeconfig; returns once it prints its kubectl line. Its output is in CLUSTER_LOG.
start_cluster() {
  local name="$1" bin; shift
  bin=$(kruise_bin "$name") || exit 1
  CLUSTER_LOG="$WORK/$name.log"
  if [[ -n "${KRUISE_E2E_KUBECONFIG:-}" ]]; then
    start_external_cluster "$name" "$bin" "$@"
    return
  fi
  "$bin" up --port 0 --kubeconfig "$KUBECONFIG" "$@" >"$CLUSTER_LOG" 2>&1 &
  PIDS+=($!)
  wait_for 60 "$name up" grep -q '^export KUBECONFIG=' "$CLUSTER_LOG"
}

# start_external_cluster NAME BINARY [FLAGS...]: start_cluster against the API server of
# KRUISE_E2E_KUBECONFIG. The scenario gets a namespace of its own (the kubeconfig's
# default, so its kubectl calls need no -n), `kruise-system` when missing (the families'
# namespace, FAMILY_NAMESPACE), and
# `kruise-sim nodes` with up's node flags (--nodes, default 3, none with `--nodes 0`, and the kubelet's
# --pull-delay, --image-pull, --start-delay, --ready-delay, --cri-dir); for kruise-playground, the
# families `--controllers` names (default all) start as their own processes, webhooks on
# 127.0.0.1 as start_family does, and with `--agent-node NODE=SOCKET` (repeatable) the node
# agents of NODE, a real node, on its CRI socket. At exit, external_cleanup removes what the
# scenario left in that cluster.
start_external_cluster() {
  local name="$1" bin="$2" nodes_flags=() controllers=all sim_nodes=1 agent_nodes=(); shift 2
  while (( $# > 0 )); do
    case "$1" in
      --nodes=0) sim_nodes=0; shift ;;
      --nodes) if [[ "$2" == 0 ]]; then sim_nodes=0; else nodes_flags+=("$1" "$2"); fi; shift 2 ;;
      --pull-delay|--image-pull|--start-delay|--ready-delay|--cri-dir) nodes_flags+=("$1" "$2"); shift 2 ;;
      --nodes=*|--pull-delay=*|--image-pull=*|--start-delay=*|--ready-delay=*|--cri-dir=*) nodes_flags+=("$1"); shift ;;
      --agent-node) agent_nodes+=("$2"); shift 2 ;;
      --controllers) controllers="$2"; shift 2 ;;
      --controllers=*) controllers="${1#*=}"; shift ;;
      --port|--address|--kubeconfig|--watch-history|--event-ttl) shift 2 ;;  # the API server's own
      *) shift ;;
    esac
  done
  cp "$KRUISE_E2E_KUBECONFIG" "$KUBECONFIG"
  E2E_NAMESPACE="e2e-$(date +%s)-$$"
  "$KUBECTL" create namespace "$E2E_NAMESPACE" >/dev/null || fail "creating namespace $E2E_NAMESPACE"
  "$KUBECTL" config set-context --current --namespace "$E2E_NAMESPACE" >/dev/null
  wait_for 60 "the default ServiceAccount of $E2E_NAMESPACE" "$KUBECTL" get serviceaccount default
  # The install namespace, as the chart makes it: the families run there (their
  # certificates, SidecarSet revisions), as OpenKruise's kruise-manager does.
  "$KUBECTL" get namespace kruise-system >/dev/null 2>&1 || "$KUBECTL" create namespace kruise-system >/dev/null
  FAMILY_NAMESPACE=kruise-system
  E2E_WEBHOOKS_BEFORE="$("$KUBECTL" get mutatingwebhookconfigurations,validatingwebhookconfigurations -o name)"
  CLUSTER_LOG="$WORK/kruise-sim-nodes.log"
  : >"$CLUSTER_LOG"
  if (( sim_nodes )); then
    local sim; sim=$(kruise_bin kruise-sim) || exit 1
    "$sim" nodes --kubeconfig "$KUBECONFIG" "${nodes_flags[@]}" >"$CLUSTER_LOG" 2>&1 &
    PIDS+=($!)
    wait_for 60 "kruise-sim nodes Ready" grep -q '^kruise-sim nodes: .* Ready' "$CLUSTER_LOG"
  fi
  [[ "$name" == kruise-playground ]] || return 0
  local family binary crds steps agent started=() enable=() agents=()
  while IFS=$'\t' read -r family binary crds steps agent; do
    [[ "$controllers" == all || ",$controllers," == *",$family,"* ]] || continue
    started+=("$family")
    [[ "$steps" == - ]] || enable+=("$steps")
    [[ "$agent" != agent ]] || agents+=("$family")
  done < <("$bin" families)
  local enable_flag names
  enable_flag="--enable=$(IFS=,; echo "${enable[*]}")"
  for family in "${started[@]}"; do
    # kruise-webhook hosts the pod chain: the steps of the families beside it.
    if [[ "$family" == webhook ]]; then start_family "$family" "$enable_flag"; else start_family "$family"; fi
  done
  # Node agents, as `kruise-playground up --cri-dir` runs them: one per simulated node on
  # that node's fake CRI socket (`kruise-<family> agent`, as the chart's DaemonSet runs it).
  local cri_dir="" node
  for ((i = 0; i < ${#nodes_flags[@]}; i++)); do
    case "${nodes_flags[i]}" in
      --cri-dir) cri_dir="${nodes_flags[i + 1]}" ;;
      --cri-dir=*) cri_dir="${nodes_flags[i]#*=}" ;;
    esac
  done
  if [[ -n "$cri_dir" ]]; then
    for family in "${agents[@]}"; do
      for node in $(sed -n 's/^kruise-sim nodes: [0-9]* Ready (\(.*\))$/\1/p' "$CLUSTER_LOG" | node_names); do
        "$(kruise_bin "kruise-$family")" agent --kubeconfig "$KUBECONFIG" --node-name "$node" \
          --cri-socket "$cri_dir/$node.sock" >>"$WORK/kruise-$family-agent.log" 2>&1 &
        PIDS+=($!)
      done
    done
  fi
  local agent_node
  for agent_node in "${agent_nodes[@]}"; do
    for family in "${agents[@]}"; do
      "$(kruise_bin "kruise-$family")" agent --kubeconfig "$KUBECONFIG" --node-name "${agent_node%%=*}" \
        --cri-socket "${agent_node#*=}" >>"$WORK/kruise-$family-agent.log" 2>&1 &
      PIDS+=($!)
    done
  done
  names="$(IFS=,; echo "${started[*]}")"
  # As `kruise-playground up` prints it.
  echo "controllers running against $KRUISE_E2E_KUBECONFIG: ${names//,/, }" >>"$CLUSTER_LOG"
}

# node_names: "sim-node-0 .. sim-node-2" on stdin -> sim-node-0 sim-node-1 sim-node-2.
node_names() {
  local first last prefix i
  read -r first _ last
  last="${last:-$first}"
  prefix="${first%-*}"
  for ((i = ${first##*-}; i <= ${last##*-}; i++)); do echo "$prefix-$i"; done
}

# external_cleanup: what a scenario leaves in an external cluster goes, first while the
# families and the kubelet still run (they finish deletions and remove their finalizers):
# the objects of the CRDs it installed and its namespace; then, once its processes are
# stopped, the webhook configurations its families registered and the CRDs (whose webhook
# URLs lead nowhere now), and the Node objects of its `kruise-sim nodes`.
external_cleanup() {
  [[ -n "${E2E_NAMESPACE:-}" ]] || return 0
  local crd webhook nodes i
  for crd in "${E2E_CRDS[@]}"; do
    "$KUBECTL" delete "$crd" --all --all-namespaces --timeout=60s >/dev/null 2>&1 || true
  done
  "$KUBECTL" delete namespace "$E2E_NAMESPACE" --timeout=60s >/dev/null 2>&1 || true
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  PIDS=()
  for webhook in $("$KUBECTL" get mutatingwebhookconfigurations,validatingwebhookconfigurations -o name 2>/dev/null); do
    grep -qxF "$webhook" <<<"$E2E_WEBHOOKS_BEFORE" || "$KUBECTL" delete "$webhook" >/dev/null 2>&1 || true
  done
  for crd in "${E2E_CRDS[@]}"; do
    "$KUBECTL" delete crd "$crd" --timeout=60s >/dev/null 2>&1 || true
  done
  # "kruise-sim nodes: 3 Ready (sim-node-0 .. sim-node-2)"
  nodes=$(sed -n 's/^kruise-sim nodes: \([0-9]*\) Ready (\(.*\)-0 .*/\1 \2/p' "$CLUSTER_LOG")
  if [[ -n "$nodes" ]]; then
    for ((i = 0; i < ${nodes%% *}; i++)); do
      "$KUBECTL" delete node "${nodes#* }-$i" --wait=false >/dev/null 2>&1 || true
    done
  fi
}

# start_family NAME [FLAGS...]: kruise-NAME's CRDs applied with kubectl, then the binary
# started against the cluster as one replica (no leader election, webhooks on 127.0.0.1
# with their certificates in FAMILY_NAMESPACE, default `default`); returns once its
# /readyz answers.
start_family() {
  local name="$1" bin crds health; shift
  bin=$(kruise_bin "kruise-$name") || exit 1
  crds="$("$bin" crd)"
  if [[ -n "$crds" ]]; then
    local applied crd
    applied=$("$KUBECTL" apply -f - -o name <<<"$crds") || fail "applying the CRDs of kruise-$name"
    # customresourcedefinition.apiextensions.k8s.io/<plural>.<group> -> <plural>.<group>
    while read -r crd; do E2E_CRDS+=("${crd#*/}"); done <<<"$applied"
  fi
  health=$(free_port)
  "$bin" --kubeconfig "$KUBECONFIG" --leader-elect=false \
    --metrics-addr "127.0.0.1:$(free_port)" --health-addr "127.0.0.1:$health" \
    --webhook-port "$(free_port)" --webhook-host 127.0.0.1 --webhook-bind-address 127.0.0.1 --webhook-namespace "${FAMILY_NAMESPACE:-default}" "$@" \
    >"$WORK/kruise-$name.log" 2>&1 &
  PIDS+=($!)
  wait_for 60 "kruise-$name ready" curl -sf "http://127.0.0.1:$health/readyz"
}

# status_observed KIND NAME: the object's status is of its current spec
# (status.observedGeneration == metadata.generation). A wait on a status field after a
# change needs it: until the controller reads the change, the status of the previous
# spec may already read as the wanted one.
status_observed() {
  [[ "$("$KUBECTL" get "$1" "$2" -o jsonpath='{.status.observedGeneration}')" == \
    "$("$KUBECTL" get "$1" "$2" -o jsonpath='{.metadata.generation}')" ]]
}

# pods_ready SELECTOR N: exactly N pods match the label SELECTOR, all Ready.
pods_ready() {
  local out; out=$("$KUBECTL" get pods -l "$1" -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
  [[ "$(grep -c True <<<"$out")" == "$2" && "$(wc -l <<<"$out")" == "$2" ]]
}
