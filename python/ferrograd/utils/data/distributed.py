"""``torch.utils.data.distributed.DistributedSampler``: each rank of a data-parallel job
reads its own equal share of a dataset (see :func:`ferrograd.distributed.shard`)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from . import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    """This rank's indices of ``dataset``: ``ceil(len / num_replicas)`` of them (the list is
    padded by repeating its start, or cut to a multiple of ``num_replicas`` with
    ``drop_last``), rank ``r`` taking every ``num_replicas``-th from ``r``; with ``shuffle``
    the order is PyTorch's permutation for ``seed + epoch`` (the same indices as its
    sampler), the same on every rank, so call :meth:`set_epoch` at the start of each epoch. ``num_replicas`` and ``rank`` default to
    the initialised process group's (one process, rank 0, without one)."""

    def __init__(
        self,
        dataset: Any,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        from ... import distributed as dist

        if num_replicas is None:
            num_replicas = dist.get_world_size() if dist.is_initialized() else 1
        if rank is None:
            rank = dist.get_rank() if dist.is_initialized() else 0
        if not isinstance(num_replicas, int) or num_replicas < 1:
            raise ValueError(
                f"DistributedSampler: num_replicas must be a positive int, got {num_replicas!r}"
            )
        if not isinstance(rank, int) or not 0 <= rank < num_replicas:
            raise ValueError(
                f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]"
            )
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, int(seed), drop_last, 0
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self) -> Iterator[int]:
        from ...distributed import _torch_randperm

        n = len(self.dataset)
        if self.shuffle:
            order = _torch_randperm(n, self.seed + self.epoch)
        else:
            order = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(order)
            if pad > 0 and order:
                order += (order * math.ceil(pad / len(order)))[:pad]
        else:
            order = order[: self.total_size]
        return iter(order[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next pass shuffles for (every rank must set the same)."""
        self.epoch = int(epoch)
