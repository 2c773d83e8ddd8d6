"""``torch.utils.checkpoint``: activation checkpointing (see :func:`ferrograd.checkpoint`)."""

from __future__ import annotations

from typing import Any, Callable

from ..autodiff import checkpoint as _checkpoint
from ..autodiff import checkpoint_sequential as _checkpoint_sequential

__all__ = ["checkpoint", "checkpoint_sequential"]


def checkpoint(
    function: Callable[..., Any],
    *args: Any,
    use_reentrant: bool | None = None,
    preserve_rng_state: bool = True,
    **kwargs: Any,
) -> Any:
    """``function(*args, **kwargs)`` keeping only its inputs for backward, where it is run
    again (with the same random numbers when ``preserve_rng_state``). ``use_reentrant`` is
    accepted for PyTorch scripts: both of its modes give these gradients here."""
    if kwargs:

        def call(*a: Any) -> Any:
            return function(*a, **kwargs)

        return _checkpoint(call, *args, preserve_rng_state=preserve_rng_state)
    return _checkpoint(function, *args, preserve_rng_state=preserve_rng_state)


def checkpoint_sequential(
    functions: Any, segments: int, input: Any, use_reentrant: bool | None = None, **kwargs: Any
) -> Any:
    """Runs the modules of ``functions`` (a Sequential or a list) in ``segments``
    checkpointed chunks."""
    layers = list(functions.children()) if hasattr(functions, "children") else list(functions)
    return _checkpoint_sequential(layers, segments, input)
