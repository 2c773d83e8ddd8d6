"""Cases ported from PyTorch's test_reductions.py / test_type_promotion.py, run on PyTorch
and on ferrograd with the same assertions."""

import ferrograd as fg
import numpy as np
import pytest


@pytest.fixture(params=["torch", "ferrograd"])
def m(request):
    if request.param == "torch":
        return pytest.importorskip("torch")
    return fg


def _np(t):
    return np.asarray(t.detach().numpy())


A = np.arange(12.0).reshape(3, 4) - 5.5


def test_sum_mean_out(m):
    x = m.tensor(A)
    out = m.empty(0, dtype=m.float64)
    r = m.sum(x, 1, out=out)
    assert r is out and tuple(out.shape) == (3,)
    np.testing.assert_allclose(_np(out), A.sum(1))
    out = m.empty(0, dtype=m.float64)
    m.mean(x, 1, out=out)
    np.testing.assert_allclose(_np(out), A.mean(1))
    out = m.empty(0, dtype=m.int64)  # computed in the out dtype
    m.sum(x, 1, out=out)
    assert out.dtype == m.int64
    np.testing.assert_array_equal(_np(out), A.astype(np.int64).sum(1))


def test_amax_argmax_max_out(m):
    x = m.tensor(A)
    out = m.empty(0, dtype=m.float64)
    m.amax(x, 1, out=out)
    np.testing.assert_allclose(_np(out), A.max(1))
    iout = m.empty(0, dtype=m.int64)
    m.argmax(x, 1, out=iout)
    np.testing.assert_array_equal(_np(iout), A.argmax(1))
    v, i = m.empty(0, dtype=m.float64), m.empty(0, dtype=m.int64)
    r = m.max(x, dim=1, out=(v, i))
    assert r[0] is v and r[1] is i
    np.testing.assert_allclose(_np(v), A.max(1))
    np.testing.assert_array_equal(_np(i), A.argmax(1))


def test_binary_out_casting(m):
    f = m.ones(4)
    d = m.zeros(4, dtype=m.float64)
    m.add(f, f, out=d)
    assert d.dtype == m.float64
    np.testing.assert_allclose(_np(d), 2.0)
    with pytest.raises(RuntimeError):
        m.add(f, f, out=m.zeros(4, dtype=m.int64))
    with pytest.raises(RuntimeError):
        m.true_divide(m.tensor([4, 2]), 2, out=m.empty(2, dtype=m.int64))
    b = m.empty(0, dtype=m.bool)
    m.lt(m.tensor([1, 5]), m.tensor([2.0, 2.0]), out=b)
    assert b.dtype == m.bool and _np(b).tolist() == [True, False]
    with pytest.raises(RuntimeError):  # non-promoting op
        m.neg(m.ones(4), out=m.ones(4, dtype=m.float64))


def test_nanmean_int_raises(m):
    with pytest.raises(RuntimeError):
        m.nanmean(m.tensor([1, 2, 3]))


def test_quantile_checks(m):
    with pytest.raises(RuntimeError):
        m.quantile(m.tensor([1, 2, 3]), 0.5)
    with pytest.raises(RuntimeError):
        m.quantile(m.tensor(A), m.tensor([0.5], dtype=m.float32))
    r = m.quantile(m.tensor(A), m.tensor([0.5], dtype=m.float64))
    np.testing.assert_allclose(_np(r), [np.quantile(A, 0.5)])


def test_true_divide_inplace_int_raises(m):
    with pytest.raises(RuntimeError):
        m.tensor([4, 2]).true_divide_(2)
    x = m.tensor([4.0, 2.0])
    x.true_divide_(2)
    np.testing.assert_allclose(_np(x), [2.0, 1.0])


def test_rsub(m):
    x, y = m.tensor([1.0, 2.0]), m.tensor([5, 7])
    r = m.rsub(x, y)
    assert r.dtype == m.float32
    np.testing.assert_allclose(_np(r), [4.0, 5.0])
    np.testing.assert_allclose(_np(m.rsub(x, y, alpha=2)), [3.0, 3.0])
    r = m.rsub(m.tensor([1, 2]), 10)
    assert r.dtype == m.int64 and _np(r).tolist() == [9, 8]


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64", "bool"])
def test_true_division_by_python_int_does_not_wrap(m, dtype):
    # the int is not converted to the tensor's dtype first (1000 does not fit in int8)
    vals = np.array([5, 2, 1], dtype=dtype)
    x = m.tensor(vals)
    for got, want in (
        (1000 / x, 1000 / vals.astype(np.float64)),
        (x / 1000, vals.astype(np.float64) / 1000),
        (-3 / x, -3 / vals.astype(np.float64)),
        (m.div(x, 1000), vals.astype(np.float64) / 1000),
        (m.true_divide(x, 300), vals.astype(np.float64) / 300),
    ):
        assert str(got.dtype).endswith("float32")
        np.testing.assert_allclose(_np(got), want, rtol=1e-6)


def test_bool_in_place_add_and_mul_are_logical(m):
    a0, b0 = np.array([True, False, True, False]), np.array([True, True, False, False])
    a, b = m.tensor(a0), m.tensor(b0)
    c = a.clone()
    c += b
    np.testing.assert_array_equal(_np(c), a0 | b0)
    c = a.clone()
    c *= b
    np.testing.assert_array_equal(_np(c), a0 & b0)
    np.testing.assert_array_equal(_np(a.clone().add_(b)), a0 | b0)
    np.testing.assert_array_equal(_np(a.clone().mul_(b)), a0 & b0)
    assert a.clone().add_(b).dtype == m.bool
    with pytest.raises(RuntimeError):
        c = a.clone()
        c += 1  # an int64 result cannot be written into bool


@pytest.mark.parametrize("dtype", ["int64", "int8"])
def test_integer_to_a_bool_power_stays_integer(m, dtype):
    x = m.tensor(np.array([2, 3, -4], dtype=dtype))
    for e in (True, False):
        r = x**e
        assert r.dtype == getattr(m, dtype)
        np.testing.assert_array_equal(_np(r), np.array([2, 3, -4], dtype=np.int64) ** int(e))
