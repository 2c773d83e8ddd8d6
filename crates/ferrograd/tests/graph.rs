//! Graph mode from Rust: a traced training step gives the eager step's results, run again it
//! updates the captured parameters the same way; the gradient pass's semantics.

use ferrograd::graph::{self, Executable};
use ferrograd::{Error, GradKey, Tensor};

fn data(n: usize, scale: f64) -> Vec<f64> {
    (0..n).map(|i| ((i as f64) * 0.37 + scale).sin()).collect()
}

/// loss = sum(tanh(x @ w) * x2); w -= 0.1 * dloss/dw
fn eager_step(w: &Tensor, x: &Tensor) -> f64 {
    let key = GradKey::new("eager");
    key.attach(w, None).unwrap();
    let loss = x
        .matmul(w)
        .unwrap()
        .tanh()
        .unwrap()
        .sum(None, false)
        .unwrap();
    key.backward(std::slice::from_ref(&loss), &[loss.ones_like().unwrap()])
        .unwrap();
    let g = w.grad().unwrap();
    w.set_grad(None).unwrap();
    w.update_("sub", &w.sub(&g.mul_scalar(0.1).unwrap()).unwrap())
        .unwrap();
    loss.to_vec_f64().unwrap()[0]
}

fn traced_body(w: &Tensor, x: &Tensor) -> Tensor {
    let loss = x
        .matmul(w)
        .unwrap()
        .tanh()
        .unwrap()
        .sum(None, false)
        .unwrap();
    let gs = graph::gradients(
        std::slice::from_ref(&loss),
        &[loss.ones_like().unwrap()],
        std::slice::from_ref(w),
        &mut |_, _| Ok(()),
    )
    .unwrap();
    let g = gs[0].clone().unwrap();
    w.update_("sub", &w.sub(&g.mul_scalar(0.1).unwrap()).unwrap())
        .unwrap();
    loss
}

#[test]
fn traced_step_matches_eager_bitwise_and_replays() {
    let w_eager = Tensor::from_vec(data(12, 0.0), &[4, 3]).unwrap();
    let w_graph = Tensor::from_vec(data(12, 0.0), &[4, 3]).unwrap();
    let xs: Vec<Tensor> = (0..4)
        .map(|s| Tensor::from_vec(data(8, s as f64), &[2, 4]).unwrap())
        .collect();

    let handles = graph::begin(std::slice::from_ref(&xs[0])).unwrap();
    let loss = traced_body(&w_graph, &handles[0]);
    let g = graph::end(std::slice::from_ref(&loss)).unwrap();
    let first = loss.to_vec_f64().unwrap()[0];
    assert_eq!(first, eager_step(&w_eager, &xs[0]));
    assert_eq!(w_graph.to_vec_f64().unwrap(), w_eager.to_vec_f64().unwrap());

    let exe = Executable::new(g).unwrap();
    for x in &xs[1..] {
        let out = exe.run(std::slice::from_ref(x)).unwrap();
        let want = eager_step(&w_eager, x);
        assert_eq!(out[0].to_vec_f64().unwrap()[0], want);
        assert_eq!(w_graph.to_vec_f64().unwrap(), w_eager.to_vec_f64().unwrap());
    }
}

#[test]
fn unreached_inputs_get_no_gradient_and_callbacks_fire_once_each() {
    let a = Tensor::from_vec(data(3, 1.0), &[3]).unwrap();
    let b = Tensor::from_vec(data(3, 2.0), &[3]).unwrap();
    let unused = Tensor::from_vec(data(3, 3.0), &[3]).unwrap();
    let h = graph::begin(&[]).unwrap();
    assert!(h.is_empty());
    // a is read twice: its gradient is final only after both reads passed theirs back
    let y = a.mul(&b).unwrap().add(&a.exp().unwrap()).unwrap();
    let y = y.sum(None, false).unwrap();
    let mut fired = Vec::new();
    let gs = graph::gradients(
        std::slice::from_ref(&y),
        &[y.ones_like().unwrap()],
        &[a.clone(), b.clone(), unused.clone()],
        &mut |i, g| {
            fired.push((i, g.to_vec_f64().unwrap()));
            Ok(())
        },
    )
    .unwrap();
    graph::end(&[]).unwrap();
    assert!(gs[2].is_none());
    let (av, bv) = (a.to_vec_f64().unwrap(), b.to_vec_f64().unwrap());
    let da: Vec<f64> = av.iter().zip(&bv).map(|(a, b)| b + a.exp()).collect();
    assert_eq!(gs[0].as_ref().unwrap().to_vec_f64().unwrap(), da);
    assert_eq!(gs[1].as_ref().unwrap().to_vec_f64().unwrap(), av);
    let mut order: Vec<usize> = fired.iter().map(|f| f.0).collect();
    order.sort();
    assert_eq!(order, vec![0, 1]);
}

#[test]
fn reading_a_value_written_in_place_since_is_a_trace_error() {
    let x = Tensor::from_vec(data(4, 0.5), &[4]).unwrap();
    let h = graph::begin(std::slice::from_ref(&x)).unwrap();
    let y = h[0].exp().unwrap();
    let view = y.reshape(&[2, 2]).unwrap();
    let y2 = y.update_("add", &y.add_scalar(1.0).unwrap()).unwrap();
    let err = view.tanh().unwrap_err();
    graph::abort();
    assert!(matches!(err, Error::Trace { .. }), "{err}");
    // the continued handle is fine
    assert!(!graph::is_tracing());
    drop(y2);
}

#[test]
fn writing_into_an_argument_reaches_it_and_into_a_view_of_one_is_refused() {
    // the whole argument: every run leaves the new value in the tensor it is given
    let x = Tensor::from_vec(data(4, 0.5), &[4]).unwrap();
    let h = graph::begin(std::slice::from_ref(&x)).unwrap();
    let y = h[0].update_("add", &h[0].add_scalar(1.0).unwrap()).unwrap();
    let out = y.mul_scalar(2.0).unwrap();
    let g = graph::end(std::slice::from_ref(&out)).unwrap();
    let exe = Executable::new(g).unwrap();
    let z = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[4]).unwrap();
    let r = exe.run(std::slice::from_ref(&z)).unwrap();
    assert_eq!(z.to_vec_f64().unwrap(), vec![2.0, 3.0, 4.0, 5.0]);
    assert_eq!(r[0].to_vec_f64().unwrap(), vec![4.0, 6.0, 8.0, 10.0]);

    // a part of it: refused, naming the argument
    let x = Tensor::from_vec(data(4, 0.5), &[4]).unwrap();
    let h = graph::begin(std::slice::from_ref(&x)).unwrap();
    let part = h[0].narrow(0, 1, 2).unwrap();
    let err = part
        .update_("add", &part.add_scalar(1.0).unwrap())
        .unwrap_err();
    graph::abort();
    assert!(err.to_string().contains("argument 0"), "{err}");
}
