"""Autograd behaviours found by porting more of PyTorch's test_autograd.py (tensor hook
handles, in-place detach of views, grad-mode argument checks, anomaly-mode settings, the
inputs= argument of backward/grad, .grad assignment checks and batched gradient seeds):
each case runs the same code on torch and ferrograd and compares."""

import warnings

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_autograd_torch_port import LIBS, vals


@pytest.fixture(autouse=True)
def _modes_restored():
    yield
    torch.set_grad_enabled(True)
    fg.set_grad_enabled(True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.set_anomaly_enabled(False)
        fg.set_anomaly_enabled(False)


# ------------------------------------------------------------------ hook handles


@pytest.mark.parametrize("L", LIBS)
def test_hook_handle_is_a_context_manager_and_remove_is_idempotent(L):
    x = L.tensor([1.0, 2.0], requires_grad=True)
    with x.register_hook(lambda g: g * 10) as handle:
        (x * 2).sum().backward()
    assert vals(x.grad) == [20.0, 20.0]
    (x * 2).sum().backward()  # the block's end removed the hook
    assert vals(x.grad) == [22.0, 22.0]
    handle.remove()
    handle.remove()
    (x * 2).sum().backward()
    assert vals(x.grad) == [24.0, 24.0]


# ------------------------------------------------------------------ detach_ / .grad


@pytest.mark.parametrize("L", LIBS)
@pytest.mark.parametrize("base_requires_grad", [False, True])
def test_detach_in_place_of_a_view_raises(L, base_requires_grad):
    base = L.ones(3, requires_grad=base_requires_grad)
    view = base[:2]
    with pytest.raises(RuntimeError, match="detach"):
        view.detach_()
    # the base's graph is intact
    if base_requires_grad:
        (view * 3).sum().backward()
        assert vals(base.grad) == [3.0, 3.0, 0.0]
    # a tensor that is not a view still detaches in place
    y = L.ones(2, requires_grad=True) * 2
    assert y.detach_() is y
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf


@pytest.mark.parametrize("L", LIBS)
def test_a_tensor_cannot_be_its_own_grad(L):
    x = L.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="own grad"):
        x.grad = x
    assert x.grad is None
    x.grad = x.detach().clone()
    assert vals(x.grad) == [1.0, 1.0]


@pytest.mark.parametrize("L", LIBS)
def test_accumulate_grad_node_has_torchs_name(L):
    x = L.ones(2, requires_grad=True)
    node = (x * 2).grad_fn.next_functions[0][0]
    assert type(node).__name__ == "AccumulateGrad"
    assert node.name() == "torch::autograd::AccumulateGrad"
    assert node.variable is x


@pytest.mark.parametrize("L", LIBS)
def test_setting_requires_grad_of_a_computed_tensor_raises(L):
    a = L.ones(2, requires_grad=True)
    b = a * 2
    assert b.requires_grad_(True) is b  # the method's True is a no-op
    for value in (True, False):
        with pytest.raises(RuntimeError, match="leaf"):
            b.requires_grad = value
    b.sum().backward()
    assert vals(a.grad) == [2.0, 2.0]
    a.requires_grad = False  # a leaf's flag can change
    assert not (a * 2).requires_grad


@pytest.mark.parametrize("L", LIBS)
def test_non_leaf_grad_warning_matches_torchs_filters(L):
    a = L.ones(1, requires_grad=True)
    b = a * 2
    opening = "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed"
    with pytest.warns(UserWarning, match=opening):
        assert b.grad is None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", message=opening)
        assert b.grad is None
    assert caught == []
    b.retain_grad()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert b.grad is None and a.grad is None and L.ones(1).grad is None
    assert caught == []


# ------------------------------------------------------------------ grad-mode switches


@pytest.mark.parametrize("L", LIBS)
@pytest.mark.parametrize("mode", [None, 1, "foo"])
def test_set_grad_enabled_takes_only_a_bool(L, mode):
    with pytest.raises(TypeError):
        L.set_grad_enabled(mode)
    assert L.is_grad_enabled()
    x = L.ones(1, requires_grad=True)
    assert (x * 2).requires_grad


@pytest.mark.parametrize("L", LIBS)
def test_anomaly_mode_reports_its_two_settings(L):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seen = [(L.is_anomaly_enabled(), L.is_anomaly_check_nan_enabled())]
        with L.autograd.detect_anomaly(check_nan=False):
            seen.append((L.is_anomaly_enabled(), L.is_anomaly_check_nan_enabled()))
            with L.autograd.set_detect_anomaly(True):
                seen.append((L.is_anomaly_enabled(), L.is_anomaly_check_nan_enabled()))
            seen.append((L.is_anomaly_enabled(), L.is_anomaly_check_nan_enabled()))
        seen.append((L.is_anomaly_enabled(), L.is_anomaly_check_nan_enabled()))
        L.set_anomaly_enabled(True, False)
        seen.append((L.is_anomaly_enabled(), L.is_anomaly_check_nan_enabled()))
        L.set_anomaly_enabled(False)
        seen.append((L.is_anomaly_enabled(), L.is_anomaly_check_nan_enabled()))
    assert seen == [
        (False, True),
        (True, False),
        (True, True),
        (True, False),
        (False, True),
        (True, False),
        (False, True),
    ]

    # without check_nan a NaN gradient passes; with it, the function is named
    class NanGrad(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")

    x = L.ones(2, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with L.autograd.detect_anomaly(check_nan=False):
            assert L.is_anomaly_enabled()
            NanGrad.apply(x).sum().backward()
        assert np.isnan(vals(x.grad)).all()
        with L.autograd.detect_anomaly(), pytest.raises(RuntimeError, match="NanGradBackward"):
            NanGrad.apply(x).sum().backward()


@pytest.mark.parametrize("L", LIBS)
def test_anomaly_mode_checks_only_the_gradients_this_backward_produced(L):
    # a NaN already in another tensor's (or this tensor's) .grad is not this backward's
    stale = L.ones(2, requires_grad=True)
    stale.grad = L.tensor([float("nan"), 1.0])
    x = L.tensor([0.0, 4.0], requires_grad=True)
    x.grad = L.tensor([float("nan"), 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with L.autograd.detect_anomaly():
            (x * 2).sum().backward()
            fresh = L.tensor([0.0, 4.0], requires_grad=True)
            with pytest.raises(RuntimeError):
                (fresh.sqrt() * 0).sum().backward()
    assert np.isnan(vals(x.grad)[0]) and vals(x.grad)[1] == 2.0


@pytest.mark.parametrize("L", LIBS)
def test_truth_value_of_several_elements_is_a_runtime_error(L):
    # (what a hook's `if grad:` meets)
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(L.ones(3) > 0)
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(L.ones(0))
    assert bool(L.ones(1)) and not bool(L.zeros(1, 1))


# ------------------------------------------------------------------ inputs= arguments


@pytest.mark.parametrize("L", LIBS)
def test_empty_inputs_to_backward_or_grad_is_a_runtime_error(L):
    x = L.tensor([1.0, 2.0], requires_grad=True)
    z = (x * 3).sum()
    with pytest.raises(RuntimeError, match="inputs"):
        z.backward(inputs=[], retain_graph=True)
    with pytest.raises(RuntimeError, match="inputs"):
        L.autograd.backward(z, inputs=[], retain_graph=True)
    with pytest.raises(RuntimeError, match="inputs"):
        L.autograd.grad(z, [], retain_graph=True)
    assert x.grad is None
    z.backward(inputs=[x])
    assert vals(x.grad) == [3.0, 3.0]


# ------------------------------------------------------------------ is_grads_batched


def _f(L, w):
    return L.sin(w) * w + w.prod()


@pytest.mark.parametrize("create_graph", [False, True])
def test_batched_seeds_give_the_jacobian_and_its_derivative(create_graph):
    w0 = np.array([0.5, -1.0, 2.0])
    out = {}
    for L in (torch, fg):
        w = L.tensor(w0, dtype=L.float64, requires_grad=True)
        y = _f(L, w)
        (jac,) = L.autograd.grad(
            y, w, L.eye(3, dtype=L.float64), is_grads_batched=True, create_graph=create_graph
        )
        out[L.__name__] = [vals(jac)]
        assert jac.requires_grad == create_graph
        if create_graph:
            (g,) = L.autograd.grad(jac.sum(), w)
            out[L.__name__].append(vals(g))
    for got, want in zip(out["ferrograd"], out["torch"]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # the Jacobian against central differences of the function
    eps = 1e-6
    fd = np.stack(
        [
            (
                vals(_f(torch, torch.tensor(w0 + eps * e)))
                - np.asarray(vals(_f(torch, torch.tensor(w0 - eps * e))))
            )
            / (2 * eps)
            for e in np.eye(3)
        ],
        axis=1,
    )
    np.testing.assert_allclose(out["ferrograd"][0], fd, rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("L", LIBS)
def test_batched_seeds_for_several_outputs_and_unused_inputs(L):
    x = L.tensor([1.0, 2.0], requires_grad=True)
    unused = L.tensor([3.0], requires_grad=True)
    z = x * 3
    gx, gu = L.autograd.grad(
        [z, (z * x).sum()],
        [x, unused],
        [L.eye(2), L.tensor([1.0, 2.0])],
        is_grads_batched=True,
        allow_unused=True,
        retain_graph=True,
    )
    assert vals(gx) == [[9.0, 12.0], [12.0, 27.0]]
    assert gu is None
    with pytest.raises(RuntimeError, match="not have been used"):
        L.autograd.grad(z, [x, unused], L.eye(2), is_grads_batched=True, retain_graph=True)
    with pytest.raises(RuntimeError):
        L.autograd.grad(z, x, L.ones(3, 3), is_grads_batched=True, retain_graph=True)
    # the graph is freed after the last seed unless retained
    L.autograd.grad(z, x, L.eye(2), is_grads_batched=True)
    with pytest.raises(RuntimeError):
        L.autograd.grad(z, x, L.ones(2))


# ------------------------------------------------------------------ overwriting a recorded tensor


@pytest.mark.parametrize("L", LIBS)
@pytest.mark.parametrize("write", ["copy", "zero", "fill", "view_copy", "transposed_fill"])
def test_overwritten_recorded_tensor_still_requires_grad_and_gives_zeros(L, write):
    # PyTorch keeps requires_grad through an in-place write of a constant: what the tensor
    # held before gets a zero gradient, never none
    x = L.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    w = L.tensor(np.linspace(1.0, 2.0, 6).reshape(2, 3))
    h = x * 2
    if write == "copy":
        h.copy_(L.ones(2, 3, dtype=L.float64))
    elif write == "zero":
        h.zero_()
    elif write == "fill":
        h.fill_(5.0)
    elif write == "view_copy":
        h.view(-1)[1:4].copy_(L.ones(3, dtype=L.float64))
    else:
        h.t().fill_(5.0)
    assert h.requires_grad and h.grad_fn is not None
    (h * w).sum().backward()
    assert x.grad is not None
    expect = {"view_copy": [[2.0, 0.0, 0.0], [0.0, 3.6, 4.0]]}.get(write, [[0.0] * 3] * 2)
    np.testing.assert_allclose(x.grad.numpy(), expect, rtol=1e-12)


@pytest.mark.parametrize(
    "L",
    [
        torch,
        pytest.param(
            fg,
            marks=pytest.mark.xfail(
                strict=True,
                reason="copying a tracked value over a recorded tensor leaves what it held "
                "no gradient (None) where PyTorch's CopyBackwards gives zeros",
            ),
        ),
    ],
    ids=["torch", "ferrograd"],
)
def test_clone_then_copy_gives_the_source_zeros_and_the_copied_value_its_gradient(L):
    x = L.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = L.tensor([4.0, 5.0, 6.0], requires_grad=True)
    z = x.clone()
    z.copy_(y * 2)
    (z * z).sum().backward()
    assert vals(x.grad) == [0.0, 0.0, 0.0]
    assert vals(y.grad) == [32.0, 40.0, 48.0]


def test_overwrite_in_a_trace_and_under_grad_manager_gives_zeros():
    x = fg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    w = fg.tensor(np.linspace(1.0, 2.0, 6).reshape(2, 3))

    @fg.trace
    def step(x):
        h = x * 2
        h.zero_()
        h = h + x[0]
        return fg.grad((h * w).sum(), [x])[0]

    want = [[2.6, 3.0, 3.4], [0.0, 0.0, 0.0]]
    for _ in range(2):
        np.testing.assert_allclose(step(x).numpy(), want, rtol=1e-12)
    gm = fg.GradManager()
    p = fg.tensor(np.ones(3))
    gm.attach(p)
    with gm:
        h = p * 3
        h.copy_(fg.zeros(3, dtype=fg.float64))
        gm.backward((h * 2).sum())
    assert p.grad is not None and vals(p.grad) == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("L", LIBS)
def test_write_under_no_grad_keeps_the_history(L):
    x = L.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    with L.no_grad():
        h.zero_()
    assert h.requires_grad and h.grad_fn is not None


@pytest.mark.parametrize("L", LIBS)
def test_a_quotient_may_be_changed_in_place_before_backward(L):
    # PyTorch's division saves its operands, not its result, so `y = a / b; y.add_(1)` is fine
    a = L.tensor([1.0, 2.0], dtype=L.float64, requires_grad=True)
    b = L.tensor([3.0, 4.0], dtype=L.float64, requires_grad=True)
    y = a / b
    y.add_(1.0)
    (y * y).sum().backward()
    q = np.array([1 / 3, 2 / 4]) + 1
    np.testing.assert_allclose(a.grad.numpy(), 2 * q / np.array([3.0, 4.0]), rtol=1e-12)
    np.testing.assert_allclose(
        b.grad.numpy(), -2 * q * np.array([1.0, 2.0]) / np.array([9.0, 16.0]), rtol=1e-12
    )
