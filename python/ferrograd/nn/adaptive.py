"""``nn.AdaptiveLogSoftmaxWithLoss``: PyTorch's efficient softmax approximation (Grave et
al., 2016) with its submodule names and layouts (``head`` a ``Linear``, ``tail`` a
``ModuleList`` of ``Sequential(Linear, Linear)`` projections without bias), so state dicts
load both ways; written with differentiable ops so gradients reach the input and every
parameter."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._core import Tensor
from .._tensor import tensor
from . import functional as F
from ._errors import ArgumentRuntimeError
from .modules import Linear, Module, ModuleList, Sequential

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


def _shape(t: Any) -> str:
    return f"torch.Size({list(t.shape)})"


class AdaptiveLogSoftmaxWithLoss(Module):
    """``torch.nn.AdaptiveLogSoftmaxWithLoss``: a head over the ``cutoffs[0]`` most frequent
    classes plus one entry per cluster, and per cluster a low-rank projection
    (``in_features -> in_features // div_value**(i+1) -> cluster size``).

    ``forward(input, target)`` returns ``_ASMoutput(output, loss)``: the target's log
    probability per example and their negated mean; ``log_prob(input)`` gives the full
    ``(N, n_classes)`` log distribution and ``predict(input)`` its argmax."""

    def __init__(
        self,
        in_features: int,
        n_classes: int,
        cutoffs: Sequence[int],
        div_value: float = 4.0,
        head_bias: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (
            (cutoffs != sorted(cutoffs))
            or (min(cutoffs) <= 0)
            or (max(cutoffs) > (n_classes - 1))
            or (len(set(cutoffs)) != len(cutoffs))
            or any(int(c) != c for c in cutoffs)
        ):
            raise ValueError(
                "cutoffs should be a sequence of unique, positive "
                "integers sorted in an increasing order, where "
                "each value is between 1 and n_classes-1"
            )
        if isinstance(in_features, (int, np.integer)) and in_features < 0:
            # PyTorch's Linear refuses a negative size with a RuntimeError
            raise ArgumentRuntimeError(
                f"Trying to create tensor with negative dimension {in_features}"
            )
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias

        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters

        self.head = Linear(self.in_features, self.head_size, bias=self.head_bias, **factory_kwargs)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(self.in_features // (self.div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            projection = Sequential(
                Linear(self.in_features, hsz, bias=False, **factory_kwargs),
                Linear(hsz, osz, bias=False, **factory_kwargs),
            )
            self.tail.append(projection)

    def reset_parameters(self) -> None:
        """Re-initialises every projection as the constructor does."""
        import math

        from . import init

        for m in self.modules():
            if isinstance(m, Linear):
                bound = 1.0 / math.sqrt(m.in_features) if m.in_features > 0 else 0.0
                for p in (m.weight, m.bias):
                    if p is not None:
                        init.uniform_(p, -bound, bound)

    # ------------------------------------------------------------------------------ forward

    def forward(self, input_: Tensor, target_: Any) -> _ASMoutput:
        target_t = target_ if isinstance(target_, Tensor) else tensor(np.asarray(target_))
        targ_dim = target_t.ndim
        if targ_dim == 1:
            if input_.shape[0] != target_t.shape[0]:
                raise RuntimeError(
                    "Input and target should have the same size in the batch dimension."
                )
            if input_.ndim != 2:
                raise RuntimeError(
                    "1D target tensor expects 2D input tensors, "
                    f"but found inputs with size {_shape(input_)}"
                )
        elif targ_dim == 0:
            if input_.ndim != 1:
                raise RuntimeError(
                    "0D target tensor expects 1D input tensors, "
                    f"but found inputs with size {_shape(input_)}"
                )
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        target_np = np.asarray(target_t.numpy())
        if not (np.issubdtype(target_np.dtype, np.integer) or target_np.dtype == np.bool_):
            raise RuntimeError(
                f"AdaptiveLogSoftmaxWithLoss: target must hold class indices (an integer "
                f"tensor), got dtype {target_t.dtype}"
            )

        is_batched = targ_dim > 0
        input = input_ if is_batched else input_.unsqueeze(0)
        target = target_np.reshape(-1).astype(np.int64)
        batch_size = target.shape[0]
        device = input.device

        if batch_size and (target.min() < 0 or target.max() >= self.n_classes):
            raise RuntimeError(
                f"Target values should be in [0, {self.n_classes - 1}], "
                f"but values in range [{int(target.min())}, {int(target.max())}] "
                "were found. "
            )

        # the head's entry for each row: the class itself in the shortlist, else its cluster
        gather_inds = target.copy()
        output = None
        cutoff_values = [0, *self.cutoffs]
        for i in range(1, len(cutoff_values) - 1):
            low_idx, high_idx = cutoff_values[i], cutoff_values[i + 1]
            rows = np.nonzero((target >= low_idx) & (target < high_idx))[0]
            if rows.size == 0:
                continue
            gather_inds[rows] = self.shortlist_size + i - 1
            row_indices = tensor(rows.astype(np.int64), device=device)
            relative_target = tensor((target[rows] - low_idx).astype(np.int64), device=device)
            cluster_output = self.tail[i - 1](input.index_select(0, row_indices))
            cluster_logprob = F.log_softmax(cluster_output, dim=1)
            local_logprob = cluster_logprob.gather(1, relative_target.unsqueeze(1)).squeeze(1)
            if output is None:
                output = input.new_zeros(batch_size)
            output = output.index_copy(0, row_indices, local_logprob)

        head_output = self.head(input)
        head_logprob = F.log_softmax(head_output, dim=1)
        inds = tensor(gather_inds.astype(np.int64), device=device).unsqueeze(1)
        head_part = head_logprob.gather(1, inds).squeeze(1)
        output = head_part if output is None else output + head_part
        loss = (-output).mean()

        if not is_batched:
            output = output.squeeze(0)
        return _ASMoutput(output, loss)

    # ------------------------------------------------------------------ full distribution

    def _get_full_log_prob(self, input: Tensor, head_output: Tensor) -> Tensor:
        """The log of the full distribution from ``input`` and ``self.head(input)``."""
        from .. import cat

        head_logprob = F.log_softmax(head_output, dim=1)
        if input.ndim != 2 or head_output.ndim != 2:
            raise RuntimeError(
                f"AdaptiveLogSoftmaxWithLoss: expected a 2D input (N, in_features), got size "
                f"{_shape(input)}"
            )
        parts = [head_logprob[:, : self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster_output = self.tail[i](input)
            cluster_logprob = F.log_softmax(cluster_output, dim=1)
            parts.append(cluster_logprob + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return cat(parts, dim=1)

    def log_prob(self, input: Tensor) -> Tensor:
        """Log probabilities of all ``n_classes`` classes: ``(N, in_features) ->
        (N, n_classes)``."""
        head_output = self.head(input)
        return self._get_full_log_prob(input, head_output)

    def predict(self, input: Tensor) -> Tensor:
        """The most probable class of each example (``log_prob(input).argmax(dim=1)``,
        evaluating the tail clusters only for the rows whose head argmax is a cluster)."""
        head_output = self.head(input)
        if head_output.ndim < 2:
            F.log_softmax(head_output, dim=1)  # PyTorch's IndexError for a 1D input
        output = np.asarray(head_output.argmax(dim=1).numpy()).astype(np.int64)
        not_in_shortlist = output >= self.shortlist_size
        if not not_in_shortlist.any():
            return tensor(output, device=input.device)
        if not_in_shortlist.all():
            log_prob = self._get_full_log_prob(input, head_output)
            return log_prob.argmax(dim=1)
        rows = tensor(np.nonzero(not_in_shortlist)[0].astype(np.int64), device=input.device)
        log_prob = self._get_full_log_prob(
            input.index_select(0, rows), head_output.index_select(0, rows)
        )
        output[not_in_shortlist] = np.asarray(log_prob.argmax(dim=1).numpy())
        return tensor(output, device=input.device)
