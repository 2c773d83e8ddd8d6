"""More of PyTorch's tensor functions by their names (``fg.*`` and ``Tensor`` methods)."""

from __future__ import annotations

__all__: list[str] = []
