"""Creation, random, movement/indexing and reduction ops written over the engine's ops
(``ferrograd._ops``): forward values against numpy (and PyTorch when installed), gradients
against finite differences in float64, on contiguous tensors and on non-contiguous views."""

from __future__ import annotations

import math
import warnings

import ferrograd as fg
import numpy as np
import pytest
from conftest import check_grad
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, shape)


def distinct(*shape, seed=0):
    """Values with distinct entries (for max/argmax gradients, away from ties)."""
    n = int(np.prod(shape))
    return np.random.default_rng(seed).permutation(n).reshape(shape) * 0.25 - n / 8


shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)

# ------------------------------------------------------------------------------- creation


def test_arange_linspace_eye():
    assert fg.arange(5).dtype == fg.int64
    np.testing.assert_array_equal(fg.arange(5).numpy(), np.arange(5))
    np.testing.assert_array_equal(fg.arange(2, 11, 3).numpy(), np.arange(2, 11, 3))
    np.testing.assert_array_equal(fg.arange(5, 0, -2).numpy(), np.arange(5, 0, -2))
    a = fg.arange(0, 1, 0.25)
    assert a.dtype == fg.float32
    np.testing.assert_allclose(a.numpy(), [0, 0.25, 0.5, 0.75])
    assert fg.arange(3, dtype=fg.float64).dtype == fg.float64
    np.testing.assert_allclose(fg.linspace(-1, 1, 5).numpy(), np.linspace(-1, 1, 5))
    np.testing.assert_array_equal(fg.eye(3).numpy(), np.eye(3))
    np.testing.assert_array_equal(fg.eye(2, 4, dtype="int64").numpy(), np.eye(2, 4))
    with pytest.raises(ValueError, match="arange"):
        fg.arange(0, 5, 0)
    with pytest.raises(ValueError, match="arange"):
        fg.arange(5, 0, 1)


def test_full_infers_dtype_like_pytorch():
    assert fg.full((2,), 3).dtype == fg.int64
    assert fg.full((2,), 3.0).dtype == fg.float32
    assert fg.full((2,), True).dtype == fg.bool_
    assert fg.full((2,), 3, dtype="float64").dtype == fg.float64
    x = fg.tensor([[1.0, 2.0]], dtype="float64")
    y = fg.full_like(x, 7)
    assert y.dtype == fg.float64 and y.shape == (1, 2) and y.numpy().tolist() == [[7, 7]]
    e = fg.empty(2, 3)
    assert e.shape == (2, 3) and e.dtype == fg.float32
    assert fg.empty_like(x).shape == (1, 2)


@pytest.mark.parametrize("k", [-1, 0, 2])
def test_tril_triu(k):
    a = rnd(2, 3, 4)
    np.testing.assert_array_equal(fg.tril(fg.tensor(a), k).numpy(), np.tril(a, k))
    np.testing.assert_array_equal(fg.tensor(a).triu(k).numpy(), np.triu(a, k))
    check_grad(lambda x: fg.tril(x, k), [a])
    check_grad(lambda x: x.triu(k), [a])


# --------------------------------------------------------------------------------- random


def test_random_is_reproducible_and_distributed():
    fg.manual_seed(123)
    a = [fg.rand(1000).numpy(), fg.randn(1000).numpy(), fg.randint(0, 7, (1000,)).numpy()]
    fg.manual_seed(123)
    b = [fg.rand(1000).numpy(), fg.randn(1000).numpy(), fg.randint(0, 7, (1000,)).numpy()]
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    u, z, i = a
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.05
    assert abs(z.mean()) < 0.15 and abs(z.std() - 1) < 0.1
    assert i.min() == 0 and i.max() == 6 and fg.randint(3, (4,)).dtype == fg.int64
    p = fg.randperm(10).numpy()
    assert sorted(p.tolist()) == list(range(10))
    fg.manual_seed(124)
    assert not np.array_equal(fg.rand(1000).numpy(), u)


def test_bernoulli_normal_multinomial_inplace():
    fg.manual_seed(0)
    probs = fg.tensor(np.full((2000,), 0.3))
    s = fg.bernoulli(probs).numpy()
    assert set(np.unique(s)) <= {0.0, 1.0} and abs(s.mean() - 0.3) < 0.05
    n = fg.normal(2.0, 0.5, (2000,)).numpy()
    assert abs(n.mean() - 2.0) < 0.05 and abs(n.std() - 0.5) < 0.05
    m = fg.normal(fg.tensor([0.0, 100.0]), 1.0)
    assert m.shape == (2,) and m.numpy()[1] > 90
    w = fg.tensor([[0.0, 1.0, 0.0], [0.5, 0.0, 0.5]])
    draws = fg.multinomial(w, 2, replacement=True).numpy()
    assert draws.shape == (2, 2) and (draws[0] == 1).all() and set(draws[1]) <= {0, 2}
    nr = fg.multinomial(fg.tensor([1.0, 1.0, 1.0, 1.0]), 4).numpy()
    assert sorted(nr.tolist()) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="multinomial"):
        fg.multinomial(fg.tensor([1.0, 0.0]), 2)
    x = fg.zeros(500)
    assert x.uniform_(-1, 1) is x
    v = x.numpy()
    assert v.min() >= -1 and v.max() < 1 and v.std() > 0.4
    x.normal_(5.0, 0.1)
    assert abs(x.numpy().mean() - 5) < 0.05


# ------------------------------------------------------------------- movement and indexing


def test_flatten_unflatten_view_contiguous():
    a = rnd(2, 3, 4, 5)
    x = fg.tensor(a)
    assert x.flatten().shape == (120,)
    assert x.flatten(1).shape == (2, 60)
    assert fg.flatten(x, 1, 2).shape == (2, 12, 5)
    assert x.flatten(-2).shape == (2, 3, 20)
    assert x.unflatten(1, (3, 1)).shape == (2, 3, 1, 4, 5)
    assert x.unflatten(-1, (-1, 5)).shape == (2, 3, 4, 1, 5)
    assert x.view(6, -1).shape == (6, 20)
    assert x.contiguous() is x and x.is_contiguous()
    t = x.transpose(0, 1, 3, 2)
    assert not t.is_contiguous()
    c = t.contiguous()
    assert c.is_contiguous()
    np.testing.assert_array_equal(c.numpy(), a.transpose(0, 1, 3, 2))
    assert x.unsqueeze(1).shape == (2, 1, 3, 4, 5) and x.unsqueeze(-1).shape == (2, 3, 4, 5, 1)
    assert x[:, :1].expand(-1, 3, -1, -1).shape == (2, 3, 4, 5)
    check_grad(lambda x: x.flatten(1).unflatten(1, (4, 3)), [rnd(2, 3, 4)])


def test_split_chunk_narrow_cat():
    a = rnd(7, 3)
    x = fg.tensor(a)
    parts = fg.split(x, 3)
    assert [p.shape[0] for p in parts] == [3, 3, 1]
    np.testing.assert_array_equal(parts[2].numpy(), a[6:])
    assert [p.shape[1] for p in x.split([1, 2], dim=1)] == [1, 2]
    assert [p.shape[0] for p in x.chunk(3)] == [3, 3, 1]  # as torch.chunk
    np.testing.assert_array_equal(x.narrow(0, 2, 3).numpy(), a[2:5])
    np.testing.assert_array_equal(fg.cat(parts, dim=0).numpy(), a)
    np.testing.assert_array_equal(fg.cat(list(x.split(1, 1)), 1).numpy(), a)
    with pytest.raises(fg.ShapeError, match="split"):
        x.split([2, 2])
    with pytest.raises(IndexError, match="narrow"):
        x.narrow(0, 5, 3)
    check_grad(lambda x: fg.cat([p * (i + 1) for i, p in enumerate(x.chunk(3))], 0), [a])


@given(shapes, st.data())
def test_tile_repeat_flip_roll(shape, data):
    a = rnd(*shape)
    reps = data.draw(st.lists(st.integers(1, 3), min_size=len(shape), max_size=len(shape) + 1))
    x = fg.tensor(a)
    np.testing.assert_array_equal(x.repeat(*reps).numpy(), np.tile(a, reps))
    np.testing.assert_array_equal(fg.tile(x, reps[-1:]).numpy(), np.tile(a, reps[-1:]))
    dims = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)))
    np.testing.assert_array_equal(x.flip(dims).numpy(), np.flip(a, dims))
    s = data.draw(st.integers(-5, 5))
    np.testing.assert_array_equal(x.roll(s, 0).numpy(), np.roll(a, s, 0))
    np.testing.assert_array_equal(fg.roll(x, s).numpy(), np.roll(a, s))


def test_tile_repeat_flip_roll_grads():
    a = rnd(2, 3)
    check_grad(lambda x: x.repeat(2, 1, 2), [a])
    check_grad(lambda x: x.flip([0, 1]) * x, [a])
    check_grad(lambda x: x.roll((1, -1), (0, 1)) * x, [a])


def test_gather_scatter_against_torch_semantics():
    a = rnd(3, 4)
    idx = np.array([[0, 3], [1, 1], [2, 0]])
    x = fg.tensor(a)
    g = fg.gather(x, 1, fg.tensor(idx))
    np.testing.assert_array_equal(g.numpy(), np.take_along_axis(a, idx, 1))
    # the index may be smaller than the input on the other axes
    np.testing.assert_array_equal(x.gather(0, fg.tensor([[2, 0]])).numpy(), [[a[2, 0], a[0, 1]]])
    check_grad(lambda x: x.gather(1, fg.tensor(idx)), [a])
    src = rnd(3, 2, seed=1)
    out = fg.scatter(x, 1, fg.tensor(idx[:, :1]), fg.tensor(src[:, :1])).numpy()
    expect = a.copy()
    for i in range(3):
        expect[i, idx[i, 0]] = src[i, 0]
    np.testing.assert_array_equal(out, expect)
    sa = fg.scatter_add(x, 1, fg.tensor(idx), fg.tensor(src)).numpy()
    expect = a.copy()
    np.add.at(expect, (np.arange(3)[:, None], idx), src)
    np.testing.assert_allclose(sa, expect)
    check_grad(lambda x, s: x.scatter_add(1, fg.tensor(idx), s), [a, src])
    check_grad(lambda x, s: x.scatter(1, fg.tensor(idx[:, :1]), s[:, :1]), [a, src])
    v = fg.zeros(2, 3).scatter(1, fg.tensor([[2], [0]]), value=5.0).numpy()
    np.testing.assert_array_equal(v, [[0, 0, 5], [5, 0, 0]])
    m = fg.ones(2, 3).scatter(
        1, fg.tensor([[1, 1], [0, 2]]), fg.full((2, 2), 3.0), reduce="multiply"
    )
    np.testing.assert_array_equal(m.numpy(), [[1, 9, 1], [3, 1, 3]])


def test_index_add_masked():
    a = rnd(4, 3)
    src = rnd(3, 3, seed=2)
    idx = np.array([0, 2, 0])
    out = fg.index_add(fg.tensor(a), 0, fg.tensor(idx), fg.tensor(src), alpha=2).numpy()
    expect = a.copy()
    np.add.at(expect, idx, 2 * src)
    np.testing.assert_allclose(out, expect)
    check_grad(lambda x, s: x.index_add(0, fg.tensor(idx), s), [a, src])
    mask = a > 0
    np.testing.assert_array_equal(
        fg.tensor(a).masked_fill(fg.tensor(mask), -1.0).numpy(), np.where(mask, -1, a)
    )
    np.testing.assert_array_equal(fg.tensor(a).masked_select(fg.tensor(mask)).numpy(), a[mask])
    check_grad(lambda x: x.masked_fill(fg.tensor(mask), 0.0), [a])
    check_grad(lambda x: x.masked_select(fg.tensor(mask[:1])) * 2, [a])  # mask broadcasts
    i = fg.tensor([1, 2, 3])
    assert i.masked_fill(fg.tensor([True, False, True]), 0).dtype == fg.int64
    t = fg.tensor(a.copy())
    t.masked_fill_(fg.tensor(mask), 0.0)
    np.testing.assert_array_equal(t.numpy(), np.where(mask, 0, a))
    with pytest.raises(fg.DTypeError, match="masked_fill"):
        fg.tensor(a).masked_fill(fg.tensor(a), 0.0)


def test_one_hot():
    y = fg.tensor([0, 2, 1, 2])
    oh = fg.one_hot(y, 4)
    assert oh.dtype == fg.int64
    np.testing.assert_array_equal(oh.numpy(), np.eye(4, dtype=np.int64)[[0, 2, 1, 2]])
    assert fg.one_hot(y).shape == (4, 3)
    assert fg.one_hot(fg.tensor([[1], [0]]), 2).shape == (2, 1, 2)
    with pytest.raises(ValueError, match="one_hot"):
        fg.one_hot(y, 2)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad(mode):
    a = rnd(2, 3, 4)
    pads = (1, 2, 2, 1)
    np_mode = {
        "constant": "constant",
        "reflect": "reflect",
        "replicate": "edge",
        "circular": "wrap",
    }[mode]
    expect = np.pad(a, [(0, 0), (2, 1), (1, 2)], mode=np_mode)
    np.testing.assert_array_equal(fg.pad(fg.tensor(a), pads, mode=mode).numpy(), expect)
    check_grad(lambda x: fg.pad(x, pads, mode=mode), [a])


def test_pad_constant_value_and_crop():
    a = rnd(3, 4)
    out = fg.pad(fg.tensor(a), (1, 0), value=9.0).numpy()
    np.testing.assert_array_equal(out, np.pad(a, [(0, 0), (1, 0)], constant_values=9))
    np.testing.assert_array_equal(fg.pad(fg.tensor(a), (-1, 1)).numpy()[:, :3], a[:, 1:])
    with pytest.raises(ValueError, match="reflect"):
        fg.pad(fg.tensor(a), (4, 0), mode="reflect")


# ------------------------------------------------------------------------------ reductions


@given(shapes, st.data())
def test_reductions_forward(shape, data):
    a = rnd(*shape, seed=data.draw(st.integers(0, 9)))
    d = data.draw(st.integers(-len(shape), len(shape) - 1))
    keep = data.draw(st.booleans())
    x = fg.tensor(a)
    np.testing.assert_allclose(x.prod(d, keep).numpy(), a.prod(d, keepdims=keep), rtol=1e-12)
    np.testing.assert_allclose(x.cumsum(d).numpy(), np.cumsum(a, d), atol=1e-12)
    np.testing.assert_allclose(x.cumprod(d).numpy(), np.cumprod(a, d), rtol=1e-12, atol=1e-12)
    with warnings.catch_warnings(), np.errstate(all="ignore"):  # one entry: 0/0 is NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        expect_var = a.var(d, ddof=1, keepdims=keep)
    np.testing.assert_allclose(x.var(d, keepdim=keep).numpy(), expect_var)
    np.testing.assert_allclose(x.std(d, correction=0).numpy(), a.std(d))
    np.testing.assert_allclose(
        x.logsumexp(d, keep).numpy(), np.log(np.exp(a).sum(d, keepdims=keep)), rtol=1e-12
    )
    np.testing.assert_array_equal(x.argmax(d, keep).numpy(), _argkeep(np.argmax, a, d, keep))
    np.testing.assert_array_equal(x.argmin(d).numpy(), np.argmin(a, d))
    np.testing.assert_allclose(x.norm(dim=d).numpy(), np.linalg.norm(a, axis=d))
    np.testing.assert_allclose(x.norm(1, d).numpy(), np.abs(a).sum(d))
    np.testing.assert_allclose(x.norm(3, d).numpy(), (np.abs(a) ** 3).sum(d) ** (1 / 3))
    np.testing.assert_allclose(x.norm(math.inf, d).numpy(), np.abs(a).max(d))
    b = a > 0.5
    np.testing.assert_array_equal(fg.tensor(b).any(d).numpy(), b.any(d))
    np.testing.assert_array_equal(fg.tensor(b).all(d, keep).numpy(), b.all(d, keepdims=keep))
    assert x.argmax().item() == np.argmax(a)


def _argkeep(f, a, d, keep):
    out = f(a, d)
    return np.expand_dims(out, d) if keep else out


def test_reductions_full_and_dtypes():
    i = fg.tensor([[1, 2], [3, 4]])
    assert i.prod().item() == 24 and i.prod().dtype == fg.int64
    assert i.cumsum(0).dtype == fg.int64
    np.testing.assert_array_equal(fg.tensor([True, True, False]).cumsum(0).numpy(), [1, 2, 2])
    assert fg.tensor([[0.0, 1.0]]).any().item() is True
    assert fg.tensor([[0.0, 1.0]]).all().item() is False
    v = fg.tensor([1.0, 2.0, 3.0, 4.0])
    assert v.var().item() == pytest.approx(np.var([1, 2, 3, 4], ddof=1))
    assert v.var(unbiased=False).item() == pytest.approx(np.var([1, 2, 3, 4]))
    assert fg.norm(v).item() == pytest.approx(math.sqrt(30))
    assert fg.norm(v, 0).item() == 4
    assert fg.argmax(fg.tensor([1.0, 3.0, 3.0])).item() == 1  # the first on ties
    assert fg.argmax(fg.tensor([1.0, float("nan"), 3.0])).item() == 1  # NaN is the max
    assert fg.logsumexp(fg.tensor([-math.inf, -math.inf]), 0).item() == -math.inf


def test_max_min_with_dim_give_values_and_indices():
    a = distinct(3, 4)
    x = fg.tensor(a)
    values, indices = x.max(dim=1)
    np.testing.assert_array_equal(values.numpy(), a.max(1))
    np.testing.assert_array_equal(indices.numpy(), a.argmax(1))
    r = x.min(dim=0, keepdim=True)
    assert r.values.shape == (1, 4) and r.indices.shape == (1, 4)
    np.testing.assert_array_equal(r.indices.numpy()[0], a.argmin(0))
    vals, idx = fg.max(x, dim=0)
    np.testing.assert_array_equal(vals.numpy(), a.max(0))
    np.testing.assert_array_equal(idx.numpy(), a.argmax(0))
    # numpy's and MegEngine's keyword keeps returning values, as ferrograd.functional.max
    np.testing.assert_array_equal(fg.max(x, axis=1).numpy(), a.max(1))
    np.testing.assert_array_equal(fg.functional.max(x, 1).numpy(), a.max(1))
    np.testing.assert_array_equal(fg.max(x, (0, 1)).numpy(), a.max())
    np.testing.assert_array_equal(x.max(axis=1).numpy(), a.max(1))
    assert x.max().item() == a.max()
    np.testing.assert_array_equal(x.max(fg.zeros(3, 4, dtype="float64")).numpy(), np.maximum(a, 0))
    check_grad(lambda x: x.max(dim=1).values, [a])
    check_grad(lambda x: x.min(dim=0)[0], [a])


def test_reduction_grads():
    a = rnd(3, 4)
    z = a.copy()
    z[1, 2] = 0.0  # a zero: the product's gradient must stay exact
    z[2, 1] = 0.0
    z[2, 3] = 0.0
    for arr in (a, z):
        check_grad(lambda x: x.prod(1), [arr])
        check_grad(lambda x: fg.prod(x), [arr])
        check_grad(lambda x: x.cumprod(1), [arr])
    check_grad(lambda x: x.cumsum(0), [a])
    check_grad(lambda x: x.var(1), [a])
    check_grad(lambda x: x.std(0, correction=0), [a])
    check_grad(lambda x: x.logsumexp(1), [a])
    check_grad(lambda x: x.logsumexp((0, 1)), [a])
    check_grad(lambda x: x.norm(), [a])
    check_grad(lambda x: x.norm(3, 1), [a])
    check_grad(lambda x: x.norm(1, 0), [a])


def test_norm_gradient_at_zero_is_zero():
    x = fg.zeros(3, dtype="float64")
    key = fg.GradKey()
    key.attach(x)
    key.backward(x.norm())
    np.testing.assert_array_equal(x.grad.numpy(), [0, 0, 0])


def test_noncontiguous_inputs():
    a = rnd(4, 3)
    t = fg.tensor(a.T.copy()).T  # a transposed view holding a
    np.testing.assert_allclose(t.cumsum(1).numpy(), np.cumsum(a, 1))
    np.testing.assert_allclose(t.prod(0).numpy(), a.prod(0))
    np.testing.assert_array_equal(t.flip(1).numpy(), a[:, ::-1])
    np.testing.assert_array_equal(t.argmax(1).numpy(), a.argmax(1))
    np.testing.assert_array_equal(
        fg.pad(t, (1, 1), mode="reflect").numpy(), np.pad(a, [(0, 0), (1, 1)], mode="reflect")
    )
    check_grad(lambda x: x.T.cumsum(1), [a.T.copy()])


def test_against_torch():
    torch = pytest.importorskip("torch")
    a = rnd(3, 5)
    x, t = fg.tensor(a), torch.tensor(a)
    pairs = [
        (x.var(1), t.var(1)),
        (x.std(0, correction=0), t.std(0, correction=0)),
        (x.logsumexp(1), t.logsumexp(1)),
        (x.norm(), t.norm()),
        (x.cumprod(1), t.cumprod(1)),
        (x.prod(0), t.prod(0)),
        (x.repeat(2, 1, 1), t.repeat(2, 1, 1)),
        (x.roll(2, 1), t.roll(2, 1)),
        (fg.pad(x, (2, 1), mode="reflect"), torch.nn.functional.pad(t, (2, 1), mode="reflect")),
        (x.tril(-1), t.tril(-1)),
    ]
    for ours, theirs in pairs:
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, atol=1e-12)
    assert [p.shape for p in x.chunk(2, 1)] == [tuple(p.shape) for p in t.chunk(2, 1)]


def test_bad_arguments_name_the_op():
    x = fg.tensor(rnd(2, 3))
    with pytest.raises(IndexError, match="argmax: dim 5"):
        x.argmax(5)
    with pytest.raises(TypeError, match="cumsum: dim is required"):
        fg.cumsum(x)
    with pytest.raises(fg.DTypeError, match="gather: index"):
        x.gather(1, fg.tensor([[0.5]]))
    with pytest.raises(fg.ShapeError, match="index_add"):
        x.index_add(0, fg.tensor([0]), fg.zeros(2, 2, dtype="float64"))
    with pytest.raises(ValueError, match="pad: mode"):
        fg.pad(x, (1, 1), mode="wrap")
    with pytest.raises(TypeError, match="split"):
        x.split(1.5)
