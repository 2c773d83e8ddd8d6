//! Tensors over memory another library owns (zero-copy import): reads and writes go to that
//! memory, the owner is released exactly once with the last view, read-only memory refuses
//! writes, and ferrograd never frees memory it did not allocate.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ferrograd::op::BinaryOp;
use ferrograd::storage::Owner;
use ferrograd::Tensor;

/// Owns a buffer and counts its release.
struct Buffer {
    data: Vec<f64>,
    released: Arc<AtomicUsize>,
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.released.fetch_add(1, Ordering::SeqCst);
    }
}

fn borrowed(values: &[f64], read_only: bool) -> (Tensor, *mut f64, Arc<AtomicUsize>) {
    let released = Arc::new(AtomicUsize::new(0));
    let mut buf = Box::new(Buffer {
        data: values.to_vec(),
        released: released.clone(),
    });
    let ptr = buf.data.as_mut_ptr();
    let len = buf.data.len();
    // SAFETY: `buf` owns `len` f64 at `ptr` (a heap buffer the Box move does not touch) and
    // is kept by the tensor's storage until its last view is gone
    let t = unsafe {
        Tensor::from_borrowed(ptr, len, &[2, 2], &[1, 2], 0, Owner(buf), read_only).unwrap()
    };
    (t, ptr, released)
}

#[test]
fn borrowed_memory_is_shared_and_released_once() {
    let (t, ptr, released) = borrowed(&[1.0, 2.0, 3.0, 4.0], false);
    // strides [1, 2]: the transpose of the row-major buffer
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![1.0, 3.0, 2.0, 4.0]);
    let view = t.slice(&[ferrograd::SliceSpec::Index(0)]).unwrap();
    t.binary_assign_(BinaryOp::Mul, &Tensor::scalar(10.0f64))
        .unwrap();
    // SAFETY: the buffer is alive (the tensor holds it)
    assert_eq!(unsafe { *ptr.add(3) }, 40.0);
    assert_eq!(view.to_vec::<f64>().unwrap(), vec![10.0, 30.0]);
    drop(t);
    assert_eq!(
        released.load(Ordering::SeqCst),
        0,
        "a view still holds the memory"
    );
    drop(view);
    assert_eq!(released.load(Ordering::SeqCst), 1);
}

#[test]
fn read_only_memory_refuses_writes_and_stays_unchanged() {
    let (t, _, released) = borrowed(&[1.0, 2.0, 3.0, 4.0], true);
    let err = t
        .binary_assign_(BinaryOp::Add, &Tensor::scalar(1.0f64))
        .unwrap_err();
    assert!(err.to_string().contains("read-only"), "{err}");
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![1.0, 3.0, 2.0, 4.0]);
    let doubled = t.add(&t).unwrap();
    assert_eq!(doubled.to_vec::<f64>().unwrap(), vec![2.0, 6.0, 4.0, 8.0]);
    drop((t, doubled));
    assert_eq!(released.load(Ordering::SeqCst), 1);
}

#[test]
fn a_view_that_does_not_fit_is_refused() {
    let released = Arc::new(AtomicUsize::new(0));
    let mut buf = Box::new(Buffer {
        data: vec![0.0; 3],
        released: released.clone(),
    });
    let ptr = buf.data.as_mut_ptr();
    // SAFETY: as above; the call fails before it keeps anything
    let r = unsafe { Tensor::from_borrowed(ptr, 3, &[2, 2], &[2, 1], 0, Owner(buf), false) };
    assert!(r.is_err());
    assert_eq!(
        released.load(Ordering::SeqCst),
        1,
        "the owner is released on refusal"
    );
}
