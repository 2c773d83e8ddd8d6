"""PyTorch's ``torch.testing``: :func:`assert_close` (tensors, numpy arrays, Python numbers,
and sequences and mappings of them, compared as PyTorch compares them, with its messages)
and :func:`make_tensor` (a random tensor of a shape, dtype and device)."""

from __future__ import annotations

import cmath
import collections.abc
import math
import warnings
from typing import Any, Callable

import numpy as np

from ._core import Tensor

__all__ = ["assert_allclose", "assert_close", "make_tensor"]

# PyTorch's default (rtol, atol) of each dtype; other dtypes (integers, bool) compare exactly
_TOLERANCES = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex32": (1e-3, 1e-5),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}
# Python numbers compare with the tolerances of the dtypes PyTorch gives them
_NUMBER_DTYPES = {int: "int64", float: "float64", complex: "complex128"}


class _Failure(Exception):
    """A mismatch found while comparing (the message, and where in nested inputs)."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.path = path


def _dtype_name(x: Any) -> str:
    return str(getattr(x.dtype, "name", x.dtype))


def _tolerances(names: tuple[str, ...], rtol: float | None, atol: float | None) -> tuple:
    if rtol is not None and atol is not None:
        return float(rtol), float(atol)
    found = [_TOLERANCES.get(n, (0.0, 0.0)) for n in names]
    return max(r for r, _ in found), max(a for _, a in found)


def _item(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _scalar_failure(
    actual: Any, expected: Any, abs_diff: Any, rel_diff: Any, rtol: float, atol: float
) -> _Failure:
    exact = rtol == 0 and atol == 0
    kind = "equal" if exact else "close"
    abs_note = "" if exact else f" (up to {atol} allowed)"
    rel_note = "" if exact else f" (up to {rtol} allowed)"
    return _Failure(
        f"Scalars are not {kind}!\n\nExpected {_item(expected)} but got {_item(actual)}.\n"
        f"Absolute difference: {_item(abs_diff)}{abs_note}\n"
        f"Relative difference: {_item(rel_diff)}{rel_note}"
    )


def _compare_numbers(
    actual: Any, expected: Any, rtol: Any, atol: Any, equal_nan: bool, check_dtype: bool
) -> None:
    actual, expected = _item(actual), _item(expected)
    ta, te = type(actual), type(expected)
    if check_dtype and ta is not te:
        raise _Failure(f"The (d)types do not match: {ta} != {te}.")
    names = (_NUMBER_DTYPES.get(ta, "float64"), _NUMBER_DTYPES.get(te, "float64"))
    rtol, atol = _tolerances(names, rtol, atol)
    if actual == expected:
        return
    a_nan, e_nan = cmath.isnan(actual), cmath.isnan(expected)
    if equal_nan and a_nan and e_nan:
        return
    try:
        abs_diff = abs(actual - expected)
    except OverflowError:
        abs_diff = math.inf
    finite = not (a_nan or e_nan or cmath.isinf(actual) or cmath.isinf(expected))
    if finite and abs_diff <= atol + rtol * abs(expected):
        return
    denom = abs(expected)
    if denom == 0:
        rel_diff = math.nan if abs_diff == 0 or math.isnan(abs_diff) else math.inf
    else:
        rel_diff = abs_diff / denom
    raise _scalar_failure(actual, expected, abs_diff, rel_diff, rtol, atol)


def _as_array(t: Any) -> np.ndarray:
    if isinstance(t, np.ndarray):
        return t
    arr = t.detach().cpu().numpy()
    if _dtype_name(t) == "bfloat16" or arr.dtype.name == "bfloat16":
        arr = arr.astype(np.float32)
    return np.asarray(arr)


def _compare_tensors(
    actual: Any,
    expected: Any,
    rtol: Any,
    atol: Any,
    equal_nan: bool,
    check_device: bool,
    check_dtype: bool,
) -> None:
    if tuple(actual.shape) != tuple(expected.shape):
        raise _Failure(
            f"The values for attribute 'shape' do not match: {actual.shape} != {expected.shape}."
        )
    if check_device and isinstance(actual, Tensor):
        da, de = str(actual.device), str(expected.device)
        if da != de:
            raise _Failure(f"The values for attribute 'device' do not match: {da} != {de}.")
    na, ne = _dtype_name(actual), _dtype_name(expected)
    if check_dtype and na != ne:
        raise _Failure(f"The values for attribute 'dtype' do not match: {na} != {ne}.")
    rtol, atol = _tolerances((na, ne), rtol, atol)
    a, e = _as_array(actual), _as_array(expected)
    common = np.result_type(a.dtype, e.dtype)
    integral = common.kind in "biu"
    if integral:
        common = np.dtype(np.int64) if common.kind != "u" or common.itemsize < 8 else common
    a, e = a.astype(common), e.astype(common)
    exact = rtol == 0 and atol == 0
    with np.errstate(all="ignore"):
        close = a == e
        if equal_nan and not integral:
            close |= np.isnan(a) & np.isnan(e)
        if not exact:
            wide = np.complex128 if common.kind == "c" else np.float64
            diff = np.abs(a.astype(wide) - e.astype(wide))
            close |= (
                np.isfinite(a) & np.isfinite(e) & (diff <= atol + rtol * np.abs(e.astype(wide)))
            )
    if close.all():
        return
    with np.errstate(all="ignore"):
        abs_diff = np.abs(a - e)
        scale = np.abs(e)
        if integral:
            rel_diff = abs_diff.astype(np.float32) / scale.astype(np.float32)
        else:
            rel_diff = abs_diff / scale
    if a.ndim == 0:
        # as PyTorch: the differences of the two values as Python numbers
        x, y = a.item(), e.item()
        diff = abs(x - y)
        with np.errstate(all="ignore"):
            rel = float(np.float64(diff) / np.float64(abs(y)))
        raise _scalar_failure(x, y, diff, rel, rtol, atol)
    kind = "equal" if exact else "close"
    mismatched = int((~close).sum())
    total = close.size
    lines = [
        f"Tensor-likes are not {kind}!",
        "",
        f"Mismatched elements: {mismatched} / {total} ({mismatched / total:.1%})",
    ]
    for label, values, tol in (("absolute", abs_diff, atol), ("relative", rel_diff, rtol)):
        flat = values.reshape(-1)
        nans = np.flatnonzero(np.isnan(flat)) if flat.dtype.kind in "fc" else np.array([])
        i = int(nans[0]) if nans.size else int(np.argmax(flat))
        index = tuple(int(k) for k in np.unravel_index(i, values.shape))
        note = "" if exact else f" (up to {tol} allowed)"
        lines.append(f"Greatest {label} difference: {_item(flat[i])} at index {index}{note}")
    raise _Failure("\n".join(lines))


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, complex, np.number)) and not isinstance(x, (bool, np.bool_))


def _compare(
    actual: Any,
    expected: Any,
    path: str,
    rtol: Any,
    atol: Any,
    equal_nan: bool,
    check_device: bool,
    check_dtype: bool,
) -> None:
    try:
        if actual is None or expected is None:
            if actual is not None or expected is not None:
                raise _Failure(f"None mismatch: {actual} is not {expected}")
            return
        if (
            isinstance(actual, Tensor)
            and isinstance(expected, Tensor)
            or (isinstance(actual, np.ndarray) and isinstance(expected, np.ndarray))
        ):
            _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype)
            return
        if isinstance(actual, (bool, np.bool_)) and isinstance(expected, (bool, np.bool_)):
            if bool(actual) != bool(expected):
                raise _Failure(f"Booleans mismatch: {actual} is not {expected}")
            return
        if _is_number(actual) and _is_number(expected):
            _compare_numbers(actual, expected, rtol, atol, equal_nan, check_dtype)
            return
    except _Failure as f:
        f.path = path
        raise
    both = (actual, expected)
    if all(isinstance(x, collections.abc.Mapping) for x in both):
        missing = [k for k in expected if k not in actual]
        extra = [k for k in actual if k not in expected]
        if missing or extra:
            text = "The keys of the mappings do not match:"
            if missing:
                text += f"\nMissing keys in the actual mapping: {sorted(missing, key=repr)}"
            if extra:
                text += f"\nAdditional keys in the actual mapping: {sorted(extra, key=repr)}"
            raise _Failure(text, path)
        for k in expected:
            _compare(actual[k], expected[k], f"{path}[{k!r}]", rtol, atol, equal_nan,
                     check_device, check_dtype)  # fmt: skip
        return
    if all(
        isinstance(x, collections.abc.Sequence) and not isinstance(x, (str, bytes)) for x in both
    ):
        if len(actual) != len(expected):
            raise _Failure(
                f"The length of the sequences mismatch: {len(actual)} != {len(expected)}", path
            )
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, f"{path}[{i}]", rtol, atol, equal_nan, check_device, check_dtype)
        return
    raise TypeError(
        f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}."
    )


def assert_close(
    actual: Any,
    expected: Any,
    *,
    allow_subclasses: bool = True,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    msg: str | Callable[[str], str] | None = None,
) -> None:
    """PyTorch's ``torch.testing.assert_close``: raises ``AssertionError`` unless
    ``actual`` and ``expected`` are close, ``|actual - expected| <= atol + rtol *
    |expected|`` elementwise (NaNs equal only with ``equal_nan``). Inputs: tensors (shape,
    device and dtype must match unless ``check_device`` / ``check_dtype`` is False), numpy
    arrays, Python numbers (their types must match when ``check_dtype``), ``None``, and
    sequences and mappings of these (compared item by item). ``rtol`` and ``atol`` are
    given together or not at all; by default they are the dtype's (float32: 1.3e-6 and
    1e-5, float64: 1e-7 and 1e-7, float16: 1e-3 and 1e-5, bfloat16: 1.6e-2 and 1e-5,
    integers and bools: exact). ``msg`` replaces the message (a callable gets it and
    returns the new one). ``allow_subclasses``, ``check_layout`` and ``check_stride`` are
    accepted for PyTorch's calls."""
    __tracebackhide__ = True
    if (rtol is None) != (atol is None):
        missing = "rtol" if rtol is None else "atol"
        raise ValueError(
            f"Both 'rtol' and 'atol' must be either specified or omitted, but got no {missing}."
        )
    try:
        _compare(actual, expected, "", rtol, atol, equal_nan, check_device, check_dtype)
    except _Failure as f:
        text = f.message
        if f.path:
            text += f"\n\nThe failure occurred for item {f.path}"
        if msg is not None:
            text = msg(text) if callable(msg) else msg
        raise AssertionError(text) from None


def assert_allclose(
    actual: Any,
    expected: Any,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = True,
    msg: str = "",
) -> None:
    """PyTorch's deprecated ``torch.testing.assert_allclose``: :func:`assert_close` with
    numbers and sequences taken as tensors, dtypes not checked and NaNs equal by default."""
    __tracebackhide__ = True
    warnings.warn(
        "assert_allclose is deprecated: use ferrograd.testing.assert_close",
        FutureWarning,
        stacklevel=2,
    )
    from ._tensor import tensor

    if not isinstance(actual, Tensor):
        actual = tensor(actual)
    if not isinstance(expected, Tensor):
        expected = tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        rtol, atol = _tolerances((_dtype_name(actual), _dtype_name(expected)), None, None)
    assert_close(
        actual,
        expected,
        rtol=rtol,
        atol=atol,
        equal_nan=equal_nan,
        check_device=True,
        check_dtype=False,
        msg=msg or None,
    )


_FLOATS = ("float16", "bfloat16", "float32", "float64")
_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
}
_FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38,
              "float64": 1.7976931348623157e308}  # fmt: skip


def make_tensor(
    *shape: Any,
    dtype: Any,
    device: Any,
    low: float | None = None,
    high: float | None = None,
    requires_grad: bool = False,
    noncontiguous: bool = False,
    exclude_zero: bool = False,
    memory_format: Any = None,
) -> Tensor:
    """PyTorch's ``torch.testing.make_tensor``: a tensor of ``shape`` (ints, or one
    sequence) with random values drawn from the device's seeded stream: floats uniform in
    ``[low, high)`` (default ``[-9, 9)``), integers in ``[low, high)`` (default ``[-9,
    10)``, clamped to the dtype's range), bools 0 or 1. ``exclude_zero`` replaces zeros (by
    1, or the dtype's smallest normal for floats); ``requires_grad`` for float dtypes only.
    ``noncontiguous`` and ``memory_format`` change nothing here (the values are the same)."""
    from ._tensor import _dtype_name as dtype_name
    from ._tensor import tensor
    from .random import _numpy_rng

    name = dtype_name(dtype)
    if len(shape) == 1 and isinstance(shape[0], collections.abc.Sequence):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    if noncontiguous and memory_format is not None:
        raise ValueError(
            "The parameters `noncontiguous` and `memory_format` are mutually exclusive, "
            f"but got noncontiguous={noncontiguous} and memory_format={memory_format}"
        )
    integral = name == "bool" or name in _INT_RANGES
    if requires_grad and integral:
        raise ValueError(
            "`requires_grad=True` is not supported for boolean and integral dtypes, but got "
            f"dtype={name}"
        )

    def bounds(lowest: float, highest: float, default_low: float, default_high: float) -> tuple:
        lo = default_low if low is None else low
        hi = default_high if high is None else high
        if any(isinstance(v, float) and math.isnan(v) for v in (lo, hi)):
            raise ValueError(f"`low` and `high` cannot be NaN, but got low={lo} and high={hi}")
        if lo == hi and name in _FLOATS:
            warnings.warn(
                "Passing `low==high` to `make_tensor` for floating types is deprecated (as in "
                "PyTorch): use `full(...)` instead.",
                FutureWarning,
                stacklevel=3,
            )
        elif lo >= hi:
            raise ValueError(f"`low` must be less than `high`, but got {lo} >= {hi}")
        elif hi < lowest or lo >= highest:
            raise ValueError(
                f"The value interval specified by `low` and `high` is [{lo}, {hi}), but {name} "
                f"only supports [{lowest}, {highest})"
            )
        lo, hi = min(max(lo, lowest), highest), min(max(hi, lowest), highest)
        if integral:
            return math.ceil(lo), math.ceil(hi)
        return lo, hi

    dev = str(device)
    rng = _numpy_rng(dev)
    if name == "bool":
        lo, hi = bounds(0, 2, 0, 2)
        values = rng.integers(lo, hi, shape).astype(np.bool_)
    elif name in _INT_RANGES:
        lowest, highest = _INT_RANGES[name]
        lo, hi = bounds(lowest, highest + (1 if name != "int64" else 0), -9, 10)
        values = rng.integers(lo, hi, shape, dtype=np.int64)
    elif name in _FLOATS:
        fmax = _FLOAT_MAX[name]
        lo, hi = bounds(-fmax, fmax, -9, 9)
        if hi - lo >= fmax:
            values = rng.uniform(lo / 2, hi / 2, shape) * 2
        else:
            values = rng.uniform(lo, hi, shape)
    else:
        raise TypeError(f"The requested dtype '{name}' is not supported by make_tensor().")
    if exclude_zero:
        tiny = 1 if integral else float(np.finfo(np.float32 if name == "bfloat16" else name).tiny)
        values = np.where(values == 0, tiny, values)
    if name in _FLOATS:
        wide = "float64" if name == "float64" else "float32"
        t = tensor(np.asarray(values, dtype=wide), device=dev)
        if name != wide:
            t = t.astype(name)
        if requires_grad:
            t.requires_grad_(True)
        return t
    return tensor(np.asarray(values).astype(name if name != "bool" else np.bool_), device=dev)
