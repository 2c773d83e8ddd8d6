"""LU factorisation with partial pivoting, as ``torch.linalg.lu`` / ``lu_factor`` /
``lu_solve`` / ``lu_unpack`` and ``Tensor.lu``.

The row order is chosen on the host from the values (the largest magnitude in each column,
the first of equals, as LAPACK's ``getrf``); ``L`` and ``U`` are then computed from the
reordered matrix by recorded ops (one rank-1 update per column), so they are differentiable
to any order. Batches are factorised one matrix at a time."""

from __future__ import annotations

import math
from collections import namedtuple
from typing import Any

import numpy as np

from . import _core
from ._core import ShapeError, Tensor
from ._ops import _check_tensor, tril, triu
from ._tensor import tensor

LUResult = namedtuple("LUResult", ["P", "L", "U"])
LUFactorResult = namedtuple("LUFactorResult", ["LU", "pivots"])
LUFactorExResult = namedtuple("LUFactorExResult", ["LU", "pivots", "info"])


def _matrix(op: str, A: Any) -> Tensor:
    A = _check_tensor(op, "A", A)
    if A.ndim < 2:
        raise ShapeError(f"{op}: A must have at least 2 axes, got shape {list(A.shape)}")
    if A.dtype.kind != "f":
        raise _core.DTypeError(f"{op}: A must be a float tensor, got {A.dtype}")
    return A


def _row_order(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(perm, pivots)`` of partial pivoting on ``a`` (m x n): ``a[perm]`` factors without
    pivoting; ``pivots`` are LAPACK's 1-based row swaps (int32), one per column of min(m, n)."""
    work = np.array(a, dtype=np.float64, copy=True)
    m, n = work.shape
    perm = np.arange(m)
    pivots = np.empty(min(m, n), dtype=np.int32)
    for j in range(min(m, n)):
        p = j + int(np.argmax(np.abs(work[j:, j])))
        pivots[j] = p + 1
        if p != j:
            work[[j, p]] = work[[p, j]]
            perm[[j, p]] = perm[[p, j]]
        if work[j, j] != 0:
            work[j + 1 :, j] /= work[j, j]
            work[j + 1 :, j + 1 :] -= np.outer(work[j + 1 :, j], work[j, j + 1 :])
    return perm, pivots


def _lu_one(A: Tensor) -> tuple[Tensor, Tensor, Tensor, np.ndarray]:
    """``(P, L, U, pivots)`` of one matrix ``A`` (m x n), ``A = P @ L @ U``."""
    m, n = A.shape
    k = min(m, n)
    perm, pivots = _row_order(A.detach().numpy())
    rows = _core.index_select(A, 0, tensor(perm.astype(np.int64), device=A.device))
    zeros = lambda size: _core.zeros((size,), dtype=A.dtype.name, device=A.device)
    ones = lambda size: _core.ones((size,), dtype=A.dtype.name, device=A.device)
    u_rows, l_cols = [], []
    rest = rows
    for j in range(k):
        u = rest[0]
        pivot = u[0]
        if j + 1 >= m:
            below = zeros(0)
        elif bool(pivot.detach() == 0):
            # a zero pivot has a zero column under it (it is the largest): LAPACK leaves
            # that column as it is instead of dividing 0 by 0
            below = rest[1:, 0]
        else:
            below = rest[1:, 0] / pivot
        parts_u = [zeros(j), u] if j else [u]
        u_rows.append(_core.concat(parts_u, 0))
        l_cols.append(_core.concat([zeros(j), ones(1), below], 0))
        if j + 1 < k:
            rest = rest[1:, 1:] - below.reshape(-1, 1) * u[1:].reshape(1, -1)
    if k == 0:  # (a matrix with no rows or no columns: empty factors, P the identity)
        U = _empty_on_graph(_core.zeros((0, n), dtype=A.dtype.name, device=A.device), A)
        L = _empty_on_graph(_core.zeros((m, 0), dtype=A.dtype.name, device=A.device), A)
    else:
        U = _core.stack(u_rows, 0)
        L = _core.stack(l_cols, 1)
    P = tensor(np.eye(m)[:, perm], dtype=A.dtype.name, device=A.device)
    return P, L, U, pivots


def _batched(A: Tensor, fn: Any) -> list:
    batch = tuple(A.shape[:-2])
    # (the batch size spelled out: reshape(-1, 0, 0) is ambiguous for an empty matrix)
    flat = A.reshape(int(np.prod(batch)), *A.shape[-2:])
    outs = [fn(flat[i]) for i in range(flat.shape[0])]
    return [batch, outs]


def _empty_on_graph(z: Tensor, A: Tensor) -> Tensor:
    """The zeros ``z`` of an empty batch on the graph of the empty ``A`` (whose sum is an
    exact 0), as PyTorch's factors are: differentiating them gives ``A`` an empty gradient
    instead of raising that nothing requires grad."""
    return z + A.sum()


def lu(A: Any, *, pivot: bool = True) -> LUResult:
    """``P, L, U`` with ``A = P @ L @ U`` (``torch.linalg.lu``): ``L`` unit lower triangular
    (m x k), ``U`` upper triangular (k x n), k = min(m, n); differentiable in ``A``."""
    A = _matrix("lu", A)
    if not pivot:
        raise NotImplementedError("lu: pivot=False is not supported (use pivot=True)")
    batch, outs = _batched(A, _lu_one)
    if not outs:
        m, n = A.shape[-2:]
        k = min(m, n)
        z = lambda *s: _core.zeros((*batch, *s), dtype=A.dtype.name, device=A.device)
        return LUResult(z(m, m), _empty_on_graph(z(m, k), A), _empty_on_graph(z(k, n), A))
    P, L, U = (
        _core.stack([o[i] for o in outs], 0).reshape(*batch, *outs[0][i].shape) for i in range(3)
    )
    return LUResult(P, L, U)


def _combine(L: Tensor, U: Tensor, m: int, n: int) -> Tensor:
    """``L`` (m x k) below the diagonal and ``U`` (k x n) on and above it, in one m x n
    matrix."""
    k = min(m, n)
    lower, upper = tril(L, -1), triu(U)
    if n > k:
        pad = _core.zeros((m, n - k), dtype=L.dtype.name, device=L.device)
        lower = _core.concat([lower, pad], 1)
    if m > k:
        pad = _core.zeros((m - k, n), dtype=U.dtype.name, device=U.device)
        upper = _core.concat([upper, pad], 0)
    return lower + upper


def lu_factor(A: Any, *, pivot: bool = True) -> LUFactorResult:
    """``LU, pivots`` (``torch.linalg.lu_factor``): ``L`` (without its unit diagonal) and
    ``U`` in one matrix, and LAPACK's 1-based row swaps (int32). A ``U`` with a zero on its
    diagonal (a rank-deficient ``A``) raises ``RuntimeError``, as PyTorch's:
    :func:`lu_factor_ex` reports it in ``info`` instead."""
    A = _matrix("lu_factor", A)
    return _lu_factor(A, pivot, True)


def _lu_factor(A: Tensor, pivot: bool, check_errors: bool) -> LUFactorResult:
    if not pivot:
        raise NotImplementedError("lu_factor: pivot=False is not supported (use pivot=True)")
    m, n = A.shape[-2:]

    def one(a: Tensor) -> tuple[Tensor, np.ndarray]:
        _, L, U, piv = _lu_one(a)
        return _combine(L, U, m, n), piv

    batch, outs = _batched(A, one)
    k = min(m, n)
    if check_errors:
        for i, (lu_i, _) in enumerate(outs):
            zero = np.flatnonzero(np.diagonal(lu_i.detach().numpy()) == 0)
            if zero.size:
                where = f" (batch element {i})" if batch else ""
                j = int(zero[0]) + 1  # 1-based, as LAPACK's info
                raise RuntimeError(
                    f"linalg.lu_factor{where}: U[{j},{j}] is zero, so solving with this "
                    f"factorisation would divide by zero; use linalg.lu_factor_ex to get the "
                    f"factorisation with info instead"
                )
    if not outs:
        return LUFactorResult(
            _empty_on_graph(_core.zeros((*batch, m, n), dtype=A.dtype.name, device=A.device), A),
            tensor(np.zeros((*batch, k), np.int32), device=A.device),
        )
    LU = _core.stack([o[0] for o in outs], 0).reshape(*batch, m, n)
    piv = tensor(np.stack([o[1] for o in outs]).reshape(*batch, k), device=A.device)
    return LUFactorResult(LU, piv)


def lu_factor_ex(A: Any, *, pivot: bool = True, check_errors: bool = False):
    """:func:`lu_factor` with ``info`` (0, or i for a zero pivot U[i-1, i-1], as LAPACK)."""
    LU, piv = _lu_factor(_matrix("lu_factor_ex", A), pivot, False)
    diag = np.diagonal(LU.detach().numpy(), axis1=-2, axis2=-1)
    zero = diag == 0
    if zero.shape[-1] == 0:  # (no pivots: a matrix with no rows or no columns)
        info = np.zeros(zero.shape[:-1], dtype=np.int32)
    else:
        info = np.where(zero.any(-1), zero.argmax(-1) + 1, 0).astype(np.int32)
    if check_errors and info.any():
        raise RuntimeError(f"lu_factor_ex: U is singular (info {info.max()})")
    return LUFactorExResult(LU, piv, tensor(info, device=LU.device))


def _permutation(pivots: np.ndarray, m: int) -> np.ndarray:
    perm = np.arange(m)
    for j, p in enumerate(pivots):
        p = int(p) - 1
        if not 0 <= p < m:
            raise ShapeError(f"lu_unpack: pivot {p + 1} at {j} is out of range for {m} rows")
        perm[[j, p]] = perm[[p, j]]
    return perm


def _pivots(op: str, pivots: Any) -> Tensor:
    """``pivots`` as :func:`lu_factor` gives them: int32, as PyTorch requires."""
    pv = _check_tensor(op, "pivots", pivots)
    if pv.dtype.name != "int32":
        raise _core.DTypeError(
            f"{op}: pivots must be an int32 tensor (as linalg.lu_factor gives), got {pv.dtype}"
        )
    return pv


def lu_unpack(
    LU_data: Any, LU_pivots: Any, unpack_data: bool = True, unpack_pivots: bool = True
) -> LUResult:
    """``P, L, U`` from :func:`lu_factor`'s result (``torch.lu_unpack``)."""
    LU = _matrix("lu_unpack", LU_data)
    m, n = LU.shape[-2:]
    k = min(m, n)
    piv = np.asarray(_pivots("lu_unpack", LU_pivots).numpy())
    L = U = P = None
    if unpack_data:
        eye = tensor(np.eye(m, k), dtype=LU.dtype.name, device=LU.device)
        L = tril(LU[..., :, :k], -1) + eye
        U = triu(LU[..., :k, :])
    if unpack_pivots:
        # (the row count spelled out: reshape(-1, 0) is ambiguous for an empty batch)
        flat = (
            piv.reshape(math.prod(piv.shape[:-1]), piv.shape[-1])
            if piv.ndim
            else piv.reshape(1, -1)
        )
        mats = [np.eye(m)[:, _permutation(p, m)] for p in flat]
        stacked = np.stack(mats) if mats else np.zeros((0, m, m))  # (an empty batch)
        P = tensor(stacked.reshape(*LU.shape[:-2], m, m), dtype=LU.dtype.name, device=LU.device)
    empty = _core.zeros((0,), dtype=LU.dtype.name, device=LU.device)
    return LUResult(
        P if P is not None else empty, L if L is not None else empty, U if U is not None else empty
    )


def lu_solve(LU: Any, pivots: Any, B: Any, *, left: bool = True, adjoint: bool = False) -> Tensor:
    """The solution ``X`` of ``A @ X = B`` (``X @ A = B`` with ``left=False``; ``A^H``
    with ``adjoint``) from :func:`lu_factor`'s result (``torch.linalg.lu_solve``)."""
    from ._decomp import solve_triangular

    P, L, U = lu_unpack(LU, _pivots("linalg.lu_solve", pivots))
    B = _check_tensor("lu_solve", "B", B)
    if left and not adjoint:
        # A = P L U: X = U^-1 L^-1 P^T B
        Y = solve_triangular(L, P.mT @ B, upper=False, unitriangular=True)
        return solve_triangular(U, Y, upper=True)
    if left and adjoint:
        # A^T = U^T L^T P^T: X = P L^-T U^-T B
        Y = solve_triangular(U.mT, B, upper=False)
        return P @ solve_triangular(L.mT, Y, upper=True, unitriangular=True)
    if not adjoint:
        # X A = B: X = B U^-1 L^-1 P^T
        Y = solve_triangular(U, B, upper=True, left=False)
        return solve_triangular(L, Y, upper=False, unitriangular=True, left=False) @ P.mT
    # X A^T = B: X = B P L^-T U^-T
    Y = B @ P
    Y = solve_triangular(L.mT, Y, upper=True, unitriangular=True, left=False)
    return solve_triangular(U.mT, Y, upper=False, left=False)


def _tensor_lu(self: Tensor, pivot: bool = True, get_infos: bool = False) -> tuple:
    """``Tensor.lu`` (``torch.lu``): ``(A_LU, pivots)``, with ``infos`` when asked."""
    if get_infos:
        r = lu_factor_ex(self, pivot=pivot)
        return r.LU, r.pivots, r.info
    r = lu_factor(self, pivot=pivot)
    return r.LU, r.pivots


def install() -> None:
    import ferrograd as fg

    from . import linalg

    for name, fn in (
        ("lu", lu),
        ("lu_factor", lu_factor),
        ("lu_factor_ex", lu_factor_ex),
        ("lu_solve", lu_solve),
    ):
        setattr(linalg, name, fn)
        if name not in linalg.__all__:
            linalg.__all__.append(name)
    fg.lu_unpack = lu_unpack
    fg.lu = _tensor_lu
    fg.lu_solve = lambda b, LU_data, LU_pivots: lu_solve(LU_data, LU_pivots, b)
    Tensor.lu = _tensor_lu
    Tensor.lu_solve = lambda self, LU_data, LU_pivots: lu_solve(LU_data, LU_pivots, self)
