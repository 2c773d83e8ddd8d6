"""PyTorch's ``torch.nn.grad``: the gradients of a convolution with respect to its input
and to its weight, given the gradient of its output. Each is the vector-Jacobian product
of the convolution itself (it is linear in either argument), so the result is
differentiable in ``weight``/``input`` and ``grad_output`` like any other op."""

from __future__ import annotations

from typing import Any

from .._core import ShapeError, Tensor

__all__ = [
    "conv1d_input",
    "conv1d_weight",
    "conv2d_input",
    "conv2d_weight",
    "conv3d_input",
    "conv3d_weight",
]


def _vjp(
    op: str,
    nd: int,
    wrt: str,
    size: Any,
    other: Tensor,
    grad_output: Tensor,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
) -> Tensor:
    from .. import autograd, is_grad_enabled, zeros
    from ..autodiff import enable_grad
    from . import functional as F

    shape = [int(v) for v in size]
    if len(shape) != nd + 2:
        raise ShapeError(f"{op}: the size must have {nd + 2} entries, got {shape}")
    conv = getattr(F, f"conv{nd}d")
    # under no_grad the result is a plain value, as PyTorch's
    differentiable = is_grad_enabled()
    probe = zeros(*shape, dtype=other.dtype.name, device=other.device, requires_grad=True)
    with enable_grad():
        if wrt == "input":
            out = conv(probe, other, None, stride, padding, dilation, groups)
        else:
            out = conv(other, probe, None, stride, padding, dilation, groups)
        if tuple(out.shape) != tuple(grad_output.shape):
            raise ShapeError(
                f"{op}: grad_output has shape {list(grad_output.shape)}, but the convolution "
                f"gives {list(out.shape)}"
            )
        (g,) = autograd.grad(out, [probe], grad_output, create_graph=differentiable)
    return g if differentiable else g.detach()


def conv1d_input(
    input_size: Any,
    weight: Tensor,
    grad_output: Tensor,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """The gradient of :func:`~ferrograd.nn.functional.conv1d` with respect to an input of
    shape ``input_size``."""
    return _vjp(
        "conv1d_input", 1, "input", input_size, weight, grad_output, stride, padding, dilation,
        groups,
    )  # fmt: skip


def conv1d_weight(
    input: Tensor,
    weight_size: Any,
    grad_output: Tensor,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """The gradient of :func:`~ferrograd.nn.functional.conv1d` with respect to a weight of
    shape ``weight_size``."""
    return _vjp(
        "conv1d_weight", 1, "weight", weight_size, input, grad_output, stride, padding, dilation,
        groups,
    )  # fmt: skip


def conv2d_input(
    input_size: Any,
    weight: Tensor,
    grad_output: Tensor,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """The gradient of :func:`~ferrograd.nn.functional.conv2d` with respect to an input of
    shape ``input_size``."""
    return _vjp(
        "conv2d_input", 2, "input", input_size, weight, grad_output, stride, padding, dilation,
        groups,
    )  # fmt: skip


def conv2d_weight(
    input: Tensor,
    weight_size: Any,
    grad_output: Tensor,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """The gradient of :func:`~ferrograd.nn.functional.conv2d` with respect to a weight of
    shape ``weight_size``."""
    return _vjp(
        "conv2d_weight", 2, "weight", weight_size, input, grad_output, stride, padding, dilation,
        groups,
    )  # fmt: skip


def conv3d_input(
    input_size: Any,
    weight: Tensor,
    grad_output: Tensor,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """The gradient of :func:`~ferrograd.nn.functional.conv3d` with respect to an input of
    shape ``input_size``."""
    return _vjp(
        "conv3d_input", 3, "input", input_size, weight, grad_output, stride, padding, dilation,
        groups,
    )  # fmt: skip


def conv3d_weight(
    input: Tensor,
    weight_size: Any,
    grad_output: Tensor,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """The gradient of :func:`~ferrograd.nn.functional.conv3d` with respect to a weight of
    shape ``weight_size``."""
    return _vjp(
        "conv3d_weight", 3, "weight", weight_size, input, grad_output, stride, padding, dilation,
        groups,
    )  # fmt: skip
