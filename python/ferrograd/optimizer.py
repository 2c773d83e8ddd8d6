"""MegEngine's ``megengine.optimizer`` spelling of :mod:`ferrograd.optim` (``SGD``,
``Adam``, ... and ``lr_scheduler``; ``opt.step().clear_grad()`` chains), with MegEngine's
``clip_grad_norm(tensors, max_norm, ord)``, ``clip_grad_value(tensors, lower, upper)``,
``LRScheduler`` and ``MultiStepLR`` (``current_epoch``)."""

from __future__ import annotations

from ._megengine.optimizer import LRScheduler, MultiStepLR, clip_grad_norm, clip_grad_value
from .optim import *
from .optim import __all__ as _optim_all

__all__ = ["LRScheduler", "MultiStepLR", "clip_grad_norm", "clip_grad_value"]
__all__ += [name for name in _optim_all if name not in __all__]
