//! Which CRI socket a node agent talks to (OpenKruise's `detectRuntime`): the socket it is
//! given, or the first runtime socket found under the host's `/var/run`; or a clean
//! "disabled" with the reason, which the agent logs and writes on the requests it cannot
//! carry out, instead of exiting into a crash loop (K#1245, K#1634, K#1196).

use std::path::{Path, PathBuf};

/// Socket files looked for under the host's `/var/run`, in order (containerd, k3s's
/// containerd, CRI-O, cri-dockerd).
pub const CANDIDATES: [&str; 7] = [
    "containerd.sock",
    "containerd/containerd.sock",
    "k3s/containerd/containerd.sock",
    "crio.sock",
    "crio/crio.sock",
    "cri-dockerd.sock",
    "cri-dockerd/cri-dockerd.sock",
];
/// Docker Engine's own socket, which speaks no CRI.
pub const DOCKER_SOCKET: &str = "docker.sock";
/// Where an agent's DaemonSet mounts the host's `/var/run` (the charts' agents do).
pub const HOST_VAR_RUN: &str = "/hostvarrun";

/// Where the agent's runtime is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// The CRI socket to dial.
    Socket(PathBuf),
    /// No CRI runtime: why.
    Disabled(String),
}

/// The endpoint for `configured` (a socket path, absolute or relative to `var_run`, with
/// or without `unix://`; empty means unset) or, when unset, the first of [`CANDIDATES`]
/// that `exists` under `var_run`.
pub fn endpoint(
    configured: Option<&str>,
    var_run: &Path,
    exists: impl Fn(&Path) -> bool,
) -> Endpoint {
    let configured = configured
        .map(|c| c.trim().trim_start_matches("unix://"))
        .filter(|c| !c.is_empty());
    if let Some(socket) = configured {
        let path = if Path::new(socket).is_absolute() {
            PathBuf::from(socket)
        } else {
            var_run.join(socket)
        };
        return if exists(&path) {
            Endpoint::Socket(path)
        } else {
            Endpoint::Disabled(format!("CRI socket {} does not exist", path.display()))
        };
    }
    if let Some(path) = CANDIDATES
        .iter()
        .map(|c| var_run.join(c))
        .find(|p| exists(p))
    {
        return Endpoint::Socket(path);
    }
    if exists(&var_run.join(DOCKER_SOCKET)) {
        return Endpoint::Disabled(format!(
            "found {} but no CRI socket: Docker Engine speaks no CRI (dockershim was removed in Kubernetes 1.24); run cri-dockerd",
            var_run.join(DOCKER_SOCKET).display()
        ));
    }
    Endpoint::Disabled(format!(
        "no CRI socket under {} (looked for {})",
        var_run.display(),
        CANDIDATES.join(", ")
    ))
}

/// The endpoint of an agent given `configured` (empty: looked for under the host's
/// `/var/run`, mounted at [`HOST_VAR_RUN`]).
pub fn agent_endpoint(configured: &Path) -> Endpoint {
    let configured = configured.to_string_lossy();
    endpoint(Some(&configured), Path::new(HOST_VAR_RUN), |p| p.exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(files: &[&str], configured: Option<&str>) -> Endpoint {
        let files: Vec<PathBuf> = files.iter().map(PathBuf::from).collect();
        endpoint(configured, Path::new("/hostvarrun"), |p| {
            files.iter().any(|f| f == p)
        })
    }

    fn socket(path: &str) -> Endpoint {
        Endpoint::Socket(PathBuf::from(path))
    }

    #[test]
    fn socket_layouts_yield_an_endpoint_or_a_clean_disabled_state() {
        let cases: Vec<(&str, Vec<&str>, Option<&str>, Endpoint)> = vec![
            (
                "containerd",
                vec!["/hostvarrun/containerd/containerd.sock"],
                None,
                socket("/hostvarrun/containerd/containerd.sock"),
            ),
            (
                "containerd at the top wins",
                vec![
                    "/hostvarrun/containerd/containerd.sock",
                    "/hostvarrun/containerd.sock",
                ],
                None,
                socket("/hostvarrun/containerd.sock"),
            ),
            (
                "k3s",
                vec!["/hostvarrun/k3s/containerd/containerd.sock"],
                None,
                socket("/hostvarrun/k3s/containerd/containerd.sock"),
            ),
            (
                "cri-o",
                vec!["/hostvarrun/crio/crio.sock"],
                None,
                socket("/hostvarrun/crio/crio.sock"),
            ),
            (
                "cri-dockerd next to docker",
                vec!["/hostvarrun/docker.sock", "/hostvarrun/cri-dockerd.sock"],
                None,
                socket("/hostvarrun/cri-dockerd.sock"),
            ),
            (
                "relative configured",
                vec!["/hostvarrun/containerd/containerd.sock"],
                Some("containerd/containerd.sock"),
                socket("/hostvarrun/containerd/containerd.sock"),
            ),
            (
                "absolute configured",
                vec!["/run/k3s/containerd/containerd.sock"],
                Some("/run/k3s/containerd/containerd.sock"),
                socket("/run/k3s/containerd/containerd.sock"),
            ),
            (
                "unix:// configured",
                vec!["/tmp/sim/node-1.sock"],
                Some("unix:///tmp/sim/node-1.sock"),
                socket("/tmp/sim/node-1.sock"),
            ),
            (
                "empty flag means unset",
                vec!["/hostvarrun/containerd.sock"],
                Some(""),
                socket("/hostvarrun/containerd.sock"),
            ),
            (
                "configured but missing",
                vec!["/hostvarrun/containerd.sock"],
                Some("crio.sock"),
                Endpoint::Disabled("CRI socket /hostvarrun/crio.sock does not exist".into()),
            ),
        ];
        for (what, files, configured, want) in cases {
            assert_eq!(with(&files, configured), want, "{what}");
        }
    }

    #[test]
    fn docker_without_cri_and_nothing_at_all_are_disabled_with_the_reason() {
        let Endpoint::Disabled(why) = with(&["/hostvarrun/docker.sock"], None) else {
            panic!("docker.sock alone is no CRI runtime");
        };
        assert!(why.contains("Docker Engine speaks no CRI"), "{why}");
        assert!(why.contains("cri-dockerd"), "{why}");
        let Endpoint::Disabled(why) = with(&[], None) else {
            panic!("no socket at all");
        };
        assert!(why.starts_with("no CRI socket under /hostvarrun"), "{why}");
    }
}
