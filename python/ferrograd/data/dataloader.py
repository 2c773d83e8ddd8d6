"""MegEngine's ``DataLoader``: sampler -> dataset -> transform -> collator, one batch of
numpy arrays per step.

``num_workers > 0`` loads map-style batches on that many threads (in order, up to
``num_workers`` batches ahead); a stream is always read in order on one reader. ``timeout``
(seconds, 0 = wait forever) bounds the wait for one batch; exceeding it raises
RuntimeError. ``preload=True`` hands out Tensors instead of numpy arrays."""

from __future__ import annotations

import collections.abc
import queue
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as _FutureTimeout
from typing import Any

import numpy as np

from .collator import Collator
from .dataset import Dataset, StreamDataset
from .sampler import MapSampler, Sampler, SequentialSampler, StreamSampler
from .transform import PseudoTransform, Transform


class WorkerInfo:
    """What ``get_worker_info()`` returns inside a loading worker: ``idx``, ``worker``
    (the number of workers) and ``seed``. Read-only."""

    def __init__(self, **kwargs: Any) -> None:
        object.__setattr__(self, "_keys", tuple(kwargs))
        for k, v in kwargs.items():
            object.__setattr__(self, k, v)

    def __setattr__(self, key: str, value: Any) -> None:
        raise RuntimeError(f"cannot assign attributes to {type(self).__name__} objects")

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._keys)
        return f"{type(self).__name__}({body})"


_local = threading.local()


def get_worker_info() -> WorkerInfo | None:
    """The calling worker's ``WorkerInfo``; None in the main thread."""
    return getattr(_local, "info", None)


def _timeout_error(timeout: float) -> RuntimeError:
    return RuntimeError(f"DataLoader: dataloader timeout: no batch within {timeout} seconds")


def _to_tensor(batch: Any) -> Any:
    from .. import tensor

    if isinstance(batch, np.ndarray) and batch.dtype.kind in "biuf":
        return tensor(batch)
    if isinstance(batch, collections.abc.Mapping):
        return {k: _to_tensor(v) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(_to_tensor(v) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_tensor(v) for v in batch)
    return batch


class DataLoader:
    """Iterates ``dataset`` in the batches ``sampler`` picks, each sample passed through
    ``transform`` and the batch merged by ``collator``.

    Defaults: ``SequentialSampler(dataset, batch_size=1)`` for a map-style dataset,
    ``StreamSampler(batch_size=1)`` for a ``StreamDataset``, ``PseudoTransform()`` and
    ``Collator()``. ``divide`` is accepted for MegEngine 1.x compatibility; workers always
    load whole batches."""

    def __init__(
        self,
        dataset: Dataset,
        sampler: Sampler | None = None,
        transform: Transform | None = None,
        collator: Collator | None = None,
        num_workers: int = 0,
        timeout: float = 0,
        divide: bool = False,
        preload: bool = False,
        parallel_stream: bool = False,
    ) -> None:
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers should not be negative, got {num_workers}")
        if timeout < 0:
            raise ValueError(f"DataLoader: timeout should not be negative, got {timeout}")
        self.dataset = dataset
        self.num_workers = num_workers
        self.timeout = timeout
        self.divide = divide
        self.preload = preload
        self.parallel_stream = parallel_stream
        if isinstance(dataset, StreamDataset):
            self.sampler: Any = sampler if sampler is not None else StreamSampler(batch_size=1)
            if not isinstance(self.sampler, StreamSampler):
                raise TypeError(
                    "DataLoader: a StreamDataset needs a StreamSampler, got "
                    f"{type(self.sampler).__name__}"
                )
            self.datakind = "stream"
        else:
            if not isinstance(dataset, Dataset):
                raise TypeError(
                    "DataLoader: dataset should be a ferrograd.data.dataset.Dataset, got "
                    f"{type(dataset).__name__}"
                )
            self.sampler = (
                sampler
                if sampler is not None
                else SequentialSampler(dataset, batch_size=1, drop_last=False)
            )
            if not isinstance(self.sampler, MapSampler):
                raise TypeError(
                    "DataLoader: a map-style dataset needs a MapSampler, got "
                    f"{type(self.sampler).__name__}"
                )
            self.datakind = "map"
        self.transform = transform if transform is not None else PseudoTransform()
        self.collator = collator if collator is not None else Collator()

    def __len__(self) -> int:
        if self.datakind == "stream":
            raise TypeError("DataLoader: a stream has no length")
        return len(self.sampler)

    def __iter__(self) -> Iterator[Any]:
        it = self._stream() if self.datakind == "stream" else self._map()
        if self.preload:
            return (_to_tensor(b) for b in it)
        return it

    def _load(self, indices: list) -> Any:
        items = [self.dataset[i] for i in indices]
        return self.collator.apply(self.transform.apply_batch(items))

    def _map(self) -> Iterator[Any]:
        batches = iter(self.sampler)
        if self.num_workers == 0:
            for indices in batches:
                yield self._load(indices)
            return
        counter = iter(range(1 << 62))
        lock = threading.Lock()

        def init() -> None:
            with lock:
                idx = next(counter)
            _local.info = WorkerInfo(idx=idx, worker=self.num_workers, seed=None)

        pool = ThreadPoolExecutor(self.num_workers, initializer=init)
        pending: collections.deque[Future] = collections.deque()
        try:
            for indices in batches:
                pending.append(pool.submit(self._load, indices))
                if len(pending) > self.num_workers:
                    yield self._result(pending.popleft())
            while pending:
                yield self._result(pending.popleft())
        finally:
            for f in pending:
                f.cancel()
            pool.shutdown(wait=False)

    def _result(self, fut: Future) -> Any:
        try:
            return fut.result(timeout=self.timeout or None)
        except _FutureTimeout:
            raise _timeout_error(self.timeout) from None

    def _stream(self) -> Iterator[Any]:
        source = iter(self.dataset)
        batch_size = self.sampler.batch_size
        if not self.timeout:
            while True:
                try:
                    items = [self.transform.apply(next(source)) for _ in range(batch_size)]
                except (StopIteration, RuntimeError) as e:
                    if isinstance(e, RuntimeError) and not isinstance(e.__cause__, StopIteration):
                        raise
                    return
                yield self.collator.apply(items)
        # With a timeout the stream is read on a reader thread so a stalled source can be
        # abandoned; the reader fetches one sample per request, never ahead of the loader.
        requests: queue.Queue = queue.Queue()
        results: queue.Queue = queue.Queue()

        def reader() -> None:
            while requests.get():
                try:
                    results.put((True, next(source)))
                except BaseException as e:  # noqa: BLE001 (handed to the loader's thread)
                    results.put((False, e))
                    return

        threading.Thread(target=reader, daemon=True).start()
        try:
            while True:
                start = time.monotonic()
                items = []
                for _ in range(batch_size):
                    requests.put(True)
                    left = self.timeout - (time.monotonic() - start)
                    try:
                        ok, value = results.get(timeout=max(left, 0.0))
                    except queue.Empty:
                        raise _timeout_error(self.timeout) from None
                    if not ok:
                        if isinstance(value, StopIteration) or isinstance(
                            value.__cause__, StopIteration
                        ):
                            return
                        raise value
                    items.append(self.transform.apply(value))
                yield self.collator.apply(items)
        finally:
            requests.put(False)


__all__ = ["DataLoader", "WorkerInfo", "get_worker_info"]
