"""``nn.MultiheadAttention``: PyTorch's multi-head attention with its parameter names and
layouts (packed ``in_proj_weight``, or ``q/k/v_proj_weight`` when ``kdim``/``vdim`` differ
from ``embed_dim``), ``add_bias_kv``, ``add_zero_attn`` and its mask conventions, written
with differentiable ops so gradients reach every input and parameter."""

from __future__ import annotations

import enum
import math
from typing import Any

import numpy as np

from ... import _core
from ..._core import ShapeError, Tensor
from ..._tensor import _dtype_name, default_float, tensor
from ...random import _numpy_rng
from .. import functional as F
from .._errors import ArgumentAssertionError, DTypeAssertionError, ShapeAssertionError
from ..modules import Linear, Module, Parameter, _count, _filled_param, _uniform_param

__all__ = ["MultiheadAttention", "SDPBackend", "sdpa_kernel"]


class NonDynamicallyQuantizableLinear(Linear):
    """The Linear of MultiheadAttention's output projection, under PyTorch's name for it
    (``nn.modules.linear.NonDynamicallyQuantizableLinear``, which programs list in
    ``serialization.safe_globals``); a Linear in every other way."""


class SDPBackend(enum.IntEnum):
    """PyTorch's names of the attention kernels (``torch.nn.attention.SDPBackend``).
    ferrograd has one attention path, so a choice among them changes nothing."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_BACKEND_FLAG = {
    SDPBackend.MATH: "math",
    SDPBackend.FLASH_ATTENTION: "flash",
    SDPBackend.EFFICIENT_ATTENTION: "mem_efficient",
    SDPBackend.CUDNN_ATTENTION: "cudnn",
}


def sdpa_kernel(backends: Any, set_priority: bool = False) -> Any:
    """``torch.nn.attention.sdpa_kernel``: a context manager (or decorator) that enables only
    ``backends`` (an :class:`SDPBackend` or a list of them) for its block, as PyTorch's
    ``torch.backends.cuda.*_sdp_enabled()`` then report; ferrograd has one attention path,
    so the choice is recorded and changes nothing."""
    from ...backends.cuda import _SdpFlags

    listed = list(backends) if isinstance(backends, (list, tuple, set)) else [backends]
    if not listed or not all(isinstance(b, SDPBackend) for b in listed):
        raise ArgumentAssertionError(
            "sdpa_kernel: Backend must be an instance of SDPBackend or a list of SDPBackend "
            f"instances, got {backends!r}"
        )
    return _SdpFlags({flag: b in listed for b, flag in _BACKEND_FLAG.items()})


def _normal_param(std: float, shape: tuple, dtype: Any, device: Any) -> Parameter:
    """A Parameter drawn from N(0, std^2) (fg.manual_seed's stream)."""
    name = _dtype_name(dtype) if dtype is not None else default_float()
    dev = str(device) if device is not None else str(_core.get_default_device())
    data = _numpy_rng(dev).standard_normal(shape) * std
    return Parameter(tensor(data, device=dev).astype(name))


def _xavier_bound(fan_out: int, fan_in: int) -> float:
    return math.sqrt(6.0 / (fan_in + fan_out))


def _float_mask(name: str, mask: Tensor, like: Tensor) -> Tensor:
    """PyTorch's canonical mask: a bool mask (True: not allowed) as 0 / -inf in ``like``'s
    dtype; a float mask as it is (added to the scores)."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"MultiheadAttention: {name} must be a Tensor, got {type(mask).__name__}")
    if mask.dtype.kind == "b":
        zero = _core.zeros((), dtype=like.dtype.name, device=like.device)
        return _core.where(mask.to(like.device), -math.inf, zero)
    if mask.dtype.kind != "f":
        raise DTypeAssertionError(
            f"MultiheadAttention: only bool and floating types of {name} are supported, got "
            f"{mask.dtype}"
        )
    return mask if mask.device == like.device else mask.to(like.device)


def _pad_last(mask: Tensor | None) -> Tensor | None:
    """A float mask with one more (allowed) key at the end."""
    return None if mask is None else F.pad(mask, (0, 1))


def _softmax(scores: Tensor, safe: bool) -> Tensor:
    """Softmax over the keys; with ``safe`` (PyTorch's ``scaled_dot_product_attention``), rows
    whose keys are all masked give zeros instead of NaN."""
    if not safe:
        return F.softmax(scores, -1)
    dead = (scores.detach() == -math.inf).all(-1, keepdim=True)
    # eagerly, rows with no allowed key are rare enough to look for first; a traced step
    # cannot read values, and the guarded form is right either way
    if not _core._tracing() and not bool(dead.any().item()):
        return F.softmax(scores, -1)
    p = F.softmax(_core.where(dead, 0.0, scores), -1)
    return _core.where(dead, 0.0, p)


class MultiheadAttention(Module):
    """PyTorch's multi-head attention: ``in_proj_weight`` ``(3E, E)`` (or, when ``kdim`` or
    ``vdim`` differ from ``embed_dim``, ``q_proj_weight`` ``(E, E)``, ``k_proj_weight``
    ``(E, kdim)`` and ``v_proj_weight`` ``(E, vdim)``), ``in_proj_bias`` ``(3E,)``,
    ``bias_k``/``bias_v`` ``(1, 1, E)`` with ``add_bias_kv``, and ``out_proj`` (a Linear).
    Inputs ``(L, N, E)`` (``(N, L, E)`` with ``batch_first``, or unbatched ``(L, E)``).
    Returns ``(output, weights)``: the weights averaged over heads unless
    ``average_attn_weights=False``, None without ``need_weights``."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.embed_dim = e = _count("MultiheadAttention", "embed_dim", embed_dim, 1)
        self.kdim = _count("MultiheadAttention", "kdim", kdim, 1) if kdim is not None else e
        self.vdim = _count("MultiheadAttention", "vdim", vdim, 1) if vdim is not None else e
        self._qkv_same_embed_dim = self.kdim == e and self.vdim == e
        self.num_heads = _count("MultiheadAttention", "num_heads", num_heads, 1)
        if e % self.num_heads:
            raise ArgumentAssertionError(
                f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by num_heads "
                f"({num_heads})"
            )
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"MultiheadAttention: dropout must lie in [0, 1], got {dropout}")
        self.dropout, self.batch_first = dropout, batch_first
        self.head_dim = e // self.num_heads
        # PyTorch's order (and so its state dict's): the projections, in_proj_bias, out_proj,
        # bias_k, bias_v; xavier_uniform_ weights, zero biases, xavier_normal_ bias_k/v
        if self._qkv_same_embed_dim:
            bound = _xavier_bound(3 * e, e)
            self.in_proj_weight = _uniform_param(None, bound, (3 * e, e), dtype, device)
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.q_proj_weight = _uniform_param(None, _xavier_bound(e, e), (e, e), dtype, device)
            self.k_proj_weight = _uniform_param(
                None, _xavier_bound(e, self.kdim), (e, self.kdim), dtype, device
            )
            self.v_proj_weight = _uniform_param(
                None, _xavier_bound(e, self.vdim), (e, self.vdim), dtype, device
            )
            self.in_proj_weight = None
        self.in_proj_bias = _filled_param(0.0, (3 * e,), dtype, device) if bias else None
        self.out_proj = NonDynamicallyQuantizableLinear(e, e, bias=bias, device=device, dtype=dtype)
        if bias:
            self.out_proj.bias = _filled_param(0.0, (e,), dtype, device)
        if add_bias_kv:
            # xavier_normal_ of a (1, 1, E) tensor: fan_in = fan_out = E
            std = math.sqrt(1.0 / e)
            self.bias_k = _normal_param(std, (1, 1, e), dtype, device)
            self.bias_v = _normal_param(std, (1, 1, e), dtype, device)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = bool(add_zero_attn)

    def _projections(self) -> tuple[Tensor, Tensor, Tensor]:
        e = self.embed_dim
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            return w[:e], w[e : 2 * e], w[2 * e :]
        return self.q_proj_weight, self.k_proj_weight, self.v_proj_weight

    def _check(self, query: Tensor, key: Tensor, value: Tensor, kpm: Any) -> bool:
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, Tensor):
                raise TypeError(
                    f"MultiheadAttention: {name} must be a Tensor, got {type(t).__name__}"
                )
        if query.ndim not in (2, 3):
            raise ShapeAssertionError(
                "MultiheadAttention: query should be unbatched 2D or batched 3D tensor but "
                f"received {query.ndim}-D query tensor (shape {list(query.shape)})"
            )
        if key.ndim != query.ndim or value.ndim != query.ndim:
            kind = "batched (3-D)" if query.ndim == 3 else "unbatched (2-D)"
            raise ShapeAssertionError(
                f"MultiheadAttention: for {kind} `query`, expected `key` and `value` to be "
                f"{query.ndim}-D but found {key.ndim}-D and {value.ndim}-D tensors "
                f"respectively (shapes {list(key.shape)} and {list(value.shape)})"
            )
        for name, t, size in (
            ("query", query, self.embed_dim),
            ("key", key, self.kdim),
            ("value", value, self.vdim),
        ):
            if t.shape[-1] != size:
                raise ShapeError(
                    f"MultiheadAttention: {name} must have {size} features (last axis), got "
                    f"shape {list(t.shape)}"
                )
        if tuple(key.shape[:-1]) != tuple(value.shape[:-1]):
            raise ShapeError(
                f"MultiheadAttention: key and value must have the same sequence and batch "
                f"sizes, got {list(key.shape)} and {list(value.shape)}"
            )
        batched = query.ndim == 3
        if kpm is not None and kpm.ndim != (2 if batched else 1):
            raise ShapeAssertionError(
                f"MultiheadAttention: expected `key_padding_mask` to be `None` or "
                f"{'2-D (N, S)' if batched else '1-D (S,)'} for "
                f"{'batched' if batched else 'unbatched'} input but found {kpm.ndim}-D tensor "
                f"instead (shape {list(kpm.shape)})"
            )
        return batched

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """``attn_mask`` ``(L, S)`` or ``(N * num_heads, L, S)`` and ``key_padding_mask``
        ``(N, S)``: bool masks are True where attention is not allowed, float masks are
        added to the scores. ``is_causal`` is PyTorch's hint that ``attn_mask`` is the causal
        mask (which must be given, as PyTorch requires)."""
        if is_causal and attn_mask is None:
            raise RuntimeError(
                "MultiheadAttention: Need attn_mask if specifying the is_causal hint. You may "
                "use the Transformer module method `generate_square_subsequent_mask` to create "
                "this mask."
            )
        batched = self._check(query, key, value, key_padding_mask)
        kpm = key_padding_mask
        if not batched:
            query, key, value = (t.unsqueeze(1) for t in (query, key, value))
            kpm = kpm.unsqueeze(0) if kpm is not None else None
        elif self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        L, N, E = query.shape
        h, d = self.num_heads, self.head_dim
        # F.multi_head_attention_forward's static_k / static_v: keys and values already
        # projected and split into heads, (N * num_heads, S, head_dim), used as they are
        static_k = getattr(self, "_static_k", None)
        static_v = getattr(self, "_static_v", None)
        for name, st in (("static_k", static_k), ("static_v", static_v)):
            if st is not None and (st.ndim != 3 or st.shape[0] != N * h or st.shape[2] != d):
                raise ShapeAssertionError(
                    f"multi_head_attention_forward: expected {name} of shape "
                    f"[{N * h}, S, {d}] (batch * num_heads, S, head_dim), got {list(st.shape)}"
                )
        S = static_k.shape[1] if static_k is not None else key.shape[0]
        if static_v is not None and static_v.shape[1] != S:
            raise ShapeAssertionError(
                f"multi_head_attention_forward: static_v has {static_v.shape[1]} keys, the "
                f"keys have {S}"
            )
        if kpm is not None and tuple(kpm.shape) != (N, S):
            raise ShapeAssertionError(
                f"MultiheadAttention: key_padding_mask must have shape {[N, S]}, got "
                f"{list(kpm.shape)}"
            )
        # PyTorch's is_causal hint: without a key padding mask or weights to return, the
        # causal mask (over the keys as finally laid out) replaces attn_mask
        causal = is_causal and kpm is None and not need_weights
        if causal:
            attn_mask = None
        mask = None
        if attn_mask is not None:
            mask = _float_mask("attn_mask", attn_mask, query)
            want = (L, S) if mask.ndim == 2 else (N * h, L, S)
            if mask.ndim not in (2, 3) or tuple(mask.shape) != want:
                raise ShapeAssertionError(
                    f"MultiheadAttention: attn_mask must have shape {[L, S]} or "
                    f"{[N * h, L, S]}, got {list(mask.shape)}"
                )
            if mask.ndim == 2:
                mask = mask.unsqueeze(0)
        kpm = _float_mask("key_padding_mask", kpm, query) if kpm is not None else None

        b = self.in_proj_bias
        bq, bk, bv = (b[:E], b[E : 2 * E], b[2 * E :]) if b is not None else (None,) * 3
        wq, wk, wv = self._projections()
        q = F.linear(query, wq, bq)
        k = F.linear(key, wk, bk) if static_k is None else None
        v = F.linear(value, wv, bv) if static_v is None else None
        if self.bias_k is not None and self.bias_v is not None:
            k = _core.concat([k, self.bias_k.broadcast_to(1, N, E)], 0)
            v = _core.concat([v, self.bias_v.broadcast_to(1, N, E)], 0)
            mask, kpm = _pad_last(mask), _pad_last(kpm)
        # (n, N, E) -> (N * h, n, d), batch and head merged as PyTorch's
        q = q.reshape(L, N * h, d).transpose(0, 1)
        k = k.reshape(k.shape[0], N * h, d).transpose(0, 1) if k is not None else static_k
        v = v.reshape(v.shape[0], N * h, d).transpose(0, 1) if v is not None else static_v
        if self.add_zero_attn:
            zeros = _core.zeros((N * h, 1, d), dtype=k.dtype.name, device=k.device)
            k = _core.concat([k, zeros], 1)
            v = _core.concat([v, zeros], 1)
            mask, kpm = _pad_last(mask), _pad_last(kpm)
        src = k.shape[1]
        if kpm is not None:
            kpm = kpm.reshape(N, 1, 1, src).broadcast_to(N, h, 1, src).reshape(N * h, 1, src)
            mask = kpm if mask is None else mask + kpm
        if causal:
            mask = _float_mask(
                "attn_mask", tensor(~np.tri(L, src, 0, dtype=bool), device=q.device), q
            ).unsqueeze(0)
        scores = (q * math.sqrt(1.0 / d)) @ k.mT  # (N * h, L, src)
        if mask is not None:
            scores = mask + scores
        p = _softmax(scores, safe=not need_weights)
        if self.dropout > 0.0 and self.training:
            p = F.dropout(p, self.dropout, True)
        out = (p @ v).transpose(0, 1).reshape(L * N, E)
        out = F.linear(out, self.out_proj.weight, self.out_proj.bias)
        out = out.reshape(L, N, out.shape[-1])  # (an output projection may change the width)
        if not batched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        weights = p.reshape(N, h, L, src)
        if average_attn_weights:
            weights = weights.mean(axis=1)
        if not batched:
            weights = weights.squeeze(0)
        return out, weights


class _AttentionArguments:
    """The arguments of :func:`multi_head_attention_forward` in the shape of a
    :class:`MultiheadAttention` (its forward then runs on them as they are)."""

    _check = MultiheadAttention._check
    _projections = MultiheadAttention._projections
    forward = MultiheadAttention.forward

    class _Out:
        def __init__(self, weight: Tensor, bias: Tensor | None) -> None:
            self.weight, self.bias = weight, bias


def multi_head_attention_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight: Tensor | None,
    in_proj_bias: Tensor | None,
    bias_k: Tensor | None,
    bias_v: Tensor | None,
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: Tensor,
    out_proj_bias: Tensor | None,
    training: bool = True,
    key_padding_mask: Tensor | None = None,
    need_weights: bool = True,
    attn_mask: Tensor | None = None,
    use_separate_proj_weight: bool = False,
    q_proj_weight: Tensor | None = None,
    k_proj_weight: Tensor | None = None,
    v_proj_weight: Tensor | None = None,
    static_k: Tensor | None = None,
    static_v: Tensor | None = None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """PyTorch's ``F.multi_head_attention_forward``: :class:`MultiheadAttention`'s forward
    with its weights given as arguments (inputs ``(L, N, E)`` or unbatched ``(L, E)``);
    returns ``(output, weights)``."""
    op = "multi_head_attention_forward"
    if (static_k is not None or static_v is not None) and (
        bias_k is not None or bias_v is not None
    ):
        raise ArgumentAssertionError(f"{op}: bias cannot be added to static key or value.")
    if not isinstance(query, Tensor) or query.shape[-1] != embed_dim_to_check:
        got = list(query.shape) if isinstance(query, Tensor) else type(query).__name__
        raise ShapeError(
            f"{op}: query must have embed_dim_to_check={embed_dim_to_check} features, got {got}"
        )
    e = int(embed_dim_to_check)
    a = _AttentionArguments()
    a.embed_dim, a.num_heads = e, _count(op, "num_heads", num_heads, 1)
    if e % a.num_heads:
        raise ShapeError(f"{op}: embed_dim ({e}) must be divisible by num_heads ({num_heads})")
    a.head_dim = e // a.num_heads
    if use_separate_proj_weight:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise ValueError(
                f"{op}: use_separate_proj_weight needs q_proj_weight, k_proj_weight and "
                "v_proj_weight"
            )
        a._qkv_same_embed_dim = False
        a.q_proj_weight, a.k_proj_weight, a.v_proj_weight = (
            q_proj_weight,
            k_proj_weight,
            v_proj_weight,
        )
        a.kdim, a.vdim = k_proj_weight.shape[1], v_proj_weight.shape[1]
        a.in_proj_weight = None
    else:
        if in_proj_weight is None:
            raise ValueError(f"{op}: in_proj_weight is needed without use_separate_proj_weight")
        a._qkv_same_embed_dim = True
        a.in_proj_weight, a.kdim, a.vdim = in_proj_weight, e, e
    a.in_proj_bias = in_proj_bias
    a.bias_k, a.bias_v = bias_k, bias_v
    a._static_k, a._static_v = static_k, static_v
    a.add_zero_attn = bool(add_zero_attn)
    a.dropout, a.training, a.batch_first = float(dropout_p), bool(training), False
    a.out_proj = _AttentionArguments._Out(out_proj_weight, out_proj_bias)
    return a.forward(
        query,
        key,
        value,
        key_padding_mask=key_padding_mask,
        need_weights=need_weights,
        attn_mask=attn_mask,
        average_attn_weights=average_attn_weights,
        is_causal=is_causal,
    )
