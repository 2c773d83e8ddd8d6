"""PyTorch's ``torch.utils.dlpack``: the legacy capsule spelling of DLPack exchange.
``to_dlpack(t)`` gives a ``"dltensor"`` capsule over the tensor's memory, for any
consumer's ``from_dlpack`` (PyTorch's, numpy's through an object with ``__dlpack__``);
``from_dlpack`` takes a capsule or any object with ``__dlpack__``. A capsule can be
consumed once."""

from __future__ import annotations

from typing import Any

from .._core import Tensor
from .._ops import from_dlpack

__all__ = ["from_dlpack", "to_dlpack"]


def to_dlpack(tensor: Tensor) -> Any:
    """A legacy (unversioned) DLPack capsule of a CPU tensor: shared with the consumer, so
    writes on either side show on the other, as PyTorch's ``to_dlpack``. Memory shared
    read-only with another library (a read-only numpy array, a JAX array) is exported as
    a copy, since the legacy format cannot mark it read-only."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dlpack: expected a Tensor, got {type(tensor).__name__}")
    return tensor.__dlpack__()
