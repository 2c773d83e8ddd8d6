//! Optimizer updates as one pass over each parameter: the parameter and its state tensors are
//! updated in place together, element by element, with the same arithmetic, in the same
//! order, as the composed tensor-op form (so the two agree to the last bit in float64).
//!
//! The gradient is used as given (to maximize, pass it negated). CPU, float32 and float64,
//! contiguous tensors that share no memory; anything else is the caller's to do with tensor
//! ops (the Python optimizers fall back to them, and use them inside `fg.trace`, where the
//! graph fuses the chain itself).

use std::sync::RwLockWriteGuard;

use crate::cpu::optim::{adam_chunk, chunked4, sgd_chunk, AdamConsts, SgdConsts};
use crate::error::{Error, Result};
use crate::storage::{CpuData, StorageData};
use crate::tensor::Tensor;
use crate::Device;

/// Adam's (and AdamW's) hyperparameters for one step.
#[derive(Clone, Copy, Debug)]
pub struct AdamStep {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// AdamW: `p *= 1 - lr * weight_decay` instead of adding `weight_decay * p` to the
    /// gradient.
    pub decoupled: bool,
    /// `1 - beta1^t` and `sqrt(1 - beta2^t)` for this step `t`.
    pub bias_correction1: f64,
    pub bias_correction2_sqrt: f64,
}

/// SGD's hyperparameters for one step.
#[derive(Clone, Copy, Debug)]
pub struct SgdStep {
    pub lr: f64,
    pub momentum: f64,
    pub dampening: f64,
    pub weight_decay: f64,
    pub nesterov: bool,
    /// The momentum buffer has not been written yet (its first step takes the gradient
    /// whole, as PyTorch's).
    pub first: bool,
}

const OP: &str = "optimizer_step";

/// Whether [`adam_step`] / [`sgd_step`] can take these tensors (else use tensor ops).
pub fn fusable(tensors: &[&Tensor]) -> bool {
    let Some(first) = tensors.first() else {
        return false;
    };
    let mut seen = Vec::with_capacity(tensors.len());
    tensors.iter().all(|t| {
        let key = std::sync::Arc::as_ptr(t.storage()) as usize;
        let fresh = !seen.contains(&key);
        seen.push(key);
        fresh
            && t.device() == Device::Cpu
            && t.dtype() == first.dtype()
            && matches!(t.dtype(), crate::DType::F32 | crate::DType::F64)
            && t.shape() == first.shape()
            && t.layout().is_contiguous()
            && !crate::graph::is_tracing()
    })
}

fn check(tensors: &[&Tensor]) -> Result<()> {
    if fusable(tensors) {
        Ok(())
    } else {
        Err(Error::invalid(
            OP,
            "needs contiguous CPU float32/float64 tensors of one shape and dtype, sharing no \
             memory, outside fg.trace"
                .to_string(),
        ))
    }
}

/// The elements of a contiguous tensor inside its locked buffer.
fn span(t: &Tensor) -> std::ops::Range<usize> {
    let o = t.layout().offset();
    o..o + t.numel()
}

macro_rules! slices {
    ($guards:expr, $variant:ident) => {
        match &mut **$guards {
            StorageData::Cpu(CpuData::$variant(v)) => v,
            #[allow(unreachable_patterns)]
            _ => return Err(Error::dtype(OP, "unexpected buffer".to_string())),
        }
    };
}

/// One Adam step in place: `p`, `exp_avg`, `exp_avg_sq` (and `max_exp_avg_sq` with AMSGrad)
/// from the gradient `g`.
pub fn adam_step(
    p: &Tensor,
    g: &Tensor,
    exp_avg: &Tensor,
    exp_avg_sq: &Tensor,
    max_exp_avg_sq: Option<&Tensor>,
    h: &AdamStep,
) -> Result<()> {
    let mut all = vec![p, g, exp_avg, exp_avg_sq];
    all.extend(max_exp_avg_sq);
    check(&all)?;
    let gr = g.storage().read();
    let mut pw: RwLockWriteGuard<'_, StorageData> = p.storage().write();
    let mut mw = exp_avg.storage().write();
    let mut vw = exp_avg_sq.storage().write();
    let mut xw = max_exp_avg_sq.map(|t| t.storage().write());
    macro_rules! go {
        ($t:ty, $variant:ident) => {{
            let ps = &mut slices!(&mut pw, $variant)[span(p)];
            let gs = match &*gr {
                StorageData::Cpu(CpuData::$variant(v)) => &v[span(g)],
                #[allow(unreachable_patterns)]
                _ => return Err(Error::dtype(OP, "unexpected buffer".to_string())),
            };
            let ms = &mut slices!(&mut mw, $variant)[span(exp_avg)];
            let vs = &mut slices!(&mut vw, $variant)[span(exp_avg_sq)];
            let xs = match (&mut xw, max_exp_avg_sq) {
                (Some(w), Some(t)) => Some(&mut slices!(w, $variant)[span(t)]),
                _ => None,
            };
            let c = |v: f64| v as $t;
            let k = AdamConsts::<$t> {
                b1: c(h.beta1),
                b2: c(h.beta2),
                one_b1: c(1.0 - h.beta1),
                one_b2: c(1.0 - h.beta2),
                wd: c(h.weight_decay),
                decay: c(1.0 - h.lr * h.weight_decay),
                bc2: c(h.bias_correction2_sqrt),
                eps: c(h.eps),
                step: c(h.lr / h.bias_correction1),
                l2: h.weight_decay != 0.0 && !h.decoupled,
                decoupled: h.weight_decay != 0.0 && h.decoupled,
            };
            match xs {
                Some(xs) => chunked4(ps, gs, ms, vs, xs, |p, g, m, v, x| {
                    adam_chunk(p, g, m, v, Some(x), &k)
                }),
                None => chunked4(ps, gs, ms, vs, &mut [], |p, g, m, v, _| {
                    adam_chunk(p, g, m, v, None, &k)
                }),
            }
        }};
    }
    match p.dtype() {
        crate::DType::F32 => go!(f32, F32),
        _ => go!(f64, F64),
    }
    Ok(())
}

/// One SGD step in place: `p` (and the momentum buffer when `momentum` is non-zero) from
/// the gradient `g`.
pub fn sgd_step(
    p: &Tensor,
    g: &Tensor,
    momentum_buffer: Option<&Tensor>,
    h: &SgdStep,
) -> Result<()> {
    let mut all = vec![p, g];
    all.extend(momentum_buffer);
    check(&all)?;
    let gr = g.storage().read();
    let mut pw = p.storage().write();
    let mut bw = momentum_buffer.map(|t| t.storage().write());
    macro_rules! go {
        ($t:ty, $variant:ident) => {{
            let ps = &mut slices!(&mut pw, $variant)[span(p)];
            let gs = match &*gr {
                StorageData::Cpu(CpuData::$variant(v)) => &v[span(g)],
                #[allow(unreachable_patterns)]
                _ => return Err(Error::dtype(OP, "unexpected buffer".to_string())),
            };
            let bs = match (&mut bw, momentum_buffer) {
                (Some(w), Some(t)) if h.momentum != 0.0 => Some(&mut slices!(w, $variant)[span(t)]),
                _ => None,
            };
            let c = |v: f64| v as $t;
            let k = SgdConsts::<$t> {
                lr: c(h.lr),
                wd: c(h.weight_decay),
                momentum: c(h.momentum),
                // the composed form's factor on g when adding it to the buffer
                keep: c((1.0 - h.dampening) + h.dampening * if h.first { 1.0 } else { 0.0 }),
                dampened: h.dampening != 0.0,
                l2: h.weight_decay != 0.0,
                nesterov: h.nesterov,
            };
            match bs {
                Some(bs) => chunked4(ps, gs, bs, &mut [], &mut [], |p, g, b, _, _| {
                    sgd_chunk(p, g, Some(b), &k)
                }),
                None => chunked4(ps, gs, &mut [], &mut [], &mut [], |p, g, _, _, _| {
                    sgd_chunk(p, g, None, &k)
                }),
            }
        }};
    }
    match p.dtype() {
        crate::DType::F32 => go!(f32, F32),
        _ => go!(f64, F64),
    }
    Ok(())
}
