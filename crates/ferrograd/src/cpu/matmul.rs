//! Matrix products through the `gemm` crate (any strides, so transposed views need no copy).

use crate::error::{Error, Result};
use crate::layout::{contiguous_strides, numel, Layout};
use crate::storage::CpuData;

use super::float::Float;
use super::{wide_simd, widest_simd};

/// Products of every batch: `a` is `[batch..., m, k]`, `b` is `[batch..., k, n]`, both already
/// broadcast to one batch shape. The result is contiguous `[batch..., m, n]`.
pub(crate) fn matmul(a: &CpuData, la: &Layout, b: &CpuData, lb: &Layout) -> Result<CpuData> {
    Ok(match (a, b) {
        (CpuData::F32(x), CpuData::F32(y)) => CpuData::F32(float_products(x, la, y, lb)?),
        (CpuData::F64(x), CpuData::F64(y)) => CpuData::F64(float_products(x, la, y, lb)?),
        // integers wrap on overflow, as numpy's int64 products (and the engine's add, mul)
        (CpuData::I64(x), CpuData::I64(y)) => CpuData::I64(batched(
            x,
            la,
            y,
            lb,
            0,
            1,
            Some(&|s: i64, p: i64, q: i64| s.wrapping_add(p.wrapping_mul(q))),
        )?),
        _ => {
            return Err(Error::dtype(
                "matmul",
                format!("not defined for {} and {} tensors", a.dtype(), b.dtype()),
            ))
        }
    })
}

/// Float products through `gemm`, except two shapes it handles badly with a column-major `b`
/// (the transpose of a contiguous matrix: a Linear weight used as `W^T`, or `dY @ W^T` in
/// backward). `gemm` computes a row-major product as its transpose, so such a `b` becomes a
/// row-major left operand, which it reads a row at a time while packing. With a few rows in
/// `a` (a small batch through a Linear layer) the product is dot products of rows of `a` with
/// rows of `W`, both contiguous, and runs as such. With more rows, when `b`'s columns lie a
/// multiple of 4 KiB apart (1024 floats), `gemm`'s reads fall in one cache set: the 256 x 1024
/// x 1024 product of an MLP's backward ran at half the rate of the same product with `b` in
/// rows (AMD Zen 4), so `b` is first copied to rows (a tiled copy, about a tenth of the
/// product), unless the product goes to the loaded BLAS, which reads `b` transposed where it
/// lies (twice the rate of the copy and `gemm` on an AMD Zen 3). Other strides pack at full
/// rate, and there a copy would only cost.
fn float_products<T>(a: &[T], la: &Layout, b: &[T], lb: &Layout) -> Result<Vec<T>>
where
    T: Float + Send + Sync + 'static,
{
    let nd = lb.ndim();
    let (k, n) = (lb.shape()[nd - 2], lb.shape()[nd - 1]);
    let m = la.shape()[nd - 2];
    let (brs, bcs) = (lb.strides()[nd - 2], lb.strides()[nd - 1]);
    if nd > 2 && m * n * k > 0 && lb.strides()[..nd - 2].iter().all(|&s| s == 0) {
        // one `b` for every batch (a Linear layer on (B, T, K)): where a's batch axes merge
        // into its rows, the batch is one product with B * T rows (the output, contiguous,
        // is laid out the same), which the kernels below run better than B small ones
        if let Some(la2) = la.reshape(&[la.numel() / k.max(1), k]) {
            let lb2 = Layout::new(&[k, n], &[brs, bcs], lb.offset());
            return float_products(a, &la2, b, &lb2);
        }
    }
    let column_major = brs == 1 && bcs.unsigned_abs() > 1 && k >= 16 && n >= 16;
    let single = la.shape()[..nd - 2].iter().product::<usize>() == 1;
    let forward = la.strides()[nd - 2] >= 0 && bcs > 0;
    if column_major && single && forward && m <= DOT_MAX_ROWS && la.strides()[nd - 1] == 1 && m > 1
    {
        return dot_products(a, la, b, lb);
    }
    let batch_broadcast = lb.strides()[..nd - 2].contains(&0);
    // (a product the loaded BLAS takes reads a transposed operand as it lies: no copy)
    let to_blas = crate::cpu::threads() > 1 && m * n * k >= 1 << 26 && super::blas::in_use();
    if column_major
        && (bcs.unsigned_abs() * std::mem::size_of::<T>()) % 4096 == 0
        && m > 1
        && !batch_broadcast
        && !to_blas
    {
        let rows = super::map1(b, lb, |v| v)?;
        let lr = Layout::contiguous(lb.shape());
        return batched(a, la, &rows, &lr, T::ZERO, T::ONE, None);
    }
    batched(a, la, b, lb, T::ZERO, T::ONE, None)
}

/// Most rows of `a` for which a product with a column-major `b` runs as dot products.
const DOT_MAX_ROWS: usize = 16;

/// `out[i, j] = a[i, :] . b[:, j]` for one product whose `a` rows and `b` columns are
/// contiguous (`b` column-major) and lie at non-negative strides, in parallel over blocks of
/// columns.
fn dot_products<T: Float + Send + Sync>(
    a: &[T],
    la: &Layout,
    b: &[T],
    lb: &Layout,
) -> Result<Vec<T>> {
    let nd = la.ndim();
    let (m, k, n) = (la.shape()[nd - 2], la.shape()[nd - 1], lb.shape()[nd - 1]);
    let (ars, bcs) = (la.strides()[nd - 2] as usize, lb.strides()[nd - 1] as usize);
    let a = &a[la.offset()..];
    let b = &b[lb.offset()..];
    let len = m * n;
    let mut out: Vec<T> = crate::storage::pool::take(len)?;
    let dst = OutPtr(out.spare_capacity_mut().as_mut_ptr().cast::<T>());
    let block = |j0: usize, j1: usize| {
        let mut col = [T::ZERO; DOT_MAX_ROWS];
        for j in j0..j1 {
            dots(a, ars, m, &b[j * bcs..j * bcs + k], &mut col[..m]);
            for (i, &v) in col[..m].iter().enumerate() {
                // SAFETY: (i, j) lies in the m x n output; blocks cover disjoint columns
                unsafe { dst.at(i * n + j).write(v) };
            }
        }
    };
    const COLS: usize = 32;
    if m * n * k >= 1 << 18 && crate::cpu::threads() > 1 {
        use rayon::prelude::*;
        (0..n.div_ceil(COLS))
            .into_par_iter()
            .for_each(|c| block(c * COLS, (c * COLS + COLS).min(n)));
    } else {
        block(0, n);
    }
    // SAFETY: every (i, j) of the output was written above
    unsafe { out.set_len(len) };
    Ok(out)
}

/// The output of [`dot_products`], written by several threads at disjoint positions.
struct OutPtr<T>(*mut T);
// SAFETY: the threads write disjoint elements of one buffer that outlives them.
unsafe impl<T: Send> Sync for OutPtr<T> {}
impl<T> OutPtr<T> {
    /// Element `i` (a method, so closures capture the whole `OutPtr`, which is `Sync`).
    fn at(&self, i: usize) -> *mut T {
        // SAFETY: callers pass positions inside the buffer
        unsafe { self.0.add(i) }
    }
}

/// Lanes of the running sums of [`dots`].
const LANES: usize = 16;

/// The sum of `acc`'s lanes, pairwise.
#[inline(always)]
fn lane_sum<T: Float>(mut acc: [T; LANES]) -> T {
    let mut w = LANES;
    while w > 1 {
        w /= 2;
        for l in 0..w {
            acc[l] = acc[l] + acc[l + w];
        }
    }
    acc[0]
}

multiversion! {
    /// `out[i] = a[i * ars ..][..k] . w` for `i < out.len()`, `k = w.len()`: four rows of
    /// `a` at a time share each load of `w`.
    fn dots<T: Float>(a: &[T], ars: usize, m: usize, w: &[T], out: &mut [T]) {
        let k = w.len();
        let full = k / LANES * LANES;
        let mut i = 0;
        while i < m {
            // four rows at a time (the last rows repeated to fill four; their sums dropped)
            let row = |t: usize| {
                let r = (i + t).min(m - 1);
                &a[r * ars..r * ars + k]
            };
            let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
            let (mut a0, mut a1, mut a2, mut a3) = ([T::ZERO; LANES], [T::ZERO; LANES], [T::ZERO; LANES], [T::ZERO; LANES]);
            let chunks = r0
                .chunks_exact(LANES)
                .zip(r1.chunks_exact(LANES))
                .zip(r2.chunks_exact(LANES))
                .zip(r3.chunks_exact(LANES))
                .zip(w.chunks_exact(LANES));
            for ((((p0, p1), p2), p3), q) in chunks {
                for l in 0..LANES {
                    a0[l] = a0[l] + p0[l] * q[l];
                    a1[l] = a1[l] + p1[l] * q[l];
                    a2[l] = a2[l] + p2[l] * q[l];
                    a3[l] = a3[l] + p3[l] * q[l];
                }
            }
            for (t, (r, acc)) in [(r0, a0), (r1, a1), (r2, a2), (r3, a3)].into_iter().enumerate() {
                if i + t < m {
                    let mut tail = T::ZERO;
                    for c in full..k {
                        tail = tail + r[c] * w[c];
                    }
                    out[i + t] = lane_sum(acc) + tail;
                }
            }
            i += 4;
        }
    }
}

fn batched<T>(
    a: &[T],
    la: &Layout,
    b: &[T],
    lb: &Layout,
    zero: T,
    one: T,
    // `s + p * q` for a kernel without `gemm` (integers); `None` uses `gemm`
    mul_add: Option<&dyn Fn(T, T, T) -> T>,
) -> Result<Vec<T>>
where
    T: Copy + Send + Sync + 'static + crate::storage::pool::Pooled,
{
    let nd = la.ndim();
    let (m, k, n) = (la.shape()[nd - 2], la.shape()[nd - 1], lb.shape()[nd - 1]);
    let batch_shape = &la.shape()[..nd - 2];
    let batches = numel(batch_shape);
    let len = batches * m * n;
    if m == 0 || n == 0 || k == 0 || mul_add.is_some() {
        // nothing for gemm to write (an empty sum is zero), or the integer loop below
        let mut out = crate::storage::pool::filled(len, zero)?;
        if k > 0 {
            if let Some(mul_add) = mul_add {
                int_products(a, la, b, lb, zero, mul_add, &mut out);
            }
        }
        return Ok(out);
    }
    // gemm writes every element of the output (it does not read it): no zero fill first
    let mut out: Vec<T> = crate::storage::pool::take(len)?;
    let base = out.as_mut_ptr();
    let (ars, acs) = (la.strides()[nd - 2], la.strides()[nd - 1]);
    let (brs, bcs) = (lb.strides()[nd - 2], lb.strides()[nd - 1]);
    let bstr = contiguous_strides(batch_shape);
    let big = m * n * k >= 96 * 96 * 96;
    let threads = crate::cpu::threads();
    // many products, each small next to the whole: the batches in parallel, one thread each
    // (a product of attention's 256 x 64 x 256 splits badly across threads)
    let across = batches >= 2 * threads && threads > 1 && m * n * k <= 1 << 24;
    let par = if big && !across {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    let offsets = |bi: usize| {
        // batch multi-index -> offsets into a and b
        let (mut oa, mut ob) = (la.offset() as isize, lb.offset() as isize);
        let mut rem = bi;
        for d in 0..batch_shape.len() {
            let i = rem / bstr[d] as usize;
            rem %= bstr[d] as usize;
            oa += i as isize * la.strides()[d];
            ob += i as isize * lb.strides()[d];
        }
        (oa, ob)
    };
    // one large product at a time: the loaded OpenBLAS where it is the faster (cpu/blas.rs).
    // Only for products of 2^26 multiply-adds and more: after each call OpenBLAS's threads
    // spin for a while, which slowed the work between smaller products (a conv step with a
    // 64 x 1568 x 10 linear layer ran 1.5x slower on 2 cores) more than BLAS gained.
    let blas =
        matches!(par, gemm::Parallelism::Rayon(_)) && m * n * k >= 1 << 26 && super::blas::in_use();
    let product = |bi: usize, dst: *mut T| {
        let (oa, ob) = offsets(bi);
        // SAFETY: as for gemm below
        if blas
            && unsafe {
                super::blas::product(
                    m,
                    n,
                    k,
                    dst,
                    a.as_ptr().offset(oa),
                    (ars, acs),
                    b.as_ptr().offset(ob),
                    (brs, bcs),
                    threads,
                )
            }
        {
            return;
        }
        // SAFETY: the pointers address elements (0, 0) of views whose every element lies
        // inside `a`, `b` and the output's capacity (layouts are validated when views are
        // made; `dst` has room for one batch's m * n), and the destination does not alias
        // the sources.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                dst,
                1,
                n as isize,
                false,
                a.as_ptr().offset(oa),
                acs,
                ars,
                b.as_ptr().offset(ob),
                bcs,
                brs,
                zero,
                one,
                false,
                false,
                false,
                par,
            );
        }
    };
    if across && batches * m * n * k >= 96 * 96 * 96 {
        use rayon::prelude::*;
        out.spare_capacity_mut()[..len]
            .par_chunks_mut(m * n)
            .enumerate()
            .for_each(|(bi, dst)| product(bi, dst.as_mut_ptr().cast::<T>()));
    } else {
        for bi in 0..batches {
            // SAFETY: batch bi's m * n elements lie inside the output's capacity
            product(bi, unsafe { base.add(bi * m * n) });
        }
    }
    // SAFETY: gemm wrote all `len` elements above
    unsafe { out.set_len(len) };
    Ok(out)
}

/// Integer products (no `gemm`): `out[b, i, j] = sum_p a[b, i, p] * b[b, p, j]` with
/// `mul_add(s, p, q) = s + p * q`, over every batch.
fn int_products<T: Copy>(
    a: &[T],
    la: &Layout,
    b: &[T],
    lb: &Layout,
    zero: T,
    mul_add: &dyn Fn(T, T, T) -> T,
    out: &mut [T],
) {
    let nd = la.ndim();
    let (m, k, n) = (la.shape()[nd - 2], la.shape()[nd - 1], lb.shape()[nd - 1]);
    let batch_shape = &la.shape()[..nd - 2];
    let (ars, acs) = (la.strides()[nd - 2], la.strides()[nd - 1]);
    let (brs, bcs) = (lb.strides()[nd - 2], lb.strides()[nd - 1]);
    let bstr = contiguous_strides(batch_shape);
    for bi in 0..numel(batch_shape) {
        let (mut oa, mut ob) = (la.offset() as isize, lb.offset() as isize);
        let mut rem = bi;
        for d in 0..batch_shape.len() {
            let i = rem / bstr[d] as usize;
            rem %= bstr[d] as usize;
            oa += i as isize * la.strides()[d];
            ob += i as isize * lb.strides()[d];
        }
        let dst = &mut out[bi * m * n..(bi + 1) * m * n];
        for i in 0..m {
            for j in 0..n {
                let mut s = zero;
                for p in 0..k {
                    let x = a[(oa + i as isize * ars + p as isize * acs) as usize];
                    let y = b[(ob + p as isize * brs + j as isize * bcs) as usize];
                    s = mul_add(s, x, y);
                }
                dst[i * n + j] = s;
            }
        }
    }
}
