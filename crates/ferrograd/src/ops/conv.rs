//! 2-D convolution and pooling, built from `unfold` (im2col), its transpose `fold`, matmul and
//! reductions, so every gradient (of any order) comes from rules that already exist.

use super::{Family, Grads};
use crate::autograd::{RuleCtx, SaveMask};
use crate::backend::on_device;
use crate::dispatch::apply1;
use crate::error::{Error, Result};
use crate::op::{Op, WindowOp};
use crate::tensor::Tensor;
use crate::window::{ConvShape, Window};

impl Family for WindowOp {
    fn forward(&self, inputs: &[&Tensor]) -> Result<Tensor> {
        let name = self.name();
        let x = inputs[0];
        Ok(match self {
            WindowOp::Unfold { window, pad } => {
                let s = x.shape();
                let (oh, ow) = window.output_size(s[2], s[3]).unwrap_or((0, 0));
                let shape = [
                    s[0],
                    product(name, oh, ow)?,
                    s[1],
                    product(name, window.kernel.0, window.kernel.1)?,
                ];
                check_size(name, &shape, x)?;
                Tensor::from_storage(
                    on_device!(name, inputs, |b, d| b.unfold(
                        d[0],
                        x.layout(),
                        window,
                        *pad
                    ))?,
                    &shape,
                )
            }
            WindowOp::PoolArgmax(window) => {
                let s = x.shape();
                let (oh, ow) = window.output_size(s[2], s[3]).unwrap_or((0, 0));
                Tensor::from_storage(
                    on_device!(name, inputs, |b, d| b.pool_argmax(d[0], x.layout(), window))?,
                    &[s[0], s[1], oh * ow],
                )
            }
            WindowOp::Fold { window, size } => {
                let s = x.shape();
                let shape = [s[0], s[2], size.0, size.1];
                check_size(name, &shape, x)?;
                Tensor::from_storage(
                    on_device!(name, inputs, |b, d| b.fold(d[0], x.layout(), window, *size))?,
                    &shape,
                )
            }
            WindowOp::Conv2d { window, groups } => {
                let s = conv_shape_fwd(inputs, window, *groups)?;
                let w = inputs[1];
                let shape = [s.n, s.o, s.oh, s.ow];
                check_size(name, &shape, x)?;
                Tensor::from_storage(
                    on_device!(name, inputs, |b, d| {
                        let bias = inputs.get(2).map(|t| (d[2], t.layout()));
                        b.conv2d((d[0], x.layout()), (d[1], w.layout()), bias, &s)
                    })?,
                    &shape,
                )
            }
            WindowOp::Conv2dInputGrad {
                window,
                groups,
                size,
            } => {
                // inputs: (dy [n, o, oh, ow], weight [o, c / groups, kh, kw])
                let (dy, w) = (inputs[0], inputs[1]);
                same_float(name, dy, w)?;
                let (ds, ws) = (dy.shape(), w.shape());
                if ds.len() != 4 || ws.len() != 4 {
                    return Err(Error::shape(
                        name,
                        format!("expects an NCHW gradient and a 4-D weight, got {ds:?} and {ws:?}"),
                    ));
                }
                let s = conv_shape(
                    name,
                    &[ds[0], ws[1] * groups, size.0, size.1],
                    ws,
                    window,
                    *groups,
                )?;
                expect_output(name, ds, &s)?;
                Tensor::from_storage(
                    on_device!(name, inputs, |b, d| {
                        b.conv2d_input_grad((d[0], dy.layout()), (d[1], w.layout()), &s)
                    })?,
                    &[s.n, s.c, s.h, s.w],
                )
            }
            WindowOp::Conv2dWeightGrad { window, groups } => {
                // inputs: (x [n, c, h, w], dy [n, o, oh, ow])
                let (x, dy) = (inputs[0], inputs[1]);
                same_float(name, x, dy)?;
                let (xs, ds) = (x.shape(), dy.shape());
                if xs.len() != 4 || ds.len() != 4 {
                    return Err(Error::shape(
                        name,
                        format!("expects NCHW input and gradient, got {xs:?} and {ds:?}"),
                    ));
                }
                let cg = xs[1] / (*groups).max(1);
                let ws = [ds[1], cg, window.kernel.0, window.kernel.1];
                let s = conv_shape(name, xs, &ws, window, *groups)?;
                expect_output(name, ds, &s)?;
                Tensor::from_storage(
                    on_device!(name, inputs, |b, d| {
                        b.conv2d_weight_grad((d[0], x.layout()), (d[1], dy.layout()), &s)
                    })?,
                    &ws,
                )
            }
            WindowOp::MaxPool2d(window) => {
                check_nchw(name, x)?;
                let s = x.shape();
                let (oh, ow) = window.output_size(s[2], s[3]).unwrap_or((0, 0));
                Tensor::from_storage(
                    on_device!(name, inputs, |b, d| b.max_pool2d(d[0], x.layout(), window))?,
                    &[s[0], s[1], oh, ow],
                )
            }
            WindowOp::MaxPool2dGrad(window) => {
                let dy = inputs[1];
                check_nchw(name, x)?;
                let s = x.shape();
                let (oh, ow) = window.output_size(s[2], s[3]).unwrap_or((0, 0));
                if dy.shape() != [s[0], s[1], oh, ow] || dy.dtype() != x.dtype() {
                    return Err(Error::shape(
                        name,
                        format!(
                            "gradient {} {:?} does not match the pooled input {} {s:?}",
                            dy.dtype(),
                            dy.shape(),
                            x.dtype()
                        ),
                    ));
                }
                Tensor::from_storage(
                    on_device!(name, inputs, |b, d| {
                        b.max_pool2d_grad((d[0], x.layout()), (d[1], dy.layout()), window)
                    })?,
                    s,
                )
            }
        })
    }

    fn saves(&self, needs: &[bool]) -> SaveMask {
        let mut m = SaveMask::default();
        match self {
            // conv2d (x, w[, b]): dx needs w, dw needs x
            // input grad (dy, w): d(dy) = conv(g, w), dw = weight_grad(g, dy)
            // weight grad (x, dy): dx = input_grad(dy, g), d(dy) = conv(x, g)
            WindowOp::Conv2d { .. }
            | WindowOp::Conv2dInputGrad { .. }
            | WindowOp::Conv2dWeightGrad { .. } => {
                m.input(0, needs[1]);
                m.input(1, needs[0]);
            }
            WindowOp::MaxPool2d(_) => m.input(0, needs[0]),
            WindowOp::MaxPool2dGrad(_) => m.input(0, needs[1]),
            WindowOp::Unfold { .. } | WindowOp::Fold { .. } | WindowOp::PoolArgmax(_) => {}
        }
        m
    }

    fn backward(&self, ctx: &RuleCtx, dy: &Tensor) -> Result<Grads> {
        let s = ctx.shape(0);
        let window_op = |op: WindowOp, inputs: &[&Tensor]| apply1(&Op::Window(op), inputs);
        // the three convolution ops are each other's gradients: the convolution is bilinear
        let conv = |x: &Tensor, w: &Tensor, window: &Window, groups: usize| {
            window_op(
                WindowOp::Conv2d {
                    window: Box::new(*window),
                    groups,
                },
                &[x, w],
            )
        };
        let input_grad = |dy: &Tensor, w: &Tensor, window: &Window, groups: usize| {
            window_op(
                WindowOp::Conv2dInputGrad {
                    window: Box::new(*window),
                    groups,
                    size: (s[2], s[3]),
                },
                &[dy, w],
            )
        };
        let weight_grad = |x: &Tensor, dy: &Tensor, window: &Window, groups: usize| {
            window_op(
                WindowOp::Conv2dWeightGrad {
                    window: Box::new(*window),
                    groups,
                },
                &[x, dy],
            )
        };
        Ok(match self {
            // inputs (x, w[, b])
            WindowOp::Conv2d { window, groups } => {
                let mut out = vec![
                    ctx.need(0, || input_grad(dy, &ctx.input(1)?, window, *groups))?,
                    ctx.need(1, || weight_grad(&ctx.input(0)?, dy, window, *groups))?,
                ];
                if ctx.n_inputs() > 2 {
                    out.push(ctx.need(2, || dy.sum(Some(&[0, 2, 3]), false))?);
                }
                out
            }
            // inputs (dy, w), incoming gradient g of dx
            WindowOp::Conv2dInputGrad { window, groups, .. } => vec![
                ctx.need(0, || conv(dy, &ctx.input(1)?, window, *groups))?,
                ctx.need(1, || weight_grad(dy, &ctx.input(0)?, window, *groups))?,
            ],
            // inputs (x, dy), incoming gradient g of dw
            WindowOp::Conv2dWeightGrad { window, groups } => vec![
                ctx.need(0, || input_grad(&ctx.input(1)?, dy, window, *groups))?,
                ctx.need(1, || conv(&ctx.input(0)?, dy, window, *groups))?,
            ],
            WindowOp::MaxPool2d(window) => vec![Some(window_op(
                WindowOp::MaxPool2dGrad(window.clone()),
                &[&ctx.input(0)?, dy],
            )?)],
            // linear in dy: each output takes the gradient at its window's maximum of x, which
            // moves only where x's order changes (a zero gradient almost everywhere)
            WindowOp::MaxPool2dGrad(window) => vec![
                ctx.need(0, || ctx.zeros(0, dy))?,
                ctx.need(1, || {
                    let x = ctx.input(0)?;
                    let (oh, ow) = window.output_size(s[2], s[3]).unwrap_or((0, 0));
                    let idx = window_op(WindowOp::PoolArgmax(window.clone()), &[&x])?;
                    let flat = dy.reshape(&[s[0], s[1], s[2] * s[3]])?;
                    gather_windows(&flat, &idx, 0.0)?.reshape(&[s[0], s[1], oh, ow])
                })?,
            ],
            WindowOp::Unfold { window, .. } => vec![Some(window_op(
                WindowOp::Fold {
                    window: window.clone(),
                    size: (s[2], s[3]),
                },
                &[dy],
            )?)],
            WindowOp::Fold { window, .. } => vec![Some(window_op(
                WindowOp::Unfold {
                    window: window.clone(),
                    pad: 0.0,
                },
                &[dy],
            )?)],
            WindowOp::PoolArgmax(_) => return Err(super::not_differentiable(self.name())),
        })
    }
}

/// Checks that an output of `shape` (with `x`'s dtype) can be addressed.
fn check_size(op: &str, shape: &[usize], x: &Tensor) -> Result<()> {
    crate::layout::checked_size(op, shape, x.dtype().size_in_bytes()).map(|_| ())
}

/// `a * b`, or a `ShapeError` naming `op` when the product overflows.
fn product(op: &str, a: usize, b: usize) -> Result<usize> {
    a.checked_mul(b)
        .ok_or_else(|| Error::shape(op, format!("a window size {a} x {b} is too big")))
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
) -> Result<ConvShape> {
    let bad = || {
        Error::shape(
            op,
            format!("input of shape {xs:?}, weight of shape {ws:?}, groups={groups} and {win} do not fit together"),
        )
    };
    if xs.len() != 4 || ws.len() != 4 || groups == 0 || win.kernel != (ws[2], ws[3]) {
        return Err(bad());
    }
    if xs[1] % groups != 0 || ws[0] % groups != 0 || ws[1] * groups != xs[1] {
        return Err(bad());
    }
    let (oh, ow) = win.output_size(xs[2], xs[3]).ok_or_else(bad)?;
    Ok(ConvShape {
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

fn conv_shape_fwd(inputs: &[&Tensor], win: &Window, groups: usize) -> Result<ConvShape> {
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

fn expect_output(op: &str, dys: &[usize], s: &ConvShape) -> Result<()> {
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
            &Op::Window(WindowOp::Unfold {
                window: Box::new(*win),
                pad,
            }),
            &[x],
        )?,
        oh,
        ow,
    ))
}

/// Kernel, stride and dilation must be positive: an error naming the argument that is not.
fn check_positive(op: &str, win: &Window) -> Result<()> {
    for (what, v) in [
        ("kernel_size", win.kernel),
        ("stride", win.stride),
        ("dilation", win.dilation),
    ] {
        if v.0 == 0 || v.1 == 0 {
            return Err(Error::invalid(
                op,
                format!("{what} must be positive, got {v:?}"),
            ));
        }
    }
    Ok(())
}

/// Checks that `win` is valid and fits the NCHW input `x`: the output's spatial size.
fn windows_fit(op: &str, x: &Tensor, win: &Window) -> Result<(usize, usize)> {
    check_nchw(op, x)?;
    check_positive(op, win)?;
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
        let op = Op::Window(WindowOp::Conv2d {
            window: Box::new(win),
            groups,
        });
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
    let span = |d: usize, k: usize| {
        d.checked_mul(k.saturating_sub(1)).ok_or_else(|| {
            Error::shape(
                "conv2d",
                format!("dilation {dilation:?} with a kernel of shape {ws:?} is too wide"),
            )
        })
    };
    let total = (span(dilation.0, ws[2])?, span(dilation.1, ws[3])?);
    let (extra_h, extra_w) = (total.0 % 2, total.1 % 2);
    let padded = if extra_h + extra_w > 0 {
        let s = x.shape();
        let all = |n: usize| crate::layout::SliceSpec::Range {
            start: 0,
            stop: n as isize,
            step: 1,
        };
        let op = Op::Movement(crate::op::MovementOp::SliceGrad {
            shape: [s[0], s[1], s[2] + extra_h, s[3] + extra_w].into(),
            specs: [all(s[0]), all(s[1]), all(s[2]), all(s[3])].into(),
        });
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
    let stride = stride.unwrap_or(kernel);
    check_positive(
        op,
        &Window {
            kernel,
            stride,
            padding,
            dilation,
            ceil,
        },
    )?;
    // the effective kernel `d (k - 1) + 1`, checked: a window too wide to count is refused
    let eff = |k: usize, d: usize| d.checked_mul(k - 1).and_then(|e| e.checked_add(1));
    let half_fits = |p: usize, k: usize, d: usize| {
        eff(k, d).is_some_and(|e| p.checked_mul(2).is_some_and(|p2| p2 <= e))
    };
    if !half_fits(padding.0, kernel.0, dilation.0) || !half_fits(padding.1, kernel.1, dilation.1) {
        return Err(Error::invalid(
            op,
            format!(
                "padding {padding:?} must be at most half the kernel_size {kernel:?} (dilation \
                 {dilation:?})"
            ),
        ));
    }
    Ok(Window {
        kernel,
        stride,
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
        return apply1(&Op::Window(WindowOp::MaxPool2d(Box::new(win))), &[x]);
    }
    // elsewhere: each window's first maximum (NaN wins), gathered; the gradient reaches that
    // element alone, as on the CPU
    let s = x.shape();
    let idx = apply1(&Op::Window(WindowOp::PoolArgmax(Box::new(win))), &[x])?;
    let flat = x.reshape(&[s[0], s[1], s[2] * s[3]])?;
    gather_windows(&flat, &idx, f64::NEG_INFINITY)?.reshape(&[s[0], s[1], oh, ow])
}

/// `flat` `[n, c, h * w]` gathered at each window's maximum `idx` (from `PoolArgmax`), with
/// `empty` for windows entirely in the padding (index -1).
fn gather_windows(flat: &Tensor, idx: &Tensor, empty: f64) -> Result<Tensor> {
    let zero = idx.scalar_like(0.0);
    let picked = flat.gather(&idx.maximum(&zero)?, 2)?;
    super::where_cond(&idx.lt(&zero)?, &picked.scalar_like(empty), &picked)
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
