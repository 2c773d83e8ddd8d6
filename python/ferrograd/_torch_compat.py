"""PyTorch's names for what ferrograd computes with its own ops: matrix products (``mm``,
``bmm``, ``addmm``, ``einsum``), sorting (``sort``, ``argsort``, ``topk``), comparisons and
counting, stacking and axis moves, and the ``Tensor`` methods PyTorch programs call
(``add_`` and the other in-place forms, ``new_zeros``, ``type``, ...).

Everything differentiable is written with differentiable ops, so gradients (of any order)
come from the ops' own rules. Sorting orders are computed on the host (the values then go
through ``gather``, which is differentiable); inside ``fg.trace`` they raise ``TraceError``
like any value read."""

from __future__ import annotations

import builtins
import math
from collections import namedtuple
from typing import Any

import numpy as np

from . import _core
from ._core import DTypeError, ShapeError, Tensor
from ._ops import _check_tensor, _int, gather
from ._tensor import _dtype_name, tensor

__all__ = [  # noqa: RUF022 (device first)
    "device",
    "index_fill",
    "as_tensor",
    "clone",
    "from_numpy",
    "is_tensor",
    "addcdiv",
    "addcmul",
    "addmm",
    "allclose",
    "amax",
    "amin",
    "argsort",
    "baddbmm",
    "bmm",
    "cdist",
    "clamp_max",
    "clamp_min",
    "count_nonzero",
    "cross",
    "diag",
    "diagonal",
    "dot",
    "dstack",
    "einsum",
    "hstack",
    "isclose",
    "lerp",
    "meshgrid",
    "mm",
    "movedim",
    "nan_to_num",
    "nonzero",
    "nonzero_static",
    "numel",
    "outer",
    "sort",
    "swapaxes",
    "t",
    "topk",
    "unique",
    "vstack",
]


class device(str):  # (PyTorch's spelling)
    """PyTorch's ``torch.device``: ``device("cuda:0")``, ``device("cuda", 1)``,
    ``device("cpu")``. It is the device's name (a ``str``), so it goes wherever ferrograd
    takes a device; ``.type`` and ``.index`` as PyTorch's."""

    def __new__(cls, type: Any, index: int | None = None) -> device:  # noqa: PYI034
        if isinstance(type, device):
            return type
        name = str(type)
        if index is not None:
            if ":" in name:
                raise ValueError(f"device: index given twice in {name!r} and {index}")
            name = f"{name}:{int(index)}"
        kind, _, idx = name.partition(":")
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"device: expected 'cpu' or 'cuda[:index]', got {name!r}")
        if idx and not idx.isdigit():
            raise ValueError(f"device: bad index in {name!r}")
        return super().__new__(cls, name)

    @property
    def type(self) -> str:
        return str.__str__(self).partition(":")[0]

    @property
    def index(self) -> int | None:  # type: ignore[override]
        idx = str.__str__(self).partition(":")[2]
        return int(idx) if idx else None

    def __repr__(self) -> str:
        return f"device(type={self.type!r}" + (
            f", index={self.index})" if self.index is not None else ")"
        )


_SortResult = namedtuple("sort", ["values", "indices"])
_TopkResult = namedtuple("topk", ["values", "indices"])


def _dim(op: str, dim: Any, ndim: int) -> int:
    d = _int(op, "dim", dim)
    if not -builtins.max(ndim, 1) <= d < builtins.max(ndim, 1):
        raise IndexError(f"{op}: dim {d} is out of range for a tensor with {ndim} dimensions")
    return d % builtins.max(ndim, 1)


def _rank(op: str, name: str, x: Tensor, ranks: tuple[int, ...]) -> None:
    if x.ndim not in ranks:
        want = " or ".join(f"{r}-D" for r in ranks)
        raise ShapeError(f"{op}: {name} must be {want}, got shape {list(x.shape)}")


# ------------------------------------------------------------------------- matrix products


def numel(input: Tensor) -> int:
    """The number of elements."""
    return _check_tensor("numel", "input", input).numel()


def t(input: Tensor) -> Tensor:
    """The transpose of a tensor of at most 2 dimensions (a view)."""
    x = _check_tensor("t", "input", input)
    _rank("t", "input", x, (0, 1, 2))
    return x.T if x.ndim == 2 else x


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """``input @ mat2`` for two matrices."""
    a, b = _check_tensor("mm", "input", input), _check_tensor("mm", "mat2", mat2)
    _rank("mm", "input", a, (2,))
    _rank("mm", "mat2", b, (2,))
    if a.shape[1] != b.shape[0]:
        raise ShapeError(
            f"mm: mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
            f"{b.shape[0]}x{b.shape[1]})"
        )
    return a @ b


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched ``input @ mat2`` of ``[b, n, m]`` and ``[b, m, p]``."""
    a, b = _check_tensor("bmm", "input", input), _check_tensor("bmm", "mat2", mat2)
    _rank("bmm", "input", a, (3,))
    _rank("bmm", "mat2", b, (3,))
    if a.shape[0] != b.shape[0]:
        raise ShapeError(f"bmm: batch sizes differ, got shapes {list(a.shape)} and {list(b.shape)}")
    return a @ b


def addmm(
    input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: float = 1, alpha: float = 1
) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)`` (PyTorch's dtype rules: see
    :func:`_addmm_like`)."""
    return _addmm_like("addmm", input, (mat1, mat2), mm, beta, alpha)


def baddbmm(
    input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: float = 1, alpha: float = 1
) -> Tensor:
    """``beta * input + alpha * (batch1 @ batch2)``, batched (PyTorch's dtype rules: see
    :func:`_addmm_like`)."""
    return _addmm_like("baddbmm", input, (batch1, batch2), bmm, beta, alpha)


def _scalar_overflow(op: str, name: str, v: Any, dtype: str) -> Exception:
    from .nn._errors import ArgumentRuntimeError

    return ArgumentRuntimeError(
        f"{op}: {name}={v!r} cannot be converted to type {dtype} without overflow"
    )


def _int_scalar(op: str, name: str, v: Any, dtype: str) -> int:
    """``v`` as PyTorch converts a scalar argument to an integer tensor's dtype: a bool as
    0 / 1, a float truncated toward zero, a complex only with no imaginary part; refused
    (``RuntimeError``) where it overflows the dtype (an unsigned dtype takes negative ints
    down to ``-max``, wrapping, as c10's checked conversion)."""
    info = np.iinfo(dtype)
    if isinstance(v, Tensor):
        v = v.item()
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (int, np.integer)):
        lo = info.min if info.min < 0 else -int(info.max)
        if not lo <= int(v) <= info.max:
            raise _scalar_overflow(op, name, v, dtype)
        return int(v)
    if isinstance(v, (complex, np.complexfloating)):
        if v.imag != 0:
            raise _scalar_overflow(op, name, v, dtype)
        v = v.real
    f = float(v)
    if not math.isfinite(f) or f < info.min or f > info.max:
        raise _scalar_overflow(op, name, v, dtype)
    return int(f)


def _float_scalar(op: str, name: str, v: Any, dtype: str) -> Any:
    """``v`` for a float tensor: a bool as 0 / 1, a complex only with no imaginary part."""
    if isinstance(v, Tensor):
        v = v.item()
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (complex, np.complexfloating)):
        if v.imag != 0:
            raise _scalar_overflow(op, name, v, dtype)
        return float(v.real)
    return v


def _addmm_like(
    op: str, input: Any, operands: tuple, product: Any, beta: Any, alpha: Any
) -> Tensor:
    """``beta * input + alpha * product(*operands)`` with PyTorch's rules for
    ``addmm``/``baddbmm``/``addbmm``/``addmv``: every tensor of one dtype (``RuntimeError``
    otherwise), no bool tensors (``NotImplementedError``); with integer tensors ``alpha``
    and ``beta`` are converted to the dtype (floats truncated toward zero, refused where
    they overflow) and the result stays of that dtype (wrapping as its arithmetic)."""
    x = _check_tensor(op, "input", input)
    ts = (x, *(_check_tensor(op, "operand", t) for t in operands))
    names = [t.dtype.name for t in ts]
    if len(set(names)) > 1:
        raise DTypeError(f"{op}: input tensors must have the same dtype, got {', '.join(names)}")
    dt = x.dtype
    if dt.kind == "b":
        raise NotImplementedError(f"{op}: not implemented for bool tensors (as PyTorch's)")
    if dt.kind in "iu":
        b = _int_scalar(op, "beta", beta, dt.name)
        a = _int_scalar(op, "alpha", alpha, dt.name)
        # computed in int64: the same result modulo 2**bits as the dtype's own arithmetic
        wide = [t.astype("int64") if t.dtype.name != "int64" else t for t in ts]
        out = _scaled_sum(wide[0], product(*wide[1:]), b, a, op != "baddbmm")
        return out if out.dtype == dt else out.astype(dt.name)
    b = _float_scalar(op, "beta", beta, dt.name)
    a = _float_scalar(op, "alpha", alpha, dt.name)
    return _scaled_sum(x, product(*ts[1:]), b, a, op != "baddbmm")


def _scaled_sum(
    input: Tensor, prod: Tensor, beta: float, alpha: float, skip_product: bool = True
) -> Tensor:
    """``beta * input + alpha * prod`` as PyTorch's BLAS-style ops: a zero ``beta`` ignores
    ``input``; with ``skip_product`` (addmm, addmv, addbmm, not baddbmm and addr, as
    PyTorch's) a zero ``alpha`` ignores ``prod`` (NaN and inf in it included), which then
    stays on the graph with a zero gradient."""
    if alpha == 0 and skip_product:
        off = _core.zeros(tuple(prod.shape), dtype="bool", device=prod.device)
        out = _core.where(off, prod, _core.zeros((), dtype=prod.dtype.name, device=prod.device))
    else:
        out = prod if alpha == 1 else prod * alpha
    if beta == 0:
        # input is ignored, NaN included, as PyTorch's; it stays on the graph with a zero
        # gradient (PyTorch's input.grad is zeros, not None)
        if not _core._tracking_keys(input):
            return out
        off = _core.zeros(tuple(out.shape), dtype="bool", device=out.device)
        return _core.where(off, input, out)
    return out + (input if beta == 1 else input * beta)


def dot(input: Tensor, other: Tensor) -> Tensor:
    """The inner product of two 1-D tensors."""
    a, b = _check_tensor("dot", "input", input), _check_tensor("dot", "other", other)
    _rank("dot", "input", a, (1,))
    _rank("dot", "other", b, (1,))
    if a.shape != b.shape:
        raise ShapeError(f"dot: lengths differ, got {a.shape[0]} and {b.shape[0]}")
    return (a * b).sum()


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """``input[i] * vec2[j]``."""
    a, b = _check_tensor("outer", "input", input), _check_tensor("outer", "vec2", vec2)
    _rank("outer", "input", a, (1,))
    _rank("outer", "vec2", b, (1,))
    return a.reshape(-1, 1) * b.reshape(1, -1)


def _einsum_parse(equation: str, xs: list[Tensor]) -> tuple[list[str], str]:
    """The subscripts of each operand and of the output, with ``...`` replaced by capital
    letters (the broadcast axes, aligned on the right as numpy and PyTorch align them)."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(xs):
        raise ShapeError(f"einsum: the equation has {len(ins)} operands, got {len(xs)} tensors")
    for s in ins + [out]:
        rest = s.replace("...", "", 1)
        if not builtins.all(c.isalpha() for c in rest):
            raise ShapeError(
                f"einsum: subscripts must be letters (and one '...'), got {equation!r}"
            )
    used = set(eq)
    spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in used]
    widest = 0
    for i, (s, x) in enumerate(zip(ins, xs)):
        if "..." in s:
            k = x.ndim - (len(s) - 3)
            if k < 0:
                raise ShapeError(
                    f"einsum: subscripts {s!r} name more axes than operand {i} of shape "
                    f"{list(x.shape)} has"
                )
            widest = builtins.max(widest, k)
    if widest > len(spare):
        raise ShapeError("einsum: too many axes under '...'")
    lead = spare[:widest]
    for i, (s, x) in enumerate(zip(ins, xs)):
        if "..." in s:
            k = x.ndim - (len(s) - 3)
            ins[i] = s.replace("...", "".join(lead[widest - k :]))
    if arrow:
        out = out.replace("...", "".join(lead))
    else:
        counts: dict[str, int] = {}
        for c in "".join(ins):
            counts[c] = counts.get(c, 0) + 1
        out = "".join(lead) + "".join(
            sorted(c for c, k in counts.items() if k == 1 and c not in lead)
        )
    if len(set(out)) != len(out):
        raise ShapeError(f"einsum: an output subscript repeats in {equation!r}")
    for c in out:
        if not any(c in s for s in ins):
            raise ShapeError(f"einsum: output subscript {c!r} is not in any input")
    return ins, out


def _einsum_diagonals(x: Tensor, subs: str) -> tuple[Tensor, str]:
    """Takes the diagonal for each subscript repeated within one operand (``"ii->i"``)."""
    while len(set(subs)) != len(subs):
        c = next(c for c in subs if subs.count(c) > 1)
        i = subs.index(c)
        j = subs.index(c, i + 1)
        if x.shape[i] != x.shape[j]:
            raise ShapeError(
                f"einsum: subscript {c!r} repeats in {subs!r} over axes of sizes {x.shape[i]} "
                f"and {x.shape[j]}"
            )
        x = diagonal(x, 0, i, j)
        subs = "".join(ch for k, ch in enumerate(subs) if k not in (i, j)) + c
    return x, subs


def _einsum_reduce(x: Tensor, subs: str, keep: set[str]) -> tuple[Tensor, str]:
    """Sums the axes of ``x`` whose subscripts are not in ``keep``."""
    drop = [i for i, c in enumerate(subs) if c not in keep]
    if drop:
        x = x.sum(drop)
        subs = "".join(c for c in subs if c in keep)
    return x, subs


def _einsum_pair(a: Tensor, sa: str, b: Tensor, sb: str, keep: set[str]) -> tuple[Tensor, str]:
    batch = [c for c in sa if c in sb and c in keep]
    contract = [c for c in sa if c in sb and c not in keep]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]
    size = {c: a.shape[i] for i, c in enumerate(sa)}
    for i, c in enumerate(sb):
        if c in size and size[c] != b.shape[i] and 1 not in (size[c], b.shape[i]):
            raise ShapeError(
                f"einsum: subscript {c!r} has size {size[c]} in one operand and {b.shape[i]} "
                "in another"
            )
        if size.get(c, 1) == 1:
            size[c] = b.shape[i]  # (a size-1 axis broadcasts)

    def arranged(x: Tensor, s: str, order: list[str], shape: list[int]) -> Tensor:
        x = x.permute(*[s.index(c) for c in order]) if order else x
        full = [size[c] for c in order]
        if list(x.shape) != full:
            x = x.broadcast_to(*full)
        return x.reshape(*shape)

    nb = math.prod(size[c] for c in batch)
    nl = math.prod(size[c] for c in left)
    nk = math.prod(size[c] for c in contract)
    nr = math.prod(size[c] for c in right)
    a3 = arranged(a, sa, batch + left + contract, [nb, nl, nk])
    b3 = arranged(b, sb, batch + contract + right, [nb, nk, nr])
    out = (a3 @ b3).reshape(*[size[c] for c in batch + left + right])
    return out, "".join(batch + left + right)


def einsum(equation: str, *operands: Any) -> Tensor:
    """Einstein summation (``einsum("bij,bjk->bik", a, b)``, with ``...`` for broadcast axes
    and repeated subscripts for diagonals): operands are contracted
    pairwise, left to right, each pair as one batched matrix product."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    xs = [_check_tensor("einsum", f"operands[{i}]", x) for i, x in enumerate(operands)]
    if not xs:
        raise ValueError("einsum: needs at least one operand")
    if len({x.dtype.name for x in xs}) > 1:  # mixed dtypes meet in the promoted one
        from ._torch_extra import result_type

        common = xs[0].dtype
        for x in xs[1:]:
            common = result_type(_core.zeros((1,), dtype=common.name), x)
        xs = [x.astype(common.name if hasattr(common, "name") else str(common)) for x in xs]
    ins, out = _einsum_parse(equation, xs)
    for i, (s, x) in enumerate(zip(ins, xs)):
        if len(s) != x.ndim:
            raise ShapeError(f"einsum: subscripts {s!r} for an operand of shape {list(x.shape)}")
        xs[i], ins[i] = _einsum_diagonals(x, s)
    acc, sacc = xs[0], ins[0]
    for i in range(1, len(xs)):
        later = set(out).union(*[set(s) for s in ins[i + 1 :]])
        acc, sacc = _einsum_reduce(acc, sacc, later | set(ins[i]))
        b, sb = _einsum_reduce(xs[i], ins[i], later | set(sacc))
        acc, sacc = _einsum_pair(acc, sacc, b, sb, later)
    acc, sacc = _einsum_reduce(acc, sacc, set(out))
    if sacc != out:
        acc = acc.permute(*[sacc.index(c) for c in out])
    return acc


# -------------------------------------------------------------------------------- sorting


def _order(x: Tensor, dim: int, descending: bool) -> Tensor:
    # the engine's argsort op: stable (equal values keep their order, whatever ``stable``
    # asks), NaN above every number, on the tensor's device, and traceable. Narrow integer
    # inputs are sorted as int64 so the positions come back as int64 (in the input's own
    # dtype they would wrap past its range: 128 entries of int8, 256 of uint8)
    x = x.detach()
    if x.dtype.name in ("int8", "uint8", "int16", "int32"):
        x = x.astype("int64")
    return _core._argsort(x, dim, descending)


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
    """``(values, indices)`` sorted along ``dim`` (NaN last ascending, first descending;
    equal values keep their order). The values carry gradients, to where they came from."""
    x = _check_tensor("sort", "input", input)
    if x.ndim == 0:
        return _SortResult(x, _core.zeros((), dtype="int64", device=x.device))
    d = _dim("sort", dim, x.ndim)
    idx = _order(x, d, bool(descending))
    return _SortResult(gather(x, d, idx), idx)


def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """The indices that sort ``input`` along ``dim``."""
    return sort(input, dim, descending, stable).indices


def _total_order_key(a: np.ndarray, largest: bool) -> np.ndarray:
    """Keys that sort as PyTorch orders ``a`` (NaN above +inf, -0.0 equal to 0.0), reversed
    when ``largest``: the floats themselves without NaN, else integers of the same order."""
    if a.dtype.kind == "f":
        if a.dtype not in (np.float32, np.float64):
            a = a.astype(np.float32)
        if not np.isnan(a).any():
            # without NaN, float comparisons are the order already (-0.0 == 0.0)
            return -a if largest else a
        a = a + 0.0  # -0.0 as 0.0 (and a copy to edit)
        nan = np.isnan(a)
        if nan.any():
            a[nan] = np.nan  # one NaN pattern: above +inf
        signed = np.int32 if a.dtype == np.float32 else np.int64
        i = a.view(signed)
        mask = np.iinfo(signed).max
        key = np.where(i < 0, i ^ mask, i)
    else:
        key = a.astype(np.int64)
    return ~key if largest else key


def _host_topk_indices(x: Tensor, d: int, k: int, largest: bool) -> np.ndarray:
    """The indices of the ``k`` largest (smallest) entries along ``d`` of a CPU tensor in
    PyTorch's order (ties by index), from a linear-time selection."""
    a = np.asarray(x.detach()) if x.dtype.name != "bfloat16" else x.float().numpy()
    key = np.moveaxis(_total_order_key(a, largest), d, -1)
    kth = np.partition(key, k - 1, axis=-1)[..., k - 1 : k]
    better = key < kth
    tie = key == kth
    need = k - better.sum(-1, keepdims=True)
    chosen = better | (tie & (np.cumsum(tie, axis=-1) <= need))
    # positions of the chosen ones in index order: exactly k per row, row after row
    pos = np.nonzero(chosen.reshape(-1, chosen.shape[-1]))[1].reshape(*chosen.shape[:-1], k)
    order = np.argsort(np.take_along_axis(key, pos, -1), axis=-1, kind="stable")
    out = np.take_along_axis(pos, order, -1)
    return np.ascontiguousarray(np.moveaxis(out, -1, d), dtype=np.int64)


def topk(
    input: Tensor,
    k: int,
    dim: int = -1,
    largest: bool = True,
    sorted: bool = True,
    *,
    descending: bool | None = None,
    kth_only: bool = False,
    no_sort: bool = False,
) -> Any:
    """``(values, indices)`` of the ``k`` largest (or smallest) entries along ``dim``
    (PyTorch's), sorted (``sorted`` / MegEngine's ``no_sort`` are accepted; the order is
    always sorted). MegEngine's spelling ``topk(x, k, descending=False)`` (the smallest
    unless ``descending``; ``kth_only``: the k-th value and index only) is taken too."""
    x = _check_tensor("topk", "input", input)
    k = _int("topk", "k", k)
    if descending is not None:
        largest = bool(descending)
    d = _dim("topk", dim, x.ndim) if x.ndim else 0
    n = x.shape[d] if x.ndim else 1
    if not 0 <= k <= n:
        raise ShapeError(
            f"topk: k ({k}) must lie in [0, {n}] for dim {dim} of shape {list(x.shape)}"
        )
    if x.ndim == 0:
        return _TopkResult(x, _core.zeros((), dtype="int64", device=x.device))
    if str(x.device) == "cpu" and 0 < k < n and not _core._tracing():
        # a partial selection (numpy's introselect) and a sort of the k chosen only, instead
        # of sorting the whole axis (nanoGPT's generate: k=200 of a 50257-entry vocabulary)
        idx = tensor(_host_topk_indices(x, d, k, bool(largest)), device=x.device)
    else:
        idx = _order(x, d, bool(largest)).narrow(d, 0, k)
    if kth_only:
        last = idx.narrow(d, k - 1, 1)
        return _TopkResult(gather(x, d, last).squeeze(d), last.squeeze(d))
    return _TopkResult(gather(x, d, idx), idx)


# -------------------------------------------------------------- comparisons and counting


def _dims(dim: Any) -> Any:
    if dim is None:
        return None
    return [dim] if isinstance(dim, int) else list(dim)


def amax(
    input: Tensor, dim: Any = (), keepdim: bool = False, *, axis: Any = None, keepdims: Any = None
) -> Tensor:
    """The max over ``dim`` (or ``axis``; all axes when empty)."""
    x = _check_tensor("amax", "input", input)
    dim, keepdim = (axis if axis is not None else dim), (keepdim if keepdims is None else keepdims)
    d = _dims(dim) or None
    _check_nonempty_dims("amax", x, d)
    return _core.max(x, d, keepdim) if d is not None else _core.max(x, None, keepdim)


def amin(
    input: Tensor, dim: Any = (), keepdim: bool = False, *, axis: Any = None, keepdims: Any = None
) -> Tensor:
    """The min over ``dim`` (or ``axis``; all axes when empty)."""
    x = _check_tensor("amin", "input", input)
    dim, keepdim = (axis if axis is not None else dim), (keepdim if keepdims is None else keepdims)
    d = _dims(dim) or None
    _check_nonempty_dims("amin", x, d)
    return _core.min(x, d, keepdim) if d is not None else _core.min(x, None, keepdim)


def _check_nonempty_dims(op: str, x: Tensor, dims: Any) -> None:
    """An IndexError (as PyTorch's) for a max/min over a dim of size 0, which has no
    identity to return; other dims of an empty tensor reduce to an empty result."""
    if dims is None or x.numel() != 0:
        return
    for d in dims if isinstance(dims, (tuple, list)) else (dims,):
        if isinstance(d, int) and -x.ndim <= d < x.ndim and x.shape[d] == 0:
            from .nn._errors import IndexValueError

            raise IndexValueError(
                f"{op}(): Expected reduction dim {d} to have non-zero size "
                f"(input shape {list(x.shape)})"
            )


def clamp_min(input: Tensor, min: Any) -> Tensor:
    """``clamp(input, min=min)``."""
    return _check_tensor("clamp_min", "input", input).clamp(min=min)


def clamp_max(input: Tensor, max: Any) -> Tensor:
    """``clamp(input, max=max)``."""
    return _check_tensor("clamp_max", "input", input).clamp(max=max)


def isclose(
    input: Tensor, other: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
) -> Tensor:
    """``|input - other| <= atol + rtol * |other|`` elementwise (infinities equal themselves;
    NaNs equal each other only with ``equal_nan``)."""
    x = _check_tensor("isclose", "input", input)
    y = other if isinstance(other, Tensor) else _core.full((), other, dtype=x.dtype.name)
    a, b = x.detach().numpy(), y.detach().numpy()
    r = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    return tensor(r, dtype="bool", device=x.device)


def allclose(
    input: Tensor, other: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
) -> bool:
    """Whether every element is :func:`isclose`."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all().item())


def nonzero(input: Tensor, *, out: Any = None, as_tuple: bool = False) -> Any:
    """The indices of the non-zero elements: ``[n, ndim]`` int64, or one tensor per axis."""
    if out is not None:
        from ._ops import _write_out

        if as_tuple:
            raise TypeError("nonzero: out= is not supported with as_tuple=True")
        return _write_out("nonzero", out, nonzero(input))
    x = _check_tensor("nonzero", "input", input)
    if x.ndim == 0:  # as PyTorch: one hit with no coordinates, or none
        hit = int(bool(x.detach().numpy()))
        if as_tuple:
            return (_core.zeros((hit,), dtype="int64", device=x.device),)
        return _core.zeros((hit, 0), dtype="int64", device=x.device)
    idx = np.nonzero(x.detach().numpy())
    if as_tuple:
        return tuple(tensor(i, dtype="int64", device=x.device) for i in idx)
    stacked = np.stack(idx, axis=1) if idx else np.zeros((0, 0), np.int64)
    return tensor(stacked.reshape(-1, x.ndim), dtype="int64", device=x.device)


def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """:func:`nonzero` with a fixed row count ``size``: ``[size, ndim]`` int64, the first
    ``size`` hits, padded with rows of ``fill_value`` when there are fewer (a shape known
    in advance, for compiled programs)."""
    x = _check_tensor("nonzero_static", "input", input)
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ShapeError(f"nonzero_static: size must be a non-negative integer, got {size!r}")
    hits = x.detach().numpy()
    idx = np.stack(np.nonzero(hits), axis=1) if x.ndim else np.zeros((int(bool(hits)), 0))
    out = np.full((size, x.ndim), fill_value, dtype=np.int64)
    k = min(size, idx.shape[0])
    out[:k] = idx[:k]
    return tensor(out, dtype="int64", device=x.device)


def count_nonzero(input: Tensor, dim: Any = None) -> Tensor:
    """How many elements are non-zero (over ``dim``)."""
    x = _check_tensor("count_nonzero", "input", input)
    mask = (x != 0).astype("int64")
    return mask.sum() if dim is None else mask.sum(_dims(dim))


def _dim_index(op: str, x: Tensor, dim: Any) -> int:
    d = int(dim)
    if not -x.ndim <= d < x.ndim:
        raise IndexError(f"{op}: dim {d} is out of range for a tensor of {x.ndim} axes")
    return d % x.ndim


def unique(
    input: Tensor,
    sorted: bool = True,
    return_inverse: bool = False,
    return_counts: bool = False,
    dim: Any = None,
) -> Any:
    """The distinct values, sorted (and the inverse indices and counts when asked)."""
    x = _check_tensor("unique", "input", input)
    if dim is not None:
        # the distinct slices along `dim`, sorted lexicographically (PyTorch's)
        d = _dim_index("unique", x, dim)
        zero = [i for i, n in enumerate(x.shape) if n == 0]
        if len(zero) > 1 or (zero and zero[0] != d):
            # the slices along `dim` would be empty (or there would be none) in more than
            # one way: PyTorch refuses it
            raise RuntimeError(
                f"unique: cannot take the distinct slices along dim {d} of shape "
                f"{list(x.shape)}: only the selected dim may have size 0"
            )
        vals, inv, counts = np.unique(
            x.detach().numpy(), return_inverse=True, return_counts=True, axis=d
        )
        out = [tensor(vals, dtype=x.dtype.name, device=x.device)]
        if return_inverse:
            out.append(tensor(inv.reshape(-1), dtype="int64", device=x.device))
        if return_counts:
            out.append(tensor(counts, dtype="int64", device=x.device))
        return out[0] if len(out) == 1 else tuple(out)
    # each NaN is a value of its own (NaN != NaN), as PyTorch's
    vals, inv, counts = np.unique(
        x.detach().numpy(), return_inverse=True, return_counts=True, equal_nan=False
    )
    out = [tensor(vals, dtype=x.dtype.name, device=x.device)]
    if return_inverse:
        out.append(tensor(inv.reshape(x.shape), dtype="int64", device=x.device))
    if return_counts:
        out.append(tensor(counts, dtype="int64", device=x.device))
    return out[0] if len(out) == 1 else tuple(out)


def nan_to_num(
    input: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
) -> Tensor:
    """NaN, +inf and -inf replaced (by 0 and the dtype's largest and lowest finite values by
    default); the gradient flows where the value is kept."""
    x = _check_tensor("nan_to_num", "input", input)
    if x.dtype.kind != "f":
        return x
    from ._torch_more import finfo

    # (bfloat16's own limits: float32's would round to inf in it)
    info = finfo(x.dtype.name)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    fill = _core.full((), 0.0, dtype=x.dtype.name, device=x.device)
    out = _core.where(x.isnan(), fill + nan, x)
    out = _core.where(out == math.inf, fill + hi, out)
    return _core.where(out == -math.inf, fill + lo, out)


# ------------------------------------------------------------------- shapes and stacking


def movedim(input: Tensor, source: Any, destination: Any) -> Tensor:
    """Moves axes ``source`` to positions ``destination`` (a view)."""
    x = _check_tensor("movedim", "input", input)
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ShapeError(
            f"movedim: Invalid source or destination dims: source ({src} dims) should contain "
            f"the same number of dims as destination ({dst} dims)"
        )
    n = x.ndim
    src = [_dim("movedim", s, n) for s in src]
    dst = [_dim("movedim", d, n) for d in dst]
    for name, dims in (("source", src), ("destination", dst)):
        if len(set(dims)) != len(dims):
            raise ShapeError(f"movedim: repeated dim in `{name}` ({dims})")
    if n == 0:
        return x.view(())  # a 0-d tensor's only axis (-1 or 0) stays where it is
    rest = [i for i in range(n) if i not in src]
    order = [-1] * n
    for s, d in zip(src, dst):
        order[d] = s
    it = iter(rest)
    order = [o if o >= 0 else next(it) for o in order]
    return x.permute(*order)


def swapaxes(input: Tensor, axis0: int, axis1: int) -> Tensor:
    """Swaps two axes (a view)."""
    x = _check_tensor("swapaxes", "input", input)
    return x.transpose(axis0, axis1)


def _atleast(x: Tensor, n: int) -> Tensor:
    if x.ndim >= n:
        return x
    if n == 2:
        return x.reshape(1, -1) if x.ndim == 1 else x.reshape(1, 1)
    shape = {0: (1, 1, 1), 1: (1, -1, 1), 2: (*x.shape, 1)}[x.ndim]
    return x.reshape(*shape)


def hstack(tensors: Any) -> Tensor:
    """Concatenates along axis 1 (axis 0 for 1-D tensors)."""
    ts = [_check_tensor("hstack", f"tensors[{i}]", x) for i, x in enumerate(tensors)]
    ts = [x.reshape(1) if x.ndim == 0 else x for x in ts]
    return _core.concat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors: Any) -> Tensor:
    """Concatenates along axis 0, 1-D tensors as rows."""
    ts = [_atleast(_check_tensor("vstack", f"tensors[{i}]", x), 2) for i, x in enumerate(tensors)]
    return _core.concat(ts, 0)


def dstack(tensors: Any) -> Tensor:
    """Concatenates along axis 2."""
    ts = [_atleast(_check_tensor("dstack", f"tensors[{i}]", x), 3) for i, x in enumerate(tensors)]
    return _core.concat(ts, 2)


def meshgrid(*tensors: Any, indexing: str = "ij") -> tuple[Tensor, ...]:
    """Coordinate grids of 1-D tensors (``indexing="ij"`` or ``"xy"``)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if not tensors:
        raise ShapeError("meshgrid expects a non-empty TensorList")
    if indexing not in ("ij", "xy"):
        raise ShapeError(
            f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}'
        )
    ts = [_check_tensor("meshgrid", f"tensors[{i}]", x) for i, x in enumerate(tensors)]
    for x in ts:
        if x.ndim > 1:
            raise ShapeError(
                "torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got a tensor "
                f"of shape {list(x.shape)}"
            )
    if len({x.dtype.name for x in ts}) > 1:
        raise DTypeError("meshgrid expects all tensors to have the same dtype")
    ts = [x.reshape(-1) for x in ts]
    shape = [x.shape[0] for x in ts]
    out = []
    for i, x in enumerate(ts):
        view = [1] * len(ts)
        view[i] = -1
        out.append(x.reshape(*view).broadcast_to(*shape))
    if indexing == "xy" and len(ts) >= 2:
        out = [o.transpose(0, 1) for o in out]
    return tuple(out)


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal of the ``(dim1, dim2)`` planes, as the last axis."""
    x = _check_tensor("diagonal", "input", input)
    if x.ndim < 2:
        from .nn._errors import IndexValueError

        # (PyTorch's IndexError: its default dims are out of range)
        raise IndexValueError(f"diagonal: input needs at least 2 axes, got shape {list(x.shape)}")
    d1, d2 = _dim("diagonal", dim1, x.ndim), _dim("diagonal", dim2, x.ndim)
    if d1 == d2:
        raise ShapeError(f"diagonal: dim1 and dim2 must differ, got {dim1} and {dim2}")
    # a view, as PyTorch's: writes through it reach ``input``
    return x._diagonal_view(_int("diagonal", "offset", offset), d1, d2)


def diag(input: Tensor, diagonal: int = 0, *, out: Any = None) -> Tensor:
    """A square matrix with ``input`` (1-D) on a diagonal, or the diagonal of a matrix."""
    if out is not None:
        from ._ops import _write_out

        return _write_out("diag", out, diag(input, diagonal))
    x = _check_tensor("diag", "input", input)
    _rank("diag", "input", x, (1, 2))
    k = _int("diag", "diagonal", diagonal)
    if x.ndim == 2:
        return globals()["diagonal"](x, k).clone()  # a copy, as PyTorch's (not a view)
    # placed, not multiplied: any dtype (bool too), and inf or NaN entries leave the zeros
    from ._torch_extra import diag_embed

    return diag_embed(x, k)


def cross(input: Tensor, other: Tensor, dim: int | None = None, *, out: Any = None) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (the first axis of size 3 by default);
    ``out=`` as PyTorch's."""
    if out is not None:
        from ._ops import _write_out

        return _write_out("cross", out, cross(input, other, dim))
    a, b = _check_tensor("cross", "input", input), _check_tensor("cross", "other", other)
    if dim is None:
        dim = next((i for i, s in enumerate(a.shape) if s == 3), -1)
    if a.ndim != b.ndim:
        raise ShapeError(
            f"cross: input and other must have the same number of dimensions, got shapes "
            f"{list(a.shape)} and {list(b.shape)}"
        )
    d = _dim("cross", dim, a.ndim)
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise ShapeError(
            f"cross: dim {dim} must have size 3, got shapes {list(a.shape)} and {list(b.shape)}"
        )
    a0, a1, a2 = (a.narrow(d, i, 1) for i in range(3))
    b0, b1, b2 = (b.narrow(d, i, 1) for i in range(3))
    return _core.concat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: Any = None) -> Tensor:
    """The ``p``-norm distances between the rows of ``x1`` ``[..., n, d]`` and ``x2``
    ``[..., m, d]``: ``[..., n, m]`` (``compute_mode`` is accepted: the distances are
    always taken from the differences, the exact way)."""
    modes = (None, "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist")
    if compute_mode not in (*modes, "donot_use_mm_for_euclid_dist"):
        raise ValueError(f"cdist: {compute_mode!r} is not a valid value for compute_mode")
    if not p >= 0:
        raise ShapeError(f"cdist: p must be non-negative, got {p}")
    a, b = _check_tensor("cdist", "x1", x1), _check_tensor("cdist", "x2", x2)
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-1]:
        raise ShapeError(
            f"cdist: x1 and x2 must be [..., n, d] and [..., m, d], got {list(a.shape)} and "
            f"{list(b.shape)}"
        )
    if a.dtype != b.dtype:
        raise DTypeError(f"cdist: x1 and x2 must have the same dtype, got {a.dtype} and {b.dtype}")
    diff = a.unsqueeze(-2) - b.unsqueeze(-3)
    # no features: every distance is 0 (the inf-norm's max over nothing included)
    return _pairwise_norm(diff, 1.0 if a.shape[-1] == 0 else p, -1)


def _pairwise_norm(diff: Tensor, p: float, dim: int) -> Tensor:
    """The ``p``-norm of ``diff`` along ``dim`` for cdist/pdist. With ``p = inf`` every
    entry that ties for the largest magnitude gets the whole gradient (``sign`` of it), as
    PyTorch's distance kernels give it, where ``norm``'s max shares it among the ties."""
    if p != math.inf:
        return _core_norm(diff, p, dim)
    mag = diff.abs()
    top = mag.detach().amax(dim, keepdim=True)
    tied = (mag.detach() == top).astype(diff.dtype.name)
    # the value is the max; the second term is zero but carries sign(diff) on the ties
    return top.squeeze(dim) + ((mag - mag.detach()) * tied).sum(dim)


def _core_norm(x: Tensor, p: float, dim: int) -> Tensor:
    from ._ops import norm

    return norm(x, p, dim)


def lerp(input: Tensor, end: Any, weight: Any) -> Tensor:
    """``input + weight * (end - input)`` where ``|weight| < 0.5`` and ``end - (end - input)
    * (1 - weight)`` elsewhere, PyTorch's two forms: a weight of 1 gives ``end`` exactly and
    an infinite ``input`` or ``end`` gives the same inf/NaN as PyTorch's."""
    x = _check_tensor("lerp", "input", input)
    # PyTorch interpolates within one floating dtype: end and a weight tensor with
    # dimensions must have input's dtype (a 0-d weight may differ)
    if x.dtype.kind not in "fc":
        raise DTypeError(f"lerp: input must be a floating-point tensor, got {x.dtype}")
    for name, t in (("end", end), ("weight", weight)):
        if isinstance(t, Tensor) and t.dtype != x.dtype and (name == "end" or t.ndim):
            raise DTypeError(f"lerp: expected dtype {x.dtype} for {name} but got dtype {t.dtype}")
    return _lerp_forms(x, end, weight)


def _lerp_forms(x: Tensor, end: Any, weight: Any) -> Any:
    """:func:`lerp`'s value without its argument checks (also the ``_foreach_lerp`` one)."""
    if not isinstance(weight, Tensor):
        if abs(weight) < 0.5:
            return x + weight * (end - x)
        return end - (end - x) * (1 - weight)
    return _core.where(weight.abs() < 0.5, x + weight * (end - x), end - (end - x) * (1 - weight))


def _number_value(op: str, value: Any) -> Any:
    """``value=`` of addcmul/addcdiv as a number: a 0-d tensor that needs no gradient is
    read as one (as PyTorch's), any other tensor is refused (no gradient would reach it)."""
    if isinstance(value, Tensor):
        if value.ndim != 0 or value.requires_grad:
            raise TypeError(f"{op}(): argument 'value' must be Number, not Tensor")
        return value.item()
    return value


def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: float = 1) -> Tensor:
    """``input + value * tensor1 * tensor2``; with integer tensors a float ``value`` is
    truncated to an integer first, as PyTorch's (the result keeps the integer dtype)."""
    value = _number_value("addcmul", value)
    ints = all(isinstance(t, Tensor) and t.dtype.kind in "iu" for t in (input, tensor1, tensor2))
    if ints and isinstance(value, float):
        value = int(value)
    prod = tensor1 * tensor2
    return input + (prod if value == 1 else value * prod)


def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: float = 1) -> Tensor:
    """``input + value * tensor1 / tensor2``."""
    value = _number_value("addcdiv", value)
    if all(isinstance(t, Tensor) and t.dtype.kind in "biu" for t in (tensor1, tensor2)):
        raise DTypeError(
            "Integer division with addcdiv is no longer supported, and in a future release "
            "addcdiv will perform a true division of tensor1 and tensor2. The historic "
            "addcdiv behavior can be implemented as (input + value * torch.trunc(tensor1 / "
            "tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / "
            "tensor2) for float inputs. The future addcdiv behavior is just the latter "
            "implementation: (input + value * tensor1 / tensor2), for all dtypes."
        )
    q = tensor1 / tensor2
    return input + (q if value == 1 else value * q)


# ---------------------------------------------------------------------------- methods


def _inplace(compute: Any) -> Any:
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        from ._torch_inplace import write_result

        out = compute(self._write_source(), *args, **kwargs)
        return write_result(method.__name__, self, out)

    method._inplace = True  # type: ignore[attr-defined]

    method.__doc__ = f"In place: ``self.copy_({getattr(compute, '__name__', 'op')}(...))``."
    return method


def _add_(self: Tensor, other: Any, *, alpha: float = 1) -> Tensor:
    from ._torch_keywords import scale_by_alpha

    if type(alpha) is not int or alpha != 1:
        other = scale_by_alpha("add_", self, other, alpha)
    if self.dtype.kind == "b" and isinstance(other, Tensor) and other.dtype.kind == "b":
        return self.logical_or_(other)  # (a sum of bools is their logical or)
    self += other
    return self


def _sub_(self: Tensor, other: Any, *, alpha: float = 1) -> Tensor:
    from ._torch_keywords import scale_by_alpha

    self -= scale_by_alpha("sub_", self, other, alpha)
    return self


def _mul_(self: Tensor, other: Any) -> Tensor:
    self *= other
    return self


def _div_(self: Tensor, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    if rounding_mode is not None:
        raise NotImplementedError("div_: rounding_mode is not supported")
    self /= other
    return self


def _new(self: Tensor, fill: float) -> Any:
    def make(
        *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False
    ) -> Tensor:
        if len(size) == 1 and isinstance(size[0], (list, tuple)):
            size = tuple(size[0])
        name = _dtype_name(dtype) if dtype is not None else self.dtype.name
        t = _core.full(tuple(size), fill, dtype=name, device=device or self.device)
        return t.requires_grad_() if requires_grad else t

    return make


def _new_full(
    self: Tensor,
    size: Any,
    fill_value: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    name = _dtype_name(dtype) if dtype is not None else self.dtype.name
    t = _core.full(tuple(size), fill_value, dtype=name, device=device or self.device)
    return t.requires_grad_() if requires_grad else t


def _new_tensor(
    self: Tensor, data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    t = tensor(
        data, dtype=dtype if dtype is not None else self.dtype.name, device=device or self.device
    )
    return t.requires_grad_() if requires_grad else t


_TYPE_NAMES = {
    "torch.FloatTensor": "float32",
    "torch.DoubleTensor": "float64",
    "torch.HalfTensor": "float16",
    "torch.BFloat16Tensor": "bfloat16",
    "torch.LongTensor": "int64",
    "torch.IntTensor": "int32",
    "torch.ShortTensor": "int16",
    "torch.ByteTensor": "uint8",
    "torch.CharTensor": "int8",
    "torch.BoolTensor": "bool",
}


def _type(self: Tensor, dtype: Any = None) -> Any:
    """Without an argument, PyTorch's type name (``"torch.FloatTensor"``); with a dtype (or
    such a name), the tensor cast to it."""
    if dtype is None:
        for k, v in _TYPE_NAMES.items():
            if v == self.dtype.name:
                return k
        return self.dtype.name
    if isinstance(dtype, str) and dtype in _TYPE_NAMES:
        dtype = _TYPE_NAMES[dtype]
    return self.astype(_dtype_name(dtype))


def _repeat_interleave(
    self: Tensor, repeats: Any, dim: int | None = None, *, output_size: Any = None
) -> Tensor:
    """Each entry (or slice along ``dim``) repeated ``repeats`` times (a number or 1-D
    integer counts); ``output_size``, when given, must be the length that results."""
    x = self if dim is not None else self.reshape(-1)
    d = 0 if dim is None else _dim("repeat_interleave", dim, x.ndim)
    reps = repeats.detach().numpy() if isinstance(repeats, Tensor) else repeats
    arr = np.asarray(reps)
    if arr.ndim > 1:
        raise ShapeError("repeat_interleave: repeats must be 0-dim or 1-dim tensor")
    if arr.size and arr.dtype.kind not in "iu":
        raise DTypeError(f"repeat_interleave: repeats must hold integers, got {arr.dtype}")
    if arr.ndim == 1 and arr.shape[0] not in (1, x.shape[d]):
        raise ShapeError(
            f"repeat_interleave: repeats must have the same size as input along dim, but got "
            f"repeats.size(0) = {arr.shape[0]} and input.size({d}) = {x.shape[d]}"
        )
    if arr.size and arr.dtype.kind in "iu" and arr.min() < 0:
        raise ShapeError("repeat_interleave: repeats can not be negative")
    idx = np.repeat(np.arange(x.shape[d]), reps)
    if output_size is not None and output_size != idx.size:
        raise ShapeError(
            f"repeat_interleave: output_size {output_size} does not match the {idx.size} "
            f"entries the repeats give along dim {d}"
        )
    return x.index_select(d, tensor(idx, dtype="int64", device=x.device))


def _tensor_state(t: Tensor) -> tuple:
    """What rebuilds ``t`` (pickling): its values (bfloat16 as float32), dtype and device."""
    data = t.detach()
    if data.dtype.name == "bfloat16":
        data = data.astype("float32")
    return (data.numpy().copy(), t.dtype.name, str(t.device))


def _rebuild_tensor(data: Any, dtype: str, device: str, requires_grad: bool) -> Tensor:
    t = tensor(data, dtype=dtype, device=device)
    return t.requires_grad_() if requires_grad else t


def _reduce(self: Tensor) -> tuple:
    return (_rebuild_tensor, (*_tensor_state(self), bool(self.requires_grad) and self.is_leaf))


def _deepcopy(self: Tensor, memo: dict) -> Tensor:
    """A copy of the data, a new leaf (requiring grad when this is a leaf that does), with a
    copy of ``.grad``, as ``copy.deepcopy`` of a PyTorch tensor."""
    out = self.detach().copy()
    if self.requires_grad and self.is_leaf:
        out.requires_grad_()
    if self.grad is not None:
        out.grad = self.grad.detach().copy()
    memo[id(self)] = out
    if type(self) is Tensor and self.__dict__:
        import copy

        # (attributes a program set on the tensor: `pe.require_grad = False`)
        out.__dict__.update(copy.deepcopy(self.__dict__, memo))
    return out


def _data_get(self: Tensor) -> Tensor:
    """The values without the tape (PyTorch's ``.data``): a handle on the same storage, so
    in-place changes through it change this tensor, unrecorded."""
    return self.detach()


def _data_set(self: Tensor, value: Any) -> None:
    """``t.data = value``: ``t`` now holds ``value``'s data (PyTorch's: any shape, dtype or
    device; the object, its ``requires_grad`` and ``.grad`` stay)."""
    v = value if isinstance(value, Tensor) else tensor(value)
    if tuple(v.shape) == tuple(self.shape) and v.dtype == self.dtype and v.device == self.device:
        self.detach().copy_(v)
        return
    from .nn.modules import _replace_data

    _replace_data(self, v.detach())


_UFUNC_OPERATORS = {
    "add": "__add__",
    "subtract": "__sub__",
    "multiply": "__mul__",
    "true_divide": "__truediv__",
    "divide": "__truediv__",
    "floor_divide": "__floordiv__",
    "remainder": "__mod__",
    "power": "__pow__",
    "matmul": "__matmul__",
    "equal": "__eq__",
    "not_equal": "__ne__",
    "less": "__lt__",
    "less_equal": "__le__",
    "greater": "__gt__",
    "greater_equal": "__ge__",
    "logical_and": "__and__",
    "logical_or": "__or__",
    "bitwise_and": "__and__",
    "bitwise_or": "__or__",
    "bitwise_xor": "__xor__",
}
_REFLECTED = {
    "__eq__": "__eq__",
    "__ne__": "__ne__",
    "__lt__": "__gt__",
    "__le__": "__ge__",
    "__gt__": "__lt__",
    "__ge__": "__le__",
}
_UFUNC_NAMES = {
    "absolute": "abs",
    "negative": "neg",
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "arcsinh": "asinh",
    "arccosh": "acosh",
    "arctanh": "atanh",
    "arctan2": "atan2",
    "fmax": "fmax",
    "fmin": "fmin",
}


def _array_ufunc(self: Tensor, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """Numpy ufuncs on tensors (``np.add(t, a)``, ``a * t``, ``np.exp(t)``): the ufuncs
    ferrograd has run as its own ops on tensors (differentiable, on the tensor's device;
    arrays and numpy scalars taken as ``tensor``/Python numbers); any other is computed by
    numpy on the values and returned as a tensor, as PyTorch's tensors do."""
    if kwargs.get("out") is not None:
        return NotImplemented
    device = next(x.device for x in inputs if isinstance(x, Tensor))

    def operand(x: Any) -> Any:
        if isinstance(x, np.generic):
            return x.item()
        if isinstance(x, np.ndarray):
            return tensor(x, device=device)
        return x

    name = ufunc.__name__
    if method == "__call__" and not kwargs:
        args = [operand(x) for x in inputs]
        op = _UFUNC_OPERATORS.get(name)
        if op is not None and len(args) == 2:
            a, b = args
            if isinstance(a, Tensor):
                return getattr(a, op)(b)
            # a number with a tensor: the tensor's reflected operator
            return getattr(b, _REFLECTED.get(op, "__r" + op[2:]))(a)
        import ferrograd

        fn = getattr(ferrograd, _UFUNC_NAMES.get(name, name), None)
        if fn is not None and all(isinstance(a, (Tensor, int, float, bool)) for a in args):
            try:
                return fn(*args)
            except TypeError:
                pass
    from .autodiff import is_grad_enabled

    tracked = [x for x in inputs if isinstance(x, Tensor) and x.requires_grad]
    if tracked and is_grad_enabled():
        # computed by numpy, the result could not carry a gradient: refused, as PyTorch's
        # `numpy()` of a tensor that requires grad (rather than a silently missing gradient)
        raise RuntimeError(
            f"numpy.{name}{'' if method == '__call__' else '.' + method}: cannot compute it "
            f"on a tensor that requires grad (shape {list(tracked[0].shape)}): ferrograd has "
            "no such op; use t.detach() for the values"
        )
    values = [x.numpy() if isinstance(x, Tensor) else x for x in inputs]
    out = getattr(ufunc, method)(*values, **kwargs)
    if isinstance(out, tuple):
        return tuple(tensor(np.asarray(o), device=device) for o in out)
    return tensor(np.asarray(out), device=device)


def is_tensor(obj: Any) -> bool:
    """Whether ``obj`` is a ferrograd Tensor."""
    return isinstance(obj, Tensor)


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A CPU tensor over the array's own memory, as PyTorch's: writes on either side are
    seen by the other, and the tensor keeps the array alive. A read-only array gives a
    tensor that refuses writes (with a UserWarning, where PyTorch warns that writes are
    undefined). Arrays whose memory cannot be read as a tensor raise instead of being
    copied, as PyTorch's do: a dtype ferrograd does not store (TypeError), a byte order
    other than the machine's or strides that are not whole elements (ValueError). Arrays
    with negative strides are shared too (PyTorch refuses them); the rare array whose data
    is not aligned to its element size is copied."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(ndarray).__name__}")
    dt = ndarray.dtype
    if dt.name not in _FROM_NUMPY_DTYPES:
        raise TypeError(
            f"from_numpy: cannot share an array of dtype {dt}; the dtypes a tensor can "
            f"hold are {', '.join(_FROM_NUMPY_DTYPES)}"
        )
    if not dt.isnative:
        raise ValueError(
            f"from_numpy: the array's byte order ({dt.str}) is not this machine's, so its "
            "memory cannot be shared; convert it first, e.g. "
            "array.astype(array.dtype.newbyteorder('='))"
        )
    if any(s % dt.itemsize for s in ndarray.strides):
        raise ValueError(
            f"from_numpy: the array's strides {ndarray.strides} are not multiples of its "
            f"element size ({dt.itemsize} bytes for {dt}), so its memory cannot be shared; "
            "copy the array first"
        )
    if not ndarray.flags.writeable:
        import warnings

        warnings.warn(
            "from_numpy: the array is not writable, so the tensor shares its memory "
            "read-only and refuses writes; copy the array first for a writable tensor",
            UserWarning,
            stacklevel=2,
        )
    from ._ops import _shared

    return _shared(ndarray)


# the numpy dtypes ``from_numpy`` shares (ferrograd's, less bfloat16, which numpy lacks
# without ml_dtypes; an ml_dtypes bfloat16 array is shared too)
_FROM_NUMPY_DTYPES = (
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
)


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """``data`` itself when it is already a tensor of that dtype and device; a numpy array's
    or a CPU PyTorch tensor's own memory (detached) when neither dtype nor device asks for
    a change (as ``from_numpy`` / ``from_dlpack``); else a new tensor."""
    if isinstance(data, Tensor):
        out = data
        if dtype is not None and out.dtype != _dtype_name(dtype):
            out = out.astype(_dtype_name(dtype))
        if device is not None and str(out.device) != str(device):
            out = out.to(device)
        return out
    if (
        isinstance(data, np.ndarray)
        and (dtype is None or _dtype_name(dtype) == str(data.dtype))
        and (device is None or str(device) == "cpu")
    ):
        from ._ops import _shared

        return _shared(data)
    from ._tensor import _foreign_dtype, _is_foreign_tensor

    if (
        _is_foreign_tensor(data)
        and str(data.device) == "cpu"
        and (dtype is None or _dtype_name(dtype) == _foreign_dtype(data))
        and (device is None or str(device) == "cpu")
    ):
        from ._ops import from_dlpack

        return from_dlpack(data.detach())  # a CPU torch tensor's own memory (detached)
    return tensor(data, dtype=dtype, device=device)


def clone(input: Tensor) -> Tensor:
    """A copy of ``input`` (differentiable: the gradient passes to ``input``)."""
    return _check_tensor("clone", "input", input).clone()


def index_fill(input: Tensor, dim: int, index: Any, value: Any) -> Tensor:
    """``input`` with the entries ``index`` (1-D) along ``dim`` set to ``value`` (a number
    or a 0-d tensor; differentiable in ``input`` and in a tensor ``value``; the filled
    entries of ``input`` get no gradient)."""
    from ._ops import _dim as _ops_dim

    x = _check_tensor("index_fill", "input", input)
    d = _ops_dim("index_fill", x, dim)
    if _core._tracing() and isinstance(index, Tensor) and index.dtype.kind == "i" and x.ndim:
        return _index_fill_traced(x, d, index, value)
    idx = index.detach().numpy() if isinstance(index, Tensor) else np.asarray(index)
    if idx.ndim > 1:
        from .nn._errors import IndexRuntimeError

        raise IndexRuntimeError(
            f"index_fill: index must be 0-d or 1-D (a vector or scalar), got shape "
            f"{list(idx.shape)}"
        )
    if idx.size and idx.dtype.kind not in "iu":
        raise IndexError(f"index_fill: Expected dtype int64 for index, got {idx.dtype}")
    if isinstance(value, complex):
        raise DTypeError(
            "index_fill: Converting complex Scalar to non-complex type is not supported"
        )
    idx = idx.astype(np.int64).reshape(-1)
    n = x.shape[d] if x.ndim else 1
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise IndexError(f"index_fill: index out of range for dim {dim} of size {n}")
    keep = np.ones(n, dtype=bool)
    keep[idx % n if n else idx] = False
    shape = [1] * x.ndim
    if x.ndim:
        shape[d] = n
    mask = tensor(keep.reshape(shape), dtype="bool", device=x.device)
    if isinstance(value, Tensor):
        # a 0-d tensor value: differentiable, as PyTorch's (its gradient is the sum over
        # the filled entries)
        if value.ndim != 0:
            raise ShapeError(
                f"index_fill: value must be a 0-dimensional tensor, got shape {list(value.shape)}"
            )
        fill = value if value.dtype == x.dtype else value.astype(x.dtype.name)
    else:
        fill = _core.full((), value, dtype=x.dtype.name, device=x.device)
    return _core.where(mask, x, fill)


def _index_fill_traced(x: Tensor, d: int, index: Tensor, value: Any) -> Tensor:
    """:func:`index_fill` inside ``fg.trace``, where the index's values are not known while
    the graph is built: the filled slices are marked by a scatter of ones (negative indices
    wrapped; one out of range raises when the graph runs), so each replay takes the new
    index."""
    if index.ndim > 1:
        from .nn._errors import IndexRuntimeError

        raise IndexRuntimeError(
            f"index_fill: index must be 0-d or 1-D (a vector or scalar), got shape "
            f"{list(index.shape)}"
        )
    if isinstance(value, complex):
        raise DTypeError(
            "index_fill: Converting complex Scalar to non-complex type is not supported"
        )
    n = x.shape[d]
    idx = index.reshape(-1).astype("int64")
    # (checked against [-n, n) by a gather from n ones, which raises when the graph runs)
    ok = _core.index_select(_core.ones((n,), dtype="int64", device=x.device), 0, idx)
    idx = _core.where(idx < 0, idx + n, idx) * ok
    ones = _core.ones((idx.shape[0],), dtype="int64", device=x.device)
    hit = _core._scatter_add(ones, idx, 0, (n,)) > 0
    shape = [1] * x.ndim
    shape[d] = n
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ShapeError(
                f"index_fill: value must be a 0-dimensional tensor, got shape {list(value.shape)}"
            )
        fill = value if value.dtype == x.dtype else value.astype(x.dtype.name)
    else:
        fill = _core.full((), value, dtype=x.dtype.name, device=x.device)
    return _core.where(hit.reshape(*shape), fill, x)


def _random_fill(draw: Any, name: str | None = None) -> Any:
    def method(self: Tensor, *args: Any, generator: Any = None, **kwargs: Any) -> Tensor:
        from .random import _rng_for

        if name is not None:  # a continuous distribution
            from .nn._errors import require_float_fill

            require_float_fill(name, self)
        rng = _rng_for(getattr(draw, "__name__", "fill"), generator, self.device)
        values = draw(rng, tuple(self.shape), *args, **kwargs)
        self.copy_(tensor(np.asarray(values), dtype=self.dtype.name, device=self.device))
        return self

    method.__doc__ = "Fills the tensor in place with samples (``fg.manual_seed``'s generator)."
    return method


# ``random_()``'s default upper bound (exclusive) per dtype, as PyTorch's: the integers a
# float type holds exactly (its mantissa), an integer type's positive range, 0/1 for bool
_RANDOM_HIGH = {
    "bool": 2,
    "uint8": 2**8,
    "int8": 2**7,
    "int16": 2**15,
    "int32": 2**31,
    "int64": 2**63,
    "float16": 2**11 + 1,
    "bfloat16": 2**8 + 1,
    "float32": 2**24 + 1,
    "float64": 2**53 + 1,
}


def _random_ints(g: np.random.Generator, shape: tuple, low: int = 0, high: Any = None) -> Any:
    if high is None:
        low, high = 0, low if low else 2**24
    return g.integers(low, high, shape)


def _random_(self: Tensor, *args: Any, generator: Any = None, **kwargs: Any) -> Tensor:
    """``random_(from=0, to=None)``: uniform integers in ``[from, to)`` (``random_(to)``:
    ``[0, to)``; no bounds: ``[0, 2**mantissa]`` for a float dtype, the non-negative values
    of an integer dtype, ``False``/``True`` for bool), in place."""
    if not args and not kwargs:
        args = (_RANDOM_HIGH.get(self.dtype.name, 2**24),)
    return _random_fill(_random_ints)(self, *args, generator=generator, **kwargs)


def _install() -> None:
    from ._ops import index_add, scatter, scatter_add
    from ._ops import index_select as _ops_index_select

    methods: dict[str, Any] = {
        "scatter_": _inplace(scatter),
        "scatter_add_": _inplace(scatter_add),
        "index_add_": _inplace(index_add),
        "index_fill": index_fill,
        "index_fill_": _inplace(index_fill),
        "exponential_": _random_fill(
            lambda g, s, lambd=1.0: g.exponential(1.0 / lambd, s), "exponential_"
        ),
        "log_normal_": _random_fill(
            lambda g, s, mean=1.0, std=2.0: g.lognormal(mean, std, s), "log_normal_"
        ),
        "cauchy_": _random_fill(
            lambda g, s, median=0.0, sigma=1.0: median + sigma * g.standard_cauchy(s), "cauchy_"
        ),
        "geometric_": _random_fill(lambda g, s, p: g.geometric(p, s)),
        "random_": _random_,
        "sort": sort,
        "argsort": argsort,
        "topk": topk,
        "amax": amax,
        "amin": amin,
        "nonzero": nonzero,
        "nonzero_static": nonzero_static,
        "unique": unique,
        "count_nonzero": count_nonzero,
        "isclose": isclose,
        "allclose": allclose,
        "nan_to_num": nan_to_num,
        "movedim": movedim,
        "swapaxes": swapaxes,
        "diagonal": diagonal,
        "diag": diag,
        "cross": cross,
        "lerp": lerp,
        "addcmul": addcmul,
        "addcdiv": addcdiv,
        "mm": mm,
        "bmm": bmm,
        "dot": dot,
        "outer": outer,
        "clamp_min": clamp_min,
        "clamp_max": clamp_max,
        "reshape_as": lambda self, other: self.reshape(*other.shape),
        "index_select": _ops_index_select,
        "repeat_interleave": _repeat_interleave,
        "type": _type,
        "new_zeros": None,
        "new_ones": None,
        "new_empty": None,
        "new_full": _new_full,
        "new_tensor": _new_tensor,
        "add_": _add_,
        "sub_": _sub_,
        "mul_": _mul_,
        "div_": _div_,
        "pow_": _inplace(lambda self, e: self**e),
        "clamp_": _inplace(lambda self, min=None, max=None: self.clamp(min, max)),
        "clip_": _inplace(lambda self, min=None, max=None: self.clamp(min, max)),
        "abs_": _inplace(lambda self: self.abs()),
        "neg_": _inplace(lambda self: -self),
        "sqrt_": _inplace(lambda self: self.sqrt()),
        "exp_": _inplace(lambda self: self.exp()),
        "log_": _inplace(lambda self: self.log()),
        "sigmoid_": _inplace(lambda self: self.sigmoid()),
        "tanh_": _inplace(lambda self: self.tanh()),
        "relu_": _inplace(lambda self: self.relu()),
        "tril_": _inplace(lambda self, diagonal=0: self.tril(diagonal)),
        "triu_": _inplace(lambda self, diagonal=0: self.triu(diagonal)),
        "lerp_": _inplace(lerp),
        "addcmul_": _inplace(addcmul),
        "addcdiv_": _inplace(addcdiv),
        "is_floating_point": lambda self: self.dtype.kind == "f",
        "ndimension": lambda self: self.ndim,
        "element_size": lambda self: self.dtype.itemsize,
        "__deepcopy__": _deepcopy,
        "__reduce__": _reduce,
    }
    for name, fn in methods.items():
        if name in Tensor.__dict__:
            continue
        if getattr(fn, "_inplace", False):
            fn.__name__ = name  # what its errors name
        if fn is None:  # new_zeros / new_ones / new_empty
            fill = 1.0 if name == "new_ones" else 0.0

            def fn(self: Tensor, *size: Any, _fill: float = fill, **kw: Any) -> Tensor:
                return _new(self, _fill)(*size, **kw)

        setattr(Tensor, name, fn)
    Tensor.data = property(_data_get, _data_set)
    Tensor.__array_ufunc__ = _array_ufunc
    if "is_cuda" not in Tensor.__dict__:
        Tensor.is_cuda = property(lambda self: str(self.device).startswith("cuda"))
    if "itemsize" not in Tensor.__dict__:
        Tensor.itemsize = property(lambda self: self.dtype.itemsize)
    if "nbytes" not in Tensor.__dict__:
        Tensor.nbytes = property(lambda self: self.dtype.itemsize * self.numel())


_install()
