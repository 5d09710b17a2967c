//! A garbage collector and namespace finalizer in the spirit of
//! kube-controller-manager's: cascades deletion along ownerReferences (background),
//! completes foreground and orphan deletions, and empties terminating namespaces.
//! It reacts to the store's change stream and writes through `ops`, so its writes
//! look like any controller's (new resourceVersions, watch events).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::SimShared;
use crate::meta;
use crate::ops::{DeleteOptions, Subresource, WriteOptions};
use crate::registry::GroupResource;
use crate::store::{EventType, StoreEvent};

type ObjRef = (GroupResource, String, String);

#[derive(Default)]
struct Index {
    /// owner uid -> dependents
    dependents: HashMap<String, HashSet<ObjRef>>,
    /// uid -> object
    by_uid: HashMap<String, ObjRef>,
}

fn owner_uids(obj: &Value) -> Vec<String> {
    meta::metadata(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `obj`'s ownerReference to `owner_uid` has blockOwnerDeletion set.
fn blocks_owner(obj: &Value, owner_uid: &str) -> bool {
    meta::metadata(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter().any(|r| {
                r.get("uid").and_then(Value::as_str) == Some(owner_uid)
                    && r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
            })
        })
}

impl Index {
    fn remove(&mut self, r: &ObjRef, obj: &Value) {
        for o in owner_uids(obj) {
            if let Some(set) = self.dependents.get_mut(&o) {
                set.remove(r);
                if set.is_empty() {
                    self.dependents.remove(&o);
                }
            }
        }
        let uid = meta::meta_str(obj, "uid");
        if self.by_uid.get(uid) == Some(r) {
            self.by_uid.remove(uid);
        }
    }

    fn add(&mut self, r: &ObjRef, obj: &Value) {
        for o in owner_uids(obj) {
            self.dependents.entry(o).or_default().insert(r.clone());
        }
        self.by_uid
            .insert(meta::meta_str(obj, "uid").to_string(), r.clone());
    }

    fn rebuild(sh: &SimShared) -> Index {
        let mut idx = Index::default();
        let grs: Vec<GroupResource> = sh.store.registry().by_gr.keys().cloned().collect();
        for gr in grs {
            let (items, _) = sh.store.list(&gr, None);
            for o in items {
                let r = (
                    gr.clone(),
                    meta::meta_str(&o, "namespace").to_string(),
                    meta::name_of(&o).to_string(),
                );
                idx.add(&r, &o);
            }
        }
        idx
    }
}

fn gc_opts() -> WriteOptions {
    WriteOptions {
        field_manager: None,
        ..super::workloads::controller_manager("garbage-collector")
    }
}

pub async fn run(sh: Arc<SimShared>) {
    let mut rx = sh.store.subscribe();
    let mut idx = Index::rebuild(&sh);
    loop {
        match rx.recv().await {
            Ok(ev) => {
                let r = (ev.gr.clone(), ev.namespace.clone(), ev.name.clone());
                if let Some(p) = &ev.previous {
                    idx.remove(&r, p);
                }
                if ev.event_type != EventType::Deleted {
                    idx.add(&r, &ev.object);
                }
                handle(&sh, &mut idx, &ev).await;
            }
            Err(RecvError::Lagged(_)) => {
                idx = Index::rebuild(&sh);
                sweep(&sh, &mut idx).await;
            }
            Err(RecvError::Closed) => return,
        }
    }
}

/// After losing events: re-examine every terminating object and orphaned dependent.
async fn sweep(sh: &Arc<SimShared>, idx: &mut Index) {
    let grs: Vec<GroupResource> = sh.store.registry().by_gr.keys().cloned().collect();
    let mut orphans = Vec::new();
    for gr in grs {
        let (items, _) = sh.store.list(&gr, None);
        for o in items {
            if meta::is_terminating(&o) {
                on_terminating(sh, idx, &gr, &o).await;
            }
            let owners = owner_uids(&o);
            if !owners.is_empty() && owners.iter().all(|u| !idx.by_uid.contains_key(u)) {
                let r = (
                    gr.clone(),
                    meta::meta_str(&o, "namespace").to_string(),
                    meta::name_of(&o).to_string(),
                );
                orphans.push((r, owners));
            }
        }
    }
    if orphans.is_empty() {
        return;
    }
    // The index predates the listing: an owner created meanwhile (a new CloneSet whose
    // first pods the listing found) is missing from it, and its dependents are not garbage.
    // Owners exist before anything can name their uid, so an index built now has every
    // owner of the listed objects that still exists, as kube's collector looks each owner
    // up before it deletes a dependent.
    *idx = Index::rebuild(sh);
    for (r, owners) in orphans {
        if owners.iter().all(|u| !idx.by_uid.contains_key(u)) {
            delete_ref(sh, &r).await;
        }
    }
}

async fn handle(sh: &Arc<SimShared>, idx: &mut Index, ev: &StoreEvent) {
    match ev.event_type {
        EventType::Deleted => {
            let uid = meta::meta_str(&ev.object, "uid").to_string();
            // Background cascade: dependents whose every owner is gone are deleted;
            // others just lose the reference.
            if let Some(deps) = idx.dependents.get(&uid).cloned() {
                for d in deps {
                    let Some(dep) = sh.store.get(&d.0, &d.1, &d.2) else {
                        continue;
                    };
                    let others_alive = owner_uids(&dep)
                        .iter()
                        .any(|u| *u != uid && idx.by_uid.contains_key(u));
                    if others_alive {
                        remove_owner_ref(sh, &d, &uid).await;
                    } else {
                        delete_ref(sh, &d).await;
                    }
                }
            }
            // Foreground owners waiting for this dependent.
            for owner in owner_uids(&ev.object) {
                if let Some(r) = idx.by_uid.get(&owner).cloned()
                    && let Some(o) = sh.store.get(&r.0, &r.1, &r.2)
                    && meta::is_terminating(&o)
                {
                    on_terminating(sh, idx, &r.0, &o).await;
                }
            }
            // A terminating namespace that just became empty.
            if !ev.namespace.is_empty() {
                let ns_gr = GroupResource::new("", "namespaces");
                if let Some(ns) = sh.store.get(&ns_gr, "", &ev.namespace)
                    && meta::is_terminating(&ns)
                {
                    on_terminating(sh, idx, &ns_gr, &ns).await;
                }
            }
        }
        EventType::Added | EventType::Modified => {
            if meta::is_terminating(&ev.object) {
                on_terminating(sh, idx, &ev.gr, &ev.object).await;
            } else if ev.event_type == EventType::Added {
                // A dependent created after its owners vanished is garbage.
                let owners = owner_uids(&ev.object);
                if !owners.is_empty() && owners.iter().all(|u| !idx.by_uid.contains_key(u)) {
                    delete_ref(sh, &(ev.gr.clone(), ev.namespace.clone(), ev.name.clone())).await;
                }
            }
        }
    }
}

async fn on_terminating(sh: &Arc<SimShared>, idx: &mut Index, gr: &GroupResource, obj: &Value) {
    let uid = meta::meta_str(obj, "uid").to_string();
    let ns = meta::meta_str(obj, "namespace").to_string();
    let name = meta::name_of(obj).to_string();
    let finalizers = meta::finalizers_of(obj);
    if gr.group.is_empty() && gr.resource == "namespaces" {
        finalize_namespace(sh, &name).await;
        return;
    }
    if finalizers.iter().any(|f| f == "orphan") {
        if let Some(deps) = idx.dependents.get(&uid).cloned() {
            for d in deps {
                remove_owner_ref(sh, &d, &uid).await;
            }
        }
        remove_finalizer(sh, &(gr.clone(), ns.clone(), name.clone()), "orphan").await;
        return;
    }
    if finalizers.iter().any(|f| f == "foregroundDeletion") {
        let deps: Vec<ObjRef> = idx
            .dependents
            .get(&uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        let mut remaining = 0;
        for d in &deps {
            let Some(dep) = sh.store.get(&d.0, &d.1, &d.2) else {
                continue;
            };
            if !meta::is_terminating(&dep) {
                delete_ref(sh, d).await;
            }
            // Only dependents whose reference sets blockOwnerDeletion hold the owner.
            if blocks_owner(&dep, &uid) {
                remaining += 1;
            }
        }
        if remaining == 0 {
            remove_finalizer(sh, &(gr.clone(), ns, name), "foregroundDeletion").await;
        }
    }
}

async fn finalize_namespace(sh: &Arc<SimShared>, ns: &str) {
    let grs: Vec<(GroupResource, bool)> = sh
        .store
        .registry()
        .by_gr
        .values()
        .map(|d| (d.gr(), d.namespaced))
        .collect();
    let mut remaining = 0usize;
    for (gr, namespaced) in grs {
        if !namespaced {
            continue;
        }
        let (items, _) = sh.store.list(&gr, Some(ns));
        for o in items {
            remaining += 1;
            if !meta::is_terminating(&o) {
                delete_ref(
                    sh,
                    &(gr.clone(), ns.to_string(), meta::name_of(&o).to_string()),
                )
                .await;
            }
        }
    }
    if remaining == 0 {
        let ns_gr = GroupResource::new("", "namespaces");
        let _ = sh.store.commit(&ns_gr, "", ns, |_, cur| {
            Ok(match cur {
                Some(c) if meta::is_terminating(c) && meta::finalizers_of(c).is_empty() => {
                    let mut last = (**c).clone();
                    if let Some(spec) = last.get_mut("spec").and_then(Value::as_object_mut) {
                        spec.insert("finalizers".into(), json!([]));
                    }
                    crate::store::Commit::Delete(last)
                }
                _ => crate::store::Commit::Noop,
            })
        });
    }
}

async fn delete_ref(sh: &Arc<SimShared>, r: &ObjRef) {
    let def = sh.store.registry().get(&r.0.group, &r.0.resource);
    let Some(def) = def else { return };
    let opts = DeleteOptions {
        propagation_policy: Some("Background".into()),
        ..Default::default()
    };
    if let Err(e) = sh.delete(&def, &r.1, &r.2, &opts, &gc_opts()).await
        && e.code != 404
    {
        tracing::debug!(error = %e, resource = %r.0.resource, name = %r.2, "garbage collector delete failed");
    }
}

async fn remove_owner_ref(sh: &Arc<SimShared>, r: &ObjRef, owner_uid: &str) {
    let def = sh.store.registry().get(&r.0.group, &r.0.resource);
    let Some(def) = def else { return };
    let version = def.storage_version().to_string();
    let _ = sh
        .update_with(
            &def,
            &version,
            &r.1,
            &r.2,
            Subresource::Main,
            &gc_opts(),
            |cur| {
                let mut next = cur.clone();
                if let Some(m) = meta::metadata_mut(&mut next)
                    && let Some(refs) = m.get_mut("ownerReferences").and_then(Value::as_array_mut)
                {
                    refs.retain(|o| o.get("uid").and_then(Value::as_str) != Some(owner_uid));
                    if refs.is_empty() {
                        m.remove("ownerReferences");
                    }
                }
                Ok(next)
            },
        )
        .await;
}

async fn remove_finalizer(sh: &Arc<SimShared>, r: &ObjRef, finalizer: &str) {
    let def = sh.store.registry().get(&r.0.group, &r.0.resource);
    let Some(def) = def else { return };
    let version = def.storage_version().to_string();
    let _ = sh
        .update_with(
            &def,
            &version,
            &r.1,
            &r.2,
            Subresource::Main,
            &gc_opts(),
            |cur| {
                let mut next = cur.clone();
                if let Some(m) = meta::metadata_mut(&mut next)
                    && let Some(f) = m.get_mut("finalizers").and_then(Value::as_array_mut)
                {
                    f.retain(|x| x.as_str() != Some(finalizer));
                    if f.is_empty() {
                        m.remove("finalizers");
                    }
                }
                Ok(next)
            },
        )
        .await;
}
