//! `kruise-webhook [run|manifests]`: the pod mutating chain composed from the steps the
//! families of `kruise_webhook::registry` lend it.

#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

fn main() -> std::process::ExitCode {
    kruise_runtime::family::main(kruise_webhook::family)
}
