//! Ops as values, and the one dispatch point every op goes through: [`apply`].
//!
//! Each family of ops lives in `ops/<family>.rs` with its forward, what its rule saves and
//! its rule; this file only names the ops and routes them.

use crate::autograd::{record_builtin, GradRule, KeyInner, Saved};
use crate::cpu::Window;
use crate::dtype::DType;
use crate::error::{Error, Result};
use smallvec::SmallVec;

use crate::layout::SliceSpec;
use crate::ops::{conv, elementwise, linalg, movement, reduce};
use crate::tensor::Tensor;

/// Elementwise functions of one tensor.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Exp,
    Log,
    Sqrt,
    Abs,
    Tanh,
    Sigmoid,
    Relu,
    Sign,
}

/// Elementwise functions of two tensors, with numpy broadcasting.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Maximum,
    Minimum,
}

/// Comparisons: bool results, no gradient.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Reductions over a set of axes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    Sum,
    Mean,
    Max,
    Min,
}

/// An op: a name plus its parameters. Inputs are passed to [`apply`] separately.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Unary(UnaryOp),
    Binary(BinaryOp),
    Compare(CmpOp),
    /// `x ** p` with a constant exponent.
    PowScalar(f64),
    /// The backward of an activation from its output: inputs `(dy, y)`; `dy * (1 - y^2)`
    /// for tanh, `dy * y * (1 - y)` for sigmoid, `dy * (y > 0)` for relu. One pass instead of
    /// a chain of ops in the rules of those activations.
    ActGrad(UnaryOp),
    /// `where(cond, a, b)`.
    Where,
    Cast(DType),
    /// A copy on another device (`Tensor::to`); its gradient goes back the other way.
    ToDevice {
        from: crate::device::Device,
        to: crate::device::Device,
    },
    /// A contiguous copy.
    Copy,
    Reduce {
        kind: ReduceKind,
        axes: Vec<usize>,
        keepdims: bool,
    },
    /// Matrix product of `[..., m, k]` and `[..., k, n]` with broadcast batch axes.
    MatMul,
    Reshape(Vec<usize>),
    Permute(Vec<usize>),
    BroadcastTo(Vec<usize>),
    /// Basic indexing (a view).
    Slice(Vec<SliceSpec>),
    /// Zeros of `shape` with the input written where `specs` selects: slicing's gradient.
    SliceGrad {
        shape: Box<[usize]>,
        specs: Box<[SliceSpec]>,
    },
    /// A copy of the first input with the region `specs` selects replaced by the second
    /// (broadcast): the functional form of `x[specs] = v`.
    SetSlice(Vec<SliceSpec>),
    Concat(usize),
    /// `take_along_axis(x, idx, axis)`.
    Gather(usize),
    /// Zeros of `shape`, then `src` added at `idx` along `axis`: gather's gradient.
    ScatterAdd {
        axis: usize,
        shape: Vec<usize>,
    },
    Softmax(usize),
    LogSoftmax(usize),
    /// im2col: `[n, c, h, w]` to `[n, oh*ow, c, kh*kw]`, padding reads `pad`.
    Unfold {
        window: Box<Window>,
        pad: f64,
    },
    /// For each pooling window of `[n, c, h, w]`, the flat `h * w` position of its maximum
    /// (first one on ties, NaN wins), as int64 `[n, c, oh * ow]`. No gradient; the second
    /// derivative of max pooling gathers with these indices.
    PoolArgmax(Box<Window>),
    /// The transpose of `Unfold` (overlapping windows are summed) back to `size`.
    Fold {
        window: Box<Window>,
        size: (usize, usize),
    },
    /// 2-D convolution (cross-correlation) of `[n, c, h, w]` with `[o, c / groups, kh, kw]`,
    /// plus an optional bias `[o]` as a third input. CPU only (CUDA composes `Unfold` and
    /// `MatMul`).
    Conv2d {
        window: Box<Window>,
        groups: usize,
    },
    /// The convolution's input gradient from `(dy, weight)`, back to spatial `size`; its own
    /// gradients are a convolution and a weight gradient.
    Conv2dInputGrad {
        window: Box<Window>,
        groups: usize,
        size: (usize, usize),
    },
    /// The convolution's weight gradient from `(x, dy)`.
    Conv2dWeightGrad {
        window: Box<Window>,
        groups: usize,
    },
    /// 2-D max pooling (padding never wins). CPU only.
    MaxPool2d(Box<Window>),
    /// Max pooling's input gradient from `(x, dy)`: `dy` added at each window's maximum.
    MaxPool2dGrad(Box<Window>),
}

impl UnaryOp {
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Abs => "abs",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Relu => "relu",
            UnaryOp::Sign => "sign",
        }
    }
}

impl BinaryOp {
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
        }
    }
}

impl CmpOp {
    pub fn name(self) -> &'static str {
        match self {
            CmpOp::Eq => "equal",
            CmpOp::Ne => "not_equal",
            CmpOp::Lt => "less",
            CmpOp::Le => "less_equal",
            CmpOp::Gt => "greater",
            CmpOp::Ge => "greater_equal",
        }
    }
}

impl ReduceKind {
    pub fn name(self) -> &'static str {
        match self {
            ReduceKind::Sum => "sum",
            ReduceKind::Mean => "mean",
            ReduceKind::Max => "max",
            ReduceKind::Min => "min",
        }
    }
}

impl Op {
    /// Every op name, as [`Op::name`] gives it (for rule registration).
    pub const NAMES: &'static [&'static str] = &[
        "neg",
        "exp",
        "log",
        "sqrt",
        "abs",
        "tanh",
        "sigmoid",
        "relu",
        "sign",
        "tanh_grad",
        "sigmoid_grad",
        "relu_grad",
        "add",
        "sub",
        "mul",
        "div",
        "pow",
        "maximum",
        "minimum",
        "equal",
        "not_equal",
        "less",
        "less_equal",
        "greater",
        "greater_equal",
        "where",
        "astype",
        "copy",
        "sum",
        "mean",
        "max",
        "min",
        "matmul",
        "reshape",
        "permute",
        "broadcast_to",
        "getitem",
        "getitem_grad",
        "setitem",
        "concat",
        "gather",
        "scatter_add",
        "softmax",
        "log_softmax",
        "unfold",
        "pool_argmax",
        "fold",
        "conv2d",
        "conv2d_input_grad",
        "conv2d_weight_grad",
        "max_pool2d",
        "max_pool2d_grad",
        "to",
    ];

    /// The name used in errors and reports.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Unary(u) => u.name(),
            Op::Binary(b) => b.name(),
            Op::Compare(c) => c.name(),
            Op::PowScalar(_) => "pow",
            Op::ActGrad(UnaryOp::Tanh) => "tanh_grad",
            Op::ActGrad(UnaryOp::Sigmoid) => "sigmoid_grad",
            Op::ActGrad(_) => "relu_grad",
            Op::Where => "where",
            Op::Cast(_) => "astype",
            Op::Copy => "copy",
            Op::Reduce { kind, .. } => kind.name(),
            Op::MatMul => "matmul",
            Op::Reshape(_) => "reshape",
            Op::Permute(_) => "permute",
            Op::BroadcastTo(_) => "broadcast_to",
            Op::Slice(_) => "getitem",
            Op::SliceGrad { .. } => "getitem_grad",
            Op::SetSlice(_) => "setitem",
            Op::Concat(_) => "concat",
            Op::Gather(_) => "gather",
            Op::ScatterAdd { .. } => "scatter_add",
            Op::Softmax(_) => "softmax",
            Op::LogSoftmax(_) => "log_softmax",
            Op::Unfold { .. } => "unfold",
            Op::PoolArgmax(_) => "pool_argmax",
            Op::Fold { .. } => "fold",
            Op::Conv2d { .. } => "conv2d",
            Op::Conv2dInputGrad { .. } => "conv2d_input_grad",
            Op::Conv2dWeightGrad { .. } => "conv2d_weight_grad",
            Op::MaxPool2d(_) => "max_pool2d",
            Op::MaxPool2dGrad(_) => "max_pool2d_grad",
            Op::ToDevice { .. } => "to",
        }
    }

    /// Ops over 2-D windows of NCHW tensors (convolution, pooling, im2col): `ops/conv.rs`.
    pub(crate) fn is_window(&self) -> bool {
        matches!(
            self,
            Op::Unfold { .. }
                | Op::Fold { .. }
                | Op::PoolArgmax(_)
                | Op::Conv2d { .. }
                | Op::Conv2dInputGrad { .. }
                | Op::Conv2dWeightGrad { .. }
                | Op::MaxPool2d(_)
                | Op::MaxPool2dGrad(_)
        )
    }

    /// Whether any gradient can flow through this op.
    pub fn is_differentiable(&self) -> bool {
        !matches!(
            self,
            Op::Compare(_) | Op::Unary(UnaryOp::Sign) | Op::PoolArgmax(_)
        ) && !matches!(self, Op::Cast(d) if !d.is_float())
    }
}

/// Runs `op` on `inputs`, and records it on every recording key that tracks an input.
/// This is the only way ops run, in forward and in backward alike.
pub fn apply(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
    Ok(vec![apply1(op, inputs)?])
}

/// [`apply`] for single-output ops (every builtin op has one output).
pub fn apply1(op: &Op, inputs: &[&Tensor]) -> Result<Tensor> {
    // 0-d CPU tensors (Python scalars) may join tensors on any device
    let scalar = |t: &&Tensor| t.ndim() == 0 && t.device() == crate::Device::Cpu;
    if let Some(first) = inputs.iter().find(|t| !scalar(t)) {
        let dev = first.device();
        if let Some(other) = inputs.iter().find(|t| !scalar(t) && t.device() != dev) {
            return Err(Error::device(
                op.name(),
                format!(
                    "all inputs must be on one device, got {dev} and {}",
                    other.device()
                ),
            ));
        }
    }
    let out = match op {
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::PowScalar(_)
        | Op::ActGrad(_)
        | Op::Where
        | Op::Cast(_)
        | Op::Copy => elementwise::forward(op, inputs)?,
        Op::Reduce { .. } | Op::Softmax(_) | Op::LogSoftmax(_) => reduce::forward(op, inputs)?,
        Op::MatMul => linalg::forward(op, inputs)?,
        op if op.is_window() => conv::forward(op, inputs)?,
        _ => movement::forward(op, inputs)?,
    };
    record_builtin(op, inputs, std::slice::from_ref(&out))?;
    Ok(out)
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

fn save_mask(op: &Op, needs: &[bool]) -> SaveMask {
    match op {
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::PowScalar(_)
        | Op::ActGrad(_)
        | Op::Where
        | Op::Cast(_)
        | Op::Copy => elementwise::saves(op, needs),
        Op::Reduce { .. } | Op::Softmax(_) | Op::LogSoftmax(_) => reduce::saves(op),
        Op::MatMul => linalg::saves(needs),
        op if op.is_window() => conv::saves(op, needs),
        _ => movement::saves(op),
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

/// What a builtin rule sees in backward: the saved tensors, the inputs' shapes and dtype.
pub(crate) struct RuleCtx<'a> {
    pub(crate) op: &'a Op,
    rule: &'a BuiltinRule,
    /// The output's shape (the incoming gradient's).
    out_shape: &'a [usize],
    /// The first input's dtype.
    pub(crate) in_dtype: DType,
    pub(crate) needs: &'a [bool],
}

impl RuleCtx<'_> {
    /// How many inputs the op has.
    pub(crate) fn n_inputs(&self) -> usize {
        self.needs.len()
    }

    /// Input `i`'s shape.
    pub(crate) fn shape(&self, i: usize) -> &[usize] {
        match &self.rule.more {
            Some(m) if !m.shapes.inputs.is_empty() => m.shapes.input(i, self.out_shape),
            _ => self.out_shape,
        }
    }

    /// Saved input `i` (the op's save mask must keep it).
    pub(crate) fn input(&self, i: usize) -> Result<Tensor> {
        let saved = match (i, &self.rule.more) {
            (0 | 1, _) => self.rule.first[i].as_ref(),
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
        match &self.rule.output {
            Some(s) => s.get(self.op.name(), self.out_shape),
            None => Err(Error::autograd(format!(
                "{}: output was not saved for backward",
                self.op.name()
            ))),
        }
    }
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
        let mask = save_mask(op, needs);
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
            rule: self,
            out_shape: dy.shape(),
            in_dtype: self.in_dtype,
            needs: &needs,
        };
        let mut out = match &self.op {
            Op::Unary(_)
            | Op::Binary(_)
            | Op::PowScalar(_)
            | Op::ActGrad(_)
            | Op::Where
            | Op::Cast(_)
            | Op::Copy
            | Op::Compare(_) => elementwise::backward(&ctx, dy)?,
            Op::Reduce { .. } | Op::Softmax(_) | Op::LogSoftmax(_) => reduce::backward(&ctx, dy)?,
            Op::MatMul => linalg::backward(&ctx, dy)?,
            op if op.is_window() => conv::backward(&ctx, dy)?,
            _ => movement::backward(&ctx, dy)?,
        };
        out.resize(n, None);
        for (g, &need) in out.iter_mut().zip(&needs) {
            if !need {
                *g = None;
            }
        }
        Ok(out)
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
