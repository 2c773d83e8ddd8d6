"""PyTorch's ``torch.nn.utils.parametrizations``: weight and spectral normalisation as
parametrizations (:mod:`.parametrize`), the forms PyTorch recommends over the older
forward-hook versions in ``nn.utils``. The trained tensors are
``module.parametrizations.<name>.original0`` / ``original1`` (weight norm: the norms
``g`` and the direction ``v``) or ``...original`` (spectral norm), with PyTorch's
state-dict keys, so checkpoints load either way."""

from __future__ import annotations

from typing import Any

from ... import _core
from ..._core import Tensor
from ..._tensor import tensor
from ...autodiff import no_grad
from ...random import _numpy_rng
from ..modules import Module
from . import parametrize
from ._norms import _norm_except_dim

__all__ = ["spectral_norm", "weight_norm"]


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
    ``parametrizations.<name>.original0`` and ``original1``. Returns ``module``."""
    w = _tensor_named(module, name, "weight_norm")
    if dim is None:
        dim = -1
    if isinstance(dim, bool) or not isinstance(dim, int) or not -w.ndim <= dim < max(w.ndim, 1):
        raise ValueError(f"weight_norm: dim {dim!r} is out of range for a {w.ndim}-D {name!r}")
    if dim < -1:
        dim += w.ndim
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
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
        from ..extra import ConvTranspose1d
        from ..modules import ConvTranspose2d

        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d)) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(w, n_power_iterations, dim, eps)
    )
    return module
