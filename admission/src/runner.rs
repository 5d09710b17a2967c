//! Runs an admission server the way every binary does: standard flags, certificates from
//! files or a self-managed Secret, caBundle publishing, and rotation checks — as one task
//! for [`kruise_runtime::Binary::every_replica`].

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use axum_server::tls_rustls::RustlsConfig;
use clap::Args;

use super::certs::{self, CertSource, SelfManaged, ServingCert};
use super::publish::{self, Endpoint, Owned};
use super::{AdmissionRoutes, serve};
use kruise_runtime::{Readiness, parse_duration};

/// Flags of the admission server (OpenKruise's env names where it has them).
#[derive(Args, Clone, Debug)]
pub struct AdmissionFlags {
    /// Port of the HTTPS admission server.
    #[arg(long, env = "WEBHOOK_PORT", default_value_t = 9876, global = true)]
    pub webhook_port: u16,
    /// Address the HTTPS admission server listens on: all interfaces by default, as a pod
    /// needs; `127.0.0.1` when the API server runs on the same machine (`--webhook-host`).
    #[arg(long, env = "WEBHOOK_BIND_ADDRESS", default_value_t = IpAddr::V4(Ipv4Addr::UNSPECIFIED), global = true)]
    pub webhook_bind_address: IpAddr,
    /// Directory with `tls.crt`/`tls.key`/`ca.crt` managed by someone else (e.g. cert-manager).
    /// When it holds no certificate, certificates are self-managed in a Secret.
    #[arg(long, env = "WEBHOOK_CERT_DIR", global = true)]
    pub webhook_cert_dir: Option<PathBuf>,
    /// Secret holding self-managed certificates; `<binary>-certs` when unset (OpenKruise: `kruise-webhook-certs`).
    #[arg(long, env = "SECRET_NAME", global = true)]
    pub webhook_secret: Option<String>,
    /// Service the API server calls; `<binary>-service` when unset (OpenKruise: `kruise-webhook-service`).
    #[arg(long, env = "SERVICE_NAME", global = true)]
    pub webhook_service: Option<String>,
    /// Namespace of the Service and Secret.
    #[arg(
        long,
        env = "POD_NAMESPACE",
        default_value = "kruise-system",
        global = true
    )]
    pub webhook_namespace: String,
    /// Reach the server at `https://<host>:<port>` instead of the Service (out-of-cluster runs).
    #[arg(long, env = "WEBHOOK_HOST", global = true)]
    pub webhook_host: Option<String>,
    /// Re-issue certificates this long before they expire.
    #[arg(long, env = "CERTS_RENEW_BEFORE", default_value = "4380h", value_parser = parse_duration, global = true)]
    pub certs_renew_before: Duration,
    /// How often certificates are re-read and checked for renewal.
    #[arg(long, env = "WEBHOOK_CERT_CHECK_INTERVAL", default_value = "60s", value_parser = parse_duration, global = true)]
    pub webhook_cert_check_interval: Duration,
}

impl AdmissionFlags {
    fn source(&self, binary: &str) -> CertSource {
        if let Some(dir) = &self.webhook_cert_dir
            && dir.join("tls.crt").exists()
        {
            return CertSource::Files(dir.clone());
        }
        let service = self.service(binary);
        let secret = self
            .webhook_secret
            .clone()
            .unwrap_or_else(|| format!("{binary}-certs"));
        let mut settings = SelfManaged::for_service(&self.webhook_namespace, &secret, &service);
        settings.renew_before = self.certs_renew_before;
        if let Some(host) = &self.webhook_host {
            settings.hosts.push(host.clone());
        }
        CertSource::SelfManaged(settings)
    }

    fn service(&self, binary: &str) -> String {
        self.webhook_service
            .clone()
            .unwrap_or_else(|| format!("{binary}-service"))
    }

    /// Where the API server reaches this server.
    pub fn endpoint(&self, binary: &str) -> Endpoint {
        match &self.webhook_host {
            Some(host) => Endpoint::Url(format!("https://{host}:{}", self.webhook_port)),
            None => Endpoint::Service {
                namespace: self.webhook_namespace.clone(),
                name: self.service(binary),
                port: 443,
            },
        }
    }
}

/// Serves `routes` until `shutdown`, keeping certificates and the published caBundle current.
/// Marks the readiness check `admission` once the configurations carry the caBundle.
pub async fn run(
    client: kube::Client,
    binary: &str,
    flags: AdmissionFlags,
    routes: AdmissionRoutes,
    owned: Owned,
    readiness: Readiness,
    shutdown: tokio_util::sync::CancellationToken,
) -> anyhow::Result<()> {
    readiness.register("admission");
    let source = flags.source(binary);
    let _repair = super::repair::watch(&client, &owned, &source, routes.refresh(), &shutdown);
    let endpoint = flags.endpoint(binary);
    let mut current = certs::load(&source, &client, jiff::Timestamp::now())
        .await
        .context("loading webhook certificates")?;
    let tls = RustlsConfig::from_pem(
        current.cert_pem.clone().into_bytes(),
        current.key_pem.clone().into_bytes(),
    )
    .await
    .context("loading the serving certificate into TLS")?;
    let addr = SocketAddr::new(flags.webhook_bind_address, flags.webhook_port);
    let server = serve(addr, routes.clone(), tls.clone(), shutdown.clone())
        .await
        .with_context(|| format!("binding the admission server on {addr}"))?;
    tracing::info!(addr = %server.addr, "admission server listening");
    // A missing configuration is created until this process has published it once (its
    // first publish, or the first with an entry for it), never after: one deleted since
    // is being uninstalled.
    let mut ever_published: HashSet<String> = HashSet::new();
    let mut published = publish_logged(
        &client,
        &routes,
        &owned,
        &endpoint,
        &current,
        &mut ever_published,
    )
    .await;
    readiness.set("admission", published);
    loop {
        let interval = if published {
            flags.webhook_cert_check_interval
        } else {
            // Retry publishing sooner than the routine check.
            flags
                .webhook_cert_check_interval
                .min(Duration::from_secs(5))
        };
        let refresh = routes.refresh();
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(interval) => {}
            // A handler's scope changed: publish its new entries now.
            _ = refresh.notified() => {
                published = false;
            }
        }
        match certs::load(&source, &client, jiff::Timestamp::now()).await {
            Ok(next) if next != current => {
                if let Err(e) = tls
                    .reload_from_pem(
                        next.cert_pem.clone().into_bytes(),
                        next.key_pem.clone().into_bytes(),
                    )
                    .await
                {
                    tracing::error!(error = %e, "new serving certificate is unusable; keeping the old one");
                    continue;
                }
                tracing::info!("serving certificate reloaded");
                if next.ca_bundle != current.ca_bundle {
                    published = false;
                }
                current = next;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "checking webhook certificates failed"),
        }
        if !published {
            published = publish_logged(
                &client,
                &routes,
                &owned,
                &endpoint,
                &current,
                &mut ever_published,
            )
            .await;
            readiness.set("admission", published);
        }
    }
    server.stop(Duration::from_secs(10)).await;
    Ok(())
}

async fn publish_logged(
    client: &kube::Client,
    routes: &AdmissionRoutes,
    owned: &Owned,
    endpoint: &Endpoint,
    cert: &ServingCert,
    ever_published: &mut HashSet<String>,
) -> bool {
    if !routes.webhooks_known() {
        // Published once the handlers have loaded what their entries follow (they notify
        // the refresh then); the entries in place meanwhile stay.
        tracing::info!("webhook entries not known yet (caches loading); publishing later");
        return false;
    }
    let create_missing = |name: &str| !ever_published.contains(name);
    let result = publish::publish_creating(
        client,
        routes,
        owned,
        endpoint,
        &cert.ca_bundle,
        create_missing,
    )
    .await;
    match result {
        Ok(names) => {
            ever_published.extend(names);
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not publish webhook configuration; will retry");
            false
        }
    }
}

/// The webhooks a family binary serves for its own kinds: the configurations it registers
/// (one mutating, one validating) and the CRDs whose conversion it serves at `/convert`.
#[derive(Clone, Copy, Debug)]
pub struct CrdWebhooks {
    /// MutatingWebhookConfiguration name (`kruise-<family>-mutating`).
    pub mutating: &'static str,
    /// ValidatingWebhookConfiguration name (`kruise-<family>-validating`).
    pub validating: &'static str,
    /// CRD names (`clonesets.apps.kruise.io`).
    pub crds: &'static [&'static str],
}

impl CrdWebhooks {
    /// The configuration names, for [`kruise_runtime::family::Family::webhooks`].
    pub fn names(&self) -> [&'static str; 2] {
        [self.mutating, self.validating]
    }

    /// What the binary keeps current: both configurations and the CRDs' caBundle.
    pub fn owned(&self) -> Owned {
        Owned {
            mutating: Some(self.mutating.into()),
            validating: Some(self.validating.into()),
            crds: self.crds.iter().map(|crd| crd.to_string()).collect(),
        }
    }
}

/// [`ServesCrdWebhooks::crd_webhooks`] takes the admission flags themselves, or a
/// family's own flags with them `#[command(flatten)]`ed in (and `AsRef` to them).
impl AsRef<AdmissionFlags> for AdmissionFlags {
    fn as_ref(&self) -> &AdmissionFlags {
        self
    }
}

/// The admission side of a family binary for its own kinds, as a step of its
/// [`kruise_runtime::Binary`] builder (`use kruise_admission::runner::ServesCrdWebhooks as _`).
pub trait ServesCrdWebhooks<A>: Sized {
    /// Serves `webhooks` on every replica, with the routes `routes` builds from the live
    /// context (once, at start), and prints them for `manifests` from `routes(None)`.
    fn crd_webhooks<R>(self, webhooks: CrdWebhooks, routes: R) -> Self
    where
        R: Fn(Option<&kruise_runtime::Context<A>>) -> AdmissionRoutes
            + Clone
            + Send
            + Sync
            + 'static;
}

impl<A> ServesCrdWebhooks<A> for kruise_runtime::Binary<A>
where
    A: clap::Args + AsRef<AdmissionFlags> + Clone + Send + Sync + 'static,
{
    /// Serves `webhooks` on every replica, with the routes `routes` builds from the live
    /// context (once, at start), and prints them for `manifests` from `routes(None)`: the
    /// whole admission side of a family binary for its own kinds. The binary's arguments
    /// are [`AdmissionFlags`], or a family's own flags with them flattened in.
    fn crd_webhooks<R>(self, webhooks: CrdWebhooks, routes: R) -> Self
    where
        R: Fn(Option<&kruise_runtime::Context<A>>) -> AdmissionRoutes
            + Clone
            + Send
            + Sync
            + 'static,
    {
        let manifest_routes = routes.clone();
        let binary = self.name();
        self.manifests(move |_flags, args: &A| {
            let endpoint = args.as_ref().endpoint(binary);
            Ok(publish::configurations_yaml(
                &manifest_routes(None),
                &webhooks.owned(),
                &endpoint,
            )?)
        })
        .every_replica(move |ctx| async move {
            let routes = routes(Some(&ctx)).with_metrics(&ctx.metrics);
            run(
                ctx.client.clone(),
                ctx.binary,
                ctx.args.as_ref().clone(),
                routes,
                webhooks.owned(),
                ctx.readiness.clone(),
                ctx.shutdown.clone(),
            )
            .await
        })
    }
}
