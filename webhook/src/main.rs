//! `kruise-webhook [run|manifests]`: the pod mutating chain composed from the enabled
//! families' handlers.

fn main() -> std::process::ExitCode {
    kruise_webhook::binary().main()
}
