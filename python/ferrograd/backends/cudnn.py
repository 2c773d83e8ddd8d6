"""``torch.backends.cudnn``: ferrograd has no cuDNN; the flags are kept for scripts that set
them and change nothing (convolutions are ferrograd's own kernels, deterministic)."""

from __future__ import annotations

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """False: ferrograd does not use cuDNN."""
    return False


def version() -> None:
    """None: no cuDNN is loaded."""
    return
