//! Compiles the vendored Kubernetes `.proto` files (proto/, see its README) into a
//! descriptor set with protox, so kruise-sim reads the protobuf bodies of every built-in
//! kind without `protoc` or generated code.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let mut files = Vec::new();
    collect(std::path::Path::new("proto"), &mut files)?;
    files.sort();
    let mut compiler = protox::Compiler::new(["proto"])?;
    compiler.include_imports(true);
    for file in &files {
        let relative = file.strip_prefix("proto")?;
        compiler.open_file(relative)?;
    }
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?).join("k8s_descriptors.bin");
    std::fs::write(out, compiler.encode_file_descriptor_set())?;
    Ok(())
}

fn collect(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "proto") {
            out.push(path);
        }
    }
    Ok(())
}
