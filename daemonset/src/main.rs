//! `kruise-daemonset [run|crd|manifests]`: the Advanced DaemonSet webhooks — defaulting,
//! validation, `/convert` — on every replica.

#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

fn main() -> std::process::ExitCode {
    kruise_runtime::family::main(kruise_daemonset::binary::family)
}
