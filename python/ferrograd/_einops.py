"""An einops backend for ferrograd tensors, so ``einops.rearrange``, ``repeat``, ``reduce``
and ``einsum`` take them (as they take PyTorch's). Registered at import when einops is
installed; einops finds backends among the subclasses of its ``AbstractBackend``."""

from __future__ import annotations

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
            raise NotImplementedError(
                "einops layers for ferrograd: use einops' functions inside a Module"
            )

        def einsum(self, pattern: str, *x: Any) -> Any:
            return self.fg.einsum(pattern, *x)

    FerrogradBackend.__qualname__ = "FerrogradBackend"
    # (einops lists backends by AbstractBackend.__subclasses__(), which holds them weakly)
    _registered.append(FerrogradBackend)


_registered: list = []
