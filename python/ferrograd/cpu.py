"""``torch.cpu``'s spellings: ``fg.cpu.amp.autocast(dtype=bfloat16)`` (see
:mod:`ferrograd.amp`), ``is_available()``, ``synchronize()``, ``device_count()``."""

from __future__ import annotations


class _CpuAmp:
    @staticmethod
    def autocast(enabled: bool = True, dtype: object = "bfloat16", cache_enabled: bool = True):
        from .amp import autocast

        return autocast("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


amp = _CpuAmp()


def is_available() -> bool:
    return True


def synchronize(device: object = None) -> None:
    """CPU work is done when a call returns: nothing to wait for."""


def device_count() -> int:
    return 1
