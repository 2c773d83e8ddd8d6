//! The op families. Each file holds, for its ops, the user-facing methods on [`Tensor`], the
//! forward (shape and dtype checks, then the device kernel), what the rule saves, and the rule.

pub(crate) mod conv;
pub(crate) mod elementwise;
mod inplace;
pub(crate) mod linalg;
pub(crate) mod movement;
pub(crate) mod reduce;

pub use conv::{avg_pool2d, conv2d, conv2d_same, max_pool2d, AvgDivisor};
pub use elementwise::where_cond;
pub use movement::{concat, stack};
pub use reduce::cross_entropy;

use crate::device::Device;
use crate::error::{Error, Result};
use crate::storage::{CpuData, StorageData};
use crate::tensor::Tensor;

/// The device an op runs on: the first input not on the CPU (0-d CPU tensors, Python
/// scalars, mix with tensors on any device), else the CPU.
pub(crate) fn target_device(ts: &[&Tensor]) -> Device {
    ts.iter()
        .map(|t| t.device())
        .find(|d| *d != Device::Cpu)
        .unwrap_or(Device::Cpu)
}

/// Runs `f` on the CPU buffers of `ts`, holding their read locks for the duration. One and
/// two inputs (nearly every op) take their locks without building vectors.
pub(crate) fn with_cpu<R>(ts: &[&Tensor], f: impl FnOnce(&[&CpuData]) -> Result<R>) -> Result<R> {
    fn cpu(g: &StorageData) -> Result<&CpuData> {
        match g {
            StorageData::Cpu(d) => Ok(d),
            #[cfg(feature = "cuda")]
            StorageData::Cuda(_) => Err(Error::device(
                "kernel",
                "a CUDA tensor reached a CPU kernel",
            )),
        }
    }
    match ts {
        [a] => {
            let ga = a.storage().read();
            f(&[cpu(&ga)?])
        }
        [a, b] => {
            let (ga, gb) = (a.storage().read(), b.storage().read());
            f(&[cpu(&ga)?, cpu(&gb)?])
        }
        _ => {
            let guards: smallvec::SmallVec<[_; 3]> =
                ts.iter().map(|t| t.storage().read()).collect();
            let datas = guards
                .iter()
                .map(|g| cpu(g))
                .collect::<Result<smallvec::SmallVec<[&CpuData; 3]>>>()?;
            f(&datas)
        }
    }
}

/// Runs `f` on the device buffers of `ts`; 0-d CPU inputs are uploaded first.
#[cfg(feature = "cuda")]
pub(crate) fn with_cuda<R>(
    g: &crate::cuda::Gpu,
    ts: &[&Tensor],
    f: impl FnOnce(&[&crate::cuda::CudaData]) -> Result<R>,
) -> Result<R> {
    let guards: smallvec::SmallVec<[_; 3]> = ts.iter().map(|t| t.storage().read()).collect();
    let mut uploaded: smallvec::SmallVec<[Option<crate::cuda::CudaData>; 3]> =
        smallvec::SmallVec::new();
    for gd in &guards {
        uploaded.push(match &**gd {
            StorageData::Cpu(d) => Some(crate::cuda::upload(g, d)?),
            StorageData::Cuda(_) => None,
        });
    }
    let datas: smallvec::SmallVec<[&crate::cuda::CudaData; 3]> = guards
        .iter()
        .zip(&uploaded)
        .map(|(gd, up)| match (up, &**gd) {
            (Some(c), _) => c,
            (None, StorageData::Cuda(c)) => c,
            (None, StorageData::Cpu(_)) => unreachable!("CPU buffers were uploaded"),
        })
        .collect();
    f(&datas)
}

/// Runs the CPU or the CUDA form of a kernel on `ts` and wraps the result as a buffer on that
/// device: `kernel!(inputs, |d| cpu_expr, |g, c| cuda_expr)`, each giving a `Result`.
macro_rules! kernel {
    ($ts:expr, |$d:ident| $cpu:expr, |$g:ident, $c:ident| $cuda:expr) => {{
        let ts: &[&$crate::tensor::Tensor] = $ts;
        match $crate::ops::target_device(ts) {
            $crate::device::Device::Cpu => {
                $crate::ops::with_cpu(ts, |$d| Ok($crate::storage::Storage::cpu($cpu?)))
            }
            #[cfg(feature = "cuda")]
            dev @ $crate::device::Device::Cuda(i) => {
                let gpu = $crate::cuda::gpu("kernel", i)?;
                let $g: &$crate::cuda::Gpu = &gpu;
                $crate::ops::with_cuda($g, ts, |$c| {
                    Ok($crate::storage::Storage::new(
                        $crate::storage::StorageData::Cuda(Box::new($cuda?)),
                        dev,
                    ))
                })
            }
            #[cfg(not(feature = "cuda"))]
            dev => Err(dev.unavailable("kernel")),
        }
    }};
}
pub(crate) use kernel;

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
