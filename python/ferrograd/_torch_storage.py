"""PyTorch's storage API over ferrograd's buffers: ``Tensor.untyped_storage()`` /
``storage()`` (the objects programs compare through ``data_ptr()`` to test whether two
tensors share memory), ``Tensor.set_`` / ``as_strided_`` / ``is_set_to``, and the
``*_copy`` functions (a view op's result as a new tensor)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._core import Tensor


class _Storage:
    """The buffer a tensor views: the whole buffer, whatever part of it the tensor covers,
    so every view of one buffer gives a storage with the same ``data_ptr()``. Holds the
    buffer alive, as PyTorch's storages."""

    def __init__(self, tensor: Tensor) -> None:
        self._tensor = tensor.detach()
        self._info = tensor._storage_info()

    @property
    def device(self) -> Any:
        """The device the buffer is on."""
        return self._tensor.device

    @property
    def is_cuda(self) -> bool:
        return str(self._tensor.device).startswith("cuda")

    def data_ptr(self) -> int:
        """The address of the buffer's first byte (0 for an empty buffer or device memory)."""
        return int(self._info[0])

    def nbytes(self) -> int:
        """The buffer's size in bytes."""
        return int(self._info[1])

    def size(self) -> int:
        """The buffer's size in bytes (its elements are bytes)."""
        return self.nbytes()

    def __len__(self) -> int:
        return self.nbytes()

    def _elements(self) -> Tensor:
        """The whole buffer as a 1-D tensor of the dtype it was made with (a view of it)."""
        t = self._tensor
        n = self.nbytes() // t.element_size()
        return t._as_strided_view((n,), (1,), 0)


class UntypedStorage(_Storage):
    """The bytes of the buffer a tensor views (PyTorch's ``UntypedStorage``)."""

    def element_size(self) -> int:
        """1: the elements of an untyped storage are bytes."""
        return 1

    def untyped(self) -> UntypedStorage:
        return self

    def tolist(self) -> list:
        """The bytes as a list of ints."""
        flat = self._elements().numpy()
        return [int(b) for b in np.ascontiguousarray(flat).view(np.uint8)]

    def __repr__(self) -> str:
        return (
            f"UntypedStorage(nbytes={self.nbytes()}, device={self.device}, "
            f"data_ptr={self.data_ptr():#x})"
        )


class TypedStorage(_Storage):
    """The buffer a tensor views, as elements of the tensor's dtype (PyTorch's legacy
    ``Tensor.storage()``): ``size()`` and ``len()`` count elements."""

    @property
    def dtype(self) -> Any:
        return self._tensor.dtype

    def size(self) -> int:
        """The number of elements in the buffer."""
        return self.nbytes() // self.element_size()

    def __len__(self) -> int:
        return self.size()

    def element_size(self) -> int:
        """The size in bytes of one element."""
        return int(self._tensor.element_size())

    def untyped(self) -> UntypedStorage:
        return UntypedStorage(self._tensor)

    def __getitem__(self, i: Any) -> Any:
        return self._elements()[i].tolist()

    def tolist(self) -> list:
        """The elements as a list of Python numbers."""
        return self._elements().tolist()

    def __repr__(self) -> str:
        return (
            f"TypedStorage(size={self.size()}, dtype={self.dtype}, device={self.device}, "
            f"data_ptr={self.data_ptr():#x})"
        )


def untyped_storage(self: Tensor) -> UntypedStorage:
    """The buffer this tensor views, as bytes (PyTorch's ``untyped_storage()``):
    ``a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()`` when ``a`` and
    ``b`` share memory."""
    return UntypedStorage(self)


def storage(self: Tensor) -> TypedStorage:
    """The buffer this tensor views, as elements of its dtype (PyTorch's ``storage()``)."""
    return TypedStorage(self)


def _strided(op: str, src: Tensor, size: Any, stride: Any, storage_offset: int | None) -> Tensor:
    """``src``'s buffer seen with ``size``, ``stride`` (row-major when None) and
    ``storage_offset``, failing with ``RuntimeError`` where it would reach past the end."""
    size = [int(s) for s in size]
    if stride is None:
        stride, step = [], 1
        for n in reversed(size):
            stride.insert(0, step)
            step *= max(n, 1)
    stride = [int(s) for s in stride]
    if len(size) != len(stride) or any(n < 0 for n in size):
        raise RuntimeError(f"{op}: invalid size {size} for stride {stride}")
    off = None if storage_offset is None else int(storage_offset)
    if off is not None and off < 0:
        raise RuntimeError(f"{op}: the storage offset must be non-negative, got {off}")
    try:
        return src._as_strided_view(size, stride, off)
    except ValueError as e:
        raise RuntimeError(f"{op}: {e}") from None


def set_(
    self: Tensor,
    source: Any = None,
    storage_offset: int | None = None,
    size: Any = None,
    stride: Any = None,
) -> Tensor:
    """PyTorch's ``set_``: this tensor now shares ``source``'s memory (a tensor, or a
    storage from ``storage()`` / ``untyped_storage()``), seen as ``source`` sees it, or
    with ``size``, ``stride`` and ``storage_offset`` in elements of this dtype; with no
    source it becomes empty. Returns self. The buffer cannot grow: a view past its end
    raises ``RuntimeError``. A leaf that requires grad may be set only under ``no_grad``."""
    import ferrograd as fg

    if self.requires_grad and self.is_leaf and fg.is_grad_enabled():
        raise RuntimeError(
            "set_: a leaf Variable that requires grad is being used in an in-place operation."
        )
    if source is None:
        self._replace_view(fg.empty(0, dtype=self.dtype, device=self.device))
        return self
    if isinstance(source, _Storage):
        src = source._tensor
        whole = True
    elif isinstance(source, Tensor):
        src, whole = source, False
    else:
        raise TypeError(f"set_: source must be a Tensor or a storage, got {type(source).__name__}")
    if src.dtype != self.dtype:
        raise RuntimeError(
            f"set_: could not set a tensor of dtype {self.dtype} to a source of dtype {src.dtype}"
        )
    if str(src.device) != str(self.device):
        raise RuntimeError(
            f"set_: could not set a tensor on {self.device} to a source on {src.device}"
        )
    if size is None:
        if storage_offset is not None and not whole:
            raise TypeError("set_: a storage_offset needs a size")
        if whole:
            n = source.nbytes() // src.element_size()
            off = 0 if storage_offset is None else int(storage_offset)
            view = _strided("set_", src, (n - off,), (1,), off)
        else:
            view = _strided("set_", src, src.shape, src.stride(), src.storage_offset())
    else:
        view = _strided("set_", src, size, stride, storage_offset or 0)
    # (reached for a leaf that requires grad only under no_grad, as PyTorch allows: it stays
    # a leaf that requires grad, now over the new memory)
    leaf = self.requires_grad and self.is_leaf
    if leaf:
        self.requires_grad_(False)
    self._replace_view(view.detach() if leaf else view)
    if leaf:
        self.requires_grad_(True)
    return self


def as_strided_(self: Tensor, size: Any, stride: Any, storage_offset: int | None = None) -> Tensor:
    """In-place :meth:`as_strided`: this tensor now sees its buffer with ``size``,
    ``stride`` and ``storage_offset`` (its own offset when None); returns self."""
    self._replace_view(_strided("as_strided_", self, size, stride, storage_offset))
    return self


def is_set_to(self: Tensor, tensor: Tensor) -> bool:
    """Whether both tensors see the same buffer the same way (storage, offset, shape and
    strides), as PyTorch's."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"is_set_to: tensor must be a Tensor, got {type(tensor).__name__}")
    a, b = self._data_key, tensor._data_key
    return a == b and self.dtype == tensor.dtype


def _write_out(op: str, result: Any, out: Any) -> Any:
    if isinstance(result, Tensor):
        if not isinstance(out, Tensor):
            raise TypeError(f"{op}: out must be a Tensor, got {type(out).__name__}")
        if tuple(out.shape) != tuple(result.shape):
            out.resize_(tuple(result.shape))
        out.copy_(result)
        return out
    if not isinstance(out, (list, tuple)) or len(out) != len(result):
        raise RuntimeError(
            f"{op}: out must be a list of {len(result)} tensors, got {type(out).__name__}"
            + (f" of length {len(out)}" if isinstance(out, (list, tuple)) else "")
        )
    for o, r in zip(out, result):
        _write_out(op, r, o)
    return None


def _copy_of(name: str, view: Any) -> Any:
    def fn(input: Tensor, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        import ferrograd as fg

        op = getattr(fg, view) if isinstance(view, str) else view
        r = op(input, *args, **kwargs)
        r = tuple(t.clone() for t in r) if isinstance(r, (list, tuple)) else r.clone()
        if out is not None:
            return _write_out(name, r, out)
        return r

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (
        f"PyTorch's ``{name}``: the result of the view op ``{name[: -len('_copy')]}`` as a "
        "new tensor that shares no memory with ``input`` (differentiable as the view); "
        "``out=`` receives it."
    )
    return fn


def _slice(
    input: Tensor, dim: int = 0, start: Any = None, end: Any = None, step: int = 1
) -> Tensor:
    key = [slice(None)] * input.ndim
    key[dim] = slice(start, end, step)
    return input[tuple(key)]


def _views() -> dict[str, Any]:
    """Each ``*_copy`` function's view op: a callable, or the name of a module function
    (looked up when called: some are defined after this module is installed)."""
    return {
        "view_copy": lambda x, *a, **k: x.view(*a, **k),
        "as_strided_copy": "as_strided",
        "detach_copy": lambda x: x.detach(),
        "alias_copy": lambda x: x.view(tuple(x.shape)),
        "diagonal_copy": "diagonal",
        "expand_copy": lambda x, size, *, implicit=False: x.expand(*size),
        "narrow_copy": "narrow",
        "permute_copy": "permute",
        "select_copy": "select",
        "slice_copy": _slice,
        "split_copy": "split",
        "split_with_sizes_copy": lambda x, split_sizes, dim=0: x.split(list(split_sizes), dim),
        "squeeze_copy": lambda x, dim=None: x.squeeze() if dim is None else x.squeeze(dim),
        "t_copy": "t",
        "transpose_copy": "transpose",
        "unbind_copy": "unbind",
        "unfold_copy": lambda x, dimension, size, step: x.unfold(dimension, size, step),
        "unsqueeze_copy": "unsqueeze",
        "view_as_real_copy": "view_as_real",
        "view_as_complex_copy": "view_as_complex",
    }


def install() -> None:
    import ferrograd as fg

    for f in (untyped_storage, storage, set_, as_strided_, is_set_to):
        if f.__name__ not in Tensor.__dict__:
            setattr(Tensor, f.__name__, f)
    fg.UntypedStorage = UntypedStorage
    fg.TypedStorage = TypedStorage
    for name, view in _views().items():
        if not hasattr(fg, name):
            setattr(fg, name, _copy_of(name, view))
