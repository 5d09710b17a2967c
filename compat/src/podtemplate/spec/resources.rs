//! A container's `resources`: resource names, quantities, requests against limits.

use super::*;

/// Container resource names kube-apiserver accepts without a domain.
fn is_standard_container_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-")
}

/// Whether the API server lets a request be below its limit (native resources); extended
/// resources and huge pages must be requested exactly at their limit.
fn overcommit_allowed(name: &str) -> bool {
    is_native_resource(name) && !name.starts_with("hugepages-")
}

fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

fn validate_resource_name(name: &str, at: &Path) -> Vec<FieldError> {
    let problems = qualified_name_errors(name);
    if !problems.is_empty() {
        return problems
            .into_iter()
            .map(|detail| FieldError::invalid(at.clone(), name, detail))
            .collect();
    }
    if !name.contains('/') {
        if !is_standard_container_resource(name) {
            return vec![FieldError::invalid(
                at.clone(),
                name,
                "must be a standard resource for containers",
            )];
        }
    } else if !is_native_resource(name) && name.starts_with("requests.") {
        return vec![FieldError::invalid(
            at.clone(),
            name,
            "doesn't follow extended resource name standard",
        )];
    }
    Vec::new()
}

/// A quantity's value, or the error kube-apiserver gives for it: the format, a negative
/// value, or a fraction of a resource counted in whole units.
fn quantity_value(name: &str, quantity: &Quantity, at: &Path) -> Result<Nanos, FieldError> {
    let Some(value) = parse_nanos(&quantity.0) else {
        return Err(FieldError::invalid(
            at.clone(),
            &quantity.0,
            QUANTITY_FORMAT_MESSAGE,
        ));
    };
    if value < 0 {
        return Err(FieldError::invalid(
            at.clone(),
            &quantity.0,
            NEGATIVE_MESSAGE,
        ));
    }
    if !is_native_resource(name) && value % 1_000_000_000 != 0 {
        return Err(FieldError::invalid(
            at.clone(),
            &quantity.0,
            "must be an integer",
        ));
    }
    Ok(value)
}

/// A non-negative quantity as `SetDefaults_ResourceList` leaves it, rounded up to
/// milli-units: requests and limits are compared after the pod's defaults (OpenKruise's
/// webhooks default the template before validating it, the API server the pod), so `271u`
/// is not above `79608n` (both `1m`). Found by the differential test against OpenKruise
/// (daemonset/tests/openkruise_oracle.rs).
fn milli_rounded(nanos: Nanos) -> Nanos {
    const MILLI: Nanos = 1_000_000;
    if nanos % MILLI == 0 {
        nanos
    } else {
        (nanos / MILLI + 1) * MILLI
    }
}

/// `ValidateContainerResourceRequirements`: valid names and quantities, requests at most
/// their limits (exactly their limits where overcommit is not allowed), huge pages only
/// with cpu or memory.
pub(super) fn validate_resources(resources: &ResourceRequirements, path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let limits_path = path.child("limits");
    let requests_path = path.child("requests");
    let empty = BTreeMap::new();
    let limits = resources.limits.as_ref().unwrap_or(&empty);
    let requests = resources.requests.as_ref().unwrap_or(&empty);
    let mut limit_values = BTreeMap::new();
    for (name, quantity) in limits {
        let at = limits_path.key(name);
        errors.extend(validate_resource_name(name, &at));
        match quantity_value(name, quantity, &at) {
            Ok(value) => {
                limit_values.insert(name.as_str(), milli_rounded(value));
            }
            Err(e) => errors.push(e),
        }
    }
    for (name, quantity) in requests {
        let at = requests_path.key(name);
        errors.extend(validate_resource_name(name, &at));
        let value = match quantity_value(name, quantity, &at) {
            Ok(value) => milli_rounded(value),
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        match (limit_values.get(name.as_str()), limits.get(name)) {
            (Some(limit), Some(limit_quantity)) => {
                if !overcommit_allowed(name) && value != *limit {
                    errors.push(FieldError::invalid(
                        requests_path.clone(),
                        &quantity.0,
                        format!("must be equal to {name} limit of {}", limit_quantity.0),
                    ));
                } else if value > *limit {
                    errors.push(FieldError::invalid(
                        requests_path.clone(),
                        &quantity.0,
                        format!(
                            "must be less than or equal to {name} limit of {}",
                            limit_quantity.0
                        ),
                    ));
                }
            }
            (None, Some(_)) => {}
            (_, None) => {
                if !overcommit_allowed(name) {
                    errors.push(FieldError::required(
                        limits_path.clone(),
                        "Limit must be set for non overcommitable resources",
                    ));
                }
            }
        }
    }
    let names = || limits.keys().chain(requests.keys());
    if names().any(|n| n.starts_with("hugepages-")) && !names().any(|n| n == "cpu" || n == "memory")
    {
        errors.push(FieldError::forbidden(
            path.clone(),
            "HugePages require cpu or memory",
        ));
    }
    errors
}
