"""Higher-order gradients with nested GradManagers.

Inside ``with outer:`` and ``with inner:``, ``inner.backward(loss)`` is recorded by
``outer``, so ``outer.backward(x.grad)`` gives the second derivative (added into .grad) and
a third level the third. Second derivatives are checked against central finite differences
of the first derivative (computed by ferrograd at shifted points) and against closed forms;
third derivatives against finite differences of the second and closed forms.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

EPS = 1e-5


def T(a) -> fg.Tensor:
    return fg.tensor(np.asarray(a, dtype=np.float64))


def close(t, expected, rtol=1e-7, atol=1e-9):
    assert t is not None, "expected a gradient, got None"
    got = t.numpy() if isinstance(t, fg.Tensor) else t
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


# --------------------------------------------------------------------------------------
# ferrograd derivatives of order 1, 2, 3 of a scalar function f(x)
# --------------------------------------------------------------------------------------


def d1(f, x0):
    """grad f at x0 (one manager)."""
    x = T(x0)
    gm = fg.GradManager().attach(x)
    with gm:
        gm.backward(f(x))
    assert x.grad is not None
    return x.grad.numpy()


def d2(f, x0, v):
    """H(x0) @ v by nested managers: outer.backward(grad, dy=v)."""
    x = T(x0)
    outer, inner = fg.GradManager().attach(x), fg.GradManager().attach(x)
    with outer:
        with inner:
            inner.backward(f(x))
        g = x.grad
        x.grad = None
        outer.backward(g, T(v))
    assert x.grad is not None
    return x.grad.numpy()


def d3(f, x0, v, u):
    """sum_ij T_ijk v_i u_j with three nested managers."""
    x = T(x0)
    gms = [fg.GradManager().attach(x) for _ in range(3)]
    with gms[0]:
        with gms[1]:
            with gms[2]:
                gms[2].backward(f(x))
            g = x.grad
            x.grad = None
            gms[1].backward(g, T(v))
        h = x.grad
        x.grad = None
        gms[0].backward(h, T(u))
    assert x.grad is not None
    return x.grad.numpy()


def fd_jacobian_apply(fn, x0, w, eps=EPS):
    """Central differences: out[k] = sum_j w_j d fn(x)_j / d x_k at x0 (fn returns an array)."""
    x0 = np.asarray(x0, dtype=np.float64)
    out = np.zeros_like(x0)
    flat_out = out.reshape(-1)
    for k in range(x0.size):
        e = np.zeros(x0.size)
        e[k] = eps
        e = e.reshape(x0.shape)
        flat_out[k] = np.sum(w * (fn(x0 + e) - fn(x0 - e))) / (2 * eps)
    return out


# --------------------------------------------------------------------------------------
# x ** 4: closed forms
# --------------------------------------------------------------------------------------


def test_second_derivative_of_x4_is_accumulated_into_grad():
    x0 = np.array([0.5, -1.0, 2.0, 3.0])
    x = T(x0)
    outer, inner = fg.GradManager().attach(x), fg.GradManager().attach(x)
    with outer:
        with inner:
            inner.backward((x**4).sum())
        close(x.grad, 4 * x0**3)
        outer.backward(x.grad)
    # .grad held the first derivative; the second is added into it
    close(x.grad, 4 * x0**3 + 12 * x0**2)


def test_second_and_third_derivative_of_x4():
    x0 = np.array([0.5, -1.0, 2.0, 3.0])
    ones = np.ones_like(x0)
    f = lambda x: (x**4).sum()
    close(d1(f, x0), 4 * x0**3)
    close(d2(f, x0, ones), 12 * x0**2)
    close(d3(f, x0, ones, ones), 24 * x0)


def test_third_level_accumulates_like_the_second():
    x0 = np.array([0.5, -2.0])
    x = T(x0)
    gms = [fg.GradManager().attach(x) for _ in range(3)]
    with gms[0]:
        with gms[1]:
            with gms[2]:
                gms[2].backward((x**4).sum())
            gms[1].backward(x.grad)  # x.grad = f' + f''
        gms[0].backward(x.grad)  # x.grad += f'' + f'''
    close(x.grad, 4 * x0**3 + 2 * (12 * x0**2) + 24 * x0)


# --------------------------------------------------------------------------------------
# tanh(x) * x ** 3: closed forms and finite differences
# --------------------------------------------------------------------------------------


def tx3(x):
    return (x.tanh() * x**3).sum()


def tx3_d1(x):
    t = np.tanh(x)
    s = 1 - t * t
    return s * x**3 + 3 * t * x**2


def tx3_d2(x):
    t = np.tanh(x)
    s = 1 - t * t
    return -2 * t * s * x**3 + 6 * s * x**2 + 6 * t * x


def tx3_d3(x):
    t = np.tanh(x)
    s = 1 - t * t
    return -2 * (s * s - 2 * t * t * s) * x**3 - 18 * t * s * x**2 + 18 * s * x + 6 * t


X0 = np.array([0.3, -0.7, 1.1, -1.9, 0.05])


def test_closed_forms_are_consistent():
    """Guards the hand-derived closed forms with numpy finite differences."""
    e = 1e-5
    np.testing.assert_allclose((tx3_d1(X0 + e) - tx3_d1(X0 - e)) / (2 * e), tx3_d2(X0), rtol=1e-6)
    np.testing.assert_allclose((tx3_d2(X0 + e) - tx3_d2(X0 - e)) / (2 * e), tx3_d3(X0), rtol=1e-6)


def test_tanh_x3_first_derivative():
    close(d1(tx3, X0), tx3_d1(X0), rtol=1e-10)


def test_tanh_x3_second_derivative_vs_finite_differences_of_first():
    ones = np.ones_like(X0)
    got = d2(tx3, X0, ones)
    fd = fd_jacobian_apply(lambda a: d1(tx3, a), X0, ones)
    close(got, fd, rtol=1e-6, atol=1e-8)
    close(got, tx3_d2(X0), rtol=1e-10)


def test_tanh_x3_third_derivative_vs_finite_differences_of_second():
    ones = np.ones_like(X0)
    got = d3(tx3, X0, ones, ones)
    fd = fd_jacobian_apply(lambda a: d2(tx3, a, ones), X0, ones)
    close(got, fd, rtol=1e-6, atol=1e-8)
    close(got, tx3_d3(X0), rtol=1e-9)


# --------------------------------------------------------------------------------------
# a non-elementwise function: full Hessian-vector and third-order contractions
# --------------------------------------------------------------------------------------

RNG = np.random.default_rng(11)
W0 = RNG.normal(size=(4, 3)) * 0.7
B0 = RNG.normal(size=(4,)) * 0.3
XV = RNG.normal(size=(3,))
V = RNG.normal(size=(3,))
U = RNG.normal(size=(3,))


def mlp(x):
    h = (T(W0) @ x + T(B0)).tanh()
    return (h * h).sum() * (x * x).mean() + (x.sigmoid() * x).sum()


def mlp_np(x):
    h = np.tanh(W0 @ x + B0)
    s = 1 / (1 + np.exp(-x))
    return np.sum(h * h) * np.mean(x * x) + np.sum(s * x)


def test_mlp_first_derivative_vs_finite_differences():
    e = 1e-6
    fd = np.array(
        [
            (mlp_np(XV + e * np.eye(3)[k]) - mlp_np(XV - e * np.eye(3)[k])) / (2 * e)
            for k in range(3)
        ]
    )
    close(d1(mlp, XV), fd, rtol=1e-6, atol=1e-8)


def test_mlp_hessian_vector_product_vs_finite_differences():
    got = d2(mlp, XV, V)
    fd = fd_jacobian_apply(lambda a: d1(mlp, a), XV, V)
    close(got, fd, rtol=1e-6, atol=1e-8)
    # the Hessian is symmetric: u . (H v) == v . (H u)
    assert np.dot(U, got) == pytest.approx(np.dot(V, d2(mlp, XV, U)), rel=1e-10)


def test_mlp_third_order_vs_finite_differences_of_second():
    got = d3(mlp, XV, V, U)
    fd = fd_jacobian_apply(lambda a: d2(mlp, a, V), XV, U)
    close(got, fd, rtol=1e-5, atol=1e-7)


def test_mixed_partials_with_different_attached_tensors():
    """outer tracks y only, inner x only: outer.backward(x.grad) gives d/dy (df/dx . 1)."""
    x0, y0 = np.array([1.0, 2.0]), np.array([0.5, -1.5])
    x, y = T(x0), T(y0)
    outer, inner = fg.GradManager().attach(y), fg.GradManager().attach(x)
    with outer:
        with inner:
            inner.backward((x * x * y * y * y).sum())
        close(x.grad, 2 * x0 * y0**3)
        assert y.grad is None
        outer.backward(x.grad)
    close(y.grad, 6 * x0 * y0**2)
    close(x.grad, 2 * x0 * y0**3)  # the outer does not track x


def test_second_derivative_through_matmul_and_reductions():
    a0 = np.array([[0.2, -0.4], [0.9, 0.1], [-0.3, 0.5]])

    def f(a):
        return ((a.T @ a).tanh().sum(axis=0) ** 2).mean()

    def f_np(a):
        return np.mean(np.sum(np.tanh(a.T @ a), axis=0) ** 2)

    v = np.arange(6.0).reshape(3, 2) / 5 - 0.4
    got = d2(f, a0, v)
    fd = fd_jacobian_apply(lambda a: d1(f, a), a0, v)
    close(got, fd, rtol=1e-6, atol=1e-8)
    # and the first derivative itself against numpy
    e = 1e-6
    g_fd = np.zeros_like(a0)
    for idx in np.ndindex(a0.shape):
        d = np.zeros_like(a0)
        d[idx] = e
        g_fd[idx] = (f_np(a0 + d) - f_np(a0 - d)) / (2 * e)
    close(d1(f, a0), g_fd, rtol=1e-6, atol=1e-8)


def test_second_derivative_of_a_linear_function_is_zero_or_none():
    x = T([1.0, 2.0])
    outer, inner = fg.GradManager().attach(x), fg.GradManager().attach(x)
    with outer:
        with inner:
            inner.backward((x * 3.0).sum())
        g = x.grad
        x.grad = None
        outer.backward(g)
    assert x.grad is None or np.all(x.grad.numpy() == 0.0)


def test_inner_backward_not_recorded_when_outer_is_not_recording():
    """Without the outer `with`, the first derivative is a constant."""
    x = T([1.0, 2.0])
    outer, inner = fg.GradManager().attach(x), fg.GradManager().attach(x)
    with inner:
        inner.backward((x**3).sum())
    g = x.grad
    x.grad = None
    with outer:
        outer.backward((g * 1.0).sum())
    assert x.grad is None


# --------------------------------------------------------------------------------------
# reverse nesting
# --------------------------------------------------------------------------------------


def test_reverse_nesting_raises_an_error_that_says_so():
    x = T([0.5, -1.0, 2.0])
    outer, inner = fg.GradManager().attach(x), fg.GradManager().attach(x)
    with outer, inner:
        y = (x**4).sum()
        outer.backward(y)  # the outer manager's backward, while inner records
        close(x.grad, 4 * np.array([0.5, -1.0, 2.0]) ** 3)
        with pytest.raises(fg.GradError) as info:
            inner.backward(x.grad)
        assert not inner.is_recording
    msg = str(info.value).lower()
    assert "outer" in msg and "backward" in msg, msg
    assert isinstance(info.value, RuntimeError)
    # the engine still works
    x2 = T([1.0, 2.0])
    gm = fg.GradManager().attach(x2)
    with gm:
        gm.backward((x2 * x2).sum())
    close(x2.grad, [2.0, 4.0])


def test_reverse_nesting_with_a_value_mixed_from_both():
    """A loss mixing inner-recorded values with the outer's backward also raises."""
    x = T([0.5, 1.5])
    outer, inner = fg.GradManager().attach(x), fg.GradManager().attach(x)
    with outer, inner:
        y = (x**3).sum()
        z = x * 2.0
        outer.backward(y)
        with pytest.raises(fg.GradError, match="outer"):
            inner.backward((x.grad * z).sum())


# --------------------------------------------------------------------------------------
# callbacks and in-place ops inside the differentiated backward
# --------------------------------------------------------------------------------------


def test_inner_callbacks_are_part_of_what_the_outer_differentiates():
    x0 = np.array([1.0, 2.0, -0.5])
    x = T(x0)
    outer = fg.GradManager().attach(x)
    inner = fg.GradManager().attach(x, lambda t, g: g * g)  # .grad = (f')^2
    with outer:
        with inner:
            inner.backward((x**3).sum())
        close(x.grad, (3 * x0**2) ** 2)
        g = x.grad
        x.grad = None
        outer.backward(g)
    close(x.grad, 2 * (3 * x0**2) * 6 * x0)  # d/dx (3x^2)^2


def test_second_derivative_through_inplace_ops():
    x0 = np.array([1.0, 2.0, -0.7])
    x = T(x0)
    outer, inner = fg.GradManager().attach(x), fg.GradManager().attach(x)
    with outer:
        with inner:
            h = x * 1.0
            h *= 2.0
            h += x * x
            h[0] = h[1] * 3.0
            inner.backward((h * h).sum())
        g = x.grad
        x.grad = None
        outer.backward(g)

    def grad_np(a):  # gradient of sum(h^2), h = 2a + a^2 with h[0] = 3 h[1]
        h = 2 * a + a * a
        dh = 2 + 2 * a
        out = 2 * h * dh
        out[0] = 0.0
        out[1] += 2 * (3 * h[1]) * 3 * dh[1]
        return out

    expected = fd_jacobian_apply(grad_np, x0, np.ones(3))
    close(g, grad_np(x0), rtol=1e-10)
    close(x.grad, expected, rtol=1e-6, atol=1e-8)


def test_snapshots_compose_across_nested_managers():
    """x *= 2 under the outer only: the inner differentiates w.r.t. s = 2 x0 (its snapshot
    at record), the outer w.r.t. x0."""
    x0 = np.array([1.0, -2.0])
    x = T(x0)
    outer, inner = fg.GradManager().attach(x), fg.GradManager().attach(x)
    with outer:
        x *= 2.0
        with inner:
            inner.backward((x**3).sum())
        close(x.grad, 3 * (2 * x0) ** 2)
        g = x.grad
        x.grad = None
        outer.backward(g)
    close(x.grad, 6 * (2 * x0) * 2)


def test_inplace_on_attached_tensor_under_both_managers():
    x0 = np.array([1.0, -2.0])
    x = T(x0)
    outer, inner = fg.GradManager().attach(x), fg.GradManager().attach(x)
    with outer:
        with inner:
            x += T([1.0, 1.0])
            inner.backward((x**3).sum())
        close(x.grad, 3 * (x0 + 1) ** 2)
        g = x.grad
        x.grad = None
        outer.backward(g)
    close(x.grad, 6 * (x0 + 1))


@pytest.mark.parametrize("act", ["tanh", "sigmoid", "relu"])
def test_second_derivative_through_fused_activation_backward(act):
    """The activations' backward is one fused op; its own rule must give exact second
    derivatives (checked against finite differences of the first derivative)."""
    x0 = np.array([0.3, -0.8, 1.7, -2.2])

    def first(xv):
        x = fg.tensor(xv)
        gm = fg.GradManager().attach(x)
        with gm:
            gm.backward((getattr(x * x, act)() * x).sum())
        return x.grad.numpy()

    x = fg.tensor(x0)
    outer = fg.GradManager().attach(x)
    inner = fg.GradManager().attach(x)
    with outer:
        with inner:
            inner.backward((getattr(x * x, act)() * x).sum())
        g = x.grad
        x.grad = None
        outer.backward(g.sum())
    eps = 1e-6
    expected = [
        (first(x0 + eps * e).sum() - first(x0 - eps * e).sum()) / (2 * eps) for e in np.eye(4)
    ]
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6, atol=1e-7)
