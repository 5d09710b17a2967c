#!/usr/bin/env bash
# The node agents' idle footprint (docs/crr.md, docs/imagepull.md): each agent binary of a
# build runs for one node of a bare `kruise-sim up --nodes 2` (its family's CRDs applied from
# the chart,
# the node's fake CRI socket), and IDLE seconds later its RSS is printed, split into
# anonymous and file-backed pages, with the mappings holding the most, and its CPU over the
# idle window after the first 5 s (start-up excluded), in millicores.
#   usage: images/tests/agent-footprint.sh BIN_DIR [BINARY...]
#          (default: kruise-crr-agent kruise-imagepull-agent; `kruise-crr` measures
#          `kruise-crr agent`, the agent run from the family's binary)
#   env:   IDLE (seconds, default 15); KRUISE_SIM, a kruise-sim binary (default: built with cargo)
set -euo pipefail
bin_dir=$(realpath "$1"); shift
# shellcheck source=testkit/scenario-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../testkit/scenario-lib.sh"
scenario_init
idle="${IDLE:-15}"
binaries=("$@")
[[ ${#binaries[@]} -gt 0 ]] || binaries=(kruise-crr-agent kruise-imagepull-agent)
if [[ -n "${KRUISE_SIM:-}" ]]; then
  mkdir -p "$WORK/sim-bin" && ln -s "$(realpath "$KRUISE_SIM")" "$WORK/sim-bin/kruise-sim"
  KRUISE_BIN_DIR="$WORK/sim-bin" start_cluster kruise-sim --nodes 2 --cri-dir "$WORK/cri"
else
  start_cluster kruise-sim --nodes 2 --cri-dir "$WORK/cri"
fi

kib() { awk -v key="$1:" '$1 == key {print $2}' "/proc/$2/status"; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
# utime + stime of a process, in clock ticks (the command name has no spaces here).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

for binary in "${binaries[@]}"; do
  family=${binary#kruise-}; family=${family%-agent}
  cmd=("$bin_dir/$binary")
  [[ "$binary" == *-agent ]] || cmd+=(agent)
  # The family's CRDs as the chart carries them (generated from the code, checked by CI).
  "$KUBECTL" apply --server-side -f "$ROOT/charts/kruise-rs/charts/$family/crds/" >/dev/null
  NODE_NAME=sim-node-0 CRI_SOCKET="$WORK/cri/sim-node-0.sock" "${cmd[@]}" --kubeconfig "$KUBECONFIG" \
    >>"$WORK/$binary.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  sleep 5
  ticks_before=$(cpu_ticks "$pid"); window_start=$(date +%s%N)
  sleep $((idle > 5 ? idle - 5 : 1))
  ticks_after=$(cpu_ticks "$pid"); window_ns=$(( $(date +%s%N) - window_start ))
  kill -0 "$pid" 2>/dev/null || fail "$binary exited; see $WORK/$binary.log"
  size=$(stat -L -c %s "${cmd[0]}" | awk '{printf "%.1f", $1/1048576}')
  echo "$binary (${size} MiB binary), idle ${idle} s: RSS $(mib "$(kib VmRSS "$pid")") MiB" \
    "(anonymous $(mib "$(kib RssAnon "$pid")"), file-backed $(mib "$(kib RssFile "$pid")")), threads $(kib Threads "$pid")," \
    "CPU $(awk -v t=$((ticks_after - ticks_before)) -v hz="$hz" -v ns="$window_ns" \
      'BEGIN {printf "%.2f", t / hz / (ns / 1e9) * 1000}') millicores"
  awk '/^[0-9a-f]+-[0-9a-f]+ / {name = $6 " " $2} /^Rss:/ {rss[name] += $2}
       END {for (m in rss) if (rss[m] >= 256) printf "  %6.1f MiB  %s\n", rss[m] / 1024, m}' \
    "/proc/$pid/smaps" | sort -rn | head -6
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
