//! Logs and traces: text or JSON logs on stderr; OpenTelemetry spans exported over OTLP/gRPC
//! when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, and nothing exported (no error) when it is not.

use std::io::IsTerminal as _;

use anyhow::Context as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Log line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Keeps the trace pipeline alive; [`Telemetry::shutdown`] flushes it.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Installs the global subscriber. `level` is an `EnvFilter` directive (`info`,
    /// `kruise=debug,kube=warn`); `RUST_LOG` overrides it when set.
    pub fn init(service: &str, format: LogFormat, level: &str) -> anyhow::Result<Telemetry> {
        let filter = match std::env::var("RUST_LOG") {
            Ok(v) if !v.is_empty() => EnvFilter::try_new(v).context("invalid RUST_LOG")?,
            _ => EnvFilter::try_new(level)
                .with_context(|| format!("invalid --log-level {level:?}"))?,
        };
        let provider = match std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT") {
            Ok(endpoint) if !endpoint.is_empty() => Some(otlp_provider(service)?),
            _ => None,
        };
        let otel_layer = provider
            .as_ref()
            .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer(service.to_string())));
        let (text, json) = match format {
            LogFormat::Text => (
                Some(
                    tracing_subscriber::fmt::layer()
                        .with_ansi(std::io::stderr().is_terminal())
                        .with_writer(std::io::stderr),
                ),
                None,
            ),
            LogFormat::Json => (
                None,
                Some(
                    tracing_subscriber::fmt::layer()
                        .json()
                        .with_writer(std::io::stderr),
                ),
            ),
        };
        tracing_subscriber::registry()
            .with(filter)
            .with(text)
            .with(json)
            .with(otel_layer)
            .try_init()
            .context("installing the tracing subscriber")?;
        Ok(Telemetry { provider })
    }

    /// Whether spans are being exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Flushes and stops the exporter (bounded, so a dead collector cannot hold shutdown).
    pub fn shutdown(self) {
        if let Some(p) = self.provider
            && let Err(e) = p.shutdown_with_timeout(std::time::Duration::from_secs(5))
        {
            eprintln!("flushing traces failed: {e}");
        }
    }
}

fn otlp_provider(service: &str) -> anyhow::Result<SdkTracerProvider> {
    // The exporter reads OTEL_EXPORTER_OTLP_ENDPOINT (and the other OTEL_* variables) itself.
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .build()
        .context("building the OTLP span exporter")?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(service.to_string())
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}
