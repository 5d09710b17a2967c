//! Test helpers of kruise-admission's integration tests: kruise-testkit's (HTTPS trusting one
//! caBundle, AdmissionReviews, free ports, eventually, replicas), and the example binary's
//! `Greeting` kind.
#![allow(dead_code, unused_imports, clippy::unwrap_used, clippy::expect_used)]

pub use kruise_testkit::{
    Replica, eventually, free_port, http_get, post_tls, review, spawn_replica,
};

/// Applies the CRDs `bin crd` prints and returns an Api for the example binary's
/// `Greeting` objects in `default`.
pub async fn install_greetings(
    bin: &str,
    client: &kube::Client,
) -> kube::Api<kube::api::DynamicObject> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let out = std::process::Command::new(bin).arg("crd").output().unwrap();
    assert!(out.status.success());
    let yaml = String::from_utf8(out.stdout).unwrap();
    let crd: CustomResourceDefinition =
        serde_saphyr::from_str(yaml.trim_start_matches("---\n")).unwrap();
    kube::Api::<CustomResourceDefinition>::all(client.clone())
        .create(&Default::default(), &crd)
        .await
        .unwrap();
    let resource = kube::api::ApiResource {
        group: "example.kruise.io".into(),
        version: "v1alpha1".into(),
        api_version: "example.kruise.io/v1alpha1".into(),
        kind: "Greeting".into(),
        plural: "greetings".into(),
    };
    kube::Api::namespaced_with(client.clone(), "default", &resource)
}

/// A mutating pod handler at `/mutate-pod` that admits everything unchanged, registered as
/// the webhook `name` (fails open).
pub struct AllowAll(pub &'static str);

impl kruise_admission::AdmissionHandler for AllowAll {
    fn path(&self) -> &str {
        "/mutate-pod"
    }
    fn webhook(&self) -> kruise_admission::WebhookSpec {
        use kruise_admission::{FailurePolicy, Rule, WebhookKind, WebhookSpec};
        WebhookSpec {
            name: self.0.into(),
            kind: WebhookKind::Mutating,
            rules: vec![Rule::new(&["CREATE"], "", &["v1"], &["pods"])],
            failure_policy: FailurePolicy::Ignore,
            namespace_selector: None,
            object_selector: None,
            timeout_seconds: 5,
        }
    }
    fn handle<'a>(
        &'a self,
        req: &'a kube::core::admission::AdmissionRequest<kube::api::DynamicObject>,
    ) -> futures::future::BoxFuture<
        'a,
        Result<kube::core::admission::AdmissionResponse, kruise_admission::HandlerError>,
    > {
        Box::pin(async move { Ok(kube::core::admission::AdmissionResponse::from(req)) })
    }
}

/// Writes a new CA `name` and a serving certificate for 127.0.0.1 into `dir`, cert-manager
/// style (`tls.key`, `tls.crt`, `ca.crt`); the CA.
pub fn write_certs(
    dir: &std::path::Path,
    name: &str,
) -> kruise_admission::certs::CertificateAuthority {
    use kruise_admission::certs;
    use std::time::Duration;
    let now = jiff::Timestamp::now();
    let ca = certs::generate_ca(name, now, Duration::from_secs(86400)).unwrap();
    let (cert, key) = certs::issue_serving(
        &ca,
        &["127.0.0.1".to_string()],
        now,
        Duration::from_secs(86400),
    )
    .unwrap();
    // Write beside, then rename: readers never see half a file (as kubelet's ..data swap).
    for (file, body) in [
        ("tls.key", key),
        ("tls.crt", cert),
        ("ca.crt", ca.cert_pem.clone()),
    ] {
        let tmp = dir.join(format!(".{file}.tmp"));
        std::fs::write(&tmp, body).unwrap();
        std::fs::rename(&tmp, dir.join(file)).unwrap();
    }
    ca
}

/// Waits (20 s at most) until the admission server at `addr`, trusted through `ca_pem`,
/// answers `review` at `/mutate-pod` with 200.
pub async fn wait_serving(what: &str, addr: std::net::SocketAddr, ca_pem: &str, review: &[u8]) {
    eventually(what, std::time::Duration::from_secs(20), || async {
        let (code, _) = post_tls(addr, "127.0.0.1", ca_pem, "/mutate-pod", review)
            .await
            .ok()?;
        (code == 200).then_some(())
    })
    .await;
}
