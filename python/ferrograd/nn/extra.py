"""More of PyTorch's layers: activations, pooling and padding, normalisation, losses and the
recurrent layers (``RNN``, ``LSTM``, ``GRU`` and their cells), with PyTorch's parameter names,
shapes and initialisation, so weights copy across."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from .. import _core
from .._core import DTypeError, ShapeError, Tensor
from .._tensor import tensor
from . import functional as F
from ._errors import ArgumentRuntimeError, ArgumentTypeRuntimeError, DTypeValueError
from .modules import (
    ConvTranspose2d,
    Module,
    Parameter,
    _BatchNorm,
    _count,
    _filled_param,
    _Loss,
    _reset_affine,
    _tuple,
    _uniform_param,
)
from .utils.rnn import PackedSequence, pad_packed_sequence

__all__ = [
    "CELU",
    "GLU",
    "GRU",
    "LSTM",
    "RNN",
    "SELU",
    "AdaptiveAvgPool1d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AlphaDropout",
    "AvgPool1d",
    "Bilinear",
    "ChannelShuffle",
    "CircularPad1d",
    "CircularPad2d",
    "CircularPad3d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "ConvTranspose1d",
    "CosineEmbeddingLoss",
    "CosineSimilarity",
    "CrossMapLRN2d",
    "Dropout1d",
    "Dropout2d",
    "Fold",
    "GRUCell",
    "GaussianNLLLoss",
    "Hardshrink",
    "Hardsigmoid",
    "Hardswish",
    "HingeEmbeddingLoss",
    "HuberLoss",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "LSTMCell",
    "LocalResponseNorm",
    "LogSigmoid",
    "MarginRankingLoss",
    "MaxPool1d",
    "Mish",
    "MultiLabelSoftMarginLoss",
    "MultiMarginLoss",
    "PReLU",
    "PairwiseDistance",
    "PixelShuffle",
    "PixelUnshuffle",
    "PoissonNLLLoss",
    "RMSNorm",
    "RNNBase",
    "RNNCell",
    "RNNCellBase",
    "ReLU6",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReflectionPad3d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
    "SoftMarginLoss",
    "Softmax2d",
    "Softmin",
    "Softshrink",
    "Softsign",
    "Tanhshrink",
    "Threshold",
    "TripletMarginLoss",
    "Unfold",
    "Upsample",
    "UpsamplingBilinear2d",
    "UpsamplingNearest2d",
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
]


def _set_fields(
    layer: Module, name: str, fields: tuple[tuple[str, Any], ...], args: tuple, kwargs: dict
) -> None:
    """Sets a layer's fields from its constructor's arguments (by position or name, with
    their defaults), as PyTorch's constructors take them."""
    if len(args) > len(fields):
        raise TypeError(f"{name}: takes at most {len(fields)} arguments, got {len(args)}")
    values = dict(fields)
    for (k, _), v in zip(fields, args):
        values[k] = v
    for k, v in kwargs.items():
        if k not in values:
            raise TypeError(f"{name}: unexpected argument {k!r}")
        values[k] = v
    for k, v in values.items():
        setattr(layer, k, v)


def _simple(name: str, fn: Any, fields: tuple[tuple[str, Any], ...] = ()) -> type:
    """A layer that calls ``fn(x, *fields)``; its constructor takes the fields (with their
    defaults) by position or name, as PyTorch's."""

    def __init__(self: Module, *args: Any, **kwargs: Any) -> None:
        Module.__init__(self)
        _set_fields(self, name, fields, args, kwargs)

    def forward(self: Module, *xs: Tensor) -> Tensor:
        return fn(*xs, **{k: getattr(self, k) for k, _ in fields})

    def extra_repr(self: Module) -> str:
        return ", ".join(f"{k}={getattr(self, k)!r}" for k, _ in fields)

    extra_repr._generic = True  # type: ignore[attr-defined]

    return type(
        name,
        (Module,),
        {
            "__init__": __init__,
            "forward": forward,
            "extra_repr": extra_repr,
            "__doc__": f"PyTorch's ``nn.{name}`` (see ``nn.functional``).",
            "__module__": __name__,
        },
    )


_INPLACE = (("inplace", False),)
ReLU6 = _simple("ReLU6", F.relu6, _INPLACE)
SELU = _simple("SELU", F.selu, _INPLACE)
Hardswish = _simple("Hardswish", F.hardswish, _INPLACE)
Hardsigmoid = _simple("Hardsigmoid", F.hardsigmoid, _INPLACE)
Mish = _simple("Mish", F.mish, _INPLACE)
CELU = _simple("CELU", F.celu, (("alpha", 1.0), *_INPLACE))
GLU = _simple("GLU", F.glu, (("dim", -1),))
Softmin = _simple("Softmin", F.softmin, (("dim", None),))
Softsign = _simple("Softsign", F.softsign)
Tanhshrink = _simple("Tanhshrink", F.tanhshrink)
LogSigmoid = _simple("LogSigmoid", F.logsigmoid)
CosineSimilarity = _simple("CosineSimilarity", F.cosine_similarity, (("dim", 1), ("eps", 1e-8)))
PairwiseDistance = _simple(
    "PairwiseDistance", F.pairwise_distance, (("p", 2.0), ("eps", 1e-6), ("keepdim", False))
)
MaxPool1d = _simple(
    "MaxPool1d",
    F.max_pool1d,
    (
        ("kernel_size", 1),
        ("stride", None),
        ("padding", 0),
        ("dilation", 1),
        ("return_indices", False),
        ("ceil_mode", False),
    ),
)
_AvgPool1d = _simple(
    "AvgPool1d",
    F.avg_pool1d,
    (
        ("kernel_size", 1),
        ("stride", None),
        ("padding", 0),
        ("ceil_mode", False),
        ("count_include_pad", True),
    ),
)


class AvgPool1d(_AvgPool1d):  # type: ignore[valid-type,misc]
    """PyTorch's ``nn.AvgPool1d`` (see ``nn.functional``); ``kernel_size``, ``stride`` and
    ``padding`` are kept as 1-tuples, as PyTorch keeps them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)

        def one(v: Any) -> tuple:
            return tuple(v) if isinstance(v, (list, tuple)) else (v,)

        stride = self.kernel_size if self.stride is None else self.stride
        self.kernel_size, self.stride, self.padding = (
            one(self.kernel_size),
            one(stride),
            one(self.padding),
        )


AdaptiveAvgPool1d = _simple("AdaptiveAvgPool1d", F.adaptive_avg_pool1d, (("output_size", 1),))
AdaptiveMaxPool1d = _simple(
    "AdaptiveMaxPool1d", F.adaptive_max_pool1d, (("output_size", 1), ("return_indices", False))
)
AdaptiveMaxPool2d = _simple(
    "AdaptiveMaxPool2d", F.adaptive_max_pool2d, (("output_size", 1), ("return_indices", False))
)
PixelShuffle = _simple("PixelShuffle", F.pixel_shuffle, (("upscale_factor", 1),))
PixelUnshuffle = _simple("PixelUnshuffle", F.pixel_unshuffle, (("downscale_factor", 1),))
Unfold = _simple(
    "Unfold",
    F.unfold,
    (("kernel_size", 1), ("dilation", 1), ("padding", 0), ("stride", 1)),
)
Fold = _simple(
    "Fold",
    F.fold,
    (("output_size", 1), ("kernel_size", 1), ("dilation", 1), ("padding", 0), ("stride", 1)),
)
Threshold = _simple("Threshold", F.threshold, (("threshold", 0.0), ("value", 0.0), *_INPLACE))
Hardshrink = _simple("Hardshrink", F.hardshrink, (("lambd", 0.5),))
Softshrink = _simple("Softshrink", F.softshrink, (("lambd", 0.5),))
LocalResponseNorm = _simple(
    "LocalResponseNorm",
    F.local_response_norm,
    (("size", 1), ("alpha", 1e-4), ("beta", 0.75), ("k", 1.0)),
)


class CrossMapLRN2d(Module):
    """Local response normalization across the channels of ``(N, C, H, W)`` (PyTorch's
    ``nn.CrossMapLRN2d``, the legacy cross-map LRN): ``x_c / (k + alpha / size * S_c) **
    beta`` with ``S_c`` the sum of ``x_j^2`` over the channels ``|j - c| <= (size - 1) // 2``.

    PyTorch's forward also adds channel 0's square to every later window (an index slip in
    its port from 0- to 1-based loops) and its backward is not the derivative of its
    forward; this computes the windows as described, with autodiff's exact gradient."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1) -> None:
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim != 4:
            raise ShapeError(
                f"CrossMapLRN2d: expected input to be 4-D (N, C, H, W), got {input.ndim}-D "
                f"of shape {list(input.shape)}"
            )
        if input.dtype.kind != "f":
            raise DTypeError(f"CrossMapLRN2d: input must be a float tensor, got {input.dtype}")
        c = input.shape[1]
        half = (int(self.size) - 1) // 2
        sq = input * input
        if half > 0:
            sq = F.pad(sq, (0, 0, 0, 0, half, half))
        total = sq.narrow(1, 0, c)
        for s in range(1, 2 * half + 1):
            total = total + sq.narrow(1, s, c)
        return input / (total * (self.alpha / self.size) + self.k) ** self.beta

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


def _softmax2d(x: Tensor) -> Tensor:
    if x.ndim not in (3, 4):
        raise ShapeError(f"Softmax2d: input must be (N, C, H, W) or (C, H, W), got {list(x.shape)}")
    return F.softmax(x, -3)


Softmax2d = _simple("Softmax2d", _softmax2d)


class AlphaDropout(Module):
    """Dropout for SELU networks (see ``F.alpha_dropout``); the identity in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"AlphaDropout: p must lie in [0, 1], got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.alpha_dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Upsample(Module):
    """Resizes ``(N, C, ...)`` inputs with :func:`F.interpolate` (PyTorch's ``nn.Upsample``):
    ``size`` or ``scale_factor`` (kept as a float, or a tuple of floats), ``mode``,
    ``align_corners`` and ``recompute_scale_factor`` as there."""

    def __init__(
        self,
        size: Any = None,
        scale_factor: Any = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
    ) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, (list, tuple)):
            self.scale_factor: Any = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.interpolate(
            input,
            self.size,
            self.scale_factor,
            self.mode,
            self.align_corners,
            recompute_scale_factor=self.recompute_scale_factor,
        )

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            head = f"scale_factor={self.scale_factor!r}"
        else:
            head = f"size={self.size!r}"
        return f"{head}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour resizing of ``(N, C, H, W)``: ``Upsample(size, scale_factor,
    mode="nearest")`` (PyTorch's ``nn.UpsamplingNearest2d``, a subclass there too)."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear resizing of ``(N, C, H, W)`` with ``align_corners=True``: ``Upsample(size,
    scale_factor, mode="bilinear", align_corners=True)`` (PyTorch's
    ``nn.UpsamplingBilinear2d``, a subclass there too)."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


def _dropout_class(name: str, fn: Any, forward: Any) -> type:
    """A dropout module ``name(p=0.5, inplace=False)`` (``p`` checked) with ``forward``."""

    def __init__(self: Module, p: float = 0.5, inplace: bool = False) -> None:
        Module.__init__(self)
        if not 0.0 <= p <= 1.0:
            raise ValueError(
                f"{name}: p must lie in [0, 1]: dropout probability has to be between 0 and "
                f"1, but got {p}"
            )
        self.p, self.inplace = p, inplace

    cls = _simple(name, fn, (("p", 0.5), *_INPLACE))
    cls.__init__ = __init__
    cls.forward = forward
    return cls


def _dropout_nd(name: str) -> type:
    def forward(self: Module, x: Tensor) -> Tensor:
        if name == "Dropout1d":
            if x.ndim not in (2, 3):
                raise ShapeError(
                    f"Dropout1d: input must be (N, C, L) or (C, L), got {list(x.shape)}"
                )
            return F.dropout1d(x, self.p, self.training)
        return F.dropout2d(x, self.p, self.training)

    return _dropout_class(name, None, forward)


Dropout1d = _dropout_nd("Dropout1d")
Dropout2d = _dropout_nd("Dropout2d")


def _padding(name: str, n: int, mode: str, with_value: bool) -> type:
    # only the ConstantPad classes take a fill value (a required one, as PyTorch's); the
    # others take the padding alone, so a stray second argument is an error, not a fill
    def setup(self: Module, padding: Any, value: float) -> None:
        Module.__init__(self)
        self.padding = (
            tuple(padding) if isinstance(padding, (list, tuple)) else (padding,) * (2 * n)
        )
        if len(self.padding) != 2 * n:
            raise ValueError(f"{name}: padding must be an int or {2 * n} ints, got {padding!r}")
        self.value = value

    if with_value:

        def __init__(self: Module, padding: Any, value: float) -> None:
            setup(self, padding, value)

        def extra_repr(self: Module) -> str:
            return f"padding={self.padding}, value={self.value}"

    else:

        def __init__(self: Module, padding: Any) -> None:  # type: ignore[misc]
            setup(self, padding, 0.0)

        def extra_repr(self: Module) -> str:
            return f"{self.padding}"

    def forward(self: Module, x: Tensor) -> Tensor:
        if mode == "constant":
            return F.pad(x, self.padding, "constant", self.value)
        return F.pad(x, self.padding, mode)

    return type(
        name,
        (Module,),
        {
            "__init__": __init__,
            "forward": forward,
            "extra_repr": extra_repr,
            "__doc__": f"PyTorch's ``nn.{name}``.",
            "__module__": __name__,
        },
    )


ZeroPad2d = _padding("ZeroPad2d", 2, "constant", False)
ConstantPad1d = _padding("ConstantPad1d", 1, "constant", True)
ConstantPad2d = _padding("ConstantPad2d", 2, "constant", True)
ReflectionPad1d = _padding("ReflectionPad1d", 1, "reflect", False)
ReflectionPad2d = _padding("ReflectionPad2d", 2, "reflect", False)
ReplicationPad2d = _padding("ReplicationPad2d", 2, "replicate", False)
ZeroPad1d = _padding("ZeroPad1d", 1, "constant", False)
ReplicationPad1d = _padding("ReplicationPad1d", 1, "replicate", False)
CircularPad1d = _padding("CircularPad1d", 1, "circular", False)
CircularPad2d = _padding("CircularPad2d", 2, "circular", False)
ZeroPad3d = _padding("ZeroPad3d", 3, "constant", False)
ConstantPad3d = _padding("ConstantPad3d", 3, "constant", True)
ReflectionPad3d = _padding("ReflectionPad3d", 3, "reflect", False)
ReplicationPad3d = _padding("ReplicationPad3d", 3, "replicate", False)
CircularPad3d = _padding("CircularPad3d", 3, "circular", False)


def _transpose_output_padding(
    kind: str, x: Tensor, output_size: Any, nd: int, stride: Any, padding: Any,
    kernel: tuple, dilation: Any,
) -> tuple[int, ...]:  # fmt: skip
    """The ``output_padding`` that makes a transposed convolution's output ``output_size``
    (the spatial size, or the full shape), checked as PyTorch's ``_output_padding``."""

    def tup(v: Any) -> tuple[int, ...]:
        return tuple(int(a) for a in v) if isinstance(v, (list, tuple)) else (int(v),) * nd

    st, pd, dl = tup(stride), tup(padding), tup(dilation)
    size = [int(v) for v in output_size]
    lead = 2 if x.ndim == nd + 2 else 1
    if len(size) == lead + nd:
        size = size[lead:]
    if len(size) != nd:
        raise ValueError(
            f"{kind}: output_size must have {nd} or {lead + nd} elements (got {len(size)})"
        )
    out = []
    for d in range(nd):
        lo = (x.shape[lead + d] - 1) * st[d] - 2 * pd[d] + dl[d] * (kernel[d] - 1) + 1
        hi = lo + st[d] - 1
        if not lo <= size[d] <= hi:
            raise ValueError(
                f"{kind}: requested an output size of {size}, but valid sizes range from "
                f"{lo} to {hi} (for an input of {list(x.shape[lead:])}) along axis {d}"
            )
        out.append(size[d] - lo)
    return tuple(out)


class ConvTranspose1d(ConvTranspose2d):
    """The transpose of :class:`Conv1d` (weights ``(in, out / groups, k)``)."""

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
                f'ConvTranspose1d: only "zeros" padding_mode is supported, got {padding_mode!r}'
            )
        self.padding_mode = padding_mode
        k = tuple(kernel_size) if isinstance(kernel_size, (tuple, list)) else (kernel_size,)
        self._setup(
            "ConvTranspose1d",
            in_channels,
            out_channels,
            k,
            groups,
            bias,
            device,
            dtype,
            rng,
            transposed=True,
        )
        self.stride, self.padding = _tuple(stride, 1), _tuple(padding, 1)
        self.dilation, self.output_padding = _tuple(dilation, 1), _tuple(output_padding, 1)
        self.transposed = True

    def forward(self, x: Tensor, output_size: Any = None) -> Tensor:
        op = self.output_padding
        if output_size is not None:
            op = _transpose_output_padding(
                "ConvTranspose1d", x, output_size, 1, self.stride, self.padding,
                self.kernel_size, self.dilation,
            )  # fmt: skip
        return F.conv_transpose1d(
            x,
            self.weight,
            self.bias,
            self.stride,
            self.padding,
            op,
            self.groups,
            self.dilation,
        )


class Bilinear(Module):
    """``y = x1^T W x2 + b`` per output feature, PyTorch's layout and initialisation."""

    def __init__(
        self,
        in1_features: int,
        in2_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.in1_features = _count("Bilinear", "in1_features", in1_features, 1)
        self.in2_features = _count("Bilinear", "in2_features", in2_features, 1)
        self.out_features = _count("Bilinear", "out_features", out_features, 1)
        k = 1.0 / math.sqrt(self.in1_features)
        shape = (self.out_features, self.in1_features, self.in2_features)
        self.weight = _uniform_param(None, k, shape, dtype, device)
        self.bias = _uniform_param(None, k, (self.out_features,), dtype, device) if bias else None

    def reset_parameters(self) -> None:
        """Re-draws ``weight`` and ``bias`` in place, uniform in ``±1/sqrt(in1_features)``
        as at construction."""
        from . import init

        k = 1.0 / math.sqrt(self.in1_features)
        init.uniform_(self.weight, -k, k)
        if self.bias is not None:
            init.uniform_(self.bias, -k, k)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )


class ChannelShuffle(Module):
    """Interleaves ``groups`` groups of channels (axis 1), as ShuffleNet."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
            # PyTorch's refuses these (at the first call) with RuntimeError
            raise ArgumentRuntimeError(
                f"ChannelShuffle: groups must be a positive int, got {groups!r}"
            )
        self.groups = int(groups)

    def forward(self, x: Tensor) -> Tensor:
        return F.channel_shuffle(x, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


class PReLU(Module):
    """``max(0, x) + weight * min(0, x)`` with a learned slope per channel (axis 1) or one
    for all."""

    def __init__(
        self, num_parameters: int = 1, init: float = 0.25, device: Any = None, dtype: Any = None
    ) -> None:
        super().__init__()
        self.num_parameters = _count("PReLU", "num_parameters", num_parameters, 1)
        self.init = init
        self.weight = _filled_param(init, (self.num_parameters,), dtype, device)

    def reset_parameters(self) -> None:
        """Sets every slope back to ``init``."""
        from . import init

        init.constant_(self.weight, self.init)

    def forward(self, x: Tensor) -> Tensor:
        from . import functional as F

        return F.prelu(x, self.weight)


class _InstanceNorm(_BatchNorm):
    """Instance norm layers: batch norm's parameters and buffers, PyTorch's defaults for
    instance norm (no affine part, no running statistics). As PyTorch's, the running
    statistics (when tracked) move by ``momentum`` (``None`` counts as 0: they stay as they
    are) and ``num_batches_tracked`` is never counted."""

    _dims: tuple = ()

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__(
            num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias
        )

    def forward(self, x: Tensor) -> Tensor:
        kind = type(self).__name__
        full, unbatched = self._dims
        if not isinstance(x, Tensor) or x.ndim not in (full, unbatched):
            raise ShapeError(
                f"{kind}: expected {full}-D or {unbatched}-D input, got "
                f"{list(x.shape) if isinstance(x, Tensor) else type(x).__name__}"
            )
        channels = x.shape[x.ndim - unbatched]
        if channels != self.num_features:
            if self.affine:
                raise ShapeError(
                    f"{kind}: expected {self.num_features} channels (num_features) at axis "
                    f"{x.ndim - unbatched}, got input of shape {list(x.shape)}"
                )
            warnings.warn(
                f"{kind}: input's size at dim={x.ndim - unbatched} does not match "
                "num_features. You can silence this warning by not passing in num_features, "
                "which is not used because affine=False",
                stacklevel=2,
            )
        batched = x.ndim == full
        x = x if batched else x.unsqueeze(0)
        y = F.instance_norm(
            x,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            self.training or not self.track_running_stats,
            self.momentum if self.momentum is not None else 0.0,
            self.eps,
        )
        return y if batched else y.squeeze(0)

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, track_running_stats={self.track_running_stats}"
        )


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of ``(N, C, L)`` (or ``(C, L)``), PyTorch's defaults (no
    affine part, no running statistics)."""

    _dims = (3, 2)


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of ``(N, C, H, W)`` (or ``(C, H, W)``)."""

    _dims = (4, 3)


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation of ``(N, C, D, H, W)`` (or ``(C, D, H, W)``)."""

    _dims = (5, 4)


class RMSNorm(Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last ``normalized_shape`` axes."""

    def __init__(
        self,
        normalized_shape: Any,
        eps: float | None = None,
        elementwise_affine: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
        self.normalized_shape = tuple(int(s) for s in shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.weight = (
            _filled_param(1.0, self.normalized_shape, dtype, device) if elementwise_affine else None
        )

    def reset_parameters(self) -> None:
        """Weight back to ones."""
        _reset_affine(self)

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)


# ----------------------------------------------------------------------------------- losses


def _loss(name: str, fn: Any, fields: tuple[tuple[str, Any], ...], n_inputs: int) -> type:
    def __init__(self: Module, *args: Any, reduction: str = "mean", **kwargs: Any) -> None:
        _Loss.__init__(self, reduction)
        _set_fields(self, name, fields, args, kwargs)
        # class weights are buffers (in state_dict, moved by to()), as PyTorch's
        for k, _ in fields:
            if k == "weight":
                self.register_buffer(k, self.__dict__.pop(k, None))

    def forward(self: Module, *xs: Tensor) -> Tensor:
        if len(xs) != n_inputs:
            raise TypeError(f"{name}: takes {n_inputs} tensors, got {len(xs)}")
        kw = {k: getattr(self, k) for k, _ in fields}
        return fn(*xs, **kw, reduction=self.reduction)

    return type(
        name,
        (_Loss,),
        {
            "__init__": __init__,
            "forward": forward,
            "__doc__": f"PyTorch's ``nn.{name}``.",
            "__module__": __name__,
        },
    )


HuberLoss = _loss("HuberLoss", F.huber_loss, (("delta", 1.0),), 2)
MarginRankingLoss = _loss("MarginRankingLoss", F.margin_ranking_loss, (("margin", 0.0),), 3)
HingeEmbeddingLoss = _loss("HingeEmbeddingLoss", F.hinge_embedding_loss, (("margin", 1.0),), 2)
SoftMarginLoss = _loss("SoftMarginLoss", F.soft_margin_loss, (), 2)
MultiLabelSoftMarginLoss = _loss(
    "MultiLabelSoftMarginLoss", F.multilabel_soft_margin_loss, (("weight", None),), 2
)
MultiMarginLoss = _loss(
    "MultiMarginLoss", F.multi_margin_loss, (("p", 1), ("margin", 1.0), ("weight", None)), 2
)
CosineEmbeddingLoss = _loss("CosineEmbeddingLoss", F.cosine_embedding_loss, (("margin", 0.0),), 3)
TripletMarginLoss = _loss(
    "TripletMarginLoss",
    F.triplet_margin_loss,
    (("margin", 1.0), ("p", 2.0), ("eps", 1e-6), ("swap", False)),
    3,
)
GaussianNLLLoss = _loss("GaussianNLLLoss", F.gaussian_nll_loss, (("full", False), ("eps", 1e-6)), 3)
PoissonNLLLoss = _loss(
    "PoissonNLLLoss",
    F.poisson_nll_loss,
    (("log_input", True), ("full", False), ("eps", 1e-8)),
    2,
)


# -------------------------------------------------------------------------------- recurrent

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _gates(t: Tensor, n: int) -> list[Tensor]:
    """The ``n`` equal gate blocks of the last axis (each empty when a cell has no hidden
    features, where ``chunk`` would give a single block)."""
    return [t] * n if t.shape[-1] == 0 else list(t.chunk(n, -1))


def _cell(
    mode: str,
    x_w: Tensor,
    h: Tensor,
    c: Tensor | None,
    w_hh: Tensor,
    b_hh: Tensor | None,
    w_hr: Tensor | None = None,
):
    """One step from the input's projection ``x_w`` (``x @ w_ih.T + b_ih``): the new hidden
    state (and cell state for an LSTM, whose hidden state ``w_hr`` projects when given)."""
    h_w = F.linear(h, w_hh, b_hh)
    if mode == "LSTM":
        i, f, g, o = _gates(x_w + h_w, 4)
        c2 = f.sigmoid() * c + i.sigmoid() * g.tanh()
        h2 = o.sigmoid() * c2.tanh()
        return (h2 if w_hr is None else F.linear(h2, w_hr)), c2
    if mode == "GRU":
        xr, xz, xn = _gates(x_w, 3)
        hr, hz, hn = _gates(h_w, 3)
        r = (xr + hr).sigmoid()
        z = (xz + hz).sigmoid()
        n = (xn + r * hn).tanh()
        return (1.0 - z) * n + z * h, None
    pre = x_w + h_w
    return (pre.tanh() if mode == "RNN_TANH" else pre.relu()), None


def _reset_uniform(module: Module, hidden_size: int) -> None:
    """Draws every parameter of a recurrent module again from PyTorch's initial
    distribution, U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) (zero when there is no
    hidden state)."""
    from . import init

    k = 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0.0
    for p in module.parameters():
        init.uniform_(p, -k, k)


def _check_rnn_dtype(module: Module, name: str, x: Tensor) -> None:
    """The input must have the weights' dtype (PyTorch raises ``ValueError``), except under
    autocast, which runs the layer in its own dtype (``_autocast_low``) or casts the
    operands of each product itself."""
    from .. import amp

    st = amp._state()
    if "_autocast_low" in module.__dict__ or st["mge"] or st["cpu"] or st["cuda"]:
        return
    weight = module.weight_ih_l0
    if x.dtype != weight.dtype:
        raise DTypeValueError(
            f"{name}: input dtype ({x.dtype.name}) does not match weight dtype "
            f"({weight.dtype.name}); convert the input with .to({weight.dtype.name}) or the "
            f"module with .to({x.dtype.name})"
        )


def _flag(name: str, arg: str, value: object) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: {arg} must be a bool, got {type(value).__name__} {value!r}")
    return bool(value)


class RNNBase(Module):
    """PyTorch's base of :class:`RNN`, :class:`LSTM` and :class:`GRU`: ``mode`` is
    ``"RNN_TANH"``, ``"RNN_RELU"``, ``"LSTM"`` or ``"GRU"``. Per layer ``k`` (and direction,
    ``_reverse``): ``weight_ih_l{k}``, ``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}``
    and, for an LSTM with ``proj_size > 0``, ``weight_hr_l{k}`` ``(proj_size, hidden_size)``
    (the hidden state, and so ``h_0``, ``h_n`` and the output, then has ``proj_size``
    features), all drawn from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if mode not in _GATES:
            raise ValueError(
                f"RNNBase: mode must be 'RNN_TANH', 'RNN_RELU', 'LSTM' or 'GRU', got {mode!r}"
            )
        name = type(self).__name__
        self.mode = self._mode = mode
        self.input_size = _count(name, "input_size", input_size, 1)
        self.hidden_size = _count(name, "hidden_size", hidden_size, 1)
        self.num_layers = _count(name, "num_layers", num_layers, 1)
        self.proj_size = _count(name, "proj_size", proj_size, 0)
        if self.proj_size and mode != "LSTM":
            raise ValueError(f"{name}: proj_size is only supported for LSTM, got mode {mode!r}")
        if self.proj_size >= self.hidden_size:
            raise ValueError(
                f"{name}: proj_size ({proj_size}) must be smaller than hidden_size ({hidden_size})"
            )
        if (
            isinstance(dropout, bool)
            or not isinstance(dropout, (int, float, np.integer, np.floating))
            or not 0.0 <= dropout <= 1.0
        ):
            raise ValueError(f"{name}: dropout must be a number in [0, 1], got {dropout!r}")
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                "dropout expects num_layers greater than 1, but got "
                f"dropout={dropout} and num_layers={num_layers}",
                UserWarning,
                stacklevel=2,
            )
        self.bias = _flag(name, "bias", bias)
        self.batch_first = _flag(name, "batch_first", batch_first)
        self.dropout = float(dropout)
        self.bidirectional = bool(bidirectional)
        dirs = 2 if self.bidirectional else 1
        gates = _GATES[mode] * self.hidden_size
        real = self.proj_size or self.hidden_size
        k = 1.0 / math.sqrt(self.hidden_size)
        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        for layer in range(self.num_layers):
            n_in = self.input_size if layer == 0 else real * dirs
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                shapes = {"weight_ih": (gates, n_in), "weight_hh": (gates, real)}
                if bias:
                    shapes.update(bias_ih=(gates,), bias_hh=(gates,))
                if self.proj_size:
                    shapes["weight_hr"] = (self.proj_size, self.hidden_size)
                for what, shape in shapes.items():
                    setattr(self, what + sfx, _uniform_param(None, k, shape, dtype, device))
                names = [what + sfx for what in shapes]
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)

    def reset_parameters(self) -> None:
        """Draws every weight and bias again from U(-1/sqrt(hidden_size),
        1/sqrt(hidden_size)), as at construction."""
        _reset_uniform(self, self.hidden_size)

    def flatten_parameters(self) -> None:
        """PyTorch packs cuDNN's weights here; ferrograd's recurrent kernels read the
        parameters where they are, so there is nothing to do."""
        return

    @property
    def _flat_weights(self) -> list[Any]:
        """The weights in PyTorch's flat order, as they are now (a pruned weight is the
        masked tensor, no longer a Parameter)."""
        return [getattr(self, n, None) for n in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list[Parameter]]:
        """The parameters of each layer and direction, in PyTorch's order."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def _weights(self, layer: int, d: int) -> tuple[Tensor, Tensor, Any, Any, Any]:
        sfx = f"_l{layer}" + ("_reverse" if d else "")
        return (
            getattr(self, "weight_ih" + sfx),
            getattr(self, "weight_hh" + sfx),
            getattr(self, "bias_ih" + sfx, None),
            getattr(self, "bias_hh" + sfx, None),
            getattr(self, "weight_hr" + sfx, None),
        )

    def forward(self, input: Any, hx: Any = None) -> tuple[Any, Any]:
        name = type(self).__name__
        lstm = self._mode == "LSTM"
        packed = input if isinstance(input, PackedSequence) else None
        lengths = None
        if packed is not None:
            # run on the padded batch (longest first), each sequence stopping at its length
            input, lens = pad_packed_sequence(
                packed._replace(sorted_indices=None, unsorted_indices=None)
            )
            lengths = lens.numpy()
            if hx is not None and packed.sorted_indices is not None:
                order = packed.sorted_indices
                hx = (
                    tuple(h.index_select(1, order) for h in hx)
                    if lstm
                    else hx.index_select(1, order)
                )
        batched = input.ndim == 3
        if input.ndim not in (2, 3):
            raise ShapeError(
                f"{name}: expected input to be 2-D (unbatched) or 3-D, got {input.ndim}-D "
                f"input of shape {list(input.shape)}"
            )
        if input.shape[-1] != self.input_size:
            raise ShapeError(
                f"{name}: input must be (L, N, {self.input_size}) (or batch first, or "
                f"unbatched (L, {self.input_size})), got {list(input.shape)}"
            )
        if hx is not None:
            if lstm != isinstance(hx, (tuple, list)):
                want = "a tuple (h_0, c_0)" if lstm else "a tensor"
                raise ArgumentTypeRuntimeError(
                    f"{name}: hx must be {want}, got {type(hx).__name__}"
                )
            if lstm and len(hx) != 2:
                raise ArgumentTypeRuntimeError(
                    f"{name}: hx must be a tuple (h_0, c_0), got {len(hx)} items"
                )
            dims = [t.ndim for t in (hx if lstm else (hx,))]
            if any(d != input.ndim for d in dims):
                what = "unbatched 2-D" if input.ndim == 2 else "batched 3-D"
                got = ", ".join(f"{d}-D" for d in dims)
                raise ShapeError(
                    f"{name}: for {what} input, {'h_0 and c_0' if lstm else 'h_0'} must also "
                    f"be {input.ndim}-D, got {got}"
                )
        x = input if batched else input.unsqueeze(1)
        if batched and self.batch_first and packed is None:
            x = x.transpose(0, 1)
        steps, n = x.shape[0], x.shape[1]
        if steps == 0:
            raise ShapeError(
                f"{name}: expected a sequence length larger than 0, got input of "
                f"shape {list(input.shape)}"
            )
        dirs = 2 if self.bidirectional else 1
        h_shape = (self.num_layers * dirs, n, self.proj_size or self.hidden_size)
        c_shape = (self.num_layers * dirs, n, self.hidden_size)
        h0, c0 = (hx if lstm else (hx, None)) if hx is not None else (None, None)
        if h0 is not None and not batched:
            h0 = h0.unsqueeze(1)
            c0 = c0.unsqueeze(1) if c0 is not None else None
        for what, t, shape in (("h_0", h0, h_shape), ("c_0", c0, c_shape)):
            if t is not None and tuple(t.shape) != shape:
                raise ShapeError(
                    f"{name}: {what} must have shape {list(shape)}, got {list(t.shape)}"
                )
        _check_rnn_dtype(self, name, x)
        if h0 is None:
            h0 = _core.zeros(h_shape, dtype=x.dtype.name, device=x.device)
        if lstm and c0 is None:
            c0 = _core.zeros(c_shape, dtype=x.dtype.name, device=x.device)
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, d)
                xw = F.linear(x, w_ih, b_ih)  # every step's input projection at once
                h = h0[layer * dirs + d]
                c = c0[layer * dirs + d] if lstm else None
                ys = [None] * steps
                order = range(steps - 1, -1, -1) if d else range(steps)
                for t in order:
                    h2, c2 = _cell(self._mode, xw[t], h, c, w_hh, b_hh, w_hr)
                    if lengths is None:
                        h, c = h2, c2
                    else:  # sequences already ended keep their state
                        live = tensor((lengths > t).reshape(-1, 1), dtype="bool", device=x.device)
                        h = _core.where(live, h2, h)
                        c = _core.where(live, c2, c) if lstm else None
                    ys[t] = h
                outs.append(_core.stack(ys, 0))
                h_n.append(h)
                if lstm:
                    c_n.append(c)
            x = outs[0] if dirs == 1 else _core.concat(outs, 2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        out = x
        hn = _core.stack(h_n, 0)
        cn = _core.stack(c_n, 0) if lstm else None
        if packed is not None:
            sizes = packed.batch_sizes.numpy()
            data = _core.concat([out[t, : int(k)] for t, k in enumerate(sizes)], 0)
            if packed.unsorted_indices is not None:
                back = packed.unsorted_indices.to(hn.device)
                hn = hn.index_select(1, back)
                cn = cn.index_select(1, back) if cn is not None else None
            return packed._replace(data=data), ((hn, cn) if lstm else hn)
        if not batched:
            out, hn = out.squeeze(1), hn.squeeze(1)
            cn = cn.squeeze(1) if cn is not None else None
        elif self.batch_first:
            out = out.transpose(0, 1)
        return out, ((hn, cn) if lstm else hn)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


_RNNBase = RNNBase


def _no_projection(name: str, kwargs: dict) -> None:
    if kwargs.get("proj_size"):
        raise ValueError(f"{name}: proj_size is only supported for LSTM, not RNN or GRU")
    kwargs.pop("proj_size", None)


class RNN(RNNBase):
    """Elman RNN, ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (``nonlinearity="relu"``
    for relu), PyTorch's layout and initialisation."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # PyTorch's signature: (input_size, hidden_size, num_layers=1, nonlinearity="tanh",
        # bias=True, batch_first=False, dropout=0.0, bidirectional=False, device, dtype)
        _no_projection("RNN", kwargs)
        if len(args) > 3:
            nonlinearity, args = args[3], args[:3] + args[4:]
        else:
            nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)


class LSTM(RNNBase):
    """Long short-term memory (gates i, f, g, o in that order in the weights), PyTorch's
    layout and initialisation; returns ``(output, (h_n, c_n))``. With ``proj_size > 0`` the
    hidden state is projected by ``weight_hr_l{k}`` to ``proj_size`` features."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    """Gated recurrent unit (gates r, z, n), PyTorch's formulas, layout and initialisation."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _no_projection("GRU", kwargs)
        super().__init__("GRU", *args, **kwargs)


class RNNCellBase(Module):
    """PyTorch's base of the cells: ``weight_ih`` ``(num_chunks * hidden_size,
    input_size)``, ``weight_hh`` ``(num_chunks * hidden_size, hidden_size)``, ``bias_ih``,
    ``bias_hh``, drawn from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool,
        num_chunks: int,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        self.input_size = _count(name, "input_size", input_size, 1)
        # a cell may have no hidden features (its output is then (N, 0)), as PyTorch's
        self.hidden_size = _count(name, "hidden_size", hidden_size, 0)
        self.bias = _flag(name, "bias", bias)
        gates = _count(name, "num_chunks", num_chunks, 1) * self.hidden_size
        k = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        self.weight_ih = _uniform_param(None, k, (gates, self.input_size), dtype, device)
        self.weight_hh = _uniform_param(None, k, (gates, self.hidden_size), dtype, device)
        self.bias_ih = _uniform_param(None, k, (gates,), dtype, device) if bias else None
        self.bias_hh = _uniform_param(None, k, (gates,), dtype, device) if bias else None

    def reset_parameters(self) -> None:
        """Draws every weight and bias again from U(-1/sqrt(hidden_size),
        1/sqrt(hidden_size)), as at construction."""
        _reset_uniform(self, self.hidden_size)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s


class _CellBase(RNNCellBase):
    _mode = "RNN_TANH"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias, _GATES[self._mode], device, dtype)

    def forward(self, input: Tensor, hx: Any = None) -> Any:
        name = type(self).__name__
        lstm = self._mode == "LSTM"
        if input.ndim not in (1, 2) or input.shape[-1] != self.input_size:
            raise ShapeError(
                f"{name}: input must be (N, {self.input_size}) or ({self.input_size},), got "
                f"{list(input.shape)}"
            )
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        shape = (x.shape[0], self.hidden_size)
        zeros = _core.zeros(shape, dtype=x.dtype.name, device=x.device)
        if hx is not None:
            if lstm != isinstance(hx, (tuple, list)) or (lstm and len(hx) != 2):
                want = "a tuple (h_0, c_0)" if lstm else "a tensor"
                raise ArgumentTypeRuntimeError(
                    f"{name}: hx must be {want}, got {type(hx).__name__}"
                )
            # every state must be (N, hidden_size), or (hidden_size,) for an unbatched input
            want_shape = shape if batched else (self.hidden_size,)
            for what, t in zip(("h_0", "c_0"), hx if lstm else (hx,)):
                if tuple(t.shape) != want_shape:
                    raise ShapeError(
                        f"{name}: {what} must have shape {list(want_shape)} for an input of "
                        f"shape {list(input.shape)}, got {list(t.shape)}"
                    )
        h, c = (hx if lstm else (hx, None)) if hx is not None else (None, None)
        if h is not None and not batched:
            h = h.unsqueeze(0)
            c = c.unsqueeze(0) if c is not None else None
        h = zeros if h is None else h
        c = (zeros if c is None else c) if lstm else None
        h2, c2 = _cell(
            self._mode,
            F.linear(x, self.weight_ih, self.bias_ih),
            h,
            c,
            self.weight_hh,
            self.bias_hh,
        )
        if not batched:
            h2 = h2.squeeze(0)
            c2 = c2.squeeze(0) if c2 is not None else None
        return (h2, c2) if lstm else h2


class RNNCell(_CellBase):
    """One Elman RNN step (``nonlinearity`` "tanh" or "relu")."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(
                f"RNNCell: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}"
            )
        self._mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity


class LSTMCell(_CellBase):
    """One LSTM step: ``(h', c')`` from ``input`` and ``(h, c)``."""

    _mode = "LSTM"


class GRUCell(_CellBase):
    """One GRU step."""

    _mode = "GRU"
