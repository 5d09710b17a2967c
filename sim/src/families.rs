//! `kruise-sim up --controllers`: the kruise-rs families run in-process against the
//! simulator, each as its own binary would (CRDs installed, webhooks served over HTTPS on
//! loopback and registered by URL, controller without leader election).

use std::path::Path;

use anyhow::Context as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The families this build can run, in start order. `webhook` is kruise-webhook, with the
/// pod-chain steps of the other families selected (`workloads` always).
pub const AVAILABLE: &[&str] = &["cloneset", "sidecarset", "webhook"];

/// `all`, `none` or a comma-separated list of [`AVAILABLE`] names.
pub fn parse(spec: &str) -> anyhow::Result<Vec<String>> {
    match spec.trim() {
        "all" => Ok(AVAILABLE.iter().map(|s| s.to_string()).collect()),
        "none" | "" => Ok(Vec::new()),
        list => list
            .split(',')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(|f| {
                if AVAILABLE.contains(&f) {
                    Ok(f.to_string())
                } else {
                    anyhow::bail!(
                        "--controllers: unknown family {f:?} (available: {})",
                        AVAILABLE.join(", ")
                    )
                }
            })
            .collect(),
    }
}

/// Loopback ports for the families' servers, each held bound until every family has its
/// own: a port released at once can be handed out again by the next bind, and two families
/// given the same port would stop `up`. Dropping it releases them for the families to bind.
#[derive(Default)]
struct Ports(Vec<std::net::TcpListener>);

impl Ports {
    fn take(&mut self) -> anyhow::Result<u16> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
        let port = listener.local_addr()?.port();
        self.0.push(listener);
        Ok(port)
    }
}

async fn install_crds(
    client: &kube::Client,
    crds: &[CustomResourceDefinition],
) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        match api.create(&PostParams::default(), crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e).with_context(|| format!("installing the CRD {name}")),
        }
    }
    Ok(())
}

/// The command line a family's binary gets: the simulator's kubeconfig, no leader
/// election, webhooks on a loopback URL, metrics and health on free ports.
fn argv(binary: &str, kubeconfig: &Path, ports: &mut Ports) -> anyhow::Result<Vec<String>> {
    Ok(vec![
        binary.to_string(),
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "--leader-elect=false".into(),
        "--webhook-host".into(),
        "127.0.0.1".into(),
        "--webhook-port".into(),
        ports.take()?.to_string(),
        "--webhook-namespace".into(),
        "default".into(),
        "--metrics-addr".into(),
        format!("127.0.0.1:{}", ports.take()?),
        "--health-addr".into(),
        format!("127.0.0.1:{}", ports.take()?),
    ])
}

type Run = futures::future::BoxFuture<'static, anyhow::Result<()>>;

/// A family's binary, ready to run in-process: its CRDs and its run future.
fn family_binary(
    family: &str,
    families: &[String],
    kubeconfig: &Path,
    ports: &mut Ports,
    shutdown: CancellationToken,
) -> anyhow::Result<(Vec<CustomResourceDefinition>, Run)> {
    Ok(match family {
        "cloneset" => {
            let binary = kruise_cloneset::binary::binary()?;
            let argv = argv(kruise_cloneset::binary::BINARY, kubeconfig, ports)?;
            let crds = binary.crd_definitions().to_vec();
            (
                crds,
                Box::pin(async move { binary.run_argv(argv, shutdown).await.map(|_| ()) }),
            )
        }
        "sidecarset" => {
            let binary = kruise_sidecarset::binary::binary()?;
            let argv = argv(kruise_sidecarset::binary::BINARY, kubeconfig, ports)?;
            let crds = binary.crd_definitions().to_vec();
            (
                crds,
                Box::pin(async move { binary.run_argv(argv, shutdown).await.map(|_| ()) }),
            )
        }
        "webhook" => {
            let binary = kruise_webhook::binary();
            let mut argv = argv(kruise_webhook::BINARY, kubeconfig, ports)?;
            let mut enable = vec!["workloads"];
            if families.iter().any(|f| f == "sidecarset") {
                enable.push("sidecarset");
            }
            argv.push(format!("--enable={}", enable.join(",")));
            (
                Vec::new(),
                Box::pin(async move { binary.run_argv(argv, shutdown).await.map(|_| ()) }),
            )
        }
        other => anyhow::bail!("unknown family {other:?}"),
    })
}

/// Installs each family's CRDs and starts it; the tasks end when `shutdown` fires.
pub async fn start(
    sim: &kruise_sim::Sim,
    kubeconfig: &Path,
    families: &[String],
    shutdown: &CancellationToken,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let client = sim.client()?;
    let mut ports = Ports::default();
    let mut built = Vec::new();
    for family in families {
        built.push((
            family.clone(),
            family_binary(family, families, kubeconfig, &mut ports, shutdown.clone())?,
        ));
    }
    drop(ports);
    let mut tasks = Vec::new();
    for (family, (crds, run)) in built {
        install_crds(&client, &crds).await?;
        tasks.push(tokio::spawn(async move {
            if let Err(e) = run.await {
                tracing::error!(family, error = format!("{e:#}"), "family stopped");
            }
        }));
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_held_together_are_all_different() {
        let mut ports = Ports::default();
        let taken: Vec<u16> = (0..3 * 4).map(|_| ports.take().unwrap()).collect();
        let distinct: std::collections::BTreeSet<u16> = taken.iter().copied().collect();
        assert_eq!(distinct.len(), taken.len(), "{taken:?}");
    }

    #[test]
    fn controllers_flag() {
        assert_eq!(
            parse("all").unwrap(),
            vec!["cloneset", "sidecarset", "webhook"]
        );
        assert!(parse("none").unwrap().is_empty());
        assert_eq!(parse(" cloneset ").unwrap(), vec!["cloneset".to_string()]);
        assert_eq!(
            parse("sidecarset,webhook").unwrap(),
            vec!["sidecarset", "webhook"]
        );
        assert!(parse("cloneset,nope").is_err());
    }
}
