use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::common::{raw, sim};

#[tokio::test]
async fn malformed_requests_get_status_errors_and_change_nothing() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let c: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "keep"}, "data": {"k": "v"}})).unwrap();
    let before = api.create(&PostParams::default(), &c).await.unwrap();
    let base = "/api/v1/namespaces/default/configmaps";
    let item = "/api/v1/namespaces/default/configmaps/keep";

    // (method, path, content type, body, expected code, expected reason)
    type Case<'a> = (&'a str, &'a str, Option<&'a str>, Vec<u8>, u16, &'a str);
    let cases: Vec<Case> = vec![
        (
            "POST",
            base,
            Some("application/json"),
            b"{not json".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            base,
            Some("application/json"),
            b"[1,2]".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            base,
            Some("application/json"),
            br#"{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"x"}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "PUT",
            item,
            Some("application/json"),
            b"{\"metadata\": 5}".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "PUT",
            item,
            Some("application/json"),
            br#"{"metadata":{"name":"other"}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "PUT",
            base,
            Some("application/json"),
            b"{}".to_vec(),
            405,
            "MethodNotAllowed",
        ),
        (
            "PATCH",
            item,
            Some("application/merge-patch+json"),
            b"{bad".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "PATCH",
            item,
            Some("application/json-patch+json"),
            b"{\"op\":1}".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "PATCH",
            item,
            Some("text/plain"),
            b"{}".to_vec(),
            415,
            "UnsupportedMediaType",
        ),
        (
            "PATCH",
            item,
            Some("application/json-patch+json"),
            br#"[{"op":"replace","path":"/nope/x","value":1}]"#.to_vec(),
            422,
            "Invalid",
        ),
        (
            "DELETE",
            item,
            Some("application/json"),
            br#"{"propagationPolicy":"Sideways"}"#.to_vec(),
            422,
            "Invalid",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/widgets",
            None,
            Vec::new(),
            404,
            "NotFound",
        ),
        (
            "GET",
            "/apis/nothing.example.com/v1",
            None,
            Vec::new(),
            404,
            "NotFound",
        ),
        (
            "GET",
            "/api/v1/configmaps/keep",
            None,
            Vec::new(),
            404,
            "NotFound",
        ),
        (
            "GET",
            "/api/v1/configmaps?labelSelector=a%20in%20b",
            None,
            Vec::new(),
            400,
            "BadRequest",
        ),
        (
            "GET",
            "/api/v1/configmaps?dryRun=Some",
            None,
            Vec::new(),
            200,
            "",
        ),
    ];
    for (method, path, ct, body, code, reason) in cases {
        let (got, status) = raw(&client, method, path, ct, &body).await;
        assert_eq!(got, code, "{method} {path}: {status}");
        if code >= 400 {
            assert_eq!(status["kind"], "Status", "{method} {path}");
            assert_eq!(status["apiVersion"], "v1");
            assert_eq!(status["status"], "Failure");
            assert_eq!(status["code"], code);
            assert_eq!(status["reason"], reason, "{method} {path}: {status}");
        }
    }
    // Oversized bodies are rejected.
    let huge = vec![b' '; 3 * 1024 * 1024 + 10];
    let (got, _) = raw(&client, "POST", base, Some("application/json"), &huge).await;
    assert_eq!(got, 413);

    let after = api.get("keep").await.unwrap();
    assert_eq!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );
    assert_eq!(after.data, before.data);
}

#[tokio::test]
async fn discovery_documents() {
    let sim = sim().await;
    let client = sim.client().unwrap();
    let (code, v) = raw(&client, "GET", "/version", None, b"").await;
    assert_eq!(code, 200);
    assert_eq!(v["major"], "1");
    let (_, v) = raw(&client, "GET", "/api", None, b"").await;
    assert_eq!(v["kind"], "APIVersions");
    assert_eq!(v["versions"], json!(["v1"]));
    let (_, v) = raw(&client, "GET", "/api/v1", None, b"").await;
    assert_eq!(v["kind"], "APIResourceList");
    let names: Vec<&str> = v["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for want in [
        "pods",
        "pods/status",
        "pods/binding",
        "pods/eviction",
        "configmaps",
        "namespaces",
        "events",
        "nodes",
    ] {
        assert!(names.contains(&want), "{want} not in {names:?}");
    }
    let (_, v) = raw(&client, "GET", "/apis", None, b"").await;
    let groups: Vec<&str> = v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    for want in [
        "apps",
        "batch",
        "coordination.k8s.io",
        "events.k8s.io",
        "policy",
        "apiextensions.k8s.io",
        "admissionregistration.k8s.io",
    ] {
        assert!(groups.contains(&want), "{want} not in {groups:?}");
    }
    let (code, v) = raw(&client, "GET", "/openapi/v3", None, b"").await;
    assert_eq!(code, 200);
    assert!(v["paths"]["api/v1"].is_object());
    let (code, _) = raw(&client, "POST", "/api", Some("application/json"), b"{}").await;
    assert_eq!(code, 405);
}

#[tokio::test]
async fn kubeconfig_is_usable_by_kube() {
    let sim = sim().await;
    let path = sim.kubeconfig_path().unwrap();
    let kc = kube::config::Kubeconfig::read_from(&path).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    assert_eq!(config.default_namespace, "default");
    let client = kube::Client::try_from(config).unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let c: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "via-kubeconfig"}})).unwrap();
    api.create(&PostParams::default(), &c).await.unwrap();
    let dir = path.parent().unwrap().to_path_buf();
    sim.shutdown().await;
    // shutdown removes the temporary kubeconfig.
    assert!(!dir.exists());
}

/// Mutated bodies for every write path: answers are always a Status 4xx (or success),
/// never a 5xx or a dropped connection, and the server keeps serving.
#[tokio::test]
async fn fuzzed_bodies_never_break_the_server() {
    let sim = sim().await;
    let client = sim.client_without_retries().unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let c: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "target", "labels": {"a": "b"}}, "data": {"k": "v"}}),
    )
    .unwrap();
    api.create(&PostParams::default(), &c).await.unwrap();
    let seeds: Vec<(&str, &str, &str, Vec<u8>)> = vec![
        ("POST", "/api/v1/namespaces/default/configmaps", "application/json",
            br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fz","labels":{"x":"y"}},"data":{"a":"b"}}"#.to_vec()),
        ("PUT", "/api/v1/namespaces/default/configmaps/target", "application/json",
            br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"target","finalizers":["a/b"]},"data":{"k":"w"}}"#.to_vec()),
        ("PATCH", "/api/v1/namespaces/default/configmaps/target", "application/merge-patch+json",
            br#"{"metadata":{"labels":{"a":null,"c":"d"}},"data":{"k":"x"}}"#.to_vec()),
        ("PATCH", "/api/v1/namespaces/default/configmaps/target", "application/strategic-merge-patch+json",
            br#"{"metadata":{"ownerReferences":[{"uid":"u","$patch":"delete"}],"finalizers":["x/y"]},"data":{"$patch":"replace","z":"1"}}"#.to_vec()),
        ("PATCH", "/api/v1/namespaces/default/configmaps/target", "application/json-patch+json",
            br#"[{"op":"add","path":"/data/q","value":"1"},{"op":"move","from":"/data/q","path":"/data/r"}]"#.to_vec()),
        ("PATCH", "/api/v1/namespaces/default/configmaps/target?fieldManager=fz", "application/apply-patch+yaml",
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: target\ndata:\n  s: t\n".to_vec()),
        ("DELETE", "/api/v1/namespaces/default/configmaps/fz", "application/json",
            br#"{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"x"},"propagationPolicy":"Foreground"}"#.to_vec()),
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..400 {
        let (method, path, ct, seed) = &seeds[round % seeds.len()];
        let mut body = seed.clone();
        for _ in 0..(1 + next() % 4) {
            let pos = (next() as usize) % body.len().max(1);
            match next() % 3 {
                0 if !body.is_empty() => body[pos] = (next() % 256) as u8,
                1 if !body.is_empty() => {
                    body.remove(pos);
                }
                _ => body.insert(
                    pos.min(body.len()),
                    b"{}[]\":,\\0a-"[(next() % 11) as usize],
                ),
            }
        }
        let (code, status) = raw(&client, method, path, Some(ct), &body).await;
        assert!(
            code < 500,
            "{method} {path} with {:?} gave {code}: {status}",
            String::from_utf8_lossy(&body)
        );
        if code >= 400 {
            assert_eq!(status["kind"], "Status", "{status}");
        }
    }
    // Still serving, and the object is a well-formed ConfigMap.
    let got = api.get("target").await.unwrap();
    assert_eq!(got.metadata.name.as_deref(), Some("target"));
}
