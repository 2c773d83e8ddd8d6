"""``LBFGS`` and ``ASGD`` with PyTorch's arguments, defaults, state layout and formulas.

L-BFGS works on one flat vector made of every parameter (so it takes a single parameter
group) and needs a closure that re-evaluates the loss and fills ``.grad``; its optional line
search is the strong-Wolfe bracketing and zoom search of Nocedal and Wright (Algorithms 3.5
and 3.6) with safeguarded cubic interpolation, making the same trial steps and stopping
decisions as ``torch.optim.LBFGS``. Its state is global, kept (as in PyTorch) under the first
parameter; it uses data-dependent control flow, so a step cannot be traced. ASGD's update
reads no tensor values (its step count, ``eta`` and ``mu`` stay tensors), so it traces.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from typing import Any, Callable

import numpy as np

from .. import _core
from .._core import Tensor
from .._tensor import default_float
from ..autodiff import enable_grad, no_grad
from . import Optimizer, _nonneg, _recorded

__all__ = ["ASGD", "LBFGS", "Adafactor"]


# --------------------------------------------------------------------------- L-BFGS


def _dot(a: Tensor, b: Tensor) -> float:
    return float((a * b).sum().item())


def _amax(a: Tensor) -> float:
    return float(a.abs().max().item())


def _cubic_min(
    a: float,
    fa: float,
    ga: float,
    b: float,
    fb: float,
    gb: float,
    bounds: tuple[float, float] | None = None,
) -> float:
    """The minimizer of the cubic through ``(a, fa)`` and ``(b, fb)`` with slopes ``ga`` and
    ``gb`` (Nocedal and Wright, eq. 3.59), clamped into ``bounds`` (by default the interval
    between the two points); the middle of the bounds when the cubic has no minimizer."""
    if a > b:  # the formula below is anchored on the right-hand point
        a, fa, ga, b, fb, gb = b, fb, gb, a, fa, ga
    lo, hi = bounds if bounds is not None else (a, b)
    # IEEE arithmetic as PyTorch's tensors do it: two equal points or a flat cubic give inf
    # or NaN, which the search then handles, not ZeroDivisionError
    with np.errstate(all="ignore"):
        a_, b_, ga_, gb_ = np.float64(a), np.float64(b), np.float64(ga), np.float64(gb)
        d1 = ga_ + gb_ - 3 * (np.float64(fa) - np.float64(fb)) / (a_ - b_)
        disc = d1**2 - ga_ * gb_
        if disc < 0:
            return (lo + hi) / 2.0
        d2 = np.sqrt(disc)
        x = float(b_ - (b_ - a_) * ((gb_ + d2 - d1) / (gb_ - ga_ + 2 * d2)))
    return min(max(x, lo), hi)


class _Point:
    """One trial of the line search: step length, loss, flat gradient, slope along d."""

    __slots__ = ("f", "g", "slope", "t")

    def __init__(self, t: float, f: float, g: Tensor, slope: float) -> None:
        self.t, self.f, self.g, self.slope = t, f, g, slope


def _strong_wolfe_search(
    evaluate: Callable[[float], tuple[float, Tensor]],
    d: Tensor,
    t: float,
    f0: float,
    g0: Tensor,
    slope0: float,
    budget: int,
    c1: float = 1e-4,
    c2: float = 0.9,
    min_width: float = 1e-9,
) -> tuple[float, Tensor, float, int]:
    """A step length along the descent direction ``d`` that satisfies the strong Wolfe
    conditions, ``f(t) <= f0 + c1 t slope0`` and ``|f'(t)| <= -c2 slope0``, from the first
    trial ``t``. ``evaluate(t)`` returns the loss and flat gradient at ``x + t d``; ``budget``
    bounds the trials after the first. Returns ``(loss, gradient, t, evaluations)``."""
    d_scale = _amax(d)
    origin = _Point(0.0, f0, g0, slope0)

    def trial(step: float) -> _Point:
        f, g = evaluate(step)
        return _Point(step, f, g, _dot(g, d))

    def armijo_fails(p: _Point) -> bool:
        return p.f > f0 + c1 * p.t * slope0

    def curvature_holds(p: _Point) -> bool:
        return abs(p.slope) <= -c2 * slope0

    evals, tries = 1, 0
    prev, cur = origin, trial(t)
    ends: list[_Point] | None = None  # the bracket: an interval holding acceptable steps
    found = False
    # phase 1 (Algorithm 3.5): grow the step until an interval brackets a Wolfe point
    while tries < budget:
        if armijo_fails(cur) or (tries > 1 and cur.f >= prev.f):
            ends = [prev, cur]  # too long a step: a minimizer lies between
            break
        if curvature_holds(cur):
            ends, found = [cur], True
            break
        if cur.slope >= 0:  # the loss turns upward: a minimizer lies between
            ends = [prev, cur]
            break
        # extrapolate: the cubic's minimizer, kept within [t + (t - t_prev) / 100, 10 t]
        nxt = _cubic_min(
            prev.t,
            prev.f,
            prev.slope,
            cur.t,
            cur.f,
            cur.slope,
            bounds=(cur.t + 0.01 * (cur.t - prev.t), cur.t * 10),
        )
        prev, cur = cur, trial(nxt)
        evals += 1
        tries += 1
    if ends is None:  # out of budget: keep the better of the origin and the last trial
        ends = [origin, cur]

    # phase 2 (Algorithm 3.6): shrink the bracket; `low` is its end with the lower loss
    low = 0 if ends[0].f <= ends[-1].f else 1
    stalled = False
    while not found and tries < budget:
        a, b = ends[0].t, ends[1].t
        if abs(b - a) * d_scale < min_width:
            break
        left, right = min(a, b), max(a, b)
        step = _cubic_min(a, ends[0].f, ends[0].slope, b, ends[1].f, ends[1].slope)
        # safeguard: a trial too close to an end makes little progress; on the second such
        # trial in a row (or one on or outside the bracket) move it a tenth of the width in
        margin = 0.1 * (right - left)
        if min(right - step, step - left) < margin:
            if stalled or step >= right or step <= left:
                step = right - margin if abs(step - right) < abs(step - left) else left + margin
                stalled = False
            else:
                stalled = True
        else:
            stalled = False
        new = trial(step)
        evals += 1
        tries += 1
        high = 1 - low
        if armijo_fails(new) or new.f >= ends[low].f:
            ends[high] = new
            low = 0 if ends[0].f <= ends[1].f else 1
        else:
            if curvature_holds(new):
                found = True
            elif new.slope * (ends[high].t - ends[low].t) >= 0:
                ends[high] = ends[low]
            ends[low] = new
    best = ends[low]
    return best.f, best.g, best.t, evals


class LBFGS(Optimizer):
    """Limited-memory BFGS (Nocedal and Wright, Algorithm 7.4), PyTorch's variant.

    ``step(closure)`` runs up to ``max_iter`` iterations (at most ``max_eval`` closure
    calls): the two-loop recursion turns the gradient into a direction from the last
    ``history_size`` curvature pairs, then the parameters move by ``lr`` along it (the first
    iteration ever by ``min(1, 1/|g|_1) lr``), or by the step a strong-Wolfe line search
    finds when ``line_search_fn="strong_wolfe"``. It stops early when the largest gradient
    entry is at most ``tolerance_grad`` or a step or a loss change is below
    ``tolerance_change``. ``closure`` re-evaluates the loss and fills ``.grad`` (clearing it
    first, e.g. ``opt.zero_grad(); loss = f(); loss.backward(); return loss``); it is called
    with gradients enabled. One parameter group only; the memory is state of the first
    parameter (``state_dict`` has PyTorch's keys; its scalars are Python floats).
    """

    _lazy_state = False

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
        *,
        maximize: bool = False,
    ) -> None:
        _check_count("max_iter", max_iter)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = {
            "lr": lr,
            "max_iter": max_iter,
            "max_eval": max_eval,
            "tolerance_grad": tolerance_grad,
            "tolerance_change": tolerance_change,
            "history_size": history_size,
            "line_search_fn": line_search_fn,
            "maximize": maximize,
        }
        super().__init__(params, defaults)
        self._params = self.param_groups[0]["params"]
        devices = {p.device for p in self._params}
        if len(devices) > 1:
            raise ValueError(
                f"LBFGS: all parameters must be on one device, got {sorted(map(str, devices))}"
            )

    def add_param_group(self, param_group: dict) -> None:
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(param_group)

    def _validate(self, group: dict) -> None:
        _check_count("max_iter", group["max_iter"])
        _check_count("max_eval", group["max_eval"])
        _check_count("history_size", group["history_size"])
        _nonneg("LBFGS", "tolerance_grad", group["tolerance_grad"])
        _nonneg("LBFGS", "tolerance_change", group["tolerance_change"])
        if group["line_search_fn"] not in (None, "strong_wolfe"):
            raise ValueError(
                "LBFGS: line_search_fn must be None or 'strong_wolfe', got "
                f"{group['line_search_fn']!r}"
            )

    # ------------------------------------------------------------- the flat view

    def _flat_grad(self) -> Tensor:
        parts = []
        for p in self._params:
            g = p.grad
            parts.append(
                _core.zeros((p.numel(),), dtype=p.dtype.name, device=p.device)
                if g is None
                else g.detach().reshape(-1)
            )
        flat = _core.concat(parts, 0) if len(parts) > 1 else parts[0].copy()
        if self.param_groups[0]["maximize"]:
            flat = -flat
        return flat

    def _move(self, t: float, d: Tensor) -> None:
        """``params += t * d`` (unrecorded), ``d`` a flat vector."""
        at = 0
        with no_grad():
            for p in self._params:
                n = p.numel()
                p += (d[at : at + n] * t).reshape(p.shape).astype(p.dtype)
                at += n

    def _loss(self, closure: Callable[[], Any]) -> tuple[Any, float]:
        with enable_grad():
            out = closure()
        if out is None:
            raise TypeError("LBFGS.step: the closure must return the loss, got None")
        value = float(out.item() if isinstance(out, Tensor) else out)
        return out, (-value if self.param_groups[0]["maximize"] else value)

    def _evaluate_at(
        self, closure: Callable[[], Any], x: list[Tensor], t: float, d: Tensor
    ) -> tuple[float, Tensor]:
        """The loss and flat gradient at ``x + t d``; the parameters are left at ``x``."""
        self._move(t, d)
        _, f = self._loss(closure)
        g = self._flat_grad()
        with no_grad():
            for p, v in zip(self._params, x):
                p.copy_(v)
        return f, g

    # --------------------------------------------------------------------- step

    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """Runs up to ``max_iter`` iterations; returns the closure's first loss."""
        if closure is None:
            raise TypeError(
                "LBFGS.step: a closure that re-evaluates the loss and its gradients is required"
            )
        group = self.param_groups[0]
        lr = float(group["lr"])
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history = group["history_size"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        first_out, loss = self._loss(closure)
        evals = 1
        state["func_evals"] += 1
        g = self._flat_grad()
        if _amax(g) <= tol_grad:  # already stationary
            return first_out

        d: Tensor | None = state.get("d")
        t = state.get("t")
        dirs: list[Tensor] = state.get("old_dirs") or []  # y_k: gradient changes
        stps: list[Tensor] = state.get("old_stps") or []  # s_k: parameter changes
        rho: list[float] = state.get("ro") or []  # 1 / (y_k . s_k)
        gamma = state.get("H_diag", 1)  # the initial inverse Hessian's scale
        g_prev: Tensor | None = state.get("prev_flat_grad")
        loss_prev = state.get("prev_loss")

        it = 0
        while it < max_iter:
            it += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -g
                dirs, stps, rho, gamma = [], [], [], 1
            else:
                assert d is not None and g_prev is not None and t is not None
                y, s = g - g_prev, d * float(t)
                ys = _dot(y, s)
                if ys > 1e-10:  # keep the pair only where the curvature is positive
                    if len(dirs) == history:
                        del dirs[0], stps[0], rho[0]
                    dirs.append(y)
                    stps.append(s)
                    rho.append(1.0 / ys)
                    gamma = ys / _dot(y, y)
                d = self._two_loop(g, dirs, stps, rho, float(gamma), state, history)

            g_prev = g.copy()
            loss_prev = loss
            # the very first step is scaled down so that it moves by at most lr in l1 norm
            t = min(1.0, 1.0 / float(g.abs().sum().item())) * lr if state["n_iter"] == 1 else lr
            slope = _dot(g, d)
            if slope > -tol_change:  # not a descent direction (to tolerance)
                break

            used = 0
            if group["line_search_fn"] == "strong_wolfe":
                with no_grad():
                    x0 = [p.detach().copy() for p in self._params]
                loss, g, t, used = _strong_wolfe_search(
                    functools.partial(self._evaluate_at, closure, x0, d=d),
                    d,
                    t,
                    loss,
                    g,
                    slope,
                    budget=max_eval - evals,
                )
                self._move(t, d)
                converged = _amax(g) <= tol_grad
            else:
                self._move(t, d)
                converged = False
                if it != max_iter:  # the last iteration's loss is not needed
                    _, loss = self._loss(closure)
                    g = self._flat_grad()
                    converged = _amax(g) <= tol_grad
                    used = 1
            evals += used
            state["func_evals"] += used

            if it == max_iter or evals >= max_eval or converged:
                break
            if _amax(d) * abs(t) <= tol_change:  # the step barely moves the parameters
                break
            if abs(loss - loss_prev) < tol_change:  # nor the loss
                break

        state["d"] = d
        state["t"] = t
        state["old_dirs"] = dirs
        state["old_stps"] = stps
        state["ro"] = rho
        state["H_diag"] = gamma
        state["prev_flat_grad"] = g_prev
        state["prev_loss"] = loss_prev
        return first_out

    @staticmethod
    def _two_loop(
        g: Tensor,
        dirs: list[Tensor],
        stps: list[Tensor],
        rho: list[float],
        gamma: float,
        state: dict,
        history: int,
    ) -> Tensor:
        """``-H g`` for the L-BFGS inverse Hessian ``H`` of the stored pairs (Nocedal and
        Wright, Algorithm 7.4): newest pair to oldest, scale by ``gamma``, oldest to newest.
        The first loop's coefficients are kept in ``state["al"]``, as PyTorch."""
        alphas = state.get("al")
        if alphas is None:
            alphas = state["al"] = [None] * history
        if len(alphas) < len(dirs):  # (history_size was raised)
            alphas.extend([None] * (len(dirs) - len(alphas)))
        q = -g
        for i in reversed(range(len(dirs))):
            a = _dot(stps[i], q) * rho[i]
            alphas[i] = a
            q = q - dirs[i] * a
        r = q * gamma
        for i in range(len(dirs)):
            beta = _dot(dirs[i], r) * rho[i]
            r = r + stps[i] * (alphas[i] - beta)
        return r

    # -------------------------------------------------------------- state dicts

    def _init_state(self, p: Tensor, group: dict) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self._params):
            raise ValueError(
                "LBFGS.load_state_dict: the state dict's parameter groups do not match "
                f"this optimizer's one group of {len(self._params)} parameters"
            )
        numel = sum(p.numel() for p in self._params)
        dev, dt = self._params[0].device, self._params[0].dtype
        saved = state_dict["state"]
        s = saved.get(0, saved.get("0"))
        loaded: dict[str, Any] = {}
        for k, v in (s or {}).items():
            if k in ("d", "prev_flat_grad", "old_dirs", "old_stps"):
                vs = v if isinstance(v, list) else [v]
                for vec in vs:
                    if vec is not None and tuple(vec.shape) != (numel,):
                        raise ValueError(
                            f"LBFGS.load_state_dict: state {k!r} has shape "
                            f"{list(vec.shape)}, expected [{numel}]"
                        )
                moved = [None if w is None else w.detach().astype(dt).to(dev).copy() for w in vs]
                loaded[k] = moved if isinstance(v, list) else moved[0]
            elif k in ("ro", "al"):
                loaded[k] = [None if w is None else _scalar(w) for w in v]
            elif k in ("t", "H_diag", "prev_loss"):
                loaded[k] = None if v is None else _scalar(v)
            else:
                loaded[k] = int(_scalar(v)) if k in ("func_evals", "n_iter") else v
        mine = self.param_groups[0]
        for k in [k for k in mine if k not in groups[0] and k not in ("params", "param_names")]:
            # (a group saved before the key existed: PyTorch's value for old groups)
            mine[k] = self._legacy_defaults.get(k, self.defaults.get(k))
        for k, v in groups[0].items():
            if k != "params":
                mine[k] = v
        for p in self._params:
            self.state[p] = {}
        self.state[self._params[0]] = loaded


def _check_count(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"LBFGS: {name} must be a positive integer, got {value!r}")


def _scalar(v: Any) -> Any:
    return float(v.item()) if isinstance(v, Tensor) else v


# ----------------------------------------------------------------------------- ASGD


class ASGD(Optimizer):
    """Averaged stochastic gradient descent (Polyak and Juditsky), PyTorch's formulas:
    ``p *= 1 - lambd eta; p -= eta g``; the average ``ax`` follows ``p`` (``ax += mu (p -
    ax)``, a copy while ``mu`` is 1); then ``eta = lr / (1 + lambd lr t)^alpha`` and ``mu = 1
    / max(1, t - t0)``. ``step``, ``eta`` and ``mu`` are 0-d tensors in the default float
    dtype, as in PyTorch (so ``eta`` is rounded to float32 unless that is float64)."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        lambd: float = 1e-4,
        alpha: float = 0.75,
        t0: float = 1e6,
        weight_decay: float = 0,
        *,
        maximize: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "lambd": lambd,
            "alpha": alpha,
            "t0": t0,
            "weight_decay": weight_decay,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict) -> None:
        for name in ("lambd", "alpha", "t0", "weight_decay"):
            v = group[name]
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise TypeError(f"ASGD: {name} must be a number, got {type(v).__name__}")
        _nonneg("ASGD", "lambd", group["lambd"])
        _nonneg("ASGD", "alpha", group["alpha"])
        _nonneg("ASGD", "weight_decay", group["weight_decay"])
        if math.isnan(group["t0"]):
            raise ValueError(f"ASGD: t0 must be a number, got {group['t0']}")

    def _init_state(self, p: Tensor, group: dict) -> dict[str, Any]:
        dt = default_float()
        return {
            "step": _core.zeros((), dtype=dt, device=p.device),
            "eta": _core.full((), float(group["lr"]), dtype=dt, device=p.device),
            "mu": _core.ones((), dtype=dt, device=p.device),
            "ax": _core.zeros_like(p),
        }

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict, lr: Tensor) -> None:
        # tensor ops only (no reads of the step, eta or mu): a step runs inside fg.trace
        lambd = group["lambd"]
        step, eta_t, mu_t = state["step"], state["eta"], state["mu"]
        # PyTorch starts eta at the learning rate of the first step
        eta_t.copy_(_core.where(step == 0, lr.astype(eta_t.dtype), eta_t))
        step += 1.0
        t = step.astype("float64")
        # (PyTorch reads eta as a Python float; a copy, as eta_t changes in place below and
        # a recorded step's backward reads it)
        eta = eta_t.astype("float64").copy()
        if group["weight_decay"]:
            g = g + group["weight_decay"] * _recorded(p)
        p *= 1.0 - lambd * eta
        p -= g * eta
        mu, ax = mu_t.astype("float64").copy(), state["ax"]
        # ax follows p: a copy while mu is 1, else ax += (p - ax) mu
        ax.copy_(_core.where(mu == 1.0, p, ax + (p - ax) * mu))
        eta_t.copy_((lr / ((1.0 + lambd * lr * t) ** group["alpha"])).astype(eta_t.dtype))
        mu_t.copy_((1.0 / (t - group["t0"]).clamp(min=1.0)).astype(mu_t.dtype))


class Adafactor(Optimizer):
    """Adafactor (Shazeer and Stern), PyTorch's variant and formulas: the second moment of a
    matrix (or of each matrix of a stack) kept as a row and a column factor, of a vector in
    full; ``beta2_t = 1 - t ** beta2_decay``; the step ``rho_t = min(lr, 1 / sqrt(t))``
    scaled by the parameter's RMS (at least ``eps[1]``) and the update's RMS clipped at
    ``d``; decoupled ``weight_decay``. ``eps[0]`` (``None``: the dtype's machine epsilon)
    floors the variance estimate."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        beta2_decay: float = -0.8,
        eps: tuple[float | None, float] = (None, 1e-3),
        d: float = 1.0,
        weight_decay: float = 0.0,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "beta2_decay": beta2_decay,
            "eps": tuple(eps),
            "d": d,
            "weight_decay": weight_decay,
            "foreach": foreach,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict) -> None:
        if not group["beta2_decay"] <= 0.0:
            raise ValueError(
                f"Adafactor: beta2_decay should be <= 0 but is: {group['beta2_decay']}"
            )
        eps = group["eps"]
        if len(eps) != 2:
            raise ValueError(f"Adafactor: eps must be a pair (eps1, eps2), got {eps!r}")
        if eps[0] is not None and not eps[0] >= 0.0:
            raise ValueError(f"Adafactor: epsilon1 should be >= 0 but is: {eps[0]}")
        if not eps[1] >= 0.0:
            raise ValueError(f"Adafactor: epsilon2 should be >= 0 but is: {eps[1]}")
        if not group["d"] >= 1.0:
            raise ValueError(f"Adafactor: clipping threshold d should be >= 1 but is: {group['d']}")
        _nonneg("Adafactor", "weight_decay", group["weight_decay"])

    def _init_state(self, p: Tensor, group: dict) -> dict[str, Any]:
        state: dict[str, Any] = {"step": _core.zeros((), dtype=default_float(), device=p.device)}
        if p.ndim > 1:
            row, col = list(p.shape), list(p.shape)
            row[-1] = 1
            col[-2] = 1
            state["row_var"] = _core.zeros(tuple(row), dtype=p.dtype.name, device=p.device)
            state["col_var"] = _core.zeros(tuple(col), dtype=p.dtype.name, device=p.device)
        else:
            state["variance"] = _core.zeros_like(p)
        return state

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict, lr: Tensor) -> None:
        # tensor ops only (the step count is not read): a step runs inside fg.trace
        eps1, eps2 = group["eps"]
        if eps1 is None:
            eps1 = float(np.finfo(p.dtype.name).eps)
        step = state["step"]
        step += 1.0
        t = step.astype("float64")
        beta2_t = t ** group["beta2_decay"]
        rho = _core.minimum(lr, t.rsqrt())
        n = max(p.numel(), 1)
        rms = p.norm().astype("float64") / math.sqrt(n)
        alpha = rms.clamp(min=eps2) * rho
        if group["weight_decay"]:
            p *= (1.0 - lr * group["weight_decay"]).astype(p.dtype.name)
        w = beta2_t.astype(p.dtype.name)
        if g.ndim > 1:
            row_var, col_var = state["row_var"], state["col_var"]
            row_var.copy_(row_var + w * ((g * g).mean(dim=-1, keepdim=True) - row_var))
            col_var.copy_(col_var + w * ((g * g).mean(dim=-2, keepdim=True) - col_var))
            var = (row_var @ col_var) / row_var.mean(dim=-2, keepdim=True).clamp(min=eps1)
        else:
            variance = state["variance"]
            variance.copy_(variance + w * (g * g - variance))
            var = variance
        update = var.clamp(min=eps1 * eps1).rsqrt() * g
        n_u = max(update.numel(), 1)
        denom = (update.norm().astype("float64") / (math.sqrt(n_u) * group["d"])).clamp(min=1.0)
        p -= update * (alpha / denom).astype(p.dtype.name)
