//! Layer norm along the last axis: one pass forward (statistics and affine part), one pass
//! backward (input, weight and bias gradients together).
//!
//! The row loops are written so they vectorise (eight running sums, plain map loops) and are
//! compiled a second time for AVX2 and FMA, picked at run time as the elementwise loops are.
//! Weight and bias gradients are summed per block of rows and the blocks' sums added in block
//! order, so the result does not depend on how many threads ran.

use std::mem::MaybeUninit;

use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::storage::CpuData;

use super::float::Float;
#[cfg(not(target_arch = "x86_64"))]
use super::float::Float as Elem;
#[cfg(target_arch = "x86_64")]
use super::simd::Lanes as Elem;

/// Eight running sums of `f(x[i])`, so the loop vectorises.
#[inline(always)]
fn sum_map<T: Float>(x: &[T], f: impl Fn(T) -> T) -> T {
    let mut acc = [T::ZERO; 8];
    let chunks = x.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = *a + f(v);
        }
    }
    let mut s = T::ZERO;
    for &v in rest {
        s = s + f(v);
    }
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + s
}

/// A row's mean and `1 / sqrt(var + eps)` (biased variance; two passes over a row that is in
/// cache for the second).
#[inline(always)]
fn row_stats<T: Float>(x: &[T], eps: T) -> (T, T) {
    let n = T::from_f64(x.len() as f64);
    let mean = sum_map(x, |v| v) / n;
    let var = sum_map(x, |v| (v - mean) * (v - mean)) / n;
    (mean, T::ONE / (var + eps).sqrt())
}

/// One output row: `(x - mean) * rstd`, then `* w + b` when given.
#[inline(always)]
fn forward_row<T: Float>(o: &mut [MaybeUninit<T>], x: &[T], wb: Option<(&[T], &[T])>, eps: T) {
    let (m, s) = row_stats(x, eps);
    match wb {
        Some((w, b)) => {
            for (((o, &v), &w), &b) in o.iter_mut().zip(x).zip(w).zip(b) {
                o.write((v - m) * s * w + b);
            }
        }
        None => {
            for (o, &v) in o.iter_mut().zip(x) {
                o.write((v - m) * s);
            }
        }
    }
}

/// One row of the backward: with `g = dy * w` (or `dy`) and `xhat = (x - mean) * rstd`,
/// `dx = rstd * (g - mean(g) - xhat * mean(g * xhat))`; `dy * xhat` and `dy` are added into
/// the weight and bias sums when `w` is given.
#[inline(always)]
fn backward_row<T: Float>(
    dx: &mut [MaybeUninit<T>],
    x: &[T],
    dy: &[T],
    w: Option<(&[T], &mut [T], &mut [T])>,
    eps: T,
) {
    let n = x.len();
    let (dx, dy) = (&mut dx[..n], &dy[..n]);
    let (m, s) = row_stats(x, eps);
    let inv_n = T::ONE / T::from_f64(n as f64);
    match w {
        Some((w, dw, db)) => {
            let (w, dw, db) = (&w[..n], &mut dw[..n], &mut db[..n]);
            let mut ag = [T::ZERO; 8];
            let mut agx = [T::ZERO; 8];
            let (mut rg, mut rgx) = (T::ZERO, T::ZERO);
            let full = n / 8 * 8;
            for ((xc, dc), wc) in x[..full]
                .chunks_exact(8)
                .zip(dy[..full].chunks_exact(8))
                .zip(w[..full].chunks_exact(8))
            {
                for k in 0..8 {
                    let g = dc[k] * wc[k];
                    ag[k] = ag[k] + g;
                    agx[k] = agx[k] + g * ((xc[k] - m) * s);
                }
            }
            for i in full..n {
                let g = dy[i] * w[i];
                rg = rg + g;
                rgx = rgx + g * ((x[i] - m) * s);
            }
            let fold = |a: [T; 8], r: T| {
                ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])) + r
            };
            let mg = fold(ag, rg) * inv_n;
            let mgx = fold(agx, rgx) * inv_n;
            for i in 0..n {
                let xh = (x[i] - m) * s;
                let d = dy[i];
                dw[i] = dw[i] + d * xh;
                db[i] = db[i] + d;
                dx[i].write(s * (d * w[i] - mg - xh * mgx));
            }
        }
        None => {
            let mg = sum_map(dy, |d| d) * inv_n;
            let mut agx = [T::ZERO; 8];
            let mut rgx = T::ZERO;
            let full = n / 8 * 8;
            for (xc, dc) in x[..full].chunks_exact(8).zip(dy[..full].chunks_exact(8)) {
                for k in 0..8 {
                    agx[k] = agx[k] + dc[k] * ((xc[k] - m) * s);
                }
            }
            for i in full..n {
                rgx = rgx + dy[i] * ((x[i] - m) * s);
            }
            let mgx = (((agx[0] + agx[1]) + (agx[2] + agx[3]))
                + ((agx[4] + agx[5]) + (agx[6] + agx[7]))
                + rgx)
                * inv_n;
            for i in 0..n {
                let xh = (x[i] - m) * s;
                dx[i].write(s * (dy[i] - mg - xh * mgx));
            }
        }
    }
}

/// The forward over a block of rows.
#[inline(always)]
fn forward_rows<T: Float>(
    out: &mut [MaybeUninit<T>],
    x: &[T],
    cols: usize,
    wb: Option<(&[T], &[T])>,
    eps: T,
) {
    for (o, xr) in out.chunks_mut(cols).zip(x.chunks(cols)) {
        forward_row(o, xr, wb, eps);
    }
}

/// The backward over a block of rows; `sums` (`[dw; db]`, `2 * cols`) when there is a weight.
#[inline(always)]
fn backward_rows<T: Float>(
    dx: &mut [MaybeUninit<T>],
    x: &[T],
    dy: &[T],
    cols: usize,
    w: Option<&[T]>,
    sums: &mut [T],
    eps: T,
) {
    let (dw, db) = sums.split_at_mut(sums.len() / 2);
    for ((o, xr), dr) in dx.chunks_mut(cols).zip(x.chunks(cols)).zip(dy.chunks(cols)) {
        let wsums = w.map(|w| (w, &mut *dw, &mut *db));
        backward_row(o, xr, dr, wsums, eps);
    }
}

/// The block functions for AVX2 and FMA, with explicit vectors.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::needless_range_loop)] // tails indexing several rows at once
mod wide {
    use super::super::simd::{row_stats, Lanes};
    use super::MaybeUninit;

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn forward_rows<T: Lanes>(
        out: &mut [MaybeUninit<T>],
        x: &[T],
        cols: usize,
        wb: Option<(&[T], &[T])>,
        eps: T,
    ) {
        for (o, xr) in out.chunks_mut(cols).zip(x.chunks(cols)) {
            // SAFETY: this function's features are the ones `Lanes` needs
            unsafe { forward_row(o, xr, wb, eps) };
        }
    }

    #[inline(always)]
    unsafe fn forward_row<T: Lanes>(
        o: &mut [MaybeUninit<T>],
        x: &[T],
        wb: Option<(&[T], &[T])>,
        eps: T,
    ) {
        let n = x.len();
        assert!(o.len() >= n);
        let (m, s) = row_stats(x, eps);
        let (vm, vs) = (T::vsplat(m), T::vsplat(s));
        let (op, xp) = (o.as_mut_ptr() as *mut T, x.as_ptr());
        let mut i = 0;
        match wb {
            Some((w, b)) => {
                assert!(w.len() >= n && b.len() >= n);
                let (wp, bp) = (w.as_ptr(), b.as_ptr());
                while i + T::W <= n {
                    let xh = T::vmul(T::vsub(T::vload(xp.add(i)), vm), vs);
                    T::vstore(
                        op.add(i),
                        T::vfma(xh, T::vload(wp.add(i)), T::vload(bp.add(i))),
                    );
                    i += T::W;
                }
                for j in i..n {
                    o[j].write((x[j] - m) * s * w[j] + b[j]);
                }
            }
            None => {
                while i + T::W <= n {
                    T::vstore(op.add(i), T::vmul(T::vsub(T::vload(xp.add(i)), vm), vs));
                    i += T::W;
                }
                for j in i..n {
                    o[j].write((x[j] - m) * s);
                }
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn backward_rows<T: Lanes>(
        dx: &mut [MaybeUninit<T>],
        x: &[T],
        dy: &[T],
        cols: usize,
        w: Option<&[T]>,
        sums: &mut [T],
        eps: T,
    ) {
        let (dw, db) = sums.split_at_mut(sums.len() / 2);
        for ((o, xr), dr) in dx.chunks_mut(cols).zip(x.chunks(cols)).zip(dy.chunks(cols)) {
            // SAFETY: this function's features are the ones `Lanes` needs
            unsafe { backward_row(o, xr, dr, w.map(|w| (w, &mut *dw, &mut *db)), eps) };
        }
    }

    /// See `super::backward_row`; `g = dy * w` when there is a weight.
    #[inline(always)]
    unsafe fn backward_row<T: Lanes>(
        dx: &mut [MaybeUninit<T>],
        x: &[T],
        dy: &[T],
        w: Option<(&[T], &mut [T], &mut [T])>,
        eps: T,
    ) {
        let n = x.len();
        assert!(dx.len() >= n && dy.len() >= n);
        let (m, s) = row_stats(x, eps);
        let (vm, vs) = (T::vsplat(m), T::vsplat(s));
        let inv_n = T::ONE / T::from_f64(n as f64);
        let (op, xp, dp) = (dx.as_mut_ptr() as *mut T, x.as_ptr(), dy.as_ptr());
        if let Some((w, dw, db)) = &w {
            assert!(w.len() >= n && dw.len() >= n && db.len() >= n);
        }
        let ws: Option<&[T]> = w.as_ref().map(|(w, _, _)| *w);
        let wp = ws.map(|w| w.as_ptr());
        let grad = |i: usize| match wp {
            Some(wp) => T::vmul(T::vload(dp.add(i)), T::vload(wp.add(i))),
            None => T::vload(dp.add(i)),
        };
        let grad1 = |i: usize| match ws {
            Some(w) => dy[i] * w[i],
            None => dy[i],
        };
        // sums of g and g * xhat, two vectors each so the adds overlap
        let z = T::vsplat(T::ZERO);
        let (mut g0, mut g1, mut h0, mut h1) = (z, z, z, z);
        let mut i = 0;
        while i + 2 * T::W <= n {
            let (ga, gb) = (grad(i), grad(i + T::W));
            let xa = T::vmul(T::vsub(T::vload(xp.add(i)), vm), vs);
            let xb = T::vmul(T::vsub(T::vload(xp.add(i + T::W)), vm), vs);
            g0 = T::vadd(g0, ga);
            g1 = T::vadd(g1, gb);
            h0 = T::vfma(ga, xa, h0);
            h1 = T::vfma(gb, xb, h1);
            i += 2 * T::W;
        }
        let (mut sg, mut sgx) = (T::vhsum(T::vadd(g0, g1)), T::vhsum(T::vadd(h0, h1)));
        for j in i..n {
            let g = grad1(j);
            sg = sg + g;
            sgx = sgx + g * ((x[j] - m) * s);
        }
        let (mg, mgx) = (sg * inv_n, sgx * inv_n);
        let (vmg, vmgx) = (T::vsplat(mg), T::vsplat(mgx));
        let mut i = 0;
        match w {
            Some((_, dw, db)) => {
                let (dwp, dbp) = (dw.as_mut_ptr(), db.as_mut_ptr());
                while i + T::W <= n {
                    let xh = T::vmul(T::vsub(T::vload(xp.add(i)), vm), vs);
                    let d = T::vload(dp.add(i));
                    T::vstore(dwp.add(i), T::vfma(d, xh, T::vload(dwp.add(i))));
                    T::vstore(dbp.add(i), T::vadd(T::vload(dbp.add(i)), d));
                    let v = T::vsub(T::vsub(grad(i), vmg), T::vmul(xh, vmgx));
                    T::vstore(op.add(i), T::vmul(vs, v));
                    i += T::W;
                }
                for j in i..n {
                    let xh = (x[j] - m) * s;
                    dw[j] = dw[j] + dy[j] * xh;
                    db[j] = db[j] + dy[j];
                    dx[j].write(s * (grad1(j) - mg - xh * mgx));
                }
            }
            None => {
                while i + T::W <= n {
                    let xh = T::vmul(T::vsub(T::vload(xp.add(i)), vm), vs);
                    let v = T::vsub(T::vsub(grad(i), vmg), T::vmul(xh, vmgx));
                    T::vstore(op.add(i), T::vmul(vs, v));
                    i += T::W;
                }
                for j in i..n {
                    let xh = (x[j] - m) * s;
                    dx[j].write(s * (dy[j] - mg - xh * mgx));
                }
            }
        }
    }
}

fn forward_rows_any<T: Elem>(
    out: &mut [MaybeUninit<T>],
    x: &[T],
    cols: usize,
    wb: Option<(&[T], &[T])>,
    eps: T,
) {
    #[cfg(target_arch = "x86_64")]
    if super::wide_simd() {
        // SAFETY: the CPU has the features the function is compiled for.
        return unsafe { wide::forward_rows(out, x, cols, wb, eps) };
    }
    forward_rows(out, x, cols, wb, eps)
}

fn backward_rows_any<T: Elem>(
    dx: &mut [MaybeUninit<T>],
    x: &[T],
    dy: &[T],
    cols: usize,
    w: Option<&[T]>,
    sums: &mut [T],
    eps: T,
) {
    #[cfg(target_arch = "x86_64")]
    if super::wide_simd() {
        // SAFETY: the CPU has the features the function is compiled for.
        return unsafe { wide::backward_rows(dx, x, dy, cols, w, sums, eps) };
    }
    backward_rows(dx, x, dy, cols, w, sums, eps)
}

/// Rows per block: about 32 Ki elements (a block's rows stay in L2), at least one row.
fn block_rows(cols: usize) -> usize {
    (32 * 1024 / cols.max(1)).max(1)
}

fn threaded(n: usize) -> bool {
    n >= 4 * super::PAR_CHUNK && crate::cpu::threads() > 1
}

fn forward_impl<T: Elem + Send + Sync>(
    x: &[T],
    cols: usize,
    wb: Option<(&[T], &[T])>,
    eps: T,
) -> Result<Vec<T>> {
    let n = x.len();
    let mut out = crate::storage::pool::take::<T>(n)?;
    if cols > 0 {
        let step = block_rows(cols) * cols;
        let dst = &mut out.spare_capacity_mut()[..n];
        if threaded(n) {
            use rayon::prelude::*;
            dst.par_chunks_mut(step)
                .zip(x.par_chunks(step))
                .for_each(|(o, xb)| forward_rows_any(o, xb, cols, wb, eps));
        } else {
            for (o, xb) in dst.chunks_mut(step).zip(x.chunks(step)) {
                forward_rows_any(o, xb, cols, wb, eps);
            }
        }
    }
    // SAFETY: every one of the n slots was written (each row by its block).
    unsafe { out.set_len(n) };
    Ok(out)
}

/// `dx` (`n` elements), followed by `dw` and `db` (`cols` each) when `w` is given.
fn backward_impl<T: Elem + Send + Sync>(
    x: &[T],
    dy: &[T],
    cols: usize,
    w: Option<&[T]>,
    eps: T,
) -> Result<Vec<T>> {
    let n = x.len();
    let tail = if w.is_some() { 2 * cols } else { 0 };
    let mut out = crate::storage::pool::take::<T>(n + tail)?;
    if cols > 0 {
        let step = block_rows(cols) * cols;
        let blocks = n.div_ceil(step);
        let mut partial = vec![T::ZERO; if w.is_some() { blocks * 2 * cols } else { 0 }];
        let per_block = if w.is_some() { 2 * cols } else { 0 };
        let dst = &mut out.spare_capacity_mut()[..n];
        let run = |(bi, o): (usize, &mut [MaybeUninit<T>]), sums: &mut [T]| {
            let rows = bi * step..(bi * step + o.len());
            backward_rows_any(o, &x[rows.clone()], &dy[rows], cols, w, sums, eps);
        };
        if threaded(n) {
            use rayon::prelude::*;
            if per_block > 0 {
                dst.par_chunks_mut(step)
                    .enumerate()
                    .zip(partial.par_chunks_mut(per_block))
                    .for_each(|(b, sums)| run(b, sums));
            } else {
                dst.par_chunks_mut(step)
                    .enumerate()
                    .for_each(|b| run(b, &mut []));
            }
        } else {
            for b in dst.chunks_mut(step).enumerate() {
                let bi = b.0;
                let sums = if per_block > 0 {
                    &mut partial[bi * per_block..(bi + 1) * per_block]
                } else {
                    &mut []
                };
                run(b, sums);
            }
        }
        // SAFETY: every one of the n slots was written (each row by its block).
        unsafe { out.set_len(n) };
        if per_block > 0 {
            let mut total = vec![T::ZERO; per_block];
            for p in partial.chunks(per_block) {
                for (t, &v) in total.iter_mut().zip(p) {
                    *t = *t + v;
                }
            }
            out.extend_from_slice(&total);
        }
    } else {
        out.resize(n + tail, T::ZERO);
    }
    Ok(out)
}

fn dtype_error(op: &str, what: &str, d: &CpuData) -> Error {
    Error::dtype(
        op,
        format!(
            "{what} must be float32 or float64 like the input, got {}",
            d.dtype()
        ),
    )
}

macro_rules! layer_norm_kernels {
    ($($t:ty => $variant:ident),*) => {
        /// Layer norm along the last axis, with the affine part when `wb` (weight and bias,
        /// each of the last axis's length) is given; contiguous in the input's shape.
        pub(crate) fn layer_norm(
            x: &CpuData,
            l: &Layout,
            wb: Option<(&CpuData, &Layout, &CpuData, &Layout)>,
            eps: f64,
        ) -> Result<CpuData> {
            let cols = l.shape().last().copied().unwrap_or(1);
            match x {
                $(CpuData::$variant(v) => {
                    let src = super::contiguous(v, l)?;
                    let affine = match wb {
                        Some((CpuData::$variant(w), lw, CpuData::$variant(b), lb)) => {
                            Some((super::contiguous(w, lw)?, super::contiguous(b, lb)?))
                        }
                        Some((w, _, b, _)) => {
                            let bad = if matches!(w, CpuData::$variant(_)) { b } else { w };
                            return Err(dtype_error("layer_norm", "weight and bias", bad));
                        }
                        None => None,
                    };
                    let wb = affine.as_ref().map(|(w, b)| (&w[..], &b[..]));
                    let out = forward_impl::<$t>(&src, cols, wb, eps as $t)?;
                    Ok(CpuData::$variant(out))
                })*
                d => Err(Error::dtype(
                    "layer_norm",
                    format!("not defined for {} tensors", d.dtype()),
                )),
            }
        }

        /// Layer norm's gradients from `(x, dy)`, and the weight when the affine part is
        /// there: `dx` in the input's shape, then (with a weight) `dw` and `db`, in one flat
        /// buffer.
        pub(crate) fn layer_norm_grad(
            x: &CpuData,
            lx: &Layout,
            w: Option<(&CpuData, &Layout)>,
            dy: &CpuData,
            ldy: &Layout,
            eps: f64,
        ) -> Result<CpuData> {
            let cols = lx.shape().last().copied().unwrap_or(1);
            match (x, dy) {
                $((CpuData::$variant(v), CpuData::$variant(g)) => {
                    let xs = super::contiguous(v, lx)?;
                    let gs = super::contiguous(g, ldy)?;
                    let ws = match w {
                        Some((CpuData::$variant(w), lw)) => Some(super::contiguous(w, lw)?),
                        Some((d, _)) => return Err(dtype_error("layer_norm_grad", "weight", d)),
                        None => None,
                    };
                    let out = backward_impl::<$t>(&xs, &gs, cols, ws.as_deref(), eps as $t)?;
                    Ok(CpuData::$variant(out))
                })*
                (d, _) => Err(Error::dtype(
                    "layer_norm_grad",
                    format!("not defined for {} tensors", d.dtype()),
                )),
            }
        }
    };
}
layer_norm_kernels!(f32 => F32, f64 => F64);
