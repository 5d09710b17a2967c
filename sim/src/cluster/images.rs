//! The images present on each simulated node: filled by the kubelet as it pulls for
//! pods and by the fake CRI's PullImage, emptied by RemoveImage. The kubelet pays the
//! pull delay only for an image the node lacks (or under `imagePullPolicy: Always`),
//! which is what makes pre-downloading images worth it, as on a real node.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_json::Value;

use super::stable_hash;

/// `docker.io/library/nginx@sha256:<64 hex>`: the repository as containerd reports it
/// and a digest that depends only on the image string, so the same image always has
/// the same imageID and a new image a new one.
pub fn image_id(image: &str) -> String {
    let without_digest = image.split('@').next().unwrap_or(image);
    // A ':' after the last '/' is a tag; one before it is a registry port.
    let repo = match without_digest.rfind(':') {
        Some(i) if !without_digest[i..].contains('/') => &without_digest[..i],
        _ => without_digest,
    };
    let full = match repo.split_once('/') {
        None => format!("docker.io/library/{repo}"),
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => {
            repo.to_string()
        }
        Some(_) => format!("docker.io/{repo}"),
    };
    let hex: String = (0..4u64)
        .map(|i| format!("{:016x}", stable_hash(image, i)))
        .collect();
    format!("{full}@sha256:{hex}")
}

/// The registry host of `image` when no resolver can find it: a name under the reserved
/// `.invalid` top-level domain (RFC 2606) or one starting `invalid.`, as Kubernetes' e2e
/// image `invalid.registry.k8s.io/invalid/alpine:3.1` (`InvalidRegistryImage`, which
/// OpenKruise's e2e specs use for an update that cannot start). Every other registry
/// answers.
pub fn unresolvable_registry(image: &str) -> Option<&str> {
    let (host, _) = image.split_once('/')?;
    let host = host.split(':').next().unwrap_or(host);
    let named = host.contains('.');
    (named && (host.starts_with("invalid.") || host.ends_with(".invalid"))).then_some(host)
}

/// One image on a node, named as containerd names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeImage {
    /// `sha256:<64 hex>` (the config digest containerd reports as the image id).
    pub id: String,
    /// `docker.io/library/nginx:1.25`.
    pub repo_tag: String,
    /// `docker.io/library/nginx@sha256:<64 hex>`: what the pod status reports as imageID.
    pub repo_digest: String,
    pub size: u64,
}

impl NodeImage {
    pub fn of(image: &str) -> NodeImage {
        let repo_digest = image_id(image);
        let hex = repo_digest
            .rsplit(':')
            .next()
            .unwrap_or_default()
            .to_string();
        let repo = repo_digest.split('@').next().unwrap_or_default();
        let tag = image_tag(image);
        // A deterministic size between 10 and 200 MiB, so listings look plausible.
        let size = 10 * 1024 * 1024
            + u64::from_str_radix(hex.get(..6).unwrap_or("0"), 16).unwrap_or(0)
                % (190 * 1024 * 1024);
        NodeImage {
            id: format!("sha256:{hex}"),
            repo_tag: format!("{repo}:{tag}"),
            repo_digest,
            size,
        }
    }

    /// Whether `reference` (a name with or without tag or registry, an image id or a
    /// repo digest) names this image.
    pub fn matches(&self, reference: &str) -> bool {
        if reference == self.id || reference == self.repo_digest {
            return true;
        }
        if reference.contains('@') {
            return image_id(reference) == self.repo_digest;
        }
        NodeImage::of(reference).repo_tag == self.repo_tag
    }
}

/// The tag of an image reference; `latest` when it has none.
fn image_tag(image: &str) -> &str {
    let name = image.split('@').next().unwrap_or(image);
    match name.rfind(':') {
        Some(i) if !name[i..].contains('/') => &name[i + 1..],
        _ => "latest",
    }
}

/// Images per node, keyed by repo tag.
#[derive(Debug, Default)]
pub struct ImageStore {
    nodes: HashMap<String, BTreeMap<String, NodeImage>>,
}

impl ImageStore {
    pub fn list(&self, node: &str) -> Vec<NodeImage> {
        self.nodes
            .get(node)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    pub fn find(&self, node: &str, reference: &str) -> Option<NodeImage> {
        self.nodes
            .get(node)?
            .values()
            .find(|i| i.matches(reference))
            .cloned()
    }

    pub fn add(&mut self, node: &str, image: &str) -> NodeImage {
        let img = NodeImage::of(image);
        self.nodes
            .entry(node.to_string())
            .or_default()
            .insert(img.repo_tag.clone(), img.clone());
        img
    }

    /// Removes the image `reference` names; true when it was present.
    pub fn remove(&mut self, node: &str, reference: &str) -> bool {
        let Some(m) = self.nodes.get_mut(node) else {
            return false;
        };
        let before = m.len();
        m.retain(|_, i| !i.matches(reference));
        m.len() != before
    }

    /// Whether starting `container` (a pod spec container) on `node` needs a pull,
    /// by its `imagePullPolicy` (defaulted as the API server does: Always for
    /// `:latest` or no tag, IfNotPresent otherwise).
    pub fn needs_pull(&self, node: &str, container: &Value) -> bool {
        let image = container.get("image").and_then(Value::as_str).unwrap_or("");
        let policy = container
            .get("imagePullPolicy")
            .and_then(Value::as_str)
            .unwrap_or(if image_tag(image) == "latest" && !image.contains('@') {
                "Always"
            } else {
                "IfNotPresent"
            });
        match policy {
            "Never" => false,
            "IfNotPresent" => self.find(node, image).is_none(),
            _ => true,
        }
    }
}

/// How pulling one image behaves on every simulated node, for the kubelet and the fake
/// CRI alike.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImagePull {
    /// The pull's latency; unset: the kubelet's `pull_delay`.
    pub delay: Option<Duration>,
    /// The pull fails, after its latency, with this message (CRI `PullImage` only).
    pub failure: Option<String>,
}

/// Per-image pull behaviour (`SimConfig::image_pulls`, `up --image-pull`), keyed by the
/// image reference as configured and matched as containerd matches names (`nginx:1.25`
/// is `docker.io/library/nginx:1.25`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImagePulls {
    images: Vec<(NodeImage, ImagePull)>,
}

impl ImagePulls {
    /// Pulling `image` takes `delay`.
    pub fn delay(mut self, image: &str, delay: Duration) -> Self {
        self.entry(image).delay = Some(delay);
        self
    }

    /// Pulling `image` fails with `message` (after its delay).
    pub fn fail(mut self, image: &str, message: &str) -> Self {
        self.entry(image).failure = Some(message.to_string());
        self
    }

    fn entry(&mut self, image: &str) -> &mut ImagePull {
        let key = NodeImage::of(image);
        let i = match self.images.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                self.images.push((key, ImagePull::default()));
                self.images.len() - 1
            }
        };
        &mut self.images[i].1
    }

    /// How pulling `image` behaves: as configured, else the default, which fails only for
    /// a registry no resolver can find ([`unresolvable_registry`]).
    pub fn of(&self, image: &str) -> ImagePull {
        self.images
            .iter()
            .find(|(k, _)| k.matches(image))
            .map(|(_, p)| p.clone())
            .unwrap_or_else(|| ImagePull {
                failure: unresolvable_registry(image).map(|host| {
                    format!("failed to resolve reference: dial tcp: lookup {host}: no such host")
                }),
                ..ImagePull::default()
            })
    }

    /// Sets what `pull` sets for `image`.
    pub fn with(mut self, image: &str, pull: ImagePull) -> Self {
        let entry = self.entry(image);
        if pull.delay.is_some() {
            entry.delay = pull.delay;
        }
        if pull.failure.is_some() {
            entry.failure = pull.failure;
        }
        self
    }
}

impl ImagePull {
    /// Parses an `up --image-pull` value: `IMAGE=DURATION` (`nginx:1.25=2s`) or
    /// `IMAGE=fail:MESSAGE`. An image reference holds no `=`; a message may.
    pub fn parse_flag(value: &str) -> Result<(String, ImagePull), String> {
        let (image, how) = value
            .split_once('=')
            .filter(|(image, _)| !image.trim().is_empty())
            .ok_or_else(|| format!("{value:?} is not IMAGE=DURATION or IMAGE=fail:MESSAGE"))?;
        let pull = match how.strip_prefix("fail:") {
            Some(message) => ImagePull {
                failure: Some(message.to_string()),
                ..Default::default()
            },
            None => ImagePull {
                delay: Some(super::parse_duration(how).ok_or_else(|| {
                    format!("invalid duration {how:?} in {value:?} (e.g. 50ms, 2s)")
                })?),
                ..Default::default()
            },
        };
        Ok((image.to_string(), pull))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_unresolvable_registries_fail_by_default() {
        for image in [
            "invalid.registry.k8s.io/invalid/alpine:3.1",
            "registry.example.invalid/app:1",
            "invalid.example.com:5000/app",
        ] {
            let failure = ImagePulls::default().of(image).failure;
            assert!(
                failure.is_some_and(|m| m.contains("no such host")),
                "{image}"
            );
        }
        for image in [
            "nginx:1.25",
            "invalid/app:1",
            "localhost:5000/invalid",
            "invalid:1",
        ] {
            assert_eq!(ImagePulls::default().of(image).failure, None, "{image}");
        }
        // Configured behaviour wins.
        let pulls = ImagePulls::default().delay("invalid.registry.k8s.io/x:1", Duration::ZERO);
        assert_eq!(pulls.of("invalid.registry.k8s.io/x:1").failure, None);
    }

    #[test]
    fn names_and_matching() {
        let i = NodeImage::of("nginx:1.25");
        assert_eq!(i.repo_tag, "docker.io/library/nginx:1.25");
        assert!(i.repo_digest.starts_with("docker.io/library/nginx@sha256:"));
        assert!(i.id.starts_with("sha256:") && i.id.len() == 71);
        assert!(i.matches("nginx:1.25"));
        assert!(i.matches("docker.io/library/nginx:1.25"));
        assert!(i.matches(&i.id));
        assert!(i.matches(&i.repo_digest));
        assert!(!i.matches("nginx:1.26"));
        assert_eq!(
            NodeImage::of("busybox").repo_tag,
            "docker.io/library/busybox:latest"
        );
    }

    #[test]
    fn pull_policy() {
        let mut s = ImageStore::default();
        let c = json!({"image": "nginx:1.25"});
        assert!(s.needs_pull("n", &c));
        s.add("n", "nginx:1.25");
        assert!(!s.needs_pull("n", &c));
        assert!(s.needs_pull("other", &c));
        assert!(s.needs_pull(
            "n",
            &json!({"image": "nginx:1.25", "imagePullPolicy": "Always"})
        ));
        assert!(!s.needs_pull("n", &json!({"image": "x:1", "imagePullPolicy": "Never"})));
        s.add("n", "busybox");
        assert!(
            s.needs_pull("n", &json!({"image": "busybox"})),
            "latest is always pulled"
        );
        assert!(s.remove("n", "nginx:1.25"));
        assert!(!s.remove("n", "nginx:1.25"));
        assert_eq!(s.list("n").len(), 1);
    }

    #[test]
    fn per_image_pulls_match_names_as_containerd_does() {
        let pulls = ImagePulls::default()
            .delay("nginx:1.25", Duration::from_secs(2))
            .fail("registry:5000/app:v1", "not found")
            .delay("registry:5000/app:v1", Duration::from_millis(10));
        assert_eq!(
            pulls.of("docker.io/library/nginx:1.25").delay,
            Some(Duration::from_secs(2))
        );
        assert_eq!(pulls.of("nginx:1.26"), ImagePull::default());
        let app = pulls.of("registry:5000/app:v1");
        assert_eq!(app.delay, Some(Duration::from_millis(10)));
        assert_eq!(app.failure.as_deref(), Some("not found"));
    }

    #[test]
    fn image_pull_flags() {
        let pulls = [
            "nginx:1.25=1.5s",
            "bad:1=fail:manifest unknown: x=y",
            "bad:1=3s",
        ]
        .iter()
        .map(|f| ImagePull::parse_flag(f).unwrap())
        .fold(ImagePulls::default(), |p, (image, pull)| {
            p.with(&image, pull)
        });
        assert_eq!(
            pulls.of("nginx:1.25").delay,
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            pulls.of("bad:1").failure.as_deref(),
            Some("manifest unknown: x=y"),
            "an image reference holds no '=', a message may"
        );
        assert_eq!(pulls.of("bad:1").delay, Some(Duration::from_secs(3)));
        assert!(ImagePull::parse_flag("nginx").is_err());
        assert!(ImagePull::parse_flag("=2s").is_err());
        assert!(ImagePull::parse_flag("nginx:1=soon").is_err());
    }
}
