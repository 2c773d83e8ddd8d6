"""Indexing, index_put and the scatter/gather family against PyTorch, from a port of
PyTorch's own indexing and scatter/gather tests: where ferrograd read a key, took an index
or checked an argument differently, the same code runs here on both libraries."""

from __future__ import annotations

import warnings

import ferrograd as fg
import numpy as np
import pytest


def _raises_in_graph(exc):
    """An out-of-range index found when a traced graph runs (this run's indices, checked on
    every device: a device kernel alone would clamp them)."""
    return pytest.raises(exc)


def _np(t):
    return np.asarray(t.detach().numpy())


def _run(fn):
    """``fn`` on ferrograd and on PyTorch, the results as numpy arrays."""
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [_np(r) for r in fn(fg)], [_np(r) for r in fn(torch)]


def _same(fn):
    got, want = _run(fn)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g, w)


# ------------------------------------------------------------------ list keys read as tuples


@pytest.mark.parametrize(
    "key",
    [
        [[0, 1], [1, 0]],
        [[0, 2], [3]],
        [[0, 1], slice(None)],
        [0, None],
        [1, Ellipsis],
        [range(2), [3, 1]],
        [[True, False, True]],
    ],
    ids=["two lists", "broadcast", "list slice", "int None", "int ellipsis", "range", "mask"],
)
def test_short_list_key_holding_sequences_is_a_tuple(key):
    # x[[rows, cols]] is x[rows, cols] in PyTorch (with a deprecation warning), not one
    # index array: [[0, 1], [1, 0]] picks x[0, 1] and x[1, 0], not rows 0, 1, 1, 0
    def get(T):
        x = T.arange(12.0).reshape(3, 4)
        return [x[key]]

    def put(T):
        x = T.arange(12.0).reshape(3, 4)
        x[key] = -1.0
        return [x]

    _same(get)
    _same(put)
    x = fg.arange(12.0).reshape(3, 4)
    with pytest.warns(UserWarning, match="non-tuple sequence"):
        x[key]


def test_list_key_of_tensors_is_a_tuple():
    _same(lambda T: [T.arange(12.0).reshape(3, 4)[[T.tensor([0, 2]), T.tensor([3, 1])]]])


def test_long_or_flat_list_key_is_one_index_array():
    # 32 or more entries, or entries that are all integers: one index array
    def fn(T):
        t = T.arange(100.0)
        windows = [range(i, i + 5) for i in range(40)]
        return [t[windows], t[windows[:32]], t[[3, 1, 4]]]

    _same(fn)
    with pytest.raises(IndexError):
        fg.arange(100.0)[[range(i, i + 5) for i in range(31)]]


def test_numpy_uint8_array_key_is_a_mask():
    # PyTorch converts a numpy key to a tensor: uint8 is a (deprecated) mask, not positions
    def fn(T):
        x = T.arange(12.0).reshape(3, 4)
        mask = np.array([1, 0, 1], dtype=np.uint8)
        return [x[mask], x[mask, 1:], x[np.array(1, dtype=np.uint8)]]

    _same(fn)
    # (PyTorch's own assignment through it fails in masked_fill_; here it writes the rows)
    y = fg.arange(12.0).reshape(3, 4)
    with pytest.warns(UserWarning, match="uint8"):
        y[np.array([1, 0, 1], dtype=np.uint8)] = -1.0
    np.testing.assert_array_equal(_np(y)[[0, 2]], -1.0)
    np.testing.assert_array_equal(_np(y)[1], [4.0, 5.0, 6.0, 7.0])


# ------------------------------------------------------- 0-d masks and leading axes of one


def test_zero_dim_uint8_or_bool_key_assigns_a_value_with_leading_ones():
    def fn(T):
        out = []
        for a in (T.arange(6.0).reshape(2, 3), T.tensor(3)):
            ones = (T.ones_like(a) * -1).unsqueeze(0).unsqueeze(0)
            a[T.tensor(1, dtype=T.uint8)] = ones * 2
            out.append(a.clone())
            a[T.tensor(0, dtype=T.uint8)] = 5
            out.append(a.clone())
            a[T.tensor(True)] = ones * 3
            out.append(a.clone())
            a[T.tensor(False)] = 7
            out.append(a.clone())
        return out

    _same(fn)


def test_index_tensor_key_assigns_a_value_with_leading_ones():
    def fn(T):
        x = T.zeros(4, 3)
        x[T.tensor([0, 2])] = T.arange(6.0).reshape(1, 1, 2, 3)
        y = T.zeros(4, 3)
        y[T.tensor([True, False, True, False]), 1] = T.tensor([[[5.0, 6.0]]])
        return [x, y]

    _same(fn)


# ------------------------------------------------------------------------------- index_put


def test_index_put_takes_a_uint8_index_as_a_mask():
    def fn(T):
        y = T.ones(10, 10)
        mask = T.zeros(10, dtype=T.uint8)
        y.index_put_((mask,), y[mask], accumulate=True)
        z = T.zeros(3, 4)
        z.index_put_((T.tensor([1, 0, 1], dtype=T.uint8),), T.ones(2, 4), accumulate=True)
        return [y, z]

    _same(fn)


@pytest.mark.parametrize(
    "indices",
    [
        lambda T: (T.tensor([True, False]),),
        lambda T: (T.tensor([0.0]),),
        lambda T: (T.zeros(4, 4, dtype=T.bool),),
    ],
    ids=["short mask", "float index", "mask of the wrong shape"],
)
def test_index_put_rejects_bad_indices_with_index_error(indices):
    torch = pytest.importorskip("torch")
    with pytest.raises(IndexError):
        torch.zeros(3, 4).index_put_(indices(torch), torch.tensor(1.0))
    with pytest.raises(IndexError, match="index_put"):
        fg.zeros(3, 4).index_put_(indices(fg), fg.tensor(1.0))


# ---------------------------------------------------------------------------- take and put


def test_take_and_put_refuse_a_float_index():
    torch = pytest.importorskip("torch")
    for T in (torch, fg):
        with pytest.raises(RuntimeError):
            T.take(T.zeros(3, 4), T.tensor([0.0, 1.5]))
        with pytest.raises(RuntimeError):
            T.zeros(3, 4).put_(T.tensor([0.0]), T.tensor([1.0]))


def test_put_refuses_a_source_of_another_length():
    # (the one source entry was written at both positions)
    torch = pytest.importorskip("torch")
    for T in (torch, fg):
        with pytest.raises(IndexError):
            T.zeros(3, 4).put_(T.tensor([1, 2]), T.tensor([1.0]))


@pytest.mark.parametrize("accumulate", [True, False])
def test_put_out_of_place_values_and_gradients(accumulate):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x, v, g = rng.normal(size=(3, 4)), rng.normal(size=(2, 2)), rng.normal(size=(3, 4))
    index = [[0, 5], [5, -1]] if accumulate else [[0, 5], [7, -1]]
    out = []
    for T in (fg, torch):
        a = T.tensor(x, requires_grad=True)
        b = T.tensor(v, requires_grad=True)
        y = a.put(T.tensor(index), b, accumulate=accumulate)
        y.backward(T.tensor(g))
        out.append([_np(y), _np(a.grad), _np(b.grad)])
        if T is fg:
            np.testing.assert_array_equal(_np(fg.put(a, fg.tensor(index), b, accumulate)), _np(y))
    for got, want in zip(*out):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_masked_select_mask_that_does_not_broadcast_is_a_shape_error():
    with pytest.raises(fg.ShapeError, match="masked_select"):
        fg.masked_select(fg.zeros(4, 5), fg.zeros(3, dtype=fg.bool))


# ------------------------------------------------------------------ adding into booleans


def test_scatter_add_and_index_add_into_bool_tensors_are_a_logical_or():
    def fn(T):
        src = T.tensor([[True, True, True, True, True], [True, False, True, False, True]])
        index = T.tensor([[0, 1, 2, 0, 0], [2, 0, 0, 1, 2]])
        return [
            T.zeros(3, 5, dtype=T.bool).scatter_add_(0, index, src),
            T.scatter_add(T.zeros(3, 5, dtype=T.bool), 0, index, src),
            T.zeros(3, 2, dtype=T.bool).index_add(
                1, T.tensor([1, 1]), T.tensor([[True, False], [False, False], [False, True]])
            ),
        ]

    _same(fn)


# ---------------------------------------------------------------------- error messages


def test_mask_of_the_wrong_shape_says_mask():
    torch = pytest.importorskip("torch")
    for T in (torch, fg):
        arr = T.ones(5, 4, 3)
        with pytest.raises(IndexError, match="mask"):
            arr[T.tensor([True])]
        with pytest.raises(IndexError, match="mask"):
            arr[(slice(None), T.zeros(4, 4, dtype=T.bool))]


@pytest.mark.parametrize("value", [[], [1.0, 2.0, 3.0]])
def test_assigned_value_of_the_wrong_shape_is_a_shape_mismatch_before_a_dtype_error(value):
    # PyTorch checks the shapes first: a float value of the wrong shape into an int64
    # tensor is a shape mismatch, not a dtype error
    torch = pytest.importorskip("torch")
    for T in (torch, fg):
        a = T.arange(0, 4)
        with pytest.raises(RuntimeError, match="shape mismatch"):
            a[a > -1] = T.tensor(value)


@pytest.mark.parametrize(
    "call",
    [
        lambda T, x: x.gather(1, T.tensor([[4]])),
        lambda T, x: x.scatter_add(1, T.tensor([[4]]), T.ones(1, 1)),
        lambda T, x: x.scatter_reduce(1, T.tensor([[4]]), T.ones(1, 1), "sum"),
        lambda T, x: x.index_select(1, T.tensor([4])),
        lambda T, x: x.index_add(1, T.tensor([4]), T.ones(3, 1)),
    ],
    ids=["gather", "scatter_add", "scatter_reduce", "index_select", "index_add"],
)
def test_index_out_of_range_is_a_runtime_error_as_in_torch(call):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        call(torch, torch.zeros(3, 4))
    with pytest.raises(RuntimeError, match="out of bounds") as info:
        call(fg, fg.zeros(3, 4))
    assert isinstance(info.value, IndexError)  # (what ferrograd raised before)


# ---------------------------------------------------------------------- keyword arguments


def test_gather_takes_sparse_grad():
    def fn(T):
        out = []
        for sparse in (False, True):
            x = T.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
            y = T.gather(x, 1, T.tensor([[1, 1], [0, 3], [2, 2]]), sparse_grad=sparse)
            y.backward(T.tensor(np.arange(6.0).reshape(3, 2)))
            grad = x.grad.to_dense() if x.grad.is_sparse else x.grad
            out += [y, grad]
        return out

    _same(fn)


@pytest.mark.parametrize(
    "name, args, shape",
    [
        ("take", lambda T: (T.tensor([[1, -1]]),), (1, 2)),
        ("index_add", lambda T: (0, T.tensor([1, 1]), T.ones(2, 4, dtype=T.float64)), (3, 4)),
        ("index_copy", lambda T: (0, T.tensor([2]), T.ones(1, 4, dtype=T.float64)), (3, 4)),
        ("scatter", lambda T: (0, T.tensor([[1, 2]]), T.ones(1, 2, dtype=T.float64)), (3, 4)),
        ("scatter_add", lambda T: (0, T.tensor([[1, 1]]), T.ones(1, 2, dtype=T.float64)), (3, 4)),
        (
            "scatter_reduce",
            lambda T: (1, T.tensor([[0, 0]]), T.ones(1, 2, dtype=T.float64), "amax"),
            (3, 4),
        ),
        (
            "index_reduce",
            lambda T: (0, T.tensor([1]), T.full((1, 4), 2.0, dtype=T.float64), "prod"),
            (3, 4),
        ),
    ],
)
def test_out_keyword(name, args, shape):
    def fn(T):
        x = T.arange(12.0, dtype=T.float64).reshape(3, 4)
        out = T.zeros(*shape, dtype=T.float64)
        res = getattr(T, name)(x, *args(T), out=out)
        return [res, out]

    _same(fn)


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda T, x: x.index_copy(0, T.tensor([0, 1]), T.ones(1, 4)), IndexError),
        (lambda T, x: x.index_copy(0, T.tensor([0, 1]), T.ones(2, 4, 1)), IndexError),
        (lambda T, x: x.index_copy(0, T.tensor([0, 1]), T.ones(2, 3)), RuntimeError),
        (lambda T, x: x.index_fill(0, T.tensor([[0]]), 1.0), RuntimeError),
    ],
    ids=["index_copy count", "index_copy rank", "index_copy slice", "index_fill 2-D index"],
)
def test_index_copy_and_index_fill_error_types(call, error):
    torch = pytest.importorskip("torch")
    with pytest.raises(error):
        call(torch, torch.zeros(3, 4))
    with pytest.raises(error, match="index_(copy|fill)"):
        call(fg, fg.zeros(3, 4))


@pytest.mark.parametrize("reduce", [None, "multiply"])
def test_scatter_index_wider_than_input_is_a_shape_error(reduce):
    # (it failed inside numpy with "invalid entry in coordinates array")
    torch = pytest.importorskip("torch")
    kwargs = {} if reduce is None else {"reduce": reduce}
    for T in (torch, fg):
        x = T.arange(12.0).reshape(3, 4)
        with pytest.raises(RuntimeError):
            x.scatter(0, T.zeros(2, 5, dtype=T.int64), T.ones(2, 5), **kwargs)
    with pytest.raises(fg.ShapeError, match="scatter: index of shape"):
        fg.zeros(3, 4).scatter(0, fg.zeros(2, 5, dtype=fg.int64), 1.0, **kwargs)


# ----------------------------------------------------------------------------- inside trace


def test_mask_assignment_of_a_fill_value_traces_and_replays_new_masks():
    # x[mask] = value, common in PyTorch code (scores[mask] = -inf), raised TraceError:
    # with a value that does not depend on how many entries are selected it is a where
    def step(x, mask, row):
        y = x * 1.0
        y[mask] = -1.0
        y[mask[:, 0]] = row
        y[mask] = fg.tensor(2, dtype=fg.int64)  # (a 0-d value is cast, as a fill)
        return y * x

    traced = fg.trace(step)
    rng = np.random.default_rng(0)
    for _ in range(3):
        a, m, r = rng.normal(size=(4, 3)), rng.random((4, 3)) > 0.5, rng.normal(size=3)
        args = (fg.tensor(a), fg.tensor(m), fg.tensor(r))
        np.testing.assert_array_equal(_np(traced(*args)), _np(step(*args)))


def test_mask_assignment_gradients_inside_a_traced_step():
    rng = np.random.default_rng(1)
    a, r = rng.normal(size=(4, 3)), rng.normal(size=3)
    grads = []
    for wrap in (lambda f: f, fg.trace):
        x = fg.tensor(a, requires_grad=True)
        row = fg.tensor(r, requires_grad=True)

        def step(mask, x=x, row=row):
            y = x * 1.0
            y[mask] = -1.0
            y[mask[:, 0]] = row
            loss = (y * x).sum()
            loss.backward()
            return loss

        mask = np.array([[1, 0, 0], [0, 1, 1], [1, 1, 0], [0, 0, 0]], dtype=bool)
        wrap(step)(fg.tensor(mask))
        grads.append([_np(x.grad), _np(row.grad)])
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_index_put_with_index_tensors_traces_and_replays_new_indices():
    # (it read the indices to the host, which raised TraceError)
    def step(x, i, j, v):
        y = x.clone()
        y.index_put_((i,), v[:, None] * 2)
        return (
            x.index_put((i, j), v, accumulate=True),
            x.index_put((i, j), v),  # repeated positions: the last write wins
            y,
            (x > 0).index_put((i,), fg.tensor(True), accumulate=True),
        )

    traced = fg.trace(step)
    rng = np.random.default_rng(0)
    for _ in range(3):
        args = (
            fg.tensor(rng.normal(size=(5, 3))),
            fg.tensor(rng.integers(-5, 5, 6)),
            fg.tensor(rng.integers(-3, 3, 6).astype(np.int32)),
            fg.tensor(rng.normal(size=6)),
        )
        for got, want in zip(traced(*args), step(*args)):
            np.testing.assert_array_equal(_np(got), _np(want))
    with _raises_in_graph(IndexError):
        traced(args[0], fg.tensor([7] * 6), args[2], args[3])


@pytest.mark.parametrize("accumulate", [True, False])
def test_index_put_gradients_inside_a_traced_step(accumulate):
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(5, 3)), rng.normal(size=(4, 3))
    grads = []
    for wrap in (lambda f: f, fg.trace):
        x = fg.tensor(a, requires_grad=True)
        v = fg.tensor(b, requires_grad=True)

        def step(i, x=x, v=v):
            loss = (x.index_put((i,), v, accumulate=accumulate) * x).sum()
            loss.backward()
            return loss

        wrap(step)(fg.tensor([0, 3, -1, 1]))
        grads.append([_np(x.grad), _np(v.grad)])
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_index_fill_and_index_copy_trace_and_replay_new_indices():
    # (they read the index to the host, which raised TraceError)
    def step(x, i, s, v):
        return (
            x.index_fill(1, i, 2.5),
            x.index_fill(0, i[:1] % 4, v),
            (x > 0).index_fill(1, i, False),
            x.clone().index_fill_(1, i, -1.0),
            x.index_copy(1, i, s),
            x.clone().index_copy_(1, i, s),
            (x > 0).index_copy(1, i, s > 0),
        )

    traced = fg.trace(step)
    rng = np.random.default_rng(0)
    for _ in range(3):
        args = (
            fg.tensor(rng.normal(size=(4, 5))),
            fg.tensor(rng.permutation(5)[:3]),
            fg.tensor(rng.normal(size=(4, 3))),
            fg.tensor(rng.normal()),
        )
        for got, want in zip(traced(*args), step(*args)):
            np.testing.assert_array_equal(_np(got), _np(want))
    with _raises_in_graph(IndexError):
        traced(args[0], fg.tensor([5, 0, 1]), args[2], args[3])


def test_index_fill_and_index_copy_gradients_inside_a_traced_step():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(4, 5)), rng.normal(size=(4, 2))
    grads = []
    for wrap in (lambda f: f, fg.trace):
        x = fg.tensor(a, requires_grad=True)
        s = fg.tensor(b, requires_grad=True)
        v = fg.tensor(0.5, dtype=fg.float64, requires_grad=True)

        def step(i, x=x, s=s, v=v):
            y = x.index_copy(1, i, s).index_fill(1, i[:1] + 1, v)
            loss = (y * x).sum()
            loss.backward()
            return loss

        wrap(step)(fg.tensor([3, 0]))
        grads.append([_np(x.grad), _np(s.grad), _np(v.grad)])
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_take_traces_and_replays_new_indices():
    # (it read the index to the host, which raised TraceError)
    def step(x, i):
        return fg.take(x, i), x.t().take(i)

    traced = fg.trace(step)
    rng = np.random.default_rng(0)
    for _ in range(3):
        args = (fg.tensor(rng.normal(size=(4, 5))), fg.tensor(rng.integers(-20, 20, (2, 3))))
        for got, want in zip(traced(*args), step(*args)):
            np.testing.assert_array_equal(_np(got), _np(want))
    for bad in (20, -21):
        with _raises_in_graph(IndexError):
            traced(args[0], fg.tensor([[bad] * 3] * 2))


def test_put_traces_and_replays_new_indices():
    # (put_ read the index to the host to check it, which raised TraceError)
    def step(x, i, v):
        return x.put(i, v), x.put(i, v, accumulate=True), x.t().clone().put_(i, v)

    traced = fg.trace(step)
    rng = np.random.default_rng(0)
    for _ in range(3):
        args = (
            fg.tensor(rng.normal(size=(4, 5))),
            fg.tensor(rng.integers(-20, 20, (2, 3))),
            fg.tensor(rng.normal(size=6)),
        )
        for got, want in zip(traced(*args), step(*args)):
            np.testing.assert_array_equal(_np(got), _np(want))
    with _raises_in_graph(IndexError):
        traced(args[0], fg.tensor([[20] * 3] * 2), args[2])


def test_masked_scatter_traces_and_replays_new_masks():
    # (it read the mask to the host, which raised TraceError)
    def step(x, m, s, row_mask):
        return (
            x.masked_scatter(m, s),
            x.masked_scatter(row_mask, s),
            x.clone().masked_scatter_(m, s),
            (x > 0).masked_scatter(m, s > 0),
        )

    traced = fg.trace(step)
    rng = np.random.default_rng(0)
    for _ in range(3):
        args = (
            fg.tensor(rng.normal(size=(4, 5))),
            fg.tensor(rng.random((4, 5)) > 0.5),
            fg.tensor(rng.normal(size=20)),
            fg.tensor(rng.random(5) > 0.5),
        )
        for got, want in zip(traced(*args), step(*args)):
            np.testing.assert_array_equal(_np(got), _np(want))

    short = fg.trace(lambda x, m, s: x.masked_scatter(m, s))
    x = fg.zeros(2, 3)
    np.testing.assert_array_equal(
        _np(short(x, fg.tensor([[True, False, False]] * 2), fg.tensor([1.0, 2.0]))),
        [[1.0, 0.0, 0.0], [2.0, 0.0, 0.0]],
    )
    with _raises_in_graph(IndexError):  # (three entries selected, two in the source)
        short(x, fg.tensor([[True, True, False], [True, False, False]]), fg.tensor([1.0, 2.0]))


def test_masked_scatter_gradients_inside_a_traced_step():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(4, 5)), rng.normal(size=12)
    mask = fg.tensor(rng.random((4, 5)) > 0.5)
    grads = []
    for wrap in (lambda f: f, fg.trace):
        x = fg.tensor(a, requires_grad=True)
        s = fg.tensor(b, requires_grad=True)

        def step(m, x=x, s=s):
            loss = (x.masked_scatter(m, s) * x).sum()
            loss.backward()
            return loss

        wrap(step)(mask)
        grads.append([_np(x.grad), _np(s.grad)])
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("value_shape", [(1,), ()])
def test_assigning_through_an_all_false_mask_gives_the_value_a_zero_gradient(value_shape):
    # nothing is written, but the value took part: its gradient is zeros, not None
    def fn(T):
        x = T.arange(3.0, dtype=T.float64).requires_grad_()
        v = T.full(value_shape, 5.0, dtype=T.float64).requires_grad_()
        y = x * 1
        y[T.tensor([False, False, False])] = v
        (y * 2).sum().backward()
        assert v.grad is not None
        return y, x.grad, v.grad

    _same(fn)


def test_traced_gather_checks_each_runs_indices_on_every_device():
    # (on a CUDA device the traced graph clamped an out-of-range index: x[[0, 1], [0, 4]]
    # gave [0, 8] and gather picked the last column, where eager mode raises)
    x = fg.tensor(np.arange(12.0).reshape(3, 4))
    two = fg.trace(lambda x, i, j: x[i, j])
    np.testing.assert_array_equal(_np(two(x, fg.tensor([0, 1]), fg.tensor([1, -1]))), [1, 7])
    for j in ([0, 4], [0, -5]):
        with pytest.raises(IndexError):
            two(x, fg.tensor([0, 1]), fg.tensor(j))
    g = fg.trace(lambda x, i: fg.gather(x, 1, i))
    np.testing.assert_array_equal(_np(g(x, fg.tensor([[0], [1], [2]]))), [[0], [5], [10]])
    with pytest.raises(IndexError):
        g(x, fg.tensor([[0], [4], [2]]))
    s = fg.trace(lambda x, i: fg.zeros(3, 4, dtype=x.dtype).scatter_add(1, i, x[:, :1]))
    s(x, fg.tensor([[0], [1], [2]]))
    with pytest.raises(IndexError):
        s(x, fg.tensor([[0], [-5], [2]]))
    # the graph still runs after the error
    np.testing.assert_array_equal(_np(g(x, fg.tensor([[3], [2], [1]]))), [[3], [6], [9]])
