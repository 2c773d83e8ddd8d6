"""Learning-rate schedules with PyTorch's API and formulas: each ``step()`` sets the
``"lr"`` of every parameter group (which also reaches a traced training step)."""

from __future__ import annotations

import bisect
import collections
import math
import types
from typing import Any

__all__ = [
    "ChainedScheduler",
    "ConstantLR",
    "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts",
    "CyclicLR",
    "ExponentialLR",
    "LRScheduler",
    "LambdaLR",
    "LinearLR",
    "MultiStepLR",
    "MultiplicativeLR",
    "OneCycleLR",
    "PolynomialLR",
    "ReduceLROnPlateau",
    "SequentialLR",
    "StepLR",
]


class LRScheduler:
    """Base class: ``get_lr()`` gives each group's rate at ``last_epoch``; construction
    takes the first step (epoch 0), as PyTorch."""

    def __init__(self, optimizer: Any, last_epoch: int = -1) -> None:
        from . import Optimizer

        if not isinstance(optimizer, Optimizer):
            raise TypeError(
                f"{type(self).__name__}: {type(optimizer).__name__} is not an Optimizer"
            )
        self.optimizer = optimizer
        if last_epoch == -1:
            for g in optimizer.param_groups:
                g.setdefault("initial_lr", g["lr"])
        else:
            for i, g in enumerate(optimizer.param_groups):
                if "initial_lr" not in g:
                    raise KeyError(
                        f"{type(self).__name__}: param 'initial_lr' is not specified in "
                        f"param_groups[{i}] when resuming an optimizer"
                    )
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._last_lr: list[float] = [g["lr"] for g in optimizer.param_groups]
        self._get_lr_called_within_step = False
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    # PyTorch's schedulers whose first step (in the constructor) keeps the groups' rates: a
    # scheduler made with ``last_epoch`` of a resumed run does not move them a step ahead
    _initial_keeps_lr = False

    def _keeps_initial_lr(self) -> bool:
        return self._initial_keeps_lr

    def get_lr(self) -> list[float]:
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        return list(self._last_lr)

    def _chain_lr(self) -> list[float] | None:
        """PyTorch's step-to-step ("chainable") form, from the groups' current rates: what a
        plain ``step()`` uses, so schedulers stepped together compose as in PyTorch. None:
        this scheduler has only the closed form."""
        return None

    def _lrs(self) -> list[float]:
        return [g["lr"] for g in self.optimizer.param_groups]

    def step(self, epoch: int | None = None) -> None:
        self._step_count = getattr(self, "_step_count", 0) + 1
        self.last_epoch = self.last_epoch + 1 if epoch is None else int(epoch)
        if getattr(self, "_is_initial", False) and self._keeps_initial_lr():
            self._last_lr = self._lrs()
            return
        chained = self._chain_lr() if epoch is None else None
        for g, lr in zip(self.optimizer.param_groups, chained or self.get_lr()):
            g["lr"] = lr
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "optimizer" and not callable(v)}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)


_LRScheduler = LRScheduler


def _lambdas_state(s: LRScheduler) -> dict:
    """PyTorch's state of a scheduler with ``lr_lambdas``: None for each function, the
    attributes of each callable object."""
    state = {k: v for k, v in s.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
    state["lr_lambdas"] = [
        None if isinstance(f, types.FunctionType) else dict(getattr(f, "__dict__", {}))
        for f in s.lr_lambdas
    ]
    return state


def _load_lambdas_state(s: LRScheduler, state_dict: dict) -> None:
    state = dict(state_dict)
    lambdas = state.pop("lr_lambdas", None) or []
    s.__dict__.update(state)
    for f, saved in zip(s.lr_lambdas, lambdas):
        if saved is not None:
            f.__dict__.update(saved)


class StepLR(LRScheduler):
    """``base_lr * gamma ** (epoch // step_size)``."""

    def __init__(
        self, optimizer: Any, step_size: int, gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        if step_size <= 0:
            raise ValueError(f"StepLR: step_size must be positive, got {step_size}")
        self.step_size, self.gamma = int(step_size), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]

    def _chain_lr(self) -> list[float]:
        e = self.last_epoch
        f = self.gamma if e != 0 and e % self.step_size == 0 else 1.0
        return [lr * f for lr in self._lrs()]


class MultiStepLR(LRScheduler):
    """``base_lr * gamma ** (number of milestones passed)``."""

    def __init__(
        self, optimizer: Any, milestones: list[int], gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        # a Counter, as PyTorch keeps it (so state dicts load across)
        self.milestones, self.gamma = collections.Counter(int(m) for m in milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        k = bisect.bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [b * self.gamma**k for b in self.base_lrs]

    def _chain_lr(self) -> list[float]:
        k = self.milestones[self.last_epoch]
        return [lr * self.gamma**k for lr in self._lrs()]

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        if not isinstance(self.milestones, collections.Counter):
            self.milestones = collections.Counter(int(m) for m in self.milestones)


class ExponentialLR(LRScheduler):
    """``base_lr * gamma ** epoch``."""

    _initial_keeps_lr = True

    def __init__(self, optimizer: Any, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [b * self.gamma**self.last_epoch for b in self.base_lrs]

    def _chain_lr(self) -> list[float]:
        f = self.gamma if self.last_epoch != 0 else 1.0
        return [lr * f for lr in self._lrs()]


class CosineAnnealingLR(LRScheduler):
    """``eta_min + (base_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2``."""

    _initial_keeps_lr = True

    def __init__(
        self, optimizer: Any, T_max: int, eta_min: float = 0.0, last_epoch: int = -1
    ) -> None:
        if T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max}")
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        c = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
        return [self.eta_min + (b - self.eta_min) * c for b in self.base_lrs]

    def _chain_lr(self) -> list[float]:
        # PyTorch's recursive form (it differs from the closed form once the rates were
        # changed by anything else, or after a resume)
        e, t, lo = self.last_epoch, self.T_max, self.eta_min
        if e == 0:
            return self._lrs()
        if self._step_count == 1 and e > 0:
            return self.get_lr()
        if (e - 1 - t) % (2 * t) == 0:
            f = (1 - math.cos(math.pi / t)) / 2
            return [lr + (b - lo) * f for lr, b in zip(self._lrs(), self.base_lrs)]
        r = (1 + math.cos(math.pi * e / t)) / (1 + math.cos(math.pi * (e - 1) / t))
        return [r * (lr - lo) + lo for lr in self._lrs()]


class LambdaLR(LRScheduler):
    """``base_lr * lr_lambda(epoch)`` (one function, or one per group)."""

    def __init__(self, optimizer: Any, lr_lambda: Any, last_epoch: int = -1) -> None:
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"LambdaLR: expected {n} lr_lambdas, got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [b * f(self.last_epoch) for b, f in zip(self.base_lrs, self.lr_lambdas)]

    def state_dict(self) -> dict:
        return _lambdas_state(self)

    def load_state_dict(self, state_dict: dict) -> None:
        _load_lambdas_state(self, state_dict)


class LinearLR(LRScheduler):
    """A factor going linearly from ``start_factor`` to ``end_factor`` over
    ``total_iters`` steps, then staying."""

    def _keeps_initial_lr(self) -> bool:
        # (a new schedule starts at base_lr * start_factor)
        return self.last_epoch != 0

    def __init__(
        self,
        optimizer: Any,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ValueError(
                "LinearLR: start_factor must lie in (0, 1] and end_factor in [0, 1], got "
                f"{start_factor} and {end_factor}"
            )
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        t = min(self.last_epoch, self.total_iters)
        f = self.start_factor + (self.end_factor - self.start_factor) * t / self.total_iters
        return [b * f for b in self.base_lrs]

    def _chain_lr(self) -> list[float]:
        e, n = self.last_epoch, self.total_iters
        if e == 0:
            return [lr * self.start_factor for lr in self._lrs()]
        if e > n:
            return self._lrs()
        d = self.end_factor - self.start_factor
        f = 1.0 + d / (n * self.start_factor + (e - 1) * d)
        return [lr * f for lr in self._lrs()]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith): warm up from ``max_lr / div_factor`` to ``max_lr`` over
    ``pct_start`` of the steps, then anneal to ``initial / final_div_factor`` (cosine or
    linear); momentum (or Adam's ``beta1``) cycles the other way."""

    def __init__(
        self,
        optimizer: Any,
        max_lr: Any,
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float = 0.85,
        max_momentum: float = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
            total_steps = epochs * steps_per_epoch
        if total_steps <= 0:
            raise ValueError(f"OneCycleLR: total_steps must be positive, got {total_steps}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("OneCycleLR: anneal_strategy must be 'cos' or 'linear'")
        self.total_steps = total_steps
        self.anneal_strategy = anneal_strategy
        groups = optimizer.param_groups
        max_lrs = list(max_lr) if isinstance(max_lr, (list, tuple)) else [max_lr] * len(groups)
        if last_epoch == -1:
            for g, m in zip(groups, max_lrs):
                g["initial_lr"] = m / div_factor
                g["max_lr"] = m
                g["min_lr"] = g["initial_lr"] / final_div_factor
        end = float(pct_start * total_steps) - 1
        if three_phase:
            self._phases = [
                (end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (2 * end, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                (total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self._phases = [
                (end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            for g in groups:
                self._use_betas = "betas" in g
                if last_epoch == -1:
                    g["max_momentum"], g["base_momentum"] = max_momentum, base_momentum
                    self._set_momentum(g, max_momentum)
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _set_momentum(g: dict, m: float) -> None:
        if "betas" in g:
            g["betas"] = (m, *g["betas"][1:])
        elif "momentum" in g:
            g["momentum"] = m

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(
                f"OneCycleLR: tried to step {step} times, more than total_steps {self.total_steps}"
            )
        lrs = []
        for g in self.optimizer.param_groups:
            start_step = 0.0
            for i, (end_step, lr0, lr1, m0, m1) in enumerate(self._phases):
                if step <= end_step or i == len(self._phases) - 1:
                    pct = (step - start_step) / (end_step - start_step)
                    lr = self._anneal(g[lr0], g[lr1], pct)
                    if self.cycle_momentum:
                        self._set_momentum(g, self._anneal(g[m0], g[m1], pct))
                    break
                start_step = end_step
            lrs.append(lr)
        return lrs


class SequentialLR(LRScheduler):
    """Runs ``schedulers`` one after another, switching at each of ``milestones``."""

    def __init__(
        self, optimizer: Any, schedulers: list, milestones: list[int], last_epoch: int = -1
    ) -> None:
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                f"SequentialLR: expected {len(schedulers) - 1} milestones for "
                f"{len(schedulers)} schedulers, got {len(milestones)}"
            )
        for s in schedulers:
            if s.optimizer is not optimizer:
                raise ValueError("SequentialLR: every scheduler must drive the same optimizer")
        self.optimizer = optimizer
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        # undo the steps the later schedulers took when they were made
        for g, lr in zip(optimizer.param_groups, [g["initial_lr"] for g in optimizer.param_groups]):
            g["lr"] = lr
        for s in self._schedulers:
            s.last_epoch -= 1
        self._schedulers[0].step()
        self._last_lr = self._schedulers[0].get_last_lr()

    def step(self, epoch: int | None = None) -> None:
        self.last_epoch += 1
        idx = bisect.bisect_right(self._milestones, self.last_epoch)
        s = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            s.step(0)
        else:
            s.step()
        self._last_lr = s.get_last_lr()

    def state_dict(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        inner = state.pop("_schedulers")
        self.__dict__.update(state)
        for s, sd in zip(self._schedulers, inner):
            s.load_state_dict(sd)


class ReduceLROnPlateau:
    """Multiplies the rates by ``factor`` when ``step(metric)`` has not improved for
    ``patience`` steps (``mode`` "min" or "max", relative or absolute ``threshold``)."""

    def __init__(
        self,
        optimizer: Any,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: Any = 0.0,
        eps: float = 1e-8,
    ) -> None:
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be < 1, got {factor}")
        if mode not in ("min", "max") or threshold_mode not in ("rel", "abs"):
            raise ValueError("ReduceLROnPlateau: mode must be min/max, threshold_mode rel/abs")
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        self.min_lrs = list(min_lr) if isinstance(min_lr, (list, tuple)) else [min_lr] * n
        self.mode, self.factor, self.patience = mode, factor, patience
        self.threshold, self.threshold_mode = threshold, threshold_mode
        self.cooldown, self.eps = cooldown, eps
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = 0
        self.cooldown_counter = 0
        self.last_epoch = 0
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    def _better(self, a: float, best: float) -> bool:
        if self.mode == "min":
            ref = (
                best * (1 - self.threshold)
                if self.threshold_mode == "rel"
                else best - self.threshold
            )
            return a < ref
        ref = best * (1 + self.threshold) if self.threshold_mode == "rel" else best + self.threshold
        return a > ref

    def step(self, metrics: Any) -> None:
        current = float(metrics.item() if hasattr(metrics, "item") else metrics)
        self.last_epoch += 1
        if self._better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for g, lo in zip(self.optimizer.param_groups, self.min_lrs):
                new = max(g["lr"] * self.factor, lo)
                if g["lr"] - new > self.eps:
                    g["lr"] = new
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        return list(self._last_lr)

    def state_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)


class MultiplicativeLR(LRScheduler):
    """Each step multiplies the rate by ``lr_lambda(epoch)`` (one function, or one per
    group)."""

    _initial_keeps_lr = True

    def __init__(self, optimizer: Any, lr_lambda: Any, last_epoch: int = -1) -> None:
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"MultiplicativeLR: expected {n} lr_lambdas, got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self.last_epoch <= 0:
            return [g["lr"] for g in groups]
        return [g["lr"] * f(self.last_epoch) for g, f in zip(groups, self.lr_lambdas)]

    def state_dict(self) -> dict:
        return _lambdas_state(self)

    def load_state_dict(self, state_dict: dict) -> None:
        _load_lambdas_state(self, state_dict)


class ConstantLR(LRScheduler):
    """``base_lr * factor`` for the first ``total_iters`` steps, then ``base_lr``."""

    def __init__(
        self, optimizer: Any, factor: float = 1.0 / 3, total_iters: int = 5, last_epoch: int = -1
    ) -> None:
        if not 0.0 <= factor <= 1.0:
            raise ValueError(f"ConstantLR: factor must lie in [0, 1], got {factor}")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        f = self.factor if self.last_epoch < self.total_iters else 1.0
        return [b * f for b in self.base_lrs]

    def _chain_lr(self) -> list[float] | None:
        if self.factor == 0:
            return None  # (the closed form; the step form would divide by 0)
        e = self.last_epoch
        f = self.factor if e == 0 else (1.0 / self.factor if e == self.total_iters else 1.0)
        return [lr * f for lr in self._lrs()]


class PolynomialLR(LRScheduler):
    """``base_lr * (1 - min(epoch, total_iters) / total_iters) ** power``."""

    _initial_keeps_lr = True

    def __init__(
        self, optimizer: Any, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1
    ) -> None:
        if total_iters <= 0:
            raise ValueError(f"PolynomialLR: total_iters must be positive, got {total_iters}")
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        t = min(self.last_epoch, self.total_iters)
        f = (1.0 - t / self.total_iters) ** self.power
        return [b * f for b in self.base_lrs]

    def _chain_lr(self) -> list[float]:
        e, n = self.last_epoch, self.total_iters
        if e == 0 or e > n:
            return self._lrs()
        f = ((1.0 - e / n) / (1.0 - (e - 1) / n)) ** self.power
        return [lr * f for lr in self._lrs()]


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR: cosine annealing from ``base_lr`` to ``eta_min`` over ``T_i`` epochs, restarted
    with ``T_{i+1} = T_i * T_mult`` (``step(epoch)`` takes fractional epochs too)."""

    def __init__(
        self,
        optimizer: Any,
        T_0: int,
        T_mult: int = 1,
        eta_min: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        if not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"CosineAnnealingWarmRestarts: T_0 must be a positive int, got {T_0}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(
                f"CosineAnnealingWarmRestarts: T_mult must be an int >= 1, got {T_mult}"
            )
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        c = (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
        return [self.eta_min + (b - self.eta_min) * c for b in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur - self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"CosineAnnealingWarmRestarts: epoch must be >= 0, got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult**n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        for g, lr in zip(self.optimizer.param_groups, self.get_lr()):
            g["lr"] = lr
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]


class ChainedScheduler:
    """Steps several schedulers together (their effects compose)."""

    def __init__(self, schedulers: Any, optimizer: Any = None) -> None:
        self._schedulers = list(schedulers)
        if not self._schedulers:
            raise ValueError("ChainedScheduler: needs at least one scheduler")
        self.optimizer = optimizer if optimizer is not None else self._schedulers[0].optimizer
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def step(self) -> None:
        for s in self._schedulers:
            s.step()
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        return list(self._last_lr)

    def state_dict(self) -> dict:
        return {"_schedulers": [s.state_dict() for s in self._schedulers]}

    def load_state_dict(self, state_dict: dict) -> None:
        for s, sd in zip(self._schedulers, state_dict["_schedulers"]):
            s.load_state_dict(sd)


class CyclicLR(LRScheduler):
    """The cyclical learning-rate policy (Smith): the rate goes from ``base_lr`` to
    ``max_lr`` over ``step_size_up`` steps and back over ``step_size_down``; the amplitude is
    kept (``triangular``), halved each cycle (``triangular2``), or scaled by
    ``gamma ** step`` (``exp_range``), or by ``scale_fn``. Momentum (or Adam's ``beta1``)
    cycles the other way when ``cycle_momentum``. Stepped once per batch."""

    def __init__(
        self,
        optimizer: Any,
        base_lr: Any,
        max_lr: Any,
        step_size_up: int = 2000,
        step_size_down: int | None = None,
        mode: str = "triangular",
        gamma: float = 1.0,
        scale_fn: Any = None,
        scale_mode: str = "cycle",
        cycle_momentum: bool = True,
        base_momentum: Any = 0.8,
        max_momentum: Any = 0.9,
        last_epoch: int = -1,
    ) -> None:
        groups = optimizer.param_groups

        def per_group(name: str, v: Any) -> list[float]:
            vs = list(v) if isinstance(v, (list, tuple)) else [v] * len(groups)
            if len(vs) != len(groups):
                raise ValueError(f"CyclicLR: {len(vs)} values of {name} for {len(groups)} groups")
            return [float(x) for x in vs]

        base_lrs = per_group("base_lr", base_lr)
        if last_epoch == -1:
            for g, lr in zip(groups, base_lrs):
                g["lr"] = lr
                g["initial_lr"] = lr
        self.max_lrs = per_group("max_lr", max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        if up <= 0 or down <= 0:
            raise ValueError("CyclicLR: step sizes must be positive")
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(
                f"CyclicLR: mode must be triangular, triangular2 or exp_range, got {mode!r}"
            )
        self.mode, self.gamma = mode, gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = (
            scale_mode
            if scale_fn is not None
            else ("iterations" if mode == "exp_range" else "cycle")
        )
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if not all("momentum" in g or "betas" in g for g in groups):
                raise ValueError(
                    "CyclicLR: optimizer must support momentum or beta1 with cycle_momentum enabled"
                )
            self.base_momentums = per_group("base_momentum", base_momentum)
            self.max_momentums = per_group("max_momentum", max_momentum)
            if last_epoch == -1:
                for g, m in zip(groups, self.max_momentums):
                    OneCycleLR._set_momentum(g, m)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _scale(self, x: float) -> float:
        if self._scale_fn_custom is not None:
            return float(self._scale_fn_custom(x))
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1.0 / (2.0 ** (x - 1))
        return self.gamma**x

    def get_lr(self) -> list[float]:
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        arg = cycle if self.scale_mode == "cycle" else self.last_epoch
        lrs = []
        base_lrs = getattr(self, "base_lrs", [g["initial_lr"] for g in self.optimizer.param_groups])
        for base, top in zip(base_lrs, self.max_lrs):
            height = (top - base) * scale_factor
            lrs.append(base + height * self._scale(arg))
        if self.cycle_momentum:
            for g, lo, hi in zip(
                self.optimizer.param_groups, self.base_momentums, self.max_momentums
            ):
                height = (hi - lo) * scale_factor
                OneCycleLR._set_momentum(g, hi - height * self._scale(arg))
        return lrs
