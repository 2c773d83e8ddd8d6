"""fg.linalg's solves and decompositions: values against numpy, gradients against finite
differences in float64 (and against PyTorch where it is installed), second order, errors."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from conftest import check_grad


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _spd(a: np.ndarray) -> np.ndarray:
    n = a.shape[-1]
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _flat(*ts: fg.Tensor) -> fg.Tensor:
    return fg.cat([t.reshape(-1) for t in ts])


def _svd_signfree(a: fg.Tensor, full_matrices: bool = False) -> fg.Tensor:
    """Singular values and the squared entries of U and Vh: a loss the vectors' signs do not
    change."""
    U, S, Vh = fg.linalg.svd(a, full_matrices=full_matrices)
    return _flat(S, U * U, Vh * Vh)


def _eigh_signfree(a: fg.Tensor, uplo: str = "L") -> fg.Tensor:
    w, V = fg.linalg.eigh(a, uplo)
    return _flat(w, V * V)


# ---------------------------------------------------------------------------- values


def test_values_match_numpy_on_batches():
    rng = _rng()
    A = rng.standard_normal((2, 3, 4, 4))
    B = rng.standard_normal((2, 3, 4, 2))
    t = fg.tensor
    np.testing.assert_allclose(fg.linalg.inv(t(A)).numpy(), np.linalg.inv(A), rtol=1e-12)
    np.testing.assert_allclose(fg.linalg.det(t(A)).numpy(), np.linalg.det(A), rtol=1e-12)
    sign, la = fg.linalg.slogdet(t(A))
    ns, nla = np.linalg.slogdet(A)
    np.testing.assert_array_equal(sign.numpy(), ns)
    np.testing.assert_allclose(la.numpy(), nla, rtol=1e-12)
    np.testing.assert_allclose(
        fg.linalg.solve(t(A), t(B)).numpy(), np.linalg.solve(A, B), rtol=1e-10
    )
    S = _spd(A)
    L = fg.linalg.cholesky(t(S)).numpy()
    np.testing.assert_allclose(L, np.linalg.cholesky(S), rtol=1e-12)
    np.testing.assert_allclose(fg.linalg.cholesky(t(S), upper=True).numpy(), np.swapaxes(L, -1, -2))
    w, V = fg.linalg.eigh(t(S))
    np.testing.assert_allclose(w.numpy(), np.linalg.eigvalsh(S), rtol=1e-12)
    np.testing.assert_allclose(
        (V @ fg.diag_embed(w) @ V.mT).numpy()
        if hasattr(fg, "diag_embed")
        else np.einsum("...ij,...j,...kj->...ik", V.numpy(), w.numpy(), V.numpy()),
        S,
        atol=1e-10,
    )
    M = rng.standard_normal((3, 5, 3))
    U, s, Vh = fg.linalg.svd(t(M), full_matrices=False)
    np.testing.assert_allclose(s.numpy(), np.linalg.svd(M, compute_uv=False), rtol=1e-12)
    np.testing.assert_allclose(
        np.einsum("...ij,...j,...jk->...ik", U.numpy(), s.numpy(), Vh.numpy()), M, atol=1e-12
    )
    Uf, _, Vhf = fg.linalg.svd(t(M))
    assert Uf.shape == (3, 5, 5) and Vhf.shape == (3, 3, 3)
    np.testing.assert_allclose(
        Uf.numpy() @ np.swapaxes(Uf.numpy(), -1, -2),
        np.broadcast_to(np.eye(5), (3, 5, 5)),
        atol=1e-12,
    )
    Q, R = fg.linalg.qr(t(M))
    np.testing.assert_allclose((Q @ R).numpy(), M, atol=1e-12)
    np.testing.assert_allclose(np.tril(R.numpy(), -1), 0)
    np.testing.assert_allclose(fg.linalg.pinv(t(M)).numpy(), np.linalg.pinv(M), atol=1e-12)
    np.testing.assert_array_equal(fg.linalg.matrix_rank(t(M)).numpy(), np.linalg.matrix_rank(M))
    np.testing.assert_allclose(
        fg.linalg.matrix_power(t(A), 5).numpy(), np.linalg.matrix_power(A, 5), rtol=1e-10
    )
    np.testing.assert_allclose(
        fg.linalg.matrix_power(t(A), -2).numpy(), np.linalg.matrix_power(A, -2), rtol=1e-8
    )
    np.testing.assert_allclose(
        fg.linalg.matrix_power(t(A), 0).numpy(), np.broadcast_to(np.eye(4), A.shape)
    )
    for ord in ("nuc", 2, -2):
        np.testing.assert_allclose(
            fg.linalg.matrix_norm(t(M), ord).numpy(),
            np.linalg.norm(M, ord, axis=(-2, -1)),
            rtol=1e-12,
        )
    np.testing.assert_allclose(fg.linalg.cond(t(A)).numpy(), np.linalg.cond(A), rtol=1e-10)


def test_solve_vectors_left_false_and_broadcast_batches():
    rng = _rng(1)
    A = rng.standard_normal((3, 4, 4))
    b = rng.standard_normal((3, 4))
    x = fg.linalg.solve(fg.tensor(A), fg.tensor(b))
    assert x.shape == (3, 4)
    np.testing.assert_allclose(np.einsum("bij,bj->bi", A, x.numpy()), b, atol=1e-10)
    B = rng.standard_normal((2, 4))  # X @ A = B for every A in the batch
    X = fg.linalg.solve(fg.tensor(A), fg.tensor(B), left=False)
    assert X.shape == (3, 2, 4)
    np.testing.assert_allclose(X.numpy() @ A, np.broadcast_to(B, (3, 2, 4)), atol=1e-10)
    A1 = rng.standard_normal((4, 4))  # one matrix, a batch of right-hand sides
    Bb = rng.standard_normal((5, 4, 3))
    np.testing.assert_allclose(
        fg.linalg.solve(fg.tensor(A1), fg.tensor(Bb)).numpy(), np.linalg.solve(A1, Bb), atol=1e-10
    )


def test_triangular_solves_and_multi_dot():
    rng = _rng(2)
    A = rng.standard_normal((4, 4)) + 4 * np.eye(4)
    B = rng.standard_normal((4, 3))
    X = fg.linalg.solve_triangular(fg.tensor(A), fg.tensor(B), upper=True)
    np.testing.assert_allclose(np.triu(A) @ X.numpy(), B, atol=1e-10)
    X = fg.linalg.solve_triangular(fg.tensor(A), fg.tensor(B), upper=False, unitriangular=True)
    Tu = np.tril(A, -1) + np.eye(4)
    np.testing.assert_allclose(Tu @ X.numpy(), B, atol=1e-10)
    ms = [rng.standard_normal(s) for s in ((5,), (5, 30), (30, 2), (2, 7))]
    np.testing.assert_allclose(
        fg.linalg.multi_dot([fg.tensor(m) for m in ms]).numpy(), np.linalg.multi_dot(ms), atol=1e-10
    )
    S = _spd(rng.standard_normal((4, 4)))
    L = np.linalg.cholesky(S)
    np.testing.assert_allclose(
        fg.cholesky_solve(fg.tensor(B), fg.tensor(L)).numpy(), np.linalg.solve(S, B), atol=1e-10
    )
    np.testing.assert_allclose(
        fg.cholesky_inverse(fg.tensor(L)).numpy(), np.linalg.inv(S), atol=1e-10
    )


def test_lstsq_minimum_norm_and_residuals():
    rng = _rng(3)
    A = rng.standard_normal((6, 3))
    B = rng.standard_normal((6, 2))
    # (numpy's driver is gelsd; PyTorch's default, gelsy, leaves the residuals empty)
    r = fg.linalg.lstsq(fg.tensor(A), fg.tensor(B), driver="gelsd")
    sol, res, rank, _ = np.linalg.lstsq(A, B, rcond=None)
    np.testing.assert_allclose(r.solution.numpy(), sol, atol=1e-10)
    np.testing.assert_allclose(r.residuals.numpy(), res, atol=1e-10)
    assert int(r.rank.item()) == rank == 3


# ----------------------------------------------------------------------- gradients (FD)


@pytest.mark.parametrize(
    "name, fn, make",
    [
        ("inv", lambda a: fg.linalg.inv(a), lambda r: r.standard_normal((2, 3, 3)) + 3 * np.eye(3)),
        ("det", lambda a: fg.linalg.det(a), lambda r: r.standard_normal((2, 3, 3))),
        ("logabsdet", lambda a: fg.linalg.slogdet(a)[1], lambda r: r.standard_normal((3, 3))),
        ("logdet", lambda a: fg.logdet(a), lambda r: _spd(r.standard_normal((3, 3)))),
        ("pinv", lambda a: fg.linalg.pinv(a), lambda r: r.standard_normal((4, 3))),
        ("pinv wide", lambda a: fg.linalg.pinv(a), lambda r: r.standard_normal((2, 4))),
        ("svdvals", lambda a: fg.linalg.svdvals(a), lambda r: r.standard_normal((2, 4, 3))),
        (
            "nuclear norm",
            lambda a: fg.linalg.matrix_norm(a, "nuc"),
            lambda r: r.standard_normal((3, 4)),
        ),
        (
            "spectral norm",
            lambda a: fg.linalg.matrix_norm(a, 2),
            lambda r: r.standard_normal((3, 4)),
        ),
        (
            "matrix_power -3",
            lambda a: fg.linalg.matrix_power(a, -3),
            lambda r: r.standard_normal((3, 3)) + 3 * np.eye(3),
        ),
        (
            "svd (sign-free)",
            _svd_signfree,
            lambda r: r.standard_normal((4, 3)),
        ),
        (
            "svd wide (sign-free)",
            _svd_signfree,
            lambda r: r.standard_normal((2, 3, 5)),
        ),
        (
            "svd full square",
            lambda a: _svd_signfree(a, True),
            lambda r: r.standard_normal((3, 3)),
        ),
        ("qr", lambda a: _flat(*fg.linalg.qr(a)), lambda r: r.standard_normal((2, 5, 3))),
        ("qr square", lambda a: _flat(*fg.linalg.qr(a)), lambda r: r.standard_normal((3, 3))),
    ],
)
def test_gradients_match_finite_differences(name, fn, make):
    check_grad(fn, [make(_rng(5))], rtol=1e-5, atol=1e-6)


def test_solve_gradients_with_broadcast_and_vectors():
    rng = _rng(6)
    A = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    check_grad(lambda a, b: fg.linalg.solve(a, b), [A, rng.standard_normal((2, 3, 2))])
    check_grad(
        lambda a, b: fg.linalg.solve(a, b), [np.stack([A, A.T]), rng.standard_normal((2, 3))]
    )
    check_grad(lambda a, b: fg.linalg.solve(a, b, left=False), [A, rng.standard_normal((4, 3))])
    check_grad(
        lambda a, b: fg.linalg.solve_triangular(a, b, upper=True),
        [A, rng.standard_normal((3, 2))],
    )


def test_symmetric_input_gradients_through_a_symmetric_parametrisation():
    # cholesky and eigh read one triangle; through S = X + X^T (+ nI) the gradient is defined
    rng = _rng(7)
    X = rng.standard_normal((2, 4, 4))

    def sym(x):
        return x + x.mT + fg.tensor(8 * np.eye(4))

    check_grad(lambda x: fg.linalg.cholesky(sym(x)), [X])
    check_grad(lambda x: fg.linalg.cholesky(sym(x), upper=True), [X])
    check_grad(lambda x: fg.linalg.eigvalsh(sym(x)), [X])
    check_grad(lambda x: _eigh_signfree(sym(x)), [X])
    check_grad(lambda x: _eigh_signfree(sym(x), "U"), [X])


def test_second_order_through_nested_managers():
    rng = _rng(8)
    A0 = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    W = rng.standard_normal((3, 3))

    def grad_of(fn, a_np):
        a = fg.tensor(a_np)
        inner = fg.GradManager().attach([a])
        with inner:
            inner.backward((fn(a) * fg.tensor(W)).sum())
        return a.grad

    for fn in (fg.linalg.inv, lambda a: fg.linalg.slogdet(a)[1], fg.linalg.svdvals, fg.linalg.det):
        a = fg.tensor(A0)
        outer = fg.GradManager().attach([a])
        with outer:
            inner = fg.GradManager().attach([a])
            with inner:
                y = (fn(a) * fg.tensor(W)).sum()
                (g,) = [fg.grad(y, a, create_graph=True)]
            outer.backward((g * g).sum())
        hv = a.grad.numpy()

        def f(x, fn=fn):
            gg = grad_of(fn, x).numpy()
            return float((gg * gg).sum())

        eps = 1e-5
        fd = np.zeros_like(A0)
        for i in np.ndindex(A0.shape):
            p, m = A0.copy(), A0.copy()
            p[i] += eps
            m[i] -= eps
            fd[i] = (f(p) - f(m)) / (2 * eps)
        np.testing.assert_allclose(hv, fd, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------- against torch


def test_gradients_match_pytorch():
    torch = pytest.importorskip("torch")
    rng = _rng(9)
    A0 = rng.standard_normal((2, 4, 4))
    S0 = _spd(A0)
    M0 = rng.standard_normal((5, 3))
    cases = [
        (lambda m, a: m.linalg.inv(a), A0),
        (lambda m, a: m.linalg.det(a), A0),
        (lambda m, a: m.linalg.slogdet(a)[1], A0),
        (lambda m, a: m.linalg.cholesky(a), S0),
        (lambda m, a: m.linalg.cholesky(a, upper=True), S0),
        (lambda m, a: m.linalg.eigh(a)[0], S0),
        (lambda m, a: m.linalg.eigh(a)[1] ** 2, S0),
        (lambda m, a: m.linalg.svdvals(a), M0),
        (lambda m, a: m.linalg.svd(a, full_matrices=False)[0] ** 2, M0),
        (lambda m, a: m.linalg.svd(a, full_matrices=False)[2] ** 2, M0),
        (lambda m, a: m.linalg.svd(a)[1], M0),
        (lambda m, a: m.linalg.qr(a)[0], M0),
        (lambda m, a: m.linalg.qr(a)[1], M0),
        (lambda m, a: m.linalg.pinv(a), M0),
        (lambda m, a: m.linalg.matrix_norm(a, "nuc"), M0),
        (lambda m, a: m.linalg.solve(a, a[..., :2] * 2 + 1), A0),
        (lambda m, a: m.linalg.matrix_power(a, 3), A0),
        (lambda m, a: m.logdet(a), S0),
    ]
    for i, (fn, x0) in enumerate(cases):
        ta = torch.tensor(x0, requires_grad=True)
        ty = fn(torch, ta)
        w = np.random.default_rng(i).standard_normal(tuple(ty.shape))
        (ty * torch.tensor(w)).sum().backward()
        fa = fg.tensor(x0).requires_grad_()
        fy = fn(fg, fa)
        np.testing.assert_allclose(
            fy.detach().numpy(), ty.detach().numpy(), atol=1e-10, err_msg=f"case {i}"
        )
        (fy * fg.tensor(w)).sum().backward()
        np.testing.assert_allclose(
            fa.grad.numpy(), ta.grad.numpy(), rtol=1e-9, atol=1e-10, err_msg=f"case {i}"
        )


# ---------------------------------------------------------------------------- errors


def test_bad_input_raises_clear_errors_and_the_process_goes_on():
    with pytest.raises(fg.linalg.LinAlgError, match="inv"):
        fg.linalg.inv(fg.tensor(np.ones((3, 3))))
    with pytest.raises(fg.linalg.LinAlgError, match="solve"):
        fg.linalg.solve(fg.tensor(np.zeros((2, 2))), fg.tensor(np.ones((2, 1))))
    with pytest.raises(fg.linalg.LinAlgError, match="positive-definite"):
        fg.linalg.cholesky(fg.tensor(-np.eye(3)))
    with pytest.raises(fg.ShapeError, match=r"square.*\[2, 3\]"):
        fg.linalg.inv(fg.tensor(np.ones((2, 3))))
    with pytest.raises(fg.ShapeError, match="matrix"):
        fg.linalg.det(fg.tensor(np.ones(3)))
    with pytest.raises(fg.DTypeError, match="int64"):
        fg.linalg.inv(fg.tensor(np.eye(2, dtype=np.int64)))
    with pytest.raises(fg.ShapeError, match="rows"):
        fg.linalg.solve(fg.tensor(np.eye(3)), fg.tensor(np.ones((2, 2))))
    assert issubclass(fg.linalg.LinAlgError, RuntimeError)
    info = fg.linalg.inv_ex(fg.tensor(np.ones((2, 2)))).info
    assert int(info.item()) != 0
    np.testing.assert_allclose(fg.linalg.inv(fg.tensor(2 * np.eye(2))).numpy(), np.eye(2) / 2)


def test_inside_a_trace_decompositions_raise_trace_error():
    w = fg.tensor(np.eye(3) * 2)

    @fg.trace
    def f(x):
        return fg.linalg.inv(w) @ x

    with pytest.raises(fg.TraceError):
        f(fg.tensor(np.ones((3, 1))))


def test_torch_top_level_names_and_methods():
    rng = _rng(10)
    A = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    t = fg.tensor(A)
    np.testing.assert_allclose(t.inverse().numpy(), np.linalg.inv(A), rtol=1e-12)
    np.testing.assert_allclose(fg.inverse(t).numpy(), np.linalg.inv(A), rtol=1e-12)
    np.testing.assert_allclose(t.det().item(), np.linalg.det(A), rtol=1e-12)
    np.testing.assert_allclose(t.slogdet()[1].item(), np.linalg.slogdet(A)[1], rtol=1e-12)
    U, S, V = fg.svd(t)  # torch.svd gives V, not Vh
    np.testing.assert_allclose((U * S.unsqueeze(0)) @ V.mT.numpy(), A, atol=1e-12)
    np.testing.assert_allclose(t.matrix_power(2).numpy(), A @ A, rtol=1e-12)
    Q, R = t.qr()
    np.testing.assert_allclose((Q @ R).numpy(), A, atol=1e-12)
    np.testing.assert_allclose(fg.pinverse(t).numpy(), np.linalg.inv(A), atol=1e-10)
