//! list: selectors, paging with continue tokens, consistent resourceVersions.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::SimShared;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::registry::ResourceDef;
use crate::selector::{FieldSelector, LabelSelector};

#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
}

pub struct ListResult {
    pub items: Vec<Arc<Value>>,
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<u64>,
}

impl SimShared {
    pub fn validate_field_selector(
        &self,
        def: &ResourceDef,
        version: &str,
        fields: &FieldSelector,
    ) -> ApiResult<()> {
        for r in &fields.requirements {
            if !def.supports_field_selector(version, &r.field) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {}",
                    r.field
                )));
            }
        }
        Ok(())
    }

    pub fn list(
        &self,
        def: &ResourceDef,
        version: &str,
        ns: Option<&str>,
        q: &ListQuery,
    ) -> ApiResult<ListResult> {
        self.validate_field_selector(def, version, &q.fields)?;
        let mut q = q.clone();
        q.fields = storage_fields(def, &q.fields);
        let q = &q;
        let ns = if def.namespaced { ns } else { None };
        let (start_after, token_rv) = match &q.continue_token {
            Some(t) if !t.is_empty() => {
                let (key, rv) = decode_continue(t)?;
                if rv < self.store.compacted_rv() {
                    return Err(ApiError::gone(
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                    ));
                }
                (Some(key), Some(rv))
            }
            _ => (None, None),
        };
        let (all, current_rv) = match &start_after {
            Some(key) => {
                let (kns, kname) = key.split_once('/').unwrap_or(("", key.as_str()));
                if ns.is_some_and(|n| n != kns) {
                    return Err(ApiError::bad_request(
                        "continue key is not valid: the namespace does not match the request",
                    ));
                }
                self.store
                    .list_after(&def.gr(), ns, &(kns.to_string(), kname.to_string()))
            }
            None => self.store.list(&def.gr(), ns),
        };
        let filtering = !q.labels.is_empty() || !q.fields.is_empty();
        let mut items = Vec::new();
        let mut continue_token = None;
        let mut remaining = None;
        let mut iter = all.iter();
        let limit = q.limit.filter(|l| *l > 0);
        for obj in iter.by_ref() {
            if !q.labels.matches(meta::labels_of(obj)) || !q.fields.matches(obj) {
                continue;
            }
            items.push(obj.clone());
            if let Some(l) = limit
                && items.len() >= l
            {
                break;
            }
        }
        let rv = token_rv.unwrap_or(current_rv);
        if let Some(l) = limit
            && items.len() >= l
        {
            let rest: Vec<&Arc<Value>> = iter
                .filter(|o| {
                    !filtering || (q.labels.matches(meta::labels_of(o)) && q.fields.matches(o))
                })
                .collect();
            if !rest.is_empty()
                && let Some(last) = items.last()
            {
                continue_token = Some(encode_continue(&object_key(last), rv));
                if !filtering {
                    remaining = Some(rest.len() as u64);
                }
            }
        }
        Ok(ListResult {
            items,
            resource_version: rv,
            continue_token,
            remaining,
        })
    }
}

/// Field selectors rewritten for the stored shape (events.k8s.io names).
pub fn storage_fields(def: &ResourceDef, fields: &FieldSelector) -> FieldSelector {
    if !def.is_events_v1() {
        return fields.clone();
    }
    let mut out = fields.clone();
    for r in &mut out.requirements {
        r.field = crate::events::core_field(&r.field);
    }
    out
}

fn object_key(obj: &Value) -> String {
    format!(
        "{}/{}",
        meta::meta_str(obj, "namespace"),
        meta::name_of(obj)
    )
}

fn encode_continue(key: &str, rv: u64) -> String {
    use base64::Engine;
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{key}\u{0}")});
    base64::engine::general_purpose::URL_SAFE.encode(token.to_string())
}

fn decode_continue(token: &str) -> ApiResult<(String, u64)> {
    use base64::Engine;
    let bad = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let raw = base64::engine::general_purpose::URL_SAFE
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    if v.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
        return Err(bad());
    }
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let start = v.get("start").and_then(Value::as_str).ok_or_else(bad)?;
    Ok((start.trim_end_matches('\u{0}').to_string(), rv))
}
