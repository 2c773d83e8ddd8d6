"""The distributions, with PyTorch's parameters, formulas and shapes."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from .._core import Tensor
from ..autodiff import no_grad
from ..nn._errors import IndexRuntimeError
from . import constraints
from .distribution import (
    _LOG_SQRT_2PI,
    Distribution,
    _fg,
    _finfo,
    _size,
    _sum_rightmost,
    broadcast_all,
    lazy_property,
    logits_to_probs,
    probs_to_logits,
)

__all__ = [
    "Bernoulli",
    "Beta",
    "Binomial",
    "Categorical",
    "Dirichlet",
    "Exponential",
    "Gamma",
    "Geometric",
    "Independent",
    "Laplace",
    "LogNormal",
    "MultivariateNormal",
    "Normal",
    "OneHotCategorical",
    "Poisson",
    "Uniform",
]


def _numpy_draw(device: Any, draw: Any, dtype: Any) -> Tensor:
    """Numbers drawn by ``draw(rng)`` from the device's seeded stream (no gradient)."""
    from .. import _core
    from .._ops import _from_numpy
    from ..random import _numpy_rng

    if _core._tracing():
        raise _core.TraceError(
            "this distribution's sample() draws with the host generator, which cannot run "
            "inside fg.trace; sample outside the traced step"
        )
    return _from_numpy(np.asarray(draw(_numpy_rng(device))), dtype.name, device)


def _host(t: Tensor) -> np.ndarray:
    return t.detach().numpy().astype(np.float64)


# ----------------------------------------------------------------------- continuous, scalar


class Normal(Distribution):
    """``Normal(loc, scale)``: the Gaussian with mean ``loc`` and standard deviation
    ``scale``."""

    arg_constraints: ClassVar[dict] = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, (), validate_args)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        fg = _fg()
        shape = self._extended_shape(sample_shape)
        eps = fg.randn(*shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale.pow(2)
        return -((value - self.loc).pow(2)) / (2 * var) - self.scale.log() - _LOG_SQRT_2PI

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        fg = _fg()
        return 0.5 * (1 + fg.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value: Tensor) -> Tensor:
        fg = _fg()
        return self.loc + self.scale * fg.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self) -> Tensor:
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()


class LogNormal(Distribution):
    """``LogNormal(loc, scale)``: ``exp`` of a ``Normal(loc, scale)`` variable."""

    arg_constraints: ClassVar[dict] = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        self.base_dist = Normal(self.loc, self.scale, validate_args=False)
        super().__init__(self.loc.shape, (), validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        new = super().expand(batch_shape, _instance)
        new.base_dist = self.base_dist.expand(batch_shape)
        return new

    @property
    def mean(self) -> Tensor:
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self) -> Tensor:
        return (self.loc - self.scale.pow(2)).exp()

    @property
    def variance(self) -> Tensor:
        s2 = self.scale.pow(2)
        return s2.expm1() * (2 * self.loc + s2).exp()

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        return self.base_dist.rsample(sample_shape).exp()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        y = value.log()
        return self.base_dist.log_prob(y) - y

    def cdf(self, value: Tensor) -> Tensor:
        return self.base_dist.cdf(value.log())

    def icdf(self, value: Tensor) -> Tensor:
        return self.base_dist.icdf(value).exp()

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() + self.loc


class Uniform(Distribution):
    """``Uniform(low, high)``: uniform on ``[low, high)``."""

    arg_constraints: ClassVar[dict] = {"low": constraints.dependent, "high": constraints.dependent}
    has_rsample = True

    def __init__(self, low: Any, high: Any, validate_args: bool | None = None) -> None:
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self.low.shape, (), validate_args)
        if self._validate_args:
            from .distribution import _reading_allowed

            if _reading_allowed() and not bool((self.low < self.high).all()):
                raise ValueError(
                    f"Expected parameter low ({type(self.low).__name__} of shape "
                    f"{tuple(self.low.shape)}) of distribution {self!r} to satisfy the "
                    f"constraint LessThan(upper_bound=high), but found invalid values:\n"
                    f"{self.low}"
                )

    @property
    def support(self) -> Any:
        return constraints.interval(self.low, self.high)

    @property
    def mean(self) -> Tensor:
        return (self.high + self.low) / 2

    @property
    def mode(self) -> Tensor:
        return self.high * float("nan")

    @property
    def stddev(self) -> Tensor:
        return (self.high - self.low) / 12**0.5

    @property
    def variance(self) -> Tensor:
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        fg = _fg()
        shape = self._extended_shape(sample_shape)
        u = fg.rand(*shape, dtype=self.low.dtype, device=self.low.device)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        lb = self.low.le(value).to(self.low.dtype)
        ub = self.high.gt(value).to(self.low.dtype)
        return (lb * ub).log() - (self.high - self.low).log()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value: Tensor) -> Tensor:
        return value * (self.high - self.low) + self.low

    def entropy(self) -> Tensor:
        return (self.high - self.low).log()


class Exponential(Distribution):
    """``Exponential(rate)``: density ``rate * exp(-rate * x)`` on ``x >= 0``."""

    arg_constraints: ClassVar[dict] = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate: Any, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.shape, (), validate_args)

    @property
    def mean(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def mode(self) -> Tensor:
        return self.rate * 0

    @property
    def stddev(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def variance(self) -> Tensor:
        return self.rate.pow(-2)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        fg = _fg()
        shape = self._extended_shape(sample_shape)
        u = fg.rand(*shape, dtype=self.rate.dtype, device=self.rate.device)
        return -(-u).log1p() / self.rate

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value: Tensor) -> Tensor:
        return -(-value).log1p() / self.rate

    def entropy(self) -> Tensor:
        return 1.0 - self.rate.log()


class Laplace(Distribution):
    """``Laplace(loc, scale)``: density ``exp(-|x - loc| / scale) / (2 scale)``."""

    arg_constraints: ClassVar[dict] = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, (), validate_args)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return 2**0.5 * self.scale

    @property
    def variance(self) -> Tensor:
        return 2 * self.scale.pow(2)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        fg = _fg()
        shape = self._extended_shape(sample_shape)
        eps = _finfo(self.loc.dtype).eps
        u = fg.rand(*shape, dtype=self.loc.dtype, device=self.loc.device) * (2 - eps) + (eps - 1)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = value - self.loc
        return 0.5 - 0.5 * z.sign() * (-z.abs() / self.scale).expm1()

    def icdf(self, value: Tensor) -> Tensor:
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self) -> Tensor:
        return 1 + (2 * self.scale).log()


class Gamma(Distribution):
    """``Gamma(concentration, rate)``. ``sample`` draws with the host generator (no
    ``rsample``: reparameterized gamma draws are not implemented)."""

    arg_constraints: ClassVar[dict] = {
        "concentration": constraints.positive,
        "rate": constraints.positive,
    }
    support = constraints.nonnegative

    def __init__(self, concentration: Any, rate: Any, validate_args: bool | None = None) -> None:
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(self.concentration.shape, (), validate_args)

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.rate

    @property
    def mode(self) -> Tensor:
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self) -> Tensor:
        return self.concentration / self.rate.pow(2)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        a = np.broadcast_to(_host(self.concentration), shape)
        r = np.broadcast_to(_host(self.rate), shape)
        tiny = _finfo(self.rate.dtype).tiny
        return _numpy_draw(
            self.rate.device,
            lambda g: np.maximum(g.standard_gamma(a) / r, tiny),
            self.rate.dtype,
        )

    def log_prob(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        a, r = self.concentration, self.rate
        return fg.special.xlogy(a, r) + fg.special.xlogy(a - 1, value) - r * value - fg.lgamma(a)

    def entropy(self) -> Tensor:
        fg = _fg()
        a = self.concentration
        return a - self.rate.log() + fg.lgamma(a) + (1.0 - a) * fg.digamma(a)


class Beta(Distribution):
    """``Beta(concentration1, concentration0)`` on ``[0, 1]`` (``sample`` only)."""

    arg_constraints: ClassVar[dict] = {
        "concentration1": constraints.positive,
        "concentration0": constraints.positive,
    }
    support = constraints.unit_interval

    def __init__(self, concentration1: Any, concentration0: Any, validate_args: bool | None = None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        super().__init__(self.concentration1.shape, (), validate_args)

    @property
    def mean(self) -> Tensor:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self) -> Tensor:
        fg = _fg()
        return _dirichlet_mode(fg.stack([self.concentration1, self.concentration0], -1))[..., 0]

    @property
    def variance(self) -> Tensor:
        t = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (t.pow(2) * (t + 1))

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        a = np.broadcast_to(_host(self.concentration1), shape)
        b = np.broadcast_to(_host(self.concentration0), shape)
        return _numpy_draw(
            self.concentration1.device, lambda g: g.beta(a, b), self.concentration1.dtype
        )

    def log_prob(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return (
            fg.special.xlogy(a - 1, value)
            + fg.special.xlogy(b - 1, 1 - value)
            + fg.lgamma(a + b)
            - fg.lgamma(a)
            - fg.lgamma(b)
        )

    def entropy(self) -> Tensor:
        fg = _fg()
        a, b = self.concentration1, self.concentration0
        t = a + b
        return (
            fg.lgamma(a)
            + fg.lgamma(b)
            - fg.lgamma(t)
            - (a - 1) * fg.digamma(a)
            - (b - 1) * fg.digamma(b)
            + (t - 2) * fg.digamma(t)
        )


def _dirichlet_mode(c: Tensor) -> Tensor:
    """The mode of a Dirichlet (PyTorch's convention: where every concentration is below 1,
    the vertex of the largest one)."""
    fg = _fg()
    m1 = (c - 1).clamp(min=0.0)
    mode = m1 / m1.sum(-1, keepdim=True)
    below = (c < 1).all(-1, keepdim=True)
    vertex = fg.nn.functional.one_hot(mode.argmax(-1), c.shape[-1]).to(c.dtype)
    return fg.where(below, vertex, mode)


class Dirichlet(Distribution):
    """``Dirichlet(concentration)`` over the simplex of the last dimension (``sample``
    only)."""

    arg_constraints: ClassVar[dict] = {
        "concentration": constraints.independent(constraints.positive, 1)
    }
    support = constraints.simplex

    def __init__(self, concentration: Tensor, validate_args: bool | None = None) -> None:
        if not isinstance(concentration, Tensor) or concentration.dim() < 1:
            raise ValueError("Dirichlet: concentration must be at least one-dimensional")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args)

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self) -> Tensor:
        return _dirichlet_mode(self.concentration)

    @property
    def variance(self) -> Tensor:
        c0 = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (c0 - self.concentration) / (c0.pow(2) * (c0 + 1))

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        a = np.broadcast_to(_host(self.concentration), shape)

        def draw(g: Any) -> np.ndarray:
            x = g.standard_gamma(a)
            return x / x.sum(-1, keepdims=True)

        return _numpy_draw(self.concentration.device, draw, self.concentration.dtype)

    def log_prob(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return (
            fg.special.xlogy(c - 1.0, value).sum(-1) + fg.lgamma(c.sum(-1)) - fg.lgamma(c).sum(-1)
        )

    def entropy(self) -> Tensor:
        fg = _fg()
        c = self.concentration
        k = c.shape[-1]
        a0 = c.sum(-1)
        return (
            fg.lgamma(c).sum(-1)
            - fg.lgamma(a0)
            - (k - a0) * fg.digamma(a0)
            - ((c - 1.0) * fg.digamma(c)).sum(-1)
        )


# ------------------------------------------------------------------------------- discrete


class Bernoulli(Distribution):
    """``Bernoulli(probs=None, logits=None)``: 1 with probability ``probs`` (or
    ``sigmoid(logits)``), else 0."""

    arg_constraints: ClassVar[dict] = {
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(
        self, probs: Any = None, logits: Any = None, validate_args: bool | None = None
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            shape = self.probs.shape
        else:
            (self.logits,) = broadcast_all(logits)
            shape = self.logits.shape
        super().__init__(shape, (), validate_args)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> tuple:
        return tuple(self.batch_shape)

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def mode(self) -> Tensor:
        fg = _fg()
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return fg.where(self.probs == 0.5, float("nan"), mode)

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        fg = _fg()
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return fg.bernoulli(self.probs.detach().expand(*shape))

    def log_prob(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        logits, value = fg.broadcast_tensors(self.logits, value.to(self.logits.dtype))
        return -fg.nn.functional.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self) -> Tensor:
        fg = _fg()
        return fg.nn.functional.binary_cross_entropy_with_logits(
            self.logits, self.probs, reduction="none"
        )

    def enumerate_support(self, expand: bool = True) -> Tensor:
        fg = _fg()
        values = fg.arange(2, dtype=self.probs.dtype, device=self.probs.device)
        values = values.reshape(2, *([1] * len(self._batch_shape)))
        if expand:
            values = values.expand(2, *self._batch_shape)
        return values


class Geometric(Distribution):
    """``Geometric(probs=None, logits=None)``: the number of failures before the first
    success."""

    arg_constraints: ClassVar[dict] = {
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    support = constraints.nonnegative_integer

    def __init__(
        self, probs: Any = None, logits: Any = None, validate_args: bool | None = None
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        p = self.probs if probs is not None else self.logits
        super().__init__(p.shape, (), validate_args)
        if probs is not None and self._validate_args:
            from .distribution import _reading_allowed

            if _reading_allowed() and not bool((self.probs > 0).all()):
                raise ValueError(
                    f"Expected parameter probs ({type(self.probs).__name__} of shape "
                    f"{tuple(self.probs.shape)}) of distribution {self!r} to be positive "
                    f"but found invalid values:\n{self.probs}"
                )

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def mean(self) -> Tensor:
        return 1.0 / self.probs - 1.0

    @property
    def mode(self) -> Tensor:
        return self.probs * 0

    @property
    def variance(self) -> Tensor:
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape: Any = ()) -> Tensor:
        fg = _fg()
        shape = self._extended_shape(sample_shape)
        tiny = _finfo(self.probs.dtype).tiny
        with no_grad():
            u = fg.rand(*shape, dtype=self.probs.dtype, device=self.probs.device).clamp(min=tiny)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        value, probs = fg.broadcast_tensors(value.to(self.probs.dtype), self.probs)
        probs = fg.where((probs == 1) & (value == 0), 0.0, probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self) -> Tensor:
        fg = _fg()
        return (
            fg.nn.functional.binary_cross_entropy_with_logits(
                self.logits, self.probs, reduction="none"
            )
            / self.probs
        )


class Categorical(Distribution):
    """``Categorical(probs=None, logits=None)``: an index in ``0..K-1`` drawn with the
    (unnormalized) probabilities ``probs`` or log-probabilities ``logits`` of the last
    dimension."""

    arg_constraints: ClassVar[dict] = {
        "probs": constraints.simplex,
        "logits": constraints.independent(constraints.real, 1),
    }
    has_enumerate_support = True

    def __init__(
        self, probs: Any = None, logits: Any = None, validate_args: bool | None = None
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if not isinstance(probs, Tensor) or probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            param = self.probs
        else:
            if not isinstance(logits, Tensor) or logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
            param = self.logits
        self._param = param
        self._num_events = param.shape[-1]
        super().__init__(param.shape[:-1], (), validate_args)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits)

    @property
    def param_shape(self) -> tuple:
        return tuple(self._param.shape)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        new = super().expand(batch_shape, _instance)
        param = new.__dict__.get("probs", new.__dict__.get("logits"))
        new._param = param
        return new

    @property
    def support(self) -> Any:
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def mean(self) -> Tensor:
        fg = _fg()
        return fg.full(
            self._extended_shape(), float("nan"), dtype=self._param.dtype, device=self._param.device
        )

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(-1)

    @property
    def variance(self) -> Tensor:
        return self.mean

    def sample(self, sample_shape: Any = ()) -> Tensor:
        fg = _fg()
        sample_shape = _size(sample_shape)
        n = math.prod(sample_shape) if sample_shape else 1
        with no_grad():
            probs_2d = self.probs.detach().reshape(-1, self._num_events)
            samples_2d = fg.multinomial(probs_2d, n, True).T
            return samples_2d.reshape(*self._extended_shape(sample_shape))

    def log_prob(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = fg.broadcast_tensors(value, self.logits)
        value = value[..., :1]
        try:
            return log_pmf.gather(-1, value).squeeze(-1)
        except IndexError as e:
            # PyTorch raises RuntimeError here; IndexError still catches it
            raise IndexRuntimeError(
                f"Categorical.log_prob: value holds a category outside 0..{self._num_events - 1}"
                f" ({e})"
            ) from e

    def entropy(self) -> Tensor:
        logits = self.logits.clamp(min=_finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        fg = _fg()
        values = fg.arange(self._num_events, device=self._param.device)
        values = values.reshape(-1, *([1] * len(self._batch_shape)))
        if expand:
            values = values.expand(-1, *self._batch_shape)
        return values


class OneHotCategorical(Distribution):
    """``OneHotCategorical(probs=None, logits=None)``: a :class:`Categorical` whose samples
    are one-hot vectors."""

    arg_constraints: ClassVar[dict] = {
        "probs": constraints.simplex,
        "logits": constraints.independent(constraints.real, 1),
    }
    support = constraints.independent(constraints.boolean, 1)  # one-hot, checked below
    has_enumerate_support = True

    def __init__(
        self, probs: Any = None, logits: Any = None, validate_args: bool | None = None
    ) -> None:
        self._categorical = Categorical(probs, logits, validate_args=validate_args)
        param = self._categorical._param
        super().__init__(param.shape[:-1], param.shape[-1:], validate_args=False)
        if validate_args is not None:
            self._validate_args = validate_args

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        new = super().expand(batch_shape, _instance)
        new._categorical = self._categorical.expand(batch_shape)
        return new

    @property
    def probs(self) -> Tensor:
        return self._categorical.probs

    @property
    def logits(self) -> Tensor:
        return self._categorical.logits

    @property
    def mean(self) -> Tensor:
        return self._categorical.probs

    @property
    def mode(self) -> Tensor:
        fg = _fg()
        probs = self._categorical.probs
        return fg.nn.functional.one_hot(probs.argmax(-1), probs.shape[-1]).to(probs.dtype)

    @property
    def variance(self) -> Tensor:
        p = self._categorical.probs
        return p * (1 - p)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        fg = _fg()
        probs = self._categorical.probs
        idx = self._categorical.sample(sample_shape)
        return fg.nn.functional.one_hot(idx, probs.shape[-1]).to(probs.dtype)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self) -> Tensor:
        return self._categorical.entropy()

    def enumerate_support(self, expand: bool = True) -> Tensor:
        fg = _fg()
        n = self.event_shape[0]
        values = fg.eye(n, dtype=self._categorical._param.dtype)
        values = values.reshape(n, *([1] * len(self.batch_shape)), n)
        if expand:
            values = values.expand(n, *self.batch_shape, n)
        return values

    def __repr__(self) -> str:
        return "OneHotCategorical(" + repr(self._categorical)[len("Categorical(") :]


class Poisson(Distribution):
    """``Poisson(rate)`` (``sample`` draws with the host generator)."""

    arg_constraints: ClassVar[dict] = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate: Any, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.shape, (), validate_args)

    @property
    def mean(self) -> Tensor:
        return self.rate

    @property
    def mode(self) -> Tensor:
        return self.rate.floor()

    @property
    def variance(self) -> Tensor:
        return self.rate

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        r = np.broadcast_to(_host(self.rate), shape)
        return _numpy_draw(self.rate.device, lambda g: g.poisson(r), self.rate.dtype)

    def log_prob(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        rate, value = fg.broadcast_tensors(self.rate, value.to(self.rate.dtype))
        return fg.special.xlogy(value, rate) - rate - fg.lgamma(value + 1)


class Binomial(Distribution):
    """``Binomial(total_count=1, probs=None, logits=None)`` (``sample`` draws with the host
    generator)."""

    arg_constraints: ClassVar[dict] = {
        "total_count": constraints.nonnegative_integer,
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    has_enumerate_support = True

    def __init__(
        self,
        total_count: Any = 1,
        probs: Any = None,
        logits: Any = None,
        validate_args: bool | None = None,
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.to(self.probs.dtype)
            shape = self.probs.shape
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.to(self.logits.dtype)
            shape = self.logits.shape
        super().__init__(shape, (), validate_args)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def support(self) -> Any:
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.probs

    @property
    def mode(self) -> Tensor:
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """``0..total_count`` along a new first axis (one ``total_count`` for the batch)."""
        fg = _fg()
        n = self.total_count
        top = int(n.max().item())
        if int(n.min().item()) != top:
            raise NotImplementedError(
                "Inhomogeneous total count not supported by `enumerate_support`."
            )
        values = fg.arange(top + 1, dtype=n.dtype, device=n.device)
        values = values.reshape(-1, *([1] * len(self._batch_shape)))
        return values.expand(-1, *self._batch_shape) if expand else values

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        n = np.broadcast_to(_host(self.total_count).astype(np.int64), shape)
        p = np.broadcast_to(_host(self.probs), shape)
        return _numpy_draw(self.probs.device, lambda g: g.binomial(n, p), self.probs.dtype)

    def log_prob(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        n = self.total_count
        value = value.to(self.logits.dtype)
        log_factorial_n = fg.lgamma(n + 1)
        log_factorial_k = fg.lgamma(value + 1)
        log_factorial_nmk = fg.lgamma(n - value + 1)
        # k * logit - n * log1p(exp(logit)), written to stay finite for large |logit|
        logits = self.logits
        # max(logits, 0) written so its gradient at logits == 0 is 1/2 (the mean of the
        # one-sided slopes), which keeps d/dlogits exact at probs == 0.5
        pos = (logits.clamp(min=0) + logits - logits.clamp(max=0)) / 2
        normalize_term = n * pos + n * (-logits.abs()).exp().log1p() - (value * logits)
        return log_factorial_n - log_factorial_k - log_factorial_nmk - normalize_term


# ------------------------------------------------------------------------------- vectors


class MultivariateNormal(Distribution):
    """``MultivariateNormal(loc, covariance_matrix=None, precision_matrix=None,
    scale_tril=None)``: exactly one of the three matrices."""

    arg_constraints: ClassVar[dict] = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(
        self,
        loc: Tensor,
        covariance_matrix: Tensor | None = None,
        precision_matrix: Tensor | None = None,
        scale_tril: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        fg = _fg()
        if not isinstance(loc, Tensor) or loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError(
                "Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                "specified."
            )
        m = given[0]
        if not isinstance(m, Tensor) or m.dim() < 2:
            raise ValueError("the matrix argument must be at least two-dimensional")
        batch_shape = fg.broadcast_shapes(m.shape[:-2], loc.shape[:-1])
        event_shape = loc.shape[-1:]
        if m.shape[-2:] != (event_shape[0], event_shape[0]):
            raise ValueError(
                f"MultivariateNormal: the matrix has shape {tuple(m.shape)}, expected "
                f"(..., {event_shape[0]}, {event_shape[0]}) for loc of shape {tuple(loc.shape)}"
            )
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(*batch_shape, -1, -1)
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(*batch_shape, -1, -1)
        else:
            self.precision_matrix = precision_matrix.expand(*batch_shape, -1, -1)
        self.loc = loc.expand(*batch_shape, -1)
        super().__init__(batch_shape, event_shape, validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = fg.linalg.cholesky(covariance_matrix)
        else:
            # the Cholesky factor of the covariance, the inverse of the precision matrix
            self._unbroadcasted_scale_tril = fg.linalg.cholesky(fg.linalg.inv(precision_matrix))

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        new = super().expand(batch_shape, _instance)
        # the one Cholesky factor, shared (the public matrices are its broadcast views)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        return new

    @lazy_property
    def scale_tril(self) -> Tensor:
        return self._unbroadcasted_scale_tril.expand(
            *self._batch_shape, *self._event_shape, *self._event_shape
        )

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        lo = self._unbroadcasted_scale_tril
        return (lo @ lo.mT).expand(*self._batch_shape, *self._event_shape, *self._event_shape)

    @lazy_property
    def precision_matrix(self) -> Tensor:
        fg = _fg()
        lo = self._unbroadcasted_scale_tril
        return fg.linalg.inv(lo @ lo.mT).expand(
            *self._batch_shape, *self._event_shape, *self._event_shape
        )

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return (
            self._unbroadcasted_scale_tril.pow(2)
            .sum(-1)
            .expand(*self._batch_shape, *self._event_shape)
        )

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        fg = _fg()
        shape = self._extended_shape(sample_shape)
        eps = fg.randn(*shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self) -> Tensor:
        return self._unbroadcasted_scale_tril.diagonal(0, -2, -1).log().sum(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        fg = _fg()
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        lo = self._unbroadcasted_scale_tril
        shape = fg.broadcast_shapes(lo.shape[:-2], diff.shape[:-1])
        lo_b = lo.expand(*shape, *lo.shape[-2:])
        d_b = diff.expand(*shape, diff.shape[-1]).unsqueeze(-1)
        m = fg.linalg.solve_triangular(lo_b, d_b, upper=False).squeeze(-1).pow(2).sum(-1)
        k = self._event_shape[0]
        return -0.5 * (k * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self) -> Tensor:
        k = self._event_shape[0]
        h = 0.5 * k * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        if len(self._batch_shape) == 0:
            return h
        return h.expand(*self._batch_shape)


class Independent(Distribution):
    """``Independent(base_distribution, reinterpreted_batch_ndims)``: the rightmost
    ``reinterpreted_batch_ndims`` batch dimensions of the base become event dimensions
    (``log_prob`` sums over them)."""

    arg_constraints: ClassVar[dict] = {}

    def __init__(
        self,
        base_distribution: Distribution,
        reinterpreted_batch_ndims: int,
        validate_args: bool | None = None,
    ) -> None:
        n = int(reinterpreted_batch_ndims)
        if n < 0 or n > len(base_distribution.batch_shape):
            raise ValueError(
                "Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), "
                f"actual {n} vs {len(base_distribution.batch_shape)}"
            )
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        event_dim = n + len(base_distribution.event_shape)
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = n
        super().__init__(
            shape[: len(shape) - event_dim], shape[len(shape) - event_dim :], validate_args
        )

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        """The base distribution expanded to ``batch_shape`` plus the reinterpreted axes."""
        batch_shape = tuple(int(b) for b in batch_shape)
        n = self.reinterpreted_batch_ndims
        inner = tuple(self.base_dist.batch_shape)[len(self.base_dist.batch_shape) - n :]
        base = self.base_dist.expand(batch_shape + inner)
        return Independent(base, n, validate_args=False)

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        return self.base_dist.has_rsample

    @property
    def has_enumerate_support(self) -> bool:  # type: ignore[override]
        return False if self.reinterpreted_batch_ndims > 0 else self.base_dist.has_enumerate_support

    @property
    def support(self) -> Any:
        s = self.base_dist.support
        if self.reinterpreted_batch_ndims:
            return constraints.independent(s, self.reinterpreted_batch_ndims)
        return s

    @property
    def mean(self) -> Tensor:
        return self.base_dist.mean

    @property
    def mode(self) -> Tensor:
        return self.base_dist.mode

    @property
    def variance(self) -> Tensor:
        return self.base_dist.variance

    def sample(self, sample_shape: Any = ()) -> Tensor:
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value: Tensor) -> Tensor:
        return _sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self) -> Tensor:
        return _sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self) -> str:
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"
