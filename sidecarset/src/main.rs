//! `kruise-sidecarset [run|crd|manifests]`: the SidecarSet controller (on the leader) and the
//! SidecarSet webhooks — defaulting, validation, `/convert` — (on every replica).

#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

fn main() -> std::process::ExitCode {
    kruise_runtime::family::main(kruise_sidecarset::binary::family)
}
