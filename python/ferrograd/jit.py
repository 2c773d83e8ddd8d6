"""MegEngine's ``megengine.jit`` spelling: ``trace`` (``@jit.trace(symbolic=True)``) is
:func:`ferrograd.trace`."""

from __future__ import annotations

from typing import Any

from .tracing import TracedFunction, trace

__all__ = ["TracedFunction", "trace"]


# TorchScript's decorators and queries, which model code uses while it is defined: ferrograd
# runs Python as written, so each leaves the function as it is (nothing is scripted).
def unused(fn: Any) -> Any:
    """``torch.jit.unused``: returns ``fn`` (nothing is compiled here)."""
    return fn


def ignore(drop: Any = False, **kwargs: Any) -> Any:
    """``torch.jit.ignore`` (with or without arguments): returns the function."""
    if callable(drop):
        return drop
    return lambda fn: fn


def export(fn: Any) -> Any:
    return fn


def _overload_method(fn: Any) -> Any:
    return fn


def _overload(fn: Any) -> Any:
    return fn


def is_scripting() -> bool:
    """False: code here always runs as Python."""
    return False


def is_tracing() -> bool:
    """``torch.jit.is_tracing``: whether a :func:`ferrograd.trace` is recording now."""
    from . import _core

    return bool(_core._tracing())


def annotate(the_type: Any, the_value: Any) -> Any:
    """``torch.jit.annotate``: the value (types are not checked here)."""
    return the_value


def script(obj: Any = None, *args: Any, **kwargs: Any) -> Any:
    """``torch.jit.script``'s spelling: returns ``obj`` unchanged (it runs as Python; use
    :func:`ferrograd.trace` to compile a training step)."""
    return obj


Final = Any
__all__ += [
    "Final",
    "annotate",
    "export",
    "ignore",
    "is_scripting",
    "is_tracing",
    "script",
    "unused",
]
