//! What an API error means to a controller, by status code and reason (client-go's
//! `apierrors.IsNotFound` and friends), so every family reads them the same way.

/// True when a kube error is a 404 Not Found from the API server.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// True when a create found the name taken (409 with reason `AlreadyExists`).
pub fn is_already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists")
}

/// True when a kube error is a 409 Conflict from the API server: an optimistic-concurrency
/// conflict (a stale resourceVersion) or a name already taken.
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// A write the API server refused, naming the object written: the payload of a family's
/// per-step error variants (`CreatePod(WriteError)`, `Revision(WriteError)`, …).
#[derive(Debug, thiserror::Error)]
#[error("{name}: {source}")]
pub struct WriteError {
    /// The object written (`name`, or `namespace/name` for a cluster-wide controller).
    pub name: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

impl WriteError {
    /// A `map_err` adapter naming `name`.
    pub fn on(name: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let name = name.into();
        move |source| Self { name, source }
    }

    /// True when the write hit an optimistic-concurrency conflict (see [`is_conflict`]).
    pub fn is_conflict(&self) -> bool {
        is_conflict(&self.source)
    }
}

/// Why a status could not be written ([`crate::status`]).
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// The status did not encode as JSON (a condition, a quantity…): never written as `null`.
    #[error("encoding the status: {0}")]
    Encode(#[source] serde_json::Error),
    /// The API server refused the write.
    #[error("writing the status: {0}")]
    Api(#[source] kube::Error),
}

impl StatusError {
    /// The API error, when the API server refused the write.
    pub fn api_error(&self) -> Option<&kube::Error> {
        match self {
            StatusError::Api(e) => Some(e),
            StatusError::Encode(_) => None,
        }
    }
}

/// The failures of the steps every workload controller's shell shares, each with its own
/// low-cardinality category. A family's error type wraps it (`Shell(#[from] ShellError)`)
/// beside the variants of its own steps.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// Observe: the expectations could not be read or recorded.
    #[error(transparent)]
    Expectations(#[from] kruise_core::expectations::PoisonedExpectations),
    /// Revision: creating, updating or deleting a ControllerRevision.
    #[error("writing controller revision {0}")]
    Revision(#[source] WriteError),
    /// Execute: patching a pod or its status.
    #[error("updating pod {0}")]
    UpdatePod(#[source] WriteError),
    /// Execute: creating a workload's pod, or a claim of it (named `pod …`, `claim …`).
    #[error("creating {0}")]
    CreatePod(#[source] WriteError),
    /// Execute: deleting a workload's pod, or a claim of it (named `pod …`, `claim …`).
    #[error("deleting {0}")]
    DeletePod(#[source] WriteError),
    /// Execute: a pod's planned status did not encode (never written as `null`).
    #[error("encoding the status of pod {name}: {source}")]
    EncodePodStatus {
        /// The pod.
        name: String,
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// Execute: creating an owned object (a pod, a child job, a copy).
    #[error("creating {0}")]
    Create(#[source] WriteError),
    /// Execute: updating an owned object other than a pod.
    #[error("updating {0}")]
    Update(#[source] WriteError),
    /// Execute: deleting an owned object, or the owner itself.
    #[error("deleting {0}")]
    Delete(#[source] WriteError),
    /// Observe: reading what the caches do not hold.
    #[error("reading {0}")]
    Read(#[source] WriteError),
    /// Status: writing the owner's status.
    #[error("writing the status of {name}: {source}")]
    Status {
        /// The owner.
        name: String,
        /// What failed.
        #[source]
        source: StatusError,
    },
}

impl ShellError {
    /// The metric and event label of the failed step.
    pub fn category(&self) -> &'static str {
        match self {
            ShellError::Expectations(_) => "expectations",
            ShellError::Revision(_) => "revision",
            ShellError::UpdatePod(_) => "update_pods",
            ShellError::CreatePod(_) => "create_pods",
            ShellError::DeletePod(_) => "delete_pods",
            ShellError::EncodePodStatus { .. } => "encode",
            ShellError::Create(_) => "create",
            ShellError::Update(_) => "update",
            ShellError::Delete(_) => "delete",
            ShellError::Read(_) => "read",
            ShellError::Status { .. } => "update_status",
        }
    }

    /// True for an optimistic-concurrency conflict (requeued quietly).
    pub fn is_conflict(&self) -> bool {
        match self {
            ShellError::Expectations(_) | ShellError::EncodePodStatus { .. } => false,
            ShellError::Revision(e)
            | ShellError::UpdatePod(e)
            | ShellError::CreatePod(e)
            | ShellError::DeletePod(e)
            | ShellError::Create(e)
            | ShellError::Update(e)
            | ShellError::Delete(e)
            | ShellError::Read(e) => e.is_conflict(),
            ShellError::Status { source, .. } => source.api_error().is_some_and(is_conflict),
        }
    }

    /// A pod patch (of the pod, its status or its resize) that failed, of pod `name`.
    pub fn update_pod(name: &str, source: kube::Error) -> Self {
        ShellError::UpdatePod(WriteError {
            name: name.to_string(),
            source,
        })
    }

    /// A failed create of a workload's pod or claim, named `pod …` or `claim …`.
    pub fn create_pod(what: &str, source: kube::Error) -> Self {
        ShellError::CreatePod(WriteError::on(what)(source))
    }

    /// A failed delete of a workload's pod or claim, named `pod …` or `claim …`.
    pub fn delete_pod(what: &str, source: kube::Error) -> Self {
        ShellError::DeletePod(WriteError::on(what)(source))
    }

    /// A `map_err` adapter for a failed status write of `name`.
    pub fn status_of(name: impl Into<String>) -> impl FnOnce(StatusError) -> Self {
        let name = name.into();
        move |source| ShellError::Status { name, source }
    }
}

/// A shell with no steps of its own reports the shared ones directly.
impl super::ReconcileError for ShellError {
    fn category(&self) -> &'static str {
        ShellError::category(self)
    }
    fn is_conflict(&self) -> bool {
        ShellError::is_conflict(self)
    }
}

/// A 404 error for an object a controller expected in its cache but no longer finds there
/// (deleted meanwhile): reported like the API server's own Not Found.
pub fn not_found(what: &str) -> kube::Error {
    kube::Error::Api(Box::new(kube::core::Status {
        status: Some(kube::core::response::StatusSummary::Failure),
        message: format!("{what} is no longer in the cache"),
        reason: "NotFound".into(),
        code: 404,
        ..Default::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            reason: reason.into(),
            ..Default::default()
        }))
    }

    #[test]
    fn codes_and_reasons_are_told_apart() {
        assert!(is_not_found(&api_error(404, "NotFound")));
        assert!(is_not_found(&not_found("pod p")));
        assert!(!is_not_found(&api_error(409, "Conflict")));
        assert!(is_already_exists(&api_error(409, "AlreadyExists")));
        assert!(!is_already_exists(&api_error(409, "Conflict")));
        assert!(is_conflict(&api_error(409, "Conflict")));
        assert!(is_conflict(&api_error(409, "AlreadyExists")));
        assert!(!is_conflict(&api_error(500, "InternalError")));
    }

    #[test]
    fn pod_writes_name_what_failed_and_keep_their_metric_categories() {
        let create = ShellError::create_pod("claim data-web-0", api_error(409, "Conflict"));
        assert!(
            create
                .to_string()
                .starts_with("creating claim data-web-0: ")
        );
        assert_eq!(
            (create.category(), create.is_conflict()),
            ("create_pods", true)
        );
        let delete = ShellError::delete_pod("pod web-0", api_error(500, "InternalError"));
        assert_eq!(
            (delete.category(), delete.is_conflict()),
            ("delete_pods", false)
        );
        let update = ShellError::update_pod("web-0", api_error(409, "Conflict"));
        assert!(update.to_string().starts_with("updating pod web-0: "));
        assert_eq!(
            (update.category(), update.is_conflict()),
            ("update_pods", true)
        );
    }
}
