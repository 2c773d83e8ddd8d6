"""PyTorch's ``torch.nn.utils.parametrize``: a tensor of a module computed by a small module
(a *parametrization*) from the tensors that are actually trained.

After ``register_parametrization(m, "weight", P())``, ``m.weight`` is ``P()(original)``,
recomputed at each read (or once per :func:`cached` block); the trained tensor lives at
``m.parametrizations.weight.original`` (``original0``, ``original1``, ... when
``P.right_inverse`` returns several), which is where ``state_dict`` keys, optimizers and
gradients see it. Assigning ``m.weight = value`` stores ``P.right_inverse(value)``."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Sequence
from typing import Any

from ..._core import Tensor
from ...autodiff import no_grad
from ..modules import Module, ModuleDict, ModuleList, Parameter

__all__ = [
    "ParametrizationList",
    "cached",
    "is_parametrized",
    "register_parametrization",
    "remove_parametrizations",
    "transfer_parametrizations_and_params",
    "type_before_parametrizations",
]

_cache_depth = 0
_cache: dict[tuple[int, str], Tensor] = {}


@contextlib.contextmanager
def cached() -> Iterator[None]:
    """Inside this block each parametrized tensor is computed once, at its first read, and
    reused (for a recurrent network reading the same weight at every step)."""
    global _cache_depth
    _cache_depth += 1
    try:
        yield
    finally:
        _cache_depth -= 1
        if not _cache_depth:
            _cache.clear()


def _is_buffer(module: Module, name: str) -> bool:
    return name in module.__dict__.get("_buffer_names", {})


def _register(module: Module, name: str, value: Tensor, as_buffer: bool) -> None:
    if as_buffer:
        module.register_buffer(name, value)
    else:
        module.register_parameter(
            name, value if isinstance(value, Parameter) else Parameter(value, False)
        )


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, with the trained tensor(s):
    ``original`` (or ``original0``, ``original1``, ... when the first parametrization's
    ``right_inverse`` returns a sequence). Calling it computes the parametrized tensor."""

    def __init__(self, modules: Sequence[Module], original: Tensor, unsafe: bool = False) -> None:
        Module.__init__(self)
        as_buffer = not isinstance(original, Parameter)
        new: Any = original
        with no_grad():
            for m in reversed(list(modules)):
                inv = getattr(m, "right_inverse", None)
                if inv is not None:
                    # (a right_inverse that is not implemented counts as the identity here,
                    # as PyTorch's)
                    with contextlib.suppress(NotImplementedError):
                        new = inv(new)
        if not isinstance(new, (Tensor, Sequence)) or isinstance(new, str):
            raise ValueError(  # noqa: TRY004 (PyTorch raises ValueError)
                "register_parametrization: right_inverse must return a Tensor or a sequence "
                f"of Tensors, got {type(new).__name__}"
            )
        self.__dict__["unsafe"] = bool(unsafe)
        self.__dict__["is_tensor"] = isinstance(new, Tensor)
        self.__dict__["_as_buffer"] = as_buffer
        grad = bool(getattr(original, "requires_grad", False))
        if isinstance(new, Tensor):
            if new.dtype != original.dtype:
                raise ValueError(
                    "register_parametrization: when right_inverse outputs one tensor, it may "
                    f"not change the dtype ({original.dtype} to {new.dtype})"
                )
            if not unsafe and tuple(new.shape) != tuple(original.shape):
                raise ValueError(
                    "register_parametrization: right_inverse may not change the shape of the "
                    f"tensor from {tuple(original.shape)} to {tuple(new.shape)}; pass "
                    "unsafe=True to allow it"
                )
            self.__dict__["ntensors"] = 1
            if new is not original:
                _store(original, new)
            _register(self, "original", original, as_buffer)
        else:
            self.__dict__["ntensors"] = len(new)
            for i, t in enumerate(new):
                if not isinstance(t, Tensor):
                    raise ValueError(  # noqa: TRY004 (PyTorch raises ValueError)
                        "register_parametrization: right_inverse returned a sequence whose "
                        f"element {i} is a {type(t).__name__}, not a Tensor"
                    )
                v: Tensor = t.detach().copy()
                if not as_buffer:
                    v = Parameter(v, grad)
                _register(self, f"original{i}", v, as_buffer)
        super().__init__(modules)
        if not unsafe:
            _check_same(
                "register_parametrization", "a parametrization", "the tensor", original, self()
            )

    def right_inverse(self, value: Tensor) -> None:
        """Stores ``value`` as the parametrized tensor: each ``right_inverse`` in reverse
        order, the result copied into the originals."""
        with no_grad():
            for m in reversed(self._list()):
                inv = getattr(m, "right_inverse", None)
                if inv is None:
                    raise RuntimeError(
                        f"parametrization {type(m).__name__} has no right_inverse, so the "
                        "parametrized tensor cannot be assigned"
                    )
                value = inv(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(
                        f"right_inverse must return a Tensor, got {type(value).__name__}"
                    )
                _copy_into(self.original, value, "original", self.unsafe)
            else:
                if not isinstance(value, Sequence) or len(value) != self.ntensors:
                    raise ValueError(
                        f"right_inverse must return a sequence of {self.ntensors} Tensors"
                    )
                for i, t in enumerate(value):
                    _copy_into(getattr(self, f"original{i}"), t, f"original{i}", self.unsafe)

    def forward(self) -> Tensor:  # type: ignore[override]
        mods = self._list()
        if self.is_tensor:
            x = mods[0](self.original)
        else:
            x = mods[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for m in mods[1:]:
            x = m(x)
        return x


def _store(dst: Tensor, src: Tensor) -> None:
    """``dst`` (the same object, so optimizers holding it keep training it) takes ``src``'s
    value, and its shape when that differs (an ``unsafe`` parametrization)."""
    with no_grad():
        if tuple(dst.shape) == tuple(src.shape):
            dst.copy_(src)
        else:
            dst.set_(src.detach().copy())


def _copy_into(dst: Tensor, src: Any, name: str, unsafe: bool) -> None:
    """Stores an assigned value's ``right_inverse`` result ``src`` in the original ``dst``:
    same dtype; another shape only for an ``unsafe`` parametrization."""
    if not isinstance(src, Tensor):
        raise ValueError(  # noqa: TRY004 (PyTorch raises ValueError)
            f"right_inverse must return a Tensor for {name}, got {type(src).__name__}"
        )
    if dst.dtype != src.dtype:
        raise ValueError(
            f"right_inverse: the value for {name} must have its dtype {dst.dtype}, got {src.dtype}"
        )
    if not unsafe and tuple(dst.shape) != tuple(src.shape):
        raise ValueError(
            f"right_inverse: the value for {name} must have its shape {tuple(dst.shape)}, got "
            f"{tuple(src.shape)} (a parametrization registered with unsafe=True may change it)"
        )
    _store(dst, src)


def _inject_class(module: Module) -> None:
    """Gives ``module`` a class of its own (a subclass of its class) to hold the properties
    of its parametrized tensors, so other instances are untouched."""
    cls = type(module)
    if "_class_before_parametrizations" in cls.__dict__:
        return
    ns: dict[str, Any] = {"_class_before_parametrizations": cls, "__getstate__": _no_pickle}
    if not hasattr(cls, "__deepcopy__"):
        ns["__deepcopy__"] = _deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), ns)


def _no_pickle(self: Module) -> None:
    # the injected class exists only on this instance, so pickle could not find it again
    raise RuntimeError(
        f"a parametrized {type_before_parametrizations(self).__name__} cannot be pickled; "
        "save and load its state_dict() instead"
    )


def _deepcopy(self: Module, memo: dict) -> Module:
    """A copy of the parametrized module, its class (with the properties) shared."""
    replica = self.__new__(type(self))
    memo[id(self)] = replica
    object.__setattr__(replica, "__dict__", copy.deepcopy(self.__dict__, memo))
    return replica


def _inject_property(module: Module, name: str) -> None:
    def get(self: Module) -> Tensor:
        plist = self.parametrizations[name]
        if _cache_depth:
            key = (id(self), name)
            t = _cache.get(key)
            if t is None:
                t = _cache[key] = plist()
            return t
        return plist()

    def set_(self: Module, value: Tensor) -> None:
        self.parametrizations[name].right_inverse(value)

    setattr(type(module), name, property(get, set_))


def type_before_parametrizations(module: Module) -> type:
    """The module's class as it was before any parametrization was registered."""
    return type(module).__dict__.get("_class_before_parametrizations", type(module))


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has a parametrization (on ``tensor_name`` when given)."""
    plists = module.__dict__.get("parametrizations")
    if not isinstance(plists, ModuleDict):
        return False
    return len(plists) > 0 if tensor_name is None else tensor_name in plists


def _check_same(op: str, what: str, name: str, y: Tensor, z: Any) -> None:
    """Raises unless ``z`` (``what`` applied to ``module.<name>``, ``y``) is a Tensor of
    ``y``'s dtype and shape: what a safe parametrization keeps."""
    if not isinstance(z, Tensor):
        raise ValueError(  # noqa: TRY004 (PyTorch raises ValueError)
            f"{op}: {what} must return a tensor, got {type(z).__name__}"
        )
    if z.dtype != y.dtype:
        raise ValueError(
            f"{op}: {what} may not change the dtype of {name!r} from {y.dtype} to {z.dtype}; "
            "pass unsafe=True to allow it"
        )
    if tuple(z.shape) != tuple(y.shape):
        raise ValueError(
            f"{op}: {what} may not change the shape of {name!r} from {tuple(y.shape)} to "
            f"{tuple(z.shape)}; pass unsafe=True to allow it"
        )


def register_parametrization(
    module: Module, tensor_name: str, parametrization: Module, *, unsafe: bool = False
) -> Module:
    """``module.<tensor_name>`` becomes ``parametrization(original)``; registering a second
    parametrization on the same tensor composes it after the first. Returns ``module``."""
    op = "register_parametrization"
    if not isinstance(parametrization, Module):
        raise TypeError(
            f"{op}: the parametrization must be a Module, got {type(parametrization).__name__}"
        )
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        if not unsafe:
            y = getattr(module, tensor_name)
            z = parametrization(y)
            _check_same(op, "parametrization", tensor_name, y, z)
            inv = getattr(parametrization, "right_inverse", None)
            if inv is not None:
                try:
                    with no_grad():
                        x = inv(z)
                except NotImplementedError:
                    pass  # an identity right_inverse
                else:
                    _check_same(op, "parametrization.right_inverse", tensor_name, y, x)
        plist.append(parametrization)
        plist.__dict__["unsafe"] = plist.unsafe or unsafe
        _cache.clear()
        return module
    d = module.__dict__
    original = d.get(tensor_name)
    if original is None:
        original = d.get("_parameters", {}).get(tensor_name)
    if not isinstance(original, Tensor):
        raise ValueError(  # noqa: TRY004 (PyTorch raises ValueError)
            f"{op}: module {type(module).__name__} has no parameter, buffer or parametrized "
            f"element named {tensor_name!r}"
        )
    if not isinstance(original, Parameter) and not _is_buffer(module, tensor_name):
        raise ValueError(
            f"{op}: {tensor_name!r} of {type(module).__name__} is neither a parameter nor a buffer"
        )
    plist = ParametrizationList([parametrization], original, unsafe=unsafe)
    if tensor_name in d:
        del d[tensor_name]
    else:
        del d["_parameters"][tensor_name]
    d.get("_buffer_names", {}).pop(tensor_name, None)
    if not isinstance(d.get("parametrizations"), ModuleDict):
        d["parametrizations"] = ModuleDict()
    module.parametrizations[tensor_name] = plist
    _inject_class(module)
    _inject_property(module, tensor_name)
    return module


def remove_parametrizations(
    module: Module, tensor_name: str, leave_parametrized: bool = True
) -> Module:
    """Undoes :func:`register_parametrization` on ``tensor_name``: it becomes a plain
    parameter (or buffer) again holding the current parametrized value
    (``leave_parametrized=True``) or the original. Returns ``module``."""
    op = "remove_parametrizations"
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"{op}: {type(module).__name__} has no parametrization on {tensor_name!r}")
    plist = module.parametrizations[tensor_name]
    as_buffer = plist._as_buffer
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                t = getattr(module, tensor_name)
            if t.dtype == original.dtype:
                _store(original, t)
            else:
                grad = bool(getattr(original, "requires_grad", False))
                original = t.detach() if as_buffer else Parameter(t.detach(), grad)
    else:
        if not leave_parametrized:
            raise ValueError(
                f"{op}: {tensor_name!r} is computed from several tensors, so it cannot be "
                "restored with leave_parametrized=False (there is no single original)"
            )
        with no_grad():
            t = getattr(module, tensor_name).detach().copy()
        grad = bool(plist.original0.requires_grad)
        original = t if as_buffer else Parameter(t, grad)
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    _cache.clear()
    _register(module, tensor_name, original, as_buffer)
    if not is_parametrized(module):
        del module.__dict__["parametrizations"]
        module.__class__ = type_before_parametrizations(module)
    return module


def transfer_parametrizations_and_params(
    from_module: Module, to_module: Module, tensor_name: str | None = None
) -> Module:
    """Registers ``from_module``'s parametrizations (of ``tensor_name``, or of every
    parametrized tensor) on ``to_module`` and makes it train the same tensors: its
    ``original`` (``original0``, ...) become ``from_module``'s, shared, as are the
    parametrization modules. A tensor ``to_module`` lacks is first added as a Parameter
    holding ``from_module``'s current value. Returns ``to_module``."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if not is_parametrized(from_module, name):
            raise ValueError(
                "transfer_parametrizations_and_params: "
                f"{type_before_parametrizations(from_module).__name__} has no parametrization "
                f"on {name!r}"
            )
        src = from_module.parametrizations[name]
        if not hasattr(to_module, name):
            with no_grad():
                value = getattr(from_module, name).detach().copy()
            setattr(to_module, name, Parameter(value))
        for p in src:
            register_parametrization(to_module, name, p)
        dst = to_module.parametrizations[name]
        keys = ["original"] if src.is_tensor else [f"original{i}" for i in range(src.ntensors)]
        for k in keys:
            setattr(dst, k, getattr(src, k))
    _cache.clear()
    return to_module
