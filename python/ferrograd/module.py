"""MegEngine's ``megengine.module`` spelling of :mod:`ferrograd.nn` (``Module``,
``Linear``, ``Conv2d``, ...)."""

from __future__ import annotations

from .nn import *
from .nn import __all__  # noqa: F401
