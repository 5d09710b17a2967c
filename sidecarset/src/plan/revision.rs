//! SidecarSet ControllerRevisions (OpenKruise's `sidecarcontrol/history_control.go`), pure:
//!
//! * [`revision_data`] builds `{"spec":{"$patch":"replace","containers":…,"imagePullSecrets":…,
//!   "initContainers":…,"patchPodMetadata":…,"volumes":…}}` with Go's encoding artefacts, so
//!   the revision hash (FNV-1 over the Go-marshalled bytes) equals OpenKruise's where the hash
//!   input does (see [`crate::api::hash`]);
//! * [`new_revision`]: the ControllerRevision for the current spec (labels: the SidecarSet's,
//!   `kruise.io/sidecarset-name`, the custom version; annotations: all of the SidecarSet's);
//! * [`revisions_to_delete`]: the history truncation;
//! * [`find_revision`] / [`restore_from_revision`]: what `injectionStrategy.revision` injects;
//!   [`ControllerRevisionHistory`] serves them to the injector.
//!
//! Restoring applies the revision data as OpenKruise's strategic merge does: because the data
//! carries `$patch: replace` on `spec`, the restored spec holds only the five recorded fields
//! (selector, strategies etc. are empty) — the injector only reads those.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kruise_compat::gojson::to_go_json;
use kruise_compat::pod_defaults::go_encoded_volumes;
use kruise_core::revision::{
    NewRevision, controller_owner_ref, new_controller_revision, sort_revisions,
};
use kube::ResourceExt as _;
use serde_json::{Map, Value, json};

use crate::api::hash::{HashError, go_sidecar_containers_json};
use crate::api::v1beta1::{SidecarSet, SidecarSetSpec};
use crate::api::{
    GROUP, KIND, SIDECARSET_CUSTOM_VERSION_LABEL, SIDECARSET_HASH_ANNOTATION,
    SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION, SIDECARSET_NAME_LABEL, SidecarSetInjectRevision,
    V1BETA1, defaults::set_hash_annotations,
};
use crate::inject::RevisionHistory;

/// Why a revision could not be built, found or restored.
#[derive(Debug, thiserror::Error)]
pub enum RevisionError {
    /// Hashing or encoding failed.
    #[error(transparent)]
    Hash(#[from] HashError),
    /// The revision data does not decode as a SidecarSet spec.
    #[error("decoding ControllerRevision {name} data: {source}")]
    Decode {
        /// The revision.
        name: String,
        /// The decoder's error.
        source: serde_json::Error,
    },
    /// No revision with that name, or none with that custom version.
    #[error("controllerrevisions.apps \"{0}\" not found")]
    NotFound(String),
}

fn to_value_or_null<T: serde::Serialize>(items: &[T]) -> Result<Value, HashError> {
    if items.is_empty() {
        // Go marshals a nil slice as null, and OpenKruise copies it into the data as such.
        return Ok(Value::Null);
    }
    Ok(serde_json::to_value(items)?)
}

/// The revision data of a SidecarSet.
pub fn revision_data(set: &SidecarSet) -> Result<Value, HashError> {
    let spec = &set.spec;
    let containers: Value =
        serde_json::from_str(&go_sidecar_containers_json(&spec.containers, false)?)?;
    let init_containers: Value =
        serde_json::from_str(&go_sidecar_containers_json(&spec.init_containers, false)?)?;
    let mut inner = Map::new();
    inner.insert("$patch".into(), "replace".into());
    inner.insert("containers".into(), containers);
    inner.insert(
        "imagePullSecrets".into(),
        to_value_or_null(&spec.image_pull_secrets)?,
    );
    inner.insert("initContainers".into(), init_containers);
    inner.insert(
        "patchPodMetadata".into(),
        to_value_or_null(&spec.patch_pod_metadata)?,
    );
    inner.insert(
        "volumes".into(),
        go_encoded_volumes(&to_value_or_null(&spec.volumes)?),
    );
    Ok(json!({ "spec": Value::Object(inner) }))
}

/// The data bytes as Go writes them (sorted keys, Go escaping).
pub fn revision_data_raw(set: &SidecarSet) -> Result<String, HashError> {
    Ok(to_go_json(&revision_data(set)?))
}

/// The ControllerRevision for the SidecarSet's current spec, in `namespace` (the kruise
/// namespace), numbered `revision`.
pub fn new_revision(
    set: &SidecarSet,
    namespace: &str,
    revision: i64,
    collision_count: Option<i32>,
) -> Result<ControllerRevision, HashError> {
    let name = set.metadata.name.clone().unwrap_or_default();
    let mut labels = set.metadata.labels.clone().unwrap_or_default();
    if !set.spec.custom_version.is_empty() {
        labels.insert(
            SIDECARSET_CUSTOM_VERSION_LABEL.into(),
            set.spec.custom_version.clone(),
        );
    }
    labels.insert(SIDECARSET_NAME_LABEL.into(), name.clone());
    let owner = controller_owner_ref(
        &format!("{GROUP}/{V1BETA1}"),
        KIND,
        &name,
        set.metadata.uid.as_deref().unwrap_or(""),
    );
    Ok(new_controller_revision(&NewRevision {
        parent_name: name,
        namespace: Some(namespace.to_string()),
        owner: Some(owner),
        labels,
        annotations: set.metadata.annotations.clone().unwrap_or_default(),
        data: revision_data(set)?,
        revision,
        collision_count,
        hash_override: None,
        hash_label: None,
    }))
}

/// The revision `info` names among `revisions` (all in the kruise namespace): by name, or the
/// newest (by `.revision`) of this SidecarSet carrying the custom version.
pub fn find_revision<'a>(
    set: &SidecarSet,
    info: &SidecarSetInjectRevision,
    revisions: &'a [ControllerRevision],
) -> Result<Option<&'a ControllerRevision>, RevisionError> {
    if let Some(name) = &info.revision_name {
        return revisions
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name.as_str()))
            .map(Some)
            .ok_or_else(|| RevisionError::NotFound(name.clone()));
    }
    let Some(custom) = &info.custom_version else {
        return Ok(None);
    };
    let set_name = set.metadata.name.as_deref().unwrap_or("");
    let mut mine: Vec<ControllerRevision> = revisions
        .iter()
        .filter(|r| {
            let labels = r.metadata.labels.as_ref();
            labels
                .and_then(|l| l.get(SIDECARSET_NAME_LABEL))
                .map(String::as_str)
                == Some(set_name)
                && labels.and_then(|l| l.get(SIDECARSET_CUSTOM_VERSION_LABEL)) == Some(custom)
        })
        .cloned()
        .collect();
    sort_revisions(&mut mine);
    let newest = mine
        .last()
        .and_then(|n| n.metadata.name.clone())
        .ok_or_else(|| RevisionError::NotFound(set_name.to_string()))?;
    Ok(revisions
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(newest.as_str())))
}

/// The SidecarSet as `revision` recorded it: spec replaced by the recorded fields, hash
/// annotations from the revision (or recomputed), `status.latestRevision` = revision name.
pub fn restore_from_revision(
    set: &SidecarSet,
    revision: &ControllerRevision,
) -> Result<SidecarSet, RevisionError> {
    let name = revision.metadata.name.clone().unwrap_or_default();
    let data = revision
        .data
        .as_ref()
        .map(|RawExtension(v)| v.clone())
        .unwrap_or(Value::Null);
    let mut spec_value = data.get("spec").cloned().unwrap_or_else(|| json!({}));
    if let Some(obj) = spec_value.as_object_mut() {
        obj.remove("$patch");
        obj.retain(|_, v| !v.is_null());
    }
    let spec: SidecarSetSpec =
        serde_json::from_value(spec_value).map_err(|source| RevisionError::Decode {
            name: name.clone(),
            source,
        })?;
    let mut restored = set.clone();
    restored.spec = spec;
    let annotations = restored.metadata.annotations.get_or_insert_default();
    set_hash_annotations(
        annotations,
        &restored.spec.containers,
        &restored.spec.init_containers,
    )?;
    let rev_annotations = revision.metadata.annotations.clone().unwrap_or_default();
    for key in [
        SIDECARSET_HASH_ANNOTATION,
        SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION,
    ] {
        if let Some(v) = rev_annotations.get(key).filter(|v| !v.is_empty()) {
            annotations.insert(key.to_string(), v.clone());
        }
    }
    restored.status.get_or_insert_default().latest_revision = name;
    Ok(restored)
}

/// [`RevisionHistory`] over a list of ControllerRevisions (the kruise namespace's).
#[derive(Clone, Debug, Default)]
pub struct ControllerRevisionHistory {
    /// The revisions.
    pub revisions: Vec<ControllerRevision>,
}

impl RevisionHistory for ControllerRevisionHistory {
    fn history_sidecar_set(
        &self,
        sidecar_set: &SidecarSet,
        revision: &SidecarSetInjectRevision,
    ) -> Result<Option<SidecarSet>, String> {
        let found =
            find_revision(sidecar_set, revision, &self.revisions).map_err(|e| e.to_string())?;
        found
            .map(|r| restore_from_revision(sidecar_set, r))
            .transpose()
            .map_err(|e| e.to_string())
    }
}

/// The revisions `pods` were injected or upgraded from by the SidecarSet `set_name`
/// (their `kruise.io/sidecarset-hash` entries).
pub fn revisions_in_use<'a>(
    pods: impl IntoIterator<Item = &'a k8s_openapi::api::core::v1::Pod>,
    set_name: &str,
) -> BTreeSet<String> {
    pods.into_iter()
        .filter_map(|p| {
            let v = p
                .metadata
                .annotations
                .as_ref()?
                .get(SIDECARSET_HASH_ANNOTATION)?;
            let mut m = crate::inject::parse_hash_annotation(SIDECARSET_HASH_ANNOTATION, v).ok()?;
            m.remove(set_name)
                .map(|s| s.controller_revision)
                .filter(|r| !r.is_empty())
        })
        .collect()
}

/// Default `revisionHistoryLimit`.
const DEFAULT_HISTORY_LIMIT: i32 = 10;

/// OpenKruise's `truncateHistory`: beyond `revisionHistoryLimit` (default 10, at least 1),
/// delete the oldest revisions no pod uses and injection does not name; never the newest.
pub fn revisions_to_delete(
    set: &SidecarSet,
    sorted: &[ControllerRevision],
    used_by_pods: &BTreeSet<String>,
) -> Vec<String> {
    let limit = usize::try_from(
        set.spec
            .revision_history_limit
            .unwrap_or(DEFAULT_HISTORY_LIMIT)
            .max(1),
    )
    .unwrap_or(1);
    if sorted.len() <= limit {
        return Vec::new();
    }
    let mut active = used_by_pods.clone();
    if let Some(info) = &set.spec.injection_strategy.revision {
        if let Some(name) = &info.revision_name {
            active.insert(name.clone());
        }
        if let Some(custom) = &info.custom_version
            && let Some(newest) = sorted
                .iter()
                .filter(|r| r.labels().get(SIDECARSET_CUSTOM_VERSION_LABEL) == Some(custom))
                .max_by_key(|r| r.revision)
        {
            active.insert(newest.name_any());
        }
    }
    let mut to_delete = sorted.len() - limit;
    let mut out = Vec::new();
    for r in &sorted[..sorted.len() - 1] {
        if to_delete == 0 {
            break;
        }
        let name = r.name_any();
        if !active.contains(&name) {
            out.push(name);
            to_delete -= 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::defaults::default_v1beta1;
    use crate::inject::{InjectInput, inject};
    use k8s_openapi::api::core::v1::Pod;

    fn set(image: &str, custom: &str) -> SidecarSet {
        let mut s: SidecarSet = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
            "metadata": {"name": "test-sidecarset", "uid": "u-1", "labels": {"team": "a"}},
            "spec": {"selector": {"matchLabels": {"app": "nginx"}}, "customVersion": custom,
                     "containers": [{"name": "sidecar1", "image": image}],
                     "volumes": [{"name": "v", "emptyDir": {}}]}
        }))
        .unwrap();
        default_v1beta1(&mut s).unwrap();
        s
    }

    #[test]
    fn data_has_go_shape_and_revision_labels() {
        let s = set("nginx:1", "v1");
        let raw = revision_data_raw(&s).unwrap();
        assert!(raw.starts_with(r#"{"spec":{"$patch":"replace","containers":[{"image":"nginx:1","imagePullPolicy":"IfNotPresent","name":"sidecar1","podInjectPolicy":"BeforeAppContainer","resources":{},"#));
        assert!(raw.ends_with(r#""imagePullSecrets":null,"initContainers":null,"patchPodMetadata":null,"volumes":[{"emptyDir":{},"name":"v"}]}}"#));
        let cr = new_revision(&s, "kruise-system", 1, Some(0)).unwrap();
        let labels = cr.metadata.labels.clone().unwrap();
        assert_eq!(labels[SIDECARSET_NAME_LABEL], "test-sidecarset");
        assert_eq!(labels[SIDECARSET_CUSTOM_VERSION_LABEL], "v1");
        assert_eq!(labels["team"], "a");
        assert!(cr.metadata.name.unwrap().starts_with("test-sidecarset-"));
        assert_eq!(cr.metadata.namespace.as_deref(), Some("kruise-system"));
        let ann = cr.metadata.annotations.unwrap();
        assert_eq!(
            ann[SIDECARSET_HASH_ANNOTATION],
            s.metadata.annotations.as_ref().unwrap()[SIDECARSET_HASH_ANNOTATION]
        );
        let owner = &cr.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("SidecarSet", "u-1")
        );
    }

    #[test]
    fn restore_and_inject_a_custom_version() {
        let old = set("nginx:1", "v1");
        let mut r1 = new_revision(&old, "kruise-system", 1, Some(0)).unwrap();
        r1.metadata.name = Some("rev-1".into());
        let mut current = set("nginx:2", "v2");
        let r2 = new_revision(&current, "kruise-system", 2, Some(0)).unwrap();
        current.spec.injection_strategy.revision = Some(SidecarSetInjectRevision {
            custom_version: Some("v1".into()),
            ..Default::default()
        });
        let history = ControllerRevisionHistory {
            revisions: vec![r2, r1.clone()],
        };
        let restored = history
            .history_sidecar_set(
                &current,
                current.spec.injection_strategy.revision.as_ref().unwrap(),
            )
            .unwrap()
            .unwrap();
        assert_eq!(
            restored.spec.containers[0].container.image.as_deref(),
            Some("nginx:1")
        );
        assert_eq!(restored.status.as_ref().unwrap().latest_revision, "rev-1");
        assert_eq!(
            restored.metadata.annotations.as_ref().unwrap()[SIDECARSET_HASH_ANNOTATION],
            old.metadata.annotations.as_ref().unwrap()[SIDECARSET_HASH_ANNOTATION]
        );
        // The pod gets the old image and the revision name in its hash annotation.
        let pod: Pod = serde_json::from_value(
            json!({"metadata": {"name": "p", "namespace": "default", "labels": {"app": "nginx"}},
            "spec": {"containers": [{"name": "main", "image": "x"}]}}),
        )
        .unwrap();
        let out = inject(&InjectInput {
            pod: &pod,
            namespace_labels: None,
            sidecar_sets: std::slice::from_ref(&current),
            now: jiff::Timestamp::UNIX_EPOCH,
            random: 0.0,
            history: &history,
            sort_sidecar_containers_by_name: false,
        })
        .unwrap();
        let spec = out.pod.spec.unwrap();
        assert_eq!(spec.containers[0].image.as_deref(), Some("nginx:1"));
        let ann = out.pod.metadata.annotations.unwrap();
        assert!(ann[SIDECARSET_HASH_ANNOTATION].contains(r#""controllerRevision":"rev-1""#));
        // Unknown names are errors, as OpenKruise's Get fails.
        let missing = SidecarSetInjectRevision {
            revision_name: Some("nope".into()),
            ..Default::default()
        };
        assert!(history.history_sidecar_set(&current, &missing).is_err());
        let missing = SidecarSetInjectRevision {
            custom_version: Some("v9".into()),
            ..Default::default()
        };
        assert!(history.history_sidecar_set(&current, &missing).is_err());
    }
}
