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

Inside ``fg.trace`` an index tensor's values are not known when the key is read, so a key
holding one works out the positions with tensor ops instead (:func:`_tensor_positions`): the
same placement rule, negative indices wrapped arithmetically, each index checked against its
axis by the engine's gather when the graph runs, so new index values on each call are taken
as they come. Outside a trace the numpy route stays (see :data:`_TENSOR_ROUTE_EAGER`).
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
            what = "mask does not match the tensor: " if "boolean index" in str(e) else ""
            raise IndexError(f"{op}: {what}{e} (tensor shape {shape})") from None
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


_SEQUENCE_AS_TUPLE_WARNING = (
    "Using a non-tuple sequence for multidimensional indexing is deprecated; use x[tuple(seq)] "
    "instead of x[seq]. A later PyTorch will read it as one index array, x[tensor(seq)], "
    "which gives an error or a different result"
)


def _sequence_as_tuple(key: Any) -> Any:
    """A list key read as PyTorch (and numpy before 1.23) reads it: a list of fewer than 32
    items of which one is a tensor, an array, a sequence, a slice, ``None`` or ``...`` is the
    tuple of its items (``x[[rows, cols]]`` is ``x[rows, cols]``, with a deprecation
    warning); any other list is one index array. Without this, ``x[[[0, 1], [1, 0]]]`` would
    select two rows of rows where PyTorch selects the two elements ``x[0, 1]`` and
    ``x[1, 0]``."""
    if not isinstance(key, list) or len(key) >= 32:
        return key
    for k in key:
        if (
            isinstance(k, (Tensor, np.ndarray, list, tuple, range, slice))
            or k is None
            or k is Ellipsis
        ):
            import warnings

            warnings.warn(_SEQUENCE_AS_TUPLE_WARNING, UserWarning, stacklevel=3)
            return tuple(key)
    return key


def _torch_tensor_items(key: Any) -> Any:
    """PyTorch's reading of the tensors in a key: a 0-d integer tensor is an integer (so
    ``a[torch.tensor(1)]`` is a view, as ``a[1]``), a uint8 tensor a boolean mask
    (deprecated in PyTorch, which warns), and a 0-d mask a scalar boolean (so
    ``a[torch.tensor(True)] = v`` takes the values a scalar ``True`` key takes)."""
    items = key if isinstance(key, tuple) else (key,)
    if not any(isinstance(k, (Tensor, np.ndarray)) for k in items):
        return key
    out = []
    for k in items:
        if isinstance(k, np.ndarray) and k.dtype == np.uint8:
            # PyTorch reads a numpy array as the tensor it converts to: a uint8 mask
            k = tensor(k)
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
            if (
                isinstance(k, Tensor)
                and k.ndim == 0
                and k.dtype.kind == "b"
                and not _core._tracing()
            ):
                # a 0-d mask is the boolean it holds: a new axis of length 1 or 0
                k = bool(k.item())
        out.append(k)
    return tuple(out) if isinstance(key, tuple) else out[0]


# Whether keys holding index tensors take the tensor-op route outside a trace too. They do
# not: the numpy route reads the index to the host once and gives IndexError messages naming
# the axis and the value before any op runs, and on a small key it costs a quarter of the
# tensor route (x[idx] with a (5, 3) index into a (100, 10) tensor: 69 us against 93 us to
# read, 166 us against 336 us to assign).
_TENSOR_ROUTE_EAGER = False

# slice coordinates are built from constants below the size at which fg.trace warns about
# tensors made from Python data (these only depend on shapes)
_IOTA_DIGIT = 32


def _iota(n: int, device: Any) -> Tensor:
    """``0 .. n-1`` as int64, made from constants of at most ``_IOTA_DIGIT`` elements (an
    outer sum of digit ranges, cut to ``n``) so that a trace records no large constant."""
    out = tensor(np.arange(min(n, _IOTA_DIGIT), dtype=np.int64), device=device)
    size = out.shape[0]
    while size < n:
        m = min(_IOTA_DIGIT, -(-n // size))
        high = tensor(np.arange(m, dtype=np.int64) * size, device=device)
        out = (high.reshape(m, 1) + out.reshape(1, size)).reshape(-1)
        size *= m
    return out[:n] if size != n else out


def _trace_mask_error(op: str, k: Tensor) -> Exception:
    return _core.TraceError(
        f"{op}: a boolean mask index (shape {list(k.shape)}) selects a number of elements "
        "that depends on its values, which a traced function cannot have: its result's "
        "shape must be known when the function is traced. Keep the shape with "
        "fg.where(mask, x, other) (or multiply by the mask), or index outside the trace"
    )


def _expand_key(shape: tuple, key: Any, op: str) -> list | None:
    """The key's items for :func:`_tensor_positions`: index tensors as int64 tensors, index
    arrays given as Python data as int64 numpy arrays (a boolean one replaced by the arrays of
    its nonzero coordinates, one per axis it covers), integers as ints (each an index of its
    own, as numpy reads an integer next to an index array), and the ellipsis (or the missing
    tail) written out as full slices; an ellipsis that stands for no axis stays as a ``"..."``
    marker, which still separates index arrays. None for a key this route does not take (a
    scalar boolean)."""
    items = key if isinstance(key, tuple) else (key,)
    out: list = []
    for k in items:
        if _is_scalar_bool(k):
            return None
        if isinstance(k, Tensor):
            kind = k.dtype.kind
            if kind == "b":
                raise _trace_mask_error(op, k)
            if kind != "i":
                raise IndexError(
                    f"{op}: an index tensor must hold signed integers or bools, got {k.dtype} "
                    f"of shape {k.shape}"
                )
            out.append(k if k.dtype.name == "int64" else k.astype("int64"))
        elif isinstance(k, (list, tuple, np.ndarray)):
            a = _as_index(k)
            if a.dtype.kind == "b":
                if a.ndim == 0:
                    return None
                out.extend(("mask", a, i) for i in range(a.ndim))
            else:
                out.append(a.astype(np.int64))
        elif isinstance(k, (int, np.integer)):
            out.append(int(k))
        elif k is None or k is Ellipsis or isinstance(k, slice):
            out.append(k)
        else:
            raise IndexError(
                f"{op}: only integers, slices, None, ..., and integer or boolean arrays and "
                f"tensors are valid indices, got {type(k).__name__}"
            )
    if sum(1 for k in out if k is Ellipsis) > 1:
        raise IndexError(f"{op}: an index can only have a single ellipsis ('...')")
    used = sum(1 for k in out if k is not None and k is not Ellipsis)
    if used > len(shape):
        raise IndexError(
            f"{op}: too many indices for a tensor of dimension {len(shape)}: the key indexes "
            f"{used} (tensor shape {shape})"
        )
    rest = len(shape) - used
    at = next((i for i, k in enumerate(out) if k is Ellipsis), None)
    if at is None:
        out += [slice(None)] * rest
    else:
        out[at : at + 1] = [slice(None)] * rest if rest else ["..."]
    # boolean arrays: their nonzero coordinates, checked against the axes they cover
    d = 0
    for i, k in enumerate(out):
        if isinstance(k, tuple) and k[0] == "mask":
            _, a, j = k
            if j == 0:
                want = tuple(shape[d : d + a.ndim])
                if a.shape != want:
                    raise IndexError(
                        f"{op}: a boolean index of shape {a.shape} does not match the indexed "
                        f"axes {d}..{d + a.ndim - 1} of shape {want} (tensor shape {shape})"
                    )
                nz = np.nonzero(a)
            out[i] = nz[j].astype(np.int64)
        if k is not None and not isinstance(k, str):
            d += 1
    return out


def _tensor_positions(shape: tuple, key: Any, op: str, device: Any) -> Tensor | None:
    """The flat (row-major) positions in a tensor of `shape` of the elements `key` selects,
    in the result's shape, as an int64 tensor computed with tensor ops (so it traces with the
    index tensors as graph values). Index tensors are wrapped where negative and checked
    against their axis by a gather (which raises for an index out of range, when the graph
    runs); integers and index arrays given as Python data are checked here. None for a key
    this route does not take."""
    items = _expand_key(shape, key, op)
    if items is None:
        return None
    nd = len(shape)
    strides = [1] * nd
    for d in range(nd - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    # (axis, index) of the index arrays and integers, in key order; their places in the key
    adv: list[tuple[int, Any]] = []
    places: list[int] = []
    d = 0
    for i, k in enumerate(items):
        if k is None or isinstance(k, str):
            continue
        if not isinstance(k, slice):
            adv.append((d, k))
            places.append(i)
        d += 1
    group = []
    for d, k in adv:
        group.append(() if isinstance(k, int) else tuple(k.shape))
    try:
        bshape = tuple(np.broadcast_shapes(*group))
    except ValueError:
        raise IndexError(
            f"{op}: shape mismatch: the index arrays could not be broadcast together with "
            f"shapes {' '.join(str(list(g)) for g in group)}"
        ) from None
    adjacent = places[-1] - places[0] == len(places) - 1
    # the result's axes: ("slice", axis, start, step, length), ("new",) or ("adv",)
    parts: list[tuple] = [] if adjacent else [("adv",)]
    d = 0
    for i, k in enumerate(items):
        if isinstance(k, str):
            continue
        if k is None:
            parts.append(("new",))
            continue
        if isinstance(k, slice):
            start, stop, step = k.indices(shape[d])
            parts.append(("slice", d, start, step, len(range(start, stop, step))))
        elif adjacent and i == places[0]:
            parts.append(("adv",))
        d += 1
    rshape: list[int] = []
    for p in parts:
        if p[0] == "slice":
            rshape.append(p[4])
        elif p[0] == "new":
            rshape.append(1)
        else:
            rshape.extend(bshape)
    total: Any = None  # a Tensor, or None while no term is a tensor
    offset = 0  # the integer part of the positions
    r = 0
    for p in parts:
        if p[0] == "new":
            r += 1
            continue
        if p[0] == "slice":
            _, d, start, step, n = p
            if n > 1:
                coord = _iota(n, device) * (step * strides[d])
                coord = coord.reshape(*[n if e == r else 1 for e in range(len(rshape))])
                total = coord if total is None else total + coord
            offset += start * strides[d]
            r += 1
            continue
        g: Any = None
        for d, k in adv:
            size = shape[d]
            if isinstance(k, int):
                if not -size <= k < size:
                    raise IndexError(
                        f"{op}: index {k} is out of bounds for axis {d} with size {size} "
                        f"(tensor shape {shape})"
                    )
                offset += (k % size) * strides[d]
                continue
            if isinstance(k, np.ndarray):
                if k.size and (k.min() < -size or k.max() >= size):
                    bad = int(k.max()) if k.max() >= size else int(k.min())
                    raise IndexError(
                        f"{op}: index {bad} is out of bounds for axis {d} with size {size} "
                        f"(tensor shape {shape})"
                    )
                part = tensor(np.where(k < 0, k + size, k) * strides[d], device=device)
                g = part if g is None else g + part
                continue
            # a traced index: wrapped, and checked by a gather from `size` ones (which
            # raises for an index outside [-size, size) when the graph runs)
            ok = _core.index_select(
                _core.ones((size,), dtype="int64", device=device), 0, k.reshape(-1), op=op
            ).reshape(*k.shape)
            wrapped = _core.where(k < 0, k + size, k) * ok
            part = wrapped * strides[d] if strides[d] != 1 else wrapped
            g = part if g is None else g + part
        if g is not None:
            g = g.broadcast_to(*bshape).reshape(
                *([1] * r), *bshape, *([1] * (len(rshape) - r - len(bshape)))
            )
            total = g if total is None else total + g
        r += len(bshape)
    if total is None:
        total = tensor(np.int64(offset), device=device)
    elif offset:
        total = total + offset
    return total.broadcast_to(*rshape)


def _uses_tensor_route(key: Any) -> bool:
    items = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, Tensor) for k in items) and (_TENSOR_ROUTE_EAGER or _core._tracing())


def _traced_mask_check(key: Any, op: str) -> None:
    """A boolean mask tensor cannot be indexed with inside a trace: a TraceError that says
    why, where the numpy route would only say that the mask cannot be read."""
    items = key if isinstance(key, tuple) else (key,)
    if _core._tracing():
        for k in items:
            if isinstance(k, Tensor) and k.dtype.kind == "b" and k.ndim:
                raise _trace_mask_error(op, k)


def getitem(x: Tensor, key: Any) -> Tensor:
    key = _torch_tensor_items(_no_ranges(_sequence_as_tuple(key)))
    if not _needs_numpy(key):
        out = _basic_getitem(x, key)
        items = key if isinstance(key, tuple) else (key,)
        if any(_is_scalar_bool(k) for k in items):
            # PyTorch: a boolean scalar is an advanced index, so the result is a copy
            out = out.clone()
        return out
    _traced_mask_check(key, "getitem")
    if _uses_tensor_route(key):
        tpos = _tensor_positions(tuple(x.shape), key, "getitem", x.device)
        if tpos is not None:
            flat = _core.index_select(x.reshape(-1), 0, tpos.reshape(-1), op="getitem")
            # (a new tensor, as PyTorch's advanced indexing: not a view of `flat`)
            return flat.reshape(*tpos.shape)._forget_base()
    pos = _positions(x.shape, key, "getitem")
    idx = tensor(pos.reshape(-1), device=x.device)
    out = _core.index_select(x.reshape(-1), 0, idx, op="getitem")
    return out.reshape(*pos.shape)._forget_base()


def setitem(x: Tensor, key: Any, value: Any) -> None:
    key = _torch_tensor_items(_no_ranges(_sequence_as_tuple(key)))
    items = key if isinstance(key, tuple) else (key,)
    if not any(_is_array(k) for k in items):
        if isinstance(value, Tensor) and value.ndim and value.shape[0] == 1:
            # leading axes of one beyond the target's rank are dropped (PyTorch's rule)
            target_ndim = _basic_getitem(x, key).ndim
            while value.ndim > target_ndim and value.shape[0] == 1:
                value = value.reshape(*value.shape[1:])
        return _basic_setitem(x, key, value)
    if _core._tracing() and _traced_mask_fill(x, items, value):
        return None
    _traced_mask_check(key, "setitem")
    if _uses_tensor_route(key):
        tpos = _tensor_positions(tuple(x.shape), key, "setitem", x.device)
        if tpos is not None:
            return _tensor_setitem(x, tpos, value)
    pos = _positions(x.shape, key, "setitem")
    rshape = pos.shape
    pos = pos.reshape(-1)
    v = _setitem_value(x, value, rshape, _is_mask_key(items))
    if pos.size == 0 and not isinstance(value, Tensor):
        return None  # (a tensor value writes nothing either, but gets its zero gradient)
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


def _setitem_value(x: Tensor, value: Any, rshape: tuple, mask: bool = False) -> Tensor:
    """The assigned value in x's dtype, broadcast to the index result's shape, flat. The
    shapes are checked first, then the dtype: a tensor value must have x's dtype, as
    PyTorch's index_put (a 0-d value under one boolean mask, ``mask``, is a fill, which
    casts)."""
    if isinstance(value, Tensor):
        v = value
    else:
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"setitem: cannot assign {value!r} to a {x.dtype} tensor")
        v = tensor(arr, device=x.device).astype(x.dtype.name)
    # leading axes of one beyond the index result's rank are dropped (PyTorch's rule)
    while v.ndim > len(rshape) and v.shape[0] == 1:
        v = v.reshape(*v.shape[1:])
    shape = tuple(v.shape)
    if len(shape) > len(rshape) or any(
        a not in (1, b) for a, b in zip(reversed(shape), reversed(rshape))
    ):
        raise _core.ShapeError(
            f"setitem: shape mismatch: cannot assign a value of shape {shape} to an index "
            f"result of shape {rshape}"
        )
    if v.dtype != x.dtype:
        if not (v.ndim == 0 and mask):
            raise _core.DTypeError(
                f"setitem: an advanced index writes only a value of the tensor's dtype "
                f"{x.dtype}, got {v.dtype}; cast the value first"
            )
        v = v.astype(x.dtype.name)
    return v.broadcast_to(*rshape).reshape(-1)


def _traced_mask_fill(x: Tensor, items: tuple, value: Any) -> bool:
    """``x[mask] = value`` inside a trace where the assignment does not depend on how many
    entries the mask selects: one boolean mask tensor over x's leading axes and a value that
    broadcasts to one selected entry (a number, a 0-d tensor, or a tensor of the trailing
    axes' shape). Written as ``where(mask, value, x)``, which traces. False (nothing done)
    for any other key or value."""
    if len(items) != 1 or not isinstance(items[0], Tensor):
        return False
    mask = items[0]
    k = mask.ndim
    if mask.dtype.kind != "b" or k == 0 or tuple(mask.shape) != tuple(x.shape[:k]):
        return False
    rest = tuple(x.shape[k:])
    if isinstance(value, Tensor):
        v = value
        while v.ndim > len(rest) and v.shape[0] == 1:
            v = v.reshape(*v.shape[1:])
        if v.ndim > len(rest) or any(
            a not in (1, b) for a, b in zip(reversed(v.shape), reversed(rest))
        ):
            return False
        if v.dtype != x.dtype:
            if v.ndim:
                return False  # (the eager route raises its dtype error)
            v = v.astype(x.dtype.name)
    elif isinstance(value, (bool, int, float, np.number)):
        v = _core.full((), value, dtype=x.dtype.name, device=x.device)
    else:
        return False
    m = mask.reshape(*mask.shape, *([1] * len(rest)))
    x.copy_(_core.where(m, v, x))
    return True


def _tensor_setitem(x: Tensor, tpos: Tensor, value: Any) -> None:
    """``x[key] = value`` with the positions as a tensor: where a position repeats the last
    value written wins (as numpy), found by a stable sort of the positions, so nothing is
    read back to the host."""
    rshape = tuple(tpos.shape)
    v = _setitem_value(x, value, rshape)
    m = int(np.prod(rshape))
    if m == 0:
        return
    dev = x.device
    pos = tpos.reshape(-1)
    n = int(np.prod(x.shape))
    if m > 1:
        # in sorted order an entry is its position's last write when the next one differs
        order = _core._argsort(pos, 0, False)
        spos = _core.index_select(pos, 0, order)
        last = _core.concat([spos[1:] != spos[:-1], _core.ones((1,), dtype="bool", device=dev)], 0)
        keep = _core._scatter_add(last.astype("int64"), order, 0, (m,)) != 0
        v = _core.where(keep, v, _core.zeros_like(v))
    hit = _core._scatter_add(_core.ones((m,), dtype="int64", device=dev), pos, 0, (n,)) != 0
    if v.dtype.name == "bool":  # (no bool sums: scattered as int8, read back as bool)
        scattered = _core._scatter_add(v.astype("int8"), pos, 0, (n,)) != 0
    else:
        scattered = _core._scatter_add(v, pos, 0, (n,))
    x.copy_(_core.where(hit, scattered, x.reshape(-1)).reshape(*x.shape))


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
