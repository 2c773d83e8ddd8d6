"""Cases ported from PyTorch's test_tensor_creation_ops.py and test_torch.py: each test runs
the same assertions on ``torch`` and on ``ferrograd`` (the ``T`` argument), so a case that
passes on both checks that ferrograd behaves as PyTorch does."""

from __future__ import annotations

import warnings

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(params=["torch", "ferrograd"])
def T(request):
    return torch if request.param == "torch" else fg


def _np(x):
    return np.asarray(x.detach().numpy())


def _eq(a, b, atol=0.0, rtol=0.0):
    a, b = _np(a), (_np(b) if not isinstance(b, np.ndarray) else b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), atol=atol, rtol=rtol)


def _dt(d):
    return str(d).replace("torch.", "")


# ------------------------------------------------------------------------ wrong values


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8", "bool"])
def test_vander_promotes_integers_to_int64(T, dtype):
    x = T.tensor(
        [-3, 2, 5, 0] if dtype not in ("uint8", "bool") else [1, 0, 1], dtype=getattr(T, dtype)
    )
    v = T.vander(x)
    assert _dt(v.dtype) == "int64"
    ref = np.vander(_np(x).astype(np.int64))
    _eq(v, ref)


def test_random_bool_draws_both(T):
    t = T.empty(2000, dtype=T.bool)
    t.fill_(False)
    t.random_()
    assert bool(t.min()) is False and bool(t.max()) is True
    assert 0.4 < t.to(T.int64).sum().item() / 2000 < 0.6


def test_random_default_range_int8(T):
    t = T.zeros(500, dtype=T.int8)
    t.random_()
    assert int(t.min()) >= 0 and int(t.max()) <= 127 and int(t.max()) > 60


def test_arange_inference_0d_tensors(T):
    assert _dt(T.arange(T.tensor(1)).dtype) == "int64"
    assert _dt(T.arange(T.tensor(1.0)).dtype) == "float32"
    assert _dt(T.arange(T.tensor(1.0, dtype=T.float64), 3).dtype) == "float32"
    assert _dt(T.arange(T.tensor(1), 3).dtype) == "int64"
    assert _dt(T.arange(T.tensor(1), T.tensor(3, dtype=T.int32)).dtype) == "int64"
    assert _dt(T.arange(T.tensor(1), 3, T.tensor(1.0, dtype=T.float64)).dtype) == "float32"
    _eq(T.arange(T.tensor(1.0, dtype=T.float64), 3), np.array([1.0, 2.0]))


def test_arange_bool(T):
    r = T.arange(True)
    assert _dt(r.dtype) == "int64" and r.tolist() == [0]
    assert T.arange(False).tolist() == []


def test_size_is_size_and_new_with_size(T):
    x = T.zeros(2, 3, 4, dtype=T.float64)
    s = x.size()
    assert isinstance(s, T.Size) and isinstance(s, tuple)
    assert s == (2, 3, 4)
    assert isinstance(s[:1], T.Size) and isinstance(s[:1] + (3,) + s[1:], T.Size)
    assert isinstance((3,) + s, T.Size)
    y = x.new(s[:1] + (3,) + s[1:])
    assert tuple(y.shape) == (2, 3, 3, 4) and _dt(y.dtype) == "float64"
    assert tuple(x.new(x.size()).shape) == (2, 3, 4)
    assert tuple(x.new(T.Size([5])).shape) == (5,)
    assert x.new([2, 3]).tolist() == [2.0, 3.0]  # a list is data
    assert x.new((2, 3)).tolist() == [2.0, 3.0]  # and so is a plain tuple
    assert tuple(x.new(2, 3).shape) == (2, 3)


def test_meshgrid_errors(T):
    with pytest.raises(RuntimeError, match="expects a non-empty TensorList"):
        T.meshgrid()
    with pytest.raises(RuntimeError, match='indexing must be one of "xy" or "ij"'):
        T.meshgrid(T.tensor([1, 2]), indexing="")
    with pytest.raises(RuntimeError, match="Expected 0D or 1D tensor"):
        T.meshgrid(T.tensor([[1, 2], [3, 4]]), indexing="ij")
    with pytest.raises(RuntimeError, match="same dtype"):
        T.meshgrid(T.tensor([1], dtype=T.int32), T.tensor([2.0]), indexing="ij")


def test_addcdiv_integer_raises(T):
    with pytest.raises(RuntimeError, match="Integer division with addcdiv is no longer supported"):
        T.addcdiv(T.tensor([1]), T.tensor([1]), T.tensor([2]))
    with pytest.raises(RuntimeError, match="Integer division with addcdiv"):
        T.tensor([1.0]).addcdiv(T.tensor([1]), T.tensor([2]))
    _eq(T.addcdiv(T.tensor([1.0]), T.tensor([1.0]), T.tensor([2.0]), value=2), np.array([2.0]))


def test_roll_errors(T):
    data = T.arange(1, 9).view(2, 4)
    with pytest.raises(RuntimeError, match="required"):
        data.roll(shifts=(), dims=())
    with pytest.raises(RuntimeError, match="align"):
        data.roll(shifts=(1, 2), dims=(1,))
    _eq(data.roll(shifts=(2, -1), dims=(1, 0)), np.array([[7, 8, 5, 6], [3, 4, 1, 2]]))


# ---------------------------------------------------------------------------- crashes


def test_put_non_contiguous(T):
    d3 = T.zeros(4, 3).t()
    d3.put_(T.tensor([1, 4]), T.tensor([7.0, 8.0]))
    e = np.zeros((3, 4))
    e[0, 1], e[1, 0] = 7, 8
    _eq(d3, e)
    with pytest.raises(IndexError):
        T.zeros(3, 4).put_(T.tensor([12]), T.tensor([1.0]))


def test_stack_out_resizes(T):
    x, y = T.ones(2, 3), T.zeros(2, 3)
    out = T.empty(0)
    r = T.stack((x, y), 1, out=out)
    assert r is out and tuple(out.shape) == (2, 2, 3)
    _eq(out, np.stack([np.ones((2, 3)), np.zeros((2, 3))], 1))
    out = T.empty(5)
    with pytest.warns(UserWarning, match="resized"):
        T.stack((x, y), out=out)
    assert tuple(out.shape) == (2, 2, 3)


def test_block_diag_empty_and_mixed(T):
    r = T.block_diag()
    assert tuple(r.shape) == (1, 0) and _dt(r.dtype) == "float32"
    r = T.block_diag(T.tensor(1, dtype=T.int32), T.tensor(2.0, dtype=T.float64))
    assert _dt(r.dtype) == "float64"
    _eq(r, np.array([[1, 0], [0, 2]]))
    with pytest.raises(RuntimeError, match="Input tensors must have 2 or fewer dimensions"):
        T.block_diag(T.zeros(1, 1, 1))


def test_cat_empty_legacy(T):
    x = T.ones(4, 3, 2)
    empty = T.zeros(0)
    _eq(T.cat([x, empty], dim=1), _np(x))
    _eq(T.cat([empty, x], dim=1), _np(x))
    r = T.cat([empty, empty], dim=1)
    assert tuple(r.shape) == (0,)


# -------------------------------------------------------------------------- out= API


def test_cat_out(T):
    y = T.randn(4, 6)
    w = y.view(-1).clone()
    a = T.cat([w[:2], w[4:6]])
    b = T.cat([w[:2], w[4:6]], out=w[6:10])
    _eq(a, _np(b))
    _eq(w[6:10], _np(a))
    _eq(w[:6], _np(y.view(-1)[:6]))
    x = T.zeros(10, 5, 2)
    v = x.narrow(1, 0, 3)
    T.cat((T.full((10, 1, 2), 3.0),) * 3, dim=1, out=v)
    assert float(x[:, :3].sum()) == 180.0 and float(x[:, 3:].sum()) == 0.0
    o = T.empty(0)
    r = T.concat([T.ones(2), T.ones(1)], out=o)
    assert r is o and o.tolist() == [1.0, 1.0, 1.0]


def test_cat_out_internal_overlap(T):
    x = T.rand(1, 3).expand(6, 3)
    with pytest.raises(RuntimeError, match="unsupported operation"):
        T.cat([T.rand(3, 3), T.rand(3, 3)], out=x)
    with pytest.raises(RuntimeError, match="unsupported operation"):
        T.linspace(1, 10, 10, out=T.rand(1).expand(10))


@pytest.mark.parametrize("name", ["zeros", "ones", "empty"])
def test_factories_out(T, name):
    out = T.tensor([], dtype=T.int64)
    r = getattr(T, name)((2, 3), out=out)
    assert r is out and tuple(out.shape) == (2, 3) and _dt(out.dtype) == "int64"
    if name != "empty":
        assert out.sum().item() == (0 if name == "zeros" else 6)
    with pytest.raises(RuntimeError):
        getattr(T, name)((2, 3), dtype=T.float32, out=T.zeros(2, 3, dtype=T.float64))


def test_full_out(T):
    out = T.zeros(0, dtype=T.float64)
    T.full((2,), 7, out=out)
    assert out.tolist() == [7.0, 7.0] and _dt(out.dtype) == "float64"


def test_arange_out(T):
    res2 = T.tensor([], dtype=T.int64)
    T.arange(0, 100, out=res2)
    assert res2.tolist() == list(range(100))
    x = T.zeros(2, 3)
    T.arange(0, 4, out=x.narrow(1, 1, 2))  # as many elements: filled in place
    _eq(x, np.array([[0.0, 0.0, 1.0], [0.0, 2.0, 3.0]]))
    res = T.tensor([])
    T.arange(1, -1, -1, out=res)
    assert res.tolist() == [1.0, 0.0]
    r = T.arange(1, 10, 0.3, out=T.zeros(0, dtype=T.float64))
    assert r.shape[0] == 30 and abs(r[29].item() - 9.7) < 1e-12


def test_linspace_logspace_out(T):
    out = T.zeros(0)
    T.linspace(0, 1, 5, out=out)
    _eq(out, np.linspace(0, 1, 5), atol=1e-7)
    out = T.zeros(0, dtype=T.float64)
    T.logspace(0, 2, 3, out=out)
    _eq(out, np.array([1.0, 10.0, 100.0]), rtol=1e-12)
    out = T.zeros(0, dtype=T.int64)
    T.linspace(0, 10, 6, out=out)
    assert out.tolist() == [0, 2, 4, 6, 8, 10]


def test_sort_kthvalue_cummax_out(T):
    x = T.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    v, i = T.zeros(0), T.zeros(0, dtype=T.int64)
    r = T.sort(x, out=(v, i))
    assert r[0] is v and r[1] is i
    assert v.tolist() == [[1.0, 2.0, 3.0], [0.0, 4.0, 5.0]] and i.tolist() == [[1, 2, 0], [0, 2, 1]]
    v, i = T.zeros(0), T.zeros(0, dtype=T.int64)
    T.kthvalue(x, 2, 1, out=(v, i))
    assert v.tolist() == [2.0, 4.0] and i.tolist() == [2, 2]
    for op, ev in (
        ("cummax", [[3.0, 3.0, 3.0], [0.0, 5.0, 5.0]]),
        ("cummin", [[3.0, 1.0, 1.0], [0.0, 0.0, 0.0]]),
    ):
        v, i = T.zeros(0), T.zeros(0, dtype=T.int64)
        getattr(T, op)(x, 1, out=(v, i))
        assert v.tolist() == ev


def test_lerp_out(T):
    s, e = T.tensor([1.0, 2.0]), T.tensor([3.0, 6.0])
    out = T.tensor(1.0)
    r = T.lerp(s, e, 0.25, out=out)
    assert r is out and out.tolist() == [1.5, 3.0]


# ---------------------------------------------------------------------- missing API


GRADIENT_CASES = [
    ((6,), None, 1, 1),
    ((6,), None, 2.0, 2),
    ((4, 5), None, 1, 1),
    ((4, 5), None, [0.5, 2.0], 2),
    ((4, 5), 1, 3.0, 1),
    ((4, 5, 3), (0, 2), 1, 2),
    ((4, 5), [0], 1, 1),
    ((3, 4), -1, 0.5, 2),
]


@pytest.mark.parametrize("case", GRADIENT_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradient_matches_numpy(T, case, dtype):
    size, dim, sp, edge = case
    rng = np.random.default_rng(0)
    a = rng.standard_normal(size).astype(dtype)
    t = T.tensor(a)
    kw = {"spacing": sp, "edge_order": edge}
    if dim is not None:
        kw["dim"] = dim
    actual = T.gradient(t, **kw)
    expected = np.gradient(a, *(sp if isinstance(sp, list) else [sp]), axis=dim, edge_order=edge)
    if not isinstance(expected, (list, tuple)):
        expected = [expected]
    assert isinstance(actual, tuple) and len(actual) == len(expected)
    for x, e in zip(actual, expected):
        assert _dt(x.dtype) == dtype
        _eq(x, e, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("edge", [1, 2])
def test_gradient_coordinates(T, edge):
    t = T.tensor([1.0, 4.0, 9.0, 16.0, 25.0], dtype=T.float64)
    coords = T.tensor([0.0, 1.0, 1.5, 3.5, 4.0], dtype=T.float64)
    (g,) = T.gradient(t, spacing=(coords,), edge_order=edge)
    _eq(g, np.gradient(_np(t), _np(coords), edge_order=edge), rtol=1e-12)
    m = T.tensor(np.arange(12.0).reshape(3, 4) ** 2)
    c0, c1 = (
        T.tensor([0.0, 1.0, 3.0], dtype=T.float64),
        T.tensor([0.0, 0.5, 1.0, 2.0], dtype=T.float64),
    )
    g0, g1 = T.gradient(m, spacing=[c0, c1], edge_order=edge)
    e0, e1 = np.gradient(_np(m), _np(c0), _np(c1), edge_order=edge)
    _eq(g0, e0, rtol=1e-12)
    _eq(g1, e1, rtol=1e-12)


def test_gradient_int_and_errors(T):
    (g,) = T.gradient(T.tensor([1, 2, 4]))
    assert _dt(g.dtype) == "float32" and g.tolist() == [1.0, 1.5, 2.0]
    with pytest.raises(RuntimeError, match="only supports edge_order=1 and edge_order=2"):
        T.gradient(T.randn(3, 4), edge_order=3)
    with pytest.raises(RuntimeError):
        T.gradient(T.randn(1, 4))
    with pytest.raises(RuntimeError):
        T.gradient(T.randn(3, 4), spacing=[1.0, 2.0, 3.0])


def test_renorm(T):
    x = T.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]], dtype=T.float64)
    expected = np.array([[0.6, 0.8], [0.3, 0.4], [0.6, 0.8]])
    _eq(T.renorm(x, 2, 0, 1.0), expected, atol=1e-6)
    _eq(x.renorm(2, 0, 1.0), expected, atol=1e-6)
    _eq(
        T.renorm(x, 1, 1, 5.0), _np(x) * np.array([5 / (9.3 + 1e-7), 5 / (12.4 + 1e-7)]), rtol=1e-12
    )
    y = x.clone()
    assert y.renorm_(2, 0, 1.0) is y
    _eq(y, expected, atol=1e-6)
    with pytest.raises(RuntimeError):
        T.renorm(T.tensor([1.0, 2.0]), 2, 0, 1.0)
    with pytest.raises(RuntimeError):
        T.renorm(x, 0, 0, 1.0)


def test_resize_(T):
    x = T.arange(6.0)
    dp = x.data_ptr()
    assert x.resize_(2, 3) is x
    assert tuple(x.shape) == (2, 3) and x.data_ptr() == dp
    _eq(x, np.arange(6.0).reshape(2, 3))
    x.resize_(2)
    assert x.tolist() == [0.0, 1.0]
    x.resize_(0)
    assert tuple(x.shape) == (0,)
    y = T.arange(4.0)
    assert y.resize_as_(T.zeros(2, 2)) is y
    _eq(y, np.arange(4.0).reshape(2, 2))
    z = T.tensor([1.0, 2.0])
    z.resize_(5)
    assert tuple(z.shape) == (5,) and z[:2].tolist() == [1.0, 2.0]
    w = T.arange(6).view(2, 3).t().contiguous()  # rows [0 3] [1 4] [2 5]
    w.resize_(T.Size([4]))
    assert w.tolist() == [0, 3, 1, 4]


def test_empty_strided(T):
    t = T.empty_strided((2, 3), (1, 2))
    assert tuple(t.shape) == (2, 3) and tuple(t.stride()) == (1, 2)
    assert _dt(T.empty_strided((2,), (1,), dtype=T.float64).dtype) == "float64"
    assert tuple(T.empty_strided((0, 3), (3, 1)).shape) == (0, 3)


@pytest.mark.parametrize("periodic", [True, False])
@pytest.mark.parametrize("n", [0, 1, 2, 5, 8])
def test_windows(T, periodic, n):
    ref = {
        "hann_window": torch.hann_window,
        "hamming_window": torch.hamming_window,
        "blackman_window": torch.blackman_window,
        "bartlett_window": torch.bartlett_window,
        "kaiser_window": torch.kaiser_window,
    }
    for name, tf in ref.items():
        w = getattr(T, name)(n, periodic, dtype=T.float64)
        _eq(w, tf(n, periodic, dtype=torch.float64).numpy(), atol=1e-12)
    w = T.kaiser_window(7, periodic, 5.0, dtype=T.float64)
    _eq(w, torch.kaiser_window(7, periodic, 5.0, dtype=torch.float64).numpy(), atol=1e-12)


@pytest.mark.parametrize("name", ["hstack", "vstack", "row_stack", "column_stack", "dstack"])
def test_stacks_refuse_a_bare_tensor(T, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.row_stack is deprecated
        with pytest.raises(TypeError, match="must be tuple of Tensors, not Tensor"):
            getattr(T, name)(T.randn(10))
        assert getattr(T, name)([T.ones(2), T.ones(2)]).numel() == 4


# ----------------------------------------------------------------- exception types


def test_histc_errors(T):
    with pytest.raises(RuntimeError, match=r"range of \[.*\] is not finite"):
        T.histc(T.tensor([float("inf")]))
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        T.histc(T.tensor([1.0, 2.0]), bins=4, min=5, max=1)
    _eq(T.histc(T.tensor([1.0, 2.0, 1.0]), bins=4, min=0, max=3), np.array([0.0, 2.0, 1.0, 0.0]))


def test_bincount_errors(T):
    with pytest.raises(RuntimeError):
        T.bincount(T.tensor([1, 0]), T.tensor([1.0, 0.3, 0.5]))
    with pytest.raises(RuntimeError):
        T.bincount(T.tensor([1, 0]), minlength=-1)
    assert T.bincount(T.tensor([1, 1, 3])).tolist() == [0, 2, 0, 1]


def test_repeat_interleave_errors(T):
    y = T.tensor([[1, 2], [3, 4]])
    with pytest.raises(RuntimeError):
        T.repeat_interleave(y, T.tensor([1, 2, 3]), dim=0)
    with pytest.raises(RuntimeError):
        T.repeat_interleave(y, T.arange(9).reshape(3, 3), dim=0)
    with pytest.raises(RuntimeError):
        y.repeat_interleave(T.tensor([1, -2]), dim=0)
    _eq(T.repeat_interleave(y, T.tensor([1, 2]), dim=0), np.array([[1, 2], [3, 4], [3, 4]]))
    _eq(T.repeat_interleave(y, T.tensor([2]), dim=0), np.array([[1, 2], [1, 2], [3, 4], [3, 4]]))
