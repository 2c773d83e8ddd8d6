//! Memory stays flat over many steps, and saved tensors are freed as backward proceeds.
//! One test per binary: the counters are process-wide.

use ferrograd::{memory, Device, GradKey, Tensor};

#[test]
fn ten_thousand_steps_leave_memory_flat() {
    let w = Tensor::from_vec((0..64).map(|i| i as f32 * 0.01).collect(), &[8, 8]).unwrap();
    let x = Tensor::from_vec((0..32).map(|i| (i as f32).sin()).collect(), &[4, 8]).unwrap();
    let step = |w: &Tensor| {
        let key = GradKey::new("step");
        key.attach(w, None).unwrap();
        let y = x
            .matmul(w)
            .unwrap()
            .tanh()
            .unwrap()
            .mul(&x)
            .unwrap()
            .sum(None, false)
            .unwrap();
        key.backward(std::slice::from_ref(&y), &[y.ones_like().unwrap()])
            .unwrap();
        w.set_grad(None).unwrap();
    };
    step(&w);
    let before = memory::stats(Device::Cpu);
    for _ in 0..10_000 {
        step(&w);
    }
    let after = memory::stats(Device::Cpu);
    assert_eq!(before.live_bytes, after.live_bytes);
    assert_eq!(before.live_tensors, after.live_tensors);
    assert_eq!(before.live_buffers, after.live_buffers);
}
