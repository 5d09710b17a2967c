//! The SidecarSets and namespaces the admission handlers read (pod injection in
//! kruise-webhook, SidecarSet validation in kruise-sidecarset), kept by reflectors. The
//! SidecarSet watch starts only once its CRD is installed (a cluster may run kruise-webhook
//! without the SidecarSet family), and every change to what SidecarSets can match asks the
//! admission runner to republish the webhook entries at once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::admission::{SidecarSetSnapshot, sidecar_set_scope};
use crate::api::v1beta1::SidecarSet;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio_util::sync::CancellationToken;

const CRD: &str = "sidecarsets.apps.kruise.io";

/// What the injection step sees: the reflectors' current state.
#[derive(Clone)]
pub struct LiveSnapshot {
    sets: Store<SidecarSet>,
    namespaces: Store<Namespace>,
}

impl SidecarSetSnapshot for LiveSnapshot {
    fn sidecar_sets(&self) -> Arc<[SidecarSet]> {
        self.sets.state().iter().map(|s| (**s).clone()).collect()
    }

    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.namespaces
            .get(&ObjectRef::new(namespace))
            .map(|ns| ns.metadata.labels.clone().unwrap_or_default())
    }
}

/// Starts the reflectors; `changed` is notified whenever the SidecarSets' scopes change.
pub fn start(
    client: kube::Client,
    changed: Arc<tokio::sync::Notify>,
    shutdown: CancellationToken,
) -> LiveSnapshot {
    let (sets, sets_writer) = reflector::store::<SidecarSet>();
    let (namespaces, ns_writer) = reflector::store::<Namespace>();
    let ns_stream = reflector::reflector(
        ns_writer,
        watcher(
            Api::<Namespace>::all(client.clone()),
            watcher::Config::default(),
        ),
    )
    .applied_objects();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        tokio::pin!(ns_stream);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                next = ns_stream.next() => match next {
                    Some(Err(e)) => tracing::warn!(error = %e, "namespace watch"),
                    Some(Ok(_)) => {}
                    None => return,
                },
            }
        }
    });
    let reader = sets.clone();
    tokio::spawn(async move {
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        // Wait for the SidecarSet CRD instead of failing or spamming watch errors.
        loop {
            match crds.get_opt(CRD).await {
                Ok(Some(_)) => break,
                Ok(None) => tracing::info!("{CRD} not installed; SidecarSet injection idle"),
                Err(e) => tracing::warn!(error = %e, "checking for {CRD}"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(10)) => {}
            }
        }
        // The raw events, not touched_objects(): objects from the initial list are emitted
        // before the store holds them (it swaps in at InitDone), so scopes are recomputed
        // on every event, InitDone included.
        let stream = reflector::reflector(
            sets_writer,
            watcher(Api::<SidecarSet>::all(client), watcher::Config::default()),
        );
        tokio::pin!(stream);
        let mut last = Vec::new();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                next = stream.next() => match next {
                    None => return,
                    Some(Err(e)) => tracing::warn!(error = %e, "SidecarSet watch"),
                    Some(Ok(watcher::Event::Init | watcher::Event::InitApply(_))) => {}
                    Some(Ok(_)) => {
                        let mut scopes: Vec<_> = reader.state().iter().filter_map(|s| sidecar_set_scope(s)).collect();
                        scopes.sort_by_key(|s| format!("{s:?}"));
                        if scopes != last {
                            last = scopes;
                            changed.notify_one();
                        }
                    }
                },
            }
        }
    });
    LiveSnapshot { sets, namespaces }
}
