//! Admission webhooks called over HTTPS as kube-apiserver calls them: a mutating webhook's
//! patch lands in the stored object, a denial surfaces with kube-apiserver's message and
//! code, selectors decide who is called, and a webhook that is down fails the write or is
//! skipped according to its failurePolicy.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kruise_admission::certs::{self, CertificateAuthority};
use kruise_admission::publish::{self, Endpoint, Owned};
use kruise_admission::{
    self as admission, AdmissionHandler, AdmissionRoutes, FailurePolicy, HandlerError, Rule,
    WebhookKind, WebhookSpec,
};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use serde_json::json;
use tokio_util::sync::CancellationToken;

struct LabelPods {
    policy: FailurePolicy,
}

impl AdmissionHandler for LabelPods {
    fn path(&self) -> &str {
        "/mutate-pod"
    }
    fn webhook(&self) -> WebhookSpec {
        WebhookSpec {
            name: "mpod.test.kruise.io".into(),
            kind: WebhookKind::Mutating,
            rules: vec![Rule::new(&["CREATE"], "", &["v1"], &["pods"])],
            failure_policy: self.policy,
            namespace_selector: Some(
                serde_json::from_value(json!({"matchExpressions": [
                {"key": "skip-webhooks", "operator": "DoesNotExist"}]}))
                .unwrap(),
            ),
            object_selector: Some(
                serde_json::from_value(json!({"matchLabels": {"app": "web"}})).unwrap(),
            ),
            timeout_seconds: 5,
        }
    }
    fn handle<'a>(
        &'a self,
        req: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move {
            let patch: json_patch::Patch = serde_json::from_value(json!([
                {"op": "add", "path": "/metadata/labels/injected", "value": "true"}
            ]))
            .unwrap();
            Ok(AdmissionResponse::from(req).with_patch(patch).unwrap())
        })
    }
}

struct DenyForbidden;

impl AdmissionHandler for DenyForbidden {
    fn path(&self) -> &str {
        "/validate-pod"
    }
    fn webhook(&self) -> WebhookSpec {
        WebhookSpec {
            name: "vpod.test.kruise.io".into(),
            kind: WebhookKind::Validating,
            rules: vec![Rule::new(&["CREATE", "DELETE"], "", &["v1"], &["pods"])],
            failure_policy: FailurePolicy::Fail,
            namespace_selector: None,
            object_selector: None,
            timeout_seconds: 5,
        }
    }
    fn handle<'a>(
        &'a self,
        req: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move {
            if req.name == "forbidden"
                || req.name == "undeletable" && req.old_object.is_some() && req.object.is_none()
            {
                return Ok(AdmissionResponse::from(req).deny("this pod is not allowed"));
            }
            Ok(AdmissionResponse::from(req))
        })
    }
}

pub(crate) struct Server {
    pub(crate) stop: CancellationToken,
    pub(crate) ca: CertificateAuthority,
    pub(crate) endpoint: Endpoint,
    pub(crate) routes: AdmissionRoutes,
}

/// An admission server for `routes` over HTTPS on loopback, with its own CA.
pub(crate) async fn serve(routes: AdmissionRoutes) -> Server {
    let now = jiff::Timestamp::now();
    let ca = certs::generate_ca("test-ca", now, Duration::from_secs(3600)).unwrap();
    let (cert, key) = certs::issue_serving(
        &ca,
        &["127.0.0.1".to_string()],
        now,
        Duration::from_secs(3600),
    )
    .unwrap();
    let tls = axum_server::tls_rustls::RustlsConfig::from_pem(cert.into_bytes(), key.into_bytes())
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let server = admission::serve(
        "127.0.0.1:0".parse().unwrap(),
        routes.clone(),
        tls,
        stop.clone(),
    )
    .await
    .unwrap();
    Server {
        stop,
        ca,
        endpoint: Endpoint::Url(format!("https://127.0.0.1:{}", server.addr.port())),
        routes,
    }
}

fn pod(name: &str, app: &str) -> Pod {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]}}))
    .unwrap()
}

#[tokio::test]
async fn webhooks_mutate_deny_and_honour_selectors() {
    let sim = crate::common::sim().await;
    let client = sim.client().unwrap();
    let server = serve(
        AdmissionRoutes::new()
            .handler(LabelPods {
                policy: FailurePolicy::Fail,
            })
            .handler(DenyForbidden),
    )
    .await;
    let owned = Owned {
        mutating: Some("test-mutating".into()),
        validating: Some("test-validating".into()),
        crds: vec![],
    };
    publish::publish(
        &client,
        &server.routes,
        &owned,
        &server.endpoint,
        &server.ca.cert_pem,
        true,
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    // The mutating webhook's patch is in the stored object.
    let created = pods
        .create(&PostParams::default(), &pod("web-1", "web"))
        .await
        .unwrap();
    assert_eq!(
        created
            .metadata
            .labels
            .unwrap()
            .get("injected")
            .map(String::as_str),
        Some("true")
    );
    // objectSelector: a pod without app=web is not sent to the mutating webhook.
    let other = pods
        .create(&PostParams::default(), &pod("db-1", "db"))
        .await
        .unwrap();
    assert!(!other.metadata.labels.unwrap().contains_key("injected"));
    // namespaceSelector: a labelled namespace is skipped.
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"metadata": {"name": "quiet", "labels": {"skip-webhooks": "true"}}}),
        )
        .unwrap(),
    )
    .await
    .unwrap();
    let quiet: Api<Pod> = Api::namespaced(client.clone(), "quiet");
    let q = quiet
        .create(&PostParams::default(), &pod("web-2", "web"))
        .await
        .unwrap();
    assert!(!q.metadata.labels.unwrap().contains_key("injected"));

    // A denial surfaces as kube-apiserver reports it.
    let err = pods
        .create(&PostParams::default(), &pod("forbidden", "web"))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        status.message,
        "admission webhook \"vpod.test.kruise.io\" denied the request: this pod is not allowed"
    );
    assert!(
        pods.get_opt("forbidden").await.unwrap().is_none(),
        "a denied create stores nothing"
    );
    // DELETE goes through validating webhooks too.
    pods.create(&PostParams::default(), &pod("undeletable", "db"))
        .await
        .unwrap();
    let err = pods
        .delete("undeletable", &DeleteParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 403),
        "{err:?}"
    );
    assert!(pods.get_opt("undeletable").await.unwrap().is_some());
    server.stop.cancel();
    sim.shutdown().await;
}

#[tokio::test]
async fn a_webhook_that_is_down_fails_or_is_skipped_by_failure_policy() {
    let sim = crate::common::sim().await;
    let client = sim.client().unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for (policy, name) in [
        (FailurePolicy::Fail, "fail"),
        (FailurePolicy::Ignore, "ignore"),
    ] {
        let server = serve(AdmissionRoutes::new().handler(LabelPods { policy })).await;
        let owned = Owned {
            mutating: Some("down-mutating".into()),
            validating: None,
            crds: vec![],
        };
        publish::publish(
            &client,
            &server.routes,
            &owned,
            &server.endpoint,
            &server.ca.cert_pem,
            true,
        )
        .await
        .unwrap();
        // Stop the webhook and wait until it no longer accepts connections.
        server.stop.cancel();
        let Endpoint::Url(url) = &server.endpoint else {
            unreachable!()
        };
        let addr = url.trim_start_matches("https://").to_string();
        crate::common::eventually(10, "webhook down", || {
            let addr = addr.clone();
            async move {
                tokio::net::TcpStream::connect(addr)
                    .await
                    .is_err()
                    .then_some(())
            }
        })
        .await;
        let result = pods
            .create(&PostParams::default(), &pod(&format!("web-{name}"), "web"))
            .await;
        match policy {
            FailurePolicy::Fail => {
                let err = result.unwrap_err();
                let kube::Error::Api(status) = err else {
                    panic!("{err:?}")
                };
                assert_eq!(status.code, 500);
                assert!(
                    status
                        .message
                        .contains("failed calling webhook \"mpod.test.kruise.io\""),
                    "{}",
                    status.message
                );
            }
            FailurePolicy::Ignore => {
                let created = result.unwrap();
                assert!(!created.metadata.labels.unwrap().contains_key("injected"));
            }
        }
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .delete("down-mutating", &DeleteParams::default())
            .await
            .unwrap();
    }
    sim.shutdown().await;
}

/// Adds a 300 KiB annotation to pods labelled `bloat=yes`, on create and update: more
/// than the 256 KiB all annotations of an object may hold.
struct BloatPods;

impl AdmissionHandler for BloatPods {
    fn path(&self) -> &str {
        "/bloat-pod"
    }
    fn webhook(&self) -> WebhookSpec {
        WebhookSpec {
            name: "bloat.test.kruise.io".into(),
            kind: WebhookKind::Mutating,
            rules: vec![Rule::new(&["CREATE", "UPDATE"], "", &["v1"], &["pods"])],
            failure_policy: FailurePolicy::Fail,
            namespace_selector: None,
            object_selector: Some(
                serde_json::from_value(json!({"matchLabels": {"bloat": "yes"}})).unwrap(),
            ),
            timeout_seconds: 5,
        }
    }
    fn handle<'a>(
        &'a self,
        req: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move {
            let has_annotations = req
                .object
                .as_ref()
                .and_then(|o| o.metadata.annotations.as_ref())
                .is_some();
            let mut ops = Vec::new();
            if !has_annotations {
                ops.push(json!({"op": "add", "path": "/metadata/annotations", "value": {}}));
            }
            ops.push(json!({"op": "add", "path": "/metadata/annotations/bloat",
                "value": "x".repeat(300 * 1024)}));
            let patch: json_patch::Patch = serde_json::from_value(json!(ops)).unwrap();
            Ok(AdmissionResponse::from(req).with_patch(patch).unwrap())
        })
    }
}

/// Counts the pod writes validating admission sees.
struct CountValidations(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl AdmissionHandler for CountValidations {
    fn path(&self) -> &str {
        "/count-pod"
    }
    fn webhook(&self) -> WebhookSpec {
        WebhookSpec {
            name: "count.test.kruise.io".into(),
            kind: WebhookKind::Validating,
            rules: vec![Rule::new(&["CREATE", "UPDATE"], "", &["v1"], &["pods"])],
            failure_policy: FailurePolicy::Fail,
            namespace_selector: None,
            object_selector: None,
            timeout_seconds: 5,
        }
    }
    fn handle<'a>(
        &'a self,
        req: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(AdmissionResponse::from(req))
        })
    }
}

fn assert_annotations_too_long(result: Result<Pod, kube::Error>) {
    let err = result.unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    let causes = status.details.unwrap().causes;
    assert_eq!(causes[0].field, "metadata.annotations", "{causes:?}");
    assert_eq!(causes[0].reason, "FieldValueTooLong");
}

#[tokio::test]
async fn what_a_mutating_webhook_adds_is_validated_before_validating_webhooks_run() {
    let sim = crate::common::sim().await;
    let client = sim.client().unwrap();
    let validations = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let server = serve(
        AdmissionRoutes::new()
            .handler(BloatPods)
            .handler(CountValidations(validations.clone())),
    )
    .await;
    let owned = Owned {
        mutating: Some("bloat-mutating".into()),
        validating: Some("count-validating".into()),
        crds: vec![],
    };
    publish::publish(
        &client,
        &server.routes,
        &owned,
        &server.endpoint,
        &server.ca.cert_pem,
        true,
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut bloated = pod("bloated", "web");
    bloated
        .metadata
        .labels
        .get_or_insert_default()
        .insert("bloat".into(), "yes".into());

    // create: refused as kube-apiserver refuses it, and nothing is stored.
    assert_annotations_too_long(pods.create(&PostParams::default(), &bloated).await);
    assert!(pods.get_opt("bloated").await.unwrap().is_none());
    // Validation failed before validating admission: the validating webhook never saw it.
    assert_eq!(validations.load(std::sync::atomic::Ordering::SeqCst), 0);

    // update and patch of a pod the webhook starts to match are refused the same way.
    let slim = pods
        .create(&PostParams::default(), &pod("slim", "web"))
        .await
        .unwrap();
    assert_eq!(validations.load(std::sync::atomic::Ordering::SeqCst), 1);
    let mut relabelled = slim.clone();
    relabelled
        .metadata
        .labels
        .get_or_insert_default()
        .insert("bloat".into(), "yes".into());
    assert_annotations_too_long(
        pods.replace("slim", &PostParams::default(), &relabelled)
            .await,
    );
    assert_annotations_too_long(
        pods.patch(
            "slim",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": {"bloat": "yes"}}})),
        )
        .await,
    );
    let stored = pods.get("slim").await.unwrap();
    assert_eq!(
        stored.metadata.resource_version,
        slim.metadata.resource_version
    );
    assert!(stored.metadata.annotations.is_none());
    assert_eq!(validations.load(std::sync::atomic::Ordering::SeqCst), 1);
    server.stop.cancel();
    sim.shutdown().await;
}

/// Answers every ConfigMap write with what kube-apiserver told it: the options' kind (and a
/// delete's propagation policy) and the requester, as annotations or, for a delete, as
/// the denial's message.
struct EchoRequest;

impl AdmissionHandler for EchoRequest {
    fn path(&self) -> &str {
        "/echo-configmap"
    }
    fn webhook(&self) -> WebhookSpec {
        WebhookSpec {
            name: "mconfigmap.test.kruise.io".into(),
            kind: WebhookKind::Mutating,
            rules: vec![Rule::new(
                &["CREATE", "UPDATE", "DELETE"],
                "",
                &["v1"],
                &["configmaps"],
            )],
            failure_policy: FailurePolicy::Fail,
            namespace_selector: None,
            object_selector: None,
            timeout_seconds: 5,
        }
    }
    fn handle<'a>(
        &'a self,
        req: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move {
            let options = req
                .options
                .as_ref()
                .map(|o| o.0.clone())
                .unwrap_or_default();
            let kind = options["kind"].as_str().unwrap_or("none").to_string();
            let user = req.user_info.username.clone().unwrap_or_default();
            if req.object.is_none() {
                let policy = options["propagationPolicy"].as_str().unwrap_or("none");
                return Ok(AdmissionResponse::from(req)
                    .deny(format!("options {kind} {policy} from {user}")));
            }
            let annotations = json!({"options": kind, "user": user,
                "groups": req.user_info.groups.clone().unwrap_or_default().join(",")});
            let patch: json_patch::Patch = serde_json::from_value(json!([
                {"op": "add", "path": "/metadata/annotations", "value": annotations}
            ]))
            .unwrap();
            Ok(AdmissionResponse::from(req).with_patch(patch).unwrap())
        })
    }
}

/// A TCP relay to `target` that counts the connections made through it.
async fn counting_relay(target: std::net::SocketAddr) -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    (port, accepted)
}

#[tokio::test]
async fn admission_reviews_carry_options_and_the_requester_over_kept_alive_connections() {
    let sim = crate::common::sim().await;
    let server = serve(AdmissionRoutes::new().handler(EchoRequest)).await;
    let Endpoint::Url(url) = &server.endpoint else {
        unreachable!("serve() listens on a URL")
    };
    let target: std::net::SocketAddr = url.trim_start_matches("https://").parse().unwrap();
    let (relay_port, connections) = counting_relay(target).await;
    let owned = Owned {
        mutating: Some("test-echo".into()),
        validating: None,
        crds: vec![],
    };
    publish::publish(
        &sim.client().unwrap(),
        &server.routes,
        &owned,
        &Endpoint::Url(format!("https://127.0.0.1:{relay_port}")),
        &server.ca.cert_pem,
        true,
    )
    .await
    .unwrap();
    let mut config = sim.client_config().unwrap();
    config.auth_info.token = Some("system:serviceaccount:default:deployer".to_string().into());
    let client = kube::Client::try_from(config).unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(client, "default");
    let map = |name: &str| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
    };

    // CREATE carries CreateOptions (with the request's fieldManager), UPDATE and PATCH
    // UpdateOptions, and userInfo is the token's user with its groups.
    let created = maps
        .create(
            &PostParams {
                field_manager: Some("tester".into()),
                ..PostParams::default()
            },
            &map("echo"),
        )
        .await
        .unwrap();
    let annotations = created.metadata.annotations.unwrap();
    assert_eq!(annotations["options"], "CreateOptions");
    assert_eq!(
        annotations["user"],
        "system:serviceaccount:default:deployer"
    );
    assert!(
        annotations["groups"].contains("system:serviceaccounts:default"),
        "{annotations:?}"
    );
    let patched = maps
        .patch(
            "echo",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "w"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        patched.metadata.annotations.unwrap()["options"],
        "UpdateOptions"
    );

    // DELETE carries the DeleteOptions the client sent.
    let denied = maps
        .delete("echo", &DeleteParams::foreground())
        .await
        .unwrap_err();
    let status = crate::common::api_err(denied);
    assert!(
        status.message.ends_with(
            "options DeleteOptions Foreground from system:serviceaccount:default:deployer"
        ),
        "{}",
        status.message
    );

    // Twenty more writes, one after another, reuse the connection already open.
    let before = connections.load(Ordering::SeqCst);
    assert!(before >= 1, "the calls so far went through the relay");
    for i in 0..20 {
        maps.create(&PostParams::default(), &map(&format!("echo-{i}")))
            .await
            .unwrap();
    }
    let opened = connections.load(Ordering::SeqCst) - before;
    assert!(
        opened <= 1,
        "20 sequential admission calls opened {opened} new connections"
    );
    server.stop.cancel();
}

/// A validating handler with no entry until `wanted` (a pod chain whose scope is listed
/// after the process first publishes).
struct LateValidator {
    wanted: Arc<std::sync::atomic::AtomicBool>,
}

impl AdmissionHandler for LateValidator {
    fn path(&self) -> &str {
        "/validate-late"
    }
    fn webhook(&self) -> WebhookSpec {
        WebhookSpec {
            name: "vlate.test.kruise.io".into(),
            ..DenyForbidden.webhook()
        }
    }
    fn webhooks(&self) -> Vec<WebhookSpec> {
        if self.wanted.load(Ordering::SeqCst) {
            vec![self.webhook()]
        } else {
            Vec::new()
        }
    }
    fn handle<'a>(
        &'a self,
        req: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        DenyForbidden.handle(req)
    }
}

/// Publishes as kruise-admission's runner does: a missing configuration is created only
/// if this process has not published it before (`ever`, updated).
async fn publish_as_the_runner(
    client: &kube::Client,
    server: &Server,
    owned: &Owned,
    ever: &mut std::collections::HashSet<String>,
) {
    let names = publish::publish_creating(
        client,
        &server.routes,
        owned,
        &server.endpoint,
        &server.ca.cert_pem,
        |name| !ever.contains(name),
    )
    .await
    .unwrap();
    ever.extend(names);
}

#[tokio::test]
async fn a_configuration_first_wanted_after_the_first_publish_is_created_then_but_not_after_a_delete()
 {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    use std::collections::HashSet;
    let sim = crate::common::sim().await;
    let client = sim.client().unwrap();
    let wanted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = serve(
        AdmissionRoutes::new()
            .handler(LabelPods {
                policy: FailurePolicy::Fail,
            })
            .handler(LateValidator {
                wanted: wanted.clone(),
            }),
    )
    .await;
    let owned = Owned {
        mutating: Some("late-mutating".into()),
        validating: Some("late-validating".into()),
        crds: vec![],
    };
    // The runner's rule: create what this process has not published yet.
    let mut ever: HashSet<String> = HashSet::new();
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    for _ in 0..2 {
        publish_as_the_runner(&client, &server, &owned, &mut ever).await;
    }
    assert!(
        validating
            .get_opt("late-validating")
            .await
            .unwrap()
            .is_none()
    );
    // Its entry comes later: the configuration is created then.
    wanted.store(true, Ordering::SeqCst);
    publish_as_the_runner(&client, &server, &owned, &mut ever).await;
    assert!(
        validating
            .get_opt("late-validating")
            .await
            .unwrap()
            .is_some()
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let err = pods
        .create(&PostParams::default(), &pod("forbidden", "web"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("this pod is not allowed"), "{err}");
    // Deleted after it was published (an uninstall begins so): left deleted.
    validating
        .delete("late-validating", &DeleteParams::default())
        .await
        .unwrap();
    publish_as_the_runner(&client, &server, &owned, &mut ever).await;
    assert!(
        validating
            .get_opt("late-validating")
            .await
            .unwrap()
            .is_none()
    );
    server.stop.cancel();
}
