"""Advanced indexing inside ``fg.trace``: keys holding index tensors (several, broadcast, of any
rank, mixed with integers, slices, ``None`` and ``...``) read and assign as numpy does, the
index values are graph inputs (new values on every replay, never fixed at trace time), indices
out of range raise when the graph runs, gradients match finite differences, and a boolean mask
raises a ``TraceError`` that says why."""

from __future__ import annotations

import warnings

import ferrograd as fg
import numpy as np
import pytest
from conftest import TEST_DEVICE, numeric_grad

pytestmark = pytest.mark.skipif(TEST_DEVICE != "cpu", reason="graph mode is tested on the CPU")

A = np.random.default_rng(0).standard_normal((3, 4, 5))


def _i(*v):
    return np.array(v, dtype=np.int64)


# keys as (numpy key, other values of its index arrays for the replay); index arrays become
# tensors passed to the traced function
GET_KEYS = {
    "2d_index": ((_i([0, 2], [-1, 1]),), (_i([1, 1], [0, -3]),)),
    "two_arrays": ((_i(0, 1, 2), _i(3, -1, 0)), (_i(2, 2, 0), _i(0, 1, -4))),
    "slice_then_2d": ((slice(None), _i([1, -2], [0, 3])), (_i([0, 0], [2, 1]),)),
    "separated_by_slice": ((_i(0, 1), slice(1, 4, 2), _i(3, -1)), (_i(2, -3), _i(0, 4))),
    "int_joins_group": ((1, slice(None), _i([0], [4])), (_i([2], [1]),)),
    "slice_int_array": ((slice(None), 1, _i([0], [4])), (_i([3], [-5]),)),
    "none_and_ellipsis": ((None, _i(2, 0), Ellipsis, None, 1), (_i(-1, 1),)),
    "ellipsis_first": ((Ellipsis, _i([1, 0], [2, 2])), (_i([4, 4], [-5, 0]),)),
    "none_separates": ((_i(1), None, _i(2)), (_i(0), _i(0))),
    "empty_ellipsis_separates": ((slice(None), _i(0), Ellipsis, _i(1)), (_i(3), _i(2))),
    "negative_steps": ((slice(None, None, -1), _i([1, 1, 1]), slice(4, 0, -2)), (_i([0, 3, 2]),)),
    "zero_d_index": ((np.array(2),), (np.array(-1),)),
    "empty_index": ((np.zeros((0,), np.int64), 1), (np.zeros((0,), np.int64),)),
}


def _traced_key(key):
    """The key with its index arrays replaced by the traced function's tensor arguments."""
    spots = [i for i, k in enumerate(key) if isinstance(k, np.ndarray)]

    def build(tensors):
        out = list(key)
        for i, t in zip(spots, tensors):
            out[i] = t
        return tuple(out)

    return spots, build


@pytest.mark.parametrize("name", sorted(GET_KEYS))
def test_getitem_with_index_tensors_traces_and_replays_new_indices(name):
    key, other = GET_KEYS[name]
    spots, build = _traced_key(key)
    f = fg.trace(lambda x, *ts: x[build(ts)])
    x = fg.tensor(A)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no constant built from the shapes is warned about
        for arrays in ([key[i] for i in spots], list(other), [key[i] for i in spots]):
            want = A[build(arrays)]
            got = f(x, *[fg.tensor(a) for a in arrays]).numpy()
            assert got.shape == want.shape
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(x[build([fg.tensor(a) for a in arrays])].numpy(), want)
    assert f.cache_size == 1


def test_int32_index_and_boolean_array_mixed_with_an_index_tensor_trace():
    mask = np.array([True, False, True])
    f = fg.trace(lambda x, i: x[mask, i])
    g = fg.trace(lambda x, i: x[:, i.astype("int32")])
    x = fg.tensor(A)
    for cols in (_i(0, 3), _i(-1, 2)):
        np.testing.assert_array_equal(f(x, fg.tensor(cols)).numpy(), A[mask, cols])
        np.testing.assert_array_equal(g(x, fg.tensor(cols)).numpy(), A[:, cols])


def test_megengine_nd_int_indexing_under_symbolic_trace():
    from ferrograd import jit

    inp = np.arange(11)
    fn = jit.trace(symbolic=True)(lambda inp, idx: inp[idx])
    for seed in range(3):
        idx = np.random.default_rng(seed).integers(0, 11, size=(5, 7))
        np.testing.assert_array_equal(fn(fg.tensor(inp), fg.tensor(idx)).numpy(), inp[idx])
    assert fn.cache_size == 1


def test_index_out_of_range_raises_when_the_graph_runs():
    x = fg.tensor(np.arange(12.0).reshape(3, 4))
    two = fg.trace(lambda x, i, j: x[i, j])
    np.testing.assert_array_equal(two(x, fg.tensor(_i(0, 1)), fg.tensor(_i(1, -1))).numpy(), [1, 7])
    # x[0, 4] would be the flat position 4, inside the tensor: still out of range for axis 1
    for j in (_i(0, 4), _i(0, -5)):
        with pytest.raises(IndexError, match="out of range for an axis of size 4"):
            two(x, fg.tensor(_i(0, 1)), fg.tensor(j))
    rows = fg.trace(lambda x, i: x[i])
    rows(x, fg.tensor(_i([0, 2])))
    with pytest.raises(IndexError, match="out of range for an axis of size 3"):
        rows(x, fg.tensor(_i([0, 3])))

    def put(y, i):
        y[i, 1:] = 0.0
        return y

    tput = fg.trace(put)
    tput(fg.tensor(np.ones((3, 4))), fg.tensor(_i([0])))
    with pytest.raises(IndexError, match="out of range"):
        tput(fg.tensor(np.ones((3, 4))), fg.tensor(_i([-4])))
    # eagerly the message names the axis and the value
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 1 with size 4"):
        x[fg.tensor(_i(0, 1)), fg.tensor(_i(0, 4))]


def test_boolean_mask_inside_a_trace_says_why_and_suggests_where():
    x = fg.tensor(A)
    for fn in (lambda x: x[x > 0], lambda x: x[0][x[0] > 0, 1]):
        with pytest.raises(fg.TraceError, match=r"depends on its values.*fg\.where"):
            fg.trace(fn)(x)

    def assign(x):
        y = x * 1
        y[x > 0] = x[:1]  # (a value that depends on the number of entries selected)
        return y

    with pytest.raises(fg.TraceError, match=r"setitem: a boolean mask.*fg\.where"):
        fg.trace(assign)(x)
    np.testing.assert_array_equal(x[x > 0].numpy(), A[A > 0])  # eagerly it selects


SET_KEYS = {
    "repeated_rows": ((_i(1, 2, 1, -2),), (_i(0, 0, 0, 0),), (4, 4, 5)),
    "slice_then_2d": ((slice(None), _i([0, 3], [3, 0])), (_i([1, 1], [1, 2]),), (3, 2, 2, 5)),
    "two_arrays_repeated": ((_i(0, 0, 2), _i(1, 1, -1), 2), (_i(1, 2, 1), _i(0, 3, 0)), (3,)),
    "array_then_slice": ((_i([2]), slice(1, None, 2)), (_i([-1]),), ()),
}


@pytest.mark.parametrize("name", sorted(SET_KEYS))
def test_setitem_with_index_tensors_traces_last_write_wins(name):
    key, other, vshape = SET_KEYS[name]
    spots, build = _traced_key(key)
    v = np.random.default_rng(1).standard_normal(vshape)

    def step(x, v, *ts):
        y = x * 1
        y[build(ts)] = v
        return y

    f = fg.trace(step)
    for arrays in ([key[i] for i in spots], list(other)):
        want = A.copy()
        want[build(arrays)] = v
        got = f(fg.tensor(A), fg.tensor(v), *[fg.tensor(a) for a in arrays]).numpy()
        np.testing.assert_array_equal(got, want)
    assert f.cache_size == 1


def test_augmented_assignment_and_writes_into_an_argument_trace():
    def bump(x, i):
        x[i] += 1.0  # a repeated index adds once, as numpy's x[i] += 1
        x[i, 0] = -1.0

    f = fg.trace(bump)
    for i in (_i(1, 1, 2), _i(0, -1, 0), _i(2, 2, 2)):
        want = A.copy()
        want[i] += 1.0
        want[i, 0] = -1.0
        x = fg.tensor(A)
        f(x, fg.tensor(i))
        np.testing.assert_array_equal(x.numpy(), want)
    assert f.cache_size == 1


def test_gradients_of_traced_indexing_match_finite_differences():
    rng = np.random.default_rng(2)
    w_get = rng.standard_normal((2, 2, 4))  # x[i, :, j]: the index axes go first
    w_set = rng.standard_normal(A.shape)
    v0 = rng.standard_normal((2, 3, 1))  # broadcast over y[1:, k] of shape (2, 2, 3, 5)

    def get_loss(x, i, j):
        return (x[i, :, j] * fg.tensor(w_get)).sum()

    def set_loss(x, v, k):
        y = x * 1
        y[1:, k] = v
        return (y * fg.tensor(w_set)).sum()

    tget = fg.trace(lambda x, i, j: fg.grad(get_loss(x, i, j), [x]))
    tset = fg.trace(lambda x, v, k: fg.grad(set_loss(x, v, k), [x, v]))
    calls = (
        (_i([0, 2], [0, 0]), _i([1], [-1]), _i([0, 3, 2], [3, 1, 0])),
        (_i([1, 1], [2, 0]), _i([0], [3]), _i([3, 3, 1], [0, 3, 3])),  # repeats
    )
    for i, j, k in calls:
        x = fg.tensor(A, requires_grad=True)
        v = fg.tensor(v0, requires_grad=True)
        (gx,) = tget(fg.tensor(A), fg.tensor(i), fg.tensor(j))
        (nx,) = numeric_grad(lambda a, i=i, j=j: (a[i, :, j] * w_get).sum(), [A])
        np.testing.assert_allclose(gx.numpy(), nx, atol=1e-6)
        (ex,) = fg.grad(get_loss(x, fg.tensor(i), fg.tensor(j)), [x])
        np.testing.assert_array_equal(gx.numpy(), ex.numpy())

        def np_set(a, b, k=k):
            y = a.copy()
            y[1:, k] = b
            return (y * w_set).sum()

        gx, gv = tset(fg.tensor(A), fg.tensor(v0), fg.tensor(k))
        nx, nv = numeric_grad(np_set, [A, v0])
        np.testing.assert_allclose(gx.numpy(), nx, atol=1e-6)
        np.testing.assert_allclose(gv.numpy(), nv, atol=1e-6)
        ex, ev = fg.grad(set_loss(x, v, fg.tensor(k)), [x, v])
        np.testing.assert_array_equal(gx.numpy(), ex.numpy())
        np.testing.assert_array_equal(gv.numpy(), ev.numpy())
    assert tget.cache_size == tset.cache_size == 1


def test_embedding_lookup_gradient_adds_into_repeated_tokens_in_a_trace():
    emb0 = np.random.default_rng(3).standard_normal((6, 3))
    f = fg.trace(lambda e, t: fg.grad((e[t] ** 2).sum(), [e])[0])
    for tokens in (_i([0, 5, 0], [0, 2, 2]), _i([1, 1, 1], [4, 3, 1])):
        e = fg.tensor(emb0)
        want = np.zeros_like(emb0)
        np.add.at(want, tokens, 2 * emb0[tokens])
        np.testing.assert_allclose(f(e, fg.tensor(tokens)).numpy(), want, rtol=1e-12)
    assert f.cache_size == 1


def test_traced_hand_written_cross_entropy_step_matches_eager_with_new_labels():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    n, c = 8, 5
    w0 = rng.standard_normal((6, c))
    w = fg.tensor(w0, requires_grad=True)

    def step(x, labels):
        logp = fg.log_softmax(x @ w, axis=1)
        loss = -logp[fg.arange(n), labels].mean()
        (gw,) = fg.grad(loss, [w])
        return loss, gw

    traced = fg.trace(step)
    for call in range(4):
        x = rng.standard_normal((n, 6))
        labels = rng.integers(0, c, n)
        lt, gt = traced(fg.tensor(x), fg.tensor(labels))
        le, ge = step(fg.tensor(x), fg.tensor(labels))
        assert lt.numpy().tobytes() == le.numpy().tobytes()
        assert gt.numpy().tobytes() == ge.numpy().tobytes()
        tw = torch.tensor(w0, requires_grad=True)
        tl = torch.nn.functional.cross_entropy(torch.tensor(x) @ tw, torch.tensor(labels))
        tl.backward()
        np.testing.assert_allclose(lt.numpy(), tl.item(), rtol=1e-12)
        np.testing.assert_allclose(gt.numpy(), tw.grad.numpy(), rtol=1e-10, atol=1e-14)
    assert traced.cache_size == 1


@pytest.mark.parametrize("reduce", ["sum", "mean", "prod", "amax"])
def test_traced_scatter_reduce_checks_each_runs_index_as_eager(reduce):
    # eager scatter_reduce refuses a negative or too-large index (PyTorch's rule); a traced
    # sum/mean ran the graph's scatter kernels, which wrapped -1 to the last slot
    w = fg.nn.Parameter(fg.tensor(np.arange(1.0, 6.0)))
    src = fg.nn.Parameter(fg.tensor([1.0, 2.0, 3.0], dtype=fg.float64))
    gm = fg.autodiff.GradManager().attach([w, src])
    weight = fg.tensor(np.arange(5.0))

    def step(idx):
        with gm:
            y = w.scatter_reduce(0, idx, src, reduce)
            gm.backward((y * weight).sum())
        return y

    traced = fg.trace(step)
    for idx in ([0, 4, 0], [1, 1, 3]):
        got = traced(fg.tensor(idx)).numpy()
        gw, gs = w.grad.numpy(), src.grad.numpy()
        w.grad = src.grad = None
        want = step(fg.tensor(idx)).numpy()
        np.testing.assert_allclose(got, want)
        np.testing.assert_allclose(gw, w.grad.numpy())
        np.testing.assert_allclose(gs, src.grad.numpy())
        w.grad = src.grad = None
    for bad in ([0, -1, 2], [5, 0, 0]):
        with pytest.raises(IndexError, match="out of bounds"):
            step(fg.tensor(bad))
        with pytest.raises(IndexError, match="out of bounds"):
            traced(fg.tensor(bad))
        w.grad = src.grad = None
    assert traced.cache_size == 1
