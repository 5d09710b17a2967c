//! `kruise-cloneset [run|crd|manifests]`: the CloneSet controller (on the leader) and the
//! CloneSet webhooks — defaulting, validation, `/convert` — (on every replica).

#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

fn main() -> std::process::ExitCode {
    kruise_runtime::family::main(kruise_cloneset::binary::family)
}
