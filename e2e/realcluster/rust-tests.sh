#!/usr/bin/env bash
# The families' Rust integration tests against the API server of $KUBECONFIG (the real
# control plane of up.sh; docs/real-control-plane.md, "The Rust integration tests on
# both"). Each suite below also runs against kruise-sim in `cargo test --workspace`.
#
#   KUBECONFIG=DIR/kubeconfig e2e/realcluster/rust-tests.sh [SUITE...]
#
# A SUITE is `PACKAGE:TEST` (a tests/TEST.rs of PACKAGE); default: every suite that runs on
# both. The harness (kruise-testkit's `cluster`) gives each test its own namespace and the
# simulated nodes it asks for, in-process, one test at a time; the `sim_only_*` tests (fault
# injection and other simulator-only facilities) are skipped here. At the end, namespaces a
# failed test left behind (label kruise.io/testkit) are deleted.
#
# The chart's RBAC is enforced (KRUISE_TEST_AUTHORIZE=1 unless set to 0; charts/tests/
# rbac-integration.sh): a controller under test that takes its client from
# kruise_testkit::controller_client connects with a token kube-apiserver issued for its
# ServiceAccount, and kube-apiserver's RBAC authorizer holds it to the chart's roles.
# KRUISE_FUZZ_CASES (default 8 here, 32 under plain `cargo test`) sizes the fuzz suites.
# The suites run from the workspace's test build (testkit/test-executables.sh, built when
# missing), as cargo runs them. KRUISE_TEST_TIMINGS=FILE appends each test's setup,
# body and clean-up times there (kruise_testkit::cluster); the total per phase is printed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
: "${KUBECONFIG:?KUBECONFIG must name the API server to test against}"
kubectl="${KUBECTL:-kubectl}"
export KRUISE_TEST_AUTHORIZE="${KRUISE_TEST_AUTHORIZE:-1}"
export KRUISE_FUZZ_CASES="${KRUISE_FUZZ_CASES:-8}"

suites=("$@")
if [[ ${#suites[@]} -eq 0 ]]; then
	suites=(
		kruise-testkit:rbac_enforced
		kruise-cloneset:controller_sim
		kruise-cloneset:inplace_priority_sim
		kruise-cloneset:binary_sim
		kruise-cloneset:invalid_pod_write_sim
		kruise-cloneset:decode_guard_sim
		kruise-cloneset:migration_sim
		kruise-cloneset:standby_sim
		kruise-cloneset:webhook_repair_sim
		kruise-cloneset:pod_template_fuzz_sim
		kruise-statefulset:controller_sim
		kruise-statefulset:migration_sim
		kruise-broadcastjob:broadcastjob_sim
		kruise-broadcastjob:cron_sim
		kruise-sidecarset:decode_guard_sim
		kruise-sidecarset:migration_sim
		kruise-webhook:pod_chain_sim
		kruise-webhook:sidecarset_sim
		kruise-webhook:sidecarset_webhook_down_sim
		kruise-webhook:sidecarset_upgrade_sim
		kruise-webhook:sidecarset_resources_policy_sim
		kruise-webhook:sidecarset_template_fuzz_sim
		kruise-crr:crr_sim
		kruise-crr:launch_priority_sim
		kruise-imagepull:imagepull_sim
		kruise-imagepull:agent_sim
		kruise-crossfamily:predownload_sim
		kruise-daemonset:controller_sim
		kruise-daemonset:migration_sim
		kruise-protection:budget_sim
		kruise-protection:eviction_sim
		kruise-crossfamily:cloneset_budget_sim
		kruise-protection:lessons_sim
		kruise-protection:related_pub_sim
		kruise-protection:pod_admission_sim
		kruise-protection:deletion_sim
		kruise-resourcedistribution:distribution_sim
		kruise-crossfamily:sidecarset_budget_sim
	)
fi

cleanup() {
	"$kubectl" delete namespace -l kruise.io/testkit=true --wait=false >/dev/null 2>&1 || true
}
# A test that panics skips its clean-up: the webhook configurations a family binary under
# test published would send every later request of their kinds to a process that is gone.
remove_stale_webhooks() {
	"$kubectl" get mutatingwebhookconfigurations,validatingwebhookconfigurations -o name 2>/dev/null |
		grep '/kruise-' | xargs -r "$kubectl" delete >/dev/null 2>&1 || true
}
trap cleanup EXIT

# shellcheck source=testkit/test-executables.sh
source "$root/testkit/test-executables.sh"
load_test_executables

started=$SECONDS
failed=()
for suite in "${suites[@]}"; do
	package=${suite%%:*}
	test=${suite#*:}
	echo "--- $package --test $test (real API server)" >&2
	suite_started=$SECONDS
	[[ -n ${test_exe[$suite]:-} ]] || {
		echo "rust-tests.sh: no test executable for $package --test $test" >&2
		exit 2
	}
	if (cd "${test_dir[$suite]}" && KRUISE_TEST_KUBECONFIG="$KUBECONFIG" \
		"${test_exe[$suite]}" -q --skip sim_only_); then
		echo "--- $suite passed in $((SECONDS - suite_started)) s" >&2
	else
		echo "--- $suite FAILED after $((SECONDS - suite_started)) s" >&2
		failed+=("$suite")
		# What its failed tests left (they end before their clean-up) must not fail
		# the next suite: a budget or webhook of theirs would act on its requests.
		remove_stale_webhooks
		cleanup
	fi
done
echo "Rust integration tests on the real API server: ${#suites[@]} suites, ${#failed[@]} failed, $((SECONDS - started)) s" >&2
if [[ -n ${KRUISE_TEST_TIMINGS:-} && -s $KRUISE_TEST_TIMINGS ]]; then
	# Each line: a test's namespace, then phase=seconds fields; summed per phase.
	tr '\t' '\n' <"$KRUISE_TEST_TIMINGS" | awk -F= 'NF == 2 { sum[$1] += $2 }
		END { for (p in sum) printf "  %-15s %7.1f s\n", p, sum[p] }' >&2
fi
if [[ ${#failed[@]} -gt 0 ]]; then
	echo "failed: ${failed[*]}" >&2
	exit 1
fi
