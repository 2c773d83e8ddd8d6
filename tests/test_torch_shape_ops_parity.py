"""Shape, indexing and reduction behaviours that PyTorch's test_indexing / test_view_ops /
test_shape_ops / test_reductions rely on: each runs the same inputs through torch and
ferrograd and compares values, dtypes, shapes and (where differentiable) float64
gradients."""

import math
import warnings

import ferrograd as fg
import numpy as np
import pytest
from conftest import TEST_DEVICE

NAN = float("nan")


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _np(x):
    if hasattr(x, "detach"):
        x = x.detach()
    return np.asarray(x.numpy())


def _dt(x):
    return str(x.dtype).replace("torch.", "")


def _same(t, f):
    """Same shape, dtype and values (NaN equal to NaN)."""
    assert tuple(f.shape) == tuple(t.shape), (tuple(f.shape), tuple(t.shape))
    assert _dt(f) == _dt(t), (_dt(f), _dt(t))
    a, b = _np(t), _np(f)
    if a.dtype.kind in "biu":
        assert b.tolist() == a.tolist()
    else:
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12, equal_nan=True)


def _both(torch, fn, *arrays, grad=True):
    """``fn(lib, *tensors)`` on torch and ferrograd (float64 inputs needing a gradient when
    ``grad``): the outputs, then the gradients of a weighted sum of the output."""
    outs, grads = [], []
    for L in (torch, fg):
        xs = [L.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
        y = fn(L, *xs)
        outs.append(y)
        if grad and y.dtype.is_floating_point if L is torch else grad and y.dtype.kind == "f":
            w = L.tensor(np.linspace(-1.0, 2.0, max(y.numel(), 1))[: y.numel()].reshape(y.shape))
            y2 = L.where(L.isnan(y), L.zeros_like(y), y)
            (y2 * w).sum().backward()
            grads.append([x.grad for x in xs if x.requires_grad])
    _same(outs[0], outs[1])
    if len(grads) == 2:
        for a, b in zip(*grads):
            if a is None:
                assert b is None or not np.any(_np(b))
            else:
                _same(a, b)
    return outs


# ------------------------------------------------------------------------ tensor_split


@pytest.mark.parametrize(
    "indices", [(0, -1, 0, 10), (5, 2), (-1, 3), (3, 3, 7), (), (12,), (-20, 4)]
)
def test_tensor_split_indices(torch, indices):
    a = np.arange(10.0)
    t = torch.tensor_split(torch.tensor(a), indices)
    f = fg.tensor_split(fg.tensor(a), indices)
    assert len(t) == len(f)
    for x, y in zip(t, f):
        _same(x, y)
    np.testing.assert_equal([len(p) for p in np.array_split(a, indices)], [len(p) for p in f])


def test_tensor_split_tensor_indices_and_sections(torch):
    a = np.arange(24.0).reshape(4, 6)
    for arg_t, arg_f, dim in [
        (torch.tensor([1, 4]), fg.tensor([1, 4]), 1),
        (torch.tensor(4), fg.tensor(4), 1),
        (3, 3, 0),
    ]:
        t = torch.tensor_split(torch.tensor(a), arg_t, dim)
        f = fg.tensor_split(fg.tensor(a), arg_f, dim)
        assert len(t) == len(f)
        for x, y in zip(t, f):
            _same(x, y)


# ------------------------------------------------------------------------------ clamp


@pytest.mark.parametrize(
    "fn",
    [
        lambda L, x: L.clamp(x, None, NAN),
        lambda L, x: L.clamp(x, NAN, None),
        lambda L, x: x.clamp(min=NAN),
        lambda L, x: L.clip(x, 0.0, NAN),
        lambda L, x: L.clamp(x, -0.5, 0.5),
    ],
)
def test_clamp_nan_bound(torch, fn):
    _both(torch, fn, np.array([-1.0, 0.25, 2.0, NAN]))


def test_clamp_nan_bound_int_input(torch):
    _both(torch, lambda L, x: L.clamp(x, None, NAN), np.array([1, 5]), grad=False)


# ------------------------------------------------------------------------ reductions


@pytest.mark.parametrize("op", ["all", "any"])
@pytest.mark.parametrize("args", [(), (1,), (0,), (1, True)])
def test_uint8_all_any_keep_uint8(torch, op, args):
    a = np.array([[0, 1], [1, 1]], dtype=np.uint8)
    _both(torch, lambda L, x: getattr(x, op)(*args), a, grad=False)


@pytest.mark.parametrize("op", ["median", "nanmedian"])
def test_median_of_empty_is_nan(torch, op):
    for shape in [(0,), (0, 3)]:
        outs = _both(torch, lambda L, x: getattr(x, op)(), np.zeros(shape))
        assert math.isnan(outs[1].item())


def test_nanquantile(torch):
    # (no ties: the sorts may order equal entries differently, which moves the gradient)
    data = np.array([[1.0, NAN, 3.0, 7.0], [NAN] * 4, [2.0, 1.5, 0.0, 5.0]])
    for interp in ["linear", "lower", "higher", "midpoint", "nearest"]:
        for q in [0.5, 0.0, 1.0, 0.33]:
            for dim, keepdim in [(None, False), (1, False), (1, True), (0, True), (-1, False)]:
                _both(
                    torch,
                    lambda L, x, q=q, dim=dim, keepdim=keepdim, interp=interp: L.nanquantile(
                        x, q, dim=dim, keepdim=keepdim, interpolation=interp
                    ),
                    data,
                )
        _both(
            torch,
            lambda L, x, interp=interp: x.nanquantile(
                L.tensor([0.1, 0.5, 0.9], dtype=L.float64), 1, interpolation=interp
            ),
            data,
        )


def test_quantile_of_a_row_with_nan_is_nan(torch):
    data = np.array([[1.0, NAN, 3.0], [2.0, 1.0, 0.0]])
    _both(torch, lambda L, x: L.quantile(x, 0.5, dim=1), data)
    _both(torch, lambda L, x: L.quantile(x, 0.25), data)


# --------------------------------------------------------------------- index_put/copy


def test_index_put_accumulate_bool(torch):
    outs = []
    for L in (torch, fg):
        x = L.ones(3, 2, 4, dtype=L.bool)
        x.index_put_((L.tensor([0, 2, 1]),), L.ones(3, 2, 4, dtype=L.bool), accumulate=True)
        y = L.zeros(5, dtype=L.bool)
        y.index_put_((L.tensor([1, 1, 3]),), L.tensor([True, False, False]), accumulate=True)
        outs.append((x, y))
    for a, b in zip(*outs):
        _same(a, b)


def test_index_copy_bool(torch):
    outs = []
    for L in (torch, fg):
        x = L.zeros(5, dtype=L.bool)
        r = x.index_copy_(0, L.tensor([1, 3]), L.ones(2, dtype=L.bool))
        assert r is x
        outs.append(x)
        outs.append(
            L.index_copy(L.ones(2, 3, dtype=L.bool), 1, L.tensor([2]), L.zeros(2, 1, dtype=L.bool))
        )
    _same(outs[0], outs[2])
    _same(outs[1], outs[3])


def test_index_copy_negative_index_raises(torch):
    for L in (torch, fg):
        with pytest.raises(IndexError):
            L.randn(3, 5).index_copy_(1, L.full((8,), -1, dtype=L.int64), L.zeros(3, 8))


def test_index_copy_values_and_grad(torch):
    _both(
        torch,
        lambda L, x, s: L.index_copy(x, 1, L.tensor([3, 0]), s),
        np.arange(12.0).reshape(3, 4),
        np.arange(6.0).reshape(3, 2) * 10,
    )


def test_index_put_function_form(torch):
    outs = []
    for L in (torch, fg):
        x = L.zeros(4)
        r = L.index_put_(x, (L.tensor([1, 3]),), L.tensor([5.0, 6.0]))
        assert r is x
        L.index_put_(x, (L.tensor([1, 1]),), L.tensor([1.0, 2.0]), accumulate=True)
        outs.append(x)
    _same(*outs)


# ------------------------------------------------------------------------ index_reduce


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_reduce(torch, reduce, include_self, dim):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3))
    idx = np.array([0, 2, 0, 3]) if dim == 0 else np.array([2, 0, 2])
    shape = list(x.shape)
    shape[dim] = len(idx)
    s = rng.standard_normal(shape)
    if reduce in ("amax", "amin"):
        # ties among source entries (no input entry ties with one: PyTorch's backward also
        # shares the gradient with an input entry that include_self=False leaves out)
        s, x = np.round(s), np.round(x) + 0.25
    _both(
        torch,
        lambda L, a, b: L.index_reduce(a, dim, L.tensor(idx), b, reduce, include_self=include_self),
        x,
        s,
    )
    # integers, in place
    xi = np.arange(12).reshape(4, 3)
    si = np.arange(int(np.prod(shape))).reshape(shape) * 3 % 7 + 1
    outs = []
    for L in (torch, fg):
        t = L.tensor(xi)
        r = t.index_reduce_(dim, L.tensor(idx), L.tensor(si), reduce, include_self=include_self)
        assert r is t
        outs.append(t)
    _same(*outs)


# ------------------------------------------------------------------ flip / tile / diag


def test_flip_varargs_and_tile_int(torch):
    a = np.arange(6.0).reshape(2, 3)
    _both(torch, lambda L, x: x.flip(0, 1), a)
    _both(torch, lambda L, x: x.flip(1), a)
    _both(torch, lambda L, x: x.flip(dims=(0,)), a)
    _both(torch, lambda L, x: x.tile(2), a)
    _both(torch, lambda L, x: x.tile(2, 1), a)
    _both(torch, lambda L, x: x.tile((1, 2, 1)), a)


@pytest.mark.parametrize("k", [0, 1, -2])
def test_diag_of_vectors(torch, k):
    _both(torch, lambda L, x: L.diag(x, k), np.array([True, False, True]), grad=False)
    _both(torch, lambda L, x: L.diag(x, k), np.array([3, -1]), grad=False)
    _both(torch, lambda L, x: L.diag(x, k), np.array([1.5, math.inf, -2.0]))


def test_trace_of_bool_raises_as_torch(torch):
    for L in (torch, fg):
        with pytest.raises(NotImplementedError):
            L.eye(3).bool().trace()
    _both(torch, lambda L, x: x.trace(), np.arange(9.0).reshape(3, 3))


# -------------------------------------------------------------- transposes and adjoint


def test_transposes_of_small_tensors(torch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _both(torch, lambda L, x: x.mT, np.array(1.5))
        _both(torch, lambda L, x: x.mH, np.array(1.5))
        _both(torch, lambda L, x: x.H, np.array(1.5))
        _both(torch, lambda L, x: x.t(), np.array(1.5))
    _both(torch, lambda L, x: x.t(), np.arange(3.0))
    _both(torch, lambda L, x: x.H, np.arange(6.0).reshape(2, 3))
    _both(torch, lambda L, x: x.mH, np.arange(24.0).reshape(2, 3, 4))
    _both(torch, lambda L, x: x.adjoint(), np.arange(24.0).reshape(2, 3, 4))
    _both(torch, lambda L, x: L.adjoint(x), np.arange(6.0).reshape(2, 3))
    for L in (torch, fg):
        with pytest.raises(RuntimeError):
            L.zeros(2, 2, 2).t()
        with pytest.raises(RuntimeError):
            _ = L.zeros(2).H


# --------------------------------------------------------------- real tensors as complex


def test_conj_real_imag_of_real_tensors(torch):
    a = np.arange(6.0).reshape(2, 3)
    for L in (torch, fg):
        x = L.tensor(a)
        assert L.conj(x) is x
        assert not x.is_conj()
        with pytest.raises(TypeError):
            L.imag(x)
        with pytest.raises(TypeError):
            _ = x.imag
    _both(torch, lambda L, x: x.conj() * 2, a)
    _both(torch, lambda L, x: L.real(x) * 2, a)
    _both(torch, lambda L, x: x.real * 2, a)
    _both(torch, lambda L, x: x.resolve_conj() * 2, a)
    _both(torch, lambda L, x: x.conj_physical() * 2, a)


def test_complex_pairs_keep_their_parts():
    c = fg.view_as_complex(fg.tensor([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_array_equal(fg.real(c).numpy(), [1.0, 3.0])
    np.testing.assert_array_equal(fg.imag(c).numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(fg.conj(c).imag.numpy(), [-2.0, -4.0])


def test_base_and_is_view():
    x = fg.ones(2, 3)
    assert x._base is None
    assert x._is_view() is False


# ------------------------------------------------------------------------------- out=


def test_out_keyword(torch):
    outs = []
    for L in (torch, fg):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r1 = L.empty(0)
            a = L.diag(L.tensor([1.0, 2.0]), out=r1)
            r2 = L.empty(2)
            b = L.clamp(L.tensor([-1.0, 3.0]), 0, 1, out=r2)
            r3 = L.empty(2)
            c = L.clip(L.tensor([-1.0, 3.0]), max=0.5, out=r3)
            r4 = L.empty([], dtype=L.int64)
            d = L.nonzero(L.tensor([0.0, 1.0, 2.0]), out=r4)
            r5 = L.empty(5)
            e = L.diag(L.eye(2), out=r5)  # resized (PyTorch warns)
        assert a is r1 and b is r2 and c is r3 and d is r4 and e is r5
        outs.append((a, b, c, d, e))
    for x, y in zip(*outs):
        _same(x, y)


def test_out_keyword_errors(torch):
    for L in (torch, fg):
        with pytest.raises(RuntimeError):
            L.clamp(L.ones(2), 0, 1, out=L.empty(2, dtype=L.int64))
        with pytest.raises(RuntimeError):
            L.nonzero(L.ones(2), out=L.empty(2))
        with pytest.raises(RuntimeError):
            L.clamp(L.ones(2, requires_grad=True), 0, 1, out=L.empty(2))


# ------------------------------------------------------------------------ view(dtype)


@pytest.mark.skipif(TEST_DEVICE != "cpu", reason="view(dtype) reinterprets CPU buffers only")
def test_view_dtype(torch):
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    for src, dst in [
        ("float32", "int32"),
        ("float64", "int64"),
        ("int32", "float32"),
        ("int64", "float64"),
    ]:
        outs = []
        for L in (torch, fg):
            x = L.tensor(a.astype(src))
            v = x.view(getattr(L, dst))
            assert _dt(v) == dst
            outs.append((x, v, x.t().view(getattr(L, dst))))
        for p, q in zip(*outs):
            _same(p, q)
        assert outs[1][2].stride() == tuple(outs[0][2].stride())


@pytest.mark.skipif(TEST_DEVICE != "cpu", reason="view(dtype) reinterprets CPU buffers only")
def test_view_dtype_shares_memory(torch):
    outs = []
    for L in (torch, fg):
        x = L.arange(6.0).reshape(2, 3)
        v = x.view(L.int32)
        v[0, 1] = 0
        x[1, 2] = -1.0
        outs.append((x, v))
    for p, q in zip(*outs):
        _same(p, q)


@pytest.mark.skipif(TEST_DEVICE != "cpu", reason="view(dtype) reinterprets CPU buffers only")
def test_view_dtype_other_item_sizes(torch):
    outs = []
    for L in (torch, fg):
        outs.append(
            (
                L.ones(2, dtype=L.float64).view(L.int32),
                L.tensor([1.0, 2.0]).view(L.uint8),
                L.tensor([1.0, 2.0]).view(L.float64),
                L.ones(4, 2).t().view(L.int32),
                L.tensor([1, 0, 1], dtype=L.uint8).view(L.bool),
                L.zeros(0, 2).view(L.int32),
                L.arange(4.0).view(dtype=L.int32),
            )
        )
    for p, q in zip(*outs):
        _same(p, q)
