"""``torch.special``'s functions (``fg.special``): ``expit``, ``logit``, ``erf``, ``erfc``,
``expm1``, ``exp2``, ``log1p``, ``xlogy``, ``xlog1py``, ``entr``, ``ndtr``, ``sinc``,
``logsumexp``, ``softmax``, ``log_softmax``, ``round``; differentiable where PyTorch's are."""

from __future__ import annotations

import math
from typing import Any

from . import _core
from ._core import Tensor
from ._ops import _check_tensor
from ._ops import logsumexp as _logsumexp
from ._torch_more import _pair, logit, sinc, xlogy

__all__ = [
    "entr",
    "erf",
    "erfc",
    "exp2",
    "expit",
    "expm1",
    "log1p",
    "log_softmax",
    "logit",
    "logsumexp",
    "ndtr",
    "round",
    "sinc",
    "softmax",
    "xlog1py",
    "xlogy",
]


def expit(input: Tensor) -> Tensor:
    """The logistic sigmoid ``1 / (1 + exp(-x))``."""
    return _check_tensor("expit", "input", input).sigmoid()


def erf(input: Tensor) -> Tensor:
    return _check_tensor("erf", "input", input).erf()


def erfc(input: Tensor) -> Tensor:
    return _check_tensor("erfc", "input", input).erfc()


def expm1(input: Tensor) -> Tensor:
    return _check_tensor("expm1", "input", input).expm1()


def exp2(input: Tensor) -> Tensor:
    return _check_tensor("exp2", "input", input).exp2()


def log1p(input: Tensor) -> Tensor:
    return _check_tensor("log1p", "input", input).log1p()


def round(input: Tensor, decimals: int = 0) -> Tensor:
    return _check_tensor("round", "input", input).round(decimals=decimals)


def xlog1py(input: Any, other: Any) -> Tensor:
    """``input * log1p(other)``, 0 where ``input`` is 0 (also where ``other`` is -1)."""
    x, y = _pair("xlog1py", input, other)
    blow_up = (x == 0) & ((y == -1) | y.isinf())
    safe = _core.where(blow_up, _core.zeros_like(y), y)
    return x * safe.log1p()


def entr(input: Tensor) -> Tensor:
    """``-x * log(x)``: 0 at 0, ``-inf`` below 0."""
    x = _check_tensor("entr", "input", input)
    zero = x == 0
    safe = _core.where(zero | (x < 0), _core.ones_like(x), x)
    out = -x * safe.log()
    return _core.where(x < 0, _core.zeros_like(x) - math.inf, out)


def ndtr(input: Tensor) -> Tensor:
    """The standard normal CDF."""
    x = _check_tensor("ndtr", "input", input)
    return 0.5 * (1.0 + (x * (1.0 / math.sqrt(2.0))).erf())


def logsumexp(input: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    return _logsumexp(input, dim, keepdim)


def softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    x = _check_tensor("softmax", "input", input)
    return (x if dtype is None else x.astype(str(dtype))).softmax(dim=dim)


def log_softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    x = _check_tensor("log_softmax", "input", input)
    return (x if dtype is None else x.astype(str(dtype))).log_softmax(dim=dim)
