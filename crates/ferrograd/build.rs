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
    // an identifier of lowercase (or uppercase) letters, digits and '_'
    let ident = |s: &str, upper: bool| {
        !s.is_empty()
            && s.chars().all(|c| {
                c == '_'
                    || c.is_ascii_digit()
                    || (upper && c.is_ascii_uppercase())
                    || (!upper && c.is_ascii_lowercase())
            })
    };
    let mut table = String::new();
    for line in source.lines() {
        let name = match line.strip_prefix("extern \"C\" __global__ void ") {
            Some(rest) => rest.split('(').next(),
            None => line
                .split_once('(')
                .filter(|(family, _)| ident(family, true))
                .and_then(|(_, rest)| rest.split_once(','))
                .map(|(name, _)| name),
        };
        if let Some(name) = name.filter(|n| ident(n, false)) {
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
