//! Registry credentials from pull secrets (`kubernetes.io/dockerconfigjson` or the legacy
//! `kubernetes.io/dockercfg`), as the kubelet's keyring matches them: a key may be written
//! `host`, `host:port`, `https://host`, `http://host/v1/` …; its host is compared with the
//! image's registry, Docker Hub's aliases (`index.docker.io`, `registry-1.docker.io`)
//! standing for `docker.io`. A key `https://host` authenticates `host/image` (K#526,
//! K#1241).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use serde::Deserialize;

use crate::api::image::{DEFAULT_DOMAIN, ImageRef};

/// The `.dockerconfigjson` key.
pub const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
/// The legacy `.dockercfg` key.
pub const DOCKER_CFG_KEY: &str = ".dockercfg";

/// One registry login, as CRI's `AuthConfig` carries it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Credential {
    /// User name.
    #[serde(default)]
    pub username: String,
    /// Password.
    #[serde(default)]
    pub password: String,
    /// `base64(username:password)`, when the config carries that instead.
    #[serde(default)]
    pub auth: String,
    /// An identity token.
    #[serde(default, rename = "identitytoken")]
    pub identity_token: String,
    /// A registry token.
    #[serde(default, rename = "registrytoken")]
    pub registry_token: String,
    /// The key the credential was found under.
    #[serde(skip)]
    pub server_address: String,
}

#[derive(Deserialize)]
struct DockerConfigJson {
    #[serde(default)]
    auths: BTreeMap<String, Credential>,
}

/// The registry host a config key names: scheme and path stripped, Docker Hub's aliases
/// folded into `docker.io`.
pub fn key_host(key: &str) -> String {
    let without_scheme = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = without_scheme
        .split('/')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" => DEFAULT_DOMAIN.to_string(),
        _ => host,
    }
}

/// Every credential in `secrets` for `image`'s registry, in the secrets' order. A secret
/// that does not decode is skipped.
pub fn credentials_for(image: &ImageRef, secrets: &[Secret]) -> Vec<Credential> {
    let mut found = Vec::new();
    for secret in secrets {
        for (key, credential) in entries(secret) {
            if key_host(&key) == image.domain {
                found.push(Credential {
                    server_address: key,
                    ..credential
                });
            }
        }
    }
    found
}

fn entries(secret: &Secret) -> BTreeMap<String, Credential> {
    let data = secret.data.as_ref();
    if let Some(json) = data.and_then(|d| d.get(DOCKER_CONFIG_JSON_KEY)) {
        return serde_json::from_slice::<DockerConfigJson>(&json.0)
            .map(|c| c.auths)
            .unwrap_or_default();
    }
    if let Some(cfg) = data.and_then(|d| d.get(DOCKER_CFG_KEY)) {
        return serde_json::from_slice(&cfg.0).unwrap_or_default();
    }
    BTreeMap::new()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;
    use serde_json::json;

    use super::*;

    fn secret(key: &str, config: serde_json::Value) -> Secret {
        Secret {
            data: Some([(key.to_string(), ByteString(config.to_string().into_bytes()))].into()),
            ..Default::default()
        }
    }

    fn users(image: &str, secrets: &[Secret]) -> Vec<(String, String)> {
        credentials_for(&ImageRef::parse(image).unwrap(), secrets)
            .into_iter()
            .map(|c| (c.server_address, c.username))
            .collect()
    }

    #[test]
    fn keys_match_the_images_registry_whatever_their_form() {
        let config = secret(
            DOCKER_CONFIG_JSON_KEY,
            json!({"auths": {
                "https://reg.example.com": {"username": "scheme"},
                "reg.example.com:5000": {"username": "port"},
                "http://other.io/v1/": {"username": "path"},
                "https://index.docker.io/v1/": {"username": "hub"},
            }}),
        );
        let configs = [config];
        // K#526: `https://host` authenticates `host/image`.
        assert_eq!(
            users("reg.example.com/team/app:1", &configs),
            [("https://reg.example.com".to_string(), "scheme".to_string())]
        );
        assert_eq!(
            users("reg.example.com:5000/app", &configs),
            [("reg.example.com:5000".to_string(), "port".to_string())]
        );
        assert_eq!(users("other.io/x", &configs)[0].1, "path");
        assert_eq!(users("nginx", &configs)[0].1, "hub");
        assert_eq!(users("org/app:2", &configs)[0].1, "hub");
        assert!(users("quay.io/app", &configs).is_empty());
    }

    #[test]
    fn legacy_dockercfg_and_undecodable_secrets() {
        let legacy = secret(
            DOCKER_CFG_KEY,
            json!({"https://reg.example.com": {"auth": "dXNlcjpwdw=="}}),
        );
        let broken = Secret {
            data: Some(
                [(
                    DOCKER_CONFIG_JSON_KEY.to_string(),
                    ByteString(b"{".to_vec()),
                )]
                .into(),
            ),
            ..Default::default()
        };
        let found = credentials_for(
            &ImageRef::parse("reg.example.com/app").unwrap(),
            &[broken, legacy],
        );
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].auth, "dXNlcjpwdw==");
    }
}
