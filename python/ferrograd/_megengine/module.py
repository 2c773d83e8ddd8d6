"""MegEngine 1.x's ``megengine.module`` classes whose arguments or conventions differ from
PyTorch's, as subclasses of the package's ``nn`` classes."""

from __future__ import annotations

import math
import sys
import types
from typing import Any

import numpy as np

import ferrograd as fg

from .. import nn as _nn
from .._core import Tensor
from ..nn.more import SyncBatchNorm as _TorchSyncBatchNorm
from . import functional as _MF

# ----------------------------------------------------------------------- batch norm


class _MgeBatchNorm:
    """MegEngine's batch-norm behaviour, mixed into the package's classes: ``momentum``
    weighs the old running value (``running = momentum * running + (1 - momentum) *
    batch``, 0.9 by default); ``freeze=True`` normalises with the running statistics and
    keeps them and the affine parameters fixed; parameters and running statistics have
    MegEngine's shape ``(1, C, 1, 1)`` and the default dtype (the state-dict keys are the
    package's)."""

    _ndims: tuple = ()

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.9,
        affine: bool = True,
        track_running_stats: bool = True,
        freeze: bool = False,
        **kwargs: Any,
    ) -> None:
        if freeze and not track_running_stats:
            raise ValueError("track_running_stats must be initilized to True if freeze is True")
        super().__init__(num_features, eps, momentum, affine, track_running_stats)  # type: ignore[call-arg]
        self._track_running_stats_saved = track_running_stats
        self.freeze = freeze
        tshape = (1, num_features, 1, 1)
        if affine:
            self.weight = _nn.Parameter(fg.ones(tshape))
            self.bias = _nn.Parameter(fg.zeros(tshape))
        if track_running_stats:
            self.register_buffer("running_mean", fg.zeros(tshape))
            self.register_buffer("running_var", fg.ones(tshape))

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1.0)
            if getattr(self, "num_batches_tracked", None) is not None:
                self.num_batches_tracked.zero_()

    def _check_input_ndim(self, inp: Tensor) -> None:
        if inp.ndim not in self._ndims:
            want = " or ".join(f"{d}D" for d in self._ndims)
            raise ValueError(f"expected {want} input (got {inp.ndim}D input)")

    def forward(self, inp: Any) -> Tensor:
        inp = _MF._t(inp)
        self._check_input_ndim(inp)
        if not self._track_running_stats_saved and self.track_running_stats:
            raise ValueError(
                "track_running_stats can not be initilized to False and changed to True later"
            )
        weight, bias = self.weight, self.bias
        if self.freeze:
            weight = weight.detach() if weight is not None else None
            bias = bias.detach() if bias is not None else None
            cs = (1, -1) + (1,) * (inp.ndim - 2)
            scale = (self.running_var.reshape(cs) + self.eps) ** -0.5
            if weight is not None:
                scale = scale * weight.reshape(cs)
            shift = -self.running_mean.reshape(cs) * scale
            if bias is not None:
                shift = shift + bias.reshape(cs)
            return inp * scale + shift
        track = self.track_running_stats
        training = self.training or (self.running_mean is None and self.running_var is None)
        if self.training and track and getattr(self, "num_batches_tracked", None) is not None:
            self.num_batches_tracked += 1
        return _MF.batch_norm(
            inp,
            self.running_mean if track else None,
            self.running_var if track else None,
            weight,
            bias,
            training=training,
            momentum=self.momentum if (self.training and track) else 0.0,
            eps=self.eps,
        )

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_MgeBatchNorm, _nn.BatchNorm1d):
    """MegEngine's ``BatchNorm1d`` over ``(N, C)`` or ``(N, C, L)`` input (momentum 0.9 by
    default, weighing the old running value; ``freeze``)."""

    _ndims = (2, 3)


class BatchNorm2d(_MgeBatchNorm, _nn.BatchNorm2d):
    """MegEngine's ``BatchNorm2d`` over ``(N, C, H, W)`` input (momentum 0.9 by default,
    weighing the old running value; ``freeze``)."""

    _ndims = (4,)


class SyncBatchNorm(_MgeBatchNorm, _TorchSyncBatchNorm):
    """MegEngine's ``SyncBatchNorm`` (2-D to 4-D input); in one process it is
    :class:`BatchNorm2d`'s computation (``group`` is kept for the signature)."""

    _ndims = (2, 3, 4)

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.9,
        affine: bool = True,
        track_running_stats: bool = True,
        freeze: bool = False,
        group: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, freeze)
        self.group = group

    def forward(self, inp: Any) -> Tensor:
        inp = _MF._t(inp)
        self._check_input_ndim(inp)
        weight, bias = self.weight, self.bias
        if self.freeze:
            weight = weight.detach() if weight is not None else None
            bias = bias.detach() if bias is not None else None
        track = self.track_running_stats
        training = (self.training and not self.freeze) or (
            self.running_mean is None and self.running_var is None
        )
        return _MF.batch_norm(
            inp,
            self.running_mean,
            self.running_var,
            weight,
            bias,
            training=training,
            momentum=self.momentum if (self.training and track) else 0.0,
            eps=self.eps,
        )


# ---------------------------------------------------------------------- other layers


def _check_modes(op: str, conv_mode: str | None, compute_mode: str) -> None:
    """Checks MegEngine's ``conv_mode`` (only "cross_correlation", as MegEngine 1.x
    computes) and ``compute_mode`` ("default", or "float32", MegEngine's request for float32
    intermediates with float16 input; accepted without changing how the package computes)."""
    if conv_mode is not None and str(conv_mode).lower() != "cross_correlation":
        raise ValueError(f'{op}: conv_mode must be "cross_correlation", got {conv_mode!r}')
    if str(compute_mode).lower() not in ("default", "float32"):
        raise ValueError(f'{op}: compute_mode must be "default" or "float32", got {compute_mode!r}')


class Linear(_nn.Linear):
    """MegEngine's ``Linear(in_features, out_features, bias=True, compute_mode="default")``;
    the weight is ``(out_features, in_features)``, as in PyTorch."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        compute_mode: str = "default",
        **kwargs: Any,
    ) -> None:
        _check_modes("Linear", None, compute_mode)
        kwargs.pop("name", None)
        super().__init__(in_features, out_features, bias, **kwargs)
        self.compute_mode = compute_mode


def _megengine_layout(module: Any, state_dict: Any, prefix: str, *rest: Any) -> None:
    """Load-time reshape of MegEngine's convolution layouts: a grouped weight with its
    leading group axis, ``(G, OC / G, IC / G, *kernel)``, and a bias of shape
    ``(1, OC, 1, 1)`` become the package's ``(OC, IC / G, *kernel)`` and ``(OC,)``."""
    for name in ("weight", "bias"):
        key = prefix + name
        target = module.__dict__.get(name)
        if target is None or key not in state_dict:
            continue
        value = state_dict[key]
        shape, want = tuple(np.shape(value)), tuple(target.shape)
        if name == "weight":
            grouped = (
                len(shape) == len(want) + 1
                and shape[0] == module.groups
                and shape[0] * shape[1] == want[0]
                and shape[2:] == want[1:]
            )
            if grouped:
                state_dict[key] = value.reshape(want)
        elif (
            len(want) == 1
            and len(shape) > 2
            and shape[:2] == (1, want[0])
            and all(d == 1 for d in shape[2:])
        ):
            state_dict[key] = value.reshape(want)


def _mge_conv(base: Any, op: str) -> Any:
    """A MegEngine convolution class over the package's ``base``: MegEngine's argument order
    (``stride, padding, dilation, groups, bias``, the same as PyTorch's) plus ``conv_mode``,
    ``compute_mode`` and the module ``name``."""

    class Conv(base):  # type: ignore[misc, valid-type]
        def __init__(
            self,
            in_channels: int,
            out_channels: int,
            kernel_size: Any,
            stride: Any = 1,
            padding: Any = 0,
            dilation: Any = 1,
            groups: int = 1,
            bias: bool = True,
            conv_mode: str = "cross_correlation",
            compute_mode: str = "default",
            padding_mode: str = "zeros",
            **kwargs: Any,
        ) -> None:
            _check_modes(op, conv_mode, compute_mode)
            kwargs.pop("name", None)
            super().__init__(
                in_channels,
                out_channels,
                kernel_size,
                stride,
                padding,
                dilation,
                groups,
                bias,
                padding_mode,
                **kwargs,
            )
            self.conv_mode = conv_mode
            self.compute_mode = compute_mode
            self.register_load_state_dict_pre_hook(_megengine_layout)

    Conv.__name__ = Conv.__qualname__ = op
    Conv.__doc__ = (
        f"MegEngine's ``{op}(in_channels, out_channels, kernel_size, stride=1, padding=0, "
        'dilation=1, groups=1, bias=True, conv_mode="cross_correlation", '
        'compute_mode="default", padding_mode="zeros")``; weights in the package\'s '
        "``(out, in / groups, *kernel)`` layout, MegEngine's grouped weights and "
        "``(1, out, 1, 1)`` biases reshaped when a state dict is loaded."
    )
    return Conv


Conv1d = _mge_conv(_nn.Conv1d, "Conv1d")
Conv2d = _mge_conv(_nn.Conv2d, "Conv2d")
Conv3d = _mge_conv(_nn.Conv3d, "Conv3d")


def _mge_conv_transpose(base: Any, op: str) -> Any:
    """A MegEngine transposed convolution over the package's ``base``: MegEngine's argument
    order puts ``dilation`` before ``groups`` and ``bias`` (PyTorch's puts it last)."""

    class ConvTranspose(base):  # type: ignore[misc, valid-type]
        def __init__(
            self,
            in_channels: int,
            out_channels: int,
            kernel_size: Any,
            stride: Any = 1,
            padding: Any = 0,
            output_padding: Any = 0,
            dilation: Any = 1,
            groups: int = 1,
            bias: bool = True,
            conv_mode: str = "cross_correlation",
            compute_mode: str = "default",
            **kwargs: Any,
        ) -> None:
            _check_modes(op, conv_mode, compute_mode)
            kwargs.pop("name", None)
            super().__init__(
                in_channels,
                out_channels,
                kernel_size,
                stride,
                padding,
                output_padding,
                groups=groups,
                bias=bias,
                dilation=dilation,
                **kwargs,
            )
            self.conv_mode = conv_mode
            self.compute_mode = compute_mode
            self.register_load_state_dict_pre_hook(_megengine_layout)

    ConvTranspose.__name__ = ConvTranspose.__qualname__ = op
    ConvTranspose.__doc__ = (
        f"MegEngine's ``{op}(in_channels, out_channels, kernel_size, stride=1, padding=0, "
        "output_padding=0, dilation=1, groups=1, bias=True, conv_mode, compute_mode)`` "
        "(``dilation`` comes before ``groups``, unlike PyTorch's); MegEngine's grouped "
        "weights ``(groups, in / groups, out / groups, *kernel)`` and ``(1, out, 1, 1)`` "
        "biases are reshaped when a state dict is loaded."
    )
    return ConvTranspose


ConvTranspose2d = _mge_conv_transpose(_nn.ConvTranspose2d, "ConvTranspose2d")
ConvTranspose3d = _mge_conv_transpose(_nn.ConvTranspose3d, "ConvTranspose3d")


class AvgPool2d(_nn.AvgPool2d):
    """MegEngine's ``AvgPool2d``: ``mode`` "average_count_exclude_padding" (the default:
    padded entries are not counted) or "average"."""

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        mode: str = "average_count_exclude_padding",
        **kwargs: Any,
    ) -> None:
        modes = ("average_count_exclude_padding", "average")
        if mode.lower() not in modes:
            raise ValueError(f"AvgPool2d: mode must be one of {modes}, got {mode!r}")
        super().__init__(
            kernel_size,
            stride if stride is not None else kernel_size,
            padding,
            count_include_pad=mode.lower() == "average",
        )
        self.mode = mode

    def forward(self, x: Any) -> Tensor:
        return _MF.avg_pool2d(_MF._t(x), self.kernel_size, self.stride, self.padding, self.mode)

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"mode={self.mode}"
        )


class Dropout(_nn.Dropout):
    """MegEngine's ``Dropout(drop_prob=0.0)``."""

    def __init__(self, drop_prob: float = 0.0, **kwargs: Any) -> None:
        super().__init__(drop_prob)
        self.drop_prob = drop_prob

    def forward(self, x: Tensor) -> Tensor:
        return _MF.dropout(x, self.drop_prob, self.training) if self.training else x

    def extra_repr(self) -> str:
        return f"drop_prob={self.drop_prob}"


class Softmax(_nn.Softmax):
    """MegEngine's ``Softmax(axis=None)``: the default axis is 0 for 0-, 1- and 3-D input
    and 1 otherwise."""

    def __init__(self, axis: int | None = None, **kwargs: Any) -> None:
        super().__init__(axis)
        self.axis = axis

    def forward(self, x: Tensor) -> Tensor:
        return _MF.softmax(x, self.axis)

    def extra_repr(self) -> str:
        return f"axis={self.axis}"


class LayerNorm(_nn.LayerNorm):
    """MegEngine's ``LayerNorm(normalized_shape, eps=1e-5, affine=True)``."""

    def __init__(self, normalized_shape: Any, eps: float = 1e-5, affine: bool = True, **kw: Any):
        super().__init__(normalized_shape, eps, elementwise_affine=affine)
        self.affine = affine

    def forward(self, x: Tensor) -> Tensor:
        return _MF.layer_norm(
            x, self.normalized_shape, self.affine, self.weight, self.bias, self.eps
        )


class GroupNorm(_nn.GroupNorm):
    """MegEngine's ``GroupNorm(num_groups, num_channels, eps=1e-5, affine=True)``."""

    def __init__(
        self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, **kw: Any
    ) -> None:
        super().__init__(num_groups, num_channels, eps, affine)
        self.affine = affine

    def forward(self, x: Tensor) -> Tensor:
        return _MF.group_norm(x, self.num_groups, self.affine, self.weight, self.bias, self.eps)


class InstanceNorm(_nn.GroupNorm):
    """MegEngine's ``InstanceNorm(num_channels, eps=1e-5, affine=True)``: each channel of
    each sample normalised over its spatial axes (group norm with one channel a group)."""

    def __init__(self, num_channels: int, eps: float = 1e-5, affine: bool = True, **kw: Any):
        super().__init__(num_channels, num_channels, eps, affine)
        self.affine = affine
        self.num_channels = num_channels

    def forward(self, x: Tensor) -> Tensor:
        return _MF.instance_norm(x, self.affine, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"channels={self.num_channels}, eps={self.eps}, affine={self.affine}"


class PReLU(_nn.PReLU):
    """MegEngine's ``PReLU(num_parameters=1, init=0.25)``: with several parameters the
    weight has shape ``(1, C, 1, 1)`` (NCHW input)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, **kwargs: Any) -> None:
        super().__init__(num_parameters, init)
        if num_parameters > 1:
            shape = (1, num_parameters, 1, 1)
            self.weight = _nn.Parameter(fg.full(shape, float(init)))

    def forward(self, x: Tensor) -> Tensor:
        return _MF.prelu(x, self.weight)


_ELEMWISE = {
    "h_swish": _MF.hswish,
    "hswish": _MF.hswish,
    "h_sigmoid": _MF.hsigmoid,
    "hsigmoid": _MF.hsigmoid,
    "relu": lambda x: x.clamp(min=0),
    "sigmoid": lambda x: x.sigmoid(),
    "tanh": lambda x: x.tanh(),
    "exp": lambda x: x.exp(),
    "log": lambda x: x.log(),
    "abs": lambda x: x.abs(),
    "negate": lambda x: -x,
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "true_div": lambda x, y: x / y,
    "floor_div": _MF.floor_div,
    "mod": _MF.mod,
    "max": fg.maximum,
    "min": fg.minimum,
    "pow": lambda x, y: x**y,
    "fuse_add_relu": lambda x, y: (x + y).clamp(min=0),
    "fuse_add_sigmoid": lambda x, y: (x + y).sigmoid(),
    "fuse_add_tanh": lambda x, y: (x + y).tanh(),
    "fuse_mul_add3": lambda x, y, z: x * y + z,
}


class Elemwise(_nn.Module):
    """MegEngine's ``Elemwise(method)``: the elementwise op named ``method`` (``"add"``,
    ``"h_swish"``, ``"fuse_add_relu"``, ...) applied to the inputs."""

    def __init__(self, method: str, **kwargs: Any) -> None:
        super().__init__()
        if method.lower() not in _ELEMWISE:
            raise ValueError(f"Elemwise: unsupported method {method!r}")
        self.method = method

    def forward(self, *inps: Any) -> Tensor:
        return _ELEMWISE[self.method.lower()](*inps)


def _pair(v: Any) -> tuple:
    return (int(v), int(v)) if isinstance(v, (int, np.integer)) else tuple(int(u) for u in v)


class LocalConv2d(_nn.Module):
    """MegEngine's ``LocalConv2d``: a locally connected layer, a convolution whose filter
    differs at each output position of an ``input_height x input_width`` input; the weight
    is ``(groups, OH, OW, IC / groups, KH, KW, OC / groups)`` and there is no bias."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        input_height: int,
        input_width: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        conv_mode: str = "cross_correlation",
        **kwargs: Any,
    ) -> None:
        super().__init__()
        if in_channels % groups or out_channels % groups:
            raise ValueError("LocalConv2d: channels must be divisible by groups")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.input_height, self.input_width = input_height, input_width
        self.kernel_size, self.stride = _pair(kernel_size), _pair(stride)
        self.padding, self.dilation = _pair(padding), _pair(dilation)
        self.groups, self.conv_mode = groups, conv_mode
        kh, kw = self.kernel_size
        oh = (input_height + 2 * self.padding[0] - self.dilation[0] * (kh - 1) - 1) // self.stride[
            0
        ] + 1
        ow = (input_width + 2 * self.padding[1] - self.dilation[1] * (kw - 1) - 1) // self.stride[
            1
        ] + 1
        shape = (groups, oh, ow, in_channels // groups, kh, kw, out_channels // groups)
        std = math.sqrt(1.0 / (in_channels // groups * kh * kw))
        self.weight = _nn.Parameter(fg.randn(shape) * std)
        self.bias = None

    def forward(self, inp: Tensor) -> Tensor:
        return _MF.local_conv2d(
            inp, self.weight, None, self.stride, self.padding, self.dilation, self.conv_mode
        )


# ------------------------------------------------------------------------------ init


def fill_(tensor: Tensor, val: Any) -> None:
    """Fills ``tensor`` with ``val`` in place."""
    with fg.no_grad():
        tensor.fill_(val)


def zeros_(tensor: Tensor) -> None:
    """Fills ``tensor`` with zeros in place."""
    fill_(tensor, 0)


def ones_(tensor: Tensor) -> None:
    """Fills ``tensor`` with ones in place."""
    fill_(tensor, 1)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0) -> None:
    """Fills ``tensor`` in place from the uniform distribution on ``[a, b)``."""
    _nn.init.uniform_(tensor, a, b)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0) -> None:
    """Fills ``tensor`` in place from ``N(mean, std**2)``."""
    _nn.init.normal_(tensor, mean, std)


def calculate_gain(nonlinearity: str, param: Any = None) -> float:
    """The recommended gain for ``nonlinearity`` (as MegEngine's and PyTorch's)."""
    return _nn.init.calculate_gain(nonlinearity, param)


def calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple:
    """``(fan_in, fan_out)`` of a weight: ``(shape[1], shape[0])`` for a matrix, times the
    receptive field for a conv weight (a 5-D grouped weight drops its group axis);
    ``ValueError`` for fewer than 2 axes."""
    shape = tuple(tensor.shape)
    ndim = len(shape)
    if ndim < 2:
        raise ValueError(
            "fan_in and fan_out can not be computed for tensor with fewer than 2 dimensions"
        )
    if ndim == 2:
        return shape[1], shape[0]
    if ndim >= 5:
        shape = shape[1:]
    field = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * field, shape[0] * field


def calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    """``fan_in`` or ``fan_out`` of ``tensor`` as ``mode`` says."""
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of ['fan_in', 'fan_out']")
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor: Tensor, gain: float = 1.0) -> None:
    """Glorot uniform fill: ``U(-a, a)``, ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    uniform_(tensor, -a, a)


def xavier_normal_(tensor: Tensor, gain: float = 1.0) -> None:
    """Glorot normal fill: ``N(0, std**2)``, ``std = gain * sqrt(2 / (fan_in +
    fan_out))``."""
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def msra_uniform_(
    tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"
) -> None:
    """He (MSRA) uniform fill: ``U(-b, b)``, ``b = sqrt(3) * gain / sqrt(fan)``."""
    std = calculate_gain(nonlinearity, a) / math.sqrt(calculate_correct_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    uniform_(tensor, -bound, bound)


def msra_normal_(
    tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"
) -> None:
    """He (MSRA) normal fill: ``N(0, (gain / sqrt(fan))**2)``."""
    std = calculate_gain(nonlinearity, a) / math.sqrt(calculate_correct_fan(tensor, mode))
    normal_(tensor, 0, std)


INIT_NAMES = [
    "fill_",
    "zeros_",
    "ones_",
    "uniform_",
    "normal_",
    "calculate_gain",
    "calculate_fan_in_and_fan_out",
    "calculate_correct_fan",
    "xavier_uniform_",
    "xavier_normal_",
    "msra_uniform_",
    "msra_normal_",
]


def make_init(name: str) -> types.ModuleType:
    """MegEngine's ``module.init`` as a module named ``name`` (registered in sys.modules)."""
    mod = types.ModuleType(name, "MegEngine's module.init: in-place weight initialisers.")
    me = sys.modules[__name__]
    for n in INIT_NAMES:
        setattr(mod, n, getattr(me, n))
    mod.__all__ = list(INIT_NAMES)  # type: ignore[attr-defined]
    sys.modules[name] = mod
    return mod


CLASS_NAMES = [
    "AvgPool2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "Dropout",
    "Elemwise",
    "GroupNorm",
    "InstanceNorm",
    "LayerNorm",
    "PReLU",
    "Softmax",
    "SyncBatchNorm",
]
