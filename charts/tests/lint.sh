#!/usr/bin/env bash
# Offline checks of the umbrella chart (no cluster): `helm lint --strict`; `helm template`
# with each family alone and with all, each rendering validated against the Kubernetes
# 1.29 .. 1.35 schemas (kubernetes-validate --strict); every value of a family reaching
# the rendered output; and each family's rendered webhook configurations equal to what its
# binary's `manifests` prints for the same namespace.
#
# Environment: HELM (default helm), KUBERNETES_VALIDATE (default kubernetes-validate),
# KRUISE_BIN_DIR (the kruise-<family> binaries, for the webhook comparison), PYTHON (with
# PyYAML; default python3).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
chart="$here/../kruise-rs"
HELM="${HELM:-helm}"
PYTHON="${PYTHON:-python3}"
KUBERNETES_VALIDATE="${KUBERNETES_VALIDATE:-kubernetes-validate}"
: "${KRUISE_BIN_DIR:?KRUISE_BIN_DIR must name the directory of the kruise-<family> binaries}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok - $*"; }

mapfile -t families < <(cd "$chart/charts" && for d in */; do d="${d%/}"; [[ "$d" == kruise-family ]] || echo "$d"; done)
(( ${#families[@]} > 0 )) || fail "no family subcharts in $chart/charts"

"$HELM" lint --strict "$chart" >"$work/lint.log" 2>&1 || { cat "$work/lint.log" >&2; fail "helm lint --strict"; }
pass "helm lint --strict"

# validate FILE: against each Kubernetes version's schemas, rejecting unknown fields.
validate() {
  local v
  for v in 1.29.0 1.30.0 1.31.0 1.32.0 1.33.0 1.34.0 1.35.0; do
    "$KUBERNETES_VALIDATE" -k "$v" --strict --quiet --no-warn "$1" || fail "$1 does not validate against Kubernetes $v"
  done
}

# Each family alone: only its Deployment, and its objects valid.
for family in "${families[@]}"; do
  sets=()
  for other in "${families[@]}"; do sets+=(--set "$other.enabled=$([[ $other == "$family" ]] && echo true || echo false)"); done
  "$HELM" template kr "$chart" -n kr-ns "${sets[@]}" >"$work/$family.yaml"
  deployments=$(grep -A2 '^kind: Deployment' "$work/$family.yaml" | grep -o 'name: kruise-[a-z]*' | sort | tr '\n' ' ')
  [[ "$deployments" == "name: kruise-$family " ]] || fail "$family alone renders Deployments: $deployments"
  validate "$work/$family.yaml"
  pass "$family alone: renders only its objects, valid for Kubernetes 1.29 .. 1.35"
done
# Every family on, those off by default (resourcedistribution) included.
all=()
for family in "${families[@]}"; do all+=(--set "$family.enabled=true"); done
"$HELM" template kr "$chart" -n kr-ns "${all[@]}" >"$work/all.yaml"
validate "$work/all.yaml"
pass "all families: valid for Kubernetes 1.29 .. 1.35"

# Every value reaches the rendered output (OpenKruise charts#74, K#1448).
family="${families[0]}"
"$HELM" template kr "$chart" -n kr-ns \
  --set "$family.replicas=3" \
  --set "$family.image.repository=registry.example/kr" --set "$family.image.tag=9.9.9" \
  --set "$family.image.pullPolicy=Always" --set "$family.featureGates=FamilyGate=true" \
  --set global.featureGates=GlobalGate=false \
  --set "$family.logFormat=text" --set "$family.logLevel=debug" \
  --set "$family.ports.webhook=19876" --set "$family.ports.metrics=18080" --set "$family.ports.health=18081" \
  --set "$family.resources.limits.memory=777Mi" --set "$family.priorityClassName=pc-sentinel" \
  --set "$family.nodeSelector.pool=sentinel" \
  --set "$family.tolerations[0].key=sentinel-taint" --set "$family.tolerations[0].operator=Exists" \
  --set "$family.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=sentinel-zone" \
  --set "$family.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists" \
  --set "$family.podAnnotations.sentinel=annotated" --set "$family.extraArgs[0]=--concurrency=7" \
  --set "global.imagePullSecrets[0].name=pull-sentinel" \
  >"$work/values.yaml"
for expected in "replicas: 3" "image: registry.example/kr:9.9.9" "imagePullPolicy: Always" \
  "--feature-gates=GlobalGate=false,FamilyGate=true" "--log-format=text" "--log-level=debug" \
  "--webhook-port=19876" "containerPort: 19876" "--metrics-addr=:18080" "--health-addr=:18081" \
  "memory: 777Mi" "priorityClassName: pc-sentinel" "pool: sentinel" "key: sentinel-taint" \
  "key: sentinel-zone" "sentinel: annotated" "--concurrency=7" "name: pull-sentinel"; do
  grep -qF -- "$expected" "$work/values.yaml" || fail "the value for '$expected' does not reach the rendered output"
done
validate "$work/values.yaml"
pass "every value of $family reaches the rendered output"

# The rendered webhook configurations are the binaries' own (charts#169).
for family in "${families[@]}"; do
  "$KRUISE_BIN_DIR/kruise-$family" manifests --webhook-namespace kr-ns >"$work/$family.manifests.yaml"
  "$PYTHON" - "$work/all.yaml" "$work/$family.manifests.yaml" "$family" <<'PY' || fail "$family's rendered webhooks differ from kruise-$family manifests"
import sys, yaml
kinds = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
def configs(path):
    return {d["metadata"]["name"]: d["webhooks"] for d in yaml.safe_load_all(open(path)) if d and d.get("kind") in kinds}
rendered, printed = configs(sys.argv[1]), configs(sys.argv[2])
if not printed:
    print(f"{sys.argv[3]}: its binary printed no webhook configuration", file=sys.stderr)
    sys.exit(1)
missing = [n for n in printed if rendered.get(n) != printed[n]]
if missing:
    print(f"{sys.argv[3]}: {missing} differ", file=sys.stderr)
    sys.exit(1)
PY
done
pass "each family's rendered webhooks equal its binary's manifests"
