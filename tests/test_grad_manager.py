"""Behaviour of ferrograd.GradManager: attach and callbacks, record/release, backward,
snapshots of attached tensors, reuse across iterations and grouping with ``|``.

Numbers are float64 and checked against closed forms or central finite differences of a
numpy implementation of the same function (never against ferrograd itself).
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


# --------------------------------------------------------------------------------------
# attach and attached_tensors
# --------------------------------------------------------------------------------------


def test_attach_returns_the_manager():
    x = T([1.0, 2.0])
    gm = fg.GradManager()
    assert gm.attach(x) is gm
    z = T([3.0])
    gm2 = fg.GradManager().attach([x, z])
    assert isinstance(gm2, fg.GradManager)
    got = gm2.attached_tensors()
    assert len(got) == 2 and got[0] is x and got[1] is z


def test_attach_accepts_a_tensor_or_a_list_and_lists_them_in_order_without_duplicates():
    a, b, c = T([1.0]), T([2.0, 3.0]), T([[4.0]])
    gm = fg.GradManager().attach(b)
    gm.attach([c, a])
    gm.attach(b)  # again: no duplicate
    gm.attach([a, c])
    got = gm.attached_tensors()
    assert len(got) == 3
    assert got[0] is b and got[1] is c and got[2] is a


def test_attach_rejects_non_tensors_and_non_callables():
    gm = fg.GradManager()
    with pytest.raises(TypeError):
        gm.attach(np.array([1.0]))
    with pytest.raises(TypeError):
        gm.attach([T([1.0]), 2.0])
    with pytest.raises(TypeError):
        gm.attach(T([1.0]), callbacks=[3])
    with pytest.raises(TypeError):  # DTypeError is a TypeError
        gm.attach(fg.tensor(np.array([1, 2], dtype=np.int64)))


def test_grad_starts_as_none_and_backward_sets_it():
    x = T([1.0, -2.0, 3.0])
    assert x.grad is None
    gm = fg.GradManager().attach(x)
    with gm:
        gm.backward((x * x * x).sum())
    close(x.grad, 3.0 * np.array([1.0, -2.0, 3.0]) ** 2)


def test_gradients_match_finite_differences_for_a_small_network():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(4, 3))
    W0 = rng.normal(size=(3, 5))
    b0 = rng.normal(size=(5,))
    v0 = rng.normal(size=(5,))

    def loss_np(W, b, v):
        return float(np.sum(np.tanh(X @ W + b) @ v) ** 2)

    W, b, v = T(W0), T(b0), T(v0)
    gm = fg.GradManager().attach([W, b, v])
    with gm:
        y = (T(X) @ W + b).tanh() @ v
        loss = y.sum() ** 2
        gm.backward(loss)
    expected = numeric_grad(loss_np, [W0, b0, v0])
    for t, e in zip([W, b, v], expected):
        close(t.grad, e, rtol=1e-5, atol=1e-7)


# --------------------------------------------------------------------------------------
# callbacks
# --------------------------------------------------------------------------------------


def test_callbacks_run_in_order_and_the_last_result_is_added():
    x = T([1.0, 2.0])
    seen = []

    def double(t, g):
        seen.append(("double", g.numpy().copy()))
        return g * 2.0

    def plus_one(t, g):
        seen.append(("plus_one", g.numpy().copy()))
        return g + 1.0

    gm = fg.GradManager().attach(x, [double, plus_one])
    with gm:
        gm.backward((x * x).sum())  # dy/dx = 2x = [2, 4]
    assert [s[0] for s in seen] == ["double", "plus_one"]
    np.testing.assert_allclose(seen[0][1], [2.0, 4.0])
    np.testing.assert_allclose(seen[1][1], [4.0, 8.0])
    close(x.grad, [5.0, 9.0])


def test_a_single_callable_is_accepted():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x, lambda t, g: g * 10.0)
    with gm:
        gm.backward((x * 3.0).sum())
    close(x.grad, [30.0, 30.0])


def test_attaching_again_appends_callbacks():
    x = T([1.0, 2.0])
    order = []

    def cb(name, f):
        def run(t, g):
            order.append(name)
            return f(g)

        return run

    gm = fg.GradManager().attach(x, cb("a", lambda g: g + 1.0))
    gm.attach(x, [cb("b", lambda g: g * 3.0)])
    gm.attach(x)  # no callbacks: keeps the two
    gm.attach([x], cb("c", lambda g: g - 2.0))
    with gm:
        gm.backward((x * 5.0).sum())  # grad 5
    assert order == ["a", "b", "c"]
    close(x.grad, [(5.0 + 1.0) * 3.0 - 2.0] * 2)


def test_callback_receives_the_attached_tensor_itself():
    x = T([1.0, 2.0])
    got = []
    gm = fg.GradManager().attach(x, lambda t, g: (got.append(t), g)[1])
    with gm:
        gm.backward((x * 2.0).sum())
    assert len(got) == 1 and got[0] is x


def test_callback_runs_once_with_the_total_gradient():
    x = T([1.0, 2.0])
    calls = []
    gm = fg.GradManager().attach(x, lambda t, g: (calls.append(g.numpy().copy()), g)[1])
    with gm:
        # x used three times: the callback sees the sum 2x + 3 + 4x^3... only once
        y = (x * x).sum() + (x * 3.0).sum() + (x**4).sum()
        gm.backward(y)
    assert len(calls) == 1
    xs = np.array([1.0, 2.0])
    np.testing.assert_allclose(calls[0], 2 * xs + 3.0 + 4 * xs**3)


def test_callback_returning_none_adds_nothing():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x, lambda t, g: None)
    with gm:
        gm.backward((x * x).sum())
    assert x.grad is None


def test_callback_runs_as_soon_as_the_gradient_is_final():
    """w is used last in the forward, so its gradient is final before the backward of the
    earlier Function runs; x's only after it."""
    log = []

    class Logged(fg.Function):
        def forward(self, a):
            return a * 1.0

        def backward(self, g):
            log.append("function-backward")
            return g

    x = T([1.0, 2.0])
    w = T([3.0, 4.0])
    gm = fg.GradManager()
    gm.attach(x, lambda t, g: (log.append("cb-x"), g)[1])
    gm.attach(w, lambda t, g: (log.append("cb-w"), g)[1])
    with gm:
        h = Logged()(x * 2.0)
        gm.backward((h * w).sum())
        assert not gm.is_recording
    assert log == ["cb-w", "function-backward", "cb-x"]
    close(x.grad, [6.0, 8.0])
    close(w.grad, [2.0, 4.0])


def test_gradients_are_added_into_existing_grad():
    x = T([1.0, 2.0])
    x.grad = T([100.0, 200.0])
    gm = fg.GradManager().attach(x)
    with gm:
        gm.backward((x * x).sum())
    close(x.grad, [102.0, 204.0])
    with gm:  # a second iteration accumulates too
        gm.backward((x * 3.0).sum())
    close(x.grad, [105.0, 207.0])


# --------------------------------------------------------------------------------------
# record / release / with
# --------------------------------------------------------------------------------------


def test_record_while_recording_raises():
    gm = fg.GradManager().attach(T([1.0]))
    gm.record()
    try:
        with pytest.raises(RuntimeError):
            gm.record()
        with pytest.raises(RuntimeError), gm:
            pass
    finally:
        gm.release()


def test_release_is_idempotent_and_release_without_record_is_fine():
    gm = fg.GradManager().attach(T([1.0]))
    gm.release()
    gm.record()
    gm.release()
    gm.release()
    gm.record()  # recording again works after releases
    gm.release()


def test_release_drops_the_recording():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x)
    gm.record()
    y = (x * x).sum()
    gm.release()
    with pytest.raises(RuntimeError, match="no computation history"):
        gm.backward(y)
    assert x.grad is None


def test_with_statement_records_and_releases_also_on_exceptions():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x)
    assert not gm.is_recording
    with gm as entered:
        assert entered is gm
        assert gm.is_recording
    assert not gm.is_recording
    with pytest.raises(KeyError), gm:
        _ = x * x
        raise KeyError("boom")
    assert not gm.is_recording
    with gm:  # usable again
        gm.backward((x * x).sum())
    close(x.grad, [2.0, 4.0])


def test_record_and_backward_without_with():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x)
    gm.record()
    y = (x * x * x).sum()
    gm.backward(y)
    assert not gm.is_recording
    close(x.grad, [3.0, 12.0])


# --------------------------------------------------------------------------------------
# backward
# --------------------------------------------------------------------------------------


def test_backward_when_not_recording_raises_no_computation_history():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x)
    y = (x * x).sum()
    with pytest.raises(RuntimeError, match="no computation history"):
        gm.backward(y)
    with gm:
        y = (x * x).sum()
    with pytest.raises(RuntimeError, match="no computation history"):
        gm.backward(y)  # after the with block
    assert x.grad is None


def test_backward_twice_raises_because_the_first_released():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x)
    with gm:
        y = (x * x).sum()
        gm.backward(y)
        assert not gm.is_recording
        with pytest.raises(RuntimeError, match="no computation history"):
            gm.backward(y)
    close(x.grad, [2.0, 4.0])


def test_backward_releases_even_when_it_raises():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x)
    gm.record()
    y = x * x
    with pytest.raises(ValueError):  # ShapeError: dy of the wrong shape
        gm.backward(y, T([1.0, 2.0, 3.0]))
    assert not gm.is_recording
    gm.record()  # would raise "already recording" if not released
    gm.backward((x * x).sum())
    close(x.grad, [2.0, 4.0])


def test_backward_releases_when_backward_raises_inside_a_function():
    class Broken(fg.Function):
        def forward(self, a):
            return a * 2.0

        def backward(self, g):
            raise ZeroDivisionError("inside backward")

    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x)
    with gm:
        y = Broken()(x).sum()
        with pytest.raises(ZeroDivisionError):
            gm.backward(y)
        assert not gm.is_recording
    with gm:
        gm.backward((x * 4.0).sum())
    close(x.grad, [4.0, 4.0])


def test_dy_defaults_to_ones_for_a_non_scalar_y():
    x = T([[1.0, 2.0], [3.0, 4.0]])
    gm = fg.GradManager().attach(x)
    with gm:
        gm.backward(x * x)  # ones-weighted: 2x
    close(x.grad, 2.0 * x.numpy())


def test_dy_weights_the_output():
    x0 = np.array([[1.0, -2.0], [0.5, 4.0]])
    dy0 = np.array([[3.0, -1.0], [2.0, 0.25]])
    x = T(x0)
    gm = fg.GradManager().attach(x)
    with gm:
        gm.backward(x.tanh() * x, T(dy0))
    (expected,) = numeric_grad(lambda a: np.sum(np.tanh(a) * a * dy0), [x0])
    close(x.grad, expected, rtol=1e-6, atol=1e-8)


def test_backward_with_a_list_of_outputs():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x)
    with gm:
        gm.backward([x * x, (x * 3.0).sum()], [T([1.0, 10.0]), T(2.0)])
    close(x.grad, [2.0 * 1.0 + 6.0, 4.0 * 10.0 + 6.0])
    x.grad = None
    with gm:
        gm.backward([x * x, (x * 3.0).sum()])  # dy: ones for each
    close(x.grad, [2.0 + 3.0, 4.0 + 3.0])


def test_y_not_depending_on_an_attached_tensor_leaves_its_grad():
    x = T([1.0, 2.0])
    z = T([5.0, 6.0])
    gm = fg.GradManager().attach([x, z])
    with gm:
        gm.backward((x * x).sum())  # z unused
    assert z.grad is None
    close(x.grad, [2.0, 4.0])
    z.grad = T([7.0, 8.0])
    with gm:
        gm.backward((T([1.0, 1.0]) * 3.0).sum())  # depends on nothing attached
    close(x.grad, [2.0, 4.0])
    close(z.grad, [7.0, 8.0])
    with gm:
        # computed from x only through detach: no dependency either
        gm.backward((x.detach() * z.detach()).sum())
    close(x.grad, [2.0, 4.0])
    close(z.grad, [7.0, 8.0])


def test_unattached_tensors_get_no_grad():
    x = T([1.0, 2.0])
    c = T([3.0, 4.0])
    gm = fg.GradManager().attach(x)
    with gm:
        gm.backward((x * c).sum())
    assert c.grad is None
    close(x.grad, [3.0, 4.0])


# --------------------------------------------------------------------------------------
# snapshots
# --------------------------------------------------------------------------------------


def test_tensors_attached_before_record_are_snapshotted_at_record():
    x = T([1.0, 2.0])
    c = T([2.0, 3.0])
    gm = fg.GradManager().attach(x)
    x += 1.0  # before record: part of the snapshot, x0 = [2, 3]
    with gm:
        x *= c  # after record: x = c * x0
        y = (x * x).sum()  # = sum(c^2 x0^2)
        gm.backward(y)
    x0 = np.array([2.0, 3.0])
    np.testing.assert_allclose(x.numpy(), [4.0, 9.0])
    # d/dx0 of sum(c^2 x0^2); with respect to the modified x it would be 2 c x0 = [8, 18]
    close(x.grad, 2.0 * c.numpy() ** 2 * x0)


def test_tensors_attached_while_recording_are_snapshotted_at_attach():
    x = T([1.0, 2.0])
    c = T([2.0, 3.0])
    gm = fg.GradManager()
    with gm:
        before = x * 5.0  # computed before attach: a constant
        gm.attach(x)
        x *= c
        y = (x * x + before).sum()
        gm.backward(y)
    close(x.grad, 2.0 * c.numpy() ** 2 * np.array([1.0, 2.0]))


def test_setitem_on_attached_tensor_after_record():
    x = T([1.0, 2.0, 3.0])
    gm = fg.GradManager().attach(x)
    with gm:
        x[1] = T(10.0)  # x0[1] no longer reaches the loss
        gm.backward((x * x).sum())
    np.testing.assert_allclose(x.numpy(), [1.0, 10.0, 3.0])
    close(x.grad, [2.0, 0.0, 6.0])


# --------------------------------------------------------------------------------------
# reuse
# --------------------------------------------------------------------------------------


def test_manager_is_reusable_across_iterations():
    w = T([0.5, -1.0])
    gm = fg.GradManager().attach(w)
    rng = np.random.default_rng(3)
    for step in range(5):
        xd = rng.normal(size=(3, 2))
        w0 = w.numpy().copy()
        w.grad = None
        with gm:
            loss = ((T(xd) @ w).tanh() ** 2).sum()
            gm.backward(loss)
        (expected,) = numeric_grad(lambda a, xd=xd: np.sum(np.tanh(xd @ a) ** 2), [w0])
        close(w.grad, expected, rtol=1e-6, atol=1e-8)
        with fg.no_grad():
            w -= w.grad * 0.1
    got = gm.attached_tensors()
    assert len(got) == 1 and got[0] is w


def test_attach_new_tensors_between_iterations():
    a = T([1.0, 2.0])
    gm = fg.GradManager().attach(a)
    with gm:
        gm.backward((a * a).sum())
    b = T([3.0])
    gm.attach(b)
    with gm:
        gm.backward((a * b).sum())
    close(a.grad, [2.0 + 3.0, 4.0 + 3.0])
    close(b.grad, [3.0])


# --------------------------------------------------------------------------------------
# gm1 | gm2
# --------------------------------------------------------------------------------------


def test_group_records_both_managers():
    a = T([1.0, 2.0])
    b = T([3.0, 4.0])
    gm1 = fg.GradManager().attach(a)
    gm2 = fg.GradManager().attach(b)
    with gm1 | gm2:
        assert gm1.is_recording and gm2.is_recording
        y = (a * a * b).sum()
        gm1.backward(y)
        assert gm2.is_recording
        assert b.grad is None  # gm1 does not touch gm2's tensors
        gm2.backward(y)
    assert not gm1.is_recording and not gm2.is_recording
    close(a.grad, 2.0 * np.array([1.0, 2.0]) * np.array([3.0, 4.0]))
    close(b.grad, np.array([1.0, 2.0]) ** 2)


def test_group_members_do_not_see_each_others_backward():
    for first, second in [(0, 1), (1, 0)]:
        a = T([1.0, 2.0])
        gms = [fg.GradManager().attach(a), fg.GradManager().attach(a)]
        with gms[first] | gms[second]:
            y = (a * a * a).sum()
            gms[first].backward(y)
            g = a.grad  # 3 a^2, computed by the first manager's backward
            close(g, [3.0, 12.0])
            gms[second].backward((g * 1.0).sum())
        # nested, the second manager would add 6a = [6, 12]; siblings see g as a constant
        close(a.grad, [3.0, 12.0])


def test_nested_differs_from_group():
    """Control for the test above: nesting does see the inner backward."""
    a = T([1.0, 2.0])
    outer, inner = fg.GradManager().attach(a), fg.GradManager().attach(a)
    with outer:
        with inner:
            inner.backward((a * a * a).sum())
        outer.backward((a.grad * 1.0).sum())
    close(a.grad, [3.0 + 6.0, 12.0 + 12.0])


def test_group_of_three_and_release():
    xs = [T([float(i + 1)]) for i in range(3)]
    gms = [fg.GradManager().attach(x) for x in xs]
    group = gms[0] | gms[1] | gms[2]
    with group:
        y = (xs[0] * xs[1] * xs[2]).sum()
        for gm in gms:
            gm.backward(y)
    close(xs[0].grad, [6.0])
    close(xs[1].grad, [3.0])
    close(xs[2].grad, [2.0])
    group.record()
    assert all(gm.is_recording for gm in gms)
    group.release()
    assert not any(gm.is_recording for gm in gms)


def test_group_exit_releases_members_that_did_not_backward():
    a = T([1.0])
    gm1, gm2 = fg.GradManager().attach(a), fg.GradManager().attach(a)
    with gm1 | gm2:
        gm1.backward((a * 2.0).sum())
    assert not gm2.is_recording
    with pytest.raises(RuntimeError, match="no computation history"):
        gm2.backward((a * 2.0).sum())


# --------------------------------------------------------------------------------------
# more callback and recording edge cases
# --------------------------------------------------------------------------------------


def test_callback_that_raises_propagates_and_releases():
    x = T([1.0, 2.0])

    def boom(t, g):
        raise LookupError("from a callback")

    gm = fg.GradManager().attach(x, boom)
    with gm:
        with pytest.raises(LookupError):
            gm.backward((x * x).sum())
        assert not gm.is_recording
    assert x.grad is None


def test_callback_returning_a_non_tensor_raises_type_error():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x, lambda t, g: 3.0)
    with gm, pytest.raises(TypeError):
        gm.backward((x * x).sum())
    assert not gm.is_recording
    assert x.grad is None


def test_attaching_the_same_tensor_twice_in_one_list():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach([x, x])
    got = gm.attached_tensors()
    assert len(got) == 1 and got[0] is x
    with gm:
        gm.backward((x * 3.0).sum())
    close(x.grad, [3.0, 3.0])  # added once, not twice


def test_callbacks_attached_while_recording_are_used():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x)
    with gm:
        y = (x * x).sum()
        gm.attach(x, lambda t, g: g * 10.0)
        gm.backward(y)
    close(x.grad, [20.0, 40.0])


def test_group_with_a_member_already_recording_raises_and_records_nothing():
    x = T([1.0])
    gm1, gm2 = fg.GradManager().attach(x), fg.GradManager().attach(x)
    gm2.record()
    try:
        with pytest.raises(RuntimeError), gm1 | gm2:
            pass
        assert not gm1.is_recording
    finally:
        gm2.release()


def test_no_grad_inside_a_recording():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x)
    with gm:
        with fg.no_grad():
            hidden = x * x
        gm.backward((hidden * x).sum())  # hidden is a constant
    close(x.grad, [1.0, 4.0])


def test_float32_tensors_get_float32_gradients():
    x = fg.tensor([1.0, 2.0])  # Python floats: float32
    assert x.dtype == fg.float32
    gm = fg.GradManager().attach(x)
    with gm:
        gm.backward((x * x).sum())
    assert x.grad.dtype == fg.float32
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0], rtol=1e-6)


@pytest.mark.parametrize("how", ["add", "reshape", "seed", "broadcast"])
def test_each_attached_tensor_gets_a_gradient_of_its_own(how):
    """An in-place update of one ``.grad`` (GradScaler's unscale, clipping by hand) must
    reach no other tensor: not the other operand of ``x + y``, not the seed passed as
    ``dy``, and a broadcast gradient is a writable tensor of its own."""
    x = fg.tensor([1.0, 2.0])
    y = fg.tensor([3.0, 4.0])
    gm = fg.GradManager().attach([x, y])
    seed = fg.tensor([1.0, 1.0])
    with gm:
        if how == "add":
            gm.backward((2 * (x + y)).sum())
        elif how == "reshape":
            gm.backward((x.reshape(2, 1) + y.reshape(2, 1)).sum())
        elif how == "seed":
            gm.backward(x + y, dy=seed)
        else:
            gm.backward(x.sum() + y.sum())
    want_x = x.grad.numpy().copy()
    want_y = y.grad.numpy().copy()
    x.grad.mul_(10.0)
    np.testing.assert_array_equal(y.grad.numpy(), want_y)
    np.testing.assert_array_equal(x.grad.numpy(), 10 * want_x)
    np.testing.assert_array_equal(seed.numpy(), [1.0, 1.0])
    y.grad += 1.0
    np.testing.assert_array_equal(y.grad.numpy(), want_y + 1)
