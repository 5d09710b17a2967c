//! A container's probes and lifecycle hooks and their handlers.

use super::*;

/// The four handler types of a probe, or the four of a lifecycle hook (`sleep` in place of
/// `grpc`), in kube-apiserver's order.
struct Handlers<'a> {
    exec: Option<&'a [String]>,
    http_get: Option<(&'a IntOrString, Option<&'a str>)>,
    tcp_socket: Option<&'a IntOrString>,
    grpc_port: Option<i32>,
    sleep_seconds: Option<i64>,
}

fn validate_handlers(
    handlers: &Handlers<'_>,
    path: &Path,
    grace_period_seconds: i64,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut found = 0;
    let mut take = |field: &str, errors: &mut Vec<FieldError>| {
        found += 1;
        if found > 1 {
            errors.push(FieldError::forbidden(
                path.child(field),
                MORE_THAN_ONE_HANDLER_TYPE,
            ));
            false
        } else {
            true
        }
    };
    if let Some(command) = handlers.exec
        && take("exec", &mut errors)
        && command.is_empty()
    {
        errors.push(FieldError::required(
            path.child("exec").child("command"),
            "",
        ));
    }
    if let Some((port, scheme)) = handlers.http_get
        && take("httpGet", &mut errors)
    {
        let at = path.child("httpGet");
        errors.extend(port_errors(port, &at.child("port")));
        if let Some(scheme) = scheme.filter(|s| !s.is_empty())
            && !matches!(scheme, "HTTP" | "HTTPS")
        {
            errors.push(FieldError::not_supported(
                at.child("scheme"),
                scheme,
                &["HTTP", "HTTPS"],
            ));
        }
    }
    if let Some(port) = handlers.tcp_socket
        && take("tcpSocket", &mut errors)
    {
        errors.extend(port_errors(port, &path.child("tcpSocket").child("port")));
    }
    if let Some(port) = handlers.grpc_port
        && take("grpc", &mut errors)
        && !port_number_ok(port)
    {
        errors.push(FieldError::invalid(
            path.child("grpc").child("port"),
            port,
            PORT_RANGE_MESSAGE,
        ));
    }
    if let Some(seconds) = handlers.sleep_seconds
        && take("sleep", &mut errors)
        && !(0..=grace_period_seconds).contains(&seconds)
    {
        errors.push(FieldError::invalid(
            path.child("sleep"),
            seconds,
            format!("must be non-negative and less than terminationGracePeriodSeconds ({grace_period_seconds})"),
        ));
    }
    if found == 0 {
        errors.push(FieldError::required(
            path.clone(),
            "must specify a handler type",
        ));
    }
    errors
}

/// `ValidatePortNumOrName`.
fn port_errors(port: &IntOrString, at: &Path) -> Vec<FieldError> {
    match port {
        IntOrString::Int(n) if !port_number_ok(*n) => {
            vec![FieldError::invalid(at.clone(), *n, PORT_RANGE_MESSAGE)]
        }
        IntOrString::Int(_) => Vec::new(),
        IntOrString::String(name) => port_name_errors(name)
            .into_iter()
            .map(|detail| FieldError::invalid(at.clone(), name, detail))
            .collect(),
    }
}

/// A probe: one handler, non-negative timings and thresholds (zero is defaulted), a
/// positive probe-level grace period, and `successThreshold` 1 for liveness and startup.
pub(super) fn validate_probe(probe: &Probe, kind: &str, path: &Path) -> Vec<FieldError> {
    let handlers = Handlers {
        exec: probe
            .exec
            .as_ref()
            .map(|e| e.command.as_deref().unwrap_or(&[])),
        http_get: probe
            .http_get
            .as_ref()
            .map(|h| (&h.port, h.scheme.as_deref())),
        tcp_socket: probe.tcp_socket.as_ref().map(|t| &t.port),
        grpc_port: probe.grpc.as_ref().map(|g| g.port),
        sleep_seconds: None,
    };
    let mut errors = validate_handlers(&handlers, path, DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS);
    for (field, value) in [
        ("initialDelaySeconds", probe.initial_delay_seconds),
        ("timeoutSeconds", probe.timeout_seconds),
        ("periodSeconds", probe.period_seconds),
        ("successThreshold", probe.success_threshold),
        ("failureThreshold", probe.failure_threshold),
    ] {
        if let Some(v) = value.filter(|v| *v < 0) {
            errors.push(FieldError::invalid(path.child(field), v, NEGATIVE_MESSAGE));
        }
    }
    if let Some(seconds) = probe.termination_grace_period_seconds {
        if kind == "readinessProbe" {
            errors.push(FieldError::invalid(
                path.child("terminationGracePeriodSeconds"),
                seconds,
                "must not be set for readinessProbes",
            ));
        } else if seconds <= 0 {
            errors.push(FieldError::invalid(
                path.child("terminationGracePeriodSeconds"),
                seconds,
                "must be greater than 0",
            ));
        }
    }
    // Zero is defaulted to 1 before the API server checks this.
    if kind != "readinessProbe"
        && let Some(threshold) = probe.success_threshold.filter(|t| *t != 0 && *t != 1)
    {
        errors.push(FieldError::invalid(
            path.child("successThreshold"),
            threshold,
            "must be 1",
        ));
    }
    errors
}

pub(super) fn validate_lifecycle(
    lifecycle: &Lifecycle,
    path: &Path,
    grace_period_seconds: i64,
) -> Vec<FieldError> {
    let hook = |handler: &LifecycleHandler, field: &str| {
        let handlers = Handlers {
            exec: handler
                .exec
                .as_ref()
                .map(|e| e.command.as_deref().unwrap_or(&[])),
            http_get: handler
                .http_get
                .as_ref()
                .map(|h| (&h.port, h.scheme.as_deref())),
            tcp_socket: handler.tcp_socket.as_ref().map(|t| &t.port),
            grpc_port: None,
            sleep_seconds: handler.sleep.as_ref().map(|s| s.seconds),
        };
        validate_handlers(&handlers, &path.child(field), grace_period_seconds)
    };
    let mut errors = Vec::new();
    if let Some(handler) = &lifecycle.post_start {
        errors.extend(hook(handler, "postStart"));
    }
    if let Some(handler) = &lifecycle.pre_stop {
        errors.extend(hook(handler, "preStop"));
    }
    errors
}
