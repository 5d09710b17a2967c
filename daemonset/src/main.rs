//! `kruise-daemonset [run|crd|manifests]`: the Advanced DaemonSet webhooks — defaulting,
//! validation, `/convert` — on every replica.

#[global_allocator]
static ALLOCATOR: kruise_common::runtime::Allocator = kruise_common::runtime::Allocator;

fn main() -> std::process::ExitCode {
    kruise_common::family::main(kruise_daemonset::binary::family)
}
