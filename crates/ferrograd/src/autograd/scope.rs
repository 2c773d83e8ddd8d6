//! Thread-local recording scopes.
//!
//! The *ceiling* is the level at and above which keys do not record: a key running backward
//! lowers it to its own level (inner keys cannot see an outer key's backward, and the key
//! itself is done), a custom function's forward lowers it so its internals are not recorded,
//! and `no_grad` lowers it to zero.

use std::cell::{Cell, RefCell};

thread_local! {
    static CEILINGS: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    static CEILING: Cell<u64> = const { Cell::new(u64::MAX) };
    static BACKWARD_LEVEL: Cell<u64> = const { Cell::new(u64::MAX) };
}

/// Keys at this level or above do not record on this thread.
pub fn ceiling() -> u64 {
    CEILING.with(|c| c.get())
}

/// Stops keys at `level` and above from recording until the matching [`pop_ceiling`].
pub fn push_ceiling(level: u64) {
    let now = ceiling();
    CEILINGS.with(|s| s.borrow_mut().push(now));
    CEILING.with(|c| c.set(now.min(level)));
}

/// Undoes the latest [`push_ceiling`].
pub fn pop_ceiling() {
    let prev = CEILINGS.with(|s| s.borrow_mut().pop()).unwrap_or(u64::MAX);
    CEILING.with(|c| c.set(prev));
}

/// RAII form of [`push_ceiling`] / [`pop_ceiling`].
pub struct CeilingGuard(());

impl CeilingGuard {
    pub fn new(level: u64) -> CeilingGuard {
        push_ceiling(level);
        CeilingGuard(())
    }
}

impl Drop for CeilingGuard {
    fn drop(&mut self) {
        pop_ceiling();
    }
}

/// No key records while the guard lives.
pub fn no_grad() -> CeilingGuard {
    CeilingGuard::new(0)
}

/// Marks tensors computed in a backward: the level of the key running it (high 32 bits) and
/// a serial taken when it started (low 32 bits). A key whose level is above that level and
/// that already existed then was kept from recording that computation.
pub(crate) fn backward_mark() -> u64 {
    BACKWARD_LEVEL.with(|c| c.get())
}

pub(crate) fn unpack_mark(mark: u64) -> (u64, u64) {
    if mark == u64::MAX {
        (u64::MAX, 0)
    } else {
        (mark >> 32, mark & 0xffff_ffff)
    }
}

pub(crate) struct BackwardGuard(u64);

impl BackwardGuard {
    pub(crate) fn enter(level: u64, serial: u64) -> BackwardGuard {
        let mark = ((level & 0xffff_ffff) << 32) | (serial & 0xffff_ffff);
        BackwardGuard(BACKWARD_LEVEL.with(|c| c.replace(c.get().min(mark))))
    }
}

impl Drop for BackwardGuard {
    fn drop(&mut self) {
        BACKWARD_LEVEL.with(|c| c.set(self.0));
    }
}
