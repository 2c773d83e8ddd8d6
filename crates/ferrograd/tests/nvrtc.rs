//! Every CUDA kernel compiles with NVRTC for sm_90 (skipped, with a note, where the NVRTC
//! library cannot be loaded). Needs no GPU.

#[cfg(feature = "cuda")]
#[test]
fn kernels_compile_for_sm90() {
    match ferrograd::cuda::compile_kernels("sm_90") {
        Ok(ptx) => {
            let fixed = [
                "reduce_sum_f64",
                "softmax_rows_f32",
                "log_softmax_rows_f64",
                "scatter_add_i64",
                "fold_f64",
            ];
            // every kernel an op table row refers to, by name
            for name in ferrograd::cuda::table_kernel_names()
                .into_iter()
                .chain(fixed)
            {
                assert!(
                    ptx.contains(&format!(".entry {name}(")),
                    "{name} missing from the PTX"
                );
            }
        }
        Err(e) if e.to_string().contains("not available") => {
            eprintln!("skipped: NVRTC is not installed ({e})");
        }
        Err(e) => panic!("{e}"),
    }
}
