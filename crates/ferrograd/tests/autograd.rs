//! Behaviour of the GradKey tape: gradients, producer lists and callbacks, finishing, saving.

use std::sync::{Arc, Mutex};

use ferrograd::{GradKey, Result, Tensor};

fn t(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

/// Central finite differences of a scalar function of one tensor's values.
fn numeric_grad(f: &dyn Fn(&Tensor) -> Result<Tensor>, x: &[f64], shape: &[usize]) -> Vec<f64> {
    let eps = 1e-6;
    (0..x.len())
        .map(|i| {
            let mut p = x.to_vec();
            p[i] += eps;
            let mut m = x.to_vec();
            m[i] -= eps;
            let fp = f(&t(&p, shape)).unwrap().item().unwrap();
            let fm = f(&t(&m, shape)).unwrap().item().unwrap();
            (fp - fm) / (2.0 * eps)
        })
        .collect()
}

fn analytic_grad(f: &dyn Fn(&Tensor) -> Result<Tensor>, x: &[f64], shape: &[usize]) -> Vec<f64> {
    let xt = t(x, shape);
    let key = GradKey::new("check");
    key.attach(&xt, None).unwrap();
    let y = f(&xt).unwrap();
    key.backward(std::slice::from_ref(&y), &[y.ones_like().unwrap()])
        .unwrap();
    xt.grad().unwrap().to_vec::<f64>().unwrap()
}

fn assert_close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "{a:?} vs {b:?}");
    }
}

#[test]
fn composite_gradient_matches_finite_differences() {
    let w = t(&[0.3, -0.7, 1.1, 0.2, -0.4, 0.9], &[3, 2]);
    let f = move |x: &Tensor| -> Result<Tensor> {
        // softmax(tanh(x @ w) * sigmoid(x).sum(1)) with a log and a broadcast
        let h = x.matmul(&w)?.tanh()?;
        let s = x.sigmoid()?.sum(Some(&[1]), true)?;
        let z = h.mul(&s)?.softmax(-1)?;
        z.mul(&t(&[1.0, 2.0], &[2]))?
            .add_scalar(1.0)?
            .log()?
            .sum(None, false)
    };
    let x = [
        0.5, -1.2, 0.3, 2.0, 0.1, -0.6, 1.5, 0.8, -0.2, 0.4, 0.0, -1.0,
    ];
    assert_close(
        &analytic_grad(&f, &x, &[4, 3]),
        &numeric_grad(&f, &x, &[4, 3]),
        1e-6,
    );
}

#[test]
fn gradients_meeting_at_one_tensor_are_summed() {
    let x = t(&[1.0, 2.0], &[2]);
    let key = GradKey::new("k");
    key.attach(&x, None).unwrap();
    // y = x*x + 3x  => dy/dx = 2x + 3
    let y = x
        .mul(&x)
        .unwrap()
        .add(&x.mul_scalar(3.0).unwrap())
        .unwrap()
        .sum(None, false)
        .unwrap();
    key.backward(std::slice::from_ref(&y), &[y.ones_like().unwrap()])
        .unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), vec![5.0, 7.0]);
}

type Log = Arc<Mutex<Vec<(String, Vec<f64>)>>>;

fn logging_callback(log: &Log, name: &str) -> ferrograd::GradCallback {
    let log = log.clone();
    let name = name.to_string();
    Arc::new(move |_t: &Tensor, g: &Tensor| {
        log.lock()
            .unwrap()
            .push((name.clone(), g.to_vec_f64().unwrap()));
        Ok(None)
    })
}

#[test]
fn callback_fires_once_with_the_final_gradient() {
    let log: Log = Arc::default();
    let x = t(&[1.0, -2.0], &[2]);
    let key = GradKey::new("k");
    key.attach(&x, Some(logging_callback(&log, "x"))).unwrap();
    // three consumers of x
    let a = x.exp().unwrap();
    let b = x.mul_scalar(2.0).unwrap();
    let c = x.mul(&x).unwrap();
    let y = a
        .add(&b)
        .unwrap()
        .add(&c)
        .unwrap()
        .sum(None, false)
        .unwrap();
    key.backward(std::slice::from_ref(&y), &[y.ones_like().unwrap()])
        .unwrap();
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 1, "callback must fire exactly once");
    let expected: Vec<f64> = [1.0f64, -2.0]
        .iter()
        .map(|v| v.exp() + 2.0 + 2.0 * v)
        .collect();
    assert_close(&log[0].1, &expected, 1e-12);
    assert_close(&x.grad().unwrap().to_vec_f64().unwrap(), &expected, 1e-12);
}

#[test]
fn a_gradient_that_is_final_early_fires_before_the_rest_of_backward() {
    let log: Log = Arc::default();
    let early = t(&[1.0], &[1]);
    let late = t(&[2.0], &[1]);
    let key = GradKey::new("k");
    key.attach(&early, Some(logging_callback(&log, "early")))
        .unwrap();
    key.attach(&late, Some(logging_callback(&log, "late")))
        .unwrap();
    // `early` feeds the first op; `late` feeds only the last one, so its gradient is final
    // first in the reverse walk, while the ops leading back to `early` are still pending.
    let mut h = early.mul_scalar(1.5).unwrap();
    for _ in 0..5 {
        h = h.tanh().unwrap();
    }
    let y = h.mul(&late).unwrap().sum(None, false).unwrap();
    key.backward(std::slice::from_ref(&y), &[y.ones_like().unwrap()])
        .unwrap();
    let names: Vec<String> = log.lock().unwrap().iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(names, vec!["late".to_string(), "early".to_string()]);
}

#[test]
fn callback_result_replaces_the_gradient() {
    let x = t(&[1.0, 2.0], &[2]);
    let key = GradKey::new("k");
    let cb: ferrograd::GradCallback = Arc::new(|_t, g| Ok(Some(g.mul_scalar(10.0)?)));
    key.attach(&x, Some(cb)).unwrap();
    let y = x.sum(None, false).unwrap();
    key.backward(std::slice::from_ref(&y), &[y.ones_like().unwrap()])
        .unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), vec![10.0, 10.0]);
}

#[test]
fn grad_accumulates_across_keys() {
    let x = t(&[1.0, 2.0], &[2]);
    for _ in 0..3 {
        let key = GradKey::new("k");
        key.attach(&x, None).unwrap();
        let y = x.mul(&x).unwrap().sum(None, false).unwrap();
        key.backward(std::slice::from_ref(&y), &[y.ones_like().unwrap()])
            .unwrap();
    }
    assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), vec![6.0, 12.0]);
}

#[test]
fn a_finished_key_refuses_attach_and_backward() {
    let x = t(&[1.0], &[1]);
    let key = GradKey::new("once");
    key.attach(&x, None).unwrap();
    let y = x.exp().unwrap();
    key.backward(std::slice::from_ref(&y), &[y.ones_like().unwrap()])
        .unwrap();
    assert!(key.is_finished());
    let e = key
        .backward(std::slice::from_ref(&y), &[y.ones_like().unwrap()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("finished") && e.contains("once"), "{e}");
    assert!(key
        .attach(&x, None)
        .unwrap_err()
        .to_string()
        .contains("finished"));
    // the tensor is no longer tracked by the finished key
    assert!(!key.is_attached_to(&x));
}

#[test]
fn attaching_an_integer_tensor_is_an_error() {
    let x = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
    let e = GradKey::new("k").attach(&x, None).unwrap_err().to_string();
    assert!(e.contains("attach") && e.contains("int64"), "{e}");
}

#[test]
fn several_keys_track_different_tensors_at_once() {
    let (a, b) = (t(&[1.0, 2.0], &[2]), t(&[3.0, 4.0], &[2]));
    let (ka, kb) = (GradKey::new("a"), GradKey::new("b"));
    ka.attach(&a, None).unwrap();
    kb.attach(&b, None).unwrap();
    let y = a.mul(&b).unwrap().sum(None, false).unwrap();
    assert!(ka.is_attached_to(&y) && kb.is_attached_to(&y));
    kb.backward(std::slice::from_ref(&y), &[y.ones_like().unwrap()])
        .unwrap();
    assert!(a.grad().is_none());
    assert_eq!(b.grad().unwrap().to_vec::<f64>().unwrap(), vec![1.0, 2.0]);
    ka.backward(std::slice::from_ref(&y), &[y.ones_like().unwrap()])
        .unwrap();
    assert_eq!(a.grad().unwrap().to_vec::<f64>().unwrap(), vec![3.0, 4.0]);
}

#[test]
fn a_dead_branch_leaves_the_tape_during_forward() {
    let x = t(&[1.0, 2.0], &[2]);
    let key = GradKey::new("k");
    key.attach(&x, None).unwrap();
    let kept = x.exp().unwrap();
    {
        let _unused = x.tanh().unwrap().sigmoid().unwrap();
    }
    let ops: Vec<String> = key
        .saved_tensors_report()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(ops, vec!["exp".to_string()]);
    drop(kept);
}

fn saved_shapes(key: &GradKey) -> Vec<(String, Vec<Vec<usize>>)> {
    key.saved_tensors_report()
        .into_iter()
        .map(|(n, s)| (n, s.iter().map(|t| t.shape().to_vec()).collect()))
        .collect()
}

#[test]
fn rules_save_the_minimum() {
    let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let c = t(&[1.0, 2.0, 3.0], &[3]);
    let key = GradKey::new("k");
    key.attach(&x, None).unwrap();
    let outs = [
        x.add(&c).unwrap(),
        x.sum(Some(&[1]), false).unwrap(),
        x.reshape(&[3, 2]).unwrap(),
        x.broadcast_to(&[4, 2, 3]).unwrap(),
        x.relu().unwrap(),
        x.exp().unwrap(),
        x.sigmoid().unwrap(),
        x.tanh().unwrap(),
        x.mul(&c).unwrap(),
    ];
    let report = saved_shapes(&key);
    let expect: Vec<(&str, Vec<Vec<usize>>)> = vec![
        ("add", vec![]),
        ("sum", vec![]),
        ("reshape", vec![]),
        ("broadcast_to", vec![]),
        ("relu", vec![vec![2, 3]]),
        ("exp", vec![vec![2, 3]]),
        ("sigmoid", vec![vec![2, 3]]),
        ("tanh", vec![vec![2, 3]]),
        // only x needs a gradient, so only c (shape [3]) is kept
        ("mul", vec![vec![3]]),
    ];
    let got: Vec<(&str, Vec<Vec<usize>>)> = report
        .iter()
        .map(|(n, s)| (n.as_str(), s.clone()))
        .collect();
    assert_eq!(got, expect);
    // relu, exp, sigmoid and tanh keep their output, not their input
    for (i, name) in [(4, "relu"), (5, "exp"), (6, "sigmoid"), (7, "tanh")] {
        let saved = &key.saved_tensors_report()[i].1[0];
        assert!(
            Arc::ptr_eq(saved.storage(), outs[i].storage()),
            "{name} must keep its output"
        );
    }
}

/// Thread `i`'s chain: tanh(h * c + 0.1) repeated, with a dropped side branch every step (its
/// record leaves the tape while other threads record).
fn thread_chain(x: &Tensor, i: usize) -> Result<Tensor> {
    let c = 0.5 + 0.1 * i as f64;
    let mut h = x.clone();
    for _ in 0..200 {
        let _dead = h.exp()?;
        h = h.mul_scalar(c)?.add_scalar(0.1)?.tanh()?;
    }
    h.sum(None, false)
}

fn all_chains(x: &Tensor) -> Result<Tensor> {
    let mut total = thread_chain(x, 0)?;
    for i in 1..4 {
        total = total.add(&thread_chain(x, i)?)?;
    }
    Ok(total)
}

#[test]
fn threads_recording_on_one_key_and_on_their_own_keys_get_exact_gradients() {
    let xv = [0.3, -0.8, 1.2];
    let expected = numeric_grad(&all_chains, &xv, &[3]);

    // one key, four threads recording into it at once
    let x = t(&xv, &[3]);
    let key = GradKey::new("shared");
    key.attach(&x, None).unwrap();
    let outs: Vec<Tensor> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|i| {
                let x = &x;
                s.spawn(move || thread_chain(x, i).unwrap())
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut total = outs[0].clone();
    for o in &outs[1..] {
        total = total.add(o).unwrap();
    }
    key.backward(std::slice::from_ref(&total), &[total.ones_like().unwrap()])
        .unwrap();
    assert_close(&x.grad().unwrap().to_vec::<f64>().unwrap(), &expected, 1e-6);

    // every thread its own key on a shared input, forward and backward at the same time
    let x = t(&xv, &[3]);
    let grads: Vec<Vec<f64>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|i| {
                let x = &x;
                s.spawn(move || {
                    let key = GradKey::new(format!("own {i}"));
                    let got = Arc::new(Mutex::new(None));
                    let sink = got.clone();
                    let callback: ferrograd::GradCallback =
                        Arc::new(move |_: &Tensor, g: &Tensor| {
                            *sink.lock().unwrap() = Some(g.to_vec::<f64>()?);
                            Ok(None)
                        });
                    // no `.grad` accumulation: the threads share `x`
                    key.attach_with(x, Some(callback), false).unwrap();
                    let y = thread_chain(x, i).unwrap();
                    key.backward(std::slice::from_ref(&y), &[y.ones_like().unwrap()])
                        .unwrap();
                    let g = got.lock().unwrap().take();
                    g.expect("the callback ran")
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut sum = vec![0.0; 3];
    for g in &grads {
        for (s, v) in sum.iter_mut().zip(g) {
            *s += v;
        }
    }
    assert_close(&sum, &expected, 1e-6);
}

#[test]
fn retained_backward_runs_again_and_the_key_keeps_recording() {
    let x = t(&[1.0, -2.0, 0.5], &[3]);
    let key = GradKey::new("retain");
    key.attach(&x, None).unwrap();
    let h = x.tanh().unwrap();
    let y = h.mul(&h).unwrap().sum(None, false).unwrap();
    assert_eq!(key.producer_name(&y).as_deref(), Some("sum"));
    assert_eq!(key.producer_name(&x), None);
    assert!(key.is_leaf_of(&x) && !key.is_leaf_of(&h));
    let one = y.ones_like().unwrap();
    key.backward_retain(std::slice::from_ref(&y), std::slice::from_ref(&one))
        .unwrap();
    let g1 = x.grad().unwrap().to_vec::<f64>().unwrap();
    key.backward_retain(std::slice::from_ref(&y), std::slice::from_ref(&one))
        .unwrap();
    let g2 = x.grad().unwrap().to_vec::<f64>().unwrap();
    for (a, b) in g1.iter().zip(&g2) {
        assert!((2.0 * a - b).abs() < 1e-12, "{a} {b}");
    }
    // still recording: a new branch from the retained graph, then a final backward
    let z = h.sum(None, false).unwrap();
    key.backward(&[z], std::slice::from_ref(&one)).unwrap();
    let g3 = x.grad().unwrap().to_vec::<f64>().unwrap();
    for ((v, b), c) in [1.0f64, -2.0, 0.5].iter().zip(&g2).zip(&g3) {
        let d = 1.0 - v.tanh().powi(2);
        assert!((b + d - c).abs() < 1e-12, "{b} {d} {c}");
    }
    assert!(key.is_finished());
    assert!(key.backward(&[y], &[one]).is_err());
}
