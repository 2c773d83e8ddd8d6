"""PyTorch's ``torch.nn.utils.parametrizations``: weight and spectral normalisation as
parametrizations (:mod:`.parametrize`), the forms PyTorch recommends over the older
forward-hook versions in ``nn.utils``. The trained tensors are
``module.parametrizations.<name>.original0`` / ``original1`` (weight norm: the norms
``g`` and the direction ``v``) or ``...original`` (spectral norm, orthogonal), with
PyTorch's state-dict keys, so checkpoints load either way. :func:`orthogonal` keeps a
matrix (semi-)orthogonal by the matrix exponential, Cayley or Householder maps."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import _core
from ..._core import Tensor
from ..._tensor import tensor
from ...autodiff import no_grad
from ...random import _numpy_rng
from ..modules import Module
from . import parametrize
from ._norms import _check_dim, _default_spectral_dim, _norm_except_dim

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


class _WeightNorm(Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:  # type: ignore[override]
        return weight_v * (weight_g / _norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return _norm_except_dim(weight, self.dim), weight


def _tensor_named(module: Any, name: str, op: str) -> Tensor:
    if parametrize.is_parametrized(module, name):
        w = getattr(module, name)
    else:
        d = module.__dict__
        w = d.get(name, d.get("_parameters", {}).get(name))
    if not isinstance(w, Tensor):
        raise ValueError(  # noqa: TRY004 (PyTorch raises ValueError)
            f"{op}: module {type(module).__name__} has no parameter or buffer named {name!r}"
        )
    return w


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """``module.<name>`` becomes ``g * v / ||v||`` with the norm over every axis but ``dim``
    (``dim=None``: one norm of the whole tensor); ``g`` and ``v`` are trained, as
    ``parametrizations.<name>.original0`` and ``original1`` (a state dict of the hook-based
    ``nn.utils.weight_norm``, with ``<name>_g`` and ``<name>_v``, loads too). Returns
    ``module``."""
    w = _tensor_named(module, name, "weight_norm")
    if dim is None:
        dim = -1
    _check_dim("weight_norm", dim, w.ndim, name, max(w.ndim, 1))
    if dim < -1:
        dim += w.ndim
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def load_hook_style_keys(state_dict: Any, prefix: str, *_: Any) -> None:
        # a checkpoint of the hook-based nn.utils.weight_norm names g and v
        # `<name>_g` / `<name>_v`: they are this form's original0 / original1
        g, v = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g in state_dict and v in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v)

    module._register_load_state_dict_pre_hook(load_hook_style_keys)
    return module


def _normalize(x: Tensor, eps: float) -> Tensor:
    return x / (x * x).sum().sqrt().clamp(min=eps)


class _SpectralNorm(Module):
    def __init__(self, weight: Tensor, n_power_iterations: int, dim: int, eps: float) -> None:
        super().__init__()
        nd = weight.ndim
        if not -nd <= dim < max(nd, 1):
            raise IndexError(f"spectral_norm: dim {dim} is out of range for a {nd}-D weight")
        if n_power_iterations <= 0:
            raise ValueError(
                f"spectral_norm: n_power_iterations must be positive, got {n_power_iterations}"
            )
        self.dim = dim % nd if nd else 0
        self.eps = float(eps)
        self.n_power_iterations = n_power_iterations
        if nd > 1:
            with no_grad():
                m = self._matrix(weight.detach())
                h, w = m.shape
                rng = _numpy_rng(weight.device)
                dt = weight.dtype.name
                u = tensor(rng.standard_normal(h), device=weight.device).astype(dt)
                v = tensor(rng.standard_normal(w), device=weight.device).astype(dt)
                self.register_buffer("_u", _normalize(u, self.eps).copy())
                self.register_buffer("_v", _normalize(v, self.eps).copy())
                self._power_method(m, 15)

    def _matrix(self, w: Tensor) -> Tensor:
        if self.dim != 0:
            w = w.permute(self.dim, *[a for a in range(w.ndim) if a != self.dim])
        return w.reshape(w.shape[0], -1)

    def _power_method(self, m: Tensor, n: int) -> None:
        with no_grad():
            u, v = self._u, self._v
            for _ in range(n):
                u = _normalize(_core.matmul(m, v.reshape(-1, 1)).reshape(-1), self.eps)
                v = _normalize(_core.matmul(u.reshape(1, -1), m).reshape(-1), self.eps)
            self._u.copy_(u)  # the estimates are buffers updated in place, as PyTorch's
            self._v.copy_(v)

    def forward(self, weight: Tensor) -> Tensor:  # type: ignore[override]
        if weight.ndim == 1:
            return _normalize(weight, self.eps)
        m = self._matrix(weight)
        if self.training:
            self._power_method(m.detach(), self.n_power_iterations)
        u, v = self._u.detach().copy(), self._v.detach().copy()
        sigma = (u * _core.matmul(m, v.reshape(-1, 1)).reshape(-1)).sum()
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    """``module.<name>`` divided by its largest singular value (of the tensor as a matrix
    with axis ``dim`` first; ``dim`` defaults to 1 for transposed convolutions, else 0),
    estimated by power iteration: 15 steps at registration, ``n_power_iterations`` per read
    in training mode, none in eval mode. The estimates are the buffers
    ``parametrizations.<name>.0._u`` and ``._v``. Returns ``module``."""
    w = _tensor_named(module, name, "spectral_norm")
    if isinstance(n_power_iterations, bool) or not isinstance(n_power_iterations, int):
        raise TypeError(
            f"spectral_norm: n_power_iterations must be an int, got {n_power_iterations!r}"
        )
    if dim is None:
        dim = _default_spectral_dim(module)
    parametrize.register_parametrization(
        module, name, _SpectralNorm(w, n_power_iterations, dim, eps)
    )
    return module


def _eye_like(n: int, ref: Tensor) -> Tensor:
    return tensor(np.eye(n), device=ref.device).astype(ref.dtype.name)


def _householder_product(a: Tensor, tau: Tensor) -> Tensor:
    """PyTorch's ``linalg.householder_product`` (real): the first ``k`` columns of
    ``H_1 ... H_k``, ``H_i = I - tau_i v_i v_i^T`` with ``v_i`` the column ``i`` of ``a``
    below the diagonal and a 1 on it; composed of differentiable ops."""
    n, k = a.shape[-2], a.shape[-1]
    lead = tuple(a.shape[:-2])
    q = _eye_like(n, a)
    if lead:
        q = q.reshape(*([1] * len(lead)), n, n) * _core.ones((*lead, 1, 1)).astype(a.dtype.name)
    below = tensor(np.tril(np.ones((n, k)), -1), device=a.device).astype(a.dtype.name)
    ek = tensor(np.eye(n, k), device=a.device).astype(a.dtype.name)
    vs = a * below + ek
    for i in range(k):
        v = vs[..., :, i : i + 1]
        t = tau[..., i : i + 1].reshape(*lead, 1, 1)
        q = q - _core.matmul(_core.matmul(q, v), v.mT) * t
    return q[..., :k]


def _geqrf(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """LAPACK's ``geqrf`` (``dgeqr2``: Householder QR, ``R`` on and above the diagonal, the
    reflectors' vectors below it) of each matrix of ``a``."""
    a = np.array(a, dtype=np.float64, copy=True)
    lead = a.shape[:-2]
    m, n = a.shape[-2:]
    kk = min(m, n)
    flat = a.reshape(-1, m, n)
    taus = np.zeros((flat.shape[0], kk))
    for b in range(flat.shape[0]):
        r = flat[b]
        for j in range(kk):
            alpha = r[j, j]
            xnorm = np.linalg.norm(r[j + 1 :, j])
            if xnorm == 0.0:
                continue  # tau = 0: H = I
            beta = -math.copysign(math.hypot(alpha, xnorm), alpha)
            taus[b, j] = (beta - alpha) / beta
            r[j + 1 :, j] /= alpha - beta
            r[j, j] = beta
            v = np.concatenate([[1.0], r[j + 1 :, j]])
            r[j:, j + 1 :] -= taus[b, j] * np.outer(v, v @ r[j:, j + 1 :])
    return flat.reshape(a.shape), taus.reshape(*lead, kk)


def _make_orthogonal(a: Tensor) -> Tensor:
    """The ``Q`` of ``a = QR`` (``a`` tall) with ``diag(R)`` made non-negative."""
    q, r = _linalg_qr(a)
    d = r.diagonal(dim1=-2, dim2=-1)
    sign = _core.where(d < 0, d * 0.0 - 1.0, d * 0.0 + 1.0)
    return q * sign.unsqueeze(-2)


def _linalg_qr(a: Tensor) -> Any:
    from ... import linalg

    return linalg.qr(a)


def _is_orthogonal(q: Tensor) -> bool:
    n, k = q.shape[-2], q.shape[-1]
    eps = 10.0 * n * float(np.finfo(np.dtype(q.dtype.name)).eps)
    qtq = _core.matmul(q.mT, q).numpy()
    return bool(np.allclose(qtq, np.eye(k), rtol=1e-5, atol=eps))


_ORTH_MAPS = ("matrix_exp", "cayley", "householder")


class _Orthogonal(Module):
    def __init__(self, weight: Tensor, orthogonal_map: str, use_trivialization: bool) -> None:
        super().__init__()
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        self.use_trivialization = bool(use_trivialization)
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, x: Tensor) -> Tensor:  # type: ignore[override]
        n, k = x.shape[-2], x.shape[-1]
        transposed = n < k
        if transposed:
            x = x.mT
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            x = x.tril()
            if n != k:
                zeros = _core.zeros((*x.shape[:-2], n, n - k)).astype(x.dtype.name)
                x = _core.concat([x, zeros.to(x.device)], -1)
            a = x - x.mT
            if self.orthogonal_map == "matrix_exp":
                from ... import matrix_exp

                q = matrix_exp(a)
            else:
                from ... import linalg

                eye = _eye_like(n, a)
                q = linalg.solve(eye - 0.5 * a, eye + 0.5 * a)
            if n != k:
                q = q[..., :k]
        else:
            a = x.tril(-1)
            tau = 2.0 / (1.0 + (a * a).sum(-2))
            q = _householder_product(a, tau)
            # the diagonal of x holds the signs (truncated to integers, not trained)
            q = q * x.detach().diagonal(dim1=-2, dim2=-1).trunc().unsqueeze(-2)
        if self.use_trivialization and self.base is not None:
            q = _core.matmul(self.base, q)
        if transposed:
            q = q.mT
        return q

    def right_inverse(self, q: Tensor) -> Tensor:
        with no_grad():
            if tuple(q.shape) != self.shape:
                raise ValueError(
                    f"Expected a matrix or batch of matrices of shape {self.shape}. "
                    f"Got a tensor of shape {tuple(q.shape)}."
                )
            q_init = q
            n, k = q.shape[-2], q.shape[-1]
            transpose = n < k
            if transpose:
                q = q.mT
                n, k = k, n
            if not self.use_trivialization:
                if self.orthogonal_map in ("matrix_exp", "cayley"):
                    raise NotImplementedError(
                        "It is not possible to assign to the matrix exponential or the Cayley "
                        "parametrizations when use_trivialization=False."
                    )
                a, tau = _geqrf(q.detach().astype("float64").numpy())
                idx = np.arange(k)
                d = np.sign(a[..., idx, idx])
                d = np.where(tau == 0.0, -d, d)
                a[..., idx, idx] = d
                out = tensor(a, device=q.device).astype(q.dtype.name)
                return out.mT.copy() if transpose else out
            if n == k:
                q = _make_orthogonal(q) if not _is_orthogonal(q) else q.detach().copy()
            else:
                extra = tensor(
                    _numpy_rng(q.device).standard_normal((*q.shape[:-2], n, n - k)),
                    device=q.device,
                ).astype(q.dtype.name)
                q = _make_orthogonal(_core.concat([q.detach(), extra], -1))
            self.base = q.detach().copy()
            neg_id = tensor(
                np.broadcast_to(-np.eye(*q_init.shape[-2:]), tuple(q_init.shape)).copy(),
                device=q_init.device,
            ).astype(q_init.dtype.name)
            return neg_id


def orthogonal(
    module: Module,
    name: str = "weight",
    orthogonal_map: str | None = None,
    *,
    use_trivialization: bool = True,
) -> Module:
    """``module.<name>`` (a matrix or a batch of them) becomes orthogonal (semi-orthogonal
    when not square), as PyTorch's: ``"matrix_exp"`` or ``"cayley"`` of the skew-symmetric
    part of the trained lower triangle, or a product of ``"householder"`` reflectors
    (``None``: matrix_exp for square matrices, householder otherwise). With
    ``use_trivialization`` (default) the map is applied around the buffer ``base``, set by
    assignment; the trained tensor is ``parametrizations.<name>.original``. Returns
    ``module``."""
    w = _tensor_named(module, name, "orthogonal")
    if w.ndim < 2:
        raise ValueError(
            f"Expected a matrix or batch of matrices. Got a tensor of {w.ndim} dimensions."
        )
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if w.shape[-2] == w.shape[-1] else "householder"
    if orthogonal_map not in _ORTH_MAPS:
        raise ValueError(
            'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
            f"Got: {orthogonal_map}"
        )
    orth = _Orthogonal(w, orthogonal_map, use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
