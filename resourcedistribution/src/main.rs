#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

fn main() -> std::process::ExitCode {
    kruise_runtime::family::main(kruise_resourcedistribution::binary::family)
}
