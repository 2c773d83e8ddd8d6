"""``torch.utils.checkpoint``: activation checkpointing (see :func:`ferrograd.checkpoint`)."""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Iterator
from typing import Any, Callable

from ..autodiff import checkpoint as _checkpoint

__all__ = [
    "checkpoint",
    "checkpoint_sequential",
    "get_device_states",
    "set_checkpoint_early_stop",
    "set_device_states",
]


def checkpoint(
    function: Callable[..., Any],
    *args: Any,
    use_reentrant: bool | None = None,
    preserve_rng_state: bool = True,
    context_fn: Callable[[], tuple[Any, Any]] | None = None,
    determinism_check: str = "default",
    debug: bool = False,
    early_stop: bool = True,
    **kwargs: Any,
) -> Any:
    """``function(*args, **kwargs)`` keeping only its inputs for backward, where it is run
    again (with the same random numbers when ``preserve_rng_state``). Both modes of
    ``use_reentrant`` give the same gradients here; as PyTorch, ``use_reentrant=True`` takes
    no keyword arguments for ``function`` and, when no tensor argument requires grad, runs
    it without recording (with a warning). Leaving ``use_reentrant`` out warns and means
    ``True``, as in PyTorch. The whole function is rerun in backward whatever
    ``early_stop`` says (the gradients are the same). ``function`` may return any structure of tuples,
    lists and dicts with tensors and other values in it. Under ``no_grad`` it is just
    called. ``context_fn()`` gives two context managers: the first wraps the forward run,
    the second the rerun in backward (``use_reentrant=False`` only)."""
    from .. import autodiff
    from .._core import Tensor

    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly; "
            "it defaults to True, as PyTorch's (pass use_reentrant=False to allow keyword "
            "arguments and context_fn)",
            stacklevel=2,
        )
        use_reentrant = True
    if use_reentrant and kwargs:
        raise ValueError("checkpoint: Unexpected keyword arguments: " + ",".join(kwargs))
    if use_reentrant and (context_fn is not None or debug):
        raise ValueError(
            "checkpoint: passing `context_fn` or `debug` is only supported when use_reentrant=False"
        )
    if determinism_check not in ("default", "none"):
        raise ValueError(
            f"checkpoint: determinism_check should be 'default' or 'none', got "
            f"{determinism_check!r}"
        )
    if not autodiff.is_grad_enabled():
        return function(*args, **kwargs)
    if use_reentrant and not any(isinstance(a, Tensor) and a.requires_grad for a in args):
        warnings.warn(
            "checkpoint: none of the inputs have requires_grad=True; with use_reentrant=True "
            "the outputs will not require grad and gradients will be None",
            stacklevel=2,
        )
        with autodiff.no_grad():
            return function(*args, **kwargs)
    layout: list = []
    runs = [0]

    def flat(*a: Any) -> tuple[Tensor, ...]:
        runs[0] += 1
        ctx = None
        if context_fn is not None:
            ctx = context_fn()[0 if runs[0] == 1 else 1]
        if ctx is None:
            out = function(*a, **kwargs)
        else:
            with ctx:
                out = function(*a, **kwargs)
        tensors: list = []
        rebuild = _flatten(out, tensors)
        if not layout:
            layout.append(rebuild)
        return tuple(tensors)

    outs = _checkpoint(flat, *args, preserve_rng_state=preserve_rng_state)
    outs = [outs] if isinstance(outs, Tensor) else list(outs)
    return layout[0](iter(outs))


def _flatten(value: Any, tensors: list) -> Callable[[Any], Any]:
    """Appends the tensors in ``value`` (nested in tuples, namedtuples, lists and dicts) to
    ``tensors``; returns a function that rebuilds ``value`` from an iterator over new
    tensors in that order, every other leaf kept as it was."""
    from .._core import Tensor

    if isinstance(value, Tensor):
        tensors.append(value)
        return lambda it: next(it)
    if isinstance(value, dict):
        parts = {k: _flatten(v, tensors) for k, v in value.items()}

        def rebuild_dict(it: Any) -> Any:
            out = copy.copy(value)
            for k, part in parts.items():
                out[k] = part(it)
            return out

        return rebuild_dict
    if isinstance(value, (tuple, list)):
        seq = [_flatten(v, tensors) for v in value]
        if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
            return lambda it: type(value)(*(part(it) for part in seq))
        if type(value) in (tuple, list):
            return lambda it: type(value)(part(it) for part in seq)

        def rebuild_seq(it: Any) -> Any:
            items = [part(it) for part in seq]
            try:
                return type(value)(items)
            except TypeError:
                return items

        return rebuild_seq
    return lambda it: value


def checkpoint_sequential(
    functions: Any,
    segments: int,
    input: Any,
    use_reentrant: bool | None = None,
    **kwargs: Any,
) -> Any:
    """Runs the modules of ``functions`` (a Sequential or a list) one after another, the
    first ``segments - 1`` chunks of ``len(functions) // segments`` modules each
    checkpointed, the rest run normally (their activations are needed at once), as
    PyTorch's. ``kwargs`` (``preserve_rng_state``) go to :func:`checkpoint`; leaving
    ``use_reentrant`` out warns and means ``True``."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should "
            "be passed explicitly; it defaults to True, as PyTorch's",
            stacklevel=2,
        )
        use_reentrant = True
    layers = list(functions.children()) if hasattr(functions, "children") else list(functions)
    if not isinstance(segments, int) or isinstance(segments, bool) or segments < 1:
        raise ValueError(
            f"checkpoint_sequential: segments must be a positive int, got {segments!r}"
        )

    def run(chunk: list) -> Callable[[Any], Any]:
        def forward(x: Any) -> Any:
            for layer in chunk:
                x = layer(x)
            return x

        return forward

    size = len(layers) // segments
    done = 0
    if size > 0:
        for done in range(size, size * segments, size):
            chunk = run(layers[done - size : done])
            input = checkpoint(chunk, input, use_reentrant=use_reentrant, **kwargs)
    return run(layers[done:])(input)


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool) -> Iterator[None]:
    """PyTorch's switch for stopping a recomputation once it has rebuilt what backward
    needs. Here a checkpointed function is always rerun whole (the gradients are the same
    either way), so this only accepts the setting."""
    yield


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
