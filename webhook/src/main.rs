//! `kruise-webhook [run|manifests]`: the pod mutating chain composed from the steps the
//! families of `kruise_webhook::registry` lend it.

#[global_allocator]
static ALLOCATOR: kruise_common::runtime::Allocator = kruise_common::runtime::Allocator;

fn main() -> std::process::ExitCode {
    kruise_common::family::main(kruise_webhook::family)
}
