"""PyTorch's ``torch.nn.init``: in-place initialisations of a tensor (unrecorded), drawn
from the seeded stream of its device (``fg.manual_seed``)."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from .._core import Tensor
from .._tensor import tensor
from ._errors import require_float_fill

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
    "sparse_",
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


def _rng(t: Tensor, generator: Any = None, op: str = "nn.init") -> np.random.Generator:
    from ..random import _rng_for

    require_float_fill(op, t)
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
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float, np.integer, np.floating)) and not isinstance(
            param, (bool, np.bool_)
        ):
            slope = float(param)
        else:
            raise ValueError(f"calculate_gain: negative_slope {param} not a valid number")
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


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """PyTorch's private helper: ``(fan_in, fan_out)`` of a weight of shape ``(out, in,
    *kernel)``: ``in * prod(kernel)`` and ``out * prod(kernel)``."""
    if tensor.ndim < 2:
        raise ValueError(
            "_calculate_fan_in_and_fan_out: fan in and fan out can not be computed for tensor "
            f"with fewer than 2 dimensions, got shape {list(tensor.shape)}"
        )
    return _fans(tensor)


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    """PyTorch's private helper: the fan in (``mode="fan_in"``) or fan out
    (``"fan_out"``, any case) of ``tensor``."""
    mode = mode.lower() if isinstance(mode, str) else mode
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(
            f"_calculate_correct_fan: mode {mode!r} not supported, please use one of {valid_modes}"
        )
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _no_grad_trunc_normal_(
    tensor: Tensor, mean: float, std: float, a: float, b: float, generator: Any = None
) -> Tensor:
    """PyTorch's private helper behind :func:`trunc_normal_` (older timm code calls it):
    fills ``tensor`` in place, unrecorded, with normal samples within ``[a, b]``."""
    return trunc_normal_(tensor, mean, std, a, b, generator)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Tensor:
    return _write(tensor, _rng(tensor, generator, "uniform_").uniform(a, b, tensor.shape))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Tensor:
    return _write(tensor, _rng(tensor, generator, "normal_").normal(mean, std, tensor.shape))


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
    require_float_fill("xavier_uniform_", tensor)
    fan_in, fan_out = _fans(tensor)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    require_float_fill("xavier_normal_", tensor)
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
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", UserWarning, stacklevel=2)
        return tensor
    require_float_fill("kaiming_uniform_", tensor)
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Any = None,
) -> Tensor:
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", UserWarning, stacklevel=2)
        return tensor
    require_float_fill("kaiming_normal_", tensor)
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
    g = _rng(tensor, generator, "trunc_normal_")
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
    flat = _rng(tensor, generator, "orthogonal_").normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _write(tensor, gain * q)


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator: Any = None) -> Tensor:
    """A 2-D tensor drawn from N(0, std^2) with ``ceil(sparsity * rows)`` entries of each
    column (picked at random) set to zero, as PyTorch's."""
    if tensor.ndim != 2:
        raise ValueError("sparse_: Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = math.ceil(sparsity * rows)
    g = _rng(tensor, generator, "sparse_")
    values = g.normal(0.0, std, (rows, cols))
    for c in range(cols):
        values[g.permutation(rows)[:num_zeros], c] = 0.0
    return _write(tensor, values)


def _deprecated(meth: Any) -> Any:
    """PyTorch's deprecated spelling of ``meth`` without the trailing underscore: warns
    (``FutureWarning``) and calls it."""
    new_name = meth.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args: Any, **kwargs: Any) -> Any:
        warnings.warn(
            f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{new_name}`.",
            FutureWarning,
            stacklevel=2,
        )
        return meth(*args, **kwargs)

    deprecated_init.__name__ = deprecated_init.__qualname__ = old_name
    deprecated_init.__doc__ = f"Deprecated: use :func:`{new_name}`."
    return deprecated_init


# PyTorch's deprecated spellings without the trailing underscore
constant = _deprecated(constant_)
normal = _deprecated(normal_)
uniform = _deprecated(uniform_)
xavier_normal = _deprecated(xavier_normal_)
xavier_uniform = _deprecated(xavier_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)
dirac = _deprecated(dirac_)
eye = _deprecated(eye_)
