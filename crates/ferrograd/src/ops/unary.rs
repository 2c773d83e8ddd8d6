//! Unary elementwise ops: one row each in [`unary_ops!`](crate::unary_ops), the table every
//! layer reads its part from (the op's enum and name in `op.rs`, the CPU kernels, the CUDA
//! kernel names, the rule and save mask below, the `Tensor` methods, the Python bindings).

use super::{Family, Grads};
use crate::autograd::{RuleCtx, SaveMask};
use crate::backend::on_device;
use crate::dispatch::apply1;
use crate::error::Result;
use crate::op::{ElementwiseOp, Op, UnaryOp};
use crate::tensor::Tensor;

/// The unary op table. A row is
///
/// `Op name (|v| float kernel) (|v| int64 kernel) (|dy, saved...| gradient)`
///
/// * the float kernel computes one element `v: T` (`T: Float`, see `cpu/float.rs`; f32 and
///   f64); the int64 kernel is `()` where the op is not defined on integers;
/// * the gradient is an expression in `dy` (the output's gradient, a `Tensor`) and the saved
///   values it names: `x` (the input) and `out` (the output). Naming a value is what saves it
///   for backward, so a rule cannot read what was not kept. It may use `?`. `nondiff` marks an
///   op without a gradient: reaching it where a gradient is needed is a `GradError`.
///
/// The CUDA kernels are the `UNARY_FLOAT(name, ...)` / `UNARY_INT(name, ...)` lines of
/// `cuda/kernels.cu`.
#[macro_export]
#[doc(hidden)]
macro_rules! unary_ops {
    ($then:ident) => {
        $then! {
            // op    name     float kernel          int64 kernel              gradient
            Neg      neg      (|v| -v)              (|v| v.wrapping_neg())    (|dy| dy.neg()?),
            Exp      exp      (|v| v.exp())         ()                        (|dy, out| dy.mul(&out)?),
            Log      log      (|v| v.ln())          ()                        (|dy, x| dy.div(&x)?),
            Log1p    log1p    (|v| v.ln_1p())       ()                        (|dy, x| dy.div(&x.add_scalar(1.0)?)?),
            Sqrt     sqrt     (|v| v.sqrt())        ()                        (|dy, out| dy.div(&out.mul_scalar(2.0)?)?),
            // the sign of a detached input: its own gradient is zero almost everywhere
            Abs      abs      (|v| v.abs())         (|v| v.wrapping_abs())    (|dy, x| dy.mul(&x.detach().sign()?)?),
            Tanh     tanh     (|v| v.tanh())        ()                        (|dy, out| act_grad(ElementwiseOp::TanhGrad, dy, &out)?),
            Sigmoid  sigmoid  (|v| v.sigmoid())     ()                        (|dy, out| act_grad(ElementwiseOp::SigmoidGrad, dy, &out)?),
            Relu     relu     (|v| v.relu())        (|v| v.max(0))            (|dy, out| act_grad(ElementwiseOp::ReluGrad, dy, &out)?),
            // piecewise constant: zero slope (where defined), as PyTorch, JAX and MegEngine
            Sign     sign     (|v| v.sign())        (|v| v.signum())          (|dy| dy.zeros_like()?),
            Sin      sin      (|v| v.sin())         ()                        (|dy, x| dy.mul(&x.cos()?)?),
            Cos      cos      (|v| v.cos())         ()                        (|dy, x| dy.mul(&x.sin()?.neg()?)?),
            // 1 + tan^2
            Tan      tan      (|v| v.tan())         ()                        (|dy, out| dy.mul(&out.mul(&out)?.add_scalar(1.0)?)?),
            Asin     asin     (|v| v.asin())        ()                        (|dy, x| dy.div(&one_minus_square(&x)?.sqrt()?)?),
            Acos     acos     (|v| v.acos())        ()                        (|dy, x| dy.div(&one_minus_square(&x)?.sqrt()?)?.neg()?),
            Atan     atan     (|v| v.atan())        ()                        (|dy, x| dy.div(&x.mul(&x)?.add_scalar(1.0)?)?),
            Sinh     sinh     (|v| v.sinh())        ()                        (|dy, x| dy.mul(&x.cosh()?)?),
            Cosh     cosh     (|v| v.cosh())        ()                        (|dy, x| dy.mul(&x.sinh()?)?),
            // 2 / sqrt(pi) * exp(-x^2)
            Erf      erf      (|v| v.erf())         ()                        (|dy, x| dy.mul(&erf_slope(&x)?)?),
            Erfc     erfc     (|v| v.erfc())        ()                        (|dy, x| dy.mul(&erf_slope(&x)?)?.neg()?),
            Expm1    expm1    (|v| v.exp_m1())      ()                        (|dy, out| dy.mul(&out.add_scalar(1.0)?)?),
            Exp2     exp2     (|v| v.exp2())        ()                        (|dy, out| dy.mul(&out.mul_scalar(std::f64::consts::LN_2)?)?),
            Log2     log2     (|v| v.log2())        ()                        (|dy, x| dy.div(&x.mul_scalar(std::f64::consts::LN_2)?)?),
            Log10    log10    (|v| v.log10())       ()                        (|dy, x| dy.div(&x.mul_scalar(std::f64::consts::LN_10)?)?),
            // -1/2 x^(-3/2) = -1/2 out^3
            Rsqrt    rsqrt    (|v| v.sqrt().recip()) ()                       (|dy, out| dy.mul(&out.mul(&out)?.mul(&out)?.mul_scalar(-0.5)?)?),
            Reciprocal reciprocal (|v| v.recip())   ()                        (|dy, out| dy.mul(&out.mul(&out)?)?.neg()?),
            Square   square   (|v| v * v)           (|v| v.wrapping_mul(v))   (|dy, x| dy.mul(&x.mul_scalar(2.0)?)?),
            // log(1 + e^v), linear above 20 (PyTorch's default threshold); slope sigmoid(v)
            Softplus softplus (|v| v.softplus())    ()                        (|dy, x| dy.mul(&x.sigmoid()?)?),
            // v * sigmoid(v); slope s * (1 + v * (1 - s))
            Silu     silu     (|v| v * v.sigmoid()) ()                        (|dy, x| dy.mul(&silu_slope(&x)?)?),
            // x Phi(x) (exact GELU) in one pass; its slope is one more op
            Gelu     gelu     (|v| v.gelu())        ()                        (|dy, x| dy.mul(&x.gelu_slope()?)?),
            // Phi(x) + x phi(x); its own slope phi(x) (2 - x^2)
            GeluSlope gelu_slope (|v| v.gelu_slope()) ()                      (|dy, x| dy.mul(&gelu_curvature(&x)?)?),
            Floor    floor    (|v| v.floor())       (|v| v)                   (|dy| dy.zeros_like()?),
            Ceil     ceil     (|v| v.ceil())        (|v| v)                   (|dy| dy.zeros_like()?),
            // halves to even, as numpy and PyTorch
            Round    round    (|v| v.round_ties_even()) (|v| v)               (|dy| dy.zeros_like()?),
            Trunc    trunc    (|v| v.trunc())       (|v| v)                   (|dy| dy.zeros_like()?),
        }
    };
}

/// `1 - x^2`.
fn one_minus_square(x: &Tensor) -> Result<Tensor> {
    x.mul(x)?.neg()?.add_scalar(1.0)
}

/// The slope of erf: `2 / sqrt(pi) * exp(-x^2)`.
fn erf_slope(x: &Tensor) -> Result<Tensor> {
    x.mul(x)?
        .neg()?
        .exp()?
        .mul_scalar(std::f64::consts::FRAC_2_SQRT_PI)
}

/// The slope of silu: `s * (1 + x * (1 - s))` with `s = sigmoid(x)`.
fn silu_slope(x: &Tensor) -> Result<Tensor> {
    let s = x.sigmoid()?;
    s.mul(&x.mul(&s.neg()?.add_scalar(1.0)?)?.add_scalar(1.0)?)
}

/// The second derivative of the exact GELU: `phi(x) (2 - x^2)`.
fn gelu_curvature(x: &Tensor) -> Result<Tensor> {
    let x2 = x.mul(x)?;
    let pdf = x2
        .mul_scalar(-0.5)?
        .exp()?
        .mul_scalar(0.398_942_280_401_432_7)?;
    pdf.mul(&x2.neg()?.add_scalar(2.0)?)
}

/// The backward of an activation from its output, in one pass.
fn act_grad(op: ElementwiseOp, dy: &Tensor, y: &Tensor) -> Result<Tensor> {
    apply1(&Op::Elementwise(op), &[dy, y])
}

/// Builds the family's rule and save mask, and the `Tensor` methods, from the table.
macro_rules! unary_family {
    ($($op:ident $name:ident $float:tt $int:tt $grad:tt),* $(,)?) => {
        impl Family for UnaryOp {
            fn forward(&self, inputs: &[&Tensor]) -> Result<Tensor> {
                let x = inputs[0];
                let data = on_device!(self.name(), inputs, |b, d| b.unary(*self, d[0], x.layout()))?;
                Ok(Tensor::from_parts(std::sync::Arc::new(data), x.layout().packed()))
            }

            fn saves(&self, _needs: &[bool]) -> SaveMask {
                let mut m = SaveMask::default();
                match self {
                    $( UnaryOp::$op => unary_family!(@saves m, $grad) ),*
                }
                m
            }

            fn backward(&self, ctx: &RuleCtx, dy: &Tensor) -> Result<Grads> {
                match self {
                    $( UnaryOp::$op => unary_family!(@grad self, ctx, dy, $grad) ),*
                }
            }
        }

        impl Tensor {
            $(
                #[doc = concat!("Elementwise `", stringify!($name), "`.")]
                ///
                /// An integer or bool input of an op defined on floats only is taken as
                /// the default float dtype (as PyTorch).
                pub fn $name(&self) -> Result<Tensor> {
                    if !unary_family!(@has_int $int) && !self.dtype().is_float() {
                        return apply1(&Op::Unary(UnaryOp::$op), &[&self.astype(crate::dtype::default_float())?]);
                    }
                    apply1(&Op::Unary(UnaryOp::$op), &[self])
                }
            )*
        }
    };
    (@has_int ()) => { false };
    (@has_int $kernel:tt) => { true };
    (@saves $m:ident, nondiff) => {{}};
    (@saves $m:ident, (|$dy:ident $(, $saved:ident)*| $g:expr)) => {{
        $( unary_family!(@keep $m, $saved); )*
    }};
    (@keep $m:ident, x) => { $m.input(0, true) };
    (@keep $m:ident, out) => { $m.outputs = true };
    (@grad $op:ident, $ctx:ident, $dy_in:ident, nondiff) => {
        Err(super::not_differentiable($op.name()))
    };
    (@grad $op:ident, $ctx:ident, $dy_in:ident, (|$dy:ident $(, $saved:ident)*| $g:expr)) => {{
        let $dy = $dy_in;
        $( let $saved = unary_family!(@fetch $ctx, $saved); )*
        Ok(vec![Some($g)])
    }};
    (@fetch $ctx:ident, x) => { $ctx.input(0)? };
    (@fetch $ctx:ident, out) => { $ctx.output()? };
}
crate::unary_ops!(unary_family);
