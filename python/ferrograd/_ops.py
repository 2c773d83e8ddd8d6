"""Ops written in Python over the engine's ops (their gradients come from the ops they are
made of, so they are exact, work at any order and on every device): creation, random
sampling, movement and indexing, reductions. Each is a function ``fg.<name>`` and, where
PyTorch has it, a ``Tensor`` method. Arguments take PyTorch's names (``dim``, ``keepdim``)
and numpy's (``axis``, ``keepdims``)."""

from __future__ import annotations

import contextlib
import functools
import math
import weakref
from collections import namedtuple
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from . import _core
from ._core import DTypeError, ShapeError, Tensor, concat, where
from ._elementwise import isnan
from ._tensor import _dtype_name, default_float, tensor
from .random import Generator, _global_stream, _rng_for, _traced_draw

__all__ = [
    "all",
    "any",
    "arange",
    "argmax",
    "argmin",
    "bernoulli",
    "cat",
    "chunk",
    "cumprod",
    "cumsum",
    "empty",
    "empty_like",
    "eye",
    "flatten",
    "flip",
    "full",
    "full_like",
    "gather",
    "index_add",
    "index_select",
    "linspace",
    "logsumexp",
    "masked_fill",
    "masked_select",
    "multinomial",
    "narrow",
    "norm",
    "normal",
    "one_hot",
    "ones",
    "ones_like",
    "pad",
    "prod",
    "rand",
    "rand_like",
    "randint",
    "randn",
    "randn_like",
    "randperm",
    "repeat",
    "roll",
    "scatter",
    "scatter_add",
    "split",
    "stack",
    "std",
    "tile",
    "tril",
    "triu",
    "unflatten",
    "unsqueeze",
    "var",
    "zeros",
    "zeros_like",
]

_builtin_all, _builtin_any, _builtin_max, _builtin_min = all, any, max, min

# ---------------------------------------------------------------------------------- helpers


def _check_tensor(op: str, name: str, x: Any) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    return x


def _int(op: str, name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{op}: {name} must be an int, got {type(v).__name__} {v!r}")
    return int(v)


def _dim(op: str, x: Tensor, dim: Any, name: str = "dim") -> int:
    """``dim`` as a non-negative axis of ``x`` (a 0-d tensor takes 0 and -1)."""
    d = _int(op, name, dim)
    n = _builtin_max(x.ndim, 1)
    if not -n <= d < n:
        raise IndexError(
            f"{op}: {name} {d} is out of range for a tensor of shape {list(x.shape)} "
            f"(expected -{n} <= {name} < {n})"
        )
    return d % n


def _pick(op: str, dim: Any, axis: Any, default: Any = None) -> Any:
    """PyTorch's ``dim`` or numpy's ``axis`` (not both)."""
    if dim is not None and axis is not None:
        raise TypeError(f"{op}: got both dim= and axis=; give one")
    return dim if dim is not None else (axis if axis is not None else default)


def _dims(op: str, x: Tensor, dim: Any) -> tuple[int, ...]:
    """``dim`` (None: every axis; an int or a sequence of ints) as sorted axes (a 0-d
    tensor takes 0 and -1, which name no axis)."""
    if dim is None:
        return tuple(range(x.ndim))
    if isinstance(dim, (list, tuple)):
        out = sorted({_dim(op, x, d) for d in dim})
        if len(out) != len(dim):
            raise ShapeError(f"{op}: dim {tuple(dim)} repeats an axis")
        return tuple(out) if x.ndim else ()
    d = _dim(op, x, dim)
    return (d,) if x.ndim else ()


def _shape_args(op: str, size: tuple) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = tuple(size[0])
    out = tuple(_int(op, "size", s) for s in size)
    for s in out:
        if s < 0:
            raise ShapeError(f"{op}: sizes must be non-negative, got {list(out)}")
    return out


def _device(device: Any, like: Tensor | None = None) -> str:
    if device is not None:
        return str(device)
    return like.device if like is not None else str(_core.get_default_device())


def _float_dtype(op: str, dtype: Any) -> str:
    name = _dtype_name(dtype) if dtype is not None else default_float()
    if name not in ("float32", "float64", "float16", "bfloat16"):
        raise DTypeError(f"{op}: dtype must be a float dtype, got {name}")
    return name


def _from_numpy(arr: np.ndarray, dtype: str, device: str) -> Tensor:
    if dtype == "bfloat16":
        return tensor(arr.astype(np.float32), device=device).astype("bfloat16")
    a = arr.astype(dtype, copy=False)
    # (ascontiguousarray makes a 0-d array 1-d: the reshape keeps the shape)
    return tensor(np.ascontiguousarray(a).reshape(a.shape), device=device)


def _index(values: Any, device: str) -> Tensor:
    with _shape_data():
        return tensor(np.asarray(values, dtype=np.int64), device=device)


class _shape_data:
    """Inside a trace, the constants made in this block come from shapes and Python numbers
    the trace keys on (a range, a triangular mask), not from data that may change between
    calls: they are not reported as data fixed into the graph."""

    __slots__ = ("prev",)

    def __enter__(self) -> None:
        self.prev = _core._trace_shape_data(True)

    def __exit__(self, *exc: object) -> None:
        _core._trace_shape_data(self.prev)


def _narrow(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    key = (slice(None),) * dim + (slice(start, start + length),)
    return x[key]


def _dtype_like(out: Tensor, x: Tensor) -> Tensor:
    return out if out.dtype == x.dtype else out.astype(x.dtype)


# --------------------------------------------------------------------------------- creation


def _factory(fn: Any) -> Any:
    """Adds PyTorch's ``requires_grad=False`` keyword to a tensor factory."""

    @functools.wraps(fn)
    def make(*args: Any, requires_grad: bool = False, **kw: Any) -> Tensor:
        try:
            t = fn(*args, **kw)
        except ValueError as e:
            if type(e) is ValueError:  # the engine's size checks (a negative size, ...)
                raise ShapeError(str(e)) from None
            raise
        if requires_grad:
            t.requires_grad_()
        return t

    return make


@_factory
def zeros(*size: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """A tensor of zeros (``zeros(2, 3)`` or ``zeros((2, 3))``)."""
    return _core.zeros(*size, dtype=default_float() if dtype is None else dtype, device=device)


@_factory
def ones(*size: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """A tensor of ones (``ones(2, 3)`` or ``ones((2, 3))``)."""
    return _core.ones(*size, dtype=default_float() if dtype is None else dtype, device=device)


@_factory
def zeros_like(input: Tensor, *, dtype: Any = None, device: Any = None) -> Tensor:
    """Zeros with ``input``'s shape (and dtype and device unless given)."""
    if dtype is None and device is None:
        return _core.zeros_like(_check_tensor("zeros_like", "input", input))
    return full_like(input, 0, dtype=dtype, device=device)


@_factory
def ones_like(input: Tensor, *, dtype: Any = None, device: Any = None) -> Tensor:
    """Ones with ``input``'s shape (and dtype and device unless given)."""
    if dtype is None and device is None:
        return _core.ones_like(_check_tensor("ones_like", "input", input))
    return full_like(input, 1, dtype=dtype, device=device)


@_factory
def arange(
    start: Any,
    end: Any = None,
    step: Any = 1,
    *,
    dtype: Any = None,
    device: Any = None,
) -> Tensor:
    """``[start, end)`` in steps of ``step`` (``arange(n)`` is ``0..n-1``): int64 when every
    bound is an int, float32 otherwise (as PyTorch)."""
    if end is None:
        start, end = 0, start
    bounds = []
    for name, v in (("start", start), ("end", end), ("step", step)):
        if isinstance(v, Tensor):
            # a 0-d tensor counts by its dtype (an integer tensor as an int)
            if v.numel() != 1:
                raise TypeError(
                    f"arange: {name} must be a number, got a tensor of shape {list(v.shape)}"
                )
            v = (
                float(v.item())
                if v.dtype.kind in "fc" or v.dtype.name == "bfloat16"
                else int(v.item())
            )
        if isinstance(v, (bool, np.bool_)):
            v = int(v)  # PyTorch's: a bool bound is an int (``arange(True)`` is ``[0]``)
        if not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"arange: {name} must be a number, got {type(v).__name__}")
        if isinstance(v, (float, np.floating)) and not math.isfinite(v):
            raise ShapeError(f"arange: {name} must be finite, got {v}")
        bounds.append(v)
    start, end, step = bounds
    if step == 0:
        raise ShapeError("arange: step must be nonzero")
    if (end - start) * step < 0:
        raise ShapeError(
            f"arange: the range from start {start} to end {end} goes against step {step}"
        )
    ints = _builtin_all(isinstance(v, (int, np.integer)) for v in (start, end, step))
    name = _dtype_name(dtype) if dtype is not None else ("int64" if ints else default_float())
    n = _builtin_max(0, math.ceil((end - start) / step))
    if ints:
        arr = start + step * np.arange(n, dtype=np.int64)
    elif np.dtype(name).kind in "iu":
        # PyTorch's: the length from the bounds in double, the values from the bounds
        # converted to the integer type first (truncated toward zero)
        arr = int(start) + int(step) * np.arange(n, dtype=np.int64)
    else:
        arr = start + step * np.arange(n, dtype=np.float64)
    with _shape_data():
        return _from_numpy(arr, name, _device(device))


@_factory
def linspace(
    start: float, end: float, steps: int, *, dtype: Any = None, device: Any = None
) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive (float32). A
    0-d tensor bound counts as its value, in double precision whatever its dtype."""
    bounds = []
    for arg, v in (("start", start), ("end", end)):
        if isinstance(v, Tensor):
            if v.ndim != 0:
                raise ShapeError(
                    f"linspace: only 0-dimensional start and end tensors are supported, got "
                    f"{arg} with {v.ndim} dimension(s)"
                )
            # as a number: spaced in its own (narrower) dtype the points would be rounded
            v = v.item()
        bounds.append(v)
    start, end = bounds
    steps = _int("linspace", "steps", steps)
    if steps < 0:
        raise ShapeError(f"linspace: steps must be non-negative, got {steps}")
    name = _dtype_name(dtype) if dtype is not None else default_float()
    if name == "bool":
        raise NotImplementedError("linspace: not implemented for bool (as PyTorch's)")
    if np.dtype(name).kind in "iu":
        # PyTorch's: the bounds converted to the integer type (checked, as c10's
        # conversion), then its double linspace truncated toward zero
        from ._torch_compat import _int_scalar

        lo, hi = (
            int(np.array(_int_scalar("linspace", n, v, name)).astype(name))
            for n, v in (("start", start), ("end", end))
        )
        vals = _linspace_trunc(float(lo), float(hi), steps)
        with _shape_data():
            return _from_numpy(vals, name, _device(device))
    with _shape_data():
        return _from_numpy(np.linspace(start, end, steps), name, _device(device))


def _linspace_trunc(lo: float, hi: float, steps: int) -> np.ndarray:
    """``trunc`` of PyTorch's double linspace (CPU), exactly: with ``step = (hi - lo) /
    (steps - 1)``, entry ``i`` of the first half is ``fma(i, step, lo)`` and of the second
    ``fma(-(steps - 1 - i), step, hi)``, each rounded once (its compiled kernel fuses the
    multiply-add). Computed in double (two roundings) and, where that lands near an integer
    (so that truncation could differ), again exactly with integers."""
    if steps == 0:
        return np.zeros(0, np.int64)
    if steps == 1:
        return np.array([math.trunc(lo)], np.int64)
    step = (hi - lo) / (steps - 1)
    i = np.arange(steps)
    first = i < steps // 2
    k = np.where(first, i, i - (steps - 1)).astype(np.float64)
    base = np.where(first, lo, hi)
    prod = k * step
    vals = base + prod
    # where the product is exact (Dekker's error-free split finds no remainder) the sum's
    # one rounding is the fma's; elsewhere the double is off by at most a few units in the
    # last place of its terms, which only matters near an integer
    c = 134217729.0  # 2**27 + 1
    th, sh = c * k, c * step
    kh = th - (th - k)
    stp_h = sh - (sh - step)
    kl, stp_l = k - kh, step - stp_h
    rem = ((kh * stp_h - prod) + kh * stp_l + kl * stp_h) + kl * stp_l
    err = 4 * (np.spacing(np.abs(prod)) + np.spacing(np.abs(base)) + np.spacing(np.abs(vals)))
    out = np.trunc(vals)
    near = (rem != 0) & (np.abs(vals - np.round(vals)) <= err)
    if near.any():
        sn, sd = step.as_integer_ratio()
        for j in np.flatnonzero(near):
            bn, bd = float(base[j]).as_integer_ratio()
            kk = int(k[j])
            exact = (kk * sn * bd + bn * sd) / (sd * bd)  # (a correctly rounded division)
            out[j] = math.trunc(exact)
    return out.astype(np.int64)


@_factory
def eye(n: int, m: int | None = None, *, dtype: Any = None, device: Any = None) -> Tensor:
    """The ``n x m`` identity (ones on the diagonal), float32 unless asked."""
    n = _int("eye", "n", n)
    m = n if m is None else _int("eye", "m", m)
    if n < 0 or m < 0:
        raise ShapeError(f"eye: sizes must be non-negative, got {n} x {m}")
    name = _dtype_name(dtype) if dtype is not None else default_float()
    with _shape_data():
        return _from_numpy(np.eye(n, m), name, _device(device))


def _check_int_fill(op: str, dtype: str, value: Any) -> None:
    """Refuses a Python number that an integer dtype cannot hold, as PyTorch does ("value
    cannot be converted ... without overflow") instead of wrapping it around (int8 300 was
    44) or turning NaN into 0. PyTorch's ranges: a float needs ``min <= v < max + 1`` (it
    is truncated); an int ``min <= v <= max``, or ``-max <= v`` for an unsigned dtype (a
    negative one wraps around)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, float, np.integer, np.floating)
    ):
        return
    if dtype not in ("int8", "uint8", "int16", "int32", "int64", "uint16", "uint32", "uint64"):
        return
    if isinstance(value, (int, np.integer)) and not -(2**63) <= int(value) < 2**64:
        raise OverflowError(f"{op}: value {value} is too big to convert to {dtype}")
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    if isinstance(value, (float, np.floating)):
        ok = math.isfinite(value) and lo <= value < hi + 1
    else:
        ok = (-hi if lo == 0 else lo) <= int(value) <= hi
    if not ok:
        raise RuntimeError(f"{op}: value {value} cannot be converted to {dtype} without overflow")


@_factory
def full(size: Any, fill_value: Any, *, dtype: Any = None, device: Any = None, **kw: Any) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value``: the dtype is inferred from the value
    as PyTorch does (bool, int64 for an int, float32 for a float) unless given."""
    if "value" in kw:  # the engine's spelling
        fill_value = kw.pop("value")
    if kw:
        raise TypeError(f"full: unexpected keyword arguments {sorted(kw)}")
    if dtype is None:
        if isinstance(fill_value, (bool, np.bool_)):
            dtype = "bool"
        elif isinstance(fill_value, (int, np.integer)):
            dtype = "int64"
        elif isinstance(fill_value, (float, np.floating)):
            dtype = default_float()
    return _core.full(size, fill_value, dtype=dtype, device=device)


@_factory
def full_like(input: Tensor, fill_value: Any, *, dtype: Any = None, device: Any = None) -> Tensor:
    """A tensor of ``input``'s shape (and dtype and device unless given) filled with
    ``fill_value``."""
    x = _check_tensor("full_like", "input", input)
    name = _dtype_name(dtype) if dtype is not None else x.dtype.name
    return _core.full(x.shape, fill_value, dtype=name, device=_device(device, x))


@_factory
def empty(*size: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """A new tensor of ``size`` (its values are zeros here: no uninitialised memory is ever
    handed out)."""
    return _core.zeros(
        _shape_args("empty", size), dtype=default_float() if dtype is None else dtype, device=device
    )


@_factory
def empty_like(input: Tensor, *, dtype: Any = None, device: Any = None) -> Tensor:
    """:func:`empty` of ``input``'s shape, dtype and device unless given."""
    return full_like(input, 0, dtype=dtype, device=device)


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two axes (entries with ``col - row <= diagonal``);
    the rest zero."""
    x = _check_tensor("tril", "input", input)
    if x.ndim < 2:
        raise ShapeError(f"tril: input needs at least 2 axes, got shape {list(x.shape)}")
    k = _int("tril", "diagonal", diagonal)
    mask = np.tri(x.shape[-2], x.shape[-1], k, dtype=bool)
    with _shape_data():
        m = tensor(mask, device=x.device)
    return _dtype_like(where(m, x, 0), x)


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two axes (entries with ``col - row >= diagonal``);
    the rest zero."""
    x = _check_tensor("triu", "input", input)
    if x.ndim < 2:
        raise ShapeError(f"triu: input needs at least 2 axes, got shape {list(x.shape)}")
    k = _int("triu", "diagonal", diagonal)
    mask = ~np.tri(x.shape[-2], x.shape[-1], k - 1, dtype=bool)
    with _shape_data():
        m = tensor(mask, device=x.device)
    return _dtype_like(where(m, x, 0), x)


# ----------------------------------------------------------------------------------- random


@_factory
def rand(*size: Any, dtype: Any = None, device: Any = None, generator: Any = None) -> Tensor:
    """Uniform samples in ``[0, 1)`` from the device's seeded stream (``fg.manual_seed``)
    or from ``generator`` (an ``fg.Generator``)."""
    shape = _shape_args("rand", size)
    dev = _device(device)
    if _global_stream(generator):  # the device's counter-based generator (also in fg.trace)
        return _traced_draw(shape, dev, _float_dtype("rand", dtype), False)
    if isinstance(generator, Generator):  # its own counter-based generator
        return generator._draw(shape, dev, _float_dtype("rand", dtype), False)
    rng = _rng_for("rand", generator, dev)
    return _from_numpy(rng.random(shape), _float_dtype("rand", dtype), dev)


@_factory
def randn(*size: Any, dtype: Any = None, device: Any = None, generator: Any = None) -> Tensor:
    """Standard normal samples from the device's seeded stream (or ``generator``'s)."""
    shape = _shape_args("randn", size)
    dev = _device(device)
    if _global_stream(generator):  # the device's counter-based generator (also in fg.trace)
        return _traced_draw(shape, dev, _float_dtype("randn", dtype), True)
    if isinstance(generator, Generator):  # its own counter-based generator
        return generator._draw(shape, dev, _float_dtype("randn", dtype), True)
    rng = _rng_for("randn", generator, dev)
    return _from_numpy(rng.standard_normal(shape), _float_dtype("randn", dtype), dev)


@_factory
def rand_like(input: Tensor, *, dtype: Any = None, device: Any = None) -> Tensor:
    x = _check_tensor("rand_like", "input", input)
    return rand(x.shape, dtype=dtype or x.dtype, device=_device(device, x))


@_factory
def randn_like(input: Tensor, *, dtype: Any = None, device: Any = None) -> Tensor:
    x = _check_tensor("randn_like", "input", input)
    return randn(x.shape, dtype=dtype or x.dtype, device=_device(device, x))


@_factory
def randint(
    low: Any = None,
    high: Any = None,
    size: Any = None,
    *,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
) -> Tensor:
    """Integers in ``[low, high)`` (``randint(high, size)`` and ``randint(high=, size=)``
    start at 0), int64."""
    if low is None:
        if high is None:
            raise TypeError("randint: high is required")
        low = 0
    elif high is None and size is not None:  # randint(high, size=...)
        low, high = 0, low
    elif size is None:  # randint(high, size)
        low, high, size = 0, low, high
    if size is None:
        raise TypeError("randint: size is required")
    low = _int("randint", "low", low)
    high = _int("randint", "high", high)
    if high <= low:
        raise ShapeError(f"randint: high ({high}) must be greater than low ({low})")
    shape = _shape_args("randint", (size,))
    dev = _device(device)
    name = _dtype_name(dtype) if dtype is not None else "int64"
    return _from_numpy(_rng_for("randint", generator, dev).integers(low, high, shape), name, dev)


@_factory
def randperm(n: int, *, generator: Any = None, dtype: Any = None, device: Any = None) -> Tensor:
    """A random permutation of ``0..n-1`` (int64)."""
    n = _int("randperm", "n", n)
    if n < 0:
        raise ShapeError(f"randperm: n must be non-negative, got {n}")
    dev = _device(device)
    name = _dtype_name(dtype) if dtype is not None else "int64"
    return _from_numpy(_rng_for("randperm", generator, dev).permutation(n), name, dev)


def bernoulli(input: Tensor, p: float | None = None, *, generator: Any = None) -> Tensor:
    """1 with probability ``input`` (or ``p``) elementwise, else 0, in ``input``'s dtype."""
    x = _check_tensor("bernoulli", "input", input)
    if not _core._tracing():
        probs = x.numpy().astype(np.float64) if p is None else np.full(x.shape, float(p))
        if probs.size and (np.isnan(probs).any() or probs.min() < 0 or probs.max() > 1):
            raise ShapeError("bernoulli: probabilities must lie in [0, 1]")
        if not _global_stream(generator) and not isinstance(generator, Generator):
            u = _rng_for("bernoulli", generator, x.device).random(x.shape)
            return _from_numpy(u < probs, x.dtype.name, x.device)
    elif not _global_stream(generator):
        _rng_for("bernoulli", generator, x.device)  # raises TraceError
    # the device's counter-based generator (also inside fg.trace), or the generator's own
    wide = x.dtype.name if x.dtype.name in ("float32", "float64") else "float64"
    if isinstance(generator, Generator):
        u = generator._draw(x.shape, x.device, wide, False)
    else:
        u = _traced_draw(x.shape, x.device, wide, False)
    return (u < (x if p is None else float(p))).astype(x.dtype.name)


@_factory
def normal(
    mean: Any = 0.0,
    std: Any = 1.0,
    size: Any = None,
    *,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
) -> Tensor:
    """Normal samples: ``mean`` and ``std`` numbers (then ``size`` is required) or tensors
    (broadcast together)."""
    like = mean if isinstance(mean, Tensor) else (std if isinstance(std, Tensor) else None)
    m = mean.numpy() if isinstance(mean, Tensor) else np.asarray(mean, np.float64)
    s = std.numpy() if isinstance(std, Tensor) else np.asarray(std, np.float64)
    if np.any(s < 0):
        raise ShapeError("normal: std must be non-negative")
    if like is None and size is None:
        raise TypeError("normal: size is required when mean and std are numbers")
    shape = (
        _shape_args("normal", (size,))
        if size is not None
        else np.broadcast_shapes(m.shape, s.shape)
    )
    dev = _device(device, like)
    name = _float_dtype(
        "normal", dtype if dtype is not None else (like.dtype if like is not None else None)
    )
    z = _rng_for("normal", generator, dev).standard_normal(shape)
    return _from_numpy(m + s * z, name, dev)


def multinomial(
    input: Tensor, num_samples: int, replacement: bool = False, *, generator: Any = None
) -> Tensor:
    """Indices drawn from the rows of ``input`` (non-negative weights, 1-D or 2-D), int64.
    Without ``generator=`` the draw comes from the device's counter-based generator, so it
    also runs inside ``fg.trace`` (a fresh draw on every call, the one the same step draws
    eagerly after the same ``manual_seed``); the weights are checked eagerly only."""
    x = _check_tensor("multinomial", "input", input)
    k = _int("multinomial", "num_samples", num_samples)
    if x.ndim not in (1, 2):
        raise ShapeError(f"multinomial: input must be 1-D or 2-D, got shape {list(x.shape)}")
    from .nn._errors import ArgumentRuntimeError

    if k <= 0:
        raise ArgumentRuntimeError(f"multinomial: num_samples must be positive, got {k}")
    if x.shape[-1] == 0:
        raise ShapeError(
            f"multinomial: input of shape {list(x.shape)} has no categories to draw from"
        )
    if not replacement and k > x.shape[-1]:
        raise ArgumentRuntimeError(
            f"multinomial: cannot draw {k} samples without replacement from "
            f"{x.shape[-1]} categories"
        )
    if _core._tracing():
        if not _global_stream(generator):
            _rng_for("multinomial", generator, x.device)  # raises TraceError
    else:
        w = x.numpy().astype(np.float64).reshape(-1, x.shape[-1])
        if not np.isfinite(w).all() or (w < 0).any():
            raise ShapeError("multinomial: weights must be finite and non-negative")
        for row in w:
            if row.sum() <= 0:
                raise ShapeError("multinomial: a row of weights sums to zero")
            if not replacement and k > np.count_nonzero(row):
                raise ArgumentRuntimeError(
                    f"multinomial: cannot draw {k} samples without replacement from "
                    f"{np.count_nonzero(row)} categories of nonzero weight"
                )
        if not _global_stream(generator) and not isinstance(generator, Generator):
            rng = _rng_for("multinomial", generator, x.device)
            rows = [rng.choice(r.size, size=k, replace=replacement, p=r / r.sum()) for r in w]
            out = np.array(rows, dtype=np.int64).reshape(*x.shape[:-1], k)
            return tensor(out, device=x.device)
    # the device's counter-based generator, eagerly and inside fg.trace alike (a traced step
    # draws on each call what the same step draws eagerly after the same manual_seed)
    from .random import _categories

    w2 = x.detach().astype("float64").reshape(-1, x.shape[-1])
    if isinstance(generator, Generator):  # its own counter-based generator
        draw = lambda shape: generator._draw(shape, x.device, "float64", False)
    else:
        draw = lambda shape: _traced_draw(shape, x.device, "float64", False)
    out = _categories(w2, k, replacement, draw)
    return out.reshape(*x.shape[:-1], k)


def _uniform_(self: Tensor, a: float = 0.0, b: float = 1.0, *, generator: Any = None) -> Tensor:
    """Fills ``self`` in place with uniform samples in ``[a, b)``."""
    from .nn._errors import require_float_fill

    require_float_fill("uniform_", self)
    u = _rng_for("uniform_", generator, self.device).uniform(a, b, self.shape)
    self.copy_(_from_numpy(u, self.dtype.name, self.device))
    return self


def _normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator: Any = None) -> Tensor:
    """Fills ``self`` in place with normal samples."""
    from .nn._errors import require_float_fill

    require_float_fill("normal_", self)
    z = _rng_for("normal_", generator, self.device).normal(mean, std, self.shape)
    self.copy_(_from_numpy(z, self.dtype.name, self.device))
    return self


def _bernoulli_(self: Tensor, p: Any = 0.5, *, generator: Any = None) -> Tensor:
    """Fills ``self`` in place with 1 with probability ``p`` (a number, or a tensor
    broadcast to ``self``'s shape), else 0. Drawn as :func:`bernoulli` draws, so with the
    global generator it also runs inside ``fg.trace`` (a fresh draw on every call, as the
    stochastic-depth masks of a traced training step need)."""
    if isinstance(p, Tensor):
        try:
            probs = p.broadcast_to(self.shape)
        except ValueError:
            raise ShapeError(
                f"bernoulli_: p of shape {list(p.shape)} does not broadcast to the tensor's "
                f"shape {list(self.shape)}"
            ) from None
        wide = p.dtype.name if p.dtype.name in ("float32", "float64") else "float64"
        out = bernoulli(probs.astype(wide), generator=generator)
    else:
        if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)):
            raise TypeError(f"bernoulli_: p must be a number or a Tensor, got {p!r}")
        if not 0.0 <= float(p) <= 1.0:
            from .nn._errors import ArgumentRuntimeError

            raise ArgumentRuntimeError(f"bernoulli_: p must lie in [0, 1], got p={float(p)}")
        out = bernoulli(self, float(p), generator=generator)
    self.copy_(out)
    return self


# ------------------------------------------------------------------------ movement, indexing


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merges axes ``start_dim..end_dim`` (inclusive) into one (a view when it can be)."""
    x = _check_tensor("flatten", "input", input)
    if x.ndim == 0:
        return x.reshape(1)
    s = _dim("flatten", x, start_dim, "start_dim")
    e = _dim("flatten", x, end_dim, "end_dim")
    if s > e:
        raise ShapeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    if s == e:
        return x  # PyTorch's: nothing to merge, the tensor itself
    shape = list(x.shape)
    return x.reshape(*shape[:s], int(np.prod(shape[s : e + 1])), *shape[e + 1 :])


def unflatten(input: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
    """Splits axis ``dim`` into ``sizes`` (one may be -1)."""
    x = _check_tensor("unflatten", "input", input)
    d = _dim("unflatten", x, dim)
    sizes = [_int("unflatten", "sizes", s) for s in sizes]
    known = int(np.prod([s for s in sizes if s != -1]))
    if sizes.count(-1) > 1 or (-1 not in sizes and known != x.shape[d]):
        raise ShapeError(
            f"unflatten: sizes {sizes} do not multiply to the length {x.shape[d]} of dim {d}"
        )
    if -1 in sizes:
        if known == 0 or x.shape[d] % known:
            raise ShapeError(f"unflatten: sizes {sizes} do not divide the length {x.shape[d]}")
        sizes[sizes.index(-1)] = x.shape[d] // known
    shape = list(x.shape)
    return x.reshape(*shape[:d], *sizes, *shape[d + 1 :])


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """A new axis of length 1 at ``dim`` (``-1`` appends)."""
    x = _check_tensor("unsqueeze", "input", input)
    d = _int("unsqueeze", "dim", dim)
    n = x.ndim + 1
    if not -n <= d < n:
        raise IndexError(f"unsqueeze: dim {d} is out of range for a result with {n} axes")
    return x.expand_dims(d % n)


def _promoted(tensors: Any) -> Any:
    """The tensors of a sequence in one dtype (PyTorch's promotion of them all), else the
    sequence as it is."""
    ts = list(tensors) if isinstance(tensors, (list, tuple)) else tensors
    tensors_only = isinstance(ts, list) and _builtin_all(isinstance(t, Tensor) for t in ts)
    if tensors_only and len({t.dtype.name for t in ts}) > 1:
        from ._torch_extra import promote_types

        # dtypes folded pairwise (a 0-d stand-in for the running result would rank below the
        # tensors as a scalar does: float16 after float64 gave float16)
        target = ts[0].dtype
        for t in ts[1:]:
            target = promote_types(target, t.dtype)
        name = _dtype_name(target)
        ts = [t if t.dtype.name == name else t.astype(name) for t in ts]
    return ts


def _skip_legacy_empty(ts: Any) -> Any:
    """PyTorch's legacy rule of ``cat``: 1-D tensors of shape ``(0,)`` are skipped whatever
    the others' shapes (all of them such: the result is one of them)."""
    if not isinstance(ts, list) or not ts or not _builtin_all(isinstance(t, Tensor) for t in ts):
        return ts, False
    kept = [t for t in ts if not (t.ndim == 1 and t.shape[0] == 0)]
    if len(kept) == len(ts):
        return ts, False
    return (kept, False) if kept else ([ts[0]], True)


def cat(
    tensors: Sequence[Tensor],
    dim: int | None = None,
    *,
    axis: int | None = None,
    out: Any = None,
) -> Tensor:
    """:func:`concat` with PyTorch's name and ``dim``; tensors of different dtypes are
    promoted to a common one first, as PyTorch's ``cat`` (``concat`` takes one dtype);
    1-D empty tensors are skipped (PyTorch's legacy rule); ``out=`` as PyTorch's."""
    if out is not None:
        return _write_out("cat", out, _cast_for_out("cat", out, cat(tensors, dim, axis=axis)))
    if isinstance(tensors, Tensor):
        raise TypeError(
            "cat(): argument 'tensors' (position 1) must be tuple of Tensors, not Tensor"
        )
    ts, only_empty = _skip_legacy_empty(_promoted(tensors))
    if only_empty:
        return ts[0].clone()
    return concat(ts, _pick("cat", dim, axis, 0))


def stack(
    tensors: Sequence[Tensor], axis: Any = None, *, dim: Any = None, out: Any = None
) -> Tensor:
    """The tensors (of one shape) joined along a new axis ``axis`` (or ``dim``); different
    dtypes are promoted to a common one first, as PyTorch's."""
    if dim is not None and axis is not None:
        raise TypeError("stack: got both axis and dim, which are two names of one argument")
    ts = _promoted(tensors)
    r = _core.stack(ts, dim if dim is not None else (axis if axis is not None else 0))
    if out is not None:
        return _write_out("stack", out, _cast_for_out("stack", out, r))
    return r


def _cast_for_out(op: str, out: Any, result: Tensor) -> Tensor:
    """``result`` cast to ``out``'s dtype where the cast keeps its kind (PyTorch's ``cat``
    and ``stack`` write float32 inputs into a float64 ``out``, not into an int64 one)."""
    if isinstance(out, Tensor) and out.dtype != result.dtype:
        import ferrograd as fg

        if not fg.can_cast(result.dtype, out.dtype):
            raise DTypeError(
                f"{op}: input types ({result.dtype}) can't be cast to the desired output "
                f"type {out.dtype}"
            )
        return result.astype(out.dtype.name)
    return result


def _write_out(op: str, out: Any, result: Tensor) -> Tensor:
    """PyTorch's ``out=``: ``result`` written into ``out`` (of ``result``'s dtype), which is
    resized (with PyTorch's warning when it held elements) to ``result``'s shape; returns
    ``out``. As PyTorch's, refused where ``result`` needs a gradient."""
    if not isinstance(out, Tensor):
        raise TypeError(f"{op}: out must be a Tensor, got {type(out).__name__}")
    from .autodiff import is_grad_enabled

    if result.requires_grad and is_grad_enabled():
        raise RuntimeError(
            f"{op}(): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad."
        )
    if out.dtype != result.dtype:
        raise DTypeError(
            f"{op}: Expected out tensor to have dtype {result.dtype}, but got {out.dtype} instead"
        )
    if out.numel() and _builtin_any(st == 0 and n > 1 for st, n in zip(out.stride(), out.shape)):
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to "
            "a single memory location. Please clone() the tensor before performing the "
            "operation."
        )
    if tuple(out.shape) == tuple(result.shape):
        if out.numel():  # (nothing to write into an empty out, broadcast or not)
            out.copy_(result.detach())
        return out
    if out.numel():
        import warnings

        warnings.warn(
            f"An output with one or more elements was resized since it had shape "
            f"{list(out.shape)}, which does not match the required output shape "
            f"{list(result.shape)}. This behavior is deprecated, and in a future PyTorch "
            "release outputs will not be resized unless they have zero elements.",
            UserWarning,
            stacklevel=3,
        )
    out.data = result.detach().clone()
    return out


def _int_of_0d(op: str, name: str, v: Any) -> Any:
    """A 0-d integer tensor as its int, as PyTorch takes one for an int argument (other
    values as they are)."""
    if not isinstance(v, Tensor):
        return v
    if v.ndim != 0:
        raise ShapeError(f"{op}: {name} must be a 0-d integer tensor, got shape {list(v.shape)}")
    if v.dtype.kind not in "iu":
        raise DTypeError(f"{op}: {name} must be a 0-d integer tensor, got {v.dtype}")
    return int(v.item())


def narrow(input: Tensor, dim: int, start: Any, length: Any) -> Tensor:
    """The ``length`` entries from ``start`` along ``dim`` (a view; ``start`` may be a 0-d
    integer tensor, as PyTorch's)."""
    x = _check_tensor("narrow", "input", input)
    if x.ndim == 0:
        raise ShapeError("narrow: cannot be applied to a 0-dim tensor")
    d = _dim("narrow", x, dim)
    n = x.shape[d]
    start = _int("narrow", "start", _int_of_0d("narrow", "start", start))
    length = _int("narrow", "length", _int_of_0d("narrow", "length", length))
    if start < 0:
        start += n
    if not 0 <= start <= n or length < 0 or start + length > n:
        from .nn._errors import IndexRuntimeError

        raise IndexRuntimeError(
            f"narrow: start {start} and length {length} fall outside dim {d} of length {n}"
        )
    return _narrow(x, d, start, length)


def split(
    tensor: Tensor,
    split_size_or_sections: Any = None,
    dim: int = 0,
    *,
    axis: Any = None,
    split_size: Any = None,
) -> tuple[Tensor, ...]:
    """Pieces along ``dim`` (or ``axis``): of ``split_size`` each (the last may be shorter),
    or of the listed sizes (which must add up to the length), as PyTorch's. MegEngine's
    meaning (a number of pieces, or cut positions) is ``ferrograd.functional.split``."""
    x = _check_tensor("split", "tensor", tensor)
    if split_size is not None:  # (the method's keyword in PyTorch)
        if split_size_or_sections is not None:
            raise TypeError("split: give split_size_or_sections or split_size, not both")
        split_size_or_sections = split_size
    if split_size_or_sections is None:
        raise TypeError("split: missing split_size_or_sections")
    if axis is not None:
        dim = axis
    d = _dim("split", x, dim)
    n = x.shape[d]
    return _split_sizes(x, d, n, split_size_or_sections)


def _split_pieces(x: Tensor, axis: Any, nsplits_or_sections: Any) -> tuple[Tensor, ...]:
    """MegEngine's split: an int is the number of pieces (equal sizes, as
    ``numpy.array_split``), a list the positions to cut at."""
    d = _dim("split", x, axis, "axis")
    n = x.shape[d]
    if isinstance(nsplits_or_sections, (list, tuple)):
        cuts = [_int("split", "nsplits_or_sections", c) for c in nsplits_or_sections]
        if cuts != sorted(cuts) or (cuts and (cuts[0] < 0 or cuts[-1] > n)):
            raise ShapeError(f"split: cut positions {cuts} must rise within [0, {n}]")
        bounds = [0, *cuts, n]
    else:
        k = _int("split", "nsplits_or_sections", nsplits_or_sections)
        if k <= 0:
            raise ShapeError(f"split: the number of pieces must be positive, got {k}")
        bounds = [i * (n // k) + _builtin_min(i, n % k) for i in range(k + 1)]
    return tuple(_narrow(x, d, a, b - a) for a, b in zip(bounds[:-1], bounds[1:]))


def _split_sizes(x: Tensor, d: int, n: int, split_size_or_sections: Any) -> tuple[Tensor, ...]:
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [_int("split", "split_size_or_sections", s) for s in split_size_or_sections]
        if sum(sizes) != n or _builtin_any(s < 0 for s in sizes):
            raise ShapeError(f"split: sections {sizes} do not add up to the length {n} of dim {d}")
    else:
        size = _int("split", "split_size_or_sections", split_size_or_sections)
        if size <= 0:
            raise ShapeError(f"split: split_size must be positive, got {size}")
        sizes = [_builtin_min(size, n - i) for i in range(0, n, size)] or [0]
    out, at = [], 0
    for s in sizes:
        out.append(_narrow(x, d, at, s))
        at += s
    return tuple(out)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """At most ``chunks`` pieces of ``ceil(n / chunks)`` along ``dim`` (as PyTorch)."""
    x = _check_tensor("chunk", "input", input)
    chunks = _int("chunk", "chunks", chunks)
    if chunks <= 0:
        raise ShapeError(f"chunk: chunks must be positive, got {chunks}")
    d = _dim("chunk", x, dim)
    n = x.shape[d]
    return split(x, _builtin_max(1, -(-n // chunks)), d)


def tile(input: Tensor, dims: Sequence[int]) -> Tensor:
    """``input`` repeated ``dims[i]`` times along each axis (numpy's ``tile``)."""
    x = _check_tensor("tile", "input", input)
    if isinstance(dims, (int, np.integer)):
        dims = (dims,)
    reps = [_int("tile", "dims", r) for r in dims]
    if _builtin_any(r < 0 for r in reps):
        raise ShapeError(f"tile: repeats must be non-negative, got {reps}")
    n = _builtin_max(len(reps), x.ndim)
    reps = [1] * (n - len(reps)) + reps
    shape = [1] * (n - x.ndim) + list(x.shape)
    inter = []
    for r, s in zip(reps, shape):
        inter += [1, s]
    y = x.reshape(*inter) if inter else x
    target = []
    for r, s in zip(reps, shape):
        target += [r, s]
    y = y.broadcast_to(*target).reshape(*[r * s for r, s in zip(reps, shape)])
    # always new memory, as PyTorch's repeat and tile (a view would alias the input and
    # refuse in-place writes)
    return y.clone() if x.numel() and y._data_key[0] == x._data_key[0] else y


def repeat(input: Tensor, *sizes: Any) -> Tensor:
    """PyTorch's ``Tensor.repeat``: tiles ``input`` ``sizes[i]`` times along each axis
    (at least as many sizes as axes)."""
    x = _check_tensor("repeat", "input", input)
    reps = _shape_args("repeat", sizes)
    if len(reps) < x.ndim:
        raise ShapeError(
            f"repeat: needs at least as many repeats ({len(reps)}) as the tensor has axes "
            f"({x.ndim})"
        )
    return tile(x, reps)


def flip(input: Tensor, dims: Any) -> Tensor:
    """``input`` with the order of entries reversed along ``dims``."""
    x = _check_tensor("flip", "input", input)
    for d in _dims("flip", x, dims if dims is not None else []):
        n = x.shape[d]
        x = _core.index_select(x, d, _index(np.arange(n - 1, -1, -1), x.device))
    return x


def roll(input: Tensor, shifts: Any, dims: Any = None) -> Tensor:
    """Entries shifted by ``shifts`` along ``dims``, wrapping around (no ``dims``: over the
    flattened tensor, shape kept)."""
    x = _check_tensor("roll", "input", input)
    if isinstance(shifts, (list, tuple)) and not shifts:
        raise ShapeError("roll: `shifts` required")
    if dims is None or (isinstance(dims, (list, tuple)) and not dims):
        if isinstance(shifts, (list, tuple)):
            if len(shifts) != 1:
                raise ShapeError(
                    f"roll: shifts and dimensions must align. shifts: {len(shifts)}, dims:0"
                )
            shifts = shifts[0]
        return roll(x.reshape(-1), shifts, 0).reshape(*x.shape)
    shifts = list(shifts) if isinstance(shifts, (list, tuple)) else [shifts]
    dims = list(dims) if isinstance(dims, (list, tuple)) else [dims]
    if len(shifts) != len(dims):
        raise ShapeError(
            f"roll: shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}"
        )
    for s, d in zip(shifts, dims):
        d = _dim("roll", x, d)
        s = _int("roll", "shifts", s)
        n = x.shape[d]
        if n:
            x = _core.index_select(x, d, _index((np.arange(n) - s) % n, x.device))
    return x


def _index_tensor(op: str, index: Any, device: str) -> Tensor:
    if not isinstance(index, Tensor):
        index = tensor(np.asarray(index))
    if index.dtype.kind not in "iu":
        raise DTypeError(f"{op}: index must hold integers, got {index.dtype}")
    _wide_index(op, index)
    if index.dtype.name != "int64":
        index = index.astype("int64")
    return index if index.device == device else index.to(device)


def _wide_index(op: str, index: Tensor) -> None:
    """PyTorch's gathers and scatters take int64 or int32 indices only (not the 8- and
    16-bit types, nor unsigned ones)."""
    if index.dtype.name not in ("int64", "int32"):
        raise DTypeError(f"{op}: index must be an int64 or int32 tensor, got {index.dtype}")


def _fit(op: str, name: str, x: Tensor, shape: tuple, d: int) -> Tensor:
    """``x`` cut to ``shape`` (PyTorch lets the index be smaller than the other tensor on
    every axis but ``d`` where it reads, on every axis where it writes)."""
    if x.ndim != len(shape):
        raise ShapeError(f"{op}: index has {len(shape)} axes but {name} has shape {list(x.shape)}")
    key = []
    for e, (a, b) in enumerate(zip(x.shape, shape)):
        if b > a and e != d:
            raise ShapeError(
                f"{op}: index of shape {list(shape)} is larger than {name} of shape "
                f"{list(x.shape)} on axis {e}"
            )
        key.append(slice(0, b) if e != d else slice(None))
    return x[tuple(key)] if tuple(x.shape) != tuple(shape) else x


def gather(
    input: Tensor,
    dim: Any = None,
    index: Any = None,
    *,
    axis: Any = None,
    sparse_grad: bool = False,
) -> Tensor:
    """``out[p] = input[p with dim replaced by index[p]]`` (PyTorch's ``gather``; the index
    may be smaller than ``input`` on the other axes). ``axis=`` is ``dim``'s other name.
    ``sparse_grad`` is accepted for PyTorch's signature: the gradient is always dense (its
    values are the same)."""
    x = _check_tensor("gather", "input", input)
    dim = _pick("gather", dim, axis)
    if dim is None or index is None:
        raise TypeError("gather: dim (or axis) and index are required")
    d = _dim("gather", x, dim)
    idx = _index_tensor("gather", index, x.device)
    if idx.numel() == 0:
        # an empty index gives an empty result of its shape whatever its dims (PyTorch's),
        # gathered from input so that it is on input's graph
        none = _core.zeros((0,), dtype="int64", device=x.device)
        return _core.index_select(x.reshape(-1), 0, none).reshape(*idx.shape)
    if x.ndim == 0 or idx.ndim == 0:
        # PyTorch reads a 0-d input or index as 1-D of one entry; the output takes the
        # index's shape
        x1, i1 = _as_1d(x), _as_1d(idx)
        if x1.ndim != i1.ndim:
            raise ShapeError(
                f"gather: index of shape {list(idx.shape)} must have as many dims as input "
                f"of shape {list(x.shape)}"
            )
        return gather(x1, d, i1).reshape(*idx.shape)
    src = _fit("gather", "input", x, tuple(idx.shape), d)
    with _out_of_range_is_runtime("gather"):
        return _core.take_along_axis(src, idx, d)


@contextlib.contextmanager
def _out_of_range_is_runtime(op: str) -> Iterator[None]:
    """An index out of range in gather, scatter_add, index_add or index_select raises an
    error that is both PyTorch's ``RuntimeError`` and the ``IndexError`` ferrograd raised,
    its message naming ``op`` (not the engine op it is written with)."""
    try:
        yield
    except IndexError as e:
        if isinstance(e, RuntimeError):
            raise
        from .nn._errors import IndexRuntimeError

        head, sep, rest = str(e).partition(": ")
        msg = f"{op}: {rest}" if sep and " " not in head else f"{op}: {e}"
        raise IndexRuntimeError(msg) from None


def _as_1d(x: Tensor) -> Tensor:
    """A 0-d tensor as 1-D of one entry (others as they are)."""
    return x.reshape(1) if x.ndim == 0 else x


def index_select(input: Tensor, dim: Any, index: Any) -> Tensor:
    """The slices ``index`` (1-D, or 0-d for one slice) of ``input`` along ``dim``; a 0-d
    ``input`` takes an index of one entry and stays 0-d, as PyTorch's."""
    x = _check_tensor("index_select", "input", input)
    index = _index_tensor("index_select", index, x.device)
    if index.ndim > 1:
        raise IndexError(
            f"index_select: index must be a vector (0-d or 1-D), got shape {list(index.shape)}"
        )
    d = _dim("index_select", x, dim)
    if x.ndim == 0:
        if index.numel() != 1:
            raise ShapeError(
                f"index_select: the index into a 0-d input must hold exactly 1 value, got "
                f"{index.numel()}"
            )
        return _core.index_select(x.reshape(1), 0, index.reshape(1)).reshape()
    with _out_of_range_is_runtime("index_select"):
        return _core.index_select(x, d, _as_1d(index))


def _scatter_src(op: str, x: Tensor, idx: Tensor, d: int, src: Any) -> Tensor:
    """``src`` cut to the index's shape (a scalar filled to it), after checking that the
    index fits ``x`` on every axis but ``d``, as PyTorch's scatter does."""
    too_large = [e for e, (i, n) in enumerate(zip(idx.shape, x.shape)) if e != d and i > n]
    if idx.ndim != x.ndim or too_large:
        raise ShapeError(
            f"{op}: index of shape {list(idx.shape)} must have input's number of dimensions "
            f"and be no larger than input of shape {list(x.shape)} apart from dim {d}"
        )
    if isinstance(src, Tensor):
        _same_dtype(op, x, src)
        return _fit(op, "src", src, tuple(idx.shape), -1)
    return _core.full(idx.shape, src, dtype=x.dtype.name, device=x.device)


def _same_dtype(op: str, x: Tensor, src: Tensor, name: str = "src") -> None:
    """PyTorch's scatters take a ``src`` tensor of ``input``'s dtype only (no conversion)."""
    if src.dtype != x.dtype:
        raise DTypeError(
            f"{op}: {name}'s dtype {src.dtype} must be input's dtype {x.dtype} (PyTorch does "
            "not convert it)"
        )


def scatter_add(input: Tensor, dim: int, index: Any, src: Tensor) -> Tensor:
    """``input`` with ``src[p]`` added at ``p with dim replaced by index[p]`` (repeated
    indices add up); differentiable in ``input`` and ``src``."""
    x = _check_tensor("scatter_add", "input", input)
    d = _dim("scatter_add", x, dim)
    idx = _index_tensor("scatter_add", index, x.device)
    if idx.numel() == 0:
        # an empty index changes nothing, whatever its shape (PyTorch's)
        if isinstance(src, Tensor):
            _same_dtype("scatter_add", x, src)
        return x.clone()
    if x.ndim == 0 or idx.ndim == 0:
        # PyTorch reads 0-d tensors as 1-D of one entry
        s1 = _as_1d(src) if isinstance(src, Tensor) else src
        return scatter_add(_as_1d(x), d, _as_1d(idx), s1).reshape(*x.shape)
    s = _scatter_src("scatter_add", x, idx, d, src)
    if x.dtype.name == "bool":
        # a sum of booleans is True where any is (PyTorch's): added up as int8, read as bool
        with _out_of_range_is_runtime("scatter_add"):
            added = _core._scatter_add(s.astype("int8"), idx, d, tuple(x.shape))
        return x | (added != 0)
    with _out_of_range_is_runtime("scatter_add"):
        return x + _core._scatter_add(s, idx, d, tuple(x.shape))


def scatter(
    input: Tensor, dim: int, index: Any, src: Any = None, *, value: Any = None, reduce: Any = None
) -> Tensor:
    """``input`` with ``src[p]`` (or ``value``) written at ``p with dim replaced by
    index[p]``; ``reduce="add"``/``"multiply"`` combines instead. Where an index repeats,
    the last write wins, as with PyTorch on the CPU (which leaves it unspecified)."""
    x = _check_tensor("scatter", "input", input)
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter: give src or value")
    d = _dim("scatter", x, dim)
    idx = _index_tensor("scatter", index, x.device)
    if idx.numel() == 0:
        # an empty index changes nothing, whatever its shape (PyTorch's)
        if isinstance(src, Tensor):
            _same_dtype("scatter", x, src)
        return x.clone()
    if x.ndim == 0 or idx.ndim == 0:
        # PyTorch reads 0-d tensors as 1-D of one entry
        s1 = _as_1d(src) if isinstance(src, Tensor) else src
        return scatter(_as_1d(x), d, _as_1d(idx), s1, reduce=reduce).reshape(*x.shape)
    if reduce == "add":
        return scatter_add(x, d, idx, src)
    s = _scatter_src("scatter", x, idx, d, src)
    if reduce not in (None, "multiply"):
        raise ShapeError(f"scatter: reduce must be None, 'add' or 'multiply', got {reduce!r}")
    if reduce == "multiply":
        # scatter_reduce's product (include_self): the factors multiplied in order, PyTorch's
        # gradient rule for zeros, and a graph node that reads each call's values in a trace
        from ._torch_extra import scatter_reduce

        return scatter_reduce(x, d, idx, s, "prod")
    if _core._tracing():
        # inside fg.trace the index's values are not known while the graph is built
        return _scatter_traced(x, d, idx, s)
    pos = idx.numpy()
    n = x.shape[d]
    if pos.size and (pos.min() < -n or pos.max() >= n):
        from .nn._errors import IndexRuntimeError

        bad = int(pos.max()) if pos.max() >= n else int(pos.min())
        raise IndexRuntimeError(f"scatter: index {bad} is out of bounds for dim {d} with size {n}")
    rank = _repeat_rank(pos, d, tuple(x.shape), from_end=True)
    # a repeated target takes its last write, as PyTorch's CPU kernel (which documents the
    # choice as unspecified)
    if rank.size and rank.max() > 0:
        s = where(tensor(rank == 0, device=x.device), s, 0)
    hits = _core._scatter_add(
        _core.ones(idx.shape, dtype="int64", device=x.device), idx, d, tuple(x.shape)
    )
    if s.dtype.name == "bool":  # (no bool sums: written as int8, read back as bool)
        written = _core._scatter_add(s.astype("int8"), idx, d, tuple(x.shape)) != 0
    else:
        written = _core._scatter_add(s, idx, d, tuple(x.shape))
    return _dtype_like(where(hits > 0, written, x), x)


def _scatter_traced(x: Tensor, d: int, idx: Tensor, s: Tensor) -> Tensor:
    """``scatter`` (no reduction) with graph ops only, for fg.trace: the same last write per
    target as the eager path, found by sorting the entries by (target, row-major position)
    and keeping the last of each run of equal targets. An index out of range raises when the
    step runs (in the scatter kernel)."""
    shape = tuple(x.shape)
    m = idx.numel()
    if m == 0:
        return x
    n = shape[d]
    pos = where(idx < 0, idx + n, idx)
    flat = None
    stride = 1
    for e in reversed(range(idx.ndim)):
        if e == d:
            c = pos
        else:
            view = [1] * idx.ndim
            view[e] = idx.shape[e]
            c = arange(idx.shape[e], dtype="int64", device=x.device).reshape(*view)
        flat = c * stride if flat is None else flat + c * stride
        stride *= shape[e]
    flat = (flat + _core.zeros(tuple(idx.shape), dtype="int64", device=x.device)).reshape(m)
    order = arange(m, dtype="int64", device=x.device)
    perm = _core._argsort(flat * m + order, 0, False)
    by_target = flat[perm]
    last = concat(
        [by_target[1:] != by_target[:-1], _core.ones((1,), dtype="bool", device=x.device)], 0
    )
    keep = last[_core._argsort(perm, 0, False)].reshape(*idx.shape)
    ones = _core.ones(idx.shape, dtype="int64", device=x.device)
    hits = _core._scatter_add(ones, idx, d, shape)
    s = where(keep, s, 0)
    if s.dtype.name == "bool":
        written = _core._scatter_add(s.astype("int8"), idx, d, shape) != 0
    else:
        written = _core._scatter_add(s, idx, d, shape)
    return _dtype_like(where(hits > 0, written, x), x)


def _repeat_rank(pos: np.ndarray, d: int, shape: tuple, from_end: bool = False) -> np.ndarray:
    """For each index entry, how many earlier entries (in row-major order) hit the same
    target: 0 for the first write to each target (``from_end``: how many later ones, 0 for
    the last write)."""
    if pos.size == 0:
        return np.zeros(pos.shape, np.int64)
    pos = np.where(pos < 0, pos + shape[d], pos)
    grids = np.indices(pos.shape)
    coords = [grids[e] if e != d else pos for e in range(pos.ndim)]
    flat = np.ravel_multi_index([c.reshape(-1) for c in coords], shape)
    order = np.argsort(flat, kind="stable")
    sorted_flat = flat[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_flat)) + 1]
    lengths = np.diff(np.r_[starts, flat.size])
    run_start = np.repeat(starts, lengths)
    rank = np.empty(flat.size, np.int64)
    within = np.arange(flat.size) - run_start
    rank[order] = np.repeat(lengths, lengths) - 1 - within if from_end else within
    return rank.reshape(pos.shape)


def index_add(input: Tensor, dim: int, index: Any, source: Tensor, *, alpha: Any = 1) -> Tensor:
    """``input`` with ``alpha * source`` added at the entries ``index`` (1-D) along ``dim``
    (repeated indices add up)."""
    x = _check_tensor("index_add", "input", input)
    src = _check_tensor("index_add", "source", source)
    d = _dim("index_add", x, dim)
    idx = _index_tensor("index_add", index, x.device)
    if x.dtype.kind in "iub" and isinstance(alpha, float) and not alpha.is_integer():
        # (PyTorch's add refuses it; its index_add silently truncates alpha to an integer)
        raise DTypeError(
            f"index_add: alpha must not be a fractional number ({alpha}) for integral inputs"
        )
    if idx.ndim > 1:
        raise IndexError(f"index_add: index must be 0-d or 1-D, got shape {list(idx.shape)}")
    idx = idx.reshape(-1)
    if x.ndim == 0:
        # a 0-d input takes a 0-d source and one index, 0 (-1 too, wrapping as ferrograd's
        # indices do elsewhere, where PyTorch refuses it)
        if idx.shape[0] != 1:
            raise IndexError(
                f"index_add: the index into a 0-d input must hold exactly 1 value, got "
                f"{idx.shape[0]}"
            )
        if src.ndim != 0:
            raise ShapeError(
                f"index_add: source must be 0-d for a 0-d input, got shape {list(src.shape)}"
            )
        i = int(idx.numpy()[0])
        if i not in (0, -1):
            raise IndexError(f"index_add: index {i} is out of range for a 0-d input")
        return x + _dtype_like(src * alpha if alpha != 1 else src, x)
    want = list(x.shape)
    want[d] = idx.shape[0]
    _same_dtype("index_add", x, src, "source")
    if list(src.shape) != want:
        raise ShapeError(
            f"index_add: source has shape {list(src.shape)}, expected {want} (input's shape "
            f"with dim {d} of the index's length)"
        )
    if alpha != 1:
        src = src * alpha
    full_idx = idx.reshape(*[-1 if e == d else 1 for e in range(x.ndim)]).broadcast_to(*want)
    if x.dtype.name == "bool":
        # a sum of booleans is True where any is (PyTorch's): added up as int8, read as bool
        with _out_of_range_is_runtime("index_add"):
            added = _core._scatter_add(src.astype("int8"), full_idx, d, tuple(x.shape))
        return x | (added != 0)
    with _out_of_range_is_runtime("index_add"):
        return x + _dtype_like(_core._scatter_add(src, full_idx, d, tuple(x.shape)), x)


def masked_fill(input: Tensor, mask: Any, value: Any) -> Tensor:
    """``input`` with ``value`` where ``mask`` (a bool tensor that broadcasts) is True."""
    x = _check_tensor("masked_fill", "input", input)
    m = mask if isinstance(mask, Tensor) else tensor(np.asarray(mask), device=x.device)
    if m.dtype.kind != "b":
        raise DTypeError(f"masked_fill: mask must be a bool tensor, got {m.dtype}")
    if isinstance(value, Tensor) and value.ndim != 0:
        raise ShapeError(
            f"masked_fill: value must be a number or a 0-d tensor, got shape {list(value.shape)}"
        )
    _check_int_fill("masked_fill", x.dtype.name, value)
    return _dtype_like(where(m, value, x), x)


def masked_select(input: Tensor, mask: Any) -> Tensor:
    """The entries of ``input`` where ``mask`` is True, as a 1-D tensor (both broadcast)."""
    x = _check_tensor("masked_select", "input", input)
    m = mask if isinstance(mask, Tensor) else tensor(np.asarray(mask), device=x.device)
    if m.dtype.kind != "b":
        raise DTypeError(f"masked_select: mask must be a bool tensor, got {m.dtype}")
    try:
        shape = np.broadcast_shapes(tuple(x.shape), tuple(m.shape))
    except ValueError:
        raise ShapeError(
            f"masked_select: mask of shape {list(m.shape)} does not broadcast with input of "
            f"shape {list(x.shape)}"
        ) from None
    mm = np.broadcast_to(m.numpy(), shape)
    pos = np.flatnonzero(mm)
    xb = x.broadcast_to(*shape).reshape(-1) if shape else x.reshape(-1)
    return _core.index_select(xb, 0, _index(pos, x.device))


def one_hot(tensor_: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot rows of the class indices in ``tensor_`` (a new last axis of
    ``num_classes``, by default ``max + 1``)."""
    x = _check_tensor("one_hot", "tensor", tensor_)
    if x.dtype.kind not in "iu":
        raise DTypeError(f"one_hot: tensor must hold class indices (int), got {x.dtype}")
    n = _int("one_hot", "num_classes", num_classes)
    if n != -1 and _core._tracing():
        # (no range check inside a trace: a class out of range gives a row of zeros)
        classes = _index(np.arange(n), x.device)
        return (x.astype("int64").expand_dims(x.ndim) == classes).astype("int64")
    vals = x.numpy()
    if n == -1:
        n = int(vals.max()) + 1 if vals.size else 0
    if vals.size and (vals.min() < 0 or vals.max() >= n):
        raise ShapeError(
            f"one_hot: class values must lie in [0, {n}), got values in "
            f"[{int(vals.min())}, {int(vals.max())}]"
        )
    classes = _index(np.arange(n), x.device)
    return (x.astype("int64").expand_dims(x.ndim) == classes).astype("int64")


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float = 0.0) -> Tensor:
    """Pads the last ``len(pad) // 2`` axes: ``pad = (left_last, right_last, left_prev,
    right_prev, ...)``, as PyTorch. ``mode`` ``"constant"`` (negative pads crop),
    ``"reflect"``, ``"replicate"`` or ``"circular"``."""
    x = _check_tensor("pad", "input", input)
    pads = [_int("pad", "pad", p) for p in pad]
    if len(pads) % 2 or len(pads) // 2 > x.ndim:
        raise ShapeError(
            f"pad: pad must hold pairs for at most {x.ndim} axes, got {len(pads)} values"
        )
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise ValueError(
            f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}"
        )
    for i in range(len(pads) // 2):
        d = x.ndim - 1 - i
        lo, hi = pads[2 * i], pads[2 * i + 1]
        n = x.shape[d]
        if mode == "constant":
            if lo < 0:
                x, lo, n = _narrow(x, d, -lo, n + lo), 0, n + lo
            if hi < 0:
                x, hi, n = _narrow(x, d, 0, n + hi), 0, n + hi
            if n < 0:
                raise ShapeError(f"pad: cropping removes more than the length of axis {d}")
            parts = []
            for k in (lo, hi):
                shape = list(x.shape)
                shape[d] = k
                parts.append(_core.full(shape, value, dtype=x.dtype.name, device=x.device))
            if lo or hi:
                x = concat([parts[0], x, parts[1]], d)
            continue
        # the source of each output position (a negative pad crops that side)
        pos = np.arange(-lo, n + hi)
        if pos.size == 0 or n + lo + hi < 0:
            raise ShapeError(f"pad: cropping removes more than the length of axis {d}")
        if mode == "reflect":
            if lo >= n or hi >= n:
                raise ShapeError(
                    f"pad: reflect padding ({lo}, {hi}) must be less than the length {n} of "
                    f"axis {d}"
                )
            src = np.where(pos < 0, -pos, np.where(pos >= n, 2 * (n - 1) - pos, pos))
        elif mode == "replicate":
            if n == 0:
                raise ShapeError(f"pad: cannot replicate-pad the empty axis {d}")
            src = np.clip(pos, 0, n - 1)
        else:
            # negative pads crop first; the wrap-around comes from what remains (PyTorch's)
            keep = np.arange(_builtin_max(-lo, 0), n - _builtin_max(-hi, 0))
            m, lo, hi = keep.size, _builtin_max(lo, 0), _builtin_max(hi, 0)
            if lo > m or hi > m:
                raise ShapeError(
                    f"pad: circular padding ({lo}, {hi}) must not exceed the length {m}"
                )
            src = keep[np.arange(-lo, m + hi) % m]
        x = _core.index_select(x, d, _index(src, x.device))
    return x


# ------------------------------------------------------------------------------- reductions


def _reduce_dims(op: str, x: Tensor, dim: Any, axis: Any) -> tuple[int, ...]:
    return _dims(op, x, _pick(op, dim, axis))


def _keep(x: Tensor, out: Tensor, dims: tuple[int, ...], keepdim: bool) -> Tensor:
    if keepdim:
        shape = [1 if d in dims else s for d, s in enumerate(x.shape)]
        return out.reshape(*shape)
    return out


def _moved_last(x: Tensor, dims: tuple[int, ...]) -> Tensor:
    """``x`` with ``dims`` moved to the end and merged into one axis."""
    rest = [d for d in range(x.ndim) if d not in dims]
    y = x.permute(*(rest + list(dims))) if list(rest + list(dims)) != list(range(x.ndim)) else x
    return y.reshape(*[x.shape[d] for d in rest], int(np.prod([x.shape[d] for d in dims])))


def prod(
    input: Tensor,
    dim: Any = None,
    keepdim: bool = False,
    *,
    dtype: Any = None,
    axis: Any = None,
    keepdims: bool | None = None,
) -> Tensor:
    """The product over ``dim`` (all axes by default); integers and bools give int64
    (``dtype``: computed in and returned as that dtype, bool included). The gradient is
    exact with zeros in the input (a tree of multiplications)."""
    x = _check_tensor("prod", "input", input)
    keepdim = keepdim if keepdims is None else keepdims
    if dtype is not None:
        # computed in dtype, returned as dtype (a bool product is an and; narrow ints wrap)
        name = _dtype_name(dtype)
        out = prod(x.astype(name), dim, keepdim, axis=axis)
        return out if out.dtype.name == name else out.astype(name)
    if x.dtype.kind in "biu":
        x = x.astype("int64")
    dims = _reduce_dims("prod", x, dim, axis)
    if x.ndim == 0:
        return x
    y = _moved_last(x, dims)
    while y.shape[-1] > 1:
        n = y.shape[-1]
        if n % 2:
            one = _core.ones((*y.shape[:-1], 1), dtype=y.dtype.name, device=y.device)
            y = concat([y, one], -1)
        y = y[..., 0::2] * y[..., 1::2]
    if y.shape[-1] == 0:
        # 1 (the empty product), on the graph with gradient 0, as PyTorch's
        y = y.sum(-1, keepdim=True) + 1
    return _keep(x, y.reshape(*y.shape[:-1]), dims, keepdim)


def _scan(x: Tensor, d: int, combine: Any, identity: float) -> Tensor:
    """Inclusive scan along ``d`` in ``log2(n)`` steps (Hillis-Steele), each a shifted
    combine, so the gradient is the ops' own."""
    n = x.shape[d]
    k = 1
    while k < n:
        shape = list(x.shape)
        shape[d] = k
        fill = _core.full(shape, identity, dtype=x.dtype.name, device=x.device)
        shifted = concat([fill, _narrow(x, d, 0, n - k)], d)
        x = combine(x, shifted)
        k *= 2
    return x


def _cumulative(
    op: str, input: Tensor, dim: Any, dtype: Any, axis: Any, combine: Any, identity: float
) -> Tensor:
    x = _check_tensor(op, "input", input)
    d = _pick(op, dim, axis)
    if d is None:
        raise TypeError(f"{op}: dim is required")
    if dtype is not None:
        x = x.astype(_dtype_name(dtype))
    elif x.dtype.kind in "biu":
        x = x.astype("int64")
    if x.ndim == 0:
        return x
    return _scan(x, _dim(op, x, d), combine, identity)


def cumsum(input: Tensor, dim: Any = None, *, dtype: Any = None, axis: Any = None) -> Tensor:
    """Running sums along ``dim``; integers and bools give int64."""
    return _cumulative("cumsum", input, dim, dtype, axis, lambda a, b: a + b, 0)


def cumprod(input: Tensor, dim: Any = None, *, dtype: Any = None, axis: Any = None) -> Tensor:
    """Running products along ``dim``; integers and bools give int64. The gradient is
    exact with zeros in the input."""
    return _cumulative("cumprod", input, dim, dtype, axis, lambda a, b: a * b, 1)


def var(
    input: Tensor,
    dim: Any = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
    axis: Any = None,
    keepdims: bool | None = None,
    ddof: Any = None,
) -> Tensor:
    """The variance over ``dim`` (or ``axis``): ``sum((x - mean)**2) / (N - correction)``,
    ``correction`` 1 by default, as PyTorch's (``unbiased=False`` or numpy's ``ddof=0`` is
    0). MegEngine's population variance is ``ferrograd.functional.var``."""
    x = _check_tensor("var", "input", input)
    if isinstance(dim, bool) and unbiased is None:  # var(x, False): torch's old signature
        dim, unbiased = None, dim
    keepdim = keepdim if keepdims is None else keepdims
    given = [c for c in (unbiased, correction, ddof) if c is not None]
    if len(given) > 1:
        raise TypeError("var: give one of unbiased=, correction= and ddof=")
    c = 1 if not given else (int(unbiased) if unbiased is not None else given[0])
    if x.dtype.kind != "f":
        from .nn._errors import UnsupportedDTypeError

        raise UnsupportedDTypeError(f"var: input must be a float tensor, got {x.dtype}")
    if x.dtype.name in _HALF:
        # squared deviations overflow float16 (65504): accumulated in float32, the result
        # rounded once to the input's dtype, as PyTorch's
        out = var(x.astype("float32"), dim, keepdim=keepdim, correction=c, axis=axis)
        return out.astype(x.dtype.name)
    dims = _reduce_dims("var", x, dim, axis)
    n = int(np.prod([x.shape[d] for d in dims])) if dims else 1
    mean = x.mean(axis=dims, keepdims=True) if dims else x
    dev = x - mean
    s = (dev * dev).sum(axis=dims, keepdims=keepdim) if dims else dev * dev
    dof = n - c
    if dof >= 0:
        return s / float(dof)  # no degrees of freedom: inf/NaN, as PyTorch
    # fewer than none: the value is inf/NaN and the gradient still divides by N - correction,
    # as PyTorch's
    t = s / float(dof)
    return (s / 0.0).detach() + (t - t.detach())


def std(
    input: Tensor,
    dim: Any = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
    axis: Any = None,
    keepdims: bool | None = None,
    ddof: Any = None,
) -> Tensor:
    """The standard deviation: ``sqrt`` of :func:`var` with the same arguments; its
    gradient is 0 where every value is equal, as PyTorch's. float16/bfloat16 inputs are
    computed in float32 and rounded once."""
    half = isinstance(input, Tensor) and input.dtype.name in _HALF
    out = _safe_sqrt(
        var(
            input.astype("float32") if half else input,
            dim,
            unbiased,
            keepdim,
            correction=correction,
            axis=axis,
            keepdims=keepdims,
            ddof=ddof,
        )
    )
    return out.astype(input.dtype.name) if half else out


_HALF = ("float16", "bfloat16")


def _safe_sqrt(s: Tensor) -> Tensor:
    """``sqrt(s)`` whose gradient at ``s == 0`` is 0 (a norm's subgradient), not inf/NaN."""
    zero = s == 0
    return where(zero, 0.0, where(zero, 1.0, s).sqrt())


def norm(
    input: Tensor,
    p: Any = "fro",
    dim: Any = None,
    keepdim: bool = False,
    *,
    axis: Any = None,
    keepdims: bool | None = None,
    dtype: Any = None,
) -> Tensor:
    """The vector ``p``-norm over ``dim`` (all entries by default): ``"fro"`` and 2
    (gradient 0 at 0, as PyTorch), 1, ``inf``, ``-inf``, 0 (the count of nonzeros) or any
    positive number; ``"nuc"``: the nuclear norm of the matrices over the two axes of
    ``dim`` (of a matrix without ``dim``)."""
    x = _check_tensor("norm", "input", input)
    keepdim = keepdim if keepdims is None else keepdims
    if dtype is not None:
        x = x.astype(_dtype_name(dtype))
    if x.dtype.kind != "f":
        from .nn._errors import UnsupportedDTypeError

        raise UnsupportedDTypeError(f"norm: input must be a float tensor, got {x.dtype}")
    if x.dtype.name in _HALF:
        # x*x and |x|**p overflow float16 (and lose bfloat16's few bits) summed in the input
        # dtype: computed in float32, rounded once to the input's dtype, as PyTorch's
        out = norm(x.astype("float32"), p, dim, keepdim, axis=axis)
        return out.astype(x.dtype.name)
    if isinstance(p, str) and p == "nuc":
        # the nuclear norm of the matrices over the two axes of dim (a matrix by default)
        d = _pick("norm", dim, axis)
        if d is None:
            if x.ndim != 2:
                raise ShapeError(
                    f"norm: p='nuc' without dim needs a matrix, got shape {list(x.shape)}"
                )
            d = (0, 1)
        if not isinstance(d, (list, tuple)) or len(d) != 2:
            raise ShapeError(f"norm: p='nuc' needs dim to name two axes, got {d!r}")
        from .linalg import matrix_norm

        return matrix_norm(x, "nuc", dim=tuple(d), keepdim=keepdim)
    dims = _reduce_dims("norm", x, dim, axis)
    if p == "fro" or p is None:
        p = 2
    if isinstance(p, str):
        raise TypeError(f"norm: p must be a number, 'fro' or 'nuc', got {p!r}")
    kw = {"axis": dims, "keepdims": keepdim}
    a = x.abs()
    if p == 0:
        # the count of nonzeros: on the graph with gradient 0, as PyTorch's
        nonzero = where(x != 0, 1.0, x * 0.0)
        return nonzero if x.ndim == 0 else nonzero.sum(**kw)
    if x.ndim == 0:
        return a
    if p < 0 and x.numel() == 0:
        reduced = (
            range(x.ndim) if dims is None else dims if isinstance(dims, (list, tuple)) else [dims]
        )
        if _builtin_any(x.shape[d] == 0 for d in reduced):
            # a min-like norm has no identity to give for no entries (inf would be made up)
            raise ShapeError(
                f"norm: cannot compute the {p} norm over a dim of size 0 (shape "
                f"{list(x.shape)}): the operation has no identity"
            )
    if p == 2:
        return _safe_sqrt((x * x).sum(**kw))
    if p == 1:
        return a.sum(**kw)
    if p == math.inf:
        return a.max(**kw)
    if p == -math.inf:
        return a.min(**kw)
    if p < 1:
        # PyTorch's subgradient: a zero entry gets gradient 0 (its |x|**p is held constant:
        # 0, or inf for p < 0, where the norm is then 0 and so is every gradient)
        zero = a == 0
        held = math.inf if p < 0 else 0.0
        return where(zero, held, where(zero, 1.0, a) ** p).sum(**kw) ** (1.0 / p)
    s = (a**p).sum(**kw)
    if p > 1:
        # a zero norm has gradient 0 (PyTorch's subgradient), not 0 * inf
        zero = s == 0
        return where(zero, 0.0, where(zero, 1.0, s) ** (1.0 / p))
    return s ** (1.0 / p)


def logsumexp(
    input: Tensor,
    dim: Any = None,
    keepdim: bool = False,
    *,
    axis: Any = None,
    keepdims: bool | None = None,
) -> Tensor:
    """``log(sum(exp(input)))`` over ``dim``, computed stably (shifted by the max); its
    gradient is the softmax."""
    x = _check_tensor("logsumexp", "input", input)
    keepdim = keepdim if keepdims is None else keepdims
    if x.dtype.kind != "f":
        x = x.astype("float32")
    dims = _reduce_dims("logsumexp", x, dim, axis)
    if x.ndim == 0:
        return x
    ds = dims if isinstance(dims, (list, tuple)) else range(x.ndim) if dims is None else [dims]
    if _builtin_any(x.shape[d] == 0 for d in ds):
        # the log of an empty sum: -inf (PyTorch's)
        s = (x.exp().sum(axis=dims, keepdims=True) + 0.0).log()
        return s if keepdim else s.squeeze(dims)
    m = x.detach().max(axis=dims, keepdims=True)
    m = where(m.abs() == math.inf, 0.0, m)
    s = (x - m).exp().sum(axis=dims, keepdims=True).log() + m
    return s if keepdim else s.squeeze(dims)


_HOST_ARG_DTYPES = (
    "float32",
    "float64",
    "float16",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
)


def _arg_extreme(op: str, x: Tensor, dim: Any, keepdim: bool, largest: bool) -> Tensor:
    x = _check_tensor(op, "input", x)
    if x.dtype.kind == "b":
        x = x.astype("int64")
    x = x.detach()
    if dim is None:
        flat = x.reshape(-1)
        out = _arg_extreme(op, flat, 0, False, largest)
        return out.reshape(*([1] * x.ndim)) if keepdim else out
    d = _dim(op, x, dim)
    if x.ndim == 0:
        return _core.zeros((), dtype="int64", device=x.device)
    n = x.shape[d]
    if n == 0:
        from .nn._errors import IndexValueError

        raise IndexValueError(f"{op}: dim {d} of shape {list(x.shape)} is empty")
    if str(x.device) == "cpu" and x.dtype.name in _HOST_ARG_DTYPES and not _core._tracing():
        # numpy's loop reads the memory once (first index on ties, NaN the extreme: the
        # same answer as the composed form below, which takes eight passes)
        a = np.asarray(x)
        out = (
            np.argmax(a, axis=d, keepdims=keepdim)
            if largest
            else np.argmin(a, axis=d, keepdims=keepdim)
        )
        return _index(np.array(out, dtype=np.int64), x.device)
    best = x.max(axis=d, keepdims=True) if largest else x.min(axis=d, keepdims=True)
    hit = x == best
    if x.dtype.kind == "f":  # NaN counts as the extreme, as in PyTorch
        nan = isnan(x)
        any_nan = nan.astype("int64").sum(axis=d, keepdims=True) > 0
        hit = where(any_nan, nan, hit)
    pos = _index(np.arange(n).reshape([-1 if e == d else 1 for e in range(x.ndim)]), x.device)
    out = where(hit, pos, n).min(axis=d, keepdims=True)
    return out if keepdim else out.squeeze(d)


def argmax(input: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
    """Indices of the largest entries along ``dim`` (the first one on ties; NaN is the
    largest), int64; over the flattened tensor without ``dim``."""
    return _arg_extreme("argmax", input, _pick("argmax", dim, axis), keepdim, True)


def argmin(input: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
    """Indices of the smallest entries along ``dim`` (first on ties), int64."""
    return _arg_extreme("argmin", input, _pick("argmin", dim, axis), keepdim, False)


def any(input: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
    """Whether any entry along ``dim`` (all by default) is nonzero; a bool tensor."""
    x = _check_tensor("any", "input", input)
    dims = _reduce_dims("any", x, dim, axis)
    t = (x != 0).astype("int64")
    out = (t.sum(axis=dims, keepdims=keepdim) if x.ndim else t) > 0
    return out.astype("uint8") if x.dtype.name == "uint8" else out  # PyTorch keeps uint8


def all(input: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
    """Whether every entry along ``dim`` (all by default) is nonzero; a bool tensor."""
    x = _check_tensor("all", "input", input)
    dims = _reduce_dims("all", x, dim, axis)
    t = (x == 0).astype("int64")
    out = (t.sum(axis=dims, keepdims=keepdim) if x.ndim else t) == 0
    return out.astype("uint8") if x.dtype.name == "uint8" else out  # PyTorch keeps uint8


_ValuesIndices = namedtuple("_ValuesIndices", ["values", "indices"])


def _values_indices(kind: str) -> type:
    cls = type(f"torch_return_types_{kind}", (_ValuesIndices,), {"__slots__": ()})
    cls.__doc__ = f"``{kind}(dim=...)``'s result: ``(values, indices)``, a named tuple."
    return cls


_MaxResult = _values_indices("max")
_MinResult = _values_indices("min")


def _extreme_method(kind: str, engine: Any, result: type, pairwise: Any) -> Any:
    largest = kind == "max"

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        if not args and "other" in kwargs:  # x.max(other=y): PyTorch's keyword
            args = (kwargs.pop("other"),)
            if kwargs:
                raise TypeError(f"{kind}: with other= give nothing else, got {kwargs}")
            if not isinstance(args[0], Tensor):
                raise TypeError(f"{kind}: other must be a Tensor, got {type(args[0]).__name__}")
        if args and isinstance(args[0], Tensor):  # x.max(other): elementwise
            return pairwise(self, args[0])
        if args and isinstance(args[0], (int, np.integer)) and not isinstance(args[0], bool):
            # PyTorch's x.max(1) / x.max(1, True): values and indices, as with dim=
            if "dim" in kwargs:
                raise TypeError(f"{kind}: got dim twice")
            kwargs["dim"] = args[0]
            if len(args) > 1:
                kwargs["keepdim"] = args[1]
            if len(args) > 2:
                raise TypeError(f"{kind}: too many arguments {args}")
            args = ()
        if "dim" in kwargs:
            dim = kwargs.pop("dim")
            keepdim = kwargs.pop("keepdim", kwargs.pop("keepdims", False))
            if args or kwargs:
                raise TypeError(f"{kind}: with dim= give only keepdim=, got {args} {kwargs}")
            d = _dim(kind, self, dim)
            if self.ndim == 0:  # (PyTorch: the value itself at index 0)
                return result(self * 1, _core.zeros((), dtype="int64", device=self.device))
            # the values are read at the indices, so the gradient goes to that one entry of
            # each tie (PyTorch's max(dim)/min(dim); the reductions amax/amin share it out)
            idx = _arg_extreme(f"arg{kind}", self, d, True, largest)
            values = gather(self, d, idx)
            if not keepdim:
                values, idx = values.squeeze(d), idx.squeeze(d)
            return result(values, idx)
        return engine(self, *args, **kwargs)

    method.__name__ = kind
    method.__doc__ = (
        f"The {kind} over ``axis=`` (all axes by default), or ``{kind}(d)`` / "
        f"``{kind}(dim=d)``: PyTorch's ``(values, indices)``; ``{kind}(other)`` is "
        "elementwise."
    )
    method._engine = engine
    return method


# ---------------------------------------------------------------------------- Tensor methods


def _is_dtype_arg(v: Any) -> bool:
    from ._tensor import _BFloat16

    return isinstance(v, (np.dtype, _BFloat16)) or (
        isinstance(v, type) and issubclass(v, np.generic)
    )


def _view_dtype(self: Tensor, dtype: Any) -> Tensor:
    """``x.view(dtype)``: the same bytes read as ``dtype`` (PyTorch's). A CPU tensor's
    memory is shared (writes on either side show on the other) where the engine can share
    it (not for bool results, which are copies); the last axis scales by the ratio of the
    item sizes when they differ. Not differentiable."""
    from ._tensor import _dtype_name

    name, old = _dtype_name(dtype), self.dtype.name
    if name == old:
        # (a new tensor over the same memory, as the other dtypes: not differentiable, and
        # not a view in PyTorch's bookkeeping)
        return self.detach()
    if "bfloat16" in (name, old) or str(self.device) != "cpu":
        raise DTypeError(
            f"view(dtype): viewing {old} as {name} is supported for CPU tensors of numpy "
            f"dtypes here (not bfloat16), got a {old} tensor on {self.device}"
        )
    a_size, b_size = np.dtype(old).itemsize, np.dtype(name).itemsize
    shape = list(self.shape)
    if a_size != b_size:
        what = f"to view {old} as {name} (different element sizes)"
        if self.ndim == 0:
            raise ShapeError(f"self.dim() cannot be 0 {what}")
        if shape[-1] != 1 and self.stride()[-1] != 1:
            raise ShapeError(f"self.stride(-1) must be 1 {what}, but got {self.stride()[-1]}")
        if (shape[-1] * a_size) % b_size:
            raise ShapeError(
                f"self.size(-1) must be divisible by {b_size // a_size} {what}, but got {shape[-1]}"
            )
        shape[-1] = shape[-1] * a_size // b_size
    if self.numel() == 0:
        return _core.zeros(tuple(shape), dtype=name, device="cpu")
    # the view keeps this tensor's place in the buffer: its storage offset and strides, in
    # elements of the new dtype, must land on whole elements
    what = f"to view {old} as {name} (different element sizes)"
    offset = self.storage_offset()
    if (offset * a_size) % b_size:
        raise RuntimeError(
            f"self.storage_offset() must be divisible by {b_size // a_size} {what}, "
            f"but got {offset}"
        )
    strides = []
    for k, st in enumerate(self.stride()):
        if k == self.ndim - 1 and a_size != b_size:
            strides.append(1)
        elif (st * a_size) % b_size:
            raise RuntimeError(
                f"self.stride({k}) must be divisible by {b_size // a_size} for all "
                f"k < self.dim() - 1 {what}, but got {st}"
            )
        else:
            strides.append(st * a_size // b_size)
    import ctypes

    src = self.detach()
    _core._host_memory(src, True)  # (counts as a write: the version moves on)
    addr, nbytes = src._storage_info()
    memory = (ctypes.c_char * nbytes).from_address(addr)
    memory._owner = src  # the array (and the tensor over it) keeps the memory alive
    whole = np.ndarray((nbytes // b_size,), np.dtype(name), buffer=memory)
    try:
        return _shared(whole)._as_strided_view(shape, strides, offset * a_size // b_size).detach()
    except ValueError as e:
        raise RuntimeError(f"view(dtype): {e}") from None


def _view(self: Tensor, *shape: Any, dtype: Any = None) -> Tensor:
    """PyTorch's ``view``: the same memory seen with another shape; a layout that cannot be
    seen that way (a transposed tensor flattened) raises ``RuntimeError``, as PyTorch's
    (:meth:`reshape` copies instead). ``view(dtype)`` reads the bytes as another dtype."""
    if dtype is not None and not shape:
        return _view_dtype(self, dtype)
    if len(shape) == 1 and _is_dtype_arg(shape[0]):
        return _view_dtype(self, shape[0])
    out = self.reshape(*shape)
    if self.numel() and not _core._tracing() and out._data_key[0] != self._data_key[0]:
        raise RuntimeError(
            f"view: a tensor of shape {list(self.shape)} and strides {list(self.stride())} "
            f"cannot be viewed as {list(out.shape)} without a copy (at least one dimension "
            "spans across two contiguous subspaces); use .reshape(...) instead"
        )
    return out


def _contiguous(self: Tensor, memory_format: Any = None) -> Tensor:
    """``self`` when its entries are in row-major order, else a row-major copy
    (``memory_format`` is accepted for PyTorch code: ferrograd keeps every tensor
    row-major)."""
    _, _, shape, strides = self._data_key
    if 0 in shape:
        return self  # no entries: contiguous, as PyTorch's
    expect = 1
    for s, st in zip(reversed(shape), reversed(strides)):
        if s != 1 and st != expect:
            return self.copy()
        expect *= s
    return self


def _is_contiguous(self: Tensor, memory_format: Any = None) -> bool:
    return _contiguous(self) is self


def _expand(self: Tensor, *sizes: Any) -> Tensor:
    """PyTorch's ``expand``: ``broadcast_to`` where ``-1`` keeps an axis."""
    sizes = _shape_args_loose(sizes)
    lead = len(sizes) - self.ndim
    if lead < 0:
        raise ShapeError(f"expand: {len(sizes)} sizes for a tensor of shape {list(self.shape)}")
    if -1 in sizes[:lead]:
        raise ShapeError(
            f"expand: -1 is not allowed in a new leading dimension (sizes {list(sizes)} for "
            f"a tensor of shape {list(self.shape)})"
        )
    out = [self.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(sizes)]
    return self.broadcast_to(*out)


def _shape_args_loose(size: tuple) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = tuple(size[0])
    return tuple(_int("expand", "size", s) for s in size)


def _masked_fill_(self: Tensor, mask: Any, value: Any) -> Tensor:
    self.copy_(masked_fill(self, mask, value))
    return self


def _tile_method(self: Tensor, *dims: Any, **kwargs: Any) -> Tensor:
    """``x.tile(2, 1)`` or ``x.tile((2, 1))`` (PyTorch's method takes both)."""
    if len(dims) == 1:
        return tile(self, dims[0], **kwargs)
    return tile(self, dims, **kwargs) if dims else tile(self, **kwargs)


def _flip_method(self: Tensor, *dims: Any, **kwargs: Any) -> Tensor:
    """``x.flip(0, 1)`` or ``x.flip((0, 1))`` (PyTorch's method takes both)."""
    if len(dims) == 1:
        return flip(self, dims[0], **kwargs)
    return flip(self, dims, **kwargs) if dims else flip(self, **kwargs)


def _t(self: Tensor) -> Tensor:
    """``x.t()``: the transpose of a tensor of at most 2 dimensions."""
    if self.ndim > 2:
        raise ShapeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    return self.T


def _install() -> None:
    methods = {
        "view": _view,
        "view_as": lambda self, other: self.reshape(*other.shape),
        "expand": _expand,
        "expand_as": lambda self, other: self.broadcast_to(*other.shape),
        "type_as": lambda self, other: self.astype(other.dtype),
        "contiguous": _contiguous,
        "is_contiguous": _is_contiguous,
        "t": _t,
        "unsqueeze": unsqueeze,
        "unflatten": unflatten,
        "split": split,
        "chunk": chunk,
        "repeat": repeat,
        "tile": _tile_method,
        "flip": _flip_method,
        "roll": roll,
        "narrow": narrow,
        "gather": gather,
        "scatter": scatter,
        "scatter_add": scatter_add,
        "index_add": index_add,
        "index_select": index_select,
        "masked_fill": masked_fill,
        "masked_fill_": _masked_fill_,
        "masked_select": masked_select,
        "prod": prod,
        "var": var,
        "std": std,
        "norm": norm,
        "logsumexp": logsumexp,
        "argmax": argmax,
        "argmin": argmin,
        "any": any,
        "all": all,
        "cumsum": cumsum,
        "cumprod": cumprod,
        "tril": tril,
        "triu": triu,
        "uniform_": _uniform_,
        "normal_": _normal_,
        "bernoulli_": _bernoulli_,
        "bernoulli": bernoulli,
    }
    for name, fn in methods.items():
        if name not in Tensor.__dict__:
            setattr(Tensor, name, fn)
    # flatten(start_dim, end_dim) replaces the engine's flatten-everything method
    Tensor.flatten = flatten
    Tensor.max = _extreme_method("max", Tensor.max, _MaxResult, _core.maximum)
    Tensor.min = _extreme_method("min", Tensor.min, _MinResult, _core.minimum)


_install()


def _extreme_function(kind: str, input: Tensor, args: tuple, kwargs: dict) -> Any:
    x = _check_tensor(kind, "input", input)
    method = getattr(Tensor, kind)
    several = bool(args) and (args[0] is None or isinstance(args[0], (tuple, list)))
    if (not args and "axis" in kwargs and "dim" not in kwargs) or several:
        # MegEngine's and numpy's keyword, max(x, axis=1, keepdims=False), or several axes
        # (which PyTorch's max does not take): the values only (PyTorch's keepdim= spelling
        # is taken too)
        if "keepdim" in kwargs:
            if "keepdims" in kwargs:
                raise TypeError(f"{kind}: keepdim and keepdims given together")
            kwargs["keepdims"] = kwargs.pop("keepdim")
        return method._engine(x, **kwargs)
    return method(x, *args, **kwargs)


def max(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """PyTorch's ``max``: of all elements; ``max(x, 1)`` / ``max(x, dim=1, keepdim=False)``
    gives ``(values, indices)``; ``max(x, other)`` is elementwise. ``max(x, axis=1)``
    (MegEngine's and numpy's keyword) gives the values only, as
    ``ferrograd.functional.max(x, 1)`` (MegEngine's namespace) does."""
    return _extreme_function("max", input, args, kwargs)


def min(input: Tensor, *args: Any, **kwargs: Any) -> Any:
    """PyTorch's ``min``: of all elements; ``min(x, 1)`` / ``min(x, dim=1, keepdim=False)``
    gives ``(values, indices)``; ``min(x, other)`` is elementwise. ``min(x, axis=1)`` gives
    the values only, as ``ferrograd.functional.min(x, 1)`` does."""
    return _extreme_function("min", input, args, kwargs)


__all__ += ["max", "min"]


# ------------------------------------------------------------------------------------ DLPack


def _shared(arr: np.ndarray) -> Tensor:
    """A CPU tensor over ``arr``'s own memory (writes on either side show on the other; a
    read-only array gives a tensor that refuses writes), or a copy where the memory cannot
    be shared (bool, misaligned, byte-swapped or empty arrays, dtypes ferrograd does not
    store)."""
    t = _core._share_numpy(arr)
    if t is None:
        return tensor(arr, device="cpu")
    if not arr.flags.writeable:
        with contextlib.suppress(ValueError, RuntimeError):
            start, nbytes, _, _ = _core._host_memory(t)
            _READ_ONLY_MEMORY[start] = (nbytes, weakref.ref(arr))
    return t


# each read-only foreign buffer a tensor shares (a read-only numpy array, a JAX array): its
# start, its size in bytes and a weak reference to the array that owns it. The tensor keeps
# that array alive, so a live reference means the memory is still that read-only buffer.
_READ_ONLY_MEMORY: dict[int, tuple[int, weakref.ref]] = {}


def _is_read_only_memory(address: int) -> bool:
    """Whether memory at ``address`` (a tensor's first byte, as ``_host_memory`` gives it)
    lies in a read-only foreign buffer that some tensor shares (a numpy view of that tensor
    must then be read-only too)."""
    for start, (nbytes, ref) in list(_READ_ONLY_MEMORY.items()):
        if ref() is None:
            del _READ_ONLY_MEMORY[start]
        elif start <= address < start + nbytes or address == start:
            return True
    return False


def from_dlpack(ext_tensor: Any, *, device: Any = None, copy: bool | None = None) -> Tensor:
    """A tensor over the memory of any CPU object with ``__dlpack__`` (a numpy array, a
    PyTorch or JAX CPU tensor), without a copy: writes on either side are seen by the other
    (read-only memory, such as a JAX array's, gives a tensor that refuses writes); a DLPack
    capsule (``torch.utils.dlpack.to_dlpack(t)``) is accepted too. bool and PyTorch's
    bfloat16 are shared; data that cannot be (another producer's bfloat16) is copied.
    CUDA data (a PyTorch, JAX or CuPy GPU array) gives a tensor on the same CUDA device, a
    copy made through the host: changes on one side are not seen by the other.

    As PyTorch's: ``copy=True`` gives a copy; ``device`` puts the result on that device (a
    copy where it differs from the data's own, which ``copy=False`` refuses with
    ValueError)."""
    if copy is not None and not isinstance(copy, bool):
        raise TypeError(f"from_dlpack: copy must be True, False or None, got {copy!r}")
    out = _from_dlpack(ext_tensor)
    if device is not None:
        from ._torch_compat import device as _device

        want = str(_device(device))
        if want == "cuda":
            want = "cuda:0"
        if want != str(out.device):
            if copy is False:
                raise ValueError(
                    f"from_dlpack: cannot move the data from {out.device} to {want} "
                    "without a copy (copy=False)"
                )
            return out.to(want)
    return out.clone().detach() if copy is True else out


def _from_dlpack(ext_tensor: Any) -> Tensor:
    from ._tensor import _Capsule, _capsule_name, _is_capsule, _shared_bfloat16

    if isinstance(ext_tensor, Tensor):
        return ext_tensor.detach()
    if _is_capsule(ext_tensor):  # torch.utils.dlpack.to_dlpack(t): consumed once
        name = _capsule_name(ext_tensor)
        if name.startswith("used_"):
            raise RuntimeError(
                "from_dlpack: this DLPack capsule was already consumed (a capsule can be "
                "imported once; export the tensor again for another import)"
            )
        if name not in ("dltensor", "dltensor_versioned"):
            raise TypeError(f"from_dlpack: expected a DLPack capsule, got a capsule named {name!r}")
        try:
            arr = np.from_dlpack(_Capsule(ext_tensor))
        except (BufferError, TypeError, ValueError, RuntimeError) as e:
            raise TypeError(f"from_dlpack: cannot import the DLPack capsule: {e}") from e
        if name == "dltensor" and not arr.flags.writeable:
            # numpy reads every legacy capsule as read-only, but the legacy format has no
            # read-only mark: its memory is the producer's writable memory (PyTorch's
            # to_dlpack shares it so), and the tensor shares it writably too
            arr = _writable_view(arr)
        return _shared(arr)
    if not hasattr(ext_tensor, "__dlpack__"):
        raise TypeError(f"from_dlpack: {type(ext_tensor).__name__} has no __dlpack__")
    dev = getattr(ext_tensor, "__dlpack_device__", lambda: (1, 0))()
    if int(dev[0]) in (2, 13):  # kDLCUDA, kDLCUDAManaged: copied through the host
        return tensor(_cuda_to_host("from_dlpack", ext_tensor), device=f"cuda:{int(dev[1])}")
    if int(dev[0]) not in (1, 3):  # kDLCPU, kDLCUDAHost (pinned host memory)
        raise _core.DeviceError(
            f"from_dlpack: only CPU and CUDA data can be imported, got DLPack device {tuple(dev)}"
        )
    try:
        arr = np.from_dlpack(ext_tensor)
    except (BufferError, TypeError, ValueError, RuntimeError) as e:
        try:
            bf16 = _shared_bfloat16(ext_tensor)  # a PyTorch bfloat16 tensor: shared
            return _shared(bf16) if bf16 is not None else tensor(ext_tensor, device="cpu")
        except (BufferError, TypeError, ValueError, RuntimeError):
            raise TypeError(f"from_dlpack: cannot import {type(ext_tensor).__name__}: {e}") from e
    return _shared(arr)


class _WritableOwner:
    """Hands numpy another array's memory as writable (``_writable_view``) and keeps that
    array alive as the view's base."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        interface = dict(array.__array_interface__)
        interface["data"] = (interface["data"][0], False)
        self.__array_interface__ = interface


def _writable_view(arr: np.ndarray) -> np.ndarray:
    """A writable numpy view of ``arr``'s memory (for memory numpy marked read-only only
    because its producer could not say otherwise)."""
    return np.asarray(_WritableOwner(arr))


def _cuda_to_host(op: str, x: Any) -> np.ndarray:
    """A host copy of a CUDA array from another library: through DLPack (the producer copies
    to the CPU, numpy 2.1+), else through its own ``cpu()`` or ``__array__``."""
    errors = []
    try:
        return np.from_dlpack(x, device="cpu", copy=True)
    except (BufferError, TypeError, ValueError, RuntimeError, AttributeError) as e:
        errors.append(e)
    for get in (lambda: x.detach().cpu().numpy(), lambda: x.cpu().numpy(), lambda: np.asarray(x)):
        try:
            arr = get()
            if isinstance(arr, np.ndarray) and arr.dtype != object:
                return arr
        except Exception as e:  # noqa: BLE001 - each way is tried in turn
            errors.append(e)
    raise _core.DeviceError(
        f"{op}: cannot copy the CUDA data of {type(x).__name__} to the host ({errors[0]})"
    )


def _dlpack(self: Tensor, *, stream: Any = None, max_version: Any = None, **kw: Any) -> Any:
    """The tensor as a DLPack capsule, over its own memory unless ``copy=True`` asks for a
    copy. A consumer that speaks DLPack 1.0 (numpy 2, PyTorch) gets the capsule marked
    read-only (numpy keeps it so; PyTorch ignores the mark, and writes through it bypass
    autodiff's in-place checks, as with any shared memory). A consumer of the older format
    gets a writable capsule, as PyTorch's, except for memory shared read-only with another
    library, which that format cannot mark: a copy. bfloat16 is exported as DLPack's
    kDLBfloat. Views keep their strides. ``dl_device`` other than the tensor's own device
    raises BufferError (an export to another device is not done here)."""
    if self.device != "cpu":
        raise _core.DeviceError(
            f"__dlpack__: only CPU tensors can be exported here, this one is on {self.device}"
        )
    if stream is not None:
        if not isinstance(stream, int):
            raise TypeError(
                f"__dlpack__: stream must be an int or None, got {type(stream).__name__}"
            )
        raise AssertionError(f"__dlpack__: stream should be None on the CPU, got {stream}")
    dl_device = kw.get("dl_device")
    if dl_device is not None and tuple(int(d) for d in dl_device) != (1, 0):
        raise BufferError(
            f"__dlpack__: cannot export to DLPack device {tuple(dl_device)}: the tensor is on "
            "the CPU, DLPack device (1, 0)"
        )
    copy = kw.get("copy")
    if str(self.dtype) == "bfloat16":  # (numpy exports no bfloat16): its bits, retagged
        from ._tensor import _dlpack_bfloat16

        return _dlpack_bfloat16(self, stream, max_version, copy)
    if copy is not True and max_version is not None:
        from ._porting import _shared_numpy

        view = _shared_numpy(self, read_only=True)
        if view is not None:
            return view.__dlpack__(stream=stream, max_version=max_version)
    arr = self.numpy()  # the tensor's own memory (a copy where it has none numpy reads)
    if copy is True or not arr.flags.writeable:
        arr = arr.copy()
    if max_version is not None:
        try:
            return arr.__dlpack__(stream=stream, max_version=max_version)
        except TypeError:
            pass
    return arr.__dlpack__(stream=stream)


def _dlpack_device(self: Tensor) -> tuple[int, int]:
    if self.device == "cpu":
        return (1, 0)
    return (2, int(self.device.split(":")[1]) if ":" in self.device else 0)


Tensor.__dlpack__ = _dlpack
Tensor.__dlpack_device__ = _dlpack_device
__all__ += ["from_dlpack"]
