"""``torch.nn.parallel``'s names: :class:`DataParallel` (one process) and
:class:`DistributedDataParallel` (one process per rank, over :mod:`ferrograd.distributed`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..modules import Module
from ..more import DataParallel

__all__ = ["DataParallel", "DistributedDataParallel"]


class DistributedDataParallel(Module):
    """PyTorch's ``DistributedDataParallel`` over :mod:`ferrograd.distributed` (start the
    ranks with ``mpiexec``; ``init_process_group`` first): on construction every rank takes
    rank 0's parameters and buffers; after each ``loss.backward()`` the parameters'
    gradients are averaged over the ranks (in buckets of ``bucket_cap_mb``, one allreduce
    each), so every rank's optimizer takes the same step. A parameter whose gradient no rank
    produced keeps none; one produced on some ranks only is averaged with zeros from the
    others. :meth:`no_sync` skips the averaging (gradient accumulation), as PyTorch's.

    The averaging runs when backward has finished (PyTorch overlaps it with backward). With
    MegEngine's ``GradManager``, use ``make_allreduce_cb`` instead, which overlaps."""

    def __init__(
        self,
        module: Module,
        device_ids: Any = None,
        output_device: Any = None,
        dim: int = 0,
        broadcast_buffers: bool = True,
        process_group: Any = None,
        bucket_cap_mb: float | None = None,
        find_unused_parameters: bool = False,
        check_reduction: bool = False,
        gradient_as_bucket_view: bool = False,
        static_graph: bool = False,
    ) -> None:
        from ... import distributed as dist
        from ...autodiff import _after_backward

        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(
                f"DistributedDataParallel: expected a Module, got {type(module).__name__}"
            )
        if not dist.is_initialized():
            raise RuntimeError(
                "DistributedDataParallel: the default process group has not been initialized; "
                "call fg.distributed.init_process_group() first (ranks started by mpiexec)"
            )
        if process_group is not None:
            raise NotImplementedError(
                "DistributedDataParallel: only the default process group is supported"
            )
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else None
        self.output_device, self.dim = output_device, dim
        self.broadcast_buffers = bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        cap = 25.0 if bucket_cap_mb is None else float(bucket_cap_mb)
        if not cap > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got {cap}")
        self.__dict__["_bucket_bytes"] = int(cap * 2**20)
        self.__dict__["_sync"] = True
        self.__dict__["_armed"] = False
        dist.broadcast_parameters(module, src=0)
        _after_backward.add(self)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if self.broadcast_buffers:
            bufs = list(self.module.buffers())
            if bufs:
                from ... import distributed as dist

                dist.broadcast_parameters(bufs, src=0)
        self.__dict__["_armed"] = self.__dict__["_sync"]
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward passes inside keep their gradients local (they accumulate in ``.grad``);
        the first backward after the block averages the accumulated gradients."""
        old = self.__dict__["_sync"]
        self.__dict__["_sync"] = False
        try:
            yield
        finally:
            self.__dict__["_sync"] = old

    def _after_backward(self) -> None:
        if not self.__dict__["_armed"]:
            return
        self.__dict__["_armed"] = False
        self._average_gradients()

    def _average_gradients(self) -> None:
        from ... import distributed as dist
        from ..._tensor import tensor
        from ...autodiff import no_grad

        params = [p for p in self.module.parameters() if p.requires_grad]
        size = dist.get_world_size()
        # buckets of one dtype and device, in reverse of definition order (as PyTorch's)
        groups: dict[tuple[str, str], list] = {}
        for p in reversed(params):
            groups.setdefault((p.dtype.name, str(p.device)), []).append(p)
        with no_grad():
            for (dtype, device), members in groups.items():
                wire = "float32" if dtype in ("float16", "bfloat16") else dtype
                start = 0
                while start < len(members):
                    bucket, nbytes = [], 0
                    while start < len(members) and (not bucket or nbytes < self._bucket_bytes):
                        bucket.append(members[start])
                        nbytes += members[start].numel() * np.dtype(wire).itemsize
                        start += 1
                    sizes = [p.numel() for p in bucket]
                    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
                    buf = np.zeros(int(offsets[-1]) + len(bucket), dtype=wire)
                    for j, p in enumerate(bucket):
                        if p.grad is not None:
                            buf[offsets[j] : offsets[j + 1]] = p.grad.numpy().reshape(-1)
                            buf[offsets[-1] + j] = 1
                    flat = tensor(buf)
                    dist.all_reduce(flat, op="sum")
                    out = flat.numpy()
                    for j, p in enumerate(bucket):
                        if out[offsets[-1] + j] == 0:
                            continue  # no rank produced this gradient
                        g = out[offsets[j] : offsets[j + 1]].reshape(p.shape) / size
                        g = tensor(g, dtype=dtype, device=device)
                        if p.grad is None:
                            p.grad = g
                        else:
                            p.grad.copy_(g)
