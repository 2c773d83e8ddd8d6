"""PyTorch's other spellings of what ferrograd already does: the function forms of in-place
methods (``torch.relu_(x)``), alternative names (``x.arccos_()``, ``x.divide_(y)``),
``torch.range``, ``torch.typename``, the tensor predicates (``is_nonzero``, ``is_same_size``,
``is_conj``), ``set_default_tensor_type`` and the anomaly-mode switches, so that programs
written against them run unchanged."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from . import _core
from ._core import Tensor

# ``torch.<name>(input, ...)`` is ``input.<name>(...)`` for each of these (installed where the
# Tensor method exists): the function forms of in-place methods, and two queries
_INPLACE_FUNCTIONS = [
    "abs_",
    "acos_",
    "acosh_",
    "addmv_",
    "arccos_",
    "arccosh_",
    "arcsin_",
    "arcsinh_",
    "arctan_",
    "arctanh_",
    "asin_",
    "asinh_",
    "atan_",
    "atanh_",
    "ceil_",
    "clamp_",
    "clamp_max_",
    "clamp_min_",
    "clip_",
    "cos_",
    "cosh_",
    "deg2rad_",
    "detach_",
    "erf_",
    "erfc_",
    "exp2_",
    "exp_",
    "expm1_",
    "fill_",
    "fix_",
    "floor_",
    "frac_",
    "gcd_",
    "i0_",
    "lcm_",
    "ldexp_",
    "log10_",
    "log1p_",
    "log2_",
    "log_",
    "logit_",
    "nan_to_num_",
    "neg_",
    "negative_",
    "rad2deg_",
    "reciprocal_",
    "relu_",
    "round_",
    "rsqrt_",
    "sigmoid_",
    "sin_",
    "sinc_",
    "sinh_",
    "sqrt_",
    "square_",
    "tan_",
    "tanh_",
    "trunc_",
    "xlogy_",
    "zero_",
    "is_signed",
    "get_device",
]

# Tensor method aliases PyTorch has: alias -> the method it names
_METHOD_ALIASES = {
    "absolute_": "abs_",
    "arccos_": "acos_",
    "arccosh_": "acosh_",
    "arcsin_": "asin_",
    "arcsinh_": "asinh_",
    "arctan_": "atan_",
    "arctanh_": "atanh_",
    "arctan2_": "atan2_",
    "negative_": "neg_",
    "fix_": "trunc_",
    "divide_": "div_",
    "multiply_": "mul_",
    "subtract_": "sub_",
    "greater_": "gt_",
    "greater_equal_": "ge_",
    "less_": "lt_",
    "less_equal_": "le_",
    "not_equal_": "ne_",
}


def _inplace_function(name: str) -> Any:
    def fn(input: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        if not isinstance(input, Tensor):
            raise TypeError(
                f"{name}(): argument 'input' must be a Tensor, not {type(input).__name__}"
            )
        return getattr(input, name)(*args, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``input.{name}(...)``: PyTorch's function form of the method."
    return fn


def _method_alias(alias: str, target: str) -> Any:
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return getattr(self, target)(*args, **kwargs)

    method.__name__ = method.__qualname__ = alias
    method.__doc__ = f"PyTorch's other name of :meth:`Tensor.{target}`."
    return method


def range(
    start: Any,
    end: Any,
    step: Any = 1,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """PyTorch's deprecated ``torch.range``: ``start, start + step, ...`` up to and including
    ``end`` (``floor((end - start) / step) + 1`` values), of the default float dtype unless
    ``dtype`` is given. Prefer :func:`arange` (the end left out)."""
    from ._tensor import default_float, tensor

    warnings.warn(
        "range is deprecated and will be removed in a future release because its behavior "
        "is inconsistent with Python's range builtin. Instead, use arange, which produces "
        "values in [start, end).",
        UserWarning,
        stacklevel=2,
    )
    bounds = []
    for what, v in (("start", start), ("end", end), ("step", step)):
        v = v.item() if isinstance(v, Tensor) else v
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"range: {what} must be a number, got {type(v).__name__}")
        if not math.isfinite(v):
            raise ValueError(f"range: {what} must be finite, got {v}")
        bounds.append(float(v))
    lo, hi, st = bounds
    if st == 0:
        raise ValueError("range: step must be nonzero")
    if (hi - lo) / st < 0:
        raise ValueError(
            f"range: upper bound and larger bound inconsistent with step sign "
            f"(start {start}, end {end}, step {step})"
        )
    n = math.floor((hi - lo) / st) + 1
    values = lo + np.arange(n, dtype=np.float64) * st
    t = tensor(values, dtype=dtype or default_float(), device=device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def typename(obj: Any) -> str:
    """The type name PyTorch prints: ``x.type()`` for a tensor (``"torch.FloatTensor"``),
    the qualified class name otherwise."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = type(obj).__module__
    name = type(obj).__qualname__
    return name if module in ("builtins", "__builtin__", None) else f"{module}.{name}"


def is_nonzero(input: Tensor) -> bool:
    """Whether the one value of ``input`` is nonzero; ``RuntimeError`` for any other number
    of values (PyTorch's rule for ``bool(tensor)``)."""
    if not isinstance(input, Tensor):
        raise TypeError(
            f"is_nonzero(): argument 'input' must be a Tensor, not {type(input).__name__}"
        )
    n = input.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.reshape(()).item() != 0)


def is_same_size(input: Tensor, other: Tensor) -> bool:
    """Whether ``input`` and ``other`` have one shape."""
    return tuple(input.shape) == tuple(other.shape)


def is_conj(input: Tensor) -> bool:
    """False: ferrograd tensors never carry a lazy conjugation."""
    return False


def is_neg(input: Tensor) -> bool:
    """False: ferrograd tensors never carry a lazy negation."""
    return False


def resolve_conj(input: Tensor) -> Tensor:
    """``input`` itself (no lazy conjugation to resolve)."""
    return input


def resolve_neg(input: Tensor) -> Tensor:
    """``input`` itself (no lazy negation to resolve)."""
    return input


def fill(input: Tensor, value: Any) -> Tensor:
    """A new tensor of ``input``'s shape, dtype and device with every entry ``value``
    (``input`` unchanged; differentiable in a tensor ``value``)."""
    from ._ops import full_like

    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise _core.ShapeError(
                f"fill: value must be a number or a tensor of one value, got shape "
                f"{list(value.shape)}"
            )
        out = _core.zeros_like(input) + value.reshape(()).astype(input.dtype.name)
    else:
        out = full_like(input, value)
    if input.requires_grad or _core._tracking_level([input]) is not None:
        # on input's graph with gradient 0, as PyTorch's (differentiating the result in
        # input gives zeros instead of raising that it does not depend on input)
        keep = _core.ones(tuple(input.shape), dtype="bool", device=input.device)
        out = _core.where(keep, out, input)
    return out


def split_with_sizes(input: Tensor, split_sizes: Any, dim: int = 0) -> Any:
    """``input`` cut along ``dim`` into pieces of ``split_sizes`` (which must add up to
    its length)."""
    from ._ops import split

    sizes = [int(s) for s in split_sizes]
    if sum(sizes) != input.shape[dim]:
        raise _core.ShapeError(
            f"split_with_sizes: split_sizes {sizes} must sum to the length {input.shape[dim]} "
            f"of dim {dim}"
        )
    return split(input, sizes, dim)


def unsafe_split(input: Tensor, split_size: Any, dim: int = 0) -> Any:
    """:func:`split` (PyTorch's variant without view tracking; ferrograd's views are safe)."""
    from ._ops import split

    return split(input, split_size, dim)


def unsafe_split_with_sizes(input: Tensor, split_sizes: Any, dim: int = 0) -> Any:
    """:func:`split_with_sizes` (see :func:`unsafe_split`)."""
    return split_with_sizes(input, split_sizes, dim)


def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> Any:
    """:func:`chunk` (see :func:`unsafe_split`)."""
    from ._ops import chunk

    return chunk(input, chunks, dim)


def set_default_tensor_type(t: Any) -> None:
    """PyTorch's deprecated switch of the default float type: ``"torch.DoubleTensor"``,
    ``fg.FloatTensor`` and the like set the default dtype (:func:`set_default_dtype`); a CUDA
    type (``"torch.cuda.FloatTensor"``) also makes CUDA the default device."""
    from ._tensor import set_default_dtype

    warnings.warn(
        "set_default_tensor_type() is deprecated (as in PyTorch 2.1), please use "
        "set_default_dtype() and set_default_device() as alternatives.",
        UserWarning,
        stacklevel=2,
    )
    if isinstance(t, str):
        name = t
    else:
        name = getattr(t, "_torch_name", None) or getattr(t, "__name__", "")
        on = getattr(t, "_on", None)
        if on:
            name = f"{on}.{name}"
    kinds = {
        "DoubleTensor": "float64",
        "FloatTensor": "float32",
        "HalfTensor": "float16",
        "BFloat16Tensor": "bfloat16",
    }
    base = name.rsplit(".", 1)[-1]
    if base not in kinds:
        raise TypeError(
            f"set_default_tensor_type: only floating-point types are supported as the default "
            f"type, got {t!r}"
        )
    set_default_dtype(kinds[base])
    if ".cuda." in f".{name}" or name.startswith("cuda."):
        from ._tensor import set_default_device

        set_default_device("cuda")


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Anomaly detection on or off (:class:`autograd.set_detect_anomaly`)."""
    from .autodiff import _set_anomaly

    _set_anomaly(enabled, check_nan)


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on."""
    from .autodiff import _anomaly

    return bool(_anomaly["enabled"])


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection checks gradients for NaN when it is on (the ``check_nan``
    it was last turned on or off with; True by default)."""
    from .autodiff import _anomaly

    return bool(_anomaly["check_nan"])


def _narrow_copy(self: Tensor, dim: int, start: int, length: int) -> Tensor:
    """A copy (not a view) of ``self.narrow(dim, start, length)``."""
    return self.narrow(dim, start, length).clone()


def _to_dense(self: Tensor, dtype: Any = None, *, masked_grad: Any = None) -> Tensor:
    """``self`` (ferrograd tensors are dense), converted to ``dtype`` when given."""
    return self if dtype is None else self.to(dtype)


def _record_stream(self: Tensor, stream: Any) -> None:
    """Nothing to do: a buffer is returned to its device's pool in stream order."""


def _prelu(self: Tensor, weight: Tensor) -> Tensor:
    """``nn.functional.prelu(self, weight)``."""
    from .nn import functional as F

    return F.prelu(self, weight)


__all__ = [
    "fill",
    "is_anomaly_check_nan_enabled",
    "is_anomaly_enabled",
    "is_conj",
    "is_neg",
    "is_nonzero",
    "is_same_size",
    "range",
    "resolve_conj",
    "resolve_neg",
    "set_anomaly_enabled",
    "set_default_tensor_type",
    "split_with_sizes",
    "typename",
    "unsafe_chunk",
    "unsafe_split",
    "unsafe_split_with_sizes",
]


def install(namespace: dict[str, Any]) -> list[str]:
    """Adds the Tensor method aliases, and to ``namespace`` (the package's) the function
    forms of in-place methods that it lacks; returns the names added there."""
    for alias, target in _METHOD_ALIASES.items():
        if not hasattr(Tensor, alias) and hasattr(Tensor, target):
            setattr(Tensor, alias, _method_alias(alias, target))
    extra = {
        "narrow_copy": _narrow_copy,
        "to_dense": _to_dense,
        "record_stream": _record_stream,
        "prelu": _prelu,
        "is_same_size": is_same_size,
        "is_conj": is_conj,
        "is_neg": is_neg,
        "resolve_conj": resolve_conj,
        "resolve_neg": resolve_neg,
        "is_nonzero": is_nonzero,
    }
    for name, fn in extra.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
    added = []
    for name in _INPLACE_FUNCTIONS:
        if name not in namespace and hasattr(Tensor, name):
            namespace[name] = _inplace_function(name)
            added.append(name)
    return added
