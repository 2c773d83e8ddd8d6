//! Thread-local recording scopes.
//!
//! A *blocked range* `[from, until)` of key levels keeps the keys whose level lies in it from
//! recording on this thread. A key running backward blocks its own level and the keys inner to
//! it that existed when backward began (inner keys cannot see an outer key's backward, and the
//! key itself is done); a custom function's forward blocks the keys tracking its inputs so its
//! internals are not recorded; `no_grad` blocks every key, also those made inside it. Keys made
//! inside a backward or a custom function's forward or backward (a callback's own GradKey)
//! are newer than the range and record as usual.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::sync::{Arc, Weak};

use crate::storage::Storage;

/// What every recorded op reads, in one thread-local without a destructor (one cheap access).
struct Fast {
    /// The lowest level any blocked range starts at: keys below it always record.
    ceiling: Cell<u64>,
    backward: Cell<u64>,
    /// Active checkpoint captures plus recompute proxies: recording must consult them.
    special: Cell<u32>,
}

thread_local! {
    /// The blocked ranges, innermost last, each with the ceiling before it was pushed.
    static BLOCKED: RefCell<Vec<(u64, u64, u64)>> = const { RefCell::new(Vec::new()) };
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

impl Snapshot {
    /// Whether a key at `level` is kept from recording on this thread.
    pub(crate) fn blocks(&self, level: u64) -> bool {
        level >= self.ceiling && blocked(level)
    }
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

/// Keys below this level always record on this thread (keys at or above it may be blocked).
pub fn ceiling() -> u64 {
    FAST.with(|f| f.ceiling.get())
}

/// Whether a key at `level` is kept from recording on this thread.
pub(crate) fn blocked(level: u64) -> bool {
    BLOCKED.with(|b| {
        for &(from, until, _) in b.borrow().iter().rev() {
            if from > until {
                return false; // an `enable_grad` barrier: what is pushed before it is lifted
            }
            if from <= level && level < until {
                return true;
            }
        }
        false
    })
}

/// Whether a key made now would record on this thread (PyTorch's `is_grad_enabled`): false
/// inside `no_grad`, true inside `enable_grad`. Inside a trace, whether the traced code has
/// gradients enabled (the trace's own block of the tape does not count).
pub fn grad_enabled() -> bool {
    match TRACE_CEILING.with(Cell::get) {
        usize::MAX => !blocked(super::key::next_key_id()),
        index => grad_enabled_without(index),
    }
}

thread_local! {
    /// The index in this thread's stack of the active trace's own ceiling (`usize::MAX`: none).
    static TRACE_CEILING: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// Marks the ceiling at `index` as a trace's own (`usize::MAX`: the trace ended); returns the
/// previous mark.
pub(crate) fn set_trace_ceiling(index: usize) -> usize {
    TRACE_CEILING.with(|t| t.replace(index))
}

/// [`grad_enabled`] as if the ceiling at `index` of this thread's stack were not there (a
/// trace's own block: whether the traced function's code has gradients enabled).
pub(crate) fn grad_enabled_without(index: usize) -> bool {
    let level = super::key::next_key_id();
    BLOCKED.with(|b| {
        for (k, &(from, until, _)) in b.borrow().iter().enumerate().rev() {
            if k == index {
                continue;
            }
            if from > until {
                return true;
            }
            if from <= level && level < until {
                return false;
            }
        }
        true
    })
}

/// Lifts every blocked range pushed so far on this thread (`enable_grad` inside `no_grad`),
/// until the matching [`pop_ceiling`]. Ranges pushed later block again.
pub fn push_enable() {
    let now = ceiling();
    BLOCKED.with(|b| b.borrow_mut().push((u64::MAX, 0, now)));
    FAST.with(|f| f.ceiling.set(u64::MAX));
}

fn push_range(from: u64, until: u64) {
    let now = ceiling();
    BLOCKED.with(|b| b.borrow_mut().push((from, until, now)));
    FAST.with(|f| f.ceiling.set(now.min(from)));
}

/// Keeps the keys at `level` and inner to it that exist now from recording on this thread,
/// until the matching [`pop_ceiling`]; `0` keeps every key from recording, also keys made
/// later (`no_grad`).
pub fn push_ceiling(level: u64) {
    if level == 0 {
        push_range(0, u64::MAX);
    } else {
        push_range(level, super::key::next_key_id());
    }
}

/// How many ceilings ([`push_ceiling`], [`push_enable`], guards) are pushed on this thread.
pub fn ceiling_depth() -> usize {
    BLOCKED.with(|b| b.borrow().len())
}

/// Pops ceilings until [`ceiling_depth`] is `depth` (PyTorch's grad-mode contexts restore
/// the mode they found on exit, also when a plain `set_grad_enabled` call inside them pushed
/// one of its own).
pub fn truncate_ceiling(depth: usize) {
    let restored = BLOCKED.with(|b| {
        let mut b = b.borrow_mut();
        let mut prev = None;
        while b.len() > depth {
            prev = b.pop().map(|(_, _, before)| before);
        }
        prev
    });
    if let Some(prev) = restored {
        FAST.with(|f| f.ceiling.set(prev));
    }
}

/// Undoes the latest [`push_ceiling`].
pub fn pop_ceiling() {
    let prev = BLOCKED
        .with(|b| b.borrow_mut().pop())
        .map_or(u64::MAX, |(_, _, before)| before);
    FAST.with(|f| f.ceiling.set(prev));
}

/// RAII form of [`push_ceiling`] / [`pop_ceiling`].
pub struct CeilingGuard(());

impl CeilingGuard {
    pub fn new(level: u64) -> CeilingGuard {
        push_ceiling(level);
        CeilingGuard(())
    }

    /// Keeps every key that exists now from recording (keys made later record): a backward
    /// pass that nothing outside it differentiates.
    pub(crate) fn existing() -> CeilingGuard {
        push_range(0, super::key::next_key_id());
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
    static CAPTURES: RefCell<Vec<Capture>> = const { RefCell::new(Vec::new()) };
    static PROXY: RefCell<Vec<Proxy>> = const { RefCell::new(Vec::new()) };
    static CAPTURE_PAUSED: Cell<bool> = const { Cell::new(false) };
}

/// Keeps the ops that run until it is set back from the checkpoint's view (returns the
/// previous setting): bookkeeping a checkpointed segment does on the side, which its outputs
/// do not depend on (a batch norm's running statistics, updated in place in training and
/// again when the segment is recomputed, as PyTorch's).
pub fn set_capture_paused(paused: bool) -> bool {
    CAPTURE_PAUSED.with(|p| p.replace(paused))
}

/// What a checkpointed function reads while it runs forward (with every key blocked).
#[derive(Default)]
pub(crate) struct Capture {
    /// The slots of the tracked tensors it reads: they become the inputs of the checkpoint op.
    pub(crate) slots: Vec<super::GradInfo>,
    /// Every buffer it reads that it did not make, with its version and the reading view's
    /// shape: a change before the rerun in backward would change what is recomputed.
    pub(crate) reads: Vec<(Weak<Storage>, u64, Vec<usize>)>,
    /// Buffers the function made (its intermediates and their views).
    made: HashSet<usize>,
    /// How many ceilings were pushed when the capture began: the checkpoint pushes one more
    /// to keep the tape out of its forward run. A ceiling the function pushes itself
    /// (`no_grad` inside it) keeps its inputs out of the segment's gradient, as it would
    /// without checkpointing.
    depth: usize,
}

pub(crate) fn push_capture() {
    let depth = ceiling_depth();
    CAPTURES.with(|c| {
        c.borrow_mut().push(Capture {
            depth,
            ..Capture::default()
        })
    });
    special(1);
}

pub(crate) fn pop_capture() -> Capture {
    let popped = CAPTURES.with(|c| c.borrow_mut().pop());
    if popped.is_some() {
        special(-1);
    }
    popped.unwrap_or_default()
}

pub(crate) fn capturing() -> bool {
    CAPTURES.with(|c| !c.borrow().is_empty())
}

/// Notes what an op inside a checkpointed function reads: the buffers it did not make, and
/// the slots of keys that track its inputs but were kept from recording.
pub(crate) fn capture(inputs: &[&crate::Tensor], outputs: &[crate::Tensor]) {
    if CAPTURE_PAUSED.with(|p| p.get()) {
        return;
    }
    let scope = snapshot();
    let depth = ceiling_depth();
    CAPTURES.with(|c| {
        let mut c = c.borrow_mut();
        let Some(cap) = c.last_mut() else { return };
        let own_block = depth <= cap.depth + 1;
        for t in inputs {
            let id = Arc::as_ptr(t.storage()) as usize;
            let known = cap.made.contains(&id)
                || cap.reads.iter().any(|(w, _, _)| w.as_ptr() as usize == id);
            if !known {
                cap.reads.push((
                    Arc::downgrade(t.storage()),
                    t.storage().version(),
                    t.shape().to_vec(),
                ));
            }
            if !t.dtype().is_float() || !own_block {
                continue;
            }
            for info in t.0.meta().infos.iter() {
                if !scope.blocks(info.key_level) {
                    continue;
                }
                let recording = info.key().upgrade().is_some_and(|k| k.is_recording());
                let seen = cap.slots.iter().any(|i| {
                    i.key_id == info.key_id && Arc::ptr_eq(&i.func, &info.func) && i.idx == info.idx
                });
                if recording && !seen {
                    cap.slots.push(info.clone());
                }
            }
        }
        for o in outputs {
            cap.made.insert(Arc::as_ptr(o.storage()) as usize);
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
    /// How many ceilings were pushed when the recomputation began: the recompute key
    /// records through those only, not through one the function pushes (`no_grad` in it).
    depth: usize,
}

pub(crate) fn push_proxy(from: u64, to: super::GradKey) {
    let depth = ceiling_depth();
    PROXY.with(|p| {
        p.borrow_mut().push(Proxy {
            from,
            to,
            seen: Vec::new(),
            depth,
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
    let depth = ceiling_depth();
    PROXY.with(|p| {
        p.borrow()
            .last()
            .filter(|x| depth <= x.depth)
            .map(|x| x.to.0.id)
    })
}

/// Attaches to the recompute key every input tracked by the key being recomputed.
pub(crate) fn proxy_inputs(inputs: &[&crate::Tensor]) -> crate::Result<()> {
    let depth = ceiling_depth();
    let active = PROXY.with(|p| {
        p.borrow()
            .last()
            .filter(|x| depth <= x.depth)
            .map(|x| (x.from, x.to.clone()))
    });
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
