"""Layers: PyTorch's module system over ferrograd tensors.

A :class:`Module` finds its parameters, buffers and sub-modules in its attributes, and in
lists, tuples and dicts held there at any depth (``self.blocks = [Block(), Block()]`` trains
as ``nn.ModuleList`` does), so calling ``super().__init__()`` is welcome but not required.
Names follow PyTorch's (``"blocks.0.attn.weight"``; the items of ``Sequential``,
``ModuleList``, ``ModuleDict``, ``ParameterList`` and ``ParameterDict`` are named by their
index or key), so state dicts copy between the two. Weights have PyTorch's (and
MegEngine's) layouts and default initialisations, drawn from ``fg.manual_seed``'s stream.
"""

from __future__ import annotations

import functools
import inspect
import math
import warnings
from collections import OrderedDict, namedtuple
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, MutableSet
from typing import Any, Callable

import numpy as np

from .. import _core
from .._core import ShapeError, Tensor
from .._tensor import _dtype_name, default_float, tensor
from ..random import _numpy_rng
from . import functional as F


class Parameter(Tensor):
    """A tensor that a :class:`Module` reports from :meth:`Module.parameters`.
    ``Parameter(t)`` of a tensor shares ``t``'s memory, as PyTorch's (a detached alias:
    writing into ``t`` changes the parameter, and the reverse) unless ``dtype=`` or
    ``device=`` ask for a conversion; ``Parameter(data)`` of an array or nested list copies
    it."""

    def __new__(  # noqa: PYI034
        cls, data: Any = None, requires_grad: bool = True, *, dtype: Any = None, device: Any = None
    ) -> Parameter:
        if data is None:
            data = np.zeros((0,), np.float32)
        alias = (
            isinstance(data, Tensor)
            and (dtype is None or _dtype_name(dtype) == data.dtype.name)
            and (device is None or str(device) == str(data.device))
        )
        if alias:
            # an empty tensor given `data`'s storage (no copy)
            p = super().__new__(cls, np.zeros((0,), np.float32), None, None)
            p._replace_data(data.detach())
        else:
            if isinstance(data, Tensor):
                device = data.device if device is None else device
                if dtype is None and data.dtype.name == "bfloat16":
                    dtype = "bfloat16"
            p = super().__new__(cls, data, dtype, device)
        if requires_grad and p.dtype.kind == "f":
            p.requires_grad_(True)  # as PyTorch: loss.backward() fills p.grad
        elif requires_grad:
            raise RuntimeError(
                f"Parameter: only tensors of floating point dtype can require gradients, got "
                f"{p.dtype} (pass requires_grad=False for an integer parameter)"
            )
        else:
            p.__dict__["_requires_grad"] = False
        return p

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo: dict) -> Parameter:
        # (the gradient is not copied, as PyTorch's)
        p = Parameter(self.detach().copy(), requires_grad=bool(self.requires_grad))
        memo[id(self)] = p
        return p

    def __reduce__(self) -> tuple:
        return (_rebuild_parameter, (*_tensor_state(self), bool(self.requires_grad)))


def _tensor_state(t: Tensor) -> tuple:
    from .._torch_compat import _tensor_state as state

    return state(t)


def _rebuild_parameter(data: Any, dtype: str, device: str, requires_grad: bool) -> Parameter:
    from .._torch_compat import _rebuild_tensor

    return Parameter(_rebuild_tensor(data, dtype, device, False), requires_grad=requires_grad)


# a module's hook tables, by the attribute names PyTorch's modules give them
_HOOK_TABLES = frozenset(
    {
        "_forward_hooks",
        "_forward_hooks_with_kwargs",
        "_forward_hooks_always_called",
        "_forward_pre_hooks",
        "_forward_pre_hooks_with_kwargs",
        "_backward_hooks",
        "_backward_pre_hooks",
        "_state_dict_hooks",
        "_state_dict_pre_hooks",
        "_load_state_dict_pre_hooks",
        "_load_state_dict_post_hooks",
    }
)
_INTERNAL = {
    "training",
    "_buffer_names",
    "_modules",
    "_parameters",
    "_null_params",
    "_null_modules",
}
# the hook tables a module keeps in its __dict__ (see _register_hook)
_HOOK_STORES = frozenset(
    {"_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks"}
)


class _LiveView(MutableMapping):
    """A live mapping over some of a module's attributes (those :meth:`_names` picks), in
    definition order: what PyTorch keeps as ``_parameters``, ``_buffers`` and ``_modules``."""

    __slots__ = ("_module",)

    def __init__(self, module: Module) -> None:
        self._module = module

    def _names(self) -> list[str]:
        raise NotImplementedError

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return f"OrderedDict({list(self.items())!r})"


class _ParametersView(_LiveView):
    """PyTorch's ``module._parameters`` for a module that keeps its parameters as
    attributes: a live name -> Parameter (or ``None``) mapping in definition order; writing
    or deleting an entry registers or removes the parameter."""

    __slots__ = ()

    def _names(self) -> list[str]:
        d = self._module.__dict__
        nulls = d.get("_null_params", ())
        return [
            k
            for k, v in d.items()
            if isinstance(v, Parameter) or (v is None and k in nulls and k not in _INTERNAL)
        ]

    def __getitem__(self, key: str) -> Any:
        # (an attribute set to None that is not a buffer reads as an empty parameter slot,
        # as layers built without bias hold one: `Linear(2, 3, bias=False)._parameters["bias"]`)
        d = self._module.__dict__
        v = d.get(key, self)
        if isinstance(v, Parameter) or (
            v is None and key not in _INTERNAL and key not in d.get("_buffer_names", ())
        ):
            return v
        raise KeyError(key)

    def __setitem__(self, key: str, value: Any) -> None:
        d = self._module.__dict__
        bufs = d.get("_buffer_names")
        if bufs and key in bufs:
            del bufs[key]
        if value is None:
            d.setdefault("_null_params", set()).add(key)
        else:
            d.get("_null_params", set()).discard(key)
        object.__setattr__(self._module, key, value)

    def __delitem__(self, key: str) -> None:
        self[key]  # (a KeyError for a name that is no parameter)
        d = self._module.__dict__
        d.get("_null_params", set()).discard(key)
        del d[key]


class _BuffersView(_LiveView):
    """PyTorch's ``module._buffers``: a live name -> Tensor (or ``None``) mapping of the
    module's buffers; writing or deleting an entry registers or removes the buffer."""

    __slots__ = ()

    def __getitem__(self, key: str) -> Any:
        d = self._module.__dict__
        if key not in d.get("_buffer_names", ()):
            raise KeyError(key)
        return d.get(key)

    def __setitem__(self, key: str, value: Any) -> None:
        d = self._module.__dict__
        bufs = d.setdefault("_buffer_names", {})
        bufs.setdefault(key, True)
        object.__setattr__(self._module, key, value)

    def __delitem__(self, key: str) -> None:
        d = self._module.__dict__
        bufs = d.get("_buffer_names", {})
        if key not in bufs:
            raise KeyError(key)
        del bufs[key]
        d.pop(key, None)

    def _names(self) -> list[str]:
        return list(self._module.__dict__.get("_buffer_names", ()))


class _ModulesView(_LiveView):
    """PyTorch's ``module._modules`` for a module that keeps its children as attributes: a
    live name -> Module mapping in definition order; writing or deleting an entry sets or
    removes the child."""

    __slots__ = ()

    def _names(self) -> list[str]:
        return [
            k
            for k, v in self._module.__dict__.items()
            if isinstance(v, Module) and k not in _INTERNAL
        ]

    def __getitem__(self, key: str) -> Any:
        v = self._module.__dict__.get(key)
        if not isinstance(v, Module) or key in _INTERNAL:
            raise KeyError(key)
        return v

    def __setitem__(self, key: str, value: Any) -> None:
        object.__setattr__(self._module, key, value)

    def __delitem__(self, key: str) -> None:
        self[key]  # (a KeyError for a name that is no child)
        del self._module.__dict__[key]


class _NonPersistentView(MutableSet):
    """PyTorch's ``module._non_persistent_buffers_set``: the names of the buffers left out
    of the state dict, live; adding or discarding a buffer's name changes whether it is
    saved."""

    __slots__ = ("_module",)

    def __init__(self, module: Module) -> None:
        self._module = module

    def _flags(self) -> dict:
        return self._module.__dict__.get("_buffer_names", {})

    def __contains__(self, name: object) -> bool:
        return self._flags().get(name, True) is False

    def __iter__(self) -> Iterator[str]:
        return iter([k for k, persistent in self._flags().items() if not persistent])

    def __len__(self) -> int:
        return sum(1 for persistent in self._flags().values() if not persistent)

    def add(self, name: str) -> None:
        # (a name that is no buffer is left alone: register_buffer decides for it)
        flags = self._flags()
        if name in flags:
            flags[name] = False

    def discard(self, name: str) -> None:
        flags = self._flags()
        if name in flags:
            flags[name] = True

    def __repr__(self) -> str:
        return repr(set(self))


def _copy_loaded(target: Tensor, v: Tensor) -> None:
    """Writes a loaded value into a parameter or buffer of the same shape, moved to its
    device and cast to its dtype."""
    from ..autodiff import no_grad

    if v.device != target.device:
        v = v.to(target.device)
    if v.dtype != target.dtype:
        v = v.astype(target.dtype)
    with no_grad():
        target.copy_(v)


class _HookHandle:
    """What ``register_forward_hook`` returns: ``remove()`` drops the hook."""

    _next = 0

    def __init__(self, hooks: dict, hook: Callable[..., Any]) -> None:
        if not callable(hook):
            raise TypeError(f"hook must be callable, got {type(hook).__name__}")
        _HookHandle._next += 1
        self.id = _HookHandle._next
        self._hooks = hooks
        hooks[self.id] = hook

    def hooks_dict_ref(self) -> dict:
        """The table this hook sits in (empty once every hook in it is removed)."""
        return self._hooks

    def remove(self) -> None:
        self._hooks.pop(self.id, None)
        for extra in getattr(self, "_extra", ()):
            extra.pop(self.id, None)

    def __enter__(self) -> _HookHandle:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def _register_hook(
    module: Any, store: str, hook: Callable[..., Any], prepend: bool, flags: dict[str, bool]
) -> _HookHandle:
    """Adds ``hook`` to ``module.<store>`` (first with ``prepend``), its options in the
    ``<store>_<flag>`` dicts."""
    d = module.__dict__
    hooks = d.setdefault(store, OrderedDict())
    handle = _HookHandle(hooks, hook)
    if prepend:
        # reordered in place: the module's table stays the object callers may hold
        rest = [(k, v) for k, v in hooks.items() if k != handle.id]
        hooks.clear()
        hooks[handle.id] = hook
        hooks.update(rest)
    extras = []
    for flag, on in flags.items():
        if on:
            table = d.setdefault(f"{store}_{flag}", {})
            table[handle.id] = True
            extras.append(table)
    handle._extra = extras
    return handle


# global hooks (torch.nn.modules.module.register_module_forward_hook and friends): run for
# every module call, before the module's own
_global_forward_pre_hooks: dict = {}
_global_forward_hooks: dict = {}


def register_module_forward_pre_hook(hook: Callable[..., Any]) -> _HookHandle:
    """``hook(module, args)`` runs before every module's ``forward`` (a returned value
    replaces the inputs). Returns a handle whose ``remove()`` drops it."""
    return _HookHandle(_global_forward_pre_hooks, hook)


_global_forward_hooks_with_kwargs: dict = {}
_global_forward_hooks_always_called: dict = {}


def register_module_forward_hook(
    hook: Callable[..., Any], *, with_kwargs: bool = False, always_call: bool = False
) -> _HookHandle:
    """``hook(module, args, output)`` runs after every module's ``forward`` (a returned
    value replaces the output); with ``with_kwargs``, ``hook(module, args, kwargs,
    output)``; ``always_call`` runs it (with output None) when ``forward`` raises. Returns a
    handle whose ``remove()`` drops it."""
    handle = _HookHandle(_global_forward_hooks, hook)
    extras = []
    for on, table in (
        (with_kwargs, _global_forward_hooks_with_kwargs),
        (always_call, _global_forward_hooks_always_called),
    ):
        if on:
            table[handle.id] = True
            extras.append(table)
    handle._extra = extras
    return handle


# global backward hooks (register_module_full_backward_hook / _pre_hook): run for every
# module's backward, before the module's own (see ._backward_hooks)
_global_backward_hooks: dict = {}
_global_backward_pre_hooks: dict = {}


def register_module_full_backward_hook(hook: Callable[..., Any]) -> _HookHandle:
    """``hook(module, grad_input, grad_output)`` runs for every module, once the gradients
    of its inputs are computed (before the module's own backward hooks); a returned tuple
    replaces ``grad_input``. Applies to module calls made while it is registered. Returns a
    handle whose ``remove()`` drops it."""
    return _HookHandle(_global_backward_hooks, hook)


def register_module_backward_hook(hook: Callable[..., Any]) -> _HookHandle:
    """PyTorch's deprecated spelling of :func:`register_module_full_backward_hook`."""
    return register_module_full_backward_hook(hook)


def register_module_full_backward_pre_hook(hook: Callable[..., Any]) -> _HookHandle:
    """``hook(module, grad_output)`` runs for every module before its backward (before the
    module's own pre-hooks); a returned tuple replaces ``grad_output``. Returns a handle
    whose ``remove()`` drops it."""
    return _HookHandle(_global_backward_pre_hooks, hook)


# global registration hooks (register_module_*_registration_hook): ``hook(module, name,
# value)`` runs when a module registers a buffer, parameter or sub-module; a returned value
# is registered instead
_global_buffer_registration_hooks: dict = OrderedDict()
_global_module_registration_hooks: dict = OrderedDict()
_global_parameter_registration_hooks: dict = OrderedDict()


def register_module_buffer_registration_hook(hook: Callable[..., Any]) -> _HookHandle:
    """``hook(module, name, buffer)`` runs whenever any module registers a buffer; a
    returned tensor is registered instead. Returns a handle whose ``remove()`` drops it."""
    return _HookHandle(_global_buffer_registration_hooks, hook)


def register_module_module_registration_hook(hook: Callable[..., Any]) -> _HookHandle:
    """``hook(module, name, submodule)`` runs whenever any module registers a sub-module; a
    returned module is registered instead. Returns a handle whose ``remove()`` drops it."""
    return _HookHandle(_global_module_registration_hooks, hook)


def register_module_parameter_registration_hook(hook: Callable[..., Any]) -> _HookHandle:
    """``hook(module, name, param)`` runs whenever any module registers a parameter; a
    returned parameter is registered instead. Returns a handle whose ``remove()`` drops
    it."""
    return _HookHandle(_global_parameter_registration_hooks, hook)


def _registered(hooks: dict, module: Any, name: str, value: Any) -> Any:
    """``value`` after the registration hooks in ``hooks`` (each may replace it)."""
    for hook in list(hooks.values()):
        r = hook(module, name, value)
        if r is not None:
            value = r
    return value


class _IncompatibleKeys(namedtuple("_IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """load_state_dict's result, printed as PyTorch's."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _walk(value: Any, prefix: str, out: list, seen: set, direct: frozenset = frozenset()) -> None:
    """Collects ``(name, Parameter | Module)`` in ``value`` (not inside modules). An object
    in a plain list, tuple or dict that the module also holds under a name of its own
    (``self.heads = [...]`` plus ``add_module("head_0", ...)``) is named by that name only,
    so state-dict keys are PyTorch's."""
    if isinstance(value, (Parameter, Module)):
        if "." not in prefix or id(value) not in direct:
            out.append((prefix, value))
    elif isinstance(value, (list, tuple)):
        if id(value) in seen:
            return
        seen.add(id(value))
        for i, v in enumerate(value):
            _walk(v, f"{prefix}.{i}" if prefix else str(i), out, seen, direct)
    elif isinstance(value, dict):
        if id(value) in seen:
            return
        seen.add(id(value))
        for k, v in value.items():
            _walk(v, f"{prefix}.{k}" if prefix else str(k), out, seen, direct)


def _adopt(module: Any) -> Any:
    """A layer of einops' ``einops.layers.torch`` (Rearrange, Reduce, EinMix) given to a
    ferrograd Module, as ferrograd's equivalent (see :mod:`ferrograd._einops`); anything
    else as it is."""
    if module is None or isinstance(module, Module):
        return module
    if type(module).__module__.startswith("einops.layers"):
        from .._einops import adopt_torch_layer

        adopted = adopt_torch_layer(module)
        if adopted is not None:
            return adopted
    return module


class _IntegerTypeError(TypeError, RuntimeError):
    """A parameter that requires gradients cast to a non-floating type by Module.type."""


class _StateDictKeyError(KeyError, RuntimeError):
    """Missing or unexpected state-dict keys: a ``KeyError``, and a ``RuntimeError`` as
    PyTorch raises."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class _Listing(list):
    """A list that is also an iterator over itself (``next()`` walks it once, as a
    generator would); ``for`` loops and ``len`` see every element each time."""

    __slots__ = ("_pos",)

    def __init__(self, items: Iterable = ()) -> None:
        super().__init__(items)
        self._pos = 0

    def __next__(self) -> Any:
        if self._pos >= len(self):
            raise StopIteration
        self._pos += 1
        return self[self._pos - 1]


# PyTorch's names of the forward arguments of its layers (`Linear(3, 2)(input=x)`,
# `loss(input=y, target=t)`), where ferrograd's own forward names them otherwise
_TORCH_FORWARD_NAMES = {
    "CosineEmbeddingLoss": ("input1", "input2", "target"),
    "MarginRankingLoss": ("input1", "input2", "target"),
    "CosineSimilarity": ("x1", "x2"),
    "PairwiseDistance": ("x1", "x2"),
    "Bilinear": ("input1", "input2"),
    "TripletMarginLoss": ("anchor", "positive", "negative"),
    "TripletMarginWithDistanceLoss": ("anchor", "positive", "negative"),
    "GaussianNLLLoss": ("input", "target", "var"),
    "PoissonNLLLoss": ("log_input", "target"),
    "CTCLoss": ("log_probs", "targets", "input_lengths", "target_lengths"),
}
_forward_params: dict[type, tuple[frozenset, bool, tuple[str, ...]] | None] = {}


def _forward_signature(cls: type) -> tuple[frozenset, bool, tuple[str, ...]] | None:
    """The parameter names of ``cls.forward``, whether it takes ``**kwargs``, and PyTorch's
    positional names for it; ``None`` for a forward that is not ferrograd's own."""
    if cls in _forward_params:
        return _forward_params[cls]
    info = None
    fwd = getattr(cls, "forward", None)
    if getattr(fwd, "__module__", "").startswith("ferrograd."):
        try:
            params = inspect.signature(fwd).parameters.values()
        except (TypeError, ValueError):
            params = None
        if params is not None:
            names = frozenset(p.name for p in params)
            var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
            torch_names = next(
                (
                    _TORCH_FORWARD_NAMES[c.__name__]
                    for c in cls.__mro__
                    if c.__name__ in _TORCH_FORWARD_NAMES
                ),
                ("input", "target"),
            )
            info = (names, var_kw, torch_names)
    _forward_params[cls] = info
    return info


def _torch_forward_keywords(module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``args, kwargs`` with PyTorch's keyword names of a layer's inputs that ferrograd's
    forward names otherwise moved to their positions."""
    info = _forward_signature(type(module))
    if info is None:
        return args, kwargs
    names, var_kw, torch_names = info
    if var_kw:
        return args, kwargs
    for i, name in enumerate(torch_names):
        if name in names or name not in kwargs or len(args) != i:
            continue
        kwargs = dict(kwargs)
        args = (*args, kwargs.pop(name))
    return args, kwargs


class Module:
    """Base class: subclasses set Parameters, buffers and sub-Modules as attributes and
    define ``forward``."""

    training: bool = True
    # the version of a subclass's state-dict layout, saved in ``state_dict()._metadata``
    _version: int = 1
    # PyTorch's class flags, read by programs that subclass Module (neither changes
    # anything here)
    call_super_init: bool = False
    dump_patches: bool = False

    def __init__(self) -> None:
        self.training = True

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} defines no forward")

    def _get_name(self) -> str:
        """The class name, as reprs print it."""
        return type(self).__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            args, kwargs = _torch_forward_keywords(self, args, kwargs)
        d = self.__dict__
        pre = d.get("_forward_pre_hooks")
        post = d.get("_forward_hooks")
        if not (
            pre
            or post
            or _global_forward_pre_hooks
            or _global_forward_hooks
            or d.get("_backward_hooks")
            or d.get("_backward_pre_hooks")
            or _global_backward_hooks
            or _global_backward_pre_hooks
        ):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs, pre, post)

    # (PyTorch's names for the call, which some programs use to bypass a subclass's
    # __call__)
    _call_impl = __call__
    _wrapped_call_impl = __call__

    def _call_with_hooks(self, args: tuple, kwargs: dict, pre: Any, post: Any) -> Any:
        d = self.__dict__
        pre_kw = d.get("_forward_pre_hooks_with_kwargs", {})
        post_kw = d.get("_forward_hooks_with_kwargs", {})
        always = d.get("_forward_hooks_always_called", {})
        for key, hook in [*_global_forward_pre_hooks.items(), *(pre or {}).items()]:
            if key in pre_kw:
                r = hook(self, args, kwargs)
                if r is not None:
                    if not (isinstance(r, tuple) and len(r) == 2):
                        raise RuntimeError(
                            "forward pre-hook with kwargs must return None or (args, kwargs), "
                            f"got {type(r).__name__}"
                        )
                    args, kwargs = r
            else:
                r = hook(self, args)
                if r is not None:
                    args = r if isinstance(r, tuple) else (r,)
        backward_hooks = (
            d.get("_backward_hooks")
            or d.get("_backward_pre_hooks")
            or _global_backward_hooks
            or _global_backward_pre_hooks
        )
        if backward_hooks:
            from ._backward_hooks import wrap_inputs, wrap_outputs

            args, bw_state = wrap_inputs(self, args)
        try:
            out = self.forward(*args, **kwargs)
            if backward_hooks:
                out = wrap_outputs(bw_state, out)
        except BaseException:
            for key, hook in [*_global_forward_hooks.items(), *(post or {}).items()]:
                if key in always or key in _global_forward_hooks_always_called:
                    with_kw = key in post_kw or key in _global_forward_hooks_with_kwargs
                    try:
                        hook(self, args, kwargs, None) if with_kw else hook(self, args, None)
                    except Exception:  # noqa: BLE001, S110 (the forward's own error is raised)
                        pass
            raise
        for key, hook in [*_global_forward_hooks.items(), *(post or {}).items()]:
            with_kw = key in post_kw or key in _global_forward_hooks_with_kwargs
            r = hook(self, args, kwargs, out) if with_kw else hook(self, args, out)
            if r is not None:
                out = r
        return out

    def register_forward_pre_hook(
        self, hook: Callable[..., Any], *, prepend: bool = False, with_kwargs: bool = False
    ) -> _HookHandle:
        """``hook(module, args)`` runs before ``forward``; a returned value (a tuple, or one
        input) replaces the positional inputs. With ``with_kwargs``, ``hook(module, args,
        kwargs)`` may return ``(args, kwargs)``; ``prepend`` runs it before the others.
        Returns a handle whose ``remove()`` drops it (also a context manager)."""
        return _register_hook(
            self, "_forward_pre_hooks", hook, prepend, {"with_kwargs": with_kwargs}
        )

    def register_forward_hook(
        self,
        hook: Callable[..., Any],
        *,
        prepend: bool = False,
        with_kwargs: bool = False,
        always_call: bool = False,
    ) -> _HookHandle:
        """``hook(module, args, output)`` runs after ``forward``; a returned value replaces
        the output. With ``with_kwargs``, ``hook(module, args, kwargs, output)``;
        ``prepend`` runs it before the others; ``always_call`` runs it (with output None)
        when ``forward`` raises. Returns a handle whose ``remove()`` drops it."""
        return _register_hook(
            self,
            "_forward_hooks",
            hook,
            prepend,
            {"with_kwargs": with_kwargs, "always_called": always_call},
        )

    def register_full_backward_hook(
        self, hook: Callable[..., Any], prepend: bool = False
    ) -> _HookHandle:
        """``hook(module, grad_input, grad_output)`` runs when the gradients of this
        module's inputs are computed (``None`` for inputs that need none); a returned tuple
        replaces ``grad_input``. Returns a handle whose ``remove()`` drops it."""
        return _register_hook(self, "_backward_hooks", hook, prepend, {})

    def register_full_backward_pre_hook(
        self, hook: Callable[..., Any], prepend: bool = False
    ) -> _HookHandle:
        """``hook(module, grad_output)`` runs before this module's backward; a returned
        tuple replaces ``grad_output``. Returns a handle whose ``remove()`` drops it."""
        return _register_hook(self, "_backward_pre_hooks", hook, prepend, {})

    def register_backward_hook(self, hook: Callable[..., Any]) -> _HookHandle:
        """PyTorch's deprecated form: :meth:`register_full_backward_hook`."""
        return self.register_full_backward_hook(hook)

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at a dotted path (``"0.weight"``)."""
        mod, _, name = target.rpartition(".")
        p = getattr(self.get_submodule(mod), name)
        if not isinstance(p, Parameter):
            raise AttributeError(  # noqa: TRY004 (PyTorch raises AttributeError)
                f"{type(self).__name__}.get_parameter: {target!r} is not a parameter"
            )
        return p

    def __setattr__(self, name: str, value: Any) -> None:
        # PyTorch's registration rules: a parameter slot takes a Parameter or None, a buffer
        # slot a Tensor or None, and a Parameter given to a buffer's name becomes a parameter
        d = self.__dict__
        if type(value).__module__ == "einops.layers.torch":
            value = _adopt(value)
        if (
            isinstance(value, (Parameter, Module))
            and "training" not in d
            and type(self) is not Module
        ):
            kind = "parameters" if isinstance(value, Parameter) else "submodules"
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        bufs = d.get("_buffer_names")
        if isinstance(value, Parameter):
            if _global_parameter_registration_hooks:
                value = _registered(_global_parameter_registration_hooks, self, name, value)
        elif isinstance(value, Module):
            if _global_module_registration_hooks:
                value = _registered(_global_module_registration_hooks, self, name, value)
        elif (
            bufs
            and name in bufs
            and isinstance(value, Tensor)
            and _global_buffer_registration_hooks
        ):
            value = _registered(_global_buffer_registration_hooks, self, name, value)
        if isinstance(value, Parameter):
            if bufs and name in bufs:
                del bufs[name]
        elif value is not None:
            cur = d.get(name)
            if (isinstance(cur, Parameter) or name in d.get("_null_params", ())) and not isinstance(
                value, Parameter
            ):
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                    "(nn.Parameter or None expected)"
                )
            if isinstance(value, Module) and bufs and name in bufs:
                # a module replaces a buffer, as PyTorch's
                del bufs[name]
                d.pop(name, None)
            if bufs and name in bufs and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                    "(Tensor or None expected)"
                )
            mods = d.get("_modules")
            if (
                isinstance(cur, Module)
                or (mods is not None and name in mods)
                or name in d.get("_null_modules", ())
            ) and not isinstance(value, Module):
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as child module '{name}' "
                    "(nn.Module or None expected)"
                )
        if value is None and isinstance(d.get(name), Module):
            # the child's slot stays a module's: a later tensor or number is refused
            d.setdefault("_null_modules", set()).add(name)
        for store in ("_parameters", "_modules"):
            items = d.get(store)
            if items is not None and name in items:
                items[name] = value
                return
        mods = d.get("_modules")
        if mods is not None and isinstance(value, Module) and name not in d:
            # a container (a Sequential subclass that sets `self.act = ReLU()`): the module
            # joins the others in order, as PyTorch's `_modules`
            mods[name] = value
            return
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        for store in ("_parameters", "_modules"):
            items = d.get(store)
            if items is not None and name in items:
                del items[name]
                return
        bufs = d.get("_buffer_names")
        if bufs and name in bufs:
            del bufs[name]
        for table in ("_null_params", "_null_modules"):
            nulls = d.get(table)
            if nulls:
                nulls.discard(name)
        object.__delattr__(self, name)

    def __getattr__(self, name: str) -> Any:
        # items registered by name (containers, add_module) read as attributes, as PyTorch
        d = self.__dict__
        for store in ("_parameters", "_modules"):
            items = d.get(store)
            if items is not None and name in items:
                return items[name]
        if name in _HOOK_TABLES:
            # PyTorch's modules carry these tables from __init__; programs read, clear and
            # iterate them (`len(m._forward_hooks)`), so an empty one appears on first use
            return d.setdefault(name, OrderedDict())
        if name == "_parameters":
            return _ParametersView(self)
        if name == "_buffers":
            return _BuffersView(self)
        if name == "_modules":
            return _ModulesView(self)
        if name == "_non_persistent_buffers_set":
            return _NonPersistentView(self)
        if name in _HOOK_STORES:
            # created on first use; reading it (PyTorch's module._forward_pre_hooks) makes
            # the empty table that later registrations fill
            return d.setdefault(name, {})
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __dir__(self) -> list[str]:
        # PyTorch's listing: the attributes, the registered names (not the indices of a
        # container), and the tables PyTorch's modules carry (read through __getattr__)
        d = self.__dict__
        keys = set(super().__dir__()) | _HOOK_TABLES
        keys |= {"_parameters", "_buffers", "_modules", "_non_persistent_buffers_set"}
        for store in ("_parameters", "_modules"):
            keys.update(str(k) for k in d.get(store) or ())
        return sorted(k for k in keys if not k[:1].isdigit())

    # -------------------------------------------------------------------- registration

    def _items(self, empty_children: bool = False) -> list[tuple[str, Any]]:
        """This module's own parameters and sub-modules, named, in definition order (with
        the children registered as ``None`` too when ``empty_children``)."""
        out: list = []
        seen: set = set()
        attrs = vars(self)
        direct = frozenset(
            id(v)
            for key, value in attrs.items()
            for v in (value.values() if key in ("_modules", "_parameters") else (value,))
            if isinstance(v, (Parameter, Module))
        )
        bufs = attrs.get("_buffer_names", ())
        for key, value in attrs.items():
            if key in ("_modules", "_parameters"):
                for k, v in value.items():
                    if v is None and empty_children and key == "_modules":
                        out.append((str(k), None))
                    _walk(v, str(k), out, seen, direct)
            elif key not in _INTERNAL and key not in bufs:
                # (a Parameter given to register_buffer is a buffer, as PyTorch's)
                _walk(value, key, out, seen, direct)
        return out

    def _slot_kind(self, name: str) -> str | None:
        """What ``name`` holds now: ``"parameter"``, ``"buffer"``, ``"module"``, ``"none"``
        (a ``None`` that may be any of them), ``"attribute"``, or ``None`` (nothing)."""
        d = self.__dict__
        if name in d.get("_buffer_names", ()):
            return "buffer"
        if name in (d.get("_parameters") or ()):
            return "parameter"
        if name in (d.get("_modules") or ()):
            return "module"
        if name in d:
            v = d[name]
            if isinstance(v, Parameter):
                return "parameter"
            if isinstance(v, Module):
                return "module"
            return "none" if v is None else "attribute"
        return "attribute" if hasattr(self, name) else None

    def _check_slot_name(self, kind: str, name: Any) -> None:
        """PyTorch's rules for a name given to register_parameter / register_buffer /
        add_module: a non-empty string without ``"."``, not an attribute of another kind."""
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if kind == "module":
            if self._slot_kind(name) not in (None, "none", "module"):
                raise KeyError(f"attribute '{name}' already exists")
            if "." in name:
                raise KeyError(f'module name can\'t contain ".", got: {name}')
            if name == "":
                raise KeyError('module name can\'t be empty string ""')
            return
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if self._slot_kind(name) not in (None, "none", kind):
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        self._check_slot_name("parameter", name)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                "(torch.nn.Parameter or None required)"
            )
        if param is None and name not in (self.__dict__.get("_parameters") or ()):
            self.__dict__.setdefault("_null_params", set()).add(name)
        setattr(self, name, param)

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """A tensor that is state but not a parameter (running statistics): in
        :meth:`state_dict` (when ``persistent``) and moved by :meth:`to`."""
        if "training" not in self.__dict__ and type(self) is not Module:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_slot_name("buffer", name)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                "(torch Tensor or None required)"
            )
        if tensor is not None and _global_buffer_registration_hooks:
            tensor = _registered(_global_buffer_registration_hooks, self, name, tensor)
        if "_buffer_names" not in self.__dict__:
            self.__dict__["_buffer_names"] = {}
        self.__dict__["_buffer_names"][name] = persistent
        object.__setattr__(self, name, tensor)

    def add_module(self, name: str, module: Module | None) -> None:
        module = _adopt(module)
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_slot_name("module", name)
        if module is not None and _global_module_registration_hooks:
            module = _registered(_global_module_registration_hooks, self, name, module)
        d = self.__dict__
        if name in d and name not in (d.get("_modules") or ()):
            # a module (or None) first set by attribute assignment: replaced in its place
            object.__setattr__(self, name, module)
            return
        if "_modules" not in d:
            # the children set as attributes so far join the table first, so that
            # `_modules` lists every child in order, as PyTorch's
            moved = [k for k, v in d.items() if isinstance(v, Module) and k not in _INTERNAL]
            d["_modules"] = OrderedDict((k, d.pop(k)) for k in moved)
        d["_modules"][name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> Module:
        m: Any = self
        for part in target.split(".") if target else []:
            m = m[int(part)] if isinstance(m, (list, tuple)) else getattr(m, part)
        if not isinstance(m, Module):
            raise AttributeError(f"get_submodule: {target!r} is not an nn.Module")  # noqa: TRY004
        return m

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at a dotted path (``"bn.running_mean"``)."""
        mod, _, name = target.rpartition(".")
        owner = self.get_submodule(mod)
        if name not in owner.__dict__.get("_buffer_names", {}):
            raise AttributeError(f"get_buffer: {target!r} is not a buffer")
        return owner.__dict__[name]

    def set_submodule(self, target: str, module: Module, strict: bool = False) -> None:
        """Replaces (or adds) the sub-module at a dotted path."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        module = _adopt(module)
        if not isinstance(module, Module):
            raise ValueError(  # noqa: TRY004 (PyTorch raises ValueError)
                f"set_submodule: `module` is not an nn.Module, found {type(module).__name__}"
            )
        parent, _, name = target.rpartition(".")
        owner = self.get_submodule(parent)
        if strict and not hasattr(owner, name):
            raise AttributeError(f"set_submodule: {target!r} does not exist")
        if hasattr(owner, name) and not isinstance(getattr(owner, name), Module):
            raise AttributeError(f"`{name}` is not an nn.Module")
        setattr(owner, name, module)

    # ------------------------------------------------------------------------ traversal

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen: set = set()
        for name, v in self._items():
            if isinstance(v, Module) and id(v) not in seen:
                seen.add(id(v))
                yield name, v

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def named_modules(
        self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Module]]:
        memo = set() if memo is None else memo
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, v in self._items():
            if isinstance(v, Module):
                sub = f"{prefix}.{name}" if prefix else name
                yield from v.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        seen: set = set()
        mods = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        for mname, m in mods:
            for name, v in m._items():
                if isinstance(v, Parameter):
                    if remove_duplicate and id(v) in seen:
                        continue
                    seen.add(id(v))
                    yield (f"{mname}.{name}" if mname else name), v

    def parameters(self, recurse: bool = True) -> _Listing:
        """Every Parameter of this module and its sub-modules, each once, in definition
        order: a list that is also an iterator, so it can be iterated more than once, sized,
        indexed (MegEngine's use) and stepped with ``next()`` (PyTorch's generator use, as in
        ``next(model.parameters()).device``)."""
        return _Listing(p for _, p in self.named_parameters(recurse=recurse))

    def _own_buffers(self) -> Iterator[tuple[str, Tensor, bool]]:
        for name, persistent in self.__dict__.get("_buffer_names", {}).items():
            t = self.__dict__.get(name)
            if t is not None:
                yield name, t, persistent

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        seen: set = set()
        mods = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        for mname, m in mods:
            for name, t, _ in m._own_buffers():
                if remove_duplicate and id(t) in seen:
                    continue
                seen.add(id(t))
                yield (f"{mname}.{name}" if mname else name), t

    def buffers(self, recurse: bool = True) -> _Listing:
        """Every buffer, each once (a list that is also an iterator, as :meth:`parameters`)."""
        return _Listing(t for _, t in self.named_buffers(recurse=recurse))

    # ----------------------------------------------------------------------- state dicts

    def _state_items(
        self,
        prefix: str,
        out: OrderedDict,
        path: set,
        keep_vars: bool = False,
        meta: dict | None = None,
    ) -> None:
        if id(self) in path:
            return
        path = path | {id(self)}
        local_metadata = {"version": type(self)._version}
        if meta is not None:
            meta[prefix[:-1]] = local_metadata
        d = self.__dict__
        for hook in list(d.get("_state_dict_pre_hooks", {}).values()):
            hook(self, prefix, keep_vars)
        # PyTorch's order: this module's parameters, its buffers, then each sub-module
        items = self._items()
        if type(self)._save_to_state_dict is Module._save_to_state_dict:
            for name, v in self._local_state(items):
                out[prefix + name] = v
        else:  # a subclass's own serialization, as PyTorch honours it
            self._save_to_state_dict(out, prefix, keep_vars)
        for name, v in items:
            if not isinstance(v, Parameter):
                v._state_items(prefix + name + ".", out, path, keep_vars, meta)
        for hook in list(d.get("_state_dict_hooks", {}).values()):
            r = hook(self, out, prefix, local_metadata)
            if r is not None and r is not out:
                out.clear()
                out.update(r)

    def _local_state(self, items: list | None = None) -> list[tuple[str, Any]]:
        """This module's own state-dict entries (parameters, persistent buffers, extra
        state), named without prefix."""
        out = [
            (name, v)
            for name, v in (self._items() if items is None else items)
            if isinstance(v, Parameter)
        ]
        out.extend((name, t) for name, t, persistent in self._own_buffers() if persistent)
        if type(self).get_extra_state is not Module.get_extra_state:
            out.append(("_extra_state", self.get_extra_state()))
        return out

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        """Puts this module's own state (not its sub-modules') in ``destination``, as
        PyTorch's; subclasses may override it (state_dict calls the override)."""
        for name, v in self._local_state():
            destination[prefix + name] = _state_value(v, keep_vars)

    def _load_from_state_dict(
        self,
        state_dict: Any,
        prefix: str,
        local_metadata: dict,
        strict: bool,
        missing_keys: list,
        unexpected_keys: list,
        error_msgs: list,
    ) -> None:
        """Loads this module's own state (not its sub-modules') from ``state_dict``, as
        PyTorch's: missing keys, unexpected keys (with ``strict``) and size mismatches are
        appended to the lists given. Subclasses may override it (load_state_dict calls the
        override for that module's own keys)."""

        local = dict(self._local_state())
        local.pop("_extra_state", None)
        for name, target in local.items():
            key = prefix + name
            if key not in state_dict:
                missing_keys.append(key)
                continue
            v = state_dict[key]
            if not isinstance(v, Tensor):
                v = tensor(v)
            if tuple(v.shape) != tuple(target.shape):
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape {list(v.shape)} from "
                    f"checkpoint, the shape in current model is {list(target.shape)}."
                )
                continue
            _copy_loaded(target, v)
        extra_key = prefix + "_extra_state"
        loads_extra = type(self).set_extra_state is not Module.set_extra_state
        if loads_extra:
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        if strict:
            children = {name for name, _ in self.named_children()}
            for key in state_dict:
                # (extra state that this module does not load is unexpected, as PyTorch's)
                if key.startswith(prefix) and (key != extra_key or not loads_extra):
                    first = key[len(prefix) :].split(".", 1)[0]
                    if first not in children and first not in local:
                        unexpected_keys.append(key)

    def state_dict(
        self, destination: dict | None = None, prefix: str = "", keep_vars: bool = False
    ) -> OrderedDict:
        """Parameters and persistent buffers by name (``"layer.weight"``); the tensors
        share storage with the module's (``detach``ed unless ``keep_vars``).

        As PyTorch's, a new dict (no ``destination``) is an ``OrderedDict`` with a
        ``_metadata`` attribute: module prefix (``""``, ``"0"``, ``"0.bn"``) -> ``{"version":
        ...}``, the module class's ``_version`` (2 for batch norms, whose ``num_batches_tracked``
        came with version 2)."""
        items: OrderedDict = OrderedDict()
        meta: OrderedDict = OrderedDict()
        self._state_items(prefix, items, set(), keep_vars, meta)
        if destination is None:
            out: Any = OrderedDict()
            out._metadata = meta
        else:
            out = destination
            if isinstance(getattr(out, "_metadata", None), dict):
                out._metadata.update(meta)
        for k, v in items.items():
            out[k] = _state_value(v, keep_vars)
        return out

    # --------------------------------------------------------------- state-dict hooks

    def get_extra_state(self) -> Any:
        """State beyond parameters and buffers, saved under ``<prefix>_extra_state`` when a
        subclass overrides this (and :meth:`set_extra_state`), as PyTorch's."""
        raise RuntimeError("get_extra_state: override it to save extra state")

    def set_extra_state(self, state: Any) -> None:
        raise RuntimeError("set_extra_state: override it to load extra state")

    def register_state_dict_pre_hook(self, hook: Callable[..., Any]) -> _HookHandle:
        """``hook(module, prefix, keep_vars)`` runs before this module's state is
        collected."""
        return _HookHandle(self.__dict__.setdefault("_state_dict_pre_hooks", {}), hook)

    def register_state_dict_post_hook(self, hook: Callable[..., Any]) -> _HookHandle:
        """``hook(module, state_dict, prefix, local_metadata)`` runs after this module's
        state is collected (it may change ``state_dict`` in place)."""
        return _HookHandle(self.__dict__.setdefault("_state_dict_hooks", {}), hook)

    _register_state_dict_hook = register_state_dict_post_hook

    def register_load_state_dict_pre_hook(self, hook: Callable[..., Any]) -> _HookHandle:
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` runs before loading (it may rename keys in
        ``state_dict``)."""
        return _HookHandle(self.__dict__.setdefault("_load_state_dict_pre_hooks", {}), hook)

    def _register_load_state_dict_pre_hook(
        self, hook: Callable[..., Any], with_module: bool = False
    ) -> _HookHandle:
        if with_module:
            return self.register_load_state_dict_pre_hook(hook)
        return self.register_load_state_dict_pre_hook(lambda m, *rest: hook(*rest))

    def register_load_state_dict_post_hook(self, hook: Callable[..., Any]) -> _HookHandle:
        """``hook(module, incompatible_keys)`` runs after loading; it may change the
        missing and unexpected key lists (which strict loading then checks)."""
        return _HookHandle(self.__dict__.setdefault("_load_state_dict_post_hooks", {}), hook)

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        """Copies the values of ``state_dict`` (tensors, numpy arrays or anything
        ``fg.tensor`` reads) into this module's parameters and buffers, in place; with
        ``assign``, the module takes the checkpoint's tensors themselves (their dtype and
        memory; parameters keep their ``requires_grad``). Every matching key is loaded
        first; then, with ``strict``, missing and unexpected keys raise ``KeyError`` (also a
        ``RuntimeError``, PyTorch's type), and a shape mismatch always raises
        ``ShapeError``, all in one PyTorch-style message. Returns ``(missing_keys,
        unexpected_keys)``."""

        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(
                f"load_state_dict: Expected state_dict to be dict-like, got {type(state_dict)}."
            )
        mods = list(self.named_modules())
        metadata = getattr(state_dict, "_metadata", None)
        if not isinstance(metadata, dict):
            metadata = None
        if any(m.__dict__.get("_load_state_dict_pre_hooks") for _, m in mods):
            state_dict = OrderedDict(state_dict)  # (the hooks may rename keys)
            for name, m in mods:
                hooks = list(m.__dict__.get("_load_state_dict_pre_hooks", {}).values())
                if hooks:
                    state_dict = _run_load_pre_hooks(m, hooks, state_dict, name, metadata, strict)
        own: OrderedDict = OrderedDict()
        self._state_items("", own, set(), True)
        for name, m in mods:
            # extra state a module saves but cannot load is no key of its own: a checkpoint's
            # copy is unexpected, as PyTorch's
            if type(m).set_extra_state is Module.set_extra_state:
                own.pop((name + "." if name else "") + "_extra_state", None)
        # sub-modules that load their own state themselves (an overridden
        # `_load_from_state_dict`, as PyTorch honours it)
        custom_missing: list = []
        custom_unexpected: list = []
        custom_errors: list = []
        handled: set = set()
        for name, m in mods:
            if type(m)._load_from_state_dict is Module._load_from_state_dict:
                continue
            p = name + "." if name else ""
            mine: OrderedDict = OrderedDict()
            m._save_to_state_dict(mine, p, True)
            for k in mine:
                own.pop(k, None)
            children = {c for c, _ in m.named_children()}
            sub = (
                state_dict
                if not p
                else OrderedDict((k, v) for k, v in state_dict.items() if k.startswith(p))
            )
            handled.update(k for k in sub if k[len(p) :].split(".", 1)[0] not in children)
            m._load_from_state_dict(
                sub,
                p,
                (metadata or {}).get(name, {}),
                strict,
                custom_missing,
                custom_unexpected,
                custom_errors,
            )
        # PyTorch's rule for checkpoints older than batch norm's version 2: a dict whose
        # metadata gives that module no version (or none at all) may lack its
        # `num_batches_tracked` (which then keeps its value)
        old = set()
        for name, m in mods:
            version = (metadata or {}).get(name, {}).get("version")
            if (
                isinstance(m, _BatchNorm)
                and isinstance(m.__dict__.get("num_batches_tracked"), Tensor)
                and (version is None or version < 2)
            ):
                old.add((name + "." if name else "") + "num_batches_tracked")
        missing = [k for k in own if k not in state_dict and k not in old] + custom_missing
        unexpected = [k for k in state_dict if k not in own and k not in handled]
        unexpected += custom_unexpected
        result = _IncompatibleKeys(missing, unexpected)
        for _, m in mods:
            for hook in list(m.__dict__.get("_load_state_dict_post_hooks", {}).values()):
                hook(m, result)
        extra = {
            (name + "." if name else "") + "_extra_state": m
            for name, m in mods
            if type(m).set_extra_state is not Module.set_extra_state
        }
        owners = dict(mods) if assign else {}
        # every key that matches is loaded before any error is raised, as PyTorch's
        size_errors = []
        for k, target in own.items():
            if k not in state_dict:
                continue
            if k in extra:
                extra[k].set_extra_state(state_dict[k])
                continue
            v = state_dict[k]
            if not isinstance(v, Tensor):
                v = tensor(v)
            if _uninitialized(v) and not _uninitialized(target):
                size_errors.append(
                    f'While copying the parameter named "{k}": can\'t access the shape of an '
                    "uninitialized parameter or buffer (the checkpoint comes from a lazy module "
                    "that has not run a forward pass)"
                )
                continue
            if tuple(v.shape) != tuple(target.shape):
                size_errors.append(
                    f"size mismatch for {k}: copying a param with shape {list(v.shape)} from "
                    f"checkpoint, the shape in current model is {list(target.shape)}."
                )
                continue
            if assign:
                _assign_loaded(owners, k, target, v)
            else:
                _copy_loaded(target, v)
        msgs = []
        if strict and result.missing_keys:
            msgs.append(
                "Missing key(s) in state_dict: "
                + ", ".join(f'"{k}"' for k in result.missing_keys)
                + ". "
            )
        if strict and result.unexpected_keys:
            msgs.append(
                "Unexpected key(s) in state_dict: "
                + ", ".join(f'"{k}"' for k in result.unexpected_keys)
                + ". "
            )
        errors = msgs + custom_errors + size_errors
        if errors:
            text = f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(
                errors
            )
            if msgs:
                raise _StateDictKeyError(text)
            if size_errors:
                raise ShapeError(text)
            raise RuntimeError(text)
        return result

    # ---------------------------------------------------------------------------- modes

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Calls ``fn`` on every sub-module (children first) and then on this module."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def train(self, mode: bool = True) -> Module:
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")  # noqa: TRY004 (PyTorch's)
        self.training = mode
        for c in self.children():
            c.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                try:
                    p.grad.detach().zero_()  # in place, as PyTorch
                except (RuntimeError, ValueError, TypeError):
                    p.grad = _core.zeros_like(p.grad)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            if hasattr(p, "requires_grad_"):
                p.requires_grad_(requires_grad)
        return self

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """Puts every parameter and buffer on a device and/or dtype (``to("cuda")``,
        ``to(fg.float64)``, ``to(device=..., dtype=...)``) and returns self. Floating
        parameters change dtype; integer buffers keep theirs. Parameters stay the same
        objects (optimizers made before keep training them, as PyTorch's); attach them to
        GradManagers after moving the model.

        An integer or bool ``dtype`` raises :class:`TypeError` before anything changes, as
        PyTorch's."""
        device, dtype = _to_args(args, kwargs)
        if dtype is not None and not (dtype.startswith(("float", "bfloat", "complex"))):
            raise TypeError(
                "nn.Module.to only accepts floating point or complex dtypes, but got "
                f"desired dtype={dtype}"
            )
        if any(type(m)._apply is not Module._apply for m in self.modules()):
            # a module that converts state of its own in an overridden _apply (caches,
            # tensors kept outside its buffers) is converted through it, as PyTorch's
            return self._apply(lambda t: _moved(t, device, dtype))
        _map_tensors(self, lambda t: _moved(t, device, dtype), {}, set())
        return self

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> Module:
        """Replaces every parameter and buffer ``t`` by ``fn(t)`` (run without recording
        gradients), the children first when ``recurse``. A parameter stays the same object
        over the new data (and its gradient is converted by ``fn`` too), as PyTorch's, so
        optimizers made before keep training it; a tensor shared by two names is converted
        once."""
        from ..autodiff import _stored_grad, no_grad

        children = list(self.children())
        if recurse:
            for c in children:
                c._apply(fn)

        def convert(t: Tensor) -> Tensor:
            with no_grad():
                new = fn(t)
            if not isinstance(t, Parameter):
                return new
            grad = _stored_grad(t)
            if new is not t:
                _replace_data(t, new.detach())
            if grad is not None:
                with no_grad():
                    t.grad = fn(grad)
            return t

        # (the children are done, or left alone)
        _map_tensors(self, convert, {}, {id(c) for c in children})
        return self

    def to_empty(self, *, device: Any, recurse: bool = True) -> Module:
        """Gives every parameter and buffer new, uninitialised storage of the same shape and
        dtype on ``device`` (parameters stay the same objects), as PyTorch's; initialise it
        after, with ``reset_parameters`` or a state dict."""
        from .._ops import empty_like

        return self._apply(lambda t: empty_like(t, device=device), recurse=recurse)

    def cpu(self) -> Module:
        return self.to("cpu")

    def cuda(self, device: int | None = None) -> Module:
        return self.to("cuda" if device is None else f"cuda:{device}")

    def float(self) -> Module:
        return self.to(dtype="float32")

    def double(self) -> Module:
        return self.to(dtype="float64")

    def half(self) -> Module:
        return self.to(dtype="float16")

    def bfloat16(self) -> Module:
        return self.to(dtype="bfloat16")

    def type(self, dst_type: Any) -> Module:
        """Casts every parameter and buffer to ``dst_type`` (a dtype, a typed tensor class
        such as ``fg.DoubleTensor``, or its name ``"torch.DoubleTensor"``), integer buffers
        included, as PyTorch's. A non-floating type with a parameter that requires
        gradients raises before anything changes (a ``RuntimeError``, PyTorch's type, and a
        ``TypeError``, as :meth:`to` raises)."""
        from .._torch_compat import _TYPE_NAMES

        name = getattr(dst_type, "_torch_name", None)
        if name is not None:
            dst_type = dst_type.dtype
        elif isinstance(dst_type, str) and dst_type in _TYPE_NAMES:
            dst_type = _TYPE_NAMES[dst_type]
        dtype = _dtype_name(dst_type)
        if not dtype.startswith(("float", "bfloat", "complex")):
            for n, p in self.named_parameters():
                if p.requires_grad:
                    raise _IntegerTypeError(
                        f"Module.type: parameter {n!r} requires gradients, so only floating "
                        f"point or complex dtypes can be given, but got desired dtype={dtype}"
                    )
        return self._apply(lambda t: t if t.dtype.name == dtype else t.astype(dtype))

    def share_memory(self) -> Module:
        """Returns self: ferrograd's data-loading workers are threads of this process, so
        parameters need no shared-memory copy to be seen by them. A lazy layer's placeholder
        raises, as PyTorch's (it has no memory to share yet)."""
        for t in [*self.parameters(), *self.buffers()]:
            if _uninitialized(t):
                t.share_memory_()
        return self

    def compile(self, *args: Any, **kwargs: Any) -> None:
        """``torch.nn.Module.compile``'s spelling: the module keeps running eagerly, with the
        same results (use :func:`ferrograd.trace` to compile a whole training step)."""
        return

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        # PyTorch's layout: a one-line extra_repr stays on the first line when there are
        # no children; otherwise its lines and then every child (a module held under two
        # names is shown under both) are indented one per line
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        children = [
            f"({n}): " + repr(m).replace("\n", "\n  ")
            for n, m in self._items(empty_children=True)
            if m is None or isinstance(m, Module)
        ]
        name = type(self).__name__
        if len(lines) == 1 and not children:
            return f"{name}({lines[0]})"
        if not lines and not children:
            return f"{name}()"
        return f"{name}(\n  " + "\n  ".join(lines + children) + "\n)"


def _state_value(v: Any, keep_vars: bool) -> Any:
    """What state_dict reports for ``v``: detached unless ``keep_vars``; a lazy layer's
    placeholder stays one (so loading it into a sized module is refused, as PyTorch's)."""
    if keep_vars or not isinstance(v, Tensor) or _uninitialized(v):
        return v
    return v.detach()


def _uninitialized(t: Tensor) -> bool:
    """Whether ``t`` is a lazy layer's placeholder (its shape is not known yet)."""
    return type(t).__name__ in ("UninitializedParameter", "UninitializedBuffer")


def _assign_loaded(owners: dict, key: str, target: Tensor, v: Tensor) -> None:
    """``load_state_dict(assign=True)``: the module keeps the checkpoint's tensor itself (its
    dtype and memory) in place of ``target``; a parameter stays a Parameter with
    ``target``'s ``requires_grad``."""
    owner_name, _, attr = key.rpartition(".")
    owner = owners[owner_name]
    if isinstance(target, Parameter):
        needs = bool(target.requires_grad)
        if not isinstance(v, Parameter):
            v = Parameter(v.detach(), requires_grad=needs and v.dtype.kind == "f")
        elif bool(v.requires_grad) != needs:
            v.requires_grad_(needs)
    setattr(owner, attr, v)


def _run_load_pre_hooks(
    m: Module, hooks: list, state_dict: OrderedDict, name: str, metadata: Any, strict: bool
) -> OrderedDict:
    """Runs a module's load_state_dict pre-hooks on the keys under its prefix (the whole
    dict for the root), as PyTorch's, and returns the dict with their changes."""
    local = (metadata or {}).get(name, {})
    if not name:
        for hook in hooks:
            hook(m, state_dict, "", local, strict, [], [], [])
        return state_dict
    p = name + "."
    before = [k for k in state_dict if k.startswith(p)]
    sub: Any = OrderedDict((k, state_dict[k]) for k in before)
    if metadata is not None:
        sub._metadata = metadata
    for hook in hooks:
        hook(m, sub, p, local, strict, [], [], [])
    after = [(k, v) for k, v in sub.items() if k.startswith(p)]
    if [k for k, _ in after] == before:
        for k, v in after:
            state_dict[k] = v
        return state_dict
    out: Any = OrderedDict()
    placed = False
    for k, v in state_dict.items():
        if k.startswith(p):
            if not placed:
                out.update(after)
                placed = True
        else:
            out[k] = v
    if not placed:
        out.update(after)
    if metadata is not None:
        out._metadata = metadata
    return out


def _to_args(args: tuple, kwargs: dict) -> tuple[str | None, str | None]:
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)  # (every tensor is row-major)
    if kwargs:
        raise TypeError(f"Module.to: unexpected keyword arguments {sorted(kwargs)}")
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            if i > 0:  # (only to(tensor) takes a tensor, as PyTorch's)
                raise TypeError(
                    "Module.to: a tensor is taken only as the first argument, got "
                    f"({', '.join(type(x).__name__ for x in args)})"
                )
            device, dtype = a.device, a.dtype
            continue
        try:
            dtype = _dtype_name(a)
            continue
        except TypeError:
            pass
        if isinstance(a, bool) or not (
            isinstance(a, (str, int)) or type(a).__name__ == "device" or hasattr(a, "type")
        ):
            raise TypeError(
                f"to() received an invalid combination of arguments - got ({type(a).__name__})"
            )
        device = str(a)
    if device is not None:
        device = "cuda:0" if str(device) == "cuda" else str(device)
    return device, (_dtype_name(dtype) if dtype is not None else None)


def _moved(t: Tensor, device: str | None, dtype: str | None) -> Tensor:
    new_dtype = dtype if dtype is not None and t.dtype.kind == "f" else None
    if (device is None or t.device == device) and (new_dtype is None or t.dtype == new_dtype):
        return t
    v = t.detach()
    if new_dtype is not None:
        v = v.astype(new_dtype)
    if device is not None and v.device != device:
        v = v.to(device)
    if isinstance(t, Parameter) or _uninitialized(t):
        # the same object over the converted data (and gradient), as PyTorch's: optimizers
        # and references made before the move keep working (and a lazy layer's placeholder
        # stays one)
        _replace_data(t, v.copy() if v._data_key[0] == t._data_key[0] else v)
        return t
    return v.copy() if v._data_key[0] == t._data_key[0] else v


def _replace_data(t: Tensor, v: Tensor) -> None:
    """``t`` (a leaf) now holds ``v``'s data, keeping its ``requires_grad`` and converting its
    ``.grad`` to the new dtype and device."""
    from ..autodiff import _stored_grad

    rg = bool(t.requires_grad) and t.is_leaf
    grad = _stored_grad(t)
    if rg:
        t.requires_grad_(False)
    t._replace_data(v)
    if rg:
        t.requires_grad_(True)
    if grad is not None:
        g = grad.detach()
        if g.dtype != v.dtype and v.dtype.kind == "f":
            g = g.astype(v.dtype.name)
        t.grad = g.to(v.device) if g.device != v.device else g


def _map_tensors(m: Module, fn: Callable[[Tensor], Tensor], memo: dict, done: set) -> None:
    """Replaces every parameter and buffer of ``m`` and its sub-modules by ``fn(t)`` (once
    per tensor object, so ties stay tied)."""
    if id(m) in done:
        return
    done.add(id(m))

    def move(v: Any) -> Any:
        if isinstance(v, Parameter):
            if id(v) not in memo:
                memo[id(v)] = fn(v)
            return memo[id(v)]
        if isinstance(v, Module):
            _map_tensors(v, fn, memo, done)
            return v
        if isinstance(v, list):
            v[:] = [move(x) for x in v]
            return v
        if isinstance(v, tuple):
            return (
                type(v)(*(move(x) for x in v))
                if hasattr(v, "_fields")
                else tuple(move(x) for x in v)
            )
        if isinstance(v, dict):
            for k in list(v):
                v[k] = move(v[k])
            return v
        return v

    buffers = set(m.__dict__.get("_buffer_names", {}))
    for name, value in list(vars(m).items()):
        if name in buffers and isinstance(value, Tensor):
            if id(value) not in memo:
                memo[id(value)] = fn(value)
            object.__setattr__(m, name, memo[id(value)])
        elif name not in ("training", "_buffer_names"):
            new = move(value)
            if new is not value:
                object.__setattr__(m, name, new)


# ------------------------------------------------------------------------------ containers


class Sequential(Module):
    """Applies its modules in order; ``Sequential(OrderedDict(name=module))`` names them."""

    def __init__(self, *args: Any) -> None:
        super().__init__()
        self.__dict__["_modules"] = OrderedDict()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for k, m in args[0].items():
                self.add_module(k, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def forward(self, x: Any) -> Any:
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            # the children keep their names, as PyTorch's slices do (and a subclass's
            # slice is of that subclass)
            return type(self)(OrderedDict(list(self._modules.items())[i]))
        mods = list(self._modules.values())
        return mods[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(list(self._modules.values()))

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self._modules)), module)
        return self

    def _renumber(self, mods: list) -> None:
        self.__dict__["_modules"] = OrderedDict((str(i), m) for i, m in enumerate(mods))

    def __setitem__(self, i: int, module: Module) -> None:
        module = _adopt(module)
        if not isinstance(module, Module):
            raise TypeError(f"Sequential: {type(module).__name__} is not a Module subclass")
        key = list(self._modules)[i]
        self._modules[key] = module

    def __delitem__(self, i: int | slice) -> None:
        keys = list(self._modules)
        for k in keys[i] if isinstance(i, slice) else [keys[i]]:
            del self._modules[k]
        self._renumber(list(self._modules.values()))  # numbering kept, as PyTorch's

    def insert(self, index: int, module: Module) -> Sequential:
        module = _adopt(module)
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")  # noqa: TRY004 (PyTorch's)
        mods = list(self._modules.values())
        n = len(mods)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        mods.insert(index + n if index < 0 else index, module)
        self._renumber(mods)
        return self

    def extend(self, sequential: Iterable[Module]) -> Sequential:
        for m in sequential:
            self.append(m)
        return self

    def pop(self, key: int | slice) -> Module:
        v = self[key]
        del self[key]
        return v

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError(  # noqa: TRY004 (PyTorch raises ValueError)
                f"add operator supports only objects of Sequential class, got {type(other).__name__}"
            )
        return Sequential(*self, *other)

    def __iadd__(self, other: Sequential) -> Sequential:  # noqa: PYI034
        if not isinstance(other, Sequential):
            raise ValueError(  # noqa: TRY004 (PyTorch raises ValueError)
                "add operator supports only objects of Sequential class, got "
                + type(other).__name__
            )
        return self.extend(other)

    def __mul__(self, other: int) -> Sequential:
        """The modules repeated ``other`` times (the same module objects), as PyTorch's."""
        if not isinstance(other, int):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and {type(other)}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")
        combined = Sequential()
        for i, module in enumerate(list(self) * other):
            combined.add_module(str(i), module)
        return combined

    def __rmul__(self, other: int) -> Sequential:
        return self.__mul__(other)

    def __imul__(self, other: int) -> Sequential:  # noqa: PYI034
        if not isinstance(other, int):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and {type(other)}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")
        for module in list(self) * (other - 1):
            self.append(module)
        return self


class ModuleList(Module):
    """A list of modules, each registered (named by index)."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        self.__dict__["_modules"] = OrderedDict()
        for m in modules or []:
            self.append(m)

    def _list(self) -> list[Module]:
        return list(self._modules.values())

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        module = _adopt(module)
        if not isinstance(module, Module):
            raise TypeError(f"ModuleList.insert: {type(module).__name__} is not a Module subclass")
        items = self._list()
        items.insert(index, module)
        self.__dict__["_modules"] = OrderedDict((str(i), m) for i, m in enumerate(items))

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return type(self)(self._list()[i])
        return self._list()[i]

    def __setitem__(self, i: int, module: Module) -> None:
        module = _adopt(module)
        if not isinstance(module, Module):
            raise TypeError(f"ModuleList: {type(module).__name__} is not a Module subclass")
        key = str(range(len(self._modules))[i])
        self._modules[key] = module

    def __delitem__(self, i: int | slice) -> None:
        mods = self._list()
        del mods[i]
        self.__dict__["_modules"] = OrderedDict((str(k), m) for k, m in enumerate(mods))

    def pop(self, key: int | slice) -> Module:
        v = self[key]
        del self[key]
        return v

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return ModuleList([*self._list(), *other])

    def __iadd__(self, other: Iterable[Module]) -> ModuleList:  # noqa: PYI034
        return self.extend(other)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._list())

    def __repr__(self) -> str:
        """PyTorch's listing: consecutive entries that print the same are one line,
        ``(0-2): 3 x ReLU()``."""
        runs: list[list] = []  # [first index, last index, repr]
        for i, m in enumerate(self._list()):
            r = repr(m)
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        if not runs:
            return f"{type(self).__name__}()"
        lines = [
            (f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}").replace("\n", "\n  ")
            for a, b, r in runs
        ]
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """A dict of modules, each registered by its key."""

    def __init__(self, modules: Any = None) -> None:
        super().__init__()
        self.__dict__["_modules"] = OrderedDict()
        if modules is not None:
            self.update(modules)

    def update(self, modules: Any) -> None:
        items = modules.items() if hasattr(modules, "items") else modules
        for k, m in items:
            self.add_module(k, m)  # (a key that is no string raises, as PyTorch's)

    def pop(self, key: str) -> Module:
        v = self._modules[key]
        del self._modules[key]
        return v

    def clear(self) -> None:
        self._modules.clear()

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def keys(self) -> Any:
        return self._modules.keys()

    def values(self) -> Any:
        return self._modules.values()

    def items(self) -> Any:
        return self._modules.items()


def _entries_repr(items: Iterable[tuple[Any, Any]], typed: bool) -> str:
    """The lines PyTorch's ParameterList / ParameterDict print for their entries: the
    dtype (``typed``: the tensor type name) and size of each tensor, the type of anything
    else."""
    from .._torch_aliases import typename

    lines = []
    for k, v in items:
        if isinstance(v, Tensor):
            kind = "Parameter" if isinstance(v, Parameter) else "Tensor"
            what = typename(v) if typed else v.dtype
            size = "x".join(str(n) for n in v.shape)
            dev = "" if v.device.type == "cpu" else f" ({v.device})"
            lines.append(f"  ({k}): {kind} containing: [{what} of size {size}{dev}]")
        else:
            lines.append(f"  ({k}): Object of type: {type(v).__name__}")
    return "\n".join(lines)


def _as_parameter(value: Any) -> Any:
    """An entry of a ParameterList / ParameterDict, as PyTorch stores it: a Tensor becomes a
    Parameter; anything else (``None`` above all) is kept as given, and is neither a
    parameter nor a state-dict entry."""
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


class ParameterList(Module):
    """A list of parameters, each registered (named by index)."""

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        self.__dict__["_parameters"] = OrderedDict()
        for v in values or []:
            self.append(v)

    def append(self, value: Any) -> ParameterList:
        self._parameters[str(len(self._parameters))] = _as_parameter(value)
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        if not isinstance(values, Iterable) or isinstance(values, Tensor):
            raise TypeError(
                "ParameterList.extend should be called with an iterable, but got "
                + type(values).__name__
            )
        for v in values:
            self.append(v)
        return self

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return type(self)(list(self._parameters.values())[i])
        return list(self._parameters.values())[i]

    def __setitem__(self, i: int, value: Any) -> None:
        key = str(range(len(self._parameters))[i])
        self._parameters[key] = _as_parameter(value)

    def __delitem__(self, i: int | slice) -> None:
        ps = list(self._parameters.values())
        del ps[i]
        self.__dict__["_parameters"] = OrderedDict((str(k), p) for k, p in enumerate(ps))

    def __iadd__(self, values: Iterable[Any]) -> ParameterList:  # noqa: PYI034
        return self.extend(values)

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[Parameter]:
        return iter(list(self._parameters.values()))

    def extra_repr(self) -> str:
        return _entries_repr(enumerate(self), typed=False)


class _MissingKeyError(KeyError, AttributeError):
    """A key a ParameterDict does not hold: a ``KeyError``, and the ``AttributeError``
    PyTorch raises."""


class ParameterDict(Module):
    """A dict of parameters, each registered by its key."""

    def __init__(self, parameters: Any = None) -> None:
        super().__init__()
        self.__dict__["_parameters"] = OrderedDict()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Parameter:
        try:
            return self._parameters[key]
        except KeyError:
            raise _MissingKeyError(key) from None

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise TypeError(
                f"ParameterDict: a key must be a string, got {type(key).__name__} {key!r}"
            )
        value = _as_parameter(value)
        if isinstance(value, Parameter):
            # a parameter's name, as register_parameter checks it (no ".", not empty, not
            # another attribute of the module)
            self._check_slot_name("parameter", key)
        self._parameters[key] = value

    def __delitem__(self, key: str) -> None:
        del self._parameters[key]

    def __contains__(self, key: str) -> bool:
        return key in self._parameters

    def get(self, key: str, default: Any = None) -> Any:
        return self._parameters.get(key, default)

    def pop(self, key: str) -> Parameter:
        v = self[key]
        del self._parameters[key]
        return v

    def popitem(self) -> tuple[str, Parameter]:
        return self._parameters.popitem()

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self._parameters:
            self[key] = default
        return self._parameters[key]

    def update(self, parameters: Any) -> None:
        """As PyTorch's: an OrderedDict or ParameterDict keeps its order, another mapping
        is taken in sorted key order, anything else is an iterable of (key, value) pairs."""
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            items = list(parameters.items())
        elif isinstance(parameters, Mapping) or (
            hasattr(parameters, "items") and hasattr(parameters, "keys")
        ):
            items = sorted(parameters.items())
        elif isinstance(parameters, Iterable):
            items = []
            for j, kv in enumerate(parameters):
                if not isinstance(kv, Iterable):
                    raise TypeError(
                        f"ParameterDict update sequence element #{j} should be Iterable; is "
                        + type(kv).__name__
                    )
                kv = tuple(kv)
                if len(kv) != 2:
                    raise ValueError(
                        f"ParameterDict update sequence element #{j} has length {len(kv)}; "
                        "2 is required"
                    )
                items.append(kv)
        else:
            raise TypeError(
                "ParametersDict.update should be called with an iterable of key/value pairs, "
                "but got " + type(parameters).__name__
            )
        for k, v in items:
            self[k] = v

    def __reversed__(self) -> Iterator[str]:
        return reversed(list(self._parameters))

    def clear(self) -> None:
        self._parameters.clear()

    def copy(self) -> ParameterDict:
        return ParameterDict(OrderedDict(self._parameters))

    def fromkeys(self, keys: Iterable[str], default: Any = None) -> ParameterDict:
        return ParameterDict({k: default for k in keys})

    def __or__(self, other: Any) -> ParameterDict:
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other: Any) -> Any:
        out = other.copy()
        out.update(self)
        return out

    def __ior__(self, other: Any) -> ParameterDict:  # noqa: PYI034
        self.update(other)
        return self

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[str]:
        return iter(self._parameters)

    def extra_repr(self) -> str:
        return _entries_repr(self.items(), typed=True)

    def keys(self) -> Any:
        return self._parameters.keys()

    def values(self) -> Any:
        return self._parameters.values()

    def items(self) -> Any:
        return self._parameters.items()


# --------------------------------------------------------------------------- initialisation


def _count(module: str, name: str, value: object, minimum: int) -> int:
    """A size argument of a layer: an int of at least ``minimum`` (bools are not sizes)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{module}: {name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        kind = "positive" if minimum > 0 else "non-negative"
        raise ValueError(f"{module}: {name} must be {kind}, got {value}")
    return int(value)


def _uniform_param(
    rng: np.random.Generator | None, bound: float, shape: tuple, dtype: Any, device: Any
) -> Parameter:
    """A Parameter of uniform samples in ``[-bound, bound]`` from ``rng`` or the seeded
    stream of ``device``."""
    name = _dtype_name(dtype) if dtype is not None else default_float()
    dev = str(device) if device is not None else str(_core.get_default_device())
    g = rng if rng is not None else _numpy_rng(dev)
    data = g.uniform(-bound, bound, shape)
    t = tensor(data.astype(np.float64 if name == "float64" else np.float32), device=dev)
    return Parameter(t.astype(name) if t.dtype != name else t)


def _filled_param(value: float, shape: tuple, dtype: Any, device: Any) -> Parameter:
    name = _dtype_name(dtype) if dtype is not None else default_float()
    return Parameter(_core.full(shape, value, dtype=name, device=device))


def _reset_affine(module: Module) -> None:
    """The initial affine part of a normalisation layer, in place: ``weight`` ones and
    ``bias`` zeros (either may be absent)."""
    from . import init

    if getattr(module, "weight", None) is not None:
        init.ones_(module.weight)
    if getattr(module, "bias", None) is not None:
        init.zeros_(module.bias)


def _bound(fan_in: int) -> float:
    """PyTorch's default initialisation bound ``1 / sqrt(fan_in)`` (0 for no inputs)."""
    return 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0


def _tuple(v: Any, n: int) -> tuple:
    return tuple(v) if isinstance(v, (list, tuple)) else (v,) * n


# ------------------------------------------------------------------------------------ layers


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` of shape ``(out_features, in_features)``
    (PyTorch's and MegEngine's layout), initialised as PyTorch's."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
        rng: np.random.Generator | None = None,
    ) -> None:
        super().__init__()
        self.in_features = _count("Linear", "in_features", in_features, 0)
        self.out_features = _count("Linear", "out_features", out_features, 0)
        bound = _bound(self.in_features)
        shape = (self.out_features, self.in_features)
        self.weight = _uniform_param(rng, bound, shape, dtype, device)
        self.bias = (
            _uniform_param(rng, bound, (self.out_features,), dtype, device) if bias else None
        )

    def reset_parameters(self) -> None:
        """Re-draws ``weight`` and ``bias`` in place from the initial distribution (uniform
        in ``±1/sqrt(in_features)``, PyTorch's); a lazy layer not sized yet is left as it
        is."""
        if _uninitialized(self.weight):
            return
        from . import init

        bound = _bound(self.in_features)
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class _ConvNd(Module):
    _nd = 2
    _conv: Any = None

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple,
        stride: int | tuple = 1,
        padding: Any = 0,
        dilation: int | tuple = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
        rng: Any = None,
    ) -> None:
        super().__init__()
        k = _tuple(kernel_size, self._nd)
        kind = type(self).__name__
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(
                f"{kind}: padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', "
                f"got {padding_mode!r}"
            )
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(
                    f"{kind}: Invalid padding string {padding!r}, should be one of "
                    "{'valid', 'same'}"
                )
            if padding == "same" and any(s != 1 for s in _tuple(stride, self._nd)):
                raise ValueError(
                    f"{kind}: padding='same' is not supported for strided convolutions "
                    f"(stride {stride!r})"
                )
        self._setup(kind, in_channels, out_channels, k, groups, bias, device, dtype, rng)
        nd = self._nd
        # per-axis tuples, as PyTorch stores them (code ported from it indexes them)
        self.stride, self.dilation = _tuple(stride, nd), _tuple(dilation, nd)
        self.padding = padding if isinstance(padding, str) else _tuple(padding, nd)
        self.output_padding, self.transposed = (0,) * nd, False
        self.padding_mode = padding_mode
        self._reversed_padding_repeated_twice = self._explicit_padding()

    def _explicit_padding(self) -> list[int]:
        """F.pad's amounts (last axis first) for a padding_mode other than zeros."""
        nd = self._nd
        dil = _tuple(self.dilation, nd)
        if isinstance(self.padding, str):
            if self.padding == "valid":
                per = [(0, 0)] * nd
            else:  # "same"
                per = []
                for k, d in zip(self.kernel_size, dil):
                    total = d * (k - 1)
                    per.append((total // 2, total - total // 2))
        else:
            per = [(p, p) for p in _tuple(self.padding, nd)]
        out: list[int] = []
        for lo, hi in reversed(per):
            out += [lo, hi]
        return out

    def _setup(
        self,
        kind: str,
        in_channels: int,
        out_channels: int,
        kernel: tuple,
        groups: int,
        bias: bool,
        device: Any,
        dtype: Any,
        rng: Any,
        transposed: bool = False,
    ) -> None:
        self.in_channels = _count(kind, "in_channels", in_channels, 1)
        self.out_channels = _count(kind, "out_channels", out_channels, 1)
        self.groups = _count(kind, "groups", groups, 1)
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ValueError(
                f"{kind}: in_channels ({in_channels}) and out_channels ({out_channels}) must "
                f"be divisible by groups ({groups})"
            )
        self.kernel_size = tuple(_count(kind, "kernel_size", k, 1) for k in kernel)
        if transposed:
            shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
            fan_in = self.out_channels // self.groups * int(np.prod(self.kernel_size))
        else:
            shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
            fan_in = self.in_channels // self.groups * int(np.prod(self.kernel_size))
        bound = _bound(fan_in)
        self.weight = _uniform_param(rng, bound, shape, dtype, device)
        self.bias = (
            _uniform_param(rng, bound, (self.out_channels,), dtype, device) if bias else None
        )

    def reset_parameters(self) -> None:
        """Draws the weight and bias again from PyTorch's initial distribution:
        ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``, ``fan_in`` the weight's entries per output
        channel (kaiming_uniform with ``a = sqrt(5)``)."""
        from . import init

        fan_in = int(np.prod(self.weight.shape[1:]))
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def _conv_forward(self, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        """This layer's convolution of ``x`` with the given ``weight`` and ``bias`` (its
        stride, padding, padding_mode, dilation and groups), as PyTorch's: layers that
        transform their weight first (weight standardisation) call it."""
        mode = getattr(self, "padding_mode", "zeros")
        if mode != "zeros":
            x = F.pad(x, self._explicit_padding(), mode=mode)
            return type(self)._conv(x, weight, bias, self.stride, 0, self.dilation, self.groups)
        return type(self)._conv(
            x, weight, bias, self.stride, self.padding, self.dilation, self.groups
        )

    def forward(self, x: Tensor) -> Tensor:
        return self._conv_forward(x, self.weight, self.bias)


class Conv1d(_ConvNd):
    """1-D convolution over ``(N, C, L)``, PyTorch's layout and initialisation."""

    _nd = 1
    _conv = staticmethod(F.conv1d)


class Conv2d(_ConvNd):
    """2-D convolution over NCHW input, PyTorch's layout and initialisation."""

    _nd = 2
    _conv = staticmethod(F.conv2d)


class ConvTranspose2d(_ConvNd):
    """The transpose of :class:`Conv2d` (weights ``(in, out / groups, kh, kw)``)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple,
        stride: int | tuple = 1,
        padding: int | tuple = 0,
        output_padding: int | tuple = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: int | tuple = 1,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
        rng: Any = None,
    ) -> None:
        Module.__init__(self)
        if padding_mode != "zeros":
            raise ValueError(
                f'ConvTranspose2d: only "zeros" padding_mode is supported, got {padding_mode!r}'
            )
        self.padding_mode = padding_mode
        k = _tuple(kernel_size, 2)
        self._setup(
            "ConvTranspose2d",
            in_channels,
            out_channels,
            k,
            groups,
            bias,
            device,
            dtype,
            rng,
            transposed=True,
        )
        self.stride, self.padding = _tuple(stride, 2), _tuple(padding, 2)
        self.dilation, self.output_padding = _tuple(dilation, 2), _tuple(output_padding, 2)
        self.transposed = True

    def forward(self, x: Tensor, output_size: Any = None) -> Tensor:
        """``output_size`` (the spatial size, or a full NCHW shape) picks the
        ``output_padding`` that gives it, as PyTorch's."""
        op = self.output_padding
        if output_size is not None:
            op = self._output_padding(x, list(output_size))
        return F.conv_transpose2d(
            x, self.weight, self.bias, self.stride, self.padding, op, self.groups, self.dilation
        )

    def _output_padding(self, x: Tensor, size: list) -> tuple:
        if len(size) == 4:
            size = size[2:]
        if len(size) != 2:
            raise ValueError(
                f"ConvTranspose2d: output_size must have 2 or 4 entries, got {len(size)}"
            )
        st, pd, dl = _tuple(self.stride, 2), _tuple(self.padding, 2), _tuple(self.dilation, 2)
        out = []
        for d in range(2):
            lo = (x.shape[2 + d] - 1) * st[d] - 2 * pd[d] + dl[d] * (self.kernel_size[d] - 1) + 1
            hi = lo + max(st[d], dl[d]) - 1
            if not lo <= int(size[d]) <= hi:
                raise ValueError(
                    f"ConvTranspose2d: requested an output size of {list(size)}, but valid "
                    f"sizes range from {lo} to {hi} (for an input of {list(x.shape[2:])})"
                )
            out.append(int(size[d]) - lo)
        return tuple(out)


class _BatchNorm(Module):
    _dims: tuple = ()
    # (2: `num_batches_tracked` is saved; see Module.load_state_dict)
    _version = 2

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__()
        kind = type(self).__name__
        self.num_features = _count(kind, "num_features", num_features, 1)
        self.eps, self.momentum = eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        c = self.num_features
        self.weight = _filled_param(1.0, (c,), dtype, device) if affine else None
        # (bias=False: a scale without a shift, PyTorch 2.15's keyword)
        self.bias = _filled_param(0.0, (c,), dtype, device) if affine and bias else None
        name = _dtype_name(dtype) if dtype is not None else default_float()
        if track_running_stats:
            self.register_buffer("running_mean", _core.zeros((c,), dtype=name, device=device))
            self.register_buffer("running_var", _core.ones((c,), dtype=name, device=device))
            self.register_buffer(
                "num_batches_tracked", _core.zeros((), dtype="int64", device=device)
            )
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1.0)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """Back to the initial state: running statistics reset, weight ones, bias zeros."""
        self.reset_running_stats()
        _reset_affine(self)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in self._dims:
            raise ShapeError(
                f"{type(self).__name__}: expected {' or '.join(f'{d}-D' for d in self._dims)} "
                f"input, got shape {list(x.shape)}"
            )
        # as PyTorch: batch statistics in training (and without running statistics); the
        # running ones are updated only while tracked (track_running_stats may be switched
        # off after construction: then they are kept as they are, and used in eval mode)
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        momentum = self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked += 1
            if momentum is None and _core._tracing():
                # a cumulative average in a traced step: the count is a tensor the graph
                # updates, so the factor is computed from it on every run
                momentum = 1.0 / self.num_batches_tracked.astype("float64")
            elif momentum is None:  # cumulative moving average
                momentum = 1.0 / int(self.num_batches_tracked.item())
        update = not self.training or self.track_running_stats
        return F.batch_norm(
            x,
            self.running_mean if update else None,
            self.running_var if update else None,
            self.weight,
            self.bias,
            use_batch,
            momentum if momentum is not None else 0.0,
            self.eps,
        )

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of ``(N, C)`` or ``(N, C, L)``."""

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of ``(N, C, H, W)``."""

    _dims = (4,)


class LayerNorm(Module):
    def __init__(
        self,
        normalized_shape: Any,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
        self.normalized_shape = tuple(int(s) for s in shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.weight = (
            _filled_param(1.0, self.normalized_shape, dtype, device) if elementwise_affine else None
        )
        self.bias = (
            _filled_param(0.0, self.normalized_shape, dtype, device)
            if elementwise_affine and bias
            else None
        )

    def reset_parameters(self) -> None:
        """Weight back to ones, bias to zeros."""
        _reset_affine(self)

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class GroupNorm(Module):
    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.num_groups = _count("GroupNorm", "num_groups", num_groups, 1)
        self.num_channels = _count("GroupNorm", "num_channels", num_channels, 1)
        if self.num_channels % self.num_groups:
            raise ValueError(
                f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups "
                f"({num_groups})"
            )
        self.eps = eps
        self.affine = affine
        c = self.num_channels
        self.weight = _filled_param(1.0, (c,), dtype, device) if affine else None
        self.bias = _filled_param(0.0, (c,), dtype, device) if affine and bias else None

    def reset_parameters(self) -> None:
        """Weight back to ones, bias to zeros."""
        _reset_affine(self)

    def forward(self, x: Tensor) -> Tensor:
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)


def _padding_index(op: str, padding_idx: int | None, num_embeddings: int) -> int | None:
    """``padding_idx`` checked against the table and counted from the start."""
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(
            f"{op}: padding_idx {padding_idx} is out of range for {num_embeddings} embeddings"
        )
    return padding_idx % num_embeddings


def _embedding_weight(
    num_embeddings: int, embedding_dim: int, padding_idx: int | None, device: Any, dtype: Any
) -> Parameter:
    """A table drawn from N(0, 1) (fg.manual_seed's stream), the ``padding_idx`` row zero."""
    name = _dtype_name(dtype) if dtype is not None else default_float()
    dev = str(device) if device is not None else str(_core.get_default_device())
    w = _numpy_rng(dev).standard_normal((num_embeddings, embedding_dim))
    if padding_idx is not None:
        w[padding_idx] = 0.0
    return Parameter(tensor(w, device=dev).astype(name))


class Embedding(Module):
    """A lookup table of ``num_embeddings`` rows of ``embedding_dim``, initialised from
    N(0, 1) (the ``padding_idx`` row zero)."""

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight: Tensor | None = None,
        _freeze: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.num_embeddings = _count("Embedding", "num_embeddings", num_embeddings, 1)
        self.embedding_dim = _count("Embedding", "embedding_dim", embedding_dim, 1)
        if padding_idx is not None and not -num_embeddings <= padding_idx < num_embeddings:
            from ._errors import ArgumentAssertionError

            raise ArgumentAssertionError(
                f"Embedding: Padding_idx must be within num_embeddings: padding_idx "
                f"{padding_idx} is out of range for {num_embeddings} embeddings"
            )
        self.padding_idx = padding_idx = _padding_index("Embedding", padding_idx, num_embeddings)
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is not None:
            self.weight = (
                _weight
                if isinstance(_weight, Parameter)
                else Parameter(_weight, requires_grad=not _freeze)
            )
            return
        self.weight = _embedding_weight(num_embeddings, embedding_dim, padding_idx, device, dtype)

    def reset_parameters(self) -> None:
        """Draws the table again from N(0, 1), the ``padding_idx`` row zero, as PyTorch."""
        from . import init

        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self) -> None:
        if self.padding_idx is not None:
            from ..autodiff import no_grad

            with no_grad():
                self.weight[self.padding_idx] = 0.0

    @classmethod
    def from_pretrained(
        cls,
        embeddings: Tensor,
        freeze: bool = True,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
    ) -> Embedding:
        if embeddings.ndim != 2:
            raise ShapeError(
                f"Embedding.from_pretrained: embeddings must be 2-D, got {list(embeddings.shape)}"
            )
        n, d = embeddings.shape
        # the parameter shares ``embeddings``' storage, as PyTorch's (max_norm shows there)
        weight = Parameter(embeddings, requires_grad=False)
        weight._replace_data(embeddings.detach())
        if not freeze:
            weight.requires_grad_(True)
        return cls(
            n,
            d,
            padding_idx,
            max_norm,
            norm_type,
            scale_grad_by_freq,
            sparse,
            _weight=weight,
        )

    def forward(self, x: Tensor) -> Tensor:
        return F.embedding(
            x,
            self.weight,
            self.padding_idx,
            self.max_norm,
            self.norm_type,
            self.scale_grad_by_freq,
            self.sparse,
        )


class Dropout(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must lie in [0, 1], got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training, self.inplace)


class Identity(Module):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Any) -> Any:
        return x


class ReLU(Module):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x, self.inplace)


class GELU(Module):
    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, self.approximate)


class SiLU(Module):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.silu(x, self.inplace)


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.leaky_relu(x, self.negative_slope, self.inplace)


class ELU(Module):
    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.elu(x, self.alpha, self.inplace)


class Hardtanh(Module):
    def __init__(
        self,
        min_val: float = -1.0,
        max_val: float = 1.0,
        inplace: bool = False,
        min_value: float | None = None,
        max_value: float | None = None,
    ) -> None:
        super().__init__()
        # (PyTorch's deprecated spellings, which win when given)
        for old, new, value in (
            ("min_value", "min_val", min_value),
            ("max_value", "max_val", max_value),
        ):
            if value is not None:
                warnings.warn(
                    f"keyword argument `{old}` is deprecated and renamed to `{new}`",
                    FutureWarning,
                    stacklevel=2,
                )
        min_val = min_val if min_value is None else min_value
        max_val = max_val if max_value is None else max_value
        if max_val <= min_val:
            raise ValueError(f"Hardtanh: max_val ({max_val}) must be above min_val ({min_val})")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.hardtanh(x, self.min_val, self.max_val, self.inplace)


class Softplus(Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x: Tensor) -> Tensor:
        return F.softplus(x, self.beta, self.threshold)


class Tanh(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class Sigmoid(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.sigmoid()


class Softmax(Module):
    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x, self.dim)


class LogSoftmax(Module):
    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.log_softmax(x, self.dim)


class Flatten(Module):
    """Flattens axes ``start_dim..end_dim`` (by default every axis after the first)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)


class Unflatten(Module):
    def __init__(self, dim: int, unflattened_size: Any) -> None:
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError(
                "Unflatten: unflattened_size must be a tuple of ints, got "
                f"{type(unflattened_size).__name__} {unflattened_size!r}"
            )
        for i, e in enumerate(unflattened_size):
            if not isinstance(e, (int, np.integer)):
                raise TypeError(
                    "Unflatten: unflattened_size must be a tuple of ints, but element "
                    f"{i} is {type(e).__name__} {e!r}"
                )
        self.dim, self.unflattened_size = dim, unflattened_size  # (as given, as PyTorch)

    def forward(self, x: Tensor) -> Tensor:
        return x.unflatten(self.dim, self.unflattened_size)


class MaxPool2d(Module):
    def __init__(
        self,
        kernel_size: int | tuple,
        stride: int | tuple | None = None,
        padding: int | tuple = 0,
        dilation: int | tuple = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, x: Tensor) -> Any:
        """The pooled tensor; with ``return_indices``, ``(output, indices)`` (the flat
        per-channel positions ``MaxUnpool2d`` takes)."""
        return F.max_pool2d(
            x,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            self.ceil_mode,
            self.return_indices,
        )


class AvgPool2d(Module):
    def __init__(
        self,
        kernel_size: int | tuple,
        stride: int | tuple | None = None,
        padding: int | tuple = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, x: Tensor) -> Tensor:
        return F.avg_pool2d(
            x,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )


class AdaptiveAvgPool2d(Module):
    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(x, self.output_size)


# ----------------------------------------------------------------------------------- losses


class _Loss(Module):
    def __init_subclass__(cls, **kw: Any) -> None:
        # PyTorch's deprecated `size_average=` / `reduce=` keywords (older programs pass
        # them): they decide `reduction`, with PyTorch's warning
        super().__init_subclass__(**kw)
        init = cls.__dict__.get("__init__")
        if init is None or getattr(init, "_legacy_reduction", False):
            return

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            if "size_average" in kwargs or "reduce" in kwargs:
                size_average = kwargs.pop("size_average", None)
                reduce = kwargs.pop("reduce", None)
                if size_average is not None or reduce is not None:
                    kwargs["reduction"] = F._legacy_reduction(size_average, reduce)
            init(self, *args, **kwargs)

        __init__._legacy_reduction = True  # type: ignore[attr-defined]
        cls.__init__ = __init__  # type: ignore[misc]

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(
                f"{type(self).__name__}: reduction must be 'mean', 'sum' or 'none', got "
                f"{reduction!r}"
            )
        self.reduction = reduction


class _WeightedLoss(_Loss):
    """A loss with class weights: ``weight`` is a buffer (in ``state_dict``, moved by
    ``to``), as PyTorch's."""

    def __init__(self, weight: Tensor | None = None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    def __init__(
        self,
        weight: Tensor | None = None,
        ignore_index: int = -100,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
    ) -> None:
        super().__init__(weight, reduction)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(
            input, target, self.weight, self.ignore_index, self.reduction, self.label_smoothing
        )


class NLLLoss(_WeightedLoss):
    def __init__(
        self, weight: Tensor | None = None, ignore_index: int = -100, reduction: str = "mean"
    ) -> None:
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class NLLLoss2d(NLLLoss):
    """PyTorch's deprecated name of :class:`NLLLoss` for ``(N, C, H, W)`` input."""


class MSELoss(_Loss):
    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, self.reduction)


class L1Loss(_Loss):
    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.l1_loss(input, target, self.reduction)


class SmoothL1Loss(_Loss):
    def __init__(self, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.smooth_l1_loss(input, target, self.reduction, self.beta)


class BCELoss(_WeightedLoss):
    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy(input, target, self.weight, self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __init__(
        self,
        weight: Tensor | None = None,
        reduction: str = "mean",
        pos_weight: Tensor | None = None,
    ) -> None:
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(
            input, target, self.weight, self.reduction, self.pos_weight
        )


class KLDivLoss(_Loss):
    def __init__(self, reduction: str = "mean", log_target: bool = False) -> None:
        Module.__init__(self)
        if reduction not in ("mean", "sum", "none", "batchmean"):
            raise ValueError(f"KLDivLoss: bad reduction {reduction!r}")
        self.reduction, self.log_target = reduction, log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.kl_div(input, target, self.reduction, self.log_target)


def mlp(
    sizes: list[int],
    activation: type = ReLU,
    dtype: str = "float32",
    rng: np.random.Generator | None = None,
) -> Sequential:
    """``Linear -> activation -> ... -> Linear`` through the given layer sizes."""
    layers: list[Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(Linear(a, b, dtype=dtype, rng=rng))
        if i < len(sizes) - 2:
            layers.append(activation())
    return Sequential(*layers)


__all__ = [
    "ELU",
    "GELU",
    "AdaptiveAvgPool2d",
    "AvgPool2d",
    "BCELoss",
    "BCEWithLogitsLoss",
    "BatchNorm1d",
    "BatchNorm2d",
    "Conv1d",
    "Conv2d",
    "ConvTranspose2d",
    "CrossEntropyLoss",
    "Dropout",
    "Embedding",
    "Flatten",
    "GroupNorm",
    "Hardtanh",
    "Identity",
    "KLDivLoss",
    "L1Loss",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "LogSoftmax",
    "MSELoss",
    "MaxPool2d",
    "Module",
    "ModuleDict",
    "ModuleList",
    "MultiheadAttention",
    "NLLLoss",
    "NLLLoss2d",
    "Parameter",
    "ParameterDict",
    "ParameterList",
    "ReLU",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "SmoothL1Loss",
    "Softmax",
    "Softplus",
    "Tanh",
    "Unflatten",
    "mlp",
]


def _install_module_alias() -> None:
    # torch.nn.modules.module: this module under that name too (its global hooks)
    import sys

    me = sys.modules[__name__]
    me.module = me  # type: ignore[attr-defined]
    sys.modules[__name__ + ".module"] = me


_install_module_alias()

# (defined in .attention, which builds on the layers above)
from .attention import MultiheadAttention
