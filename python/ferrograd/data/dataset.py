"""MegEngine's dataset classes: abstract ``Dataset`` / ``StreamDataset`` (instantiating
either directly is a TypeError, as with any ABC that has abstract methods), ``ArrayDataset``
over equal-length arrays, ``ConcatDataset`` chaining map-style datasets, and the ``MNIST``,
``CIFAR10`` and ``CIFAR100`` readers of files already on disk (nothing is downloaded)."""

from __future__ import annotations

import bisect
import gzip
import os
import pickle
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np


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


# ----------------------------------------------------------------- vision datasets


def _dataset_root(name: str) -> str:
    """MegEngine's default place for a dataset: ``$XDG_CACHE_HOME/megengine/<name>``
    (``~/.cache/megengine/<name>`` without it)."""
    cache = os.getenv("XDG_CACHE_HOME", os.path.join("~", ".cache"))
    return os.path.join(os.path.expanduser(cache), "megengine", name)


def _missing(op: str, root: str, names: Sequence[str], download: bool) -> ValueError:
    why = (
        "ferrograd does not download datasets"
        if download
        else "download=False and the files are missing"
    )
    return ValueError(f"{op}: {why}; put {', '.join(names)} in {root!r}")


def _read_idx(path: str, ndim: int) -> np.ndarray:
    """An IDX file (gzip-compressed, big-endian header) of unsigned bytes as an array."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    header = np.frombuffer(raw, dtype=">i4", count=1 + ndim)
    if header[0] != 0x800 + ndim:
        raise ValueError(f"MNIST: {path!r} is not an IDX file of {ndim}-D unsigned bytes")
    shape = tuple(int(n) for n in header[1:])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 * (1 + ndim)).reshape(shape).copy()


class MNIST(Dataset):
    """MNIST from the four gzip-compressed IDX files in ``root`` (default
    ``~/.cache/megengine/MNIST``): samples are ``(image, label)``, a ``(28, 28, 1)`` uint8
    image and an int32 label; ``train`` picks the 60000 training or 10000 test digits."""

    raw_file_name = (
        "train-images-idx3-ubyte.gz",
        "train-labels-idx1-ubyte.gz",
        "t10k-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz",
    )

    def __init__(self, root: str | None = None, train: bool = True, download: bool = True):
        super().__init__()
        self.root = root if root is not None else _dataset_root("MNIST")
        self.order = ("image", "image_category")
        if not all(os.path.exists(os.path.join(self.root, n)) for n in self.raw_file_name):
            raise _missing("MNIST", self.root, self.raw_file_name, download)
        images, labels = self.raw_file_name[:2] if train else self.raw_file_name[2:]
        imgs = _read_idx(os.path.join(self.root, images), 3)
        self.arrays = (
            list(imgs[..., None]),
            _read_idx(os.path.join(self.root, labels), 1).astype(np.int32),
        )
        self._meta_data = {"images": {"imgs": len(imgs)}, "labels": {"imgs": len(imgs)}}

    @property
    def meta(self) -> dict:
        return self._meta_data

    def __getitem__(self, index: int) -> tuple:
        return tuple(a[index] for a in self.arrays)

    def __len__(self) -> int:
        return len(self.arrays[0])


class CIFAR10(Dataset):
    """CIFAR-10 from the python-pickle batches in ``root/cifar-10-batches-py`` (default
    root ``~/.cache/megengine/CIFAR10``): samples are ``(image, label)``, a ``(32, 32, 3)``
    uint8 image in BGR channel order (as OpenCV reads images) and an int32 label."""

    raw_file_dir = "cifar-10-batches-py"
    train_batch = tuple(f"data_batch_{i}" for i in range(1, 6))
    test_batch = ("test_batch",)
    meta_name = "batches.meta"
    _labels: tuple = (b"labels",)

    def __init__(
        self, root: str | None = None, train: bool = True, download: bool = True, timeout: int = 500
    ):
        super().__init__()
        self.root = root if root is not None else _dataset_root(type(self).__name__)
        self.order = ("image", "image_category")
        target = os.path.join(self.root, self.raw_file_dir)
        names = self.train_batch if train else self.test_batch
        if not all(os.path.exists(os.path.join(target, n)) for n in names):
            raise _missing(type(self).__name__, target, names, download)
        images: list = []
        labels: list[list] = [[] for _ in self._labels]
        for n in names:
            with open(os.path.join(target, n), "rb") as f:
                batch = pickle.load(f, encoding="bytes")
            hwc = batch[b"data"].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
            images.extend(np.ascontiguousarray(hwc[..., ::-1]))
            for out, key in zip(labels, self._labels):
                out.extend(batch[key])
        self.arrays = (images, *(np.array(lab, dtype=np.int32) for lab in labels))

    @property
    def meta(self) -> Any:
        with open(os.path.join(self.root, self.raw_file_dir, self.meta_name), "rb") as f:
            return pickle.load(f, encoding="bytes")

    def __getitem__(self, index: int) -> tuple:
        return tuple(a[index] for a in self.arrays)

    def __len__(self) -> int:
        return len(self.arrays[0])


class CIFAR100(CIFAR10):
    """CIFAR-100 from ``root/cifar-100-python`` (``train``/``test`` pickles): samples are
    ``(image, fine_label, coarse_label)``, the image as in :class:`CIFAR10`."""

    raw_file_dir = "cifar-100-python"
    train_batch = ("train",)
    test_batch = ("test",)
    meta_name = "meta"
    _labels = (b"fine_labels", b"coarse_labels")


__all__ = [
    "CIFAR10",
    "CIFAR100",
    "MNIST",
    "ArrayDataset",
    "ConcatDataset",
    "Dataset",
    "StreamDataset",
]
