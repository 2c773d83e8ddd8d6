"""Optimizers with PyTorch's API and formulas: parameter groups, ``state_dict``, and
``SGD``, ``Adam``, ``AdamW``, ``RMSprop``, ``Adagrad``, ``Adadelta``; schedules in
:mod:`.lr_scheduler`.

Updates are in place and unrecorded (unless the optimizer is made with
``differentiable=True``: then each step is recorded, as PyTorch's), so attached parameters
stay the same objects across steps. All optimizer state (momentum buffers, moments, step
counts) and each group's learning rate are tensors made when the optimizer (or the group)
is: a traced training step (``fg.trace``) captures them by reference, so every call of the
traced step updates them, and setting a learning rate between calls (``opt.lr = ...``,
``group["lr"] = ...``, a scheduler) reaches the traced step too.
"""

from __future__ import annotations

import copy
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, Callable, ClassVar, Self

import numpy as np

from .. import _core
from .._core import Tensor, maximum
from .._tensor import default_float
from ..autodiff import enable_grad, is_grad_enabled, no_grad

__all__ = [
    "ASGD",
    "LBFGS",
    "SGD",
    "Adadelta",
    "Adafactor",
    "Adagrad",
    "Adam",
    "AdamW",
    "Adamax",
    "Muon",
    "NAdam",
    "Optimizer",
    "RAdam",
    "RMSprop",
    "Rprop",
    "lr_scheduler",
    "swa_utils",
]


class _Group(dict):
    """A parameter group: a dict whose ``"lr"`` entry, when set, also updates the
    learning-rate tensor that (traced) steps read."""

    _lr_tensors: dict[str, Tensor]

    def __setitem__(self, key: str, value: Any) -> None:
        if key == "lr":
            # (any number: as PyTorch, only the optimizer's construction rejects a negative
            # rate; a schedule stepped past its end, e.g. OneCycleLR's last linear step, may
            # set one)
            value = _check_lr(value, nonneg=False)
            # (a new rate replaces a learning-rate tensor a differentiable step reads)
            self.__dict__.pop("_grad_lr", None)
            with no_grad():
                # (unpickling sets the items before it restores the tensors)
                for t in self.__dict__.get("_lr_tensors", {}).values():
                    t.fill_(value)
        super().__setitem__(key, value)

    def update(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        # (through __setitem__: dict.update would leave the learning-rate tensor behind)
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def __ior__(self, other: Any) -> Self:  # type: ignore[override]
        self.update(other)
        return self

    def _lr_on(self, device: str) -> Tensor:
        t = self._lr_tensors.get(device)
        if t is None:
            t = _core.full((), self["lr"], dtype="float64", device=device)
            self._lr_tensors[device] = t
        return t


def _check_lr(value: Any, nonneg: bool = True) -> float:
    if isinstance(value, Tensor) or (
        # a one-element array or another library's tensor, e.g. from a torch state dict
        hasattr(value, "item") and not isinstance(value, (bool, int, float))
    ):
        n = value.numel() if hasattr(value, "numel") else np.size(value)
        if n != 1:
            raise ValueError(f"Tensor lr must be 1-element, got shape {list(value.shape)}")
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"learning rate must be a number, got {type(value).__name__}")
    if nonneg and not value >= 0.0:
        raise ValueError(f"Invalid learning rate: {value} (must be >= 0)")
    return float(value)


def _nonneg(opt: str, name: str, value: Any) -> None:
    if not value >= 0.0:
        raise ValueError(f"{opt}: {name} must be non-negative, got {value}")


def _positive(opt: str, name: str, value: Any) -> None:
    if not value > 0.0:
        raise ValueError(f"{opt}: {name} must be positive, got {value}")


def _unit(opt: str, name: str, value: Any) -> None:
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{opt}: {name} must lie in [0, 1), got {value}")


# the optimizers alive: a trace that starts makes the states their next step would make
# (after ``opt.state.clear()``, or for a parameter its module moved since the state was made),
# so that the trace captures them (a state made inside the trace would not carry over to its
# later calls)
_LIVE: weakref.WeakSet = weakref.WeakSet()


def _remake_moved_states() -> None:
    """Called before a trace starts: see ``Optimizer._remake_moved``."""
    for opt in list(_LIVE):
        opt._remake_moved()


class Optimizer:
    """Base class: ``params`` is an iterable of tensors or of dicts (parameter groups, each
    with ``"params"`` and any hyperparameter overriding ``defaults``)."""

    def __init__(self, params: Iterable[Any], defaults: dict) -> None:
        # (with the implementation switches the constructor was given: foreach, fused, ...)
        self.defaults = {**defaults, **self.__dict__.get("_impl_flags", {})}
        self.param_groups: list[_Group] = []
        self.state: dict[Tensor, dict[str, Any]] = {}
        # parameters a step updated (or a loaded state dict covered): PyTorch makes state on
        # a parameter's first step, so only these appear in `state_dict`
        self._stepped: set[int] = set()
        _LIVE.add(self)
        if isinstance(params, set):
            warnings.warn(
                f"{type(self).__name__}: optimizer parameters need to be organized in ordered "
                "collections, but the ordering of tensors in sets will change between runs. "
                "Please use a list instead. This will be an error in a future release.",
                FutureWarning,
                stacklevel=2,
            )
        items = list(params) if not isinstance(params, Tensor) else [params]
        if not items:
            raise ValueError(f"{type(self).__name__}: optimizer got an empty parameter list")
        groups = items if isinstance(items[0], dict) else [{"params": items}]
        for g in groups:
            self.add_param_group(g)

    # ----------------------------------------------------------------------- groups

    def add_param_group(self, param_group: dict) -> None:
        name = type(self).__name__
        if not isinstance(param_group, dict):
            raise TypeError(f"{name}: a parameter group must be a dict, got {param_group!r}")
        ps = param_group.get("params")
        ps = [ps] if isinstance(ps, Tensor) else list(ps if ps is not None else [])
        if isinstance(param_group.get("params"), set):
            raise TypeError(f"{name}: parameters must be an ordered collection, not a set")
        # `named_parameters()` (torch >= 2.6): (name, parameter) pairs; the group keeps the
        # names as "param_names" (carried by state_dict)
        names = [p[0] for p in ps if isinstance(p, tuple)]
        if names:
            if len(names) != len(ps) or any(len(p) != 2 for p in ps):
                raise ValueError(
                    f"{name}: all optimizer params should be with/without names (each a "
                    "(name, parameter) pair). Some param names are missing"
                )
            ps = [p[1] for p in ps]
        named = bool(names) or "param_names" in param_group
        for g in self.param_groups:
            if ("param_names" in g) != named:
                raise ValueError(
                    f"{name}: all optimizer param groups should be with/without names. cannot "
                    f"add param group {'with' if named else 'without'} names to the optimizer"
                )
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        for i, p in enumerate(ps):
            if not isinstance(p, Tensor):
                raise TypeError(f"{name}: parameter {i} is a {type(p).__name__}, not a Tensor")
            if p.dtype.kind != "f":
                raise TypeError(
                    f"{name}: parameter {i} is a {p.dtype} tensor; only float tensors can be "
                    "optimized"
                )
            if id(p) in existing:
                raise ValueError(f"{name}: some parameters appear in more than one parameter group")
            if not self._differentiable() and not (p.is_leaf or p.retains_grad):
                raise ValueError(f"{name}: can't optimize a non-leaf Tensor (parameter {i})")
        if len({id(p) for p in ps}) != len(ps):
            warnings.warn(
                f"{name}: optimizer contains a parameter group with duplicate parameters; in "
                "future, this will cause an error; see github.com/pytorch/pytorch/issues/40967 "
                "for more information",
                stacklevel=3,
            )
        group = _Group()
        dict.update(group, {k: v for k, v in self.defaults.items()})
        dict.update(group, {k: v for k, v in param_group.items() if k != "params"})
        if names:
            dict.__setitem__(group, "param_names", names)
        group._lr_tensors = {}
        lr = group["lr"]
        if isinstance(lr, Tensor) and lr.requires_grad:
            # a differentiable step reads this tensor itself, so that gradients reach it
            group._grad_lr = lr
        dict.__setitem__(group, "lr", _check_lr(lr))
        for p in ps:  # made now, so that a traced step captures them
            group._lr_on(p.device)
        dict.__setitem__(group, "params", ps)
        self._validate(group)
        self.param_groups.append(group)
        for p in ps:
            self.state[p] = self._init_state(p, group)

    def _validate(self, group: dict) -> None:
        pass

    def _differentiable(self) -> bool:
        """Whether steps are recorded for autodiff (``differentiable=True``)."""
        return bool(self.defaults.get("differentiable"))

    # PyTorch makes a parameter's state on its first step (Adagrad: at construction)
    _lazy_state = True
    # what a hyperparameter missing from a loaded group (a state dict saved before it
    # existed) becomes: PyTorch's value for such old groups, not this optimizer's setting
    _legacy_defaults: ClassVar[dict[str, Any]] = {
        "maximize": False,
        "foreach": None,
        "capturable": False,
        "differentiable": False,
        "fused": None,
    }
    # state kept for the fused kernels only, not part of PyTorch's state dict
    _internal: tuple[str, ...] = ()

    def _loading(self, p: Tensor, saved: dict) -> None:
        """Called with each parameter's saved state before it is restored."""

    def _init_state(self, p: Tensor, group: dict) -> dict[str, Any]:
        return {}

    def _remake_moved(self) -> None:
        """The states the next step would make (outside a trace) are made now: for a
        parameter whose state was cleared, or made before its module moved it."""
        if not self._lazy_state:
            return
        stepped = self.__dict__.get("_stepped", set())
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state.get(p)
                if not state or (id(p) not in stepped and self._moved_since_made(p, group, state)):
                    group._lr_on(p.device)
                    self.state[p] = self._init_state(p, group)

    def _moved_since_made(self, p: Tensor, group: dict, state: dict) -> bool:
        """Whether the state made for ``p`` (at construction) holds tensors on another device
        or of another dtype than a state made for it now would."""
        if not any(
            isinstance(v, Tensor)
            and (v.device != p.device or (v.shape == p.shape and v.dtype != p.dtype))
            for v in state.values()
        ):
            return False
        # (a 0-d parameter's float64 step count has its shape: compare with a new state)
        fresh = self._init_state(p, group)
        return any(
            isinstance(v, Tensor)
            and isinstance(state.get(k), Tensor)
            and (state[k].device != v.device or state[k].dtype != v.dtype)
            for k, v in fresh.items()
        )

    # ----------------------------------------------------------------- conveniences

    @property
    def params(self) -> list[Tensor]:
        """Every parameter, group after group."""
        return [p for g in self.param_groups for p in g["params"]]

    @property
    def lr(self) -> float:
        """The first group's learning rate; setting it sets every group's."""
        return self.param_groups[0]["lr"]

    @lr.setter
    def lr(self, value: float) -> None:
        for g in self.param_groups:
            g["lr"] = value

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drops every gradient (``set_to_none``), or zeroes each in place (the gradient
        tensors stay the same objects, detached from any graph), as PyTorch."""
        for p in self.params:
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                g = p.grad
                if g.requires_grad:
                    g = g.detach()
                    p.grad = g
                with no_grad():
                    g.zero_()

    def clear_grad(self) -> Optimizer:
        """MegEngine's spelling of ``zero_grad()``: every gradient becomes None. Returns
        self."""
        self.zero_grad(set_to_none=True)
        return self

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter with a gradient. Returns the closure's loss when
        given one (PyTorch), else the optimizer itself, so MegEngine's
        ``opt.step().clear_grad()`` chains."""
        loss = closure() if closure is not None else None
        # differentiable=True: the update is recorded (composed tensor ops, no fused pass),
        # so gradients flow from the new parameters and state to the gradients, the old
        # parameters and state and a learning-rate tensor that requires grad
        diff = self._differentiable()
        with enable_grad() if diff else no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if group.get("maximize"):
                        g = -g
                    first = self._lazy_state and id(p) not in self._stepped and not _core._tracing()
                    self._stepped.add(id(p))
                    lr = group.__dict__.get("_grad_lr") if diff else None
                    if lr is None:
                        lr = group._lr_on(p.device)
                    state = self.state.get(p)
                    if not state or (first and self._moved_since_made(p, group, state)):
                        # a state cleared or replaced by an empty one (``opt.state.clear()``,
                        # ``opt.state = defaultdict(dict)``), or one made for the parameter
                        # before the module moved it (``model.to(device)``, ``.double()``
                        # after the optimizer was built): a fresh start, as PyTorch's, which
                        # makes the state on the first step
                        state = self.state[p] = self._init_state(p, group)
                    self._update(p, g, group, state, lr)
        return loss if closure is not None else self

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict, lr: Tensor) -> None:
        raise NotImplementedError

    # ---------------------------------------------------------------------- step hooks

    def register_step_pre_hook(self, hook: Callable[..., Any]) -> Any:
        """``hook(optimizer, args, kwargs)`` runs before each ``step`` (a returned
        ``(args, kwargs)`` replaces them). Returns a handle whose ``remove()`` drops it."""
        from ..nn.modules import _HookHandle

        return _HookHandle(self.__dict__.setdefault("_step_pre_hooks", OrderedDict()), hook)

    def register_step_post_hook(self, hook: Callable[..., Any]) -> Any:
        """``hook(optimizer, args, kwargs)`` runs after each ``step``. Returns a handle whose
        ``remove()`` drops it."""
        from ..nn.modules import _HookHandle

        return _HookHandle(self.__dict__.setdefault("_step_post_hooks", OrderedDict()), hook)

    def _hook_table(self, name: str, hook: Callable[..., Any], prepend: bool = False) -> Any:
        from ..nn.modules import _HookHandle

        table = self.__dict__.setdefault(name, OrderedDict())
        handle = _HookHandle(table, hook)
        if prepend:
            table.move_to_end(handle.id, last=False)
        return handle

    def register_state_dict_pre_hook(
        self, hook: Callable[[Any], None], prepend: bool = False
    ) -> Any:
        """``hook(optimizer)`` runs before :meth:`state_dict` builds the dict (first of all
        with ``prepend``). Returns a handle whose ``remove()`` drops it."""
        return self._hook_table("_state_dict_pre_hooks", hook, prepend)

    def register_state_dict_post_hook(
        self, hook: Callable[[Any, dict], dict | None], prepend: bool = False
    ) -> Any:
        """``hook(optimizer, state_dict)`` runs on the dict :meth:`state_dict` built; a
        returned dict replaces it. Returns a handle whose ``remove()`` drops it."""
        return self._hook_table("_state_dict_post_hooks", hook, prepend)

    def register_load_state_dict_pre_hook(
        self, hook: Callable[[Any, dict], dict | None], prepend: bool = False
    ) -> Any:
        """``hook(optimizer, state_dict)`` runs before :meth:`load_state_dict` reads the
        dict (a shallow copy of the one given); a returned dict is loaded instead. Returns a
        handle whose ``remove()`` drops it."""
        return self._hook_table("_load_state_dict_pre_hooks", hook, prepend)

    def register_load_state_dict_post_hook(
        self, hook: Callable[[Any], None], prepend: bool = False
    ) -> Any:
        """``hook(optimizer)`` runs after :meth:`load_state_dict`. Returns a handle whose
        ``remove()`` drops it."""
        return self._hook_table("_load_state_dict_post_hooks", hook, prepend)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = _with_step_hooks(cls.__dict__["step"])  # type: ignore[method-assign]

    # ------------------------------------------------------------------ state dicts

    def state_dict(self) -> dict:
        """``{"state": {index: {name: tensor}}, "param_groups": [{..., "params": [index]}]}``
        with parameters numbered across groups, as PyTorch (state tensors are copies); the
        state-dict hooks run around it."""
        for hook in list(self.__dict__.get("_state_dict_pre_hooks", {}).values()):
            hook(self)
        index = {id(p): i for i, p in enumerate(self.params)}
        # (parameters without state, or not stepped yet, are left out, as PyTorch does)
        stepped = self.__dict__.get("_stepped", set())
        state = {
            index[id(p)]: _copy_state({k: v for k, v in s.items() if k not in self._internal})
            for p, s in self.state.items()
            if s and (not self._lazy_state or id(p) in stepped)
        }
        groups = []
        for g in self.param_groups:
            d = {k: v for k, v in g.items() if k != "params"}
            d["params"] = [index[id(p)] for p in g["params"]]
            groups.append(d)
        out = {"state": state, "param_groups": groups}
        for hook in list(self.__dict__.get("_state_dict_post_hooks", {}).values()):
            replaced = hook(self, out)
            if replaced is not None:
                out = replaced
        return out

    def load_state_dict(self, state_dict: dict) -> None:
        """Restores hyperparameters and state written by :meth:`state_dict` (into the
        existing state tensors, in place). Each group's hyperparameters become the saved
        group's, as PyTorch (keys the saved group lacks are dropped, those this optimizer
        needs coming back from its defaults); saved parameter ids map onto this optimizer's
        parameters in group order. The load-state-dict hooks run around it."""
        state_dict = dict(state_dict)
        for hook in list(self.__dict__.get("_load_state_dict_pre_hooks", {}).values()):
            replaced = hook(self, state_dict)
            if replaced is not None:
                state_dict = replaced
        groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(self.param_groups):
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: {len(groups)} parameter groups in the "
                f"state dict, {len(self.param_groups)} here"
            )
        for mine, theirs in zip(self.param_groups, groups):
            if len(mine["params"]) != len(theirs["params"]):
                raise ValueError(
                    f"{type(self).__name__}.load_state_dict: a group of "
                    f"{len(theirs['params'])} parameters in the state dict does not match one "
                    f"of {len(mine['params'])} here"
                )
        params = self.params
        saved_ids = [i for g in groups for i in g["params"]]
        saved = state_dict["state"]
        for mine, theirs in zip(self.param_groups, groups):
            for k in [k for k in mine if k not in theirs and k not in ("params", "param_names")]:
                if k in self._legacy_defaults:
                    mine[k] = self._legacy_defaults[k]
                elif k in self.defaults:
                    mine[k] = self.defaults[k]
                else:
                    del mine[k]
            for k, v in theirs.items():
                if k != "params":
                    mine[k] = v
        with no_grad():
            for i, (sid, p) in enumerate(zip(saved_ids, params)):
                s = saved.get(sid, saved.get(str(sid)))
                if s is None:
                    continue
                self.__dict__.setdefault("_stepped", set()).add(id(p))
                self._loading(p, s)
                for k, v in s.items():
                    cur = self.state[p].get(k)
                    if isinstance(cur, Tensor) and v is None:
                        continue
                    if isinstance(cur, Tensor):
                        src = _state_tensor(v)
                        if tuple(src.shape) != tuple(cur.shape) and src.numel() == cur.numel() == 1:
                            # a one-element step saved as shape (1,) (or the reverse)
                            src = src.reshape(tuple(cur.shape))
                        if tuple(src.shape) != tuple(cur.shape):
                            raise ValueError(
                                f"{type(self).__name__}.load_state_dict: state {k!r} of "
                                f"parameter {i} has shape {list(src.shape)}, expected "
                                f"{list(cur.shape)}"
                            )
                        cur.copy_(src.astype(cur.dtype).to(cur.device))
                    else:
                        self.state[p][k] = v
        self._after_load()
        for hook in list(self.__dict__.get("_load_state_dict_post_hooks", {}).values()):
            hook(self)

    def _after_load(self) -> None:
        """Called when :meth:`load_state_dict` has restored the groups and the state."""

    def __getstate__(self) -> dict:
        # (without the step wrapper a learning-rate scheduler put on this instance: it is
        # a closure, which neither pickles nor belongs to a copy)
        state = dict(self.__dict__)
        if getattr(state.get("step"), "_wrapped_by_lr_sched", False):
            del state["step"]
        return state

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(g):
                if k != "params":
                    lines.append(f"    {k}: {g[k]}")
        return "\n".join(lines + [")"])


def _state_tensor(v: Any) -> Tensor:
    """A saved state value as a tensor of its own shape: a ferrograd tensor as is; a Python
    or NumPy number, an ndarray or another library's (e.g. torch's) tensor through NumPy,
    0-d values staying 0-d (a ``step`` saved as ``3``, ``np.float64(3)`` or ``tensor(3.)``)."""
    if isinstance(v, Tensor):
        return v
    if hasattr(v, "detach") and hasattr(v, "cpu"):  # a torch tensor
        v = v.detach().cpu().numpy()
    a = np.array(v)  # (a copy, C-contiguous; np.ascontiguousarray would make 0-d 1-d)
    if a.dtype == object:
        raise TypeError(f"load_state_dict: cannot read a state value of type {type(v).__name__}")
    return Tensor._from_numpy(a)


# hooks run around every optimizer's step (``optimizer.register_optimizer_step_pre_hook``)
_global_step_pre_hooks: OrderedDict = OrderedDict()
_global_step_post_hooks: OrderedDict = OrderedDict()


def register_optimizer_step_pre_hook(hook: Callable[..., Any]) -> Any:
    """``hook(optimizer, args, kwargs)`` runs before every optimizer's ``step`` (before the
    optimizer's own pre-hooks); a returned ``(args, kwargs)`` replaces them. Returns a
    handle whose ``remove()`` drops it."""
    from ..nn.modules import _HookHandle

    return _HookHandle(_global_step_pre_hooks, hook)


def register_optimizer_step_post_hook(hook: Callable[..., Any]) -> Any:
    """``hook(optimizer, args, kwargs)`` runs after every optimizer's ``step`` (after the
    optimizer's own post-hooks). Returns a handle whose ``remove()`` drops it."""
    from ..nn.modules import _HookHandle

    return _HookHandle(_global_step_post_hooks, hook)


def _with_step_hooks(step: Callable[..., Any]) -> Callable[..., Any]:
    """``step`` running the step hooks around it (once, also when a subclass's step calls
    its base's). As PyTorch, a hook's ``args`` start with the optimizer itself."""
    import functools

    @functools.wraps(step)
    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        d = self.__dict__
        pre, post = d.get("_step_pre_hooks") or {}, d.get("_step_post_hooks") or {}
        gpre, gpost = _global_step_pre_hooks, _global_step_post_hooks
        if not (pre or post or gpre or gpost) or d.get("_in_step_hooks"):
            return step(self, *args, **kwargs)
        d["_in_step_hooks"] = True
        try:
            full = (self, *args)
            for hook in [*gpre.values(), *pre.values()]:
                r = hook(self, full, kwargs)
                if r is not None:
                    if not (isinstance(r, tuple) and len(r) == 2):
                        raise RuntimeError(
                            f"{type(self).__name__}.step: a step pre-hook must return None or "
                            f"a tuple of (new_args, new_kwargs), but got {r!r}"
                        )
                    full, kwargs = r
            out = step(*full, **kwargs)
            for hook in [*post.values(), *gpost.values()]:
                hook(self, full, kwargs)
            return out
        finally:
            d["_in_step_hooks"] = False

    return wrapped


Optimizer.step = _with_step_hooks(Optimizer.step)  # type: ignore[method-assign]


def _copy_state(s: dict) -> dict:
    """One parameter's state with its tensors (also inside lists) copied."""

    def cp(v: Any) -> Any:
        if isinstance(v, Tensor):
            return v.detach().copy()
        if isinstance(v, list):
            return [cp(w) for w in v]
        return v

    return {k: cp(v) for k, v in s.items()}


def _check_adam_group(name: str, group: dict) -> None:
    """The checks of every Adam-like group: betas in [0, 1), eps > 0, weight_decay >= 0."""
    b1, b2 = group["betas"]
    _unit(name, "betas[0]", b1)
    _unit(name, "betas[1]", b2)
    _positive(name, "eps", group["eps"])
    _nonneg(name, "weight_decay", group["weight_decay"])


def _adam_moments(m: Tensor, v: Tensor | None, g: Tensor, b1: float, b2: float) -> None:
    """Adam's running moments in place: ``m = b1 m + (1 - b1) g`` and (unless ``v`` is None)
    ``v = b2 v + (1 - b2) g^2`` (the fused step's arithmetic, in its order)."""
    m *= b1
    m += (1.0 - b1) * g
    if v is not None:
        v *= b2
        v += (1.0 - b2) * (g * g)


def _recorded(t: Tensor) -> Tensor:
    """``t``, or a copy of it while a step is recorded (``differentiable=True``): a tensor
    the step changes in place later (a parameter, a step count) must not be what an
    operation keeps for backward (the weight decay's ``wd * p`` with a tensor ``wd`` that
    requires grad, ``beta ** step`` with tensor betas)."""
    return t.copy() if is_grad_enabled() else t


def _step_tensor(p: Tensor) -> Tensor:
    return _core.zeros((), dtype="float64", device=p.device)


def _fusable(tensors: list[Tensor], scalars: tuple[Tensor | None, ...] = ()) -> bool:
    """Whether the one-pass update takes these tensors (contiguous, one dtype and device,
    outside a trace; on the CPU, or on a CUDA device where the learning-rate and step
    tensors in ``scalars`` are float64 scalars on that device, as the optimizer makes them)."""
    if is_grad_enabled() or not _core._optim_fusable(tensors, True):
        # (a differentiable step records the composed form)
        return False
    dev = str(tensors[0].device)
    return dev == "cpu" or all(
        t is None or (t.dtype.name == "float64" and t.numel() == 1 and str(t.device) == dev)
        for t in scalars
    )


def _fused_step(
    kind: str,
    p: Tensor,
    g: Tensor,
    states: list[Tensor | None],
    hyper: dict[str, float],
    host: Any,
    lr: Tensor,
    aux: Tensor | None = None,
    lr_decay: float = 0.0,
) -> None:
    """One fused update: on the CPU a Rust loop, given the numbers ``host()`` reads from the
    learning-rate and step tensors; on a GPU one kernel, which reads those tensors itself
    (so the step queues without waiting for the device)."""
    if str(p.device) == "cpu":
        _core._optim_step(kind, p, g, states, {**hyper, **host()})
    else:
        _core._optim_step(kind, p, g, states, hyper, lr, aux, lr_decay)


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight
    decay, PyTorch's formulas (the first step's momentum buffer is the gradient)."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        momentum: float = 0,
        dampening: float = 0,
        weight_decay: float = 0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "dampening": dampening,
            "weight_decay": weight_decay,
            "nesterov": nesterov,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict) -> None:
        _nonneg("SGD", "momentum", group["momentum"])
        _nonneg("SGD", "weight_decay", group["weight_decay"])
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening")

    _internal = ("first",)
    _legacy_defaults: ClassVar[dict[str, Any]] = {
        **Optimizer._legacy_defaults,
        "nesterov": False,
        "fused": False,
    }

    def _loading(self, p: Tensor, saved: dict) -> None:
        # PyTorch's state has no `first`: a saved momentum buffer means a step was taken
        first = self.state[p].get("first")
        if first is not None and "first" not in saved:
            first.fill_(0.0 if saved.get("momentum_buffer") is not None else 1.0)

    def _init_state(self, p: Tensor, group: dict) -> dict[str, Any]:
        if not group["momentum"]:
            return {}
        # `first` is 1 until the first step: the first buffer is the gradient itself
        return {
            "momentum_buffer": _core.zeros_like(p),
            "first": _core.ones((), dtype="float64", device=p.device),
        }

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict, lr: Tensor) -> None:
        wd, m = group["weight_decay"], group["momentum"]
        if m and "first" not in state:
            # a momentum buffer set by hand (PyTorch's state has only the buffer): the next
            # step is not the first
            state["first"] = _core.zeros((), dtype="float64", device=p.device)
        buf = state["momentum_buffer"] if m else None
        first = state["first"] if m else None
        if _fusable([p, g] + ([buf] if m else []), (lr, first)):
            # one pass (the same arithmetic as below)
            _fused_step(
                "sgd",
                p,
                g,
                [buf],
                {
                    "momentum": float(m),
                    "dampening": float(group["dampening"]),
                    "weight_decay": float(wd),
                    "nesterov": float(bool(group["nesterov"])),
                },
                lambda: {
                    "lr": float(lr.item()),
                    "first": float(first is not None and first.item() != 0.0),
                },
                lr,
                first,
            )
            if first is not None:
                first.zero_()
            return
        if wd:
            g = g + wd * _recorded(p)
        if m:
            buf, first = state["momentum_buffer"], state["first"]
            d = group["dampening"]
            buf *= m
            buf += g * ((1.0 - d) + d * first) if d else g
            first.zero_()
            # (a recorded step multiplies by a copy: a learning rate that requires grad
            # keeps the factor for backward, and the buffer changes in place next step)
            g = g + m * buf if group["nesterov"] else buf.copy() if is_grad_enabled() else buf
        p -= lr * g


class Adam(Optimizer):
    """Adam (Kingma and Ba, 2015) with L2 weight decay and AMSGrad, PyTorch's formulas."""

    _decoupled = False
    _legacy_defaults: ClassVar[dict[str, Any]] = {
        **Optimizer._legacy_defaults,
        "amsgrad": False,
        "decoupled_weight_decay": False,
    }

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        decoupled_weight_decay: bool = False,
    ) -> None:
        b1, b2 = betas
        if isinstance(b1, Tensor) != isinstance(b2, Tensor):
            raise ValueError(
                f"{type(self).__name__}: betas must be either both floats or both Tensors, got "
                f"({type(b1).__name__}, {type(b2).__name__})"
            )
        for i, b in enumerate(betas):
            if isinstance(b, Tensor) and b.numel() != 1:
                raise ValueError(
                    f"{type(self).__name__}: Tensor betas[{i}] must be 1-element, got shape "
                    f"{list(b.shape)}"
                )
        defaults = {
            "lr": lr,
            "betas": tuple(betas),
            "eps": eps,
            "weight_decay": weight_decay,
            "amsgrad": amsgrad,
            "maximize": maximize,
            # True: AdamW's decay (``p *= 1 - lr * wd``), as PyTorch's Adam option
            "decoupled_weight_decay": bool(decoupled_weight_decay) or self._decoupled,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict) -> None:
        _check_adam_group(type(self).__name__, group)

    def _init_state(self, p: Tensor, group: dict) -> dict[str, Any]:
        s = {
            "step": _step_tensor(p),
            "exp_avg": _core.zeros_like(p),
            "exp_avg_sq": _core.zeros_like(p),
        }
        if group["amsgrad"]:
            s["max_exp_avg_sq"] = _core.zeros_like(p)
        return s

    @staticmethod
    def _check_flags(bound: dict, foreach: bool | None, capturable: bool) -> None:
        # PyTorch's multi-tensor Adam cannot read tensor hyperparameters unless capturable,
        # and refuses them; so does this one, so that a program behaves the same on both
        if not foreach or capturable:
            return
        if isinstance(bound.get("lr"), Tensor):
            raise ValueError(  # noqa: TRY004 (PyTorch's type)
                "lr as a Tensor is not supported for capturable=False and foreach=True"
            )
        for i, b in enumerate(bound.get("betas", ())):
            if isinstance(b, Tensor):
                raise ValueError(  # noqa: TRY004 (PyTorch's type)
                    f"betas[{i}] as a Tensor is not supported for capturable=False and foreach=True"
                )

    @property
    def t(self) -> int:
        """Steps taken (by the first parameter)."""
        return int(self.state[self.params[0]]["step"].item())

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict, lr: Tensor) -> None:
        b1, b2 = group["betas"]
        wd = group["weight_decay"]
        step = state["step"]
        step += 1.0
        m, v = state["exp_avg"], state["exp_avg_sq"]
        vmax = state["max_exp_avg_sq"] if group["amsgrad"] else None
        if _fusable([p, g, m, v] + ([vmax] if vmax is not None else []), (lr, step)):
            # one pass (the same arithmetic as below)
            _fused_step(
                "adam",
                p,
                g,
                [m, v, vmax],
                {
                    "beta1": float(b1),
                    "beta2": float(b2),
                    "eps": float(group["eps"]),
                    "weight_decay": float(wd),
                    "decoupled": float(bool(group.get("decoupled_weight_decay", self._decoupled))),
                },
                lambda: {
                    "lr": float(lr.item()),
                    "bias_correction1": float((1.0 - b1**step).item()),
                    "bias_correction2_sqrt": float((1.0 - b2**step).sqrt().item()),
                },
                lr,
                step,
            )
            return
        if wd:
            if group.get("decoupled_weight_decay", self._decoupled):
                p *= 1.0 - lr * wd
            else:
                g = g + wd * _recorded(p)
        m, v = state["exp_avg"], state["exp_avg_sq"]
        _adam_moments(m, v, g, b1, b2)
        t = _recorded(step)
        bc1 = 1.0 - b1**t
        bc2_sqrt = (1.0 - b2**t).sqrt()
        if group["amsgrad"]:
            vmax = state["max_exp_avg_sq"]
            # (a recorded step reads a copy: the maximum's backward needs the old values)
            vmax.copy_(maximum(vmax.copy() if is_grad_enabled() else vmax, v))
            v = vmax
        denom = v.sqrt() / bc2_sqrt + group["eps"]
        p -= (lr / bc1) * (_recorded(m) / denom)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter): ``p *= 1 - lr * wd``."""

    _decoupled = True

    def _after_load(self) -> None:
        # (a loaded group is AdamW's, whatever it says: PyTorch's rule for old AdamW dicts)
        for g in self.param_groups:
            g["decoupled_weight_decay"] = True

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)


class RMSprop(Optimizer):
    """RMSprop (centered and with momentum as options), PyTorch's formulas."""

    _legacy_defaults: ClassVar[dict[str, Any]] = {
        **Optimizer._legacy_defaults,
        "momentum": 0,
        "centered": False,
    }

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum: float = 0,
        centered: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "alpha": alpha,
            "eps": eps,
            "weight_decay": weight_decay,
            "momentum": momentum,
            "centered": centered,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict) -> None:
        if not 0.0 <= group["alpha"] <= 1.0:
            raise ValueError(f"RMSprop: alpha must lie in [0, 1], got {group['alpha']}")
        _positive("RMSprop", "eps", group["eps"])
        _nonneg("RMSprop", "momentum", group["momentum"])
        _nonneg("RMSprop", "weight_decay", group["weight_decay"])

    def _init_state(self, p: Tensor, group: dict) -> dict[str, Any]:
        s = {"step": _step_tensor(p), "square_avg": _core.zeros_like(p)}
        if group["momentum"]:
            s["momentum_buffer"] = _core.zeros_like(p)
        if group["centered"]:
            s["grad_avg"] = _core.zeros_like(p)
        return s

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict, lr: Tensor) -> None:
        a, wd, eps = group["alpha"], group["weight_decay"], group["eps"]
        state["step"] += 1.0
        sq = state["square_avg"]
        buf = state.get("momentum_buffer") if group["momentum"] else None
        ga = state.get("grad_avg") if group["centered"] else None
        if _fusable([p, g, sq] + [t for t in (buf, ga) if t is not None], (lr,)):
            # one pass (the same arithmetic as below)
            _fused_step(
                "rmsprop",
                p,
                g,
                [sq, buf, ga],
                {
                    "alpha": float(a),
                    "eps": float(eps),
                    "weight_decay": float(wd),
                    "momentum": float(group["momentum"]),
                    "centered": float(bool(group["centered"])),
                },
                lambda: {"lr": float(lr.item())},
                lr,
            )
            return
        if wd:
            g = g + wd * _recorded(p)
        sq = state["square_avg"]
        sq *= a
        sq += (1.0 - a) * (g * g)
        if group["centered"]:
            ga = state["grad_avg"]
            ga *= a
            ga += (1.0 - a) * g
            avg = (sq - ga * ga).sqrt() + eps
        else:
            avg = sq.sqrt() + eps
        if group["momentum"]:
            buf = state["momentum_buffer"]
            buf *= group["momentum"]
            buf += g / avg
            p -= lr * buf
        else:
            p -= lr * (g / avg)


class Adagrad(Optimizer):
    """Adagrad with learning-rate decay, PyTorch's formulas."""

    _lazy_state = False

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        lr_decay: float = 0,
        weight_decay: float = 0,
        initial_accumulator_value: float = 0,
        eps: float = 1e-10,
        *,
        maximize: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "lr_decay": lr_decay,
            "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value,
            "eps": eps,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict) -> None:
        _nonneg("Adagrad", "lr_decay", group["lr_decay"])
        _nonneg("Adagrad", "weight_decay", group["weight_decay"])
        _nonneg("Adagrad", "initial_accumulator_value", group["initial_accumulator_value"])
        _positive("Adagrad", "eps", group["eps"])

    def _init_state(self, p: Tensor, group: dict) -> dict[str, Any]:
        acc = _core.full(
            p.shape, group["initial_accumulator_value"], dtype=p.dtype.name, device=p.device
        )
        return {"step": _step_tensor(p), "sum": acc}

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict, lr: Tensor) -> None:
        step = state["step"]
        step += 1.0
        decay = float(group["lr_decay"])
        s = state["sum"]
        if _fusable([p, g, s], (lr, step)):
            # one pass (the same arithmetic as below; on a GPU the kernel computes the step's
            # rate from lr and step)
            _fused_step(
                "adagrad",
                p,
                g,
                [s],
                {"eps": float(group["eps"]), "weight_decay": float(group["weight_decay"])},
                lambda: {"lr": float((lr / (1.0 + (step - 1.0) * decay)).item())},
                lr,
                step,
                decay,
            )
            return
        clr = lr / (1.0 + (step - 1.0) * group["lr_decay"])
        if group["weight_decay"]:
            g = g + group["weight_decay"] * _recorded(p)
        s += g * g
        p -= clr * (g / (s.sqrt() + group["eps"]))


class Adadelta(Optimizer):
    """Adadelta (Zeiler, 2012), PyTorch's formulas."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0,
        *,
        maximize: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "rho": rho,
            "eps": eps,
            "weight_decay": weight_decay,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict) -> None:
        if not 0.0 <= group["rho"] <= 1.0:
            raise ValueError(f"Adadelta: rho must lie in [0, 1], got {group['rho']}")
        _positive("Adadelta", "eps", group["eps"])
        _nonneg("Adadelta", "weight_decay", group["weight_decay"])

    def _init_state(self, p: Tensor, group: dict) -> dict[str, Any]:
        return {
            "step": _step_tensor(p),
            "square_avg": _core.zeros_like(p),
            "acc_delta": _core.zeros_like(p),
        }

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict, lr: Tensor) -> None:
        rho, eps = group["rho"], group["eps"]
        state["step"] += 1.0
        sq, acc = state["square_avg"], state["acc_delta"]
        if _fusable([p, g, sq, acc], (lr,)):
            # one pass (the same arithmetic as below)
            hyper = {"rho": float(rho), "eps": float(eps)}
            hyper["weight_decay"] = float(group["weight_decay"])
            _fused_step("adadelta", p, g, [sq, acc], hyper, lambda: {"lr": float(lr.item())}, lr)
            return
        if group["weight_decay"]:
            g = g + group["weight_decay"] * _recorded(p)
        sq, acc = state["square_avg"], state["acc_delta"]
        sq *= rho
        sq += (1.0 - rho) * (g * g)
        delta = (acc + eps).sqrt() / (sq + eps).sqrt() * g
        acc *= rho
        acc += (1.0 - rho) * (delta * delta)
        p -= lr * delta


class _AdamFamily(Optimizer):
    """Shared arguments and checks of Adamax, NAdam and RAdam (composed tensor ops).

    Their updates read no tensor values: the step count, bias corrections and learning rate
    stay 0-d float64 tensors (as Adam's), so a step runs inside :func:`ferrograd.trace` and
    each call of the traced step uses the current step count."""

    _legacy_defaults: ClassVar[dict[str, Any]] = {
        **Optimizer._legacy_defaults,
        "decoupled_weight_decay": False,
    }

    def __init__(self, params: Iterable[Any], defaults: dict) -> None:
        defaults["betas"] = tuple(defaults["betas"])
        super().__init__(params, defaults)

    def _validate(self, group: dict) -> None:
        _check_adam_group(type(self).__name__, group)

    def _decay(self, p: Tensor, g: Tensor, group: dict, lr: Tensor) -> Tensor:
        wd = group["weight_decay"]
        if not wd:
            return g
        if group.get("decoupled_weight_decay"):
            p *= 1.0 - lr * wd
            return g
        return g + wd * _recorded(p)


def _f64(t: Tensor) -> Tensor:
    """A 0-d state tensor as float64 (PyTorch reads such values as Python floats)."""
    return _recorded(t) if t.dtype.name == "float64" else t.astype("float64")


class Adamax(_AdamFamily):
    """Adamax (Adam with the infinity norm), PyTorch's formulas."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        *,
        maximize: bool = False,
    ) -> None:
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, {**defaults, "maximize": maximize})

    def _init_state(self, p: Tensor, group: dict) -> dict[str, Any]:
        return {
            "step": _step_tensor(p),
            "exp_avg": _core.zeros_like(p),
            "exp_inf": _core.zeros_like(p),
        }

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict, lr: Tensor) -> None:
        b1, b2 = group["betas"]
        step = state["step"]
        step += 1.0
        g = self._decay(p, g, group, lr)
        m, u = state["exp_avg"], state["exp_inf"]
        _adam_moments(m, None, g, b1, b2)
        u.copy_(maximum(u * b2, g.abs() + group["eps"]))
        p -= (lr / (1.0 - b1 ** _f64(step))) * (_recorded(m) / u)


class NAdam(_AdamFamily):
    """Adam with Nesterov momentum (Dozat), with PyTorch's momentum decay schedule."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "momentum_decay": momentum_decay,
            "decoupled_weight_decay": decoupled_weight_decay,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict) -> None:
        super()._validate(group)
        _nonneg("NAdam", "momentum_decay", group["momentum_decay"])

    def _init_state(self, p: Tensor, group: dict) -> dict[str, Any]:
        return {
            "step": _step_tensor(p),
            # (PyTorch keeps this product in the default float dtype: float32 unless changed)
            "mu_product": _core.ones((), dtype=default_float(), device=p.device),
            "exp_avg": _core.zeros_like(p),
            "exp_avg_sq": _core.zeros_like(p),
        }

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict, lr: Tensor) -> None:
        b1, b2 = group["betas"]
        step = state["step"]
        step += 1.0
        t = _f64(step)
        g = self._decay(p, g, group, lr)
        md = group["momentum_decay"]
        mu = b1 * (1.0 - 0.5 * 0.96 ** (t * md))
        mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((t + 1.0) * md))
        prod_t = state["mu_product"]
        # (PyTorch multiplies by the Python float mu: rounded to the product's dtype first)
        prod_t *= mu if prod_t.dtype.name == "float64" else mu.astype(prod_t.dtype)
        prod = _f64(prod_t)
        m, v = state["exp_avg"], state["exp_avg_sq"]
        _adam_moments(m, v, g, b1, b2)
        denom = (_recorded(v) / (1.0 - b2**t)).sqrt() + group["eps"]
        p -= (lr * (1.0 - mu) / (1.0 - prod)) * (g / denom)
        p -= (lr * mu_next / (1.0 - prod * mu_next)) * (_recorded(m) / denom)


class RAdam(_AdamFamily):
    """Rectified Adam (Liu et al.): plain momentum SGD until the variance estimate is
    reliable (``rho_t > 5``), then Adam with the rectification term, PyTorch's formulas
    (the choice is a ``where`` on the step tensor, so a traced step makes it each call)."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        decoupled_weight_decay: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "decoupled_weight_decay": decoupled_weight_decay,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def _init_state(self, p: Tensor, group: dict) -> dict[str, Any]:
        return {
            "step": _step_tensor(p),
            "exp_avg": _core.zeros_like(p),
            "exp_avg_sq": _core.zeros_like(p),
        }

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict, lr: Tensor) -> None:
        b1, b2 = group["betas"]
        step = state["step"]
        step += 1.0
        t = _f64(step)
        g = self._decay(p, g, group, lr)
        m, v = state["exp_avg"], state["exp_avg_sq"]
        _adam_moments(m, v, g, b1, b2)
        bc1, bc2 = 1.0 - b1**t, 1.0 - b2**t
        rho_inf = 2.0 / (1.0 - b2) - 1.0
        rho_t = rho_inf - 2.0 * t * b2**t / bc2
        rectified = rho_t > 5.0
        # (clamped: the unused branch's square root must not see a negative number)
        rect = (
            ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)).clamp(
                min=0.0
            )
        ) ** 0.5
        adaptive = bc2**0.5 / (v.sqrt() + group["eps"])
        corrected = (_recorded(m) / bc1) * lr
        p -= _core.where(rectified, corrected * adaptive * rect, corrected)


from . import lr_scheduler


class Rprop(Optimizer):
    """Resilient backpropagation: each entry's step size grows by ``etas[1]`` while its
    gradient keeps its sign and shrinks by ``etas[0]`` when it flips (that step is then
    skipped), within ``step_sizes``; the update is ``-sign(grad) * step_size``. PyTorch's
    formulas."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        etas: tuple[float, float] = (0.5, 1.2),
        step_sizes: tuple[float, float] = (1e-6, 50),
        *,
        maximize: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "etas": tuple(etas),
            "step_sizes": tuple(step_sizes),
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict) -> None:
        minus, plus = group["etas"]
        if not 0.0 < minus < 1.0 < plus:
            raise ValueError(
                f"Rprop: etas must satisfy 0 < etaminus < 1 < etaplus, got {group['etas']}"
            )
        lo, hi = group["step_sizes"]
        if not 0.0 <= lo <= hi:
            raise ValueError(
                f"Rprop: step_sizes must satisfy 0 <= min <= max, got {group['step_sizes']}"
            )

    def _init_state(self, p: Tensor, group: dict) -> dict[str, Any]:
        return {
            "step": _step_tensor(p),
            "prev": _core.zeros_like(p),
            "step_size": _core.zeros_like(p) + float(group["lr"]),
        }

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict, lr: Tensor) -> None:
        minus, plus = group["etas"]
        lo, hi = group["step_sizes"]
        state["step"] += 1.0
        prev, size = state["prev"], state["step_size"]
        s = (g * prev).sign()
        one = _core.ones_like(g)
        factor = _core.where(s > 0, one * plus, _core.where(s < 0, one * minus, one))
        size.copy_((size * factor).clamp(lo, hi))
        g = _core.where(s < 0, g * 0.0, g)
        p -= g.sign() * size
        prev.copy_(g)


from .extra import *  # LBFGS, ASGD, Adafactor
from .muon import Muon


def _accept_implementation_flags(
    cls: type, names: tuple[str, ...], positional: tuple[str, ...] = ()
) -> None:
    """PyTorch's implementation switches (``foreach``, ``fused``, ``capturable``) are taken
    and kept in the defaults: every update here is one fused pass per parameter already.
    ``differentiable=True`` records each step for autodiff (the composed update, with
    gradients enabled), so that it takes non-leaf parameters and gradients reach the old
    parameters, the gradients, the state and a learning-rate tensor that requires grad.
    ``positional``: the arguments PyTorch also takes by position after the optimizer's own
    (RMSprop's ``capturable, foreach, maximize, differentiable``, ASGD's ``foreach,
    maximize, ...``), so that a positional call binds each value to the same argument."""
    import functools
    import inspect

    init = cls.__init__
    sig = inspect.signature(init)
    own = [
        q.name
        for q in list(sig.parameters.values())[1:]
        if q.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD
    ]

    @functools.wraps(init)
    def __init__(
        self: Any,
        *args: Any,
        foreach: bool | None = None,
        fused: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        **kwargs: Any,
    ) -> None:
        if len(args) > len(own):
            extra = args[len(own) :]
            if len(extra) > len(positional):
                raise TypeError(
                    f"{cls.__name__}() takes {len(own) + len(positional) + 1} positional "
                    f"arguments but {len(args) + 1} were given"
                )
            args = args[: len(own)]
            given_flags = {}
            for name, value in zip(positional, extra):
                if name in kwargs:
                    raise TypeError(f"{cls.__name__}() got multiple values for argument {name!r}")
                if name in ("foreach", "fused", "capturable", "differentiable"):
                    given_flags[name] = value
                else:
                    kwargs[name] = value
            foreach = given_flags.get("foreach", foreach)
            capturable = given_flags.get("capturable", capturable)
            differentiable = given_flags.get("differentiable", differentiable)
        if fused and differentiable:
            raise RuntimeError(f"{cls.__name__}: `fused` does not support `differentiable`")
        if fused and "fused" not in names:
            raise TypeError(f"{cls.__name__}: there is no fused implementation to ask for")
        if fused and foreach:
            raise RuntimeError(f"{cls.__name__}: `fused` and `foreach` cannot be `True` together.")
        check = getattr(cls, "_check_flags", None)
        if check is not None:
            bound = sig.bind(self, *args, **kwargs)
            bound.apply_defaults()
            check(bound.arguments, foreach, capturable)
        given = {
            "foreach": foreach,
            "fused": fused,
            "capturable": capturable,
            "differentiable": differentiable,
        }
        # the switches join the defaults before the groups are added (as PyTorch's), so
        # that a group's own switches stay and a differentiable optimizer takes non-leaf
        # parameters; a subclass's constructor calls its base's, wrapped too: the outermost
        # call's switches count
        if "_impl_flags" not in self.__dict__:
            self._impl_flags = {k: given[k] for k in names}
        init(self, *args, **kwargs)

    flag_defaults = {"foreach": None, "fused": None, "capturable": False, "differentiable": False}
    params = list(sig.parameters.values())
    defaults = {**flag_defaults, **{q.name: q.default for q in params}}
    # (PyTorch's order: the optimizer's positional arguments, those it also takes by
    # position, then the keyword-only ones)
    tail = [
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=defaults[name])
        for name in positional
    ]
    extra = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
        for name, default in flag_defaults.items()
        if name not in sig.parameters and name not in positional
    ]
    rest = [q for q in params[1 + len(own) :] if q.name not in positional]
    kw = [i for i, q in enumerate(rest) if q.kind == inspect.Parameter.VAR_KEYWORD]
    at = kw[0] if kw else len(rest)
    ordered = params[: 1 + len(own)] + tail + rest[:at] + extra + rest[at:]
    __init__.__signature__ = sig.replace(parameters=ordered)
    cls.__init__ = __init__


# the switches each PyTorch optimizer has (its param groups carry them), and those of its
# arguments after its own that PyTorch takes by position too
for _cls, _names, _positional in (
    (SGD, ("foreach", "differentiable", "fused"), ()),
    (Adam, ("foreach", "capturable", "differentiable", "fused"), ()),
    (AdamW, ("foreach", "capturable", "differentiable", "fused"), ()),
    (Adagrad, ("foreach", "differentiable", "fused"), ("foreach",)),
    (
        RMSprop,
        ("foreach", "capturable", "differentiable"),
        ("capturable", "foreach", "maximize", "differentiable"),
    ),
    (Adadelta, ("foreach", "capturable", "differentiable"), ("foreach",)),
    (Adamax, ("foreach", "capturable", "differentiable"), ("foreach",)),
    (NAdam, ("foreach", "capturable", "differentiable"), ()),
    (RAdam, ("foreach", "capturable", "differentiable"), ()),
    (Rprop, ("foreach", "capturable", "differentiable"), ()),
    (
        ASGD,
        ("foreach", "capturable", "differentiable"),
        ("foreach", "maximize", "differentiable", "capturable"),
    ),
):
    _accept_implementation_flags(_cls, _names, _positional)
del _cls, _names, _positional

from . import swa_utils
