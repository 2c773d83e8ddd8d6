"""Run by tests/test_distributed.py under ``mpiexec -n N python -m mpi4py``: each scenario
checks, on every rank, what data-parallel training promises and exits non-zero otherwise."""

from __future__ import annotations

import sys
import time

import ferrograd as fg
import ferrograd.distributed as dist
import ferrograd.nn.functional as F
import numpy as np
from ferrograd import nn
from mpi_helpers import close


def mlp():
    return nn.Sequential(
        nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3)
    )


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(4, 6, 3),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(6, 3),
    )


def data(kind, n, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 6) if kind == "mlp" else (n, 1, 6, 6))
    y = rng.integers(0, 3, n)
    return x, y


def grads_match(kind):
    """Gradients after the allreduce equal the single-process gradients of the whole batch."""
    r, n = dist.get_rank(), dist.get_world_size()
    fg.manual_seed(r)  # different initial weights on purpose: broadcast_parameters fixes it
    model = (mlp if kind == "mlp" else cnn)().to(fg.float64)
    dist.broadcast_parameters(model)
    params = list(model.parameters())
    per = 4
    x, y = data(kind, per * n, seed=7)
    # the reference: one process, the concatenated batch
    ref = fg.GradManager().attach(params)
    with ref:
        ref.backward(F.cross_entropy(model(fg.tensor(x)), fg.tensor(y)))
    want = [p.grad.numpy() for p in params]
    for p in params:
        p.grad = None
    gm = fg.GradManager().attach(params, callbacks=dist.make_allreduce_cb("mean"))
    mine = slice(r * per, (r + 1) * per)
    with gm:
        gm.backward(F.cross_entropy(model(fg.tensor(x[mine])), fg.tensor(y[mine])))
    for i, (p, w) in enumerate(zip(params, want)):
        assert p.grad is not None, f"parameter {i} got no gradient"
        assert p.grad.dtype == p.dtype and tuple(p.grad.shape) == tuple(p.shape)
        close(p.grad.numpy(), w, f"{kind} gradient of parameter {i}")
    # a second backward accumulates into .grad, as without the callback
    with gm:
        gm.backward(F.cross_entropy(model(fg.tensor(x[mine])), fg.tensor(y[mine])))
    for i, (p, w) in enumerate(zip(params, want)):
        close(p.grad.numpy(), 2 * w, f"{kind} accumulated gradient of parameter {i}")


def same_params_over_steps():
    """Five SGD steps on different data per rank keep the parameters identical on all ranks,
    and equal to one process training on the whole batch."""
    r, n = dist.get_rank(), dist.get_world_size()
    fg.manual_seed(3)
    model = cnn().to(fg.float64)
    dist.broadcast_parameters(model)
    single = cnn().to(fg.float64)
    single.load_state_dict(model.state_dict())
    opt = fg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt1 = fg.optim.SGD(single.parameters(), lr=0.1, momentum=0.9)
    gm = fg.GradManager().attach(model.parameters(), callbacks=dist.make_allreduce_cb())
    gm1 = fg.GradManager().attach(single.parameters())
    per = 3
    for step in range(5):
        x, y = data("cnn", per * n, seed=100 + step)
        mine = slice(r * per, (r + 1) * per)
        with gm:
            gm.backward(F.cross_entropy(model(fg.tensor(x[mine])), fg.tensor(y[mine])))
        opt.step()
        opt.zero_grad()
        with gm1:
            gm1.backward(F.cross_entropy(single(fg.tensor(x)), fg.tensor(y)))
        opt1.step()
        opt1.zero_grad()
    for (name, p), p1 in zip(model.named_parameters(), single.parameters()):
        everyone = dist.all_gather(p)
        for k, q in enumerate(everyone):
            assert np.array_equal(q.numpy(), p.numpy()), f"{name} differs on rank {k}"
        close(p.numpy(), p1.numpy(), f"{name} after 5 steps")


def unused_parameters():
    """A parameter only rank 0 uses gets rank 0's gradient / world size everywhere; one no rank
    uses gets no gradient (as without the callback); nothing hangs."""
    r, n = dist.get_rank(), dist.get_world_size()
    a = fg.tensor(np.full(3, 2.0))
    only0 = fg.tensor(np.full(2, 3.0))
    never = fg.tensor(np.ones(4))
    gm = fg.GradManager().attach([a, only0, never], callbacks=dist.make_allreduce_cb("mean"))
    with gm:
        loss = (a * (r + 1)).sum()
        if r == 0:
            loss = loss + (only0 * only0).sum()
        gm.backward(loss)
    close(a.grad.numpy(), np.full(3, sum(k + 1 for k in range(n)) / n), "used gradient")
    close(only0.grad.numpy(), np.full(2, 6.0 / n), "gradient used on rank 0 only")
    assert never.grad is None, "a parameter no rank used got a gradient"


def overlap():
    """With >= 8 buckets, the first bucket's allreduce starts before backward's last gradient
    arrives and completes before backward ends."""
    fg.manual_seed(0)
    width = 256
    layers = []
    for _ in range(12):
        layers += [nn.Linear(width, width), nn.Tanh()]
    model = nn.Sequential(*layers).to(fg.float64)
    dist.broadcast_parameters(model)
    cb = dist.make_allreduce_cb("mean", bucket_mb=0.5)
    gm = fg.GradManager().attach(model.parameters(), callbacks=cb)
    x = fg.randn(512, width, dtype=fg.float64)
    ok = 0
    for _ in range(3):
        with gm:
            loss = (model(x) ** 2).mean()
            # the ranks start backward together: on a loaded machine one may reach it late
            # enough that the first bucket cannot complete before the other's backward ends
            dist.barrier()
            gm.backward(loss)
        ev = cb.events
        starts = [t for e, i, t in ev if e == "start"]
        assert len(starts) >= 8, f"only {len(starts)} buckets"
        first_start = min(t for e, i, t in ev if e == "start" and i == 0)
        first_done = min(t for e, i, t in ev if e == "done" and i == 0)
        last_grad = max(t for e, i, t in ev if e == "grad")
        end = max(t for e, i, t in ev if e == "backward_end")
        ok += first_start < last_grad and first_done < end
    # timing on a loaded machine can spoil one step; most must overlap
    assert ok >= 2, f"no overlap: {cb.events}"

    # attached in order of use (gradients arrive in the reverse): after the first backward
    # the buckets follow the arrival order, so later steps overlap as well, with the same
    # gradients as one process
    params = list(model.parameters())[::-1]
    for p in params:
        p.grad = None
    cb = dist.make_allreduce_cb("mean", bucket_mb=0.5)
    gm = fg.GradManager().attach(params, callbacks=cb)
    first = None
    for step in range(3):
        with gm:
            gm.backward((model(x) ** 2).mean())
        ev = cb.events
        started = [t for e, i, t in ev if e == "start"]
        last_grad = max(t for e, i, t in ev if e == "grad")
        if step == 0:
            first = [p.grad.numpy().copy() for p in params]
        else:
            assert min(started) < last_grad, f"step {step}: no bucket started during backward"
            for a, p in zip(first, params):
                close(p.grad.numpy(), a, "gradient after the buckets were rebuilt")
        for p in params:
            p.grad = None


def collectives():
    r, n = dist.get_rank(), dist.get_world_size()
    for dtype in ("float32", "float64", "float16", "bfloat16"):
        t = fg.tensor(np.arange(5.0) + r).astype(dtype)
        dist.all_reduce(t, "sum")
        close(t.astype("float64").numpy(), n * np.arange(5.0) + n * (n - 1) / 2, f"sum {dtype}")
        assert str(t.dtype) == dtype
    t = fg.tensor(np.arange(6.0).reshape(2, 3) * (r + 1)).T  # not contiguous: a host copy
    w = dist.all_reduce(t, op="max", async_op=True)
    assert w.wait() and w.is_completed()
    close(t.numpy(), np.arange(6.0).reshape(2, 3).T * n, "max of a transposed tensor")
    b = fg.tensor(np.full(4, float(r)))
    dist.broadcast(b, src=n - 1)
    close(b.numpy(), np.full(4, n - 1.0), "broadcast")
    got = dist.all_gather(fg.tensor([r, 10 * r]))
    assert [g.numpy().tolist() for g in got] == [[k, 10 * k] for k in range(n)]
    outs = [fg.zeros(2, dtype=fg.int64) for _ in range(n)]
    assert dist.all_gather(outs, fg.tensor([r, r])) is None
    assert [o.numpy().tolist() for o in outs] == [[k, k] for k in range(n)]
    x = fg.tensor(np.arange(2.0 * n).reshape(n, 2) * (r + 1))
    part = dist.reduce_scatter(x)
    total = sum(k + 1 for k in range(n))
    close(part.numpy(), (np.arange(2.0 * n).reshape(n, 2) * total)[r : r + 1], "reduce_scatter")
    sh = [dist.shard(11, rank=k, world_size=n, shuffle=True, seed=1) for k in range(n)]
    assert sh[r] == dist.shard(11, shuffle=True, seed=1)
    assert all(len(s) == len(sh[0]) for s in sh)
    assert set().union(*map(set, sh)) == set(range(11))
    # PyTorch's keyword spellings
    outs = [fg.zeros(2) for _ in range(n)]
    dist.all_gather(tensor_list=outs, tensor=fg.tensor([r, r + 0.5]))
    assert [o.numpy().tolist() for o in outs] == [[k, k + 0.5] for k in range(n)]
    out = fg.zeros(2)
    ins = [fg.tensor([float(k), float(r)]) for k in range(n)]
    dist.reduce_scatter(out, ins, "max", group=None)
    assert out.numpy().tolist() == [float(r), float(n - 1)]
    dist.reduce_scatter(output=out, input_list=ins)
    assert out.numpy().tolist() == [float(n * r), float(sum(range(n)))]
    dist.all_reduce(out, op="sum", group=None)
    # tensors of another shape or dtype on one rank: the same ValueError on every rank, and
    # nothing reduced
    for bad, what in (
        (fg.ones(3 + (r == n - 1)), "shape [3]"),
        (fg.ones((2, 3) if r else (3, 2)), "shape [3, 2]"),
        (fg.ones(3, dtype=fg.float32 if r else fg.float64), "dtype float64"),
    ):
        keep = bad.numpy().copy()
        for call, kw in (
            (dist.all_reduce, {}),
            (dist.broadcast, {"src": 0}),
            (dist.all_gather, {}),
        ):
            try:
                call(bad, **kw)
            except ValueError as e:
                assert "every rank must pass tensor with the same shape and dtype" in str(e), e
                assert what in str(e), (what, str(e))
            else:
                raise AssertionError(f"rank {r}: a mismatched collective did not raise")
            assert (bad.numpy() == keep).all()


def traced():
    """A training step under fg.trace with the allreduce callback: the same parameters as the
    eager data-parallel step, step for step, and as one process on the whole batch."""
    r, n = dist.get_rank(), dist.get_world_size()
    fg.manual_seed(5)
    model = mlp().to(fg.float64)
    dist.broadcast_parameters(model)
    eager = mlp().to(fg.float64)
    eager.load_state_dict(model.state_dict())
    opt = fg.optim.SGD(model.parameters(), lr=0.1)
    opt_e = fg.optim.SGD(eager.parameters(), lr=0.1)
    gm = fg.GradManager().attach(model.parameters(), callbacks=dist.make_allreduce_cb("mean"))
    gm_e = fg.GradManager().attach(eager.parameters(), callbacks=dist.make_allreduce_cb("mean"))

    @fg.trace
    def step(x, y):
        with gm:
            loss = F.cross_entropy(model(x), y)
            gm.backward(loss)
        opt.step()
        opt.zero_grad()
        return loss

    per = 4
    for k in range(4):
        x, y = data("mlp", per * n, seed=200 + k)
        mine = slice(r * per, (r + 1) * per)
        step(fg.tensor(x[mine]), fg.tensor(y[mine]))
        with gm_e:
            gm_e.backward(F.cross_entropy(eager(fg.tensor(x[mine])), fg.tensor(y[mine])))
        opt_e.step()
        opt_e.zero_grad()
        for (name, p), q in zip(model.named_parameters(), eager.parameters()):
            close(p.numpy(), q.numpy(), f"traced {name} at step {k}")
    assert step.cache_size == 1


def traced_collectives():
    """Collectives inside fg.trace run on every call (not only while tracing): all_reduce and
    broadcast into a captured tensor, all_gather of a value computed inside; and a parameter
    only some ranks use makes every rank raise the same error instead of mixing layouts."""
    r, n = dist.get_rank(), dist.get_world_size()
    acc = fg.tensor(np.zeros(2))

    @fg.trace
    def step(x):
        s = x * 2.0
        dist.all_reduce(s)
        acc.copy_(x)
        dist.all_reduce(acc, op="sum")
        parts = dist.all_gather(x + 1.0)
        b = fg.tensor(np.zeros(2)) + x
        dist.broadcast(b, src=n - 1)
        return s, fg.stack(parts), b

    for k in range(3):
        x = fg.tensor(np.full(2, float(r + 1 + k)))
        s, parts, b = step(x)
        vals = [i + 1 + k for i in range(n)]
        close(s.numpy(), np.full(2, 2.0 * sum(vals)), f"traced all_reduce at call {k}")
        close(acc.numpy(), np.full(2, float(sum(vals))), f"traced captured all_reduce at {k}")
        close(parts.numpy()[:, 0], np.array(vals) + 1.0, f"traced all_gather at call {k}")
        close(b.numpy(), np.full(2, float(vals[-1])), f"traced broadcast at call {k}")
    assert step.cache_size == 1

    a = fg.nn.Linear(3, 3).to(fg.float64)
    extra = fg.nn.Linear(3, 3).to(fg.float32)
    gm = fg.GradManager().attach(
        [*a.parameters(), *extra.parameters()], callbacks=dist.make_allreduce_cb("mean")
    )

    @fg.trace
    def partial(x):
        with gm:
            y = a(x).sum()
            if r == 0:  # (a float32 layer only rank 0 uses: a dtype group the others lack)
                y = y + extra(x.astype(fg.float32)).sum().astype(fg.float64)
            gm.backward(y)

    try:
        partial(fg.tensor(np.ones((2, 3))))
    except RuntimeError as e:
        assert "got a gradient on 1 of" in str(e), e
    else:
        raise AssertionError("a gradient on some ranks only must raise on every rank")


def ddp():
    """PyTorch's DistributedDataParallel spelling: gradients after loss.backward() equal one
    process's on the whole batch, no_sync accumulates locally, parameters stay identical."""
    from ferrograd.nn.parallel import DistributedDataParallel as DDP

    r, n = dist.get_rank(), dist.get_world_size()
    fg.manual_seed(r)  # different weights on purpose: DDP takes rank 0's
    model = mlp().to(fg.float64)
    net = DDP(model, bucket_cap_mb=0.001)  # several buckets
    params = list(model.parameters())
    per = 4
    x, y = data("mlp", per * n, seed=11)
    # the reference: the unwrapped model on the whole batch (no averaging: not through DDP)
    F.cross_entropy(model(fg.tensor(x)), fg.tensor(y)).backward()
    want = [p.grad.numpy().copy() for p in params]
    for p in params:
        p.grad = None
    mine = slice(r * per, (r + 1) * per)
    xm, ym = x[mine], y[mine]
    F.cross_entropy(net(fg.tensor(xm)), fg.tensor(ym)).backward()
    for i, (p, w) in enumerate(zip(params, want)):
        close(p.grad.numpy(), w, f"ddp gradient of parameter {i}")
    # no_sync: the first half stays local, the synced backward averages the sum
    for p in params:
        p.grad = None
    h = per // 2
    with net.no_sync():
        F.cross_entropy(net(fg.tensor(xm[:h])), fg.tensor(ym[:h])).backward()
    F.cross_entropy(net(fg.tensor(xm[h:])), fg.tensor(ym[h:])).backward()
    for i, (p, w) in enumerate(zip(params, want)):
        close(p.grad.numpy(), 2 * w, f"ddp no_sync gradient of parameter {i}")
    opt = fg.optim.SGD(net.parameters(), lr=0.1)
    opt.step()
    for p in params:
        lo, hi = p.detach().clone(), p.detach().clone()
        dist.all_reduce(lo, op="min")
        dist.all_reduce(hi, op="max")
        close(lo.numpy(), hi.numpy(), "ddp parameters across ranks")


def ddp_overlap():
    """DistributedDataParallel overlaps backward: gradients equal one process's on the whole
    batch (float64), the first bucket's allreduce starts (logged) before the last
    parameter's gradient is accumulated, a parameter used on rank 0 only or by no rank
    reduces as with the GradManager callback, and a GradManager backward leaves it idle."""
    from ferrograd.nn.parallel import DistributedDataParallel as DDP

    r, n = dist.get_rank(), dist.get_world_size()
    fg.manual_seed(r)  # different weights on purpose: DDP takes rank 0's
    width, depth = 64, 8
    layers = [nn.Linear(6, width), nn.Tanh()]
    for _ in range(depth - 2):
        layers += [nn.Linear(width, width), nn.Tanh()]
    layers.append(nn.Linear(width, 3))
    model = nn.Sequential(*layers).to(fg.float64)
    # a weight and its bias (33 KB) pass 0.03 MB: one layer per bucket
    net = DDP(model, bucket_cap_mb=0.03)
    params = list(model.parameters())
    per = 4
    for step in range(3):
        x, y = data("mlp", per * n, seed=40 + step)
        F.cross_entropy(model(fg.tensor(x)), fg.tensor(y)).backward()  # not through DDP
        want = [p.grad.numpy().copy() for p in params]
        for p in params:
            p.grad = None
        mine = slice(r * per, (r + 1) * per)
        F.cross_entropy(net(fg.tensor(x[mine])), fg.tensor(y[mine])).backward()
        for i, (p, w) in enumerate(zip(params, want)):
            close(p.grad.numpy(), w, f"ddp overlap gradient of parameter {i} at step {step}")
            assert p.grad.dtype == p.dtype
            p.grad = None
        ev = net.events
        what = [e for e, _, _ in ev]
        assert what.count("start") >= 4, f"only {what.count('start')} buckets: {ev}"
        assert what.count("grad") == len(params), ev
        first_start = next(k for k, (e, i, _) in enumerate(ev) if e == "start" and i == 0)
        last_grad = max(k for k, (e, _, _) in enumerate(ev) if e == "grad")
        assert first_start < last_grad, f"no overlap: {ev}"
        assert ev[first_start][2] < ev[last_grad][2]
        # the first bucket holds the last layer: its gradients come first
        first_grads = [i for e, i, _ in ev if e == "grad"][:2]
        assert sorted(first_grads) == [len(params) - 2, len(params) - 1], ev
        assert what.index("backward_end") > last_grad and what.count("done") == what.count("start")

    class Partly(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Parameter(fg.tensor(np.full(3, 2.0)))
            self.only0 = nn.Parameter(fg.tensor(np.full(2, 3.0)))
            self.never = nn.Parameter(fg.tensor(np.ones(4)))

        def forward(self, k):
            loss = (self.a * k).sum()
            if dist.get_rank() == 0:
                loss = loss + (self.only0 * self.only0).sum()
            return loss

    part = Partly()
    pnet = DDP(part, bucket_cap_mb=1e-5)  # a bucket per parameter
    pnet(r + 1.0).backward()
    close(part.a.grad.numpy(), np.full(3, sum(k + 1 for k in range(n)) / n), "used gradient")
    close(part.only0.grad.numpy(), np.full(2, 6.0 / n), "gradient used on rank 0 only")
    assert part.never.grad is None, "a parameter no rank used got a gradient"
    # a GradManager backward (with its own allreduce) leaves DDP's hooks idle
    for p in params:
        p.grad = None
    before = list(net.events)
    x, y = data("mlp", per * n, seed=60)
    F.cross_entropy(model(fg.tensor(x)), fg.tensor(y)).backward()
    want = [p.grad.numpy().copy() for p in params]
    for p in params:
        p.grad = None
    gm = fg.GradManager().attach(params, callbacks=dist.make_allreduce_cb("mean"))
    mine = slice(r * per, (r + 1) * per)
    with gm:
        gm.backward(F.cross_entropy(net(fg.tensor(x[mine])), fg.tensor(y[mine])))
    assert net.events == before, "a GradManager backward ran DDP's allreduce"
    for i, (p, w) in enumerate(zip(params, want)):
        close(p.grad.numpy(), w, f"GradManager gradient of parameter {i} through DDP")


def raises():
    """Rank 1 fails mid-training while rank 0 waits in a collective: the job must end."""
    if dist.get_rank() == 1:
        time.sleep(0.2)
        raise ValueError("rank 1 fails on purpose")
    dist.all_reduce(fg.tensor(np.ones(3)))
    time.sleep(60)


if __name__ == "__main__":
    dist.init_process_group()
    scenarios = {
        "mlp": lambda: grads_match("mlp"),
        "cnn": lambda: grads_match("cnn"),
        "steps": same_params_over_steps,
        "unused": unused_parameters,
        "overlap": overlap,
        "collectives": collectives,
        "traced": traced,
        "traced_collectives": traced_collectives,
        "raises": raises,
        "ddp": ddp,
        "ddp_overlap": ddp_overlap,
    }
    for name in sys.argv[1:]:
        scenarios[name]()
    dist.barrier()
    if dist.get_rank() == 0:
        print("ok", " ".join(sys.argv[1:]), flush=True)
    dist.destroy_process_group()
