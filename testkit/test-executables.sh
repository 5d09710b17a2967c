#!/usr/bin/env bash
# Every test executable of the workspace's test build, one per line:
#   PACKAGE<TAB>TARGET<TAB>EXECUTABLE<TAB>PACKAGE_DIR
# (e.g. `kruise-cloneset	controller_sim	…/debug/deps/controller_sim-…	/…/cloneset`), building
# what is missing first. The scripts that run a few suites again (the safety stress, the
# suites on the real control plane, the RBAC runs, the oracles) run these executables
# instead of `cargo test -p PACKAGE --test TARGET`: a narrower package set unifies the
# dependencies' features differently, so cargo would build the package and testkit again,
# about half a minute per package. Run an executable from its PACKAGE_DIR, as cargo does.
#
# Sourced, it defines load_test_executables instead, which fills the associative arrays
# test_exe and test_dir (executable, package directory), keyed PACKAGE:TARGET.
#
# Uses CARGO_TARGET_DIR and CARGO_INCREMENTAL=0 as .ci/run does, so it reuses its build.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kruise-target}"
test_executables_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

list_test_executables() {
  (cd "$test_executables_root" && cargo test --workspace --no-run --message-format=json-render-diagnostics) \
    | python3 -c '
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    if not m.get("profile", {}).get("test"):
        continue
    pid = m["package_id"]
    # "path+file:///…/cloneset#kruise-cloneset@0.1.0", or "kruise-cloneset 0.1.0 (…)"
    pkg = pid.split("#")[-1].split("@")[0] if "#" in pid else pid.split()[0]
    src = m["target"]["src_path"]
    # The package directory: the one holding Cargo.toml above the target source.
    d = os.path.dirname(src)
    while d != "/" and not os.path.exists(os.path.join(d, "Cargo.toml")):
        d = os.path.dirname(d)
    print(pkg, m["target"]["name"], m["executable"], d, sep="\t")
'
}

load_test_executables() {
  declare -gA test_exe=() test_dir=()
  local package target path dir listed
  listed=$(list_test_executables) || return 1
  while IFS=$'\t' read -r package target path dir; do
    test_exe["$package:$target"]=$path
    test_dir["$package:$target"]=$dir
  done <<<"$listed"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  list_test_executables
fi
