"""fg.distributions against torch.distributions: log_prob, entropy, moments, cdf/icdf,
kl_divergence and their gradients in float64, reparameterized sampling, sample statistics,
argument validation; plus fg.finfo / fg.iinfo / fg.broadcast_shapes."""

from __future__ import annotations

import ferrograd as fg
import ferrograd.distributions as D
import numpy as np
import pytest
import torch
import torch.distributions as TD

RNG = np.random.default_rng(7)


def pos(*shape):
    return RNG.uniform(0.5, 2.0, shape)


def real(*shape):
    return RNG.normal(size=shape)


def unit(*shape):
    return RNG.uniform(0.1, 0.9, shape)


def spd(n, batch=()):
    a = RNG.normal(size=(*batch, n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def fgt(a, grad=True):
    return fg.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def tt(a, grad=True):
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def close(a, b, tol=1e-10):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# name -> (params as numpy arrays (keyword -> array), value generator for log_prob)
FAMILIES = {
    "Normal": ({"loc": real(3), "scale": pos(3)}, lambda: real(4, 3)),
    "LogNormal": ({"loc": real(3), "scale": pos(3)}, lambda: pos(4, 3)),
    "Laplace": ({"loc": real(2, 3), "scale": pos(3)}, lambda: real(2, 3)),
    "Exponential": ({"rate": pos(3)}, lambda: pos(5, 3)),
    "Gamma": ({"concentration": pos(3), "rate": pos(3)}, lambda: pos(2, 3)),
    "Beta": ({"concentration1": pos(3), "concentration0": pos(3)}, lambda: unit(3)),
    "Uniform": ({"low": -pos(3), "high": pos(3)}, lambda: RNG.uniform(-0.4, 0.4, (2, 3))),
    "Bernoulli": ({"probs": unit(3)}, lambda: RNG.integers(0, 2, (4, 3)).astype(float)),
    "BernoulliLogits": ({"logits": real(3)}, lambda: RNG.integers(0, 2, (3,)).astype(float)),
    "Geometric": ({"probs": unit(3)}, lambda: RNG.integers(0, 5, (2, 3)).astype(float)),
    "Poisson": ({"rate": pos(3)}, lambda: RNG.integers(0, 5, (2, 3)).astype(float)),
    "Binomial": (
        {"total_count": np.array([5.0, 7.0, 3.0]), "probs": unit(3)},
        lambda: np.array([[2.0, 7.0, 0.0]]),
    ),
    "Categorical": ({"probs": pos(2, 4)}, lambda: RNG.integers(0, 4, (3, 2)).astype(float)),
    "CategoricalLogits": ({"logits": real(2, 4)}, lambda: RNG.integers(0, 4, (2,)).astype(float)),
    "Dirichlet": ({"concentration": pos(2, 3)}, lambda: RNG.dirichlet([1, 2, 3], size=2)),
    "MultivariateNormal": (
        {"loc": real(2, 3), "covariance_matrix": spd(3)},
        lambda: real(4, 2, 3),
    ),
    "MultivariateNormalTril": (
        {"loc": real(3), "scale_tril": np.linalg.cholesky(spd(3, (2,)))},
        lambda: real(2, 3),
    ),
    "MultivariateNormalPrecision": (
        {"loc": real(3), "precision_matrix": spd(3)},
        lambda: real(3),
    ),
}
DIFFERENTIABLE = {"total_count"}  # parameters that are not differentiated


def build(name, params, lib):
    cls = name.replace("Logits", "").replace("Tril", "").replace("Precision", "")
    mod = D if lib == "fg" else TD
    make = fgt if lib == "fg" else tt
    ts = {k: make(v, grad=k not in DIFFERENTIABLE) for k, v in params.items()}
    return getattr(mod, cls)(**ts), ts


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_log_prob_and_its_gradients_equal_torch(name):
    params, values = FAMILIES[name]
    d, fp = build(name, params, "fg")
    t, tp = build(name, params, "torch")
    v = values()
    ours = d.log_prob(fg.tensor(v))
    theirs = t.log_prob(torch.tensor(v))
    close(ours, theirs)
    w = RNG.normal(size=theirs.shape)
    (ours * fg.tensor(w)).sum().backward()
    (theirs * torch.tensor(w)).sum().backward()
    for k in fp:
        if k in DIFFERENTIABLE:
            continue
        assert fp[k].grad is not None, k
        close(fp[k].grad, tp[k].grad, 1e-9)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_moments_and_entropy_equal_torch(name):
    params, _ = FAMILIES[name]
    d, fp = build(name, params, "fg")
    t, tp = build(name, params, "torch")
    assert tuple(d.batch_shape) == tuple(t.batch_shape)
    assert tuple(d.event_shape) == tuple(t.event_shape)
    for prop in ("mean", "variance", "stddev", "mode"):
        try:
            theirs = getattr(t, prop)
        except NotImplementedError:
            continue
        close(getattr(d, prop), theirs, 1e-9)
    if name in ("Poisson", "Geometric", "Binomial"):
        return  # torch has no closed-form entropy for these (Geometric's is checked below)
    ours, theirs = d.entropy(), t.entropy()
    close(ours, theirs, 1e-9)
    ours.sum().backward()
    theirs.sum().backward()
    for k in fp:
        if k not in DIFFERENTIABLE and tp[k].grad is not None:
            close(fp[k].grad, tp[k].grad, 1e-9)


def test_geometric_entropy_equals_torch():
    p = unit(4)
    close(D.Geometric(fgt(p)).entropy(), TD.Geometric(tt(p)).entropy())


@pytest.mark.parametrize("name", ["Normal", "LogNormal", "Laplace", "Exponential", "Uniform"])
def test_cdf_and_icdf_equal_torch(name):
    params, values = FAMILIES[name]
    d, _ = build(name, params, "fg")
    t, _ = build(name, params, "torch")
    v = values()
    close(d.cdf(fg.tensor(v)), t.cdf(torch.tensor(v)))
    q = RNG.uniform(0.05, 0.95, (2, 3))
    close(d.icdf(fg.tensor(q)), t.icdf(torch.tensor(q)))


KL_PAIRS = [
    ("Normal", "Normal"),
    ("LogNormal", "LogNormal"),
    ("Laplace", "Laplace"),
    ("Exponential", "Exponential"),
    ("Gamma", "Gamma"),
    ("Beta", "Beta"),
    ("Poisson", "Poisson"),
    ("Bernoulli", "Bernoulli"),
    ("Categorical", "Categorical"),
    ("CategoricalLogits", "Categorical"),
    ("Dirichlet", "Dirichlet"),
    ("MultivariateNormal", "MultivariateNormalTril"),
    ("MultivariateNormalPrecision", "MultivariateNormal"),
]


@pytest.mark.parametrize("pair", KL_PAIRS, ids=lambda p: "-".join(p))
def test_kl_divergence_and_its_gradients_equal_torch(pair):
    pn, qn = pair
    pp, _ = FAMILIES[pn]
    scale = {"loc": lambda v: v - 0.2, "probs": lambda v: v * 0.8}
    qp = {k: scale.get(k, lambda v: v * 1.3)(v) for k, v in FAMILIES[qn][0].items()}
    if qn == "Categorical":
        qp = {"probs": pos(2, 4)}
    if qn.startswith("MultivariateNormal"):
        qp = dict(FAMILIES[qn][0])
    dp, fpp = build(pn, pp, "fg")
    dq, fqp = build(qn, qp, "fg")
    tp_, tpp = build(pn, pp, "torch")
    tq, tqp = build(qn, qp, "torch")
    ours, theirs = D.kl_divergence(dp, dq), TD.kl_divergence(tp_, tq)
    close(ours, theirs, 1e-9)
    ours.sum().backward()
    theirs.sum().backward()
    for mine, ref in ((fpp, tpp), (fqp, tqp)):
        for k in mine:
            if ref[k].grad is not None:
                close(mine[k].grad, ref[k].grad, 1e-8)


def test_kl_uniform_uniform_and_uniform_normal_equal_torch():
    lo, hi = -pos(3), pos(3)
    p, tp_ = D.Uniform(fgt(lo), fgt(hi)), TD.Uniform(tt(lo), tt(hi))
    q, tq = D.Uniform(fgt(lo - 1), fgt(hi + 0.5)), TD.Uniform(tt(lo - 1), tt(hi + 0.5))
    close(D.kl_divergence(p, q), TD.kl_divergence(tp_, tq))
    # q narrower than p: infinite, as torch
    assert np.isinf(D.kl_divergence(q, p).numpy()).all()
    n, tn = D.Normal(fgt(real(3)), fgt(pos(3))), None
    tn = TD.Normal(torch.tensor(n.loc.numpy()), torch.tensor(n.scale.numpy()))
    close(D.kl_divergence(p, n), TD.kl_divergence(tp_, tn))


def test_kl_of_an_unregistered_pair_raises_and_register_kl_adds_one():
    p, q = D.Normal(0.0, 1.0), D.Exponential(1.0)
    with pytest.raises(NotImplementedError, match="Normal.*Exponential"):
        D.kl_divergence(p, q)

    class MyNormal(D.Normal):
        pass

    @D.register_kl(MyNormal, D.Exponential)
    def _kl(p, q):
        return p.loc * 0 + 42.0

    assert D.kl_divergence(MyNormal(0.0, 1.0), q).item() == 42.0
    # a subclass falls back to its base class's rule
    m = MyNormal(fg.tensor(0.5), fg.tensor(2.0))
    assert (
        abs(D.kl_divergence(m, D.Normal(0.0, 1.0)).item() - 0.5 * (4 + 0.25 - 1 - np.log(4))) < 1e-6
    )


def test_independent_sums_the_reinterpreted_dimensions_like_torch():
    loc, scale, v = real(2, 3), pos(2, 3), real(5, 2, 3)
    d = D.Independent(D.Normal(fgt(loc), fgt(scale)), 1)
    t = TD.Independent(TD.Normal(tt(loc), tt(scale)), 1)
    assert tuple(d.batch_shape) == (2,) and tuple(d.event_shape) == (3,)
    close(d.log_prob(fg.tensor(v)), t.log_prob(torch.tensor(v)))
    close(d.entropy(), t.entropy())
    d2 = D.Independent(D.Normal(fgt(loc * 0), fgt(scale * 2)), 1)
    t2 = TD.Independent(TD.Normal(tt(loc * 0), tt(scale * 2)), 1)
    close(D.kl_divergence(d, d2), TD.kl_divergence(t, t2))
    assert d.has_rsample and tuple(d.rsample((4,)).shape) == (4, 2, 3)


def test_onehot_categorical_matches_torch():
    p = pos(2, 4)
    d, t = D.OneHotCategorical(probs=fgt(p)), TD.OneHotCategorical(probs=tt(p))
    v = np.eye(4)[[[1, 3], [0, 0]]]
    close(d.log_prob(fg.tensor(v)), t.log_prob(torch.tensor(v)))
    close(d.entropy(), t.entropy())
    s = d.sample((6,))
    assert tuple(s.shape) == (6, 2, 4) and (s.numpy().sum(-1) == 1).all()
    close(d.enumerate_support(), t.enumerate_support())


# ----------------------------------------------------------------------------- sampling


def test_rsample_carries_the_reparameterization_gradient():
    fg.manual_seed(0)
    loc, scale = fgt([0.5, -1.0]), fgt([2.0, 0.5])
    x = D.Normal(loc, scale).rsample((1000,))
    x.sum().backward()
    eps = (x.detach().numpy() - loc.detach().numpy()) / scale.detach().numpy()
    close(loc.grad, np.full(2, 1000.0))
    close(scale.grad, eps.sum(0), 1e-9)
    # sample() does not record
    assert D.Normal(loc, scale).sample((3,)).requires_grad is False


def test_mvn_rsample_is_loc_plus_scale_tril_times_a_normal_draw():
    fg.manual_seed(3)
    lo = np.linalg.cholesky(spd(3))
    d = D.MultivariateNormal(fgt(real(3)), scale_tril=fgt(lo))
    x = d.rsample((20000,)).detach().numpy()
    np.testing.assert_allclose(np.cov(x.T), lo @ lo.T, rtol=0.06, atol=0.06)
    np.testing.assert_allclose(x.mean(0), d.loc.detach().numpy(), atol=0.05)


@pytest.mark.parametrize(
    "make, mean, var",
    [
        (lambda: D.Normal(1.5, 2.0), 1.5, 4.0),
        (lambda: D.Uniform(-1.0, 3.0), 1.0, 16 / 12),
        (lambda: D.Exponential(2.0), 0.5, 0.25),
        (lambda: D.Laplace(0.5, 1.0), 0.5, 2.0),
        (lambda: D.Gamma(3.0, 2.0), 1.5, 0.75),
        (lambda: D.Beta(2.0, 3.0), 0.4, 0.04),
        (lambda: D.Poisson(4.0), 4.0, 4.0),
        (lambda: D.Bernoulli(0.3), 0.3, 0.21),
        (lambda: D.Geometric(0.4), 1.5, 3.75),
        (lambda: D.Binomial(10, fg.tensor(0.3)), 3.0, 2.1),
        (lambda: D.LogNormal(0.0, 0.5), np.exp(0.125), (np.exp(0.25) - 1) * np.exp(0.25)),
    ],
)
def test_samples_have_the_distribution_moments(make, mean, var):
    fg.manual_seed(1)
    d = make()
    x = d.sample((40000,)).numpy().astype(np.float64)
    assert x.shape == (40000,)
    assert abs(x.mean() - mean) < 5 * np.sqrt(var / 40000) + 1e-3
    assert abs(x.var() - var) < 0.05 * var + 1e-3


def test_categorical_samples_follow_the_probabilities_and_are_reproducible():
    probs = fg.tensor([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]])
    fg.manual_seed(5)
    s = D.Categorical(probs=probs).sample((20000,))
    assert tuple(s.shape) == (20000, 2) and s.dtype == fg.int64
    freq = np.stack([np.bincount(s.numpy()[:, i], minlength=3) / 20000 for i in range(2)])
    np.testing.assert_allclose(freq, probs.numpy(), atol=0.015)
    assert (s.numpy()[:, 1] != 2).all()  # probability 0 never drawn
    fg.manual_seed(5)
    assert (D.Categorical(probs=probs).sample((20000,)).numpy() == s.numpy()).all()


def test_a_reinforce_update_equals_torch():
    """The policy-gradient loss of pytorch/examples' reinforce.py, from the same weights."""
    w = RNG.normal(size=(4, 3)) * 0.5
    obs = RNG.normal(size=(6, 4))
    actions = np.array([0, 2, 1, 1, 0, 2])
    returns = RNG.normal(size=6)

    def loss(lib, W):
        mod = fg if lib == "fg" else torch
        dist = (D if lib == "fg" else TD).Categorical(
            probs=mod.softmax(mod.tensor(obs) @ W, dim=-1)
        )
        r = mod.tensor(returns)
        r = (r - r.mean()) / (r.std() + np.finfo(np.float32).eps.item())
        lp = dist.log_prob(mod.tensor(actions))
        return (-lp * r).sum() + 0.01 * -dist.entropy().mean()

    wf, wt = fgt(w), tt(w)
    lf, lt = loss("fg", wf), loss("torch", wt)
    close(lf, lt)
    lf.backward()
    lt.backward()
    close(wf.grad, wt.grad)


def test_a_vae_loss_with_rsample_and_kl_equals_torch():
    mu, logvar = real(5, 2), real(5, 2) * 0.3
    fm, fl, tm, tl = fgt(mu), fgt(logvar), tt(mu), tt(logvar)
    q = D.Normal(fm, (0.5 * fl).exp())
    tq = TD.Normal(tm, (0.5 * tl).exp())
    prior, tprior = D.Normal(0.0, 1.0), TD.Normal(0.0, 1.0)
    kl = D.kl_divergence(q, prior).sum()
    tkl = TD.kl_divergence(tq, tprior).sum()
    close(kl, tkl)
    kl.backward()
    tkl.backward()
    close(fm.grad, tm.grad)
    close(fl.grad, tl.grad)


# --------------------------------------------------------------------------- validation


def test_bad_parameters_raise_value_errors_naming_the_parameter():
    with pytest.raises(ValueError, match="scale"):
        D.Normal(0.0, -1.0)
    with pytest.raises(ValueError, match="probs"):
        D.Bernoulli(probs=fg.tensor([0.2, 1.5]))
    with pytest.raises(ValueError, match="not both"):
        D.Categorical(probs=fg.tensor([0.5, 0.5]), logits=fg.tensor([0.0, 0.0]))
    with pytest.raises(ValueError, match="at least one-dimensional"):
        D.Categorical(probs=fg.tensor(1.0))
    with pytest.raises(ValueError, match="low"):
        D.Uniform(1.0, 0.0)
    with pytest.raises(ValueError, match="Exactly one"):
        D.MultivariateNormal(fg.zeros(2))
    # no validation when asked
    D.Normal(0.0, -1.0, validate_args=False)


def test_values_outside_the_support_raise_and_shapes_are_checked():
    with pytest.raises(ValueError, match="support"):
        D.Bernoulli(0.3).log_prob(fg.tensor(0.5))
    with pytest.raises(ValueError, match="support"):
        D.Categorical(probs=fg.tensor([0.5, 0.5])).log_prob(fg.tensor(2))
    with pytest.raises(ValueError, match="support"):
        D.Exponential(1.0).log_prob(fg.tensor(-1.0))
    with pytest.raises(ValueError, match="event_shape"):
        D.MultivariateNormal(fg.zeros(3), fg.eye(3)).log_prob(fg.zeros(2))
    # the distribution still works after a refused value
    assert abs(D.Bernoulli(0.3).log_prob(fg.tensor(1.0)).item() - np.log(0.3)) < 1e-6


def test_set_default_validate_args_turns_checks_off():
    D.Distribution.set_default_validate_args(False)
    try:
        D.Normal(0.0, -1.0)
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Normal(0.0, -1.0)


def test_log_prob_broadcasts_values_like_torch():
    probs = pos(3, 4)
    d, t = D.Categorical(probs=fgt(probs)), TD.Categorical(probs=tt(probs))
    v = np.arange(4).reshape(4, 1).astype(float)
    close(d.log_prob(fg.tensor(v)), t.log_prob(torch.tensor(v)))
    close(d.enumerate_support(), t.enumerate_support())
    e = d.expand((2, 3))
    assert tuple(e.batch_shape) == (2, 3) and tuple(e.sample().shape) == (2, 3)


def test_a_traced_step_through_normal_log_prob_and_rsample_equals_eager():
    loc, scale = fg.tensor([0.2, -0.3]), fg.tensor([1.5, 0.7])
    gm = fg.GradManager().attach([loc, scale])
    x = fg.tensor([[0.1, 0.4], [-1.0, 2.0]])

    def step(x):
        with gm:
            lp = D.Normal(loc, scale).log_prob(x).sum()
            gm.backward(-lp)
        return lp

    eager = step(x).item()
    g_eager = (loc.grad.numpy().copy(), scale.grad.numpy().copy())
    loc.grad = scale.grad = None
    traced = fg.trace(step)
    for _ in range(2):
        loc.grad = scale.grad = None
        out = traced(x).item()
    assert abs(out - eager) < 1e-5
    np.testing.assert_allclose(loc.grad.numpy(), g_eager[0], rtol=1e-5)
    np.testing.assert_allclose(scale.grad.numpy(), g_eager[1], rtol=1e-5)


# ----------------------------------------------------------------------- finfo, iinfo


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_finfo_equals_torch(name):
    ours, theirs = fg.finfo(getattr(fg, name)), torch.finfo(getattr(torch, name))
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert fg.finfo().eps == torch.finfo().eps
    with pytest.raises(TypeError, match="floating"):
        fg.finfo(fg.int64)


@pytest.mark.parametrize("name", ["uint8", "int8", "int32", "int64"])
def test_iinfo_equals_torch(name):
    ours, theirs = fg.iinfo(getattr(fg, name)), torch.iinfo(getattr(torch, name))
    assert (ours.bits, ours.min, ours.max) == (theirs.bits, theirs.min, theirs.max)
    with pytest.raises(TypeError, match="integer"):
        fg.iinfo(fg.float32)


def test_broadcast_shapes_equals_torch_and_names_the_mismatch():
    for shapes in [((3, 1), (4,)), ((2, 1, 5), (1, 3, 1), ()), ((0, 1), (3,)), (5, (2, 1))]:
        assert tuple(fg.broadcast_shapes(*shapes)) == tuple(torch.broadcast_shapes(*shapes))
    with pytest.raises(fg.ShapeError, match=r"\(3,\)"):
        fg.broadcast_shapes((2, 4), (3,))


@pytest.mark.parametrize(
    "make, value",
    [
        (lambda L: [L.TanhTransform()], [0.5, -0.9]),
        (lambda L: [L.AffineTransform(1.0, 2.0), L.ExpTransform()], [0.6, 1.4]),
        (lambda L: [L.SigmoidTransform()], [0.3, 0.8]),
        (
            lambda L: [L.ComposeTransform([L.AffineTransform(0.5, 3.0), L.TanhTransform()])],
            [0.2, -0.7],
        ),
    ],
)
def test_transformed_distribution_log_prob_and_gradient_equal_torch(make, value):
    mu, sd = real(2), pos(2)
    fm, tm = fgt(mu), tt(mu)
    ours = D.TransformedDistribution(D.Normal(fm, fgt(sd, False)), make(D))
    theirs = TD.TransformedDistribution(TD.Normal(tm, tt(sd, False)), make(TD))
    v = np.array(value, dtype=np.float64)
    a, b = ours.log_prob(fg.tensor(v)), theirs.log_prob(torch.tensor(v))
    close(a, b, 1e-12)
    a.sum().backward()
    b.sum().backward()
    close(fm.grad, tm.grad, 1e-12)


def test_tanh_squashed_gaussian_samples_with_a_cache():
    """SAC's policy: rsample through TanhTransform(cache_size=1), log_prob of the sample."""
    fg.manual_seed(0)
    mu, sd = fgt([0.0, 3.0]), fgt([1.0, 0.5])
    d = D.TransformedDistribution(D.Normal(mu, sd), [D.TanhTransform(cache_size=1)])
    y = d.rsample((5,))
    assert tuple(y.shape) == (5, 2) and (y.detach().numpy() < 1).all()
    lp = d.log_prob(y)
    assert np.isfinite(lp.detach().numpy()).all()
    lp.sum().backward()
    assert mu.grad is not None and np.isfinite(mu.grad.numpy()).all()
