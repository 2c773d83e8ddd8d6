"""More of PyTorch's functions, written with ferrograd's differentiable ops: integer-style
division (``remainder``, ``fmod``, ``floor_divide``, ``div(rounding_mode=)``, ``%``, ``//``),
inverse hyperbolic and other elementwise functions (``logaddexp``, ``xlogy``, ``logit``,
``hypot``, ``sinc``, ...), order statistics (``median``, ``kthvalue``, ``quantile``),
NaN-aware and paired reductions, shape helpers (``unbind``, ``diff``, ``rot90``, ``kron``,
``tensordot``, ...), searching and counting (``searchsorted``, ``bucketize``, ``bincount``,
``histc``) and the ``Tensor`` methods PyTorch programs call on the way (``cuda()``,
``stride()``, ``sum(dtype=)``, ...).

Gradients come from the ops' own rules. Where a formula has a removable singularity (``sinc``
at 0, ``xlogy`` at x = 0, ``asinh`` through 0) the composition is arranged so that the
gradient there is the limit PyTorch gives, not NaN."""

from __future__ import annotations

import builtins
import math
import warnings
from collections import namedtuple
from collections.abc import Sequence
from typing import Any, Callable

import numpy as np

from . import _core
from ._core import DTypeError, ShapeError, Tensor
from ._ops import _check_tensor, _dim, _int, _values_indices, gather
from ._tensor import _dtype_name, tensor
from ._torch_compat import sort
from .autodiff import Function as _Function

__all__ = [
    "Size",
    "absolute",
    "acosh",
    "addbmm",
    "addmv",
    "addr",
    "aminmax",
    "angle",
    "arccos",
    "arccosh",
    "arcsin",
    "arcsinh",
    "arctan",
    "arctan2",
    "arctanh",
    "argwhere",
    "asinh",
    "atanh",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "bincount",
    "block_diag",
    "broadcast_shapes",
    "bucketize",
    "cartesian_prod",
    "channels_last",
    "channels_last_3d",
    "column_stack",
    "contiguous_format",
    "copysign",
    "cummax",
    "cummin",
    "deg2rad",
    "diff",
    "dist",
    "div",
    "divide",
    "eq",
    "equal",
    "finfo",
    "fix",
    "fliplr",
    "flipud",
    "float_power",
    "floor_divide",
    "fmax",
    "fmin",
    "fmod",
    "frac",
    "ge",
    "gt",
    "heaviside",
    "histc",
    "histogram",
    "histogramdd",
    "hypot",
    "iinfo",
    "index_copy",
    "inner",
    "kron",
    "kthvalue",
    "le",
    "logaddexp",
    "logaddexp2",
    "logit",
    "lt",
    "masked_scatter",
    "median",
    "memory_format",
    "multiply",
    "mv",
    "nanmean",
    "nanquantile",
    "nansum",
    "ne",
    "negative",
    "preserve_format",
    "quantile",
    "rad2deg",
    "remainder",
    "rot90",
    "row_stack",
    "rsub",
    "searchsorted",
    "select",
    "sinc",
    "std_mean",
    "subtract",
    "take",
    "take_along_axis",
    "tensor_split",
    "tensordot",
    "tril_indices",
    "triu_indices",
    "true_divide",
    "unbind",
    "unique_consecutive",
    "var_mean",
    "where",
    "xlogy",
]

_as_builtin_float = builtins.float


class Size(tuple):
    """A shape, as PyTorch's ``torch.Size``: a tuple of ints (``x.shape`` compares equal to
    one) with ``numel()``."""

    def __new__(cls, sizes: Any = ()) -> Size:  # noqa: PYI034
        return super().__new__(cls, (int(n) for n in sizes))

    def numel(self) -> int:
        return math.prod(self)

    def __repr__(self) -> str:
        return f"Size({list(self)})"

    # slices, sums and repeats of a Size are Sizes (as PyTorch's)
    def __getitem__(self, key: Any) -> Any:
        out = super().__getitem__(key)
        return Size(out) if isinstance(key, slice) else out

    def __add__(self, other: Any) -> Any:
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple(self) + tuple(other))

    def __radd__(self, other: Any) -> Any:
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple(other) + tuple(self))

    def __mul__(self, n: Any) -> Any:
        return Size(tuple(self) * n)

    __rmul__ = __mul__


# ops that PyTorch also computes for two Python numbers (``div(7, 2)`` is a 0-d tensor)
_NUMBER_PAIRS = ("div", "divide", "true_divide", "floor_divide")


def _pair(op: str, a: Any, b: Any) -> tuple[Tensor, Tensor]:
    """``a`` and ``b`` as tensors (a Python number takes the other's dtype and device)."""
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        if op not in _NUMBER_PAIRS:
            raise TypeError(
                f"{op}: expected at least one tensor, got {type(a).__name__} and {type(b).__name__}"
            )
        # PyTorch's division ops take two numbers, as 0-d tensors of their own dtypes
        a = tensor(a)
    like = a if isinstance(a, Tensor) else b
    if not isinstance(a, Tensor):
        a = tensor(a, dtype=_scalar_dtype(a, like), device=like.device)
    if not isinstance(b, Tensor):
        b = tensor(b, dtype=_scalar_dtype(b, like), device=like.device)
    if a.dtype != b.dtype:
        # PyTorch's promotion (a 0-d tensor does not widen a tensor of its kind)
        from ._torch_extra import result_type

        dt = _dtype_name(result_type(a, b))
        a, b = a.astype(dt), b.astype(dt)
    return a, b


def _true_divide(op: str, a: Any, b: Any) -> Tensor:
    """``a / b`` in floating point. A Python number meets the tensor through its ``/``
    operator, which holds PyTorch's rule for it (an integer tensor divided by an int computes
    in float from the start: ``1000 / int8_tensor`` is not ``-24 / x``); other operands pair
    as :func:`_pair` does."""
    numbers = (builtins.int, builtins.float)
    if (isinstance(a, Tensor) and isinstance(b, numbers)) or (
        isinstance(b, Tensor) and isinstance(a, numbers)
    ):
        return a / b
    x, y = _pair(op, a, b)
    return x / y


def _scalar_dtype(v: Any, like: Tensor) -> str:
    """The dtype a Python number takes next to ``like`` (PyTorch's rule: a float with an
    integer or bool tensor is the default float, an int with a bool tensor is int64)."""
    if isinstance(v, builtins.float) and like.dtype.kind != "f":
        return _dtype_name(_core_default_float())
    if isinstance(v, builtins.int) and not isinstance(v, builtins.bool) and like.dtype == "bool":
        return "int64"
    return _dtype_name(like.dtype)


def _core_default_float() -> Any:
    from ._tensor import default_float

    return default_float()


def _is_int(t: Tensor) -> bool:
    return t.dtype.kind in "iub"


class IntegerDivisionByZero(ZeroDivisionError, RuntimeError):
    """An integer ``//``, ``%`` or ``fmod`` by zero (PyTorch raises a RuntimeError; this is
    also a ZeroDivisionError, as Python's own integer division)."""


def _quotient(op: str, a: Any, b: Any, rounding: str) -> tuple[Tensor, Tensor, Tensor]:
    """``(a, b, q)`` where ``q`` is ``a / b`` rounded by ``rounding`` (no gradient): integer
    operands are divided exactly (as int64 on the host side of float64 rounding is not),
    floats as :func:`_float_quotient` does."""
    a, b = _pair(op, a, b)
    if _is_int(a) and _is_int(b):

        def int_quotient(a: Tensor, b: Tensor) -> Tensor:
            an, bn = a.numpy().astype(np.int64), b.numpy().astype(np.int64)
            if np.any(bn == 0):
                raise IntegerDivisionByZero(f"{op}: integer division by zero")
            q = np.floor_divide(an, bn)
            if rounding == "trunc":
                q = np.where((q < 0) & (q * bn != an), q + 1, q)
            return tensor(q.astype(np.dtype(_dtype_name(a.dtype))), device=a.device)

        return a, b, _on_host(op, int_quotient, a, b)

    def float_quotient(a: Tensor, b: Tensor) -> Tensor:
        an, bn, native = _host_pair(a, b)
        return tensor(_float_quotient(an, bn, rounding, native).astype(native), device=a.device)

    return a, b, _on_host(op, float_quotient, a, b)


def _on_host(op: str, fn: Callable[..., Tensor], *tensors: Tensor) -> Tensor:
    """``fn(*tensors)``, a result computed on the host (through numpy). Inside a trace it is a
    node that runs ``fn`` on every run: the values read at trace time would otherwise be
    fixed into the graph (and an approximation by tensor ops is not what eager computes)."""
    if _core._tracing():
        return _core._trace_call(op, fn, [t.detach() for t in tensors])
    return fn(*tensors)


def _host_pair(a: Tensor, b: Tensor) -> tuple[np.ndarray, np.ndarray, Any]:
    """Float operands on the host, broadcast, in the precision their arithmetic runs in
    (float32 for the half types), and the numpy dtype of the operands themselves."""
    an, bn = a.detach().numpy(), b.detach().numpy()
    native = an.dtype
    work = np.float32 if native.itemsize < 4 else native
    an, bn = np.broadcast_arrays(an.astype(work), bn.astype(work))
    return an, bn, native


def _float_quotient(a: np.ndarray, b: np.ndarray, rounding: str, native: Any) -> np.ndarray:
    """``a / b`` rounded toward zero (``"trunc"``) or minus infinity (``"floor"``), each step
    rounded to the operands' dtype ``native`` (as PyTorch computes the half types). The floor
    is taken of ``(a - fmod(a, b)) / b``, an integer up to the division's rounding, not of
    the ratio ``a / b``, which can round up to the next integer (``100 // -3.703125`` in
    bfloat16 is -28, not -27); an infinite ``a`` gives NaN, a zero ``b`` gives ``a / 0``."""

    def r(x: np.ndarray) -> np.ndarray:
        return x.astype(native).astype(x.dtype) if native != a.dtype else x

    with np.errstate(all="ignore"):
        if rounding == "trunc":
            return np.trunc(r(a / b))
        m = np.fmod(a, b)
        div = r(r(a - m) / b)
        div = np.where((m != 0) & ((b < 0) != (m < 0)), r(div - 1), div)
        fl = np.floor(div)
        fl = np.where(r(div - fl) > 0.5, r(fl + 1), fl)
        out = np.where(div != 0, fl, np.copysign(np.zeros_like(div), a / b))
        return np.where(b == 0, r(a / b), out)


def _mod(op: str, input: Any, other: Any, floor: bool) -> Tensor:
    if isinstance(input, Tensor) and isinstance(other, Tensor) and input.dtype == other.dtype:
        a, b = input, other
    else:
        a, b = _pair(op, input, other)
    if _is_int(a) and _is_int(b):
        fn = np.mod if floor else np.fmod

        def int_mod(a: Tensor, b: Tensor) -> Tensor:
            an, bn = a.numpy(), b.numpy()
            if np.any(bn == 0):
                raise IntegerDivisionByZero(f"{op}: integer division by zero")
            return tensor(fn(an, bn), device=a.device)

        # on the host (exact, and a division by zero raises), a node of its own in a trace
        return _on_host(op, int_mod, a, b)
    # the engine's ops: exact (the remainder of a float division is representable), on the
    # tensors' device, recorded by traces; gradients (g, -g * quotient) as PyTorch's
    return _core.remainder(a, b) if floor else _core.fmod(a, b)


def _no_grad() -> Any:
    from .autodiff import no_grad

    return no_grad()


def floor_divide(input: Any, other: Any) -> Tensor:
    """``input / other`` rounded toward minus infinity (Python's ``//``); integers stay
    integers. No gradient flows through the rounding."""
    return _quotient("floor_divide", input, other, "floor")[2]


def remainder(input: Any, other: Any) -> Tensor:
    """``input - floor(input / other) * other``: Python's ``%`` (the sign of ``other``),
    computed exactly. Differentiable in both (``d/d other = -floor(input / other)``)."""
    return _mod("remainder", input, other, floor=True)


def fmod(input: Any, other: Any) -> Tensor:
    """``input - trunc(input / other) * other``: C's ``fmod`` (the sign of ``input``),
    computed exactly. Differentiable in both (``d/d other = -trunc(input / other)``)."""
    return _mod("fmod", input, other, floor=False)


def true_divide(input: Any, other: Any) -> Tensor:
    """``input / other`` in floating point."""
    return _true_divide("true_divide", input, other)


def rsub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``other - alpha * input`` (PyTorch's reversed subtraction)."""
    import ferrograd as fg

    from ._torch_keywords import scale_by_alpha

    if isinstance(other, Tensor):
        return fg.sub(other, input, alpha=alpha)
    return other - scale_by_alpha("rsub", other, input, alpha)


def _div(input: Any, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    """``input / other``; ``rounding_mode="trunc"`` or ``"floor"`` rounds the quotient
    (integers stay integers)."""
    if rounding_mode is None:
        return _true_divide("div", input, other)
    if rounding_mode not in ("trunc", "floor"):
        raise ShapeError(
            f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}"
        )
    a, b, q = _quotient("div", input, other, rounding_mode)
    # on the graph with gradient 0 (the rounded quotient is piecewise constant), as PyTorch's
    return _zero_grad_link(q, a, b)


def _zero_grad_link(out: Tensor, *inputs: Any) -> Tensor:
    """``out`` unchanged, but on the graph of the float ``inputs`` that need a gradient
    (which then gets 0), as PyTorch's ops whose derivative is zero."""
    keep = None
    for t in inputs:
        if not isinstance(t, Tensor) or t.dtype.kind not in "fc" or out.dtype.kind not in "fc":
            continue
        if not (t.requires_grad or _core._tracking_level([t]) is not None):
            continue
        if keep is None:
            keep = _core.ones(tuple(out.shape), dtype="bool", device=out.device)
        out = _core.where(keep, out, t if t.dtype == out.dtype else t.astype(out.dtype.name))
    return out


divide = div = _div


def multiply(input: Any, other: Any) -> Tensor:
    a, b = _pair("multiply", input, other)
    return a * b


def subtract(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    a, b = _pair("subtract", input, other)
    return a - (b if alpha == 1 else b * alpha)


def negative(input: Tensor) -> Tensor:
    return -_check_tensor("negative", "input", input)


def absolute(input: Tensor) -> Tensor:
    return _check_tensor("absolute", "input", input).abs()


def _compare(name: str, method: str) -> Any:
    def fn(input: Tensor, other: Any) -> Tensor:
        return getattr(_check_tensor(name, "input", input), method)(other)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``input {method} other`` as a bool tensor."
    return fn


eq = _compare("eq", "__eq__")
ne = _compare("ne", "__ne__")
lt = _compare("lt", "__lt__")
le = _compare("le", "__le__")
gt = _compare("gt", "__gt__")
ge = _compare("ge", "__ge__")


# ------------------------------------------------------------------------ elementwise


def _float(op: str, x: Any) -> Tensor:
    x = _check_tensor(op, "input", x)
    if x.dtype.kind != "f":
        x = x.astype(_dtype_name(_core_default_float()))
    return x


_EPS = {"float64": 2.0**-52, "float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}


def _root_eps(x: Tensor) -> float:
    """``sqrt(eps)`` of ``x``'s float dtype: below it ``asinh(x) = x`` and above its reciprocal
    ``sqrt(x^2 + 1) = |x|`` to the dtype's precision."""
    return math.sqrt(_EPS.get(str(x.dtype), 2.0**-23))


def asinh(input: Tensor) -> Tensor:
    """Inverse hyperbolic sine: ``x`` itself near 0 (so -0.0 stays -0.0), ``log1p`` of an
    exact rearrangement in between, ``log(2|x|)`` for large ``|x|`` (where ``x^2`` would
    overflow); odd, +-inf at +-inf. Each branch sees only its own inputs, so no branch's
    infinities reach another's gradient."""
    x = _float("asinh", input)
    r = _root_eps(x)
    a = _core.where(x < 0, -x, x)  # |x|, with gradient +-1 on each side of 0
    small, big = a < r, a > 1.0 / r
    one = _core.ones_like(a)
    am = _core.where(small | big, one, a)
    mid = (am + am * am / (1.0 + (am * am + 1.0).sqrt())).log1p()
    far = _core.where(big, a, one).log() + math.log(2.0)
    v = _core.where(big, far, mid)
    return _core.where(small, x, _core.where(x < 0, -v, v))


def acosh(input: Tensor) -> Tensor:
    """Inverse hyperbolic cosine: ``log1p(t + sqrt(t (t + 2)))`` with ``t = x - 1`` (accurate
    near 1), ``log(2x)`` for large ``x`` (where ``x^2`` would overflow), NaN below 1 (its
    gradient NaN there too)."""
    x = _float("acosh", input)
    r = _root_eps(x)
    big = x > 1.0 / r
    low = x < 1.0
    one = _core.ones_like(x)
    t = _core.where(big | low, one, x) - 1.0
    # sqrt(t) sqrt(t + 2), not sqrt(t (t + 2)): the gradient at 1 is then inf, not NaN
    mid = (t + t.sqrt() * (t + 2.0).sqrt()).log1p()
    far = _core.where(big, x, one + one).log() + math.log(2.0)
    v = _core.where(big, far, mid)
    return _core.where(low, _core.where(low, x, one) * math.nan, v)


def atanh(input: Tensor) -> Tensor:
    """Inverse hyperbolic tangent, ``(log1p(x) - log1p(-x)) / 2``: the two terms have
    opposite signs, so nothing cancels near 0 or near +-1, and its gradient is exactly
    PyTorch's ``1 / (1 - x^2)`` (inf at +-1). +-inf at +-1, NaN beyond."""
    x = _float("atanh", input)
    return 0.5 * (x.log1p() - (-x).log1p())


arcsinh, arccosh, arctanh = asinh, acosh, atanh


def arcsin(input: Tensor) -> Tensor:
    return _check_tensor("arcsin", "input", input).asin()


def arccos(input: Tensor) -> Tensor:
    return _check_tensor("arccos", "input", input).acos()


def arctan(input: Tensor) -> Tensor:
    return _check_tensor("arctan", "input", input).atan()


def arctan2(input: Tensor, other: Tensor) -> Tensor:
    return _core.atan2(input, other)


def frac(input: Tensor) -> Tensor:
    """``x - trunc(x)`` (gradient 1); floating-point tensors only, as PyTorch's (an integer's
    fractional part is no question a program means to ask)."""
    x = _check_tensor("frac", "input", input)
    if x.dtype.kind != "f":
        raise DTypeError(f"frac: input must be a floating-point tensor, got {x.dtype}")
    return x - x.detach().trunc()


def fix(input: Tensor) -> Tensor:
    return _check_tensor("fix", "input", input).trunc()


def deg2rad(input: Tensor) -> Tensor:
    return _float("deg2rad", input) * (math.pi / 180.0)


def rad2deg(input: Tensor) -> Tensor:
    return _float("rad2deg", input) * (180.0 / math.pi)


class _LogAddExp(_Function):
    """``logaddexp`` of two tensors of one shape: the value without overflow, and PyTorch's
    gradient ``g / (1 + exp(b - a))`` for ``a`` (and the mirror for ``b``) written with
    differentiable ops, so that every order is right. (Differentiating ``max(a, b) +
    log1p(exp(-|a - b|))`` instead gives 0 for the second derivative where ``a == b``,
    where it is 1/4: max and abs are only piecewise smooth.)"""

    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        self.a, self.b = a, b
        # an infinite argument: the correction is log1p(0) (exp(-|inf - inf|) would be NaN)
        both_inf = (a == b) & a.isinf()
        d = _core.where(both_inf, _core.zeros_like(a), a - b)
        return _core.maximum(a, b) + (-d.abs()).exp().log1p()

    def backward(self, g: Tensor | None) -> Any:
        if g is None:
            return None, None
        a, b = self.a, self.b
        # +-inf differences give 0 and 1; both arguments the same infinity give NaN, as
        # PyTorch's
        return g / (1.0 + (b - a).exp()), g / (1.0 + (a - b).exp())


def logaddexp(input: Tensor, other: Tensor) -> Tensor:
    """``log(exp(input) + exp(other))`` without overflow, differentiable to any order."""
    a, b = _pair("logaddexp", input, other)
    shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
    a, b = a.broadcast_to(*shape), b.broadcast_to(*shape)
    return _LogAddExp()(a, b)


def logaddexp2(input: Tensor, other: Tensor) -> Tensor:
    """``log2(2**input + 2**other)`` without overflow."""
    ln2 = math.log(2.0)
    a, b = _pair("logaddexp2", input, other)
    return logaddexp(a * ln2, b * ln2) / ln2


def hypot(input: Tensor, other: Tensor) -> Tensor:
    """``sqrt(input**2 + other**2)`` without intermediate overflow or underflow: both are
    scaled by the larger magnitude ``m`` (held constant, so the gradient is exactly
    ``input / hypot`` and ``other / hypot``, as PyTorch's); an infinite argument gives inf."""
    a, b = _pair("hypot", input, other)
    if a.dtype.kind not in "fc":
        a, b = a.astype("float32"), b.astype("float32")
    with _no_grad():
        m = _core.maximum(a.abs(), b.abs())
        inf = a.isinf() | b.isinf()
        m = _core.where((m == 0) | inf | m.isnan(), _core.ones_like(m), m)
    r = m * ((a / m).square() + (b / m).square()).sqrt()
    if bool(inf.any()):
        r = _core.where(inf, _core.ones_like(r) * math.inf, r)
    return r


def xlogy(input: Any, other: Any) -> Tensor:
    """``input * log(other)``, 0 where ``input`` is 0 (also where ``other`` is 0, negative
    or inf; NaN ``other`` gives NaN). The gradient in ``input`` is ``log(other)``, as
    PyTorch's."""
    x, y = _pair("xlogy", input, other)
    blow_up = (x == 0) & ((y <= 0) | y.isinf())
    safe = _core.where(blow_up, _core.ones_like(y), y)
    return x * safe.log()


def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """``log(p / (1 - p))``, computed as ``log(p) - log1p(-p)`` so that the gradient is
    PyTorch's ``1 / (p (1 - p))`` everywhere: +-inf at 0 and 1 (not the NaN of the ratio's
    rule), NaN outside ``[0, 1]``. With ``eps``, ``p`` is first clamped to ``[eps, 1 - eps]``
    as PyTorch does it: ``p < eps`` tested first (so with ``eps > 0.5`` every ``p`` becomes a
    constant, gradient 0), NaN kept."""
    p = _float("logit", input)
    if eps is not None:
        eps = float(eps)
        lo = _core.zeros_like(p) + eps
        hi = _core.zeros_like(p) + (1.0 - eps)
        p = _core.where(p < eps, lo, _core.where(p > 1.0 - eps, hi, p))
    out = p.log() - (-p).log1p()
    outside = (p < 0.0) | (p > 1.0)
    return _core.where(outside, _core.where(outside, p, _core.zeros_like(p)) * math.nan, out)


# sin(u) / u = sum_k (-1)^k u^(2k) / (2k + 1)!, through u^12: below |u| = 0.3 the next term
# is under 1e-19 of the sum
_SINC_SERIES = [(-1.0) ** k / math.factorial(2 * k + 1) for k in range(7)]


def sinc(input: Tensor) -> Tensor:
    """``sin(pi x) / (pi x)``, 1 at 0. Below ``|pi x| = 0.3`` its Taylor series: the quotient's
    gradient ``(u cos u - sin u) / u^2`` cancels there (1e-3 relative error at ``x = 1e-3``
    in float32, most digits lost at ``x = 1e-8`` in float64), the series' does not."""
    x = _float("sinc", input)
    if str(x.dtype) in ("float16", "bfloat16"):
        # pi x rounded to 8 or 11 bits leaves sin(pi x) 1e-3 off its zeros (and overflows
        # past 2e4 in float16): compute in float32, as PyTorch does, and round once
        return sinc(x.astype("float32")).astype(x.dtype)
    u = x * math.pi
    near = u.abs() < 0.3
    un = _core.where(near, u, _core.zeros_like(u))
    series = _horner_coeffs(_SINC_SERIES, un * un)
    uf = _core.where(near, _core.ones_like(u), u)
    return _core.where(near, series, uf.sin() / uf)


def _horner_coeffs(coeffs: list[float], t: Tensor) -> Tensor:
    """``sum(c_k t^k)``."""
    acc = _core.zeros_like(t) + coeffs[-1]
    for c in reversed(coeffs[:-1]):
        acc = acc * t + c
    return acc


def _positive(input: Tensor) -> Tensor:
    """``input`` itself; PyTorch refuses bool tensors (``+`` is not defined on them)."""
    if isinstance(input, Tensor) and input.dtype.kind == "b":
        raise DTypeError("positive: the + operator is not defined for bool tensors")
    return input


def angle(input: Any) -> Any:
    """The argument of each element: for real tensors 0 at and above 0, ``pi`` below, NaN
    at NaN, as a float (integers promote); no gradient, as PyTorch's for real inputs. A
    complex pair gives its own ``angle()``."""
    if hasattr(input, "angle") and getattr(input.dtype, "kind", "") == "c":
        return input.angle()
    x = _float("angle", input)
    zero = _core.zeros_like(x.detach())
    out = _core.where(x.detach() < 0, zero + math.pi, zero)
    out = _core.where(x.detach().isnan(), x.detach(), out)
    # attached to ``x`` with a zero gradient (a never-true where), as PyTorch's result is
    return _core.where(x.detach() < -math.inf, x, out)


def heaviside(input: Tensor, values: Any) -> Tensor:
    """0 where ``input < 0``, 1 where ``> 0``, ``values`` where 0 (no gradient)."""
    if isinstance(input, Tensor) and isinstance(values, Tensor) and input.dtype != values.dtype:
        raise DTypeError(
            f"heaviside: input and values must have the same dtype (PyTorch does not promote "
            f"them), got {input.dtype} and {values.dtype}"
        )
    x, v = _pair("heaviside", input, values)
    step = (x > 0).astype(_dtype_name(x.dtype))
    return _core.where(x == 0, v.astype(_dtype_name(x.dtype)), step).detach()


def copysign(input: Any, other: Any) -> Tensor:
    """``|input|`` with the sign of ``other`` (``-0.0`` counts as negative)."""
    a, b = _pair("copysign", input, other)
    a = _float("copysign", a)
    bd, ad = b.detach(), a.detach()
    neg = (bd < 0) | ((bd == 0) & ((1.0 / bd.astype(_dtype_name(a.dtype))) < 0))
    mag = ad.abs()
    out = _core.where(neg, -mag, mag)
    # the gradient is the sign factor out / input (+-1), 0 where the input is zero, as
    # PyTorch's; zeros and infinities take their value from `out` (-0.0 stays -0.0)
    ratio = _core.where((ad == 0) | (ad == math.inf) | (ad == -math.inf), 0.0, out / ad)
    out = _core.where(ratio != 0, a * ratio, out)
    if b.dtype.kind == "f" and (b.requires_grad or _core._tracking_level([b]) is not None):
        # on other's graph with gradient 0, as PyTorch's (differentiating the result in
        # other gives zeros instead of raising when input needs no gradient)
        keep = _core.ones(tuple(out.shape), dtype="bool", device=out.device)
        out = _core.where(keep, out, b.astype(out.dtype.name))
    return out


def float_power(input: Any, exponent: Any) -> Tensor:
    """``input ** exponent`` in float64 (complex128 where either is complex). A Python
    number converts to float64 itself, not through the tensor's dtype (``float_power(u8,
    -2)`` is 1/x**2, not x**254)."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        _pair("float_power", input, exponent)  # (raises: one must be a tensor)
    like = input if isinstance(input, Tensor) else exponent
    wide = "complex128" if any(_is_complex(v) for v in (input, exponent)) else "float64"

    def cast(v: Any) -> Tensor:
        if isinstance(v, Tensor):
            return v if v.dtype == wide else v.astype(wide)
        return tensor(v, dtype=wide, device=like.device)

    return cast(input) ** cast(exponent)


def _is_complex(v: Any) -> bool:
    return v.dtype.kind == "c" if isinstance(v, Tensor) else isinstance(v, complex)


def fmax(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise maximum that ignores a NaN (NaN only where both are)."""
    a, b = _pair("fmax", input, other)
    m = _core.maximum(a, b)
    a, b = a.broadcast_to(*m.shape), b.broadcast_to(*m.shape)
    # where both are NaN the result (and the gradient) is ``input``'s, as PyTorch's
    return _core.where(b.isnan(), a, _core.where(a.isnan(), b, m))


def fmin(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise minimum that ignores a NaN (NaN only where both are)."""
    a, b = _pair("fmin", input, other)
    m = _core.minimum(a, b)
    a, b = a.broadcast_to(*m.shape), b.broadcast_to(*m.shape)
    # where both are NaN the result (and the gradient) is ``input``'s, as PyTorch's
    return _core.where(b.isnan(), a, _core.where(a.isnan(), b, m))


# ------------------------------------------------------------------------ reductions


_KthResult = _values_indices("kthvalue")
_MedianResult = _values_indices("median")
_CumMaxResult = _values_indices("cummax")
_CumMinResult = _values_indices("cummin")


def _pick_sorted(
    op: str, x: Tensor, dim: int, k: int, keepdim: bool, result: type, nan_first: bool = False
) -> Any:
    """Entry ``k`` (0-based) of ``x`` sorted along ``dim``: ``(values, indices)``. With
    ``nan_first``, a line holding a NaN picks its first NaN instead (median's propagation)."""
    s = sort(x, dim)
    idx = s.indices.narrow(dim, k, 1)
    if nan_first and x.dtype.kind == "f":
        nan = x.detach().isnan()
        if bool(nan.any()):
            first = np.argmax(nan.numpy(), axis=dim)
            first = tensor(np.expand_dims(first, dim), dtype="int64", device=x.device)
            idx = _core.where(nan.any(dim, True), first, idx)
    values = gather(x, dim, idx)
    if not keepdim:
        values, idx = values.squeeze(dim), idx.squeeze(dim)
    return result(values, idx)


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> Any:
    """``(values, indices)`` of the ``k``-th smallest entry (1-based) along ``dim``."""
    from .nn._errors import IndexRuntimeError

    x = _check_tensor("kthvalue", "input", input)
    k = _int("kthvalue", "k", k)
    if x.ndim == 0:
        x1 = x.reshape(1)
        if k != 1:
            raise IndexRuntimeError(f"kthvalue: k={k} out of range for a 0-d tensor")
        r = _pick_sorted("kthvalue", x1, 0, 0, False, _KthResult)
        return _KthResult(r.values.reshape(), r.indices.reshape())
    d = _dim("kthvalue", x, dim)
    n = x.shape[d]
    if not 1 <= k <= n:
        raise IndexRuntimeError(f"kthvalue: k={k} is out of range for dim {d} of size {n}")
    return _pick_sorted("kthvalue", x, d, k - 1, bool(keepdim), _KthResult)


def median(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """The median (the lower of the two middle entries for an even count, as PyTorch);
    with ``dim``, ``(values, indices)``. The gradient goes to the chosen entry."""
    x = _check_tensor("median", "input", input)
    if dim is None:
        flat = x.reshape(-1)
        if flat.shape[0] == 0:
            if x.dtype.kind == "f":  # NaN, as PyTorch's (on the graph of ``input``)
                return flat.sum() * 0.0 + float("nan")
            raise ShapeError("median: the input is empty")
        if bool(flat.detach().isnan().any()):
            return flat[int(np.argmax(np.isnan(flat.numpy())))]
        v = _pick_sorted("median", flat, 0, (flat.shape[0] - 1) // 2, False, _MedianResult)[0]
        if x.dtype.kind != "f":
            return v
        # the gradient is shared by every entry equal to the median, as PyTorch's
        vd = v.detach()
        ties = (flat.detach() == vd).astype(x.dtype.name)
        return vd + ((flat - vd) * ties).sum() / ties.sum()
    if x.ndim == 0:
        return _MedianResult(x, _core.zeros((), dtype="int64", device=x.device))
    d = _dim("median", x, dim)
    n = x.shape[d]
    if n == 0:
        from .nn._errors import IndexValueError

        raise IndexValueError(f"median: dim {d} is empty")
    # a line holding a NaN has median NaN, at its first NaN (as the median of all entries)
    return _pick_sorted("median", x, d, (n - 1) // 2, bool(keepdim), _MedianResult, True)


def _quantile_args(
    op: str, input: Tensor, q: Any, dim: Any, interpolation: str
) -> tuple[Tensor, Any, int]:
    """The checked arguments of :func:`quantile` / :func:`nanquantile`: the float input
    (flattened when ``dim`` is None, or for a 0-d input, as PyTorch's), ``q`` as numpy
    (a number or 1-D, in [0, 1]) and the axis; an input empty along it is refused."""
    x = _check_tensor(op, "input", input)
    if x.dtype.kind != "f":
        raise DTypeError(f"{op}() input tensor must be either float or double dtype")
    if isinstance(q, Tensor) and q.dtype != x.dtype:
        raise DTypeError(f"{op}() q tensor must be same dtype as the input tensor")
    qs = q.detach().numpy() if isinstance(q, Tensor) else np.asarray(q, dtype=np.float64)
    if qs.ndim > 1:
        raise ShapeError(f"{op}: q must be a number or 1-D, got shape {list(qs.shape)}")
    if np.any((qs < 0) | (qs > 1)) or np.any(np.isnan(qs)):
        raise ShapeError(f"{op}: q must be in [0, 1], got {qs.tolist()}")
    modes = ("linear", "lower", "higher", "midpoint", "nearest")
    if interpolation not in modes:
        raise ShapeError(f"{op}: interpolation must be one of {modes}, got {interpolation!r}")
    if dim is not None and x.ndim == 0:
        _dim(op, x.reshape(1), dim)
        dim = None  # a 0-d input: its one value, as PyTorch's
    if dim is None:
        x, d = x.reshape(-1), 0
    else:
        d = _dim(op, x, dim)
    if x.shape[d] == 0:
        raise ShapeError(f"{op}: the input is empty along dim")
    return x, qs, d


def _quantile_keep(v: Tensor, dim: Any, keepdim: bool, d: int, ndim: int) -> Tensor:
    """One quantile's values (the reduced axis kept, of length 1) in the result's shape:
    ``keepdim`` keeps it (every axis, for a flattened input), else it goes."""
    if dim is None or ndim == 0:
        # (a 0-d input gives a 0-d result whatever dim and keepdim, as PyTorch's)
        return v.reshape(*([1] * ndim)) if keepdim else v.reshape(())
    return v if keepdim else v.squeeze(d)


def quantile(
    input: Tensor,
    q: Any,
    dim: Any = None,
    keepdim: bool = False,
    *,
    interpolation: str = "linear",
) -> Tensor:
    """The ``q``-quantiles (a number or a 1-D tensor in [0, 1]) along ``dim`` (of the
    flattened input by default); ``interpolation``: linear, lower, higher, midpoint,
    nearest. A 1-D ``q`` adds a leading axis."""
    x, qs, d = _quantile_args("quantile", input, q, dim, interpolation)
    n = x.shape[d]
    s = sort(x, d).values
    # a row holding NaN gives NaN (PyTorch's; ``nanquantile`` skips them): its last sorted
    # entry, a NaN, so that the gradient goes to that entry as PyTorch's does
    nan_rows = x.detach().isnan().any(d, keepdim=True) if bool(x.detach().isnan().any()) else None

    def _nan_fill(v: Tensor) -> Tensor:
        return v if nan_rows is None else _core.where(nan_rows, s.narrow(d, n - 1, 1), v)

    # a tensor q is differentiable (linear interpolation), as PyTorch's: the weight is
    # q * (n - 1) - floor(q * (n - 1)), the upper neighbour ceil(q * (n - 1))
    q_flat = (
        q.astype(x.dtype.name).reshape(-1)
        if isinstance(q, Tensor) and interpolation == "linear" and q.dtype.kind == "f"
        else None
    )
    out = []
    for k, qi in enumerate(np.atleast_1d(qs)):
        pos = qi * (n - 1)
        if q_flat is not None:
            lo = math.floor(pos)
            a = s.narrow(d, lo, 1)
            w = q_flat[k] * (n - 1) - lo
            v = _nan_fill(a + (s.narrow(d, math.ceil(pos), 1) - a) * w)
            out.append(_quantile_keep(v, dim, keepdim, d, input.ndim))
            continue
        lo = math.floor(pos)
        hi = builtins.min(lo + 1, n - 1)
        frac_ = pos - lo
        if interpolation == "lower":
            hi, frac_ = lo, 0.0
        elif interpolation == "higher":
            lo = hi = math.ceil(pos)
            frac_ = 0.0
        elif interpolation == "nearest":
            lo = hi = int(np.round(pos))  # half to even, as PyTorch
            frac_ = 0.0
        elif interpolation == "midpoint":
            frac_ = 0.5 if hi != lo and frac_ > 0 else 0.0
        a = s.narrow(d, lo, 1)
        v = _nan_fill(a if frac_ == 0.0 else a + (s.narrow(d, hi, 1) - a) * frac_)
        out.append(_quantile_keep(v, dim, keepdim, d, input.ndim))
    return out[0] if qs.ndim == 0 else _core.stack(out, 0)


def nanquantile(
    input: Tensor,
    q: Any,
    dim: Any = None,
    keepdim: bool = False,
    *,
    interpolation: str = "linear",
) -> Tensor:
    """:func:`quantile` ignoring NaN: each row's quantiles among its non-NaN entries (NaN
    for a row of NaN only), as PyTorch's; differentiable in ``input`` and, with linear
    interpolation, in a tensor ``q``."""
    x, qs, d = _quantile_args("nanquantile", input, q, dim, interpolation)
    s = sort(x, d).values  # NaN sorts last
    valid = (~x.detach().isnan()).astype("int64").sum(d, keepdim=True).numpy()
    q_flat = (
        q.astype(x.dtype.name).reshape(-1)
        if isinstance(q, Tensor) and interpolation == "linear" and q.dtype.kind == "f"
        else None
    )
    out = []
    for k, qi in enumerate(np.atleast_1d(qs).astype(np.float64)):
        pos = qi * (np.maximum(valid, 1) - 1)
        lo = np.floor(pos)
        hi = np.minimum(lo + 1, np.maximum(valid - 1, 0))
        frac_ = pos - lo
        if interpolation == "lower":
            hi, frac_ = lo, np.zeros_like(pos)
        elif interpolation == "higher":
            lo = hi = np.ceil(pos)
            frac_ = np.zeros_like(pos)
        elif interpolation == "nearest":
            lo = hi = np.round(pos)  # half to even, as PyTorch
            frac_ = np.zeros_like(pos)
        elif interpolation == "midpoint":
            frac_ = np.where((hi != lo) & (frac_ > 0), 0.5, 0.0)
        a = gather(s, d, tensor(lo.astype(np.int64), device=x.device))
        b = gather(s, d, tensor(hi.astype(np.int64), device=x.device))
        if q_flat is not None:
            # the weight q * (n - 1) - floor(q * (n - 1)) as a function of q, per row's n
            span = tensor(np.maximum(valid, 1) - 1, dtype=x.dtype.name, device=x.device)
            w = q_flat[k] * span - tensor(lo, dtype=x.dtype.name, device=x.device)
        else:
            w = tensor(frac_, dtype=x.dtype.name, device=x.device)
        v = a + (b - a) * w
        if not (valid > 0).all():
            v = _core.where(tensor(valid == 0, device=x.device), math.nan, v)
        out.append(_quantile_keep(v, dim, keepdim, d, input.ndim))
    return out[0] if qs.ndim == 0 else _core.stack(out, 0)


def nansum(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """The sum with NaN counted as zero."""
    x = _check_tensor("nansum", "input", input)
    if dtype is not None:
        x = x.astype(_dtype_name(dtype))
    if x.dtype.kind == "f":
        x = _core.where(x.isnan(), _core.zeros_like(x), x)
    out = x.sum(dim=dim, keepdim=keepdim)
    # with dtype, the result is of dtype (PyTorch's; an int64 sum cast down wraps as the
    # narrower dtype's arithmetic would)
    return out.astype(x.dtype.name) if dtype is not None and out.dtype != x.dtype else out


def nanmean(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """The mean of the entries that are not NaN (NaN where all are)."""
    x = _check_tensor("nanmean", "input", input)
    if x.dtype.kind != "f" and dtype is None:
        from .nn._errors import UnsupportedDTypeError

        raise UnsupportedDTypeError(
            f"nanmean(): expected input to have floating point or complex dtype but got {x.dtype}"
        )
    if dtype is not None:
        x = x.astype(_dtype_name(dtype))
    keep = ~x.isnan()
    total = nansum(x, dim, keepdim)
    count = keep.astype(_dtype_name(x.dtype))
    count = count.sum(dim=dim, keepdim=keepdim)
    return total / count


def _std_var_mean(op: str, stat: str, input: Tensor, args: tuple, kwargs: dict) -> tuple:
    x = _check_tensor(op, "input", input)
    s = getattr(x, stat)(*args, **kwargs)
    dim = kwargs.get("dim", kwargs.get("axis", args[0] if args else None))
    if isinstance(dim, bool):  # std_mean(x, False): the old (input, unbiased) signature
        dim = None
    keepdim = kwargs.get("keepdim", kwargs.get("keepdims", args[2] if len(args) > 2 else False))
    m = x.mean(dim=dim, keepdim=keepdim) if dim is not None else x.mean()
    if dim is None and keepdim:
        m = m.reshape(*([1] * x.ndim))
    return s, m


def std_mean(input: Tensor, *args: Any, **kwargs: Any) -> tuple[Tensor, Tensor]:
    """``(std, mean)`` over the same axes (``std``'s arguments)."""
    return _std_var_mean("std_mean", "std", input, args, kwargs)


def var_mean(input: Tensor, *args: Any, **kwargs: Any) -> tuple[Tensor, Tensor]:
    """``(var, mean)`` over the same axes (``var``'s arguments)."""
    return _std_var_mean("var_mean", "var", input, args, kwargs)


_AminmaxResult = namedtuple("aminmax", ["min", "max"])


def aminmax(input: Tensor, *, dim: Any = None, keepdim: bool = False) -> Any:
    """``(min, max)`` over ``dim`` (all entries by default)."""
    x = _check_tensor("aminmax", "input", input)
    if dim is None:
        lo, hi = x.min(), x.max()
        if keepdim:
            lo, hi = lo.reshape(*([1] * x.ndim)), hi.reshape(*([1] * x.ndim))
        return _AminmaxResult(lo, hi)
    d = _dim("aminmax", x, dim)
    return _AminmaxResult(x.amin(d, keepdim), x.amax(d, keepdim))


def _cum_extreme(op: str, input: Tensor, dim: int, largest: bool, result: type) -> Any:
    x = _check_tensor(op, "input", input)
    if x.ndim == 0:
        return result(x, _core.zeros((), dtype="int64", device=x.device))
    d = _dim(op, x, dim)
    a = np.moveaxis(x.numpy(), d, -1)
    n = a.shape[-1]
    idx = np.zeros(a.shape, dtype=np.int64)
    if n:
        best = a[..., 0].copy()
        cur = np.zeros(a.shape[:-1], dtype=np.int64)
        for i in range(n):
            v = a[..., i]
            # ties take the later index, NaN wins and stays (as PyTorch)
            better = (v >= best) if largest else (v <= best)
            better |= np.isnan(v)
            better &= ~(np.isnan(best) & ~np.isnan(v))
            cur = np.where(better, i, cur)
            best = np.where(better, v, best)
            idx[..., i] = cur
    index = tensor(np.moveaxis(idx, -1, d), dtype="int64", device=x.device)
    return result(gather(x, d, index), index)


def cummax(input: Tensor, dim: int) -> Any:
    """``(values, indices)`` of the running maximum along ``dim``."""
    return _cum_extreme("cummax", input, dim, True, _CumMaxResult)


def cummin(input: Tensor, dim: int) -> Any:
    """``(values, indices)`` of the running minimum along ``dim``."""
    return _cum_extreme("cummin", input, dim, False, _CumMinResult)


# ------------------------------------------------------------------------ shapes


def unbind(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices along ``dim``, as a tuple (each without that axis)."""
    x = _check_tensor("unbind", "input", input)
    if x.ndim == 0:
        raise ShapeError("unbind: a 0-d tensor has no axis to unbind")
    d = _dim("unbind", x, dim)
    return tuple(x.narrow(d, i, 1).squeeze(d) for i in range(x.shape[d]))


def diff(
    input: Tensor, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None
) -> Tensor:
    """The ``n``-th forward difference along ``dim`` (after joining ``prepend``/``append``)."""
    x = _check_tensor("diff", "input", input)
    if x.ndim == 0:
        raise ShapeError("diff: expected a tensor of at least 1 dimension")
    d = _dim("diff", x, dim)
    n = _int("diff", "n", n)
    if n < 0:
        raise ShapeError(f"diff: n must be non-negative, got {n}")
    if n == 0:
        return x  # PyTorch's: the input itself (prepend / append unused)
    for name, p in (("prepend", prepend), ("append", append)):
        if isinstance(p, Tensor) and p.ndim != x.ndim:
            raise ShapeError(
                f"diff: {name} must have the input's number of dimensions ({x.ndim}), got "
                f"shape {list(p.shape)}"
            )
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        from ._ops import cat

        parts = [
            p if isinstance(p, Tensor) else tensor(p, dtype=_dtype_name(x.dtype), device=x.device)
            for p in parts
        ]
        x = cat(parts, d)  # (promoting, as PyTorch's: an int prepend to a float input)
    for _ in range(n):
        m = x.shape[d]
        if m == 0:
            break
        hi, lo = x.narrow(d, 1, m - 1), x.narrow(d, 0, m - 1)
        x = (hi != lo) if x.dtype.kind == "b" else hi - lo
    return x


def _atleast(op: str, k: int, tensors: tuple) -> Any:
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    out = []
    for t in ts:
        t = _check_tensor(op, "tensors", t)
        if t.ndim < k:
            if k == 3 and t.ndim == 2:
                t = t.reshape(*t.shape, 1)
            elif k == 3 and t.ndim == 1:
                t = t.reshape(1, t.shape[0], 1)
            else:
                t = t.reshape(*([1] * (k - t.ndim)), *t.shape)
        out.append(t)
    if len(tensors) == 1 and not isinstance(tensors[0], (list, tuple)):
        return out[0]
    return tuple(out)


def atleast_1d(*tensors: Any) -> Any:
    return _atleast("atleast_1d", 1, tensors)


def atleast_2d(*tensors: Any) -> Any:
    return _atleast("atleast_2d", 2, tensors)


def atleast_3d(*tensors: Any) -> Any:
    return _atleast("atleast_3d", 3, tensors)


def rot90(input: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    """Rotates by 90 degrees ``k`` times in the plane of ``dims`` (from the first axis
    toward the second)."""
    x = _check_tensor("rot90", "input", input)
    if len(dims) != 2:
        raise ShapeError(f"rot90: expected total rotation dims == 2, but got dims = {len(dims)}")
    a, b = (_dim("rot90", x, d, "dims") for d in dims)
    if a == b:
        raise ShapeError(f"rot90: dims must be different axes, got {list(dims)}")
    k = _int("rot90", "k", k) % 4
    if k == 1:
        return x.flip(b).swapaxes(a, b)
    if k == 2:
        return x.flip(a).flip(b)
    if k == 3:
        return x.swapaxes(a, b).flip(b)
    return x


def fliplr(input: Tensor) -> Tensor:
    x = _check_tensor("fliplr", "input", input)
    if x.ndim < 2:
        raise ShapeError(f"fliplr: input must be at least 2-D, got shape {list(x.shape)}")
    return x.flip(1)


def flipud(input: Tensor) -> Tensor:
    x = _check_tensor("flipud", "input", input)
    if x.ndim < 1:
        raise ShapeError("flipud: input must be at least 1-D")
    return x.flip(0)


def _tri_indices(op: str, row: int, col: int, offset: int, upper: bool, device: Any) -> Tensor:
    r, c = (np.triu_indices if upper else np.tril_indices)(
        _int(op, "row", row), _int(op, "offset", offset), _int(op, "col", col)
    )
    return tensor(np.stack([r, c]).astype(np.int64), device=device)


def tril_indices(
    row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None
) -> Tensor:
    """The ``(2, N)`` coordinates of the lower triangle of a ``row x col`` matrix."""
    out = _tri_indices("tril_indices", row, col, offset, False, device)
    return out if dtype is None else out.astype(_dtype_name(dtype))


def triu_indices(
    row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None
) -> Tensor:
    """The ``(2, N)`` coordinates of the upper triangle of a ``row x col`` matrix."""
    out = _tri_indices("triu_indices", row, col, offset, True, device)
    return out if dtype is None else out.astype(_dtype_name(dtype))


def block_diag(*tensors: Tensor) -> Tensor:
    """The block-diagonal matrix of the given 0-, 1- or 2-D tensors."""
    if not tensors:
        from ._tensor import get_default_dtype

        # PyTorch's: an empty (1, 0) matrix of the default dtype
        return _core.zeros((1, 0), dtype=_dtype_name(get_default_dtype()))
    from ._ops import _promoted

    mats = []
    for i, t in enumerate(tensors):
        t = _check_tensor("block_diag", "tensors", t)
        if t.ndim > 2:
            raise ShapeError(
                "torch.block_diag: Input tensors must have 2 or fewer dimensions. "
                f"Input {i} has {t.ndim} dimensions"
            )
        mats.append(t.reshape(*([1] * (2 - t.ndim)), *t.shape))
    mats = _promoted(mats)
    total = builtins.sum(m.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        w = m.shape[1]
        h = m.shape[0]
        parts = [
            _core.zeros((h, left), dtype=_dtype_name(m.dtype), device=m.device),
            m,
            _core.zeros((h, total - left - w), dtype=_dtype_name(m.dtype), device=m.device),
        ]
        rows.append(_core.concat(parts, 1))
        left += w
    return _core.concat(rows, 0)


def kron(input: Tensor, other: Tensor) -> Tensor:
    """The Kronecker product (the shorter shape padded with leading 1s)."""
    a = _check_tensor("kron", "input", input)
    b = _check_tensor("kron", "other", other)
    n = builtins.max(a.ndim, b.ndim)
    a = a.reshape(*([1] * (n - a.ndim)), *a.shape)
    b = b.reshape(*([1] * (n - b.ndim)), *b.shape)
    ea = a.reshape(*[s for d in a.shape for s in (d, 1)])
    eb = b.reshape(*[s for d in b.shape for s in (1, d)])
    out = ea * eb
    return out.reshape(*[x * y for x, y in zip(a.shape, b.shape)])


def tensordot(a: Tensor, b: Tensor, dims: Any = 2) -> Tensor:
    """Contracts the last ``dims`` axes of ``a`` with the first of ``b``, or the axis lists
    ``dims = (axes_a, axes_b)``."""
    a = _check_tensor("tensordot", "a", a)
    b = _check_tensor("tensordot", "b", b)
    if isinstance(dims, Tensor):
        # a 0-d tensor is a count of axes; a 2-row one the two axis lists (PyTorch's)
        if dims.ndim == 0:
            dims = int(dims.item())
        else:
            dims = dims.tolist()
    if isinstance(dims, (int, np.integer)):
        k = _int("tensordot", "dims", dims)
        if k < 0 or k > builtins.min(a.ndim, b.ndim):
            raise ShapeError(
                f"tensordot: dims={k} is out of range for shapes {list(a.shape)} "
                f"and {list(b.shape)}"
            )
        ax_a, ax_b = list(range(a.ndim - k, a.ndim)), list(range(k))
    else:
        da, db = dims
        ax_a = [_dim("tensordot", a, d, "dims") for d in np.atleast_1d(da).tolist()]
        ax_b = [_dim("tensordot", b, d, "dims") for d in np.atleast_1d(db).tolist()]
        if len(ax_a) != len(ax_b):
            raise ShapeError(f"tensordot: {len(ax_a)} axes of a against {len(ax_b)} of b")
    # a contracted axis of size 1 against a longer one is broadcast to it (PyTorch's)
    sa, sb = list(a.shape), list(b.shape)
    for i, j in zip(ax_a, ax_b):
        if sa[i] == 1 and sb[j] != 1:
            sa[i] = sb[j]
        elif sb[j] == 1 and sa[i] != 1:
            sb[j] = sa[i]
    if sa != list(a.shape):
        a = a.expand(*sa)
    if sb != list(b.shape):
        b = b.expand(*sb)
    for i, j in zip(ax_a, ax_b):
        if a.shape[i] != b.shape[j]:
            raise ShapeError(
                f"tensordot: axis {i} of a (size {a.shape[i]}) does not match "
                f"axis {j} of b (size {b.shape[j]})"
            )
    free_a = [i for i in range(a.ndim) if i not in ax_a]
    free_b = [j for j in range(b.ndim) if j not in ax_b]
    k = int(np.prod([a.shape[i] for i in ax_a])) if ax_a else 1
    # (the free sizes spelled out: reshape(-1, 0) is ambiguous for an empty contraction)
    ma = int(np.prod([a.shape[i] for i in free_a])) if free_a else 1
    nb = int(np.prod([b.shape[j] for j in free_b])) if free_b else 1
    am = a.permute(*free_a, *ax_a).reshape(ma, k)
    bm = b.permute(*ax_b, *free_b).reshape(k, nb)
    out_shape = [a.shape[i] for i in free_a] + [b.shape[j] for j in free_b]
    return (am @ bm).reshape(*out_shape)


def inner(input: Tensor, other: Tensor) -> Tensor:
    """Sums over the last axis of both (a product for 0-d operands)."""
    a = _check_tensor("inner", "input", input)
    b = _check_tensor("inner", "other", other)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    return tensordot(a, b, ([a.ndim - 1], [b.ndim - 1]))


def take(input: Tensor, index: Tensor) -> Tensor:
    """Entries of the flattened ``input`` at ``index`` (its shape)."""
    x = _check_tensor("take", "input", input)
    idx = _check_tensor("take", "index", index)
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"take: index must be an integer tensor, got {idx.dtype}")
    flat = x.reshape(-1)
    n = flat.shape[0]
    if _core._tracing():
        # the index's values are not known while the graph is built: wrapped with tensor
        # ops, checked against [-n, n) by the gather itself when the graph runs
        pos = idx.reshape(-1).astype("int64")
        ones = _core.ones((n,), dtype="int64", device=x.device)
        ok = _core.index_select(ones, 0, pos, op="take")
        pos = _core.where(pos < 0, pos + n, pos) * ok
        return _core.index_select(flat, 0, pos).reshape(*idx.shape)
    ii = idx.numpy().astype(np.int64)
    if ii.size and (ii.min() < -n or ii.max() >= n):
        raise IndexError(f"take: an index is out of range for {n} entries")
    ii = np.where(ii < 0, ii + n, ii)
    pos = tensor(ii.reshape(-1), dtype="int64", device=x.device)
    return _core.index_select(flat, 0, pos).reshape(*ii.shape)


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """Stacks 0-/1-D tensors as columns (and 2-D ones side by side)."""
    cols = []
    for t in tensors:
        t = _check_tensor("column_stack", "tensors", t)
        cols.append(t.reshape(-1, 1) if t.ndim <= 1 else t)
    return _core.concat(cols, 1)


def row_stack(tensors: Sequence[Tensor]) -> Tensor:
    from ._torch_compat import vstack

    return vstack(tensors)


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """Every combination of entries of the given 1-D tensors, one per row."""
    from ._torch_compat import meshgrid

    ts = [_check_tensor("cartesian_prod", "tensors", t) for t in tensors]
    for t in ts:
        if t.ndim != 1:
            raise ShapeError(f"cartesian_prod: tensors must be 1-D, got {list(t.shape)}")
    if len(ts) == 1:
        return ts[0]
    grids = meshgrid(*ts, indexing="ij")
    return _core.stack([g.reshape(-1) for g in grids], 1)


# ------------------------------------------------------------------------ search and count


def searchsorted(
    sorted_sequence: Tensor,
    values: Any,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Any = None,
) -> Tensor:
    """Where each of ``values`` would go in ``sorted_sequence`` (the last axis; leading axes
    pair up) to keep it sorted: the first such place, or the last with ``right=True`` /
    ``side="right"``. int64 (int32 with ``out_int32``), no gradient."""
    seq = _check_tensor("searchsorted", "sorted_sequence", sorted_sequence)
    if side is not None:
        if side not in ("left", "right"):
            raise ShapeError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ShapeError("searchsorted: right=True contradicts side='left'")
        right = side == "right"
    if seq.ndim == 0:
        raise ShapeError("searchsorted: sorted_sequence must have at least one dimension")
    scalar = not isinstance(values, Tensor)
    v = values.numpy() if isinstance(values, Tensor) else np.asarray(values)
    s = seq.numpy()
    if s.ndim > 1 and v.ndim == 0:
        raise ShapeError(
            f"searchsorted: a scalar value needs a 1-D sorted_sequence, got shape {list(s.shape)}"
        )
    if sorter is not None:
        # (checked: a short or out-of-range sorter would silently reorder a wrong sequence)
        order = sorter.numpy() if isinstance(sorter, Tensor) else np.asarray(sorter)
        if order.dtype != np.int64:
            raise DTypeError(f"searchsorted: sorter must be an int64 tensor, got {order.dtype}")
        if order.shape != s.shape:
            raise ShapeError(
                f"searchsorted: sorter must have the shape of sorted_sequence {list(s.shape)}, "
                f"got {list(order.shape)}"
            )
        if order.size and (order.min() < 0 or order.max() >= s.shape[-1]):
            raise ShapeError(
                f"searchsorted: sorter index out of range [0, {s.shape[-1]}): "
                f"{order.min()}..{order.max()}"
            )
        s = np.take_along_axis(s, order, -1)
    how = "right" if right else "left"
    if s.ndim == 1:
        out = np.searchsorted(s, v, side=how)
    else:
        if v.shape[:-1] != s.shape[:-1]:
            raise ShapeError(
                f"searchsorted: the leading axes of values {list(v.shape)} must match those "
                f"of sorted_sequence {list(s.shape)}"
            )
        # (the row count spelled out: reshape(-1, 0) is ambiguous for an empty batch)
        n_rows = math.prod(s.shape[:-1])
        rows_s = s.reshape(n_rows, s.shape[-1])
        rows_v = v.reshape(n_rows, v.shape[-1])
        out = np.zeros((n_rows, v.shape[-1]), dtype=np.int64)
        for i, (a, b) in enumerate(zip(rows_s, rows_v)):
            out[i] = np.searchsorted(a, b, side=how)
        out = out.reshape(v.shape)
    out = np.asarray(out, dtype=np.int32 if out_int32 else np.int64)
    if scalar and out.ndim == 0:
        return tensor(out, device=seq.device)
    return tensor(out, device=seq.device)


def bucketize(
    input: Any, boundaries: Tensor, *, out_int32: bool = False, right: bool = False
) -> Tensor:
    """The bucket of each entry of ``input`` among the sorted 1-D ``boundaries``
    (``boundaries[i-1] < x <= boundaries[i]``, or ``<=``/``<`` with ``right=True``)."""
    b = _check_tensor("bucketize", "boundaries", boundaries)
    if b.ndim != 1:
        raise ShapeError(f"bucketize: boundaries must be 1-D, got shape {list(b.shape)}")
    v = input.numpy() if isinstance(input, Tensor) else np.asarray(input)
    out = np.searchsorted(b.numpy(), v, side="right" if right else "left")
    return tensor(np.asarray(out, dtype=np.int32 if out_int32 else np.int64), device=b.device)


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """Counts of each non-negative integer in the 1-D ``input`` (sums of ``weights`` when
    given; no gradient)."""
    x = _check_tensor("bincount", "input", input)
    if x.ndim != 1 or x.dtype.kind not in "iu":
        raise ShapeError(
            f"bincount: input must be a 1-D integer tensor, got {x.dtype} of shape {list(x.shape)}"
        )
    xs = x.numpy()
    if xs.size and xs.min() < 0:
        raise ShapeError("bincount: input must be non-negative")
    w = None if weights is None else _check_tensor("bincount", "weights", weights).numpy()
    if w is not None and (w.ndim != 1 or w.shape[0] != xs.shape[0]):
        raise ShapeError(
            f"bincount: weights should be 1-d and have the same length as input, got shape "
            f"{list(w.shape)} for an input of length {xs.shape[0]}"
        )
    if _int("bincount", "minlength", minlength) < 0:
        raise ShapeError(f"bincount: minlength should be >= 0, got {minlength}")
    out = np.bincount(xs, weights=w, minlength=_int("bincount", "minlength", minlength))
    if weights is None:
        return tensor(out.astype(np.int64), device=x.device)
    # PyTorch's: float32 weights give float32, any other weights float64
    return tensor(out.astype(np.float32 if w.dtype == np.float32 else np.float64), device=x.device)


def histc(input: Tensor, bins: int = 100, min: Any = 0, max: Any = 0) -> Tensor:
    """A histogram of ``bins`` equal bins over ``[min, max]`` (the data's range when
    ``min == max``, as PyTorch's, not only when both are 0); entries outside are ignored.
    No gradient."""
    x = _float("histc", input)
    bins = _int("histc", "bins", bins)
    if bins <= 0:
        raise ShapeError(f"histc: bins must be positive, got {bins}")
    a = x.numpy().reshape(-1)
    lo, hi = _as_builtin_float(min), _as_builtin_float(max)
    if lo == hi and a.size:
        lo, hi = _as_builtin_float(a.min()), _as_builtin_float(a.max())
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ShapeError(f"torch.histc: range of [{lo:g}, {hi:g}] is not finite")
    if lo > hi:
        raise ShapeError(f"torch.histc: max must be larger than min (min {lo}, max {hi})")
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo == hi:
        # a value so large that +-1 does not move it: the entries equal to it fall in the
        # middle bin, as they would for any smaller value
        counts = np.zeros(bins, dtype=np.int64)
        counts[bins // 2] = int(np.count_nonzero(a == lo))
        return tensor(counts.astype(a.dtype), device=x.device)
    with np.errstate(over="ignore"):
        width = np.asarray(hi, dtype=a.dtype) - np.asarray(lo, dtype=a.dtype)
    if not np.isfinite(width):
        # the width overflows the dtype (a range spanning most of it): bin everything
        # halved, which puts each entry in the same bin
        a, lo, hi = a / 2, lo / 2, hi / 2
    # PyTorch's bin of an entry: trunc((x - min) * bins / (max - min)) in the input's dtype
    # (max itself in the last bin), which can differ from the edges' comparison by one bin
    # for an entry on an edge
    lo_, hi_ = np.asarray(lo, dtype=a.dtype), np.asarray(hi, dtype=a.dtype)
    v = a[(a >= lo_) & (a <= hi_)]
    with np.errstate(over="ignore", invalid="ignore"):
        pos = (v - lo_) * a.dtype.type(bins) / (hi_ - lo_)
        # (near the dtype's ends the product overflows: scaled the other way round there)
        pos = np.where(np.isfinite(pos), pos, (v - lo_) / (hi_ - lo_) * a.dtype.type(bins))
    pos = np.clip(np.nan_to_num(np.trunc(pos), nan=0.0), 0, bins - 1).astype(np.int64)
    counts = np.bincount(pos, minlength=bins)
    return tensor(counts.astype(x.numpy().dtype), device=x.device)


_HistogramResult = namedtuple("histogram", ["hist", "bin_edges"])


def _histogram_edges(lo: float, hi: float, n: int, dtype: Any) -> np.ndarray:
    """``n + 1`` equal-width edges from ``lo`` to ``hi`` in ``dtype``, each half built from
    its own end (as PyTorch's linspace), so that both ends are exact."""
    lo_, hi_ = np.asarray(lo, dtype=dtype), np.asarray(hi, dtype=dtype)
    step = (hi_ - lo_) / dtype.type(n)
    i = np.arange(n + 1)
    edges = np.where(
        i < (n + 1) // 2, lo_ + i.astype(dtype) * step, hi_ - (n - i).astype(dtype) * step
    )
    return edges.astype(dtype)


def histogram(
    input: Tensor,
    bins: Any,
    *,
    range: Any = None,
    weight: Any = None,
    density: bool = False,
) -> Any:
    """A histogram of all entries as ``(hist, bin_edges)``, in ``input``'s float dtype:
    ``bins`` equal bins over ``range`` (the data's min and max by default, widened by 0.5
    each way when they are equal, ``[0, 1]`` for no data), or the bins between the edges of
    a 1-D tensor ``bins``. Each bin holds its left edge, the last also its right one;
    entries outside (and NaN) are left out. ``weight`` (``input``'s shape) weights each
    entry; ``density`` divides by the total and the bin width. No gradient."""
    x = _check_tensor("histogram", "input", input)
    if x.dtype.kind != "f":
        raise NotImplementedError(
            f"histogram: not implemented for {x.dtype} input; cast it to a float dtype"
        )
    a = x.detach().numpy().reshape(-1)
    dt = a.dtype
    w = None
    if weight is not None:
        wt = _check_tensor("histogram", "weight", weight)
        if wt.dtype != x.dtype:
            raise DTypeError(f"histogram: weight must have input's dtype {x.dtype}, got {wt.dtype}")
        if tuple(wt.shape) != tuple(x.shape):
            raise ShapeError(
                f"histogram: weight must have input's shape {list(x.shape)}, got {list(wt.shape)}"
            )
        w = wt.detach().numpy().reshape(-1)
    if isinstance(bins, Tensor):
        if range is not None:
            raise TypeError("histogram: range cannot be given with a tensor of bin edges")
        if bins.dtype != x.dtype:
            raise DTypeError(f"histogram: bins must have input's dtype {x.dtype}, got {bins.dtype}")
        if bins.ndim != 1 or bins.shape[0] == 0:
            raise ShapeError(
                f"histogram: bins must be a 1-D tensor of at least 1 edge, "
                f"got shape {list(bins.shape)}"
            )
        edges = bins.detach().numpy().astype(dt)
    else:
        n = _int("histogram", "bins", bins)
        if n <= 0:
            raise ShapeError(f"histogram: bins must be > 0, got {n}")
        if range is not None:
            if not isinstance(range, (tuple, list)) or len(range) != 2:
                raise TypeError(f"histogram: range must be (min, max), got {range!r}")
            lo, hi = _as_builtin_float(range[0]), _as_builtin_float(range[1])
            if lo > hi:
                raise ShapeError(f"histogram: min should not exceed max, got min {lo} max {hi}")
        elif a.size:
            lo, hi = _as_builtin_float(a.min()), _as_builtin_float(a.max())
        else:
            lo, hi = 0.0, 1.0
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ShapeError(f"histogram: range [{lo:g}, {hi:g}] is not finite")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges = _histogram_edges(lo, hi, n, dt)
    m = edges.shape[0] - 1
    hist = np.zeros(builtins.max(m, 0), dtype=np.float64)
    if m > 0 and a.size:
        keep = (a >= edges[0]) & (a <= edges[-1])  # False for NaN
        idx = np.searchsorted(edges, a[keep], side="right") - 1
        idx = np.clip(idx, 0, m - 1)  # the last edge belongs to the last bin
        hist = np.bincount(idx, weights=None if w is None else w[keep], minlength=m)
        hist = hist.astype(np.float64)
    if density:
        with np.errstate(divide="ignore", invalid="ignore"):
            hist = hist / (hist.sum() * np.diff(edges.astype(np.float64)))
    return _HistogramResult(
        tensor(hist.astype(dt), device=x.device), tensor(edges, device=x.device)
    )


_HistogramddResult = namedtuple("histogramdd", ["hist", "bin_edges"])


def histogramdd(
    input: Tensor,
    bins: Any,
    *,
    range: Any = None,
    weight: Any = None,
    density: bool = False,
) -> Any:
    """A ``D``-dimensional histogram of the points in the last dim of ``input`` (shape
    ``(..., D)``), as ``(hist, bin_edges)``: ``bins`` is a count for every dim, one count
    per dim, or one 1-D tensor of edges per dim; ``range`` is ``[min0, max0, min1, ...]``
    (each dim's data range by default, widened by 0.5 each way when it is one value,
    ``[0, 1]`` for no points). Bins hold their left edge, the last also its right one; a
    point outside any dim's edges is left out. ``weight`` (``input.shape[:-1]``) weights
    each point; ``density`` divides by the total and the cell volume. No gradient."""
    op = "histogramdd"
    x = _check_tensor(op, "input", input)
    if x.dtype.kind != "f":
        raise NotImplementedError(
            f"{op}: not implemented for {x.dtype} input; cast it to a float dtype"
        )
    if x.ndim < 2:
        raise ShapeError(
            f"{op}: input must have at least 2 dims (points, D), got shape {list(x.shape)}"
        )
    dims = x.shape[-1]
    pts = x.detach().numpy().reshape(int(np.prod(x.shape[:-1])), dims)
    dt = pts.dtype
    w = None
    if weight is not None:
        wt = _check_tensor(op, "weight", weight)
        if wt.dtype != x.dtype:
            raise DTypeError(f"{op}: weight must have input's dtype {x.dtype}, got {wt.dtype}")
        if tuple(wt.shape) != tuple(x.shape[:-1]):
            raise ShapeError(
                f"{op}: weight must have shape {list(x.shape[:-1])} (input's without its last "
                f"dim), got {list(wt.shape)}"
            )
        w = wt.detach().numpy().reshape(-1)
    if isinstance(bins, (list, tuple)) and bins and isinstance(bins[0], Tensor):
        if range is not None:
            raise TypeError(f"{op}: range cannot be given with tensors of bin edges")
        if len(bins) != dims:
            raise ShapeError(f"{op}: expected {dims} tensors of bin edges, got {len(bins)}")
        edges = []
        for i, b in enumerate(bins):
            if not isinstance(b, Tensor) or b.dtype != x.dtype:
                raise DTypeError(f"{op}: the bin edges for dim {i} must be a {x.dtype} tensor")
            if b.ndim != 1 or b.shape[0] == 0:
                raise ShapeError(
                    f"{op}: the bin edges for dim {i} must be 1-D and not empty, "
                    f"got shape {list(b.shape)}"
                )
            edges.append(b.detach().numpy().astype(dt))
    else:
        counts = list(bins) if isinstance(bins, (list, tuple)) else [bins] * dims
        if len(counts) != dims:
            raise ShapeError(f"{op}: expected {dims} bin counts (one per dim), got {len(counts)}")
        counts = [_int(op, "bins", c) for c in counts]
        if range is not None:
            range = [_as_builtin_float(r) for r in range]
            if len(range) != 2 * dims:
                raise ShapeError(
                    f"{op}: range must have {2 * dims} entries for {dims} dims, got {len(range)}"
                )
        edges = []
        for i, n in enumerate(counts):
            if n <= 0:
                raise ShapeError(f"{op}: bins must be > 0, got {n} for dim {i}")
            if range is not None:
                lo, hi = range[2 * i], range[2 * i + 1]
                if lo > hi:
                    raise ShapeError(f"{op}: min should not exceed max, got {lo} > {hi} (dim {i})")
            elif pts.shape[0]:
                lo, hi = _as_builtin_float(pts[:, i].min()), _as_builtin_float(pts[:, i].max())
            else:
                lo, hi = 0.0, 1.0
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise ShapeError(f"{op}: the range [{lo:g}, {hi:g}] of dim {i} is not finite")
            if lo == hi:
                lo, hi = lo - 0.5, hi + 0.5
            edges.append(_histogram_edges(lo, hi, n, dt))
    sizes = [e.shape[0] - 1 for e in edges]
    hist = np.zeros(sizes, dtype=np.float64)
    if dims and pts.shape[0] and builtins.min(sizes) > 0:
        keep = np.ones(pts.shape[0], dtype=bool)
        idx = []
        for i, e in enumerate(edges):
            keep &= (pts[:, i] >= e[0]) & (pts[:, i] <= e[-1])  # False for NaN
        for i, e in enumerate(edges):
            j = np.searchsorted(e, pts[keep, i], side="right") - 1
            idx.append(np.clip(j, 0, sizes[i] - 1))
        flat = np.ravel_multi_index(idx, sizes) if idx else np.zeros(0, dtype=np.int64)
        hist = (
            np.bincount(flat, weights=None if w is None else w[keep], minlength=int(np.prod(sizes)))
            .astype(np.float64)
            .reshape(sizes)
        )
    if density:
        cell = np.ones(sizes, dtype=np.float64)
        for i, e in enumerate(edges):
            shape = [1] * len(sizes)
            shape[i] = sizes[i]
            cell = cell * np.diff(e.astype(np.float64)).reshape(shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            hist = hist / (hist.sum() * cell)
    return _HistogramddResult(
        tensor(hist.astype(dt), device=x.device),
        tuple(tensor(e, device=x.device) for e in edges),
    )


# ------------------------------------------------------------------------ more products


def mv(input: Tensor, vec: Tensor) -> Tensor:
    """The product of a matrix and a vector."""
    a, v = _check_tensor("mv", "input", input), _check_tensor("mv", "vec", vec)
    if a.ndim != 2 or v.ndim != 1:
        raise ShapeError(
            f"mv: expected a matrix and a vector, got {list(a.shape)} and {list(v.shape)}"
        )
    return a @ v


def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta: float = 1, alpha: float = 1) -> Tensor:
    """``beta * input + alpha * (mat @ vec)`` (PyTorch's dtype rules, as ``addmm``'s)."""
    from ._torch_compat import _addmm_like

    return _addmm_like("addmv", input, (mat, vec), mv, beta, alpha)


def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta: float = 1, alpha: float = 1) -> Tensor:
    """``beta * input + alpha * outer(vec1, vec2)``, as PyTorch's: the dtypes promote; with
    an integer or bool result ``alpha``/``beta`` must not be floats, with a non-bool result
    they must not be bools; bool tensors combine as ``beta and input or alpha and outer``."""
    from ._core import DTypeError
    from ._torch_compat import _float_scalar, _int_scalar, _scaled_sum, outer

    x = _check_tensor("addr", "input", input)
    p = outer(vec1, vec2)
    kinds = {x.dtype.kind, p.dtype.kind}
    result = "f" if kinds & {"f", "c"} else ("i" if kinds & {"i", "u"} else "b")
    for name, v in (("beta", beta), ("alpha", alpha)):
        if result != "b" and isinstance(v, (bool, np.bool_)):
            raise DTypeError(f"addr: Boolean {name} only supported for Boolean results")
        if result != "f" and isinstance(v, (float, complex, np.floating, np.complexfloating)):
            raise DTypeError(
                f"addr: for integral input tensors, argument {name} must not be a floating "
                f"point number, got {v!r}"
            )
    if result == "b":
        pb = p.astype("bool")
        out = pb if bool(alpha) else pb & False
        return out | x.astype("bool") if bool(beta) else out
    if result == "i":
        dt = np.result_type(*(np.dtype(t.dtype.name) for t in (x, vec1, vec2))).name
        b = _int_scalar("addr", "beta", beta, dt)
        a = _int_scalar("addr", "alpha", alpha, dt)
        out = _scaled_sum(x.astype("int64"), p.astype("int64"), b, a, False)
        return out.astype(dt)
    b = _float_scalar("addr", "beta", beta, p.dtype.name)
    a = _float_scalar("addr", "alpha", alpha, p.dtype.name)
    return _scaled_sum(x, p, b, a, False)


def addbmm(
    input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: float = 1, alpha: float = 1
) -> Tensor:
    """``beta * input + alpha * sum_b (batch1[b] @ batch2[b])`` (PyTorch's dtype rules, as
    ``addmm``'s)."""
    from ._torch_compat import _addmm_like, bmm

    def product(b1: Tensor, b2: Tensor) -> Tensor:
        return bmm(b1, b2).sum(axis=0)

    return _addmm_like("addbmm", input, (batch1, batch2), product, beta, alpha)


def dist(input: Tensor, other: Tensor, p: float = 2.0) -> Tensor:
    """The ``p``-norm of ``input - other`` (broadcast)."""
    from ._ops import norm

    a, b = _pair("dist", input, other)
    return norm(a - b, p)


def tensor_split(input: Tensor, indices_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """Splits along ``dim`` into ``n`` nearly equal parts (the first ``size % n`` one longer)
    or at the given indices, as numpy's ``array_split``."""
    x = _check_tensor("tensor_split", "input", input)
    if x.ndim == 0:
        raise ShapeError(
            "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims"
        )
    d = _dim("tensor_split", x, dim)
    size = x.shape[d]
    if isinstance(indices_or_sections, Tensor):
        ios = indices_or_sections
        if ios.dtype.name != "int64":
            from ._core import DTypeError

            raise DTypeError(
                "tensor_split expected tensor_indices_or_sections to have dtype of long, "
                f"but got {ios.dtype}"
            )
        if ios.ndim > 1:
            raise ShapeError(
                "tensor_split expected tensor_indices_or_sections to be a zero-dimensional "
                f"or one-dimensional tensor, but got a tensor with {ios.ndim} dims"
            )
        indices_or_sections = ios.tolist()
    if isinstance(indices_or_sections, (int, np.integer)):
        n = _int("tensor_split", "sections", indices_or_sections)
        if n <= 0:
            raise ShapeError(f"tensor_split: number of sections must be larger than 0, got {n}")
        q, r = divmod(size, n)
        bounds, at = [], 0
        for i in range(n):
            at += q + (1 if i < r else 0)
            bounds.append(at)
        cuts = bounds[:-1]
    else:
        cuts = [
            builtins.min(builtins.max(int(i) + (size if int(i) < 0 else 0), 0), size)
            for i in indices_or_sections
        ]
    out, start = [], 0
    for c in [*cuts, size]:
        # PyTorch slices ``[previous index, index)``: a non-increasing pair gives an empty
        # piece and the next piece starts at the (smaller) index again
        out.append(x.narrow(d, start, builtins.max(c - start, 0)))
        start = c
    return tuple(out)


def unfold_windows(x: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """PyTorch's ``Tensor.unfold``: every window of ``size`` entries along ``dimension``,
    ``step`` apart, as a new last axis (that dimension becomes the window count)."""
    x = _check_tensor("unfold", "input", x)
    d = _dim("unfold", x, dimension, "dimension")
    size, step = _int("unfold", "size", size), _int("unfold", "step", step)
    n = x.shape[d] if x.ndim else 1
    if size < 0 or size > n:
        raise ShapeError(f"unfold: size {size} does not fit dimension {d} of size {n}")
    if step <= 0:
        raise ShapeError(f"unfold: step must be positive, got {step}")
    return x._unfold_view(d, size, step)  # a view, as PyTorch's


def select(input: Tensor, dim: int, index: int) -> Tensor:
    """The slice at ``index`` along ``dim``, without that axis."""
    x = _check_tensor("select", "input", input)
    d = _dim("select", x, dim)
    n = x.shape[d]
    i = _int("select", "index", index)
    if not -n <= i < n:
        raise IndexError(f"select: index {i} is out of range for dim {d} of size {n}")
    return x.narrow(d, i % n, 1).squeeze(d)


def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """``input`` with the slices ``index`` (1-D, or 0-d for one slice) along ``dim``
    replaced by ``source``'s (differentiable in both; the replaced slices get no gradient).
    As PyTorch's: a 0-d input or source counts as 1-D of one entry, and a repeated index
    takes the last of its slices."""
    from ._ops import _index_tensor, index_add
    from ._torch_compat import index_fill

    x = _check_tensor("index_copy", "input", input)
    src = _check_tensor("index_copy", "source", source)
    d = _dim("index_copy", x, dim)
    if src.dtype != x.dtype:
        raise DTypeError(
            f"index_copy: source's dtype {src.dtype} must be input's dtype {x.dtype} "
            "(PyTorch does not convert it)"
        )
    idx = _index_tensor("index_copy", index, x.device)
    if idx.ndim > 1:
        raise IndexError(f"index_copy: index must be 0-d or 1-D, got shape {list(idx.shape)}")
    idx = idx.reshape(-1)
    k = idx.shape[0]
    if src.ndim == 0:
        # PyTorch: a 0-d source takes one index (into a 0-d or 1-D input)
        if k != 1:
            raise IndexError(f"index_copy: a 0-d source needs an index of exactly 1 value, got {k}")
        src = src.reshape(*([1] if x.ndim else []))
    elif x.ndim == 0 and (src.ndim != 1 or src.shape[0] != k):
        raise ShapeError(
            f"index_copy: source of shape {list(src.shape)} does not fit a 0-d input "
            f"with an index of {k} values"
        )
    if x.ndim == 0:
        n = 1
    else:
        n = x.shape[d]
        want = list(x.shape)
        want[d] = k
        if list(src.shape) != want:
            from .nn._errors import IndexValueError

            # (PyTorch: IndexError for a wrong count or rank, RuntimeError for the other
            # dims; a ShapeError is both ValueError and RuntimeError)
            other_dims = src.ndim == x.ndim and src.shape[d] == k
            raise (ShapeError if other_dims else IndexValueError)(
                f"index_copy: source has shape {list(src.shape)}, expected {want} (input's "
                f"shape with dim {d} of the index's length)"
            )
    if _core._tracing() and x.ndim:
        # the index's values are not known while the graph is built: an index_put along
        # dim, whose traced form takes each replay's index (the last write wins)
        from ._torch_extra import index_put

        moved = index_put(x.movedim(d, 0), (idx,), _dtype_like_x(src, x).movedim(d, 0))
        return moved.movedim(0, d)
    pos = idx.numpy()
    if pos.size and (pos.min() < 0 or pos.max() >= n):
        # (a negative index too, as PyTorch's)
        bad = int(pos[(pos < 0) | (pos >= n)][0])
        raise IndexError(
            f"index_copy_(): index {bad} is out of bounds for dimension {d} with size {n}"
        )
    if x.dtype.kind == "b":  # through uint8 (the engine's index_add takes no bools)
        return index_copy(x.astype("uint8"), d, idx, src.astype("uint8")).astype("bool")
    # a repeated index takes the last write (as PyTorch's CPU kernel)
    _, first_rev = np.unique(pos[::-1], return_index=True)
    last = np.sort(pos.size - 1 - first_rev)
    if x.ndim == 0:
        # (through where, so that input gets its zero gradient, as PyTorch's)
        picked = _dtype_like_x(src.reshape(-1)[int(last[-1])], x)
        return _core.where(tensor(True, device=x.device), picked, x)
    if last.size != pos.size:
        keep = tensor(last.astype(np.int64), device=x.device)
        src = src.index_select(d, keep)
        idx = tensor(pos[last], device=x.device)
    cleared = index_fill(x, d, idx, 0.0)
    return index_add(cleared, d, idx, _dtype_like_x(src, x))


def _dtype_like_x(t: Tensor, x: Tensor) -> Tensor:
    return t if t.dtype == x.dtype else t.astype(x.dtype.name)


def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """``input`` with the entries where ``mask`` holds taken, in order, from the first
    entries of ``source``; ``input`` and ``mask`` broadcast together (the output takes
    their broadcast shape), as PyTorch's. ``mask`` must be bool and ``source`` of
    ``input``'s dtype."""
    from ._core import DTypeError

    x = _check_tensor("masked_scatter", "input", input)
    mk = mask if isinstance(mask, Tensor) else tensor(np.asarray(mask), device=x.device)
    if mk.dtype.name != "bool":
        raise DTypeError(f"masked_scatter: mask must be a bool tensor, got {mk.dtype}")
    src = _check_tensor("masked_scatter", "source", source)
    if src.dtype != x.dtype:
        raise DTypeError(
            f"masked_scatter: source must have input's dtype {x.dtype}, got {src.dtype}"
        )
    try:
        shape = tuple(np.broadcast_shapes(tuple(x.shape), tuple(mk.shape)))
    except ValueError:
        raise ShapeError(
            f"masked_scatter: mask of shape {list(mk.shape)} does not broadcast with input of "
            f"shape {list(x.shape)}"
        ) from None
    if shape != tuple(x.shape):
        x = x.broadcast_to(*shape)
    if _core._tracing() and src.numel():
        # the mask's values are not known while the graph is built: each selected entry
        # takes the source entry numbered by the count of selected entries before it (a
        # running sum); a source too short raises when the graph runs (its gather)
        m_flat = mk.broadcast_to(*shape).reshape(-1)
        order = _core.where(m_flat, m_flat.astype("int64").cumsum(0) - 1, 0)
        picked = _core.index_select(src.reshape(-1), 0, order, op="masked_scatter")
        return _core.where(m_flat, picked, x.reshape(-1)).reshape(*shape)
    m = np.broadcast_to(mk.numpy(), shape).astype(bool)
    k = int(m.sum())
    src = src.reshape(-1)
    if src.shape[0] < k:
        raise ShapeError(f"masked_scatter: source has {src.shape[0]} entries, mask selects {k}")
    pos = np.flatnonzero(m.reshape(-1))
    flat = x.reshape(-1)
    taken = src.narrow(0, 0, k)
    from ._ops import index_add
    from ._torch_compat import index_fill

    dev = x.device
    p = tensor(pos.astype(np.int64), device=dev)
    out = index_add(index_fill(flat, 0, p, 0.0), 0, p, taken)
    return out.reshape(*shape)


def _masked_scatter_(self: Tensor, mask: Any, source: Tensor) -> Tensor:
    """In place: ``mask`` must broadcast to this tensor's shape (which stays)."""
    mshape = tuple(mask.shape) if isinstance(mask, Tensor) else np.shape(mask)
    try:
        ok = tuple(np.broadcast_shapes(tuple(self.shape), mshape)) == tuple(self.shape)
    except ValueError:
        ok = False
    if not ok:
        raise ShapeError(
            f"masked_scatter_: mask of shape {list(mshape)} must broadcast to the tensor's "
            f"shape {list(self.shape)}"
        )
    return self.copy_(masked_scatter(self, mask, source))


def sum_to_size(input: Tensor, *size: Any) -> Tensor:
    """Sums ``input`` down to ``size`` (to which it must broadcast)."""
    x = _check_tensor("sum_to_size", "input", input)
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (list, tuple)) else size
    shape = tuple(int(n) for n in shape)
    try:
        expandable = np.broadcast_shapes(shape, tuple(x.shape)) == tuple(x.shape)
    except ValueError:
        expandable = False
    if not expandable:
        raise ShapeError(f"sum_to_size: size {list(shape)} is not expandable to {list(x.shape)}")
    lead = x.ndim - len(shape)
    axes = list(range(lead)) + [
        lead + i for i, n in enumerate(shape) if n == 1 and x.shape[lead + i] != 1
    ]
    out = x.sum(axis=tuple(axes), keepdims=True) if axes else x
    return out.reshape(*shape)


def unique_consecutive(
    input: Tensor, return_inverse: bool = False, return_counts: bool = False, dim: Any = None
) -> Any:
    """The entries with consecutive repeats collapsed (of the flattened input; with ``dim``,
    the runs of equal slices along ``dim``). ``return_inverse``: for each entry (slice),
    the position of its run; ``return_counts``: each run's length."""
    x = _check_tensor("unique_consecutive", "input", input)
    if dim is not None:
        return _unique_consecutive_dim(x, dim, return_inverse, return_counts)
    a = x.numpy().reshape(-1)
    if a.size == 0:
        keep = np.zeros(0, dtype=bool)
    else:
        keep = np.concatenate([[True], a[1:] != a[:-1]])
    out = [tensor(a[keep], device=x.device)]
    if return_inverse:
        out.append(
            tensor((np.cumsum(keep) - 1).reshape(tuple(x.shape)).astype(np.int64), device=x.device)
        )
    if return_counts:
        starts = np.flatnonzero(keep)
        out.append(tensor(np.diff(np.append(starts, a.size)).astype(np.int64), device=x.device))
    return out[0] if len(out) == 1 else tuple(out)


def _unique_consecutive_dim(x: Tensor, dim: Any, return_inverse: bool, return_counts: bool) -> Any:
    op = "unique_consecutive"
    if x.ndim == 0:
        raise IndexError(f"{op}: dim {dim} is out of range for a 0-d tensor")
    d = _dim(op, x, dim)
    if builtins.any(n == 0 for e, n in enumerate(x.shape) if e != d):
        raise ShapeError(
            f"{op}: input of shape {list(x.shape)} has a 0-sized dimension other than dim {d}"
        )
    n = x.shape[d]
    a = np.moveaxis(x.numpy(), d, 0).reshape(n, int(np.prod(x.shape)) // n if n else 0)
    if n == 0:
        keep = np.zeros(0, dtype=bool)
    else:
        # slices equal entry by entry (NaN equals nothing, as PyTorch's)
        keep = np.concatenate([[True], np.any(a[1:] != a[:-1], axis=1)])
    starts = np.flatnonzero(keep)
    idx = tensor(starts.astype(np.int64), device=x.device)
    out = [x.index_select(d, idx)]
    if return_inverse:
        out.append(tensor((np.cumsum(keep) - 1).astype(np.int64), device=x.device))
    if return_counts:
        out.append(tensor(np.diff(np.append(starts, n)).astype(np.int64), device=x.device))
    return out[0] if len(out) == 1 else tuple(out)


# ------------------------------------------------------------------------ Tensor methods


def _cuda(self: Tensor, device: Any = None, non_blocking: bool = False, **_: Any) -> Tensor:
    """This tensor on a CUDA device (``cuda:0`` by default)."""
    if device is None:
        name = "cuda"
    elif isinstance(device, (int, np.integer)):
        name = f"cuda:{int(device)}"
    else:
        name = str(device)
    return self.to(name)


def _stride(self: Tensor, dim: Any = None) -> Any:
    """The step in elements between neighbours along each axis (or along ``dim``)."""
    strides = tuple(self._data_key[3])
    if dim is None:
        return strides
    return strides[_dim("stride", self, dim)]


def _trace_method(self: Tensor) -> Tensor:
    """The sum of the main diagonal of a matrix."""
    if self.ndim != 2:
        raise ShapeError(f"trace: expected a matrix, got shape {list(self.shape)}")
    if self.dtype.kind == "b":
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")  # as PyTorch
    return self.diagonal().sum()


def _with_dtype(name: str, engine: Any) -> Any:
    def method(self: Tensor, *args: Any, dtype: Any = None, **kwargs: Any) -> Tensor:
        try:
            if dtype is None:
                return engine(self, *args, **kwargs)
            # computed in dtype and returned as dtype (PyTorch's: prod(dtype=bool) is bool)
            name = _dtype_name(dtype)
            out = engine(self.astype(name), *args, **kwargs)
        except ValueError as e:
            if type(e) is ValueError:  # the engine's axis checks (a repeated axis, ...)
                raise ShapeError(str(e)) from None
            raise
        return out.astype(name) if isinstance(out, Tensor) and out.dtype.name != name else out

    method.__name__ = name
    method.__doc__ = engine.__doc__
    return method


def _round(engine: Any) -> Any:
    def method(self: Tensor, *args: Any, decimals: int = 0) -> Tensor:
        if args:
            decimals = args[0]
        decimals = _int("round", "decimals", decimals)
        if decimals == 0:
            return engine(self)
        scale = 10.0**decimals
        return engine(self * scale) / scale

    method.__name__ = "round"
    method.__doc__ = "Rounds half to even, to ``decimals`` decimal places (0 by default)."
    return method


def _where_method(self: Tensor, condition: Any, y: Any) -> Tensor:
    """``self`` where ``condition`` holds, else ``y``."""
    return _core.where(_uint8_condition(condition), self, y)


def _bitwise(name: str, op: Any) -> Any:
    def method(self: Tensor, other: Any) -> Tensor:
        if self.dtype.kind != "b" or (isinstance(other, Tensor) and other.dtype.kind != "b"):
            raise TypeError(f"{name}: only bool tensors are supported, got {self.dtype}")
        return op(self, other)

    method.__name__ = name
    return method


def _tc() -> Any:
    from . import _torch_compat

    return _torch_compat


def _F() -> Any:
    from .nn import functional

    return functional


def _ops_multinomial(x: Tensor, n: int, replacement: bool) -> Tensor:
    from ._ops import multinomial

    return multinomial(x, n, replacement)


def _device_index(t: Tensor) -> int:
    name = str(t.device)
    return int(name.split(":")[1]) if ":" in name else 0


class memory_format:
    """PyTorch's memory layouts (``fg.channels_last``, ...), accepted where PyTorch takes a
    ``memory_format``: ferrograd keeps every tensor row-major, so they change nothing."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"ferrograd.{self._name}"


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")


def equal(input: Tensor, other: Tensor) -> bool:
    """PyTorch's ``torch.equal``: True when both have the same shape and the same values
    (a Python bool; NaN equals nothing). The elementwise comparison is :func:`eq`."""
    _check_tensor("equal", "input", input)
    _check_tensor("equal", "other", other)
    return _equal(input, other)


def _equal(self: Tensor, other: Tensor) -> bool:
    """PyTorch's ``Tensor.equal``: the same shape and the same values (NaN equals nothing)."""
    if not isinstance(other, Tensor) or tuple(self.shape) != tuple(other.shape):
        return False
    return bool((self == other).all().item())


def _is_nonzero(self: Tensor) -> bool:
    if self.numel() != 1:
        raise RuntimeError(
            f"is_nonzero: a tensor with {self.numel()} values is ambiguous (expected one value)"
        )
    return bool(self.reshape(()).item() != 0)


def _signbit(self: Tensor) -> Tensor:
    """True where the sign bit is set (negative numbers, ``-0.0``)."""
    a = self.detach().numpy()
    return tensor(np.signbit(a), device=self.device)


def take_along_axis(input: Tensor, indices: Any, axis: Any) -> Tensor:
    """numpy's ``take_along_axis``: ``out[..., i, ...] = input[..., indices[..., i, ...],
    ...]`` along ``axis``; on the other axes a length-1 axis of either broadcasts to the
    other's length (``axis=None``: ``input`` flattened, ``indices`` 1-D). Differentiable
    in ``input``."""
    x = _check_tensor("take_along_axis", "input", input)
    idx = indices if isinstance(indices, Tensor) else tensor(np.asarray(indices), device=x.device)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"take_along_axis: indices must be integers, got {idx.dtype}")
    if axis is None:
        if idx.ndim != 1:
            raise ShapeError(
                f"take_along_axis: with axis=None indices must be 1-D, got shape {list(idx.shape)}"
            )
        return take(x, idx)
    if idx.ndim != x.ndim:
        raise ShapeError(
            f"take_along_axis: indices (shape {list(idx.shape)}) and input (shape "
            f"{list(x.shape)}) must have the same number of dimensions"
        )
    d = _dim("take_along_axis", x, axis, "axis")
    try:
        return _take_along_dim(x, idx.astype("int64"), d)
    except ValueError as e:
        if isinstance(e, ShapeError):
            raise
        raise ShapeError(
            f"take_along_axis: indices of shape {list(idx.shape)} do not broadcast with input "
            f"of shape {list(x.shape)} outside axis {d}"
        ) from None


def _ravel(self: Tensor) -> Tensor:
    """The elements as a 1-D tensor: a view of a contiguous tensor, else a new contiguous
    copy (not a view of anything, as PyTorch's)."""
    c = self.contiguous()
    return c.reshape(-1) if c is self else c.reshape(-1)._forget_base()


def _take_along_dim(x: Tensor, indices: Tensor, dim: Any) -> Tensor:
    if dim is None:
        return take(x, indices.reshape(-1))
    idx = indices
    shape = list(
        np.broadcast_shapes(
            tuple(s if i != (dim % x.ndim) else 1 for i, s in enumerate(x.shape)),
            tuple(s if i != (dim % x.ndim) else 1 for i, s in enumerate(idx.shape)),
        )
    )
    xs = list(shape)
    xs[dim % x.ndim] = x.shape[dim % x.ndim]
    js = list(shape)
    js[dim % x.ndim] = idx.shape[dim % x.ndim]
    return _core.take_along_axis(x.broadcast_to(*xs), idx.broadcast_to(*js), dim % x.ndim)


def _install() -> None:
    methods: dict[str, Any] = {
        "__mod__": remainder,
        "__rmod__": lambda self, other: remainder(other, self),
        "__floordiv__": floor_divide,
        "__rfloordiv__": lambda self, other: floor_divide(other, self),
        "remainder": remainder,
        "fmod": fmod,
        "floor_divide": floor_divide,
        "true_divide": true_divide,
        "divide": _div,
        "multiply": multiply,
        "subtract": subtract,
        "negative": negative,
        "absolute": absolute,
        "asinh": asinh,
        "acosh": acosh,
        "atanh": atanh,
        "arcsinh": asinh,
        "arccosh": acosh,
        "arctanh": atanh,
        "arcsin": arcsin,
        "arccos": arccos,
        "arctan": arctan,
        "arctan2": arctan2,
        "frac": frac,
        "fix": fix,
        "deg2rad": deg2rad,
        "rad2deg": rad2deg,
        "logaddexp": logaddexp,
        "logaddexp2": logaddexp2,
        "hypot": hypot,
        "xlogy": xlogy,
        "logit": logit,
        "sinc": sinc,
        "heaviside": heaviside,
        "copysign": copysign,
        "float_power": float_power,
        "fmax": fmax,
        "fmin": fmin,
        "kthvalue": kthvalue,
        "median": median,
        "quantile": quantile,
        "nanquantile": nanquantile,
        "nansum": nansum,
        "nanmean": nanmean,
        "aminmax": aminmax,
        "cummax": cummax,
        "cummin": cummin,
        "unbind": unbind,
        "diff": diff,
        "rot90": rot90,
        "fliplr": fliplr,
        "flipud": flipud,
        "kron": kron,
        "inner": inner,
        "take": take,
        "bincount": bincount,
        "histc": histc,
        "histogram": histogram,
        "cuda": _cuda,
        "stride": _stride,
        "trace": _trace_method,
        "where": _where_method,
        "pin_memory": lambda self, *a, **k: self,
        "is_pinned": lambda self, *a, **k: False,
        "share_memory_": lambda self: self,
        "is_shared": lambda self: False,
        "bitwise_and": _bitwise("bitwise_and", lambda a, b: a & b),
        "bitwise_or": _bitwise("bitwise_or", lambda a, b: a | b),
        "bitwise_xor": _bitwise("bitwise_xor", lambda a, b: a ^ b),
        "bitwise_not": lambda self: _bitwise("bitwise_not", lambda a, b: ~a)(self, self),
        "mv": mv,
        "addmv": addmv,
        "addr": addr,
        "addbmm": addbmm,
        "addmm": lambda self, mat1, mat2, **kw: _tc().addmm(self, mat1, mat2, **kw),
        "baddbmm": lambda self, b1, b2, **kw: _tc().baddbmm(self, b1, b2, **kw),
        "ger": lambda self, vec2: _tc().outer(self, vec2),
        "dist": dist,
        "tensor_split": tensor_split,
        "unfold": unfold_windows,
        "select": select,
        "index_copy": index_copy,
        "index_copy_": lambda self, dim, index, source: self.copy_(
            index_copy(self, dim, index, source)
        ),
        "masked_scatter": masked_scatter,
        "masked_scatter_": _masked_scatter_,
        "sum_to_size": sum_to_size,
        "unique_consecutive": unique_consecutive,
        "argwhere": lambda self: _tc().nonzero(self),
        "equal": _equal,
        "greater": lambda self, other: self > other,
        "greater_equal": lambda self, other: self >= other,
        "less": lambda self, other: self < other,
        "less_equal": lambda self, other: self <= other,
        "not_equal": lambda self, other: self != other,
        "isposinf": lambda self: self.isinf() & (self > 0),
        "isneginf": lambda self: self.isinf() & (self < 0),
        "isreal": lambda self: _core.ones_like(self).astype("bool"),
        "is_complex": lambda self: False,
        "is_nonzero": _is_nonzero,
        "signbit": _signbit,
        "sgn": lambda self: self.sign(),
        "positive": _positive,
        "ravel": _ravel,
        "moveaxis": lambda self, source, destination: self.movedim(source, destination),
        "swapdims": lambda self, d0, d1: self.swapaxes(d0, d1),
        "take_along_dim": lambda self, indices, dim=None: _take_along_dim(self, indices, dim),
        "msort": lambda self: sort(self, 0).values,
        "multinomial": lambda self, num_samples, replacement=False, **kw: _ops_multinomial(
            self, num_samples, replacement
        ),
        "get_device": lambda self: -1 if str(self.device) == "cpu" else _device_index(self),
        "hardshrink": lambda self, lambd=0.5: _F().hardshrink(self, lambd),
    }
    for name, fn in methods.items():
        if fn is None or name in Tensor.__dict__:
            continue
        setattr(Tensor, name, fn)
    # arguments PyTorch programs pass to methods the engine defines
    Tensor.div = _div
    # over the engine's float-only methods: integers, Python numbers and mixed dtypes
    Tensor.remainder = remainder
    Tensor.fmod = fmod
    Tensor.sum = _with_dtype("sum", Tensor.sum)
    Tensor.mean = _with_dtype("mean", Tensor.mean)
    Tensor.cumsum = _with_dtype("cumsum", Tensor.cumsum)
    Tensor.prod = _with_dtype("prod", Tensor.prod)
    Tensor.round = _round(Tensor.round)


_install()


def broadcast_shapes(*shapes: Any) -> Size:
    """The shape that tensors of ``shapes`` broadcast to (as ``torch.broadcast_shapes``);
    ``ShapeError`` names the pair that does not broadcast."""
    out: list[int] = []
    for shape in shapes:
        if isinstance(shape, (int, np.integer)):
            shape = (shape,)
        try:
            dims = [int(d) for d in shape]
        except TypeError:
            from ._core import DTypeError

            raise DTypeError(
                f"broadcast_shapes: each shape must be an int or a sequence of ints, got {shape!r}"
            ) from None
        if any(d < 0 for d in dims):
            raise ValueError(f"broadcast_shapes: negative dimension in {tuple(dims)}")
        if len(dims) > len(out):
            out = [1] * (len(dims) - len(out)) + out
        for i, d in enumerate(dims):
            j = len(out) - len(dims) + i
            if out[j] == 1:
                out[j] = d
            elif d != 1 and d != out[j]:
                raise ShapeError(
                    f"broadcast_shapes: shape {tuple(dims)} does not broadcast with "
                    f"{tuple(out)} (dimension {i}: {d} vs {out[j]})"
                )
    return Size(out)


class finfo:
    """Limits of a floating dtype (``torch.finfo``): ``bits eps max min tiny
    smallest_normal resolution dtype``; ``finfo()`` describes the default float dtype."""

    def __init__(self, type: Any = None) -> None:
        from ._tensor import default_float

        # a complex dtype describes its parts' float dtype (as PyTorch's finfo)
        parts = {"complex64": "float32", "complex128": "float64"}
        if type is not None and str(getattr(type, "name", type)) in parts:
            name = parts[str(getattr(type, "name", type))]
        else:
            name = default_float() if type is None else _dtype_name(type)
        if name == "bfloat16":
            self.bits, self.eps, self.resolution = 16, 2.0**-7, 0.01
            self.max = 3.3895313892515355e38
            self.tiny = 2.0**-126
        elif name in ("float16", "float32", "float64"):
            f = np.finfo(name)
            self.bits, self.eps = f.bits, builtins.float(f.eps)
            self.resolution = 10.0**-f.precision
            self.max, self.tiny = builtins.float(f.max), builtins.float(f.tiny)
        else:
            raise TypeError(f"finfo: {name} is not a floating point dtype (use iinfo)")
        self.min = -self.max
        self.smallest_normal = self.tiny
        self.dtype = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, finfo) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(("finfo", self.dtype))

    def __repr__(self) -> str:
        return (
            f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, "
            f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
            f"dtype={self.dtype})"
        )


class iinfo:
    """Limits of an integer dtype (``torch.iinfo``): ``bits max min dtype``."""

    def __init__(self, type: Any) -> None:
        name = _dtype_name(type)
        if name == "bool" or not np.issubdtype(np.dtype(name), np.integer):
            raise TypeError(f"iinfo: {name} is not an integer dtype (use finfo)")
        i = np.iinfo(name)
        self.bits, self.max, self.min, self.dtype = (
            i.bits,
            builtins.int(i.max),
            builtins.int(i.min),
            name,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, iinfo) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(("iinfo", self.dtype))

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


def where(condition: Any, input: Any = None, other: Any = None) -> Any:
    """``where(condition, input, other)``: elementwise choice, broadcast (numbers allowed);
    ``where(condition)`` alone: the indices of its true elements, one tensor per axis (as
    ``nonzero(as_tuple=True)``, PyTorch's and numpy's one-argument form)."""
    if input is None and other is None:
        from ._torch_compat import nonzero

        return nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise TypeError("where: give both input and other, or neither")
    return _core.where(_uint8_condition(condition), input, other)


def _uint8_condition(condition: Any) -> Any:
    """A uint8 ``where`` condition (the masks of code written before bool tensors) read as
    ``condition != 0`` with PyTorch's deprecation warning; any other condition as it is."""
    if isinstance(condition, Tensor) and condition.dtype == "uint8":
        warnings.warn(
            "where received a uint8 condition tensor; this is deprecated, use a bool condition",
            UserWarning,
            stacklevel=3,
        )
        return condition != 0
    return condition


def argwhere(input: Tensor) -> Tensor:
    """The indices of the non-zero elements, ``[n, ndim]`` int64 (``nonzero``)."""
    from ._torch_compat import nonzero

    return nonzero(_check_tensor("argwhere", "input", input))
