//! Indexing kernels: slicing's gradient, setitem, concat, gather and scatter-add.

use super::launch::{kernel_name, not_for, strided, strided_full};
use super::{CudaData, Gpu};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::{numel, Layout};

fn check_indices(op: &str, idx: &CudaData) -> Result<()> {
    if idx.dtype() != DType::I64 {
        return Err(Error::dtype(
            op,
            format!("indices must be int64, got {}", idx.dtype()),
        ));
    }
    Ok(())
}

pub(crate) fn gather(
    g: &Gpu,
    x: &CudaData,
    lx: &Layout,
    idx: &CudaData,
    li: &Layout,
    axis: usize,
) -> Result<CudaData> {
    check_indices("gather", idx)?;
    let n = li.numel();
    let (sx, si_full, si) = (
        strided_full("gather", lx)?,
        strided_full("gather", li)?,
        strided("gather", li)?,
    );
    let (ax, size, len) = (axis as i32, lx.shape()[axis] as i64, n as i64);
    let f = g.function(kernel_name!("gather", x.dtype()))?;
    let mut out = g.alloc(x.dtype(), n)?;
    g.launch(&f, "gather")
        .buf(x)
        .arg(&sx)
        .buf(idx)
        .arg(&si_full)
        .arg(&si)
        .arg(&ax)
        .arg(&size)
        .buf_mut(&mut out)
        .arg(&len)
        .grid(n)?;
    Ok(out)
}

pub(crate) fn scatter_add(
    g: &Gpu,
    src: &CudaData,
    ls: &Layout,
    idx: &CudaData,
    li: &Layout,
    axis: usize,
    out_shape: &[usize],
) -> Result<CudaData> {
    check_indices("scatter_add", idx)?;
    if src.dtype() == DType::Bool {
        return Err(not_for("scatter_add", src.dtype()));
    }
    let n = li.numel();
    let lo = Layout::contiguous(out_shape);
    let (ss, si_full, si, so) = (
        strided("scatter_add", ls)?,
        strided_full("scatter_add", li)?,
        strided("scatter_add", li)?,
        strided_full("scatter_add", &lo)?,
    );
    let (ax, size, len) = (axis as i32, out_shape[axis] as i64, n as i64);
    let f = g.function(kernel_name!("scatter_add", src.dtype()))?;
    let mut out = g.zeros(src.dtype(), numel(out_shape))?;
    g.launch(&f, "scatter_add")
        .buf(src)
        .arg(&ss)
        .buf(idx)
        .arg(&si_full)
        .arg(&si)
        .arg(&ax)
        .arg(&size)
        .buf_mut(&mut out)
        .arg(&so)
        .arg(&len)
        .grid(n)?;
    Ok(out)
}
