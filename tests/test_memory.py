"""Memory: accounting, what rules save, checkpointing and automatic mirroring."""

import gc

import ferrograd as fg
import numpy as np
import pytest


def live():
    gc.collect()
    return fg.memory_stats()["live_bytes"]


def test_memory_stats_counts_allocations_exactly():
    gc.collect()  # what earlier tests left for the collector is not counted as this test's
    before = fg.memory_stats()
    assert set(before) >= {"live_bytes", "peak_bytes", "live_tensors"}
    t = fg.zeros(1000, 250, dtype="float32")
    during = fg.memory_stats()
    assert during["live_bytes"] - before["live_bytes"] == 1_000_000
    assert during["live_tensors"] == before["live_tensors"] + 1
    assert during["peak_bytes"] >= during["live_bytes"]
    del t
    gc.collect()
    after = fg.memory_stats()
    assert after["live_bytes"] == before["live_bytes"]
    fg.reset_peak_memory_stats()
    assert fg.memory_stats()["peak_bytes"] == after["live_bytes"]


def test_memory_stats_count_tensors_made_and_dropped_on_other_threads():
    import threading

    gc.collect()
    before = fg.memory_stats()
    kept = []

    def work(i):
        x = fg.ones(100, 10)  # made here, dropped on the main thread
        kept.append(x * float(i))
        y = fg.zeros(50)  # made and dropped here
        del y

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    mid = fg.memory_stats()
    assert mid["live_tensors"] == before["live_tensors"] + 8
    assert mid["live_buffers"] == before["live_buffers"] + 8
    assert mid["live_bytes"] == before["live_bytes"] + 8 * 4000
    kept.clear()
    gc.collect()
    after = fg.memory_stats()
    assert (after["live_tensors"], after["live_buffers"], after["live_bytes"]) == (
        before["live_tensors"],
        before["live_buffers"],
        before["live_bytes"],
    )


def report_for(fn, *arrays, attach=None):
    ts = [fg.tensor(a) for a in arrays]
    gm = fg.GradManager().attach(
        [ts[i] for i in (attach if attach is not None else range(len(ts)))]
    )
    gm.record()
    try:
        out = fn(*ts)
        return gm.saved_tensors_report(), out, ts
    finally:
        gm.release()


X = np.arange(6.0).reshape(2, 3) + 1.0


@pytest.mark.parametrize(
    "name, fn",
    [
        ("add", lambda x: x + x),
        ("sum", lambda x: x.sum(axis=1)),
        ("reshape", lambda x: x.reshape(3, 2)),
        ("broadcast_to", lambda x: x.broadcast_to(4, 2, 3)),
        ("getitem", lambda x: x[1:, ::2]),
    ],
)
def test_shape_only_rules_keep_no_tensor(name, fn):
    report, _, _ = report_for(fn, X)
    assert [r["op"] for r in report] == [name]
    assert report[0]["saved"] == [] and report[0]["bytes"] == 0


@pytest.mark.parametrize("name", ["relu", "exp", "sigmoid", "tanh"])
def test_activation_rules_keep_only_their_output(name):
    report, _out, _ = report_for(lambda x: getattr(x, name)(), X)
    (entry,) = report
    assert entry["op"] == name
    assert entry["saved"] == [((2, 3), "float64", 48)]


def test_mul_and_matmul_keep_only_the_operand_the_gradient_needs():
    a = np.ones((4, 5))
    b = np.ones((5, 3))
    # only `a` needs a gradient: d(a@b)/da needs b; nothing of a is kept
    report, _, _ = report_for(lambda x, y: x @ y, a, b, attach=[0])
    assert report[0]["saved"] == [((5, 3), "float64", 120)]
    report, _, _ = report_for(lambda x, y: x @ y, a, b, attach=[1])
    assert report[0]["saved"] == [((4, 5), "float64", 160)]
    report, _, _ = report_for(lambda x, y: x * y, a, a * 2, attach=[0])
    assert report[0]["saved"] == [((4, 5), "float64", 160)]
    report, _, _ = report_for(lambda x, y: x @ y, a, b)
    assert sorted(s[0] for s in report[0]["saved"]) == [(4, 5), (5, 3)]


class Probe(fg.Function):
    """Identity that records live bytes when its backward runs."""

    def __init__(self, seen):
        self.seen = seen

    def forward(self, x):
        return x * 1.0

    def backward(self, g):
        self.seen.append(fg.memory_stats()["live_bytes"])
        return g


def test_saved_tensors_are_freed_as_backward_proceeds():
    x = fg.tensor(np.random.default_rng(0).normal(size=(256, 256)))
    seen = []
    gm = fg.GradManager().attach(x)
    with gm:
        h = Probe(seen)(x)
        for _ in range(8):
            h = h.tanh().exp().sigmoid()
        loss = h.sum()
        del h
        at_end_of_forward = live()
        gm.backward(loss)
    # 24 activation outputs of 512 KiB each were saved; by the time the first op's rule
    # runs, the later rules have run and dropped theirs
    assert at_end_of_forward - seen[0] > 20 * 256 * 256 * 8


def mlp_layers(depth, width, rng):
    ws = [fg.tensor(rng.normal(size=(width, width)) / np.sqrt(width)) for _ in range(depth)]
    return ws, [lambda h, w=w: (h @ w).tanh() for w in ws]


def grads_and_peak(ws, run, x):
    for w in ws:
        w.grad = None
    calls = []
    gm = fg.GradManager().attach(ws, callbacks=lambda t, g: (calls.append(id(t)), g)[1])
    gc.collect()
    base = fg.memory_stats()["live_bytes"]
    fg.reset_peak_memory_stats()
    with gm:
        y = run(x)
        loss = (y * y).mean()
        del y
        gm.backward(loss)
    peak = fg.memory_stats()["peak_bytes"] - base
    return [w.grad.numpy() for w in ws], peak, calls


def test_checkpoint_sequential_matches_and_saves_memory():
    rng = np.random.default_rng(0)
    ws, layers = mlp_layers(16, 64, rng)
    x = fg.tensor(rng.normal(size=(512, 64)))

    def plain(h):
        for f in layers:
            h = f(h)
        return h

    g0, p0, c0 = grads_and_peak(ws, plain, x)
    g1, p1, c1 = grads_and_peak(ws, lambda h: fg.checkpoint_sequential(layers, 4, h), x)
    for a, b in zip(g0, g1):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    # every callback fires exactly once per parameter, with or without checkpointing
    assert sorted(c0) == sorted(c1) == sorted(id(w) for w in ws)
    assert p1 < 0.7 * p0, (p0, p1)


def test_checkpoint_under_nested_managers_gives_second_derivatives():
    x0 = np.array([0.3, -0.7, 1.1])

    def first(xv):
        x = fg.tensor(xv)
        gm = fg.GradManager().attach(x)
        with gm:
            gm.backward(fg.checkpoint(lambda t: (t**3).tanh() * t, x).sum())
        return x.grad.numpy()

    x = fg.tensor(x0)
    outer = fg.GradManager().attach(x)
    inner = fg.GradManager().attach(x)
    with outer:
        with inner:
            inner.backward(fg.checkpoint(lambda t: (t**3).tanh() * t, x).sum())
        g = x.grad
        x.grad = None
        outer.backward(g.sum())
    eps = 1e-6
    expected = [
        (first(x0 + eps * e).sum() - first(x0 - eps * e).sum()) / (2 * eps) for e in np.eye(3)
    ]
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6, atol=1e-8)


def test_checkpoint_with_custom_function_and_closure_weights():
    class Square(fg.Function):
        def forward(self, x):
            self.x = x
            return x * x

        def backward(self, g):
            return 2.0 * self.x * g

    rng = np.random.default_rng(1)
    w = fg.tensor(rng.normal(size=(3, 3)))
    x = fg.tensor(rng.normal(size=(2, 3)))

    def seg(h):
        return Square()(h @ w).sum(axis=1)

    grads = []
    for use_ckpt in (False, True):
        w.grad = None
        x.grad = None
        gm = fg.GradManager().attach([w, x])
        with gm:
            y = fg.checkpoint(seg, x) if use_ckpt else seg(x)
            gm.backward(y.sum())
        grads.append((w.grad.numpy(), x.grad.numpy()))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-12)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-12)


def test_checkpoint_bad_functions():
    x = fg.tensor(np.ones(3))
    gm = fg.GradManager().attach(x)
    with gm:
        with pytest.raises(TypeError, match="checkpoint"):
            fg.checkpoint(lambda t: 3.0, x)

        def mutate(t):
            t += 1.0
            return t * 2.0

        with pytest.raises(RuntimeError, match="checkpoint"):
            fg.checkpoint(mutate, x)
    # the interpreter and the engine keep working
    assert (x * 2.0).sum().item() > 0


def gelu(h):
    return 0.5 * h * (1.0 + ((h + 0.044715 * h**3) * 0.7978845608).tanh())


def test_automatic_mirroring_keeps_gradients_identical_and_saves_memory():
    rng = np.random.default_rng(2)
    ws = [fg.tensor(rng.normal(size=(64, 64)).astype("f4") / 8) for _ in range(6)]
    bs = [fg.tensor(rng.normal(size=64).astype("f4")) for _ in range(6)]
    x = fg.tensor(rng.normal(size=(256, 64)).astype("f4"))
    results = {}
    for mode in (None, "auto"):
        for w in ws:
            w.grad = None
        gm = fg.GradManager(recompute=mode).attach(ws + bs)
        gc.collect()
        base = fg.memory_stats()["live_bytes"]
        with gm:
            h = x
            for w, b in zip(ws, bs):
                h = gelu(h @ w + b)
            loss = (h * h).mean()
            del h
            forward_bytes = live() - base
            gm.backward(loss)
        results[mode] = ([w.grad.numpy() for w in ws], forward_bytes)
    for g0, g1 in zip(results[None][0], results["auto"][0]):
        np.testing.assert_array_equal(g0, g1)
    assert results["auto"][1] < 0.6 * results[None][1], results


def test_mirroring_policy_callable_sees_op_names_and_bad_values_raise():
    seen = set()

    def policy(name):
        seen.add(name)
        return name in ("tanh", "mul")

    x = fg.tensor(np.array([0.5, -0.25]))
    gm = fg.GradManager(recompute=policy).attach(x)
    with gm:
        y = (x * 3.0).tanh().exp().sum()
        gm.backward(y)
    assert {"mul", "tanh", "exp"} <= seen
    v = np.array([0.5, -0.25])
    t = np.tanh(3 * v)
    np.testing.assert_allclose(x.grad.numpy(), np.exp(t) * (1 - t**2) * 3, rtol=1e-12)
    with pytest.raises(ValueError):
        fg.GradManager(recompute="sometimes")


def test_a_callback_that_consumes_the_gradient_frees_it_during_backward():
    rng = np.random.default_rng(3)
    ws = [fg.tensor(rng.normal(size=(256, 256))) for _ in range(6)]
    x = fg.tensor(rng.normal(size=(8, 256)))

    def peak_with(callback):
        gm = fg.GradManager().attach(ws, callbacks=callback)
        gc.collect()
        base = fg.memory_stats()["live_bytes"]
        fg.reset_peak_memory_stats()
        with gm:
            h = x
            for w in ws:
                h = (h @ w).tanh()
            gm.backward(h.sum())
        for w in ws:
            w.grad = None
        return fg.memory_stats()["peak_bytes"] - base

    keep = peak_with(lambda t, g: g)
    consume = peak_with(lambda t, g: None)  # e.g. an optimizer step applied in backward
    assert keep - consume >= 4 * 256 * 256 * 8, (keep, consume)
