"""Datasets and batch loading with PyTorch's names (``torch.utils.data``): ``Dataset``,
``TensorDataset``, ``Subset``, ``ConcatDataset``, ``random_split``, the samplers and
``DataLoader`` with ``default_collate``; shuffling draws from ``fg.manual_seed``'s
generator, or from ``generator`` (a ``numpy.random.Generator`` or a seed).

``num_workers > 0`` loads batches ahead in that many worker *threads* of the calling process
(not processes, as PyTorch uses): ``prefetch_factor`` batches per worker are in flight, batches
come out in sampler order, ``worker_init_fn(worker_id)`` runs in each worker and
``get_worker_info()`` tells a dataset which worker it runs in (an ``IterableDataset`` is
iterated once per worker, as PyTorch does, so it should shard itself). Threads overlap
loading with training where the loading releases the GIL (file reads, numpy, ferrograd ops);
pure-Python loading code still runs one thread at a time."""

from __future__ import annotations

import bisect
import concurrent.futures
import copy
import itertools
import math
import queue
import threading
import weakref
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Callable

import numpy as np

from ... import _core
from ..._core import Tensor
from ..._tensor import tensor
from ...random import _numpy_rng

__all__ = [
    "BatchSampler",
    "ChainDataset",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "DistributedSampler",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "StackDataset",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "WeightedRandomSampler",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "random_split",
]


class WorkerInfo:
    """What ``get_worker_info()`` returns inside a loading worker: ``id``, ``num_workers``,
    ``seed`` and the ``dataset``."""

    def __init__(self, id: int, num_workers: int, seed: int, dataset: Any) -> None:
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self) -> str:
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed})"


_worker = threading.local()


def get_worker_info() -> WorkerInfo | None:
    """The ``WorkerInfo`` of the DataLoader worker this code runs in; ``None`` in the main
    thread (``num_workers=0``)."""
    return getattr(_worker, "info", None)


class Dataset:
    """A map-style dataset: ``__getitem__(index)`` and ``__len__``."""

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset read by iterating over it (``__iter__``); ``a + b`` chains two."""

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError

    def __add__(self, other: Dataset) -> ChainDataset:  # type: ignore[override]
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """Iterable datasets read one after another, each when the previous one is exhausted
    (its length, where asked, the sum of theirs)."""

    def __init__(self, datasets: Iterable[Any]) -> None:
        self.datasets = datasets

    def _parts(self) -> Iterator[Any]:
        for i, d in enumerate(self.datasets):
            if not isinstance(d, IterableDataset):
                raise AssertionError(  # noqa: TRY004 - the type PyTorch raises
                    f"ChainDataset only supports IterableDataset (part {i} is a {type(d).__name__})"
                )
            yield d

    def __iter__(self) -> Iterator[Any]:
        for d in self._parts():
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self._parts())


class StackDataset(Dataset):
    """Datasets of one length side by side: ``StackDataset(a, b)[i]`` is ``(a[i], b[i])``,
    ``StackDataset(x=a, y=b)[i]`` is ``{"x": a[i], "y": b[i]}``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise ValueError(
                "StackDataset: give the datasets either positionally (items are tuples) or by "
                "keyword (items are dicts), not both"
            )
        if not args and not kwargs:
            raise ValueError("StackDataset: at least one dataset should be passed")
        self.datasets: tuple | dict = args if args else dict(kwargs)
        parts = list(args) if args else list(kwargs.values())
        lengths = [len(d) for d in parts]
        if len(set(lengths)) != 1:
            raise ValueError(f"StackDataset: size mismatch between datasets (lengths {lengths})")
        self._length = lengths[0]

    def __getitem__(self, index: int) -> Any:
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list) -> list:
        """The items of ``indices``, each part read in one batch where it can
        (``__getitems__``)."""

        def column(d: Any) -> list:
            many = getattr(d, "__getitems__", None)
            if callable(many):
                got = list(many(indices))
                if len(got) != len(indices):
                    raise ValueError(
                        f"StackDataset: a part returned {len(got)} items for {len(indices)} indices"
                    )
                return got
            return [d[i] for i in indices]

        if isinstance(self.datasets, dict):
            cols = {k: column(d) for k, d in self.datasets.items()}
            return [{k: c[j] for k, c in cols.items()} for j in range(len(indices))]
        cols_t = [column(d) for d in self.datasets]
        return [tuple(c[j] for c in cols_t) for j in range(len(indices))]

    def __len__(self) -> int:
        return self._length


class TensorDataset(Dataset):
    """Rows of tensors that share their first dimension: item ``i`` is ``(t[i] for t)``."""

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset: needs at least one tensor")
        n = tensors[0].shape[0] if tensors[0].ndim else None
        for i, t in enumerate(tensors):
            if t.ndim == 0 or t.shape[0] != n:
                raise ValueError(
                    f"TensorDataset: every tensor needs the same first dimension ({n}); "
                    f"tensors[{i}] has shape {list(t.shape)}"
                )
        self.tensors = tensors

    def __getitem__(self, index: int) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The items of ``dataset`` at ``indices``. A list of positions is handed to ``dataset``
    as one list of its indices (``Subset(TensorDataset(t), [9, 8])[[0, 1]]`` is
    ``(t[[9, 8]],)``), a slice as the sliced indices, as PyTorch does."""

    def __init__(self, dataset: Any, indices: Sequence[int]) -> None:
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __getitems__(self, indices: list[int]) -> list[Any]:
        """The samples at ``indices`` (a DataLoader's batch), through the dataset's own
        ``__getitems__`` where it has one."""
        many = getattr(self.dataset, "__getitems__", None)
        if many is not None:
            return many([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)


class _DatasetsError(AssertionError, ValueError):
    """ConcatDataset's refusal of its datasets: an AssertionError as PyTorch raises, and a
    ValueError as it was here before."""


class _IndexValueError(ValueError, IndexError):
    """A negative index past the start: a ValueError as PyTorch raises, and an IndexError as
    it was here before."""


class ConcatDataset(Dataset):
    """Several datasets one after another."""

    def __init__(self, datasets: Iterable[Any]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise _DatasetsError("ConcatDataset: datasets should not be an empty iterable")
        for i, d in enumerate(self.datasets):
            if isinstance(d, IterableDataset):
                raise _DatasetsError(
                    f"ConcatDataset does not support IterableDataset (datasets[{i}] is a "
                    f"{type(d).__name__})"
                )
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int) -> Any:
        if index < 0:
            if -index > len(self):
                raise _IndexValueError(
                    f"ConcatDataset: absolute value of index should not exceed dataset length "
                    f"(index {index}, length {len(self)})"
                )
            index += len(self)
        d = bisect.bisect_right(self.cumulative_sizes, index)
        start = 0 if d == 0 else int(self.cumulative_sizes[d - 1])
        return self.datasets[d][index - start]


def _rng(generator: Any) -> np.random.Generator:
    from ...random import Generator

    if generator is None:
        return _numpy_rng("cpu")
    if isinstance(generator, Generator):
        return generator._stream()
    if isinstance(generator, np.random.Generator):
        return generator
    if isinstance(generator, (int, np.integer)):
        return np.random.default_rng(int(generator))
    raise TypeError(
        "generator must be None, an fg.Generator, a numpy Generator or a seed, got "
        f"{type(generator).__name__}"
    )


def random_split(dataset: Any, lengths: Sequence[float], generator: Any = None) -> list[Subset]:
    """Splits ``dataset`` into non-overlapping random subsets of the given lengths (or
    fractions summing to 1, remainders handed out round-robin, as PyTorch)."""
    n = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1.0) and sum(lengths) <= 1:
        # fractions (also [1, 0], as PyTorch reads lengths that sum to 1)
        for i, f in enumerate(lengths):
            if not 0 <= f <= 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
        counts = [math.floor(n * f) for f in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError(
            f"random_split: the lengths sum to {sum(lengths)}, the dataset has {n} items"
        )
    perm = _rng(generator).permutation(n).tolist()
    out, start = [], 0
    for k in lengths:
        out.append(Subset(dataset, perm[start : start + int(k)]))
        start += int(k)
    return out


class Sampler:
    """Yields indices into a dataset."""

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source: Any) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation per pass (or ``num_samples`` draws with ``replacement``)."""

    def __init__(
        self,
        data_source: Any,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: Any = None,
    ) -> None:
        if not isinstance(replacement, bool):
            raise TypeError(
                f"RandomSampler: replacement should be a boolean value, but got "
                f"replacement={replacement!r}"
            )
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator
        n = self.num_samples
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise ValueError(
                f"RandomSampler: num_samples should be a positive integer value, but got "
                f"num_samples={n!r}"
            )

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        g, n = _rng(self.generator), len(self.data_source)
        if self.replacement:
            return self._with_replacement(g, n)
        idx: list[int] = []
        while len(idx) < self.num_samples:
            idx.extend(g.permutation(n).tolist())
        return iter(idx[: self.num_samples])

    def __len__(self) -> int:
        return self.num_samples

    def _with_replacement(self, g: np.random.Generator, n: int) -> Iterator[int]:
        # drawn a chunk at a time, so num_samples can be huge (an endless loader)
        left = self.num_samples
        while left > 0:
            k = min(left, 1024)
            yield from g.integers(0, n, k).tolist()
            left -= k


class SubsetRandomSampler(Sampler):
    """The given indices, in random order."""

    def __init__(self, indices: Sequence[int], generator: Any = None) -> None:
        self.indices, self.generator = list(indices), generator

    def __iter__(self) -> Iterator[int]:
        return iter([self.indices[i] for i in _rng(self.generator).permutation(len(self.indices))])

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights`` (with
    ``replacement``, or without: each index at most once)."""

    def __init__(
        self,
        weights: Sequence[float],
        num_samples: int,
        replacement: bool = True,
        generator: Any = None,
    ) -> None:
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples <= 0:
            raise ValueError(
                f"WeightedRandomSampler: num_samples must be a positive int, got {num_samples!r}"
            )
        if not isinstance(replacement, bool):
            raise ValueError(  # noqa: TRY004  (PyTorch's exception type)
                f"WeightedRandomSampler: replacement must be a bool, got {replacement!r}"
            )
        w = weights.detach().numpy() if isinstance(weights, Tensor) else weights
        w = np.asarray(w, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(
                "WeightedRandomSampler: weights should be a 1d sequence but given weights have "
                f"shape {tuple(w.shape)}"
            )
        if w.size == 0 or not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
            raise ValueError(
                "WeightedRandomSampler: weights must be finite, non-negative and not all zero"
            )
        if not replacement and num_samples > np.count_nonzero(w):
            raise ValueError(
                f"WeightedRandomSampler: cannot draw {num_samples} samples without "
                f"replacement from {np.count_nonzero(w)} indices of nonzero weight"
            )
        self.weights, self.num_samples = w, num_samples
        self.replacement, self.generator = replacement, generator

    def __iter__(self) -> Iterator[int]:
        g = _rng(self.generator)
        p = self.weights / self.weights.sum()
        idx = g.choice(p.size, size=self.num_samples, replace=self.replacement, p=p)
        return iter(idx.tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups a sampler's indices into lists of ``batch_size``."""

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"BatchSampler: batch_size must be a positive int, got {batch_size!r}")
        if not isinstance(drop_last, bool):
            raise ValueError(  # noqa: TRY004  (PyTorch's exception type)
                f"BatchSampler: drop_last should be a boolean value, but got drop_last={drop_last!r}"
            )
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


def _is_numpy(x: Any) -> bool:
    """A numpy array or scalar that collates as numbers (numpy strings collate as str)."""
    return isinstance(x, (np.ndarray, np.generic)) and not isinstance(x, (str, bytes))


def _numbers(batch: Sequence[Any]) -> Tensor:
    """The batch of scalars as one tensor whose dtype all of them decide, as ``torch.tensor``
    does: a Python bool is bool, an int int64, a float the default dtype, a numpy scalar its
    own dtype, promoted together (``[1, 2.5]`` is float32, ``[True, 2]`` int64,
    ``[np.int32(1), 2.5]`` float32)."""
    items = list(batch)
    np_items = [b for b in items if isinstance(b, np.generic)]
    if not np_items:
        return tensor(items)
    from ..._tensor import get_default_dtype

    default = get_default_dtype()
    float_dt = default if isinstance(default, np.dtype) else np.dtype(np.float32)
    dts = []
    for b in items:
        if isinstance(b, np.generic):
            dts.append(b.dtype)
        elif isinstance(b, (bool, np.bool_)):
            dts.append(np.dtype(bool))
        elif isinstance(b, int):
            dts.append(np.dtype(np.int64))
        elif isinstance(b, float):
            dts.append(float_dt)
        else:
            raise TypeError(
                f"default_collate: cannot batch a {type(b).__name__} with numbers: {items!r}"
            )
    floats = [d for d in dts if d.kind == "f"]
    # an integer with a float gives the float's dtype (torch's promotion; numpy widens)
    dt = np.result_type(*(floats or dts))
    if float_dt is not default and dt == float_dt and float_dt not in [b.dtype for b in np_items]:
        # the default dtype is not a numpy one (bfloat16): Python floats decided the dtype
        return tensor(np.array(items, dtype=np.float64), dtype=default)
    return tensor(np.array(items, dtype=dt))


def _same_type(sample: Any, values: Any) -> Any:
    """``values`` (a dict or a list) in the container type of ``sample`` where that type can
    be rebuilt (an OrderedDict stays one, a list subclass stays that subclass), else plain."""
    from collections.abc import MutableMapping, MutableSequence

    try:
        if isinstance(values, dict):
            if isinstance(sample, MutableMapping):
                out = copy.copy(sample)
                out.update(values)
                return out
            return type(sample)(values)
        if isinstance(sample, MutableSequence):
            out = copy.copy(sample)
            for i, v in enumerate(values):
                out[i] = v
            return out
        return type(sample)(values)
    except TypeError:
        return values


def default_convert(data: Any) -> Any:
    """What ``DataLoader(batch_size=None)`` does to each sample (PyTorch's
    ``default_convert``): numpy arrays and numpy scalars become tensors, the same inside
    dicts, namedtuples and lists (tuples become lists); tensors, Python numbers and strings
    are kept as they are."""
    if isinstance(data, Tensor):
        return data
    if _is_numpy(data):
        if isinstance(data, np.ndarray) and data.dtype.kind in "SaUO":
            return data
        return tensor(np.asarray(data))
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, Mapping):
        return _same_type(data, {k: default_convert(v) for k, v in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # a namedtuple
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, Sequence):
        return _same_type(data, [default_convert(d) for d in data])
    return data


def default_collate(batch: Sequence[Any]) -> Any:
    """Stacks a list of samples into a batch, as PyTorch's ``default_collate``: tensors and
    numpy arrays stacked on a new first axis; Python numbers and numpy scalars into one
    tensor whose dtype the whole batch decides (``[1, 2.5]`` is float32, numpy scalars keep
    their dtype; a batch that starts with a Python float is float64); strings kept as a list;
    mappings (of their own type, an OrderedDict stays one), namedtuples and sequences
    collated field by field (tuples become lists)."""
    first = batch[0]
    if isinstance(first, Tensor):
        return _core.stack(list(batch), 0)
    if _is_numpy(first):
        if first.dtype.kind in "SaUO":
            raise TypeError(
                f"default_collate: cannot batch numpy values of dtype {first.dtype.str}: "
                "batch must contain tensors, numpy arrays, numbers, dicts or lists"
            )
        if isinstance(first, np.ndarray):
            return _core.stack([tensor(np.asarray(b)) for b in batch], 0)
        return _numbers(batch)
    if isinstance(first, float):
        return tensor(np.array(list(batch), dtype=np.float64))
    if isinstance(first, int):
        return _numbers(batch)
    if isinstance(first, (str, bytes)):
        return batch
    if isinstance(first, Mapping):
        return _same_type(first, {k: default_collate([b[k] for b in batch]) for k in first})
    if isinstance(first, tuple) and hasattr(first, "_fields"):  # a namedtuple
        return type(first)(*(default_collate(list(f)) for f in zip(*batch)))
    if isinstance(first, Sequence):
        if any(len(b) != len(first) for b in batch):
            raise RuntimeError(
                "default_collate: each element in list of batch should be of equal size"
            )
        fields = [default_collate(list(f)) for f in zip(*batch)]
        return fields if isinstance(first, tuple) else _same_type(first, fields)
    raise TypeError(
        f"default_collate: cannot batch samples of type {type(first).__name__}: batch must "
        "contain tensors, numpy arrays, numbers, dicts or lists"
    )


class DataLoader:
    """Batches of a dataset: ``batch_size`` samples (``None``: one sample at a time, not
    collated), ``shuffle`` each pass, ``drop_last``, or a ``sampler`` / ``batch_sampler``;
    ``collate_fn`` (``default_collate``) builds a batch."""

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Any = None,
        batch_sampler: Any = None,
        num_workers: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Any = None,
        generator: Any = None,
        **kwargs: Any,
    ) -> None:
        self.dataset = dataset
        self.batch_size, self.drop_last = batch_size, drop_last
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(
                f"DataLoader: num_workers option should be a non-negative integer, got "
                f"{num_workers!r}"
            )
        prefetch_factor = kwargs.pop("prefetch_factor", None)
        persistent_workers = bool(kwargs.pop("persistent_workers", False))
        for ignored in ("multiprocessing_context", "pin_memory_device", "in_order"):
            kwargs.pop(ignored, None)
        if kwargs:
            raise TypeError(f"DataLoader: unexpected argument(s) {sorted(kwargs)}")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "DataLoader: prefetch_factor option could only be specified with num_workers > 0"
            )
        if num_workers == 0 and persistent_workers:
            raise ValueError("DataLoader: persistent_workers option needs num_workers > 0")
        if prefetch_factor is None:
            prefetch_factor = 2
        if (
            isinstance(prefetch_factor, bool)
            or not isinstance(prefetch_factor, int)
            or (prefetch_factor < 1)
        ):
            raise ValueError(
                f"DataLoader: prefetch_factor must be a positive integer, got {prefetch_factor!r}"
            )
        if timeout < 0:
            raise ValueError(f"DataLoader: timeout option should be non-negative, got {timeout}")
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.pin_memory = pin_memory
        self._pool: _WorkerPool | None = None
        self.generator = generator
        self._iterable = isinstance(dataset, IterableDataset)
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None and (
            batch_size != 1 or shuffle or sampler is not None or drop_last
        ):
            raise ValueError(
                "DataLoader: batch_sampler option is mutually exclusive with batch_size, "
                "shuffle, sampler, and drop_last"
            )
        if self._iterable:
            if shuffle or sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader: an IterableDataset takes no shuffle or sampler")
            self.sampler = None
        elif sampler is None:
            sampler = (
                RandomSampler(dataset, generator=generator)
                if shuffle
                else SequentialSampler(dataset)
            )
        self.sampler = sampler
        if batch_sampler is None and batch_size is not None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_sampler = batch_sampler
        self.collate_fn = (
            collate_fn
            if collate_fn is not None
            else (
                default_collate
                if batch_size is not None or batch_sampler is not None
                else default_convert
            )
        )
        self._initialized = True

    _FIXED = (
        "batch_size",
        "batch_sampler",
        "sampler",
        "drop_last",
        "dataset",
        "persistent_workers",
    )

    def __setattr__(self, name: str, value: Any) -> None:
        # the sampling set up in __init__ is built from these: changing one later would
        # leave the others describing a different loader, so PyTorch refuses it
        if name in self._FIXED and self.__dict__.get("_initialized", False):
            raise ValueError(
                f"{name} attribute should not be set after {type(self).__name__} is initialized"
            )
        super().__setattr__(name, value)

    def __iter__(self) -> Iterator[Any]:
        # every pass draws the workers' base seed (with or without workers, as PyTorch), so
        # the shuffle order does not depend on num_workers
        self._seed = self._base_seed()
        if self.num_workers > 0:
            if self._iterable:
                yield from self._iter_iterable_workers()
            else:
                yield from self._iter_workers()
            return
        if self._iterable:
            yield from self._iter_iterable()
            return
        for idx in self.sampler if self.batch_sampler is None else self.batch_sampler:
            yield self._fetch(idx)

    def _iter_iterable(self) -> Iterator[Any]:
        if self.batch_size is None:
            for item in self.dataset:
                yield self.collate_fn(item)
            return
        batch: list[Any] = []
        for item in self.dataset:
            batch.append(item)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    # -- worker threads ------------------------------------------------------------------

    def _base_seed(self) -> int:
        return int(_rng(self.generator).integers(0, 2**62))

    def _fetch(self, idx: Any) -> Any:
        if self.batch_sampler is None:
            return self.collate_fn(self.dataset[idx])
        many = getattr(self.dataset, "__getitems__", None)
        if many is not None:  # a dataset that loads a batch of indices at once
            return self.collate_fn(many(list(idx)))
        return self.collate_fn([self.dataset[i] for i in idx])

    def _wait(self, fut: concurrent.futures.Future) -> Any:
        try:
            return fut.result(timeout=self.timeout or None)
        except concurrent.futures.TimeoutError:
            raise RuntimeError(
                f"DataLoader timed out after {self.timeout} seconds waiting for a batch"
            ) from None

    def _start_pool(self) -> _WorkerPool:
        if self._pool is not None:
            self._pool.next = 0  # a new pass hands out batches from worker 0 again
            return self._pool
        seed = self._seed

        def init(wid: int) -> None:
            _enter_worker(WorkerInfo(wid, self.num_workers, seed + wid, self.dataset))
            if self.worker_init_fn is not None:
                self.worker_init_fn(wid)

        pool = _WorkerPool(self.num_workers, init)
        if self.persistent_workers:
            self._pool = pool
            weakref.finalize(self, pool.shutdown)
        return pool

    def _iter_workers(self) -> Iterator[Any]:
        pool = self._start_pool()
        tasks = iter(self.sampler if self.batch_sampler is None else self.batch_sampler)
        pending: deque[concurrent.futures.Future] = deque()
        try:
            for idx in itertools.islice(tasks, self.num_workers * self.prefetch_factor):
                pending.append(pool.submit(self._fetch, idx))
            while pending:
                batch = self._wait(pending.popleft())
                for idx in itertools.islice(tasks, 1):
                    pending.append(pool.submit(self._fetch, idx))
                yield batch
        finally:
            for fut in pending:
                fut.cancel()
            if pool is not self._pool:
                pool.shutdown()

    def _iter_iterable_workers(self) -> Iterator[Any]:
        n, seed = self.num_workers, self._seed
        done = object()
        stop = threading.Event()
        queues = [queue.Queue(maxsize=self.prefetch_factor) for _ in range(n)]

        def put(q: queue.Queue, item: Any) -> bool:
            while not stop.is_set():
                try:
                    q.put(item, timeout=0.05)
                    return True
                except queue.Full:
                    continue
            return False

        def work(wid: int) -> None:
            q = queues[wid]
            _enter_worker(WorkerInfo(wid, n, seed + wid, self.dataset))
            try:
                if self.worker_init_fn is not None:
                    self.worker_init_fn(wid)
                for batch in self._iter_iterable():
                    if not put(q, (True, batch)):
                        return
            except BaseException as e:  # noqa: BLE001 - handed to the main thread, raised there
                put(q, (False, e))
                return
            put(q, (True, done))

        threads = [
            threading.Thread(target=work, args=(i,), name=f"ferrograd-loader-{i}", daemon=True)
            for i in range(n)
        ]
        for t in threads:
            t.start()
        live = list(range(n))
        try:
            while live:
                for wid in list(live):
                    try:
                        ok, item = queues[wid].get(timeout=self.timeout or None)
                    except queue.Empty:
                        raise RuntimeError(
                            f"DataLoader timed out after {self.timeout} seconds waiting for a batch"
                        ) from None
                    if not ok:
                        raise item
                    if item is done:
                        live.remove(wid)
                        continue
                    yield item
        finally:
            stop.set()

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self.batch_sampler is None:
            return len(self.sampler)
        return len(self.batch_sampler)


def _enter_worker(info: WorkerInfo) -> None:
    """Makes the calling thread a loading worker: ``get_worker_info()`` answers ``info`` and
    the thread draws its random numbers (``fg.rand`` in a dataset's ``__getitem__``, ...)
    from its own streams seeded ``info.seed`` (the loader's base seed plus the worker's id,
    as PyTorch seeds each worker process), not from the global ones of ``fg.manual_seed``."""
    from ...random import _set_thread_streams, _ThreadStreams

    _worker.info = info
    _set_thread_streams(_ThreadStreams(info.seed))


class _WorkerPool:
    """``n`` loading threads, each with its own queue of tasks. Tasks go to the threads in
    turn (task ``k`` of a pass to worker ``k % n``, as PyTorch hands indices to its worker
    processes), and each thread runs its tasks in order, so what a worker's random stream
    gives each sample does not depend on how the threads are scheduled."""

    def __init__(self, n: int, init: Callable[[int], None]) -> None:
        self.inputs: list[queue.SimpleQueue] = [queue.SimpleQueue() for _ in range(n)]
        self.next = 0
        for wid in range(n):
            threading.Thread(
                target=self._run, args=(wid, init), name=f"ferrograd-loader-{wid}", daemon=True
            ).start()

    def _run(self, wid: int, init: Callable[[int], None]) -> None:
        failed: BaseException | None = None
        try:
            init(wid)
        except BaseException as e:  # noqa: BLE001 - raised in the main thread by each task
            failed = e
        del init  # holds the loader, which shuts the threads down when it is collected
        inputs = self.inputs[wid]
        while True:
            task = inputs.get()
            if task is None:
                return
            fut, fn, arg = task
            if not fut.set_running_or_notify_cancel():
                continue
            if failed is not None:
                fut.set_exception(failed)
                continue
            try:
                fut.set_result(fn(arg))
            except BaseException as e:  # noqa: BLE001 - handed to the main thread, raised there
                fut.set_exception(e)

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> concurrent.futures.Future:
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self.inputs[self.next].put((fut, fn, arg))
        self.next = (self.next + 1) % len(self.inputs)
        return fut

    def shutdown(self) -> None:
        for q in self.inputs:
            q.put(None)


def __getattr__(name: str) -> Any:
    # torch.utils.data.DistributedSampler (defined in .distributed, imported on first use)
    if name == "DistributedSampler":
        from .distributed import DistributedSampler

        return DistributedSampler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
