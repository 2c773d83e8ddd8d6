"""``torch.backends.mkldnn``: ferrograd does not use oneDNN (its CPU kernels are its own)."""

from __future__ import annotations

enabled = True


def is_available() -> bool:
    return False
