"""Still more of PyTorch's layers: max pooling with indices and unpooling, ``RReLU``,
``LPPool``, ``EmbeddingBag``, ``Dropout3d``, ``FeatureAlphaDropout``, two more losses,
``LazyLinear`` and a single-process ``SyncBatchNorm``, with PyTorch's arguments and parameter
names."""

from __future__ import annotations

import math
from typing import Any

from .. import _core
from .._core import ShapeError, Tensor
from .._tensor import _dtype_name, default_float
from . import functional as F
from .extra import _INPLACE, _loss, _simple
from .modules import (
    Linear,
    Module,
    Parameter,
    _BatchNorm,
    _count,
    _embedding_weight,
    _Loss,
    _padding_index,
    _uniform_param,
)

__all__ = [
    "DataParallel",
    "Dropout3d",
    "EmbeddingBag",
    "FeatureAlphaDropout",
    "LPPool1d",
    "LPPool2d",
    "LazyLinear",
    "MaxUnpool1d",
    "MaxUnpool2d",
    "MultiLabelMarginLoss",
    "RReLU",
    "SyncBatchNorm",
    "TripletMarginWithDistanceLoss",
]


class MaxUnpool2d(Module):
    """The partial inverse of :class:`MaxPool2d` (see ``F.max_unpool2d``)."""

    _fn = staticmethod(F.max_unpool2d)

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def forward(self, input: Tensor, indices: Tensor, output_size: Any = None) -> Tensor:
        return self._fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(MaxUnpool2d):
    """The partial inverse of :class:`MaxPool1d`."""

    _fn = staticmethod(F.max_unpool1d)


class RReLU(Module):
    """Randomised leaky ReLU (see ``F.rrelu``): random slopes in training mode, their mean
    ``(lower + upper) / 2`` in eval mode."""

    def __init__(
        self, lower: float = 1.0 / 8.0, upper: float = 1.0 / 3.0, inplace: bool = False
    ) -> None:
        super().__init__()
        if not lower <= upper:
            raise ValueError(f"RReLU: lower ({lower}) must not exceed upper ({upper})")
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.rrelu(x, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}"


_LP_FIELDS = (("norm_type", 2.0), ("kernel_size", 1), ("stride", None), ("ceil_mode", False))
LPPool1d = _simple("LPPool1d", F.lp_pool1d, _LP_FIELDS)
LPPool2d = _simple("LPPool2d", F.lp_pool2d, _LP_FIELDS)


def _random_dropout(name: str, fn: Any, default_training: bool) -> type:
    def forward(self: Module, x: Tensor) -> Tensor:
        return fn(x, self.p, self.training)

    def __init__(self: Module, p: float = 0.5, inplace: bool = False) -> None:
        Module.__init__(self)
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{name}: p must lie in [0, 1], got {p}")
        self.p, self.inplace = p, inplace

    cls = _simple(name, fn, (("p", 0.5), *_INPLACE))
    cls.__init__ = __init__
    cls.forward = forward
    return cls


Dropout3d = _random_dropout("Dropout3d", F.dropout3d, True)
FeatureAlphaDropout = _random_dropout("FeatureAlphaDropout", F.feature_alpha_dropout, False)

MultiLabelMarginLoss = _loss("MultiLabelMarginLoss", F.multilabel_margin_loss, (), 2)


class TripletMarginWithDistanceLoss(_Loss):
    """``max(0, d(a, p) - d(a, n) + margin)`` with ``distance_function`` (default the
    pairwise Euclidean distance)."""

    def __init__(
        self,
        *,
        distance_function: Any = None,
        margin: float = 1.0,
        swap: bool = False,
        reduction: str = "mean",
    ) -> None:
        super().__init__(reduction)
        if margin <= 0:
            raise ValueError(
                f"TripletMarginWithDistanceLoss: margin must be positive, got {margin}"
            )
        self.distance_function = distance_function
        self.margin, self.swap = margin, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_with_distance_loss(
            anchor,
            positive,
            negative,
            distance_function=self.distance_function,
            margin=self.margin,
            swap=self.swap,
            reduction=self.reduction,
        )


class EmbeddingBag(Module):
    """Sums, means or maxes of bags of embeddings (see ``F.embedding_bag``); ``weight``
    ``(num_embeddings, embedding_dim)`` from N(0, 1), the ``padding_idx`` row zero."""

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        _weight: Tensor | None = None,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.num_embeddings = _count("EmbeddingBag", "num_embeddings", num_embeddings, 1)
        self.embedding_dim = _count("EmbeddingBag", "embedding_dim", embedding_dim, 1)
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
        padding_idx = _padding_index("EmbeddingBag", padding_idx, num_embeddings)
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.mode, self.sparse = scale_grad_by_freq, mode, sparse
        self.include_last_offset, self.padding_idx = include_last_offset, padding_idx
        if _weight is not None:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ShapeError(
                    f"EmbeddingBag: _weight must have shape {[num_embeddings, embedding_dim]}, "
                    f"got {list(_weight.shape)}"
                )
            self.weight = _weight if isinstance(_weight, Parameter) else Parameter(_weight)
            return
        self.weight = _embedding_weight(num_embeddings, embedding_dim, padding_idx, device, dtype)

    @classmethod
    def from_pretrained(
        cls,
        embeddings: Tensor,
        freeze: bool = True,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
    ) -> EmbeddingBag:
        if embeddings.ndim != 2:
            raise ShapeError(
                f"EmbeddingBag.from_pretrained: embeddings must be 2-D, got {list(embeddings.shape)}"
            )
        n, d = embeddings.shape
        return cls(
            n,
            d,
            max_norm,
            norm_type,
            scale_grad_by_freq,
            mode,
            sparse,
            Parameter(embeddings, requires_grad=not freeze),
            include_last_offset,
            padding_idx,
        )

    def forward(
        self, input: Tensor, offsets: Tensor | None = None, per_sample_weights: Tensor | None = None
    ) -> Tensor:
        return F.embedding_bag(
            input,
            self.weight,
            offsets,
            self.max_norm,
            self.norm_type,
            self.scale_grad_by_freq,
            self.mode,
            self.sparse,
            per_sample_weights,
            self.include_last_offset,
            self.padding_idx,
        )

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")


class LazyLinear(Linear):
    """A :class:`Linear` whose ``in_features`` is the last axis of its first input: until
    then ``weight`` and ``bias`` are empty placeholders (make optimizers after the first
    call), and loading a state dict sizes them. It then becomes a plain ``Linear``."""

    def __init__(
        self, out_features: int, bias: bool = True, device: Any = None, dtype: Any = None
    ) -> None:
        Module.__init__(self)
        self.in_features = 0
        self.out_features = _count("LazyLinear", "out_features", out_features, 0)
        self._factory = (device, dtype)
        name = _dtype_name(dtype) if dtype is not None else default_float()
        self.weight = Parameter(_core.zeros((0,), dtype=name, device=device))
        self.bias = Parameter(_core.zeros((0,), dtype=name, device=device)) if bias else None

    def has_uninitialized_params(self) -> bool:
        return True

    def initialize_parameters(self, in_features: int) -> None:
        """Sizes and initialises ``weight`` (and ``bias``) as ``Linear``'s, then turns this
        module into a ``Linear``."""
        device, dtype = self.__dict__.pop("_factory")
        self.in_features = _count("LazyLinear", "in_features", in_features, 0)
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = _uniform_param(None, bound, (self.out_features, in_features), dtype, device)
        if self.bias is not None:
            self.bias = _uniform_param(None, bound, (self.out_features,), dtype, device)
        self.__class__ = Linear

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor) or x.ndim == 0:
            raise ShapeError(
                f"LazyLinear: input must be a Tensor of at least 1 axis, got "
                f"{list(x.shape) if isinstance(x, Tensor) else type(x).__name__}"
            )
        self.initialize_parameters(x.shape[-1])
        return F.linear(x, self.weight, self.bias)

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        w = state_dict.get("weight") if hasattr(state_dict, "get") else None
        if w is not None and len(getattr(w, "shape", ())) == 2:
            self.initialize_parameters(int(w.shape[1]))
        return Linear.load_state_dict(self, state_dict, strict, assign)

    def extra_repr(self) -> str:
        return f"in_features=0 (uninitialized), out_features={self.out_features}"


class SyncBatchNorm(_BatchNorm):
    """Batch normalisation over axis 1 of ``(N, C, ...)`` input. ferrograd runs one
    process: the statistics are this process's batch's; nothing is synchronised across
    processes (``process_group`` is accepted and ignored)."""

    _dims = (2, 3, 4, 5)

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        process_group: Any = None,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group


class DataParallel(Module):
    """``torch.nn.DataParallel``'s spelling for scripts that wrap their model in it: the
    wrapped module runs in this process, on the device its parameters are on (PyTorch's
    behaviour with one device). ``.module`` is the wrapped module, and state dicts carry
    its ``module.`` prefix as PyTorch's do. For training on several processes or GPUs use
    :mod:`ferrograd.distributed` (MPI, NCCL)."""

    def __init__(
        self, module: Module, device_ids: Any = None, output_device: Any = None, dim: int = 0
    ) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel: expected a Module, got {type(module).__name__}")
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else []
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        return self.module(*inputs, **kwargs)
