"""MegEngine's ``megengine.optimizer`` spelling of :mod:`ferrograd.optim` (``SGD``,
``Adam``, ... and ``lr_scheduler``; ``opt.step().clear_grad()`` chains), with MegEngine's
``clip_grad_norm(tensors, max_norm, ord)``, ``clip_grad_value(tensors, lower, upper)``,
``LRScheduler`` and ``MultiStepLR`` (``current_epoch``), ``SGD(params, lr, momentum,
nesterov, weight_decay)`` and ``Adagrad`` (MegEngine's argument order; Adagrad's ``eps``
inside the square root)."""

from __future__ import annotations

from ._megengine import optimizer as _mge
from ._megengine.optimizer import LRScheduler, MultiStepLR, clip_grad_norm, clip_grad_value
from .optim import *
from .optim import __all__ as _optim_all

# MegEngine's classes, replacing optim's of the same name
Adagrad = _mge.Adagrad
SGD = _mge.SGD

__all__ = ["SGD", "Adagrad", "LRScheduler", "MultiStepLR", "clip_grad_norm", "clip_grad_value"]
__all__ += [name for name in _optim_all if name not in __all__]
