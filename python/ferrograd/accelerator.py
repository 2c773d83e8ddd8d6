"""``torch.accelerator``: the current accelerator (CUDA where one can be used, else none),
as PyTorch's device-agnostic scripts ask for it."""

from __future__ import annotations

from . import cuda as _cuda

__all__ = [
    "current_accelerator",
    "current_device_index",
    "device_count",
    "is_available",
    "set_device_index",
    "synchronize",
]

_index = [0]


def is_available() -> bool:
    """Whether an accelerator (a CUDA device) can be used."""
    return _cuda.is_available()


def current_accelerator(check_available: bool = False) -> object:
    """``fg.device("cuda")`` where CUDA can be used, else None."""
    from ._torch_compat import device

    if _cuda.is_available():
        return device("cuda")
    return None


def device_count() -> int:
    return _cuda.device_count() if _cuda.is_available() else 0


def current_device_index() -> int:
    return _index[0]


def set_device_index(device: object) -> None:
    idx = device if isinstance(device, int) else (getattr(device, "index", None) or 0)
    n = device_count()
    if not 0 <= idx < max(n, 1):
        raise ValueError(f"set_device_index: no accelerator {idx} ({n} available)")
    _index[0] = idx


def synchronize(device: object = None) -> None:
    """Waits for the accelerator's queued work (nothing to do without one)."""
    if _cuda.is_available():
        _cuda.synchronize(device)
