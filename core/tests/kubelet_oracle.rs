//! Differential test against the kubelet's own `HashContainer` (Kubernetes v1.36.3, the
//! real node's kubelet): random container names and images, hashed by
//! `kruise_compat::gohash::kubelet_container_hash` and by the Go program
//! `e2e/realcluster/oracles/kubelet-hash`, must agree. The in-place completion check
//! compares this hash with the one a node agent reads from the runtime.
//!
//! Run by `.ci/run` (the `oracles` stage) with `--ignored`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kruise_compat::gohash::kubelet_container_hash;
use kruise_testkit::oracle;
use proptest::prelude::*;

/// Names and images as users write them, and strings Go's JSON escapes (`<`, `>`, `&`,
/// U+2028, non-ASCII); no tab or newline (the oracle's separators).
fn name_and_image() -> impl Strategy<Value = (String, String)> {
    (
        "[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?",
        prop_oneof![
            "([a-z0-9.-]{1,12}(:[0-9]{2,5})?/)?[a-z0-9/_-]{1,20}(:[A-Za-z0-9._-]{1,12})?(@sha256:[0-9a-f]{64})?",
            "[ -~<>&\u{2028}\u{2029}é中\u{1F600}\"\\\\]{0,24}",
        ],
    )
}

#[test]
#[ignore = "needs the Go oracle: KRUISE_ORACLE_BIN_DIR (.ci/run builds it)"]
fn the_kubelets_container_hash() {
    let inputs = oracle::samples(name_and_image(), 2000);
    let stdin: String = inputs.iter().map(|(n, i)| format!("{n}\t{i}\n")).collect();
    let answers = oracle::run("kubelet-hash", stdin.as_bytes());
    let answers: Vec<&str> = answers.lines().collect();
    assert_eq!(answers.len(), inputs.len(), "one hash per input");
    for ((name, image), go) in inputs.iter().zip(answers) {
        assert_eq!(
            kubelet_container_hash(name, image).to_string(),
            go,
            "name {name:?} image {image:?}"
        );
    }
}
