"""``Muon`` (momentum orthogonalized by Newton-Schulz) with PyTorch's arguments, state and
formulas: for 2-D parameters (the weights of linear layers), the momentum-averaged gradient
is replaced by an approximately orthogonal matrix of the same shape before the step.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .. import _core
from .._core import Tensor
from . import Optimizer, _nonneg

__all__ = ["Muon"]

_ADJUST_LR = (None, "original", "match_rms_adamw", "spectral_unclamped")


def _bf16(t: Tensor) -> Tensor:
    """``t`` rounded to bfloat16, held in float32 (where the next product accumulates)."""
    return t.astype("bfloat16").astype("float32")


def _orthogonalize(g: Tensor, coefficients: Any, steps: int, eps: float) -> Tensor:
    """The quintic Newton-Schulz iteration ``X <- a X + (b A + c A^2) X`` with ``A = X X^T``
    on ``g`` scaled to Frobenius norm 1 (transposed while it has more rows than columns), in
    bfloat16 as PyTorch's: each product accumulates in float32 and is rounded to bfloat16
    once. The result (in float32) is ``U S' V^T`` with ``S'`` near 1, for ``g = U S V^T``."""
    a, b, c = (float(v) for v in coefficients)
    x = _bf16(g)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    norm = _bf16((x * x).sum().sqrt())
    x = _bf16(x / _bf16(_core.maximum(norm, _core.full((), eps, dtype="float32", device=x.device))))
    for _ in range(steps):
        gram = _bf16(x @ x.T)
        poly = _bf16(gram * b + (gram @ gram) * c)
        x = _bf16(x * a + poly @ x)
    return x.T if tall else x


def _lr_ratio(adjust_lr_fn: str | None, shape: tuple) -> float:
    """How the learning rate scales with the matrix's shape ``(A, B)`` (fan-out, fan-in)."""
    rows, cols = shape[:2]
    if adjust_lr_fn in (None, "original"):
        return math.sqrt(max(1.0, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return 0.2 * math.sqrt(max(rows, cols))
    return math.sqrt(rows / cols)  # spectral_unclamped


class Muon(Optimizer):
    """Muon, PyTorch's formulas: ``B = momentum B + (1 - momentum) g`` (``B.lerp_(g, 1 -
    momentum)``); the update ``U = NS(g.lerp(B, momentum))`` with ``nesterov`` (else
    ``NS(B)``), ``NS`` the Newton-Schulz orthogonalization in bfloat16 (``ns_steps``
    iterations, ``ns_coefficients``, ``eps`` bounding the norm it divides by); then
    ``p *= 1 - lr weight_decay`` and ``p -= lr r U`` with ``r`` from ``adjust_lr_fn``
    (``"original"``/None: ``sqrt(max(1, A / B))``, ``"match_rms_adamw"``: ``0.2 sqrt(max(A,
    B))``, ``"spectral_unclamped"``: ``sqrt(A / B)`` for an ``A x B`` parameter). Every
    parameter must be 2-D (use another optimizer for biases, norms and embeddings)."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients: tuple[float, float, float] = (3.4445, -4.7750, 2.0315),
        eps: float = 1e-7,
        ns_steps: int = 5,
        adjust_lr_fn: str | None = None,
    ) -> None:
        defaults = {
            "lr": lr,
            "weight_decay": weight_decay,
            "momentum": momentum,
            "nesterov": nesterov,
            "ns_coefficients": ns_coefficients,
            "eps": eps,
            "ns_steps": ns_steps,
            "adjust_lr_fn": adjust_lr_fn,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict) -> None:
        _nonneg("Muon", "momentum", group["momentum"])
        _nonneg("Muon", "weight_decay", group["weight_decay"])
        if group["adjust_lr_fn"] not in _ADJUST_LR:
            raise ValueError(
                f"Muon: adjust_lr_fn must be None, 'original', 'match_rms_adamw' or "
                f"'spectral_unclamped', got {group['adjust_lr_fn']!r}"
            )
        coefficients = group["ns_coefficients"]
        if len(tuple(coefficients)) != 3:
            raise ValueError(
                f"Muon: ns_coefficients must be 3 numbers (a, b, c), got {coefficients!r}"
            )
        steps = group["ns_steps"]
        if isinstance(steps, bool) or not isinstance(steps, int) or not 0 <= steps < 100:
            raise ValueError(f"Muon: ns_steps must be an int in [0, 100), got {steps!r}")
        for p in group["params"]:
            if p.ndim != 2:
                raise ValueError(
                    f"Muon only supports 2D parameters whereas we found a parameter with size: "
                    f"{tuple(p.shape)}"
                )

    def _init_state(self, p: Tensor, group: dict) -> dict[str, Any]:
        return {"momentum_buffer": _core.zeros_like(p)}

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict, lr: Tensor) -> None:
        momentum = float(group["momentum"])
        buf = state["momentum_buffer"]
        buf.lerp_(g, 1.0 - momentum)
        update = g.lerp(buf, momentum) if group["nesterov"] else buf
        u = _orthogonalize(update, group["ns_coefficients"], group["ns_steps"], group["eps"])
        ratio = _lr_ratio(group["adjust_lr_fn"], tuple(p.shape))
        if group["weight_decay"]:
            p *= 1.0 - lr * float(group["weight_decay"])
        p -= u.astype(p.dtype.name) * (lr * ratio)
