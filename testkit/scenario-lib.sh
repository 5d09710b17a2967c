# The kubectl scenarios' library (sourced, not run): a work directory and the processes a
# scenario starts, stopped when it exits (with the end of their logs if it failed); the
# simulated cluster (`kruise-sim up` or `kruise-playground up`); a family's binary with its
# CRDs; pods ready; assertions that print what was expected and what came back; polling
# with a deadline.
#
# Environment: KUBECTL (default kubectl); KRUISE_BIN_DIR, where kruise-sim,
# kruise-playground and the kruise-<family> binaries are (.ci/run sets it); when unset, a
# binary is built with cargo the first time a scenario needs it.

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
  trap scenario_cleanup EXIT
  export KUBECONFIG="$WORK/kubeconfig"
  export KUBECACHEDIR="$WORK/kube-cache"
}
scenario_cleanup() {
  local status=$?
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  # A failed scenario shows the end of the logs of what it started.
  if (( status != 0 )); then
    for log in "$WORK"/*.log; do
      [[ -f "$log" ]] || continue
      echo "--- last lines of $(basename "$log")" >&2
      tail -n 40 "$log" >&2
    done
  fi
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
  "$bin" up --port 0 --kubeconfig "$KUBECONFIG" "$@" >"$CLUSTER_LOG" 2>&1 &
  PIDS+=($!)
  wait_for 60 "$name up" grep -q '^export KUBECONFIG=' "$CLUSTER_LOG"
}

# start_family NAME [FLAGS...]: kruise-NAME's CRDs applied with kubectl, then the binary
# started against the cluster as one replica (no leader election, webhooks on 127.0.0.1
# with their certificates in `default`); returns once its /readyz answers.
start_family() {
  local name="$1" bin crds health; shift
  bin=$(kruise_bin "kruise-$name") || exit 1
  crds="$("$bin" crd)"
  [[ -z "$crds" ]] || "$KUBECTL" apply -f - >/dev/null <<<"$crds"
  health=$(free_port)
  "$bin" --kubeconfig "$KUBECONFIG" --leader-elect=false \
    --metrics-addr "127.0.0.1:$(free_port)" --health-addr "127.0.0.1:$health" \
    --webhook-port "$(free_port)" --webhook-host 127.0.0.1 --webhook-bind-address 127.0.0.1 --webhook-namespace default "$@" \
    >"$WORK/kruise-$name.log" 2>&1 &
  PIDS+=($!)
  wait_for 60 "kruise-$name ready" curl -sf "http://127.0.0.1:$health/readyz"
}

# pods_ready SELECTOR N: exactly N pods match the label SELECTOR, all Ready.
pods_ready() {
  local out; out=$("$KUBECTL" get pods -l "$1" -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
  [[ "$(grep -c True <<<"$out")" == "$2" && "$(wc -l <<<"$out")" == "$2" ]]
}
