//! Scaled dot-product attention, one head at a time, heads in parallel: the scores of a
//! block of query rows are computed, softmaxed and used while they are in cache, so the
//! `[L, S]` score and probability matrices of the whole batch never exist. The backward
//! recomputes each block's probabilities from `q` and `k` instead of keeping them. With
//! `causal`, a block of rows reads only the keys its last row may see.

use std::mem::MaybeUninit;

use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::storage::CpuData;

use super::float::Float;

/// Query rows per block: the block's scores (`ROWS x S`) stay in L2.
const ROWS: usize = 64;

/// The problem's sizes: `heads` independent products of `[l, e] x [s, e] -> [l, ev]`.
#[derive(Clone, Copy)]
pub(crate) struct Dims {
    pub heads: usize,
    pub l: usize,
    pub s: usize,
    pub e: usize,
    pub ev: usize,
    pub scale: f64,
    pub causal: bool,
}

impl Dims {
    /// The sizes of `q [.., l, e]`, `k [.., s, e]`, `v [.., s, ev]` (checked by the op).
    pub(crate) fn new(lq: &Layout, lk: &Layout, lv: &Layout, scale: f64, causal: bool) -> Dims {
        let (sq, sk, sv) = (lq.shape(), lk.shape(), lv.shape());
        let nd = sq.len();
        Dims {
            heads: sq[..nd - 2].iter().product(),
            l: sq[nd - 2],
            s: sk[nd - 2],
            e: sq[nd - 1],
            ev: sv[nd - 1],
            scale,
            causal,
        }
    }
    /// Keys a block of rows ending (exclusive) at `r1` reads.
    fn keys(&self, r1: usize) -> usize {
        if self.causal {
            r1.min(self.s)
        } else {
            self.s
        }
    }
    /// Keys row `r` sees.
    fn row_keys(&self, r: usize) -> usize {
        if self.causal {
            (r + 1).min(self.s)
        } else {
            self.s
        }
    }
}

/// Float types with a gemm kernel and a row softmax.
pub(crate) trait AttnFloat: Float + Send + Sync + 'static {
    /// Softmax of `row[..n]` in place (`n >= 1`), zeros written to `row[n..]`.
    fn softmax_prefix(row: &mut [Self], n: usize);
}

#[inline(always)]
fn softmax_prefix_scalar<T: Float>(row: &mut [T], n: usize) {
    let (head, rest) = row.split_at_mut(n);
    let mut mx = head[0];
    for &v in head.iter() {
        mx = if v > mx { v } else { mx };
    }
    let mut s = T::ZERO;
    for v in head.iter_mut() {
        *v = (*v - mx).exp();
        s = s + *v;
    }
    let inv = T::ONE / s;
    for v in head.iter_mut() {
        *v = *v * inv;
    }
    rest.fill(T::ZERO);
}

impl AttnFloat for f32 {
    fn softmax_prefix(row: &mut [f32], n: usize) {
        #[cfg(target_arch = "x86_64")]
        if super::wide_simd() {
            // SAFETY: the CPU has the features the function is compiled for.
            return unsafe { wide::softmax_prefix(row, n) };
        }
        softmax_prefix_scalar(row, n)
    }
}

impl AttnFloat for f64 {
    fn softmax_prefix(row: &mut [f64], n: usize) {
        softmax_prefix_scalar(row, n)
    }
}

#[cfg(target_arch = "x86_64")]
mod wide {
    use super::super::simd::{exp_sum_inplace_ps, max_ps, scale_ps};

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn softmax_prefix(row: &mut [f32], n: usize) {
        let (head, rest) = row.split_at_mut(n);
        // SAFETY: this function has the features `simd` needs
        unsafe {
            let mx = max_ps(head);
            let s = exp_sum_inplace_ps(head, mx);
            scale_ps(head, 1.0 / s);
        }
        rest.fill(0.0);
    }
}

/// `dst (m x n, row stride dst_rs) = alpha * dst + beta * lhs (m x k) * rhs (k x n)`, with
/// the operands given by pointers and (column, row) strides; one thread.
///
/// # Safety
/// Every addressed element must lie inside its buffer, and `dst` must not overlap the others.
#[allow(clippy::too_many_arguments)]
#[inline]
unsafe fn mm<T: AttnFloat>(
    (m, n, k): (usize, usize, usize),
    dst: *mut T,
    dst_rs: usize,
    accumulate: bool,
    lhs: (*const T, usize, usize),
    rhs: (*const T, usize, usize),
    beta: T,
) {
    if m == 0 || n == 0 {
        return;
    }
    gemm::gemm(
        m,
        n,
        k,
        dst,
        1,
        dst_rs as isize,
        accumulate,
        lhs.0,
        lhs.1 as isize,
        lhs.2 as isize,
        rhs.0,
        rhs.1 as isize,
        rhs.2 as isize,
        T::ONE,
        beta,
        false,
        false,
        false,
        gemm::Parallelism::None,
    );
}

/// Runs `f(head)` over the heads, in parallel when there is enough work.
fn per_head<C: Send>(d: &Dims, chunks: Vec<C>, f: impl Fn(usize, C) + Sync + Send) {
    let work = d.heads * d.l * d.s * (d.e + d.ev);
    if d.heads > 1 && work >= 1 << 20 && crate::cpu::threads() > 1 {
        use rayon::prelude::*;
        chunks
            .into_par_iter()
            .enumerate()
            .with_max_len(1)
            .for_each(|(h, c)| f(h, c));
    } else {
        chunks.into_iter().enumerate().for_each(|(h, c)| f(h, c));
    }
}

/// The forward of every head: `out[h] = softmax(scale * q[h] k[h]^T (masked)) v[h]`.
fn forward<T: AttnFloat>(q: &[T], k: &[T], v: &[T], d: Dims) -> Result<Vec<T>> {
    let (l, s, e, ev) = (d.l, d.s, d.e, d.ev);
    let len = d.heads * l * ev;
    let mut out = crate::storage::pool::take::<T>(len)?;
    {
        let chunks: Vec<&mut [MaybeUninit<T>]> = if l * ev == 0 {
            Vec::new()
        } else {
            out.spare_capacity_mut()[..len].chunks_mut(l * ev).collect()
        };
        let beta = T::from_f64(d.scale);
        per_head(&d, chunks, |h, o| {
            let (qh, kh, vh) = (&q[h * l * e..], &k[h * s * e..], &v[h * s * ev..]);
            let mut p = vec![T::ZERO; ROWS.min(l) * s];
            let op = o.as_mut_ptr().cast::<T>();
            for r0 in (0..l).step_by(ROWS) {
                let r1 = (r0 + ROWS).min(l);
                let (rb, kn) = (r1 - r0, d.keys(r1));
                // SAFETY: the blocks lie inside the head's q, k, v, the scratch `p` (rb rows
                // of stride s) and the head's output rows r0..r1; `p` and the output are
                // this task's own
                unsafe {
                    // scores = scale * q_blk k^T
                    mm(
                        (rb, kn, e),
                        p.as_mut_ptr(),
                        s,
                        false,
                        (qh.as_ptr().add(r0 * e), 1, e),
                        (kh.as_ptr(), e, 1),
                        beta,
                    );
                }
                for i in 0..rb {
                    T::softmax_prefix(&mut p[i * s..i * s + kn], d.row_keys(r0 + i));
                }
                // SAFETY: as above; out rows r0..r1 are written whole (kn >= 1 here)
                unsafe {
                    mm(
                        (rb, ev, kn),
                        op.add(r0 * ev),
                        ev,
                        false,
                        (p.as_ptr(), 1, s),
                        (vh.as_ptr(), 1, ev),
                        T::ONE,
                    );
                }
            }
        });
    }
    // SAFETY: every head's rows were written by its products (s >= 1 is checked by the op)
    unsafe { out.set_len(len) };
    Ok(out)
}

/// One head's `dq` and (`dk`, `dv`).
type HeadGrads<'a, T> = (&'a mut [T], (&'a mut [T], &'a mut [T]));

/// The gradients of every head, `[dq | dk | dv]` in one buffer (each in its input's shape).
fn backward<T: AttnFloat>(
    q: &[T],
    k: &[T],
    v: &[T],
    o: &[T],
    dout: &[T],
    d: Dims,
) -> Result<Vec<T>> {
    let (l, s, e, ev) = (d.l, d.s, d.e, d.ev);
    let (nq, nk, nv) = (d.heads * l * e, d.heads * s * e, d.heads * s * ev);
    let mut out = crate::storage::pool::filled::<T>(nq + nk + nv, T::ZERO)?;
    {
        let (dq, rest) = out.split_at_mut(nq);
        let (dk, dv) = rest.split_at_mut(nk);
        let chunks: Vec<HeadGrads<'_, T>> = if l * e == 0 || s == 0 {
            Vec::new()
        } else {
            dq.chunks_mut(l * e)
                .zip(dk.chunks_mut(s * e).zip(dv.chunks_mut((s * ev).max(1))))
                .collect()
        };
        let sc = T::from_f64(d.scale);
        per_head(&d, chunks, |h, (dqh, (dkh, dvh))| {
            let (qh, kh, vh) = (&q[h * l * e..], &k[h * s * e..], &v[h * s * ev..]);
            let (oh, gh) = (&o[h * l * ev..(h + 1) * l * ev], &dout[h * l * ev..]);
            let rows = ROWS.min(l);
            let mut p = vec![T::ZERO; rows * s];
            let mut dp = vec![T::ZERO; rows * s];
            // D_i = sum_c dO[i, c] * O[i, c]
            let dots: Vec<T> = (0..l)
                .map(|i| {
                    let (a, b) = (&oh[i * ev..(i + 1) * ev], &gh[i * ev..(i + 1) * ev]);
                    a.iter().zip(b).fold(T::ZERO, |acc, (&x, &y)| acc + x * y)
                })
                .collect();
            for r0 in (0..l).step_by(ROWS) {
                let r1 = (r0 + ROWS).min(l);
                let (rb, kn) = (r1 - r0, d.keys(r1));
                let (qb, gb) = (qh[r0 * e..].as_ptr(), gh[r0 * ev..].as_ptr());
                // SAFETY (each product): the blocks lie inside the head's inputs, the scratch
                // matrices (rb rows of stride s) and the head's gradient chunks, which are
                // this task's own and distinct from its inputs
                unsafe {
                    // P = softmax(scale * q_blk k^T), recomputed
                    mm(
                        (rb, kn, e),
                        p.as_mut_ptr(),
                        s,
                        false,
                        (qb, 1, e),
                        (kh.as_ptr(), e, 1),
                        sc,
                    );
                }
                for i in 0..rb {
                    T::softmax_prefix(&mut p[i * s..i * s + kn], d.row_keys(r0 + i));
                }
                unsafe {
                    // dV[..kn] += P^T dO_blk
                    mm(
                        (kn, ev, rb),
                        dvh.as_mut_ptr(),
                        ev,
                        true,
                        (p.as_ptr(), s, 1),
                        (gb, 1, ev),
                        T::ONE,
                    );
                    // dP = dO_blk v^T
                    mm(
                        (rb, kn, ev),
                        dp.as_mut_ptr(),
                        s,
                        false,
                        (gb, 1, ev),
                        (vh.as_ptr(), ev, 1),
                        T::ONE,
                    );
                }
                // dS = P * (dP - D)
                for i in 0..rb {
                    let di = dots[r0 + i];
                    let (pr, dr) = (&p[i * s..i * s + kn], &mut dp[i * s..i * s + kn]);
                    for (g, &pv) in dr.iter_mut().zip(pr) {
                        *g = pv * (*g - di);
                    }
                }
                unsafe {
                    // dQ_blk = scale * dS k
                    mm(
                        (rb, e, kn),
                        dqh.as_mut_ptr().add(r0 * e),
                        e,
                        false,
                        (dp.as_ptr(), 1, s),
                        (kh.as_ptr(), 1, e),
                        sc,
                    );
                    // dK[..kn] += scale * dS^T q_blk
                    mm(
                        (kn, e, rb),
                        dkh.as_mut_ptr(),
                        e,
                        true,
                        (dp.as_ptr(), s, 1),
                        (qb, 1, e),
                        sc,
                    );
                }
            }
        });
    }
    Ok(out)
}

fn dims_error(op: &str) -> Error {
    Error::dtype(
        op,
        "query, key and value must all be float32 or all float64".to_string(),
    )
}

/// Attention of `q [.., l, e]`, `k [.., s, e]`, `v [.., s, ev]` (same leading axes);
/// `[.., l, ev]` contiguous.
pub(crate) fn attention(
    q: (&CpuData, &Layout),
    k: (&CpuData, &Layout),
    v: (&CpuData, &Layout),
    d: Dims,
) -> Result<CpuData> {
    macro_rules! go {
        ($variant:ident) => {
            if let (CpuData::$variant(a), CpuData::$variant(b), CpuData::$variant(c)) =
                (q.0, k.0, v.0)
            {
                let (a, b, c) = (
                    super::contiguous(a, q.1)?,
                    super::contiguous(b, k.1)?,
                    super::contiguous(c, v.1)?,
                );
                return Ok(CpuData::$variant(forward(&a, &b, &c, d)?));
            }
        };
    }
    go!(F32);
    go!(F64);
    Err(dims_error("scaled_dot_product_attention"))
}

/// The gradients of [`attention`] from its inputs, output and output gradient:
/// `[dq | dk | dv]` flat.
pub(crate) fn attention_grad(
    q: (&CpuData, &Layout),
    k: (&CpuData, &Layout),
    v: (&CpuData, &Layout),
    o: (&CpuData, &Layout),
    dout: (&CpuData, &Layout),
    d: Dims,
) -> Result<CpuData> {
    macro_rules! go {
        ($variant:ident) => {
            if let (
                CpuData::$variant(a),
                CpuData::$variant(b),
                CpuData::$variant(c),
                CpuData::$variant(x),
                CpuData::$variant(g),
            ) = (q.0, k.0, v.0, o.0, dout.0)
            {
                let (a, b, c) = (
                    super::contiguous(a, q.1)?,
                    super::contiguous(b, k.1)?,
                    super::contiguous(c, v.1)?,
                );
                let (x, g) = (super::contiguous(x, o.1)?, super::contiguous(g, dout.1)?);
                return Ok(CpuData::$variant(backward(&a, &b, &c, &x, &g, d)?));
            }
        };
    }
    go!(F32);
    go!(F64);
    Err(dims_error("scaled_dot_product_attention_grad"))
}
