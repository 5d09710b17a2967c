//! CRD version conversion as kube-apiserver does it. Objects are stored in the CRD's
//! storage version; a request in another served version works on the object in that
//! version (schema, defaults, admission), which is converted to the storage version just
//! before it is stored, and every read (get, list, watch, write responses) converts the
//! stored object to the version asked for. With `conversion.strategy: Webhook` that is an
//! `apiextensions.k8s.io/v1` ConversionReview POSTed over HTTPS to the CRD's conversion
//! webhook (verified with its caBundle; a list converts in one review); with `None` only
//! apiVersion changes. As upstream, the webhook may change labels and annotations but no
//! other metadata, and a failed conversion is a 500 naming the conversion webhook.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::registry::ResourceDef;
use crate::{SimShared, meta};

/// kube-apiserver's timeout for a conversion webhook call.
const CONVERSION_TIMEOUT: Duration = Duration::from_secs(30);

fn api_version_of(obj: &Value) -> &str {
    obj.get("apiVersion").and_then(Value::as_str).unwrap_or("")
}

impl SimShared {
    /// `obj` as seen at `version`: the stored object itself when it is already there, else
    /// converted (through the CRD's webhook when it has one).
    pub async fn convert_one(
        &self,
        def: &ResourceDef,
        obj: &Arc<Value>,
        version: &str,
    ) -> ApiResult<Arc<Value>> {
        if def.conversion_webhook.is_none() || api_version_of(obj) == def.api_version(version) {
            return Ok(Self::present(def, version, obj));
        }
        let mut out = self.convert(def, vec![(**obj).clone()], version).await?;
        out.pop()
            .map(Arc::new)
            .ok_or_else(|| ApiError::internal("conversion returned no object"))
    }

    /// Objects of one resource as seen at `version`, in one conversion review.
    pub async fn convert_all(
        &self,
        def: &ResourceDef,
        objs: &[Arc<Value>],
        version: &str,
    ) -> ApiResult<Vec<Arc<Value>>> {
        let want = def.api_version(version);
        if def.conversion_webhook.is_none() || objs.iter().all(|o| api_version_of(o) == want) {
            return Ok(objs
                .iter()
                .map(|o| Self::present(def, version, o))
                .collect());
        }
        let converted = self
            .convert(def, objs.iter().map(|o| (**o).clone()).collect(), version)
            .await?;
        Ok(converted.into_iter().map(Arc::new).collect())
    }

    /// The object to store: `obj` (in the request's version) in the storage version.
    pub async fn to_storage(&self, def: &ResourceDef, obj: Value) -> ApiResult<Value> {
        let storage = def.storage_version().to_string();
        if def.conversion_webhook.is_none() || api_version_of(&obj) == def.api_version(&storage) {
            return Ok(obj);
        }
        let mut out = self.convert(def, vec![obj], &storage).await?;
        out.pop()
            .ok_or_else(|| ApiError::internal("conversion returned no object"))
    }

    /// Converts `objs` to `version`: apiVersion only without a webhook, else one
    /// ConversionReview for the objects not already there.
    async fn convert(
        &self,
        def: &ResourceDef,
        mut objs: Vec<Value>,
        version: &str,
    ) -> ApiResult<Vec<Value>> {
        let want = def.api_version(version);
        let Some(hook) = &def.conversion_webhook else {
            for o in &mut objs {
                if let Some(m) = o.as_object_mut() {
                    m.insert("apiVersion".into(), Value::String(want.clone()));
                }
            }
            return Ok(objs);
        };
        let todo: Vec<usize> = (0..objs.len())
            .filter(|&i| objs.get(i).is_some_and(|o| api_version_of(o) != want))
            .collect();
        if todo.is_empty() {
            return Ok(objs);
        }
        let from = objs
            .get(todo[0])
            .map(|o| api_version_of(o).to_string())
            .unwrap_or_default();
        let failed = |msg: String| {
            ApiError::internal(format!(
                "conversion webhook for {from}, Kind={} failed: {msg}",
                def.kind
            ))
        };
        let request_objects: Vec<Value> =
            todo.iter().filter_map(|&i| objs.get(i).cloned()).collect();
        let converted = call_conversion_webhook(hook, &want, request_objects)
            .await
            .map_err(failed)?;
        if converted.len() != todo.len() {
            return Err(failed(format!(
                "returned {} objects, expected {}",
                converted.len(),
                todo.len()
            )));
        }
        for (&i, mut c) in todo.iter().zip(converted) {
            let Some(original) = objs.get_mut(i) else {
                continue;
            };
            if api_version_of(&c) != want {
                return Err(failed(format!(
                    "invalid converted object: apiVersion {:?}, expected {want:?}",
                    api_version_of(&c)
                )));
            }
            if c.get("kind").and_then(Value::as_str) != Some(def.kind.as_str()) {
                return Err(failed("invalid converted object: kind changed".into()));
            }
            restore_object_meta(original, &mut c);
            *original = c;
        }
        Ok(objs)
    }
}

/// As kube-apiserver's `restoreObjectMeta`: the converted object keeps the original's
/// metadata except labels and annotations, which the webhook may change.
fn restore_object_meta(original: &Value, converted: &mut Value) {
    let mut meta = original
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| json!({}));
    if let (Some(m), Some(new_meta)) = (meta.as_object_mut(), converted.get("metadata")) {
        for key in ["labels", "annotations"] {
            match new_meta.get(key) {
                Some(v) => {
                    m.insert(key.into(), v.clone());
                }
                None => {
                    m.remove(key);
                }
            }
        }
    }
    if let Some(c) = converted.as_object_mut() {
        c.insert("metadata".into(), meta);
    }
}

/// POSTs one ConversionReview; the converted objects, or why not.
async fn call_conversion_webhook(
    hook: &Value,
    desired_api_version: &str,
    objects: Vec<Value>,
) -> Result<Vec<Value>, String> {
    let cc = hook.get("clientConfig").cloned().unwrap_or(Value::Null);
    let url = match cc.get("url").and_then(Value::as_str) {
        Some(u) => u.to_string(),
        None => {
            let svc = cc.get("service").cloned().unwrap_or(Value::Null);
            let ns = svc.get("namespace").and_then(Value::as_str).unwrap_or("");
            let name = svc.get("name").and_then(Value::as_str).unwrap_or("");
            return Err(format!(
                "service \"{name}\" in namespace \"{ns}\" is not reachable from the simulator (register the webhook by url)"
            ));
        }
    };
    let ca = crate::webhooks::ca_bundle(&cc)?;
    let uid = meta::new_uid();
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired_api_version, "objects": objects},
        // kube-apiserver sends an empty response too (its Go struct's zero value).
        "response": {"uid": "", "convertedObjects": null, "result": {"metadata": {}}},
    });
    let body = serde_json::to_vec(&review).map_err(|e| e.to_string())?;
    let response = tokio::time::timeout(
        CONVERSION_TIMEOUT,
        crate::webhooks::post_https(&url, &ca, body),
    )
    .await
    .map_err(|_| format!("Post \"{url}\": context deadline exceeded"))?
    .map_err(|e| format!("Post \"{url}\": {e}"))?;
    let res = response
        .get("response")
        .ok_or("conversion review response is missing")?;
    if res.get("uid").and_then(Value::as_str) != Some(uid.as_str()) {
        return Err("expected response uid to match the request uid".into());
    }
    let result = res.get("result").cloned().unwrap_or(Value::Null);
    if result.get("status").and_then(Value::as_str) != Some("Success") {
        let message = result
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("conversion failed");
        return Err(message.to_string());
    }
    Ok(res
        .get("convertedObjects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default())
}
