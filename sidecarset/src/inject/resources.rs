//! `resourcesPolicy`: a sidecar's resources computed at pod creation from the pod's own
//! containers, as OpenKruise's `applyResourcesPolicy` does.
//!
//! Targets are the pod's native-sidecar init containers (`restartPolicy: Always`), then its
//! containers, whose names `targetContainersNameRegex` matches (Go's `MatchString`: an
//! unanchored search), leaving out every container a matched SidecarSet injects. `sum` adds
//! their resources, `max` takes the largest; a limit exists only when every target sets it
//! (one unlimited target makes the aggregate unlimited, and then the sidecar gets none),
//! a missing request counts as zero. Each `resourcesExpr` is evaluated with the aggregate
//! bound to `memory` when the expression names `memory` as a word, to `cpu` otherwise, and
//! the sidecar's resources are replaced by the results.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as KubeQuantity;

use super::calculator::{Quantity, Value, evaluate};
use crate::api::{ResourceExprs, SidecarContainer, TargetContainersMode};

const CPU: &str = "cpu";
const MEMORY: &str = "memory";

/// Why a policy could not be applied; the text is OpenKruise's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ResourcesPolicyError(pub String);

/// Replaces `sidecar`'s resources with those its `resourcesPolicy` computes for `pod`
/// (nothing to do without a policy). `sidecar_names` are the containers of every matched
/// SidecarSet, which never count as targets.
pub fn apply_resources_policy(
    sidecar: &mut SidecarContainer,
    pod: &Pod,
    sidecar_names: &BTreeSet<&str>,
) -> Result<(), ResourcesPolicyError> {
    let Some(policy) = sidecar.resources_policy.as_ref() else {
        return Ok(());
    };
    let targets = target_containers(pod, &policy.target_containers_name_regex, sidecar_names)?;
    if targets.is_empty() {
        return Err(ResourcesPolicyError(format!(
            "no containers match the regex pattern {:?}",
            policy.target_containers_name_regex
        )));
    }
    let (limits, requests) = aggregate(&targets, &policy.target_containers_mode);
    let mut resources = ResourceRequirements::default();
    if let Some(exprs) = &policy.resources_expr.limits {
        let computed = evaluate_all(exprs, "limits", |resource| limits.get(resource))?;
        resources.limits = (!computed.is_empty()).then_some(computed);
    }
    if let Some(exprs) = &policy.resources_expr.requests {
        let zero = Quantity::zero();
        // A request no target sets counts as zero.
        let computed = evaluate_all(exprs, "requests", |resource| {
            Some(requests.get(resource).unwrap_or(&zero))
        })?;
        resources.requests = (!computed.is_empty()).then_some(computed);
    }
    sidecar.container.resources = Some(resources);
    Ok(())
}

/// Evaluates the cpu and memory expressions of `exprs` against the aggregate `value_of`
/// gives (`None`: unlimited, the resource is left out).
fn evaluate_all<'a>(
    exprs: &ResourceExprs,
    kind: &str,
    value_of: impl Fn(&str) -> Option<&'a Quantity>,
) -> Result<BTreeMap<String, KubeQuantity>, ResourcesPolicyError> {
    let mut out = BTreeMap::new();
    for (resource, label, expr) in [(CPU, "CPU", &exprs.cpu), (MEMORY, "memory", &exprs.memory)] {
        if expr.is_empty() {
            continue;
        }
        let Some(aggregate) = value_of(resource) else {
            continue;
        };
        let quantity = evaluate_resource_expression(expr, aggregate).map_err(|e| {
            ResourcesPolicyError(format!(
                "failed to evaluate {label} {kind} expression: failed to parse expression {expr:?}: {e}"
            ))
        })?;
        out.insert(resource.to_string(), KubeQuantity(quantity.to_go_string()));
    }
    Ok(out)
}

/// OpenKruise's `evaluateResourceExpression` for a non-empty expression.
fn evaluate_resource_expression(expr: &str, aggregate: &Quantity) -> Result<Quantity, String> {
    let variable = expression_variable(expr);
    Ok(
        match evaluate(expr, variable, Value::Quantity(aggregate.clone()))? {
            Value::Quantity(q) => q,
            // A plain-number result is cores for cpu and bytes for memory.
            Value::Number(n) if variable == CPU => Quantity::from_milli((n * 1000.0) as i64),
            Value::Number(n) => Quantity::from_units(n as i64),
        },
    )
}

/// `memory` when the expression holds the word `memory` (Go's ASCII `\b`), else `cpu`.
pub fn expression_variable(expr: &str) -> &'static str {
    let is_word = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
    let bytes = expr.as_bytes();
    let names_memory = expr.match_indices(MEMORY).any(|(at, _)| {
        !is_word(at.checked_sub(1).and_then(|i| bytes.get(i)))
            && !is_word(bytes.get(at + MEMORY.len()))
    });
    if names_memory { MEMORY } else { CPU }
}

/// Compiles `targetContainersNameRegex`; the error is the regex engine's.
pub fn compile_name_regex(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::Regex::new(pattern)
}

fn target_containers<'a>(
    pod: &'a Pod,
    pattern: &str,
    sidecar_names: &BTreeSet<&str>,
) -> Result<Vec<&'a Container>, ResourcesPolicyError> {
    let regex = compile_name_regex(pattern).map_err(|e| {
        ResourcesPolicyError(format!(
            "failed to get target containers: invalid regex pattern {pattern:?}: {e}"
        ))
    })?;
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(Vec::new());
    };
    let native_sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    Ok(native_sidecars
        .chain(spec.containers.iter())
        .filter(|c| !sidecar_names.contains(c.name.as_str()) && regex.is_match(&c.name))
        .collect())
}

fn quantity_of(list: Option<&BTreeMap<String, KubeQuantity>>, resource: &str) -> Option<Quantity> {
    list.and_then(|l| l.get(resource))
        .and_then(|q| Quantity::parse(&q.0))
}

/// The targets' limits and requests, summed or maxed; a limit only when every target has one.
fn aggregate<'a>(
    targets: &[&Container],
    mode: &TargetContainersMode,
) -> (BTreeMap<&'a str, Quantity>, BTreeMap<&'a str, Quantity>) {
    let mut limits = BTreeMap::new();
    let mut requests = BTreeMap::new();
    let sum = match mode {
        TargetContainersMode::Sum => true,
        TargetContainersMode::Max => false,
        TargetContainersMode::Unknown(_) => return (limits, requests),
    };
    for resource in [CPU, MEMORY] {
        let mut limit = sum.then(Quantity::zero);
        let mut all_limited = true;
        let mut request = sum.then(Quantity::zero);
        for c in targets {
            let r = c.resources.as_ref();
            match quantity_of(r.and_then(|r| r.limits.as_ref()), resource) {
                Some(q) => limit = Some(combine(limit, q, sum)),
                None => all_limited = false,
            }
            if let Some(q) = quantity_of(r.and_then(|r| r.requests.as_ref()), resource) {
                request = Some(combine(request, q, sum));
            }
        }
        if let Some(limit) = limit.filter(|_| all_limited) {
            limits.insert(resource, limit);
        }
        // A summed request of zero is left out; the maximum is kept as a target set it.
        if let Some(request) = request.filter(|q| !(sum && q.is_zero())) {
            requests.insert(resource, request);
        }
    }
    (limits, requests)
}

fn combine(acc: Option<Quantity>, q: Quantity, sum: bool) -> Quantity {
    match acc {
        None => q,
        Some(acc) if sum => acc.add(&q),
        // The first target's value stays unless a later one is strictly larger.
        Some(acc) if q.cmp_value(&acc).is_gt() => q,
        Some(acc) => acc,
    }
}

/// Validation of one `resourcesExpr` expression as OpenKruise's webhook does it: evaluated
/// with its variable bound to the number 1.
pub fn validate_expression(expr: &str, variable: &str) -> Result<(), String> {
    evaluate(expr, variable, Value::Number(1.0))
        .map(|_| ())
        .map_err(|e| format!("invalid expression: {e}"))
}

#[cfg(test)]
mod tests;
