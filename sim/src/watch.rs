//! Watch streams: newline-delimited JSON `WatchEvent`s over a chunked response, with
//! initial events, bookmarks, 410 Gone for expired versions and server-side timeouts.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::SimShared;
use crate::error::{ApiError, ApiResult, StatusCause};
use crate::meta;
use crate::ops::ListQuery;
use crate::registry::ResourceDef;
use crate::request::{Query, Representation};
use crate::store::{EventType, StoreEvent};
use crate::table::{self, IncludeObject};

struct Watcher {
    def: Arc<ResourceDef>,
    version: String,
    namespace: Option<String>,
    query: ListQuery,
    repr: Representation,
    include: IncludeObject,
    sent_table_header: bool,
    tx: mpsc::Sender<Result<Bytes, Infallible>>,
}

impl Watcher {
    fn matches(&self, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace
            && meta::meta_str(obj, "namespace") != ns
        {
            return false;
        }
        self.query.labels.matches(meta::labels_of(obj)) && self.query.fields.matches(obj)
    }

    fn encode(&mut self, event_type: &str, obj: &Arc<Value>) -> Bytes {
        let presented = SimShared::present(&self.def, &self.version, obj);
        let object = match self.repr {
            Representation::Object => None,
            Representation::PartialMetadata => Some(table::partial_metadata(&presented)),
            Representation::Table => {
                let headers = !self.sent_table_header;
                self.sent_table_header = true;
                Some(table::table(
                    &self.def,
                    &self.version,
                    std::slice::from_ref(&presented),
                    self.include,
                    headers,
                    None,
                    None,
                    None,
                ))
            }
        };
        let mut buf = Vec::with_capacity(512);
        buf.extend_from_slice(b"{\"type\":\"");
        buf.extend_from_slice(event_type.as_bytes());
        buf.extend_from_slice(b"\",\"object\":");
        let res = match &object {
            Some(o) => serde_json::to_writer(&mut buf, o),
            None => serde_json::to_writer(&mut buf, &*presented),
        };
        if res.is_err() {
            buf.extend_from_slice(b"null");
        }
        buf.extend_from_slice(b"}\n");
        Bytes::from(buf)
    }

    fn bookmark(&self, rv: u64, initial_events_end: bool) -> Bytes {
        let mut metadata = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let (kind, api_version) = match self.repr {
            Representation::Object => (self.def.kind.clone(), self.def.api_version(&self.version)),
            Representation::PartialMetadata => {
                ("PartialObjectMetadata".into(), "meta.k8s.io/v1".into())
            }
            Representation::Table => ("Table".into(), "meta.k8s.io/v1".into()),
        };
        let ev = json!({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": api_version, "metadata": metadata}});
        let mut v = serde_json::to_vec(&ev).unwrap_or_default();
        v.push(b'\n');
        Bytes::from(v)
    }

    /// Translates a store event into what this watcher sees (selector transitions
    /// become ADDED/DELETED, as in the API server's watch cache).
    fn translate(&self, ev: &StoreEvent) -> Option<(&'static str, Arc<Value>)> {
        if ev.gr != self.def.gr() {
            return None;
        }
        if let Some(ns) = &self.namespace
            && ev.namespace != *ns
        {
            return None;
        }
        let now = self.matches(&ev.object);
        let before = ev.previous.as_ref().is_some_and(|p| self.matches(p));
        let t = match ev.event_type {
            EventType::Added => now.then_some("ADDED"),
            EventType::Deleted => (before || now).then_some("DELETED"),
            EventType::Modified => match (before, now) {
                (true, true) => Some("MODIFIED"),
                (false, true) => Some("ADDED"),
                (true, false) => {
                    // The watch cache's DELETED for an object that left the selector
                    // carries its previous content (what the watcher last matched), at
                    // the change's resourceVersion.
                    let previous = ev.previous.as_ref()?;
                    let mut left = (**previous).clone();
                    if let Some(rv) = ev.object.pointer("/metadata/resourceVersion")
                        && let Some(meta) = left.get_mut("metadata").and_then(Value::as_object_mut)
                    {
                        meta.insert("resourceVersion".into(), rv.clone());
                    }
                    return Some(("DELETED", Arc::new(left)));
                }
                (false, false) => None,
            },
        }?;
        Some((t, ev.object.clone()))
    }

    /// The event for `obj` in the watched version (converted through the CRD's webhook
    /// when it has one); a failed conversion is an error event that ends the watch.
    async fn converted(
        &mut self,
        sh: &SimShared,
        t: &str,
        obj: &Arc<Value>,
    ) -> Result<Bytes, Bytes> {
        match sh.convert_one(&self.def, obj, &self.version).await {
            Ok(o) => Ok(self.encode(t, &o)),
            Err(e) => Err(error_event(&e)),
        }
    }

    /// Sends `obj`'s event; false when the watch is over.
    async fn emit(&mut self, sh: &SimShared, t: &str, obj: &Arc<Value>) -> bool {
        match self.converted(sh, t, obj).await {
            Ok(b) => self.send(b).await,
            Err(b) => {
                let _ = self.send(b).await;
                false
            }
        }
    }

    /// Sends what this watcher sees of `ev`, if anything; false when the watch is over.
    async fn deliver(&mut self, sh: &SimShared, ev: &StoreEvent) -> bool {
        match self.translate(ev) {
            Some((t, obj)) => self.emit(sh, t, &obj).await,
            None => true,
        }
    }

    /// Replays the retained changes after `after` and returns the receiver for the rest
    /// and the last resourceVersion replayed; None when the watch is over (410 Gone, as the
    /// API server answers, once `after` has left the history).
    async fn resume(
        &mut self,
        sh: &SimShared,
        after: u64,
    ) -> Option<(broadcast::Receiver<Arc<StoreEvent>>, u64)> {
        let resumed = match sh.store.watch_from(&self.def.gr(), Some(after)) {
            Ok(resumed) => resumed,
            Err(err) => {
                let _ = self.send(error_event(&err)).await;
                return None;
            }
        };
        for entry in &resumed.backlog {
            if !self.deliver(sh, &entry.to_event()).await {
                return None;
            }
        }
        Some((resumed.receiver, resumed.current_rv))
    }

    async fn send(&self, b: Bytes) -> bool {
        self.tx.send(Ok(b)).await.is_ok()
    }
}

fn error_event(err: &ApiError) -> Bytes {
    let ev = json!({"type": "ERROR", "object": err.to_status()});
    let mut v = serde_json::to_vec(&ev).unwrap_or_default();
    v.push(b'\n');
    Bytes::from(v)
}

fn invalid_list_options(field: &str, msg: &str) -> ApiError {
    ApiError::invalid(
        "meta.k8s.io",
        "ListOptions",
        "",
        vec![StatusCause {
            reason: "FieldValueForbidden".into(),
            message: msg.to_string(),
            field: field.into(),
        }],
    )
}

pub async fn serve_watch(
    sh: Arc<SimShared>,
    def: Arc<ResourceDef>,
    version: String,
    namespace: Option<String>,
    query: ListQuery,
    q: &Query,
    repr: Representation,
) -> ApiResult<Response> {
    sh.validate_field_selector(&def, &version, &query.fields)?;
    let mut query = query;
    query.fields = crate::ops::storage_fields(&def, &query.fields);
    let rv_param = q.get("resourceVersion").cloned().unwrap_or_default();
    let bookmarks = q.get("allowWatchBookmarks").is_some_and(|v| v == "true");
    let send_initial = match q.get("sendInitialEvents").map(String::as_str) {
        Some("true") => Some(true),
        Some("false") => Some(false),
        _ => None,
    };
    if send_initial.is_some() {
        if q.get("resourceVersionMatch").map(String::as_str) != Some("NotOlderThan") {
            return Err(invalid_list_options(
                "resourceVersionMatch",
                "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if send_initial == Some(true) && !bookmarks {
            return Err(invalid_list_options(
                "allowWatchBookmarks",
                "Forbidden: allowWatchBookmarks must be true when sendInitialEvents is set",
            ));
        }
    }
    let timeout = match q.get("timeoutSeconds") {
        Some(t) => Duration::from_secs(
            t.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds: {t}")))?,
        ),
        None => sh.config.default_watch_timeout,
    };
    let from_rv: Option<u64> =
        match rv_param.as_str() {
            "" | "0" => None,
            other => Some(other.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("invalid resource version: {other:?}"))
            })?),
        };
    let ns_filter = if def.namespaced {
        namespace.clone()
    } else {
        None
    };
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(1024);
    let mut watcher = Watcher {
        def: def.clone(),
        version,
        namespace: ns_filter.clone(),
        include: IncludeObject::parse(q.get("includeObject").map(String::as_str)),
        query,
        repr,
        sent_table_header: false,
        tx,
    };
    let forced_gone = sh.faults.take_watch_gone();
    // Initial events: without a resourceVersion (legacy), or with sendInitialEvents.
    let initial = match send_initial {
        Some(v) => v,
        None => from_rv.is_none(),
    };
    let start = if forced_gone {
        None
    } else if initial || from_rv.is_none() {
        Some(Ok(sh
            .store
            .watch_with_snapshot(&def.gr(), ns_filter.as_deref())))
    } else {
        Some(sh.store.watch_from(&def.gr(), from_rv))
    };
    let mut kill = sh.faults.watch_generation();
    kill.borrow_and_update();
    let mut shutdown = sh.shutdown_signal();
    let bookmark_every = sh.config.bookmark_interval;
    tokio::spawn(async move {
        let start = match start {
            None => {
                let err = ApiError::gone("too old resource version: injected fault");
                let _ = watcher.send(error_event(&err)).await;
                return;
            }
            Some(Err(err)) => {
                let _ = watcher.send(error_event(&err)).await;
                return;
            }
            Some(Ok(s)) => s,
        };
        let mut receiver = start.receiver;
        if initial {
            for stored in &start.snapshot {
                let obj = crate::store::decode(stored);
                if watcher.matches(&obj) && !watcher.emit(&sh, "ADDED", &obj).await {
                    return;
                }
            }
            if send_initial == Some(true) {
                let b = watcher.bookmark(start.current_rv, true);
                if !watcher.send(b).await {
                    return;
                }
            }
        }
        for entry in &start.backlog {
            if !watcher.deliver(&sh, &entry.to_event()).await {
                return;
            }
        }
        let mut last_rv = from_rv.unwrap_or(start.current_rv).max(start.current_rv);
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(bookmark_every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            tokio::select! {
                ev = receiver.recv() => match ev {
                    Ok(ev) => {
                        last_rv = ev.rv;
                        // A resourceVersion from the future: only later events count.
                        if from_rv.is_some_and(|rv| ev.rv <= rv) {
                            continue;
                        }
                        if !watcher.deliver(&sh, &ev).await {
                            return;
                        }
                    }
                    // Fell further behind than the broadcast holds: replay what was
                    // missed from the history, as the client would resume from its last
                    // resourceVersion.
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let Some((resumed, resumed_rv)) = watcher.resume(&sh, last_rv).await else {
                            return;
                        };
                        receiver = resumed;
                        last_rv = resumed_rv;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = ticker.tick(), if bookmarks => {
                    let b = watcher.bookmark(last_rv, false);
                    if !watcher.send(b).await {
                        return;
                    }
                }
                _ = &mut deadline => return,
                _ = kill.changed() => return,
                _ = shutdown.changed() => return,
                _ = watcher.tx.closed() => return,
            }
        }
    });
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
    let mut resp = Response::new(Body::from_stream(stream));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(resp)
}
