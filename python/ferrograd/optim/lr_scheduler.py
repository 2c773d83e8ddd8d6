"""Learning-rate schedules with PyTorch's API and formulas: each ``step()`` sets the
``"lr"`` of every parameter group (which also reaches a traced training step)."""

from __future__ import annotations

import bisect
import collections
import functools
import math
import types
import warnings
import weakref
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


EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated "
    "where possible. Please use `scheduler.step()` to step the scheduler. During the "
    "deprecation, if epoch is different from None, the closed form is used instead of the "
    "new chainable form, where available. Please open an issue if you are unable to "
    "replicate your use case: https://github.com/pytorch/pytorch/issues/new/choose."
)

_ORDER_URL = "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate"


def _per_group(name: str, optimizer: Any, value: Any) -> list:
    """``value`` for each parameter group: a list or tuple must have one entry a group."""
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. {name} has "
                f"{len(value)} values, param_groups has {n}."
            )
        return list(value)
    return [value] * n


def _track_optimizer_step(optimizer: Any) -> None:
    """Wraps the optimizer's ``step`` (once) so that a scheduler can tell whether it ran
    before the scheduler's first ``step``. The wrapper holds the optimizer weakly, so no
    reference cycle keeps it alive."""
    if getattr(optimizer.step, "_wrapped_by_lr_sched", False):
        return
    opt_ref = weakref.ref(optimizer)
    bound = optimizer.step
    func = getattr(bound, "__func__", None)
    wrapped = func if func is not None else bound
    if func is not None:
        del bound  # (a bound method would hold the optimizer: a reference cycle)

        def call(*args: Any, **kwargs: Any) -> Any:
            return func(opt_ref(), *args, **kwargs)
    else:

        def call(*args: Any, **kwargs: Any) -> Any:
            return wrapped(*args, **kwargs)

    @functools.wraps(wrapped)
    def step(*args: Any, **kwargs: Any) -> Any:
        opt_ref()._opt_called = True
        return call(*args, **kwargs)

    step._wrapped_by_lr_sched = True  # type: ignore[attr-defined]
    optimizer.step = step


class LRScheduler:
    """Base class, as PyTorch's: ``get_lr()`` gives each group's rate at ``last_epoch`` from
    the rates of the step before (the chainable form, so that schedulers stepped together
    compose); ``_get_closed_form_lr()``, where a schedule has one, gives it from
    ``base_lrs`` alone and serves the deprecated ``step(epoch)``. Construction takes the
    first step (epoch 0)."""

    _get_lr_called_within_step: bool = False
    _is_initial: bool = False

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
                        f"param_groups[{i}] when resuming scheduler with last_epoch >= 0 (load "
                        "the optimizer's state dict first, or leave last_epoch at -1 for a "
                        "fresh run)"
                    )
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        _track_optimizer_step(optimizer)
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list[float]:
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        """The rates the last ``step`` set."""
        return self._last_lr

    def _lrs(self) -> list[float]:
        return [g["lr"] for g in self.optimizer.param_groups]

    def _warn_outside_step(self) -> None:
        if not self._get_lr_called_within_step:
            warnings.warn(
                "To get the last learning rate computed by the scheduler, please use "
                "`get_last_lr()`.",
                UserWarning,
                stacklevel=3,
            )

    def step(self, epoch: int | None = None) -> None:
        if self._step_count == 1:
            if not getattr(self.optimizer.step, "_wrapped_by_lr_sched", False):
                warnings.warn(
                    "Seems like `optimizer.step()` has been overridden after learning rate "
                    "scheduler initialization. Please, make sure to call `optimizer.step()` "
                    f"before `lr_scheduler.step()`. See more details at {_ORDER_URL}",
                    UserWarning,
                    stacklevel=2,
                )
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn(
                    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In "
                    "PyTorch 1.1.0 and later, you should call them in the opposite order: "
                    "`optimizer.step()` before `lr_scheduler.step()`.  Failure to do this "
                    "will result in PyTorch skipping the first value of the learning rate "
                    f"schedule. See more details at {_ORDER_URL}",
                    UserWarning,
                    stacklevel=2,
                )
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed = getattr(self, "_get_closed_form_lr", None)
                values = closed() if closed is not None else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        self._set_lrs(values)

    def _set_lrs(self, values: list[float]) -> None:
        groups = self.optimizer.param_groups
        if len(values) != len(groups):
            # (e.g. a group added after the scheduler was made, which it has no base rate for)
            raise ValueError(
                f"{type(self).__name__}: get_lr() gave {len(values)} rates for {len(groups)} "
                "parameter groups"
            )
        for g, lr in zip(groups, values):
            g["lr"] = lr
        self._last_lr = self._lrs()

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
        self._warn_outside_step()
        e = self.last_epoch
        f = self.gamma if e != 0 and e % self.step_size == 0 else 1.0
        return [lr * f for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class MultiStepLR(LRScheduler):
    """``base_lr * gamma ** (number of milestones passed)``."""

    def __init__(
        self, optimizer: Any, milestones: Any, gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        # a Counter, as PyTorch keeps it (so state dicts load across)
        self.milestones, self.gamma = collections.Counter(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        k = self.milestones.get(self.last_epoch, 0)
        return [lr * self.gamma**k for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        k = bisect.bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [b * self.gamma**k for b in self.base_lrs]

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        if not isinstance(self.milestones, collections.Counter):
            self.milestones = collections.Counter(self.milestones)


class ConstantLR(LRScheduler):
    """``base_lr * factor`` for the first ``total_iters`` steps, then ``base_lr``."""

    def __init__(
        self, optimizer: Any, factor: float = 1.0 / 3, total_iters: int = 5, last_epoch: int = -1
    ) -> None:
        if not 0.0 <= factor <= 1.0:
            raise ValueError(
                f"ConstantLR: the constant multiplicative factor must lie in [0, 1], got {factor}"
            )
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        e = self.last_epoch
        if e == 0:
            return [lr * self.factor for lr in self._lrs()]
        if e != self.total_iters:
            return self._lrs()
        if self.factor == 0:
            # (the step form would divide by the factor: back to the base rates instead)
            return list(self.base_lrs)
        return [lr * (1.0 / self.factor) for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        f = self.factor if self.last_epoch < self.total_iters else 1.0
        return [b * f for b in self.base_lrs]


class LinearLR(LRScheduler):
    """A factor going linearly from ``start_factor`` to ``end_factor`` over
    ``total_iters`` steps, then staying."""

    def __init__(
        self,
        optimizer: Any,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if not 0 < start_factor <= 1:
            raise ValueError(
                "LinearLR: the starting multiplicative factor must lie in (0, 1], got "
                f"{start_factor}"
            )
        if not 0 <= end_factor <= 1:
            raise ValueError(
                f"LinearLR: the ending multiplicative factor must lie in [0, 1], got {end_factor}"
            )
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        e, n = self.last_epoch, self.total_iters
        if e == 0:
            return [lr * self.start_factor for lr in self._lrs()]
        if self._is_initial or e > n:
            return self._lrs()
        d = self.end_factor - self.start_factor
        f = 1.0 + d / (n * self.start_factor + (e - 1) * d)
        return [lr * f for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        t = min(self.last_epoch, self.total_iters)
        f = self.start_factor + (self.end_factor - self.start_factor) * t / self.total_iters
        return [b * f for b in self.base_lrs]


class ExponentialLR(LRScheduler):
    """``base_lr * gamma ** epoch``."""

    def __init__(self, optimizer: Any, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        if self._is_initial:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        return [b * self.gamma**self.last_epoch for b in self.base_lrs]


class PolynomialLR(LRScheduler):
    """``base_lr * (1 - min(epoch, total_iters) / total_iters) ** power``."""

    def __init__(
        self, optimizer: Any, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1
    ) -> None:
        if total_iters <= 0:
            raise ValueError(f"PolynomialLR: total_iters must be positive, got {total_iters}")
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        e, n = self.last_epoch, self.total_iters
        if self._is_initial or e > n:
            return self._lrs()
        f = ((1.0 - e / n) / (1.0 - (e - 1) / n)) ** self.power
        return [lr * f for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        t = min(self.last_epoch, self.total_iters)
        return [b * (1.0 - t / self.total_iters) ** self.power for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """``eta_min + (base_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2``; stepped, PyTorch's
    recursive form (which departs from the closed form once anything else changed the
    rates)."""

    def __init__(
        self, optimizer: Any, T_max: int, eta_min: float = 0.0, last_epoch: int = -1
    ) -> None:
        if T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max}")
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        e, t, lo = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return self._lrs()
        if self._step_count == 1 and e > 0:
            return self._get_closed_form_lr()
        if (e - 1 - t) % (2 * t) == 0:
            f = (1 - math.cos(math.pi / t)) / 2
            return [lr + (b - lo) * f for lr, b in zip(self._lrs(), self.base_lrs)]
        r = (1 + math.cos(math.pi * e / t)) / (1 + math.cos(math.pi * (e - 1) / t))
        return [r * (lr - lo) + lo for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        c = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
        return [self.eta_min + (b - self.eta_min) * c for b in self.base_lrs]


def _lambdas(name: str, optimizer: Any, lr_lambda: Any, check: bool) -> list:
    n = len(optimizer.param_groups)
    if isinstance(lr_lambda, (list, tuple)):
        if len(lr_lambda) != n:
            raise ValueError(f"{name}: expected {n} lr_lambdas, but got {len(lr_lambda)}")
        fns = list(lr_lambda)
    else:
        fns = [lr_lambda] * n
    if check:
        for fn in fns:
            if not callable(fn):
                raise TypeError(
                    f"{name}: lr_lambda should be a function, but got {type(fn).__name__}"
                )
    return fns


class LambdaLR(LRScheduler):
    """``base_lr * lr_lambda(epoch)`` (one function, or one per group)."""

    def __init__(self, optimizer: Any, lr_lambda: Any, last_epoch: int = -1) -> None:
        self.lr_lambdas = _lambdas("LambdaLR", optimizer, lr_lambda, check=False)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        return [b * f(self.last_epoch) for b, f in zip(self.base_lrs, self.lr_lambdas)]

    def state_dict(self) -> dict:
        return _lambdas_state(self)

    def load_state_dict(self, state_dict: dict) -> None:
        _load_lambdas_state(self, state_dict)


class MultiplicativeLR(LRScheduler):
    """Each step multiplies the rate by ``lr_lambda(epoch)`` (one function, or one per
    group)."""

    def __init__(self, optimizer: Any, lr_lambda: Any, last_epoch: int = -1) -> None:
        self.lr_lambdas = _lambdas("MultiplicativeLR", optimizer, lr_lambda, check=True)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        if self._is_initial:
            return self._lrs()
        return [lr * f(self.last_epoch) for lr, f in zip(self._lrs(), self.lr_lambdas)]

    def state_dict(self) -> dict:
        return _lambdas_state(self)

    def load_state_dict(self, state_dict: dict) -> None:
        _load_lambdas_state(self, state_dict)


def _check_members(name: str, optimizer: Any, schedulers: Any) -> None:
    for i, s in enumerate(schedulers):
        if not hasattr(s, "optimizer"):
            raise TypeError(f"{name}: the scheduler at index {i} has no `optimizer` attribute")
        if isinstance(s, ReduceLROnPlateau):
            raise ValueError(  # noqa: TRY004 (PyTorch's type)
                f"{name} does not support ReduceLROnPlateau (its step needs the metric), but "
                f"got one at index {i}"
            )
        if s.optimizer is not optimizer:
            raise ValueError(
                f"{name} expects all schedulers to belong to the same optimizer, but the "
                f"{type(s).__name__} at index {i} drives another one"
            )


class _Composite(LRScheduler):
    """A scheduler made of others (``_schedulers``): its state holds each member's state."""

    _schedulers: list

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


class SequentialLR(_Composite):
    """Runs ``schedulers`` one after another, switching at each of ``milestones`` (a
    scheduler switched to starts its own schedule at epoch 0)."""

    def __init__(
        self, optimizer: Any, schedulers: list, milestones: list[int], last_epoch: int = -1
    ) -> None:
        if len(schedulers) < 1:
            raise ValueError("SequentialLR expects at least one scheduler, but got none")
        _check_members("SequentialLR", optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                f"SequentialLR: expected {len(schedulers) - 1} milestones for "
                f"{len(schedulers)} schedulers, got {len(milestones)}"
            )
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # undo the first steps the schedulers took when they were made, then start over
        # with the one that runs now
        for g in optimizer.param_groups:
            g["lr"] = g["initial_lr"]
        self.recursive_undo()
        idx = bisect.bisect_right(self._milestones, 0)
        self._schedulers[idx]._initial_step()
        self._last_lr = self._schedulers[idx].get_last_lr()

    def recursive_undo(self, sched: Any = None) -> None:
        """Takes every scheduler inside (nested ones too) one epoch back: the first step
        each took when it was made."""
        s = self if sched is None else sched
        if hasattr(s, "_schedulers"):
            for inner in s._schedulers:
                self.recursive_undo(inner)
        elif hasattr(s, "last_epoch"):
            s.last_epoch -= 1

    def step(self) -> None:  # type: ignore[override]
        self.last_epoch += 1
        idx = bisect.bisect_right(self._milestones, self.last_epoch)
        s = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            s._update_lr(0)
        else:
            s.step()
        self._last_lr = s.get_last_lr()


class ChainedScheduler(_Composite):
    """Steps several schedulers together (their effects compose)."""

    def __init__(self, schedulers: Any, optimizer: Any = None) -> None:
        schedulers = list(schedulers)
        if len(schedulers) < 1:
            raise ValueError("ChainedScheduler expects at least one scheduler, but got none")
        optimizer = optimizer or schedulers[0].optimizer
        _check_members("ChainedScheduler", optimizer, schedulers)
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = self._lrs()

    def step(self) -> None:  # type: ignore[override]
        for s in self._schedulers:
            s.step()
        self._last_lr = self._lrs()


class ReduceLROnPlateau(LRScheduler):
    """Multiplies the rates by ``factor`` when ``step(metric)`` has not improved for
    ``patience`` steps (``mode`` "min" or "max", relative or absolute ``threshold``), then
    waits ``cooldown`` steps; never below ``min_lr``."""

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
        from . import Optimizer

        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor should be < 1.0, got {factor}")
        self.factor = factor
        if not isinstance(optimizer, Optimizer):
            raise TypeError(
                f"{type(self).__name__}: {type(optimizer).__name__} is not an Optimizer"
            )
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != n:
                raise ValueError(f"ReduceLROnPlateau: expected {n} min_lrs, got {len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * n
        self.patience, self.cooldown, self.eps = patience, cooldown, eps
        self.last_epoch = 0
        self._last_lr = self._lrs()
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def _init_is_better(self, mode: str, threshold: float, threshold_mode: str) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode {mode!r} is unknown (min or max)")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(
                f"ReduceLROnPlateau: threshold mode {threshold_mode!r} is unknown (rel or abs)"
            )
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def _is_better(self, a: float, best: float) -> bool:
        rel = self.threshold_mode == "rel"
        if self.mode == "min":
            return a < (best * (1.0 - self.threshold) if rel else best - self.threshold)
        return a > (best * (self.threshold + 1.0) if rel else best + self.threshold)

    def step(self, metrics: Any, epoch: int | None = None) -> None:  # type: ignore[override]
        current = float(metrics.item() if hasattr(metrics, "item") else metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr(epoch)
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = self._lrs()

    def _reduce_lr(self, epoch: int) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the `optimizer` ({len(groups)}) differs "
                    f"from when `ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), "
                    "usually due to a new param group being added to the optimizer. Please "
                    "modify the `min_lrs` field to match the length of the `optimizer` param "
                    "groups."
                )
            self.min_lrs = [self.default_min_lr] * len(groups)
        for g, lo in zip(groups, self.min_lrs):
            old = float(g["lr"])
            new = max(old * self.factor, lo)
            if old - new > self.eps:
                g["lr"] = new

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)


def _set_momentum(g: dict, m: float, use_beta1: bool) -> None:
    if use_beta1:
        g["betas"] = (m, *g["betas"][1:])
    else:
        g["momentum"] = m


def _cycles_momentum(name: str, optimizer: Any) -> bool:
    """Whether the optimizer's groups cycle Adam's ``beta1`` (else ``momentum``); raises
    when it has neither."""
    d = optimizer.defaults
    if "momentum" not in d and "betas" not in d:
        raise ValueError(
            f"{name}: optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
        )
    return "betas" in d


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
        from . import Optimizer

        if not isinstance(optimizer, Optimizer):
            raise TypeError(
                f"{type(self).__name__}: {type(optimizer).__name__} is not an Optimizer"
            )
        self.optimizer = optimizer
        base_lrs = [_scalar(v) for v in _per_group("base_lr", optimizer, base_lr)]
        if last_epoch == -1:
            for g, lr in zip(optimizer.param_groups, base_lrs):
                g["lr"] = lr
        self.max_lrs = [_scalar(v) for v in _per_group("max_lr", optimizer, max_lr)]
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(
                f"CyclicLR: mode {mode!r} is invalid (triangular, triangular2 or exp_range) "
                "and scale_fn is None"
            )
        self.mode, self.gamma = mode, gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _cycles_momentum("CyclicLR", optimizer)
            self.base_momentums = [
                _scalar(v) for v in _per_group("base_momentum", optimizer, base_momentum)
            ]
            self.max_momentums = [
                _scalar(v) for v in _per_group("max_momentum", optimizer, max_momentum)
            ]
            if last_epoch == -1:
                for hi, lo, g in zip(
                    self.max_momentums, self.base_momentums, optimizer.param_groups
                ):
                    _set_momentum(g, hi, self.use_beta1)
                    g["max_momentum"], g["base_momentum"] = hi, lo
        # (as PyTorch: the first step still reads the groups' initial rates as base_lrs)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self) -> None:
        if self._scale_fn_custom is not None:
            return
        if self.mode == "triangular":
            self._scale_fn_ref = self._triangular_scale_fn
            self.scale_mode = "cycle"
        elif self.mode == "triangular2":
            self._scale_fn_ref = self._triangular2_scale_fn
            self.scale_mode = "cycle"
        elif self.mode == "exp_range":
            self._scale_fn_ref = functools.partial(self._exp_range_scale_fn, self.gamma)
            self.scale_mode = "iterations"

    @staticmethod
    def _triangular_scale_fn(x: float) -> float:
        return 1.0

    @staticmethod
    def _triangular2_scale_fn(x: float) -> float:
        return 1 / (2.0 ** (x - 1))

    @staticmethod
    def _exp_range_scale_fn(gamma: float, x: float) -> float:
        return gamma**x

    def scale_fn(self, x: float) -> float:
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        return self._scale_fn_ref(x)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [b + (top - b) * scale_factor * scale for b, top in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for g, lo, hi in zip(
                self.optimizer.param_groups, self.base_momentums, self.max_momentums
            ):
                _set_momentum(g, hi - (hi - lo) * scale_factor * scale, self.use_beta1)
        return lrs

    def state_dict(self) -> dict:
        state = {
            k: v
            for k, v in self.__dict__.items()
            if k not in ("optimizer", "_scale_fn_ref", "_scale_fn_custom")
        }
        fn = self._scale_fn_custom
        # (a function is not saved; a callable object's attributes are)
        state["_scale_fn_custom"] = (
            fn.__dict__.copy()
            if fn is not None and not isinstance(fn, types.FunctionType)
            else None
        )
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        fn = state.pop("_scale_fn_custom", None)
        self.__dict__.update(state)
        if fn is not None and self._scale_fn_custom is not None:
            self._scale_fn_custom.__dict__.update(fn)
        self._init_scale_fn()


def _scalar(v: Any) -> Any:
    """A hyperparameter given as a tensor, as its number (a copy: later in-place changes to
    the tensor do not reach the schedule)."""
    return v.item() if hasattr(v, "item") and not isinstance(v, (int, float)) else v


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
            raise ValueError(f"CosineAnnealingWarmRestarts: expected a positive int T_0, got {T_0}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(
                f"CosineAnnealingWarmRestarts: expected an int T_mult >= 1, got {T_mult}"
            )
        if not isinstance(eta_min, (float, int)):
            raise ValueError(  # noqa: TRY004 (PyTorch's type)
                "CosineAnnealingWarmRestarts: expected a float or int eta_min, got "
                f"{eta_min!r} of type {type(eta_min).__name__}"
            )
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        c = (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
        return [self.eta_min + (b - self.eta_min) * c for b in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(
                    f"CosineAnnealingWarmRestarts: expected a non-negative epoch, got {epoch}"
                )
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
        self._get_lr_called_within_step = True
        try:
            values = self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        self._set_lrs(values)


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
        base_momentum: Any = 0.85,
        max_momentum: Any = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        from . import Optimizer

        if not isinstance(optimizer, Optimizer):
            raise TypeError(
                f"{type(self).__name__}: {type(optimizer).__name__} is not an Optimizer"
            )
        self.optimizer = optimizer
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(
                    f"OneCycleLR: expected a positive integer total_steps, got {total_steps}"
                )
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"OneCycleLR: expected a positive integer epochs, got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(
                    "OneCycleLR: expected a positive integer steps_per_epoch, got "
                    f"{steps_per_epoch}"
                )
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError(
                "OneCycleLR: you must define either total_steps OR (epochs AND steps_per_epoch)"
            )
        n = self.total_steps
        up = float(pct_start * n) - 1
        if three_phase:
            self._schedule_phases = [
                _phase(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                _phase(
                    float(2 * pct_start * n) - 2,
                    "max_lr",
                    "initial_lr",
                    "base_momentum",
                    "max_momentum",
                ),
                _phase(n - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self._schedule_phases = [
                _phase(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                _phase(n - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(
                f"OneCycleLR: expected a float pct_start between 0 and 1, got {pct_start}"
            )
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                "OneCycleLR: anneal_strategy must be one of 'cos' or 'linear', instead got "
                f"{anneal_strategy!r}"
            )
        self._anneal_func_type = anneal_strategy
        max_lrs = [_scalar(v) for v in _per_group("max_lr", optimizer, max_lr)]
        if last_epoch == -1:
            for g, m in zip(optimizer.param_groups, max_lrs):
                g["initial_lr"] = m / div_factor
                g["max_lr"] = m
                g["min_lr"] = g["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _cycles_momentum("OneCycleLR", optimizer)
            his = [_scalar(v) for v in _per_group("max_momentum", optimizer, max_momentum)]
            los = [_scalar(v) for v in _per_group("base_momentum", optimizer, base_momentum)]
            if last_epoch == -1:
                for hi, lo, g in zip(his, los, optimizer.param_groups):
                    _set_momentum(g, hi, self.use_beta1)
                    g["max_momentum"], g["base_momentum"] = hi, lo
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _annealing_cos(start: float, end: float, pct: float) -> float:
        return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)

    @staticmethod
    def _annealing_linear(start: float, end: float, pct: float) -> float:
        return (end - start) * pct + start

    def _anneal_func(self, start: float, end: float, pct: float) -> float:
        kind = getattr(self, "_anneal_func_type", None)
        if kind is None:
            # a state dict of an older PyTorch saved the function itself as anneal_func
            return self.anneal_func(start, end, pct)
        if kind == "cos":
            return self._annealing_cos(start, end, pct)
        if kind == "linear":
            return self._annealing_linear(start, end, pct)
        raise ValueError(f"OneCycleLR: unknown _anneal_func_type {kind!r}")

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(
                f"OneCycleLR: tried to step {step} times; the specified number of total steps "
                f"is {self.total_steps}"
            )
        lrs = []
        phases = self._schedule_phases
        for g in self.optimizer.param_groups:
            start_step = 0.0
            for i, ph in enumerate(phases):
                end_step = ph["end_step"]
                if step <= end_step or i == len(phases) - 1:
                    pct = (step - start_step) / (end_step - start_step)
                    lrs.append(self._anneal_func(g[ph["start_lr"]], g[ph["end_lr"]], pct))
                    if self.cycle_momentum:
                        m = self._anneal_func(g[ph["start_momentum"]], g[ph["end_momentum"]], pct)
                        _set_momentum(g, m, self.use_beta1)
                    break
                start_step = end_step
        return lrs


def _phase(end: float, lr0: str, lr1: str, m0: str, m1: str) -> dict:
    return {
        "end_step": end,
        "start_lr": lr0,
        "end_lr": lr1,
        "start_momentum": m0,
        "end_momentum": m1,
    }
