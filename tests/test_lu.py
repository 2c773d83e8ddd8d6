"""LU factorisation (torch.linalg.lu / lu_factor / lu_solve, torch.lu_unpack, Tensor.lu):
the same pivots, factors and gradients as PyTorch's, in float64."""

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)


def _run(lib, A, B, Bt):
    a = lib.tensor(A, requires_grad=True)
    P, L, U = lib.linalg.lu(a)
    LU, piv = lib.linalg.lu_factor(a)
    P2, L2, U2 = lib.lu_unpack(LU, piv)
    loss = (L * L.detach()).sum() + (U**2).sum() + (LU * 3).sum()
    out = [P, L, U, LU, piv, P2, L2, U2]
    if A.shape[-1] == A.shape[-2]:
        b = lib.tensor(B, requires_grad=True)
        bt = lib.tensor(Bt)
        X = lib.linalg.lu_solve(LU, piv, b)
        out += [X, lib.linalg.lu_solve(LU, piv, b, adjoint=True)]
        out += [lib.linalg.lu_solve(LU, piv, bt, left=False)]
        loss = loss + (X**2).sum()
        out += list(lib.autograd.grad(loss, [a, b]))
    else:
        out += list(lib.autograd.grad(loss, [a]))
    LU3, piv3 = a.lu()
    out += [LU3, piv3]
    return [np.asarray(t.detach().numpy(), dtype=np.float64) for t in out]


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 3, 3), (1, 1)])
def test_lu_family_matches_torch(shape):
    A = RNG.normal(size=shape)
    A[..., 0, 0] = 1e-3  # (a pivot must be chosen)
    B = RNG.normal(size=(*shape[:-2], shape[-1], 2))
    Bt = RNG.normal(size=(*shape[:-2], 2, shape[-1]))
    got, want = _run(fg, A, B, Bt), _run(torch, A, B, Bt)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_lu_refuses_what_it_cannot_factor():
    with pytest.raises(fg.ShapeError, match="lu"):
        fg.linalg.lu(fg.ones(3))
    with pytest.raises(TypeError, match="lu_factor"):
        fg.linalg.lu_factor(fg.ones(2, 2, dtype="int64"))
