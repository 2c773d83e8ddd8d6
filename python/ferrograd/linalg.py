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
    "householder_product",
    "inv",
    "inv_ex",
    "logdet",
    "lstsq",
    "matmul",
    "matrix_exp",
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
    "tensorinv",
    "tensorsolve",
    "vander",
    "vecdot",
    "vector_norm",
]

_FLOAT_RANK = {"float16": 0, "bfloat16": 0, "float32": 1, "float64": 2}


def _norm_dtype(op: str, x: Tensor, dtype: Any) -> Tensor:
    """``x`` in ``dtype`` (PyTorch's rule: computing a norm in a dtype narrower than the
    input's is an error)."""
    if x.dtype.kind != "f":
        from .nn._errors import UnsupportedDTypeError

        raise UnsupportedDTypeError(f"linalg.{op}: expected a floating point input, got {x.dtype}")
    if dtype is None:
        return x
    name = _dtype_name(dtype)
    src = x.dtype.name
    if name != src and _FLOAT_RANK.get(src, 3) >= _FLOAT_RANK.get(name, -1):
        raise _core.DTypeError(
            f"linalg.{op}: the dtype of the input ({src}) should be convertible without "
            f"narrowing to the specified dtype ({name})"
        )
    return x.astype(name)


def vector_norm(
    x: Tensor, ord: Any = 2, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
) -> Tensor:
    """The vector ``ord``-norm over ``dim`` (every entry by default): any real ``ord``,
    ``inf``, ``-inf`` or 0 (the count of nonzeros)."""
    x = _check_tensor("vector_norm", "x", x)
    if isinstance(ord, str):
        raise TypeError(f"vector_norm: ord must be a number, got {ord!r}")
    x = _norm_dtype("vector_norm", x, dtype)
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
    A = _norm_dtype("matrix_norm", A, dtype)
    if A.dtype.name in ("float16", "bfloat16"):
        # sums of squares overflow float16: computed in float32, rounded once, as PyTorch's
        return matrix_norm(A.astype("float32"), ord, dim, keepdim).astype(A.dtype.name)
    r, c = _matrix_dims("matrix_norm", A, tuple(dim))

    def amax(t: Tensor, d: int) -> Tensor:
        # the largest of no (non-negative) sums is 0, as PyTorch's; the smallest raises
        if t.shape[d] == 0:
            return _core.zeros_like(t.detach()).sum(d, keepdim=True)
        return t.amax(d, True)

    if ord == "fro":
        # the vector 2-norm's rule: gradient 0 (a subgradient) at a zero matrix, not NaN
        out = _norm(A, 2, (r, c), True)
    elif ord in (1, -1, math.inf, -math.inf):
        over, then = (r, c) if ord in (1, -1) else (c, r)
        sums = A.abs().sum(dim=over, keepdim=True)
        out = amax(sums, then) if ord in (1, math.inf) else sums.amin(then, True)
    elif ord in ("nuc", 2, -2):
        # singular values of the matrices (r, c) moved last
        rest = [i for i in range(A.ndim) if i not in (r, c)]
        S = svdvals(A.permute(*rest, r, c))
        red = S.sum(-1) if ord == "nuc" else amax(S, -1).squeeze(-1) if ord == 2 else S.amin(-1)
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
    if dim is not None and len(dim) not in (1, 2):
        raise ShapeError(f"linalg.norm: dim must name 1 or 2 axes, got {tuple(dim)}")
    if isinstance(ord, str) and not (
        (dim is not None and len(dim) == 2) or (dim is None and A.ndim == 2)
    ):
        raise ShapeError(
            f"linalg.norm: ord {ord!r} is a matrix norm: it needs a 2-D input or dim naming "
            f"two axes, got shape {list(A.shape)} and dim {dim}"
        )
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
    if x.dtype != y.dtype:
        raise _core.DTypeError(
            f"linalg.vecdot: x and y must have the same dtype, got {x.dtype} and {y.dtype}"
        )
    return (x * y).sum(dim=dim)


def cross(input: Tensor, other: Tensor, *, dim: int = -1, out: Any = None) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (the last axis by default); ``out=`` as
    PyTorch's."""
    a = _check_tensor("cross", "input", input)
    b = _check_tensor("cross", "other", other)
    if a.dtype != b.dtype:
        raise _core.DTypeError(
            f"linalg.cross: input and other must have the same dtype, got {a.dtype} and {b.dtype}"
        )
    return _cross(a, b, dim, out=out)


def matmul(input: Tensor, other: Tensor) -> Tensor:
    return _check_tensor("matmul", "input", input) @ other


def cond(A: Tensor, p: Any = None) -> Tensor:
    """The condition number in the ``p`` norm (2 by default: largest over smallest singular
    value); inf for a singular matrix with ``p`` in 1, -1, inf, -inf, 'fro', 'nuc'."""
    A = _check_tensor("cond", "A", A)
    if p not in (None, 2, -2, 1, -1, math.inf, -math.inf, "fro", "nuc"):
        raise ShapeError(f"linalg.cond: got an invalid norm type: {p!r}")
    if A.ndim < 2:
        raise ShapeError(
            f"linalg.cond: the input must have at least 2 dimensions, got shape {list(A.shape)}"
        )
    if p not in (None, 2, -2) and A.shape[-1] != A.shape[-2]:
        raise ShapeError(
            f"linalg.cond(ord={p}): A must be batches of square matrices, got shape {list(A.shape)}"
        )
    if A.shape[-1] == 0 or A.shape[-2] == 0:
        # an empty matrix has condition number 0, as PyTorch's
        return svdvals(A).detach().sum(-1)
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


def matrix_exp(A: Tensor) -> Tensor:
    """The matrix exponential of square matrices (batched), differentiable."""
    from ._torch_extra import matrix_exp as _matrix_exp

    A = _check_tensor("matrix_exp", "A", A)
    if A.dtype.kind != "f":
        from .nn._errors import UnsupportedDTypeError

        raise UnsupportedDTypeError(f"linalg.matrix_exp: expected a float input, got {A.dtype}")
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ShapeError(
            f"linalg.matrix_exp: A must be batches of square matrices, got shape {list(A.shape)}"
        )
    return _matrix_exp(A)


def vander(x: Tensor, *, N: Any = None) -> Tensor:
    """The Vandermonde matrices of the vectors in the last axis of ``x``: columns
    ``x^0, x^1, ..., x^(N-1)`` (increasing powers, unlike ``torch.vander``); integer inputs
    give int64."""
    x = _check_tensor("vander", "x", x)
    if x.ndim < 1:
        raise ShapeError("linalg.vander: x must have at least one dimension, got a scalar")
    n = x.shape[-1] if N is None else int(N)
    if n <= 1:
        raise ShapeError(f"linalg.vander: N must be greater than 1, got {n}")
    if x.dtype.kind in "biu":
        x = x.astype("int64")
    cols = [_core.ones_like(x)]
    for _ in range(n - 1):
        cols.append(cols[-1] * x)
    return _core.stack(cols, x.ndim)


def householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """The first ``n`` columns of ``H_1 @ ... @ H_k``, ``H_i = I - tau_i v_i v_i^T`` with
    ``v_i`` the ``i``-th column of ``A`` below the diagonal (a unit above it), as LAPACK's
    ``orgqr`` (``torch.linalg.householder_product``); batched and differentiable."""
    from ._ops import eye

    A = _check_tensor("householder_product", "A", A)
    tau = _check_tensor("householder_product", "tau", tau)
    op = "linalg.householder_product"
    if A.ndim < 2:
        raise ShapeError(f"{op}: A must have at least 2 dimensions, got shape {list(A.shape)}")
    m, n = A.shape[-2], A.shape[-1]
    k = tau.shape[-1] if tau.ndim else -1
    if m < n:
        raise ShapeError(f"{op}: A must have at least as many rows as columns, got {m} by {n}")
    if tau.ndim != A.ndim - 1 or k > n:
        raise ShapeError(
            f"{op}: tau must have shape (*A.shape[:-2], k) with k <= {n}, got {list(tau.shape)}"
        )
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise ShapeError(
            f"{op}: tau's batch shape {list(tau.shape[:-1])} differs from A's {list(A.shape[:-2])}"
        )
    if A.dtype != tau.dtype:
        raise _core.DTypeError(
            f"{op}: A and tau must have one dtype, got {A.dtype} and {tau.dtype}"
        )
    dt = A.dtype.name
    V = A.tril(-1) + eye(m, n, dtype=dt, device=A.device)
    Q = eye(m, dtype=dt, device=A.device).expand(*A.shape[:-2], m, m)
    for i in range(k):
        v = V[..., :, i : i + 1]
        t = tau[..., i : i + 1].unsqueeze(-1)
        Q = Q - (Q @ v) @ (v.mT * t)
    return Q[..., :, :n]


def tensorinv(A: Tensor, ind: int = 2) -> Tensor:
    """The inverse of ``A`` seen as a linear map from its first ``ind`` axes to the rest:
    ``tensordot(tensorinv(A, ind), A, ind)`` is the identity."""
    A = _check_tensor("tensorinv", "A", A)
    if isinstance(ind, bool) or not isinstance(ind, int):
        raise TypeError(f"linalg.tensorinv: ind must be an int, got {type(ind).__name__}")
    if ind <= 0:
        raise ShapeError(f"linalg.tensorinv: ind must be a positive integer, got {ind!r}")
    rows, cols = math.prod(A.shape[:ind]), math.prod(A.shape[ind:])
    if rows != cols:
        raise ShapeError(
            f"linalg.tensorinv: the product of the first ind={ind} axes ({rows}) must equal "
            f"the product of the others ({cols}), got shape {list(A.shape)}"
        )
    return inv(A.reshape(rows, cols)).reshape(*A.shape[ind:], *A.shape[:ind])


def tensorsolve(A: Tensor, B: Tensor, dims: Any = None) -> Tensor:
    """``X`` with ``tensordot(A, X, X.ndim) == B``; ``dims`` moves those axes of ``A`` to
    the end first."""
    A = _check_tensor("tensorsolve", "A", A)
    B = _check_tensor("tensorsolve", "B", B)
    if dims is not None:
        dims = [_dim("tensorsolve", A, d) for d in dims]
        A = A.movedim(tuple(dims), tuple(range(A.ndim - len(dims), A.ndim)))
    lead, rest = A.shape[: B.ndim], A.shape[B.ndim :]
    n = math.prod(rest)
    if math.prod(lead) != n or B.numel() != n:
        raise ShapeError(
            f"linalg.tensorsolve: A of shape {list(A.shape)} and B of shape {list(B.shape)} "
            f"do not make a square system (prod(A.shape[B.ndim:]) must equal "
            f"prod(A.shape[:B.ndim]) and B.numel())"
        )
    return solve(A.reshape(n, n), B.reshape(n)).reshape(*rest)
