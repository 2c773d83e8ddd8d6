//! The rules of builtin ops: what a recorded op keeps (its save mask, laid out for the common
//! case) and the context its family's rule reads in backward.

use std::cell::RefCell;

use smallvec::SmallVec;

use super::key::KeyInner;
use super::record::Saved;
use super::{GradInfo, GradRule};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{for_each_family, Op};
use crate::ops::Family;
use crate::tensor::Tensor;

thread_local! {
    /// While a key records its own backward (PyTorch's `create_graph`): the slot of the record
    /// whose rule runs, which the saved output the rule reads must carry (the saved output
    /// never carries it between forward and backward: that would be a cycle).
    static OWN_SLOT: RefCell<Option<GradInfo>> = const { RefCell::new(None) };
}

/// Sets the record whose rule runs next in a self-recording backward (until dropped).
pub(crate) struct OwnSlotGuard(Option<GradInfo>);

impl OwnSlotGuard {
    pub(crate) fn enter(info: GradInfo) -> OwnSlotGuard {
        OwnSlotGuard(OWN_SLOT.with(|o| o.borrow_mut().replace(info)))
    }
}

impl Drop for OwnSlotGuard {
    fn drop(&mut self) {
        let prev = self.0.take();
        let mine = OWN_SLOT.with(|o| std::mem::replace(&mut *o.borrow_mut(), prev));
        drop(mine);
    }
}

/// Which inputs and outputs a rule keeps, given which inputs need a gradient.
#[derive(Default)]
pub(crate) struct SaveMask {
    /// A bit per input (no rule keeps an input past the first few).
    inputs: u64,
    pub(crate) outputs: bool,
}

impl SaveMask {
    /// Keeps input `i` or not.
    pub(crate) fn input(&mut self, i: usize, keep: bool) {
        debug_assert!(i < 64, "input {i}: rules keep only the first inputs");
        if keep {
            self.inputs |= 1 << i;
        } else {
            self.inputs &= !(1 << i);
        }
    }

    pub(crate) fn keeps(&self, i: usize) -> bool {
        i < 64 && (self.inputs >> i) & 1 == 1
    }
}

/// Shapes a rule keeps: each input's where it differs from the output's (backward knows the
/// output's from the gradient it receives). Most ops' inputs have the output's shape, so usually
/// none are kept.
#[derive(Default)]
struct Shapes {
    /// The stored shapes' dims, one after another.
    dims: Vec<usize>,
    /// Per input: the `(start, end)` of its dims, or `SAME` for the output's shape.
    inputs: Vec<(u32, u32)>,
}

const SAME: (u32, u32) = (u32::MAX, u32::MAX);

impl Shapes {
    fn push_input(&mut self, shape: &[usize], output: &[usize]) {
        let at = if shape == output {
            SAME
        } else {
            let start = self.dims.len() as u32;
            self.dims.extend_from_slice(shape);
            (start, self.dims.len() as u32)
        };
        self.inputs.push(at);
    }

    /// Input `i`'s shape, given the output's.
    fn input<'a>(&'a self, i: usize, output: &'a [usize]) -> &'a [usize] {
        match self.inputs[i] {
            SAME => output,
            (start, end) => &self.dims[start as usize..end as usize],
        }
    }
}

/// What a rule keeps beyond the common case (at most two inputs, shaped like the output).
struct More {
    /// Inputs from the third on: what was saved, and whether each needs a gradient.
    saved: Vec<Option<Saved>>,
    needs: Vec<bool>,
    shapes: Shapes,
}

/// Where a rule's saved values come from: a tape record (what its save mask kept), or a
/// traced graph (the values the trace kept: at least what the op's save mask keeps, with every
/// input needing a gradient).
enum Source<'a> {
    Tape(&'a BuiltinRule),
    Graph {
        inputs: &'a [Option<Tensor>],
        shapes: &'a [&'a [usize]],
        output: Option<&'a Tensor>,
        /// Why a value cannot be read (written in place since the op ran): one per input,
        /// then the output.
        stale: &'a [Option<Error>],
    },
}

/// What a builtin rule sees in backward: the saved tensors, the inputs' shapes and dtype.
pub(crate) struct RuleCtx<'a> {
    pub(crate) op: &'a Op,
    source: Source<'a>,
    /// The output's shape (the incoming gradient's).
    out_shape: &'a [usize],
    /// The first input's dtype.
    pub(crate) in_dtype: DType,
    pub(crate) needs: &'a [bool],
}

impl<'a> RuleCtx<'a> {
    /// The context of a rule applied to a traced op's values (by the graph gradient pass).
    /// `inputs` and `output` are the values the trace kept (`None`: released, as the op's
    /// save mask does not keep it), `shapes` the inputs' shapes.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn for_graph(
        op: &'a Op,
        inputs: &'a [Option<Tensor>],
        shapes: &'a [&'a [usize]],
        output: Option<&'a Tensor>,
        out_shape: &'a [usize],
        in_dtype: DType,
        needs: &'a [bool],
        stale: &'a [Option<Error>],
    ) -> RuleCtx<'a> {
        RuleCtx {
            op,
            source: Source::Graph {
                inputs,
                shapes,
                output,
                stale,
            },
            out_shape,
            in_dtype,
            needs,
        }
    }
}

impl RuleCtx<'_> {
    /// How many inputs the op has.
    pub(crate) fn n_inputs(&self) -> usize {
        self.needs.len()
    }

    /// Input `i`'s shape.
    pub(crate) fn shape(&self, i: usize) -> &[usize] {
        match &self.source {
            Source::Tape(rule) => match &rule.more {
                Some(m) if !m.shapes.inputs.is_empty() => m.shapes.input(i, self.out_shape),
                _ => self.out_shape,
            },
            Source::Graph { shapes, .. } => shapes[i],
        }
    }

    /// `f()` when input `i` needs a gradient, else `None`.
    pub(crate) fn need(
        &self,
        i: usize,
        f: impl FnOnce() -> Result<Tensor>,
    ) -> Result<Option<Tensor>> {
        if self.needs.get(i).copied().unwrap_or(false) {
            f().map(Some)
        } else {
            Ok(None)
        }
    }

    /// Zeros shaped like input `i`, with `like`'s dtype and device: the gradient of an input
    /// the output depends on only through a step function.
    pub(crate) fn zeros(&self, i: usize, like: &Tensor) -> Result<Tensor> {
        Tensor::full_on(self.shape(i), 0.0, like.dtype(), like.device())
    }

    /// Saved input `i` (the op's save mask must keep it).
    pub(crate) fn input(&self, i: usize) -> Result<Tensor> {
        let rule = match &self.source {
            Source::Tape(rule) => rule,
            Source::Graph { inputs, stale, .. } => {
                return match (stale.get(i).and_then(Option::as_ref), &inputs[i]) {
                    (Some(e), _) => Err(e.clone_trace()),
                    (None, Some(t)) => Ok(t.clone()),
                    (None, None) => Err(released(self.op, &format!("input {i}"))),
                }
            }
        };
        let saved = match (i, &rule.more) {
            (0 | 1, _) => rule.first[i].as_ref(),
            (_, Some(m)) => m.saved.get(i - 2).and_then(Option::as_ref),
            _ => None,
        };
        match saved {
            Some(s) => s.get(self.op.name(), self.shape(i)),
            None => Err(Error::autograd(format!(
                "{}: input {i} was not saved for backward",
                self.op.name()
            ))),
        }
    }
    /// The saved output.
    pub(crate) fn output(&self) -> Result<Tensor> {
        let rule = match &self.source {
            Source::Tape(rule) => rule,
            Source::Graph { output, stale, .. } => {
                return match (stale.last().and_then(Option::as_ref), output) {
                    (Some(e), _) => Err(e.clone_trace()),
                    (None, Some(t)) => Ok((*t).clone()),
                    (None, None) => Err(released(self.op, "its output")),
                }
            }
        };
        match &rule.output {
            Some(s) => {
                let t = s.get(self.op.name(), self.out_shape)?;
                Ok(match OWN_SLOT.with(|o| o.borrow().clone()) {
                    Some(own) => t.with_own_slot(own),
                    None => t,
                })
            }
            None => Err(Error::autograd(format!(
                "{}: output was not saved for backward",
                self.op.name()
            ))),
        }
    }
}

/// The error for a traced value a rule reads that the trace released (its save mask said the
/// rule would not read it): a defect of that op's save mask, never of the user's code.
fn released(op: &Op, what: &str) -> Error {
    Error::Trace {
        op: op.name().to_string(),
        msg: format!(
            "the gradient rule reads {what}, which its save mask does not keep, so the trace \
             released it"
        ),
    }
}

/// Runs the rule of `ctx.op` on the output's gradient `dy`: one gradient per input (`n`),
/// `None` where an input needs none. A builtin rule answers every input that needs a
/// gradient: a silent `None` there would be a wrong (missing) gradient.
pub(crate) fn run_rule(ctx: &RuleCtx, dy: &Tensor, n: usize) -> Result<Vec<Option<Tensor>>> {
    let mut out = for_each_family!(ctx.op, f => f.backward(ctx, dy))?;
    out.resize(n, None);
    for (i, (g, &need)) in out.iter_mut().zip(ctx.needs).enumerate() {
        if !need {
            *g = None;
        } else if g.is_none() {
            return Err(Error::autograd(format!(
                "{}: the grad rule gave no gradient for input {i}, which needs one",
                ctx.op.name()
            )));
        }
    }
    Ok(out)
}

/// The rule of a builtin op: the op, what its save mask kept, and the shapes backward needs.
/// Laid out for the common case (at most two inputs, shaped like the output): recording a
/// tiny op is dominated by building this record.
pub(crate) struct BuiltinRule {
    op: Op,
    /// What was saved of the first two inputs.
    first: [Option<Saved>; 2],
    output: Option<Saved>,
    /// The output's shape, kept only where only its data is saved (for reports).
    out_shape: Option<Box<[usize]>>,
    /// Whether the first two inputs need gradients.
    needs: [bool; 2],
    n_inputs: u32,
    in_dtype: DType,
    more: Option<Box<More>>,
}

impl BuiltinRule {
    pub(crate) fn new(
        op: &Op,
        inputs: &[&Tensor],
        outputs: &[Tensor],
        needs: &[bool],
        key: &KeyInner,
    ) -> BuiltinRule {
        let mask = for_each_family!(op, f => f.saves_for(needs, inputs));
        let out = &outputs[0];
        let save = |i: usize| mask.keeps(i).then(|| Saved::input(inputs[i], key));
        let n = inputs.len();
        let first = [save(0), if n > 1 { save(1) } else { None }];
        let same = inputs.iter().all(|t| t.shape() == out.shape());
        let more = (n > 2 || !same).then(|| {
            let mut shapes = Shapes::default();
            if !same {
                for t in inputs {
                    shapes.push_input(t.shape(), out.shape());
                }
            }
            Box::new(More {
                saved: (2..n).map(save).collect(),
                needs: needs.get(2..).unwrap_or(&[]).to_vec(),
                shapes,
            })
        });
        let mut out_shape = None;
        let output = mask.outputs.then(|| {
            let (s, data_only) = Saved::output(out, key);
            if data_only {
                out_shape = Some(out.shape().into());
            }
            s
        });
        BuiltinRule {
            op: op.clone(),
            first,
            output,
            out_shape,
            needs: [needs[0], n > 1 && needs[1]],
            n_inputs: n as u32,
            in_dtype: inputs[0].dtype(),
            more,
        }
    }

    /// Whether each input needs a gradient.
    fn needs(&self) -> SmallVec<[bool; 4]> {
        let mut v: SmallVec<[bool; 4]> = self.needs[..(self.n_inputs as usize).min(2)]
            .iter()
            .copied()
            .collect();
        if let Some(m) = &self.more {
            v.extend(m.needs.iter().copied());
        }
        v
    }
}

impl GradRule for BuiltinRule {
    fn name(&self) -> &str {
        self.op.name()
    }

    fn backward(&self, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let n = self.n_inputs as usize;
        let Some(dy) = grads.first().and_then(|g| g.as_ref()) else {
            return Ok(vec![None; n]);
        };
        let needs = self.needs();
        let ctx = RuleCtx {
            op: &self.op,
            source: Source::Tape(self),
            out_shape: dy.shape(),
            in_dtype: self.in_dtype,
            needs: &needs,
        };
        run_rule(&ctx, dy, n)
    }

    fn saved_tensors(&self) -> Vec<Tensor> {
        // inputs are kept as handles; a bare output's shape is kept
        let more = self.more.iter().flat_map(|m| m.saved.iter());
        self.first
            .iter()
            .chain(more)
            .flatten()
            .filter_map(|s| s.handle(&[]))
            .chain(
                self.output
                    .as_ref()
                    .and_then(|s| s.handle(self.out_shape.as_deref().unwrap_or(&[]))),
            )
            .collect()
    }
}

/// What the graph gradient pass may read of a traced op's values (`inputs`): the op's save
/// mask with every input needing a gradient (the pass decides later which do; a mask keeps
/// at least as much for more needs), everything under a registered rule override (it may read
/// any), nothing for an op without a gradient.
pub(crate) fn graph_saves(op: &Op, inputs: &[&Tensor]) -> SaveMask {
    if !op.is_differentiable() {
        return SaveMask::default();
    }
    if super::rule_override(op.name()).is_some() {
        let mut all = SaveMask::default();
        for i in 0..inputs.len().min(64) {
            all.input(i, true);
        }
        all.outputs = true;
        return all;
    }
    let needs = vec![true; inputs.len()];
    for_each_family!(op, f => f.saves_for(&needs, inputs))
}
