"""Ops written in Python over the engine's ops (their gradients come from the ops they are
made of): creation, random sampling, movement and indexing, reductions. Each is a function
``fg.<name>`` and, where PyTorch has it, a ``Tensor`` method."""

from __future__ import annotations

__all__: list[str] = []
