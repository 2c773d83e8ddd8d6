"""``torch.optim.swa_utils``: weight averaging of a model over training, stochastic
(``AveragedModel`` with the default equal-weight average) or exponential
(``get_ema_multi_avg_fn(decay)``), and ``update_bn`` to recompute batch-norm statistics of
the averaged weights; ``SWALR`` anneals the learning rate to the SWA rate."""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterable
from typing import Any

from .._core import Tensor
from ..autodiff import no_grad
from ..nn.modules import Module
from .lr_scheduler import LRScheduler, _scalar

__all__ = [
    "SWALR",
    "AveragedModel",
    "get_ema_avg_fn",
    "get_ema_multi_avg_fn",
    "get_swa_avg_fn",
    "get_swa_multi_avg_fn",
    "update_bn",
]


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable[..., None]:
    """In place over lists: ``ema = decay * ema + (1 - decay) * current``."""
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"get_ema_multi_avg_fn: decay must lie in [0, 1], got {decay}")

    def ema_update(ema_list: list, current_list: list, num_averaged: Any) -> None:
        for e, c in zip(ema_list, current_list):
            e.copy_(e * decay + c * (1.0 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> Callable[..., None]:
    """In place over lists: the running mean ``avg += (current - avg) / (n + 1)``."""

    def swa_update(avg_list: list, current_list: list, num_averaged: Any) -> None:
        n = float(num_averaged.item() if isinstance(num_averaged, Tensor) else num_averaged)
        for a, c in zip(avg_list, current_list):
            a.copy_(a + (c - a) / (n + 1.0))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable[..., Tensor]:
    """``avg_fn(ema, current, n) = decay * ema + (1 - decay) * current``."""
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"get_ema_avg_fn: decay must lie in [0, 1], got {decay}")

    def ema_update(ema: Tensor, current: Tensor, num_averaged: Any) -> Tensor:
        return decay * ema + (1.0 - decay) * current

    return ema_update


def get_swa_avg_fn() -> Callable[..., Tensor]:
    """``avg_fn(avg, current, n) = avg + (current - avg) / (n + 1)``."""

    def swa_update(avg: Tensor, current: Tensor, num_averaged: Any) -> Tensor:
        n = float(num_averaged.item() if isinstance(num_averaged, Tensor) else num_averaged)
        return avg + (current - avg) / (n + 1.0)

    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` whose parameters (and buffers, with ``use_buffers``) are the
    average of ``model``'s at each :meth:`update_parameters` call: the equal-weight running
    mean by default (SWA), or what ``avg_fn`` / ``multi_avg_fn`` say (an EMA with
    :func:`get_ema_multi_avg_fn`). Calling it runs the averaged copy."""

    def __init__(
        self,
        model: Module,
        device: Any = None,
        avg_fn: Callable[..., Tensor] | None = None,
        multi_avg_fn: Callable[..., None] | None = None,
        use_buffers: bool = False,
    ) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            # (PyTorch's exception type)
            raise AssertionError("AveragedModel: give avg_fn or multi_avg_fn, not both")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        from .._ops import zeros

        self.register_buffer("n_averaged", zeros((), dtype="int64", device=device))
        self.avg_fn, self.multi_avg_fn, self.use_buffers = avg_fn, multi_avg_fn, use_buffers

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def _tensors(self, model: Module) -> Iterable:
        if self.use_buffers:
            return itertools.chain(model.parameters(), model.buffers())
        return model.parameters()

    def update_parameters(self, model: Module) -> None:
        with no_grad():
            mine, theirs = [], []
            first = int(self.n_averaged.item()) == 0
            for p_avg, p_model in zip(self._tensors(self.module), self._tensors(model)):
                cur = p_model.detach().to(p_avg.device)
                if first:
                    p_avg.copy_(cur.astype(p_avg.dtype.name))
                mine.append(p_avg)
                theirs.append(cur)
            if not first:
                floats = [(a, c) for a, c in zip(mine, theirs) if a.dtype.kind == "f"]
                a_list, c_list = [a for a, _ in floats], [c for _, c in floats]
                if self.avg_fn is not None:
                    for a, c in floats:
                        a.copy_(self.avg_fn(a, c, self.n_averaged))
                else:
                    (self.multi_avg_fn or get_swa_multi_avg_fn())(a_list, c_list, self.n_averaged)
                for a, c in zip(mine, theirs):
                    if a.dtype.kind != "f":
                        a.copy_(c)  # integer buffers (batch counts) follow the model
            if not self.use_buffers:
                # buffers are not averaged: they follow the source model
                for b_avg, b_model in zip(self.module.buffers(), model.buffers()):
                    b_avg.copy_(b_model.detach().to(b_avg.device))
            self.n_averaged += 1


def update_bn(loader: Iterable, model: Module, device: Any = None) -> None:
    """Recomputes the running statistics of every batch-norm layer of ``model`` over one
    pass of ``loader`` (its batches, or the first element of each), as cumulative averages."""
    from ..nn.extra import _InstanceNorm
    from ..nn.modules import _BatchNorm

    momenta = {}
    for m in model.modules():
        # batch norms only, as PyTorch: an instance norm tracking running statistics keeps
        # them (ferrograd's instance norms derive from the batch-norm base)
        if isinstance(m, _BatchNorm) and not isinstance(m, _InstanceNorm):
            m.reset_running_stats()
            momenta[m] = m.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for m in momenta:
        m.momentum = None
    with no_grad():
        for batch in loader:
            x = batch[0] if isinstance(batch, (list, tuple)) else batch
            if device is not None:
                x = x.to(device)
            model(x)
    for m, mom in momenta.items():
        m.momentum = mom
    model.train(was_training)


class SWALR(LRScheduler):
    """PyTorch's ``SWALR``: anneals each group's learning rate from its current value to
    ``swa_lr`` (one number, or one per group, stored as the group's ``"swa_lr"``) over
    ``anneal_epochs`` steps, by cosine (``anneal_strategy="cos"``) or linearly
    (``"linear"``), then keeps it at ``swa_lr``."""

    def __init__(
        self,
        optimizer: Any,
        swa_lr: float | list[float],
        anneal_epochs: int = 10,
        anneal_strategy: str = "cos",
        last_epoch: int = -1,
    ) -> None:
        groups = optimizer.param_groups
        if isinstance(swa_lr, (list, tuple)):
            if len(swa_lr) != len(groups):
                raise ValueError(
                    f"SWALR: swa_lr must have {len(groups)} values (one per parameter group), "
                    f"got {len(swa_lr)}"
                )
            swa_lrs = list(swa_lr)
        else:
            swa_lrs = [swa_lr] * len(groups)
        for lr, group in zip(swa_lrs, groups):
            # (a tensor's number, copied: later in-place changes to it do not reach the
            # schedule, as PyTorch's clone)
            group["swa_lr"] = _scalar(lr)
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                "SWALR: anneal_strategy must be one of 'cos' or 'linear', instead got "
                f"{anneal_strategy!r}"
            )
        self._set_anneal_func(anneal_strategy)
        if (
            isinstance(anneal_epochs, bool)
            or not isinstance(anneal_epochs, int)
            or anneal_epochs < 0
        ):
            raise ValueError(
                f"SWALR: anneal_epochs must be equal or greater than 0, got {anneal_epochs!r}"
            )
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t: float) -> float:
        return t

    @staticmethod
    def _cosine_anneal(t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy: str) -> None:
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def get_lr(self) -> list[float]:
        # (PyTorch's formula: the rate the previous step would have started from, moved on)
        self._warn_outside_step()
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        groups = self.optimizer.param_groups
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, prev_lrs)]

    def state_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
