//! Binary elementwise ops and comparisons, with numpy broadcasting: one row each in
//! [`binary_ops!`](crate::binary_ops) and [`compare_ops!`](crate::compare_ops), the tables
//! every layer reads its part from (see `ops/unary.rs`).

use std::sync::Arc;

use super::{not_differentiable, same_dtype, sum_to_shape, Family, Grads};
use crate::autograd::{RuleCtx, SaveMask};
use crate::backend::on_device;
use crate::dispatch::apply1;
use crate::error::Result;
use crate::layout::broadcast_shapes;
use crate::op::{BinaryOp, CmpOp, Op};
use crate::tensor::Tensor;

/// The binary op table. A row is
///
/// `Op name (|p, q| float kernel) (|p, q| int64 kernel) (|dy, saved...| d/da) (|dy, saved...| d/db)`
///
/// * kernels compute one element from `p, q: T` (`T: Float`, see `cpu/float.rs`); the int64
///   kernel is `()` where the op is not defined on integers;
/// * each gradient is an expression in `dy` (the output's gradient) and the saved values it
///   names: `a` and `b` (the inputs) and `out` (the output); naming a value is what saves it,
///   and only for the gradients actually needed. The engine sums each gradient down to its
///   input's shape (broadcasting) afterwards.
///
/// The CUDA kernels are the `BINARY_FLOAT(name, ...)` / `BINARY_INT(name, ...)` lines of
/// `cuda/kernels.cu`.
#[macro_export]
#[doc(hidden)]
macro_rules! binary_ops {
    ($then:ident) => {
        $then! {
            // op     name     float kernel             int64 kernel                 d/da                                  d/db
            Add      add      (|p, q| p + q)           (|p, q| p.wrapping_add(q))   (|dy| dy.clone())                     (|dy| dy.clone()),
            Sub      sub      (|p, q| p - q)           (|p, q| p.wrapping_sub(q))   (|dy| dy.clone())                     (|dy| dy.neg()?),
            Mul      mul      (|p, q| p * q)           (|p, q| p.wrapping_mul(q))   (|dy, b| dy.mul(&b)?)                 (|dy, a| dy.mul(&a)?),
            Div      div      (|p, q| p / q)           ()                           (|dy, b| dy.div(&b)?)                 (|dy, a, b| dy.mul(&a.div(&b)?.div(&b)?)?.neg()?),
            Pow      pow      (|p, q| p.powf(q))       ()                           (|dy, a, b| pow_base_grad(dy, &a, &b)?)  (|dy, a, b, out| pow_exponent_grad(dy, &a, &b, &out)?),
            Maximum  maximum  (|p, q| p.maximum(q))    (|p, q| p.max(q))            (|dy, a, b| dy.mul(&share(BinaryOp::Maximum, &a, &b)?)?)  (|dy, a, b| dy.mul(&share(BinaryOp::Maximum, &b, &a)?)?),
            Minimum  minimum  (|p, q| p.minimum(q))    (|p, q| p.min(q))            (|dy, a, b| dy.mul(&share(BinaryOp::Minimum, &a, &b)?)?)  (|dy, a, b| dy.mul(&share(BinaryOp::Minimum, &b, &a)?)?),
            // d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2)
            Atan2    atan2    (|p, q| p.atan2(q))      ()                           (|dy, a, b| atan2_grad(&dy, &a, &b, true)?)  (|dy, a, b| atan2_grad(&dy, &a, &b, false)?),
            // a = q * b + out with q the rounded quotient: d/da = 1, d/db = -q (floats only:
            // integer division by zero must raise, which a kernel cannot)
            Fmod      fmod      (|p, q| p.fmod(q))       ()                           (|dy| dy.clone())                     (|dy, a, b| dy.mul(&quotient(&a, &b, false)?)?.neg()?),
            Remainder remainder (|p, q| p.floor_mod(q))  ()                           (|dy| dy.clone())                     (|dy, a, b| dy.mul(&quotient(&a, &b, true)?)?.neg()?),
        }
    };
}

/// The comparison table: `Op method name (|p, q| kernel)`, where `method` is the `Tensor`
/// method and `name` the op's (and Python function's) name. No gradient; bool results.
#[macro_export]
#[doc(hidden)]
macro_rules! compare_ops {
    ($then:ident) => {
        $then! {
            Eq  eq  equal          (|p, q| p == q),
            Ne  ne  not_equal      (|p, q| p != q),
            Lt  lt  less           (|p, q| p < q),
            Le  le  less_equal     (|p, q| p <= q),
            Gt  gt  greater        (|p, q| p > q),
            Ge  ge  greater_equal  (|p, q| p >= q),
        }
    };
}

/// `a^2 + b^2`.
fn squares(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    a.mul(a)?.add(&b.mul(b)?)
}

/// `atan2(a, b)`'s gradient, `dy * b / (a^2 + b^2)` in `a` (`wrt_a`) and `-dy * a / (a^2 + b^2)`
/// in `b`, with `a` and `b` first divided by the larger magnitude `m` (held constant, which
/// leaves the quotient unchanged), so the squares neither underflow to 0 (an infinite or NaN
/// gradient at tiny arguments) nor overflow. 0 at `a = b = 0`, as PyTorch.
fn atan2_grad(dy: &Tensor, a: &Tensor, b: &Tensor, wrt_a: bool) -> Result<Tensor> {
    let m = a.detach().abs()?.maximum(&b.detach().abs()?)?;
    let origin = m.eq(&m.scalar_like(0.0))?;
    let one = m.scalar_like(1.0);
    let m = super::where_cond(&origin, &one, &m)?;
    // at an infinite argument the unscaled quotient is already right (inf / inf would not be)
    let m = super::where_cond(&m.eq(&m.scalar_like(f64::INFINITY))?, &one, &m)?;
    let (a, b) = (a.div(&m)?, b.div(&m)?);
    let num = if wrt_a {
        dy.mul(&b)?
    } else {
        dy.mul(&a)?.neg()?
    };
    let g = num.div(&squares(&a, &b)?.mul(&m)?)?;
    super::where_cond(&origin, &g.scalar_like(0.0), &g)
}

/// d(a ** b)/da = b * a ** (b - 1), and 0 where b == 0 (as PyTorch: `0 ** 0` has no slope,
/// where the formula would give 0 * inf).
fn pow_base_grad(dy: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let g = dy.mul(&b.mul(&a.pow(&b.sub_scalar(1.0)?)?)?)?;
    let zero = g.scalar_like(0.0);
    super::where_cond(&b.detach().eq(&b.scalar_like(0.0))?, &zero, &g)
}

/// d(a ** b)/db = a ** b * ln(a), and 0 where a == 0 and b >= 0 (as PyTorch: the limit,
/// where the formula would give 0 * -inf).
fn pow_exponent_grad(dy: &Tensor, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<Tensor> {
    let g = dy.mul(&out.mul(&a.log()?)?)?;
    let (a0, b0) = (a.detach(), b.detach());
    let at_zero = super::where_cond(
        &a0.eq(&a0.scalar_like(0.0))?,
        &b0.ge(&b0.scalar_like(0.0))?,
        &Tensor::scalar(false),
    )?;
    super::where_cond(&at_zero, &g.scalar_like(0.0), &g)
}

/// `a / b` rounded toward minus infinity (`floor`) or toward zero, as PyTorch's
/// `div(rounding_mode=)` in the gradients of `remainder` and `fmod`. The floored quotient is
/// `(a - remainder(a, b)) / b` rounded to the nearest integer: exact where the ratio `a / b`
/// itself rounds up to the next integer. No gradient flows through it.
fn quotient(a: &Tensor, b: &Tensor, floor: bool) -> Result<Tensor> {
    let (a, b) = (a.detach(), b.detach());
    if floor {
        a.sub(&a.remainder(&b)?)?.div(&b)?.round()
    } else {
        a.div(&b)?.trunc()
    }
}

/// The share of `maximum`'s (or `minimum`'s) gradient that goes to `a`, as PyTorch splits
/// it: all of it unless `a` loses, half on ties. A NaN on either side loses nothing, so both
/// operands get the full gradient there.
fn share(op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (a, b) = (a.detach(), b.detach());
    let loses = if op == BinaryOp::Maximum {
        a.lt(&b)?
    } else {
        a.gt(&b)?
    };
    let ties = a.eq(&b)?.astype(a.dtype())?.mul_scalar(0.5)?;
    loses.astype(a.dtype())?.add(&ties)?.rsub_scalar(1.0)
}

/// Checks `x` and `y` and runs `kernel` on views of both broadcast to one shape; operands of
/// one shape (the common case) skip the layout work.
fn broadcast_run(
    name: &'static str,
    inputs: &[&Tensor],
    kernel: impl Fn(
        &crate::layout::Layout,
        &crate::layout::Layout,
    ) -> Result<Arc<crate::storage::Storage>>,
) -> Result<Tensor> {
    let (x, y) = (inputs[0], inputs[1]);
    same_dtype(name, inputs)?;
    if x.shape() == y.shape() {
        let data = kernel(x.layout(), y.layout())?;
        return Ok(Tensor::from_parts(data, x.layout().packed()));
    }
    let shape = broadcast_shapes(name, x.shape(), y.shape())?;
    let data = kernel(
        &x.layout().broadcast_to(&shape),
        &y.layout().broadcast_to(&shape),
    )?;
    Ok(Tensor::from_parts(
        data,
        crate::layout::Layout::contiguous(&shape),
    ))
}

/// Builds the family's rule and save mask, and the `Tensor` methods, from the table.
macro_rules! binary_family {
    ($($op:ident $name:ident $float:tt $int:tt $da:tt $db:tt),* $(,)?) => {
        impl Family for BinaryOp {
            fn forward(&self, inputs: &[&Tensor]) -> Result<Tensor> {
                broadcast_run(self.name(), inputs, |la, lb| {
                    on_device!(self.name(), inputs, |b, d| b.binary(*self, d[0], la, d[1], lb))
                        .map(Arc::new)
                })
            }

            fn saves(&self, needs: &[bool]) -> SaveMask {
                let mut m = SaveMask::default();
                match self {
                    $( BinaryOp::$op => {
                        if needs[0] { binary_family!(@saves m, $da); }
                        if needs[1] { binary_family!(@saves m, $db); }
                    } ),*
                }
                m
            }

            fn backward(&self, ctx: &RuleCtx, dy: &Tensor) -> Result<Grads> {
                let (da, db) = match self {
                    $( BinaryOp::$op => (
                        if ctx.needs[0] { Some(binary_family!(@grad ctx, dy, $da)) } else { None },
                        if ctx.needs[1] { Some(binary_family!(@grad ctx, dy, $db)) } else { None },
                    ) ),*
                };
                Ok(vec![
                    da.map(|g| sum_to_shape(&g, ctx.shape(0))).transpose()?,
                    db.map(|g| sum_to_shape(&g, ctx.shape(1))).transpose()?,
                ])
            }
        }

        impl Tensor {
            $(
                #[doc = concat!("Elementwise `", stringify!($name), "` with numpy broadcasting.")]
                ///
                /// Operands of different dtypes are promoted first, as PyTorch does (see
                /// `promote`); integer operands of an op defined on floats only become float32.
                pub fn $name(&self, other: &Tensor) -> Result<Tensor> {
                    let (a, b) = super::promote(self, other, !binary_family!(@has_int $int))?;
                    apply1(&Op::Binary(BinaryOp::$op), &[&a, &b])
                }
            )*
        }
    };
    (@has_int ()) => { false };
    (@has_int $kernel:tt) => { true };
    (@saves $m:ident, (|$dy:ident $(, $saved:ident)*| $g:expr)) => {{
        $( binary_family!(@keep $m, $saved); )*
    }};
    (@keep $m:ident, a) => { $m.input(0, true) };
    (@keep $m:ident, b) => { $m.input(1, true) };
    (@keep $m:ident, out) => { $m.outputs = true };
    (@grad $ctx:ident, $dy_in:ident, (|$dy:ident $(, $saved:ident)*| $g:expr)) => {{
        let $dy = $dy_in;
        $( let $saved = binary_family!(@fetch $ctx, $saved); )*
        $g
    }};
    (@fetch $ctx:ident, a) => { $ctx.input(0)? };
    (@fetch $ctx:ident, b) => { $ctx.input(1)? };
    (@fetch $ctx:ident, out) => { $ctx.output()? };
}
crate::binary_ops!(binary_family);

/// Builds the comparisons' forward and `Tensor` methods from the table.
macro_rules! compare_family {
    ($($op:ident $method:ident $name:ident $kernel:tt),* $(,)?) => {
        impl Family for CmpOp {
            fn forward(&self, inputs: &[&Tensor]) -> Result<Tensor> {
                broadcast_run(self.name(), inputs, |la, lb| {
                    on_device!(self.name(), inputs, |b, d| b.compare(*self, d[0], la, d[1], lb))
                        .map(Arc::new)
                })
            }

            fn saves(&self, _needs: &[bool]) -> SaveMask {
                SaveMask::default()
            }

            fn backward(&self, _ctx: &RuleCtx, _dy: &Tensor) -> Result<Grads> {
                Err(not_differentiable(self.name()))
            }
        }

        impl Tensor {
            $(
                #[doc = concat!("Elementwise comparison `", stringify!($name), "`; bool result, no gradient.")]
                pub fn $method(&self, other: &Tensor) -> Result<Tensor> {
                    let (a, b) = super::promote(self, other, false)?;
                    apply1(&Op::Compare(CmpOp::$op), &[&a, &b])
                }
            )*
        }
    };
}
crate::compare_ops!(compare_family);

impl Tensor {
    /// `self + v`.
    pub fn add_scalar(&self, v: f64) -> Result<Tensor> {
        self.add(&self.scalar_like(v))
    }
    /// `self - v`.
    pub fn sub_scalar(&self, v: f64) -> Result<Tensor> {
        self.sub(&self.scalar_like(v))
    }
    /// `v - self`.
    pub fn rsub_scalar(&self, v: f64) -> Result<Tensor> {
        self.scalar_like(v).sub(self)
    }
    /// `self * v`.
    pub fn mul_scalar(&self, v: f64) -> Result<Tensor> {
        self.mul(&self.scalar_like(v))
    }
    /// `self / v`.
    pub fn div_scalar(&self, v: f64) -> Result<Tensor> {
        self.div(&self.scalar_like(v))
    }
}
