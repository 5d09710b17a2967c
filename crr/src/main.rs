//! `kruise-crr [run|crd|manifests]`: the ContainerRecreateRequest webhook (defaulting and
//! checks against the pod, `/convert`) on every replica and the controller on the leader;
//! `kruise-crr agent`: the node agent (a DaemonSet, `NODE_NAME` from the downward API).

#[global_allocator]
static ALLOCATOR: kruise_common::runtime::Allocator = kruise_common::runtime::Allocator;

fn main() -> std::process::ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("agent") {
        return kruise_crr::agent_cli::main(argv);
    }
    kruise_common::family::main(kruise_crr::binary::family)
}
