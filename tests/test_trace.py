"""Graph mode (``fg.trace``): a traced step gives the eager step's results (bitwise in
float64), replays update captured parameters and optimizer state in place, gradients computed
inside traced functions match finite differences for every op family, callbacks run once per
step at their point, what cannot be traced raises ``TraceError``, and the cache, guards,
introspection and memory plan behave as documented."""

from __future__ import annotations

import gc

import ferrograd as fg
import numpy as np
import pytest
from conftest import TEST_DEVICE, numeric_grad, weights_for
from hypothesis import given, settings
from hypothesis import strategies as st
from test_op_table import ROWS

pytestmark = pytest.mark.skipif(TEST_DEVICE != "cpu", reason="graph mode is tested on the CPU")


def params(seed, dtype="float64", sizes=((6, 16), (16,), (16, 4), (4,))):
    rng = np.random.default_rng(seed)
    return [fg.tensor(rng.standard_normal(s) * 0.5, dtype=dtype) for s in sizes]


def batches(n, dtype="float64", batch=8, seed=100):
    out = []
    for i in range(n):
        rng = np.random.default_rng(seed + i)
        x = fg.tensor(rng.standard_normal((batch, 6)), dtype=dtype)
        y = fg.tensor(rng.integers(0, 4, batch))
        out.append((x, y))
    return out


def mlp_step(P, opt, gm):
    def step(x, y):
        with gm:
            h = fg.relu(x @ P[0] + P[1])
            loss = fg.cross_entropy(h @ P[2] + P[3], y)
            gm.backward(loss)
        opt.step()
        opt.zero_grad()
        return loss

    return step


OPTIMIZERS = {
    "sgd": lambda P: fg.optim.SGD(P, lr=0.1),
    "sgd_momentum": lambda P: fg.optim.SGD(P, lr=0.05, momentum=0.9, weight_decay=1e-3),
    "nesterov": lambda P: fg.optim.SGD(P, lr=0.05, momentum=0.9, nesterov=True),
    "adam": lambda P: fg.optim.Adam(P, lr=0.01, weight_decay=1e-4),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_five_traced_steps_equal_five_eager_steps_bitwise_in_float64(name):
    Pe, Pt = params(0), params(0)
    oe, ot = OPTIMIZERS[name](Pe), OPTIMIZERS[name](Pt)
    eager = mlp_step(Pe, oe, fg.GradManager().attach(Pe))
    traced = fg.trace(mlp_step(Pt, ot, fg.GradManager().attach(Pt)))
    for x, y in batches(5):
        le, lt = eager(x, y), traced(x, y)
        assert lt.numpy().tobytes() == le.numpy().tobytes()
    for a, b in zip(Pe, Pt):
        assert a.numpy().tobytes() == b.numpy().tobytes()
    assert all(p.grad is None for p in Pt)
    assert traced.cache_size == 1


def test_traced_float32_steps_equal_eager_bitwise_too():
    # fusion runs each op's own element function in the op's order: nothing is reordered
    Pe, Pt = params(1, "float32"), params(1, "float32")
    eager = mlp_step(Pe, fg.optim.Adam(Pe, lr=0.01), fg.GradManager().attach(Pe))
    traced = fg.trace(mlp_step(Pt, fg.optim.Adam(Pt, lr=0.01), fg.GradManager().attach(Pt)))
    for x, y in batches(5, "float32"):
        assert traced(x, y).numpy().tobytes() == eager(x, y).numpy().tobytes()
    for a, b in zip(Pe, Pt):
        assert b.numpy().tobytes() == a.numpy().tobytes()


def test_a_conv_step_traced_equals_eager():
    def make(seed):
        rng = np.random.default_rng(seed)
        return [
            fg.tensor(rng.standard_normal((4, 1, 3, 3)) * 0.3),
            fg.tensor(rng.standard_normal((4 * 4 * 4, 3)) * 0.1),
        ]

    def step_of(P):
        gm = fg.GradManager().attach(P)
        opt = fg.optim.SGD(P, lr=0.1, momentum=0.5)

        def step(x, y):
            with gm:
                h = fg.max_pool2d(fg.relu(fg.conv2d(x, P[0], padding=1)), 2)
                loss = fg.cross_entropy(h.reshape(x.shape[0], -1) @ P[1], y)
                gm.backward(loss)
            opt.step()
            opt.zero_grad()
            return loss

        return step

    Pe, Pt = make(3), make(3)
    eager, traced = step_of(Pe), fg.trace(step_of(Pt))
    rng = np.random.default_rng(5)
    for _ in range(3):
        x = fg.tensor(rng.standard_normal((2, 1, 8, 8)))
        y = fg.tensor(rng.integers(0, 3, 2))
        assert traced(x, y).numpy().tobytes() == eager(x, y).numpy().tobytes()
    for a, b in zip(Pe, Pt):
        assert a.numpy().tobytes() == b.numpy().tobytes()


# -- gradients inside traced functions, every op family ---------------------------------------


@pytest.mark.parametrize("name", sorted(ROWS))
def test_gradients_inside_a_traced_function_match_finite_differences(name):
    fn, arrays, eps = ROWS[name]
    if name == "to" and not fg.cuda.is_available():
        pytest.skip("a second device is needed to move a tensor")
    rtol, atol = (1e-4, 1e-5) if eps > 1e-6 else (1e-5, 1e-6)
    y0 = fn(*[fg.tensor(a) for a in arrays])
    w = fg.tensor(weights_for(tuple(y0.shape)))

    @fg.trace
    def grads(*xs):
        return fg.grad((fn(*xs) * w).sum(), list(xs))

    def loss(*arrs):
        return float((fn(*[fg.tensor(a) for a in arrs]) * w).sum().item())

    rng = np.random.default_rng(1)
    for k in range(2):
        # the first call traces; the second runs the graph on other values
        arrs = [np.asarray(a, dtype=np.float64) for a in arrays]
        if k:
            arrs = [a * (1.0 + 0.01 * rng.standard_normal(a.shape)) for a in arrs]
        got = grads(*[fg.tensor(a) for a in arrs])
        want = numeric_grad(loss, arrs, eps)
        for i, (g, n) in enumerate(zip(got, want)):
            np.testing.assert_allclose(
                g.numpy(), n, rtol=rtol, atol=atol, err_msg=f"{name}: input {i}, call {k}"
            )
    assert grads.cache_size == 1


def test_second_order_inside_a_trace_matches_eager():
    def hessian_vector(x, v):
        g = fg.grad((x.tanh() * x).sum() ** 2, x, create_graph=True)
        return fg.grad((g * v).sum(), x)

    traced = fg.trace(hessian_vector)
    rng = np.random.default_rng(2)
    for _ in range(3):
        xa, va = rng.standard_normal(5), rng.standard_normal(5)
        x = fg.tensor(xa)
        gm = fg.GradManager().attach(x)
        with gm:
            want = fg.hvp(lambda t: (t.tanh() * t).sum() ** 2, x, fg.tensor(va))[1]
        got = traced(fg.tensor(xa), fg.tensor(va))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


def test_vjp_inside_a_trace():
    @fg.trace
    def f(x, ct):
        _, vjp_fn = fg.vjp(lambda t: t.exp() * t, x)
        return vjp_fn(ct)[0]

    xa = np.array([0.1, -0.4, 0.7])
    for s in (1.0, 2.0):
        got = f(fg.tensor(xa * s), fg.tensor(np.ones(3)))
        x = xa * s
        np.testing.assert_allclose(got.numpy(), np.exp(x) * x + np.exp(x), rtol=1e-12)


# -- GradManager semantics in a trace ------------------------------------------------------------


def test_callbacks_run_once_per_step_in_gradient_order_with_the_eager_arguments():
    P = params(4)
    calls = []

    def cb(tag):
        def f(t, g):
            calls.append((tag, tuple(t.shape), t is P[tag]))
            return g * 2.0

        return f

    gm = fg.GradManager()
    for i, p in enumerate(P):
        gm.attach(p, callbacks=cb(i))
    opt = fg.optim.SGD(P, lr=0.1)
    traced = fg.trace(mlp_step(P, opt, gm))
    Pe = params(4)
    gme = fg.GradManager()
    for p in Pe:
        gme.attach(p, callbacks=lambda t, g: g * 2.0)
    eager = mlp_step(Pe, fg.optim.SGD(Pe, lr=0.1), gme)
    for n, (x, y) in enumerate(batches(3), start=1):
        traced(x, y)
        eager(x, y)
        assert len(calls) == 4 * n
    # each step: the output layer's gradients are final first (backward order), every call
    # with the attached tensor itself
    step = calls[:4]
    assert {c[0] for c in step} == {0, 1, 2, 3}
    assert [c[0] for c in step].index(3) < [c[0] for c in step].index(0)
    assert all(c[2] for c in calls)
    assert calls[4:8] == step
    for a, b in zip(Pe, P):
        assert a.numpy().tobytes() == b.numpy().tobytes()


def test_an_attached_tensor_the_loss_does_not_reach_gets_no_gradient():
    a = fg.tensor([1.0, 2.0])
    unused = fg.tensor([3.0])
    gm = fg.GradManager().attach([a, unused])

    @fg.trace
    def step(x):
        with gm:
            gm.backward((a * x).sum())
        return a.grad

    g = step(fg.tensor([5.0, 7.0]))
    assert unused.grad is None
    np.testing.assert_array_equal(g.numpy(), [5.0, 7.0])
    a.grad = None
    g = step(fg.tensor([1.0, 1.0]))
    assert unused.grad is None
    np.testing.assert_array_equal(g.numpy(), [1.0, 1.0])


def test_gradients_accumulate_into_existing_grad_and_the_guard_retraces_when_it_changes():
    w = fg.tensor([1.0, -2.0])
    gm = fg.GradManager().attach(w)

    @fg.trace
    def step(x):
        with gm:
            gm.backward((w * x).sum())

    step(fg.tensor([1.0, 1.0]))  # w.grad was None: traced with that guard
    step(fg.tensor([2.0, 3.0]))  # w.grad is set now: traced again, accumulating
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 4.0])
    step(fg.tensor([1.0, 1.0]))  # replays the accumulating graph
    np.testing.assert_array_equal(w.grad.numpy(), [4.0, 5.0])
    assert step.cache_size == 1
    w.grad = None
    step(fg.tensor([1.0, 1.0]))
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 1.0])


def test_a_custom_function_keeps_its_own_gradient_in_a_trace():
    class StraightThroughSign(fg.Function):
        def forward(self, x):
            return x.sign()

        def backward(self, dy):
            return dy * 3.0

    @fg.trace
    def f(x):
        return fg.grad((StraightThroughSign()(x) * x).sum(), x)

    for xa in ([0.5, -2.0], [1.5, 3.0]):
        x = np.array(xa)
        got = f(fg.tensor(x))
        np.testing.assert_array_equal(got.numpy(), np.sign(x) * 1.0 + x * 3.0)


# -- what cannot be traced ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "read",
    [
        lambda t: t.item(),
        lambda t: t.numpy(),
        lambda t: float(t),
        lambda t: bool(t > 0),
        lambda t: 1 if t else 0,
        lambda t: t.tolist(),
    ],
)
def test_reading_a_value_computed_inside_raises_trace_error_naming_the_op(read):
    @fg.trace
    def f(x):
        y = (x * 2.0).exp().sum()
        read(y)
        return y

    with pytest.raises(fg.TraceError, match="sum|greater"):
        f(fg.tensor([1.0, 2.0]))
    assert isinstance(fg.TraceError("x"), RuntimeError)
    # the failed trace left nothing behind: ops run eagerly again
    assert (fg.tensor([1.0]) * 2.0).item() == 2.0


def test_returned_tensors_are_read_as_usual_and_repr_inside_does_not_raise():
    seen = []

    @fg.trace
    def f(x):
        y = x * 2.0
        seen.append(repr(y))
        return y

    out = f(fg.tensor([1.0, 2.0]))
    assert out.numpy().tolist() == [2.0, 4.0]
    assert "traced" in seen[0]


def test_writing_into_a_view_of_a_captured_tensor_raises_and_into_an_argument_works():
    p = fg.tensor([1.0, 2.0, 3.0])

    @fg.trace
    def into_arg(x):
        x += 1.0
        return x

    a = fg.tensor([1.0])
    for k in range(3):
        out = into_arg(a)
        assert a.item() == out.item() == 2.0 + k

    @fg.trace
    def into_view(x):
        v = p[1:]
        v += x
        return v

    with pytest.raises(fg.TraceError, match="view"):
        into_view(fg.tensor([1.0, 1.0]))
    np.testing.assert_array_equal(p.numpy(), [1.0, 2.0, 3.0])


# -- cache, signature, side effects --------------------------------------------------------------


def test_python_side_effects_run_once_and_a_new_signature_traces_again():
    calls = []
    w = fg.tensor([1.0, 2.0, 3.0])

    @fg.trace
    def f(x, scale):
        calls.append(scale)
        return (x * w.astype(x.dtype)).sum() * scale

    assert f(fg.tensor([1.0, 1.0, 1.0]), 2.0).item() == 12.0
    assert f(fg.tensor([2.0, 2.0, 2.0]), 2.0).item() == 24.0
    assert calls == [2.0]
    assert f(fg.tensor([1.0, 1.0, 1.0]), 3.0).item() == 18.0  # other value: new entry
    assert f.cache_size == 2
    assert f(fg.tensor([[1.0, 1.0, 1.0]]), 2.0).item() == 12.0  # other shape
    assert f(fg.tensor([1.0, 1.0, 1.0], dtype="float64"), 2.0).item() == 12.0  # other dtype
    assert f.cache_size == 4
    # a captured tensor is read by reference
    w.copy_(fg.tensor([0.0, 0.0, 1.0]))
    assert f(fg.tensor([1.0, 1.0, 1.0]), 2.0).item() == 2.0
    assert calls == [2.0, 3.0, 2.0, 2.0]


def test_nested_and_structured_arguments_and_results():
    @fg.trace
    def f(batch, k=1):
        return {"sum": batch["a"] + batch["b"][0] * k, "n": k}

    out = f({"a": fg.tensor([1.0]), "b": [fg.tensor([2.0])]}, k=3)
    assert out["n"] == 3 and out["sum"].item() == 7.0
    out = f({"a": fg.tensor([2.0]), "b": [fg.tensor([2.0])]}, k=3)
    assert out["sum"].item() == 8.0 and f.cache_size == 1
    with pytest.raises(TypeError, match="hashable"):
        f({"a": fg.tensor([1.0]), "b": [fg.tensor([2.0])]}, k={1})


def test_a_traced_function_called_inside_another_is_inlined():
    @fg.trace
    def inner(x):
        return x.exp()

    @fg.trace
    def outer(x):
        return inner(x) * 2.0

    for v in (0.5, 1.5):
        assert outer(fg.tensor([v])).item() == pytest.approx(2.0 * np.exp(v))
    assert inner.cache_size == 0 and outer.cache_size == 1


def test_a_call_under_an_outer_recording_manager_runs_eagerly_and_is_differentiated():
    @fg.trace
    def f(x):
        return (x * x).sum()

    x = fg.tensor([1.0, 2.0])
    gm = fg.GradManager().attach(x)
    with gm:
        y = f(x)
        gm.backward(y)
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])


def test_changing_the_learning_rate_between_calls_reaches_the_traced_step():
    P, Q = params(7), params(7)
    op, oq = fg.optim.SGD(P, lr=0.1), fg.optim.SGD(Q, lr=0.1)
    traced = fg.trace(mlp_step(P, op, fg.GradManager().attach(P)))
    eager = mlp_step(Q, oq, fg.GradManager().attach(Q))
    for i, (x, y) in enumerate(batches(4)):
        op.lr = oq.lr = 0.1 / (i + 1)
        traced(x, y)
        eager(x, y)
    for a, b in zip(P, Q):
        assert a.numpy().tobytes() == b.numpy().tobytes()


def test_invalid_options_are_refused():
    with pytest.raises(ValueError, match="mirror"):
        fg.trace(lambda x: x, mirror="always")
    with pytest.raises(ValueError, match="memory_budget"):
        fg.trace(memory_budget=0)
    with pytest.raises(TypeError, match="memory_budget"):
        fg.trace(lambda x: x, memory_budget="1GB")
    with pytest.raises(RuntimeError, match="not been called"):
        _ = fg.trace(lambda x: x).graph


# -- introspection and the plan ------------------------------------------------------------------


def test_graph_introspection():
    w = fg.tensor(np.ones((3, 2)))

    @fg.trace
    def f(x):
        return (x @ w).tanh().sum()

    f(fg.tensor(np.ones((4, 3))))
    g = f.graph
    assert isinstance(g, fg.Graph)
    text = str(g)
    assert len(g) == len(text.splitlines())  # one line per node
    assert "-> output 0" in text.splitlines()[-1]
    assert "matmul" in text and "[4, 2]" in text and "float64" in text
    assert g.to_dot().startswith("digraph")
    report = f.memory_report()
    for k in ("planned_peak_bytes", "saved_bytes", "recomputed_nodes", "buffers"):
        assert isinstance(report[k], int) and report[k] >= 0
    assert report["planned_peak_bytes"] > 0


def test_common_subexpressions_and_dead_code_are_removed():
    @fg.trace
    def f(x):
        a = (x * 2.0).exp()
        b = (x * 2.0).exp()
        _unused = (x + 5.0).log()
        return a + b

    out = f(fg.tensor([0.5]))
    counts = f.graph.op_counts()
    assert counts.get("exp") == 1 and counts.get("mul") == 1
    assert "log" not in counts
    assert out.item() == pytest.approx(2 * np.exp(1.0))


def test_a_replay_allocates_no_new_buffers_and_fuses_elementwise_chains():
    P = params(8)
    traced = fg.trace(mlp_step(P, fg.optim.Adam(P, lr=0.01), fg.GradManager().attach(P)))
    data = batches(4)
    for x, y in data:
        traced(x, y)
    r = traced.memory_report()
    assert r["fused_chains"] >= 1 and r["fused_nodes"] > r["fused_chains"]
    assert r["last_run_new_buffers"] == 0
    assert r["planned_peak_bytes"] <= r["unplanned_peak_bytes"]
    # the usual loop keeps the last loss alive while the next step runs: still nothing new
    # once the step has run a few times, and the losses handed out stay the caller's
    losses = []
    loss = None
    for x, y in data * 2:
        loss = traced(x, y)
        losses.append(loss)
        losses.append(loss.item())
    assert traced.memory_report()["last_run_new_buffers"] == 0
    kept = [v for v in losses if not isinstance(v, float)]
    assert [t.item() for t in kept] == [v for v in losses if isinstance(v, float)]
    for x, y in data * 2:
        loss = traced(x, y)
    assert traced.memory_report()["last_run_new_buffers"] == 0


def test_fused_chains_with_broadcasting_compute_what_the_ops_compute_bitwise():
    rng = np.random.default_rng(9)
    b = fg.tensor(rng.standard_normal(5), dtype="float32")

    @fg.trace
    def f(x, m):
        h = (x * 1.5 + b).tanh() ** 2 - fg.where(m, x.sigmoid(), x.relu()) / (b.abs() + 1.0)
        return fg.maximum(h, x).exp() * 0.5

    for _ in range(2):
        x = fg.tensor(rng.standard_normal((4, 5)), dtype="float32")
        m = fg.tensor(rng.standard_normal((4, 1)) > 0)
        h = (x * 1.5 + b).tanh() ** 2 - fg.where(m, x.sigmoid(), x.relu()) / (b.abs() + 1.0)
        want = fg.maximum(h, x).exp() * 0.5
        assert f(x, m).numpy().tobytes() == want.numpy().tobytes()
    assert f.memory_report()["fused_nodes"] >= 8


def test_large_fused_chains_run_in_parallel_blocks_bitwise():
    rng = np.random.default_rng(10)
    c = fg.tensor(rng.standard_normal(300_001))

    @fg.trace
    def f(x):
        return ((x * c).tanh() + c.exp()) * x.sigmoid()

    x = fg.tensor(rng.standard_normal(300_001))
    f(x)
    got = f(x)
    want = ((x * c).tanh() + c.exp()) * x.sigmoid()
    assert got.numpy().tobytes() == want.numpy().tobytes()


@pytest.mark.skipif(not fg.cuda.is_available(), reason="needs a CUDA device (or the emulator)")
def test_a_traced_step_on_a_cuda_device_equals_the_eager_step():
    def make():
        return [p.to("cuda") for p in params(11)]

    Pe, Pt = make(), make()
    eager = mlp_step(Pe, fg.optim.Adam(Pe, lr=0.01), fg.GradManager().attach(Pe))
    traced = fg.trace(mlp_step(Pt, fg.optim.Adam(Pt, lr=0.01), fg.GradManager().attach(Pt)))
    for x, y in batches(3):
        x, y = x.to("cuda"), y.to("cuda")
        le, lt = eager(x, y), traced(x, y)
        np.testing.assert_allclose(lt.numpy(), le.numpy(), rtol=1e-12)
    for a, b in zip(Pe, Pt):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-12, atol=1e-14)
    assert "cuda" in str(traced.graph)


@pytest.mark.skipif(not fg.cuda.is_available(), reason="needs a CUDA device (or the emulator)")
def test_python_scalars_of_a_cuda_step_move_to_the_device_once_and_returned_ones_stay():
    # a fused CUDA kernel reads every input from device memory: the Python numbers of a
    # step (made as CPU scalars) are moved to the device when the step is compiled
    x0 = np.array([1.0, 2.0, 3.0, -4.0])

    @fg.trace
    def f(x):
        return (x * 2.5 + 1.0 < 4.0) * (x - 1.0) + (x > 0.5) * x**2, fg.tensor(7.0)

    x = fg.tensor(x0, device="cuda")
    for _ in range(3):
        out, seven = f(x)
        want = (x0 * 2.5 + 1.0 < 4.0) * (x0 - 1.0) + (x0 > 0.5) * x0**2
        np.testing.assert_array_equal(out.numpy(), want)
        assert out.device == x.device
        assert seven.device == fg.device("cpu") and float(seven) == 7.0
    # each node's line, without the note of where its value goes
    lines = [line.split("  -> ")[0] for line in str(f.graph).splitlines()]
    consts = [line for line in lines if "constant()" in line]
    moved = [line for line in consts if line.endswith("float64 cuda:0")]
    kept = [line for line in consts if line.endswith("float32")]  # the returned one
    assert len(moved) >= 3 and len(kept) == 1 and len(moved) + len(kept) == len(consts), consts


# -- mirroring and the memory budget -------------------------------------------------------------

GELU_C = 0.7978845608


def deep_mlp(act, depth=8, width=64, batch=64, seed=12):
    rng = np.random.default_rng(seed)
    P = []
    for _ in range(depth):
        P += [
            fg.tensor(rng.standard_normal((width, width)) / np.sqrt(width)),
            fg.tensor(np.zeros(width)),
        ]
    x = fg.tensor(rng.standard_normal((batch, width)))
    gm = fg.GradManager().attach(P)

    def layer(h, w, b):
        z = h @ w + b
        if act == "tanh":
            return z.tanh()
        return 0.5 * z * (1.0 + (GELU_C * (z + 0.044715 * z**3)).tanh())

    def step(x):
        with gm:
            h = x
            for i in range(depth):
                h = layer(h, P[2 * i], P[2 * i + 1])
            loss = h.mean()
            gm.backward(loss)
        grads = [p.grad for p in P]
        for p in P:
            p.grad = None
        return loss, grads

    return step, x, P


def measured_peak(f, x, P):
    """Peak bytes of one call as the planner counts them: what the step holds (parameters,
    inputs; live before the call) plus what the call adds at its peak."""
    for p in P:
        p.grad = None
    gc.collect()
    live = fg.memory_stats()["live_bytes"]
    fg.reset_peak_memory_stats()
    out = f(x)
    peak = fg.memory_stats()["peak_bytes"]
    del out
    return peak - live + f.memory_report()["held_bytes"]


def test_auto_mirroring_recomputes_elementwise_chains_and_keeps_results():
    step, x, P = deep_mlp("gelu")
    plain, mirrored = fg.trace(step), fg.trace(step, mirror="auto")
    ref = step(x)
    for f in (plain, mirrored):
        for _ in range(2):
            loss, grads = f(x)
            assert loss.numpy().tobytes() == ref[0].numpy().tobytes()
            for g, r in zip(grads, ref[1]):
                assert g.numpy().tobytes() == r.numpy().tobytes()
    rp, rm = plain.memory_report(), mirrored.memory_report()
    assert rm["recomputed_nodes"] > 0
    assert rm["saved_bytes"] < 0.5 * rp["saved_bytes"]
    assert rm["planned_peak_bytes"] < rp["planned_peak_bytes"]
    # the plan is what a run measures
    for f, r in ((plain, rp), (mirrored, rm)):
        peak = measured_peak(f, x, P)
        assert peak <= 1.1 * r["planned_peak_bytes"], (peak, r)


def test_auto_mirroring_declines_where_it_would_only_move_memory():
    # every tanh output is the next matmul's saved input: recomputing it keeps the matmul's
    # output alive instead, which gains nothing
    step, x, _ = deep_mlp("tanh")
    mirrored = fg.trace(step, mirror="auto")
    mirrored(x)
    assert mirrored.memory_report()["recomputed_nodes"] == 0


def test_a_mirror_policy_chooses_the_ops():
    step, x, _ = deep_mlp("gelu")
    asked = set()

    def policy(op):
        asked.add(op)
        return op == "mul"

    f = fg.trace(step, mirror=policy)
    f(x)
    assert {"mul", "tanh"} <= asked
    counts = f.graph.op_counts()
    plain = fg.trace(step)
    plain(x)
    base = plain.graph.op_counts()
    assert counts["mul"] >= base["mul"] and counts.get("tanh") == base.get("tanh")


def test_memory_budgets_are_met_and_monotone():
    step, x, P = deep_mlp("gelu", depth=10, width=96, batch=96)
    plain = fg.trace(step)
    plain(x)
    full = plain.memory_report()["planned_peak_bytes"]
    lowest = fg.trace(step, mirror="auto")
    lowest(x)
    floor = lowest.memory_report()["planned_peak_bytes"]
    budgets = [int(full * 0.95), int((full + floor) / 2), int(floor * 1.02)]
    peaks = []
    for b in budgets:
        f = fg.trace(step, memory_budget=b)
        f(x)
        r = f.memory_report()
        assert r["planned_peak_bytes"] <= b
        peak = measured_peak(f, x, P)
        assert peak <= 1.1 * b, (peak, b)
        peaks.append(peak)
        loss, _ = f(x)
        assert loss.numpy().tobytes() == step(x)[0].numpy().tobytes()
    assert peaks == sorted(peaks, reverse=True)


def test_an_infeasible_budget_names_the_smallest_feasible_one():
    step, x, _ = deep_mlp("gelu")
    f = fg.trace(step, memory_budget=1000)
    with pytest.raises(ValueError, match=r"smallest feasible budget is (\d+) bytes") as e:
        f(x)
    smallest = int(e.value.args[0].rsplit("is ", 1)[1].split()[0])
    g = fg.trace(step, memory_budget=smallest)
    g(x)
    assert g.memory_report()["planned_peak_bytes"] <= smallest


def test_eager_auto_recompute_never_exceeds_the_default_peak_by_more_than_one_activation():
    depth, width, batch = 24, 128, 1024
    rng = np.random.default_rng(13)
    W = [
        fg.tensor((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32))
        for _ in range(depth)
    ]
    x = fg.tensor(rng.standard_normal((batch, width)).astype(np.float32))

    def peak(mode):
        gm = fg.GradManager(recompute=mode).attach(W)
        for w in W:
            w.grad = None
        before = fg.memory_stats()["live_bytes"]
        fg.reset_peak_memory_stats()
        with gm:
            h = x
            for w in W:
                h = (h @ w).tanh()
            loss = h.mean()
            del h
            gm.backward(loss)
        return fg.memory_stats()["peak_bytes"] - before

    activation = batch * width * 4
    assert peak("auto") <= peak(None) + activation


REBOUND = fg.tensor(np.ones((3, 2)))


def test_a_captured_tensor_replaced_by_another_retraces():
    global REBOUND

    @fg.trace
    def f(x):
        return (x @ REBOUND).sum()

    x = fg.tensor(np.ones((4, 3)))
    assert f(x).item() == 24.0
    old = REBOUND
    REBOUND = fg.tensor(np.full((3, 5), 2.0))  # another shape: traced again
    try:
        assert f(x).item() == 120.0
        REBOUND = old
        assert f(x).item() == 24.0
    finally:
        REBOUND = old

    class Model:
        def __init__(self):
            self.w = fg.tensor(np.ones((3, 2)))

    m = Model()

    @fg.trace
    def g(x):
        return (x @ m.w).sum()

    assert g(x).item() == 24.0
    m.w = fg.tensor(np.ones((3, 7)))
    assert g(x).item() == 84.0
    # the same object updated in place is read by reference, no new trace
    m.w.copy_(fg.tensor(np.zeros((3, 7))))
    assert g(x).item() == 0.0


def test_new_data_in_a_captured_tensor_object_retraces():
    # `.data =` and `module.double()` keep the Python object and change what it holds: the
    # graph's captured storage is stale, so the call traces again
    w = fg.tensor(np.ones(3))
    f = fg.trace(lambda x: (x * w).sum())
    x = fg.tensor(np.ones(3))
    assert f(x).item() == 3.0
    w.data = fg.tensor(np.full(1, 5.0))
    assert f(x).item() == 15.0
    w.data = fg.tensor(np.full(3, 2.0))
    assert f(x).item() == 6.0

    emb = fg.nn.Embedding(4, 2)
    gm = fg.GradManager().attach(list(emb.parameters()))
    opt = fg.optim.SGD(emb.parameters(), lr=1.0)

    @fg.trace
    def step(i):
        with gm:
            loss = emb(i).sum()
            gm.backward(loss)
        opt.step()
        opt.zero_grad()
        return loss

    idx = fg.tensor([0, 0])
    step(idx)
    emb.double()
    before = emb.weight.numpy().copy()
    loss = step(idx)
    assert loss.dtype == fg.float64
    np.testing.assert_array_equal(emb.weight.numpy()[0], before[0] - 2.0)
    np.testing.assert_array_equal(emb.weight.numpy()[1:], before[1:])


def test_a_replaced_submodule_or_deeply_nested_parameter_retraces():
    class M(fg.nn.Module):
        def __init__(self):
            super().__init__()
            self.head = fg.nn.Linear(3, 2)

        def forward(self, x):
            return self.head(x)

    m = M()
    g = fg.trace(lambda x: m(x).sum())
    x = fg.randn(1, 3)
    g(x)
    m.head = fg.nn.Linear(3, 5)
    np.testing.assert_allclose(g(x).item(), m(x).sum().item(), rtol=1e-6)

    deep = fg.nn.Sequential(
        fg.nn.Sequential(fg.nn.Sequential(fg.nn.Sequential(fg.nn.Linear(3, 4))))
    )
    h = fg.trace(lambda x: deep(x).sum())
    h(x)
    inner = deep[0][0][0][0]
    inner.weight = fg.nn.Parameter(fg.ones(4, 3))
    np.testing.assert_allclose(h(x).item(), deep(x).sum().item(), rtol=1e-6)
    deep[0][0][0][0] = fg.nn.Linear(3, 4)
    np.testing.assert_allclose(h(x).item(), deep(x).sum().item(), rtol=1e-6)


def test_switching_train_and_eval_retraces():
    d = fg.nn.Sequential(fg.nn.Dropout(0.5))
    f = fg.trace(lambda x: d(x))
    ones = fg.ones(1000)
    assert (f(ones).numpy() == 0).any()  # traced in training mode: dropout applies
    d.eval()
    np.testing.assert_array_equal(f(ones).numpy(), np.ones(1000))
    d.train()
    assert (f(ones).numpy() == 0).any()


def test_attention_without_weights_traces():
    layer = fg.nn.TransformerEncoderLayer(4, 2, dim_feedforward=8, dropout=0.0, batch_first=True)
    x = fg.randn(3, 5, 4)
    f = fg.trace(lambda x: layer(x).sum())
    want = layer(x).sum().item()
    np.testing.assert_allclose(f(x).item(), want, rtol=1e-5)
    np.testing.assert_allclose(f(x).item(), want, rtol=1e-5)


def test_a_traced_forward_under_an_outer_manager_is_recorded_by_it():
    w = fg.tensor([1.0, 2.0])

    @fg.trace
    def forward(x):
        return (x * w).sum()

    x = fg.tensor([3.0, 4.0])
    forward(x)  # traced, no manager recording
    gm = fg.GradManager().attach(w)
    with gm:
        loss = forward(x)  # the manager must see the ops: eager
        gm.backward(loss)
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 4.0])
    assert forward(x).item() == 11.0


def test_data_built_inside_from_python_values_is_a_constant_and_is_warned_about():
    calls = []

    @fg.trace
    def f(x):
        batch = np.arange(100.0) * len(calls)
        calls.append(1)
        return x * fg.tensor(batch)

    with pytest.warns(fg.TraceWarning, match="fixed into every later call"):
        f(fg.tensor(np.ones(100)))
    # the value from trace time, as documented
    assert f(fg.tensor(np.ones(100))).numpy()[1] == 0.0


@pytest.mark.parametrize(
    "bshape",
    [(1024,), (256, 1), (1, 1024), (3, 1, 1), (1, 256, 1), ()],
    ids=str,
)
def test_fused_chains_read_broadcast_operands_as_eager_does(bshape):
    # broadcast operands are loaded in runs along the innermost axis; blocks cross rows
    rng = np.random.default_rng(3)
    x = fg.tensor(rng.standard_normal((3, 256, 1024)))
    b = fg.tensor(rng.standard_normal(bshape))
    xt = fg.tensor(rng.standard_normal((1024, 256)))

    def f(x, b, xt):
        return ((x + b).relu() * 2.0 - b).tanh() + xt.T

    want = f(x, b, xt).numpy()
    traced = fg.trace(f)
    np.testing.assert_array_equal(traced(x, b, xt).numpy(), want)
    assert traced.memory_report()["fused_chains"] >= 1


def test_arguments_attached_to_a_grad_manager_get_their_gradients_every_call():
    # an argument attached to the manager is given its .grad by every run of the graph (not
    # only by the call that traced it), for new tensors of the same signature, and a .grad
    # already set accumulates as in eager mode (the trace is redone for it)
    rng = np.random.default_rng(5)
    w = fg.tensor(rng.standard_normal((4, 3)))

    def step(x):
        gm = fg.GradManager().attach([x, w])
        with gm:
            loss = ((x @ w).tanh() ** 2).sum()
            gm.backward(loss)
        return loss

    traced = fg.trace(step)
    for k in range(3):
        a = rng.standard_normal((5, 4))
        x_eager, x_traced = fg.tensor(a), fg.tensor(a)
        w.grad = None
        step(x_eager)
        gw = w.grad.numpy().copy()
        w.grad = None
        traced(x_traced)
        assert x_traced.grad is not None, f"call {k}: no gradient on the argument"
        np.testing.assert_allclose(x_traced.grad.numpy(), x_eager.grad.numpy(), rtol=1e-12)
        np.testing.assert_allclose(w.grad.numpy(), gw, rtol=1e-12)
    # accumulation into a .grad the argument already has
    a = rng.standard_normal((5, 4))
    x_eager, x_traced = fg.tensor(a), fg.tensor(a)
    x_eager.grad, x_traced.grad = fg.ones(5, 4, dtype="float64"), fg.ones(5, 4, dtype="float64")
    w.grad = None
    step(x_eager)
    w.grad = None
    traced(x_traced)
    np.testing.assert_allclose(x_traced.grad.numpy(), x_eager.grad.numpy(), rtol=1e-12)
    x2 = fg.tensor(a)
    x2.grad = fg.full((5, 4), 2.0, dtype="float64")
    w.grad = None
    traced(x2)
    np.testing.assert_allclose(x2.grad.numpy(), x_eager.grad.numpy() + 1.0, rtol=1e-12)


def test_random_draws_inside_a_trace_are_fresh_every_run_and_seeded():
    # dropout, rand, randn and bernoulli inside fg.trace draw from the traced generator: a new
    # mask on every run (not one frozen into the graph), reproducible after manual_seed, with
    # the right distribution, and dropout's gradient uses the same mask as its forward
    x = fg.tensor(np.ones((64, 256), dtype=np.float32))
    w = fg.tensor(np.ones((64, 256), dtype=np.float32))

    def step(x):
        gm = fg.GradManager().attach([w])
        with gm:
            y = fg.nn.functional.dropout(x * w, 0.25, True)
            gm.backward(y.sum())
        return y, fg.rand(20000), fg.randn(20000, dtype="float64"), fg.bernoulli(x * 0.3)

    traced = fg.trace(step)
    fg.manual_seed(7)
    first = [t.numpy() for t in traced(x)]
    g1 = w.grad.numpy().copy()
    w.grad = None
    second = [t.numpy() for t in traced(x)]
    assert traced.cache_size == 1
    for a, b in zip(first, second):
        assert not np.array_equal(a, b)
    y, u, z, bern = first
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((y == 0).mean() - 0.25) < 0.02
    np.testing.assert_array_equal(g1, y)  # d sum(dropout(w)) / dw = the mask, scaled
    assert u.dtype == np.float32 and 0.0 <= u.min() and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    assert z.dtype == np.float64 and abs(z.mean()) < 0.03 and abs(z.std() - 1.0) < 0.03
    assert set(np.unique(bern)) <= {0.0, 1.0} and abs(bern.mean() - 0.3) < 0.02
    fg.manual_seed(7)
    w.grad = None
    again = [t.numpy() for t in traced(x)]
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    # draws the traced generator does not offer still refuse to freeze into the graph
    with pytest.raises(fg.TraceError, match="random"):
        fg.trace(lambda x: x + fg.randint(0, 5, (3,)).astype("float32"))(fg.zeros(3))


def test_sort_and_topk_inside_a_trace_follow_the_values_of_every_call():
    # the order is an op of the graph (argsort), not a constant fixed at trace time
    w = fg.tensor(np.array([3.0, 1.0, 2.0, 0.5]))
    gm = fg.GradManager().attach([w])
    weights = np.array([1.0, 2.0, 3.0, 4.0])

    @fg.trace
    def step(x):
        with gm:
            v, i = fg.sort(w * x, descending=True)
            top = fg.topk(w * x, 2, largest=False)
            loss = (v * fg.tensor(weights)).sum() + top.values.sum()
            gm.backward(loss)
        return v, i, top.indices, loss

    for values in ([3.0, 1.0, 2.0, 0.5], [0.0, 5.0, -1.0, 2.0], [2.0, 2.0, -3.0, 7.0]):
        w.copy_(fg.tensor(np.array(values)))
        w.grad = None
        x = np.array([1.0, 1.0, 1.0, 1.0])
        v, i, ti, loss = step(fg.tensor(x))
        a = np.array(values)
        np.testing.assert_allclose(
            loss.item(), (np.sort(a)[::-1] * weights).sum() + np.sort(a)[:2].sum()
        )
        order = np.argsort(-a, kind="stable")
        np.testing.assert_array_equal(i.numpy(), order)
        np.testing.assert_array_equal(v.numpy(), a[order])
        np.testing.assert_array_equal(ti.numpy(), np.argsort(a, kind="stable")[:2])
        g = np.zeros(4)
        g[order] += weights
        g[np.argsort(a, kind="stable")[:2]] += 1.0
        np.testing.assert_array_equal(w.grad.numpy(), g)
    assert step.cache_size == 1


@pytest.mark.parametrize("n", [1000, 300_001])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_fused_update_of_a_captured_tensor_reads_its_old_value_wherever_the_chain_does(n, dtype):
    # the group writes the new value over the captured tensor while later members of the
    # same chain still read the old one; inputs are read where they lie only when safe
    rng = np.random.default_rng(11)
    w0 = rng.standard_normal(n)
    w_t, w_e = fg.tensor(w0, dtype=dtype), fg.tensor(w0, dtype=dtype)
    v_t, v_e = fg.tensor(-w0, dtype=dtype), fg.tensor(-w0, dtype=dtype)

    def body(w, w2):
        def step(x, s):
            with fg.no_grad():
                new = w * 0.5 + x
                before = (w - new).tanh() * 2.0
                w.copy_(new)
                after = (w + x) * s
                # old value read early in the chain, the new one written from its last op
                w2.copy_((w2 * 0.9).tanh() + x)
                scalars = ((s * 2.0 + 1.0).exp() ** 2) * x - fg.where(x > 0, s, x)
            return before, after, scalars

        return step

    traced, eager = fg.trace(body(w_t, v_t)), body(w_e, v_e)
    for i in range(3):
        x = fg.tensor(rng.standard_normal(n), dtype=dtype)
        s = fg.tensor(0.25 * (i + 1), dtype=dtype)
        got, want = traced(x, s), eager(x, s)
        for g, e in zip(got, want):
            assert g.numpy().tobytes() == e.numpy().tobytes()
        assert w_t.numpy().tobytes() == w_e.numpy().tobytes()
        assert v_t.numpy().tobytes() == v_e.numpy().tobytes()
    assert traced.memory_report()["fused_nodes"] >= 6


_CHAIN_OPS = ("add", "sub", "mul", "div", "maximum", "tanh", "sigmoid", "relu", "square", "where")


@settings(max_examples=25, deadline=None)
@given(
    n=st.sampled_from([7, 512, 1500, 70_000]),
    dtype=st.sampled_from(["float32", "float64"]),
    steps=st.lists(
        st.tuples(st.sampled_from(_CHAIN_OPS), st.integers(0, 5), st.booleans()),
        min_size=2,
        max_size=10,
    ),
    update_at=st.integers(-1, 9),
)
def test_random_fused_chains_compute_what_the_ops_compute_bitwise(n, dtype, steps, update_at):
    # operands of every kind a fused group meets: contiguous, one-element (0-d and broadcast
    # (1,)), a strided view, earlier values of the chain, and a captured tensor that the
    # chain overwrites part way (later steps read its new value, earlier values stay)
    rng = np.random.default_rng(n + len(steps))
    w0 = rng.standard_normal(n)
    w_t, w_e = fg.tensor(w0, dtype=dtype), fg.tensor(w0, dtype=dtype)

    def chain(w):
        def f(x, s, b, big):
            with fg.no_grad():
                vals = [x, s, b, big[::2], w]
                h = x
                for i, (op, k, left) in enumerate(steps):
                    o = vals[k % len(vals)]
                    a, c = (h, o) if left else (o, h)
                    if op == "where":
                        h = fg.where(a > 0, c, h)
                    elif op in ("tanh", "sigmoid", "relu"):
                        h = getattr(a * 0.5 + c, op)()
                    elif op == "square":
                        h = (a - c) ** 2
                    elif op == "div":
                        h = a / (c.abs() + 1.0)
                    else:
                        h = getattr(fg, op)(a, c)
                    vals.append(h)
                    if i == update_at:
                        w.copy_(h * 0.5 + w)
                return h, vals[len(vals) // 2]

        return f

    traced, eager = fg.trace(chain(w_t)), chain(w_e)
    for _ in range(2):
        x = fg.tensor(rng.standard_normal(n), dtype=dtype)
        s = fg.tensor(rng.standard_normal(()), dtype=dtype)
        b = fg.tensor(rng.standard_normal(1), dtype=dtype)
        big = fg.tensor(rng.standard_normal(2 * n), dtype=dtype)
        got, want = traced(x, s, b, big), eager(x, s, b, big)
        for g, e in zip(got, want):
            assert g.numpy().tobytes() == e.numpy().tobytes()
        assert w_t.numpy().tobytes() == w_e.numpy().tobytes()


def test_a_moment_update_fuses_whole_without_intermediate_buffers():
    # m * b1 + g * (1 - b1): the two products start separate chains that the sum merges, so
    # nothing between them is written out
    rng = np.random.default_rng(12)
    m0, v0 = rng.standard_normal(5000), rng.random(5000)
    mt, vt = fg.tensor(m0, dtype="float32"), fg.tensor(v0, dtype="float32")
    me, ve = fg.tensor(m0, dtype="float32"), fg.tensor(v0, dtype="float32")

    def moments(m, v):
        def step(g):
            with fg.no_grad():
                m.copy_(m * 0.9 + g * 0.1)
                v.copy_(v * 0.999 + g * g * 0.001)

        return step

    traced, eager = fg.trace(moments(mt, vt)), moments(me, ve)
    for _ in range(3):
        g = fg.tensor(rng.standard_normal(5000), dtype="float32")
        traced(g)
        eager(g)
        assert mt.numpy().tobytes() == me.numpy().tobytes()
        assert vt.numpy().tobytes() == ve.numpy().tobytes()
    r = traced.memory_report()
    assert r["fused_chains"] == 2 and r["fused_nodes"] == 7
    assert r["buffers"] == 0


def test_a_traced_optimizer_step_updates_0d_parameters_as_eager():
    # (the float64 learning rate times a 0-d float32 gradient is float64: the in-place
    # update casts it back, as PyTorch's in-place ops do)
    def run(traced):
        p = fg.nn.Parameter(np.float32(1.25))
        w = fg.nn.Parameter(np.ones(3, np.float32))
        opt = fg.optim.SGD([p, w], lr=0.01, momentum=0.9)
        gm = fg.GradManager().attach([p, w])

        def step(x):
            with gm:
                gm.backward((x * p * w).sum())
            opt.step()
            opt.zero_grad()

        f = fg.trace(step) if traced else step
        for _ in range(3):
            f(fg.tensor(np.arange(3, dtype=np.float32)))
        return p.numpy(), w.numpy()

    (pe, we), (pt, wt) = run(False), run(True)
    assert pt.shape == () and pt.dtype == np.float32
    np.testing.assert_allclose(pt, pe, rtol=1e-6)
    np.testing.assert_allclose(wt, we, rtol=1e-6)


def test_traced_training_with_dropout_draws_the_eager_numbers():
    # rand/randn/dropout draw from one counter-based generator eagerly and inside a trace:
    # after the same manual_seed, a traced step draws what the eager step draws
    def make():
        fg.manual_seed(3)
        model = fg.nn.Sequential(
            fg.nn.Linear(6, 16), fg.nn.ReLU(), fg.nn.Dropout(0.3), fg.nn.Linear(16, 3)
        ).to(fg.float64)
        opt = fg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        gm = fg.GradManager().attach(model.parameters())

        def step(x, y):
            with gm:
                loss = fg.cross_entropy(model(x) + 0.01 * fg.randn(4, 3, dtype=fg.float64), y)
                gm.backward(loss)
            opt.step()
            opt.zero_grad()
            return loss

        return model, step

    rng = np.random.default_rng(0)
    x = fg.tensor(rng.standard_normal((4, 6)))
    y = fg.tensor(rng.integers(0, 3, 4))
    eager_model, eager_step = make()
    eager = [eager_step(x, y).item() for _ in range(5)]
    traced_model, step = make()
    traced_step = fg.trace(step)
    traced = [traced_step(x, y).item() for _ in range(5)]
    np.testing.assert_allclose(traced, eager, rtol=1e-12)
    for a, b in zip(traced_model.parameters(), eager_model.parameters()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-14)
    # eager draws between traced runs continue the same sequence
    d = fg.nn.Dropout(0.5)
    f = fg.trace(lambda v: d(v))
    ones = fg.ones(64)
    fg.manual_seed(1)
    masks = [d(ones).numpy() for _ in range(4)]
    fg.manual_seed(1)
    mixed = [f(ones).numpy(), d(ones).numpy(), f(ones).numpy(), d(ones).numpy()]
    for a, b in zip(masks, mixed):
        np.testing.assert_array_equal(a, b)


def test_in_place_writes_into_arguments_reach_the_callers_tensors_as_in_eager_mode():
    def body(x, y, s):
        x.mul_(2.0)
        z = x + y
        x.add_(z)  # the second write wins; reads in between see the first
        s += 1
        return (x * y).sum()

    results = []
    for traced in (False, True):
        f = fg.trace(body) if traced else body
        x = fg.tensor([1.0, 2.0, 3.0], dtype="float64")
        y = fg.tensor([0.5, -1.0, 2.0], dtype="float64")
        s = fg.zeros((), dtype="int64")
        losses = [f(x, y, s).item() for _ in range(4)]
        results.append((losses, x.numpy().copy(), s.item(), y.numpy().copy()))
        if traced:
            assert f.cache_size == 1
            assert "-> argument 0" in str(f.graph) and "-> argument 2" in str(f.graph)
    (l0, x0, s0, y0), (l1, x1, s1, y1) = results
    assert l0 == l1 and s0 == s1 == 4
    np.testing.assert_array_equal(x0, x1)
    np.testing.assert_array_equal(y0, y1)


def test_in_place_writes_into_part_of_an_argument_are_refused_clearly():
    @fg.trace
    def f(x):
        x[1:].add_(1.0)
        return x.sum()

    x = fg.ones(3)
    with pytest.raises(fg.TraceError, match="view .* of argument 0"):
        f(x)
    np.testing.assert_array_equal(x.numpy(), np.ones(3))  # nothing half-written


@pytest.mark.parametrize("where", ["no_grad", "set_grad_enabled", "detach"])
def test_values_computed_without_gradients_pass_none_back_as_in_eager(where):
    """A value computed under no_grad inside a traced step is a constant for the gradient
    pass, as on the tape: only the other path through ``w`` contributes."""
    w = fg.tensor([1.0, 2.0], dtype="float64")
    gm = fg.GradManager().attach([w])

    def step(x):
        with gm:
            if where == "no_grad":
                with fg.no_grad():
                    z = w * 3.0
            elif where == "set_grad_enabled":
                with fg.set_grad_enabled(False):
                    z = w * 3.0
            else:
                z = (w * 3.0).detach()
            loss = (z * w * x).sum()
            gm.backward(loss)
        g = w.grad
        w.grad = None
        return g

    x = fg.tensor([1.0, 0.5], dtype="float64")
    eager = step(x).numpy()
    np.testing.assert_array_equal(eager, 3.0 * w.numpy() * x.numpy())
    traced = fg.trace(step)
    for _ in range(2):
        np.testing.assert_array_equal(traced(x).numpy(), eager)


def test_enable_grad_inside_no_grad_in_a_trace_differentiates_again():
    w = fg.tensor([1.0, 2.0], dtype="float64")
    gm = fg.GradManager().attach([w])

    def step(x):
        with gm:
            with fg.no_grad(), fg.enable_grad():
                z = w * w
            gm.backward((z * x).sum())
        g = w.grad
        w.grad = None
        return g

    x = fg.tensor([1.0, 3.0], dtype="float64")
    traced = fg.trace(step)
    for _ in range(2):
        np.testing.assert_array_equal(traced(x).numpy(), 2 * w.numpy() * x.numpy())


def test_the_first_traced_call_releases_values_no_gradient_rule_reads():
    """The first call runs the step while tracing it: it keeps what the gradient rules read
    (as the eager tape does), not every value of the step."""
    fg.manual_seed(0)
    width, depth = 256, 6
    layers = [fg.nn.Linear(width, width) for _ in range(depth)]
    model = fg.nn.Sequential(*[m for lin in layers for m in (lin, fg.nn.GELU())])
    opt = fg.optim.SGD(model.parameters(), lr=0.01)
    gm = fg.GradManager().attach(model.parameters())

    def step(x):
        with gm:
            loss = (model(x) ** 2).mean()
            gm.backward(loss)
        opt.step()
        opt.zero_grad()
        return loss

    x = fg.randn(128, width)

    def peak(f):
        gc.collect()
        live = fg.memory_stats()["live_bytes"]
        fg.reset_peak_memory_stats()
        f(x)
        return fg.memory_stats()["peak_bytes"] - live

    eager = peak(step)
    first = peak(fg.trace(step))
    # every value of this step together is over 6x the eager peak
    assert first < 3 * eager, (first, eager)


def _linear_runs(make_opt, between, steps=6):
    """Weights after ``steps`` eager and traced steps of one linear least-squares model, with
    ``between(opt, model, i)`` called after each step (a scheduler, a changed setting)."""
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((8, 4)), rng.standard_normal((8, 3))) for _ in range(steps)]
    out = []
    for traced in (False, True):
        fg.manual_seed(0)
        m = fg.nn.Linear(4, 3).double()
        opt = make_opt(m)

        def step(x, y, m=m, opt=opt):
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        f = fg.trace(step) if traced else step
        for i, (x, y) in enumerate(batches):
            f(fg.tensor(x), fg.tensor(y))
            between(opt, m, i)
        out.append(m.weight.numpy())
    return out


def test_optimizer_settings_changed_between_traced_steps_take_effect():
    """Momentum cycled by OneCycleLR, weight decay or betas set by hand: a trace reads them as
    constants, so a change must trace again, never run the old values."""
    eager, traced = _linear_runs(
        lambda m: fg.optim.Adam(m.parameters(), lr=0.1),
        lambda opt, m, i: None,
    )
    np.testing.assert_allclose(traced, eager, rtol=1e-12)
    for make, between in [
        (
            lambda m: fg.optim.Adam(m.parameters(), lr=0.1),
            lambda opt, m, i: opt.param_groups[0].__setitem__("betas", (0.5 + 0.05 * i, 0.99)),
        ),
        (
            lambda m: fg.optim.SGD(m.parameters(), lr=0.1),
            lambda opt, m, i: opt.param_groups[0].__setitem__("weight_decay", 0.1 * (i % 2)),
        ),
        (
            lambda m: fg.optim.SGD(m.parameters(), lr=0.1, momentum=0.5),
            lambda opt, m, i: opt.param_groups[0].update(momentum=0.9 - 0.1 * i),
        ),
    ]:
        eager, traced = _linear_runs(make, between)
        np.testing.assert_allclose(traced, eager, rtol=1e-12)


def test_one_cycle_momentum_cycling_in_a_traced_step_matches_eager():
    state = {}

    def make(m):
        opt = fg.optim.Adam(m.parameters(), lr=0.1)
        state["sched"] = fg.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10)
        return opt

    eager, traced = _linear_runs(make, lambda opt, m, i: state["sched"].step())
    np.testing.assert_allclose(traced, eager, rtol=1e-12)


def test_a_module_setting_changed_between_traced_calls_takes_effect():
    drop = fg.nn.Dropout(0.5)

    @fg.trace
    def f(x):
        return drop(x)

    x = fg.ones(4000)
    assert 0.4 < float((f(x) == 0).float().mean()) < 0.6
    drop.p = 0.0
    np.testing.assert_array_equal(f(x).numpy(), x.numpy())


def test_param_group_update_reaches_the_learning_rate_the_step_reads():
    w = fg.nn.Parameter(fg.tensor([1.0], dtype="float64"))
    opt = fg.optim.SGD([w], lr=1.0)
    opt.param_groups[0].update(lr=0.5)
    (w * 1.0).sum().backward()
    opt.step()
    np.testing.assert_array_equal(w.numpy(), [0.5])
    opt.param_groups[0].setdefault("lr", 9.0)
    opt.param_groups[0] |= {"lr": 0.25}
    opt.zero_grad()
    (w * 1.0).sum().backward()
    opt.step()
    np.testing.assert_array_equal(w.numpy(), [0.25])


def test_binary_cross_entropy_and_one_hot_trace():
    def f(p, t, c):
        bce = fg.nn.functional.binary_cross_entropy(p, t)
        return bce + fg.nn.functional.one_hot(c, 5).sum(0).float().mean()

    rng = np.random.default_rng(0)
    traced = fg.trace(f)
    for _ in range(3):
        p = fg.tensor(rng.uniform(0.1, 0.9, (6, 1)))
        t = fg.tensor(rng.integers(0, 2, (6, 1)).astype(np.float64))
        c = fg.tensor(rng.integers(0, 5, (7,)))
        np.testing.assert_allclose(traced(p, t, c).numpy(), f(p, t, c).numpy(), rtol=1e-12)
    assert traced.cache_size == 1


def test_writes_through_views_of_tensors_made_inside_a_trace_reach_them():
    """``a[0][j] = v`` (a write through the view ``a[0]``), ``row = a[0]; row[1] = v`` and
    in-place ops on a column: later reads of ``a`` see the writes, on every replay, with the
    gradients of eager mode (the CRF tutorial's forward algorithm writes this way)."""
    w = fg.tensor(np.linspace(-1.0, 1.0, 5)).reshape(1, 5)
    gm = fg.GradManager().attach([w])

    def step(x):
        with gm:
            init = fg.full((3, 5), -2.0, dtype="float64")
            init[0][3] = 0.0
            row = init[1]
            row[2] = x[0]
            col = init[:, 4]
            col.mul_(x[1])
            loss = (init * w + x.sum()).exp().sum()
            gm.backward(loss)
        g = w.grad
        w.grad = None
        return loss, g

    traced = fg.trace(step)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = fg.tensor(rng.standard_normal(2))
        (le, ge), (lt, gt) = step(x), traced(x)
        np.testing.assert_allclose(lt.numpy(), le.numpy(), rtol=1e-12)
        np.testing.assert_allclose(gt.numpy(), ge.numpy(), rtol=1e-12)
    assert traced.cache_size == 1


def test_gradient_accumulation_keeps_a_graph_for_each_grad_state():
    """A traced micro-step whose ``.grad`` is None on one call and set on the next (gradient
    accumulation) keeps both graphs: two traces in eight calls, with eager's results."""
    calls = {"traced": 0}
    results = []
    for traced in (False, True):
        fg.manual_seed(0)
        m = fg.nn.Linear(6, 3).double()
        opt = fg.optim.SGD(m.parameters(), lr=0.1)

        def micro(x, m=m):
            calls["traced"] += 1
            loss = m(x).pow(2).mean() / 2
            loss.backward()
            return loss

        f = fg.trace(micro) if traced else micro
        calls["traced"] = 0
        rng = np.random.default_rng(1)
        for i in range(8):
            f(fg.tensor(rng.standard_normal((4, 6))))
            if i % 2:
                opt.step()
                opt.zero_grad()
        results.append(m.weight.numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-12)
    assert calls["traced"] == 2


def test_a_tensor_from_outside_written_without_being_read_takes_every_call():
    """``last.copy_(x)`` and ``part[1:3] = ...`` on tensors the function never read before
    writing: every call writes them (they were written by the tracing call only)."""
    last = fg.zeros(3, dtype="float64")
    part = fg.zeros(4, dtype="float64")

    @fg.trace
    def step(x):
        last.copy_(x * 2.0)
        part[1:3] = x[:2]
        return x.sum()

    for k in range(3):
        x = fg.tensor([1.0 + k, 2.0, 3.0], dtype="float64")
        step(x)
        np.testing.assert_array_equal(last.numpy(), 2 * x.numpy())
        np.testing.assert_array_equal(part.numpy(), [0.0, 1.0 + k, 2.0, 0.0])
    assert step.cache_size == 1


def test_constants_built_from_shapes_are_not_reported_as_python_data():
    """A causal mask (``full(...).triu(1)``), an ``arange`` or ``eye`` of the input's size come
    from the shapes the trace keys on: no warning. Data from a Python list is reported."""
    import warnings

    @fg.trace
    def f(x):
        n = x.shape[0]
        m = fg.full((n, n), float("-inf")).triu(1).tril(5)
        return x @ fg.eye(n) + fg.arange(n) + m.clamp(min=0).sum()

    with warnings.catch_warnings():
        warnings.simplefilter("error", fg.TraceWarning)
        f(fg.ones(100, 100))

    @fg.trace
    def g(x):
        return x + fg.tensor(list(range(100)), dtype="float32")

    with pytest.warns(fg.TraceWarning, match="Python data"):
        g(fg.ones(100))


def test_remainders_in_a_trace_are_exact_as_eager() -> None:
    # the traced graph runs the engine's fmod/remainder, not a - q * b (which loses the
    # low bits of large dividends): bitwise the eager values and gradients
    rng = np.random.default_rng(3)
    a0 = rng.standard_normal(200) * rng.choice([1.0, 1e3, 1e7], 200)
    b0 = rng.standard_normal(200) * rng.choice([0.01, 1.0, 3.7], 200)
    a = fg.tensor(a0, dtype="float64")
    b = fg.tensor(b0, dtype="float64")
    gm = fg.GradManager().attach([a, b])

    def step(s):
        with gm:
            out = (a % b) * s + fg.fmod(a, b) * 2.0
            gm.backward(out.sum())
        ga, gb = a.grad, b.grad
        a.grad = b.grad = None
        return out, ga, gb

    traced = fg.trace(step)
    scale = fg.tensor(1.5, dtype="float64")
    want = [t.numpy().copy() for t in step(scale)]
    for _ in range(2):
        got = [t.numpy() for t in traced(scale)]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(want[0], np.mod(a0, b0) * 1.5 + np.fmod(a0, b0) * 2.0)
