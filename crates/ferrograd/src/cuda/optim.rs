//! Fused optimizer steps on CUDA (`crate::optim`): one kernel updates the parameter and its
//! state buffers in place, with the CPU's arithmetic (`optim_step_<dtype>` in kernels.cu).

use super::launch::kernel_name;
use super::rt::driver::DeviceRepr;
use super::CudaData;
use crate::error::{Error, Result};
use crate::storage::StorageData;
use crate::tensor::Tensor;

/// `struct OptimArgs` of kernels.cu: the optimizer, its switches and its constants.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct OptimArgs {
    pub(crate) kind: i32,
    pub(crate) flags: i32,
    pub(crate) c: [f64; 10],
}
// SAFETY: `repr(C)` with the field layout of `struct OptimArgs` in kernels.cu.
unsafe impl DeviceRepr for OptimArgs {}

const OP: &str = "optimizer_step";

/// Runs the step on the parameter's device: `p` and the present `states` written, `g` read
/// (all contiguous, one dtype and shape, distinct buffers: `crate::optim::fusable`); with
/// `scalars` (the learning rate and the step count or first-step flag, float64 one-element
/// tensors on the device) the kernel reads those there.
pub(crate) fn step(
    p: &Tensor,
    g: &Tensor,
    states: [Option<&Tensor>; 3],
    args: &OptimArgs,
    scalars: Option<(&Tensor, Option<&Tensor>)>,
) -> Result<()> {
    let crate::Device::Cuda(ordinal) = p.device() else {
        return Err(Error::device(
            OP,
            "a CUDA step for a tensor on another device",
        ));
    };
    let gpu = super::gpu(OP, ordinal)?;
    let unexpected = || Error::device(OP, "a CPU buffer reached a CUDA kernel");
    let f = gpu.function(kernel_name!("optim_step", p.dtype()))?;
    let n = p.numel();
    let len = n as i64;
    let gr = g.storage().read();
    let StorageData::Cuda(gd) = &*gr else {
        return Err(unexpected());
    };
    let mut pw = p.storage().write(OP)?;
    let StorageData::Cuda(pd) = &mut *pw else {
        return Err(unexpected());
    };
    let mut sw = Vec::with_capacity(3);
    for t in states.iter().flatten() {
        sw.push((t.storage().write(OP)?, t.layout().offset() as i64));
    }
    let mut bufs: Vec<(&mut CudaData, i64)> = Vec::with_capacity(3);
    for (w, off) in sw.iter_mut() {
        match &mut **w {
            StorageData::Cuda(d) => bufs.push((d, *off)),
            _ => return Err(unexpected()),
        }
    }
    let (po, go) = (p.layout().offset() as i64, g.layout().offset() as i64);
    // the device scalars (read locks; absent ones are given the gradient's pointer)
    let lr_guard = scalars.map(|(lr, _)| (lr.storage().read(), lr.layout().offset() as i64));
    let aux_guard = scalars
        .and_then(|(_, aux)| aux)
        .map(|t| (t.storage().read(), t.layout().offset() as i64));
    fn scalar_buf<'a>(
        guard: &'a Option<(std::sync::RwLockReadGuard<'_, StorageData>, i64)>,
    ) -> Result<Option<(&'a CudaData, i64)>> {
        match guard {
            Some((d, off)) => match &**d {
                StorageData::Cuda(d) => Ok(Some((&**d, *off))),
                _ => Err(Error::device(OP, "a CPU buffer reached a CUDA kernel")),
            },
            None => Ok(None),
        }
    }
    let lr_buf = scalar_buf(&lr_guard)?;
    let aux_buf = scalar_buf(&aux_guard)?;
    let zero = 0i64;
    let mut launch = gpu.launch(&f, OP);
    launch.buf_mut(pd).arg(&po).buf(gd).arg(&go);
    // the present states in order; an absent one is given the gradient's pointer (the
    // kernel does not touch it: its switch is off)
    let mut present = bufs.iter_mut();
    for s in states {
        match s {
            Some(_) => {
                let (d, off) = present.next().expect("one buffer per present state");
                launch.buf_mut(d).arg(&*off);
            }
            None => {
                launch.buf(gd).arg(&zero);
            }
        }
    }
    for b in [&lr_buf, &aux_buf] {
        match b {
            Some((d, off)) => launch.buf(d).arg(off),
            None => launch.buf(gd).arg(&zero),
        };
    }
    launch.arg(&len).arg(args).grid(n)
}
