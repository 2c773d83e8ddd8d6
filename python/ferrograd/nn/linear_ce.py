"""PyTorch's ``linear_cross_entropy`` / ``LinearCrossEntropyLoss``: a final linear layer and
the cross entropy of its logits as one call (the head of a language model and its loss)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from .._core import Tensor
from . import functional as F
from .modules import Linear, _WeightedLoss

__all__ = ["LinearCrossEntropyLoss", "LinearCrossEntropyOptions", "linear_cross_entropy"]


@dataclasses.dataclass(frozen=True)
class LinearCrossEntropyOptions:
    """PyTorch's settings for its chunked ``linear_cross_entropy`` (rows of the batch in
    pieces, so the whole logits tensor is never held). Accepted and kept; ferrograd computes
    the reference path whatever they say (the same loss and gradients, without the memory
    saving)."""

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: Any = None

    def __post_init__(self) -> None:
        if self.acc_policy not in ("auto", "accurate", "compact"):
            raise ValueError(
                f"LinearCrossEntropyOptions: acc_policy must be 'auto', 'accurate' or "
                f"'compact', got {self.acc_policy!r}"
            )
        n = self.batch_chunk_size
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(
                f"LinearCrossEntropyOptions: batch_chunk_size must be a positive int or None, "
                f"got {n!r}"
            )


def linear_cross_entropy(
    input: Tensor,
    linear_weight: Tensor,
    target: Tensor,
    *,
    linear_bias: Tensor | None = None,
    weight: Tensor | None = None,
    reduction: str = "mean",
    ignore_index: int | None = None,
    label_smoothing: float = 0.0,
    options: LinearCrossEntropyOptions | None = None,
) -> Tensor:
    """``cross_entropy(linear(input, W, b), target, ...)`` with ``linear_weight`` of shape
    ``(C, *out_features, in_features)`` (``linear_bias``: ``(C, *out_features)``): the
    logits are ``(*input.shape[:-1], C, *out_features)``, classes on the axis after the
    batch. ``ignore_index=None`` ignores no class. ``options`` (for PyTorch's chunked path)
    is accepted; the result is the reference computation's."""
    if not isinstance(linear_weight, Tensor) or linear_weight.ndim < 2:
        raise ValueError(
            "linear_cross_entropy: linear_weight must be a tensor of shape (C, *out_features, "
            f"in_features), got {getattr(linear_weight, 'shape', type(linear_weight).__name__)}"
        )
    if options is not None and not isinstance(options, LinearCrossEntropyOptions):
        raise TypeError(
            "linear_cross_entropy: options must be a LinearCrossEntropyOptions or None, got "
            f"{type(options).__name__}"
        )
    classes, *out_features, in_features = linear_weight.shape
    if input.shape[-1] != in_features:
        raise ValueError(
            f"linear_cross_entropy: input's last dimension ({input.shape[-1]}) must be "
            f"linear_weight's in_features ({in_features}); shapes {list(input.shape)} and "
            f"{list(linear_weight.shape)}"
        )
    bias = None if linear_bias is None else linear_bias.reshape(-1)
    logits = F.linear(input, linear_weight.reshape(-1, in_features), bias)
    logits = logits.reshape(*input.shape[:-1], classes, *out_features)
    return F.cross_entropy(
        logits,
        target,
        weight,
        -100 if ignore_index is None else ignore_index,
        reduction,
        label_smoothing,
    )


class LinearCrossEntropyLoss(_WeightedLoss):
    """A ``Linear(in_features, num_classes * prod(out_features))`` layer (``self.linear``,
    weight stored flat) and the cross entropy of its logits: PyTorch's
    ``LinearCrossEntropyLoss``, computed as :func:`linear_cross_entropy`."""

    def __init__(
        self,
        in_features: int,
        num_classes: int,
        *,
        out_features: tuple[int, ...] = (),
        bias: bool = False,
        device: Any = None,
        dtype: Any = None,
        reduction: str = "mean",
        weight: Tensor | None = None,
        ignore_index: int | None = None,
        label_smoothing: float = 0.0,
        options: LinearCrossEntropyOptions | None = None,
    ) -> None:
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise RuntimeError(
                f"expected weight shape to be {(num_classes,)}, got {tuple(weight.shape)}"
            )
        if not 0.0 <= label_smoothing <= 1.0:
            raise RuntimeError(
                f"expected label_smoothing to be in range [0, 1], got {label_smoothing}"
            )
        super().__init__(weight, reduction)
        self.num_classes = num_classes
        self.out_features = tuple(out_features)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        self.linear = Linear(
            in_features,
            math.prod(self.out_features, start=num_classes),
            bias=bias,
            device=device,
            dtype=dtype,
        )
        self.options = options

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        shape = (self.num_classes, *self.out_features)
        w = self.linear.weight.reshape(*shape, self.linear.in_features)
        b = None if self.linear.bias is None else self.linear.bias.reshape(*shape)
        return linear_cross_entropy(
            input,
            w,
            target,
            linear_bias=b,
            weight=self.weight,
            reduction=self.reduction,
            ignore_index=self.ignore_index,
            label_smoothing=self.label_smoothing,
            options=self.options,
        )

    def extra_repr(self) -> str:
        return (
            f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
            f"out_features={self.out_features}, bias={self.linear.bias is not None}, "
            f"reduction={self.reduction}, ignore_index={self.ignore_index}, "
            f"label_smoothing={self.label_smoothing}, options={self.options}"
        )
