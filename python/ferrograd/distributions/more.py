"""More of PyTorch's distributions, with its constructor arguments, formulas and shapes:
heavy-tailed and extreme-value families (``StudentT``, ``Cauchy``, ``HalfCauchy``,
``HalfNormal``, ``Gumbel``, ``Weibull``, ``Pareto``, ``GeneralizedPareto``), gamma relatives
(``Chi2``, ``InverseGamma``, ``FisherSnedecor``), ``VonMises``, counts (``Multinomial``,
``NegativeBinomial``), relaxations (``RelaxedBernoulli``, ``RelaxedOneHotCategorical``,
``OneHotCategoricalStraightThrough``), ``ContinuousBernoulli``, ``Kumaraswamy``,
``LogisticNormal``, ``LowRankMultivariateNormal`` and ``MixtureSameFamily``; plus the
``AbsTransform``, ``PowerTransform`` and ``StickBreakingTransform`` they are built from.

The families PyTorch builds as a ``TransformedDistribution`` are ``TransformedDistribution``
here too (``base_dist`` and ``transforms`` as PyTorch's). ``Chi2``, ``StudentT``,
``FisherSnedecor`` and ``InverseGamma`` draw gamma variables with the host generator and
differentiate them by implicit reparameterization, with PyTorch's approximation of
``-(d/dalpha cdf(x; alpha)) / pdf(x; alpha)``."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from .._core import Tensor
from ..autodiff import no_grad
from . import constraints
from .distribution import (
    Distribution,
    _fg,
    _finfo,
    _reading_allowed,
    _size,
    broadcast_all,
    clamp_probs,
    lazy_property,
    logits_to_probs,
    probs_to_logits,
)
from .families import (
    Binomial,
    Categorical,
    Exponential,
    Gamma,
    Independent,
    Normal,
    OneHotCategorical,
    Uniform,
    _host,
    _numpy_draw,
)
from .transforms import (
    AffineTransform,
    ExpTransform,
    SigmoidTransform,
    Transform,
    TransformedDistribution,
)

__all__ = [
    "AbsTransform",
    "Cauchy",
    "Chi2",
    "ContinuousBernoulli",
    "ExpRelaxedCategorical",
    "FisherSnedecor",
    "GeneralizedPareto",
    "Gumbel",
    "HalfCauchy",
    "HalfNormal",
    "InverseGamma",
    "Kumaraswamy",
    "LogisticNormal",
    "LogitRelaxedBernoulli",
    "LowRankMultivariateNormal",
    "MixtureSameFamily",
    "Multinomial",
    "NegativeBinomial",
    "OneHotCategoricalStraightThrough",
    "Pareto",
    "PowerTransform",
    "RelaxedBernoulli",
    "RelaxedOneHotCategorical",
    "StickBreakingTransform",
    "StudentT",
    "VonMises",
    "Weibull",
]

_EULER = 0.57721566490153286060


def _expanded(d: Distribution, **params: Any) -> Distribution:
    """A distribution of ``d``'s type made from ``params`` (``d``'s parameters expanded to
    the new batch shape), with ``d``'s validation setting."""
    new = type(d)(**params, validate_args=False)
    new._validate_args = d._validate_args
    return new


def _check_param(d: Distribution, name: str, value: Tensor, ok: Tensor, constraint: str) -> None:
    """PyTorch's error for a parameter outside its constraint (checked where the generic
    check of ``arg_constraints`` cannot see it)."""
    if _reading_allowed() and not bool(ok.all()):
        raise ValueError(
            f"Expected parameter {name} ({type(value).__name__} of shape {tuple(value.shape)}) "
            f"of distribution {d!r} to satisfy the constraint {constraint}, but found invalid "
            f"values:\n{value}"
        )


# ------------------------------------------------------------------------------- transforms


class AbsTransform(Transform):
    """``y = |x|`` (not bijective: ``inv(y)`` is ``y``)."""

    bijective = False
    codomain = constraints.positive

    def _call(self, x: Tensor) -> Tensor:
        return x.abs()

    def _inverse(self, y: Tensor) -> Tensor:
        return y


class PowerTransform(Transform):
    """``y = x ** exponent`` on positive ``x``."""

    domain = constraints.positive
    codomain = constraints.positive

    def __init__(self, exponent: Any, cache_size: int = 0) -> None:
        super().__init__(cache_size)
        (self.exponent,) = broadcast_all(exponent)

    def _params(self) -> tuple:
        return (self.exponent,)

    @property
    def sign(self) -> Any:  # type: ignore[override]
        return self.exponent.sign()

    def _call(self, x: Tensor) -> Tensor:
        return x.pow(self.exponent)

    def _inverse(self, y: Tensor) -> Tensor:
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return (self.exponent * y / x).abs().log()

    def __repr__(self) -> str:
        return f"PowerTransform(exponent={self.exponent})"


class StickBreakingTransform(Transform):
    """Unconstrained vectors of length ``K`` to the simplex of ``K + 1`` categories by stick
    breaking (PyTorch's transform, the one ``LogisticNormal`` uses)."""

    event_dim = 1
    domain = constraints.real_vector
    codomain = constraints.simplex

    def forward_shape(self, shape: Any) -> tuple:
        shape = tuple(shape)
        if not shape:
            raise ValueError("StickBreakingTransform: a shape needs at least one dimension")
        return (*shape[:-1], shape[-1] + 1)

    def inverse_shape(self, shape: Any) -> tuple:
        shape = tuple(shape)
        if not shape:
            raise ValueError("StickBreakingTransform: a shape needs at least one dimension")
        return (*shape[:-1], shape[-1] - 1)

    @staticmethod
    def _offset(x: Tensor, n: int) -> Tensor:
        fg = _fg()
        return fg.arange(n, 0, -1, dtype=x.dtype, device=x.device)

    def _call(self, x: Tensor) -> Tensor:
        fg = _fg()
        k = x.shape[-1]
        fi = _finfo(x.dtype)
        z = (x - self._offset(x, k).log()).sigmoid().clamp(min=fi.tiny, max=1 - fi.eps)
        z_cumprod = (1 - z).cumprod(-1)
        ones = fg.ones(*x.shape[:-1], 1, dtype=x.dtype, device=x.device)
        return fg.cat([z, ones], -1) * fg.cat([ones, z_cumprod], -1)

    def _inverse(self, y: Tensor) -> Tensor:
        y_crop = y[..., :-1]
        sf = (1 - y_crop.cumsum(-1)).clamp(min=_finfo(y.dtype).tiny)
        return y_crop.log() - sf.log() + self._offset(y, y_crop.shape[-1]).log()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        fg = _fg()
        x = x - self._offset(x, x.shape[-1]).log()
        return (-x + fg.nn.functional.logsigmoid(x) + y[..., :-1].log()).sum(-1)


class _Transformed(TransformedDistribution):
    """A family PyTorch builds as a ``TransformedDistribution``: ``base_dist`` and
    ``transforms`` as PyTorch's, parameters checked against ``arg_constraints``, values
    against ``support``."""

    def __init__(
        self,
        base_distribution: Distribution,
        transforms: list,
        validate_args: bool | None,
        batch_shape: Any = None,
        event_shape: Any = None,
    ) -> None:
        self.base_dist = base_distribution
        self.transforms = list(transforms)
        Distribution.__init__(
            self,
            base_distribution.batch_shape if batch_shape is None else batch_shape,
            base_distribution.event_shape if event_shape is None else event_shape,
            validate_args,
        )

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            return super().sample(sample_shape)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return super().log_prob(value)

    __repr__ = Distribution.__repr__


# ---------------------------------------------------------------------- gamma, reparameterized

_F32 = {v: float(np.float32(v)) for v in (0.8, 8.0, 0.9, 1.1)}
_GAMMA_GRAD_COEF = (
    (0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084),
    (0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915,
     -0.00058392623),
    (0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326,
     0.00085092367, -1.5247877e-07),
)  # fmt: skip


def _standard_gamma_grad(alpha: Tensor, x: Tensor) -> Tensor:
    """``dx/dalpha`` of a draw ``x`` of ``Gamma(alpha, 1)`` held at its quantile, by
    PyTorch's approximation (``torch._standard_gamma_grad``: a Taylor series for small
    ``x``, Rice's saddle-point expansion for large ``alpha``, a rational fit elsewhere),
    computed in float64."""
    fg = _fg()
    out_dtype = x.dtype
    a = alpha.detach().to(fg.float64)
    x = x.detach().to(fg.float64)
    # small x: Taylor series of the regularized incomplete gamma function
    numer, denom = fg.ones_like(x), a
    series1, series2 = 1 / denom, 1 / (denom * denom)
    for i in range(1, 6):
        numer = numer * (-x / i)
        denom = denom + 1
        series1 = series1 + numer / denom
        series2 = series2 + numer / (denom * denom)
    pow_x_alpha = x.pow(a)
    gamma_pdf = x.pow(a - 1) * (-x).exp()
    gamma_cdf_alpha = (x.log() - fg.digamma(a)) * pow_x_alpha * series1 - pow_x_alpha * series2
    small = -gamma_cdf_alpha / gamma_pdf
    small = fg.where(small.isnan(), 0.0, small)
    # large alpha, near the mode
    numer_1 = 1 + 24 * a * (1 + 12 * a)
    numer_2 = 1440 * (a * a) + 6 * x * (53 - 120 * x) - 65 * x * x / a + a * (107 + 3600 * x)
    near = numer_1 * numer_2 / (1244160 * (a * a) * (a * a))
    # large alpha, away from the mode
    den = (8 * a).sqrt()
    term2 = den / (a - x)
    term3 = (x - a - a * (x / a).log()).pow(-1.5)
    term23 = fg.where(x < a, term2 - term3, term2 + term3)
    term1 = (x / a).log() * term23 - (2 / a).sqrt() * (a + x) / ((a - x) * (a - x))
    stirling = 1 + 1 / (12 * a) * (1 + 1 / (24 * a))
    far = -stirling * x * term1 / den
    # elsewhere: a bivariate rational approximation in log(x / alpha), log(alpha)
    u, v = (x / a).log(), a.log()
    c0, c1, c2 = _GAMMA_GRAD_COEF
    cv = [c0[i] + u * (c1[i] + u * c2[i]) for i in range(8)]
    p = cv[0] + v * (cv[1] + v * (cv[2] + v * cv[3]))
    q = cv[4] + v * (cv[5] + v * (cv[6] + v * cv[7]))
    rational = (p / q).exp()
    in_near = (x >= _F32[0.9] * a) & (x <= _F32[1.1] * a)
    large = fg.where(in_near, near, far)
    result = fg.where(x < _F32[0.8], small, fg.where(a > _F32[8.0], large, rational))
    return result.to(out_dtype)


def _standard_gamma(alpha: Tensor, shape: tuple) -> Tensor:
    """Draws of ``Gamma(alpha, 1)`` of ``shape`` (host generator), differentiable w.r.t.
    ``alpha`` by implicit reparameterization (the gradient is :func:`_standard_gamma_grad`
    at the draw; the value is the draw exactly)."""
    fg = _fg()
    a = np.broadcast_to(_host(alpha), shape)
    tiny = _finfo(alpha.dtype).tiny
    x = _numpy_draw(alpha.device, lambda g: g.standard_gamma(a), alpha.dtype).clamp(min=tiny)
    alpha = alpha.expand(*shape)
    with no_grad():
        grad = _standard_gamma_grad(alpha, x)
        grad = fg.where(grad.isfinite(), grad, 0.0)
    return x + grad * (alpha - alpha.detach())


def _gamma_rsample(concentration: Tensor, rate: Tensor, shape: Any) -> Tensor:
    """Reparameterized draws of ``Gamma(concentration, rate)`` of ``shape`` (values at least
    ``tiny``, gradients as if unclamped, as PyTorch's)."""
    shape = tuple(shape)
    value = _standard_gamma(concentration, shape) / rate.expand(*shape)
    clamped = value.detach().clamp(min=_finfo(value.dtype).tiny)
    return value + (clamped - value.detach())


class Chi2(Gamma):
    """``Chi2(df)``: the chi-squared distribution, ``Gamma(df / 2, 1 / 2)``; ``rsample``
    differentiates the draws w.r.t. ``df`` by implicit reparameterization."""

    arg_constraints: ClassVar[dict] = {"df": constraints.positive}
    has_rsample = True

    def __init__(self, df: Any, validate_args: bool | None = None) -> None:
        super().__init__(0.5 * df, 0.5, validate_args)

    @property
    def df(self) -> Tensor:
        return self.concentration * 2

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        return _expanded(self, df=self.df.expand(*_size(batch_shape)))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        return _gamma_rsample(self.concentration, self.rate, self._extended_shape(sample_shape))


class InverseGamma(_Transformed):
    """``InverseGamma(concentration, rate)``: ``1 / X`` for ``X ~ Gamma(concentration,
    rate)`` (reparameterized as ``Chi2``'s draws)."""

    arg_constraints: ClassVar[dict] = {
        "concentration": constraints.positive,
        "rate": constraints.positive,
    }
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration: Any, rate: Any, validate_args: bool | None = None) -> None:
        base = Gamma(concentration, rate, validate_args=False)
        neg_one = _fg().full((), -1.0, dtype=base.rate.dtype, device=base.rate.device)
        super().__init__(base, [PowerTransform(neg_one)], validate_args)

    @property
    def concentration(self) -> Tensor:
        return self.base_dist.concentration

    @property
    def rate(self) -> Tensor:
        return self.base_dist.rate

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        s = _size(batch_shape)
        return _expanded(
            self, concentration=self.concentration.expand(*s), rate=self.rate.expand(*s)
        )

    @property
    def mean(self) -> Tensor:
        fg = _fg()
        c = self.concentration
        safe = fg.where(c > 1, c, 2.0)
        return fg.where(c > 1, self.rate / (safe - 1), math.inf)

    @property
    def mode(self) -> Tensor:
        return self.rate / (self.concentration + 1)

    @property
    def variance(self) -> Tensor:
        fg = _fg()
        c = self.concentration
        safe = fg.where(c > 2, c, 3.0)
        return fg.where(c > 2, self.rate.pow(2) / ((safe - 1).pow(2) * (safe - 2)), math.inf)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return _gamma_rsample(self.concentration, self.rate, shape).reciprocal()

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            return self.base_dist.sample(sample_shape).reciprocal()

    def log_prob(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        c, r = self.concentration, self.rate
        return fg.special.xlogy(c, r) - fg.lgamma(c) - (c + 1) * value.log() - r / value

    def entropy(self) -> Tensor:
        fg = _fg()
        c = self.concentration
        return c + self.rate.log() + fg.lgamma(c) - (1 + c) * fg.digamma(c)


class StudentT(Distribution):
    """``StudentT(df, loc=0.0, scale=1.0)``: Student's t with ``df`` degrees of freedom,
    shifted by ``loc`` and scaled by ``scale``; ``rsample`` is ``loc + scale * X /
    sqrt(Z / df)`` with ``X`` normal and ``Z`` a reparameterized ``Chi2(df)`` draw."""

    arg_constraints: ClassVar[dict] = {
        "df": constraints.positive,
        "loc": constraints.real,
        "scale": constraints.positive,
    }
    support = constraints.real
    has_rsample = True

    def __init__(
        self, df: Any, loc: Any = 0.0, scale: Any = 1.0, validate_args: bool | None = None
    ) -> None:
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df, validate_args=False)
        super().__init__(self.df.shape, (), validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        s = _size(batch_shape)
        return _expanded(
            self, df=self.df.expand(*s), loc=self.loc.expand(*s), scale=self.scale.expand(*s)
        )

    @property
    def mean(self) -> Tensor:
        return _fg().where(self.df <= 1, math.nan, self.loc)

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        fg = _fg()
        df = self.df
        safe = fg.where(df > 2, df, 3.0)  # keeps the unused branch's gradient finite
        finite = self.scale.pow(2) * safe / (safe - 2)
        return fg.where(df > 2, finite, fg.where(df > 1, math.inf, fg.full_like(df, math.nan)))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        fg = _fg()
        shape = self._extended_shape(sample_shape)
        x = fg.randn(*shape, dtype=self.df.dtype, device=self.df.device)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * (x * (z / self.df).rsqrt())

    def log_prob(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (
            self.scale.log()
            + 0.5 * self.df.log()
            + 0.5 * math.log(math.pi)
            + fg.lgamma(0.5 * self.df)
            - fg.lgamma(0.5 * (self.df + 1.0))
        )
        return -0.5 * (self.df + 1.0) * (y.pow(2) / self.df).log1p() - z

    def entropy(self) -> Tensor:
        fg = _fg()
        df = self.df
        lbeta = fg.lgamma(0.5 * df) + math.lgamma(0.5) - fg.lgamma(0.5 * (df + 1))
        return (
            self.scale.log()
            + 0.5 * (df + 1) * (fg.digamma(0.5 * (df + 1)) - fg.digamma(0.5 * df))
            + 0.5 * df.log()
            + lbeta
        )


class FisherSnedecor(Distribution):
    """``FisherSnedecor(df1, df2)``: the F distribution, the ratio of two scaled
    reparameterized chi-squared draws."""

    arg_constraints: ClassVar[dict] = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1: Any, df2: Any, validate_args: bool | None = None) -> None:
        self.df1, self.df2 = broadcast_all(df1, df2)
        super().__init__(self.df1.shape, (), validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        s = _size(batch_shape)
        return _expanded(self, df1=self.df1.expand(*s), df2=self.df2.expand(*s))

    @property
    def mean(self) -> Tensor:
        fg = _fg()
        safe = fg.where(self.df2 > 2, self.df2, 3.0)
        return fg.where(self.df2 > 2, safe / (safe - 2), math.nan)

    @property
    def mode(self) -> Tensor:
        fg = _fg()
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return fg.where(self.df1 <= 2, math.nan, mode)

    @property
    def variance(self) -> Tensor:
        fg = _fg()
        df1, df2 = self.df1, self.df2
        safe = fg.where(df2 > 4, df2, 5.0)
        v = 2 * safe.pow(2) * (df1 + safe - 2) / (df1 * (safe - 2).pow(2) * (safe - 4))
        return fg.where(df2 > 4, v, math.nan)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        tiny = _finfo(self.df1.dtype).tiny
        x1 = _gamma_rsample(self.df1 * 0.5, self.df1, shape)
        x2 = _gamma_rsample(self.df2 * 0.5, self.df2, shape).clamp(min=tiny)
        return (x1 / x2).clamp(min=tiny)

    def log_prob(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        ct1, ct2, ct3 = self.df1 * 0.5, self.df2 * 0.5, self.df1 / self.df2
        t1 = fg.lgamma(ct1 + ct2) - fg.lgamma(ct1) - fg.lgamma(ct2)
        t2 = ct1 * ct3.log() + (ct1 - 1) * value.log()
        t3 = (ct1 + ct2) * (ct3 * value).log1p()
        return t1 + t2 - t3


# ------------------------------------------------------------------- continuous, scalar


class Cauchy(Distribution):
    """``Cauchy(loc, scale)``: density ``1 / (pi scale (1 + ((x - loc) / scale)^2))`` (no
    mean: ``mean`` is NaN and ``variance`` infinite, as PyTorch's)."""

    arg_constraints: ClassVar[dict] = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, (), validate_args)

    @property
    def mean(self) -> Tensor:
        fg = _fg()
        return fg.full(
            self._extended_shape(), math.nan, dtype=self.loc.dtype, device=self.loc.device
        )

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        fg = _fg()
        return fg.full(
            self._extended_shape(), math.inf, dtype=self.loc.dtype, device=self.loc.device
        )

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        fg = _fg()
        shape = self._extended_shape(sample_shape)
        u = fg.rand(*shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (math.pi * (u - 0.5)).tan() * self.scale

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return (
            -math.log(math.pi) - self.scale.log() - ((value - self.loc) / self.scale).pow(2).log1p()
        )

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def icdf(self, value: Tensor) -> Tensor:
        return (math.pi * (value - 0.5)).tan() * self.scale + self.loc

    def entropy(self) -> Tensor:
        return math.log(4 * math.pi) + self.scale.log()


class HalfNormal(_Transformed):
    """``HalfNormal(scale)``: ``|X|`` for ``X ~ Normal(0, scale)``."""

    arg_constraints: ClassVar[dict] = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale: Any, validate_args: bool | None = None) -> None:
        super().__init__(Normal(0, scale, validate_args=False), [AbsTransform()], validate_args)

    @property
    def scale(self) -> Tensor:
        return self.base_dist.scale

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        return _expanded(self, scale=self.scale.expand(*_size(batch_shape)))

    @property
    def mean(self) -> Tensor:
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self) -> Tensor:
        return _fg().zeros_like(self.scale)

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2) * (1 - 2 / math.pi)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        lp = self.base_dist.log_prob(value) + math.log(2)
        return _fg().where(value >= 0, lp, -math.inf)

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, value: Tensor) -> Tensor:
        return self.base_dist.icdf((value + 1) / 2)

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() - math.log(2)


class HalfCauchy(_Transformed):
    """``HalfCauchy(scale)``: ``|X|`` for ``X ~ Cauchy(0, scale)``."""

    arg_constraints: ClassVar[dict] = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale: Any, validate_args: bool | None = None) -> None:
        super().__init__(Cauchy(0, scale, validate_args=False), [AbsTransform()], validate_args)

    @property
    def scale(self) -> Tensor:
        return self.base_dist.scale

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        return _expanded(self, scale=self.scale.expand(*_size(batch_shape)))

    @property
    def mean(self) -> Tensor:
        fg = _fg()
        s = self.scale
        return fg.full(self._extended_shape(), math.inf, dtype=s.dtype, device=s.device)

    @property
    def mode(self) -> Tensor:
        return _fg().zeros_like(self.scale)

    @property
    def variance(self) -> Tensor:
        return self.base_dist.variance

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        lp = self.base_dist.log_prob(value) + math.log(2)
        return _fg().where(value >= 0, lp, -math.inf)

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, value: Tensor) -> Tensor:
        return self.base_dist.icdf((value + 1) / 2)

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() - math.log(2)


class Gumbel(_Transformed):
    """``Gumbel(loc, scale)``: density ``exp(-(z + exp(-z))) / scale`` with ``z = (x - loc)
    / scale``; ``rsample`` is ``loc - scale * log(-log(U))``."""

    arg_constraints: ClassVar[dict] = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        fg = _fg()
        self.loc, self.scale = broadcast_all(loc, scale)
        fi = _finfo(self.loc.dtype)
        base = Uniform(
            fg.full_like(self.loc, fi.tiny), fg.full_like(self.loc, 1 - fi.eps), validate_args=False
        )
        transforms = [
            ExpTransform().inv,
            AffineTransform(loc=0, scale=-fg.ones_like(self.scale)),
            ExpTransform().inv,
            AffineTransform(loc=self.loc, scale=-self.scale),
        ]
        super().__init__(base, transforms, validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        s = _size(batch_shape)
        return _expanded(self, loc=self.loc.expand(*s), scale=self.scale.expand(*s))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return (-((self.loc - value) / self.scale).exp()).exp()

    def icdf(self, value: Tensor) -> Tensor:
        return self.loc - self.scale * (-value.log()).log()

    @property
    def mean(self) -> Tensor:
        return self.loc + self.scale * _EULER

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.pow(2)

    def entropy(self) -> Tensor:
        return self.scale.log() + (1 + _EULER)


class Weibull(_Transformed):
    """``Weibull(scale, concentration)``: cdf ``1 - exp(-(x / scale)^concentration)`` on
    ``x > 0``."""

    arg_constraints: ClassVar[dict] = {
        "scale": constraints.positive,
        "concentration": constraints.positive,
    }
    support = constraints.positive

    def __init__(self, scale: Any, concentration: Any, validate_args: bool | None = None) -> None:
        fg = _fg()
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base = Exponential(fg.ones_like(self.scale), validate_args=False)
        transforms = [
            PowerTransform(exponent=self.concentration_reciprocal),
            AffineTransform(loc=0, scale=self.scale),
        ]
        super().__init__(base, transforms, validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        s = _size(batch_shape)
        return _expanded(
            self, scale=self.scale.expand(*s), concentration=self.concentration.expand(*s)
        )

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        k = self.concentration
        z = value / self.scale
        return k.log() - self.scale.log() + (k - 1) * z.log() - z.pow(k)

    def cdf(self, value: Tensor) -> Tensor:
        z = (value / self.scale).pow(self.concentration)
        if self._validate_args:
            # checked where the exponential base is, as PyTorch's: 0 is in its support
            self.base_dist._validate_sample(z)
        return -(-z).expm1()

    def icdf(self, value: Tensor) -> Tensor:
        return self.scale * (-(-value).log1p()).pow(self.concentration_reciprocal)

    @property
    def mean(self) -> Tensor:
        return self.scale * _fg().lgamma(1 + self.concentration_reciprocal).exp()

    @property
    def mode(self) -> Tensor:
        k = self.concentration
        return self.scale * ((k - 1) / k).pow(k.reciprocal())

    @property
    def variance(self) -> Tensor:
        fg = _fg()
        r = self.concentration_reciprocal
        return self.scale.pow(2) * (fg.lgamma(1 + 2 * r).exp() - (2 * fg.lgamma(1 + r)).exp())

    def entropy(self) -> Tensor:
        r = self.concentration_reciprocal
        return _EULER * (1 - r) + (self.scale * r).log() + 1


class Pareto(_Transformed):
    """``Pareto(scale, alpha)``: density ``alpha scale^alpha / x^(alpha + 1)`` on ``x >=
    scale``."""

    arg_constraints: ClassVar[dict] = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale: Any, alpha: Any, validate_args: bool | None = None) -> None:
        self.scale, self.alpha = broadcast_all(scale, alpha)
        base = Exponential(self.alpha, validate_args=False)
        transforms = [ExpTransform(), AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base, transforms, validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        s = _size(batch_shape)
        return _expanded(self, scale=self.scale.expand(*s), alpha=self.alpha.expand(*s))

    @property
    def support(self) -> Any:
        return constraints.greater_than_eq(self.scale)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return self.alpha.log() - (self.alpha + 1) * (value / self.scale).log() - self.scale.log()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -(-self.alpha * (value / self.scale).log()).expm1()

    def icdf(self, value: Tensor) -> Tensor:
        return self.scale * (-(-value).log1p() / self.alpha).exp()

    @property
    def mean(self) -> Tensor:
        a = self.alpha.clamp(min=1)
        return a * self.scale / (a - 1)

    @property
    def mode(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        a = self.alpha.clamp(min=2)
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    def entropy(self) -> Tensor:
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())


class GeneralizedPareto(Distribution):
    """``GeneralizedPareto(loc, scale, concentration)``: survival function ``(1 +
    concentration z)^(-1 / concentration)`` with ``z = (x - loc) / scale`` (``exp(-z)`` at
    concentration 0); ``rsample`` is the inverse cdf of a uniform draw."""

    arg_constraints: ClassVar[dict] = {
        "loc": constraints.real,
        "scale": constraints.positive,
        "concentration": constraints.real,
    }
    has_rsample = True

    def __init__(
        self, loc: Any, scale: Any, concentration: Any, validate_args: bool | None = None
    ) -> None:
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        super().__init__(self.loc.shape, (), validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        s = _size(batch_shape)
        return _expanded(
            self,
            loc=self.loc.expand(*s),
            scale=self.scale.expand(*s),
            concentration=self.concentration.expand(*s),
        )

    @property
    def support(self) -> Any:
        fg = _fg()
        c = self.concentration
        safe = fg.where(c < 0, c, -1.0)
        upper = fg.where(c < 0, self.loc - self.scale / safe, math.inf)
        return constraints.interval(self.loc, upper)

    def _safe_concentration(self) -> tuple:
        fg = _fg()
        c = self.concentration
        eq_zero = c.abs() <= 1e-8  # torch.isclose(c, 0)
        return eq_zero, fg.where(eq_zero, fg.ones_like(c), c)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        fg = _fg()
        shape = self._extended_shape(sample_shape)
        return self.icdf(fg.rand(*shape, dtype=self.loc.dtype, device=self.loc.device))

    def log_prob(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        eq_zero, safe = self._safe_concentration()
        y = 1 / safe + fg.ones_like(z)
        nonzero = fg.where(y == 0, y, y * (safe * z).log1p())
        return -self.scale.log() - fg.where(eq_zero, z, nonzero)

    def log_survival_function(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        eq_zero, safe = self._safe_concentration()
        return fg.where(eq_zero, -z, -(safe * z).log1p() / safe)

    def log_cdf(self, value: Tensor) -> Tensor:
        return (-self.log_survival_function(value).exp()).log1p()

    def cdf(self, value: Tensor) -> Tensor:
        return self.log_cdf(value).exp()

    def icdf(self, value: Tensor) -> Tensor:
        fg = _fg()
        eq_zero, safe = self._safe_concentration()
        logu = (-value).log1p()
        nonzero = self.loc + self.scale / safe * (-safe * logu).expm1()
        return fg.where(eq_zero, self.loc - self.scale * logu, nonzero)

    @property
    def mean(self) -> Tensor:
        fg = _fg()
        c = self.concentration
        valid = c < 1
        safe = fg.where(valid, c, 0.5)
        return fg.where(valid, self.loc + self.scale / (1 - safe), math.nan)

    @property
    def variance(self) -> Tensor:
        fg = _fg()
        c = self.concentration
        valid = c < 0.5
        safe = fg.where(valid, c, 0.25)
        v = self.scale.pow(2) / ((1 - safe).pow(2) * (1 - 2 * safe))
        return fg.where(valid, v, math.nan)

    @property
    def mode(self) -> Tensor:
        return self.loc

    def entropy(self) -> Tensor:
        return (self.scale.log() + self.concentration + 1).expand(*self._batch_shape)


def _kumaraswamy_moments(a: Tensor, b: Tensor, n: int) -> Tensor:
    fg = _fg()
    arg1 = 1 + n / a
    return b * (fg.lgamma(arg1) + fg.lgamma(b) - fg.lgamma(arg1 + b)).exp()


class Kumaraswamy(_Transformed):
    """``Kumaraswamy(concentration1, concentration0)``: density ``a b x^(a-1) (1 -
    x^a)^(b-1)`` on ``[0, 1]`` (``a = concentration1``, ``b = concentration0``)."""

    arg_constraints: ClassVar[dict] = {
        "concentration1": constraints.positive,
        "concentration0": constraints.positive,
    }
    support = constraints.unit_interval
    has_rsample = True

    def __init__(
        self, concentration1: Any, concentration0: Any, validate_args: bool | None = None
    ) -> None:
        fg = _fg()
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        c0 = self.concentration0
        base = Uniform(fg.full_like(c0, 0), fg.full_like(c0, 1), validate_args=False)
        transforms = [
            PowerTransform(exponent=c0.reciprocal()),
            AffineTransform(loc=1.0, scale=-1.0),
            PowerTransform(exponent=self.concentration1.reciprocal()),
        ]
        super().__init__(base, transforms, validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        s = _size(batch_shape)
        return _expanded(
            self,
            concentration1=self.concentration1.expand(*s),
            concentration0=self.concentration0.expand(*s),
        )

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return a.log() + b.log() + (a - 1) * value.log() + (b - 1) * (-value.pow(a)).log1p()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return -(b * (-value.pow(a)).log1p()).expm1()

    def icdf(self, value: Tensor) -> Tensor:
        a, b = self.concentration1, self.concentration0
        return (-((-value).log1p() / b).expm1()).pow(a.reciprocal())

    @property
    def mean(self) -> Tensor:
        return _kumaraswamy_moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self) -> Tensor:
        fg = _fg()
        a, b = self.concentration1, self.concentration0
        log_mode = b.reciprocal() * (-b).log1p() - (-b * a).log1p()
        return fg.where((b < 1) | (a < 1), math.nan, log_mode).exp()

    @property
    def variance(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        return _kumaraswamy_moments(a, b, 2) - self.mean.pow(2)

    def entropy(self) -> Tensor:
        fg = _fg()
        a, b = self.concentration1, self.concentration0
        t1 = 1 - a.reciprocal()
        t0 = 1 - b.reciprocal()
        h0 = fg.digamma(b + 1) + _EULER
        return t0 + t1 * h0 - a.log() - b.log()


def _log_modified_bessel_fn(x: Tensor, order: int = 0) -> Tensor:
    """``log I_order(x)`` for ``order`` 0 or 1 by PyTorch's polynomial approximations
    (Abramowitz and Stegun 9.8.1-9.8.4)."""
    fg = _fg()
    small_coef, large_coef = _BESSEL_COEF[order]

    def poly(y: Tensor, coef: tuple) -> Tensor:
        result = coef[-1]
        for c in reversed(coef[:-1]):
            result = c + y * result
        return result

    y = (x / 3.75).pow(2)
    small = poly(y, small_coef)
    if order == 1:
        small = x.abs() * small
    small = small.log()
    large = x - 0.5 * x.log() + poly(3.75 / x, large_coef).log()
    return fg.where(x < 3.75, small, large)


_BESSEL_COEF = (
    (
        (1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.360768e-1, 0.45813e-2),
        (0.39894228, 0.1328592e-1, 0.225319e-2, -0.157565e-2, 0.916281e-2, -0.2057706e-1,
         0.2635537e-1, -0.1647633e-1, 0.392377e-2),
    ),
    (
        (0.5, 0.87890594, 0.51498869, 0.15084934, 0.2658733e-1, 0.301532e-2, 0.32411e-3),
        (0.39894228, -0.3988024e-1, -0.362018e-2, 0.163801e-2, -0.1031555e-1, 0.2282967e-1,
         -0.2895312e-1, 0.1787654e-1, -0.420059e-2),
    ),
)  # fmt: skip


class VonMises(Distribution):
    """``VonMises(loc, concentration)``: the circular normal distribution, density
    ``exp(concentration cos(x - loc)) / (2 pi I0(concentration))``; ``sample`` (no
    ``rsample``) draws by Best and Fisher's rejection sampler in float64 and returns
    angles in ``[-pi, pi)``."""

    arg_constraints: ClassVar[dict] = {
        "loc": constraints.real,
        "concentration": constraints.positive,
    }
    support = constraints.real

    def __init__(self, loc: Any, concentration: Any, validate_args: bool | None = None) -> None:
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, (), validate_args)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        lp = self.concentration * (value - self.loc).cos()
        return lp - math.log(2 * math.pi) - _log_modified_bessel_fn(self.concentration, 0)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        fg = _fg()
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            loc = self.loc.detach().to(fg.float64)
            kappa = self.concentration.detach().to(fg.float64)
            tau = 1 + (1 + 4 * kappa.pow(2)).sqrt()
            rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
            r = fg.where(kappa < 1e-5, 1 / kappa + kappa, (1 + rho.pow(2)) / (2 * rho))
            x = fg.zeros(*shape, dtype=fg.float64, device=loc.device)
            done = fg.zeros(*shape, dtype=fg.bool, device=loc.device)
            while not bool(done.all()):
                u = fg.rand(3, *shape, dtype=fg.float64, device=loc.device)
                u1, u2, u3 = u[0], u[1], u[2]
                z = (math.pi * u1).cos()
                f = (1 + r * z) / (r + z)
                c = kappa * (r - f)
                accept = ((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0)
                x = fg.where(accept, (u3 - 0.5).sign() * f.acos(), x)
                done = done | accept
            angle = (x + math.pi + loc) % (2 * math.pi) - math.pi
            return angle.to(self.loc.dtype)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        s = _size(batch_shape)
        return _expanded(self, loc=self.loc.expand(*s), concentration=self.concentration.expand(*s))

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        k = self.concentration
        return 1 - (_log_modified_bessel_fn(k, 1) - _log_modified_bessel_fn(k, 0)).exp()


# ---------------------------------------------------------------------------- continuous, (0, 1)


class ContinuousBernoulli(Distribution):
    """``ContinuousBernoulli(probs=None, logits=None, lims=(0.499, 0.501))``: density
    proportional to ``probs^x (1 - probs)^(1 - x)`` on ``[0, 1]`` (Loaiza-Ganem and
    Cunningham); near ``probs = 0.5`` (inside ``lims``) Taylor expansions keep it stable, as
    PyTorch's. ``rsample`` is the inverse cdf of a uniform draw. ``probs`` outside ``[0, 1]``
    raise whenever validation is on (PyTorch checks them only for an explicit
    ``validate_args``, and otherwise clamps them as both do)."""

    arg_constraints: ClassVar[dict] = {
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    support = constraints.unit_interval
    has_rsample = True

    def __init__(
        self,
        probs: Any = None,
        logits: Any = None,
        lims: tuple = (0.499, 0.501),
        validate_args: bool | None = None,
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        validate = self._validate_args if validate_args is None else validate_args
        if probs is not None:
            (p,) = broadcast_all(probs)
            if validate:
                _check_param(self, "probs", p, (p >= 0) & (p <= 1), "Interval(0.0, 1.0)")
            self.probs = clamp_probs(p)
            shape = self.probs.shape
        else:
            (self.logits,) = broadcast_all(logits)
            shape = self.logits.shape
        self._lims = lims
        super().__init__(shape, (), validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        s = _size(batch_shape)
        if "probs" in self.__dict__:
            return _expanded(self, probs=self.probs.expand(*s), lims=self._lims)
        return _expanded(self, logits=self.logits.expand(*s), lims=self._lims)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self) -> tuple:
        return tuple(self.batch_shape)

    def _outside_unstable_region(self) -> Tensor:
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self) -> Tensor:
        fg = _fg()
        return fg.where(self._outside_unstable_region(), self.probs, self._lims[0])

    def _cont_bern_log_norm(self) -> Tensor:
        """The log normalizing constant as a function of ``probs``."""
        fg = _fg()
        cut = self._cut_probs()
        below = fg.where(cut <= 0.5, cut, fg.zeros_like(cut))
        above = fg.where(cut >= 0.5, cut, fg.ones_like(cut))
        log_norm = ((-cut).log1p() - cut.log()).abs().log() - fg.where(
            cut <= 0.5, (-2.0 * below).log1p(), (2.0 * above - 1.0).log()
        )
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return fg.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self) -> Tensor:
        fg = _fg()
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / ((-cut).log1p() - cut.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return fg.where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    @property
    def variance(self) -> Tensor:
        fg = _fg()
        cut = self._cut_probs()
        vs = cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2) + 1.0 / ((-cut).log1p() - cut.log()).pow(
            2
        )
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return fg.where(self._outside_unstable_region(), vs, taylor)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        fg = _fg()
        shape = self._extended_shape(sample_shape)
        u = fg.rand(*shape, dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def log_prob(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        logits, value = fg.broadcast_tensors(self.logits, value.to(self.logits.dtype))
        bce = fg.nn.functional.binary_cross_entropy_with_logits(logits, value, reduction="none")
        return -bce + self._cont_bern_log_norm()

    def cdf(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = fg.where(self._outside_unstable_region(), cdfs, value)
        return fg.where(value <= 0.0, 0.0, fg.where(value >= 1.0, 1.0, unbounded))

    def icdf(self, value: Tensor) -> Tensor:
        fg = _fg()
        cut = self._cut_probs()
        inv = ((-cut + value * (2.0 * cut - 1.0)).log1p() - (-cut).log1p()) / (
            cut.log() - (-cut).log1p()
        )
        return fg.where(self._outside_unstable_region(), inv, value)

    def entropy(self) -> Tensor:
        log_probs0 = (-self.probs).log1p()
        log_probs1 = self.probs.log()
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0


# -------------------------------------------------------------------------------- relaxations


def _temperature(temperature: Any, like: Tensor) -> Tensor:
    """``temperature`` as a tensor (a number takes ``like``'s dtype)."""
    fg = _fg()
    if isinstance(temperature, Tensor):
        return temperature
    return fg.tensor(float(temperature), dtype=like.dtype, device=like.device)


class LogitRelaxedBernoulli(Distribution):
    """``LogitRelaxedBernoulli(temperature, probs=None, logits=None)``: the logit of a
    :class:`RelaxedBernoulli` draw (Maddison et al.'s binary Concrete in log space)."""

    arg_constraints: ClassVar[dict] = {
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    support = constraints.real

    def __init__(
        self,
        temperature: Any,
        probs: Any = None,
        logits: Any = None,
        validate_args: bool | None = None,
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            param = self.probs
        else:
            (self.logits,) = broadcast_all(logits)
            param = self.logits
        self.temperature = _temperature(temperature, param)
        self._param = param
        super().__init__(param.shape, (), validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        s = _size(batch_shape)
        if "probs" in self.__dict__:
            return _expanded(self, temperature=self.temperature, probs=self.probs.expand(*s))
        return _expanded(self, temperature=self.temperature, logits=self.logits.expand(*s))

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> tuple:
        return tuple(self._param.shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        fg = _fg()
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(*shape))
        u = clamp_probs(fg.rand(*shape, dtype=probs.dtype, device=probs.device))
        return (u.log() - (-u).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        logits, value = fg.broadcast_tensors(self.logits, value.to(self.logits.dtype))
        diff = logits - value * self.temperature
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class RelaxedBernoulli(_Transformed):
    """``RelaxedBernoulli(temperature, probs=None, logits=None)``: the binary Concrete /
    Gumbel-softmax relaxation of a Bernoulli on ``(0, 1)``: ``rsample`` is ``sigmoid((logit(U)
    + logits) / temperature)``."""

    arg_constraints: ClassVar[dict] = {
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    support = constraints.unit_interval
    has_rsample = True

    def __init__(
        self,
        temperature: Any,
        probs: Any = None,
        logits: Any = None,
        validate_args: bool | None = None,
    ) -> None:
        base = LogitRelaxedBernoulli(temperature, probs, logits, validate_args=False)
        super().__init__(base, [SigmoidTransform()], validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        new = self.base_dist.expand(batch_shape)
        p = {"probs": new.probs} if "probs" in new.__dict__ else {"logits": new.logits}
        return _expanded(self, temperature=self.temperature, **p)

    @property
    def temperature(self) -> Tensor:
        return self.base_dist.temperature

    @property
    def logits(self) -> Tensor:
        return self.base_dist.logits

    @property
    def probs(self) -> Tensor:
        return self.base_dist.probs


class ExpRelaxedCategorical(Distribution):
    """``ExpRelaxedCategorical(temperature, probs=None, logits=None)``: the log of a
    :class:`RelaxedOneHotCategorical` draw (the Concrete distribution in log space)."""

    arg_constraints: ClassVar[dict] = {
        "probs": constraints.simplex,
        "logits": constraints.real_vector,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(
        self,
        temperature: Any,
        probs: Any = None,
        logits: Any = None,
        validate_args: bool | None = None,
    ) -> None:
        self._categorical = Categorical(probs, logits, validate_args=False)
        self._given = "probs" if probs is not None else "logits"
        self.temperature = _temperature(temperature, self._categorical._param)
        param = self._categorical._param
        super().__init__(param.shape[:-1], param.shape[-1:], validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        s = _size(batch_shape)
        p = getattr(self._categorical, self._given).expand(*s, *self._event_shape)
        return _expanded(self, temperature=self.temperature, **{self._given: p})

    @property
    def param_shape(self) -> tuple:
        return self._categorical.param_shape

    @property
    def logits(self) -> Tensor:
        return self._categorical.logits

    @property
    def probs(self) -> Tensor:
        return self._categorical.probs

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        fg = _fg()
        shape = self._extended_shape(sample_shape)
        logits = self.logits
        u = clamp_probs(fg.rand(*shape, dtype=logits.dtype, device=logits.device))
        gumbels = -((-(u.log())).log())
        scores = (logits + gumbels) / self.temperature
        return scores - scores.logsumexp(-1, keepdim=True)

    def log_prob(self, value: Tensor) -> Tensor:
        fg = _fg()
        k = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = fg.broadcast_tensors(self.logits, value.to(self.logits.dtype))
        t = self.temperature
        log_scale = fg.lgamma(fg.full_like(t, float(k))) - t.log() * (-(k - 1))
        score = logits - value * t
        score = (score - score.logsumexp(-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(_Transformed):
    """``RelaxedOneHotCategorical(temperature, probs=None, logits=None)``: the Concrete /
    Gumbel-softmax relaxation of ``OneHotCategorical`` on the simplex: ``rsample`` is
    ``softmax((logits + Gumbel noise) / temperature)``."""

    arg_constraints: ClassVar[dict] = {
        "probs": constraints.simplex,
        "logits": constraints.real_vector,
    }
    support = constraints.simplex
    has_rsample = True

    def __init__(
        self,
        temperature: Any,
        probs: Any = None,
        logits: Any = None,
        validate_args: bool | None = None,
    ) -> None:
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args=False)
        super().__init__(base, [ExpTransform()], validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        base = self.base_dist
        s = _size(batch_shape)
        p = getattr(base._categorical, base._given).expand(*s, *self._event_shape)
        return _expanded(self, temperature=self.temperature, **{base._given: p})

    @property
    def temperature(self) -> Tensor:
        return self.base_dist.temperature

    @property
    def logits(self) -> Tensor:
        return self.base_dist.logits

    @property
    def probs(self) -> Tensor:
        return self.base_dist.probs


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """``OneHotCategoricalStraightThrough(probs=None, logits=None)``: a
    :class:`OneHotCategorical` whose ``rsample`` passes gradients straight through to
    ``probs`` (Bengio et al.'s estimator: the draw plus ``probs - probs.detach()``)."""

    has_rsample = True

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())


class LogisticNormal(_Transformed):
    """``LogisticNormal(loc, scale)``: a ``Normal(loc, scale)`` vector of length ``K`` mapped
    to the simplex of ``K + 1`` categories by :class:`StickBreakingTransform`."""

    arg_constraints: ClassVar[dict] = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        normal = Normal(loc, scale, validate_args=False)
        if not normal.batch_shape:
            normal = normal.expand([1])
        base = Independent(normal, 1, validate_args=False)
        k = base.event_shape[0]
        super().__init__(
            base, [StickBreakingTransform()], validate_args, base.batch_shape, (k + 1,)
        )

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        s = _size(batch_shape)
        k = self._event_shape[0] - 1
        return _expanded(self, loc=self.loc.expand(*s, k), scale=self.scale.expand(*s, k))

    @property
    def loc(self) -> Tensor:
        return self.base_dist.base_dist.loc

    @property
    def scale(self) -> Tensor:
        return self.base_dist.base_dist.scale


# ----------------------------------------------------------------------------------- counts


class _MultinomialSupport(constraints.Constraint):
    """Nonnegative vectors summing to at most ``upper_bound`` (PyTorch's
    ``constraints.multinomial``)."""

    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound: int) -> None:
        self.upper_bound = upper_bound

    def check(self, value: Any) -> Any:
        return (value >= 0).all(-1) & (value.sum(-1) <= self.upper_bound)

    def __repr__(self) -> str:
        return f"Multinomial(upper_bound={self.upper_bound})"


class Multinomial(Distribution):
    """``Multinomial(total_count=1, probs=None, logits=None)``: counts of ``total_count``
    draws from a :class:`Categorical` over the last dimension of ``probs`` / ``logits``
    (``total_count`` is one int, as PyTorch's)."""

    arg_constraints: ClassVar[dict] = {
        "probs": constraints.simplex,
        "logits": constraints.real_vector,
    }

    def __init__(
        self,
        total_count: int = 1,
        probs: Any = None,
        logits: Any = None,
        validate_args: bool | None = None,
    ) -> None:
        if isinstance(total_count, bool) or not isinstance(total_count, (int, np.integer)):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = int(total_count)
        self._categorical = Categorical(probs=probs, logits=logits, validate_args=False)
        self._given = "probs" if probs is not None else "logits"
        param = self._categorical._param
        super().__init__(param.shape[:-1], param.shape[-1:], validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        s = _size(batch_shape)
        p = getattr(self._categorical, self._given).expand(*s, *self._event_shape)
        return _expanded(self, total_count=self.total_count, **{self._given: p})

    @property
    def support(self) -> Any:
        return _MultinomialSupport(self.total_count)

    @property
    def logits(self) -> Tensor:
        return self._categorical.logits

    @property
    def probs(self) -> Tensor:
        return self._categorical.probs

    @property
    def param_shape(self) -> tuple:
        return self._categorical.param_shape

    @property
    def mean(self) -> Tensor:
        return self.probs * self.total_count

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        fg = _fg()
        sample_shape = _size(sample_shape)
        shape = self._extended_shape(sample_shape)
        with no_grad():
            idx = self._categorical.sample((self.total_count, *sample_shape))
            idx = idx.permute(*range(1, idx.dim()), 0)  # (*sample, *batch, total_count)
            counts = fg.zeros(*shape, dtype=self.probs.dtype, device=self.probs.device)
            if self.total_count == 0:
                return counts
            ones = fg.ones(*idx.shape, dtype=self.probs.dtype, device=self.probs.device)
            return fg.scatter_add(counts, -1, idx, ones)

    def log_prob(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        logits, value = fg.broadcast_tensors(self.logits, value.to(self.logits.dtype))
        log_factorial_n = fg.lgamma(value.sum(-1) + 1)
        log_factorial_xs = fg.lgamma(value + 1).sum(-1)
        logits = fg.where((value == 0) & (logits == -math.inf), 0.0, logits)
        log_powers = (logits * value).sum(-1)
        return log_factorial_n - log_factorial_xs + log_powers

    def entropy(self) -> Tensor:
        fg = _fg()
        probs = self.probs
        n = fg.tensor(float(self.total_count), dtype=probs.dtype, device=probs.device)
        term1 = n * self._categorical.entropy() - fg.lgamma(n + 1)
        if self.total_count == 0:
            return term1
        binomial = Binomial(self.total_count, probs=probs, validate_args=False)
        support = fg.arange(1, self.total_count + 1, dtype=probs.dtype, device=probs.device)
        support = support.reshape(-1, *([1] * probs.dim()))
        binomial_probs = binomial.log_prob(support).exp()
        weights = fg.lgamma(support + 1)
        return term1 + (binomial_probs * weights).sum((0, -1))


class NegativeBinomial(Distribution):
    """``NegativeBinomial(total_count, probs=None, logits=None)``: the number of successes
    (each with probability ``probs``) before ``total_count`` failures; ``sample`` draws a
    gamma-Poisson mixture with the host generator."""

    arg_constraints: ClassVar[dict] = {
        "total_count": constraints.greater_than_eq(0),
        "probs": constraints.half_open_interval(0.0, 1.0),
        "logits": constraints.real,
    }
    support = constraints.nonnegative_integer

    def __init__(
        self,
        total_count: Any,
        probs: Any = None,
        logits: Any = None,
        validate_args: bool | None = None,
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.to(self.probs.dtype)
            param = self.probs
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.to(self.logits.dtype)
            param = self.logits
        self._param = param
        super().__init__(param.shape, (), validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        s = _size(batch_shape)
        name = "probs" if "probs" in self.__dict__ else "logits"
        p = {name: getattr(self, name).expand(*s)}
        return _expanded(self, total_count=self.total_count.expand(*s), **p)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> tuple:
        return tuple(self._param.shape)

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.logits.exp()

    @property
    def mode(self) -> Tensor:
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self) -> Tensor:
        return self.mean / (-self.logits).sigmoid()

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        n = np.broadcast_to(_host(self.total_count), shape)
        scale = np.broadcast_to(np.exp(_host(self.logits)), shape)
        tiny = _finfo(self._param.dtype).tiny

        def draw(g: Any) -> np.ndarray:
            rate = np.maximum(g.standard_gamma(n) * scale, tiny)
            return g.poisson(rate)

        return _numpy_draw(self._param.device, draw, self._param.dtype)

    def log_prob(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        logsigmoid = fg.nn.functional.logsigmoid
        n, value = self.total_count, value.to(self.total_count.dtype)
        log_unnormalized = n * logsigmoid(-self.logits) + value * logsigmoid(self.logits)
        log_normalization = -fg.lgamma(n + value) + fg.lgamma(1.0 + value) + fg.lgamma(n)
        log_normalization = fg.where(n + value == 0.0, 0.0, log_normalization)
        return log_unnormalized - log_normalization


# ---------------------------------------------------------------------------------- vectors


def _batch_mv(m: Tensor, v: Tensor) -> Tensor:
    return (m @ v.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(lo: Tensor, x: Tensor) -> Tensor:
    """``x^T (L L^T)^-1 x`` for a batch of lower-triangular ``L`` and vectors ``x``."""
    fg = _fg()
    n = x.shape[-1]
    shape = fg.broadcast_shapes(lo.shape[:-2], x.shape[:-1])
    lo_b = lo.expand(*shape, n, n)
    x_b = x.expand(*shape, n).unsqueeze(-1)
    return fg.linalg.solve_triangular(lo_b, x_b, upper=False).squeeze(-1).pow(2).sum(-1)


def _batch_trace_xxt(m: Tensor) -> Tensor:
    return m.pow(2).sum((-2, -1))


def _batch_capacitance_tril(w: Tensor, d: Tensor) -> Tensor:
    """The Cholesky factor of ``I + W^T D^-1 W``."""
    fg = _fg()
    m = w.shape[-1]
    k = (w.mT / d.unsqueeze(-2)) @ w
    return fg.linalg.cholesky(k + fg.eye(m, dtype=w.dtype, device=w.device))


def _batch_lowrank_logdet(w: Tensor, d: Tensor, capacitance_tril: Tensor) -> Tensor:
    """``log det(W W^T + D)`` by the matrix determinant lemma."""
    return 2 * capacitance_tril.diagonal(0, -2, -1).log().sum(-1) + d.log().sum(-1)


def _batch_lowrank_mahalanobis(w: Tensor, d: Tensor, x: Tensor, capacitance_tril: Tensor):
    """``x^T (W W^T + D)^-1 x`` by the Woodbury identity."""
    wt_dinv = w.mT / d.unsqueeze(-2)
    wt_dinv_x = _batch_mv(wt_dinv, x)
    term1 = (x.pow(2) / d).sum(-1)
    term2 = _batch_mahalanobis(capacitance_tril, wt_dinv_x)
    return term1 - term2


class LowRankMultivariateNormal(Distribution):
    """``LowRankMultivariateNormal(loc, cov_factor, cov_diag)``: the Gaussian with
    covariance ``cov_factor @ cov_factor.mT + diag(cov_diag)``; ``log_prob`` and ``entropy``
    use the small capacitance matrix ``I + W^T D^-1 W`` (Woodbury identity, determinant
    lemma), as PyTorch's."""

    arg_constraints: ClassVar[dict] = {
        "loc": constraints.real_vector,
        "cov_factor": constraints.independent(constraints.real, 2),
        "cov_diag": constraints.independent(constraints.positive, 1),
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(
        self,
        loc: Tensor,
        cov_factor: Tensor,
        cov_diag: Tensor,
        validate_args: bool | None = None,
    ) -> None:
        fg = _fg()
        if not isinstance(loc, Tensor) or loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = tuple(loc.shape[-1:])
        if not isinstance(cov_factor, Tensor) or cov_factor.dim() < 2:
            raise ValueError(
                "cov_factor must be at least two-dimensional, with optional leading batch "
                "dimensions"
            )
        if tuple(cov_factor.shape[-2:-1]) != event_shape:
            raise ValueError(
                f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m"
            )
        if not isinstance(cov_diag, Tensor) or tuple(cov_diag.shape[-1:]) != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}")
        try:
            loc_, self.cov_factor, cov_diag_ = fg.broadcast_tensors(
                loc.unsqueeze(-1), cov_factor, cov_diag.unsqueeze(-1)
            )
        except Exception as e:
            raise ValueError(
                f"Incompatible batch shapes: loc {tuple(loc.shape)}, cov_factor "
                f"{tuple(cov_factor.shape)}, cov_diag {tuple(cov_diag.shape)}"
            ) from e
        self.loc = loc_[..., 0]
        self.cov_diag = cov_diag_[..., 0]
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        super().__init__(self.loc.shape[:-1], event_shape, validate_args)
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        s = tuple(_size(batch_shape)) + tuple(self._event_shape)
        return _expanded(
            self,
            loc=self.loc.expand(*s),
            cov_factor=self.cov_factor.expand(*s, self.cov_factor.shape[-1]),
            cov_diag=self.cov_diag.expand(*s),
        )

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @lazy_property
    def variance(self) -> Tensor:
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        return (w.pow(2).sum(-1) + d).expand(*self._batch_shape, *self._event_shape)

    @lazy_property
    def scale_tril(self) -> Tensor:
        fg = _fg()
        n = self._event_shape[0]
        d_sqrt = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        dinvsqrt_w = self._unbroadcasted_cov_factor / d_sqrt
        k = dinvsqrt_w @ dinvsqrt_w.mT + fg.eye(n, dtype=d_sqrt.dtype, device=d_sqrt.device)
        return (d_sqrt * fg.linalg.cholesky(k)).expand(*self._batch_shape, n, n)

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        fg = _fg()
        n = self._event_shape[0]
        w = self._unbroadcasted_cov_factor
        cov = w @ w.mT + fg.diag_embed(self._unbroadcasted_cov_diag)
        return cov.expand(*self._batch_shape, n, n)

    @lazy_property
    def precision_matrix(self) -> Tensor:
        fg = _fg()
        n = self._event_shape[0]
        d = self._unbroadcasted_cov_diag
        wt_dinv = self._unbroadcasted_cov_factor.mT / d.unsqueeze(-2)
        a = fg.linalg.solve_triangular(self._capacitance_tril, wt_dinv, upper=False)
        precision = fg.diag_embed(d.reciprocal()) - a.mT @ a
        return precision.expand(*self._batch_shape, n, n)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        fg = _fg()
        shape = tuple(self._extended_shape(sample_shape))
        w_shape = (*shape[:-1], self.cov_factor.shape[-1])
        eps_w = fg.randn(*w_shape, dtype=self.loc.dtype, device=self.loc.device)
        eps_d = fg.randn(*shape, dtype=self.loc.dtype, device=self.loc.device)
        return (
            self.loc
            + _batch_mv(self._unbroadcasted_cov_factor, eps_w)
            + self._unbroadcasted_cov_diag.sqrt() * eps_d
        )

    def _logdet(self) -> Tensor:
        return _batch_lowrank_logdet(
            self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag, self._capacitance_tril
        )

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        m = _batch_lowrank_mahalanobis(
            self._unbroadcasted_cov_factor,
            self._unbroadcasted_cov_diag,
            value - self.loc,
            self._capacitance_tril,
        )
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + self._logdet() + m)

    def entropy(self) -> Tensor:
        h = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._logdet())
        if len(self._batch_shape) == 0:
            return h
        return h.expand(*self._batch_shape)


class _MixtureSupport(constraints.Constraint):
    """A value is in a mixture's support when it is in every component's (PyTorch's
    ``MixtureSameFamilyConstraint``)."""

    def __init__(self, base: constraints.Constraint) -> None:
        self.base_constraint = base
        self.is_discrete = base.is_discrete
        self.event_dim = base.event_dim

    def check(self, value: Any) -> Any:
        result = self.base_constraint.check(value.unsqueeze(-1 - self.event_dim))
        keep = value.dim() - self.event_dim
        return result.reshape(*result.shape[:keep], -1).all(-1)

    def __repr__(self) -> str:
        return f"MixtureSameFamilyConstraint({self.base_constraint!r})"


class MixtureSameFamily(Distribution):
    """``MixtureSameFamily(mixture_distribution, component_distribution)``: a mixture of
    the components indexed by the rightmost batch dimension of ``component_distribution``
    (``k`` of them), weighted by the ``Categorical`` ``mixture_distribution``. ``log_prob``
    is a logsumexp over the components; ``sample`` (no ``rsample``) picks each draw's
    component; ``cdf`` where the components have one."""

    arg_constraints: ClassVar[dict] = {}
    has_rsample = False

    def __init__(
        self,
        mixture_distribution: Categorical,
        component_distribution: Distribution,
        validate_args: bool | None = None,
    ) -> None:
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(  # noqa: TRY004  (PyTorch's exception type)
                " The Mixture distribution needs to be an  instance of "
                "ferrograd.distributions.Categorical"
            )
        if not isinstance(component_distribution, Distribution):
            raise ValueError(  # noqa: TRY004  (PyTorch's exception type)
                "The Component distribution needs to be an instance of "
                "ferrograd.distributions.Distribution"
            )
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        mdbs = tuple(mixture_distribution.batch_shape)
        cdbs = tuple(component_distribution.batch_shape)[:-1]
        for size1, size2 in zip(reversed(mdbs), reversed(cdbs)):
            if size1 != 1 and size2 != 1 and size1 != size2:
                raise ValueError(
                    f"`mixture_distribution.batch_shape` ({mdbs}) is not compatible with "
                    f"`component_distribution.batch_shape`({cdbs})"
                )
        if not component_distribution.batch_shape:
            raise ValueError("`component_distribution` needs a batch dimension of components")
        km = mixture_distribution.logits.shape[-1]
        kc = component_distribution.batch_shape[-1]
        if km != kc:
            raise ValueError(
                f"`mixture_distribution component` ({km}) does not equal "
                f"`component_distribution.batch_shape[-1]` ({kc})"
            )
        self._num_component = km
        event_shape = component_distribution.event_shape
        self._event_ndims = len(event_shape)
        super().__init__(cdbs, event_shape, validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        s = tuple(_size(batch_shape))
        mix = self._mixture_distribution
        new_mix = Categorical(
            logits=mix.logits.expand(*s, self._num_component), validate_args=False
        )
        comp = self._component_distribution.expand((*s, self._num_component))
        return _expanded(self, mixture_distribution=new_mix, component_distribution=comp)

    @property
    def support(self) -> Any:
        base = self._component_distribution.support
        if isinstance(base, constraints._Dependent):
            return base
        return _MixtureSupport(base)

    @property
    def mixture_distribution(self) -> Categorical:
        return self._mixture_distribution

    @property
    def component_distribution(self) -> Distribution:
        return self._component_distribution

    def _pad(self, x: Tensor) -> Tensor:
        return x.unsqueeze(-1 - self._event_ndims)

    def _pad_mixture_dimensions(self, x: Tensor) -> Tensor:
        dist_batch_ndims = len(self.batch_shape)
        cat_batch_ndims = len(self.mixture_distribution.batch_shape)
        pad_ndims = 0 if cat_batch_ndims == 1 else dist_batch_ndims - cat_batch_ndims
        xs = tuple(x.shape)
        return x.reshape(*xs[:-1], *([1] * pad_ndims), xs[-1], *([1] * self._event_ndims))

    @property
    def mean(self) -> Tensor:
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        return (probs * self.component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self) -> Tensor:
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        dim = -1 - self._event_ndims
        mean_cond_var = (probs * self.component_distribution.variance).sum(dim)
        deviation = self.component_distribution.mean - self._pad(self.mean)
        var_cond_mean = (probs * deviation.pow(2)).sum(dim)
        return mean_cond_var + var_cond_mean

    def cdf(self, value: Tensor) -> Tensor:
        cdf_x = self.component_distribution.cdf(self._pad(value))
        return (cdf_x * self.mixture_distribution.probs).sum(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        log_prob_x = self.component_distribution.log_prob(self._pad(value))  # [S, B, k]
        log_mix_prob = fg.log_softmax(self.mixture_distribution.logits, -1)  # [B, k]
        return (log_prob_x + log_mix_prob).logsumexp(-1)  # [S, B]

    def sample(self, sample_shape: Any = ()) -> Tensor:
        sample_shape = tuple(_size(sample_shape))
        batch = tuple(self.batch_shape)
        es = tuple(self.event_shape)
        with no_grad():
            mix = self.mixture_distribution
            if tuple(mix.batch_shape) != batch:
                k = self._num_component
                mix = Categorical(probs=mix.probs.expand(*batch, k), validate_args=False)
            mix_sample = mix.sample(sample_shape)  # [S, B]
            comp_samples = self.component_distribution.sample(sample_shape)  # [S, B, k, E]
            gather_dim = len(sample_shape) + len(batch)
            idx = mix_sample.reshape(*mix_sample.shape, 1, *([1] * len(es)))
            idx = idx.expand(*mix_sample.shape, 1, *es)
            return comp_samples.gather(gather_dim, idx).squeeze(gather_dim)

    def __repr__(self) -> str:
        return (
            f"MixtureSameFamily(\n  {self.mixture_distribution!r},\n"
            f"  {self.component_distribution!r})"
        )
