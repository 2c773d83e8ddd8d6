//! Releasing long chains of `Arc`s (records of a tape, recipes of a mirrored chain) one at a
//! time: dropping them recursively would overflow the stack on chains of many thousand ops.

use std::cell::RefCell;
use std::thread::LocalKey;

/// Queues `parents` (what a dropping node owned) on `queue`; the outermost drop on this thread
/// then releases the queue until it is empty, so nested drops only ever push.
/// `release_now` runs inside that scope, for other fields that may hold further chains.
pub(crate) fn release<T: 'static>(
    queue: &'static LocalKey<RefCell<Option<Vec<T>>>>,
    parents: Vec<T>,
    release_now: impl FnOnce(),
) {
    let outermost = queue.with(|q| {
        let mut q = q.borrow_mut();
        match q.as_mut() {
            Some(pending) => {
                pending.extend(parents);
                false
            }
            None => {
                *q = Some(parents);
                true
            }
        }
    });
    release_now();
    if outermost {
        while let Some(next) = queue.with(|q| q.borrow_mut().as_mut().and_then(Vec::pop)) {
            drop(next);
        }
        queue.with(|q| *q.borrow_mut() = None);
    }
}
