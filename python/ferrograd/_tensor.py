"""Building tensors from Python data."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._core import Tensor

float32 = np.dtype("float32")
float64 = np.dtype("float64")
int64 = np.dtype("int64")
bool_ = np.dtype("bool")

_SUPPORTED = ("float32", "float64", "int64", "bool")


def _dtype_name(dtype: Any) -> str:
    try:
        name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    except TypeError:
        raise TypeError(f"tensor: unsupported dtype {dtype!r}") from None
    aliases = {"float": "float32", "double": "float64", "int": "int64", "long": "int64"}
    name = aliases.get(name, name)
    if name not in _SUPPORTED:
        raise TypeError(
            f"tensor: unsupported dtype {name!r}; expected one of {', '.join(_SUPPORTED)}"
        )
    return name


def _default_dtype(arr: np.ndarray, from_python: bool) -> str:
    kind = arr.dtype.kind
    if kind == "f":
        # Python floats become float32; numpy keeps float32/float64 (float16 widens)
        if from_python or arr.dtype.itemsize < 4:
            return "float32"
        return arr.dtype.name if arr.dtype.name in _SUPPORTED else "float64"
    if kind in "iu":
        return "int64"
    if kind == "b":
        return "bool"
    raise TypeError(
        f"tensor: unsupported data of numpy dtype {arr.dtype}; expected numbers or booleans"
    )


def tensor(data: Any, dtype: Any = None, device: str | None = None) -> Tensor:
    """A new tensor holding a copy of ``data``.

    ``data`` may be a Tensor, a numpy array, a nested list or a Python scalar. float64 numpy
    data stays float64; Python floats become float32, Python ints int64, bools bool.
    """
    if isinstance(data, Tensor):
        arr = data.numpy()
        from_python = False
    elif isinstance(data, (np.ndarray, np.generic)):
        arr = np.asarray(data)
        from_python = False
    else:
        try:
            arr = np.asarray(data)
        except (ValueError, TypeError) as e:
            raise TypeError(
                f"tensor: cannot build a tensor from {type(data).__name__}: {e}"
            ) from None
        from_python = True
    name = _dtype_name(dtype) if dtype is not None else _default_dtype(arr, from_python)
    if arr.dtype.name != name:
        arr = arr.astype(name)
    if not arr.flags.c_contiguous:
        arr = np.array(arr, order="C")
    return Tensor._from_numpy(arr, device)
