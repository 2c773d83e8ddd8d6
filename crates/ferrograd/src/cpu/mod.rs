//! CPU kernels. Each takes buffers with their layouts and returns a new contiguous buffer;
//! shape checks happen before, in the op layer.

mod conv;
mod elementwise;
mod index;
mod matmul;
pub(crate) mod pool;
mod reduce;

pub use conv::Window;
pub(crate) use conv::{fold, pool_argmax, unfold};
pub(crate) use elementwise::{
    act_grad, binary, binary_assign, cast, compare, copy, pow_scalar, unary, where_,
};
pub(crate) use index::{concat, gather, scatter_add, set_slice, slice_grad};
pub(crate) use matmul::matmul;
pub(crate) use reduce::{reduce, softmax};

use crate::layout::{for_each_run, for_each_run_multi, Layout};

/// Position of element `i` of a run starting at `base` with `stride`.
#[inline(always)]
pub(crate) fn at(base: usize, stride: isize, i: usize) -> usize {
    (base as isize + stride * i as isize) as usize
}

/// Elements per task when a large contiguous elementwise op is split across threads.
const PAR_CHUNK: usize = 1 << 16;

/// Fills `out` (empty, with capacity for `n`) with `f(i-th chunk)` in parallel chunks.
fn par_fill<V: Send>(
    out: &mut Vec<V>,
    n: usize,
    f: impl Fn(usize, &mut [std::mem::MaybeUninit<V>]) + Sync + Send,
) {
    use rayon::prelude::*;
    out.spare_capacity_mut()[..n]
        .par_chunks_mut(PAR_CHUNK)
        .enumerate()
        .for_each(|(c, dst)| f(c * PAR_CHUNK, dst));
    // SAFETY: every chunk of the first `n` slots was written by `f`.
    unsafe { out.set_len(n) };
}

/// Applies `f` to every element of a strided view, in row-major order.
pub(crate) fn map1<T: Copy + Sync, U: pool::Pooled + Send>(
    x: &[T],
    l: &Layout,
    f: impl Fn(T) -> U + Sync + Send,
) -> Vec<U> {
    let n = l.numel();
    let mut out = pool::take(n);
    if n >= 4 * PAR_CHUNK && l.is_contiguous() && rayon::current_num_threads() > 1 {
        let src = &x[l.offset()..l.offset() + n];
        par_fill(&mut out, n, |start, dst| {
            for (o, &v) in dst.iter_mut().zip(&src[start..]) {
                o.write(f(v));
            }
        });
        return out;
    }
    for_each_run(l, |b, s, n| {
        if s == 1 {
            out.extend(x[b..b + n].iter().map(|&v| f(v)));
        } else {
            out.extend((0..n).map(|i| f(x[at(b, s, i)])));
        }
    });
    out
}

/// Applies `f` elementwise to two views of one shape (broadcast views have stride 0).
pub(crate) fn map2<T: Copy + Sync, U: Copy + Sync, V: pool::Pooled + Send>(
    a: &[T],
    la: &Layout,
    b: &[U],
    lb: &Layout,
    f: impl Fn(T, U) -> V + Sync + Send,
) -> Vec<V> {
    let n = la.numel();
    let mut out = pool::take(n);
    if n >= 4 * PAR_CHUNK && rayon::current_num_threads() > 1 {
        let scalar_b = lb.strides().iter().all(|&s| s == 0);
        if la.is_contiguous() && (lb.is_contiguous() || scalar_b) {
            let xa = &a[la.offset()..la.offset() + n];
            let ob = lb.offset();
            par_fill(&mut out, n, |start, dst| {
                if scalar_b {
                    let y = b[ob];
                    for (o, &x) in dst.iter_mut().zip(&xa[start..]) {
                        o.write(f(x, y));
                    }
                } else {
                    for ((o, &x), &y) in dst.iter_mut().zip(&xa[start..]).zip(&b[ob + start..]) {
                        o.write(f(x, y));
                    }
                }
            });
            return out;
        }
    }
    for_each_run_multi([la, lb], |[ba, bb], [sa, sb], n| match (sa, sb) {
        (1, 1) => out.extend(
            a[ba..ba + n]
                .iter()
                .zip(&b[bb..bb + n])
                .map(|(&x, &y)| f(x, y)),
        ),
        (1, 0) => {
            let y = b[bb];
            out.extend(a[ba..ba + n].iter().map(|&x| f(x, y)))
        }
        (0, 1) => {
            let x = a[ba];
            out.extend(b[bb..bb + n].iter().map(|&y| f(x, y)))
        }
        _ => out.extend((0..n).map(|i| f(a[at(ba, sa, i)], b[at(bb, sb, i)]))),
    });
    out
}

/// Applies `f` elementwise to three views of one shape.
pub(crate) fn map3<T: Copy, U: Copy, W: Copy, V: pool::Pooled>(
    a: &[T],
    la: &Layout,
    b: &[U],
    lb: &Layout,
    c: &[W],
    lc: &Layout,
    f: impl Fn(T, U, W) -> V,
) -> Vec<V> {
    let mut out = pool::take(la.numel());
    for_each_run_multi([la, lb, lc], |[ba, bb, bc], [sa, sb, sc], n| {
        out.extend((0..n).map(|i| f(a[at(ba, sa, i)], b[at(bb, sb, i)], c[at(bc, sc, i)])))
    });
    out
}

/// Writes the elements of `src` (viewed by `ls`) into the positions of `out` viewed by `lo`.
pub(crate) fn write_into<T: Copy>(out: &mut [T], lo: &Layout, src: &[T], ls: &Layout) {
    for_each_run_multi([lo, ls], |[bo, bs], [so, ss], n| {
        if so == 1 && ss == 1 {
            out[bo..bo + n].copy_from_slice(&src[bs..bs + n]);
        } else {
            for i in 0..n {
                out[at(bo, so, i)] = src[at(bs, ss, i)];
            }
        }
    });
}
