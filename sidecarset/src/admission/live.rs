//! The SidecarSets and namespaces the admission handlers read (pod injection in
//! kruise-webhook, SidecarSet validation in kruise-sidecarset), kept by reflectors built with
//! `kruise_runtime::watch` (paging, backoff, the deserialize guard). The SidecarSet watch
//! starts only once its CRD is installed (a cluster may run kruise-webhook without the
//! SidecarSet family), and every change to what SidecarSets can match asks the admission
//! runner to republish the webhook entries at once.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt as _, StreamExt as _};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kruise_runtime::watch::{DecodeGuard, Loaded, Watch, loaded_flag};
use kube::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use tokio_util::sync::CancellationToken;

use crate::admission::{SidecarSetSnapshot, sidecar_set_scope};
use crate::api::v1beta1::SidecarSet;
use crate::api::validation::KRUISE_CONFIGURATION;

const CRD: &str = "sidecarsets.apps.kruise.io";

/// What the injection step sees: the reflectors' current state.
#[derive(Clone)]
pub struct LiveSnapshot {
    sets: Store<SidecarSet>,
    /// Set once `sets` has loaded, or the CRD is found not installed.
    loaded: Loaded,
    namespaces: Store<Namespace>,
    client: kube::Client,
    kruise_namespace: String,
    patch_metadata_defaults_allowed: bool,
}

impl LiveSnapshot {
    /// Reads the patchPodMetadata whitelist from `kruise-configuration` in `kruise_namespace`
    /// (the namespace the binary runs in), with the `SidecarSetPatchPodMetadataDefaultsAllowed`
    /// gate `defaults_allowed`.
    pub fn with_kruise_configuration(
        mut self,
        kruise_namespace: &str,
        defaults_allowed: bool,
    ) -> Self {
        self.kruise_namespace = kruise_namespace.to_string();
        self.patch_metadata_defaults_allowed = defaults_allowed;
        self
    }
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

    fn cluster(&self) -> Option<kube::Client> {
        Some(self.client.clone())
    }

    fn kruise_configuration(&self) -> BoxFuture<'_, Result<BTreeMap<String, String>, String>> {
        Box::pin(async move {
            let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.kruise_namespace);
            match api.get_opt(KRUISE_CONFIGURATION).await {
                Ok(found) => Ok(found.and_then(|cm| cm.data).unwrap_or_default()),
                Err(e) => Err(format!(
                    "reading ConfigMap {}/{KRUISE_CONFIGURATION}: {e}",
                    self.kruise_namespace
                )),
            }
        })
    }

    fn patch_metadata_defaults_allowed(&self) -> bool {
        self.patch_metadata_defaults_allowed
    }

    fn loaded(&self) -> bool {
        self.loaded.get()
    }

    fn synced(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            // Loaded without a ready store: the CRD is not installed, so no SidecarSet
            // exists and there is nothing to miss.
            if self.loaded() && self.sets.wait_until_ready().now_or_never().is_none() {
                return Ok(());
            }
            let both = async {
                let _ = self.sets.wait_until_ready().await;
                let _ = self.namespaces.wait_until_ready().await;
            };
            tokio::time::timeout(SYNC_WAIT, both).await.map_err(|_| {
                format!(
                    "the SidecarSets and namespaces are not known yet (this replica started \
                     less than {}s ago and has not listed them); try again",
                    SYNC_WAIT.as_secs()
                )
            })
        })
    }
}

/// How long a request waits for a replica that just started to list the SidecarSets and
/// namespaces, well within the API server's webhook timeout.
const SYNC_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Starts the reflectors; `changed` is notified whenever the SidecarSets' scopes change.
pub fn start(
    client: kube::Client,
    changed: Arc<tokio::sync::Notify>,
    shutdown: CancellationToken,
) -> LiveSnapshot {
    let (namespaces, ns_stream) = Watch::<Namespace>::new(client.clone(), None).reflect();
    // A SidecarSet that does not decode is skipped (logged); the controller of the same
    // binary counts it and records the event.
    let (sets, set_events) = Watch::<SidecarSet>::new(client.clone(), None)
        .untrimmed()
        .guarded(DecodeGuard::logging_only())
        .after_crd(CRD, shutdown.clone())
        .reflect_events();
    let loaded = loaded_flag(
        &client,
        sets.clone(),
        CRD,
        changed.clone(),
        shutdown.clone(),
    );
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let ns_stream = ns_stream.take_until(stop.cancelled_owned());
        futures::pin_mut!(ns_stream);
        while let Some(next) = ns_stream.next().await {
            if let Err(e) = next {
                tracing::warn!(error = %e, "namespace watch");
            }
        }
    });
    let reader = sets.clone();
    tokio::spawn(async move {
        // The raw events, not touched_objects(): objects from the initial list are emitted
        // before the store holds them (it swaps in at InitDone), so scopes are recomputed
        // on every event, InitDone included.
        let stream = set_events.take_until(shutdown.cancelled_owned());
        futures::pin_mut!(stream);
        let mut last = Vec::new();
        while let Some(next) = stream.next().await {
            match next {
                Err(e) => tracing::warn!(error = %e, "SidecarSet watch"),
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
                Ok(_) => {
                    let mut scopes: Vec<_> = reader
                        .state()
                        .iter()
                        .filter_map(|s| sidecar_set_scope(s))
                        .collect();
                    scopes.sort_by_key(|s| format!("{s:?}"));
                    if scopes != last {
                        last = scopes;
                        changed.notify_one();
                    }
                }
            }
        }
    });
    LiveSnapshot {
        sets,
        loaded,
        namespaces,
        client,
        kruise_namespace: crate::controller::DEFAULT_KRUISE_NAMESPACE.to_string(),
        patch_metadata_defaults_allowed: false,
    }
}
