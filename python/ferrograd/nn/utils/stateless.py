"""PyTorch's ``torch.nn.utils.stateless``: :func:`functional_call`, its deprecated
spelling of ``torch.func.functional_call`` (:func:`ferrograd.func.functional_call`)."""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["functional_call"]


def functional_call(
    module: Any,
    parameters_and_buffers: dict[str, Any],
    args: Any = None,
    kwargs: dict[str, Any] | None = None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
) -> Any:
    """Calls ``module`` with the tensors of ``parameters_and_buffers`` (by their
    ``named_parameters`` / ``named_buffers`` names) in place of its own, the module
    unchanged afterwards; gradients reach the given tensors. Warns (``FutureWarning``) as
    PyTorch's: use ``ferrograd.func.functional_call``."""
    from ..._functional_ad import functional_call as _functional_call

    warnings.warn(
        "`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will "
        "be removed in a future version of PyTorch. Please use `torch.func.functional_call` "
        "instead which is a drop-in replacement.",
        FutureWarning,
        stacklevel=2,
    )
    return _functional_call(
        module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights, strict=strict
    )
