"""``torch.distributed``'s point-to-point and rooted collectives over MPI: ``send``/``recv``/
``isend``/``irecv``, ``batch_isend_irecv`` with ``P2POp``, ``gather``, ``scatter``,
``all_to_all``, ``all_to_all_single``, ``new_group`` and ``group=``, ``ReduceOp`` as ``op=``;
bad arguments raising on the ranks instead of hanging the job; ``shard`` and
``DistributedSampler`` dealing PyTorch's shuffled indices.

The multi-rank checks run this file under ``mpiexec -n N python -m mpi4py`` with the names of
the scenarios to run (the functions ``scenario_*`` below); every rank asserts, and a failing
rank ends the job with a non-zero status."""

from __future__ import annotations

import inspect
import os
import sys

import ferrograd as fg
import ferrograd.distributed as dist
import numpy as np
import pytest
from mpi_helpers import close, launch, needs_mpi, on_cpu

HERE = os.path.abspath(__file__)
FLOATS = ("float16", "bfloat16", "float32", "float64")


# -- scenarios, run on every rank -----------------------------------------------------------


def program(lib: str) -> dict[str, np.ndarray]:
    """One program over ``lib``'s ``distributed`` module (``"fg"`` or ``"torch"``, the latter
    over gloo): every new call, on float64 data; returns what each rank ends up with."""
    if lib == "fg":
        D, make = dist, lambda a: fg.tensor(np.asarray(a, dtype=np.float64))
    else:
        import torch
        import torch.distributed as D

        def make(a):
            return torch.from_numpy(np.array(a, dtype=np.float64))

    r, n = D.get_rank(), D.get_world_size()
    got: dict[str, np.ndarray] = {}
    last = n - 1
    # gather to the last rank
    gl = [make(np.zeros((2, 3))) for _ in range(n)] if r == last else None
    D.gather(make(np.arange(6.0).reshape(2, 3) + 10 * r), gl, dst=last)
    if gl is not None:
        got["gather"] = np.stack([x.numpy() for x in gl])
    # scatter from the last rank, async
    sl = [make(np.full(4, 7.0 * k + 1)) for k in range(n)] if r == last else None
    x = make(np.zeros(4))
    w = D.scatter(x, sl, src=last, async_op=True)
    w.wait()
    assert w.is_completed()
    got["scatter"] = x.numpy()
    # all_to_all
    outs = [make(np.zeros(3)) for _ in range(n)]
    D.all_to_all(outs, [make(np.full(3, 100.0 * r + k)) for k in range(n)])
    got["all_to_all"] = np.stack([o.numpy() for o in outs])
    # all_to_all_single, equal parts and uneven ones
    o = make(np.zeros((2 * n, 2)))
    D.all_to_all_single(o, make(np.arange(4.0 * n).reshape(2 * n, 2) + 1000 * r))
    got["all_to_all_single"] = o.numpy()
    ins = [(r + k) % 3 + 1 for k in range(n)]
    outs_sz = [(k + r) % 3 + 1 for k in range(n)]
    o = make(np.zeros((sum(outs_sz), 2)))
    w = D.all_to_all_single(
        o, make(np.arange(2.0 * sum(ins)).reshape(-1, 2) + 50 * r), outs_sz, ins, async_op=True
    )
    w.wait()
    got["all_to_all_single_uneven"] = o.numpy()
    # a ring of isend/irecv through batch_isend_irecv
    buf = make(np.zeros(5))
    ops = [
        D.P2POp(D.isend, make(np.arange(5.0) * (r + 1)), (r + 1) % n),
        D.P2POp(D.irecv, buf, (r - 1) % n),
    ]
    for w in D.batch_isend_irecv(ops):
        w.wait()
    got["ring"] = buf.numpy()
    # blocking send/recv; recv from any rank returns the sender
    if r == 0:
        senders = []
        for _ in range(n - 1):
            b = make(np.zeros(2))
            s = D.recv(b, tag=3)
            senders.append(s)
            assert np.array_equal(b.numpy(), np.full(2, 3.0 * s)), (s, b)
        got["senders"] = np.array(sorted(senders), dtype=np.float64)
    else:
        D.send(make(np.full(2, 3.0 * r)), 0, tag=3)
    # isend/irecv between ranks 0 and 1, two tags crossing
    if r in (0, 1):
        a, b = make(np.zeros(3)), make(np.zeros(3))
        w1 = D.irecv(a, 1 - r, tag=1)
        w2 = D.irecv(b, 1 - r, tag=2)
        s2 = D.isend(make(np.full(3, 20.0 + r)), 1 - r, tag=2)
        s1 = D.isend(make(np.full(3, 10.0 + r)), 1 - r, tag=1)
        for w in (w1, w2, s1, s2):
            w.wait()
        got["tags"] = np.stack([a.numpy(), b.numpy()])
    # a group of the first and last rank: collectives with global src/dst
    g = D.new_group([0, last])
    t = make([1.0 + r])
    if r in (0, last):
        D.all_reduce(t, group=g)
        got["group_all_reduce"] = t.numpy()
        b = make([5.0 * r])
        D.broadcast(b, src=last, group=g)
        got["group_broadcast"] = b.numpy()
        gl = [make([0.0]) for _ in range(2)] if r == last else None
        D.gather(make([2.0 * r]), gl, dst=last, group=g)
        if gl is not None:
            got["group_gather"] = np.concatenate([x.numpy() for x in gl])
        got["group_rank"] = np.array([D.get_rank(g), D.get_world_size(g)], dtype=np.float64)
        D.destroy_process_group(g)
    else:
        got["group_rank"] = np.array([D.get_rank(g), D.get_world_size(g)], dtype=np.float64)
    # reduce to the last rank, blocking and async (what the other ranks' tensors hold after
    # it is unspecified: gloo leaves partial results there, ferrograd their own values)
    t = make([r + 1.0, 2.0 * r])
    D.reduce(t, dst=last)
    t2 = make([r + 1.0, -2.0 * r])
    D.reduce(t2, last, op=D.ReduceOp.MAX, async_op=True).wait()
    if r == last:
        got["reduce"], got["reduce_max"] = t.numpy(), t2.numpy()
    # picklable objects
    objs = [None] * n if r == last else None
    D.gather_object({"rank": r, "sq": r * r}, objs, dst=last)
    if objs is not None:
        got["gather_object"] = np.array([o["sq"] + 10 * o["rank"] for o in objs], np.float64)
    out = [None]
    D.scatter_object_list(out, [(k, "x" * k) for k in range(n)] if r == 0 else None, src=0)
    got["scatter_object_list"] = np.array([out[0][0], len(out[0][1])], np.float64)
    # the reduction names as op=
    t = make([r + 2.0, -1.0 - r])
    D.all_reduce(t, op=D.ReduceOp.PRODUCT)
    got["product"] = t.numpy()
    t = make([r + 2.0, -1.0 - r])
    D.all_reduce(t, op=D.ReduceOp.MIN)
    got["min"] = t.numpy()
    assert D.get_backend() in ("mpi", "gloo")
    return got


def scenario_against_torch() -> None:
    """The same program on ferrograd and on torch.distributed (gloo) from the same data:
    every rank ends up with the same values."""
    import torch.distributed as tdist

    r, n = dist.get_rank(), dist.get_world_size()
    port = dist.all_gather(fg.tensor([29900 + os.getpid() % 500]))[0].item()
    tdist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{int(port)}", rank=r, world_size=n
    )
    try:
        want = program("torch")
        got = program("fg")
    finally:
        tdist.destroy_process_group()
    assert got.keys() == want.keys(), (sorted(got), sorted(want))
    for k in want:
        close(got[k], want[k], f"{k} against torch", tol=0)


def scenario_values() -> None:
    """What each call computes, for every float dtype (exact values in each), on CUDA-less
    CPU tensors, non-contiguous ones and in the async form."""
    r, n = dist.get_rank(), dist.get_world_size()
    for dt in FLOATS:
        # gather to rank 0
        gl = [fg.zeros(2, dtype=dt) for _ in range(n)] if r == 0 else None
        dist.gather(fg.tensor([r + 0.5, -r]).astype(dt), gl)
        if r == 0:
            for k, x in enumerate(gl):
                assert x.dtype == fg.tensor([0.0]).astype(dt).dtype
                assert np.array_equal(x.astype("float64").numpy(), [k + 0.5, -k]), (dt, k)
        # scatter from rank 0 into a non-contiguous tensor
        base = fg.zeros(3, 2, dtype=dt)
        view = base.T[0]  # every other element
        sl = [fg.tensor([1.0 * k, 2.0, 3.0]).astype(dt) for k in range(n)] if r == 0 else None
        dist.scatter(view, sl, src=0)
        assert np.array_equal(base.astype("float64").numpy()[:, 0], [r, 2.0, 3.0]), dt
        assert np.array_equal(base.astype("float64").numpy()[:, 1], [0.0, 0.0, 0.0]), dt
        # all_to_all of tensors of different sizes (MPI allows them)
        outs = [fg.zeros(r + 1, dtype=dt) for _ in range(n)]
        dist.all_to_all(outs, [fg.full((k + 1,), 8.0 * r + k, dtype=dt) for k in range(n)])
        for k in range(n):
            assert np.array_equal(outs[k].astype("float64").numpy(), np.full(r + 1, 8.0 * k + r))
        # point to point
        if r < 2 and n > 1:
            peer = 1 - r
            mine = fg.tensor([1.5 * r, 4.0]).astype(dt)
            into = fg.zeros(2, dtype=dt)
            works = dist.batch_isend_irecv(
                [dist.P2POp(dist.irecv, into, peer), dist.P2POp(dist.isend, mine, peer)]
            )
            for w in works:
                assert w.wait() is True
            assert works[0].source_rank() == peer
            assert np.array_equal(into.astype("float64").numpy(), [1.5 * peer, 4.0]), dt
    # all_to_all_single with one tensor as output and input: the parts exchanged as if
    # from a copy (torch's gloo backend overwrites parts it has yet to send)
    t = fg.tensor(np.arange(2.0 * n) + 100 * r)
    dist.all_to_all_single(t, t)
    want = np.concatenate([[2.0 * r + 100 * k, 2.0 * r + 1 + 100 * k] for k in range(n)])
    assert t.numpy().tolist() == want.tolist(), t
    # reduce with op="mean": the mean on dst, the others keep their values
    t = fg.tensor([1.0 + r, 2.0])
    dist.reduce(t, dst=n - 1, op="mean")
    assert t.numpy().tolist() == (
        [np.mean(np.arange(n)) + 1, 2.0] if r == n - 1 else [1.0 + r, 2.0]
    )
    # integers and bools travel too
    if r < 2:
        m = fg.tensor(np.array([True, False, r == 1]))
        if r == 0:
            dist.send(m, 1)
        else:
            into = fg.tensor(np.zeros(3, dtype=bool))
            assert dist.recv(into, 0) == 0
            assert into.numpy().tolist() == [True, False, False]
    # integer reductions by name
    t = fg.tensor(np.array([6, 5, 12], dtype=np.int64) + r)
    dist.all_reduce(t, op=dist.ReduceOp.BAND)
    want = np.bitwise_and.reduce([np.array([6, 5, 12]) + k for k in range(n)])
    assert t.numpy().tolist() == want.tolist()


def scenario_completion_order() -> None:
    """Requests complete in any order: a receive started first may wait for a send this rank
    starts after waiting on another request."""
    r = dist.get_rank()
    if r == 0:
        late = fg.zeros(2, dtype="float64")
        w = dist.irecv(late, 1)  # rank 1 sends it only after both messages below arrived
        dist.isend(fg.full((2,), 1.0, dtype="float64"), 1).wait()
        dist.send(fg.full((2,), 2.0, dtype="float64"), 1)
        assert w.wait(timeout=30), "the early receive did not complete"
        assert late.numpy().tolist() == [3.0, 3.0]
    elif r == 1:
        a, b = fg.zeros(2, dtype="float64"), fg.zeros(2, dtype="float64")
        dist.recv(a, 0)
        dist.recv(b, 0)
        dist.send(a + b, 0)


def raises(kind, match: str, call) -> None:
    with pytest.raises(kind, match=match):
        call()


def scenario_bad_input() -> None:
    """Bad arguments raise a clear error where they were passed, the other ranks raise too
    (naming that rank) instead of waiting for it, and later collectives run as usual."""
    r, n = dist.get_rank(), dist.get_world_size()
    x = fg.zeros(2, dtype="float64")

    # a gather_list of the wrong length on dst only
    bad = [fg.zeros(2, dtype="float64")] * (n + 1) if r == 0 else None
    if r == 0:
        raises((ValueError, RuntimeError), "gather_list must hold", lambda: dist.gather(x, bad))
    else:
        raises(ValueError, "rank 0 passed", lambda: dist.gather(x, bad))
    # gather_list given on a rank other than dst (PyTorch's ValueError there)
    extra = [fg.zeros(2, dtype="float64") for _ in range(n)]
    if r == n - 1:
        raises(ValueError, "gather_list must not", lambda: dist.gather(x, extra, dst=0))
    else:
        lst = extra if r == 0 else None
        raises(ValueError, f"rank {n - 1} passed", lambda: dist.gather(x, lst, dst=0))
    # a tensor of another shape or dtype on one rank
    odd = fg.zeros(3, dtype="float64") if r == 1 else x
    lst = [fg.zeros(2, dtype="float64") for _ in range(n)] if r == 0 else None
    raises(ValueError, "one shape and dtype", lambda: dist.gather(odd, lst))
    odd = x.astype("float32") if r == 1 else x
    lst = [fg.zeros(2, dtype="float64") for _ in range(n)] if r == 0 else None
    raises(ValueError, "one shape and dtype", lambda: dist.scatter(odd, lst))
    # dst / src out of range, or not in the group
    raises(
        (ValueError, RuntimeError), r"dst must be a rank in \[0, ", lambda: dist.gather(x, dst=n)
    )
    raises((ValueError, RuntimeError), r"src must be a rank", lambda: dist.scatter(x, None, src=-1))
    # all_to_all: lists of the wrong length, pairs of different shapes, mixed dtypes
    raises((ValueError, RuntimeError), "must hold", lambda: dist.all_to_all([x], [x]))
    outs = [fg.zeros(2 + (r == 0 and k == 1), dtype="float64") for k in range(n)]
    raises(
        (ValueError, RuntimeError),
        "receives it into",
        lambda: dist.all_to_all(outs, [fg.zeros(2, dtype="float64") for _ in range(n)]),
    )
    raises(
        ValueError,
        "one dtype",
        lambda: dist.all_to_all_single(fg.zeros(2 * n), fg.zeros(2 * n, dtype="float64")),
    )
    # all_to_all_single: split sizes that do not add up, or do not match the other ranks'
    raises(
        (ValueError, RuntimeError),
        "adds up to",
        lambda: dist.all_to_all_single(x, x, [1] * n, [3] + [0] * (n - 1)),
    )
    ins = [1] * n
    outs_sz = [1] * n
    if r == 0:
        ins = [2] + [1] * (n - 2) + [0]
    a = fg.zeros(sum(outs_sz), dtype="float64")
    b = fg.zeros(sum(ins), dtype="float64")
    raises(
        (ValueError, RuntimeError),
        "expects",
        lambda: dist.all_to_all_single(a, b, outs_sz, ins),
    )
    # point to point: own rank, negative tag, unknown op, a message of another shape or dtype
    raises(ValueError, "own rank", lambda: dist.send(x, r))
    raises((ValueError, RuntimeError), "tag", lambda: dist.isend(x, (r + 1) % n, tag=-1))
    raises(ValueError, "isend or", lambda: dist.P2POp(dist.send, x, (r + 1) % n))
    raises(ValueError, "P2POp", lambda: dist.batch_isend_irecv([x]))
    raises(ValueError, "non-empty", lambda: dist.batch_isend_irecv([]))
    if r == 0:
        dist.send(fg.zeros(3, dtype="float64"), 1, tag=9)
        dist.send(fg.zeros(2, dtype="float32"), 1, tag=9)
        dist.send(fg.zeros(4, dtype="float64"), 1, tag=9)
    elif r == 1:
        msg = r"rank 0 sent a tensor of shape \[3\] and dtype float64, this rank receives"
        raises(ValueError, msg, lambda: dist.recv(fg.zeros(2, dtype="float64"), 0, tag=9))
        raises(ValueError, "dtype float32", lambda: dist.recv(x, 0, tag=9))
        w = dist.irecv(fg.zeros(5, dtype="float64"), 0, tag=9)
        raises(ValueError, r"shape \[4\]", w.wait)
    # new_group: ranks out of range or repeated, a group that was destroyed
    raises(ValueError, "outside", lambda: dist.new_group([0, n]))
    raises(ValueError, "repeat", lambda: dist.new_group([0, 0]))
    g = dist.new_group()
    dist.destroy_process_group(g)
    raises(ValueError, "destroyed", lambda: dist.all_reduce(x, group=g))
    raises(TypeError, "group", lambda: dist.all_reduce(x, group="world"))
    # bitwise reductions need integers
    raises(TypeError, "integer", lambda: dist.all_reduce(x, op=dist.ReduceOp.BXOR))
    # the collectives over every rank too: one rank's bad argument raises there, and on the
    # others (which used to wait for it in the collective)
    t = fg.tensor([1.0, 2.0])
    raises(
        (ValueError, RuntimeError),
        "op must be one of" if r == 1 else "rank 1 raised on its arguments",
        lambda: dist.all_reduce(t, op="median" if r == 1 else "sum"),
    )
    raises(
        (ValueError, RuntimeError),
        "src must be a rank" if r == 1 else "rank 1 raised",
        lambda: dist.broadcast(t, src=n if r == 1 else 0),
    )
    short = [fg.zeros(2)] * (n - 1)
    raises(
        (ValueError, RuntimeError),
        "tensor_list must be a list" if r == 1 else "rank 1 raised",
        lambda: dist.all_gather(short, t) if r == 1 else dist.all_gather(t),
    )
    out = fg.zeros(2, dtype="float64") if r == n - 1 else fg.zeros(2)
    raises(
        (TypeError, ValueError),
        "dtype" if r == n - 1 else f"rank {n - 1} raised",
        lambda: dist.reduce_scatter_tensor(out, fg.zeros(2 * n)),
    )
    raises(
        (ValueError, RuntimeError),
        "dst must be a rank" if r == 0 else "rank 0 raised",
        lambda: dist.reduce(t, dst=n if r == 0 else 0),
    )
    raises(
        (ValueError, RuntimeError),
        "object_gather_list must be a list" if r == 0 else "rank 0 passed",
        lambda: dist.gather_object(r, [None] if r == 0 else None),
    )
    # the job is still in step: a collective after all of that
    t = fg.tensor([1.0 + r])
    dist.all_reduce(t)
    assert t.item() == sum(1.0 + k for k in range(n))


def scenario_groups() -> None:
    """``new_group``: members in rank order (or as given), ranks outside it get
    ``NON_GROUP_MEMBER`` and collectives there return at once; ``use_local_synchronization``
    needs only the members; ``group_src``/``group_dst`` index the group."""
    r, n = dist.get_rank(), dist.get_world_size()
    rev = dist.new_group(list(reversed(range(n))), sort_ranks=False)
    assert rev.size() == n and rev.rank() == n - 1 - r
    assert dist.get_process_group_ranks(rev) == list(reversed(range(n)))
    assert dist.get_group_rank(rev, 0) == n - 1 and dist.get_global_rank(rev, 0) == n - 1
    b = fg.tensor([float(r)])
    dist.broadcast(b, group=rev, group_src=0)  # the group's rank 0 is global rank n - 1
    assert b.item() == n - 1
    parts = dist.all_gather(fg.tensor([float(r)]), group=rev)
    assert [p.item() for p in parts] == list(reversed(range(n)))
    top = dist.new_group([n - 1], use_local_synchronization=True) if r == n - 1 else None
    if r == n - 1:
        assert top.size() == 1
        t = fg.tensor([3.0])
        dist.all_reduce(t, group=top)
        assert t.item() == 3.0
    solo = dist.new_group([0])
    if r == 0:
        assert isinstance(solo, dist.ProcessGroup) and solo.size() == 1
    else:
        assert solo == dist.GroupMember.NON_GROUP_MEMBER == -100
        assert dist.get_rank(solo) == dist.get_world_size(solo) == -1
        assert dist.all_reduce(fg.ones(1), group=solo) is None
        assert dist.gather(fg.ones(1), group=solo) is None
        assert dist.recv(fg.ones(1), group=solo) == -1
    dist.destroy_process_group(rev)


def scenario_group_training() -> None:
    """``DistributedDataParallel(process_group=)`` and ``make_allreduce_cb(group=)`` average
    over the group's ranks only: the gradients equal one process's on the members' batches
    concatenated (float64, 1e-12), the members start from the group's first rank's weights,
    and a rank outside the group is refused."""
    import ferrograd.nn.functional as F
    from ferrograd import nn

    r, n = dist.get_rank(), dist.get_world_size()
    members = [0, n - 1]
    g = dist.new_group(members)
    per = 3
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2 * per, 4))
    y = rng.integers(0, 3, 2 * per)

    def model():
        fg.manual_seed(r)  # different weights on every rank until they are broadcast
        return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).to(fg.float64)

    def reference(m):
        ref = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).to(fg.float64)
        ref.load_state_dict(m.state_dict())
        F.cross_entropy(ref(fg.tensor(x)), fg.tensor(y)).backward()
        return [p.grad.numpy() for p in ref.parameters()]

    if r not in members:
        raises(
            ValueError,
            "not a member",
            lambda: nn.parallel.DistributedDataParallel(model(), process_group=g),
        )
        cb = dist.make_allreduce_cb(group=g)
        m = model()
        gm = fg.GradManager().attach(m.parameters(), callbacks=cb)
        with pytest.raises(ValueError, match="not a member"), gm:
            gm.backward(F.cross_entropy(m(fg.tensor(x)), fg.tensor(y)))
        return
    mine = slice(members.index(r) * per, (members.index(r) + 1) * per)
    m = model()
    ddp = nn.parallel.DistributedDataParallel(m, process_group=g)
    for k, other in enumerate(dist.all_gather(m[0].weight, group=g)):
        assert np.array_equal(other.numpy(), m[0].weight.numpy()), f"weights differ on {k}"
    want = reference(m)
    F.cross_entropy(ddp(fg.tensor(x[mine])), fg.tensor(y[mine])).backward()
    for i, (p, w) in enumerate(zip(m.parameters(), want)):
        close(p.grad.numpy(), w, f"DistributedDataParallel over a group: gradient {i}")
    m = model()
    dist.broadcast_parameters(m, src=n - 1, group=g)
    want = reference(m)
    gm = fg.GradManager().attach(m.parameters(), callbacks=dist.make_allreduce_cb(group=g))
    with gm:
        gm.backward(F.cross_entropy(m(fg.tensor(x[mine])), fg.tensor(y[mine])))
    for i, (p, w) in enumerate(zip(m.parameters(), want)):
        close(p.grad.numpy(), w, f"make_allreduce_cb over a group: gradient {i}")
    # the new calls have no graph form: inside fg.trace they refuse instead of running once

    @fg.trace
    def step(t):
        dist.gather(t, [fg.zeros_like(t) for _ in members] if r == 0 else None, group=g)
        return t * 2

    raises(fg.TraceError, "gather inside fg.trace", lambda: step(fg.ones(2)))


def scenario_monitored() -> None:
    """``monitored_barrier``: passes when every rank comes; when the last rank comes late,
    rank 0 raises naming it and the others raise instead of waiting; bad timeouts raise."""
    import datetime

    r, n = dist.get_rank(), dist.get_world_size()
    dist.monitored_barrier()
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=30), wait_all_ranks=True)
    with pytest.raises(ValueError, match="timeout"):
        dist.monitored_barrier(timeout=-1)
    late = n - 1
    if r == late:
        import time

        time.sleep(1.5)
        # rank 0 has given up on it: its own wait times out as well
        with pytest.raises(RuntimeError, match="did not let it pass"):
            dist.monitored_barrier(timeout=0.3)
    elif r == 0:
        with pytest.raises(RuntimeError, match=f"ranks? {late} failed to pass monitoredBarrier"):
            dist.monitored_barrier(timeout=0.5, wait_all_ranks=True)
    else:
        with pytest.raises(RuntimeError, match="did not let it pass"):
            dist.monitored_barrier(timeout=0.5)
    # the collectives that follow run as usual
    t = fg.tensor(np.full(3, float(r)))
    dist.all_reduce(t)
    close(t.numpy(), np.full(3, n * (n - 1) / 2.0), "all_reduce after monitored_barrier")


# -- the tests --------------------------------------------------------------------------------


@on_cpu
@needs_mpi
def test_two_ranks():
    pytest.importorskip("torch")
    rc, out, _ = launch(
        HERE,
        2,
        "values",
        "completion_order",
        "bad_input",
        "groups",
        "group_training",
        "against_torch",
        "monitored",
        timeout=180,
    )
    assert rc == 0 and "all passed" in out, out


@on_cpu
@needs_mpi
def test_three_ranks_oversubscribed():
    pytest.importorskip("torch")
    rc, out, _ = launch(
        HERE,
        3,
        "values",
        "completion_order",
        "bad_input",
        "groups",
        "group_training",
        "against_torch",
        "monitored",
        timeout=240,
    )
    assert rc == 0 and "all passed" in out, out


def test_signatures_as_torch():
    pytest.importorskip("torch")
    import torch.distributed as tdist

    for name in (
        "new_group",
        "gather",
        "scatter",
        "send",
        "recv",
        "isend",
        "irecv",
        "all_to_all",
        "all_to_all_single",
        "batch_isend_irecv",
        "broadcast",
        "get_backend",
        "get_process_group_ranks",
        "get_group_rank",
        "get_global_rank",
        "reduce",
        "gather_object",
        "scatter_object_list",
    ):
        ours = list(inspect.signature(getattr(dist, name)).parameters)
        theirs = list(inspect.signature(getattr(tdist, name)).parameters)
        assert ours == theirs, name
    assert list(inspect.signature(dist.P2POp).parameters) == list(
        inspect.signature(tdist.P2POp).parameters
    )
    for op in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"):
        assert hasattr(dist.ReduceOp, op)
    assert dist.GroupMember.NON_GROUP_MEMBER == tdist.GroupMember.NON_GROUP_MEMBER


def test_p2p_argument_errors_as_torch():
    # raised before any communication, so without a process group too
    torch = pytest.importorskip("torch")
    import torch.distributed as tdist

    for ours, theirs in (
        (
            lambda: dist.P2POp(dist.send, fg.ones(2), 1),
            lambda: tdist.P2POp(tdist.send, torch.ones(2), 1),
        ),
        (lambda: dist.batch_isend_irecv([fg.ones(2)]), lambda: tdist.batch_isend_irecv([1])),
    ):
        with pytest.raises(Exception) as want:
            theirs()
        with pytest.raises(type(want.value)):
            ours()
    with pytest.raises(ValueError, match="init_process_group"):
        dist.new_group([0])
    with pytest.raises(ValueError, match="init_process_group"):
        dist.send(fg.ones(2), 1)


@pytest.mark.parametrize("n_items", [0, 1, 2, 7, 16, 33])
@pytest.mark.parametrize("world", [1, 2, 3, 5])
def test_shuffled_shard_and_sampler_deal_torch_indices(n_items, world):
    pytest.importorskip("torch")
    from ferrograd.utils.data import DistributedSampler as FgSampler
    from torch.utils.data.distributed import DistributedSampler

    data = list(range(n_items))
    for seed, epoch in ((0, 0), (3, 1), (2**32 + 5, 2), (123456789, 7)):
        for rank in range(world):
            for drop_last in (False, True):
                want = DistributedSampler(
                    data, world, rank, shuffle=True, seed=seed, drop_last=drop_last
                )
                want.set_epoch(epoch)
                ours = FgSampler(data, world, rank, shuffle=True, seed=seed, drop_last=drop_last)
                ours.set_epoch(epoch)
                assert list(ours) == list(want), (seed, epoch, rank, drop_last)
            want = DistributedSampler(data, world, rank, shuffle=True, seed=seed)
            want.set_epoch(epoch)
            got = dist.shard(n_items, rank, world, shuffle=True, seed=seed, epoch=epoch)
            assert got == list(want), (seed, epoch, rank)


def test_shuffle_matches_torch_randperm_for_a_large_dataset():
    torch = pytest.importorskip("torch")
    g = torch.Generator()
    g.manual_seed(2024 + 3)
    want = torch.randperm(100_003, generator=g).tolist()
    got = [dist.shard(100_003, r, 4, shuffle=True, seed=2024, epoch=3) for r in range(4)]
    dealt = [got[k % 4][k // 4] for k in range(100_003)]
    assert dealt == want


if __name__ == "__main__":
    dist.init_process_group()
    for scenario in sys.argv[1:]:
        globals()[f"scenario_{scenario}"]()
    dist.barrier()
    if dist.get_rank() == 0:
        print("all passed:", " ".join(sys.argv[1:]), flush=True)
    dist.destroy_process_group()
