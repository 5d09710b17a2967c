#!/usr/bin/env bash
# Writes what the chart takes from the code: each registered family's CRDs
# (`kruise-<family> crd` -> kruise-rs/charts/<family>/crds/) and webhook configurations
# (`kruise-<family> manifests` -> kruise-rs/charts/<family>/files/webhooks.yaml).
# CI runs it and fails when the committed chart differs (`git diff --exit-code charts`).
# Usage: charts/generate.sh [BIN_DIR]   (default: $CARGO_TARGET_DIR/debug)
set -euo pipefail
cd "$(dirname "$0")"
bin_dir="${1:-${CARGO_TARGET_DIR:-../target}/debug}"
chart=kruise-rs

while IFS=$'\t' read -r family binary crds _steps; do
  dir="$chart/charts/$family"
  if [ ! -d "$dir" ]; then
    echo "generate.sh: family $family has no subchart $dir" >&2
    exit 1
  fi
  rm -rf "$dir/crds"
  if [ "$crds" != "-" ]; then
    mkdir -p "$dir/crds"
    "$bin_dir/$binary" crd > "$dir/crds/$family.yaml"
  fi
  mkdir -p "$dir/files"
  "$bin_dir/$binary" manifests > "$dir/files/webhooks.yaml"
done < <("$bin_dir/kruise-playground" families)
