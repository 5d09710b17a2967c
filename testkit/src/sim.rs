//! kruise-sim with a family's CRDs installed; under `KRUISE_TEST_AUTHORIZE=1` with the
//! chart's RBAC enforced (see [`crate::rbac`]).

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_sim::{Sim, SimConfig};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};

use crate::{WAIT, eventually};

/// A simulator with `nodes` simulated nodes (scheduler and kubelet when at least one) and
/// `crds` installed, returned once every one of their kinds can be listed.
pub async fn sim_with_crds(nodes: usize, crds: &[CustomResourceDefinition]) -> (Sim, Client) {
    let (sim, client) = start(SimConfig {
        nodes,
        ..Default::default()
    })
    .await;
    install_crds(&client, crds).await;
    (sim, client)
}

/// A simulator started with `config` and its admin client. When the chart's RBAC is
/// [enforced](crate::rbac::enforced), it authorizes requests that carry a token and holds
/// every family's chart roles, so a controller given
/// [`controller_client`](crate::rbac::controller_client) runs as its ServiceAccount.
pub async fn start(config: SimConfig) -> (Sim, Client) {
    let sim = Sim::start(crate::rbac::sim_config(config)).await.unwrap();
    let client = sim.client().unwrap();
    if crate::rbac::enforced() {
        crate::rbac::install_chart_roles(&client).await;
    }
    (sim, client)
}

/// Creates `crds` and waits until every one of their kinds can be listed.
pub async fn install_crds(client: &Client, crds: &[CustomResourceDefinition]) {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    for crd in crds {
        api.create(&PostParams::default(), crd).await.unwrap();
    }
    wait_listable(client, crds).await;
}

/// Waits until every kind of `crds` can be listed.
pub async fn wait_listable(client: &Client, crds: &[CustomResourceDefinition]) {
    for crd in crds {
        let kind: Api<DynamicObject> = Api::all_with(client.clone(), &stored_resource(crd));
        eventually(&format!("the {} API", crd.spec.names.kind), WAIT, || {
            let kind = kind.clone();
            async move { kind.list(&ListParams::default()).await.ok() }
        })
        .await;
    }
}

/// The kind of `crd` at its storage version.
pub fn stored_resource(crd: &CustomResourceDefinition) -> ApiResource {
    let version = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .or(crd.spec.versions.first())
        .map(|v| v.name.clone())
        .unwrap_or_default();
    ApiResource {
        group: crd.spec.group.clone(),
        api_version: format!("{}/{version}", crd.spec.group),
        version,
        kind: crd.spec.names.kind.clone(),
        plural: crd.spec.names.plural.clone(),
    }
}

/// Warning events about the object `name` in `namespace`, as (reason, message).
/// (Events about cluster-scoped objects are recorded in `default`.)
pub async fn warnings_about(client: &Client, namespace: &str, name: &str) -> Vec<(String, String)> {
    events_about(client, namespace, name)
        .await
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

/// Every event about the object `name` in `namespace`.
pub async fn events_about(client: &Client, namespace: &str, name: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .collect()
}

/// Waits (up to [`WAIT`]) for a Warning event with `reason` about `name` in `namespace`;
/// its message.
pub async fn wait_for_warning(
    client: &Client,
    namespace: &str,
    name: &str,
    reason: &str,
) -> String {
    let what = format!("a {reason} warning about {name}");
    eventually(&what, WAIT, || async {
        warnings_about(client, namespace, name)
            .await
            .into_iter()
            .find(|(r, _)| r == reason)
            .map(|(_, message)| message)
    })
    .await
}

/// The next `times` `patch pods/resize` requests answered with a 500 (for the in-place
/// engine's resize-before-patch order); [`FailedResizes::all_met`] checks each was sent.
pub fn fail_resizes(sim: &Sim, times: u64) -> FailedResizes<'_> {
    sim.faults().add(
        kruise_sim::FaultRule::new()
            .verb("patch")
            .resource("pods")
            .subresource("resize")
            .error(500, 1.0)
            .times(times),
    );
    FailedResizes { sim, times }
}

/// Resizes [`fail_resizes`] refuses.
pub struct FailedResizes<'a> {
    sim: &'a Sim,
    times: u64,
}

impl FailedResizes<'_> {
    /// Asserts the controller met every refusal (it sent the resize, and again after).
    pub fn all_met(&self) {
        assert_eq!(
            self.sim.counters().answered("patch", "pods", "resize", 500),
            self.times,
            "every injected resize failure was met"
        );
    }
}
