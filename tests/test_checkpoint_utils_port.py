"""PyTorch's activation-checkpointing tests (test_utils.py TestCheckpoint, the checkpoint
tests of test_autograd.py) run on both libraries: ``fg.utils.checkpoint`` must recompute,
replay random numbers and autocast, and pass gradients exactly as ``torch.utils.checkpoint``
does, with both values of ``use_reentrant``, nested checkpoints included."""

from __future__ import annotations

import copy
import random
import warnings

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")
LIBS = [pytest.param(torch, id="torch"), pytest.param(fg, id="fg")]


def _np(t):
    return t.detach().numpy()


def _close(a, b, rtol=1e-6, atol=1e-7):
    np.testing.assert_allclose(_np(a), _np(b), rtol=rtol, atol=atol)


def _ckpt(lib, fn, *args, **kwargs):
    return lib.utils.checkpoint.checkpoint(fn, *args, **kwargs)


def _seq(lib):
    return lib.nn.Sequential(
        lib.nn.Linear(100, 50),
        lib.nn.ReLU(),
        lib.nn.Linear(50, 20),
        lib.nn.ReLU(),
        lib.nn.Linear(20, 5),
        lib.nn.ReLU(),
    )


# -- test_utils.py: TestCheckpoint --------------------------------------------------------------


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_sequential_recomputes_the_checkpointed_half_once(lib, use_reentrant):
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.counter = 0

        def forward(self, x):
            self.counter += 1
            return x * lib.tensor(2.0)

    modules = [Net() for _ in range(10)]
    x = lib.randn(3, 4, requires_grad=True)
    out = lib.utils.checkpoint.checkpoint_sequential(modules, 2, x, use_reentrant=use_reentrant)
    assert [m.counter for m in modules] == [1] * 10
    out.sum().backward()
    assert [m.counter for m in modules] == [2] * 5 + [1] * 5


@pytest.mark.parametrize("lib", LIBS)
def test_checkpoint_sequential_chunks_as_pytorch(lib):
    # segments - 1 checkpointed chunks of len // segments modules, the rest run normally
    counts = []

    class Net(lib.nn.Module):
        def forward(self, x):
            counts.append(self)
            return x.sin()

    modules = [Net() for _ in range(10)]
    x = lib.randn(3, requires_grad=True)
    out = lib.utils.checkpoint.checkpoint_sequential(modules, 3, x, use_reentrant=False)
    counts.clear()
    out.sum().backward()
    assert [modules.index(m) for m in counts] == [3, 4, 5, 0, 1, 2]


@pytest.mark.parametrize("lib", LIBS)
def test_checkpoint_valid_double_backward(lib):
    model = _seq(lib)
    x = lib.randn(1, 100, requires_grad=True)
    out = model(x)
    ones = lib.ones(1, 5)
    g0 = lib.autograd.grad(outputs=[out], grad_outputs=[ones], inputs=[x], create_graph=True)
    out_c = lib.utils.checkpoint.checkpoint_sequential(
        list(model.children()), 2, x, use_reentrant=False
    )
    _close(out_c, out)
    g1 = lib.autograd.grad(outputs=[out_c], grad_outputs=[ones], inputs=[x], create_graph=True)
    _close(g0[0], g1[0])


def _check_sequential(lib, model, module_lists, chunks, x, use_reentrant):
    out = model(x)
    want = _np(out).copy()
    model.zero_grad()
    out.sum().backward()
    want_grads = {k: _np(p.grad).copy() for k, p in model.named_parameters()}
    want_x = _np(x.grad).copy()
    for modules in module_lists:
        d = x.detach()
        d.requires_grad = True
        out = lib.utils.checkpoint.checkpoint_sequential(
            modules, chunks, d, use_reentrant=use_reentrant
        )
        got = _np(out).copy()
        model.zero_grad()
        out.sum().backward()
        np.testing.assert_allclose(got, want, rtol=1e-6)
        np.testing.assert_allclose(_np(d.grad), want_x, rtol=1e-6)
        for k, p in model.named_parameters():
            np.testing.assert_allclose(_np(p.grad), want_grads[k], rtol=1e-6)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_sequential_matches_the_plain_model(lib, use_reentrant):
    model = _seq(lib)
    x = lib.randn(1, 100, requires_grad=True)
    _check_sequential(lib, model, [list(model.children()), model], 2, x, use_reentrant)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_sequential_of_a_module_list(lib, use_reentrant):
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.module_list = lib.nn.ModuleList(list(_seq(lib).children()))

        def forward(self, x):
            for layer in self.module_list:
                x = layer(x)
            return x

    model = Net()
    lists = [list(model.module_list.children()), model.module_list]
    _check_sequential(lib, model, lists, 2, lib.randn(1, 100, requires_grad=True), use_reentrant)


@pytest.mark.parametrize("lib", LIBS)
def test_checkpoint_sequential_takes_one_input(lib):
    class Two(lib.nn.Module):
        def forward(self, a, b):
            return a, b

    class Noop(lib.nn.Module):
        def forward(self):
            pass

    a = lib.randn(1, 100, requires_grad=True)
    b = lib.randn(1, 100, requires_grad=True)
    with pytest.raises(TypeError):
        lib.utils.checkpoint.checkpoint_sequential(lib.nn.Sequential(Two()), 1, a, b)
    with pytest.raises(TypeError):
        lib.utils.checkpoint.checkpoint_sequential(lib.nn.Sequential(Noop()), 1)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_replays_dropout(lib, use_reentrant):
    for _ in range(3):
        inp = lib.randn(2000).requires_grad_()
        phase1, phase2 = lib.nn.Dropout(), lib.nn.Dropout()
        state = lib.get_rng_state()
        out = _ckpt(lib, phase2, phase1(inp), use_reentrant=use_reentrant)
        out.sum().backward()
        with_ckpt = _np(inp.grad).copy()
        lib.set_rng_state(state)
        inp.grad = None
        phase2(phase1(inp)).sum().backward()
        np.testing.assert_array_equal(with_ckpt, _np(inp.grad))


@pytest.mark.parametrize("lib", LIBS)
def test_checkpoint_without_preserving_rng_state_runs(lib):
    inp = lib.randn(2).requires_grad_()
    out = _ckpt(lib, lib.nn.Dropout(), inp, use_reentrant=False, preserve_rng_state=False)
    out.sum().backward()
    assert inp.grad is not None


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_of_a_function_returning_its_input(lib, use_reentrant):
    def run_fn(t1, t2):
        return t1 if t2 is None else t1 + t2

    x = lib.randn(1, 100, dtype=lib.float64, requires_grad=True)
    out = _ckpt(lib, run_fn, x, None, use_reentrant=use_reentrant)
    assert out.requires_grad
    out.sum().backward()
    np.testing.assert_array_equal(_np(x.grad), np.ones((1, 100)))

    a = lib.randn(1, 4, dtype=lib.float64, requires_grad=True)
    b = lib.randn(1, 4, dtype=lib.float64)
    out = _ckpt(lib, lambda s, t: (s, t), a, b, use_reentrant=use_reentrant)
    (3 * out[0]).sum().backward()
    np.testing.assert_array_equal(_np(a.grad), np.full((1, 4), 3.0))


def _foo(t1, t2, scale, t3):
    t4 = t1 + t2 * t3
    t5 = t1 * t2 + t3
    t4 *= scale
    t5 *= scale
    return scale, t4, None, True, t5, "bar", t1


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_non_tensor_inputs_outputs(lib, use_reentrant):
    t1 = lib.rand(10, dtype=lib.float64, requires_grad=True)
    t2 = lib.rand(10, dtype=lib.float64, requires_grad=True)
    t3 = lib.rand(10, dtype=lib.float64)
    scale = random.randint(0, 10)
    res = _ckpt(lib, _foo, t1, t2, scale, t3, use_reentrant=use_reentrant)
    assert res[0] == scale and res[2] is None and res[3] is True and res[5] == "bar"
    _close(res[1], (t1 + t2 * t3) * scale)
    _close(res[4], (t1 * t2 + t3) * scale)
    _close(res[6], t1)
    res[1].sum().backward(retain_graph=True)
    res[4].sum().backward(retain_graph=True)
    res[6].sum().backward()
    if use_reentrant:
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            res[6].sum().backward()
    g1, g2 = _np(t1.grad).copy(), _np(t2.grad).copy()
    t1.grad = t2.grad = None
    res = _foo(t1, t2, scale, t3)
    lib.autograd.backward([res[1].sum(), res[4].sum(), res[6].sum()])
    np.testing.assert_allclose(_np(t1.grad), g1, rtol=1e-12)
    np.testing.assert_allclose(_np(t2.grad), g2, rtol=1e-12)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_without_tensors(lib, use_reentrant):
    t1, t2, t3 = random.random(), random.random(), random.random()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        res = _ckpt(lib, _foo, t1, t2, 4, t3, use_reentrant=use_reentrant)
    # the reentrant variant warns that nothing requires grad, the other does not
    assert any("requires_grad=True" in str(x.message) for x in w) == use_reentrant
    assert res[0] == 4 and res[2] is None and res[3] is True and res[5] == "bar"
    assert res[1] == (t1 + t2 * t3) * 4
    assert res[4] == (t1 * t2 + t3) * 4
    assert res[6] == t1


@pytest.mark.parametrize("lib", LIBS)
def test_checkpoint_of_an_output_that_needs_no_grad(lib):
    x = lib.randn(1, 4)
    y = lib.randn(1, 4, requires_grad=True)
    out = _ckpt(lib, lambda a, b: a, x, y, use_reentrant=False)
    assert not out.requires_grad


# -- test_autograd.py ---------------------------------------------------------------------------


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpointing_many_inputs(lib, use_reentrant):
    module = lib.nn.Sequential(lib.nn.Linear(10, 100), lib.nn.ReLU(), lib.nn.Linear(100, 10))
    feats = []
    for _ in range(20):
        d = lib.empty(1, 10)
        d.uniform_()
        d.requires_grad = True
        feats.append(_ckpt(lib, module, d, use_reentrant=use_reentrant))
    lib.stack(feats).mean().backward()
    assert module[0].weight.grad is not None


@pytest.mark.parametrize("lib", LIBS)
def test_checkpoint_recomputes_under_the_forward_autocast(lib):
    for enabled in [True, False]:
        seen: list = []

        def foo(x, y, z, seen=seen):
            x = lib.mm(x, y)
            y = lib.mm(x, z)
            z = lib.mm(z, z)
            seen.append(z.dtype)
            return z

        # host tensors: the region autocasts the CPU (the suite may default to another device)
        x, y, z = (lib.randn(3, 3, requires_grad=True, device="cpu") for _ in range(3))
        with lib.autocast(enabled=enabled, device_type="cpu", dtype=lib.bfloat16):
            loss = _ckpt(lib, foo, x, y, z, use_reentrant=False).sum()
        loss.backward()  # recomputed outside the region: still in bfloat16
        want = lib.bfloat16 if enabled else lib.float32
        assert seen[0] == want and set(seen) == {want}
        assert z.grad.dtype == lib.float32


@pytest.mark.parametrize("lib", LIBS)
def test_checkpoint_of_a_custom_function(lib):
    class MyFunc(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, z):
            w = x * y * z
            out = w + w
            ctx.save_for_backward(x, y, z, w, out)
            return out

        @staticmethod
        def backward(ctx, g):
            x, y, z, _, _ = ctx.saved_tensors
            return x, y, z

    def foo(x, y, z):
        return MyFunc.apply(x * y * z, y * y * z, z * z)

    def make():
        return [lib.tensor(v, requires_grad=True) for v in (1.0, 2.0, 3.0)]

    a, b = make(), make()
    _ckpt(lib, foo, *a, use_reentrant=False).sum().backward()
    foo(*b).sum().backward()
    for p, q in zip(a, b):
        _close(p.grad, q.grad)


@pytest.mark.parametrize("lib", LIBS)
def test_checkpoint_context_fn(lib):
    log = []

    class Mode:
        def __init__(self, tag):
            self.tag = tag

        def __enter__(self):
            log.append(self.tag)

        def __exit__(self, *exc):
            return False

    x = lib.tensor(1.0, requires_grad=True)
    out = _ckpt(
        lib,
        lambda t: t.exp(),
        x,
        use_reentrant=False,
        context_fn=lambda: (Mode("forward"), Mode("recompute")),
    )
    assert log == ["forward"]
    out.backward()
    assert log == ["forward", "recompute"]
    with pytest.raises(ValueError, match="only supported when use_reentrant=False"):
        _ckpt(lib, lambda t: t.sin(), x, use_reentrant=True, context_fn=lambda: (Mode(1), Mode(2)))


@pytest.mark.parametrize("lib", LIBS)
def test_checkpoint_warns_if_use_reentrant_is_left_out(lib):
    a = lib.randn(3, requires_grad=True)
    layers = [lib.nn.Linear(3, 3) for _ in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _ckpt(lib, lambda x: x, a, use_reentrant=False)
        lib.utils.checkpoint.checkpoint_sequential(layers, 3, a, use_reentrant=False)
    msg = "the use_reentrant parameter should be passed explicitly"
    with pytest.warns(UserWarning, match=msg):
        _ckpt(lib, lambda x: x, a)
    with pytest.warns(UserWarning, match=msg):
        lib.utils.checkpoint.checkpoint_sequential(layers, 3, a)
    # left out, it is the reentrant variant: no keyword arguments for the function
    with pytest.warns(UserWarning, match=msg), pytest.raises(ValueError, match="blah"):
        _ckpt(lib, lambda x, blah=None: x, a, blah=a)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("input_requires_grad", [True, False])
def test_checkpointing_without_reentrant_keyword_input(lib, input_requires_grad):
    class Holder(lib.nn.Module):
        def __init__(self, mod):
            super().__init__()
            self.module = mod

        def forward(self, data):
            return self.module(data)

    inner = lib.nn.Sequential(lib.nn.Linear(10, 100), lib.nn.ReLU(), lib.nn.Linear(100, 10))
    module = Holder(inner)
    module_copy = copy.deepcopy(module)
    with_ckpt, without = [], []
    for _ in range(10):
        d = lib.empty(1, 10)
        d.uniform_()
        d.requires_grad = input_requires_grad
        with_ckpt.append(_ckpt(lib, module, data=d, use_reentrant=False))
        without.append(module_copy(d))
    lib.stack(with_ckpt).mean().backward()
    lib.stack(without).mean().backward()
    for p, q in zip(module.parameters(), module_copy.parameters()):
        _close(p.grad, q.grad)


@pytest.mark.parametrize("lib", LIBS)
def test_checkpoint_reentrant_then_backward(lib):
    a = lib.randn(2, 2, requires_grad=True)
    _ckpt(lib, lib.exp, a, use_reentrant=True).sum().backward()
    _close(a.grad, a.exp())


@pytest.mark.parametrize("lib", LIBS)
def test_checkpointing_without_reentrant_detached_tensor(lib):
    class NoGrad(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = lib.nn.Linear(2, 2, bias=False)
            self.lin2 = lib.nn.Linear(2, 2, bias=False)

        def forward(self, x):
            with lib.no_grad():
                return self.lin2(self.linear(x))

    module = NoGrad()
    a = lib.randn(2, 2, requires_grad=True)
    for _ in range(3):
        a.grad = None
        out = _ckpt(lib, module, a, use_reentrant=False)
        out += a
        out.sum().backward()
        np.testing.assert_array_equal(_np(a.grad), np.ones((2, 2)))


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_keeps_no_grad_regions_inside_the_function(lib, use_reentrant):
    # what the function computes under no_grad is a constant, in the forward run and when
    # it is recomputed, as without checkpointing
    x = lib.tensor([1.5, -0.5], dtype=lib.float64, requires_grad=True)

    def partly_constant(t):
        with lib.no_grad():
            y = t * t
        return y * t

    def constant(t):
        with lib.no_grad():
            return t * 2

    out = _ckpt(lib, partly_constant, x, use_reentrant=use_reentrant)
    out.sum().backward()
    np.testing.assert_allclose(_np(x.grad), _np(x) ** 2, rtol=1e-14)
    assert not _ckpt(lib, constant, x, use_reentrant=False).requires_grad


@pytest.mark.parametrize("lib", LIBS)
def test_checkpointing_without_reentrant_correct_grad(lib):
    a = lib.randn(2, 2, dtype=lib.float64, requires_grad=True)
    lib.exp(a).sum().backward()
    want = _np(a.grad).copy()
    a.grad = None
    _ckpt(lib, lib.exp, a, use_reentrant=False).sum().backward()
    np.testing.assert_allclose(_np(a.grad), want, rtol=1e-14)
    d = _ckpt(lib, lib.exp, a, use_reentrant=False).sum()
    (got,) = lib.autograd.grad(d, (a,))
    np.testing.assert_allclose(_np(got), want, rtol=1e-14)


@pytest.mark.parametrize("lib", LIBS)
def test_checkpointing_without_reentrant_parameter_used_in_and_out(lib):
    w = lib.randn(10, 10, dtype=lib.float64, requires_grad=True)
    count = [0]

    def hook(g):
        count[0] += 1

    w.register_hook(hook)
    x = lib.rand(10, 10, dtype=lib.float64, requires_grad=True)
    h = w * x
    out = _ckpt(lib, lambda t: w * t, h, use_reentrant=False)
    out.sum().backward()
    assert count[0] == 1
    _close(w.grad, 2 * w * x)


@pytest.mark.parametrize("lib", LIBS)
def test_checkpointing_without_reentrant_arbitrary_input_output(lib):
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = lib.nn.Linear(5, 5, bias=False)

        def forward(self, d):
            return {"result": self.layer(d["tensor"])}

    plain = Net()
    ckpt = copy.deepcopy(plain)
    inp = {"tensor": lib.randn(5, 5)}
    o1 = plain(inp)["result"].sum()
    o2 = _ckpt(lib, ckpt, inp, use_reentrant=False)["result"].sum()
    _close(o1, o2)
    o1.backward()
    o2.backward()
    for p, q in zip(plain.parameters(), ckpt.parameters()):
        _close(p.grad, q.grad)


@pytest.mark.parametrize("lib", LIBS)
def test_checkpoint_of_a_module_with_buffers(lib):
    # batch norm's running statistics are updated again when the segment is recomputed
    m = lib.nn.Sequential(lib.nn.Linear(4, 4), lib.nn.BatchNorm1d(4), lib.nn.ReLU())
    m2 = copy.deepcopy(m)
    x = lib.randn(8, 4, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    _ckpt(lib, m, x, use_reentrant=False).sum().backward()
    m2(x2).sum().backward()
    _close(x.grad, x2.grad, rtol=1e-5, atol=1e-6)
    for p, q in zip(m.parameters(), m2.parameters()):
        _close(p.grad, q.grad, rtol=1e-5, atol=1e-6)
    assert int(m[1].num_batches_tracked) == 2 and int(m2[1].num_batches_tracked) == 1
    # two momentum-0.1 updates towards the same batch mean: 0.19 of it against 0.1
    _close(m[1].running_mean, m2[1].running_mean * 1.9, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("lib", LIBS)
def test_checkpointing_without_reentrant_dataparallel(lib):
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = lib.nn.Linear(2, 2, bias=False)

        def forward(self, x):
            return self.linear(x)

    a = lib.randn(2, 2, requires_grad=True)
    model = Net()
    copy.deepcopy(model)(a).sum().backward()
    want = _np(a.grad).copy()
    a.grad = None
    module = lib.nn.DataParallel(copy.deepcopy(model))
    _ckpt(lib, module, a, use_reentrant=False).sum().backward()
    np.testing.assert_allclose(_np(a.grad), want, rtol=1e-6)


def test_checkpoint_sequential_training_matches_pytorch_in_float64():
    # same weights, same batches: losses, input gradients, parameters and running
    # statistics after SGD steps agree with PyTorch, in train() and in eval()
    def build(lib):
        return lib.nn.Sequential(
            lib.nn.Linear(6, 8),
            lib.nn.BatchNorm1d(8),
            lib.nn.GELU(),
            lib.nn.Linear(8, 8),
            lib.nn.LayerNorm(8),
            lib.nn.Tanh(),
            lib.nn.Linear(8, 3),
        )

    tm = build(torch).double()
    fm = build(fg).to(fg.float64)
    fm.load_state_dict(
        {k: fg.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()}
    )
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    fopt = fg.optim.SGD(fm.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(0)
    for mode in ("train", "eval"):
        getattr(tm, mode)()
        getattr(fm, mode)()
        for _ in range(3):
            x = rng.standard_normal((5, 6))
            got = []
            for lib, m, opt in ((torch, tm, topt), (fg, fm, fopt)):
                xi = lib.tensor(x, requires_grad=True)
                out = lib.utils.checkpoint.checkpoint_sequential(m, 3, xi, use_reentrant=False)
                loss = (out**2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                got.append((loss.item(), _np(xi.grad).copy()))
            assert abs(got[0][0] - got[1][0]) < 1e-12
            np.testing.assert_allclose(got[1][1], got[0][1], rtol=1e-8, atol=1e-14)
        for (k, a), b in zip(tm.state_dict().items(), fm.state_dict().values()):
            np.testing.assert_allclose(_np(b), _np(a), rtol=1e-8, atol=1e-14, err_msg=k)


# -- test_autograd.py: TestNestedCheckpoint ----------------------------------------------------


def _grad(lib, fn):
    def wrapper(x):
        with lib.enable_grad():
            out = fn(x)
            (g,) = lib.autograd.grad(out, inputs=(x,), create_graph=True)
        return g

    return wrapper


def _c(lib, fn):
    def wrapped(*args, **kwargs):
        return _ckpt(lib, fn, *args, use_reentrant=False, **kwargs)

    return wrapped


def _sum(fn):
    return lambda x: fn(x).sum()


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("early_stop", [True, False])
def test_nested_checkpoint(lib, early_stop):
    def grad(f):
        return _grad(lib, f)

    def c(f):
        return _c(lib, f)

    def f(x):
        return x.sin().exp().sin()

    x = lib.tensor(0.3, dtype=lib.float64, requires_grad=True)
    tests = (
        (f, (c(f), c(c(f)))),
        (grad(f), (grad(c(f)), grad(c(c(f))))),
        (grad(grad(f)), (grad(grad(c(c(f)))),)),
        (grad(grad(grad(f))), (grad(grad(grad(c(c(f))))),)),
    )
    with lib.utils.checkpoint.set_checkpoint_early_stop(early_stop):
        for expected_fn, actual_fns in tests:
            expected = expected_fn(x)
            for actual_fn in actual_fns:
                _close(actual_fn(x), expected, rtol=1e-12)


@pytest.mark.parametrize("lib", LIBS)
def test_nested_checkpoint_two_children(lib):
    def grad(f):
        return _grad(lib, f)

    def c(f):
        return _c(lib, f)

    def f(x):
        return x.sin().exp().sin()

    def g(x):
        return x.cos().sin().exp()

    def hc(x):
        return c(g)(c(f)(x))

    def h(x):
        return g(f(x))

    a = lib.randn(3, 3, dtype=lib.float64, requires_grad=True)
    expected = grad(_sum(grad(_sum(h))))(a)
    _close(grad(_sum(grad(_sum(c(hc)))))(a), expected, rtol=1e-12)
    _close(grad(_sum(grad(_sum(hc))))(a), expected, rtol=1e-12)


@pytest.mark.parametrize("lib", LIBS)
def test_nested_checkpoint_non_tensor_inputs_and_outputs(lib):
    def fn(k, a, b, f):
        return f(k * a * b.exp()), 1, "abcd"

    a = lib.tensor(2.0, requires_grad=True)
    b = lib.tensor(3.0, requires_grad=True)
    out, _, _ = _ckpt(lib, fn, 3, a, b, lambda t: t.sin(), use_reentrant=False)
    got = lib.autograd.grad(out, (a, b))
    out, _, _ = fn(3, a, b, lambda t: t.sin())
    for p, q in zip(got, lib.autograd.grad(out, (a, b))):
        _close(p, q)


@pytest.mark.parametrize("lib", LIBS)
def test_nested_checkpoint_kwargs(lib):
    def fn(a, blah=None):
        out = a.sin().exp()
        if blah is not None:
            out = out * blah
        return out.sin().exp()

    a = lib.tensor(2.0, requires_grad=True)
    b = lib.tensor(3.0, requires_grad=True)
    got = lib.autograd.grad(_ckpt(lib, fn, a, blah=b, use_reentrant=False), (a, b))
    for p, q in zip(got, lib.autograd.grad(fn(a, blah=b), (a, b))):
        _close(p, q)


# -- ferrograd's own entry points -------------------------------------------------------------


def test_checkpointed_function_that_differentiates_inside_itself_is_refused():
    # PyTorch records the checkpointed function's graph and can; ferrograd's forward run
    # records nothing, so it says so instead of returning an output cut off from its graph
    x = fg.tensor(0.3, requires_grad=True)

    def grad_inside(t):
        (g,) = fg.autograd.grad(t.sin(), t, create_graph=True)
        return g

    def grad_enabled_inside(t):
        with fg.enable_grad():
            return t.sin()

    with pytest.raises(RuntimeError, match="inside a checkpointed function"):
        _ckpt(fg, grad_inside, x, use_reentrant=False)
    with pytest.raises(RuntimeError, match="checkpoint: the function computed an output"):
        _ckpt(fg, grad_enabled_inside, x, use_reentrant=False)
    with pytest.raises(RuntimeError, match="checkpoint: the function computed an output"):
        _ckpt(fg, _grad(fg, lambda t: t.sin()), x, use_reentrant=False)


def test_nested_checkpoints_match_finite_differences():
    def c(f):
        return _c(fg, f)

    def block(x):
        return (x.sin() * x).tanh()

    def model(x):
        return c(lambda t: c(block)(t) * c(c(block))(t))(x).sum()

    def directly_nested(x):
        return c(c(c(block)))(x).sum()

    x = fg.tensor(np.linspace(-1.0, 1.0, 5), requires_grad=True)
    for f in (model, directly_nested):
        assert fg.autograd.gradcheck(f, (x,))
        assert fg.autograd.gradgradcheck(f, (x,))


@pytest.mark.parametrize("traced", [False, True])
def test_nested_checkpoints_under_a_grad_manager(traced):
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((3, 3))
    xs = rng.standard_normal((2, 3))

    def block(h, w):
        return (h @ w).tanh() * h

    def run(lib, h, w, ckpt):
        if ckpt:
            return _ckpt(
                lib, lambda t: _ckpt(lib, block, t, w, use_reentrant=False), h, use_reentrant=False
            )
        return block(h, w)

    tw = torch.tensor(w0, requires_grad=True)
    (run(torch, torch.tensor(xs), tw, False) ** 2).sum().backward()

    w = fg.tensor(w0)
    gm = fg.GradManager().attach([w])

    def step(x):
        with gm:
            loss = (run(fg, x, w, True) ** 2).sum()
            gm.backward(loss)
        return w.grad

    if traced:
        step = fg.trace(step)
    np.testing.assert_allclose(step(fg.tensor(xs)).numpy(), tw.grad.numpy(), rtol=1e-12)
