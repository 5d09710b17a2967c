#!/usr/bin/env bash
# Each family's controller integration tests with the chart's RBAC enforced
# (KRUISE_TEST_AUTHORIZE=1, kruise_testkit::rbac): kruise-sim authorizes requests that carry
# a token, holds every subchart's roles and bindings (files/rbac.yaml), and the controller
# (and node agent) under test runs as its ServiceAccount; a request its role lacks ends the
# test binary with the request named. The tests' own client stays admin.
# With KRUISE_TEST_KUBECONFIG set, on that API server instead (the real control plane of
# e2e/realcluster/up.sh): the same roles, bindings and ServiceAccounts are applied there, the
# controller connects with a token the server issued, and kube-apiserver's RBAC authorizer
# decides; the sim_only_* tests are skipped (docs/real-control-plane.md).
#   usage: charts/tests/rbac-integration.sh [FAMILY...]   (default: every family below)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

# The integration tests whose controller gets its client from kruise_testkit::controller_client
# (testkit's checks that a role's limits hold at all: enforcement that silently let
# everything through would fail it).
declare -A tests=(
  [cloneset]="controller_sim decode_guard_sim invalid_pod_write_sim migration_sim"
  [statefulset]="controller_sim"
  [daemonset]="controller_sim"
  [broadcastjob]="broadcastjob_sim cron_sim"
  [imagepull]="imagepull_sim"
  [crr]="crr_sim"
  [protection]="budget_sim eviction_sim"
  [resourcedistribution]="distribution_sim"
  [testkit]="rbac_enforced"
)
# The workspace's test build (testkit/test-executables.sh): `cargo test -p` alone would
# build each family and testkit again for its narrower feature set.
source testkit/test-executables.sh
load_test_executables
families=("$@")
failed=()
[[ ${#families[@]} -gt 0 ]] || families=(testkit cloneset statefulset daemonset broadcastjob imagepull crr protection resourcedistribution)
for family in "${families[@]}"; do
  [[ -n "${tests[$family]:-}" ]] || { echo "rbac-integration.sh: no tests listed for $family" >&2; exit 1; }
  echo "=== $family as kruise-$family: ${tests[$family]}"
  skip=()
  [[ -z "${KRUISE_TEST_KUBECONFIG:-}" ]] || skip=(--skip sim_only_)
  for t in ${tests[$family]}; do
    suite="kruise-$family:$t"
    [[ -n ${test_exe[$suite]:-} ]] || { echo "rbac-integration.sh: no test executable for $suite" >&2; exit 2; }
    (cd "${test_dir[$suite]}" && KRUISE_TEST_AUTHORIZE=1 "${test_exe[$suite]}" "${skip[@]}") || failed+=("$suite")
  done
done
[[ ${#failed[@]} -eq 0 ]] || { echo "rbac-integration.sh: failed with the controllers as their ServiceAccounts: ${failed[*]}" >&2; exit 1; }
