"""MegEngine 1.x's ``megengine.functional`` over the package's ops: the functions whose
names, argument spellings, defaults or conventions differ from PyTorch's."""

from __future__ import annotations

import builtins
import math as _math
import types
from typing import Any

import numpy as np

import ferrograd as fg

from .._core import Tensor
from ..nn import functional as _F

# ------------------------------------------------------------------------------ helpers


def _t(x: Any, dtype: Any = None) -> Tensor:
    """A Tensor from a Tensor, number or array (float64 host data becomes float32, as
    MegEngine's ``Tensor``)."""
    if isinstance(x, Tensor):
        return x if dtype is None else x.astype(dtype)
    if dtype is None:
        arr = np.asarray(x)
        if arr.dtype == np.float64:
            dtype = "float32"
        elif arr.dtype == np.int64 and not isinstance(x, np.ndarray):
            dtype = "int32"
    return fg.tensor(x, dtype=dtype)


def _is_float(x: Tensor) -> bool:
    return bool(x.is_floating_point())


def _as_float(x: Tensor) -> Tensor:
    """Integer and bool tensors promoted to float32 (MegEngine's reductions that divide)."""
    return x if _is_float(x) else x.astype("float32")


def _shape(name: str, shape: Any) -> tuple:
    """A shape given as an int, a sequence of ints or Tensors, a Tensor or an array."""
    if isinstance(shape, Tensor):
        shape = shape.numpy()
    if isinstance(shape, np.ndarray):
        return tuple(int(s) for s in shape.reshape(-1))
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    try:
        return tuple(int(s.item()) if isinstance(s, Tensor) else int(s) for s in shape)
    except TypeError as e:
        raise TypeError(f"{name}: shape must be ints, a sequence or a Tensor, got {shape!r}") from e


def _axes(ndim: int, axis: Any) -> list:
    if isinstance(axis, (list, tuple)):
        return [int(a) % builtins.max(ndim, 1) for a in axis]
    return [int(axis) % builtins.max(ndim, 1)]


# ------------------------------------------------------------------------- elemwise


def round(x: Any) -> Tensor:
    """Rounds to the nearest integer, halves away from zero (C's ``roundf``: 2.5 -> 3,
    -0.5 -> -1); integer tensors are returned as they are."""
    x = _t(x)
    if not _is_float(x):
        return x
    whole = fg.trunc(x)
    frac = x - whole
    step = fg.where(frac.abs() >= 0.5, fg.sign(x), fg.zeros_like(x))
    return whole + step


def equal(x: Any, y: Any) -> Tensor:
    """MegEngine's ``equal``: the elementwise ``x == y`` (PyTorch's one-bool ``equal`` is
    ``ferrograd.equal``)."""
    import ferrograd as fg

    return fg.eq(x, y)


def polar(abs: Any, angle: Any) -> Any:
    """MegEngine's ``polar``: the complex tensor ``abs * exp(i angle)``."""
    import ferrograd as fg

    return fg.polar(_t(abs), _t(angle))


def floor_div(x: Any, y: Any) -> Tensor:
    """``floor(x / y)`` elementwise (integer inputs stay integer)."""
    if not isinstance(x, Tensor):
        x = _t(x) if not isinstance(y, Tensor) else fg.full_like(y, x)
    return fg.floor_divide(x, y)


def mod(x: Any, y: Any) -> Tensor:
    """MegEngine's ``mod``: Python's modulo (sign of ``y``) for integers, C's ``fmod`` (sign
    of ``x``) for floats."""
    if not isinstance(x, Tensor):
        x = _t(x) if not isinstance(y, Tensor) else fg.full_like(y, x)
    if _is_float(x) or (isinstance(y, Tensor) and _is_float(y)) or isinstance(y, float):
        return fg.fmod(x, y)
    return fg.remainder(x, y)


def clip(x: Tensor, lower: Any = None, upper: Any = None) -> Tensor:
    """Clamps ``x`` to ``[lower, upper]`` (either may be None, not both)."""
    if lower is None and upper is None:
        raise ValueError("clip: at least one of 'lower' or 'upper' must not be None")
    return fg.clip(_t(x), lower, upper)


def hswish(x: Tensor) -> Tensor:
    """``x * relu6(x + 3) / 6``."""
    return x * (x + 3).clamp(0, 6) / 6


def hsigmoid(x: Tensor) -> Tensor:
    """``relu6(x + 3) / 6``."""
    return (x + 3).clamp(0, 6) / 6


def relu6(x: Tensor) -> Tensor:
    """``min(max(x, 0), 6)``."""
    return x.clamp(0, 6)


def prelu(x: Tensor, y: Any) -> Tensor:
    """``x`` where positive, else ``x * y`` (``y`` broadcasts against ``x``)."""
    return fg.where(x > 0, x, x * y)


def leaky_relu(inp: Tensor, negative_slope: float = 0.01) -> Tensor:
    """``inp`` where positive, else ``inp * negative_slope``."""
    return _F.leaky_relu(inp, negative_slope)


def gelu(x: Tensor) -> Tensor:
    """The exact (erf) GELU."""
    return _F.gelu(x)


def logsigmoid(inp: Tensor) -> Tensor:
    """``log(sigmoid(inp))``, computed stably."""
    return _F.logsigmoid(inp)


# ----------------------------------------------------------------------------- math


def _reduce(fn: Any, inp: Tensor, axis: Any, keepdims: bool) -> Tensor:
    if axis is None:
        return fn(inp) if not keepdims else fn(inp, axis=tuple(range(inp.ndim)), keepdims=True)
    if isinstance(axis, (list, tuple)):
        axes = _axes(inp.ndim, axis)
        if len(set(axes)) != len(axes):
            raise AssertionError(f"repeated axis in {axis}")
        axis = tuple(sorted(axes))
    return fn(inp, axis=axis, keepdims=keepdims)


def sum(inp: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """The sum over ``axis`` (an int, a sequence, negative axes allowed, or None)."""
    return _reduce(fg.sum, _t(inp), axis, keepdims)


def mean(inp: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """The mean over ``axis``; integer tensors give float32."""
    return _reduce(fg.mean, _as_float(_t(inp)), axis, keepdims)


def var(inp: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """The population variance (divided by N) over ``axis``; integers give float32."""
    x = _as_float(_t(inp))
    if isinstance(axis, (list, tuple)):
        axis = tuple(sorted(set(_axes(x.ndim, axis))))
    return fg.var(x, axis=axis, keepdims=keepdims, correction=0)


def std(inp: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """The population standard deviation over ``axis``; integers give float32."""
    return var(inp, axis, keepdims) ** 0.5


def norm(inp: Tensor, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Tensor:
    """The vector ``ord``-norm (2 by default; 0, inf and -inf too) along ``axis``; with
    ``axis=None`` the input must be a vector (``TypeError`` otherwise), as MegEngine's."""
    x = _t(inp)
    if axis is None and x.ndim != 1:
        raise TypeError("norm: axis is required unless input is a vector")
    if ord is None:
        ord = 2
    if ord == 0:
        return (x != 0).astype("int32").sum(axis=axis, keepdims=keepdims)
    if ord in (_math.inf, -_math.inf):
        fn = fg.amax if ord > 0 else fg.amin
        dims = () if axis is None else tuple(_axes(x.ndim, axis))
        return fn(x.abs(), dim=dims, keepdim=keepdims)
    return _reduce(fg.sum, _as_float(x).abs() ** ord, axis, keepdims) ** (1.0 / ord)


def normalize(inp: Tensor, ord: Any = None, axis: Any = None, eps: float = 1e-12) -> Tensor:
    """``inp / max(norm(inp, ord, axis), eps)``; with ``axis=None`` the input must be a
    vector, as in MegEngine's ``norm``."""
    x = _as_float(_t(inp))
    n = norm(x, ord, axis, keepdims=axis is not None)
    return x / n.clamp(min=eps)


def _arg_reduce(fn: Any, inp: Tensor, axis: Any, keepdims: bool) -> Tensor:
    x = _t(inp)
    if axis is None:
        if keepdims:
            raise ValueError("can not set axis=None and keepdims=True")
        return fn(x.reshape(-1), 0)
    if isinstance(axis, (list, tuple)):
        # one axis after the other, highest first so the lower indices stay valid
        for a in sorted(_axes(x.ndim, axis), reverse=True):
            x = fn(x, a, keepdim=True)
            if not keepdims:
                x = x.squeeze(a)
        return x
    return fn(x, int(axis), keepdim=keepdims)


def argmax(inp: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """The index of the largest entry along ``axis`` (a tuple: reduced one axis at a time,
    as MegEngine's), of the flattened tensor with ``axis=None``."""
    return _arg_reduce(fg.argmax, inp, axis, keepdims)


def argmin(inp: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """The index of the smallest entry along ``axis``, as :func:`argmax`."""
    return _arg_reduce(fg.argmin, inp, axis, keepdims)


def _flag(value: Any) -> bool:
    return bool(value.item()) if isinstance(value, Tensor) else bool(value)


def sort(inp: Tensor, descending: Any = False, dim: int = -1) -> tuple:
    """``(values, indices)`` of ``inp`` sorted along ``dim`` (ascending unless
    ``descending``)."""
    r = fg.sort(_t(inp), dim=int(dim), descending=_flag(descending))
    return r[0], r[1]


def argsort(inp: Tensor, descending: Any = False) -> Tensor:
    """The indices that sort a 1-D or 2-D ``inp`` along its last axis."""
    x = _t(inp)
    if x.ndim > 2:
        raise ValueError("argsort: input should be 1d or 2d")
    return fg.argsort(x, dim=-1, descending=_flag(descending))


def cross(
    a: Tensor, b: Tensor, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: Any = None
) -> Tensor:
    """The cross product of 3-vectors along ``axisa`` of ``a`` and ``axisb`` of ``b`` (both
    set by ``axis``), placed on ``axisc`` of the result, as ``numpy.cross``."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = _t(a).movedim(axisa, -1), _t(b).movedim(axisb, -1)
    # MegEngine (as numpy) takes 2-vectors as 3-vectors with a zero third component
    a, b = (fg.nn.functional.pad(v, (0, 1)) if v.shape[-1] == 2 else v for v in (a, b))
    out = fg.cross(a, b, dim=-1)
    return out.movedim(-1, axisc)


def left_shift(x: Any, y: Any) -> Tensor:
    """``x << y`` elementwise on integers."""
    return _t(x) * (2 ** _t(y))


def right_shift(x: Any, y: Any) -> Tensor:
    """``x >> y`` elementwise on integers (floor division by ``2 ** y``)."""
    return fg.floor_divide(_t(x), 2 ** _t(y))


def matinv(inp: Tensor) -> Tensor:
    """The inverse of each square matrix in the last two axes."""
    return fg.linalg.inv(inp)


# ------------------------------------------------------------------------- creation


def _dev(device: Any) -> Any:
    if isinstance(device, str) and device.startswith(("cpu", "xpu")):
        return None
    return device


def zeros(shape: Any, *, dtype: Any = "float32", device: Any = None) -> Tensor:
    """A tensor of zeros; ``shape`` an int, a sequence, a Tensor or an array."""
    return fg.zeros(_shape("zeros", shape), dtype=dtype, device=_dev(device))


def ones(shape: Any, *, dtype: Any = "float32", device: Any = None) -> Tensor:
    """A tensor of ones; ``shape`` an int, a sequence, a Tensor or an array."""
    return fg.ones(_shape("ones", shape), dtype=dtype, device=_dev(device))


def full(shape: Any, value: Any, *, dtype: Any = None, device: Any = None) -> Tensor:
    """A tensor filled with ``value``; ``shape`` an int, a sequence, a Tensor or an array
    (the dtype that of ``Tensor(value)`` unless ``dtype``)."""
    if isinstance(value, Tensor):
        dtype = value.dtype if dtype is None else dtype
        value = value.item()
    return fg.full(_shape("full", shape), value, dtype=dtype, device=_dev(device))


def eye(N: Any, M: Any = None, *, dtype: Any = "float32", device: Any = None) -> Tensor:
    """The identity matrix of shape ``(N, M)``; ``N`` may also be the shape itself."""
    if M is None:
        shp = _shape("eye", N)
        n, m = (shp[0], shp[0]) if len(shp) == 1 else shp[:2]
    else:
        n, m = _shape("eye", N)[0], _shape("eye", M)[0]
    return fg.eye(n, m, dtype=dtype, device=_dev(device))


def _scalar(x: Any) -> Any:
    return x.item() if isinstance(x, Tensor) else x


def arange(
    start: Any = 0, stop: Any = None, step: Any = 1, *, dtype: Any = "float32", device: Any = None
) -> Tensor:
    """``[start, stop)`` by ``step``, float32 by default; the bounds may be Tensors."""
    start, stop, step = _scalar(start), _scalar(stop), _scalar(step)
    if stop is None:
        start, stop = 0, start
    num = int(np.ceil((np.float32(stop) - np.float32(start)) / np.float32(step)))
    num = builtins.max(num, 0)
    vals = np.float32(start) + np.float32(step) * np.arange(num, dtype=np.float32)
    return fg.tensor(vals.astype(np.dtype(str(np.dtype(dtype)))), device=_dev(device))


def linspace(start: Any, stop: Any, num: Any, *, dtype: Any = "float32", device: Any = None):
    """``num`` evenly spaced values from ``start`` to ``stop`` inclusive; the arguments may
    be Tensors."""
    r = fg.linspace(
        float(_scalar(start)), float(_scalar(stop)), int(_scalar(num)), device=_dev(device)
    )
    return r.astype(dtype) if np.dtype(dtype) != np.float32 else r.astype("float32")


def broadcast_to(inp: Tensor, shape: Any) -> Tensor:
    """``inp`` broadcast to ``shape`` (a Tensor, array or sequence; ``None`` keeps the
    input's size on that axis)."""
    x = _t(inp)
    if isinstance(shape, (list, tuple)) and builtins.any(s is None for s in shape):
        lead = len(shape) - x.ndim
        if builtins.any(s is None and i < lead for i, s in enumerate(shape)):
            raise ValueError(f"broadcast_to: None in {shape} has no input axis to copy")
        shape = [x.shape[i - lead] if s is None else s for i, s in enumerate(shape)]
    target = _shape("broadcast_to", shape)
    if builtins.any(s < 0 for s in target):
        raise ValueError(f"broadcast_to: negative size in {target}")
    return fg.broadcast_to(x, target)


def reshape(inp: Tensor, target_shape: Any) -> Tensor:
    """``inp`` with ``target_shape`` (a Tensor, array or sequence; one -1 inferred)."""
    return _t(inp).reshape(_shape("reshape", target_shape))


def flatten(inp: Tensor, start_axis: int = 0, end_axis: int = -1) -> Tensor:
    """Axes ``start_axis`` to ``end_axis`` merged into one."""
    return fg.flatten(_t(inp), start_axis, end_axis)


def expand_dims(inp: Tensor, axis: Any) -> Tensor:
    """``inp`` with size-1 axes inserted at ``axis`` (an int or a sequence; negative
    positions count in the result, as numpy's)."""
    x = _t(inp)
    axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    nd = x.ndim + len(axes)
    pos = sorted(int(a) % nd for a in axes)
    if len(set(pos)) != len(pos):
        raise ValueError(f"expand_dims: repeated axis in {axis}")
    for a in pos:
        x = fg.expand_dims(x, a)
    return x


def squeeze(inp: Tensor, axis: Any = None) -> Tensor:
    """``inp`` without its size-1 axes (those of ``axis`` only, an int or a sequence)."""
    x = _t(inp)
    if axis is None:
        return fg.squeeze(x)
    for a in sorted(_axes(x.ndim, axis), reverse=True):
        x = fg.squeeze(x, a)
    return x


def repeat(inp: Tensor, repeats: int, axis: Any = None) -> Tensor:
    """Each element repeated ``repeats`` times along ``axis`` (of the flattened tensor with
    ``axis=None``), as ``numpy.repeat``."""
    x = _t(inp)
    if axis is None:
        x = x.reshape(-1)
        axis = 0
    return fg.repeat_interleave(x, int(repeats), dim=int(axis))


def tile(inp: Tensor, reps: Any) -> Tensor:
    """``inp`` tiled ``reps`` times per axis, as ``numpy.tile``."""
    return fg.tile(_t(inp), tuple(int(r) for r in reps))


def diag(inp: Tensor, k: int = 0) -> Tensor:
    """The ``k``-th diagonal of a matrix, or the matrix with a vector on it."""
    return fg.diag(_t(inp), k)


def split(inp: Tensor, nsplits_or_sections: Any, axis: int = 0) -> tuple:
    """An int: that many pieces (sizes as ``numpy.array_split``; ``ValueError`` when there
    are more pieces than entries); a list: the positions to cut at."""
    x = _t(inp)
    if axis >= x.ndim:
        raise ValueError(f"Invalid axis {axis}")
    n = x.shape[axis]
    if isinstance(nsplits_or_sections, (list, tuple)):
        cuts = [int(_scalar(c)) for c in nsplits_or_sections]
        pts = [0, *cuts, n]
        if builtins.any(a > b for a, b in zip(pts[:-1], pts[1:])):
            raise ValueError(f"Invalid nsplits_or_secions: {nsplits_or_sections!r}")
    else:
        k = int(_scalar(nsplits_or_sections))
        if k <= 0:
            raise ValueError("Number sections must be larger than 0")
        if k > n:
            raise ValueError(f"The size {n} at dim {axis} cannot be split into {k} sections")
        sizes = [(n + k - i - 1) // k for i in range(k)]
        pts = [0]
        for s in sizes:
            pts.append(pts[-1] + s)
    return tuple(x.narrow(axis, a, b - a) for a, b in zip(pts[:-1], pts[1:]))


def copy(inp: Tensor, device: Any = None) -> Tensor:
    """A copy of ``inp`` (on ``device`` if given); the gradient flows through."""
    x = _t(inp)
    out = x * 1 if _is_float(x) else fg.clone(x)
    return out if _dev(device) is None else out.to(device)


def cond_take(mask: Tensor, x: Tensor) -> tuple:
    """``(values, indices)``: the entries of ``x`` where the bool ``mask`` holds, and
    their flat indices (int32)."""
    if not isinstance(x, Tensor):
        raise TypeError("input must be a tensor")
    if not isinstance(mask, Tensor):
        raise TypeError("mask must be a tensor")
    if mask.dtype != np.bool_:
        raise ValueError("mask must be bool")
    flat = mask.reshape(-1)
    idx = fg.nonzero(flat).reshape(-1)
    return x.reshape(-1)[idx], idx.astype("int32")


def non_zero(condition: Tensor, as_tuple: bool = False) -> Any:
    """The indices of the nonzero entries: an ``(n, ndim)`` int32 tensor, or with
    ``as_tuple`` one int32 vector per axis."""
    if not isinstance(condition, Tensor):
        raise TypeError("input must be a tensor")
    idx = fg.nonzero(condition).astype("int32")
    if as_tuple:
        return tuple(idx[:, i] for i in range(condition.ndim))
    return idx


nonzero = non_zero


def meshgrid(*inputs: Tensor, indexing: str = "xy") -> Any:
    """Coordinate grids, Cartesian (``"xy"``) indexing by default as MegEngine's."""
    return fg.meshgrid(*inputs, indexing=indexing)


def transpose(inp: Tensor, pattern: Any) -> Tensor:
    """``inp`` with its axes permuted by ``pattern`` (``"x"`` entries insert size-1 axes,
    as MegEngine's dimshuffle)."""
    x = _t(inp)
    pattern = list(pattern)
    if "x" in pattern:
        real = [p for p in pattern if p != "x"]
        y = x.permute(*real) if real else x.reshape(())
        shape = []
        it = iter(y.shape)
        for p in pattern:
            shape.append(1 if p == "x" else next(it))
        return y.reshape(tuple(shape))
    return x.permute(*pattern)


# ------------------------------------------------------------------------------ nn


def softmax(inp: Tensor, axis: Any = None) -> Tensor:
    """Softmax along ``axis``; by default axis 0 for 0-, 1- and 3-D input, axis 1 otherwise
    (MegEngine's rule)."""
    x = _t(inp)
    if axis is None:
        axis = 0 if x.ndim in (0, 1, 3) else 1
    return _F.softmax(x, int(axis))


def logsoftmax(inp: Tensor, axis: Any = None) -> Tensor:
    """``log(softmax(inp, axis))``; the default axis as :func:`softmax`."""
    x = _t(inp)
    if axis is None:
        axis = 0 if x.ndim in (0, 1, 3) else 1
    return _F.log_softmax(x, int(axis))


def logsumexp(inp: Tensor, axis: Any, keepdims: bool = False) -> Tensor:
    """``log(sum(exp(inp), axis))``, computed stably."""
    x = _t(inp)
    if isinstance(axis, (list, tuple)):
        axis = tuple(_axes(x.ndim, axis))
    return fg.logsumexp(x, axis=axis, keepdims=keepdims)


def batch_norm(
    inp: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    *,
    training: bool = False,
    momentum: float = 0.9,
    eps: float = 1e-5,
    inplace: bool = True,
    compute_mode: str = "default",
    param_dim: str = "dim_1c11",
) -> Any:
    """MegEngine's ``batch_norm``: channels on axis 1; in training the batch statistics
    normalise and update ``running = momentum * running + (1 - momentum) * batch`` (the
    variance unbiased), in place unless ``inplace=False`` (then ``(out, new_mean,
    new_var)``); otherwise the running statistics normalise. Parameters may have shape
    ``(C,)`` or ``(1, C, 1, ...)``."""
    x = _t(inp)
    if x.ndim < 2:
        raise ValueError(f"batch_norm: input needs at least 2 axes, got shape {list(x.shape)}")
    c = x.shape[1]
    cs = (1, c) + (1,) * (x.ndim - 2)

    def per_channel(t: Any) -> Any:
        if t is None:
            return None
        t = _t(t)
        if t.numel() != c:
            raise ValueError(
                f"batch_norm: expected {c} values per parameter, got shape {list(t.shape)}"
            )
        return t.reshape(cs)

    w, b = per_channel(weight), per_channel(bias)
    has_mean, has_var = running_mean is not None, running_var is not None
    new_mean = new_var = None
    if not training:
        if not (has_mean and has_var):
            raise ValueError("batch_norm: running_mean and running_var must be provided")
        mean = per_channel(running_mean)
        v = per_channel(running_var)
        y = (x - mean) * (v + eps).rsqrt()
    else:
        axes = tuple(d for d in range(x.ndim) if d != 1)
        n = int(np.prod([x.shape[d] for d in axes]))
        if n == 0:
            y = x * 1
            new_mean, new_var = running_mean, running_var
        else:
            mean = x.mean(axis=axes, keepdims=True)
            xc = x - mean
            bvar = (xc * xc).mean(axis=axes, keepdims=True)
            y = xc * (bvar + eps).rsqrt()
            with fg.no_grad():
                unbiased = bvar.detach() * (n / (n - 1) if n > 1 else 1.0)
                if has_mean:
                    rm = _t(running_mean)
                    new_mean = (
                        rm * momentum + mean.detach().reshape(rm.shape) * (1 - momentum)
                    ).astype(rm.dtype)
                if has_var:
                    rv = _t(running_var)
                    new_var = (rv * momentum + unbiased.reshape(rv.shape) * (1 - momentum)).astype(
                        rv.dtype
                    )
                if inplace:
                    if has_mean:
                        running_mean.copy_(new_mean)
                    if has_var:
                        running_var.copy_(new_var)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    if training and not inplace and (has_mean or has_var):
        return y, new_mean, new_var
    return y


def sync_batch_norm(
    inp: Tensor,
    running_mean: Tensor,
    running_var: Tensor,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.9,
    eps: float = 1e-5,
    eps_mode: str = "additive",
    group: Any = None,
) -> Tensor:
    """:func:`batch_norm` over this process's batch (one process: no peers to sync)."""
    return batch_norm(
        inp, running_mean, running_var, weight, bias,
        training=training, momentum=momentum, eps=eps,
    )  # fmt: skip


def avg_pool2d(
    inp: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    mode: str = "average_count_exclude_padding",
) -> Tensor:
    """Average pooling; by default (``mode="average_count_exclude_padding"``) each window
    is divided by its count of real (unpadded) entries, with ``mode="average"`` by the full
    window size."""
    modes = ("average_count_exclude_padding", "average")
    if mode.lower() not in modes:
        raise ValueError(f"avg_pool2d: mode must be one of {modes}, got {mode!r}")
    if stride is None:
        stride = kernel_size
    include = mode.lower() == "average"
    return _F.avg_pool2d(_t(inp), kernel_size, stride, padding, count_include_pad=include)


def max_pool2d(inp: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0):
    """Max pooling (the stride the kernel size by default)."""
    return _F.max_pool2d(
        _t(inp), kernel_size, stride if stride is not None else kernel_size, padding
    )


def adaptive_avg_pool2d(inp: Tensor, oshp: Any) -> Tensor:
    """Average pooling to the output size ``oshp`` (an int, a pair or a Tensor)."""
    return _F.adaptive_avg_pool2d(inp, _shape("adaptive_avg_pool2d", oshp))


def adaptive_max_pool2d(inp: Tensor, oshp: Any) -> Tensor:
    """Max pooling to the output size ``oshp`` (an int, a pair or a Tensor)."""
    return _F.adaptive_max_pool2d(inp, _shape("adaptive_max_pool2d", oshp))


def interpolate(
    inp: Tensor,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "bilinear",
    align_corners: bool | None = None,
) -> Tensor:
    """Resizes ``inp`` to ``size`` or by ``scale_factor``; ``mode`` "bilinear" (the
    default), "linear", "trilinear", "bicubic" or "nearest"; ``align_corners`` (only for the
    linear modes) defaults to False."""
    mode = mode.lower()
    if mode not in ("bilinear", "linear", "trilinear", "bicubic", "nearest"):
        raise ValueError(f"unsupported interpolate mode: {mode}")
    if mode not in ("bilinear", "linear", "trilinear"):
        if align_corners is not None:
            raise ValueError(
                "align_corners option can only be set in the bilinear/linear interpolating mode"
            )
    elif align_corners is None:
        align_corners = False
    if size is None and scale_factor is None:
        raise ValueError("interpolate: scale_factor and size can not be both None")
    if size is not None and scale_factor is not None:
        raise ValueError("interpolate: scale_factor and size can not be both set")
    x = _t(inp)
    want = {"linear": 3, "trilinear": 5}.get(mode, 4)
    if x.ndim != want:
        raise AssertionError(f"interpolate: mode {mode!r} needs a {want}-D input, got {x.ndim}-D")
    if mode == "linear" and scale_factor is not None and not isinstance(scale_factor, (int, float)):
        raise ValueError("under linear mode, scale_factor can only be single value")
    if isinstance(size, Tensor):
        size = _shape("interpolate", size)
    kw: dict = {"mode": mode}
    if mode != "nearest" and mode != "bicubic":
        kw["align_corners"] = align_corners
    return _F.interpolate(x, size=size, scale_factor=scale_factor, **kw)


def dropout(inp: Tensor, drop_prob: float, training: bool = True) -> Tensor:
    """Zeroes each entry with probability ``drop_prob`` and scales the rest by
    ``1 / (1 - drop_prob)`` when ``training``."""
    if not 0 <= drop_prob < 1:
        raise ValueError(f"dropout: drop_prob must be in [0, 1), got {drop_prob}")
    if not training or drop_prob == 0:
        return inp
    return _F.dropout(inp, drop_prob, training=True)


def linear(inp: Tensor, weight: Tensor, bias: Tensor | None = None, compute_mode: str = "default"):
    """``inp @ weight.T + bias``."""
    return _F.linear(inp, weight, bias)


def _conv_weight(op: str, weight: Tensor, groups: int, nd: int) -> Tensor:
    """MegEngine's grouped weight ``(groups, out / groups, in / groups, *kernel)`` (for a
    transposed convolution ``(groups, in / groups, out / groups, *kernel)``) as the
    package's ``(out, in / groups, *kernel)`` (``(in, out / groups, *kernel)``), by merging
    the first two axes; a weight with ``nd + 2`` axes is used as it is."""
    if weight.ndim != nd + 3:
        return weight
    if weight.shape[0] != groups:
        raise fg.ShapeError(
            f"{op}: a grouped weight's first axis is the group count ({groups}), got weight "
            f"shape {list(weight.shape)}"
        )
    return weight.reshape(weight.shape[0] * weight.shape[1], *weight.shape[2:])


def _conv_modes(op: str, conv_mode: Any, compute_mode: Any = "default") -> None:
    """MegEngine computes only cross-correlation; ``compute_mode`` is "default" or
    "float32" (accepted: it asks for float32 intermediates with float16 input)."""
    if str(conv_mode).lower() != "cross_correlation":
        raise ValueError(f'{op}: conv_mode must be "cross_correlation", got {conv_mode!r}')
    if str(compute_mode).lower() not in ("default", "float32"):
        raise ValueError(f'{op}: compute_mode must be "default" or "float32", got {compute_mode!r}')


def _bias1(bias: Any) -> Any:
    return None if bias is None else bias.reshape(-1)


def conv1d(
    inp: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
    conv_mode: str = "cross_correlation",
    compute_mode: str = "default",
) -> Tensor:
    """1-D convolution (cross-correlation); ``bias`` of shape ``(1, OC, 1)`` or ``(OC,)``;
    a grouped weight may have MegEngine's leading group axis."""
    _conv_modes("conv1d", conv_mode, compute_mode)
    weight = _conv_weight("conv1d", weight, groups, 1)
    return _F.conv1d(inp, weight, _bias1(bias), stride, padding, dilation, groups)


def conv2d(
    inp: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
    conv_mode: str = "cross_correlation",
    compute_mode: str = "default",
) -> Tensor:
    """2-D convolution (cross-correlation); ``bias`` of shape ``(1, OC, 1, 1)`` or
    ``(OC,)``; a grouped weight may have MegEngine's shape ``(G, OC / G, IC / G, kh, kw)``."""
    _conv_modes("conv2d", conv_mode, compute_mode)
    weight = _conv_weight("conv2d", weight, groups, 2)
    return _F.conv2d(inp, weight, _bias1(bias), stride, padding, dilation, groups)


def conv_transpose2d(
    inp: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
    conv_mode: str = "cross_correlation",
    compute_mode: str = "default",
) -> Tensor:
    """2-D transposed convolution (MegEngine's argument order: ``dilation`` before
    ``groups``); ``bias`` of shape ``(1, OC, 1, 1)`` or ``(OC,)``; a grouped weight may have
    MegEngine's shape ``(G, IC / G, OC / G, kh, kw)``."""
    _conv_modes("conv_transpose2d", conv_mode, compute_mode)
    weight = _conv_weight("conv_transpose2d", weight, groups, 2)
    return _F.conv_transpose2d(
        inp, weight, _bias1(bias), stride=stride, padding=padding,
        output_padding=output_padding, groups=groups, dilation=dilation,
    )  # fmt: skip


def conv3d(
    inp: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
    conv_mode: str = "cross_correlation",
) -> Tensor:
    """3-D convolution (cross-correlation); ``bias`` of shape ``(1, OC, 1, 1, 1)`` or
    ``(OC,)``; a grouped weight may have MegEngine's leading group axis."""
    _conv_modes("conv3d", conv_mode)
    weight = _conv_weight("conv3d", weight, groups, 3)
    return _F.conv3d(inp, weight, _bias1(bias), stride, padding, dilation, groups)


def conv_transpose3d(
    inp: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """3-D transposed convolution (MegEngine's argument order: ``dilation`` before
    ``groups``)."""
    return _F.conv_transpose3d(
        inp, weight, _bias1(bias), stride=stride, padding=padding,
        output_padding=output_padding, groups=groups, dilation=dilation,
    )  # fmt: skip


def layer_norm(
    inp: Tensor,
    normalized_shape: Any,
    affine: bool,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalises over the trailing ``normalized_shape`` axes; ``affine`` requires
    ``weight`` and ``bias``."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    if affine and (weight is None or bias is None):
        raise ValueError("layer_norm: weight and bias must be provided if affine is True")
    return _F.layer_norm(
        inp, tuple(normalized_shape), weight if affine else None, bias if affine else None, eps
    )


def group_norm(
    inp: Tensor,
    num_groups: int,
    affine: bool,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalises each group of channels per sample; ``affine`` requires ``weight`` and
    ``bias`` (shape ``(C,)``)."""
    if affine and (weight is None or bias is None):
        raise ValueError("group_norm: weight and bias must be provided if affine is True")
    w = _bias1(weight) if affine else None
    b = _bias1(bias) if affine else None
    return _F.group_norm(inp, num_groups, w, b, eps)


def instance_norm(
    inp: Tensor,
    affine: bool,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalises each channel of each sample over its spatial axes; ``affine`` requires
    ``weight`` and ``bias``."""
    if affine and (weight is None or bias is None):
        raise ValueError("instance_norm: weight and bias must be provided if affine is True")
    return group_norm(inp, inp.shape[1], affine, weight, bias, eps)


def local_response_norm(
    inp: Tensor, kernel_size: int = 5, k: float = 2.0, alpha: float = 1e-4, beta: float = 0.75
) -> Tensor:
    """``inp / (k + alpha * sum(inp**2 over the kernel_size // 2 channels either side))
    ** beta`` (MegEngine's LRN: ``alpha`` is not divided by the window size)."""
    x = _t(inp)
    h = int(kernel_size) // 2
    c = x.shape[1]
    sq = x * x
    acc = None
    for off in range(-h, h + 1):
        lo, hi = builtins.max(0, off), builtins.min(c, c + off)
        if hi <= lo:
            continue
        part = sq.narrow(1, lo, hi - lo)
        pad = [0, 0] * (x.ndim - 2) + [builtins.max(0, -off), builtins.max(0, off)]
        part = _F.pad(part, pad)
        acc = part if acc is None else acc + part
    return x * (acc * alpha + k) ** (-beta)


def pixel_shuffle(inp: Tensor, upscale_factor: int) -> Tensor:
    """Moves ``r * r`` channel blocks into an ``r``-times larger image (leading batch axes
    of any number)."""
    x = _t(inp)
    lead = x.shape[:-3]
    c, h, w = x.shape[-3:]
    r = int(upscale_factor)
    y = x.reshape((-1, c, h, w))
    y = _F.pixel_shuffle(y, r)
    return y.reshape(tuple(lead) + (c // (r * r), h * r, w * r))


def embedding(
    inp: Tensor,
    weight: Tensor,
    padding_idx: Any = None,
    max_norm: Any = None,
    norm_type: Any = None,
) -> Tensor:
    """The rows of ``weight`` at the indices ``inp``."""
    if padding_idx is not None:
        raise ValueError("Not support padding_idx Now!")
    if max_norm is not None or norm_type is not None:
        raise ValueError("Not support weight normlization Now!")
    idx = _t(inp)
    return weight[idx.reshape(-1).astype("int64")].reshape(tuple(idx.shape) + (weight.shape[-1],))


def one_hot(inp: Tensor, num_classes: int) -> Tensor:
    """The one-hot encoding (int32) of the integer tensor ``inp``."""
    return fg.one_hot(_t(inp).astype("int64"), num_classes).astype("int32")


def indexing_one_hot(src: Tensor, index: Any, axis: int = 1, keepdims: bool = False) -> Tensor:
    """``src`` picked at ``index`` along ``axis`` (``index`` has ``src``'s shape without
    that axis)."""
    if not isinstance(src, Tensor):
        raise TypeError("src must be of Tensor type")
    idx = _t(index).astype("int64")
    axis = int(axis) % src.ndim
    out = fg.gather(src, axis, fg.expand_dims(idx, axis))
    return out if keepdims else out.squeeze(axis)


def pad(src: Tensor, pad_width: Any, mode: str = "constant", constant_value: float = 0.0) -> Tensor:
    """Pads ``src`` by ``pad_width`` (``((before, after), ...)``, one pair per leading
    axis); ``mode`` "constant", "edge"/"replicate" or "reflect"."""
    mode = mode.lower()
    if mode not in ("constant", "edge", "replicate", "reflect"):
        raise ValueError(f"pad: unsupported mode {mode!r}")
    x = _t(src)
    pairs = [tuple(int(v) for v in p) for p in pad_width]
    pairs += [(0, 0)] * (x.ndim - len(pairs))
    if mode == "constant":
        flat: list = []
        for before, after in reversed(pairs):
            flat += [before, after]
        return _F.pad(x, flat, "constant", constant_value)
    # edge / reflect: numpy-style, one axis at a time with index gathers
    for d, (before, after) in enumerate(pairs):
        if before == 0 and after == 0:
            continue
        n = x.shape[d]
        pos = np.arange(-before, n + after)
        if mode == "reflect":
            period = 2 * (n - 1) if n > 1 else 1
            pos = np.abs(pos) % period
            pos = np.where(pos >= n, period - pos, pos)
        else:
            pos = np.clip(pos, 0, n - 1)
        x = x.index_select(d, fg.tensor(pos.astype(np.int64)))
    return x


# ------------------------------------------------------------------------------ loss


def _reduced(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def binary_cross_entropy(
    pred: Tensor, label: Tensor, with_logits: bool = True, reduction: str = "mean"
) -> Tensor:
    """``-(label * log(p) + (1 - label) * log(1 - p))`` with ``p = sigmoid(pred)`` (by
    default, ``with_logits``) or ``p = pred``; averaged over all entries by default."""
    pred, label = _t(pred), _t(label)
    if with_logits:
        loss = -(label * _F.logsigmoid(pred) + (1 - label) * _F.logsigmoid(-pred))
    else:
        loss = -(label * pred.log() + (1 - label) * (1 - pred).log())
    return _reduced(loss, reduction)


def hinge_loss(pred: Tensor, label: Tensor, norm: str = "L1", reduction: str = "mean") -> Tensor:
    """``sum(relu(1 - pred * label), axis=1)`` (squared terms with ``norm="L2"``), averaged
    over the batch by default."""
    norm = norm.upper()
    if norm not in ("L1", "L2"):
        raise ValueError("norm must be L1 or L2")
    loss = (1.0 - _t(pred) * _t(label)).clamp(min=0)
    loss = loss.sum(axis=1) if norm == "L1" else (loss**2).sum(axis=1)
    return _reduced(loss, reduction)


def l1_loss(pred: Tensor, label: Tensor, reduction: str = "mean") -> Tensor:
    """``|pred - label|``, averaged by default."""
    return _reduced((_t(pred) - _t(label)).abs(), reduction)


def square_loss(pred: Tensor, label: Tensor, reduction: str = "mean") -> Tensor:
    """``(pred - label) ** 2``, averaged by default."""
    d = _t(pred) - _t(label)
    return _reduced(d * d, reduction)


# ---------------------------------------------------------------------------- vision


def flip(inp: Tensor, vertical: bool = True, horizontal: bool = True) -> Tensor:
    """Flips an NHWC image batch up-down (``vertical``) and/or left-right
    (``horizontal``)."""
    dims = ([1] if vertical else []) + ([2] if horizontal else [])
    return fg.flip(inp, dims) if dims else inp * 1


def rot90(inp: Tensor, clockwise: bool = True) -> Tensor:
    """Rotates an NHWC image batch by 90 degrees (clockwise by default)."""
    return fg.rot90(inp, -1 if clockwise else 1, (1, 2))


def nms(boxes: Tensor, scores: Tensor, iou_thresh: float, max_output: Any = None) -> Tensor:
    """Greedy non-maximum suppression of ``(x1, y1, x2, y2)`` boxes: the int32 indices of
    the kept boxes, best score first (at most ``max_output``)."""
    b = boxes.detach().numpy().astype(np.float64)
    s = scores.detach().numpy().reshape(-1)
    order = np.argsort(-s, kind="stable")
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    keep: list = []
    suppressed = np.zeros(len(s), dtype=bool)
    for i in order:
        if suppressed[i]:
            continue
        keep.append(int(i))
        if max_output is not None and len(keep) >= max_output:
            break
        w = np.clip(np.minimum(b[i, 2], b[:, 2]) - np.maximum(b[i, 0], b[:, 0]), 0, None)
        h = np.clip(np.minimum(b[i, 3], b[:, 3]) - np.maximum(b[i, 1], b[:, 1]), 0, None)
        inter = w * h
        iou = inter / np.maximum(area[i] + area - inter, 1e-12)
        suppressed |= iou > iou_thresh
    return fg.tensor(np.asarray(keep, dtype=np.int32))


def sliding_window(
    inp: Tensor, kernel_size: Any, padding: Any = 0, stride: Any = 1, dilation: Any = 1
) -> Tensor:
    """MegEngine's ``sliding_window``: the ``kernel_size`` windows of an ``(N, C, H, W)``
    input as ``(N, C, OH, OW, wh, ww)``."""
    from ..nn import functional as nnF

    x = _t(inp)
    n, c = int(x.shape[0]), int(x.shape[1])
    kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
    cols = nnF.unfold(x, (kh, kw), dilation=dilation, padding=padding, stride=stride)
    oh, ow = _window_counts(x.shape[2:], (kh, kw), padding, stride, dilation)
    return cols.reshape(n, c, kh, kw, oh, ow).permute(0, 1, 4, 5, 2, 3)


def _window_counts(size: Any, kernel: Any, padding: Any, stride: Any, dilation: Any) -> tuple:
    def pair(v: Any) -> tuple:
        if isinstance(v, (int, np.integer)):
            return int(v), int(v)
        return tuple(int(u) for u in v)

    (ph, pw), (sh, sw), (dh, dw) = pair(padding), pair(stride), pair(dilation)
    h, w = (int(v) for v in size)
    kh, kw = kernel
    return (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1


def sliding_window_transpose(
    inp: Tensor,
    output_size: Any,
    kernel_size: Any,
    padding: Any = 0,
    stride: Any = 1,
    dilation: Any = 1,
) -> Tensor:
    """MegEngine's ``sliding_window_transpose``: sums ``(N, C, OH, OW, wh, ww)`` windows
    back into an ``(N, C, H, W)`` image of ``output_size``, the adjoint of
    ``sliding_window``."""
    from ..nn import functional as nnF

    x = _t(inp)
    n, c, oh, ow, kh, kw = (int(v) for v in x.shape)
    cols = x.permute(0, 1, 4, 5, 2, 3).reshape(n, c * kh * kw, oh * ow)
    size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    return nnF.fold(cols, size, (kh, kw), dilation=dilation, padding=padding, stride=stride)


def local_conv2d(
    inp: Tensor,
    weight: Tensor,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    conv_mode: str = "cross_correlation",
) -> Tensor:
    """MegEngine's ``local_conv2d``: a 2-D convolution whose filter differs at each output
    position; ``weight`` is ``(OH, OW, IC, KH, KW, OC)`` or, grouped,
    ``(groups, OH, OW, IC / groups, KH, KW, OC / groups)``."""
    from ..nn import functional as nnF

    if str(conv_mode).lower() != "cross_correlation":
        raise ValueError("local_conv2d: only conv_mode='cross_correlation' is supported")
    x, w = _t(inp), _t(weight)
    if w.ndim == 6:
        w = w.expand_dims(0)
    g, oh, ow, icg, kh, kw, ocg = (int(v) for v in w.shape)
    n = int(x.shape[0])
    cols = nnF.unfold(x, (kh, kw), dilation=dilation, padding=padding, stride=stride)
    if int(cols.shape[-1]) != oh * ow:
        raise fg.ShapeError(
            f"local_conv2d: weight holds {oh}x{ow} output positions, the input gives "
            f"{int(cols.shape[-1])}"
        )
    cols = cols.reshape(n, g, icg * kh * kw, oh * ow)
    out = fg.einsum("ngkl,glko->ngol", cols, w.reshape(g, oh * ow, icg * kh * kw, ocg))
    out = out.reshape(n, g * ocg, oh, ow)
    if bias is not None:
        out = out + _t(bias).reshape(1, -1, 1, 1)
    return out


_CVT_GRAY = {"RGB2GRAY": (0.299, 0.587, 0.114), "BGR2GRAY": (0.114, 0.587, 0.299)}


def cvt_color(inp: Tensor, mode: str = "") -> Tensor:
    """MegEngine's ``vision.cvt_color`` on ``(N, H, W, C)`` images: ``RGB2GRAY``,
    ``BGR2GRAY`` (ITU-R 601 weights, one channel kept), ``GRAY2RGB``/``GRAY2BGR`` and
    ``RGB2BGR``/``BGR2RGB``."""
    x = _t(inp)
    m = str(mode).upper()
    if m in _CVT_GRAY:
        w = fg.tensor(np.asarray(_CVT_GRAY[m], np.float32)).astype(x.dtype)
        return (x[..., :3] * w).sum(axis=-1, keepdims=True)
    if m in ("GRAY2RGB", "GRAY2BGR"):
        return fg.concat([x[..., :1]] * 3, axis=-1)
    if m in ("RGB2BGR", "BGR2RGB"):
        return fg.concat([x[..., 2:3], x[..., 1:2], x[..., 0:1]], axis=-1)
    raise ValueError(f"cvt_color: mode {mode!r} is not supported")


def ctc_loss(
    pred: Tensor,
    pred_lengths: Any,
    label: Any,
    label_lengths: Any,
    blank: int = 0,
    reduction: str = "mean",
) -> Tensor:
    """MegEngine's ``ctc_loss``: ``pred`` holds the (T, N, C) *probabilities* (not their
    logs), the arguments come as ``(pred, pred_lengths, label, label_lengths)`` and ``label``
    is the 1-D concatenation of the targets; ``reduction`` "mean" divides each loss by its
    label length and averages over the batch."""
    from ..nn._ctc import ctc_loss as _ctc

    p = _t(pred)
    logp = p.clamp(min=float(np.finfo(np.dtype(str(p.dtype))).tiny)).log()
    return _ctc(logp, label, pred_lengths, label_lengths, blank=int(blank), reduction=reduction)


vision = types.ModuleType(
    "ferrograd.functional.vision", "MegEngine's functional.vision: image functions."
)

from . import warp as _warp

remap, warp_affine, warp_perspective = _warp.remap, _warp.warp_affine, _warp.warp_perspective
roi_align, roi_pooling = _warp.roi_align, _warp.roi_pooling

for _name in (
    "interpolate",
    "flip",
    "rot90",
    "nms",
    "remap",
    "warp_affine",
    "warp_perspective",
    "roi_align",
    "roi_pooling",
    "cvt_color",
):
    setattr(vision, _name, globals()[_name])

# the names MegEngine's functional.nn adds (also at the top of functional)
NN_NAMES = [
    "local_conv2d",
    "sliding_window",
    "sliding_window_transpose",
    "ctc_loss",
    "conv3d",
    "conv_transpose3d",
    "adaptive_avg_pool2d",
    "adaptive_max_pool2d",
    "avg_pool2d",
    "batch_norm",
    "binary_cross_entropy",
    "conv1d",
    "conv2d",
    "conv_transpose2d",
    "dropout",
    "embedding",
    "gelu",
    "group_norm",
    "hinge_loss",
    "hsigmoid",
    "hswish",
    "indexing_one_hot",
    "instance_norm",
    "interpolate",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "local_response_norm",
    "logsigmoid",
    "logsoftmax",
    "logsumexp",
    "max_pool2d",
    "normalize",
    "one_hot",
    "pad",
    "pixel_shuffle",
    "prelu",
    "relu6",
    "softmax",
    "square_loss",
    "sync_batch_norm",
]

# the names that replace the package's functions at the top of functional
TOP_NAMES = [
    "local_conv2d",
    "sliding_window",
    "sliding_window_transpose",
    "roi_align",
    "roi_pooling",
    "remap",
    "warp_affine",
    "warp_perspective",
    "equal",
    "conv3d",
    "conv_transpose3d",
    "polar",
    "adaptive_avg_pool2d",
    "adaptive_max_pool2d",
    "arange",
    "argmax",
    "argmin",
    "argsort",
    "avg_pool2d",
    "batch_norm",
    "broadcast_to",
    "clip",
    "cond_take",
    "conv1d",
    "cross",
    "left_shift",
    "right_shift",
    "conv2d",
    "conv_transpose2d",
    "copy",
    "diag",
    "dropout",
    "embedding",
    "expand_dims",
    "eye",
    "flatten",
    "floor_div",
    "full",
    "gelu",
    "group_norm",
    "hsigmoid",
    "hswish",
    "indexing_one_hot",
    "instance_norm",
    "layer_norm",
    "leaky_relu",
    "linear",
    "linspace",
    "local_response_norm",
    "logsigmoid",
    "logsoftmax",
    "logsumexp",
    "matinv",
    "max_pool2d",
    "mean",
    "meshgrid",
    "mod",
    "non_zero",
    "nonzero",
    "norm",
    "normalize",
    "one_hot",
    "ones",
    "pixel_shuffle",
    "prelu",
    "relu6",
    "repeat",
    "reshape",
    "round",
    "softmax",
    "sort",
    "split",
    "squeeze",
    "std",
    "sum",
    "sync_batch_norm",
    "tile",
    "transpose",
    "var",
    "vision",
    "zeros",
]
