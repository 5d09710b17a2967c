//! `SimConfig::authorize` (`up --authorize`): requests that carry a bearer token are
//! authorized by the RBAC objects the simulator stores, as kube-apiserver's RBAC
//! authorizer does, so a family's Role and ClusterRole (the chart's) can be tested against
//! what its code calls. The token names the user: `system:serviceaccount:<ns>:<name>` is
//! that ServiceAccount (groups `system:serviceaccounts`, `system:serviceaccounts:<ns>`,
//! `system:authenticated`); any other token is a user of that name in
//! `system:authenticated`. A request without a token is the kubeconfig's admin and is
//! allowed, so kubectl and the test harness keep working. Non-resource paths (discovery,
//! OpenAPI, /version) are allowed to everyone, as the default `system:discovery` role does.

use std::sync::Arc;

use serde_json::Value;

use crate::SimShared;
use crate::error::ApiError;
use crate::registry::GroupResource;

/// Who sent a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
}

impl User {
    /// The user a bearer token stands for.
    pub fn from_token(token: &str) -> User {
        let mut groups = Vec::new();
        if let Some(rest) = token.strip_prefix("system:serviceaccount:")
            && let Some((namespace, _)) = rest.split_once(':')
        {
            groups.push("system:serviceaccounts".to_string());
            groups.push(format!("system:serviceaccounts:{namespace}"));
        }
        groups.push("system:authenticated".to_string());
        User {
            name: token.to_string(),
            groups,
        }
    }
}

/// What a resource request asks to do (kube's authorizer attributes).
#[derive(Debug, Clone)]
pub struct Attributes<'a> {
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    /// Empty for cluster-scoped requests.
    pub namespace: &'a str,
    /// Empty for list, watch, create without a name and deletecollection.
    pub name: &'a str,
}

/// Allows the request, or answers 403 Forbidden with kube-apiserver's message.
pub fn authorize(sh: &Arc<SimShared>, user: &User, attrs: &Attributes<'_>) -> Result<(), ApiError> {
    if rules_for(sh, user, attrs.namespace)
        .iter()
        .any(|rule| rule_allows(rule, attrs))
    {
        return Ok(());
    }
    tracing::warn!(
        user = %user.name,
        verb = attrs.verb,
        group = attrs.group,
        resource = attrs.resource,
        subresource = attrs.subresource,
        namespace = attrs.namespace,
        name = attrs.name,
        "forbidden by RBAC"
    );
    Err(forbidden(user, attrs))
}

fn forbidden(user: &User, attrs: &Attributes<'_>) -> ApiError {
    let qualified = crate::error::qualified(attrs.group, attrs.resource);
    let object = if attrs.name.is_empty() {
        qualified
    } else {
        format!("{qualified} \"{}\"", attrs.name)
    };
    let resource = if attrs.subresource.is_empty() {
        attrs.resource.to_string()
    } else {
        format!("{}/{}", attrs.resource, attrs.subresource)
    };
    let scope = if attrs.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace \"{}\"", attrs.namespace)
    };
    let mut err = ApiError::forbidden(format!(
        "{object} is forbidden: User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
        user.name, attrs.verb, attrs.group
    ));
    err.name = (!attrs.name.is_empty()).then(|| attrs.name.to_string());
    err.group = Some(attrs.group.to_string());
    err.kind = Some(attrs.resource.to_string());
    err
}

/// The rules that apply to `user` for a request in `namespace` (empty: cluster scope):
/// its ClusterRoleBindings' ClusterRoles everywhere, and, in a namespace, that
/// namespace's RoleBindings' Roles or ClusterRoles.
fn rules_for(sh: &Arc<SimShared>, user: &User, namespace: &str) -> Vec<Value> {
    let rbac = |resource: &str| GroupResource::new("rbac.authorization.k8s.io", resource);
    let role_rules = |kind: &str, name: &str, binding_namespace: &str| -> Vec<Value> {
        let role = match kind {
            "ClusterRole" => sh.store.get(&rbac("clusterroles"), "", name),
            "Role" => sh.store.get(&rbac("roles"), binding_namespace, name),
            _ => None,
        };
        role.and_then(|r| r.get("rules").and_then(Value::as_array).cloned())
            .unwrap_or_default()
    };
    let mut rules = Vec::new();
    let mut add_bound = |bindings: Vec<Arc<Value>>, binding_namespace: &str| {
        for binding in bindings {
            let subjects = binding.get("subjects").and_then(Value::as_array);
            if !subjects.is_some_and(|s| {
                s.iter()
                    .any(|s| subject_matches(s, user, binding_namespace))
            }) {
                continue;
            }
            let kind = binding
                .pointer("/roleRef/kind")
                .and_then(Value::as_str)
                .unwrap_or("");
            let name = binding
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            rules.extend(role_rules(kind, name, binding_namespace));
        }
    };
    add_bound(sh.store.list(&rbac("clusterrolebindings"), None).0, "");
    if !namespace.is_empty() {
        add_bound(
            sh.store.list(&rbac("rolebindings"), Some(namespace)).0,
            namespace,
        );
    }
    rules
}

fn subject_matches(subject: &Value, user: &User, binding_namespace: &str) -> bool {
    let field = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or("");
    match field("kind") {
        "User" => field("name") == user.name,
        "Group" => user.groups.iter().any(|g| g == field("name")),
        "ServiceAccount" => {
            let namespace = match field("namespace") {
                "" => binding_namespace,
                ns => ns,
            };
            user.name == format!("system:serviceaccount:{namespace}:{}", field("name"))
        }
        _ => false,
    }
}

fn rule_allows(rule: &Value, attrs: &Attributes<'_>) -> bool {
    let list = |k: &str| -> Vec<&str> {
        rule.get(k)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    };
    let verbs = list("verbs");
    let groups = list("apiGroups");
    let resources = list("resources");
    let names = list("resourceNames");
    let verb_ok = verbs.iter().any(|v| *v == "*" || *v == attrs.verb);
    let group_ok = groups.iter().any(|g| *g == "*" || *g == attrs.group);
    let resource_ok = resources.iter().any(|r| resource_matches(r, attrs));
    let name_ok = names.is_empty() || names.contains(&attrs.name);
    verb_ok && group_ok && resource_ok && name_ok
}

/// kube's `ResourceMatches`: `*`, `resource`, `resource/subresource`, `*/subresource`
/// and `resource/*`.
fn resource_matches(rule: &str, attrs: &Attributes<'_>) -> bool {
    if rule == "*" {
        return true;
    }
    if attrs.subresource.is_empty() {
        return rule == attrs.resource;
    }
    match rule.split_once('/') {
        Some((resource, sub)) => {
            (resource == attrs.resource || resource == "*")
                && (sub == attrs.subresource || sub == "*")
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs<'a>(verb: &'a str, resource: &'a str, subresource: &'a str) -> Attributes<'a> {
        Attributes {
            verb,
            group: "",
            resource,
            subresource,
            namespace: "default",
            name: "p",
        }
    }

    #[test]
    fn rules_match_verbs_groups_resources_subresources_and_names() {
        let rule = json!({"apiGroups": [""], "resources": ["pods", "pods/status"], "verbs": ["get", "patch"]});
        assert!(rule_allows(&rule, &attrs("get", "pods", "")));
        assert!(rule_allows(&rule, &attrs("patch", "pods", "status")));
        assert!(!rule_allows(&rule, &attrs("delete", "pods", "")));
        assert!(!rule_allows(&rule, &attrs("create", "pods", "eviction")));
        let wildcard = json!({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]});
        assert!(rule_allows(&wildcard, &attrs("update", "pods", "status")));
        assert!(!rule_allows(&wildcard, &attrs("update", "pods", "")));
        let named = json!({"apiGroups": [""], "resources": ["pods"], "resourceNames": ["q"], "verbs": ["get"]});
        assert!(!rule_allows(&named, &attrs("get", "pods", "")));
    }

    #[test]
    fn service_accounts_are_users_with_their_groups() {
        let user = User::from_token("system:serviceaccount:kruise-system:kruise-cloneset");
        assert!(
            user.groups
                .contains(&"system:serviceaccounts:kruise-system".to_string())
        );
        let sa = json!({"kind": "ServiceAccount", "name": "kruise-cloneset", "namespace": "kruise-system"});
        assert!(subject_matches(&sa, &user, ""));
        let group = json!({"kind": "Group", "name": "system:serviceaccounts"});
        assert!(subject_matches(&group, &user, ""));
        let other =
            json!({"kind": "ServiceAccount", "name": "kruise-cloneset", "namespace": "default"});
        assert!(!subject_matches(&other, &user, ""));
    }

    #[test]
    fn denials_read_like_kube_apiservers() {
        let user = User::from_token("system:serviceaccount:kruise-system:kruise-cloneset");
        let err = forbidden(&user, &attrs("create", "pods", "eviction"));
        assert_eq!(err.code, 403);
        assert_eq!(
            err.message,
            "pods \"p\" is forbidden: User \"system:serviceaccount:kruise-system:kruise-cloneset\" cannot create resource \"pods/eviction\" in API group \"\" in the namespace \"default\""
        );
        let cluster = Attributes {
            verb: "list",
            group: "apiextensions.k8s.io",
            resource: "customresourcedefinitions",
            subresource: "",
            namespace: "",
            name: "",
        };
        assert_eq!(
            forbidden(&user, &cluster).message,
            "customresourcedefinitions.apiextensions.k8s.io is forbidden: User \"system:serviceaccount:kruise-system:kruise-cloneset\" cannot list resource \"customresourcedefinitions\" in API group \"apiextensions.k8s.io\" at the cluster scope"
        );
    }
}
