//! Request accounting by verb, resource, subresource, user agent and response code.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// One counter series.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestKey {
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection
    /// (or `discovery`, `metrics` for non-resource paths).
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub user_agent: String,
    pub code: u16,
}

#[derive(Debug, Default)]
pub struct Counters {
    series: Mutex<BTreeMap<RequestKey, u64>>,
}

const WRITE_VERBS: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

impl Counters {
    pub fn record(&self, key: RequestKey) {
        let mut s = self.series.lock().unwrap_or_else(|e| e.into_inner());
        *s.entry(key).or_insert(0) += 1;
    }

    pub fn snapshot(&self) -> Vec<(RequestKey, u64)> {
        let s = self.series.lock().unwrap_or_else(|e| e.into_inner());
        s.iter().map(|(k, v)| (k.clone(), *v)).collect()
    }

    fn sum(&self, f: impl Fn(&RequestKey) -> bool) -> u64 {
        let s = self.series.lock().unwrap_or_else(|e| e.into_inner());
        s.iter().filter(|(k, _)| f(k)).map(|(_, v)| *v).sum()
    }

    /// Requests with this verb on this resource (any subresource, agent and code).
    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        self.sum(|k| k.verb == verb && k.resource == resource)
    }

    /// Requests with this verb on resource/subresource (e.g. "update", "pods", "status").
    pub fn count_sub(&self, verb: &str, resource: &str, subresource: &str) -> u64 {
        self.sum(|k| k.verb == verb && k.resource == resource && k.subresource == subresource)
    }

    /// Requests of the clients whose user agent starts with `agent`, with this verb on
    /// resource/subresource (`""`: the object itself), answered with `code` when given.
    pub fn of_agent(
        &self,
        agent: &str,
        verb: &str,
        resource: &str,
        subresource: &str,
        code: Option<u16>,
    ) -> u64 {
        self.sum(|k| {
            k.user_agent.starts_with(agent)
                && k.verb == verb
                && k.resource == resource
                && k.subresource == subresource
                && code.is_none_or(|c| k.code == c)
        })
    }

    /// Requests with this verb on resource/subresource (`""`: the object itself) answered
    /// with `code`, e.g. the injected failures a client met.
    pub fn answered(&self, verb: &str, resource: &str, subresource: &str, code: u16) -> u64 {
        self.sum(|k| {
            k.verb == verb
                && k.resource == resource
                && k.subresource == subresource
                && k.code == code
        })
    }

    /// Mutating requests (create/update/patch/delete/deletecollection) on a resource
    /// (all subresources), e.g. to state "N writes per pod".
    pub fn writes(&self, resource: &str) -> u64 {
        self.sum(|k| k.resource == resource && WRITE_VERBS.contains(&k.verb.as_str()))
    }

    /// Requests whose user agent starts with `prefix`.
    pub fn by_user_agent(&self, prefix: &str) -> u64 {
        self.sum(|k| k.user_agent.starts_with(prefix))
    }

    pub fn total(&self) -> u64 {
        self.sum(|_| true)
    }

    pub fn reset(&self) {
        self.series
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Prometheus text exposition (version 0.0.4).
    pub fn prometheus_text(&self) -> String {
        let mut out = String::from(
            "# HELP apiserver_request_total Counter of apiserver requests broken out for each verb, group, resource, subresource, client and HTTP response code.\n# TYPE apiserver_request_total counter\n",
        );
        for (k, v) in self.snapshot() {
            out.push_str(&format!(
                "apiserver_request_total{{verb=\"{}\",group=\"{}\",resource=\"{}\",subresource=\"{}\",user_agent=\"{}\",code=\"{}\"}} {}\n",
                escape(&k.verb),
                escape(&k.group),
                escape(&k.resource),
                escape(&k.subresource),
                escape(&k.user_agent),
                k.code,
                v
            ));
        }
        out
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
