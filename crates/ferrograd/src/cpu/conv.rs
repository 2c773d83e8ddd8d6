//! im2col (`unfold`) and its transpose (`fold`) for 2-D windows over NCHW tensors.

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::storage::CpuData;
use crate::window::Window;

/// The kernel columns whose input column lies inside an image of width `w`, for output
/// column `xo` (an interval, since input columns grow with the kernel column).
fn inside_columns(win: &Window, xo: usize, w: usize) -> std::ops::Range<usize> {
    let kw = win.kernel.1;
    let inside = |kj: usize| {
        let iw = (xo * win.stride.1 + kj * win.dilation.1) as isize - win.padding.1 as isize;
        iw >= 0 && iw < w as isize
    };
    let lo = (0..kw).find(|&kj| inside(kj)).unwrap_or(kw);
    let hi = (lo..kw)
        .rev()
        .find(|&kj| inside(kj))
        .map_or(lo, |kj| kj + 1);
    lo..hi
}

/// `x` `[n, c, h, w]` (any strides) to contiguous `[n, oh*ow, c, kh*kw]`: one row per output
/// position, so a convolution is a single matrix product; positions in the padding read
/// `pad`.
pub(crate) fn unfold(x: &CpuData, l: &Layout, win: &Window, pad: f64) -> Result<CpuData> {
    fn go<T: Copy + Send + Sync + crate::storage::pool::Pooled>(
        x: &[T],
        l: &Layout,
        win: &Window,
        pad: T,
    ) -> Result<Vec<T>> {
        let s = l.shape();
        let (n, c, h, w) = (s[0], s[1], s[2], s[3]);
        let st = l.strides();
        let (oh, ow) = win.output_size(h, w).unwrap_or((0, 0));
        let (kh, kw) = win.kernel;
        let k = kh * kw;
        let image = oh * ow * c * k;
        let mut out = crate::storage::pool::filled(n * image, pad)?;
        out.par_chunks_mut(image.max(1))
            .enumerate()
            .for_each(|(ni, dst)| {
                let base = l.offset() as isize + ni as isize * st[0];
                for y in 0..oh {
                    for xo in 0..ow {
                        let row = &mut dst[(y * ow + xo) * c * k..(y * ow + xo + 1) * c * k];
                        let cols = inside_columns(win, xo, w);
                        let (lo, hi) = (cols.start, cols.end);
                        for ci in 0..c {
                            let plane = base + ci as isize * st[1];
                            for ki in 0..kh {
                                let ih = (y * win.stride.0 + ki * win.dilation.0) as isize
                                    - win.padding.0 as isize;
                                if ih < 0 || ih >= h as isize {
                                    continue;
                                }
                                let line = plane + ih * st[2];
                                let dst = &mut row[ci * k + ki * kw..ci * k + (ki + 1) * kw];
                                for (kj, d) in (lo..hi).zip(&mut dst[lo..hi]) {
                                    let iw = (xo * win.stride.1 + kj * win.dilation.1) as isize
                                        - win.padding.1 as isize;
                                    *d = x[(line + iw * st[3]) as usize];
                                }
                            }
                        }
                    }
                }
            });
        Ok(out)
    }
    Ok(match x {
        CpuData::F32(v) => CpuData::F32(go(v, l, win, pad as f32)?),
        CpuData::F64(v) => CpuData::F64(go(v, l, win, pad)?),
        CpuData::I64(v) => CpuData::I64(go(v, l, win, pad as i64)?),
        CpuData::Bool(v) => CpuData::Bool(go(v, l, win, pad != 0.0)?),
        d => {
            return Err(Error::dtype(
                "unfold",
                format!("not defined for {} tensors", d.dtype()),
            ))
        }
    })
}

/// The transpose of [`unfold`]: `cols` `[n, oh*ow, c, kh*kw]` summed back into contiguous
/// `[n, c, h, w]` (padding positions are dropped).
pub(crate) fn fold(
    cols: &CpuData,
    l: &Layout,
    win: &Window,
    size: (usize, usize),
) -> Result<CpuData> {
    fn go<T: Copy + Send + Sync + Default + std::ops::AddAssign + crate::storage::pool::Pooled>(
        v: &[T],
        l: &Layout,
        win: &Window,
        (h, w): (usize, usize),
    ) -> Result<Vec<T>> {
        let contiguous = super::contiguous(v, l)?;
        let s = l.shape();
        let (n, c) = (s[0], s[2]);
        let (oh, ow) = win.output_size(h, w).unwrap_or((0, 0));
        let (kh, kw) = win.kernel;
        let k = kh * kw;
        let image_in = oh * ow * c * k;
        let mut out = crate::storage::pool::filled(n * c * h * w, T::default())?;
        out.par_chunks_mut((c * h * w).max(1))
            .enumerate()
            .for_each(|(ni, dst)| {
                let src = &contiguous[ni * image_in..(ni + 1) * image_in];
                for y in 0..oh {
                    for xo in 0..ow {
                        let row = &src[(y * ow + xo) * c * k..(y * ow + xo + 1) * c * k];
                        let cols = inside_columns(win, xo, w);
                        let (lo, hi) = (cols.start, cols.end);
                        for ci in 0..c {
                            for ki in 0..kh {
                                let ih = (y * win.stride.0 + ki * win.dilation.0) as isize
                                    - win.padding.0 as isize;
                                if ih < 0 || ih >= h as isize {
                                    continue;
                                }
                                let line = (ci * h + ih as usize) * w;
                                for kj in lo..hi {
                                    let iw =
                                        xo * win.stride.1 + kj * win.dilation.1 - win.padding.1;
                                    dst[line + iw] += row[ci * k + ki * kw + kj];
                                }
                            }
                        }
                    }
                }
            });
        Ok(out)
    }
    Ok(match cols {
        CpuData::F32(v) => CpuData::F32(go(v, l, win, size)?),
        CpuData::F64(v) => CpuData::F64(go(v, l, win, size)?),
        CpuData::I64(v) => CpuData::I64(go(v, l, win, size)?),
        d => {
            return Err(Error::dtype(
                "fold",
                format!("not defined for {} tensors", d.dtype()),
            ))
        }
    })
}
