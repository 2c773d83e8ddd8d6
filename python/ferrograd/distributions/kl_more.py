"""Closed-form ``kl_divergence`` for the families of :mod:`.more` (the pairs PyTorch
registers): Cauchy, Gumbel, HalfNormal, Pareto and ContinuousBernoulli with themselves, and
``LowRankMultivariateNormal`` with itself and with ``MultivariateNormal`` both ways.
Importing this module registers them."""

from __future__ import annotations

from .._core import Tensor
from .distribution import _fg
from .families import MultivariateNormal
from .kl import _inf_where, _kl_normal_normal, register_kl
from .more import (
    Cauchy,
    ContinuousBernoulli,
    Gumbel,
    HalfNormal,
    LowRankMultivariateNormal,
    Pareto,
    _batch_lowrank_mahalanobis,
    _batch_mahalanobis,
    _batch_trace_xxt,
)

__all__: list = []

_EULER = 0.57721566490153286060


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p: Cauchy, q: Cauchy) -> Tensor:
    # Chyzak and Nielsen, https://arxiv.org/abs/1905.10965
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    t2 = (4 * p.scale * q.scale).log()
    return t1 - t2


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p: Gumbel, q: Gumbel) -> Tensor:
    fg = _fg()
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t2 = ct1 * _EULER
    t3 = (ct2 + fg.lgamma(1 + ct1) - ct3).exp()
    return t1 + t2 + t3 - (1 + _EULER)


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p: HalfNormal, q: HalfNormal) -> Tensor:
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p: Pareto, q: Pareto) -> Tensor:
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    t1 = q.alpha * scale_ratio.log()
    t2 = -alpha_ratio.log()
    result = t1 + t2 + alpha_ratio - 1
    # p puts mass below q's lower bound
    return _inf_where((p.scale < q.scale).expand_as(result), result)


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_cb_cb(p: ContinuousBernoulli, q: ContinuousBernoulli) -> Tensor:
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + (-p.probs).log1p()
    t3 = -q._cont_bern_log_norm() - (-q.probs).log1p()
    return t1 + t2 + t3


def _same_event_shape(p: object, q: object) -> None:
    if p.event_shape != q.event_shape:  # type: ignore[attr-defined]
        raise ValueError(
            "KL-divergence between two (Low Rank) Multivariate Normals with different event "
            "shapes cannot be computed"
        )


def _woodbury_a(q: LowRankMultivariateNormal) -> Tensor:
    """``L^-1 W^T D^-1`` of ``q``, so ``inv(cov_q) = inv(D) - A^T A``."""
    fg = _fg()
    wt_dinv = q._unbroadcasted_cov_factor.mT / q._unbroadcasted_cov_diag.unsqueeze(-2)
    return fg.linalg.solve_triangular(q._capacitance_tril, wt_dinv, upper=False)


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_lowrank(p: LowRankMultivariateNormal, q: LowRankMultivariateNormal) -> Tensor:
    _same_event_shape(p, q)
    term1 = q._logdet() - p._logdet()
    term3 = _batch_lowrank_mahalanobis(
        q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag, q.loc - p.loc, q._capacitance_tril
    )
    a = _woodbury_a(q)
    pw, pd, qd = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag, q._unbroadcasted_cov_diag
    term21 = (pd / qd).sum(-1)
    term22 = _batch_trace_xxt(pw * qd.rsqrt().unsqueeze(-1))
    term23 = _batch_trace_xxt(a * pd.sqrt().unsqueeze(-2))
    term24 = _batch_trace_xxt(a @ pw)
    term2 = term21 + term22 - term23 - term24
    return 0.5 * (term1 + term2 + term3 - p.event_shape[0])


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_mvn_lowrank(p: MultivariateNormal, q: LowRankMultivariateNormal) -> Tensor:
    _same_event_shape(p, q)
    lp = p._unbroadcasted_scale_tril
    term1 = q._logdet() - 2 * p._half_log_det()
    term3 = _batch_lowrank_mahalanobis(
        q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag, q.loc - p.loc, q._capacitance_tril
    )
    a = _woodbury_a(q)
    term21 = _batch_trace_xxt(lp * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1))
    term22 = _batch_trace_xxt(a @ lp)
    return 0.5 * (term1 + term21 - term22 + term3 - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrank_mvn(p: LowRankMultivariateNormal, q: MultivariateNormal) -> Tensor:
    fg = _fg()
    _same_event_shape(p, q)
    lq = q._unbroadcasted_scale_tril
    term1 = 2 * q._half_log_det() - p._logdet()
    term3 = _batch_mahalanobis(lq, q.loc - p.loc)
    shape = fg.broadcast_shapes(lq.shape[:-2], p._unbroadcasted_cov_factor.shape[:-2])
    n = p.event_shape[0]
    lq_b = lq.expand(*shape, n, n)
    pw = p._unbroadcasted_cov_factor.expand(*shape, n, p.cov_factor.shape[-1])
    pd = fg.diag_embed(p._unbroadcasted_cov_diag.sqrt()).expand(*shape, n, n)
    term21 = _batch_trace_xxt(fg.linalg.solve_triangular(lq_b, pw, upper=False))
    term22 = _batch_trace_xxt(fg.linalg.solve_triangular(lq_b, pd, upper=False))
    return 0.5 * (term1 + term21 + term22 + term3 - n)
