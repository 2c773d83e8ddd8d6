//! The op families. Each file holds, for its ops, the user-facing methods on [`Tensor`], the
//! forward (shape and dtype checks, then the device kernel), what the rule saves, and the rule.

pub(crate) mod conv;
pub(crate) mod elementwise;
mod inplace;
pub(crate) mod linalg;
pub(crate) mod movement;
pub(crate) mod reduce;

pub use conv::{avg_pool2d, conv2d, max_pool2d};
pub use elementwise::where_cond;
pub use movement::{concat, stack};
pub use reduce::cross_entropy;

use crate::error::{Error, Result};
use crate::storage::{CpuData, StorageData};
use crate::tensor::Tensor;

/// Runs `f` on the CPU buffers of `ts`, holding their read locks for the duration.
pub(crate) fn with_cpu<R>(ts: &[&Tensor], f: impl FnOnce(&[&CpuData]) -> Result<R>) -> Result<R> {
    let guards: smallvec::SmallVec<[_; 3]> = ts.iter().map(|t| t.storage().read()).collect();
    let datas: smallvec::SmallVec<[&CpuData; 3]> = guards
        .iter()
        .map(|g| match &**g {
            StorageData::Cpu(d) => d,
        })
        .collect();
    f(&datas)
}

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
