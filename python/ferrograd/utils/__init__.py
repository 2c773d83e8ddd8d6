"""Utilities with PyTorch's names: :mod:`ferrograd.utils.data` (datasets and loaders),
:mod:`ferrograd.utils.checkpoint` (activation checkpointing) and
:mod:`ferrograd.utils.dlpack` (DLPack capsules)."""

from . import checkpoint, data, dlpack
from .data import distributed as _data_distributed  # noqa: F401  (utils.data.distributed)

__all__ = ["checkpoint", "data", "dlpack"]
