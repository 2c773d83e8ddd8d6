"""PyTorch's ``torch.nn.utils``: gradient clipping, parameters as one vector
(:mod:`.convert_parameters`), batch-norm fusion (:mod:`.fusion`), the deprecated
``functional_call`` (:mod:`.stateless`), :mod:`.rnn` (padding and packing sequences),
:mod:`.parametrize` and :mod:`.parametrizations` (weight and spectral norm as
parametrizations), :mod:`.prune` (masking parameters)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ... import _core
from ..._core import Tensor
from ..._torch_extra import promote_types
from ...autodiff import no_grad
from . import convert_parameters, fusion, parametrizations, parametrize, prune, rnn, stateless
from ._norms import *
from ._norms import __all__ as _norms_all
from .convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = [  # noqa: PLE0604
    *_norms_all,
    "clip_grad_norm_",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "convert_conv2d_weight_memory_format",
    "convert_conv3d_weight_memory_format",
    "convert_parameters",
    "fusion",
    "get_total_norm",
    "parameters_to_vector",
    "parametrizations",
    "parametrize",
    "prune",
    "rnn",
    "stateless",
    "vector_to_parameters",
]


def _with_grads(parameters: Any) -> list[Tensor]:
    ps = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    return [p for p in ps if p.grad is not None]


def get_total_norm(
    tensors: Iterable[Tensor] | Tensor,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: Any = None,
) -> Tensor:
    """The joint ``norm_type``-norm of ``tensors`` (typically gradients) as if they were one
    vector, accumulated in float64; a 0-d tensor on the first one's device, of the widest of
    their dtypes.

    As torch (the ``norm_type``-norm of the per-tensor ``norm_type``-norms): ``inf`` gives
    the largest ``|g|``, ``-inf`` the smallest, ``0`` the number of tensors with a nonzero
    element; other orders ``sum(|g|**p)**(1/p)`` over all elements."""
    ts = [tensors] if isinstance(tensors, Tensor) else [t for t in tensors if t is not None]
    norm_type = float(norm_type)
    with no_grad():
        if not ts:
            return _core.zeros(())
        dev = ts[0].device
        if norm_type in (math.inf, -math.inf):
            # the largest (inf) or smallest (-inf) |g| over all elements
            reduce = "max" if norm_type > 0 else "min"
            join = _core.maximum if norm_type > 0 else _core.minimum
            if norm_type < 0 and any(g.numel() == 0 for g in ts):
                raise RuntimeError(
                    "get_total_norm: cannot compute the -inf norm (norm_type=-inf) of an "
                    "empty tensor: the minimum has no identity"
                )
            parts = [getattr(g.abs(), reduce)().astype("float64").to(dev) for g in ts if g.numel()]
            if not parts:
                return _core.zeros((), dtype=ts[0].dtype)
            total = parts[0]
            for p in parts[1:]:
                total = join(total, p)
        elif norm_type == 0.0:
            # torch takes the 0-"norm" of the per-tensor 0-norms: the number of tensors
            # with any nonzero element
            total = None
            for g in ts:
                s = (g != 0).astype("float64").max().to(dev) if g.numel() else _core.zeros(())
                s = s.astype("float64").to(dev)
                total = s if total is None else total + s
        else:
            total = None
            for g in ts:
                a = g.astype("float64") if g.dtype.name != "float64" else g
                s = (a.abs() ** norm_type).sum() if norm_type != 2.0 else (a * a).sum()
                s = s.to(dev)
                total = s if total is None else total + s
            total = total ** (1.0 / norm_type)
        if error_if_nonfinite and not _core._tracing():
            value = float(total.item())
            if not math.isfinite(value):
                raise RuntimeError(
                    f"clip_grad_norm_: the total norm of order {norm_type} of the gradients "
                    f"is {value}; set error_if_nonfinite=False to clip anyway"
                )
    # the widest of the tensors' dtypes, as torch stacks their per-tensor norms
    out_dtype = ts[0].dtype
    for t in ts[1:]:
        out_dtype = promote_types(out_dtype, t.dtype)
    return total.astype(out_dtype)


def clip_grads_with_norm_(
    parameters: Iterable[Tensor] | Tensor,
    max_norm: float,
    total_norm: Tensor,
    foreach: Any = None,
) -> None:
    """Scales the gradients by ``min(1, max_norm / (total_norm + 1e-6))`` (``total_norm``
    from :func:`get_total_norm`)."""
    params = _with_grads(parameters)
    with no_grad():
        # min(1, max_norm / (total + 1e-6)) as a tensor: no read of the norm (traceable)
        total = total_norm.astype("float64") if total_norm.dtype.name != "float64" else total_norm
        coef = (float(max_norm) / (total + 1e-6)).clamp(max=1.0)
        # eagerly in place, as torch (a handle on a gradient taken before clipping sees the
        # clipped values); a traced step gets new gradient tensors, as its recorded program
        # reads .grad through handles of its own
        tracing = _core._tracing()
        for p in params:
            g = p.grad
            c = coef.to(g.device) if str(coef.device) != str(g.device) else coef
            c = c.astype(g.dtype) if g.dtype != c.dtype else c
            if tracing:
                p.grad = g * c
            else:
                g.mul_(c)


def clip_grad_norm_(
    parameters: Iterable[Tensor] | Tensor,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: Any = None,
) -> Tensor:
    """Scales the gradients in place so that their joint ``norm_type``-norm is at most
    ``max_norm``; returns the total norm before clipping (a 0-d float tensor)."""
    params = _with_grads(parameters)
    grads = [p.grad for p in params]
    if not grads:
        return _core.zeros(())
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    clip_grads_with_norm_(params, max_norm, total)
    return total


def clip_grad_value_(
    parameters: Iterable[Tensor] | Tensor, clip_value: float, foreach: Any = None
) -> None:
    """Clamps every gradient to ``[-clip_value, clip_value]`` (``foreach``: PyTorch's
    implementation switch, accepted)."""

    c = float(clip_value)
    with no_grad():
        tracing = _core._tracing()
        for p in _with_grads(parameters):
            if tracing:
                p.grad = p.grad.clamp(-c, c)
            else:
                p.grad.clamp_(-c, c)


def convert_conv2d_weight_memory_format(module: Any, memory_format: Any) -> Any:
    """``module`` itself: PyTorch reorders convolution weights for a memory format
    (channels_last); ferrograd's convolutions read one layout, so there is nothing to do."""
    return module


convert_conv3d_weight_memory_format = convert_conv2d_weight_memory_format


def _install_submodules() -> None:
    # torch.nn.utils.clip_grad, .init and .memory_format: where some programs import from
    import sys
    import types

    g = globals()
    for sub, names in (
        (
            "clip_grad",
            (
                "clip_grad_norm",
                "clip_grad_norm_",
                "clip_grad_value_",
                "clip_grads_with_norm_",
                "get_total_norm",
            ),
        ),
        ("init", ("skip_init",)),
        (
            "memory_format",
            ("convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"),
        ),
    ):
        mod = types.ModuleType(f"{__name__}.{sub}", f"PyTorch's torch.nn.utils.{sub}.")
        for name in names:
            setattr(mod, name, g[name])
        mod.__all__ = list(names)  # type: ignore[attr-defined]
        sys.modules[mod.__name__] = mod
        g[sub] = mod


_install_submodules()
