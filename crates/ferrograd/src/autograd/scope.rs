//! Thread-local recording scopes.
//!
//! The *ceiling* is the level at and above which keys do not record: a key running backward
//! lowers it to its own level (inner keys cannot see an outer key's backward, and the key
//! itself is done), a custom function's forward lowers it so its internals are not recorded,
//! and `no_grad` lowers it to zero.

use std::cell::{Cell, RefCell};

/// What every recorded op reads, in one thread-local without a destructor (one cheap access).
struct Fast {
    ceiling: Cell<u64>,
    backward: Cell<u64>,
    /// Active checkpoint captures plus recompute proxies: recording must consult them.
    special: Cell<u32>,
}

thread_local! {
    static CEILINGS: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    static FAST: Fast = const {
        Fast {
            ceiling: Cell::new(u64::MAX),
            backward: Cell::new(u64::MAX),
            special: Cell::new(0),
        }
    };
}

/// The scope state recording needs, read at once.
#[derive(Clone, Copy)]
pub(crate) struct Snapshot {
    /// See [`ceiling`].
    pub(crate) ceiling: u64,
    /// Marks tensors computed in a backward: the level of the key running it (high 32 bits)
    /// and a serial taken when it started (low 32 bits). A key whose level is above that level
    /// and that already existed then was kept from recording that computation.
    pub(crate) mark: u64,
    /// Whether a checkpoint capture or a recompute proxy is active.
    pub(crate) special: bool,
}

pub(crate) fn snapshot() -> Snapshot {
    FAST.with(|f| Snapshot {
        ceiling: f.ceiling.get(),
        mark: f.backward.get(),
        special: f.special.get() > 0,
    })
}

fn special(delta: i32) {
    FAST.with(|f| f.special.set(f.special.get().wrapping_add_signed(delta)));
}

/// Keys at this level or above do not record on this thread.
pub fn ceiling() -> u64 {
    FAST.with(|f| f.ceiling.get())
}

/// Stops keys at `level` and above from recording until the matching [`pop_ceiling`].
pub fn push_ceiling(level: u64) {
    let now = ceiling();
    CEILINGS.with(|s| s.borrow_mut().push(now));
    FAST.with(|f| f.ceiling.set(now.min(level)));
}

/// Undoes the latest [`push_ceiling`].
pub fn pop_ceiling() {
    let prev = CEILINGS.with(|s| s.borrow_mut().pop()).unwrap_or(u64::MAX);
    FAST.with(|f| f.ceiling.set(prev));
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
        BackwardGuard(FAST.with(|f| f.backward.replace(f.backward.get().min(mark))))
    }
}

impl Drop for BackwardGuard {
    fn drop(&mut self) {
        FAST.with(|f| f.backward.set(self.0));
    }
}

thread_local! {
    static CAPTURES: RefCell<Vec<Vec<super::GradInfo>>> = const { RefCell::new(Vec::new()) };
    static PROXY: RefCell<Vec<Proxy>> = const { RefCell::new(Vec::new()) };
}

/// While a checkpointed function runs forward (with every key blocked), the slots of the
/// tracked tensors it reads: they become the inputs of the checkpoint op.
pub(crate) fn push_capture() {
    CAPTURES.with(|c| c.borrow_mut().push(Vec::new()));
    special(1);
}

pub(crate) fn pop_capture() -> Vec<super::GradInfo> {
    let popped = CAPTURES.with(|c| c.borrow_mut().pop());
    if popped.is_some() {
        special(-1);
    }
    popped.unwrap_or_default()
}

pub(crate) fn capturing() -> bool {
    CAPTURES.with(|c| !c.borrow().is_empty())
}

/// Notes the slots of keys that `inputs` are tracked by but that were kept from recording.
pub(crate) fn capture(inputs: &[&crate::Tensor]) {
    let top = ceiling();
    CAPTURES.with(|c| {
        let mut c = c.borrow_mut();
        let Some(list) = c.last_mut() else { return };
        for t in inputs {
            if !t.dtype().is_float() {
                continue;
            }
            for info in t.0.meta().infos.iter() {
                if info.key_level < top {
                    continue;
                }
                let recording = info.key().upgrade().is_some_and(|k| k.is_recording());
                let seen = list.iter().any(|i| {
                    i.key_id == info.key_id
                        && std::sync::Arc::ptr_eq(&i.func, &info.func)
                        && i.idx == info.idx
                });
                if recording && !seen {
                    list.push(info.clone());
                }
            }
        }
    });
}

/// While a checkpointed function is recomputed in the backward of key `from`, tensors that
/// `from` tracks are attached on first use to the recompute key `to`, which may record
/// although it sits above the ceiling.
pub(crate) struct Proxy {
    pub(crate) from: u64,
    pub(crate) to: super::GradKey,
    pub(crate) seen: Vec<(super::GradInfo, crate::Tensor)>,
}

pub(crate) fn push_proxy(from: u64, to: super::GradKey) {
    PROXY.with(|p| {
        p.borrow_mut().push(Proxy {
            from,
            to,
            seen: Vec::new(),
        })
    });
    special(1);
}

pub(crate) fn pop_proxy() -> Option<Proxy> {
    let popped = PROXY.with(|p| p.borrow_mut().pop());
    if popped.is_some() {
        special(-1);
    }
    popped
}

/// The recompute key allowed to record despite the ceiling, if any.
pub(crate) fn proxy_key_id() -> Option<u64> {
    PROXY.with(|p| p.borrow().last().map(|x| x.to.0.id))
}

/// Attaches to the recompute key every input tracked by the key being recomputed.
pub(crate) fn proxy_inputs(inputs: &[&crate::Tensor]) -> crate::Result<()> {
    let active = PROXY.with(|p| p.borrow().last().map(|x| (x.from, x.to.clone())));
    let Some((from, to)) = active else {
        return Ok(());
    };
    for t in inputs {
        let Some(info) = t.grad_info(from) else {
            continue;
        };
        if to.is_attached_to(t) {
            continue;
        }
        to.attach_with(t, None, false)?;
        PROXY.with(|p| {
            if let Some(x) = p.borrow_mut().last_mut() {
                x.seen.push((info, (*t).clone()));
            }
        });
    }
    Ok(())
}
