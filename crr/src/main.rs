//! `kruise-crr [run|crd|manifests]`: the ContainerRecreateRequest webhook (defaulting and
//! checks against the pod, `/convert`) on every replica and the controller on the leader;
//! `kruise-crr agent`: the node agent (a DaemonSet, `NODE_NAME` from the downward API).

#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

fn main() -> std::process::ExitCode {
    use kruise_crr::binary::{BINARY, family, node_agent};
    kruise_runtime::family::main_with_agent(BINARY, node_agent, family)
}
