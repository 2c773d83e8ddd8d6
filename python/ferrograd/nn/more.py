"""Still more of PyTorch's layers: max pooling with indices and unpooling, ``RReLU``,
``LPPool``, ``EmbeddingBag``, ``Dropout3d``, ``FeatureAlphaDropout``, two more losses, the lazy
layers (``LazyLinear``, ``LazyConv*``, ``LazyConvTranspose*``, ``LazyBatchNorm*``,
``LazyInstanceNorm*``), a single-process ``SyncBatchNorm`` and ``nn.Buffer``, with PyTorch's
arguments and parameter names."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import _core
from .._core import ShapeError, Tensor
from .._tensor import _dtype_name, default_float
from . import functional as F
from ._errors import ArgumentAssertionError, ArgumentRuntimeError
from .extra import (
    ConvTranspose1d,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    _dropout_class,
    _InstanceNorm,
    _loss,
    _simple,
)
from .modules import (
    BatchNorm1d,
    BatchNorm2d,
    Conv1d,
    Conv2d,
    ConvTranspose2d,
    Linear,
    Module,
    Parameter,
    _BatchNorm,
    _ConvNd,
    _count,
    _embedding_weight,
    _filled_param,
    _Loss,
    _padding_index,
    _uniform_param,
)
from .volumetric import BatchNorm3d, Conv3d, ConvTranspose3d

__all__ = [
    "Buffer",
    "DataParallel",
    "Dropout3d",
    "EmbeddingBag",
    "FeatureAlphaDropout",
    "FractionalMaxPool2d",
    "FractionalMaxPool3d",
    "LPPool1d",
    "LPPool2d",
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "LazyConvTranspose1d",
    "LazyConvTranspose2d",
    "LazyConvTranspose3d",
    "LazyInstanceNorm1d",
    "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
    "LazyLinear",
    "MaxUnpool1d",
    "MaxUnpool2d",
    "MaxUnpool3d",
    "MultiLabelMarginLoss",
    "RReLU",
    "SyncBatchNorm",
    "TripletMarginWithDistanceLoss",
    "UninitializedBuffer",
    "UninitializedParameter",
]


class MaxUnpool2d(Module):
    """The partial inverse of :class:`MaxPool2d` (see ``F.max_unpool2d``)."""

    _fn = staticmethod(F.max_unpool2d)
    _nd = 2

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()

        def per_axis(v: Any) -> tuple:  # one entry per axis, as PyTorch stores them
            return tuple(v) if isinstance(v, (list, tuple)) else (v,) * self._nd

        self.kernel_size = per_axis(kernel_size)
        self.stride = per_axis(stride if stride is not None else kernel_size)
        self.padding = per_axis(padding)

    def forward(self, input: Tensor, indices: Tensor, output_size: Any = None) -> Tensor:
        return self._fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(MaxUnpool2d):
    """The partial inverse of :class:`MaxPool1d`."""

    _fn = staticmethod(F.max_unpool1d)
    _nd = 1


class MaxUnpool3d(MaxUnpool2d):
    """The partial inverse of :class:`MaxPool3d` (see ``F.max_unpool3d``)."""

    _fn = staticmethod(F.max_unpool3d)
    _nd = 3


class _FractionalMaxPoolNd(Module):
    _nd = 2

    def __init__(
        self,
        kernel_size: Any,
        output_size: Any = None,
        output_ratio: Any = None,
        return_indices: bool = False,
        _random_samples: Tensor | None = None,
    ) -> None:
        super().__init__()
        nd, kind = self._nd, type(self).__name__

        def tup(v: Any) -> tuple:
            return tuple(v) if isinstance(v, (list, tuple)) else (v,) * nd

        self.kernel_size = tup(kernel_size)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = tup(output_size) if output_size is not None else None
        self.output_ratio = tup(output_ratio) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise ValueError(
                f"{kind} requires specifying either an output size, or a pooling ratio"
            )
        if output_size is not None and output_ratio is not None:
            raise ValueError(f"{kind}: only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"{kind}: output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input: Tensor) -> Any:
        fn = F.fractional_max_pool2d if self._nd == 2 else F.fractional_max_pool3d
        return fn(
            input,
            self.kernel_size,
            self.output_size,
            self.output_ratio,
            self.return_indices,
            _random_samples=self._random_samples,
        )


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Fractional max pooling of ``(N, C, H, W)`` (see ``F.fractional_max_pool2d``)."""

    _nd = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Fractional max pooling of ``(N, C, T, H, W)`` (see ``F.fractional_max_pool3d``)."""

    _nd = 3


class RReLU(Module):
    """Randomised leaky ReLU (see ``F.rrelu``): random slopes in training mode, their mean
    ``(lower + upper) / 2`` in eval mode."""

    def __init__(
        self, lower: float = 1.0 / 8.0, upper: float = 1.0 / 3.0, inplace: bool = False
    ) -> None:
        super().__init__()
        if not lower <= upper:
            raise ArgumentRuntimeError(f"RReLU: lower ({lower}) must not exceed upper ({upper})")
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.rrelu(x, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}"


_LP_FIELDS = (("norm_type", 2.0), ("kernel_size", 1), ("stride", None), ("ceil_mode", False))
LPPool1d = _simple("LPPool1d", F.lp_pool1d, _LP_FIELDS)
LPPool2d = _simple("LPPool2d", F.lp_pool2d, _LP_FIELDS)


def _random_dropout(name: str, fn: Any) -> type:
    def forward(self: Module, x: Tensor) -> Tensor:
        return fn(x, self.p, self.training)

    return _dropout_class(name, fn, forward)


Dropout3d = _random_dropout("Dropout3d", F.dropout3d)
FeatureAlphaDropout = _random_dropout("FeatureAlphaDropout", F.feature_alpha_dropout)

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
        if padding_idx is not None and not -num_embeddings <= padding_idx < num_embeddings:
            raise ArgumentAssertionError(
                f"EmbeddingBag: padding_idx must be within num_embeddings: padding_idx "
                f"{padding_idx} is out of range for {num_embeddings} embeddings"
            )
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

    def reset_parameters(self) -> None:
        """Draws the table again from N(0, 1), the ``padding_idx`` row zero, as PyTorch."""
        from ..autodiff import no_grad
        from . import init

        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

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
        # the parameter shares ``embeddings``' storage, as PyTorch's (max_norm shows there)
        weight = Parameter(embeddings, requires_grad=False)
        weight._replace_data(embeddings.detach())
        if not freeze:
            weight.requires_grad_(True)
        return cls(
            n,
            d,
            max_norm,
            norm_type,
            scale_grad_by_freq,
            mode,
            sparse,
            weight,
            include_last_offset,
            padding_idx,
        )

    def forward(
        self, input: Tensor, offsets: Tensor | None = None, per_sample_weights: Tensor | None = None
    ) -> Tensor:
        """Bags are the rows of a 2-D ``input``, or the runs of a 1-D ``input`` that start at
        ``offsets``. With ``include_last_offset`` ``offsets`` has one more entry, at most
        ``len(input)``, that PyTorch reads only as a bound: the last bag runs to the end of
        ``input``. With ``max_norm``, the looked-up rows of ``weight`` whose
        ``norm_type``-norm exceeds it are first scaled down to it in place, as PyTorch's."""
        if not isinstance(input, Tensor):
            raise TypeError(f"EmbeddingBag: input must be a Tensor, got {type(input).__name__}")
        if self.include_last_offset and input.ndim == 1 and offsets is not None:
            offsets = self._bag_starts(input, offsets)
        if self.max_norm is not None:
            self._renorm(input)
        return F.embedding_bag(
            input,
            self.weight,
            offsets,
            None,
            self.norm_type,
            self.scale_grad_by_freq,
            self.mode,
            self.sparse,
            per_sample_weights,
            False,
            self.padding_idx,
        )

    @staticmethod
    def _bag_starts(input: Tensor, offsets: Tensor) -> Tensor:
        """``offsets`` without its last entry (checked to be at most ``len(input)``)."""
        if not isinstance(offsets, Tensor) or offsets.ndim != 1 or offsets.dtype.kind not in "iu":
            got = (
                f"{offsets.dtype} {list(offsets.shape)}"
                if isinstance(offsets, Tensor)
                else type(offsets).__name__
            )
            raise ShapeError(f"EmbeddingBag: offsets must be a 1-D int tensor, got {got}")
        from .. import _core

        if _core._tracing():
            # the values are this call's (not read on the host inside fg.trace)
            if offsets.shape[0] < 2:
                raise ValueError(
                    "EmbeddingBag: with include_last_offset, offsets must hold each bag's "
                    f"start and one more entry (at least 2 entries), got {offsets.shape[0]}"
                )
            return offsets[:-1]
        o = offsets.numpy()
        if o.size < 2:
            raise ValueError(
                "EmbeddingBag: with include_last_offset, offsets must hold each bag's start "
                f"and one more entry (at least 2 entries), got {o.tolist()}"
            )
        if int(o[-1]) > input.shape[0]:
            raise ValueError(
                f"EmbeddingBag: offsets[-1] can not be greater than input's length "
                f"{input.shape[0]}, got {int(o[-1])}"
            )
        return offsets[:-1]

    def _renorm(self, input: Tensor) -> None:
        """PyTorch's ``embedding_renorm_`` of the rows ``input`` looks up (indices out of
        range are left to ``F.embedding_bag`` to report)."""
        if input.dtype.kind not in "iu":
            return
        from .. import _core

        ids = input.reshape(-1)
        if not _core._tracing():  # (inside fg.trace the indices are not read on the host)
            values = ids.numpy()
            if values.size and (values.min() < 0 or values.max() >= self.num_embeddings):
                return
        F._renorm_rows_(self.weight, ids, float(self.max_norm), float(self.norm_type))

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm!r}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type!r}"
        if self.scale_grad_by_freq:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq!r}"
        s += f", mode={self.mode!r}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")


# ------------------------------------------------------------------------------------ lazy


def _placeholder(dtype: Any, device: Any) -> Tensor:
    """An empty stand-in (PyTorch's uninitialised parameter or buffer): it takes the
    module's ``.to()`` / ``.double()`` like any tensor, and the real one gets its dtype and
    device."""
    name = _dtype_name(dtype) if dtype is not None else default_float()
    return _core.zeros((0,), dtype=name, device=device)


class UninitializedParameter(Parameter):
    """PyTorch's ``nn.parameter.UninitializedParameter``: what a lazy layer's parameters
    are until its first input gives their shape (an empty stand-in here; the layer then
    holds ordinary :class:`Parameter` objects)."""

    cls_to_become = Parameter

    def __repr__(self) -> str:
        return "<UninitializedParameter>"

    def __reduce__(self) -> tuple:
        # pickled (and deep-copied) as a placeholder still, so the copy of a lazy layer
        # that has not run stays lazy
        return (_rebuild_uninitialized, (UninitializedParameter, self.dtype.name, str(self.device)))

    def __deepcopy__(self, memo: dict) -> UninitializedParameter:
        return _rebuild_uninitialized(type(self), self.dtype.name, str(self.device))

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> None:
        """Becomes a :class:`Parameter` of ``shape`` (zeros; the layer initialises it),
        with this placeholder's dtype and device unless given."""
        _materialize_placeholder(self, shape, device, dtype)

    def share_memory_(self) -> Any:
        raise RuntimeError(_SHARE_ERROR)


def _materialize_placeholder(t: Tensor, shape: Any, device: Any, dtype: Any) -> None:
    """Gives a placeholder zero-filled storage of ``shape`` (its own dtype and device
    unless given) and makes it the plain class it stands for, in place."""
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    name = _dtype_name(dtype) if dtype is not None else t.dtype.name
    data = _core.zeros(shape, dtype=name, device=device if device is not None else t.device)
    from .modules import _replace_data

    _replace_data(t, data)  # (keeping requires_grad)
    t.__class__ = t.cls_to_become


_SHARE_ERROR = (
    "Can't share memory on an uninitialized parameter or buffer. Call `forward` to "
    "initialize the parameters before calling `module.share_memory()`."
)


class UninitializedBuffer(Tensor):
    """PyTorch's ``nn.parameter.UninitializedBuffer``: a lazy layer's buffer (running
    statistics) before its first input."""

    cls_to_become = Tensor

    def __repr__(self) -> str:
        return "<UninitializedBuffer>"

    def __reduce__(self) -> tuple:
        return (_rebuild_uninitialized, (UninitializedBuffer, self.dtype.name, str(self.device)))

    def __deepcopy__(self, memo: dict) -> UninitializedBuffer:
        return _rebuild_uninitialized(type(self), self.dtype.name, str(self.device))

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> None:
        """Becomes a plain tensor of ``shape`` (zeros), with this placeholder's dtype and
        device unless given."""
        _materialize_placeholder(self, shape, device, dtype)

    def share_memory_(self) -> Any:
        raise RuntimeError(_SHARE_ERROR)


def _rebuild_uninitialized(cls: type, dtype: str, device: str) -> Tensor:
    return cls(_placeholder(dtype, device))


def is_lazy(param: Any) -> bool:
    """Whether ``param`` is a lazy layer's uninitialised parameter or buffer."""
    return isinstance(param, (UninitializedParameter, UninitializedBuffer))


def _lazy_load_hook(module: Module, state_dict: Any, prefix: str, *rest: Any) -> None:
    """Sizes a lazy module from the state dict being loaded (before the shapes are
    checked), as PyTorch's."""
    if not isinstance(module, _LazyMixin):
        return
    size = module._size_from_state(state_dict, prefix)
    if size is not None:
        module._materialize(size)


def _shape_of(state_dict: Any, key: str) -> tuple | None:
    if not hasattr(state_dict, "get"):
        return None
    v = state_dict.get(key)
    if v is None:
        return None
    shape = tuple(int(s) for s in getattr(v, "shape", np.shape(v)))
    return shape if shape != (0,) else None


class _LazyMixin:
    """PyTorch's lazy modules: the size a layer needs (``in_features``, ``in_channels``,
    ``num_features``) is read from its first input, when its parameters and buffers,
    empty placeholders until then, are made and initialised as the plain layer's
    (``cls_to_become``), which the module then becomes. Make optimizers after the first
    call. Loading a state dict first sizes the module from the tensors in it."""

    cls_to_become: type = Module
    _lazy_names: tuple[str, ...] = ("weight", "bias")  # (the placeholders)

    def _lazy_setup(self) -> None:
        Module.register_load_state_dict_pre_hook(self, _lazy_load_hook)

    def has_uninitialized_params(self) -> bool:
        return True

    def initialize_parameters(self, input: Any, *args: Any, **kwargs: Any) -> None:
        """Makes the parameters (and buffers) for ``input`` (or, given an int, that size)."""
        size = int(input) if isinstance(input, (int, np.integer)) else self._size_from(input)
        self._materialize(size)

    def _size_from(self, input: Any) -> int:
        raise NotImplementedError

    def _size_from_state(self, state_dict: Any, prefix: str) -> int | None:
        raise NotImplementedError

    def _make(self, size: int, dtype: str, device: Any) -> None:
        raise NotImplementedError

    def _materialize(self, size: int) -> None:
        first = next(
            (t for t in (getattr(self, n, None) for n in self._lazy_names) if t is not None),
            None,
        )
        if first is not None:
            dtype, device = first.dtype.name, first.device
        else:
            dtype, device = self.__dict__.get("_lazy_factory", (None, None))
        self._make(size, dtype, device)
        hooks = self.__dict__.get("_load_state_dict_pre_hooks", {})
        for key in [k for k, h in hooks.items() if h is _lazy_load_hook]:
            del hooks[key]
        self.__dict__.pop("_lazy_factory", None)
        self.__class__ = self.cls_to_become

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        # the input comes first, positionally or by keyword (`bn(input=x)`)
        first = args[0] if args else next(iter(kwargs.values()), None)
        if not isinstance(first, Tensor):
            raise TypeError(
                f"{type(self).__name__}: the first input must be a Tensor, got "
                f"{type(first).__name__ if first is not None else 'nothing'}"
            )
        self.initialize_parameters(first)
        if kwargs:  # PyTorch's keyword names, as the plain layer's __call__ maps them
            from .modules import _torch_forward_keywords

            args, kwargs = _torch_forward_keywords(self, args, kwargs)
        return self.forward(*args, **kwargs)  # (now the plain layer's forward)


def _lazy_infer(module: Any, args: tuple, kwargs: dict) -> None:
    """The forward pre-hook of a :class:`LazyModuleMixin` module: its first call sizes it."""
    module.initialize_parameters(*args, **kwargs)
    if module.has_uninitialized_params():
        raise RuntimeError(
            f"{type(module).__name__}: initialize_parameters left parameters or buffers "
            "uninitialized"
        )
    d = module.__dict__
    for key in ("_lazy_forward_handle", "_lazy_load_handle"):
        handle = d.pop(key, None)
        if handle is not None:
            handle.remove()
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become


def _lazy_mixin_load(module: Any, state_dict: Any, prefix: str, *rest: Any) -> None:
    """Sizes the module's placeholders from the tensors of the state dict being loaded (a
    placeholder in the state dict leaves them as they are)."""
    for name, t in [*module._parameters.items(), *module._buffers.items()]:
        key = prefix + name
        if t is None or not is_lazy(t) or key not in state_dict:
            continue
        v = state_dict[key]
        if not is_lazy(v):
            t.materialize(tuple(np.shape(v) if not isinstance(v, Tensor) else v.shape))


class LazyModuleMixin:
    """PyTorch's ``nn.modules.lazy.LazyModuleMixin``, for lazy modules of your own: put it
    before ``nn.Module`` in the bases, hold :class:`UninitializedParameter` /
    :class:`UninitializedBuffer` placeholders, and define ``initialize_parameters(*inputs)``
    to ``materialize`` them from the first call's inputs; the module then becomes
    ``cls_to_become`` (when set). Loading a state dict sizes the placeholders from its
    tensors."""

    cls_to_become: type | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        d = self.__dict__
        d["_lazy_load_handle"] = self.register_load_state_dict_pre_hook(_lazy_mixin_load)
        d["_lazy_forward_handle"] = self.register_forward_pre_hook(_lazy_infer, with_kwargs=True)

    def has_uninitialized_params(self) -> bool:
        """Whether any of this module's own parameters or buffers is still a placeholder."""
        own = [*self._parameters.values(), *self._buffers.values()]  # type: ignore[attr-defined]
        return any(is_lazy(t) for t in own if t is not None)

    def initialize_parameters(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            f"{type(self).__name__}: a lazy module defines initialize_parameters(*inputs)"
        )


class LazyLinear(_LazyMixin, Linear):
    """A :class:`Linear` whose ``in_features`` is the last axis of its first input: until
    then ``weight`` and ``bias`` are empty placeholders (make optimizers after the first
    call), and loading a state dict sizes them. It then becomes a plain ``Linear``."""

    cls_to_become = Linear

    def __init__(
        self, out_features: int, bias: bool = True, device: Any = None, dtype: Any = None
    ) -> None:
        Module.__init__(self)
        self.in_features = 0
        self.out_features = _count("LazyLinear", "out_features", out_features, 0)
        self.weight = UninitializedParameter(_placeholder(dtype, device))
        self.bias = UninitializedParameter(_placeholder(dtype, device)) if bias else None
        self._lazy_setup()

    def _size_from(self, x: Any) -> int:
        if x.ndim == 0:
            raise ShapeError(
                f"LazyLinear: input must be a Tensor of at least 1 axis, got {list(x.shape)}"
            )
        return x.shape[-1]

    def _size_from_state(self, state_dict: Any, prefix: str) -> int | None:
        shape = _shape_of(state_dict, prefix + "weight")
        return shape[1] if shape is not None and len(shape) == 2 else None

    def _make(self, size: int, dtype: str, device: Any) -> None:
        self.in_features = _count("LazyLinear", "in_features", size, 0)
        bound = 1.0 / math.sqrt(size) if size > 0 else 0.0
        self.weight = _uniform_param(None, bound, (self.out_features, size), dtype, device)
        if self.bias is not None:
            self.bias = _uniform_param(None, bound, (self.out_features,), dtype, device)

    def extra_repr(self) -> str:
        return f"in_features=0 (uninitialized), out_features={self.out_features}"


def _lazy_groups(kind: str, out_channels: int, groups: int) -> None:
    _count(kind, "out_channels", out_channels, 1)
    _count(kind, "groups", groups, 1)
    if out_channels % groups:
        raise ValueError(
            f"{kind}: out_channels ({out_channels}) must be divisible by groups ({groups})"
        )


class _LazyConv(_LazyMixin):
    """The lazy convolutions: ``in_channels`` is axis 1 of the first input (axis 0 when
    unbatched). Each subclass sets ``_nd`` (its spatial axes)."""

    _transposed = False

    def _lazy_conv(self, bias: bool, padding_mode: str, device: Any, dtype: Any) -> None:
        self.padding_mode = padding_mode
        self.in_channels = 0
        self.weight = UninitializedParameter(_placeholder(dtype, device))
        self.bias = UninitializedParameter(_placeholder(dtype, device)) if bias else None
        self._lazy_setup()

    def _size_from(self, x: Tensor) -> int:
        nd = self._nd
        if x.ndim not in (nd + 1, nd + 2):
            raise ShapeError(
                f"{type(self).__name__}: expected {nd + 1}-D (unbatched) or {nd + 2}-D "
                f"(batched) input, got shape {list(x.shape)}"
            )
        return x.shape[1] if x.ndim == nd + 2 else x.shape[0]

    def _size_from_state(self, state_dict: Any, prefix: str) -> int | None:
        shape = _shape_of(state_dict, prefix + "weight")
        if shape is None or len(shape) != self._nd + 2:
            return None
        return shape[0] if self._transposed else shape[1] * self.groups

    def _make(self, size: int, dtype: str, device: Any) -> None:
        kind = type(self).__name__
        if size % self.groups:
            raise ValueError(
                f"{kind}: in_channels ({size}) must be divisible by groups ({self.groups})"
            )
        _ConvNd._setup(
            self,  # type: ignore[arg-type]
            kind,
            size,
            self.out_channels,
            self.kernel_size,
            self.groups,
            self.bias is not None,
            device,
            dtype,
            None,
            transposed=self._transposed,
        )


def _scratch() -> np.random.Generator:
    """A throwaway generator for the stand-in weights a lazy layer's constructor discards
    (so building one draws nothing from fg.manual_seed's stream)."""
    return np.random.default_rng(0)


class _LazyConvNd(_LazyConv):
    def __init__(
        self,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        _lazy_groups(type(self).__name__, out_channels, groups)
        self.cls_to_become.__init__(
            self,
            groups,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            False,
            padding_mode,
            rng=_scratch(),
        )
        self._lazy_conv(bias, padding_mode, device, dtype)


class _LazyConvTransposeNd(_LazyConv):
    _transposed = True

    def __init__(
        self,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        output_padding: Any = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: Any = 1,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        kind = type(self).__name__
        if padding_mode != "zeros":
            raise ValueError(
                f'{kind}: only "zeros" padding_mode is supported, got {padding_mode!r}'
            )
        _lazy_groups(kind, out_channels, groups)
        self.cls_to_become.__init__(
            self,
            groups,
            out_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            output_padding=output_padding,
            groups=groups,
            bias=False,
            dilation=dilation,
            rng=_scratch(),
        )
        self._lazy_conv(bias, padding_mode, device, dtype)


class LazyConv1d(_LazyConvNd, Conv1d):
    """A :class:`Conv1d` whose ``in_channels`` is read from its first input."""

    _nd = 1
    cls_to_become = Conv1d


class LazyConv2d(_LazyConvNd, Conv2d):
    """A :class:`Conv2d` whose ``in_channels`` is read from its first input."""

    _nd = 2
    cls_to_become = Conv2d


class LazyConv3d(_LazyConvNd, Conv3d):
    """A :class:`Conv3d` whose ``in_channels`` is read from its first input."""

    _nd = 3
    cls_to_become = Conv3d


class LazyConvTranspose1d(_LazyConvTransposeNd, ConvTranspose1d):
    """A :class:`ConvTranspose1d` whose ``in_channels`` is read from its first input."""

    _nd = 1
    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTransposeNd, ConvTranspose2d):
    """A :class:`ConvTranspose2d` whose ``in_channels`` is read from its first input."""

    _nd = 2
    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTransposeNd, ConvTranspose3d):
    """A :class:`ConvTranspose3d` whose ``in_channels`` is read from its first input."""

    _nd = 3
    cls_to_become = ConvTranspose3d


class _LazyNorm(_LazyMixin):
    """The lazy batch and instance norms: ``num_features`` is the channel axis of the
    first input; ``weight``, ``bias``, ``running_mean`` and ``running_var`` are placeholders
    until then (``num_batches_tracked`` is made at once), PyTorch's defaults (affine, with
    running statistics)."""

    _lazy_names = ("weight", "bias", "running_mean", "running_var")

    def __init__(
        self,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ) -> None:
        self.cls_to_become.__init__(
            self, 1, eps, momentum, affine, track_running_stats, device=device, dtype=dtype
        )
        self.num_features = 0
        if affine:
            self.weight = UninitializedParameter(_placeholder(dtype, device))
            self.bias = UninitializedParameter(_placeholder(dtype, device)) if bias else None
        if track_running_stats:
            self.running_mean = UninitializedBuffer(_placeholder(dtype, device))
            self.running_var = UninitializedBuffer(_placeholder(dtype, device))
        self.__dict__["_lazy_factory"] = (dtype, device)
        self._lazy_setup()

    def _size_from(self, x: Tensor) -> int:
        dims = self._dims
        if x.ndim not in dims:
            raise ShapeError(
                f"{type(self).__name__}: expected {' or '.join(f'{d}-D' for d in dims)} "
                f"input, got shape {list(x.shape)}"
            )
        # (an instance norm's unbatched input has its channels first)
        unbatched = issubclass(self.cls_to_become, _InstanceNorm) and x.ndim == min(dims)
        return x.shape[0] if unbatched else x.shape[1]

    def _size_from_state(self, state_dict: Any, prefix: str) -> int | None:
        for name in self._lazy_names:
            shape = _shape_of(state_dict, prefix + name)
            if shape is not None and len(shape) == 1:
                return shape[0]
        return None

    def _make(self, size: int, dtype: str, device: Any) -> None:
        self.num_features = _count(type(self).__name__, "num_features", size, 1)
        c = self.num_features
        if self.weight is not None:
            self.weight = _filled_param(1.0, (c,), dtype, device)
        if self.bias is not None:
            self.bias = _filled_param(0.0, (c,), dtype, device)
        if self.running_mean is not None:
            name = _dtype_name(dtype) if dtype is not None else default_float()
            self.running_mean = _core.zeros((c,), dtype=name, device=device)
            self.running_var = _core.ones((c,), dtype=name, device=device)


class LazyBatchNorm1d(_LazyNorm, BatchNorm1d):
    """A :class:`BatchNorm1d` whose ``num_features`` is read from its first input."""

    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNorm, BatchNorm2d):
    """A :class:`BatchNorm2d` whose ``num_features`` is read from its first input."""

    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNorm, BatchNorm3d):
    """A :class:`BatchNorm3d` whose ``num_features`` is read from its first input."""

    cls_to_become = BatchNorm3d


class LazyInstanceNorm1d(_LazyNorm, InstanceNorm1d):
    """An :class:`InstanceNorm1d` whose ``num_features`` is read from its first input
    (PyTorch's lazy defaults: affine, with running statistics)."""

    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyNorm, InstanceNorm2d):
    """An :class:`InstanceNorm2d` whose ``num_features`` is read from its first input."""

    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyNorm, InstanceNorm3d):
    """An :class:`InstanceNorm3d` whose ``num_features`` is read from its first input."""

    cls_to_become = InstanceNorm3d


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
        *,
        bias: bool = True,
    ) -> None:
        super().__init__(
            num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias
        )
        self.process_group = process_group

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group: Any = None) -> Module:
        """``module`` with every batch norm layer in it (``BatchNorm1d/2d/3d`` and their
        lazy forms; not the instance norms) replaced by a ``SyncBatchNorm`` of the same
        settings that shares its parameters and running statistics and keeps its training
        flag. A batch norm ``module`` itself comes back as a new layer; any other module is
        changed in place and returned, as PyTorch's."""
        from .extra import _InstanceNorm

        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, _InstanceNorm):
            out = cls(
                module.num_features,
                module.eps,
                module.momentum,
                module.affine,
                module.track_running_stats,
                process_group,
                bias=module.bias is not None,
            )
            if module.affine:
                out.weight = module.weight
                out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out


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


# ---------------------------------------------------------------------------------- Buffer


class Buffer(Tensor):
    """PyTorch's ``nn.Buffer``: a tensor that a :class:`Module` registers as a buffer when
    it is assigned as an attribute (``self.mask = nn.Buffer(t)``), in :meth:`state_dict`
    unless ``persistent=False``. ``Buffer(data)`` copies ``data`` (default: an empty
    float tensor), keeping its dtype, device and ``requires_grad``."""

    def __new__(cls, data: Any = None, *, persistent: bool = True) -> Buffer:  # noqa: PYI034
        if data is None:
            data = _core.zeros((0,), dtype=default_float())
        requires_grad = bool(getattr(data, "requires_grad", False))
        dtype = device = None
        if isinstance(data, Tensor):
            data = data.detach()
            dtype, device = data.dtype.name, data.device
        b = super().__new__(cls, data, dtype, device)
        b.persistent = bool(persistent)
        if requires_grad:
            b.requires_grad_(True)
        return b


def _takes_persistent(register: Any) -> bool:
    import inspect

    try:
        params = inspect.signature(register).parameters
    except (TypeError, ValueError):
        return True
    return "persistent" in params or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
    )


def _install_buffer_assignment() -> None:
    """``module.name = nn.Buffer(t)`` registers a buffer, as PyTorch's ``Module`` does."""
    plain = Module.__setattr__
    if getattr(plain, "_registers_buffers", False):
        return

    def __setattr__(self: Module, name: str, value: Any) -> None:
        # (a lazy module's UninitializedBuffer registers as a buffer too, as PyTorch's)
        if not isinstance(value, (Buffer, UninitializedBuffer)):
            plain(self, name, value)
            return
        d = self.__dict__
        cur = d.get(name)
        for store in ("_parameters", "_modules"):
            items = d.get(store)
            if items is not None and name in items:
                cur = items[name]
        if isinstance(cur, (Parameter, Module)):
            kind = "parameter" if isinstance(cur, Parameter) else "child module"
            raise TypeError(
                f"cannot assign 'Buffer' as {kind} '{name}' (nn.Parameter, Module or None expected)"
            )
        register = self.register_buffer
        if getattr(register, "__func__", None) is Module.register_buffer or _takes_persistent(
            register
        ):
            register(name, value, getattr(value, "persistent", True))
            return
        # a subclass's register_buffer(self, name, value) without `persistent`, as PyTorch
        if not getattr(value, "persistent", True):
            raise RuntimeError(
                "Registering a non-persistent buffer on a Module subclass that implements "
                "register_buffer() without the persistent argument is not allowed."
            )
        register(name, value)

    __setattr__._registers_buffers = True  # type: ignore[attr-defined]
    Module.__setattr__ = __setattr__  # type: ignore[method-assign]


_install_buffer_assignment()
