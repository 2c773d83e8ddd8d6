"""What PyTorch scripts reach for besides ops and layers, so they port by renaming:
``Tensor.device`` as a ``device`` object, ``Tensor.__index__`` / ``__format__``, the typed
tensor constructors (``fg.FloatTensor``, ...), ``fg.accelerator``, ``fg.compile``, thread and
determinism settings, ``Tensor.apply_`` / ``map_``."""

from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np

from . import _core
from ._core import Tensor
from ._torch_compat import device

__all__ = [
    "BFloat16Tensor",
    "BoolTensor",
    "ByteTensor",
    "CharTensor",
    "DoubleTensor",
    "FloatTensor",
    "HalfTensor",
    "IntTensor",
    "LongTensor",
    "ShortTensor",
    "are_deterministic_algorithms_enabled",
    "compile",
    "e",
    "get_float32_matmul_precision",
    "get_num_threads",
    "inf",
    "nan",
    "newaxis",
    "pi",
    "set_float32_matmul_precision",
    "set_num_threads",
    "set_printoptions",
    "use_deterministic_algorithms",
]

# ------------------------------------------------------------------------ Tensor.device

_rust_device = Tensor.device  # the engine's getter: the device's name
_devices: dict[str, device] = {}


def _device_of(self: Tensor) -> device:
    name = _rust_device.__get__(self)
    d = _devices.get(name)
    if d is None:
        d = _devices[name] = device(name)
    return d


# ------------------------------------------------------------------ __index__, __format__


def _index(self: Tensor) -> int:
    """A one-element integer tensor used as a Python index (``lst[t]``, ``range(t)``)."""
    if self.dtype.kind not in "iu" or self.numel() != 1:
        raise TypeError(
            "only integer tensors of a single element can be converted to an index, got "
            f"a {self.dtype} tensor of shape {tuple(self.shape)}"
        )
    return int(self.item())


def _format(self: Tensor, spec: str) -> str:
    """``f"{t:.4f}"``: a 0-d tensor formats as its number (as PyTorch's); others as their
    ``str`` (only an empty spec)."""
    if self.ndim == 0:
        return format(self.item(), spec)
    return object.__format__(self, spec)


# ------------------------------------------------------------------- typed constructors


def _legacy_tensor(args: tuple, dtype: Any, device: Any) -> Tensor:
    """What ``fg.Tensor(*args, dtype=None, device=None)`` builds: MegEngine's
    ``Tensor(data, dtype, device)`` (as ``fg.tensor``), PyTorch's ``Tensor(d0, d1, ...)``
    (one or more sizes: zeros of the default float dtype) or ``Tensor()`` (empty)."""
    from ._ops import zeros
    from ._tensor import default_float, tensor

    def is_size(a: Any) -> bool:
        return isinstance(a, (int, np.integer)) and not isinstance(a, bool)

    if not args:
        return zeros(0, dtype=dtype or default_float(), device=device)
    # one int is PyTorch's size too (`nn.Parameter(torch.Tensor(out_features))`), not
    # MegEngine's 0-d tensor of that value (`fg.tensor(3)` makes that one); with a dtype it is
    # MegEngine's (`Tensor(3, dtype="int32")`: PyTorch's constructor takes no dtype)
    if len(args) == 1 and is_size(args[0]) and dtype is not None:
        return tensor(args[0], dtype=dtype, device=device)
    if len(args) >= 1 and all(is_size(a) for a in args):
        return zeros(*[int(a) for a in args], dtype=dtype or default_float(), device=device)
    if len(args) > 3:
        raise TypeError(
            f"Tensor: expected (data, dtype=None, device=None) or sizes, got {len(args)} arguments"
        )
    data = args[0]
    if len(args) > 1:
        if dtype is not None:
            raise TypeError("Tensor: dtype given twice")
        dtype = args[1]
    if len(args) > 2:
        if device is not None:
            raise TypeError("Tensor: device given twice")
        device = args[2]
    t = tensor(data, dtype=dtype, device=device)
    if dtype is None and not isinstance(data, Tensor) and t.dtype.name == "float64":
        # float data becomes the default float dtype (PyTorch's and MegEngine's
        # constructors both make float64 arrays float32); integers keep MegEngine's int
        t = t.astype(default_float())
    return t


def _typed(name: str, dtype: str, on: str | None = None) -> type:
    """A legacy typed-tensor class; ``on="cuda"`` for ``torch.cuda.FloatTensor`` and its
    kin (made there, and ``isinstance`` true only for tensors on that kind of device)."""

    def new(cls: type, *args: Any, device: Any = None) -> Tensor:
        from ._ops import zeros
        from ._tensor import tensor

        if device is None:
            device = on

        if not args:
            return zeros(0, dtype=dtype, device=device)
        if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
            return zeros(*[int(a) for a in args], dtype=dtype, device=device)
        if len(args) == 1:
            data = args[0]
            if isinstance(data, Tensor):
                return data.astype(dtype)
            return tensor(data, dtype=dtype, device=device)
        raise TypeError(f"{name}: expected sizes (ints) or one sequence of data, got {args!r}")

    doc = (
        f"PyTorch's legacy ``torch.{name}``: ``{name}(data)`` is ``fg.tensor(data, "
        f"dtype={dtype})``, ``{name}(*sizes)`` a zero-filled tensor of that shape; also the "
        f"argument of ``x.type({name})``. ``isinstance(t, {name})`` is true for {dtype} tensors."
    )

    class _Meta(type):
        def __instancecheck__(cls, obj: Any) -> bool:
            if on is not None and not (isinstance(obj, Tensor) and obj.device.startswith(on)):
                return False
            return isinstance(obj, Tensor) and obj.dtype == dtype

    return _Meta(
        name, (), {"__new__": new, "__doc__": doc, "dtype": dtype, "_torch_name": name, "_on": on}
    )


FloatTensor = _typed("FloatTensor", "float32")
DoubleTensor = _typed("DoubleTensor", "float64")
HalfTensor = _typed("HalfTensor", "float16")
BFloat16Tensor = _typed("BFloat16Tensor", "bfloat16")
LongTensor = _typed("LongTensor", "int64")
IntTensor = _typed("IntTensor", "int32")
ShortTensor = _typed("ShortTensor", "int16")
CharTensor = _typed("CharTensor", "int8")
ByteTensor = _typed("ByteTensor", "uint8")
BoolTensor = _typed("BoolTensor", "bool")


# --------------------------------------------------------------------- apply_, map_


def _apply_(self: Tensor, callable: Callable[[Any], Any]) -> Tensor:
    """Replaces every element ``v`` by ``callable(v)`` in place (a Python call per element,
    CPU tensors only, as PyTorch's)."""
    if str(self.device) != "cpu":
        raise TypeError("apply_: only CPU tensors (PyTorch's rule)")
    vals = self.detach().numpy()
    out = np.vectorize(callable, otypes=[vals.dtype])(vals) if vals.size else vals
    from ._tensor import tensor

    self.copy_(tensor(np.asarray(out, dtype=vals.dtype), dtype=self.dtype.name))
    return self


def _map_(self: Tensor, other: Tensor, callable: Callable[[Any, Any], Any]) -> Tensor:
    """``self[i] = callable(self[i], other[i])`` in place (``other`` broadcast to ``self``;
    CPU tensors only)."""
    if str(self.device) != "cpu":
        raise TypeError("map_: only CPU tensors (PyTorch's rule)")
    a = self.detach().numpy()
    b = np.broadcast_to(
        other.detach().numpy() if isinstance(other, Tensor) else np.asarray(other), a.shape
    )
    out = np.vectorize(callable, otypes=[a.dtype])(a, b) if a.size else a
    from ._tensor import tensor

    self.copy_(tensor(np.asarray(out, dtype=a.dtype), dtype=self.dtype.name))
    return self


def _map2_(self: Tensor, x: Tensor, y: Tensor, callable: Callable[[Any, Any, Any], Any]) -> Tensor:
    """``self[i] = callable(self[i], x[i], y[i])`` in place (``x`` and ``y`` broadcast to
    ``self``; CPU tensors only), PyTorch's three-operand :meth:`map_`."""
    if str(self.device) != "cpu":
        raise TypeError("map2_: only CPU tensors (PyTorch's rule)")
    a = self.detach().numpy()
    b, c = (
        np.broadcast_to(t.detach().numpy() if isinstance(t, Tensor) else np.asarray(t), a.shape)
        for t in (x, y)
    )
    out = np.vectorize(callable, otypes=[a.dtype])(a, b, c) if a.size else a
    from ._tensor import tensor

    self.copy_(tensor(np.asarray(out, dtype=a.dtype), dtype=self.dtype.name))
    return self


def _reversed(self: Tensor) -> Tensor:
    """``reversed(t)``: ``t`` flipped along its first axis (a 0-d tensor as it is), so that
    iterating over it gives the rows last to first, as PyTorch's ``__reversed__``."""
    return self if self.ndim == 0 else self.flip(0)


def _dim_order(self: Tensor) -> tuple:
    """The axes from outermost to innermost in memory: sorted by stride, largest first
    (ties keep their order), as PyTorch's ``Tensor.dim_order()``."""
    strides = self.stride()
    return tuple(sorted(range(self.ndim), key=lambda i: -strides[i]))


# ------------------------------------------------------------------ process settings

inf = float("inf")
nan = float("nan")
pi = 3.141592653589793
e = 2.718281828459045
newaxis = None

_matmul_precision = ["highest"]


def set_float32_matmul_precision(precision: str) -> None:
    """Accepted for PyTorch scripts ("highest", "high", "medium"): ferrograd's float32
    products always compute in float32 (never TF32 or bfloat16 passes)."""
    if precision not in ("highest", "high", "medium"):
        raise ValueError(
            f"set_float32_matmul_precision: expected 'highest', 'high' or 'medium', got "
            f"{precision!r}"
        )
    _matmul_precision[0] = precision


def get_float32_matmul_precision() -> str:
    return _matmul_precision[0]


_deterministic = {"on": False, "warn_only": False}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Accepted for PyTorch scripts. ferrograd's kernels are deterministic already: the same
    inputs give the same bits on every run (fixed reduction orders, no atomics in CUDA
    gradients), so there is nothing to switch."""
    _deterministic["on"] = bool(mode)
    _deterministic["warn_only"] = bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    return _deterministic["on"]


def get_num_threads() -> int:
    """How many threads CPU kernels use."""
    return int(_core._num_threads())


def set_num_threads(n: int) -> None:
    """Sets how many threads CPU kernels use (``n >= 1``): the engine's worker pool, which
    the BLAS library behind large products follows. The pool is made on first use, so this
    sizes it when called before any computation (at the top of a script); afterwards the
    pool keeps its size and a ``UserWarning`` says so."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"set_num_threads: n must be a positive int, got {n!r}")
    got = int(_core._set_num_threads(int(n)))
    if got != n:
        warnings.warn(
            f"set_num_threads: the worker pool was already made with {got} threads, so "
            f"{n} cannot be set now (call set_num_threads before any computation)",
            UserWarning,
            stacklevel=2,
        )


def set_printoptions(
    precision: int | None = None,
    threshold: int | None = None,
    edgeitems: int | None = None,
    linewidth: int | None = None,
    profile: str | None = None,
    sci_mode: bool | None = None,
) -> None:
    """How tensors print (numpy's print options underneath, which ``repr`` uses)."""
    opts: dict = {}
    if profile == "default":
        opts.update(precision=4, threshold=1000, edgeitems=3, linewidth=80)
    elif profile == "short":
        opts.update(precision=2, threshold=1000, edgeitems=2, linewidth=80)
    elif profile == "full":
        opts.update(precision=4, threshold=np.inf, edgeitems=3, linewidth=80)
    elif profile is not None:
        raise ValueError(f"set_printoptions: unknown profile {profile!r}")
    for k, v in (
        ("precision", precision),
        ("threshold", threshold),
        ("edgeitems", edgeitems),
        ("linewidth", linewidth),
    ):
        if v is not None:
            opts[k] = v
    if sci_mode is not None:
        opts["suppress"] = not sci_mode
    np.set_printoptions(**opts)


def compile(model: Any = None, **kwargs: Any) -> Any:
    """``torch.compile``'s spelling: returns ``model`` (a module or function) unchanged, so
    it runs eagerly with the same results; for a whole training step compiled into one graph
    run in Rust, use :func:`ferrograd.trace`. Usable as ``@fg.compile`` and
    ``@fg.compile(mode=...)``."""
    if model is None:
        return lambda m: m
    if not callable(model):
        raise TypeError(f"compile: expected a module or a function, got {type(model).__name__}")
    return model


_rust_numpy = Tensor.numpy


def _numpy(self: Tensor, *, force: bool = False) -> np.ndarray:
    """The values as a numpy array. For a CPU tensor of a dtype numpy stores, the array is
    a view of the tensor's own memory, as PyTorch's: its strides and offset are the
    tensor's, writes on either side show on the other (writes through the array bypass
    autodiff's in-place checks, as any shared memory does) and it keeps the tensor alive;
    memory shared read-only with another library gives a read-only array. Other tensors
    (CUDA, bfloat16, values inside ``fg.trace``) give a copy, or the error that explains
    why there is none. ``force`` is accepted for PyTorch scripts.

    A tensor that requires grad (PyTorch refuses ``numpy()`` there, MegEngine copies) gives a
    copy: writes through a shared array would change values autodiff saved without its
    knowing (``t.detach().numpy()`` shares, as in PyTorch)."""
    if self.requires_grad:
        return _rust_numpy(self)
    array = _shared_numpy(self)
    return array if array is not None else _rust_numpy(self)


class _MemoryOwner:
    """Hands numpy a tensor's memory through ``__array_interface__`` and keeps that memory
    alive as the array's base (through an alias of the tensor, so the memory outlives a
    later ``set_`` or ``Module.to`` that gives the tensor itself new memory)."""

    def __init__(self, alias: Tensor, interface: dict) -> None:
        self.alias = alias
        self.__array_interface__ = interface


def _shared_numpy(t: Tensor, read_only: bool = False) -> np.ndarray | None:
    """A numpy view over a CPU tensor's memory (read-only where asked, or where the memory
    is shared read-only with another library), or None where there can be none."""
    from ._ops import _is_read_only_memory
    from ._tensor import _TYPESTR

    typestr = _TYPESTR.get(str(t.dtype))
    if typestr is None or str(_rust_device.__get__(t)) != "cpu":
        return None
    try:
        address, _, offset, strides = _core._host_memory(t)
    except (ValueError, RuntimeError, TypeError):  # a value inside fg.trace
        return None
    interface = {
        "version": 3,
        "shape": tuple(t.shape),
        "typestr": typestr,
        "data": (address + offset, read_only or _is_read_only_memory(address)),
        "strides": tuple(strides),
    }
    return np.asarray(_MemoryOwner(t.detach(), interface))


def _accepts_dtype(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``softmax(x, dim, dtype=...)``: the input cast to ``dtype`` first (PyTorch's)."""
    import functools

    @functools.wraps(fn)
    def wrapped(*args: Any, dtype: Any = None, **kwargs: Any) -> Any:
        if dtype is not None and args and isinstance(args[0], Tensor):
            from ._tensor import _dtype_name

            args = (args[0].astype(_dtype_name(dtype)), *args[1:])
        return fn(*args, **kwargs)

    return wrapped


def _implicit_dim(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``F.softmax(x)`` without ``dim``: PyTorch's deprecated implicit choice (axis 0 for 0-,
    1- and 3-D inputs, else axis 1), with its warning."""
    import functools
    import warnings

    @functools.wraps(fn)
    def wrapped(
        input: Any, dim: Any = None, _stacklevel: int = 3, dtype: Any = None, **kwargs: Any
    ) -> Any:
        if dim is None and "axis" not in kwargs and isinstance(input, Tensor):
            warnings.warn(
                f"Implicit dimension choice for {name} has been deprecated. Change the call "
                "to include dim=X as an argument.",
                UserWarning,
                stacklevel=2,
            )
            dim = 0 if input.ndim in (0, 1, 3) else 1
        if dim is not None:
            kwargs["dim"] = dim
        return fn(input, dtype=dtype, **kwargs)

    return wrapped


def _new(self: Tensor, *args: Any) -> Tensor:
    """PyTorch's legacy ``x.new(...)``: ``new(d0, d1, ...)`` zeros of this dtype and device,
    ``new(data)`` the data as this dtype on this device, ``new()`` an empty one."""
    from ._ops import zeros
    from ._tensor import tensor

    if not args:
        return zeros(0, dtype=self.dtype.name, device=self.device)
    if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
        return zeros(*[int(a) for a in args], dtype=self.dtype.name, device=self.device)
    if len(args) == 1:
        return tensor(args[0], dtype=self.dtype.name, device=self.device)
    raise TypeError(f"new: expected sizes or one sequence of data, got {args!r}")


def _int64_index(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``index_select(x, dim, index)`` with an int32 index, read as int64 (PyTorch takes
    int32 and int64 indices; narrower ones are refused by the op)."""
    import functools

    @functools.wraps(fn)
    def wrapped(input: Any, dim: Any, index: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(index, Tensor) and index.dtype == "int32":
            index = index.astype("int64")
        return fn(input, dim, index, *args, **kwargs)

    return wrapped


def _none_means_unchanged(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``Tensor.to`` as PyTorch's: a positional ``None`` (``t.to(device)`` where ``device``
    is ``None``, as performer-pytorch's random projections pass it) changes nothing (the
    dtype parser read it as NumPy's default dtype and cast to float64), and a call that
    changes nothing returns the tensor itself (a Parameter stays that Parameter, so
    ``module.w = module.w.to(device)`` keeps it registered)."""
    import functools

    @functools.wraps(fn)
    def to(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        if any(a is None for a in args):
            args = tuple(a for a in args if a is not None)
        out = fn(self, *args, **kwargs)
        if out.dtype == self.dtype and out._data_key == self._data_key:
            return self
        return out

    return to


def _self_if_unchanged(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A conversion (``cpu``, ``float``, ``type(dtype)``, ...) that changes nothing returns
    the tensor itself, as PyTorch's (``p.float() is p`` for a float32 Parameter)."""
    import functools

    @functools.wraps(fn)
    def convert(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        out = fn(self, *args, **kwargs)
        if isinstance(out, Tensor) and out.dtype == self.dtype and out._data_key == self._data_key:
            return self
        return out

    return convert


_CONVERSIONS = (
    "cpu", "float", "double", "half", "bfloat16", "long", "int", "short", "bool", "byte",
    "char", "type", "type_as",
)  # fmt: skip


def _install() -> None:
    import ferrograd

    from .nn import functional as F

    for name in ("softmax", "log_softmax"):
        for ns in (ferrograd, F):
            fn = getattr(ns, name, None)
            if callable(fn):
                setattr(ns, name, _accepts_dtype(fn))
        method = Tensor.__dict__.get(name)
        if callable(method):
            setattr(Tensor, name, _accepts_dtype(method))
        setattr(F, name, _implicit_dim(getattr(F, name), name))
    ferrograd.index_select = _int64_index(ferrograd.index_select)
    Tensor.index_select = _int64_index(Tensor.index_select)
    Tensor.new = _new
    Tensor.numpy = _numpy
    Tensor.to = _none_means_unchanged(Tensor.to)
    for name in _CONVERSIONS:
        method = getattr(Tensor, name, None)
        if callable(method):
            setattr(Tensor, name, _self_if_unchanged(method))
    Tensor.device = property(_device_of, doc="The device the tensor lives on (``fg.device``).")
    Tensor.__index__ = _index
    Tensor.__format__ = _format
    Tensor.apply_ = _apply_
    Tensor.map_ = _map_
    Tensor.map2_ = _map2_
    Tensor.__reversed__ = _reversed
    Tensor.dim_order = _dim_order
    Tensor.is_cpu = property(lambda self: _rust_device.__get__(self) == "cpu")


_install()


# ---------------------------------------------------------------- torch._foreach_* ops


def _foreach_args(op: str, tensors: Any, other: Any) -> tuple[list, list]:
    ts = list(tensors)
    if isinstance(other, (list, tuple)):
        others = list(other)
        if len(others) != len(ts):
            raise ValueError(f"{op}: {len(ts)} tensors but {len(others)} operands")
    else:
        others = [other] * len(ts)
    return ts, others


def _make_foreach_binary(name: str, fn: Callable[[Any, Any], Any]) -> tuple:
    def out_of_place(tensors: Any, other: Any, *, alpha: Any = 1) -> list:
        ts, os_ = _foreach_args(f"_foreach_{name}", tensors, other)
        return [fn(t, o if alpha == 1 else o * alpha) for t, o in zip(ts, os_)]

    def in_place(tensors: Any, other: Any, *, alpha: Any = 1) -> None:
        ts, os_ = _foreach_args(f"_foreach_{name}_", tensors, other)
        for t, o in zip(ts, os_):
            # the tensor's own in-place op, which keeps what its gradient needs (a copy_ of
            # fn's result left ``mul`` a saved input overwritten: backward then raised)
            getattr(t, f"{name}_")(o if alpha == 1 else o * alpha)

    out_of_place.__name__, in_place.__name__ = f"_foreach_{name}", f"_foreach_{name}_"
    doc = f"PyTorch's ``torch._foreach_{name}``: ``{name}`` of each tensor of a list"
    out_of_place.__doc__ = doc + " (new tensors)."
    in_place.__doc__ = doc + " (in place)."
    return out_of_place, in_place


def _make_foreach_unary(name: str) -> tuple:
    def out_of_place(tensors: Any) -> list:
        return [getattr(t, name)() for t in tensors]

    def in_place(tensors: Any) -> None:
        for t in tensors:
            getattr(t, f"{name}_")()

    out_of_place.__name__, in_place.__name__ = f"_foreach_{name}", f"_foreach_{name}_"
    return out_of_place, in_place


_foreach_add, _foreach_add_ = _make_foreach_binary("add", lambda a, b: a + b)
_foreach_sub, _foreach_sub_ = _make_foreach_binary("sub", lambda a, b: a - b)
_foreach_mul, _foreach_mul_ = _make_foreach_binary("mul", lambda a, b: a * b)
_foreach_div, _foreach_div_ = _make_foreach_binary("div", lambda a, b: a / b)
_foreach_sqrt, _foreach_sqrt_ = _make_foreach_unary("sqrt")
_foreach_neg, _foreach_neg_ = _make_foreach_unary("neg")
_foreach_abs, _foreach_abs_ = _make_foreach_unary("abs")
_foreach_exp, _foreach_exp_ = _make_foreach_unary("exp")


def _foreach_lerp_(tensors: Any, ends: Any, weight: Any) -> None:
    """Each ``t`` moved to ``lerp(t, end, weight)`` in place (``torch._foreach_lerp_``,
    with :func:`lerp`'s two forms)."""
    from ._torch_compat import _lerp_forms

    ts, es = _foreach_args("_foreach_lerp_", tensors, ends)
    ws = list(weight) if isinstance(weight, (list, tuple)) else [weight] * len(ts)
    for t, e, w in zip(ts, es, ws):
        t.copy_(_lerp_forms(t, e, w))


def _foreach_lerp(tensors: Any, ends: Any, weight: Any) -> list:
    from ._torch_compat import _lerp_forms

    ts, es = _foreach_args("_foreach_lerp", tensors, ends)
    ws = list(weight) if isinstance(weight, (list, tuple)) else [weight] * len(ts)
    return [_lerp_forms(t, e, w) for t, e, w in zip(ts, es, ws)]


def _foreach_addcmul_(tensors: Any, t1: Any, t2: Any, value: Any = 1) -> None:
    for t, a, b in zip(tensors, t1, t2):
        t.copy_(t + value * a * b)


def _foreach_addcdiv_(tensors: Any, t1: Any, t2: Any, value: Any = 1) -> None:
    for t, a, b in zip(tensors, t1, t2):
        t.copy_(t + value * a / b)


def _foreach_zero_(tensors: Any) -> None:
    for t in tensors:
        t.zero_()


def _foreach_copy_(tensors: Any, src: Any) -> None:
    for t, s in zip(tensors, src):
        t.copy_(s)


def _foreach_norm(tensors: Any, ord: Any = 2) -> list:
    from .linalg import vector_norm

    return [vector_norm(t, ord) for t in tensors]


__all__ += [name for name in list(globals()) if name.startswith("_foreach_")]
