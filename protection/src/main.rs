//! `kruise-protection [run|crd|manifests]`: the PodUnavailableBudget CRD's webhooks —
//! validation and `/convert` — on every replica.

#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

fn main() -> std::process::ExitCode {
    kruise_runtime::family::main(kruise_protection::binary::family)
}
