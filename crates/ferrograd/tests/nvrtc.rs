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

/// The kernels generated for fused elementwise groups compile too: a traced step with every
/// kind of fused instruction (unary and binary table ops, scalar powers, activation
/// gradients, `where` on a bool condition, broadcast inputs), in float32 and float64.
#[cfg(feature = "cuda")]
#[test]
fn fused_group_kernels_compile_for_sm90() {
    use ferrograd::graph::{self, Executable};
    use ferrograd::{DType, GradKey, Tensor};

    let mut sources = Vec::new();
    for dtype in [DType::F32, DType::F64] {
        let x = Tensor::from_vec(
            (0..12).map(|i| i as f64 * 0.1 - 0.5).collect::<Vec<_>>(),
            &[3, 4],
        )
        .unwrap()
        .astype(dtype)
        .unwrap();
        let b = Tensor::from_vec(vec![0.5f64, -1.0, 2.0, 0.25], &[4])
            .unwrap()
            .astype(dtype)
            .unwrap();
        let h = graph::begin(std::slice::from_ref(&x)).unwrap();
        let x = &h[0];
        let key = GradKey::new("nvrtc");
        key.attach(&b, None).unwrap();
        let z = x.mul(&b).unwrap().add_scalar(1.0).unwrap();
        let a = z.tanh().unwrap().mul(&z.sigmoid().unwrap()).unwrap();
        let c = z
            .relu()
            .unwrap()
            .pow_scalar(2.5)
            .unwrap()
            .add(&a.exp().unwrap())
            .unwrap();
        let m = x.gt(&x.zeros_like().unwrap()).unwrap();
        let y = ferrograd::ops::where_cond(&m, &c, &a.neg().unwrap()).unwrap();
        let loss = y
            .maximum(x)
            .unwrap()
            .div(&b.abs().unwrap().add_scalar(1.0).unwrap())
            .unwrap()
            .sum(None, false)
            .unwrap();
        key.backward(std::slice::from_ref(&loss), &[loss.ones_like().unwrap()])
            .unwrap();
        let gb = b.grad().unwrap();
        let g = graph::end(&[loss, gb]).unwrap();
        let exe = Executable::new(g).unwrap();
        let found = exe.cuda_sources().unwrap();
        assert!(!found.is_empty(), "no fused group of more than one op");
        sources.extend(found);
    }
    for (name, src) in &sources {
        match ferrograd::cuda::compile_source(src, "sm_90") {
            Ok(ptx) => assert!(ptx.contains(&format!(".entry {name}(")), "{name} missing"),
            Err(e) if e.to_string().contains("not available") => {
                eprintln!("skipped: NVRTC is not installed ({e})");
                return;
            }
            Err(e) => panic!("{e}\n{src}"),
        }
    }
}
