"""The families of fg.distributions.more against torch.distributions: log_prob, entropy,
moments, cdf/icdf, kl_divergence and their gradients in float64; rsample gradients (finite
differences with the same draws, or torch's gamma reparameterization on the same draws);
sample shapes and statistics; argument and support validation; expand."""

from __future__ import annotations

import ferrograd as fg
import ferrograd.distributions as D
import numpy as np
import pytest
import torch
import torch.distributions as TD

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _torch_float64():
    """torch's GeneralizedPareto compares with a default-dtype constant: float64 there too."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def pos(*shape):
    return RNG.uniform(0.5, 2.0, shape)


def real(*shape):
    return RNG.normal(size=shape)


def unit(*shape):
    return RNG.uniform(0.1, 0.9, shape)


def fgt(a, grad=True):
    return fg.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def tt(a, grad=True):
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def npy(a):
    return a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)


def close(a, b, tol=1e-10):
    a, b = npy(a), npy(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def mixture(M, p):
    return M.MixtureSameFamily(M.Categorical(probs=p["probs"]), M.Normal(p["loc"], p["scale"]))


def mixture_of_vectors(M, p):
    comp = M.Independent(M.Normal(p["loc"], p["scale"]), 1)
    return M.MixtureSameFamily(M.Categorical(logits=p["logits"]), comp)


# name -> (make(module, tensors), parameters (numpy), values(parameters) for log_prob)
CASES = {
    "StudentT": (
        lambda M, p: M.StudentT(p["df"], p["loc"], p["scale"]),
        {"df": np.array([0.8, 1.5, 4.0]), "loc": real(3), "scale": pos(3)},
        lambda p: real(4, 3),
    ),
    "Cauchy": (
        lambda M, p: M.Cauchy(p["loc"], p["scale"]),
        {"loc": real(3), "scale": pos(3)},
        lambda p: real(4, 3) * 3,
    ),
    "HalfCauchy": (lambda M, p: M.HalfCauchy(p["scale"]), {"scale": pos(3)}, lambda p: pos(4, 3)),
    "HalfNormal": (lambda M, p: M.HalfNormal(p["scale"]), {"scale": pos(3)}, lambda p: pos(4, 3)),
    "Gumbel": (
        lambda M, p: M.Gumbel(p["loc"], p["scale"]),
        {"loc": real(3), "scale": pos(3)},
        lambda p: real(2, 3),
    ),
    "Chi2": (lambda M, p: M.Chi2(p["df"]), {"df": pos(3) * 3}, lambda p: pos(4, 3) * 2),
    "Weibull": (
        lambda M, p: M.Weibull(p["scale"], p["concentration"]),
        {"scale": pos(3), "concentration": np.array([0.7, 1.5, 3.0])},
        lambda p: pos(4, 3),
    ),
    "Pareto": (
        lambda M, p: M.Pareto(p["scale"], p["alpha"]),
        {"scale": pos(3), "alpha": np.array([0.8, 1.5, 3.0])},
        lambda p: p["scale"] * (1 + pos(4, 3)),
    ),
    "VonMises": (
        lambda M, p: M.VonMises(p["loc"], p["concentration"]),
        {"loc": real(3), "concentration": np.array([0.5, 2.0, 6.0])},
        lambda p: RNG.uniform(-np.pi, np.pi, (4, 3)),
    ),
    "Multinomial": (
        lambda M, p: M.Multinomial(5, probs=p["probs"]),
        {"probs": pos(2, 4)},
        lambda p: RNG.multinomial(5, [0.1, 0.2, 0.3, 0.4], size=(3, 2)).astype(float),
    ),
    "MultinomialLogits": (
        lambda M, p: M.Multinomial(4, logits=p["logits"]),
        {"logits": real(4)},
        lambda p: RNG.multinomial(4, [0.25] * 4, size=(3,)).astype(float),
    ),
    "NegativeBinomial": (
        lambda M, p: M.NegativeBinomial(p["total_count"], probs=p["probs"]),
        {"total_count": pos(3) * 3, "probs": unit(3)},
        lambda p: RNG.integers(0, 8, (4, 3)).astype(float),
    ),
    "NegativeBinomialLogits": (
        lambda M, p: M.NegativeBinomial(p["total_count"], logits=p["logits"]),
        {"total_count": pos(3) * 3, "logits": real(3)},
        lambda p: RNG.integers(0, 8, (4, 3)).astype(float),
    ),
    "RelaxedBernoulli": (
        lambda M, p: M.RelaxedBernoulli(p["temperature"], probs=p["probs"]),
        {"temperature": np.array(0.7), "probs": unit(3)},
        lambda p: unit(4, 3),
    ),
    "RelaxedBernoulliLogits": (
        lambda M, p: M.RelaxedBernoulli(p["temperature"], logits=p["logits"]),
        {"temperature": pos(3), "logits": real(3)},
        lambda p: unit(2, 3),
    ),
    "RelaxedOneHotCategorical": (
        lambda M, p: M.RelaxedOneHotCategorical(p["temperature"], probs=p["probs"]),
        {"temperature": np.array(0.6), "probs": pos(2, 4)},
        lambda p: RNG.dirichlet([1, 2, 3, 1], size=(3, 2)),
    ),
    "RelaxedOneHotCategoricalLogits": (
        lambda M, p: M.RelaxedOneHotCategorical(p["temperature"], logits=p["logits"]),
        {"temperature": np.array(1.3), "logits": real(3)},
        lambda p: RNG.dirichlet([2, 2, 1], size=(2,)),
    ),
    "ContinuousBernoulli": (
        lambda M, p: M.ContinuousBernoulli(probs=p["probs"]),
        {"probs": np.array([0.2, 0.4995, 0.8, 0.55])},
        lambda p: unit(3, 4),
    ),
    "ContinuousBernoulliLogits": (
        lambda M, p: M.ContinuousBernoulli(logits=p["logits"]),
        {"logits": real(3) * 2},
        lambda p: unit(2, 3),
    ),
    "Kumaraswamy": (
        lambda M, p: M.Kumaraswamy(p["concentration1"], p["concentration0"]),
        {"concentration1": np.array([0.7, 1.5, 3.0]), "concentration0": np.array([2.0, 0.8, 1.5])},
        lambda p: unit(4, 3),
    ),
    "LowRankMultivariateNormal": (
        lambda M, p: M.LowRankMultivariateNormal(p["loc"], p["cov_factor"], p["cov_diag"]),
        {"loc": real(2, 3), "cov_factor": real(3, 2), "cov_diag": pos(3)},
        lambda p: real(4, 2, 3),
    ),
    "FisherSnedecor": (
        lambda M, p: M.FisherSnedecor(p["df1"], p["df2"]),
        {"df1": np.array([1.5, 3.0, 6.0, 9.0]), "df2": np.array([1.5, 3.0, 6.0, 4.5])},
        lambda p: pos(2, 4),
    ),
    "LogisticNormal": (
        lambda M, p: M.LogisticNormal(p["loc"], p["scale"]),
        {"loc": real(2, 3), "scale": pos(3)},
        lambda p: RNG.dirichlet([1, 2, 3, 2], size=(2,)),
    ),
    "InverseGamma": (
        lambda M, p: M.InverseGamma(p["concentration"], p["rate"]),
        {"concentration": np.array([0.8, 1.5, 3.0]), "rate": pos(3)},
        lambda p: pos(4, 3),
    ),
    "GeneralizedPareto": (
        lambda M, p: M.GeneralizedPareto(p["loc"], p["scale"], p["concentration"]),
        {"loc": real(3), "scale": pos(3), "concentration": np.array([0.3, 0.0, -0.4])},
        lambda p: p["loc"] + p["scale"] * RNG.uniform(0.1, 2.0, (4, 3)),
    ),
    "MixtureSameFamily": (
        mixture,
        {"probs": pos(2, 3), "loc": real(2, 3), "scale": pos(2, 3)},
        lambda p: real(4, 2),
    ),
    "MixtureSameFamilyVectors": (
        mixture_of_vectors,
        {"logits": real(3), "loc": real(3, 2), "scale": pos(3, 2)},
        lambda p: real(4, 2),
    ),
}


def build(name, lib, params=None):
    make, default, _ = CASES[name]
    params = default if params is None else params
    mod, conv = (D, fgt) if lib == "fg" else (TD, tt)
    ts = {k: conv(v) for k, v in params.items()}
    return make(mod, ts), ts


def grads_equal(ours, theirs, tol=1e-9):
    for k in ours:
        if theirs[k].grad is None:
            continue
        assert ours[k].grad is not None, k
        a, b = npy(ours[k].grad), npy(theirs[k].grad)
        known = ~np.isnan(b)  # torch's is NaN where a NaN or infinite moment is masked out
        close(a[known], b[known], tol)


@pytest.mark.parametrize("name", sorted(CASES))
def test_log_prob_and_its_gradients_equal_torch(name):
    d, fp = build(name, "fg")
    t, tp = build(name, "torch")
    assert tuple(d.batch_shape) == tuple(t.batch_shape)
    assert tuple(d.event_shape) == tuple(t.event_shape)
    assert d.has_rsample == t.has_rsample
    v = CASES[name][2](CASES[name][1])
    ours, theirs = d.log_prob(fg.tensor(v)), t.log_prob(torch.tensor(v))
    close(ours, theirs)
    w = RNG.normal(size=theirs.shape)
    (ours * fg.tensor(w)).sum().backward()
    (theirs * torch.tensor(w)).sum().backward()
    grads_equal(fp, tp)


def _moment(dist, prop):
    try:
        return getattr(dist, prop) if prop != "entropy" else dist.entropy()
    except NotImplementedError:
        return None


@pytest.mark.parametrize("name", sorted(CASES))
def test_moments_and_entropy_and_their_gradients_equal_torch(name):
    d, fp = build(name, "fg")
    t, tp = build(name, "torch")
    total, ttotal = 0.0, 0.0
    for prop in ("mean", "mode", "variance", "stddev", "entropy"):
        theirs = _moment(t, prop)
        ours = _moment(d, prop)
        if theirs is None:  # torch has none: neither do we
            assert ours is None, prop
            continue
        assert ours is not None, prop
        close(ours, theirs, 1e-9)
        finite = np.isfinite(npy(theirs))
        w = RNG.normal(size=finite.shape) * finite
        if theirs.requires_grad:
            total = total + (fg.where(fg.tensor(finite), ours, 0.0) * fg.tensor(w)).sum()
            ttotal = (
                ttotal + (torch.where(torch.tensor(finite), theirs, 0.0) * torch.tensor(w)).sum()
            )
    if isinstance(ttotal, torch.Tensor):
        total.backward()
        ttotal.backward()
        grads_equal(fp, tp, 1e-8)


CDF_FAMILIES = [
    "Cauchy",
    "ContinuousBernoulli",
    "ContinuousBernoulliLogits",
    "GeneralizedPareto",
    "Gumbel",
    "HalfCauchy",
    "HalfNormal",
    "Kumaraswamy",
    "MixtureSameFamily",
    "Pareto",
    "Weibull",
]


@pytest.mark.parametrize("name", CDF_FAMILIES)
def test_cdf_icdf_and_their_gradients_equal_torch(name):
    d, fp = build(name, "fg")
    t, tp = build(name, "torch")
    v = CASES[name][2](CASES[name][1])
    ours, theirs = d.cdf(fg.tensor(v)), t.cdf(torch.tensor(v))
    close(ours, theirs)
    loss, tloss = ours.sum(), theirs.sum()
    if name != "MixtureSameFamily":  # torch's has no icdf
        q = RNG.uniform(0.05, 0.95, tuple(t.batch_shape))
        a, b = d.icdf(fg.tensor(q)), t.icdf(torch.tensor(q))
        close(a, b)
        # the inverse of the cdf
        close(d.cdf(a), q, 1e-9)
        loss, tloss = loss + a.sum(), tloss + b.sum()
    loss.backward()
    tloss.backward()
    grads_equal(fp, tp)


KL_PAIRS = [
    ("Cauchy", "Cauchy"),
    ("Gumbel", "Gumbel"),
    ("HalfNormal", "HalfNormal"),
    ("Pareto", "Pareto"),
    ("ContinuousBernoulli", "ContinuousBernoulli"),
    ("LowRankMultivariateNormal", "LowRankMultivariateNormal"),
    ("LowRankMultivariateNormal", "MultivariateNormal"),
    ("MultivariateNormal", "LowRankMultivariateNormal"),
    ("Chi2", "Chi2"),
]


def kl_side(name, lib, shift):
    if name == "MultivariateNormal":
        mod, conv = (D, fgt) if lib == "fg" else (TD, tt)
        a = RNG.normal(size=(3, 3)) if shift else np.eye(3) + 0.1
        ps = {
            "loc": real(2, 3) if shift else np.zeros((2, 3)),
            "scale_tril": np.tril(a) + 3 * np.eye(3),
        }
        ts = {k: conv(v) for k, v in ps.items()}
        return mod.MultivariateNormal(ts["loc"], scale_tril=ts["scale_tril"]), ts, ps
    params = {k: v * (1.3 if shift else 1.0) for k, v in CASES[name][1].items()}
    if name == "Pareto" and shift:
        params["scale"] = CASES[name][1]["scale"] * np.array([0.7, 1.0, 1.4])  # one infinite
    if name == "ContinuousBernoulli" and shift:
        params["probs"] = np.array([0.7, 0.3, 0.5004, 0.1])
    d, ts = build(name, lib, params)
    return d, ts, params


@pytest.mark.parametrize("pair", KL_PAIRS, ids=lambda p: "-".join(p))
def test_kl_divergence_and_its_gradients_equal_torch(pair):
    state = RNG.bit_generator.state
    p, fpp, _ = kl_side(pair[0], "fg", False)
    q, fqp, _ = kl_side(pair[1], "fg", True)
    RNG.bit_generator.state = state
    tp_, tpp, _ = kl_side(pair[0], "torch", False)
    tq, tqp, _ = kl_side(pair[1], "torch", True)
    ours, theirs = D.kl_divergence(p, q), TD.kl_divergence(tp_, tq)
    close(ours, theirs, 1e-9)
    finite = np.isfinite(npy(theirs))
    fg.where(fg.tensor(finite), ours, 0.0).sum().backward()
    torch.where(torch.tensor(finite), theirs, 0.0).sum().backward()
    grads_equal(fpp, tpp, 1e-8)
    grads_equal(fqp, tqp, 1e-8)


def test_low_rank_mvn_matrices_equal_torch_and_the_dense_mvn():
    loc, w, dg = real(2, 4), real(4, 2), pos(4)
    d = D.LowRankMultivariateNormal(fgt(loc), fgt(w), fgt(dg))
    t = TD.LowRankMultivariateNormal(tt(loc), tt(w), tt(dg))
    for prop in ("covariance_matrix", "precision_matrix", "scale_tril", "variance"):
        close(getattr(d, prop), getattr(t, prop))
    dense = D.MultivariateNormal(fgt(loc), covariance_matrix=d.covariance_matrix.detach())
    v = real(3, 2, 4)
    close(d.log_prob(fg.tensor(v)), dense.log_prob(fg.tensor(v)))
    close(d.entropy(), dense.entropy())


@pytest.mark.parametrize(
    "make, x",
    [
        (lambda L, lib: L.PowerTransform(tt(1.7) if lib == "t" else fgt(1.7)), pos(2, 3)),
        (lambda L, lib: L.PowerTransform(tt(-0.6) if lib == "t" else fgt(-0.6)), pos(2, 3)),
        (lambda L, lib: L.StickBreakingTransform(), real(2, 3)),
        (lambda L, lib: L.AbsTransform(), real(2, 3)),
    ],
)
def test_transforms_equal_torch(make, x):
    ours, theirs = make(D, "fg"), make(TD, "t")
    y, ty = ours(fg.tensor(x)), theirs(torch.tensor(x))
    close(y, ty)
    close(ours.inv(y), theirs.inv(ty))
    if not isinstance(ours, D.AbsTransform):
        close(
            ours.log_abs_det_jacobian(fg.tensor(x), y),
            theirs.log_abs_det_jacobian(torch.tensor(x), ty),
        )
        close(ours.inv(y), x)  # bijective


# --------------------------------------------------------------------- reparameterization

SMOOTH_RSAMPLE = [
    "Cauchy",
    "ContinuousBernoulli",
    "GeneralizedPareto",
    "Gumbel",
    "HalfCauchy",
    "HalfNormal",
    "Kumaraswamy",
    "LogisticNormal",
    "LowRankMultivariateNormal",
    "Pareto",
    "RelaxedBernoulli",
    "RelaxedOneHotCategoricalLogits",
    "Weibull",
]


@pytest.mark.parametrize("name", SMOOTH_RSAMPLE)
def test_rsample_gradients_equal_finite_differences_of_the_same_draws(name):
    params = CASES[name][1]
    if name == "ContinuousBernoulli":
        params = {"probs": np.array([0.2, 0.35, 0.8, 0.65])}  # away from the Taylor region
    if name == "GeneralizedPareto":
        params = {**params, "concentration": np.array([0.3, 0.2, -0.4])}  # none at 0
    w = None

    def loss(ps, grad):
        nonlocal w
        fg.manual_seed(4)
        d, ts = build(name, "fg", ps)
        x = d.rsample((5,))
        if w is None:
            w = fg.tensor(RNG.normal(size=tuple(x.shape)))
        return (x * w).sum(), ts

    value, ts = loss(params, True)
    value.backward()
    h = 1e-6
    for k, v in params.items():
        direction = RNG.normal(size=np.shape(v))
        up = loss({**params, k: v + h * direction}, False)[0].item()
        down = loss({**params, k: v - h * direction}, False)[0].item()
        numeric = (up - down) / (2 * h)
        analytic = float((ts[k].grad.numpy() * direction).sum())
        assert abs(numeric - analytic) <= 1e-6 * (1 + abs(numeric)), (k, numeric, analytic)


def test_standard_gamma_gradient_equals_torch_in_every_regime():
    from ferrograd.distributions.more import _standard_gamma_grad

    alpha = np.repeat([0.05, 0.5, 1.0, 3.0, 7.9, 8.5, 30.0, 200.0], 7)
    ratio = np.tile([0.01, 0.3, 0.85, 0.95, 1.05, 1.5, 3.0], 8)
    x = np.maximum(alpha * ratio, 1e-3)
    ours = _standard_gamma_grad(fg.tensor(alpha), fg.tensor(x))
    theirs = torch._standard_gamma_grad(torch.tensor(alpha), torch.tensor(x))
    close(ours, theirs, 1e-12)
    # and it is the implicit derivative -dF/dalpha / f (torch's approximation is within 1e-3)
    a, xs = torch.tensor(alpha), torch.tensor(x)
    h = 1e-6 * a
    dcdf = (torch.special.gammainc(a + h, xs) - torch.special.gammainc(a - h, xs)) / (2 * h)
    pdf = torch.distributions.Gamma(a, 1.0).log_prob(xs).exp()
    exact = (-dcdf / pdf).numpy()
    ok = pdf.numpy() > 1e-8
    np.testing.assert_allclose(npy(ours)[ok], exact[ok], rtol=2e-3, atol=1e-6)


def torch_gamma(alpha_t, rate_t, standard_draws):
    """torch's reparameterized Gamma(alpha, rate) draws, given the standard gamma draws."""
    g = torch.tensor(standard_draws)
    a = alpha_t.expand(g.shape)
    grad = torch._standard_gamma_grad(a.detach(), g)
    return (g + grad * (a - a.detach())) / rate_t


@pytest.mark.parametrize("name", ["Chi2", "StudentT", "FisherSnedecor", "InverseGamma"])
def test_gamma_based_rsample_equals_torchs_reparameterization_of_the_same_draws(name):
    from ferrograd.random import _numpy_rng

    params = dict(CASES[name][1])
    n = 200
    fg.manual_seed(9)
    d, fp = build(name, "fg", params)
    x = d.rsample((n,))
    assert tuple(x.shape) == (n, *d.batch_shape)
    # the same stream again: the draws rsample made
    fg.manual_seed(9)
    tp = {k: tt(v) for k, v in params.items()}
    shape = (n, *d.batch_shape)
    if name == "Chi2":
        g = _numpy_rng().standard_gamma(np.broadcast_to(params["df"] / 2, shape))
        ref = torch_gamma(tp["df"] / 2, 0.5, g)
    elif name == "InverseGamma":
        g = _numpy_rng().standard_gamma(np.broadcast_to(params["concentration"], shape))
        ref = 1 / torch_gamma(tp["concentration"], tp["rate"], g)
    elif name == "StudentT":
        z = fg.randn(*shape, dtype=fg.float64).numpy()
        g = _numpy_rng().standard_gamma(np.broadcast_to(params["df"] / 2, shape))
        chi2 = torch_gamma(tp["df"] / 2, 0.5, g)
        ref = tp["loc"] + tp["scale"] * torch.tensor(z) * torch.rsqrt(chi2 / tp["df"])
    else:
        g1 = _numpy_rng().standard_gamma(np.broadcast_to(params["df1"] / 2, shape))
        g2 = _numpy_rng().standard_gamma(np.broadcast_to(params["df2"] / 2, shape))
        ref = torch_gamma(tp["df1"] / 2, tp["df1"], g1) / torch_gamma(tp["df2"] / 2, tp["df2"], g2)
    close(x, ref, 1e-12)
    w = RNG.normal(size=shape)
    (x * fg.tensor(w)).sum().backward()
    (ref * torch.tensor(w)).sum().backward()
    grads_equal(fp, tp, 1e-9)


def test_relaxed_one_hot_rsample_is_the_gumbel_softmax_of_the_same_uniforms():
    logits, temp = real(2, 4), 0.5
    fg.manual_seed(2)
    x = D.RelaxedOneHotCategorical(fgt(temp, False), logits=fgt(logits)).rsample((3,))
    fg.manual_seed(2)
    u = np.clip(fg.rand(3, 2, 4, dtype=fg.float64).numpy(), 2.2e-16, 1 - 2.2e-16)
    g = -np.log(-np.log(u))
    norm = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    ref = torch.softmax((torch.tensor(norm) + torch.tensor(g)) / temp, -1)
    close(x, ref, 1e-12)
    assert np.allclose(npy(x).sum(-1), 1)


def test_straight_through_rsample_is_one_hot_with_the_probs_gradient():
    probs = fgt([[0.2, 0.3, 0.5]])
    d = D.OneHotCategoricalStraightThrough(probs=probs)
    fg.manual_seed(0)
    x = d.rsample((4,))
    assert tuple(x.shape) == (4, 1, 3) and (npy(x).sum(-1) == 1).all()
    assert set(np.unique(npy(x))) <= {0.0, 1.0}
    (x * fg.tensor(np.arange(3.0))).sum().backward()
    t = torch.tensor([[0.2, 0.3, 0.5]], dtype=torch.float64, requires_grad=True)
    (TD.OneHotCategoricalStraightThrough(probs=t).probs * torch.arange(3.0) * 4).sum().backward()
    close(probs.grad, t.grad)


# ------------------------------------------------------------------------------- sampling

MOMENT_CASES = [
    ("StudentT", lambda: D.StudentT(5.0, 1.0, 2.0)),
    ("Cauchy", lambda: D.Cauchy(0.5, 2.0)),
    ("HalfCauchy", lambda: D.HalfCauchy(1.5)),
    ("HalfNormal", lambda: D.HalfNormal(1.5)),
    ("Gumbel", lambda: D.Gumbel(1.0, 2.0)),
    ("Chi2", lambda: D.Chi2(3.0)),
    ("Weibull", lambda: D.Weibull(2.0, 1.5)),
    ("Pareto", lambda: D.Pareto(1.0, 5.0)),
    ("VonMises", lambda: D.VonMises(0.5, 2.0)),
    ("NegativeBinomial", lambda: D.NegativeBinomial(3.0, probs=0.4)),
    ("ContinuousBernoulli", lambda: D.ContinuousBernoulli(probs=0.3)),
    ("Kumaraswamy", lambda: D.Kumaraswamy(2.0, 3.0)),
    ("FisherSnedecor", lambda: D.FisherSnedecor(6.0, 12.0)),
    ("InverseGamma", lambda: D.InverseGamma(6.0, 2.0)),
    ("GeneralizedPareto", lambda: D.GeneralizedPareto(0.5, 1.0, 0.1)),
    (
        "MixtureSameFamily",
        lambda: D.MixtureSameFamily(
            D.Categorical(probs=fg.tensor([0.2, 0.8])), D.Normal(fg.tensor([-3.0, 2.0]), 1.0)
        ),
    ),
]


@pytest.mark.parametrize("name, make", MOMENT_CASES, ids=[c[0] for c in MOMENT_CASES])
def test_samples_have_the_distribution_moments(name, make):
    fg.manual_seed(1)
    d = make()
    n = 40000
    x = npy(d.sample((n,))).astype(np.float64)
    assert x.shape == (n,)
    if name in ("Cauchy", "HalfCauchy"):  # no moments: compare the quartiles
        q = np.quantile(x, [0.25, 0.5, 0.75])
        ref = npy(d.icdf(fg.tensor([0.25, 0.5, 0.75])))
        np.testing.assert_allclose(q, ref, atol=0.05 * float(npy(d.scale)))
        return
    if name == "VonMises":  # circular: the mean direction and the mean resultant length
        assert (x >= -np.pi).all() and (x < np.pi).all()
        m = np.mean(np.exp(1j * x))
        assert abs(np.angle(m) - 0.5) < 0.02
        assert abs(np.abs(m) - (1 - float(npy(d.variance)))) < 0.01
        return
    mean, var = float(npy(d.mean)), float(npy(d.variance))
    assert abs(x.mean() - mean) < 5 * np.sqrt(var / n) + 1e-3, (x.mean(), mean)
    assert abs(x.var() - var) < 0.1 * var + 1e-3, (x.var(), var)


@pytest.mark.parametrize("name", sorted(CASES))
def test_sample_shapes_equal_torch(name):
    d, _ = build(name, "fg")
    t, _ = build(name, "torch")
    fg.manual_seed(0)
    s = d.sample((2, 3))
    assert tuple(s.shape) == tuple(t.sample((2, 3)).shape)
    assert s.requires_grad is False
    lp = d.log_prob(s)  # the draws are in the support
    assert tuple(lp.shape) == (2, 3, *d.batch_shape)
    assert np.isfinite(npy(lp)).all()
    if d.has_rsample:
        assert tuple(d.rsample((4,)).shape) == (4, *d.batch_shape, *d.event_shape)


def test_multinomial_counts_sum_to_total_and_follow_the_probabilities():
    fg.manual_seed(3)
    probs = np.array([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]])
    s = npy(D.Multinomial(10, probs=fg.tensor(probs)).sample((5000,)))
    assert s.shape == (5000, 2, 3) and (s.sum(-1) == 10).all()
    np.testing.assert_allclose(s.mean(0) / 10, probs, atol=0.01)
    assert (s[:, 1, 2] == 0).all()


def test_mixture_sample_picks_each_draw_from_one_component():
    mix = D.Categorical(probs=fg.tensor([[0.3, 0.7], [0.9, 0.1]]))
    comp = D.Independent(D.Normal(fg.tensor([[[0.0, 0.0], [100.0, 100.0]]] * 2), 0.01), 1)
    d = D.MixtureSameFamily(mix, comp)
    assert tuple(d.batch_shape) == (2,) and tuple(d.event_shape) == (2,)
    fg.manual_seed(0)
    s = npy(d.sample((4000,)))
    assert s.shape == (4000, 2, 2)
    far = s[..., 0] > 50
    assert (far == (s[..., 1] > 50)).all()  # both coordinates from the same component
    np.testing.assert_allclose(far.mean(0), [0.7, 0.1], atol=0.03)


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: D.StudentT(fg.tensor([-1.0])), "df"),
        (lambda: D.Cauchy(0.0, -1.0), "scale"),
        (lambda: D.HalfNormal(fg.tensor([1.0, 0.0])), "scale"),
        (lambda: D.Gumbel(0.0, -2.0), "scale"),
        (lambda: D.Chi2(fg.tensor(-1.0)), "df"),
        (lambda: D.Pareto(1.0, -1.0), "alpha"),
        (lambda: D.VonMises(0.0, -1.0), "concentration"),
        (lambda: D.Multinomial(3, probs=fg.tensor([-0.5, 1.5])), "probs"),
        (lambda: D.NegativeBinomial(2.0, probs=fg.tensor(1.0)), "probs"),
        (lambda: D.NegativeBinomial(-1.0, probs=fg.tensor(0.5)), "total_count"),
        (lambda: D.RelaxedBernoulli(fg.tensor(0.5), probs=fg.tensor(1.5)), "probs"),
        (lambda: D.ContinuousBernoulli(probs=fg.tensor(1.5), validate_args=True), "probs"),
        (lambda: D.Kumaraswamy(1.0, 0.0), "concentration0"),
        (lambda: D.LowRankMultivariateNormal(fg.zeros(2), fg.ones(2, 1), -fg.ones(2)), "cov_diag"),
        (lambda: D.LowRankMultivariateNormal(fg.zeros(2), fg.ones(3, 1), fg.ones(2)), "cov_factor"),
        (lambda: D.FisherSnedecor(1.0, 0.0), "df2"),
        (lambda: D.LogisticNormal(fg.zeros(2), -fg.ones(2)), "scale"),
        (lambda: D.GeneralizedPareto(0.0, -1.0, 0.1), "scale"),
        (lambda: D.Weibull(1.0, -1.0), "concentration"),
        (lambda: D.Multinomial(fg.tensor(3.0), probs=fg.ones(2)), NotImplementedError),
        (lambda: D.MixtureSameFamily(D.Categorical(fg.ones(3)), D.Normal(fg.zeros(2), 1.0)), "3"),
    ],
)
def test_bad_parameters_raise_like_torch(make, match):
    if match is NotImplementedError:
        with pytest.raises(NotImplementedError):
            make()
        return
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize(
    "make, value",
    [
        (lambda: D.HalfNormal(1.0), -0.5),
        (lambda: D.HalfCauchy(1.0), -0.5),
        (lambda: D.Chi2(2.0), -1.0),
        (lambda: D.Weibull(1.0, 2.0), 0.0),
        (lambda: D.Pareto(2.0, 1.0), 1.5),
        (lambda: D.Kumaraswamy(2.0, 2.0), 1.5),
        (lambda: D.ContinuousBernoulli(probs=0.3), -0.1),
        (lambda: D.RelaxedBernoulli(fg.tensor(0.5), probs=0.3), 1.2),
        (lambda: D.RelaxedOneHotCategorical(fg.tensor(0.5), probs=fg.ones(3)), [0.5, 0.6, 0.1]),
        (lambda: D.LogisticNormal(fg.zeros(2), fg.ones(2)), [0.5, 0.6, -0.1]),
        (lambda: D.NegativeBinomial(2.0, probs=0.5), 1.5),
        (lambda: D.Multinomial(3, probs=fg.ones(2)), [3.0, 1.0]),
        (lambda: D.FisherSnedecor(2.0, 3.0), -1.0),
        (lambda: D.InverseGamma(2.0, 3.0), -1.0),
        (lambda: D.GeneralizedPareto(0.0, 1.0, -0.5), 2.5),
        (
            lambda: D.MixtureSameFamily(
                D.Categorical(fg.ones(2)),
                D.Uniform(fg.tensor([0.0, 1.0]), fg.tensor([2.0, 3.0]), validate_args=False),
            ),
            0.5,
        ),
    ],
)
def test_values_outside_the_support_raise(make, value):
    d = make()
    with pytest.raises(ValueError, match="support"):
        d.log_prob(fg.tensor(value))
    # not with validate_args=False
    d._validate_args = False
    d.log_prob(fg.tensor(value))


def test_continuous_bernoulli_clamps_probs_without_validation_as_torch():
    d = D.ContinuousBernoulli(probs=fg.tensor([0.0, 1.0], dtype=fg.float64), validate_args=False)
    t = TD.ContinuousBernoulli(probs=torch.tensor([0.0, 1.0], dtype=torch.float64))
    close(d.probs, t.probs)
    close(d.mean, t.mean)


# --------------------------------------------------------------------------------- expand


@pytest.mark.parametrize(
    "name",
    [
        "StudentT",
        "Chi2",
        "Gumbel",
        "HalfNormal",
        "Weibull",
        "Pareto",
        "VonMises",
        "Multinomial",
        "NegativeBinomial",
        "RelaxedBernoulli",
        "RelaxedOneHotCategorical",
        "ContinuousBernoulli",
        "Kumaraswamy",
        "LowRankMultivariateNormal",
        "FisherSnedecor",
        "LogisticNormal",
        "InverseGamma",
        "GeneralizedPareto",
        "MixtureSameFamily",
    ],
)
def test_expand_equals_torch(name):
    d, _ = build(name, "fg")
    t, _ = build(name, "torch")
    new_batch = (2, *t.batch_shape)
    e, te = d.expand(new_batch), t.expand(new_batch)
    assert type(e) is type(d)
    assert tuple(e.batch_shape) == tuple(te.batch_shape)
    assert tuple(e.event_shape) == tuple(te.event_shape)
    v = CASES[name][2](CASES[name][1])
    v = np.expand_dims(v, v.ndim - len(t.batch_shape) - len(t.event_shape))
    close(e.log_prob(fg.tensor(v)), te.log_prob(torch.tensor(v)))
    fg.manual_seed(0)
    assert tuple(e.sample((3,)).shape) == tuple(te.sample((3,)).shape)
    assert e._validate_args == d._validate_args
