"""Mixed precision with PyTorch's API: :class:`autocast` and :class:`GradScaler`.

Inside ``autocast(device_type, dtype)`` some ops on that device's tensors run in ``dtype``
(``bfloat16`` by default on the CPU, ``float16`` on CUDA), some in float32 and the rest as
they are (type promotion), each device by PyTorch's list for it:

* CUDA: the products (``@``, ``matmul``, ``mm``, ``bmm``, ``addmm``, ``baddbmm``,
  ``linear``, ``conv1d``/``conv2d``, ``conv_transpose1d``/``2d``,
  ``scaled_dot_product_attention``) in ``dtype``; softmax, layer and group norm,
  ``logsumexp``, ``softplus`` and the losses in float32.
* CPU: the products (with ``conv3d``, ``conv_transpose3d``, ``linalg.vecdot`` and the LSTM
  and RNN modules, not ``mv``/``addmv``) in ``dtype``; ``prod``, ``trace``, ``cdist``,
  quantiles, the 3-D pools, reflection and replication padding, ``grid_sample``, the
  losses and the linear algebra decompositions and solvers in float32; softmax and the
  normalisations keep their input's dtype; ``index_copy``, ``cat`` and ``stack`` cast
  their inputs to the widest float dtype among them.

Float inputs are cast, recorded like any op, so gradients of float32 parameters stay
float32; float64 tensors are never lowered. Inside an op autocast is off (an op of the
float32 list that uses a product internally runs that product in float32).

:class:`GradScaler` multiplies the loss by a scale so float16 gradients do not underflow,
unscales the gradients before the optimizer step, skips steps whose gradients hold inf or
NaN and adapts the scale (PyTorch's algorithm and defaults)."""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import types
import warnings
from collections.abc import Iterable
from typing import Any, Callable

import numpy as np

from ._core import DTypeError, Tensor

__all__ = [
    "GradScaler",
    "autocast",
    "clear_autocast_cache",
    "custom_bwd",
    "custom_fwd",
    "get_autocast_cpu_dtype",
    "get_autocast_dtype",
    "is_autocast_available",
    "is_autocast_cache_enabled",
    "is_autocast_cpu_enabled",
    "is_autocast_enabled",
    "set_autocast_cache_enabled",
    "set_autocast_dtype",
    "set_autocast_enabled",
]

_LOWER = ("float16", "bfloat16")
_DEFAULT_DTYPE = {"cpu": "bfloat16", "cuda": "float16"}
_active = [0]  # autocast regions entered in any thread (the wrappers' fast path)
_local = threading.local()


def _state() -> dict:
    """The calling thread's autocast state: per device the dtype its ops are cast to (None
    where autocast is off), under "dtype" the dtype each device would use (set by a region
    even when it is disabled, as PyTorch's), under "mge" whether a MegEngine-style region
    (no device, CUDA's op lists on every device) is on."""
    st = getattr(_local, "state", None)
    if st is None:
        st = _local.state = {
            "cpu": None,
            "cuda": None,
            "dtype": dict(_DEFAULT_DTYPE),
            "mge": False,
            "manual": set(),
            "cache": True,
        }
    return st


def _device_kind(op: str, device_type: Any) -> str:
    if not isinstance(device_type, str):
        raise TypeError(f"{op}: device_type must be a str ('cpu' or 'cuda'), got {device_type!r}")
    kind = device_type.partition(":")[0]
    if kind not in ("cpu", "cuda"):
        raise RuntimeError(f"{op}: device_type must be 'cpu' or 'cuda', got {device_type!r}")
    return kind


def is_autocast_available(device_type: str) -> bool:
    return device_type in ("cpu", "cuda")


def get_autocast_dtype(device_type: str) -> Any:
    """The dtype autocast uses on ``device_type`` now: the innermost region's, even a
    disabled one's (its default outside a region), as PyTorch's."""
    import ferrograd

    kind = _device_kind("get_autocast_dtype", device_type)
    return getattr(ferrograd, _state()["dtype"][kind])


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on for ``device_type`` (CUDA when not given, as PyTorch's)."""
    kind = "cuda" if device_type is None else _device_kind("is_autocast_enabled", device_type)
    return _state()[kind] is not None


def set_autocast_enabled(device_type: Any, enabled: Any = None) -> None:
    """Turns autocast on or off for ``device_type`` in this thread, with its current
    dtype; ``set_autocast_enabled(enabled)`` (the older signature) for CUDA."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    kind = _device_kind("set_autocast_enabled", device_type)
    st = _state()
    st[kind] = st["dtype"][kind] if enabled else None
    # the wrappers' fast path counts a switched-on device as an open region
    if enabled and kind not in st["manual"]:
        st["manual"].add(kind)
        _active[0] += 1
    elif not enabled and kind in st["manual"]:
        st["manual"].discard(kind)
        _active[0] -= 1


def set_autocast_dtype(device_type: str, dtype: Any) -> None:
    """Sets the dtype autocast uses on ``device_type`` (float16 or bfloat16)."""
    from ._tensor import _dtype_name

    kind = _device_kind("set_autocast_dtype", device_type)
    st = _state()
    st["dtype"][kind] = _dtype_name(dtype)
    if st[kind] is not None:
        st[kind] = st["dtype"][kind]


def is_autocast_cpu_enabled() -> bool:
    """``is_autocast_enabled("cpu")`` (PyTorch's older name)."""
    return is_autocast_enabled("cpu")


def get_autocast_cpu_dtype() -> Any:
    """``get_autocast_dtype("cpu")`` (PyTorch's older name)."""
    return get_autocast_dtype("cpu")


def clear_autocast_cache() -> None:
    """Nothing to clear: casts are not cached (each region casts a weight where it is
    used), so results are the same as with PyTorch's cache."""


def is_autocast_cache_enabled() -> bool:
    """The ``cache_enabled`` flag as last set (casts are not cached either way)."""
    return bool(_state()["cache"])


def set_autocast_cache_enabled(enabled: bool) -> None:
    _state()["cache"] = bool(enabled)


class autocast:
    """A mixed-precision region, as a context manager or a decorator, in either spelling:

    * PyTorch's ``autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``:
      ``device_type`` ("cpu" or "cuda") runs its products in ``dtype``; ``enabled=False``
      turns autocast off inside the region.
    * MegEngine's ``autocast(enabled=True, low_prec_dtype="float16",
      high_prec_dtype="float32")`` (no device): both devices run their products in
      ``low_prec_dtype`` and sets the module's ``enabled`` / ``low_prec_dtype`` /
      ``high_prec_dtype`` for the region; ``enabled=False`` leaves everything as it was.

    See the module's notes for what runs in which precision."""

    def __init__(
        self,
        device_type: Any = None,
        dtype: Any = None,
        enabled: bool = True,
        cache_enabled: bool | None = None,
        *,
        low_prec_dtype: Any = None,
        high_prec_dtype: Any = None,
    ) -> None:
        from ._tensor import _dtype_name

        self._args = (device_type, dtype, enabled, cache_enabled, low_prec_dtype, high_prec_dtype)
        self._prev: list = []
        if device_type is None or isinstance(device_type, bool):
            # MegEngine's spelling: the first positional is ``enabled``, the second the low
            # precision dtype.
            if isinstance(device_type, bool):
                enabled = device_type
            if dtype is not None and low_prec_dtype is not None:
                raise TypeError("autocast: low_prec_dtype given twice (positionally and by name)")
            low = _check_low("autocast", dtype if dtype is not None else low_prec_dtype)
            high = _check_high("autocast", high_prec_dtype)
            self.device_type, self.fast_dtype, self._enabled = None, low, bool(enabled)
            self.enabled, self.low_prec_dtype, self.high_prec_dtype = bool(enabled), low, high
            return
        if low_prec_dtype is not None or high_prec_dtype is not None:
            raise TypeError(
                "autocast: low_prec_dtype/high_prec_dtype are MegEngine's arguments and take no "
                f"device_type (got device_type={device_type!r}); use dtype= with a device_type"
            )
        if not isinstance(device_type, str):
            raise ValueError(  # noqa: TRY004  (PyTorch's exception type)
                f"autocast: device_type must be a str ('cpu' or 'cuda'), got {device_type!r}"
            )
        kind = device_type.partition(":")[0]
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"autocast: device_type must be 'cpu' or 'cuda', got {device_type!r}")
        name = _state()["dtype"][kind] if dtype is None else _dtype_name(dtype)
        if enabled and name not in _LOWER:
            # PyTorch's: a warning, and the region runs with autocast off
            warnings.warn(
                f"In {kind.upper() if kind == 'cuda' else 'CPU'} autocast, but the target "
                f"dtype {name} is not supported (float16 and bfloat16 are). Disabling "
                "autocast.",
                UserWarning,
                stacklevel=2,
            )
            enabled = False
        self.device_type, self.fast_dtype, self._enabled = kind, name, bool(enabled)

    def __enter__(self) -> Any:
        st = _state()
        if self.device_type is None:
            if not self._enabled:
                self._prev.append(None)
                return self
            cfg = _mge_config()
            self._prev.append((_snapshot(st), dict(cfg)))
            st["cpu"] = st["cuda"] = self.fast_dtype
            st["mge"] = True
            cfg["low"], cfg["high"] = self.low_prec_dtype, self.high_prec_dtype
        else:
            kind = self.device_type
            self._prev.append((st[kind], st["dtype"][kind], st["mge"]))
            st[kind] = self.fast_dtype if self._enabled else None
            st["dtype"][kind] = self.fast_dtype
            st["mge"] = False
        _active[0] += 1
        return self

    def __exit__(self, *exc: object) -> None:
        prev = self._prev.pop()
        if self.device_type is None:
            if prev is None:
                return
            _state().update(prev[0])
            _mge_config().update(prev[1])
        else:
            st = _state()
            st[self.device_type], st["dtype"][self.device_type], st["mge"] = prev
        _active[0] -= 1

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        device_type, dtype, enabled, cache_enabled, low, high = self._args

        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with autocast(
                device_type,
                dtype,
                enabled,
                cache_enabled,
                low_prec_dtype=low,
                high_prec_dtype=high,
            ):
                return fn(*args, **kwargs)

        return wrapped


def _snapshot(st: dict) -> dict:
    return {"cpu": st["cpu"], "cuda": st["cuda"], "dtype": dict(st["dtype"]), "mge": st["mge"]}


def _capture() -> tuple:
    """The calling thread's whole autocast setting, for :func:`_replay` (a checkpointed
    segment is recomputed in backward under the autocast it first ran under)."""
    return _snapshot(_state()), dict(_mge_config())


@contextlib.contextmanager
def _replay(captured: tuple) -> Any:
    """Runs its body under the autocast setting :func:`_capture` took, then puts the
    caller's back."""
    st, cfg = _state(), _mge_config()
    prev = (_snapshot(st), dict(cfg))
    st.update(captured[0])
    st["dtype"] = dict(captured[0]["dtype"])
    cfg.update(captured[1])
    _active[0] += 1
    try:
        yield
    finally:
        _active[0] -= 1
        st.update(prev[0])
        cfg.update(prev[1])


def _check_low(op: str, dtype: Any) -> str:
    from ._tensor import _dtype_name

    name = "float16" if dtype is None else _dtype_name(dtype)
    if name not in _LOWER:
        raise ValueError(f"{op}: low_prec_dtype must be float16 or bfloat16, got {name}")
    return name


def _check_high(op: str, dtype: Any) -> str:
    from ._tensor import _dtype_name

    name = "float32" if dtype is None else _dtype_name(dtype)
    if name != "float32":
        raise ValueError(
            f"{op}: high_prec_dtype must be float32 (the precision ferrograd's float32 ops "
            f"run in), got {name}"
        )
    return name


def _mge_config() -> dict:
    cfg = getattr(_local, "mge", None)
    if cfg is None:
        cfg = _local.mge = {"low": "float16", "high": "float32", "module_on": False}
    return cfg


class _AmpModule(types.ModuleType):
    """MegEngine's module-level switches: ``amp.enabled``, ``amp.low_prec_dtype`` and
    ``amp.high_prec_dtype`` read and set the calling thread's autocast state (setting
    ``enabled = True`` turns autocast on for both devices, like entering ``autocast()``)."""

    @property
    def enabled(self) -> bool:
        st = _state()
        return st["cpu"] is not None or st["cuda"] is not None

    @enabled.setter
    def enabled(self, value: bool) -> None:
        st, cfg = _state(), _mge_config()
        on = bool(value)
        st["cpu"] = st["cuda"] = cfg["low"] if on else None
        st["mge"] = on
        if on != cfg["module_on"]:
            _active[0] += 1 if on else -1
            cfg["module_on"] = on

    @property
    def low_prec_dtype(self) -> str:
        return _mge_config()["low"]

    @low_prec_dtype.setter
    def low_prec_dtype(self, value: Any) -> None:
        name = _check_low("amp.low_prec_dtype", value)
        _mge_config()["low"] = name
        st = _state()
        for dev in ("cpu", "cuda"):
            if st[dev] is not None:
                st[dev] = name

    @property
    def high_prec_dtype(self) -> str:
        return _mge_config()["high"]

    @high_prec_dtype.setter
    def high_prec_dtype(self, value: Any) -> None:
        _mge_config()["high"] = _check_high("amp.high_prec_dtype", value)


def _kind(t: Tensor) -> str:
    return str(t.device).partition(":")[0]


def _tensors(args: tuple, kwargs: dict) -> list:
    """The tensors among the arguments (one level into lists and tuples, as ``cat``'s)."""
    out = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(t for t in a if isinstance(t, Tensor))
    return out


def _widest(ts: list) -> str | None:
    names = {t.dtype.name for t in ts if t.dtype.kind == "f"}
    if not names:
        return None
    for name in ("float64", "float32"):
        if name in names:
            return name
    return names.pop() if len(names) == 1 else "float32"


def _target(x: Tensor, policy: str, st: dict, widest: dict) -> str | None:
    """The dtype ``policy`` casts the float tensor ``x`` to (None: left as it is)."""
    name = x.dtype.name
    if policy == "lower":
        target = st[_kind(x)]
        # float64 is never lowered, as PyTorch's
        return target if name != "float64" and name != target else None
    if policy == "fp32":
        return "float32" if name in _LOWER else None
    target = widest.get(_kind(x))  # promote
    return target if target is not None and target != name else None


def _cast_args(args: tuple, kwargs: dict, policy: Callable[[str], str | None], st: dict) -> tuple:
    widest: dict = {}
    if any(policy(k) == "promote" for k in ("cpu", "cuda") if st[k] is not None):
        by_dev: dict = {}
        for t in _tensors(args, kwargs):
            by_dev.setdefault(_kind(t), []).append(t)
        widest = {k: _widest(v) for k, v in by_dev.items()}

    def cast(x: Any) -> Any:
        if isinstance(x, (list, tuple)):
            return type(x)(cast(v) for v in x) if any(isinstance(v, Tensor) for v in x) else x
        if not isinstance(x, Tensor) or x.dtype.kind != "f":
            return x
        kind = _kind(x)
        if st.get(kind) is None:
            return x
        p = policy(kind)
        target = _target(x, p, st, widest) if p is not None else None
        return x if target is None else x.astype(target)

    return tuple(cast(a) for a in args), {k: cast(v) for k, v in kwargs.items()}


def _wrap(fn: Callable[..., Any], policies: dict) -> Callable[..., Any]:
    """``fn`` casting its float arguments by ``policies`` (per device: "lower", "fp32",
    "promote", or a function of the call's arguments giving one of them or None) inside
    an autocast region, and running with autocast off (PyTorch's ops do not autocast the
    ops they are built from)."""
    if getattr(fn, "_autocast_wrapped", False):
        fn = fn.__wrapped__  # type: ignore[attr-defined]

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if not _active[0]:
            return fn(*args, **kwargs)
        st = _state()
        if st["cpu"] is None and st["cuda"] is None:
            return fn(*args, **kwargs)
        table = policies["mge"] if st["mge"] else policies

        def policy(kind: str) -> str | None:
            p = table.get(kind)
            return p(args, kwargs) if callable(p) else p

        args, kwargs = _cast_args(args, kwargs, policy, st)
        saved = st["cpu"], st["cuda"]
        st["cpu"] = st["cuda"] = None
        try:
            return fn(*args, **kwargs)
        finally:
            st["cpu"], st["cuda"] = saved

    wrapped._autocast_wrapped = True  # type: ignore[attr-defined]
    return wrapped


# CUDA's lists (used on every device in a MegEngine-style region)
_CUDA_LOWER = (
    "matmul",
    "mm",
    "bmm",
    "addmm",
    "baddbmm",
    "addbmm",
    "addmv",
    "mv",
    "linear",
    "conv1d",
    "conv2d",
    "conv_transpose1d",
    "conv_transpose2d",
    "scaled_dot_product_attention",
    "prelu",
)
_CUDA_FLOAT32 = (
    "softmax",
    "log_softmax",
    "layer_norm",
    "group_norm",
    "logsumexp",
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
    "softplus",
    "cosine_embedding_loss",
    "margin_ranking_loss",
    "soft_margin_loss",
    "triplet_margin_loss",
)
# the CPU's lists (PyTorch's AutocastCPU kernels, by ferrograd's names)
_CPU_LOWER = (
    "matmul",
    "mm",
    "bmm",
    "addmm",
    "baddbmm",
    "addbmm",
    "linear",
    "vecdot",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "scaled_dot_product_attention",
    "prelu",
)
_CPU_FLOAT32 = (
    "avg_pool3d",
    "max_pool3d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool3d",
    "fractional_max_pool2d",
    "fractional_max_pool3d",
    "max_unpool2d",
    "max_unpool3d",
    "grid_sample",
    "polar",
    "prod",
    "quantile",
    "nanquantile",
    "cdist",
    "trace",
    "cholesky",
    "cholesky_inverse",
    "cholesky_solve",
    "cholesky_ex",
    "inverse",
    "inv",
    "inv_ex",
    "lu_solve",
    "pinverse",
    "qr",
    "svd",
    "svdvals",
    "eigh",
    "eigvalsh",
    "lstsq",
    "solve",
    "cond",
    "matrix_rank",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "mse_loss",
    "cosine_embedding_loss",
    "nll_loss",
    "hinge_embedding_loss",
    "poisson_nll_loss",
    "smooth_l1_loss",
    "cross_entropy",
    "l1_loss",
    "huber_loss",
    "margin_ranking_loss",
    "soft_margin_loss",
    "triplet_margin_loss",
    "multi_margin_loss",
    "multilabel_margin_loss",
    "ctc_loss",
    "kl_div",
)
_CPU_PROMOTE = ("index_copy", "cat", "concat", "stack")


def _pad_policy(args: tuple, kwargs: dict) -> str | None:
    # reflection and replication padding are on the CPU's float32 list, constant is not
    mode = kwargs.get("mode", args[2] if len(args) > 2 else "constant")
    return "fp32" if mode in ("reflect", "replicate") else None


def _policies() -> dict:
    table: dict = {}
    for dev, names, policy in (
        ("cuda", _CUDA_LOWER, "lower"),
        ("cuda", _CUDA_FLOAT32, "fp32"),
        ("cpu", _CPU_LOWER, "lower"),
        ("cpu", _CPU_FLOAT32, "fp32"),
        ("cpu", _CPU_PROMOTE, "promote"),
    ):
        for name in names:
            table.setdefault(name, {})[dev] = policy
    table["pad"] = {"cpu": _pad_policy}
    for per_dev in table.values():
        cuda = per_dev.get("cuda")
        per_dev["mge"] = {"cpu": cuda, "cuda": cuda}
    return table


def _rnn_weights(orig: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(orig)
    def weights(self: Any, layer: int, d: int) -> tuple:
        ws = orig(self, layer, d)
        low = self.__dict__.get("_autocast_low")
        if low is None:
            return ws
        return tuple(w.astype(low) if isinstance(w, Tensor) else w for w in ws)

    return weights


def _rnn_forward(orig: Callable[..., Any]) -> Callable[..., Any]:
    """The LSTM and RNN modules in the CPU region's dtype (PyTorch runs them as one
    lower-precision op there): input, states and weights cast, the steps in that dtype."""

    @functools.wraps(orig)
    def forward(self: Any, input: Any, hx: Any = None) -> Any:
        st = _state()
        low = st["cpu"] if _active[0] and not st["mge"] else None
        if (
            low is None
            or self._mode == "GRU"
            or getattr(self, "proj_size", 0)
            or not isinstance(input, Tensor)
            or _kind(input) != "cpu"
            or input.dtype.name == "float64"
        ):
            return orig(self, input, hx)

        def cast(h: Any) -> Any:
            if isinstance(h, tuple):
                return tuple(cast(v) for v in h)
            return h.astype(low) if isinstance(h, Tensor) and h.dtype.kind == "f" else h

        self.__dict__["_autocast_low"] = low
        try:
            with autocast("cpu", enabled=False):
                return orig(self, cast(input), cast(hx))
        finally:
            del self.__dict__["_autocast_low"]

    return forward


def _checked_products(fn: Callable[..., Any], op: str, swap: bool = False) -> Callable[..., Any]:
    """``fn`` refusing float operands of different dtypes (``bfloat16 @ float32``), as
    PyTorch's products do outside autocast (inside it, the casts come first)."""

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        ts = [t for t in _tensors(args, kwargs) if t.dtype.kind == "f"]
        if len(ts) > 1 and any(t.dtype != ts[0].dtype for t in ts[1:]):
            first, other = (ts[1], ts[0]) if swap else (ts[0], ts[1])
            if other.dtype == first.dtype:  # a third operand (linear's bias) differs
                other = next(t for t in ts if t.dtype != first.dtype)
            raise DTypeError(
                f"{op}: expected m1 and m2 to have the same dtype, but got: "
                f"{first.dtype.name} != {other.dtype.name}"
            )
        return fn(*args, **kwargs)

    return checked


def _install() -> None:
    import ferrograd

    from . import linalg
    from .nn import extra
    from .nn import functional as F
    from .nn import modules as M

    for name in ("matmul", "mm", "bmm", "mv", "linear"):
        for ns in (ferrograd, F):
            fn = getattr(ns, name, None)
            if callable(fn):
                setattr(ns, name, _checked_products(fn, name))
        method = Tensor.__dict__.get(name)
        if callable(method):
            setattr(Tensor, name, _checked_products(method, name))
    Tensor.__matmul__ = _checked_products(Tensor.__matmul__, "matmul")
    Tensor.__rmatmul__ = _checked_products(Tensor.__rmatmul__, "matmul", swap=True)
    for name, policies in _policies().items():
        for ns in (ferrograd, F, linalg):
            fn = getattr(ns, name, None)
            if callable(fn) and not isinstance(fn, type):
                setattr(ns, name, _wrap(fn, policies))
        method = Tensor.__dict__.get(name)
        if callable(method):
            setattr(Tensor, name, _wrap(method, policies))
    matmul = _policies()["matmul"]
    Tensor.__matmul__ = _wrap(Tensor.__matmul__, matmul)
    Tensor.__rmatmul__ = _wrap(Tensor.__rmatmul__, matmul)
    from .nn import volumetric

    for mod, cls_name, fn_name in (
        (M, "Conv1d", "conv1d"),
        (M, "Conv2d", "conv2d"),
        (volumetric, "Conv3d", "conv3d"),
    ):
        cls = getattr(mod, cls_name, None)
        if cls is not None and "_conv" in cls.__dict__:
            cls._conv = staticmethod(getattr(F, fn_name))
    extra.RNNBase._weights = _rnn_weights(extra.RNNBase._weights)
    extra.RNNBase.forward = _rnn_forward(extra.RNNBase.forward)


# ------------------------------------------------------------------------- GradScaler


def _unscale_grads(tensors: list, inv: float | Tensor, check: bool) -> bool | Tensor:
    """Multiplies each tensor's ``.grad`` by ``inv`` in place; returns whether any holds
    inf or NaN (when ``check``). Gradients that are one memory (the same storage, shape and
    strides, as two parameters can get from one backward) are multiplied once.

    Inside ``fg.trace``, ``inv`` is a float32 0-d tensor (the reciprocal of the scale tensor)
    and the answer a bool 0-d tensor: the graph computes both on every call from that call's
    gradients, nothing is read on the host."""
    from . import _core
    from ._elementwise import isfinite
    from .autodiff import no_grad

    traced = _core._tracing()
    found: Any = False
    seen = set()
    with no_grad():
        for t in tensors:
            g = getattr(t, "grad", None)
            if g is None:
                continue
            if traced:
                key = (g._data_key, g.dtype.name)
            else:
                key = (g.data_ptr(), tuple(g.shape), tuple(g.stride()), g.dtype.name)
            if key not in seen:
                seen.add(key)
                if isinstance(inv, Tensor):
                    # rounded to the gradient's dtype first, as a Python number would be
                    g.mul_(inv.to(g.device).astype(g.dtype.name))
                else:
                    g.mul_(inv)
            if not check:
                continue
            if traced:
                bad = isfinite(g.detach()).all().logical_not().to(_scale_device(inv))
                found = bad if found is False else found.logical_or(bad)
            elif not found:
                found = not bool(np.isfinite(g.detach().numpy()).all())
    if traced and check and found is False:
        return _core.zeros((), dtype="bool", device=_scale_device(inv))
    return found


def _scale_device(inv: Any) -> Any:
    return inv.device if isinstance(inv, Tensor) else "cpu"


def _step_unless(found: Tensor, optimizer: Any, args: tuple, kwargs: dict) -> Any:
    """``optimizer.step(...)`` inside ``fg.trace`` where ``found`` (a bool 0-d tensor of
    this call) says whether a gradient held inf or NaN: the step runs, then every parameter
    with a gradient and its optimizer state take back their values from before it where
    ``found`` is true, so each call of the graph skips the step or not by its own data."""
    from . import _core
    from .autodiff import no_grad

    held: list[Tensor] = []
    for group in optimizer.param_groups:
        for p in group["params"]:
            if getattr(p, "grad", None) is None:
                continue
            held.append(p)
            state = optimizer.state.get(p, {}) if hasattr(optimizer, "state") else {}
            held.extend(v for v in state.values() if isinstance(v, Tensor))
    with no_grad():
        before = [t.detach().clone() for t in held]
    # what else the step writes (an EMA copy in a step hook) is put back as well: eagerly a
    # skipped step runs no hook at all
    _core._trace_guard_writes(True)
    try:
        out = optimizer.step(*args, **kwargs)
    finally:
        written = _core._trace_guard_writes(False)
    keys = {t._data_key for t in held}
    with no_grad():
        for t, old in zip(held, before):
            t.copy_(_core.where(found.to(t.device), old, t.detach()))
        for t, old in written:
            if t._data_key not in keys:
                t.copy_(_core.where(found.to(t.device), old, t.detach()))
    return out


class _Mirrored:
    """A GradScaler setting held as a Python number and written into the scaler's 0-d tensor
    ``tensor_attr`` (when it has one) whenever it is set, so that a traced step, which reads
    the tensor, follows changes made between calls."""

    def __init__(self, tensor_attr: str, cast: Callable[[Any], Any]) -> None:
        self.tensor_attr, self.cast = tensor_attr, cast

    def __set_name__(self, owner: type, name: str) -> None:
        self.value_attr = f"{name}_value"

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        return self if obj is None else obj.__dict__[self.value_attr]

    def __set__(self, obj: Any, value: Any) -> None:
        value = self.cast(value)
        obj.__dict__[self.value_attr] = value
        t = getattr(obj, self.tensor_attr)
        if t is not None:
            obj._write(t, value)


class GradScaler:
    """PyTorch's ``GradScaler``: ``scaler.scale(loss).backward()`` (or
    ``gm.backward(scaler.scale(loss))``), ``scaler.unscale_(opt)`` (before clipping),
    ``scaler.step(opt)`` (skipped when a gradient holds inf/NaN), ``scaler.update()``.

    It also has MegEngine's API: ``scaler.backward(gm, loss)`` (scaled backward, then
    :meth:`unscale` of the attached tensors' gradients and :meth:`update`),
    ``unscale(tensors)``, ``update(new_scale=None)`` and ``scale_factor``.
    ``growth_interval=0`` keeps the scale fixed (MegEngine's convention).

    ``enabled=False`` makes every method a pass-through. For ``device="cuda"`` without a
    usable CUDA device the scaler disables itself with a warning, as PyTorch's; MegEngine's
    methods, which have no device, turn such a scaler back on (they scale on any device)."""

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        kind = str(device).partition(":")[0]
        if enabled and kind == "cuda":
            from . import cuda

            if not cuda.is_available():
                warnings.warn(
                    "GradScaler is enabled, but CUDA is not available. Disabling.",
                    UserWarning,
                    stacklevel=2,
                )
                enabled = False
                self._no_cuda = True
        if growth_factor <= 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got {backoff_factor}")
        if growth_interval < 0:
            raise ValueError(f"GradScaler: growth_interval must be >= 0, got {growth_interval}")
        self._device, self._enabled = kind, bool(enabled)
        # the scale and the growth tracker as tensors too, made now so that a traced training
        # step captures them (it updates them in place on every call); once a trace has used
        # them they hold the values, else the Python numbers do (kept equal to them)
        self._scale_t: Tensor | None = None
        self._tracker_t: Tensor | None = None
        self._in_graph = False
        if self._enabled:
            from ._tensor import tensor

            self._scale_t = tensor(np.array(0.0, dtype=np.float32))
            self._tracker_t = tensor(np.array(0, dtype=np.int64))
            # the settings too, so that a traced update follows set_growth_factor() and the
            # like (and load_state_dict) without tracing again
            self._growth_t = tensor(np.array(0.0, dtype=np.float64))
            self._backoff_t = tensor(np.array(0.0, dtype=np.float64))
            self._interval_t = tensor(np.array(0, dtype=np.int64))
        # the scale is a float32 number, as PyTorch's (its growth stops below float32's max)
        self._scale = _f32(init_scale)
        self._scale_used = False  # scale() called (or a state loaded): update() may run
        self._mge_used = False  # MegEngine's methods used: update() needs no recorded step
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval, self._growth_tracker = int(growth_interval), 0
        self._per_opt: dict[int, dict] = {}
        self._found_non_finite = False

    _no_cuda = False
    _scale_t: Tensor | None = None
    _tracker_t: Tensor | None = None
    _growth_t: Tensor | None = None
    _backoff_t: Tensor | None = None
    _interval_t: Tensor | None = None
    _in_graph = False

    # the growth settings, kept as numbers and mirrored into 0-d tensors that a traced update
    # reads (see _Mirrored)
    _growth_factor = _Mirrored("_growth_t", float)
    _backoff_factor = _Mirrored("_backoff_t", float)
    _growth_interval = _Mirrored("_interval_t", int)

    @property
    def _scale(self) -> float:
        if self._in_graph and self._scale_t is not None:
            return float(self._scale_t.item())
        return self._scale_value

    @_scale.setter
    def _scale(self, value: float) -> None:
        self._scale_value = value
        if self._scale_t is not None:
            self._write(self._scale_t, value)

    @property
    def _growth_tracker(self) -> int:
        if self._in_graph and self._tracker_t is not None:
            return int(self._tracker_t.item())
        return self._tracker_value

    @_growth_tracker.setter
    def _growth_tracker(self, value: int) -> None:
        self._tracker_value = value
        if self._tracker_t is not None:
            self._write(self._tracker_t, value)

    @staticmethod
    def _write(t: Tensor, value: float) -> None:
        from . import _core
        from .autodiff import no_grad

        if _core._tracing():
            raise _core.TraceError(
                "GradScaler: the scale cannot be set from a Python number inside fg.trace "
                "(it would be fixed into every call); set it outside the traced function"
            )
        with no_grad():
            t.fill_(value)

    def _traced(self) -> bool:
        """Whether this call runs inside ``fg.trace``: the scale, the growth tracker and the
        inf checks are then tensors of the graph (see :meth:`_update_traced`)."""
        from . import _core

        if not _core._tracing():
            return False
        if self._scale_t is None:
            raise _core.TraceError(
                "GradScaler: a scaler made disabled and turned on later has no scale tensor "
                "for fg.trace; make it enabled"
            )
        self._in_graph = True
        return True

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_factor(self, new_factor: float) -> None:
        """Sets the factor the scale grows by (> 1); a traced step uses it from its next call."""
        if not float(new_factor) > 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1, got {new_factor}")
        self._growth_factor = float(new_factor)

    def set_backoff_factor(self, new_factor: float) -> None:
        """Sets the factor the scale shrinks by after inf/NaN gradients (in (0, 1))."""
        if not 0.0 < float(new_factor) < 1.0:
            raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got {new_factor}")
        self._backoff_factor = float(new_factor)

    def set_growth_interval(self, new_interval: int) -> None:
        """Sets how many clean steps in a row make the scale grow (0: never)."""
        if isinstance(new_interval, bool) or int(new_interval) != new_interval or new_interval < 0:
            raise ValueError(
                f"GradScaler: growth_interval must be an int >= 0, got {new_interval!r}"
            )
        self._growth_interval = int(new_interval)

    def scale(self, outputs: Any) -> Any:
        """``outputs`` (a tensor, or an iterable of them: a list or tuple gives one of the
        same type, another iterable a lazy ``map``) times the current scale. A float16 or
        bfloat16 tensor is scaled in float32 (the scaled loss would overflow float16), as
        PyTorch's."""
        if not self._enabled:
            return outputs
        self._scale_used = True
        if isinstance(outputs, Tensor):
            if outputs.dtype.name in _LOWER:
                outputs = outputs.astype("float32")
            if self._traced():
                return outputs * self._scale_t.to(outputs.device)
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if isinstance(outputs, Iterable) and not isinstance(outputs, (str, bytes)):
            return map(self._scale_one, outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def _scale_one(self, t: Any) -> Any:
        if not isinstance(t, Tensor):
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")  # noqa: TRY004  (PyTorch's type)
        return self.scale(t)

    def _opt_state(self, optimizer: Any) -> dict:
        return self._per_opt.setdefault(
            id(optimizer), {"unscaled": False, "found_inf": False, "stepped": False}
        )

    def unscale_(self, optimizer: Any) -> None:
        """Divides the gradients of ``optimizer``'s parameters by the scale (in place) and
        notes whether any holds inf or NaN. Once per optimizer between updates."""
        if not self._enabled:
            return
        st = self._opt_state(optimizer)
        if st["unscaled"]:
            raise RuntimeError(
                "unscale_() has already been called on this optimizer since the last update()."
            )
        if st["stepped"]:
            raise RuntimeError("unscale_() is being called after step().")
        params = [p for group in optimizer.param_groups for p in group["params"]]
        for p in params:
            g = getattr(p, "grad", None)
            if g is not None and g.dtype.name == "float16":
                # float16 gradients unscaled in place lose what the scale protected
                raise ValueError("Attempting to unscale FP16 gradients.")
        # the reciprocal rounded to float32 (also for float64 gradients), as PyTorch's
        if self._traced():
            inv: Any = (1.0 / self._scale_t.astype("float64")).astype("float32")
        else:
            inv = _f32(1.0 / self._scale)
        found = _unscale_grads(params, inv, check=True)
        st["unscaled"], st["found_inf"] = True, found

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """Unscales (unless :meth:`unscale_` did) and steps ``optimizer``, unless a gradient
        holds inf or NaN (then the step is skipped and None returned)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        st = self._opt_state(optimizer)
        if st["stepped"]:
            raise RuntimeError("step() has already been called since the last update().")
        if not st["unscaled"]:
            self.unscale_(optimizer)
        st["stepped"] = True
        if isinstance(st["found_inf"], Tensor):
            return _step_unless(st["found_inf"], optimizer, args, kwargs)
        if st["found_inf"]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Adapts the scale: times ``backoff_factor`` after a step with inf/NaN gradients,
        times ``growth_factor`` after ``growth_interval`` clean steps in a row (or sets
        ``new_scale``)."""
        if not self._enabled:
            return
        if not (self._scale_used or self._mge_used):
            raise AssertionError(
                "Attempted update but the scale was never used. This may indicate your script "
                "did not use scaler.scale(loss or outputs) earlier in the iteration."
            )
        if new_scale is not None:
            if self._traced():
                from .autodiff import no_grad

                with no_grad():
                    self._scale_t.copy_(_core_tensor(new_scale, self._scale_t))
            else:
                self._scale = _f32(new_scale.item() if isinstance(new_scale, Tensor) else new_scale)
        elif not self._mge_used and not any(st["unscaled"] for st in self._per_opt.values()):
            raise AssertionError("No inf checks were recorded prior to update.")
        elif self._traced():
            self._update_traced()
        elif self._growth_interval == 0:
            pass
        else:
            found = self._found_non_finite or any(st["found_inf"] for st in self._per_opt.values())
            if found:
                self._scale = _f32(self._scale * self._backoff_factor)
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    # the scale stays where growing would overflow float32, as PyTorch's
                    grown = _f32(self._scale * self._growth_factor)
                    if np.isfinite(grown):
                        self._scale = grown
                    self._growth_tracker = 0
        self._per_opt.clear()
        self._found_non_finite = False

    def _update_traced(self) -> None:
        """:meth:`update` as graph ops: the scale backs off where this call found inf/NaN,
        else the tracker counts the clean step and the scale grows after
        ``growth_interval`` of them (unless growing overflows float32), as eagerly."""
        from . import _core
        from ._elementwise import isfinite
        from .autodiff import no_grad

        s, n = self._scale_t, self._tracker_t
        dev = s.device
        found: Any = None
        for st in self._per_opt.values():
            f = st["found_inf"]
            if isinstance(f, Tensor):
                f = f.to(dev)
            elif f:
                f = _core.ones((), dtype="bool", device=dev)
            else:
                continue
            found = f if found is None else found.logical_or(f)
        if found is None:
            found = _core.zeros((), dtype="bool", device=dev)
        with no_grad():
            # in float64, then rounded once to float32, as the eager update's Python numbers
            wide = s.astype("float64")
            backed = (wide * self._backoff_t.to(dev)).astype("float32")
            grown = (wide * self._growth_t.to(dev)).astype("float32")
            grown = _core.where(isfinite(grown), grown, s)
            interval = self._interval_t.to(dev)
            count = n + 1
            due = count == interval
            zero = _core.zeros_like(n)
            new_s = _core.where(found, backed, _core.where(due, grown, s))
            new_n = _core.where(found, zero, _core.where(due, zero, count))
            # growth_interval 0 keeps the scale fixed (MegEngine's convention)
            fixed = interval == 0
            new_s = _core.where(fixed, s, new_s)
            new_n = _core.where(fixed, n, new_n)
            s.copy_(new_s)
            n.copy_(new_n)

    # -- MegEngine's API -----------------------------------------------------------------
    def _mge_on(self) -> bool:
        self._mge_used = True
        if self._no_cuda and not self._enabled:
            self._enabled = True
        return self._enabled

    @property
    def scale_factor(self) -> float:
        """The current scale (MegEngine's name for :meth:`get_scale`)."""
        return self._scale if (self._enabled or self._no_cuda) else 1.0

    @scale_factor.setter
    def scale_factor(self, value: float) -> None:
        self._scale = float(value)

    def backward(
        self,
        gm: Any,
        y: Any = None,
        dy: Any = None,
        *,
        unscale_grad: bool = True,
        update_scale: Any = "if_unscale_grad",
    ) -> None:
        """``gm.backward(y, dy)`` with ``dy`` (ones when omitted) times the scale; then, if
        ``unscale_grad``, :meth:`unscale` of ``gm``'s attached tensors and (when
        ``update_scale`` is true) :meth:`update`. Pass ``unscale_grad=False`` to accumulate
        scaled gradients over several batches and unscale once."""
        if not self._mge_on():
            gm.backward(y, dy)
            return
        from . import full_like

        ys = [] if y is None else list(y) if isinstance(y, (list, tuple)) else [y]
        if dy is None:
            dys = [full_like(t, self._scale) for t in ys]
        elif isinstance(dy, (list, tuple)):
            dys = [d * self._scale for d in dy]
        else:
            dys = [dy * self._scale]
        gm.backward(ys, dys)
        if unscale_grad:
            self.unscale(gm.attached_tensors())
            if update_scale:
                self.update()

    def unscale(self, grad_tensors: Any) -> GradScaler:
        """Divides the ``.grad`` of each tensor in ``grad_tensors`` by the scale, in place.
        If any of them holds inf or NaN, all of their gradients are set to None (the step
        is skipped: optimizers pass over parameters without a gradient) and the next
        :meth:`update` lowers the scale. With ``growth_interval=0`` nothing is checked."""
        if not self._mge_on():
            return self
        from . import _core

        if _core._tracing():
            raise _core.TraceError(
                "GradScaler.unscale: dropping the gradients when one holds inf or NaN decides "
                "on their values, which fg.trace cannot; in a traced step use "
                "scaler.scale(loss), scaler.unscale_(opt), scaler.step(opt), scaler.update()"
            )
        tensors = [
            t for t in grad_tensors if t is not None and getattr(t, "grad", None) is not None
        ]
        found = _unscale_grads(tensors, _f32(1.0 / self._scale), check=self._growth_interval > 0)
        if found:
            self._found_non_finite = True
            for t in tensors:
                t.grad = None
        return self

    def state_dict(self) -> dict:
        if not self._enabled:
            return {}
        return {
            "scale": self._scale,
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._growth_tracker,
        }

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError(
                "The source state dict is empty, possibly because it was saved from a disabled "
                "instance of GradScaler."
            )
        self._scale = _f32(state_dict["scale"])
        self._scale_used = True
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])


def _core_tensor(value: Any, like: Tensor) -> Tensor:
    """``value`` (a number or a tensor) as a 0-d tensor of ``like``'s dtype and device."""
    if isinstance(value, Tensor):
        return value.reshape(()).to(like.device).astype(like.dtype.name)
    from ._tensor import tensor

    return tensor(np.array(_f32(value), dtype=np.float32), device=like.device)


def _f32(x: Any) -> float:
    """``x`` rounded to float32 (the precision of PyTorch's scale)."""
    with np.errstate(over="ignore"):
        return float(np.float32(x))


def custom_fwd(
    fwd: Callable[..., Any] | None = None, *, device_type: str = "cuda", cast_inputs: Any = None
) -> Any:
    """Decorator for a custom function's forward: with ``cast_inputs``, inside an autocast
    region its float inputs are cast to that dtype and autocast is off within it."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        kind = str(device_type).partition(":")[0]
        if cast_inputs is None or not is_autocast_enabled(kind):
            return fwd(*args, **kwargs)
        from ._tensor import _dtype_name

        name = _dtype_name(cast_inputs)

        def cast(x: Any) -> Any:
            if isinstance(x, Tensor) and x.dtype.kind == "f" and _kind(x) == kind:
                return x.astype(name)
            return x

        with autocast(kind, enabled=False):
            return fwd(*(cast(a) for a in args), **{k: cast(v) for k, v in kwargs.items()})

    return wrapped


def custom_bwd(bwd: Callable[..., Any] | None = None, *, device_type: str = "cuda") -> Any:
    """Decorator for a custom function's backward (runs it as it is)."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    return bwd


sys.modules[__name__].__class__ = _AmpModule
