//! Go's hashes as Kubernetes and OpenKruise apply them: 32-bit FNV-1 and FNV-1a
//! (`hash/fnv`), `DeepHashObject` of a byte slice (what it hashes is `dump.ForHash`'s
//! print, `([]uint8)[123 34 …]`), and the kubelet's container hash built on them.

use serde_json::json;

use crate::gojson::to_go_json;

const FNV_OFFSET: u32 = 0x811c_9dc5;
const FNV_PRIME: u32 = 0x0100_0193;

/// 32-bit FNV-1 (multiply, then xor).
pub fn fnv1_32(data: &[u8]) -> u32 {
    fnv1_32_extend(FNV_OFFSET, data)
}

/// FNV-1 state `h` after also writing `data`.
pub fn fnv1_32_extend(mut h: u32, data: &[u8]) -> u32 {
    for b in data {
        h = h.wrapping_mul(FNV_PRIME);
        h ^= u32::from(*b);
    }
    h
}

/// 32-bit FNV-1a (xor, then multiply).
pub fn fnv1a_32(data: &[u8]) -> u32 {
    fnv1a_32_extend(FNV_OFFSET, data)
}

/// FNV-1a state `h` after also writing `data`.
pub fn fnv1a_32_extend(mut h: u32, data: &[u8]) -> u32 {
    for b in data {
        h ^= u32::from(*b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// Kubernetes' `DeepHashObject` into FNV-1a of a `[]byte` (Go's JSON of something, as the
/// kubelet and OpenKruise's claim-template hash use it): the hash of its `%#v` print.
pub fn deep_hash_bytes(bytes: &[u8]) -> u32 {
    let decimal: Vec<String> = bytes.iter().map(u8::to_string).collect();
    fnv1a_32(format!("([]uint8)[{}]", decimal.join(" ")).as_bytes())
}

/// The kubelet's hash of a container (`HashContainer`, Kubernetes 1.31 and later), which it
/// stores on each container it creates (`io.kubernetes.container.hash`) and compares with
/// the pod spec's to decide a restart: only `name` and `image` count, as the JSON
/// `{"image": …, "name": …}`. Earlier kubelets hashed the whole container (not this value).
/// The oracle is the kubelet's own function (`e2e/realcluster/oracles/kubelet-hash`,
/// `core/tests/kubelet_oracle.rs`).
pub fn kubelet_container_hash(name: &str, image: &str) -> u64 {
    let go_json = to_go_json(&json!({"image": image, "name": name}));
    u64::from(deep_hash_bytes(go_json.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_golden() {
        assert_eq!(fnv1_32(b""), 0x811c_9dc5);
        assert_eq!(fnv1_32(b"a"), 0x050c_5d7e);
        assert_eq!(fnv1a_32(b"a"), 0xe40c_292c);
        // json.Marshal(nil): OpenKruise's claim-template hash input for no claims.
        assert_eq!(deep_hash_bytes(b"null"), 86995377);
    }

    #[test]
    fn container_hashes_are_the_kubelets() {
        // From the v1.36.3 kubelet's HashContainer (the oracle binary).
        assert_eq!(kubelet_container_hash("main", "busybox:1"), 150129340);
        assert_eq!(
            kubelet_container_hash("main", "127.0.0.1:35100/e2e/busybox:2-again"),
            3579594951
        );
        // Go escapes <, > and & (and U+2028) in strings.
        assert_eq!(kubelet_container_hash("c", "a<b>&\u{2028}"), 4141999882);
        assert_ne!(
            kubelet_container_hash("main", "busybox:2"),
            kubelet_container_hash("main", "busybox:1")
        );
    }
}
