use super::*;

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
