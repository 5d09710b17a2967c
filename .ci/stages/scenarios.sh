#!/usr/bin/env bash
# The kubectl scenarios on kruise-sim: the simulator's own with every kubectl at hand
# (1.27 .. 1.35) and client-go's protobuf CRUD on it, the playground's (`kruise-playground
# up`) and each registered family's (`<family>/tests/kubectl-*.sh`) with the newest.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need_kubectl
need_family_binaries
# run_scenario SCENARIO KUBECTL
run_scenario() {
  step "scenario ${1#"$root"/} with $("$2" version --client 2>/dev/null | head -1)"
  KUBECTL="$2" bash "$1"
}
for k in "${kubectls[@]}"; do run_scenario "$root/sim/tests/kubectl-e2e.sh" "$k"; done
step "client-go with protobuf bodies on kruise-sim"
bash "$root/sim/tests/client-go-protobuf.sh"
run_scenario "$root/playground/tests/kubectl-up.sh" "${kubectls[0]}"
mapfile -t scenarios < <(family_scenarios)
for scenario in "${scenarios[@]}"; do run_scenario "$scenario" "${kubectls[0]}"; done
