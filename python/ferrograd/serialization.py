"""Checkpoints: ``fg.save(obj, path)`` and ``fg.load(path, map_location=None)``.

The file is a safetensors file (written by the engine's ``safetensors`` crate): every tensor
in ``obj`` is a named tensor of the file, so PyTorch's, JAX's and Hugging Face's
``safetensors`` readers open it. A state dict's tensors keep their keys as names
(``"layer.weight"``); tensors deeper in nested dicts, lists and tuples are named by their
path (``"state.0.exp_avg"``). The structure around the tensors (dicts, lists, tuples,
numbers, strings, booleans, None) is kept as JSON in the file's metadata, so ``load`` gives
back the same kind of object. A file written elsewhere (no structure) loads as a dict of
name to tensor.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from typing import Any

from . import _core
from ._core import Tensor

__all__ = ["load", "save"]

_KEY = "ferrograd.structure"
_FORMAT = 1


def _encode(obj: Any, path: str, tensors: list, names: set) -> Any:
    if isinstance(obj, Tensor):
        name = path or "tensor"
        if name in names:
            i = 1
            while f"{name}#{i}" in names:
                i += 1
            name = f"{name}#{i}"
        names.add(name)
        tensors.append((name, obj.detach()))
        return {"tensor": name, "device": obj.device, "param": type(obj).__name__ == "Parameter"}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if isinstance(k, bool) or not isinstance(k, (str, int, float)):
                raise TypeError(f"save: dict keys must be str, int or float, got {k!r}")
            sub = f"{path}.{k}" if path else str(k)
            items.append([k, _encode(v, sub, tensors, names)])
        return {"dict": items, "ordered": isinstance(obj, OrderedDict)}
    if isinstance(obj, (list, tuple)):
        out = [
            _encode(v, f"{path}.{i}" if path else str(i), tensors, names) for i, v in enumerate(obj)
        ]
        return {"tuple" if isinstance(obj, tuple) else "list": out}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"value": obj}
    if hasattr(obj, "item") and hasattr(obj, "dtype") and getattr(obj, "ndim", 1) == 0:
        return {"value": obj.item()}  # a numpy scalar
    raise TypeError(
        f"save: cannot store a {type(obj).__name__} at {path or 'the top level'!r}; checkpoints "
        "hold tensors, numbers, strings, None and dicts, lists and tuples of them"
    )


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


def _device_for(saved: str, map_location: Any) -> str:
    if map_location is None:
        return saved
    if callable(map_location):
        return str(map_location(saved))
    if isinstance(map_location, dict):
        return str(map_location.get(saved, saved))
    return str(map_location)


def _decode(node: Any, tensors: dict, map_location: Any) -> Any:
    if not isinstance(node, dict):
        raise ValueError("load: the checkpoint's structure is corrupt")  # noqa: TRY004
    if "tensor" in node:
        name = node["tensor"]
        if name not in tensors:
            raise ValueError(f"load: the checkpoint lists a tensor {name!r} that it does not hold")
        t = tensors[name]
        dev = _device_for(node.get("device", "cpu"), map_location)
        if dev != "cpu":
            t = t.to(dev)
        if node.get("param"):
            from .nn import Parameter

            t = Parameter(t)
        return t
    if "dict" in node:
        cls = OrderedDict if node.get("ordered") else dict
        return cls((k, _decode(v, tensors, map_location)) for k, v in node["dict"])
    if "list" in node:
        return [_decode(v, tensors, map_location) for v in node["list"]]
    if "tuple" in node:
        return tuple(_decode(v, tensors, map_location) for v in node["tuple"])
    if "value" in node:
        return node["value"]
    raise ValueError("load: the checkpoint's structure is corrupt")


def load(f: Any, map_location: Any = None, weights_only: bool = True) -> Any:
    """Reads a checkpoint written by :func:`save` (or any safetensors file: then a dict of
    name to tensor). Tensors go back to the device they were saved from, or to
    ``map_location`` (a device, a dict from saved to new device, or a function of the saved
    device). A truncated or corrupt file raises ``ValueError``."""
    if hasattr(f, "read"):
        data = f.read()
    else:
        with open(os.fspath(f), "rb") as fh:
            data = fh.read()
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
    return _decode(doc["root"], tensors, map_location)
