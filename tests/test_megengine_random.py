"""``ferrograd.random`` as MegEngine's ``megengine.random``: the ``RNG`` class (streams of
their own, reproducible per seed), ``exponential`` / ``multinomial``, parameters broadcast
after ``size``, ``permutation`` of a tensor, and every sampler inside ``jit.trace``, where
each replay draws new numbers."""

import ferrograd as fg
import ferrograd.random as R
import numpy as np
import pytest
from ferrograd import jit


def _np(t):
    return np.asarray(t.numpy())


@pytest.mark.parametrize(
    "draw",
    [
        lambda m: m.uniform(size=(100,)),
        lambda m: m.normal(size=(100,)),
        lambda m: m.gamma(2, size=(100,)),
        lambda m: m.beta(2, 1, size=(100,)),
        lambda m: m.poisson(fg.tensor([2.0, 11.0]), size=(100,)),
        lambda m: m.exponential(fg.tensor([2.0, 10.0]), size=(100,)),
        lambda m: m.permutation(100),
        lambda m: m.multinomial(fg.tensor([[1.0, 2, 3, 4]]), 100, True),
    ],
)
def test_rng_is_reproducible_per_seed_and_apart_from_the_global_stream(draw):
    R.seed(5)
    expected_global = _np(R.uniform(size=(20,)))
    R.seed(5)
    a, b, c = R.RNG(seed=111), R.RNG(seed=111), R.RNG(seed=222)
    first = _np(draw(a))
    np.testing.assert_array_equal(first, _np(draw(b)))
    assert not (first == _np(draw(c))).all()
    assert not (first == _np(draw(a))).all()  # the stream moves on
    # the instances neither read nor advanced the global stream
    np.testing.assert_array_equal(_np(R.uniform(size=(20,))), expected_global)


def test_global_functions_follow_seed():
    R.seed(10)
    a = _np(R.exponential(1.5, (50,)))
    b = _np(R.multinomial(fg.tensor([1.0, 1, 1]), 50, True))
    R.seed(10)
    np.testing.assert_array_equal(_np(R.exponential(1.5, (50,))), a)
    np.testing.assert_array_equal(_np(R.multinomial(fg.tensor([1.0, 1, 1]), 50, True)), b)
    R.seed(11)
    assert not (_np(R.exponential(1.5, (50,))) == a).all()


def test_shapes_and_dtypes_follow_megengine():
    m = R.RNG(seed=1)
    assert m.uniform().shape == (1,) and m.normal().shape == (1,)
    assert m.uniform(size=5).shape == (5,)
    shape = fg.tensor([[2.0, 3, 4], [9, 10, 11]])
    scale = fg.tensor([0.5, 1, 1.5])
    assert m.gamma(shape, scale, size=(4, 5)).shape == (4, 5, 2, 3)
    assert m.gamma(shape, scale).shape == (2, 3)
    assert m.gamma(2.0, 1.0, size=3).shape == (3,)
    assert m.beta(shape, scale, size=(4,)).shape == (4, 2, 3)
    assert m.poisson(shape, size=(4,)).shape == (4, 2, 3)
    assert m.exponential(scale, size=(4, 5)).shape == (4, 5, 3)
    for t in [m.uniform(size=3), m.gamma(2, size=3), m.beta(2, 1, size=3)]:
        assert t.dtype.name == "float32"
    assert m.poisson(2.0, size=3).dtype.name == "float32"
    assert m.exponential(2.0, size=3).dtype.name == "float32"
    assert m.permutation(5).dtype.name == "int32"
    assert m.permutation(5, dtype="float32").dtype.name == "float32"
    w = fg.tensor([[1.0, 2, 3, 4], [0, 7, 2, 1]])
    assert m.multinomial(w, 3, True).shape == (2, 3)
    assert m.multinomial(w, 3).dtype.name == "int32"
    assert m.multinomial(fg.tensor([1.0, 2, 3, 4]), 3).shape == (3,)
    for shp in [(0,), (10, 0, 10)]:
        for t in [m.uniform(size=shp), m.gamma(2, size=shp), m.poisson(2, size=shp)]:
            assert t.shape == shp
        assert m.exponential(1.5, size=shp).shape == shp


def test_permutation_of_a_tensor_shuffles_rows_and_keeps_them():
    m = R.RNG(seed=3)
    assert m.permutation(fg.tensor(7)).shape == (1,)
    assert _np(m.permutation(fg.tensor(7))).tolist() == [7]
    x = fg.arange(18.0).reshape(6, 3)
    y = m.permutation(x)
    assert y.shape == (6, 3)
    rows = sorted(map(tuple, _np(y).tolist()))
    assert rows == sorted(map(tuple, _np(x).tolist()))
    np.testing.assert_array_equal(_np(x), np.arange(18.0).reshape(6, 3))  # a copy
    p = _np(m.permutation(1000))
    assert sorted(p.tolist()) == list(range(1000)) and (p == np.arange(1000)).sum() < 500
    z = fg.arange(18.0).reshape(6, 3)
    assert R.RNG(seed=4).shuffle(z) is None
    assert sorted(map(tuple, _np(z).tolist())) == sorted(map(tuple, _np(x).tolist()))
    assert not (_np(z) == _np(x)).all()


def test_statistics_of_large_samples():
    m = R.RNG(seed=7)
    shape = np.array([[0.3, 2, 4], [9, 10, 11]], np.float32)
    scale = np.array([0.5, 1, 1.5], np.float32)
    g = _np(m.gamma(fg.tensor(shape), fg.tensor(scale), size=(4000,)))
    np.testing.assert_allclose(g.mean(0), shape * scale, rtol=0.05)
    np.testing.assert_allclose(g.std(0), np.sqrt(shape) * scale, rtol=0.05)
    lam = np.array([0.5, 2, 9.5, 10, 30], np.float32)
    p = _np(m.poisson(fg.tensor(lam), size=(4000,)))
    np.testing.assert_allclose(p.mean(0), lam, rtol=0.05)
    np.testing.assert_allclose(p.var(0), lam, rtol=0.1)
    assert (p == np.round(p)).all()
    rate = np.array([0.5, 2, 10], np.float32)
    e = _np(m.exponential(fg.tensor(rate), size=(4000,)))
    np.testing.assert_allclose(e.mean(0), 1 / rate, rtol=0.05)
    np.testing.assert_allclose(e.std(0), 1 / rate, rtol=0.07)
    assert (e >= 0).all()
    b = _np(m.beta(2.0, 5.0, size=(4000,)))
    assert abs(b.mean() - 2 / 7) < 0.01 and ((b >= 0) & (b <= 1)).all()


def test_multinomial_probabilities():
    m = R.RNG(seed=9)
    w = np.array([[1, 2, 3, 4], [0, 7, 2, 1]], np.float32)
    probs = w / w.sum(-1, keepdims=True)
    out = _np(m.multinomial(fg.tensor(w), 20000, replacement=True))
    freq = np.stack([np.bincount(r, minlength=4) / 20000 for r in out])
    np.testing.assert_allclose(freq, probs, atol=0.015)
    assert (out[1] != 0).all()  # a zero weight is never drawn
    # without replacement: the first draw follows the weights, the rest never repeat
    firsts = np.zeros((2, 4))
    for _ in range(1500):
        o = _np(m.multinomial(fg.tensor(w), 3))
        assert all(len(set(r)) == 3 for r in o.tolist()) and (o[1] != 0).all()
        firsts[0, o[0, 0]] += 1
        firsts[1, o[1, 0]] += 1
    np.testing.assert_allclose(firsts / 1500, probs, atol=0.04)


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("which", ["rng", "global"])
def test_every_sampler_traces_and_draws_anew_on_each_replay(symbolic, which):
    R.seed(1)
    m = R.RNG(seed=21) if which == "rng" else R

    def step(lam):
        return (
            m.uniform(size=(4,)),
            m.normal(size=(4,)),
            m.gamma(fg.tensor([0.5, 2.0]), 1.0, size=(3,)),
            m.beta(2.0, 1.0, size=(4,)),
            m.poisson(lam, size=(3,)),
            m.exponential(1.5, size=(4,)),
            m.permutation(6),
            m.permutation(fg.arange(6.0)),
            m.multinomial(fg.tensor([[1.0, 2, 3, 4]]), 5, True),
            m.multinomial(fg.tensor([[1.0, 2, 3, 4]]), 2),
        )

    f = jit.trace(symbolic=symbolic)(step)
    lam = fg.tensor([2.0, 12.0])
    runs = [[_np(t) for t in f(lam)] for _ in range(4)]
    shapes = [(4,), (4,), (3, 2), (4,), (3, 2), (4,), (6,), (6,), (1, 5), (1, 2)]
    for run in runs:
        assert [r.shape for r in run] == shapes
        assert sorted(run[6].tolist()) == list(range(6))
        assert sorted(run[7].tolist()) == list(range(6))
        assert np.isfinite(run[2]).all() and (run[2] > 0).all()
    for i in range(len(shapes)):
        if i in (6, 7):
            assert len({tuple(r[i].tolist()) for r in runs}) > 1
        elif i == 9:
            continue  # two of four categories: replays may repeat
        else:
            assert not (runs[1][i] == runs[2][i]).all(), i
            assert not (runs[2][i] == runs[3][i]).all(), i


def test_traced_rejection_samplers_have_the_right_distribution():
    m = R.RNG(seed=5)
    k = fg.tensor([0.4, 1.0, 3.0, 20.0])
    lam = fg.tensor([0.7, 4.0, 10.0, 25.0])
    f = jit.trace(lambda k, lam: (m.gamma(k, 2.0, size=(5000,)), m.poisson(lam, size=(5000,))))
    g, p = (_np(t) for t in f(k, lam))
    kn, ln = _np(k), _np(lam)
    np.testing.assert_allclose(g.mean(0), 2 * kn, rtol=0.05)
    np.testing.assert_allclose(g.var(0), 4 * kn, rtol=0.1)
    np.testing.assert_allclose(p.mean(0), ln, rtol=0.05)
    np.testing.assert_allclose(p.var(0), ln, rtol=0.1)
    assert (p == np.round(p)).all() and (p >= 0).all()
    # a replay with other parameters follows them (not constants of the first run)
    g2, p2 = (_np(t) for t in f(k * 2, lam * 2))
    np.testing.assert_allclose(g2.mean(0), 4 * kn, rtol=0.05)
    np.testing.assert_allclose(p2.mean(0), 2 * ln, rtol=0.05)
    b = _np(jit.trace(lambda: m.beta(0.05, 0.05, size=(4000,)))())
    assert np.isfinite(b).all() and ((b >= 0) & (b <= 1)).all()
    assert abs(b.mean() - 0.5) < 0.05


def test_bad_arguments_raise_naming_the_function():
    m = R.RNG(seed=1)
    with pytest.raises(ValueError, match="gamma: shape"):
        m.gamma(-1.0, size=3)
    with pytest.raises(ValueError, match="exponential: rate"):
        R.exponential(0.0, size=3)
    with pytest.raises(ValueError, match="uniform: low"):
        m.uniform(2, 1, size=3)
    with pytest.raises(ValueError, match="permutation: n"):
        m.permutation(-1)
    with pytest.raises(ValueError, match="num_samples"):
        m.multinomial(fg.tensor([1.0, 2.0]), 3)
    with pytest.raises(ValueError, match="non-negative"):
        m.multinomial(fg.tensor([1.0, -2.0]), 1)
    with pytest.raises(TypeError, match="float"):
        m.multinomial(fg.tensor([1, 2]), 1)
    with pytest.raises(ValueError, match="1-D or 2-D"):
        m.multinomial(fg.ones(2, 2, 2), 1)
    with pytest.raises(ValueError, match="broadcast"):
        m.beta(fg.ones(2), fg.ones(3))
    with pytest.raises(TypeError, match="seed"):
        R.RNG(seed=1.5)
