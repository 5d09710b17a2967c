//! API requests counted by the simulator, per client (user agent): what "N writes per pod"
//! figures and assertions are made of.

use kruise_sim::Sim;

/// The writes (create, update, patch, delete) of one client, split into pod writes, events
/// and everything else (status, revisions, leases, …).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Writes {
    pub pods: u64,
    pub events: u64,
    pub other: u64,
}

impl Writes {
    /// The writes so far of the clients whose user agent starts with `agent`
    /// (`kruise-cloneset/`).
    pub fn of(sim: &Sim, agent: &str) -> Writes {
        let mut writes = Writes::default();
        for (key, n) in sim.counters().snapshot() {
            if !key.user_agent.starts_with(agent)
                || matches!(key.verb.as_str(), "get" | "list" | "watch")
            {
                continue;
            }
            match key.resource.as_str() {
                "pods" => writes.pods += n,
                "events" => writes.events += n,
                _ => writes.other += n,
            }
        }
        writes
    }

    /// The writes made between `before` and `self`.
    pub fn since(self, before: Writes) -> Writes {
        Writes {
            pods: self.pods - before.pods,
            events: self.events - before.events,
            other: self.other - before.other,
        }
    }

    /// `<what>: P pod writes per pod (events E, other O writes)`, for `pods` pods.
    pub fn per_pod(self, what: &str, pods: i64) -> String {
        format!(
            "{what}: {:.2} pod writes per pod (events {:.2}, other {} writes)",
            self.pods as f64 / pods as f64,
            self.events as f64 / pods as f64,
            self.other
        )
    }
}

/// The pod requests (not list or watch) of the clients whose user agent starts with
/// `agent`, one line each: `verb pods/subresource -> code: count`.
pub fn pod_request_lines(sim: &Sim, agent: &str) -> Vec<String> {
    sim.counters()
        .snapshot()
        .into_iter()
        .filter(|(key, _)| {
            key.user_agent.starts_with(agent)
                && key.resource == "pods"
                && key.verb != "watch"
                && key.verb != "list"
        })
        .map(|(key, n)| format!("{} pods/{} -> {}: {n}", key.verb, key.subresource, key.code))
        .collect()
}

/// Asserts the number of `verb` requests on `resource` (any subresource, any client),
/// naming both in the failure.
#[track_caller]
pub fn assert_requests(sim: &Sim, verb: &str, resource: &str, expected: u64) {
    let counted = sim.counters().count(verb, resource);
    assert_eq!(
        counted, expected,
        "{verb} {resource}: {counted} requests, expected {expected}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, PostParams};

    #[tokio::test]
    async fn a_clients_writes_are_counted_apart_from_its_reads() {
        let sim = Sim::start(kruise_sim::SimConfig::default()).await.unwrap();
        let client = sim.client().unwrap();
        let before = Writes::of(&sim, "");
        let maps: Api<ConfigMap> = Api::namespaced(client, "default");
        let map: ConfigMap =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "settings"}})).unwrap();
        maps.create(&PostParams::default(), &map).await.unwrap();
        maps.get("settings").await.unwrap();
        let writes = Writes::of(&sim, "").since(before);
        assert_eq!(
            writes,
            Writes {
                pods: 0,
                events: 0,
                other: 1
            }
        );
        assert_requests(&sim, "create", "configmaps", 1);
        assert_requests(&sim, "get", "configmaps", 1);
        assert_eq!(
            writes.per_pod("create", 1),
            "create: 0.00 pod writes per pod (events 0.00, other 1 writes)"
        );
        sim.shutdown().await;
    }
}
