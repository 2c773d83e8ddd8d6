"""The base class of every distribution and the helpers they share."""

from __future__ import annotations

import math
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from .. import _core
from .._core import Tensor
from .._tensor import default_float
from ..autodiff import no_grad
from . import constraints

__all__ = ["Distribution"]

lazy_property = cached_property


def _is_number(v: Any) -> bool:
    import numpy as np

    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def broadcast_all(*values: Any) -> tuple:
    """``values`` (tensors and Python numbers) as tensors of one shape; numbers take the
    dtype and device of the first tensor (the default float dtype when there is none)."""
    from .. import broadcast_tensors, tensor

    first = next((v for v in values if isinstance(v, Tensor)), None)
    out = []
    for v in values:
        if isinstance(v, Tensor):
            out.append(v)
        elif _is_number(v):
            dtype = first.dtype.name if first is not None else default_float()
            if first is not None and dtype not in ("float16", "bfloat16", "float32", "float64"):
                dtype = default_float()
            out.append(
                tensor(float(v), dtype=dtype, device=first.device if first is not None else None)
            )
        elif isinstance(v, np.ndarray) and v.dtype.kind in "biuf":
            # MegEngine's distributions take numpy arrays: float arrays keep their dtype,
            # integer and bool ones become the default float type
            dtype = v.dtype.name if v.dtype.kind == "f" else default_float()
            out.append(tensor(v, dtype=dtype, device=first.device if first is not None else None))
        else:
            raise ValueError(
                "distribution parameters must be tensors, numbers or numeric numpy arrays, got "
                f"{type(v).__name__}"
            )
    if len(out) == 1:
        return (out[0],)
    return tuple(broadcast_tensors(*out))


def _size(shape: Any) -> tuple:
    from .. import Size

    if isinstance(shape, int):
        return Size((shape,))
    try:
        return Size(tuple(int(s) for s in shape))
    except TypeError:
        raise TypeError(f"sample_shape must be a sequence of ints, got {shape!r}") from None


def _reading_allowed() -> bool:
    """Validation reads values: not possible while ``fg.trace`` records a step."""
    return not _core._tracing()


def _sum_rightmost(value: Tensor, dim: int) -> Tensor:
    if dim == 0:
        return value
    return value.reshape(*value.shape[: value.dim() - dim], -1).sum(-1)


class Distribution:
    """A batch of probability distributions (PyTorch's ``torch.distributions`` API).

    ``batch_shape`` indexes independent distributions, ``event_shape`` is the shape of one
    sample of one of them. ``sample(shape)`` draws without gradient; ``rsample(shape)``
    (where ``has_rsample``) draws with the reparameterization trick, so gradients reach the
    parameters; ``log_prob``, ``entropy``, ``cdf``, ``mean``, ``variance`` are differentiable.
    Draws use ``fg.manual_seed``'s generator.

    With ``validate_args`` (on by default, as in PyTorch; ``set_default_validate_args(False)``
    turns it off) bad parameters and values outside the support raise ``ValueError``."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = True
    arg_constraints: ClassVar[dict] = {}
    support: Any = None

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        if value not in (True, False):
            raise ValueError("set_default_validate_args: value must be True or False")
        Distribution._validate_args = value

    def __init__(
        self, batch_shape: Any = (), event_shape: Any = (), validate_args: bool | None = None
    ) -> None:
        self._batch_shape = _size(batch_shape)
        self._event_shape = _size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args and _reading_allowed():
            for param, constraint in self.arg_constraints.items():
                if isinstance(constraint, constraints._Dependent):
                    continue
                if param not in self.__dict__ and isinstance(
                    getattr(type(self), param, None), cached_property
                ):
                    continue  # a parameter derived from another one
                value = getattr(self, param)
                if not bool(constraint.check(value).all()):
                    raise ValueError(
                        f"Expected parameter {param} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {constraint!r}, but found invalid values:\n{value}"
                    )

    @property
    def batch_shape(self) -> tuple:
        return self._batch_shape

    @property
    def event_shape(self) -> tuple:
        return self._event_shape

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        """The same distribution repeated over a larger ``batch_shape`` (views of the
        parameters)."""
        batch_shape = _size(batch_shape)
        new = type(self).__new__(type(self))
        for name in self.arg_constraints:
            if name in self.__dict__:
                v = self.__dict__[name]
                extra = v.shape[len(self._batch_shape) :]
                setattr(new, name, v.expand(*batch_shape, *extra))
        for name, v in self.__dict__.items():
            if name not in self.arg_constraints and not isinstance(v, Tensor):
                new.__dict__.setdefault(name, v)
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no mean")

    @property
    def mode(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no mode")

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no variance")

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        raise NotImplementedError(
            f"{type(self).__name__} has no rsample (no reparameterized sampling); use sample()"
        )

    def sample_n(self, n: int) -> Tensor:
        return self.sample((n,))

    def log_prob(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def cdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no cdf")

    def icdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no icdf")

    def entropy(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no entropy")

    def perplexity(self) -> Tensor:
        return self.entropy().exp()

    def enumerate_support(self, expand: bool = True) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no enumerable support")

    def _extended_shape(self, sample_shape: Any = ()) -> tuple:
        return _size(tuple(_size(sample_shape)) + self._batch_shape + self._event_shape)

    def _validate_sample(self, value: Any) -> None:
        if not isinstance(value, Tensor):
            raise ValueError(  # noqa: TRY004  (PyTorch's exception type)
                f"The value argument to log_prob must be a Tensor, got {value!r}"
            )
        if not _reading_allowed():
            return
        start = value.dim() - len(self._event_shape)
        if tuple(value.shape[start:]) != tuple(self._event_shape):
            raise ValueError(
                "The right-most size of value must match event_shape: "
                f"{tuple(value.shape)} vs {tuple(self._event_shape)}."
            )
        actual = tuple(value.shape)
        expected = tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(
                    f"Value is not broadcastable with batch_shape+event_shape: {actual} vs "
                    f"{expected}."
                )
        support = self.support
        if support is None or isinstance(support, constraints._Dependent):
            return
        if not bool(support.check(value).all()):
            raise ValueError(
                f"Expected value argument ({type(value).__name__} of shape {actual}) to be "
                f"within the support ({support!r}) of the distribution {self!r}, but found "
                f"invalid values:\n{value}"
            )

    def __repr__(self) -> str:
        names = [k for k in self.arg_constraints if k in self.__dict__]
        parts = []
        for p in names:
            v = self.__dict__[p]
            parts.append(f"{p}: {v.item() if v.numel() == 1 else tuple(v.shape)}")
        return f"{type(self).__name__}({', '.join(parts)})"


def _fg() -> Any:
    """The ``ferrograd`` package (imported by the time a distribution is used)."""
    import sys

    return sys.modules["ferrograd"]


def _finfo(dtype: Any) -> Any:
    return _fg().finfo(dtype)


def clamp_probs(probs: Tensor) -> Tensor:
    eps = _finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    ps = clamp_probs(probs)
    if is_binary:
        return ps.log() - (-ps).log1p()
    return ps.log()


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    from .. import softmax

    if is_binary:
        return logits.sigmoid()
    return softmax(logits, -1)


_LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))
