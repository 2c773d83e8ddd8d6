//! A training step traced into a graph and run whole in Rust (graph mode from Rust): a
//! two-layer tanh network fitting `y = sin(3 x)`, SGD with momentum.
//!
//! The first call of the step runs it as usual while `graph::begin`/`graph::end` record it;
//! `GradKey::backward` inside is the graph gradient pass. `Executable::compile` then merges
//! common subexpressions, drops dead code, fuses the elementwise chains and plans memory, and
//! every later step is one `run` (the parameters and momentum buffers, captured by reference,
//! are updated in place).
//!
//! Run with `cargo run -p ferrograd --example traced_step --release`.

use ferrograd::graph::{self, Executable, Options};
use ferrograd::{DType, GradKey, Result, Tensor};

fn main() -> Result<()> {
    let n = 128;
    let xs: Vec<f64> = (0..n).map(|i| i as f64 / n as f64 * 2.0 - 1.0).collect();
    let ys: Vec<f64> = xs.iter().map(|x| (3.0 * x).sin()).collect();
    let x = Tensor::from_vec(xs, &[n, 1])?;
    let y = Tensor::from_vec(ys, &[n, 1])?;

    // parameters and optimizer state: made outside the step, so the graph captures them
    let init = |rows: usize, cols: usize, seed: f64| {
        let v: Vec<f64> = (0..rows * cols)
            .map(|i| ((i as f64 + seed) * 12.9898).sin() * 0.8)
            .collect();
        Tensor::from_vec(v, &[rows, cols])
    };
    let params = [
        init(1, 32, 1.0)?,
        Tensor::zeros(&[32], DType::F64)?,
        init(32, 1, 2.0)?,
        Tensor::zeros(&[1], DType::F64)?,
    ];
    let momentum: Vec<Tensor> = params
        .iter()
        .map(|p| p.zeros_like())
        .collect::<Result<_>>()?;
    let (lr, beta) = (0.05, 0.9);

    // one step: forward, backward, SGD with momentum, all through in-place updates
    let step = |x: &Tensor, y: &Tensor| -> Result<Tensor> {
        let key = GradKey::new("step");
        for p in &params {
            key.attach(p, None)?;
        }
        let h = x.matmul(&params[0])?.add(&params[1])?.tanh()?;
        let err = h.matmul(&params[2])?.add(&params[3])?.sub(y)?;
        let loss = err.mul(&err)?.mean(None, false)?;
        key.backward(std::slice::from_ref(&loss), &[loss.ones_like()?])?;
        for (p, m) in params.iter().zip(&momentum) {
            let g = p.grad().expect("every parameter reaches the loss");
            p.set_grad(None)?;
            let m_new = m.mul_scalar(beta)?.add(&g)?;
            m.update_("momentum", &m_new)?;
            p.update_("sgd", &p.sub(&m_new.mul_scalar(lr)?)?)?;
        }
        Ok(loss)
    };

    // the first step, traced
    let handles = graph::begin(&[x.clone(), y.clone()])?;
    let loss = match step(&handles[0], &handles[1]) {
        Ok(loss) => loss,
        Err(e) => {
            graph::abort();
            return Err(e);
        }
    };
    let traced = graph::end(std::slice::from_ref(&loss))?;
    println!(
        "step   0  loss {:.6}  (traced: {} nodes)",
        loss.item()?,
        traced.len()
    );
    let exe = Executable::compile(traced, &Options::default())?;
    let report = exe.memory_report();
    println!(
        "compiled: {} nodes, {} ops in {} fused chains, planned peak {} bytes",
        report.nodes, report.fused_nodes, report.fused_chains, report.planned_peak_bytes
    );

    // every later step runs the graph
    for i in 1..=300 {
        let out = exe.run(&[x.clone(), y.clone()])?;
        if i % 100 == 0 {
            println!("step {i:3}  loss {:.6}", out[0].item()?);
        }
    }
    Ok(())
}
