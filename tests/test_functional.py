"""The functional layer: ferrograd.grad (with create_graph), vjp, jvp and hvp, and two
second-order training patterns built on it: a WGAN-GP gradient penalty and a MAML inner
step. Every number is checked against numpy closed forms or central finite differences of
numpy code.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from conftest import numeric_grad


def T(a) -> fg.Tensor:
    return fg.tensor(np.asarray(a, dtype=np.float64))


def close(t, expected, rtol=1e-7, atol=1e-9):
    assert t is not None, "expected a gradient, got None"
    np.testing.assert_allclose(t.numpy(), expected, rtol=rtol, atol=atol)


def fd_jvp(f_np, xs, vs, eps=1e-6):
    """Central difference of f_np along the direction vs (f_np returns an array)."""
    plus = f_np(*[x + eps * v for x, v in zip(xs, vs)])
    minus = f_np(*[x - eps * v for x, v in zip(xs, vs)])
    return (np.asarray(plus) - np.asarray(minus)) / (2 * eps)


# --------------------------------------------------------------------------------------
# fg.grad
# --------------------------------------------------------------------------------------


def test_grad_returns_gradients_without_touching_dot_grad():
    x0, w0 = np.array([0.5, 1.5, -0.3]), np.array([2.0, 3.0, -1.0])
    x, w = T(x0), T(w0)
    w.grad = T([9.0, 9.0, 9.0])
    gm = fg.GradManager().attach([x, w])
    with gm:
        y = (x.tanh() * x * w).sum()
        g = fg.grad(y, x)
    assert isinstance(g, fg.Tensor)
    assert x.grad is None
    close(w.grad, [9.0, 9.0, 9.0])
    (e,) = numeric_grad(lambda a: np.sum(np.tanh(a) * a * w0), [x0])
    close(g, e, rtol=1e-6, atol=1e-8)


def test_grad_with_a_list_returns_a_list():
    x0, w0 = np.array([0.5, 1.5]), np.array([2.0, 3.0])
    x, w = T(x0), T(w0)
    gm = fg.GradManager().attach([x, w])
    with gm:
        gs = fg.grad((x * x * w).sum(), [x, w])
    assert isinstance(gs, list) and len(gs) == 2
    close(gs[0], 2 * x0 * w0)
    close(gs[1], x0**2)
    assert x.grad is None and w.grad is None
    with gm:
        gs = fg.grad((x * x * w).sum(), (w,))
    assert isinstance(gs, list) and len(gs) == 1
    close(gs[0], x0**2)


def test_grad_with_dy_and_several_outputs():
    x0 = np.array([[1.0, -2.0], [0.5, 3.0]])
    dy0 = np.array([[2.0, 1.0], [-1.0, 0.5]])
    x = T(x0)
    gm = fg.GradManager().attach(x)
    with gm:
        g = fg.grad(x.exp() * x, x, dy=T(dy0))
    close(g, dy0 * (np.exp(x0) * x0 + np.exp(x0)))
    with gm:
        g = fg.grad([x * x, (x * 3.0).sum()], x, dy=[T(dy0), T(2.0)])
    close(g, dy0 * 2 * x0 + 6.0)


def test_grad_of_an_unreached_input_is_zero():
    x, z = T([1.0, 2.0]), T([3.0, 4.0, 5.0])
    gm = fg.GradManager().attach([x, z])
    with gm:
        gx, gz = fg.grad((x * x).sum(), [x, z])
    close(gx, [2.0, 4.0])
    assert tuple(gz.shape) == (3,)
    np.testing.assert_array_equal(gz.numpy(), np.zeros(3))


def test_grad_consumes_the_recording():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x)
    with gm:
        y = (x * x).sum()
        fg.grad(y, x)
        with pytest.raises(RuntimeError):
            gm.backward(y)
    assert x.grad is None
    with gm:  # a fresh recording works
        gm.backward((x * x).sum())
    close(x.grad, [2.0, 4.0])


def test_grad_with_respect_to_an_intermediate():
    x0 = np.array([0.3, -0.6])
    x = T(x0)
    gm = fg.GradManager().attach(x)
    with gm:
        h = x * 2.0
        y = (h.tanh() ** 2).sum()
        gh = fg.grad(y, h)
    t = np.tanh(2 * x0)
    close(gh, 2 * t * (1 - t * t))


def test_grad_errors():
    x, z = T([1.0, 2.0]), T([3.0, 4.0])
    gm = fg.GradManager().attach(x)
    with gm, pytest.raises(fg.GradError):
        fg.grad((z * z).sum(), z)  # nothing recorded tracks y
    with gm, pytest.raises(fg.GradError):
        fg.grad((x * z).sum(), z)  # z not attached
    with pytest.raises(fg.GradError):
        fg.grad((x * x).sum(), x)  # not recording at all


def test_grad_create_graph_false_is_a_constant_for_the_outer_manager():
    x = T([1.0, 2.0])
    outer, inner = fg.GradManager().attach(x), fg.GradManager().attach(x)
    with outer:
        with inner:
            g = fg.grad((x**3).sum(), x)
        close(g, [3.0, 12.0])
        outer.backward((g * 1.0).sum())
    assert x.grad is None


def test_grad_create_graph_true_gives_the_second_derivative():
    x0 = np.array([0.7, -1.3])
    x = T(x0)
    outer, inner = fg.GradManager().attach(x), fg.GradManager().attach(x)
    with outer:
        with inner:
            g = fg.grad((x.tanh() * x**3).sum(), x, create_graph=True)
        assert x.grad is None
        outer.backward(g)
    t = np.tanh(x0)
    s = 1 - t * t
    close(x.grad, -2 * t * s * x0**3 + 6 * s * x0**2 + 6 * t * x0, rtol=1e-10)


def test_grad_create_graph_three_levels_with_functional_only():
    x0 = np.array([0.5, 2.0, -1.0])
    x = T(x0)
    k1, k2, k3 = (fg.GradManager().attach(x) for _ in range(3))
    with k1:
        with k2:
            with k3:
                g1 = fg.grad((x**5).sum(), x, create_graph=True)
            g2 = fg.grad(g1.sum(), x, create_graph=True)
        g3 = fg.grad(g2.sum(), x)
    close(g1, 5 * x0**4)
    close(g2, 20 * x0**3)
    close(g3, 60 * x0**2)
    assert x.grad is None


# --------------------------------------------------------------------------------------
# vjp / jvp / hvp
# --------------------------------------------------------------------------------------

RNG = np.random.default_rng(21)
A0 = RNG.normal(size=(3, 2))
B0 = RNG.normal(size=(2,))


def f_pair(a, b):
    return (a @ b).tanh() * (a * a).sum(axis=1)


def f_pair_np(a, b):
    return np.tanh(a @ b) * np.sum(a * a, axis=1)


def test_vjp_matches_finite_differences():
    a, b = T(A0), T(B0)
    out, vjp_fn = fg.vjp(f_pair, a, b)
    np.testing.assert_allclose(out.numpy(), f_pair_np(A0, B0), rtol=1e-12)
    cot = np.array([1.0, -2.0, 0.5])
    ga, gb = vjp_fn(T(cot))
    ea, eb = numeric_grad(lambda p, q: np.sum(f_pair_np(p, q) * cot), [A0, B0])
    close(ga, ea, rtol=1e-6, atol=1e-8)
    close(gb, eb, rtol=1e-6, atol=1e-8)
    assert a.grad is None and b.grad is None
    # vjp_fn is reusable, and linear in the cotangent
    ga2, gb2 = vjp_fn(T(3.0 * cot))
    close(ga2, 3.0 * ea, rtol=1e-6, atol=1e-8)
    close(gb2, 3.0 * eb, rtol=1e-6, atol=1e-8)


def test_vjp_with_several_outputs():
    def f(a, b):
        return a * b, (a * a).sum()

    a0, b0 = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    out, vjp_fn = fg.vjp(f, T(a0), T(b0))
    assert isinstance(out, tuple) and len(out) == 2
    ga, gb = vjp_fn(T([1.0, 10.0]), T(2.0))
    close(ga, b0 * [1.0, 10.0] + 2.0 * 2 * a0)
    close(gb, a0 * [1.0, 10.0])
    with pytest.raises(ValueError):
        vjp_fn(T([1.0, 1.0]))


def test_jvp_matches_finite_differences():
    va, vb = RNG.normal(size=A0.shape), RNG.normal(size=B0.shape)
    out, jv = fg.jvp(f_pair, (T(A0), T(B0)), (T(va), T(vb)))
    np.testing.assert_allclose(out.numpy(), f_pair_np(A0, B0), rtol=1e-12)
    expected = fd_jvp(f_pair_np, [A0, B0], [va, vb])
    close(jv, expected, rtol=1e-6, atol=1e-8)


def test_jvp_with_tuple_output_and_zero_tangent():
    x0 = np.array([0.5, -1.0, 2.0])
    _, jv = fg.jvp(lambda a: (a * a, a.exp()), (T(x0),), (T([1.0, 0.0, 2.0]),))
    assert isinstance(jv, tuple) and len(jv) == 2
    close(jv[0], 2 * x0 * [1.0, 0.0, 2.0])
    close(jv[1], np.exp(x0) * [1.0, 0.0, 2.0])
    _, jv0 = fg.jvp(lambda a: a.tanh(), (T(x0),), (T(np.zeros(3)),))
    np.testing.assert_array_equal(jv0.numpy(), np.zeros(3))


def test_jvp_shape_mismatch_raises():
    with pytest.raises(fg.ShapeError):
        fg.jvp(lambda a: a * 2.0, (T([1.0, 2.0]),), (T([1.0]),))


def test_jvp_and_vjp_are_transposes():
    """u . (J v) == (J^T u) . v with J from both helpers."""
    va, vb = RNG.normal(size=A0.shape), RNG.normal(size=B0.shape)
    u = RNG.normal(size=(3,))
    _, jv = fg.jvp(f_pair, (T(A0), T(B0)), (T(va), T(vb)))
    _, vjp_fn = fg.vjp(f_pair, T(A0), T(B0))
    ga, gb = vjp_fn(T(u))
    lhs = float(np.dot(u, jv.numpy()))
    rhs = float(np.sum(ga.numpy() * va) + np.dot(gb.numpy(), vb))
    assert lhs == pytest.approx(rhs, rel=1e-10)


M0 = RNG.normal(size=(4, 3))


def quartic(x):
    return ((T(M0) @ x).tanh() ** 2).sum() + (x**4).sum()


def quartic_grad_np(x):
    t = np.tanh(M0 @ x)
    return M0.T @ (2 * t * (1 - t * t)) + 4 * x**3


def test_hvp_matches_finite_differences_of_the_gradient():
    x0, v0 = RNG.normal(size=3), RNG.normal(size=3)
    val, hv = fg.hvp(quartic, T(x0), T(v0))
    t = np.tanh(M0 @ x0)
    assert val.item() == pytest.approx(float(np.sum(t * t) + np.sum(x0**4)), rel=1e-12)
    expected = fd_jvp(quartic_grad_np, [x0], [v0])
    close(hv, expected, rtol=1e-6, atol=1e-8)


def test_hvp_with_several_primals():
    a0, b0 = np.array([0.5, -1.0]), np.array([2.0, 0.3])
    va, vb = np.array([1.0, -0.5]), np.array([0.25, 2.0])

    def grad_np(a, b):  # of sum(a^2 * b^3) + sum(exp(a * b))
        e = np.exp(a * b)
        return np.concatenate([2 * a * b**3 + b * e, 3 * a**2 * b**2 + a * e])

    _, (ha, hb) = fg.hvp(
        lambda a, b: (a * a * b * b * b).sum() + (a * b).exp().sum(),
        (T(a0), T(b0)),
        (T(va), T(vb)),
    )
    expected = fd_jvp(grad_np, [a0, b0], [va, vb])
    close(ha, expected[:2], rtol=1e-6, atol=1e-8)
    close(hb, expected[2:], rtol=1e-6, atol=1e-8)


def test_functional_helpers_do_not_touch_dot_grad():
    x = T([0.5, 1.5])
    fg.hvp(lambda a: (a**3).sum(), x, T([1.0, 1.0]))
    fg.jvp(lambda a: a * a, (x,), (T([1.0, 1.0]),))
    _, fn = fg.vjp(lambda a: a * a, x)
    fn(T([1.0, 1.0]))
    assert x.grad is None


def test_hvp_inside_a_training_step():
    """hvp of a function that closes over an attached weight, inside `with gm:`; the
    manager's own backward is unaffected and sees the hvp's value."""
    x0, w0 = np.array([1.0, 2.0]), np.array([0.5, -0.5])
    x, w = T(x0), T(w0)
    gm = fg.GradManager().attach(w)
    with gm:
        val, hv = fg.hvp(lambda a: (a**3 * w).sum(), x, T([1.0, 1.0]))
        close(hv, 6 * x0 * w0)
        gm.backward((w * w).sum() + val)
    close(w.grad, 2 * w0 + x0**3)


# --------------------------------------------------------------------------------------
# WGAN-GP gradient penalty
# --------------------------------------------------------------------------------------


def critic_np(x, W1, b1, w2):
    return np.tanh(x @ W1 + b1) @ w2


def input_grad_np(x, W1, b1, w2):
    h = np.tanh(x @ W1 + b1)
    return ((1 - h * h) * w2) @ W1.T


def penalty_np(x, W1, b1, w2):
    g = input_grad_np(x, W1, b1, w2)
    return float(np.mean((np.sqrt(np.sum(g * g, axis=1)) - 1.0) ** 2))


def test_wgan_gp_gradient_penalty():
    rng = np.random.default_rng(7)
    real, fake = rng.normal(size=(4, 3)), rng.normal(size=(4, 3)) + 1.0
    alpha = rng.uniform(size=(4, 1))
    xhat0 = alpha * real + (1 - alpha) * fake
    W10, b10, w20 = rng.normal(size=(3, 5)), rng.normal(size=(5,)) * 0.3, rng.normal(size=(5,))

    W1, b1, w2 = T(W10), T(b10), T(w20)
    xhat = T(xhat0)
    gm = fg.GradManager().attach([W1, b1, w2])
    with gm:
        inner = fg.GradManager().attach(xhat)
        with inner:
            d = (xhat @ W1 + b1).tanh() @ w2
            gx = fg.grad(d.sum(), xhat, create_graph=True)
        close(gx, input_grad_np(xhat0, W10, b10, w20), rtol=1e-10)
        norms = (gx * gx).sum(axis=1).sqrt()
        pen = ((norms - 1.0) ** 2).mean()
        gm.backward(pen)
    assert pen.item() == pytest.approx(penalty_np(xhat0, W10, b10, w20), rel=1e-10)
    assert xhat.grad is None
    expected = numeric_grad(lambda W, b, w: penalty_np(xhat0, W, b, w), [W10, b10, w20])
    for t, e in zip([W1, b1, w2], expected):
        close(t.grad, e, rtol=1e-5, atol=1e-8)


def test_wgan_gp_with_critic_loss_and_penalty_in_one_backward():
    rng = np.random.default_rng(8)
    real, fake = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    xhat0 = 0.5 * (real + fake)
    W10, b10, w20 = rng.normal(size=(2, 4)), rng.normal(size=(4,)) * 0.3, rng.normal(size=(4,))
    lam = 10.0

    def total_np(W, b, w):
        critic = np.mean(critic_np(fake, W, b, w)) - np.mean(critic_np(real, W, b, w))
        return critic + lam * penalty_np(xhat0, W, b, w)

    params = [T(W10), T(b10), T(w20)]
    W1, b1, w2 = params
    gm = fg.GradManager().attach(params)
    with gm:
        D = lambda x: (x @ W1 + b1).tanh() @ w2
        critic = D(T(fake)).mean() - D(T(real)).mean()
        xhat = T(xhat0)
        inner = fg.GradManager().attach(xhat)
        with inner:
            gx = fg.grad(D(xhat).sum(), xhat, create_graph=True)
        pen = (((gx * gx).sum(axis=1).sqrt() - 1.0) ** 2).mean()
        gm.backward(critic + pen * lam)
    expected = numeric_grad(total_np, [W10, b10, w20])
    for t, e in zip(params, expected):
        close(t.grad, e, rtol=1e-5, atol=1e-7)


# --------------------------------------------------------------------------------------
# MAML inner step
# --------------------------------------------------------------------------------------


def net_np(X, W, b, v):
    return np.tanh(X @ W + b) @ v


def loss_np(X, Y, W, b, v):
    return float(np.mean((net_np(X, W, b, v) - Y) ** 2))


def loss_grads_np(X, Y, W, b, v):
    h = np.tanh(X @ W + b)
    r = h @ v - Y
    dpred = 2 * r / len(Y)
    dv = h.T @ dpred
    dz = np.outer(dpred, v) * (1 - h * h)
    return X.T @ dz, dz.sum(axis=0), dv


def maml_np(Xtr, Ytr, Xval, Yval, lr, W, b, v):
    gW, gb, gv = loss_grads_np(Xtr, Ytr, W, b, v)
    return loss_np(Xval, Yval, W - lr * gW, b - lr * gb, v - lr * gv)


def fg_loss(X, Y, W, b, v):
    return (((T(X) @ W + b).tanh() @ v - T(Y)) ** 2).mean()


MRNG = np.random.default_rng(13)
XTR, YTR = MRNG.normal(size=(5, 3)), MRNG.normal(size=(5,))
XVAL, YVAL = MRNG.normal(size=(4, 3)), MRNG.normal(size=(4,))
PW, PB, PV = MRNG.normal(size=(3, 4)), MRNG.normal(size=(4,)) * 0.2, MRNG.normal(size=(4,))
LR = 0.3


def test_numpy_maml_reference_gradients_are_right():
    """Guards the hand-written numpy inner gradient used by the MAML reference."""
    got = loss_grads_np(XTR, YTR, PW, PB, PV)
    fd = numeric_grad(lambda W, b, v: loss_np(XTR, YTR, W, b, v), [PW, PB, PV])
    for g, e in zip(got, fd):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-9)


def test_maml_inner_step_gradient_matches_finite_differences():
    params = [T(PW), T(PB), T(PV)]
    gm = fg.GradManager().attach(params)
    with gm:
        inner = fg.GradManager().attach(params)
        with inner:
            grads = fg.grad(fg_loss(XTR, YTR, *params), params, create_graph=True)
        for g, e in zip(grads, loss_grads_np(XTR, YTR, PW, PB, PV)):
            close(g, e, rtol=1e-10, atol=1e-12)
        adapted = [p - g * LR for p, g in zip(params, grads)]
        outer_loss = fg_loss(XVAL, YVAL, *adapted)
        gm.backward(outer_loss)
    assert outer_loss.item() == pytest.approx(
        maml_np(XTR, YTR, XVAL, YVAL, LR, PW, PB, PV), rel=1e-10
    )
    expected = numeric_grad(
        lambda W, b, v: maml_np(XTR, YTR, XVAL, YVAL, LR, W, b, v), [PW, PB, PV]
    )
    for p, e in zip(params, expected):
        close(p.grad, e, rtol=1e-5, atol=1e-8)
    # first-order MAML (no create_graph) would give a different gradient: the test can tell
    fo = loss_grads_np(
        XVAL, YVAL, *[p - LR * g for p, g in zip([PW, PB, PV], loss_grads_np(XTR, YTR, PW, PB, PV))]
    )
    assert not all(np.allclose(p.grad.numpy(), f, rtol=1e-4) for p, f in zip(params, fo))


def test_maml_with_two_inner_steps_and_functional_outer_grad():
    lr = 0.1

    def maml2_np(W, b, v):
        p = [W, b, v]
        for _ in range(2):
            gs = loss_grads_np(XTR, YTR, *p)
            p = [a - lr * g for a, g in zip(p, gs)]
        return loss_np(XVAL, YVAL, *p)

    params = [T(PW), T(PB), T(PV)]
    outer = fg.GradManager().attach(params)
    with outer:
        current = params
        for _ in range(2):
            inner = fg.GradManager().attach(current)
            with inner:
                gs = fg.grad(fg_loss(XTR, YTR, *current), current, create_graph=True)
            current = [p - g * lr for p, g in zip(current, gs)]
        meta = fg.grad(fg_loss(XVAL, YVAL, *current), params)
    assert all(p.grad is None for p in params)
    expected = numeric_grad(maml2_np, [PW, PB, PV])
    for g, e in zip(meta, expected):
        close(g, e, rtol=1e-5, atol=1e-8)


def test_functional_input_errors():
    with pytest.raises(ValueError):
        fg.hvp(lambda a: a * a, T([1.0, 2.0]), T([1.0, 1.0]))  # not a scalar
    with pytest.raises(ValueError):
        fg.hvp(lambda a, b: (a * b).sum(), (T([1.0]), T([2.0])), (T([1.0]),))
    with pytest.raises(TypeError):
        fg.vjp(lambda a: a, 1.0)
    with pytest.raises(ValueError):
        fg.jvp(lambda a, b: a * b, (T([1.0]), T([2.0])), (T([1.0]),))
    with pytest.raises(TypeError):
        fg.grad(T([1.0]), [1.0])
