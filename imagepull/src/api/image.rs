//! Image references as Docker's `reference.ParseNormalizedNamed` reads them: a NodeImage keys
//! an image by its familiar name (`nginx`, `quay.io/org/app`) and a tag (`latest` when none,
//! the digest when pinned); the agent pulls `name:tag` and matches pull secrets by registry.

use std::fmt;

/// The registry an image without one comes from.
pub const DEFAULT_DOMAIN: &str = "docker.io";
/// The tag an image without tag or digest gets.
pub const DEFAULT_TAG: &str = "latest";
const OFFICIAL_REPOSITORY_PREFIX: &str = "library/";
const MAX_NAME_LEN: usize = 255;
const MAX_TAG_LEN: usize = 128;

/// Why an image reference does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageRefError {
    /// Empty reference.
    #[error("repository name must have at least one component")]
    Empty,
    /// Upper case letters in the repository path.
    #[error("repository name must be lowercase")]
    NotLowercase,
    /// A component, tag or digest outside the grammar.
    #[error("invalid reference format")]
    Invalid,
    /// Name longer than 255 characters.
    #[error("repository name must not be more than 255 characters")]
    NameTooLong,
}

/// A parsed, normalized image reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// Registry host (and port), `docker.io` when none was given.
    pub domain: String,
    /// Repository path inside the registry (`library/nginx` for Docker Hub's official images).
    pub path: String,
    /// The tag, when one was given.
    pub tag: Option<String>,
    /// The digest (`sha256:…`), when one was given.
    pub digest: Option<String>,
}

impl ImageRef {
    /// Parses `reference` (`nginx`, `nginx:1.25`, `reg:5000/app@sha256:…`).
    pub fn parse(reference: &str) -> Result<Self, ImageRefError> {
        if reference.is_empty() {
            return Err(ImageRefError::Empty);
        }
        let (rest, digest) = match reference.split_once('@') {
            Some((rest, digest)) => {
                if !is_digest(digest) {
                    return Err(ImageRefError::Invalid);
                }
                (rest, Some(digest.to_string()))
            }
            None => (reference, None),
        };
        // A `:` after the last `/` starts the tag; one before it belongs to a host's port.
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => {
                let tag = &rest[last_slash + i + 1..];
                if !is_tag(tag) {
                    return Err(ImageRefError::Invalid);
                }
                (&rest[..last_slash + i], Some(tag.to_string()))
            }
            None => (rest, None),
        };
        if name.is_empty() {
            return Err(ImageRefError::Empty);
        }
        let (domain, path) = split_domain(name);
        if !is_domain(&domain) {
            return Err(ImageRefError::Invalid);
        }
        for component in path.split('/') {
            if component.chars().any(|c| c.is_ascii_uppercase()) {
                return Err(ImageRefError::NotLowercase);
            }
            if !is_path_component(component) {
                return Err(ImageRefError::Invalid);
            }
        }
        if domain.len() + 1 + path.len() > MAX_NAME_LEN {
            return Err(ImageRefError::NameTooLong);
        }
        Ok(Self {
            domain,
            path,
            tag,
            digest,
        })
    }

    /// Docker's familiar name: `nginx` for `docker.io/library/nginx`, `org/app` for
    /// `docker.io/org/app`, `host/path` otherwise. A NodeImage's key.
    pub fn familiar_name(&self) -> String {
        if self.domain != DEFAULT_DOMAIN {
            return format!("{}/{}", self.domain, self.path);
        }
        match self.path.strip_prefix(OFFICIAL_REPOSITORY_PREFIX) {
            Some(short) if !short.contains('/') => short.to_string(),
            _ => self.path.clone(),
        }
    }

    /// The tag a NodeImage records: the digest when pinned, else the tag, `latest` when none.
    pub fn api_tag(&self) -> String {
        self.digest
            .clone()
            .or_else(|| self.tag.clone())
            .unwrap_or_else(|| DEFAULT_TAG.to_string())
    }

    /// The fully qualified name without tag (`docker.io/library/nginx`).
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.domain, self.path)
    }
}

/// The reference to pull for a NodeImage's image `name` and `tag`: `name@digest` for a
/// digest, `name:tag` otherwise.
pub fn pull_reference(name: &str, tag: &str) -> String {
    if tag.contains(':') {
        format!("{name}@{tag}")
    } else {
        format!("{name}:{tag}")
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}",
            pull_reference(&self.familiar_name(), &self.api_tag())
        )
    }
}

/// The host part: the first component when it has a `.` or `:` or is `localhost`
/// (Docker's rule), else `docker.io`; a Docker Hub name of one component is an official
/// image under `library/`.
fn split_domain(name: &str) -> (String, String) {
    let (domain, path) = match name.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            (first.to_string(), rest.to_string())
        }
        _ => (DEFAULT_DOMAIN.to_string(), name.to_string()),
    };
    let domain = if domain == "index.docker.io" {
        DEFAULT_DOMAIN.to_string()
    } else {
        domain
    };
    if domain == DEFAULT_DOMAIN && !path.contains('/') {
        (domain, format!("{OFFICIAL_REPOSITORY_PREFIX}{path}"))
    } else {
        (domain, path)
    }
}

fn is_domain(domain: &str) -> bool {
    let (host, port) = match domain.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (domain, None),
    };
    let host_ok = !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    host_ok && port.is_none_or(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
fn is_path_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let separator = &component[start..i];
        let ok = matches!(separator, "." | "_" | "__") || separator.bytes().all(|b| b == b'-');
        if !ok {
            return false;
        }
    }
    true
}

/// `[\w][\w.-]{0,127}`.
fn is_tag(tag: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    tag.len() <= MAX_TAG_LEN
        && tag.chars().next().is_some_and(word)
        && tag.chars().all(|c| word(c) || c == '.' || c == '-')
}

/// `algorithm:hex` with at least 32 hex digits.
fn is_digest(digest: &str) -> bool {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return false;
    };
    !algorithm.is_empty()
        && algorithm
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
        && algorithm
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+' | '.'))
        && hex.len() >= 32
        && hex.chars().all(|c| c.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn names_and_tags_normalize_as_docker_does() {
        for (input, name, tag, full) in [
            ("nginx", "nginx", "latest", "docker.io/library/nginx"),
            ("nginx:1.25", "nginx", "1.25", "docker.io/library/nginx"),
            (
                "docker.io/library/nginx:1",
                "nginx",
                "1",
                "docker.io/library/nginx",
            ),
            (
                "index.docker.io/org/app",
                "org/app",
                "latest",
                "docker.io/org/app",
            ),
            (
                "localhost:5000/app:v1",
                "localhost:5000/app",
                "v1",
                "localhost:5000/app",
            ),
            (
                "reg.example.com/a/b/c:x_y.z-1",
                "reg.example.com/a/b/c",
                "x_y.z-1",
                "reg.example.com/a/b/c",
            ),
            ("localhost/app", "localhost/app", "latest", "localhost/app"),
        ] {
            let r = ImageRef::parse(input).unwrap();
            assert_eq!(
                (
                    r.familiar_name().as_str(),
                    r.api_tag().as_str(),
                    r.full_name().as_str()
                ),
                (name, tag, full),
                "{input}"
            );
        }
        let pinned = ImageRef::parse(&format!("busybox:1.36@{DIGEST}")).unwrap();
        assert_eq!(pinned.api_tag(), DIGEST);
        assert_eq!(pinned.to_string(), format!("busybox@{DIGEST}"));
        assert_eq!(
            ImageRef::parse("nginx").unwrap().to_string(),
            "nginx:latest"
        );
    }

    #[test]
    fn malformed_references_are_refused_with_docker_messages() {
        for (input, error) in [
            ("", ImageRefError::Empty),
            ("Nginx", ImageRefError::NotLowercase),
            ("nginx:", ImageRefError::Invalid),
            ("nginx:-bad", ImageRefError::Invalid),
            ("ngi--nx_", ImageRefError::Invalid),
            ("a//b", ImageRefError::Invalid),
            ("nginx@sha256:abc", ImageRefError::Invalid),
            (":tag", ImageRefError::Empty),
        ] {
            assert_eq!(ImageRef::parse(input), Err(error), "{input:?}");
        }
        assert_eq!(
            ImageRef::parse(&"a".repeat(300)),
            Err(ImageRefError::NameTooLong)
        );
    }
}
