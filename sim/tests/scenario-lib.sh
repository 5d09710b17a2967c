# Shared helpers for the kubectl scenarios (sourced, not run): assertions that print what
# was expected and what came back, and polling with a deadline.

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
