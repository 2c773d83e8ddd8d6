"""``torch.cpu``'s spellings: ``fg.cpu.amp.autocast(dtype=bfloat16)`` (see
:mod:`ferrograd.amp`), ``is_available()``, ``synchronize()``, ``device_count()``."""

from __future__ import annotations


class _CpuAmp:
    """``torch.cpu.amp``: ``autocast`` (a CPU region) and ``GradScaler`` (on the CPU)."""

    @staticmethod
    def autocast(enabled: bool = True, dtype: object = "bfloat16", cache_enabled: bool = True):
        from .amp import autocast

        return autocast("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    @staticmethod
    def GradScaler(
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> object:
        from .amp import GradScaler

        return GradScaler(
            "cpu", init_scale, growth_factor, backoff_factor, growth_interval, enabled
        )


amp = _CpuAmp()


def is_available() -> bool:
    return True


def synchronize(device: object = None) -> None:
    """CPU work is done when a call returns: nothing to wait for."""


def device_count() -> int:
    return 1
