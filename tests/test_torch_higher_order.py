"""PyTorch-style higher order on the tape behind ``requires_grad``: ``fg.autograd.grad`` and
``Tensor.backward`` with ``create_graph=True`` (gradient penalties, Hessian-vector products,
third derivatives), ``retain_graph``, ``allow_unused`` / ``materialize_grads`` and
``fg.autograd.backward``; values and gradients against PyTorch in float64, and against finite
differences where PyTorch is not installed."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

rng = np.random.default_rng(7)
X = rng.standard_normal((5, 3))
W1 = rng.standard_normal((3, 4)) * 0.7
W2 = rng.standard_normal((4, 1)) * 0.7


def _gp_loss(lib, x, w1, w2, grad):
    # a critic with a WGAN-GP gradient penalty: d/dx of the critic, its norm per row
    d = lib.tanh(x @ w1) @ w2
    (g,) = grad(d.sum(), x)
    norm = ((g * g).sum(1) + 1e-12) ** 0.5
    return d.mean() + ((norm - 1.0) ** 2).mean()


def _fg_gp(x_np, w1_np, w2_np):
    x = fg.tensor(x_np).requires_grad_()
    w1, w2 = fg.tensor(w1_np).requires_grad_(), fg.tensor(w2_np).requires_grad_()
    loss = _gp_loss(fg, x, w1, w2, lambda y, x: fg.autograd.grad(y, x, create_graph=True))
    loss.backward()
    return loss.item(), w1.grad.numpy(), w2.grad.numpy(), x.grad.numpy()


def test_gradient_penalty_matches_torch():
    torch = pytest.importorskip("torch")
    x = torch.tensor(X, requires_grad=True)
    w1, w2 = torch.tensor(W1, requires_grad=True), torch.tensor(W2, requires_grad=True)
    loss = _gp_loss(torch, x, w1, w2, lambda y, x: torch.autograd.grad(y, x, create_graph=True))
    loss.backward()
    got = _fg_gp(X, W1, W2)
    np.testing.assert_allclose(got[0], loss.item(), rtol=1e-12)
    for a, b in zip(got[1:], (w1.grad, w2.grad, x.grad)):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-10, atol=1e-12)


def test_gradient_penalty_matches_finite_differences():
    _, gw1, _, _ = _fg_gp(X, W1, W2)
    eps = 1e-6
    for idx in [(0, 0), (1, 2), (2, 3)]:
        hi, lo = W1.copy(), W1.copy()
        hi[idx] += eps
        lo[idx] -= eps
        fd = (_fg_gp(X, hi, W2)[0] - _fg_gp(X, lo, W2)[0]) / (2 * eps)
        np.testing.assert_allclose(gw1[idx], fd, rtol=1e-6, atol=1e-8)


def test_backward_create_graph_makes_grad_differentiable():
    torch = pytest.importorskip("torch")
    a = np.array([0.5, -1.0, 2.0])
    results = []
    for lib in (fg, torch):
        x = lib.tensor(a, requires_grad=True) if lib is torch else fg.tensor(a, requires_grad=True)
        y = (lib.sin(x) * x**2).sum()
        y.backward(create_graph=True)
        g = x.grad
        assert g.requires_grad
        first = g.detach().numpy().copy()
        (g * g).sum().backward()  # accumulates d(|g|^2)/dx into x.grad, as PyTorch
        results.append((first, x.grad.detach().numpy()))
    for a_, b_ in zip(*results):
        np.testing.assert_allclose(a_, b_, rtol=1e-12)


def test_hessian_vector_product_and_third_derivative():
    x = fg.tensor([0.3, -0.7, 1.1], dtype="float64", requires_grad=True)
    v = fg.tensor([1.0, 2.0, -0.5], dtype="float64")
    y = (x.sin() * x.exp()).sum()
    (g,) = fg.autograd.grad(y, x, create_graph=True)
    (hv,) = fg.autograd.grad((g * v).sum(), x, create_graph=True)
    xs = x.detach().numpy()
    # f = sin(x) e^x: f'' = 2 cos(x) e^x (diagonal Hessian), f''' = 2 (cos - sin) e^x
    np.testing.assert_allclose(hv.numpy(), 2 * np.cos(xs) * np.exp(xs) * v.numpy(), rtol=1e-12)
    (h3,) = fg.autograd.grad(hv.sum(), x)
    want = 2 * (np.cos(xs) - np.sin(xs)) * np.exp(xs) * v.numpy()
    np.testing.assert_allclose(h3.numpy(), want, rtol=1e-12)
    # the tape goes on: a new computation records and backward works
    (x * 2.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_grad_retain_graph_allow_unused_and_materialize():
    x = fg.tensor([1.0, 2.0], dtype="float64", requires_grad=True)
    z = fg.tensor([3.0], dtype="float64", requires_grad=True)
    y = (x**2).sum()
    (g1,) = fg.autograd.grad(y, x, retain_graph=True)
    (g2,) = fg.autograd.grad(y, [x])  # a second pass through the retained graph
    np.testing.assert_allclose(g1.numpy(), [2, 4])
    np.testing.assert_allclose(g2.numpy(), [2, 4])
    assert not g1.requires_grad and x.grad is None  # .grad is not touched
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()
    y = (x**2).sum()
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        fg.autograd.grad(y, [x, z], retain_graph=True)
    gx, gz = fg.autograd.grad(y, [x, z], retain_graph=True, allow_unused=True)
    assert gz is None and gx is not None
    gx, gz = fg.autograd.grad(y, [x, z], materialize_grads=True)
    np.testing.assert_allclose(gx.numpy(), [2, 4])
    np.testing.assert_allclose(gz.numpy(), [0.0])
    with pytest.raises(RuntimeError, match="does not require grad"):
        fg.autograd.grad((x * 2).sum(), fg.tensor([1.0]))
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        fg.autograd.grad(x * 2, x)
    (g,) = fg.autograd.grad(x * 2, x, grad_outputs=fg.tensor([1.0, 10.0], dtype="float64"))
    np.testing.assert_allclose(g.numpy(), [2, 20])


def test_autograd_backward_several_roots_and_inputs():
    torch = pytest.importorskip("torch")
    a = np.array([0.2, -0.4, 0.9])
    out = []
    for lib in (fg, torch):
        x = lib.tensor(a, requires_grad=True)
        w = lib.tensor(a[::-1].copy(), requires_grad=True)
        y1, y2 = (x * w).sum(), (x.exp() * w).sum()
        lib.autograd.backward([y1, y2], [lib.tensor(2.0, dtype=lib.float64), None])
        out.append((x.grad.numpy().copy(), w.grad.numpy().copy()))
        y = (x * w * w).sum()
        lib.autograd.backward(y, inputs=[w], create_graph=True)
        assert w.grad.requires_grad
        out.append(w.grad.detach().numpy().copy())
    for f_, t_ in zip(out[:2], out[2:]):
        for a_, b_ in zip(np.atleast_1d(f_), np.atleast_1d(t_)):
            np.testing.assert_allclose(a_, b_, rtol=1e-12)


def test_create_graph_inside_a_grad_manager_is_megengines():
    # fg.grad on a GradManager's tape keeps MegEngine's meaning: enclosing managers record
    x = fg.tensor([0.5, 1.5], dtype="float64")
    outer = fg.GradManager().attach([x])
    inner = fg.GradManager().attach([x])
    with outer:
        with inner:
            y = (x**4).sum()
            (g,) = [fg.grad(y, x, create_graph=True)]
        outer.backward(g.sum())
    np.testing.assert_allclose(x.grad.numpy(), 12 * x.numpy() ** 2)


F = fg.nn.functional
W = fg.tensor(rng.standard_normal((4, 4)) * 0.5)
SECOND_ORDER = {
    "sin": lambda x: x.sin(),
    "cos": lambda x: x.cos(),
    "tan": lambda x: x.tan(),
    "tanh": lambda x: x.tanh(),
    "sigmoid": lambda x: x.sigmoid(),
    "exp": lambda x: x.exp(),
    "log": lambda x: x.log(),
    "sqrt": lambda x: x.sqrt(),
    "rsqrt": lambda x: fg.rsqrt(x),
    "reciprocal": lambda x: fg.reciprocal(x),
    "erf": lambda x: fg.erf(x),
    "log1p": lambda x: fg.log1p(x),
    "expm1": lambda x: fg.expm1(x),
    "atan": lambda x: fg.atan(x),
    "asin": lambda x: fg.asin(x * 0.9),
    "softplus": lambda x: F.softplus(x),
    "silu": lambda x: F.silu(x),
    "gelu": lambda x: F.gelu(x),
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "elu": lambda x: F.elu(x - 0.5),
    "pow": lambda x: x**2.5,
    "div": lambda x: x / (1.0 + x * x),
    "softmax": lambda x: F.softmax(x, dim=-1) * W,
    "log_softmax": lambda x: F.log_softmax(x, dim=0) * W,
    "layer_norm": lambda x: F.layer_norm(x, [4]) * W,
    "logsumexp": lambda x: fg.logsumexp(x, 1),
    "var": lambda x: x.var(1) * x.sum(0),
    "norm": lambda x: fg.norm(x, 2, 1),
    "prod": lambda x: x.prod(0),
    "cumprod": lambda x: fg.cumprod(x, 1),
    "matmul": lambda x: (x @ W).tanh() @ x,
    "cross_entropy": lambda x: F.cross_entropy(x @ W, fg.tensor([0, 3, 1, 2])),
    "attention": lambda x: F.scaled_dot_product_attention(
        x.reshape(1, 4, 4), (x @ W).reshape(1, 4, 4), x.reshape(1, 4, 4), is_causal=True
    ),
}


def _first(f, a):
    x = fg.tensor(a).requires_grad_()
    y = f(x).sum()
    y.backward()
    return x.grad.numpy()


@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_create_graph_hvp_matches_finite_differences_of_the_gradient(name):
    f = SECOND_ORDER[name]
    a = np.random.default_rng(3).uniform(0.2, 0.9, (4, 4))
    v = np.random.default_rng(4).standard_normal((4, 4))
    eps = 1e-6
    first = _first(f, a)
    fd = (_first(f, a + eps * v) - _first(f, a - eps * v)) / (2 * eps)
    x = fg.tensor(a).requires_grad_()
    (g,) = fg.autograd.grad(f(x).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), first, rtol=1e-12, atol=1e-14)
    (hv,) = fg.autograd.grad(g, x, grad_outputs=fg.tensor(v), allow_unused=True)
    hv = np.zeros_like(a) if hv is None else hv.numpy()
    np.testing.assert_allclose(hv, fd, rtol=1e-6, atol=1e-7)
