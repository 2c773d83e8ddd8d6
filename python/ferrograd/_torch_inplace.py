"""PyTorch's in-place spellings of out-of-place ops (``x.floor_()``, ``x.clamp_min_(0)``,
``x.eq_(y)``, ``x.unsqueeze_(0)``, ...): each computes the op and writes the result into
``x`` (cast to ``x``'s dtype, as PyTorch's), so a tape differentiates through it as through
``x.copy_(op(x))``; shape-changing ones (``squeeze_``, ``unsqueeze_``, ``transpose_``,
``t_``) make ``x`` stand for the new view. A few tensor methods and namespace aliases PyTorch
programs use are here too."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import _core
from ._core import DTypeError, ShapeError, Tensor

# in-place name -> the out-of-place method it writes back
_WRITE_BACK = [
    "floor",
    "ceil",
    "round",
    "trunc",
    "frac",
    "clamp_min",
    "clamp_max",
    "cumsum",
    "cumprod",
    "addmm",
    "baddbmm",
    "addmv",
    "addr",
    "addbmm",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "logical_not",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    "remainder",
    "fmod",
    "erf",
    "erfc",
    "erfinv",
    "i0",
    "sinc",
    "sgn",
    "fix",
    "negative",
    "reciprocal",
    "rsqrt",
    "sign",
    "sin",
    "cos",
    "tan",
    "square",
    "nan_to_num",
    "log1p",
    "expm1",
    "atan2",
    "hypot",
    "log2",
    "log10",
    "exp2",
    "asin",
    "acos",
    "atan",
    "arcsin",
    "arccos",
    "arctan",
    "arcsinh",
    "arccosh",
    "arctanh",
    "absolute",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "deg2rad",
    "rad2deg",
    "xlogy",
    "logit",
    "digamma",
    "lgamma",
    "copysign",
    "heaviside",
    "gcd",
    "lcm",
    "float_power",
    "true_divide",
    "floor_divide",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
    "renorm",
    "scatter_reduce",
    "ldexp",
    "nextafter",
]

# augmented assignments PyTorch runs in place -> the op they write back
_AUGMENTED = (
    ("__ifloordiv__", "floor_divide"),
    ("__imod__", "remainder"),
    ("__ipow__", "pow"),
    ("__iand__", "bitwise_and"),
    ("__ior__", "bitwise_or"),
    ("__ixor__", "bitwise_xor"),
    ("__ilshift__", "bitwise_left_shift"),
    ("__irshift__", "bitwise_right_shift"),
)

_RESHAPING = ("squeeze", "unsqueeze", "transpose", "t", "swapaxes", "swapdims")


def write_result(name: str, self: Tensor, out: Tensor) -> Tensor:
    """Writes ``out``, what the in-place op ``name`` computed, into ``self``; returns self.
    As PyTorch's, a result whose dtype cannot be cast to ``self``'s without losing its kind
    (a float result into an integer tensor, an integer one into a bool tensor) is refused
    rather than truncated, and so is one of another shape."""
    if out.dtype != self.dtype:
        import ferrograd as fg

        if not fg.can_cast(out.dtype, self.dtype):
            raise DTypeError(
                f"{name}: result type {out.dtype} can't be cast to the desired output type "
                f"{self.dtype}"
            )
    if tuple(out.shape) != tuple(self.shape):
        raise ShapeError(
            f"{name}: the result has shape {list(out.shape)}, which cannot be written "
            f"into a tensor of shape {list(self.shape)}"
        )
    return self.copy_(out)


def _float_power_(self: Tensor, exponent: Any) -> Tensor:
    """In-place :meth:`float_power`: only a float64 (complex128) tensor holds its result, as
    PyTorch's, which does not round the float64 power back into a narrower tensor."""
    out = _source(self, (exponent,), {}).float_power(exponent)
    if out.dtype != self.dtype:
        raise DTypeError(
            f"float_power_: the base given to float_power_ has dtype {self.dtype} but the "
            f"operation's result requires dtype {out.dtype}"
        )
    return write_result("float_power_", self, out)


def _source(self: Tensor, args: tuple, kwargs: dict) -> Tensor:
    """What an in-place op computes from: this tensor, or a copy of it where the op's gradient
    may keep its value (it is recorded, or another operand is) and the write would then
    change what backward reads (``buf **= w`` with ``w`` requiring grad keeps ``buf``)."""
    src = self._write_source()
    if src is self or src._data_key[0] == self._data_key[0]:
        operands = (*args, *kwargs.values())
        if any(isinstance(a, Tensor) and a.requires_grad for a in operands):
            import ferrograd as fg

            if fg.is_grad_enabled():
                return self.clone()
    return src


def _write_back(name: str) -> Callable[..., Tensor]:
    def inplace(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        out = getattr(_source(self, args, kwargs), name)(*args, **kwargs)
        return write_result(name + "_", self, out)

    inplace.__name__ = name + "_"
    inplace.__doc__ = f"In-place :meth:`{name}` (the result written into this tensor)."
    return inplace


def _rebinding(name: str) -> Callable[..., Tensor]:
    def inplace(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        self._replace_view(getattr(self, name)(*args, **kwargs))
        return self

    inplace.__name__ = name + "_"
    inplace.__doc__ = f"In-place :meth:`{name}`: this tensor now stands for the result."
    return inplace


def _is_signed(self: Tensor) -> bool:
    return self.dtype.kind in "fi"


def _contains(self: Tensor, element: Any) -> bool:
    """``element in t``: whether any entry equals ``element`` (a number or a tensor that
    broadcasts), as PyTorch's."""
    if not isinstance(element, (Tensor, int, float, bool)):
        raise RuntimeError(  # noqa: TRY004 (PyTorch's exception type)
            f"Tensor.__contains__ only supports Tensor or scalar, but you passed in a "
            f"{type(element).__name__}"
        )
    return bool((self == element).any().item())


def _put_(self: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """Writes ``source`` at the flat positions ``index`` (in row-major order) of this tensor,
    adding when ``accumulate``; returns self, as PyTorch's ``put_``. ``index`` and
    ``source`` must have as many entries as each other (their shapes may differ)."""
    if not isinstance(index, Tensor) or not isinstance(source, Tensor):
        raise TypeError(
            f"put_: index and source must be Tensors, got {type(index).__name__} and "
            f"{type(source).__name__}"
        )
    if index.dtype.kind not in "iu":
        raise DTypeError(f"put_: index must be an integer tensor, got {index.dtype}")
    if source.dtype != self.dtype:
        raise DTypeError(
            f"put_: source's dtype {source.dtype} must be self's dtype {self.dtype} (PyTorch "
            "does not convert it)"
        )
    if index.numel() != source.numel():
        raise IndexError(
            f"put_: source and index must have the same number of elements, got "
            f"source.numel() = {source.numel()} and index.numel() = {index.numel()}"
        )
    if not self.is_contiguous():
        # a strided view: the writes go to a row-major copy, copied back through the view
        tmp = self.contiguous()
        if tmp is self:
            tmp = self.clone()
        _put_(tmp, index, source, accumulate)
        self.copy_(tmp)
        return self
    flat = self.reshape(-1)
    idx = index.reshape(-1).astype("int64")
    n = flat.shape[0]
    if _core._tracing():
        # (the index's values are not known while the graph is built: checked against
        # [-n, n) by a gather from n ones, which raises when the graph runs)
        ones = _core.ones((n,), dtype="int64", device=self.device)
        idx = idx * _core.index_select(ones, 0, idx, op="put_")
    elif idx.numel() and bool(((idx < -n) | (idx >= n)).any()):
        raise IndexError(f"put_: an index is out of range for a tensor of {n} elements")
    idx = idx + (idx < 0).astype("int64") * n
    src = source.reshape(-1).astype(self.dtype.name)
    if accumulate:
        flat.index_add_(0, idx, src)
    else:
        flat[idx] = src
    return self


def _put(self: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """A copy of this tensor with ``source`` written (or added, with ``accumulate``) at the
    flat positions ``index``, as PyTorch's ``put``; differentiable in both tensors."""
    return _put_(self.clone(), index, source, accumulate)


def _split_with_sizes(self: Tensor, split_sizes: Any, dim: int = 0) -> tuple:
    return self.split(list(split_sizes), dim)


def install() -> None:
    import ferrograd as fg

    for name in _WRITE_BACK:
        if hasattr(Tensor, name) and not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", _write_back(name))
    if hasattr(Tensor, "float_power"):
        Tensor.float_power_ = _float_power_
    for dunder, name in _AUGMENTED:
        # ``x //= y`` writes into x (views and aliases of x see it), as ``x += y`` does
        setattr(Tensor, dunder, _write_back(name))
    for name in _RESHAPING:
        if hasattr(Tensor, name) and not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", _rebinding(name))
    for flag in (
        "is_xpu",
        "is_mps",
        "is_meta",
        "is_sparse",
        "is_quantized",
        "is_mkldnn",
        "is_nested",
        "is_vulkan",
        "is_ipu",
        "is_sparse_csr",
    ):
        if not hasattr(Tensor, flag):
            setattr(Tensor, flag, property(lambda self: False))
    Tensor.is_signed = _is_signed
    getset = Tensor.__dict__.get("grad")
    if getset is not None and not isinstance(getset, property):
        from . import autodiff
        from .autodiff import _warn_unretained_grad

        autodiff._grad_slot = getset

        def _get_grad(self: Tensor, _get: Any = getset.__get__) -> Any:
            g = _get(self)
            if g is None:
                _warn_unretained_grad(self)
            return g

        def _set_grad(self: Tensor, value: Any, _set: Any = getset.__set__) -> None:
            # (its own gradient would alias the values: backward would add into both)
            if value is self:
                raise RuntimeError(
                    f"grad: can't assign a tensor (of shape {list(self.shape)}) as its own grad"
                )
            _set(self, value)

        Tensor.grad = property(
            _get_grad,
            _set_grad,
            lambda self: getset.__set__(self, None),
            getset.__doc__,
        )
    if not hasattr(Tensor, "put_"):
        Tensor.put_ = _put_
    if not hasattr(Tensor, "put"):
        Tensor.put = _put
    if not hasattr(fg, "put"):
        fg.put = _put
    from .autodiff import is_inference_mode_enabled

    fg.is_inference_mode_enabled = is_inference_mode_enabled
    Tensor.__contains__ = _contains
    if not hasattr(Tensor, "split_with_sizes"):
        Tensor.split_with_sizes = _split_with_sizes

    from . import random as _random
    from .nn import functional as F

    def alias(name: str, target: Any) -> None:
        if not hasattr(fg, name) and target is not None:
            setattr(fg, name, target)

    for name in (
        "conv1d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "layer_norm",
        "batch_norm",
        "group_norm",
        "instance_norm",
        "embedding",
        "dropout",
        "cosine_similarity",
        "pairwise_distance",
        "pixel_shuffle",
        "pixel_unshuffle",
        "pdist",
        "channel_shuffle",
        "prelu",
        "selu",
        "celu",
        "rrelu",
        "threshold",
        "alpha_dropout",
        "feature_alpha_dropout",
        "bilinear",
        "hardshrink",
    ):
        alias(name, getattr(F, name, None))
    alias("conv_tbc", F._conv_tbc)
    alias("native_channel_shuffle", F.channel_shuffle)
    alias("get_rng_state", getattr(_random, "get_rng_state", None))
    alias("set_rng_state", getattr(_random, "set_rng_state", None))
    alias("seed", getattr(_random, "seed", None))
    alias("vmap", getattr(fg.func, "vmap", None))
    alias("concatenate", fg.cat)
    alias("moveaxis", getattr(fg, "movedim", None))
    alias("swapdims", fg.transpose)
    alias("asarray", _asarray)
    alias("ravel", lambda input: input.ravel())
    alias("msort", lambda input: fg.sort(input, 0)[0])
    from ._torch_more import _positive

    alias("positive", _positive)
    alias("detach", lambda input: input.detach())
    alias("isposinf", lambda input: input == float("inf"))
    alias("isneginf", lambda input: input == float("-inf"))
    alias("isreal", lambda input: fg.ones_like(input, dtype="bool"))
    alias(
        "scalar_tensor",
        lambda s, dtype=None, device=None, requires_grad=False, **_: fg.tensor(
            float(s),
            dtype=dtype or fg.get_default_dtype(),
            device=device,
            requires_grad=requires_grad,
        ),
    )

    from . import special

    for name, target in (
        ("gammaln", "lgamma"),
        ("psi", "digamma"),
        ("digamma", "digamma"),
        ("polygamma", "polygamma"),
        ("erfinv", "erfinv"),
        ("i0", "i0"),
        ("multigammaln", "mvlgamma"),
    ):
        if not hasattr(special, name) and hasattr(fg, target):
            setattr(special, name, getattr(fg, target))


def _asarray(
    obj: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    copy: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """``torch.asarray``: a tensor over ``obj`` (shared when it already is one of the dtype
    and device, else converted)."""
    import ferrograd as fg

    if isinstance(obj, Tensor):
        out = obj
        if dtype is not None and out.dtype != dtype:
            out = out.astype(dtype)
        if device is not None and out.device != str(device):
            out = out.to(device)
        if copy and out is obj:
            out = out.clone()
    elif isinstance(obj, np.ndarray) and copy is not True and dtype is None:
        out = fg.from_numpy(obj) if device is None else fg.tensor(obj, device=device)
    else:
        out = fg.tensor(obj, dtype=dtype, device=device)
    if requires_grad:
        out.requires_grad_(True)
    return out
