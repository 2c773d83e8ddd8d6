//! With the `cuda-emulator` feature, compiles the CUDA kernels as C++ for the host together
//! with `src/cuda/emulator.cpp`, which stands in for the device (see `src/cuda/emulator.rs`),
//! and lists the kernels' names (read from the preprocessed source) for it. Without it, does
//! nothing.

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
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    // the kernels' names, read from the preprocessed source (kernels are made by macros):
    // every `__global__ void name(`
    let copy = out.join("kernels_for_names.cpp");
    std::fs::copy("src/cuda/kernels.cu", &copy).expect("copy src/cuda/kernels.cu");
    let expanded = cc::Build::new()
        .cpp(true)
        .file(&copy)
        .include("src/cuda")
        .expand();
    let expanded = String::from_utf8_lossy(&expanded);
    let ident = |c: char| c == '_' || c.is_ascii_alphanumeric();
    let mut table = String::new();
    for piece in expanded.split("__global__").skip(1) {
        let Some(rest) = piece.trim_start().strip_prefix("void") else {
            continue;
        };
        let name: String = rest
            .trim_start()
            .chars()
            .take_while(|&c| ident(c))
            .collect();
        if !name.is_empty() {
            table.push_str(&format!("FG_KERNEL({name})\n"));
        }
    }
    assert!(!table.is_empty(), "no kernels found in kernels.cu");
    std::fs::write(out.join("emulator_kernels.inc"), table).expect("write the kernel table");
    cc::Build::new()
        .cpp(true)
        .std("c++20")
        .file("src/cuda/emulator.cpp")
        .include("src/cuda")
        .include(&out)
        .opt_level(2)
        .flag_if_supported("-ffp-contract=off")
        .warnings(false)
        .compile("ferrograd_cuda_emulator");
}
