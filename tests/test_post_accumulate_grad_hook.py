"""PyTorch's ``Tensor.register_post_accumulate_grad_hook``: ``hook(tensor)`` runs with the leaf
itself right after its gradient was added into ``.grad``, as early as that gradient is final
(optimizer-in-backward, DDP's overlap), for ``loss.backward()`` and a GradManager backward."""

from __future__ import annotations

import gc

import ferrograd as fg
import numpy as np
import pytest


def leaf(values, lib=fg):
    return lib.tensor(np.asarray(values, dtype="float64"), requires_grad=True)


# -- without torch ------------------------------------------------------------------------------


def test_hook_gets_the_tensor_itself_after_accumulation():
    p = leaf([1.0, 2.0, 3.0])
    p.grad = fg.tensor(np.ones(3))
    p.register_hook(lambda g: g * 2)  # runs before the accumulation, as in PyTorch
    seen = []

    def hook(t):
        seen.append((t is p, t.grad.numpy().copy()))
        return fg.zeros(3, dtype=fg.float64)  # ignored

    p.register_post_accumulate_grad_hook(hook)
    (p * p).sum().backward()
    assert len(seen) == 1 and seen[0][0]
    np.testing.assert_array_equal(seen[0][1], 1 + 2 * 2 * np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(p.grad.numpy(), seen[0][1])


def test_several_hooks_run_in_registration_order_and_remove_stops_one():
    p = leaf([1.0, 2.0])
    calls = []
    handles = [p.register_post_accumulate_grad_hook(lambda t, k=k: calls.append(k)) for k in "abc"]
    (p * 2).sum().backward()
    assert calls == ["a", "b", "c"]
    handles[1].remove()
    handles[1].remove()  # twice is harmless
    calls.clear()
    (p * 2).sum().backward()
    assert calls == ["a", "c"]
    with p.register_post_accumulate_grad_hook(lambda t: calls.append("d")):
        calls.clear()
        (p * 2).sum().backward()
        assert calls == ["a", "c", "d"]
    calls.clear()
    (p * 2).sum().backward()
    assert calls == ["a", "c"]
    np.testing.assert_array_equal(p.grad.numpy(), [8.0, 8.0])


def test_hooks_fire_as_soon_as_the_gradient_is_final():
    # a chain x -> W1 -> W2 -> W3: W3's gradient is final long before W1's
    rng = np.random.default_rng(0)
    ws = [leaf(rng.standard_normal((4, 4))) for _ in range(3)]
    x = fg.tensor(rng.standard_normal((2, 4)))
    seen = {}
    for k, w in enumerate(ws):

        def hook(t, k=k):
            seen[k] = [ws[j].grad is not None for j in range(3)]
            assert t.grad is not None

        w.register_post_accumulate_grad_hook(hook)
    h = x
    for w in ws:
        h = fg.tanh(h @ w)
    h.sum().backward()
    assert list(seen) == [2, 1, 0]
    assert seen[2] == [False, False, True]  # W1 and W2 not computed yet
    assert seen[1] == [False, True, True]
    assert seen[0] == [True, True, True]


def test_once_per_backward_with_shared_use_and_retain_graph():
    p = leaf([1.0, -2.0])
    seen = []
    p.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.numpy().copy()))
    y = (p * p).sum() + (3 * p).sum() + (p * p * p).sum()  # p used in several ops
    g = 2 * p.numpy() + 3 + 3 * p.numpy() ** 2
    y.backward(retain_graph=True)
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], g, rtol=1e-15)
    y.backward()  # the second backward accumulates, the hook sees the sum
    assert len(seen) == 2
    np.testing.assert_allclose(seen[1], 2 * g, rtol=1e-15)
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()
    assert len(seen) == 2


def test_errors_name_the_op():
    with pytest.raises(RuntimeError, match="register_post_accumulate_grad_hook.*require"):
        fg.tensor([1.0, 2.0]).register_post_accumulate_grad_hook(lambda t: None)
    p = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="register_post_accumulate_grad_hook.*non-leaf"):
        (p * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(TypeError, match="register_post_accumulate_grad_hook.*callable"):
        p.register_post_accumulate_grad_hook(3)
    with pytest.raises(RuntimeError, match="require"):
        fg.tensor([1, 2]).register_post_accumulate_grad_hook(lambda t: None)
    # the engine's entry points check their arguments too
    with pytest.raises(TypeError, match="register_post_accumulate_grad_hook.*Tensor"):
        fg.GradKey._register_post_accumulate_grad_hook(3, lambda: None)
    with pytest.raises(TypeError, match="register_post_accumulate_grad_hook.*int64"):
        fg.GradKey._register_post_accumulate_grad_hook(fg.tensor([1, 2]), lambda: None)
    with pytest.raises(TypeError, match="callable"):
        fg.GradKey._register_post_accumulate_grad_hook(p, 3)
    with pytest.raises(OverflowError):
        fg.GradKey._remove_post_accumulate_grad_hook(-1)
    assert fg.GradKey._remove_post_accumulate_grad_hook(2**63) is False


def test_a_raising_hook_stops_backward_and_the_process_goes_on():
    p, q = leaf([1.0, 2.0]), leaf([3.0])

    def bad(t):
        raise ValueError("hook fails on purpose")

    h = p.register_post_accumulate_grad_hook(bad)
    with pytest.raises(ValueError, match="on purpose"):
        ((p * 2).sum() * q).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), [6.0, 6.0])  # accumulated before the hook
    h.remove()
    p.grad = q.grad = None
    ((p * 2).sum() * q).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), [6.0, 6.0])
    np.testing.assert_array_equal(q.grad.numpy(), [6.0])


def test_misuse_inside_hooks_does_not_break_the_engine():
    a, b, c = leaf([1.0, 2.0]), leaf([3.0, 4.0]), leaf([5.0])
    calls = []

    def register_more(t):  # registers during backward: runs from the next backward on
        calls.append("register")
        t.register_post_accumulate_grad_hook(lambda t: calls.append("new"))

    def remove_later(t):  # removes a hook that would run after it in this backward
        calls.append("remove")
        late.remove()

    def freeze(t):  # changes which tensors require grad while backward runs
        b.requires_grad_(False)

    h = a.register_post_accumulate_grad_hook(register_more)
    a.register_post_accumulate_grad_hook(remove_later)
    late = a.register_post_accumulate_grad_hook(lambda t: calls.append("late"))
    c.register_post_accumulate_grad_hook(freeze)
    ((a * b).sum() * c).sum().backward()
    assert calls == ["register", "remove"]
    assert b.grad is None  # (frozen before its gradient was delivered, as PyTorch's check)
    h.remove()
    calls.clear()
    (a * 2).sum().backward()
    assert calls == ["remove", "new"]

    # a backward through the same (freed) graph from inside a hook is PyTorch's error
    d = leaf([2.0])
    y = (d * d).sum()
    d.register_post_accumulate_grad_hook(lambda t: y.backward())
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()

    # a tensor nobody holds any more: its hooks go with it
    e = leaf([1.0])
    e.register_post_accumulate_grad_hook(lambda t: calls.append("gone"))
    ye = (e * 2).sum()
    del e
    gc.collect()
    calls.clear()
    ye.backward()
    assert calls == []


def test_functional_grad_runs_no_hook():
    p = leaf([1.0, 2.0])
    calls = []
    p.register_post_accumulate_grad_hook(lambda t: calls.append(1))
    (g,) = fg.autograd.grad((p * 3).sum(), [p])
    np.testing.assert_array_equal(g.numpy(), [3.0, 3.0])
    assert calls == [] and p.grad is None


def test_grad_manager_backward_runs_the_hooks():
    w = fg.nn.Parameter(fg.tensor(np.array([1.0, 2.0])))
    v = fg.tensor(np.array([3.0]))  # a plain tensor, attached while the manager records
    seen = []
    w.register_post_accumulate_grad_hook(lambda t: seen.append(("w", t.grad.numpy().copy())))
    gm = fg.GradManager().attach([w], callbacks=lambda t, g: g * 10)
    with gm:
        gm.attach(v)
        v.register_post_accumulate_grad_hook(lambda t: seen.append(("v", t.grad.numpy().copy())))
        with pytest.raises(RuntimeError, match="non-leaf"):
            (v * 2).register_post_accumulate_grad_hook(lambda t: None)
        gm.backward((w * w).sum() * v.sum())
    # the callback's gradient is what accumulates, and what the hook sees
    got = dict(seen)
    assert len(seen) == 2 and set(got) == {"w", "v"}
    np.testing.assert_array_equal(got["w"], 10 * 2 * np.array([1.0, 2.0]) * 3)
    np.testing.assert_array_equal(got["v"], [5.0])
    with gm:
        gm.backward((w * w).sum())
    assert len(seen) == 3
    np.testing.assert_array_equal(seen[-1][1], got["w"] + 10 * 2 * np.array([1.0, 2.0]))


def _optimizer_in_backward(lib, params, xs, ys, lr=0.1, momentum=0.9):
    """Trains a 2-layer net with one SGD per parameter stepped inside its hook."""
    opts = {}
    for p in params:
        opts[id(p)] = lib.optim.SGD([p], lr=lr, momentum=momentum)

        def step(t):
            opts[id(t)].step()
            opts[id(t)].zero_grad()

        p.register_post_accumulate_grad_hook(step)
    w1, b1, w2 = params
    for x, y in zip(xs, ys):
        h = lib.tanh(lib.tensor(x) @ w1 + b1)
        loss = ((h @ w2 - lib.tensor(y)) ** 2).mean()
        loss.backward()
        assert all(p.grad is None for p in params)  # every step zeroed its gradient
    return [p.detach().numpy().copy() for p in params]


def _data(seed=0, steps=3):
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal((4, 5)), rng.standard_normal(5), rng.standard_normal((5, 2))]
    xs = [rng.standard_normal((6, 4)) for _ in range(steps)]
    ys = [rng.standard_normal((6, 2)) for _ in range(steps)]
    return init, xs, ys


def test_optimizer_in_backward_equals_stepping_after_backward():
    init, xs, ys = _data()
    got = _optimizer_in_backward(fg, [leaf(v) for v in init], xs, ys)
    params = [leaf(v) for v in init]
    opt = fg.optim.SGD(params, lr=0.1, momentum=0.9)
    w1, b1, w2 = params
    for x, y in zip(xs, ys):
        loss = ((fg.tanh(fg.tensor(x) @ w1 + b1) @ w2 - fg.tensor(y)) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    for a, b in zip(got, params):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-13, atol=1e-13)


# -- against torch ------------------------------------------------------------------------------


def _mlps(torch):
    torch.manual_seed(0)
    tm = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 8), torch.nn.Tanh(),
        torch.nn.Linear(8, 3),
    ).double()  # fmt: skip
    fm = fg.nn.Sequential(
        fg.nn.Linear(4, 8), fg.nn.Tanh(), fg.nn.Linear(8, 8), fg.nn.Tanh(), fg.nn.Linear(8, 3)
    ).to(fg.float64)
    fm.load_state_dict({k: fg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return tm, fm


def test_mlp_hook_order_values_and_timing_match_torch():
    torch = pytest.importorskip("torch")
    tm, fm = _mlps(torch)
    x = np.random.default_rng(1).standard_normal((5, 4))
    logs = []
    for lib, model in ((torch, tm), (fg, fm)):
        log = []
        for name, p in model.named_parameters():

            def hook(t, name=name, log=log):
                log.append((name, t.grad.detach().numpy().copy(), [n for n, _, _ in log]))

            p.register_post_accumulate_grad_hook(hook)
        for _ in range(2):  # the second backward accumulates
            (model(lib.tensor(x)) ** 2).sum().backward()
        logs.append(log)
    tlog, flog = logs
    assert [n for n, _, _ in flog] == [n for n, _, _ in tlog]
    for (n, tg, tbefore), (_, fgr, fbefore) in zip(tlog, flog):
        np.testing.assert_allclose(fgr, tg, rtol=1e-12, atol=1e-12, err_msg=n)
        assert fbefore == tbefore, n
    # the first layer's weight hook ran after the last layer's: before backward ended
    first = next(before for n, _, before in flog if n == "0.weight")
    assert "4.weight" in first and "4.bias" in first


def test_optimizer_in_backward_matches_torch():
    torch = pytest.importorskip("torch")
    init, xs, ys = _data(seed=3)
    got = _optimizer_in_backward(fg, [leaf(v) for v in init], xs, ys)
    want = _optimizer_in_backward(torch, [leaf(v, torch) for v in init], xs, ys)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_retain_graph_and_grad_match_torch():
    torch = pytest.importorskip("torch")
    out = []
    for lib in (torch, fg):
        p = leaf([0.5, -1.5, 2.0], lib)
        seen = []
        p.register_post_accumulate_grad_hook(lambda t, seen=seen: seen.append(t.grad.numpy() + 0))
        y = (lib.tanh(p) * p).sum()
        y.backward(retain_graph=True)
        y.backward()
        lib.autograd.grad((p * p).sum(), [p])  # accumulates nothing: no hook
        out.append(seen)
    assert len(out[0]) == len(out[1]) == 2
    for a, b in zip(*out):
        np.testing.assert_allclose(b, a, rtol=1e-13)


def test_errors_match_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, fg):
        with pytest.raises(RuntimeError, match="doesn't require gradient"):
            lib.tensor([1.0]).register_post_accumulate_grad_hook(lambda t: None)
        with pytest.raises(RuntimeError, match="non-leaf"):
            (leaf([1.0], lib) * 2).register_post_accumulate_grad_hook(lambda t: None)


def test_backward_with_inputs_runs_the_hooks_of_those_inputs_only():
    a = fg.ones(2, requires_grad=True)
    b = fg.ones(2, requires_grad=True)
    log = []
    a.register_post_accumulate_grad_hook(lambda t: log.append(("a", t.grad.tolist())))
    b.register_post_accumulate_grad_hook(lambda t: log.append(("b", t.grad.tolist())))
    (a * b * 3).sum().backward(inputs=[a])
    assert log == [("a", [3.0, 3.0])]  # (torch's too)
