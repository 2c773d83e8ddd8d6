//! 2-D convolution and pooling, built from `unfold` (im2col), its transpose `fold`, matmul and
//! reductions, so every gradient (of any order) comes from rules that already exist.

use super::kernel;
use crate::cpu::{self, Window};
use crate::error::{Error, Result};
use crate::op::{apply1, Op, RuleCtx, SaveMask};
use crate::tensor::Tensor;

pub(crate) fn forward(op: &Op, inputs: &[&Tensor]) -> Result<Tensor> {
    let x = inputs[0];
    let out = match op {
        Op::Unfold { window, pad } => {
            let s = x.shape();
            let (oh, ow) = window.output_size(s[2], s[3]).unwrap_or((0, 0));
            let d = kernel!(
                inputs,
                |d| Ok::<_, Error>(cpu::unfold(d[0], x.layout(), window, *pad)),
                |g, c| crate::cuda::unfold(g, c[0], x.layout(), window, *pad)
            )?;
            Tensor::from_storage(d, &[s[0], oh * ow, s[1], window.kernel.0 * window.kernel.1])
        }
        Op::PoolArgmax(window) => {
            let s = x.shape();
            let (oh, ow) = window.output_size(s[2], s[3]).unwrap_or((0, 0));
            if x.device() != crate::Device::Cpu {
                return Err(Error::device("pool_argmax", "runs on the CPU only"));
            }
            let d = super::with_cpu(inputs, |d| {
                Ok(crate::storage::Storage::cpu(cpu::pool_argmax(
                    d[0],
                    x.layout(),
                    window,
                )))
            })?;
            Tensor::from_storage(d, &[s[0], s[1], oh * ow])
        }
        Op::Fold { window, size } => {
            let s = x.shape();
            let d = kernel!(
                inputs,
                |d| Ok::<_, Error>(cpu::fold(d[0], x.layout(), window, *size)),
                |g, c| crate::cuda::fold(g, c[0], x.layout(), window, *size)
            )?;
            Tensor::from_storage(d, &[s[0], s[2], size.0, size.1])
        }
        _ => unreachable!("not a window op"),
    };
    Ok(out)
}

pub(crate) fn saves(needs: &[bool]) -> SaveMask {
    SaveMask::none(needs.len())
}

pub(crate) fn backward(ctx: &RuleCtx, dy: &Tensor) -> Result<Vec<Option<Tensor>>> {
    let s = &ctx.shapes[0];
    Ok(vec![Some(match ctx.op {
        Op::Unfold { window, .. } => apply1(
            &Op::Fold {
                window: *window,
                size: (s[2], s[3]),
            },
            &[dy],
        )?,
        Op::Fold { window, .. } => apply1(
            &Op::Unfold {
                window: *window,
                pad: 0.0,
            },
            &[dy],
        )?,
        _ => return Ok(vec![None]),
    })])
}

fn check_nchw(op: &str, x: &Tensor) -> Result<()> {
    if x.ndim() != 4 {
        return Err(Error::shape(
            op,
            format!(
                "expects an NCHW input of 4 dimensions, got shape {:?}",
                x.shape()
            ),
        ));
    }
    if !x.dtype().is_float() {
        return Err(Error::dtype(
            op,
            format!("expects a float input, got {} {:?}", x.dtype(), x.shape()),
        ));
    }
    Ok(())
}

fn windows(op: &str, x: &Tensor, win: &Window, pad: f64) -> Result<(Tensor, usize, usize)> {
    check_nchw(op, x)?;
    if win.kernel.0 == 0
        || win.kernel.1 == 0
        || win.stride.0 == 0
        || win.stride.1 == 0
        || win.dilation.0 == 0
        || win.dilation.1 == 0
    {
        return Err(Error::invalid(
            op,
            format!("kernel, stride and dilation must be positive, got {win:?}"),
        ));
    }
    let s = x.shape();
    let (oh, ow) = win.output_size(s[2], s[3]).ok_or_else(|| {
        Error::shape(
            op,
            format!(
                "a {:?} window (dilation {:?}, padding {:?}) does not fit an input of shape {s:?}",
                win.kernel, win.dilation, win.padding
            ),
        )
    })?;
    Ok((apply1(&Op::Unfold { window: *win, pad }, &[x])?, oh, ow))
}

/// 2-D convolution (cross-correlation, as in PyTorch): `x` `[n, c, h, w]`, `weight`
/// `[o, c / groups, kh, kw]`, optional `bias` `[o]`.
pub fn conv2d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: (usize, usize),
    padding: (usize, usize),
    dilation: (usize, usize),
    groups: usize,
) -> Result<Tensor> {
    const OP: &str = "conv2d";
    check_nchw(OP, x)?;
    if weight.ndim() != 4 {
        return Err(Error::shape(
            OP,
            format!(
                "weight must be [out, in/groups, kh, kw], got shape {:?}",
                weight.shape()
            ),
        ));
    }
    if x.dtype() != weight.dtype() {
        return Err(Error::dtype(
            OP,
            format!(
                "dtype mismatch: input {} {:?} vs weight {} {:?}",
                x.dtype(),
                x.shape(),
                weight.dtype(),
                weight.shape()
            ),
        ));
    }
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let ws = weight.shape();
    let (o, cg, kh, kw) = (ws[0], ws[1], ws[2], ws[3]);
    if groups == 0 || c % groups != 0 || o % groups != 0 || cg * groups != c {
        return Err(Error::shape(
            OP,
            format!("input of shape {:?} with {groups} groups needs weight [out, {}, kh, kw] with out divisible by groups, got {ws:?}", x.shape(), c.checked_div(groups).unwrap_or(0)),
        ));
    }
    let win = Window {
        kernel: (kh, kw),
        stride,
        padding,
        dilation,
    };
    let (cols, oh, ow) = windows(OP, x, &win, 0.0)?;
    let rows = n * oh * ow;
    let ck = cg * kh * kw;
    // one matrix product per group over every output position of the whole batch
    let y = if groups == 1 {
        cols.reshape(&[rows, ck])?
            .matmul(&weight.reshape(&[o, ck])?.t()?)?
    } else {
        let cols = cols.reshape(&[rows, groups, ck])?.permute(&[1, 0, 2])?;
        let wt = weight
            .reshape(&[groups, o / groups, ck])?
            .permute(&[0, 2, 1])?;
        cols.matmul(&wt)?.permute(&[1, 0, 2])?.reshape(&[rows, o])?
    };
    // one copy to NCHW now keeps every later elementwise op on contiguous data
    let y = y.reshape(&[n, oh, ow, o])?.permute(&[0, 3, 1, 2])?.copy()?;
    match bias {
        None => Ok(y),
        Some(b) => {
            if b.shape() != [o] {
                return Err(Error::shape(
                    OP,
                    format!("bias must have shape [{o}], got {:?}", b.shape()),
                ));
            }
            y.add(&b.reshape(&[o, 1, 1])?)
        }
    }
}

/// Pooling: each window of `[n, c, h, w]` reduced to one value (`stride` defaults to the
/// kernel; padding reads `pad`).
fn pool2d(
    op: &str,
    x: &Tensor,
    kernel: (usize, usize),
    stride: Option<(usize, usize)>,
    padding: (usize, usize),
    pad: f64,
    reduce: fn(&Tensor, Option<&[isize]>, bool) -> Result<Tensor>,
) -> Result<Tensor> {
    if padding.0 * 2 > kernel.0 || padding.1 * 2 > kernel.1 {
        return Err(Error::invalid(
            op,
            format!("padding {padding:?} must be at most half the kernel {kernel:?}"),
        ));
    }
    let win = Window {
        kernel,
        stride: stride.unwrap_or(kernel),
        padding,
        dilation: (1, 1),
    };
    let (cols, oh, ow) = windows(op, x, &win, pad)?;
    let s = x.shape();
    reduce(&cols, Some(&[3]), false)?
        .reshape(&[s[0], oh, ow, s[1]])?
        .permute(&[0, 3, 1, 2])
}

/// 2-D max pooling over `[n, c, h, w]` (padding never wins: it reads -inf).
pub fn max_pool2d(
    x: &Tensor,
    kernel: (usize, usize),
    stride: Option<(usize, usize)>,
    padding: (usize, usize),
) -> Result<Tensor> {
    if x.device() == crate::Device::Cpu && x.ndim() == 4 && x.dtype().is_float() {
        // gather each window's maximum: the backward is a single scatter-add
        if padding.0 * 2 > kernel.0 || padding.1 * 2 > kernel.1 {
            return Err(Error::invalid(
                "max_pool2d",
                format!("padding {padding:?} must be at most half the kernel {kernel:?}"),
            ));
        }
        let win = Window {
            kernel,
            stride: stride.unwrap_or(kernel),
            padding,
            dilation: (1, 1),
        };
        if win.stride.0 == 0 || win.stride.1 == 0 || kernel.0 == 0 || kernel.1 == 0 {
            return Err(Error::invalid(
                "max_pool2d",
                format!("kernel and stride must be positive, got {win:?}"),
            ));
        }
        let s = x.shape();
        let (oh, ow) = win.output_size(s[2], s[3]).ok_or_else(|| {
            Error::shape("max_pool2d", format!("a {kernel:?} window (padding {padding:?}) does not fit an input of shape {s:?}"))
        })?;
        let idx = apply1(&Op::PoolArgmax(win), &[x])?;
        let flat = x.reshape(&[s[0], s[1], s[2] * s[3]])?;
        return flat.gather(&idx, 2)?.reshape(&[s[0], s[1], oh, ow]);
    }
    pool2d(
        "max_pool2d",
        x,
        kernel,
        stride,
        padding,
        f64::NEG_INFINITY,
        Tensor::max,
    )
}

/// 2-D average pooling over `[n, c, h, w]` (padding counts as zeros, as PyTorch's default).
pub fn avg_pool2d(
    x: &Tensor,
    kernel: (usize, usize),
    stride: Option<(usize, usize)>,
    padding: (usize, usize),
) -> Result<Tensor> {
    pool2d("avg_pool2d", x, kernel, stride, padding, 0.0, Tensor::mean)
}
