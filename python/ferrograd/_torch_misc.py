"""Smaller PyTorch functions programs use: window functions, ``poisson`` / ``binomial``
sampling, ``nextafter`` and ``Tensor.as_strided``."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from . import _core
from ._core import Tensor
from .autodiff import Function as _EngineFunction


def _window(name: str, n: int, periodic: bool, dtype: Any, device: Any, fn: Any) -> Tensor:
    from ._tensor import default_float, tensor

    if not isinstance(n, (int, np.integer)) or n < 0:
        raise _core.ShapeError(f"{name}: window_length must be a non-negative int, got {n!r}")
    if n == 0:
        w = np.zeros(0)
    elif n == 1:
        w = np.ones(1)
    else:
        m = n + 1 if periodic else n
        w = fn(np.arange(m, dtype=np.float64), m)[:n]
    return tensor(w, dtype=dtype or default_float(), device=device)


def hann_window(
    window_length: int, periodic: bool = True, *, dtype: Any = None, device: Any = None
) -> Tensor:
    """``0.5 - 0.5 cos(2 pi k / (N - 1))`` (``N + 1`` points, the last dropped, when
    ``periodic``), as PyTorch's."""
    return _window(
        "hann_window",
        window_length,
        periodic,
        dtype,
        device,
        lambda k, m: 0.5 - 0.5 * np.cos(2 * math.pi * k / (m - 1)),
    )


def hamming_window(
    window_length: int,
    periodic: bool = True,
    alpha: float = 0.54,
    beta: float = 0.46,
    *,
    dtype: Any = None,
    device: Any = None,
) -> Tensor:
    """``alpha - beta cos(2 pi k / (N - 1))``, as PyTorch's."""
    return _window(
        "hamming_window",
        window_length,
        periodic,
        dtype,
        device,
        lambda k, m: alpha - beta * np.cos(2 * math.pi * k / (m - 1)),
    )


def bartlett_window(
    window_length: int, periodic: bool = True, *, dtype: Any = None, device: Any = None
) -> Tensor:
    """The triangular window ``1 - |2 k / (N - 1) - 1|``, as PyTorch's."""
    return _window(
        "bartlett_window",
        window_length,
        periodic,
        dtype,
        device,
        lambda k, m: 1 - np.abs(2 * k / (m - 1) - 1),
    )


def blackman_window(
    window_length: int, periodic: bool = True, *, dtype: Any = None, device: Any = None
) -> Tensor:
    """``0.42 - 0.5 cos(2 pi k / (N - 1)) + 0.08 cos(4 pi k / (N - 1))``, as PyTorch's."""
    return _window(
        "blackman_window",
        window_length,
        periodic,
        dtype,
        device,
        lambda k, m: (
            0.42
            - 0.5 * np.cos(2 * math.pi * k / (m - 1))
            + 0.08 * np.cos(4 * math.pi * k / (m - 1))
        ),
    )


def kaiser_window(
    window_length: int,
    periodic: bool = True,
    beta: float = 12.0,
    *,
    dtype: Any = None,
    device: Any = None,
) -> Tensor:
    """``I0(beta sqrt(1 - (2 k / (N - 1) - 1)^2)) / I0(beta)`` (``N + 1`` points, the last
    dropped, when ``periodic``), as PyTorch's."""
    return _window(
        "kaiser_window",
        window_length,
        periodic,
        dtype,
        device,
        lambda k, m: (
            np.i0(beta * np.sqrt(np.clip(1 - (2 * k / (m - 1) - 1) ** 2, 0, None))) / np.i0(beta)
        ),
    )


def poisson(input: Tensor, generator: Any = None) -> Tensor:
    """A Poisson sample with each entry of ``input`` as its rate (no gradient)."""
    from ._tensor import tensor
    from .random import _rng_for

    rates = input.detach().numpy()
    if np.any(rates < 0) or np.any(np.isnan(rates)):
        raise _core.ShapeError("poisson: rates must be non-negative")
    draw = _rng_for("poisson", generator, input.device).poisson(rates)
    return tensor(draw.astype(rates.dtype), device=input.device)


def binomial(count: Tensor, prob: Tensor, generator: Any = None) -> Tensor:
    """A binomial sample of ``count`` trials with success probability ``prob`` per entry
    (broadcast; no gradient)."""
    from ._tensor import tensor
    from .random import _rng_for

    n = count.detach().numpy()
    p = prob.detach().numpy()
    if np.any((p < 0) | (p > 1)):
        raise ValueError("binomial: prob must lie in [0, 1]")
    if np.any(n < 0):
        raise ValueError("binomial: count must be non-negative")
    draw = _rng_for("binomial", generator, count.device).binomial(n.astype(np.int64), p)
    return tensor(draw.astype(np.result_type(n.dtype, p.dtype)), device=count.device)


def nextafter(input: Tensor, other: Tensor) -> Tensor:
    """The next representable value after ``input`` towards ``other``. Its gradient is
    PyTorch's: the output's gradient passes to ``input`` as it is where the two differ (a
    step of one unit in the last place is treated as the identity), zero where they are
    equal (the result is ``other`` there); ``other`` gets zero."""
    from ._tensor import tensor

    a, b = input.detach().numpy(), other.detach().numpy()
    b = b.astype(a.dtype)
    out = tensor(np.nextafter(a, b), device=input.device)
    ins = [t for t in (input, other) if isinstance(t, Tensor) and t.dtype.kind == "f"]
    if any(t.requires_grad or _core._tracking_level([t]) is not None for t in ins):
        fn = _NextafterFn()
        fn.value = out
        fn.moved = tensor(np.asarray(a != b, dtype=a.dtype), device=input.device)
        fn.firsts = [t is input for t in ins]
        return fn(*ins)
    return out


class _NextafterFn(_EngineFunction):
    value: Tensor
    moved: Tensor  # 1 where input differs from other (NaN included), else 0
    firsts: list[bool]

    def forward(self, *inputs: Tensor) -> Tensor:
        self.shapes = [tuple(t.shape) for t in inputs]
        return self.value

    def backward(self, g: Tensor | None) -> Any:
        if g is None:
            return None
        grads = [
            (g * self.moved).sum_to_size(shape)
            if first
            else _core.zeros(shape, dtype=g.dtype, device=g.device)
            for first, shape in zip(self.firsts, self.shapes)
        ]
        return grads[0] if len(grads) == 1 else tuple(grads)


def as_strided(input: Tensor, size: Any, stride: Any, storage_offset: int | None = None) -> Tensor:
    """The view of ``input``'s memory whose entry ``i`` is at ``storage_offset + sum(i_k
    stride_k)`` (PyTorch's ``as_strided``; sliding windows, for instance): writes through it
    reach ``input``. Differentiable: each entry's gradient goes to the entries of ``input``
    at its place in memory (overlapping windows add theirs)."""
    size = [int(s) for s in size]
    stride = [int(s) for s in stride]
    if len(size) != len(stride):
        raise RuntimeError(
            f"as_strided: mismatch in length of strides and shape ({len(size)} sizes, "
            f"{len(stride)} strides)"
        )
    off = None if storage_offset is None else int(storage_offset)
    if any(n < 0 for n in size) or (off is not None and off < 0):
        raise RuntimeError(f"as_strided: negative size {size} or storage offset {off}")
    try:
        return input._as_strided_view(size, stride, off)
    except ValueError as e:
        raise RuntimeError(str(e)) from None


def _assert(condition: Any, message: str) -> None:
    """``torch._assert``: raises ``AssertionError(message)`` when ``condition`` is false."""
    if not condition:
        raise AssertionError(message)


def _alpha_first(name: str, args: tuple) -> tuple:
    """``(self, alpha, other)`` in PyTorch's old argument order as ``(self, alpha * other)``,
    with PyTorch's deprecation warning; other argument lists unchanged."""
    import warnings

    if isinstance(args[1], (int, float)) and isinstance(args[2], Tensor):
        warnings.warn(
            f"{name}(Number alpha, Tensor other) is deprecated; use "
            f"{name}(Tensor other, *, Number alpha)",
            UserWarning,
            stacklevel=3,
        )
        return (args[0], args[2] * args[1])
    return args


def _deprecated_alpha_first(fn: Any) -> Any:
    """``x.add_(alpha, other)``: PyTorch's old argument order (still accepted there)."""
    import functools

    @functools.wraps(fn)
    def wrapped(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 2:
            args = _alpha_first(fn.__name__, (self, *args))[1:]
        return fn(self, *args, **kwargs)

    return wrapped


def _install_data_modules() -> None:
    """``torch.utils.data.dataset`` / ``.sampler`` / ``.dataloader``: module objects with the
    classes PyTorch keeps there (``from torch.utils.data import dataset``)."""
    import sys
    import types

    from .utils import data

    files = {
        "dataset": "Dataset IterableDataset TensorDataset ConcatDataset Subset random_split",
        "sampler": "Sampler SequentialSampler RandomSampler SubsetRandomSampler "
        "WeightedRandomSampler BatchSampler",
        "dataloader": "DataLoader default_collate get_worker_info",
        "distributed": "DistributedSampler",
    }
    for file, names in files.items():
        name = f"{data.__name__}.{file}"
        mod = sys.modules.get(name) or types.ModuleType(name)
        for n in names.split():
            if hasattr(data, n):
                setattr(mod, n, getattr(data, n))
        if not hasattr(data, file) or isinstance(getattr(data, file), types.ModuleType):
            setattr(data, file, mod)
        sys.modules[name] = mod


def _is_int_tensor(x: Any) -> bool:
    return isinstance(x, Tensor) and x.dtype.kind == "i"


def _is_int_base(x: Any) -> bool:
    if isinstance(x, Tensor):
        return x.dtype.kind in "iu"
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _int_pow(base: Any, exponent: Tensor, pow_fn: Any) -> Tensor:
    """``base ** exponent`` for a signed-integer ``exponent`` tensor and integer ``base``,
    as PyTorch's integer kernel: a negative power is 1 for base 1, +-1 for base -1 (by the
    power's parity) and 0 for any other base (0 included)."""
    if not isinstance(base, Tensor):
        base = _core.zeros((), dtype=exponent.dtype.name, device=exponent.device) + int(base)
    neg = exponent < 0
    e = _core.where(neg, _core.zeros_like(exponent), exponent)
    r = pow_fn(base, e)
    ones = _core.ones_like(r)
    zeros = _core.zeros_like(r)
    odd = (exponent % 2) != 0
    minus_one = _core.where(odd, -ones, ones)
    at_neg = _core.where(base == 1, ones, _core.where(base == -1, minus_one, zeros))
    return _core.where(neg, at_neg, r)


class NegativeIntegerPowerError(ValueError, RuntimeError):
    """An integer tensor raised to a negative integer number (PyTorch raises a
    RuntimeError; this is also the ValueError the engine raised before)."""


def _pow_wrapper(fn: Any, reflected: bool = False) -> Any:
    """``fn`` (``pow``/``__pow__``/``__rpow__``) computing an integer number to negative
    integer tensor powers as PyTorch does (see :func:`_int_pow`) instead of raising."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if len(args) == 2 and not kwargs:
            base, exponent = (args[1], args[0]) if reflected else args
            if (
                _is_int_base(base)
                and isinstance(base, Tensor)
                and isinstance(exponent, (int, np.integer))
                and not isinstance(exponent, (bool, np.bool_))
                and exponent < 0
            ):
                raise NegativeIntegerPowerError(
                    f"pow: integers to negative integer powers are not allowed (a "
                    f"{base.dtype} tensor to the power {exponent})"
                )
            if not reflected and isinstance(exponent, Tensor) and not isinstance(base, Tensor):
                # ``pow(2, t)`` is ``2 ** t``: the number takes the tensor's dtype where it
                # fits its kind (an int base to a uint8 tensor is uint8), as PyTorch's
                return Tensor.__rpow__(exponent, base)
            if _is_int_tensor(exponent) and _is_int_base(base):
                if reflected:
                    return _int_pow(base, exponent, lambda x, y: fn(y, x))
                return _int_pow(base, exponent, fn)
        return fn(*args, **kwargs)

    return wrapped


def install() -> None:
    import ferrograd as fg

    fg._assert = _assert
    for name in ("add_", "sub_"):  # (add and sub take the old order in _torch_keywords)
        f = getattr(Tensor, name, None)
        if callable(f):
            setattr(Tensor, name, _deprecated_alpha_first(f))
    _install_data_modules()

    for f in (
        hann_window,
        hamming_window,
        bartlett_window,
        blackman_window,
        kaiser_window,
        poisson,
        binomial,
        nextafter,
        as_strided,
    ):
        if not hasattr(fg, f.__name__):
            setattr(fg, f.__name__, f)
    if not hasattr(Tensor, "as_strided"):
        Tensor.as_strided = as_strided
    if not hasattr(Tensor, "nextafter"):
        from ._torch_inplace import _write_back

        Tensor.nextafter = nextafter
        Tensor.nextafter_ = _write_back("nextafter")
    Tensor.__pow__ = _pow_wrapper(Tensor.__pow__)
    Tensor.__rpow__ = _pow_wrapper(Tensor.__rpow__, reflected=True)
    Tensor.pow = _pow_wrapper(Tensor.pow)
    fg.pow = _pow_wrapper(fg.pow)
