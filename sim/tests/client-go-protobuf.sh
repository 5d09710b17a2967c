#!/usr/bin/env bash
# client-go's typed clients with protobuf bodies against kruise-sim (or the API server of
# KRUISE_E2E_KUBECONFIG): e2e/realcluster/clients/protobuf-crud, built with Go from the
# real control plane's module, creates, updates, watches, patches, lists and deletes
# built-in kinds as controller-runtime's clients do, and checks what comes back.
#
#   sim/tests/client-go-protobuf.sh        (needs go; KRUISE_BIN_DIR as for the kubectl scenarios)
set -euo pipefail

# shellcheck source=testkit/scenario-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../testkit/scenario-lib.sh"
scenario_init

(cd "$ROOT/e2e/realcluster" && go build -o "$WORK/protobuf-crud" ./clients/protobuf-crud) \
  || fail "building e2e/realcluster/clients/protobuf-crud"
start_cluster kruise-sim
KUBECONFIG="$KUBECONFIG" "$WORK/protobuf-crud" || fail "client-go protobuf CRUD"
pass "client-go protobuf create/get/update/watch/patch/list/delete of built-in kinds"
