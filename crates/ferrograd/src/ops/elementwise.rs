//! Elementwise ops outside the unary and binary tables: a power with a constant exponent, the
//! activations' gradients, `where`, casts and copies.

use std::sync::Arc;

use super::{same_dtype, sum_to_shape, Family, Grads};
use crate::autograd::{RuleCtx, SaveMask};
use crate::backend::on_device;
use crate::dispatch::apply1;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::{broadcast_shapes, Layout};
use crate::op::{Activation, ElementwiseOp, Op};
use crate::tensor::Tensor;

impl ElementwiseOp {
    pub(crate) fn activation(&self) -> Option<Activation> {
        match self {
            ElementwiseOp::TanhGrad => Some(Activation::Tanh),
            ElementwiseOp::SigmoidGrad => Some(Activation::Sigmoid),
            ElementwiseOp::ReluGrad => Some(Activation::Relu),
            ElementwiseOp::PowScalar(_)
            | ElementwiseOp::Where
            | ElementwiseOp::Cast(_)
            | ElementwiseOp::Copy
            | ElementwiseOp::Random { .. } => None,
        }
    }
}

/// A new contiguous tensor of `shape` over `data`.
fn packed(data: crate::storage::Storage, layout: &Layout) -> Tensor {
    Tensor::from_parts(Arc::new(data), layout.packed())
}

impl Family for ElementwiseOp {
    fn forward(&self, inputs: &[&Tensor]) -> Result<Tensor> {
        let name = self.name();
        let x = inputs[0];
        Ok(match self {
            ElementwiseOp::PowScalar(p) => packed(
                on_device!(name, inputs, |b, d| b.pow_scalar(d[0], x.layout(), *p))?,
                x.layout(),
            ),
            ElementwiseOp::TanhGrad | ElementwiseOp::SigmoidGrad | ElementwiseOp::ReluGrad => {
                let (dy, y) = (inputs[0], inputs[1]);
                same_dtype(name, inputs)?;
                if dy.shape() != y.shape() {
                    return Err(Error::shape(
                        name,
                        format!("shapes {:?} and {:?} differ", dy.shape(), y.shape()),
                    ));
                }
                let act = self
                    .activation()
                    .ok_or_else(|| Error::invalid(name, "no activation"))?;
                packed(
                    on_device!(name, inputs, |b, d| {
                        b.act_grad(act, d[0], dy.layout(), d[1], y.layout())
                    })?,
                    y.layout(),
                )
            }
            ElementwiseOp::Where => {
                let (c, a, b) = (inputs[0], inputs[1], inputs[2]);
                if c.dtype() != DType::Bool {
                    return Err(Error::dtype(
                        name,
                        format!("condition must be bool, got {} {:?}", c.dtype(), c.shape()),
                    ));
                }
                same_dtype(name, &inputs[1..])?;
                let shape = broadcast_shapes(name, c.shape(), a.shape())?;
                let shape = broadcast_shapes(name, &shape, b.shape())?;
                let (lc, la, lb) = (
                    c.layout().broadcast_to(&shape),
                    a.layout().broadcast_to(&shape),
                    b.layout().broadcast_to(&shape),
                );
                Tensor::from_storage(
                    on_device!(name, inputs, |k, d| k
                        .where_(d[0], &lc, d[1], &la, d[2], &lb))?,
                    &shape,
                )
            }
            ElementwiseOp::Cast(to) => packed(
                on_device!(name, inputs, |b, d| b.cast(d[0], x.layout(), *to))?,
                x.layout(),
            ),
            ElementwiseOp::Copy => packed(
                on_device!(name, inputs, |b, d| b.cast(d[0], x.layout(), x.dtype()))?,
                x.layout(),
            ),
            ElementwiseOp::Random {
                shape,
                dtype,
                salt,
                normal,
            } => random(x, shape, *dtype, *salt, *normal)?,
        })
    }

    fn saves(&self, needs: &[bool]) -> SaveMask {
        let mut m = SaveMask::default();
        match self {
            // d(x^p) = p x^(p-1)
            ElementwiseOp::PowScalar(p) => m.input(0, *p != 0.0),
            // (dy, y): d/d(dy) needs y; d/dy needs dy too, except for relu (zero almost
            // everywhere)
            ElementwiseOp::TanhGrad | ElementwiseOp::SigmoidGrad => {
                m.input(1, true);
                m.input(0, needs[1]);
            }
            ElementwiseOp::ReluGrad => m.input(1, needs[0]),
            ElementwiseOp::Where => m.input(0, true),
            ElementwiseOp::Cast(_) | ElementwiseOp::Copy | ElementwiseOp::Random { .. } => {}
        }
        m
    }

    fn backward(&self, ctx: &RuleCtx, dy: &Tensor) -> Result<Grads> {
        Ok(match self {
            ElementwiseOp::PowScalar(p) => {
                if *p == 0.0 {
                    // x ** 0 is constant: a zero gradient, as PyTorch gives
                    vec![Some(dy.zeros_like()?)]
                } else {
                    let x = ctx.input(0)?;
                    vec![Some(dy.mul(&x.pow_scalar(p - 1.0)?.mul_scalar(*p)?)?)]
                }
            }
            // the rules of the rules, for higher-order gradients
            ElementwiseOp::TanhGrad => {
                let y = ctx.input(1)?;
                vec![
                    ctx.need(0, || apply1(&Op::Elementwise(self.clone()), &[dy, &y]))?,
                    // d/dy [g (1 - y^2)] = -2 g y
                    ctx.need(1, || dy.mul(&ctx.input(0)?)?.mul(&y)?.mul_scalar(-2.0))?,
                ]
            }
            ElementwiseOp::SigmoidGrad => {
                let y = ctx.input(1)?;
                vec![
                    ctx.need(0, || apply1(&Op::Elementwise(self.clone()), &[dy, &y]))?,
                    // d/dy [g y (1 - y)] = g (1 - 2y)
                    ctx.need(1, || {
                        dy.mul(&ctx.input(0)?)?
                            .mul(&y.mul_scalar(-2.0)?.add_scalar(1.0)?)
                    })?,
                ]
            }
            ElementwiseOp::ReluGrad => vec![
                ctx.need(0, || {
                    apply1(&Op::Elementwise(self.clone()), &[dy, &ctx.input(1)?])
                })?,
                // a step function of y: zero almost everywhere
                ctx.need(1, || dy.zeros_like())?,
            ],
            ElementwiseOp::Where => {
                let c = ctx.input(0)?;
                let zero = dy.scalar_like(0.0);
                vec![
                    None,
                    ctx.need(1, || {
                        sum_to_shape(&where_cond(&c, dy, &zero)?, ctx.shape(1))
                    })?,
                    ctx.need(2, || {
                        sum_to_shape(&where_cond(&c, &zero, dy)?, ctx.shape(2))
                    })?,
                ]
            }
            // only float inputs need gradients
            ElementwiseOp::Cast(_) => vec![Some(dy.astype(ctx.in_dtype)?)],
            ElementwiseOp::Copy => vec![Some(dy.clone())],
            ElementwiseOp::Random { .. } => return Err(super::not_differentiable(self.name())),
        })
    }
}

/// SplitMix64's output function: a 64-bit mix whose outputs for consecutive inputs look
/// independent.
#[inline(always)]
fn mix(z: u64) -> u64 {
    let z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// [`ElementwiseOp::Random`]: element `i` from `mix(key + i)` (and `mix(key + n + i)` for
/// the second uniform of a normal), generated on the host in parallel and moved to the
/// counter's device.
fn random(
    counter: &Tensor,
    shape: &[usize],
    dtype: DType,
    salt: u64,
    normal: bool,
) -> Result<Tensor> {
    const OP: &str = "random";
    if counter.dtype() != DType::I64 || counter.numel() != 1 {
        return Err(Error::dtype(
            OP,
            format!(
                "the counter must be one int64, got {} {:?}",
                counter.dtype(),
                counter.shape()
            ),
        ));
    }
    let n = crate::layout::checked_size(OP, shape, dtype.size_in_bytes())?;
    let key = mix(counter.to_vec::<i64>()?[0] as u64 ^ mix(salt));
    let draw = move |i: usize| -> f64 {
        let unit = |b: u64| (b >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        let u = unit(mix(key.wrapping_add(i as u64)));
        if !normal {
            return u;
        }
        // Box-Muller: 1 - u lies in (0, 1], so its log is finite
        let v = unit(mix(key.wrapping_add((n + i) as u64)));
        (-2.0 * (1.0 - u).ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    };
    let fill = |out: &mut [f64], start: usize| {
        for (k, o) in out.iter_mut().enumerate() {
            *o = draw(start + k);
        }
    };
    let mut data = crate::storage::pool::filled(n, 0f64)?;
    const CHUNK: usize = 1 << 14;
    if n >= 4 * CHUNK && crate::cpu::threads() > 1 {
        use rayon::prelude::*;
        data.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(c, o)| fill(o, c * CHUNK));
    } else {
        fill(&mut data, 0);
    }
    // (built directly: inside a trace this is the op's output, not data from Python)
    let t = match dtype {
        DType::F64 => Tensor::from_cpu(crate::storage::CpuData::F64(data), shape),
        DType::F32 => {
            // (rounded down, so a uniform stays below 1)
            let mut v = crate::storage::pool::take::<f32>(n)?;
            v.extend(data.into_iter().map(|x| {
                let y = x as f32;
                if !normal && y >= 1.0 {
                    1.0 - f32::EPSILON / 2.0
                } else {
                    y
                }
            }));
            Tensor::from_cpu(crate::storage::CpuData::F32(v), shape)
        }
        d => {
            return Err(Error::dtype(
                OP,
                format!("draws float32 or float64, not {d}"),
            ))
        }
    };
    match counter.device() {
        crate::Device::Cpu => Ok(t),
        to => crate::dispatch::eval(
            &Op::Movement(crate::op::MovementOp::ToDevice {
                from: crate::Device::Cpu,
                to,
            }),
            &[&t],
        ),
    }
}

/// `where(cond, a, b)`: elements of `a` where `cond` is true, else of `b` (broadcasting).
pub fn where_cond(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (a, b) = super::promote(a, b, false)?;
    apply1(&Op::Elementwise(ElementwiseOp::Where), &[cond, &a, &b])
}

impl Tensor {
    /// `self ** p` for a constant exponent.
    pub fn pow_scalar(&self, p: f64) -> Result<Tensor> {
        apply1(&Op::Elementwise(ElementwiseOp::PowScalar(p)), &[self])
    }
    /// Converts to `dtype` (a new tensor; gradients flow between float dtypes).
    pub fn astype(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        apply1(&Op::Elementwise(ElementwiseOp::Cast(dtype)), &[self])
    }
    /// A contiguous copy that keeps the gradient connection.
    pub fn copy(&self) -> Result<Tensor> {
        apply1(&Op::Elementwise(ElementwiseOp::Copy), &[self])
    }
}
