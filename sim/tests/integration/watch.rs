use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kruise_sim::SimConfig;
use kube::ResourceExt as _;
use kube::api::{
    Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::{Controller, WatchStreamExt, controller::Action, reflector, watcher};
use serde_json::json;

use crate::common::{eventually, sim, sim_with};

fn cm(name: &str, app: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("app".to_string(), app.to_string())])),
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn next_event<S>(stream: &mut S) -> WatchEvent<ConfigMap>
where
    S: futures::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("a watch event within 5s")
        .expect("stream open")
        .expect("event decodes")
}

fn describe(ev: &WatchEvent<ConfigMap>) -> (String, String) {
    match ev {
        WatchEvent::Added(o) => ("ADDED".into(), o.metadata.name.clone().unwrap_or_default()),
        WatchEvent::Modified(o) => (
            "MODIFIED".into(),
            o.metadata.name.clone().unwrap_or_default(),
        ),
        WatchEvent::Deleted(o) => (
            "DELETED".into(),
            o.metadata.name.clone().unwrap_or_default(),
        ),
        WatchEvent::Bookmark(b) => ("BOOKMARK".into(), b.metadata.resource_version.clone()),
        WatchEvent::Error(e) => ("ERROR".into(), e.code.to_string()),
    }
}

#[tokio::test]
async fn watch_without_version_starts_with_current_state() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    api.create(&PostParams::default(), &cm("a", "x"))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("b", "x"))
        .await
        .unwrap();
    let wp = WatchParams {
        bookmarks: false,
        ..Default::default()
    };
    let mut stream = api.watch(&wp, "0").await.unwrap().boxed();
    assert_eq!(
        describe(&next_event(&mut stream).await),
        ("ADDED".into(), "a".into())
    );
    assert_eq!(
        describe(&next_event(&mut stream).await),
        ("ADDED".into(), "b".into())
    );
    api.create(&PostParams::default(), &cm("c", "x"))
        .await
        .unwrap();
    assert_eq!(
        describe(&next_event(&mut stream).await),
        ("ADDED".into(), "c".into())
    );
    let patch = json!({"data": {"k": "v"}});
    api.patch("c", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(
        describe(&next_event(&mut stream).await),
        ("MODIFIED".into(), "c".into())
    );
    api.delete("c", &Default::default()).await.unwrap();
    assert_eq!(
        describe(&next_event(&mut stream).await),
        ("DELETED".into(), "c".into())
    );
}

#[tokio::test]
async fn watch_from_resource_version_replays_later_changes_only() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    api.create(&PostParams::default(), &cm("before", "x"))
        .await
        .unwrap();
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    api.create(&PostParams::default(), &cm("after", "x"))
        .await
        .unwrap();
    let wp = WatchParams {
        bookmarks: false,
        ..Default::default()
    };
    let mut stream = api.watch(&wp, &rv).await.unwrap().boxed();
    assert_eq!(
        describe(&next_event(&mut stream).await),
        ("ADDED".into(), "after".into())
    );
}

#[tokio::test]
async fn bookmarks_when_asked() {
    let sim = sim_with(SimConfig {
        bookmark_interval: Duration::from_millis(100),
        ..Default::default()
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    let created = api
        .create(&PostParams::default(), &cm("a", "x"))
        .await
        .unwrap();
    let rv = created.metadata.resource_version.unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let ev = next_event(&mut stream).await;
    match ev {
        WatchEvent::Bookmark(b) => {
            assert!(
                b.metadata.resource_version.parse::<u64>().unwrap() >= rv.parse::<u64>().unwrap()
            );
        }
        other => panic!("expected a bookmark, got {other:?}"),
    }
}

#[tokio::test]
async fn too_old_resource_version_is_410_gone() {
    let sim = sim_with(SimConfig {
        watch_history: 5,
        ..Default::default()
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    for i in 0..20 {
        api.create(&PostParams::default(), &cm(&format!("c{i}"), "x"))
            .await
            .unwrap();
    }
    let mut stream = api
        .watch(&WatchParams::default(), "2")
        .await
        .unwrap()
        .boxed();
    match next_event(&mut stream).await {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
            assert!(
                e.message.starts_with("too old resource version: 2"),
                "{}",
                e.message
            );
        }
        other => panic!("expected 410, got {other:?}"),
    }
    // Forced via fault injection as well.
    sim.faults().force_watch_gone(1);
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    assert_eq!(
        describe(&next_event(&mut stream).await),
        ("ERROR".into(), "410".into())
    );
}

#[tokio::test]
async fn label_selector_transitions_become_added_and_deleted() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    let created = api
        .create(&PostParams::default(), &cm("a", "off"))
        .await
        .unwrap();
    let rv = created.metadata.resource_version.unwrap();
    let wp = WatchParams {
        bookmarks: false,
        ..Default::default()
    }
    .labels("app=on");
    let mut stream = api.watch(&wp, &rv).await.unwrap().boxed();
    let on = json!({"metadata": {"labels": {"app": "on"}}});
    api.patch("a", &PatchParams::default(), &Patch::Merge(&on))
        .await
        .unwrap();
    assert_eq!(
        describe(&next_event(&mut stream).await),
        ("ADDED".into(), "a".into())
    );
    let off = json!({"metadata": {"labels": {"app": "off"}}});
    let changed = api
        .patch("a", &PatchParams::default(), &Patch::Merge(&off))
        .await
        .unwrap();
    let left = next_event(&mut stream).await;
    assert_eq!(describe(&left), ("DELETED".into(), "a".into()));
    // As kube-apiserver's watch cache sends it: the content the watcher last matched, at
    // the change's resourceVersion.
    let WatchEvent::Deleted(left) = left else {
        unreachable!()
    };
    assert_eq!(left.labels()["app"], "on");
    assert_eq!(left.resource_version(), changed.resource_version());
}

#[tokio::test]
async fn streaming_list_ends_initial_events_with_annotated_bookmark() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    api.create(&PostParams::default(), &cm("a", "x"))
        .await
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::streaming_lists(), "")
        .await
        .unwrap()
        .boxed();
    assert_eq!(
        describe(&next_event(&mut stream).await),
        ("ADDED".into(), "a".into())
    );
    match next_event(&mut stream).await {
        WatchEvent::Bookmark(b) => {
            assert_eq!(
                b.metadata
                    .annotations
                    .get("k8s.io/initial-events-end")
                    .map(String::as_str),
                Some("true")
            );
        }
        other => panic!("expected the initial-events-end bookmark, got {other:?}"),
    }
}

#[tokio::test]
async fn kube_runtime_reflector_survives_dropped_watches_and_410() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    api.create(&PostParams::default(), &cm("a", "x"))
        .await
        .unwrap();
    let (reader, writer) = reflector::store::<ConfigMap>();
    // As controllers run it: with backoff, errors (like the 410) are retried.
    let stream = reflector(writer, watcher(api.clone(), watcher::Config::default()))
        .default_backoff()
        .applied_objects()
        .boxed();
    let task = tokio::spawn(async move {
        stream.for_each(|_| async {}).await;
    });
    eventually(5, "initial object in the reflector", || async {
        (reader.state().len() == 1).then_some(())
    })
    .await;
    sim.faults().drop_watches();
    api.create(&PostParams::default(), &cm("b", "x"))
        .await
        .unwrap();
    eventually(10, "object after a dropped watch", || async {
        (reader.state().len() == 2).then_some(())
    })
    .await;
    sim.faults().force_watch_gone(1);
    sim.faults().drop_watches();
    api.create(&PostParams::default(), &cm("c", "x"))
        .await
        .unwrap();
    eventually(10, "object after a 410", || async {
        (reader.state().len() == 3).then_some(())
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn kube_runtime_streaming_list_watcher() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    api.create(&PostParams::default(), &cm("a", "x"))
        .await
        .unwrap();
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector(
        writer,
        watcher(api.clone(), watcher::Config::default().streaming_lists()),
    )
    .applied_objects()
    .boxed();
    let task = tokio::spawn(async move {
        let _ = stream.try_for_each(|_| async { Ok(()) }).await;
    });
    eventually(5, "streamed initial object", || async {
        (reader.state().len() == 1).then_some(())
    })
    .await;
    api.create(&PostParams::default(), &cm("b", "x"))
        .await
        .unwrap();
    eventually(5, "streamed later object", || async {
        (reader.state().len() == 2).then_some(())
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn kube_runtime_controller_reconciles() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    let count = Arc::new(AtomicUsize::new(0));
    let ctx = count.clone();
    let controller = Controller::new(api.clone(), watcher::Config::default())
        .run(
            |_obj: Arc<ConfigMap>, ctx: Arc<Arc<AtomicUsize>>| async move {
                ctx.fetch_add(1, Ordering::SeqCst);
                Ok::<_, std::fmt::Error>(Action::await_change())
            },
            |_, _, _| Action::requeue(Duration::from_secs(1)),
            Arc::new(ctx),
        )
        .for_each(|_| async {});
    let task = tokio::spawn(controller);
    api.create(&PostParams::default(), &cm("a", "x"))
        .await
        .unwrap();
    eventually(10, "a reconcile", || async {
        (count.load(Ordering::SeqCst) >= 1).then_some(())
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn metadata_only_list_and_watch() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    api.create(&PostParams::default(), &cm("a", "x"))
        .await
        .unwrap();
    let list = api.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].metadata.name.as_deref(), Some("a"));
    let got = api.get_metadata("a").await.unwrap();
    assert_eq!(got.metadata.labels.unwrap()["app"], "x");
    // `Api<PartialObjectMeta<K>>` makes metadata-only (PartialObjectMetadata) requests.
    let meta_api: Api<kube::core::PartialObjectMeta<ConfigMap>> =
        Api::namespaced(sim.client().unwrap(), "default");
    let (reader, writer) = reflector::store();
    let stream = reflector(writer, watcher(meta_api, watcher::Config::default()))
        .default_backoff()
        .applied_objects()
        .boxed();
    let task = tokio::spawn(async move { stream.for_each(|_| async {}).await });
    api.create(&PostParams::default(), &cm("b", "x"))
        .await
        .unwrap();
    eventually(5, "metadata watcher sees both", || async {
        (reader.state().len() == 2).then_some(())
    })
    .await;
    task.abort();
}

#[tokio::test]
// The store's commit closure returns the crate's `ApiResult`, as every write path does.
#[allow(clippy::result_large_err)]
async fn a_watch_that_falls_far_behind_still_sees_every_change_in_order() {
    // Enough history to replay everything the watch misses, within its byte bound.
    let sim = sim_with(SimConfig {
        watch_history: 100_000,
        ..Default::default()
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client().unwrap(), "default");
    let created = api
        .create(&PostParams::default(), &cm("busy", "x"))
        .await
        .unwrap();
    let from = created.metadata.resource_version.unwrap();
    let wp = WatchParams {
        bookmarks: false,
        ..Default::default()
    };
    let mut stream = api.watch(&wp, &from).await.unwrap().boxed();
    // Nothing is read while the changes are made: once the connection's buffers are full
    // the watch falls behind by far more than the store broadcasts to it.
    let updates: u64 = 14_000;
    let padding = "p".repeat(2_000);
    let configmaps = kruise_sim::registry::GroupResource::new("", "configmaps");
    for i in 0..updates {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "busy", "namespace": "default"},
            "data": {"i": i.to_string(), "padding": padding}});
        sim.store()
            .commit(&configmaps, "default", "busy", |_, _| {
                Ok(kruise_sim::store::Commit::Put(obj))
            })
            .unwrap();
    }
    for i in 0..updates {
        match next_event(&mut stream).await {
            WatchEvent::Modified(o) => {
                let data = o.data.unwrap_or_default();
                assert_eq!(data.get("i"), Some(&i.to_string()));
            }
            other => panic!("change {i}: expected MODIFIED, got {}", describe(&other).0),
        }
    }
    sim.shutdown().await;
}
