//! Window kernels over NCHW tensors: im2col, its transpose, and each pooling window's maximum.

use super::launch::{kernel_name, not_for, strided_full};
use super::memory::cast;
use super::rt::driver::DeviceRepr;
use super::{CudaData, Gpu};
use crate::dtype::DType;
use crate::error::Result;
use crate::layout::Layout;
use crate::window::Window;

/// A window's geometry as the kernels read it (`struct Window` in `kernels.cu`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct WindowArgs {
    c: i64,
    h: i64,
    w: i64,
    kh: i64,
    kw: i64,
    sh: i64,
    sw: i64,
    ph: i64,
    pw: i64,
    dh: i64,
    dw: i64,
    oh: i64,
    ow: i64,
}
// SAFETY: `repr(C)` with the field layout of `struct Window` in kernels.cu.
unsafe impl DeviceRepr for WindowArgs {}

fn window_args(win: &Window, c: usize, h: usize, w: usize) -> WindowArgs {
    let (oh, ow) = win.output_size(h, w).unwrap_or((0, 0));
    WindowArgs {
        c: c as i64,
        h: h as i64,
        w: w as i64,
        kh: win.kernel.0 as i64,
        kw: win.kernel.1 as i64,
        sh: win.stride.0 as i64,
        sw: win.stride.1 as i64,
        ph: win.padding.0 as i64,
        pw: win.padding.1 as i64,
        dh: win.dilation.0 as i64,
        dw: win.dilation.1 as i64,
        oh: oh as i64,
        ow: ow as i64,
    }
}

fn floats_only(op: &str, dtype: DType) -> Result<()> {
    if dtype.is_float() {
        Ok(())
    } else {
        Err(not_for(op, dtype))
    }
}

pub(crate) fn unfold(
    g: &Gpu,
    x: &CudaData,
    l: &Layout,
    win: &Window,
    pad: f64,
) -> Result<CudaData> {
    floats_only("unfold", x.dtype())?;
    let s = l.shape();
    let args = window_args(win, s[1], s[2], s[3]);
    let n = s[0] * s[1] * win.kernel.0 * win.kernel.1 * (args.oh * args.ow) as usize;
    let lx = strided_full("unfold", l)?;
    let len = n as i64;
    let f = g.function(kernel_name!("unfold", x.dtype()))?;
    let mut out = g.alloc(x.dtype(), n)?;
    g.launch(&f, "unfold")
        .buf(x)
        .arg(&lx)
        .arg(&args)
        .arg(&pad)
        .buf_mut(&mut out)
        .arg(&len)
        .grid(n)?;
    Ok(out)
}

pub(crate) fn fold(
    g: &Gpu,
    cols: &CudaData,
    l: &Layout,
    win: &Window,
    size: (usize, usize),
) -> Result<CudaData> {
    floats_only("fold", cols.dtype())?;
    let s = l.shape();
    let args = window_args(win, s[2], size.0, size.1);
    let contiguous = cast(g, cols, l, cols.dtype())?;
    // one thread per output element, each writing its own
    let n = s[0] * s[2] * size.0 * size.1;
    let len = n as i64;
    let f = g.function(kernel_name!("fold", cols.dtype()))?;
    let mut out = g.alloc(cols.dtype(), n)?;
    g.launch(&f, "fold")
        .buf(&contiguous)
        .arg(&args)
        .buf_mut(&mut out)
        .arg(&len)
        .grid(n)?;
    Ok(out)
}

/// The flat `h * w` position of each max-pooling window's maximum of `x` `[n, c, h, w]`
/// (first on ties, NaN wins), as contiguous int64 `[n, c, oh * ow]`.
pub(crate) fn pool_argmax(g: &Gpu, x: &CudaData, l: &Layout, win: &Window) -> Result<CudaData> {
    let s = l.shape();
    let args = window_args(win, s[1], s[2], s[3]);
    let n = s[0] * s[1] * (args.oh * args.ow) as usize;
    let lx = strided_full("pool_argmax", l)?;
    let len = n as i64;
    let f = g.function(kernel_name!("pool_argmax", x.dtype()))?;
    let mut out = g.zeros(DType::I64, n)?;
    g.launch(&f, "pool_argmax")
        .buf(x)
        .arg(&lx)
        .arg(&args)
        .buf_mut(&mut out)
        .arg(&len)
        .grid(n)?;
    Ok(out)
}
