//! Unary and binary elementwise ops, comparisons, `where`, casts and copies.

use super::{kernel, same_dtype, sum_to_shape, with_cpu};
use std::sync::Arc;

use crate::cpu;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::broadcast_shapes;
use crate::op::{apply1, BinaryOp, CmpOp, Op, RuleCtx, SaveMask, UnaryOp};
use crate::storage::Storage;
use crate::tensor::Tensor;

pub(crate) fn forward(op: &Op, inputs: &[&Tensor]) -> Result<Tensor> {
    if let Some(out) = packed_cpu(op, inputs) {
        return out;
    }
    let out = match op {
        Op::Unary(u) => {
            let x = inputs[0];
            let d = kernel!(inputs, |d| cpu::unary(*u, d[0], x.layout()), |g, c| {
                crate::cuda::unary(g, *u, c[0], x.layout())
            })?;
            Tensor::from_storage(d, x.shape())
        }
        Op::Binary(b) => {
            let (x, y) = (inputs[0], inputs[1]);
            same_dtype(b.name(), inputs)?;
            let shape = broadcast_shapes(b.name(), x.shape(), y.shape())?;
            let (lx, ly) = (
                x.layout().broadcast_to(&shape),
                y.layout().broadcast_to(&shape),
            );
            let d = kernel!(inputs, |d| cpu::binary(*b, d[0], &lx, d[1], &ly), |g, c| {
                crate::cuda::binary(g, *b, c[0], &lx, c[1], &ly)
            })?;
            Tensor::from_storage(d, &shape)
        }
        Op::Compare(c) => {
            let (x, y) = (inputs[0], inputs[1]);
            same_dtype(c.name(), inputs)?;
            let shape = broadcast_shapes(c.name(), x.shape(), y.shape())?;
            let (lx, ly) = (
                x.layout().broadcast_to(&shape),
                y.layout().broadcast_to(&shape),
            );
            let d = kernel!(
                inputs,
                |d| cpu::compare(*c, d[0], &lx, d[1], &ly),
                |g, cd| crate::cuda::compare(g, *c, cd[0], &lx, cd[1], &ly)
            )?;
            Tensor::from_storage(d, &shape)
        }
        Op::ActGrad(u) => {
            let (dy, y) = (inputs[0], inputs[1]);
            same_dtype(op.name(), inputs)?;
            if dy.shape() != y.shape() {
                return Err(Error::shape(
                    op.name(),
                    format!("shapes {:?} and {:?} differ", dy.shape(), y.shape()),
                ));
            }
            let d = kernel!(
                inputs,
                |d| cpu::act_grad(*u, d[0], dy.layout(), d[1], y.layout()),
                |g, c| crate::cuda::act_grad(g, *u, c[0], dy.layout(), c[1], y.layout())
            )?;
            Tensor::from_storage(d, y.shape())
        }
        Op::PowScalar(p) => {
            let x = inputs[0];
            let d = kernel!(inputs, |d| cpu::pow_scalar(d[0], x.layout(), *p), |g, c| {
                crate::cuda::pow_scalar(g, c[0], x.layout(), *p)
            })?;
            Tensor::from_storage(d, x.shape())
        }
        Op::Where => {
            let (c, x, y) = (inputs[0], inputs[1], inputs[2]);
            if c.dtype() != DType::Bool {
                return Err(Error::dtype(
                    "where",
                    format!("condition must be bool, got {} {:?}", c.dtype(), c.shape()),
                ));
            }
            same_dtype("where", &inputs[1..])?;
            let shape = broadcast_shapes("where", c.shape(), x.shape())?;
            let shape = broadcast_shapes("where", &shape, y.shape())?;
            let (lc, lx, ly) = (
                c.layout().broadcast_to(&shape),
                x.layout().broadcast_to(&shape),
                y.layout().broadcast_to(&shape),
            );
            let d = kernel!(
                inputs,
                |d| cpu::where_(d[0], &lc, d[1], &lx, d[2], &ly),
                |g, c| crate::cuda::where_(g, c[0], &lc, c[1], &lx, c[2], &ly)
            )?;
            Tensor::from_storage(d, &shape)
        }
        Op::Cast(to) => {
            let x = inputs[0];
            let d = kernel!(
                inputs,
                |d| Ok::<_, crate::Error>(cpu::cast(d[0], x.layout(), *to)),
                |g, c| crate::cuda::cast(g, c[0], x.layout(), *to)
            )?;
            Tensor::from_storage(d, x.shape())
        }
        Op::Copy => {
            let x = inputs[0];
            let d = kernel!(
                inputs,
                |d| Ok::<_, crate::Error>(cpu::copy(d[0], x.layout())),
                |g, c| crate::cuda::cast(g, c[0], x.layout(), x.dtype())
            )?;
            Tensor::from_storage(d, x.shape())
        }
        _ => unreachable!("not an elementwise op"),
    };
    Ok(out)
}

/// The common case without layout work: a unary op, or a binary op on operands of one shape
/// and dtype, over contiguous CPU buffers. `None` sends the op down the general path (which
/// also reports every error).
fn packed_cpu(op: &Op, inputs: &[&Tensor]) -> Option<Result<Tensor>> {
    let packed = |t: &Tensor| t.device() == Device::Cpu && t.layout().is_contiguous();
    let x = inputs[0];
    if !packed(x) {
        return None;
    }
    let data = match (op, inputs) {
        (Op::Unary(u), [_]) => with_cpu(inputs, |d| cpu::unary(*u, d[0], x.layout())),
        (Op::Binary(b), [_, y]) => {
            if !packed(y) || x.shape() != y.shape() || x.dtype() != y.dtype() {
                return None;
            }
            with_cpu(inputs, |d| {
                cpu::binary(*b, d[0], x.layout(), d[1], y.layout())
            })
        }
        _ => return None,
    };
    Some(data.map(|d| Tensor::from_parts(Arc::new(Storage::cpu(d)), x.layout().packed())))
}

pub(crate) fn saves(op: &Op, needs: &[bool]) -> SaveMask {
    let mut m = SaveMask::default();
    match op {
        Op::Unary(u) => match u {
            UnaryOp::Exp | UnaryOp::Tanh | UnaryOp::Sigmoid | UnaryOp::Relu | UnaryOp::Sqrt => {
                m.outputs = true
            }
            UnaryOp::Log | UnaryOp::Abs => m.input(0, true),
            UnaryOp::Neg | UnaryOp::Sign => {}
        },
        Op::Binary(b) => match b {
            BinaryOp::Add | BinaryOp::Sub => {}
            // d(a*b)/da = b and d(a*b)/db = a: keep only the operand a requested gradient uses
            BinaryOp::Mul => {
                m.input(0, needs[1]);
                m.input(1, needs[0]);
            }
            BinaryOp::Div => {
                m.input(1, true);
                m.outputs = needs[1];
            }
            BinaryOp::Pow => {
                m.input(0, true);
                m.input(1, true);
                m.outputs = needs[1];
            }
            BinaryOp::Maximum | BinaryOp::Minimum => {
                m.input(0, true);
                m.input(1, true);
            }
        },
        Op::PowScalar(_) => m.input(0, true),
        Op::ActGrad(u) => {
            m.input(1, true);
            m.input(0, needs[1] && *u != UnaryOp::Relu);
        }
        Op::Where => m.input(0, true),
        _ => {}
    }
    m
}

pub(crate) fn backward(ctx: &RuleCtx, dy: &Tensor) -> Result<Vec<Option<Tensor>>> {
    let shape = |i: usize| ctx.shape(i);
    Ok(match ctx.op {
        Op::Unary(u) => vec![match u {
            UnaryOp::Neg => Some(dy.neg()?),
            UnaryOp::Exp => Some(dy.mul(&ctx.output()?)?),
            UnaryOp::Log => Some(dy.div(&ctx.input(0)?)?),
            UnaryOp::Sqrt => Some(dy.div(&ctx.output()?.mul_scalar(2.0)?)?),
            UnaryOp::Abs => Some(dy.mul(&ctx.input(0)?.sign()?)?),
            UnaryOp::Tanh | UnaryOp::Sigmoid | UnaryOp::Relu => {
                Some(apply1(&Op::ActGrad(*u), &[dy, &ctx.output()?])?)
            }
            UnaryOp::Sign => None,
        }],
        Op::Binary(b) => {
            let (n0, n1) = (ctx.needs[0], ctx.needs[1]);
            let (g0, g1) = match b {
                BinaryOp::Add => (n0.then(|| dy.clone()), n1.then(|| dy.clone())),
                BinaryOp::Sub => (
                    n0.then(|| dy.clone()),
                    if n1 { Some(dy.neg()?) } else { None },
                ),
                BinaryOp::Mul => (
                    if n0 {
                        Some(dy.mul(&ctx.input(1)?)?)
                    } else {
                        None
                    },
                    if n1 {
                        Some(dy.mul(&ctx.input(0)?)?)
                    } else {
                        None
                    },
                ),
                BinaryOp::Div => {
                    let b = &ctx.input(1)?;
                    (
                        if n0 { Some(dy.div(b)?) } else { None },
                        if n1 {
                            Some(dy.mul(&ctx.output()?)?.div(b)?.neg()?)
                        } else {
                            None
                        },
                    )
                }
                BinaryOp::Pow => {
                    let (a, e) = (&ctx.input(0)?, &ctx.input(1)?);
                    (
                        if n0 {
                            Some(dy.mul(&e.mul(&a.pow(&e.sub_scalar(1.0)?)?)?)?)
                        } else {
                            None
                        },
                        if n1 {
                            Some(dy.mul(&ctx.output()?.mul(&a.log()?)?)?)
                        } else {
                            None
                        },
                    )
                }
                BinaryOp::Maximum | BinaryOp::Minimum => {
                    let (a, c) = (&ctx.input(0)?, &ctx.input(1)?);
                    // ties split the gradient evenly, as PyTorch does
                    let wins = if *b == BinaryOp::Maximum {
                        a.gt(c)?
                    } else {
                        a.lt(c)?
                    };
                    let ties = a.eq(c)?.astype(a.dtype())?.mul_scalar(0.5)?;
                    let wa = wins.astype(a.dtype())?.add(&ties)?;
                    (
                        if n0 { Some(dy.mul(&wa)?) } else { None },
                        if n1 {
                            Some(dy.mul(&wa.rsub_scalar(1.0)?)?)
                        } else {
                            None
                        },
                    )
                }
            };
            vec![
                g0.map(|g| sum_to_shape(&g, shape(0))).transpose()?,
                g1.map(|g| sum_to_shape(&g, shape(1))).transpose()?,
            ]
        }
        Op::ActGrad(u) => {
            // the rule of the rule, for higher-order gradients
            let y = &ctx.input(1)?;
            let d_dy = if ctx.needs[0] {
                Some(apply1(&Op::ActGrad(*u), &[dy, y])?)
            } else {
                None
            };
            let d_y = match (u, ctx.needs[1]) {
                (UnaryOp::Tanh, true) => Some(dy.mul(&ctx.input(0)?)?.mul(y)?.mul_scalar(-2.0)?),
                (UnaryOp::Sigmoid, true) => Some(
                    dy.mul(&ctx.input(0)?)?
                        .mul(&y.mul_scalar(-2.0)?.add_scalar(1.0)?)?,
                ),
                _ => None,
            };
            vec![d_dy, d_y]
        }
        Op::PowScalar(p) => {
            let x = &ctx.input(0)?;
            if *p == 0.0 {
                vec![None]
            } else {
                vec![Some(dy.mul(&x.pow_scalar(p - 1.0)?.mul_scalar(*p)?)?)]
            }
        }
        Op::Where => {
            let c = &ctx.input(0)?;
            let zero = dy.scalar_like(0.0);
            vec![
                None,
                if ctx.needs[1] {
                    Some(sum_to_shape(&where_cond(c, dy, &zero)?, shape(1))?)
                } else {
                    None
                },
                if ctx.needs[2] {
                    Some(sum_to_shape(&where_cond(c, &zero, dy)?, shape(2))?)
                } else {
                    None
                },
            ]
        }
        Op::Cast(_) => {
            let from = ctx.in_dtype;
            vec![if from.is_float() {
                Some(dy.astype(from)?)
            } else {
                None
            }]
        }
        Op::Copy => vec![Some(dy.clone())],
        _ => vec![None; ctx.n_inputs()],
    })
}

/// `where(cond, a, b)`: elements of `a` where `cond` is true, else of `b` (broadcasting).
pub fn where_cond(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    apply1(&Op::Where, &[cond, a, b])
}

macro_rules! unary_methods {
    ($($name:ident => $op:ident),* $(,)?) => {
        impl Tensor {
            $(
                #[doc = concat!("Elementwise `", stringify!($name), "`.")]
                pub fn $name(&self) -> Result<Tensor> {
                    apply1(&Op::Unary(UnaryOp::$op), &[self])
                }
            )*
        }
    };
}
unary_methods!(neg => Neg, exp => Exp, log => Log, sqrt => Sqrt, abs => Abs, tanh => Tanh,
    sigmoid => Sigmoid, relu => Relu, sign => Sign);

macro_rules! binary_methods {
    ($($name:ident => $op:ident),* $(,)?) => {
        impl Tensor {
            $(
                #[doc = concat!("Elementwise `", stringify!($name), "` with numpy broadcasting.")]
                pub fn $name(&self, other: &Tensor) -> Result<Tensor> {
                    apply1(&Op::Binary(BinaryOp::$op), &[self, other])
                }
            )*
        }
    };
}
binary_methods!(add => Add, sub => Sub, mul => Mul, div => Div, pow => Pow,
    maximum => Maximum, minimum => Minimum);

macro_rules! compare_methods {
    ($($name:ident => $op:ident),* $(,)?) => {
        impl Tensor {
            $(
                #[doc = concat!("Elementwise comparison `", stringify!($name), "`; bool result, no gradient.")]
                pub fn $name(&self, other: &Tensor) -> Result<Tensor> {
                    apply1(&Op::Compare(CmpOp::$op), &[self, other])
                }
            )*
        }
    };
}
compare_methods!(eq => Eq, ne => Ne, lt => Lt, le => Le, gt => Gt, ge => Ge);

impl Tensor {
    /// `self ** p` for a constant exponent.
    pub fn pow_scalar(&self, p: f64) -> Result<Tensor> {
        apply1(&Op::PowScalar(p), &[self])
    }
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
    /// Converts to `dtype` (a new tensor; gradients flow between float dtypes).
    pub fn astype(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        apply1(&Op::Cast(dtype), &[self])
    }
    /// A contiguous copy that keeps the gradient connection.
    pub fn copy(&self) -> Result<Tensor> {
        apply1(&Op::Copy, &[self])
    }
}
