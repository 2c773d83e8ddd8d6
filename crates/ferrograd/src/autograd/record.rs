//! Recording: after an op's forward, every recording key that tracks one of its inputs gets a
//! `GradFn` for it, outermost key first.

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use smallvec::SmallVec;

use super::builtin::BuiltinRule;
use super::key::{KeyInner, Target};
use super::scope::{snapshot, Snapshot};
use super::GradRule;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::op::Op;
use crate::storage::Storage;
use crate::tensor::Tensor;

/// Builds a custom rule for one key from which inputs need gradients and the key's level.
pub type MakeCustomRule<'a> = dyn FnMut(&[bool], u64) -> Result<Box<dyn GradRule>> + 'a;
type MakeRule<'a> = dyn FnMut(&[bool], &Arc<KeyInner>) -> Result<Box<dyn GradRule>> + 'a;

/// How many keys are recording, so `apply` skips all bookkeeping when none is.
pub(crate) static RECORDING_KEYS: AtomicUsize = AtomicUsize::new(0);
/// How many of them are ambient keys ([`crate::GradKey::new_ambient`]).
pub(crate) static AMBIENT_RECORDING: AtomicUsize = AtomicUsize::new(0);

/// Whether a key that is not ambient is recording anywhere.
pub(crate) fn is_recording_any_scoped() -> bool {
    RECORDING_KEYS.load(Ordering::Acquire) > AMBIENT_RECORDING.load(Ordering::Acquire)
}

/// Whether any key is recording anywhere.
pub fn is_recording_any() -> bool {
    RECORDING_KEYS.load(Ordering::Acquire) > 0
}

/// Records `op` for every key that tracks a float input, when it has a float output. An op
/// without a gradient is recorded too: its rule raises a `GradError` naming it if backward
/// needs a gradient through it (never a silently missing gradient).
pub(crate) fn record_builtin(op: &Op, inputs: &[&Tensor], outputs: &[Tensor]) -> Result<()> {
    if !is_recording_any() {
        return Ok(());
    }
    let scope = snapshot();
    mark_hidden(inputs, outputs, scope.mark);
    before_record(inputs, outputs, scope)?;
    if !outputs.iter().any(|o| o.dtype().is_float()) {
        // no gradient can flow back through integer or bool results
        return Ok(());
    }
    let custom = super::registry::lookup(op.name());
    record_with(
        scope,
        Cow::Borrowed(op.name()),
        inputs,
        outputs,
        &mut |needs, key| {
            if let Some(r) = &custom {
                if let Some(rule) = r.make(op, inputs, outputs, needs, key.level)? {
                    return Ok(rule);
                }
            }
            if key.mirror.is_some() && outputs.len() == 1 {
                if let Some(recipe) = super::Recipe::for_op(key, op, inputs, &outputs[0])? {
                    outputs[0].set_recipe(recipe);
                }
            }
            Ok(Box::new(BuiltinRule::new(op, inputs, outputs, needs, key)))
        },
    )
}

/// Records an op whose rule comes from outside the engine (a custom `Function`).
/// `make_rule(needs, level)` builds the rule for one key: `needs[i]` says whether input `i`
/// wants a gradient, and tensors the rule keeps should come from [`Tensor::saved_for`]`(level)`
/// semantics (use [`crate::Tensor::detach`] where higher order is not needed).
pub fn record_custom(
    name: &str,
    inputs: &[&Tensor],
    outputs: &[Tensor],
    make_rule: &mut MakeCustomRule<'_>,
) -> Result<()> {
    if !is_recording_any() {
        return Ok(());
    }
    let scope = snapshot();
    mark_hidden(inputs, outputs, scope.mark);
    before_record(inputs, outputs, scope)?;
    if outputs.iter().any(|o| o.is_tracked()) {
        return Err(Error::autograd(format!(
            "{name}: an output of a custom function is already tracked by a GradKey; \
             forward must return new tensors"
        )));
    }
    let name = match Op::names().iter().find(|n| **n == name) {
        Some(n) => Cow::Borrowed(*n),
        None => Cow::Owned(name.to_string()),
    };
    record_with(scope, name, inputs, outputs, &mut |needs, key| {
        make_rule(needs, key.level)
    })
}

/// Checkpoint bookkeeping: note what a checkpointed segment reads, attach proxied inputs.
fn before_record(inputs: &[&Tensor], outputs: &[Tensor], scope: Snapshot) -> Result<()> {
    if !scope.special {
        return Ok(());
    }
    if super::scope::capturing() {
        super::scope::capture(inputs, outputs);
    }
    super::scope::proxy_inputs(inputs)
}

/// Outputs of an op run inside a backward, or computed from such tensors, carry the mark of
/// that backward (see [`super::scope::Snapshot::mark`]).
fn mark_hidden(inputs: &[&Tensor], outputs: &[Tensor], mark: u64) {
    let mark = inputs.iter().map(|t| t.hidden_from()).fold(mark, u64::min);
    if mark != u64::MAX {
        for o in outputs {
            o.set_hidden_from(mark);
        }
    }
}

/// The error for a tracked input whose buffer a recorded in-place write changed through
/// another handle after this one was made: differentiating it would miss that write.
fn stale_input(op: &str, t: &Tensor) -> Error {
    Error::autograd(format!(
        "{op}: an input of shape {:?} was changed in place through a view of the same memory \
             (or through the tensor it views) after it was computed, so its gradient would \
             miss that write; write through the tensor itself (x[idx] = ..., x[idx] *= ...) \
             or clone() the view before changing it in place",
        t.shape()
    ))
}

fn record_with(
    scope: Snapshot,
    name: Cow<'static, str>,
    inputs: &[&Tensor],
    outputs: &[Tensor],
    make_rule: &mut MakeRule<'_>,
) -> Result<()> {
    // one pass over the inputs (one lock each): the recording keys below the backward
    // ceiling that track any input, and each float input's slot for them
    let allowed = if scope.special {
        super::scope::proxy_key_id()
    } else {
        None
    };
    let mut keys: SmallVec<[Arc<KeyInner>; 2]> = SmallVec::new();
    // (input, key id, the input's slot for that key)
    let mut slots: SmallVec<[(usize, u64, Option<Target>); 3]> = SmallVec::new();
    for (i, t) in inputs.iter().enumerate() {
        if !t.0.maybe_tracked() {
            continue;
        }
        let float = t.dtype().is_float();
        for info in t.0.meta().infos.iter() {
            if scope.blocks(info.key_level) && allowed != Some(info.key_id) {
                continue;
            }
            if !keys.iter().any(|k| k.id == info.key_id) {
                match info.key().upgrade() {
                    Some(k) if k.is_recording() => keys.push(k),
                    _ => continue,
                }
            }
            if float {
                slots.push((i, info.key_id, Some((info.func.clone(), info.idx))));
            }
        }
        if !t.0.is_current() && slots.iter().any(|s| s.0 == i) {
            return Err(stale_input(&name, t));
        }
    }
    if keys.len() > 1 {
        keys.sort_by_key(|k| (k.level, k.id));
    }
    for key in keys {
        let mut targets: SmallVec<[Option<Target>; 3]> = SmallVec::new();
        let mut needs: SmallVec<[bool; 3]> = SmallVec::new();
        for _ in 0..inputs.len() {
            targets.push(None);
            needs.push(false);
        }
        let mut any = false;
        for (i, id, target) in &mut slots {
            if *id == key.id {
                // each slot belongs to one key: it is moved, not cloned
                targets[*i] = target.take();
                needs[*i] = true;
                any = true;
            }
        }
        if !any {
            continue;
        }
        let rule = make_rule(&needs, &key)?;
        key.link(name.clone(), targets, outputs, rule);
    }
    Ok(())
}

/// What a rule keeps of one tensor: a handle with the storage version it had when saved, the
/// bare data of an output, or (on a mirroring key) a recipe to recompute it.
pub(crate) enum Saved {
    Tensor {
        tensor: Tensor,
        version: u64,
    },
    /// An op's output that no outer key tracks: its whole storage, contiguous, in a shape the
    /// rule keeps (no handle is made until backward asks for one).
    Data {
        storage: Arc<Storage>,
        version: u64,
    },
    Recipe(Arc<super::Recipe>),
}

impl Saved {
    /// A detached handle (see [`Tensor::saved_for`]).
    pub(crate) fn plain(t: &Tensor, level: u64) -> Saved {
        Saved::Tensor {
            tensor: t.saved_for(level).unwrap_or_else(|| t.detach()),
            version: t.storage().version(),
        }
    }

    /// What a rule of `key` keeps of its input `t`: its recipe when mirroring pays, else the
    /// input's own handle (it cannot lead back to the rule's `GradFn`; the key itself no
    /// longer records when the rule runs, and keys inside it are below the ceiling).
    pub(crate) fn input(t: &Tensor, key: &KeyInner) -> Saved {
        if let Some(r) = Saved::mirrored(t, key) {
            return r;
        }
        Saved::Tensor {
            tensor: t.clone(),
            version: t.storage().version(),
        }
    }

    /// What a rule of `key` keeps of its output `t` (it must not carry this key's slot, which
    /// leads back to the rule): a recipe when mirroring pays, a handle carrying the slots of
    /// outer keys when they track it, else only the data (`true`: the rule must keep the
    /// shape to restore).
    pub(crate) fn output(t: &Tensor, key: &KeyInner) -> (Saved, bool) {
        if let Some(r) = Saved::mirrored(t, key) {
            return (r, false);
        }
        let version = t.storage().version();
        let whole = t.layout().is_contiguous()
            && t.layout().offset() == 0
            && t.numel() * t.dtype().size_in_bytes() == t.storage().bytes();
        match t.saved_for(key.level) {
            None if whole => (
                Saved::Data {
                    storage: t.storage().clone(),
                    version,
                },
                true,
            ),
            tensor => (
                Saved::Tensor {
                    tensor: tensor.unwrap_or_else(|| t.detach()),
                    version,
                },
                false,
            ),
        }
    }

    /// On a mirroring key: the recipe of `t` when recomputing it costs less memory than
    /// keeping it (else the storage is noted as kept).
    fn mirrored(t: &Tensor, key: &KeyInner) -> Option<Saved> {
        key.mirror.as_ref()?;
        let mut ks = key.state();
        if let Some(r) = t.recipe(key.id) {
            if r.bytes() >= r.new_leaf_bytes(&ks.kept) {
                return Some(Saved::Recipe(r));
            }
        }
        ks.kept.insert(Arc::as_ptr(t.storage()) as usize);
        None
    }

    /// The storage the saved data lives in (none for a recipe).
    pub(crate) fn storage(&self) -> Option<&Arc<Storage>> {
        match self {
            Saved::Tensor { tensor, .. } => Some(tensor.storage()),
            Saved::Data { storage, .. } => Some(storage),
            Saved::Recipe(_) => None,
        }
    }

    /// The tensor (recomputed if mirrored), or an error if it was modified in place since it
    /// was saved. `shape` restores bare data.
    pub(crate) fn get(&self, op: &str, shape: &[usize]) -> Result<Tensor> {
        let (storage, version) = match self {
            Saved::Tensor { tensor, version } => (tensor.storage(), *version),
            Saved::Data { storage, version } => (storage, *version),
            Saved::Recipe(r) => return r.materialize(op),
        };
        let current = storage.version();
        if current != version {
            return Err(Error::Version {
                op: op.to_string(),
                shape: match self {
                    Saved::Tensor { tensor, .. } => tensor.shape().to_vec(),
                    _ => shape.to_vec(),
                },
                saved: version,
                current,
            });
        }
        Ok(self.handle(shape).expect("not a recipe"))
    }

    /// A handle on the saved data (none for a recipe): what backward uses and reports show.
    /// `shape` restores bare data.
    pub(crate) fn handle(&self, shape: &[usize]) -> Option<Tensor> {
        match self {
            Saved::Tensor { tensor, .. } => Some(tensor.clone()),
            Saved::Data { storage, .. } => Some(Tensor::from_parts(
                storage.clone(),
                Layout::contiguous(shape),
            )),
            Saved::Recipe(_) => None,
        }
    }
}
