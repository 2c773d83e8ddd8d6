"""``torch.linalg`` (``fg.linalg``): norms and products (``vector_norm``, ``matrix_norm``,
``norm``, ``vecdot``, ``cross``, ``matmul``, ``multi_dot``, ``diagonal``), differentiable
through ferrograd's ops; solves and decompositions (``inv``, ``solve``, ``solve_triangular``,
``det``, ``slogdet``, ``cholesky``, ``qr``, ``eigh``, ``svd``, ``pinv``, ...), computed by
LAPACK on the host with gradients of any order (see ``_decomp``)."""

from __future__ import annotations

import math
from typing import Any

from . import _core
from ._core import ShapeError, Tensor
from ._decomp import (
    EighResult,
    LinAlgError,
    LstsqResult,
    QrResult,
    SlogdetResult,
    SvdResult,
    cholesky,
    cholesky_ex,
    det,
    eigh,
    eigvalsh,
    inv,
    inv_ex,
    logdet,
    lstsq,
    matrix_power,
    matrix_rank,
    multi_dot,
    pinv,
    qr,
    slogdet,
    solve,
    solve_ex,
    solve_triangular,
    svd,
    svdvals,
)
from ._ops import _check_tensor, _dim
from ._ops import norm as _norm
from ._tensor import _dtype_name
from ._torch_compat import cross as _cross
from ._torch_compat import diagonal as _diagonal

__all__ = [
    "EighResult",
    "LinAlgError",
    "LstsqResult",
    "QrResult",
    "SlogdetResult",
    "SvdResult",
    "cholesky",
    "cholesky_ex",
    "cond",
    "cross",
    "det",
    "diagonal",
    "eigh",
    "eigvalsh",
    "inv",
    "inv_ex",
    "logdet",
    "lstsq",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "multi_dot",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_ex",
    "solve_triangular",
    "svd",
    "svdvals",
    "vecdot",
    "vector_norm",
]


def vector_norm(
    x: Tensor, ord: Any = 2, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
) -> Tensor:
    """The vector ``ord``-norm over ``dim`` (every entry by default): any real ``ord``,
    ``inf``, ``-inf`` or 0 (the count of nonzeros)."""
    x = _check_tensor("vector_norm", "x", x)
    if isinstance(ord, str):
        raise TypeError(f"vector_norm: ord must be a number, got {ord!r}")
    if dtype is not None:
        x = x.astype(_dtype_name(dtype))
    if ord == -math.inf:
        a = x.abs()
        if dim is None:
            out = a.min()
            return out.reshape(*([1] * x.ndim)) if keepdim else out
        return a.amin(dim, keepdim)
    return _norm(x, ord, dim, keepdim)


def _matrix_dims(op: str, a: Tensor, dim: Any) -> tuple[int, int]:
    if a.ndim < 2:
        raise ShapeError(f"{op}: expected a matrix (or a batch of them), got shape {list(a.shape)}")
    if len(dim) != 2:
        raise ShapeError(f"{op}: dim must name two axes, got {dim}")
    r, c = (_dim(op, a, d) for d in dim)
    if r == c:
        raise ShapeError(f"{op}: dim must name two different axes, got {dim}")
    return r, c


def matrix_norm(
    A: Tensor, ord: Any = "fro", dim: Any = (-2, -1), keepdim: bool = False, *, dtype: Any = None
) -> Tensor:
    """The matrix norm over the axes ``dim``: ``"fro"``, 1 / -1 (the largest / smallest
    column sum of absolute values), ``inf`` / ``-inf`` (row sums)."""
    A = _check_tensor("matrix_norm", "A", A)
    if dtype is not None:
        A = A.astype(_dtype_name(dtype))
    if A.dtype.name in ("float16", "bfloat16"):
        # sums of squares overflow float16: computed in float32, rounded once, as PyTorch's
        return matrix_norm(A.astype("float32"), ord, dim, keepdim).astype(A.dtype.name)
    r, c = _matrix_dims("matrix_norm", A, tuple(dim))
    if ord == "fro":
        # the vector 2-norm's rule: gradient 0 (a subgradient) at a zero matrix, not NaN
        out = _norm(A, 2, (r, c), True)
    elif ord in (1, -1, math.inf, -math.inf):
        over, then = (r, c) if ord in (1, -1) else (c, r)
        sums = A.abs().sum(dim=over, keepdim=True)
        out = sums.amax(then, True) if ord in (1, math.inf) else sums.amin(then, True)
    elif ord in ("nuc", 2, -2):
        # singular values of the matrices (r, c) moved last
        rest = [i for i in range(A.ndim) if i not in (r, c)]
        S = svdvals(A.permute(*rest, r, c))
        red = S.sum(-1) if ord == "nuc" else S.amax(-1) if ord == 2 else S.amin(-1)
        out = red.unsqueeze(min(r, c)).unsqueeze(max(r, c))
    else:
        raise ShapeError(
            f"matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got {ord!r}"
        )
    return out if keepdim else out.squeeze((r, c))


def norm(
    A: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
) -> Tensor:
    """``vector_norm`` or ``matrix_norm`` as ``torch.linalg.norm`` picks: a matrix norm when
    ``dim`` names two axes (or, with ``ord`` given and no ``dim``, for a 2-D input); the
    2-norm of every entry when neither is given."""
    A = _check_tensor("norm", "A", A)
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if dim is None and ord is not None:
        if A.ndim == 2:
            return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
        if A.ndim != 1:
            raise ShapeError(
                f"norm: with ord and no dim the input must be 1-D or 2-D, got shape {list(A.shape)}"
            )
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product of ``x`` and ``y`` along ``dim`` (broadcast)."""
    x, y = _check_tensor("vecdot", "x", x), _check_tensor("vecdot", "y", y)
    return (x * y).sum(dim=dim)


def cross(input: Tensor, other: Tensor, *, dim: int = -1, out: Any = None) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (the last axis by default); ``out=`` as
    PyTorch's."""
    return _cross(input, other, dim, out=out)


def matmul(input: Tensor, other: Tensor) -> Tensor:
    return _check_tensor("matmul", "input", input) @ other


def cond(A: Tensor, p: Any = None) -> Tensor:
    """The condition number in the ``p`` norm (2 by default: largest over smallest singular
    value); inf for a singular matrix with ``p`` in 1, -1, inf, -inf, 'fro', 'nuc'."""
    A = _check_tensor("cond", "A", A)
    if p in (None, 2, -2):
        S = svdvals(A)
        ratio = S.amax(-1) / S.amin(-1)
        return ratio if p != -2 else 1.0 / ratio
    # a singular matrix has condition number inf, as PyTorch's (its inverse does not exist)
    Ainv, info = inv_ex(A)
    bad = info != 0
    if not bool(bad.any()):
        return matrix_norm(A, p) * matrix_norm(Ainv, p)
    # (the NaN inverses of the singular ones replaced, so that an SVD of them is not tried)
    Ainv = _core.where(bad.unsqueeze(-1).unsqueeze(-1), _core.zeros_like(Ainv.detach()), Ainv)
    out = matrix_norm(A, p) * matrix_norm(Ainv, p)
    return _core.where(bad, _core.full((), math.inf, dtype=A.dtype.name), out)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """The diagonals of the matrices in ``A`` (the last two axes by default)."""
    return _diagonal(A, offset, dim1, dim2)
