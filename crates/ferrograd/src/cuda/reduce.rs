//! Reductions and softmax: one block per row of a contiguous buffer, the reduced axes moved
//! last first (read in place when the view is laid out that way already).

use super::elementwise::binary;
use super::launch::not_for;
use super::memory::{cast, fill};
use super::{CudaData, Gpu};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::op::{BinaryOp, ReduceKind};

/// The buffer itself when `l` reads it from its start in row-major order, else a copy.
pub(crate) fn rows_of<'a>(
    g: &Gpu,
    x: &'a CudaData,
    l: &Layout,
    copy: &'a mut Option<CudaData>,
) -> Result<&'a CudaData> {
    if l.offset() == 0 && l.is_contiguous() {
        return Ok(x);
    }
    Ok(copy.insert(cast(g, x, l, x.dtype())?))
}

/// Reduces `axes`; the result is contiguous in the keep-dims shape.
pub(crate) fn reduce(
    g: &Gpu,
    kind: ReduceKind,
    x: &CudaData,
    l: &Layout,
    axes: &[usize],
) -> Result<CudaData> {
    let dt = x.dtype();
    let name = match (kind, dt) {
        (ReduceKind::Sum | ReduceKind::Mean, DType::F32) => "reduce_sum_f32",
        (ReduceKind::Sum | ReduceKind::Mean, DType::F64) => "reduce_sum_f64",
        (ReduceKind::Sum, DType::I64) => "reduce_sum_i64",
        (ReduceKind::Max, DType::F32) => "reduce_max_f32",
        (ReduceKind::Max, DType::F64) => "reduce_max_f64",
        (ReduceKind::Max, DType::I64) => "reduce_max_i64",
        (ReduceKind::Min, DType::F32) => "reduce_min_f32",
        (ReduceKind::Min, DType::F64) => "reduce_min_f64",
        (ReduceKind::Min, DType::I64) => "reduce_min_i64",
        _ => return Err(not_for(kind.name(), dt)),
    };
    let nd = l.ndim();
    let mut perm: Vec<usize> = (0..nd).filter(|d| !axes.contains(d)).collect();
    perm.extend_from_slice(axes);
    let moved = l.permute(&perm);
    let cols: usize = axes.iter().map(|&a| l.shape()[a]).product();
    // (not numel / cols: an empty reduced axis leaves every kept element)
    let rows: usize = perm[..nd - axes.len()]
        .iter()
        .map(|&d| l.shape()[d])
        .product();
    if cols == 0 && matches!(kind, ReduceKind::Max | ReduceKind::Min) {
        return Err(Error::shape(
            kind.name(),
            format!("cannot reduce over an empty axis (shape {:?})", l.shape()),
        ));
    }
    let mut copy = None;
    let input = rows_of(g, x, &moved, &mut copy)?;
    let (r, c) = (rows as i64, cols as i64);
    let f = g.function(name)?;
    let mut out = g.alloc(dt, rows)?;
    g.launch(&f, kind.name())
        .buf(input)
        .buf_mut(&mut out)
        .arg(&r)
        .arg(&c)
        .rows(rows)?;
    if kind == ReduceKind::Mean {
        // (an empty axis: 0 / 0, NaN, as on the CPU and in numpy)
        let scale = fill(g, 1, 1.0 / cols as f64, dt)?;
        let shape = [rows];
        let ls = Layout::contiguous(&[]).broadcast_to(&shape);
        return binary(
            g,
            BinaryOp::Mul,
            &out,
            &Layout::contiguous(&shape),
            &scale,
            &ls,
        );
    }
    Ok(out)
}

/// Softmax or log-softmax along `axis`; the result is contiguous in the input's shape.
pub(crate) fn softmax(
    g: &Gpu,
    x: &CudaData,
    l: &Layout,
    axis: usize,
    log: bool,
) -> Result<CudaData> {
    let dt = x.dtype();
    let op = if log { "log_softmax" } else { "softmax" };
    let name = match (log, dt) {
        (false, DType::F32) => "softmax_rows_f32",
        (false, DType::F64) => "softmax_rows_f64",
        (true, DType::F32) => "log_softmax_rows_f32",
        (true, DType::F64) => "log_softmax_rows_f64",
        _ => return Err(not_for(op, dt)),
    };
    let nd = l.ndim();
    let mut perm: Vec<usize> = (0..nd).filter(|&d| d != axis).collect();
    perm.push(axis);
    let moved = l.permute(&perm);
    let mut copy = None;
    let input = rows_of(g, x, &moved, &mut copy)?;
    let cols = l.shape()[axis];
    let rows = l.numel() / cols.max(1);
    let (r, c) = (rows as i64, cols as i64);
    let f = g.function(name)?;
    let mut out = g.alloc(dt, l.numel())?;
    g.launch(&f, op)
        .buf(input)
        .buf_mut(&mut out)
        .arg(&r)
        .arg(&c)
        .rows(rows)?;
    if axis == nd - 1 {
        return Ok(out);
    }
    // back to the input's axis order
    let moved_shape: Vec<usize> = perm.iter().map(|&p| l.shape()[p]).collect();
    let mut inv = vec![0usize; nd];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    let back = Layout::contiguous(&moved_shape).permute(&inv);
    cast(g, &out, &back, dt)
}
