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
}
