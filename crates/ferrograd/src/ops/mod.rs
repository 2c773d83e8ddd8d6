//! The op families: for each op its forward (shape and dtype checks, then the backend's
//! kernel), what its rule saves, and the rule, side by side; and the user-facing methods on
//! [`Tensor`]. Each family implements [`Family`] with exhaustive matches over its ops.
//!
//! # Adding an op
//!
//! A unary elementwise op with a gradient (the common case) is one row in each of four files:
//!
//! 1. `ops/unary.rs`: a row of [`unary_ops!`](crate::unary_ops) with the op, its name, its
//!    float kernel (and int64 kernel, or `()`), and its gradient in terms of `dy` and the
//!    saved values it names (`x`, `out`). This gives the op its enum variant, name, CPU
//!    kernel, save mask, rule, `Tensor` method and Python method and function.
//! 2. `cuda/kernels.cu`: a `UNARY_FLOAT(name, expression of v)` line (and `UNARY_INT` where
//!    the row has an int64 kernel).
//! 3. `python/ferrograd/_core.pyi`: regenerate the stubs (`python -m ferrograd._stubs
//!    --write`).
//! 4. `tests/test_gradcheck.py`: a row in the gradient-check table (float64 finite
//!    differences), or the op's name in the non-differentiable list.
//!
//! Binary ops are rows of [`binary_ops!`](crate::binary_ops) with `BINARY_FLOAT` /
//! `BINARY_INT` kernels, the same way. Any other op is a variant in its family's enum in
//! `op.rs` (with its name): the compiler then asks for its forward, save mask and rule in the
//! family's file, and for a kernel in the [`crate::backend::Backend`] trait where it needs a
//! new one (a backend that lacks it reports a `DeviceError`).

mod binary;
pub(crate) mod conv;
pub(crate) mod elementwise;
mod inplace;
mod linalg;
pub(crate) mod movement;
pub(crate) mod reduce;
mod unary;

pub use conv::{avg_pool2d, conv2d, conv2d_same, max_pool2d, AvgDivisor};
pub use elementwise::where_cond;
pub use movement::{concat, stack};
pub use reduce::cross_entropy;

use crate::autograd::{RuleCtx, SaveMask};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Input gradients, one per input (`None`: the input needs none).
pub(crate) type Grads = Vec<Option<Tensor>>;

/// What each family of ops provides; `Op` routes to its family in one exhaustive match
/// ([`crate::op::for_each_family!`]).
pub(crate) trait Family {
    /// Checks the inputs and runs the op's kernel on their device.
    fn forward(&self, inputs: &[&Tensor]) -> Result<Tensor>;
    /// Which inputs and outputs the rule keeps, given which inputs need a gradient.
    fn saves(&self, needs: &[bool]) -> SaveMask;
    /// [`Family::saves`] when the rule's choice also depends on the inputs' layouts.
    fn saves_for(&self, needs: &[bool], _inputs: &[&Tensor]) -> SaveMask {
        self.saves(needs)
    }
    /// The rule: input gradients from the output's gradient `dy`, written with ops (so a
    /// backward pass can itself be recorded). Must give a gradient for every input that
    /// needs one; ops without a gradient return [`not_differentiable`].
    fn backward(&self, ctx: &RuleCtx, dy: &Tensor) -> Result<Grads>;
}

/// The error for a gradient that must pass through an op that has none.
pub(crate) fn not_differentiable(op: &str) -> Error {
    Error::autograd(format!(
        "{op}: not differentiable, but a gradient must flow through it to a tensor that needs \
         one (detach the input of {op}, or compute the result from differentiable ops)"
    ))
}

/// Sums `g` down to `shape` over the axes numpy broadcasting expanded.
pub fn sum_to_shape(g: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if g.shape() == shape {
        return Ok(g.clone());
    }
    let lead = g.ndim().checked_sub(shape.len()).ok_or_else(|| {
        Error::shape(
            "sum_to_shape",
            format!("cannot reduce shape {:?} to {shape:?}", g.shape()),
        )
    })?;
    let mut axes: Vec<isize> = (0..lead as isize).collect();
    for (i, &n) in shape.iter().enumerate() {
        if n == 1 && g.shape()[lead + i] != 1 {
            axes.push((lead + i) as isize);
        }
    }
    let s = if axes.is_empty() {
        g.clone()
    } else {
        g.sum(Some(&axes), true)?
    };
    s.reshape(shape)
}

/// PyTorch's type promotion of two operands: bool < int64 < float (a higher category wins);
/// within floats the wider dtype, except that a 0-d operand does not widen a tensor with axes
/// (`float32 [n] * float64 []` is float32). `float_result` (ops without an integer kernel,
/// such as true division) makes an integer or bool result the default float dtype.
pub(crate) fn promote(a: &Tensor, b: &Tensor, float_result: bool) -> Result<(Tensor, Tensor)> {
    let d = result_type(a, b);
    let d = if float_result && !d.is_float() {
        crate::dtype::default_float()
    } else {
        d
    };
    Ok((a.astype(d)?, b.astype(d)?))
}

/// The dtype [`promote`] gives two operands.
pub(crate) fn result_type(a: &Tensor, b: &Tensor) -> crate::DType {
    use crate::DType;
    let (da, db) = (a.dtype(), b.dtype());
    if da == db {
        return da;
    }
    let category = |d: DType| match d {
        DType::Bool => 0,
        DType::I64 | DType::I32 | DType::I16 | DType::I8 | DType::U8 => 1,
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => 2,
    };
    let width = |d: DType| d.size_in_bytes();
    match category(da).cmp(&category(db)) {
        std::cmp::Ordering::Greater => da,
        std::cmp::Ordering::Less => db,
        std::cmp::Ordering::Equal => match (a.ndim() == 0, b.ndim() == 0) {
            (true, false) => db,
            (false, true) => da,
            // neither holds the other's values: int16 holds both (PyTorch's promote_types)
            _ if matches!((da, db), (DType::I8, DType::U8) | (DType::U8, DType::I8)) => DType::I16,
            _ if matches!(
                (da, db),
                (DType::F16, DType::BF16) | (DType::BF16, DType::F16)
            ) =>
            {
                DType::F32
            }
            _ if width(da) >= width(db) => da,
            _ => db,
        },
    }
}

pub(crate) fn same_dtype(op: &str, ts: &[&Tensor]) -> Result<()> {
    let d = ts[0].dtype();
    if ts.iter().any(|t| t.dtype() != d) {
        let desc: Vec<String> = ts
            .iter()
            .map(|t| format!("{} {:?}", t.dtype(), t.shape()))
            .collect();
        return Err(Error::dtype(
            op,
            format!("dtype mismatch: {}", desc.join(" vs ")),
        ));
    }
    Ok(())
}
