"""``torch.special``'s functions (``fg.special``): ``expit``, ``logit``, ``erf``, ``erfc``,
``expm1``, ``exp2``, ``log1p``, ``xlogy``, ``xlog1py``, ``entr``, ``ndtr``, ``log_ndtr``,
``ndtri``, ``erfcx``, ``i0e``, ``i1``, ``i1e``, ``sinc``, ``logsumexp``, ``softmax``, ``log_softmax``,
``round``; differentiable where PyTorch's are."""

from __future__ import annotations

import math
from typing import Any

from . import _core
from ._core import Tensor
from ._ops import _check_tensor
from ._ops import logsumexp as _logsumexp
from ._torch_extra import _inverse, i0e, i1, i1e
from ._torch_extra import erfinv as _erfinv
from ._torch_more import _float, _pair, logit, sinc, xlogy

__all__ = [
    "entr",
    "erf",
    "erfc",
    "erfcx",
    "exp2",
    "expit",
    "expm1",
    "i0e",
    "i1",
    "i1e",
    "log1p",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "ndtr",
    "ndtri",
    "round",
    "sinc",
    "softmax",
    "xlog1py",
    "xlogy",
]


def expit(input: Tensor) -> Tensor:
    """The logistic sigmoid ``1 / (1 + exp(-x))``."""
    return _check_tensor("expit", "input", input).sigmoid()


def erf(input: Tensor) -> Tensor:
    return _check_tensor("erf", "input", input).erf()


def erfc(input: Tensor) -> Tensor:
    return _check_tensor("erfc", "input", input).erfc()


def expm1(input: Tensor) -> Tensor:
    return _check_tensor("expm1", "input", input).expm1()


def exp2(input: Tensor) -> Tensor:
    return _check_tensor("exp2", "input", input).exp2()


def log1p(input: Tensor) -> Tensor:
    return _check_tensor("log1p", "input", input).log1p()


def round(input: Tensor, decimals: int = 0) -> Tensor:
    return _check_tensor("round", "input", input).round(decimals=decimals)


def xlog1py(input: Any, other: Any) -> Tensor:
    """``input * log1p(other)``, 0 where ``input`` is 0 (also where ``other`` is -1 or
    below, where ``log1p`` is -inf or NaN), unless ``other`` is NaN."""
    x, y = _pair("xlog1py", input, other)
    blow_up = (x == 0) & ((y <= -1) | y.isinf())
    safe = _core.where(blow_up, _core.zeros_like(y), y)
    return x * safe.log1p()


def entr(input: Tensor) -> Tensor:
    """``-x * log(x)``: 0 at 0, ``-inf`` below 0 and at inf. The gradient is PyTorch's
    ``-(log(x) + 1)`` everywhere: +inf at 0 (not 0), -inf at inf and NaN below 0. Each case
    has its own expression fed only its own entries: ``sqrt(x + 0)`` at +-0 (value 0, slope
    +inf), ``-x^2`` at inf, ``log|x - x|`` below 0 (value -inf, slope inf * 0 = NaN; a
    constant at -inf)."""
    x = _check_tensor("entr", "input", input)
    one = _core.ones_like(x)
    zero = x == 0
    neg = x < 0
    big = x == math.inf
    xm = _core.where(zero | neg | big, one, x)
    out = -xm * xm.log()
    xb = _core.where(big, x, one)
    out = _core.where(big, -(xb * xb), out)
    xz = _core.where(zero, x, one)
    out = _core.where(zero, (xz + 0.0).sqrt(), out)
    xn = _core.where(neg & (x != -math.inf), x, one)
    out = _core.where(neg, (xn - xn.detach()).abs().log(), out)
    return _core.where(x == -math.inf, _core.zeros_like(x) - math.inf, out)


def ndtr(input: Tensor) -> Tensor:
    """The standard normal CDF, ``erfc(-x / sqrt 2) / 2``: ``(1 + erf(x / sqrt 2)) / 2`` would
    lose every digit of the lower tail (0 from x = -8.3 in float64, where the value is
    5e-17)."""
    x = _check_tensor("ndtr", "input", input)
    return 0.5 * (x * (-1.0 / math.sqrt(2.0))).erfc()


def logsumexp(input: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    return _logsumexp(input, dim, keepdim)


def softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    x = _check_tensor("softmax", "input", input)
    return (x if dtype is None else x.astype(str(dtype))).softmax(dim=dim)


def log_softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    x = _check_tensor("log_softmax", "input", input)
    return (x if dtype is None else x.astype(str(dtype))).log_softmax(dim=dim)


def log_ndtr(input: Tensor) -> Tensor:
    """``log(ndtr(x))`` without underflow: ``log1p(-erfc(x / sqrt 2) / 2)`` above 0,
    ``log(erfc(-x / sqrt 2) / 2)`` down to -20 and the asymptotic series of the Mills ratio
    below, where ``ndtr`` itself underflows (``-x^2/2 - log(-x sqrt(2 pi))`` plus a
    correction). Computed in double precision for the narrower float dtypes."""
    x = _float("log_ndtr", input)
    if str(x.dtype) != "float64":
        return log_ndtr(x.astype("float64")).astype(x.dtype)
    r2 = 1.0 / math.sqrt(2.0)
    pos = x > 0
    far = x < -20.0
    one = _core.ones_like(x)
    xp = _core.where(pos, x, one)
    upper = (-0.5 * (xp * r2).erfc()).log1p()
    xm = _core.where(pos | far, -one, x)
    middle = (0.5 * (-xm * r2).erfc()).log()
    xf = _core.where(far, x, -one - 20.0)
    z = (xf * xf).reciprocal()
    # log(1 - 1/x^2 + 3/x^4 - 15/x^6 + ...): the Mills ratio's series, exact to 1e-16 below -20
    series = _core.ones_like(z)
    term = _core.ones_like(z)
    for k in range(1, 9):
        term = term * z * (-(2.0 * k - 1.0))
        series = series + term
    lower = -0.5 * xf * xf - (-xf).log() - 0.5 * math.log(2.0 * math.pi) + series.log()
    return _core.where(pos, upper, _core.where(far, lower, middle))


def ndtri(input: Tensor) -> Tensor:
    """The inverse of ``ndtr`` on ``[0, 1]`` (``-inf`` at 0, ``inf`` at 1, NaN outside):
    ``sqrt(2) erfinv(2p - 1)`` on ``[0.25, 0.75]`` and at the ends; in the tails, where
    ``2p - 1`` would lose ``p``'s digits, Newton steps on ``log_ndtr(z) = log(p)`` (``1 - p``
    and an odd reflection above 0.75, exact there) from Abramowitz and Stegun's 26.2.23; the
    gradient is ``1 / phi(z)``, differentiable again."""
    p = _float("ndtri", input)
    return _inverse(_ndtri_value, _ndtri_inv_slope, p)


def _ndtri_inv_slope(z: Tensor) -> Tensor:
    # 1 / phi(z) = sqrt(2 pi) exp(z^2 / 2)
    return (0.5 * z * z).exp() * math.sqrt(2.0 * math.pi)


def _ndtri_value(p: Tensor) -> Tensor:
    from .autodiff import no_grad

    upper = p > 0.5
    tail = ((p > 0.0) & (p < 0.25)) | ((p > 0.75) & (p < 1.0))
    # each branch sees only its own inputs (erfinv's infinite gradient at -1 would otherwise
    # turn the tail's into NaN)
    pc = _core.where(tail, _core.ones_like(p) * 0.5, p)
    central = math.sqrt(2.0) * _erfinv(2.0 * pc - 1.0)
    q = _core.where(upper, 1.0 - p, p)
    q = _core.where(tail, q, _core.ones_like(q) * 0.1)
    logq = q.log()
    half_log_2pi = 0.5 * math.log(2.0 * math.pi)

    def newton(z: Tensor) -> Tensor:
        # log(phi(z) / ndtr(z)) is f'(z) / f(z) for f = log_ndtr
        slope = (-0.5 * z * z - half_log_2pi - log_ndtr(z)).exp()
        return z - (log_ndtr(z) - logq) / slope

    with no_grad():
        t = (-2.0 * logq.detach()).sqrt()
        num = 2.515517 + t * (0.802853 + t * 0.010328)
        den = 1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))
        z = num / den - t
        for _ in range(4):
            z = newton(z)
    z = newton(z.detach())
    z = _core.where(upper, -z, z)
    out = _core.where(tail, z, central)
    # below 0 (even by a subnormal, which 2p - 1 rounds away) and above 1: NaN
    outside = (p < 0.0) | (p > 1.0)
    return _core.where(outside, _core.where(outside, p, _core.zeros_like(p)) * math.nan, out)


def erfcx(input: Tensor) -> Tensor:
    """The scaled complementary error function ``exp(x^2) erfc(x)``: the product below
    ``x = 10`` (``2 exp(x^2)`` below -26.5, inf where that overflows, as the value does),
    the asymptotic series ``(1 - 1/(2x^2) + 3/(4x^4) - ...) / (x sqrt(pi))`` above, where
    ``erfc`` underflows. Computed in double precision for the narrower float dtypes."""
    x = _float("erfcx", input)
    if str(x.dtype) != "float64":
        return erfcx(x.astype("float64")).astype(x.dtype)
    far = x > 10.0
    # below -26.5, erfc(x) = 2 to double precision and 2 exp(x^2) is the whole value (inf
    # from -26.7); kept apart so that its gradient is -inf there, not inf * 0
    low = x < -26.5
    one = _core.ones_like(x)
    xn = _core.where(far | low, one, x)
    near = (xn * xn).exp() * xn.erfc()
    xl = _core.where(low, x, one)
    near = _core.where(low, 2.0 * (xl * xl).exp(), near)
    xf = _core.where(far, x, one + 10.0)
    z = (2.0 * xf * xf).reciprocal()
    series = _core.ones_like(z)
    term = _core.ones_like(z)
    for k in range(1, 14):
        term = term * z * (-(2.0 * k - 1.0))
        series = series + term
    return _core.where(far, series / (xf * math.sqrt(math.pi)), near)
