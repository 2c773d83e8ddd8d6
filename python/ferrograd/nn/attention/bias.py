"""PyTorch's ``torch.nn.attention.bias``: causal masks for ``scaled_dot_product_attention``
when the query and the keys differ in length, where "causal" has two meanings. Upper left
(``is_causal=True``): query ``i`` sees keys ``0..i``. Lower right (decoding with a cache of
earlier keys): the last query sees every key, query ``i`` sees keys up to
``i + seq_len_kv - seq_len_q``; with more queries than keys the first ones see no key and
give zeros (PyTorch warns that they may give NaN)."""

from __future__ import annotations

import enum
import warnings
from typing import Any

import numpy as np

from ..._core import Tensor
from ..._tensor import tensor

__all__ = ["CausalBias", "CausalVariant", "causal_lower_right", "causal_upper_left"]


class CausalVariant(enum.IntEnum):
    """Where the causal diagonal starts: the scores' top-left or bottom-right corner."""

    UPPER_LEFT = 1
    LOWER_RIGHT = 2


class CausalBias:
    """A causal mask given by its variant and sizes, passed as ``attn_mask`` to
    ``scaled_dot_product_attention`` (which applies it without a dense mask where it can);
    :meth:`_materialize` gives the dense bool mask (True: the key is seen)."""

    def __init__(self, variant: CausalVariant, seq_len_q: int, seq_len_kv: int) -> None:
        if not isinstance(variant, CausalVariant):
            raise TypeError(
                f"CausalBias: variant must be a CausalVariant, got {type(variant).__name__}"
            )
        self.variant = variant
        self.seq_len_q = int(seq_len_q)
        self.seq_len_kv = int(seq_len_kv)
        if variant == CausalVariant.LOWER_RIGHT and self.seq_len_q > self.seq_len_kv:
            warnings.warn(
                "Lower right causal bias will produce NaNs in the output when seq_len_q > "
                "seq_len_kv!",
                UserWarning,
                stacklevel=3,
            )

    @property
    def shape(self) -> tuple[int, int]:
        return (self.seq_len_q, self.seq_len_kv)

    def _materialize(self, device: Any = None) -> Tensor:
        """The dense ``(seq_len_q, seq_len_kv)`` bool mask, True where the key is seen."""
        shift = 0
        if self.variant == CausalVariant.LOWER_RIGHT:
            shift = self.seq_len_kv - self.seq_len_q
        seen = np.tri(self.seq_len_q, self.seq_len_kv, shift, dtype=bool)
        return tensor(seen, device=device)

    def __repr__(self) -> str:
        return repr(self._materialize())


def causal_upper_left(*size: int) -> CausalBias:
    """The upper-left causal mask for ``(seq_len_q, seq_len_kv)`` (``is_causal=True``'s)."""
    if len(size) != 2:
        raise ValueError(f"causal_upper_left: expected (seq_len_q, seq_len_kv), got {size}")
    return CausalBias(CausalVariant.UPPER_LEFT, *size)


def causal_lower_right(*size: int) -> CausalBias:
    """The lower-right causal mask for ``(seq_len_q, seq_len_kv)``: the last query sees
    every key."""
    if len(size) != 2:
        raise ValueError(f"causal_lower_right: expected (seq_len_q, seq_len_kv), got {size}")
    return CausalBias(CausalVariant.LOWER_RIGHT, *size)
