"""``torch.fx``'s names that model code uses at import time (``fx.wrap`` marks a function as
a leaf for symbolic tracing): here they leave the function as it is. ferrograd's graph
capture is :func:`ferrograd.trace`."""

from __future__ import annotations

from typing import Any


def wrap(fn_or_name: Any) -> Any:
    """``torch.fx.wrap``: returns its argument."""
    return fn_or_name


__all__ = ["wrap"]
