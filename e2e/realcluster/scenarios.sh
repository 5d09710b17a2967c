#!/usr/bin/env bash
# Runs kubectl scenarios (`*/tests/kubectl-*.sh`) against the cluster of KUBECONFIG (the
# real control plane, when run by `ci.sh DIR e2e/realcluster/scenarios.sh SCENARIO...`):
# each with KRUISE_E2E_KUBECONFIG set, so testkit/scenario-lib.sh starts `kruise-sim
# nodes` and the families against that API server instead of starting kruise-sim.
# Prints each scenario's time; exits non-zero on the first failure.
#
#   KRUISE_BIN_DIR=.../debug KUBECONFIG=... scenarios.sh cloneset/tests/kubectl-cloneset.sh
set -euo pipefail

: "${KUBECONFIG:?set KUBECONFIG, e.g. eval \"\$(up.sh start DIR)\"}"
[[ $# -ge 1 ]] || {
	echo "usage: $0 SCENARIO..." >&2
	exit 2
}
export KRUISE_E2E_KUBECONFIG="$KUBECONFIG"
for scenario in "$@"; do
	started=$SECONDS
	echo "--- $scenario against $KRUISE_E2E_KUBECONFIG"
	bash "$scenario"
	echo "--- $scenario passed in $((SECONDS - started)) s"
done
