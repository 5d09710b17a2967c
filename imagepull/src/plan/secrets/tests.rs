use k8s_openapi::ByteString;
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::json;

use super::*;

const AGENT: &str = "kruise-daemon-config";

fn source(name: &str, data: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            labels: Some([("team".to_string(), "a".to_string())].into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/dockerconfigjson".into()),
        data: Some(
            [(
                ".dockerconfigjson".to_string(),
                ByteString(data.as_bytes().to_vec()),
            )]
            .into(),
        ),
        ..Default::default()
    }
}

fn copy(name: &str, source_key: &str, refs: &str, data: &str) -> Secret {
    let mut s = source(name, data);
    s.metadata.namespace = Some(AGENT.into());
    s.metadata.annotations = Some(
        [
            (
                SOURCE_SECRET_KEY_ANNOTATION.to_string(),
                source_key.to_string(),
            ),
            (SECRET_REFERENCES_ANNOTATION.to_string(), refs.to_string()),
            (SECRET_MODE_ANNOTATION.to_string(), "batch".to_string()),
        ]
        .into(),
    );
    s
}

fn input<'a>(
    job: &'a str,
    pull_secrets: &'a [String],
    active: bool,
    sources: &'a BTreeMap<String, Secret>,
    synced: &'a [Secret],
) -> SecretSyncInput<'a> {
    SecretSyncInput {
        job_namespace: "default",
        job_name: job,
        pull_secrets,
        active,
        agent_namespace: AGENT,
        sources,
        synced,
    }
}

fn refs_of(action: &SecretAction) -> String {
    match action {
        SecretAction::Create(s) | SecretAction::Update(s) => {
            references(s).into_iter().collect::<Vec<_>>().join(",")
        }
        SecretAction::Delete { name } => format!("delete {name}"),
    }
}

#[test]
fn a_source_is_copied_once_and_shared_by_reference() {
    let sources = BTreeMap::from([("reg".to_string(), source("reg", "v1"))]);
    let wanted = vec!["reg".to_string()];
    // First job: a copy is created (named by the API server), its NodeImages wait.
    let first = plan(&input("job1", &wanted, true, &sources, &[]));
    assert!(first.creating);
    assert!(first.refs.is_empty());
    let [SecretAction::Create(created)] = first.actions.as_slice() else {
        panic!("{first:?}")
    };
    assert_eq!(
        serde_json::to_value(&created.metadata).unwrap(),
        json!({"generateName": "reg-", "namespace": AGENT, "labels": {"team": "a"}, "annotations": {
            "imagepulljobs.kruise.io/mode": "batch",
            "imagepulljobs.kruise.io/references": "default/job1",
            "imagepulljobs.kruise.io/source-key": "default/reg",
        }})
    );
    assert_eq!(
        created.type_.as_deref(),
        Some("kubernetes.io/dockerconfigjson")
    );
    // Once it exists: job1 uses it as is; job2 joins its references.
    let synced = [copy("reg-abcde", "default/reg", "default/job1", "v1")];
    let again = plan(&input("job1", &wanted, true, &sources, &synced));
    assert_eq!(
        again,
        SecretSync {
            actions: vec![],
            refs: vec![ReferenceObject {
                namespace: AGENT.into(),
                name: "reg-abcde".into(),
                mode: "batch".into()
            }],
            creating: false,
        }
    );
    let second = plan(&input("job2", &wanted, true, &sources, &synced));
    assert_eq!(
        second.actions.iter().map(refs_of).collect::<Vec<_>>(),
        ["default/job1,default/job2"]
    );
    assert_eq!(second.refs, again.refs);
}

#[test]
fn a_changed_source_updates_the_copy() {
    let sources = BTreeMap::from([("reg".to_string(), source("reg", "v2"))]);
    let wanted = vec!["reg".to_string()];
    let synced = [copy("reg-abcde", "default/reg", "default/job1", "v1")];
    let sync = plan(&input("job1", &wanted, true, &sources, &synced));
    let [SecretAction::Update(updated)] = sync.actions.as_slice() else {
        panic!("{sync:?}")
    };
    assert_eq!(updated.data, sources["reg"].data);
    assert_eq!(updated.metadata.name.as_deref(), Some("reg-abcde"));
}

#[test]
fn a_finished_or_deleted_job_releases_and_the_last_one_deletes() {
    let sources = BTreeMap::from([("reg".to_string(), source("reg", "v1"))]);
    let wanted = vec!["reg".to_string()];
    let shared = [copy(
        "reg-abcde",
        "default/reg",
        "default/job1,default/job2",
        "v1",
    )];
    let release = plan(&input("job1", &wanted, false, &sources, &shared));
    assert_eq!(
        release.actions.iter().map(refs_of).collect::<Vec<_>>(),
        ["default/job2"]
    );
    assert!(release.refs.is_empty());
    let last = [copy("reg-abcde", "default/reg", "default/job2", "v1")];
    let delete = plan(&input("job2", &wanted, false, &sources, &last));
    assert_eq!(
        delete.actions,
        [SecretAction::Delete {
            name: "reg-abcde".into()
        }]
    );
    // A missing source is skipped, and nothing is created for it.
    let none = plan(&input("job3", &["gone".to_string()], true, &sources, &last));
    assert_eq!(none, SecretSync::default());
}

#[test]
fn a_job_in_the_agents_namespace_uses_its_secrets_in_place() {
    let sources = BTreeMap::new();
    let wanted = vec!["reg".to_string()];
    let sync = plan(&SecretSyncInput {
        job_namespace: AGENT,
        ..input("job", &wanted, true, &sources, &[])
    });
    assert_eq!(
        sync.refs,
        [ReferenceObject {
            namespace: AGENT.into(),
            name: "reg".into(),
            mode: String::new()
        }]
    );
    assert!(sync.actions.is_empty());
}

proptest! {
    /// Jobs naming sources come and go in any order: after every job's reconcile, no copy
    /// is left without a referring job, and every copy's references are jobs still active
    /// that name its source (K#2235, K#2290).
    #[test]
    fn copies_never_outlive_the_last_referring_job(
        jobs in proptest::collection::vec(proptest::collection::btree_set(0u8..3, 0..3), 1..5),
        events in proptest::collection::vec((0usize..5, any::<bool>()), 1..30),
    ) {
        let sources: BTreeMap<String, Secret> =
            (0..3).map(|i| (format!("s{i}"), source(&format!("s{i}"), "v"))).collect();
        let mut active: Vec<bool> = vec![true; jobs.len()];
        let mut synced: Vec<Secret> = Vec::new();
        let mut next_name = 0;
        for (pick, finish) in events {
            let j = pick % jobs.len();
            if finish { active[j] = false; }
            let wanted: Vec<String> = jobs[j].iter().map(|s| format!("s{s}")).collect();
            let name = format!("job{j}");
            let sync = plan(&input(&name, &wanted, active[j], &sources, &synced));
            for action in sync.actions {
                match action {
                    SecretAction::Create(mut s) => {
                        s.metadata.name = Some(format!("{}{next_name}", s.metadata.generate_name.clone().unwrap()));
                        next_name += 1;
                        synced.push(s);
                    }
                    SecretAction::Update(s) => {
                        let slot = synced.iter_mut().find(|x| x.metadata.name == s.metadata.name).unwrap();
                        *slot = s;
                    }
                    SecretAction::Delete { name } => synced.retain(|x| x.metadata.name.as_deref() != Some(name.as_str())),
                }
            }
            for copy in &synced {
                let refs = references(copy);
                prop_assert!(!refs.is_empty(), "a copy without references survived");
                let source = annotation(copy, SOURCE_SECRET_KEY_ANNOTATION).unwrap().trim_start_matches("default/").to_string();
                for r in refs {
                    let k: usize = r.trim_start_matches("default/job").parse().unwrap();
                    prop_assert!(active[k], "{} refers to finished job{}", copy.metadata.name.clone().unwrap(), k);
                    let names_source = jobs[k].iter().any(|s| format!("s{s}") == source);
                    prop_assert!(names_source);
                }
            }
        }
    }
}

#[test]
fn a_copy_carries_its_sources_uid_as_openkruise_v1_8_labels_it() {
    let mut reg = source("reg", "v1");
    reg.metadata.uid = Some("db8acf1c-be68-46a2-9a40-a36c65eedd84".into());
    let sources = BTreeMap::from([("reg".to_string(), reg)]);
    let wanted = vec!["reg".to_string()];
    let created = plan(&input("job1", &wanted, true, &sources, &[]));
    let [SecretAction::Create(created)] = created.actions.as_slice() else {
        panic!("{created:?}")
    };
    assert_eq!(
        created.metadata.labels,
        Some(BTreeMap::from([
            (
                SOURCE_SECRET_UID_LABEL.to_string(),
                "db8acf1c-be68-46a2-9a40-a36c65eedd84".to_string()
            ),
            ("team".to_string(), "a".to_string()),
        ]))
    );
    // A copy made before the label gets it once; a labelled copy is left alone.
    let unlabelled = [copy("reg-abcde", "default/reg", "default/job1", "v1")];
    let relabel = plan(&input("job1", &wanted, true, &sources, &unlabelled));
    let [SecretAction::Update(updated)] = relabel.actions.as_slice() else {
        panic!("{relabel:?}")
    };
    assert_eq!(
        updated.metadata.labels.as_ref().unwrap()[SOURCE_SECRET_UID_LABEL],
        "db8acf1c-be68-46a2-9a40-a36c65eedd84"
    );
    let labelled = [updated.clone()];
    assert!(
        plan(&input("job1", &wanted, true, &sources, &labelled))
            .actions
            .is_empty()
    );
}
