#!/usr/bin/env bash
# One step for CI: start the real control plane in DIR, run smoke.sh against
# it (no nodes), then nodes-smoke.sh (kruise-sim's simulated nodes), and stop
# it again whatever happened. Exits non-zero on the first failure (or up.sh's,
# if the control plane did not come up). Extra arguments after DIR form a
# command run after both with KUBECONFIG set, e.g. further suites. REALCLUSTER_SMOKE=0
# skips the two smoke checks (for a run whose other stage has done them);
# REALCLUSTER_REAL_NODE=1 starts the cluster with a real node (up.sh --real-node).
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ $# -ge 1 ]] || {
	echo "usage: $0 DIR [COMMAND...]" >&2
	exit 2
}
dir=$1
shift

trap '"$script_dir/up.sh" stop "$dir"' EXIT
# Captured first: `eval "$(...)"` would hide up.sh's exit status.
start_args=(start "$dir")
[[ ${REALCLUSTER_REAL_NODE:-0} == 0 ]] || start_args+=(--real-node)
exports=$("$script_dir/up.sh" "${start_args[@]}")
eval "$exports"
if [[ ${REALCLUSTER_SMOKE:-1} != 0 ]]; then
	"$script_dir/smoke.sh"
	"$script_dir/nodes-smoke.sh"
fi
if [[ $# -gt 0 ]]; then
	"$@"
fi
