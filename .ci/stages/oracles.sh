#!/usr/bin/env bash
# Differential tests against OpenKruise's own Go code (docs/e2e.md): the Go programs under
# testkit/oracles call OpenKruise's and Kubernetes'
# functions (template defaults, revision and claim hashes, SidecarSet hashes and revisions,
# quantities, Advanced StatefulSet and DaemonSet defaults, revisions and validation,
# CloneSet validation, StatefulSet conversion) and e2e/realcluster/oracles the kubelet's
# (its container hash) on inputs the Rust tests generate; both sides must agree.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
go version
oracles="$HOME/.cache/kruise-oracles"
expected="$root/testkit/oracles"
mkdir -p "$oracles"
(cd "$expected" && go build -o "$oracles/cloneset-values" . && go build -o "$oracles/quantities" ./quantities)
(cd "$expected/sidecarset" && go build -o "$oracles/sidecarset-values" .)
(cd "$expected/families" && go build -o "$oracles/statefulset-values" ./statefulset \
  && go build -o "$oracles/daemonset-values" ./daemonset \
  && go build -o "$oracles/statefulset-conversion" ./conversion \
  && go build -o "$oracles/workload-validation" ./validation)
# The kubelet's container hash, from the real node's kubelet module.
(cd "$root/e2e/realcluster" && go build -o "$oracles/kubelet-hash" ./oracles/kubelet-hash)
# The omitempty table go_encoded_pod_template drops zero values by, generated from
# k8s.io/api's struct tags: it must be what the generator writes.
(cd "$root/compat/tools/go-omitempty" && go run .) \
  | diff -u "$root/compat/src/pod_defaults/go_omitempty.rs" - \
  || { echo "compat/src/pod_defaults/go_omitempty.rs is stale: regenerate it (docs/e2e.md)"; exit 1; }
# The same fields by protobuf message, which kruise-sim's protobuf decoding reads.
(cd "$root/compat/tools/go-omitempty" && go run . -proto) \
  | diff -u "$root/sim/proto/zero-omitted.txt" - \
  || { echo "sim/proto/zero-omitted.txt is stale: regenerate it (sim/proto/README.md)"; exit 1; }
# Each family's tests/openkruise_oracle.rs and core's tests/kubelet_oracle.rs, from the
# workspace's test build.
source "$root/testkit/test-executables.sh"
load_test_executables
status=0
for suite in "${!test_exe[@]}"; do
  [[ $suite == *:openkruise_oracle || $suite == *:kubelet_oracle ]] || continue
  echo "--- $suite --ignored"
  (cd "${test_dir[$suite]}" && KRUISE_ORACLE_BIN_DIR="$oracles" "${test_exe[$suite]}" --ignored) || status=1
done
exit "$status"
