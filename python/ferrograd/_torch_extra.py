"""More of PyTorch's tensor functions by their names (``fg.*`` and ``Tensor`` methods).

Everything here is a composition of ferrograd's own ops, so gradients come from the ops'
rules. The special functions (``lgamma``, ``digamma``, ``polygamma``, ``erfinv``, ``i0``)
are series/recurrence compositions accurate to about 1e-14 relative in float64; their
gradients are the autodiff of the composition. Functions that only move integers about
(``gcd``, ``unravel_index``, ``mode``'s indices, ...) compute on the host with numpy and read
the data, so they cannot run inside ``fg.trace``; the elementwise compositions can.
"""

from __future__ import annotations

import builtins
import itertools
import math
from collections import namedtuple
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from . import _core
from ._core import DTypeError, ShapeError, Tensor
from ._ops import _check_tensor, _dim, _int, _wide_index, gather, index_add
from ._tensor import _dtype_name, bfloat16, tensor
from ._torch_more import _on_host, _pair, tensor_split
from .autodiff import Function as _Function

__all__ = [
    "bitwise_and",
    "bitwise_left_shift",
    "bitwise_not",
    "bitwise_or",
    "bitwise_right_shift",
    "bitwise_xor",
    "broadcast_tensors",
    "can_cast",
    "chain_matmul",
    "combinations",
    "corrcoef",
    "cov",
    "cumulative_trapezoid",
    "diag_embed",
    "diagflat",
    "diagonal_scatter",
    "digamma",
    "dsplit",
    "erfinv",
    "frexp",
    "gcd",
    "geqrf",
    "hsplit",
    "i0",
    "index_put",
    "is_floating_point",
    "isin",
    "lcm",
    "ldexp",
    "lgamma",
    "logcumsumexp",
    "logspace",
    "matrix_exp",
    "mode",
    "mvlgamma",
    "nanmedian",
    "nuclear_norm",
    "orgqr",
    "polygamma",
    "promote_types",
    "randint_like",
    "repeat_interleave",
    "result_type",
    "scatter_reduce",
    "select_scatter",
    "sgn",
    "signbit",
    "slice_scatter",
    "take_along_dim",
    "trapezoid",
    "trapz",
    "unravel_index",
    "vander",
    "vdot",
    "vsplit",
]

_ModeResult = namedtuple("mode", ["values", "indices"])
_NanmedianResult = namedtuple("nanmedian", ["values", "indices"])
_FrexpResult = namedtuple("frexp", ["mantissa", "exponent"])


# ---------------------------------------------------------------------------------- helpers


def _float(op: str, x: Any, name: str = "input") -> Tensor:
    """``x`` as a float tensor (integers and bools become the default float dtype)."""
    x = _check_tensor(op, name, x)
    if x.dtype.kind != "f":
        from ._tensor import default_float

        x = x.astype(_dtype_name(default_float()))
    return x


def _const(value: Any, like: Tensor) -> Tensor:
    """A constant of ``like``'s dtype and device."""
    return _core.full(tuple(like.shape), value, dtype=_dtype_name(like.dtype), device=like.device)


def _scalar(value: Any, like: Tensor) -> Tensor:
    return tensor(value, dtype=_dtype_name(like.dtype), device=like.device)


def _where(cond: Tensor, a: Tensor, b: Tensor) -> Tensor:
    return _core.where(cond, a, b)


def _idx(values: Any, device: str) -> Tensor:
    return tensor(np.asarray(values, dtype=np.int64), device=device)


def _host(x: Tensor) -> np.ndarray:
    return x.detach().numpy()


def _perm_to_end(ndim: int, dims: Sequence[int]) -> list[int]:
    rest = [d for d in range(ndim) if d not in dims]
    return rest + list(dims)


def _inverse_perm(perm: Sequence[int]) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def _reduce_frac(x: Tensor) -> Tensor:
    """``x - round(x)`` (in [-0.5, 0.5]); the rounding carries no gradient."""
    return x - x.detach().round()


# --------------------------------------------------------------------- special functions

# Bernoulli numbers B_2, B_4, ..., B_20
_BERNOULLI = [
    1.0 / 6,
    -1.0 / 30,
    1.0 / 42,
    -1.0 / 30,
    5.0 / 66,
    -691.0 / 2730,
    7.0 / 6,
    -3617.0 / 510,
    43867.0 / 798,
    -174611.0 / 330,
]
_SHIFT = 12  # recurrence shift: the asymptotic series is summed at z >= 12.5


def _horner(coeffs: Sequence[float], t: Tensor) -> Tensor:
    """``sum(c_k t^k)``."""
    acc = None
    for c in reversed(coeffs):
        acc = _const(c, t) if acc is None else acc * t + c
    return acc


def _lgamma_pos(w: Tensor) -> Tensor:
    """log Gamma(w) for w >= 0.5: Stirling's series at ``w + 12``, shifted back down."""
    z = w + float(_SHIFT)
    logs = w.log()
    for k in range(1, _SHIFT):
        logs = logs + (w + float(k)).log()
    r = z.reciprocal()
    r2 = r * r
    # sum_k B_2k / (2k (2k-1) z^(2k-1)) = r * poly(r^2)
    coeffs = [b / ((2 * k + 2) * (2 * k + 1)) for k, b in enumerate(_BERNOULLI[:8])]
    series = r * _horner(coeffs, r2)
    stirling = (z - 0.5) * z.log() - z + 0.5 * math.log(2 * math.pi) + series
    return stirling - logs


def _zeta(k: int) -> float:
    """The Riemann zeta function at an integer ``k >= 2`` (Euler-Maclaurin at n = 20)."""
    n = 20
    head = math.fsum(j ** (-k) for j in range(1, n))
    tail = n ** (1 - k) / (k - 1) + 0.5 * n ** (-k)
    rising = float(k)  # k (k+1) ... (k + 2j - 2)
    for j, b in enumerate(_BERNOULLI[:6], 1):
        tail += b / math.factorial(2 * j) * rising * n ** (-k - 2 * j + 1)
        rising *= (k + 2 * j - 1) * (k + 2 * j)
    return head + tail


# log Gamma(1 + e) = -euler_gamma e + sum_{k>=2} (-1)^k zeta(k) / k e^k, for |e| <= 1/2
_LGAMMA1 = [0.0, -0.5772156649015329] + [(-1) ** k * _zeta(k) / k for k in range(2, 56)]


def _lgamma_near(w: Tensor) -> Tensor:
    """log Gamma(w) for w >= 0.5, accurate in relative terms near the zeros at 1 and 2 too:
    Taylor series about 1 and 2 on [0.5, 2.5), Stirling's series above."""
    near1 = w < 1.5
    near2 = (w >= 1.5) & (w < 2.5)
    e = _where(near1, w - 1.0, _where(near2, w - 2.0, _const(0.0, w)))
    series = _horner(_LGAMMA1, e)
    series = _where(near2, series + e.log1p(), series)
    far = _lgamma_pos(_where(near1 | near2, _const(3.0, w), w))
    return _where(near1 | near2, series, far)


_EPS_OF = {"float64": 2.0**-52, "float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}


def lgamma(input: Tensor) -> Tensor:
    """``log|Gamma(x)|``; ``inf`` at the non-positive integers. Differentiable (the gradient
    is ``digamma``)."""
    x0 = _float("lgamma", input)
    if str(x0.dtype) != "float64":
        # the reflection loses ~1e-5 near the negative zeros in single precision: compute in
        # double, round once
        return lgamma(x0.astype("float64")).astype(x0.dtype)
    # +-inf, and the negative floats too large to have a fraction (all poles): inf, as
    # PyTorch's (the series below would give inf - inf there); they are kept out of the
    # series, whose gradient would be NaN at them; the gradient at +inf is inf
    far = x0.isinf() | (x0 <= -1.0 / _EPS_OF.get(str(x0.dtype), 2.0**-23))
    # the poles at 0 and the negative integers: inf, also kept out of the series
    zero = x0 == 0
    pole = (x0 < 0) & (x0 == x0.detach().round()) & ~far
    x = _where(far | zero | pole, _const(0.5, x0), x0)
    low = x < 0.5
    w = _where(low, 1.0 - x, x)
    pos = _lgamma_near(w)
    # reflection: log|Gamma(x)| = log(pi / |sin(pi x)|) - log Gamma(1 - x)
    r = _where(low, _reduce_frac(x), _const(0.5, x))
    refl = math.log(math.pi) - (r * math.pi).sin().abs().log() - pos
    out = _where(low, refl, pos)
    # at +-0, -log(x) is inf with PyTorch's gradient digamma(+-0) = -+inf; at a negative
    # pole -log|x - x| is inf with gradient NaN (inf times abs's 0 slope), PyTorch's too
    xz = _where(zero, x0, _const(1.0, x0))
    out = _where(zero, -xz.log(), out)
    xp = _where(pole, x0, _const(1.0, x0))
    out = _where(pole, -(xp - xp.detach()).abs().log(), out)
    return _where(far, _where(far, x0, _const(1.0, x0)).abs() * math.inf, out)


def _polygamma_pos(n: int, w: Tensor) -> Tensor:
    """psi^(n)(w) for w >= 0.5: the recurrence up to ``w + shift``, then the asymptotic
    series there."""
    shift = _SHIFT + 2 * n
    z = w + float(shift)
    r = z.reciprocal()
    r2 = r * r
    if n == 0:
        coeffs = [-b / (2 * k + 2) for k, b in enumerate(_BERNOULLI)]
        asym = z.log() - 0.5 * r + r2 * _horner(coeffs, r2)
    else:
        fn1 = math.factorial(n - 1)
        coeffs = [
            b * math.factorial(2 * k + 2 + n - 1) / math.factorial(2 * k + 2)
            for k, b in enumerate(_BERNOULLI)
        ]
        rn = r**n
        body = fn1 + 0.5 * math.factorial(n) * r + r2 * _horner(coeffs, r2)
        asym = (-1.0) ** (n + 1) * rn * body
    acc = None
    for k in range(shift):
        term = (w + float(k)).reciprocal() if k else w.reciprocal()
        if n:
            term = term ** (n + 1)
        acc = term if acc is None else acc + term
    return asym - ((-1.0) ** n * math.factorial(n)) * acc


def _cot_derivative(n: int) -> list[float]:
    """The coefficients (in powers of c = cot(pi x)) of d^n/dx^n cot(pi x)."""
    poly = [0.0, 1.0]  # c
    for _ in range(n):
        # d/dx P(c) = P'(c) * (-pi (1 + c^2))
        dp = [k * poly[k] for k in range(1, len(poly))] or [0.0]
        out = [0.0] * (len(dp) + 2)
        for k, a in enumerate(dp):
            out[k] -= math.pi * a
            out[k + 2] -= math.pi * a
        poly = out
    return poly


def _polygamma(op: str, n: int, x0: Tensor) -> Tensor:
    if str(x0.dtype) != "float64":
        # the reflection's cot loses ~1e-5 for negative x in single precision: compute in
        # double, round once
        return _polygamma(op, n, x0.astype("float64")).astype(x0.dtype)
    # the poles (0 and the negative integers) are kept out of the series, whose gradient
    # would be NaN there even where the value is replaced below
    pole = (x0 <= 0) & (x0 == x0.detach().round())
    x = _where(pole, _const(0.5, x0), x0)
    low = x < 0.5
    w = _where(low, 1.0 - x, x)
    pos = _polygamma_pos(n, w)
    # reflection, differentiated n times:
    # (-1)^n psi^(n)(1 - x) - psi^(n)(x) = pi d^n/dx^n cot(pi x)
    r = _where(low, _reduce_frac(x), _const(0.25, x))
    c = (r * math.pi).cos() / (r * math.pi).sin()
    refl = ((-1.0) ** n) * pos - math.pi * _horner(_cot_derivative(n), c)
    out = _where(low, refl, pos)
    # at the poles, d: x itself at +-0, x - x (+0 with slope 1) at the negative integers,
    # 1 elsewhere (so nothing infinite reaches the other entries' gradients)
    zero = x0 == 0
    pz = _where(pole, x0, _const(1.0, x0))
    d = _where(zero | ~pole, pz, pz - pz.detach())
    if n == 0:
        # PyTorch: -inf at +0, +inf at -0 (-1/x, gradient inf) and NaN at the negative
        # integers
        pn = _where(pole & ~zero, x0, _const(1.0, x0))
        special = _where(zero, -d.reciprocal(), (pn - pn.detach()) * math.nan)
    else:
        # the leading term of the Laurent series, (-1)^(n+1) n! / d^(n+1): +inf for odd n
        # (with PyTorch's -inf gradient), the one-sided limit from above for even n
        special = ((-1.0) ** (n + 1) * math.factorial(n)) * d.reciprocal() ** (n + 1)
    return _where(pole, special, out)


def digamma(input: Tensor) -> Tensor:
    """``d/dx log Gamma(x)``; differentiable (the gradient is ``polygamma(1, x)``)."""
    return _polygamma("digamma", 0, _float("digamma", input))


def polygamma(n: int, input: Tensor) -> Tensor:
    """The ``n``-th derivative of ``digamma`` (``n >= 0``); differentiable."""
    n = _int("polygamma", "n", n)
    if n < 0:
        raise ShapeError(f"polygamma: n must be non-negative, got {n}")
    if n > 20:
        raise ShapeError(f"polygamma: n above 20 is not supported, got {n}")
    return _polygamma("polygamma", n, _float("polygamma", input))


class _DomainError(ValueError, RuntimeError):
    """An argument outside a function's domain: a ValueError, and the RuntimeError PyTorch
    raises for it."""


def mvlgamma(input: Tensor, p: int) -> Tensor:
    """The multivariate log-gamma of dimension ``p``:
    ``p(p-1)/4 log(pi) + sum_{j<p} lgamma(x - j/2)``; every entry must exceed ``(p-1)/2``."""
    x = _float("mvlgamma", input)
    p = _int("mvlgamma", "p", p)
    if p < 1:
        raise ShapeError(f"mvlgamma: p must be at least 1, got {p}")
    if not _core._tracing() and x.numel() and bool((x.detach() <= (p - 1) / 2).any()):
        raise _DomainError(f"mvlgamma: all entries of input must be greater than {(p - 1) / 2}")
    out = lgamma(x)
    for j in range(1, p):
        out = out + lgamma(x - j / 2)
    return out + p * (p - 1) / 4 * math.log(math.pi)


_SQRT_PI_2 = 2.0 / math.sqrt(math.pi)


class _InverseOp(_Function):
    """``x = f^-1(y)`` for an increasing ``f`` whose slope at ``x`` is known in closed form:
    the value comes from ``value(y)`` (untracked) and the gradient is ``g / f'(x)`` with ``x``
    itself this op, so the gradient is differentiable again and every order is right (an
    iteration's last step on a detached guess gets the first derivative only: its second
    derivative would be that of the step, not of the inverse)."""

    def __init__(self, value: Any, inv_slope: Any, out: Tensor | None = None) -> None:
        self.value, self.inv_slope, self.out = value, inv_slope, out

    def forward(self, y: Tensor) -> Tensor:
        self.y = y
        if self.out is None:
            self.out = self.value(y)
        return self.out

    def backward(self, g: Tensor | None) -> Tensor | None:
        if g is None:
            return None
        x = _InverseOp(self.value, self.inv_slope, self.out)(self.y)
        return g * self.inv_slope(x)


def _inverse(value: Any, inv_slope: Any, y: Tensor) -> Tensor:
    """``value(y)``, the inverse of a function whose reciprocal slope at the result ``x`` is
    ``inv_slope(x)``, differentiable to any order (see ``_InverseOp``)."""
    return _InverseOp(value, inv_slope)(y)


def _erfinv_inv_slope(x: Tensor) -> Tensor:
    # 1 / erf'(x) = sqrt(pi)/2 exp(x^2): +inf at x = +-inf (y = +-1), NaN where x is
    return (x * x).exp() * (1.0 / _SQRT_PI_2)


def erfinv(input: Tensor) -> Tensor:
    """The inverse of ``erf`` on [-1, 1] (``+-inf`` at ``+-1``, NaN outside). A closed-form
    first guess refined by Newton steps on ``erf`` (on ``log erfc`` in the tails); the
    gradient is ``sqrt(pi)/2 exp(erfinv(x)^2)``, differentiable again."""
    y = _float("erfinv", input)
    return _inverse(_erfinv_value, _erfinv_inv_slope, y)


def _erfinv_value(y: Tensor) -> Tensor:
    ay = y.abs()
    central = ay <= 0.5
    yc = _where(central, y, _const(0.0, y))
    # the tails: solve erfc(t) = 1 - |y| for t > 0 (1 - |y| is exact for |y| >= 0.5)
    inside = (ay > 0.5) & (ay < 1.0)
    q = _where(inside, 1.0 - ay, _const(0.25, y))
    logq = q.log()

    with _no_grad():
        # Winitzki's closed form as a first guess
        a = 0.147
        yd = yc.detach()
        ln = (1.0 - yd * yd).log()
        t1 = 2.0 / (math.pi * a) + ln / 2.0
        xc = yd.sign() * ((t1 * t1 - ln / a).sqrt() - t1).sqrt()
        for _ in range(4):
            xc = xc - (xc.erf() - yd) / (_SQRT_PI_2 * (-xc * xc).exp())
        qd = q.detach()
        lnq = (qd * (2.0 - qd)).log()
        t2 = 2.0 / (math.pi * a) + lnq / 2.0
        xt = ((t2 * t2 - lnq / a).sqrt() - t2).sqrt()
        lq = qd.log()
        for _ in range(6):
            ec = xt.erfc()
            xt = xt + (ec.log() - lq) * ec / (_SQRT_PI_2 * (-xt * xt).exp())
    # the final steps, with the gradient
    xc = xc - (xc.erf() - yc) / (_SQRT_PI_2 * (-xc * xc).exp())
    ec = xt.erfc()
    xt = xt + (ec.log() - logq) * ec / (_SQRT_PI_2 * (-xt * xt).exp())
    out = _where(central, xc, xt * y.detach().sign())
    # +-0 keep their sign (the slope there is sqrt(pi)/2)
    zero = y == 0
    out = _where(zero, _where(zero, y, _const(0.0, y)) * (1.0 / _SQRT_PI_2), out)
    # the edges and outside, with PyTorch's gradient sqrt(pi)/2 exp(erfinv(y)^2) there:
    # +inf at +-1 and NaN where the value is NaN (beyond +-1 and at NaN)
    edge = ay == 1.0
    out = _where(edge, _where(edge, y, _const(0.0, y)).abs() * y.detach() * math.inf, out)
    outside = ~(ay <= 1.0)
    return _where(outside, _where(outside, y, _const(0.0, y)) * math.nan, out)


def _no_grad() -> Any:
    from .autodiff import no_grad

    return no_grad()


_I0_TERMS = 64
_I0_SERIES = [1.0 / math.factorial(k) ** 2 for k in range(_I0_TERMS)]
_I0_ASYM = [1.0]
for _k in range(1, 24):
    _I0_ASYM.append(_I0_ASYM[-1] * (2 * _k - 1) ** 2 / (8.0 * _k))


def i0(input: Tensor) -> Tensor:
    """The modified Bessel function of the first kind, order 0: its power series in
    ``x^2/4`` for ``|x| <= 30``, the asymptotic expansion above. Differentiable."""
    x = _float("i0", input)
    if x.dtype.kind == "f" and str(x.dtype) != "float64":
        # the 64-term series loses about 1e-3 relative accuracy (and overflows its gradient)
        # when summed in single precision: sum it in double, round once
        return i0(x.astype("float64")).astype(x.dtype)
    small = x.abs() <= 30.0
    xs = _where(small, x, _const(0.0, x))
    series = _horner(_I0_SERIES, xs * xs * 0.25)
    xl = _where(small, _const(31.0, x), x.abs())
    asym = (xl - 0.5 * xl.log()).exp() / math.sqrt(2 * math.pi) * _horner(_I0_ASYM, xl.reciprocal())
    # exp(x) / sqrt(x) overflows past x ~ 709: split the exponent
    return _where(small, series, asym)


def _bessel_asym(nu: int) -> list[float]:
    """The coefficients ``a_k`` of ``I_nu(x) ~ exp(x) / sqrt(2 pi x) sum_k a_k x^-k``."""
    mu, out = 4.0 * nu * nu, [1.0]
    for k in range(1, 24):
        out.append(-out[-1] * (mu - (2 * k - 1) ** 2) / (8.0 * k))
    return out


_BESSEL_SERIES = {
    nu: [1.0 / (math.factorial(k) * math.factorial(k + nu)) for k in range(_I0_TERMS)]
    for nu in (0, 1)
}
_BESSEL_ASYM = {nu: _bessel_asym(nu) for nu in (0, 1)}


def _bessel_i(op: str, nu: int, input: Tensor, scaled: bool) -> Tensor:
    """``I_nu(x)`` (``nu`` 0 or 1), times ``exp(-|x|)`` when ``scaled``: the power series
    ``(x/2)^nu sum_k (x^2/4)^k / (k! (k + nu)!)`` for ``|x| <= 30``, the asymptotic expansion
    above it (where the scaled form never overflows). Summed in double precision for the
    narrower float dtypes; differentiable (``I0' = I1``, ``I1' = I0 - I1 / x``)."""
    x = _float(op, input)
    if str(x.dtype) != "float64":
        return _bessel_i(op, nu, x.astype("float64"), scaled).astype(x.dtype)
    small = x.abs() <= 30.0
    xs = _where(small, x, _const(0.0, x))
    series = _horner(_BESSEL_SERIES[nu], xs * xs * 0.25)
    if nu:
        series = series * (xs * 0.5)
    if scaled:
        series = series * (-xs.abs()).exp()
    xl = _where(small, _const(31.0, x), x.abs())
    asym = _horner(_BESSEL_ASYM[nu], xl.reciprocal()) / math.sqrt(2 * math.pi)
    if scaled:
        asym = asym / xl.sqrt()
    else:
        # exp(x) / sqrt(x) overflows past x ~ 709 before the quotient does: one exponent
        asym = asym * (xl - 0.5 * xl.log()).exp()
    if nu % 2:
        asym = asym * x.detach().sign()
    return _where(small, series, asym)


def i0e(input: Tensor) -> Tensor:
    """``i0(x) exp(-|x|)``, the exponentially scaled Bessel function (finite for every x)."""
    return _bessel_i("i0e", 0, input, True)


def i1(input: Tensor) -> Tensor:
    """The modified Bessel function of the first kind, order 1 (odd); differentiable."""
    return _bessel_i("i1", 1, input, False)


def i1e(input: Tensor) -> Tensor:
    """``i1(x) exp(-|x|)``, the exponentially scaled ``i1``."""
    return _bessel_i("i1e", 1, input, True)


# ------------------------------------------------------------------------ shape functions


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """The tensors broadcast to their common shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    ts = [_check_tensor("broadcast_tensors", f"tensors[{i}]", t) for i, t in enumerate(tensors)]
    try:
        shape = np.broadcast_shapes(*(tuple(t.shape) for t in ts))
    except ValueError:
        raise ShapeError(
            f"broadcast_tensors: shapes {[list(t.shape) for t in ts]} do not broadcast"
        ) from None
    return tuple(t if tuple(t.shape) == shape else t.broadcast_to(*shape) for t in ts)


def _embed_diagonal(src: Tensor, rows: int, cols: int, offset: int) -> Tensor:
    """``src``'s last axis laid on diagonal ``offset`` of new trailing ``rows x cols`` axes
    (zeros elsewhere), via one index_select on a zero-padded copy."""
    n = src.shape[-1]
    pad = _core.zeros((*src.shape[:-1], 1), dtype=_dtype_name(src.dtype), device=src.device)
    padded = _core.concat([src, pad], src.ndim - 1)
    idx = np.full((rows, cols), n, dtype=np.int64)
    i0_, j0 = (0, offset) if offset >= 0 else (-offset, 0)
    for k in range(n):
        idx[i0_ + k, j0 + k] = k
    out = _core.index_select(padded, src.ndim - 1, _idx(idx.reshape(-1), src.device))
    return out.reshape(*src.shape[:-1], rows, cols)


def _diag_len(rows: int, cols: int, offset: int) -> int:
    if offset >= 0:
        return builtins.max(0, builtins.min(rows, cols - offset))
    return builtins.max(0, builtins.min(rows + offset, cols))


def _place_last_two(x: Tensor, d1: int, d2: int) -> Tensor:
    """Moves the last two axes of ``x`` to positions ``d1`` and ``d2``."""
    nd = x.ndim
    others = iter(range(nd - 2))
    perm = []
    for p in range(nd):
        if p == d1:
            perm.append(nd - 2)
        elif p == d2:
            perm.append(nd - 1)
        else:
            perm.append(next(others))
    return x.permute(*perm)


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Tensors whose diagonals (``offset``, between axes ``dim1`` and ``dim2`` of the result)
    hold ``input``'s last axis; zeros elsewhere."""
    x = _check_tensor("diag_embed", "input", input)
    offset = _int("diag_embed", "offset", offset)
    if x.ndim == 0:
        raise ShapeError("diag_embed: input must have at least one dimension, got a 0-d tensor")
    nd = x.ndim + 1
    d1, d2 = (_int("diag_embed", n, d) for n, d in (("dim1", dim1), ("dim2", dim2)))
    for name, d in (("dim1", d1), ("dim2", d2)):
        if not -nd <= d < nd:
            raise IndexError(
                f"diag_embed: {name} {d} is out of range for a {nd}-d result "
                f"(expected -{nd} <= {name} < {nd})"
            )
    d1, d2 = d1 % nd, d2 % nd
    if d1 == d2:
        raise ShapeError(f"diag_embed: dim1 and dim2 must differ, both are {d1}")
    m = x.shape[-1] + builtins.abs(offset)
    return _place_last_two(_embed_diagonal(x, m, m, offset), d1, d2)


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """A matrix with the flattened ``input`` on diagonal ``offset``."""
    x = _check_tensor("diagflat", "input", input)
    return diag_embed(x.reshape(-1), _int("diagflat", "offset", offset))


def _split_n(op: str, x: Tensor, sections: Any, d: int, need: int) -> tuple[Tensor, ...]:
    if x.ndim < need:
        raise ShapeError(
            f"{op}: input must have at least {need} dimensions, got shape {list(x.shape)}"
        )
    if isinstance(sections, (int, np.integer)) and not isinstance(sections, bool):
        n = int(sections)
        if n <= 0 or x.shape[d] % n:
            raise ShapeError(
                f"{op}: dim {d} of size {x.shape[d]} cannot be split into {n} equal sections"
            )
    elif not isinstance(sections, (list, tuple, Tensor)):
        raise TypeError(
            f"{op}: indices_or_sections must be an int or a sequence of ints, got "
            f"{type(sections).__name__}"
        )
    return tuple(tensor_split(x, sections, d))


def hsplit(input: Tensor, indices_or_sections: Any) -> tuple[Tensor, ...]:
    """Splits along axis 1 (axis 0 for a 1-D tensor)."""
    x = _check_tensor("hsplit", "input", input)
    return _split_n("hsplit", x, indices_or_sections, 1 if x.ndim > 1 else 0, 1)


def vsplit(input: Tensor, indices_or_sections: Any) -> tuple[Tensor, ...]:
    """Splits along axis 0 of a tensor of at least 2 dimensions."""
    x = _check_tensor("vsplit", "input", input)
    return _split_n("vsplit", x, indices_or_sections, 0, 2)


def dsplit(input: Tensor, indices_or_sections: Any) -> tuple[Tensor, ...]:
    """Splits along axis 2 of a tensor of at least 3 dimensions."""
    x = _check_tensor("dsplit", "input", input)
    return _split_n("dsplit", x, indices_or_sections, 2, 3)


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """The Vandermonde matrix of the 1-D ``x``: columns ``x^(N-1), ..., x^0`` (reversed with
    ``increasing``)."""
    v = _check_tensor("vander", "x", x)
    if v.ndim != 1:
        raise ShapeError(f"vander: x must be 1-D, got shape {list(v.shape)}")
    n = v.shape[0] if N is None else _int("vander", "N", N)
    if n < 0:
        raise ShapeError(f"vander: N must be non-negative, got {n}")
    if v.dtype.kind in "biu" and v.dtype.name != "int64":
        v = v.astype("int64")  # PyTorch promotes bool and every integer type to int64
    cols = []
    p = _core.ones_like(v)
    for k in range(n):
        cols.append(p)
        if k + 1 < n:
            p = v if k == 0 else p * v
    if not cols:
        return _core.zeros((v.shape[0], 0), dtype=_dtype_name(v.dtype), device=v.device)
    if not increasing:
        cols = cols[::-1]
    return _core.stack(cols, 1)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The length-``r`` combinations of the 1-D ``input``'s entries, one a row (as
    ``itertools.combinations``; ``with_replacement``: ``combinations_with_replacement``)."""
    x = _check_tensor("combinations", "input", input)
    if x.ndim != 1:
        raise ShapeError(f"combinations: input must be 1-D, got shape {list(x.shape)}")
    r = _int("combinations", "r", r)
    if r < 0:
        raise ShapeError(f"combinations: r must be non-negative, got {r}")
    if r == 0:
        return _core.zeros((0,), dtype=_dtype_name(x.dtype), device=x.device)
    gen = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(gen(range(x.shape[0]), r))
    # no rows (r > n): an empty gather of x all the same, so the result is on x's graph
    idx = np.asarray(rows, dtype=np.int64).reshape(len(rows), r)
    return _core.index_select(x, 0, _idx(idx.reshape(-1), x.device)).reshape(len(rows), r)


def unravel_index(indices: Any, shape: Any) -> tuple[Tensor, ...]:
    """The coordinates in an array of ``shape`` of the flat ``indices``, one tensor per
    axis (as numpy's ``unravel_index``; negative indices count from the end)."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    if not isinstance(shape, (list, tuple)):
        raise TypeError(f"unravel_index: shape must be a sequence of ints, got {shape!r}")
    dims = tuple(_int("unravel_index", "shape", s) for s in shape)
    if any(s < 0 for s in dims):
        raise ValueError(f"unravel_index: shape must be non-negative, got {list(dims)}")
    if isinstance(indices, Tensor):
        if indices.dtype.kind not in "iu":
            raise TypeError(f"unravel_index: indices must be integers, got {indices.dtype}")
        device = indices.device
        arr = _host(indices).astype(np.int64)
    else:
        _int("unravel_index", "indices", indices)
        device = str(_core.get_default_device())
        arr = np.asarray(indices, dtype=np.int64)
    n = math.prod(dims)
    if arr.size and (arr.min() < -n or arr.max() >= n):
        raise IndexError(f"unravel_index: an index is out of range for shape {list(dims)}")
    arr = np.where(arr < 0, arr + n, arr)
    coords = np.unravel_index(arr, dims) if dims else ()
    return tuple(_idx(c, device) for c in coords)


def chain_matmul(*matrices: Tensor) -> Tensor:
    """The product of the 2-D ``matrices``, left to right."""
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise ShapeError("chain_matmul: expected at least one matrix")
    ms = [_check_tensor("chain_matmul", f"matrices[{i}]", m) for i, m in enumerate(matrices)]
    for i, m in enumerate(ms):
        if m.ndim != 2:
            raise ShapeError(f"chain_matmul: matrices[{i}] must be 2-D, got shape {list(m.shape)}")
    out = ms[0]
    for i, m in enumerate(ms[1:], 1):
        if out.shape[1] != m.shape[0]:
            raise ShapeError(
                f"chain_matmul: matrices[{i}] of shape {list(m.shape)} does not chain with "
                f"the product so far, of shape {list(out.shape)}"
            )
        out = _core.matmul(out, m)
    return out


def vdot(input: Tensor, other: Tensor) -> Tensor:
    """The dot product of two 1-D tensors (real: no conjugation)."""
    a = _check_tensor("vdot", "input", input)
    b = _check_tensor("vdot", "other", other)
    if a.ndim != 1 or b.ndim != 1 or a.shape != b.shape:
        raise ShapeError(
            f"vdot: expected two 1-D tensors of one size, got {list(a.shape)} and {list(b.shape)}"
        )
    return (a * b).sum()


# ------------------------------------------------------------------------ matrix functions

_EXP_THETA = 0.5  # the 1-norm the scaled matrix is brought under
_EXP_DEGREE = 18  # 0.5^19 / 19! ~ 2e-23
_EXP_MAX_SQUARINGS = 64


def matrix_exp(input: Tensor) -> Tensor:
    """``exp`` of square matrices (batched): scaling and squaring around a degree-18 Taylor
    polynomial. Differentiable (through the matmuls); also under ``fg.trace``, where the
    number of squarings cannot depend on the data and every batch runs the maximum."""
    a = _float("matrix_exp", input)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"matrix_exp: expected square matrices, got shape {list(a.shape)}")
    n = a.shape[-1]
    if n == 0:
        return a
    eye = _embed_diagonal(_core.ones((n,), dtype=_dtype_name(a.dtype), device=a.device), n, n, 0)
    # per matrix: s = max(0, ceil(log2(||A||_1 / theta)))
    with _no_grad():
        norm = a.detach().abs().sum(-2).amax(-1)
        s = (norm / _EXP_THETA).log2().ceil()
        s = _where(s > 0, s, _const(0.0, s))
        s = _where(s < _EXP_MAX_SQUARINGS, s, _const(float(_EXP_MAX_SQUARINGS), s))
        s = _where(s.isnan(), _const(0.0, s), s)
    if _core._tracing():
        steps = _EXP_MAX_SQUARINGS
    else:
        steps = int(_host(s).max()) if s.numel() else 0
    s = s.reshape(*s.shape, 1, 1)
    b = a * (-s).exp2()
    e = eye
    for k in range(_EXP_DEGREE, 0, -1):
        e = eye + _core.matmul(b, e) / float(k)
    for k in range(steps):
        e = _where(s > k, _core.matmul(e, e), e)
    return e


def cov(
    input: Tensor,
    *,
    correction: int = 1,
    fweights: Tensor | None = None,
    aweights: Tensor | None = None,
) -> Tensor:
    """The covariance matrix of the variables in ``input``'s rows (observations in its
    columns; a 1-D input is one variable), with frequency and/or observation weights."""
    x = _check_tensor("cov", "input", input)
    if x.ndim > 2:
        raise ShapeError(f"cov: input must have at most 2 dimensions, got shape {list(x.shape)}")
    if x.dtype.kind != "f":
        x = _float("cov", x)
    x2 = x.reshape(1, -1) if x.ndim < 2 else x
    nobs = x2.shape[1]
    correction = (
        _int("cov", "correction", correction)
        if not isinstance(correction, bool)
        else int(correction)
    )
    w = None
    for name, wt in (("fweights", fweights), ("aweights", aweights)):
        if wt is None:
            continue
        wt = _check_tensor("cov", name, wt)
        if wt.ndim > 1 or (wt.ndim == 1 and wt.shape[0] != nobs) or (wt.ndim == 0 and nobs != 1):
            raise ShapeError(
                f"cov: {name} must be 1-D with {nobs} entries (the observations), got shape "
                f"{list(wt.shape)}"
            )
        if name == "fweights" and wt.dtype.kind not in "iu":
            raise DTypeError(f"cov: fweights must be integers, got {wt.dtype}")
        if name == "aweights" and wt.dtype.kind != "f":
            raise DTypeError(f"cov: aweights must be floats, got {wt.dtype}")
        if not _core._tracing() and bool((wt.detach() < 0).any()):
            raise ShapeError(f"cov: {name} must be non-negative")
        wt = wt.reshape(-1).astype(_dtype_name(x.dtype))
        w = wt if w is None else w * wt
    if w is None:
        avg = x2.mean(1).reshape(-1, 1)
        wsum = _scalar(float(nobs), x2)
        xc = x2 - avg
        c = _core.matmul(xc, xc.transpose(1, 0))
        fact = wsum - float(correction)
    else:
        wsum = w.sum()
        avg = (x2 * w).sum(1).reshape(-1, 1) / wsum
        xc = x2 - avg
        c = _core.matmul(xc * w, xc.transpose(1, 0))
        if aweights is None:
            fact = wsum - float(correction)
        else:
            aw = aweights.reshape(-1).astype(_dtype_name(x.dtype))
            fact = wsum - float(correction) * (w * aw).sum() / wsum
    fact = _where(fact > 0, fact, _const(0.0, fact))
    out = c / fact
    # squeezed as PyTorch's: one variable gives a 0-d tensor
    return out.reshape(()) if x.ndim < 2 or x2.shape[0] == 1 else out


def corrcoef(input: Tensor) -> Tensor:
    """Pearson correlation coefficients of the variables in ``input``'s rows."""
    x = _check_tensor("corrcoef", "input", input)
    if x.ndim > 2:
        raise ShapeError(
            f"corrcoef: input must have at most 2 dimensions, got shape {list(x.shape)}"
        )
    c = cov(x)
    if c.ndim == 0:
        return c / c
    d = c.diagonal().sqrt()
    c = c / d.reshape(-1, 1) / d.reshape(1, -1)
    return c.clamp(-1.0, 1.0)


# ---------------------------------------------------------------------------- reductions


def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """``log(cumsum(exp(input), dim))`` without overflow or underflow (a log-depth scan of
    pairwise log-add-exps)."""
    x = _float("logcumsumexp", input)
    if x.ndim == 0:
        _dim("logcumsumexp", x, dim)
        return x
    d = _dim("logcumsumexp", x, dim)
    if x.shape[d] == 0:
        return x * 1.0
    op = _LogCumSumExp()
    op.d = d
    return op(x)


def _log_add_exp_pair(a: Tensor, b: Tensor) -> Tensor:
    m = _core.maximum(a, b).detach()
    m = _where(m.isinf(), _const(0.0, m), m)
    return m + ((a - m).exp() + (b - m).exp()).log()


class _LogCumSumExp(_Function):
    """``logcumsumexp`` along ``d``: a scan of pairwise log-add-exps forward; backward is
    PyTorch's closed form, ``grad_i = sum_{j >= i} g_j exp(x_i - out_j)``, summed as
    reversed logcumsumexps of ``log|g_j| - out_j`` (positive and negative ``g`` apart), so
    an entry of -inf gets exactly 0 (differentiating the scan let a +inf elsewhere in the
    line turn it into NaN), and it stays differentiable."""

    d: int

    def forward(self, x: Tensor) -> Tensor:
        from ._ops import _scan

        self.x = x
        return _scan(x, self.d, _log_add_exp_pair, -math.inf)

    def backward(self, g: Tensor | None) -> Any:
        if g is None:
            return None
        # out taken again as a function of x (not the forward's detached value), so that a
        # gradient of this gradient sees its dependence on x
        x, d = self.x, self.d
        out = logcumsumexp(x, d)
        # the lowest finite value, not -inf, stands for log 0: the scans of these terms then
        # never meet -inf - -inf, which would put NaN into a gradient of this gradient
        lowest = _const(float(np.finfo(_dtype_name(g.dtype)).min), g)
        one = _core.ones_like(g)

        def part(mask: Tensor, mag: Tensor) -> Tensor:
            w = _where(mask, _where(mask, mag, one).log(), lowest) - out
            return (x + logcumsumexp(w.flip(d), d).flip(d)).exp()

        grad = part(g > 0, g) - part(g < 0, -g)
        # a NaN in g reaches every entry up to it, as the sum would carry it
        from ._ops import cumsum

        reach = cumsum(g.isnan().astype("int64").flip(d), d).flip(d) > 0
        return _where(reach, _const(math.nan, grad), grad)


def _sorted_pick(op: str, x: Tensor, d: int, keepdim: bool, pick: Any, result: type) -> Any:
    """(values, indices) along ``d`` where ``pick(row)`` (numpy, on rows moved last) gives
    the index in each row; the values are gathered, so the gradient goes to them."""
    a = np.moveaxis(_host(x), d, -1)
    idx = np.empty(a.shape[:-1], dtype=np.int64)
    for pos in np.ndindex(*a.shape[:-1]):
        idx[pos] = pick(a[pos])
    idx_t = _idx(np.expand_dims(idx, d), x.device)
    vals = gather(x, d, idx_t)
    if not keepdim:
        vals = vals.squeeze(d)
        idx_t = idx_t.squeeze(d)
    return result(vals, idx_t)


def _mode_pick(row: np.ndarray) -> int:
    vals, counts = np.unique(row, return_counts=True)
    best = vals[np.argmax(counts)]  # the smallest of the most frequent
    if np.isnan(best):
        return int(np.flatnonzero(np.isnan(row))[-1])
    return int(np.flatnonzero(row == best)[-1])


def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> Any:
    """The most frequent value along ``dim`` (the smallest of those tied) and the index of
    its last occurrence, as ``(values, indices)``."""
    x = _check_tensor("mode", "input", input)
    if x.ndim == 0:
        _dim("mode", x, dim)
        return _ModeResult(x, _core.zeros((), dtype="int64", device=x.device))
    d = _dim("mode", x, dim)
    if x.shape[d] == 0:
        from .nn._errors import IndexValueError

        raise IndexValueError(f"mode: dim {d} is empty (shape {list(x.shape)})")
    return _sorted_pick("mode", x, d, bool(keepdim), _mode_pick, _ModeResult)


def _nanmedian_pick(row: np.ndarray) -> int:
    ok = np.flatnonzero(~np.isnan(row))
    if ok.size == 0:
        return 0
    order = ok[np.argsort(row[ok], kind="stable")]
    return int(order[(ok.size - 1) // 2])


def nanmedian(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """The median ignoring NaNs (the lower middle for an even count; NaN when all are NaN);
    with ``dim``, ``(values, indices)``."""
    x = _check_tensor("nanmedian", "input", input)
    if dim is None:
        flat = x.reshape(-1)
        if flat.shape[0] == 0:
            if x.dtype.kind == "f":  # NaN, as PyTorch's (on the graph of ``input``)
                return flat.sum() * 0.0 + float("nan")
            raise ShapeError("nanmedian: the input is empty")
        v = _sorted_pick("nanmedian", flat, 0, False, _nanmedian_pick, _NanmedianResult)[0]
        if x.dtype.kind != "f" or bool(v.detach().isnan()):
            return v
        # the gradient is shared by every entry equal to the median, as PyTorch's (and as
        # median's); NaN entries are masked out rather than multiplied by zero
        vd = v.detach()
        ties = flat.detach() == vd
        diff = _core.where(ties, flat - vd, _core.zeros_like(flat))
        return vd + diff.sum() / ties.astype(x.dtype.name).sum()
    if x.ndim == 0:
        _dim("nanmedian", x, dim)
        return _NanmedianResult(x, _core.zeros((), dtype="int64", device=x.device))
    d = _dim("nanmedian", x, dim)
    if x.shape[d] == 0:
        from .nn._errors import IndexValueError

        raise IndexValueError(f"nanmedian: dim {d} is empty (shape {list(x.shape)})")
    return _sorted_pick("nanmedian", x, d, bool(keepdim), _nanmedian_pick, _NanmedianResult)


def _trapezoid_dx(op: str, y: Tensor, x: Any, dx: Any, d: int) -> Any:
    """The spacing: a scalar, or a tensor broadcastable to ``diff(y)`` along ``d``."""
    if x is not None and dx is not None:
        raise TypeError(f"{op}: give x or dx, not both")
    if x is None:
        if dx is None:
            return 1.0
        if isinstance(dx, Tensor):
            return dx
        if isinstance(dx, bool) or not isinstance(dx, (int, float, np.number)):
            raise TypeError(f"{op}: dx must be a number, got {type(dx).__name__}")
        return float(dx)
    xt = _check_tensor(op, "x", x)
    if xt.dtype.kind != "f":
        xt = xt.astype(_dtype_name(y.dtype))
    n = y.shape[d]
    if xt.ndim == 1:
        if xt.shape[0] != n:
            raise ShapeError(
                f"{op}: x has {xt.shape[0]} entries, y has {n} along dim {d} "
                f"(y's shape {list(y.shape)})"
            )
        diffs = xt[1:] - xt[:-1]
        shape = [1] * y.ndim
        shape[d] = n - 1
        return diffs.reshape(*shape)
    if xt.ndim != y.ndim:
        raise ShapeError(
            f"{op}: x of shape {list(xt.shape)} must be 1-D or have y's rank "
            f"(y's shape {list(y.shape)})"
        )
    dx_ = xt.shape[d] if xt.ndim else 0
    if dx_ != n:
        raise ShapeError(
            f"{op}: x of shape {list(xt.shape)} does not match y of shape {list(y.shape)} "
            f"along dim {d}"
        )
    m = xt.shape[d]
    return _narrow(xt, d, 1, m - 1) - _narrow(xt, d, 0, m - 1)


def _narrow(x: Tensor, d: int, start: int, length: int) -> Tensor:
    key = (slice(None),) * d + (slice(start, start + length),)
    return x[key]


def _trapezoid_terms(op: str, y: Any, x: Any, dx: Any, dim: Any) -> tuple[Tensor, int]:
    yt = _float(op, y, "y")
    if yt.ndim == 0:
        raise ShapeError(f"{op}: y must have at least one dimension, got a 0-d tensor")
    d = _dim(op, yt, dim)
    n = yt.shape[d]
    spacing = _trapezoid_dx(op, yt, x, dx, d)
    if n == 0:
        return _narrow(yt, d, 0, 0), d
    avg = (_narrow(yt, d, 1, n - 1) + _narrow(yt, d, 0, n - 1)) * 0.5
    return avg * spacing, d


def trapezoid(y: Tensor, x: Tensor | None = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """The trapezoid rule along ``dim``: sample points ``x`` (1-D or y's shape) or a constant
    spacing ``dx`` (default 1)."""
    terms, d = _trapezoid_terms("trapezoid", y, x, dx, dim)
    return terms.sum(d)


def trapz(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """``trapezoid`` (PyTorch's older name; ``trapz(y, dx, dim=)`` also works)."""
    if x is not None and not isinstance(x, Tensor) and dx is None:
        x, dx = None, x
    terms, d = _trapezoid_terms("trapz", y, x, dx, dim)
    return terms.sum(d)


def cumulative_trapezoid(
    y: Tensor, x: Tensor | None = None, *, dx: Any = None, dim: int = -1
) -> Tensor:
    """The running trapezoid-rule integral along ``dim`` (one entry shorter than ``y``)."""
    terms, d = _trapezoid_terms("cumulative_trapezoid", y, x, dx, dim)
    from ._ops import cumsum

    return cumsum(terms, d) if terms.shape[d] else terms


# ------------------------------------------------------------------------ elementwise


def sgn(input: Tensor) -> Tensor:
    """The sign of each entry (``sign`` for real tensors)."""
    return _check_tensor("sgn", "input", input).sign()


def signbit(input: Tensor) -> Tensor:
    """True where the sign bit is set (negative numbers and ``-0.0``)."""
    return _check_tensor("signbit", "input", input).signbit()


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """Entries of ``input`` at ``indices`` along ``dim`` (of the flattened input when
    ``dim`` is None); the shapes broadcast apart from ``dim``."""
    x = _check_tensor("take_along_dim", "input", input)
    idx = _check_tensor("take_along_dim", "indices", indices)
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"take_along_dim: indices must be integers, got {idx.dtype}")
    if dim is not None:
        d = _dim("take_along_dim", x, dim)
        if idx.ndim != x.ndim:
            raise ShapeError(
                f"take_along_dim: input of shape {list(x.shape)} and indices of shape "
                f"{list(idx.shape)} must have the same number of dimensions"
            )
        n = x.shape[d]
        if not _core._tracing() and idx.numel():
            ii = _host(idx)
            if ii.min() < -n or ii.max() >= n:
                raise IndexError(
                    f"take_along_dim: an index is out of range for size {n} along dim {d}"
                )
        dim = d
    return x.take_along_dim(idx, dim)


def repeat_interleave(
    input: Any, repeats: Any = None, dim: int | None = None, *, output_size: Any = None
) -> Tensor:
    """Each entry (or slice along ``dim``) repeated ``repeats`` times; with one argument, a
    1-D tensor of counts, the indices ``i`` repeated ``repeats[i]`` times."""
    x = _check_tensor("repeat_interleave", "input", input)
    if repeats is None:
        if x.ndim != 1 or x.dtype.kind not in "iu":
            raise ShapeError(
                f"repeat_interleave: a single argument must be a 1-D integer tensor of counts, "
                f"got shape {list(x.shape)} {x.dtype}"
            )
        counts = _host(x).astype(np.int64)
        if counts.size and counts.min() < 0:
            raise ShapeError("repeat_interleave: counts must be non-negative")
        if output_size is not None and output_size != int(counts.sum()):
            raise ShapeError(
                f"repeat_interleave: output_size {output_size} does not match the "
                f"{int(counts.sum())} entries the counts give"
            )
        return _idx(np.repeat(np.arange(counts.size), counts), x.device)
    return x.repeat_interleave(repeats, dim, output_size=output_size)


def isin(
    elements: Any, test_elements: Any, *, assume_unique: bool = False, invert: bool = False
) -> Tensor:
    """True where an entry of ``elements`` equals some entry of ``test_elements`` (False
    with ``invert``); either may be a scalar."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError(
            f"isin: expected elements or test_elements to be a Tensor, got "
            f"{type(elements).__name__} and {type(test_elements).__name__}"
        )
    like = elements if isinstance(elements, Tensor) else test_elements
    for name, v in (("elements", elements), ("test_elements", test_elements)):
        if not isinstance(v, (Tensor, bool, int, float, np.number)):
            raise TypeError(f"isin: {name} must be a Tensor or a number, got {type(v).__name__}")
    e = elements if isinstance(elements, Tensor) else tensor(elements, device=like.device)
    t = (
        test_elements
        if isinstance(test_elements, Tensor)
        else tensor(test_elements, device=like.device)
    )
    e = e.detach()
    t = t.detach().reshape(-1)
    if t.shape[0] == 0:
        hit = _core.zeros(tuple(e.shape), dtype="bool", device=e.device)
    else:
        hit = (e.reshape(*e.shape, 1) == t).any(-1)
    return hit.logical_not() if invert else hit


def frexp(input: Tensor) -> Any:
    """``(mantissa, exponent)`` with ``input = mantissa * 2**exponent``, ``|mantissa|`` in
    [0.5, 1) (exponent int32). No gradient."""
    x = _check_tensor("frexp", "input", input)
    if x.dtype.kind != "f":
        raise DTypeError(f"frexp: input must be a float tensor, got {x.dtype}")
    a = _host(x)
    m, e = np.frexp(a.astype(np.float32) if x.dtype == bfloat16 else a)
    mant = tensor(np.asarray(m), device=x.device).astype(_dtype_name(x.dtype))
    if x.requires_grad or _core._tracking_level([x]) is not None:
        # the mantissa is x * 2**-exponent (exact): its gradient is 2**-exponent, as PyTorch's
        with np.errstate(all="ignore"):
            scale = np.ldexp(np.ones_like(a, dtype=np.float64), -np.asarray(e, dtype=np.int64))
            ok = np.isfinite(a) & np.isfinite(scale.astype(a.dtype))
        scale_t = tensor(np.where(ok, scale, 0.0), device=x.device).astype(_dtype_name(x.dtype))
        ok_t = tensor(np.asarray(ok), device=x.device)
        mant = _core.where(ok_t, x * scale_t, mant)
    return _FrexpResult(mant, tensor(np.asarray(e, dtype=np.int32), device=x.device))


def ldexp(input: Tensor, other: Any) -> Tensor:
    """``input * 2**other``; differentiable in both."""
    x, e = _pair("ldexp", input, other)
    if x.dtype.kind != "f":
        x = _float("ldexp", x)
    if e.dtype.kind != "f":
        e = e.astype(_dtype_name(x.dtype))
    return x * e.exp2()


def _integer_pair(op: str, input: Any, other: Any, kinds: str) -> tuple[Tensor, Tensor]:
    a, b = _pair(op, input, other)
    for name, t in (("input", a), ("other", b)):
        if t.dtype.kind not in kinds:
            raise DTypeError(
                f"{op}: {name} must be an integer{' or bool' if 'b' in kinds else ''} tensor, "
                f"got {t.dtype}"
            )
    return a, b


def _host_binary(op: str, a: Tensor, b: Tensor, fn: Any) -> Tensor:
    an, bn = _host(a), _host(b)
    dt = np.result_type(an.dtype, bn.dtype)
    try:
        out = fn(an.astype(dt), bn.astype(dt))
    except ValueError as err:
        raise ShapeError(
            f"{op}: shapes {list(a.shape)} and {list(b.shape)} do not broadcast"
        ) from err
    return tensor(np.asarray(out, dtype=dt), device=a.device)


def gcd(input: Tensor, other: Any) -> Tensor:
    """The greatest common divisor, elementwise, of integer tensors (non-negative)."""
    a, b = _integer_pair("gcd", input, other, "iu")
    return _host_binary("gcd", a, b, np.gcd)


def lcm(input: Tensor, other: Any) -> Tensor:
    """The least common multiple, elementwise, of integer tensors (non-negative)."""
    a, b = _integer_pair("lcm", input, other, "iu")
    return _host_binary("lcm", a, b, np.lcm)


def _bitwise_top(name: str, fn: Any) -> Any:
    def op(input: Any, other: Any) -> Tensor:
        a, b = _integer_pair(name, input, other, "biu")
        if a.dtype.kind == "b" and b.dtype.kind == "b":
            return fn(a, b)
        return _host_binary(name, a, b, fn)

    op.__name__ = name
    op.__qualname__ = name
    op.__doc__ = f"The elementwise {name.split('_')[1].upper()} of integer or bool tensors."
    return op


bitwise_and = _bitwise_top("bitwise_and", lambda a, b: a & b)
bitwise_or = _bitwise_top("bitwise_or", lambda a, b: a | b)
bitwise_xor = _bitwise_top("bitwise_xor", lambda a, b: a ^ b)


def _shift(name: str, left: bool) -> Any:
    def op(input: Any, other: Any, *, out: Any = None) -> Tensor:
        if out is not None:
            from ._ops import _write_out

            return _write_out(name, out, op(input, other))
        a, b = _integer_pair(name, input, other, "iu")
        an, bn = _host(a), _host(b)
        dt = np.result_type(an.dtype, bn.dtype)
        # shifts by the width or more, or by a negative count, give 0 (left) or the sign
        # (right), as PyTorch's
        width = np.iinfo(dt).bits
        k = np.clip(bn.astype(np.int64), 0, width - 1)
        x = an.astype(dt)
        with np.errstate(over="ignore"):
            out = np.left_shift(x, k.astype(dt)) if left else np.right_shift(x, k.astype(dt))
            # (a negative shift counts as too wide, as in PyTorch's kernels)
            shift = bn.astype(np.int64)
            big = (shift >= width) | (shift < 0)
            if big.any():
                out = np.where(big, 0 if left else np.where(x < 0, -1, 0), out)
        return tensor(np.asarray(out, dtype=dt), device=a.device)

    op.__name__ = name
    op.__qualname__ = name
    op.__doc__ = (
        f"``input {'<<' if left else '>>'} other`` of integer tensors "
        f"({'multiplying by' if left else 'floor-dividing by'} 2 ** other)."
    )
    return op


bitwise_left_shift = _shift("bitwise_left_shift", True)
bitwise_right_shift = _shift("bitwise_right_shift", False)


def _install_shifts() -> None:
    def reflected(fn: Any) -> Any:
        return lambda self, other: fn(other, self)

    def inplace(fn: Any) -> Any:
        from ._torch_inplace import write_result

        return lambda self, other: write_result(fn.__name__ + "_", self, fn(self, other))

    for name, fn in (
        ("__lshift__", bitwise_left_shift),
        ("__rshift__", bitwise_right_shift),
        ("bitwise_left_shift", bitwise_left_shift),
        ("bitwise_right_shift", bitwise_right_shift),
    ):
        setattr(Tensor, name, fn)
    Tensor.__rlshift__ = reflected(bitwise_left_shift)
    Tensor.__rrshift__ = reflected(bitwise_right_shift)
    Tensor.__ilshift__ = inplace(bitwise_left_shift)
    Tensor.__irshift__ = inplace(bitwise_right_shift)
    Tensor.bitwise_left_shift_ = inplace(bitwise_left_shift)
    Tensor.bitwise_right_shift_ = inplace(bitwise_right_shift)


_install_shifts()


def bitwise_not(input: Tensor) -> Tensor:
    """The elementwise NOT of an integer or bool tensor (``~x``; logical not for bools)."""
    x = _check_tensor("bitwise_not", "input", input)
    if x.dtype.kind == "b":
        return x.logical_not()
    if x.dtype.kind not in "iu":
        raise DTypeError(f"bitwise_not: input must be an integer or bool tensor, got {x.dtype}")
    return tensor(np.invert(_host(x)), device=x.device)


def randint_like(
    input: Tensor, low: int = 0, high: int | None = None, *, dtype: Any = None, device: Any = None
) -> Tensor:
    """Random integers in ``[low, high)`` with ``input``'s shape (``randint_like(x, high)``
    or ``randint_like(x, low, high)``), of its dtype and device unless given."""
    from ._ops import randint

    x = _check_tensor("randint_like", "input", input)
    if high is None:
        low, high = 0, low
    low = _int("randint_like", "low", low)
    high = _int("randint_like", "high", high)
    if high <= low:
        raise ShapeError(f"randint_like: high ({high}) must be greater than low ({low})")
    dt = _dtype_name(dtype) if dtype is not None else _dtype_name(x.dtype)
    dev = str(device) if device is not None else x.device
    out = randint(low, high, tuple(x.shape), device=dev)
    return out if _dtype_name(out.dtype) == dt else out.astype(dt)


def logspace(
    start: Any,
    end: Any,
    steps: int,
    base: float = 10.0,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """``steps`` points ``base**t`` with ``t`` evenly spaced from ``start`` to ``end``."""
    from ._tensor import default_float

    steps = _int("logspace", "steps", steps)
    if steps < 0:
        raise ShapeError(f"logspace: steps must be non-negative, got {steps}")
    vals = []
    for name, v in (("start", start), ("end", end), ("base", base)):
        if isinstance(v, Tensor):
            if v.numel() != 1:
                raise ShapeError(f"logspace: {name} must be a scalar, got shape {list(v.shape)}")
            v = v.item()
        if not isinstance(v, (int, float, np.number)):  # (a bool is the number 0 or 1)
            raise TypeError(f"logspace: {name} must be a number, got {type(v).__name__}")
        vals.append(float(v))
    s, e, b = vals
    t = np.linspace(s, e, steps, dtype=np.float64)
    out = np.power(b, t)
    dt = _dtype_name(dtype) if dtype is not None else _dtype_name(default_float())
    dev = str(device) if device is not None else str(_core.get_default_device())
    if np.dtype(dt if dt != "bfloat16" else "float32").kind in "iub":
        out = np.trunc(out)
    res = tensor(out, device=dev)
    res = res if _dtype_name(res.dtype) == dt else res.astype(dt)
    if requires_grad:
        res.requires_grad_(True)
    return res


# ------------------------------------------------------------------------------- dtypes

_ORDER = {
    "bool": (0, 0),
    "uint8": (1, 1),
    "int8": (1, 1),
    "int16": (1, 2),
    "int32": (1, 3),
    "int64": (1, 4),
    "float16": (2, 1),
    "bfloat16": (2, 1),
    "float32": (2, 2),
    "float64": (2, 3),
}


def _dtype_obj(name: str) -> Any:
    return bfloat16 if name == "bfloat16" else np.dtype(name)


def _dname(op: str, name: str, d: Any) -> str:
    try:
        n = _dtype_name(d)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: {name} must be a dtype, got {d!r}") from None
    if n not in _ORDER:
        raise TypeError(f"{op}: {name} {n} is not a supported dtype")
    return n


def _promote(a: str, b: str) -> str:
    if a == b:
        return a
    ca, sa = _ORDER[a]
    cb, sb = _ORDER[b]
    if ca != cb:
        return a if ca > cb else b
    if {a, b} == {"uint8", "int8"}:
        return "int16"
    if {a, b} == {"float16", "bfloat16"}:
        return "float32"
    if a == "uint8":
        return b
    if b == "uint8":
        return a
    return a if sa >= sb else b


def promote_types(type1: Any, type2: Any) -> Any:
    """The smallest dtype both ``type1`` and ``type2`` convert to without losing their
    category (bool < integer < float), as PyTorch's promotion."""
    a = _dname("promote_types", "type1", type1)
    b = _dname("promote_types", "type2", type2)
    return _dtype_obj(_promote(a, b))


def can_cast(from_: Any, to: Any) -> bool:
    """Whether PyTorch's casting rules allow ``from_`` to ``to`` (no cast to a lower
    category: float to integer or bool, integer to bool)."""
    a = _dname("can_cast", "from_", from_)
    b = _dname("can_cast", "to", to)
    return _ORDER[a][0] <= _ORDER[b][0]


def result_type(tensor1: Any, tensor2: Any) -> Any:
    """The dtype an arithmetic op on ``tensor1`` and ``tensor2`` gives: dimensioned tensors
    first, then 0-d tensors, then Python numbers, a later group counting only when it is of a
    higher category."""
    from ._tensor import default_float

    groups: list[list[str]] = [[], [], []]
    for name, v in (("tensor1", tensor1), ("tensor2", tensor2)):
        if isinstance(v, Tensor):
            groups[0 if v.ndim else 1].append(_dtype_name(v.dtype))
        elif isinstance(v, bool):
            groups[2].append("bool")
        elif isinstance(v, (int, np.integer)):
            groups[2].append("int64")
        elif isinstance(v, (float, np.floating)):
            groups[2].append(_dtype_name(default_float()))
        else:
            raise TypeError(
                f"result_type: {name} must be a Tensor or a number, got {type(v).__name__}"
            )
    out = None
    for g in groups:
        if not g:
            continue
        t = g[0]
        for o in g[1:]:
            t = _promote(t, o)
        if out is None or _ORDER[t][0] > _ORDER[out][0]:
            out = t
    return _dtype_obj(out)


def is_floating_point(input: Tensor) -> bool:
    """Whether ``input`` has a float dtype."""
    return _check_tensor("is_floating_point", "input", input).dtype.kind == "f"


# ---------------------------------------------------------------------- scatter variants


def _scatter_along(op: str, x: Tensor, src: Tensor, d: int, positions: Sequence[int]) -> Tensor:
    """``x`` with the slices at ``positions`` along ``d`` replaced by ``src``'s slices (in
    order): a gather of a zero-padded ``src`` and a where, both differentiable."""
    n = x.shape[d]
    k = len(positions)
    want = list(x.shape)
    want[d] = k
    if list(src.shape) != want:
        raise ShapeError(f"{op}: src must have shape {want}, got {list(src.shape)}")
    src = src.astype(_dtype_name(x.dtype)) if src.dtype != x.dtype else src
    pad_shape = list(x.shape)
    pad_shape[d] = 1
    pad = _core.zeros(tuple(pad_shape), dtype=_dtype_name(x.dtype), device=x.device)
    padded = _core.concat([src, pad], d)
    idx = np.full(n, k, dtype=np.int64)
    mask = np.zeros(n, dtype=bool)
    for j, p in enumerate(positions):
        idx[p] = j
        mask[p] = True
    emb = _core.index_select(padded, d, _idx(idx, x.device))
    mshape = [1] * x.ndim
    mshape[d] = n
    m = tensor(mask.reshape(mshape), device=x.device)
    return _where(m, emb, x)


def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """``input`` with ``input.select(dim, index)`` replaced by ``src``."""
    x = _check_tensor("select_scatter", "input", input)
    s = _check_tensor("select_scatter", "src", src)
    if x.ndim == 0:
        raise ShapeError("select_scatter: input must have at least one dimension")
    d = _dim("select_scatter", x, dim)
    i = _int("select_scatter", "index", index)
    n = x.shape[d]
    if not -n <= i < n:
        raise IndexError(f"select_scatter: index {i} is out of range for size {n} along dim {d}")
    want = [s_ for j, s_ in enumerate(x.shape) if j != d]
    if list(s.shape) != want:
        raise ShapeError(f"select_scatter: src must have shape {want}, got {list(s.shape)}")
    return _scatter_along("select_scatter", x, s.unsqueeze(d), d, [i % n])


def slice_scatter(
    input: Tensor,
    src: Tensor,
    dim: int = 0,
    start: int | None = None,
    end: int | None = None,
    step: int = 1,
) -> Tensor:
    """``input`` with the slice ``start:end:step`` along ``dim`` replaced by ``src``."""
    x = _check_tensor("slice_scatter", "input", input)
    s = _check_tensor("slice_scatter", "src", src)
    if x.ndim == 0:
        raise ShapeError("slice_scatter: input must have at least one dimension")
    d = _dim("slice_scatter", x, dim)
    step = _int("slice_scatter", "step", step)
    if step <= 0:
        raise ShapeError(f"slice_scatter: step must be positive, got {step}")
    st = None if start is None else _int("slice_scatter", "start", start)
    en = None if end is None else _int("slice_scatter", "end", end)
    positions = list(range(x.shape[d]))[slice(st, en, step)]
    return _scatter_along("slice_scatter", x, s, d, positions)


def diagonal_scatter(
    input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1
) -> Tensor:
    """``input`` with its diagonal (``offset``, between ``dim1`` and ``dim2``) replaced by
    ``src``, which has ``input.diagonal(offset, dim1, dim2)``'s shape."""
    x = _check_tensor("diagonal_scatter", "input", input)
    s = _check_tensor("diagonal_scatter", "src", src)
    if x.ndim < 2:
        raise ShapeError(f"diagonal_scatter: input must be at least 2-D, got {list(x.shape)}")
    offset = _int("diagonal_scatter", "offset", offset)
    d1 = _dim("diagonal_scatter", x, dim1, "dim1")
    d2 = _dim("diagonal_scatter", x, dim2, "dim2")
    if d1 == d2:
        raise ShapeError(f"diagonal_scatter: dim1 and dim2 must differ, both are {d1}")
    rows, cols = x.shape[d1], x.shape[d2]
    length = _diag_len(rows, cols, offset)
    want = [n for j, n in enumerate(x.shape) if j not in (d1, d2)] + [length]
    if list(s.shape) != want:
        raise ShapeError(f"diagonal_scatter: src must have shape {want}, got {list(s.shape)}")
    s = s.astype(_dtype_name(x.dtype)) if s.dtype != x.dtype else s
    emb = _embed_diagonal(s, rows, cols, offset)
    mask = np.zeros((rows, cols), dtype=bool)
    i0_, j0 = (0, offset) if offset >= 0 else (-offset, 0)
    for k in range(length):
        mask[i0_ + k, j0 + k] = True
    m = tensor(mask, device=x.device)
    perm = _perm_to_end(x.ndim, (d1, d2))
    xm = x.permute(*perm)
    out = _where(m, emb, xm)
    return out.permute(*_inverse_perm(perm))


def _check_index(op: str, x: Tensor, d: int, index: Any, src: Any) -> Tensor:
    idx = _check_tensor(op, "index", index)
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"{op}: index must be an integer tensor, got {idx.dtype}")
    _wide_index(op, idx)
    if idx.ndim != x.ndim:
        raise ShapeError(
            f"{op}: index of shape {list(idx.shape)} must have input's number of dimensions "
            f"(input's shape {list(x.shape)})"
        )
    for j in range(x.ndim):
        if idx.shape[j] > src.shape[j] or (j != d and idx.shape[j] > x.shape[j]):
            raise ShapeError(
                f"{op}: index of shape {list(idx.shape)} is larger than src "
                f"{list(src.shape)} or input {list(x.shape)} at dim {j}"
            )
    n = x.shape[d]
    if _core._tracing():
        # each run's index is checked as eager mode checks it (the graph's scatter kernels
        # would wrap a negative entry)
        from ._torch_more import _on_host

        def checked(i: Tensor) -> Tensor:
            _check_range(op, _host(i), d, n)
            return i

        return _on_host(op, checked, idx)
    _check_range(op, _host(idx), d, n)
    return idx


def _check_range(op: str, ii: np.ndarray, d: int, n: int) -> None:
    """Raises PyTorch's error for an entry of the index array ``ii`` outside ``[0, n)``."""
    if ii.size and (ii.min() < 0 or ii.max() >= n):
        from .nn._errors import IndexRuntimeError

        bad = int(ii.min()) if ii.min() < 0 else int(ii.max())
        raise IndexRuntimeError(
            f"{op}: index {bad} is out of bounds for dimension {d} with size {n}"
        )


def scatter_reduce(
    input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *, include_self: bool = True
) -> Tensor:
    """``input`` with ``src``'s entries reduced into the positions ``index`` names along
    ``dim`` (``reduce``: sum, prod, mean, amax or amin; ``include_self``: whether ``input``'s
    own entries take part). Differentiable for every reduction (``prod`` by PyTorch's rule,
    zeros included); ``amax``/``amin`` share the gradient among ties. ``prod``, ``amax`` and
    ``amin`` are computed on the host; inside ``fg.trace`` that computation is a node of the
    graph, so each call reduces its own ``index`` and ``src``."""
    op = "scatter_reduce"
    x = _check_tensor(op, "input", input)
    s = _check_tensor(op, "src", src)
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise ShapeError(f"{op}: reduce must be one of sum, prod, mean, amax, amin; got {reduce!r}")
    d = _dim(op, x, dim)
    if s.dtype != x.dtype:
        raise DTypeError(
            f"{op}: src's dtype {s.dtype} must be input's dtype {x.dtype} (PyTorch does not "
            "convert it)"
        )
    if isinstance(index, Tensor) and index.numel() == 0:
        # an empty index changes nothing, whatever its shape (PyTorch's)
        _check_tensor(op, "index", index)
        if index.dtype.kind not in "iu":
            raise DTypeError(f"{op}: index must be an integer tensor, got {index.dtype}")
        return x.clone()
    if x.ndim == 0 or s.ndim == 0 or (isinstance(index, Tensor) and index.ndim == 0):
        # PyTorch reads 0-d tensors as 1-D of one entry
        def one(t: Any) -> Any:
            return t.reshape(1) if isinstance(t, Tensor) and t.ndim == 0 else t

        out = scatter_reduce(one(x), d, one(index), one(s), reduce, include_self=include_self)
        return out.reshape(*x.shape)
    if s.ndim != x.ndim:
        raise ShapeError(
            f"{op}: src of shape {list(s.shape)} must have input's number of dimensions "
            f"(input's shape {list(x.shape)})"
        )
    idx = _check_index(op, x, d, index, s)
    # src cut to index's shape
    if tuple(s.shape) != tuple(idx.shape):
        s = s[tuple(slice(0, n) for n in idx.shape)]
    dt = _dtype_name(x.dtype)
    zeros = _core.zeros(tuple(x.shape), dtype=dt, device=x.device)
    ones_src = _core.ones(tuple(idx.shape), dtype=dt, device=x.device)
    count = _sadd(zeros, d, idx, ones_src)
    hit = count > 0

    def base(value: Any) -> Tensor:
        return x if include_self else _where(hit, _const(value, x), x)

    if reduce == "sum":
        return _sadd(base(0), d, idx, s)
    if reduce == "mean":
        total = _sadd(base(0), d, idx, s)
        n = count + (1.0 if include_self else 0.0) if x.dtype.kind == "f" else None
        if x.dtype.kind != "f":
            cnt = count + (1 if include_self else 0)
            cnt = _where(cnt > 0, cnt, _core.ones_like(cnt))
            from ._torch_more import floor_divide

            return floor_divide(total, cnt)
        n = _where(n > 0, n, _core.ones_like(n))
        return total / n
    if reduce == "prod":
        if x.dtype.kind not in "fc":
            return _host_scatter(op, x, d, idx, s, np.multiply, include_self)
        # the products themselves (exact, in order) on the host; PyTorch's gradient rule
        fn = _ScatterProd()
        fn.d, fn.idx, fn.include_self, fn.hit = d, idx, include_self, hit
        return fn(x, s)
    # amax / amin: the values on the host; the gradient shared among the entries that attain
    ufunc = np.maximum if reduce == "amax" else np.minimum
    if x.dtype.kind not in "fc":
        return _host_scatter(op, x, d, idx, s, ufunc, include_self)
    ext = _ScatterExtreme()
    ext.d, ext.idx, ext.include_self, ext.hit, ext.ufunc = d, idx, include_self, hit, ufunc
    return ext(x, s)


class _ScatterExtreme(_Function):
    """``scatter_reduce(..., 'amax' / 'amin')`` of floats: the values reduced on the host (an
    infinite or NaN entry stays in its own slot), the gradient of each slot shared equally
    among the ``src`` entries (and the ``self`` entry, when it takes part) equal to the
    result."""

    d: int
    idx: Tensor
    include_self: bool
    hit: Tensor
    ufunc: Any

    def forward(self, x: Tensor, s: Tensor) -> Tensor:
        val = _host_scatter("scatter_reduce", x, self.d, self.idx, s, self.ufunc, self.include_self)
        self.x, self.s, self.val = x, s, val
        return val

    def backward(self, g: Tensor | None) -> Any:
        if g is None:
            return None, None
        x, s, val, d, idx = self.x, self.s, self.val, self.d, self.idx
        dt = _dtype_name(x.dtype)
        src_on = (s.detach() == gather(val, d, idx)).astype(dt)
        self_on = (x.detach() == val).astype(dt)
        if not self.include_self:
            self_on = _where(self.hit, _core.zeros_like(self_on), self_on)
        ties = _sadd(self_on, d, idx, src_on)
        share = g / _where(ties > 0, ties, _core.ones_like(ties))
        return share * self_on, gather(share, d, idx) * src_on


class _ScatterProd(_Function):
    """``scatter_reduce(..., 'prod')`` of floats: the values multiplied on the host, the
    gradient PyTorch's (``scatter_reduce_backward``): a zero ``self`` entry is masked to 1,
    a ``src`` entry that is the only zero of its slot gets the product of the others, and
    where a slot holds two zeros their gradients are 0."""

    d: int
    idx: Tensor
    include_self: bool
    hit: Tensor

    def forward(self, x: Tensor, s: Tensor) -> Tensor:
        self.x, self.s = x, s
        return _host_scatter(
            "scatter_reduce", x, self.d, self.idx, s, np.multiply, self.include_self
        )

    def backward(self, g: Tensor | None) -> Any:
        if g is None:
            return None, None
        x, s, d, idx, inc = self.x, self.s, self.d, self.idx, self.include_self
        result = scatter_reduce(x, d, idx, s, "prod", include_self=inc)
        one = _core.ones_like(x)
        masked_self = _where(x == 0, one, x)
        grad_self = g * scatter_reduce(masked_self, d, idx, s, "prod", include_self=inc)
        grad_self = grad_self / masked_self
        if not inc:
            grad_self = _where(self.hit, _core.zeros_like(grad_self), grad_self)
        src_zero = s == 0
        n_zero = gather(_sadd(_core.zeros_like(x), d, idx, src_zero.astype(x.dtype)), d, idx)
        single = src_zero & (n_zero == 1)
        ones_s = _core.ones_like(s)
        masked_src_result = scatter_reduce(
            x, d, idx, _where(single, ones_s, s), "prod", include_self=inc
        )
        grad_src = _where(
            single,
            gather(g * masked_src_result, d, idx),
            gather(g * result, d, idx) / _where(src_zero, ones_s, s),
        )
        return grad_self, grad_src


def _sadd(x: Tensor, d: int, idx: Tensor, src: Tensor) -> Tensor:
    from ._ops import scatter_add

    return scatter_add(x, d, idx, src)


def _host_scatter(
    op: str, x: Tensor, d: int, idx: Tensor, s: Tensor, ufunc: Any, include_self: bool
) -> Tensor:
    """``ufunc`` (multiply, maximum or minimum) of ``s``'s entries into ``x`` at ``idx``
    along ``d``, computed on the host in order (not differentiable). Inside a trace it is a
    node of the graph that reads every run's ``x``, ``idx`` and ``s`` (and checks that run's
    indices)."""

    def run(x: Tensor, idx: Tensor, s: Tensor) -> Tensor:
        return _host_scatter_values(op, x, d, idx, s, ufunc, include_self)

    return _on_host(op, run, x, idx, s)


def _host_scatter_values(
    op: str, x: Tensor, d: int, idx: Tensor, s: Tensor, ufunc: Any, include_self: bool
) -> Tensor:
    xa = _host(x).copy()
    ia = _host(idx).astype(np.int64)
    sa = _host(s)
    _check_range(op, ia, d, xa.shape[d])
    coords = list(np.indices(ia.shape))
    coords[d] = ia
    coords_t = tuple(coords)
    if not include_self:
        hit = np.zeros(xa.shape, dtype=bool)
        hit[coords_t] = True
        # seed each hit slot with the reduction's identity, then reduce all sources in
        if ufunc is np.multiply:
            seed = np.ones_like(xa)
        else:
            seed = np.zeros_like(xa)
            # (max/min are idempotent: one of the slot's own sources is a neutral seed)
            seed[coords_t] = sa
        xa = np.where(hit, seed, xa)
    with np.errstate(invalid="ignore"):  # (a NaN entry propagates, as in PyTorch)
        ufunc.at(xa, coords_t, sa)
    return tensor(xa, device=x.device)


def _lin_indices(op: str, x: Tensor, indices: Any) -> tuple[np.ndarray, int]:
    """The flat positions over ``x``'s first ``k`` axes named by ``indices`` (a tuple of
    integer or bool tensors, broadcast), and ``k``."""
    if isinstance(indices, Tensor):
        indices = (indices,)
    if not isinstance(indices, (list, tuple)):
        raise TypeError(f"{op}: indices must be a tuple of tensors, got {type(indices).__name__}")
    arrays = []
    for i, t in enumerate(indices):
        t = _check_tensor(op, f"indices[{i}]", t)
        a = _host(t)
        if a.dtype == np.uint8:
            # a uint8 index is a mask, as in indexing (deprecated in PyTorch, which warns)
            import warnings

            warnings.warn(
                "indexing with dtype torch.uint8 is now deprecated, please use a dtype "
                "torch.bool instead.",
                UserWarning,
                stacklevel=4,
            )
            a = a != 0
        if a.dtype == bool:
            at = len(arrays)
            want = tuple(x.shape[at : at + a.ndim])
            if a.shape != want:
                raise IndexError(
                    f"{op}: the shape of the mask indices[{i}] {list(a.shape)} does not match "
                    f"the shape {list(want)} of the indexed tensor's dims {at}.."
                    f"{at + a.ndim - 1} (tensor shape {list(x.shape)})"
                )
            arrays.extend(np.nonzero(a))
        elif a.dtype.kind in "iu":
            arrays.append(a.astype(np.int64))
        else:
            from .nn._errors import IndexTypeError

            raise IndexTypeError(
                f"{op}: indices[{i}] must be a long, int, byte or bool tensor, got {t.dtype}"
            )
    k = len(arrays)
    if k > x.ndim:
        raise IndexError(f"{op}: {k} index tensors for a tensor of shape {list(x.shape)}")
    try:
        arrays = np.broadcast_arrays(*arrays)
    except ValueError:
        raise ShapeError(
            f"{op}: index shapes {[list(a.shape) for a in arrays]} do not broadcast"
        ) from None
    fixed = []
    for j, a in enumerate(arrays):
        n = x.shape[j]
        if a.size and (a.min() < -n or a.max() >= n):
            raise IndexError(f"{op}: an index is out of range for size {n} at dim {j}")
        fixed.append(np.where(a < 0, a + n, a))
    lin = np.ravel_multi_index(tuple(fixed), tuple(x.shape[:k])) if k else np.zeros((), np.int64)
    return lin, k


def index_put(input: Tensor, indices: Any, values: Any, accumulate: bool = False) -> Tensor:
    """``input`` with ``input[indices] = values`` (``+=`` with ``accumulate``, duplicates
    adding up); differentiable in ``input`` and ``values``."""
    op = "index_put"
    x = _check_tensor(op, "input", input)
    if _core._tracing():
        traced = _index_put_traced(x, indices, values, accumulate)
        if traced is not None:
            return traced
    lin, k = _lin_indices(op, x, indices)
    rest = tuple(x.shape[k:])
    target = (*lin.shape, *rest)
    if not isinstance(values, Tensor):
        values = tensor(values, dtype=_dtype_name(x.dtype), device=x.device)
    elif values.dtype != x.dtype:
        raise DTypeError(
            f"{op}: values must have the input's dtype {x.dtype}, got {values.dtype}; cast "
            f"them first"
        )
    v = values
    try:
        np.broadcast_shapes(tuple(v.shape), target)
    except ValueError:
        raise ShapeError(
            f"{op}: values of shape {list(v.shape)} do not broadcast to the indexed shape "
            f"{list(target)}"
        ) from None
    v = v.broadcast_to(*target) if tuple(v.shape) != target else v
    flat_x = x.reshape(math.prod(x.shape[:k]), *rest)
    flat_v = v.reshape(int(lin.size), *rest)
    pos = _idx(lin.reshape(-1), x.device)
    if accumulate and x.dtype.kind == "b":
        # PyTorch's bool accumulate is a logical or
        out = index_add(flat_x.astype("int64"), 0, pos, flat_v.astype("int64")) != 0
    elif accumulate:
        out = index_add(flat_x, 0, pos, flat_v)
    else:
        # the last write wins among duplicates
        last = {}
        for j, p in enumerate(lin.reshape(-1).tolist()):
            last[p] = j
        keys = sorted(last)
        sel = _idx([last[p] for p in keys], x.device)
        from ._torch_more import index_copy

        out = (
            index_copy(flat_x, 0, _idx(keys, x.device), _core.index_select(flat_v, 0, sel))
            if keys
            else flat_x
        )
    return out.reshape(*x.shape)


def _index_put_traced(x: Tensor, indices: Any, values: Any, accumulate: bool) -> Tensor | None:
    """``index_put`` inside ``fg.trace`` with integer index tensors, whose values are not
    known while the graph is built: the flat positions come from tensor ops (as a traced
    advanced index's), so each replay takes the new indices. None for other indices (a
    mask, whose selection has a shape that depends on its values), left to the host route
    and its TraceError."""
    from ._indexing import _tensor_positions, _tensor_setitem

    if isinstance(indices, Tensor):
        indices = (indices,)
    if not isinstance(indices, (list, tuple)) or not indices:
        return None
    if not all(isinstance(t, Tensor) and t.dtype.kind == "i" for t in indices):
        return None
    if not isinstance(values, Tensor):
        values = tensor(values, dtype=_dtype_name(x.dtype), device=x.device)
    elif values.dtype != x.dtype:
        raise DTypeError(
            f"index_put: values must have the input's dtype {x.dtype}, got {values.dtype}; "
            f"cast them first"
        )
    if len(indices) > x.ndim:
        raise IndexError(
            f"index_put: {len(indices)} index tensors for a tensor of shape {list(x.shape)}"
        )
    tpos = _tensor_positions(tuple(x.shape), tuple(indices), "index_put", x.device)
    if tpos is None:
        return None
    target = tuple(tpos.shape)
    try:
        np.broadcast_shapes(tuple(values.shape), target)
    except ValueError:
        raise ShapeError(
            f"index_put: values of shape {list(values.shape)} do not broadcast to the indexed "
            f"shape {list(target)}"
        ) from None
    if not accumulate:
        out = x.clone()
        _tensor_setitem(out, tpos, values)
        return out
    n = math.prod(x.shape)
    v = values.broadcast_to(*target).reshape(-1)
    pos = tpos.reshape(-1)
    if x.dtype.kind == "b":  # (PyTorch's bool accumulate is a logical or)
        added = _core._scatter_add(v.astype("int8"), pos, 0, (n,)) != 0
        return (x.reshape(-1) | added).reshape(*x.shape)
    return (x.reshape(-1) + _core._scatter_add(v, pos, 0, (n,))).reshape(*x.shape)


# ------------------------------------------------------------------------ Tensor methods


def _fill_diagonal_(self: Tensor, fill_value: Any, wrap: bool = False) -> Tensor:
    """Fills the main diagonal in place (every axis of one size past 2-D; a tall matrix
    restarts its diagonal every ``cols + 1`` rows with ``wrap``)."""
    if self.ndim < 2:
        raise ShapeError(f"fill_diagonal_: the tensor must be at least 2-D, got {list(self.shape)}")
    if self.ndim > 2 and len(set(self.shape)) != 1:
        raise ShapeError(
            f"fill_diagonal_: past 2-D every dimension must be of one size, got {list(self.shape)}"
        )
    mask = np.zeros(tuple(self.shape), dtype=bool)
    np.fill_diagonal(mask, True, wrap=bool(wrap))
    return self.masked_fill_(tensor(mask, device=self.device), fill_value)


def _index_put_(self: Tensor, indices: Any, values: Any, accumulate: bool = False) -> Tensor:
    return self.copy_(index_put(self, indices, values, accumulate))


def _storage_offset(self: Tensor) -> int:
    """The offset, in elements, of the first entry in the buffer it views."""
    return int(self._data_key[1])


def _data_ptr(self: Tensor) -> int:
    """The address of the first entry (0 for a tensor with no elements, as PyTorch's). For
    device memory, the buffer's identifying number plus the entry's byte offset: equal for
    tensors that start at the same memory, as device addresses are."""
    if self.numel() == 0:
        return 0
    if str(self.device) != "cpu":
        return int(self._storage_info()[0]) + int(self._data_key[1]) * self.element_size()
    return int(_core._host_memory(self)[0])


def _mH(self: Tensor) -> Tensor:
    if self.ndim == 1:
        raise ShapeError(
            "tensor.mH is only supported on matrices or batches of matrices. Got 1-D tensor."
        )
    return self.mT


def _H(self: Tensor) -> Tensor:
    if self.ndim not in (0, 2):
        raise ShapeError(
            "tensor.H is only supported on matrices (2-D tensors). "
            f"Got {self.ndim}-D tensor, of shape {list(self.shape)}."
        )
    return self.T


def _install() -> None:
    methods = {
        "diag_embed": diag_embed,
        "fill_diagonal_": _fill_diagonal_,
        "index_put_": _index_put_,
        "index_put": index_put,
        "storage_offset": _storage_offset,
        "data_ptr": _data_ptr,
        "frexp": frexp,
        "ldexp": ldexp,
        "lgamma": lgamma,
        "digamma": digamma,
        "erfinv": erfinv,
        "polygamma": lambda self, n: polygamma(n, self),
        "mvlgamma": mvlgamma,
        "i0": i0,
        "logcumsumexp": logcumsumexp,
        "mode": mode,
        "nanmedian": nanmedian,
        "vdot": vdot,
        "matrix_exp": matrix_exp,
        "gcd": gcd,
        "lcm": lcm,
        "isin": None,  # PyTorch has no Tensor.isin
        "scatter_reduce": scatter_reduce,
        "diagonal_scatter": diagonal_scatter,
        "select_scatter": select_scatter,
        "slice_scatter": slice_scatter,
        "hsplit": hsplit,
        "vsplit": vsplit,
        "dsplit": dsplit,
        "diagflat": diagflat,
        "trapz": None,
        "cov": lambda self, **kw: cov(self, **kw),
        "corrcoef": corrcoef,
        "nan_to_num": None,
    }
    for name, fn in methods.items():
        if fn is None or name in Tensor.__dict__:
            continue
        setattr(Tensor, name, fn)
    for name, getter in (("mH", _mH), ("H", _H)):
        if name not in Tensor.__dict__:
            setattr(Tensor, name, property(getter))
    _install_bitwise()


def _install_bitwise() -> None:
    """``&``, ``|``, ``^``, ``~`` and the ``bitwise_*`` methods on integer tensors too (bool
    tensors keep the engine's logical ops); float tensors still raise as in PyTorch."""
    for sym, fn in (("and", bitwise_and), ("or", bitwise_or), ("xor", bitwise_xor)):
        bool_op = Tensor.__dict__[f"__{sym}__"]

        def op(self: Tensor, other: Any, fn: Any = fn, bool_op: Any = bool_op) -> Any:
            if self.dtype.kind in "iu" and (
                (isinstance(other, Tensor) and other.dtype.kind in "biu")
                or (isinstance(other, (int, np.integer)) and not isinstance(other, bool))
            ):
                return fn(self, other)
            return bool_op(self, other)

        def rop(self: Tensor, other: Any, fn: Any = fn, bool_op: Any = bool_op) -> Any:
            if self.dtype.kind in "iu" and isinstance(other, (int, np.integer)):
                return fn(self, other)
            kinds = {self.dtype.kind, other.dtype.kind} if isinstance(other, Tensor) else set()
            if kinds and kinds <= set("biu") and kinds & set("iu"):
                # `a.__ror__(b)` with integer tensors: `b | a`
                return fn(other, self)
            return bool_op(self, other)

        op.__name__ = f"__{sym}__"
        rop.__name__ = f"__r{sym}__"
        setattr(Tensor, f"__{sym}__", op)
        setattr(Tensor, f"__r{sym}__", rop)
        setattr(Tensor, f"bitwise_{sym}", fn)
    invert = Tensor.__dict__["__invert__"]

    def __invert__(self: Tensor) -> Tensor:
        return bitwise_not(self) if self.dtype.kind in "iu" else invert(self)

    Tensor.__invert__ = __invert__
    Tensor.bitwise_not = bitwise_not


_install()


def nuclear_norm(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """``torch.nuclear_norm``: the sum of the singular values of a matrix (``dim=None``: the
    input must be 2-D) or of the matrices in the two axes ``dim``."""
    from .linalg import matrix_norm

    x = _check_tensor("nuclear_norm", "input", input)
    if dim is None:
        if x.ndim != 2:
            raise ShapeError(
                f"nuclear_norm: expected a 2-D tensor when dim is not given, got shape "
                f"{list(x.shape)}"
            )
        dim = (0, 1)
    return matrix_norm(x, "nuc", tuple(dim), keepdim)


class _GeqrfResult(NamedTuple):
    a: Tensor
    tau: Tensor


def geqrf(input: Tensor) -> _GeqrfResult:
    """``torch.geqrf``: LAPACK's ``geqrf`` QR factorisation, the Householder reflectors below
    the diagonal of ``a`` (``R`` on and above it) and their scales ``tau`` (batched; not
    differentiable, as PyTorch's). ``linalg.householder_product(a, tau)`` gives ``Q``."""
    x = _check_tensor("geqrf", "input", input)
    if x.ndim < 2:
        raise ShapeError(f"geqrf: input must have at least 2 dimensions, got shape {list(x.shape)}")
    if x.dtype.name not in ("float32", "float64"):
        raise DTypeError(f"geqrf: input must be float32 or float64, got {x.dtype}")
    if _core._tracking_keys(x):
        from .autodiff import is_grad_enabled

        if is_grad_enabled():
            raise RuntimeError("geqrf: the derivative of geqrf is not implemented (as PyTorch's)")
    a = _host(x)
    m, n = a.shape[-2:]
    flat = a.reshape(int(np.prod(a.shape[:-2])), m, n)
    h = np.zeros_like(flat)
    tau = np.zeros((flat.shape[0], min(m, n)), dtype=a.dtype)
    for i, mat in enumerate(flat):
        if mat.size:
            hi, ti = np.linalg.qr(mat.astype(np.float64), mode="raw")
            h[i], tau[i] = hi.T, ti[: min(m, n)]
    name = _dtype_name(x.dtype)
    return _GeqrfResult(
        tensor(h.reshape(a.shape), dtype=name, device=x.device),
        tensor(tau.reshape(*a.shape[:-2], min(m, n)), dtype=name, device=x.device),
    )


def orgqr(input: Tensor, tau: Tensor) -> Tensor:
    """``torch.orgqr``: ``linalg.householder_product``."""
    from .linalg import householder_product

    return householder_product(input, tau)
