"""An einops backend for ferrograd tensors, so ``einops.rearrange``, ``repeat``, ``reduce``
and ``einsum`` take them (as they take PyTorch's). Registered at import when einops is
installed; einops finds backends among the subclasses of its ``AbstractBackend``.

einops' layers too: ``Rearrange``, ``Reduce`` and ``EinMix`` as ferrograd Modules, importable
as ``einops.layers.ferrograd`` (what ``einops.layers.torch`` becomes in a renamed port).
The layers of ``einops.layers.torch`` given to a ferrograd Module (``nn.Sequential(
Rearrange(...), ...)``, ``add_module``, an attribute) are replaced there by these
(:func:`adopt_torch_layer`), so a port that keeps that import works as it is."""

from __future__ import annotations

import sys
from typing import Any


def register() -> None:
    try:
        from einops._backends import AbstractBackend
    except ImportError:  # einops absent, or a version without this module
        return

    class FerrogradBackend(AbstractBackend):  # type: ignore[misc, valid-type]
        framework_name = "ferrograd"

        def __init__(self) -> None:
            import ferrograd

            self.fg = ferrograd

        def is_appropriate_type(self, tensor: Any) -> bool:
            return isinstance(tensor, self.fg.Tensor)

        def from_numpy(self, x: Any) -> Any:
            t = self.fg.tensor(x)
            if self.is_float_type(t):
                t.requires_grad_(True)
            return t

        def to_numpy(self, x: Any) -> Any:
            return x.detach().cpu().numpy()

        def arange(self, start: int, stop: int) -> Any:
            return self.fg.arange(start, stop, dtype="int64")

        def shape(self, x: Any) -> tuple:
            return tuple(x.shape)

        def reshape(self, x: Any, shape: Any) -> Any:
            return x.reshape(*shape)

        def reduce(self, x: Any, operation: str, reduced_axes: Any) -> Any:
            axes = list(reduced_axes)
            if not axes:  # nothing to reduce (an empty dim list would reduce everything)
                return x
            if operation == "min":
                return x.amin(dim=axes)
            if operation == "max":
                return x.amax(dim=axes)
            if operation == "sum":
                return x.sum(dim=axes)
            if operation == "mean":
                return x.mean(dim=axes)
            if operation in ("any", "all", "prod"):
                for i in sorted(axes)[::-1]:
                    x = getattr(x, operation)(dim=i)
                return x
            raise NotImplementedError(f"einops reduce: unknown reduction {operation!r}")

        def transpose(self, x: Any, axes: Any) -> Any:
            return x.permute(*axes)

        def stack_on_zeroth_dimension(self, tensors: list) -> Any:
            return self.fg.stack(tensors)

        def add_axes(self, x: Any, n_axes: int, pos2len: dict) -> Any:
            repeats = [-1] * n_axes
            for position, length in pos2len.items():
                x = x.unsqueeze(position)
                repeats[position] = length
            return x.expand(*repeats)

        def tile(self, x: Any, repeats: Any) -> Any:
            return x.repeat(*repeats)

        def concat(self, tensors: list, axis: int) -> Any:
            return self.fg.cat(tensors, dim=axis)

        def add_axis(self, x: Any, new_position: int) -> Any:
            return x.unsqueeze(new_position)

        def is_float_type(self, x: Any) -> bool:
            return x.dtype.kind == "f"

        def layers(self) -> Any:
            return _layers()

        def einsum(self, pattern: str, *x: Any) -> Any:
            return self.fg.einsum(pattern, *x)

    FerrogradBackend.__qualname__ = "FerrogradBackend"
    # (einops lists backends by AbstractBackend.__subclasses__(), which holds them weakly)
    _registered.append(FerrogradBackend)
    try:
        _layers()  # `import einops.layers.ferrograd`
    except ImportError:  # an einops without layers
        pass


_registered: list = []


def _layers() -> Any:
    """The module ``einops.layers.ferrograd`` (made and registered on first use)."""
    name = "einops.layers.ferrograd"
    mod = sys.modules.get(name)
    if mod is not None:
        return mod
    import types

    import einops.layers
    from einops.layers import RearrangeMixin, ReduceMixin
    from einops.layers._einmix import _EinmixMixin

    import ferrograd as fg

    class Rearrange(RearrangeMixin, fg.nn.Module):  # type: ignore[misc, valid-type]
        """einops' ``Rearrange(pattern, **axes_lengths)`` layer: ``einops.rearrange``."""

        def forward(self, input: Any) -> Any:
            return self._apply_recipe(input)

    class Reduce(ReduceMixin, fg.nn.Module):  # type: ignore[misc, valid-type]
        """einops' ``Reduce(pattern, reduction, **axes_lengths)`` layer: ``einops.reduce``."""

        def forward(self, input: Any) -> Any:
            return self._apply_recipe(input)

    class EinMix(_EinmixMixin, fg.nn.Module):  # type: ignore[misc, valid-type]
        """einops' ``EinMix(pattern, weight_shape, bias_shape=None, **axes_lengths)``: a
        linear layer written as an einsum pattern (weights uniform in ±1/sqrt(fan-in), as
        einops' torch layer)."""

        def _create_parameters(
            self, weight_shape: Any, weight_bound: float, bias_shape: Any, bias_bound: float
        ) -> None:
            self.weight = fg.nn.Parameter(
                fg.zeros(weight_shape).uniform_(-weight_bound, weight_bound)
            )
            if bias_shape is not None:
                self.bias = fg.nn.Parameter(fg.zeros(bias_shape).uniform_(-bias_bound, bias_bound))
            else:
                self.bias = None

        def _create_rearrange_layers(
            self,
            pre_reshape_pattern: str | None,
            pre_reshape_lengths: dict | None,
            post_reshape_pattern: str | None,
            post_reshape_lengths: dict | None,
        ) -> None:
            self.pre_rearrange = None
            if pre_reshape_pattern is not None:
                self.pre_rearrange = Rearrange(pre_reshape_pattern, **(pre_reshape_lengths or {}))
            self.post_rearrange = None
            if post_reshape_pattern is not None:
                self.post_rearrange = Rearrange(
                    post_reshape_pattern, **(post_reshape_lengths or {})
                )

        def forward(self, input: Any) -> Any:
            if self.pre_rearrange is not None:
                input = self.pre_rearrange(input)
            result = fg.einsum(self.einsum_pattern, input, self.weight)
            if self.bias is not None:
                result = result + self.bias
            if self.post_rearrange is not None:
                result = self.post_rearrange(result)
            return result

    mod = types.ModuleType(name, "einops' layers (Rearrange, Reduce, EinMix) for ferrograd.")
    for cls in (Rearrange, Reduce, EinMix):
        cls.__module__ = name
        cls.__qualname__ = cls.__name__
        setattr(mod, cls.__name__, cls)
    mod.__all__ = ["EinMix", "Rearrange", "Reduce"]  # type: ignore[attr-defined]
    sys.modules[name] = mod
    einops.layers.ferrograd = mod  # type: ignore[attr-defined]
    return mod


def adopt_torch_layer(layer: Any) -> Any:
    """The ferrograd equivalent of a layer of ``einops.layers.torch`` (an ``EinMix``'s
    weights copied), or None for any other object."""
    if not any(c.__module__ == "einops.layers.torch" for c in type(layer).__mro__):
        return None
    from einops.layers import RearrangeMixin, ReduceMixin
    from einops.layers._einmix import _EinmixMixin

    layers = _layers()
    if isinstance(layer, ReduceMixin):
        out = layers.Reduce(layer.pattern, layer.reduction, **layer.axes_lengths)
    elif isinstance(layer, RearrangeMixin):
        out = layers.Rearrange(layer.pattern, **layer.axes_lengths)
    elif isinstance(layer, _EinmixMixin):
        import ferrograd as fg

        out = layers.EinMix(
            layer.pattern, layer.weight_shape, layer.bias_shape, **layer.axes_lengths
        )
        out.weight = fg.nn.Parameter(fg.tensor(layer.weight.detach().cpu().numpy()))
        if layer.bias is not None:
            out.bias = fg.nn.Parameter(fg.tensor(layer.bias.detach().cpu().numpy()))
    else:
        return None
    out.train(bool(getattr(layer, "training", True)))
    return out
