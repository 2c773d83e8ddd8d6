"""Checkpoints: ``fg.save(obj, path)`` and ``fg.load(path, map_location=None)``.

The file is a safetensors file (written by the engine's ``safetensors`` crate): every tensor
in ``obj`` is a named tensor of the file, so PyTorch's, JAX's and Hugging Face's
``safetensors`` readers open it. A state dict's tensors keep their keys as names
(``"layer.weight"``); tensors deeper in nested dicts, lists and tuples are named by their
path (``"state.0.exp_avg"``). The structure around the tensors (dicts, lists, tuples,
numbers, strings, booleans, None) is kept as JSON in the file's metadata, so ``load`` gives
back the same kind of object (dict keys may be str, int, float, bool, None or tuples of
them). A tensor object met several times (tied weights) is stored once and loads as one
object; different tensor objects over the same memory (a state dict's detached tied weights)
load as tensors sharing memory (other views of one tensor, such as a slice or a transpose,
are stored as separate copies). numpy arrays are stored as tensors and load as arrays. Any
other object (a whole module, an ``argparse.Namespace``, a set) is pickled into the file;
``load`` unpickles it only with ``weights_only=False`` (as PyTorch's ``torch.load``, since
unpickling runs code from the file). A safetensors file written elsewhere (no structure)
loads as a dict of name to tensor, and a file written by ``torch.save`` (PyTorch's zip
format) loads its tensors, state dicts and plain values without PyTorch.
"""

from __future__ import annotations

import json
import os
import pickle
from collections import OrderedDict
from typing import Any

import numpy as np

from . import _core
from ._core import Tensor

__all__ = [
    "add_safe_globals",
    "clear_safe_globals",
    "get_safe_globals",
    "load",
    "safe_globals",
    "save",
]

_KEY = "ferrograd.structure"
_FORMAT = 1


def _data_key(t: Tensor) -> Any:
    """Which memory ``t`` views (storage, offset, shape, strides), its dtype and device."""
    try:
        return (t._data_key, t.dtype.name, str(t.device))
    except Exception:  # noqa: BLE001 (no key: the tensor is not matched with others)
        return None


def _valid_key(k: Any) -> bool:
    """A dict key the JSON structure keeps: str, int, float, bool, None, or a tuple of them
    (written as a JSON list, read back as a tuple)."""
    if k is None or isinstance(k, (str, int, float)):
        return True
    return isinstance(k, tuple) and all(_valid_key(x) for x in k)


def _encode(obj: Any, path: str, tensors: list, names: set, seen: dict | None = None) -> Any:
    # `seen`: what was written so far, by object id and by storage view (`_data_key`), so
    # a tensor met twice (tied weights) is stored once and loads back shared
    seen = {} if seen is None else seen
    if isinstance(obj, Tensor):
        if id(obj) in seen:  # the same object again: the same node
            return seen[id(obj)][0]
        # "ref" numbers the distinct tensor objects: load gives one object per number
        ref = seen.get("refs", 0)
        seen["refs"] = ref + 1
        node = {"device": str(obj.device), "param": type(obj).__name__ == "Parameter", "ref": ref}
        # the flag loads back as saved (PyTorch's): a leaf requiring grad (also for a
        # tensor computed from others, as torch.load gives); a Parameter may be frozen
        node["requires_grad"] = bool(obj.requires_grad)
        key = _data_key(obj)
        if key is not None and ("view", key) in seen:
            # another tensor object over the same memory (a state dict's detached tensors):
            # stored once, loaded as a tensor sharing that memory
            node["tensor"] = seen["view", key]
        else:
            node["tensor"] = _unique(path or "tensor", names)
            tensors.append((node["tensor"], obj.detach()))
            if key is not None:
                seen["view", key] = node["tensor"]
        seen[id(obj)] = (node, obj)  # (obj kept: its id stays its own while saving)
        return node
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not _valid_key(k):
                raise TypeError(
                    "save: dict keys must be str, int, float, bool, None or tuples of them, "
                    f"got {k!r}"
                )
            sub = f"{path}.{k}" if path else str(k)
            items.append([k, _encode(v, sub, tensors, names, seen)])
        return {"dict": items, "ordered": isinstance(obj, OrderedDict)}
    if isinstance(obj, (list, tuple)):
        out = [
            _encode(v, f"{path}.{i}" if path else str(i), tensors, names, seen)
            for i, v in enumerate(obj)
        ]
        return {"tuple" if isinstance(obj, tuple) else "list": out}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"value": obj}
    if isinstance(obj, np.generic) and obj.ndim == 0 and obj.dtype.kind in "biuf":
        return {"value": obj.item()}  # a numpy scalar
    if isinstance(obj, np.ndarray) and obj.dtype.kind in "biuf":
        from ._tensor import _SUPPORTED, tensor

        if obj.dtype.name in _SUPPORTED:
            name = _unique(f"{path or 'array'}", names)
            tensors.append(
                (name, tensor(np.ascontiguousarray(obj).reshape(obj.shape), device="cpu"))
            )
            return {"ndarray": name}
    # anything else is pickled into the file (loaded back with weights_only=False only)
    try:
        blob = pickle.dumps(obj, protocol=4)
    except Exception as e:  # noqa: BLE001  (any pickling failure is reported the same way)
        raise TypeError(
            f"save: cannot store a {type(obj).__name__} at {path or 'the top level'!r}: it is "
            f"not a tensor, array, number, string or container of them, and pickling it "
            f"failed ({e})"
        ) from None
    from ._tensor import tensor

    name = _unique(f"{path or 'object'}.pickle", names)
    tensors.append((name, tensor(np.frombuffer(blob, dtype=np.uint8).copy(), device="cpu")))
    return {"pickle": name, "type": f"{type(obj).__module__}.{type(obj).__qualname__}"}


def _unique(name: str, names: set) -> str:
    if name in names:
        i = 1
        while f"{name}#{i}" in names:
            i += 1
        name = f"{name}#{i}"
    names.add(name)
    return name


def save(obj: Any, f: Any) -> None:
    """Writes ``obj`` (a tensor, or dicts, lists and tuples of tensors, numbers, strings and
    None, such as a module's or optimizer's ``state_dict()``) to the file ``f`` (a path or a
    binary file object) in the safetensors format."""
    tensors: list = []
    structure = _encode(obj, "", tensors, set())
    meta = {_KEY: json.dumps({"format": _FORMAT, "root": structure})}
    data = _core._to_safetensors(tensors, meta)
    if hasattr(f, "write"):
        f.write(data)
        return
    tmp = f"{os.fspath(f)}.tmp{os.getpid()}"
    with open(tmp, "wb") as out:  # written whole, then moved: no half-written checkpoint
        out.write(data)
    os.replace(tmp, os.fspath(f))


class _StorageOnDevice:
    """What a ``map_location`` function receives as its ``storage`` (PyTorch calls it as
    ``map_location(storage, location)``): a stand-in that knows its device and moves as a
    storage does (``storage.cuda(0)``, ``.cpu()``, ``.to(device)``)."""

    def __init__(self, device: str) -> None:
        self.device = device

    def cpu(self) -> _StorageOnDevice:
        return _StorageOnDevice("cpu")

    def cuda(self, device: Any = None) -> _StorageOnDevice:
        return _StorageOnDevice("cuda" if device is None else f"cuda:{int(device)}")

    def to(self, device: Any, *args: Any, **kwargs: Any) -> _StorageOnDevice:
        return _StorageOnDevice(str(device))

    def __repr__(self) -> str:
        return f"storage on {self.device}"


def _positional_count(fn: Any) -> int:
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 2
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 2
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def _device_for(saved: str, map_location: Any) -> str:
    if map_location is None:
        return saved
    if callable(map_location) and not isinstance(map_location, (str, dict)):
        if _positional_count(map_location) >= 2:
            # PyTorch's form: (storage, location) -> a storage moved somewhere, or None; the
            # storage it gets is read onto the CPU (`lambda storage, loc: storage` loads there)
            out = map_location(_StorageOnDevice("cpu"), saved)
            if out is None:
                return saved
            return str(out.device) if isinstance(out, _StorageOnDevice) else str(out)
        return str(map_location(saved))
    if isinstance(map_location, dict):
        return str(map_location.get(saved, saved))
    return str(map_location)


# classes and functions a weights_only load may build (PyTorch's safe globals)
_SAFE: dict[tuple[str, str], Any] = {}


def _key(obj: Any) -> tuple[str, str]:
    if isinstance(obj, tuple):  # (obj, "module.name") as PyTorch accepts
        obj, name = obj
        mod, _, qual = name.rpartition(".")
        return (mod, qual)
    return (obj.__module__, obj.__qualname__)


def add_safe_globals(safe_globals: list) -> None:
    """Lets ``load(weights_only=True)`` build these classes and functions (a pickled whole
    model, a config object), as ``torch.serialization.add_safe_globals``."""
    for g in safe_globals:
        obj = g[0] if isinstance(g, tuple) else g
        _SAFE[_key(g)] = obj


def get_safe_globals() -> list:
    return list(_SAFE.values())


def clear_safe_globals() -> None:
    _SAFE.clear()


class safe_globals:
    """Context manager: :func:`add_safe_globals` for the block only."""

    def __init__(self, safe_globals: list) -> None:
        self._globals = list(safe_globals)

    def __enter__(self) -> safe_globals:  # noqa: PYI034
        self._saved = dict(_SAFE)
        add_safe_globals(self._globals)
        return self

    def __exit__(self, *exc: object) -> None:
        _SAFE.clear()
        _SAFE.update(self._saved)


def _restricted_loads(blob: bytes, what: str) -> Any:
    """Unpickles ``blob`` building only plain values, tensors and the safe globals."""
    import collections
    import copyreg
    import io

    from . import _torch_compat
    from .nn import modules as _modules

    allowed: dict[tuple[str, str], Any] = {
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("builtins", "set"): set,
        ("builtins", "frozenset"): frozenset,
        ("builtins", "slice"): slice,
        ("builtins", "complex"): complex,
        ("builtins", "bytearray"): bytearray,
        ("builtins", "object"): object,
        ("copyreg", "_reconstructor"): copyreg._reconstructor,
        ("ferrograd._torch_compat", "_rebuild_tensor"): _torch_compat._rebuild_tensor,
        ("ferrograd.nn.modules", "_rebuild_parameter"): _modules._rebuild_parameter,
        # the arrays inside tensors' pickled state
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
    }
    for mod in ("numpy._core.multiarray", "numpy.core.multiarray"):
        allowed[mod, "_reconstruct"] = np._core.multiarray._reconstruct
        allowed[mod, "scalar"] = np._core.multiarray.scalar
    for dt in ("Float32DType", "Float64DType", "Int64DType", "Int32DType", "BoolDType"):
        if hasattr(np.dtypes, dt):
            allowed["numpy.dtypes", dt] = getattr(np.dtypes, dt)

    class Unpickler(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            if (module, name) in allowed:
                return allowed[module, name]
            if (module, name) in _SAFE:
                return _SAFE[module, name]
            raise pickle.UnpicklingError(
                f"load: the checkpoint holds a pickled {what} that needs {module}.{name}; "
                "unpickling runs code from the file, so with weights_only=True (the default) "
                f"only allow-listed globals are built: fg.serialization.add_safe_globals([{name}]) "
                "if you trust it, or pass weights_only=False for a file you trust"
            )

    return Unpickler(io.BytesIO(blob)).load()


def _json_key(k: Any) -> Any:
    """A dict key as saved: JSON lists were tuples."""
    return tuple(_json_key(x) for x in k) if isinstance(k, list) else k


def _decode(
    node: Any,
    tensors: dict,
    map_location: Any,
    weights_only: bool = True,
    done: dict | None = None,
) -> Any:
    # `done`: the tensors loaded so far by name, so a tensor saved once for several places
    # loads as one object (or, for an "alias", a tensor sharing its memory)
    done = {} if done is None else done
    if not isinstance(node, dict):
        raise ValueError("load: the checkpoint's structure is corrupt")  # noqa: TRY004
    if "ndarray" in node or "pickle" in node:
        name = node.get("ndarray", node.get("pickle"))
        if name not in tensors:
            raise ValueError(f"load: the checkpoint lists an entry {name!r} that it does not hold")
        arr = tensors[name].numpy()
        if "ndarray" in node:
            return arr
        if weights_only:
            return _restricted_loads(arr.tobytes(), node.get("type", "object"))
        return pickle.loads(arr.tobytes())
    if "tensor" in node:
        name = node["tensor"]
        if name not in tensors:
            raise ValueError(f"load: the checkpoint lists a tensor {name!r} that it does not hold")
        ref = node.get("ref")
        if ref is not None and ("ref", ref) in done:
            return done["ref", ref]  # the very same object, as saved
        first = done.get(name)
        if first is not None:
            t = first.detach()  # another tensor over the same memory
        else:
            t = tensors[name]
            dev = _device_for(node.get("device", "cpu"), map_location)
            if dev != "cpu":
                t = t.to(dev)
            done[name] = t
        # files without "requires_grad" (older ones): Parameters require grad, others not
        requires_grad = bool(node.get("requires_grad", bool(node.get("param"))))
        if node.get("param"):
            from .nn import Parameter

            t = Parameter(t, requires_grad=requires_grad)  # (shares t's memory)
        elif requires_grad:
            t = t.detach().requires_grad_(True)  # (shares t's memory; a leaf of its own)
        if ref is not None:
            done["ref", ref] = t
        return t
    if "dict" in node:
        cls = OrderedDict if node.get("ordered") else dict
        return cls(
            (_json_key(k), _decode(v, tensors, map_location, weights_only, done))
            for k, v in node["dict"]
        )
    if "list" in node:
        return [_decode(v, tensors, map_location, weights_only, done) for v in node["list"]]
    if "tuple" in node:
        return tuple(_decode(v, tensors, map_location, weights_only, done) for v in node["tuple"])
    if "value" in node:
        return node["value"]
    raise ValueError("load: the checkpoint's structure is corrupt")


# what a plain pickle of numpy state may name when loaded with weights_only=True
_NUMPY_PICKLE_NAMES = {
    ("collections", "OrderedDict"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"),  # protocol 5's arrays
    ("numpy._core.numeric", "_frombuffer"),
    ("_codecs", "encode"),  # how protocol 2 spells bytes
}


def _load_pickle(data: bytes, weights_only: bool) -> Any:
    """A plain pickle, such as MegEngine's ``save`` writes (its state dicts hold numpy
    arrays). With ``weights_only`` only numpy arrays, scalars and dtypes, dicts, lists,
    tuples and plain values are rebuilt; anything else raises ``pickle.UnpicklingError``."""
    import io

    class Unpickler(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            if not weights_only or (module, name) in _NUMPY_PICKLE_NAMES:
                return super().find_class(module, name)
            raise pickle.UnpicklingError(
                f"load: this pickled checkpoint holds a {module}.{name}, which is not a numpy "
                "array, dict or plain value; pass weights_only=False for a file you trust"
            )

    try:
        return Unpickler(io.BytesIO(data)).load()
    except (EOFError, ValueError, pickle.UnpicklingError) as e:
        if isinstance(e, pickle.UnpicklingError) and str(e).startswith("load:"):
            raise
        raise ValueError(f"load: a corrupt pickled checkpoint ({e})") from None


def load(
    f: Any, map_location: Any = None, weights_only: bool = True, *, mmap: Any = None, **_: Any
) -> Any:
    """Reads a checkpoint written by :func:`save` (or any safetensors file: then a dict of
    name to tensor, or a file written by ``torch.save``). Tensors go back to the device they
    were saved from, or to ``map_location`` (a device, a dict from saved to new device, or a
    function of the saved device). Pickled objects load only with ``weights_only=False``
    (``pickle.UnpicklingError`` otherwise). A truncated or corrupt file raises
    ``ValueError``. ``mmap`` (PyTorch's memory-mapped loading) is accepted; the tensors are
    read into memory. A plain pickle (MegEngine's ``save``: state dicts of numpy arrays)
    loads as it was pickled, numpy arrays staying numpy arrays (``load_state_dict`` takes
    them)."""
    if hasattr(f, "read"):
        data = f.read()
    else:
        with open(os.fspath(f), "rb") as fh:
            data = fh.read()
    if data[:4] == b"PK\x03\x04":
        from ._torch_files import load_torch_zip

        return load_torch_zip(data, map_location, weights_only)
    if data[:2] == b"\x80\x02" and b"\x19\x10" in data[:16]:
        raise ValueError(
            "load: a file in PyTorch's legacy (before 1.6) format; re-save it with "
            "torch.save(obj, path) from a current PyTorch (its zip format loads here)"
        )
    if len(data) > 2 and data[0] == 0x80 and 2 <= data[1] <= 5:
        # a pickle's protocol mark; a safetensors header length can begin with the same
        # bytes, so the file is read as a pickle only when it is not valid safetensors
        try:
            pairs, meta = _core._from_safetensors(data)
        except ValueError:
            pairs = None
        if pairs is None:
            return _load_pickle(data, weights_only)
    else:
        pairs, meta = _core._from_safetensors(data)
    tensors = dict(pairs)
    if not meta or _KEY not in meta:
        dev = None if map_location is None else _device_for("cpu", map_location)
        return OrderedDict((n, t.to(dev) if dev and dev != "cpu" else t) for n, t in pairs)
    try:
        doc = json.loads(meta[_KEY])
    except json.JSONDecodeError as e:
        raise ValueError(f"load: the checkpoint's structure is corrupt ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        raise ValueError(f"load: unknown checkpoint format {doc.get('format')!r}")
    return _decode(doc["root"], tensors, map_location, weights_only)
