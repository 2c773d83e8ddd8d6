"""``torch.utils.checkpoint``: activation checkpointing (see :func:`ferrograd.checkpoint`)."""

from __future__ import annotations

from typing import Any, Callable

from ..autodiff import checkpoint as _checkpoint
from ..autodiff import checkpoint_sequential as _checkpoint_sequential

__all__ = ["checkpoint", "checkpoint_sequential", "get_device_states", "set_device_states"]


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


def _tensors(value: Any, out: list) -> None:
    from .._core import Tensor

    if isinstance(value, Tensor):
        out.append(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _tensors(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            _tensors(v, out)


def get_device_states(*args: Any) -> tuple[list[int], list[Any]]:
    """PyTorch's ``get_device_states``: the device indices of the non-CPU tensors in
    ``args`` (nested in lists, tuples and dicts too; one entry per tensor) and the random
    state of each of those devices (``fg.cuda.get_rng_state``); ``([], [])`` for CPU
    tensors."""
    from .. import cuda

    tensors: list = []
    _tensors(args, tensors)
    ids = []
    for t in tensors:
        kind, _, index = str(t.device).partition(":")
        if kind not in ("cpu", "meta"):
            ids.append(int(index or 0))
    return ids, [cuda.get_rng_state(i) for i in ids]


def set_device_states(devices: Any, states: Any, *, device_type: str | None = None) -> None:
    """Restores the random states :func:`get_device_states` returned, device by device."""
    if device_type == "meta":
        return
    from .. import cuda

    for device, state in zip(devices, states):
        cuda.set_rng_state(state, device)
