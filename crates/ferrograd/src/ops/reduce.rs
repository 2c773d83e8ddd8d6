//! Reductions, softmax, log-softmax, and cross-entropy built on them.

use super::{not_differentiable, Family, Grads};
use crate::autograd::{RuleCtx, SaveMask};
use crate::backend::on_device;
use crate::dispatch::apply1;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::{normalize_axes, normalize_axis};
use crate::op::{Op, ReduceKind, ReduceOp};
use crate::tensor::Tensor;

fn kept_shape(shape: &[usize], axes: &[usize]) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .map(|(d, &n)| if axes.contains(&d) { 1 } else { n })
        .collect()
}

impl Family for ReduceOp {
    fn forward(&self, inputs: &[&Tensor]) -> Result<Tensor> {
        let x = inputs[0];
        let name = self.name();
        let (kind, axes, keepdims) = match self {
            ReduceOp::Softmax(axis) | ReduceOp::LogSoftmax(axis) => {
                let log = matches!(self, ReduceOp::LogSoftmax(_));
                let d = on_device!(name, inputs, |b, d| b.softmax(d[0], x.layout(), *axis, log))?;
                return Ok(Tensor::from_storage(d, x.shape()));
            }
            ReduceOp::Normalize { eps } => {
                let d = if let [_, w, b] = inputs {
                    on_device!(name, inputs, |bk, d| bk.normalize(
                        d[0],
                        x.layout(),
                        Some((d[1], w.layout(), d[2], b.layout())),
                        *eps
                    ))?
                } else {
                    on_device!(name, inputs, |bk, d| bk.normalize(
                        d[0],
                        x.layout(),
                        None,
                        *eps
                    ))?
                };
                return Ok(Tensor::from_storage(d, x.shape()));
            }
            ReduceOp::SoftmaxCrossEntropy => {
                let labels = inputs[1];
                let d = on_device!(name, inputs, |b, d| b.softmax_xent(
                    d[0],
                    x.layout(),
                    d[1],
                    labels.layout()
                ))?;
                return Ok(Tensor::from_storage(d, &[]));
            }
            ReduceOp::SoftmaxCrossEntropyGrad => {
                let (labels, dy) = (inputs[1], inputs[2]);
                let d = on_device!(name, inputs, |b, d| b.softmax_xent_grad(
                    d[0],
                    x.layout(),
                    d[1],
                    labels.layout(),
                    d[2],
                    dy.layout()
                ))?;
                return Ok(Tensor::from_storage(d, x.shape()));
            }
            ReduceOp::NormalizeGrad { eps } => {
                if let [_, w, dy] = inputs {
                    let d = on_device!(name, inputs, |bk, d| bk.normalize_grad(
                        d[0],
                        x.layout(),
                        Some((d[1], w.layout())),
                        d[2],
                        dy.layout(),
                        *eps
                    ))?;
                    let cols = x.shape().last().copied().unwrap_or(1);
                    return Ok(Tensor::from_storage(d, &[x.numel() + 2 * cols]));
                }
                let dy = inputs[1];
                let d = on_device!(name, inputs, |bk, d| bk.normalize_grad(
                    d[0],
                    x.layout(),
                    None,
                    d[1],
                    dy.layout(),
                    *eps
                ))?;
                return Ok(Tensor::from_storage(d, x.shape()));
            }
            ReduceOp::Sum { axes, keepdims } => (ReduceKind::Sum, axes, *keepdims),
            ReduceOp::Mean { axes, keepdims } => (ReduceKind::Mean, axes, *keepdims),
            ReduceOp::Max { axes, keepdims } => (ReduceKind::Max, axes, *keepdims),
            ReduceOp::Min { axes, keepdims } => (ReduceKind::Min, axes, *keepdims),
        };
        let d = on_device!(name, inputs, |b, d| b.reduce(kind, d[0], x.layout(), axes))?;
        let shape: Vec<usize> = if keepdims {
            kept_shape(x.shape(), axes)
        } else {
            x.shape()
                .iter()
                .enumerate()
                .filter(|(d, _)| !axes.contains(d))
                .map(|(_, &n)| n)
                .collect()
        };
        Ok(Tensor::from_storage(d, &shape))
    }

    fn saves(&self, _needs: &[bool]) -> SaveMask {
        let mut m = SaveMask::default();
        match self {
            ReduceOp::Sum { .. } | ReduceOp::Mean { .. } => {}
            // the gradient is shared by the elements equal to the extremum
            ReduceOp::Max { .. } | ReduceOp::Min { .. } => {
                m.input(0, true);
                m.outputs = true;
            }
            ReduceOp::Softmax(_) | ReduceOp::LogSoftmax(_) => m.outputs = true,
            // the statistics are recomputed from the input (cheaper than keeping them)
            ReduceOp::Normalize { .. } => {
                m.input(0, true);
                // the weight scales the gradient; the bias is not needed
                m.input(1, true);
            }
            ReduceOp::NormalizeGrad { .. } | ReduceOp::SoftmaxCrossEntropyGrad => {}
            ReduceOp::SoftmaxCrossEntropy => {
                m.input(0, true);
                m.input(1, true);
            }
        }
        m
    }

    fn backward(&self, ctx: &RuleCtx, dy: &Tensor) -> Result<Grads> {
        match self {
            ReduceOp::Normalize { eps } => {
                let x = ctx.input(0)?;
                if ctx.n_inputs() == 3 {
                    let (dx, dw, db) = layer_norm_backward(&x, &ctx.input(1)?, dy, *eps)?;
                    return Ok(vec![Some(dx), Some(dw), Some(db)]);
                }
                return Ok(vec![Some(normalize_backward(&x, dy, *eps)?)]);
            }
            ReduceOp::SoftmaxCrossEntropy => {
                let (x, labels) = (ctx.input(0)?, ctx.input(1)?);
                return Ok(vec![Some(xent_backward(&x, &labels, dy)?), None]);
            }
            ReduceOp::NormalizeGrad { .. } | ReduceOp::SoftmaxCrossEntropyGrad => {
                return Err(not_differentiable(self.name()))
            }
            _ => {}
        }
        let shape = ctx.shape(0);
        let spread = |axes: &[usize]| dy.reshape(&kept_shape(shape, axes))?.broadcast_to(shape);
        Ok(vec![Some(match self {
            ReduceOp::Sum { axes, .. } => spread(axes)?,
            ReduceOp::Mean { axes, .. } => {
                let count: usize = axes.iter().map(|&a| shape[a]).product();
                spread(axes)?.mul_scalar(1.0 / count.max(1) as f64)?
            }
            ReduceOp::Max { axes, .. } | ReduceOp::Min { axes, .. } => {
                let (x, y) = (ctx.input(0)?, ctx.output()?);
                // masks of detached values: their own gradient is zero almost everywhere. A
                // NaN extremum came from the NaNs of its window (the reduction propagates
                // them), so they share its gradient, as PyTorch's.
                let xd = x.detach();
                let mask = xd
                    .eq(&y.detach().reshape(&kept_shape(shape, axes))?)?
                    .astype(x.dtype())?;
                let mask = if x.dtype().is_float() {
                    mask.add(&xd.ne(&xd)?.astype(x.dtype())?)?
                } else {
                    mask
                };
                let iaxes: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
                let count = mask.sum(Some(&iaxes), true)?;
                spread(axes)?.mul(&mask)?.div(&count)?
            }
            ReduceOp::Softmax(axis) => {
                let y = &ctx.output()?;
                let dot = dy.mul(y)?.sum(Some(&[*axis as isize]), true)?;
                y.mul(&dy.sub(&dot)?)?
            }
            ReduceOp::LogSoftmax(axis) => {
                let y = &ctx.output()?;
                dy.sub(&y.exp()?.mul(&dy.sum(Some(&[*axis as isize]), true)?)?)?
            }
            ReduceOp::Normalize { .. }
            | ReduceOp::NormalizeGrad { .. }
            | ReduceOp::SoftmaxCrossEntropy
            | ReduceOp::SoftmaxCrossEntropyGrad => unreachable!(),
        })])
    }
}

/// The fused cross-entropy's logits gradient, `(softmax(x) - onehot(labels)) * dy / n`: one
/// op, or the same formula with differentiable ops where this backward is itself recorded.
fn xent_backward(x: &Tensor, labels: &Tensor, dy: &Tensor) -> Result<Tensor> {
    if !(x.is_recorded() || dy.is_recorded()) {
        return apply1(
            &Op::Reduce(ReduceOp::SoftmaxCrossEntropyGrad),
            &[x, labels, dy],
        );
    }
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let classes =
        Tensor::from_vec((0..c as i64).collect::<Vec<_>>(), &[1, c])?.to_device(x.device())?;
    let onehot = labels.expand_dims(1)?.eq(&classes)?.astype(x.dtype())?;
    x.softmax(1)?
        .sub(&onehot)?
        .mul(&dy.mul_scalar(1.0 / n.max(1) as f64)?)
}

/// The gradients of layer norm with its affine part, `y = xhat * w + b`: one fused op (the
/// three gradients from one pass, cut from its flat result), or, where this backward is
/// itself recorded, differentiable ops.
fn layer_norm_backward(
    x: &Tensor,
    w: &Tensor,
    dy: &Tensor,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    let batch: Vec<isize> = (0..x.ndim() as isize - 1).collect();
    if x.is_recorded() || w.is_recorded() || dy.is_recorded() {
        let xhat = x.normalize(eps)?;
        let dw = dy.mul(&xhat)?.sum(Some(&batch), false)?;
        let db = dy.sum(Some(&batch), false)?;
        let dx = normalize_backward(x, &dy.mul(w)?, eps)?;
        return Ok((dx, dw, db));
    }
    let flat = apply1(&Op::Reduce(ReduceOp::NormalizeGrad { eps }), &[x, w, dy])?;
    let (n, cols) = (x.numel(), w.numel());
    let dx = flat.narrow(0, 0, n)?.reshape(x.shape())?;
    // copies, so the small gradients do not keep the large buffer alive
    let dw = flat.narrow(0, n, cols)?.copy()?.reshape(w.shape())?;
    let db = flat.narrow(0, n + cols, cols)?.copy()?.reshape(w.shape())?;
    Ok((dx, dw, db))
}

/// Normalize's input gradient, `rstd * (dy - mean(dy) - xhat * mean(dy * xhat))` per row:
/// one fused op, or, where this backward is itself recorded (a higher-order gradient), the
/// same formula written with differentiable ops.
fn normalize_backward(x: &Tensor, dy: &Tensor, eps: f64) -> Result<Tensor> {
    if !(x.is_recorded() || dy.is_recorded()) {
        return apply1(&Op::Reduce(ReduceOp::NormalizeGrad { eps }), &[x, dy]);
    }
    let last = [-1isize];
    let mean = x.mean(Some(&last), true)?;
    let xc = x.sub(&mean)?;
    let rstd = xc
        .mul(&xc)?
        .mean(Some(&last), true)?
        .add_scalar(eps)?
        .rsqrt()?;
    let xhat = xc.mul(&rstd)?;
    let mg = dy.mean(Some(&last), true)?;
    let mgx = dy.mul(&xhat)?.mean(Some(&last), true)?;
    rstd.mul(&dy.sub(&mg)?.sub(&xhat.mul(&mgx)?)?)
}

impl Tensor {
    fn reduce(
        &self,
        make: fn(Vec<usize>, bool) -> ReduceOp,
        name: &str,
        axes: Option<&[isize]>,
        keepdims: bool,
    ) -> Result<Tensor> {
        let axes = normalize_axes(name, axes, self.ndim())?;
        apply1(&Op::Reduce(make(axes, keepdims)), &[self])
    }
    /// Sum over `axes` (all when `None`).
    pub fn sum(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        self.reduce(
            |axes, keepdims| ReduceOp::Sum { axes, keepdims },
            "sum",
            axes,
            keepdims,
        )
    }
    /// Mean over `axes` (all when `None`).
    pub fn mean(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        self.reduce(
            |axes, keepdims| ReduceOp::Mean { axes, keepdims },
            "mean",
            axes,
            keepdims,
        )
    }
    /// Maximum over `axes` (all when `None`); ties share the gradient.
    pub fn max(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        self.reduce(
            |axes, keepdims| ReduceOp::Max { axes, keepdims },
            "max",
            axes,
            keepdims,
        )
    }
    /// Minimum over `axes` (all when `None`); ties share the gradient.
    pub fn min(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        self.reduce(
            |axes, keepdims| ReduceOp::Min { axes, keepdims },
            "min",
            axes,
            keepdims,
        )
    }
    /// Softmax along `axis`.
    pub fn softmax(&self, axis: isize) -> Result<Tensor> {
        if self.ndim() == 0 && (axis == 0 || axis == -1) {
            return self.reshape(&[1])?.softmax(0)?.reshape(&[]);
        }
        let axis = normalize_axis("softmax", axis, self.ndim())?;
        apply1(&Op::Reduce(ReduceOp::Softmax(axis)), &[self])
    }
    /// Each row along the last axis shifted to mean 0 and scaled to variance 1 (biased),
    /// `(x - mean) / sqrt(var + eps)`: layer norm without its affine part, one pass forward
    /// and one backward (float32 and float64, on the CPU).
    pub fn normalize(&self, eps: f64) -> Result<Tensor> {
        if self.ndim() == 0 || !self.dtype().is_float() {
            return Err(Error::shape(
                "layer_norm",
                format!(
                    "expected a float tensor with at least one axis, got a {} tensor of shape {:?}",
                    self.dtype(),
                    self.shape()
                ),
            ));
        }
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(Error::invalid(
                "layer_norm",
                format!("eps must be finite and >= 0, got {eps}"),
            ));
        }
        apply1(&Op::Reduce(ReduceOp::Normalize { eps }), &[self])
    }
    /// Layer norm along the last axis: [`Tensor::normalize`] then `* weight + bias`, both of
    /// the last axis's length, in one op (one pass forward, one for the three gradients;
    /// float32 and float64 on the CPU).
    pub fn layer_norm(&self, weight: &Tensor, bias: &Tensor, eps: f64) -> Result<Tensor> {
        let cols = self.shape().last().copied();
        for (what, t) in [("weight", weight), ("bias", bias)] {
            if t.shape().len() != 1 || Some(t.shape()[0]) != cols {
                return Err(Error::shape(
                    "layer_norm",
                    format!(
                        "{what} must have shape [{}] (the input's last axis), got {:?} for input {:?}",
                        cols.unwrap_or(0),
                        t.shape(),
                        self.shape()
                    ),
                ));
            }
            if t.dtype() != self.dtype() {
                return Err(Error::dtype(
                    "layer_norm",
                    format!("{what} is {} but the input is {}", t.dtype(), self.dtype()),
                ));
            }
        }
        // the checks of the plain form
        if self.ndim() == 0 || !self.dtype().is_float() || !(eps.is_finite() && eps >= 0.0) {
            return self.normalize(eps);
        }
        apply1(
            &Op::Reduce(ReduceOp::Normalize { eps }),
            &[self, weight, bias],
        )
    }
    /// Log-softmax along `axis`.
    pub fn log_softmax(&self, axis: isize) -> Result<Tensor> {
        if self.ndim() == 0 && (axis == 0 || axis == -1) {
            return self.reshape(&[1])?.log_softmax(0)?.reshape(&[]);
        }
        let axis = normalize_axis("log_softmax", axis, self.ndim())?;
        apply1(&Op::Reduce(ReduceOp::LogSoftmax(axis)), &[self])
    }
}

/// Mean cross-entropy of `logits` `[n, c]` (or `[n, c, ...]`, classes on axis 1) against
/// integer `labels` `[n]` (or `[n, ...]`).
pub fn cross_entropy(logits: &Tensor, labels: &Tensor) -> Result<Tensor> {
    const OP: &str = "cross_entropy";
    if labels.dtype() != DType::I64 {
        return Err(Error::dtype(
            OP,
            format!(
                "labels must be int64 class indices, got {} {:?}",
                labels.dtype(),
                labels.shape()
            ),
        ));
    }
    if !logits.dtype().is_float() {
        return Err(Error::dtype(
            OP,
            format!(
                "logits must be float, got {} {:?}",
                logits.dtype(),
                logits.shape()
            ),
        ));
    }
    let ls = logits.shape();
    let expected: Vec<usize> = ls
        .iter()
        .enumerate()
        .filter(|(d, _)| *d != 1)
        .map(|(_, &n)| n)
        .collect();
    if ls.len() < 2 || labels.shape() != expected.as_slice() {
        return Err(Error::shape(
            OP,
            format!(
                "logits {ls:?} need labels of shape {expected:?} (classes on axis 1), got labels {:?}",
                labels.shape()
            ),
        ));
    }
    let classes = ls[1] as i64;
    if let Some(&bad) = labels
        .to_vec::<i64>()?
        .iter()
        .find(|&&v| v < 0 || v >= classes)
    {
        return Err(Error::index(
            OP,
            format!("label {bad} is out of range for {classes} classes (logits {ls:?})"),
        ));
    }
    let labels = labels.to_device(logits.device())?;
    let fused_dtype = matches!(logits.dtype(), DType::F32 | DType::F64);
    if ls.len() == 2 && fused_dtype && ls[0] * ls[1] > 0 {
        // one pass forward, one backward
        return apply1(
            &Op::Reduce(ReduceOp::SoftmaxCrossEntropy),
            &[logits, &labels],
        );
    }
    let logp = logits.log_softmax(1)?;
    let picked = logp.gather(&labels.expand_dims(1)?, 1)?;
    picked.mean(None, false)?.neg()
}
