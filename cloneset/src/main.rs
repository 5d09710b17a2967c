//! `kruise-cloneset [run|crd|manifests]`: the CloneSet controller (on the leader) and the
//! CloneSet webhooks — defaulting, validation, `/convert` — (on every replica).

#[global_allocator]
static ALLOCATOR: kruise_common::runtime::Allocator = kruise_common::runtime::Allocator;

fn main() -> std::process::ExitCode {
    match kruise_cloneset::binary::binary() {
        Ok(binary) => binary.main(),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
