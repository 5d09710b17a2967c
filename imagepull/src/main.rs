//! `kruise-imagepull [run|crd|manifests]`: the ImagePullJob, ImageListPullJob and NodeImage
//! webhooks — defaulting, validation, `/convert` — on every replica and its controllers on
//! the leader; `kruise-imagepull agent`: the node agent pulling through CRI (a DaemonSet).

#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

fn main() -> std::process::ExitCode {
    use kruise_imagepull::binary::{BINARY, family, node_agent};
    kruise_runtime::family::main_with_agent(BINARY, node_agent, family)
}
