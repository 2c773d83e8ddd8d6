"""Autograd behaviours from PyTorch's own autograd tests and ported programs, run on torch and
on ferrograd: custom Functions (saved outputs in double backward, mark_dirty,
mark_non_differentiable), subgradients, in-place accumulation into .grad, checkpointed batch
norm, container registration."""

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")


def _square(lib):
    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x**2
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * 2 * y / x

    return Square


def _exp(lib):
    class Exp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    return Exp


@pytest.mark.parametrize("make", [_square, _exp])
def test_a_saved_output_is_differentiated_in_double_backward(make):
    got = []
    for lib in (torch, fg):
        x = lib.tensor(0.5, dtype=lib.float64, requires_grad=True)
        (g,) = lib.autograd.grad(make(lib).apply(x), x, create_graph=True)
        (gg,) = lib.autograd.grad(g, x)
        got.append((g.item(), gg.item()))
    np.testing.assert_allclose(got[1], got[0], rtol=1e-12)


def _marked(lib):
    class Split(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            a, b = x * 2, (x > 0).to(x.dtype)
            ctx.mark_non_differentiable(b)
            return a, b

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 2

    return Split


def test_mark_non_differentiable_outputs_do_not_require_grad():
    for lib in (torch, fg):
        x = lib.tensor([1.0, -2.0], requires_grad=True)
        a, b = _marked(lib).apply(x)
        assert a.requires_grad and not b.requires_grad
        (a.sum() + b.sum()).backward()
        assert x.grad.tolist() == [2.0, 2.0]


def _inc(lib):
    class Inc(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            x.add_(y)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g, g

    return Inc


def test_mark_dirty_returns_the_input_and_a_viewed_base_follows():
    results = []
    for lib in (torch, fg):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 4.0], requires_grad=True)
        x = a * 1
        out = _inc(lib).apply(x, b)
        assert out is x
        (out * out).sum().backward()
        base = lib.arange(8.0, dtype=lib.float64).reshape(2, 4)
        c = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        view = base[:, 1]
        _inc(lib).apply(view, c)
        (base * base).sum().backward()
        results.append((a.grad.tolist(), b.grad.tolist(), base.tolist(), c.grad.tolist()))
    assert results[1] == results[0]
    with pytest.raises(RuntimeError, match="leaf"):
        leaf = fg.tensor([1.0], requires_grad=True)
        _inc(fg).apply(leaf, fg.tensor([1.0]))


@pytest.mark.parametrize("p", [3, 1.5])
def test_norm_at_zero_has_zero_gradient(p):
    for lib in (torch, fg):
        x = lib.zeros(3, dtype=lib.float64, requires_grad=True)
        x.norm(p).backward()
        assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_backward_accumulates_into_the_existing_grad_in_place():
    for lib in (torch, fg):
        x = lib.ones(2, dtype=lib.float64, requires_grad=True)
        (x * 1).sum().backward()
        g = x.grad
        (x * 3).sum().backward()
        assert g.tolist() == [4.0, 4.0] and x.grad.tolist() == [4.0, 4.0]


def _block(lib, mixed):
    class Block(lib.nn.Sequential):
        def __init__(self):
            if mixed:
                super().__init__(lib.nn.Linear(3, 3))
            else:
                super().__init__()
            self.act = lib.nn.ReLU()
            self.lin2 = lib.nn.Linear(3, 2)

    return Block()


def test_sequential_subclass_registers_attribute_modules_in_order():
    out = []
    for lib in (torch, fg):
        for mixed in (False, True):
            m = _block(lib, mixed)
            out.append((len(m), list(m.state_dict()), [type(c).__name__ for c in m]))
            assert m(lib.ones(4, 3)).shape == (4, 2)
    assert out[:2] == out[2:]


def test_silu_inplace_differentiates():
    a = np.linspace(-3, 3, 6)
    got = []
    for lib in (torch, fg):
        x = lib.tensor(a, requires_grad=True)
        y = x * 2.0
        lib.nn.SiLU(inplace=True)(y)
        (y * y).sum().backward()
        got.append(np.asarray(x.grad.tolist()))
    np.testing.assert_allclose(got[1], got[0], rtol=1e-12)


def _checkpointed_bn(lib, x, weights):
    lib.manual_seed(0)
    bn = lib.nn.BatchNorm2d(3).double()
    conv = lib.nn.Conv2d(3, 2, 1).double()
    conv.load_state_dict({k: lib.tensor(v) for k, v in weights.items()})
    xi = lib.tensor(x, requires_grad=True)

    def segment(a):
        return conv(lib.relu(bn(a)))

    y = lib.utils.checkpoint.checkpoint(segment, xi, use_reentrant=False)
    y.sum().backward()
    return (
        np.asarray(xi.grad.tolist()),
        np.asarray(conv.weight.grad.tolist()),
        np.asarray(bn.running_mean.tolist()),
        int(bn.num_batches_tracked),
    )


def test_checkpoint_over_a_training_batch_norm():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3, 5, 5))
    weights = {"weight": rng.standard_normal((2, 3, 1, 1)), "bias": rng.standard_normal(2)}
    expect = _checkpointed_bn(torch, x, weights)
    got = _checkpointed_bn(fg, x, weights)
    for a, b in zip(expect, got):
        np.testing.assert_allclose(b, a, rtol=1e-10)


def test_torchscript_and_fx_names_leave_code_as_python():
    import ferrograd.fx
    from ferrograd.utils.data import dataloader, dataset, sampler

    assert fg.jit.unused(len) is len and fg.jit.ignore(len) is len and fg.jit.ignore()(len) is len
    assert not fg.jit.is_scripting() and fg.jit.annotate(int, 3) == 3
    assert ferrograd.fx.wrap("f") == "f"
    assert dataset.TensorDataset is fg.utils.data.TensorDataset
    assert sampler.RandomSampler is fg.utils.data.RandomSampler
    assert dataloader.DataLoader is fg.utils.data.DataLoader
    with pytest.raises(AssertionError, match="nope"):
        fg._assert(False, "nope")


def test_add_with_alpha_first_is_pytorchs_old_order():
    for lib in (torch, fg):
        x = lib.ones(3)
        with pytest.warns(UserWarning):
            x.add_(-0.5, lib.ones(3))
        assert x.tolist() == [0.5, 0.5, 0.5]


def test_an_alias_of_the_same_tensor_follows_an_inplace_write():
    for lib in (torch, fg):
        a = lib.ones(3, 1, dtype=lib.float64, requires_grad=True)
        b = a * 2
        c = b.view_as(b)
        c.mul_(2)
        b.sum().backward()
        assert a.grad.tolist() == [[4.0], [4.0], [4.0]]


def test_no_grad_on_a_generator_applies_while_it_runs():
    for lib in (torch, fg):

        @lib.no_grad()
        def gen(n, lib=lib):
            for _ in range(n):
                yield lib.is_grad_enabled()

        assert list(gen(3)) == [False] * 3 and lib.is_grad_enabled()


def test_set_grad_enabled_as_a_decorator():
    for lib in (torch, fg):

        @lib.set_grad_enabled(False)
        def f(x):
            return (x * 2).requires_grad

        assert lib.is_grad_enabled()
        assert f(lib.ones(1, requires_grad=True)) is False
        assert lib.is_grad_enabled()


def test_del_grad_inference_mode_query_and_put():
    for lib in (torch, fg):
        x = lib.ones(2, requires_grad=True)
        (x * 2).sum().backward()
        del x.grad
        assert x.grad is None
        with lib.inference_mode():
            assert lib.is_inference_mode_enabled()
        assert not lib.is_inference_mode_enabled()
        t = lib.zeros(2, 3)
        t.put_(lib.tensor([1, 4, -1]), lib.tensor([9.0, 8.0, 7.0]))
        u = lib.zeros(4)
        u.put_(lib.tensor([1, 1]), lib.tensor([1.0, 2.0]), accumulate=True)
        assert t.tolist() == [[0.0, 9.0, 0.0], [0.0, 8.0, 7.0]] and u.tolist() == [
            0.0,
            3.0,
            0.0,
            0.0,
        ]


@pytest.mark.parametrize(
    ("method", "args"), [("pow_", (2,)), ("sqrt_", ()), ("exp_", ()), ("abs_", ())]
)
def test_inplace_math_on_a_tracked_tensor_differentiates(method, args):
    a = np.random.default_rng(4).random((3, 3)) + 0.5
    got = []
    for lib in (torch, fg):
        x = lib.tensor(a, requires_grad=True)
        z = x * 1
        getattr(z, method)(*args)
        (z * z).sum().backward()
        got.append(np.asarray(x.grad.tolist()))
    np.testing.assert_allclose(got[1], got[0], rtol=1e-12)


@pytest.mark.parametrize("op", ["imul", "itruediv", "ipow"])
def test_inplace_into_an_untracked_tensor_from_a_tracked_operand(op):
    got = []
    for lib in (torch, fg):
        w = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
        buf = lib.ones(3, dtype=lib.float64) * 2
        if op == "imul":
            buf *= w
        elif op == "itruediv":
            buf /= w
        else:
            buf **= w
        (buf * buf).sum().backward()
        got.append(np.asarray(w.grad.tolist()))
    np.testing.assert_allclose(got[1], got[0], rtol=1e-12)


def test_views_and_aliases_following_writes_do_not_leak():
    import gc

    w = fg.ones(1000, requires_grad=True)

    def step():
        buf = fg.zeros(1000)
        buf *= w
        y = buf * 1
        z = y.view(-1)
        y.add_(w)
        y[:10].mul_(3)
        c = y.view_as(y)
        c.add_(1)
        (z.sum() + buf.sum() + y.sum()).backward()

    step()
    gc.collect()
    before = fg._core.memory_stats("cpu")["live_tensors"]
    for _ in range(20):
        step()
    gc.collect()
    assert fg._core.memory_stats("cpu")["live_tensors"] == before


def _retained_after_writes(lib):
    x = lib.ones(3, dtype=lib.float64, requires_grad=True)
    w = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)
    out = []
    y = x * 2
    y.retain_grad()
    y.add_(1)
    y.mul_(w)  # the retained gradient is that of the newest value
    (y * w).sum().backward()
    out += [y.grad, x.grad]
    x.grad = None
    y = x * 2
    y.retain_grad()
    y[0].mul_(5)  # a write through a view makes a new value of y too
    (y * w).sum().backward()
    out += [y.grad, x.grad]
    x.grad = None
    y = x * 2
    seen = []
    y.register_hook(seen.append)  # a hook stays with the value it was registered on
    y.mul_(3)
    (y * w).sum().backward()
    out += [seen[0], x.grad, lib.tensor(float(y.retains_grad), dtype=lib.float64)]
    return [t.detach().numpy() for t in out]


def test_retain_grad_follows_in_place_writes_and_hooks_stay():
    for got, want in zip(_retained_after_writes(fg), _retained_after_writes(torch)):
        np.testing.assert_array_equal(got, want)


def _non_tensor_outputs(lib):
    class Scale(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k
            return x * k, k + 1, None, x * 2

        @staticmethod
        def backward(ctx, g, g_int, g_none, g2):
            assert g_int is None and g_none is None
            return g * ctx.k + g2 * 2, None

    x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    y, n, nothing, z = Scale.apply(x, 3)
    assert n == 4 and nothing is None and isinstance(n, int)
    (y * y + z).sum().backward()
    return [y.detach().numpy(), z.detach().numpy(), x.grad.numpy()]


def test_function_outputs_may_include_non_tensors():
    for got, want in zip(_non_tensor_outputs(fg), _non_tensor_outputs(torch)):
        np.testing.assert_array_equal(got, want)


def _reentrant_checkpoint(lib):
    w = lib.tensor([[1.0, 2.0], [3.0, -4.0]], dtype=lib.float64, requires_grad=True)

    def f(x):
        return (x @ w).tanh()

    class Recompute(lib.autograd.Function):
        # reentrant checkpointing: forward keeps no graph, backward runs f again under
        # enable_grad and a backward of its own through it
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            with lib.no_grad():
                return f(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            x = x.detach().requires_grad_()
            with lib.enable_grad():
                y = f(x)
            lib.autograd.backward(y, g)
            return x.grad

    x = lib.tensor([[0.1, 0.2], [0.3, -0.1]], dtype=lib.float64, requires_grad=True)
    (Recompute.apply(x * 2) * x).sum().backward()
    return [x.grad.numpy(), w.grad.numpy()]


def test_a_custom_backward_may_run_a_backward_of_its_own_under_enable_grad():
    for got, want in zip(_reentrant_checkpoint(fg), _reentrant_checkpoint(torch)):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def _grad_runs_only_what_its_inputs_need(lib):
    a = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    b = lib.tensor([3.0, -1.0], dtype=lib.float64, requires_grad=True)
    log = []
    a.register_hook(lambda g: log.append("a"))
    b.register_hook(lambda g: log.append("b"))
    m = a * 3
    m.register_hook(lambda g: log.append("m"))
    z = (m * b).sum()
    (gb,) = lib.autograd.grad(z, [b], retain_graph=True)  # m and a are not on b's path
    before = list(log)
    z.backward(inputs=[a])  # the same graph again, to a: nothing left behind in b's way
    (ga,) = lib.autograd.grad((a * b).sum() * 2, a)
    return before, log, [gb.numpy(), a.grad.numpy(), ga.numpy()], b.grad is None


def test_autograd_grad_runs_only_what_its_inputs_need():
    got, want = (
        _grad_runs_only_what_its_inputs_need(fg),
        _grad_runs_only_what_its_inputs_need(torch),
    )
    assert got[0] == want[0] and got[1] == want[1] and got[3] == want[3]
    for g, w in zip(got[2], want[2]):
        np.testing.assert_array_equal(g, w)


def _freeze_after_forward(lib):
    # CycleGAN: forward(); set_requires_grad(D, False); backward_G()
    g = lib.nn.Linear(3, 3).double()
    d = lib.nn.Linear(3, 1).double()
    with lib.no_grad():
        for m in (g, d):
            for i, p in enumerate(m.parameters()):
                p.copy_(lib.tensor(np.linspace(-1, 1, p.numel()).reshape(p.shape) * (i + 1)))
    x = lib.tensor(np.arange(6.0).reshape(2, 3) / 7)
    y = g(x)  # built while d requires grad
    d.weight.grad = lib.full((1, 3), 5.0, dtype=lib.float64)
    for p in d.parameters():
        p.requires_grad = False
    loss = d(y).sum() + d(x).sum()
    loss.backward()
    out = [g.weight.grad.numpy(), g.bias.grad.numpy(), d.weight.grad.numpy()]
    assert d.bias.grad is None and not d.weight.requires_grad and d.weight.is_leaf
    assert y.requires_grad and y.grad_fn is not None
    return out


def test_freezing_a_module_keeps_the_graphs_built_before():
    for got, want in zip(_freeze_after_forward(fg), _freeze_after_forward(torch)):
        np.testing.assert_allclose(got, want, rtol=1e-13)
