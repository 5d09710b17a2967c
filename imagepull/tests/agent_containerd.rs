//! The node agent against a real containerd and a real registry (the machine recipe
//! `../shared/recipes/containerd-cri.sh`: containerd with CRI and a docker-registry on
//! loopback, from Debian's packages): a NodeImage tag of the registry's image is pulled
//! through CRI and answered with its imageID, which CRI then lists; an image the registry
//! does not have is answered Failed with the registry's message after the retry. Skipped,
//! with the recipe's reason printed, only where the recipe cannot run (no root, no
//! package registry).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kruise_cri::ImageServiceClient;
use kruise_cri::v1::ListImagesRequest;
use kruise_imagepull::agent::{self, AgentSettings};
use kruise_imagepull::api::image::ImageRef;
use kruise_imagepull::api::v1beta1::NodeImage;
use kruise_imagepull::api::{ImagePullPhase, ImageTagStatus};
use kruise_runtime::family::AgentContext;
use kruise_testkit::eventually;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const NODE: &str = "containerd-node";

fn recipe() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/recipes/containerd-cri.sh")
}

/// Starts containerd and the registry; their env (CRI_SOCK, REGISTRY, IMAGE …), or the
/// recipe's reason when it cannot run here.
fn start_containerd(dir: &Path) -> Result<BTreeMap<String, String>, String> {
    let out = Command::new("bash")
        .arg(recipe())
        .arg("start")
        .arg(dir)
        .output()
        .map_err(|e| format!("running the recipe: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let env = std::fs::read_to_string(dir.join("env")).map_err(|e| e.to_string())?;
    Ok(env
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

struct Containerd(PathBuf);

impl Drop for Containerd {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(recipe())
            .arg("stop")
            .arg(&self.0)
            .status();
    }
}

async fn answer(client: &Client, image: &str, tag: &str) -> Option<ImageTagStatus> {
    let ni = Api::<NodeImage>::all(client.clone())
        .get_opt(NODE)
        .await
        .unwrap()?;
    ni.status?
        .image_statuses
        .get(image)?
        .tags
        .iter()
        .find(|t| t.tag == tag && t.completion_time.is_some())
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_pulls_from_a_real_registry_through_containerd() {
    let dir = std::env::temp_dir().join(format!(
        "kruise-imagepull-containerd-{}",
        std::process::id()
    ));
    let env = match start_containerd(&dir) {
        Ok(env) => env,
        Err(reason) => {
            eprintln!("skipped: the containerd recipe cannot run here: {reason}");
            return;
        }
    };
    let _containerd = Containerd(dir.clone());
    let (sim, client) =
        kruise_testkit::sim_with_crds(0, &kruise_imagepull::api::crd::crds().unwrap()).await;
    let image = ImageRef::parse(&env["IMAGE"]).unwrap();
    let (name, tag) = (image.familiar_name(), image.api_tag());
    let missing =
        ImageRef::parse(&format!("{}/cri-test/no-such-image:1", env["REGISTRY"])).unwrap();
    let policy = json!({"timeoutSeconds": 60, "backoffLimit": 1, "ttlSecondsAfterFinished": 600});
    let now = jiff::Timestamp::now().to_string();
    let node_image: NodeImage = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "NodeImage",
        "metadata": {"name": NODE},
        "spec": {"images": {
            name.clone(): {"tags": [{"tag": tag, "version": 1, "createdAt": now, "pullPolicy": policy}]},
            missing.familiar_name(): {"tags": [{"tag": "1", "version": 1, "createdAt": now, "pullPolicy": policy}]},
        }},
    }))
    .unwrap();
    Api::<NodeImage>::all(client.clone())
        .create(&PostParams::default(), &node_image)
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    let ctx = AgentContext {
        client: client.clone(),
        node: NODE.into(),
        cri_socket: PathBuf::from(&env["CRI_SOCK"]),
        shutdown: shutdown.clone(),
    };
    tokio::spawn(agent::run(
        ctx,
        AgentSettings {
            poll: Duration::from_millis(200),
            ..AgentSettings::default()
        },
    ));

    let pulled = eventually(
        "the registry's image answered",
        Duration::from_secs(120),
        || {
            let (client, name, tag) = (client.clone(), name.clone(), tag.clone());
            async move { answer(&client, &name, &tag).await }
        },
    )
    .await;
    assert_eq!(pulled.phase, Some(ImagePullPhase::Succeeded), "{pulled:?}");
    assert!(pulled.image_id.contains("@sha256:"), "{}", pulled.image_id);
    let mut images = ImageServiceClient::new(kruise_cri::connect(&env["CRI_SOCK"]).unwrap());
    let listed = images
        .list_images(ListImagesRequest::default())
        .await
        .unwrap()
        .into_inner()
        .images;
    assert!(
        listed
            .iter()
            .any(|i| i.repo_digests.contains(&pulled.image_id)),
        "{listed:?}"
    );

    let failed = eventually(
        "the missing image answered",
        Duration::from_secs(120),
        || {
            let (client, name) = (client.clone(), missing.familiar_name());
            async move { answer(&client, &name, "1").await }
        },
    )
    .await;
    assert_eq!(failed.phase, Some(ImagePullPhase::Failed), "{failed:?}");
    assert!(
        failed.message.contains("not found"),
        "the registry's message: {}",
        failed.message
    );
    shutdown.cancel();
    sim.shutdown().await;
}
