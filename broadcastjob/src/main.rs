//! `kruise-broadcastjob [run|crd|manifests]`: the BroadcastJob and AdvancedCronJob
//! controllers (on the leader) and their webhooks — defaulting, validation, `/convert` —
//! (on every replica).

#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

fn main() -> std::process::ExitCode {
    kruise_runtime::family::main(kruise_broadcastjob::binary::family)
}
