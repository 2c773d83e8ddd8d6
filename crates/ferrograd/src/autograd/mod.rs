//! Reverse-mode autodiff with MegEngine's semantics.
//!
//! A [`GradKey`] records a `GradFn` for every op applied (through [`crate::apply`]) to a tensor
//! it tracks. Outputs own their `GradFn`; the key's tape holds it weakly, so a branch whose
//! outputs die is freed during forward and skipped in backward. Each `GradFn` registers one
//! producer per differentiable input in that input's slot (see [`producer`]); in backward, when
//! a slot's last producer has run, its gradient is final and its callbacks run at once.
//!
//! Grad rules are built from ops through `apply`, so the ops of one key's backward are
//! recorded by every *outer* key (one created earlier) that is still active: that is how
//! nested keys give higher-order gradients.

mod builtin;
mod chain_drop;
mod checkpoint;
mod key;
mod mirror;
mod producer;
pub(crate) mod rebase;
pub(crate) mod record;
mod registry;
mod scope;

pub(crate) use builtin::{graph_saves, run_rule, RuleCtx, SaveMask};
pub use checkpoint::{checkpoint, Segment};
pub use key::{GradCallback, GradKey, GradNode};
pub(crate) use key::{GradFn, KeyInner};
pub(crate) use mirror::Recipe;
pub use mirror::{auto_policy, MirrorPolicy};
pub use record::{is_recording_any, record_custom};
pub(crate) use record::{record_builtin, Saved};
pub(crate) use registry::lookup as rule_override;
pub use registry::{register_rule, unregister_rule, RuleOverride};
pub(crate) use scope::set_trace_ceiling;
pub use scope::{
    ceiling, ceiling_depth, grad_enabled, no_grad, pop_ceiling, push_ceiling, push_enable,
    set_capture_paused, truncate_ceiling, CeilingGuard,
};

use std::sync::{Arc, Weak};

use smallvec::SmallVec;

use crate::error::Result;
use crate::layout::Layout;
use crate::tensor::Tensor;

/// A grad rule: given the gradients of an op's outputs (`None` where nothing arrived), return
/// one entry per input (`None` for "no gradient").
pub trait GradRule: Send + Sync {
    /// The op's name, for errors and reports.
    fn name(&self) -> &str;
    /// Computes input gradients. Runs with this key no longer recording; outer keys record.
    fn backward(&self, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>>;
    /// What the rule keeps for backward (for memory reports).
    fn saved_tensors(&self) -> Vec<Tensor> {
        Vec::new()
    }
}

/// One key's view of a tensor: which slot of which `GradFn` receives its gradient.
#[derive(Clone)]
pub(crate) struct GradInfo {
    pub(crate) key_id: u64,
    pub(crate) key_level: u64,
    pub(crate) func: Arc<GradFn>,
    pub(crate) idx: usize,
}

impl GradInfo {
    /// The key (the slot's `GradFn` refers to it).
    pub(crate) fn key(&self) -> &Weak<KeyInner> {
        &self.func.key
    }
}

impl Tensor {
    /// This tensor's slot for the key with id `key_id`, if the key tracks it.
    pub(crate) fn grad_info(&self, key_id: u64) -> Option<GradInfo> {
        if !self.0.maybe_tracked() {
            return None;
        }
        self.0
            .meta()
            .infos
            .iter()
            .find(|i| i.key_id == key_id)
            .cloned()
    }

    /// The recording keys that track this tensor, outermost first.
    pub fn tracking_keys(&self) -> Vec<GradKey> {
        let mut keys: Vec<GradKey> = self
            .0
            .meta()
            .infos
            .iter()
            .filter_map(|i| i.key().upgrade())
            .filter(|k| k.is_recording())
            .map(GradKey)
            .collect();
        keys.sort_by_key(|k| (k.0.level, k.0.id));
        keys
    }

    /// Whether any live key tracks this tensor.
    pub fn is_tracked(&self) -> bool {
        self.0.maybe_tracked()
            && self
                .0
                .meta()
                .infos
                .iter()
                .any(|i| i.key().strong_count() > 0)
    }

    /// Whether an op on this tensor would be recorded now: a key that tracks it is recording
    /// and not kept from it on this thread (by `no_grad`, or a backward in progress).
    pub fn is_recorded(&self) -> bool {
        if !self.0.maybe_tracked() || !is_recording_any() {
            return false;
        }
        let scope = scope::snapshot();
        let allowed = if scope.special {
            scope::proxy_key_id()
        } else {
            None
        };
        self.0.meta().infos.iter().any(|i| {
            (!scope.blocks(i.key_level) || allowed == Some(i.key_id))
                && i.key().upgrade().is_some_and(|k| k.is_recording())
        })
    }

    /// False when a recorded in-place write went into this tensor's memory through another
    /// handle (a view of it, or the tensor it views) after this handle was made: ops on it
    /// are refused while a tape records them.
    pub fn is_current(&self) -> bool {
        self.0.is_current()
    }

    /// This tensor, current again after `view` (a view of its own memory, updated in place)
    /// is written back over the part it views: `x[idx] *= c` in Python updates the view
    /// `x[idx]`, then assigns it to `x[idx]`, which records the write for `x`.
    pub fn written_back(&self, view: &Tensor, part: &Layout) -> Tensor {
        if self.is_current()
            || !Arc::ptr_eq(view.storage(), self.storage())
            || view.layout() != part
        {
            return self.clone();
        }
        self.continued_as(self)
    }

    /// Whether the key `key_id` would record an op on this tensor now.
    pub(crate) fn is_recorded_by(&self, key_id: u64) -> bool {
        if !self.0.maybe_tracked() {
            return false;
        }
        let scope = scope::snapshot();
        self.0.meta().infos.iter().any(|i| {
            i.key_id == key_id
                && !scope.blocks(i.key_level)
                && i.key().upgrade().is_some_and(|k| k.is_recording())
        })
    }

    pub(crate) fn push_info(&self, info: GradInfo) {
        let mut meta = self.0.meta();
        meta.infos.push(info);
        self.0.set_tracked(true);
    }

    /// Drops this tensor's slot for one key (returned, so it is freed outside the lock).
    pub(crate) fn take_info(&self, key_id: u64) -> Vec<GradInfo> {
        let mut meta = self.0.meta();
        let mut taken = Vec::new();
        let mut i = 0;
        while i < meta.infos.len() {
            if meta.infos[i].key_id == key_id {
                taken.push(meta.infos.swap_remove(i));
            } else {
                i += 1;
            }
        }
        if meta.infos.is_empty() {
            self.0.set_tracked(false);
        }
        taken
    }

    /// A new handle over this tensor's storage and layout that carries `result`'s tape state
    /// and shares this tensor's `.grad`: what a tensor becomes after an in-place op. Keys that
    /// could not record the op (kept from it by `no_grad` or a backward in progress) keep this
    /// tensor's own slot: for them the write did not happen, as in PyTorch.
    /// A handle over the same data and `.grad` that `key` does not track (other keys still
    /// do): the tensor after PyTorch's `requires_grad_(False)` on a leaf.
    pub fn untracked_by(&self, key: &GradKey) -> Tensor {
        let next = self.snapshot();
        if self.0.maybe_tracked() {
            for info in self.0.meta().infos.iter().filter(|i| i.key_id != key.0.id) {
                if let Some(k) = info.key().upgrade() {
                    k.track(&next);
                }
                next.push_info(info.clone());
            }
            next.set_hidden_from(self.hidden_from());
        }
        next
    }

    pub(crate) fn continued_as(&self, result: &Tensor) -> Tensor {
        let next = self.snapshot();
        let mut infos: Vec<GradInfo> = result.0.meta().infos.to_vec();
        if self.0.maybe_tracked() {
            let scope = scope::snapshot();
            for info in self.0.meta().infos.iter() {
                let recorded = !scope.blocks(info.key_level)
                    && info.key().upgrade().is_some_and(|k| k.is_recording());
                if !recorded && !infos.iter().any(|i| i.key_id == info.key_id) {
                    infos.push(info.clone());
                }
            }
        }
        for info in infos {
            if let Some(key) = info.key().upgrade() {
                key.track(&next);
            }
            next.push_info(info);
        }
        next.set_hidden_from(result.hidden_from());
        next.0.meta().trace = result.0.meta().trace;
        next
    }

    /// The same values and tape state over a storage of its own: the operand an in-place op
    /// computes from, so rules that save it are not invalidated by the op's own write.
    pub fn fork(&self) -> Result<Tensor> {
        if crate::graph::trace::is_tracing() {
            // The trace must see a copy node of its own, which gradients flow through to
            // this tensor's node: were the fork tagged with this tensor's node, the rule that
            // saves it would read that node after the in-place write changed it.
            let data = self.copy()?;
            let node = data.0.meta().trace;
            let next = data.continued_as(self);
            next.0.meta().trace = node;
            return Ok(next);
        }
        let data = {
            let _g = no_grad();
            self.detach().copy()?
        };
        Ok(data.continued_as(self))
    }

    /// A handle over the same data for a rule of the key `level` to keep, when keys outside
    /// `level` track this tensor: it carries their slots only (so they can differentiate the
    /// rule), never the slot of `level` itself (that would make a cycle through the output's
    /// `GradFn`). `None` when no outer key tracks it: the rule keeps the bare data.
    pub(crate) fn saved_for(&self, level: u64) -> Option<Tensor> {
        if !self.0.maybe_tracked() {
            return None;
        }
        let infos: SmallVec<[GradInfo; 1]> = self
            .0
            .meta()
            .infos
            .iter()
            .filter(|i| i.key_level < level && i.key().strong_count() > 0)
            .cloned()
            .collect();
        if infos.is_empty() {
            return None;
        }
        let copy = self.detach();
        for info in infos {
            if let Some(key) = info.key().upgrade() {
                key.track(&copy);
            }
            copy.push_info(info);
        }
        Some(copy)
    }

    /// A handle over the same data that carries this tensor's slots plus `own` (a slot of a
    /// key this handle's data was cut from): what a key that records its own backward hands
    /// its rules for a saved output, so the recorded backward is differentiable through it.
    pub(crate) fn with_own_slot(&self, own: GradInfo) -> Tensor {
        let infos: SmallVec<[GradInfo; 1]> = if self.0.maybe_tracked() {
            self.0.meta().infos.iter().cloned().collect()
        } else {
            SmallVec::new()
        };
        let copy = self.detach();
        for info in infos.into_iter().chain(std::iter::once(own)) {
            if copy.grad_info(info.key_id).is_some() {
                continue;
            }
            if let Some(key) = info.key().upgrade() {
                key.track(&copy);
            }
            copy.push_info(info);
        }
        copy
    }
}
