"""``torch.xpu`` and ``torch.mps``'s spellings for scripts that probe them
(``torch.xpu.is_available()``): ferrograd has no Intel GPU or Apple GPU backend, so they
report none."""

from __future__ import annotations


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def synchronize(device: object = None) -> None:
    """Nothing runs on such a device: nothing to wait for."""


def empty_cache() -> None:
    """No memory is held on such a device."""


def manual_seed(seed: int) -> None:
    """No generator lives on such a device: nothing to seed."""


def manual_seed_all(seed: int) -> None:
    """No generator lives on such a device: nothing to seed."""
