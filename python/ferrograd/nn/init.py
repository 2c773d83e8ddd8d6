"""PyTorch's ``torch.nn.init``: in-place initialisations of a tensor (unrecorded), drawn
from the seeded stream of its device (``fg.manual_seed``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._core import Tensor
from .._tensor import tensor

__all__ = [
    "calculate_gain",
    "constant_",
    "dirac_",
    "eye_",
    "kaiming_normal_",
    "kaiming_uniform_",
    "normal_",
    "ones_",
    "orthogonal_",
    "trunc_normal_",
    "uniform_",
    "xavier_normal_",
    "xavier_uniform_",
    "zeros_",
]


def _write(t: Tensor, values: np.ndarray) -> Tensor:
    from ..autodiff import no_grad

    if not isinstance(t, Tensor):
        raise TypeError(f"nn.init: expected a Tensor, got {type(t).__name__}")
    src = tensor(np.asarray(values, dtype=np.float64).reshape(t.shape), device=t.device)
    with no_grad():
        t.copy_(src.astype(t.dtype))
    return t


def _rng(t: Tensor, generator: Any = None) -> np.random.Generator:
    from ..random import _rng_for

    return _rng_for("nn.init", generator, t.device)


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for ``nonlinearity`` (PyTorch's table)."""
    linear = (
        "linear",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "sigmoid",
    )
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _fans(t: Tensor) -> tuple[int, int]:
    if t.ndim < 2:
        raise ValueError(
            f"nn.init: fan in and fan out need a tensor with at least 2 axes, got shape "
            f"{list(t.shape)}"
        )
    receptive = int(np.prod(t.shape[2:])) if t.ndim > 2 else 1
    return t.shape[1] * receptive, t.shape[0] * receptive


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Tensor:
    return _write(tensor, _rng(tensor, generator).uniform(a, b, tensor.shape))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Tensor:
    return _write(tensor, _rng(tensor, generator).normal(mean, std, tensor.shape))


def constant_(tensor: Tensor, val: float) -> Tensor:
    return _write(tensor, np.full(tensor.shape, float(val)))


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def eye_(tensor: Tensor) -> Tensor:
    if tensor.ndim != 2:
        raise ValueError(f"eye_: expected a 2-D tensor, got shape {list(tensor.shape)}")
    return _write(tensor, np.eye(*tensor.shape))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    if tensor.ndim not in (3, 4, 5):
        raise ValueError(f"dirac_: expected a 3-, 4- or 5-D tensor, got {list(tensor.shape)}")
    out = np.zeros(tensor.shape)
    per = tensor.shape[0] // groups
    mid = tuple(s // 2 for s in tensor.shape[2:])
    for g in range(groups):
        for d in range(min(per, tensor.shape[1])):
            out[(g * per + d, d, *mid)] = 1.0
    return _write(tensor, out)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    fan_in, fan_out = _fans(tensor)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def _kaiming_std(t: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    fan_in, fan_out = _fans(t)
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"kaiming: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan = fan_in if mode == "fan_in" else fan_out
    gain = calculate_gain(nonlinearity, a)
    return gain / math.sqrt(fan) if fan > 0 else 0.0


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Any = None,
) -> Tensor:
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Any = None,
) -> Tensor:
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: Any = None,
) -> Tensor:
    """Normal samples redrawn until they fall in ``[a, b]``."""
    if a >= b:
        raise ValueError(f"trunc_normal_: a ({a}) must be less than b ({b})")
    g = _rng(tensor, generator)
    n = int(np.prod(tensor.shape))
    out = np.empty(0)
    while out.size < n:
        z = g.normal(mean, std, max(2 * (n - out.size), 16))
        out = np.concatenate([out, z[(z >= a) & (z <= b)]])
    return _write(tensor, out[:n])


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """A (semi-)orthogonal matrix of the tensor's first axis by the rest, times ``gain``."""
    if tensor.ndim < 2:
        raise ValueError(f"orthogonal_: needs at least 2 axes, got shape {list(tensor.shape)}")
    rows = tensor.shape[0]
    cols = int(np.prod(tensor.shape[1:]))
    flat = _rng(tensor, generator).normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _write(tensor, gain * q)


# PyTorch's deprecated spellings without the trailing underscore
constant = constant_
normal = normal_
uniform = uniform_
xavier_normal = xavier_normal_
xavier_uniform = xavier_uniform_
kaiming_normal = kaiming_normal_
kaiming_uniform = kaiming_uniform_
orthogonal = orthogonal_
dirac = dirac_
eye = eye_
