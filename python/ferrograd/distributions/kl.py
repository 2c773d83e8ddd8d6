"""``kl_divergence(p, q)``: the Kullback-Leibler divergence between two distributions, by
closed form for the pairs registered with :func:`register_kl` (PyTorch's API)."""

from __future__ import annotations

import math
from typing import Callable

from .._core import Tensor
from .distribution import Distribution, _fg, _sum_rightmost
from .families import (
    Bernoulli,
    Beta,
    Categorical,
    Dirichlet,
    Exponential,
    Gamma,
    Independent,
    Laplace,
    LogNormal,
    MultivariateNormal,
    Normal,
    OneHotCategorical,
    Poisson,
    Uniform,
)

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY: dict = {}


def register_kl(type_p: type, type_q: type) -> Callable:
    """Decorator: registers ``fn(p, q)`` as the KL divergence of ``type_p`` from
    ``type_q`` (the most specific registered pair of base classes is used)."""
    if not (isinstance(type_p, type) and issubclass(type_p, Distribution)):
        raise TypeError(f"register_kl: type_p must be a Distribution subclass, got {type_p}")
    if not (isinstance(type_q, type) and issubclass(type_q, Distribution)):
        raise TypeError(f"register_kl: type_q must be a Distribution subclass, got {type_q}")

    def decorator(fn: Callable) -> Callable:
        _KL_REGISTRY[type_p, type_q] = fn
        return fn

    return decorator


def _dispatch(tp: type, tq: type) -> Callable | None:
    best, best_rank = None, None
    for (p, q), fn in _KL_REGISTRY.items():
        if issubclass(tp, p) and issubclass(tq, q):
            rank = (tp.__mro__.index(p), tq.__mro__.index(q))
            if best_rank is None or rank < best_rank:
                best, best_rank = fn, rank
    return best


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """``KL(p || q)``, one value per batch entry; raises ``NotImplementedError`` for a pair
    with no registered closed form."""
    fn = _dispatch(type(p), type(q))
    if fn is None:
        raise NotImplementedError(
            f"No KL(p || q) is implemented for p type {type(p).__name__} and q type "
            f"{type(q).__name__}"
        )
    return fn(p, q)


def _inf_where(cond: Tensor, value: Tensor) -> Tensor:
    return _fg().where(cond, float("inf"), value)


def _zero_where(cond: Tensor, value: Tensor) -> Tensor:
    return _fg().where(cond, 0.0, value)


@register_kl(Normal, Normal)
def _kl_normal_normal(p: Normal, q: Normal) -> Tensor:
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(LogNormal, LogNormal)
def _kl_lognormal_lognormal(p: LogNormal, q: LogNormal) -> Tensor:
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p: Categorical, q: Categorical) -> Tensor:
    t = p.probs * (p.logits - q.logits)
    t = _inf_where((q.probs == 0).expand_as(t), t)
    t = _zero_where((p.probs == 0).expand_as(t), t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p: OneHotCategorical, q: OneHotCategorical) -> Tensor:
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p: Bernoulli, q: Bernoulli) -> Tensor:
    fg = _fg()
    softplus = fg.nn.functional.softplus
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = _inf_where(q.probs == 0, t1)
    t1 = _zero_where(p.probs == 0, t1)
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = _inf_where(q.probs == 1, t2)
    t2 = _zero_where(p.probs == 1, t2)
    return t1 + t2


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p: Uniform, q: Uniform) -> Tensor:
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _inf_where((q.low > p.low) | (q.high < p.high), result)


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p: Uniform, q: Normal) -> Tensor:
    common = (q.scale * math.sqrt(2 * math.pi) / (p.high - p.low)).log()
    t1 = (p.high.pow(3) - p.low.pow(3)) / 3
    t2 = q.loc * (p.high.pow(2) - p.low.pow(2))
    t3 = q.loc.pow(2) * (p.high - p.low)
    return common + (t1 - t2 + t3) / (2 * q.scale.pow(2) * (p.high - p.low))


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p: Exponential, q: Exponential) -> Tensor:
    rate_ratio = q.rate / p.rate
    return rate_ratio - 1 - rate_ratio.log()


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p: Laplace, q: Laplace) -> Tensor:
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * (-loc_abs_diff / p.scale).exp()
    return t1 + t2 + t3 - 1


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p: Gamma, q: Gamma) -> Tensor:
    fg = _fg()
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = fg.lgamma(q.concentration) - fg.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * fg.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Beta, Beta)
def _kl_beta_beta(p: Beta, q: Beta) -> Tensor:
    fg = _fg()
    a1, b1, a2, b2 = p.concentration1, p.concentration0, q.concentration1, q.concentration0
    s1, s2 = a1 + b1, a2 + b2
    t1 = fg.lgamma(a2) + fg.lgamma(b2) + fg.lgamma(s1)
    t2 = fg.lgamma(a1) + fg.lgamma(b1) + fg.lgamma(s2)
    t3 = (a1 - a2) * fg.digamma(a1)
    t4 = (b1 - b2) * fg.digamma(b1)
    t5 = (s2 - s1) * fg.digamma(s1)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p: Dirichlet, q: Dirichlet) -> Tensor:
    fg = _fg()
    sum_p = p.concentration.sum(-1)
    sum_q = q.concentration.sum(-1)
    t1 = fg.lgamma(sum_p) - fg.lgamma(sum_q)
    t2 = (fg.lgamma(p.concentration) - fg.lgamma(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = fg.digamma(p.concentration) - fg.digamma(sum_p).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p: Poisson, q: Poisson) -> Tensor:
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p: MultivariateNormal, q: MultivariateNormal) -> Tensor:
    fg = _fg()
    if p.event_shape != q.event_shape:
        raise ValueError(
            "KL-divergence between two Multivariate Normals with different event shapes "
            "cannot be computed"
        )
    lp, lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = q._half_log_det() - p._half_log_det()
    shape = fg.broadcast_shapes(lq.shape[:-2], lp.shape[:-2], p.loc.shape[:-1], q.loc.shape[:-1])
    n = p.event_shape[0]
    lq_b = lq.expand(*shape, n, n)
    term2 = fg.linalg.solve_triangular(lq_b, lp.expand(*shape, n, n), upper=False)
    term2 = term2.pow(2).sum((-2, -1))
    diff = (q.loc - p.loc).expand(*shape, n).unsqueeze(-1)
    term3 = fg.linalg.solve_triangular(lq_b, diff, upper=False).squeeze(-1).pow(2).sum(-1)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p: Independent, q: Independent) -> Tensor:
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError(
            "kl_divergence: Independent distributions with different reinterpreted_batch_ndims"
        )
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)
