"""``torch.nn.parallel``'s names: :class:`DataParallel` (one process) and
:class:`DistributedDataParallel` (one process per rank, over :mod:`ferrograd.distributed`)."""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...distributed import _pack_gradient, _wire_dtype
from ..modules import Module
from ..more import DataParallel

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]


class _Bucket:
    """Parameters whose gradients are reduced by one allreduce: one dtype and device, a flat
    buffer with their gradients back to back, then one presence count per parameter (how
    many ranks produced its gradient)."""

    __slots__ = ("device", "dtype", "index", "members", "size", "wire")

    def __init__(self, index: int, key: tuple[str, str], members: list[tuple[Any, int, int]]):
        self.index = index
        self.dtype, self.device = key
        self.wire = _wire_dtype(self.dtype)
        self.members = members  # (parameter, offset, numel)
        self.size = sum(n for _, _, n in members)


class _Round:
    """One synced backward's buckets: their buffers, which members are packed, the
    allreduces started (in bucket order, the same on every rank)."""

    def __init__(self, buckets: list[_Bucket], where: dict[int, tuple[_Bucket, int, int]]) -> None:
        self.buckets = buckets
        self.where = where  # id(param) -> (bucket, member, index in parameters())
        self.buffers = [np.zeros(b.size + len(b.members), b.wire) for b in buckets]
        self.packed: list[set[int]] = [set() for _ in buckets]
        self.started: list[tuple[Any, Any]] = []  # (flat tensor, Work), in bucket order


def _delivered_by_grad_manager(p: Any) -> bool:
    """Whether ``p``'s gradient comes from a GradManager's backward (not ``loss.backward()``):
    a manager that records ``p`` takes it over from the autograd key, so only its backward
    reaches ``p``. (Where both could, the averaging after backward still covers ``p``.)"""
    from ...autodiff import _recording_managers

    for gm in list(_recording_managers):
        key = gm._key
        if key is not None and key.is_attached_to(p):
            return True
    return False


def _remove_hooks(handles: list[Any]) -> None:
    for h in handles:
        h.remove()


class DistributedDataParallel(Module):
    """PyTorch's ``DistributedDataParallel`` over :mod:`ferrograd.distributed` (start the
    ranks with ``mpiexec``; ``init_process_group`` first): on construction every rank takes
    rank 0's parameters and buffers; each ``loss.backward()`` after a forward through it
    averages the parameters' gradients over the ranks, so every rank's optimizer takes the
    same step. With ``process_group`` (from :func:`ferrograd.distributed.new_group`) "the
    ranks" are that group's, and its first rank's weights are the start. A parameter whose gradient no rank produced keeps none; one produced on some
    ranks only is averaged with zeros from the others. :meth:`no_sync` skips the averaging
    (gradient accumulation), as PyTorch's.

    The averaging overlaps backward, as PyTorch's: the parameters are put in buckets in
    reverse of definition order (the first bucket about 1 MB, the others about
    ``bucket_cap_mb``, one dtype and device each); a post-accumulate-grad hook on each
    parameter packs its accumulated ``.grad`` into its bucket, and a bucket whose gradients
    are all there starts a non-blocking allreduce (buckets start in order, the same on every
    rank). When backward ends, the buckets still open (a parameter without a gradient on this
    rank) are reduced with zeros for it, every allreduce is waited for and the means are
    written into ``.grad``. ``events`` logs ``(what, index, time.perf_counter())`` of the last
    synced backward: ``"grad"`` (parameter index, in ``module.parameters()`` order),
    ``"start"`` / ``"done"`` (bucket index), ``"backward_end"``. Where hooks cannot be
    registered, the whole averaging runs after backward. With MegEngine's ``GradManager``, use
    ``make_allreduce_cb`` instead (it overlaps too); a GradManager backward leaves this
    wrapper's hooks idle."""

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
        pg = dist._resolve("DistributedDataParallel", process_group)
        if pg is None:
            raise ValueError("DistributedDataParallel: this rank is not a member of process_group")
        self.__dict__["_pg"] = pg
        self.__dict__["process_group"] = pg
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else None
        self.output_device, self.dim = output_device, dim
        self.broadcast_buffers = bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        cap = 25.0 if bucket_cap_mb is None else float(bucket_cap_mb)
        if not cap > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got {cap}")
        self.__dict__["_bucket_bytes"] = int(cap * 2**20)
        # PyTorch's first bucket is small (1 MB), so communication starts early
        self.__dict__["_first_bucket_bytes"] = min(2**20, int(cap * 2**20))
        self.__dict__["_sync"] = True
        self.__dict__["_armed"] = False
        self.__dict__["_plan"] = None  # (key, buckets, {id(param): (bucket, member)})
        self.__dict__["_round"] = None
        self.__dict__["events"] = []
        self.__dict__["_hooked"] = self._register_hooks()
        dist.broadcast_parameters(module, src=pg.ranks[0], group=pg)
        _after_backward.add(self)

    def _register_hooks(self) -> bool:
        """A post-accumulate-grad hook on every parameter that requires grad; False (and no
        hook) where that is not possible: the averaging then runs after backward."""
        ref = weakref.ref(self)

        def ready(p: Any) -> None:
            ddp = ref()
            if ddp is not None:
                ddp._grad_ready(p)

        handles: list[Any] = []
        try:
            for p in self.module.parameters():
                if p.requires_grad:
                    handles.append(p.register_post_accumulate_grad_hook(ready))
        except (RuntimeError, TypeError, AttributeError):
            _remove_hooks(handles)
            return False
        self.__dict__["_hook_handles"] = handles
        weakref.finalize(self, _remove_hooks, handles)
        return True

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if self.broadcast_buffers:
            bufs = list(self.module.buffers())
            if bufs:
                from ... import distributed as dist

                pg = self.__dict__["_pg"]
                dist.broadcast_parameters(bufs, src=pg.ranks[0], group=pg)
        self.__dict__["_armed"] = self.__dict__["_sync"]
        # (what a backward that raised left behind is dropped)
        self.__dict__["_round"] = None
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

    # -- buckets --------------------------------------------------------------------------

    def _buckets(self) -> tuple[list[_Bucket], dict[int, tuple[_Bucket, int, int]]]:
        """The buckets of the parameters that require grad (planned again when they change),
        and where each parameter is: ``id(p) -> (bucket, member, index in parameters())``."""
        params = [p for p in self.module.parameters() if p.requires_grad]
        key = tuple((id(p), tuple(p.shape), p.dtype.name, str(p.device)) for p in params)
        plan = self.__dict__["_plan"]
        if plan is not None and plan[0] == key:
            return plan[1], plan[2]
        index = {id(p): i for i, p in enumerate(self.module.parameters())}
        buckets: list[_Bucket] = []
        where: dict[int, tuple[_Bucket, int, int]] = {}
        open_: dict[tuple[str, str], tuple[list, int]] = {}

        def close(k: tuple[str, str]) -> None:
            members, _ = open_.pop(k)
            b = _Bucket(len(buckets), k, members)
            for j, (t, _, _) in enumerate(members):
                where[id(t)] = (b, j, index.get(id(t), -1))
            buckets.append(b)

        # in reverse of definition order: roughly the order gradients become final
        for p in reversed(params):
            k = (p.dtype.name, str(p.device))
            members, nbytes = open_.get(k, ([], 0))
            n = p.numel()
            members.append((p, sum(m for _, _, m in members), n))
            nbytes += n * np.dtype(_wire_dtype(k[0])).itemsize
            open_[k] = (members, nbytes)
            cap = self._first_bucket_bytes if not buckets else self._bucket_bytes
            if nbytes >= cap:
                close(k)
        for k in list(open_):
            close(k)
        self.__dict__["_plan"] = (key, buckets, where)
        return buckets, where

    def _begin_round(self) -> _Round:
        rnd = _Round(*self._buckets())
        self.__dict__["_round"] = rnd
        self.__dict__["events"] = []
        return rnd

    @staticmethod
    def _pack(rnd: _Round, b: _Bucket, j: int) -> None:
        """Copies member ``j``'s ``.grad`` (if any) into its bucket's buffer."""
        p, off, _ = b.members[j]
        rnd.packed[b.index].add(j)
        g = p.grad
        if g is None:
            return
        _pack_gradient(rnd.buffers[b.index], off, g, b.size + j)

    def _grad_ready(self, p: Any) -> None:
        """``p``'s post-accumulate-grad hook: pack it, start the buckets that are ready."""
        if not self.__dict__["_armed"] or _delivered_by_grad_manager(p):
            return  # no_sync, a backward not through this wrapper, or a GradManager's
        rnd = self.__dict__["_round"] or self._begin_round()
        w = rnd.where.get(id(p))
        if w is None:
            return
        b, j, index = w
        if j in rnd.packed[b.index] or len(rnd.started) > b.index:
            return  # (already packed, or its allreduce already started)
        self._pack(rnd, b, j)
        self.events.append(("grad", index, time.perf_counter()))
        self._start_ready(rnd, force=False)

    def _start_ready(self, rnd: _Round, force: bool) -> None:
        """Starts the allreduce of each bucket whose members are all packed, in bucket order;
        ``force``: of every bucket, packing what each member has now (the fallback's rule)."""
        from ... import distributed as dist
        from ..._tensor import tensor

        while len(rnd.started) < len(rnd.buckets):
            b = rnd.buckets[len(rnd.started)]
            if len(rnd.packed[b.index]) < len(b.members):
                if not force:
                    return
                for j in range(len(b.members)):
                    if j not in rnd.packed[b.index]:
                        self._pack(rnd, b, j)
            flat = tensor(rnd.buffers[b.index])
            # every rank's buckets are alike by construction: no shape agreement round
            work = dist._all_reduce(self.__dict__["_pg"], flat, "sum", True)
            rnd.started.append((flat, work))
            self.events.append(("start", b.index, time.perf_counter()))

    def _after_backward(self) -> None:
        if not self.__dict__["_armed"]:
            return
        self.__dict__["_armed"] = False
        rnd, self.__dict__["_round"] = self.__dict__["_round"], None
        if not self.__dict__["_hooked"]:
            self._average_gradients()
            return
        self._finish_round(rnd)

    def _finish_round(self, rnd: _Round | None) -> None:
        """Starts what is left, waits for every bucket, writes the means into ``.grad``."""
        from ..._tensor import tensor
        from ...autodiff import no_grad

        if rnd is None:  # no hook ran (no gradient reached a parameter)
            rnd = self._begin_round()
        self.events.append(("backward_end", -1, time.perf_counter()))
        self._start_ready(rnd, force=True)
        size = self.__dict__["_pg"].group_size
        with no_grad():
            for b, (flat, work) in zip(rnd.buckets, rnd.started):
                work.wait()
                done = getattr(work, "_completed_at", None) or time.perf_counter()
                self.events.append(("done", b.index, done))
                out = flat.numpy()
                for j, (p, off, n) in enumerate(b.members):
                    if out[b.size + j] == 0:
                        continue  # no rank produced this gradient
                    g = out[off : off + n].reshape(tuple(p.shape)) / size
                    g = tensor(g, dtype=b.dtype, device=b.device)
                    if p.grad is None:
                        p.grad = g
                    else:
                        p.grad.copy_(g)

    def _average_gradients(self) -> None:
        from ... import distributed as dist
        from ..._tensor import tensor
        from ...autodiff import no_grad

        params = [p for p in self.module.parameters() if p.requires_grad]
        size = self.__dict__["_pg"].group_size
        # buckets of one dtype and device, in reverse of definition order (as PyTorch's)
        groups: dict[tuple[str, str], list] = {}
        for p in reversed(params):
            groups.setdefault((p.dtype.name, str(p.device)), []).append(p)
        with no_grad():
            for (dtype, device), members in groups.items():
                wire = _wire_dtype(dtype)
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
                            _pack_gradient(buf, int(offsets[j]), p.grad, int(offsets[-1]) + j)
                    flat = tensor(buf)
                    dist._all_reduce(self.__dict__["_pg"], flat, "sum", False)
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


def data_parallel(
    module: Module,
    inputs: Any,
    device_ids: Any = None,
    output_device: Any = None,
    dim: int = 0,
    module_kwargs: Any = None,
) -> Any:
    """``torch.nn.parallel.data_parallel``: ``module`` applied to ``inputs`` (a tensor or a
    tuple of them) in this process, as :class:`DataParallel` does."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    return module(*inputs, **(module_kwargs or {}))
