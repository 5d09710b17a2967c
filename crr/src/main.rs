//! `kruise-crr [run|crd|manifests]`: the ContainerRecreateRequest webhooks (defaulting and
//! checks against the pod, `/convert`) on every replica.

#[global_allocator]
static ALLOCATOR: kruise_common::runtime::Allocator = kruise_common::runtime::Allocator;

fn main() -> std::process::ExitCode {
    kruise_common::family::main(kruise_crr::binary::family)
}
