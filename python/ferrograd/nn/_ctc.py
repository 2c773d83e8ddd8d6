"""Connectionist Temporal Classification loss: PyTorch's ``ctc_loss`` / ``CTCLoss``.

The forward (alpha) recursion of Graves et al. (2006) in log space, written as recorded
engine ops so that the engine differentiates it: one step per time frame, each a
log-sum-exp over the three predecessors of every position of the extended label sequence
(the targets with a blank before, between and after them), vectorised over the batch and
the label positions.

Gradients are PyTorch's: its CTC backward treats ``log_probs`` as the output of a
``log_softmax`` and returns ``exp(log_probs) - posterior`` (for the frames within
``input_lengths``; zero after them), where autograd of the forward formula alone would give
``-posterior``. The two differ by ``exp(log_probs)``, whose sum over the classes is 1, so
they agree once propagated through a ``log_softmax``. This module adds a term whose value
is exactly zero and whose gradient is ``exp(log_probs)`` to reproduce PyTorch's numbers.
As PyTorch, a sample whose loss is infinite (no alignment fits in its input length) gets
NaN gradients unless ``zero_infinity=True``, which zeroes its loss and its gradients.

Two deliberate departures, both where PyTorch's backward is not the derivative: an entry of
``log_probs`` equal to ``-inf`` (a class of probability 0) gets gradient 0 here, NaN in
PyTorch; and a target whose last label equals ``blank`` (PyTorch's documentation forbids
labels equal to blank, but computes them) gets the exact gradient at its last frame, where
PyTorch's backward drops a term. Losses are PyTorch's in both cases.

Labels outside ``[0, C)`` within the target lengths raise here (PyTorch reads out of
bounds); entries of padded targets past each target length are never read.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from .. import _core
from .._core import DTypeError, ShapeError, Tensor, where
from .._tensor import tensor
from ..tracing import TraceWarning
from .modules import _Loss

__all__ = ["CTCLoss", "ctc_loss"]

_OP = "ctc_loss"
_NEG_INF = -math.inf


class CTCLossError(ValueError, RuntimeError):
    """A bad argument value for ``ctc_loss`` (a ``ValueError`` and, as PyTorch raises, a
    ``RuntimeError``)."""


# ------------------------------------------------------------------------- argument checks


def _lengths(name: str, value: Any, n: int) -> np.ndarray:
    """``input_lengths`` / ``target_lengths`` as an int64 array of ``n`` entries."""
    if isinstance(value, Tensor):
        if value.dtype.kind not in "iu":
            raise DTypeError(f"{_OP}: {name} must be integral, got a {value.dtype} tensor")
        arr = value.numpy()
    elif isinstance(value, (bool, np.bool_)):
        raise DTypeError(f"{_OP}: {name} must hold ints, got a bool")
    elif isinstance(value, (int, np.integer)):
        arr = np.asarray([int(value)])
    elif isinstance(value, (list, tuple)):
        out = []
        for v in value:
            if isinstance(v, Tensor) and v.dtype.kind in "iu" and v.numel() == 1:
                out.append(int(v.item()))
            elif isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
                out.append(int(v))
            else:
                raise DTypeError(f"{_OP}: {name} must hold ints, got {v!r}")
        arr = np.asarray(out, dtype=np.int64)
    elif isinstance(value, np.ndarray) or hasattr(value, "__array__"):
        arr = np.asarray(value)
        if arr.size and arr.dtype.kind not in "iu":
            raise DTypeError(f"{_OP}: {name} must be integral, got {arr.dtype} values")
    else:
        raise TypeError(
            f"{_OP}: {name} must be a Tensor or a tuple/list of ints, got {type(value).__name__}"
        )
    arr = np.asarray(arr, dtype=np.int64).reshape(-1)
    if arr.size != n:
        raise ShapeError(
            f"{_OP}: {name} must have one entry per batch element ({n}), got {arr.size}"
        )
    if arr.size and arr.min() < 0:
        raise CTCLossError(f"{_OP}: {name} must be at least 0, got {int(arr.min())}")
    return arr


def _targets_array(targets: Any) -> np.ndarray:
    if isinstance(targets, Tensor):
        arr = targets.numpy()
    else:
        try:
            arr = np.asarray(targets)
        except (TypeError, ValueError):
            raise TypeError(
                f"{_OP}: targets must be a Tensor of class indices, got {type(targets).__name__}"
            ) from None
    if arr.dtype.kind == "f":
        arr = arr.astype(np.int64)  # as PyTorch, which casts float targets to long
    elif arr.dtype.kind not in "iu":
        raise DTypeError(f"{_OP}: targets must hold class indices (ints), got {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def _padded_targets(tg: np.ndarray, tl: np.ndarray, n: int, c: int, blank: int) -> np.ndarray:
    """The targets as an ``(N, max(target_lengths))`` array, entries past each target
    length set to ``blank`` (never read)."""
    smax = int(tl.max()) if tl.size else 0
    out = np.full((n, smax), blank, dtype=np.int64)
    if tg.ndim == 1:  # concatenated
        total = int(tl.sum())
        if tg.shape[0] != total:
            raise ShapeError(
                f"{_OP}: concatenated (1-D) targets must hold sum(target_lengths) = {total} "
                f"labels, got {tg.shape[0]}"
            )
        starts = np.concatenate([[0], np.cumsum(tl)[:-1]]) if n else np.zeros(0, np.int64)
        for b in range(n):
            out[b, : tl[b]] = tg[starts[b] : starts[b] + tl[b]]
    elif tg.ndim == 2:  # padded
        if tg.shape[0] != n:
            raise ShapeError(
                f"{_OP}: padded (2-D) targets must have one row per batch element ({n}), "
                f"got shape {list(tg.shape)}"
            )
        if tg.shape[1] < smax:
            raise ShapeError(
                f"{_OP}: padded targets of shape {list(tg.shape)} are shorter than the "
                f"largest target length {smax}"
            )
        keep = np.arange(smax)[None, :] < tl[:, None]
        out = np.where(keep, tg[:, :smax], blank)
    else:
        raise ShapeError(
            f"{_OP}: targets must be 1-D (concatenated) or 2-D (N, S) (padded), got "
            f"{tg.ndim}-D of shape {list(tg.shape)}"
        )
    if out.size:
        lo, hi = int(out.min()), int(out.max())
        if lo < 0 or hi >= c:
            bad = lo if lo < 0 else hi
            raise CTCLossError(f"{_OP}: targets hold label {bad}, out of range for {c} classes")
    return out


# ------------------------------------------------------------------------------ the loss


def _const(arr: np.ndarray, like: Tensor) -> Tensor:
    """A constant on ``like``'s device (made from lengths and targets, which are part of a
    traced function's signature when given as Python values: no TraceWarning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        return tensor(arr, device=like.device)


def _nan_gradient(lp: Tensor, hit: Tensor) -> Tensor:
    """Per sample, 0, with NaN gradient on the entries of ``lp`` where ``hit`` (PyTorch's
    gradient for an infinite loss): ``sqrt(sum(0 * tanh(x)))``, its value 0 (tanh keeps the
    product finite for infinite ``x``), its gradient ``0 * d sqrt(0) = NaN``."""
    z = where(hit, lp, 0.0).tanh() * 0.0
    return z.sum(axis=(0, 2)).sqrt()


def ctc_loss(
    log_probs: Tensor,
    targets: Any,
    input_lengths: Any,
    target_lengths: Any,
    blank: int = 0,
    reduction: str = "mean",
    zero_infinity: bool = False,
) -> Tensor:
    """The Connectionist Temporal Classification loss, as ``torch.nn.functional.ctc_loss``.

    ``log_probs``: ``(T, N, C)`` log-probabilities (a ``log_softmax`` output; unbatched
    ``(T, C)``). ``targets``: padded ``(N, S)`` class indices or all targets concatenated
    into one 1-D tensor of ``sum(target_lengths)`` labels. ``input_lengths`` and
    ``target_lengths``: ``N`` ints each (tensors, tuples or lists). ``reduction``:
    ``"none"`` (per sample), ``"sum"`` or ``"mean"`` (each loss divided by its target length,
    at least 1, then averaged over the batch). ``zero_infinity`` replaces infinite losses
    (impossible alignments) and their gradients by zeros.
    """
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{_OP}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if not isinstance(log_probs, Tensor):
        raise TypeError(f"{_OP}: log_probs must be a Tensor, got {type(log_probs).__name__}")
    if log_probs.dtype.kind != "f":
        raise DTypeError(f"{_OP}: log_probs must be a float tensor, got {log_probs.dtype}")
    if log_probs.ndim not in (2, 3):
        raise ShapeError(
            f"{_OP}: log_probs must be 3-D (T, N, C) or 2-D (T, C) unbatched, got shape "
            f"{list(log_probs.shape)}"
        )
    batched = log_probs.ndim == 3
    lp = log_probs if batched else log_probs.expand_dims(1)
    T, N, C = (int(d) for d in lp.shape)
    if T == 0 or N == 0 or C == 0:
        raise ShapeError(f"{_OP}: log_probs must not be empty, got shape {list(log_probs.shape)}")
    blank = int(blank)
    if not 0 <= blank < C:
        raise CTCLossError(f"{_OP}: blank {blank} is out of the label range [0, {C})")
    il = _lengths("input_lengths", input_lengths, N)
    tl = _lengths("target_lengths", target_lengths, N)
    if il.max() > T:
        raise CTCLossError(
            f"{_OP}: input_lengths must be at most the length of log_probs ({T}), got "
            f"{int(il.max())}"
        )
    tgt = _padded_targets(_targets_array(targets), tl, N, C, blank)

    # the extended label sequence: blank, l1, blank, l2, ..., lS, blank (padded with blanks)
    smax = tgt.shape[1]
    sp = 2 * smax + 1
    ext = np.full((N, sp), blank, dtype=np.int64)
    ext[:, 1::2] = tgt
    # position s may be entered from s-2 when it holds a label that differs from s-2's
    skip = np.zeros((N, sp), dtype=bool)
    skip[:, 3::2] = ext[:, 3::2] != ext[:, 1:-2:2]
    # predecessors of s, indexed into [-inf, -inf, alpha...]: s, s-1 and (where allowed) s-2
    pos = np.arange(sp)
    prev = np.empty((N, sp, 3), dtype=np.int64)
    prev[:, :, 0] = pos + 2
    prev[:, :, 1] = pos + 1
    prev[:, :, 2] = np.where(skip, pos, 0)
    prev_t = _const(prev.reshape(N, 3 * sp), lp)

    tmax = int(il.max())
    dt = lp.dtype.name
    # the log-probabilities of the extended labels at every frame: (tmax, N, S')
    if tmax:
        lpt = lp if tmax == T else lp[:tmax]
        idx = _const(np.ascontiguousarray(np.broadcast_to(ext, (tmax, N, sp))), lp)
        emit = _core.take_along_axis(lpt, idx, 2)
    init = np.full((N, sp), _NEG_INF)
    init[:, 0] = 0.0  # before the first frame: all mass on the leading blank
    alpha = _const(init, lp).astype(dt)
    pad2 = _const(np.full((N, 2), _NEG_INF), lp).astype(dt)
    live = np.arange(tmax)[:, None, None] < il[None, :, None]  # (tmax, N, 1)
    ragged = not live.all()
    live_t = _const(live, lp) if ragged else None
    for t in range(tmax):
        cand = _core.take_along_axis(_core.concat([pad2, alpha], 1), prev_t, 1)
        cand = cand.reshape(N, sp, 3)
        m = _core.max(cand.detach(), 2)
        dead = m == _NEG_INF  # no predecessor reachable: stays -inf, with zero gradient
        shift = where(dead, 0.0, m)
        total = (cand - shift.expand_dims(2)).exp().sum(axis=2)
        new = where(dead, 1.0, total).log() + m + emit[t]
        if ragged:
            new = where(live_t[t], new, alpha)  # finished samples keep their alpha
        alpha = new

    # the likelihood: paths ending in the last label or the trailing blank
    fin = np.stack([2 * tl, np.maximum(2 * tl - 1, 0)], 1)
    has = np.stack([np.ones(N, dtype=bool), tl > 0], 1)
    ends = where(_const(has, lp), _core.take_along_axis(alpha, _const(fin, lp), 1), _NEG_INF)
    m = _core.max(ends.detach(), 1)
    dead = m == _NEG_INF
    shift = where(dead, 0.0, m)
    total = (ends - shift.expand_dims(1)).exp().sum(axis=1)
    nll = -(where(dead, 1.0, total).log() + m)

    # PyTorch's gradient: + exp(log_probs) over the frames within each input length
    tracing = _core._tracing()  # (values unknown while tracing: the checks as tensor ops)
    frames = np.arange(tmax)[:, None] < il[None, :]
    if not tmax:  # every input length 0: zeros tied to log_probs, so the loss has a graph
        loss = nll + lp[:0].sum(axis=(0, 2))
    else:
        if frames.all():
            mass = lpt.exp().sum(axis=(0, 2))
        else:
            mass = where(_const(frames[:, :, None], lp), lpt.exp(), 0.0).sum(axis=(0, 2))
        held = mass.detach()
        extra = mass - held  # 0, with gradient exp(log_probs)
        if tracing:
            extra = where(held.isfinite(), extra, 0.0)
        elif not np.isfinite(held.numpy()).all():
            extra = where(_const(np.isfinite(held.numpy()), lp), extra, 0.0)
        loss = nll + extra

    if tracing:
        infinite = nll.detach() == math.inf
        if zero_infinity:
            loss = where(infinite, 0.0, loss)
        elif tmax:
            hit = where(infinite.reshape(1, N, 1), _const(frames[:, :, None], lp), False)
            loss = loss + _nan_gradient(lpt, hit)
    else:
        infinite = nll.detach().numpy() == math.inf
        if infinite.any():
            if zero_infinity:
                loss = where(_const(infinite, lp), 0.0, loss)
            elif tmax and (frames & infinite[None, :]).any():
                hit = _const((frames & infinite[None, :])[:, :, None], lp)
                loss = loss + _nan_gradient(lpt, hit)

    if reduction == "none":
        return loss if batched else loss.reshape(())
    if reduction == "sum":
        return loss.sum()
    per = _const(np.maximum(tl, 1).astype(np.float64), lp).astype(dt)
    return (loss / per).mean()


class CTCLoss(_Loss):
    """The Connectionist Temporal Classification loss (:func:`ctc_loss`), as
    ``torch.nn.CTCLoss(blank=0, reduction='mean', zero_infinity=False)``; called with
    ``(log_probs, targets, input_lengths, target_lengths)``."""

    def __init__(
        self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False
    ) -> None:
        super().__init__(reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(
        self, log_probs: Tensor, targets: Any, input_lengths: Any, target_lengths: Any
    ) -> Tensor:
        return ctc_loss(
            log_probs,
            targets,
            input_lengths,
            target_lengths,
            self.blank,
            self.reduction,
            self.zero_infinity,
        )
