//! Starting the registered families in-process against the simulator, each as its own
//! binary would: its CRDs installed, its binary run from a command line naming the
//! simulator's kubeconfig, no leader election, servers on free loopback ports; its node
//! agent, if it has one, once per simulated node with that node's fake CRI socket.

use std::path::Path;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_runtime::family::{AgentContext, Family};
use kube::api::{Api, ListParams, PostParams};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The families `--controllers` names, in registry order: `all`, `none` or a
/// comma-separated list of names.
pub fn choose(registered: Vec<Family>, spec: &str) -> anyhow::Result<Vec<Family>> {
    let wanted: Vec<&str> = match spec.trim() {
        "all" => return Ok(registered),
        "none" | "" => return Ok(Vec::new()),
        list => list
            .split(',')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .collect(),
    };
    let names: Vec<&str> = registered.iter().map(Family::name).collect();
    if let Some(unknown) = wanted.iter().find(|w| !names.contains(w)) {
        anyhow::bail!(
            "--controllers: unknown family {unknown:?} (available: {})",
            names.join(", ")
        );
    }
    Ok(registered
        .into_iter()
        .filter(|f| wanted.contains(&f.name()))
        .collect())
}

/// A family as `kruise-playground families` prints it: name, binary, CRDs, the pod-chain
/// steps it lends (mutating and validating) and `agent` when it has a node agent,
/// tab-separated (`-` for an empty list or no agent).
pub fn describe(family: &Family) -> String {
    let list = |items: Vec<String>| {
        if items.is_empty() {
            "-".to_string()
        } else {
            items.join(",")
        }
    };
    let crds = family
        .crds()
        .iter()
        .map(|crd| crd.metadata.name.clone().unwrap_or_default())
        .collect();
    let steps = family
        .lent_step_names()
        .into_iter()
        .map(String::from)
        .collect();
    let agent = if family.node_agent().is_some() {
        "agent"
    } else {
        "-"
    };
    format!(
        "{}\t{}\t{}\t{}\t{agent}",
        family.name(),
        family.binary_name(),
        list(crds),
        list(steps)
    )
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

/// The command line a family's binary gets: the simulator's kubeconfig, the playground's
/// feature gates, no leader election, webhooks served on loopback only and registered by a
/// loopback URL, metrics and health on free loopback ports.
fn argv(
    binary: &str,
    kubeconfig: &Path,
    feature_gates: &str,
    ports: &mut Ports,
) -> anyhow::Result<Vec<String>> {
    Ok(vec![
        binary.to_string(),
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "--leader-elect=false".into(),
        "--webhook-host".into(),
        "127.0.0.1".into(),
        "--webhook-bind-address".into(),
        "127.0.0.1".into(),
        "--webhook-port".into(),
        ports.take()?.to_string(),
        "--webhook-namespace".into(),
        "default".into(),
        "--metrics-addr".into(),
        format!("127.0.0.1:{}", ports.take()?),
        "--health-addr".into(),
        format!("127.0.0.1:{}", ports.take()?),
        format!("--feature-gates={feature_gates}"),
    ])
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

/// Installs each family's CRDs and starts it with `feature_gates`, then its node agents;
/// the tasks end when `shutdown` fires.
pub async fn start(
    sim: &kruise_sim::Sim,
    kubeconfig: &Path,
    families: Vec<Family>,
    feature_gates: &str,
    shutdown: &CancellationToken,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let client = sim.client()?;
    // The pod chain's host serves the steps (mutating and validating) of the families that
    // run beside it.
    let enable: Vec<&str> = families.iter().flat_map(Family::lent_step_names).collect();
    let enable = format!("--enable={}", enable.join(","));
    let mut ports = Ports::default();
    let mut argvs = Vec::new();
    for family in &families {
        let mut argv = argv(family.binary_name(), kubeconfig, feature_gates, &mut ports)?;
        if family.is_pod_chain_host() {
            argv.push(enable.clone());
        }
        argvs.push(argv);
    }
    drop(ports);
    let nodes = if sim.shared().config.cri_dir.is_some() {
        Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await
            .context("listing the simulated nodes for the node agents")?
            .items
    } else {
        Vec::new()
    };
    let mut tasks = Vec::new();
    for (family, argv) in families.into_iter().zip(argvs) {
        install_crds(&client, family.crds()).await?;
        let name = family.name();
        for node in &nodes {
            let (Some(agent), Some(node)) = (family.node_agent(), node.metadata.name.clone())
            else {
                continue;
            };
            let Some(cri_socket) = sim.cri_socket(&node) else {
                continue;
            };
            let run = agent.run(AgentContext {
                client: client.clone(),
                node: node.clone(),
                cri_socket,
                shutdown: shutdown.clone(),
            });
            tasks.push(tokio::spawn(async move {
                if let Err(e) = run.await {
                    tracing::error!(
                        family = name,
                        node,
                        error = format!("{e:#}"),
                        "agent stopped"
                    );
                }
            }));
        }
        let run = family.run_argv(argv, shutdown.clone());
        tasks.push(tokio::spawn(async move {
            if let Err(e) = run.await {
                tracing::error!(family = name, error = format!("{e:#}"), "family stopped");
            }
        }));
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(families: &[Family]) -> Vec<&'static str> {
        families.iter().map(Family::name).collect()
    }

    fn registered() -> Vec<Family> {
        crate::registry::families().unwrap()
    }

    #[test]
    fn ports_held_together_are_all_different() {
        let mut ports = Ports::default();
        let taken: Vec<u16> = (0..3 * 4).map(|_| ports.take().unwrap()).collect();
        let distinct: std::collections::BTreeSet<u16> = taken.iter().copied().collect();
        assert_eq!(distinct.len(), taken.len(), "{taken:?}");
    }

    #[test]
    fn every_family_gets_the_playgrounds_feature_gates() {
        // Read as every binary reads its shared flags (the admission flags are left out).
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            flags: kruise_runtime::Flags,
        }
        let argv = argv(
            "kruise-cloneset",
            Path::new("/tmp/kubeconfig"),
            "CloneSetShortHash=true,AllAlpha=false",
            &mut Ports::default(),
        )
        .unwrap();
        let shared = argv.iter().enumerate().filter(|(i, a)| {
            *i == 0 || a.starts_with("--feature-gates") || a.starts_with("--leader-elect")
        });
        let cli = <Cli as clap::Parser>::try_parse_from(shared.map(|(_, a)| a)).unwrap();
        assert_eq!(
            cli.flags.feature_gates,
            "CloneSetShortHash=true,AllAlpha=false"
        );
        assert!(!cli.flags.leader_elect);
    }

    #[test]
    fn controllers_flag() {
        assert_eq!(
            names(&choose(registered(), "all").unwrap()),
            [
                "cloneset",
                "sidecarset",
                "statefulset",
                "broadcastjob",
                "imagepull",
                "daemonset",
                "crr",
                "protection",
                "resourcedistribution",
                "webhook"
            ]
        );
        assert!(choose(registered(), "none").unwrap().is_empty());
        assert_eq!(
            names(&choose(registered(), " cloneset ").unwrap()),
            ["cloneset"]
        );
        // Registry order, whatever the order asked for.
        assert_eq!(
            names(&choose(registered(), "webhook,sidecarset").unwrap()),
            ["sidecarset", "webhook"]
        );
        let err = choose(registered(), "cloneset,nope").unwrap_err();
        assert!(err.to_string().contains("unknown family \"nope\""), "{err}");
    }

    /// A family with a node agent gets one per simulated node, each given that node's CRI
    /// socket.
    #[tokio::test]
    async fn a_node_agent_runs_once_per_node_with_its_cri_socket() {
        use kruise_runtime::family::Agent;
        use kruise_runtime::{Binary, Context};
        let dir = std::env::temp_dir().join(format!("kruise-playground-{}", std::process::id()));
        let sim = kruise_sim::Sim::start(kruise_sim::SimConfig {
            nodes: 2,
            cri_dir: Some(dir.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
        let (seen, mut agents) = tokio::sync::mpsc::unbounded_channel();
        let agent = Agent::new(move |ctx: AgentContext| {
            let seen = seen.clone();
            async move {
                seen.send((ctx.node, ctx.cri_socket))?;
                ctx.shutdown.cancelled().await;
                Ok(())
            }
        });
        let binary = Binary::new("kruise-example", "0.0.0").leader(|ctx: Context| async move {
            ctx.shutdown.cancelled().await;
            Ok(())
        });
        let family = Family::new("example", "kruise-example", binary).agent(agent);
        let shutdown = CancellationToken::new();
        let kubeconfig = sim.kubeconfig_path().unwrap();
        let tasks = start(&sim, &kubeconfig, vec![family], "", &shutdown)
            .await
            .unwrap();
        let mut nodes = Vec::new();
        for _ in 0..2 {
            let (node, socket) =
                tokio::time::timeout(std::time::Duration::from_secs(20), agents.recv())
                    .await
                    .unwrap()
                    .unwrap();
            assert_eq!(socket, kruise_sim::cluster::cri::socket_path(&dir, &node));
            nodes.push(node);
        }
        nodes.sort();
        assert_eq!(nodes, ["sim-node-0", "sim-node-1"]);
        shutdown.cancel();
        for task in tasks {
            task.await.unwrap();
        }
        sim.shutdown().await;
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn families_lists_name_binary_crds_steps_and_agent() {
        let lines: Vec<String> = registered().iter().map(describe).collect();
        assert_eq!(
            lines,
            [
                "cloneset\tkruise-cloneset\tclonesets.apps.kruise.io\t-\t-",
                "sidecarset\tkruise-sidecarset\tsidecarsets.apps.kruise.io\tsidecarset\t-",
                "statefulset\tkruise-statefulset\tstatefulsets.apps.kruise.io\t-\t-",
                "broadcastjob\tkruise-broadcastjob\tbroadcastjobs.apps.kruise.io,advancedcronjobs.apps.kruise.io\t-\t-",
                "imagepull\tkruise-imagepull\timagepulljobs.apps.kruise.io,imagelistpulljobs.apps.kruise.io,nodeimages.apps.kruise.io\t-\tagent",
                "daemonset\tkruise-daemonset\tdaemonsets.apps.kruise.io\t-\t-",
                "crr\tkruise-crr\tcontainerrecreaterequests.apps.kruise.io\tcrr\tagent",
                "protection\tkruise-protection\tpodunavailablebudgets.policy.kruise.io\tprotection\t-",
                "resourcedistribution\tkruise-resourcedistribution\tresourcedistributions.apps.kruise.io\t-\t-",
                "webhook\tkruise-webhook\t-\tworkloads\t-",
            ]
        );
    }
}
