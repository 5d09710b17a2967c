#!/usr/bin/env bash
# The chart: its generated files (CRDs, webhook configurations) are what the binaries print,
# helm lint and the Kubernetes schemas pass, `helm install` into kruise-sim works, and each
# family's controller integration tests pass as its ServiceAccount under the chart's roles.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need_kubectl
need_pyvenv
need_family_binaries
bash "$root/charts/generate.sh" "$KRUISE_BIN_DIR"
git -C "$root" diff --exit-code -- charts \
  || { echo "charts/ differs from the binaries' output: run charts/generate.sh and commit" >&2; exit 1; }
bash "$root/charts/tests/lint.sh"
bash "$root/charts/tests/kubectl-helm.sh"
bash "$root/charts/tests/kubectl-rbac.sh"
# KRUISE_TEST_AUTHORIZE=1; the test builds are the tests stage's.
bash "$root/charts/tests/rbac-integration.sh"
