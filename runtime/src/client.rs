//! The Kubernetes client every binary builds: from `--kubeconfig` or the inferred config,
//! naming the binary in its user-agent, with a deadline on every request but watches.

use anyhow::Context as _;
use kube::Client;

use crate::deadline;
use crate::flags::Flags;

/// Installs rustls' ring provider once (a second call is a harmless no-op).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A client from `--kubeconfig` (or the inferred config), with a user-agent naming the binary.
pub async fn build_client(flags: &Flags, name: &str, version: &str) -> anyhow::Result<Client> {
    client_from(flags.kubeconfig.as_deref(), name, version).await
}

/// A client from `kubeconfig` (or the inferred config), with a user-agent naming the binary
/// and [`deadline::REQUEST_DEADLINE`] on every request but watches.
pub async fn client_from(
    kubeconfig: Option<&std::path::Path>,
    name: &str,
    version: &str,
) -> anyhow::Result<Client> {
    let mut config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("loading kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("no --kubeconfig given and no in-cluster or default kubeconfig found")?,
    };
    let agent = http::HeaderValue::from_str(&format!("{name}/{version}"))
        .context("binary name is not a valid user-agent")?;
    config.headers.push((http::header::USER_AGENT, agent));
    // Every request but a watch gets a deadline, so one the server never answers fails
    // and requeues its reconcile instead of holding the object's key forever.
    deadline::client_with_deadline(config, deadline::REQUEST_DEADLINE)
        .context("building the Kubernetes client")
}
