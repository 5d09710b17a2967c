//! Serving certificates for the admission server, from one of two sources:
//!
//! - **Files** (cert-manager style): `tls.crt`, `tls.key` and optionally `ca.crt` in a
//!   directory, re-read when they change (kubelet swaps a mounted Secret's `..data` link).
//! - **Self-managed**: a self-signed CA and serving certificate kept in a Secret, written
//!   with OpenKruise's key names (`ca-cert.pem`, `ca-key.pem`, `cert.pem`, `key.pem`) and the
//!   standard ones (`ca.crt`, `tls.crt`, `tls.key`), so a Secret made by either
//!   implementation is understood by both. The serving certificate is re-issued (same CA,
//!   unchanged caBundle) before it expires; when the CA itself nears expiry a new CA is made
//!   and the caBundle carries both until the old one expires, so no request fails in between.
//!
//! Replicas share the Secret: writes carry the resourceVersion read, and the loser of a
//! race adopts the winner's certificates.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// Errors making, reading or storing certificates.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// Key or certificate generation failed.
    #[error("generating certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// A PEM could not be parsed.
    #[error("parsing certificate: {0}")]
    Parse(String),
    /// Reading the certificate files failed.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The API server refused a Secret read or write.
    #[error("secret {name}: {source}")]
    Api {
        /// `namespace/name` of the Secret.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// A serving certificate with the CA bundle clients should trust.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServingCert {
    /// PEM of the serving certificate.
    pub cert_pem: String,
    /// PEM of its private key.
    pub key_pem: String,
    /// PEM of the CA certificates to publish as caBundle (may hold two during CA rotation).
    pub ca_bundle: String,
}

/// A CA that can sign serving certificates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateAuthority {
    /// PEM of the CA certificate.
    pub cert_pem: String,
    /// PEM of its private key.
    pub key_pem: String,
}

fn to_offset(t: jiff::Timestamp) -> Result<time::OffsetDateTime, CertError> {
    time::OffsetDateTime::from_unix_timestamp(t.as_second())
        .map_err(|e| CertError::Parse(e.to_string()))
}

fn add(now: jiff::Timestamp, d: Duration) -> Result<jiff::Timestamp, CertError> {
    let span = jiff::SignedDuration::try_from(d).map_err(|e| CertError::Parse(e.to_string()))?;
    now.checked_add(span)
        .map_err(|e| CertError::Parse(e.to_string()))
}

/// A new self-signed CA valid from `now` for `validity`.
pub fn generate_ca(
    common_name: &str,
    now: jiff::Timestamp,
    validity: Duration,
) -> Result<CertificateAuthority, CertError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    // Backdate a little so a replica with a slightly slow clock accepts it at once.
    params.not_before = to_offset(
        now.checked_sub(jiff::SignedDuration::from_secs(300))
            .unwrap_or(now),
    )?;
    params.not_after = to_offset(add(now, validity)?)?;
    let cert = params.self_signed(&key)?;
    Ok(CertificateAuthority {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A serving certificate for `hosts` (DNS names or IP addresses) signed by `ca`.
pub fn issue_serving(
    ca: &CertificateAuthority,
    hosts: &[String],
    now: jiff::Timestamp,
    validity: Duration,
) -> Result<(String, String), CertError> {
    let ca_key = KeyPair::from_pem(&ca.key_pem)?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key)?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(hosts.to_vec())?;
    if let Some(first) = hosts.first() {
        params
            .distinguished_name
            .push(DnType::CommonName, first.as_str());
    }
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.not_before = to_offset(
        now.checked_sub(jiff::SignedDuration::from_secs(300))
            .unwrap_or(now),
    )?;
    params.not_after = to_offset(add(now, validity)?)?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The `notAfter` of the first certificate in `pem`.
pub fn not_after(pem: &str) -> Result<jiff::Timestamp, CertError> {
    let (_, parsed) = x509_parser::pem::parse_x509_pem(pem.as_bytes())
        .map_err(|e| CertError::Parse(e.to_string()))?;
    let cert = parsed
        .parse_x509()
        .map_err(|e| CertError::Parse(e.to_string()))?;
    jiff::Timestamp::from_second(cert.validity().not_after.timestamp())
        .map_err(|e| CertError::Parse(e.to_string()))
}

/// True when `pem` expires within `renew_before` of `now` (or cannot be read).
pub fn expires_within(pem: &str, now: jiff::Timestamp, renew_before: Duration) -> bool {
    match (not_after(pem), add(now, renew_before)) {
        (Ok(end), Ok(horizon)) => end <= horizon,
        _ => true,
    }
}

/// Settings of a self-managed certificate kept in a Secret.
#[derive(Clone, Debug)]
pub struct SelfManaged {
    /// Namespace of the Secret.
    pub namespace: String,
    /// Name of the Secret (OpenKruise: `kruise-webhook-certs`).
    pub secret: String,
    /// DNS names / IPs the serving certificate covers (`<svc>.<ns>.svc` and friends).
    pub hosts: Vec<String>,
    /// CA lifetime (OpenKruise: 10 years).
    pub ca_validity: Duration,
    /// Serving certificate lifetime.
    pub serving_validity: Duration,
    /// Re-issue when this close to expiry (OpenKruise `CERTS_RENEW_BEFORE`, default 6 months).
    pub renew_before: Duration,
}

impl SelfManaged {
    /// Settings for a Service `service` in `namespace` with OpenKruise's lifetimes.
    pub fn for_service(namespace: &str, secret: &str, service: &str) -> Self {
        let year = Duration::from_secs(365 * 24 * 3600);
        SelfManaged {
            namespace: namespace.to_string(),
            secret: secret.to_string(),
            hosts: service_hosts(namespace, service),
            ca_validity: year * 10,
            serving_validity: year * 10,
            renew_before: year / 2,
        }
    }
}

/// The names a Service is reached by from the API server.
pub fn service_hosts(namespace: &str, service: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
        format!("{service}.{namespace}"),
        service.to_string(),
    ]
}

const KEY_CA_CERT: &str = "ca-cert.pem";
const KEY_CA_KEY: &str = "ca-key.pem";
const KEY_CERT: &str = "cert.pem";
const KEY_KEY: &str = "key.pem";
const KEY_PREVIOUS_CA: &str = "ca-cert-previous.pem";

fn field(data: &BTreeMap<String, ByteString>, keys: &[&str]) -> Option<String> {
    keys.iter()
        .find_map(|k| data.get(*k))
        .and_then(|b| String::from_utf8(b.0.clone()).ok())
        .filter(|s| !s.trim().is_empty())
}

/// What a Secret holds, read with either key convention.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoredCerts {
    /// The CA, when its key is stored too.
    pub ca: Option<CertificateAuthority>,
    /// A CA still trusted while a rotation settles.
    pub previous_ca: Option<String>,
    /// Serving certificate and key.
    pub serving: Option<(String, String)>,
}

impl StoredCerts {
    /// Reads a Secret's data.
    pub fn from_secret(secret: &Secret) -> Self {
        let empty = BTreeMap::new();
        let data = secret.data.as_ref().unwrap_or(&empty);
        let ca_cert = field(data, &[KEY_CA_CERT, "ca.crt"]);
        let ca_key = field(data, &[KEY_CA_KEY, "ca.key"]);
        let cert = field(data, &[KEY_CERT, "tls.crt"]);
        let key = field(data, &[KEY_KEY, "tls.key"]);
        StoredCerts {
            ca: ca_cert
                .zip(ca_key)
                .map(|(cert_pem, key_pem)| CertificateAuthority { cert_pem, key_pem }),
            previous_ca: field(data, &[KEY_PREVIOUS_CA]),
            serving: cert.zip(key),
        }
    }

    fn to_data(&self) -> BTreeMap<String, ByteString> {
        let mut d = BTreeMap::new();
        let mut put = |k: &str, v: &str| {
            d.insert(k.to_string(), ByteString(v.as_bytes().to_vec()));
        };
        if let Some(ca) = &self.ca {
            put(KEY_CA_CERT, &ca.cert_pem);
            put("ca.crt", &ca.cert_pem);
            put(KEY_CA_KEY, &ca.key_pem);
        }
        if let Some(prev) = &self.previous_ca {
            put(KEY_PREVIOUS_CA, prev);
        }
        if let Some((cert, key)) = &self.serving {
            put(KEY_CERT, cert);
            put("tls.crt", cert);
            put(KEY_KEY, key);
            put("tls.key", key);
        }
        d
    }

    /// The serving certificate and bundle, if complete.
    pub fn serving_cert(&self, now: jiff::Timestamp) -> Option<ServingCert> {
        let ca = self.ca.as_ref()?;
        let (cert_pem, key_pem) = self.serving.clone()?;
        let mut ca_bundle = ca.cert_pem.clone();
        if let Some(prev) = &self.previous_ca
            && !expires_within(prev, now, Duration::ZERO)
        {
            ca_bundle.push_str(prev);
        }
        Some(ServingCert {
            cert_pem,
            key_pem,
            ca_bundle,
        })
    }
}

/// The pure decision: given what is stored, what should be stored now. `None` means keep it.
pub fn plan_renewal(
    stored: &StoredCerts,
    settings: &SelfManaged,
    now: jiff::Timestamp,
) -> Result<Option<StoredCerts>, CertError> {
    let ca_ok = stored
        .ca
        .as_ref()
        .is_some_and(|ca| !expires_within(&ca.cert_pem, now, settings.renew_before));
    let serving_ok = stored.serving.as_ref().is_some_and(|(cert, _)| {
        !expires_within(cert, now, settings.renew_before) && covers_hosts(cert, &settings.hosts)
    });
    if ca_ok && serving_ok {
        return Ok(None);
    }
    let (ca, previous_ca) = match (&stored.ca, ca_ok) {
        (Some(ca), true) => (ca.clone(), stored.previous_ca.clone()),
        (old, _) => (
            generate_ca("kruise-rs-webhook-ca", now, settings.ca_validity)?,
            // Keep trusting the old CA while it is still valid: pods may hold old certs.
            old.as_ref()
                .map(|c| c.cert_pem.clone())
                .filter(|pem| !expires_within(pem, now, Duration::ZERO)),
        ),
    };
    let serving = issue_serving(&ca, &settings.hosts, now, settings.serving_validity)?;
    Ok(Some(StoredCerts {
        ca: Some(ca),
        previous_ca,
        serving: Some(serving),
    }))
}

fn covers_hosts(cert_pem: &str, hosts: &[String]) -> bool {
    let Ok((_, parsed)) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()) else {
        return false;
    };
    let Ok(cert) = parsed.parse_x509() else {
        return false;
    };
    let mut names: Vec<String> = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                x509_parser::extensions::GeneralName::DNSName(d) => names.push(d.to_string()),
                x509_parser::extensions::GeneralName::IPAddress(ip) => {
                    if let Ok(v4) = <[u8; 4]>::try_from(*ip) {
                        names.push(std::net::Ipv4Addr::from(v4).to_string());
                    } else if let Ok(v6) = <[u8; 16]>::try_from(*ip) {
                        names.push(std::net::Ipv6Addr::from(v6).to_string());
                    }
                }
                _ => {}
            }
        }
    }
    hosts.iter().all(|h| names.iter().any(|n| n == h))
}

/// Reads the Secret, renews what needs it, writes it back, and returns what to serve.
/// Safe to run on every replica at once.
pub async fn ensure_secret(
    api: &Api<Secret>,
    settings: &SelfManaged,
    now: jiff::Timestamp,
) -> Result<ServingCert, CertError> {
    let name = format!("{}/{}", settings.namespace, settings.secret);
    let api_err = |source| CertError::Api {
        name: name.clone(),
        source,
    };
    for _ in 0..5 {
        let existing = api.get_opt(&settings.secret).await.map_err(api_err)?;
        let stored = existing
            .as_ref()
            .map(StoredCerts::from_secret)
            .unwrap_or(StoredCerts::default());
        let Some(next) = plan_renewal(&stored, settings, now)? else {
            if let Some(s) = stored.serving_cert(now) {
                return Ok(s);
            }
            continue;
        };
        let result = match existing {
            Some(mut secret) => {
                let mut data = secret.data.take().unwrap_or_default();
                data.extend(next.to_data());
                secret.data = Some(data);
                api.replace(&settings.secret, &PostParams::default(), &secret)
                    .await
            }
            None => {
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(settings.secret.clone()),
                        namespace: Some(settings.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    data: Some(next.to_data()),
                    ..Secret::default()
                };
                api.create(&PostParams::default(), &secret).await
            }
        };
        match result {
            Ok(written) => {
                tracing::info!(secret = %name, "wrote webhook certificates");
                if let Some(s) = StoredCerts::from_secret(&written).serving_cert(now) {
                    return Ok(s);
                }
            }
            // Another replica wrote first: read again and adopt its certificates.
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(api_err(e)),
        }
    }
    Err(CertError::Parse(format!(
        "secret {name} kept changing while writing certificates"
    )))
}

/// Where the serving certificate comes from.
#[derive(Clone, Debug)]
pub enum CertSource {
    /// `tls.crt`/`tls.key` (and optional `ca.crt`) in a directory, managed by someone else.
    Files(PathBuf),
    /// A Secret this binary keeps current.
    SelfManaged(SelfManaged),
}

/// Reads a cert-manager style directory.
pub fn read_dir(dir: &std::path::Path) -> Result<ServingCert, CertError> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read_to_string(&path).map_err(|source| CertError::Io {
            path: path.display().to_string(),
            source,
        })
    };
    Ok(ServingCert {
        cert_pem: read("tls.crt")?,
        key_pem: read("tls.key")?,
        ca_bundle: read("ca.crt").unwrap_or_default(),
    })
}

/// Loads the current certificate from `source`.
pub async fn load(
    source: &CertSource,
    client: &kube::Client,
    now: jiff::Timestamp,
) -> Result<ServingCert, CertError> {
    match source {
        CertSource::Files(dir) => read_dir(dir),
        CertSource::SelfManaged(s) => {
            let api: Api<Secret> = Api::namespaced(client.clone(), &s.namespace);
            ensure_secret(&api, s, now).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn settings() -> SelfManaged {
        SelfManaged::for_service(
            "kruise-system",
            "kruise-webhook-certs",
            "kruise-webhook-service",
        )
    }

    #[test]
    fn issues_a_cert_for_the_service_names_signed_by_the_ca() {
        let planned = plan_renewal(&StoredCerts::default(), &settings(), now())
            .unwrap()
            .unwrap();
        let serving = planned.serving_cert(now()).unwrap();
        assert!(covers_hosts(&serving.cert_pem, &settings().hosts));
        let end = not_after(&serving.cert_pem).unwrap();
        assert!(end > now());
        // Nothing to do right after issuing.
        assert_eq!(plan_renewal(&planned, &settings(), now()).unwrap(), None);
    }

    #[test]
    fn reissues_serving_cert_with_same_ca_before_expiry() {
        let mut s = settings();
        s.serving_validity = Duration::from_secs(3600 * 24 * 30);
        let first = plan_renewal(&StoredCerts::default(), &s, now())
            .unwrap()
            .unwrap();
        // 6 months' renew-before is longer than the 30-day serving lifetime: renews at once,
        // keeping the CA so the published caBundle does not change.
        let second = plan_renewal(&first, &s, now()).unwrap().unwrap();
        assert_eq!(second.ca, first.ca);
        assert_ne!(second.serving, first.serving);
        assert_eq!(second.previous_ca, None);
    }

    #[test]
    fn ca_rotation_keeps_old_ca_in_bundle() {
        let mut s = settings();
        s.ca_validity = Duration::from_secs(3600 * 24 * 100);
        let first = plan_renewal(&StoredCerts::default(), &s, now())
            .unwrap()
            .unwrap();
        let second = plan_renewal(&first, &s, now()).unwrap().unwrap();
        assert_ne!(second.ca, first.ca);
        let old = first.ca.as_ref().unwrap().cert_pem.clone();
        assert_eq!(second.previous_ca.as_deref(), Some(old.as_str()));
        let bundle = second.serving_cert(now()).unwrap().ca_bundle;
        assert!(bundle.contains(&old));
        assert!(bundle.contains(&second.ca.as_ref().unwrap().cert_pem));
    }

    #[test]
    fn reissues_when_hosts_change() {
        let first = plan_renewal(&StoredCerts::default(), &settings(), now())
            .unwrap()
            .unwrap();
        let mut s = settings();
        s.hosts.push("127.0.0.1".into());
        let second = plan_renewal(&first, &s, now()).unwrap().unwrap();
        assert_eq!(second.ca, first.ca);
        assert!(covers_hosts(&second.serving.as_ref().unwrap().0, &s.hosts));
    }

    #[test]
    fn reads_openkruise_and_tls_key_names() {
        let planned = plan_renewal(&StoredCerts::default(), &settings(), now())
            .unwrap()
            .unwrap();
        let secret = Secret {
            data: Some(planned.to_data()),
            ..Secret::default()
        };
        assert_eq!(StoredCerts::from_secret(&secret), planned);
        // A secret with only the standard names (as cert-manager writes) reads too.
        let mut data = BTreeMap::new();
        let (cert, key) = planned.serving.clone().unwrap();
        let ca = planned.ca.clone().unwrap();
        data.insert("tls.crt".to_string(), ByteString(cert.clone().into_bytes()));
        data.insert("tls.key".to_string(), ByteString(key.into_bytes()));
        data.insert("ca.crt".to_string(), ByteString(ca.cert_pem.into_bytes()));
        let read = StoredCerts::from_secret(&Secret {
            data: Some(data),
            ..Secret::default()
        });
        assert_eq!(read.serving.map(|s| s.0), Some(cert));
        assert_eq!(
            read.ca, None,
            "no CA key stored: cannot sign, will generate"
        );
    }
}
