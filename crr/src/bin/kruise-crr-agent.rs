//! `kruise-crr-agent`: the ContainerRecreateRequest node agent alone (what the chart's
//! DaemonSet runs; `NODE_NAME` from the downward API). It behaves as `kruise-crr agent` and
//! takes the same flags, in a binary without the family's CRD schemas, webhooks and
//! controllers, so an agent keeps less of it resident on every node.

#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

fn main() -> std::process::ExitCode {
    use kruise_crr::binary::{BINARY, node_agent};
    kruise_runtime::family::agent_binary_main(BINARY, node_agent())
}
