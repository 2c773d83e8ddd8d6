//! Indexing kernels: slicing's gradient, concat, gather and scatter-add along an axis.

use super::at;
use crate::error::{Error, Result};
use crate::layout::{contiguous_strides, for_each_run_multi, numel, Layout};
use crate::storage::{pool, CpuData};

macro_rules! same_dtype {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            CpuData::F32($v) => CpuData::F32($body),
            CpuData::F64($v) => CpuData::F64($body),
            CpuData::I64($v) => CpuData::I64($body),
            CpuData::Bool($v) => CpuData::Bool($body),
            CpuData::F16($v) => CpuData::F16($body),
            CpuData::BF16($v) => CpuData::BF16($body),
            CpuData::I32($v) => CpuData::I32($body),
            CpuData::I16($v) => CpuData::I16($body),
            CpuData::I8($v) => CpuData::I8($body),
            CpuData::U8($v) => CpuData::U8($body),
        }
    };
}

/// Visits every element of `idx` (viewed by `li`) with its position in row-major order and
/// the value it holds, checked against `size` (negative values count from the end).
fn for_each_index(
    op: &str,
    idx: &CpuData,
    li: &Layout,
    size: usize,
    target: (&[isize], isize),
    mut f: impl FnMut(usize, isize, usize),
) -> Result<()> {
    let CpuData::I64(iv) = idx else {
        return Err(Error::dtype(
            op,
            format!("indices must be int64, got {}", idx.dtype()),
        ));
    };
    // positions come in row-major order; an odometer over the index shape keeps the target's
    // offset (every axis but `axis`) without a division per element
    let shape = li.shape();
    let (tstrides, tbase) = target;
    let mut md = vec![0usize; shape.len()];
    let mut off = tbase;
    let mut p = 0usize;
    let contiguous = Layout::contiguous(shape);
    let mut bad = None;
    for_each_run_multi([li, &contiguous], |[bi, _], [si, _], n| {
        for k in 0..n {
            let v = iv[at(bi, si, k)];
            let j = if v < 0 { v + size as isize as i64 } else { v };
            if j < 0 || j as usize >= size {
                bad.get_or_insert(v);
            } else {
                f(p, off, j as usize);
            }
            p += 1;
            let mut d = shape.len();
            while d > 0 {
                d -= 1;
                md[d] += 1;
                off += tstrides[d];
                if md[d] < shape[d] {
                    break;
                }
                off -= tstrides[d] * shape[d] as isize;
                md[d] = 0;
            }
        }
    });
    match bad {
        Some(v) => Err(Error::index(
            op,
            format!("index {v} is out of range for an axis of size {size}"),
        )),
        None => Ok(()),
    }
}

/// Strides of every axis but `axis`, used to turn a position of the index tensor into a
/// position in another tensor of the same rank.
fn position_map(
    index_shape: &[usize],
    target: &Layout,
    axis: usize,
) -> (crate::layout::Strides, Vec<isize>) {
    let idx_strides = contiguous_strides(index_shape);
    let mut t = target.strides().to_vec();
    t[axis] = 0;
    (idx_strides, t)
}

/// `out[p] = x[p with axis replaced by idx[p]]` (numpy's `take_along_axis`).
pub(crate) fn gather(
    x: &CpuData,
    lx: &Layout,
    idx: &CpuData,
    li: &Layout,
    axis: usize,
) -> Result<CpuData> {
    let shape = li.shape().to_vec();
    let size = lx.shape()[axis];
    let (_, ts) = position_map(&shape, lx, axis);
    let sa = lx.strides()[axis];
    let mut positions = Vec::with_capacity(li.numel());
    for_each_index(
        "gather",
        idx,
        li,
        size,
        (&ts, lx.offset() as isize),
        |_, off, j| positions.push((off + j as isize * sa) as usize),
    )?;
    Ok(same_dtype!(x, v => positions.iter().map(|&p| v[p]).collect()))
}

/// Zeros of `out_shape`, then `out[p with axis replaced by idx[p]] += src[p]`.
pub(crate) fn scatter_add(
    src: &CpuData,
    ls: &Layout,
    idx: &CpuData,
    li: &Layout,
    axis: usize,
    out_shape: &[usize],
) -> Result<CpuData> {
    let shape = li.shape().to_vec();
    let lo = Layout::contiguous(out_shape);
    let (_, ts) = position_map(&shape, &lo, axis);
    let sa = lo.strides()[axis];
    let mut targets = vec![0usize; li.numel()];
    for_each_index(
        "scatter_add",
        idx,
        li,
        out_shape[axis],
        (&ts, 0),
        |p, off, j| targets[p] = (off + j as isize * sa) as usize,
    )?;
    macro_rules! go {
        ($v:expr, $zero:expr) => {{
            let vals = super::map1($v, ls, |a| a)?;
            let mut out = pool::filled(numel(out_shape), $zero)?;
            for (t, v) in targets.iter().zip(vals) {
                out[*t] += v;
            }
            out
        }};
    }
    Ok(match src {
        CpuData::F32(v) => CpuData::F32(go!(v, 0.0f32)),
        CpuData::F64(v) => CpuData::F64(go!(v, 0.0f64)),
        CpuData::I64(v) => CpuData::I64(go!(v, 0i64)),
        d => {
            return Err(Error::dtype(
                "scatter_add",
                format!("not defined for {} tensors", d.dtype()),
            ))
        }
    })
}
