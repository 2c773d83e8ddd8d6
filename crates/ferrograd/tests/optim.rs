//! The fused optimizer steps against the textbook formulas, element by element, in f64.

use ferrograd::optim::{
    adadelta_step, adagrad_step, rmsprop_step, AdadeltaStep, AdagradStep, RmspropStep,
};
use ferrograd::Tensor;

fn t(v: &[f64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len()]).unwrap()
}

fn close(a: &Tensor, b: &[f64]) {
    let a = a.to_vec::<f64>().unwrap();
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-14 * y.abs().max(1.0), "{a:?} != {b:?}");
    }
}

const P: [f64; 3] = [0.5, -1.0, 2.0];
const G: [f64; 3] = [0.1, 0.3, -0.7];

#[test]
fn rmsprop_centered_with_momentum() {
    let h = RmspropStep {
        lr: 0.01,
        alpha: 0.9,
        eps: 1e-8,
        weight_decay: 0.1,
        momentum: 0.5,
        centered: true,
    };
    let (p, g) = (t(&P), t(&G));
    let (sq, buf, ga) = (t(&[0.2; 3]), t(&[0.05; 3]), t(&[0.01; 3]));
    rmsprop_step(&p, &g, &sq, Some(&buf), Some(&ga), &h).unwrap();
    let mut want = ([0.0; 3], [0.0; 3], [0.0; 3], [0.0; 3]);
    for i in 0..3 {
        let gi = G[i] + 0.1 * P[i];
        let s = 0.2 * 0.9 + 0.1 * gi * gi;
        let a = 0.01 * 0.9 + 0.1 * gi;
        let b = 0.05 * 0.5 + gi / ((s - a * a).sqrt() + 1e-8);
        want.0[i] = P[i] - 0.01 * b;
        (want.1[i], want.2[i], want.3[i]) = (s, b, a);
    }
    close(&p, &want.0);
    close(&sq, &want.1);
    close(&buf, &want.2);
    close(&ga, &want.3);
    // momentum without its buffer is an error, nothing is written
    let before = p.to_vec::<f64>().unwrap();
    assert!(rmsprop_step(&p, &g, &sq, None, Some(&ga), &h).is_err());
    assert_eq!(p.to_vec::<f64>().unwrap(), before);
}

#[test]
fn adagrad_and_adadelta() {
    let (p, g, sum) = (t(&P), t(&G), t(&[0.1; 3]));
    let h = AdagradStep {
        lr: 0.1,
        eps: 1e-10,
        weight_decay: 0.0,
    };
    adagrad_step(&p, &g, &sum, &h).unwrap();
    let s: Vec<f64> = G.iter().map(|g| 0.1 + g * g).collect();
    let want: Vec<f64> = (0..3)
        .map(|i| P[i] - 0.1 * (G[i] / (s[i].sqrt() + 1e-10)))
        .collect();
    close(&p, &want);
    close(&sum, &s);

    let (p, sq, acc) = (t(&P), t(&[0.0; 3]), t(&[0.0; 3]));
    let h = AdadeltaStep {
        lr: 1.0,
        rho: 0.9,
        eps: 1e-6,
        weight_decay: 0.0,
    };
    adadelta_step(&p, &g, &sq, &acc, &h).unwrap();
    let (mut wp, mut ws, mut wa) = ([0.0; 3], [0.0; 3], [0.0; 3]);
    for i in 0..3 {
        ws[i] = 0.1 * (G[i] * G[i]);
        let d = (1e-6f64).sqrt() / (ws[i] + 1e-6).sqrt() * G[i];
        wa[i] = 0.1 * (d * d);
        wp[i] = P[i] - d;
    }
    close(&p, &wp);
    close(&sq, &ws);
    close(&acc, &wa);
    // a parameter that shares memory with its state is refused
    let h = AdagradStep {
        lr: 0.1,
        eps: 1e-10,
        weight_decay: 0.0,
    };
    assert!(adagrad_step(&p, &g, &p, &h).is_err());
}
