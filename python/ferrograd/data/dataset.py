"""MegEngine's dataset classes: abstract ``Dataset`` / ``StreamDataset`` (instantiating
either directly is a TypeError, as with any ABC that has abstract methods), ``ArrayDataset``
over equal-length arrays and ``ConcatDataset`` chaining map-style datasets."""

from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any


class Dataset(ABC):
    """A map-style dataset: subclasses define ``__init__``, ``__getitem__`` and ``__len__``.

    Samples are usually tuples of numpy arrays; the DataLoader's sampler picks the keys."""

    @abstractmethod
    def __init__(self) -> None:
        pass

    @abstractmethod
    def __getitem__(self, index: Any) -> Any:
        pass

    @abstractmethod
    def __len__(self) -> int:
        pass


class StreamDataset(Dataset):
    """An iterable dataset: subclasses define ``__init__`` and ``__iter__``; it has no
    length and cannot be indexed, so it pairs with a ``StreamSampler``."""

    @abstractmethod
    def __init__(self) -> None:
        pass

    @abstractmethod
    def __iter__(self) -> Iterator[Any]:
        pass

    def __getitem__(self, index: Any) -> Any:
        raise AssertionError("StreamDataset: a stream cannot be indexed; iterate it instead")

    def __len__(self) -> int:
        raise AssertionError("StreamDataset: a stream has no length")


class ArrayDataset(Dataset):
    """Samples are the ``index``-th rows of each array, returned as a tuple.

    Every array must have the same length (first dimension); otherwise ValueError."""

    def __init__(self, *arrays: Any) -> None:
        super().__init__()
        if not arrays:
            raise ValueError("ArrayDataset: expected at least one array")
        lengths = [len(a) for a in arrays]
        if any(n != lengths[0] for n in lengths):
            raise ValueError(f"ArrayDataset: lengths of input arrays are inconsistent: {lengths}")
        self.arrays = arrays

    def __getitem__(self, index: int) -> tuple:
        return tuple(a[index] for a in self.arrays)

    def __len__(self) -> int:
        return len(self.arrays[0])


class ConcatDataset(Dataset):
    """Map-style datasets one after the other: index ``i`` falls in the first dataset whose
    running length exceeds it."""

    def __init__(self, datasets: Sequence[Dataset]) -> None:
        super().__init__()
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, StreamDataset):
                raise TypeError("ConcatDataset: a StreamDataset cannot be concatenated")
        self.cumulative_sizes: list[int] = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __getitem__(self, idx: int) -> Any:
        n = len(self)
        if idx < 0:
            if -idx > n:
                raise ValueError(f"ConcatDataset: index {idx} is out of range for length {n}")
            idx += n
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        if which >= len(self.datasets):
            raise IndexError(f"ConcatDataset: index {idx} is out of range for length {n}")
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - start]

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]


__all__ = ["ArrayDataset", "ConcatDataset", "Dataset", "StreamDataset"]
