"""PyTorch's ``torch.nn.utils.prune``: masking a module's parameter (or buffer) in place.

Pruning ``module.<name>`` moves the original tensor to the parameter ``<name>_orig``, keeps
a 0/1 mask in the buffer ``<name>_mask`` and makes ``module.<name>`` the plain tensor
``<name>_orig * <name>_mask``, recomputed by a forward pre-hook before every call so
gradients reach ``<name>_orig`` through the mask. Pruning the same tensor again combines the
masks (a :class:`PruningContainer` prunes only what the earlier masks kept); :func:`remove`
writes the masked values into the original parameter (same object, so optimizers that hold
it stay valid) and drops the mask and the hook."""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import Any

from ... import _core, _ops
from ..._core import Tensor
from ...autodiff import no_grad
from .._errors import ShapeAssertionError
from .convert_parameters import parameters_to_vector


def _topk(t: Tensor, k: int, largest: bool) -> Tensor:
    """The indices of the ``k`` largest (smallest) entries of the 1-d ``t``."""
    from ..._torch_compat import topk

    return topk(t, k, largest=largest)[1]


__all__ = [
    "BasePruningMethod",
    "CustomFromMask",
    "Identity",
    "L1Unstructured",
    "LnStructured",
    "PruningContainer",
    "RandomStructured",
    "RandomUnstructured",
    "custom_from_mask",
    "global_unstructured",
    "identity",
    "is_pruned",
    "l1_unstructured",
    "ln_structured",
    "random_structured",
    "random_unstructured",
    "remove",
]


def _pruning_hooks(module: Any) -> dict:
    """The module's forward pre-hooks, keyed as its hook handles are."""
    return module.__dict__.get("_forward_pre_hooks") or {}


class BasePruningMethod(ABC):
    """A way of choosing which entries of a tensor to zero. Subclasses define
    :meth:`compute_mask` and ``PRUNING_TYPE`` (``"unstructured"``, ``"structured"`` with a
    ``dim`` attribute, or ``"global"``); an instance is the forward pre-hook that keeps
    ``module.<_tensor_name>`` equal to ``<name>_orig * <name>_mask``."""

    _tensor_name: str | None = None
    PRUNING_TYPE: str = "unstructured"

    def __call__(self, module: Any, inputs: Any) -> None:
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The mask for ``t``: ``default_mask`` (what earlier pruning kept) with this
        method's choices zeroed too."""

    def apply_mask(self, module: Any) -> Tensor:
        """``<name>_orig * <name>_mask`` for the tensor this method prunes (differentiable
        in ``<name>_orig``)."""
        if self._tensor_name is None:
            raise ValueError(
                f"{type(self).__name__}.apply_mask: the method has not been applied to a "
                "module (its _tensor_name is None)"
            )
        orig = getattr(module, self._tensor_name + "_orig")
        mask = getattr(module, self._tensor_name + "_mask")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(
        cls, module: Any, name: str, *args: Any, importance_scores: Any = None, **kwargs: Any
    ) -> BasePruningMethod:
        """Prunes ``module.<name>`` with ``cls(*args, **kwargs)``, choosing by
        ``importance_scores`` (same shape; the tensor itself when None). On an already
        pruned tensor the new method joins the old in a :class:`PruningContainer` and
        prunes only the entries the old mask kept. If computing the mask fails, the module
        is left as it was. Returns the hook now installed for ``name``."""
        old_key, old_method = None, None
        for key, hook in _pruning_hooks(module).items():
            if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
                if old_method is not None:
                    raise RuntimeError(
                        f"{cls.__name__}.apply: module has more than one pruning hook for {name!r}"
                    )
                old_key, old_method = key, hook
        orig = getattr(module, name)
        if importance_scores is not None:
            if tuple(importance_scores.shape) != tuple(orig.shape):
                raise ShapeAssertionError(
                    f"{cls.__name__}.apply: importance_scores should have the same shape as "
                    f"parameter {name!r} ({tuple(orig.shape)}), got "
                    f"{tuple(importance_scores.shape)}"
                )
        else:
            importance_scores = orig

        method = cls(*args, **kwargs)
        method._tensor_name = name
        if old_method is not None:
            # a new container, so the installed one is unchanged if this pruning fails
            earlier = (
                old_method._pruning_methods
                if isinstance(old_method, PruningContainer)
                else (old_method,)
            )
            container = PruningContainer()
            container._tensor_name = name
            for m in (*earlier, method):
                container.add_pruning_method(m)
            method = container

        first = old_method is None
        if first:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = _core.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()

        try:
            with no_grad():
                mask = method.compute_mask(importance_scores.detach(), default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            if old_key is not None:
                del module.__dict__["_forward_pre_hooks"][old_key]
            module.register_forward_pre_hook(method)
        except Exception:
            if first:
                orig = module._parameters[name + "_orig"]
                if name in module.__dict__:
                    delattr(module, name)
                module.register_parameter(name, orig)
                del module._parameters[name + "_orig"]
            raise
        return method

    def prune(
        self, t: Tensor, default_mask: Tensor | None = None, importance_scores: Any = None
    ) -> Tensor:
        """``t`` times the mask this method computes (from ``importance_scores`` when
        given, else from ``t``), starting from ``default_mask`` (all ones when None)."""
        if importance_scores is not None:
            if tuple(importance_scores.shape) != tuple(t.shape):
                raise ShapeAssertionError(
                    f"{type(self).__name__}.prune: importance_scores should have the same "
                    f"shape as t ({tuple(t.shape)}), got {tuple(importance_scores.shape)}"
                )
        else:
            importance_scores = t
        if default_mask is None:
            default_mask = _core.ones_like(t)
        return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module: Any) -> None:
        """Makes the pruning of ``module.<name>`` final: the masked values are written into
        ``<name>_orig``, which becomes ``module.<name>`` again; the mask is dropped."""
        name = self._tensor_name
        if name is None:
            raise ValueError(
                f"{type(self).__name__}.remove: the method has not been applied to a module"
            )
        weight = self.apply_mask(module)
        if name in module.__dict__:
            delattr(module, name)
        orig = module._parameters[name + "_orig"]
        with no_grad():
            orig.data = weight.detach()
        del module._parameters[name + "_orig"]
        del module._buffers[name + "_mask"]
        setattr(module, name, orig)


class PruningContainer(BasePruningMethod):
    """The methods applied, in order, to one tensor pruned more than once; its mask is
    the last method's applied to what the earlier masks kept."""

    def __init__(self, *args: BasePruningMethod) -> None:
        self._pruning_methods: tuple[BasePruningMethod, ...] = ()
        if len(args) == 1:
            self._tensor_name = args[0]._tensor_name
        for method in args:
            self.add_pruning_method(method)

    def add_pruning_method(self, method: BasePruningMethod) -> None:
        """Appends ``method``; it must prune the same tensor as the container."""
        if method is None:
            return
        if not isinstance(method, BasePruningMethod):
            raise TypeError(
                f"PruningContainer.add_pruning_method: {type(method).__name__} is not a "
                "BasePruningMethod subclass"
            )
        if self._tensor_name != method._tensor_name:
            raise ValueError(
                "PruningContainer.add_pruning_method: can only add methods pruning "
                f"{self._tensor_name!r}, got one pruning {method._tensor_name!r}"
            )
        self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self) -> Iterator[BasePruningMethod]:
        return iter(self._pruning_methods)

    def __getitem__(self, idx: int) -> BasePruningMethod:
        return self._pruning_methods[idx]

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The last method's mask computed on the part of ``t`` that ``default_mask``
        keeps (kept entries for unstructured methods, kept slices along ``dim`` for
        structured ones, everything for global ones), zero elsewhere; float as ``t``."""
        method = self._pruning_methods[-1]
        new_mask = default_mask.to(dtype=t.dtype).clone()
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            keep = default_mask == 1
            partial = method.compute_mask(t[keep], default_mask=default_mask[keep])
            new_mask[keep] = partial.to(dtype=new_mask.dtype)
            return new_mask
        if kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError(
                    f"{type(method).__name__}: a structured pruning method needs a 'dim'"
                )
            nd = t.dim()
            dim = method.dim + nd if method.dim < 0 else method.dim
            if not 0 <= dim < nd:
                raise IndexError(
                    f"{type(method).__name__}: dim {method.dim} is out of range for a {nd}-d tensor"
                )
            others = [d for d in range(nd) if d != dim]
            kept = default_mask.sum(dim=others) != 0 if others else default_mask != 0
            slc: list[Any] = [slice(None)] * nd
            slc[dim] = kept
            idx = tuple(slc)
            partial = method.compute_mask(t[idx], default_mask=default_mask[idx])
            new_mask[idx] = partial.to(dtype=new_mask.dtype)
            return new_mask
        if kind == "global":
            partial = method.compute_mask(t, default_mask=default_mask)
            return partial.to(dtype=new_mask.dtype)
        raise ValueError(f"Unrecognized PRUNING_TYPE {kind!r} of {type(method).__name__}")


class Identity(BasePruningMethod):
    """Prunes nothing: the mask is all ones (a pruning reparametrization to build on)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return default_mask

    @classmethod
    def apply(cls, module: Any, name: str) -> Identity:  # type: ignore[override]
        """Adds the pruning reparametrization to ``module.<name>`` with an all-ones mask."""
        return super().apply(module, name)


def _validate_pruning_amount_init(amount: Any) -> None:
    """``amount`` is a count (int >= 0) or a fraction (float in [0, 1])."""
    if isinstance(amount, bool) or not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount!r}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
        not isinstance(amount, numbers.Integral) and not 0.0 <= float(amount) <= 1.0
    ):
        raise ValueError(
            f"amount={amount} should either be a float in the range [0, 1] or a "
            "non-negative integer"
        )


def _validate_pruning_amount(amount: Any, tensor_size: int) -> None:
    """A count of units to prune may not exceed the units there are."""
    if isinstance(amount, numbers.Integral) and amount > tensor_size:
        raise ValueError(
            f"amount={amount} should be smaller than the number of parameters to prune "
            f"={tensor_size}"
        )


def _validate_structured_pruning(t: Tensor) -> None:
    if t.dim() <= 1:
        raise ValueError(
            "Structured pruning can only be applied to multidimensional tensors. Found "
            f"tensor of shape {tuple(t.shape)} with {t.dim()} dims"
        )


def _validate_pruning_dim(t: Tensor, dim: int) -> None:
    if dim >= t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {tuple(t.shape)}")


def _compute_nparams_toprune(amount: Any, tensor_size: int) -> int:
    """The number of units ``amount`` means: itself for an int, else the rounded
    fraction of ``tensor_size``."""
    if isinstance(amount, numbers.Integral):
        return int(amount)
    return round(float(amount) * tensor_size)


class RandomUnstructured(BasePruningMethod):
    """Zeroes ``amount`` (count or fraction) of the kept entries, chosen uniformly at
    random."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount: float) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        size = t.numel()
        k = _compute_nparams_toprune(self.amount, size)
        _validate_pruning_amount(k, size)
        mask = default_mask.clone().contiguous()
        if k != 0:
            chosen = _ops.randperm(size, device=t.device)[:k]
            mask.view(-1)[chosen] = 0
        return mask

    @classmethod
    def apply(cls, module: Any, name: str, amount: float) -> RandomUnstructured:  # type: ignore[override]
        """Prunes ``amount`` random entries of ``module.<name>``."""
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Zeroes the ``amount`` (count or fraction) entries of smallest magnitude."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount: float) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        size = t.numel()
        k = _compute_nparams_toprune(self.amount, size)
        _validate_pruning_amount(k, size)
        mask = default_mask.clone().contiguous()
        if k != 0:
            smallest = _topk(t.abs().reshape(-1), k, largest=False)
            mask.view(-1)[smallest] = 0
        return mask

    @classmethod
    def apply(  # type: ignore[override]
        cls, module: Any, name: str, amount: float, importance_scores: Any = None
    ) -> L1Unstructured:
        """Prunes the ``amount`` smallest-magnitude entries of ``module.<name>`` (or of
        ``importance_scores``)."""
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Zeroes ``amount`` (count or fraction) whole slices along ``dim``, chosen at
    random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount: float, dim: int = -1) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        size = t.shape[self.dim]
        k = _compute_nparams_toprune(self.amount, size)
        _validate_pruning_amount(k, size)
        if k == 0:
            return default_mask
        keep = _ops.randperm(size, device=t.device)[: size - k]
        return _slices_mask(t, self.dim, keep) * default_mask.to(dtype=t.dtype)

    @classmethod
    def apply(cls, module: Any, name: str, amount: float, dim: int = -1) -> RandomStructured:  # type: ignore[override]
        """Prunes ``amount`` random slices of ``module.<name>`` along ``dim``."""
        return super().apply(module, name, amount=amount, dim=dim)


def _slices_mask(t: Tensor, dim: int, keep: Tensor) -> Tensor:
    """Ones in the slices ``keep`` of ``t`` along ``dim``, zeros elsewhere."""
    mask = _core.zeros_like(t)
    slc: list[Any] = [slice(None)] * t.dim()
    slc[dim] = keep
    mask[tuple(slc)] = 1
    return mask


class LnStructured(BasePruningMethod):
    """Zeroes the ``amount`` (count or fraction) slices along ``dim`` with the smallest
    ``n``-norm (``n`` as ``torch.norm``'s ``p``: a number, ``inf``, ``-inf``, ``"fro"``,
    ``"nuc"``)."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount: float, n: Any, dim: int = -1) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        size = t.shape[self.dim]
        k = _compute_nparams_toprune(self.amount, size)
        _validate_pruning_amount(k, size)
        if k == 0:
            return default_mask
        dim = self.dim % t.dim()
        others = [d for d in range(t.dim()) if d != dim]
        norms = _ops.norm(t, p=self.n, dim=others)
        keep = _topk(norms, size - k, largest=True)
        return _slices_mask(t, dim, keep) * default_mask.to(dtype=t.dtype)

    @classmethod
    def apply(  # type: ignore[override]
        cls,
        module: Any,
        name: str,
        amount: float,
        n: Any,
        dim: int,
        importance_scores: Any = None,
    ) -> LnStructured:
        """Prunes the ``amount`` slices of ``module.<name>`` along ``dim`` with the
        smallest ``n``-norm (of ``importance_scores`` when given)."""
        return super().apply(
            module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores
        )


class CustomFromMask(BasePruningMethod):
    """Prunes where a given mask is zero (combined with what earlier pruning zeroed)."""

    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor) -> None:
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise ShapeAssertionError(
                f"CustomFromMask: the mask's shape {tuple(self.mask.shape)} differs from "
                f"the tensor's {tuple(default_mask.shape)}"
            )
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module: Any, name: str, mask: Tensor) -> CustomFromMask:  # type: ignore[override]
        """Prunes ``module.<name>`` where ``mask`` is zero."""
        return super().apply(module, name, mask=mask)


def identity(module: Any, name: str) -> Any:
    """Adds the pruning reparametrization (``<name>_orig``, an all-ones ``<name>_mask``
    and the hook) to ``module.<name>`` without pruning anything; returns ``module``."""
    Identity.apply(module, name)
    return module


def random_unstructured(module: Any, name: str, amount: float) -> Any:
    """Prunes ``amount`` (count or fraction) random entries of ``module.<name>``; returns
    ``module``."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module: Any, name: str, amount: float, importance_scores: Any = None) -> Any:
    """Prunes the ``amount`` (count or fraction) entries of ``module.<name>`` of smallest
    magnitude (of ``importance_scores`` when given); returns ``module``."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module: Any, name: str, amount: float, dim: int) -> Any:
    """Prunes ``amount`` (count or fraction) random slices of ``module.<name>`` along
    ``dim``; returns ``module``."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(
    module: Any, name: str, amount: float, n: Any, dim: int, importance_scores: Any = None
) -> Any:
    """Prunes the ``amount`` (count or fraction) slices of ``module.<name>`` along ``dim``
    with the smallest ``n``-norm (of ``importance_scores`` when given); returns
    ``module``."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(
    parameters: Iterable[tuple[Any, str]],
    pruning_method: type[BasePruningMethod],
    importance_scores: dict | None = None,
    **kwargs: Any,
) -> None:
    """Prunes the ``(module, name)`` tensors together, as if they were one vector:
    ``pruning_method(**kwargs)`` (an unstructured method) chooses among all their kept
    entries (scored by ``importance_scores[(module, name)]`` where given), and each tensor
    gets its share as a :class:`CustomFromMask`."""
    if not isinstance(parameters, Iterable):
        raise TypeError(
            f"global_unstructured: parameters must be an iterable of (module, name), got "
            f"{type(parameters).__name__}"
        )
    parameters = list(parameters)
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError(
            "global_unstructured: importance_scores must be a dict mapping (module, name) "
            f"to a tensor, got {type(importance_scores).__name__}"
        )
    with no_grad():
        scores = parameters_to_vector(
            [
                importance_scores.get((module, name), getattr(module, name)).detach()
                for module, name in parameters
            ]
        )
        default_mask = parameters_to_vector(
            [
                getattr(module, name + "_mask", None)
                if hasattr(module, name + "_mask")
                else _core.ones_like(getattr(module, name))
                for module, name in parameters
            ]
        )
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(
            "global_unstructured: only unstructured pruning methods can prune globally, got "
            f"{pruning_method.__name__} (PRUNING_TYPE={method.PRUNING_TYPE!r})"
        )
    container.add_pruning_method(method)
    with no_grad():
        final_mask = container.compute_mask(scores, default_mask)
    start = 0
    for module, name in parameters:
        param = getattr(module, name)
        n = param.numel()
        custom_from_mask(module, name, mask=final_mask[start : start + n].view_as(param))
        start += n


def custom_from_mask(module: Any, name: str, mask: Tensor) -> Any:
    """Prunes ``module.<name>`` where ``mask`` is zero; returns ``module``."""
    CustomFromMask.apply(module, name, mask=mask)
    return module


def remove(module: Any, name: str) -> Any:
    """Makes the pruning of ``module.<name>`` permanent: the masked values go into the
    original parameter, which is ``module.<name>`` again, and ``<name>_orig``,
    ``<name>_mask`` and the hook are removed. Returns ``module``."""
    hooks = _pruning_hooks(module)
    for key, hook in list(hooks.items()):
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del hooks[key]
            return module
    raise ValueError(
        f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed"
    )


def is_pruned(module: Any) -> bool:
    """Whether ``module`` or any of its sub-modules has a pruning hook."""
    return any(
        isinstance(hook, BasePruningMethod)
        for _, sub in module.named_modules()
        for hook in _pruning_hooks(sub).values()
    )
