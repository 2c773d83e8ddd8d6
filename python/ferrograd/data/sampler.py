"""MegEngine's samplers. Unlike PyTorch's, a sampler here yields whole batches: lists of
``batch_size`` indices (the last one shorter unless ``drop_last``). Map samplers split the
indices over ``world_size`` ranks (each rank gets ``ceil(num_samples / world_size)``, the
list padded by wrapping around) and draw from their own ``np.random.RandomState(seed)``."""

from __future__ import annotations

import collections.abc
import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

import numpy as np


def _dist_default(world_size: int | None, rank: int | None) -> tuple[int, int]:
    if world_size is not None and rank is not None:
        return world_size, rank
    from .. import distributed as dist

    on = dist.is_initialized()
    if world_size is None:
        world_size = dist.get_world_size() if on else 1
    if rank is None:
        rank = dist.get_rank() if on else 0
    return world_size, rank


class Sampler(ABC):
    """Base of all samplers."""

    @abstractmethod
    def __init__(self) -> None:
        pass


class MapSampler(Sampler):
    """Base of the samplers over a map-style dataset; subclasses define ``sample()``, the
    full list of indices for one pass, which ``batch()`` scatters over ranks and batches."""

    def __init__(
        self,
        dataset: Any,
        batch_size: int = 1,
        drop_last: bool = False,
        num_samples: int | None = None,
        world_size: int | None = None,
        rank: int | None = None,
        seed: int | None = None,
    ) -> None:
        name = type(self).__name__
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"{name}: batch_size should be a positive int, got {batch_size!r}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"{name}: drop_last should be a bool, got {drop_last!r}")  # noqa: TRY004 (MegEngine raises ValueError)
        if num_samples is not None and (
            not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0
        ):
            raise ValueError(f"{name}: num_samples should be a positive int, got {num_samples!r}")
        world_size, rank = _dist_default(world_size, rank)
        if world_size <= 0 or not 0 <= rank < world_size:
            raise ValueError(
                f"{name}: rank should be in [0, world_size), got rank={rank}, "
                f"world_size={world_size}"
            )
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.world_size = world_size
        self.rank = rank
        total = len(dataset) if num_samples is None else num_samples
        self.num_samples = math.ceil(total / world_size)
        if self.num_samples < batch_size:
            raise ValueError(
                f"{name}: num_samples per rank ({self.num_samples}) should not be smaller "
                f"than batch_size ({batch_size})"
            )
        # Every rank must shuffle the same way, so a distributed sampler gets a fixed seed.
        if seed is None and world_size > 1:
            seed = 0
        self.seed = seed
        self.rng = np.random.RandomState(seed)

    def __iter__(self) -> Iterator[list]:
        return self.batch()

    def __len__(self) -> int:
        if self.drop_last:
            return self.num_samples // self.batch_size
        return math.ceil(self.num_samples / self.batch_size)

    def sample(self) -> Any:
        """All indices of one pass, before scattering over ranks."""
        raise NotImplementedError

    def scatter(self, indices: list) -> list:
        """This rank's share of ``indices``: every ``world_size``-th from ``rank``, after
        padding the list (wrapping around) to ``num_samples * world_size``."""
        total = self.num_samples * self.world_size
        while len(indices) < total:
            indices = indices + indices[: total - len(indices)]
        return indices[self.rank : total : self.world_size]

    def batch(self) -> Iterator[list]:
        """Yield the batches of one pass."""
        indices = list(self.sample())
        if self.world_size > 1:
            indices = self.scatter(indices)
        for start in range(0, len(indices), self.batch_size):
            chunk = indices[start : start + self.batch_size]
            if len(chunk) < self.batch_size and self.drop_last:
                return
            yield chunk


def _check_indices(name: str, indices: Any) -> None:
    if indices is not None and not isinstance(indices, collections.abc.Sequence):
        raise ValueError(f"{name}: indices should be None or a sequence, got {indices!r}")


class SequentialSampler(MapSampler):
    """Indices in order: ``range(len(dataset))`` or the given ``indices``."""

    def __init__(
        self,
        dataset: Any,
        batch_size: int = 1,
        drop_last: bool = False,
        indices: Any = None,
        world_size: int | None = None,
        rank: int | None = None,
    ) -> None:
        super().__init__(dataset, batch_size, drop_last, None, world_size, rank)
        _check_indices("SequentialSampler", indices)
        self.indices = indices

    def sample(self) -> Any:
        if self.indices is None:
            return range(len(self.dataset))
        return self.indices


class RandomSampler(MapSampler):
    """A fresh permutation of the indices on every pass (without replacement)."""

    def __init__(
        self,
        dataset: Any,
        batch_size: int = 1,
        drop_last: bool = False,
        indices: Any = None,
        world_size: int | None = None,
        rank: int | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(dataset, batch_size, drop_last, None, world_size, rank, seed)
        _check_indices("RandomSampler", indices)
        self.indices = indices

    def sample(self) -> list:
        if self.indices is None:
            return self.rng.permutation(len(self.dataset)).tolist()
        return self.rng.permutation(self.indices).tolist()


class ReplacementSampler(MapSampler):
    """``num_samples`` indices drawn with replacement, with probability proportional to
    ``weights`` (uniform when None)."""

    def __init__(
        self,
        dataset: Any,
        batch_size: int = 1,
        drop_last: bool = False,
        num_samples: int | None = None,
        weights: Any = None,
        world_size: int | None = None,
        rank: int | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(dataset, batch_size, drop_last, num_samples, world_size, rank, seed)
        if weights is not None:
            if not isinstance(weights, (collections.abc.Sequence, np.ndarray)):
                raise ValueError(
                    f"ReplacementSampler: weights should be None or a sequence, got {weights!r}"
                )
            if len(weights) != len(dataset):
                raise ValueError(
                    f"ReplacementSampler: len(weights)={len(weights)} should equal "
                    f"len(dataset)={len(dataset)}"
                )
            w = np.asarray(weights, dtype=np.float64)
            if (w < 0).any() or not w.sum() > 0:
                raise ValueError(
                    "ReplacementSampler: weights should be non-negative with a positive sum"
                )
            self.weights: np.ndarray | None = w / w.sum()
        else:
            self.weights = None

    def sample(self) -> list:
        n = len(self.dataset)
        size = self.num_samples * self.world_size
        return self.rng.choice(n, size=size, replace=True, p=self.weights).tolist()


class Infinite(MapSampler):
    """Wraps a map sampler and restarts it whenever a pass ends, so iteration never stops.

    Attributes it does not have itself (``batch_size``, ``dataset``, ...) are the wrapped
    sampler's."""

    def __init__(self, sampler: MapSampler) -> None:
        self.sampler = sampler
        self.sampler_iter = iter(sampler)

    def sample(self) -> Any:
        raise NotImplementedError("Infinite: sample() is not supported; iterate the sampler")

    def __iter__(self) -> Infinite:
        return self

    def __next__(self) -> list:
        try:
            return next(self.sampler_iter)
        except StopIteration:
            self.sampler_iter = iter(self.sampler)
            return next(self.sampler_iter)

    def __len__(self) -> int:
        return int(np.iinfo(np.int64).max)

    def __getattr__(self, name: str) -> Any:
        if name in ("sampler", "sampler_iter") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.sampler, name)


class StreamSampler(Sampler):
    """Sampler for a ``StreamDataset``: only its ``batch_size`` matters (the loader takes
    that many samples from the stream per batch); it yields running counters."""

    def __init__(self, batch_size: int = 1) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(
                f"StreamSampler: batch_size should be a positive int, got {batch_size!r}"
            )
        self.batch_size = batch_size

    def __iter__(self) -> Iterator[list]:
        return self.batch()

    def sample(self) -> Iterator[int]:
        return itertools.count()

    def batch(self) -> Iterator[list]:
        it = self.sample()
        while True:
            yield list(itertools.islice(it, self.batch_size))


__all__ = [
    "Infinite",
    "MapSampler",
    "RandomSampler",
    "ReplacementSampler",
    "Sampler",
    "SequentialSampler",
    "StreamSampler",
]
