"""Matrix decompositions and solves for ``fg.linalg`` (``inv``, ``solve``, ``det``, ``slogdet``,
``cholesky``, ``qr``, ``eigh``, ``svd`` and what is built on them).

The factorisations run on the host through numpy's LAPACK (a CUDA tensor is copied over and
the results copied back): they are custom ops whose backward is written with differentiable
ferrograd ops and with these functions themselves, so gradients of any order work, through
nested GradManagers and ``create_graph=True`` alike. Inside ``fg.trace`` they raise
``TraceError`` (their values would be fixed at trace time).

Gradient conventions follow PyTorch: ``eigh`` and ``cholesky`` read one triangle and give a
symmetric gradient; ``svd``/``eigh`` gradients assume distinct singular values/eigenvalues
(they are infinite otherwise) and a loss that does not depend on the sign of each vector.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from . import _core
from ._core import ShapeError, Tensor
from ._ops import _check_tensor, eye, full_like, tril
from ._tensor import tensor
from .autodiff import Function


class LinAlgError(RuntimeError):
    """A matrix the operation cannot handle: singular (``inv``, ``solve``) or not positive
    definite (``cholesky``). ``torch.linalg.LinAlgError``'s counterpart."""


def _float_input(op: str, name: str, A: Any, min_ndim: int = 2, square: bool = True) -> Tensor:
    A = _check_tensor(op, name, A)
    if A.dtype not in ("float32", "float64"):
        raise _core.DTypeError(
            f"linalg.{op}: {name} must be float32 or float64, got {A.dtype} (convert with "
            f".float() or .double())"
        )
    if A.ndim < min_ndim:
        raise ShapeError(
            f"linalg.{op}: {name} must be a matrix or a batch of matrices, got shape "
            f"{list(A.shape)}"
        )
    if square and A.shape[-1] != A.shape[-2]:
        raise ShapeError(
            f"linalg.{op}: {name} must be square in its last two axes, got shape {list(A.shape)}"
        )
    return A


def _host(op: str, x: Tensor) -> np.ndarray:
    if _core._tracing():
        raise _core.TraceError(
            f"linalg.{op}: the factorisation runs on the host (LAPACK) and cannot be part of a "
            f"traced function: its result would be fixed at trace time; call it outside fg.trace"
        )
    return x.numpy()


def _back(arr: Any, like: Tensor) -> Tensor:
    a = np.array(arr, dtype=like.dtype, order="C")
    return tensor(a, device=like.device)


def _lapack(op: str, fn: Any, *args: Any) -> Any:
    try:
        with np.errstate(all="ignore"):
            return fn(*args)
    except np.linalg.LinAlgError as e:
        if op in ("inv", "solve") and str(e) == "Singular matrix":
            raise LinAlgError(_singular(op, args[0])) from None
        raise LinAlgError(f"linalg.{op}: {e}") from None


def _singular(op: str, a: np.ndarray) -> str:
    """PyTorch's message for a singular matrix: the first one of the batch and the position
    of its zero pivot."""
    flat = a.reshape(-1, *a.shape[-2:])
    infos = [_lu_info(m) for m in flat]
    first = next((i for i, k in enumerate(infos) if k), None)
    if first is None:  # (singular to working precision only)
        return f"linalg.{op}: the input matrix is singular"
    where = f" (Batch element {first})" if a.ndim > 2 else ""
    return (
        f"linalg.{op}{where}: The diagonal element {infos[first]} is zero, the "
        f"{'inversion' if op == 'inv' else 'solve'} could not be completed because the input "
        f"matrix is singular."
    )


def _mT(x: Tensor) -> Tensor:
    return x.transpose(-2, -1)


def _sum_to(g: Tensor, shape: tuple) -> Tensor:
    """``g`` summed over the leading axes that broadcasting added to ``shape``."""
    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    lead = g.ndim - len(shape)
    if lead:
        g = g.sum(dim=tuple(range(lead)))
    axes = tuple(i for i, (a, b) in enumerate(zip(g.shape, shape)) if a != b)
    return g.sum(dim=axes, keepdim=True) if axes else g


def _eye_like(n: int, like: Tensor) -> Tensor:
    return eye(n, dtype=like.dtype, device=like.device)


# ------------------------------------------------------------------------------------ ops


class _Inv(Function):
    def forward(self, A: Tensor) -> Tensor:
        self.A = A
        return _back(_lapack("inv", np.linalg.inv, _host("inv", A)), A)

    def backward(self, g: Tensor | None) -> Any:
        if g is None:
            return None
        Yt = _mT(inv(self.A))
        return -(Yt @ g @ Yt)


def inv(A: Tensor) -> Tensor:
    """The inverse of a square matrix (or of each in a batch). Raises ``LinAlgError`` when
    one is singular."""
    A = _float_input("inv", "A", A)
    return _Inv()(A)


def _as_matrix_rhs(op: str, A: Tensor, B: Tensor) -> bool:
    """Whether ``B`` is a (batch of) vector(s), as ``torch.linalg.solve`` decides."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


class _Solve(Function):
    def forward(self, A: Tensor, B: Tensor) -> Tensor:
        self.A, self.B = A, B
        a, b = _broadcast_solve_args(_host("solve", A), _host("solve", B))
        return _back(_lapack("solve", np.linalg.solve, a, b), A)

    def backward(self, g: Tensor | None) -> Any:
        if g is None:
            return None, None
        A, B = self.A, self.B
        gB = solve(_mT(A), g)
        X = solve(A, B)
        gA = -(gB @ _mT(X))
        return _sum_to(gA, A.shape), _sum_to(gB, B.shape)


def _broadcast_solve_args(A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    return (
        np.broadcast_to(A, batch + A.shape[-2:]),
        np.broadcast_to(B, batch + B.shape[-2:]),
    )


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """The solution ``X`` of ``A @ X = B`` (``X @ A = B`` with ``left=False``); batch axes
    broadcast, and ``B`` of shape ``A.shape[:-1]`` is a (batch of) vector(s)."""
    A = _float_input("solve", "A", A)
    B = _check_tensor("solve", "B", B)
    if B.dtype != A.dtype:
        raise _core.DTypeError(f"linalg.solve: A is {A.dtype} but B is {B.dtype}")
    if not left:
        if B.ndim < 2:
            raise ShapeError(
                f"linalg.solve: with left=False B must be a matrix (X @ A = B), got shape "
                f"{list(B.shape)}"
            )
        return _mT(solve(_mT(A), _mT(B)))
    vector = _as_matrix_rhs("solve", A, B)
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.ndim < 2 or Bm.shape[-2] != A.shape[-1]:
        raise ShapeError(
            f"linalg.solve: B of shape {list(B.shape)} does not match A of shape "
            f"{list(A.shape)} (B needs {A.shape[-1]} rows)"
        )
    try:
        np.broadcast_shapes(tuple(A.shape[:-2]), tuple(Bm.shape[:-2]))
    except ValueError:
        raise ShapeError(
            f"linalg.solve: the batch axes of A {list(A.shape)} and B {list(B.shape)} do not "
            f"broadcast"
        ) from None
    X = _Solve()(A, Bm)
    return X.squeeze(-1) if vector else X


class _Slogdet(Function):
    def forward(self, A: Tensor) -> tuple[Tensor, Tensor]:
        self.A = A
        sign, logabs = _lapack("slogdet", np.linalg.slogdet, _host("slogdet", A))
        return _back(sign, A), _back(logabs, A)

    def backward(self, gsign: Tensor | None, glog: Tensor | None) -> Any:
        if glog is None:
            return None
        return glog.unsqueeze(-1).unsqueeze(-1) * _mT(inv(self.A))


class SlogdetResult(NamedTuple):
    sign: Tensor
    logabsdet: Tensor


def slogdet(A: Tensor) -> SlogdetResult:
    """``(sign, logabsdet)`` of the determinant(s); ``sign`` has no gradient, ``logabsdet``'s
    is ``inv(A)^T`` (a singular matrix has ``logabsdet = -inf`` and no gradient)."""
    A = _float_input("slogdet", "A", A)
    sign, logabs = _Slogdet()(A)
    return SlogdetResult(sign.detach(), logabs)


class _Det(Function):
    def forward(self, A: Tensor) -> Tensor:
        self.A = A
        return _back(_lapack("det", np.linalg.det, _host("det", A)), A)

    def backward(self, g: Tensor | None) -> Any:
        if g is None:
            return None
        A = self.A
        d = det(A)
        sing = d.detach() == 0
        if not bool(sing.any()):
            return (g * d).unsqueeze(-1).unsqueeze(-1) * _mT(inv(A))
        # the gradient is the cofactor matrix, det(A) inv(A)^T where A is invertible; at a
        # singular A it is U diag(prod of the other singular values) Vh, times the sign of
        # det(U) det(Vh): nonzero for rank n-1, zero below
        mask = sing.unsqueeze(-1).unsqueeze(-1)
        n = A.shape[-1]
        safe = _core.where(mask, _core.zeros_like(A.detach()) + _eye_like(n, A), A)
        regular = (g * det(safe)).unsqueeze(-1).unsqueeze(-1) * _mT(inv(safe))
        U, S, Vh = svd(A)
        others = [
            _core.concat([S[..., :i], S[..., i + 1 :]], -1).prod(-1) if n > 1 else S[..., 0] ** 0
            for i in range(n)
        ]
        adj = _core.stack(others, -1)
        sign = np.linalg.det(U.detach().numpy()) * np.linalg.det(Vh.detach().numpy())
        sign = tensor(np.sign(sign).astype(A.dtype.name), device=A.device)
        cof = (U * adj.unsqueeze(-2)) @ Vh * (g * sign).unsqueeze(-1).unsqueeze(-1)
        return _core.where(mask, cof, regular)


def det(A: Tensor) -> Tensor:
    """The determinant(s); the gradient is the cofactor matrix (``det(A) * inv(A)^T`` where
    ``A`` is invertible, from the SVD where it is singular)."""
    A = _float_input("det", "A", A)
    return _Det()(A)


def logdet(A: Tensor) -> Tensor:
    """``log(det(A))``: NaN where the determinant is negative, ``-inf`` where it is 0."""
    sign, logabs = slogdet(A)
    return logabs + sign.log()


class _Cholesky(Function):
    def forward(self, A: Tensor) -> Tensor:
        self.A = A
        a = _host("cholesky", A)
        # LAPACK reads the lower triangle, as PyTorch does
        low = np.tril(a)
        sym = low + np.swapaxes(np.tril(a, -1), -1, -2)
        try:
            with np.errstate(all="ignore"):
                L = np.linalg.cholesky(sym)
        except np.linalg.LinAlgError:
            flat = sym.reshape(-1, *sym.shape[-2:])
            infos = [_cholesky_info(m) for m in flat]
            first = next(i for i, k in enumerate(infos) if k)
            where = f" (Batch element {first})" if sym.ndim > 2 else ""
            raise LinAlgError(
                f"linalg.cholesky{where}: The factorization could not be completed because the "
                f"input is not positive-definite (the leading minor of order {infos[first]} "
                f"is not positive-definite)"
            ) from None
        return _back(L, A)

    def backward(self, gL: Tensor | None) -> Any:
        if gL is None:
            return None
        L = cholesky(self.A)
        P = tril(_mT(L) @ gL)
        S = 0.5 * (P + _mT(tril(P, -1)))
        Linv = inv(L)
        return _mT(Linv) @ S @ Linv


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """The Cholesky factor of a symmetric positive-definite matrix: lower ``L`` with
    ``A = L @ L.mT`` (``upper=True``: ``U = L.mT``). Only the lower triangle of ``A`` is read.
    Raises ``LinAlgError`` when ``A`` is not positive-definite."""
    A = _float_input("cholesky", "A", A)
    L = _Cholesky()(A)
    return _mT(L) if upper else L


class _Eigh(Function):
    def __init__(self, uplo: str) -> None:
        self.uplo = uplo

    def forward(self, A: Tensor) -> tuple[Tensor, Tensor]:
        self.A = A
        w, V = _lapack("eigh", np.linalg.eigh, _host("eigh", A), self.uplo)
        return _back(w, A), _back(V, A)

    def backward(self, gw: Tensor | None, gV: Tensor | None) -> Any:
        if gw is None and gV is None:
            return None
        w, V = eigh(self.A, self.uplo)
        inner = None
        if gV is not None:
            n = w.shape[-1]
            diff = w.unsqueeze(-2) - w.unsqueeze(-1)  # [i, j] = w_j - w_i
            I = _eye_like(n, w)
            F = (1 - I) / (diff + I)
            inner = F * (_mT(V) @ gV)
        if gw is not None:
            D = gw.unsqueeze(-2) * _eye_like(w.shape[-1], w)
            inner = D if inner is None else inner + D
        G = V @ inner @ _mT(V)
        return 0.5 * (G + _mT(G))  # symmetric, as PyTorch's


class EighResult(NamedTuple):
    eigenvalues: Tensor
    eigenvectors: Tensor


def eigh(A: Tensor, UPLO: str = "L") -> EighResult:
    """Eigenvalues (ascending) and orthonormal eigenvectors (columns) of a symmetric matrix,
    reading the ``UPLO`` triangle."""
    A = _float_input("eigh", "A", A)
    if not isinstance(UPLO, str) or UPLO.upper() not in ("L", "U"):
        raise ShapeError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    UPLO = UPLO.upper()  # (lower case accepted, as PyTorch's)
    w, V = _Eigh(UPLO)(A)
    return EighResult(w, V)


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    """The eigenvalues (ascending) of a symmetric matrix."""
    return eigh(A, UPLO).eigenvalues


class _Svd(Function):
    def forward(self, A: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        self.A = A
        U, S, Vh = _lapack("svd", np.linalg.svd, _host("svd", A), False)
        return _back(U, A), _back(S, A), _back(Vh, A)

    def backward(self, gU: Tensor | None, gS: Tensor | None, gVh: Tensor | None) -> Any:
        if gU is None and gS is None and gVh is None:
            return None
        A = self.A
        U, S, Vh = svd(A, full_matrices=False)
        V = _mT(Vh)
        m, n = A.shape[-2], A.shape[-1]
        k = S.shape[-1]
        I = _eye_like(k, S)
        inner = None
        if gS is not None:
            inner = gS.unsqueeze(-2) * I
        if gU is not None or gVh is not None:
            s2 = S * S
            diff = s2.unsqueeze(-2) - s2.unsqueeze(-1)  # [i, j] = s_j^2 - s_i^2
            F = (1 - I) / (diff + I)
            Sr = S.unsqueeze(-2)  # scales columns
            Sc = S.unsqueeze(-1)  # scales rows
            if gU is not None:
                UtgU = _mT(U) @ gU
                t = (F * (UtgU - _mT(UtgU))) * Sr
                inner = t if inner is None else inner + t
            if gVh is not None:
                gV = _mT(gVh)
                VtgV = _mT(V) @ gV
                t = Sc * (F * (VtgV - _mT(VtgV)))
                inner = t if inner is None else inner + t
        gA = U @ inner @ Vh
        if gU is not None and m > k:
            proj = gU - U @ (_mT(U) @ gU)
            gA = gA + (proj / S.unsqueeze(-2)) @ Vh
        if gVh is not None and n > k:
            gV = _mT(gVh)
            proj = gV - V @ (_mT(V) @ gV)
            gA = gA + U @ _mT(proj / S.unsqueeze(-2))
        return gA


class SvdResult(NamedTuple):
    U: Tensor
    S: Tensor
    Vh: Tensor


def svd(A: Tensor, full_matrices: bool = True) -> SvdResult:
    """``A = U @ diag(S) @ Vh`` with singular values descending. Gradients flow through the
    reduced factors (``full_matrices=False``, or a square ``A``); with ``full_matrices=True``
    on a non-square matrix the extra columns of ``U``/``Vh`` carry no gradient (PyTorch
    raises there)."""
    A = _float_input("svd", "A", A, square=False)
    U, S, Vh = _Svd()(A)
    m, n, k = A.shape[-2], A.shape[-1], S.shape[-1]
    if full_matrices and m != n:
        # the columns beyond min(m, n) complete the bases; as in PyTorch no gradient flows
        # through them
        Uf, _, Vhf = _lapack("svd", np.linalg.svd, _host("svd", A), True)
        if m > k:
            U = _core.concat([U, _back(Uf[..., :, k:], A)], U.ndim - 1)
        if n > k:
            Vh = _core.concat([Vh, _back(Vhf[..., k:, :], A)], Vh.ndim - 2)
    return SvdResult(U, S, Vh)


def svdvals(A: Tensor) -> Tensor:
    """The singular values, descending (gradient ``U @ diag(g) @ Vh``)."""
    A = _float_input("svdvals", "A", A, square=False)
    return _Svd()(A)[1]


class _Qr(Function):
    def forward(self, A: Tensor) -> tuple[Tensor, Tensor]:
        self.A = A
        Q, R = _lapack("qr", np.linalg.qr, _host("qr", A), "reduced")
        return _back(Q, A), _back(R, A)

    def backward(self, gQ: Tensor | None, gR: Tensor | None) -> Any:
        if gQ is None and gR is None:
            return None
        A = self.A
        Q, R = qr(A)
        m, n = A.shape[-2], A.shape[-1]
        if m < n:
            # PyTorch's: A = [X | Y] with X square, X = Q U, Y = Q V; V = Q^T Y sends Q a
            # gradient Y gV^T and Y the gradient Q gV; X then as the square case
            U = R[..., :, :m]
            gU = None if gR is None else gR[..., :, :m]
            gV = None if gR is None else gR[..., :, m:]
            Y = A[..., :, m:]
            if gV is not None:
                gQ = Y @ _mT(gV) if gQ is None else gQ + Y @ _mT(gV)
            gX = self._square(Q, U, gQ, gU)
            gY = _core.zeros_like(Y) if gV is None else Q @ gV
            return _core.concat([gX, gY], -1)
        return self._square(Q, R, gQ, gR)

    @staticmethod
    def _square(Q: Tensor, R: Tensor, gQ: Tensor | None, gR: Tensor | None) -> Tensor:
        M = 0
        if gR is not None:
            M = R @ _mT(gR)
        if gQ is not None:
            M = M - _mT(gQ) @ Q
        Ml = tril(M, -1)
        sym = Ml + _mT(Ml) + M * _eye_like(M.shape[-1], M)
        lhs = Q @ sym if gQ is None else gQ + Q @ sym
        # lhs @ R^-T
        return _mT(solve(R, _mT(lhs)))


def _tol(v: Any) -> Any:
    """A tolerance as a number or (a tensor's) array with a trailing axis for the singular
    values."""
    if isinstance(v, Tensor):
        return np.asarray(v.detach().numpy(), dtype=np.float64)[..., None]
    return float(v)


def _pinv_cut(top: np.ndarray, atol: Any, rtol: Any) -> np.ndarray:
    """``max(atol, rtol * largest)`` per matrix (PyTorch's rule; ``rtol`` None: 0 where
    ``atol`` is positive, ``eps * max(m, n)`` elsewhere, resolved by :func:`pinv`)."""
    cut = top * _tol(rtol)
    if atol is not None:
        cut = np.maximum(cut, _tol(atol))
    return cut


class _PinvHermitian(Function):
    """``pinv(A, hermitian=True)``, PyTorch's: the value through ``eigh`` of the lower
    triangle (eigenvalues of magnitude at or below ``max(atol, rtol * largest)`` dropped),
    the gradient PyTorch's ``pinv_backward`` (written for the whole of ``A``)."""

    atol: Any
    rtol: float

    def forward(self, A: Tensor) -> Tensor:
        self.A = A
        w, V = _lapack("pinv", np.linalg.eigh, _host("pinv", A), "L")
        aw = np.abs(w)
        top = aw.max(-1, keepdims=True) if aw.shape[-1] else aw
        keep = aw > _pinv_cut(top, self.atol, self.rtol)
        winv = np.where(keep, 1.0 / np.where(keep, w, 1.0), 0.0)
        return _back((V * winv[..., None, :]) @ np.swapaxes(V, -1, -2), A)

    def backward(self, g: Tensor | None) -> Any:
        if g is None:
            return None
        A = self.A
        P = pinv(A, atol=self.atol, rtol=self.rtol, hermitian=True)
        Ph, gh = _mT(P), _mT(g)
        K = gh @ P
        KPh = K @ Ph
        return -_mT(P @ K) + KPh - (A @ P) @ KPh + (Ph @ P) @ (gh - K @ A)


def _pinv_backward(g: Tensor, P: Tensor, A: Tensor) -> Tensor:
    """PyTorch's ``pinv_backward``: the gradient of ``P = pinv(A)`` (rank kept constant)
    without SVD derivatives, so it stays finite for repeated or equal singular values;
    written with differentiable ops (double backward works)."""
    m, n = A.shape[-2], A.shape[-1]
    Ph, gh = _mT(P), _mT(g)
    if m <= n:
        K = gh @ P
        KPh = K @ Ph
        return -_mT(P @ K) + KPh - (A @ P) @ KPh + (Ph @ P) @ (gh - K @ A)
    K = P @ gh
    PhK = Ph @ K
    return -_mT(K @ P) + PhK - (PhK @ P) @ A + ((gh - A @ K) @ P) @ Ph


class _Pinv(Function):
    """``pinv(A)`` (not hermitian): the value through the SVD on the host (singular values
    at or below ``max(atol, rtol * largest)`` dropped), the gradient PyTorch's
    ``pinv_backward`` (no SVD derivatives: right for repeated singular values)."""

    atol: Any
    rtol: float

    def forward(self, A: Tensor) -> Tensor:
        self.A = A
        a = _host("pinv", A)
        m, n = a.shape[-2], a.shape[-1]
        if m == 0 or n == 0:
            return _back(np.zeros(a.shape[:-2] + (n, m)), A)
        U, s, Vh = _lapack("pinv", np.linalg.svd, a, False)
        top = s.max(-1, keepdims=True)
        keep = s > _pinv_cut(top, self.atol, self.rtol)
        sinv = np.where(keep, 1.0 / np.where(keep, s, 1.0), 0.0)
        return _back(np.swapaxes(Vh, -1, -2) @ (sinv[..., :, None] * np.swapaxes(U, -1, -2)), A)

    def backward(self, g: Tensor | None) -> Any:
        if g is None:
            return None
        A = self.A
        return _pinv_backward(g, pinv(A, atol=self.atol, rtol=self.rtol), A)


class QrResult(NamedTuple):
    Q: Tensor
    R: Tensor


def qr(A: Tensor, mode: str = "reduced") -> QrResult:
    """``A = Q @ R`` with orthonormal columns in ``Q`` and upper-triangular ``R``; ``mode``
    ``"reduced"``, ``"complete"`` or ``"r"`` (``Q`` empty). Differentiable in reduced mode."""
    A = _float_input("qr", "A", A, square=False)
    if mode not in ("reduced", "complete", "r"):
        raise ShapeError(f"linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    m, n = A.shape[-2], A.shape[-1]
    if mode == "complete" and m > n:
        Q, R = _lapack("qr", np.linalg.qr, _host("qr", A), "complete")
        if _core._tracking_keys(A):
            raise _core.GradError(
                "linalg.qr: mode='complete' with more rows than columns is not differentiable"
            )
        return QrResult(_back(Q, A), _back(R, A))
    Q, R = _Qr()(A)
    if mode == "r":
        return QrResult(_core.zeros((0,), dtype=A.dtype, device=A.device), R)
    return QrResult(Q, R)


def pinv(
    A: Tensor,
    rcond: Any = None,
    hermitian: bool = False,
    *,
    atol: Any = None,
    rtol: Any = None,
) -> Tensor:
    """The Moore-Penrose pseudo-inverse through the SVD: singular values at or below
    ``max(atol, rtol * largest)`` are dropped (``rtol`` defaults to ``eps * max(m, n)``).
    ``rcond`` (PyTorch's older name) is ``rtol``."""
    if rcond is not None:
        if atol is not None or rtol is not None:
            raise ShapeError("linalg.pinv: rcond cannot be given with atol or rtol")
        rtol = rcond
    A = _float_input("pinv", "A", A, square=hermitian)
    m, n = A.shape[-2], A.shape[-1]
    if rtol is None:
        default = np.finfo(A.dtype).eps * max(m, n)
        if isinstance(atol, Tensor):
            rtol = tensor(np.where(atol.detach().numpy() > 0, 0.0, default))
        else:
            rtol = 0.0 if atol is not None and atol > 0 else default
    fn = _PinvHermitian() if hermitian else _Pinv()
    fn.atol, fn.rtol = atol, rtol
    return fn(A)


def matrix_rank(
    A: Tensor,
    tol: Any = None,
    hermitian: bool = False,
    *,
    atol: Any = None,
    rtol: Any = None,
) -> Tensor:
    """The number of singular values above the tolerance ``max(atol, rtol * largest)``
    (as ``pinv``), int64. ``atol`` and ``rtol`` are numbers or tensors broadcast against
    the batch shape; an unspecified ``rtol`` is 0 where ``atol`` is positive and
    ``eps * max(m, n)`` elsewhere, as PyTorch's. ``tol`` (PyTorch's older keyword) is
    ``atol`` with ``rtol=0``."""
    if tol is not None:
        if atol is not None or rtol is not None:
            raise ShapeError("linalg.matrix_rank: tol cannot be given with atol or rtol")
        atol, rtol = tol, 0.0
    A = _float_input("matrix_rank", "A", A, square=hermitian)
    S = svdvals(A).detach()
    m, n = A.shape[-2], A.shape[-1]
    if not isinstance(atol, Tensor) and not isinstance(rtol, Tensor):
        if rtol is None:
            rtol = 0.0 if atol is not None and atol > 0 else np.finfo(A.dtype).eps * max(m, n)
        cut = (S.amax(-1, True) if S.shape[-1] else S) * float(rtol)
        if atol is not None:
            cut = cut.clamp(min=float(atol))
        return (S > cut).sum(-1)

    def as_tensor(v: Any) -> Tensor:
        if isinstance(v, Tensor):
            return v.detach().astype(A.dtype.name)
        return _core.full((), float(v), dtype=A.dtype.name, device=A.device)

    default = np.finfo(A.dtype).eps * max(m, n)
    if rtol is None:
        rtol_t = as_tensor(default)
        if atol is not None:
            rtol_t = _core.where(as_tensor(atol) > 0, as_tensor(0.0), rtol_t)
    else:
        rtol_t = as_tensor(rtol)
    largest = S.amax(-1) if S.shape[-1] else _core.zeros(tuple(S.shape[:-1]), dtype=A.dtype.name)
    cut = largest * rtol_t
    if atol is not None:
        cut = cut.maximum(as_tensor(atol))
    return (S > cut.unsqueeze(-1)).sum(-1)


def matrix_power(A: Tensor, n: int) -> Tensor:
    """``A`` multiplied by itself ``n`` times (by squaring); ``n = 0`` gives the identity and a
    negative ``n`` powers the inverse. Integer matrices take ``n >= 0`` (their products
    wrap as the dtype's arithmetic, as PyTorch's)."""
    A = _check_tensor("matrix_power", "A", A)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"linalg.matrix_power: n must be an int, got {type(n).__name__}")
    n = int(n)
    if A.dtype.kind in "iu":
        if n < 0:
            raise NotImplementedError(
                f"linalg.matrix_power: a negative n ({n}) needs the inverse, which takes a "
                f"float matrix, got {A.dtype}"
            )
        if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
            raise ShapeError(
                f"linalg.matrix_power: A must be a square matrix or a batch of them, got "
                f"shape {list(A.shape)}"
            )
    else:
        A = _float_input("matrix_power", "A", A)
    if n == 0:
        # the identity, on A's graph with gradient 0 (PyTorch's)
        eye_b = _core.zeros_like(A) + _eye_like(A.shape[-1], A)
        if A.requires_grad or _core._tracking_level([A]) is not None:
            keep = _core.ones(tuple(A.shape), dtype="bool", device=A.device)
            return _core.where(keep, eye_b, A)
        return eye_b
    if n < 0:
        A, n = inv(A), -n
    result = None
    base = A
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


def multi_dot(tensors: Any) -> Tensor:
    """The product of a list of matrices (the first may be a vector, as may the last),
    multiplied in the cheapest order."""
    ts = list(tensors)
    if len(ts) < 2:
        raise ShapeError(f"linalg.multi_dot: expected at least 2 tensors, got {len(ts)}")
    for i, t in enumerate(ts):
        _check_tensor("multi_dot", f"tensors[{i}]", t)
        want = (1, 2) if i in (0, len(ts) - 1) else (2,)
        if t.ndim not in want:
            raise ShapeError(
                f"linalg.multi_dot: tensors[{i}] must be {' or '.join(map(str, want))}-D, got "
                f"shape {list(t.shape)}"
            )
    first_vec, last_vec = ts[0].ndim == 1, ts[-1].ndim == 1
    ms = [ts[0].unsqueeze(0) if first_vec else ts[0]] + ts[1:-1]
    ms.append(ts[-1].unsqueeze(-1) if last_vec else ts[-1])
    dims = [ms[0].shape[0]] + [m.shape[1] for m in ms]
    for i in range(len(ms) - 1):
        if ms[i].shape[1] != ms[i + 1].shape[0]:
            raise ShapeError(
                f"linalg.multi_dot: tensors[{i}] {list(ts[i].shape)} and tensors[{i + 1}] "
                f"{list(ts[i + 1].shape)} cannot be multiplied"
            )
    # the classic matrix-chain order
    k = len(ms)
    cost = [[0] * k for _ in range(k)]
    split = [[0] * k for _ in range(k)]
    for length in range(1, k):
        for i in range(k - length):
            j = i + length
            cost[i][j] = -1
            for s in range(i, j):
                c = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
                if cost[i][j] < 0 or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, s

    def chain(i: int, j: int) -> Tensor:
        if i == j:
            return ms[i]
        s = split[i][j]
        return chain(i, s) @ chain(s + 1, j)

    out = chain(0, k - 1)
    if first_vec:
        out = out.squeeze(0)
    if last_vec:
        out = out.squeeze(-1)
    return out


def solve_triangular(
    A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False
) -> Tensor:
    """The solution of ``A @ X = B`` (``X @ A = B`` with ``left=False``) reading only the
    ``upper`` (or lower) triangle of ``A`` (and taking its diagonal as ones with
    ``unitriangular=True``)."""
    A = _float_input("solve_triangular", "A", A)
    B = _check_tensor("solve_triangular", "B", B)
    if B.ndim < 2:
        raise ShapeError(
            f"linalg.solve_triangular: B must be a matrix or a batch of them, got shape "
            f"{list(B.shape)}"
        )
    if A.dtype != B.dtype:  # promoted, as PyTorch's
        if B.dtype.kind != "f" and B.dtype.kind not in "iub":
            raise _core.DTypeError(f"linalg.solve_triangular: B must be real, got {B.dtype}")
        wide = "float64" if "float64" in (A.dtype.name, B.dtype.name) else A.dtype.name
        A, B = A.astype(wide), B.astype(wide)
    n = A.shape[-1]
    T = A.triu() if upper else A.tril()
    if unitriangular:
        I = _eye_like(n, A)
        T = T * (1 - I) + I
    return solve(T, B, left=left)


class _InvEx(NamedTuple):
    inverse: Tensor
    info: Tensor


class _SolveEx(NamedTuple):
    result: Tensor
    info: Tensor


class _CholEx(NamedTuple):
    L: Tensor
    info: Tensor


def _lu_info(a: np.ndarray) -> int:
    """LAPACK ``getrf``'s info for one square matrix: 0, or the 1-based position of the
    first exact zero pivot of partial-pivoting elimination (the matrix is singular)."""
    work = np.array(a, dtype=np.float64, copy=True)
    n = work.shape[-1]
    for j in range(n):
        p = j + int(np.argmax(np.abs(work[j:, j])))
        if work[p, j] == 0 or np.isnan(work[p, j]):
            return j + 1
        work[[j, p]] = work[[p, j]]
        work[j + 1 :, j] /= work[j, j]
        work[j + 1 :, j + 1 :] -= np.outer(work[j + 1 :, j], work[j, j + 1 :])
    return 0


def _cholesky_info(a: np.ndarray) -> int:
    """LAPACK ``potrf``'s info for one matrix (its lower triangle read): 0, or the order of
    the first leading minor that is not positive-definite."""
    low = np.tril(a)
    sym = low + np.swapaxes(np.tril(a, -1), -1, -2)
    try:
        with np.errstate(all="ignore"):
            np.linalg.cholesky(sym)
        return 0
    except np.linalg.LinAlgError:
        pass
    for k in range(1, sym.shape[-1] + 1):
        try:
            with np.errstate(all="ignore"):
                np.linalg.cholesky(sym[:k, :k])
        except np.linalg.LinAlgError:
            return k
    return sym.shape[-1]


def _batch_info(op: str, A: Tensor, one: Any) -> np.ndarray:
    """``one``'s info for every matrix of ``A``, in its batch shape (int32)."""
    a = _host(op, A.detach())
    flat = a.reshape(int(np.prod(a.shape[:-2])), *a.shape[-2:])  # (no -1: a batch may be empty)
    return np.array([one(m) for m in flat], dtype=np.int32).reshape(a.shape[:-2])


def _per_matrix(
    op: str, A: Tensor, info: np.ndarray, fn: Any, check_errors: bool, why: str, trail: int = 2
) -> Tensor:
    """``fn(A)`` computed matrix by matrix as PyTorch's batched ``*_ex`` ops: the matrices
    whose ``info`` is nonzero are replaced by the identity for the computation (so they do
    not make the others fail) and their results (the last ``trail`` axes of ``fn``'s
    result per matrix) are NaN; ``check_errors`` raises ``LinAlgError`` for the first of
    them instead."""
    bad = info != 0
    if check_errors and bad.any():
        first = int(np.flatnonzero(bad.reshape(-1))[0])
        where = f" (Batch element {first})" if info.ndim else ""
        raise LinAlgError(f"linalg.{op}{where}: {why.format(int(info.reshape(-1)[first]))}")
    if not bad.any():
        return fn(A)
    mask = tensor(bad, device=A.device).reshape(*bad.shape, 1, 1)
    safe = _core.where(mask, _core.zeros_like(A.detach()) + _eye_like(A.shape[-1], A), A)
    out = fn(safe)
    m = mask.reshape(*bad.shape, *([1] * trail))
    return _core.where(m, full_like(out.detach(), float("nan")), out)


def inv_ex(A: Tensor, *, check_errors: bool = False) -> _InvEx:
    """``inv`` that reports a singular matrix in ``info`` instead of raising: per matrix of
    a batch, 0 or LAPACK's (the position of the first zero pivot); a singular matrix's
    inverse is NaN and the others are computed as usual."""
    A = _float_input("inv_ex", "A", A)
    info = _batch_info("inv_ex", A, _lu_info)
    why = (
        "The diagonal element {} is zero, the inversion could not be completed because the "
        "input matrix is singular."
    )
    X = _per_matrix("inv_ex", A, info, inv, check_errors, why)
    return _InvEx(X, tensor(info, device=A.device))


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False) -> _SolveEx:
    """``solve`` that reports a singular ``A`` in ``info`` instead of raising (as
    :func:`inv_ex`): the systems of singular matrices give NaN, the others their solution.
    ``info`` has the batch shape of ``A``."""
    A = _float_input("solve_ex", "A", A)
    B = _check_tensor("solve_ex", "B", B)
    info = _batch_info("solve_ex", A, _lu_info)
    why = (
        "The diagonal element {} is zero, the solve could not be completed because the input "
        "matrix is singular."
    )
    vector = _as_matrix_rhs("solve", A, B)
    solve_one = lambda M: solve(M, B, left=left)
    X = _per_matrix("solve_ex", A, info, solve_one, check_errors, why, 1 if vector else 2)
    # (info has A's batch shape, as PyTorch's, even where B broadcasts it further)
    return _SolveEx(X, tensor(info, device=A.device))


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False) -> _CholEx:
    """``cholesky`` that reports a matrix that is not positive-definite in ``info``: per
    matrix of a batch, 0 or the order of its first leading minor that is not; that
    matrix's factor is NaN and the others are computed as usual."""
    A = _float_input("cholesky_ex", "A", A)
    info = _batch_info("cholesky_ex", A, _cholesky_info)
    why = (
        "The factorization could not be completed because the input is not positive-definite "
        "(the leading minor of order {} is not positive-definite)."
    )
    L = _per_matrix("cholesky_ex", A, info, lambda M: cholesky(M, upper=upper), check_errors, why)
    return _CholEx(L, tensor(info, device=A.device))


class LstsqResult(NamedTuple):
    solution: Tensor
    residuals: Tensor
    rank: Tensor
    singular_values: Tensor


class _DriverError(ValueError, RuntimeError):
    """An unknown LAPACK driver name: a ValueError, and the RuntimeError PyTorch raises."""


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A: Tensor, B: Tensor, rcond: Any = None, *, driver: Any = None) -> LstsqResult:
    """The least-squares solution of ``A @ X = B`` (minimum norm where ``A`` is
    rank-deficient), through the pseudo-inverse. The other fields follow PyTorch's
    ``driver`` (``gelsy`` by default, ``gels`` on CUDA): ``residuals`` (squared, per column
    of ``B``) except with ``gelsy``, when ``A`` has more rows than columns and full rank;
    ``rank`` except with ``gels``; ``singular_values`` with ``gelsd`` and ``gelss``. The
    fields a driver does not fill are empty; only the solution and residuals carry
    gradients."""
    A = _float_input("lstsq", "A", A, square=False)
    B = _check_tensor("lstsq", "B", B)
    if driver is None:
        driver = "gels" if str(A.device).startswith("cuda") else "gelsy"
    if driver not in _LSTSQ_DRIVERS:
        raise _DriverError(f"linalg.lstsq: driver must be one of {_LSTSQ_DRIVERS}, got {driver!r}")
    vector = B.ndim == A.ndim - 1
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.shape[-2] != A.shape[-2]:
        raise ShapeError(
            f"linalg.lstsq: B of shape {list(B.shape)} does not match A of shape "
            f"{list(A.shape)} (B needs {A.shape[-2]} rows)"
        )
    X = pinv(A, rtol=rcond) @ Bm
    m, n = A.shape[-2], A.shape[-1]
    rank = matrix_rank(A, rtol=rcond)
    empty = _core.zeros((0,), dtype=A.dtype, device=A.device)
    residuals = empty
    if driver != "gelsy" and m > n and (driver == "gels" or bool((rank == n).all())):
        residuals = ((A @ X - Bm) ** 2).sum(-2)
    singular_values = svdvals(A).detach() if driver in ("gelsd", "gelss") else empty
    if driver == "gels":
        rank = _core.zeros((0,), dtype="int64", device=A.device)
    return LstsqResult(X.squeeze(-1) if vector else X, residuals, rank, singular_values)


# -- PyTorch's top-level names and Tensor methods ------------------------------------------


def inverse(input: Tensor) -> Tensor:
    """``torch.inverse``: ``linalg.inv``."""
    return inv(input)


def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """``torch.pinverse``: ``linalg.pinv`` with a relative cutoff ``rcond``."""
    return pinv(input, rtol=rcond)


class _SvdUSV(NamedTuple):
    U: Tensor
    S: Tensor
    V: Tensor


def _torch_svd(input: Tensor, some: bool = True, compute_uv: bool = True) -> _SvdUSV:
    """``torch.svd``: ``(U, S, V)`` with ``A = U diag(S) V^T`` (``V``, not ``Vh``); reduced
    unless ``some=False``."""
    U, S, Vh = svd(input, full_matrices=not some)
    if not compute_uv:
        return _SvdUSV(_core.zeros_like(U), S, _core.zeros_like(_mT(Vh)))
    return _SvdUSV(U, S, _mT(Vh))


def _torch_qr(input: Tensor, some: bool = True) -> QrResult:
    """``torch.qr``: reduced unless ``some=False``."""
    return qr(input, "reduced" if some else "complete")


def _torch_cholesky(input: Tensor, upper: bool = False) -> Tensor:
    """``torch.cholesky``: ``linalg.cholesky``."""
    return cholesky(input, upper=upper)


class _CholeskySolve(Function):
    """``cholesky_solve``: the value from the ``upper`` (or lower) triangle of ``L``, the
    gradients PyTorch's ``cholesky_solve_backward`` (written with differentiable ops)."""

    upper: bool

    def forward(self, B: Tensor, L: Tensor) -> Tensor:
        self.B, self.L = B, L
        t = _host("cholesky_solve", L)
        t = np.triu(t) if self.upper else np.tril(t)
        low = np.swapaxes(t, -1, -2) if self.upper else t
        a, b = _broadcast_solve_args(low @ np.swapaxes(low, -1, -2), _host("cholesky_solve", B))
        return _back(_lapack("cholesky_solve", np.linalg.solve, a, b), B)

    def backward(self, g: Tensor | None) -> Any:
        if g is None:
            return None, None
        B, L = self.B, self.L
        gB = cholesky_solve(g, L, self.upper)
        X = cholesky_solve(B, L, self.upper)
        common = gB @ _mT(X)
        common = common + _mT(common)
        gL = -(L @ common) if self.upper else -(common @ L)
        return _sum_to(gB, B.shape), _sum_to(gL, L.shape)


def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False) -> Tensor:
    """The solution of ``A @ X = B`` given the Cholesky factor ``L`` of ``A`` (``U`` with
    ``upper=True``); only that triangle of ``L`` is read, as PyTorch's, and the gradients
    are PyTorch's (those of ``(L L^T)^-1 B`` for the whole of ``L``)."""
    L = _float_input("cholesky_solve", "L", L)
    B = _check_tensor("cholesky_solve", "B", B)
    if B.dtype != L.dtype:
        raise _core.DTypeError(
            f"cholesky_solve: B and L must have one dtype, got {B.dtype} and {L.dtype}"
        )
    if B.ndim < 2:
        raise ShapeError(
            f"cholesky_solve: B must have at least 2 dimensions, got shape {list(B.shape)}"
        )
    if B.shape[-2] != L.shape[-1]:
        raise ShapeError(
            f"cholesky_solve: B of shape {list(B.shape)} does not match L of shape "
            f"{list(L.shape)} (B needs {L.shape[-1]} rows)"
        )
    try:
        np.broadcast_shapes(tuple(B.shape[:-2]), tuple(L.shape[:-2]))
    except ValueError:
        raise ShapeError(
            f"cholesky_solve: the batch axes of B {list(B.shape)} and L {list(L.shape)} do not "
            f"broadcast"
        ) from None
    fn = _CholeskySolve()
    fn.upper = bool(upper)
    return fn(B, L)


class _CholeskyInverse(Function):
    """``cholesky_inverse``: the value from the ``upper`` (or lower) triangle of ``L``, the
    gradient PyTorch's ``cholesky_inverse_backward`` (written with differentiable ops)."""

    upper: bool

    def forward(self, L: Tensor) -> Tensor:
        self.L = L
        a = _host("cholesky_inverse", L)
        t = np.triu(a) if self.upper else np.tril(a)
        zero = np.diagonal(t, axis1=-2, axis2=-1) == 0
        if zero.any():
            flat = zero.reshape(-1, zero.shape[-1])
            first = int(np.flatnonzero(flat.any(-1))[0])
            where = f" (Batch element {first})" if zero.ndim > 1 else ""
            k = int(np.argmax(flat[first])) + 1
            raise LinAlgError(
                f"cholesky_inverse{where}: The diagonal element {k} is zero, the inversion "
                f"could not be completed because the input matrix is singular."
            )
        low = np.swapaxes(t, -1, -2) if self.upper else t
        with np.errstate(all="ignore"):
            li = np.linalg.inv(low)
        return _back(np.swapaxes(li, -1, -2) @ li, L)

    def backward(self, g: Tensor | None) -> Any:
        if g is None:
            return None
        L = self.L
        X = cholesky_inverse(L, self.upper)
        common = X @ (g + _mT(g)) @ X
        return -(L @ common) if self.upper else -(common @ L)


def cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:
    """The inverse of ``A = L @ L.mT`` (``U.mT @ U`` with ``upper``) from its Cholesky factor;
    only that triangle of ``L`` is read, as PyTorch's. Raises ``LinAlgError`` for a zero on
    the diagonal."""
    L = _float_input("cholesky_inverse", "L", L)
    if L.numel() == 0:
        return L * 0  # (an empty inverse, on the graph)
    fn = _CholeskyInverse()
    fn.upper = bool(upper)
    return fn(L)


class _TriangularSolve(NamedTuple):
    solution: Tensor
    cloned_coefficient: Tensor


def triangular_solve(
    b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False, unitriangular: bool = False
) -> _TriangularSolve:
    """``torch.triangular_solve`` (``linalg.solve_triangular``'s older form): the solution
    of ``A @ X = b`` (``A^T @ X = b`` with ``transpose``) reading one triangle of ``A``, and a
    copy of ``A`` broadcast to the batch shape."""
    A = _float_input("triangular_solve", "A", A)
    b = _check_tensor("triangular_solve", "b", b)
    if b.ndim < 2:
        raise ShapeError(
            f"triangular_solve: b must have at least 2 dimensions, got shape {list(b.shape)}"
        )
    T = A.triu() if upper else A.tril()
    T = _mT(T) if transpose else T
    X = solve_triangular(T, b, upper=upper != transpose, unitriangular=unitriangular)
    batch = tuple(X.shape[:-2])
    return _TriangularSolve(X, A.expand(*batch, *A.shape[-2:]).clone())


TORCH_NAMES = {
    "triangular_solve": triangular_solve,
    "inverse": inverse,
    "det": det,
    "logdet": logdet,
    "slogdet": slogdet,
    "pinverse": pinverse,
    "matrix_power": matrix_power,
    "svd": _torch_svd,
    "qr": _torch_qr,
    "cholesky": _torch_cholesky,
    "cholesky_solve": cholesky_solve,
    "cholesky_inverse": cholesky_inverse,
}


def _install() -> None:
    for name, fn in TORCH_NAMES.items():
        if name not in Tensor.__dict__:
            setattr(Tensor, name, fn)


_install()
