//! Convolution and max pooling kernels over NCHW tensors, one image at a time.
//!
//! A convolution of one image and one group is one matrix product: the weights `[og, ck]`
//! times the image's columns `[ck, oh*ow]` (im2col, built in a per-thread scratch buffer,
//! skipped for 1x1 kernels of stride 1 and no padding), written straight into the NCHW
//! output. The input gradient is the transposed product followed by col2im; the weight
//! gradient accumulates `dy [og, oh*ow]` times the columns transposed. Images are spread
//! over threads (each thread's matrix products run single-threaded); with fewer images than
//! threads the matrix products themselves run in parallel instead.

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::storage::CpuData;
use crate::window::{ConvShape, Window};

impl ConvShape {
    fn cg(&self) -> usize {
        self.c / self.groups
    }
    fn og(&self) -> usize {
        self.o / self.groups
    }
    /// Rows of one group's column matrix: input channels times kernel taps.
    fn ck(&self) -> usize {
        self.cg() * self.win.kernel.0 * self.win.kernel.1
    }
    /// Output positions per image.
    fn p(&self) -> usize {
        self.oh * self.ow
    }
    fn image_in(&self) -> usize {
        self.c * self.h * self.w
    }
    fn image_out(&self) -> usize {
        self.o * self.p()
    }
    /// A 1x1 kernel with stride 1 and no padding reads the image itself as its columns.
    fn pointwise(&self) -> bool {
        self.win.kernel == (1, 1) && self.win.stride == (1, 1) && self.win.padding == (0, 0)
    }
    /// Elements of the per-thread im2col buffer (none for a pointwise convolution).
    fn scratch(&self) -> usize {
        if self.pointwise() {
            0
        } else {
            self.ck() * self.p()
        }
    }
    /// Whether images are spread over threads (else the matrix products are).
    fn par_images(&self) -> bool {
        self.n > 1 && crate::cpu::threads() > 1
    }
    fn gemm_par(&self) -> gemm::Parallelism {
        if !self.par_images() && self.og() * self.ck() * self.p() >= 64 * 64 * 64 {
            gemm::Parallelism::Rayon(0)
        } else {
            gemm::Parallelism::None
        }
    }
}

/// Output positions `o` in `0..out` whose input position `o * stride + offset - pad` lies in
/// `0..size`, as an interval.
fn valid(out: usize, stride: usize, offset: usize, pad: usize, size: usize) -> (usize, usize) {
    let lo = if offset >= pad {
        0
    } else {
        (pad - offset).div_ceil(stride)
    };
    let hi = if size + pad <= offset {
        0
    } else {
        (size + pad - offset).div_ceil(stride)
    };
    let hi = hi.min(out);
    (lo.min(hi), hi)
}

/// Calls `f(row, oy, iy, lo, hi, ix0)` for every column-matrix row of channels
/// `0..channels` (each `(channel, ki, kj)`) and output row `oy`: input row `iy` (None in the
/// padding), output columns `lo..hi` read input columns `ix0 + (ox - lo) * stride`.
#[inline(always)]
fn for_each_tap(
    s: &ConvShape,
    channels: usize,
    mut f: impl FnMut(usize, usize, usize, Option<usize>, (usize, usize), usize),
) {
    let win = &s.win;
    let (kh, kw) = win.kernel;
    for ci in 0..channels {
        for ki in 0..kh {
            for kj in 0..kw {
                let row = (ci * kh + ki) * kw + kj;
                let (lo, hi) = valid(s.ow, win.stride.1, kj * win.dilation.1, win.padding.1, s.w);
                // the first input column read (none when every output column reads padding)
                let ix0 = if lo < hi {
                    lo * win.stride.1 + kj * win.dilation.1 - win.padding.1
                } else {
                    0
                };
                for oy in 0..s.oh {
                    // (in i128: a huge dilation or padding must not overflow)
                    let iy = (oy * win.stride.0) as i128 + (ki * win.dilation.0) as i128
                        - win.padding.0 as i128;
                    let iy = (iy >= 0 && iy < s.h as i128).then_some(iy as usize);
                    f(ci, row, oy, iy, (lo, hi), ix0);
                }
            }
        }
    }
}

/// im2col of `channels` planes of one image (`x` contiguous `[channels, h, w]`) into `cols`
/// `[channels * kh * kw, oh * ow]`.
fn im2col<T: Copy + Default>(x: &[T], s: &ConvShape, channels: usize, cols: &mut [T]) {
    let (p, ow, sw) = (s.p(), s.ow, s.win.stride.1);
    let plane = s.h * s.w;
    for_each_tap(s, channels, |ci, row, oy, iy, (lo, hi), ix0| {
        let dst = &mut cols[row * p + oy * ow..row * p + (oy + 1) * ow];
        let Some(iy) = iy else {
            dst.fill(T::default());
            return;
        };
        let src = &x[ci * plane + iy * s.w..ci * plane + (iy + 1) * s.w];
        dst[..lo].fill(T::default());
        dst[hi..].fill(T::default());
        if sw == 1 {
            dst[lo..hi].copy_from_slice(&src[ix0..ix0 + (hi - lo)]);
        } else {
            for (k, d) in dst[lo..hi].iter_mut().enumerate() {
                *d = src[ix0 + k * sw];
            }
        }
    });
}

/// One group's column matrix `[ck, oh * ow]` of `xg` (`[c / groups, h, w]`): the image itself
/// for a pointwise convolution, else its im2col in `buf`.
fn columns<'a, T: Copy + Default>(xg: &'a [T], s: &ConvShape, buf: &'a mut [T]) -> &'a [T] {
    if s.pointwise() {
        xg
    } else {
        im2col(xg, s, s.cg(), buf);
        buf
    }
}

/// col2im: the transpose of [`im2col`], adding `cols` into `dx` (`[channels, h, w]`).
fn col2im<T: Copy + std::ops::AddAssign>(cols: &[T], s: &ConvShape, channels: usize, dx: &mut [T]) {
    let (p, ow, sw) = (s.p(), s.ow, s.win.stride.1);
    let plane = s.h * s.w;
    for_each_tap(s, channels, |ci, row, oy, iy, (lo, hi), ix0| {
        let Some(iy) = iy else { return };
        let src = &cols[row * p + oy * ow + lo..row * p + oy * ow + hi];
        let dst = &mut dx[ci * plane + iy * s.w..ci * plane + (iy + 1) * s.w];
        if sw == 1 {
            for (d, &v) in dst[ix0..ix0 + (hi - lo)].iter_mut().zip(src) {
                *d += v;
            }
        } else {
            for (k, &v) in src.iter().enumerate() {
                dst[ix0 + k * sw] += v;
            }
        }
    });
}

/// `dst (m x n) = [dst +] lhs (m x k) * rhs (k x n)`, strides given as (row, column).
#[allow(clippy::too_many_arguments)]
#[inline]
fn gemm<T: 'static + Copy>(
    (m, n, k): (usize, usize, usize),
    dst: &mut [T],
    dst_rs: usize,
    accumulate: bool,
    lhs: &[T],
    (lrs, lcs): (usize, usize),
    rhs: &[T],
    (rrs, rcs): (usize, usize),
    one: T,
    par: gemm::Parallelism,
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!(
        dst.len() >= (m - 1) * dst_rs + n
            && (k == 0
                || (lhs.len() > (m - 1) * lrs + (k - 1) * lcs
                    && rhs.len() > (k - 1) * rrs + (n - 1) * rcs)),
        "conv gemm operands out of bounds"
    );
    // SAFETY: the assertion above keeps every element the product touches inside the three
    // slices, and `dst` is a unique borrow, so it aliases neither source.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            dst_rs as isize,
            accumulate,
            lhs.as_ptr(),
            lcs as isize,
            lrs as isize,
            rhs.as_ptr(),
            rcs as isize,
            rrs as isize,
            one,
            one,
            false,
            false,
            false,
            par,
        );
    }
}

/// Element types convolutions run on (what the `gemm` crate multiplies).
pub(crate) trait ConvFloat:
    Copy
    + Default
    + Send
    + Sync
    + 'static
    + std::ops::AddAssign
    + PartialOrd
    + crate::storage::pool::Pooled
{
    const ONE: Self;
    const NEG_INFINITY: Self;
}
impl ConvFloat for f32 {
    const ONE: f32 = 1.0;
    const NEG_INFINITY: f32 = f32::NEG_INFINITY;
}
impl ConvFloat for f64 {
    const ONE: f64 = 1.0;
    const NEG_INFINITY: f64 = f64::NEG_INFINITY;
}

/// Runs the float32 or float64 form of a kernel on two buffers of one float dtype.
fn float_pair(
    op: &str,
    a: &CpuData,
    b: &CpuData,
    f32s: impl FnOnce(&[f32], &[f32]) -> Result<Vec<f32>>,
    f64s: impl FnOnce(&[f64], &[f64]) -> Result<Vec<f64>>,
) -> Result<CpuData> {
    Ok(match (a, b) {
        (CpuData::F32(x), CpuData::F32(y)) => CpuData::F32(f32s(x, y)?),
        (CpuData::F64(x), CpuData::F64(y)) => CpuData::F64(f64s(x, y)?),
        _ => {
            return Err(Error::dtype(
                op,
                format!(
                    "expects float tensors of one dtype, got {} and {}",
                    a.dtype(),
                    b.dtype()
                ),
            ))
        }
    })
}

/// Runs `f(image index, image's output slice, scratch)` for every image, spread over threads
/// when [`ConvShape::par_images`] says so.
fn per_image<T: ConvFloat>(
    s: &ConvShape,
    out: &mut [T],
    chunk: usize,
    scratch: usize,
    f: impl Fn(usize, &mut [T], &mut Vec<T>) + Sync + Send,
) {
    if chunk == 0 {
        return;
    }
    if s.par_images() {
        out.par_chunks_mut(chunk).enumerate().for_each_init(
            || vec![T::default(); scratch],
            |buf, (ni, dst)| f(ni, dst, buf),
        );
    } else {
        let mut buf = vec![T::default(); scratch];
        for (ni, dst) in out.chunks_mut(chunk).enumerate() {
            f(ni, dst, &mut buf);
        }
    }
}

/// `y = conv(x, w) [+ b]` as contiguous `[n, o, oh, ow]`.
pub(crate) fn conv2d(
    x: (&CpuData, &Layout),
    w: (&CpuData, &Layout),
    b: Option<(&CpuData, &Layout)>,
    s: &ConvShape,
) -> Result<CpuData> {
    fn go<T: ConvFloat>(
        x: (&[T], &Layout),
        w: (&[T], &Layout),
        b: Option<(&[T], &Layout)>,
        s: &ConvShape,
    ) -> Result<Vec<T>> {
        let x = super::contiguous(x.0, x.1)?;
        let w = super::contiguous(w.0, w.1)?;
        let b = b.map(|(b, l)| super::contiguous(b, l)).transpose()?;
        let (og, ck, p, cg) = (s.og(), s.ck(), s.p(), s.cg());
        let mut out = crate::storage::pool::filled(s.n * s.image_out(), T::default())?;
        let scratch = s.scratch();
        let par = s.gemm_par();
        per_image(s, &mut out, s.image_out(), scratch, |ni, y, buf| {
            let img = &x[ni * s.image_in()..(ni + 1) * s.image_in()];
            for g in 0..s.groups {
                let xg = &img[g * cg * s.h * s.w..(g + 1) * cg * s.h * s.w];
                let cols = columns(xg, s, buf);
                let yg = &mut y[g * og * p..(g + 1) * og * p];
                if let Some(b) = &b {
                    for (row, &bv) in yg.chunks_mut(p).zip(&b[g * og..(g + 1) * og]) {
                        row.fill(bv);
                    }
                }
                let wg = &w[g * og * ck..(g + 1) * og * ck];
                gemm(
                    (og, p, ck),
                    yg,
                    p,
                    b.is_some(),
                    wg,
                    (ck, 1),
                    cols,
                    (p, 1),
                    T::ONE,
                    par,
                );
            }
        });
        Ok(out)
    }
    let b32 = b.and_then(|(d, l)| match d {
        CpuData::F32(v) => Some((v.as_slice(), l)),
        _ => None,
    });
    let b64 = b.and_then(|(d, l)| match d {
        CpuData::F64(v) => Some((v.as_slice(), l)),
        _ => None,
    });
    float_pair(
        "conv2d",
        x.0,
        w.0,
        |a, c| go((a, x.1), (c, w.1), b32, s),
        |a, c| go((a, x.1), (c, w.1), b64, s),
    )
}

/// The input gradient `dx` `[n, c, h, w]` from `dy` `[n, o, oh, ow]` and the weight.
pub(crate) fn conv2d_input_grad(
    dy: (&CpuData, &Layout),
    w: (&CpuData, &Layout),
    s: &ConvShape,
) -> Result<CpuData> {
    fn go<T: ConvFloat>(dy: (&[T], &Layout), w: (&[T], &Layout), s: &ConvShape) -> Result<Vec<T>> {
        let dy = super::contiguous(dy.0, dy.1)?;
        let w = super::contiguous(w.0, w.1)?;
        let (og, ck, p, cg) = (s.og(), s.ck(), s.p(), s.cg());
        let mut out = crate::storage::pool::filled(s.n * s.image_in(), T::default())?;
        let scratch = s.scratch();
        let par = s.gemm_par();
        per_image(s, &mut out, s.image_in(), scratch, |ni, dx, buf| {
            let d = &dy[ni * s.image_out()..(ni + 1) * s.image_out()];
            for g in 0..s.groups {
                let dyg = &d[g * og * p..(g + 1) * og * p];
                let wg = &w[g * og * ck..(g + 1) * og * ck];
                let dxg = &mut dx[g * cg * s.h * s.w..(g + 1) * cg * s.h * s.w];
                // columns' gradient: w^T [ck, og] times dy [og, p], straight into dx for a
                // pointwise kernel (its columns are the image), else folded back by col2im
                let pointwise = s.pointwise();
                let cols: &mut [T] = if pointwise { dxg } else { buf };
                gemm(
                    (ck, p, og),
                    cols,
                    p,
                    false,
                    wg,
                    (1, ck),
                    dyg,
                    (p, 1),
                    T::ONE,
                    par,
                );
                if !pointwise {
                    col2im(buf, s, cg, dxg);
                }
            }
        });
        Ok(out)
    }
    float_pair(
        "conv2d_input_grad",
        dy.0,
        w.0,
        |a, b| go((a, dy.1), (b, w.1), s),
        |a, b| go((a, dy.1), (b, w.1), s),
    )
}

/// The weight gradient `dw` `[o, c / groups, kh, kw]` from the input and `dy`.
pub(crate) fn conv2d_weight_grad(
    x: (&CpuData, &Layout),
    dy: (&CpuData, &Layout),
    s: &ConvShape,
) -> Result<CpuData> {
    fn go<T: ConvFloat>(x: (&[T], &Layout), dy: (&[T], &Layout), s: &ConvShape) -> Result<Vec<T>> {
        let x = super::contiguous(x.0, x.1)?;
        let dy = super::contiguous(dy.0, dy.1)?;
        let (og, ck, p, cg) = (s.og(), s.ck(), s.p(), s.cg());
        let size = s.o * ck;
        let scratch = s.scratch();
        let par = s.gemm_par();
        // adds the products of images `range` into `acc`
        let accumulate = |range: std::ops::Range<usize>, acc: &mut [T], buf: &mut [T]| {
            for ni in range {
                let img = &x[ni * s.image_in()..(ni + 1) * s.image_in()];
                let d = &dy[ni * s.image_out()..(ni + 1) * s.image_out()];
                for g in 0..s.groups {
                    let xg = &img[g * cg * s.h * s.w..(g + 1) * cg * s.h * s.w];
                    let cols = columns(xg, s, buf);
                    let dyg = &d[g * og * p..(g + 1) * og * p];
                    let ag = &mut acc[g * og * ck..(g + 1) * og * ck];
                    // dy [og, p] times cols^T [p, ck]
                    gemm(
                        (og, ck, p),
                        ag,
                        ck,
                        true,
                        dyg,
                        (p, 1),
                        cols,
                        (1, p),
                        T::ONE,
                        par,
                    );
                }
            }
        };
        let mut out = crate::storage::pool::filled(size, T::default())?;
        if s.par_images() {
            let parts = crate::cpu::threads().min(s.n);
            let per = s.n.div_ceil(parts);
            let partial: Vec<Vec<T>> = (0..parts)
                .into_par_iter()
                .map(|t| {
                    let mut acc = vec![T::default(); size];
                    let mut buf = vec![T::default(); scratch];
                    accumulate(t * per..((t + 1) * per).min(s.n), &mut acc, &mut buf);
                    acc
                })
                .collect();
            for part in &partial {
                for (o, &v) in out.iter_mut().zip(part) {
                    *o += v;
                }
            }
        } else {
            let mut buf = vec![T::default(); scratch];
            accumulate(0..s.n, &mut out, &mut buf);
        }
        Ok(out)
    }
    float_pair(
        "conv2d_weight_grad",
        x.0,
        dy.0,
        |a, b| go((a, x.1), (b, dy.1), s),
        |a, b| go((a, x.1), (b, dy.1), s),
    )
}

/// The larger of two values, NaN if either is (written without branches, so it vectorises).
#[inline(always)]
#[allow(clippy::eq_op)]
fn nan_max<T: Copy + PartialOrd>(a: T, b: T) -> T {
    let m = if b > a { b } else { a };
    let m = if b != b { b } else { m };
    if a != a {
        a
    } else {
        m
    }
}

/// Whether the windows are 2x2 with stride 2, no padding or dilation, and all inside the
/// image (ceil mode may add a clipped last one): the case with branch-free kernels.
fn disjoint_2x2(win: &Window, (h, w): (usize, usize), (oh, ow): (usize, usize)) -> bool {
    win.kernel == (2, 2)
        && win.stride == (2, 2)
        && win.padding == (0, 0)
        && win.dilation == (1, 1)
        && 2 * oh <= h
        && 2 * ow <= w
}

/// One output row of 2x2, stride-2 max pooling from the two input rows `rows` (`2 * w`).
#[inline(always)]
fn pool2x2_row<T: ConvFloat>(out: &mut [T], rows: &[T], w: usize) {
    let ow = out.len();
    let (r0, r1) = rows.split_at(w);
    for ((d, a), b) in out
        .iter_mut()
        .zip(r0[..2 * ow].chunks_exact(2))
        .zip(r1[..2 * ow].chunks_exact(2))
    {
        *d = nan_max(nan_max(a[0], a[1]), nan_max(b[0], b[1]));
    }
}

/// 2x2, stride-2 max pooling's gradient for one `h x w` plane without NaN (the caller
/// checks): the windows are disjoint, so a window's four positions are zeroed and the
/// gradient is stored at its first maximum in row-major order (the rule of
/// [`window_argmax`]), found with compares whose results feed arithmetic, not branches.
#[inline(always)]
fn pool2x2_grad<T: ConvFloat>(dst: &mut [T], plane: &[T], g: &[T], dims: (usize, usize, usize)) {
    let (w, oh, ow) = dims;
    let zero = T::default();
    for oy in 0..oh {
        let quads = &mut dst[2 * oy * w..(2 * oy + 2) * w];
        let r0 = &plane[2 * oy * w..2 * oy * w + 2 * ow];
        let r1 = &plane[(2 * oy + 1) * w..(2 * oy + 1) * w + 2 * ow];
        for (ox, ((x0, x1), &gv)) in r0
            .chunks_exact(2)
            .zip(r1.chunks_exact(2))
            .zip(&g[oy * ow..(oy + 1) * ow])
            .enumerate()
        {
            let right0 = (x0[1] > x0[0]) as usize;
            let top = if x0[1] > x0[0] { x0[1] } else { x0[0] };
            let right1 = (x1[1] > x1[0]) as usize;
            let bottom = if x1[1] > x1[0] { x1[1] } else { x1[0] };
            let lower = (bottom > top) as usize;
            let at = lower * w + 2 * ox + if lower == 1 { right1 } else { right0 };
            quads[2 * ox] = zero;
            quads[2 * ox + 1] = zero;
            quads[w + 2 * ox] = zero;
            quads[w + 2 * ox + 1] = zero;
            quads[at] = gv;
        }
    }
}

/// Whether a slice holds a NaN (a branch-free fold, so it vectorises).
#[inline]
#[allow(clippy::eq_op)]
fn has_nan<T: ConvFloat>(v: &[T]) -> bool {
    v.iter().fold(false, |acc, &x| acc | (x != x))
}

/// The kernel taps `t` in `0..k` whose input position `base + t * d - pad` lies in
/// `0..size`, as an interval.
fn taps(base: usize, d: usize, pad: usize, size: usize, k: usize) -> std::ops::Range<usize> {
    let (base, d, pad, size, k) = (
        base as i128,
        d as i128,
        pad as i128,
        size as i128,
        k as i128,
    );
    let ceil_div = |a: i128| (a + d - 1).div_euclid(d);
    let lo = ceil_div(pad - base).max(0);
    let hi = ceil_div(size + pad - base).min(k).max(lo);
    lo as usize..hi as usize
}

/// Index (into its `h * w` plane) of the maximum of the pooling window at `(oy, ox)` of
/// `plane` (contiguous `h x w`): first on ties, NaN wins; None for a window entirely in the
/// padding.
#[inline(always)]
fn window_argmax<T: Copy + PartialOrd>(
    plane: &[T],
    (h, w): (usize, usize),
    win: &Window,
    (oy, ox): (usize, usize),
) -> Option<usize> {
    let mut best: Option<(T, usize)> = None;
    // only the taps that land inside the image are visited (a huge kernel in a huge padding
    // costs nothing)
    for ki in taps(
        oy * win.stride.0,
        win.dilation.0,
        win.padding.0,
        h,
        win.kernel.0,
    ) {
        let row = (oy * win.stride.0 + ki * win.dilation.0 - win.padding.0) * w;
        for kj in taps(
            ox * win.stride.1,
            win.dilation.1,
            win.padding.1,
            w,
            win.kernel.1,
        ) {
            let at = row + ox * win.stride.1 + kj * win.dilation.1 - win.padding.1;
            let v = plane[at];
            #[allow(clippy::eq_op)]
            let wins = match best {
                None => true,
                Some((b, _)) => v > b || (v != v && b == b),
            };
            if wins {
                best = Some((v, at));
            }
        }
    }
    best.map(|(_, i)| i)
}

/// Max pooling of `x` `[n, c, h, w]` into contiguous `[n, c, oh, ow]`.
pub(crate) fn max_pool2d(x: &CpuData, l: &Layout, win: &Window) -> Result<CpuData> {
    fn go<T: ConvFloat>(x: &[T], l: &Layout, win: &Window) -> Result<Vec<T>> {
        let x = super::contiguous(x, l)?;
        let s = l.shape();
        let (h, w) = (s[2], s[3]);
        let (oh, ow) = win.output_size(h, w).unwrap_or((0, 0));
        // a window entirely in the padding has no element: its maximum is -inf (PyTorch)
        let mut out = crate::storage::pool::filled(s[0] * s[1] * oh * ow, T::NEG_INFINITY)?;
        if oh * ow == 0 || h * w == 0 {
            return Ok(out);
        }
        let simple = disjoint_2x2(win, (h, w), (oh, ow));
        out.par_chunks_mut(oh * ow)
            .zip(x.par_chunks(h * w))
            .with_min_len(16)
            .for_each(|(dst, plane)| {
                for oy in 0..oh {
                    let drow = &mut dst[oy * ow..(oy + 1) * ow];
                    if simple {
                        pool2x2_row(drow, &plane[2 * oy * w..(2 * oy + 2) * w], w);
                    } else {
                        for (ox, d) in drow.iter_mut().enumerate() {
                            if let Some(i) = window_argmax(plane, (h, w), win, (oy, ox)) {
                                *d = plane[i];
                            }
                        }
                    }
                }
            });
        Ok(out)
    }
    Ok(match x {
        CpuData::F32(v) => CpuData::F32(go(v, l, win)?),
        CpuData::F64(v) => CpuData::F64(go(v, l, win)?),
        _ => {
            return Err(Error::dtype(
                "max_pool2d",
                format!("expects a float tensor, got {}", x.dtype()),
            ))
        }
    })
}

/// Max pooling's input gradient: `dy` `[n, c, oh, ow]` added at each window's maximum of
/// `x` `[n, c, h, w]`.
pub(crate) fn max_pool2d_grad(
    x: (&CpuData, &Layout),
    dy: (&CpuData, &Layout),
    win: &Window,
) -> Result<CpuData> {
    fn go<T: ConvFloat>(x: (&[T], &Layout), dy: (&[T], &Layout), win: &Window) -> Result<Vec<T>> {
        let s = x.1.shape();
        let (h, w) = (s[2], s[3]);
        let (oh, ow) = win.output_size(h, w).unwrap_or((0, 0));
        let x = super::contiguous(x.0, x.1)?;
        let dy = super::contiguous(dy.0, dy.1)?;
        let mut out = crate::storage::pool::filled(s[0] * s[1] * h * w, T::default())?;
        if oh * ow == 0 || h * w == 0 {
            return Ok(out);
        }
        let simple = disjoint_2x2(win, (h, w), (oh, ow));
        out.par_chunks_mut(h * w)
            .zip(x.par_chunks(h * w))
            .zip(dy.par_chunks(oh * ow))
            .with_min_len(16)
            .for_each(|((dst, plane), g)| {
                if simple && !has_nan(plane) {
                    pool2x2_grad(dst, plane, g, (w, oh, ow));
                    return;
                }
                for oy in 0..oh {
                    for ox in 0..ow {
                        if let Some(i) = window_argmax(plane, (h, w), win, (oy, ox)) {
                            dst[i] += g[oy * ow + ox];
                        }
                    }
                }
            });
        Ok(out)
    }
    float_pair(
        "max_pool2d_grad",
        x.0,
        dy.0,
        |a, g| go((a, x.1), (g, dy.1), win),
        |a, g| go((a, x.1), (g, dy.1), win),
    )
}

/// The flat `h * w` position of each pooling window's maximum over `[n, c, h, w]` (the rule
/// of [`window_argmax`]), as `[n, c, oh * ow]`; -1 for a window entirely in the padding.
pub(crate) fn pool_argmax(x: &CpuData, l: &Layout, win: &Window) -> Result<CpuData> {
    fn go<T: Copy + Send + Sync + PartialOrd + crate::storage::pool::Pooled>(
        x: &[T],
        l: &Layout,
        win: &Window,
    ) -> Result<Vec<i64>> {
        let x = super::contiguous(x, l)?;
        let s = l.shape();
        let (h, w) = (s[2], s[3]);
        let (oh, ow) = win.output_size(h, w).unwrap_or((0, 0));
        // -1 marks a window entirely in the padding
        let mut out = crate::storage::pool::filled(s[0] * s[1] * oh * ow, -1i64)?;
        if oh * ow == 0 || h * w == 0 {
            return Ok(out);
        }
        out.par_chunks_mut(oh * ow)
            .zip(x.par_chunks(h * w))
            .with_min_len(16)
            .for_each(|(dst, plane)| {
                for (p, d) in dst.iter_mut().enumerate() {
                    let at = window_argmax(plane, (h, w), win, (p / ow, p % ow));
                    *d = at.map_or(-1, |i| i as i64);
                }
            });
        Ok(out)
    }
    Ok(CpuData::I64(match x {
        CpuData::F32(v) => go(v, l, win)?,
        CpuData::F64(v) => go(v, l, win)?,
        CpuData::I64(v) => go(v, l, win)?,
        CpuData::Bool(v) => go(v, l, win)?,
        d => {
            return Err(Error::dtype(
                "max_pool2d",
                format!("not defined for {} tensors", d.dtype()),
            ))
        }
    }))
}
