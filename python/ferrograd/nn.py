"""Layers: a small module system over ferrograd tensors."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from ._core import Tensor
from ._core import avg_pool2d as _avg_pool2d
from ._core import conv2d as _conv2d
from ._core import max_pool2d as _max_pool2d


class Parameter(Tensor):
    """A tensor that a :class:`Module` reports from :meth:`Module.parameters`."""


class Module:
    """Base class: subclasses set Parameters and sub-Modules as attributes and define
    ``forward``."""

    training: bool = True

    def forward(self, *args: Any) -> Any:
        raise NotImplementedError

    def __call__(self, *args: Any) -> Any:
        return self.forward(*args)

    def children(self) -> Iterator[Module]:
        for value in vars(self).values():
            if isinstance(value, Module):
                yield value
            elif isinstance(value, (list, tuple)):
                yield from (v for v in value if isinstance(v, Module))

    def parameters(self) -> list[Parameter]:
        """Every Parameter of this module and its children, each once, in definition order."""
        seen: list[Parameter] = []
        ids = set()

        def visit(m: Module) -> None:
            for value in vars(m).values():
                items = value if isinstance(value, (list, tuple)) else [value]
                for v in items:
                    if isinstance(v, Parameter) and id(v) not in ids:
                        ids.add(id(v))
                        seen.append(v)
                    elif isinstance(v, Module):
                        visit(v)

        visit(self)
        return seen

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    def to(self, device: str) -> Module:
        """Puts every Parameter of this module and its children on ``device`` and returns
        self. Parameters that move are new objects (one per shared Parameter): attach them to
        GradManagers and optimizers after moving the model, as with PyTorch."""
        _move_parameters(self, device, {})
        return self

    def train(self, mode: bool = True) -> Module:
        self.training = mode
        for c in self.children():
            c.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)


def _move_parameters(m: Module, device: str, moved: dict) -> None:
    device = "cuda:0" if str(device) == "cuda" else str(device)

    def move(v: Any) -> Any:
        if isinstance(v, Parameter):
            if v.device == device:
                return v
            if id(v) not in moved:
                moved[id(v)] = Parameter(v.numpy(), dtype=v.dtype, device=device)
            return moved[id(v)]
        if isinstance(v, Module):
            _move_parameters(v, device, moved)
        return v

    for name, value in list(vars(m).items()):
        if isinstance(value, (list, tuple)):
            setattr(m, name, type(value)(move(v) for v in value))
        else:
            setattr(m, name, move(value))


def _uniform(rng: np.random.Generator, bound: float, shape: tuple, dtype: str) -> Parameter:
    return Parameter(rng.uniform(-bound, bound, shape).astype(dtype))


def _count(module: str, name: str, value: object, minimum: int) -> int:
    """A size argument of a layer: an int of at least ``minimum`` (bools are not sizes)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{module}: {name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        kind = "positive" if minimum > 0 else "non-negative"
        raise ValueError(f"{module}: {name} must be {kind}, got {value}")
    return int(value)


def _bound(fan_in: int) -> float:
    """PyTorch's default initialisation bound ``1 / sqrt(fan_in)`` (0 for no inputs)."""
    return 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0


class Linear(Module):
    """``y = x @ weight + bias`` with ``weight`` of shape ``(in_features, out_features)``."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        dtype: str = "float32",
        rng: np.random.Generator | None = None,
    ) -> None:
        in_features = _count("Linear", "in_features", in_features, 0)
        out_features = _count("Linear", "out_features", out_features, 0)
        rng = rng if rng is not None else np.random.default_rng()
        bound = _bound(in_features)
        self.weight = _uniform(rng, bound, (in_features, out_features), dtype)
        self.bias = _uniform(rng, bound, (out_features,), dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        y = x @ self.weight
        return y + self.bias if self.bias is not None else y


class Conv2d(Module):
    """2-D convolution over NCHW input, PyTorch's layout and initialisation bounds."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple,
        stride: int | tuple = 1,
        padding: int | tuple = 0,
        dilation: int | tuple = 1,
        groups: int = 1,
        bias: bool = True,
        dtype: str = "float32",
        rng: np.random.Generator | None = None,
    ) -> None:
        in_channels = _count("Conv2d", "in_channels", in_channels, 1)
        out_channels = _count("Conv2d", "out_channels", out_channels, 1)
        groups = _count("Conv2d", "groups", groups, 1)
        if in_channels % groups or out_channels % groups:
            raise ValueError(
                f"Conv2d: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                f"divisible by groups ({groups})"
            )
        rng = rng if rng is not None else np.random.default_rng()
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
        kh = _count("Conv2d", "kernel_size", kh, 1)
        kw = _count("Conv2d", "kernel_size", kw, 1)
        fan_in = in_channels // groups * kh * kw
        bound = _bound(fan_in)
        self.weight = _uniform(rng, bound, (out_channels, in_channels // groups, kh, kw), dtype)
        self.bias = _uniform(rng, bound, (out_channels,), dtype) if bias else None
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups

    def forward(self, x: Tensor) -> Tensor:
        return _conv2d(
            x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )


class MaxPool2d(Module):
    def __init__(
        self,
        kernel_size: int | tuple,
        stride: int | tuple | None = None,
        padding: int | tuple = 0,
        dilation: int | tuple = 1,
        ceil_mode: bool = False,
    ) -> None:
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.ceil_mode = dilation, ceil_mode

    def forward(self, x: Tensor) -> Tensor:
        return _max_pool2d(
            x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode
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
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, x: Tensor) -> Tensor:
        return _avg_pool2d(
            x,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )


class Flatten(Module):
    """Flattens every axis after the first."""

    def forward(self, x: Tensor) -> Tensor:
        return x.reshape(x.shape[0], -1)


class ReLU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.relu()


class Tanh(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class Sigmoid(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.sigmoid()


class Sequential(Module):
    """Applies its layers in order."""

    def __init__(self, *layers: Module) -> None:
        self.layers = list(layers)

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, i: int) -> Module:
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Iterator[Module]:
        return iter(self.layers)


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
    "AvgPool2d",
    "Conv2d",
    "Flatten",
    "Linear",
    "MaxPool2d",
    "Module",
    "Parameter",
    "ReLU",
    "Sequential",
    "Sigmoid",
    "Tanh",
    "mlp",
]
