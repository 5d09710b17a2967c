//! `kruise-broadcastjob [run|crd|manifests]`: the BroadcastJob and AdvancedCronJob
//! controllers (on the leader) and their webhooks — defaulting, validation, `/convert` —
//! (on every replica).

#[global_allocator]
static ALLOCATOR: kruise_common::runtime::Allocator = kruise_common::runtime::Allocator;

fn main() -> std::process::ExitCode {
    kruise_common::family::main(kruise_broadcastjob::binary::family)
}
