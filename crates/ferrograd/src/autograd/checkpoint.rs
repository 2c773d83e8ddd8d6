//! Recomputation: a checkpointed segment keeps only its inputs and is rerun in backward.
//!
//! Forward runs the segment with every key blocked, noting the slots of tracked tensors it
//! reads (its arguments and anything it closes over, such as layer weights). Each key that
//! tracks one of them records a single `checkpoint` op whose destinations are those slots, so
//! producer lists, and so callbacks, see it like any other op. In that key's backward the
//! rule reruns the segment under a fresh key that takes over, on first use, every tensor the
//! original key tracks, and differentiates the rerun. Outer keys record both the rerun and
//! its backward, so checkpointed segments work under higher-order differentiation.

use std::sync::{Arc, Weak};

use super::scope::{self, CeilingGuard};
use super::{is_recording_any, GradInfo, GradKey, GradRule};
use crate::error::{Error, Result};
use crate::storage::Storage;
use crate::tensor::Tensor;

/// A segment: tensors in, tensors out. It must not modify its inputs.
pub type Segment = Arc<dyn Fn(&[Tensor]) -> Result<Vec<Tensor>> + Send + Sync>;

/// Runs `segment(args)` so that only `args` (and what the segment reads from outside) are
/// kept for backward; the segment is rerun there.
pub fn checkpoint(segment: Segment, args: &[Tensor]) -> Result<Vec<Tensor>> {
    // inside a trace the segment's ops are graph nodes like any others, differentiated by
    // the graph gradient pass (recomputation there is the mirror pass's): the tape's op, with
    // outputs detached from the trace, would leave everything before it without a gradient
    if !is_recording_any() || crate::graph::is_tracing() {
        return segment(args);
    }
    let versions: Vec<u64> = args.iter().map(|a| a.storage().version()).collect();
    scope::push_capture();
    let outs = {
        let _blocked = CeilingGuard::new(0);
        segment(args)
    };
    let capture = scope::pop_capture();
    let captured = capture.slots;
    let outs = outs?;
    check_unchanged(args, &versions, "ran")?;
    // fresh handles: the outputs' tape state is this op's alone
    let outs: Vec<Tensor> = outs.iter().map(Tensor::detach).collect();
    let mut keys: Vec<Arc<super::KeyInner>> = Vec::new();
    for info in &captured {
        if let Some(k) = info.key().upgrade() {
            if !keys.iter().any(|x| x.id == k.id) {
                keys.push(k);
            }
        }
    }
    keys.sort_by_key(|k| (k.level, k.id));
    for key in keys {
        let slots: Vec<GradInfo> = captured
            .iter()
            .filter(|i| i.key_id == key.id)
            .cloned()
            .collect();
        let rule = CheckpointRule {
            segment: segment.clone(),
            args: args.to_vec(),
            versions: versions.clone(),
            key_id: key.id,
            slots: slots.clone(),
            reads: capture.reads.clone(),
            out_shapes: outs.iter().map(|o| o.shape().to_vec()).collect(),
        };
        key.link(
            std::borrow::Cow::Borrowed("checkpoint"),
            slots.into_iter().map(|i| Some((i.func, i.idx))),
            &outs,
            Box::new(rule),
        );
    }
    Ok(outs)
}

fn check_unchanged(args: &[Tensor], versions: &[u64], when: &str) -> Result<()> {
    for (i, (a, &v)) in args.iter().zip(versions).enumerate() {
        let now = a.storage().version();
        if now != v {
            return Err(Error::Version {
                op: format!("checkpoint (input {i}, when the segment {when})"),
                shape: a.shape().to_vec(),
                saved: v,
                current: now,
            });
        }
    }
    Ok(())
}

struct CheckpointRule {
    segment: Segment,
    args: Vec<Tensor>,
    versions: Vec<u64>,
    key_id: u64,
    /// The recorded op's destinations: slots (of the key `key_id`) the segment read.
    slots: Vec<GradInfo>,
    /// Every buffer the segment read (arguments, weights it closes over, constants) with its
    /// version then: the rerun must see the same values.
    reads: Vec<(Weak<Storage>, u64, Vec<usize>)>,
    out_shapes: Vec<Vec<usize>>,
}

impl GradRule for CheckpointRule {
    fn name(&self) -> &str {
        "checkpoint"
    }

    fn backward(&self, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        check_unchanged(&self.args, &self.versions, "was recomputed")?;
        for (storage, version, shape) in &self.reads {
            let Some(storage) = storage.upgrade() else {
                continue;
            };
            let now = storage.version();
            if now != *version {
                return Err(Error::Version {
                    op: "checkpoint (a tensor the segment read, before it was recomputed)"
                        .to_string(),
                    shape: shape.clone(),
                    saved: *version,
                    current: now,
                });
            }
        }
        let rerun = GradKey::new("checkpoint-recompute");
        scope::push_proxy(self.key_id, rerun.clone());
        let outs = (self.segment)(&self.args);
        let proxy = scope::pop_proxy();
        let outs = match outs {
            Ok(o) => o,
            Err(e) => {
                rerun.finish();
                return Err(e);
            }
        };
        let seen = proxy.map(|p| p.seen).unwrap_or_default();
        let shapes: Vec<Vec<usize>> = outs.iter().map(|o| o.shape().to_vec()).collect();
        if shapes != self.out_shapes {
            rerun.finish();
            return Err(Error::shape(
                "checkpoint",
                format!(
                    "the segment returned shapes {shapes:?} when rerun, {:?} the first time",
                    self.out_shapes
                ),
            ));
        }
        let dys: Vec<Tensor> = outs
            .iter()
            .zip(grads)
            .map(|(o, g)| match g {
                Some(g) => Ok(g.clone()),
                None => o.zeros_like(),
            })
            .collect::<Result<_>>()?;
        let xs: Vec<Tensor> = seen.iter().map(|(_, t)| t.clone()).collect();
        let gs = rerun.grad(&outs, &dys, &xs, true)?;
        Ok(self
            .slots
            .iter()
            .map(|slot| {
                seen.iter()
                    .position(|(info, _)| {
                        Arc::ptr_eq(&info.func, &slot.func) && info.idx == slot.idx
                    })
                    .map(|j| gs[j].clone())
            })
            .collect())
    }

    fn saved_tensors(&self) -> Vec<Tensor> {
        self.args.clone()
    }
}
