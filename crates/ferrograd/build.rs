//! With the `cuda-emulator` feature, compiles the CUDA kernels as C++ for the host together
//! with `src/cuda/emulator.cpp`, which stands in for the device (see `src/cuda/emulator.rs`).
//! Without it, does nothing.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "cuda-emulator")]
    emulator();
}

#[cfg(feature = "cuda-emulator")]
fn emulator() {
    use std::path::PathBuf;

    println!("cargo:rerun-if-changed=src/cuda/kernels.cu");
    println!("cargo:rerun-if-changed=src/cuda/emulator.cpp");
    let source = std::fs::read_to_string("src/cuda/kernels.cu").expect("src/cuda/kernels.cu");
    // a kernel is made by a line `FAMILY(name, ...)` or defined by a line
    // `extern "C" __global__ void name(...`, at the start of a line
    let mut table = String::new();
    for line in source.lines() {
        if let Some(rest) = line.strip_prefix("extern \"C\" __global__ void ") {
            let name = rest.split('(').next().unwrap_or("");
            if !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit())
            {
                table.push_str(&format!("FG_KERNEL({name})\n"));
            }
            continue;
        }
        let Some((family, rest)) = line.split_once('(') else {
            continue;
        };
        let is_family = !family.is_empty()
            && family
                .chars()
                .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit());
        let Some((name, _)) = rest.split_once(',') else {
            continue;
        };
        let is_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit());
        if is_family && is_name {
            table.push_str(&format!("FG_KERNEL({name})\n"));
        }
    }
    assert!(!table.is_empty(), "no kernels found in kernels.cu");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(out.join("emulator_kernels.inc"), table).expect("write the kernel table");
    cc::Build::new()
        .cpp(true)
        .std("c++20")
        .file("src/cuda/emulator.cpp")
        .include("src/cuda")
        .include(&out)
        .opt_level(2)
        .warnings(false)
        .compile("ferrograd_cuda_emulator");
}
