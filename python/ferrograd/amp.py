"""Mixed precision with PyTorch's API: :class:`autocast` and :class:`GradScaler`.

Inside ``autocast(device_type, dtype)`` the products (``@``, ``matmul``, ``mm``, ``bmm``,
``addmm``, ``baddbmm``, ``linear``, ``conv1d``/``conv2d``, ``conv_transpose1d``/``2d``,
``scaled_dot_product_attention``) of float tensors on that device run in ``dtype``
(``bfloat16`` by default on the CPU, ``float16`` on CUDA): their float inputs are cast,
recorded like any op, so gradients of float32 parameters stay float32. Softmax, layer and
group norm, ``logsumexp`` and the losses run in float32 (their half inputs are cast up).
Other ops follow type promotion. This is PyTorch's CUDA policy, used on both devices.

:class:`GradScaler` multiplies the loss by a scale so float16 gradients do not underflow,
unscales the gradients before the optimizer step, skips steps whose gradients hold inf or
NaN and adapts the scale (PyTorch's algorithm and defaults)."""

from __future__ import annotations

import functools
import sys
import threading
import types
import warnings
from typing import Any, Callable

import numpy as np

from ._core import Tensor

__all__ = [
    "GradScaler",
    "autocast",
    "custom_bwd",
    "custom_fwd",
    "get_autocast_dtype",
    "is_autocast_available",
    "is_autocast_enabled",
]

_LOWER = ("float16", "bfloat16")
_DEFAULT_DTYPE = {"cpu": "bfloat16", "cuda": "float16"}
_active = [0]  # autocast regions entered in any thread (the wrappers' fast path)
_local = threading.local()


def _state() -> dict:
    st = getattr(_local, "state", None)
    if st is None:
        st = _local.state = {"cpu": None, "cuda": None}
    return st


def is_autocast_available(device_type: str) -> bool:
    return device_type in ("cpu", "cuda")


def get_autocast_dtype(device_type: str) -> Any:
    """The dtype autocast uses on ``device_type`` now (its default outside a region)."""
    from ._tensor import _dtype_name

    name = _state().get(device_type) or _DEFAULT_DTYPE.get(device_type, "bfloat16")
    import ferrograd

    return getattr(ferrograd, _dtype_name(name))


def is_autocast_enabled(device_type: str | None = None) -> bool:
    st = _state()
    if device_type is None:
        return st["cuda"] is not None
    return st.get(device_type) is not None


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
        name = _DEFAULT_DTYPE[kind] if dtype is None else _dtype_name(dtype)
        if enabled and name not in _LOWER:
            raise ValueError(
                f"autocast: dtype must be float16 or bfloat16, got {name} (use enabled=False "
                "to run in full precision)"
            )
        self.device_type, self.fast_dtype, self._enabled = kind, name, bool(enabled)

    def __enter__(self) -> Any:
        st = _state()
        if self.device_type is None:
            if not self._enabled:
                self._prev.append(None)
                return self
            cfg = _mge_config()
            self._prev.append((dict(st), dict(cfg)))
            st["cpu"] = st["cuda"] = self.fast_dtype
            cfg["low"], cfg["high"] = self.low_prec_dtype, self.high_prec_dtype
        else:
            self._prev.append(st[self.device_type])
            st[self.device_type] = self.fast_dtype if self._enabled else None
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
            _state()[self.device_type] = prev
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


def _cast_lower(x: Any, st: dict) -> Any:
    if isinstance(x, Tensor) and x.dtype.kind == "f":
        target = st.get(_kind(x))
        if target is not None and x.dtype.name != target:
            return x.astype(target)
    return x


def _cast_float32(x: Any, st: dict) -> Any:
    if isinstance(x, Tensor) and x.dtype.name in _LOWER and st.get(_kind(x)) is not None:
        return x.astype("float32")
    return x


def _wrap(fn: Callable[..., Any], cast: Callable[[Any, dict], Any]) -> Callable[..., Any]:
    if getattr(fn, "_autocast_wrapped", False):
        return fn

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if not _active[0]:
            return fn(*args, **kwargs)
        st = _state()
        if st["cpu"] is None and st["cuda"] is None:
            return fn(*args, **kwargs)
        args = tuple(cast(a, st) for a in args)
        kwargs = {k: cast(v, st) for k, v in kwargs.items()}
        return fn(*args, **kwargs)

    wrapped._autocast_wrapped = True  # type: ignore[attr-defined]
    return wrapped


_LOWER_OPS = (
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
_FLOAT32_OPS = (
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


def _install() -> None:
    import ferrograd

    from .nn import functional as F
    from .nn import modules as M

    for names, cast in ((_LOWER_OPS, _cast_lower), (_FLOAT32_OPS, _cast_float32)):
        for name in names:
            for ns in (ferrograd, F):
                fn = getattr(ns, name, None)
                if callable(fn):
                    setattr(ns, name, _wrap(fn, cast))
            method = Tensor.__dict__.get(name)
            if callable(method):
                setattr(Tensor, name, _wrap(method, cast))
    Tensor.__matmul__ = _wrap(Tensor.__matmul__, _cast_lower)
    Tensor.__rmatmul__ = _wrap(Tensor.__rmatmul__, _cast_lower)
    for cls_name, fn_name in (("Conv1d", "conv1d"), ("Conv2d", "conv2d")):
        cls = getattr(M, cls_name, None)
        if cls is not None and "_conv" in cls.__dict__:
            cls._conv = staticmethod(getattr(F, fn_name))


# ------------------------------------------------------------------------- GradScaler


def _unscale_grads(tensors: list, inv: float, check: bool) -> bool:
    """Multiplies each tensor's ``.grad`` by ``inv`` in place; returns whether any holds
    inf or NaN (when ``check``). Gradients that are one memory (the same storage, shape and
    strides, as two parameters can get from one backward) are multiplied once."""
    from .autodiff import no_grad

    found, seen = False, set()
    with no_grad():
        for t in tensors:
            g = getattr(t, "grad", None)
            if g is None:
                continue
            key = (g.data_ptr(), tuple(g.shape), tuple(g.stride()), g.dtype.name)
            if key not in seen:
                seen.add(key)
                g.mul_(inv)
            if check and not found:
                found = not bool(np.isfinite(g.detach().numpy()).all())
    return found


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
        self._scale = float(init_scale)
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval, self._growth_tracker = int(growth_interval), 0
        self._per_opt: dict[int, dict] = {}
        self._found_non_finite = False

    _no_cuda = False

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

    def scale(self, outputs: Any) -> Any:
        """``outputs`` (a tensor, or lists/tuples of them) times the current scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError("GradScaler.scale: outputs must be a Tensor or an iterable of Tensors")

    def _opt_state(self, optimizer: Any) -> dict:
        return self._per_opt.setdefault(id(optimizer), {"unscaled": False, "found_inf": False})

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
        params = [p for group in optimizer.param_groups for p in group["params"]]
        found = _unscale_grads(params, 1.0 / self._scale, check=True)
        st["unscaled"], st["found_inf"] = True, found

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """Unscales (unless :meth:`unscale_` did) and steps ``optimizer``, unless a gradient
        holds inf or NaN (then the step is skipped and None returned)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        st = self._opt_state(optimizer)
        if not st["unscaled"]:
            self.unscale_(optimizer)
        if st["found_inf"]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Adapts the scale: times ``backoff_factor`` after a step with inf/NaN gradients,
        times ``growth_factor`` after ``growth_interval`` clean steps in a row (or sets
        ``new_scale``)."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if isinstance(new_scale, Tensor) else new_scale)
        elif self._growth_interval == 0:
            pass
        else:
            found = self._found_non_finite or any(st["found_inf"] for st in self._per_opt.values())
            if found:
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._per_opt.clear()
        self._found_non_finite = False

    # -- MegEngine's API -----------------------------------------------------------------
    def _mge_on(self) -> bool:
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
        tensors = [
            t for t in grad_tensors if t is not None and getattr(t, "grad", None) is not None
        ]
        found = _unscale_grads(tensors, 1.0 / self._scale, check=self._growth_interval > 0)
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
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])


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
