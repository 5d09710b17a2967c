//! `kruise-sidecarset [run|crd|manifests]`: the SidecarSet controller (on the leader) and the
//! SidecarSet webhooks — defaulting, validation, `/convert` — (on every replica).

#[global_allocator]
static ALLOCATOR: kruise_common::runtime::Allocator = kruise_common::runtime::Allocator;

fn main() -> std::process::ExitCode {
    kruise_common::family::main(kruise_sidecarset::binary::family)
}
