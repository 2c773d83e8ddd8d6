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
            let d = kernel!(
                inputs,
                |d| Ok::<_, Error>(cpu::pool_argmax(d[0], x.layout(), window)),
                |g, c| crate::cuda::pool_argmax(g, c[0], x.layout(), window)
            )?;
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
        Op::Conv2d { window, groups } => {
            let s = conv_shape_fwd(inputs, window, *groups)?;
            let w = inputs[1];
            let d = cpu_only(op, inputs, |d| {
                cpu::conv2d(
                    (d[0], x.layout()),
                    (d[1], w.layout()),
                    inputs.get(2).map(|b| (d[2], b.layout())),
                    &s,
                )
            })?;
            Tensor::from_storage(d, &[s.n, s.o, s.oh, s.ow])
        }
        Op::Conv2dInputGrad {
            window,
            groups,
            size,
        } => {
            // inputs: (dy [n, o, oh, ow], weight [o, c / groups, kh, kw])
            let (dy, w) = (inputs[0], inputs[1]);
            same_float("conv2d_input_grad", dy, w)?;
            let (ds, ws) = (dy.shape(), w.shape());
            let s = conv_shape(
                "conv2d_input_grad",
                &[ds[0], ws[1] * groups, size.0, size.1],
                ws,
                window,
                *groups,
            )?;
            expect_output("conv2d_input_grad", ds, &s)?;
            let d = cpu_only(op, inputs, |d| {
                cpu::conv2d_input_grad((d[0], dy.layout()), (d[1], w.layout()), &s)
            })?;
            Tensor::from_storage(d, &[s.n, s.c, s.h, s.w])
        }
        Op::Conv2dWeightGrad { window, groups } => {
            // inputs: (x [n, c, h, w], dy [n, o, oh, ow])
            let (x, dy) = (inputs[0], inputs[1]);
            same_float("conv2d_weight_grad", x, dy)?;
            let (xs, ds) = (x.shape(), dy.shape());
            if xs.len() != 4 || ds.len() != 4 {
                return Err(Error::shape(
                    "conv2d_weight_grad",
                    format!("expects NCHW input and gradient, got {xs:?} and {ds:?}"),
                ));
            }
            let cg = xs[1] / (*groups).max(1);
            let ws = [ds[1], cg, window.kernel.0, window.kernel.1];
            let s = conv_shape("conv2d_weight_grad", xs, &ws, window, *groups)?;
            expect_output("conv2d_weight_grad", ds, &s)?;
            let d = cpu_only(op, inputs, |d| {
                cpu::conv2d_weight_grad((d[0], x.layout()), (d[1], dy.layout()), &s)
            })?;
            Tensor::from_storage(d, &ws)
        }
        Op::MaxPool2d(window) => {
            check_nchw("max_pool2d", x)?;
            let s = x.shape();
            let (oh, ow) = window.output_size(s[2], s[3]).unwrap_or((0, 0));
            let d = cpu_only(op, inputs, |d| cpu::max_pool2d(d[0], x.layout(), window))?;
            Tensor::from_storage(d, &[s[0], s[1], oh, ow])
        }
        Op::MaxPool2dGrad(window) => {
            let dy = inputs[1];
            check_nchw("max_pool2d_grad", x)?;
            let s = x.shape();
            let (oh, ow) = window.output_size(s[2], s[3]).unwrap_or((0, 0));
            if dy.shape() != [s[0], s[1], oh, ow] || dy.dtype() != x.dtype() {
                return Err(Error::shape(
                    "max_pool2d_grad",
                    format!(
                        "gradient {} {:?} does not match the pooled input {} {s:?}",
                        dy.dtype(),
                        dy.shape(),
                        x.dtype()
                    ),
                ));
            }
            let d = cpu_only(op, inputs, |d| {
                cpu::max_pool2d_grad((d[0], x.layout()), (d[1], dy.layout()), window)
            })?;
            Tensor::from_storage(d, s)
        }
        _ => unreachable!("not a window op"),
    };
    Ok(out)
}

/// Runs a CPU-only kernel on `inputs`' buffers.
fn cpu_only(
    op: &Op,
    inputs: &[&Tensor],
    f: impl FnOnce(&[&crate::storage::CpuData]) -> crate::storage::CpuData,
) -> Result<crate::storage::Storage> {
    if inputs.iter().any(|t| t.device() != crate::Device::Cpu) {
        return Err(Error::device(op.name(), "runs on the CPU only"));
    }
    super::with_cpu(inputs, |d| Ok(crate::storage::Storage::cpu(f(d))))
}

fn same_float(op: &str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dtype() != b.dtype() || !a.dtype().is_float() {
        return Err(Error::dtype(
            op,
            format!(
                "expects two float tensors of one dtype, got {} {:?} and {} {:?}",
                a.dtype(),
                a.shape(),
                b.dtype(),
                b.shape()
            ),
        ));
    }
    Ok(())
}

/// Checks a convolution's input shape `xs` against the weight shape `ws` and the window.
fn conv_shape(
    op: &str,
    xs: &[usize],
    ws: &[usize],
    win: &Window,
    groups: usize,
) -> Result<cpu::ConvShape> {
    let bad = || {
        Error::shape(
            op,
            format!("input {xs:?}, weight {ws:?}, {groups} groups and window {win:?} do not fit"),
        )
    };
    if xs.len() != 4 || ws.len() != 4 || groups == 0 || win.kernel != (ws[2], ws[3]) {
        return Err(bad());
    }
    if xs[1] % groups != 0 || ws[0] % groups != 0 || ws[1] * groups != xs[1] {
        return Err(bad());
    }
    let (oh, ow) = win.output_size(xs[2], xs[3]).ok_or_else(bad)?;
    Ok(cpu::ConvShape {
        n: xs[0],
        c: xs[1],
        h: xs[2],
        w: xs[3],
        o: ws[0],
        groups,
        oh,
        ow,
        win: *win,
    })
}

fn conv_shape_fwd(inputs: &[&Tensor], win: &Window, groups: usize) -> Result<cpu::ConvShape> {
    let (x, w) = (inputs[0], inputs[1]);
    same_float("conv2d", x, w)?;
    let s = conv_shape("conv2d", x.shape(), w.shape(), win, groups)?;
    if let Some(b) = inputs.get(2) {
        if b.shape() != [s.o] {
            return Err(Error::shape(
                "conv2d",
                format!("bias must have shape [{}], got {:?}", s.o, b.shape()),
            ));
        }
        if b.dtype() != x.dtype() {
            return Err(Error::dtype(
                "conv2d",
                format!(
                    "bias must be {} like the input, got {} {:?}",
                    x.dtype(),
                    b.dtype(),
                    b.shape()
                ),
            ));
        }
    }
    Ok(s)
}

fn expect_output(op: &str, dys: &[usize], s: &cpu::ConvShape) -> Result<()> {
    if dys != [s.n, s.o, s.oh, s.ow] {
        return Err(Error::shape(
            op,
            format!(
                "gradient of shape {dys:?} does not match the convolution's output {:?}",
                [s.n, s.o, s.oh, s.ow]
            ),
        ));
    }
    Ok(())
}

pub(crate) fn saves(op: &Op, needs: &[bool]) -> SaveMask {
    let mut m = SaveMask::default();
    match op {
        // conv2d (x, w[, b]): dx needs w, dw needs x
        Op::Conv2d { .. } => {
            m.input(0, needs[1]);
            m.input(1, needs[0]);
        }
        // input grad (dy, w): d(dy) = conv(g, w), dw = weight_grad(g, dy)
        // weight grad (x, dy): dx = input_grad(dy, g), d(dy) = conv(x, g)
        Op::Conv2dInputGrad { .. } | Op::Conv2dWeightGrad { .. } => {
            m.input(0, needs[1]);
            m.input(1, needs[0]);
        }
        Op::MaxPool2d(_) => m.input(0, needs[0]),
        Op::MaxPool2dGrad(_) => m.input(0, needs[1]),
        _ => {}
    }
    m
}

pub(crate) fn backward(ctx: &RuleCtx, dy: &Tensor) -> Result<Vec<Option<Tensor>>> {
    let s = ctx.shape(0);
    let mut out = vec![None; ctx.n_inputs()];
    let need = |i: usize| ctx.needs.get(i).copied().unwrap_or(false);
    // the three convolution ops are each other's gradients: the convolution is bilinear
    let conv = |x: &Tensor, w: &Tensor, window: Window, groups: usize| {
        apply1(
            &Op::Conv2d {
                window: Box::new(window),
                groups,
            },
            &[x, w],
        )
    };
    let input_grad = |dy: &Tensor, w: &Tensor, window: Window, groups: usize| {
        let size = (s[2], s[3]);
        apply1(
            &Op::Conv2dInputGrad {
                window: Box::new(window),
                groups,
                size,
            },
            &[dy, w],
        )
    };
    let weight_grad = |x: &Tensor, dy: &Tensor, window: Window, groups: usize| {
        apply1(
            &Op::Conv2dWeightGrad {
                window: Box::new(window),
                groups,
            },
            &[x, dy],
        )
    };
    match ctx.op {
        // inputs (x, w[, b])
        Op::Conv2d { window, groups } => {
            if need(0) {
                out[0] = Some(input_grad(dy, &ctx.input(1)?, **window, *groups)?);
            }
            if need(1) {
                out[1] = Some(weight_grad(&ctx.input(0)?, dy, **window, *groups)?);
            }
            if need(2) {
                out[2] = Some(dy.sum(Some(&[0, 2, 3]), false)?);
            }
            return Ok(out);
        }
        // inputs (dy, w), incoming gradient g of dx
        Op::Conv2dInputGrad { window, groups, .. } => {
            if need(0) {
                out[0] = Some(conv(dy, &ctx.input(1)?, **window, *groups)?);
            }
            if need(1) {
                out[1] = Some(weight_grad(dy, &ctx.input(0)?, **window, *groups)?);
            }
            return Ok(out);
        }
        // inputs (x, dy), incoming gradient g of dw
        Op::Conv2dWeightGrad { window, groups } => {
            if need(0) {
                out[0] = Some(input_grad(&ctx.input(1)?, dy, **window, *groups)?);
            }
            if need(1) {
                out[1] = Some(conv(&ctx.input(0)?, dy, **window, *groups)?);
            }
            return Ok(out);
        }
        Op::MaxPool2d(window) => {
            out[0] = Some(apply1(
                &Op::MaxPool2dGrad(window.clone()),
                &[&ctx.input(0)?, dy],
            )?);
            return Ok(out);
        }
        Op::MaxPool2dGrad(window) => {
            // linear in dy: each output takes the gradient at its window's maximum of x
            if need(1) {
                let x = ctx.input(0)?;
                let (oh, ow) = window.output_size(s[2], s[3]).unwrap_or((0, 0));
                let idx = apply1(&Op::PoolArgmax(window.clone()), &[&x])?;
                let flat = dy.reshape(&[s[0], s[1], s[2] * s[3]])?;
                out[1] = Some(flat.gather(&idx, 2)?.reshape(&[s[0], s[1], oh, ow])?);
            }
            return Ok(out);
        }
        _ => {}
    }
    Ok(vec![Some(match ctx.op {
        Op::Unfold { window, .. } => apply1(
            &Op::Fold {
                window: window.clone(),
                size: (s[2], s[3]),
            },
            &[dy],
        )?,
        Op::Fold { window, .. } => apply1(
            &Op::Unfold {
                window: window.clone(),
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
    let (oh, ow) = windows_fit(op, x, win)?;
    Ok((
        apply1(
            &Op::Unfold {
                window: Box::new(*win),
                pad,
            },
            &[x],
        )?,
        oh,
        ow,
    ))
}

/// Checks that `win` is valid and fits the NCHW input `x`: the output's spatial size.
fn windows_fit(op: &str, x: &Tensor, win: &Window) -> Result<(usize, usize)> {
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
    Ok((oh, ow))
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
    for (what, t) in std::iter::once(("weight", weight)).chain(bias.map(|b| ("bias", b))) {
        if t.dtype() != x.dtype() {
            return Err(Error::dtype(
                OP,
                format!(
                    "dtype mismatch: input {} {:?} vs {what} {} {:?}",
                    x.dtype(),
                    x.shape(),
                    t.dtype(),
                    t.shape()
                ),
            ));
        }
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
    if let Some(b) = bias {
        if b.shape() != [o] {
            return Err(Error::shape(
                OP,
                format!("bias must have shape [{o}], got {:?}", b.shape()),
            ));
        }
    }
    let win = Window {
        kernel: (kh, kw),
        stride,
        padding,
        dilation,
        ceil: false,
    };
    if x.device() == crate::Device::Cpu {
        // one op whose kernels work image by image, straight into NCHW
        windows_fit(OP, x, &win)?;
        let op = Op::Conv2d {
            window: Box::new(win),
            groups,
        };
        return match bias {
            None => apply1(&op, &[x, weight]),
            Some(b) => apply1(&op, &[x, weight, b]),
        };
    }
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
        Some(b) => y.add(&b.reshape(&[o, 1, 1])?),
    }
}

/// [`conv2d`] with PyTorch's `padding="same"` (stride 1): the output keeps the input's
/// spatial size; an odd total padding puts the extra row or column at the bottom or right,
/// as PyTorch does.
pub fn conv2d_same(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    dilation: (usize, usize),
    groups: usize,
) -> Result<Tensor> {
    check_nchw("conv2d", x)?;
    let ws = weight.shape();
    if ws.len() != 4 {
        return Err(Error::shape(
            "conv2d",
            format!("weight must be [out, in/groups, kh, kw], got shape {ws:?}"),
        ));
    }
    let total = (
        dilation.0 * ws[2].saturating_sub(1),
        dilation.1 * ws[3].saturating_sub(1),
    );
    let (extra_h, extra_w) = (total.0 % 2, total.1 % 2);
    let padded = if extra_h + extra_w > 0 {
        let s = x.shape();
        let all = |n: usize| crate::layout::SliceSpec::Range {
            start: 0,
            stop: n as isize,
            step: 1,
        };
        let op = Op::SliceGrad {
            shape: [s[0], s[1], s[2] + extra_h, s[3] + extra_w].into(),
            specs: [all(s[0]), all(s[1]), all(s[2]), all(s[3])].into(),
        };
        apply1(&op, &[x])?
    } else {
        x.clone()
    };
    conv2d(
        &padded,
        weight,
        bias,
        (1, 1),
        (total.0 / 2, total.1 / 2),
        dilation,
        groups,
    )
}

/// The window of a pooling op (`stride` defaults to the kernel), checked like PyTorch:
/// padding at most half the effective kernel.
fn pool_window(
    op: &str,
    kernel: (usize, usize),
    stride: Option<(usize, usize)>,
    padding: (usize, usize),
    dilation: (usize, usize),
    ceil: bool,
) -> Result<Window> {
    let eff = |k: usize, d: usize| d * k.saturating_sub(1) + 1;
    if padding.0 * 2 > eff(kernel.0, dilation.0) || padding.1 * 2 > eff(kernel.1, dilation.1) {
        return Err(Error::invalid(
            op,
            format!(
                "padding {padding:?} must be at most half the kernel {kernel:?} (dilation {dilation:?})"
            ),
        ));
    }
    Ok(Window {
        kernel,
        stride: stride.unwrap_or(kernel),
        padding,
        dilation,
        ceil,
    })
}

/// Each window of `[n, c, h, w]` reduced to one value through im2col (padding reads `pad`).
fn pool_by_unfold(
    op: &str,
    x: &Tensor,
    win: &Window,
    pad: f64,
    reduce: fn(&Tensor, Option<&[isize]>, bool) -> Result<Tensor>,
) -> Result<Tensor> {
    let (cols, oh, ow) = windows(op, x, win, pad)?;
    let s = x.shape();
    reduce(&cols, Some(&[3]), false)?
        .reshape(&[s[0], oh, ow, s[1]])?
        .permute(&[0, 3, 1, 2])
}

/// 2-D max pooling over `[n, c, h, w]` (padding never wins: it reads -inf), as PyTorch's
/// `max_pool2d` (first maximum in a window on ties; NaN propagates).
pub fn max_pool2d(
    x: &Tensor,
    kernel: (usize, usize),
    stride: Option<(usize, usize)>,
    padding: (usize, usize),
    dilation: (usize, usize),
    ceil_mode: bool,
) -> Result<Tensor> {
    const OP: &str = "max_pool2d";
    let win = pool_window(OP, kernel, stride, padding, dilation, ceil_mode)?;
    let (oh, ow) = windows_fit(OP, x, &win)?;
    if x.device() == crate::Device::Cpu {
        return apply1(&Op::MaxPool2d(Box::new(win)), &[x]);
    }
    // elsewhere: each window's first maximum (NaN wins), gathered; the gradient reaches that
    // element alone, as on the CPU
    let s = x.shape();
    let idx = apply1(&Op::PoolArgmax(Box::new(win)), &[x])?;
    x.reshape(&[s[0], s[1], s[2] * s[3]])?
        .gather(&idx, 2)?
        .reshape(&[s[0], s[1], oh, ow])
}

/// How [`avg_pool2d`] divides each window's sum (PyTorch's `count_include_pad` and
/// `divisor_override`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AvgDivisor {
    /// The window's positions inside the padded input (PyTorch's default).
    IncludePad,
    /// The window's positions inside the input.
    ExcludePad,
    /// A fixed divisor.
    Fixed(usize),
}

/// 2-D average pooling over `[n, c, h, w]`: each window's sum divided as `divisor` says.
pub fn avg_pool2d(
    x: &Tensor,
    kernel: (usize, usize),
    stride: Option<(usize, usize)>,
    padding: (usize, usize),
    ceil_mode: bool,
    divisor: AvgDivisor,
) -> Result<Tensor> {
    const OP: &str = "avg_pool2d";
    if divisor == AvgDivisor::Fixed(0) {
        return Err(Error::invalid(OP, "divisor_override must be positive"));
    }
    let win = pool_window(OP, kernel, stride, padding, (1, 1), ceil_mode)?;
    let y = pool_by_unfold(OP, x, &win, 0.0, Tensor::mean)?;
    // the mean divided by the window size; rescale where the divisor differs (PyTorch's
    // rule: windows are clipped to the padded input, then to the input without padding)
    let s = x.shape();
    let (oh, ow) = (y.shape()[2], y.shape()[3]);
    let extent = |o: usize, n: usize, k: usize, st: usize, p: usize| {
        let start = (o * st) as isize - p as isize;
        let end = (start + k as isize).min((n + p) as isize);
        let with_pad = (end - start).max(0);
        let inside = (end.min(n as isize) - start.max(0)).max(0);
        (with_pad as f64, inside as f64)
    };
    let full = (kernel.0 * kernel.1) as f64;
    let mut scale = Vec::with_capacity(oh * ow);
    for oy in 0..oh {
        let (rp, ri) = extent(oy, s[2], kernel.0, win.stride.0, padding.0);
        for ox in 0..ow {
            let (cp, ci) = extent(ox, s[3], kernel.1, win.stride.1, padding.1);
            let div = match divisor {
                AvgDivisor::IncludePad => rp * cp,
                AvgDivisor::ExcludePad => ri * ci,
                AvgDivisor::Fixed(d) => d as f64,
            };
            scale.push(full / div.max(1.0));
        }
    }
    if scale.iter().all(|&v| v == 1.0) {
        return Ok(y);
    }
    let scale = Tensor::from_vec(scale, &[1, 1, oh, ow])?
        .astype(x.dtype())?
        .to_device(x.device())?;
    y.mul(&scale)
}
