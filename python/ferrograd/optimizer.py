"""MegEngine's ``megengine.optimizer`` spelling of :mod:`ferrograd.optim` (``SGD``,
``Adam``, ... and ``lr_scheduler``; ``opt.step().clear_grad()`` chains)."""

from __future__ import annotations

from .optim import *
from .optim import __all__  # noqa: F401
