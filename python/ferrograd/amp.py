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
import threading
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
    """``with autocast(device_type, dtype=None, enabled=True, cache_enabled=None):`` (also a
    decorator). See the module's notes for what runs in which precision."""

    def __init__(
        self,
        device_type: str,
        dtype: Any = None,
        enabled: bool = True,
        cache_enabled: bool | None = None,
    ) -> None:
        from ._tensor import _dtype_name

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
        self._prev: list = []

    def __enter__(self) -> Any:
        st = _state()
        self._prev.append(st[self.device_type])
        st[self.device_type] = self.fast_dtype if self._enabled else None
        _active[0] += 1
        return self

    def __exit__(self, *exc: object) -> None:
        _state()[self.device_type] = self._prev.pop()
        _active[0] -= 1

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with autocast(self.device_type, self.fast_dtype, self._enabled):
                return fn(*args, **kwargs)

        return wrapped


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


class GradScaler:
    """PyTorch's ``GradScaler``: ``scaler.scale(loss).backward()`` (or
    ``gm.backward(scaler.scale(loss))``), ``scaler.unscale_(opt)`` (before clipping),
    ``scaler.step(opt)`` (skipped when a gradient holds inf/NaN), ``scaler.update()``.

    ``enabled=False`` makes every method a pass-through. For ``device="cuda"`` without a
    usable CUDA device the scaler disables itself with a warning, as PyTorch's."""

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
        if growth_factor <= 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got {backoff_factor}")
        if growth_interval < 1:
            raise ValueError(f"GradScaler: growth_interval must be >= 1, got {growth_interval}")
        self._device, self._enabled = kind, bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval, self._growth_tracker = int(growth_interval), 0
        self._per_opt: dict[int, dict] = {}

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
        inv = 1.0 / self._scale
        found = False
        from .autodiff import no_grad

        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if not found and not bool(np.isfinite(g.detach().numpy()).all()):
                        found = True
                    g.mul_(inv)
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
        else:
            found = any(st["found_inf"] for st in self._per_opt.values())
            if found:
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._per_opt.clear()

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
