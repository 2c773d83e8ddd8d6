"""PyTorch names around indexing and complex views that programs (and PyTorch's own tests)
use on real tensors: ``torch.index_put_``, ``index_reduce``, ``conj`` / ``real`` / ``imag``
/ ``adjoint``, and ``del t[i]`` raising as PyTorch's."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _core
from ._core import DTypeError, ShapeError, Tensor


def index_put_(input: Tensor, indices: Any, values: Any, accumulate: bool = False) -> Tensor:
    """``torch.index_put_``: ``input[indices] = values`` in place (``+=`` with
    ``accumulate``); returns ``input``."""
    return input.index_put_(indices, values, accumulate)


_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")


def index_reduce(
    input: Tensor,
    dim: int,
    index: Tensor,
    source: Tensor,
    reduce: str,
    *,
    include_self: bool = True,
) -> Tensor:
    """``input`` with the slices of ``source`` reduced (``reduce``: prod, mean, amax or
    amin) into the slices ``index`` (1-D) names along ``dim``, as PyTorch's
    ``index_reduce``; ``include_self``: whether ``input``'s own entries take part.
    Differentiable as :func:`scatter_reduce`, which it is written over (PyTorch's backward
    also shares an ``amax``/``amin`` gradient with an excluded ``input`` entry that ties;
    this one does not). Traceable: each call of a traced step reads its own ``index``."""
    from ._ops import _dim
    from ._tensor import tensor
    from ._torch_extra import scatter_reduce
    from .nn._errors import ArgumentRuntimeError

    if not isinstance(input, Tensor) or not isinstance(source, Tensor):
        raise TypeError("index_reduce: input and source must be Tensors")
    if reduce not in _INDEX_REDUCTIONS:
        raise ArgumentRuntimeError(
            "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got "
            f"{reduce}."
        )
    idx = index if isinstance(index, Tensor) else tensor(np.asarray(index, np.int64))
    if idx.dtype.name not in ("int32", "int64"):
        raise DTypeError(
            f"index_reduce_(): Expected dtype int32/int64 for index but got: {idx.dtype}"
        )
    if source.dtype != input.dtype:
        raise DTypeError(
            f"index_reduce_(): self ({input.dtype}) and source ({source.dtype}) must have the "
            "same dtype"
        )
    if idx.ndim > 1:
        raise IndexError(
            f"index_reduce_(): Index is supposed to be a vector, but got dim: {idx.ndim}"
        )
    x = input
    if x.ndim == 0:
        src0 = source.reshape(1) if source.ndim == 0 else source
        out = index_reduce(x.reshape(1), 0, idx, src0, reduce, include_self=include_self)
        return out.reshape(())
    d = _dim("index_reduce", x, dim)
    src = source.reshape(1) if source.ndim == 0 else source
    idx = idx.reshape(-1)
    k = idx.shape[0]
    if src.ndim != x.ndim or src.shape[d] != k:
        got = src.shape[d] if src.ndim > d else src.ndim
        raise ShapeError(
            f"index_reduce_(): Number of indices ({k}) should be equal to source.size(dim): "
            f"({got}), for dim: {d}"
        )
    for i, (a, b) in enumerate(zip(x.shape, src.shape)):
        if i != d and a != b:
            raise ShapeError(
                f"index_reduce_(): source of shape {list(src.shape)} must match input's "
                f"shape {list(x.shape)} apart from dim {d}"
            )
    if not _core._tracing():
        # (inside a trace the scatter checks each run's indices when the graph runs)
        pos = idx.detach().numpy()
        if pos.size and (pos.min() < 0 or pos.max() >= x.shape[d]):
            raise IndexError("index out of range in self")
    shape = [1] * x.ndim
    shape[d] = k
    # index spread over source's shape by tensor ops, so a traced step reads each call's index
    full = idx.astype("int64").reshape(*shape).expand(*src.shape).contiguous()
    return scatter_reduce(x, d, full, src, reduce, include_self=include_self)


def _index_reduce_(
    self: Tensor,
    dim: int,
    index: Tensor,
    source: Tensor,
    reduce: str,
    *,
    include_self: bool = True,
) -> Tensor:
    return self.copy_(index_reduce(self, dim, index, source, reduce, include_self=include_self))


def _is_complex_tensor(x: Any) -> bool:
    from ._complex import ComplexTensor

    return isinstance(x, ComplexTensor)


def conj(input: Any) -> Any:
    """The complex conjugate; a real tensor is returned as it is (PyTorch's)."""
    if _is_complex_tensor(input):
        return input.conj()
    if not isinstance(input, Tensor):
        raise TypeError(f"conj: input must be a Tensor, got {type(input).__name__}")
    return input


def real(input: Any) -> Any:
    """The real part; a real tensor is returned as it is (PyTorch's)."""
    if _is_complex_tensor(input):
        return input.real
    if not isinstance(input, Tensor):
        raise TypeError(f"real: input must be a Tensor, got {type(input).__name__}")
    return input


def imag(input: Any) -> Any:
    """The imaginary part of a complex tensor; a real tensor raises, as PyTorch's."""
    if _is_complex_tensor(input):
        return input.imag
    raise DTypeError("imag is not implemented for tensors with non-complex dtypes.")


def adjoint(input: Tensor) -> Tensor:
    """The conjugate transpose of the last two axes (of a real tensor, ``transpose(-2, -1)``;
    a 0-d tensor as it is), as PyTorch's."""
    if not isinstance(input, Tensor):
        raise TypeError(f"adjoint: input must be a Tensor, got {type(input).__name__}")
    if input.ndim == 1:
        raise ShapeError(
            "tensor.adjoint() is only supported on matrices or batches of matrices. Got 1-D tensor."
        )
    return input if input.ndim == 0 else input.transpose(-2, -1)


def _delitem(self: Tensor, key: Any) -> None:
    raise TypeError("Tensor does not support deleting items")


# ----------------------------------------------------------- creation and shape API
# (found by porting PyTorch's test_tensor_creation_ops.py and test_torch.py)


def _new_of(orig: Any) -> Any:
    """``x.new(size)`` with a :class:`Size` as that shape (PyTorch's: a ``Size`` or ints
    are a shape, another list or tuple is data)."""
    import functools

    @functools.wraps(orig)
    def new(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        from ._torch_more import Size

        if len(args) == 1 and isinstance(args[0], Size) and not kwargs:
            from ._ops import zeros

            return zeros(tuple(args[0]), dtype=self.dtype.name, device=self.device)
        return orig(self, *args, **kwargs)

    return new


def _shape_of(op: str, sizes: tuple) -> tuple[int, ...]:
    """``f(2, 3)``, ``f((2, 3))`` or ``f(Size([2, 3]))`` as ``(2, 3)``."""
    if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)):
        sizes = tuple(sizes[0])
    out = []
    for n in sizes:
        if isinstance(n, Tensor):
            n = n.item()
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise TypeError(f"{op}: sizes must be ints, got {type(n).__name__}")
        if n < 0:
            raise ShapeError(f"{op}: negative size {int(n)} in {list(sizes)}")
        out.append(int(n))
    return tuple(out)


def resize_(self: Tensor, *sizes: Any, memory_format: Any = None) -> Tensor:
    """PyTorch's ``resize_``: this tensor becomes of shape ``sizes``, keeping its entries in
    row-major order (the first ones when it shrinks; zeros where it grows: the new memory
    PyTorch leaves uninitialised); returns self."""
    shape = _shape_of("resize_", sizes)
    if tuple(self.shape) == shape:
        return self
    n = int(np.prod(shape, dtype=np.int64))
    flat = self.detach().reshape(-1)
    m = flat.shape[0]
    if n < m:
        flat = flat[:n]
    elif n > m:
        pad = _core.zeros((n - m,), dtype=self.dtype.name, device=self.device)
        flat = _core.concat([flat, pad], 0)
    self.data = flat.reshape(shape)
    return self


def resize_as_(self: Tensor, other: Tensor, *, memory_format: Any = None) -> Tensor:
    """:meth:`resize_` to ``other``'s shape."""
    if not isinstance(other, Tensor):
        raise TypeError(f"resize_as_: other must be a Tensor, got {type(other).__name__}")
    return resize_(self, tuple(other.shape))


def empty_strided(
    size: Any,
    stride: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    **kwargs: Any,
) -> Tensor:
    """A new tensor of ``size`` laid out with ``stride`` (PyTorch's ``empty_strided``; its
    entries are zeros here: no uninitialised memory is handed out)."""
    from ._ops import zeros
    from ._torch_misc import as_strided

    shape = _shape_of("empty_strided", (size,))
    strides = tuple(int(s) for s in stride)
    if len(strides) != len(shape):
        raise ShapeError(
            f"empty_strided: mismatch in length of strides and shape ({len(shape)} sizes, "
            f"{len(strides)} strides)"
        )
    if 0 in shape:
        out = zeros(shape, dtype=dtype, device=device)
    else:
        storage = 1 + sum((n - 1) * st for n, st in zip(shape, strides))
        out = as_strided(zeros(storage, dtype=dtype, device=device), shape, strides)
    if requires_grad:
        out.requires_grad_()
    return out


def renorm(input: Tensor, p: Any, dim: int, maxnorm: Any) -> Tensor:
    """Each slice of ``input`` along ``dim`` whose ``p``-norm exceeds ``maxnorm`` scaled
    down to norm ``maxnorm`` (by ``maxnorm / (norm + 1e-7)``), as PyTorch's ``renorm``."""
    from ._ops import _dim
    from .linalg import vector_norm

    x = input
    if not isinstance(x, Tensor):
        raise TypeError(f"renorm: input must be a Tensor, got {type(x).__name__}")
    if x.ndim < 2:
        raise ShapeError(f"renorm: input needs at least 2 dimensions, got {x.ndim} dimensions")
    if not p > 0:
        raise ShapeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise ShapeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if x.dtype.kind not in "fc" and x.dtype.name != "bfloat16":
        raise DTypeError(f"renorm: expected a floating point tensor, got {x.dtype}")
    d = _dim("renorm", x, dim)
    others = tuple(i for i in range(x.ndim) if i != d)
    norm = vector_norm(x, p, dim=others, keepdim=True)
    one = _core.ones((), dtype=x.dtype.name, device=x.device)
    factor = _core.where(norm > maxnorm, maxnorm / (norm + 1e-7), one)
    return x * factor.astype(x.dtype.name)


def _renorm_(self: Tensor, p: Any, dim: int, maxnorm: Any) -> Tensor:
    self.copy_(renorm(self, p, dim, maxnorm))
    return self


def gradient(input: Tensor, *, spacing: Any = 1, dim: Any = None, edge_order: int = 1) -> tuple:
    """PyTorch's ``torch.gradient``: the derivative estimated by second-order central
    differences inside and first- or second-order (``edge_order``) one-sided differences
    at the edges, along each of ``dim`` (every dim by default); ``spacing``: one scalar
    step, a step per dim, or per dim a 1-D tensor of coordinates. Differentiable."""
    from ._ops import _dim
    from ._tensor import default_float

    x = input
    if not isinstance(x, Tensor):
        raise TypeError(f"gradient: input must be a Tensor, got {type(x).__name__}")
    if edge_order not in (1, 2):
        raise ShapeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    if dim is None:
        dims = list(range(x.ndim))
    elif isinstance(dim, (list, tuple)):
        dims = [_dim("gradient", x, d) for d in dim]
    else:
        dims = [_dim("gradient", x, dim)]
    if len(set(dims)) != len(dims):
        raise ShapeError("torch.gradient: dim must not repeat")
    if spacing is None:  # unspecified, as PyTorch's: unit steps
        spacing = 1
    if isinstance(spacing, (list, tuple)):
        spacings = list(spacing)
        if len(spacings) != len(dims):
            raise ShapeError(
                "torch.gradient expected spacing to be unspecified, a scalar or its spacing "
                f"and dim arguments to have the same length, but got a spacing argument of "
                f"length {len(spacings)} and a dim argument of length {len(dims)}."
            )
    else:
        spacings = [spacing] * len(dims)
    if x.dtype.kind in "biu":
        x = x.astype(default_float())
    outs = []
    for d, sp in zip(dims, spacings):
        n = x.shape[d]
        if n < edge_order + 1:
            raise ShapeError(
                "torch.gradient expected each dimension size to be at least edge_order+1"
            )

        def part(start: int, length: int, d: int = d) -> Tensor:
            return x.narrow(d, start, length)

        if isinstance(sp, Tensor) and sp.ndim == 1:
            if sp.shape[0] != n:
                raise ShapeError(
                    f"torch.gradient expected each tensor to be on the same device and the "
                    f"coordinates along dim {d} to have {n} entries, got {sp.shape[0]}"
                )
            outs.append(_gradient_coords(x, d, sp.astype(x.dtype.name), edge_order, part))
            continue
        h = float(sp.item()) if isinstance(sp, Tensor) else float(sp)
        inner = (part(2, n - 2) - part(0, n - 2)) / (2 * h)
        if edge_order == 1:
            first = (part(1, 1) - part(0, 1)) / h
            last = (part(n - 1, 1) - part(n - 2, 1)) / h
        else:
            first = (-1.5 * part(0, 1) + 2 * part(1, 1) - 0.5 * part(2, 1)) / h
            last = (0.5 * part(n - 3, 1) - 2 * part(n - 2, 1) + 1.5 * part(n - 1, 1)) / h
        outs.append(_core.concat([first, inner, last], d))
    return tuple(outs)


def _gradient_coords(x: Tensor, d: int, c: Tensor, edge_order: int, part: Any) -> Tensor:
    """:func:`gradient` along ``d`` with the coordinates ``c`` (numpy's nonuniform
    formulas, which PyTorch's follow)."""
    n = x.shape[d]
    view = [1] * x.ndim
    view[d] = -1

    def along(v: Tensor) -> Tensor:
        return v.reshape(*view)

    dx = c[1:] - c[:-1]
    dx1, dx2 = dx[:-1], dx[1:]
    a = -dx2 / (dx1 * (dx1 + dx2))
    b = (dx2 - dx1) / (dx1 * dx2)
    cc = dx1 / (dx2 * (dx1 + dx2))
    inner = along(a) * part(0, n - 2) + along(b) * part(1, n - 2) + along(cc) * part(2, n - 2)
    if edge_order == 1:
        first = (part(1, 1) - part(0, 1)) / dx[0]
        last = (part(n - 1, 1) - part(n - 2, 1)) / dx[n - 2]
    else:
        e1, e2 = dx[0], dx[1]
        a0 = -(2 * e1 + e2) / (e1 * (e1 + e2))
        b0 = (e1 + e2) / (e1 * e2)
        c0 = -e1 / (e2 * (e1 + e2))
        first = a0 * part(0, 1) + b0 * part(1, 1) + c0 * part(2, 1)
        e1, e2 = dx[n - 3], dx[n - 2]
        a1 = e2 / (e1 * (e1 + e2))
        b1 = -(e2 + e1) / (e1 * e2)
        c1 = (2 * e2 + e1) / (e2 * (e1 + e2))
        last = a1 * part(n - 3, 1) + b1 * part(n - 2, 1) + c1 * part(n - 1, 1)
    return _core.concat([first, inner, last], d)


def _tensors_not_tensor(fn: Any, name: str) -> Any:
    """``fn(tensors)`` refusing one bare tensor as PyTorch's (it takes a sequence)."""
    import functools

    @functools.wraps(fn)
    def wrapped(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(tensors, Tensor):
            raise TypeError(
                f"{name}(): argument 'tensors' (position 1) must be tuple of Tensors, not Tensor"
            )
        return fn(tensors, *args, **kwargs)

    return wrapped


def _factory_out(fn: Any, name: str) -> Any:
    """A factory (``zeros``, ``arange``, ...) taking PyTorch's ``out=``: the result made of
    ``out``'s dtype (an explicit other ``dtype`` raises) and written into ``out``."""
    import functools

    @functools.wraps(fn)
    def wrapped(*args: Any, out: Any = None, **kwargs: Any) -> Any:
        if out is None:
            return fn(*args, **kwargs)
        from ._ops import _write_out
        from ._tensor import _dtype_name

        if not isinstance(out, Tensor):
            raise TypeError(f"{name}: out must be a Tensor, got {type(out).__name__}")
        dtype = kwargs.pop("dtype", None)
        if dtype is not None and _dtype_name(dtype) != out.dtype.name:
            raise DTypeError(
                f"{name}: dtype {_dtype_name(dtype)} does not match the dtype of the out "
                f"parameter ({out.dtype})"
            )
        kwargs.setdefault("device", out.device)
        res = fn(*args, dtype=out.dtype.name, **kwargs)
        if name in ("arange", "linspace", "logspace") and res.numel() == out.numel():
            # PyTorch's: an out with as many elements is filled in row-major order as it is
            res = res.reshape(tuple(out.shape))
        return _write_out(name, out, res)

    return wrapped


def _install_creation() -> None:
    import ferrograd as fg

    Tensor.new = _new_of(Tensor.new)
    for f in (resize_, resize_as_):
        if not hasattr(Tensor, f.__name__):
            setattr(Tensor, f.__name__, f)
    if not hasattr(Tensor, "renorm"):
        Tensor.renorm = renorm
    if not hasattr(Tensor, "renorm_"):
        Tensor.renorm_ = _renorm_
    for f in (empty_strided, renorm, gradient):
        if not hasattr(fg, f.__name__):
            setattr(fg, f.__name__, f)
    for name in ("hstack", "vstack", "row_stack", "column_stack", "dstack"):
        f = getattr(fg, name, None)
        if callable(f):
            setattr(fg, name, _tensors_not_tensor(f, name))
    for name in ("zeros", "ones", "full", "empty", "arange", "linspace", "logspace"):
        f = getattr(fg, name, None)
        if callable(f):
            setattr(fg, name, _factory_out(f, name))


def install() -> None:
    import ferrograd as fg

    _install_creation()

    for f in (index_put_, index_reduce, conj, real, imag, adjoint):
        if not hasattr(fg, f.__name__):
            setattr(fg, f.__name__, f)
    methods = {
        "index_reduce": index_reduce,
        "index_reduce_": _index_reduce_,
        "conj": conj,
        "conj_physical": conj,
        "resolve_conj": conj,
        "resolve_neg": conj,
        "is_conj": lambda self: False,
        "is_neg": lambda self: False,
        "adjoint": adjoint,
    }
    for name, fn in methods.items():
        if name not in Tensor.__dict__:
            setattr(Tensor, name, fn)
    for name, getter in (("real", real), ("imag", imag)):
        if name not in Tensor.__dict__:
            setattr(Tensor, name, property(getter))
    # (the engine's own slot raises NotImplementedError "can't delete item")
    if not isinstance(Tensor.__dict__.get("__delitem__"), type(_delitem)):
        Tensor.__delitem__ = _delitem
