//! The node agent (`kruise-imagepull agent`, or one per simulated node in
//! `kruise-playground up`): reads its node's NodeImage and pulls each tag version through
//! the node's CRI image service (see [`crate::plan::puller`] for what it pulls).
//!
//! * One worker per tag version, at most `max_workers` pulling at once (the others answer
//!   `Waiting`); a worker whose version the spec no longer asks for is cancelled.
//! * A worker answers `Pulling`, then `Succeeded` with the image's id, or `Failed` with the
//!   runtime's message once its retries (1 s doubling to 30 s) are spent or the tag's
//!   deadline passed; each attempt is bounded by the tag's timeout. `IfNotPresent` skips a
//!   present image.
//! * Credentials: the image's pull secrets (copied to the agent's namespace by the
//!   controller) matched to the image's registry ([`crate::plan::credentials`]) go as CRI
//!   auth.
//! * Status writes are throttled: at most one per `poll`, carrying every answer since the
//!   last, with the NodeImage's `resourceVersion` as precondition; a pull that finishes
//!   wakes the loop at once, so a final answer does not wait for the next poll (the
//!   controller hands the tag to the next node sooner).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_cri::ImageServiceClient;
use kruise_cri::v1::{AuthConfig, ImageSpec as CriImageSpec, ImageStatusRequest, PullImageRequest};
use kruise_runtime::family::AgentContext;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

use crate::api::image::{ImageRef, pull_reference};
use crate::api::v1beta1::NodeImage;
use crate::api::{ImagePullPhase, ImageTagStatus};
use crate::plan::credentials::{Credential, credentials_for};
use crate::plan::puller::{PullTask, merge_answers, retry_delay, tasks};

/// The agent's settings.
#[derive(Clone, Debug)]
pub struct AgentSettings {
    /// Most pulls at once (`--max-workers-for-pull-image`; OpenKruise deploys 2).
    pub max_workers: usize,
    /// How often the NodeImage is read and answers written.
    pub poll: Duration,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            max_workers: 2,
            poll: Duration::from_secs(1),
        }
    }
}

/// The latest answer per (image, tag).
type Answers = Arc<Mutex<BTreeMap<(String, String), ImageTagStatus>>>;

struct Worker {
    version: i64,
    cancel: CancellationToken,
}

/// Runs the agent for `ctx.node` until `ctx.shutdown` fires.
/// Without a CRI runtime (no socket, or Docker Engine without cri-dockerd) it logs why and
/// waits for shutdown rather than exiting into a crash loop.
pub async fn run(ctx: AgentContext, settings: AgentSettings) -> anyhow::Result<()> {
    let socket = match kruise_cri::socket::agent_endpoint(&ctx.cri_socket) {
        kruise_cri::socket::Endpoint::Socket(path) => path,
        kruise_cri::socket::Endpoint::Disabled(reason) => {
            tracing::error!(node = %ctx.node, %reason, "no CRI runtime: pulling nothing on this node");
            ctx.shutdown.cancelled().await;
            return Ok(());
        }
    };
    let channel = kruise_cri::connect(&socket)
        .with_context(|| format!("connecting to the CRI at {}", socket.display()))?;
    let api: Api<NodeImage> = Api::all(ctx.client.clone());
    let permits = Arc::new(Semaphore::new(settings.max_workers.max(1)));
    let answers: Answers = Arc::default();
    // Signalled by a worker with a final answer.
    let answered = Arc::new(Notify::new());
    let mut workers: BTreeMap<(String, String), Worker> = BTreeMap::new();
    let mut written: BTreeMap<(String, String), ImageTagStatus> = BTreeMap::new();
    loop {
        tokio::select! {
            _ = ctx.shutdown.cancelled() => break,
            _ = tokio::time::sleep(settings.poll) => {}
            _ = answered.notified() => {}
        }
        let node_image = match api.get_opt(&ctx.node).await {
            Ok(Some(n)) => n,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(node = %ctx.node, error = %e, "reading the NodeImage");
                continue;
            }
        };
        let wanted = tasks(&node_image);
        // Cancel workers of versions no longer asked for. A finished worker stays until its
        // answer is in the NodeImage, so the version is not pulled again meanwhile.
        workers.retain(|key, worker| {
            let keep = wanted
                .iter()
                .any(|t| (&t.image, &t.tag) == (&key.0, &key.1) && t.version == worker.version);
            if !keep {
                worker.cancel.cancel();
            }
            keep
        });
        for task in wanted {
            let key = (task.image.clone(), task.tag.clone());
            if workers.contains_key(&key) {
                continue;
            }
            let cancel = ctx.shutdown.child_token();
            workers.insert(
                key,
                Worker {
                    version: task.version,
                    cancel: cancel.clone(),
                },
            );
            tokio::spawn(pull(
                task,
                channel.clone(),
                ctx.client.clone(),
                permits.clone(),
                answers.clone(),
                answered.clone(),
                cancel,
            ));
        }
        // Throttled status write: the answers not yet written.
        let fresh: Vec<(String, ImageTagStatus)> = answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(key, answer)| written.get(*key) != Some(*answer))
            .map(|(key, answer)| (key.0.clone(), answer.clone()))
            .collect();
        if fresh.is_empty() {
            continue;
        }
        let status = merge_answers(&node_image, &fresh);
        if node_image.status.as_ref() == Some(&status) {
            continue;
        }
        // `desired` as cached (the controller's count; 0 before its first write): the
        // schema requires it, as OpenKruise's does, in every status.
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": node_image.metadata.resource_version},
            "status": {"desired": status.desired, "imageStatuses": status.image_statuses},
        });
        match api
            .patch_status(&ctx.node, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => {
                for (image, answer) in fresh {
                    written.insert((image, answer.tag.clone()), answer);
                }
            }
            // A conflict: the next poll reads the newer NodeImage and writes again.
            Err(e) => tracing::debug!(node = %ctx.node, error = %e, "writing pull answers"),
        }
    }
    for worker in workers.values() {
        worker.cancel.cancel();
    }
    Ok(())
}

fn report(answers: &Answers, image: &str, answer: ImageTagStatus) {
    answers
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert((image.to_string(), answer.tag.clone()), answer);
}

/// One tag version's pull, start to answer.
async fn pull(
    task: PullTask,
    channel: Channel,
    client: Client,
    permits: Arc<Semaphore>,
    answers: Answers,
    answered: Arc<Notify>,
    cancel: CancellationToken,
) {
    let base = ImageTagStatus {
        tag: task.tag.clone(),
        version: task.version,
        ..Default::default()
    };
    report(
        &answers,
        &task.image,
        ImageTagStatus {
            phase: Some(ImagePullPhase::Waiting),
            ..base.clone()
        },
    );
    let _permit = tokio::select! {
        _ = cancel.cancelled() => return,
        permit = permits.acquire_owned() => match permit { Ok(p) => p, Err(_) => return },
    };
    let started = Time(jiff::Timestamp::now());
    let pulling = ImageTagStatus {
        phase: Some(ImagePullPhase::Pulling),
        start_time: Some(started.clone()),
        ..base
    };
    report(&answers, &task.image, pulling.clone());
    let reference = pull_reference(&task.image, &task.tag);
    let outcome = tokio::select! {
        _ = cancel.cancelled() => return,
        outcome = attempts(&task, &reference, channel, &client) => outcome,
    };
    let finished = Time(jiff::Timestamp::now());
    let answer = match outcome {
        Ok(image_id) => ImageTagStatus {
            phase: Some(ImagePullPhase::Succeeded),
            progress: 100,
            completion_time: Some(finished),
            image_id,
            ..pulling
        },
        Err(message) => ImageTagStatus {
            phase: Some(ImagePullPhase::Failed),
            completion_time: Some(finished),
            message,
            ..pulling
        },
    };
    report(&answers, &task.image, answer);
    answered.notify_one();
    cancel.cancel();
}

/// Pulls `reference` (skipping a present image unless `Always`), retrying with backoff
/// until the retries are spent or the deadline passed; the image's id, or the last error.
async fn attempts(
    task: &PullTask,
    reference: &str,
    channel: Channel,
    client: &Client,
) -> Result<String, String> {
    let mut images = ImageServiceClient::new(channel);
    if !task.always
        && let Some(id) = present(&mut images, reference).await
    {
        return Ok(id);
    }
    let auth = auth(task, reference, client).await;
    let mut attempt = 0;
    loop {
        let request = PullImageRequest {
            image: Some(CriImageSpec {
                image: reference.to_string(),
                ..Default::default()
            }),
            auth: auth.clone(),
        };
        let error = match tokio::time::timeout(task.timeout, images.pull_image(request)).await {
            Ok(Ok(_)) => {
                return Ok(present(&mut images, reference)
                    .await
                    .unwrap_or_else(|| reference.to_string()));
            }
            Ok(Err(status)) => status.message().to_string(),
            Err(_) => format!("pulling {reference} timed out after {:?}", task.timeout),
        };
        attempt += 1;
        let delay = retry_delay(attempt);
        let past_deadline = task.deadline.is_some_and(|d| {
            jiff::Timestamp::now() + jiff::SignedDuration::try_from(delay).unwrap_or_default() >= d
        });
        if attempt > task.backoff_limit || past_deadline {
            return Err(error);
        }
        tokio::time::sleep(delay).await;
    }
}

/// The image's id (`repo@sha256:…`, its first repo digest, else its id) when present.
async fn present(images: &mut ImageServiceClient<Channel>, reference: &str) -> Option<String> {
    let request = ImageStatusRequest {
        image: Some(CriImageSpec {
            image: reference.to_string(),
            ..Default::default()
        }),
        verbose: false,
    };
    let image = images
        .image_status(request)
        .await
        .ok()?
        .into_inner()
        .image?;
    image
        .repo_digests
        .first()
        .cloned()
        .or(Some(image.id).filter(|id| !id.is_empty()))
}

/// The first credential of the task's secrets for the image's registry.
async fn auth(task: &PullTask, reference: &str, client: &Client) -> Option<AuthConfig> {
    let image = ImageRef::parse(reference).ok()?;
    let mut secrets = Vec::new();
    for secret in &task.secrets {
        let api: Api<Secret> = Api::namespaced(client.clone(), &secret.namespace);
        match api.get_opt(&secret.name).await {
            Ok(Some(s)) => secrets.push(s),
            Ok(None) => {}
            Err(e) => tracing::warn!(secret = %secret.name, error = %e, "reading a pull secret"),
        }
    }
    credentials_for(&image, &secrets)
        .into_iter()
        .next()
        .map(auth_config)
}

/// The CRI login for a credential, as the kubelet sends it: without a server address.
/// containerd reads that field as a URL and gives the login only to the host it names, so
/// a config key such as `127.0.0.1:5000` or `docker.io` (no scheme) would either fail the
/// pull ("parse server address") or send no login at all; the credential already matched
/// the image's registry.
fn auth_config(credential: Credential) -> AuthConfig {
    AuthConfig {
        username: credential.username,
        password: credential.password,
        auth: credential.auth,
        server_address: String::new(),
        identity_token: credential.identity_token,
        registry_token: credential.registry_token,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_login_goes_to_the_runtime_without_the_config_key_as_server_address() {
        let credential = Credential {
            username: "user".into(),
            password: "secret".into(),
            server_address: "127.0.0.1:35101".into(),
            ..Default::default()
        };
        let config = auth_config(credential);
        assert_eq!(
            (config.username.as_str(), config.password.as_str()),
            ("user", "secret")
        );
        assert_eq!(config.server_address, "");
    }
}
