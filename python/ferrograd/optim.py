"""Optimizers. Updates are in place and unrecorded, so attached parameters stay the same
objects across steps.

Optimizer state (momentum buffers, Adam's moments and step count) and the learning rate are
tensors made when the optimizer is: a traced training step (``fg.trace``) captures them by
reference, so every call of the traced step updates them, and setting ``opt.lr`` between
calls (a schedule) reaches the traced step too.
"""

from __future__ import annotations

from collections.abc import Iterable

from . import _core
from ._core import Tensor
from .autodiff import no_grad


class Optimizer:
    def __init__(self, params: Iterable[Tensor], lr: float) -> None:
        self.params: list[Tensor] = list(params)
        if not self.params:
            raise ValueError(f"{type(self).__name__}: got no parameters")
        for i, p in enumerate(self.params):
            if not isinstance(p, Tensor):
                raise TypeError(f"{type(self).__name__}: parameter {i} is a {type(p).__name__}")
            if p.dtype.kind != "f":
                raise TypeError(
                    f"{type(self).__name__}: parameter {i} is a {p.dtype} tensor; only float "
                    "tensors can be optimized"
                )
        # one 0-d learning-rate tensor per parameter dtype, kept equal to `lr`
        self._lr_tensors: dict[str, Tensor] = {}
        self._lr = 0.0
        self.lr = lr
        for p in self.params:
            self._lr_for(p)

    @property
    def lr(self) -> float:
        """The learning rate (settable between steps, also for a traced step)."""
        return self._lr

    @lr.setter
    def lr(self, value: float) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(
                f"{type(self).__name__}: learning rate must be a number, got {type(value).__name__}"
            )
        if not value > 0:
            raise ValueError(f"{type(self).__name__}: learning rate must be positive, got {value}")
        self._lr = float(value)
        with no_grad():
            for t in self._lr_tensors.values():
                t.fill_(self._lr)

    def _lr_for(self, p: Tensor) -> Tensor:
        key = str(p.dtype)
        t = self._lr_tensors.get(key)
        if t is None:
            t = _core.full((), self._lr, dtype=p.dtype)
            self._lr_tensors[key] = t
        return t

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        raise NotImplementedError


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum and weight decay (PyTorch's form)."""

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
    ) -> None:
        super().__init__(params, lr)
        if momentum < 0:
            raise ValueError(f"SGD: momentum must be non-negative, got {momentum}")
        if weight_decay < 0:
            raise ValueError(f"SGD: weight_decay must be non-negative, got {weight_decay}")
        if nesterov and momentum <= 0:
            raise ValueError("SGD: nesterov needs a positive momentum")
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.nesterov = nesterov
        # the momentum buffers start at zero: the first step's buffer is the gradient itself
        self._buf: list[Tensor | None] = [
            _core.zeros_like(p) if momentum else None for p in self.params
        ]

    def step(self) -> None:
        with no_grad():
            for i, p in enumerate(self.params):
                g: Tensor | None = p.grad
                if g is None:
                    continue
                if self.weight_decay:
                    g = g + self.weight_decay * p
                buf = self._buf[i]
                if buf is not None:
                    buf *= self.momentum
                    buf += g
                    g = g + self.momentum * buf if self.nesterov else buf
                p -= self._lr_for(p) * g


class Adam(Optimizer):
    """Adam (Kingma and Ba, 2015)."""

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__(params, lr)
        self.b1, self.b2 = betas
        if not (0.0 <= self.b1 < 1.0 and 0.0 <= self.b2 < 1.0):
            raise ValueError(f"Adam: betas must be in [0, 1), got {tuple(betas)}")
        self.eps = eps
        self.weight_decay = weight_decay
        # the step count, a tensor so that a traced step counts too
        self._t = _core.zeros((), dtype="float64")
        self._m: list[Tensor] = [_core.zeros_like(p) for p in self.params]
        self._v: list[Tensor] = [_core.zeros_like(p) for p in self.params]

    @property
    def t(self) -> int:
        """Steps taken."""
        return int(self._t.item())

    def step(self) -> None:
        with no_grad():
            self._t += 1.0
            # bias corrections, in float64 as Python computes them, then in each dtype
            c1 = 1.0 - self.b1**self._t
            c2 = 1.0 - self.b2**self._t
            corr: dict[str, tuple[Tensor, Tensor]] = {}
            for i, p in enumerate(self.params):
                g = p.grad
                if g is None:
                    continue
                if self.weight_decay:
                    g = g + self.weight_decay * p
                key = str(p.dtype)
                if key not in corr:
                    corr[key] = (c1.astype(p.dtype), c2.astype(p.dtype))
                k1, k2 = corr[key]
                m, v = self._m[i], self._v[i]
                m *= self.b1
                m += (1.0 - self.b1) * g
                v *= self.b2
                v += (1.0 - self.b2) * (g * g)
                p -= self._lr_for(p) * (m / k1) / ((v / k2).sqrt() + self.eps)
