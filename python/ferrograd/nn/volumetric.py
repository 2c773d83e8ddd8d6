"""Volumetric (3-D) layers over ``(N, C, D, H, W)``: ``conv3d``, ``conv_transpose3d``,
``avg_pool3d``, ``max_pool3d`` and the adaptive pools, as PyTorch's, with their modules.

Each is written with the 2-D kernels: a 3-D convolution is a sum over the kernel's depth
of 2-D convolutions of depth slices (all output depths in one batched call per kernel
depth); pools are separable, over height and width first, then over depth. The gradients
are those ops' own."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import _core
from .._core import ShapeError, Tensor
from . import functional as F
from .modules import Module, _BatchNorm, _ConvNd, _tuple

__all__ = [
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool3d",
    "AvgPool3d",
    "BatchNorm3d",
    "Conv3d",
    "ConvTranspose3d",
    "LPPool3d",
    "MaxPool3d",
]


def _five(op: str, x: Tensor) -> tuple[Tensor, bool]:
    """``x`` as ``(N, C, D, H, W)`` and whether it was unbatched ``(C, D, H, W)``."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: input must be a Tensor, got {type(x).__name__}")
    if x.ndim == 4:
        return x.unsqueeze(0), True
    if x.ndim != 5:
        raise ShapeError(
            f"{op}: input must be (N, C, D, H, W) or (C, D, H, W), got shape {list(x.shape)}"
        )
    return x, False


def _pads3(op: str, padding: Any, kernel: tuple, dilation: tuple) -> list[tuple[int, int]]:
    """``(before, after)`` per axis (``"same"`` puts an odd total's extra one after, as
    PyTorch)."""
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0)] * 3
        if padding == "same":
            totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
            return [(t // 2, t - t // 2) for t in totals]
        raise ValueError(f"{op}: padding must be 'same', 'valid' or ints, got {padding!r}")
    p = _tuple(padding, 3)
    if any(v < 0 for v in p):
        raise ValueError(f"{op}: padding must be non-negative, got {padding!r}")
    return [(v, v) for v in p]


def conv3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """3-D convolution (cross-correlation) of ``(N, C, D, H, W)`` with ``weight``
    ``(O, C / groups, kD, kH, kW)``, PyTorch's arguments."""
    op = "conv3d"
    x, unbatched = _five(op, input)
    stride, dilation = (
        F._conv_arg(op, "stride", stride, 3),
        F._conv_arg(op, "dilation", dilation, 3),
    )
    if not isinstance(padding, str):
        padding = F._conv_arg(op, "padding", padding, 3)
    F._check_conv_stride(op, stride)
    F._check_conv_ints(op, groups, padding, dilation)
    if not isinstance(weight, Tensor) or weight.ndim != 5:
        raise ShapeError(f"{op}: weight must be (O, C/groups, kD, kH, kW), got {weight!r}")
    st, dl = _tuple(stride, 3), _tuple(dilation, 3)
    F._check_same_stride(op, padding, stride)
    kd, kh, kw = weight.shape[2:]
    (d0, d1), (h0, h1), (w0, w1) = _pads3(op, padding, (kd, kh, kw), dl)
    if h0 != h1 or w0 != w1:  # uneven: padded here, none left for the 2-D products
        x = F.pad(x, (w0, w1, h0, h1, 0, 0))
        h0 = w0 = 0
    ph, pw = h0, w0
    if d0 or d1:
        x = F.pad(x, (0, 0, 0, 0, d0, d1))
    pd = (d0 + d1) / 2
    n, c, d, h, w = x.shape
    dout = (d - dl[0] * (kd - 1) - 1) // st[0] + 1
    if dout <= 0:
        raise ShapeError(
            f"{op}: an input of depth {d - int(2 * pd)} (padded {d}) is smaller than the kernel "
            f"({kd}, dilation {dl[0]})"
        )
    out: Tensor | None = None
    for k in range(kd):
        start = k * dl[0]
        sl = x[:, :, start : start + st[0] * (dout - 1) + 1 : st[0]]  # (N, C, Dout, H, W)
        flat = sl.permute(0, 2, 1, 3, 4).reshape(n * dout, c, h, w)
        y = F.conv2d(flat, weight[:, :, k], None, st[1:], (ph, pw), dl[1:], groups)
        out = y if out is None else out + y
    assert out is not None
    o, ho, wo = out.shape[1], out.shape[2], out.shape[3]
    out = out.reshape(n, dout, o, ho, wo).permute(0, 2, 1, 3, 4)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1, 1)
    return out.squeeze(0) if unbatched else out


def _spread(z: Tensor, stride: int, length: int, before: int) -> Tensor:
    """``z`` (depth on axis 2) with ``stride - 1`` zeros between its depth slices, placed
    after ``before`` zeros, padded with zeros to ``length``."""
    n, c, d, h, w = z.shape
    if stride > 1:
        gap = _core.zeros((n, c, d, stride - 1, h, w), dtype=z.dtype.name, device=z.device)
        z = _core.concat([z.unsqueeze(3), gap], 3).reshape(n, c, d * stride, h, w)
        z = z[:, :, : (d - 1) * stride + 1]
    return F.pad(z, (0, 0, 0, 0, before, length - before - z.shape[2]))


def conv_transpose3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """The transpose of :func:`conv3d` (``weight`` ``(C, O / groups, kD, kH, kW)``),
    PyTorch's arguments and output size ``(D - 1) s - 2 p + d (k - 1) + output_padding + 1``
    per axis."""
    op = "conv_transpose3d"
    x, unbatched = _five(op, input)
    stride, padding, output_padding, dilation = (
        F._conv_arg(op, name, v, 3)
        for name, v in (
            ("stride", stride),
            ("padding", padding),
            ("output_padding", output_padding),
            ("dilation", dilation),
        )
    )
    F._check_conv_stride(op, stride)
    F._check_conv_ints(op, groups, padding, dilation)
    if not isinstance(weight, Tensor) or weight.ndim != 5:
        raise ShapeError(f"{op}: weight must be (C, O/groups, kD, kH, kW), got {weight!r}")
    st, pd, op_, dl = (_tuple(v, 3) for v in (stride, padding, output_padding, dilation))
    n, c, d, h, w = x.shape
    kd = weight.shape[2]
    full = (d - 1) * st[0] + dl[0] * (kd - 1) + 1 + op_[0]
    flat = x.permute(0, 2, 1, 3, 4).reshape(n * d, c, h, w)
    out: Tensor | None = None
    for k in range(kd):
        y = F.conv_transpose2d(flat, weight[:, :, k], None, st[1:], pd[1:], op_[1:], groups, dl[1:])
        o, ho, wo = y.shape[1:]
        y = y.reshape(n, d, o, ho, wo).permute(0, 2, 1, 3, 4)
        y = _spread(y, st[0], full, k * dl[0])
        out = y if out is None else out + y
    assert out is not None
    if pd[0]:
        out = out[:, :, pd[0] : full - pd[0]]
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1, 1)
    return out.squeeze(0) if unbatched else out


def _over_depth(x: Tensor, pool: Any) -> Tensor:
    """``pool`` (a 2-D pool of ``(N, C, D, H*W)`` over axis 2 only) applied to ``x``
    ``(N, C, D, H, W)``."""
    n, c, d, h, w = x.shape
    y = pool(x.reshape(n, c, d, h * w))
    return y.reshape(n, c, y.shape[2], h, w)


def _over_plane(x: Tensor, pool: Any) -> Tensor:
    n, c, d, h, w = x.shape
    y = pool(x.permute(0, 2, 1, 3, 4).reshape(n * d, c, h, w))
    return y.reshape(n, d, c, y.shape[2], y.shape[3]).permute(0, 2, 1, 3, 4)


def avg_pool3d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """Average pooling of ``(N, C, D, H, W)``, PyTorch's windows and divisors."""
    x, unbatched = _five("avg_pool3d", input)
    F._check_pool_input("avg_pool3d", x, 3)
    k, s, p, _ = F._check_pool_args("avg_pool3d", 3, kernel_size, stride, padding)
    if divisor_override is not None:
        if int(divisor_override) == 0:  # (PyTorch divides by a negative one as given)
            raise ValueError("avg_pool3d: divisor_override must not be zero, got 0")
        # window sums (each separable average times its window), then the given divisor
        y = _over_plane(x, lambda t: F.avg_pool2d(t, k[1:], s[1:], p[1:], ceil_mode, True, 1))
        y = _over_depth(
            y, lambda t: F.avg_pool2d(t, (k[0], 1), (s[0], 1), (p[0], 0), ceil_mode, True, 1)
        )
        y = y / float(divisor_override)
    else:
        y = _over_plane(
            x, lambda t: F.avg_pool2d(t, k[1:], s[1:], p[1:], ceil_mode, count_include_pad)
        )
        y = _over_depth(
            y,
            lambda t: F.avg_pool2d(
                t, (k[0], 1), (s[0], 1), (p[0], 0), ceil_mode, count_include_pad
            ),
        )
    return y.squeeze(0) if unbatched else y


def max_pool3d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor:
    """Max pooling of ``(N, C, D, H, W)``, PyTorch's windows; the gradient goes to the
    first maximum of each window in ``(d, h, w)`` order, as PyTorch's. With
    ``return_indices``, also the flat ``d * H * W + h * W + w`` position of each maximum
    within its channel (what ``max_unpool3d`` takes)."""
    x, unbatched = _five("max_pool3d", input)
    F._check_pool_input("max_pool3d", x, 3)
    k, s, p, dl = F._check_pool_args("max_pool3d", 3, kernel_size, stride, padding, dilation)
    if return_indices or x.dtype.kind in "iu":
        if x.dtype.kind in "iu":  # PyTorch pools int tensors too: exact in float64
            y, idx = max_pool3d(x.astype("float64"), k, s, p, dl, ceil_mode, True)
            y = y.astype(x.dtype.name)
        else:
            positions = [
                F._pool_axis("max_pool3d", x.shape[2 + i], k[i], s[i], p[i], dl[i], ceil_mode)
                for i in range(3)
            ]
            y, idx = F._pool_nd_indices(x, positions)
        if unbatched:
            y, idx = y.squeeze(0), idx.squeeze(0)
        return (y, idx) if return_indices else y
    y = _over_plane(x, lambda t: F.max_pool2d(t, k[1:], s[1:], p[1:], dl[1:], ceil_mode))
    y = _over_depth(
        y, lambda t: F.max_pool2d(t, (k[0], 1), (s[0], 1), (p[0], 0), (dl[0], 1), ceil_mode)
    )
    return y.squeeze(0) if unbatched else y


def _out3(output_size: Any, x: Tensor) -> tuple[int, int, int]:
    o = _tuple(output_size, 3) if not isinstance(output_size, (list, tuple)) else output_size
    if len(o) != 3:
        raise ValueError(f"adaptive pool: output_size must have 3 entries, got {output_size!r}")
    out = tuple(x.shape[2 + i] if v is None else int(v) for i, v in enumerate(o))
    F._check_output_size("adaptive pool3d", x, list(x.shape[:2]), out)
    return out  # type: ignore[return-value]


def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling of ``(N, C, D, H, W)`` to ``output_size``, PyTorch's windows."""
    x, unbatched = _five("adaptive_avg_pool3d", input)
    F._check_pool_input("adaptive_avg_pool3d", x, 3)
    od, oh, ow = _out3(output_size, x)
    y = _over_plane(x, lambda t: F.adaptive_avg_pool2d(t, (oh, ow)))
    y = _over_depth(y, lambda t: F.adaptive_avg_pool2d(t, (od, t.shape[3])))
    return y.squeeze(0) if unbatched else y


def adaptive_max_pool3d(input: Tensor, output_size: Any, return_indices: bool = False) -> Tensor:
    """Max pooling of ``(N, C, D, H, W)`` to ``output_size``, PyTorch's windows; with
    ``return_indices``, also the flat ``d * H * W + h * W + w`` position of each maximum."""
    x, unbatched = _five("adaptive_max_pool3d", input)
    F._check_pool_input("adaptive_max_pool3d", x, 3)
    od, oh, ow = _out3(output_size, x)
    if return_indices:
        positions = []
        for n_in, n_out in zip(x.shape[2:], (od, oh, ow)):
            wins = F._adaptive_windows(n_in, n_out)
            kk = max(e - b for b, e in wins)
            pos = np.full((n_out, kk), -1, dtype=np.int64)
            for i, (b, e) in enumerate(wins):
                pos[i, : e - b] = np.arange(b, e)
            positions.append(pos)
        y, idx = F._pool_nd_indices(x, positions)
        return (y.squeeze(0), idx.squeeze(0)) if unbatched else (y, idx)
    y = _over_plane(x, lambda t: F.adaptive_max_pool2d(t, (oh, ow)))
    y = _over_depth(y, lambda t: F.adaptive_max_pool2d(t, (od, t.shape[3])))
    return y.squeeze(0) if unbatched else y


class Conv3d(_ConvNd):
    """3-D convolution over ``(N, C, D, H, W)``, PyTorch's layout and initialisation."""

    _nd = 3
    _conv = staticmethod(conv3d)


class ConvTranspose3d(_ConvNd):
    """The transpose of :class:`Conv3d` (weights ``(in, out / groups, kD, kH, kW)``); a
    ``_ConvNd`` as PyTorch's (its own constructor and forward)."""

    _nd = 3

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        output_padding: Any = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: Any = 1,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
        rng: Any = None,
    ) -> None:
        Module.__init__(self)
        if padding_mode != "zeros":
            raise ValueError(
                f'ConvTranspose3d: only "zeros" padding_mode is supported, got {padding_mode!r}'
            )
        _ConvNd._setup(
            self,  # type: ignore[arg-type]
            "ConvTranspose3d",
            in_channels,
            out_channels,
            _tuple(kernel_size, 3),
            groups,
            bias,
            device,
            dtype,
            rng,
            transposed=True,
        )
        self.stride, self.padding = _tuple(stride, 3), _tuple(padding, 3)
        self.dilation, self.output_padding = _tuple(dilation, 3), _tuple(output_padding, 3)
        self.padding_mode, self.transposed = padding_mode, True

    def forward(self, x: Tensor, output_size: Any = None) -> Tensor:
        op = self.output_padding
        if output_size is not None:
            from .extra import _transpose_output_padding

            op = _transpose_output_padding(
                "ConvTranspose3d", x, output_size, 3, self.stride, self.padding,
                self.kernel_size, self.dilation,
            )  # fmt: skip
        return conv_transpose3d(
            x,
            self.weight,
            self.bias,
            self.stride,
            self.padding,
            op,
            self.groups,
            self.dilation,
        )


class AvgPool3d(Module):
    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, x: Tensor) -> Tensor:
        return avg_pool3d(
            x,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )


class MaxPool3d(Module):
    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, x: Tensor) -> Tensor:
        return max_pool3d(
            x,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            self.ceil_mode,
            self.return_indices,
        )


class AdaptiveAvgPool3d(Module):
    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return adaptive_avg_pool3d(x, self.output_size)


class AdaptiveMaxPool3d(Module):
    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, x: Tensor) -> Tensor:
        return adaptive_max_pool3d(x, self.output_size, self.return_indices)


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of ``(N, C, D, H, W)``."""

    _dims = (5,)


def max_pool3d_with_indices(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> tuple[Tensor, Tensor]:
    """:func:`max_pool3d` and the flat position of each maximum within its channel."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool3d_with_indices(
    input: Tensor, output_size: Any, return_indices: bool = False
) -> tuple[Tensor, Tensor]:
    """:func:`adaptive_max_pool3d` and the flat position of each maximum."""
    return adaptive_max_pool3d(input, output_size, True)


def lp_pool3d(
    input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
) -> Tensor:
    """Power-average pooling of ``(N, C, D, H, W)`` (or ``(C, D, H, W)``): ``(sum over the
    window of x ** norm_type) ** (1 / norm_type)``, and ``inf``/``-inf`` as
    :func:`lp_pool2d`."""
    x = F._float("lp_pool3d", "input", input)
    p = F._lp_norm_type("lp_pool3d", norm_type)
    k, _, _, _ = F._check_pool_args("lp_pool3d", 3, kernel_size, stride, 0)
    if math.isinf(p):
        return F._lp_extreme(max_pool3d, x, p, kernel_size, stride, ceil_mode)
    y = avg_pool3d(x**p, kernel_size, stride, 0, ceil_mode) * float(k[0] * k[1] * k[2])
    return F._lp_root(y, p)


class LPPool3d(Module):
    """:func:`lp_pool3d` as a layer."""

    def __init__(
        self, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
    ) -> None:
        super().__init__()
        self.norm_type, self.kernel_size = norm_type, kernel_size
        self.stride, self.ceil_mode = stride, ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        return lp_pool3d(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (
            f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
            f"ceil_mode={self.ceil_mode}"
        )


def _install() -> None:
    for name in (
        "lp_pool3d",
        "conv3d",
        "conv_transpose3d",
        "avg_pool3d",
        "max_pool3d",
        "max_pool3d_with_indices",
        "adaptive_max_pool3d_with_indices",
        "adaptive_avg_pool3d",
        "adaptive_max_pool3d",
    ):
        setattr(F, name, globals()[name])
        if name not in F.__all__:
            F.__all__.append(name)


_install()
