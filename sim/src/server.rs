//! HTTP routing: parses Kubernetes REST paths and query parameters and calls `ops`.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use serde_json::{Value, json};

use crate::SimShared;
use crate::discovery;
use crate::error::{ApiError, ApiResult};
use crate::metrics::RequestKey;
use crate::ops::{DeleteOptions, ListQuery, Subresource, WriteOptions};
use crate::patch::PatchType;
use crate::registry::ResourceDef;
use crate::request::{Query, Representation, parse_query, representation};
use crate::selector::{FieldSelector, LabelSelector};
use crate::table::{self, IncludeObject};

/// The largest request body the real API server accepts (3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

pub fn router(shared: Arc<SimShared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
}

pub fn json_response(code: u16, body: &Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    bytes_response(code, "application/json", Bytes::from(bytes))
}

fn bytes_response(code: u16, content_type: &str, body: Bytes) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    resp
}

pub fn error_response(err: &ApiError) -> Response {
    let mut resp = json_response(err.code, &err.to_status());
    if let Some(secs) = err.retry_after_seconds
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

/// Parsed resource request.
pub struct ResourceRequest {
    pub def: Arc<ResourceDef>,
    pub version: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    pub watch_path: bool,
}

enum Route {
    Version,
    Health,
    Metrics,
    CoreVersions,
    Groups,
    Group(String),
    ResourceList(String, String),
    OpenApiV2,
    OpenApiV3Root,
    OpenApiV3(String, String),
    Resource(ResourceRequest),
}

fn route(sh: &SimShared, path: &str) -> ApiResult<Route> {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    match segs.as_slice() {
        ["version"] => return Ok(Route::Version),
        ["healthz"] | ["livez"] | ["readyz"] => return Ok(Route::Health),
        ["metrics"] => return Ok(Route::Metrics),
        ["api"] => return Ok(Route::CoreVersions),
        ["apis"] => return Ok(Route::Groups),
        ["openapi", "v2"] | ["swagger.json"] | ["swagger-2.0.0.pb-v1"] => {
            return Ok(Route::OpenApiV2);
        }
        ["openapi", "v3"] => return Ok(Route::OpenApiV3Root),
        ["openapi", "v3", "api", v] => return Ok(Route::OpenApiV3(String::new(), v.to_string())),
        ["openapi", "v3", "apis", g, v] => {
            return Ok(Route::OpenApiV3(g.to_string(), v.to_string()));
        }
        ["api", v] => return Ok(Route::ResourceList(String::new(), v.to_string())),
        ["apis", g] => return Ok(Route::Group(g.to_string())),
        ["apis", g, v] => return Ok(Route::ResourceList(g.to_string(), v.to_string())),
        _ => {}
    }
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => (String::new(), v.to_string(), rest),
        ["apis", g, v, rest @ ..] => (g.to_string(), v.to_string(), rest),
        _ => return Err(ApiError::path_not_found()),
    };
    let (watch_path, rest) = match rest {
        ["watch", r @ ..] => (true, r),
        r => (false, r),
    };
    let core = group.is_empty();
    let (namespace, resource, name, sub): (Option<&str>, &str, Option<&str>, Option<&str>) =
        match rest {
            ["namespaces"] => (None, "namespaces", None, None),
            ["namespaces", ns] => (None, "namespaces", Some(ns), None),
            ["namespaces", ns, s @ ("status" | "finalize")] if core => {
                (None, "namespaces", Some(ns), Some(s))
            }
            ["namespaces", ns, res] => (Some(ns), res, None, None),
            ["namespaces", ns, res, name] => (Some(ns), res, Some(name), None),
            ["namespaces", ns, res, name, sub] => (Some(ns), res, Some(name), Some(sub)),
            [res] => (None, res, None, None),
            [res, name] => (None, res, Some(name), None),
            [res, name, sub] => (None, res, Some(name), Some(sub)),
            _ => return Err(ApiError::path_not_found()),
        };
    let def = sh
        .resolve(&group, &version, resource)
        .ok_or_else(ApiError::path_not_found)?;
    if namespace.is_some() && !def.namespaced {
        return Err(ApiError::path_not_found());
    }
    // Namespaced objects are only addressable inside their namespace.
    if namespace.is_none() && def.namespaced && name.is_some() {
        return Err(ApiError::path_not_found());
    }
    if let Some(s) = sub {
        let known = (s == "status" && def.has_status(&version))
            || (s == "scale" && def.scale(&version).is_some())
            || def.extra_subresources.contains(&s);
        if !known {
            return Err(ApiError::path_not_found());
        }
    }
    Ok(Route::Resource(ResourceRequest {
        def,
        version,
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
        subresource: sub.map(str::to_string),
        watch_path,
    }))
}

async fn handle(State(sh): State<Arc<SimShared>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let ua = parts
        .headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .chars()
        .take(256)
        .collect::<String>();
    let query = parse_query(parts.uri.query());
    let path = parts.uri.path().to_string();
    let route = route(&sh, &path);
    let (verb, group, resource, sub, name) = match &route {
        Ok(Route::Resource(r)) => (
            verb_of(&parts.method, r, &query),
            r.def.group.clone(),
            r.def.plural.clone(),
            r.subresource.clone().unwrap_or_default(),
            r.name.clone().unwrap_or_default(),
        ),
        Ok(Route::Metrics) => (
            "metrics".to_string(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ),
        _ => (
            "discovery".to_string(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ),
    };
    sh.faults.wait_unpaused().await;
    let decision = sh.faults.decide(&verb, &resource, &sub, &name, &group);
    if !decision.latency.is_zero() {
        tokio::time::sleep(decision.latency).await;
    }
    let resp = match decision.error {
        Some(err) => error_response(&err),
        None => match route {
            Err(e) => error_response(&e),
            Ok(route) => {
                let declared = parts
                    .headers
                    .get(header::CONTENT_LENGTH)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0);
                if declared > MAX_BODY {
                    let e = ApiError::request_entity_too_large("limit is 3145728");
                    record(&sh, &verb, &group, &resource, &sub, &ua, e.code);
                    return error_response(&e);
                }
                let bytes = match axum::body::to_bytes(body, MAX_BODY + 1).await {
                    Ok(b) if b.len() > MAX_BODY => {
                        let e = ApiError::request_entity_too_large("limit is 3145728");
                        record(&sh, &verb, &group, &resource, &sub, &ua, e.code);
                        return error_response(&e);
                    }
                    Ok(b) => b,
                    Err(e) => {
                        let e = ApiError::bad_request(format!("error reading request body: {e}"));
                        record(&sh, &verb, &group, &resource, &sub, &ua, e.code);
                        return error_response(&e);
                    }
                };
                match serve(
                    &sh,
                    route,
                    &parts.method,
                    &parts.headers,
                    &query,
                    bytes,
                    &ua,
                )
                .await
                {
                    Ok(r) => r,
                    Err(e) => error_response(&e),
                }
            }
        },
    };
    record(
        &sh,
        &verb,
        &group,
        &resource,
        &sub,
        &ua,
        resp.status().as_u16(),
    );
    resp
}

fn record(sh: &SimShared, verb: &str, group: &str, resource: &str, sub: &str, ua: &str, code: u16) {
    sh.counters.record(RequestKey {
        verb: verb.to_string(),
        group: group.to_string(),
        resource: resource.to_string(),
        subresource: sub.to_string(),
        user_agent: ua.to_string(),
        code,
    });
}

/// The user a request's bearer token names, if it has one.
fn bearer_user(headers: &HeaderMap) -> Option<crate::authz::User> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let token = value.strip_prefix("Bearer ")?.trim();
    (!token.is_empty()).then(|| crate::authz::User::from_token(token))
}

fn is_true(q: &Query, key: &str) -> bool {
    q.get(key).is_some_and(|v| v == "true" || v == "1")
}

fn verb_of(method: &Method, r: &ResourceRequest, q: &Query) -> String {
    let v = match *method {
        Method::GET | Method::HEAD => {
            if r.watch_path || is_true(q, "watch") {
                "watch"
            } else if r.name.is_some() {
                "get"
            } else {
                "list"
            }
        }
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => {
            if r.name.is_some() {
                "delete"
            } else {
                "deletecollection"
            }
        }
        _ => "unknown",
    };
    v.to_string()
}

fn write_options(q: &Query, ua: &str, headers: &HeaderMap) -> ApiResult<WriteOptions> {
    let dry_run = match q.get("dryRun").map(String::as_str) {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Invalid dry run value: {other:?}; the only supported value is \"All\""
            )));
        }
    };
    Ok(WriteOptions {
        dry_run,
        field_manager: q.get("fieldManager").cloned(),
        force: is_true(q, "force"),
        user_agent: ua.to_string(),
        user: bearer_user(headers),
        delete_options: None,
        internal: false,
        field_validation: Some(crate::fieldvalidation::FieldValidation::parse(
            q.get("fieldValidation").map(String::as_str),
        )?),
        warnings: Default::default(),
    })
}

/// Adds a `Warning: 299 - "<text>"` header per warning the write recorded, as
/// kube-apiserver returns them (kubectl prints each as `Warning: <text>`).
fn with_warnings(mut resp: Response, warnings: &crate::ops::Warnings) -> Response {
    for text in warnings.take() {
        let escaped = text.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(value) = HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
            resp.headers_mut().append(header::WARNING, value);
        }
    }
    resp
}

fn list_query(q: &Query) -> ApiResult<ListQuery> {
    let labels = LabelSelector::parse(q.get("labelSelector").map(String::as_str).unwrap_or(""))
        .map_err(ApiError::bad_request)?;
    let fields = FieldSelector::parse(q.get("fieldSelector").map(String::as_str).unwrap_or(""))
        .map_err(ApiError::bad_request)?;
    let limit = match q.get("limit") {
        None => None,
        Some(l) if l.is_empty() => None,
        Some(l) => Some(
            l.parse::<i64>()
                .map_err(|_| ApiError::bad_request(format!("invalid limit: {l}")))?
                .max(0) as usize,
        ),
    };
    Ok(ListQuery {
        labels,
        fields,
        limit,
        continue_token: q.get("continue").cloned().filter(|c| !c.is_empty()),
    })
}

fn decode_body(headers: &HeaderMap, body: &[u8]) -> ApiResult<Value> {
    if body.is_empty() {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    if ct.starts_with("application/vnd.kubernetes.protobuf") {
        return crate::protobuf::decode(body);
    }
    if ct.contains("protobuf") || ct.contains("cbor") {
        return Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {ct})"
        )));
    }
    if ct.contains("yaml") {
        return crate::ops::parse_yaml_or_json(body);
    }
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the object provided is unrecognized or could not be decoded: json: {e}"
        ))
    })
}

fn serialize_obj(obj: &Value, repr: Representation) -> Value {
    match repr {
        Representation::PartialMetadata => table::partial_metadata(obj),
        _ => obj.clone(),
    }
}

fn object_response(
    code: u16,
    def: &ResourceDef,
    version: &str,
    obj: &Arc<Value>,
    repr: Representation,
) -> Response {
    let presented = SimShared::present(def, version, obj);
    match repr {
        Representation::Object => {
            let bytes = serde_json::to_vec(&*presented).unwrap_or_default();
            bytes_response(code, "application/json", Bytes::from(bytes))
        }
        Representation::PartialMetadata => json_response(code, &serialize_obj(&presented, repr)),
        Representation::Table => json_response(
            code,
            &table::table(
                def,
                version,
                &[presented],
                IncludeObject::Metadata,
                true,
                None,
                None,
                None,
            ),
        ),
    }
}

fn success_status(def: &ResourceDef, name: &str, uid: &str) -> Value {
    let mut details = json!({"name": name, "kind": def.plural, "uid": uid});
    if !def.group.is_empty() {
        details["group"] = json!(def.group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

async fn serve(
    sh: &Arc<SimShared>,
    route: Route,
    method: &Method,
    headers: &HeaderMap,
    q: &Query,
    body: Bytes,
    ua: &str,
) -> ApiResult<Response> {
    let get_only = |m: &Method| {
        if *m == Method::GET || *m == Method::HEAD {
            Ok(())
        } else {
            Err(ApiError::method_not_allowed())
        }
    };
    match route {
        Route::Version => {
            get_only(method)?;
            Ok(json_response(200, &discovery::version()))
        }
        Route::Health => Ok(bytes_response(
            200,
            "text/plain; charset=utf-8",
            Bytes::from_static(b"ok"),
        )),
        Route::Metrics => Ok(bytes_response(
            200,
            "text/plain; version=0.0.4; charset=utf-8",
            Bytes::from(sh.counters.prometheus_text()),
        )),
        Route::CoreVersions => {
            get_only(method)?;
            let host = headers
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("127.0.0.1")
                .to_string();
            Ok(json_response(200, &discovery::core_versions(&host)))
        }
        Route::Groups => {
            get_only(method)?;
            let reg = sh.store.registry();
            Ok(json_response(200, &discovery::group_list(&reg)))
        }
        Route::Group(g) => {
            get_only(method)?;
            let reg = sh.store.registry();
            discovery::group(&reg, &g)
                .map(|v| json_response(200, &v))
                .ok_or_else(ApiError::path_not_found)
        }
        Route::ResourceList(g, v) => {
            get_only(method)?;
            let reg = sh.store.registry();
            discovery::resource_list(&reg, &g, &v)
                .map(|d| json_response(200, &d))
                .ok_or_else(ApiError::path_not_found)
        }
        Route::OpenApiV2 => {
            get_only(method)?;
            // Old kubectl (<= 1.28) asks for the protobuf rendering only; it gets a
            // minimal valid document (no definitions), so it falls back to its
            // built-in types for strategic merge and skips client-side schema checks.
            let accept = headers
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            if accept.contains("protobuf") && !accept.contains("json") && !accept.contains("*/*") {
                return Ok(bytes_response(
                    200,
                    "application/octet-stream",
                    Bytes::from(discovery::openapi_v2_protobuf_minimal()),
                ));
            }
            let reg = sh.store.registry();
            Ok(json_response(200, &discovery::openapi_v2(&reg)))
        }
        Route::OpenApiV3Root => {
            get_only(method)?;
            let reg = sh.store.registry();
            Ok(json_response(200, &discovery::openapi_v3_root(&reg)))
        }
        Route::OpenApiV3(g, v) => {
            get_only(method)?;
            let reg = sh.store.registry();
            discovery::openapi_v3_gv(&reg, &g, &v)
                .map(|d| json_response(200, &d))
                .ok_or_else(ApiError::path_not_found)
        }
        Route::Resource(r) => {
            if sh.config.authorize
                && let Some(user) = bearer_user(headers)
            {
                let verb = verb_of(method, &r, q);
                let attrs = crate::authz::Attributes {
                    verb: &verb,
                    group: &r.def.group,
                    resource: &r.def.plural,
                    subresource: r.subresource.as_deref().unwrap_or(""),
                    namespace: r.namespace.as_deref().unwrap_or(""),
                    name: r.name.as_deref().unwrap_or(""),
                };
                crate::authz::authorize(sh, &user, &attrs)?;
            }
            serve_resource(sh, r, method, headers, q, body, ua).await
        }
    }
}

async fn serve_resource(
    sh: &Arc<SimShared>,
    r: ResourceRequest,
    method: &Method,
    headers: &HeaderMap,
    q: &Query,
    body: Bytes,
    ua: &str,
) -> ApiResult<Response> {
    let def = r.def.clone();
    let version = r.version.clone();
    let ns = r.namespace.clone().unwrap_or_default();
    let repr = representation(headers);
    let sub = r.subresource.clone();
    match (method.clone(), r.name.clone(), sub.as_deref()) {
        (Method::GET, _, _) if r.watch_path || is_true(q, "watch") => {
            let mut lq = list_query(q)?;
            if let Some(name) = &r.name {
                lq.fields
                    .requirements
                    .push(crate::selector::FieldRequirement {
                        field: "metadata.name".into(),
                        value: name.clone(),
                        negate: false,
                    });
            }
            crate::watch::serve_watch(sh.clone(), def, version, r.namespace.clone(), lq, q, repr)
                .await
        }
        (Method::GET, None, None) => {
            let lq = list_query(q)?;
            let res = sh.list(&def, &version, r.namespace.as_deref(), &lq)?;
            let items: Vec<Arc<Value>> = sh.convert_all(&def, &res.items, &version).await?;
            match repr {
                Representation::Table => Ok(json_response(
                    200,
                    &table::table(
                        &def,
                        &version,
                        &items,
                        IncludeObject::parse(q.get("includeObject").map(String::as_str)),
                        true,
                        Some(res.resource_version),
                        res.continue_token.as_deref(),
                        res.remaining,
                    ),
                )),
                _ => {
                    let (kind, api_version) = if repr == Representation::PartialMetadata {
                        (
                            "PartialObjectMetadataList".to_string(),
                            "meta.k8s.io/v1".to_string(),
                        )
                    } else {
                        (def.list_kind.clone(), def.api_version(&version))
                    };
                    let mut meta = serde_json::Map::new();
                    meta.insert(
                        "resourceVersion".into(),
                        json!(res.resource_version.to_string()),
                    );
                    if let Some(c) = &res.continue_token {
                        meta.insert("continue".into(), json!(c));
                    }
                    if let Some(n) = res.remaining {
                        meta.insert("remainingItemCount".into(), json!(n));
                    }
                    Ok(list_response(
                        &kind,
                        &api_version,
                        &Value::Object(meta),
                        &items,
                        repr,
                    ))
                }
            }
        }
        (Method::GET, Some(name), None) => {
            let obj = sh.get(&def, &ns, &name)?;
            let obj = sh.convert_one(&def, &obj, &version).await?;
            Ok(object_response(200, &def, &version, &obj, repr))
        }
        (Method::GET, Some(name), Some("status" | "resize")) => {
            let obj = sh.get(&def, &ns, &name)?;
            let obj = sh.convert_one(&def, &obj, &version).await?;
            Ok(object_response(
                200,
                &def,
                &version,
                &obj,
                Representation::Object,
            ))
        }
        (Method::GET, Some(name), Some("scale")) => {
            let obj = sh.get(&def, &ns, &name)?;
            Ok(json_response(200, &sh.scale_of(&def, &version, &obj)?))
        }
        (Method::POST, None, None) => {
            let opts = write_options(q, ua, headers)?;
            let obj = decode_body(headers, &body)?;
            if r.namespace.is_none() && def.namespaced {
                return Err(ApiError::path_not_found());
            }
            let created = sh.create(&def, &version, &ns, obj, &opts).await?;
            let created = sh.convert_one(&def, &created, &version).await?;
            Ok(with_warnings(
                object_response(201, &def, &version, &created, repr),
                &opts.warnings,
            ))
        }
        (Method::POST, Some(name), Some("binding")) => {
            let opts = write_options(q, ua, headers)?;
            let b = decode_body(headers, &body)?;
            sh.bind_pod(&ns, &name, &b, &opts).await?;
            Ok(json_response(
                201,
                &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
            ))
        }
        (Method::POST, Some(name), Some("eviction")) => {
            let opts = write_options(q, ua, headers)?;
            let b = decode_body(headers, &body)?;
            if let Some(n) = b.pointer("/metadata/name").and_then(Value::as_str)
                && n != name
            {
                return Err(ApiError::bad_request(
                    "name in URL does not match name in Eviction object",
                ));
            }
            sh.evict_pod(&ns, &name, &b, &opts).await?;
            Ok(json_response(
                201,
                &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
            ))
        }
        (Method::PUT, Some(name), None | Some("status" | "resize" | "finalize")) => {
            let opts = write_options(q, ua, headers)?;
            let obj = decode_body(headers, &body)?;
            let sr = subresource_of(sub.as_deref());
            let updated = sh
                .update(&def, &version, &ns, &name, obj, sr, &opts)
                .await?;
            let updated = sh.convert_one(&def, &updated, &version).await?;
            Ok(with_warnings(
                object_response(200, &def, &version, &updated, repr),
                &opts.warnings,
            ))
        }
        (Method::PUT, Some(name), Some("scale")) => {
            let opts = write_options(q, ua, headers)?;
            let scale = decode_body(headers, &body)?;
            let out = sh
                .update_scale(&def, &version, &ns, &name, &scale, &opts)
                .await?;
            Ok(json_response(200, &out))
        }
        (Method::PATCH, Some(name), None | Some("status" | "resize")) => {
            let opts = write_options(q, ua, headers)?;
            let pt = patch_type(headers)?;
            let sr = subresource_of(sub.as_deref());
            let existed = sh.get(&def, &ns, &name).is_ok();
            if pt == PatchType::Apply && r.namespace.is_none() && def.namespaced {
                return Err(ApiError::path_not_found());
            }
            let patched = sh
                .patch(&def, &version, &ns, &name, pt, &body, sr, &opts)
                .await?;
            let patched = sh.convert_one(&def, &patched, &version).await?;
            let code = if pt == PatchType::Apply && !existed {
                201
            } else {
                200
            };
            Ok(with_warnings(
                object_response(code, &def, &version, &patched, repr),
                &opts.warnings,
            ))
        }
        (Method::PATCH, Some(name), Some("scale")) => {
            let opts = write_options(q, ua, headers)?;
            let pt = patch_type(headers)?;
            let obj = sh.get(&def, &ns, &name)?;
            let current = sh.scale_of(&def, &version, &obj)?;
            let desired = match pt {
                PatchType::Json => crate::patch::json_patch(current, &body)?,
                PatchType::Merge | PatchType::Apply => {
                    let p = crate::ops::parse_yaml_or_json(&body)?;
                    crate::patch::merge_patch(current, &p)
                }
                PatchType::Strategic => {
                    let p: Value = serde_json::from_slice(&body)
                        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
                    crate::patch::strategic_merge("Scale", current, &p)?
                }
            };
            let out = sh
                .update_scale(&def, &version, &ns, &name, &desired, &opts)
                .await?;
            Ok(json_response(200, &out))
        }
        (Method::DELETE, Some(name), None) => {
            let wopts = write_options(q, ua, headers)?;
            let dopts = delete_options(q, headers, &body)?;
            let outcome = sh.delete(&def, &ns, &name, &dopts, &wopts).await?;
            let is_pod = def.group.is_empty() && def.plural == "pods";
            if outcome.removed && !is_pod {
                Ok(json_response(
                    200,
                    &success_status(&def, &name, crate::meta::meta_str(&outcome.object, "uid")),
                ))
            } else {
                let object = sh.convert_one(&def, &outcome.object, &version).await?;
                Ok(object_response(200, &def, &version, &object, repr))
            }
        }
        (Method::DELETE, None, None) => {
            let wopts = write_options(q, ua, headers)?;
            let dopts = delete_options(q, headers, &body)?;
            let lq = list_query(q)?;
            let deleted = sh
                .delete_collection(&def, &version, r.namespace.as_deref(), &lq, &dopts, &wopts)
                .await?;
            let items: Vec<Arc<Value>> = sh.convert_all(&def, &deleted, &version).await?;
            let meta = json!({"resourceVersion": sh.store.current_rv().to_string()});
            Ok(list_response(
                &def.list_kind,
                &def.api_version(&version),
                &meta,
                &items,
                Representation::Object,
            ))
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn list_response(
    kind: &str,
    api_version: &str,
    meta: &Value,
    items: &[Arc<Value>],
    repr: Representation,
) -> Response {
    // Hand-assembled so 10,000 items are serialized once, without cloning.
    let mut buf: Vec<u8> = Vec::with_capacity(256 + items.len() * 1024);
    buf.extend_from_slice(b"{\"kind\":");
    buf.extend_from_slice(&serde_json::to_vec(kind).unwrap_or_default());
    buf.extend_from_slice(b",\"apiVersion\":");
    buf.extend_from_slice(&serde_json::to_vec(api_version).unwrap_or_default());
    buf.extend_from_slice(b",\"metadata\":");
    buf.extend_from_slice(&serde_json::to_vec(meta).unwrap_or_default());
    buf.extend_from_slice(b",\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        let res = if repr == Representation::PartialMetadata {
            serde_json::to_writer(&mut buf, &table::partial_metadata(item))
        } else {
            serde_json::to_writer(&mut buf, &**item)
        };
        if res.is_err() {
            buf.extend_from_slice(b"null");
        }
    }
    buf.extend_from_slice(b"]}");
    bytes_response(200, "application/json", Bytes::from(buf))
}

fn patch_type(headers: &HeaderMap) -> ApiResult<PatchType> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    PatchType::from_content_type(ct).ok_or_else(|| {
        ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {ct:?})"
        ))
    })
}

fn delete_options(q: &Query, headers: &HeaderMap, body: &[u8]) -> ApiResult<DeleteOptions> {
    let protobuf = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/vnd.kubernetes.protobuf"));
    let mut opts = if body.iter().all(u8::is_ascii_whitespace) {
        DeleteOptions::default()
    } else if protobuf {
        // client-go's typed clients (helm's release storage among them) send their
        // DeleteOptions as protobuf.
        DeleteOptions::from_json(&crate::protobuf::decode(body)?)?
    } else {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?;
        DeleteOptions::from_json(&v)?
    };
    if let Some(g) = q.get("gracePeriodSeconds") {
        opts.grace_period_seconds = Some(
            g.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid gracePeriodSeconds: {g}")))?,
        );
    }
    if let Some(p) = q.get("propagationPolicy") {
        let v = json!({"propagationPolicy": p});
        opts.propagation_policy = DeleteOptions::from_json(&v)?.propagation_policy;
    }
    if let Some(o) = q.get("orphanDependents")
        && opts.propagation_policy.is_none()
    {
        opts.propagation_policy = Some(if o == "true" { "Orphan" } else { "Background" }.into());
    }
    if q.get("dryRun").is_some_and(|d| d == "All") {
        opts.dry_run = true;
    }
    Ok(opts)
}

/// The write path a subresource takes (finalize is a main-resource write).
fn subresource_of(sub: Option<&str>) -> Subresource {
    match sub {
        Some("status") => Subresource::Status,
        Some("resize") => Subresource::Resize,
        _ => Subresource::Main,
    }
}
