"""MegEngine 1.x's ``megengine.optimizer`` names that PyTorch spells differently:
``clip_grad_norm``, ``clip_grad_value``, ``LRScheduler`` and ``MultiStepLR`` (with
``current_epoch``); and ``SGD``/``Adagrad``, whose arguments (and, for Adagrad, formula)
differ from PyTorch's."""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

import ferrograd as fg

from .. import optim as _optim
from .._core import Tensor


class SGD(_optim.SGD):
    """MegEngine's ``SGD(params, lr, momentum=0.0, nesterov=False, weight_decay=0.0)``:
    PyTorch's update without dampening, with MegEngine's argument order (``nesterov``
    third, where PyTorch has ``dampening``)."""

    def __init__(
        self,
        params: Any,
        lr: float,
        momentum: float = 0.0,
        nesterov: bool = False,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__(params, lr, momentum, 0.0, weight_decay, nesterov)


class Adagrad(_optim.Adagrad):
    """MegEngine's ``Adagrad(params, lr=1e-2, lr_decay=0.0, eps=1e-10, weight_decay=0.0)``:
    the step is ``lr / (1 + (t - 1) * lr_decay) * g / sqrt(sum + eps)``, ``eps`` inside the
    square root (PyTorch adds it to the root), ``sum`` the running sum of ``g * g`` from 0."""

    def __init__(
        self,
        params: Any,
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        eps: float = 1e-10,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__(params, lr, lr_decay, weight_decay, 0.0, eps)

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict, lr: Tensor) -> None:
        step = state["step"]
        step += 1.0
        clr = lr / (1.0 + (step - 1.0) * group["lr_decay"])
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p
        s = state["sum"]
        s += g * g
        p -= clr * (g / (s + group["eps"]).sqrt())


def _with_grad(tensors: Any) -> list:
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    return [t for t in tensors if t.grad is not None]


def clip_grad_norm(tensors: Any, max_norm: float, ord: float = 2.0) -> Tensor:
    """Scales the gradients of ``tensors`` in place so that their joint ``ord``-norm is at
    most ``max_norm`` (by ``min(max_norm / (norm + 1e-6), 1)``); returns the norm before
    clipping."""
    ts = _with_grad(tensors)
    if not ts:
        return fg.tensor(0.0, dtype="float32")
    with fg.no_grad():
        norms = [fg.linalg.vector_norm(t.grad.reshape(-1), ord) for t in ts]
        total = norms[0] if len(norms) == 1 else fg.linalg.vector_norm(fg.stack(norms), ord)
        scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for t in ts:
            t.grad = t.grad * scale.astype(t.grad.dtype)
    return total


def clip_grad_value(tensors: Any, lower: float, upper: float) -> None:
    """Clamps the gradients of ``tensors`` to ``[lower, upper]`` in place."""
    with fg.no_grad():
        for t in _with_grad(tensors):
            t.grad = t.grad.clamp(lower, upper)


class LRScheduler:
    """MegEngine's base learning-rate scheduler: ``current_epoch`` starts at -1 and the
    constructor takes the first ``step()``; subclasses define ``get_lr()``."""

    def __init__(self, optimizer: Any, current_epoch: int = -1) -> None:
        if not isinstance(optimizer, fg.optim.Optimizer):
            raise TypeError("optimizer argument given to the lr_scheduler should be Optimizer")
        self.optimizer = optimizer
        self.current_epoch = current_epoch
        if current_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        "resuming an optimizer"
                    )
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.step()

    def state_dict(self) -> dict:
        raise NotImplementedError

    def load_state_dict(self, state_dict: dict) -> None:
        raise NotImplementedError

    def get_lr(self) -> list:
        raise NotImplementedError

    def step(self, epoch: int | None = None) -> None:
        """Advances ``current_epoch`` (or sets it to ``epoch``) and sets the groups' lr."""
        self.current_epoch = self.current_epoch + 1 if epoch is None else epoch
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr


class MultiStepLR(LRScheduler):
    """Multiplies the initial learning rates by ``gamma`` once per milestone passed:
    ``lr = initial_lr * gamma ** bisect_right(milestones, current_epoch)``."""

    def __init__(
        self, optimizer: Any, milestones: Any, gamma: float = 0.1, current_epoch: int = -1
    ) -> None:
        if list(milestones) != sorted(milestones):
            raise ValueError(
                f"Milestones should be a list of increasing integers. Got {milestones}"
            )
        self.milestones = milestones
        self.gamma = gamma
        super().__init__(optimizer, current_epoch)

    def state_dict(self) -> dict:
        return {k: self.__dict__[k] for k in ("milestones", "gamma", "current_epoch")}

    def load_state_dict(self, state_dict: dict) -> None:
        for key in ("milestones", "gamma", "current_epoch"):
            if key not in state_dict:
                raise KeyError(f"key '{key}' is not specified in state_dict when loading")
        self.__dict__.update({k: state_dict[k] for k in ("milestones", "gamma", "current_epoch")})

    def get_lr(self) -> list:
        k = bisect_right(self.milestones, self.current_epoch)
        return [base * self.gamma**k for base in self.base_lrs]


NAMES = ["clip_grad_norm", "clip_grad_value", "LRScheduler", "MultiStepLR"]
