//! kube-controller-manager's Deployment controller (apps/v1), in its own terms: one
//! ReplicaSet per pod template (named `<deployment>-<pod-template-hash>`, the template and
//! selector labelled `pod-template-hash`), `RollingUpdate` within `maxSurge` /
//! `maxUnavailable` (unhealthy old pods cleaned first), `Recreate` (old pods gone before
//! new ones start), proportional scaling of a rollout in flight, `paused`, the revision
//! annotations `kubectl rollout history|undo` read, `revisionHistoryLimit`, and the status
//! and conditions `kubectl rollout status` waits on (Available, Progressing with its
//! deadline, ReplicaFailure). The ReplicaSet controller (`replicasets.rs`) makes the pods.
//! Not simulated: adoption and release of ReplicaSets by selector, the deprecated
//! `rollbackTo`.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::workloads::{Key, controller_manager, run_controller, typed, write_status};

fn opts() -> WriteOptions {
    controller_manager("deployment-controller")
}
use super::{EventSource, controller_of, record_event};
use crate::SimShared;
use crate::meta;
use crate::ops::{DeleteOptions, Subresource, WriteOptions};
use crate::registry::GroupResource;
use crate::store::{EventType, StoreEvent};

const SOURCE: EventSource<'static> = EventSource {
    component: "deployment-controller",
    host: None,
};

/// The label each ReplicaSet's template and selector carry.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
pub const ANN_REVISION: &str = "deployment.kubernetes.io/revision";
pub const ANN_REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
pub const ANN_DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
pub const ANN_MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";

/// The Deployment's annotations a ReplicaSet does not copy.
const NOT_COPIED: [&str; 6] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    ANN_REVISION,
    ANN_REVISION_HISTORY,
    ANN_DESIRED_REPLICAS,
    ANN_MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
];

/// An int-or-percent (`maxSurge: 25%`) against `total`, rounded up or down.
pub fn scaled_value(v: Option<&Value>, total: i64, round_up: bool) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(Value::String(s)) => {
            let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
            let scaled = pct * total;
            if round_up {
                (scaled + 99).div_euclid(100)
            } else {
                scaled.div_euclid(100)
            }
        }
        _ => 0,
    }
}

/// What the planners need of a ReplicaSet.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RsView {
    pub name: String,
    /// `spec.replicas`.
    pub replicas: i64,
    /// `status.availableReplicas`.
    pub available: i64,
    pub created: String,
    /// `deployment.kubernetes.io/max-replicas`.
    pub max_replicas: Option<i64>,
}

/// How far a rollout may go beyond and below `replicas`: (surge, unavailable), upstream's
/// `ResolveFenceposts` (surge rounded up, unavailable down, never both zero).
pub fn fenceposts(d: &Value) -> (i64, i64) {
    let replicas = int(d, "/spec/replicas");
    if d.pointer("/spec/strategy/type").and_then(Value::as_str) == Some("Recreate") {
        return (0, 0);
    }
    let ru = d.pointer("/spec/strategy/rollingUpdate");
    let surge = scaled_value(ru.and_then(|r| r.get("maxSurge")), replicas, true);
    let unavailable = scaled_value(ru.and_then(|r| r.get("maxUnavailable")), replicas, false);
    if surge == 0 && unavailable == 0 {
        return (0, 1);
    }
    (surge, unavailable)
}

/// Upstream's `MaxUnavailable`: the fencepost, none for Recreate or zero replicas, at most
/// `replicas`.
fn max_unavailable(d: &Value) -> i64 {
    let replicas = int(d, "/spec/replicas");
    if replicas == 0 || strategy(d) == "Recreate" {
        return 0;
    }
    fenceposts(d).1.min(replicas)
}

fn strategy(d: &Value) -> &str {
    d.pointer("/spec/strategy/type")
        .and_then(Value::as_str)
        .unwrap_or("RollingUpdate")
}

/// The new ReplicaSet's size for a rolling update: up to `replicas`, with every
/// ReplicaSet's pods within `replicas + surge` (upstream's `NewRSNewReplicas`).
pub fn rolling_new_replicas(replicas: i64, surge: i64, all: &[RsView], new: &RsView) -> i64 {
    let current: i64 = all.iter().map(|r| r.replicas).sum();
    let max_total = replicas + surge;
    if current >= max_total {
        return new.replicas;
    }
    new.replicas + (max_total - current).min(replicas - new.replicas).max(0)
}

/// The old ReplicaSets' new sizes for a rolling update (only those that change): first
/// their pods that are not available, then as many as keep `replicas - unavailable`
/// available, oldest ReplicaSet first (upstream's `reconcileOldReplicaSets`).
pub fn rolling_old_replicas(
    replicas: i64,
    unavailable: i64,
    new: &RsView,
    old: &[RsView],
) -> Vec<(String, i64)> {
    let old_count: i64 = old.iter().map(|r| r.replicas).sum();
    if old_count == 0 {
        return Vec::new();
    }
    let all_count = old_count + new.replicas;
    let min_available = replicas - unavailable;
    let new_unavailable = new.replicas - new.available;
    let max_scaled_down = all_count - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return Vec::new();
    }
    let mut sizes: Vec<RsView> = old.to_vec();
    sizes.sort_by(|a, b| a.created.cmp(&b.created).then(a.name.cmp(&b.name)));
    let mut cleaned = 0;
    for rs in &mut sizes {
        if cleaned >= max_scaled_down {
            break;
        }
        if rs.replicas == 0 || rs.replicas == rs.available {
            continue;
        }
        let down = (max_scaled_down - cleaned).min(rs.replicas - rs.available);
        rs.replicas -= down;
        cleaned += down;
    }
    let all_available: i64 = sizes.iter().map(|r| r.available).sum::<i64>() + new.available;
    if all_available > min_available {
        let total = all_available - min_available;
        let mut scaled = 0;
        for rs in &mut sizes {
            if scaled >= total {
                break;
            }
            if rs.replicas == 0 {
                continue;
            }
            let down = rs.replicas.min(total - scaled);
            rs.replicas -= down;
            scaled += down;
        }
    }
    let before: std::collections::HashMap<&str, i64> =
        old.iter().map(|r| (r.name.as_str(), r.replicas)).collect();
    sizes
        .into_iter()
        .filter(|r| before.get(r.name.as_str()) != Some(&r.replicas))
        .map(|r| (r.name, r.replicas))
        .collect()
}

/// Proportional scaling of a rollout in flight (`active`, the ReplicaSets with pods, the
/// new one first on ties): each takes its share of the change by the size it had at the
/// last scale (`max-replicas`), the rest goes to the largest (upstream's `scale`).
pub fn proportional(
    replicas: i64,
    surge: i64,
    previous_max: i64,
    active: &[RsView],
) -> Vec<(String, i64)> {
    let total: i64 = active.iter().map(|r| r.replicas).sum();
    let allowed = if replicas > 0 { replicas + surge } else { 0 };
    let to_add = allowed - total;
    let mut sorted: Vec<&RsView> = active.iter().collect();
    // Largest first; newer first when adding, older first when removing.
    sorted.sort_by(|a, b| {
        b.replicas.cmp(&a.replicas).then_with(|| {
            if to_add > 0 {
                b.created.cmp(&a.created)
            } else {
                a.created.cmp(&b.created)
            }
        })
    });
    let max_now = replicas + surge;
    let mut added = 0;
    let mut sizes: Vec<(String, i64)> = Vec::new();
    for rs in &sorted {
        let mut size = rs.replicas;
        if to_add != 0 && rs.replicas != 0 && to_add != added {
            let before = rs.max_replicas.filter(|m| *m > 0).unwrap_or(previous_max);
            let fraction = if replicas == 0 {
                -rs.replicas
            } else if before == 0 {
                0
            } else {
                ((rs.replicas * max_now) as f64 / before as f64).round() as i64 - rs.replicas
            };
            let allowed_left = to_add - added;
            let share = if to_add > 0 {
                fraction.min(allowed_left)
            } else {
                fraction.max(allowed_left)
            };
            size += share;
            added += share;
        }
        sizes.push((rs.name.clone(), size));
    }
    if let Some(first) = sizes.first_mut()
        && to_add != 0
    {
        first.1 = (first.1 + to_add - added).max(0);
    }
    sizes
}

fn int(v: &Value, ptr: &str) -> i64 {
    v.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    meta::metadata(obj)?.get("annotations")?.get(key)?.as_str()
}

fn revision(rs: &Value) -> i64 {
    annotation(rs, ANN_REVISION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn view(rs: &Value) -> RsView {
    RsView {
        name: meta::name_of(rs).to_string(),
        replicas: int(rs, "/spec/replicas"),
        available: int(rs, "/status/availableReplicas"),
        created: meta::meta_str(rs, "creationTimestamp").to_string(),
        max_replicas: annotation(rs, ANN_MAX_REPLICAS).and_then(|m| m.parse().ok()),
    }
}

/// The template without its `pod-template-hash` label, `null`s or an empty label map, to
/// compare a ReplicaSet's with the Deployment's as upstream's `EqualIgnoreHash` compares
/// Go objects (where `creationTimestamp: null`, which kubectl's rollback writes, is no
/// field at all).
fn template_without_hash(template: Option<&Value>) -> Value {
    fn strip_nulls(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.retain(|_, c| !c.is_null());
                m.values_mut().for_each(strip_nulls);
            }
            Value::Array(a) => a.iter_mut().for_each(strip_nulls),
            _ => {}
        }
    }
    let mut t = template.cloned().unwrap_or_else(|| json!({}));
    strip_nulls(&mut t);
    if let Some(m) = t.get_mut("metadata").and_then(Value::as_object_mut) {
        if let Some(labels) = m.get_mut("labels").and_then(Value::as_object_mut) {
            labels.remove(POD_TEMPLATE_HASH);
            if labels.is_empty() {
                m.remove("labels");
            }
        }
        if m.is_empty() {
            t.as_object_mut().map(|o| o.remove("metadata"));
        }
    }
    t
}

/// FNV-32a, the hash upstream's `ComputeHash` takes of the template.
fn fnv32a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// The `pod-template-hash` of `template` (upstream hashes the Go object; this hashes its
/// JSON, so the value is stable for a template but not upstream's number), encoded with
/// apimachinery's `SafeEncodeString` alphabet.
pub fn template_hash(template: &Value, collision_count: Option<i64>) -> String {
    let mut bytes = serde_json::to_vec(&template_without_hash(Some(template))).unwrap_or_default();
    if let Some(c) = collision_count {
        bytes.extend_from_slice(&(c as u32).to_le_bytes());
        bytes.extend_from_slice(&[0; 4]);
    }
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    fnv32a(&bytes)
        .to_string()
        .bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

/// A Deployment condition as upstream's `NewDeploymentCondition` makes it.
fn condition(ty: &str, status: &str, reason: &str, message: &str) -> Value {
    let now = meta::now_rfc3339();
    json!({"type": ty, "status": status, "reason": reason, "message": message,
        "lastUpdateTime": now, "lastTransitionTime": now})
}

fn get_condition<'a>(status: &'a Value, ty: &str) -> Option<&'a Value> {
    status
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
}

fn field<'a>(c: &'a Value, name: &str) -> &'a str {
    c.get(name).and_then(Value::as_str).unwrap_or("")
}

fn remove_condition(status: &mut Value, ty: &str) {
    if let Some(conds) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        conds.retain(|c| field(c, "type") != ty);
    }
}

/// Upstream's `SetDeploymentCondition`: nothing when status and reason are unchanged;
/// the transition time kept when only the reason changes; the condition goes last.
fn set_condition(status: &mut Value, mut cond: Value) {
    let ty = field(&cond, "type").to_string();
    if let Some(cur) = get_condition(status, &ty) {
        if field(cur, "status") == field(&cond, "status")
            && field(cur, "reason") == field(&cond, "reason")
        {
            return;
        }
        if field(cur, "status") == field(&cond, "status") {
            cond["lastTransitionTime"] = cur["lastTransitionTime"].clone();
        }
    }
    remove_condition(status, &ty);
    if !status.get("conditions").is_some_and(Value::is_array) {
        status["conditions"] = json!([]);
    }
    if let Some(conds) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        conds.push(cond);
    }
}

/// One Deployment's state for a sync: its ReplicaSets (the new one, if any, and the old,
/// oldest first) and the status being built.
struct Rollout<'a> {
    sh: &'a Arc<SimShared>,
    ns: String,
    d: Value,
    new: Option<Arc<Value>>,
    old: Vec<Arc<Value>>,
    status: Value,
    /// The status the Deployment had at the start of the sync.
    before: Value,
}

impl<'a> Rollout<'a> {
    fn load(sh: &'a Arc<SimShared>, d: Value) -> Self {
        let ns = meta::meta_str(&d, "namespace").to_string();
        let status = d.get("status").cloned().unwrap_or_else(|| json!({}));
        let mut r = Rollout {
            sh,
            ns,
            d,
            new: None,
            old: Vec::new(),
            before: status.clone(),
            status,
        };
        r.reload();
        r
    }

    /// Reads the Deployment's ReplicaSets again from the store.
    fn reload(&mut self) {
        let uid = meta::meta_str(&self.d, "uid");
        let (all, _) = self
            .sh
            .store
            .list(&GroupResource::new("apps", "replicasets"), Some(&self.ns));
        let mut owned: Vec<Arc<Value>> = all
            .into_iter()
            .filter(|rs| controller_of(rs).is_some_and(|r| r.uid == uid))
            .collect();
        owned.sort_by(|a, b| {
            meta::meta_str(a, "creationTimestamp")
                .cmp(meta::meta_str(b, "creationTimestamp"))
                .then_with(|| meta::name_of(a).cmp(meta::name_of(b)))
        });
        let want = template_without_hash(self.d.pointer("/spec/template"));
        let new_at = owned
            .iter()
            .position(|rs| template_without_hash(rs.pointer("/spec/template")) == want);
        self.new = new_at.map(|i| owned.remove(i));
        self.old = owned;
    }

    fn replicas(&self) -> i64 {
        int(&self.d, "/spec/replicas")
    }

    fn max_surge(&self) -> i64 {
        fenceposts(&self.d).0
    }

    fn name(&self) -> &str {
        meta::name_of(&self.d)
    }

    fn all(&self) -> impl Iterator<Item = &Arc<Value>> {
        self.old.iter().chain(self.new.iter())
    }

    /// Scales `rs` to `size` and records the desired/max annotations (upstream's
    /// `scaleReplicaSetAndRecordEvent`); returns whether the size changed.
    async fn scale(&mut self, rs: &str, size: i64) -> bool {
        let Some(def) = self.sh.resolve("apps", "v1", "replicasets") else {
            return false;
        };
        let desired = self.replicas().to_string();
        let max = (self.replicas() + self.max_surge()).to_string();
        let mut from = None;
        let res = self
            .sh
            .update_with(
                &def,
                "v1",
                &self.ns,
                rs,
                Subresource::Main,
                &opts(),
                |cur| {
                    let mut next = cur.clone();
                    from = Some(int(cur, "/spec/replicas"));
                    next["spec"]["replicas"] = json!(size);
                    if let Some(m) = meta::metadata_mut(&mut next) {
                        let anns = m.entry("annotations").or_insert_with(|| json!({}));
                        anns[ANN_DESIRED_REPLICAS] = json!(desired);
                        anns[ANN_MAX_REPLICAS] = json!(max);
                    }
                    Ok(next)
                },
            )
            .await;
        let (Ok(_), Some(from)) = (res, from) else {
            return false;
        };
        if from == size {
            return false;
        }
        let direction = if size > from { "up" } else { "down" };
        let msg = format!("Scaled {direction} replica set {rs} from {from} to {size}");
        record_event(
            self.sh,
            SOURCE,
            &typed(&self.d, "apps/v1", "Deployment"),
            "Normal",
            "ScalingReplicaSet",
            &msg,
        )
        .await;
        self.reload();
        true
    }

    /// Scales `rs` only when its size or its desired/max annotations are behind.
    async fn scale_if_needed(&mut self, rs: &Value, size: i64) -> bool {
        let current_max = (self.replicas() + self.max_surge()).to_string();
        let behind = int(rs, "/spec/replicas") != size
            || annotation(rs, ANN_DESIRED_REPLICAS) != Some(&self.replicas().to_string())
            || annotation(rs, ANN_MAX_REPLICAS) != Some(&current_max);
        behind && self.scale(meta::name_of(rs), size).await
    }

    /// The new ReplicaSet's revision annotations and minReadySeconds, and the Deployment's
    /// revision annotation; creates the ReplicaSet when `create` and there is none.
    async fn sync_new(&mut self, create: bool) {
        let max_old = self.old.iter().map(|rs| revision(rs)).max().unwrap_or(0);
        let next_revision = (max_old + 1).to_string();
        let Some(rs_def) = self.sh.resolve("apps", "v1", "replicasets") else {
            return;
        };
        if let Some(new) = self.new.clone() {
            let copied = self.copied_annotations();
            let min_ready = self.d.pointer("/spec/minReadySeconds").cloned();
            let stale = int(&new, "/spec/minReadySeconds") != int(&self.d, "/spec/minReadySeconds")
                || revision(&new) < max_old + 1
                || copied
                    .iter()
                    .any(|(k, v)| annotation(&new, k) != v.as_str());
            if stale {
                let res = self
                    .sh
                    .update_with(
                        &rs_def,
                        "v1",
                        &self.ns,
                        meta::name_of(&new),
                        Subresource::Main,
                        &opts(),
                        |cur| {
                            let mut next = cur.clone();
                            match &min_ready {
                                Some(v) => next["spec"]["minReadySeconds"] = v.clone(),
                                None => {
                                    next["spec"]
                                        .as_object_mut()
                                        .map(|s| s.remove("minReadySeconds"));
                                }
                            }
                            if let Some(m) = meta::metadata_mut(&mut next) {
                                let anns = m.entry("annotations").or_insert_with(|| json!({}));
                                for (k, v) in &copied {
                                    anns[k.as_str()] = v.clone();
                                }
                                let old_rev = anns
                                    .get(ANN_REVISION)
                                    .and_then(Value::as_str)
                                    .map(str::to_string);
                                let old_num: i64 =
                                    old_rev.as_deref().and_then(|r| r.parse().ok()).unwrap_or(0);
                                if old_num < max_old + 1 {
                                    anns[ANN_REVISION] = json!(next_revision);
                                    // A ReplicaSet brought back (a rollback) keeps its earlier revisions.
                                    if let Some(r) = old_rev.filter(|r| !r.is_empty()) {
                                        let history = match anns
                                            .get(ANN_REVISION_HISTORY)
                                            .and_then(Value::as_str)
                                        {
                                            Some(h) if !h.is_empty() => format!("{h},{r}"),
                                            _ => r,
                                        };
                                        anns[ANN_REVISION_HISTORY] = json!(history);
                                    }
                                }
                            }
                            Ok(next)
                        },
                    )
                    .await;
                if res.is_ok() {
                    self.reload();
                }
            }
            if get_condition(&self.status, "Progressing").is_none() {
                let msg = format!("Found new replica set \"{}\"", meta::name_of(&new));
                set_condition(
                    &mut self.status,
                    condition("Progressing", "True", "FoundNewReplicaSet", &msg),
                );
            }
        } else if create {
            self.create_new(&next_revision).await;
        }
        if let Some(new) = &self.new {
            let rev = annotation(new, ANN_REVISION).unwrap_or("").to_string();
            self.set_deployment_revision(&rev).await;
        }
    }

    fn copied_annotations(&self) -> Vec<(String, Value)> {
        meta::metadata(&self.d)
            .and_then(|m| m.get("annotations"))
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(k, _)| !NOT_COPIED.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    async fn create_new(&mut self, revision: &str) {
        let Some(rs_def) = self.sh.resolve("apps", "v1", "replicasets") else {
            return;
        };
        let collisions = self.status.get("collisionCount").and_then(Value::as_i64);
        let mut template = self
            .d
            .pointer("/spec/template")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let hash = template_hash(&template, collisions);
        template["metadata"]["labels"][POD_TEMPLATE_HASH] = json!(hash);
        let mut selector = self
            .d
            .pointer("/spec/selector")
            .cloned()
            .unwrap_or_else(|| json!({}));
        selector["matchLabels"][POD_TEMPLATE_HASH] = json!(hash);
        let name = format!("{}-{hash}", self.name());
        let replicas = if strategy(&self.d) == "Recreate" {
            self.replicas()
        } else {
            let views: Vec<RsView> = self.old.iter().map(|r| view(r)).collect();
            let fresh = RsView::default();
            rolling_new_replicas(self.replicas(), self.max_surge(), &views, &fresh)
        };
        let mut annotations: Map<String, Value> = self.copied_annotations().into_iter().collect();
        annotations.insert(ANN_REVISION.into(), json!(revision));
        annotations.insert(
            ANN_DESIRED_REPLICAS.into(),
            json!(self.replicas().to_string()),
        );
        annotations.insert(
            ANN_MAX_REPLICAS.into(),
            json!((self.replicas() + self.max_surge()).to_string()),
        );
        let mut spec =
            json!({"replicas": replicas, "selector": selector, "template": template.clone()});
        if let Some(m) = self.d.pointer("/spec/minReadySeconds") {
            spec["minReadySeconds"] = m.clone();
        }
        let body = json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {
                "name": name, "namespace": self.ns,
                "labels": template["metadata"]["labels"].clone(),
                "annotations": annotations,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                    "name": self.name(), "uid": meta::meta_str(&self.d, "uid"),
                    "controller": true, "blockOwnerDeletion": true}],
            },
            "spec": spec,
        });
        let involved = typed(&self.d, "apps/v1", "Deployment");
        match self.sh.create(&rs_def, "v1", &self.ns, body, &opts()).await {
            Ok(rs) => {
                if replicas > 0 {
                    let msg = format!("Scaled up replica set {name} from 0 to {replicas}");
                    record_event(
                        self.sh,
                        SOURCE,
                        &involved,
                        "Normal",
                        "ScalingReplicaSet",
                        &msg,
                    )
                    .await;
                }
                let msg = format!("Created new replica set \"{}\"", meta::name_of(&rs));
                set_condition(
                    &mut self.status,
                    condition("Progressing", "True", "NewReplicaSetCreated", &msg),
                );
                self.reload();
            }
            Err(e) if e.code == 409 => {
                // A ReplicaSet of that name with another template: a hash collision; the
                // next sync tries the next name.
                let n = self
                    .status
                    .get("collisionCount")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                self.status["collisionCount"] = json!(n + 1);
            }
            Err(e) => {
                let msg = format!("Failed to create new replica set \"{name}\": {}", e.message);
                set_condition(
                    &mut self.status,
                    condition("Progressing", "False", "ReplicaSetCreateError", &msg),
                );
                record_event(
                    self.sh,
                    SOURCE,
                    &involved,
                    "Warning",
                    "ReplicaSetCreateError",
                    &msg,
                )
                .await;
            }
        }
    }

    async fn set_deployment_revision(&mut self, revision: &str) {
        if revision.is_empty() || annotation(&self.d, ANN_REVISION) == Some(revision) {
            return;
        }
        let Some(def) = self.sh.resolve("apps", "v1", "deployments") else {
            return;
        };
        let name = self.name().to_string();
        let res = self
            .sh
            .update_with(
                &def,
                "v1",
                &self.ns,
                &name,
                Subresource::Main,
                &opts(),
                |cur| {
                    let mut next = cur.clone();
                    if let Some(m) = meta::metadata_mut(&mut next) {
                        let anns = m.entry("annotations").or_insert_with(|| json!({}));
                        anns[ANN_REVISION] = json!(revision);
                    }
                    Ok(next)
                },
            )
            .await;
        if let Ok(d) = res {
            self.d = (*d).clone();
        }
    }

    /// Upstream's `scale`: a scaling event, or any change while paused.
    async fn scale_to_spec(&mut self) {
        let replicas = self.replicas();
        let active: Vec<Arc<Value>> = self
            .all()
            .filter(|rs| int(rs, "/spec/replicas") > 0)
            .cloned()
            .collect();
        let single = match active.as_slice() {
            [] => self.new.clone().or_else(|| self.old.last().cloned()),
            [one] => Some(one.clone()),
            _ => None,
        };
        if let Some(rs) = single {
            self.scale_if_needed(&rs, replicas).await;
            return;
        }
        let saturated = self.new.as_ref().is_some_and(|n| {
            int(n, "/spec/replicas") == replicas
                && annotation(n, ANN_DESIRED_REPLICAS) == Some(&replicas.to_string())
                && int(n, "/status/availableReplicas") == replicas
        });
        if saturated {
            for rs in self.old.clone() {
                if int(&rs, "/spec/replicas") > 0 {
                    self.scale_if_needed(&rs, 0).await;
                }
            }
            return;
        }
        if strategy(&self.d) != "RollingUpdate" {
            return;
        }
        let views: Vec<RsView> = active.iter().map(|r| view(r)).collect();
        let previous_max = int(&self.d, "/status/replicas");
        for (name, size) in proportional(replicas, self.max_surge(), previous_max, &views) {
            if let Some(rs) = active.iter().find(|r| meta::name_of(r) == name) {
                self.scale_if_needed(rs, size).await;
            }
        }
    }

    /// Whether `replicas` changed since the active ReplicaSets were last sized.
    fn is_scaling_event(&self) -> bool {
        let want = self.replicas().to_string();
        self.all()
            .filter(|rs| int(rs, "/spec/replicas") > 0)
            .any(|rs| annotation(rs, ANN_DESIRED_REPLICAS).is_some_and(|d| d != want))
    }

    async fn rolling(&mut self) {
        self.sync_new(true).await;
        let Some(new) = self.new.clone() else {
            return;
        };
        let views: Vec<RsView> = self.all().map(|r| view(r)).collect();
        let new_view = view(&new);
        let target = if new_view.replicas > self.replicas() {
            self.replicas()
        } else {
            rolling_new_replicas(self.replicas(), self.max_surge(), &views, &new_view)
        };
        if target != new_view.replicas && self.scale(&new_view.name, target).await {
            return;
        }
        let old: Vec<RsView> = self
            .old
            .iter()
            .map(|r| view(r))
            .filter(|r| r.replicas > 0)
            .collect();
        let mut scaled = false;
        for (name, size) in
            rolling_old_replicas(self.replicas(), max_unavailable(&self.d), &new_view, &old)
        {
            scaled |= self.scale(&name, size).await;
        }
        if !scaled && self.complete(&self.before) {
            self.cleanup().await;
        }
    }

    async fn recreate(&mut self) {
        self.sync_new(false).await;
        let mut scaled = false;
        for rs in self.old.clone() {
            if int(&rs, "/spec/replicas") > 0 {
                scaled |= self.scale(meta::name_of(&rs), 0).await;
            }
        }
        if scaled || self.old_pods_running() {
            return;
        }
        if self.new.is_none() {
            self.sync_new(true).await;
        }
        if let Some(new) = self.new.clone() {
            let replicas = self.replicas();
            self.scale_if_needed(&new, replicas).await;
        }
        if self.complete(&self.before) {
            self.cleanup().await;
        }
    }

    /// Whether an old ReplicaSet still has a pod that has not finished (Recreate waits).
    fn old_pods_running(&self) -> bool {
        if self.old.iter().any(|rs| int(rs, "/status/replicas") > 0) {
            return true;
        }
        let uids: HashSet<&str> = self
            .old
            .iter()
            .map(|rs| meta::meta_str(rs, "uid"))
            .collect();
        let (pods, _) = self
            .sh
            .store
            .list(&GroupResource::new("", "pods"), Some(&self.ns));
        pods.iter().any(|p| {
            controller_of(p).is_some_and(|r| uids.contains(r.uid))
                && !matches!(
                    p.pointer("/status/phase").and_then(Value::as_str),
                    Some("Succeeded" | "Failed")
                )
        })
    }

    /// Upstream's `DeploymentComplete` against `status`.
    fn complete(&self, status: &Value) -> bool {
        let replicas = self.replicas();
        int(status, "/updatedReplicas") == replicas
            && int(status, "/replicas") == replicas
            && int(status, "/availableReplicas") == replicas
            && int(status, "/observedGeneration") >= int(&self.d, "/metadata/generation")
    }

    /// Deletes the oldest old ReplicaSets with no pods beyond `revisionHistoryLimit`.
    async fn cleanup(&mut self) {
        let Some(limit) = self
            .d
            .pointer("/spec/revisionHistoryLimit")
            .and_then(Value::as_i64)
        else {
            return;
        };
        let mut cleanable: Vec<Arc<Value>> = self
            .old
            .iter()
            .filter(|rs| !meta::is_terminating(rs))
            .cloned()
            .collect();
        let surplus = cleanable.len() as i64 - limit;
        if surplus <= 0 {
            return;
        }
        cleanable.sort_by(|a, b| {
            revision(a).cmp(&revision(b)).then_with(|| {
                meta::meta_str(a, "creationTimestamp").cmp(meta::meta_str(b, "creationTimestamp"))
            })
        });
        let Some(def) = self.sh.resolve("apps", "v1", "replicasets") else {
            return;
        };
        for rs in cleanable.iter().take(surplus as usize) {
            let idle = int(rs, "/status/replicas") == 0
                && int(rs, "/spec/replicas") == 0
                && int(rs, "/metadata/generation") <= int(rs, "/status/observedGeneration");
            if idle {
                let _ = self
                    .sh
                    .delete(
                        &def,
                        &self.ns,
                        meta::name_of(rs),
                        &DeleteOptions::default(),
                        &opts(),
                    )
                    .await;
            }
        }
        self.reload();
    }

    /// The status the ReplicaSets give the Deployment (upstream's `calculateStatus`), on
    /// top of the conditions set so far.
    fn calculate_status(&mut self) {
        let sum = |ptr: &str| self.all().map(|rs| int(rs, ptr)).sum::<i64>();
        let available = sum("/status/availableReplicas");
        let total = sum("/spec/replicas");
        let counts = [
            ("replicas", sum("/status/replicas")),
            (
                "updatedReplicas",
                self.new.as_ref().map_or(0, |n| int(n, "/status/replicas")),
            ),
            ("readyReplicas", sum("/status/readyReplicas")),
            ("availableReplicas", available),
            ("unavailableReplicas", (total - available).max(0)),
        ];
        let generation = int(&self.d, "/metadata/generation");
        let s = &mut self.status;
        s["observedGeneration"] = json!(generation);
        for (k, v) in counts {
            if v > 0 {
                s[k] = json!(v);
            } else if let Some(o) = s.as_object_mut() {
                o.remove(k);
            }
        }
        let (ty, st, reason, msg) = if available >= self.replicas() - max_unavailable(&self.d) {
            (
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
            )
        } else {
            (
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
            )
        };
        set_condition(&mut self.status, condition(ty, st, reason, msg));
    }

    /// Upstream's `syncRolloutStatus`: the Progressing condition by how far the rollout
    /// came since the last sync, and ReplicaSet creation failures.
    fn rollout_status(&mut self, now: Timestamp) {
        self.calculate_status();
        let deadline = self
            .d
            .pointer("/spec/progressDeadlineSeconds")
            .and_then(Value::as_i64);
        let current = get_condition(&self.status, "Progressing").cloned();
        let complete_already = int(&self.status, "/replicas")
            == int(&self.status, "/updatedReplicas")
            && current
                .as_ref()
                .is_some_and(|c| field(c, "reason") == "NewReplicaSetAvailable");
        let subject = match &self.new {
            Some(n) => format!("ReplicaSet \"{}\"", meta::name_of(n)),
            None => format!("Deployment \"{}\"", self.name()),
        };
        let has_deadline = deadline.is_some_and(|d| d != i64::from(i32::MAX));
        if !has_deadline {
            remove_condition(&mut self.status, "Progressing");
        } else if !complete_already {
            let status = self.status.clone();
            if self.complete(&status) {
                let msg = format!("{subject} has successfully progressed.");
                set_condition(
                    &mut self.status,
                    condition("Progressing", "True", "NewReplicaSetAvailable", &msg),
                );
            } else if self.progressing() {
                let msg = format!("{subject} is progressing.");
                let mut cond = condition("Progressing", "True", "ReplicaSetUpdated", &msg);
                if let Some(cur) = &current {
                    if field(cur, "status") == "True" {
                        cond["lastTransitionTime"] = cur["lastTransitionTime"].clone();
                    }
                    remove_condition(&mut self.status, "Progressing");
                }
                set_condition(&mut self.status, cond);
            } else if self.timed_out(current.as_ref(), deadline.unwrap_or(600), now) {
                let msg = format!("{subject} has timed out progressing.");
                set_condition(
                    &mut self.status,
                    condition("Progressing", "False", "ProgressDeadlineExceeded", &msg),
                );
            }
        }
        let failure = self
            .all()
            .filter_map(|rs| {
                rs.pointer("/status/conditions")?
                    .as_array()?
                    .iter()
                    .find(|c| field(c, "type") == "ReplicaFailure")
                    .cloned()
            })
            .next();
        match failure {
            Some(f) => set_condition(
                &mut self.status,
                condition(
                    "ReplicaFailure",
                    field(&f, "status"),
                    field(&f, "reason"),
                    field(&f, "message"),
                ),
            ),
            None => remove_condition(&mut self.status, "ReplicaFailure"),
        }
    }

    /// Upstream's `DeploymentProgressing`: more pods updated, ready or available, or fewer old.
    fn progressing(&self) -> bool {
        let (old, new) = (&self.before, &self.status);
        let old_old = int(old, "/replicas") - int(old, "/updatedReplicas");
        let new_old = int(new, "/replicas") - int(new, "/updatedReplicas");
        int(new, "/updatedReplicas") > int(old, "/updatedReplicas")
            || new_old < old_old
            || int(new, "/readyReplicas") > int(old, "/readyReplicas")
            || int(new, "/availableReplicas") > int(old, "/availableReplicas")
    }

    fn timed_out(&self, current: Option<&Value>, deadline: i64, now: Timestamp) -> bool {
        let Some(c) = current else {
            return false;
        };
        match field(c, "reason") {
            "NewReplicaSetAvailable" => false,
            "ProgressDeadlineExceeded" => true,
            _ => meta::parse_time(field(c, "lastUpdateTime"))
                .is_some_and(|t| now.duration_since(t).as_secs() > deadline),
        }
    }

    /// Upstream's `checkPausedConditions`.
    fn paused_condition(&mut self) {
        let paused = self
            .d
            .pointer("/spec/paused")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let current =
            get_condition(&self.status, "Progressing").map(|c| field(c, "reason").to_string());
        if current.as_deref() == Some("ProgressDeadlineExceeded") {
            return;
        }
        let paused_now = current.as_deref() == Some("DeploymentPaused");
        if paused && !paused_now {
            set_condition(
                &mut self.status,
                condition(
                    "Progressing",
                    "Unknown",
                    "DeploymentPaused",
                    "Deployment is paused",
                ),
            );
        } else if !paused && paused_now {
            set_condition(
                &mut self.status,
                condition(
                    "Progressing",
                    "Unknown",
                    "DeploymentResumed",
                    "Deployment is resumed",
                ),
            );
        }
    }

    async fn write_status(&self) {
        let resource = ("apps", "deployments");
        write_status(self.sh, resource, &self.d, &self.status, &opts()).await;
    }
}

/// Upstream's `syncDeployment`; returns when to look again (a rollout in progress, for its
/// deadline and `minReadySeconds`).
async fn sync(sh: &Arc<SimShared>, ns: &str, name: &str) -> Option<Duration> {
    let d = sh
        .store
        .get(&GroupResource::new("apps", "deployments"), ns, name)?;
    let mut r = Rollout::load(sh, (*d).clone());
    let paused = d
        .pointer("/spec/paused")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if meta::is_terminating(&d) {
        r.calculate_status();
    } else {
        r.paused_condition();
        if paused || r.is_scaling_event() {
            r.sync_new(false).await;
            r.scale_to_spec().await;
            if paused {
                r.cleanup().await;
            }
            r.calculate_status();
        } else {
            match strategy(&d) {
                "Recreate" => r.recreate().await,
                _ => r.rolling().await,
            }
            r.rollout_status(Timestamp::now());
        }
    }
    r.write_status().await;
    let settled = r.complete(&r.status) && r.old.iter().all(|rs| int(rs, "/spec/replicas") == 0);
    (!settled && !paused).then_some(Duration::from_secs(1))
}

/// Runs the Deployment controller until the store's change stream closes: a Deployment
/// syncs on its own changes, its ReplicaSets', and its pods' deletions (Recreate waits for
/// the old pods to go; upstream watches pod deletions alone too), and once a second while a
/// rollout is under way.
pub(crate) async fn run(sh: Arc<SimShared>) {
    let sets = GroupResource::new("apps", "replicasets");
    let pods = GroupResource::new("", "pods");
    let owner_of = move |sh: &SimShared, ev: &StoreEvent| {
        let owner = controller_of(&ev.object)?;
        if ev.gr == sets && owner.kind == "Deployment" {
            return Some((ev.namespace.clone(), owner.name.to_string()));
        }
        if ev.gr == pods && ev.event_type == EventType::Deleted && owner.kind == "ReplicaSet" {
            let rs = sh.store.get(&sets, &ev.namespace, owner.name)?;
            let d = controller_of(&rs).filter(|r| r.kind == "Deployment")?;
            return Some((ev.namespace.clone(), d.name.to_string()));
        }
        None
    };
    let sync = |sh: Arc<SimShared>, (ns, name): Key| async move { sync(&sh, &ns, &name).await };
    run_controller(
        sh,
        GroupResource::new("apps", "deployments"),
        owner_of,
        sync,
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rs(name: &str, replicas: i64, available: i64, created: &str) -> RsView {
        RsView {
            name: name.into(),
            replicas,
            available,
            created: created.into(),
            max_replicas: None,
        }
    }

    #[test]
    fn fenceposts_round_surge_up_and_unavailable_down() {
        let d = |surge: Value, unavail: Value, replicas: i64| {
            json!({"spec": {"replicas": replicas, "strategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavail}}}})
        };
        assert_eq!(fenceposts(&d(json!("25%"), json!("25%"), 10)), (3, 2));
        assert_eq!(fenceposts(&d(json!("25%"), json!("25%"), 1)), (1, 0));
        // Never both zero: one pod may be unavailable.
        assert_eq!(fenceposts(&d(json!(0), json!("10%"), 5)), (0, 1));
        assert_eq!(fenceposts(&d(json!(2), json!(1), 5)), (2, 1));
        let recreate = json!({"spec": {"replicas": 3, "strategy": {"type": "Recreate"}}});
        assert_eq!(fenceposts(&recreate), (0, 0));
        assert_eq!(max_unavailable(&recreate), 0);
    }

    #[test]
    fn the_new_replica_set_grows_within_the_surge() {
        let old = rs("old", 10, 10, "1");
        let new = rs("new", 0, 0, "2");
        // 10 replicas, surge 3: the new one starts at 3.
        assert_eq!(
            rolling_new_replicas(10, 3, &[old.clone(), new.clone()], &new),
            3
        );
        // At the surge already: no more.
        let new3 = rs("new", 3, 0, "2");
        assert_eq!(rolling_new_replicas(10, 3, &[old, new3.clone()], &new3), 3);
        // Never beyond replicas.
        let old1 = rs("old", 1, 1, "1");
        let new9 = rs("new", 9, 9, "2");
        assert_eq!(
            rolling_new_replicas(10, 3, &[old1, new9.clone()], &new9),
            10
        );
    }

    #[test]
    fn old_replica_sets_shrink_keeping_the_minimum_available() {
        // 10 replicas, unavailable 2: with the new one at 3 (none available), 10 old
        // available, the old may lose 2... after the new one's unavailable 3 are counted.
        let new = rs("new", 3, 0, "3");
        let old = [rs("old", 10, 10, "1")];
        assert_eq!(
            rolling_old_replicas(10, 2, &new, &old),
            vec![("old".to_string(), 8)]
        );
        // Unhealthy old pods go first, whatever the availability.
        let old = [rs("a", 5, 2, "1"), rs("b", 5, 5, "2")];
        let new = rs("new", 2, 2, "3");
        assert_eq!(
            rolling_old_replicas(10, 0, &new, &old),
            vec![("a".to_string(), 3)]
        );
        // Nothing to take when the minimum is not met.
        let new = rs("new", 3, 0, "3");
        assert!(rolling_old_replicas(10, 0, &new, &[rs("old", 10, 10, "1")]).is_empty());
    }

    #[test]
    fn a_scale_during_a_rollout_is_shared_proportionally() {
        // 10 → 20 replicas, surge 0 (maxUnavailable 1): 6 old + 4 new grow to 12 + 8.
        let active = [
            RsView {
                max_replicas: Some(10),
                ..rs("old", 6, 6, "1")
            },
            RsView {
                max_replicas: Some(10),
                ..rs("new", 4, 4, "2")
            },
        ];
        let mut sizes = proportional(20, 0, 10, &active);
        sizes.sort();
        assert_eq!(sizes, vec![("new".to_string(), 8), ("old".to_string(), 12)]);
        // Scaled to zero: every one goes to zero.
        let mut sizes = proportional(0, 0, 10, &active);
        sizes.sort();
        assert_eq!(sizes, vec![("new".to_string(), 0), ("old".to_string(), 0)]);
    }

    #[test]
    fn template_hashes_ignore_the_hash_label_and_differ_by_collision() {
        let t = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        let mut labelled = t.clone();
        labelled["metadata"]["labels"][POD_TEMPLATE_HASH] = json!("x");
        labelled["metadata"]["creationTimestamp"] = Value::Null;
        let h = template_hash(&t, None);
        assert_eq!(h, template_hash(&labelled, None));
        assert_ne!(h, template_hash(&t, Some(1)));
        assert!(h.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
        assert!(!h.is_empty() && h.len() <= 10);
    }

    #[test]
    fn conditions_keep_their_transition_time_on_a_reason_change() {
        let mut status = json!({});
        let mut first = condition("Progressing", "True", "NewReplicaSetCreated", "a");
        first["lastTransitionTime"] = json!("2026-01-01T00:00:00Z");
        set_condition(&mut status, first);
        set_condition(
            &mut status,
            condition("Progressing", "True", "ReplicaSetUpdated", "b"),
        );
        let c = get_condition(&status, "Progressing").unwrap();
        assert_eq!(c["reason"], "ReplicaSetUpdated");
        assert_eq!(c["lastTransitionTime"], "2026-01-01T00:00:00Z");
        // Same status and reason: nothing changes, not even the message.
        set_condition(
            &mut status,
            condition("Progressing", "True", "ReplicaSetUpdated", "c"),
        );
        assert_eq!(
            get_condition(&status, "Progressing").unwrap()["message"],
            "b"
        );
    }
}
