#!/usr/bin/env bash
# safety-stress.sh [RUNS]: the tests that guard each family's safety invariants (never past
# maxUnavailable or maxSurge, the partition held, a PodUnavailableBudget never breached,
# ordered StatefulSet creation, BroadcastJob parallelism), run RUNS times (default 3) under
# CPU contention, so a race that hides on an idle machine shows up.
#
# Contention: HOG busy loops (default: the number of cores) for the whole run, and
# PARALLEL copies of each test at once (default 2), each a process of its own against a
# kruise-sim of its own. ONLY=REGEX keeps the tests whose "package binary test" line
# matches. Prints one line per test (runs, failures) and a total; a failed run's output is
# kept under LOG_DIR (default: a new directory under /tmp). Exits 1 when any run failed.
#
# Uses CARGO_TARGET_DIR and CARGO_INCREMENTAL=0 as .ci/run does, so it reuses its build (the
# test binaries are built when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kruise-target}"

runs="${1:-3}"
hog="${HOG:-$(nproc)}"
parallel="${PARALLEL:-2}"
only="${ONLY:-.}"
log_dir="${LOG_DIR:-$(mktemp -d -t kruise-safety.XXXXXX)}"
mkdir -p "$log_dir"

# package, test binary, test: each asserts its invariant on every observation.
tests=(
  "kruise-cloneset controller_sim scale_up_respects_max_unavailable_and_pods_to_delete_removes_the_named_pod"
  "kruise-cloneset controller_sim in_place_update_keeps_pod_identity_and_partition_keeps_old_pods"
  "kruise-cloneset controller_sim recreate_update_replaces_pods_within_max_unavailable"
  "kruise-cloneset controller_sim a_controller_restart_mid_rollout_does_not_double_create"
  "kruise-statefulset controller_sim ordered_ready_scales_to_three_in_order_with_identity_and_claims"
  "kruise-statefulset controller_sim partition_and_reserved_ordinals"
  "kruise-statefulset controller_sim a_controller_restart_mid_rollout_creates_no_pod_twice"
  "kruise-daemonset controller_sim surge_creates_the_new_pod_before_deleting_the_old_one"
  "kruise-daemonset controller_sim with_surge_and_min_ready_seconds_the_old_pod_goes_once_they_elapse_k1012"
  "kruise-daemonset controller_sim partition_and_node_selector_bound_the_rollout_and_a_restart_resumes_it"
  "kruise-crossfamily cloneset_budget_sim a_rollout_to_a_failing_image_stops_at_the_budget_and_completes_once_fixed"
  "kruise-crossfamily sidecarset_budget_sim a_sidecar_upgrade_to_a_failing_image_stops_at_the_budget_and_completes_once_fixed"
  "kruise-protection eviction_sim evictions_and_deletions_are_refused_once_the_budget_is_used"
  "kruise-protection pod_admission_sim concurrent_evictions_across_two_replicas_spend_the_budget_once"
  "kruise-runtime pub_grants_sim concurrent_grants_on_one_budget_share_status_writes_and_never_exceed_it"
  "kruise-webhook sidecarset_upgrade_sim sidecar_upgrades_in_place_within_the_update_strategy"
  "kruise-broadcastjob broadcastjob_sim parallelism_one_runs_one_node_at_a_time"
)
selected=()
for t in "${tests[@]}"; do
  [[ $t =~ $only ]] && selected+=("$t")
done
[[ ${#selected[@]} -gt 0 ]] || { echo "no test matches ONLY=$only" >&2; exit 2; }

# The test executables of the workspace's test build (testkit/test-executables.sh).
source testkit/test-executables.sh
load_test_executables

hogs=()
stop_hogs() { [[ ${#hogs[@]} -eq 0 ]] || kill "${hogs[@]}" 2>/dev/null || true; }
trap stop_hogs EXIT
for _ in $(seq "$hog"); do
  (while :; do :; done) &
  hogs+=($!)
done

echo "safety stress: ${#selected[@]} tests x $runs runs, $parallel at once, $hog CPU hogs, logs in $log_dir"
started=$SECONDS
failed_total=0
for t in "${selected[@]}"; do
  read -r package target name <<<"$t"
  path="${test_exe["$package:$target"]:-}"
  [[ -n $path ]] || { echo "no test executable for $package --test $target" >&2; exit 2; }
  failures=0
  t0=$SECONDS
  for run in $(seq "$runs"); do
    pids=()
    for copy in $(seq "$parallel"); do
      "$path" --exact "$name" --test-threads=1 >"$log_dir/$name.$run.$copy.log" 2>&1 &
      pids+=($!)
    done
    for i in "${!pids[@]}"; do
      if wait "${pids[$i]}"; then
        rm -f "$log_dir/$name.$run.$((i + 1)).log"
      else
        failures=$((failures + 1))
      fi
    done
  done
  failed_total=$((failed_total + failures))
  printf '%-14s %-22s %s: %d runs, %d failed (%ds)\n' "$package" "$target" "$name" \
    "$((runs * parallel))" "$failures" "$((SECONDS - t0))"
done
echo "safety stress: $failed_total failed runs in $((SECONDS - started))s"
[[ $failed_total -eq 0 ]]
