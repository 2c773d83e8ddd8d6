"""MegEngine's ``Collator``: merges a list of samples into one batch of numpy arrays."""

from __future__ import annotations

import collections.abc
from collections.abc import Sequence
from typing import Any

import numpy as np


def _err(found: Any) -> TypeError:
    return TypeError(
        "Collator.apply: samples must be numpy arrays, numbers, strings, bytes, dicts or "
        f"sequences; found {found}"
    )


class Collator:
    """Stacks samples field by field: arrays along a new first axis, Python numbers into one
    array, dicts key by key, tuples/lists position by position; strings stay a list."""

    def apply(self, inputs: Sequence[Any]) -> Any:
        """Merge ``inputs`` (one entry per sample) into a batch."""
        elem = inputs[0]
        if isinstance(elem, np.ndarray):
            if elem.dtype.kind in "OSUa":
                raise _err(elem.dtype)
            return np.ascontiguousarray(np.stack(inputs))
        if isinstance(elem, np.generic) and not isinstance(elem, (np.str_, np.bytes_)):
            return np.array(inputs)
        if isinstance(elem, bool):
            return np.array(inputs)
        if isinstance(elem, float):
            return np.array(inputs, dtype=np.float64)
        if isinstance(elem, int):
            return np.array(inputs)
        if isinstance(elem, (str, bytes)):
            return inputs
        if isinstance(elem, collections.abc.Mapping):
            return {k: self.apply([d[k] for d in inputs]) for k in elem}
        if isinstance(elem, tuple) and hasattr(elem, "_fields"):
            return type(elem)(*(self.apply(list(s)) for s in zip(*inputs)))
        if isinstance(elem, collections.abc.Sequence):
            return [self.apply(list(s)) for s in zip(*inputs)]
        raise _err(type(elem))


__all__ = ["Collator"]
