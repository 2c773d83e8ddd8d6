"""PyTorch names around indexing and complex views that programs (and PyTorch's own tests)
use on real tensors: ``torch.index_put_``, ``index_reduce``, ``conj`` / ``real`` / ``imag``
/ ``adjoint``, ``Tensor._base`` / ``_is_view``, and ``del t[i]`` raising as PyTorch's."""

from __future__ import annotations

from typing import Any

import numpy as np

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
    this one does not)."""
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
    if idx.dtype.kind not in "iu":
        raise DTypeError(
            f"index_reduce_(): Expected dtype int32/int64 for index but got: {idx.dtype}"
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
    pos = idx.detach().numpy()
    if pos.size and (pos.min() < 0 or pos.max() >= x.shape[d]):
        raise IndexError("index out of range in self")
    shape = [1] * x.ndim
    shape[d] = k
    spread = np.broadcast_to(pos.astype(np.int64).reshape(shape), tuple(src.shape))
    full = tensor(np.ascontiguousarray(spread), device=x.device)
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


def _base(self: Tensor) -> Any:
    """The tensor this one views (PyTorch's ``_base``): the engine does not record it, so
    None."""
    return None


def _is_view(self: Tensor) -> bool:
    """Whether this tensor records a base it views (see ``_base``)."""
    return self._base is not None


def install() -> None:
    import ferrograd as fg

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
        "_is_view": _is_view,
    }
    for name, fn in methods.items():
        if name not in Tensor.__dict__:
            setattr(Tensor, name, fn)
    for name, getter in (("real", real), ("imag", imag), ("_base", _base)):
        if name not in Tensor.__dict__:
            setattr(Tensor, name, property(getter))
    # (the engine's own slot raises NotImplementedError "can't delete item")
    if not isinstance(Tensor.__dict__.get("__delitem__"), type(_delitem)):
        Tensor.__delitem__ = _delitem
