"""Silent wrong answers the engine must not give: missing gradients, wrong values from
overflow, writes through aliased memory. Each case states what PyTorch/numpy do."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from conftest import TEST_DEVICE, conv2d_reference

f64 = "float64"


def t(data, dtype=f64):
    return fg.tensor(np.asarray(data, dtype=dtype))


# --------------------------------------------------------------------------------------------
# gradients that went missing


def test_inplace_update_under_no_grad_keeps_the_gradient():
    # PyTorch: an in-place update under no_grad is invisible to autograd; w.grad is ones
    w = t([1.0, 2.0, 3.0])
    gm = fg.GradManager().attach(w)
    with gm:
        with fg.no_grad():
            w -= 0.05
        gm.backward((w * fg.ones(3, dtype=f64)).sum())
    np.testing.assert_allclose(w.grad.numpy(), np.ones(3))
    np.testing.assert_allclose(w.numpy(), [0.95, 1.95, 2.95])


@pytest.mark.parametrize("update", ["fill_", "zero_", "setitem", "copy_"])
def test_other_inplace_writes_under_no_grad_keep_the_gradient(update):
    w = t([1.0, 2.0, 3.0])
    gm = fg.GradManager().attach(w)
    with gm:
        with fg.no_grad():
            if update == "fill_":
                w.fill_(2.0)
            elif update == "zero_":
                w.zero_()
            elif update == "setitem":
                w[1:] = 5.0
            else:
                w.copy_(t([4.0, 5.0, 6.0]))
        gm.backward((w * w).sum())
    np.testing.assert_allclose(w.grad.numpy(), 2 * w.numpy())


def test_a_key_made_inside_a_callback_records_and_differentiates():
    seen = {}
    w = t([1.0, 2.0])

    def callback(tensor, grad):
        # a fresh tape inside a callback: its own gradient of its own function
        z = t([3.0, -1.0])
        key = fg.GradKey("inner")
        key.attach(z)
        assert key.is_active
        seen["g"] = fg.grad((z * z * z).sum(), z).numpy()
        return grad

    gm = fg.GradManager().attach(w, callbacks=callback)
    with gm:
        gm.backward((w * w).sum())
    np.testing.assert_allclose(seen["g"], 3 * np.array([3.0, -1.0]) ** 2)
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 4.0])


def test_a_key_made_inside_function_backward_records():
    class Cube(fg.Function):
        def forward(self, x):
            self.x = x.detach()
            return x * x * x

        def backward(self, dy):
            # the rule computed by differentiating x**3 with a tape of its own
            x = fg.tensor(self.x.numpy())
            key = fg.GradKey("rule")
            key.attach(x)
            return dy * fg.grad((x * x * x).sum(), x)

    x = t([1.0, -2.0, 0.5])
    gm = fg.GradManager().attach(x)
    with gm:
        gm.backward(Cube()(x).sum())
    np.testing.assert_allclose(x.grad.numpy(), 3 * x.numpy() ** 2)


def test_a_key_made_inside_a_registered_rule_records():
    def rule(inputs, output):
        a, b = inputs

        def backward(dy):
            # a tape of the rule's own (with no mul in it: this rule would rewrite that one)
            x = fg.tensor(a.numpy())
            key = fg.GradKey("rule")
            key.attach(x)
            twos = fg.grad((x + x).sum(), x)
            return dy * b * twos / 2.0, dy * a

        return backward

    fg.register_grad_rule("mul", rule)
    try:
        a, b = t([1.0, 2.0]), t([3.0, 4.0])
        gm = fg.GradManager().attach([a, b])
        with gm:
            gm.backward((a * b).sum())
    finally:
        fg.unregister_grad_rule("mul")
    np.testing.assert_allclose(a.grad.numpy(), [3.0, 4.0])
    np.testing.assert_allclose(b.grad.numpy(), [1.0, 2.0])


def test_checkpoint_catches_a_closed_over_tensor_changed_before_backward():
    x = t([0.1, 0.2])
    w = t([1.0, 2.0])
    gm = fg.GradManager().attach([x, w])
    with gm:
        y = fg.checkpoint(lambda a: (a * w).exp(), x).sum()
        w.detach().fill_(5.0)
        with pytest.raises(fg.InplaceError, match="checkpoint"):
            gm.backward(y)


def test_checkpoint_catches_an_untracked_constant_changed_before_backward():
    x = t([0.1, 0.2])
    c = t([1.0, 2.0])  # not attached: the rerun would read the new value
    gm = fg.GradManager().attach(x)
    with gm:
        y = fg.checkpoint(lambda a: (a * c).exp(), x).sum()
        c += 1.0
        with pytest.raises(fg.InplaceError):
            gm.backward(y)


def test_checkpoint_is_not_fooled_by_changes_to_its_own_output():
    x = t([0.1, 0.2])
    gm = fg.GradManager().attach(x)
    with gm:
        y = fg.checkpoint(lambda a: (a * 2.0).exp(), x)
        loss = y.sum()
        gm.backward(loss)
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(2 * x.numpy()))


def test_zero_base_power_has_a_zero_gradient_not_nan():
    # PyTorch: d(0 ** x)/dx is 0 where the base is 0 and x >= 0
    x = t([0.5, 2.0, 3.0])
    gm = fg.GradManager().attach(x)
    with gm:
        gm.backward((0.0**x).sum())
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 0.0])


def test_tensor_zero_base_power_gradients_are_finite():
    a = t([0.0, 2.0])
    e = t([0.0, 3.0])
    gm = fg.GradManager().attach([a, e])
    with gm:
        gm.backward((a**e).sum())
    # d/da: 0 where e == 0 (PyTorch), 3 * 2**2 elsewhere; d/de: 0 at a == 0, 8 ln 2
    np.testing.assert_allclose(a.grad.numpy(), [0.0, 12.0])
    np.testing.assert_allclose(e.grad.numpy(), [0.0, 8 * np.log(2.0)])


def test_power_zero_gives_zero_gradients():
    # PyTorch: zeros, not None
    x = t([1.0, -2.0, 3.0])
    gm = fg.GradManager().attach(x)
    with gm:
        gm.backward((x**0).sum())
    assert x.grad is not None
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 0.0])


def test_piecewise_constant_ops_have_a_zero_gradient_as_pytorch():
    x = t([1.5, -2.5, 0.25])
    for op in ("sign", "floor", "ceil", "round", "trunc"):
        x.grad = None
        gm = fg.GradManager().attach(x)
        with gm:
            gm.backward((getattr(x, op)() * x).sum())
        np.testing.assert_array_equal(
            x.grad.numpy(), getattr(np, op if op != "round" else "rint")(x.numpy())
        )


def test_non_differentiable_op_off_the_gradient_path_is_fine():
    x = t([1.0, -2.0])
    gm = fg.GradManager().attach(x)
    with gm:
        s = x.sign()  # computed, never differentiated
        gm.backward((x * x).sum())
    np.testing.assert_allclose(x.grad.numpy(), [2.0, -4.0])
    np.testing.assert_allclose(s.numpy(), [1.0, -1.0])


def test_abs_has_second_derivatives():
    x = t([1.5, -2.0])
    _, hv = fg.hvp(lambda a: (a.abs() * a.abs() * a.abs()).sum(), x, fg.ones_like(x))
    # d2/dx2 |x|^3 = 6|x|
    np.testing.assert_allclose(hv.numpy(), 6 * np.abs(x.numpy()))


def test_a_recompute_policy_that_raises_propagates():
    def policy(op_name):
        raise KeyError("policy exploded on " + op_name)

    x = t([1.0, 2.0])
    gm = fg.GradManager(recompute=policy).attach(x)
    with gm, pytest.raises(KeyError, match="policy exploded"):
        (x * 2.0).exp()


# --------------------------------------------------------------------------------------------
# values


def test_relu_keeps_nan():
    x = fg.tensor([float("nan"), -1.0, 2.0])
    got = fg.relu(x).numpy()
    assert np.isnan(got[0]) and got[1] == 0.0 and got[2] == 2.0


def test_softmax_with_infinity_is_nan_as_in_pytorch():
    got = fg.softmax(fg.tensor([float("inf"), 0.0])).numpy()
    assert np.isnan(got).all()
    got = fg.log_softmax(fg.tensor([float("inf"), 0.0])).numpy()
    assert np.isnan(got).all()
    # finite rows are unaffected
    np.testing.assert_allclose(fg.softmax(fg.tensor([0.0, 0.0])).numpy(), [0.5, 0.5])


def test_inplace_write_through_a_broadcast_view_is_refused():
    z = fg.zeros(3)
    b = z.broadcast_to(3, 3)
    with pytest.raises(fg.ShapeError, match="broadcast"):
        b += 1
    with pytest.raises(fg.ShapeError, match="broadcast"):
        b[:] = 2.0
    with pytest.raises(fg.ShapeError, match="broadcast"):
        b.fill_(1.0)
    np.testing.assert_array_equal(z.numpy(), [0.0, 0.0, 0.0])  # nothing was written


def test_int_tensor_updated_in_place_by_a_float_tensor_is_refused():
    i = fg.tensor([1, 2, 3])
    with pytest.raises(fg.DTypeError, match="int64"):
        i *= fg.tensor([1.5, 1.5, 1.5], dtype="float64")
    np.testing.assert_array_equal(i.numpy(), [1, 2, 3])
    f = fg.tensor([1.0, 2.0], dtype="float32")
    f += fg.tensor([0.5, 0.5], dtype="float64")  # float into float is fine (same kind)
    np.testing.assert_allclose(f.numpy(), [1.5, 2.5])


# --------------------------------------------------------------------------------------------
# element counts that overflow


def test_factories_refuse_element_counts_that_overflow():
    with pytest.raises((fg.ShapeError, MemoryError)):
        fg.zeros(2**32, 2**32)
    with pytest.raises((fg.ShapeError, MemoryError)):
        fg.zeros(2**62 + 1, 4)


def test_huge_valid_counts_are_a_memory_error():
    # 8 TiB can be addressed, not allocated; more than can be addressed is a ShapeError
    # (numpy: "array is too big")
    with pytest.raises(MemoryError):
        fg.zeros(2**40, 2**10, dtype="float64")
    with pytest.raises(fg.ShapeError, match="too big"):
        fg.zeros(2**40, 2**20, dtype="float64")


def test_broadcast_to_a_count_that_overflows_is_refused():
    with pytest.raises(fg.ShapeError):
        fg.ones(3).broadcast_to(2**32, 2**32, 3)
    with pytest.raises(fg.ShapeError):
        fg.ones(1, 1).broadcast_to(2**40, 2**40)


def test_reshape_to_a_count_that_overflows_is_refused():
    x = fg.ones(4)
    with pytest.raises((fg.ShapeError, ValueError)):
        x.reshape(2**62 + 1, 4)
    with pytest.raises((fg.ShapeError, ValueError)):
        x.reshape(2**32, 2**32, -1)


def test_slicing_with_extreme_steps_has_numpy_lengths():
    a = np.arange(5.0)
    x = fg.tensor(a)
    for key in [
        slice(None, None, -(2**63)),
        slice(None, None, 2**63 - 1),
        slice(-(2**63), 2**63 - 1),
    ]:
        np.testing.assert_array_equal(x[key].numpy(), a[key])


@pytest.mark.skipif(TEST_DEVICE != "cpu", reason="CPU allocations")
def test_out_of_memory_is_a_memory_error_and_the_process_goes_on():
    with pytest.raises(MemoryError):
        fg.ones(2**50, dtype="float64")
    np.testing.assert_array_equal(fg.ones(2).numpy(), [1.0, 1.0])


# --------------------------------------------------------------------------------------------
# convolution windows that read only padding


def test_conv2d_whose_windows_read_only_padding():
    # PyTorch returns [[[[1.]]]]: only the middle tap of the dilated kernel sees the input
    y = fg.conv2d(fg.ones(1, 1, 1, 1), fg.ones(1, 1, 1, 3), padding=(0, 2), dilation=(1, 2))
    np.testing.assert_array_equal(y.numpy(), [[[[1.0]]]])


@pytest.mark.parametrize(
    "h,w,k,stride,padding,dilation,groups",
    [
        (1, 1, (1, 3), (1, 1), (0, 2), (1, 2), 1),
        (1, 2, (3, 3), (1, 2), (2, 3), (2, 3), 1),
        (3, 1, (2, 1), (2, 1), (1, 0), (3, 1), 2),
        (2, 5, (3, 2), (3, 1), (3, 2), (1, 4), 1),
        (4, 4, (3, 3), (2, 2), (4, 4), (2, 2), 2),
    ],
)
def test_conv2d_with_wide_padding_and_dilation_matches_the_direct_sum(
    h, w, k, stride, padding, dilation, groups
):
    rng = np.random.default_rng(h * 7 + w)
    x = rng.normal(size=(2, 2 * groups, h, w))
    wt = rng.normal(size=(2 * groups, 2, *k))
    want = conv2d_reference(x, wt, None, stride, padding, dilation, groups)
    xt, wtt = fg.tensor(x), fg.tensor(wt)
    gm = fg.GradManager().attach([xt, wtt])
    with gm:
        y = fg.conv2d(xt, wtt, stride=stride, padding=padding, dilation=dilation, groups=groups)
        gm.backward((y * y).sum())
    np.testing.assert_allclose(y.numpy(), want, atol=1e-12)
    # gradients against finite differences of the reference
    eps = 1e-6
    dw = np.zeros_like(wt)
    for idx in np.ndindex(wt.shape):
        wp, wm = wt.copy(), wt.copy()
        wp[idx] += eps
        wm[idx] -= eps
        fp = (conv2d_reference(x, wp, None, stride, padding, dilation, groups) ** 2).sum()
        fm = (conv2d_reference(x, wm, None, stride, padding, dilation, groups) ** 2).sum()
        dw[idx] = (fp - fm) / (2 * eps)
    np.testing.assert_allclose(wtt.grad.numpy(), dw, rtol=1e-5, atol=1e-6)
    dx = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xp_, xm = x.copy(), x.copy()
        xp_[idx] += eps
        xm[idx] -= eps
        fp = (conv2d_reference(xp_, wt, None, stride, padding, dilation, groups) ** 2).sum()
        fm = (conv2d_reference(xm, wt, None, stride, padding, dilation, groups) ** 2).sum()
        dx[idx] = (fp - fm) / (2 * eps)
    np.testing.assert_allclose(xt.grad.numpy(), dx, rtol=1e-5, atol=1e-6)
