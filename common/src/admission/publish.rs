//! The webhook configurations and CRD conversion settings a binary owns, generated from its
//! handlers, and kept carrying the current caBundle (at startup and on every rotation).

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
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
        let common = (
            spec.name.clone(),
            rules(&spec),
            Some(spec.failure_policy.as_str().to_string()),
            spec.namespace_selector.clone(),
            spec.object_selector.clone(),
            Some(spec.timeout_seconds),
        );
        match spec.kind {
            WebhookKind::Mutating => mutating.push(MutatingWebhook {
                name: common.0,
                client_config,
                rules: Some(common.1),
                failure_policy: common.2,
                namespace_selector: common.3,
                object_selector: common.4,
                timeout_seconds: common.5,
                side_effects: "None".into(),
                admission_review_versions: vec!["v1".into()],
                match_policy: Some("Equivalent".into()),
                reinvocation_policy: Some("Never".into()),
                ..MutatingWebhook::default()
            }),
            WebhookKind::Validating => validating.push(ValidatingWebhook {
                name: common.0,
                client_config,
                rules: Some(common.1),
                failure_policy: common.2,
                namespace_selector: common.3,
                object_selector: common.4,
                timeout_seconds: common.5,
                side_effects: "None".into(),
                admission_review_versions: vec!["v1".into()],
                match_policy: Some("Equivalent".into()),
                ..ValidatingWebhook::default()
            }),
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

/// Creates or replaces a cluster-scoped object, keeping its existing metadata; retries on
/// conflicts.
async fn upsert<K>(api: &Api<K>, desired: K, merge: impl Fn(&mut K, &K)) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let name = desired.meta().name.clone().unwrap_or_default();
    for attempt in 0..5 {
        let result = match api.get_opt(&name).await? {
            None => api
                .create(&PostParams::default(), &desired)
                .await
                .map(|_| ()),
            Some(mut current) => {
                merge(&mut current, &desired);
                api.replace(&name, &PostParams::default(), &current)
                    .await
                    .map(|_| ())
            }
        };
        match result {
            Err(kube::Error::Api(s)) if (s.code == 409) && attempt < 4 => continue,
            other => return other,
        }
    }
    Ok(())
}

/// Writes the webhook configurations for `routes` and the conversion settings of the owned
/// CRDs (those that exist; a family may run before its CRDs are applied) with `ca_bundle`.
pub async fn publish(
    client: &kube::Client,
    routes: &AdmissionRoutes,
    owned: &Owned,
    endpoint: &Endpoint,
    ca_bundle: &str,
) -> Result<(), PublishError> {
    let (m, v) = configurations(routes, owned, endpoint, ca_bundle);
    if let Some(m) = m {
        let what = format!(
            "MutatingWebhookConfiguration {}",
            m.metadata.name.clone().unwrap_or_default()
        );
        upsert(&Api::all(client.clone()), m, |cur, want| {
            cur.webhooks = want.webhooks.clone();
        })
        .await
        .map_err(|source| PublishError { what, source })?;
    }
    if let Some(v) = v {
        let what = format!(
            "ValidatingWebhookConfiguration {}",
            v.metadata.name.clone().unwrap_or_default()
        );
        upsert(&Api::all(client.clone()), v, |cur, want| {
            cur.webhooks = want.webhooks.clone();
        })
        .await
        .map_err(|source| PublishError { what, source })?;
    }
    let crds: Api<apiext::CustomResourceDefinition> = Api::all(client.clone());
    for name in &owned.crds {
        let what = format!("conversion of CustomResourceDefinition {name}");
        let conversion = crate::api::crd::webhook_conversion(to_crd_client_config(
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
            if crd.spec.conversion.as_ref() == Some(&conversion) {
                break;
            }
            crd.spec.conversion = Some(conversion.clone());
            match crds.replace(name, &PostParams::default(), &crd).await {
                Ok(_) => break,
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
    Ok(())
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
