//! Matrix products through the `gemm` crate (any strides, so transposed views need no copy).

use crate::error::{Error, Result};
use crate::layout::{contiguous_strides, numel, Layout};
use crate::storage::CpuData;

/// Products of every batch: `a` is `[batch..., m, k]`, `b` is `[batch..., k, n]`, both already
/// broadcast to one batch shape. The result is contiguous `[batch..., m, n]`.
pub(crate) fn matmul(a: &CpuData, la: &Layout, b: &CpuData, lb: &Layout) -> Result<CpuData> {
    Ok(match (a, b) {
        (CpuData::F32(x), CpuData::F32(y)) => CpuData::F32(batched(x, la, y, lb, 0.0, 1.0, None)?),
        (CpuData::F64(x), CpuData::F64(y)) => CpuData::F64(batched(x, la, y, lb, 0.0, 1.0, None)?),
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
    let threads = rayon::current_num_threads();
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
