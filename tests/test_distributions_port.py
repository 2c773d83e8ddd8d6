"""Distributions compared with torch.distributions in float64: gradients at kinks,
transform signs and domains, ``expand``, transformed shapes/supports, Binomial's support."""

import ferrograd as fg
import numpy as np
import pytest


def _both(fn):
    """Run ``fn(lib)`` for ferrograd and torch; return (ferrograd result, torch result)."""
    torch = pytest.importorskip("torch")
    return fn(fg), fn(torch)


def _close(a, b, tol=1e-10):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def test_binomial_log_prob_grad_at_half_probability():
    def run(L):
        out = []
        p = L.tensor([0.5, 0.3], dtype=L.float64, requires_grad=True)
        lp = L.distributions.Binomial(4, probs=p).log_prob(L.tensor([3.0, 1.0], dtype=L.float64))
        out.append(L.autograd.grad(lp.sum(), [p])[0].tolist())
        lg = L.tensor([0.0, 1.5], dtype=L.float64, requires_grad=True)
        lp = L.distributions.Binomial(4, logits=lg).log_prob(L.tensor([3.0, 2.0], dtype=L.float64))
        out.append(L.autograd.grad(lp.sum(), [lg])[0].tolist())
        return out

    a, b = _both(run)
    _close(a, b)
    # d/dlogit of k*l - n*log(1+e^l) at l=0 is k - n/2
    assert a[1][0] == pytest.approx(3 - 4 / 2)


def test_multinomial_entropy_grad_with_half_probability():
    def run(L):
        p = L.tensor([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]], dtype=L.float64, requires_grad=True)
        e = L.distributions.Multinomial(4, probs=p).entropy().sum()
        return e.item(), L.autograd.grad(e, [p])[0].tolist()

    (ea, ga), (eb, gb) = _both(run)
    _close(ea, eb)
    _close(ga, gb, 1e-9)


def test_affine_and_compose_transform_sign_and_event_dims():
    def run(L):
        D = L.distributions
        a = D.AffineTransform(2.0, -3.0)
        c = D.ComposeTransform([D.ExpTransform(), D.AffineTransform(0.0, -1.0)])
        v = L.tensor([1.0, -2.0], dtype=L.float64)
        av = D.AffineTransform(L.zeros(2, dtype=L.float64), v, event_dim=1)
        cv = D.ComposeTransform([av, D.ExpTransform()])
        return (
            a.sign,
            c.sign,
            a.inv.sign,
            av.sign.tolist(),
            cv.sign.tolist(),
            av.domain.event_dim,
            av.codomain.event_dim,
            cv.domain.event_dim,
            cv.codomain.event_dim,
            bool(cv.codomain.check(L.tensor([1.0, -1.0], dtype=L.float64))),
        )

    a, b = _both(run)
    assert a == b


def _expanded_summary(L, name):
    D = L.distributions

    def t(x):
        return L.tensor(x, dtype=L.float64)

    if name == "LogNormal":
        d, v = D.LogNormal(t([0.0, 1.0]), t([1.0, 0.5])), t([0.7, 2.0])
    elif name == "Transformed":
        base = D.Normal(t([0.0, 1.0]), t([1.0, 0.5]))
        d = D.TransformedDistribution(base, [D.AffineTransform(1.0, 2.0), D.ExpTransform()])
        v = t([0.7, 2.0])
    elif name == "MultivariateNormal":
        cov = t([[2.0, 0.5], [0.5, 1.5]])
        d, v = (
            D.MultivariateNormal(t([[0.0, 1.0], [1.0, -1.0]]), covariance_matrix=cov),
            t([0.3, 0.1]),
        )
    else:
        cls = getattr(D, name)
        d, v = cls(t([[0.2, 0.8], [0.5, 0.5]])), t([0.0, 1.0])
    e = d.expand((3, 2))
    lp = e.log_prob(v)
    return (
        tuple(e.batch_shape),
        tuple(e.sample().shape),
        tuple(lp.shape),
        lp.tolist(),
        # (neither library gives a transformed distribution's mean)
        e.mean.tolist() if name != "Transformed" else None,
    )


@pytest.mark.parametrize(
    "name",
    [
        "LogNormal",
        "Transformed",
        "OneHotCategorical",
        "OneHotCategoricalStraightThrough",
        "MultivariateNormal",
    ],
)
def test_expand_takes_the_new_batch_shape(name):
    a, b = _both(lambda L: _expanded_summary(L, name))
    assert a[:3] == b[:3]
    _close(a[3], b[3])
    assert (a[4] is None) == (b[4] is None)
    if a[4] is not None:
        _close(a[4], b[4])


def test_transformed_distribution_event_shape_and_support():
    def run(L):
        D = L.distributions

        def t(x):
            return L.tensor(x, dtype=L.float64)

        base = D.Independent(D.Normal(t([0.0, 1.0]), t([1.0, 2.0])), 1)
        sb = D.TransformedDistribution(base, D.StickBreakingTransform())
        pos = D.TransformedDistribution(
            D.Normal(t([0.0]), t([1.0])),
            D.ComposeTransform([D.AffineTransform(0.0, 2.0), D.ExpTransform()]),
        )
        aff = D.AffineTransform(t([1.0, 2.0]), t([2.0, -1.0]), event_dim=1)
        folded = D.TransformedDistribution(D.Normal(t([0.0, 1.0]), t([1.0, 2.0])), aff)
        ind = D.TransformedDistribution(base, aff)
        y = t([0.2, 0.3, 0.5])
        v = t([0.3, 0.2])
        return (
            tuple(sb.event_shape),
            tuple(sb.batch_shape),
            tuple(sb.sample().shape),
            sb.log_prob(y).item(),
            type(pos.support).__name__.lstrip("_"),
            bool(pos.support.check(t([-1.0]))),
            tuple(folded.event_shape),
            folded.support.event_dim,
            folded.log_prob(v).item(),
            tuple(ind.event_shape),
            ind.support.event_dim,
            ind.log_prob(v).item(),
            tuple(ind.expand((4,)).log_prob(v).shape),
        )

    a, b = _both(run)
    assert a[:3] == b[:3] and a[4:8] == b[4:8] and a[9:11] == b[9:11] and a[12] == b[12]
    _close([a[3], a[8], a[11]], [b[3], b[8], b[11]])


def test_binomial_support_is_an_integer_interval_up_to_total_count():
    def run(L):
        def t(x):
            return L.tensor(x, dtype=L.float64)

        d = L.distributions.Binomial(t([5.0, 3.0]), t([0.5, 0.2]), validate_args=True)
        checks = d.support.check(t([[6.0, 3.0], [2.5, -1.0], [5.0, 0.0]])).tolist()
        try:
            d.log_prob(t([6.0, 1.0]))
            raised = False
        except ValueError:
            raised = True
        return checks, raised, d.log_prob(t([5.0, 3.0])).tolist()

    a, b = _both(run)
    assert a[:2] == b[:2] and a[1]
    _close(a[2], b[2])


def test_weibull_cdf_at_zero():
    def run(L):
        def t(x):
            return L.tensor(x, dtype=L.float64)

        w = L.distributions.Weibull(t([2.0, 1.0]), t([1.5, 0.5]), validate_args=True)
        try:
            w.cdf(t([-1.0, 1.0]))
            neg = False
        except ValueError:
            neg = True
        return w.cdf(t([0.0, 0.0])).tolist(), w.cdf(t([1.0, 3.0])).tolist(), neg

    a, b = _both(run)
    _close(a[0], b[0])
    _close(a[1], b[1])
    assert a[2] == b[2]


def test_categorical_log_prob_out_of_range_index_is_a_runtime_error():
    torch = pytest.importorskip("torch")
    for L in (fg, torch):
        c = L.distributions.Categorical(L.tensor([0.2, 0.8], dtype=L.float64), validate_args=False)
        with pytest.raises(RuntimeError):
            c.log_prob(L.tensor([2]))
    c = fg.distributions.Categorical(fg.tensor([0.2, 0.8], dtype=fg.float64), validate_args=False)
    with pytest.raises(IndexError, match="Categorical.log_prob"):
        c.log_prob(fg.tensor([2]))


def test_transform_equality_and_shapes():
    def run(L):
        D = L.distributions

        def t(x):
            return L.tensor(x, dtype=L.float64)

        sb = D.StickBreakingTransform()
        comp = D.ComposeTransform([D.AffineTransform(0.0, 2.0), sb])
        return (
            D.PowerTransform(t(2.0)) == D.PowerTransform(t(2.0)),
            D.PowerTransform(t(2.0)) == D.PowerTransform(t(3.0)),
            D.ComposeTransform([D.ExpTransform()]) == D.ComposeTransform([D.ExpTransform()]),
            D.AffineTransform(t([1.0, 2.0]), 2.0) == D.AffineTransform(t([1.0, 2.0]), 2.0),
            D.AffineTransform(t([1.0, 2.0]), 2.0) == D.AffineTransform(t([1.0, 3.0]), 2.0),
            D.AffineTransform(1.0, 2.0) != D.AffineTransform(1.0, 3.0),
            D.ExpTransform().inv == D.ExpTransform().inv,
            D.ExpTransform() == D.SigmoidTransform(),
            tuple(sb.forward_shape((4, 2))),
            tuple(sb.inverse_shape((4, 3))),
            tuple(sb.inv.forward_shape((4, 3))),
            tuple(comp.forward_shape((2,))),
            tuple(comp.inverse_shape((3,))),
        )

    a, b = _both(run)
    assert a == b
