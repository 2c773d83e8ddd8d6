"""Sorting/selection and linalg behaviour checked against PyTorch: int64 indices for every
input dtype, NaN in median, batched ``*_ex`` ops, BLAS-style ``alpha``/``beta``, singular
matrices in ``cond``/``det``/``lu_factor``, and the keywords and functions PyTorch's tests
use."""

from __future__ import annotations

import math

import ferrograd as fg
import numpy as np
import pytest

NAN = float("nan")


def _torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32"])
def test_sort_family_indices_are_int64_past_the_dtype_range(dtype):
    x = fg.tensor([0, 1] * 200, dtype=dtype)
    _, i = x.sort(stable=True)
    assert i.dtype == fg.int64
    assert i[198:202].tolist() == [396, 398, 1, 3] and int(i.max()) == 399
    assert fg.argsort(x).dtype == fg.int64
    k = fg.kthvalue(x, 290)
    assert k.indices.dtype == fg.int64 and int(x[int(k.indices)]) == 1
    assert x.median(0).indices.dtype == fg.int64
    assert fg.topk(x, 400).indices.dtype == fg.int64
    assert int(fg.topk(x, 400).indices.max()) == 399


def test_median_dim_propagates_nan_like_torch():
    torch = _torch()
    rows = [[1.0, NAN, 3.0, NAN], [NAN, 5.0, 6.0, 7.0], [4.0, 2.0, 3.0, 1.0]]
    r = fg.tensor(rows).median(dim=1)
    t = torch.tensor(rows).median(dim=1)
    np.testing.assert_array_equal(r.values.numpy(), t.values.numpy())
    assert r.indices.tolist() == t.indices.tolist()
    x = fg.tensor(rows, dtype="float64", requires_grad=True)
    x.median(dim=1, keepdim=True).values.sum().backward()
    xt = torch.tensor(rows, dtype=torch.float64, requires_grad=True)
    xt.median(dim=1, keepdim=True).values.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())


def _bad_batch(lib):
    D = lib.float64
    return lib.stack(
        [
            lib.eye(3, dtype=D) * 2,
            lib.diag(lib.tensor([1.0, 2.0, -1.0], dtype=D)),
            lib.diag(lib.tensor([1.0, 0.0, 1.0], dtype=D)),
        ]
    )


def test_batched_ex_ops_report_each_matrix():
    torch = _torch()
    A, At = _bad_batch(fg), _bad_batch(torch)
    for name in ("cholesky_ex", "inv_ex"):
        r = getattr(fg.linalg, name)(A)
        t = getattr(torch.linalg, name)(At)
        assert r[1].tolist() == t[1].tolist() and r[1].dtype == fg.int32
        np.testing.assert_allclose(r[0][0].numpy(), t[0][0].numpy())
        with pytest.raises(RuntimeError, match="Batch element"):
            getattr(fg.linalg, name)(A, check_errors=True)
    B = fg.ones(3, 3, 2, dtype="float64")
    r = fg.linalg.solve_ex(A, B)
    t = torch.linalg.solve_ex(At, torch.ones(3, 3, 2, dtype=torch.float64))
    assert r.info.tolist() == t.info.tolist()
    np.testing.assert_allclose(r.result[0].numpy(), t.result[0].numpy())
    # the good matrix keeps its gradient
    G = fg.tensor(A.numpy(), requires_grad=True)
    fg.linalg.inv_ex(G).inverse[0].sum().backward()
    np.testing.assert_allclose(G.grad[0].numpy(), -0.25 * np.ones((3, 3)))
    assert not G.grad[1:].numpy().any()


def test_lu_factor_singular():
    torch = _torch()
    Z = np.stack([np.eye(3), np.diag([1.0, 2.0, 0.0]), np.zeros((3, 3))])
    with pytest.raises(RuntimeError, match="lu_factor"):
        fg.linalg.lu_factor(fg.tensor(Z))
    r = fg.linalg.lu_factor_ex(fg.tensor(Z))
    t = torch.linalg.lu_factor_ex(torch.tensor(Z))
    np.testing.assert_array_equal(r.LU.numpy(), t.LU.numpy())
    assert r.info.tolist() == t.info.tolist()


@pytest.mark.parametrize("op", ["addmm", "addmv", "addbmm", "baddbmm", "addr"])
def test_blas_ops_skip_input_with_beta_0_and_product_with_alpha_0(op):
    torch = _torch()
    shapes = {
        "addmm": ((2, 2), (2, 2), (2, 2)),
        "addmv": ((2,), (2, 2), (2,)),
        "addbmm": ((2, 2), (3, 2, 2), (3, 2, 2)),
        "baddbmm": ((3, 2, 2), (3, 2, 2), (3, 2, 2)),
        "addr": ((2, 2), (2,), (2,)),
    }[op]
    for beta, alpha, nan_at in ((0, 1, 0), (1, 0, 1), (2, 0, 2)):
        for lib in (fg, torch):
            args = [lib.full(s, 1.5, dtype=lib.float64) for s in shapes]
            args[nan_at] = lib.full(shapes[nan_at], NAN, dtype=lib.float64)
            out = getattr(lib, op)(*args, beta=beta, alpha=alpha)
            if lib is fg:
                got = out.numpy()
            else:
                np.testing.assert_array_equal(got, out.numpy())
        # (PyTorch's baddbmm and addr still compute the product when alpha is 0)
        assert np.isnan(got).any() == (nan_at != 0 and op in ("baddbmm", "addr"))


@pytest.mark.parametrize("p", [1, -1, math.inf, -math.inf, "fro", "nuc", 2, None])
def test_cond_of_singular_matrix_is_inf(p):
    S = fg.tensor([[[1.0, 0.0], [0.0, 0.0]], [[2.0, 0.0], [0.0, 2.0]]], dtype="float64")
    c = fg.linalg.cond(S, p)
    assert math.isinf(float(c[0])) and float(c[0]) > 0
    torch = _torch()
    t = torch.linalg.cond(torch.tensor(S.numpy()), p)
    np.testing.assert_allclose(c.numpy(), t.numpy())


def test_det_gradient_at_singular_matrices_matches_finite_differences():
    rng = np.random.default_rng(0)
    mats = [
        np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]]),  # rank 2
        rng.standard_normal((3, 3)),
        np.zeros((3, 3)),
    ]
    A = fg.tensor(np.stack(mats), requires_grad=True)
    fg.linalg.det(A).sum().backward()
    for k, m in enumerate(mats):
        fd = np.zeros((3, 3))
        for i in range(3):
            for j in range(3):
                e = np.zeros((3, 3))
                e[i, j] = 1e-6
                fd[i, j] = (np.linalg.det(m + e) - np.linalg.det(m - e)) / 2e-6
        np.testing.assert_allclose(A.grad[k].numpy(), fd, atol=1e-7)


def test_unique_keeps_nans_apart_like_torch():
    torch = _torch()
    vals = [NAN, 1.0, NAN, 1.0]
    r = fg.unique(fg.tensor(vals), return_inverse=True, return_counts=True)
    t = torch.unique(torch.tensor(vals), return_inverse=True, return_counts=True)
    for a, b in zip(r, t):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_unique_dim_on_empty_tensors_like_torch():
    with pytest.raises(RuntimeError):
        fg.unique(fg.empty(5, 0, 0), dim=1)
    with pytest.raises(RuntimeError):
        fg.unique(fg.empty(0, 3), dim=1)
    assert fg.unique(fg.empty(5, 0, 5), dim=1).shape == (5, 0, 5)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_gradient_like_torch(upper):
    torch = _torch()
    L = np.array([[2.0, 0.0], [1.0, 3.0]])
    B = np.array([[1.0, 2.0], [0.5, -1.0]])
    L = L.T if upper else L
    x = fg.tensor(L, requires_grad=True)
    out = fg.cholesky_solve(fg.tensor(B), x, upper=upper)
    (out * out).sum().backward()
    xt = torch.tensor(L, requires_grad=True)
    ot = torch.cholesky_solve(torch.tensor(B), xt, upper=upper)
    (ot * ot).sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), ot.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-10)


def test_kthvalue_k_out_of_range_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="kthvalue"):
        fg.kthvalue(fg.tensor([[4.0, 1.0, 3.0]]), 4, dim=1)


def test_out_keywords_and_missing_apis():
    torch = _torch()
    x = fg.tensor([3.0, 1.0, 2.0, 5.0, 4.0])
    v, i = fg.empty(0), fg.empty(0, dtype=fg.int64)
    fg.topk(x, 2, out=(v, i))
    assert v.tolist() == [5.0, 4.0] and i.tolist() == [3, 4]
    m = fg.empty(0)
    fg.msort(x, out=m)
    assert m.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    mv, mi = fg.empty(0), fg.empty(0, dtype=fg.int64)
    fg.mode(fg.tensor([1.0, 2.0, 2.0]), out=(mv, mi))
    assert float(mv) == 2.0
    inv = fg.empty(0)
    fg.linalg.inv(fg.eye(2) * 2, out=inv)
    assert inv.tolist() == [[0.5, 0.0], [0.0, 0.5]]
    a = [[1, 2], [3, 4]]
    for dt in ("int64", "uint8"):
        r = fg.linalg.matrix_power(fg.tensor(a, dtype=dt), 3)
        t = torch.linalg.matrix_power(torch.tensor(a, dtype=getattr(torch, dt)), 3)
        assert r.dtype.name == dt and r.tolist() == t.tolist()
    td = fg.tensordot(fg.ones(2, 3), fg.ones(3, 2), dims=fg.tensor(1))
    assert td.tolist() == [[3.0, 3.0], [3.0, 3.0]]
    y = fg.ones(2, 2)
    y.addbmm_(fg.ones(1, 2, 2), fg.ones(1, 2, 2))
    y.addmv_(fg.zeros(2, 2), fg.ones(2), beta=1)  # a row of 0s added
    y.addr_(fg.ones(2), fg.ones(2))
    assert y.tolist() == [[4.0, 4.0], [4.0, 4.0]]
    r = fg.randint(high=3, size=(20,))
    assert r.shape == (20,) and 0 <= int(r.min()) and int(r.max()) < 3


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (1, 1, 0, 0)])
def test_batched_ex_ops_take_empty_matrices(shape):
    torch = pytest.importorskip("torch")
    for name in ("cholesky_ex", "inv_ex"):
        ours = getattr(fg.linalg, name)(fg.zeros(shape, dtype=fg.float64))
        theirs = getattr(torch.linalg, name)(torch.zeros(shape, dtype=torch.float64))
        assert [tuple(t.shape) for t in ours] == [tuple(t.shape) for t in theirs], name
