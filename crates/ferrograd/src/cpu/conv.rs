//! im2col (`unfold`) and its transpose (`fold`) for 2-D windows over NCHW tensors.

use rayon::prelude::*;

use crate::layout::Layout;
use crate::storage::CpuData;

/// Window geometry: kernel, stride, padding and dilation per spatial axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Window {
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    pub padding: (usize, usize),
    pub dilation: (usize, usize),
}

impl Window {
    /// Output spatial size for an input of `h x w`, or None when the window does not fit.
    pub fn output_size(&self, h: usize, w: usize) -> Option<(usize, usize)> {
        let span = |n: usize, k: usize, s: usize, p: usize, d: usize| -> Option<usize> {
            let eff = d * (k - 1) + 1;
            let padded = n + 2 * p;
            (padded >= eff && s > 0 && k > 0).then(|| (padded - eff) / s + 1)
        };
        Some((
            span(
                h,
                self.kernel.0,
                self.stride.0,
                self.padding.0,
                self.dilation.0,
            )?,
            span(
                w,
                self.kernel.1,
                self.stride.1,
                self.padding.1,
                self.dilation.1,
            )?,
        ))
    }
}

/// `x` `[n, c, h, w]` (any strides) to contiguous `[n, c, kh*kw, oh*ow]`; positions in the
/// padding read `pad`.
pub(crate) fn unfold(x: &CpuData, l: &Layout, win: &Window, pad: f64) -> CpuData {
    fn go<T: Copy + Send + Sync>(x: &[T], l: &Layout, win: &Window, pad: T) -> Vec<T> {
        let s = l.shape();
        let (n, c, h, w) = (s[0], s[1], s[2], s[3]);
        let st = l.strides();
        let (oh, ow) = win.output_size(h, w).unwrap_or((0, 0));
        let (kh, kw) = win.kernel;
        let plane = kh * kw * oh * ow;
        let mut out = vec![pad; n * c * plane];
        out.par_chunks_mut(plane.max(1))
            .enumerate()
            .for_each(|(nc, dst)| {
                let (ni, ci) = (nc / c, nc % c);
                let base = l.offset() as isize + ni as isize * st[0] + ci as isize * st[1];
                for ki in 0..kh {
                    for kj in 0..kw {
                        let row = &mut dst[(ki * kw + kj) * oh * ow..(ki * kw + kj + 1) * oh * ow];
                        for y in 0..oh {
                            let ih = (y * win.stride.0 + ki * win.dilation.0) as isize
                                - win.padding.0 as isize;
                            if ih < 0 || ih >= h as isize {
                                continue;
                            }
                            for xo in 0..ow {
                                let iw = (xo * win.stride.1 + kj * win.dilation.1) as isize
                                    - win.padding.1 as isize;
                                if iw >= 0 && iw < w as isize {
                                    row[y * ow + xo] = x[(base + ih * st[2] + iw * st[3]) as usize];
                                }
                            }
                        }
                    }
                }
            });
        out
    }
    match x {
        CpuData::F32(v) => CpuData::F32(go(v, l, win, pad as f32)),
        CpuData::F64(v) => CpuData::F64(go(v, l, win, pad)),
        CpuData::I64(v) => CpuData::I64(go(v, l, win, pad as i64)),
        CpuData::Bool(v) => CpuData::Bool(go(v, l, win, pad != 0.0)),
    }
}

/// The transpose of [`unfold`]: `cols` `[n, c, kh*kw, oh*ow]` summed back into contiguous
/// `[n, c, h, w]` (padding positions are dropped).
pub(crate) fn fold(cols: &CpuData, l: &Layout, win: &Window, size: (usize, usize)) -> CpuData {
    fn go<T: Copy + Send + Sync + Default + std::ops::AddAssign>(
        v: &[T],
        l: &Layout,
        win: &Window,
        (h, w): (usize, usize),
    ) -> Vec<T> {
        let contiguous = super::map1(v, l, |a| a);
        let s = l.shape();
        let (n, c) = (s[0], s[1]);
        let (oh, ow) = win.output_size(h, w).unwrap_or((0, 0));
        let (kh, kw) = win.kernel;
        let plane_in = kh * kw * oh * ow;
        let mut out = vec![T::default(); n * c * h * w];
        out.par_chunks_mut((h * w).max(1))
            .enumerate()
            .for_each(|(nc, dst)| {
                let src = &contiguous[nc * plane_in..(nc + 1) * plane_in];
                for ki in 0..kh {
                    for kj in 0..kw {
                        let row = &src[(ki * kw + kj) * oh * ow..(ki * kw + kj + 1) * oh * ow];
                        for y in 0..oh {
                            let ih = (y * win.stride.0 + ki * win.dilation.0) as isize
                                - win.padding.0 as isize;
                            if ih < 0 || ih >= h as isize {
                                continue;
                            }
                            for xo in 0..ow {
                                let iw = (xo * win.stride.1 + kj * win.dilation.1) as isize
                                    - win.padding.1 as isize;
                                if iw >= 0 && iw < w as isize {
                                    dst[ih as usize * w + iw as usize] += row[y * ow + xo];
                                }
                            }
                        }
                    }
                }
            });
        out
    }
    match cols {
        CpuData::F32(v) => CpuData::F32(go(v, l, win, size)),
        CpuData::F64(v) => CpuData::F64(go(v, l, win, size)),
        CpuData::I64(v) => CpuData::I64(go(v, l, win, size)),
        CpuData::Bool(_) => CpuData::Bool(Vec::new()),
    }
}
