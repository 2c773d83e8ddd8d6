//! Fused layer norm and softmax cross-entropy: one block per row of a contiguous buffer, so
//! neither the normalised rows nor the probabilities are stored between forward and
//! backward (the statistics are recomputed from the input, as on the CPU).

use super::launch::not_for;
use super::reduce::{reduce, rows_of as packed};
use super::{CudaData, Gpu};
use crate::dtype::DType;
use crate::error::Result;
use crate::layout::Layout;
use crate::op::ReduceKind;

fn kernel(op: &'static str, base: &str, dt: DType) -> Result<&'static str> {
    Ok(match (base, dt) {
        ("layer_norm_rows", DType::F32) => "layer_norm_rows_f32",
        ("layer_norm_rows", DType::F64) => "layer_norm_rows_f64",
        ("layer_norm_grad_rows", DType::F32) => "layer_norm_grad_rows_f32",
        ("layer_norm_grad_rows", DType::F64) => "layer_norm_grad_rows_f64",
        ("layer_norm_wgrad_part", DType::F32) => "layer_norm_wgrad_part_f32",
        ("layer_norm_wgrad_part", DType::F64) => "layer_norm_wgrad_part_f64",
        ("layer_norm_wgrad_sum", DType::F32) => "layer_norm_wgrad_sum_f32",
        ("layer_norm_wgrad_sum", DType::F64) => "layer_norm_wgrad_sum_f64",
        ("xent_rows", DType::F32) => "xent_rows_f32",
        ("xent_rows", DType::F64) => "xent_rows_f64",
        ("xent_grad_rows", DType::F32) => "xent_grad_rows_f32",
        ("xent_grad_rows", DType::F64) => "xent_grad_rows_f64",
        _ => return Err(not_for(op, dt)),
    })
}

fn rows_cols(l: &Layout) -> (usize, usize) {
    let cols = l.shape().last().copied().unwrap_or(1);
    (l.numel() / cols.max(1), cols)
}

/// Rows along the last axis normalised, then `* w + b` when `wb` is given; contiguous.
pub(crate) fn layer_norm(
    g: &Gpu,
    x: &CudaData,
    l: &Layout,
    wb: Option<(&CudaData, &Layout, &CudaData, &Layout)>,
    eps: f64,
) -> Result<CudaData> {
    const OP: &str = "layer_norm";
    let dt = x.dtype();
    let f = g.function(kernel(OP, "layer_norm_rows", dt)?)?;
    let (rows, cols) = rows_cols(l);
    let (mut cx, mut cw, mut cb) = (None, None, None);
    let xs = packed(g, x, l, &mut cx)?;
    let (w, b, affine) = match wb {
        Some((w, lw, b, lb)) => (packed(g, w, lw, &mut cw)?, packed(g, b, lb, &mut cb)?, 1i32),
        None => (xs, xs, 0i32),
    };
    let mut out = g.alloc(dt, l.numel())?;
    let (r, c) = (rows as i64, cols as i64);
    g.launch(&f, OP)
        .buf(xs)
        .buf(w)
        .buf(b)
        .buf_mut(&mut out)
        .arg(&r)
        .arg(&c)
        .arg(&eps)
        .arg(&affine)
        .rows(rows)?;
    Ok(out)
}

/// Layer norm's gradients: the input's, then with a weight the weight's and the bias's, in
/// one flat buffer.
pub(crate) fn layer_norm_grad(
    g: &Gpu,
    x: &CudaData,
    lx: &Layout,
    w: Option<(&CudaData, &Layout)>,
    dy: &CudaData,
    ldy: &Layout,
    eps: f64,
) -> Result<CudaData> {
    const OP: &str = "layer_norm_grad";
    let dt = x.dtype();
    let f = g.function(kernel(OP, "layer_norm_grad_rows", dt)?)?;
    let (rows, cols) = rows_cols(lx);
    let n = lx.numel();
    let (mut cx, mut cw, mut cdy) = (None, None, None);
    let xs = packed(g, x, lx, &mut cx)?;
    let dys = packed(g, dy, ldy, &mut cdy)?;
    let (ws, affine) = match w {
        Some((w, lw)) => (packed(g, w, lw, &mut cw)?, 1i32),
        None => (xs, 0i32),
    };
    let len = if affine == 1 { n + 2 * cols } else { n };
    // no rows: the weight and bias gradients are sums of nothing
    let mut out = if rows == 0 {
        g.zeros(dt, len)?
    } else {
        g.alloc(dt, len)?
    };
    let mut stats = g.alloc(dt, if affine == 1 { 2 * rows.max(1) } else { 1 })?;
    let (r, c) = (rows as i64, cols as i64);
    g.launch(&f, OP)
        .buf(xs)
        .buf(ws)
        .buf(dys)
        .buf_mut(&mut out)
        .buf_mut(&mut stats)
        .arg(&r)
        .arg(&c)
        .arg(&eps)
        .arg(&affine)
        .rows(rows)?;
    if affine == 1 && rows > 0 {
        // chunks of at least 32 rows, at most 512 chunks: enough blocks to fill the device,
        // a partial buffer of at most 1024 rows
        let chunk = rows.div_ceil(512).max(32);
        let chunks = rows.div_ceil(chunk);
        let mut part = g.alloc(dt, chunks * 2 * cols)?;
        let fp = g.function(kernel(OP, "layer_norm_wgrad_part", dt)?)?;
        let (ch, nch, at) = (chunk as i64, chunks as i64, n as i64);
        g.launch(&fp, OP)
            .buf(xs)
            .buf(dys)
            .buf(&stats)
            .buf_mut(&mut part)
            .arg(&r)
            .arg(&c)
            .arg(&ch)
            .grid(chunks * cols.div_ceil(256) * 256)?;
        let fs = g.function(kernel(OP, "layer_norm_wgrad_sum", dt)?)?;
        g.launch(&fs, OP)
            .buf(&part)
            .buf_mut(&mut out)
            .arg(&nch)
            .arg(&c)
            .arg(&at)
            .grid(2 * cols)?;
    }
    Ok(out)
}

/// Mean cross-entropy of `[n, c]` logits against `[n]` int64 labels (in range); one value.
pub(crate) fn softmax_xent(
    g: &Gpu,
    x: &CudaData,
    lx: &Layout,
    labels: &CudaData,
    ll: &Layout,
) -> Result<CudaData> {
    const OP: &str = "softmax_cross_entropy";
    let dt = x.dtype();
    let f = g.function(kernel(OP, "xent_rows", dt)?)?;
    let (rows, cols) = (lx.shape()[0], lx.shape()[1]);
    let (mut cx, mut cl) = (None, None);
    let xs = packed(g, x, lx, &mut cx)?;
    let ls = packed(g, labels, ll, &mut cl)?;
    let mut loss = g.alloc(dt, rows)?;
    let (r, c) = (rows as i64, cols as i64);
    g.launch(&f, OP)
        .buf(xs)
        .buf(ls)
        .buf_mut(&mut loss)
        .arg(&r)
        .arg(&c)
        .rows(rows)?;
    reduce(
        g,
        ReduceKind::Mean,
        &loss,
        &Layout::contiguous(&[rows]),
        &[0],
    )
}

/// The logits gradient of [`softmax_xent`], `(softmax - onehot) * dy / n`.
pub(crate) fn softmax_xent_grad(
    g: &Gpu,
    x: &CudaData,
    lx: &Layout,
    labels: &CudaData,
    ll: &Layout,
    dy: &CudaData,
    ldy: &Layout,
) -> Result<CudaData> {
    const OP: &str = "softmax_cross_entropy_grad";
    let dt = x.dtype();
    let f = g.function(kernel(OP, "xent_grad_rows", dt)?)?;
    let (rows, cols) = (lx.shape()[0], lx.shape()[1]);
    let (mut cx, mut cl) = (None, None);
    let xs = packed(g, x, lx, &mut cx)?;
    let ls = packed(g, labels, ll, &mut cl)?;
    let mut out = g.alloc(dt, rows * cols)?;
    let (r, c, at) = (rows as i64, cols as i64, ldy.offset() as i64);
    g.launch(&f, OP)
        .buf(xs)
        .buf(ls)
        .buf(dy)
        .arg(&at)
        .buf_mut(&mut out)
        .arg(&r)
        .arg(&c)
        .rows(rows)?;
    Ok(out)
}
