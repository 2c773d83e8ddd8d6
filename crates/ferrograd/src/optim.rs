//! Optimizer updates as one pass over each parameter: the parameter and its state tensors are
//! updated in place together, element by element, with the same arithmetic, in the same
//! order, as the composed tensor-op form (so the two agree to the last bit in float64).
//!
//! The gradient is used as given (to maximize, pass it negated). float32 and float64
//! contiguous tensors on one device (the CPU, or one CUDA device: one kernel there) that
//! share no memory; anything else is the caller's to do with tensor ops (the Python
//! optimizers fall back to them, and use them inside `fg.trace`, where the graph fuses the
//! chain itself).

use crate::cpu::float::Float;
use crate::cpu::fused::FusedFloat;
use crate::cpu::optim::{
    adadelta_chunk, adagrad_chunk, adam_chunk, chunked4, rmsprop_chunk, sgd_chunk, AdadeltaConsts,
    AdagradConsts, AdamConsts, RmspropConsts, SgdConsts,
};
use crate::error::{Error, Result};
use crate::storage::StorageData;
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

/// Whether the fused steps ([`adam_step`], [`sgd_step`], [`rmsprop_step`], [`adagrad_step`],
/// [`adadelta_step`]) can take these tensors (else use tensor ops).
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
            && on_fused_device(t.device())
            && t.device() == first.device()
            && t.dtype() == first.dtype()
            && matches!(t.dtype(), crate::DType::F32 | crate::DType::F64)
            && t.shape() == first.shape()
            && t.layout().is_contiguous()
            && !crate::graph::is_tracing()
    })
}

/// Devices with a fused update: the CPU, and CUDA devices in builds with CUDA.
fn on_fused_device(d: Device) -> bool {
    d == Device::Cpu || cfg!(feature = "cuda")
}

fn check(tensors: &[&Tensor]) -> Result<()> {
    if fusable(tensors) {
        Ok(())
    } else {
        Err(Error::invalid(
            OP,
            "needs contiguous float32/float64 tensors of one shape, dtype and device, sharing \
             no memory, outside fg.trace"
                .to_string(),
        ))
    }
}

/// RMSprop's hyperparameters for one step (PyTorch's formulas).
#[derive(Clone, Copy, Debug)]
pub struct RmspropStep {
    pub lr: f64,
    pub alpha: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// With a momentum buffer when non-zero.
    pub momentum: f64,
    /// Divide by the centred second moment (a running mean of the gradient is kept).
    pub centered: bool,
}

/// Adagrad's hyperparameters for one step.
#[derive(Clone, Copy, Debug)]
pub struct AdagradStep {
    /// The step's learning rate, decay applied: `lr / (1 + (t - 1) * lr_decay)`.
    pub lr: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

/// Adadelta's hyperparameters for one step.
#[derive(Clone, Copy, Debug)]
pub struct AdadeltaStep {
    pub lr: f64,
    pub rho: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

/// The elements of a contiguous tensor inside its locked buffer.
fn span(t: &Tensor) -> std::ops::Range<usize> {
    let o = t.layout().offset();
    o..o + t.numel()
}

/// One optimizer's element loop over pieces of the parameter, its gradient and up to three
/// state buffers (an absent state is an empty slice).
trait Update: Sync {
    fn run<T: Float>(&self, p: &mut [T], g: &[T], s: [&mut [T]; 3]);
    /// The CUDA kernel's arguments for this step, given which states are present.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    fn gpu(&self, present: [bool; 3]) -> GpuStep;
}

/// What the CUDA kernel is told of a step (`struct OptimArgs` in kernels.cu): the optimizer,
/// its switches and up to ten constants, computed in float64 as on the CPU.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
struct GpuStep {
    kind: i32,
    flags: i32,
    c: [f64; 10],
}

/// A step's constants in the kernel's ten slots (the rest zero).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn consts(v: &[f64]) -> [f64; 10] {
    let mut c = [0.0; 10];
    c[..v.len()].copy_from_slice(v);
    c
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
mod gpu_flag {
    pub(super) const ADAM: i32 = 0;
    pub(super) const SGD: i32 = 1;
    pub(super) const RMSPROP: i32 = 2;
    pub(super) const ADAGRAD: i32 = 3;
    pub(super) const ADADELTA: i32 = 4;
    pub(super) const L2: i32 = 1;
    pub(super) const DECOUPLED: i32 = 2;
    pub(super) const AMSGRAD: i32 = 4;
    pub(super) const DAMPENED: i32 = 8;
    pub(super) const NESTEROV: i32 = 16;
    pub(super) const BUFFER: i32 = 32;
    pub(super) const CENTERED: i32 = 64;
    pub(super) const DEVICE: i32 = 128;
}

/// The step's learning rate, and its step count (Adam, Adagrad) or first-step flag (SGD with
/// momentum: 1 before the buffer's first write, else 0), as float64 one-element tensors on
/// the parameter's CUDA device, read there by the kernel: a step that needs no value from
/// the device on the host, so it queues without waiting. The step struct's fields that derive
/// from them (`lr`, Adam's bias corrections, SGD's `first`) are then not read; the
/// derived values are computed from these in float64 with the composed form's operations.
#[derive(Clone, Copy, Debug)]
pub struct DeviceScalars<'a> {
    pub lr: &'a Tensor,
    pub aux: Option<&'a Tensor>,
    /// Adagrad's learning-rate decay (the step's rate is `lr / (1 + (t - 1) * lr_decay)`).
    pub lr_decay: f64,
}

/// One optimizer's hyperparameters for a step, for [`step`].
#[derive(Clone, Copy, Debug)]
pub enum Hyper {
    Sgd(SgdStep),
    Adam(AdamStep),
    Rmsprop(RmspropStep),
    Adagrad(AdagradStep),
    Adadelta(AdadeltaStep),
}

/// One fused step of any of the optimizers: `states` in the order its step function takes
/// them (SGD: the momentum buffer; Adam: exp_avg, exp_avg_sq, max_exp_avg_sq; RMSprop:
/// square_avg, momentum_buffer, grad_avg; Adagrad: sum; Adadelta: square_avg, acc_delta),
/// `None` where a state is not kept. With `scalars` (a CUDA parameter only) the learning rate
/// and step count are read on the device ([`DeviceScalars`]).
pub fn step(
    h: &Hyper,
    p: &Tensor,
    g: &Tensor,
    states: [Option<&Tensor>; 3],
    scalars: Option<&DeviceScalars<'_>>,
) -> Result<()> {
    let missing = |what: &str| Error::invalid(OP, format!("this step needs {what}"));
    let no_aux = scalars.is_some_and(|s| s.aux.is_none());
    match h {
        Hyper::Sgd(h) => {
            let b = states[0].filter(|_| h.momentum != 0.0);
            if b.is_some() && no_aux {
                return Err(missing("SGD's first-step flag as `aux`"));
            }
            fused_with(p, g, [b, None, None], h, scalars)
        }
        Hyper::Adam(h) => {
            if states[0].is_none() || states[1].is_none() {
                return Err(missing("exp_avg and exp_avg_sq"));
            }
            if no_aux {
                return Err(missing("the step count as `aux`"));
            }
            fused_with(p, g, states, h, scalars)
        }
        Hyper::Rmsprop(h) => {
            let buf = states[1].filter(|_| h.momentum != 0.0);
            let ga = states[2].filter(|_| h.centered);
            if states[0].is_none() {
                return Err(missing("square_avg"));
            }
            if (h.momentum != 0.0 && buf.is_none()) || (h.centered && ga.is_none()) {
                return Err(Error::invalid(
                    OP,
                    "RMSprop with momentum needs momentum_buffer, centred RMSprop needs grad_avg"
                        .to_string(),
                ));
            }
            fused_with(p, g, [states[0], buf, ga], h, scalars)
        }
        Hyper::Adagrad(h) => {
            if states[0].is_none() {
                return Err(missing("sum"));
            }
            if no_aux {
                return Err(missing("the step count as `aux`"));
            }
            fused_with(p, g, [states[0], None, None], h, scalars)
        }
        Hyper::Adadelta(h) => {
            if states[0].is_none() || states[1].is_none() {
                return Err(missing("square_avg and acc_delta"));
            }
            fused_with(p, g, [states[0], states[1], None], h, scalars)
        }
    }
}

/// `flag` when `on`.
fn flag(on: bool, flag: i32) -> i32 {
    if on {
        flag
    } else {
        0
    }
}

/// Locks the parameter, the gradient and the states, and runs `u` over them: in parallel
/// pieces on the CPU, in the parameter's dtype; as one kernel on CUDA (reading the learning
/// rate and step count there when `scalars` is given).
fn fused_with(
    p: &Tensor,
    g: &Tensor,
    states: [Option<&Tensor>; 3],
    u: &impl Update,
    scalars: Option<&DeviceScalars<'_>>,
) -> Result<()> {
    let mut all = vec![p, g];
    all.extend(states.iter().flatten());
    check(&all)?;
    if let Some(sc) = scalars {
        let ok = |t: &Tensor| {
            t.device() == p.device() && t.dtype() == crate::DType::F64 && t.numel() == 1
        };
        if p.device() == Device::Cpu || !ok(sc.lr) || !sc.aux.map_or(true, ok) {
            return Err(Error::invalid(
                OP,
                "device scalars are float64 one-element tensors on the parameter's CUDA device"
                    .to_string(),
            ));
        }
    }
    #[cfg(feature = "cuda")]
    if let Device::Cuda(_) = p.device() {
        let s = u.gpu(states.map(|s| s.is_some()));
        let (mut c, mut flags) = (s.c, s.flags);
        if let Some(sc) = scalars {
            flags |= gpu_flag::DEVICE;
            c[9] = sc.lr_decay;
        }
        let args = crate::cuda::optim::OptimArgs {
            kind: s.kind,
            flags,
            c,
        };
        return crate::cuda::optim::step(p, g, states, &args, scalars.map(|s| (s.lr, s.aux)));
    }
    fn go<T: FusedFloat>(
        p: &Tensor,
        g: &Tensor,
        states: [Option<&Tensor>; 3],
        u: &impl Update,
    ) -> Result<()> {
        let unexpected = || Error::dtype(OP, "unexpected buffer".to_string());
        fn cpu<T: FusedFloat>(d: &mut StorageData) -> Option<&mut [T]> {
            match d {
                StorageData::Cpu(c) => T::slice_mut(c),
                #[allow(unreachable_patterns)]
                _ => None,
            }
        }
        let gr = g.storage().read();
        let gs = match &*gr {
            StorageData::Cpu(c) => T::slice(c),
            #[allow(unreachable_patterns)]
            _ => None,
        };
        let gs = &gs.ok_or_else(unexpected)?[span(g)];
        let mut pw = p.storage().write(OP)?;
        let ps = &mut cpu::<T>(&mut pw).ok_or_else(unexpected)?[span(p)];
        let mut sw = [None, None, None];
        for (w, t) in sw.iter_mut().zip(states) {
            if let Some(t) = t {
                *w = Some((t.storage().write(OP)?, t));
            }
        }
        let [m, v, x] = sw.each_mut().map(|w| match w {
            Some((w, t)) => cpu::<T>(w).map(|s| &mut s[span(t)]),
            None => Some(&mut [][..]),
        });
        let (m, v, x) = (
            m.ok_or_else(unexpected)?,
            v.ok_or_else(unexpected)?,
            x.ok_or_else(unexpected)?,
        );
        chunked4(ps, gs, m, v, x, |p, g, m, v, x| u.run(p, g, [m, v, x]));
        Ok(())
    }
    match p.dtype() {
        crate::DType::F32 => go::<f32>(p, g, states, u),
        _ => go::<f64>(p, g, states, u),
    }
}

impl Update for AdamStep {
    fn run<T: Float>(&self, p: &mut [T], g: &[T], [m, v, x]: [&mut [T]; 3]) {
        let c = T::from_f64;
        let k = AdamConsts::<T> {
            b1: c(self.beta1),
            b2: c(self.beta2),
            one_b1: c(1.0 - self.beta1),
            one_b2: c(1.0 - self.beta2),
            wd: c(self.weight_decay),
            decay: c(1.0 - self.lr * self.weight_decay),
            bc2: c(self.bias_correction2_sqrt),
            eps: c(self.eps),
            step: c(self.lr / self.bias_correction1),
            l2: self.weight_decay != 0.0 && !self.decoupled,
            decoupled: self.weight_decay != 0.0 && self.decoupled,
        };
        adam_chunk(p, g, m, v, (!x.is_empty()).then_some(x), &k)
    }
    fn gpu(&self, [_, _, amsgrad]: [bool; 3]) -> GpuStep {
        use gpu_flag::*;
        GpuStep {
            kind: ADAM,
            flags: flag(self.weight_decay != 0.0 && !self.decoupled, L2)
                | flag(self.weight_decay != 0.0 && self.decoupled, DECOUPLED)
                | flag(amsgrad, AMSGRAD),
            c: consts(&[
                self.beta1,
                self.beta2,
                1.0 - self.beta1,
                1.0 - self.beta2,
                self.weight_decay,
                1.0 - self.lr * self.weight_decay,
                self.bias_correction2_sqrt,
                self.eps,
                self.lr / self.bias_correction1,
            ]),
        }
    }
}

impl Update for SgdStep {
    fn run<T: Float>(&self, p: &mut [T], g: &[T], [b, _, _]: [&mut [T]; 3]) {
        let c = T::from_f64;
        let k = SgdConsts::<T> {
            lr: c(self.lr),
            wd: c(self.weight_decay),
            momentum: c(self.momentum),
            // the composed form's factor on g when adding it to the buffer
            keep: c((1.0 - self.dampening) + self.dampening * if self.first { 1.0 } else { 0.0 }),
            dampened: self.dampening != 0.0,
            l2: self.weight_decay != 0.0,
            nesterov: self.nesterov,
        };
        let b = (self.momentum != 0.0 && !b.is_empty()).then_some(b);
        sgd_chunk(p, g, b, &k)
    }
    fn gpu(&self, [buffer, _, _]: [bool; 3]) -> GpuStep {
        use gpu_flag::*;
        GpuStep {
            kind: SGD,
            flags: flag(self.weight_decay != 0.0, L2)
                | flag(self.dampening != 0.0, DAMPENED)
                | flag(self.nesterov, NESTEROV)
                | flag(self.momentum != 0.0 && buffer, BUFFER),
            c: consts(&[
                self.lr,
                self.weight_decay,
                self.momentum,
                (1.0 - self.dampening) + self.dampening * if self.first { 1.0 } else { 0.0 },
                self.dampening,
                1.0 - self.dampening,
            ]),
        }
    }
}

impl Update for RmspropStep {
    fn run<T: Float>(&self, p: &mut [T], g: &[T], [sq, buf, ga]: [&mut [T]; 3]) {
        let c = T::from_f64;
        let k = RmspropConsts::<T> {
            lr: c(self.lr),
            alpha: c(self.alpha),
            one_alpha: c(1.0 - self.alpha),
            eps: c(self.eps),
            wd: c(self.weight_decay),
            momentum: c(self.momentum),
            l2: self.weight_decay != 0.0,
        };
        let buf = (self.momentum != 0.0).then_some(buf);
        let ga = self.centered.then_some(ga);
        rmsprop_chunk(p, g, sq, buf, ga, &k)
    }
    fn gpu(&self, _: [bool; 3]) -> GpuStep {
        use gpu_flag::*;
        GpuStep {
            kind: RMSPROP,
            flags: flag(self.weight_decay != 0.0, L2)
                | flag(self.momentum != 0.0, BUFFER)
                | flag(self.centered, CENTERED),
            c: consts(&[
                self.lr,
                self.alpha,
                1.0 - self.alpha,
                self.eps,
                self.weight_decay,
                self.momentum,
            ]),
        }
    }
}

impl Update for AdagradStep {
    fn run<T: Float>(&self, p: &mut [T], g: &[T], [sum, _, _]: [&mut [T]; 3]) {
        let c = T::from_f64;
        let k = AdagradConsts::<T> {
            lr: c(self.lr),
            eps: c(self.eps),
            wd: c(self.weight_decay),
            l2: self.weight_decay != 0.0,
        };
        adagrad_chunk(p, g, sum, &k)
    }
    fn gpu(&self, _: [bool; 3]) -> GpuStep {
        GpuStep {
            kind: gpu_flag::ADAGRAD,
            flags: flag(self.weight_decay != 0.0, gpu_flag::L2),
            c: consts(&[self.lr, self.eps, self.weight_decay]),
        }
    }
}

impl Update for AdadeltaStep {
    fn run<T: Float>(&self, p: &mut [T], g: &[T], [sq, acc, _]: [&mut [T]; 3]) {
        let c = T::from_f64;
        let k = AdadeltaConsts::<T> {
            lr: c(self.lr),
            rho: c(self.rho),
            one_rho: c(1.0 - self.rho),
            eps: c(self.eps),
            wd: c(self.weight_decay),
            l2: self.weight_decay != 0.0,
        };
        adadelta_chunk(p, g, sq, acc, &k)
    }
    fn gpu(&self, _: [bool; 3]) -> GpuStep {
        GpuStep {
            kind: gpu_flag::ADADELTA,
            flags: flag(self.weight_decay != 0.0, gpu_flag::L2),
            c: consts(&[
                self.lr,
                self.rho,
                1.0 - self.rho,
                self.eps,
                self.weight_decay,
            ]),
        }
    }
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
    let states = [Some(exp_avg), Some(exp_avg_sq), max_exp_avg_sq];
    step(&Hyper::Adam(*h), p, g, states, None)
}

/// One SGD step in place: `p` (and the momentum buffer when `momentum` is non-zero) from
/// the gradient `g`.
pub fn sgd_step(
    p: &Tensor,
    g: &Tensor,
    momentum_buffer: Option<&Tensor>,
    h: &SgdStep,
) -> Result<()> {
    step(&Hyper::Sgd(*h), p, g, [momentum_buffer, None, None], None)
}

/// One RMSprop step in place: `p`, `square_avg`, the momentum buffer (needed when
/// `momentum` is non-zero) and the gradient's running mean (needed when `centered`).
pub fn rmsprop_step(
    p: &Tensor,
    g: &Tensor,
    square_avg: &Tensor,
    momentum_buffer: Option<&Tensor>,
    grad_avg: Option<&Tensor>,
    h: &RmspropStep,
) -> Result<()> {
    let states = [Some(square_avg), momentum_buffer, grad_avg];
    step(&Hyper::Rmsprop(*h), p, g, states, None)
}

/// One Adagrad step in place: `p` and the running sum of squared gradients.
pub fn adagrad_step(p: &Tensor, g: &Tensor, sum: &Tensor, h: &AdagradStep) -> Result<()> {
    step(&Hyper::Adagrad(*h), p, g, [Some(sum), None, None], None)
}

/// One Adadelta step in place: `p`, `square_avg` and `acc_delta`.
pub fn adadelta_step(
    p: &Tensor,
    g: &Tensor,
    square_avg: &Tensor,
    acc_delta: &Tensor,
    h: &AdadeltaStep,
) -> Result<()> {
    step(
        &Hyper::Adadelta(*h),
        p,
        g,
        [Some(square_avg), Some(acc_delta), None],
        None,
    )
}
