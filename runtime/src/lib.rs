//! kruise-runtime: the harness every kruise-rs binary runs on, so a family's `main.rs` is a few lines and
//! every binary behaves alike in a cluster: the same flags (each also an env var), a client
//! naming the binary, leader election on a Lease, `/metrics` `/healthz` `/readyz`, text or
//! JSON logs with optional OTLP traces, and graceful shutdown. Controllers start with
//! [`Binary::controller`] on every replica (warm caches) and write only while leading; the
//! kit they are built from — watches, status writes, events, revisions, the executor — is
//! in the submodules (see `docs/shared-crates.md`), with a family's registration ([`family`])
//! and the client shells of the PodUnavailableBudget check ([`pub_client`]) and of a
//! workload's image pre-download ([`predownload`]). The admission server is
//! `kruise-admission`.
//!
//! ```no_run
//! use kruise_runtime::{Binary, Context};
//! fn main() -> std::process::ExitCode {
//!     Binary::new("kruise-example", env!("CARGO_PKG_VERSION"))
//!         .leader(|ctx: Context| async move {
//!             // build controllers with ctx.client and run them until ctx.shutdown fires
//!             ctx.shutdown.cancelled().await;
//!             Ok(())
//!         })
//!         .main()
//! }
//! ```

mod binary;
mod client;
pub mod controller;
mod crds;
pub mod deadline;
mod endpoints;
pub mod errors;
pub mod events;
pub mod execute;
pub mod family;
mod flags;

/// The allocator every kruise-rs binary declares (`#[global_allocator] static ALLOCATOR:
/// Allocator = Allocator;` in its `main.rs`): jemalloc, with two arenas and freed pages
/// handed back to the system at once (the settings are compiled in, from
/// `.cargo/config.toml`). A controller's heap is long-lived cached objects interleaved with
/// short-lived ones (every watch event decodes a new version of a pod); with glibc's malloc
/// the CloneSet controller kept 63–68 MiB after scaling to 10,000 pods and 46–54 MiB after
/// a restart with the same pods, with this 55–56 MiB and 44 MiB after a restart
/// (`cargo bench -p kruise-cloneset`).
pub use tikv_jemallocator::Jemalloc as Allocator;

pub mod leader;
pub mod metrics;
pub mod predownload;
pub mod pub_client;
pub mod revisions;
pub mod scale_writes;
pub mod status;
pub mod telemetry;
pub mod watch;
pub mod writes;

pub(crate) use binary::signal_shutdown;
pub use binary::{Binary, Context, Outcome};
pub use client::{build_client, client_from, install_crypto_provider};
pub use controller::{
    Leadership, ReconcileError, RunOptions, WarmStream, run_controller, trim_for_cache,
    warm_until_leading,
};
pub use crds::{crds_yaml, deletion_protected};
pub use endpoints::{Endpoints, Readiness, serve_endpoints};
pub use errors::{is_already_exists, is_conflict, is_not_found};
pub use flags::{EXIT_FAILURE, EXIT_USAGE, Flags, NoArgs, parse_addr, parse_duration};
pub use leader::{LeaderElector, LeaderTimings};
pub use metrics::Metrics;
pub use telemetry::LogFormat;
