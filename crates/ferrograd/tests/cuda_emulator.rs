//! The CUDA backend's host code and kernels, run on the CPU by the `cuda-emulator` feature
//! (`cargo test -p ferrograd --features cuda-emulator --test cuda_emulator`): every op and
//! grad rule gives the CPU backend's values and gradients on a "cuda" tensor, and gradients on
//! the device match finite differences. Without the feature this file is empty.
#![cfg(feature = "cuda-emulator")]

use ferrograd::{
    avg_pool2d, concat, conv2d, conv2d_same, cross_entropy, max_pool2d, where_cond, AvgDivisor,
    DType, Device, GradKey, Result, SliceSpec, Tensor,
};

const CUDA: Device = Device::Cuda(0);

/// Deterministic values in [-2, 2).
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
        })
        .collect()
}

fn on(device: Device, v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape)
        .unwrap()
        .to_device(device)
        .unwrap()
}

type Composite = fn(&Tensor, &Tensor) -> Result<Tensor>;

/// Output and the gradients of sum(out * out) with respect to both inputs.
fn run(
    f: Composite,
    device: Device,
    a: (&[f64], &[usize]),
    b: (&[f64], &[usize]),
) -> Vec<Vec<f64>> {
    let (x, y) = (on(device, a.0, a.1), on(device, b.0, b.1));
    let key = GradKey::new("emulator");
    key.attach(&x, None).unwrap();
    key.attach(&y, None).unwrap();
    let out = f(&x, &y).unwrap();
    assert_eq!(out.device(), device);
    let loss = out.mul(&out).unwrap().sum(None, false).unwrap();
    key.backward(std::slice::from_ref(&loss), &[loss.ones_like().unwrap()])
        .unwrap();
    let grad = |t: &Tensor| match t.grad() {
        Some(g) => {
            assert_eq!(g.device(), device, "a gradient left the device");
            g.to_vec::<f64>().unwrap()
        }
        None => vec![0.0; t.numel()],
    };
    vec![out.to_vec::<f64>().unwrap(), grad(&x), grad(&y)]
}

fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * (1.0 + w.abs()) || (g.is_nan() && w.is_nan());
        assert!(
            ok,
            "{what}[{i}]: cuda {g} vs cpu {w}\ncuda {got:?}\ncpu  {want:?}"
        );
    }
}

fn same_on_both(name: &str, f: Composite, a: &[usize], b: &[usize]) {
    let (va, vb) = (values(a.iter().product(), 1), values(b.iter().product(), 2));
    let cpu = run(f, Device::Cpu, (&va, a), (&vb, b));
    let gpu = run(f, CUDA, (&va, a), (&vb, b));
    for (part, (g, c)) in ["output", "grad a", "grad b"]
        .iter()
        .zip(gpu.iter().zip(&cpu))
    {
        assert_close(&format!("{name} {part}"), g, c, 1e-10);
    }
}

fn range(start: isize, stop: isize, step: isize) -> SliceSpec {
    SliceSpec::Range { start, stop, step }
}

#[test]
fn elementwise_ops_and_their_gradients_match_the_cpu() {
    let cases: &[(&str, Composite)] = &[
        ("add_sub_mul", |a, b| a.add(b)?.mul(&a.sub(b)?)),
        ("div", |a, b| a.div(&b.abs()?.add_scalar(1.0)?)),
        ("maximum_minimum", |a, b| {
            a.maximum(b)?.add(&a.minimum(b)?.mul_scalar(3.0)?)
        }),
        ("exp_log_sqrt", |a, b| {
            a.exp()?
                .add(&b.abs()?.add_scalar(1.0)?.log()?)?
                .add(&a.mul(a)?.add_scalar(1.0)?.sqrt()?)
        }),
        ("tanh_sigmoid_relu", |a, b| {
            a.tanh()?.add(&b.sigmoid()?)?.add(&a.sub(b)?.relu()?)
        }),
        ("neg_abs_sign", |a, b| {
            a.neg()?.mul(&b.abs()?)?.add(&a.detach().sign()?)
        }),
        ("pow", |a, b| {
            a.abs()?.add_scalar(0.5)?.pow(b)?.add(&a.pow_scalar(3.0)?)
        }),
        ("where_compare", |a, b| {
            where_cond(&a.gt(b)?, a, &b.mul_scalar(2.0)?)
        }),
        ("broadcast_row", |a, b| {
            a.mul(&b.slice(&[range(0, 1, 1), range(0, 4, 1)])?)
        }),
        ("broadcast_column", |a, b| a.add(&b.sum(Some(&[1]), true)?)),
        ("strided_views", |a, b| {
            a.t()?
                .slice(&[range(1, 4, 1), range(0, 6, 2)])?
                .add(&b.t()?.slice(&[range(0, 3, 1), range(1, 6, 2)])?)
        }),
        ("astype_roundtrip", |a, b| {
            a.astype(DType::F32)?.astype(DType::F64)?.add(b)
        }),
    ];
    for (name, f) in cases {
        same_on_both(name, *f, &[6, 4], &[6, 4]);
    }
}

#[test]
fn reductions_softmax_and_cross_entropy_match_the_cpu() {
    let cases: &[(&str, Composite)] = &[
        ("sum_mean", |a, b| {
            a.sum(Some(&[0]), false)?.add(&b.mean(Some(&[0]), false)?)
        }),
        ("sum_all", |a, b| a.mul(b)?.sum(None, false)),
        ("max_min", |a, b| {
            a.max(Some(&[1]), false)?.add(&b.min(Some(&[1]), false)?)
        }),
        ("max_over_both_axes", |a, b| a.add(b)?.max(None, true)),
        ("softmax_last", |a, b| a.softmax(-1)?.mul(b)),
        ("softmax_first", |a, b| {
            a.softmax(0)?.add(&b.log_softmax(0)?)
        }),
        ("cross_entropy", |a, _| {
            let labels =
                Tensor::from_vec(vec![0i64, 3, 1, 2, 2, 0], &[6])?.to_device(a.device())?;
            cross_entropy(a, &labels)
        }),
    ];
    for (name, f) in cases {
        same_on_both(name, *f, &[6, 4], &[6, 4]);
    }
    // rows longer than a block and more rows than a warp
    same_on_both(
        "long_rows",
        |a, b| a.softmax(-1)?.add(&b.sum(Some(&[1]), true)?),
        &[40, 700],
        &[40, 700],
    );
    same_on_both(
        "long_columns",
        |a, b| a.max(Some(&[0]), true)?.add(b),
        &[700, 3],
        &[700, 3],
    );
}

#[test]
fn matmul_indexing_and_concat_match_the_cpu() {
    let cases: &[(&str, Composite)] = &[
        ("matmul", |a, b| a.matmul(&b.t()?)),
        ("matmul_transposed_left", |a, b| a.t()?.matmul(b)),
        ("batched", |a, b| {
            a.reshape(&[2, 3, 4])?.matmul(&b.reshape(&[2, 4, 3])?)
        }),
        ("batched_shared_weight", |a, b| {
            a.reshape(&[2, 3, 4])?
                .matmul(&b.slice(&[range(0, 4, 1), range(0, 4, 1)])?)
        }),
        // read in place by cuBLAS: a column slice (leading dimension > columns), transposed
        // batches; and an offset view, which is copied first
        ("column_slice", |a, b| {
            a.slice(&[range(0, 6, 1), range(0, 3, 1)])?
                .matmul(&b.slice(&[range(0, 3, 1), range(0, 4, 1)])?)
        }),
        ("batched_transposed", |a, b| {
            a.reshape(&[2, 3, 4])?
                .transpose(1, 2)?
                .matmul(&b.reshape(&[2, 3, 4])?)
        }),
        ("batched_both_transposed", |a, b| {
            a.reshape(&[2, 3, 4])?
                .transpose(1, 2)?
                .matmul(&b.reshape(&[2, 4, 3])?.transpose(1, 2)?)
        }),
        ("offset_view", |a, b| {
            a.slice(&[range(1, 6, 1), range(0, 4, 1)])?
                .matmul(&b.slice(&[range(2, 6, 1), range(0, 4, 1)])?)
        }),
        ("vector", |a, b| {
            a.matmul(&b.slice(&[range(0, 4, 1), SliceSpec::Index(1)])?)
        }),
        ("concat", |a, b| {
            concat(&[a, &b.slice(&[range(0, 2, 1), range(0, 4, 1)])?], 0)
        }),
        ("gather", |a, b| {
            let idx =
                Tensor::from_vec(vec![3i64, 0, 1, 1, 2, 0], &[6, 1])?.to_device(a.device())?;
            a.gather(&idx, 1)?
                .mul(&b.slice(&[range(0, 6, 1), range(0, 1, 1)])?)
        }),
        ("index_select", |a, b| {
            let idx = Tensor::from_vec(vec![5i64, 0, 2, 5], &[4])?.to_device(a.device())?;
            a.index_select(0, &idx)?.add(
                &b.index_select(1, &idx.slice(&[range(1, 3, 1)])?)?
                    .sum(None, false)?,
            )
        }),
    ];
    for (name, f) in cases {
        same_on_both(name, *f, &[6, 4], &[6, 4]);
    }
}

#[test]
fn convolution_and_pooling_match_the_cpu() {
    let cases: &[(&str, Composite)] = &[
        ("conv", |x, w| conv2d(x, w, None, (1, 1), (1, 1), (1, 1), 1)),
        ("conv_strided_dilated", |x, w| {
            conv2d(x, w, None, (2, 1), (1, 2), (2, 1), 1)
        }),
        ("conv_same", |x, w| conv2d_same(x, w, None, (1, 1), 1)),
        ("max_pool", |x, w| {
            max_pool2d(
                &conv2d(x, w, None, (1, 1), (1, 1), (1, 1), 1)?,
                (2, 2),
                None,
                (0, 0),
                (1, 1),
                false,
            )
        }),
        ("max_pool_ceil_dilated", |x, w| {
            max_pool2d(
                &conv2d(x, w, None, (1, 1), (0, 0), (1, 1), 1)?,
                (3, 3),
                Some((2, 2)),
                (1, 1),
                (2, 2),
                true,
            )
        }),
        ("avg_pool_exclude_pad", |x, w| {
            avg_pool2d(
                x,
                (3, 3),
                Some((2, 2)),
                (1, 1),
                true,
                AvgDivisor::ExcludePad,
            )?
            .mul(&w.sum(None, false)?)
        }),
    ];
    for (name, f) in cases {
        same_on_both(name, *f, &[2, 3, 7, 6], &[4, 3, 3, 3]);
    }
    same_on_both(
        "conv_groups",
        |x, w| conv2d(x, w, None, (1, 1), (1, 1), (1, 1), 3),
        &[2, 6, 5, 5],
        &[6, 2, 3, 3],
    );
}

#[test]
fn gradients_on_the_device_match_finite_differences() {
    let shape = [3usize, 5];
    let w = on(CUDA, &values(5 * 2, 9), &[5, 2]);
    let f = |x: &Tensor| -> Result<Tensor> {
        x.matmul(&w)?
            .tanh()?
            .softmax(-1)?
            .mul(&x.sum(Some(&[1]), true)?)?
            .sum(None, false)
    };
    let x0 = values(15, 4);
    let xt = on(CUDA, &x0, &shape);
    let key = GradKey::new("fd");
    key.attach(&xt, None).unwrap();
    let y = f(&xt).unwrap();
    key.backward(std::slice::from_ref(&y), &[y.ones_like().unwrap()])
        .unwrap();
    let analytic = xt.grad().unwrap().to_vec::<f64>().unwrap();
    let eps = 1e-6;
    let numeric: Vec<f64> = (0..x0.len())
        .map(|i| {
            let (mut p, mut m) = (x0.clone(), x0.clone());
            p[i] += eps;
            m[i] -= eps;
            let fp = f(&on(CUDA, &p, &shape)).unwrap().item().unwrap();
            let fm = f(&on(CUDA, &m, &shape)).unwrap().item().unwrap();
            (fp - fm) / (2.0 * eps)
        })
        .collect();
    assert_close("finite differences", &analytic, &numeric, 1e-6);
}

#[test]
fn float32_and_int64_tensors_work_on_the_device() {
    let a = Tensor::from_vec(vec![1.5f32, -2.0, 3.25, 0.5], &[2, 2]).unwrap();
    let g = a.to_device(CUDA).unwrap();
    let r = g
        .matmul(&g)
        .unwrap()
        .relu()
        .unwrap()
        .sum(Some(&[0]), false)
        .unwrap();
    let c = a
        .matmul(&a)
        .unwrap()
        .relu()
        .unwrap()
        .sum(Some(&[0]), false)
        .unwrap();
    assert_eq!(r.dtype(), DType::F32);
    assert_eq!(r.to_vec::<f32>().unwrap(), c.to_vec::<f32>().unwrap());
    let i = Tensor::from_vec(vec![3i64, -1, 4, -1, 5, 9], &[2, 3]).unwrap();
    let gi = i.to_device(CUDA).unwrap();
    assert_eq!(
        gi.max(Some(&[1]), false).unwrap().to_vec::<i64>().unwrap(),
        vec![4, 9]
    );
    assert_eq!(
        gi.abs()
            .unwrap()
            .sum(None, false)
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        vec![23]
    );
}

#[test]
fn mixing_devices_is_an_error_and_the_device_keeps_working() {
    let a = on(Device::Cpu, &[1.0, 2.0], &[2]);
    let b = on(CUDA, &[1.0, 2.0], &[2]);
    let err = a.add(&b).unwrap_err().to_string();
    assert!(err.contains("device"), "{err}");
    assert_eq!(b.add(&b).unwrap().to_vec::<f64>().unwrap(), vec![2.0, 4.0]);
}

#[test]
fn max_pool_gradient_goes_to_the_first_maximum_and_nan_wins() {
    // ties everywhere (small integers), a NaN, and odd sizes that leave a row and column out
    let mut v: Vec<f64> = (0..2 * 3 * 7 * 9).map(|i| ((i * 7) % 3) as f64).collect();
    v[3 * 63 + 2 * 9 + 2] = f64::NAN;
    let shape = [2usize, 3, 7, 9];
    let dy = values(2 * 3 * 3 * 4, 5);
    let mut results = Vec::new();
    for device in [Device::Cpu, CUDA] {
        let x = on(device, &v, &shape);
        let key = GradKey::new("pool");
        key.attach(&x, None).unwrap();
        let y = max_pool2d(&x, (2, 2), None, (0, 0), (1, 1), false).unwrap();
        key.backward(std::slice::from_ref(&y), &[on(device, &dy, &[2, 3, 3, 4])])
            .unwrap();
        results.push((
            y.to_vec::<f64>().unwrap(),
            x.grad().unwrap().to_vec::<f64>().unwrap(),
        ));
    }
    assert_close("pool output", &results[1].0, &results[0].0, 0.0);
    assert_close("pool gradient", &results[1].1, &results[0].1, 0.0);
    assert!(results[1].0.iter().any(|x| x.is_nan()), "the NaN window");
}

#[test]
fn int64_matmul_empty_axes_and_scalar_writes_work_on_the_device() {
    let a: Vec<i64> = (0..2 * 3 * 4).map(|i| i - 7).collect();
    let b: Vec<i64> = (0..4 * 5).map(|i| 3 - i).collect();
    let (ca, cb) = (
        Tensor::from_vec(a, &[2, 3, 4]).unwrap(),
        Tensor::from_vec(b, &[4, 5]).unwrap(),
    );
    let want = ca.matmul(&cb).unwrap().to_vec::<i64>().unwrap();
    let got = ca
        .to_device(CUDA)
        .unwrap()
        .matmul(&cb.to_device(CUDA).unwrap())
        .unwrap();
    assert_eq!(got.device(), CUDA);
    assert_eq!(got.to_vec::<i64>().unwrap(), want);

    // summing over an empty axis gives zeros for every kept element
    let empty = Tensor::zeros(&[0, 3], DType::F64)
        .unwrap()
        .to_device(CUDA)
        .unwrap();
    let s = empty.sum(Some(&[0]), false).unwrap();
    assert_eq!(s.shape(), &[3]);
    assert_eq!(s.to_vec::<f64>().unwrap(), vec![0.0; 3]);

    // a 0-d CPU value (a Python scalar) may be written into a device tensor
    let t = on(CUDA, &[1.0, 2.0, 3.0], &[3]);
    t.slice(&[range(1, 3, 1)])
        .unwrap()
        .assign_(&Tensor::scalar(7.0f64))
        .unwrap();
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![1.0, 7.0, 7.0]);
}

#[test]
fn in_place_updates_match_the_cpu() {
    use ferrograd::op::BinaryOp;
    let (va, vb) = (values(6 * 4, 11), values(4, 12));
    let mut out = Vec::new();
    for device in [Device::Cpu, CUDA] {
        let x = on(device, &va, &[6, 4]);
        let v0 = x.storage().version();
        x.binary_assign_(BinaryOp::Add, &on(device, &vb, &[4]))
            .unwrap();
        // through a strided view, with a Python-style scalar
        let rows = x.slice(&[range(0, 6, 2), range(1, 4, 1)]).unwrap();
        rows.binary_assign_(BinaryOp::Mul, &Tensor::scalar(-3.0f64))
            .unwrap();
        x.t()
            .unwrap()
            .binary_assign_(BinaryOp::Maximum, &on(device, &[0.5; 6], &[6]))
            .unwrap();
        assert!(
            x.storage().version() > v0,
            "in-place writes bump the version"
        );
        out.push(x.to_vec::<f64>().unwrap());
    }
    assert_close("in-place", &out[1], &out[0], 0.0);
}

#[test]
fn gradients_flow_back_through_device_transfers() {
    // a CPU leaf used on the device (and a device result brought back): `to` is recorded
    let x0 = values(6, 21);
    let w0 = values(6, 22);
    let x = on(Device::Cpu, &x0, &[2, 3]);
    let key = GradKey::new("to");
    key.attach(&x, None).unwrap();
    let w = on(CUDA, &w0, &[3, 2]);
    let y = x.to(CUDA).unwrap().matmul(&w).unwrap().tanh().unwrap();
    let loss = y.to(Device::Cpu).unwrap().sum(None, false).unwrap();
    key.backward(std::slice::from_ref(&loss), &[loss.ones_like().unwrap()])
        .unwrap();
    let g = x.grad().expect("the CPU leaf gets a gradient");
    assert_eq!(g.device(), Device::Cpu);
    // the same computation on the CPU alone
    let xc = on(Device::Cpu, &x0, &[2, 3]);
    let kc = GradKey::new("cpu");
    kc.attach(&xc, None).unwrap();
    let lc = xc
        .matmul(&on(Device::Cpu, &w0, &[3, 2]))
        .unwrap()
        .tanh()
        .unwrap()
        .sum(None, false)
        .unwrap();
    kc.backward(std::slice::from_ref(&lc), &[lc.ones_like().unwrap()])
        .unwrap();
    assert_close(
        "gradient through to()",
        &g.to_vec::<f64>().unwrap(),
        &xc.grad().unwrap().to_vec::<f64>().unwrap(),
        1e-12,
    );
    // to the device it is on already: the same tensor
    assert!(x.to(Device::Cpu).unwrap().same(&x));
}

/// Every row of the op tables runs on the device for every dtype it has a kernel for, and
/// gives the CPU's values (a row without its `kernels.cu` line fails here).
#[test]
fn every_table_op_runs_on_the_device_like_the_cpu() {
    use ferrograd::apply1;
    use ferrograd::op::{BinaryOp, CmpOp, Op, UnaryOp};
    // positive floats (every unary op is defined there) and small ints
    let fv: Vec<f64> = values(24, 11).iter().map(|v| v.abs() + 0.25).collect();
    let gv: Vec<f64> = values(24, 12).iter().map(|v| v.abs() + 0.25).collect();
    let iv: Vec<i64> = values(24, 13).iter().map(|v| (v * 4.0) as i64).collect();
    let jv: Vec<i64> = values(24, 14).iter().map(|v| (v * 4.0) as i64).collect();
    let mut operands: Vec<(Tensor, Tensor)> = Vec::new();
    for dtype in [DType::F32, DType::F64] {
        let a = on(Device::Cpu, &fv, &[4, 6]).astype(dtype).unwrap();
        let b = on(Device::Cpu, &gv[..6], &[6]).astype(dtype).unwrap();
        operands.push((a, b));
    }
    let a = Tensor::from_vec(iv, &[4, 6]).unwrap();
    let b = Tensor::from_vec(jv[..6].to_vec(), &[6]).unwrap();
    operands.push((a, b));
    let close = |op: &str, cpu: &Tensor, dev: &Tensor| {
        let (x, y) = (
            cpu.astype(DType::F64).unwrap().to_vec::<f64>().unwrap(),
            dev.to_device(Device::Cpu)
                .unwrap()
                .astype(DType::F64)
                .unwrap()
                .to_vec::<f64>()
                .unwrap(),
        );
        for (p, q) in x.iter().zip(&y) {
            let tol = 1e-5 * p.abs().max(1.0);
            assert!(
                (p - q).abs() <= tol || (p.is_nan() && q.is_nan()),
                "{op} on {}: cpu {p} device {q}",
                cpu.dtype()
            );
        }
    };
    for (a, b) in &operands {
        let (da, db) = (a.to_device(CUDA).unwrap(), b.to_device(CUDA).unwrap());
        let float = a.dtype().is_float();
        for &op in UnaryOp::ALL {
            if !float && !op.has_int_kernel() {
                continue;
            }
            let op = Op::Unary(op);
            let (c, d) = (apply1(&op, &[a]).unwrap(), apply1(&op, &[&da]).unwrap());
            close(op.name(), &c, &d);
        }
        for &op in BinaryOp::ALL {
            if !float && !op.has_int_kernel() {
                continue;
            }
            let op = Op::Binary(op);
            let (c, d) = (
                apply1(&op, &[a, b]).unwrap(),
                apply1(&op, &[&da, &db]).unwrap(),
            );
            close(op.name(), &c, &d);
            // the in-place form (its own kernel)
            let (x, y) = (a.copy().unwrap(), da.copy().unwrap());
            let Op::Binary(bop) = op else { continue };
            x.binary_assign_(bop, b).unwrap();
            y.binary_assign_(bop, &db).unwrap();
            close(op.name(), &x, &y);
        }
        for &op in CmpOp::ALL {
            let op = Op::Compare(op);
            let (c, d) = (
                apply1(&op, &[a, b]).unwrap(),
                apply1(&op, &[&da, &db]).unwrap(),
            );
            close(op.name(), &c, &d);
        }
    }
}
