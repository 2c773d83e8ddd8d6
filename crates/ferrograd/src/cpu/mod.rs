//! CPU kernels. Each takes buffers with their layouts and returns a new contiguous buffer;
//! shape checks happen before, in the op layer.

mod conv;
mod elementwise;
mod index;
mod matmul;
mod reduce;

pub use conv::Window;
pub(crate) use conv::{fold, unfold};
pub(crate) use elementwise::{binary, cast, compare, copy, pow_scalar, unary, where_};
pub(crate) use index::{concat, gather, scatter_add, set_slice, slice_grad};
pub(crate) use matmul::matmul;
pub(crate) use reduce::{reduce, softmax};

use crate::layout::{for_each_run, for_each_run_multi, Layout};

/// Position of element `i` of a run starting at `base` with `stride`.
#[inline(always)]
pub(crate) fn at(base: usize, stride: isize, i: usize) -> usize {
    (base as isize + stride * i as isize) as usize
}

/// Applies `f` to every element of a strided view, in row-major order.
pub(crate) fn map1<T: Copy, U>(x: &[T], l: &Layout, f: impl Fn(T) -> U) -> Vec<U> {
    let mut out = Vec::with_capacity(l.numel());
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
pub(crate) fn map2<T: Copy, U: Copy, V>(
    a: &[T],
    la: &Layout,
    b: &[U],
    lb: &Layout,
    f: impl Fn(T, U) -> V,
) -> Vec<V> {
    let mut out = Vec::with_capacity(la.numel());
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
pub(crate) fn map3<T: Copy, U: Copy, W: Copy, V>(
    a: &[T],
    la: &Layout,
    b: &[U],
    lb: &Layout,
    c: &[W],
    lc: &Layout,
    f: impl Fn(T, U, W) -> V,
) -> Vec<V> {
    let mut out = Vec::with_capacity(la.numel());
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
