//! Recording: after an op's forward, every recording key that tracks one of its inputs gets a
//! `GradFn` for it, outermost key first.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::key::KeyInner;
use super::scope::{backward_mark, ceiling};
use super::{GradInfo, GradRule};
use crate::error::{Error, Result};
use crate::op::{BuiltinRule, Op};
use crate::tensor::Tensor;

/// How many keys are recording, so `apply` skips all bookkeeping when none is.
pub(crate) static RECORDING_KEYS: AtomicUsize = AtomicUsize::new(0);

/// Whether any key is recording anywhere.
pub fn is_recording_any() -> bool {
    RECORDING_KEYS.load(Ordering::Acquire) > 0
}

/// The recording keys (below the backward ceiling) that track any of `inputs`, outermost first.
fn recording_keys(inputs: &[&Tensor]) -> Vec<Arc<KeyInner>> {
    let top = ceiling();
    let mut keys: Vec<Arc<KeyInner>> = Vec::new();
    for t in inputs {
        for info in t.0.meta().infos.iter() {
            if info.key_level >= top || keys.iter().any(|k| k.id == info.key_id) {
                continue;
            }
            if let Some(k) = info.key.upgrade() {
                if k.is_recording() {
                    keys.push(k);
                }
            }
        }
    }
    keys.sort_by_key(|k| (k.level, k.id));
    keys
}

/// Records `op` for every key that tracks a float input.
pub(crate) fn record_builtin(op: &Op, inputs: &[&Tensor], outputs: &[Tensor]) -> Result<()> {
    if !is_recording_any() {
        return Ok(());
    }
    mark_hidden(inputs, outputs);
    if !op.is_differentiable() {
        return Ok(());
    }
    let custom = super::registry::lookup(op.name());
    record_with(op.name(), inputs, outputs, &mut |needs, level| {
        if let Some(r) = &custom {
            if let Some(rule) = r.make(op, inputs, outputs, needs, level)? {
                return Ok(rule);
            }
        }
        Ok(Box::new(BuiltinRule::new(
            op, inputs, outputs, needs, level,
        )))
    })
}

/// Records an op whose rule comes from outside the engine (a custom `Function`).
/// `make_rule(needs, level)` builds the rule for one key: `needs[i]` says whether input `i`
/// wants a gradient, and tensors the rule keeps should come from [`Tensor::saved_for`]`(level)`
/// semantics (use [`crate::Tensor::detach`] where higher order is not needed).
pub fn record_custom(
    name: &str,
    inputs: &[&Tensor],
    outputs: &[Tensor],
    make_rule: &mut dyn FnMut(&[bool], u64) -> Result<Box<dyn GradRule>>,
) -> Result<()> {
    if !is_recording_any() {
        return Ok(());
    }
    mark_hidden(inputs, outputs);
    if outputs.iter().any(|o| o.is_tracked()) {
        return Err(Error::autograd(format!(
            "{name}: an output of a custom function is already tracked by a GradKey; \
             forward must return new tensors"
        )));
    }
    record_with(name, inputs, outputs, make_rule)
}

/// Outputs of an op run inside a backward, or computed from such tensors, carry the mark of
/// that backward (see [`super::scope::backward_mark`]).
fn mark_hidden(inputs: &[&Tensor], outputs: &[Tensor]) {
    let mark = inputs
        .iter()
        .map(|t| t.hidden_from())
        .fold(backward_mark(), u64::min);
    if mark != u64::MAX {
        for o in outputs {
            o.set_hidden_from(mark);
        }
    }
}

fn record_with(
    name: &str,
    inputs: &[&Tensor],
    outputs: &[Tensor],
    make_rule: &mut dyn FnMut(&[bool], u64) -> Result<Box<dyn GradRule>>,
) -> Result<()> {
    let keys = recording_keys(inputs);
    for key in keys {
        let targets: Vec<Option<GradInfo>> = inputs
            .iter()
            .map(|t| {
                if t.dtype().is_float() {
                    t.grad_info(key.id)
                } else {
                    None
                }
            })
            .collect();
        if targets.iter().all(Option::is_none) {
            continue;
        }
        let needs: Vec<bool> = targets.iter().map(Option::is_some).collect();
        let rule = make_rule(&needs, key.level)?;
        let f = key.link(name, targets, outputs.len(), rule);
        for (i, o) in outputs.iter().enumerate() {
            if o.dtype().is_float() {
                key.track(o);
                o.push_info(GradInfo {
                    key: Arc::downgrade(&key),
                    key_id: key.id,
                    key_level: key.level,
                    func: f.clone(),
                    idx: i,
                });
            }
        }
    }
    Ok(())
}

/// A tensor kept for backward, with the storage version it had when saved.
pub(crate) struct Saved {
    pub(crate) tensor: Tensor,
    version: u64,
}

impl Saved {
    pub(crate) fn new(t: &Tensor, level: u64) -> Saved {
        Saved {
            tensor: t.saved_for(level),
            version: t.storage().version(),
        }
    }

    /// The tensor, or an error if it was modified in place since it was saved.
    pub(crate) fn get(&self, op: &str) -> Result<&Tensor> {
        let current = self.tensor.storage().version();
        if current != self.version {
            return Err(Error::Version {
                op: op.to_string(),
                shape: self.tensor.shape().to_vec(),
                saved: self.version,
                current,
            });
        }
        Ok(&self.tensor)
    }
}
