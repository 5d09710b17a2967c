//! `kruise-imagepull [run|crd|manifests]`: the ImagePullJob, ImageListPullJob and NodeImage
//! webhooks — defaulting, validation, `/convert` — on every replica.

#[global_allocator]
static ALLOCATOR: kruise_common::runtime::Allocator = kruise_common::runtime::Allocator;

fn main() -> std::process::ExitCode {
    kruise_common::family::main(kruise_imagepull::binary::family)
}
