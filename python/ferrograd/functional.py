"""MegEngine's ``megengine.functional`` spellings: the package's ops by their names, with
MegEngine 1.x's arguments, defaults and conventions where they differ from PyTorch's
(``softmax``'s default axis, ``round`` half away from zero, ``repeat`` as numpy's,
``arange`` in float32, ``norm(ord, axis)``, ``clip(lower, upper)``, shapes given as
Tensors, ...); ``functional.nn`` (the NN functions: ``batch_norm`` with MegEngine's
momentum, ``avg_pool2d`` excluding padding, ``interpolate`` bilinear, ``binary_cross_entropy``
on logits, ``pad`` with ``((before, after), ...)``, ``cross_entropy`` with ``axis``,
``with_logits`` and ``label_smooth``), ``functional.vision`` (``interpolate``, ``flip``,
``rot90``, ``nms``), ``logsoftmax`` and ``topk_accuracy``, so a MegEngine script ports by
changing ``megengine`` to ``ferrograd``. (``ferrograd.module``,
``ferrograd.optimizer`` and ``ferrograd.jit`` are MegEngine's names of ``nn``, ``optim``
and ``trace``.)"""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np

from ._core import Tensor
from ._megengine import functional as _mge
from ._megengine.functional import logsoftmax, split, std, var, vision

__all__ = [
    "cross_entropy",
    "logsoftmax",
    "max",
    "min",
    "nn",
    "split",
    "std",
    "topk",
    "topk_accuracy",
    "var",
    "vision",
]

# MegEngine's functional.nn (and functional.loss): the NN functions, filled below
nn = types.ModuleType(f"{__name__}.nn", "MegEngine's functional.nn: the NN functions.")
loss = nn


def cross_entropy(
    pred: Tensor,
    label: Tensor,
    axis: int = 1,
    with_logits: bool = True,
    label_smooth: float = 0.0,
    reduction: str = "mean",
) -> Tensor:
    """MegEngine's ``cross_entropy``: classes along ``axis`` of ``pred``, which holds
    logits (``with_logits``) or probabilities; ``label_smooth`` mixes the one-hot target
    with the uniform one; ``reduction`` "mean", "sum" or "none"."""
    import ferrograd as fg

    from .nn import functional as F

    if not isinstance(pred, Tensor):
        raise TypeError(f"cross_entropy: pred must be a Tensor, got {type(pred).__name__}")
    if pred.ndim < 1:
        raise fg.ShapeError("cross_entropy: pred must have a class axis")
    a = axis % pred.ndim
    if a != 1 and pred.ndim > 1:
        pred = pred.movedim(a, 1)
    label = _mge._t(label)
    if label.dtype != np.int64 and not label.is_floating_point():
        label = label.astype("int64")  # MegEngine's labels are int32
    if with_logits:
        return F.cross_entropy(pred, label, reduction=reduction, label_smoothing=label_smooth)
    logp = pred.clamp(min=fg.finfo(pred.dtype).tiny).log()
    nll = F.nll_loss(logp, label, reduction=reduction)
    if not label_smooth:
        return nll
    uniform = -logp.mean(1)
    if reduction == "mean":
        uniform = uniform.mean()
    elif reduction == "sum":
        uniform = uniform.sum()
    return nll * (1 - label_smooth) + uniform * label_smooth


def max(inp: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """MegEngine's ``max``: the values over ``axis`` (all axes by default), no indices."""
    if not isinstance(inp, Tensor):
        raise TypeError(f"max: inp must be a Tensor, got {type(inp).__name__}")
    return Tensor.max._engine(inp, axis, keepdims)


def min(inp: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """MegEngine's ``min``: the values over ``axis`` (all axes by default), no indices."""
    if not isinstance(inp, Tensor):
        raise TypeError(f"min: inp must be a Tensor, got {type(inp).__name__}")
    return Tensor.min._engine(inp, axis, keepdims)


def topk(
    inp: Tensor,
    k: int,
    descending: bool = False,
    kth_only: bool = False,
    no_sort: bool = False,
) -> Any:
    """MegEngine's ``topk``: the ``k`` smallest entries of the last axis (the largest with
    ``descending``), as ``(values, indices)``; ``kth_only``: the k-th only."""
    import ferrograd as fg

    r = fg.topk(inp, k, dim=-1, descending=descending, kth_only=kth_only)
    return r.values, r.indices


def topk_accuracy(logits: Tensor, target: Tensor, topk: int | tuple = 1) -> Any:
    """The fraction of rows whose ``target`` is among the ``topk`` largest logits (a tuple
    of ``topk`` gives a tuple of fractions), as MegEngine's."""
    import ferrograd as fg

    ks = (topk,) if isinstance(topk, int) else tuple(topk)
    import builtins

    kmax = builtins.max(ks)
    idx = fg.topk(logits, kmax, dim=1).indices
    hit = idx == target.reshape(-1, 1)
    n = logits.shape[0]
    out = tuple(hit[:, :k].any(1).float().sum() / n for k in ks)
    return out[0] if isinstance(topk, int) else out


def _build() -> None:
    import ferrograd as fg

    from .nn import functional as F

    me = sys.modules[__name__]
    for name in getattr(fg, "__all__", []):
        value = getattr(fg, name, None)
        is_function = callable(value) and not isinstance(value, (type, types.ModuleType))
        if is_function and not hasattr(me, name):
            setattr(me, name, value)
    for name in _mge.TOP_NAMES:
        setattr(me, name, getattr(_mge, name))
    for name in dir(F):
        if not name.startswith("_"):
            setattr(nn, name, getattr(F, name))
    for name in _mge.NN_NAMES:
        setattr(nn, name, getattr(_mge, name))
    nn.cross_entropy = cross_entropy
    sys.modules[f"{__name__}.vision"] = _mge.vision
    sys.modules[f"{__name__}.nn"] = nn
    sys.modules[f"{__name__}.loss"] = nn  # megengine.functional.loss.cross_entropy


_build()
