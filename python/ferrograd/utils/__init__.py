"""Utilities with PyTorch's names: :mod:`ferrograd.utils.data` (datasets and loaders)."""

from . import data

__all__ = ["data"]
