//! Puts back what a binary publishes when someone else changes it, as OpenKruise's webhook
//! controller does: the binary watches its webhook configurations, the CRDs whose
//! conversion it serves and its certificate Secret, and on any change (a removed caBundle,
//! a deleted configuration, an edited conversion webhook, a deleted Secret) asks the
//! admission runner to load the certificates and publish again. Publishing writes only
//! what differs from what the binary owns ([`super::publish::publish`]), so the watch
//! seeing the binary's own writes, or another replica's identical ones, costs a read and
//! no write.
//!
//! The watches are narrow (one object each, by `metadata.name` field selector) and
//! metadata-only: a CRD's schema is never downloaded for this. Republish requests are at
//! most one per [`MIN_REPUBLISH_INTERVAL`]; changes in between are merged into the next one,
//! so two writers that disagree (say, replicas during a version upgrade) cannot make each
//! other write in a tight loop.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::certs::CertSource;
use super::publish::Owned;

/// The shortest time between two republish requests caused by watched changes.
pub const MIN_REPUBLISH_INTERVAL: Duration = Duration::from_secs(1);

/// One object this binary publishes or keeps, watched for changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Watched {
    /// A MutatingWebhookConfiguration.
    Mutating(String),
    /// A ValidatingWebhookConfiguration.
    Validating(String),
    /// A CRD whose `spec.conversion` this binary sets.
    Crd(String),
    /// The Secret holding self-managed certificates.
    Secret {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

/// What a binary with `owned` and certificates from `certs` watches: its configurations,
/// its CRDs, and its Secret when it manages the certificates itself (files are someone
/// else's, re-read by the runner's routine check).
pub fn watched(owned: &Owned, certs: &CertSource) -> Vec<Watched> {
    let mut out = Vec::new();
    out.extend(owned.mutating.clone().map(Watched::Mutating));
    out.extend(owned.validating.clone().map(Watched::Validating));
    out.extend(owned.crds.iter().cloned().map(Watched::Crd));
    if let CertSource::SelfManaged(settings) = certs {
        out.push(Watched::Secret {
            namespace: settings.namespace.clone(),
            name: settings.secret.clone(),
        });
    }
    out
}

/// The running watches; dropping it stops them.
pub struct RepairWatches {
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for RepairWatches {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Starts watching what a binary with `owned` and `certs` publishes; `republish` is
/// notified (at most once per [`MIN_REPUBLISH_INTERVAL`]) when any of it changes, and once
/// after each watch (re)lists, so a change made while a watch was down is seen too.
pub fn watch(
    client: &Client,
    owned: &Owned,
    certs: &CertSource,
    republish: Arc<Notify>,
    shutdown: &CancellationToken,
) -> RepairWatches {
    let changed = Arc::new(Notify::new());
    let mut tasks: Vec<JoinHandle<()>> = watched(owned, certs)
        .into_iter()
        .map(|target| {
            let changed = changed.clone();
            let stop = shutdown.clone();
            match target {
                Watched::Mutating(name) => tokio::spawn(watch_one::<MutatingWebhookConfiguration>(
                    Api::all(client.clone()),
                    name,
                    changed,
                    stop,
                )),
                Watched::Validating(name) => {
                    tokio::spawn(watch_one::<ValidatingWebhookConfiguration>(
                        Api::all(client.clone()),
                        name,
                        changed,
                        stop,
                    ))
                }
                Watched::Crd(name) => tokio::spawn(watch_one::<CustomResourceDefinition>(
                    Api::all(client.clone()),
                    name,
                    changed,
                    stop,
                )),
                Watched::Secret { namespace, name } => tokio::spawn(watch_one::<Secret>(
                    Api::namespaced(client.clone(), &namespace),
                    name,
                    changed,
                    stop,
                )),
            }
        })
        .collect();
    tasks.push(tokio::spawn(pace(
        changed,
        republish,
        MIN_REPUBLISH_INTERVAL,
        shutdown.clone(),
    )));
    RepairWatches { tasks }
}

/// Passes `changed` on to `republish`, at most once per `interval` (a [`Notify`] keeps one
/// pending permit, so changes during the pause become one request).
async fn pace(
    changed: Arc<Notify>,
    republish: Arc<Notify>,
    interval: Duration,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = changed.notified() => {}
        }
        republish.notify_one();
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
    }
}

/// Watches the metadata of the one object `name` of `api`, notifying `changed` on every
/// change or deletion and at the end of every (re)list, until `shutdown`.
async fn watch_one<K>(
    api: Api<PartialObjectMeta<K>>,
    name: String,
    changed: Arc<Notify>,
    shutdown: CancellationToken,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let events = watcher(api, config)
        .default_backoff()
        .take_until(shutdown.cancelled_owned());
    futures::pin_mut!(events);
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone) => {
                tracing::debug!(%kind, %name, "published object changed; checking it");
                changed.notify_one();
            }
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
            Err(e) => tracing::warn!(%kind, %name, error = %e, "watching a published object"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::SelfManaged;

    #[test]
    fn watches_its_configurations_crds_and_only_a_self_managed_secret() {
        let owned = Owned {
            mutating: Some("kruise-cloneset-mutating".into()),
            validating: Some("kruise-cloneset-validating".into()),
            crds: vec!["clonesets.apps.kruise.io".into()],
        };
        let secret = CertSource::SelfManaged(SelfManaged::for_service(
            "kruise-system",
            "kruise-cloneset-certs",
            "kruise-cloneset-service",
        ));
        assert_eq!(
            watched(&owned, &secret),
            vec![
                Watched::Mutating("kruise-cloneset-mutating".into()),
                Watched::Validating("kruise-cloneset-validating".into()),
                Watched::Crd("clonesets.apps.kruise.io".into()),
                Watched::Secret {
                    namespace: "kruise-system".into(),
                    name: "kruise-cloneset-certs".into()
                },
            ]
        );
        let files = CertSource::Files("/certs".into());
        let pod_chain = Owned {
            mutating: Some("kruise-mutating-webhook-configuration".into()),
            ..Owned::default()
        };
        assert_eq!(
            watched(&pod_chain, &files),
            vec![Watched::Mutating(
                "kruise-mutating-webhook-configuration".into()
            )]
        );
    }

    #[tokio::test]
    async fn republish_requests_are_paced() {
        let interval = Duration::from_millis(300);
        let changed = Arc::new(Notify::new());
        let republish = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        let task = tokio::spawn(pace(
            changed.clone(),
            republish.clone(),
            interval,
            stop.clone(),
        ));
        // The first change passes at once.
        let start = std::time::Instant::now();
        changed.notify_one();
        tokio::time::timeout(interval / 2, republish.notified())
            .await
            .unwrap();
        // A burst during the pause becomes one request, after the pause.
        for _ in 0..5 {
            changed.notify_one();
        }
        republish.notified().await;
        assert!(start.elapsed() >= interval);
        assert!(
            tokio::time::timeout(interval * 3, republish.notified())
                .await
                .is_err(),
            "no change, no request"
        );
        stop.cancel();
        task.await.unwrap();
    }
}
