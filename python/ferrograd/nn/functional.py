"""PyTorch's ``torch.nn.functional`` over ferrograd's ops: activations, linear, dropout,
normalisations, embedding, attention, losses, pooling, resizing and padding.

Each function is a composition of the engine's ops, so its gradient is exact, works at any
order (``create_graph``) and on every device. Argument names and defaults are PyTorch's."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from .. import _core
from .._core import (
    DTypeError,
    ShapeError,
    Tensor,
    log_softmax,
    matmul,
    softmax,
    where,
)
from .._core import avg_pool2d as _avg_pool2d
from .._core import conv2d as _conv2d
from .._core import max_pool2d as _max_pool2d
from .._ops import _shape_data, gather
from .._ops import one_hot as _one_hot
from .._ops import pad as _pad_any
from .._tensor import tensor
from ..autodiff import Function as _EngineFunction
from ..random import _traced_draw
from ._errors import (
    ArgumentAssertionError,
    ArgumentRuntimeError,
    DTypeValueError,
    IndexRuntimeError,
    ShapeNotImplementedError,
    UnsupportedDTypeError,
    UnsupportedValueError,
)

__all__ = [
    "adaptive_avg_pool2d",
    "avg_pool2d",
    "batch_norm",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "conv1d",
    "conv2d",
    "conv_transpose2d",
    "cross_entropy",
    "dropout",
    "elu",
    "embedding",
    "gelu",
    "group_norm",
    "hardtanh",
    "huber_loss",
    "interpolate",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "log_softmax",
    "logsigmoid",
    "max_pool2d",
    "mse_loss",
    "nll_loss",
    "normalize",
    "one_hot",
    "pad",
    "pixel_shuffle",
    "pixel_unshuffle",
    "relu",
    "relu6",
    "scaled_dot_product_attention",
    "selu",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "softmax",
    "softplus",
    "tanh",
]

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _t(op: str, name: str, x: Any) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    return x


def _float(op: str, name: str, x: Any) -> Tensor:
    x = _t(op, name, x)
    if x.dtype.kind != "f":
        raise DTypeError(f"{op}: {name} must be a float tensor, got {x.dtype}")
    return x


def _reduce(op: str, loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _same_shape(op: str, input: Tensor, target: Tensor) -> None:
    if tuple(input.shape) != tuple(target.shape):
        raise ShapeError(
            f"{op}: input of shape {list(input.shape)} and target of shape "
            f"{list(target.shape)} differ"
        )


def _broadcast_pair(op: str, input: Tensor, target: Any) -> tuple[Tensor, Tensor]:
    """``input`` and ``target`` of one shape: as PyTorch's pointwise losses, shapes that
    differ are broadcast together with a ``UserWarning`` (they are rarely meant to);
    ``ShapeError`` where they do not broadcast."""
    import warnings

    from .. import broadcast_shapes

    target = _t(op, "target", target)
    if tuple(input.shape) == tuple(target.shape):
        return input, target
    try:
        shape = broadcast_shapes(input.shape, target.shape)
    except ValueError:
        raise ShapeError(
            f"{op}: input of shape {list(input.shape)} and target of shape "
            f"{list(target.shape)} do not broadcast"
        ) from None
    warnings.warn(
        f"{op}: using a target size ({list(target.shape)}) that is different to the input "
        f"size ({list(input.shape)}); they are broadcast to {list(shape)}, which is likely "
        "not intended. Please ensure they have the same size.",
        UserWarning,
        stacklevel=3,
    )
    return input.expand(*shape), target.expand(*shape)


def _legacy_reduction(size_average: Any, reduce: Any) -> str:
    """PyTorch's deprecated ``size_average`` / ``reduce`` arguments as a ``reduction``."""
    import warnings

    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    out = "mean" if size_average and reduce else ("sum" if reduce else "none")
    warnings.warn(
        f"size_average and reduce args will be deprecated, please use reduction='{out}' instead.",
        UserWarning,
        stacklevel=4,
    )
    return out


def _accepts_legacy_reduction(fn: Any) -> Any:
    """Lets a loss take PyTorch's deprecated ``size_average=`` / ``reduce=`` keywords."""
    import functools

    @functools.wraps(fn)
    def wrapped(*args: Any, size_average: Any = None, reduce: Any = None, **kwargs: Any) -> Any:
        if size_average is not None or reduce is not None:
            kwargs["reduction"] = _legacy_reduction(size_average, reduce)
        return fn(*args, **kwargs)

    return wrapped


# ------------------------------------------------------------------------------ activations


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    out = _t("relu", "input", input).relu()
    if inplace:
        input.copy_(out)
        return input
    return out


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    return hardtanh(input, 0.0, 6.0, inplace)


def sigmoid(input: Tensor) -> Tensor:
    return _t("sigmoid", "input", input).sigmoid()


def tanh(input: Tensor) -> Tensor:
    return _t("tanh", "input", input).tanh()


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    x = _t("silu", "input", input)
    if inplace:
        input.copy_(x._write_source().silu())
        return input
    return x.silu()


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(x)) = -softplus(-x)``, stable for large ``|x|``."""
    return -((-_t("logsigmoid", "input", input)).softplus())


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, the identity where ``beta * x > threshold``."""
    x = _t("softplus", "input", input)
    if beta == 1.0:
        soft = x.softplus()
    else:
        soft = (x * beta).softplus() / beta
    return where(x * beta > threshold, x, soft)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``x * Phi(x)`` with the normal CDF ``Phi`` (``approximate="none"``) or its tanh
    approximation (``approximate="tanh"``)."""
    x = _t("gelu", "input", input)
    if approximate == "none":
        if x.dtype.kind != "f":
            x = x.astype("float32")
        return x.gelu()  # one fused pass (its gradient one more)
    if approximate == "tanh":
        inner = _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1.0 + inner.tanh())
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    x = _t("leaky_relu", "input", input)
    out = where(x > 0, x, x * negative_slope)
    if inplace:
        x.copy_(out)
        return x
    return out


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    x = _t("elu", "input", input)
    out = where(x > 0, x, alpha * where(x > 0, 0.0, x).expm1())
    if inplace:
        x.copy_(out)
        return x
    return out


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with SELU's constants; ``inplace`` writes that into ``input``
    (not the intermediate ``elu``) and returns it."""
    scale, alpha = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717
    x = _t("selu", "input", input)
    out = scale * elu(x, alpha)
    return _write_into(x, out) if inplace else out


def hardtanh(
    input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> Tensor:
    """``input`` clamped to ``[min_val, max_val]`` (gradient 1 strictly inside)."""
    x = _t("hardtanh", "input", input)
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) must not exceed max_val ({max_val})")
    if x.dtype.kind in "iu":
        # an integer input stays integer (the bounds truncated, as PyTorch's)
        min_val, max_val = int(min_val), int(max_val)
    out = x.clamp(min_val, max_val)
    if inplace:
        x.copy_(out)
        return x
    return out


# ---------------------------------------------------------------------------- linear, dropout


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias`` with ``weight`` of shape ``(out_features, in_features)``
    (a transposed view, no copy), or 1-D ``(in_features,)`` for one output feature whose
    axis is dropped (PyTorch's)."""
    x = _t("linear", "input", input)
    w = _t("linear", "weight", weight)
    if w.ndim == 1 and x.ndim >= 1 and x.shape[-1] == w.shape[0]:
        # a 1-D weight (PyTorch's): one output feature, its axis dropped
        if bias is not None and (x.ndim == 2 or _t("linear", "bias", bias).ndim != 0):
            # (PyTorch's fused addmm path, taken for these, refuses a 1-D weight)
            raise ShapeError(
                f"linear: with a 1-D weight the bias must be 0-d and the input not 2-D, got "
                f"input of shape {list(x.shape)} and bias of shape {list(bias.shape)}"
            )
        y = matmul(x, w)
        return y + bias if bias is not None else y
    if w.ndim != 2 or x.ndim == 0 or x.shape[-1] != w.shape[1]:
        raise ShapeError(
            f"linear: input of shape {list(x.shape)} does not fit weight of shape "
            f"{list(w.shape)} (expected (..., {w.shape[-1] if w.ndim else '?'}) input and "
            "(out_features, in_features) weight)"
        )
    y = matmul(x, w, transpose_b=True)
    return y + bias if bias is not None else y


def _check_dropout_dtype(op: str, x: Tensor, p: float) -> None:
    """PyTorch's error for dropping out of an int or bool tensor: the kept entries would
    be scaled by ``1 / (1 - p)``, which that dtype cannot hold."""
    if 0.0 < p < 1.0 and x.dtype.kind not in "fc":
        raise DTypeError(
            f"{op}: result type float can't be cast to the input's dtype {x.dtype} (the kept "
            f"entries are scaled by 1 / (1 - p)); convert the input to a float dtype first"
        )


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes each entry with probability ``p`` and scales the rest by ``1 / (1 - p)``
    while ``training``; the identity otherwise. Masks come from ``fg.manual_seed``'s
    stream of the tensor's device."""
    x = _t("dropout", "input", input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(
            f"dropout: p must lie in [0, 1]: dropout probability has to be between 0 and 1, "
            f"but got {p}"
        )
    if not training or p == 0.0:
        return x
    _check_dropout_dtype("dropout", x, p)
    if p == 1.0:
        out = x * 0.0
    else:
        # the device's counter-based generator (inside fg.trace, a fresh mask on every run
        # of the graph, the one the same step draws eagerly)
        keep = _traced_draw(x.shape, x.device, "float32", False) >= p
        out = where(keep, x * (1.0 / (1.0 - p)), 0.0)
        if out.dtype != x.dtype:
            out = out.astype(x.dtype)
    if inplace:
        x.copy_(out)
        return x
    return out


# ---------------------------------------------------------------------------- normalisation


def _norm_shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


_HALF = ("float16", "bfloat16")


def _up(t: Any) -> Any:
    """A float16/bfloat16 tensor as float32 (on the graph); anything else as it is."""
    return t.astype("float32") if isinstance(t, Tensor) and t.dtype.name in _HALF else t


def _check_param_dtypes(op: str, x: Tensor, **params: Tensor | None) -> None:
    """The affine parameters and running statistics of a normalisation share one dtype: the
    input's, or float32 for a float16/bfloat16 input (PyTorch's mixed-precision case). A
    float32 input with float64 parameters (a model cast with ``.double()`` whose forward casts
    back to float32) raises as in PyTorch instead of quietly computing in float64."""
    xd = x.dtype.name
    allowed = (xd, "float32") if xd in _HALF else (xd,)
    first: str | None = None
    for name, t in params.items():
        if not isinstance(t, Tensor):
            continue
        td = t.dtype.name
        first = first or td
        if td not in allowed or td != first:
            want = f"{xd} or float32" if xd in _HALF else xd
            raise DTypeError(
                f"{op}: {name} has dtype {td}, expected {want} (input has dtype {xd}; the "
                f"parameters must share one dtype)"
            )


# The normalisations of float16/bfloat16 inputs run in float32 (a variance above 65504
# overflows float16 and zeroes the output) and round once to the input's dtype, which is
# also their output dtype with float32 weights, as PyTorch's.


def _check_affine_shape(op: str, name: str, t: Tensor | None, shape: tuple) -> None:
    """``t`` (when given) must have exactly the normalised shape."""
    if t is not None and tuple(t.shape) != tuple(shape):
        raise ShapeError(
            f"{op}: {name} must have the shape of normalized_shape {list(shape)}, got {name} "
            f"of shape {list(t.shape)}"
        )


def layer_norm(
    input: Tensor,
    normalized_shape: Any,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalises over the last ``len(normalized_shape)`` axes (biased variance), then
    ``* weight + bias``."""
    x = _float("layer_norm", "input", input)
    _check_param_dtypes("layer_norm", x, weight=weight, bias=bias)
    if x.dtype.name in _HALF:
        y = layer_norm(x.astype("float32"), normalized_shape, _up(weight), _up(bias), eps)
        return y.astype(x.dtype.name)
    shape = _norm_shape(normalized_shape)
    k = len(shape)
    if k == 0 or k > x.ndim or tuple(x.shape[-k:]) != shape:
        raise ShapeError(
            f"layer_norm: normalized_shape {list(shape)} does not match the trailing axes of "
            f"input of shape {list(x.shape)}"
        )
    _check_affine_shape("layer_norm", "weight", weight, shape)
    _check_affine_shape("layer_norm", "bias", bias, shape)
    fused_eps = isinstance(eps, (int, float)) and math.isfinite(eps) and eps >= 0
    if str(x.dtype) in ("float32", "float64") and fused_eps:
        # one fused op (forward one pass, backward one pass for every gradient); a negative
        # eps (which PyTorch takes as given) goes through the composed ops below
        rows = x.reshape(*x.shape[: x.ndim - k], -1) if k > 1 else x
        affine = [t for t in (weight, bias) if t is not None]
        dev = str(x.device)
        if affine and all(
            isinstance(t, Tensor) and t.dtype == x.dtype and str(t.device) == dev for t in affine
        ):
            cols = rows.shape[-1]
            # (a reshape that changes nothing is still a recorded view: skipped)
            w = (
                (weight if weight.shape == (cols,) else weight.reshape(cols))
                if weight is not None
                else _core.ones(cols, dtype=x.dtype, device=x.device)
            )
            b = (
                (bias if bias.shape == (cols,) else bias.reshape(cols))
                if bias is not None
                else _core.zeros(cols, dtype=x.dtype, device=x.device)
            )
            y = _core._layer_norm(rows, w, b, float(eps))
            weight = bias = None
        else:
            y = _core._normalize(rows, float(eps))
        if k > 1:
            y = y.reshape(*x.shape)
    else:
        axes = tuple(range(x.ndim - k, x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        xc = x - mean
        var = (xc * xc).mean(axis=axes, keepdims=True)
        y = xc * (var + eps).rsqrt()
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def _channel_shape(x: Tensor) -> list[int]:
    return [1, x.shape[1]] + [1] * (x.ndim - 2)


def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalises each channel (axis 1) over the batch and spatial axes. ``training``: with
    the batch's statistics, updating ``running_mean``/``running_var`` in place (unbiased
    variance, ``momentum``); otherwise with the running statistics."""
    x = _float("batch_norm", "input", input)
    if not (training and (running_mean is None) != (running_var is None)):
        # (one running statistic without the other raises its own error below, first)
        _check_param_dtypes(
            "batch_norm",
            x,
            weight=weight,
            bias=bias,
            running_mean=running_mean,
            running_var=running_var,
        )
    return _batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps)


def _batch_norm(
    x: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None,
    bias: Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
) -> Tensor:
    """``batch_norm`` past its dtype check (a float16/bfloat16 input comes back here in
    float32 with its running statistics as they are)."""
    if x.dtype.name in _HALF and x.numel():
        y = _batch_norm(
            x.astype("float32"),
            running_mean,
            running_var,
            _up(weight),
            _up(bias),
            training,
            momentum,
            eps,
        )
        return y.astype(x.dtype.name)
    if x.ndim >= 1 and x.numel() == 0:
        # an empty input, PyTorch's: a copy of it on its graph (scaled by weight[0] and
        # shifted by bias[0] when given), after the training check on the batch size
        if training and x.shape[0] * int(np.prod(x.shape[2:])) == 1:
            raise ValueError(
                f"batch_norm: expected more than 1 value per channel when training, got input "
                f"of shape {list(x.shape)}"
            )
        y = x * 1.0
        if weight is not None:
            y = y * weight[0]
        if bias is not None:
            y = y + bias[0]
        return y
    if x.ndim < 2:
        raise ShapeError(f"batch_norm: input needs at least 2 axes, got shape {list(x.shape)}")
    cs = _channel_shape(x)
    axes = tuple(d for d in range(x.ndim) if d != 1)
    c = x.shape[1]
    for name, t in (
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("weight", weight),
        ("bias", bias),
    ):
        if t is not None and tuple(t.shape) != (c,):
            raise ShapeError(
                f"batch_norm: {name} has shape {list(t.shape)}, expected [{c}] (the channels "
                f"of input of shape {list(x.shape)})"
            )
    if training:
        if (running_mean is None) != (running_var is None):
            # one statistic updated and the other not would leave them out of step
            raise ValueError(
                "batch_norm: running_mean and running_var must either both be None or neither "
                f"be None, got running_mean={'None' if running_mean is None else 'a tensor'} "
                f"and running_var={'None' if running_var is None else 'a tensor'}"
            )
        n = int(np.prod([x.shape[d] for d in axes]))
        if n <= 1:
            raise ValueError(
                f"batch_norm: expected more than 1 value per channel when training, got input "
                f"of shape {list(x.shape)}"
            )
        mean = x.mean(axis=axes, keepdims=True)
        xc = x - mean
        var = (xc * xc).mean(axis=axes, keepdims=True)
        if running_mean is not None or running_var is not None:
            with _no_record():
                if running_mean is not None:
                    new = running_mean * (1 - momentum) + mean.detach().reshape(c) * momentum
                    running_mean.copy_(new.astype(running_mean.dtype))
                if running_var is not None:
                    unbiased = var.detach().reshape(c) * (n / (n - 1))
                    new = running_var * (1 - momentum) + unbiased * momentum
                    running_var.copy_(new.astype(running_var.dtype))
        y = xc * (var + eps).rsqrt()
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var are needed in eval mode")
        y = (x - running_mean.reshape(*cs)) * (running_var.reshape(*cs) + eps).rsqrt()
    if weight is not None:
        y = y * weight.reshape(*cs)
    if bias is not None:
        y = y + bias.reshape(*cs)
    return y


class _no_record:
    """``no_grad``, and out of a checkpointed segment's view: the running statistics a
    normalisation updates in place are bookkeeping its output does not depend on (updated
    again when the segment is recomputed, as PyTorch's)."""

    def __enter__(self) -> None:
        from ..autodiff import no_grad

        self._ng = no_grad()
        self._ng.__enter__()
        self._paused = _core._set_capture_paused(True)

    def __exit__(self, *exc: object) -> None:
        _core._set_capture_paused(self._paused)
        self._ng.__exit__(*exc)


def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalises each group of ``C / num_groups`` channels over those channels and the
    spatial axes, per sample; then per-channel ``* weight + bias``."""
    x = _float("group_norm", "input", input)
    _check_param_dtypes("group_norm", x, weight=weight, bias=bias)
    if x.dtype.name in _HALF:
        y = group_norm(x.astype("float32"), num_groups, _up(weight), _up(bias), eps)
        return y.astype(x.dtype.name)
    if x.ndim < 2 or num_groups <= 0 or x.shape[1] % num_groups:
        raise ShapeError(
            f"group_norm: num_groups {num_groups} must divide the channels (axis 1) of input "
            f"of shape {list(x.shape)}"
        )
    if x.shape[0] * (x.shape[1] // num_groups) * math.prod(x.shape[2:]) == 1:
        # PyTorch's check (made in eval mode too): a single sample whose groups each hold
        # one value, normalised to all zeros
        raise ValueError(
            "group_norm: expected more than 1 value per channel when training, got input of "
            f"shape {list(x.shape)} with num_groups={num_groups}"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (x.shape[1],):
            raise ShapeError(
                f"group_norm: {name} must be a vector of the {x.shape[1]} channels of input of "
                f"shape {list(x.shape)}, got {name} of shape {list(t.shape)}"
            )
    g = x.reshape(x.shape[0], num_groups, math.prod(x.shape[1:]) // num_groups)
    mean = g.mean(axis=2, keepdims=True)
    gc = g - mean
    var = (gc * gc).mean(axis=2, keepdims=True)
    y = (gc * (var + eps).rsqrt()).reshape(*x.shape)
    cs = _channel_shape(x)
    if weight is not None:
        y = y * weight.reshape(*cs)
    if bias is not None:
        y = y + bias.reshape(*cs)
    return y


def normalize(
    input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Tensor | None = None
) -> Tensor:
    """``input / max(norm_p(input, dim), eps)``; ``out``: written into that tensor (which is
    returned), as PyTorch's."""
    x = _float("normalize", "input", input)
    n = x.norm(p, dim, keepdim=True)
    y = x / n.clamp(min=eps)
    if out is None:
        return y
    if not isinstance(out, Tensor):
        raise TypeError(f"normalize: out must be a Tensor, got {type(out).__name__}")
    if tuple(out.shape) != tuple(y.shape):
        out.resize_(*y.shape)
    out.copy_(y)
    return out


# -------------------------------------------------------------------------------- embedding


def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of ``weight`` picked by the int64 indices ``input`` (any shape): the result has
    shape ``input.shape + (embedding_dim,)``. The row ``padding_idx`` gets no gradient.
    ``max_norm``: the picked rows whose ``norm_type``-norm exceeds it are scaled down to it
    in ``weight`` itself first (in place, as PyTorch's); ``scale_grad_by_freq``: each
    row's gradient is divided by how often the batch picks it; ``sparse`` is accepted (the
    gradient is the same values, stored dense)."""
    idx = _t("embedding", "input", input)
    w = _t("embedding", "weight", weight)
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"embedding: input must hold int indices, got {idx.dtype}")
    if w.ndim != 2:
        raise ShapeError(f"embedding: weight must be 2-D, got shape {list(w.shape)}")
    flat = idx.reshape(-1)
    if flat.dtype.name != "int64":
        flat = flat.astype("int64")
    if idx.device != w.device:
        flat = flat.to(w.device)
    if max_norm is not None:
        _renorm_rows_(w, flat, float(max_norm), float(norm_type))
    out = _core.index_select(w, 0, flat, negative=False, op="embedding")
    if scale_grad_by_freq and flat.numel():
        ids = flat.numpy()
        _, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
        scale = tensor((1.0 / counts[inverse]).reshape(-1, 1), dtype=w.dtype.name, device=w.device)
        out = out * scale + (out * (1.0 - scale)).detach()
    if padding_idx is not None:
        if not -w.shape[0] <= padding_idx < w.shape[0]:
            raise ArgumentAssertionError(
                f"embedding: padding_idx must be within the number of embeddings, "
                f"{-w.shape[0]} through {w.shape[0] - 1}, got {padding_idx}"
            )
        pi = padding_idx + w.shape[0] if padding_idx < 0 else padding_idx
        keep = (flat != pi).reshape(-1, 1)
        out = where(keep, out, out.detach())
    return out.reshape(*idx.shape, w.shape[1])


def _renorm_rows_(w: Tensor, flat: Tensor, max_norm: float, norm_type: float) -> None:
    """Scales the rows of ``w`` that ``flat`` picks down to norm ``max_norm`` (in place, not
    recorded: PyTorch's ``embedding_renorm_``)."""
    from ..autodiff import no_grad

    if not flat.numel():
        return
    if _core._tracing():
        # the indices are values of this run: each picked row is scaled (a row picked twice
        # gets the same scaled values twice)
        rows = flat
    else:
        rows = tensor(np.unique(flat.numpy()), device=w.device)
    with no_grad():
        picked = _core.index_select(w, 0, rows, negative=False, op="embedding")
        if norm_type == float("inf"):
            norms = picked.abs().max(axis=1, keepdims=True)
        else:
            norms = (picked.abs() ** norm_type).sum(axis=1, keepdims=True) ** (1.0 / norm_type)
        scale = where(norms > max_norm, max_norm / (norms + 1e-7), 1.0).astype(w.dtype.name)
        w[rows] = picked * scale


# -------------------------------------------------------------------------------- attention


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """``softmax(query @ key^T * scale + mask) @ value`` over the last two axes
    (``(..., L, E)``, ``(..., S, E)``, ``(..., S, Ev)``). ``attn_mask``: bool (True takes
    part) or float (added); ``is_causal``: position ``i`` sees keys ``<= i``;
    ``enable_gqa``: key and value may have fewer heads (axis -3) than query, each shared by
    a group of query heads (grouped-query attention)."""
    q = _float("scaled_dot_product_attention", "query", query)
    k = _float("scaled_dot_product_attention", "key", key)
    v = _float("scaled_dot_product_attention", "value", value)
    if enable_gqa and q.ndim >= 3 and k.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        hq, hk = q.shape[-3], k.shape[-3]
        if hk == 0 or hq % hk or v.shape[-3] != hk:
            raise ShapeError(
                f"scaled_dot_product_attention: with enable_gqa the query's heads ({hq}) must "
                f"be a multiple of the key's and value's ({hk}, {v.shape[-3]})"
            )
        k = k.repeat_interleave(hq // hk, dim=-3)
        v = v.repeat_interleave(hq // hk, dim=-3)
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2 or q.shape[-1] != k.shape[-1]:
        raise ShapeError(
            f"scaled_dot_product_attention: query {list(q.shape)} and key {list(k.shape)} "
            "must be (..., L, E) and (..., S, E)"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ShapeError(
            f"scaled_dot_product_attention: key {list(k.shape)} and value {list(v.shape)} "
            "must have the same length S"
        )
    if attn_mask is not None and not isinstance(attn_mask, Tensor):
        from .attention.bias import CausalBias, CausalVariant

        if isinstance(attn_mask, CausalBias):
            # torch.nn.attention.bias: upper left is is_causal's mask, lower right a dense one
            if is_causal:
                raise ValueError(
                    "scaled_dot_product_attention: CausalBias should not be used with "
                    "is_causal=True"
                )
            if attn_mask.variant == CausalVariant.UPPER_LEFT:
                attn_mask, is_causal = None, True
            else:
                attn_mask = attn_mask._materialize(q.device)
    if attn_mask is not None and is_causal:
        raise ArgumentRuntimeError(
            "scaled_dot_product_attention: Explicit attn_mask should not be set when "
            "is_causal=True (give attn_mask or is_causal, not both)"
        )
    if not 0.0 <= dropout_p <= 1.0:
        raise ArgumentRuntimeError(
            f"scaled_dot_product_attention: dropout_p must lie in [0, 1], got {dropout_p}"
        )
    if attn_mask is not None:
        attn_mask = _t("scaled_dot_product_attention", "attn_mask", attn_mask)
        # an integer mask (a 0/1 padding mask passed as is) would be added to the scores
        # and shift them by 0 or 1 instead of masking: refused, as PyTorch
        if attn_mask.dtype.kind != "b" and attn_mask.dtype.name not in ("float32", q.dtype.name):
            raise DTypeError(
                "scaled_dot_product_attention: attn_mask must be bool, float32 or the "
                f"query's dtype ({q.dtype.name}), got {attn_mask.dtype.name}"
            )
        want = (
            *np.broadcast_shapes(tuple(q.shape[:-2]), tuple(k.shape[:-2])),
            q.shape[-2],
            k.shape[-2],
        )
        try:
            fits = np.broadcast_shapes(want, tuple(attn_mask.shape)) == want
        except ValueError:
            fits = False
        if not fits:
            raise ShapeError(
                f"scaled_dot_product_attention: attn_mask of shape {list(attn_mask.shape)} "
                f"does not broadcast to the attention scores' shape {list(want)}"
            )
    s = (1.0 / math.sqrt(q.shape[-1])) if scale is None else scale
    if (
        attn_mask is None
        and dropout_p == 0.0
        and str(q.device) == str(k.device) == str(v.device)
        and str(q.dtype) in ("float32", "float64")
        and q.dtype == k.dtype == v.dtype
        and q.ndim == k.ndim == v.ndim
        and q.shape[:-2] == k.shape[:-2] == v.shape[:-2]
        and k.shape[-2] > 0
        and math.isfinite(s)
    ):
        # one fused op: the (L, S) probabilities are never stored, forward or backward
        return _core._attention(q, k, v, float(s), bool(is_causal))
    scores = matmul(q * s, k, transpose_b=True)
    L, S = q.shape[-2], k.shape[-2]
    if is_causal:
        attn_mask = tensor(np.tri(L, S, 0, dtype=bool), device=q.device)
    if attn_mask is not None:
        if attn_mask.dtype.kind == "b":
            scores = where(attn_mask, scores, -math.inf)
        else:
            scores = scores + attn_mask
        # a query whose every key is masked out attends to nothing: zeros, as PyTorch, not
        # the NaN of softmax over -inf (kept out of the softmax so no NaN reaches the grads)
        dead = (scores == -math.inf).all(-1, keepdim=True)
        p = where(dead, 0.0, softmax(where(dead, 0.0, scores), -1))
    else:
        p = softmax(scores, -1)
    if dropout_p > 0.0:
        p = dropout(p, dropout_p, True)
    return p @ v


# ----------------------------------------------------------------------------------- losses


def _class_target(op: str, input: Tensor, target: Tensor) -> Tensor:
    target = _t(op, "target", target)
    if target.dtype.kind not in "iu":
        raise DTypeError(f"{op}: target must hold class indices (int), got {target.dtype}")
    want = (input.shape[0], *input.shape[2:]) if input.ndim >= 2 else ()
    if tuple(target.shape) != tuple(want):
        raise ShapeError(
            f"{op}: target of shape {list(target.shape)} does not fit input of shape "
            f"{list(input.shape)} (expected {list(want)})"
        )
    return target if target.dtype.name == "int64" else target.astype("int64")


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> Tensor:
    """The negative log-likelihood of class indices ``target`` under log-probabilities
    ``input`` (classes on axis 1, or a single 1-D row): ``-weight[t] * input[n, t]``;
    targets equal to ``ignore_index`` count for nothing; ``"mean"`` divides by the total
    weight of the counted targets, as PyTorch."""
    x = _float("nll_loss", "input", input)
    if x.ndim == 0:
        raise ShapeError(
            "nll_loss: input must have 1 or more dimensions (classes), got a 0-d tensor"
        )
    if x.ndim == 1:
        tn = _t("nll_loss", "target", target)
        if tn.ndim > 1 or tn.numel() != 1:
            raise ShapeError(
                f"nll_loss: a 1-D input (one sample) takes a 0-d or 1-element target, got "
                f"target of shape {list(tn.shape)}"
            )
        if reduction == "none":
            # an unbatched input (C,) has a 0-d loss, as PyTorch's
            t1 = _t("nll_loss", "target", target).reshape(1)
            return nll_loss(x.reshape(1, -1), t1, weight, ignore_index, "none").reshape(())
        x = x.reshape(1, -1)
        target = _t("nll_loss", "target", target).reshape(1)
    t = _class_target("nll_loss", x, target)
    c = x.shape[1]
    _check_class_weight("nll_loss", weight, c)
    if not _core._tracing():  # (inside a trace the values are not known yet)
        tv = t.numpy()
        ok = tv != ignore_index
        if ok.any() and (tv[ok].min() < 0 or tv[ok].max() >= c):
            bad = tv[ok][(tv[ok] < 0) | (tv[ok] >= c)][0]
            raise IndexError(f"nll_loss: target {int(bad)} is out of range for {c} classes")
    valid = t != ignore_index
    safe = where(valid, t, 0).expand_dims(1)
    picked = _core.take_along_axis(x, safe, 1).squeeze(1)
    if weight is not None:
        w = _core.index_select(weight, 0, safe.reshape(-1)).reshape(*t.shape)
        w = where(valid, w, 0.0)
    else:
        w = valid.astype(x.dtype)
    loss = -picked * w
    if reduction == "mean":
        return _mean_over_weight(loss.sum(), w.sum())
    return _reduce("nll_loss", loss, reduction)


def _check_class_weight(op: str, weight: Any, c: int) -> None:
    """A per-class ``weight`` must hold exactly one entry per class (a ``(C,)`` tensor):
    any other shape would be read out of place or broadcast silently."""
    if weight is not None and tuple(_t(op, "weight", weight).shape) != (c,):
        raise ArgumentRuntimeError(
            f"{op}: weight should be defined either for all {c} classes or no classes "
            f"(shape [{c}]), got shape {list(weight.shape)}"
        )


def _mean_over_weight(total: Tensor, weight: Tensor) -> Tensor:
    """``total / weight``; where no target counts (``weight == 0``: every target ignored)
    NaN, as PyTorch's value, with zero gradients (not NaN ones that would spread through
    clipping and the optimizer)."""
    ok = weight != 0
    return where(ok, total / where(ok, weight, 1.0), float("nan"))


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross-entropy of ``input`` logits (classes on axis 1) against class indices (int) or
    class probabilities (float, ``input``'s shape); ``label_smoothing`` mixes the target
    with the uniform distribution as PyTorch."""
    x = _float("cross_entropy", "input", input)
    target = _t("cross_entropy", "target", target)
    loss = _cross_entropy(x, target, weight, ignore_index, reduction, label_smoothing)
    # an unbatched input (C,) has a 0-d loss per sample, as PyTorch's
    return loss.reshape(()) if x.ndim == 1 and reduction == "none" else loss


def _cross_entropy(
    x: Tensor,
    target: Tensor,
    weight: Tensor | None,
    ignore_index: int,
    reduction: str,
    label_smoothing: float,
) -> Tensor:
    if not 0.0 <= label_smoothing <= 1.0:
        raise ArgumentRuntimeError(
            f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}"
        )
    if x.ndim == 0:
        raise ShapeError("cross_entropy: input must have 1 or more dimensions (classes), got 0-d")
    if x.ndim == 1:
        x = x.reshape(1, -1)
        target = target.reshape(1, -1) if target.dtype.kind == "f" else target.reshape(1)
    c = x.shape[1]
    _check_class_weight("cross_entropy", weight, c)
    if target.dtype.kind == "f":  # probabilities
        _same_shape("cross_entropy", x, target)
        if ignore_index >= 0:
            # no class index to compare with: PyTorch refuses rather than ignore nothing
            raise ArgumentRuntimeError(
                f"cross_entropy: ignore_index ({ignore_index}) is not supported for floating "
                "point target (class probabilities)"
            )
        logp = log_softmax(x, 1)
        p = target * (1 - label_smoothing) + label_smoothing / c if label_smoothing else target
        terms = logp * p
        if weight is not None:
            terms = terms * weight.reshape(*_channel_shape(x))
        loss = -terms.sum(axis=1)
        return _reduce("cross_entropy", loss, reduction)
    if (
        weight is None
        and label_smoothing == 0.0
        and reduction == "mean"
        and x.ndim == 2
        and not _core._tracing()  # traced: the composition, which handles ignored targets
    ):
        t64 = _class_target("cross_entropy", x, target)  # (uint8 labels too, as int64)
        if not (t64.numpy() == ignore_index).any():
            return _core.cross_entropy(x, t64)  # the fused kernel
    logp = log_softmax(x, 1)
    nll = nll_loss(logp, target, weight, ignore_index, reduction)
    if label_smoothing == 0.0:
        return nll
    # smoothing: (1 - eps) * nll + eps * mean over classes of -logp (weighted, ignoring)
    t = _class_target("cross_entropy", x, target)
    valid = t != ignore_index
    cs = _channel_shape(x)
    lw = logp * weight.reshape(*cs) if weight is not None else logp
    smooth = -lw.sum(axis=1) / c
    smooth = where(valid, smooth, 0.0)
    if reduction == "mean":
        if weight is not None:
            wt = where(
                valid,
                _core.index_select(weight, 0, where(valid, t, 0).reshape(-1)).reshape(*t.shape),
                0.0,
            )
            denom = wt.sum()
        else:
            denom = valid.astype(x.dtype).sum()
        smooth = _mean_over_weight(smooth.sum(), denom)
    else:
        smooth = _reduce("cross_entropy", smooth, reduction)
    return nll * (1 - label_smoothing) + smooth * label_smoothing


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    x = _float("mse_loss", "input", input)
    x, target = _broadcast_pair("mse_loss", x, target)
    d = x - target
    return _reduce("mse_loss", d * d, reduction)


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    x = _float("l1_loss", "input", input)
    x, target = _broadcast_pair("l1_loss", x, target)
    return _reduce("l1_loss", (x - target).abs(), reduction)


def smooth_l1_loss(
    input: Tensor, target: Tensor, reduction: str = "mean", beta: float = 1.0
) -> Tensor:
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta``."""
    x = _float("smooth_l1_loss", "input", input)
    x, target = _broadcast_pair("smooth_l1_loss", x, target)
    if beta < 0:
        raise ArgumentRuntimeError(
            f"smooth_l1_loss does not support negative values for beta: got beta={beta}"
        )
    d = (x - target).abs()
    if beta == 0:
        return _reduce("smooth_l1_loss", d, reduction)
    loss = where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)
    return _reduce("smooth_l1_loss", loss, reduction)


def huber_loss(
    input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0
) -> Tensor:
    """``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``."""
    x = _float("huber_loss", "input", input)
    x, target = _broadcast_pair("huber_loss", x, target)
    if not delta > 0:
        raise ArgumentRuntimeError(
            f"huber_loss does not support non-positive values for delta: got delta={delta}"
        )
    d = (x - target).abs()
    loss = where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta))
    return _reduce("huber_loss", loss, reduction)


def binary_cross_entropy(
    input: Tensor, target: Tensor, weight: Tensor | None = None, reduction: str = "mean"
) -> Tensor:
    """``-(t log p + (1 - t) log(1 - p))`` of probabilities ``input``, the logs clamped at
    -100 as PyTorch."""
    p = _float("binary_cross_entropy", "input", input)
    _same_shape("binary_cross_entropy", p, _t("binary_cross_entropy", "target", target))
    if not _core._tracing():  # (a trace cannot read values: the check runs eagerly only)
        pv = p.detach().numpy()
        if pv.size and (np.isnan(pv).any() or pv.min() < 0 or pv.max() > 1):
            raise ArgumentRuntimeError(
                "binary_cross_entropy: input must hold probabilities in [0, 1]"
            )
    t = target if isinstance(target, Tensor) else tensor(target, dtype=p.dtype)
    if t.dtype != p.dtype:
        t = t.astype(p.dtype)
    loss = _bce_function().apply(p, t)
    if weight is not None:
        loss = loss * weight
    return _reduce("binary_cross_entropy", loss, reduction)


_BCE: Any = None


def _bce_function() -> Any:
    """PyTorch's binary cross-entropy: logs clamped at -100, and a gradient
    ``(p - t) / max(p (1 - p), 1e-12)`` that stays finite where a probability is exactly 0 or
    1 (a saturated sigmoid), where the clamped formula's own slope would be 0 / 0."""
    global _BCE
    if _BCE is None:
        from ..autograd import Function

        class BinaryCrossEntropy(Function):
            @staticmethod
            def forward(ctx: Any, p: Tensor, t: Tensor) -> Tensor:
                ctx.save_for_backward(p, t)
                return -(t * p.log().clamp(min=-100.0) + (1 - t) * (1 - p).log().clamp(min=-100.0))

            @staticmethod
            def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
                p, t = ctx.saved_tensors
                gp = g * (p - t) / ((1 - p) * p).clamp(min=1e-12)
                gt = g * ((1 - p).log().clamp(min=-100.0) - p.log().clamp(min=-100.0))
                return gp, gt

        _BCE = BinaryCrossEntropy
    return _BCE


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """Binary cross-entropy of ``sigmoid(input)``, computed stably from the logits:
    ``(1 - t) x + (1 + (pw - 1) t) softplus(-x)``."""
    x = _float("binary_cross_entropy_with_logits", "input", input)
    t = _t("binary_cross_entropy_with_logits", "target", target)
    _same_shape("binary_cross_entropy_with_logits", x, t)
    sp = (-x).softplus()
    if pos_weight is not None:
        loss = (1 - t) * x + (1 + (pos_weight - 1) * t) * sp
    else:
        loss = (1 - t) * x + sp
    if weight is not None:
        loss = loss * weight
    return _reduce("binary_cross_entropy_with_logits", loss, reduction)


def kl_div(
    input: Tensor, target: Tensor, reduction: str = "mean", log_target: bool = False
) -> Tensor:
    """``target * (log target - input)`` pointwise, ``input`` log-probabilities (0 where
    ``target`` is 0, NaN where it is negative, as PyTorch's); ``reduction="batchmean"``
    divides the sum by the batch size."""
    x = _float("kl_div", "input", input)
    t = _t("kl_div", "target", target)
    if reduction == "mean":
        import warnings

        warnings.warn(
            "kl_div: reduction='mean' divides the summed loss by the number of elements "
            "(batch size times the size of the distribution); reduction='batchmean' divides by "
            "the batch size alone, which is the KL divergence's definition",
            UserWarning,
            stacklevel=2,
        )
    if log_target:
        loss = t.exp() * (t - x)
    else:
        # PyTorch's xlogy(t, t) - t * x: 0 where t is 0, NaN where t < 0
        from .._torch_more import xlogy

        loss = xlogy(t, t) - t * x
    if reduction == "batchmean":
        return loss.sum() / (x.shape[0] if x.ndim else 1)
    return _reduce("kl_div", loss, reduction)


# ---------------------------------------------------------------------- pooling and resizing


def _pair(op: str, name: str, v: Any) -> tuple[Any, Any]:
    if isinstance(v, (list, tuple)):
        if len(v) != 2:
            raise ValueError(f"{op}: {name} must be an int or a pair, got {v!r}")
        return v[0], v[1]
    return v, v


_INT32_MAX = 2**31 - 1


def _ints(op: str, name: str, v: Any, nd: int, default: Any = None) -> tuple[int, ...]:
    """``v`` (an int or ``nd`` ints; ``None`` or ``[]`` gives ``default``) as ``nd`` ints,
    each within int32 (PyTorch stores pooling arguments as int)."""
    if (v is None or (isinstance(v, (list, tuple)) and len(v) == 0)) and default is not None:
        return tuple(default)
    vals = tuple(v) if isinstance(v, (list, tuple)) else (v,) * nd
    if len(vals) == 1:
        vals = vals * nd
    if len(vals) != nd:
        raise ShapeError(f"{op}: {name} must be an int or {nd} ints, got {v!r}")
    out = tuple(int(a) for a in vals)
    if any(abs(a) > _INT32_MAX for a in out):
        raise ShapeError(
            f"{op}: {name} {list(out)}: value cannot be converted to type int without overflow"
        )
    return out


def _check_pool_args(
    op: str, nd: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any = 1
) -> tuple[tuple[int, ...], ...]:
    """PyTorch's checks of a pool's arguments (``RuntimeError``s, here ``ShapeError``, a
    ``ValueError`` too): ``(kernel, stride, padding, dilation)`` as ``nd`` ints each."""
    k = _ints(op, "kernel_size", kernel_size, nd)
    s = _ints(op, "stride", stride, nd, default=k)
    p = _ints(op, "padding", padding, nd)
    d = _ints(op, "dilation", dilation, nd)
    if any(v == 0 for v in s) or any(v == 0 for v in k):
        raise ShapeError(
            f"{op}: stride should not be zero (kernel_size {list(k)}, stride {list(s)})"
        )
    if any(v < 0 for v in s) or any(v < 0 for v in k):
        raise ShapeError(
            f"{op}: kernel_size and stride should be greater than zero, got kernel_size "
            f"{list(k)}, stride {list(s)}"
        )
    if any(v <= 0 for v in d):
        raise ShapeError(f"{op}: dilation should be greater than zero, got {list(d)}")
    if any(v < 0 for v in p):
        raise ShapeError(f"{op}: padding {list(p)}: pad must be non-negative")
    if any(pi > (di * (ki - 1) + 1) // 2 for pi, ki, di in zip(p, k, d)):
        raise ShapeError(
            f"{op}: padding {list(p)}: pad should be at most half of effective kernel size "
            f"(kernel_size {list(k)}, dilation {list(d)})"
        )
    return k, s, p, d


def _check_pool_input(op: str, x: Tensor, nd: int, batch_ok: int = 1) -> None:
    """PyTorch refuses an empty non-batch axis of a pool's input: the first ``batch_ok``
    axes of a batched input may be empty (every axis of an unbatched one must not be)."""
    dims = list(x.shape)
    lead = batch_ok if x.ndim == nd + 2 else max(batch_ok - 1, 0)
    if any(v == 0 for v in dims[lead:]):
        raise ShapeError(
            f"{op}: Expected {nd + 1}D or {nd + 2}D (batch mode) tensor with optional 0 dim "
            f"batch size for input, but got shape {dims} (a non-batch axis is empty)"
        )


def _check_output_size(op: str, x: Tensor, lead: list[int], sizes: tuple[int, ...]) -> None:
    """Positive output sizes whose tensor can be allocated (PyTorch's storage-size
    overflow check; ferrograd also refuses more than 2**40 bytes up front)."""
    if any(v <= 0 for v in sizes):
        raise ShapeError(f"{op}: output_size must be positive, got {list(sizes)}")
    numel = 1
    for v in (*lead, *sizes):
        numel *= int(v)
    nbytes = numel * x.dtype.itemsize
    if nbytes >= 2**63:
        raise ShapeError(f"{op}: Storage size calculation overflowed with sizes={[*lead, *sizes]}")
    if nbytes > 2**40:
        raise ShapeError(
            f"{op}: an output of shape {[*lead, *sizes]} would need {nbytes} bytes, more than "
            "can be allocated"
        )


def _adaptive_matrix(n_in: int, n_out: int) -> np.ndarray:
    """The ``(n_out, n_in)`` averaging matrix of adaptive pooling (PyTorch's windows
    ``[floor(i n_in / n_out), ceil((i + 1) n_in / n_out))``)."""
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        lo = (i * n_in) // n_out
        hi = -((-(i + 1) * n_in) // n_out)
        m[i, lo:hi] = 1.0 / (hi - lo)
    return m


def _aa_matrix(
    n_in: int, n_out: int, align_corners: bool, scale: float | None, cubic: bool
) -> np.ndarray:
    """The ``(n_out, n_in)`` weights of antialiased resizing along one axis (PyTorch's and
    PIL's): a triangle (bilinear) or Keys cubic with ``a = -0.5`` (bicubic) filter, widened
    by the scale when shrinking, each row normalised to sum 1. An axis that keeps its
    length is copied, whatever scale_factor produced it (PyTorch's separable kernel skips
    it)."""
    if n_in == n_out:
        return np.eye(n_in)
    if align_corners:
        s = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        s = 1.0 / scale if scale is not None and scale > 0 else n_in / n_out
    half = 2.0 if cubic else 1.0
    support = half * s if s >= 1.0 else half
    inv = 1.0 / s if s >= 1.0 else 1.0

    def kernel(t: np.ndarray) -> np.ndarray:
        t = np.abs(t)
        if not cubic:
            return np.maximum(0.0, 1.0 - t)
        a = -0.5
        near = ((a + 2) * t - (a + 3)) * t * t + 1
        far = (((t - 5) * t + 8) * t - 4) * a
        return np.where(t < 1, near, np.where(t < 2, far, 0.0))

    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        center = s * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), n_in)
        if hi <= lo:
            continue
        w = kernel((np.arange(lo, hi) - center + 0.5) * inv)
        total = w.sum()
        m[i, lo:hi] = w / total if total != 0 else w
    return m


def _separable(x: Tensor, mh: np.ndarray, mw: np.ndarray) -> Tensor:
    """``mh @ x @ mw^T`` on the last two axes."""
    ah = tensor(mh, device=x.device).astype(x.dtype)
    aw = tensor(mw, device=x.device).astype(x.dtype)
    y = matmul(ah, x)
    return matmul(y, aw, transpose_b=True)


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling of ``(N, C, H, W)`` (or ``(C, H, W)``) to ``output_size``, windows
    as PyTorch's (``None`` keeps an axis)."""
    x = _float("adaptive_avg_pool2d", "input", input)
    if x.ndim not in (3, 4):
        raise ShapeError(
            f"adaptive_avg_pool2d: input must be (N, C, H, W) or (C, H, W), got {list(x.shape)}"
        )
    oh, ow = _pair("adaptive_avg_pool2d", "output_size", output_size)
    h, w = x.shape[-2], x.shape[-1]
    oh = h if oh is None else int(oh)
    ow = w if ow is None else int(ow)
    _check_pool_input("adaptive_avg_pool2d", x, 2, batch_ok=2)
    _check_output_size("adaptive_avg_pool2d", x, list(x.shape[:-2]), (oh, ow))
    if (oh, ow) == (1, 1):
        return x.mean(axis=(-2, -1), keepdims=True)
    if h % oh == 0 and w % ow == 0:
        kh, kw = h // oh, w // ow
        y = x if x.ndim == 4 else x.expand_dims(0)
        y = avg_pool2d(y, (kh, kw), (kh, kw))
        return y if x.ndim == 4 else y.squeeze(0)
    return _separable(x, _adaptive_matrix(h, oh), _adaptive_matrix(w, ow))


def _linear_matrix(n_in: int, n_out: int, align_corners: bool, scale: float | None) -> np.ndarray:
    if n_in == n_out:
        # an axis that keeps its length is copied, whatever scale_factor produced it (as
        # PyTorch's linear kernels; bicubic resamples it)
        return np.eye(n_in)
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        if align_corners:
            src = i * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        else:
            ratio = (1.0 / scale) if scale else n_in / n_out
            src = max((i + 0.5) * ratio - 0.5, 0.0)
        lo = min(math.floor(src), n_in - 1)
        hi = min(lo + 1, n_in - 1)
        frac = src - lo
        m[i, lo] += 1.0 - frac
        m[i, hi] += frac
    return m


def _cubic_matrix(n_in: int, n_out: int, align_corners: bool, scale: float | None) -> np.ndarray:
    """PyTorch's bicubic weights (Keys' kernel, a = -0.75) along one axis; taps beyond the
    edge read the edge element."""
    a = -0.75
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        if align_corners:
            src = i * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        else:
            ratio = (1.0 / scale) if scale else n_in / n_out
            src = (i + 0.5) * ratio - 0.5
        lo = math.floor(src)
        t = src - lo
        w = (
            ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
            ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
            ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a,
        )
        for k, wk in enumerate(w):
            m[i, min(max(lo - 1 + k, 0), n_in - 1)] += wk
    return m


def _nearest_index(
    n_in: int,
    n_out: int,
    scale: float | None,
    exact: bool = False,
    wide: bool = True,
    table: bool = False,
) -> np.ndarray:
    """The input index each output position of ``interpolate``'s nearest modes reads, with
    PyTorch's CPU rounding. By default the ratio and position are computed in float64
    (``wide``: a float64 input) or float32 and the position is rounded to float32 before
    it is floored, so a position a hair below an integer reads that integer's element.
    With ``table`` (PyTorch's kernel for small 2-D outputs) the ratio is float32, an axis
    that keeps its length or exactly doubles it is copied or repeated outright (nearest),
    and ``nearest-exact`` floors ``(i + 0.5) * ratio``."""
    i = np.arange(n_out)
    if table:
        if not exact and n_out == n_in:
            return i
        if not exact and n_out == 2 * n_in:
            return i >> 1
        ratio32 = np.float32(1.0 / scale) if scale else np.float32(n_in) / np.float32(n_out)
        if exact:
            pos = ((i + 0.5) * np.float64(ratio32)).astype(np.float32)
        else:
            pos = i.astype(np.float32) * ratio32
        return np.minimum(np.floor(pos).astype(np.int64), n_in - 1)
    real = np.float64 if wide else np.float32
    ratio = real(1.0 / scale) if scale else real(n_in) / real(n_out)
    if exact:
        # (ratio * (i + 0.5) - 0.5 rounded once, as the fused multiply-add PyTorch's
        # compiled kernel uses: exact in float64 for a float32 ratio)
        src = (np.float64(ratio) * (i + 0.5) - 0.5).astype(real)
        src = np.maximum(src, real(0.0))
        pos = (src + real(0.5)).astype(np.float32)
    else:
        pos = (ratio * i.astype(real)).astype(np.float32)
    return np.minimum(np.floor(pos).astype(np.int64), n_in - 1)


_INTERP_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}


def _interpolate_args(
    x: Tensor,
    size: Any,
    scale_factor: Any,
    mode: str,
    align_corners: bool | None,
    recompute_scale_factor: bool | None,
    antialias: bool,
) -> tuple[list[int], list]:
    """Checks ``interpolate``'s arguments in PyTorch's order and with its exception types;
    returns the output sizes and the per-axis scales the kernels use (``None`` where the
    scale follows from the sizes: a given ``size`` or a recomputed factor)."""
    if mode in ("nearest", "nearest-exact", "area") and align_corners is not None:
        raise ValueError(
            "interpolate: align_corners can only be set with the interpolating modes "
            f"(linear, bilinear, bicubic, trilinear), got mode {mode!r}"
        )
    k = x.ndim - 2
    if size is not None and scale_factor is not None:
        raise ValueError("interpolate: only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError("interpolate: either size or scale_factor should be defined")
    spatial = list(x.shape[2:])
    if size is not None:
        if isinstance(size, (list, tuple)) and len(size) != k:
            raise ValueError(
                f"interpolate: input and output must have the same number of spatial "
                f"dimensions, got input with spatial dimensions {spatial} and output size "
                f"{tuple(size)}"
            )
        if recompute_scale_factor:
            raise ValueError(
                "interpolate: recompute_scale_factor is not meaningful with an explicit size"
            )
    if isinstance(scale_factor, (list, tuple)) and len(scale_factor) != k:
        raise ValueError(
            f"interpolate: input and scale_factor must have the same number of spatial "
            f"dimensions, got input with spatial dimensions {spatial} and scale_factor "
            f"{tuple(scale_factor)}"
        )
    if antialias and not (mode in ("bilinear", "bicubic") and x.ndim == 4):
        raise ValueError(
            "interpolate: antialias=True goes with the bilinear and bicubic modes and a 4-D "
            f"input, got mode {mode!r} and shape {list(x.shape)}"
        )
    if x.ndim not in (3, 4, 5):
        raise ShapeNotImplementedError(
            f"interpolate: input must be 3-D, 4-D or 5-D (N, C, d1, ...), got shape "
            f"{list(x.shape)} (mode {mode!r})"
        )
    if mode not in ("nearest", "nearest-exact", "area") and mode not in _INTERP_DIMS:
        raise UnsupportedValueError(
            "interpolate: mode must be 'nearest', 'nearest-exact', 'linear', 'bilinear', "
            f"'bicubic', 'trilinear' or 'area', got {mode!r}"
        )
    if mode in _INTERP_DIMS and _INTERP_DIMS[mode] != k:
        raise ShapeNotImplementedError(
            f"interpolate: mode {mode!r} needs a {_INTERP_DIMS[mode] + 2}-D input, got a "
            f"{x.ndim}-D input of shape {list(x.shape)}"
        )
    if x.dtype.kind != "f":
        raise UnsupportedDTypeError(
            f"interpolate: input must be a float tensor, got {x.dtype} (mode {mode!r})"
        )
    if size is not None:
        given = size if isinstance(size, (list, tuple)) else [size] * k
        for s in given:
            # a float or bool size is refused (int() would truncate 4.5 to 4 silently)
            if isinstance(s, (bool, float, np.bool_, np.floating)) or (
                isinstance(s, Tensor) and s.dtype.kind != "i" and s.dtype.kind != "u"
            ):
                raise TypeError(
                    f"interpolate: size must be ints, got {size!r} (an element of type "
                    f"{type(s).__name__})"
                )
        sizes = [int(s) for s in given]
        scales: list = [None] * k
    else:
        sf = scale_factor if isinstance(scale_factor, (list, tuple)) else [scale_factor] * k
        sf = [float(f) for f in sf]
        sizes = []
        for n, f in zip(spatial, sf):
            v = math.floor(n * f) if math.isfinite(n * f) else n * f
            if not math.isfinite(v) or abs(v) >= 2**63:
                raise ArgumentRuntimeError(
                    f"interpolate: scale_factor {f} gives an output size that is not a "
                    f"finite 64-bit integer for input of shape {list(x.shape)}"
                )
            sizes.append(int(v))
        # area always recomputes: adaptive pooling knows no scale
        recompute = recompute_scale_factor or mode == "area"
        scales = [None] * k if recompute else sf
    if min(spatial) <= 0 or min(sizes) <= 0:
        raise ArgumentRuntimeError(
            f"interpolate: input and output sizes should be greater than 0, got input "
            f"spatial sizes {spatial} and output sizes {sizes}"
        )
    if mode != "area" and x.shape[1] == 0:
        raise ShapeError(
            f"interpolate: non-empty {x.ndim}-D data tensor expected (mode {mode!r}), got "
            f"shape {list(x.shape)}"
        )
    return sizes, scales


def interpolate(
    input: Tensor,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """Resizes the spatial axes of ``(N, C, L)``, ``(N, C, H, W)`` or ``(N, C, D, H, W)``:
    ``mode`` ``"nearest"``, ``"nearest-exact"``, ``"linear"`` (3-D), ``"bilinear"`` or
    ``"bicubic"`` (4-D), ``"trilinear"`` (5-D) or ``"area"`` (adaptive average pooling,
    3-D/4-D/5-D), as PyTorch's (``align_corners`` for the linear modes;
    ``recompute_scale_factor=True`` computes from the output size instead of the given
    factor; ``antialias=True`` filters bilinear and bicubic shrinking as PIL does)."""
    x = _t("interpolate", "input", input)
    sizes, scales = _interpolate_args(
        x, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias
    )
    # the resampling matrices and indices come from the shapes and the Python arguments
    # alone: inside a trace they are not data fixed into the graph (no TraceWarning)
    with _shape_data():
        return _resize(x, sizes, scales, mode, align_corners, antialias)


def _resize(
    x: Tensor, sizes: list, scales: list, mode: str, align_corners: Any, antialias: bool
) -> Tensor:
    """``interpolate`` past its argument checks."""
    k = x.ndim - 2
    in_sizes = list(x.shape[2:])
    if mode == "area":
        out = sizes
        if k == 2:
            return adaptive_avg_pool2d(x, out)
        if k == 3:
            # adaptive average pooling of a volume: depth first, then height and width
            n, c, d, h, w = x.shape
            md = tensor(_adaptive_matrix(d, out[0]), device=x.device).astype(x.dtype)
            y = matmul(md, x.reshape(n, c, d, h * w)).reshape(n, c * out[0], h, w)
            y = _separable(y, _adaptive_matrix(h, out[1]), _adaptive_matrix(w, out[2]))
            return y.reshape(n, c, *out)
        return adaptive_avg_pool2d(x.reshape(*x.shape, 1), (out[0], 1)).reshape(
            *x.shape[:2], out[0]
        )
    if mode in ("nearest", "nearest-exact"):
        for d in range(k):
            idx = _nearest_index(
                in_sizes[d],
                sizes[d],
                scales[d],
                mode == "nearest-exact",
                wide=x.dtype.name == "float64",
                # PyTorch's kernel for 2-D outputs with height + width <= 128
                table=k == 2 and sizes[0] + sizes[1] <= 128,
            )
            x = _core.index_select(x, 2 + d, tensor(idx, device=x.device))
        return x
    ac = bool(align_corners)
    if antialias:
        cubic = mode == "bicubic"
        mats = [_aa_matrix(in_sizes[d], sizes[d], ac, scales[d], cubic) for d in range(k)]
        return _separable(x, mats[0], mats[1])
    build = _cubic_matrix if mode == "bicubic" else _linear_matrix
    mats = [build(in_sizes[d], sizes[d], ac, scales[d]) for d in range(k)]
    if k == 1:
        return matmul(x, tensor(mats[0], device=x.device).astype(x.dtype), transpose_b=True)
    if k == 3:
        # depth first: (N, C, D, H*W) -> (N, C, D', H*W), then height and width
        n, c, d, h, w = x.shape
        md = tensor(mats[0], device=x.device).astype(x.dtype)
        x = matmul(md, x.reshape(n, c, d, h * w)).reshape(n, c * sizes[0], h, w)
        return _separable(x, mats[1], mats[2]).reshape(n, c, sizes[0], sizes[1], sizes[2])
    return _separable(x, mats[0], mats[1])


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """``(..., C r^2, H, W) -> (..., C, H r, W r)``."""
    x = _t("pixel_shuffle", "input", input)
    r = int(upscale_factor)
    if x.ndim < 3 or r <= 0 or x.shape[-3] % (r * r):
        raise ShapeError(
            f"pixel_shuffle: channels (axis -3) of input of shape {list(x.shape)} must be "
            f"divisible by upscale_factor^2 = {r * r}"
        )
    *lead, c, h, w = x.shape
    oc = c // (r * r)
    n = len(lead)
    y = x.reshape(*lead, oc, r, r, h, w)
    y = y.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return y.reshape(*lead, oc, h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """``(..., C, H r, W r) -> (..., C r^2, H, W)``, the inverse of :func:`pixel_shuffle`."""
    x = _t("pixel_unshuffle", "input", input)
    r = int(downscale_factor)
    if x.ndim < 3 or r <= 0 or x.shape[-1] % r or x.shape[-2] % r:
        raise ShapeError(
            f"pixel_unshuffle: height and width of input of shape {list(x.shape)} must be "
            f"divisible by downscale_factor {r}"
        )
    *lead, c, hr, wr = x.shape
    h, w = hr // r, wr // r
    n = len(lead)
    y = x.reshape(*lead, c, h, r, w, r)
    y = y.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return y.reshape(*lead, c * r * r, h, w)


# ----------------------------------------------------------------------------- convolutions


def _check_conv_stride(op: str, stride: Any) -> None:
    """PyTorch's ``RuntimeError`` for a zero or negative convolution stride."""
    vals = stride if isinstance(stride, (list, tuple)) else (stride,)
    for v in vals:
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v <= 0:
            raise ArgumentRuntimeError(
                f"{op}: non-positive stride is not supported, got stride {stride!r}"
            )


def _conv_arg(op: str, name: str, v: Any, nd: int) -> Any:
    """A convolution's ``stride``/``padding``/``dilation``/``output_padding``: an int, or a
    list of one value (used for every axis) or of ``nd`` values, as PyTorch; any other
    length raises its ``RuntimeError`` (a 2-tuple given to a 1-D convolution was read as
    its first entry)."""
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            return v[0]
        if len(v) != nd:
            raise ArgumentRuntimeError(
                f"{op}: expected {name} to be a single integer value or a list of {nd} values "
                f"to match the convolution dimensions, but got {name}={list(v)}"
            )
    return v


def _check_conv_ints(op: str, groups: Any, padding: Any, dilation: Any) -> None:
    """PyTorch's ``RuntimeError`` for a non-positive ``groups`` or ``dilation`` or a negative
    ``padding``, raised before any shape arithmetic can divide by them."""

    def vals(v: Any) -> tuple:
        return tuple(v) if isinstance(v, (list, tuple)) else (v,)

    def ints(v: Any) -> list[int]:
        return [int(e) for e in vals(v) if isinstance(e, (int, np.integer))]

    if isinstance(groups, (int, np.integer)) and not isinstance(groups, bool) and groups <= 0:
        raise ArgumentRuntimeError(f"{op}: non-positive groups is not supported, got {groups}")
    if any(v <= 0 for v in ints(dilation)):
        raise ArgumentRuntimeError(
            f"{op}: dilation should be greater than zero, got dilation {dilation!r}"
        )
    if not isinstance(padding, str) and any(v < 0 for v in ints(padding)):
        raise ArgumentRuntimeError(
            f"{op}: negative padding is not supported, got padding {padding!r}"
        )


def _check_same_stride(op: str, padding: Any, stride: Any) -> None:
    """PyTorch's ``RuntimeError`` for ``padding='same'`` with a stride other than 1 (the
    output size would not be the input's)."""
    vals = stride if isinstance(stride, (list, tuple)) else (stride,)
    if isinstance(padding, str) and padding == "same" and any(v != 1 for v in vals):
        raise ArgumentRuntimeError(
            f"{op}: padding='same' is not supported for strided convolutions, got stride {stride!r}"
        )


def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """2-D convolution of ``(N, C, H, W)`` (or ``(C, H, W)``) with ``(O, C / groups, kh,
    kw)`` weights; ``padding`` may be ints or ``"same"``/``"valid"``."""
    stride, dilation = (
        _conv_arg("conv2d", "stride", stride, 2),
        _conv_arg("conv2d", "dilation", dilation, 2),
    )
    if not isinstance(padding, str):
        padding = _conv_arg("conv2d", "padding", padding, 2)
    _check_conv_stride("conv2d", stride)
    _check_conv_ints("conv2d", groups, padding, dilation)
    _check_same_stride("conv2d", padding, stride)
    return _conv2d(input, weight, bias, stride, padding, dilation, groups)


def conv1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int = 1,
    padding: Any = 0,
    dilation: int = 1,
    groups: int = 1,
) -> Tensor:
    """1-D convolution of ``(N, C, L)`` with ``(O, C / groups, K)`` weights (a 2-D
    convolution of height 1)."""
    x = _t("conv1d", "input", input)
    w = _t("conv1d", "weight", weight)
    stride, dilation = (
        _conv_arg("conv1d", "stride", stride, 1),
        _conv_arg("conv1d", "dilation", dilation, 1),
    )
    if not isinstance(padding, str):
        padding = _conv_arg("conv1d", "padding", padding, 1)
    _check_conv_stride("conv1d", stride)
    _check_conv_ints("conv1d", groups, padding, dilation)
    _check_same_stride("conv1d", padding, stride)
    if x.ndim != 3 or w.ndim != 3:
        raise ShapeError(
            f"conv1d: input (N, C, L) and weight (O, C/groups, K) expected, got "
            f"{list(x.shape)} and {list(w.shape)}"
        )
    one = lambda v: v[0] if isinstance(v, (list, tuple)) else v
    pad_arg = padding if isinstance(padding, str) else (0, one(padding))
    y = conv2d(
        x.expand_dims(2),
        w.expand_dims(2),
        bias,
        (1, one(stride)),
        pad_arg,
        (1, one(dilation)),
        groups,
    )
    return y.squeeze(2)


def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """The transpose (adjoint) of :func:`conv2d`: ``(N, C_in, H, W)`` with weights
    ``(C_in, C_out / groups, kh, kw)`` to ``(N, C_out, H_out, W_out)``, ``H_out = (H - 1)
    stride - 2 padding + dilation (kh - 1) + output_padding + 1``."""
    x = _t("conv_transpose2d", "input", input)
    w = _t("conv_transpose2d", "weight", weight)
    stride, padding, output_padding, dilation = (
        _conv_arg("conv_transpose2d", name, v, 2)
        for name, v in (
            ("stride", stride),
            ("padding", padding),
            ("output_padding", output_padding),
            ("dilation", dilation),
        )
    )
    _check_conv_stride("conv_transpose2d", stride)
    _check_conv_ints("conv_transpose2d", groups, padding, dilation)
    if x.ndim != 4 or w.ndim != 4 or x.shape[1] != w.shape[0] or w.shape[0] % groups:
        raise ShapeError(
            f"conv_transpose2d: input (N, C_in, H, W) and weight (C_in, C_out/groups, kh, kw) "
            f"expected, got {list(x.shape)} and {list(w.shape)} with groups={groups}"
        )
    sh, sw = (int(v) for v in _pair("conv_transpose2d", "stride", stride))
    ph, pw = (int(v) for v in _pair("conv_transpose2d", "padding", padding))
    oph, opw = (int(v) for v in _pair("conv_transpose2d", "output_padding", output_padding))
    dh, dw = (int(v) for v in _pair("conv_transpose2d", "dilation", dilation))
    if oph >= max(sh, dh) or opw >= max(sw, dw):
        raise ArgumentRuntimeError(
            f"conv_transpose2d: output_padding must be smaller than stride or dilation, got "
            f"output_padding {(oph, opw)}, stride {(sh, sw)}, dilation {(dh, dw)}"
        )
    n, cin, h, wd = x.shape
    kh, kw = w.shape[2], w.shape[3]
    out_hw = [
        (size - 1) * st - 2 * p + dl * (k - 1) + o + 1
        for size, st, p, dl, k, o in ((h, sh, ph, dh, kh, oph), (wd, sw, pw, dw, kw, opw))
    ]
    if min(out_hw) <= 0:
        raise ShapeError(
            f"conv_transpose2d: input of size {[h, wd]} per channel gives an output of size "
            f"{out_hw}: the output is too small (padding {(ph, pw)} crops too much)"
        )
    cout_g = w.shape[1]
    # spread the input with stride - 1 zeros between entries
    if sh > 1 or sw > 1:
        z = x.reshape(n, cin, h, 1, wd, 1)
        z = pad(z, (0, sw - 1, 0, 0, 0, sh - 1))
        x = z.reshape(n, cin, h * sh, wd * sw)[:, :, : (h - 1) * sh + 1, : (wd - 1) * sw + 1]
    # pad by dilation (k - 1) - padding (negative: crop), plus output_padding at the end
    eh, ew = dh * (kh - 1) - ph, dw * (kw - 1) - pw
    x = pad(x, (ew, ew + opw, eh, eh + oph))
    # the weight flipped in space with in/out channels swapped per group
    g = groups
    wf = w.reshape(g, cin // g, cout_g, kh, kw).permute(0, 2, 1, 3, 4)
    wf = wf.reshape(g * cout_g, cin // g, kh, kw)
    wf = _core.index_select(wf, 2, tensor(np.arange(kh - 1, -1, -1), device=w.device))
    wf = _core.index_select(wf, 3, tensor(np.arange(kw - 1, -1, -1), device=w.device))
    return conv2d(x, wf, bias, 1, 0, (dh, dw), groups)


# ------------------------------------------------------------- more of PyTorch's functions


def softmin(input: Tensor, dim: int = -1, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """``softmax(-input, dim)``; with ``dtype``, ``input`` is cast to it first (PyTorch's)."""
    if dtype is not None:
        input = _t("softmin", "input", input).astype(str(dtype))
    return softmax(-_float("softmin", "input", input), dim)


def _write_into(input: Tensor, out: Tensor) -> Tensor:
    """An activation's ``inplace=True``: ``out`` written into ``input``, which is returned
    (as PyTorch's in-place activations return the tensor they were given)."""
    input.copy_(out)
    return input


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``."""
    x = _float("hardsigmoid", "input", input)
    out = relu6(x + 3.0) / 6.0
    return _write_into(x, out) if inplace else out


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``. In place, it computes from a copy of ``x`` where a tape
    records (the product's gradient keeps ``x``, which the write changes)."""
    x = _float("hardswish", "input", input)
    src = x._write_source() if inplace else x
    out = src * relu6(src + 3.0) / 6.0
    return _write_into(x, out) if inplace else out


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))`` (in place: computed from a copy of ``x``, as
    :func:`hardswish`)."""
    x = _float("mish", "input", input)
    src = x._write_source() if inplace else x
    out = src * softplus(src).tanh()
    return _write_into(x, out) if inplace else out


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha (exp(x / alpha) - 1))``."""
    x = _float("celu", "input", input)
    if alpha == 0:
        raise ArgumentRuntimeError("celu: alpha must not be 0")
    # alpha elu(x / alpha) for x <= 0 (gradient 1 at 0, as PyTorch's), x itself above
    out = _core.where(x > 0, x, alpha * elu(x / alpha))
    return _write_into(x, out) if inplace else out


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``."""
    x = _float("softsign", "input", input)
    return x / (x.abs() + 1.0)


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)``."""
    x = _float("tanhshrink", "input", input)
    return x - x.tanh()


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """The gated linear unit: the first half of ``dim`` times the sigmoid of the second."""
    x = _float("glu", "input", input)
    d = dim % x.ndim if x.ndim else 0
    if x.ndim == 0 or x.shape[d] % 2:
        raise ShapeError(f"glu: dim {dim} must have an even size, got shape {list(x.shape)}")
    a, b = x.chunk(2, d)
    return a * b.sigmoid()


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``(x1 / max(|x1|, eps)) . (x2 / max(|x2|, eps))`` along ``dim`` (inputs broadcast;
    PyTorch's: each norm floored at ``eps`` on its own)."""
    a = _t("cosine_similarity", "x1", x1)
    b = _t("cosine_similarity", "x2", x2)
    if a.dtype != b.dtype and (a.dtype.kind == "f" or b.dtype.kind == "f"):
        # PyTorch's: the inputs are promoted together first (an integer with a float input)
        from .. import result_type

        common = result_type(a, b)
        a, b = a.astype(common), b.astype(common)
    a = _float("cosine_similarity", "x1", a)
    b = _float("cosine_similarity", "x2", b)
    if a.dtype.name in _HALF or b.dtype.name in _HALF:
        # products and norms in float32 (float16's overflow past 65504), rounded once
        out = cosine_similarity(_up(a), _up(b), dim, eps)
        same = a.dtype == b.dtype
        return out.astype(a.dtype.name) if same else out
    if tuple(a.shape) != tuple(b.shape):
        # PyTorch's: the inputs broadcast first, the norms are then taken
        from .. import broadcast_tensors

        a, b = broadcast_tensors(a, b)

    def floored_norm(x: Tensor) -> Tensor:
        # floored without a gradient of its own, as PyTorch's (clamped under no_grad); the
        # lift is zero where the norm is above eps, so an infinite norm stays infinite
        n = x.norm(2, dim, keepdim=True)
        return n + where(n < eps, eps - n, 0.0).detach()

    return ((a / floored_norm(a)) * (b / floored_norm(b))).sum(dim)


def pairwise_distance(
    x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Tensor:
    """``norm_p(x1 - x2 + eps)`` along the last axis."""
    a = _float("pairwise_distance", "x1", x1)
    b = _float("pairwise_distance", "x2", x2)
    return (a - b + eps).norm(p, -1, keepdim=keepdim)


def rms_norm(
    input: Tensor, normalized_shape: Any, weight: Tensor | None = None, eps: float | None = None
) -> Tensor:
    """``x / sqrt(mean(x^2 over the last axes) + eps) * weight`` (``eps`` defaults to the
    dtype's machine epsilon, as PyTorch)."""
    x = _float("rms_norm", "input", input)
    if x.dtype.name in _HALF:
        # as PyTorch's: in float32 (a float16 square below 6e-5 loses its precision), with
        # float32's epsilon by default, rounded once to the input's dtype
        y = rms_norm(x.astype("float32"), normalized_shape, _up(weight), eps)
        return y.astype(x.dtype.name)
    shape = _norm_shape(normalized_shape)
    if not shape:
        raise ShapeError("rms_norm: normalized_shape must name at least one dim, got []")
    if tuple(x.shape[x.ndim - len(shape) :]) != shape:
        raise ShapeError(
            f"rms_norm: normalized_shape {list(shape)} does not end the input shape {list(x.shape)}"
        )
    _check_affine_shape("rms_norm", "weight", weight, shape)
    if eps is None:
        eps = float(np.finfo(np.float32 if x.dtype.name != "float64" else np.float64).eps)
    axes = list(range(x.ndim - len(shape), x.ndim))
    y = x * ((x * x).mean(axes, keepdims=True) + eps).rsqrt()
    if weight is not None:
        y = y * weight
        if y.dtype != x.dtype:
            # PyTorch's result takes the input's dtype: a float64 weight on a float32 input
            # scales in float64 and rounds back to float32
            y = y.astype(x.dtype.name)
    return y


def _pool1d(op: str, x: Tensor) -> Tensor:
    x = _float(op, "input", x)
    if x.ndim not in (2, 3):
        raise ShapeError(f"{op}: input must be (N, C, L) or (C, L), got {list(x.shape)}")
    return x


def _one(op: str, name: str, v: Any) -> int:
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise ValueError(f"{op}: {name} must be an int or a 1-tuple, got {v!r}")
        v = v[0]
    return None if v is None else int(v)  # type: ignore[return-value]


def max_pool1d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """1-D max pooling of ``(N, C, L)`` (the 2-D pooling over a height of 1); with
    ``return_indices``, also the position of each maximum along ``L``."""
    x = _pool_input("max_pool1d", input)
    if x.ndim not in (2, 3):
        raise ShapeError(f"max_pool1d: input must be (N, C, L) or (C, L), got {list(x.shape)}")
    _check_pool_input("max_pool1d", x, 1)
    (k,), (s,), (p,), (d,) = _check_pool_args(
        "max_pool1d", 1, kernel_size, stride, padding, dilation
    )
    if x.dtype.kind in "iu":  # PyTorch pools int tensors too: exact in float64
        out = max_pool1d(x.astype("float64"), k, s, p, d, ceil_mode, return_indices)
        if return_indices:
            return out[0].astype(x.dtype.name), out[1]
        return out.astype(x.dtype.name)
    if return_indices:
        y, idx = _max_pool_indices(
            "max_pool1d", x.unsqueeze(-2), (1, k), (1, s), (0, p), (1, d), ceil_mode
        )
        return y.squeeze(-2), idx.squeeze(-2)
    y = _max_pool2d(x.unsqueeze(-2), (1, k), (1, s), (0, p), (1, d), ceil_mode)
    return y.squeeze(-2)


def avg_pool1d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """1-D average pooling of ``(N, C, L)``."""
    x = _pool1d("avg_pool1d", input)
    _check_pool_input("avg_pool1d", x, 1)
    (k,), (s,), (p,), _ = _check_pool_args("avg_pool1d", 1, kernel_size, stride, padding)
    y = avg_pool2d(x.unsqueeze(-2), (1, k), (1, s), (0, p), ceil_mode, count_include_pad)
    return y.squeeze(-2)


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """1-D adaptive average pooling of ``(N, C, L)`` to ``output_size`` positions."""
    x = _pool1d("adaptive_avg_pool1d", input)
    n = _one("adaptive_avg_pool1d", "output_size", output_size)
    n = x.shape[-1] if n is None else n
    _check_pool_input("adaptive_avg_pool1d", x, 1, batch_ok=2)
    _check_output_size("adaptive_avg_pool1d", x, list(x.shape[:-1]), (n,))
    return adaptive_avg_pool2d(x.unsqueeze(-2), (1, n)).squeeze(-2)


def dropout2d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zeroes whole channels ``x[n, c]`` of ``(N, C, H, W)`` with probability ``p``, scaling
    the rest by ``1 / (1 - p)``. As PyTorch's (with its warnings): a 3-D input is taken as
    ``(N, C, L)`` (channel-wise 1-D dropout), other ranks as ``(N, C, ...)`` (a 2-D input
    drops single elements)."""
    x = _float("dropout2d", "input", input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(
            f"dropout2d: p must lie in [0, 1]: dropout probability has to be between 0 and 1, "
            f"but got {p}"
        )
    if x.ndim < 2:
        raise ShapeError(f"dropout2d: input must be (N, C, H, W), got {list(x.shape)}")
    if x.ndim not in (3, 4):
        _warn_dropout_rank("dropout2d", x.ndim, 2)
    if x.ndim == 3:
        import warnings

        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C is "
            "the channel dim. This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). To maintain the 1D "
            "channel-wise dropout behavior, please switch to using dropout1d instead.",
            UserWarning,
            stacklevel=2,
        )
    out = _feature_dropout(x, p, training)
    if inplace and out is not x:
        input.copy_(out)
        return input
    return out


def margin_ranking_loss(
    input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, reduction: str = "mean"
) -> Tensor:
    """``max(0, -target (input1 - input2) + margin)``."""
    a = _float("margin_ranking_loss", "input1", input1)
    b = _float("margin_ranking_loss", "input2", input2)
    t = _t("margin_ranking_loss", "target", target)
    if not a.ndim == b.ndim == t.ndim:
        raise ShapeError(
            "margin_ranking_loss: input1, input2 and target must have the same number of "
            f"dimensions, got shapes {list(a.shape)}, {list(b.shape)} and {list(t.shape)}"
        )
    loss = (-target * (a - b) + margin).clamp(min=0.0)
    return _reduce("margin_ranking_loss", loss, reduction)


def hinge_embedding_loss(
    input: Tensor, target: Tensor, margin: float = 1.0, reduction: str = "mean"
) -> Tensor:
    """PyTorch's formula: ``max(0, margin - x)`` where ``target != 1`` plus ``x`` where
    ``target != -1`` (so ``x`` where it is 1, the margin term where it is -1, and both for
    any other target)."""
    x = _float("hinge_embedding_loss", "input", input)
    # (zeros, not x * 0: an infinite input is an infinite loss, not NaN)
    zero = _core.zeros_like(x)
    pos = _core.where(target != -1, x, zero)
    neg = _core.where(target != 1, (margin - x).clamp(min=0.0), zero)
    return _reduce("hinge_embedding_loss", pos + neg, reduction)


def soft_margin_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """``log(1 + exp(-target * input))``."""
    x = _float("soft_margin_loss", "input", input)
    _same_shape("soft_margin_loss", x, target)
    return _reduce("soft_margin_loss", softplus(-target * x), reduction)


def cosine_embedding_loss(
    input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, reduction: str = "mean"
) -> Tensor:
    """``1 - cos`` where ``target`` is 1, ``max(0, cos - margin)`` where it is -1 (cosine
    along the last axis)."""
    a = _float("cosine_embedding_loss", "input1", input1)
    b = _float("cosine_embedding_loss", "input2", input2)
    t = _t("cosine_embedding_loss", "target", target)
    if t.ndim > 1 or not a.ndim == b.ndim == t.ndim + 1:
        # one sample (1-D inputs, 0-d target) or a batch (2-D inputs, 1-D target) only:
        # higher ranks would pair the targets with the wrong axis
        raise ShapeError(
            "cosine_embedding_loss: takes 1-D inputs with a 0-d target or 2-D inputs with a "
            f"1-D target, got inputs of shapes {list(a.shape)} and {list(b.shape)} and a "
            f"target of shape {list(t.shape)}"
        )
    eps = 1e-12
    cos = (a * b).sum(-1) / (((a * a).sum(-1) + eps) * ((b * b).sum(-1) + eps)).sqrt()
    zero = cos * 0.0
    loss = _core.where(target == 1, 1.0 - cos, zero) + _core.where(
        target == -1, (cos - margin).clamp(min=0.0), zero
    )
    return _reduce("cosine_embedding_loss", loss, reduction)


def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2.0,
    eps: float = 1e-6,
    swap: bool = False,
    reduction: str = "mean",
) -> Tensor:
    """``max(0, d(a, p) - d(a, n) + margin)`` with :func:`pairwise_distance`."""
    _triplet_check("triplet_margin_loss", anchor, positive, negative, margin)
    d_ap = pairwise_distance(anchor, positive, p, eps)
    d_an = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_an = _core.minimum(d_an, pairwise_distance(positive, negative, p, eps))
    loss = (d_ap - d_an + margin).clamp(min=0.0)
    return _reduce("triplet_margin_loss", loss, reduction)


def _triplet_check(op: str, anchor: Any, positive: Any, negative: Any, margin: float) -> None:
    """The margin must be positive and the three tensors of one rank (broadcasting a lone
    embedding against a batch is refused, as PyTorch)."""
    if not margin > 0:
        raise ValueError(f"{op}: margin must be greater than 0, got {margin}")
    shapes = [
        tuple(_t(op, n, v).shape)
        for n, v in (("anchor", anchor), ("positive", positive), ("negative", negative))
    ]
    if len({len(sh) for sh in shapes}) != 1:
        raise ShapeError(
            f"{op}: anchor, positive and negative must have the same number of dimensions, "
            f"got shapes {[list(sh) for sh in shapes]}"
        )


def gaussian_nll_loss(
    input: Tensor,
    target: Tensor,
    var: Any,
    full: bool = False,
    eps: float = 1e-6,
    reduction: str = "mean",
) -> Tensor:
    """``0.5 (log(max(var, eps)) + (input - target)^2 / max(var, eps))`` (plus
    ``0.5 log(2 pi)`` with ``full``)."""
    x = _float("gaussian_nll_loss", "input", input)
    v = var if isinstance(var, Tensor) else _core.full((), float(var), dtype=x.dtype.name)
    if bool((v < 0).any().item()):
        raise ValueError("gaussian_nll_loss: var has negative entry/entries")
    if tuple(v.shape) != tuple(x.shape) and isinstance(var, Tensor):
        if v.ndim == x.ndim - 1 and tuple(v.shape) == tuple(x.shape[:-1]):
            v = v.unsqueeze(-1)  # one variance per sample, shared by its last axis
        elif v.ndim != x.ndim or sum(vs for xs, vs in zip(x.shape, v.shape) if xs != vs) != 1:
            # otherwise only one axis of var may differ from input's, and be 1: any other
            # shape is a mistake broadcasting would hide
            raise ValueError(
                f"gaussian_nll_loss: var is of incorrect size: {list(v.shape)} for input of "
                f"shape {list(x.shape)} (want the same shape, one axis of 1, or the shape "
                "without the last axis)"
            )
    # clamped without a gradient of its own, as PyTorch (the gradient passes straight through
    # where var < eps)
    vc = v + (v.clamp(min=eps) - v).detach()
    loss = 0.5 * (vc.log() + (x - target) ** 2 / vc)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce("gaussian_nll_loss", loss, reduction)


def poisson_nll_loss(
    input: Tensor,
    target: Tensor,
    log_input: bool = True,
    full: bool = False,
    eps: float = 1e-8,
    reduction: str = "mean",
) -> Tensor:
    """``exp(input) - target * input`` (``log_input``) or ``input - target log(input +
    eps)``; with ``full``, Stirling's term for ``target > 1``."""
    x = _float("poisson_nll_loss", "input", input)
    loss = x.exp() - target * x if log_input else x - target * (x + eps).log()
    if full:
        t = target.astype(x.dtype.name) if target.dtype != x.dtype else target
        safe = t.clamp(min=1.0)
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        loss = loss + _core.where(t > 1, stirling, t * 0.0)
    return _reduce("poisson_nll_loss", loss, reduction)


__all__ += [
    "adaptive_avg_pool1d",
    "avg_pool1d",
    "celu",
    "cosine_embedding_loss",
    "cosine_similarity",
    "dropout2d",
    "gaussian_nll_loss",
    "glu",
    "hardsigmoid",
    "hardswish",
    "hinge_embedding_loss",
    "margin_ranking_loss",
    "max_pool1d",
    "mish",
    "pairwise_distance",
    "poisson_nll_loss",
    "rms_norm",
    "soft_margin_loss",
    "softmin",
    "softsign",
    "tanhshrink",
    "triplet_margin_loss",
]


def _instance_stats(
    x: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    momentum: float,
    eps: float,
) -> Tensor:
    """``x`` (non-empty ``(N, C, ...)``) normalised per sample and channel over its spatial
    axes; the running statistics, when both given, moved towards the batch's."""
    n, c = x.shape[0], x.shape[1]
    flat = x.reshape(n, c, -1)
    mean = flat.mean(axis=2, keepdims=True)
    centred = flat - mean
    var = (centred * centred).mean(axis=2, keepdims=True)
    y = (centred * (var + eps).rsqrt()).reshape(*x.shape)
    if running_mean is not None and running_var is not None:
        size = flat.shape[2]
        with _no_record():
            m = mean.detach().reshape(n, c).mean(axis=0)
            v = var.detach().reshape(n, c).mean(axis=0) * (size / max(size - 1, 1))
            running_mean.copy_(running_mean * (1.0 - momentum) + m * momentum)
            running_var.copy_(running_var * (1.0 - momentum) + v * momentum)
    return y


def instance_norm(
    input: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalises each channel of each sample over its spatial axes (``(N, C, ...)``); with
    running statistics given, updates them (the batch's mean of the per-sample statistics,
    variance unbiased) or, without ``use_input_stats``, normalises with them."""
    x = _float("instance_norm", "input", input)
    _check_param_dtypes("instance_norm", x, weight=weight, bias=bias)
    if x.dtype.name in _HALF:
        y = instance_norm(
            x.astype("float32"),
            running_mean,
            running_var,
            _up(weight),
            _up(bias),
            use_input_stats,
            momentum,
            eps,
        )
        return y.astype(x.dtype.name)
    if x.ndim < 3:
        raise ShapeError(f"instance_norm: input must be (N, C, ...), got {list(x.shape)}")
    cs = _channel_shape(x)
    for name, t in (
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("weight", weight),
        ("bias", bias),
    ):
        if t is not None and tuple(t.shape) != (x.shape[1],):
            raise ShapeError(
                f"instance_norm: {name} has shape {list(t.shape)}, expected [{x.shape[1]}] (the "
                f"channels of input of shape {list(x.shape)})"
            )
    if use_input_stats:
        if math.prod(x.shape[2:]) == 1:
            # one value per channel and sample: its variance is 0 and the output all zeros
            raise ValueError(
                "instance_norm: expected more than 1 spatial element when training, got input "
                f"of shape {list(x.shape)}"
            )
        if x.numel() == 0:
            # an empty input: nothing to normalise, and no statistics to move the running
            # ones by (their mean over no values would be nan)
            y = x * 1.0
        else:
            y = _instance_stats(x, running_mean, running_var, momentum, eps)
    else:
        if running_mean is None or running_var is None:
            raise ValueError(
                "instance_norm: use_input_stats=False needs running_mean and running_var"
            )
        y = (x - running_mean.reshape(*cs)) * (running_var.reshape(*cs) + eps).rsqrt()
    if weight is not None:
        y = y * weight.reshape(*cs)
    if bias is not None:
        y = y + bias.reshape(*cs)
    return y


def _patch_weight(op: str, c: int, kh: int, kw: int, x: Tensor) -> Tensor:
    """One-hot kernels ``(c * kh * kw, 1, kh, kw)``: output channel ``(ci, i, j)`` of a
    ``c``-group convolution picks pixel ``(i, j)`` of input channel ``ci``."""
    w = np.zeros((c * kh * kw, 1, kh, kw))
    k = np.arange(kh * kw)
    for ci in range(c):
        w[ci * kh * kw + k, 0, k // kw, k % kw] = 1.0
    return tensor(w, dtype=x.dtype.name, device=x.device)


def pad(input: Tensor, pad: Any, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pads the last ``len(pad) // 2`` axes: ``pad = (left_last, right_last, left_prev,
    right_prev, ...)``, as PyTorch's ``F.pad``. ``mode`` ``"constant"`` (with ``value``;
    negative pads crop) pads any axes; ``"reflect"``, ``"replicate"`` and ``"circular"``
    pad the last 1, 2 or 3 axes of a batched or unbatched input (2-D/3-D, 3-D/4-D, 4-D/5-D)
    and take no ``value``, as PyTorch's (``NotImplementedError`` for other ranks)."""
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise UnsupportedValueError(
            f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}"
        )
    if mode != "constant":
        if value is not None and value != 0:
            raise ArgumentRuntimeError(
                f"pad: padding mode {mode!r} doesn't take in value argument, got {value!r}"
            )
        k = len(pad) // 2
        nd = getattr(input, "ndim", None)
        if len(pad) % 2 == 0 and not (k in (1, 2, 3) and nd in (k + 1, k + 2)):
            raise ShapeNotImplementedError(
                f"pad: {mode} padding of {k} axes (pad of length {len(pad)}) needs a "
                f"{k + 1}-D or {k + 2}-D input, got a {nd}-D input"
            )
    return _pad_any(input, pad, mode, 0.0 if value is None else value)


def _patch_arg(op: str, name: str, v: Any, least: int | None) -> tuple[int, int]:
    """``fold``/``unfold``'s ``v`` (an int or a pair) as two ints, each at least ``least``
    (``None``: any), refused as PyTorch's with ``RuntimeError``."""
    pair = tuple(v) if isinstance(v, (list, tuple)) else (v, v)
    if len(pair) != 2:
        raise ArgumentRuntimeError(
            f"{op}: it is expected {name} equals to 2, but got size {len(pair)} ({v!r})"
        )
    a, b = (int(x) for x in pair)
    if least is not None and (a < least or b < least):
        what = "non-negative" if least == 0 else "greater than zero"
        raise ArgumentRuntimeError(f"{op}: {name} should be {what}, but got {v!r}")
    return a, b


def unfold(
    input: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1
) -> Tensor:
    """Sliding ``kernel_size`` patches of ``(N, C, H, W)`` as columns: ``(N, C kh kw, L)``
    (PyTorch's ``unfold``, im2col)."""
    x = _t("unfold", "input", input)
    kh, kw = _patch_arg("unfold", "kernel_size", kernel_size, 1)
    dil = _patch_arg("unfold", "dilation", dilation, 1)
    pads = _patch_arg("unfold", "padding", padding, 0)
    strides = _patch_arg("unfold", "stride", stride, 1)
    if x.ndim != 4:
        raise ShapeError(f"unfold: input must be (N, C, H, W), got {list(x.shape)}")
    if x.dtype.kind != "f":
        raise UnsupportedDTypeError(f"unfold: input must be a float tensor, got {x.dtype}")
    n, c = x.shape[0], x.shape[1]
    w = _patch_weight("unfold", c, kh, kw, x)
    cols = conv2d(x, w, None, strides, pads, dil, c)
    return cols.reshape(n, c * kh * kw, math.prod(cols.shape[2:]))  # (also for n = 0)


def fold(
    input: Tensor,
    output_size: Any,
    kernel_size: Any,
    dilation: Any = 1,
    padding: Any = 0,
    stride: Any = 1,
) -> Tensor:
    """The adjoint of :func:`unfold`: columns ``(N, C kh kw, L)`` summed back into
    ``(N, C, H, W)`` (overlaps add)."""
    x = _t("fold", "input", input)
    oh, ow = _patch_arg("fold", "output_size", output_size, None)
    kh, kw = _patch_arg("fold", "kernel_size", kernel_size, 1)
    dh, dw = _patch_arg("fold", "dilation", dilation, 1)
    ph, pw = _patch_arg("fold", "padding", padding, 0)
    sh, sw = _patch_arg("fold", "stride", stride, 1)
    if x.dtype.kind != "f":
        raise UnsupportedDTypeError(f"fold: input must be a float tensor, got {x.dtype}")
    if x.ndim != 3 or x.shape[1] % (kh * kw):
        raise ShapeError(f"fold: input must be (N, C * {kh * kw}, L), got {list(x.shape)}")
    bh = (oh + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    bw = (ow + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if bh * bw != x.shape[2]:
        raise ShapeError(
            f"fold: {x.shape[2]} blocks given, output_size {[oh, ow]} with these kernel, "
            f"stride, padding and dilation makes {bh * bw}"
        )
    n, c = x.shape[0], x.shape[1] // (kh * kw)
    w = _patch_weight("fold", c, kh, kw, x)
    # the transposed convolution ends where the last block ends, short of the padded output
    # by the stride's remainder: extend it there (before the padding is cut from both ends)
    rh = (oh + 2 * ph - dh * (kh - 1) - 1) % sh
    rw = (ow + 2 * pw - dw * (kw - 1) - 1) % sw
    return conv_transpose2d(
        x.reshape(n, c * kh * kw, bh, bw), w, None, (sh, sw), (ph, pw), (rh, rw), c, (dh, dw)
    )


__all__ += ["fold", "instance_norm", "unfold"]


def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """The transpose of :func:`conv1d`: ``(N, C_in, L)`` with weights ``(C_in, C_out /
    groups, k)`` (the 2-D transposed convolution over a height of 1)."""
    x = _t("conv_transpose1d", "input", input)
    w = _t("conv_transpose1d", "weight", weight)
    stride, padding, output_padding, dilation = (
        _conv_arg("conv_transpose1d", name, v, 1)
        for name, v in (
            ("stride", stride),
            ("padding", padding),
            ("output_padding", output_padding),
            ("dilation", dilation),
        )
    )
    _check_conv_stride("conv_transpose1d", stride)
    _check_conv_ints("conv_transpose1d", groups, padding, dilation)
    if x.ndim != 3 or w.ndim != 3:
        raise ShapeError(
            f"conv_transpose1d: input (N, C_in, L) and weight (C_in, C_out/groups, k) expected, "
            f"got {list(x.shape)} and {list(w.shape)}"
        )
    op = "conv_transpose1d"
    y = conv_transpose2d(
        x.unsqueeze(2),
        w.unsqueeze(2),
        bias,
        (1, _one(op, "stride", stride)),
        (0, _one(op, "padding", padding)),
        (0, _one(op, "output_padding", output_padding)),
        groups,
        (1, _one(op, "dilation", dilation)),
    )
    return y.squeeze(2)


def _adaptive_windows(n_in: int, n_out: int) -> list[tuple[int, int]]:
    return [((i * n_in) // n_out, -(-((i + 1) * n_in) // n_out)) for i in range(n_out)]


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Tensor:
    """The max over PyTorch's adaptive windows of ``(N, C, H, W)`` (or ``(C, H, W)``): window
    ``i`` spans ``[floor(i H / oh), ceil((i + 1) H / oh))``."""
    x = _float("adaptive_max_pool2d", "input", input)
    if x.ndim not in (3, 4):
        raise ShapeError(
            f"adaptive_max_pool2d: input must be (N, C, H, W) or (C, H, W), got {list(x.shape)}"
        )
    oh, ow = _pair("adaptive_max_pool2d", "output_size", output_size)
    h, w = x.shape[-2], x.shape[-1]
    oh, ow = int(h if oh is None else oh), int(w if ow is None else ow)
    _check_pool_input("adaptive_max_pool2d", x, 2)
    _check_output_size("adaptive_max_pool2d", x, list(x.shape[:-2]), (oh, ow))
    if not return_indices and h % oh == 0 and w % ow == 0:  # equal windows: a plain pool
        return max_pool2d(x, (h // oh, w // ow))
    # the value of each window is gathered at its first maximum, so its gradient goes
    # there alone, as PyTorch's
    wh, ww = _adaptive_windows(h, oh), _adaptive_windows(w, ow)
    kh = max(e - b for b, e in wh)
    kw = max(e - b for b, e in ww)
    rows = np.full((oh, kh), -1, dtype=np.int64)
    cols = np.full((ow, kw), -1, dtype=np.int64)
    for i, (b, e) in enumerate(wh):
        rows[i, : e - b] = np.arange(b, e)
    for i, (b, e) in enumerate(ww):
        cols[i, : e - b] = np.arange(b, e)
    y, idx = _window_max(x, rows, cols)
    return (y, idx) if return_indices else y


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Tensor:
    """1-D :func:`adaptive_max_pool2d` of ``(N, C, L)``."""
    x = _float("adaptive_max_pool1d", "input", input)
    if x.ndim not in (2, 3):
        raise ShapeError(
            f"adaptive_max_pool1d: input must be (N, C, L) or (C, L), got {list(x.shape)}"
        )
    n = _one("adaptive_max_pool1d", "output_size", output_size)
    n = x.shape[-1] if n is None else n
    _check_pool_input("adaptive_max_pool1d", x, 1)
    _check_output_size("adaptive_max_pool1d", x, list(x.shape[:-1]), (n,))
    if return_indices:
        y, idx = adaptive_max_pool2d(x.unsqueeze(-2), (1, n), True)
        return y.squeeze(-2), idx.squeeze(-2)
    return adaptive_max_pool2d(x.unsqueeze(-2), (1, n)).squeeze(-2)


def adaptive_max_pool1d_with_indices(
    input: Tensor, output_size: Any, return_indices: bool = False
) -> tuple[Tensor, Tensor]:
    """:func:`adaptive_max_pool1d` and the position of each maximum."""
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(
    input: Tensor, output_size: Any, return_indices: bool = False
) -> tuple[Tensor, Tensor]:
    """:func:`adaptive_max_pool2d` and the flat position of each maximum."""
    return adaptive_max_pool2d(input, output_size, True)


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``y_o = x1^T W_o x2 + b_o`` with ``weight`` ``(out, in1, in2)``."""
    a = _float("bilinear", "input1", input1)
    b = _float("bilinear", "input2", input2)
    w = _t("bilinear", "weight", weight)
    if w.ndim != 3 or a.shape[-1] != w.shape[1] or b.shape[-1] != w.shape[2]:
        raise ShapeError(
            f"bilinear: weight (out, in1, in2) must match inputs [..., in1] and [..., in2], got "
            f"{list(w.shape)}, {list(a.shape)} and {list(b.shape)}"
        )
    lead = list(a.shape[:-1])
    a2 = a.reshape(-1, a.shape[-1])
    b2 = b.reshape(-1, b.shape[-1])
    o, i1, i2 = w.shape
    # (x1 W) per output: (n, out, in2), then the dot with x2
    t = (a2 @ w.permute(1, 0, 2).reshape(i1, o * i2)).reshape(-1, o, i2)
    y = (t * b2.reshape(-1, 1, i2)).sum(-1)
    if bias is not None:
        y = y + bias
    return y.reshape(*lead, o)


__all__ += ["adaptive_max_pool1d", "adaptive_max_pool2d", "bilinear", "conv_transpose1d"]


def _default_align_corners(op: str, align_corners: bool | None) -> bool:
    """``align_corners`` left unset means False, with PyTorch's warning that its default
    was True before PyTorch 1.3 (code written for that default samples differently)."""
    if align_corners is not None:
        return bool(align_corners)
    import warnings

    warnings.warn(
        f"{op}: align_corners was not given and defaults to False (PyTorch's default since "
        "1.3.0; it was True before); pass align_corners=True for the old sampling grid, or "
        "align_corners=False to keep this one and silence this warning.",
        UserWarning,
        stacklevel=3,
    )
    return False


def affine_grid(theta: Tensor, size: Any, align_corners: bool | None = None) -> Tensor:
    """Sampling coordinates ``(N, H, W, 2)`` in ``[-1, 1]`` for 2-D affine maps ``theta``
    ``(N, 2, 3)`` over an output of ``size`` ``(N, C, H, W)``, or ``(N, D, H, W, 3)`` for
    3-D maps ``(N, 3, 4)`` over ``(N, C, D, H, W)``, as PyTorch's (``align_corners`` unset
    is False, with PyTorch's warning)."""
    t = _t("affine_grid", "theta", theta)
    if t.dtype.kind != "f":
        raise DTypeValueError(f"affine_grid: theta must be a float tensor, got {t.dtype}")
    align_corners = _default_align_corners("affine_grid", align_corners)
    nd = len(size) - 2
    if nd not in (2, 3):
        raise ShapeNotImplementedError(
            "affine_grid: size must be 4-D (N, C, H, W) for 2-D maps or 5-D (N, C, D, H, W) "
            f"for 3-D maps, got {tuple(size)}"
        )
    if t.ndim != 3 or tuple(t.shape[1:]) != (nd, nd + 1) or t.shape[0] != size[0]:
        raise ShapeError(
            f"affine_grid: theta (N, 2, 3) with size (N, C, H, W), or theta (N, 3, 4) with size "
            f"(N, C, D, H, W) expected, got {list(t.shape)} and {list(size)}"
        )

    def line(k: int) -> np.ndarray:
        if k == 1:
            return np.zeros(1)
        v = np.linspace(-1.0, 1.0, k)
        return v if align_corners else v * (k - 1) / k

    if nd == 3:
        n, _, d, h, w = (int(v) for v in size)
        zs, ys, xs = np.meshgrid(line(d), line(h), line(w), indexing="ij")
        base = np.stack([xs, ys, zs, np.ones_like(xs)], -1).reshape(1, d * h * w, 4)
        b = tensor(base, dtype=t.dtype.name, device=t.device)
        return (b @ t.transpose(1, 2)).reshape(n, d, h, w, 3)
    n, _, h, w = (int(v) for v in size)
    ys, xs = np.meshgrid(line(h), line(w), indexing="ij")
    base = np.stack([xs, ys, np.ones_like(xs)], -1).reshape(1, h * w, 3)
    b = tensor(base, dtype=t.dtype.name, device=t.device)
    return (b @ t.transpose(1, 2)).reshape(n, h, w, 2)


def _reflect_coordinates(t: Tensor, twice_low: float, twice_high: float) -> Tensor:
    """PyTorch's reflection of coordinates into ``[twice_low / 2, twice_high / 2]`` (the
    gradient flips sign on the mirrored stretches)."""
    if twice_low == twice_high:
        return t * 0.0
    low = twice_low / 2.0
    span = (twice_high - twice_low) / 2.0
    d = (t - low).abs()
    flips = (d.detach() / span).floor()
    extra = d - flips * span
    odd = (flips - 2.0 * (flips / 2.0).floor()) != 0
    return _core.where(odd, (span - extra) + low, extra + low)


def grid_sample(
    input: Tensor,
    grid: Tensor,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool | None = None,
) -> Tensor:
    """Samples ``input`` ``(N, C, H, W)`` at ``grid`` ``(N, Ho, Wo, 2)`` (x, y in ``[-1,
    1]``), or ``(N, C, D, H, W)`` at ``(N, Do, Ho, Wo, 3)`` (x, y, z): bilinear (trilinear
    on volumes), nearest or bicubic (tricubic on volumes), zeros, border or reflection padding, as
    PyTorch's (``align_corners`` unset is False, with PyTorch's warning). Differentiable in
    the input and (bilinear, bicubic) in the grid."""
    x = _t("grid_sample", "input", input)
    g = _t("grid_sample", "grid", grid)
    align_corners = _default_align_corners("grid_sample", align_corners)
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(
            f"grid_sample: mode must be 'bilinear', 'nearest' or 'bicubic', got {mode!r}"
        )
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(
            "grid_sample: padding_mode must be 'zeros', 'border' or 'reflection', got "
            f"{padding_mode!r}"
        )
    if x.dtype != g.dtype:
        raise DTypeError(
            f"grid_sample: input and grid must have the same dtype, got {x.dtype} and {g.dtype}"
        )
    k = x.ndim - 2
    if x.ndim not in (4, 5) or g.ndim != x.ndim or g.shape[-1] != k or g.shape[0] != x.shape[0]:
        raise ShapeError(
            "grid_sample: input (N, C, H, W) with grid (N, Ho, Wo, 2), or input "
            "(N, C, D, H, W) with grid (N, Do, Ho, Wo, 3) expected, got "
            f"{list(x.shape)} and {list(g.shape)}"
        )
    if min(x.shape[2:]) == 0:
        raise ShapeError(
            f"grid_sample: input must have non-empty spatial dimensions, got {list(x.shape)}"
        )
    if x.dtype.kind != "f":
        raise UnsupportedDTypeError(f"grid_sample: input must be a float tensor, got {x.dtype}")
    n, c = x.shape[0], x.shape[1]
    sizes = list(x.shape[2:])  # (H, W) or (D, H, W)
    out_sp = list(g.shape[1:-1])
    m = int(np.prod(out_sp))
    # the grid's last axis is (x, y[, z]): the component k-1-j indexes spatial axis j
    fs = []
    for j, size in enumerate(sizes):
        gj = g[..., k - 1 - j]
        if align_corners:
            fs.append((gj + 1.0) * ((size - 1) / 2.0))
        else:
            fs.append(((gj + 1.0) * size - 1.0) / 2.0)

    def bound(f: Tensor, size: int) -> Tensor:
        # PyTorch's compute_coordinates: clip (border) or reflect and clip (reflection); a
        # NaN position (a NaN grid value, or an infinite one reflected) lands on the first
        # pixel, as PyTorch documents ("NaN values in grid would be interpreted as -1")
        if padding_mode == "border":
            f = f.clamp(0.0, size - 1.0)
            return where(f.isnan(), 0.0, f)
        if padding_mode == "reflection":
            if align_corners:
                f = _reflect_coordinates(f, 0.0, 2.0 * (size - 1))
            else:
                f = _reflect_coordinates(f, -1.0, 2.0 * size - 1)
            f = f.clamp(0.0, size - 1.0)
            return where(f.isnan(), 0.0, f)
        return f

    # one row of C values per voxel (N*prod(sizes), C): every tap reads a whole row at once
    total = int(np.prod(sizes))
    rows = x.permute(0, *range(2, 2 + k), 1).reshape(n * total, c)
    base = tensor(np.arange(0, n * total, total, dtype=np.int64).reshape(n, 1), device=x.device)
    strides = [int(np.prod(sizes[j + 1 :])) for j in range(k)]

    def sample(taps: list[list[Tensor]], weights: list[Tensor]) -> Tensor:
        # every tap in one row selection: positions (N, taps * m), zero weight outside;
        # taps[t][j] is the (integer-valued) index along spatial axis j
        nt = len(taps)
        wt = _core.concat([t.reshape(n, m) for t in weights], 1)
        inside = None
        pos = None
        for j, size in enumerate(sizes):
            ij = _core.concat([tap[j].reshape(n, m) for tap in taps], 1)
            ok = (ij >= 0) & (ij <= size - 1)
            inside = ok if inside is None else inside & ok
            # (a NaN coordinate reads row 0 with weight 0: a NaN cast to an integer is not
            # the same number on every device)
            term = where(ij.isnan(), 0.0, ij.clamp(0.0, size - 1.0)) * float(strides[j])
            pos = term if pos is None else pos + term
        pos = pos.astype("int64") + base
        v = _core.index_select(rows, 0, pos.reshape(-1))  # (N * nt * m, C)
        wt = (wt * inside.astype(wt.dtype.name)).astype(x.dtype.name)
        out = (v * wt.reshape(n * nt * m, 1)).reshape(n, nt, m, c).sum(1)
        return out.permute(0, 2, 1).reshape(n, c, *out_sp)

    if mode == "nearest":
        # (round half to even, as PyTorch's nearbyint)
        fb = [bound(f, size).detach() for f, size in zip(fs, sizes)]
        out = sample([[f.round() for f in fb]], [_core.ones_like(fb[0])])
        if g.requires_grad:
            # the grid gets a zero gradient (not none), as PyTorch's; exact 0 even at inf
            zero = _core.zeros_like(g.detach())
            out = out + _core.where(zero != 0, g, zero).sum().astype(out.dtype.name)
        return out
    if mode == "bicubic":
        # PyTorch's bicubic: the unclipped position's 4x4 neighbours, each bounded on its
        # own (compute_coordinates); Keys' weights (a = -0.75) of the fractions
        a = -0.75
        lows = [f.detach().floor() for f in fs]
        coeffs = []
        for f, lo in zip(fs, lows):
            t = f - lo
            s = 1.0 - t
            coeffs.append(
                [
                    ((a * (t + 1.0) - 5.0 * a) * (t + 1.0) + 8.0 * a) * (t + 1.0) - 4.0 * a,
                    ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0,
                    ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0,
                    ((a * (s + 1.0) - 5.0 * a) * (s + 1.0) + 8.0 * a) * (s + 1.0) - 4.0 * a,
                ]
            )
        idx = [
            [bound(lo + float(i - 1), size).trunc() for i in range(4)]
            for lo, size in zip(lows, sizes)
        ]
        taps, weights = [], []
        for corner in itertools.product(range(4), repeat=k):
            taps.append([idx[j][i] for j, i in enumerate(corner)])
            w = coeffs[0][corner[0]]
            for j in range(1, k):
                w = w * coeffs[j][corner[j]]
            weights.append(w)
        return sample(taps, weights)
    fs = [bound(f, size) for f, size in zip(fs, sizes)]
    lows = [f.detach().floor() for f in fs]
    fr1 = [f - lo for f, lo in zip(fs, lows)]
    taps, weights = [], []
    for corner in range(2**k):
        bits = [(corner >> (k - 1 - j)) & 1 for j in range(k)]
        taps.append([lo + 1.0 if b else lo for lo, b in zip(lows, bits)])
        w = None
        for fr, b in zip(fr1, bits):
            wj = fr if b else 1.0 - fr
            w = wj if w is None else w * wj
        weights.append(w)
    return sample(taps, weights)


__all__ += ["affine_grid", "grid_sample"]


# ------------------------------------------- thresholds, shrinkage, in-place forms, extras


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``input`` where it is above ``threshold``, else ``value``. An integer ``input`` keeps
    its dtype: ``threshold`` and ``value`` are cast to it first (truncated toward 0), as
    PyTorch's."""
    x = _t("threshold", "input", input)
    if x.dtype.kind in ("i", "u"):
        t, v = int(threshold), int(value)
        out = _core.where(x <= t, _core.zeros_like(x) + v, x)
        return _write_into(x, out) if inplace else out
    x = _float("threshold", "input", x)
    # PyTorch's test is ``x <= threshold``: NaN passes through (with its gradient), and the
    # replacement is a constant (``x * 0 + value`` would be NaN at +-inf)
    out = _core.where(x <= threshold, _core.zeros_like(x) + value, x)
    return _write_into(x, out) if inplace else out


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``input`` where ``|input| > lambd``, else 0."""
    x = _float("hardshrink", "input", input)
    return _core.where((x > lambd) | (x < -lambd), x, x * 0.0)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``input`` moved toward 0 by ``lambd`` (0 within ``[-lambd, lambd]``)."""
    x = _float("softshrink", "input", input)
    if lambd < 0:
        raise ArgumentRuntimeError(f"softshrink: lambd must be non-negative, got {lambd}")
    return _core.where(x > lambd, x - lambd, _core.where(x < -lambd, x + lambd, x * 0.0))


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``max(0, x) + weight * min(0, x)``, ``weight`` one value or one per channel (axis 1)."""
    x = _float("prelu", "input", input)
    w = _float("prelu", "weight", weight)
    if w.numel() == 1:
        w = w.reshape(())  # the output keeps the input's shape (0-d included), as PyTorch's
    else:
        if x.ndim < 2 or x.shape[1] != w.numel():
            raise ShapeError(
                f"prelu: weight of {w.numel()} values for input of shape {list(x.shape)} "
                "(expected one per channel on axis 1)"
            )
        w = w.reshape(1, w.numel(), *([1] * (x.ndim - 2)))
    return _core.where(x >= 0, x, w * x)


def _inplace_form(fn: Any, name: str) -> Any:
    def method(input: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        kwargs.pop("inplace", None)
        input.copy_(fn(input, *args, **kwargs))
        return input

    method.__name__ = name
    method.__doc__ = f"``{fn.__name__}`` written into ``input``; returns ``input``."
    return method


relu_ = _inplace_form(relu, "relu_")
elu_ = _inplace_form(elu, "elu_")
selu_ = _inplace_form(selu, "selu_")
celu_ = _inplace_form(celu, "celu_")
leaky_relu_ = _inplace_form(leaky_relu, "leaky_relu_")
hardtanh_ = _inplace_form(hardtanh, "hardtanh_")
threshold_ = _inplace_form(threshold, "threshold_")


def gumbel_softmax(
    logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10, dim: int = -1
) -> Tensor:
    """A sample of the Gumbel-softmax distribution over ``dim``; with ``hard``, one-hot
    samples whose gradient is the soft sample's (straight-through)."""
    x = _float("gumbel_softmax", "logits", logits)
    if tau <= 0:
        raise ValueError(f"gumbel_softmax: tau must be positive, got {tau}")
    from .. import rand_like

    u = rand_like(x)
    g = -(-(u + eps).log() + eps).log()
    y = softmax((x + g) / tau, dim)
    if not hard:
        return y
    d = dim % x.ndim
    idx = y.detach().argmax(d, True)
    y_hard = _core.zeros_like(y.detach()).scatter(d, idx, 1.0)
    return y_hard - y.detach() + y


def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """The ``p``-norm distances between every pair of rows ``i < j`` of an ``(N, M)`` input,
    row-major (``N (N - 1) / 2`` values)."""
    x = _float("pdist", "input", input)
    if x.ndim != 2:
        raise ShapeError(f"pdist: input must be (N, M), got {list(x.shape)}")
    if not p >= 0:
        raise ArgumentRuntimeError(f"pdist: p must be non-negative, got {p}")
    if x.shape[1] == 0:
        # no features: every distance is 0 (the inf-norm's max over nothing included)
        p = 1.0
    n = x.shape[0]
    i, j = np.triu_indices(n, 1)
    # fewer than two rows: an empty gather of x, so the (empty) result is on x's graph
    a = _core.index_select(x, 0, tensor(i.astype(np.int64), device=x.device))
    b = _core.index_select(x, 0, tensor(j.astype(np.int64), device=x.device))
    from .._torch_compat import _pairwise_norm

    return _pairwise_norm(a - b, p, 1)


def upsample(
    input: Tensor,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: Any = None,
) -> Tensor:
    """``interpolate`` (PyTorch's older name)."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    return interpolate(input, size, scale_factor, "nearest")


def upsample_bilinear(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """Bilinear upsampling with ``align_corners=True``, as PyTorch's ``upsample_bilinear``."""
    return interpolate(input, size, scale_factor, "bilinear", True)


def dropout1d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zeroes whole channels of ``(N, C, L)`` (or ``(C, L)``) with probability ``p``."""
    x = _float("dropout1d", "input", input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout1d: dropout probability has to be between 0 and 1, but got {p}")
    if x.ndim not in (2, 3):
        raise ShapeError(f"dropout1d: input must be (N, C, L) or (C, L), got {list(x.shape)}")
    if x.ndim == 2:
        out = _feature_dropout(x.unsqueeze(0), p, training).squeeze(0)
    else:
        out = _feature_dropout(x, p, training)
    if inplace and out is not x:
        input.copy_(out)
        return input
    return out


_SELU_ALPHA_PRIME = -1.7580993408473766  # -scale * alpha of SELU


def alpha_dropout(
    input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False
) -> Tensor:
    """Dropout that keeps SELU's zero mean and unit variance: dropped entries take SELU's
    negative saturation value, then an affine map restores the moments. ``inplace`` writes
    the result into ``input`` and returns it."""
    x = _float("alpha_dropout", "input", input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"alpha_dropout: p must lie in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        out = x * 0.0
    else:
        from .. import bernoulli, full

        keep = bernoulli(full(list(x.shape), 1.0 - p, dtype=x.dtype.name, device=x.device))
        a = ((1.0 - p) * (1.0 + p * _SELU_ALPHA_PRIME**2)) ** -0.5
        b = -a * _SELU_ALPHA_PRIME * p
        out = (x * keep + (1.0 - keep) * _SELU_ALPHA_PRIME) * a + b
    if inplace:
        x.copy_(out)
        return x
    return out


def local_response_norm(
    input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0
) -> Tensor:
    """Normalises each channel by the squares of its ``size`` neighbouring channels:
    ``x / (k + alpha / size * sum x^2) ** beta``."""
    x = _float("local_response_norm", "input", input)
    if x.ndim < 3:
        raise ShapeError(
            f"local_response_norm: input must be (N, C, ...), got shape {list(x.shape)}"
        )
    if size < 1:
        raise ValueError(f"local_response_norm: size must be positive, got {size}")
    c = x.shape[1]
    sq = x * x
    lo, hi = size // 2, (size - 1) // 2
    zeros = [
        _core.zeros((x.shape[0], n, *x.shape[2:]), dtype=x.dtype.name, device=x.device)
        for n in (lo, hi)
    ]
    padded = _core.concat([t for t in (zeros[0], sq, zeros[1]) if t.shape[1] > 0], 1)
    total = padded.narrow(1, 0, c)
    for s in range(1, size):
        total = total + padded.narrow(1, s, c)
    return x / (total * (alpha / size) + k) ** beta


def multilabel_soft_margin_loss(
    input: Tensor, target: Tensor, weight: Tensor | None = None, reduction: str = "mean"
) -> Tensor:
    """Per-class logistic loss averaged over the classes (the last axis)."""
    x = _float("multilabel_soft_margin_loss", "input", input)
    t = _t("multilabel_soft_margin_loss", "target", target)
    if t.dtype.kind != "f":
        t = t.astype(x.dtype.name)
    # (a float target of another dtype promotes with the input's log-sigmoids, as PyTorch:
    # casting a float64 target down to a float32 input lost its precision)
    loss = -(t * logsigmoid(x) + (1.0 - t) * logsigmoid(-x))
    if weight is not None:
        loss = loss * weight
    return _reduce("multilabel_soft_margin_loss", loss.mean(axis=-1), reduction)


def multi_margin_loss(
    input: Tensor,
    target: Tensor,
    p: int = 1,
    margin: float = 1.0,
    weight: Tensor | None = None,
    reduction: str = "mean",
) -> Tensor:
    """Multi-class hinge loss: ``sum_{i != y} max(0, margin - x[y] + x[i]) ** p / C`` per
    sample (``p`` 1 or 2), the term scaled by ``weight[y]`` when given."""
    x = _float("multi_margin_loss", "input", input)
    if x.ndim == 0:
        # a 0-d input is one sample of one class (PyTorch's; its loss is 0)
        x = x.reshape(1)
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: p must be 1 or 2, got {p}")
    op = "multi_margin_loss"
    t = _t(op, "target", target)
    if t.dtype.kind not in "iu":
        raise DTypeError(f"{op}: target must hold int class indices, got {t.dtype}")
    if x.ndim > 2:
        raise ShapeError(f"{op}: input must be (C,) or (N, C), got shape {list(x.shape)}")
    x2 = x.reshape(1, -1) if x.ndim == 1 else x
    n, c = x2.shape
    if t.ndim > 1 or t.numel() != n:
        raise ShapeError(
            f"{op}: target must be 1-D with one class index per sample ({n}), got shape "
            f"{list(t.shape)}"
        )
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != c):
        raise ArgumentRuntimeError(
            f"{op}: inconsistent weight size, expected one entry for each of the {c} classes "
            f"(shape [{c}]), got shape {list(weight.shape)}"
        )
    if not _core._tracing() and t.numel():
        lo, hi = int(t.min().item()), int(t.max().item())
        if lo < 0 or hi >= c:
            bad = lo if lo < 0 else hi
            raise IndexRuntimeError(f"{op}: target out of range: {bad} for {c} classes")
    y = t.reshape(-1, 1).astype("int64")
    picked = gather(x2, 1, y)
    terms = (x2 - picked + margin).clamp(min=0.0)
    if p == 2:
        terms = terms * terms
    if weight is not None:
        terms = terms * gather(weight.reshape(1, -1), 1, y.reshape(1, -1)).reshape(-1, 1)
    classes = tensor(np.arange(x2.shape[1]).reshape(1, -1), device=x.device)
    terms = _core.where(classes == y, terms * 0.0, terms)
    loss = terms.sum(axis=1) / x2.shape[1]
    if x.ndim == 1 and t.ndim == 0:
        loss = loss.reshape(())  # (a 1-element target keeps its axis, as PyTorch's)
    return _reduce("multi_margin_loss", loss, reduction)


__all__ += [
    "alpha_dropout",
    "celu_",
    "dropout1d",
    "elu_",
    "gumbel_softmax",
    "hardshrink",
    "hardtanh_",
    "leaky_relu_",
    "local_response_norm",
    "multi_margin_loss",
    "multilabel_soft_margin_loss",
    "pdist",
    "prelu",
    "relu_",
    "selu_",
    "softshrink",
    "threshold",
    "threshold_",
    "upsample",
    "upsample_bilinear",
    "upsample_nearest",
]


# ------------------------------------------------------- pooling with indices and unpooling


def _skip_padding(idx: Tensor, table: np.ndarray, pad: int) -> Tensor:
    """``idx`` with each padding position ``pad`` replaced by its window's first input
    position. A window whose inputs are all -inf ties with its padding, and argmax may pick
    the padding; PyTorch reports the first input there (and the value must be gathered
    from the input, not from past its end)."""
    valid = table != pad
    first = np.take_along_axis(table, valid.argmax(-1)[..., None], -1)[..., 0]
    first = tensor(first.reshape(-1, idx.shape[-1]), device=idx.device)
    return where(idx == pad, first, idx)


def _window_max(x: Tensor, rows: np.ndarray, cols: np.ndarray) -> tuple[Tensor, Tensor]:
    """The max of ``x`` (``(..., H, W)``) over separable windows, with its flat position
    ``h * W + w`` (int64). ``rows`` ``(OH, KH)`` and ``cols`` ``(OW, KW)`` list the input rows
    and columns of each window, -1 for padding. The value is gathered at that position, so
    its gradient reaches that one input, as PyTorch's."""
    h, w = x.shape[-2], x.shape[-1]
    lead = list(x.shape[:-2])
    oh, ow = rows.shape[0], cols.shape[0]
    k = rows.shape[1] * cols.shape[1]
    table = rows[:, None, :, None] * w + cols[None, :, None, :]
    table[(rows[:, None, :, None] < 0) | (cols[None, :, None, :] < 0)] = h * w
    table = table.reshape(oh * ow, k)
    b = int(np.prod(lead)) if lead else 1
    flat = x.reshape(b, h * w)
    sentinel = _core.full((b, 1), -math.inf, dtype=x.dtype.name, device=x.device)
    padded = _core.concat([flat.detach(), sentinel], 1)
    t = tensor(table.reshape(-1), device=x.device)
    win = _core.index_select(padded, 1, t).reshape(b, oh * ow, k)
    kstar = win.argmax(2)  # the first maximum of each window
    base = tensor((np.arange(oh * ow, dtype=np.int64) * k).reshape(1, -1), device=x.device)
    idx = _core.index_select(t, 0, (kstar + base).reshape(-1)).reshape(b, oh * ow)
    idx = _skip_padding(idx, table, h * w)
    y = flat.gather(1, idx)
    return y.reshape(*lead, oh, ow), idx.reshape(*lead, oh, ow)


def _pool_input(op: str, input: Any) -> Tensor:
    """A pool's input: a float tensor, or an int one (max pools take those, as PyTorch's)."""
    x = _t(op, "input", input)
    if x.dtype.kind not in "fiu" or x.dtype.name == "bool":
        raise DTypeError(f"{op}: input must be a float or int tensor, got {x.dtype}")
    return x


def avg_pool2d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """2-D average pooling of ``(N, C, H, W)`` (or ``(C, H, W)``), PyTorch's windows and
    divisors."""
    x = _t("avg_pool2d", "input", input)
    if x.ndim in (3, 4):
        _check_pool_input("avg_pool2d", x, 2)
        # one-entry lists ([3], padding=[1]) as two, as PyTorch's
        kernel_size, stride, padding, _ = _check_pool_args(
            "avg_pool2d", 2, kernel_size, stride, padding
        )
    if (
        isinstance(divisor_override, (int, np.integer))
        and not isinstance(divisor_override, bool)
        and divisor_override < 0
    ):
        # PyTorch divides by a negative divisor_override as given (only 0 is refused)
        return -_avg_pool2d(
            x, kernel_size, stride, padding, ceil_mode, count_include_pad, -int(divisor_override)
        )
    return _avg_pool2d(
        x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


def _pool_axis(op: str, n: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> np.ndarray:
    """The ``(n_out, k)`` input positions of each window along one axis (-1 for padding)."""
    if k <= 0 or s <= 0 or d <= 0 or p < 0:
        raise ValueError(
            f"{op}: kernel_size, stride and dilation must be positive and padding non-negative, "
            f"got kernel_size {k}, stride {s}, padding {p}, dilation {d}"
        )
    if p > k // 2:
        raise ValueError(f"{op}: padding {p} must be at most half of kernel_size {k}")
    span = n + 2 * p - d * (k - 1) - 1
    if span < 0:
        raise ShapeError(
            f"{op}: an input of size {n} is smaller than the kernel ({k}, dilation {d})"
        )
    n_out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (n_out - 1) * s >= n + p:
        n_out -= 1
    pos = np.arange(n_out)[:, None] * s - p + np.arange(k)[None, :] * d
    pos[(pos < 0) | (pos >= n)] = -1
    return pos.astype(np.int64)


def _max_pool_indices(
    op: str, x: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool
) -> tuple[Tensor, Tensor]:
    kh, kw = (int(v) for v in _pair(op, "kernel_size", kernel_size))
    if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0):
        sh, sw = kh, kw
    else:
        sh, sw = (int(v) for v in _pair(op, "stride", stride))
    ph, pw = (int(v) for v in _pair(op, "padding", padding))
    dh, dw = (int(v) for v in _pair(op, "dilation", dilation))
    rows = _pool_axis(op, x.shape[-2], kh, sh, ph, dh, ceil_mode)
    cols = _pool_axis(op, x.shape[-1], kw, sw, pw, dw, ceil_mode)
    return _window_max(x, rows, cols)


def max_pool2d_with_indices(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> tuple[Tensor, Tensor]:
    """2-D max pooling of ``(N, C, H, W)`` (or ``(C, H, W)``) and the flat position
    ``h * W + w`` (int64) of each maximum within its channel."""
    x = _pool_input("max_pool2d", input)
    if x.ndim not in (3, 4):
        raise ShapeError(
            f"max_pool2d: input must be (N, C, H, W) or (C, H, W), got {list(x.shape)}"
        )
    _check_pool_input("max_pool2d", x, 2)
    # one-entry lists ([3], padding=[1]) as two, as PyTorch's
    kernel_size, stride, padding, dilation = _check_pool_args(
        "max_pool2d", 2, kernel_size, stride, padding, dilation
    )
    if x.dtype.kind in "iu":  # PyTorch pools int tensors too: exact in float64
        y, idx = max_pool2d_with_indices(
            x.astype("float64"), kernel_size, stride, padding, dilation, ceil_mode
        )
        return y.astype(x.dtype.name), idx
    return _max_pool_indices("max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """2-D max pooling of ``(N, C, H, W)`` (or ``(C, H, W)``); with ``return_indices``, the
    pair ``(output, indices)`` of :func:`max_pool2d_with_indices`."""
    x = _pool_input("max_pool2d", input)
    if return_indices:
        return max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode)
    if x.ndim in (3, 4):
        _check_pool_input("max_pool2d", x, 2)
        # one-entry lists ([3], padding=[1]) as two, as PyTorch's
        kernel_size, stride, padding, dilation = _check_pool_args(
            "max_pool2d", 2, kernel_size, stride, padding, dilation
        )
    if x.dtype.kind in "iu":  # PyTorch pools int tensors too: exact in float64
        y = max_pool2d(x.astype("float64"), kernel_size, stride, padding, dilation, ceil_mode)
        return y.astype(x.dtype.name)
    if x.ndim == 3:
        return _max_pool2d(x.unsqueeze(0), kernel_size, stride, padding, dilation, ceil_mode)[0]
    return _max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool1d_with_indices(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> tuple[Tensor, Tensor]:
    """1-D max pooling of ``(N, C, L)`` and the position of each maximum along ``L``."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def _unpool_size(
    op: str, in_size: list[int], k: list[int], s: list[int], p: list[int], output_size: Any
) -> list[int]:
    default = [(n - 1) * si - 2 * pi + ki for n, ki, si, pi in zip(in_size, k, s, p)]
    if output_size is None:
        return default
    size = [int(v) for v in output_size]
    nd = len(k)
    if len(size) in (nd + 1, nd + 2):
        size = size[-nd:]
    if len(size) != nd:
        raise ValueError(
            f"{op}: output_size must have {nd} (or {nd + 1} or {nd + 2}) entries, got "
            f"{list(output_size)}"
        )
    for d in range(nd):
        if not default[d] - s[d] < size[d] < default[d] + s[d]:
            raise ValueError(
                f"{op}: output_size {size} is out of range: each size must lie strictly "
                f"between {[a - b for a, b in zip(default, s)]} and "
                f"{[a + b for a, b in zip(default, s)]}"
            )
    return size


def _unpool(
    op: str,
    input: Tensor,
    indices: Tensor,
    nd: int,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    output_size: Any,
) -> Tensor:
    x = _float(op, "input", input)
    idx = _t(op, "indices", indices)
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"{op}: indices must be an int tensor, got {idx.dtype}")
    if tuple(idx.shape) != tuple(x.shape):
        raise ShapeError(
            f"{op}: indices of shape {list(idx.shape)} and input of shape {list(x.shape)} differ"
        )
    if x.ndim not in (nd + 1, nd + 2):
        dims = {
            1: "(N, C, L) or (C, L)",
            2: "(N, C, H, W) or (C, H, W)",
            3: "(N, C, D, H, W) or (C, D, H, W)",
        }[nd]
        raise ShapeError(f"{op}: input must be {dims}, got {list(x.shape)}")

    def tup(name: str, v: Any) -> list[int]:
        return list(_ints(op, name, v, nd))

    k = tup("kernel_size", kernel_size)
    s = k if stride is None else tup("stride", stride)
    p = tup("padding", padding)
    size = _unpool_size(op, list(x.shape[-nd:]), k, s, p, output_size)
    total = int(np.prod(size))
    lead = list(x.shape[:-nd])
    b = int(np.prod(lead))
    flat_idx = idx.reshape(b, int(np.prod(x.shape[-nd:])))
    if flat_idx.dtype.name != "int64":
        flat_idx = flat_idx.astype("int64")
    if idx.device != x.device:
        flat_idx = flat_idx.to(x.device)
    if not _core._tracing() and flat_idx.numel():
        lo, hi = int(flat_idx.min().item()), int(flat_idx.max().item())
        if lo < 0 or hi >= total:
            bad = lo if lo < 0 else hi
            raise IndexRuntimeError(
                f"{op}: indices must lie in [0, {total}): Found an invalid max index: {bad} "
                f"(output volumes are of size {'x'.join(map(str, size))})"
            )
    fn = _Unpool()
    fn.total, fn.idx = total, flat_idx
    return fn(x.reshape(b, flat_idx.shape[1])).reshape(*lead, *size)


class _Unpool(_EngineFunction):
    """Each value of ``x`` ``(B, P)`` written at its flat position ``idx`` of a zero
    ``(B, total)`` output (with duplicate positions the last write stays, as PyTorch's
    sequential CPU kernel); the gradient is PyTorch's: the output's gradient gathered at
    ``idx``, so every input whose index points at a position gets that position's
    gradient."""

    total: int
    idx: Tensor

    def forward(self, x: Tensor) -> Tensor:
        out = _core.zeros((x.shape[0], self.total), dtype=x.dtype.name, device=x.device)
        return out.scatter(1, self.idx, x)

    def backward(self, g: Tensor | None) -> Any:
        if g is None:
            return None
        return gather(g, 1, self.idx)


def max_unpool2d(
    input: Tensor,
    indices: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    output_size: Any = None,
) -> Tensor:
    """The partial inverse of :func:`max_pool2d`: each value of ``input`` written at its flat
    position ``indices`` (per channel) of a zero ``(N, C, H_out, W_out)`` output, whose size
    is ``(H - 1) * stride - 2 * padding + kernel_size`` unless ``output_size`` is given."""
    return _unpool("max_unpool2d", input, indices, 2, kernel_size, stride, padding, output_size)


def max_unpool1d(
    input: Tensor,
    indices: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    output_size: Any = None,
) -> Tensor:
    """The partial inverse of :func:`max_pool1d` (see :func:`max_unpool2d`)."""
    return _unpool("max_unpool1d", input, indices, 1, kernel_size, stride, padding, output_size)


def max_unpool3d(
    input: Tensor,
    indices: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    output_size: Any = None,
) -> Tensor:
    """The partial inverse of ``max_pool3d`` (see :func:`max_unpool2d`): ``indices`` are
    the flat ``d * H * W + h * W + w`` positions within each channel."""
    return _unpool("max_unpool3d", input, indices, 3, kernel_size, stride, padding, output_size)


def _window_max_nd(x: Tensor, table: np.ndarray) -> tuple[Tensor, Tensor]:
    """The max of ``x`` ``(B, P)`` over windows ``table`` ``(B or 1, n_out, k)`` of flat
    positions (``P`` marks a padding position), and the flat position of each window's
    first maximum; the value is gathered there, so the gradient goes there alone."""
    b = x.shape[0]
    n_out, k = table.shape[1], table.shape[2]
    sentinel = _core.full((b, 1), -math.inf, dtype=x.dtype.name, device=x.device)
    padded = _core.concat([x.detach(), sentinel], 1)
    t = tensor(np.broadcast_to(table, (b, n_out, k)).reshape(b, n_out * k), device=x.device)
    win = padded.gather(1, t).reshape(b, n_out, k)
    kstar = win.argmax(2)  # the first maximum of each window
    idx = t.reshape(b, n_out, k).gather(2, kstar.unsqueeze(2)).reshape(b, n_out)
    idx = _skip_padding(idx, table, x.shape[1])
    return x.gather(1, idx), idx


def _windows_table(positions: list[np.ndarray], sizes: list[int]) -> np.ndarray:
    """``(n_out, k)`` flat positions of the product of per-axis windows ``positions[i]``
    ``(n_out_i, k_i)`` (-1 for padding) in an input of spatial ``sizes``; padding
    positions become ``prod(sizes)``."""
    nd = len(positions)
    total = int(np.prod(sizes))
    strides = [int(np.prod(sizes[i + 1 :])) for i in range(nd)]
    flat = np.zeros([1] * (2 * nd), dtype=np.int64)
    bad = np.zeros([1] * (2 * nd), dtype=bool)
    for i, pos in enumerate(positions):
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = pos.shape
        p = pos.reshape(shape)
        flat = flat + p * strides[i]
        bad = bad | (p < 0)
    flat = np.where(bad, total, flat)
    n_out = int(np.prod([p.shape[0] for p in positions]))
    k = int(np.prod([p.shape[1] for p in positions]))
    return flat.reshape(n_out, k)


def _pool_nd_indices(x: Tensor, positions: list[np.ndarray]) -> tuple[Tensor, Tensor]:
    """Max pooling of ``x`` ``(..., *spatial)`` over the per-axis windows ``positions``,
    with PyTorch's flat per-channel indices."""
    nd = len(positions)
    sizes = list(x.shape[-nd:])
    lead = list(x.shape[:-nd])
    table = _windows_table(positions, sizes)
    b = int(np.prod(lead)) if lead else 1
    y, idx = _window_max_nd(x.reshape(b, int(np.prod(sizes))), table[None])
    out = [p.shape[0] for p in positions]
    return y.reshape(*lead, *out), idx.reshape(*lead, *out)


def _fractional_intervals(sample: np.ndarray, n_in: int, n_out: int, k: int) -> np.ndarray:
    """PyTorch's ``generate_intervals``: the start of each of ``n_out`` pooling windows of
    size ``k`` over ``n_in``, for the samples ``sample`` (any shape, in [0, 1)), computed in
    the samples' dtype as PyTorch's kernel does. Returns ``sample.shape + (n_out,)``."""
    dt = sample.dtype.type
    out = np.empty((*sample.shape, n_out), dtype=np.int64)
    if n_out > 1:
        alpha = dt(n_in - k) / dt(n_out - 1)
        i = np.arange(n_out - 1, dtype=sample.dtype)
        a = ((i + sample[..., None]) * alpha).astype(sample.dtype)
        b = (sample * alpha).astype(sample.dtype)
        out[..., :-1] = np.trunc(a).astype(np.int64) - np.trunc(b).astype(np.int64)[..., None]
    out[..., -1] = n_in - k
    return out


def _fractional_max_pool(
    op: str,
    nd: int,
    input: Tensor,
    kernel_size: Any,
    output_size: Any,
    output_ratio: Any,
    return_indices: bool,
    _random_samples: Tensor | None,
) -> Any:
    x = _float(op, "input", input)
    if x.ndim not in (nd + 1, nd + 2):
        raise ShapeError(
            f"{op}: input must be {nd + 1}-D or {nd + 2}-D (batch mode), got {list(x.shape)}"
        )
    unbatched = x.ndim == nd + 1
    if unbatched:
        x = x.unsqueeze(0)
    _check_pool_input(op, x, nd)
    k = _ints(op, "kernel_size", kernel_size, nd)
    if any(v <= 0 for v in k):
        raise ShapeError(f"{op}: kernel_size must be greater than zero, got {list(k)}")
    spatial = list(x.shape[2:])
    if output_size is None:
        if output_ratio is None:
            raise ValueError(f"{op} requires specifying either an output_size or an output_ratio")
        ratio = output_ratio if isinstance(output_ratio, (list, tuple)) else (output_ratio,) * nd
        if len(ratio) != nd:
            raise ValueError(f"{op}: output_ratio must have {nd} entries, got {output_ratio!r}")
        out = tuple(int(n * float(r)) for n, r in zip(spatial, ratio))
    else:
        out = _ints(op, "output_size", output_size, nd)
    for i in range(nd):
        if out[i] < 0:
            raise ShapeError(f"{op}: output_size must be non-negative, got {list(out)}")
        if out[i] + k[i] - 1 > spatial[i]:
            raise ShapeError(
                f"{op}: kernel_size {k[i]} too large relative to input size {spatial[i]} "
                f"for output size {out[i]} (axis {i}): output_size + kernel_size - 1 must be "
                "at most the input size"
            )
    n, c = x.shape[0], x.shape[1]
    if _random_samples is None:
        from .._ops import rand

        samples = rand(n, c, nd, dtype=x.dtype.name, device=x.device)
    else:
        samples = _t(op, "_random_samples", _random_samples)
        # (as PyTorch, more rows than the batch are accepted: the first ones are used)
        if samples.ndim != 3 or tuple(samples.shape[1:]) != (c, nd) or samples.shape[0] < n:
            raise ShapeError(
                f"{op}: _random_samples must have shape {[n, c, nd]}, got {list(samples.shape)}"
            )
        samples = samples[:n]
    if n * c == 0 or 0 in out:
        # nothing to pool (PyTorch gives the empty result); still a function of the input
        y = x.reshape(-1)[:0].reshape(n, c, *out)
        idx = _core.zeros((n, c, *out), dtype="int64", device=x.device)
        if unbatched:
            y, idx = y.squeeze(0), idx.squeeze(0)
        return (y, idx) if return_indices else y
    smp = samples.detach().numpy()
    if smp.dtype not in (np.float32, np.float64):
        smp = smp.astype(np.float32 if x.dtype.name != "float64" else np.float64)
    # PyTorch's sample order: (W, H) for 2-D, (T, H, W) for 3-D
    axis_sample = [1, 0] if nd == 2 else list(range(nd))
    starts = [
        _fractional_intervals(smp[:, :, axis_sample[i]], spatial[i], out[i], k[i])
        for i in range(nd)
    ]
    # per (n, c): windows over the product of the axes
    tables = []
    for i in range(nd):
        pos = starts[i][..., None] + np.arange(k[i])  # (n, c, out_i, k_i)
        shape = [n * c] + [1] * (2 * nd)
        shape[1 + i], shape[1 + nd + i] = out[i], k[i]
        stride = int(np.prod(spatial[i + 1 :]))
        tables.append(pos.reshape(shape) * stride)
    table = sum(tables[1:], tables[0])
    table = np.broadcast_to(table, [n * c, *out, *k]).reshape(n * c, int(np.prod(out)), -1)
    y, idx = _window_max_nd(x.reshape(n * c, int(np.prod(spatial))), table)
    y, idx = y.reshape(n, c, *out), idx.reshape(n, c, *out)
    if unbatched:
        y, idx = y.squeeze(0), idx.squeeze(0)
    return (y, idx) if return_indices else y


def fractional_max_pool2d(
    input: Tensor,
    kernel_size: Any,
    output_size: Any = None,
    output_ratio: Any = None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
) -> Any:
    """Fractional max pooling of ``(N, C, H, W)`` (or ``(C, H, W)``), PyTorch's windows:
    pseudo-random window starts from ``_random_samples`` ``(N, C, 2)`` in [0, 1) (drawn
    when not given); ``output_size`` or ``output_ratio`` sets the output size."""
    return _fractional_max_pool(
        "fractional_max_pool2d", 2, input, kernel_size, output_size, output_ratio,
        return_indices, _random_samples,
    )  # fmt: skip


def fractional_max_pool3d(
    input: Tensor,
    kernel_size: Any,
    output_size: Any = None,
    output_ratio: Any = None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
) -> Any:
    """Fractional max pooling of ``(N, C, T, H, W)`` (or ``(C, T, H, W)``); see
    :func:`fractional_max_pool2d` (``_random_samples`` is ``(N, C, 3)``)."""
    return _fractional_max_pool(
        "fractional_max_pool3d", 3, input, kernel_size, output_size, output_ratio,
        return_indices, _random_samples,
    )  # fmt: skip


def fractional_max_pool2d_with_indices(
    input: Tensor,
    kernel_size: Any,
    output_size: Any = None,
    output_ratio: Any = None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """:func:`fractional_max_pool2d` and its indices."""
    return fractional_max_pool2d(
        input, kernel_size, output_size, output_ratio, True, _random_samples
    )


def fractional_max_pool3d_with_indices(
    input: Tensor,
    kernel_size: Any,
    output_size: Any = None,
    output_ratio: Any = None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """:func:`fractional_max_pool3d` and its indices."""
    return fractional_max_pool3d(
        input, kernel_size, output_size, output_ratio, True, _random_samples
    )


__all__ += [
    "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d_with_indices",
    "fractional_max_pool2d",
    "fractional_max_pool3d",
    "max_pool1d_with_indices",
    "max_pool2d_with_indices",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
]


# ------------------------------------------------------------------ more layers' functions


def rrelu(
    input: Tensor,
    lower: float = 1.0 / 8.0,
    upper: float = 1.0 / 3.0,
    training: bool = False,
    inplace: bool = False,
) -> Tensor:
    """Randomised leaky ReLU: negative entries are scaled by a slope drawn uniformly from
    ``[lower, upper]`` per entry while ``training`` (from ``fg.manual_seed``'s stream), by
    ``(lower + upper) / 2`` otherwise."""
    x = _float("rrelu", "input", input)
    lower, upper = float(lower), float(upper)
    if not lower <= upper:
        raise ArgumentRuntimeError(f"rrelu: lower ({lower}) must not exceed upper ({upper})")
    if training:
        u = _traced_draw(x.shape, x.device, x.dtype.name, False)
        slope = u * (upper - lower) + lower
        out = where(x >= 0, x, x * slope)
    else:
        out = where(x >= 0, x, x * ((lower + upper) / 2.0))
    if inplace:
        x.copy_(out)
        return x
    return out


def rrelu_(
    input: Tensor, lower: float = 1.0 / 8.0, upper: float = 1.0 / 3.0, training: bool = False
) -> Tensor:
    """:func:`rrelu` written into ``input``; returns ``input``."""
    return rrelu(input, lower, upper, training, True)


def lp_pool2d(
    input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
) -> Tensor:
    """Power-average pooling: ``(sum over the window of x ** norm_type) ** (1 / norm_type)``
    over ``(N, C, H, W)`` (or ``(C, H, W)``); ``norm_type`` ``inf`` takes each window's
    largest ``|x|``, ``-inf`` its smallest."""
    x = _float("lp_pool2d", "input", input)
    if x.ndim not in (3, 4):
        raise ShapeError(f"lp_pool2d: input must be (N, C, H, W) or (C, H, W), got {list(x.shape)}")
    p = _lp_norm_type("lp_pool2d", norm_type)
    _check_pool_input("lp_pool2d", x, 2)
    (kh, kw), s, _, _ = _check_pool_args("lp_pool2d", 2, kernel_size, stride, 0)
    x4 = x.unsqueeze(0) if x.ndim == 3 else x
    if math.isinf(p):
        y = _lp_extreme(max_pool2d, x4, p, (kh, kw), s, ceil_mode)
    else:
        y = _lp_root(avg_pool2d(x4**p, (kh, kw), s, 0, ceil_mode) * float(kh * kw), p)
    return y[0] if x.ndim == 3 else y


def _lp_norm_type(op: str, norm_type: Any) -> float:
    p = float(norm_type)
    if p == 0.0 or math.isnan(p):
        raise ValueError(f"{op}: norm_type must be a non-zero number, got {norm_type}")
    return p


def _lp_extreme(pool: Any, x: Tensor, p: float, kernel: Any, stride: Any, ceil: bool) -> Tensor:
    """Power pooling's limits: the largest ``|x|`` of each window for ``p = inf``, the
    smallest for ``p = -inf``."""
    if p > 0:
        return pool(x.abs(), kernel, stride, 0, 1, ceil)
    return -pool(-x.abs(), kernel, stride, 0, 1, ceil)


def _lp_root(total: Tensor, p: float) -> Tensor:
    """``total ** (1 / p)`` for power pooling. A window whose powers sum to 0 (all zeros)
    gives ``0 ** (1 / p)`` with zero gradient, as PyTorch: the root's slope is infinite
    there, and without the mask an all-zero window (common after a ReLU) puts NaN in the
    input's gradient."""
    zero = total == 0
    root = where(zero, 1.0, total) ** (1.0 / p)
    return where(zero, 0.0 if p > 0 else math.inf, root)


def lp_pool1d(
    input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
) -> Tensor:
    """1-D :func:`lp_pool2d` of ``(N, C, L)`` (or ``(C, L)``)."""
    x = _pool1d("lp_pool1d", input)
    _check_pool_input("lp_pool1d", x, 1)
    (k,), (s,), _, _ = _check_pool_args("lp_pool1d", 1, kernel_size, stride, 0)
    return lp_pool2d(x.unsqueeze(-2), norm_type, (1, k), (1, s), ceil_mode).squeeze(-2)


def embedding_bag(
    input: Tensor,
    weight: Tensor,
    offsets: Tensor | None = None,
    max_norm: float | None = None,
    norm_type: float = 2,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> Tensor:
    """Sums, means or maxes of bags of rows of ``weight``: bags are the rows of a 2-D
    ``input``, or the runs of a 1-D ``input`` that start at ``offsets``. Entries equal to
    ``padding_idx`` are left out; an empty bag gives zeros. ``per_sample_weights`` (mode
    ``"sum"`` only) scales each looked-up row. ``max_norm`` scales the picked rows of
    ``weight`` in place first, as :func:`embedding`; ``scale_grad_by_freq`` divides each
    row's gradient by how often ``input`` picks it (not for mode ``"max"``). The bags are
    laid out on the host, so the index values are read (no tracing)."""
    op = "embedding_bag"
    idx = _t(op, "input", input)
    w = _float(op, "weight", weight)
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"{op}: input must hold int indices, got {idx.dtype}")
    if w.ndim != 2:
        raise ShapeError(f"{op}: weight must be 2-D, got shape {list(w.shape)}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"{op}: mode must be 'sum', 'mean' or 'max', got {mode!r}")
    if scale_grad_by_freq and mode == "max":
        raise ValueError(f"{op}: mode 'max' does not support scale_grad_by_freq")
    num, dim = w.shape
    if padding_idx is not None and not -num <= int(padding_idx) < num:
        raise IndexRuntimeError(
            f"{op}: padding_idx must be within the number of embeddings, {-num} through "
            f"{num - 1}, but got {int(padding_idx)}"
        )
    if per_sample_weights is not None:
        _float(op, "per_sample_weights", per_sample_weights)
        if per_sample_weights.dtype != w.dtype:
            raise DTypeError(
                f"{op}: per_sample_weights must have the weight's dtype {w.dtype}, got "
                f"{per_sample_weights.dtype}"
            )
        if mode != "sum":
            raise UnsupportedValueError(
                f"{op}: per_sample_weights is only supported for mode 'sum', got {mode!r}"
            )
        if tuple(per_sample_weights.shape) != tuple(idx.shape):
            raise ShapeError(
                f"{op}: per_sample_weights of shape {list(per_sample_weights.shape)} must match "
                f"input of shape {list(idx.shape)}"
            )
    if _core._tracing():
        return _embedding_bag_graph(
            idx,
            w,
            offsets,
            max_norm,
            norm_type,
            scale_grad_by_freq,
            mode,
            per_sample_weights,
            include_last_offset,
            None if padding_idx is None else int(padding_idx) % num,
        )
    ids = np.asarray(idx.numpy(), dtype=np.int64)
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError(f"{op}: offsets must be None when input is 2-D (one bag per row)")
        b, length = ids.shape
        starts = np.arange(b, dtype=np.int64) * length
        ends = starts + length
        ids = ids.reshape(-1)
    elif idx.ndim == 1:
        if offsets is None:
            raise ValueError(f"{op}: offsets is required when input is 1-D")
        off = _t(op, "offsets", offsets)
        if off.dtype.kind not in "iu" or off.ndim != 1:
            raise ShapeError(
                f"{op}: offsets must be a 1-D int tensor, got {off.dtype} {list(off.shape)}"
            )
        o = np.asarray(off.numpy(), dtype=np.int64)
        if o.size and o[0] != 0:
            raise ArgumentRuntimeError(f"{op}: offsets[0] must be 0, got {int(o[0])}")
        if np.any(np.diff(o) < 0) or (o.size and o[-1] > ids.size):
            raise ArgumentRuntimeError(
                f"{op}: offsets must be non-decreasing and at most {ids.size}, got {o.tolist()}"
            )
        if include_last_offset:
            if o.size == 0 or o[-1] != ids.size:
                raise ValueError(
                    f"{op}: with include_last_offset, the last offset must be the input's "
                    f"length {ids.size}, got offsets {o.tolist()}"
                )
            starts, ends = o[:-1], o[1:]
        else:
            starts, ends = o, np.append(o[1:], ids.size)
    else:
        raise ShapeError(f"{op}: input must be 1-D (with offsets) or 2-D, got {list(idx.shape)}")
    bad = ids[(ids < 0) | (ids >= num)]
    if bad.size:
        raise IndexRuntimeError(
            f"{op}: indices must lie in [0, {num}): Expected idx >= 0 && idx < num_embeddings "
            f"but found idx to be {int(bad[0])}"
        )
    if max_norm is not None:
        _renorm_rows_(w, tensor(ids, device=w.device), float(max_norm), float(norm_type))
    pad_i = None if padding_idx is None else int(padding_idx) % num
    b = len(starts)
    lengths = ends - starts
    width = max(int(lengths.max()) if b else 0, 1)
    # table[bag, j]: the position in the flat input of the bag's j-th entry, or ids.size
    table = np.full((b, width), ids.size, dtype=np.int64)
    for i in range(b):
        pos = np.arange(starts[i], ends[i])
        if pad_i is not None:
            pos = pos[ids[pos] != pad_i]
        table[i, : pos.size] = pos
    valid = table < ids.size
    counts = valid.sum(1)
    dev = w.device
    rows_idx = np.append(ids, 0)[table]  # the weight row of each entry (0 when none)
    rows = _core.index_select(w, 0, tensor(rows_idx.reshape(-1), device=dev), negative=False, op=op)
    rows = rows.reshape(b, width, dim)
    if scale_grad_by_freq and ids.size:
        # each row's gradient over how often the whole input picks it
        _, inverse, freq = np.unique(ids, return_inverse=True, return_counts=True)
        per_entry = np.append(1.0 / freq[inverse], 1.0)[table]
        s = tensor(per_entry[:, :, None], device=dev).astype(w.dtype.name)
        rows = rows * s + (rows * (1.0 - s)).detach()
    mask = tensor(valid[:, :, None], device=dev)
    if mode == "max":
        neg = _core.full((1,), -math.inf, dtype=w.dtype.name, device=dev)
        out = where(mask, rows, neg).max([1])
        nonempty = tensor((counts[:, None] > 0).astype(np.float64), device=dev)
        return where(nonempty > 0, out, _core.zeros_like(out.detach()))
    scale = valid.astype(np.float64)
    if mode == "mean":
        scale = scale / np.maximum(counts, 1)[:, None]
    coef = tensor(scale[:, :, None], device=dev).astype(w.dtype.name)
    if per_sample_weights is not None:
        psw = per_sample_weights.reshape(-1)
        zero = _core.zeros((1,), dtype=psw.dtype.name, device=psw.device)
        flat = _core.concat([psw, zero], 0)
        picked = _core.index_select(flat, 0, tensor(table.reshape(-1), device=psw.device))
        coef = coef * picked.reshape(b, width, 1).to(dev)
    return (rows * coef).sum(1)


def _embedding_bag_graph(
    idx: Tensor,
    w: Tensor,
    offsets: Tensor | None,
    max_norm: float | None,
    norm_type: float,
    scale_grad_by_freq: bool,
    mode: str,
    per_sample_weights: Tensor | None,
    include_last_offset: bool,
    pad_i: int | None,
) -> Tensor:
    """:func:`embedding_bag` with tensor ops only, for ``fg.trace``: the indices and offsets
    are values of each call (never read on the host, so not checked either), the bags laid
    out by the graph. A 2-D input is one bag per row (looked up as a padded table, as
    eagerly); for a 1-D input each entry's bag is the count of offsets at or before it, sums
    and means are ``index_add`` into the bags, maxes a running maximum over each run of
    entries (doubling steps), read at the run's last entry."""
    op = "embedding_bag"
    num, dim = w.shape
    dev, dt = w.device, w.dtype.name
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError(f"{op}: offsets must be None when input is 2-D (one bag per row)")
    elif idx.ndim == 1:
        if offsets is None:
            raise ValueError(f"{op}: offsets is required when input is 1-D")
        off = _t(op, "offsets", offsets)
        if off.dtype.kind not in "iu" or off.ndim != 1:
            raise ShapeError(
                f"{op}: offsets must be a 1-D int tensor, got {off.dtype} {list(off.shape)}"
            )
        if include_last_offset and off.shape[0] == 0:
            raise ValueError(f"{op}: with include_last_offset, offsets must not be empty")
    else:
        raise ShapeError(f"{op}: input must be 1-D (with offsets) or 2-D, got {list(idx.shape)}")
    ids = idx.reshape(-1).astype("int64")
    n = ids.shape[0]
    if max_norm is not None:
        _renorm_rows_(w, ids, float(max_norm), float(norm_type))
    if pad_i is None:
        valid = _core.ones((n,), dtype="bool", device=ids.device)
    else:
        valid = ids != pad_i
    rows = _core.index_select(w, 0, ids, negative=False, op=op)
    if scale_grad_by_freq and n:
        # each row's gradient over how often the whole input picks it
        freq = _core.zeros((num,), dtype="float64", device=ids.device)
        freq = freq.index_add(0, ids, _core.ones((n,), dtype="float64", device=ids.device))
        s = (1.0 / freq[ids]).reshape(n, 1).to(dev).astype(dt)
        rows = rows * s + (rows * (1.0 - s)).detach()
    psw = None if per_sample_weights is None else per_sample_weights.reshape(-1).to(dev)
    if idx.ndim == 2:
        b, length = idx.shape
        rows = rows.reshape(b, length, dim)
        mask = valid.reshape(b, length).to(dev)
        if mode == "max":
            neg = _core.full((1,), -math.inf, dtype=dt, device=dev)
            out = where(mask.reshape(b, length, 1), rows, neg).max([1])
            nonempty = mask.any(1).reshape(b, 1)
            return where(nonempty, out, _core.zeros_like(out.detach()))
        coef = mask.astype("float64")
        if mode == "mean":
            count = mask.astype("int64").sum(1, keepdims=True)
            coef = coef / _core.maximum(count, 1).astype("float64")
        coef = coef.reshape(b, length, 1).astype(dt)
        if psw is not None:
            coef = coef * psw.reshape(b, length, 1)
        return (rows * coef).sum(1)
    nb = off.shape[0] - 1 if include_last_offset else off.shape[0]
    if n == 0 or nb == 0:
        return _core.zeros((nb, dim), dtype=dt, device=dev)
    starts = off[:nb].astype("int64").to(ids.device).clip(0, n)
    # the bag of entry j: how many bags start at or before j, less one
    marks = _core.zeros((n + 1,), dtype="int64", device=ids.device)
    marks = marks.index_add(0, starts, _core.ones((nb,), dtype="int64", device=ids.device))
    bag = (marks.cumsum(0)[:n] - 1).clip(0, nb - 1)
    count = _core.zeros((nb,), dtype="float64", device=ids.device)
    count = count.index_add(0, bag, valid.astype("float64"))
    if mode == "max":
        neg = _core.full((1, dim), -math.inf, dtype=dt, device=dev)
        run = where(valid.reshape(n, 1).to(dev), rows, neg)
        bag_d = bag.to(dev)
        k = 1
        while k < n:
            # entry j takes the maximum with entry j - k when both lie in one bag
            earlier = _core.concat([neg.broadcast_to((k, dim)), run[: n - k]], 0)
            same = _core.concat(
                [_core.zeros((k,), dtype="bool", device=dev), bag_d[k:] == bag_d[: n - k]], 0
            )
            run = where(same.reshape(n, 1), _core.maximum(run, earlier), run)
            k *= 2
        every = _core.zeros((nb,), dtype="int64", device=ids.device)
        every = every.index_add(0, bag, _core.ones((n,), dtype="int64", device=ids.device))
        last = (every.cumsum(0) - 1).clip(0, n - 1)
        out = _core.index_select(run, 0, last.to(dev), negative=False, op=op)
        nonempty = (count > 0).reshape(nb, 1).to(dev)
        return where(nonempty, out, _core.zeros_like(out.detach()))
    coef = valid.astype("float64")
    if mode == "mean":
        coef = coef / _core.maximum(count, 1.0)[bag]
    coef = coef.to(dev).astype(dt)
    if psw is not None:
        coef = coef * psw
    out = _core.zeros((nb, dim), dtype=dt, device=dev)
    return out.index_add(0, bag.to(dev), rows * coef.reshape(n, 1))


def _warn_dropout_rank(op: str, ndim: int, nd: int) -> None:
    import warnings

    warnings.warn(
        f"{op}: Received a {ndim}-D input to {op}, which is deprecated and will result in an "
        "error in a future release. To retain the behavior and silence this warning, please "
        f"use dropout instead. Note that {op} exists to provide channel-wise dropout on inputs "
        f"with {nd} spatial dimensions, a channel dimension, and an optional batch dimension "
        f"(i.e. {nd + 1}D or {nd + 2}D inputs).",
        UserWarning,
        stacklevel=3,
    )


def _feature_dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """PyTorch's ``feature_dropout``: whole ``x[i, j]`` slices zeroed with probability
    ``p``, the rest scaled by ``1 / (1 - p)``."""
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    from .. import bernoulli, full

    shape = [x.shape[0], x.shape[1]] + [1] * (x.ndim - 2)
    keep = bernoulli(full(shape, 1.0 - p, dtype=x.dtype.name, device=x.device))
    return x * keep / (1.0 - p)


def dropout3d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zeroes whole channels of ``(N, C, D, H, W)`` (or ``(C, D, H, W)``) with probability
    ``p``, scaling the rest by ``1 / (1 - p)``."""
    x = _float("dropout3d", "input", input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(
            f"dropout3d: p must lie in [0, 1]: dropout probability has to be between 0 and 1, "
            f"but got {p}"
        )
    if x.ndim < 2:
        raise ShapeError(
            f"dropout3d: input must be (N, C, D, H, W) or (C, D, H, W), got {list(x.shape)}"
        )
    if x.ndim not in (4, 5):
        # PyTorch's: deprecated, run as a channel dropout of the input with a batch axis
        # of one put in front
        _warn_dropout_rank("dropout3d", x.ndim, 3)
        return _feature_dropout(x.unsqueeze(0), p, training).squeeze(0)
    if x.ndim == 4:  # (C, D, H, W)
        out = _feature_dropout(x.unsqueeze(0), p, training).squeeze(0)
    else:
        out = _feature_dropout(x, p, training)
    if not training or p == 0.0:
        return x
    if inplace:
        input.copy_(out)
        return input
    return out


def feature_alpha_dropout(
    input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False
) -> Tensor:
    """:func:`alpha_dropout` of whole channels (axis 1 of an ``(N, C, ...)`` input): a
    dropped channel takes SELU's negative saturation value, then the affine map restores
    zero mean and unit variance."""
    x = _float("feature_alpha_dropout", "input", input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"feature_alpha_dropout: p must lie in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if x.ndim < 2:
        raise ShapeError(f"feature_alpha_dropout: input must be (N, C, ...), got {list(x.shape)}")
    if p == 1.0:
        return x * 0.0
    from .. import bernoulli, full

    shape = list(x.shape[:2]) + [1] * (x.ndim - 2)
    keep = bernoulli(full(shape, 1.0 - p, dtype=x.dtype.name, device=x.device))
    a = ((1.0 - p) * (1.0 + p * _SELU_ALPHA_PRIME**2)) ** -0.5
    b = -a * _SELU_ALPHA_PRIME * p
    out = (x * keep + (1.0 - keep) * _SELU_ALPHA_PRIME) * a + b
    if inplace:
        x.copy_(out)
        return x
    return out


def multilabel_margin_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Multi-label hinge loss: ``sum_{j in y, i not in y} max(0, 1 - (x[j] - x[i])) / C``
    per sample, the labels ``y`` of a row being the entries of ``target`` before its first
    -1 (``input`` and ``target`` of shape ``(C,)`` or ``(N, C)``)."""
    op = "multilabel_margin_loss"
    x = _float(op, "input", input)
    t = _t(op, "target", target)
    if t.dtype.kind not in "iu":
        raise DTypeError(f"{op}: target must hold int class indices, got {t.dtype}")
    if x.ndim == 0 and t.ndim == 0:
        # a 0-d input and target: one sample of one class (PyTorch's; its loss is 0)
        x, t = x.reshape(1), t.reshape(1)
    if x.ndim not in (1, 2) or tuple(t.shape) != tuple(x.shape):
        raise ShapeError(
            f"{op}: input and target must both be (C,) or (N, C), got {list(x.shape)} and "
            f"{list(t.shape)}"
        )
    c = x.shape[-1]
    x2 = x.reshape(1, -1) if x.ndim == 1 else x
    t2 = t.reshape(1, -1) if t.ndim == 1 else t
    if t2.dtype.name != "int64":
        t2 = t2.astype("int64")
    if t2.device != x.device:
        t2 = t2.to(x.device)
    before = (t2 < 0).astype("int64").cumsum(1) == 0  # entries before the first -1
    if not _core._tracing() and t2.numel():
        bad = _core.where(before, t2, 0)
        lo, hi = int(bad.min().item()), int(bad.max().item())
        if lo < 0 or hi >= c:
            raise IndexRuntimeError(
                f"{op}: target labels must lie in [0, {c}) or be -1, got {lo}..{hi}"
            )
    safe = _core.where(before, t2, 0)
    zeros = _core.zeros(tuple(x2.shape), dtype=x.dtype.name, device=x.device)
    counts = zeros.scatter_add(1, safe, before.astype(x.dtype.name))  # times each class is a label
    others = (counts == 0).astype(x.dtype.name)
    # hinge[n, j, i] = max(0, 1 - x[n, j] + x[n, i])
    hinge = (1.0 - x2.unsqueeze(2) + x2.unsqueeze(1)).clamp(min=0.0)
    loss = (hinge * counts.unsqueeze(2) * others.unsqueeze(1)).sum([1, 2]) / c
    if x.ndim == 1:
        loss = loss.reshape(())
    return _reduce(op, loss, reduction)


def triplet_margin_with_distance_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    *,
    distance_function: Any = None,
    margin: float = 1.0,
    swap: bool = False,
    reduction: str = "mean",
) -> Tensor:
    """``max(0, d(a, p) - d(a, n) + margin)`` with a given distance (default
    :func:`pairwise_distance`); with ``swap``, ``d(a, n)`` is ``min(d(a, n), d(p, n))``."""
    op = "triplet_margin_with_distance_loss"
    _triplet_check(op, anchor, positive, negative, margin)
    if distance_function is not None and not callable(distance_function):
        raise TypeError(
            f"{op}: distance_function must be callable, got {type(distance_function).__name__}"
        )
    dist = pairwise_distance if distance_function is None else distance_function
    d_ap = dist(anchor, positive)
    d_an = dist(anchor, negative)
    if swap:
        d_an = _core.minimum(d_an, dist(positive, negative))
    loss = (d_ap - d_an + margin).clamp(min=0.0)
    return _reduce(op, loss, reduction)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Interleaves ``groups`` groups of the channels (axis 1) of ``(N, C, ...)``."""
    x = _t("channel_shuffle", "input", input)
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ArgumentRuntimeError(
            f"channel_shuffle: groups must be a positive int, got {groups!r}"
        )
    if x.ndim < 3:
        raise ShapeError(f"channel_shuffle: input must be (N, C, *), got {list(x.shape)}")
    n, c = x.shape[0], x.shape[1]
    if c % groups:
        raise ShapeError(f"channel_shuffle: {c} channels do not split into {groups} groups")
    rest = list(x.shape[2:])
    return x.reshape(n, groups, c // groups, *rest).transpose(1, 2).reshape(n, c, *rest)


def _conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """PyTorch's ``conv_tbc``: a 1-D convolution over time of ``(T, B, C_in)`` with weights
    ``(K, C_in, C_out)`` and ``bias`` ``(C_out,)``, ``pad`` steps of zeros at both ends,
    giving ``(T + 2 pad - K + 1, B, C_out)`` (the layout of fairseq's convolutional
    models)."""
    op = "conv_tbc"
    x = _t(op, "input", input)
    w = _t(op, "weight", weight)
    b = _t(op, "bias", bias)
    if x.ndim != 3 or w.ndim != 3 or b.ndim != 1:
        raise ShapeError(
            f"{op}: input (T, B, C_in), weight (K, C_in, C_out) and bias (C_out,) expected, "
            f"got {list(x.shape)}, {list(w.shape)} and {list(b.shape)}"
        )
    if x.shape[2] != w.shape[1] or b.shape[0] != w.shape[2]:
        raise ShapeError(
            f"{op}: input channels {x.shape[2]} and bias size {b.shape[0]} must match the "
            f"weight's {w.shape[1]} input and {w.shape[2]} output channels"
        )
    y = conv1d(x.permute(1, 2, 0), w.permute(2, 1, 0), b, padding=int(pad))
    return y.permute(2, 0, 1)


__all__ += [
    "channel_shuffle",
    "dropout3d",
    "embedding_bag",
    "feature_alpha_dropout",
    "lp_pool1d",
    "lp_pool2d",
    "multilabel_margin_loss",
    "rrelu",
    "rrelu_",
    "triplet_margin_with_distance_loss",
]

for _name in (
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cosine_embedding_loss",
    "cross_entropy",
    "hinge_embedding_loss",
    "kl_div",
    "l1_loss",
    "margin_ranking_loss",
    "mse_loss",
    "multi_margin_loss",
    "multilabel_margin_loss",
    "multilabel_soft_margin_loss",
    "nll_loss",
    "poisson_nll_loss",
    "smooth_l1_loss",
    "soft_margin_loss",
    "triplet_margin_loss",
):
    globals()[_name] = _accepts_legacy_reduction(globals()[_name])
del _name


def _accepts_unbatched(fn: Any, batched_ndim: int) -> Any:
    """``fn`` also taking an input without the batch axis (one axis fewer), as PyTorch's
    convolutions and pools do: run as a batch of one, the batch axis removed again."""
    import functools

    @functools.wraps(fn)
    def wrapped(input: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(input, Tensor) and input.ndim == batched_ndim - 1:
            out = fn(input.unsqueeze(0), *args, **kwargs)
            if isinstance(out, tuple):
                return type(out)(o.squeeze(0) for o in out)
            return out.squeeze(0)
        return fn(input, *args, **kwargs)

    return wrapped


for _name, _nd in (
    ("conv1d", 3),
    ("conv2d", 4),
    ("conv_transpose1d", 3),
    ("conv_transpose2d", 4),
    ("max_pool1d", 3),
    ("max_pool2d", 4),
    ("avg_pool1d", 3),
    ("avg_pool2d", 4),
    ("adaptive_avg_pool1d", 3),
    ("adaptive_avg_pool2d", 4),
    ("adaptive_max_pool1d", 3),
    ("adaptive_max_pool2d", 4),
    ("lp_pool1d", 3),
    ("lp_pool2d", 4),
    ("fold", 3),
    ("unfold", 4),
):
    if _name in globals():
        globals()[_name] = _accepts_unbatched(globals()[_name], _nd)
del _name, _nd

# (at the end: _ctc imports .modules, which takes the functions above)
from ._ctc import ctc_loss

__all__ += ["ctc_loss"]


def multi_head_attention_forward(*args: Any, **kwargs: Any) -> Any:
    """PyTorch's ``F.multi_head_attention_forward`` (query, key, value, embed_dim_to_check,
    num_heads, in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p,
    out_proj_weight, out_proj_bias, training, key_padding_mask, need_weights, attn_mask,
    use_separate_proj_weight, q/k/v_proj_weight, static_k, static_v, average_attn_weights,
    is_causal): ``nn.MultiheadAttention``'s forward with its weights as arguments."""
    from .attention import multi_head_attention_forward as forward

    return forward(*args, **kwargs)


__all__ += ["multi_head_attention_forward"]


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot rows of the class indices in ``tensor`` (a new last axis of
    ``num_classes``, by default ``max + 1``). An empty ``tensor`` needs ``num_classes``; class
    values outside ``[0, num_classes)`` raise ``ShapeError`` (a ``RuntimeError``, as
    PyTorch's). As PyTorch's, the indices must be int64 (``DTypeError``, a
    ``RuntimeError``, for any other dtype)."""
    if isinstance(tensor, Tensor) and tensor.dtype.name != "int64":
        raise DTypeError(
            "one_hot: one_hot is only applicable to index tensor of type LongTensor (int64), "
            f"got {tensor.dtype}"
        )
    if (
        not isinstance(num_classes, bool)
        and isinstance(num_classes, int)
        and num_classes <= 0
        and isinstance(tensor, Tensor)
        and math.prod(tensor.shape) == 0
    ):
        raise ShapeError("Can not infer total number of classes from empty tensor.")
    if not isinstance(num_classes, bool) and isinstance(num_classes, int) and num_classes < -1:
        raise ShapeError("one_hot: num_classes should be -1 or a positive number")
    return _one_hot(tensor, num_classes)
