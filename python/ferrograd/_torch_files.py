"""Reading files written by ``torch.save`` (PyTorch's zip format) without PyTorch: the
pickle is read with an allow-list (tensors, parameters, ``OrderedDict``, sizes, devices,
dtypes and plain Python values, as ``torch.load(weights_only=True)``), tensors are rebuilt
from their storages as ferrograd tensors."""

from __future__ import annotations

import io
import pickle
import zipfile
from collections import OrderedDict
from typing import Any

import numpy as np

# storage class name -> (numpy dtype of the raw bytes, ferrograd dtype)
_STORAGES = {
    "FloatStorage": ("float32", "float32"),
    "DoubleStorage": ("float64", "float64"),
    "HalfStorage": ("float16", "float16"),
    "BFloat16Storage": ("uint16", "bfloat16"),
    "LongStorage": ("int64", "int64"),
    "IntStorage": ("int32", "int32"),
    "ShortStorage": ("int16", "int16"),
    "CharStorage": ("int8", "int8"),
    "ByteStorage": ("uint8", "uint8"),
    "BoolStorage": ("bool", "bool"),
}
_DTYPES = {
    "float32": "float32",
    "float": "float32",
    "float64": "float64",
    "double": "float64",
    "float16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "int64": "int64",
    "long": "int64",
    "int32": "int32",
    "int": "int32",
    "int16": "int16",
    "short": "int16",
    "int8": "int8",
    "uint8": "uint8",
    "bool": "bool",
}


class _StorageType:
    def __init__(self, name: str) -> None:
        self.name = name
        self.raw, self.dtype = _STORAGES[name]


class _Storage:
    def __init__(self, values: np.ndarray, dtype: str, location: str) -> None:
        self.values, self.dtype, self.location = values, dtype, location


def _device_for(location: str, map_location: Any) -> str:
    from .serialization import _device_for as pick

    dev = pick(str(location), map_location)
    return "cpu" if dev.startswith("cpu") else dev


def load_torch_zip(data: bytes, map_location: Any, weights_only: bool) -> Any:
    from ._tensor import tensor
    from ._torch_compat import device as fg_device
    from ._torch_more import Size

    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        names = zf.namelist()
    except zipfile.BadZipFile as e:
        raise ValueError(f"load: a corrupt PyTorch zip checkpoint ({e})") from None
    pkl = next((n for n in names if n.endswith("data.pkl")), None)
    if pkl is None:
        raise ValueError("load: a zip file that is not a PyTorch checkpoint (no data.pkl)")
    prefix = pkl[: -len("data.pkl")]
    if f"{prefix}byteorder" in names and zf.read(f"{prefix}byteorder").strip() != b"little":
        raise ValueError("load: big-endian PyTorch checkpoints are not supported")
    storages: dict[str, _Storage] = {}

    def rebuild_tensor(
        storage: _Storage,
        offset: int,
        size: tuple,
        stride: tuple,
        requires_grad: bool = False,
        backward_hooks: Any = None,
        metadata: Any = None,
    ) -> Any:
        v = storage.values
        item = v.itemsize
        if len(size) and min(size) == 0:
            arr = np.zeros(size, dtype=v.dtype)
        else:
            need = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1
            if need > v.size or offset < 0:
                raise ValueError("load: a tensor reaches past the end of its storage")
            arr = np.lib.stride_tricks.as_strided(
                v[offset:], shape=tuple(size), strides=tuple(s * item for s in stride)
            ).copy()
        if storage.dtype == "bfloat16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        t = tensor(arr, dtype=storage.dtype, device="cpu")
        dev = _device_for(storage.location, map_location)
        if dev != "cpu":
            t = t.to(dev)
        if requires_grad:
            t.requires_grad_(True)
        return t

    def rebuild_parameter(data: Any, requires_grad: bool = True, backward_hooks: Any = None) -> Any:
        from .nn import Parameter

        return Parameter(data, requires_grad=requires_grad)

    def rebuild_parameter_with_state(
        data: Any, requires_grad: bool, backward_hooks: Any, state: Any
    ) -> Any:
        p = rebuild_parameter(data, requires_grad)
        if isinstance(state, dict):
            for k, v in state.items():
                setattr(p, k, v)
        return p

    allowed: dict[tuple[str, str], Any] = {
        ("collections", "OrderedDict"): OrderedDict,
        ("torch._utils", "_rebuild_tensor_v2"): rebuild_tensor,
        ("torch._utils", "_rebuild_parameter"): rebuild_parameter,
        ("torch._utils", "_rebuild_parameter_with_state"): rebuild_parameter_with_state,
        ("torch", "Size"): Size,
        ("torch", "device"): fg_device,
        ("builtins", "set"): set,
        ("builtins", "frozenset"): frozenset,
        ("builtins", "slice"): slice,
        ("builtins", "complex"): complex,
        ("builtins", "bytearray"): bytearray,
    }

    class Unpickler(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            if (module, name) in allowed:
                return allowed[module, name]
            if module == "torch" and name in _STORAGES:
                return _StorageType(name)
            if module == "torch" and name in _DTYPES:
                import ferrograd

                return getattr(ferrograd, _DTYPES[name])
            if not weights_only and not module.startswith("torch"):
                return super().find_class(module, name)
            raise pickle.UnpicklingError(
                f"load: this PyTorch checkpoint holds a {module}.{name}, which is "
                + (
                    "not a tensor, state dict or plain value; pass weights_only=False for a "
                    "file you trust"
                    if weights_only
                    else "a PyTorch object ferrograd cannot build (save its state_dict() instead)"
                )
            )

        def persistent_load(self, pid: Any) -> Any:
            if not (isinstance(pid, tuple) and pid and pid[0] == "storage"):
                raise pickle.UnpicklingError(f"load: unknown storage reference {pid!r}")
            _, stype, key, location, numel = pid
            if not isinstance(stype, _StorageType):
                raise pickle.UnpicklingError(f"load: unknown storage type {stype!r}")
            key = str(key)
            if key not in storages:
                try:
                    raw = zf.read(f"{prefix}data/{key}")
                except KeyError:
                    raise ValueError(f"load: the checkpoint lacks the storage {key!r}") from None
                count = int(numel)
                if len(raw) < count * np.dtype(stype.raw).itemsize:
                    raise ValueError(f"load: the storage {key!r} is truncated")
                values = np.frombuffer(raw, dtype=stype.raw, count=count)
                storages[key] = _Storage(values, stype.dtype, str(location))
            return storages[key]

    try:
        return Unpickler(io.BytesIO(zf.read(pkl))).load()
    except (EOFError, zipfile.BadZipFile, pickle.UnpicklingError) as e:
        if isinstance(e, pickle.UnpicklingError) and str(e).startswith("load:"):
            raise
        raise ValueError(f"load: a corrupt PyTorch checkpoint ({e})") from None
