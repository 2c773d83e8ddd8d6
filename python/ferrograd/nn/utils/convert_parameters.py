"""PyTorch's ``torch.nn.utils.convert_parameters``: the parameters as one flat vector and
back."""

from __future__ import annotations

from collections.abc import Iterable

from ... import _core
from ..._core import ShapeError, Tensor
from ...autodiff import no_grad

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and concatenated into one vector (differentiable)."""
    ps = [p.reshape(-1) for p in parameters]
    if not ps:
        raise ValueError("parameters_to_vector: no parameters")
    return _core.concat(ps, 0)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copies consecutive slices of ``vec`` into the parameters (in place, unrecorded)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"vector_to_parameters: expected vec to be a Tensor, got {type(vec)}")
    ps = list(parameters)
    total = sum(p.numel() for p in ps)
    if vec.ndim != 1 or vec.shape[0] != total:
        raise ShapeError(
            f"vector_to_parameters: vec must be 1-D of length {total}, got shape {list(vec.shape)}"
        )
    start = 0
    with no_grad():
        for p in ps:
            n = p.numel()
            p.detach().copy_(vec[start : start + n].reshape(*p.shape).astype(p.dtype.name))
            start += n
