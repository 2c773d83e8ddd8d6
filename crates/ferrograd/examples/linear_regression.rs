//! Fits `y = 3 x0 - 2 x1 + 0.5` with plain gradient descent through `GradKey`.
//!
//! Run with `cargo run -p ferrograd --example linear_regression --release`.

use ferrograd::{GradKey, Result, Tensor};

fn main() -> Result<()> {
    // a small deterministic data set
    let n = 256;
    let mut xs = Vec::with_capacity(n * 2);
    let mut ys = Vec::with_capacity(n);
    let mut state = 12345u64;
    let mut rand = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) as f64 / (1u64 << 31) as f64) * 2.0 - 1.0
    };
    for _ in 0..n {
        let (a, b) = (rand(), rand());
        xs.extend([a, b]);
        ys.push(3.0 * a - 2.0 * b + 0.5 + 0.01 * rand());
    }
    let x = Tensor::from_vec(xs, &[n, 2])?;
    let y = Tensor::from_vec(ys, &[n, 1])?;

    let mut w = Tensor::zeros(&[2, 1], ferrograd::DType::F64)?;
    let mut b = Tensor::zeros(&[1], ferrograd::DType::F64)?;
    let lr = 0.1;
    for step in 0..200 {
        let key = GradKey::new("step");
        key.attach(&w, None)?;
        key.attach(&b, None)?;
        let err = x.matmul(&w)?.add(&b)?.sub(&y)?;
        let loss = err.mul(&err)?.mean(None, false)?;
        key.backward(std::slice::from_ref(&loss), &[loss.ones_like()?])?;
        let (gw, gb) = (
            w.grad().expect("w has a gradient"),
            b.grad().expect("b has a gradient"),
        );
        w = w.sub(&gw.mul_scalar(lr)?)?;
        b = b.sub(&gb.mul_scalar(lr)?)?;
        if step % 50 == 0 || step == 199 {
            println!("step {step:3}  loss {:.6}", loss.item()?);
        }
    }
    println!("w = {:?}, b = {:?}", w.to_vec::<f64>()?, b.to_vec::<f64>()?);
    Ok(())
}
