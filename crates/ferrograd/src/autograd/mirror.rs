//! Automatic backward mirroring (MXNet's rule, applied eagerly).
//!
//! On a key with a mirroring policy, every output of a cheap op (elementwise math and views,
//! by the default policy) carries a *recipe*: the op and its inputs, themselves recipes where
//! cheap, else tensors. When a rule would save such an output, it keeps the recipe instead,
//! provided the bytes released (the output) are at least the bytes the recipe newly keeps
//! alive (its leaf tensors that nothing on the key keeps already). In backward the value is
//! recomputed once and shared until the rules that need it have run. Outputs of heavy ops
//! (matmul, reductions, softmax) are saved as usual, so chains start from them.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use super::key::KeyInner;
use crate::dispatch::apply1;
use crate::error::Result;
use crate::op::{ElementwiseOp, MovementOp, Op};
use crate::tensor::Tensor;

/// Decides per op whether its outputs may be recomputed instead of stored. An error (a
/// policy written in Python that raised) fails the op.
pub type MirrorPolicy = Arc<dyn Fn(&Op) -> Result<bool> + Send + Sync>;

/// The default policy: elementwise ops and views are cheap; everything else is kept.
pub fn auto_policy() -> MirrorPolicy {
    Arc::new(|op: &Op| {
        Ok(match op {
            Op::Unary(_) | Op::Binary(_) => true,
            Op::Elementwise(e) => match e {
                ElementwiseOp::PowScalar(_)
                | ElementwiseOp::Where
                | ElementwiseOp::Cast(_)
                | ElementwiseOp::Copy => true,
                ElementwiseOp::TanhGrad
                | ElementwiseOp::SigmoidGrad
                | ElementwiseOp::ReluGrad
                | ElementwiseOp::Random { .. } => false,
            },
            Op::Movement(m) => match m {
                MovementOp::Reshape(_)
                | MovementOp::Permute(_)
                | MovementOp::BroadcastTo(_)
                | MovementOp::Slice(_)
                | MovementOp::Diagonal { .. }
                | MovementOp::UnfoldView { .. } => true,
                MovementOp::ToDevice { .. }
                | MovementOp::AsStrided { .. }
                | MovementOp::SliceGrad { .. }
                | MovementOp::SetSlice(_)
                | MovementOp::Concat(_)
                | MovementOp::Gather(_)
                | MovementOp::ScatterAdd { .. }
                | MovementOp::Argsort { .. } => false,
            },
            Op::Compare(_) | Op::Reduce(_) | Op::Linalg(_) | Op::Window(_) => false,
        })
    })
}

pub(crate) enum Source {
    /// A kept tensor; `intermediate` when it is the output of an op recorded on the key
    /// (an activation that would otherwise be freed), as opposed to an attached parameter
    /// or a constant, which live anyway.
    Tensor {
        saved: super::Saved,
        intermediate: bool,
    },
    Recipe(Arc<Recipe>),
}

/// How to recompute one tensor.
pub(crate) struct Recipe {
    pub(crate) key_id: u64,
    op: Op,
    inputs: Vec<Source>,
    bytes: usize,
    /// The activations (storage id, bytes) that this recipe keeps alive through its chain,
    /// gathered when it is made, so no walk of the chain is needed later.
    leaves: Vec<(usize, usize)>,
    cache: Mutex<Option<Tensor>>,
}

impl Recipe {
    /// The recipe of `op` applied to `inputs` for `key`, or None when the policy keeps it.
    pub(crate) fn for_op(
        key: &Arc<KeyInner>,
        op: &Op,
        inputs: &[&Tensor],
        out: &Tensor,
    ) -> Result<Option<Arc<Recipe>>> {
        let Some(policy) = key.mirror.as_ref() else {
            return Ok(None);
        };
        if !out.dtype().is_float() || !policy(op)? {
            return Ok(None);
        }
        let inputs: Vec<Source> = inputs
            .iter()
            .map(|t| match t.recipe(key.id) {
                Some(r) => Source::Recipe(r),
                None => Source::Tensor {
                    saved: super::Saved::plain(t, key.level),
                    intermediate: t.grad_info(key.id).is_some_and(|i| i.func.name != "attach"),
                },
            })
            .collect();
        let mut leaves: Vec<(usize, usize)> = Vec::new();
        for src in &inputs {
            let add: Vec<(usize, usize)> = match src {
                Source::Recipe(r) => r.leaves.clone(),
                Source::Tensor {
                    saved,
                    intermediate: true,
                } => {
                    // recipe leaves are plain data (a saved recipe has no storage)
                    saved
                        .storage()
                        .map(|s| vec![(Arc::as_ptr(s) as usize, s.bytes())])
                        .unwrap_or_default()
                }
                Source::Tensor { .. } => Vec::new(),
            };
            for leaf in add {
                if !leaves.iter().any(|l| l.0 == leaf.0) {
                    leaves.push(leaf);
                }
            }
        }
        Ok(Some(Arc::new(Recipe {
            key_id: key.id,
            op: op.clone(),
            inputs,
            bytes: out.numel() * out.dtype().size_in_bytes(),
            leaves,
            cache: Mutex::new(None),
        })))
    }

    /// Bytes this recipe newly keeps alive: its leaf activations that no rule of the key
    /// saves already (parameters and constants live anyway and do not count).
    pub(crate) fn new_leaf_bytes(&self, kept: &HashSet<usize>) -> usize {
        self.leaves
            .iter()
            .filter(|(id, _)| !kept.contains(id))
            .map(|(_, b)| b)
            .sum()
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    fn cached(&self) -> Option<Tensor> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Recomputes the value (once; later calls share it while the recipe lives). Works
    /// through the chain with an explicit stack, deepest recipe first: chains can be long.
    pub(crate) fn materialize(self: &Arc<Self>, op: &str) -> Result<Tensor> {
        let mut stack: Vec<Arc<Recipe>> = vec![self.clone()];
        while let Some(top) = stack.last().cloned() {
            if top.cached().is_some() {
                stack.pop();
                continue;
            }
            let pending = top.inputs.iter().find_map(|s| match s {
                Source::Recipe(r) if r.cached().is_none() => Some(r.clone()),
                _ => None,
            });
            if let Some(child) = pending {
                stack.push(child);
                continue;
            }
            let ins: Vec<Tensor> = top
                .inputs
                .iter()
                .map(|s| match s {
                    Source::Tensor { saved, .. } => saved.get(op, &[]),
                    Source::Recipe(r) => r
                        .cached()
                        .ok_or_else(|| crate::Error::autograd("recomputation lost a value")),
                })
                .collect::<Result<_>>()?;
            let refs: Vec<&Tensor> = ins.iter().collect();
            let out = apply1(&top.op, &refs)?;
            *top.cache.lock().unwrap_or_else(|e| e.into_inner()) = Some(out);
            stack.pop();
        }
        self.cached()
            .ok_or_else(|| crate::Error::autograd("recomputation lost a value"))
    }
}

thread_local! {
    static RECIPE_DROPS: std::cell::RefCell<Option<Vec<Arc<Recipe>>>> = const { std::cell::RefCell::new(None) };
}

impl Drop for Recipe {
    // chains of recipes are released one at a time, not recursively
    fn drop(&mut self) {
        let parents: Vec<Arc<Recipe>> = std::mem::take(&mut self.inputs)
            .into_iter()
            .filter_map(|s| match s {
                Source::Recipe(r) => Some(r),
                Source::Tensor { .. } => None,
            })
            .collect();
        super::chain_drop::release(&RECIPE_DROPS, parents, || {});
    }
}

impl Tensor {
    pub(crate) fn recipe(&self, key_id: u64) -> Option<Arc<Recipe>> {
        self.0
            .meta()
            .recipe
            .as_ref()
            .filter(|r| r.key_id == key_id)
            .cloned()
    }

    pub(crate) fn set_recipe(&self, r: Arc<Recipe>) {
        self.0.meta().recipe = Some(r);
    }
}
