"""Building tensors from Python data."""

from __future__ import annotations

import collections.abc
from typing import Any

import numpy as np

from . import _core
from ._core import Tensor


class dtype:
    """A tensor's element type, as PyTorch's ``torch.dtype``: ``ferrograd.float32`` ...
    ``ferrograd.bool``, one object per type (``t.dtype is fg.float32``). It equals, and hashes
    as, the numpy dtype of the same name (and so its name and numpy's scalar type), numpy takes
    it wherever it takes a dtype (``np.zeros(n, dtype=t.dtype)``, through its ``dtype``
    attribute), and numpy's attributes read through (``kind``, ``itemsize``, ``type``, ``char``).
    PyTorch's ``is_floating_point``, ``is_complex`` and ``is_signed`` are attributes.
    ``bfloat16``, which numpy lacks, is a float kind of two bytes equal to ``ml_dtypes``'."""

    __slots__ = ("_np", "is_complex", "is_floating_point", "is_signed", "itemsize", "kind", "name")

    def __init__(self, name: str) -> None:
        set_ = object.__setattr__
        np_dtype = None if name == "bfloat16" else np.dtype(name)
        set_(self, "name", name)
        set_(self, "_np", np_dtype)
        set_(self, "kind", "f" if np_dtype is None else np_dtype.kind)
        set_(self, "itemsize", 2 if np_dtype is None else np_dtype.itemsize)
        set_(self, "is_floating_point", self.kind == "f")
        set_(self, "is_complex", False)
        set_(self, "is_signed", self.kind in "fi")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"dtype {self.name}: attributes are read-only")

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype (how numpy reads this object as a dtype)."""
        if self._np is None:
            try:
                import ml_dtypes

                return np.dtype(ml_dtypes.bfloat16)
            except ImportError:
                raise TypeError("bfloat16: numpy has no bfloat16 (install ml_dtypes)") from None
        return self._np

    def __getattr__(self, name: str) -> Any:
        np_dtype = object.__getattribute__(self, "_np")
        if np_dtype is None or name.startswith("__"):
            raise AttributeError(f"dtype bfloat16 has no attribute {name!r}")
        return getattr(np_dtype, name)

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if isinstance(other, dtype):
            return other.name == self.name
        if other is None:
            return False
        if self._np is None:
            return other == "bfloat16" or getattr(other, "name", None) == "bfloat16"
        if isinstance(other, str) and other in _ALIASES:
            return _ALIASES[other] == self.name
        try:
            return bool(self._np == np.dtype(other))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash("bfloat16") if self._np is None else hash(self._np)

    def __repr__(self) -> str:
        return f"dtype('{self.name}')"

    def __str__(self) -> str:
        return self.name

    def __reduce__(self) -> tuple:
        return (_dtype_named, (self.name,))

    def to_real(self) -> dtype:
        """This dtype (PyTorch's: the real counterpart of a complex dtype)."""
        return self


def _dtype_named(name: str) -> dtype:
    """The dtype object called ``name`` (how pickles of dtypes load)."""
    return _DTYPES[name]


_ALIASES = {
    "float": "float32",
    "double": "float64",
    "int": "int64",
    "long": "int64",
    "short": "int16",
    "half": "float16",
    "bf16": "bfloat16",
}

# every dtype a tensor can have
_SUPPORTED = (
    "float32",
    "float64",
    "int64",
    "bool",
    "float16",
    "bfloat16",
    "int32",
    "int16",
    "int8",
    "uint8",
)

_DTYPES = {n: dtype(n) for n in _SUPPORTED}

float32 = _DTYPES["float32"]
float64 = _DTYPES["float64"]
int64 = _DTYPES["int64"]
bool_ = _DTYPES["bool"]
float16 = _DTYPES["float16"]
int32 = _DTYPES["int32"]
int16 = _DTYPES["int16"]
int8 = _DTYPES["int8"]
uint8 = _DTYPES["uint8"]
bfloat16 = _DTYPES["bfloat16"]
_BFloat16 = dtype  # (the class a bfloat16 dtype was before every dtype had one)
_DTYPE_CLASS = dtype

# numpy dtype kinds that are not numbers or booleans: object, str, bytes, void, datetime,
# timedelta, complex. Such data never becomes a tensor, whatever dtype is asked for (numpy
# would turn None into NaN and any non-empty string into True).
_NOT_NUMERIC = {
    "O": "Python objects",
    "U": "strings",
    "S": "bytes",
    "V": "raw bytes (void)",
    "M": "datetimes",
    "m": "timedeltas",
    "c": "complex numbers",
}

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _dtype_name(dtype: Any) -> str:
    if type(dtype) is _DTYPE_CLASS:
        return dtype.name
    if isinstance(dtype, type) and hasattr(dtype, "_torch_name"):  # fg.FloatTensor, ...
        return dtype.dtype
    try:
        name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    except TypeError:
        raise TypeError(f"tensor: unsupported dtype {dtype!r}") from None
    name = _ALIASES.get(name, name)
    if name not in _SUPPORTED:
        raise TypeError(
            f"tensor: unsupported dtype {name!r}; expected one of {', '.join(_SUPPORTED)}"
        )
    return name


# the dtype of Python floats and of float factories without a dtype (set_default_dtype)
_DEFAULT_FLOAT = ["float32"]


def default_float() -> str:
    """The default float dtype's name (``float32`` unless :func:`set_default_dtype`)."""
    return _DEFAULT_FLOAT[0]


def get_default_dtype() -> dtype:
    """The dtype Python floats and float factories give when no dtype is asked (PyTorch's
    ``get_default_dtype``; float32 at start)."""
    return _DTYPES[_DEFAULT_FLOAT[0]]


def set_default_dtype(d: Any) -> None:
    """Sets the dtype of Python floats in ``tensor``, of float factories (``zeros``,
    ``randn``, ``arange`` with floats, ...) and of new layers' parameters when they are given
    no dtype: float32, float64, float16 or bfloat16 (PyTorch's ``set_default_dtype``)."""
    name = _dtype_name(d)
    if name not in ("float32", "float64", "float16", "bfloat16"):
        raise TypeError(f"set_default_dtype: only floating-point dtypes are allowed, got {name}")
    _DEFAULT_FLOAT[0] = name
    _core._set_default_float(name)  # (ints meeting floats in ops, int true division, sin(int))


def _default_dtype(arr: np.ndarray, from_python: bool) -> str:
    kind = arr.dtype.kind
    if kind == "f":
        # Python floats take the default float dtype; numpy keeps float16/bfloat16/32/64
        if from_python:
            return _DEFAULT_FLOAT[0]
        return arr.dtype.name if arr.dtype.name in _SUPPORTED else "float64"
    if kind in "iu":
        # numpy keeps int32, int16, int8 and uint8; other integers become int64
        return arr.dtype.name if arr.dtype.name in _SUPPORTED else "int64"
    if kind == "b":
        return "bool"
    raise TypeError(
        f"tensor: unsupported data of numpy dtype {arr.dtype}; expected numbers or booleans"
    )


def _short(data: Any) -> str:
    r = repr(data)
    return r if len(r) <= 80 else r[:77] + "..."


def _out_of_int64(value: int) -> OverflowError:
    return OverflowError(f"tensor: the int {value} is out of range for int64")


def _from_objects(arr: np.ndarray, data: Any, name: str | None) -> np.ndarray:
    """An object array from Python data: ints beyond int64 (numpy's only reason to make one
    from numbers) become the float dtype asked for (float32 when mixed with Python floats),
    and raise OverflowError otherwise."""
    big = None
    has_float = False
    for v in arr.flat:
        if isinstance(v, (bool, np.bool_)):
            continue
        if isinstance(v, int):
            if not _INT64_MIN <= v <= _INT64_MAX and big is None:
                big = v
            continue
        if isinstance(v, (float, np.floating)):
            has_float = True
            continue
        if isinstance(v, np.integer):
            continue
        raise TypeError(
            f"tensor: cannot build a tensor from {_short(data)}: it holds a "
            f"{type(v).__name__} ({_short(v)}); expected numbers or booleans"
        )
    if big is None:  # pragma: no cover - numpy makes an object array only for big ints
        raise TypeError(f"tensor: cannot build a tensor from {_short(data)}")
    if name is None and has_float:
        name = "float32"  # floats and big ints: float data, as Python floats give float32
    if name is None or name in ("int64", "bool"):
        raise _out_of_int64(big)
    try:
        return arr.astype(name)
    except OverflowError:
        raise OverflowError(f"tensor: the int {big} is out of range for {name}") from None


def _check_int_promotion(arr: np.ndarray, data: Any) -> None:
    """numpy reads Python ints of which some are beyond int64 (``[1, 2**63]``) as float64:
    raise OverflowError for such data, as for a single big int, instead of rounding it."""
    if not arr.size or not np.abs(arr).max() >= 2.0**63:
        return
    values = list(np.asarray(data, dtype=object).flat)
    if any(isinstance(v, (float, np.floating)) for v in values):
        return  # float data with large values
    for v in values:
        if isinstance(v, int) and not _INT64_MIN <= v <= _INT64_MAX:
            raise _out_of_int64(v)


def _is_foreign_tensor(x: Any) -> bool:
    """Whether ``x`` is a PyTorch tensor (or Parameter): read through its own methods, as
    numpy cannot read one that requires grad or is bfloat16."""
    return (
        not isinstance(x, Tensor)
        and type(x).__module__.split(".")[0] == "torch"
        and hasattr(x, "detach")
        and hasattr(x, "dtype")
    )


def _foreign_dtype(x: Any) -> str | None:
    """A PyTorch tensor's dtype as ferrograd names it (None for dtypes it does not store)."""
    name = str(x.dtype).rsplit(".", 1)[-1]
    return name if name in _SUPPORTED else None


def _foreign_to_numpy(x: Any) -> np.ndarray:
    """A PyTorch tensor's values, detached (``torch.tensor``'s reading of one that requires
    grad), on the host; bfloat16 as float32 (exact: every bfloat16 is a float32)."""
    x = x.detach()
    if getattr(x, "device", None) is not None and str(x.device) != "cpu":
        x = x.cpu()
    if _foreign_dtype(x) == "bfloat16":
        x = x.float()
    for resolve in ("resolve_conj", "resolve_neg"):
        if hasattr(x, resolve):
            x = getattr(x, resolve)()
    return x.numpy()


def _element_dtype(e: Any) -> str | None:
    """The dtype an element of a list gives ``tensor`` (PyTorch's reading): a numpy scalar
    or array, or a tensor, keeps its own; None for Python data and anything else."""
    if isinstance(e, Tensor):
        return e.dtype.name
    if _is_foreign_tensor(e):
        return _foreign_dtype(e)
    if isinstance(e, (np.generic, np.ndarray)):
        name = e.dtype.name
        if name in _SUPPORTED:
            return name
        if e.dtype.kind in "iu":
            return "int64"
        if e.dtype.kind == "f":
            return "float64"
    return None


_PYTHON_NUMBERS = {float: "float", int: "int", bool: "bool"}


def _scan(data: Any, found: dict) -> None:
    """Collects the kinds of Python data (``"float"``, ``"int"``, ``"bool"``) and the dtypes
    of other elements (numpy scalars, tensors) in nested lists and tuples, into ``found``."""
    kinds = set(map(type, data))  # (one pass in C: most lists hold Python numbers only)
    if kinds <= _PYTHON_NUMBERS.keys():
        for t in kinds:
            found[_PYTHON_NUMBERS[t]] = True
        return
    for e in data:
        t = type(e)
        if t is float:
            found["float"] = True
        elif t is int:
            found["int"] = True
        elif t is bool:
            found["bool"] = True
        elif t is list or t is tuple:
            _scan(e, found)
        else:
            name = _element_dtype(e)
            if name is not None:
                found.setdefault("dtypes", set()).add(name)
                if isinstance(e, Tensor) or _is_foreign_tensor(e):
                    found["tensors"] = True
            elif isinstance(e, float):
                found["float"] = True
            elif isinstance(e, int) and not isinstance(e, bool):
                found["int"] = True


_FLOAT_RANK = {"float16": 1, "bfloat16": 1, "float32": 2, "float64": 3}


def _promote_listed(found: dict) -> str | None:
    """PyTorch's dtype for a list holding numpy scalars or tensors: the promotion of the
    elements' dtypes, where Python floats count as the default float dtype, Python ints as
    int64 and bools as bool (float16 with bfloat16 gives float32, ints with floats the
    float dtype); None when the list holds only Python data."""
    names = set(found.get("dtypes", ()))
    if not names:
        return None
    if found.get("float"):
        names.add(_DEFAULT_FLOAT[0])
    if found.get("int"):
        names.add("int64")
    if found.get("bool"):
        names.add("bool")
    floats = {n for n in names if n in _FLOAT_RANK}
    if floats:
        if len(floats) == 1:
            return floats.pop()
        if floats == {"float16", "bfloat16"}:
            return "float32"
        return max(floats, key=lambda n: _FLOAT_RANK[n])
    ints = [n for n in names if n != "bool"]
    if ints:
        out = np.dtype(ints[0])
        for n in ints[1:]:
            out = np.promote_types(out, np.dtype(n))
        return out.name if out.name in _SUPPORTED else "int64"
    return "bool"


def _listed_to_numpy(data: Any) -> Any:
    """Nested lists with the tensors in them read as numpy arrays (detached; bfloat16 as
    float32), so numpy can read the whole."""
    if isinstance(data, (list, tuple)):
        return [_listed_to_numpy(e) for e in data]
    if isinstance(data, Tensor):
        d = data.detach()
        return (d.float() if d.dtype.name == "bfloat16" else d).numpy()
    if _is_foreign_tensor(data):
        return _foreign_to_numpy(data)
    return data


def tensor(
    data: Any, dtype: Any = None, device: str | None = None, requires_grad: bool = False
) -> Tensor:
    """A new tensor holding a copy of ``data`` (see :func:`_tensor`); with
    ``requires_grad=True`` a leaf whose gradient ``backward()`` fills in."""
    t = _tensor(data, dtype, device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _tensor(data: Any, dtype: Any = None, device: str | None = None) -> Tensor:
    """A new tensor holding a copy of ``data``.

    ``data`` may be a Tensor, a numpy array, anything numpy reads as an array (an object with
    ``__array__``, such as a torch tensor or a pandas series, or with the buffer protocol,
    such as ``memoryview`` or ``array.array``), a nested list or a Python scalar. Array data
    keeps its dtype (float64 stays float64; other ints become int64); Python floats become
    float32, Python ints int64, bools bool. Ints beyond int64 raise ``OverflowError`` unless
    a float dtype is asked for; strings, ``None``, complex numbers, datetimes and other
    non-numeric data raise ``TypeError``.
    """
    name = _dtype_name(dtype) if dtype is not None else None
    if _is_foreign_tensor(data):
        # a PyTorch tensor (a Parameter too): its values, detached, in its own dtype
        # (other dtypes, such as uint16, as numpy reads them)
        return _tensor(_foreign_to_numpy(data), name or _foreign_dtype(data), device)
    if (
        not isinstance(data, (Tensor, np.ndarray))
        and hasattr(data, "__dlpack__")
        and hasattr(data, "__dlpack_device__")
        and not hasattr(data, "__array__")
    ):
        # an object that offers only DLPack (a JAX array or CuPy array wrapper): read
        # through it, as PyTorch's tensor() does, rather than as a Python object
        from ._ops import from_dlpack

        data = from_dlpack(data)
    if (
        isinstance(data, collections.abc.Sequence)
        and not isinstance(data, (list, tuple, str, bytes, bytearray, memoryview, range, Tensor))
        and not hasattr(data, "__array__")
        and not hasattr(data, "__buffer__")
        and type(data).__module__ != "array"
    ):
        # other Python sequences (a deque, a UserList) are read as lists, as PyTorch does:
        # Python floats in them become float32, not numpy's float64
        data = list(data)
    found: dict = {}
    if isinstance(data, (list, tuple)) and data:
        # numpy scalars and tensors in a list keep their dtypes (PyTorch's promotion)
        _scan(data, found)
        if name is None:
            name = _promote_listed(found)
    if (
        isinstance(data, (list, tuple))
        and data
        and all(isinstance(e, Tensor) for e in data)
        and all(e.numel() == 1 for e in data)
        and any(e.ndim > 0 for e in data)
    ):
        # PyTorch reads one-element tensors in a list as numbers: [t1, t2] (each of shape
        # (1,)) gives shape (2,), not numpy's (2, 1)
        data = np.stack(
            [
                np.asarray(
                    e.detach().float().numpy() if e.dtype.name == "bfloat16" else e.detach().numpy()
                ).reshape(())
                for e in data
            ]
        )
    if found.get("tensors") and isinstance(data, (list, tuple)):
        data = _listed_to_numpy(data)  # (detached; bfloat16 read as float32)
    if isinstance(data, Tensor) and "bfloat16" in (name, data.dtype.name):
        # (numpy may have no bfloat16): a copy made by the engine
        out = data.detach().astype(name or "bfloat16").copy()
        return out.to(device) if device is not None else out
    if isinstance(data, Tensor):
        arr = data.numpy()
        from_python = False
    else:
        # only Python data (lists, tuples, scalars) gets the Python defaults; anything else
        # numpy can read keeps its own dtype
        from_python = isinstance(data, (list, tuple, int, float, bool)) and not isinstance(
            data, np.generic
        )
        try:
            arr = np.asarray(data)
        except (ValueError, TypeError, OverflowError) as e:
            raise TypeError(
                f"tensor: cannot build a tensor from {type(data).__name__}: {e}"
            ) from None
    kind = arr.dtype.kind
    if arr.dtype.name == "bfloat16":  # ml_dtypes' (a void kind to numpy): read as float32
        return _tensor(arr.astype(np.float32), name or "bfloat16", device)
    if kind == "O" and from_python:
        arr = _from_objects(arr, data, name)
    elif kind == "f" and from_python and name in (None, "int64", "bool"):
        _check_int_promotion(arr, data)
    elif kind in _NOT_NUMERIC:
        raise TypeError(
            f"tensor: cannot build a tensor from {_short(data)}: numpy reads it as "
            f"{_NOT_NUMERIC[kind]} (dtype {arr.dtype}); expected numbers or booleans"
        )
    if name is None:
        name = _default_dtype(arr, from_python)
    if name == "int64" and arr.dtype.kind == "u" and arr.size and arr.max() > _INT64_MAX:
        raise _out_of_int64(int(arr.max()))
    if name == "bfloat16" and arr.dtype.name != "bfloat16":
        return _tensor(arr, "float32", device).astype("bfloat16")
    if arr.dtype.name != name:
        arr = arr.astype(name)
    if not arr.flags.c_contiguous:
        arr = np.array(arr, order="C")
    return Tensor._from_numpy(arr, device)


def _install_casts() -> None:
    """PyTorch's dtype shorthands on ``Tensor``: ``x.float()`` is ``x.astype("float32")``."""

    def cast(name: str, dtype: str) -> Any:
        def method(self: Tensor, memory_format: Any = None) -> Tensor:
            return self.astype(dtype)  # (every tensor is row-major: memory_format is moot)

        method.__name__ = name
        method.__doc__ = f"The tensor as {dtype} (itself when it already is)."
        return method

    for name, dtype in {
        "float": "float32",
        "double": "float64",
        "half": "float16",
        "bfloat16": "bfloat16",
        "long": "int64",
        "int": "int32",
        "short": "int16",
        "char": "int8",
        "byte": "uint8",
        "bool": "bool",
    }.items():
        if name not in Tensor.__dict__:
            setattr(Tensor, name, cast(name, dtype))


_install_casts()


class _Size(int):
    """``x.size``: the number of elements (numpy's property) that is also PyTorch's
    method: ``x.size()`` is the shape, ``x.size(d)`` the length of axis ``d``."""

    _shape: tuple

    def __call__(self, dim: Any = None) -> Any:
        if dim is None:
            from ._torch_more import Size

            return Size(self._shape)  # PyTorch's torch.Size (a tuple)
        n = len(self._shape)
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
            raise TypeError(f"size: dim must be an int, got {type(dim).__name__}")
        if not -n <= dim < n:
            raise IndexError(f"size: dim {dim} is out of range for a tensor with {n} axes")
        return self._shape[dim]


def _install_shape_methods() -> None:
    """PyTorch's ``dim()``, ``numel()``, ``mT`` and ``size()`` next to numpy's ``ndim`` and
    ``size``."""
    numel_of = Tensor.size  # the engine's property: the number of elements

    def size(self: Tensor) -> _Size:
        out = _Size(numel_of.__get__(self))
        out._shape = tuple(self.shape)
        return out

    def dim(self: Tensor) -> int:
        """The number of axes (``ndim``)."""
        return self.ndim

    def numel(self: Tensor) -> int:
        """The number of elements."""
        return int(numel_of.__get__(self))

    def mT(self: Tensor) -> Tensor:
        """The last two axes swapped (a view)."""
        if self.ndim == 0:
            return self  # PyTorch's identity on a 0-d tensor (deprecated there)
        if self.ndim < 2:
            raise _core.ShapeError(
                "tensor.mT is only supported on matrices or batches of matrices. "
                f"Got {self.ndim}-D tensor."
            )
        axes = list(range(self.ndim))
        axes[-2], axes[-1] = axes[-1], axes[-2]
        return self.permute(*axes)

    Tensor.size = property(size, doc=_Size.__doc__)
    for name, fn in {"dim": dim, "numel": numel, "nelement": numel}.items():
        if name not in Tensor.__dict__:
            setattr(Tensor, name, fn)
    if "mT" not in Tensor.__dict__:
        Tensor.mT = property(mT)


_install_shape_methods()


# numpy's typestr of each dtype whose memory numpy can read as is (not bfloat16)
_TYPESTR = {name: np.dtype(name).str for name in _SUPPORTED if name != "bfloat16"}


def _install_array_interface() -> None:
    """``np.asarray(t)`` of a CPU tensor without a copy: a read-only numpy view of the
    tensor's memory, so numpy code cannot change a value that autodiff saved for backward
    behind its back (``t.numpy()`` is the writable view). The view keeps the memory alive
    through an alias of the tensor, so it stays valid after a ``set_`` or ``Module.to``
    gives the tensor new memory. Another dtype, ``copy=True``, CUDA and bfloat16 tensors
    and values inside ``fg.trace`` take the engine's copying ``__array__`` (which raises
    where there can be no copy)."""
    engine_array = Tensor.__array__

    def __array__(self: Tensor, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if copy is not True and (dtype is None or np.dtype(dtype).name == str(self.dtype)):
            from ._porting import _shared_numpy

            view = _shared_numpy(self, read_only=True)
            if view is not None:
                return view
        return engine_array(self, dtype=dtype, copy=copy)

    Tensor.__array__ = __array__


_install_array_interface()


# ------------------------------------------------------------- DLPack helpers (bfloat16)
# (used by ``from_dlpack``, ``Tensor.__dlpack__`` and ``as_tensor``)

_KDL_BFLOAT = 4  # DLPack's type code of bfloat16 (bits 16, lanes 1)


class _Capsule:
    """A DLPack capsule (``torch.utils.dlpack.to_dlpack(t)``) as an object with
    ``__dlpack__``, which ``np.from_dlpack`` reads: the capsule is consumed once."""

    def __init__(self, capsule: Any) -> None:
        self.capsule = capsule

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, **kw: Any) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # (numpy checks the capsule's own device)


def _is_capsule(x: Any) -> bool:
    return type(x).__name__ == "PyCapsule"


def _capsule_name(capsule: Any) -> str:
    """A capsule's name: ``"dltensor"`` / ``"dltensor_versioned"`` before a consumer takes
    it, ``"used_dltensor"`` / ``"used_dltensor_versioned"`` after."""
    import ctypes

    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    name = api.PyCapsule_GetName(capsule)
    return name.decode() if name is not None else ""


def _retag_bfloat16(capsule: Any) -> Any:
    """Marks a DLPack capsule of 16-bit unsigned ints (bfloat16's bits) as bfloat16, in
    place (the struct is the producer's, not yet consumed)."""
    import ctypes

    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    name = api.PyCapsule_GetName(capsule)
    ptr = api.PyCapsule_GetPointer(capsule, name)
    # DLManagedTensorVersioned: version (8), manager_ctx (8), deleter (8), flags (8), then
    # the DLTensor; DLManagedTensor starts with it. DLTensor: data (8), device (8), ndim
    # (4), then dtype {code u8, bits u8, lanes u16}
    dl_tensor = ptr + (32 if name == b"dltensor_versioned" else 0)
    code = ctypes.c_uint8.from_address(dl_tensor + 20)
    bits = ctypes.c_uint8.from_address(dl_tensor + 21)
    if code.value != 1 or bits.value != 16:  # pragma: no cover - numpy's own export
        raise BufferError("__dlpack__: cannot export bfloat16 data")
    code.value = _KDL_BFLOAT
    return capsule


def _bfloat16_bits(t: Tensor) -> np.ndarray:
    """A read-only uint16 array over a CPU bfloat16 tensor's memory (its bits), keeping the
    tensor alive."""
    addr, _, offset, strides = _core._host_memory(t)

    class _Bits:
        pass

    holder = _Bits()
    holder.__array_interface__ = {  # type: ignore[attr-defined]
        "version": 3,
        "shape": tuple(t.shape),
        "typestr": "<u2",
        "data": (addr + offset, True),
        "strides": tuple(strides),
    }
    holder.tensor = t  # type: ignore[attr-defined]
    return np.asarray(holder)


def _dlpack_bfloat16(t: Tensor, stream: Any, max_version: Any, copy: Any) -> Any:
    """A DLPack capsule (type code kDLBfloat) of a CPU bfloat16 tensor: shared (read-only
    mark) with a DLPack 1.0 consumer, a copy for an older one or with ``copy=True``."""
    bits = _bfloat16_bits(t)
    if copy is True or max_version is None:
        bits = np.array(bits)
    if max_version is not None:
        try:
            return _retag_bfloat16(bits.__dlpack__(stream=stream, max_version=max_version))
        except TypeError:
            pass
    return _retag_bfloat16(bits.__dlpack__(stream=stream))


def _shared_bfloat16(ext: Any) -> np.ndarray | None:
    """An ml_dtypes bfloat16 array over a PyTorch bfloat16 CPU tensor's memory (numpy reads
    no bfloat16 through DLPack, so its bits are read as int16); None when not one."""
    if not _is_foreign_tensor(ext) or _foreign_dtype(ext) != "bfloat16":
        return None
    try:
        import ml_dtypes
        import torch
    except ImportError:  # pragma: no cover - torch is there (ext is its tensor)
        return None
    if getattr(ext, "requires_grad", False) or str(ext.device) != "cpu":
        return None
    return np.from_dlpack(ext.view(torch.int16)).view(ml_dtypes.bfloat16)
