#!/usr/bin/env bash
# The figures of docs/install.md's sizing table for each family binary of a build: its size
# (stripped, as the `dist` profile leaves it), the time from start to `/readyz` answering 200
# against a bare `kruise-sim up` (its CRDs applied, nothing else; the best and worst of RUNS
# starts) and its RSS idle 12 s after the last start (longer than jemalloc's 10 s decay).
#   usage: images/tests/footprint.sh BIN_DIR [FAMILY...]   (default: every family binary in BIN_DIR)
#   env:   RUNS (default 3); KRUISE_SIM, a kruise-sim binary (default: built with cargo)
set -euo pipefail
bin_dir=$(realpath "$1"); shift
# shellcheck source=testkit/scenario-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../testkit/scenario-lib.sh"
scenario_init
runs="${RUNS:-3}"
families=("$@")
if [[ ${#families[@]} -eq 0 ]]; then
  for f in cloneset statefulset daemonset sidecarset broadcastjob imagepull crr protection webhook; do
    [[ -x "$bin_dir/kruise-$f" ]] && families+=("$f")
  done
fi
if [[ -n "${KRUISE_SIM:-}" ]]; then
  mkdir -p "$WORK/sim-bin" && ln -s "$(realpath "$KRUISE_SIM")" "$WORK/sim-bin/kruise-sim"
  KRUISE_BIN_DIR="$WORK/sim-bin" start_cluster kruise-sim --nodes 0
else
  start_cluster kruise-sim --nodes 0
fi

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
rss_mib() { awk '/^VmRSS:/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }

printf '%-20s %10s %22s %10s\n' binary "size MiB" "start to ready ms" "idle RSS"
for family in "${families[@]}"; do
  bin="$bin_dir/kruise-$family"
  crds=$("$bin" crd)
  [[ -z "$crds" ]] || "$KUBECTL" apply --server-side -f - >/dev/null <<<"$crds"
  times=()
  pid=
  for ((run = 1; run <= runs; run++)); do
    [[ -z "$pid" ]] || { kill "$pid"; wait "$pid" 2>/dev/null || true; }
    health=$(free_port)
    start=$(now_ms)
    "$bin" run --kubeconfig "$KUBECONFIG" --leader-elect=false \
      --metrics-addr "127.0.0.1:$(free_port)" --health-addr "127.0.0.1:$health" \
      --webhook-port "$(free_port)" --webhook-host 127.0.0.1 --webhook-bind-address 127.0.0.1 \
      --webhook-namespace default >>"$WORK/kruise-$family.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    until curl -sf "http://127.0.0.1:$health/readyz" >/dev/null 2>&1; do
      (( $(now_ms) - start < 60000 )) || fail "kruise-$family not ready within 60 s"
      sleep 0.01
    done
    times+=($(( $(now_ms) - start )))
  done
  sleep 12
  rss=$(rss_mib "$pid")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  size=$(stat -c %s "$bin" | awk '{printf "%.1f", $1/1048576}')
  sorted=$(printf '%s\n' "${times[@]}" | sort -n | tr '\n' ' ')
  printf '%-20s %10s %22s %10s\n' "kruise-$family" "$size" "${sorted% }" "$rss MiB"
done
