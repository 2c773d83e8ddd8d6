"""``torch.onnx``'s module name, so programs that import it for an optional export path run.
ferrograd has no ONNX exporter: :func:`export` raises ``NotImplementedError`` (save the
weights with ``fg.save(model.state_dict(), path)``, or trace a step with ``fg.trace``)."""

from __future__ import annotations

from typing import Any


def export(model: Any, args: Any = None, f: Any = None, *a: Any, **kw: Any) -> None:
    raise NotImplementedError(
        "onnx.export: ferrograd cannot write ONNX files; save the weights with "
        "fg.save(model.state_dict(), path) (PyTorch loads them), or trace the step with fg.trace"
    )


def is_in_onnx_export() -> bool:
    """False: no ONNX export ever runs here."""
    return False


__all__ = ["export", "is_in_onnx_export"]
