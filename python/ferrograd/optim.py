"""Optimizers. Updates are in place and unrecorded, so attached parameters stay the same
objects across steps."""

from __future__ import annotations

from collections.abc import Iterable

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
        if lr <= 0:
            raise ValueError(f"{type(self).__name__}: learning rate must be positive, got {lr}")
        self.lr = lr

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
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.nesterov = nesterov
        self._buf: dict[int, Tensor] = {}

    def step(self) -> None:
        with no_grad():
            for i, p in enumerate(self.params):
                g: Tensor | None = p.grad
                if g is None:
                    continue
                if self.weight_decay:
                    g = g + self.weight_decay * p
                if self.momentum:
                    buf = self._buf.get(i)
                    if buf is None:
                        buf = g.copy()
                        self._buf[i] = buf
                    else:
                        buf *= self.momentum
                        buf += g
                    g = g + self.momentum * buf if self.nesterov else buf
                p -= self.lr * g


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
        self.eps = eps
        self.weight_decay = weight_decay
        self.t = 0
        self._m: dict[int, Tensor] = {}
        self._v: dict[int, Tensor] = {}

    def step(self) -> None:
        self.t += 1
        c1 = 1.0 - self.b1**self.t
        c2 = 1.0 - self.b2**self.t
        with no_grad():
            for i, p in enumerate(self.params):
                g = p.grad
                if g is None:
                    continue
                if self.weight_decay:
                    g = g + self.weight_decay * p
                m = self._m.get(i)
                v = self._v.get(i)
                if m is None:
                    m = (1.0 - self.b1) * g
                    v = (1.0 - self.b2) * (g * g)
                    self._m[i], self._v[i] = m, v
                else:
                    m *= self.b1
                    m += (1.0 - self.b1) * g
                    v *= self.b2
                    v += (1.0 - self.b2) * (g * g)
                p -= self.lr * (m / c1) / ((v / c2).sqrt() + self.eps)
