//! `kruise-statefulset [run|crd|manifests]`: the Advanced StatefulSet controller (on the
//! leader) and its webhooks — defaulting, validation, `/convert` — (on every replica).

#[global_allocator]
static ALLOCATOR: kruise_common::runtime::Allocator = kruise_common::runtime::Allocator;

fn main() -> std::process::ExitCode {
    kruise_common::family::main(kruise_statefulset::binary::family)
}
