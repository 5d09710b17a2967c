//! `kruise-protection [run|crd|manifests]`: the PodUnavailableBudget CRD's webhooks —
//! validation and `/convert` — on every replica.

#[global_allocator]
static ALLOCATOR: kruise_common::runtime::Allocator = kruise_common::runtime::Allocator;

fn main() -> std::process::ExitCode {
    kruise_common::family::main(kruise_protection::binary::family)
}
