"""PyTorch's ``torch.nn.utils.rnn``: ``pad_sequence``, ``PackedSequence``,
``pack_padded_sequence``, ``pad_packed_sequence`` and ``pack_sequence``. The recurrent layers
take a ``PackedSequence`` and stop each sequence at its length. Everything is differentiable
(slices and concatenations of the values)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ... import _core
from ..._core import ShapeError, Tensor
from ..._tensor import tensor
from .._errors import ArgumentRuntimeError, ArgumentTypeRuntimeError

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "PackedSequence",
    "pack_padded_sequence",
    "pack_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpack_sequence",
    "unpad_sequence",
]


class _PackedFields(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None


class PackedSequence(_PackedFields):
    """Sequences of different lengths packed time step by time step: ``data`` holds, for
    each step ``t``, the rows of the ``batch_sizes[t]`` sequences still running (longest
    first); ``sorted_indices`` maps that order to the batch's, ``unsorted_indices`` back
    (computed from ``sorted_indices`` when only that is given)."""

    __slots__ = ()

    def __new__(
        cls,
        data: Tensor,
        batch_sizes: Tensor,
        sorted_indices: Tensor | None = None,
        unsorted_indices: Tensor | None = None,
    ) -> Self:
        if unsorted_indices is None and sorted_indices is not None:
            order = np.asarray(sorted_indices.numpy()).astype(np.int64)
            unsorted_indices = tensor(
                np.argsort(order, kind="stable"), dtype="int64", device=sorted_indices.device
            )
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """The sequence with ``data`` moved or cast as ``Tensor.to`` does (the index
        tensors stay int64 and follow a device change, as PyTorch's)."""
        data = self.data.to(*args, **kwargs)
        if data is self.data or (
            data.dtype == self.data.dtype
            and data.device == self.data.device
            and not kwargs.get("copy", False)
        ):
            # nothing to move or cast: the same object, as PyTorch's
            return self
        out = self._replace(data=data)
        if data.device != self.data.device:
            out = out._replace(
                sorted_indices=None
                if self.sorted_indices is None
                else self.sorted_indices.to(data.device),
                unsorted_indices=None
                if self.unsorted_indices is None
                else self.unsorted_indices.to(data.device),
            )
        return out

    def _cast(self, dtype: str) -> PackedSequence:
        return self._replace(data=self.data.astype(dtype))

    def float(self) -> PackedSequence:
        return self._cast("float32")

    def double(self) -> PackedSequence:
        return self._cast("float64")

    def half(self) -> PackedSequence:
        return self._cast("float16")

    def bfloat16(self) -> PackedSequence:
        return self._cast("bfloat16")

    def long(self) -> PackedSequence:
        return self._cast("int64")

    def int(self) -> PackedSequence:
        return self._cast("int32")

    def short(self) -> PackedSequence:
        return self._cast("int16")

    def char(self) -> PackedSequence:
        return self._cast("int8")

    def byte(self) -> PackedSequence:
        return self._cast("uint8")

    def is_pinned(self) -> bool:
        """Whether ``data`` is in pinned host memory (never, here: as ``Tensor``)."""
        return bool(self.data.is_pinned())

    def cpu(self) -> PackedSequence:
        return self.to("cpu")

    def cuda(self, device: Any = None) -> PackedSequence:
        return self.to("cuda" if device is None else device)

    @property
    def is_cuda(self) -> bool:
        return str(self.data.device).startswith("cuda")


def pad_sequence(
    sequences: Sequence[Tensor],
    batch_first: bool = False,
    padding_value: float = 0.0,
    padding_side: str = "right",
) -> Tensor:
    """Stacks tensors ``(L_i, *)`` into ``(max L, B, *)`` (``(B, max L, *)`` with
    ``batch_first``), padding with ``padding_value``."""
    if isinstance(sequences, Tensor):
        seqs = list(sequences.unbind(0))
    else:
        try:
            seqs = list(sequences)
        except TypeError:
            raise ArgumentTypeRuntimeError(
                "pad_sequence: Expected iterable for input sequences, but got arg of type: "
                f"{type(sequences).__name__}"
            ) from None
    if not seqs:
        raise ValueError("pad_sequence: needs at least one sequence")
    if padding_side not in ("right", "left"):
        raise ArgumentRuntimeError(
            f"pad_sequence: padding_side must be 'right' or 'left', got {padding_side!r}"
        )
    trailing = tuple(seqs[0].shape[1:])
    for i, s in enumerate(seqs):
        if s.ndim == 0 or tuple(s.shape[1:]) != trailing:
            raise ShapeError(
                f"pad_sequence: every sequence must be (L, {', '.join(map(str, trailing))}), "
                f"sequence {i} has shape {list(s.shape)}"
            )
    longest = max(s.shape[0] for s in seqs)
    rows = []
    for s in seqs:
        short = longest - s.shape[0]
        if short:
            fill = _core.full(
                (short, *trailing), padding_value, dtype=s.dtype.name, device=s.device
            )
            s = _core.concat([s, fill] if padding_side == "right" else [fill, s], 0)
        rows.append(s)
    return _core.stack(rows, 0 if batch_first else 1)


def _lengths(lengths: Any) -> np.ndarray:
    a = lengths.numpy() if isinstance(lengths, Tensor) else np.asarray(lengths)
    return a.astype(np.int64).reshape(-1)


def pack_padded_sequence(
    input: Tensor, lengths: Any, batch_first: bool = False, enforce_sorted: bool = True
) -> PackedSequence:
    """Packs a padded batch ``(T, B, *)`` (``(B, T, *)`` with ``batch_first``) of sequences
    of the given lengths."""
    if isinstance(input, Tensor) and math.prod(input.shape) == 0:
        raise ShapeError("Cannot pack empty tensors.")
    x = input.transpose(0, 1) if batch_first else input
    lens = _lengths(lengths)
    b = x.shape[1]
    if lens.shape[0] != b:
        raise ArgumentRuntimeError(
            f"pack_padded_sequence: expected len(lengths) to equal the batch size {b}, got "
            f"{lens.shape[0]} lengths"
        )
    if lens.size and (lens.min() <= 0 or lens.max() > x.shape[0]):
        raise ArgumentRuntimeError(
            f"pack_padded_sequence: lengths must lie in [1, {x.shape[0]}], got {lens.tolist()}"
        )
    if enforce_sorted:
        if np.any(np.diff(lens) > 0):
            raise RuntimeError(
                "pack_padded_sequence: lengths must be sorted in decreasing order with "
                f"enforce_sorted=True, got {lens.tolist()}. You can pass "
                "`enforce_sorted=False` to take the sequences in any order."
            )
        order = None
    else:
        order = np.argsort(-lens, kind="stable")
        x = x.index_select(1, tensor(order, dtype="int64", device=x.device))
        lens = lens[order]
    sizes = np.array([(lens > t).sum() for t in range(int(lens.max()))], dtype=np.int64)
    data = _core.concat([x[t, : int(n)] for t, n in enumerate(sizes)], 0)
    sorted_idx = unsorted_idx = None
    if order is not None:
        sorted_idx = tensor(order, dtype="int64")
        unsorted_idx = tensor(np.argsort(order, kind="stable"), dtype="int64")
    return PackedSequence(data, tensor(sizes, dtype="int64"), sorted_idx, unsorted_idx)


def pad_packed_sequence(
    sequence: PackedSequence,
    batch_first: bool = False,
    padding_value: float = 0.0,
    total_length: int | None = None,
) -> tuple[Tensor, Tensor]:
    """The padded batch and the lengths of a :class:`PackedSequence` (in the batch's order)."""
    data, sizes = sequence.data, sequence.batch_sizes.numpy().astype(np.int64)
    b = int(sizes[0])
    steps = len(sizes)
    length = steps if total_length is None else int(total_length)
    if length < steps:
        raise ValueError(
            f"pad_packed_sequence: total_length {length} is below the longest sequence {steps}"
        )
    trailing = tuple(data.shape[1:])
    rows, start = [], 0
    for n in sizes:
        n = int(n)
        step = data[start : start + n]
        if n < b:
            fill = _core.full(
                (b - n, *trailing), padding_value, dtype=data.dtype.name, device=data.device
            )
            step = _core.concat([step, fill], 0)
        rows.append(step)
        start += n
    for _ in range(length - steps):
        rows.append(
            _core.full((b, *trailing), padding_value, dtype=data.dtype.name, device=data.device)
        )
    out = _core.stack(rows, 0)
    lens = np.array([(sizes > i).sum() for i in range(b)], dtype=np.int64)
    if sequence.unsorted_indices is not None:
        out = out.index_select(1, sequence.unsorted_indices.to(out.device))
        lens = lens[sequence.unsorted_indices.numpy()]
    if batch_first:
        out = out.transpose(0, 1)
    return out, tensor(lens, dtype="int64")


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Packs a list of ``(L_i, *)`` tensors."""
    lens = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lens, enforce_sorted=enforce_sorted)


def unpad_sequence(
    padded_sequences: Tensor, lengths: Any, batch_first: bool = False
) -> list[Tensor]:
    """The list of ``(L_i, *)`` tensors of a padded batch (the inverse of
    :func:`pad_sequence`)."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[i, : int(n)] for i, n in enumerate(_lengths(lengths))]


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The list of ``(L_i, *)`` tensors of a :class:`PackedSequence` (the inverse of
    :func:`pack_sequence`), in the batch's order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
