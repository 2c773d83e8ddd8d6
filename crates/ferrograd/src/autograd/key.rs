//! `GradKey`, the `GradFn` records on its tape, and the reverse traversal.

use std::borrow::Cow;
use std::cell::RefCell;

use smallvec::SmallVec;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::producer::{ListId, NodeId, ProducerLists};
use super::record::{AMBIENT_RECORDING, RECORDING_KEYS};
use super::scope::{BackwardGuard, CeilingGuard};
use super::{GradInfo, GradRule};
use crate::error::{Error, Result};
use crate::sync::{Lock, LockGuard};
use crate::tensor::{Tensor, TensorImpl};

/// Called with `(tensor, grad)` once the tensor's gradient is final. Returning `Some(g)`
/// replaces the gradient passed on (to later callbacks and to `.grad`).
pub type GradCallback = Arc<dyn Fn(&Tensor, &Tensor) -> Result<Option<Tensor>> + Send + Sync>;

static NEXT_KEY_ID: AtomicU64 = AtomicU64::new(1);

/// The id (and level) the next key will get: keys at or above it do not exist yet.
pub(crate) fn next_key_id() -> u64 {
    NEXT_KEY_ID.load(Ordering::Relaxed)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A recorded op (or an attached tensor, which is a `GradFn` with one slot and no rule).
pub(crate) struct GradFn {
    pub(crate) key: Weak<KeyInner>,
    pub(crate) name: Cow<'static, str>,
    /// One producer list per slot; fixed at creation.
    pub(crate) slot_lists: SmallVec<[ListId; 1]>,
    /// Set once backward holds this record until it ends.
    pub(crate) kept_alive: AtomicBool,
    pub(crate) state: Lock<GradFnState>,
}

pub(crate) struct GradFnState {
    pub(crate) slots: SmallVec<[GradSlot; 1]>,
    pub(crate) dsts: SmallVec<[Option<Dst>; 2]>,
    pub(crate) rule: Option<Box<dyn GradRule>>,
    /// A backward that goes on recording (the autograd key's) ran this record's rule and
    /// freed it: a gradient arriving here later is PyTorch's "backward a second time".
    pub(crate) consumed: bool,
}

#[derive(Default)]
pub(crate) struct GradSlot {
    pub(crate) grad: Option<Tensor>,
    /// Set for attached tensors only (boxed: the slots of op outputs, the many, do without).
    pub(crate) attached: Option<Box<Attached>>,
}

/// What an attached tensor's slot adds.
pub(crate) struct Attached {
    pub(crate) callbacks: Vec<GradCallback>,
    /// The tensor as attached (sharing its `.grad`), which callbacks receive and `.grad`
    /// accumulation targets.
    pub(crate) target: Tensor,
    pub(crate) accumulate: bool,
}

/// A gradient slot: the `GradFn` it belongs to and its index there.
pub(crate) type Target = (Arc<GradFn>, usize);

/// Where one input's gradient goes, and this op's node in that slot's producer list.
#[derive(Clone)]
pub(crate) struct Dst {
    pub(crate) target: Arc<GradFn>,
    pub(crate) idx: u32,
    pub(crate) node: NodeId,
}

impl GradFn {
    pub(crate) fn state(&self) -> LockGuard<'_, GradFnState> {
        self.state.lock()
    }
}

/// The name of the record `attach` makes for a tensor the key does not track yet (a leaf).
const ATTACH: &str = "attach";

impl GradFn {
    /// Whether this is the record of an attached leaf (not of an op; an op's output may be
    /// attached too, for its callbacks).
    pub(crate) fn is_attach_record(&self) -> bool {
        self.name == ATTACH
    }
}

/// One record of a key's graph (PyTorch's autograd node): the op that produced a tensor,
/// or, for an attached tensor, the record its gradient accumulates through
/// (`AccumulateGrad`). Holding one keeps the record, and what it saved, alive.
#[derive(Clone)]
pub struct GradNode(Arc<GradFn>);

impl GradNode {
    /// The op's name (the attach record's for an attached tensor).
    pub fn name(&self) -> String {
        self.0.name.to_string()
    }
    /// Whether this is an attached tensor's record (PyTorch's `AccumulateGrad`).
    pub fn is_leaf(&self) -> bool {
        self.0.is_attach_record()
    }
    /// An identity for the life of the record.
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }
    /// The attached tensor of a leaf record (None otherwise, or once it stopped delivering).
    pub fn variable(&self) -> Option<Tensor> {
        let st = self.0.state();
        st.slots
            .iter()
            .find_map(|s| s.attached.as_ref().map(|a| a.target.clone()))
    }
    /// Whether `tensor` is this leaf record's attached tensor (the same tensor, or a handle
    /// sharing its `.grad`, as attaching keeps it).
    pub fn is_variable(&self, tensor: &Tensor) -> bool {
        let Some(v) = self.variable() else {
            return false;
        };
        if v.same(tensor) {
            return true;
        }
        let a = v.0.meta().grad.clone();
        let b = tensor.0.meta().grad.clone();
        matches!((a, b), (Some(a), Some(b)) if Arc::ptr_eq(&a, &b))
    }
    /// Per input of the op: the record its gradient goes to and the slot index there (None
    /// for an input that is not tracked). Empty once a backward freed the record.
    pub fn inputs(&self) -> Vec<Option<(GradNode, usize)>> {
        self.0
            .state()
            .dsts
            .iter()
            .map(|d| {
                d.as_ref()
                    .map(|d| (GradNode(d.target.clone()), d.idx as usize))
            })
            .collect()
    }
}

thread_local! {
    /// Whether the backward running on this thread records itself (PyTorch's
    /// `create_graph=True`): `.grad` then gets a copy of a first gradient and a new tensor
    /// for a sum, never an in-place write (the old `.grad` may be in the recorded graph).
    static CREATE_GRAPH: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// How many backward runs are on this thread's stack (more than one: a backward started
    /// inside a hook or rule of another).
    static BACKWARD_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// `GradFn`s whose last owner is being dropped, released one at a time: dropping a long
    /// chain recursively would overflow the stack.
    static DROP_QUEUE: RefCell<Option<Vec<Arc<GradFn>>>> = const { RefCell::new(None) };
}

impl Drop for GradFn {
    fn drop(&mut self) {
        let st = self.state.get_mut();
        if let Some(key) = self.key.upgrade() {
            let mut ks = key.state();
            for d in st.dsts.iter().flatten() {
                ks.lists.unlink(d.node);
            }
            for &l in &self.slot_lists {
                ks.lists.free_list(l);
            }
        }
        let parents: Vec<Arc<GradFn>> = std::mem::take(&mut st.dsts)
            .into_iter()
            .flatten()
            .map(|d| d.target)
            .collect();
        let rule = st.rule.take();
        let slots = std::mem::take(&mut st.slots);
        // what the rule saved and the slots' gradients may hold further chains: release them
        // inside the queue's scope too
        super::chain_drop::release(&DROP_QUEUE, parents, move || {
            drop(rule);
            drop(slots);
        });
    }
}

pub(crate) struct KeyInner {
    pub(crate) id: u64,
    /// Keys record the backward of keys at higher levels only; siblings share a level.
    pub(crate) level: u64,
    /// Set on keys that recompute cheap ops in backward instead of saving their outputs.
    pub(crate) mirror: Option<super::MirrorPolicy>,
    name: Mutex<String>,
    recording: AtomicBool,
    /// A key that is always there (the one behind PyTorch's `Tensor.backward`): it records,
    /// but does not by itself make traced functions run eagerly.
    ambient: bool,
    state: Lock<KeyState>,
}

#[derive(Default)]
pub(crate) struct KeyState {
    finished: bool,
    tape: Vec<Weak<GradFn>>,
    tracked: Vec<Weak<TensorImpl>>,
    pub(crate) lists: ProducerLists,
    /// Storages that rules of this key save (for mirroring's bytes rule).
    pub(crate) kept: std::collections::HashSet<usize>,
    /// The tape length at which dead entries are dropped next (a key that records for a long
    /// time without backward, such as the one behind `Tensor.backward`, stays small).
    prune_at: usize,
}

impl KeyInner {
    pub(crate) fn state(&self) -> LockGuard<'_, KeyState> {
        self.state.lock()
    }

    pub(crate) fn is_recording(&self) -> bool {
        self.recording.load(Ordering::Acquire)
    }

    fn resume_recording(&self) {
        if !self.recording.swap(true, Ordering::AcqRel) {
            RECORDING_KEYS.fetch_add(1, Ordering::AcqRel);
            if self.ambient {
                AMBIENT_RECORDING.fetch_add(1, Ordering::AcqRel);
            }
        }
    }

    fn stop_recording(&self) {
        if self.recording.swap(false, Ordering::AcqRel) {
            RECORDING_KEYS.fetch_sub(1, Ordering::AcqRel);
            if self.ambient {
                AMBIENT_RECORDING.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    pub(crate) fn track(&self, t: &Tensor) {
        self.state().tracked.push(Arc::downgrade(&t.0));
    }

    /// Creates a `GradFn` for an op: one slot per output, one destination per input that
    /// needs a gradient, registered in that input's producer list; float outputs get their
    /// slot and are tracked by this key.
    pub(crate) fn link(
        self: &Arc<Self>,
        name: Cow<'static, str>,
        targets: impl IntoIterator<Item = Option<Target>>,
        outputs: &[Tensor],
        rule: Box<dyn GradRule>,
    ) {
        let n_outputs = outputs.len();
        let mut slot_lists = SmallVec::new();
        let mut slots = SmallVec::new();
        let mut dsts = SmallVec::new();
        let f = {
            let mut ks = self.state();
            // another thread may have started this key's backward (or finished it) since the
            // op checked: the tape it runs on is fixed, so the op is not recorded
            if ks.finished || !self.is_recording() {
                return;
            }
            for _ in 0..n_outputs {
                slot_lists.push(ks.lists.new_list());
                slots.push(GradSlot::default());
            }
            for t in targets {
                dsts.push(t.map(|(func, idx)| Dst {
                    node: ks.lists.push(func.slot_lists[idx]),
                    target: func,
                    idx: idx as u32,
                }));
            }
            let f = Arc::new(GradFn {
                key: Arc::downgrade(self),
                name,
                slot_lists,
                kept_alive: AtomicBool::new(false),
                state: Lock::new(GradFnState {
                    consumed: false,
                    slots,
                    dsts,
                    rule: Some(rule),
                }),
            });
            ks.tape.push(Arc::downgrade(&f));
            for o in outputs {
                if o.dtype().is_float() {
                    ks.tracked.push(Arc::downgrade(&o.0));
                }
            }
            // (the tracked list too: the autograd key's tape shrinks at each backward)
            if ks.tape.len().max(ks.tracked.len()) >= ks.prune_at.max(4096) {
                // records whose outputs are all gone can never receive a gradient
                ks.tape.retain(|w| w.strong_count() > 0);
                ks.tracked.retain(|w| w.strong_count() > 0);
                ks.prune_at = 2 * ks.tape.len().max(ks.tracked.len());
            }
            f
        };
        // the last float output takes the record itself (no count to bump and drop)
        let last = outputs.iter().rposition(|o| o.dtype().is_float());
        let mut f = Some(f);
        for (i, o) in outputs.iter().enumerate() {
            if o.dtype().is_float() {
                let func = if Some(i) == last {
                    f.take().expect("taken once")
                } else {
                    f.clone().expect("taken last")
                };
                o.push_info(GradInfo {
                    key_id: self.id,
                    key_level: self.level,
                    func,
                    idx: i,
                });
            }
        }
    }

    /// Drops the records a partial backward freed (and dead ones) from the tape.
    fn drop_consumed_from_tape(&self) {
        let tape = std::mem::take(&mut self.state().tape);
        // (no key lock here: the last handle on a record may go, and its drop locks the key)
        let kept: Vec<Weak<GradFn>> = tape
            .into_iter()
            .filter(|w| w.upgrade().is_some_and(|f| !f.state().consumed))
            .collect();
        let mut ks = self.state();
        let newer = std::mem::replace(&mut ks.tape, kept);
        ks.tape.extend(newer);
    }

    /// Untracks every tensor this key tracks, which frees its graph.
    fn cleanup(&self) {
        self.stop_recording();
        let (tape, tracked) = {
            let mut ks = self.state();
            (
                std::mem::take(&mut ks.tape),
                std::mem::take(&mut ks.tracked),
            )
        };
        drop(tape);
        for w in tracked {
            if let Some(t) = w.upgrade() {
                let removed = Tensor(t).take_info(self.id);
                drop(removed);
            }
        }
    }
}

impl Drop for KeyInner {
    fn drop(&mut self) {
        if *self.recording.get_mut() {
            RECORDING_KEYS.fetch_sub(1, Ordering::AcqRel);
            if self.ambient {
                AMBIENT_RECORDING.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let ks = self.state.get_mut();
        let tracked = std::mem::take(&mut ks.tracked);
        for w in tracked {
            if let Some(t) = w.upgrade() {
                drop(Tensor(t).take_info(self.id));
            }
        }
    }
}

/// A gradient tape. Created recording; `backward` uses it once and finishes it.
#[derive(Clone)]
pub struct GradKey(pub(crate) Arc<KeyInner>);

/// Handles to one key are equal.
impl PartialEq for GradKey {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for GradKey {}

impl std::hash::Hash for GradKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.id.hash(state)
    }
}

impl GradKey {
    /// A new key, recording from now on. Keys created later are *inner* to this one.
    pub fn new(name: impl Into<String>) -> GradKey {
        let id = NEXT_KEY_ID.fetch_add(1, Ordering::Relaxed);
        GradKey::with_level(name, id, id, None, false)
    }

    /// A key like [`GradKey::new`] that a program keeps around (PyTorch's autograd): its
    /// recording alone does not make traced functions fall back to eager runs (see
    /// [`crate::graph::keys_recording`]); an argument it tracks still does.
    pub fn new_ambient(name: impl Into<String>) -> GradKey {
        let id = NEXT_KEY_ID.fetch_add(1, Ordering::Relaxed);
        GradKey::with_level(name, id, id, None, true)
    }

    /// A new key that recomputes cheap ops in backward instead of saving their outputs
    /// (see [`crate::autograd::auto_policy`]); gradients are unchanged.
    pub fn with_mirroring(name: impl Into<String>, policy: super::MirrorPolicy) -> GradKey {
        let id = NEXT_KEY_ID.fetch_add(1, Ordering::Relaxed);
        GradKey::with_level(name, id, id, Some(policy), false)
    }

    /// A new key at this key's level: neither records the other's backward.
    pub fn new_sibling(&self, name: impl Into<String>) -> GradKey {
        GradKey::with_level(
            name,
            NEXT_KEY_ID.fetch_add(1, Ordering::Relaxed),
            self.0.level,
            self.0.mirror.clone(),
            false,
        )
    }

    fn with_level(
        name: impl Into<String>,
        id: u64,
        level: u64,
        mirror: Option<super::MirrorPolicy>,
        ambient: bool,
    ) -> GradKey {
        RECORDING_KEYS.fetch_add(1, Ordering::AcqRel);
        if ambient {
            AMBIENT_RECORDING.fetch_add(1, Ordering::AcqRel);
        }
        GradKey(Arc::new(KeyInner {
            id,
            level,
            mirror,
            name: Mutex::new(name.into()),
            recording: AtomicBool::new(true),
            ambient,
            state: Lock::new(KeyState::default()),
        }))
    }

    pub fn name(&self) -> String {
        lock(&self.0.name).clone()
    }

    pub fn set_name(&self, name: impl Into<String>) {
        *lock(&self.0.name) = name.into();
    }

    /// The nesting level: keys created later have higher levels.
    pub fn level(&self) -> u64 {
        self.0.level
    }

    /// Whether the key still records (it stops at `backward` or [`GradKey::finish`]).
    pub fn is_active(&self) -> bool {
        self.0.is_recording()
    }

    /// Whether backward has run (or the key was finished by hand).
    pub fn is_finished(&self) -> bool {
        self.0.state().finished
    }

    fn refuse_if_finished(&self, what: &str) -> Result<()> {
        if self.0.state().finished {
            return Err(Error::autograd(format!(
                "GradKey '{}': {what} on a finished key (a key is used for one backward; \
                 create a new one for the next step)",
                self.name()
            )));
        }
        Ok(())
    }

    /// Tracks `tensor`: its gradient is computed by `backward`, its callbacks run as soon as
    /// that gradient is final, and (when `accumulate`) the result is added into `.grad`.
    /// Attaching again adds the callback to the same slot.
    pub fn attach(&self, tensor: &Tensor, callback: Option<GradCallback>) -> Result<()> {
        self.attach_with(tensor, callback, true)
    }

    /// Like [`GradKey::attach`], choosing whether the final gradient is added into `.grad`.
    pub fn attach_with(
        &self,
        tensor: &Tensor,
        callback: Option<GradCallback>,
        accumulate: bool,
    ) -> Result<()> {
        self.refuse_if_finished("attach")?;
        if !tensor.dtype().is_float() {
            return Err(Error::dtype(
                "attach",
                format!(
                    "only float tensors can be differentiated, got a {} tensor of shape {:?}",
                    tensor.dtype(),
                    tensor.shape()
                ),
            ));
        }
        if let Some(info) = tensor.grad_info(self.0.id) {
            let mut st = info.func.state();
            let slot = st.slots[info.idx].attached.get_or_insert_with(|| {
                Box::new(Attached {
                    callbacks: Vec::new(),
                    target: tensor.snapshot(),
                    accumulate: false,
                })
            });
            slot.callbacks.extend(callback);
            slot.accumulate |= accumulate;
            return Ok(());
        }
        let f = {
            let mut ks = self.0.state();
            if ks.finished {
                // finished by another thread since the check above
                drop(ks);
                return self.refuse_if_finished("attach");
            }
            let list = ks.lists.new_list();
            ks.tracked.push(Arc::downgrade(&tensor.0));
            Arc::new(GradFn {
                key: Arc::downgrade(&self.0),
                name: Cow::Borrowed(ATTACH),
                slot_lists: smallvec::smallvec![list],
                kept_alive: AtomicBool::new(false),
                state: Lock::new(GradFnState {
                    consumed: false,
                    slots: smallvec::smallvec![GradSlot {
                        grad: None,
                        attached: Some(Box::new(Attached {
                            callbacks: callback.into_iter().collect(),
                            target: tensor.snapshot(),
                            accumulate,
                        })),
                    }],
                    dsts: SmallVec::new(),
                    rule: None,
                }),
            })
        };
        tensor.push_info(GradInfo {
            key_id: self.0.id,
            key_level: self.0.level,
            func: f,
            idx: 0,
        });
        if self.0.ambient {
            tensor.storage().set_leaf_key(self.0.id);
        }
        Ok(())
    }

    /// Registers `hook` to run each time an eager backward of any key has delivered
    /// `tensor`'s final gradient as an attached tensor's (PyTorch's
    /// `register_post_accumulate_grad_hook`): after the key's callbacks and the accumulation
    /// into `.grad`, so the hook sees the accumulated `.grad`; hooks run in registration order,
    /// as early as the gradient is final, and what they return is ignored. The hook belongs to
    /// the tensor's `.grad` (shared by its handles and the snapshots keys take), so it survives
    /// the keys. `grad` (functional mode) and traced backward run none. Returns the id that
    /// [`GradKey::remove_post_accumulate_hook`] takes.
    pub fn register_post_accumulate_hook(tensor: &Tensor, hook: GradCallback) -> Result<u64> {
        if !tensor.dtype().is_float() {
            return Err(Error::dtype(
                "register_post_accumulate_grad_hook",
                format!(
                    "only float tensors have gradients, got a {} tensor of shape {:?}",
                    tensor.dtype(),
                    tensor.shape()
                ),
            ));
        }
        let cell = tensor.grad_cell();
        let id = NEXT_POST_HOOK.fetch_add(1, Ordering::Relaxed);
        ANY_POST_HOOK.store(true, Ordering::Relaxed);
        let dead = {
            let mut reg = lock(&POST_HOOKS);
            let map = reg.get_or_insert_with(Default::default);
            // (the hooks of tensors that are gone go too, dropped outside the lock: dropping
            // one may run code that registers or removes hooks)
            let gone: Vec<usize> = map
                .iter()
                .filter(|(_, h)| h.cell.strong_count() == 0)
                .map(|(&a, _)| a)
                .collect();
            let dead: Vec<PostHooks> = gone.iter().filter_map(|a| map.remove(a)).collect();
            map.entry(Arc::as_ptr(&cell) as usize)
                .or_insert_with(|| PostHooks {
                    cell: Arc::downgrade(&cell),
                    hooks: Vec::new(),
                })
                .hooks
                .push((id, hook));
            dead
        };
        drop(dead);
        Ok(id)
    }

    /// Runs `tensor`'s post-accumulate hooks now: for a backward that added into `.grad`
    /// outside the tape's delivery (PyTorch's `backward(inputs=...)`).
    pub fn run_post_accumulate_hooks(tensor: &Tensor) -> Result<()> {
        match tensor.grad() {
            Some(g) => run_post_accumulate_hooks(tensor, &g),
            None => Ok(()),
        }
    }

    /// Removes a hook [`GradKey::register_post_accumulate_hook`] registered; false when it was
    /// removed already (or its tensor is gone).
    pub fn remove_post_accumulate_hook(id: u64) -> bool {
        let (removed, emptied) = {
            let mut reg = lock(&POST_HOOKS);
            let Some(map) = reg.as_mut() else {
                return false;
            };
            let mut removed = None;
            let mut emptied = None;
            for (&addr, h) in map.iter_mut() {
                if let Some(i) = h.hooks.iter().position(|(i, _)| *i == id) {
                    removed = Some(h.hooks.remove(i));
                    if h.hooks.is_empty() {
                        emptied = Some(addr);
                    }
                    break;
                }
            }
            let emptied = emptied.and_then(|a| map.remove(&a));
            (removed, emptied)
        };
        let found = removed.is_some();
        drop((removed, emptied));
        found
    }

    /// `tensor`, attached, gets nothing more from this key: backward no longer adds into its
    /// `.grad` nor runs its callbacks (PyTorch's `requires_grad_(False)` on a leaf that
    /// graphs were built from: they still backpropagate to everything else).
    pub fn stop_delivering(&self, tensor: &Tensor) {
        if let Some(info) = tensor.grad_info(self.0.id) {
            if let Some(a) = info.func.state().slots[info.idx].attached.as_mut() {
                a.accumulate = false;
                a.callbacks.clear();
            }
        }
        // no longer a leaf that requires grad here: in-place writes into it are recorded
        // (not refused as writes into a leaf)
        if tensor.storage().leaf_key() == self.0.id {
            tensor.storage().set_leaf_key(0);
        }
    }

    /// Whether this key tracks `tensor` (attached, or computed from attached tensors).
    pub fn is_attached_to(&self, tensor: &Tensor) -> bool {
        tensor.grad_info(self.0.id).is_some()
    }

    /// Every live recorded op on the tape, in order, with the tensors its rule keeps.
    pub fn saved_tensors_report(&self) -> Vec<(String, Vec<Tensor>)> {
        let tape: Vec<Arc<GradFn>> = self
            .0
            .state()
            .tape
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        tape.iter()
            .map(|f| {
                let saved = f
                    .state()
                    .rule
                    .as_ref()
                    .map(|r| r.saved_tensors())
                    .unwrap_or_default();
                (f.name.to_string(), saved)
            })
            .collect()
    }

    /// Stops recording and frees the tape without running backward.
    pub fn finish(&self) {
        self.0.state().finished = true;
        self.0.cleanup();
    }

    /// Seeds `ys` with `dys`, walks the tape in reverse, and finishes the key. (An ambient
    /// key, the one behind PyTorch-style `Tensor.backward`, instead frees only the records
    /// this backward reached and goes on recording: graphs beside them stay differentiable,
    /// and a gradient reaching a freed record later is an error.)
    /// Inside a trace (see [`crate::graph`]), the graph gradient pass builds the gradients
    /// instead of the tape: callbacks run as each gradient is final, as here.
    pub fn backward(&self, ys: &[Tensor], dys: &[Tensor]) -> Result<()> {
        if crate::graph::is_tracing() {
            return self.traced(ys, dys, None, None).map(|_| ());
        }
        self.drive(ys, dys, None, true, false, false).map(|_| ())
    }

    /// [`GradKey::backward`] that keeps the recording (PyTorch's `retain_graph=True`): the
    /// rules and their saved tensors stay, the key goes on recording, and a later backward
    /// through the same ops works again.
    pub fn backward_retain(&self, ys: &[Tensor], dys: &[Tensor]) -> Result<()> {
        self.backward_kept(ys, dys, false)
    }

    /// [`GradKey::backward_retain`] that records the backward onto this key's own tape
    /// (PyTorch's `create_graph=True`): the gradients delivered to `.grad` and callbacks are
    /// tracked by this key, so a later backward differentiates them (second order).
    pub fn backward_create_graph(&self, ys: &[Tensor], dys: &[Tensor]) -> Result<()> {
        self.backward_kept(ys, dys, true)
    }

    fn backward_kept(&self, ys: &[Tensor], dys: &[Tensor], record_self: bool) -> Result<()> {
        if crate::graph::is_tracing() {
            return Err(Error::autograd(
                "backward with retain_graph or create_graph cannot be traced; use a \
                 GradManager in fg.trace",
            ));
        }
        self.drive(ys, dys, None, true, true, record_self)
            .map(|_| ())
    }

    /// The name of the recorded op of this key that produced `tensor` (None for an attached
    /// tensor or one this key does not track).
    pub fn producer_name(&self, tensor: &Tensor) -> Option<String> {
        let info = tensor.grad_info(self.0.id)?;
        (!info.func.is_attach_record()).then(|| info.func.name.to_string())
    }

    /// The recorded op of this key that produced `tensor`, as a node of the graph (None for
    /// an attached tensor or one this key does not track): PyTorch's `grad_fn`.
    pub fn producer_node(&self, tensor: &Tensor) -> Option<GradNode> {
        let info = tensor.grad_info(self.0.id)?;
        (!info.func.is_attach_record()).then(|| GradNode(info.func))
    }

    /// Stops tracking `tensor` (PyTorch's `detach_`): ops on it are no longer recorded by
    /// this key and no gradient flows back through it from later ops.
    pub fn forget(&self, tensor: &Tensor) {
        drop(tensor.take_info(self.0.id));
    }

    /// Whether backward adds `tensor`'s gradient into its `.grad` (an attached leaf, or a
    /// computed tensor attached with accumulation: PyTorch's `retain_grad`).
    pub fn accumulates_into(&self, tensor: &Tensor) -> bool {
        tensor.grad_info(self.0.id).is_some_and(|i| {
            i.func.state().slots[i.idx]
                .attached
                .as_ref()
                .is_some_and(|a| a.accumulate)
        })
    }

    /// Whether `tensor` is a leaf of this key: attached, not computed by a recorded op.
    pub fn is_leaf_of(&self, tensor: &Tensor) -> bool {
        tensor
            .grad_info(self.0.id)
            .is_some_and(|i| i.func.is_attach_record())
    }

    /// The gradients of `ys` (seeded with `dys`) with respect to `xs`, which this key must
    /// track, without running callbacks or touching `.grad`. With `create_graph`, outer keys
    /// record the computation so the result can be differentiated again. Finishes the key.
    /// An `x` that no gradient reaches gets zeros.
    pub fn grad(
        &self,
        ys: &[Tensor],
        dys: &[Tensor],
        xs: &[Tensor],
        create_graph: bool,
    ) -> Result<Vec<Tensor>> {
        self.grad_reached(ys, dys, xs, create_graph)?
            .into_iter()
            .zip(xs)
            .map(|(g, x)| match g {
                Some(g) => Ok(g),
                None => x.zeros_like(),
            })
            .collect()
    }

    /// [`GradKey::grad`], with `None` for an `x` that no gradient reaches (PyTorch's
    /// `backward(inputs=...)` leaves such a tensor's `.grad` as it was). On the key behind
    /// PyTorch-style `requires_grad` (an ambient key), `create_graph` keeps the recording and
    /// records the backward onto it, as PyTorch does.
    pub fn grad_reached(
        &self,
        ys: &[Tensor],
        dys: &[Tensor],
        xs: &[Tensor],
        create_graph: bool,
    ) -> Result<Vec<Option<Tensor>>> {
        let own = create_graph && self.0.ambient;
        self.collect(ys, dys, xs, create_graph, own, own)
    }

    /// [`GradKey::grad_reached`] that keeps the recording (PyTorch's `retain_graph=True`);
    /// with `create_graph` this key records the backward too, onto the same tape, so the
    /// gradients can be differentiated again by this key.
    pub fn grad_reached_retain(
        &self,
        ys: &[Tensor],
        dys: &[Tensor],
        xs: &[Tensor],
        create_graph: bool,
    ) -> Result<Vec<Option<Tensor>>> {
        if crate::graph::is_tracing() {
            return Err(Error::autograd(
                "grad with retain_graph cannot be traced; use a GradManager in fg.trace",
            ));
        }
        self.collect(ys, dys, xs, create_graph, true, create_graph)
    }

    fn collect(
        &self,
        ys: &[Tensor],
        dys: &[Tensor],
        xs: &[Tensor],
        record: bool,
        retain: bool,
        record_self: bool,
    ) -> Result<Vec<Option<Tensor>>> {
        if crate::graph::is_tracing() {
            return self.traced(ys, dys, Some(xs), Some(record));
        }
        let mut targets = Vec::with_capacity(xs.len());
        for (i, x) in xs.iter().enumerate() {
            match x.grad_info(self.0.id) {
                Some(info) => targets.push((info.func, info.idx)),
                None => {
                    return Err(Error::autograd(format!(
                    "grad: input {i} (a {} tensor of shape {:?}) is not attached to GradKey '{}' \
                         and not computed from a tensor it tracks",
                    x.dtype(),
                    x.shape(),
                    self.name()
                )))
                }
            }
        }
        let mut found: Vec<Option<Tensor>> = vec![None; xs.len()];
        let collect = Some((&targets[..], &mut found, self.0.ambient));
        self.drive(ys, dys, collect, record, retain, record_self)?;
        Ok(found)
    }

    /// Backward inside a trace: the graph gradient pass over the traced ops, to `xs` (handing
    /// the gradients back) or, when `None`, to the attached tensors (callbacks and `.grad` as
    /// in [`GradKey::backward`]). Finishes the key. The gradient graph is differentiable
    /// again where the tape's backward would be recorded: `create_graph` (`Some(record)`),
    /// or, for a backward, another key recording now (nested managers).
    fn traced(
        &self,
        ys: &[Tensor],
        dys: &[Tensor],
        xs: Option<&[Tensor]>,
        create_graph: Option<bool>,
    ) -> Result<Vec<Option<Tensor>>> {
        self.refuse_if_finished("backward")?;
        self.0.state().finished = true;
        self.0.stop_recording();
        let differentiable = create_graph.unwrap_or_else(super::record::is_recording_any_scoped);
        let result = match xs {
            Some(xs) => {
                crate::graph::gradients_with(ys, dys, xs, differentiable, &mut |_, _| Ok(()))
            }
            None => {
                let attached = self.attached();
                let targets: Vec<Tensor> = attached.iter().map(|a| a.target.clone()).collect();
                crate::graph::gradients_with(ys, dys, &targets, differentiable, &mut |i, g| {
                    let a = &attached[i];
                    deliver(&a.target, g.clone(), &a.callbacks, a.accumulate).map(|_| ())
                })
            }
        };
        self.0.cleanup();
        result
    }

    /// The tensors attached to this key (live ones, in attach order), with their callbacks.
    fn attached(&self) -> Vec<Attached> {
        let tracked: Vec<Tensor> = self
            .0
            .state()
            .tracked
            .iter()
            .filter_map(Weak::upgrade)
            .map(Tensor)
            .collect();
        let mut out: Vec<(Arc<GradFn>, usize, Attached)> = Vec::new();
        for t in tracked {
            let Some(info) = t.grad_info(self.0.id) else {
                continue;
            };
            if out
                .iter()
                .any(|(f, i, _)| Arc::ptr_eq(f, &info.func) && *i == info.idx)
            {
                continue;
            }
            let a = info.func.state().slots[info.idx]
                .attached
                .as_ref()
                .map(|a| Attached {
                    callbacks: a.callbacks.clone(),
                    target: a.target.clone(),
                    accumulate: a.accumulate,
                });
            if let Some(a) = a {
                out.push((info.func.clone(), info.idx, a));
            }
        }
        out.into_iter().map(|(_, _, a)| a).collect()
    }

    /// Runs backward from `ys`. `record`: outer keys record it; `retain`: the recording
    /// stays for another backward; `record_self` (with `retain`): this key records the
    /// backward too, onto the same tape, so its results can be differentiated again with this
    /// key (PyTorch's `create_graph=True`).
    fn drive(
        &self,
        ys: &[Tensor],
        dys: &[Tensor],
        collect: Option<Collect<'_>>,
        record: bool,
        retain: bool,
        record_self: bool,
    ) -> Result<()> {
        debug_assert!(retain || !record_self);
        self.refuse_if_finished("backward")?;
        if ys.len() != dys.len() {
            return Err(Error::autograd(format!(
                "GradKey '{}': backward got {} tensors and {} gradients",
                self.name(),
                ys.len(),
                dys.len()
            )));
        }
        for (y, dy) in ys.iter().zip(dys) {
            let mismatch = || {
                format!(
                    "Mismatch in shape or dtype: the gradient for a {} tensor of shape {:?} must \
                     match its dtype and shape, got {} {:?}",
                    y.dtype(),
                    y.shape(),
                    dy.dtype(),
                    dy.shape()
                )
            };
            if y.dtype() != dy.dtype() {
                return Err(Error::dtype("backward", mismatch()));
            }
            if y.shape() != dy.shape() {
                return Err(Error::shape("backward", mismatch()));
            }
            if y.device() != dy.device() {
                return Err(Error::device(
                    "backward",
                    format!(
                        "tensor on {} but its gradient on {}",
                        y.device(),
                        dy.device()
                    ),
                ));
            }
            let (level, serial) = super::scope::unpack_mark(y.hidden_from());
            if self.0.level > level && self.0.id < serial {
                return Err(Error::autograd(format!(
                    "GradKey '{}': cannot differentiate the backward of a key outside it: the \
                     {} tensor of shape {:?} was computed in the backward of an outer key, which \
                     inner keys do not record. Nest the other way round: run the inner manager's \
                     backward inside the outer one and let the outer manager differentiate it.",
                    self.name(),
                    y.dtype(),
                    y.shape()
                )));
            }
        }
        // the autograd key (PyTorch's tape) frees only what this backward reached: graphs
        // beside it stay differentiable, and the key goes on recording
        let partial = !retain && self.0.ambient;
        let (tape, mut working) = {
            let mut ks = self.0.state();
            if retain || partial {
                // the producer lists are used up as gradients become final: this run works
                // on a copy, the key's own lists stay whole (and take what it records now)
                (ks.tape.clone(), Some(ks.lists.clone()))
            } else {
                ks.finished = true;
                (std::mem::take(&mut ks.tape), None)
            }
        };
        let was_recording = self.0.is_recording();
        // the autograd key stays switched on and only this thread's ceiling keeps it from
        // recording the rules, as PyTorch's grad mode: `enable_grad()` inside a custom rule
        // records again (a reentrant backward, as checkpointing does)
        if !record_self && !partial {
            self.0.stop_recording();
        }
        let result = {
            // keys made during backward (in a callback or a custom rule) record as usual
            let _ceiling = match (record, record_self) {
                (true, true) => CeilingGuard::new(self.0.level + 1),
                (true, false) => CeilingGuard::new(self.0.level),
                _ => CeilingGuard::existing(),
            };
            let _backward =
                BackwardGuard::enter(self.0.level, NEXT_KEY_ID.fetch_add(1, Ordering::Relaxed));
            let mode = RunMode {
                retain,
                record_self,
                partial,
            };
            // every record of the tape lives until the run ends: one dropped meanwhile (its
            // last owner released by a callback, or by Python's cycle collector running in
            // a custom rule) would unlink its producer nodes from the key's lists but not from
            // this run's copy, and the gradients waiting on it would never become final
            let alive: Vec<Arc<GradFn>> = tape.iter().filter_map(Weak::upgrade).collect();
            let outer_create_graph = CREATE_GRAPH.with(|c| c.replace(record_self));
            BACKWARD_DEPTH.with(|c| c.set(c.get() + 1));
            let r = self.run(ys, dys, tape, collect, working.as_mut(), mode);
            BACKWARD_DEPTH.with(|c| c.set(c.get().saturating_sub(1)));
            CREATE_GRAPH.with(|c| c.set(outer_create_graph));
            drop(alive);
            r
        };
        if retain || partial {
            if was_recording {
                self.0.resume_recording();
            }
            if partial {
                self.0.drop_consumed_from_tape();
            }
        } else {
            self.0.cleanup();
        }
        result
    }

    fn run(
        &self,
        ys: &[Tensor],
        dys: &[Tensor],
        tape: Vec<Weak<GradFn>>,
        mut collect: Option<Collect<'_>>,
        mut working: Option<&mut ProducerLists>,
        mode: RunMode,
    ) -> Result<()> {
        let RunMode {
            retain,
            record_self,
            partial,
        } = mode;
        let own_copy = working.is_some();
        // this run's own copy of the producer lists (retained or partial), or the key's
        let mut with_lists = |f: &mut dyn FnMut(&mut ProducerLists)| match working.as_deref_mut() {
            Some(l) => f(l),
            None => f(&mut self.0.state().lists),
        };
        // functional mode: the records on a path to a wanted gradient; the others' rules do
        // not run, their tensors' hooks do not fire and no gradient waits in their slots
        // (PyTorch's `autograd.grad` runs only what its inputs need)
        let needed = collect
            .as_ref()
            .map(|(targets, _, _)| needed_records(&tape, targets));
        let is_needed = |f: &Arc<GradFn>| match &needed {
            Some(n) => n.contains(&(Arc::as_ptr(f) as usize)),
            None => true,
        };
        let mut seeded: Vec<(Arc<GradFn>, usize)> = Vec::new();
        for (y, dy) in ys.iter().zip(dys) {
            if let Some(info) = y.grad_info(self.0.id) {
                accumulate(&info.func, info.idx, dy.clone())?;
                if !seeded
                    .iter()
                    .any(|(f, i)| Arc::ptr_eq(f, &info.func) && *i == info.idx)
                {
                    seeded.push((info.func, info.idx));
                }
            }
        }
        // Slots fired so far (record address, slot), and the attached tensors' slots that an
        // unlink left waiting on other producers. A producer whose record dies in another
        // thread while this run goes on unlinks itself without making the slot final (its
        // drop cannot fire): every live producer has run by the end of the walk, so slots
        // still waiting then are final, and fire there.
        let mut fired: Vec<(usize, usize)> = Vec::new();
        let mut waiting: Vec<(Arc<GradFn>, usize)> = Vec::new();
        for (f, idx) in &seeded {
            let mut empty = false;
            with_lists(&mut |l| empty = l.is_empty(f.slot_lists[*idx]));
            if empty && is_needed(f) && fire(f, *idx, &mut collect)? {
                fired.push((Arc::as_ptr(f) as usize, *idx));
            }
        }
        // Keeps every GradFn that may still receive gradients alive until backward ends,
        // even after the ops that referenced it have been cleared.
        let mut keeper: Vec<Arc<GradFn>> = Vec::new();
        // a retained recording runs again: no gradient may stay behind in its slots (a
        // leaf's, or one handed over in functional mode), even when a rule fails
        let mut cleared = ClearSlots(Vec::new());
        if retain || partial {
            cleared.0.extend(seeded.iter().map(|(f, _)| f.clone()));
        }
        // the records this backward reaches from its roots: only they run and fire. A
        // backward started inside a hook or rule of another one on the same key (reentrant)
        // must not take that one's pending gradients nor fire its slots again
        // (only a backward inside another one needs it: alone, the records it does not
        // reach are left by `is_needed` below)
        let nested = BACKWARD_DEPTH.with(|c| c.get()) > 1;
        let reach = if own_copy && nested {
            reached_records(&tape, &seeded)
        } else {
            Default::default()
        };
        for weak in tape.iter().rev() {
            let Some(f) = weak.upgrade() else { continue };
            // (a run on this run's own copy of the lists; a backward that frees the whole
            // recording cannot be entered again)
            if own_copy && nested && !reach.contains(&(Arc::as_ptr(&f) as usize)) {
                // (its inputs' slots wait on it no longer in this run)
                let dsts: Vec<NodeId> = f.state().dsts.iter().flatten().map(|d| d.node).collect();
                let mut finals = Vec::new();
                with_lists(&mut |l| {
                    for &node in &dsts {
                        l.unlink(node);
                    }
                });
                let st = f.state();
                for d in st.dsts.iter().flatten() {
                    let idx = d.idx as usize;
                    if reach.contains(&(Arc::as_ptr(&d.target) as usize))
                        && !finals.iter().any(|(t, i): &(Arc<GradFn>, usize)| {
                            Arc::ptr_eq(t, &d.target) && *i == idx
                        })
                    {
                        finals.push((d.target.clone(), idx));
                    }
                }
                drop(st);
                for (target, idx) in finals {
                    let mut empty = false;
                    with_lists(&mut |l| empty = l.is_empty(target.slot_lists[idx]));
                    if empty && is_needed(&target) && fire(&target, idx, &mut collect)? {
                        fired.push((Arc::as_ptr(&target) as usize, idx));
                    }
                }
                continue;
            }
            if !is_needed(&f) {
                // (as a record this backward does not reach: it stays whole for another)
                let seeds: Vec<Option<Tensor>> =
                    f.state().slots.iter_mut().map(|s| s.grad.take()).collect();
                drop(seeds);
                continue;
            }
            let collected = |i: usize| {
                collect.as_ref().is_some_and(|(targets, _, _)| {
                    targets
                        .iter()
                        .any(|(tf, ti)| Arc::ptr_eq(tf, &f) && *ti == i)
                })
            };
            let mut st = f.state();
            if (0..st.slots.len()).any(|i| st.slots[i].attached.is_some() || collected(i)) {
                // an output with callbacks (or collected) whose last consumer died in another
                // thread was never made final: its consumers have all run, so it is final now
                let watched: SmallVec<[usize; 2]> = (0..st.slots.len())
                    .filter(|&i| st.slots[i].attached.is_some() || collected(i))
                    .collect();
                drop(st);
                for idx in watched {
                    let at = (Arc::as_ptr(&f) as usize, idx);
                    if !fired.contains(&at) && fire(&f, idx, &mut collect)? {
                        fired.push(at);
                    }
                }
                st = f.state();
            }
            let (grads, rule, dsts) = {
                let grads: Vec<Option<Tensor>> =
                    st.slots.iter_mut().map(|s| s.grad.take()).collect();
                let taken = (grads, st.rule.take(), std::mem::take(&mut st.dsts));
                drop(st);
                taken
            };
            let reached = grads.iter().any(Option::is_some);
            let outcome = match &rule {
                Some(rule) if reached => {
                    // recording itself, the key hands the rule its output with this record's
                    // slot, so the backward it records sees how the output depends on inputs
                    let _own = record_self.then(|| {
                        super::builtin::OwnSlotGuard::enter(GradInfo {
                            key_id: self.0.id,
                            key_level: self.0.level,
                            func: f.clone(),
                            idx: 0,
                        })
                    });
                    run_rule(rule.as_ref(), &grads, &dsts, &is_needed)
                }
                _ => Ok(()),
            };
            drop(grads);
            // a retained record, or one a partial backward did not reach, stays for the next
            // backward through it (its nodes are unlinked below in this run's copy of the
            // lists only)
            // (as in PyTorch, a rule that saved no tensor can run again)
            let keep = retain
                || (partial
                    && (!reached || rule.as_ref().is_some_and(|r| r.saved_tensors().is_empty())));
            if keep {
                let mut st = f.state();
                st.rule = rule;
                st.dsts = dsts.clone();
                drop(st);
            } else {
                // saved tensors go now, not at the end of backward
                drop(rule);
                if partial {
                    f.state().consumed = true;
                    let mut ks = self.0.state();
                    for d in dsts.iter().flatten() {
                        ks.lists.unlink(d.node);
                    }
                }
            }
            let mut finals = Vec::new();
            with_lists(&mut |l| {
                for d in dsts.iter().flatten() {
                    l.unlink(d.node);
                    if l.is_empty(d.target.slot_lists[d.idx as usize]) {
                        finals.push((d.target.clone(), d.idx as usize));
                    } else if d.target.is_attach_record()
                        && !waiting
                            .iter()
                            .any(|(t, i)| Arc::ptr_eq(t, &d.target) && *i == d.idx as usize)
                    {
                        waiting.push((d.target.clone(), d.idx as usize));
                    }
                }
            });
            if retain || partial {
                cleared
                    .0
                    .extend(dsts.iter().flatten().map(|d| d.target.clone()));
            }
            // (a kept record keeps its destinations, which keep their records alive)
            for d in dsts.into_iter().flatten().filter(|_| !keep) {
                if !d.target.kept_alive.swap(true, Ordering::Relaxed) {
                    keeper.push(d.target);
                }
            }
            outcome?;
            for (target, idx) in finals {
                if is_needed(&target) && fire(&target, idx, &mut collect)? {
                    fired.push((Arc::as_ptr(&target) as usize, idx));
                }
            }
        }
        for (target, idx) in waiting {
            let at = (Arc::as_ptr(&target) as usize, idx);
            if !fired.contains(&at) && is_needed(&target) && fire(&target, idx, &mut collect)? {
                fired.push(at);
            }
        }
        for f in &keeper {
            // (a record that lives on may be kept alive by a later backward again)
            f.kept_alive.store(false, Ordering::Relaxed);
        }
        drop(keeper);
        Ok(())
    }
}

/// How a backward run treats the records it walks.
#[derive(Clone, Copy)]
struct RunMode {
    /// Every record stays for another backward.
    retain: bool,
    /// The key records this backward onto its own tape.
    record_self: bool,
    /// Records this backward reaches are freed, the others stay (the autograd key).
    partial: bool,
}

/// Empties the gradient slots of its records when dropped.
struct ClearSlots(Vec<Arc<GradFn>>);

impl Drop for ClearSlots {
    fn drop(&mut self) {
        for f in &self.0 {
            let grads: Vec<Option<Tensor>> =
                f.state().slots.iter_mut().map(|s| s.grad.take()).collect();
            drop(grads);
        }
    }
}

/// Functional mode: where `grad` hands the gradients of its inputs: the records' slots it wants, where their
/// gradients go, and whether tensor hooks (the callbacks on the key behind PyTorch's
/// `requires_grad`) run on the way, as `torch.autograd.grad` runs them.
type Collect<'a> = (
    &'a [(Arc<GradFn>, usize)],
    &'a mut Vec<Option<Tensor>>,
    bool,
);

/// The records of `tape` from which one of `targets` can be reached (the targets' own
/// included), by address. An op's record comes after those of its inputs on the tape.
/// The records a backward from the `seeded` slots reaches (the tape is in recording order:
/// a record's inputs come from earlier records).
fn reached_records(
    tape: &[Weak<GradFn>],
    seeded: &[(Arc<GradFn>, usize)],
) -> std::collections::HashSet<usize> {
    let mut set: std::collections::HashSet<usize> = seeded
        .iter()
        .map(|(f, _)| Arc::as_ptr(f) as usize)
        .collect();
    for f in tape.iter().rev().filter_map(Weak::upgrade) {
        if set.contains(&(Arc::as_ptr(&f) as usize)) {
            for d in f.state().dsts.iter().flatten() {
                set.insert(Arc::as_ptr(&d.target) as usize);
            }
        }
    }
    set
}

fn needed_records(
    tape: &[Weak<GradFn>],
    targets: &[(Arc<GradFn>, usize)],
) -> std::collections::HashSet<usize> {
    let mut set: std::collections::HashSet<usize> = targets
        .iter()
        .map(|(f, _)| Arc::as_ptr(f) as usize)
        .collect();
    for f in tape.iter().filter_map(Weak::upgrade) {
        let leads = f
            .state()
            .dsts
            .iter()
            .flatten()
            .any(|d| set.contains(&(Arc::as_ptr(&d.target) as usize)));
        if leads {
            set.insert(Arc::as_ptr(&f) as usize);
        }
    }
    set
}

/// Runs `rule` and adds the gradients it returns into the slots of its inputs' records
/// (those `wanted` only).
fn run_rule(
    rule: &dyn GradRule,
    grads: &[Option<Tensor>],
    dsts: &[Option<Dst>],
    wanted: &dyn Fn(&Arc<GradFn>) -> bool,
) -> Result<()> {
    let in_grads = rule.backward(grads)?;
    if in_grads.len() != dsts.len() {
        return Err(Error::autograd(format!(
            "grad rule of '{}' returned {} gradients for {} inputs",
            rule.name(),
            in_grads.len(),
            dsts.len()
        )));
    }
    for (d, g) in dsts.iter().zip(in_grads) {
        if let (Some(d), Some(g)) = (d, g) {
            if wanted(&d.target) {
                accumulate(&d.target, d.idx as usize, g)?;
            }
        }
    }
    Ok(())
}

/// Adds `g` into a slot. The sum goes through `apply`, so outer keys record it.
fn accumulate(f: &Arc<GradFn>, idx: usize, g: Tensor) -> Result<()> {
    let existing = {
        // (one lock for the check and the take: this runs for every gradient)
        let mut st = f.state();
        if st.consumed {
            return Err(Error::autograd(format!(
                "trying to backward through the graph a second time (the saved tensors of \
                 '{}' were freed by an earlier backward). Specify retain_graph=True the \
                 first time to backward through it twice",
                f.name
            )));
        }
        st.slots[idx].grad.take()
    };
    let total = match existing {
        None => g,
        Some(e) => e.add(&g)?,
    };
    f.state().slots[idx].grad = Some(total);
    Ok(())
}

/// A slot's gradient is final: run its callbacks and add the result into `.grad` (or, in
/// functional mode, hand it over instead).
/// Delivers slot `idx` of `f`, now final: to its callbacks and `.grad`, or to the gradients a
/// functional run collects. Returns whether the slot is watched (attached, or collected), the
/// slots a run must fire exactly once.
fn fire(f: &Arc<GradFn>, idx: usize, collect: &mut Option<Collect<'_>>) -> Result<bool> {
    if let Some((targets, found, hooks)) = collect {
        let mut grad = f.state().slots[idx].grad.clone();
        if *hooks {
            let hooked = {
                let st = f.state();
                st.slots[idx]
                    .attached
                    .as_ref()
                    .filter(|a| !a.callbacks.is_empty())
                    .map(|a| (a.callbacks.clone(), a.target.clone()))
            };
            if let (Some((callbacks, tensor)), Some(g)) = (hooked, grad.clone()) {
                // the hooks see the gradient and may replace it, for what flows on too;
                // nothing is added into `.grad`
                let last = deliver(&tensor, g, &callbacks, false)?;
                f.state().slots[idx].grad = Some(last.clone());
                grad = Some(last);
            }
        }
        let mut watched = f.state().slots[idx].attached.is_some();
        for (i, (tf, ti)) in targets.iter().enumerate() {
            if Arc::ptr_eq(tf, f) && *ti == idx {
                found[i] = grad.clone();
                watched = true;
            }
        }
        return Ok(watched);
    }
    let (grad, callbacks, target, accumulate, leaf, watched) = {
        let mut st = f.state();
        // an attached leaf's gradient has no further use in the tape once it is final: hand
        // it over, so a callback that consumes it (an optimizer step in backward) frees it
        let leaf = st.rule.is_none() && st.dsts.is_empty();
        let slot = &mut st.slots[idx];
        let grad = if leaf {
            slot.grad.take()
        } else {
            slot.grad.clone()
        };
        match &slot.attached {
            Some(a) => (
                grad,
                a.callbacks.clone(),
                Some(a.target.clone()),
                a.accumulate,
                leaf,
                true,
            ),
            None => (grad, Vec::new(), None, false, leaf, false),
        }
    };
    let (Some(g), Some(tensor)) = (grad, target) else {
        return Ok(watched);
    };
    let last = deliver(&tensor, g, &callbacks, accumulate)?;
    if f.is_attach_record() {
        run_post_accumulate_hooks(&tensor, &last)?;
    }
    if !leaf && !callbacks.is_empty() {
        // a computed tensor's callbacks (PyTorch's tensor hooks) change the gradient that
        // flows on through its producer
        f.state().slots[idx].grad = Some(last);
    }
    Ok(true)
}

/// The post-accumulate hooks of one `.grad` cell (see
/// [`GradKey::register_post_accumulate_hook`]), in registration order, with their ids.
struct PostHooks {
    /// (a weak handle keeps the cell's allocation, so its address, the map's key, stays
    /// unique while the entry exists)
    cell: Weak<Mutex<Option<Tensor>>>,
    hooks: Vec<(u64, GradCallback)>,
}

/// Post-accumulate hooks by the address of the `.grad` cell they belong to.
static POST_HOOKS: Mutex<Option<std::collections::HashMap<usize, PostHooks>>> = Mutex::new(None);
static NEXT_POST_HOOK: AtomicU64 = AtomicU64::new(1);
/// Whether a post-accumulate hook was ever registered (until then a backward skips the
/// lookup for every leaf).
static ANY_POST_HOOK: AtomicBool = AtomicBool::new(false);

/// Runs the post-accumulate hooks of `tensor` (an attached leaf whose final gradient `g` was
/// just delivered), in registration order; the first error stops the backward.
fn run_post_accumulate_hooks(tensor: &Tensor, g: &Tensor) -> Result<()> {
    if !ANY_POST_HOOK.load(Ordering::Relaxed) {
        return Ok(());
    }
    let Some(cell) = tensor.0.meta().grad.clone() else {
        return Ok(());
    };
    let hooks: Vec<GradCallback> = {
        let reg = lock(&POST_HOOKS);
        match reg
            .as_ref()
            .and_then(|m| m.get(&(Arc::as_ptr(&cell) as usize)))
        {
            Some(h) => h.hooks.iter().map(|(_, f)| f.clone()).collect(),
            None => return Ok(()),
        }
    };
    // (called without the lock: a hook may register or remove hooks)
    for hook in hooks {
        hook(tensor, g)?;
    }
    Ok(())
}

/// An attached tensor's gradient `g` is final: its callbacks run in order (each may replace
/// the gradient), then (when `accumulate`) the result is added into `.grad`. Returns the
/// gradient the callbacks left.
fn deliver(
    tensor: &Tensor,
    mut g: Tensor,
    callbacks: &[GradCallback],
    accumulate: bool,
) -> Result<Tensor> {
    let create_graph = CREATE_GRAPH.with(|c| c.get());
    let tracing = crate::graph::is_tracing();
    if !callbacks.is_empty()
        && !create_graph
        && !tracing
        && (!g.is_sole_handle() || !g.layout().is_contiguous() || g.storage().is_read_only())
    {
        // what the callbacks get (and a manager makes `.grad`) is this tensor's alone, as
        // PyTorch's AccumulateGrad: not the gradient another leaf also gets (`x + y`), a seed,
        // a hook's tensor or a broadcast view, so an in-place update of one `.grad` reaches no
        // other tensor
        g = g.copy()?;
    }
    for cb in callbacks {
        if let Some(next) = cb(tensor, &g)? {
            let mismatch = || {
                format!(
                    "a callback for a {} tensor of shape {:?} returned a {} gradient of shape {:?}",
                    tensor.dtype(),
                    tensor.shape(),
                    next.dtype(),
                    next.shape()
                )
            };
            if next.dtype() != tensor.dtype() {
                return Err(Error::dtype("callback", mismatch()));
            }
            if next.shape() != tensor.shape() {
                return Err(Error::shape("callback", mismatch()));
            }
            g = next;
        }
    }
    if accumulate {
        let total = match tensor.grad() {
            // PyTorch's: without a recorded backward, the sum goes into the existing `.grad`
            // in place, so a reference taken to it earlier (`p.grad = t`) sees it
            Some(old)
                if !create_graph
                    && !g.is_tracked()
                    && !old.is_tracked()
                    && old.dtype() == g.dtype()
                    && old.shape() == g.shape()
                    && old.device() == g.device()
                    && !old.storage().is_read_only()
                    && !tracing =>
            {
                old.binary_assign_(crate::op::BinaryOp::Add, &g)?;
                old
            }
            // (with create_graph a new tensor: the old one may be part of the recorded graph)
            Some(old) => old.add(&g)?,
            // (in a trace every value is shared with the tracer; the executor copies what
            // needs it)
            None if tracing => g.clone(),
            // PyTorch's AccumulateGrad: the gradient becomes `.grad` itself only when nothing
            // else holds it (not a seed passed to backward, not the gradient another leaf
            // also gets, not a hook's tensor, not a view) and the backward is not recorded;
            // otherwise `.grad` gets a copy, so later in-place updates of `.grad` reach no
            // other tensor and writes to those tensors do not reach `.grad`
            None if create_graph
                || !g.is_sole_handle()
                || !g.layout().is_contiguous()
                || g.storage().is_read_only() =>
            {
                g.copy()?
            }
            None => g.clone(),
        };
        tensor.set_grad(Some(total))?;
    }
    Ok(g)
}
