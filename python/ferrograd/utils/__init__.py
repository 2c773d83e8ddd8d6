"""Utilities with PyTorch's names: :mod:`ferrograd.utils.data` (datasets and loaders) and
:mod:`ferrograd.utils.checkpoint` (activation checkpointing)."""

from . import checkpoint, data
from .data import distributed as _data_distributed  # noqa: F401  (utils.data.distributed)

__all__ = ["checkpoint", "data"]
