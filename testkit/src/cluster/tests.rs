use super::*;

fn key(method: http::Method, uri: &str) -> Option<(String, String, String, String)> {
    let request = http::Request::builder()
        .method(method)
        .uri(uri)
        .body(())
        .unwrap();
    request_key(&request).map(|k| (k.verb, k.group, k.resource, k.subresource))
}

fn k(
    verb: &str,
    group: &str,
    resource: &str,
    sub: &str,
) -> Option<(String, String, String, String)> {
    Some((verb.into(), group.into(), resource.into(), sub.into()))
}

#[test]
fn only_loopback_webhook_urls_are_checked_for_a_listener() {
    assert_eq!(
        loopback_port("https://127.0.0.1:9443/mutate-pod"),
        Some(9443)
    );
    assert_eq!(loopback_port("https://localhost:8443"), Some(8443));
    assert_eq!(loopback_port("https://10.0.0.7:9443/mutate-pod"), None);
    assert_eq!(loopback_port("http://127.0.0.1:9443/"), None);
    assert_eq!(loopback_port("https://127.0.0.1/mutate"), None);
}

#[test]
fn requests_are_keyed_as_the_simulator_keys_them() {
    use http::Method;
    let cases = [
        (
            Method::POST,
            "/api/v1/namespaces/a/pods",
            k("create", "", "pods", ""),
        ),
        (
            Method::PATCH,
            "/api/v1/namespaces/a/pods/web-x/status?fieldManager=m",
            k("patch", "", "pods", "status"),
        ),
        (
            Method::GET,
            "/api/v1/namespaces/a/pods?watch=true&resourceVersion=1",
            k("watch", "", "pods", ""),
        ),
        (
            Method::GET,
            "/api/v1/pods?labelSelector=a%3Db",
            k("list", "", "pods", ""),
        ),
        (
            Method::GET,
            "/apis/apps.kruise.io/v1beta1/namespaces/a/clonesets/web",
            k("get", "apps.kruise.io", "clonesets", ""),
        ),
        (
            Method::DELETE,
            "/api/v1/namespaces/a/pods/web-x",
            k("delete", "", "pods", ""),
        ),
        (
            Method::DELETE,
            "/api/v1/namespaces/a/pods",
            k("deletecollection", "", "pods", ""),
        ),
        (
            Method::PUT,
            "/apis/apps.kruise.io/v1beta1/namespaces/a/clonesets/web/scale",
            k("update", "apps.kruise.io", "clonesets", "scale"),
        ),
        (
            Method::GET,
            "/api/v1/namespaces/a",
            k("get", "", "namespaces", ""),
        ),
        (
            Method::POST,
            "/api/v1/namespaces",
            k("create", "", "namespaces", ""),
        ),
        (Method::GET, "/apis", None),
        (Method::GET, "/version", None),
    ];
    for (method, uri, expected) in cases {
        assert_eq!(key(method, uri), expected, "{uri}");
    }
}

#[test]
fn namespace_names_are_dns_labels_naming_the_test() {
    let name = namespace_name(
        "tests::in_place_update_keeps_pod_identity_and_partition_keeps_old_pods",
        4242,
        77,
    );
    assert!(
        name.starts_with("kt-in-place-update-keeps-pod-identity-and-part"),
        "{name}"
    );
    assert!(name.len() <= 63, "{name}");
    assert!(
        name.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
        "{name}"
    );
    assert!(!name.contains("--"), "{name}");
}
