"""MegEngine's ``megengine.jit`` spelling: ``trace`` (``@jit.trace(symbolic=True)``) is
:func:`ferrograd.trace`."""

from __future__ import annotations

from .tracing import TracedFunction, trace

__all__ = ["TracedFunction", "trace"]
