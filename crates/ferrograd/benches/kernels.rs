//! Criterion benches of the engine's CPU kernels and of the per-op dispatch and recording cost.
//! Run with `cargo bench -p ferrograd`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ferrograd::{GradKey, Tensor};

fn ramp(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i % 97) as f32 * 0.01).collect()
}

fn elementwise(c: &mut Criterion) {
    let mut g = c.benchmark_group("elementwise");
    for n in [1 << 10, 1 << 16, 1 << 22] {
        let a = Tensor::from_vec(ramp(n), &[n]).unwrap();
        let b = Tensor::from_vec(ramp(n), &[n]).unwrap();
        g.throughput(Throughput::Bytes((3 * 4 * n) as u64));
        g.bench_with_input(BenchmarkId::new("add", n), &n, |bch, _| {
            bch.iter(|| black_box(a.add(&b).unwrap()))
        });
        g.bench_with_input(BenchmarkId::new("tanh", n), &n, |bch, _| {
            bch.iter(|| black_box(a.tanh().unwrap()))
        });
    }
    g.finish();
}

fn reductions(c: &mut Criterion) {
    let mut g = c.benchmark_group("reduce");
    let (rows, cols) = (1024, 4096);
    let m = Tensor::from_vec(ramp(rows * cols), &[rows, cols]).unwrap();
    g.throughput(Throughput::Bytes((4 * rows * cols) as u64));
    g.bench_function("row_sum_1024x4096", |b| {
        b.iter(|| black_box(m.sum(Some(&[1]), false).unwrap()))
    });
    g.bench_function("col_sum_1024x4096", |b| {
        b.iter(|| black_box(m.sum(Some(&[0]), false).unwrap()))
    });
    g.finish();
}

fn matmul(c: &mut Criterion) {
    let mut g = c.benchmark_group("matmul");
    g.sample_size(20);
    for n in [128usize, 512, 1024] {
        let a = Tensor::from_vec(ramp(n * n), &[n, n]).unwrap();
        let b = Tensor::from_vec(ramp(n * n), &[n, n]).unwrap();
        g.throughput(Throughput::Elements((2 * n * n * n) as u64));
        g.bench_with_input(BenchmarkId::new("square", n), &n, |bch, _| {
            bch.iter(|| black_box(a.matmul(&b).unwrap()))
        });
        let bt = b.t().unwrap();
        g.bench_with_input(
            BenchmarkId::new("square_transposed_rhs", n),
            &n,
            |bch, _| bch.iter(|| black_box(a.matmul(&bt).unwrap())),
        );
    }
    g.finish();
}

fn dispatch(c: &mut Criterion) {
    let mut g = c.benchmark_group("dispatch");
    let x = Tensor::from_vec(ramp(16), &[16]).unwrap();
    g.bench_function("tiny_add_untracked", |b| {
        b.iter(|| black_box(x.add(&x).unwrap()))
    });
    g.bench_function("chain_of_100_tracked_forward_backward", |b| {
        b.iter(|| {
            let key = GradKey::new("bench");
            key.attach(&x, None).unwrap();
            let mut h = x.clone();
            for i in 0..100 {
                h = match i % 3 {
                    0 => h.add(&x).unwrap(),
                    1 => h.mul_scalar(0.5).unwrap(),
                    _ => h.tanh().unwrap(),
                };
            }
            let y = h.sum(None, false).unwrap();
            key.backward(std::slice::from_ref(&y), &[y.ones_like().unwrap()])
                .unwrap();
            x.set_grad(None).unwrap();
        })
    });
    g.finish();
}

criterion_group!(benches, elementwise, reductions, matmul, dispatch);
criterion_main!(benches);
