//! Reductions, softmax, log-softmax, and cross-entropy built on them.

use super::kernel;
use crate::cpu;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::{normalize_axes, normalize_axis};
use crate::op::{apply1, Op, ReduceKind, RuleCtx, SaveMask};
use crate::tensor::Tensor;

fn kept_shape(shape: &[usize], axes: &[usize]) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .map(|(d, &n)| if axes.contains(&d) { 1 } else { n })
        .collect()
}

pub(crate) fn forward(op: &Op, inputs: &[&Tensor]) -> Result<Tensor> {
    let x = inputs[0];
    let out = match op {
        Op::Reduce {
            kind,
            axes,
            keepdims,
        } => {
            let d = kernel!(
                inputs,
                |d| cpu::reduce(*kind, d[0], x.layout(), axes),
                |g, c| crate::cuda::reduce(g, *kind, c[0], x.layout(), axes)
            )?;
            let shape: Vec<usize> = if *keepdims {
                kept_shape(x.shape(), axes)
            } else {
                x.shape()
                    .iter()
                    .enumerate()
                    .filter(|(d, _)| !axes.contains(d))
                    .map(|(_, &n)| n)
                    .collect()
            };
            Tensor::from_storage(d, &shape)
        }
        Op::Softmax(axis) | Op::LogSoftmax(axis) => {
            let log = matches!(op, Op::LogSoftmax(_));
            let d = kernel!(
                inputs,
                |d| cpu::softmax(d[0], x.layout(), *axis, log),
                |g, c| crate::cuda::softmax(g, c[0], x.layout(), *axis, log)
            )?;
            Tensor::from_storage(d, x.shape())
        }
        _ => unreachable!("not a reduction"),
    };
    Ok(out)
}

pub(crate) fn saves(op: &Op) -> SaveMask {
    let mut m = SaveMask::default();
    match op {
        Op::Reduce {
            kind: ReduceKind::Max | ReduceKind::Min,
            ..
        } => {
            m.input(0, true);
            m.outputs = true;
        }
        Op::Softmax(_) | Op::LogSoftmax(_) => m.outputs = true,
        _ => {}
    }
    m
}

pub(crate) fn backward(ctx: &RuleCtx, dy: &Tensor) -> Result<Vec<Option<Tensor>>> {
    let shape = ctx.shape(0);
    Ok(vec![Some(match ctx.op {
        Op::Reduce { kind, axes, .. } => {
            let kept = kept_shape(shape, axes);
            let dyb = dy.reshape(&kept)?.broadcast_to(shape)?;
            match kind {
                ReduceKind::Sum => dyb,
                ReduceKind::Mean => {
                    let count: usize = axes.iter().map(|&a| shape[a]).product();
                    dyb.mul_scalar(1.0 / count.max(1) as f64)?
                }
                ReduceKind::Max | ReduceKind::Min => {
                    let (x, y) = (&ctx.input(0)?, &ctx.output()?);
                    // the gradient is shared by every element equal to the extremum
                    let mask = x.eq(&y.reshape(&kept)?)?.astype(x.dtype())?;
                    let iaxes: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
                    let count = mask.sum(Some(&iaxes), true)?;
                    dyb.mul(&mask)?.div(&count)?
                }
            }
        }
        Op::Softmax(axis) => {
            let y = &ctx.output()?;
            let ax = [*axis as isize];
            let dot = dy.mul(y)?.sum(Some(&ax), true)?;
            y.mul(&dy.sub(&dot)?)?
        }
        Op::LogSoftmax(axis) => {
            let y = &ctx.output()?;
            let ax = [*axis as isize];
            dy.sub(&y.exp()?.mul(&dy.sum(Some(&ax), true)?)?)?
        }
        _ => return Ok(vec![None]),
    })])
}

impl Tensor {
    fn reduce(&self, kind: ReduceKind, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        let axes = normalize_axes(kind.name(), axes, self.ndim())?;
        apply1(
            &Op::Reduce {
                kind,
                axes,
                keepdims,
            },
            &[self],
        )
    }
    /// Sum over `axes` (all when `None`).
    pub fn sum(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        self.reduce(ReduceKind::Sum, axes, keepdims)
    }
    /// Mean over `axes` (all when `None`).
    pub fn mean(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        self.reduce(ReduceKind::Mean, axes, keepdims)
    }
    /// Maximum over `axes` (all when `None`); ties share the gradient.
    pub fn max(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        self.reduce(ReduceKind::Max, axes, keepdims)
    }
    /// Minimum over `axes` (all when `None`); ties share the gradient.
    pub fn min(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        self.reduce(ReduceKind::Min, axes, keepdims)
    }
    /// Softmax along `axis`.
    pub fn softmax(&self, axis: isize) -> Result<Tensor> {
        let axis = normalize_axis("softmax", axis, self.ndim())?;
        apply1(&Op::Softmax(axis), &[self])
    }
    /// Log-softmax along `axis`.
    pub fn log_softmax(&self, axis: isize) -> Result<Tensor> {
        let axis = normalize_axis("log_softmax", axis, self.ndim())?;
        apply1(&Op::LogSoftmax(axis), &[self])
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
    let logp = logits.log_softmax(1)?;
    let picked = logp.gather(&labels.expand_dims(1)?, 1)?;
    picked.mean(None, false)?.neg()
}
