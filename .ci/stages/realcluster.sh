#!/usr/bin/env bash
# The real control plane (e2e/realcluster: kube-apiserver, kube-controller-manager,
# kube-scheduler and etcd built from Kubernetes' Go modules; docs/real-control-plane.md;
# binaries and Go caches outside the clone, so a second run only links). Its smoke checks
# run with kubectl, then with kruise-sim's simulated nodes (`kruise-sim nodes`), then every
# registered family's kubectl scenarios, then the families' Rust integration tests that run
# on both (rust-tests.sh, with the chart's RBAC enforced by kube-apiserver).
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need_kubectl
need_family_binaries
go version
export REALCLUSTER_BIN="$HOME/.cache/kruise-realcluster-bin"
mapfile -t scenarios < <(family_scenarios)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
bash "$root/e2e/realcluster/ci.sh" "$dir" \
  bash -c '"$1/e2e/realcluster/scenarios.sh" "${@:2}" && "$1/e2e/realcluster/rust-tests.sh"' _ \
  "$root" "${scenarios[@]}"
