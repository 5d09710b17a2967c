//! Which ImagePullJobs a NodeImage change concerns (K#2381), as OpenKruise's NodeImage
//! event handler maps them: a job is woken when its image's tag changed on the NodeImage
//! (the tag's spec or the agent's answer), or the image itself did (its pull secrets or
//! sandbox config, or it was added or removed). A NodeImage seen for the first time, gone,
//! being deleted or relabelled concerns every job (any job may select its node; OpenKruise
//! ignores a relabelling, which a job selecting nodes by label would then miss).

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{DefaultHasher, Hash as _, Hasher as _};

use crate::api::v1beta1::NodeImage;

/// What of one image of a NodeImage the jobs read, hashed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct ImagePrint {
    /// Pull secrets and sandbox config.
    image: u64,
    /// Per tag: its spec and the agent's answer.
    tags: BTreeMap<String, u64>,
}

/// A NodeImage reduced to what decides which jobs its changes concern.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fingerprint {
    /// Labels and whether it is being deleted: what decides which jobs select it.
    node: u64,
    images: BTreeMap<String, ImagePrint>,
}

fn hash_json<T: serde::Serialize>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    serde_json::to_string(value)
        .unwrap_or_default()
        .hash(&mut h);
    h.finish()
}

/// The fingerprint of `node_image`.
pub fn fingerprint(node_image: &NodeImage) -> Fingerprint {
    let statuses = node_image.status.as_ref().map(|s| &s.image_statuses);
    let mut images: BTreeMap<String, ImagePrint> = BTreeMap::new();
    for (name, spec) in &node_image.spec.images {
        let print = images.entry(name.clone()).or_default();
        print.image = hash_json(&(&spec.pull_secrets, &spec.sandbox_config));
        for tag in &spec.tags {
            print.tags.insert(tag.tag.clone(), hash_json(tag));
        }
    }
    for (name, status) in statuses.into_iter().flatten() {
        let print = images.entry(name.clone()).or_default();
        for answer in &status.tags {
            let spec_hash = print.tags.get(&answer.tag).copied().unwrap_or(0);
            print
                .tags
                .insert(answer.tag.clone(), hash_json(&(spec_hash, answer)));
        }
    }
    let node = hash_json(&(
        &node_image.metadata.labels,
        node_image.metadata.deletion_timestamp.is_some(),
    ));
    Fingerprint { node, images }
}

/// What changed between two fingerprints of one NodeImage: per image, the tags that did,
/// or `None` when the image itself did (every tag concerned).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Changes(BTreeMap<String, Option<BTreeSet<String>>>);

/// The changes from `old` to `new`; `None` when every job is concerned (relabelled, or
/// being deleted).
pub fn changes(old: &Fingerprint, new: &Fingerprint) -> Option<Changes> {
    if old.node != new.node {
        return None;
    }
    let mut out = BTreeMap::new();
    let names: BTreeSet<&String> = old.images.keys().chain(new.images.keys()).collect();
    for name in names {
        match (old.images.get(name), new.images.get(name)) {
            (Some(a), Some(b)) if a == b => {}
            (Some(a), Some(b)) if a.image == b.image => {
                let tags: BTreeSet<String> = a
                    .tags
                    .keys()
                    .chain(b.tags.keys())
                    .filter(|t| a.tags.get(*t) != b.tags.get(*t))
                    .cloned()
                    .collect();
                out.insert(name.clone(), Some(tags));
            }
            _ => {
                out.insert(name.clone(), None);
            }
        }
    }
    Some(Changes(out))
}

impl Changes {
    /// Whether a job pulling `image` (the NodeImage's key) at `tag` is concerned.
    pub fn concern(&self, image: &str, tag: &str) -> bool {
        match self.0.get(image) {
            Some(None) => true,
            Some(Some(tags)) => tags.contains(tag),
            None => false,
        }
    }

    /// Whether nothing a job reads changed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn tag(tag: &str, version: i64) -> Value {
        json!({"tag": tag, "version": version, "createdAt": "2026-01-01T00:00:00Z",
               "pullPolicy": {"ttlSecondsAfterFinished": 300}})
    }

    fn node_image(spec: Value, status: Value) -> NodeImage {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "NodeImage",
            "metadata": {"name": "n"}, "spec": {"images": spec}, "status": status,
        }))
        .unwrap()
    }

    fn base() -> NodeImage {
        node_image(
            json!({"nginx": {"tags": [tag("1.25", 1), tag("1.26", 1)]}, "redis": {"tags": [tag("7", 1)]}}),
            json!({"imageStatuses": {"nginx": {"tags": [{"tag": "1.25", "version": 1, "phase": "Pulling"}]}}}),
        )
    }

    fn concerned(after: &NodeImage) -> Vec<(&'static str, &'static str)> {
        let c = changes(&fingerprint(&base()), &fingerprint(after)).unwrap();
        [
            ("nginx", "1.25"),
            ("nginx", "1.26"),
            ("redis", "7"),
            ("busybox", "1"),
        ]
        .into_iter()
        .filter(|(i, t)| c.concern(i, t))
        .collect()
    }

    #[test]
    fn a_change_concerns_only_the_jobs_of_what_changed() {
        // (what, the NodeImage after the change, the (image, tag) jobs woken)
        type Case = (&'static str, NodeImage, Vec<(&'static str, &'static str)>);
        let cases: Vec<Case> = vec![
            ("unchanged", base(), vec![]),
            (
                "an answer for one tag",
                node_image(
                    json!({"nginx": {"tags": [tag("1.25", 1), tag("1.26", 1)]}, "redis": {"tags": [tag("7", 1)]}}),
                    json!({"imageStatuses": {"nginx": {"tags": [{"tag": "1.25", "version": 1, "phase": "Succeeded"}]}}}),
                ),
                vec![("nginx", "1.25")],
            ),
            (
                "one tag pruned (its TTL passed)",
                node_image(
                    json!({"nginx": {"tags": [tag("1.25", 1)]}, "redis": {"tags": [tag("7", 1)]}}),
                    json!({"imageStatuses": {"nginx": {"tags": [{"tag": "1.25", "version": 1, "phase": "Pulling"}]}}}),
                ),
                vec![("nginx", "1.26")],
            ),
            (
                "a new version of one tag",
                node_image(
                    json!({"nginx": {"tags": [tag("1.25", 1), tag("1.26", 1)]}, "redis": {"tags": [tag("7", 2)]}}),
                    json!({"imageStatuses": {"nginx": {"tags": [{"tag": "1.25", "version": 1, "phase": "Pulling"}]}}}),
                ),
                vec![("redis", "7")],
            ),
            (
                "an image's pull secrets",
                node_image(
                    json!({"nginx": {"tags": [tag("1.25", 1), tag("1.26", 1)],
                                     "pullSecrets": [{"namespace": "kruise-daemon-config", "name": "s"}]},
                           "redis": {"tags": [tag("7", 1)]}}),
                    json!({"imageStatuses": {"nginx": {"tags": [{"tag": "1.25", "version": 1, "phase": "Pulling"}]}}}),
                ),
                vec![("nginx", "1.25"), ("nginx", "1.26")],
            ),
            (
                "an image removed",
                node_image(
                    json!({"nginx": {"tags": [tag("1.25", 1), tag("1.26", 1)]}}),
                    json!({"imageStatuses": {"nginx": {"tags": [{"tag": "1.25", "version": 1, "phase": "Pulling"}]}}}),
                ),
                vec![("redis", "7")],
            ),
        ];
        for (what, after, want) in cases {
            assert_eq!(concerned(&after), want, "{what}");
        }
        assert!(
            changes(&fingerprint(&base()), &fingerprint(&base()))
                .unwrap()
                .is_empty()
        );
        let mut relabelled = base();
        relabelled.metadata.labels = Some([("pool".to_string(), "a".to_string())].into());
        assert_eq!(
            changes(&fingerprint(&base()), &fingerprint(&relabelled)),
            None,
            "every job may select a relabelled node"
        );
    }
}
