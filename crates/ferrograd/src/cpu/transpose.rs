//! Copies of transposed views in tiles.
//!
//! Reading a view whose last axis is strided one element at a time touches a new cache line
//! per element; when the stride is a multiple of 4 KiB (a transposed 1024-wide float32
//! matrix) those lines all fall in one cache set and evict each other long before the next
//! element of each line is used. Here the view is walked in square tiles over its last axis
//! and an axis that is contiguous in the source: a tile is read line by line into a small
//! buffer, then written out row by row, so every line is read and written whole, once.

use std::mem::MaybeUninit;

use crate::layout::{contiguous_strides, Layout};

/// Tile side, in elements: a tile of the widest element (8 bytes) is 32 KiB. Smaller tiles
/// (16) read one cache line per column and page, and a 2048 x 2048 float32 transpose then ran
/// 2.4x slower than PyTorch's (page-table misses); with 64 it runs as fast (AMD Zen 4).
const TILE: usize = 64;
/// Shortest axes worth tiling.
const MIN_SIDE: usize = 8;

/// Where a view fits the tiled copy: the axis (not the last) with unit stride, when the last
/// axis is strided and both are long enough for tiles to pay, and the view large enough.
pub(crate) fn transposed_axis(l: &Layout) -> Option<usize> {
    let (shape, strides) = (l.shape(), l.strides());
    let nd = shape.len();
    if nd < 2 || l.numel() < 4096 || shape[nd - 1] < MIN_SIDE || strides[nd - 1].unsigned_abs() <= 1
    {
        return None;
    }
    (0..nd - 1)
        .rev()
        .find(|&j| strides[j] == 1 && shape[j] >= MIN_SIDE)
}

/// Raw output pointer shared by the tasks of one copy, which write disjoint elements.
struct Out<U>(*mut MaybeUninit<U>);
// SAFETY: the tasks write disjoint elements of one buffer that outlives them.
unsafe impl<U: Send> Sync for Out<U> {}

impl<U> Out<U> {
    /// The slot at `i` (a method, so closures capture the whole `Out`, which is `Sync`).
    fn at(&self, i: usize) -> *mut MaybeUninit<U> {
        // SAFETY: callers pass positions inside the buffer
        unsafe { self.0.add(i) }
    }
}

/// Writes `f(x[e])` for every element `e` of the view `l`, in row-major order, into `out`
/// (exactly `l.numel()` slots), where `j = transposed_axis(l)`.
pub(crate) fn fill_transposed<T: Copy + Sync, U: Send>(
    x: &[T],
    l: &Layout,
    j: usize,
    out: &mut [MaybeUninit<U>],
    f: &(impl Fn(T) -> U + Sync),
) {
    let (shape, strides) = (l.shape(), l.strides());
    let nd = shape.len();
    assert_eq!(out.len(), l.numel(), "fill_transposed: output length");
    let ostr = contiguous_strides(shape);
    let (rows, cols) = (shape[j], shape[nd - 1]);
    let (col_in, row_out) = (strides[nd - 1], ostr[j] as usize);
    // the other axes: one plane (rows x cols) per multi-index of them
    let outer: Vec<(usize, isize, usize)> = (0..nd - 1)
        .filter(|&d| d != j)
        .map(|d| (shape[d], strides[d], ostr[d] as usize))
        .collect();
    let planes: usize = outer.iter().map(|o| o.0).product();
    let row_tiles = rows.div_ceil(TILE);
    let tasks = planes * row_tiles;
    let dst = Out(out.as_mut_ptr());
    let task = |t: usize| {
        let (mut p, rt) = (t / row_tiles, t % row_tiles);
        let (mut bi, mut bo) = (l.offset() as isize, 0usize);
        for &(n, si, so) in outer.iter().rev() {
            let i = p % n;
            p /= n;
            bi += i as isize * si;
            bo += i * so;
        }
        let r0 = rt * TILE;
        let rn = TILE.min(rows - r0);
        let mut buf = [MaybeUninit::<T>::uninit(); TILE * TILE];
        for c0 in (0..cols).step_by(TILE) {
            let cn = TILE.min(cols - c0);
            // read: one source line (rn contiguous elements) per column
            for c in 0..cn {
                let s = (bi + r0 as isize + (c0 + c) as isize * col_in) as usize;
                for (b, &v) in buf[c * TILE..c * TILE + rn].iter_mut().zip(&x[s..s + rn]) {
                    b.write(v);
                }
            }
            // write: one output row (cn contiguous elements) per row of the tile
            for r in 0..rn {
                let o = bo + (r0 + r) * row_out + c0;
                for c in 0..cn {
                    // SAFETY: buf[c * TILE + r] was written above (r < rn, c < cn); the
                    // output slot `o + c` lies in `out` (a row-major position of the view)
                    // and belongs to this task alone (its plane and rows).
                    unsafe {
                        let v = buf[c * TILE + r].assume_init();
                        (*dst.at(o + c)).write(f(v));
                    }
                }
            }
        }
    };
    if tasks > 1 && out.len() >= 1 << 18 && crate::cpu::threads() > 1 {
        use rayon::prelude::*;
        (0..tasks).into_par_iter().with_min_len(4).for_each(task);
    } else {
        (0..tasks).for_each(task);
    }
}
