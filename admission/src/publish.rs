//! The webhook configurations and CRD conversion settings a binary owns, generated from its
//! handlers, and kept carrying the current caBundle (at startup, on every rotation, and
//! whenever someone else changes them: see [`super::repair`]).

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ObjectMeta, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{AdmissionRoutes, WebhookKind, WebhookSpec};

/// Where the API server reaches the admission server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// In-cluster: a Service (port 443 by convention).
    Service {
        /// Service namespace.
        namespace: String,
        /// Service name.
        name: String,
        /// Service port.
        port: i32,
    },
    /// A base URL such as `https://127.0.0.1:9876` (OpenKruise's `WEBHOOK_HOST` mode; tests).
    Url(String),
}

impl Endpoint {
    /// The clientConfig for `path` with `ca_bundle`.
    pub fn client_config(&self, path: &str, ca_bundle: &str) -> WebhookClientConfig {
        let ca = (!ca_bundle.is_empty()).then(|| ByteString(ca_bundle.as_bytes().to_vec()));
        match self {
            Endpoint::Service {
                namespace,
                name,
                port,
            } => WebhookClientConfig {
                ca_bundle: ca,
                service: Some(ServiceReference {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    path: Some(path.to_string()),
                    port: Some(*port),
                }),
                url: None,
            },
            Endpoint::Url(base) => WebhookClientConfig {
                ca_bundle: ca,
                service: None,
                url: Some(format!("{}{}", base.trim_end_matches('/'), path)),
            },
        }
    }
}

/// Names of what this binary owns.
#[derive(Clone, Debug, Default)]
pub struct Owned {
    /// MutatingWebhookConfiguration name (holds every mutating handler).
    pub mutating: Option<String>,
    /// ValidatingWebhookConfiguration name (holds every validating handler).
    pub validating: Option<String>,
    /// CRDs whose conversion this binary serves at `/convert`.
    pub crds: Vec<String>,
}

fn rules(spec: &WebhookSpec) -> Vec<RuleWithOperations> {
    spec.rules
        .iter()
        .map(|r| RuleWithOperations {
            operations: Some(r.operations.clone()),
            api_groups: Some(r.api_groups.clone()),
            api_versions: Some(r.api_versions.clone()),
            resources: Some(r.resources.clone()),
            scope: r.scope.clone(),
        })
        .collect()
}

/// The MutatingWebhookConfiguration entry for `spec`, calling `client_config`.
pub fn mutating_webhook(spec: &WebhookSpec, client_config: WebhookClientConfig) -> MutatingWebhook {
    MutatingWebhook {
        name: spec.name.clone(),
        client_config,
        rules: Some(rules(spec)),
        failure_policy: Some(spec.failure_policy.as_str().to_string()),
        namespace_selector: spec.namespace_selector.clone(),
        object_selector: spec.object_selector.clone(),
        timeout_seconds: Some(spec.timeout_seconds),
        side_effects: "None".into(),
        admission_review_versions: vec!["v1".into()],
        match_policy: Some("Equivalent".into()),
        reinvocation_policy: Some("Never".into()),
        ..MutatingWebhook::default()
    }
}

/// The ValidatingWebhookConfiguration entry for `spec`, calling `client_config`.
pub fn validating_webhook(
    spec: &WebhookSpec,
    client_config: WebhookClientConfig,
) -> ValidatingWebhook {
    ValidatingWebhook {
        name: spec.name.clone(),
        client_config,
        rules: Some(rules(spec)),
        failure_policy: Some(spec.failure_policy.as_str().to_string()),
        namespace_selector: spec.namespace_selector.clone(),
        object_selector: spec.object_selector.clone(),
        timeout_seconds: Some(spec.timeout_seconds),
        side_effects: "None".into(),
        admission_review_versions: vec!["v1".into()],
        match_policy: Some("Equivalent".into()),
        ..ValidatingWebhook::default()
    }
}

/// The two configurations for `routes` (either may be absent when no handler of its kind
/// exists). Printed by `manifests` and written by [`publish`].
pub fn configurations(
    routes: &AdmissionRoutes,
    owned: &Owned,
    endpoint: &Endpoint,
    ca_bundle: &str,
) -> (
    Option<MutatingWebhookConfiguration>,
    Option<ValidatingWebhookConfiguration>,
) {
    let mut mutating = Vec::new();
    let mut validating = Vec::new();
    for (path, spec) in routes.webhooks() {
        let client_config = endpoint.client_config(&path, ca_bundle);
        match spec.kind {
            WebhookKind::Mutating => mutating.push(mutating_webhook(&spec, client_config)),
            WebhookKind::Validating => validating.push(validating_webhook(&spec, client_config)),
        }
    }
    let meta = |name: &str| ObjectMeta {
        name: Some(name.to_string()),
        labels: Some(
            [(
                "app.kubernetes.io/managed-by".to_string(),
                "kruise-rs".to_string(),
            )]
            .into(),
        ),
        ..ObjectMeta::default()
    };
    let m = owned
        .mutating
        .as_deref()
        .filter(|_| !mutating.is_empty())
        .map(|n| MutatingWebhookConfiguration {
            metadata: meta(n),
            webhooks: Some(mutating),
        });
    let v = owned
        .validating
        .as_deref()
        .filter(|_| !validating.is_empty())
        .map(|n| ValidatingWebhookConfiguration {
            metadata: meta(n),
            webhooks: Some(validating),
        });
    (m, v)
}

/// Errors writing configurations.
#[derive(Debug, thiserror::Error)]
#[error("publishing {what}: {source}")]
pub struct PublishError {
    what: String,
    #[source]
    source: kube::Error,
}

/// A webhook entry of either configuration kind, as far as merging needs it.
trait Entry: Clone + PartialEq {
    fn name(&self) -> &str;
    fn client_config(&self) -> &WebhookClientConfig;
    /// The entry as kube-apiserver stores it (its defaults filled in), so a stored entry
    /// and the one we generate compare equal when nobody changed it.
    fn normalized(&self) -> Self;
}

fn normalized_selector(selector: Option<&LabelSelector>) -> Option<LabelSelector> {
    let mut s = selector.cloned().unwrap_or_default();
    s.match_labels = s.match_labels.filter(|l| !l.is_empty());
    s.match_expressions = s.match_expressions.filter(|e| !e.is_empty());
    Some(s)
}

fn normalized_client_config(c: &WebhookClientConfig) -> WebhookClientConfig {
    let mut c = c.clone();
    c.ca_bundle = c.ca_bundle.filter(|b| !b.0.is_empty());
    if let Some(service) = &mut c.service {
        service.port = Some(service.port.unwrap_or(443));
    }
    c
}

fn normalized_rules(rules: Option<&[RuleWithOperations]>) -> Option<Vec<RuleWithOperations>> {
    rules.map(|rules| {
        rules
            .iter()
            .map(|r| RuleWithOperations {
                scope: Some(r.scope.clone().unwrap_or_else(|| "*".into())),
                ..r.clone()
            })
            .collect()
    })
}

impl Entry for MutatingWebhook {
    fn name(&self) -> &str {
        &self.name
    }
    fn client_config(&self) -> &WebhookClientConfig {
        &self.client_config
    }
    fn normalized(&self) -> Self {
        MutatingWebhook {
            client_config: normalized_client_config(&self.client_config),
            failure_policy: Some(self.failure_policy.clone().unwrap_or_else(|| "Fail".into())),
            match_policy: Some(
                self.match_policy
                    .clone()
                    .unwrap_or_else(|| "Equivalent".into()),
            ),
            namespace_selector: normalized_selector(self.namespace_selector.as_ref()),
            object_selector: normalized_selector(self.object_selector.as_ref()),
            reinvocation_policy: Some(
                self.reinvocation_policy
                    .clone()
                    .unwrap_or_else(|| "Never".into()),
            ),
            rules: normalized_rules(self.rules.as_deref()),
            timeout_seconds: Some(self.timeout_seconds.unwrap_or(10)),
            ..self.clone()
        }
    }
}

impl Entry for ValidatingWebhook {
    fn name(&self) -> &str {
        &self.name
    }
    fn client_config(&self) -> &WebhookClientConfig {
        &self.client_config
    }
    fn normalized(&self) -> Self {
        ValidatingWebhook {
            client_config: normalized_client_config(&self.client_config),
            failure_policy: Some(self.failure_policy.clone().unwrap_or_else(|| "Fail".into())),
            match_policy: Some(
                self.match_policy
                    .clone()
                    .unwrap_or_else(|| "Equivalent".into()),
            ),
            namespace_selector: normalized_selector(self.namespace_selector.as_ref()),
            object_selector: normalized_selector(self.object_selector.as_ref()),
            rules: normalized_rules(self.rules.as_deref()),
            timeout_seconds: Some(self.timeout_seconds.unwrap_or(10)),
            ..self.clone()
        }
    }
}

impl Endpoint {
    /// Whether `config` calls this endpoint: an entry that does is this binary's, whatever
    /// its name (a scoped pod-chain entry left over from a wider scope, say).
    pub fn reached_by(&self, config: &WebhookClientConfig) -> bool {
        match self {
            Endpoint::Service {
                namespace, name, ..
            } => config
                .service
                .as_ref()
                .is_some_and(|s| s.namespace == *namespace && s.name == *name),
            Endpoint::Url(base) => config.url.as_deref().is_some_and(|url| {
                url.strip_prefix(base.trim_end_matches('/'))
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            }),
        }
    }
}

/// Merges the entries this binary wants into `current`: an entry named as one of `desired`
/// is replaced by it where it stands (unless it already equals it), a missing one is
/// appended, an entry calling `endpoint` that is no longer wanted is removed, and every
/// other entry stays as it is. True when `current` changed.
fn merge_entries<W: Entry>(current: &mut Vec<W>, desired: &[W], endpoint: &Endpoint) -> bool {
    let before = current.clone();
    current.retain(|entry| {
        desired.iter().any(|d| d.name() == entry.name())
            || !endpoint.reached_by(entry.client_config())
    });
    for want in desired {
        match current.iter_mut().find(|entry| entry.name() == want.name()) {
            Some(entry) => {
                if entry.normalized() != want.normalized() {
                    *entry = want.clone();
                }
            }
            None => current.push(want.clone()),
        }
    }
    *current != before
}

/// What [`publish`] did to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Written {
    /// It already held what this binary wants.
    Unchanged,
    /// It was missing and was created.
    Created,
    /// It was missing and, as asked, was left missing.
    LeftMissing,
    /// Some of what this binary owns in it was different and was rewritten.
    Updated,
}

/// Creates a cluster-scoped object (when `create_missing`), or merges what this binary owns
/// into the existing one (`merge` returns whether anything changed) and writes it only
/// then; retries on conflicts. Writing only on a change keeps replicas (and the repair
/// watch, which sees our own writes) from writing in turn forever.
async fn upsert<K>(
    api: &Api<K>,
    desired: K,
    create_missing: bool,
    merge: impl Fn(&mut K, &K) -> bool,
) -> Result<Written, kube::Error>
where
    K: kube::Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let name = desired.meta().name.clone().unwrap_or_default();
    for attempt in 0..5 {
        let result = match api.get_opt(&name).await? {
            None if !create_missing => return Ok(Written::LeftMissing),
            None => api
                .create(&PostParams::default(), &desired)
                .await
                .map(|_| Written::Created),
            Some(mut current) => {
                if !merge(&mut current, &desired) {
                    return Ok(Written::Unchanged);
                }
                api.replace(&name, &PostParams::default(), &current)
                    .await
                    .map(|_| Written::Updated)
            }
        };
        match result {
            Err(kube::Error::Api(s)) if (s.code == 409) && attempt < 4 => continue,
            other => return other,
        }
    }
    Ok(Written::Unchanged)
}

fn log_written(what: &str, written: Written) {
    match written {
        Written::Unchanged => tracing::debug!(%what, "already as published"),
        Written::Created => tracing::info!(%what, "created"),
        Written::Updated => tracing::info!(%what, "restored what this binary owns in it"),
        Written::LeftMissing => tracing::warn!(
            %what,
            "deleted while this process runs (as `helm uninstall` does first): not created again; the next start creates it"
        ),
    }
}

/// The conversion settings as kube-apiserver stores them (service port defaulted, an empty
/// caBundle dropped), for comparing.
fn normalized_conversion(
    c: Option<&apiext::CustomResourceConversion>,
) -> Option<apiext::CustomResourceConversion> {
    let mut c = c.cloned()?;
    if let Some(config) = c.webhook.as_mut().and_then(|w| w.client_config.as_mut()) {
        config.ca_bundle = config.ca_bundle.take().filter(|b| !b.0.is_empty());
        if let Some(service) = &mut config.service {
            service.port = Some(service.port.unwrap_or(443));
        }
    }
    Some(c)
}

/// Writes the webhook configurations for `routes` and the conversion settings of the owned
/// CRDs (those that exist; a family may run before its CRDs are applied) with `ca_bundle`.
///
/// Only what this binary owns is written: its own entries (by name, or any entry calling its
/// endpoint) in its configurations, and `spec.conversion` of its CRDs. Other entries, the
/// configurations' metadata and the rest of the CRDs stay as they are, and nothing is
/// written when everything already matches, so it is safe to call on every change
/// ([`super::repair`] does).
///
/// A missing configuration is created only when `create_missing` (the process's first
/// publish): one deleted later is left deleted, since that is how an uninstall begins
/// (`helm uninstall` deletes the configurations before the Deployments), and a
/// configuration re-created then would outlive its Service and fail every admission it
/// matches. OpenKruise never creates them (its chart does).
pub async fn publish(
    client: &kube::Client,
    routes: &AdmissionRoutes,
    owned: &Owned,
    endpoint: &Endpoint,
    ca_bundle: &str,
    create_missing: bool,
) -> Result<(), PublishError> {
    publish_creating(client, routes, owned, endpoint, ca_bundle, |_| {
        create_missing
    })
    .await
    .map(|_| ())
}

/// [`publish`], deciding per configuration whether a missing one is created
/// (`create_missing(name)`), so a process can create a configuration the first time it has
/// entries for it, however late that comes, and still leave one it published and that was
/// deleted since. Returns the names of the configurations it published.
pub async fn publish_creating(
    client: &kube::Client,
    routes: &AdmissionRoutes,
    owned: &Owned,
    endpoint: &Endpoint,
    ca_bundle: &str,
    create_missing: impl Fn(&str) -> bool,
) -> Result<Vec<String>, PublishError> {
    let (m, v) = configurations(routes, owned, endpoint, ca_bundle);
    let mut published = Vec::new();
    if let Some(m) = m {
        let name = m.metadata.name.clone().unwrap_or_default();
        let what = format!("MutatingWebhookConfiguration {name}");
        let create = create_missing(&name);
        let written = upsert(&Api::all(client.clone()), m, create, |cur, want| {
            let mut entries = cur.webhooks.take().unwrap_or_default();
            let changed = merge_entries(
                &mut entries,
                want.webhooks.as_deref().unwrap_or_default(),
                endpoint,
            );
            cur.webhooks = Some(entries);
            changed
        })
        .await
        .map_err(|source| PublishError {
            what: what.clone(),
            source,
        })?;
        if written != Written::LeftMissing {
            published.push(name);
        }
        log_written(&what, written);
    }
    if let Some(v) = v {
        let name = v.metadata.name.clone().unwrap_or_default();
        let what = format!("ValidatingWebhookConfiguration {name}");
        let create = create_missing(&name);
        let written = upsert(&Api::all(client.clone()), v, create, |cur, want| {
            let mut entries = cur.webhooks.take().unwrap_or_default();
            let changed = merge_entries(
                &mut entries,
                want.webhooks.as_deref().unwrap_or_default(),
                endpoint,
            );
            cur.webhooks = Some(entries);
            changed
        })
        .await
        .map_err(|source| PublishError {
            what: what.clone(),
            source,
        })?;
        if written != Written::LeftMissing {
            published.push(name);
        }
        log_written(&what, written);
    }
    let crds: Api<apiext::CustomResourceDefinition> = Api::all(client.clone());
    for name in &owned.crds {
        let what = format!("conversion of CustomResourceDefinition {name}");
        let conversion = kruise_core::api::crd::webhook_conversion(to_crd_client_config(
            endpoint.client_config("/convert", ca_bundle),
        ));
        for attempt in 0..5 {
            let Some(mut crd) = crds.get_opt(name).await.map_err(|source| PublishError {
                what: what.clone(),
                source,
            })?
            else {
                tracing::debug!(crd = %name, "CRD not installed yet; conversion not published");
                break;
            };
            if normalized_conversion(crd.spec.conversion.as_ref())
                == normalized_conversion(Some(&conversion))
            {
                break;
            }
            crd.spec.conversion = Some(conversion.clone());
            match crds.replace(name, &PostParams::default(), &crd).await {
                Ok(_) => {
                    log_written(&what, Written::Updated);
                    break;
                }
                Err(kube::Error::Api(s)) if s.code == 409 && attempt < 4 => continue,
                Err(source) => {
                    return Err(PublishError {
                        what: what.clone(),
                        source,
                    });
                }
            }
        }
    }
    Ok(published)
}

fn to_crd_client_config(c: WebhookClientConfig) -> apiext::WebhookClientConfig {
    apiext::WebhookClientConfig {
        ca_bundle: c.ca_bundle,
        service: c.service.map(|s| apiext::ServiceReference {
            namespace: s.namespace,
            name: s.name,
            path: s.path,
            port: s.port,
        }),
        url: c.url,
    }
}

/// The configurations for `routes` as a YAML stream (no caBundle: the binary writes it at
/// startup), for `manifests` and the chart.
pub fn configurations_yaml(
    routes: &AdmissionRoutes,
    owned: &Owned,
    endpoint: &Endpoint,
) -> Result<String, serde_saphyr::SerializeError> {
    let (m, v) = configurations(routes, owned, endpoint, "");
    let mut out = String::new();
    if let Some(m) = m {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&m)?);
    }
    if let Some(v) = v {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&v)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, url: &str, ca: &str) -> ValidatingWebhook {
        ValidatingWebhook {
            name: name.into(),
            client_config: WebhookClientConfig {
                ca_bundle: Some(ByteString(ca.as_bytes().to_vec())),
                url: Some(url.into()),
                service: None,
            },
            rules: Some(vec![RuleWithOperations {
                operations: Some(vec!["CREATE".into()]),
                api_groups: Some(vec!["apps.kruise.io".into()]),
                api_versions: Some(vec!["v1beta1".into()]),
                resources: Some(vec!["clonesets".into()]),
                scope: None,
            }]),
            side_effects: "None".into(),
            admission_review_versions: vec!["v1".into()],
            match_policy: Some("Equivalent".into()),
            ..ValidatingWebhook::default()
        }
    }

    fn ours() -> Endpoint {
        Endpoint::Url("https://127.0.0.1:9876".into())
    }

    #[test]
    fn an_entry_as_the_api_server_stores_it_is_not_rewritten() {
        let want = entry("vcloneset.kb.io", "https://127.0.0.1:9876/validate", "CA");
        let mut stored = want.clone();
        // kube-apiserver fills in the defaults we leave out.
        stored.failure_policy = Some("Fail".into());
        stored.timeout_seconds = Some(10);
        stored.namespace_selector = Some(LabelSelector::default());
        stored.object_selector = Some(LabelSelector::default());
        if let Some(rules) = stored.rules.as_mut() {
            rules[0].scope = Some("*".into());
        }
        let mut current = vec![stored.clone()];
        assert!(!merge_entries(
            &mut current,
            std::slice::from_ref(&want),
            &ours()
        ));
        assert_eq!(current, vec![stored]);
    }

    #[test]
    fn a_tampered_entry_is_restored_and_other_entries_are_kept() {
        let want = entry("vcloneset.kb.io", "https://127.0.0.1:9876/validate", "CA");
        let foreign = entry("policy.example.com", "https://10.0.0.1/check", "OTHER");
        let mut tampered = want.clone();
        tampered.client_config.ca_bundle = None;
        let mut current = vec![foreign.clone(), tampered];
        assert!(merge_entries(
            &mut current,
            std::slice::from_ref(&want),
            &ours()
        ));
        assert_eq!(current, vec![foreign.clone(), want.clone()]);

        // A deleted entry comes back after the others.
        let mut current = vec![foreign.clone()];
        assert!(merge_entries(
            &mut current,
            std::slice::from_ref(&want),
            &ours()
        ));
        assert_eq!(current, vec![foreign, want]);
    }

    #[test]
    fn an_entry_of_ours_no_longer_wanted_is_removed() {
        // A scoped pod-chain entry from when more SidecarSets existed.
        let first = entry("mpod.kb.io", "https://127.0.0.1:9876/mutate-pod", "CA");
        let stale = entry("mpod-1.kb.io", "https://127.0.0.1:9876/mutate-pod", "CA");
        let foreign = entry("mpod-1.example.com", "https://127.0.0.1:98760/x", "CA");
        let mut current = vec![first.clone(), stale, foreign.clone()];
        assert!(merge_entries(
            &mut current,
            std::slice::from_ref(&first),
            &ours()
        ));
        assert_eq!(current, vec![first, foreign]);
    }

    #[test]
    fn an_endpoint_is_reached_by_its_own_urls_and_service_only() {
        let url = |u: &str| WebhookClientConfig {
            url: Some(u.into()),
            ..WebhookClientConfig::default()
        };
        assert!(ours().reached_by(&url("https://127.0.0.1:9876/mutate-pod")));
        assert!(!ours().reached_by(&url("https://127.0.0.1:98761/mutate-pod")));
        let service = Endpoint::Service {
            namespace: "kruise-system".into(),
            name: "kruise-webhook-service".into(),
            port: 443,
        };
        let in_cluster = service.client_config("/mutate-pod", "CA");
        assert!(service.reached_by(&in_cluster));
        assert!(!ours().reached_by(&in_cluster));
        let other = Endpoint::Service {
            namespace: "kruise-system".into(),
            name: "kruise-cloneset-service".into(),
            port: 443,
        };
        assert!(!other.reached_by(&in_cluster));
    }

    #[test]
    fn conversion_with_the_api_servers_defaults_equals_ours() {
        let ours = kruise_core::api::crd::webhook_conversion(to_crd_client_config(
            Endpoint::Service {
                namespace: "kruise-system".into(),
                name: "kruise-cloneset-service".into(),
                port: 443,
            }
            .client_config("/convert", "CA"),
        ));
        let mut stored = ours.clone();
        if let Some(service) = stored
            .webhook
            .as_mut()
            .and_then(|w| w.client_config.as_mut())
            .and_then(|c| c.service.as_mut())
        {
            service.port = None;
        }
        assert_eq!(
            normalized_conversion(Some(&stored)),
            normalized_conversion(Some(&ours))
        );
        let mut tampered = ours.clone();
        if let Some(c) = tampered
            .webhook
            .as_mut()
            .and_then(|w| w.client_config.as_mut())
        {
            c.ca_bundle = Some(ByteString(b"EVIL".to_vec()));
        }
        assert_ne!(
            normalized_conversion(Some(&tampered)),
            normalized_conversion(Some(&ours))
        );
    }
}
