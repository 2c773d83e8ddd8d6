//! Reductions over any set of axes, and softmax along one axis.

use super::at;
use crate::error::{Error, Result};
use crate::layout::{contiguous_strides, for_each_run_multi, numel, Layout};
use crate::op::ReduceKind;
use crate::storage::CpuData;

use super::float::Float;

/// The output viewed as a broadcast over the input's shape: reduced axes get stride 0.
fn reduced_view(shape: &[usize], axes: &[usize]) -> (Vec<usize>, Layout) {
    let kept: Vec<usize> = shape
        .iter()
        .enumerate()
        .map(|(d, &n)| if axes.contains(&d) { 1 } else { n })
        .collect();
    let mut strides = contiguous_strides(&kept);
    for &a in axes {
        strides[a] = 0;
    }
    let view = Layout::new(shape, &strides, 0);
    (kept, view)
}

/// Sums a contiguous run with several accumulators, so the loop vectorises and rounding
/// error grows more slowly than with one running total.
#[inline]
fn sum_run<T: Copy + std::ops::Add<Output = T>>(xs: &[T], zero: T) -> T {
    let mut acc = [zero; 8];
    let chunks = xs.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for k in 0..8 {
            acc[k] = acc[k] + c[k];
        }
    }
    let mut s = zero;
    for r in rest {
        s = s + *r;
    }
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + s
}

/// Sums a contiguous float run in blocks whose partial sums are added in f64, so float32
/// sums of millions of elements stay accurate (numpy's pairwise summation is the peer).
#[inline]
fn sum_run_wide<T: Copy + std::ops::Add<Output = T> + Into<f64>>(xs: &[T], zero: T) -> f64 {
    xs.chunks(1024).map(|c| sum_run(c, zero).into()).sum()
}

/// [`sum_run_wide`] of a float32 or float64 run, with explicit AVX2 vectors where the CPU
/// has them (four vector sums per block of 1024, the blocks added in f64).
fn sum_floats<T: FloatLanes + Into<f64>>(xs: &[T]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2,fma")]
        fn wide<T: super::simd::Lanes + Into<f64>>(xs: &[T]) -> f64 {
            // SAFETY: this function has the features `simd` needs
            xs.chunks(1024)
                .map(|c| unsafe { super::simd::sum_map(c, |v| v, |v| v) }.into())
                .sum()
        }
        if super::wide_simd() {
            // SAFETY: the CPU has the features `wide` is compiled for.
            return unsafe { wide(xs) };
        }
    }
    sum_run_wide(xs, T::ZERO)
}

#[cfg(target_arch = "x86_64")]
use super::simd::Lanes as FloatLanes;
#[cfg(not(target_arch = "x86_64"))]
use Float as FloatLanes;

/// A specialised sum of one contiguous run.
type RunSum<'a, T> = &'a (dyn Fn(&[T]) -> T + Sync);

/// Folds `x` (laid out as `l`) over `axes` with `f` from `init`; `run_sum`, where given,
/// folds a whole contiguous run at once.
fn fold<T: Copy + Send + Sync + crate::storage::pool::Pooled>(
    x: &[T],
    l: &Layout,
    axes: &[usize],
    init: T,
    f: impl Fn(T, T) -> T + Sync,
    run_sum: Option<RunSum<'_, T>>,
) -> Result<Vec<T>> {
    // a contiguous buffer reduced over several separate blocks of axes (NCHW summed over N,
    // H and W, as a convolution's bias gradient and batch norm's statistics do, or over N and
    // H): the last block first, each pass a row or column fold that runs in parallel, then the
    // rest over the smaller partial result
    let mut partial: Option<Vec<T>> = None;
    let (mut l, mut axes) = (l.clone(), axes.to_vec());
    loop {
        let src = partial.as_deref().unwrap_or(x);
        let mut start = axes.len().saturating_sub(1);
        while start > 0 && axes[start - 1] + 1 == axes[start] {
            start -= 1;
        }
        if start == 0 || !l.is_contiguous() {
            let out = fold_by_shape(src, &l, &axes, init, &f, run_sum);
            if let Some(p) = partial {
                crate::storage::pool::keep(p);
            }
            return out;
        }
        let block = &axes[start..];
        let next = fold_by_shape(src, &l, block, init, &f, run_sum)?;
        let shape: Vec<usize> = (0..l.ndim())
            .filter(|d| !block.contains(d))
            .map(|d| l.shape()[d])
            .collect();
        axes.truncate(start);
        l = Layout::new(&shape, &contiguous_strides(&shape), 0);
        if let Some((ml, ma)) = merge_axes(&l, &axes) {
            (l, axes) = (ml, ma);
        }
        if let Some(p) = partial.replace(next) {
            crate::storage::pool::keep(p);
        }
    }
}

/// [`fold`] of one layout: the rows of a last-axis reduction, the columns of a block of
/// leading or middle axes, or else a walk over the runs of the general layout.
fn fold_by_shape<T: Copy + Send + Sync + crate::storage::pool::Pooled>(
    x: &[T],
    l: &Layout,
    axes: &[usize],
    init: T,
    f: impl Fn(T, T) -> T + Sync,
    run_sum: Option<RunSum<'_, T>>,
) -> Result<Vec<T>> {
    let nd = l.ndim();
    let (kept, view) = reduced_view(l.shape(), axes);
    // rows of a contiguous buffer reduced along the last axis: one tight loop per row
    if nd > 0 && axes == [nd - 1] && l.is_contiguous() && l.shape()[nd - 1] > 0 {
        let cols = l.shape()[nd - 1];
        let src = &x[l.offset()..l.offset() + l.numel()];
        let reduce_row = |row: &[T]| match run_sum {
            Some(s) => f(init, s(row)),
            None => row.iter().fold(init, |acc, &v| f(acc, v)),
        };
        let rows = numel(&kept);
        let mut out = crate::storage::pool::take(rows)?;
        if src.len() >= 4 * super::PAR_CHUNK && rows > 1 && crate::cpu::threads() > 1 {
            use rayon::prelude::*;
            out.spare_capacity_mut()[..rows]
                .par_iter_mut()
                .zip(src.par_chunks_exact(cols))
                .with_min_len((super::PAR_CHUNK / cols).max(1))
                .for_each(|(o, row)| {
                    o.write(reduce_row(row));
                });
            // SAFETY: every one of the `rows` slots was written above.
            unsafe { out.set_len(rows) };
        } else {
            out.extend(src.chunks_exact(cols).map(reduce_row));
        }
        return Ok(out);
    }
    // a contiguous buffer reduced over a block of middle or leading axes (a column sum):
    // whole rows are folded into the output rows, in the same order as the general path
    if let Some(first) = axes.first().copied() {
        let last = *axes.last().expect("not empty");
        if l.is_contiguous() && last + 1 < nd && last + 1 - first == axes.len() {
            let shape = l.shape();
            let pre: usize = shape[..first].iter().product();
            let r: usize = shape[first..=last].iter().product();
            let post: usize = shape[last + 1..].iter().product();
            let src = &x[l.offset()..l.offset() + l.numel()];
            let mut out = crate::storage::pool::filled(pre * post, init)?;
            // output columns `c0..c0 + o.len()` of group `p`
            let cols = |p: usize, c0: usize, o: &mut [T]| {
                for k in 0..r {
                    let row = &src[(p * r + k) * post + c0..][..o.len()];
                    for (a, &v) in o.iter_mut().zip(row) {
                        *a = f(*a, v);
                    }
                }
            };
            let threads = crate::cpu::threads();
            if src.len() >= 4 * super::PAR_CHUNK && threads > 1 && post > 0 {
                use rayon::prelude::*;
                // pieces of at least 64 columns, about four per thread
                let width = post.div_ceil(4 * threads).next_multiple_of(64).min(post);
                out.par_chunks_mut(post).enumerate().for_each(|(p, o)| {
                    o.par_chunks_mut(width)
                        .enumerate()
                        .for_each(|(c, piece)| cols(p, c * width, piece));
                });
            } else {
                for (p, o) in out.chunks_mut(post.max(1)).enumerate() {
                    cols(p, 0, o);
                }
            }
            return Ok(out);
        }
    }
    let mut out = crate::storage::pool::filled(numel(&kept), init)?;
    for_each_run_multi([l, &view], |[bx, bo], [sx, so], n| {
        if so == 0 {
            let acc = match (sx, run_sum) {
                (1, Some(s)) => f(out[bo], s(&x[bx..bx + n])),
                _ => (0..n).fold(out[bo], |acc, i| f(acc, x[at(bx, sx, i)])),
            };
            out[bo] = acc;
        } else {
            for i in 0..n {
                let o = at(bo, so, i);
                out[o] = f(out[o], x[at(bx, sx, i)]);
            }
        }
    });
    Ok(out)
}

macro_rules! float_reduce {
    ($t:ty, $kind:expr, $x:expr, $l:expr, $axes:expr, $count:expr) => {{
        let nan_max = |a: $t, b: $t| if b > a || b.is_nan() { b } else { a };
        let nan_min = |a: $t, b: $t| if b < a || b.is_nan() { b } else { a };
        match $kind {
            ReduceKind::Sum => fold(
                $x,
                $l,
                $axes,
                0.0,
                |a, b| a + b,
                Some(&|r: &[$t]| sum_floats(r) as $t),
            )?,
            ReduceKind::Mean => {
                let mut s = fold(
                    $x,
                    $l,
                    $axes,
                    0.0,
                    |a, b| a + b,
                    Some(&|r: &[$t]| sum_floats(r) as $t),
                )?;
                let inv = 1.0 / $count as $t;
                s.iter_mut().for_each(|v| *v *= inv);
                s
            }
            ReduceKind::Max => fold($x, $l, $axes, <$t>::NEG_INFINITY, nan_max, None)?,
            ReduceKind::Min => fold($x, $l, $axes, <$t>::INFINITY, nan_min, None)?,
        }
    }};
}

/// The contiguous layout `l` with each run of neighbouring axes that are all reduced or all
/// kept merged into one axis, and the merged reduced axes; `None` where nothing merges. The
/// result's elements are in the same order either way.
fn merge_axes(l: &Layout, axes: &[usize]) -> Option<(Layout, Vec<usize>)> {
    if l.ndim() < 2 || !l.is_contiguous() {
        return None;
    }
    let (mut shape, mut merged) = (Vec::new(), Vec::new());
    let mut last: Option<bool> = None;
    for (d, &n) in l.shape().iter().enumerate() {
        let reduced = axes.contains(&d);
        if last == Some(reduced) {
            *shape.last_mut().expect("an axis before") *= n;
        } else {
            shape.push(n);
            if reduced {
                merged.push(shape.len() - 1);
            }
            last = Some(reduced);
        }
    }
    if shape.len() == l.ndim() {
        return None;
    }
    let strides = contiguous_strides(&shape);
    Some((Layout::new(&shape, &strides, l.offset()), merged))
}

/// Reduces `axes` (sorted, unique); the result is contiguous with those axes kept as size 1.
pub(crate) fn reduce(kind: ReduceKind, x: &CpuData, l: &Layout, axes: &[usize]) -> Result<CpuData> {
    let count: usize = axes.iter().map(|&a| l.shape()[a]).product();
    if count == 0 && matches!(kind, ReduceKind::Max | ReduceKind::Min) {
        return Err(Error::shape(
            kind.name(),
            format!(
                "cannot reduce over an empty axis (shape {:?}, axes {axes:?})",
                l.shape()
            ),
        ));
    }
    // neighbouring axes of a contiguous buffer that are both reduced or both kept act as one
    // axis: (N, C, H, W) over (1, 2, 3) is 64 rows to sum, not a walk over short runs
    let merged;
    let (l, axes) = match merge_axes(l, axes) {
        Some((ml, ma)) => {
            merged = (ml, ma);
            (&merged.0, merged.1.as_slice())
        }
        None => (l, axes),
    };
    Ok(match x {
        CpuData::F32(v) => CpuData::F32(float_reduce!(f32, kind, v, l, axes, count)),
        CpuData::F64(v) => CpuData::F64(float_reduce!(f64, kind, v, l, axes, count)),
        CpuData::I64(v) => CpuData::I64(match kind {
            ReduceKind::Sum => fold(v, l, axes, 0, |a: i64, b| a.wrapping_add(b), None)?,
            ReduceKind::Max => fold(v, l, axes, i64::MIN, |a: i64, b| a.max(b), None)?,
            ReduceKind::Min => fold(v, l, axes, i64::MAX, |a: i64, b| a.min(b), None)?,
            ReduceKind::Mean => {
                return Err(Error::dtype(
                    "mean",
                    "not defined for int64 tensors; cast to a float dtype first",
                ))
            }
        }),
        d => {
            return Err(Error::dtype(
                kind.name(),
                format!("not defined for {} tensors; cast first", d.dtype()),
            ))
        }
    })
}

/// Softmax rows of a contiguous float32 buffer along its last axis, rows in parallel.
fn softmax_rows_f32(src: &[f32], n: usize, log: bool) -> Result<Vec<f32>> {
    let mut out = crate::storage::pool::filled(src.len(), 0.0f32)?;
    let row = |(o, x): (&mut [f32], &[f32])| {
        #[cfg(target_arch = "x86_64")]
        if super::wide_simd() {
            // SAFETY: the CPU has the features the function is compiled for.
            return unsafe { wide_rows::softmax_row(o, x, log) };
        }
        softmax_row(o, x, log)
    };
    let rows = src.len() / n;
    if src.len() >= 4 * super::PAR_CHUNK && rows > 1 && crate::cpu::threads() > 1 {
        use rayon::prelude::*;
        out.par_chunks_exact_mut(n)
            .zip(src.par_chunks_exact(n))
            .with_min_len((super::PAR_CHUNK / n).max(1))
            .for_each(row);
    } else {
        out.chunks_exact_mut(n)
            .zip(src.chunks_exact(n))
            .for_each(row);
    }
    Ok(out)
}

/// Softmax (or log-softmax) along `axis`; the result is contiguous in the input's shape.
pub(crate) fn softmax(x: &CpuData, l: &Layout, axis: usize, log: bool) -> Result<CpuData> {
    let nd = l.ndim();
    if let CpuData::F32(v) = x {
        if nd > 0 && axis == nd - 1 && l.is_contiguous() && l.shape()[axis] > 0 {
            let src = &v[l.offset()..l.offset() + l.numel()];
            return Ok(CpuData::F32(softmax_rows_f32(src, l.shape()[axis], log)?));
        }
    }
    macro_rules! go {
        ($t:ty, $v:expr) => {{
            let v: &[$t] = $v;
            let shape = l.shape();
            let n = shape[axis];
            let out_strides = contiguous_strides(shape);
            let mut out = crate::storage::pool::filled(l.numel(), 0.0 as $t)?;
            // iterate over every position of the other axes
            let mut rest_shape = shape.to_vec();
            rest_shape[axis] = 1;
            let lx = Layout::new(&rest_shape, l.strides(), l.offset());
            let lo = Layout::new(&rest_shape, &out_strides, 0);
            let (sx, so) = (l.strides()[axis], out_strides[axis]);
            let mut row = vec![0.0 as $t; n];
            for_each_run_multi([&lx, &lo], |[bx, bo], [rx, ro], m| {
                for i in 0..m {
                    let (px, po) = (at(bx, rx, i), at(bo, ro, i));
                    let mut mx = <$t>::NEG_INFINITY;
                    for j in 0..n {
                        row[j] = v[at(px, sx, j)];
                        if row[j] > mx {
                            mx = row[j];
                        }
                    }
                    // a row of -inf only: avoid -inf - -inf (the result is NaN either way, as in
                    // PyTorch); +inf and NaN propagate
                    if mx == <$t>::NEG_INFINITY {
                        mx = 0.0;
                    }
                    let mut s = 0.0 as $t;
                    for r in row.iter_mut() {
                        *r -= mx;
                        s += r.exp();
                    }
                    if log {
                        let ls = s.ln();
                        for j in 0..n {
                            out[at(po, so, j)] = row[j] - ls;
                        }
                    } else {
                        let inv = 1.0 / s;
                        for j in 0..n {
                            out[at(po, so, j)] = row[j].exp() * inv;
                        }
                    }
                }
            });
            out
        }};
    }
    let name = if log { "log_softmax" } else { "softmax" };
    Ok(match x {
        CpuData::F32(v) => CpuData::F32(go!(f32, v)),
        CpuData::F64(v) => CpuData::F64(go!(f64, v)),
        _ => {
            return Err(Error::dtype(
                name,
                format!("needs a float tensor, got {}", x.dtype()),
            ))
        }
    })
}

/// Runs `row(out_row, x_row)` over the rows of a contiguous buffer, in parallel when large.
/// `work` (elements read) decides whether threads are worth it.
fn by_rows<T: Copy + Send + Sync + crate::storage::pool::Pooled + Default>(
    n: usize,
    cols: usize,
    work: usize,
    row: impl Fn(usize, &mut [T]) + Sync + Send,
) -> Result<Vec<T>> {
    let mut out = crate::storage::pool::filled(n, T::default())?;
    if cols == 0 {
        return Ok(out);
    }
    if work >= 4 * super::PAR_CHUNK && crate::cpu::threads() > 1 {
        use rayon::prelude::*;
        out.par_chunks_mut(cols)
            .enumerate()
            .with_min_len((super::PAR_CHUNK * n / (work * cols).max(1)).max(1))
            .for_each(|(r, o)| row(r, o));
    } else {
        out.chunks_mut(cols)
            .enumerate()
            .for_each(|(r, o)| row(r, o));
    }
    Ok(out)
}

/// `exp` of logits shifted by their row's maximum (so at most 0): float32's vectorisable
/// polynomial, float64's libm.
trait ShiftedExp: Float {
    fn exp_le0(self) -> Self;
    /// [`xent_row`] compiled for AVX2 and FMA (explicit vectors for float32).
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    unsafe fn xent_row_wide(x: &[Self], label: usize) -> Self;
    /// [`xent_grad_row`] compiled for AVX2 and FMA (explicit vectors for float32).
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    unsafe fn xent_grad_row_wide(o: &mut [Self], x: &[Self], label: usize, scale: Self);
}
impl ShiftedExp for f32 {
    #[inline(always)]
    fn exp_le0(self) -> f32 {
        super::float::exp_nonpositive_f32(self)
    }
    #[cfg(target_arch = "x86_64")]
    unsafe fn xent_row_wide(x: &[f32], label: usize) -> f32 {
        wide_rows::xent_row_f32(x, label)
    }
    #[cfg(target_arch = "x86_64")]
    unsafe fn xent_grad_row_wide(o: &mut [f32], x: &[f32], label: usize, scale: f32) {
        wide_rows::xent_grad_row_f32(o, x, label, scale)
    }
}
impl ShiftedExp for f64 {
    #[inline(always)]
    fn exp_le0(self) -> f64 {
        self.exp()
    }
    #[cfg(target_arch = "x86_64")]
    unsafe fn xent_row_wide(x: &[f64], label: usize) -> f64 {
        wide_rows::xent_row(x, label)
    }
    #[cfg(target_arch = "x86_64")]
    unsafe fn xent_grad_row_wide(o: &mut [f64], x: &[f64], label: usize, scale: f64) {
        wide_rows::xent_grad_row(o, x, label, scale)
    }
}

/// The largest element of a non-empty row (NaNs are skipped: they reach the result through
/// the exp that follows), with eight running maxima so the loop vectorises.
#[inline(always)]
fn max8<T: Float>(x: &[T]) -> T {
    let mut acc = [x[0]; 8];
    let chunks = x.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for k in 0..8 {
            acc[k] = if c[k] > acc[k] { c[k] } else { acc[k] };
        }
    }
    let mut mx = acc[0];
    for &v in acc[1..].iter().chain(rest) {
        mx = if v > mx { v } else { mx };
    }
    mx
}

/// A row's maximum and `sum(exp(x - max))`.
#[inline(always)]
fn row_lse_parts<T: ShiftedExp>(x: &[T]) -> (T, T) {
    let mx = max8(x);
    // exps into a block on the stack (a plain map loop, which vectorises), then summed
    let mut buf = [T::ZERO; 256];
    let mut s = T::ZERO;
    for block in x.chunks(256) {
        let b = &mut buf[..block.len()];
        for (e, &v) in b.iter_mut().zip(block) {
            *e = (v - mx).exp_le0();
        }
        s = s + sum_run(b, T::ZERO);
    }
    (mx, s)
}

fn xent_labels<'a>(labels: &'a CpuData, ll: &Layout) -> Result<std::borrow::Cow<'a, [i64]>> {
    match labels {
        CpuData::I64(v) => super::contiguous(v, ll),
        d => Err(Error::dtype(
            "softmax_cross_entropy",
            format!("labels must be int64, got {}", d.dtype()),
        )),
    }
}

/// One float32 softmax (or log-softmax) row: the exps in a plain map loop (it vectorises),
/// then their sum.
#[inline(always)]
fn softmax_row(o: &mut [f32], x: &[f32], log: bool) {
    let mut mx = max8(x);
    if x.iter().any(|v| v.is_nan()) {
        mx = f32::NAN;
    } else if mx == f32::NEG_INFINITY {
        mx = 0.0;
    }
    for (oj, &xj) in o.iter_mut().zip(x) {
        *oj = super::float::exp_nonpositive_f32(xj - mx);
    }
    let s = sum_run(o, 0.0f32);
    if log {
        let ls = s.ln() + mx;
        for (oj, &xj) in o.iter_mut().zip(x) {
            *oj = xj - ls;
        }
    } else {
        let inv = 1.0 / s;
        for oj in o.iter_mut() {
            *oj *= inv;
        }
    }
}

/// One row's cross-entropy: `logsumexp(x) - x[label]`.
#[inline(always)]
fn xent_row<T: ShiftedExp>(x: &[T], label: usize) -> T {
    let (mx, se) = row_lse_parts(x);
    mx + se.ln() - x[label]
}

/// One row's logits gradient, `(softmax(x) - onehot(label)) * scale`.
#[inline(always)]
fn xent_grad_row<T: ShiftedExp>(o: &mut [T], x: &[T], label: usize, scale: T) {
    let mx = max8(x);
    for (d, &v) in o.iter_mut().zip(x) {
        *d = (v - mx).exp_le0();
    }
    let k = scale / sum_run(o, T::ZERO);
    for d in o.iter_mut() {
        *d = *d * k;
    }
    o[label] = o[label] - scale;
}

/// The row kernels compiled for AVX2 and FMA (picked at run time, as the elementwise loops);
/// float32's with explicit vectors.
#[cfg(target_arch = "x86_64")]
mod wide_rows {
    use super::super::simd::{exp_sum_ps, max_ps, scale_ps};
    use super::ShiftedExp;

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn softmax_row(o: &mut [f32], x: &[f32], log: bool) {
        let o = &mut o[..x.len()];
        // SAFETY (the blocks below): this function has the features `simd` needs
        let mut mx = unsafe { max_ps(x) };
        // (a NaN anywhere in the row makes its exp, hence the sum and every output, NaN)
        if mx == f32::NEG_INFINITY {
            mx = 0.0;
        }
        let s = unsafe { exp_sum_ps(x, mx, Some(&mut *o)) };
        if log {
            let ls = s.ln() + mx;
            for (oj, &xj) in o.iter_mut().zip(x) {
                *oj = xj - ls;
            }
        } else {
            unsafe { scale_ps(o, 1.0 / s) };
        }
    }
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn xent_row<T: ShiftedExp>(x: &[T], label: usize) -> T {
        super::xent_row(x, label)
    }
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn xent_grad_row<T: ShiftedExp>(o: &mut [T], x: &[T], label: usize, scale: T) {
        super::xent_grad_row(o, x, label, scale)
    }
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn xent_row_f32(x: &[f32], label: usize) -> f32 {
        // SAFETY: this function has the features `simd` needs
        unsafe {
            let mx = max_ps(x);
            mx + exp_sum_ps(x, mx, None).ln() - x[label]
        }
    }
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn xent_grad_row_f32(o: &mut [f32], x: &[f32], label: usize, scale: f32) {
        let o = &mut o[..x.len()];
        // SAFETY: this function has the features `simd` needs
        unsafe {
            let mx = max_ps(x);
            let s = exp_sum_ps(x, mx, Some(&mut *o));
            scale_ps(o, scale / s);
        }
        o[label] -= scale;
    }
}

fn xent_row_any<T: ShiftedExp>(x: &[T], label: usize) -> T {
    #[cfg(target_arch = "x86_64")]
    if super::wide_simd() {
        // SAFETY: the CPU has the features the function is compiled for.
        return unsafe { T::xent_row_wide(x, label) };
    }
    xent_row(x, label)
}

fn xent_grad_row_any<T: ShiftedExp>(o: &mut [T], x: &[T], label: usize, scale: T) {
    #[cfg(target_arch = "x86_64")]
    if super::wide_simd() {
        // SAFETY: the CPU has the features the function is compiled for.
        return unsafe { T::xent_grad_row_wide(o, x, label, scale) };
    }
    xent_grad_row(o, x, label, scale)
}

macro_rules! xent_kernels {
    ($($t:ty => $variant:ident),*) => {
        /// Mean over rows of `logsumexp(x_r) - x_r[label_r]`.
        pub(crate) fn softmax_xent(
            x: &CpuData,
            lx: &Layout,
            labels: &CpuData,
            ll: &Layout,
        ) -> Result<CpuData> {
            let (rows, cols) = (lx.shape()[0], lx.shape()[1]);
            let labels = xent_labels(labels, ll)?;
            match x {
                $(CpuData::$variant(v) => {
                    let src = super::contiguous(v, lx)?;
                    let per_row = by_rows::<$t>(rows, 1, rows * cols, |r, o| {
                        o[0] = xent_row_any(&src[r * cols..(r + 1) * cols], labels[r] as usize);
                    })?;
                    let total = per_row.iter().map(|&v| v as f64).sum::<f64>();
                    crate::storage::pool::keep(per_row);
                    Ok(CpuData::$variant(vec![(total / rows.max(1) as f64) as $t]))
                })*
                d => Err(Error::dtype(
                    "softmax_cross_entropy",
                    format!("not defined for {} tensors", d.dtype()),
                )),
            }
        }

        /// `(softmax(x_r) - onehot(label_r)) * dy / n` per row.
        pub(crate) fn softmax_xent_grad(
            x: &CpuData,
            lx: &Layout,
            labels: &CpuData,
            ll: &Layout,
            dy: &CpuData,
            ldy: &Layout,
        ) -> Result<CpuData> {
            let (rows, cols) = (lx.shape()[0], lx.shape()[1]);
            let labels = xent_labels(labels, ll)?;
            match (x, dy) {
                $((CpuData::$variant(v), CpuData::$variant(g)) => {
                    let src = super::contiguous(v, lx)?;
                    let scale = g[ldy.offset()] / rows.max(1) as $t;
                    let out = by_rows::<$t>(rows * cols, cols, rows * cols, |r, o| {
                        let xr = &src[r * cols..(r + 1) * cols];
                        xent_grad_row_any(o, xr, labels[r] as usize, scale);
                    })?;
                    Ok(CpuData::$variant(out))
                })*
                (d, _) => Err(Error::dtype(
                    "softmax_cross_entropy_grad",
                    format!("not defined for {} tensors", d.dtype()),
                )),
            }
        }
    };
}
xent_kernels!(f32 => F32, f64 => F64);
