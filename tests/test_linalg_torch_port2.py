"""A second port of PyTorch's ``test/test_linalg.py`` (real float32/float64 only): the
decompositions and solves (det/slogdet/logdet, inv, solve, solve_triangular, cholesky, lu,
qr, eigh, svd, pinv, matrix_rank), the norms and ``cond``, ``matrix_power``/``matrix_exp``,
``multi_dot``, ``tensorinv``/``tensorsolve``, ``householder_product``, ``cross``, ``vander``,
``vecdot``, ``diagonal`` and the BLAS-style ops (addmm, addmv, addr, baddbmm, addbmm,
chain_matmul, matmul broadcasting). Each test names the PyTorch test it comes from; values
and float64 gradients are compared with torch running the same code on the same inputs
(batched and empty inputs included), and bad inputs must raise torch's exception type.
``tests/test_sort_linalg_port.py`` holds the first port; what it covers is not repeated.

Where PyTorch itself misbehaves the reference is the definition instead, not its accident:
the backward of ``linalg.cond`` for p in 1, -1, inf, -inf, 'fro', 'nuc' fails (its inv_ex
output is modified in place), so those gradients are compared with
``matrix_norm(A) * matrix_norm(inv(A))``; the backward of ``linalg.vander`` / ``vander`` on 1-D
inputs fails likewise, so it is compared with the stacked powers. ``linalg.vecdot`` with an
out-of-range ``dim`` on 1-D inputs returns a value in PyTorch (not checked); ``baddbmm`` /
``addbmm`` with 2-D batches raise IndexError in PyTorch (an indexing accident; ferrograd's
shape error is a RuntimeError, not checked). ferrograd differentiates ``qr(mode='r')`` (the
reduced mode's gradient of R) where PyTorch refuses. The deprecated positional beta/alpha
overloads of ``addbmm_`` / ``baddbmm_`` are not ported."""

from __future__ import annotations

import itertools
import math
import warnings

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")

INF = math.inf


@pytest.fixture(autouse=True)
def _on_the_host():
    previous = fg.get_default_device()
    fg.set_default_device("cpu")
    try:
        yield
    finally:
        fg.set_default_device(previous)


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [o for x in out for o in _flat(x)]
    return [out]


def _close(a, b, rtol=1e-9, atol=1e-11):
    a, b = _np(a), _np(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _spd(*shape, seed=0):
    a = _rand(*shape, seed=seed)
    n = shape[-1]
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _fullrank(*shape, seed=0):
    """Well conditioned square matrices (distinct singular values, as PyTorch's
    ``make_fullrank_matrices_with_distinct_singular_values``)."""
    rng = np.random.default_rng(seed)
    n = shape[-1]
    u, _ = np.linalg.qr(rng.standard_normal(shape))
    v, _ = np.linalg.qr(rng.standard_normal(shape))
    s = np.linspace(1.0, 2.0, n) * rng.choice([-1.0, 1.0], size=shape[:-1])
    return (u * s[..., None, :]) @ v


def _both(fn, *arrays, grad=True, rtol=1e-9, atol=1e-11, grad_rtol=1e-7, grad_atol=1e-9):
    """Run ``fn(lib, *tensors)`` with ferrograd and torch on the same float64 inputs; compare
    every output and (with ``grad``) the gradients of a fixed random weighting of them."""
    res = {}
    for lib in (fg, torch):
        ts = [lib.tensor(np.asarray(a), dtype=lib.float64, requires_grad=grad) for a in arrays]
        outs = [o for o in _flat(fn(lib, *ts)) if o.dtype == lib.float64]
        grads = None
        if grad:
            loss = 0
            for k, o in enumerate(outs):
                w = np.random.default_rng(100 + k).standard_normal(tuple(o.shape))
                loss = loss + (o * lib.tensor(w, dtype=lib.float64)).sum()
            if getattr(loss, "requires_grad", False):
                grads = lib.autograd.grad(loss, ts, allow_unused=True)
            else:  # (empty outputs: nothing depends on the inputs)
                grads = [None] * len(ts)
        res[lib] = (outs, grads)
    (fo, fgr), (to, tgr) = res[fg], res[torch]
    assert len(fo) == len(to)
    for a, b in zip(fo, to):
        _close(a, b, rtol, atol)
    if grad:
        for a, b in zip(fgr, tgr):
            if b is None:
                assert a is None or not _np(a).any()
                continue
            assert a is not None, "ferrograd gave no gradient where torch gives one"
            _close(a, b, grad_rtol, grad_atol)
    return fo


def _raises_like_torch(fn, *arrays, dtype="float64"):
    """``fn(lib, *tensors)`` raises in torch; ferrograd must raise an exception of the same
    type (or a subclass)."""
    with pytest.raises(Exception) as t:
        fn(torch, *[torch.tensor(np.asarray(a), dtype=getattr(torch, dtype)) for a in arrays])
    with pytest.raises(_like(t.value)):
        fn(fg, *[fg.tensor(np.asarray(a), dtype=dtype) for a in arrays])


def _like(err):
    """ferrograd's counterpart of the exception class torch raised: its LinAlgError for
    torch's, else the first of IndexError, ValueError, TypeError, RuntimeError it derives from
    (torch's NotImplementedError for integer inputs is a RuntimeError)."""
    if isinstance(err, torch.linalg.LinAlgError):
        return fg.linalg.LinAlgError
    for cls in (IndexError, ValueError, TypeError, RuntimeError):
        if isinstance(err, cls):
            return cls
    raise AssertionError(f"unexpected exception from torch: {err!r}")


# ------------------------------------------------------------------ det / slogdet / logdet


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (2, 1, 3, 3), (0, 3, 3), (0, 0), (2, 0, 0)])
def test_det_logdet_slogdet(shape):
    # test_det / test_slogdet / test_logdet_batched
    a = _fullrank(*shape) if 0 not in shape else np.zeros(shape)
    _both(lambda L, x: L.linalg.det(x), a)
    _both(lambda L, x: L.det(x), a)
    _both(lambda L, x: tuple(L.linalg.slogdet(x)), a)
    _both(lambda L, x: L.logdet(x @ x.mT), a)


def test_det_of_singular_and_negative_matrices():
    # test_det (singular), test_logdet (negative determinant: nan; zero: -inf)
    a = np.array([[[1.0, 2.0], [2.0, 4.0]], [[0.0, 1.0], [1.0, 0.0]], [[2.0, 0.0], [0.0, 3.0]]])
    _both(lambda L, x: L.linalg.det(x), a, grad=False)
    for L in (fg, torch):
        ld = L.logdet(L.tensor(a, dtype=L.float64))
        s, la = L.linalg.slogdet(L.tensor(a, dtype=L.float64))
        if L is fg:
            ours = (_np(ld), _np(s), _np(la))
        else:
            for x, y in zip(ours, (_np(ld), _np(s), _np(la))):
                np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize(
    "shape, dtype", [((3,), "float64"), ((2, 3), "float64"), ((3, 3), "int64")]
)
def test_slogdet_errors_and_warnings(shape, dtype):
    # test_slogdet_errors_and_warnings: 1-D, non-square, integer input
    a = np.ones(shape)
    for f in ("det", "slogdet", "logdet"):

        def fn(L, x, f=f):
            return getattr(L.linalg if f != "logdet" else L, f)(x)

        _raises_like_torch(fn, a, dtype=dtype)


# -------------------------------------------------------------------------- inv / inv_ex


@pytest.mark.parametrize("shape", [(4, 4), (3, 2, 2), (2, 1, 3, 3), (0, 0), (3, 0, 0), (0, 2, 2)])
def test_inverse(shape):
    # test_inverse: batches, empty matrices and empty batches; torch.inverse and Tensor.inverse
    a = _fullrank(*shape) if 0 not in shape else np.zeros(shape)
    _both(lambda L, x: L.linalg.inv(x), a)
    _both(lambda L, x: L.inverse(x), a)
    _both(lambda L, x: x.inverse(), a)
    _both(lambda L, x: L.linalg.inv_ex(x).inverse, a)


def test_inverse_errors():
    # test_inverse_errors / test_inv_ex_singular
    _raises_like_torch(lambda L, x: L.linalg.inv(x), np.ones((2, 3)))
    _raises_like_torch(lambda L, x: L.linalg.inv(x), np.ones(3))
    _raises_like_torch(lambda L, x: L.linalg.inv(x), np.eye(3), dtype="int64")
    sing = np.stack([np.eye(3), np.diag([1.0, 0.0, 1.0])])
    with pytest.raises(RuntimeError, match="inv"):
        fg.linalg.inv(fg.tensor(sing))
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.inv(torch.tensor(sing))
    assert issubclass(fg.linalg.LinAlgError, RuntimeError)
    with pytest.raises(fg.linalg.LinAlgError):
        fg.linalg.inv(fg.tensor(sing))
    # inv_ex on a single singular matrix: info is the 1-based index of the zero pivot
    r = fg.linalg.inv_ex(fg.tensor(sing[1]))
    t = torch.linalg.inv_ex(torch.tensor(sing[1]))
    assert r.info.shape == () and int(r.info) == int(t.info)


# --------------------------------------------------------------------- solve / solve_ex


@pytest.mark.parametrize(
    "a_shape, b_shape",
    [
        ((3, 3), (3,)),
        ((3, 3), (3, 2)),
        ((2, 3, 3), (2, 3, 4)),
        ((2, 1, 3, 3), (4, 3, 1)),  # broadcast batches
        ((3, 3), (2, 3, 2)),
        ((2, 3, 3), (3,)),  # a vector broadcast to the batch
        ((0, 3, 3), (0, 3, 2)),
        ((0, 0), (0, 2)),
    ],
)
@pytest.mark.parametrize("left", [True, False])
def test_solve(a_shape, b_shape, left):
    # test_solve / test_solve_batched_broadcasting
    if not left and len(b_shape) == 1:
        return
    a = _fullrank(*a_shape) if 0 not in a_shape else np.zeros(a_shape)
    if not left:
        b_shape = b_shape[:-2] + (b_shape[-1], b_shape[-2])
    b = _rand(*b_shape, seed=1)
    _both(lambda L, x, y: L.linalg.solve(x, y, left=left), a, b)
    _both(lambda L, x, y: L.linalg.solve_ex(x, y, left=left).result, a, b)


def test_solve_errors():
    # test_solve_errors_and_warnings
    _raises_like_torch(lambda L, x, y: L.linalg.solve(x, y), np.ones((2, 3)), np.ones((2, 1)))
    _raises_like_torch(lambda L, x, y: L.linalg.solve(x, y), np.eye(3), np.ones((2, 1)))
    _raises_like_torch(lambda L, x, y: L.linalg.solve(x, y), np.eye(3), np.ones((4,)))
    _raises_like_torch(lambda L, x, y: L.linalg.solve(x, y), np.ones((2, 3, 3)), np.ones((3, 3, 1)))
    _raises_like_torch(lambda L, x, y: L.linalg.solve(x, y), np.zeros((3, 3)), np.ones((3, 1)))


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unitriangular", [True, False])
def test_solve_triangular(upper, left, unitriangular):
    # test_linalg_solve_triangular (broadcast batches, left, unitriangular)
    a = _fullrank(2, 1, 4, 4) + 3 * np.eye(4)
    b = _rand(3, 4, 2, seed=1) if left else _rand(3, 2, 4, seed=1)

    def f(L, x, y):
        tri = x.triu() if upper else x.tril()
        return L.linalg.solve_triangular(
            tri, y, upper=upper, left=left, unitriangular=unitriangular
        )

    _both(f, a, b)


def test_solve_triangular_errors_and_empty():
    # test_linalg_solve_triangular_large / input checks
    def f(L, x, y):
        return L.linalg.solve_triangular(x, y, upper=True)

    _raises_like_torch(f, np.ones((3, 2)), np.ones((3, 1)))
    _raises_like_torch(f, np.eye(3), np.ones(3))  # B must be a matrix
    _raises_like_torch(f, np.eye(3), np.ones((2, 1)))
    _both(f, np.zeros((0, 3, 3)), np.zeros((0, 3, 1)))
    _both(f, np.zeros((2, 0, 0)), np.zeros((2, 0, 3)))
    for L in (fg, torch):
        with pytest.raises(TypeError):
            L.linalg.solve_triangular(L.eye(2), L.eye(2))  # upper is required


# ------------------------------------------------------------------------------ cholesky


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (2, 1, 2, 2), (0, 0), (2, 0, 0), (0, 3, 3)])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(shape, upper):
    # test_cholesky / test_cholesky_ex / test_old_cholesky_batched_upper
    a = _spd(*shape) if 0 not in shape else np.zeros(shape)
    _both(lambda L, x: L.linalg.cholesky((x + x.mT) / 2, upper=upper), a)
    _both(lambda L, x: L.linalg.cholesky_ex((x + x.mT) / 2, upper=upper).L, a)


def test_cholesky_errors_and_warnings():
    # test_cholesky_errors_and_warnings
    _raises_like_torch(lambda L, x: L.linalg.cholesky(x), np.ones((2, 3)))
    _raises_like_torch(lambda L, x: L.linalg.cholesky(x), np.ones(3))
    _raises_like_torch(lambda L, x: L.linalg.cholesky(x), np.eye(2), dtype="int64")
    bad = np.eye(3)
    bad[-1, -1] = -1
    with pytest.raises(torch.linalg.LinAlgError, match="order 3"):
        torch.linalg.cholesky(torch.tensor(bad))
    with pytest.raises(fg.linalg.LinAlgError, match="3"):
        fg.linalg.cholesky(fg.tensor(bad))
    r = fg.linalg.cholesky_ex(fg.tensor(bad))
    t = torch.linalg.cholesky_ex(torch.tensor(bad))
    assert int(r.info) == int(t.info) == 3


@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3), (2, 1, 2, 2), (0, 0), (0, 2, 2)])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_inverse(shape, upper):
    # test_cholesky_inverse (batched since PyTorch 1.13)
    a = _spd(*shape) if 0 not in shape else np.zeros(shape)

    def f(L, x):
        c = L.linalg.cholesky((x + x.mT) / 2, upper=upper)
        return L.cholesky_inverse(c, upper=upper)

    _both(f, a)
    _raises_like_torch(lambda L, x: L.cholesky_inverse(x), np.ones((2, 3)))
    _raises_like_torch(lambda L, x: L.cholesky_inverse(x), np.ones(3))


# ------------------------------------------------------------------------------------ lu


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 3, 3), (2, 1, 4, 2), (0, 3, 3)])
def test_lu(shape):
    # test_linalg_lu_family: P @ L @ U, lu_factor, lu_factor_ex, lu_unpack
    a = _rand(*shape)
    _both(lambda L, x: tuple(L.linalg.lu(x)), a)
    _both(lambda L, x: L.linalg.lu_factor(x).LU, a)
    _both(lambda L, x: L.linalg.lu_factor_ex(x).LU, a)
    for L in (fg, torch):
        r = L.linalg.lu_factor_ex(L.tensor(a))
        piv = r.pivots.tolist()
        if L is fg:
            ours = (piv, r.info.tolist(), str(r.pivots.dtype).split(".")[-1])
        else:
            assert ours == (piv, r.info.tolist(), str(r.pivots.dtype).split(".")[-1])

    def unpack(L, x):
        LU, piv = L.linalg.lu_factor(x)
        return tuple(L.lu_unpack(LU, piv))

    _both(unpack, a)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [True, False])
@pytest.mark.parametrize("batches", [(), (2,), (0,)])
def test_lu_solve(left, adjoint, batches):
    # test_linalg_lu_solve
    a = _fullrank(*batches, 3, 3)
    b = _rand(*batches, 3, 2, seed=1) if left else _rand(*batches, 2, 3, seed=1)

    def f(L, x, y):
        LU, piv = L.linalg.lu_factor(x)
        return L.linalg.lu_solve(LU, piv, y, left=left, adjoint=adjoint)

    _both(f, a, b)


def test_lu_errors():
    _raises_like_torch(lambda L, x: L.linalg.lu_factor(x), np.ones(3))
    _raises_like_torch(lambda L, x: L.linalg.lu(x), np.ones(3))
    _raises_like_torch(lambda L, x: L.linalg.lu_factor(x), np.eye(3), dtype="int64")

    def solve_bad(L, x, y):
        LU, piv = L.linalg.lu_factor(x)
        return L.linalg.lu_solve(LU, piv, y)

    _raises_like_torch(solve_bad, np.eye(3), np.ones((2, 1)))


# ------------------------------------------------------------------------------------ qr


def _qr_signfree(L, x, mode):
    Q, R = L.linalg.qr(x, mode=mode)
    return (Q, R) if mode != "r" else R


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3), (2, 1, 3, 3), (0, 3, 2)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr(shape, mode):
    # test_qr / test_qr_batched: the three modes and their shapes
    a = _rand(*shape)
    grad = mode == "reduced" or (mode == "complete" and shape[-2] <= shape[-1])
    _both(lambda L, x: _qr_signfree(L, x, mode), a, grad=grad)
    Q, R = fg.linalg.qr(fg.tensor(a), mode=mode)
    q, r = torch.linalg.qr(torch.tensor(a), mode=mode)
    assert tuple(Q.shape) == tuple(q.shape) and tuple(R.shape) == tuple(r.shape)


def test_qr_error_cases():
    # test_qr_error_cases
    _raises_like_torch(lambda L, x: L.linalg.qr(x), np.ones(3))
    _raises_like_torch(lambda L, x: L.linalg.qr(x, mode="hello"), np.ones((3, 3)))
    for L in (fg, torch):
        x = L.tensor(_rand(4, 3), requires_grad=True)
        with pytest.raises(RuntimeError):
            L.linalg.qr(x, mode="complete").Q.sum().backward()


# --------------------------------------------------------------------------------- eigh


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (2, 1, 2, 2), (0, 0), (0, 3, 3)])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(shape, uplo):
    # test_eigh / test_eigh_lower_uplo / test_eigvalsh: only one triangle is read
    a = _rand(*shape)

    def f(L, x):
        w, V = L.linalg.eigh(x, UPLO=uplo)
        return w, V * V  # sign free

    _both(f, a)
    _both(lambda L, x: L.linalg.eigvalsh(x, UPLO=uplo), a)


def test_eigh_errors_and_warnings():
    _raises_like_torch(lambda L, x: L.linalg.eigh(x), np.ones((2, 3)))
    _raises_like_torch(lambda L, x: L.linalg.eigh(x), np.ones(3))
    _raises_like_torch(lambda L, x: L.linalg.eigh(x, UPLO="X"), np.eye(3))
    _raises_like_torch(lambda L, x: L.linalg.eigvalsh(x, UPLO="X"), np.eye(3))
    _raises_like_torch(lambda L, x: L.linalg.eigvalsh(x), np.eye(3), dtype="int64")


# ---------------------------------------------------------------------------------- svd


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3), (2, 1, 3, 4), (0, 3, 2)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd(shape, full_matrices):
    # test_svd / test_linalg_svd_compute_uv: values, shapes, U S Vh = A
    a = _rand(*shape)
    U, S, Vh = fg.linalg.svd(fg.tensor(a), full_matrices=full_matrices)
    u, s, vh = torch.linalg.svd(torch.tensor(a), full_matrices=full_matrices)
    assert [tuple(t.shape) for t in (U, S, Vh)] == [tuple(t.shape) for t in (u, s, vh)]
    _close(S, s)
    k = min(shape[-2:])
    rec = (U[..., :k] * S.unsqueeze(-2)) @ Vh[..., :k, :]
    _close(rec, a, atol=1e-12)
    eye_u = np.broadcast_to(np.eye(U.shape[-1]), U.shape[:-2] + (U.shape[-1],) * 2)
    _close(U.mT @ U, eye_u, atol=1e-12)
    _both(lambda L, x: L.linalg.svdvals(x), a)

    def sign_free(L, x):
        Ur, Sr, Vr = L.linalg.svd(x, full_matrices=False)
        return Sr, Ur * Ur, Vr * Vr, (Ur * Sr.unsqueeze(-2)) @ Vr

    _both(sign_free, a, grad_rtol=1e-6)


def test_svd_errors():
    _raises_like_torch(lambda L, x: L.linalg.svd(x), np.ones(3))
    _raises_like_torch(lambda L, x: L.linalg.svdvals(x), np.ones(3))
    _raises_like_torch(lambda L, x: L.linalg.svd(x), np.eye(3), dtype="int64")


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 5, 3)])
def test_svd_full_matrices_gradient(shape):
    # PyTorch narrows the gradients of the complete U and Vh to their first min(m, n)
    # columns / rows (the others are not unique and carry no gradient): so does ferrograd
    k = min(shape[-2:])

    def f(L, x):
        U, S, Vh = L.linalg.svd(x, full_matrices=True)
        return S, U[..., :, :k] ** 2, Vh[..., :k, :] ** 2

    _both(f, _rand(*shape), grad_rtol=1e-6)


def test_qr_mode_r_gradient():
    # PyTorch raises on differentiating qr(mode='r') (its backward reads Q); ferrograd
    # computes Q internally, so the gradient of R is the reduced mode's
    a = _rand(2, 4, 3)
    x = fg.tensor(a, requires_grad=True)
    w = _rand(2, 3, 3, seed=5)
    (fg.linalg.qr(x, mode="r").R * fg.tensor(w)).sum().backward()
    xt = torch.tensor(a, requires_grad=True)
    (torch.linalg.qr(xt, mode="reduced").R * torch.tensor(w)).sum().backward()
    _close(x.grad, xt.grad, 1e-8, 1e-10)


# --------------------------------------------------------------------------------- pinv


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3), (2, 1, 3, 3), (0, 3, 2)])
def test_pinv(shape):
    # test_pinv: the Moore-Penrose conditions hold, values as torch's
    a = _rand(*shape)
    p = fg.linalg.pinv(fg.tensor(a)).numpy()
    np.testing.assert_allclose(a @ p @ a, a, atol=1e-10)
    np.testing.assert_allclose(p @ a @ p, p, atol=1e-10)
    _both(lambda L, x: L.linalg.pinv(x), a)
    _both(lambda L, x: L.pinverse(x), a)
    if shape[-1] == shape[-2]:
        _both(lambda L, x: L.linalg.pinv(x @ x.mT, hermitian=True), a)


def test_pinv_rtol_atol():
    # test_pinv_rtol_atol (and the deprecated rcond of torch.pinverse)
    a = np.diag([4.0, 1.0, 1e-3])[None].repeat(2, 0)
    a[1] *= 2
    for kw in (
        {"rtol": 0.1},
        {"atol": 0.5},
        {"atol": 0.5, "rtol": 0.5},
        {"rtol": 0.0},
        {"atol": 2.5, "hermitian": True},
    ):
        _both(lambda L, x, kw=kw: L.linalg.pinv(x, **kw), a)
    _both(lambda L, x, t: L.linalg.pinv(x, atol=t), a, np.array([0.5, 3.0]), grad=False)
    _both(
        lambda L, x, t: L.linalg.pinv(x, atol=t, rtol=t * 0 + 0.3),
        a,
        np.array([0.0, 3.0]),
        grad=False,
    )
    _both(lambda L, x: L.pinverse(x, rcond=0.1), a)


def test_pinv_errors():
    _raises_like_torch(lambda L, x: L.linalg.pinv(x), np.ones(3))
    _raises_like_torch(lambda L, x: L.linalg.pinv(x), np.eye(3), dtype="int64")


# --------------------------------------------------------------------------- matrix_rank


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (2, 3, 5), (0, 3, 3), (3, 0, 0), (2, 0, 3)])
@pytest.mark.parametrize("hermitian", [False, True])
def test_matrix_rank(shape, hermitian):
    # test_matrix_rank / test_matrix_rank_atol_rtol / test_matrix_rank_empty
    if hermitian and shape[-1] != shape[-2]:
        return
    a = _rand(*shape)
    if min(shape[-2:]) > 1:
        a[..., -1, :] = a[..., 0, :] * 2  # one rank fewer
    if hermitian:
        a = a @ np.swapaxes(a, -1, -2)
    for kw in ({}, {"atol": 1.0}, {"rtol": 0.5}, {"atol": 0.1, "rtol": 0.2}, {"tol": 1.0}):
        r = fg.linalg.matrix_rank(fg.tensor(a), hermitian=hermitian, **kw)
        t = torch.linalg.matrix_rank(torch.tensor(a), hermitian=hermitian, **kw)
        assert r.dtype == fg.int64 and r.tolist() == t.tolist() and r.shape == tuple(t.shape)
    at = np.linspace(0.1, 3.0, int(np.prod(shape[:-2]))).reshape(shape[:-2])
    r = fg.linalg.matrix_rank(fg.tensor(a), atol=fg.tensor(at), hermitian=hermitian)
    t = torch.linalg.matrix_rank(torch.tensor(a), atol=torch.tensor(at), hermitian=hermitian)
    assert r.tolist() == t.tolist()


def test_matrix_rank_errors():
    _raises_like_torch(lambda L, x: L.linalg.matrix_rank(x), np.ones(3))
    _raises_like_torch(lambda L, x: L.linalg.matrix_rank(x), np.eye(3), dtype="int64")


# -------------------------------------------------------------------------------- norms


@pytest.mark.parametrize("ord", [2, 1, 0, 3.5, -1, -2, INF, -INF, 0.5])
@pytest.mark.parametrize("dim, keepdim", [(None, False), (None, True), (1, False), ((0, 2), True)])
def test_vector_norm(ord, dim, keepdim):
    # test_vector_norm: ords, dims, keepdim (and dtype= below)
    a = _rand(3, 4, 5)
    a[0, 0, 0] = 0.0
    grad = ord not in (0,) and not (isinstance(ord, float) and ord < 1 and ord != -INF)
    _both(lambda L, x: L.linalg.vector_norm(x, ord, dim, keepdim), a, grad=grad)


def test_vector_norm_dtype_and_errors():
    # test_vector_norm: dtype= computes in that dtype; errors
    a = _rand(3, 4).astype(np.float32)
    r = fg.linalg.vector_norm(fg.tensor(a), 2, dtype=fg.float64)
    t = torch.linalg.vector_norm(torch.tensor(a), 2, dtype=torch.float64)
    assert r.dtype == fg.float64
    _close(r, t, rtol=1e-12)
    for L in (fg, torch):
        with pytest.raises(RuntimeError):  # a lower precision than the input
            L.linalg.vector_norm(L.tensor(_rand(3)), dtype=L.float32)
        with pytest.raises(RuntimeError):  # integer input
            L.linalg.vector_norm(L.tensor([1, 2, 3]))
        with pytest.raises(RuntimeError):  # inf norm of an empty reduction has no identity
            L.linalg.vector_norm(L.zeros(0, 3), INF, dim=0)
        with pytest.raises(RuntimeError):
            L.linalg.vector_norm(L.zeros(2, 0), -INF)
    for L in (fg, torch):
        out = L.linalg.vector_norm(L.zeros(0, 3, dtype=L.float64), 2, dim=0)
        if L is fg:
            ours = out.tolist()
        else:
            assert ours == out.tolist()
        assert float(L.linalg.vector_norm(L.zeros(2, 0), INF, dim=0).sum()) == 0.0


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, INF, -INF])
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 3), (2, 1, 4, 3)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_matrix_norm(ord, shape, keepdim):
    # test_matrix_norm / test_norm_matrix
    a = _rand(*shape)
    _both(lambda L, x: L.linalg.matrix_norm(x, ord, keepdim=keepdim), a, grad_rtol=1e-6)
    if len(shape) >= 3:
        _both(lambda L, x: L.linalg.matrix_norm(x, ord, dim=(0, -1), keepdim=keepdim), a)
    _both(lambda L, x: L.linalg.norm(x, ord, dim=(-1, -2), keepdim=keepdim), a)


def test_matrix_norm_dtype_and_errors():
    a = _rand(3, 4).astype(np.float32)
    for ord in ("fro", "nuc", 1, 2):
        r = fg.linalg.matrix_norm(fg.tensor(a), ord, dtype=fg.float64)
        t = torch.linalg.matrix_norm(torch.tensor(a), ord, dtype=torch.float64)
        assert r.dtype == fg.float64
        _close(r, t, rtol=1e-12)
    _raises_like_torch(lambda L, x: L.linalg.matrix_norm(x), np.ones(3))
    _raises_like_torch(lambda L, x: L.linalg.matrix_norm(x, ord=3), np.ones((3, 3)))
    _raises_like_torch(lambda L, x: L.linalg.matrix_norm(x, ord="bad"), np.ones((3, 3)))
    _raises_like_torch(lambda L, x: L.linalg.matrix_norm(x, dim=(0, 0)), np.ones((3, 3)))
    _raises_like_torch(lambda L, x: L.linalg.matrix_norm(x, dim=(0, 5)), np.ones((3, 3)))
    _raises_like_torch(lambda L, x: L.linalg.matrix_norm(x), np.ones((3, 3)), dtype="int64")
    _raises_like_torch(
        lambda L, x: L.linalg.matrix_norm(x, dtype=L.float32), np.ones((3, 3))
    )  # narrowing
    # norms of empty matrices: the largest of no sums / singular values is 0, the smallest
    # raises
    for shape in ((3, 0), (0, 3), (2, 0, 0)):
        for ord in ("fro", "nuc", 1, INF, 2):
            _both(lambda L, x, ord=ord: L.linalg.matrix_norm(x, ord), np.ones(shape), grad=False)
        for ord in (-1, -INF, -2):  # (a minimum over an empty axis raises)
            try:
                torch.linalg.matrix_norm(torch.ones(shape), ord)
            except IndexError:
                _raises_like_torch(
                    lambda L, x, ord=ord: L.linalg.matrix_norm(x, ord), np.ones(shape)
                )
            else:
                _both(
                    lambda L, x, ord=ord: L.linalg.matrix_norm(x, ord), np.ones(shape), grad=False
                )


@pytest.mark.parametrize(
    "ord, dim, shape",
    [
        (None, None, (3, 4, 5)),
        (None, None, (3, 4)),
        (None, 1, (3, 4, 5)),
        (3, None, (5,)),
        ("fro", None, (3, 4)),
        ("nuc", None, (3, 4)),
        (-INF, None, (3, 4)),
        (2, (0, 1), (3, 4, 2)),
        (INF, 0, (3, 4)),
        (None, (1, 2), (2, 3, 4)),
    ],
)
def test_linalg_norm(ord, dim, shape):
    # test_norm_vector / test_norm_matrix / test_norm_fro_2_equivalence_old
    a = _rand(*shape)
    _both(lambda L, x: L.linalg.norm(x, ord, dim), a)
    _both(lambda L, x: L.linalg.norm(x, ord, dim, keepdim=True), a)


def test_linalg_norm_errors():
    # test_norm_errors: ord given without dim needs a 1-D or 2-D input; string ords are matrix norms
    _raises_like_torch(lambda L, x: L.linalg.norm(x, 2), np.ones((2, 3, 4)))
    _raises_like_torch(lambda L, x: L.linalg.norm(x, "fro"), np.ones(3))
    _raises_like_torch(lambda L, x: L.linalg.norm(x, "nuc", dim=0), np.ones((3, 3)))
    _raises_like_torch(lambda L, x: L.linalg.norm(x, 2, dim=(0, 1, 2)), np.ones((2, 2, 2)))


def test_torch_norm():
    # test_norm_vector / test_norm_matrix (torch.norm, p= and dim=)
    a = _rand(3, 4, 5)
    for p, dim in (("fro", None), (2, 1), (1, (1, 2)), (INF, 2), ("fro", (0, 1)), (3, None)):
        _both(lambda L, x, p=p, dim=dim: L.norm(x, p=p, dim=dim), a)
        _both(lambda L, x, p=p, dim=dim: x.norm(p, dim, True), a)
    _both(lambda L, x: L.norm(x, p="nuc"), a[0])


# ---------------------------------------------------------------------------------- cond


@pytest.mark.parametrize("p", [None, 2, -2, 1, -1, INF, -INF, "fro", "nuc"])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (2, 1, 3, 3), (0, 3, 3)])
def test_cond(p, shape):
    # test_cond: values and gradients as torch's
    a = _fullrank(*shape)
    _both(lambda L, x: L.linalg.cond(x, p), a, grad=p in (None, 2, -2), grad_rtol=1e-6)
    if p not in (None, 2, -2):
        # (torch's own cond backward for these p fails: its inv_ex output is modified in
        # place; the reference is the definition, norm(A) * norm(inv(A)))
        got = fg.tensor(a, requires_grad=True)
        ref = torch.tensor(a, requires_grad=True)
        fg.linalg.cond(got, p).sum().backward()
        n = torch.linalg.matrix_norm
        (n(ref, p) * n(torch.linalg.inv(ref), p)).sum().backward()
        _close(got.grad, ref.grad, 1e-7, 1e-9)
    if p in (None, 2, -2):  # the 2-norm condition number of a non-square matrix
        _both(lambda L, x: L.linalg.cond(x, p), _rand(*shape[:-1], shape[-1] + 1), grad_rtol=1e-6)


def test_cond_errors_and_warnings():
    # test_cond_errors_and_warnings
    _raises_like_torch(lambda L, x: L.linalg.cond(x), np.ones(3))
    _raises_like_torch(lambda L, x: L.linalg.cond(x, 1), np.ones((3, 2)))
    _raises_like_torch(lambda L, x: L.linalg.cond(x, "fro"), np.ones((2, 3, 2)))
    _raises_like_torch(lambda L, x: L.linalg.cond(x, 3), np.eye(3))
    _raises_like_torch(lambda L, x: L.linalg.cond(x), np.eye(3), dtype="int64")
    for p in (None, 2, 1, "fro", "nuc", -INF):
        _both(lambda L, x, p=p: L.linalg.cond(x, p), np.zeros((2, 0, 0)), grad=False)
    _both(lambda L, x: L.linalg.cond(x), np.zeros((3, 0)), grad=False)


# ---------------------------------------------------------------- matrix_power / matrix_exp


@pytest.mark.parametrize("n", [0, 1, 2, 3, 6, -1, -2, -3])
@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3), (2, 1, 2, 2), (0, 2, 2), (0, 0)])
def test_matrix_power(n, shape):
    # test_matrix_power_non_negative / test_matrix_power_negative
    a = _fullrank(*shape) if 0 not in shape else np.zeros(shape)
    _both(lambda L, x: L.linalg.matrix_power(x, n), a, grad_rtol=1e-6)
    _both(lambda L, x: x.matrix_power(n), a, grad_rtol=1e-6)


def test_matrix_power_errors():
    _raises_like_torch(lambda L, x: L.linalg.matrix_power(x, 2), np.ones((2, 3)))
    _raises_like_torch(lambda L, x: L.linalg.matrix_power(x, 2), np.ones(3))
    _raises_like_torch(lambda L, x: L.linalg.matrix_power(x, -1), np.diag([1.0, 0.0]))  # singular
    _raises_like_torch(lambda L, x: L.linalg.matrix_power(x, -1), np.eye(2), dtype="int64")


@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 4, 4), (2, 1, 2, 2), (0, 3, 3), (0, 0)])
@pytest.mark.parametrize("scale", [0.1, 3.0])
def test_matrix_exp(shape, scale):
    # test_matrix_exp_analytic / test_matrix_exp_batch / test_matrix_exp_compare_with_taylor
    a = _rand(*shape) * scale
    _both(lambda L, x: L.linalg.matrix_exp(x), a, rtol=1e-8, grad_rtol=1e-6)
    _both(lambda L, x: L.matrix_exp(x), a, rtol=1e-8, grad=False)
    _both(lambda L, x: x.matrix_exp(), a, rtol=1e-8, grad=False)


def test_matrix_exp_analytic_and_errors():
    # test_matrix_exp_analytic: exp of a rotation generator is a rotation
    t = 0.7
    r = fg.linalg.matrix_exp(fg.tensor([[0.0, -t], [t, 0.0]], dtype="float64")).numpy()
    np.testing.assert_allclose(r, [[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]])
    _raises_like_torch(lambda L, x: L.linalg.matrix_exp(x), np.ones((2, 3)))
    _raises_like_torch(lambda L, x: L.linalg.matrix_exp(x), np.ones(3))


# ----------------------------------------------------------------------------- multi_dot


@pytest.mark.parametrize(
    "shapes",
    [
        [(3,), (3,)],
        [(2, 3), (3,)],
        [(3,), (3, 2)],
        [(2, 3), (3, 4), (4, 5)],
        [(3,), (3, 4), (4, 5), (5,)],
        [(1, 3), (3, 4), (4, 2), (2, 6), (6, 1)],
        [(0, 3), (3, 4), (4, 2)],
        [(2, 0), (0, 4), (4, 2)],
        [(3,), (3, 0), (0,)],
    ],
)
def test_multi_dot(shapes):
    # test_multi_dot
    arrays = [_rand(*s, seed=i) for i, s in enumerate(shapes)]
    _both(lambda L, *xs: L.linalg.multi_dot(list(xs)), *arrays)
    _both(lambda L, *xs: L.linalg.multi_dot(tuple(xs)), *arrays, grad=False)


def test_multi_dot_errors():
    # test_multi_dot_errors
    for L in (fg, torch):
        with pytest.raises(RuntimeError):
            L.linalg.multi_dot([])
        with pytest.raises(RuntimeError):
            L.linalg.multi_dot([L.ones(3, dtype=L.float64)])
    f = lambda L, *xs: L.linalg.multi_dot(list(xs))
    _raises_like_torch(f, np.ones((1, 1, 1)), np.ones((1, 1)))
    _raises_like_torch(f, np.ones((1, 1)), np.ones((1, 1, 1)))
    _raises_like_torch(f, np.ones((1, 1)), np.ones(1), np.ones((1, 1)))
    _raises_like_torch(f, np.ones((2, 3)), np.ones((2, 3)))
    _raises_like_torch(f, np.ones(3), np.ones(2))
    with pytest.raises(RuntimeError):
        torch.linalg.multi_dot([torch.ones(2), torch.ones(2, dtype=torch.float64)])
    with pytest.raises(RuntimeError):
        fg.linalg.multi_dot([fg.ones(2), fg.ones(2, dtype=fg.float64)])


def test_chain_matmul():
    # test_chain_matmul
    arrays = [_rand(2, 3), _rand(3, 4, seed=1), _rand(4, 2, seed=2)]
    _both(lambda L, *xs: L.chain_matmul(*xs), *arrays)
    _both(lambda L, x: L.chain_matmul(x), arrays[0])
    for L in (fg, torch):
        with pytest.raises(RuntimeError):
            L.chain_matmul()
        with pytest.raises(RuntimeError):
            L.chain_matmul(L.ones(2), L.ones(2))


# ------------------------------------------------------------------ tensorinv / tensorsolve


@pytest.mark.parametrize("shape, ind", [((12, 3, 4), 1), ((3, 8, 24), 2), ((4, 6, 8, 3), 2)])
def test_tensorinv(shape, ind):
    # test_tensorinv
    n = int(np.prod(shape[:ind]))
    a = _fullrank(n, n).reshape(shape)
    _both(lambda L, x: L.linalg.tensorinv(x, ind=ind), a)
    np.testing.assert_allclose(
        fg.linalg.tensorinv(fg.tensor(a), ind=ind).numpy(), np.linalg.tensorinv(a, ind=ind)
    )


def test_tensorinv_errors_and_empty():
    # test_tensorinv_empty / test_tensorinv_errors_and_warnings
    _both(lambda L, x: L.linalg.tensorinv(x, ind=2), np.zeros((0, 3, 0, 3)), grad=False)
    _raises_like_torch(lambda L, x: L.linalg.tensorinv(x, ind=1), np.ones((2, 3, 4)))
    _raises_like_torch(lambda L, x: L.linalg.tensorinv(x, ind=0), np.ones((2, 2)))
    _raises_like_torch(lambda L, x: L.linalg.tensorinv(x, ind=1), np.zeros((4, 2, 2)))


@pytest.mark.parametrize(
    "b_shape, rest, dims",
    [((2, 3), (6,), None), ((6, 4), (4, 6), None), ((2, 3), (6,), (0,)), ((2, 3), (3, 2), (0, 2))],
)
def test_tensorsolve(b_shape, rest, dims):
    # test_tensorsolve / test_tensorsolve_non_contiguous (dims moves axes of A to the end)
    n = int(np.prod(b_shape))
    a = _fullrank(n, n).reshape(b_shape + rest)
    if dims is not None:
        a = np.moveaxis(a, list(range(a.ndim - len(dims), a.ndim)), list(dims))
    b = _rand(*b_shape, seed=1)
    _both(lambda L, x, y: L.linalg.tensorsolve(x, y, dims=dims), a, b)
    np.testing.assert_allclose(
        fg.linalg.tensorsolve(fg.tensor(a), fg.tensor(b), dims=dims).numpy(),
        np.linalg.tensorsolve(a, b, axes=dims),
        rtol=1e-10,
    )


def test_tensorsolve_errors():
    f = lambda L, x, y: L.linalg.tensorsolve(x, y)
    _raises_like_torch(f, np.ones((2, 3, 5)), np.ones((2, 3)))
    _raises_like_torch(f, np.ones((2, 3, 6)), np.ones((3, 2, 1)))


# ------------------------------------------------------------------ householder_product


@pytest.mark.parametrize(
    "shape, k",
    [
        ((4, 4), 4),
        ((5, 3), 3),
        ((5, 3), 2),
        ((2, 4, 3), 3),
        ((2, 1, 3, 2), 1),
        ((0, 3, 3), 2),
        ((3, 3), 0),
    ],
)
def test_householder_product(shape, k):
    # test_householder_product: against torch, and Q of geqrf's reflectors is orthonormal
    a = _rand(*shape)
    tau = _rand(*shape[:-2], k, seed=1) * 0.5
    _both(lambda L, x, t: L.linalg.householder_product(x, t), a, tau)


def test_householder_product_errors():
    f = lambda L, x, t: L.linalg.householder_product(x, t)
    _raises_like_torch(f, np.ones(3), np.ones(1))  # A must be a matrix
    _raises_like_torch(f, np.ones((3, 4)), np.ones(2))  # more columns than rows
    _raises_like_torch(f, np.ones((4, 3)), np.ones(4))  # tau longer than the columns
    _raises_like_torch(f, np.ones((2, 4, 3)), np.ones((3, 2)))  # batch mismatch


# ---------------------------------------------------------------------------------- cross


@pytest.mark.parametrize(
    "a_shape, b_shape, dim",
    [
        ((3,), (3,), -1),
        ((4, 3), (4, 3), -1),
        ((3, 5), (3, 5), 0),
        ((2, 1, 3), (1, 4, 3), -1),
        ((1, 3), (5, 3), 1),
    ],
)
def test_linalg_cross(a_shape, b_shape, dim):
    # test_linalg_cross / test_cross_with_and_without_dim
    a, b = _rand(*a_shape), _rand(*b_shape, seed=1)
    _both(lambda L, x, y: L.linalg.cross(x, y, dim=dim), a, b)
    _both(lambda L, x, y: L.cross(x, y, dim=dim), a, b)
    if a_shape == b_shape:
        _both(lambda L, x, y: x.cross(y, dim), a, b, grad=False)


def test_cross_errors():
    # test_cross_errors / test_linalg_cross_errors
    _raises_like_torch(lambda L, x, y: L.linalg.cross(x, y), np.ones((3, 2)), np.ones((3, 2)))
    _raises_like_torch(lambda L, x, y: L.linalg.cross(x, y), np.ones((2, 3)), np.ones((3, 3)))
    _raises_like_torch(lambda L, x, y: L.linalg.cross(x, y), np.ones((2, 1, 3)), np.ones((4, 3)))
    _raises_like_torch(
        lambda L, x, y: L.linalg.cross(x, y, dim=2), np.ones((3, 3)), np.ones((3, 3))
    )
    _raises_like_torch(lambda L, x, y: L.cross(x, y, dim=0), np.ones((2, 3)), np.ones((2, 3)))
    _raises_like_torch(lambda L, x, y: L.cross(x, y, dim=2), np.ones((3, 3)), np.ones((3, 3)))
    # torch.cross without dim picks the first axis of size 3 (deprecated but kept)
    _both(lambda L, x, y: L.cross(x, y), _rand(3, 4), _rand(3, 4, seed=1))
    out = fg.empty(0, dtype=fg.float64)
    fg.linalg.cross(fg.tensor(_rand(3)), fg.tensor(_rand(3, seed=1)), out=out)
    _close(out, torch.linalg.cross(torch.tensor(_rand(3)), torch.tensor(_rand(3, seed=1))))


# --------------------------------------------------------------------------------- vander


@pytest.mark.parametrize("shape", [(4,), (2, 3), (0, 3)])
@pytest.mark.parametrize("N", [None, 2, 5])
def test_linalg_vander(shape, N):
    # test_linalg_vander / test_vander_types
    x = _rand(*shape)
    # (torch's own backward of linalg.vander and vander fails on 1-D inputs: its values are
    # checked here and its gradient against the definition, the stacked powers)
    _both(lambda L, t: L.linalg.vander(t, N=N), x, grad=len(shape) > 1)
    if len(shape) == 1:
        res = []
        for L in (fg, torch):
            t = L.tensor(x, requires_grad=True)
            n = N or shape[-1]
            v = L.linalg.vander(t, N=N) if L is fg else L.stack([t**k for k in range(n)], -1)
            (v * L.tensor(_rand(*v.shape, seed=3))).sum().backward()
            res.append(_np(t.grad))
        _close(*res)
    if len(shape) == 1:
        for inc in (False, True):
            _both(lambda L, t, inc=inc: L.vander(t, N, inc), x, grad=False)
            _both(lambda L, t, inc=inc: L.vander(t, 0, inc), x, grad=False)
    for L in (fg, torch):
        got = L.linalg.vander(L.tensor([1, 2, 3]), N=3)
        if L is fg:
            ours = got.tolist(), str(got.dtype).split(".")[-1]
        else:
            assert ours == (got.tolist(), str(got.dtype).split(".")[-1])


def test_linalg_vander_errors():
    _raises_like_torch(lambda L, x: L.linalg.vander(x), np.array(2.0))
    _raises_like_torch(lambda L, x: L.linalg.vander(x, N=-1), np.ones(3))
    _raises_like_torch(lambda L, x: L.linalg.vander(x, N=1), np.ones(3))
    _raises_like_torch(lambda L, x: L.linalg.vander(x), np.ones((2, 0)))
    _raises_like_torch(lambda L, x: L.vander(x), np.ones((2, 2)))


# ------------------------------------------------------------------- vecdot / diagonal


@pytest.mark.parametrize(
    "a_shape, b_shape, dim",
    [
        ((3,), (3,), -1),
        ((2, 4), (4,), -1),
        ((4, 2), (4, 1), 0),
        ((2, 1, 3), (5, 3), -1),
        ((0, 3), (0, 3), -1),
    ],
)
def test_vecdot(a_shape, b_shape, dim):
    # test_vecdot
    a, b = _rand(*a_shape), _rand(*b_shape, seed=1)
    _both(lambda L, x, y: L.linalg.vecdot(x, y, dim=dim), a, b)


def test_vecdot_errors():
    _raises_like_torch(lambda L, x, y: L.linalg.vecdot(x, y), np.ones(3), np.ones(4))
    with pytest.raises(RuntimeError):
        torch.linalg.vecdot(torch.ones(3), torch.ones(3, dtype=torch.float64))
    with pytest.raises(RuntimeError):
        fg.linalg.vecdot(fg.ones(3), fg.ones(3, dtype=fg.float64))


@pytest.mark.parametrize("offset", [0, 1, -2, 5])
@pytest.mark.parametrize("dims", [(-2, -1), (0, 2), (2, 0)])
def test_linalg_diagonal(offset, dims):
    # linalg.diagonal is torch.diagonal with dim1=-2, dim2=-1 by default
    a = _rand(3, 4, 5)
    _both(lambda L, x: L.linalg.diagonal(x, offset=offset, dim1=dims[0], dim2=dims[1]), a)
    _both(lambda L, x: L.diagonal(x, offset, *dims), a)
    _raises_like_torch(lambda L, x: L.linalg.diagonal(x, dim1=1, dim2=1), a)
    _raises_like_torch(lambda L, x: L.linalg.diagonal(x), np.ones(3))


# ---------------------------------------------------------------- BLAS-style ops, matmul


@pytest.mark.parametrize("beta, alpha", [(1, 1), (0.5, 2.0), (0, 1.5), (2, 0)])
def test_addmm_addmv_addr_baddbmm_addbmm(beta, alpha):
    # test_addmm / test_addmv / test_addr_* / test_baddbmm / test_addbmm: values, gradients,
    # and broadcasting of the input
    cases = {
        "addmm": ((2, 3), (2, 4), (4, 3)),
        "addmm_bcast": ((3,), (2, 4), (4, 3)),
        "addmv": ((2,), (2, 4), (4,)),
        "addmv_bcast": ((1,), (2, 4), (4,)),
        "addr": ((3, 4), (3,), (4,)),
        "addr_bcast": ((4,), (3,), (4,)),
        "baddbmm": ((5, 2, 3), (5, 2, 4), (5, 4, 3)),
        "baddbmm_bcast": ((2, 3), (5, 2, 4), (5, 4, 3)),
        "addbmm": ((2, 3), (5, 2, 4), (5, 4, 3)),
        "addbmm_bcast": ((1, 3), (5, 2, 4), (5, 4, 3)),
    }
    for name, shapes in cases.items():
        op = name.split("_")[0]
        arrays = [_rand(*s, seed=i) for i, s in enumerate(shapes)]
        _both(lambda L, *xs, op=op: getattr(L, op)(*xs, beta=beta, alpha=alpha), *arrays)
        _both(lambda L, x, *xs, op=op: getattr(x, op)(*xs, beta=beta, alpha=alpha), *arrays)


@pytest.mark.parametrize("op", ["addmm", "addmv", "addr", "baddbmm", "addbmm"])
def test_blas_inplace_and_out(op):
    shapes = {
        "addmm": ((2, 3), (2, 4), (4, 3)),
        "addmv": ((2,), (2, 4), (4,)),
        "addr": ((3, 4), (3,), (4,)),
        "baddbmm": ((5, 2, 3), (5, 2, 4), (5, 4, 3)),
        "addbmm": ((2, 3), (5, 2, 4), (5, 4, 3)),
    }[op]
    arrays = [_rand(*s, seed=i) for i, s in enumerate(shapes)]
    res = []
    for L in (fg, torch):
        ts = [L.tensor(a) for a in arrays]
        getattr(ts[0], op + "_")(*ts[1:], beta=0.5, alpha=2.0)
        out = L.empty(0, dtype=L.float64)
        getattr(L, op)(*[L.tensor(a) for a in arrays], alpha=3.0, out=out)
        res.append((_np(ts[0]), _np(out)))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize(
    "op, shapes",
    [
        ("addmm", ((2, 3), (2, 4), (5, 3))),
        ("addmm", ((2, 3), (2, 4, 1), (4, 3))),
        ("addmm", ((4, 4), (2, 4), (4, 3))),
        ("addmv", ((2,), (2, 4), (3,))),
        ("addmv", ((3,), (2, 4), (4,))),
        ("addmv", ((2,), (2, 4), (4, 1))),
        ("addr", ((3, 4), (3, 1), (4,))),
        ("addr", ((2, 4), (3,), (4,))),
        ("baddbmm", ((5, 2, 3), (5, 2, 4), (4, 4, 3))),
        ("baddbmm", ((5, 2, 3), (5, 2, 4), (5, 5, 3))),
        ("addbmm", ((2, 3), (5, 2, 4), (4, 4, 3))),
        ("addbmm", ((3, 3), (5, 2, 4), (5, 4, 3))),
        ("mm", ((2, 3), (4, 2))),
        ("mm", ((2, 3, 1), (1, 2))),
        ("mv", ((2, 3), (2,))),
        ("bmm", ((2, 2, 3), (3, 3, 2))),
        ("bmm", ((2, 3), (3, 2))),
        ("matmul", ((2, 3), (2, 3))),
        ("matmul", ((3,), (4,))),
        ("matmul", ((2, 2, 3), (3, 3, 2))),
        ("matmul", ((), (3,))),
    ],
)
def test_blas_error_inputs(op, shapes):
    # the shape checks of test_addmm_errors / test_blas_alpha_beta_empty / test_matmul_*
    arrays = [np.ones(s) for s in shapes]
    _raises_like_torch(lambda L, *xs: getattr(L, op)(*xs), *arrays)


def test_blas_dtype_mismatch_and_empty():
    # mixed dtypes raise; empty products are zeros scaled by beta
    for L in (fg, torch):
        with pytest.raises(RuntimeError):
            L.addmm(L.ones(2, 2), L.ones(2, 2, dtype=L.float64), L.ones(2, 2))
        with pytest.raises(RuntimeError):
            L.mm(L.ones(2, 2), L.ones(2, 2, dtype=L.float64))
    cases = {
        "addmm": ((2, 3), (2, 0), (0, 3)),
        "addmv": ((2,), (2, 0), (0,)),
        "baddbmm": ((0, 2, 3), (0, 2, 4), (0, 4, 3)),
        "addbmm": ((2, 3), (0, 2, 4), (0, 4, 3)),
        "addr": ((0, 3), (0,), (3,)),
    }
    for op, shapes in cases.items():
        arrays = [_rand(*s, seed=i) for i, s in enumerate(shapes)]
        _both(lambda L, *xs, op=op: getattr(L, op)(*xs, beta=2.0, alpha=3.0), *arrays)


@pytest.mark.parametrize(
    "a_shape, b_shape",
    [
        ((3,), (3,)),
        ((2, 3), (3,)),
        ((3,), (3, 2)),
        ((4, 2, 3), (3,)),
        ((3,), (4, 3, 2)),
        ((4, 2, 3), (3, 5)),
        ((2, 3), (4, 3, 5)),
        ((2, 1, 2, 3), (4, 3, 5)),
        ((5, 1, 2, 3), (1, 6, 3, 2)),
        ((0, 2, 3), (3, 4)),
        ((2, 0), (0, 3)),
        ((1, 2, 3), (0, 3, 1)),
    ],
)
def test_matmul_broadcasting(a_shape, b_shape):
    # test_matmul_small_brute_force_*d_Nd / test_matmul_45724 / test_matmul_out
    a, b = _rand(*a_shape), _rand(*b_shape, seed=1)
    _both(lambda L, x, y: L.matmul(x, y), a, b)
    _both(lambda L, x, y: L.linalg.matmul(x, y), a, b)
    _both(lambda L, x, y: x @ y, a, b, grad=False)
    out = fg.empty(0, dtype=fg.float64)
    fg.matmul(fg.tensor(a), fg.tensor(b), out=out)
    _close(out, a @ b if a.ndim > 1 or b.ndim > 1 else np.array(a @ b), rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float32_decompositions_match_torch(dtype):
    # the float32 instantiation of the decomposition tests: dtypes kept, values close
    a = _fullrank(2, 4, 4).astype(dtype)
    s = _spd(2, 4, 4).astype(dtype)
    tol = 1e-4 if dtype == "float32" else 1e-10
    for name, arr in (
        ("det", a),
        ("inv", a),
        ("cholesky", s),
        ("eigvalsh", s),
        ("svdvals", a),
        ("pinv", a),
        ("matrix_exp", a),
        ("matrix_norm", a),
        ("cond", a),
    ):
        r = getattr(fg.linalg, name)(fg.tensor(arr))
        t = getattr(torch.linalg, name)(torch.tensor(arr))
        assert r.dtype.name == dtype, name
        np.testing.assert_allclose(r.numpy(), t.numpy(), rtol=tol, atol=tol)
    for name in ("slogdet", "qr", "lu_factor"):
        r = getattr(fg.linalg, name)(fg.tensor(a))
        t = getattr(torch.linalg, name)(torch.tensor(a))
        assert r[0].dtype.name == dtype and r[1].dtype.name == str(t[1].dtype).split(".")[-1]


# ------------------------------------------------ edge inputs: values or torch's exception


def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


_X = np.array([[1.0, -2.0, INF], [math.nan, 1.0, 2.0]])
EDGE = {
    # test_norm_extreme_values / test_norm_vector_degenerate_shapes
    **{
        f"vector_norm_extreme_{o}": lambda L, o=o: L.linalg.vector_norm(L.tensor(_X), o, 1)
        for o in (0, 1, 2, 3, INF, -INF, -1, 0.5)
    },
    **{
        f"vector_norm_empty_{o}": lambda L, o=o: L.linalg.vector_norm(
            L.zeros(2, 0, dtype=L.float64), o, 1, True
        )
        for o in (0, 1, 2, INF, -INF, -1, 0.5)
    },
    **{
        f"vector_norm_empty_all_{o}": lambda L, o=o: L.linalg.vector_norm(
            L.zeros(0, dtype=L.float64), o
        )
        for o in (0, 2, INF, -INF, -1)
    },
    "vector_norm_repeated_dim": lambda L: L.linalg.vector_norm(L.ones(2, 3), 2, dim=(0, 0)),
    "vector_norm_dim_out_of_range": lambda L: L.linalg.vector_norm(L.ones(2, 3), 2, dim=2),
    "vector_norm_scalar": lambda L: L.linalg.vector_norm(L.tensor(-3.0), 2, dim=0),
    "vector_norm_float16_in_float32": lambda L: L.linalg.vector_norm(
        L.ones(3, dtype=L.float16), dtype=L.float32
    ),
    "norm_dtype": lambda L: L.linalg.norm(L.ones(3, 3), dtype=L.float64),
    "norm_nuc_dtype": lambda L: L.linalg.norm(L.ones(3, 3), "nuc", dtype=L.float64),
    "torch_norm_nuc_dims": lambda L: L.norm(L.tensor(_r(2, 3, 4)), "nuc", dim=(0, 2)),
    "torch_norm_p0": lambda L: L.norm(L.tensor([0.0, 1, 2]), 0),
    "torch_norm_dtype": lambda L: L.norm(L.ones(3), dtype=L.float64),
    "matrix_norm_keepdim_empty": lambda L: L.linalg.matrix_norm(
        L.zeros(2, 0, 3, dtype=L.float64), keepdim=True
    ),
    "matrix_norm_nuc_swapped_dims": lambda L: L.linalg.matrix_norm(
        L.tensor(_r(2, 3, 4)), "nuc", dim=(2, 0), keepdim=True
    ),
    "matrix_norm_-2_swapped_dims": lambda L: L.linalg.matrix_norm(
        L.tensor(_r(2, 3, 4)), -2, dim=(2, 0)
    ),
    # test_linalg_matrix_exp_perverse_nan_values / boundary cases
    "matrix_exp_nan": lambda L: L.linalg.matrix_exp(L.tensor([[math.nan, 1.0], [0.0, 1.0]])),
    "matrix_exp_large": lambda L: L.linalg.matrix_exp(
        L.tensor([[100.0, 1.0], [0.0, 1.0]], dtype=L.float64)
    ),
    "matrix_exp_int": lambda L: L.linalg.matrix_exp(L.eye(2, dtype=L.int64)),
    # test_eigh_lower_uplo: UPLO is case-insensitive
    "eigvalsh_uplo_lower_case_l": lambda L: L.linalg.eigvalsh(L.tensor(_r(3, 3)), UPLO="l"),
    "eigvalsh_uplo_lower_case_u": lambda L: L.linalg.eigvalsh(L.tensor(_r(3, 3)), "u"),
    # test_solve: vector right-hand sides and their shape checks
    "solve_batched_vectors": lambda L: L.linalg.solve(L.tensor(_r(2, 3, 3)), L.tensor(_r(2, 3))),
    "solve_vector_batch_mismatch": lambda L: L.linalg.solve(
        L.tensor(_r(2, 3, 3)), L.tensor(_r(4, 3))
    ),
    "solve_left_false_vector": lambda L: L.linalg.solve(
        L.tensor(_r(3, 3)), L.tensor(_r(3)), left=False
    ),
    "solve_mixed_dtypes": lambda L: L.linalg.solve(L.eye(3, dtype=L.float64), L.ones(3, 1)),
    "solve_triangular_promotes": lambda L: L.linalg.solve_triangular(
        L.eye(3, dtype=L.float64) * 2, L.ones(3, 1), upper=True
    ),
    "solve_triangular_left_false_vector": lambda L: L.linalg.solve_triangular(
        L.eye(3, dtype=L.float64), L.ones(3, dtype=L.float64), upper=True, left=False
    ),
    # test_slogdet / test_det on singular and empty inputs
    "slogdet_singular": lambda L: L.linalg.slogdet(L.zeros(2, 2, dtype=L.float64)),
    "slogdet_empty": lambda L: L.linalg.slogdet(L.zeros(2, 0, 0, dtype=L.float64)),
    "logdet_negative": lambda L: L.logdet(-L.eye(3, dtype=L.float64)),
    # test_tensorinv_singular_input / test_tensorsolve_empty
    "tensorinv_singular": lambda L: L.linalg.tensorinv(L.zeros(4, 2, 2, dtype=L.float64), ind=1),
    "tensorinv_float_ind": lambda L: L.linalg.tensorinv(L.eye(4).reshape(4, 2, 2), ind=1.0),
    "tensorsolve_empty": lambda L: L.linalg.tensorsolve(
        L.zeros(0, 0, dtype=L.float64), L.zeros(0, dtype=L.float64)
    ),
    # test_lu_unpack_check_input / test_linalg_lu_solve broadcasting
    "lu_unpack_no_data": lambda L: L.lu_unpack(
        *L.linalg.lu_factor(L.tensor(_r(3, 3))), unpack_data=False
    ),
    "lu_unpack_no_pivots": lambda L: L.lu_unpack(
        *L.linalg.lu_factor(L.tensor(_r(3, 3))), unpack_pivots=False
    ),
    "lu_unpack_pivot_out_of_range": lambda L: L.lu_unpack(
        L.tensor(_r(3, 3)), L.tensor([1, 2, 5], dtype=L.int32)
    ),
    "lu_solve_broadcast_b": lambda L: L.linalg.lu_solve(
        *L.linalg.lu_factor(L.tensor(_r(3, 3))), L.tensor(_r(2, 3, 1, seed=1))
    ),
    "lu_solve_broadcast_both": lambda L: L.linalg.lu_solve(
        *L.linalg.lu_factor(L.tensor(_r(2, 1, 3, 3))), L.tensor(_r(4, 3, 1, seed=1))
    ),
    # test_addr_* / test_addmm_* dtype rules
    "addr_bool": lambda L: L.addr(
        L.tensor([[True, False]] * 2), L.tensor([True, False]), L.tensor([False, True])
    ),
    "addr_bool_alpha_beta": lambda L: L.addr(
        L.ones(2, 2, dtype=L.bool), L.ones(2, dtype=L.bool), L.ones(2, dtype=L.bool), beta=False
    ),
    "addr_int_float_alpha": lambda L: L.addr(
        L.ones(2, 2, dtype=L.int64), L.ones(2, dtype=L.int64), L.ones(2, dtype=L.int64), alpha=2.5
    ),
    "addmm_int": lambda L: L.addmm(
        L.ones(2, 2, dtype=L.int64),
        L.ones(2, 2, dtype=L.int64),
        L.ones(2, 2, dtype=L.int64),
        alpha=2,
    ),
    "addmv_empty": lambda L: L.addmv(L.ones(0), L.ones(0, 3), L.ones(3)),
    # test_matmul_* / test_mv / test_dot / chain_matmul / multi_dot shape and dtype checks
    "matmul_0d": lambda L: L.matmul(L.ones(()), L.ones(())),
    "matmul_int": lambda L: L.matmul(L.ones(2, 3, dtype=L.int64), L.ones(3, dtype=L.int64)),
    "matmul_mixed_dtypes": lambda L: L.matmul(L.ones(2, 3), L.ones(3, dtype=L.float64)),
    "mv_3d": lambda L: L.mv(L.ones(2, 2, 3), L.ones(3)),
    "dot_lengths": lambda L: L.dot(L.ones(3), L.ones(4)),
    "chain_matmul_3d": lambda L: L.chain_matmul(L.ones(2, 2, 2), L.ones(2, 2)),
    "multi_dot_mixed_dtypes": lambda L: L.linalg.multi_dot(
        [L.ones(2, 2), L.ones(2, 2, dtype=L.float64)]
    ),
    "multi_dot_0d": lambda L: L.linalg.multi_dot([L.ones(()), L.ones(2)]),
    # pinv / matrix_rank / matrix_power input checks
    "pinv_hermitian_non_square": lambda L: L.linalg.pinv(
        L.ones(2, 3, dtype=L.float64), hermitian=True
    ),
    "pinv_negative_atol": lambda L: L.linalg.pinv(L.tensor(np.diag([2.0, 1e-3])), atol=-1.0),
    "matrix_rank_hermitian_non_square": lambda L: L.linalg.matrix_rank(
        L.ones(2, 3, dtype=L.float64), hermitian=True
    ),
    "matrix_rank_tol_tensor": lambda L: L.linalg.matrix_rank(
        L.tensor(np.diag([2.0, 1e-3])), tol=L.tensor(0.01, dtype=L.float64)
    ),
    "matrix_power_1d": lambda L: L.linalg.matrix_power(L.ones(3), 2),
    "matrix_power_float_n": lambda L: L.linalg.matrix_power(L.eye(3), 2.0),
    # cross / cholesky / inv / qr / svd / eigh on odd inputs
    "cross_int": lambda L: L.linalg.cross(L.tensor([1, 2, 3]), L.tensor([4, 5, 7])),
    "cross_mixed_dtypes": lambda L: L.linalg.cross(L.ones(3), L.ones(3, dtype=L.float64)),
    "cholesky_inverse_singular_batch": lambda L: L.cholesky_inverse(L.zeros(2, 3, 3)),
    "cholesky_ex_non_square": lambda L: L.linalg.cholesky_ex(L.ones(2, 3)),
    "inv_ex_non_square": lambda L: L.linalg.inv_ex(L.ones(2, 3)),
    "qr_int": lambda L: L.linalg.qr(L.eye(3, dtype=L.int64)),
    "svd_empty_rows": lambda L: L.linalg.svd(L.zeros(0, 3, dtype=L.float64)),
    "svd_empty_cols_reduced": lambda L: L.linalg.svd(
        L.zeros(3, 0, dtype=L.float64), full_matrices=False
    ),
    "svdvals_empty": lambda L: L.linalg.svdvals(L.zeros(2, 3, 0, dtype=L.float64)),
    "eigh_empty": lambda L: L.linalg.eigh(L.zeros(2, 0, 0, dtype=L.float64)),
    "qr_complete_empty_cols": lambda L: L.linalg.qr(
        L.zeros(3, 0, dtype=L.float64), mode="complete"
    ),
    "qr_empty_rows": lambda L: L.linalg.qr(L.zeros(0, 3, dtype=L.float64)),
    "diagonal_offset_past_the_end": lambda L: L.linalg.diagonal(L.ones(2, 3), offset=-5),
}


@pytest.mark.parametrize("name", sorted(EDGE))
def test_edge_inputs_like_torch(name):
    """The same values as torch (dtype and shape included), or an exception of torch's
    kind."""
    fn = EDGE[name]
    try:
        want = fn(torch)
    except Exception as e:  # noqa: BLE001 - any exception torch raises is the reference
        with pytest.raises(_like(e)):
            fn(fg)
        return
    got = fn(fg)
    want, got = _flat(want), _flat(got)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1], name
        assert tuple(g.shape) == tuple(w.shape), name
        np.testing.assert_allclose(_np(g), _np(w), rtol=1e-8, atol=1e-10, equal_nan=True)


# ----------------------------------------------------------------------------- out=

_A = _fullrank(2, 3, 3)
_S = _spd(2, 3, 3)
_B = _rand(2, 3, 2, seed=1)
OUT = {
    "linalg.inv": lambda L, o: L.linalg.inv(L.tensor(_A), out=o),
    "linalg.det": lambda L, o: L.linalg.det(L.tensor(_A), out=o),
    "linalg.solve": lambda L, o: L.linalg.solve(L.tensor(_A), L.tensor(_B), out=o),
    "linalg.cholesky": lambda L, o: L.linalg.cholesky(L.tensor(_S), out=o),
    "linalg.matrix_power": lambda L, o: L.linalg.matrix_power(L.tensor(_A), -2, out=o),
    "linalg.pinv": lambda L, o: L.linalg.pinv(L.tensor(_A), out=o),
    "linalg.svdvals": lambda L, o: L.linalg.svdvals(L.tensor(_A), out=o),
    "linalg.matrix_norm": lambda L, o: L.linalg.matrix_norm(L.tensor(_A), "nuc", out=o),
    "linalg.vector_norm": lambda L, o: L.linalg.vector_norm(L.tensor(_A), 3, dim=1, out=o),
    "linalg.norm": lambda L, o: L.linalg.norm(L.tensor(_A), out=o),
    "linalg.cond": lambda L, o: L.linalg.cond(L.tensor(_A), 1, out=o),
    "linalg.multi_dot": lambda L, o: L.linalg.multi_dot([L.tensor(_A[0]), L.tensor(_B[0])], out=o),
    "linalg.solve_triangular": lambda L, o: L.linalg.solve_triangular(
        L.tensor(_A), L.tensor(_B), upper=True, out=o
    ),
    "linalg.vecdot": lambda L, o: L.linalg.vecdot(L.tensor(_A), L.tensor(_A), out=o),
    "linalg.tensorinv": lambda L, o: L.linalg.tensorinv(L.tensor(_A[0]), ind=1, out=o),
    "linalg.tensorsolve": lambda L, o: L.linalg.tensorsolve(
        L.tensor(_A[0]), L.tensor(_B[0, :, 0]), out=o
    ),
    "linalg.householder_product": lambda L, o: L.linalg.householder_product(
        L.tensor(_A), L.tensor(_B[..., 0]), out=o
    ),
    "linalg.matrix_rank": lambda L, o: L.linalg.matrix_rank(L.tensor(_A), out=o),
    "linalg.eigvalsh": lambda L, o: L.linalg.eigvalsh(L.tensor(_S), out=o),
    "linalg.lu_solve": lambda L, o: L.linalg.lu_solve(
        *L.linalg.lu_factor(L.tensor(_A)), L.tensor(_B), out=o
    ),
    "cholesky_inverse": lambda L, o: L.cholesky_inverse(L.tensor(np.linalg.cholesky(_S)), out=o),
    "chain_matmul": lambda L, o: L.chain_matmul(L.tensor(_A[0]), L.tensor(_A[1]), out=o),
    "addmm": lambda L, o: L.addmm(L.tensor(_A[0]), L.tensor(_A[1]), L.tensor(_A[0]), out=o),
    "baddbmm": lambda L, o: L.baddbmm(L.tensor(_A), L.tensor(_A), L.tensor(_A), out=o),
    "matmul": lambda L, o: L.matmul(L.tensor(_A), L.tensor(_B), out=o),
    # the ops that return several tensors take a tuple
    "linalg.slogdet": lambda L, o: L.linalg.slogdet(L.tensor(_A), out=o),
    "linalg.eigh": lambda L, o: L.linalg.eigh(L.tensor(_S), out=o),
    "linalg.qr": lambda L, o: L.linalg.qr(L.tensor(_A), out=o),
    "linalg.svd": lambda L, o: L.linalg.svd(L.tensor(_A), out=o),
    "linalg.inv_ex": lambda L, o: L.linalg.inv_ex(L.tensor(_A), out=o),
    "linalg.cholesky_ex": lambda L, o: L.linalg.cholesky_ex(L.tensor(_S), out=o),
    "linalg.solve_ex": lambda L, o: L.linalg.solve_ex(L.tensor(_A), L.tensor(_B), out=o),
    "linalg.lu": lambda L, o: L.linalg.lu(L.tensor(_A), out=o),
    "linalg.lu_factor": lambda L, o: L.linalg.lu_factor(L.tensor(_A), out=o),
    "linalg.lu_factor_ex": lambda L, o: L.linalg.lu_factor_ex(L.tensor(_A), out=o),
    "lu_unpack": lambda L, o: L.lu_unpack(*L.linalg.lu_factor(L.tensor(_A)), out=o),
}


@pytest.mark.parametrize("name", sorted(OUT))
def test_out_variants(name):
    # the out= checks of test_linalg.py (test_inverse's out, test_det's out, ...): the result
    # is written into the given tensors (resized from empty) and they are returned
    fn = OUT[name]
    for L in (fg, torch):
        want = fn(L, None)
        if isinstance(want, tuple):
            out = tuple(L.empty(0, dtype=w.dtype) for w in want)
        else:
            out = L.empty(0, dtype=want.dtype)
        got = fn(L, out)
        for o, g, w in zip(_flat(out), _flat(got), _flat(want)):
            assert g is o
            np.testing.assert_array_equal(_np(o), _np(w))
        if L is fg:
            ours = [_np(o) for o in _flat(out)]
        else:
            for a, b in zip(ours, _flat(out)):
                if name == "linalg.eigh":  # (eigenvectors are unique up to their signs)
                    a, b = np.abs(a), np.abs(_np(b))
                np.testing.assert_allclose(a, _np(b), rtol=1e-9, atol=1e-11)
    # a wrong dtype is refused, as PyTorch's
    first = _flat(want)[0]
    if first.dtype == torch.float64:
        bad = fg.empty(0, dtype=fg.float32)
        if isinstance(want, tuple):
            bad = (bad,) + tuple(fg.empty(0, dtype=str(w.dtype).split(".")[-1]) for w in want[1:])
        with pytest.raises(RuntimeError):
            fn(fg, bad)


# ------------------------------------------------ the norm tests, against numpy and torch

_S10 = 10


@pytest.mark.parametrize(
    "shape, ords, dim, err",
    [
        ((_S10,), ["fro", "nuc"], None, RuntimeError),
        ((_S10, _S10), [3.5, 0, "fail"], None, RuntimeError),
        ((_S10, _S10), ["fro", "nuc"], 0, RuntimeError),
        ((_S10, _S10), ["fro", "nuc", 2], (0, 0), RuntimeError),
        ((_S10, _S10), ["fro", "nuc", 2], (-1, 1), RuntimeError),
        ((_S10, _S10), ["fro", "nuc", 2], (0, 4), IndexError),
        ((_S10,), [0], (4,), IndexError),
        ((_S10,), [None], (0, 0), RuntimeError),
        ((_S10, _S10, _S10), [1], (0, 1, 2), RuntimeError),
        ((_S10, _S10, _S10), [1], None, RuntimeError),
    ],
)
@pytest.mark.parametrize("keepdim", [True, False])
def test_norm_errors(shape, ords, dim, err, keepdim):
    # test_norm_errors: torch.linalg.norm and numpy both refuse these
    a = _rand(*shape)
    for ord in ords:
        with pytest.raises(err):
            torch.linalg.norm(torch.tensor(a), ord, dim, keepdim)
        with pytest.raises(err):
            fg.linalg.norm(fg.tensor(a), ord, dim, keepdim)
        with pytest.raises(Exception):  # noqa: B017 - numpy's own exception types
            np.linalg.norm(a, ord, dim, keepdim)


def test_matrix_norm_errors_and_default_dim():
    # test_matrix_norm
    A = _rand(2, 2, 2)
    for L in (fg, torch):
        with pytest.raises(RuntimeError):
            L.linalg.matrix_norm(L.tensor(_rand(2)))
        with pytest.raises(RuntimeError):
            L.linalg.matrix_norm(L.tensor(A), dim=(0,))
        for ord in (0, 3.0):
            with pytest.raises(RuntimeError):
                L.linalg.matrix_norm(L.tensor(A), ord=ord)
    _close(fg.linalg.matrix_norm(fg.tensor(A)), fg.linalg.norm(fg.tensor(A), dim=(-2, -1)))
    _close(fg.linalg.matrix_norm(fg.tensor(A)), torch.linalg.matrix_norm(torch.tensor(A)))


_EXTREME_PAIRS = [list(p) for p in itertools.product([INF, -INF, 0.0, math.nan, 1.0], repeat=2)]


@pytest.mark.parametrize("ord", [0, 1, 2, 3, INF, -1, -2, -3, -INF])
def test_vector_norm_extreme_values(ord):
    # test_vector_norm_extreme_values / test_norm_extreme_values (vectors): against numpy
    for v in _EXTREME_PAIRS:
        want = np.linalg.norm(np.array(v), ord=ord)
        np.testing.assert_equal(
            float(fg.linalg.vector_norm(fg.tensor(v, dtype="float64"), ord)), want
        )
        np.testing.assert_equal(float(fg.linalg.norm(fg.tensor(v, dtype="float64"), ord)), want)


@pytest.mark.parametrize("ord", ["fro", 1, INF, -1, -INF])
def test_matrix_norm_extreme_values(ord):
    # test_norm_extreme_values (matrices; PyTorch skips nuc, 2, -2 there)
    for v in _EXTREME_PAIRS:
        for m in ([v], [[v[0]], [v[1]]]):
            want = np.linalg.norm(np.array(m), ord=ord)
            got = float(fg.linalg.norm(fg.tensor(m, dtype="float64"), ord))
            np.testing.assert_equal(got, want)


@pytest.mark.parametrize("shape, dim", [((6, 1), -1), ((3, 1, 2, 1), (1, 3)), ((1,), None)])
@pytest.mark.parametrize("ord", [INF, -INF, 0, 1, -1, 2, -2])
@pytest.mark.parametrize("keepdim", [True, False])
def test_vector_norm_reduce_over_1D_vector(shape, dim, ord, keepdim):
    if isinstance(dim, tuple) and ord == 0:
        return  # (numpy refuses the 0 norm of a matrix)
    a = np.random.default_rng(0).uniform(-9, 9, shape)
    got = fg.linalg.vector_norm(fg.tensor(a), ord, dim, keepdim)
    want = np.linalg.norm(a, ord, dim, keepdim)
    _close(got, np.asarray(want), rtol=1e-12)


@pytest.mark.parametrize("ord", [0, 0.5, 1, 2, 3, INF, -0.5, -1, -2, -3, -INF])
@pytest.mark.parametrize(
    "shape, dim", [((0,), None), ((0, 10), 0), ((0, 10), 1), ((10, 0), 0), ((10, 0), 1)]
)
@pytest.mark.parametrize("keepdim", [True, False])
def test_norm_vector_degenerate_shapes(ord, shape, dim, keepdim):
    # test_norm_vector_degenerate_shapes: numpy's values, or RuntimeError where the norm of
    # no entries has no value (negative ords and inf)
    a = _rand(*shape)
    if (ord < 0 or ord == INF) and (dim is None or shape[dim] == 0):
        for L in (fg, torch):
            with pytest.raises(RuntimeError):
                L.linalg.norm(L.tensor(a), ord, dim, keepdim)
        return
    want = np.linalg.norm(a, ord, dim, keepdim)
    _close(fg.linalg.norm(fg.tensor(a), ord, dim, keepdim), np.asarray(want))
    _close(fg.linalg.vector_norm(fg.tensor(a), ord, dim, keepdim), np.asarray(want))


@pytest.mark.parametrize(
    "shape, error_ords, dim",
    [
        ((0, 0), [1, 2, INF, -1, -2, -INF], None),
        ((0, 10), [2, INF, -2, -INF], None),
        ((10, 0), [1, 2, -1, -2], None),
        ((10, 10, 0), [], (0, 1)),
        ((1, 10, 0), [], (0, 1)),
        ((0, 0, 10), [1, 2, INF, -1, -2, -INF], (0, 1)),
        ((0, 0, 10), [1, 2, INF, -1, -2, -INF], (1, 0)),
    ],
)
@pytest.mark.parametrize("keepdim", [True, False])
def test_norm_matrix_degenerate_shapes(shape, error_ords, dim, keepdim):
    # test_norm_matrix_degenerate_shapes: numpy's values where numpy has them; PyTorch
    # (and ferrograd) raise IndexError where numpy raises ... except that PyTorch gives 0 for
    # the norms that are maxima of no values (checked against torch below)
    a = _rand(*shape)
    for ord in ["fro", "nuc", 1, 2, INF, -1, -2, -INF, None]:
        ops = ["norm"] + (["matrix_norm"] if ord is not None and dim is not None else [])
        for op in ops:
            try:
                want = getattr(torch.linalg, op)(torch.tensor(a), ord, dim, keepdim)
            except IndexError:
                with pytest.raises(IndexError):
                    getattr(fg.linalg, op)(fg.tensor(a), ord, dim, keepdim)
                continue
            got = getattr(fg.linalg, op)(fg.tensor(a), ord, dim, keepdim)
            _close(got, want)
            if ord not in error_ords:
                _close(got, np.asarray(np.linalg.norm(a, ord, dim, keepdim)))


def test_norm_fastpaths():
    # test_norm_fastpaths: the special ords agree with their definitions
    x = _rand(3, 5)
    t = fg.tensor(x)
    _close(fg.linalg.norm(t, 4.5, 1), (np.abs(x) ** 4.5).sum(1) ** (1 / 4.5))
    _close(fg.linalg.norm(t, 0, 1), (x != 0).sum(1).astype(float))
    _close(fg.linalg.norm(t, 1, 1), np.abs(x).sum(1))
    _close(fg.linalg.norm(t, 2, 1), np.sqrt((x**2).sum(1)))
    _close(fg.linalg.norm(t, 3, 1), (np.abs(x) ** 3).sum(1) ** (1 / 3))


@pytest.mark.parametrize("p", [1, -1, 2, -2, INF, -INF, "fro", "nuc", None])
def test_cond_against_numpy(p):
    # test_cond: numpy's values on batches, empty batches, non-square (2-norms) and singular
    # inputs; 0 for 0x0 matrices (where numpy fails)
    for shape in ((32, 32), (2, 3, 3, 3), (0, 3, 3), (0, 2, 5, 5)):
        a = _rand(*shape)
        want = np.linalg.cond(a, p) if a.size else np.zeros(shape[:-2])
        _close(fg.linalg.cond(fg.tensor(a), p), np.asarray(want), rtol=1e-7)
    if p in (2, -2, None):
        for shape in ((16, 32), (32, 16), (2, 3, 5, 3), (2, 3, 3, 5)):
            a = _rand(*shape)
            _close(fg.linalg.cond(fg.tensor(a), p), np.linalg.cond(a, p), rtol=1e-7)
    sing = np.eye(3)
    sing[-1, -1] = 0
    got = float(fg.linalg.cond(fg.tensor(sing), p))
    want = float(torch.linalg.cond(torch.tensor(sing), p))
    assert (
        got == want or (math.isinf(want) and math.isinf(got)) or abs(got - want) < 1e-8 * abs(want)
    )
    if p in ("fro", 2):
        for shape in ((0, 0), (2, 5, 0, 0)):
            assert not fg.linalg.cond(fg.zeros(shape, dtype=fg.float64), p).numpy().any()
            assert fg.linalg.cond(fg.zeros(shape, dtype=fg.float64), p).shape == shape[:-2]
    # cond expects at least 2 dimensions; and square matrices for the non-2 norms
    with pytest.raises(RuntimeError):
        fg.linalg.cond(fg.ones(3, dtype=fg.float64), p)
    if p not in (2, -2, None):
        with pytest.raises(RuntimeError):
            fg.linalg.cond(fg.ones(3, 2, dtype=fg.float64), p)
    a = np.eye(3)[None].repeat(3, 0)
    a[1, -1, -1] = 0
    if p not in (2, -2, None):
        assert math.isinf(float(fg.linalg.cond(fg.tensor(a), p)[1]))
    for bad in ("wrong_norm", 5):
        with pytest.raises(RuntimeError, match="invalid norm type"):
            fg.linalg.cond(fg.ones(3, 3), bad)


@pytest.mark.parametrize("keepdim", [False, True])
def test_norm_old(keepdim):
    # test_norm_old: Tensor.norm / torch.norm against numpy
    x = _rand(25)
    for p in [0, 1, 2, 3, 4, INF, -INF, -1, -2, -3, 1.5]:
        _close(
            fg.tensor(x).norm(p, keepdim=keepdim),
            np.asarray(np.linalg.norm(x, p, keepdims=keepdim)),
        )
    x = _rand(25, 25)
    for p in [0, 1, 2, 3, 4, INF, -INF, -1, -2, -3]:
        want = np.linalg.norm(x, p, 1, keepdims=keepdim)
        _close(fg.tensor(x).norm(p, 1, keepdim=keepdim), want)
    for p in ["fro", "nuc"]:
        want = np.asarray(np.linalg.norm(x, p, keepdims=keepdim))
        _close(fg.tensor(x).norm(p, keepdim=keepdim), want)
    x = np.array(0.7)
    _close(fg.tensor(x).norm(keepdim=keepdim), np.asarray(np.linalg.norm(x, keepdims=keepdim)))
    big = fg.norm(fg.ones(10000), keepdim=keepdim) * 2
    _close(big, fg.norm(fg.ones(40000), keepdim=keepdim))
    x = _rand(5, 6, 7, 8)
    for p in ["fro", "nuc"]:
        for dim in itertools.permutations(range(4), 2):
            got = fg.tensor(x).norm(p=p, dim=dim, keepdim=keepdim)
            _close(got, np.linalg.norm(x, ord=p, axis=dim, keepdims=keepdim))


def test_norm_old_nan_propagation():
    for pair in itertools.product([0.0, math.nan, 1.0], repeat=2):
        x = fg.tensor(list(pair), dtype="float64")
        for ord in (INF, -INF):
            np.testing.assert_equal(float(fg.norm(x, p=ord)), float(fg.linalg.norm(x, ord=ord)))
            np.testing.assert_equal(
                float(fg.norm(x, p=ord)), float(torch.norm(torch.tensor(list(pair)), p=ord))
            )


@pytest.mark.parametrize(
    "shape",
    [
        (0,),
        (10,),
        (0, 0),
        (4, 30),
        (0, 45),
        (100, 0),
        (45, 10, 23),
        (0, 23, 59),
        (23, 0, 37),
        (34, 58, 0),
        (0, 0, 348),
        (0, 3434, 0),
        (0, 0, 0),
        (5, 3, 8, 1, 3, 5),
    ],
)
def test_norm_fro_2_equivalence_old(shape):
    # torch.norm with p='fro' and p=2 agree for every reduction they both take
    a = fg.tensor(np.random.default_rng(0).uniform(-9, 9, shape))
    n = a.ndim
    dims = [None, *range(-n, n)]
    dims += [(d0, d1) for d0, d1 in itertools.combinations(range(-n, n), 2) if d0 % n != d1 % n]
    for dim in dims:
        for keepdim in (True, False):
            _close(
                fg.norm(a, p=2, dim=dim, keepdim=keepdim),
                fg.norm(a, p="fro", dim=dim, keepdim=keepdim),
            )


def test_nuclear_norm_axes_small_brute_force_old():
    # torch.norm(x, 'nuc', dim=axes) on C, Fortran and strided layouts, with out=
    rng = np.random.default_rng(0)

    def check(x, axes):
        a = x.numpy()
        want = np.linalg.norm(a, "nuc", axis=axes)
        got = fg.norm(x, "nuc", dim=axes)
        _close(got, np.asarray(want), rtol=1e-10)
        out = fg.zeros(want.shape, dtype=x.dtype)
        assert fg.norm(x, "nuc", dim=axes, out=out) is out
        _close(out, np.asarray(want), rtol=1e-10)

    for n in range(1, 3):
        for m in range(1, 3):
            for axes in itertools.permutations([0, 1], 2):
                check(fg.tensor(rng.standard_normal((n, m))), axes)
                check(fg.tensor(rng.standard_normal((m, n))).mT, axes)
                check(fg.tensor(rng.standard_normal((n, 2 * m)))[:, ::2], axes)
                check(fg.tensor(rng.standard_normal((7 * n, 2 * m)))[::7, ::2], axes)
            for o in range(1, 3):
                for axes in itertools.permutations([0, 1, 2], 2):
                    check(fg.tensor(rng.standard_normal((o, n, m))), axes)
                    check(fg.tensor(rng.standard_normal((o, m, n))).mT, axes)
                    check(fg.tensor(rng.standard_normal((o, n, 2 * m)))[:, :, ::2], axes)
                    check(
                        fg.tensor(rng.standard_normal((7 * o, 5 * n, 2 * m)))[::7, ::5, ::2], axes
                    )


def test_nuclear_norm_exceptions_old():
    for lst in ([], [1], [1, 2]):
        for L in (fg, torch):
            x = L.tensor(lst, dtype=L.float64)
            for axes in ((), (0,)):
                with pytest.raises(RuntimeError):
                    L.norm(x, "nuc", axes)
            with pytest.raises(RuntimeError):
                L.norm(x, "nuc", (0, 1))
    for L in (fg, torch):
        x = L.tensor([[0, 1, 2], [3, 4, 5]], dtype=L.float64)
        with pytest.raises(RuntimeError, match="(?i)differ"):
            L.norm(x, "nuc", (0, 0))
        with pytest.raises(IndexError):
            L.norm(x, "nuc", (0, 2))


@pytest.mark.parametrize("batch", [(), (0,), (1,), (2,), (2, 1), (0, 2)])
def test_svd_shapes_and_torch_svd(batch):
    # test_svd: linalg.svd (reduced and full), linalg.svdvals and torch.svd (some,
    # compute_uv) reconstruct A, for square, tall, wide and empty matrices
    for m, n in itertools.product((12, 4, 2, 0), repeat=2):
        shape, k = batch + (m, n), min(m, n)
        A = _rand(*shape)
        t = fg.tensor(A)
        U, S, Vh = fg.linalg.svd(t, full_matrices=False)
        _close((U * S.unsqueeze(-2)) @ Vh, A, atol=1e-12)
        Uf, Sf, Vhf = fg.linalg.svd(t, full_matrices=True)
        assert Uf.shape == batch + (m, m) and Vhf.shape == batch + (n, n)
        _close(Sf, S)
        _close((Uf[..., :k] * Sf.unsqueeze(-2)) @ Vhf[..., :k, :], A, atol=1e-12)
        _close(fg.linalg.svdvals(t), S)
        U2, S2, V2 = fg.svd(t, some=True)
        _close((U2 * S2.unsqueeze(-2)) @ V2.mT, A, atol=1e-12)
        U3, S3, V3 = fg.svd(t, some=False)
        _close(S3, S)
        _close((U3[..., :k] * S3.unsqueeze(-2)) @ V3[..., :k].mT, A, atol=1e-12)
        _close(fg.svd(t, compute_uv=False).S, S)
        _close(S, np.linalg.svd(A, compute_uv=False) if A.size else np.zeros(batch + (k,)))


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize(
    "a_dims, b_dims",
    [
        ((2, 1, 3, 4, 4), (2, 1, 3, 4, 6)),
        ((2, 1, 3, 4, 4), (4, 6)),
        ((4, 4), (2, 1, 3, 4, 2)),
        ((1, 3, 1, 4, 4), (2, 1, 3, 4, 5)),
    ],
)
def test_cholesky_solve_batched_broadcasting(a_dims, b_dims, upper):
    # test_cholesky_solve / _batched / _batched_broadcasting against numpy.linalg.solve,
    # with out=; gradients as torch's
    A = _spd(*a_dims)
    b = _rand(*b_dims, seed=1)
    bs = np.broadcast_shapes(A.shape[:-2], b.shape[:-2])
    want = np.linalg.solve(
        np.broadcast_to(A, bs + A.shape[-2:]), np.broadcast_to(b, bs + b.shape[-2:])
    )
    L = fg.linalg.cholesky(fg.tensor(A), upper=upper)
    x = fg.cholesky_solve(fg.tensor(b), L, upper=upper)
    _close(x, want, rtol=1e-8)
    out = fg.empty(0, dtype=fg.float64)
    assert fg.cholesky_solve(fg.tensor(b), L, upper=upper, out=out) is out
    _close(out, want, rtol=1e-8)

    def f(Lib, bb, aa):
        c = Lib.linalg.cholesky((aa + aa.mT) / 2, upper=upper)
        return Lib.cholesky_solve(bb, c, upper=upper)

    _both(f, b, A)


def test_cholesky_solve_errors():
    # test_cholesky_solve_out_errors_and_warnings (the dtype check) and shape checks
    for L in (fg, torch):
        a, b = L.eye(2, dtype=L.float64), L.ones(2, 1, dtype=L.float64)
        with pytest.raises(RuntimeError):
            L.cholesky_solve(b, a, out=L.empty(0, dtype=L.int32))
        with pytest.raises(RuntimeError):
            L.cholesky_solve(L.ones(3, 1, dtype=L.float64), a)
        with pytest.raises(RuntimeError):
            L.cholesky_solve(b, L.ones(2, 3, dtype=L.float64))


def _inv_ex_out(L):
    def f(x, out=None):
        if out is not None:
            info = L.empty(0, dtype=L.int32)
            return L.linalg.inv_ex(x, out=(out, info)).inverse
        return L.linalg.inv_ex(x).inverse

    return f


@pytest.mark.parametrize("which", ["inverse", "linalg.inv", "inv_ex"])
@pytest.mark.parametrize("batches, n", list(itertools.product([(), (0,), (2,), (2, 1)], [0, 5])))
def test_inverse_layouts_and_out(which, batches, n):
    # test_inverse: numpy's values, A @ inv(A) = I, out= into a transposed (column-major)
    # tensor, per-matrix results equal the batched ones, for contiguous, transposed and
    # strided inputs
    inv = {"inverse": fg.inverse, "linalg.inv": fg.linalg.inv, "inv_ex": _inv_ex_out(fg)}[which]
    big = fg.tensor(_fullrank(*batches, 2 * n, 2 * n) if n else np.zeros((*batches, 0, 0)))
    inputs = [fg.tensor(_fullrank(*batches, n, n) if n else np.zeros((*batches, n, n)))]
    inputs.append(inputs[0].mT)
    if n:
        inputs.append(big.reshape(-1, 2 * n, 2 * n)[:, ::2, ::2].reshape(*batches, n, n))
    for A in inputs:
        got = inv(A)
        a = A.numpy()
        _close(got, np.linalg.inv(a) if a.size else np.zeros(a.shape), rtol=1e-8, atol=1e-10)
        eye = np.broadcast_to(np.eye(n), a.shape)
        np.testing.assert_allclose(a @ got.numpy(), eye, atol=1e-10)
        np.testing.assert_allclose(got.numpy() @ a, eye, atol=1e-10)
        out = fg.empty(*batches, n, n, dtype=fg.float64).mT.contiguous().mT
        ans = inv(A, out=out)
        np.testing.assert_array_equal(out.numpy(), ans.numpy())
        np.testing.assert_array_equal(out.numpy(), got.numpy())
        if A.ndim > 2 and batches[0] != 0:
            p = int(np.prod(batches))
            each = fg.stack([inv(m) for m in A.reshape(p, n, n)]).reshape(*batches, n, n)
            _close(got, each, rtol=1e-12)


def test_inv_ex_singular_and_inverse_errors():
    # test_inv_ex_singular / test_inverse_errors: the info values and the batch element
    # named in the error
    A = np.eye(3)
    A[-1, -1] = 0
    assert int(fg.linalg.inv_ex(fg.tensor(A)).info) == 3
    with pytest.raises(fg.linalg.LinAlgError, match="diagonal element 3 is zero"):
        fg.linalg.inv_ex(fg.tensor(A), check_errors=True)
    A = np.eye(3)[None].repeat(5, 0)
    A[3, -2, -2] = 0
    info = fg.linalg.inv_ex(fg.tensor(A)).info
    assert info.tolist() == [0, 0, 0, 2, 0] and info.dtype == fg.int32
    with pytest.raises(
        fg.linalg.LinAlgError, match=r"(?i)batch element 3.*diagonal element 2 is zero"
    ):
        fg.linalg.inv_ex(fg.tensor(A), check_errors=True)
    with pytest.raises(RuntimeError):
        fg.inverse(fg.tensor(_rand(2, 3, 4, 3)))
    for batch, n in [(1, 0), (2, 0), (2, 1), (4, 0), (4, 2), (10, 2)]:
        x = np.eye(3)[None].repeat(batch, 0)
        x[n, -1, -1] = 0
        for f in (fg.inverse, fg.linalg.inv):
            with pytest.raises(
                fg.linalg.LinAlgError, match=rf"(?i)batch element {n}\).*diagonal element 3 is zero"
            ):
                f(fg.tensor(x))


@pytest.mark.parametrize(
    "sizes",
    [
        (5, 5),
        (3, 5, 5),
        (3, 2, 5, 5),
        (3, 2),
        (5, 3, 2),
        (2, 5, 3, 2),
        (2, 3),
        (5, 2, 3),
        (2, 5, 2, 3),
        (0, 0),
        (0, 2),
        (2, 0),
        (3, 0, 0),
        (0, 3, 0),
        (0, 0, 3),
    ],
)
@pytest.mark.parametrize("hermitian", [False, True])
def test_pinv_numpy(sizes, hermitian):
    # test_pinv: the Penrose conditions, out=, and numpy's values for a float rcond, a
    # tensor rcond per matrix (of several dtypes) and one broadcast over the batch
    if hermitian:
        if sizes[-1] != sizes[-2]:
            return
        A = _spd(*sizes) if 0 not in sizes else np.zeros(sizes)
    else:
        A = _rand(*sizes)
    t = fg.tensor(A)
    P = fg.linalg.pinv(t, hermitian=hermitian)
    p = P.numpy()
    if A.size:
        np.testing.assert_allclose(A @ p @ A, A, atol=1e-10)
        np.testing.assert_allclose(p @ A @ p, p, atol=1e-10)
        np.testing.assert_allclose(A @ p, np.swapaxes(A @ p, -1, -2), atol=1e-10)
        np.testing.assert_allclose(p @ A, np.swapaxes(p @ A, -1, -2), atol=1e-10)
    else:
        assert A.shape == p.shape[:-2] + (p.shape[-1], p.shape[-2])
    out = fg.empty_like(P)
    assert fg.linalg.pinv(t, hermitian=hermitian, out=out) is out
    np.testing.assert_array_equal(out.numpy(), p)
    rng = np.random.default_rng(3)
    rconds = [float(rng.uniform()), rng.uniform(size=A.shape[:-2])]
    rconds += [rconds[1].astype(np.float32)]
    if A.ndim > 2:
        rconds.append(rng.uniform(size=A.shape[-3]))
    for rcond in rconds:
        r = rcond if isinstance(rcond, float) else fg.tensor(rcond)
        got = fg.linalg.pinv(t, rcond=r, hermitian=hermitian)
        _close(got, fg.linalg.pinv(t, rtol=r, hermitian=hermitian))
        want = np.linalg.pinv(A, rcond=rcond, hermitian=hermitian)
        _close(got, want, rtol=1e-7, atol=1e-9)
    with pytest.raises(RuntimeError):
        fg.linalg.pinv(fg.tensor(_rand(1)))


@pytest.mark.parametrize("n", [0, 5, 32])
@pytest.mark.parametrize("batch", [(), (0,), (3,), (2, 3)])
@pytest.mark.parametrize("rhs", [(), (1,), (5,)])
def test_solve_numpy(n, batch, rhs):
    # test_solve: A x = b holds and x is numpy's
    A = _fullrank(*batch, n, n) if n else np.zeros((*batch, 0, 0))
    b = _rand(*batch, n, *rhs, seed=1)
    x = fg.linalg.solve(fg.tensor(A), fg.tensor(b)).numpy()
    Ax = (A @ x[..., None])[..., 0] if rhs == () else A @ x
    np.testing.assert_allclose(Ax, b, atol=1e-10)
    want = np.linalg.solve(A, b[..., None])[..., 0] if rhs == () else np.linalg.solve(A, b)
    np.testing.assert_allclose(x, want, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize(
    "a_dims, b_dims",
    [
        ((5, 5), (2, 0, 5, 3)),
        ((2, 0, 5, 5), (5, 3)),
        ((2, 1, 3, 4, 4), (4, 6)),
        ((4, 4), (2, 1, 3, 4, 2)),
        ((1, 3, 1, 4, 4), (2, 1, 3, 4, 5)),
    ],
)
def test_solve_batched_broadcasting_numpy(a_dims, b_dims):
    A, B = _fullrank(*a_dims), _rand(*b_dims, seed=1)
    _close(fg.linalg.solve(fg.tensor(A), fg.tensor(B)), np.linalg.solve(A, B), rtol=1e-8)


def test_inv_errors_and_warnings():
    for L in (fg, torch):
        with pytest.raises(RuntimeError):
            L.linalg.inv(L.tensor(_rand(2, 3, 4, 3)))
        with pytest.raises(RuntimeError):
            L.linalg.inv(L.tensor(_rand(2)))
        with pytest.raises(RuntimeError):  # out of another dtype
            L.linalg.inv(L.eye(2, dtype=L.float64), out=L.empty(0, dtype=L.int32))
    for batch, n in [(1, 0), (2, 0), (2, 1), (4, 0), (4, 2), (10, 2)]:
        a = np.eye(3)[None].repeat(batch, 0)
        a[n, -1, -1] = 0
        with pytest.raises(
            fg.linalg.LinAlgError, match=rf"\(Batch element {n}\): The diagonal element 3"
        ):
            fg.linalg.inv(fg.tensor(a))
    # a non-empty out of the wrong shape is resized with PyTorch's warning
    out = fg.empty(1, dtype=fg.float64)
    with pytest.warns(UserWarning, match="An output with one or more elements was resized"):
        fg.linalg.inv(fg.eye(2, dtype=fg.float64), out=out)
    assert out.shape == (2, 2)


@pytest.mark.parametrize("a_shape", [(2, 3, 6), (3, 4, 4, 3)])
@pytest.mark.parametrize("dims", [None, (0, 2)])
def test_tensorsolve_numpy(a_shape, dims):
    # test_tensorsolve: numpy's values and out=
    a, b = _rand(*a_shape), _rand(*a_shape[:2], seed=1)
    got = fg.linalg.tensorsolve(fg.tensor(a), fg.tensor(b), dims=dims)
    _close(got, np.linalg.tensorsolve(a, b, axes=dims), rtol=1e-7, atol=1e-9)
    out = fg.empty_like(got)
    assert fg.linalg.tensorsolve(fg.tensor(a), fg.tensor(b), dims=dims, out=out) is out
    np.testing.assert_array_equal(out.numpy(), got.numpy())


def test_tensorsolve_empty_and_errors():
    a = fg.empty(0, 0, 1, 2, 3, 0, dtype=fg.float64)
    b = fg.empty(0, 0, dtype=fg.float64)
    x = fg.linalg.tensorsolve(a, b)
    assert x.shape == (1, 2, 3, 0)
    _close(fg.tensordot(a, x, dims=x.ndim), b.numpy())
    a = fg.eye(24).reshape(6, 4, 2, 3, 4)
    with pytest.raises(RuntimeError):
        fg.linalg.tensorsolve(a, fg.tensor(_rand(8, 4)))
    with pytest.raises(RuntimeError):
        fg.linalg.tensorsolve(a, fg.tensor(_rand(6, 4)), out=fg.empty(0, dtype=fg.int32))


@pytest.mark.parametrize(
    "a_shape, ind",
    [
        ((12, 3, 4), 1),
        ((3, 8, 24), 2),
        ((18, 3, 3, 2), 1),
        ((1, 4, 2, 2), 2),
        ((2, 3, 5, 30), 3),
        ((24, 2, 2, 3, 2), 1),
        ((3, 4, 2, 3, 2), 2),
        ((1, 2, 3, 2, 3), 3),
        ((3, 2, 1, 2, 12), 4),
    ],
)
def test_tensorinv_numpy(a_shape, ind):
    a = _rand(*a_shape)
    got = fg.linalg.tensorinv(fg.tensor(a), ind=ind)
    _close(got, np.linalg.tensorinv(a, ind=ind), rtol=1e-7, atol=1e-9)
    out = fg.empty_like(got)
    assert fg.linalg.tensorinv(fg.tensor(a), ind=ind, out=out) is out
    np.testing.assert_array_equal(out.numpy(), got.numpy())


def test_tensorinv_empty_errors_and_singular_input():
    for ind in range(1, 4):
        a = fg.empty(0, 0, 1, 2, 3, 0, dtype=fg.float64)
        assert fg.linalg.tensorinv(a, ind=ind).shape == a.shape[ind:] + a.shape[:ind]
    for shape, ind in (((2, 3, 4), 1), ((1, 2, 3, 4), 3), ((12, 3, 4), -1), ((18, 3, 3, 2), 0)):
        for L in (fg, torch):
            with pytest.raises(RuntimeError):
                L.linalg.tensorinv(L.tensor(_rand(*shape)), ind=ind)
    with pytest.raises(RuntimeError):
        fg.linalg.tensorinv(fg.tensor(_rand(12, 3, 4)), ind=1, out=fg.empty(0, dtype=fg.int32))
    for shape, ind in (((12, 3, 4), 1), ((3, 6, 18), 2)):
        n = int(np.prod(shape[ind:]))
        a = np.eye(n)
        a[-1, -1] = 0
        with pytest.raises(fg.linalg.LinAlgError, match="The diagonal element"):
            fg.linalg.tensorinv(fg.tensor(a.reshape(shape)), ind=ind)


@pytest.mark.parametrize("fn", ["dot", "vdot"])
def test_dot_vdot_vs_numpy_and_invalid_args(fn):
    # _test_dot_vdot_vs_numpy / _test_dot_vdot_invalid_args
    f, ref = getattr(fg, fn), getattr(np, fn)
    rng = np.random.default_rng(0)
    x, y = 0.1 * rng.standard_normal(5000), 0.1 * rng.standard_normal(5000)
    cases = [(np.zeros(0), np.zeros(0)), (x, y)]
    for a, b in cases:
        res = f(fg.tensor(a), fg.tensor(b))
        _close(res, np.asarray(ref(a, b)), rtol=1e-12)
        out = fg.empty_like(res)
        f(fg.tensor(a), fg.tensor(b), out=out)
        _close(out, res.numpy())
    z = fg.tensor(rng.standard_normal(1)).expand(5000)  # 0-strided
    _close(f(fg.tensor(x), z), np.asarray(ref(x, z.numpy())), rtol=1e-12)
    _close(f(fg.tensor(x)[::2], z[::2]), np.asarray(ref(x[::2], z.numpy()[::2])), rtol=1e-12)
    for L in (fg, torch):
        a, b = L.ones(1), L.ones(3, dtype=L.float64)
        g = getattr(L, fn)
        with pytest.raises(RuntimeError):
            g(a, b)  # dtypes differ
        with pytest.raises(RuntimeError):
            g(a.reshape(1, 1), b)  # 1D tensors expected
        with pytest.raises(RuntimeError):
            g(a.expand(9), b.to(a.dtype))  # sizes differ


@pytest.mark.parametrize(
    "shape0, shape1, batch", [(3, 13, ()), (3, 3, (0,)), (13, 13, (4,)), (13, 3, (3, 5))]
)
def test_matrix_rank_numpy(shape0, shape1, batch):
    # test_matrix_rank / test_matrix_rank_atol: numpy's ranks with tol positional or as
    # atol, per matrix or broadcast, of several dtypes; hermitian positional; out=
    mr = fg.linalg.matrix_rank
    a = _rand(*batch, shape0, shape1)
    t = fg.tensor(a)
    rank_a = mr(t)
    assert rank_a.tolist() == mr(t.mT).tolist()
    aaH, aHa = a @ np.swapaxes(a, -1, -2), np.swapaxes(a, -1, -2) @ a
    assert mr(fg.tensor(aaH)).tolist() == mr(fg.tensor(aaH), hermitian=True).tolist()
    assert mr(fg.tensor(aHa)).tolist() == mr(fg.tensor(aHa), hermitian=True).tolist()
    np.testing.assert_array_equal(rank_a.numpy(), np.linalg.matrix_rank(a))
    np.testing.assert_array_equal(mr(t, 0.01).numpy(), np.linalg.matrix_rank(a, 0.01))
    np.testing.assert_array_equal(mr(fg.tensor(aaH)).numpy(), np.linalg.matrix_rank(aaH))
    np.testing.assert_array_equal(
        mr(fg.tensor(aaH), 0.01, True).numpy(), np.linalg.matrix_rank(aaH, 0.01, True)
    )
    out = fg.empty(a.shape[:-2], dtype=fg.int64)
    assert mr(t, out=out) is out and out.tolist() == rank_a.tolist()
    rng = np.random.default_rng(1)
    tols = [float(rng.uniform())]
    for dt in ("float64", "float32", "int64", "int32", "uint8"):
        tols.append(rng.uniform(0, 9, a.shape[:-2]).astype(dt))
    if a.ndim > 2:
        tols.append(rng.uniform(0, 9, a.shape[-3]).astype(np.float32))
    for tol in tols:
        tt = tol if isinstance(tol, float) else fg.tensor(tol)
        got = mr(t, atol=tt)
        assert got.tolist() == mr(t, tol=tt).tolist()
        np.testing.assert_array_equal(got.numpy(), np.linalg.matrix_rank(a, tol=tol))


def test_matrix_rank_atol_rtol_empty_basic():
    # test_matrix_rank_atol_rtol: singular values 1 + 1/2, 1 - 1/3, 1 + 1/4, ...
    n = 9
    s = np.array([1 + (-1) ** k / (k + 2) for k in range(n)])
    u, _ = np.linalg.qr(_rand(n, n))
    v, _ = np.linalg.qr(_rand(n, n, seed=1))
    a = fg.tensor((u * s) @ v)
    for tol in (0.81, fg.tensor(0.81, dtype=fg.float64)):
        assert int(fg.linalg.matrix_rank(a, rtol=tol)) == 2
        assert int(fg.linalg.matrix_rank(a, atol=tol)) == 7
        assert int(fg.linalg.matrix_rank(a, atol=tol, rtol=tol)) == 2
    # test_matrix_rank_empty
    for batch in ((), (4,), (3, 5)):
        for m, k in ((0, 0), (0, 3), (3, 0)):
            t = fg.tensor(_rand(*batch, m, k))
            zero = np.zeros(batch, dtype=np.int64)
            for x in (t, t.mT, t @ t.mT, t.mT @ t):
                np.testing.assert_array_equal(fg.linalg.matrix_rank(x).numpy(), zero)
                np.testing.assert_array_equal(fg.linalg.matrix_rank(x, 0.01).numpy(), zero)
            np.testing.assert_array_equal(fg.linalg.matrix_rank(t @ t.mT, 0.01, True).numpy(), zero)
    # test_matrix_rank_out_errors_and_warnings
    with pytest.raises(RuntimeError):
        fg.linalg.matrix_rank(fg.eye(2), out=fg.empty(0, dtype=fg.bool))
    # test_matrix_rank_basic
    e = np.eye(10)
    assert int(fg.linalg.matrix_rank(fg.tensor(e))) == 10
    assert int(fg.linalg.matrix_rank(fg.tensor(e), hermitian=True)) == 10
    e[5, 5] = 0
    assert int(fg.linalg.matrix_rank(fg.tensor(e))) == 9
    assert int(fg.linalg.matrix_rank(fg.tensor(e), hermitian=True)) == 9


@pytest.mark.parametrize(
    "shapes",
    [
        [[0], [0]],
        [[2], [2, 0]],
        [[1, 0], [0]],
        [[0, 2], [2, 1]],
        [[2, 2], [2, 0]],
        [[2, 0], [0, 3]],
        [[0, 0], [0, 1]],
        [[4, 2], [2, 0], [0, 3], [3, 2]],
        [[2], [2]],
        [[1, 2], [2]],
        [[2], [2, 1]],
        [[1, 2], [2, 1]],
        [[3, 2], [2, 4]],
        [[3], [3, 4], [4, 2], [2, 5], [5]],
        [[1, 2], [2, 2], [2, 3], [3, 1]],
        [[10, 100], [100, 5], [5, 50]],
        [[10, 20], [20, 30], [30, 5]],
    ],
)
def test_multi_dot_numpy(shapes):
    arrays = [_rand(*s, seed=i) for i, s in enumerate(shapes)]
    got = fg.linalg.multi_dot([fg.tensor(a) for a in arrays])
    _close(got, np.asarray(np.linalg.multi_dot(arrays)), rtol=1e-10)


def test_multi_dot_errors_like_pytorch():
    a = fg.ones(2)
    for tensors, out in (
        ([], None),
        ([a], None),
        ([fg.tensor(1.0), a], None),
        ([a, fg.tensor(1.0)], None),
        ([a, a, a], None),
        ([a, fg.ones(2, 2, 2), a], None),
        ([a, fg.ones(2, dtype=fg.float64)], None),
        ([a, a], fg.empty(0, dtype=fg.float64)),
        ([a, fg.ones(3)], None),
        ([a, fg.ones(3, 2), a], None),
    ):
        with pytest.raises(RuntimeError):
            fg.linalg.multi_dot(tensors, out=out)


def test_chain_matmul_like_pytorch():
    t = fg.tensor(_rand(2, 2))
    _close(fg.chain_matmul(t), t.numpy())
    with pytest.raises(RuntimeError):
        fg.chain_matmul()
    with pytest.raises(RuntimeError):
        fg.chain_matmul(fg.ones(1), fg.ones(1))


@pytest.mark.parametrize(
    "dims",
    [
        (0, 5),
        (0, 0),
        (5, 0),
        (2, 1, 0, 5),
        (2, 1, 0, 0),
        (2, 1, 5, 0),
        (2, 0, 5, 5),
        (3, 5),
        (5, 5),
        (5, 3),
        (7, 3, 5),
        (7, 5, 5),
        (7, 5, 3),
        (7, 5, 3, 5),
        (7, 5, 5, 5),
        (7, 5, 5, 3),
    ],
)
@pytest.mark.parametrize("some", [True, False])
def test_torch_qr(dims, some):
    # test_qr: torch.qr(A, some) shapes, A = QR, out=, orthonormal Q, triangular R
    A = _rand(*dims)
    Q, R = fg.qr(fg.tensor(A), some=some)
    m, n = dims[-2:]
    cols = m if (not some) and m > n else min(m, n)
    assert Q.shape[-2] == m and R.shape[-1] == n and Q.shape[-1] == cols
    np.testing.assert_allclose(Q.numpy() @ R.numpy(), A, atol=1e-12)
    Qo, Ro = fg.full_like(Q, math.nan), fg.full_like(R, math.nan)
    fg.qr(fg.tensor(A), some=some, out=(Qo, Ro))
    np.testing.assert_array_equal(Qo.numpy(), Q.numpy())
    np.testing.assert_array_equal(Ro.numpy(), R.numpy())
    eye = np.broadcast_to(np.eye(cols), Q.shape[:-2] + (cols, cols))
    np.testing.assert_allclose(np.swapaxes(Q.numpy(), -1, -2) @ Q.numpy(), eye, atol=1e-12)
    np.testing.assert_array_equal(R.triu().numpy(), R.numpy())


@pytest.mark.parametrize("size", [(7, 5), (5, 7), (5, 0), (0, 5), (3, 7, 5)])
def test_qr_vs_numpy_and_batched(size):
    # test_qr_vs_numpy / test_qr_batched (numpy's LAPACK, so the same signs)
    t = _rand(*size)
    flat = t.reshape(int(np.prod(size[:-2])), *size[-2:])
    for mode in ("reduced", "complete"):
        q, r = fg.linalg.qr(fg.tensor(t), mode=mode)
        qs, rs = zip(*(np.linalg.qr(m, mode=mode) for m in flat))
        _close(q, np.array(qs).reshape(*size[:-2], *qs[0].shape), rtol=1e-10, atol=1e-12)
        _close(r, np.array(rs).reshape(*size[:-2], *rs[0].shape), rtol=1e-10, atol=1e-12)
    q, r = fg.linalg.qr(fg.tensor(t), mode="r")
    assert q.shape == (0,) and q.dtype == fg.float64
    want = np.array([np.linalg.qr(m, mode="r") for m in flat])
    _close(r, want.reshape(*size[:-2], *want.shape[-2:]), rtol=1e-10, atol=1e-12)


def test_linalg_qr_autograd():
    # test_linalg_qr_autograd: 'reduced' is differentiable, 'complete' for m <= n; PyTorch
    # refuses 'r' (its backward reads Q), ferrograd differentiates it (see
    # test_qr_mode_r_gradient)
    for mode in ("complete", "reduced", "r"):
        for m, n in ((5, 7), (7, 5)):
            inp = fg.tensor(_rand(m, n), requires_grad=True)
            if mode == "complete" and m > n:
                with pytest.raises(RuntimeError, match="not differentiable"):
                    fg.linalg.qr(inp, mode=mode).R.sum().backward()
                continue
            fg.linalg.qr(inp, mode=mode).R.sum().backward()
            assert inp.grad is not None and np.isfinite(inp.grad.numpy()).all()


def _triangular_inputs(b, n, k):
    """PyTorch's _gen_shape_inputs_linalg_triangular_solve (real dtypes): A and B
    transposed, expanded over the batch (stride 0) or not, for left and right solves."""
    rng = np.random.default_rng(0)
    for left, uni, expand_a, tr_a, expand_b, tr_b in itertools.product((True, False), repeat=6):
        if (expand_a or expand_b) and b == 1:
            continue
        size_a = (b, n, n) if left else (b, k, k)
        size_b = (b, n, k) if not tr_b else (b, k, n)
        if b == 1 or expand_a:
            size_a = size_a[1:]
        if b == 1 or expand_b:
            size_b = size_b[1:]
        m = size_a[-1]
        full = _fullrank(*size_a) if m else np.zeros(size_a)
        _, Lf, U = (x.numpy() for x in fg.linalg.lu(fg.tensor(full)))
        A = np.swapaxes(Lf, -1, -2).copy() if uni else U.copy()
        d = np.einsum("...ii->...i", A)
        if uni:
            d[...] = 1.0
        else:
            d[np.abs(d) < 1e-6] = 1.0
        B = rng.standard_normal(size_b)
        At, Bt = fg.tensor(A), fg.tensor(B)
        if tr_a:
            At = At.mT
        if tr_b:
            Bt = Bt.mT
        if expand_a:
            At = At.expand(b, *At.shape)
        if expand_b:
            Bt = Bt.expand(b, n, k)
        yield At, Bt, left, not tr_a, uni


@pytest.mark.parametrize("b, n, k", list(itertools.product((1, 2, 0), (5, 0), (3, 1, 0))))
def test_linalg_solve_triangular_layouts(b, n, k):
    # test_linalg_solve_triangular: A X = B (X A = B) for every layout, and out= (into B
    # itself where B is not expanded)
    for A, B, left, upper, uni in _triangular_inputs(b, n, k):
        X = fg.linalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=uni)
        T = (A.triu() if upper else A.tril()).numpy().copy()
        if uni:
            np.einsum("...ii->...i", T)[...] = 1.0
        got = T @ X.numpy() if left else X.numpy() @ T
        np.testing.assert_allclose(got, np.broadcast_to(B.numpy(), got.shape), atol=1e-8)
        out = B if B.is_contiguous() or B.mT.is_contiguous() else B.clone()
        fg.linalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=uni, out=out)
        np.testing.assert_allclose(out.numpy(), X.numpy(), atol=1e-12)


@pytest.mark.parametrize(
    "size_a, size_b",
    [
        ((2, 1, 3, 4, 4), (2, 1, 3, 4, 6)),
        ((2, 1, 3, 4, 4), (4, 6)),
        ((4, 4), (2, 1, 3, 4, 2)),
        ((1, 3, 1, 4, 4), (2, 1, 3, 4, 5)),
    ],
)
def test_linalg_solve_triangular_broadcasting(size_a, size_b):
    for left, upper, uni in itertools.product((True, False), repeat=3):
        A = _rand(*size_a)
        A = np.triu(A) if upper else np.tril(A)
        d = np.einsum("...ii->...i", A)
        if uni:
            d[...] = 1.0
        else:
            d[np.abs(d) < 1e-6] = 1.0
        B = _rand(*size_b, seed=1)
        if not left:
            B = np.swapaxes(B, -1, -2)
        X = fg.linalg.solve_triangular(
            fg.tensor(A), fg.tensor(B), upper=upper, left=left, unitriangular=uni
        )
        other = A @ X.numpy() if left else X.numpy() @ A
        np.testing.assert_allclose(*np.broadcast_arrays(B, other), atol=1e-7)


def _tri_helper(a_dims, b_dims, upper, uni, seed=0):
    b = _rand(*b_dims, seed=seed + 1)
    A = _rand(*a_dims, seed=seed)
    A = A @ np.swapaxes(A, -1, -2)
    A = np.triu(A) if upper else np.tril(A)
    if uni:
        np.einsum("...ii->...i", A)[...] = 1.0
    return b, A


@pytest.mark.parametrize("upper, uni, transpose", list(itertools.product((True, False), repeat=3)))
def test_triangular_solve(upper, uni, transpose):
    # test_triangular_solve / test_triangular_solve_batched (torch.triangular_solve, the
    # older API, added to ferrograd on top of linalg.solve_triangular)
    for k, n in itertools.product((0, 1, 3), (0, 5)):
        b, A = _tri_helper((n, n), (n, k), upper, uni)
        x = fg.triangular_solve(
            fg.tensor(b), fg.tensor(A), upper=upper, unitriangular=uni, transpose=transpose
        )[0]
        np.testing.assert_allclose((A.T if transpose else A) @ x.numpy(), b, atol=1e-8)
    for a_dims, b_dims in (
        ((3, 5, 5), (3, 5, 10)),
        ((3, 0, 0), (3, 0, 10)),
        ((3, 0, 0), (3, 0, 0)),
    ):
        b, A = _tri_helper(a_dims, b_dims, upper, uni)
        x = fg.triangular_solve(
            fg.tensor(b), fg.tensor(A), upper=upper, unitriangular=uni, transpose=transpose
        )[0]
        each = [
            fg.triangular_solve(fg.tensor(b[i]), fg.tensor(A[i]), upper, transpose, uni)[0].numpy()
            for i in range(3)
        ]
        _close(x, np.stack(each), rtol=1e-12)
        At = np.swapaxes(A, -1, -2) if transpose else A
        np.testing.assert_allclose(At @ x.numpy(), b, atol=1e-8)
    b, A = _tri_helper((0, 5, 5), (0, 5, 10), upper, uni)
    assert (
        fg.triangular_solve(fg.tensor(b), fg.tensor(A), upper, transpose, uni)[0].shape == b.shape
    )
    # against torch (values, the coefficient copy broadcast, gradients)
    b, A = _tri_helper((2, 1, 4, 4), (3, 4, 2), upper, uni)
    for L in (fg, torch):
        r = L.triangular_solve(
            L.tensor(b), L.tensor(A), upper=upper, transpose=transpose, unitriangular=uni
        )
        if L is fg:
            ours = r
        else:
            _close(ours.solution, r.solution, rtol=1e-9)
            _close(ours.cloned_coefficient, r.cloned_coefficient)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _both(
            lambda L, x, y: L.triangular_solve(x, y, upper, transpose, uni).solution,
            b,
            A,
            grad_rtol=1e-6,
        )


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (3, 0), (0, 3), (2, 3, 0), (1, 0, 2)])
def test_lu_family_of_empty_matrices(shape):
    # matrices with no rows or no columns: empty factors, P the identity, empty pivots
    for name in ("lu", "lu_factor", "lu_factor_ex"):
        ours = getattr(fg.linalg, name)(fg.zeros(shape, dtype=fg.float64))
        theirs = getattr(torch.linalg, name)(torch.zeros(shape, dtype=torch.float64))
        for a, b in zip(ours, theirs):
            assert a.dtype.name == str(b.dtype).split(".")[-1]
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    x = fg.zeros(shape, dtype=fg.float64, requires_grad=True)
    _, L, U = fg.linalg.lu(x)
    (L.sum() + U.sum()).backward()
    assert x.grad.shape == shape


def test_triangular_solve_out_errors_and_warnings():
    a, b = fg.eye(2, dtype=fg.float64), fg.tensor(_rand(2, 1))
    with pytest.raises(RuntimeError, match="dtype"):
        fg.triangular_solve(b, a, out=(fg.empty(2, 1, dtype=fg.int32), fg.empty_like(a)))
    with pytest.raises(RuntimeError, match="dtype"):
        fg.triangular_solve(b, a, out=(fg.empty_like(b), fg.empty(2, 2, dtype=fg.int32)))
    out, clone_a = fg.empty(1, dtype=fg.float64), fg.empty(1, dtype=fg.float64)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fg.triangular_solve(b, a, out=(out, clone_a))
    resized = [x for x in w if "An output with one or more elements was resized" in str(x.message)]
    assert len(resized) == 2
    _close(out, b.numpy())
    _close(clone_a, np.eye(2))


def _gen_sizes_matmul(x_dim, y_dim=4, matrix_size=4, batch_size=3):
    """PyTorch's gen_sizes_matmul: (size_x, size_y) pairs with len(size_x) == x_dim that
    matmul takes."""
    for y in range(1, y_dim + 1):
        for batch, mn in itertools.product(
            itertools.product(range(batch_size), repeat=max(x_dim - 2, y - 2, 0)),
            itertools.product(range(matrix_size), repeat=min(y, 2)),
        ):
            if x_dim == 1:
                yield mn[:1], batch + mn
            else:
                for k in range(matrix_size):
                    size_x = (k,) + mn[:1]
                    if x_dim > 2:
                        size_x = batch[-(x_dim - 2) :] + size_x
                    size_y = mn
                    if y > 2:
                        size_y = batch[-(y - 2) :] + size_y
                    yield size_x, size_y


def _make(shape, dtype, noncontiguous, rng):
    """A tensor of ``shape`` (every other element of a wider one when ``noncontiguous``)."""
    wide = (*shape[:-1], 2 * shape[-1]) if noncontiguous and shape else shape
    vals = rng.integers(-9, 9, wide) if dtype == "int64" else rng.uniform(-9, 9, wide)
    t = fg.tensor(vals, dtype=dtype)
    return t[..., ::2] if noncontiguous and shape else t


@pytest.mark.parametrize("x_dim", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_matmul_small_brute_force(x_dim, dtype):
    # test_matmul_small_brute_force_{1d,2d,3d}_Nd: numpy's products for every compatible
    # shape, contiguous or not, and out=
    rng = np.random.default_rng(0)
    # (every layout pair for 1-D x; for the larger sets every fifth size, the layouts taken
    # in turn, to keep the run short)
    sizes = list(_gen_sizes_matmul(x_dim))
    pairs = list(itertools.product((True, False), repeat=2))
    if x_dim == 1:
        cases = list(itertools.product(sizes, pairs))
    else:
        cases = [(sz, pairs[i % 4]) for i, sz in enumerate(sizes[::5])]
    for (sx, sy), (nx, ny) in cases:
        x, y = _make(sx, dtype, nx, rng), _make(sy, dtype, ny, rng)
        want = np.matmul(x.numpy(), y.numpy())
        ans = fg.matmul(x, y)
        assert ans.is_contiguous() and ans.dtype.name == dtype
        np.testing.assert_allclose(ans.numpy(), want, rtol=1e-12, atol=1e-12)
        out = fg.empty_like(ans)
        assert fg.matmul(x, y, out=out) is out
        np.testing.assert_array_equal(out.numpy(), ans.numpy())


@pytest.mark.parametrize("n", [0, 3, 5])
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
@pytest.mark.parametrize("contiguous", [True, False])
def test_cholesky_numpy(n, batch, contiguous):
    # test_cholesky / test_cholesky_ex / test_old_cholesky_batched: numpy's factor, also of a
    # transposed (non-contiguous) input; out= and upper=
    A = fg.tensor(_spd(*batch, n, n) if n else np.zeros((*batch, 0, 0)))
    if A.numel() and not contiguous:
        A = A.mT
        assert not A.is_contiguous()
    want = np.linalg.cholesky(A.numpy()) if n else np.zeros(A.shape)
    _close(fg.linalg.cholesky(A), want, rtol=1e-12)
    L, info = fg.linalg.cholesky_ex(A)
    _close(L, want, rtol=1e-12)
    assert info.dtype == fg.int32 and not info.numpy().any() and info.shape == batch
    _close(fg.cholesky(A, upper=True), np.swapaxes(want, -1, -2), rtol=1e-12)
    if batch and n:
        each = np.stack([fg.cholesky(m, upper=True).numpy() for m in A.reshape(-1, n, n)])
        _close(fg.cholesky(A, upper=True), each.reshape(A.shape), rtol=1e-12)
    out = fg.empty_like(A)
    assert fg.linalg.cholesky(A, out=out) is out
    np.testing.assert_array_equal(out.numpy(), fg.linalg.cholesky(A).numpy())
    _close(fg.linalg.cholesky(A, upper=True), np.swapaxes(want, -1, -2), rtol=1e-12)


def test_cholesky_errors_like_pytorch():
    # test_cholesky_errors_and_warnings / test_cholesky_ex_non_pd / test_cholesky_ex_out_info_error
    for shape in ((2, 3), (2, 2, 3), (2,)):
        with pytest.raises(RuntimeError):
            fg.linalg.cholesky(fg.tensor(_rand(*shape)))
    A = np.eye(3)
    A[-1, -1] = 0
    with pytest.raises(fg.linalg.LinAlgError, match="minor of order 3 is not positive-definite"):
        fg.linalg.cholesky(fg.tensor(A))
    assert int(fg.linalg.cholesky_ex(fg.tensor(A)).info) == 3
    with pytest.raises(fg.linalg.LinAlgError, match="minor of order 3 is not positive-definite"):
        fg.linalg.cholesky_ex(fg.tensor(A), check_errors=True)
    A = np.eye(3)[None].repeat(5, 0)
    A[4, -1, -1] = 0
    with pytest.raises(
        RuntimeError, match=r"\(Batch element 4\): The factorization could not be completed"
    ):
        fg.linalg.cholesky(fg.tensor(A))
    A = np.eye(3)[None].repeat(5, 0)
    A[3, -2, -2] = 0
    assert fg.linalg.cholesky_ex(fg.tensor(A)).info.tolist() == [0, 0, 0, 2, 0]
    with pytest.raises(
        RuntimeError, match=r"\(Batch element 3\): The factorization could not be completed"
    ):
        fg.linalg.cholesky_ex(fg.tensor(A), check_errors=True)
    S = fg.tensor(_spd(3, 3))
    with pytest.warns(UserWarning, match="An output with one or more elements was resized"):
        fg.linalg.cholesky(S, out=fg.empty(2, 3, dtype=fg.float64))
    with pytest.raises(RuntimeError):
        fg.linalg.cholesky(S, out=fg.empty(3, 3, dtype=fg.int32))
    with pytest.raises(RuntimeError):
        fg.linalg.cholesky_ex(
            S, out=(fg.empty(3, 3, dtype=fg.float64), fg.empty((), dtype=fg.int64))
        )


def test_old_cholesky():
    # test_old_cholesky / test_old_cholesky_empty (torch.cholesky)
    A = _spd(10, 10)
    C = fg.cholesky(fg.tensor(A)).numpy()
    np.testing.assert_allclose(C @ C.T, A, atol=1e-12)
    U = fg.cholesky(fg.tensor(A), True).numpy()
    np.testing.assert_allclose(U.T @ U, A, atol=1e-12)
    for upper in (True, False):
        chol = fg.cholesky(fg.empty(0, 0, dtype=fg.float64), upper)
        assert (chol @ chol.mT).shape == (0, 0)


def _addr_vs_numpy(dtype, beta=1, alpha=1):
    """PyTorch's _test_addr_vs_numpy: addr against beta * m + alpha * outer(a, b) for plain,
    transposed, 0-strided and scalar inputs, with out=; inf and NaN in m ignored at beta 0."""
    rng = np.random.default_rng(0)

    def make(*shape):
        if dtype == "bool":
            return fg.tensor(rng.integers(0, 2, shape).astype(bool))
        if dtype.startswith(("int", "uint")):
            lo = 0 if dtype == "uint8" else -2
            return fg.tensor(rng.integers(lo, 2, shape), dtype=dtype)
        return fg.tensor(rng.uniform(-2, 2, shape), dtype=dtype)

    def check(m, a, b, beta, alpha):
        mn, an, bn = m.numpy(), a.numpy(), b.numpy()
        outer = np.outer(an, bn)
        if dtype == "bool":
            want = (bool(alpha) & outer) if not beta else (mn | (bool(alpha) & outer))
        elif beta == 0:
            want = alpha * outer
        else:
            want = beta * mn + alpha * outer
        res = fg.addr(m, a, b, beta=beta, alpha=alpha)
        np.testing.assert_allclose(
            res.numpy(), np.broadcast_to(want, res.shape).astype(res.numpy().dtype), rtol=1e-12
        )
        out = fg.empty_like(res)
        fg.addr(m, a, b, beta=beta, alpha=alpha, out=out)
        np.testing.assert_array_equal(out.numpy(), res.numpy())

    m, a, b = make(50, 50), make(50), make(50)
    check(m, a, b, beta, alpha)
    check(m.mT, a, b, beta, alpha)
    check(m, make(1).expand(50), b, beta, alpha)
    check(fg.tensor(1, dtype=dtype), a, b, beta, alpha)
    if beta == 0 and dtype.startswith("float"):
        mm = m.numpy().copy()
        mm[0, 10] = mm[10, 10] = mm[20, 20] = INF
        mm[1, 10] = mm[11, 10] = mm[21, 20] = math.nan
        m = fg.tensor(mm)
    check(m, a, b, 0, alpha)


def test_addr_bool_integral_float():
    # test_addr_bool / test_addr_integral / test_addr_float_and_complex
    for beta, alpha in ((True, False), (False, True), (False, False), (True, True)):
        _addr_vs_numpy("bool", beta, alpha)
    for dtype in ("uint8", "int8", "int16", "int32", "int64"):
        for beta, alpha in ((2.0, 1), (2, 1.0), (True, 1), (2, True)):
            with pytest.raises(RuntimeError):
                _addr_vs_numpy(dtype, beta, alpha)
        _addr_vs_numpy(dtype, 0, 2)
        _addr_vs_numpy(dtype, 2, 2)
    for dtype in ("float32", "float64"):
        for beta, alpha in ((True, 1), (2, True)):
            with pytest.raises(RuntimeError):
                _addr_vs_numpy(dtype, beta, alpha)
        _addr_vs_numpy(dtype, 0.0, 2)
        _addr_vs_numpy(dtype, 0.5, 2)


_REAL = [
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
]


def test_addr_and_outer_type_promotion():
    # test_outer_type_promotion / test_addr_type_promotion (real dtypes)
    for d0, d1 in itertools.product(_REAL, repeat=2):
        a, b = fg.ones(5, dtype=d0), fg.ones(5, dtype=d1)
        want = str(torch.promote_types(getattr(torch, d0), getattr(torch, d1))).split(".")[-1]
        for op in (fg.outer, fg.Tensor.outer, fg.ger, fg.Tensor.ger):
            assert op(a, b).dtype.name == want, (op, d0, d1)
        for d2 in ("bool", "int32", "float32", "float64"):
            m = fg.ones(5, 5, dtype=d2)
            want3 = str(torch.promote_types(getattr(torch, want), getattr(torch, d2))).split(".")[
                -1
            ]
            for op in (fg.addr, fg.Tensor.addr):
                assert op(m, a, b).dtype.name == want3, (d0, d1, d2)


def test_outer_ger_addr_legacy_tests():
    for size in ((0, 0), (0, 5), (5, 0)):
        a, b = fg.rand(size[0]), fg.rand(size[1])
        assert fg.outer(a, b).shape == size and fg.ger(a, b).shape == size
        assert fg.addr(fg.empty(size), a, b).shape == size
    m, a, b = fg.randn(5, 6), fg.randn(5), fg.tensor(6.0)
    for f in (
        lambda: fg.outer(a, b),
        lambda: fg.outer(b, a),
        lambda: fg.ger(a, b),
        lambda: fg.ger(b, a),
        lambda: fg.addr(m, a, b),
        lambda: fg.addr(m, b, a),
    ):
        with pytest.raises(RuntimeError):
            f()


def test_det_numpy():
    # test_det: torch.det, Tensor.det and linalg.det against numpy
    for shape in ((2, 2), (129, 129), (3, 52, 52), (4, 2, 26, 26)):
        t = _rand(*shape)
        want = np.linalg.det(t)
        for op in (fg.det, fg.Tensor.det, fg.linalg.det):
            _close(op(fg.tensor(t)), np.asarray(want), rtol=1e-9)
    with pytest.raises(RuntimeError):
        fg.det(fg.tensor(_rand(1)))


@pytest.mark.parametrize("n", [0, 3, 5])
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
@pytest.mark.parametrize("uplo", ["U", "L"])
def test_eigh_eigvalsh_numpy(n, batch, uplo):
    # test_eigh / test_eigvalsh: numpy's eigenvalues and (up to sign) eigenvectors, out=
    a = _rand(*batch, n, n)
    a = a + np.swapaxes(a, -1, -2)
    w, v = np.linalg.eigh(a, UPLO=uplo)
    aw, av = fg.linalg.eigh(fg.tensor(a), UPLO=uplo)
    _close(aw, w, rtol=1e-10, atol=1e-12)
    if a.size:
        phase = v[..., 0, :] / av.numpy()[..., 0, :]
        _close(av.numpy() * phase[..., None, :], v, rtol=1e-8, atol=1e-10)
    ow, ov = fg.empty_like(aw), fg.empty_like(av)
    rw, rv = fg.linalg.eigh(fg.tensor(a), UPLO=uplo, out=(ow, ov))
    assert rw is ow and rv is ov
    np.testing.assert_array_equal(ow.numpy(), aw.numpy())
    _close(
        fg.linalg.eigvalsh(fg.tensor(a), UPLO=uplo),
        np.linalg.eigvalsh(a, UPLO=uplo),
        rtol=1e-10,
        atol=1e-12,
    )
    out = fg.empty_like(aw)
    assert fg.linalg.eigvalsh(fg.tensor(a), UPLO=uplo, out=out) is out
    # test_eigh_lower_uplo: a non-symmetric input, lower-case UPLO reads that triangle
    m = _rand(3, 3, 2, 2)
    for lo in ("u", "l"):
        w, v = np.linalg.eigh(m, UPLO=lo.upper())
        aw, av = fg.linalg.eigh(fg.tensor(m), UPLO=lo)
        _close(aw, w, rtol=1e-10, atol=1e-12)
        _close(np.abs(av.numpy()), np.abs(v), rtol=1e-8, atol=1e-10)


def test_eigh_eigvalsh_errors_and_warnings():
    for f in (fg.linalg.eigh, fg.linalg.eigvalsh):
        with pytest.raises(RuntimeError):
            f(fg.tensor(_rand(2, 3)))
        for uplo in ("a", "wrong"):
            with pytest.raises(RuntimeError, match="'L' or 'U'"):
                f(fg.tensor(_rand(3, 3)), UPLO=uplo)
    a = fg.tensor(_spd(3, 3))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fg.linalg.eigh(a, out=(fg.empty(7, 7, dtype=fg.float64), fg.empty(7, 7, dtype=fg.float64)))
    assert sum("An output with one or more elements was resized" in str(x.message) for x in w) == 2
    with pytest.raises(RuntimeError):
        fg.linalg.eigh(a, out=(fg.empty(0, dtype=fg.float64), fg.empty(0, dtype=fg.int32)))
    with pytest.raises(RuntimeError):
        fg.linalg.eigh(a, out=(fg.empty(0, dtype=fg.int32), fg.empty(0, dtype=fg.float64)))
    with pytest.raises(RuntimeError):
        fg.linalg.eigvalsh(a, out=fg.empty(0, dtype=fg.int32))


def _same_as_torch(fn, rtol=1e-7, atol=1e-9):
    """``fn(lib)`` gives torch's values (dtype and shape included) or raises torch's kind
    of exception."""
    try:
        want = fn(torch)
    except Exception as e:  # noqa: BLE001 - any exception torch raises is the reference
        with pytest.raises(_like(e)):
            fn(fg)
        return
    got = fn(fg)
    for w, g in zip(_flat(want), _flat(got)):
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(
            _np(g.float() if g.dtype.name == "bfloat16" else g).astype(np.float64),
            _np(w.float() if w.dtype == torch.bfloat16 else w).astype(np.float64),
            rtol=rtol,
            atol=atol,
            equal_nan=True,
        )


@pytest.mark.parametrize("keepdim", [True, False])
def test_norm_dtype(keepdim):
    # test_norm_dtype (real dtypes): the result keeps the input's dtype, dtype= computes in
    # another, out= must have the result's dtype
    cases = [((10,), [0, 0.1, -0.1, 1, -1, 2, -2, 3, -3, 4.5, -4.5, INF, -INF, None])]
    cases.append(((10, 10), ["fro", "nuc", 1, -1, 2, -2, INF, -INF, None]))
    x = {s: _rand(*s) for s, _ in cases}
    for shape, ords in cases:
        for ord in ords:
            for d0, d1 in itertools.product(("float32", "float64"), repeat=2):

                def f(L, ord=ord, d0=d0, d1=d1, shape=shape):
                    inp = L.tensor(x[shape], dtype=getattr(L, d0))
                    res = L.linalg.norm(inp, ord, keepdim=keepdim)
                    with_dtype = L.linalg.norm(inp, ord, keepdim=keepdim, dtype=getattr(L, d1))
                    out = L.empty(0, dtype=getattr(L, d1))
                    L.linalg.norm(inp, ord, keepdim=keepdim, dtype=getattr(L, d1), out=out)
                    return res, with_dtype, out

                _same_as_torch(f, rtol=1e-5, atol=1e-6)
            for d0, d1 in (("float32", "float64"), ("float64", "float32")):
                for L in (fg, torch):
                    with pytest.raises(RuntimeError):
                        L.linalg.norm(
                            L.tensor(x[shape], dtype=L.float32),
                            ord,
                            keepdim=keepdim,
                            dtype=getattr(L, d0),
                            out=L.empty(0, dtype=getattr(L, d1)),
                        )


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_vector_norm_against_torch(dtype):
    # test_vector_norm: every ord, size, dim, keepdim and dtype= as torch (values, dtypes,
    # the errors for empty inputs and for narrowing dtype=), with out=
    rng = np.random.default_rng(0)
    sizes = [(10,), (4, 5), (3, 4, 5), (0,), (0, 10), (0, 0), (10, 0, 10)]
    tol = {"float16": 2e-3, "bfloat16": 2e-2}.get(dtype, 1e-5)
    for size in sizes:
        vals = rng.uniform(-9, 9, size)
        for ord, keepdim, norm_dtype in itertools.product(
            [0, 0.9, 1, 2, 3, INF, -0.5, -1, -2, -3, -INF],
            (True, False),
            (None, "float32", "float64", "float16", "bfloat16"),
        ):
            for dim in (None, len(size) - 1):

                def f(L, ord=ord, keepdim=keepdim, nd=norm_dtype, dim=dim, vals=vals):
                    inp = L.tensor(vals, dtype=getattr(L, dtype))
                    kw = {} if nd is None else {"dtype": getattr(L, nd)}
                    r = L.linalg.vector_norm(inp, ord, dim=dim, keepdim=keepdim, **kw)
                    out = L.empty(0, dtype=r.dtype)
                    L.linalg.vector_norm(inp, ord, dim=dim, keepdim=keepdim, out=out, **kw)
                    return r, out

                _same_as_torch(f, rtol=tol, atol=tol)


def test_vector_norm_dim_tuple_arg():
    for size, dim, err in [
        ((4,), (0,), None),
        ((4,), (1,), IndexError),
        ((4,), (-2,), IndexError),
        ((4, 3), (0, -1), None),
        ((4, 3), (0, 0), RuntimeError),
        ((4, 3), (0, -2), RuntimeError),
        ((4, 3), (0, 1.0), TypeError),
        ((4, 3), (None,), TypeError),
    ]:
        x = fg.randn(*size)
        for d in (dim, list(dim)):
            if err is None:
                fg.linalg.vector_norm(x, dim=d)
            else:
                with pytest.raises(err):
                    fg.linalg.vector_norm(x, dim=d)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_vector_norm_out_dtype_error(dtype):
    x = fg.randn(10, dtype=dtype)
    dts = [None, "float32", "float64", "float16", "bfloat16"]
    for norm_dtype, out_dtype in itertools.product(dts, dts[1:]):
        kw = {} if norm_dtype is None else {"dtype": norm_dtype}
        expected = dtype if norm_dtype is None else norm_dtype
        narrowing = (
            norm_dtype is not None and norm_dtype != dtype and (_RANK[dtype] >= _RANK[norm_dtype])
        )
        if narrowing or out_dtype != expected:
            with pytest.raises(RuntimeError):
                fg.linalg.vector_norm(x, out=fg.empty(0, dtype=out_dtype), **kw)
        else:
            fg.linalg.vector_norm(x, out=fg.empty(0, dtype=out_dtype), **kw)


_RANK = {"float16": 0, "bfloat16": 0, "float32": 1, "float64": 2}


@pytest.mark.parametrize("keepdim", [True, False])
def test_norm_vector_numpy(keepdim):
    # test_norm_vector: linalg.norm's vector norms against numpy, with out=
    ords = [0, 1, -1, 2, -2, 3, -3, 4.5, -4.5, INF, -INF]
    for size, dim in [
        ((10,), None),
        ((10,), 0),
        ((10, 10, 10), 0),
        ((10, 10, 10), 1),
        ((10, 10, 10), 2),
        ((10, 10, 10), -1),
        ((10, 10, 10), -2),
        ((100_000,), None),
    ]:
        x = _rand(*size)
        for ord in ords:
            r = fg.linalg.norm(fg.tensor(x), ord, dim, keepdim)
            _close(r, np.asarray(np.linalg.norm(x, ord, dim, keepdim)), rtol=1e-10)
            out = fg.empty_like(r)
            fg.linalg.norm(fg.tensor(x), ord, dim, keepdim, out=out)
            np.testing.assert_array_equal(out.numpy(), r.numpy())


@pytest.mark.parametrize("keepdim", [True, False])
def test_norm_matrix_numpy(keepdim):
    # test_norm_matrix: linalg.norm and linalg.matrix_norm against numpy over every pair of
    # dims, with out=; and test_cond's out=
    ords = [1, -1, 2, -2, INF, -INF, "nuc", "fro"]
    for size, dim in [
        ((10, 10), None),
        ((10, 10), (0, 1)),
        ((10, 10), (1, 0)),
        ((4, 5, 6, 7), (2, 0)),
        ((4, 5, 6, 7), (-1, -2)),
        ((4, 5, 6, 7), (-1, -3)),
        ((4, 5, 6, 7), (-3, 2)),
    ]:
        x = _rand(*size)
        for ord in ords:
            want = np.asarray(np.linalg.norm(x, ord, dim, keepdim))
            ops = [fg.linalg.norm] + ([fg.linalg.matrix_norm] if dim is not None else [])
            for op in ops:
                r = (
                    op(fg.tensor(x), ord, dim, keepdim)
                    if dim is not None
                    else op(fg.tensor(x), ord, keepdim=keepdim)
                )
                _close(r, want, rtol=1e-10)
                out = fg.empty_like(r)
                if dim is not None:
                    op(fg.tensor(x), ord, dim, keepdim, out=out)
                else:
                    op(fg.tensor(x), ord, keepdim=keepdim, out=out)
                np.testing.assert_array_equal(out.numpy(), r.numpy())
    a = fg.tensor(_rand(2, 3, 3, 3))
    for p in [1, -1, 2, -2, INF, -INF, "fro", "nuc", None]:
        r = fg.linalg.cond(a, p)
        out = fg.empty_like(r)
        assert fg.linalg.cond(a, p, out=out) is out
        np.testing.assert_array_equal(out.numpy(), r.numpy())
    with pytest.warns(UserWarning, match="resized"):
        fg.linalg.cond(
            fg.ones(2, 2, dtype=fg.float64) + fg.eye(2, dtype=fg.float64),
            "fro",
            out=fg.empty(2, 2, dtype=fg.float64),
        )
    with pytest.raises(RuntimeError):
        fg.linalg.cond(fg.eye(2, dtype=fg.float64), 2, out=fg.empty(0, dtype=fg.int32))


def _blas_fn(fn, *args, test_out=False, **kwargs):
    rng = np.random.default_rng(0)
    ts = [
        fg.tensor(rng.standard_normal(a), dtype=fg.float32) if isinstance(a, tuple) else a
        for a in args
    ]
    res = fn(*ts, **kwargs)
    if not test_out:
        return res
    out = fg.full_like(res, math.nan)
    fn(*ts, **kwargs, out=out)
    return out


def test_blas_empty():
    # test_blas_empty: shapes and values of products with empty operands, with out=
    f = _blas_fn
    assert f(fg.mm, (0, 0), (0, 0)).shape == (0, 0)
    assert f(fg.mm, (0, 0), (0, 5)).shape == (0, 5)
    assert f(fg.mm, (5, 0), (0, 0)).shape == (5, 0)
    assert f(fg.mm, (3, 2), (2, 0)).shape == (3, 0)
    for out in (False, True):
        np.testing.assert_array_equal(
            f(fg.mm, (5, 0), (0, 6), test_out=out).numpy(), np.zeros((5, 6))
        )
    assert f(fg.addmm, (0, 0), (0, 0), (0, 0)).shape == (0, 0)
    assert f(fg.addmm, (1,), (0, 17), (17, 1)).shape == (0, 1)
    t = fg.randn(5, 6)
    for out in (False, True):
        np.testing.assert_array_equal(
            f(fg.addmm, t, (5, 0), (0, 6), test_out=out).numpy(), t.numpy()
        )
    assert f(fg.mv, (0, 0), (0,)).shape == (0,)
    assert f(fg.mv, (0, 2), (2,)).shape == (0,)
    for out in (False, True):
        np.testing.assert_array_equal(f(fg.mv, (3, 0), (0,), test_out=out).numpy(), np.zeros(3))
    assert f(fg.addmv, (0,), (0, 0), (0,)).shape == (0,)
    t = fg.randn(3)
    for out in (False, True):
        np.testing.assert_array_equal(f(fg.addmv, t, (3, 0), (0,), test_out=out).numpy(), t.numpy())
    assert f(fg.bmm, (0, 0, 0), (0, 0, 0)).shape == (0, 0, 0)
    assert f(fg.bmm, (3, 0, 0), (3, 0, 5)).shape == (3, 0, 5)
    assert f(fg.bmm, (0, 5, 0), (0, 0, 6)).shape == (0, 5, 6)
    for out in (False, True):
        np.testing.assert_array_equal(
            f(fg.bmm, (3, 5, 0), (3, 0, 6), test_out=out).numpy(), np.zeros((3, 5, 6))
        )
    assert f(fg.baddbmm, (0, 0, 0), (0, 0, 0), (0, 0, 0)).shape == (0, 0, 0)
    assert f(fg.baddbmm, (3, 0, 5), (3, 0, 0), (3, 0, 5)).shape == (3, 0, 5)
    assert f(fg.baddbmm, (0, 5, 6), (0, 5, 0), (0, 0, 6)).shape == (0, 5, 6)
    assert f(fg.baddbmm, (3, 5, 6), (3, 5, 0), (3, 0, 6)).shape == (3, 5, 6)
    c = fg.arange(30, dtype=fg.float32).reshape(3, 2, 5)
    for out in (False, True):
        got = f(fg.baddbmm, c, (3, 2, 0), (3, 0, 5), beta=-2, test_out=out)
        np.testing.assert_array_equal(got.numpy(), -2 * c.numpy())
    assert f(fg.addbmm, (0, 0), (0, 0, 0), (0, 0, 0)).shape == (0, 0)
    assert f(fg.addbmm, (0, 5), (3, 0, 0), (3, 0, 5)).shape == (0, 5)
    t = fg.randn(5, 6)
    for out in (False, True):
        np.testing.assert_array_equal(
            f(fg.addbmm, t, (0, 5, 0), (0, 0, 6), test_out=out).numpy(), t.numpy()
        )
    for out in (False, True):
        assert float(f(fg.matmul, (0,), (0,), test_out=out)) == 0.0
        assert float(f(fg.dot, (0,), (0,), test_out=out)) == 0.0
        np.testing.assert_array_equal(
            f(fg.matmul, (5, 3, 0), (5, 0, 4), test_out=out).numpy(), np.zeros((5, 3, 4))
        )
    assert f(fg.matmul, (0, 0), (0, 0)).shape == (0, 0)
    assert f(fg.matmul, (0, 0, 0), (0, 0, 0)).shape == (0, 0, 0)
    assert f(fg.matmul, (5, 0, 0), (5, 0, 0)).shape == (5, 0, 0)
    for shape, want in (
        ((0, 5, 5), [(0, 5, 5), (0, 5)]),
        ((0, 0, 0), [(0, 0, 0), (0, 0)]),
        ((2, 0, 0), [(2, 0, 0), (2, 0)]),
    ):
        A_LU, pivots = f(fg.lu, shape)
        assert [A_LU.shape, pivots.shape] == want


@pytest.mark.parametrize(
    "dtype", ["float32", "float64", "int64", "int32", "uint8", "int8", "int16"]
)
def test_blas_alpha_beta_empty(dtype):
    # beta is applied to the input of an empty product (keywords as PyTorch's)
    value, alpha, beta = 11, 6, 3
    inp = fg.full((2,), value, dtype=dtype)
    mat, vec = fg.ones(2, 0, dtype=dtype), fg.ones(0, dtype=dtype)
    want = np.full(2, beta * value)
    np.testing.assert_array_equal(
        fg.addmv(input=inp, mat=mat, vec=vec, alpha=alpha, beta=beta).numpy(), want
    )
    out = fg.empty(2, dtype=dtype)
    fg.addmv(input=inp, mat=mat, vec=vec, alpha=alpha, beta=beta, out=out)
    np.testing.assert_array_equal(out.numpy(), want)
    inp = fg.full((2, 3), value, dtype=dtype)
    mat2 = fg.ones(0, 3, dtype=dtype)
    want = np.full((2, 3), beta * value)
    np.testing.assert_array_equal(
        fg.addmm(input=inp, mat1=mat, mat2=mat2, alpha=alpha, beta=beta).numpy(), want
    )
    out = fg.empty(2, 3, dtype=dtype)
    fg.addmm(input=inp, mat1=mat, mat2=mat2, alpha=alpha, beta=beta, out=out)
    np.testing.assert_array_equal(out.numpy(), want)


def test_blas_nan_out():
    # products written into NaN-filled outs of transposed / 0-strided operands
    b, n, m, p = 3, 5, 7, 11
    nm = fg.randn(m, n).t()
    _m = fg.randn(()).expand(m)
    out = fg.full((m,), math.nan)
    np.testing.assert_allclose(fg.mv(nm, _m).numpy(), fg.mv(nm, _m, out=out).numpy())
    assert not np.isnan(fg.mv(nm, _m).numpy()).any()
    mp = fg.randn(p, m).t()
    np.testing.assert_allclose(
        fg.mm(nm, mp).numpy(), fg.mm(nm, mp, out=fg.full((n, p), math.nan)).numpy()
    )
    bnm, bmp = fg.randn(b, m, n).transpose(1, 2), fg.randn(b, p, m).transpose(1, 2)
    np.testing.assert_allclose(
        fg.bmm(bnm, bmp).numpy(), fg.bmm(bnm, bmp, out=fg.full((b, n, p), math.nan)).numpy()
    )


@pytest.mark.parametrize(
    "shape", [(0, 0), (3, 0), (0, 3), (2, 0, 0), (0, 3, 3), (3, 3), (5, 3), (2, 5, 3), (2, 1, 4, 4)]
)
def test_householder_product_numpy_reflectors(shape):
    # test_householder_product: geqrf's reflectors and tau (numpy's qr mode='raw') give qr's Q;
    # an empty tau gives the identity's first columns
    A = _rand(*shape)
    m, n = shape[-2:]
    if m < n:
        return
    flat = A.reshape(int(np.prod(shape[:-2])), m, n)
    refl, tau = np.empty_like(flat), np.empty((flat.shape[0], n))
    for i, a in enumerate(flat):
        if a.size:
            h, t = np.linalg.qr(a, mode="raw")
            refl[i], tau[i] = h.T, t
    refl, tau = refl.reshape(shape), tau.reshape(*shape[:-2], n)
    got = fg.linalg.householder_product(fg.tensor(refl), fg.tensor(tau))
    assert got.shape == shape
    if A.size:
        _close(got, fg.linalg.qr(fg.tensor(A)).Q.numpy(), rtol=1e-10, atol=1e-12)
        ident = fg.linalg.householder_product(
            fg.tensor(refl), fg.empty(*shape[:-2], 0, dtype=fg.float64)
        )
        _close(ident, np.broadcast_to(np.eye(m, n), shape))


def test_householder_product_errors_and_warnings():
    for a_size, tau_size in (((10,), (2,)), ((10, 6), (20,)), ((6, 10), (5,))):
        with pytest.raises(RuntimeError):
            fg.linalg.householder_product(fg.rand(*a_size), fg.rand(*tau_size))
    reflectors, tau = fg.randn(3, 3), fg.randn(3)
    with pytest.warns(UserWarning, match="An output with one or more elements was resized"):
        fg.linalg.householder_product(reflectors, tau, out=fg.empty(2, 3))
    with pytest.raises(RuntimeError):
        fg.linalg.householder_product(reflectors, tau, out=fg.empty(3, 3, dtype=fg.int32))
    with pytest.raises(RuntimeError):
        fg.linalg.householder_product(reflectors, tau.to(fg.int32))


def _random_matrix(m, n, *batch, singular, rng):
    a = rng.standard_normal((*batch, m, n))
    if singular and min(m, n) > 0:
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        s[..., -1] = 0.0
        a = (u * s[..., None, :]) @ vh
    return a


def test_linalg_lu_factor_and_lu():
    # test_linalg_lu_factor_and_lu: torch.lu (get_infos), linalg.lu_factor and lu_factor_ex
    # on singular and regular, empty and batched matrices: P @ L @ U = A
    rng = np.random.default_rng(0)
    fns = (lambda A: fg.lu(A, get_infos=True), fg.linalg.lu_factor, fg.linalg.lu_factor_ex)
    sizes = ((3, 3), (5, 5), (4, 2), (3, 4), (0, 0), (0, 1), (1, 0))
    batches = ((0,), (2,), (3,), (1, 0), (3, 5))
    for (m, n), batch, singular, fn in itertools.product(sizes, batches, (True, False), fns):
        A = fg.tensor(_random_matrix(m, n, *batch, singular=singular, rng=rng))
        if A.numel() == 0 and not singular:
            continue
        for a in (A, fg.ones(*batch, m, n, dtype=fg.float64)) if singular else (A,):
            if singular and fn is fg.linalg.lu_factor:
                try:
                    LU, pivots = fn(a)
                except RuntimeError:
                    continue
            else:
                LU, pivots = fn(a)[:2]
            k = min(m, n)
            assert LU.shape == a.shape and pivots.shape == (*batch, k)
            P, L, U = fg.lu_unpack(LU, pivots)
            np.testing.assert_allclose((P @ L @ U).numpy(), a.numpy(), atol=1e-12)
    assert (fg.linalg.lu_factor_ex(fg.ones(5, 3, 3), pivot=True).info.numpy() >= 0).all()
    with pytest.raises(RuntimeError):
        fg.lu(fg.empty(1, 2, 2), pivot=False)
    with pytest.raises(RuntimeError):
        fg.linalg.lu_factor(fg.empty(1, 2, 2), pivot=False)


def test_lu_unpack_shapes_and_check_input():
    # test_lu_unpack / test_lu_unpack_check_input
    rng = np.random.default_rng(0)
    shapes = [
        (3, 3),
        (5, 3, 3),
        (7, 3, 5, 5),
        (7, 5, 3, 3, 3),
        (3, 5),
        (5, 3),
        (3, 3, 5),
        (3, 5, 3),
        (7, 5, 3, 5, 3),
        (7, 5, 3, 3, 5),
        (0, 0),
        (0, 0, 0),
        (0, 3, 3),
    ]
    for shape in shapes:
        a = rng.uniform(-0.1, 0.1, shape)
        a_lu, p = fg.lu(fg.tensor(a), pivot=True)
        P, L, U = fg.lu_unpack(a_lu, p)
        np.testing.assert_allclose(P.matmul(L.matmul(U)).numpy(), a, atol=1e-14)
    lu_data, lu_pivots = fg.lu(fg.rand(5, 5, 5, dtype=fg.float64), pivot=True)
    for L in (fg, torch):
        lu_d = L.tensor(lu_data.numpy())
        piv = L.tensor(lu_pivots.numpy())
        with pytest.raises(RuntimeError):
            L.lu_unpack(lu_d, piv.long())
        with pytest.raises(RuntimeError):
            L.linalg.lu_solve(lu_d, piv.long(), L.ones(5, 5, 1, dtype=L.float64))
    p, l, u = fg.lu_unpack(lu_data, lu_pivots, unpack_data=False)
    assert l.shape == u.shape == (0,) and p.shape == (5, 5, 5)
    p, l, u = fg.lu_unpack(lu_data, lu_pivots, unpack_pivots=False)
    assert p.shape == (0,)


def _addmm_addmv(f, t, m, v, *, alpha=1.2, beta=0.8, transpose_out=False):
    """PyTorch's _test_addmm_addmv: f(t, m, v) == alpha * m @ v + beta * t (t ignored at
    beta 0, NaN included), also written into a NaN-filled (transposed) out."""
    res1 = f(t, m, v, alpha=alpha, beta=beta)
    res2 = fg.full_like(res1, math.nan)
    if transpose_out:
        res2 = res2.t().contiguous().t()
    f(t, m, v, alpha=alpha, beta=beta, out=res2)
    res3 = alpha * (m.numpy().astype(np.float64) @ v.numpy().astype(np.float64))
    if beta != 0:
        res3 = res3 + beta * t.numpy().astype(np.float64)
    tol = 1e-5 if t.dtype == fg.float32 else 1e-12
    np.testing.assert_array_equal(res1.numpy(), res2.numpy())
    np.testing.assert_allclose(res1.numpy(), np.broadcast_to(res3, res1.shape), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_addmv_addmm_layouts(dtype):
    # test_addmv / test_addmv_rowmajor_colmajor_incx_incy_lda / test_addmm / test_addmm_sizes
    r = lambda *s: fg.tensor(0.2 * _rand(*s, seed=len(s) + sum(s)), dtype=dtype)
    ts = [r(50), r(1).expand(50)]
    vs = [r(100), r(1).expand(100)]
    ms = [
        r(1, 100).expand(50, 100),
        fg.tensor(0.2 * np.random.default_rng(0).integers(0, 3, (50, 1)), dtype=dtype).expand(
            50, 100
        ),
        r(50, 100),
        r(100, 50).t(),
    ]
    for m, v, t in itertools.product(ms, vs, ts):
        _addmm_addmv(fg.addmv, t, m, v)
    for m, v in itertools.product(ms, vs):
        _addmm_addmv(fg.addmv, fg.full((50,), math.nan, dtype=dtype), m, v, beta=0)
    o, s = 5, 3
    a_data = fg.arange(1, o * s + 1, dtype=dtype).view(o, s)
    x_data, y_data = fg.arange(1, s + 1, dtype=dtype), fg.ones(o, dtype=dtype)
    for row_major, incx, incy, lda_tail in itertools.product((False, True), (1, 2), (1, 2), (0, 1)):
        if row_major:
            a_storage = fg.full((o, s + lda_tail), math.nan, dtype=dtype)
        else:
            a_storage = fg.full((s, o + lda_tail), math.nan, dtype=dtype).permute(1, 0)
        a = a_storage[:o, :s]
        a.copy_(a_data)
        x = fg.full((s, incx), math.nan, dtype=dtype)[:, 0]
        x.copy_(x_data)
        y = fg.full((o, incy), math.nan, dtype=dtype)[:, 0]
        y.copy_(y_data)
        _addmm_addmv(fg.addmv, y, a, x)
    _addmm_addmv(fg.addmm, r(10, 25), r(10, 50), r(50, 25))
    _addmm_addmv(fg.addmm, r(10, 1).expand(10, 25), r(10, 1).expand(10, 50), r(50, 25))
    _addmm_addmv(fg.addmm, fg.full((10, 25), math.nan, dtype=dtype), r(10, 50), r(50, 25), beta=0)
    for t1, t2, t3, t4 in itertools.product((True, False), repeat=4):
        mt = lambda c, x: x.t().contiguous().t() if c else x
        _addmm_addmv(
            fg.addmm, mt(t1, r(10, 25)), mt(t2, r(10, 50)), mt(t3, r(50, 25)), transpose_out=t4
        )
    for m, n, k in itertools.product((0, 1, 25), (0, 1, 10), (0, 1, 8)):
        M = r(n, m) if n * m else fg.zeros(n, m, dtype=dtype)
        m1 = r(n, k) if n * k else fg.zeros(n, k, dtype=dtype)
        m2 = r(k, m) if k * m else fg.zeros(k, m, dtype=dtype)
        _addmm_addmv(fg.addmm, M, m1, m2)
        m1 = fg.zeros(n, k + 1, dtype=dtype)
        with pytest.raises(RuntimeError, match=rf"{n}x{k + 1}.*{k}x{m}"):
            fg.addmm(M, m1, m2)
        with pytest.raises(RuntimeError, match=rf"{n}x{k + 1}.*{k}x{m}"):
            fg.mm(m1, m2)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_mm_layouts(dtype):
    # test_mm: contiguous, transposed and 0-strided operands, and out=
    rng = np.random.default_rng(0)

    def genf(x, y):
        if dtype.startswith("int"):
            return fg.tensor(rng.integers(0, 100, (x, y)), dtype=dtype)
        return fg.tensor(rng.standard_normal((x, y)), dtype=dtype)

    tol = 1e-4 if dtype == "float32" else 1e-12
    for n, m, p in ((20, 10, 15), (15, 20, 10), (25, 18, 10)):
        for mat1, mat2 in (
            (genf(n, m), genf(m, p)),
            (genf(n, m), genf(p, m).t()),
            (genf(m, n).t(), genf(m, p)),
            (genf(m, n).t(), genf(p, m).t()),
            (genf(n, m), genf(m, 1).expand(m, p)),
        ):
            want = mat1.numpy().astype(np.float64) @ mat2.numpy().astype(np.float64)
            np.testing.assert_allclose(fg.mm(mat1, mat2).numpy(), want, rtol=tol, atol=tol)
            res = genf(n, p)
            fg.mm(mat1, mat2, out=res)
            np.testing.assert_allclose(res.numpy(), want, rtol=tol, atol=tol)


def test_strided_mm_bmm():
    x = fg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=fg.float64)
    sx = fg.as_strided(x, (2, 2, 2), (3, 1, 1))
    np.testing.assert_allclose(fg.bmm(sx, sx).numpy(), np.matmul(sx.numpy(), sx.numpy()))
    np.testing.assert_allclose(fg.mm(sx[0], sx[0]).numpy(), np.matmul(sx.numpy()[0], sx.numpy()[0]))


@pytest.mark.parametrize("num_batches", [1, 10])
def test_bmm_layouts(num_batches):
    # test_bmm: permuted (transposed in memory), broadcast (expanded) and zero-sized batches,
    # written into NaN-filled outs of every memory order
    M, N, O = 23, 15, 12
    rng = np.random.default_rng(0)

    def invert(p):
        d = {x: i for i, x in enumerate(p)}
        return (d[0], d[1], d[2])

    def make(shape):
        return fg.tensor(rng.uniform(-0.1, 0.1, shape))

    inputs = []
    for p1, p2 in itertools.product(itertools.permutations((0, 1, 2)), repeat=2):
        b1 = make((num_batches, M, N)).permute(*p1).contiguous().permute(*invert(p1))
        b2 = make((num_batches, N, O)).permute(*p2).contiguous().permute(*invert(p2))
        inputs.append((b1, b2))
    for f in itertools.product((True, False), repeat=6):
        s1 = (num_batches if f[0] else 1, M if f[1] else 1, N if f[2] else 1)
        s2 = (num_batches if f[3] else 1, N if f[4] else 1, O if f[5] else 1)
        inputs.append((make(s1).expand(num_batches, M, N), make(s2).expand(num_batches, N, O)))
    for z in itertools.product((True, False), repeat=4):
        s1 = (num_batches if z[0] else 0, M if z[1] else 0, N if z[2] else 0)
        s2 = (num_batches if z[0] else 0, N if z[2] else 0, O if z[3] else 0)
        inputs.append((make(s1), make(s2)))
    for i, (b1, b2) in enumerate(inputs):
        p3 = list(itertools.permutations((0, 1, 2)))[i % 6]
        res1 = fg.bmm(b1, b2)
        shape = (b1.shape[0], b1.shape[1], b2.shape[2])
        res2 = (
            fg.full(shape, math.nan, dtype=fg.float64)
            .permute(*p3)
            .contiguous()
            .permute(*invert(p3))
        )
        fg.bmm(b1, b2, out=res2)
        want = b1.numpy() @ b2.numpy()
        np.testing.assert_allclose(res1.numpy(), want, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(res2.numpy(), want, rtol=1e-12, atol=1e-15)


def _addbmm_baddbmm(func, b1, b2, ref, out_tensor):
    """PyTorch's _test_addbmm_baddbmm without its deprecated positional beta/alpha
    overloads: the in-place method accumulates, beta/alpha scale, NaN inputs are ignored at
    beta 0 (also into out=)."""
    tol = {"rtol": 1e-10, "atol": 1e-12}
    getattr(out_tensor, func + "_")(b1, b2)
    np.testing.assert_allclose(out_tensor.numpy(), ref, **tol)
    res3 = out_tensor.clone()
    getattr(out_tensor, func + "_")(b1, b2, beta=1)
    np.testing.assert_allclose(out_tensor.numpy(), 2 * ref, **tol)
    getattr(res3, func + "_")(b1, b2, beta=1)
    np.testing.assert_allclose(out_tensor.numpy(), res3.numpy(), **tol)
    getattr(out_tensor, func + "_")(b1, b2, beta=1.0, alpha=0.5)
    np.testing.assert_allclose(out_tensor.numpy(), 2.5 * ref, **tol)
    res4 = getattr(fg, func)(out_tensor, b1, b2, beta=1, alpha=0.5)
    np.testing.assert_allclose(res4.numpy(), 3 * ref, **tol)
    nan = fg.full_like(out_tensor, math.nan)
    np.testing.assert_allclose(getattr(fg, func)(nan, b1, b2, beta=0, alpha=1).numpy(), ref, **tol)
    res6 = getattr(fg, func)(out_tensor, b1, b2, beta=0.1, alpha=0.5)
    np.testing.assert_allclose(res6.numpy(), out_tensor.numpy() * 0.1 + 0.5 * ref, **tol)
    res7 = fg.full_like(out_tensor, math.nan)
    getattr(fg, func)(nan, b1, b2, beta=0, out=res7)
    np.testing.assert_allclose(res7.numpy(), ref, **tol)


def _batched_inputs(num_batches, M, N, O, rng, perm_out):
    def invert(p):
        d = {x: i for i, x in enumerate(p)}
        return tuple(d[i] for i in range(len(p)))

    def make(shape, scale=0.1):
        return fg.tensor(rng.uniform(-1, 1, shape) * scale)

    for k, (p1, p2) in enumerate(itertools.product(itertools.permutations((0, 1, 2)), repeat=2)):
        b1 = make((num_batches, M, N)).permute(*p1).contiguous().permute(*invert(p1))
        b2 = make((num_batches, N, O)).permute(*p2).contiguous().permute(*invert(p2))
        yield b1, b2, perm_out[k % len(perm_out)]
    for s in itertools.product((True, False), repeat=6):
        sh1 = (num_batches if s[0] else 1, M if s[1] else 1, N if s[2] else 1)
        sh2 = (num_batches if s[3] else 1, N if s[4] else 1, O if s[5] else 1)
        yield make(sh1).expand(num_batches, M, N), make(sh2).expand(num_batches, N, O), None
    for z in itertools.product((True, False), repeat=4):
        sh1 = (num_batches if z[0] else 0, M if z[1] else 0, N if z[2] else 0)
        sh2 = (num_batches if z[0] else 0, N if z[2] else 0, O if z[3] else 0)
        yield make(sh1), make(sh2), None


def test_addbmm_and_baddbmm():
    # test_addbmm / test_baddbmm: transposed, broadcast and zero-sized batches, into
    # zero-filled outputs of every memory order
    rng = np.random.default_rng(0)
    for b1, b2, perm in _batched_inputs(2, 16, 17, 18, rng, list(itertools.permutations((0, 1)))):
        ref = (b1.numpy() @ b2.numpy()).sum(0)
        out = fg.zeros(*ref.shape, dtype=fg.float64)
        if perm is not None:
            out = out.permute(*perm).contiguous().permute(*perm)
        _addbmm_baddbmm("addbmm", b1, b2, ref, out)
    for b1, b2, perm in _batched_inputs(3, 12, 8, 10, rng, list(itertools.permutations((0, 1, 2)))):
        ref = b1.numpy() @ b2.numpy()
        out = fg.zeros(*ref.shape, dtype=fg.float64)
        if perm is not None:
            inv = tuple(perm.index(i) for i in range(3))
            out = out.permute(*perm).contiguous().permute(*inv)
        _addbmm_baddbmm("baddbmm", b1, b2, ref, out)


def test_pinverse_and_matrix_power_numpy():
    # test_pinverse / test_matrix_power_non_negative / test_matrix_power_negative
    for sizes in [
        (5, 5),
        (3, 5, 5),
        (3, 7, 5, 5),
        (3, 2),
        (5, 3, 2),
        (7, 5, 3, 2),
        (2, 3),
        (5, 2, 3),
        (7, 5, 2, 3),
        (0, 0),
        (0, 2),
        (2, 0),
        (3, 0, 0),
        (0, 3, 0),
        (0, 0, 3),
    ]:
        M = _rand(*sizes)
        P = fg.pinverse(fg.tensor(M)).numpy()
        if M.size:
            np.testing.assert_allclose(M @ P @ M, M, atol=1e-10)
            np.testing.assert_allclose(P @ M @ P, P, atol=1e-10)
        else:
            assert M.shape == P.shape[:-2] + (P.shape[-1], P.shape[-2])
    for sizes in [(5, 5), (3, 5, 5), (3, 7, 5, 5)]:
        M = fg.tensor(_fullrank(*sizes))
        np.testing.assert_allclose(
            M.pinverse().matmul(M).numpy(), np.broadcast_to(np.eye(5), sizes), atol=1e-10
        )
    for size in [(0, 0), (1, 1), (5, 5), (0, 3, 3), (2, 3, 3)]:
        t = _rand(*size)
        for n in range(8):
            _close(
                fg.linalg.matrix_power(fg.tensor(t), n),
                np.linalg.matrix_power(t, n),
                rtol=1e-10,
                atol=1e-12,
            )
    for size in [(0, 0), (5, 5), (2, 0, 0), (0, 3, 3), (2, 3, 3), (2, 3, 5, 5)]:
        t = _fullrank(*size) if 0 not in size else np.zeros(size)
        for n in range(-7, 0):
            _close(
                fg.linalg.matrix_power(fg.tensor(t), n),
                np.linalg.matrix_power(t, n),
                rtol=1e-8,
                atol=1e-10,
            )


def test_linalg_matrix_exp_boundary_cases():
    expm = fg.linalg.matrix_exp
    with pytest.raises(RuntimeError):
        expm(fg.randn(3, 3).to(fg.int32))
    with pytest.raises(RuntimeError):
        expm(fg.randn(3))
    with pytest.raises(RuntimeError):
        expm(fg.randn(3, 2, 1))
    x = fg.randn(3, 3, 1, 1, dtype=fg.float64)
    _close(expm(x), x.exp().numpy(), rtol=1e-14)


def _good_cond(rng, *n):
    """A diagonally dominant matrix with eigenvalues around 1 (PyTorch's
    gen_good_cond_number_matrices)."""
    eye = np.broadcast_to(np.eye(n[-2], n[-1]), n)
    x = rng.uniform(size=n) / (n[-1] ** 2)
    return (x - x * eye) + eye


_THETAS = {
    "float32": [
        1.192092800768788e-07,
        5.978858893805233e-04,
        5.116619363445086e-02,
        5.800524627688768e-01,
        1.461661507209034e00,
        3.010066362817634e00,
    ],
    "float64": [
        2.220446049250313e-16,
        2.580956802971767e-08,
        3.397168839976962e-04,
        4.991228871115323e-02,
        2.996158913811580e-01,
        1.090863719290036e00,
    ],
}


def _sample_norms(dtype):
    t = _THETAS[dtype]
    return [t[0] / 2] + [0.5 * (t[i] + t[i + 1]) for i in range(len(t) - 1)] + [t[-1] * 2]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linalg_matrix_exp_analytic_batch_and_taylor(dtype):
    # test_linalg_matrix_exp_analytic / _batch / _compare_with_taylor (sizes trimmed):
    # exp(Q D Q^-1) = Q exp(D) Q^-1 at norms around each Pade degree's threshold; batches
    # equal the matrices one at a time; a scaled-and-squared Taylor series agrees
    rng = np.random.default_rng(0)
    expm = fg.linalg.matrix_exp
    assert (expm(fg.zeros(20, 20, dtype=dtype)).numpy() == np.eye(20)).all()

    def norm1(a):
        return np.abs(a).sum(-2).max(-1)

    for n in [(2, 2), (3, 3), (5, 5), (30, 30), (3, 2, 2), (3, 4, 4), (3, 3, 5, 5)]:
        q = _good_cond(rng, *n)
        qinv = np.linalg.inv(q)
        d = rng.standard_normal(n[:-1])
        x = q @ (d[..., :, None] * qinv)
        want = q @ (np.exp(d)[..., :, None] * qinv)
        np.testing.assert_allclose(
            expm(fg.tensor(x, dtype=dtype)).numpy(), want, atol=1e-3 * max(1, np.abs(want).max())
        )
        for s in _sample_norms(dtype):
            xs = x / norm1(x)[..., None, None] * s
            want = q @ (np.exp(d / norm1(x)[..., None] * s)[..., :, None] * qinv)
            np.testing.assert_allclose(expm(fg.tensor(xs, dtype=dtype)).numpy(), want, atol=1e-3)
    for n in [(3, 2, 2), (3, 3, 3), (3, 4, 4), (3, 5, 5), (3, 3, 2, 2), (3, 3, 5, 5)]:
        batch = rng.standard_normal(n)
        flat = batch.reshape(-1, *n[-2:])
        got = expm(fg.tensor(flat, dtype=dtype)).numpy()
        for i, m in enumerate(flat):
            np.testing.assert_allclose(
                got[i],
                expm(fg.tensor(m, dtype=dtype)).numpy(),
                rtol=1e-5 if dtype == "float32" else 1e-12,
            )

    def taylor(a, deg):
        res = term = np.broadcast_to(np.eye(a.shape[-1]), a.shape).copy()
        for i in range(1, deg + 1):
            term = a @ term / i
            res = res + term
        return res

    def scale_square(a):
        fro = np.sqrt((np.abs(a) ** 2).sum())
        if fro < 1.0:
            return taylor(a, 12)
        s = int(np.ceil(np.log2(fro)))
        b = taylor(a / 2**s, 18)
        for _ in range(s):
            b = b @ b
        return b

    for n in [(2, 2), (3, 3), (5, 5), (3, 2, 2), (3, 5, 5), (3, 3, 4, 4)]:
        for s in _sample_norms(dtype):
            x = _good_cond(rng, *n)
            x = x / norm1(x)[..., None, None] * s
            np.testing.assert_allclose(
                expm(fg.tensor(x, dtype=dtype)).numpy(), scale_square(x), atol=1e-2
            )


def _sym(a):
    return a + a.T


def _gram(a):
    return a @ a.T


@pytest.mark.parametrize("matsize", [0, 3, 5])
@pytest.mark.parametrize("batchdims", [(0,), (3,), (5, 3)])
def test_slogdet_numpy(matsize, batchdims):
    # test_slogdet: SPD, singular (all ones), regular and mixed batches against numpy, out=
    rng = np.random.default_rng(0)
    kinds = {
        "pd": lambda: _spd(matsize, matsize, seed=int(rng.integers(1000))),
        "singular": lambda: np.ones((matsize, matsize)),
        "regular": lambda: _fullrank(matsize, matsize, seed=int(rng.integers(1000))),
        "sym": lambda: _sym(rng.standard_normal((matsize, matsize))),
        "psd": lambda: _gram(rng.standard_normal((matsize, 1))),
    }
    for chars in (["pd"], ["singular"], ["regular"], ["sym", "pd", "psd"], ["singular", "regular"]):
        num = int(np.prod(batchdims))
        if num:
            mats = [kinds[chars[i % len(chars)]]() for i in range(num)]
            full = np.stack(mats).reshape(*batchdims, matsize, matsize)
        else:
            full = rng.standard_normal((*batchdims, matsize, matsize))
        sign, logabs = fg.linalg.slogdet(fg.tensor(full))
        ws, wl = np.linalg.slogdet(full)
        _close(sign, ws, atol=1e-8)
        np.testing.assert_allclose(logabs.numpy(), wl, rtol=1e-8, atol=1e-8)
        so, lo = fg.empty_like(sign), fg.empty_like(logabs)
        ans = fg.linalg.slogdet(fg.tensor(full), out=(so, lo))
        assert ans[0] is so and ans[1] is lo
        np.testing.assert_array_equal(lo.numpy(), logabs.numpy())


def test_slogdet_errors_and_warnings_out():
    with pytest.raises(RuntimeError):
        fg.linalg.slogdet(fg.randn(2, 3))
    with pytest.raises(RuntimeError):
        fg.linalg.slogdet(fg.randn(2))
    with pytest.raises(RuntimeError):
        fg.linalg.slogdet(fg.randn(2, 2, dtype=fg.bfloat16))
    a = fg.randn(2, 3, 3, dtype=fg.float64)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fg.linalg.slogdet(a, out=(fg.empty(1, dtype=fg.float64), fg.empty(1, dtype=fg.float64)))
    assert any("An output with one or more elements was resized" in str(x.message) for x in w)
    with pytest.raises(RuntimeError):
        fg.linalg.slogdet(a, out=(fg.empty(0, dtype=fg.int32), fg.empty(0, dtype=fg.int32)))
    with pytest.raises(RuntimeError):
        fg.linalg.slogdet(a, out=(fg.empty(0, dtype=fg.float64), fg.empty(0, dtype=fg.int32)))


@pytest.mark.parametrize("n", [0, 3, 5])
@pytest.mark.parametrize("batch", [(), (0,), (3,), (2, 2)])
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("contiguous", [True, False])
def test_cholesky_inverse_numpy(n, batch, upper, contiguous):
    # test_cholesky_inverse: inverse(A) from A's factor (also transposed in memory)
    A = fg.tensor(_spd(*batch, n, n) if n and 0 not in batch else np.zeros((*batch, n, n)))
    if A.numel() and not contiguous:
        A = A.mT
        assert not A.is_contiguous()
    L = fg.linalg.cholesky(A)
    L = L.mT if upper else L
    want = np.linalg.inv(A.numpy()) if A.numel() else np.zeros(A.shape)
    _close(fg.cholesky_inverse(L, upper), want, rtol=1e-10, atol=1e-12)


def test_cholesky_inverse_reads_one_triangle_and_out():
    # the other triangle of the factor is not read (values, errors), gradients as torch's
    a = _rand(2, 4, 4) + 3 * np.eye(4)
    for upper in (False, True):
        _both(lambda L, x, up=upper: L.cholesky_inverse(x, upper=up), a)
        _both(lambda L, x, up=upper: L.cholesky_solve(L.eye(4, dtype=L.float64), x, upper=up), a)
    A = _spd(2, 3, 3)
    L = fg.linalg.cholesky(fg.tensor(A))
    out = fg.empty_like(L).mT.contiguous().mT  # column-major
    assert fg.cholesky_inverse(L, out=out) is out
    _close(out, np.linalg.inv(A), rtol=1e-10)
    out = fg.empty_like(L)
    fg.cholesky_inverse(L, out=out)
    _close(out, np.linalg.inv(A), rtol=1e-10)


def test_cholesky_inverse_errors_and_warnings():
    with pytest.raises(RuntimeError):
        fg.cholesky_inverse(fg.randn(2, dtype=fg.float64))
    with pytest.raises(RuntimeError):
        fg.cholesky_inverse(fg.randn(2, 3, dtype=fg.float64))
    a = fg.tensor(_rand(3, 3) + 3 * np.eye(3))
    with pytest.warns(UserWarning, match="An output with one or more elements was resized"):
        fg.cholesky_inverse(a, out=fg.empty(2, 3, dtype=fg.float64))
    with pytest.raises(RuntimeError):
        fg.cholesky_inverse(a, out=fg.empty(3, 3, dtype=fg.int32))
    b = _rand(3, 3)
    b[1, 1] = 0
    for L in (fg, torch):
        with pytest.raises(RuntimeError, match="cholesky_inverse: The diagonal element 2 is zero"):
            L.cholesky_inverse(L.tensor(b))


@pytest.mark.parametrize("matsize", [3, 5])
@pytest.mark.parametrize("batchdims", [(3,), (5, 3)])
def test_det_logdet_slogdet_batched(matsize, batchdims):
    # test_det_logdet_slogdet_batched: the batched results equal the per-matrix ones
    rng = np.random.default_rng(0)
    scale = math.factorial(matsize - 1) ** (-1.0 / (2 * matsize))
    kinds = {
        "sym": lambda: _sym(rng.standard_normal((matsize, matsize))),
        "sym_psd": lambda: _gram(rng.standard_normal((matsize, matsize - 1))),
        "sym_pd": lambda: _spd(matsize, matsize, seed=int(rng.integers(1000))),
        "sing": lambda: np.ones((matsize, matsize)),
        "non_sing": lambda: _fullrank(matsize, matsize, seed=int(rng.integers(1000))),
    }
    for chars in (
        ["sym_pd"],
        ["sing"],
        ["non_sing"],
        ["sym", "sym_pd", "sym_psd"],
        ["sing", "non_sing"],
    ):
        num = int(np.prod(batchdims))
        full = (
            np.stack([kinds[chars[i % len(chars)]]() for i in range(num)]).reshape(
                *batchdims, matsize, matsize
            )
            * scale
        )
        t = fg.tensor(full)
        for fn in (fg.det, fg.logdet, fg.slogdet, fg.linalg.slogdet):
            got = fn(t)
            each = [fn(fg.tensor(full[idx])) for idx in itertools.product(*map(range, batchdims))]
            if fn in (fg.slogdet, fg.linalg.slogdet):
                np.testing.assert_array_equal(
                    got[0].numpy(), np.array([e[0].numpy() for e in each]).reshape(batchdims)
                )
                np.testing.assert_allclose(
                    got[1].numpy(),
                    np.array([e[1].numpy() for e in each]).reshape(batchdims),
                    rtol=1e-12,
                )
            else:
                np.testing.assert_allclose(
                    got.numpy(),
                    np.array([e.numpy() for e in each]).reshape(batchdims),
                    rtol=1e-12,
                    equal_nan=True,
                )


def _check_single_det(M, target, desc):
    sdet_t, logabs_t = target
    want = sdet_t * math.exp(logabs_t)
    det, logdet = M.det(), M.logdet()
    sdet, logabs = M.slogdet()
    lsdet, llogabs = fg.linalg.slogdet(M)
    assert abs(float(det) - want) <= 1e-7, desc
    assert abs(float(sdet) * math.exp(float(logabs)) - want) <= 1e-7, desc
    assert abs(float(lsdet) * math.exp(float(llogabs)) - want) <= 1e-7, desc
    if float(sdet) < 0:
        assert math.isnan(float(logdet)), desc
    else:
        assert abs(math.exp(float(logdet)) - math.exp(logabs_t)) <= 1e-7, desc


def test_det_logdet_slogdet_special_matrices():
    # test_det_logdet_slogdet (the sizes trimmed): identity, orthogonal, scaled, repeated and
    # exchanged rows/columns, symmetric (psd), non-contiguous and singular matrices
    rng = np.random.default_rng(0)
    _check_single_det(fg.eye(5, dtype=fg.float64), (1.0, 0.0), "identity")
    q, _ = np.linalg.qr(rng.standard_normal((50, 50)))
    _check_single_det(fg.tensor(q), np.linalg.slogdet(q), "orthogonal")

    def test(M):
        s, la = np.linalg.slogdet(M)
        t = fg.tensor(M)
        _check_single_det(t, (s, la), "basic")
        if math.exp(la) >= 1e-6:
            Mi = np.linalg.inv(M)
            _check_single_det(fg.tensor(Mi), np.linalg.slogdet(Mi), "inverse")
        _check_single_det(t.mT, (s, la), "transpose")
        for x in (0, 2, 4):
            for scale in (-2, -0.1, 0, 10):
                if scale > 0:
                    target = (s, la + math.log(scale))
                elif scale == 0:
                    target = (0.0, -INF)
                else:
                    target = (-s, la + math.log(-scale))
                for axis in (0, 1):
                    Mc = M.copy()
                    if axis == 0:
                        Mc[:, x] *= scale
                    else:
                        Mc[x, :] *= scale
                    _check_single_det(fg.tensor(Mc), target, "scale")
        for x1, x2 in ((0, 3), (4, 1), (3, 2)):
            for axis in (0, 1):
                Mc = M.copy()
                if axis == 0:
                    Mc[:, x2] = Mc[:, x1]
                else:
                    Mc[x2, :] = Mc[x1, :]
                _check_single_det(fg.tensor(Mc), (0.0, -INF), "repeated")
            for s1, s2 in ((0.3, -1), (0, 2), (10, 0.1)):
                ds = s1 * s2 * -1
                target = (
                    (s, la + math.log(ds))
                    if ds > 0
                    else (0.0, -INF)
                    if ds == 0
                    else (-s, la + math.log(-ds))
                )
                Mc = M.copy()
                tmp = Mc[:, x1] * s1
                Mc[:, x1] += Mc[:, x2] * s2
                Mc[:, x2] = tmp
                _check_single_det(fg.tensor(Mc), target, "exchanging")

    for n in (5, 10, 25):
        scale = math.factorial(n - 1) ** (-1.0 / (2 * n))
        test(rng.standard_normal((n, n)) * scale)
        r = rng.standard_normal((n, n)) * scale
        test(r @ r.T)
        r = rng.standard_normal((n, n)) * scale
        test(r @ r.T + np.eye(n) * 1e-6)
        test(_sym(rng.standard_normal((n, n)) * scale / 2))
        test((rng.standard_normal((n, n, n + 1)) * scale)[:, 2, 1:])
        u, sv, vh = np.linalg.svd(rng.standard_normal((n, n)) * scale)
        sv[0] *= -1
        sv[-1] = 0
        test((u * sv) @ vh)
    u, sv, vh = np.linalg.svd(rng.standard_normal((100, 100)))
    test((u * np.full(100, 1.0 / (100 * 100))) @ vh)


def _broadcastable_dims(rng, dims_full):
    """PyTorch's _select_broadcastable_dims: a shape that broadcasts to ``dims_full``."""
    ndims = len(dims_full)
    smaller = int(rng.integers(1, ndims + 1))
    small = []
    for i in range(ndims - 1, -1, -1):
        j = int(rng.integers(1, 4))
        ds = 1 if j == 3 else dims_full[i]
        if len(small) < smaller:
            small = [ds] + small
    return small


def test_broadcast_fused_matmul():
    # test_broadcast_fused_matmul: a broadcast input gives what its expanded form gives
    rng = np.random.default_rng(0)
    for _ in range(5):
        for fn in ("baddbmm", "addbmm", "addmm", "addmv", "addr"):
            b, n, m, p = (int(v) for v in rng.integers(1, 9, 4))
            full, d1, d2 = {
                "baddbmm": ([b, n, p], [b, n, m], [b, m, p]),
                "addbmm": ([n, p], [b, n, m], [b, m, p]),
                "addmm": ([n, p], [n, m], [m, p]),
                "addmv": ([n], [n, m], [m]),
                "addr": ([n, m], [n], [m]),
            }[fn]
            t0 = fg.tensor(rng.standard_normal(_broadcastable_dims(rng, full)))
            t1, t2 = fg.tensor(rng.standard_normal(d1)), fg.tensor(rng.standard_normal(d2))
            f = getattr(fg, fn)
            np.testing.assert_allclose(
                f(t0, t1, t2).numpy(), f(t0.expand(*full), t1, t2).numpy(), rtol=1e-12
            )


def test_broadcast_batched_matmul():
    # test_broadcast_batched_matmul: matmul of broadcast batches (and of 1-D operands)
    # equals that of their expanded forms, bmm of the flattened batch, and out=
    rng = np.random.default_rng(0)
    for _ in range(4):
        n, m, p = (int(v) for v in rng.integers(1, 9, 3))
        full_batch = [int(v) for v in rng.integers(1, 4, int(rng.integers(1, 4)))]
        small_batch = _broadcastable_dims(rng, full_batch)
        for full_lhs, one_dim in itertools.product((True, False), repeat=2):
            if not one_dim:
                lhs_dims, rhs_dims, res_dims = [n, m], [m, p], [n, p]
            else:
                lhs_dims = [n, m] if full_lhs else [m]
                rhs_dims = [m, p] if not full_lhs else [m]
                res_dims = [n] if full_lhs else [p]
            lhs_mat = lhs_dims if len(lhs_dims) != 1 else [1, m]
            rhs_mat = rhs_dims if len(rhs_dims) != 1 else [m, 1]
            full_mat = lhs_mat if full_lhs else rhs_mat
            dim0_dims = rhs_dims if full_lhs else lhs_dims
            small = fg.tensor(rng.standard_normal(small_batch + (rhs_mat if full_lhs else lhs_mat)))
            dim0 = fg.tensor(rng.standard_normal(dim0_dims))
            full = fg.tensor(rng.standard_normal(full_batch + full_mat))
            if not one_dim:
                lhs_ts, rhs_ts = ((full,), (small, dim0)) if full_lhs else ((small, dim0), (full,))
            else:
                lhs_ts, rhs_ts = ((full,), (dim0,)) if full_lhs else ((dim0,), (full,))

            def squeeze(l, r, res, lhs_dims=lhs_dims, rhs_dims=rhs_dims):
                if len(lhs_dims) == 1 and l.ndim != 1:
                    return res.squeeze(-2)
                if len(rhs_dims) == 1 and r.ndim != 1:
                    return res.squeeze(-1)
                return res

            for lhs in lhs_ts:
                lhs_e = lhs.expand(*full_batch, *lhs_mat)
                for rhs in rhs_ts:
                    rhs_e = (rhs if len(rhs_dims) != 1 else rhs.unsqueeze(-1)).expand(
                        *full_batch, *rhs_mat
                    )
                    truth = squeeze(lhs_e, rhs_e, lhs_e.matmul(rhs_e)).numpy()
                    for l_, r_ in itertools.product((lhs, lhs_e), (rhs, rhs_e)):
                        np.testing.assert_allclose(
                            squeeze(l_, r_, l_.matmul(r_)).numpy(), truth, rtol=1e-12
                        )
                        res = squeeze(l_, r_, fg.matmul(l_, r_))
                        np.testing.assert_allclose(res.numpy(), truth, rtol=1e-12)
                        out = fg.zeros_like(fg.matmul(l_, r_))
                        fg.matmul(l_, r_, out=out)
                        np.testing.assert_allclose(squeeze(l_, r_, out).numpy(), truth, rtol=1e-12)
                bmm = fg.bmm(
                    lhs_e.contiguous().view(-1, *lhs_mat), rhs_e.contiguous().view(-1, *rhs_mat)
                )
                np.testing.assert_allclose(
                    truth.reshape(-1, *res_dims), bmm.numpy().reshape(-1, *res_dims), rtol=1e-12
                )


def test_torch_lu_solve():
    # test_lu_solve / _batched / _batched_broadcasting / _out_errors_and_warnings (the older
    # torch.lu_solve(b, LU_data, LU_pivots) and Tensor.lu_solve)
    for k, n in zip((2, 3, 5), (3, 5, 7)):
        A, b = _fullrank(n, n), _rand(n, k, seed=1)
        LU, piv, info = fg.lu(fg.tensor(A), get_infos=True, pivot=True)
        assert not info.numpy().any()
        np.testing.assert_allclose(A @ fg.lu_solve(fg.tensor(b), LU, piv).numpy(), b, atol=1e-10)
    for bs in (1, 3, 4):
        A, b = _fullrank(bs, 5, 5), _rand(bs, 5, 10, seed=1)
        LU, piv = fg.lu(fg.tensor(A))
        x = fg.lu_solve(fg.tensor(b), LU, piv)
        each = np.stack([fg.lu_solve(fg.tensor(b[i]), LU[i], piv[i]).numpy() for i in range(bs)])
        np.testing.assert_allclose(x.numpy(), each, rtol=1e-12)
        np.testing.assert_allclose(A @ x.numpy(), b, atol=1e-10)
    b = fg.randn(3, 0, 3, dtype=fg.float64)
    LU, piv = fg.lu(fg.randn(3, 0, 0, dtype=fg.float64))
    assert b.lu_solve(LU, piv).shape == (3, 0, 3)
    for a_dims, b_dims in (
        ((2, 1, 3, 4, 4), (2, 1, 3, 4, 6)),
        ((2, 1, 3, 4, 4), (4, 6)),
        ((4, 4), (2, 1, 3, 4, 2)),
        ((1, 3, 1, 4, 4), (2, 1, 3, 4, 5)),
    ):
        A, b = _fullrank(*a_dims), _rand(*b_dims, seed=1)
        LU, piv = fg.lu(fg.tensor(A), pivot=True)
        _close(fg.lu_solve(fg.tensor(b), LU, piv), np.linalg.solve(A, b), rtol=1e-9, atol=1e-10)
    LU, piv = fg.lu(fg.eye(2, dtype=fg.float64), pivot=True)
    b = fg.randn(2, 1, dtype=fg.float64)
    with pytest.raises(RuntimeError):
        fg.lu_solve(b, LU, piv, out=fg.empty(0, dtype=fg.int32))
    with pytest.warns(UserWarning, match="An output with one or more elements was resized"):
        fg.lu_solve(b, LU, piv, out=fg.empty(1, dtype=fg.float64))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nuclear_norm_out(dtype):
    # test_nuclear_norm_out (torch.nuclear_norm, added to ferrograd on top of matrix_norm)
    for keepdim in (False, True):
        for size, dim in (
            ((25, 25), None),
            ((25, 25), (0, 1)),
            ((25, 25), (1, 0)),
            ((25, 25, 25), (2, 0)),
            ((25, 25, 25), (0, 1)),
        ):
            x = fg.tensor(_rand(*size), dtype=dtype)
            out = fg.empty(0, dtype=dtype)
            if dim is None:
                r = fg.nuclear_norm(x, keepdim=keepdim)
                fg.nuclear_norm(x, keepdim=keepdim, out=out)
            else:
                r = fg.nuclear_norm(x, keepdim=keepdim, dim=dim)
                fg.nuclear_norm(x, keepdim=keepdim, dim=dim, out=out)
            np.testing.assert_array_equal(r.numpy(), out.numpy())
            want = np.linalg.norm(
                x.numpy().astype(np.float64), "nuc", axis=dim or (0, 1), keepdims=keepdim
            )
            np.testing.assert_allclose(r.numpy(), want, rtol=1e-5 if dtype == "float32" else 1e-10)
    with pytest.raises(RuntimeError):
        fg.nuclear_norm(fg.ones(2, 2, 2))


@pytest.mark.parametrize("batch", [(), (0,), (2,), (2, 1)])
def test_geqrf(batch):
    # test_geqrf (torch.geqrf, added to ferrograd: numpy's qr mode='raw'), with orgqr giving Q
    for m, n in itertools.product((5, 2, 0), repeat=2):
        A = _rand(*batch, m, n)
        a, tau = fg.geqrf(fg.tensor(A))
        flat = A.reshape(int(np.prod(batch)), m, n)
        want_a = np.zeros_like(flat)
        want_tau = np.zeros((flat.shape[0], min(m, n)))
        for i, x in enumerate(flat):
            if x.size:
                h, t = np.linalg.qr(x, mode="raw")
                want_a[i], want_tau[i] = h.T, t[: min(m, n)]
        _close(a, want_a.reshape(A.shape), rtol=1e-12, atol=1e-14)
        _close(tau, want_tau.reshape(*batch, min(m, n)), rtol=1e-12, atol=1e-14)
        t = torch.geqrf(torch.tensor(A))
        _close(a, t.a, rtol=1e-10, atol=1e-12)
        if m >= n and A.size:
            _close(fg.orgqr(a, tau), fg.linalg.qr(fg.tensor(A)).Q.numpy(), rtol=1e-10, atol=1e-12)
    x = fg.tensor(_rand(3, 3), requires_grad=True)
    with pytest.raises(RuntimeError):
        fg.geqrf(x)


def test_lapack_empty():
    f = lambda fn, *shapes: fn(*(fg.randn(*s) for s in shapes))
    assert f(fg.inverse, (0, 0)).shape == (0, 0)
    assert f(fg.pinverse, (0, 5)).shape == (5, 0)
    assert f(fg.pinverse, (5, 0)).shape == (0, 5)
    assert f(fg.pinverse, (0, 0)).shape == (0, 0)
    assert float(f(fg.det, (0, 0))) == 1.0
    assert float(f(fg.logdet, (0, 0))) == 0.0
    s, la = f(fg.slogdet, (0, 0))
    assert (float(s), float(la)) == (1.0, 0.0)
    q, r = fg.qr(fg.randn(3, 0), True)
    assert [q.shape, r.shape] == [(3, 0), (0, 0)]
    q, r = fg.qr(fg.randn(0, 3), True)
    assert [q.shape, r.shape] == [(0, 0), (0, 3)]
    q, r = fg.qr(fg.randn(3, 0), False)
    assert [q.shape, r.shape] == [(3, 3), (3, 0)]


def test_tensordot():
    a = fg.arange(60.0).reshape(3, 4, 5)
    b = fg.arange(24.0).reshape(4, 3, 2)
    want = np.tensordot(a.numpy(), b.numpy(), axes=([1, 0], [0, 1]))
    np.testing.assert_allclose(fg.tensordot(a, b, dims=([1, 0], [0, 1])).numpy(), want)
    out = fg.zeros(5, 2)
    fg.tensordot(a, b, dims=([1, 0], [0, 1]), out=out)
    np.testing.assert_allclose(out.numpy(), want)
    a, b = fg.randn(3, 4, 5, dtype=fg.float64), fg.randn(4, 5, 6, dtype=fg.float64)
    np.testing.assert_allclose(
        fg.tensordot(a, b, dims=2).numpy(), np.tensordot(a.numpy(), b.numpy(), axes=2), rtol=1e-12
    )
    a, b = fg.randn(4, 3, dtype=fg.float64), fg.randn(3, 4, dtype=fg.float64)
    np.testing.assert_allclose(
        fg.tensordot(a, b, dims=0).numpy(), np.tensordot(a.numpy(), b.numpy(), axes=0), rtol=1e-12
    )
