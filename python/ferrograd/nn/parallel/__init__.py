"""``torch.nn.parallel``'s names: :class:`DataParallel` (one process; for training over
several processes see :mod:`ferrograd.distributed`)."""

from __future__ import annotations

from ..more import DataParallel

__all__ = ["DataParallel"]
