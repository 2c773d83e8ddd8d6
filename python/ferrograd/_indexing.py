"""numpy's advanced indexing on tensors, get and set, differentiable: several index arrays
(broadcast together), index arrays of any rank (a tuple or list inside the key is one),
boolean masks, and integers, slices, ``None`` and ``...`` mixed with them in any position.
(numpy's placement of the result's axes, which the ops issue asks for: an integer next to an
index array joins its broadcast group, where PyTorch would select with it first.)

The engine indexes basic keys (integers, slices, ``None``, ``...``, one 1-D integer array)
itself. Other keys come here: numpy works out, for each element of the result, its
coordinates in the tensor (from zero-copy broadcast coordinate grids, so the work is the size
of the result, not of the tensor), and the tensor's elements are then taken with
``index_select`` on its flat view (whose gradient adds into repeated indices) or, for an
assignment, written with a scatter and a ``where``, recorded as an in-place copy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _core
from ._core import Tensor
from ._tensor import tensor

_basic_getitem = Tensor.__getitem__
_basic_setitem = Tensor.__setitem__


def _as_index(k: Any) -> Any:
    """An index array as numpy (tensors read to the host), or the item as it is."""
    if isinstance(k, Tensor):
        if k.dtype.kind not in "bi":
            raise IndexError(
                f"getitem: an index tensor must hold signed integers or bools, got {k.dtype} "
                f"of shape {k.shape}"
            )
        return k.numpy()
    if isinstance(k, (list, tuple, np.ndarray)):
        a = np.asarray(k)
        if a.dtype.kind not in "biu" and a.size:
            raise IndexError(
                f"getitem: an index array must hold integers or booleans, got {a.dtype}"
            )
        if a.dtype.kind == "u" and a.size and a.max() > np.iinfo(np.int64).max:
            # (as int64 it would wrap around to a negative index)
            raise IndexError(f"getitem: index {a.max()} is out of bounds (above int64's range)")
        return a.astype(np.int64) if a.dtype.kind == "u" or not a.size else a
    return k


def _needs_numpy(key: Any) -> bool:
    """Whether the engine's basic indexing cannot take `key` as numpy would."""
    items = key if isinstance(key, tuple) else (key,)
    arrays = [k for k in items if _is_array(k)]
    if not arrays:
        return False
    if len(arrays) > 1 or any(isinstance(k, (int, np.integer)) for k in items):
        return True
    a = arrays[0]
    if not isinstance(a, Tensor):
        a = np.asarray(a)
    # the engine takes one 1-D int64 array; int8/int16/int32/uint8 arrays go through numpy
    return a.ndim != 1 or a.dtype != np.int64


def _is_scalar_bool(k: Any) -> bool:
    return isinstance(k, (bool, np.bool_))


def _is_array(k: Any) -> bool:
    return isinstance(k, (Tensor, np.ndarray, list, tuple)) and not _is_scalar_bool(k)


def _positions(shape: tuple, key: Any, op: str) -> np.ndarray:
    """The flat (row-major) positions in a tensor of `shape` of the elements `key` selects,
    in the result's shape."""
    items = key if isinstance(key, tuple) else (key,)
    items = tuple(_as_index(k) for k in items)
    nd = len(shape)
    strides = [1] * nd
    for d in range(nd - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    flat = None
    for d in range(nd):
        grid = np.broadcast_to(
            np.arange(shape[d], dtype=np.int64).reshape([-1 if e == d else 1 for e in range(nd)]),
            shape,
        )
        try:
            coord = grid[items]
        except IndexError as e:
            raise IndexError(f"{op}: {e} (tensor shape {shape})") from None
        part = coord * strides[d]
        flat = part if flat is None else flat + part
    if flat is None:  # a 0-d tensor
        flat = np.zeros((), np.int64)[items]
    return np.ascontiguousarray(flat)


def _no_ranges(key: Any) -> Any:
    """``range`` keys (``x[range(n), y]``) as the integer arrays they stand for."""
    if isinstance(key, range):
        return np.arange(key.start, key.stop, key.step, dtype=np.int64)
    if isinstance(key, tuple) and any(isinstance(k, range) for k in key):
        return tuple(_no_ranges(k) if isinstance(k, range) else k for k in key)
    return key


def _torch_tensor_items(key: Any) -> Any:
    """PyTorch's reading of the tensors in a key: a 0-d integer tensor is an integer (so
    ``a[torch.tensor(1)]`` is a view, as ``a[1]``), and a uint8 tensor a boolean mask
    (deprecated in PyTorch, which warns)."""
    items = key if isinstance(key, tuple) else (key,)
    if not any(isinstance(k, Tensor) for k in items):
        return key
    out = []
    for k in items:
        if isinstance(k, Tensor):
            kind = k.dtype.kind
            if kind == "u" and k.dtype.name == "uint8":
                import warnings

                if k.ndim:  # (PyTorch takes a 0-d one as a boolean scalar, silently)
                    warnings.warn(
                        "indexing with dtype torch.uint8 is now deprecated, please use a dtype "
                        "torch.bool instead.",
                        UserWarning,
                        stacklevel=3,
                    )
                k = k != 0
            elif kind == "i" and k.ndim == 0 and not _core._tracing():
                k = int(k.item())
        out.append(k)
    return tuple(out) if isinstance(key, tuple) else out[0]


def getitem(x: Tensor, key: Any) -> Tensor:
    key = _torch_tensor_items(_no_ranges(key))
    if not _needs_numpy(key):
        out = _basic_getitem(x, key)
        items = key if isinstance(key, tuple) else (key,)
        if any(_is_scalar_bool(k) for k in items):
            # PyTorch: a boolean scalar is an advanced index, so the result is a copy
            out = out.clone()
        return out
    pos = _positions(x.shape, key, "getitem")
    idx = tensor(pos.reshape(-1), device=x.device)
    return _core.index_select(x.reshape(-1), 0, idx, op="getitem").reshape(*pos.shape)


def setitem(x: Tensor, key: Any, value: Any) -> None:
    key = _torch_tensor_items(_no_ranges(key))
    items = key if isinstance(key, tuple) else (key,)
    if not any(_is_array(k) for k in items):
        return _basic_setitem(x, key, value)
    pos = _positions(x.shape, key, "setitem")
    rshape = pos.shape
    pos = pos.reshape(-1)
    if isinstance(value, Tensor):
        v = value
        if v.dtype != x.dtype:
            if not (v.ndim == 0 and _is_mask_key(items)):
                # PyTorch's index_put takes only its own dtype (a 0-d value under a mask is
                # a fill, which casts); basic indexing casts (the engine's assignment)
                raise _core.DTypeError(
                    f"setitem: an advanced index writes only a value of the tensor's dtype "
                    f"{x.dtype}, got {v.dtype}; cast the value first"
                )
            v = v.astype(x.dtype.name)
    else:
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"setitem: cannot assign {value!r} to a {x.dtype} tensor")
        v = tensor(arr, device=x.device).astype(x.dtype.name)
    try:
        v = v.broadcast_to(*rshape).reshape(-1)
    except _core.ShapeError:
        raise _core.ShapeError(
            f"setitem: cannot assign a value of shape {v.shape} to an index result of shape "
            f"{rshape}"
        ) from None
    if pos.size == 0:
        return None
    # repeated positions: the last value written wins, as in numpy
    rev_first = np.unique(pos[::-1], return_index=True)[1]
    keep = np.sort(pos.size - 1 - rev_first)
    n = int(np.prod(x.shape))
    dev = x.device
    if keep.size != pos.size:
        v = _core.index_select(v, 0, tensor(keep, device=dev))
        pos = pos[keep]
    hit = np.zeros(n, dtype=bool)
    hit[pos] = True
    if v.dtype.name == "bool":  # (no bool sums: scattered as int8, read back as bool)
        scattered = _core._scatter_add(v.astype("int8"), tensor(pos, device=dev), 0, (n,)) != 0
    else:
        scattered = _core._scatter_add(v, tensor(pos, device=dev), 0, (n,))
    new = _core.where(tensor(hit, device=dev), scattered, x.reshape(-1))
    x.copy_(new.reshape(*x.shape))
    return None


def _is_mask_key(items: tuple) -> bool:
    """Whether an index is one boolean mask (``x[mask] = v``, PyTorch's masked fill)."""
    arrays = [k for k in items if _is_array(k)]
    return (
        len(arrays) == 1
        and getattr(arrays[0], "dtype", None) is not None
        and (str(arrays[0].dtype) == "bool")
    )


def _install() -> None:
    Tensor.__getitem__ = getitem
    Tensor.__setitem__ = setitem


_install()
