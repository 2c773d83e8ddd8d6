"""Elementwise functions written over the engine's ops (their gradients are the ops'):
clamping, the tests for NaN and infinity, and logic on bool tensors (also as the operators
``&``, ``|``, ``^`` and ``~``)."""

from __future__ import annotations

import math
from typing import Any

from ._core import DTypeError, ShapeError, Tensor, maximum, minimum, where

__all__ = [
    "clamp",
    "clip",
    "isfinite",
    "isinf",
    "isnan",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
]


def _tensor(op: str, name: str, x: Any) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    return x


def _is_nan(v: Any) -> bool:
    try:
        return math.isnan(v)
    except TypeError:
        return False


def _everywhere(x: Tensor) -> Tensor:
    """An all-True bool tensor of ``x``'s shape."""
    return x.eq(x) | x.ne(x)


def _int_bound(x: Tensor, name: str, bound: Any) -> Any:
    """An integer number bound of an integer tensor checked against the dtype's range, as
    PyTorch does: a bound that every value already satisfies is dropped (compared in the dtype
    it would wrap around and clamp wrongly) and one that none can satisfy is an error."""
    if isinstance(bound, bool) or not isinstance(bound, int):
        return bound
    import numpy as np

    info = np.iinfo(x.dtype.name)
    low, high = (bound, info.max) if name == "min" else (info.min, bound)
    if low > info.max or high < info.min:
        raise RuntimeError(
            f"clamp: {name} value {bound} is outside the representable range of {x.dtype.name}"
        )
    if info.min <= bound <= info.max:
        return bound
    return None


def clamp(input: Tensor, min: Any = None, max: Any = None, *, out: Any = None) -> Tensor:
    """Limits ``input`` to ``[min, max]`` (either may be None, a number or a tensor that
    broadcasts). Gradients as PyTorch's: with number bounds ``input`` gets it strictly inside
    them (none at a bound, none at a NaN input); a tensor bound is ``maximum``/``minimum`` (a
    tie shares the gradient equally), except that with two tensor bounds a NaN result's
    gradient goes to ``input`` alone. NaN stays NaN; where ``min > max`` the result is ``max``.
    ``out``: PyTorch's."""
    if out is not None:
        from ._ops import _write_out

        return _write_out("clamp", out, clamp(input, min, max))
    x = _tensor("clamp", "input", input)
    if min is None and max is None:
        raise ShapeError("clamp: at least one of min and max must be given")
    if x.dtype.kind in "iu":
        min = _int_bound(x, "min", min)
        max = _int_bound(x, "max", max)
        if min is None and max is None:
            return x.clone()
    out = x
    if isinstance(min, Tensor):
        out = maximum(out, min)
    elif min is not None:
        # a NaN bound makes every entry NaN (PyTorch's), with no gradient to ``input``
        out = where(_everywhere(out) if _is_nan(min) else out <= min, min, out)
    if isinstance(max, Tensor):
        out = minimum(out, max)
    elif max is not None:
        out = where(_everywhere(out) if _is_nan(max) else out >= max, max, out)
    if isinstance(min, Tensor) and isinstance(max, Tensor) and out.dtype.kind == "f":
        # with both bounds tensors PyTorch gives a NaN result's gradient to ``input`` alone
        # (maximum/minimum would also pass it to the bounds); the value stays NaN
        nan = out.isnan()
        out = where(nan, x + (out.detach() - x.detach()), out)
    if x.dtype.kind == "f" and not isinstance(min, Tensor) and not isinstance(max, Tensor):
        # a NaN input stays NaN but, as in PyTorch (``min <= x <= max`` is false), gets no
        # gradient
        out = where(x.isnan(), x.detach(), out)
    if out.dtype != x.dtype and not isinstance(min, Tensor) and not isinstance(max, Tensor):
        # a float bound makes an integer tensor's result float (PyTorch's promotion)
        float_bound = any(isinstance(b, float) for b in (min, max))
        if x.dtype.kind == "f" or not float_bound:
            out = out.astype(x.dtype)
    return out


def clip(input: Tensor, min: Any = None, max: Any = None, *, out: Any = None) -> Tensor:
    """Alias of :func:`clamp` (numpy's and PyTorch's other name)."""
    return clamp(input, min, max, out=out)


def isnan(input: Tensor) -> Tensor:
    """True where ``input`` is NaN (never for integer and bool tensors)."""
    x = _tensor("isnan", "input", input)
    return x.ne(x)  # only NaN differs from itself


def isinf(input: Tensor) -> Tensor:
    """True where ``input`` is +inf or -inf."""
    x = _tensor("isinf", "input", input)
    if x.dtype.kind != "f":
        return x.ne(x)  # only NaN differs from itself
    return x.abs() == float("inf")


def isfinite(input: Tensor) -> Tensor:
    """True where ``input`` is neither NaN nor infinite."""
    x = _tensor("isfinite", "input", input)
    if x.dtype.kind != "f":
        return x.eq(x)  # all True
    return x.abs() < float("inf")


def _truth(op: str, name: str, x: Any) -> Any:
    """A bool tensor: bool as is, numbers as ``!= 0`` (as PyTorch's logical ops); a Python
    number becomes its truth value."""
    if isinstance(x, (bool, int, float)) and not isinstance(x, Tensor):
        return bool(x)
    x = _tensor(op, name, x)
    return x if x.dtype.kind == "b" else x != 0


def logical_and(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise AND of the truth values (nonzero is True), broadcast; a bool tensor."""
    return where(
        _truth("logical_and", "input", input), _truth("logical_and", "other", other), False
    )


def logical_or(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise OR of the truth values (nonzero is True), broadcast; a bool tensor."""
    return where(_truth("logical_or", "input", input), True, _truth("logical_or", "other", other))


def logical_xor(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise XOR of the truth values (nonzero is True), broadcast; a bool tensor."""
    return _truth("logical_xor", "input", input) != _truth("logical_xor", "other", other)


def logical_not(input: Tensor) -> Tensor:
    """Elementwise NOT of the truth values (nonzero is True); a bool tensor."""
    return _truth("logical_not", "input", input) == False


def _bool_operator(name: str, fn: Any) -> Any:
    def op(self: Tensor, other: Any) -> Tensor:
        if not isinstance(other, (Tensor, bool)):
            return NotImplemented
        for t in (self, other):
            if isinstance(t, Tensor) and t.dtype.kind != "b":
                raise DTypeError(
                    f"{name}: defined for bool tensors here, got {t.dtype} "
                    f"(shape {t.shape}); compare first or use logical_{name.strip('_')}"
                )
        return fn(self, other)

    op.__name__ = name
    return op


def _invert(self: Tensor) -> Tensor:
    if self.dtype.kind != "b":
        raise DTypeError(
            f"__invert__: defined for bool tensors here, got {self.dtype} (shape {self.shape})"
        )
    return logical_not(self)


def _install() -> None:
    methods = {
        "clamp": clamp,
        "clip": clip,
        "isnan": isnan,
        "isinf": isinf,
        "isfinite": isfinite,
        "logical_and": logical_and,
        "logical_or": logical_or,
        "logical_xor": logical_xor,
        "logical_not": logical_not,
        "__and__": _bool_operator("__and__", logical_and),
        "__rand__": _bool_operator("__and__", lambda a, b: logical_and(b, a)),
        "__or__": _bool_operator("__or__", logical_or),
        "__ror__": _bool_operator("__or__", lambda a, b: logical_or(b, a)),
        "__xor__": _bool_operator("__xor__", logical_xor),
        "__rxor__": _bool_operator("__xor__", lambda a, b: logical_xor(b, a)),
        "__invert__": _invert,
    }
    for name, fn in methods.items():
        if name not in Tensor.__dict__:
            setattr(Tensor, name, fn)


_install()
