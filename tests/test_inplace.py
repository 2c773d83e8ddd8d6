"""In-place ops: version counters on the storage, InplaceError for a saved tensor modified
before backward (naming the op, the shape and the versions), differentiable in-place ops
on tracked tensors, and detach().
"""

from __future__ import annotations

import re

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
# version counter
# --------------------------------------------------------------------------------------

INPLACE = {
    "iadd": lambda x: x.__iadd__(T([1.0, 1.0, 1.0])),
    "iadd-scalar": lambda x: x.__iadd__(2.0),
    "isub": lambda x: x.__isub__(T([1.0, 1.0, 1.0])),
    "imul": lambda x: x.__imul__(T([2.0, 2.0, 2.0])),
    "idiv": lambda x: x.__itruediv__(T([2.0, 2.0, 2.0])),
    "setitem-int": lambda x: x.__setitem__(0, T(5.0)),
    "setitem-slice": lambda x: x.__setitem__(slice(1, None), T([7.0, 8.0])),
    "setitem-ellipsis": lambda x: x.__setitem__(Ellipsis, T([7.0, 8.0, 9.0])),
    "copy_": lambda x: x.copy_(T([4.0, 5.0, 6.0])),
    "fill_": lambda x: x.fill_(3.0),
    "zero_": lambda x: x.zero_(),
}


@pytest.mark.parametrize("op", sorted(INPLACE))
def test_inplace_ops_bump_the_version(op):
    x = T([1.0, 2.0, 3.0])
    v0 = x._version
    INPLACE[op](x)
    assert x._version == v0 + 1
    INPLACE[op](x)
    assert x._version == v0 + 2


def test_augmented_assignment_keeps_the_object_and_changes_values():
    x = T([1.0, 2.0, 3.0])
    ident = id(x)
    x += T([1.0, 1.0, 1.0])
    x *= 2.0
    x -= 1.0
    x /= T([1.0, 2.0, 4.0])
    assert id(x) == ident
    np.testing.assert_allclose(x.numpy(), [3.0, 2.5, 1.75])
    x[1] = 10.0
    x[...] = x * 2.0
    np.testing.assert_allclose(x.numpy(), [6.0, 20.0, 3.5])
    x.copy_(T([0.0, 1.0, 2.0]))
    np.testing.assert_allclose(x.numpy(), [0.0, 1.0, 2.0])


def test_out_of_place_ops_do_not_bump_the_version():
    x = T([1.0, 2.0, 3.0])
    v0 = x._version
    _ = x + 1.0
    _ = x * x
    _ = x.exp().sum()
    _ = x[1:]
    _ = x.reshape((3, 1))
    _ = x.numpy()
    assert x._version == v0


def test_version_is_shared_by_tensors_on_the_same_storage():
    x = T([1.0, 2.0, 3.0, 4.0])
    d = x.detach()
    v0 = x._version
    d += 1.0  # writes x's storage
    assert x._version == v0 + 1
    assert d._version == x._version
    np.testing.assert_allclose(x.numpy(), [2.0, 3.0, 4.0, 5.0])
    c = x.copy()  # a new storage
    c.zero_()
    assert x._version == v0 + 1
    np.testing.assert_allclose(x.numpy(), [2.0, 3.0, 4.0, 5.0])


# --------------------------------------------------------------------------------------
# saved tensors modified before backward
# --------------------------------------------------------------------------------------

SHAPE = (2, 3)


def _base():
    return np.array([[0.5, 1.0, 1.5], [2.0, 2.5, 3.0]])


def mod_input_of_log(a):
    b = a * 1.0
    c = b.log()  # log saves its input b
    b += 1.0
    return c.sum(), "log"


def mod_output_of_exp(a):
    b = a * 1.0
    c = b.exp()  # exp saves its output c
    c *= 2.0
    return c.sum(), "exp"


def mod_mul_operand_by_setitem(a):
    b = a * 1.0
    c = b * a  # mul saves b
    b[0] = T([1.0, 1.0, 1.0])
    return c.sum(), "mul"


def mod_tanh_output_by_copy(a):
    b = a * 0.1
    c = b.tanh()  # tanh saves its output c
    d = c * 2.0  # the gradient reaches tanh through d
    c.copy_(T(np.zeros(SHAPE)))
    return d.sum(), "tanh"


def mod_leaf(a):
    c = a.log()
    a += 1.0  # the attached tensor itself, saved by log
    return c.sum(), "log"


def mod_through_detached_alias(a):
    b = a * 2.0
    c = b.sigmoid()  # saves its output
    c.detach().fill_(0.5)  # writes the same storage
    return c.sum(), "sigmoid"


def mod_through_view(a):
    b = a * 1.0
    c = b.log()
    v = b[1]  # a view of b's storage
    v += 1.0
    return c.sum(), "log"


def mod_untracked_operand(a):
    k = T(_base() + 1.0)  # a constant, not attached
    c = a * k  # mul saves k for a's gradient
    k += 1.0
    return c.sum(), "mul"


@pytest.mark.parametrize(
    "case",
    [
        mod_input_of_log,
        mod_output_of_exp,
        mod_mul_operand_by_setitem,
        mod_tanh_output_by_copy,
        mod_leaf,
        mod_through_detached_alias,
        mod_through_view,
        mod_untracked_operand,
    ],
)
def test_modified_saved_tensor_makes_backward_raise(case):
    a = T(_base())
    gm = fg.GradManager().attach(a)
    with gm:
        y, op = case(a)
        with pytest.raises(fg.InplaceError) as info:
            gm.backward(y)
        assert not gm.is_recording
    msg = str(info.value)
    assert re.search(rf"\b{op}\b", msg), f"message does not name {op!r}: {msg}"
    assert "[2, 3]" in msg or "(2, 3)" in msg, f"message does not name the shape: {msg}"
    assert "saved at version 0, now at version 1" in msg, msg
    assert a.grad is None  # never a silently wrong gradient


def test_inplace_error_is_a_runtime_error():
    assert issubclass(fg.InplaceError, RuntimeError)


def test_error_reports_the_current_version_after_several_writes():
    a = T([1.0, 2.0])
    gm = fg.GradManager().attach(a)
    with gm:
        b = a * 3.0
        b += 1.0  # version 1, then saved
        c = b.log()
        b += 1.0
        b[0] = 4.0
        b.copy_(T([5.0, 6.0]))
        with pytest.raises(fg.InplaceError, match="saved at version 1, now at version 4"):
            gm.backward(c.sum())
    assert a.grad is None


def test_shape_named_for_higher_rank_tensors():
    a = T(np.linspace(0.5, 2.0, 24).reshape(2, 3, 4))
    w = T(np.ones((4, 5)))
    gm = fg.GradManager().attach([a, w])
    with gm:
        b = a * 1.0
        c = (b @ w).tanh()  # matmul saves b for w's gradient
        b.zero_()
        with pytest.raises(fg.InplaceError) as info:
            gm.backward(c.sum())
    msg = str(info.value)
    assert "matmul" in msg
    assert "[2, 3, 4]" in msg or "(2, 3, 4)" in msg, msg


def test_cloning_before_modifying_avoids_the_error():
    x0 = _base()
    a = T(x0)
    gm = fg.GradManager().attach(a)
    with gm:
        b = a * 2.0
        c = b.copy().log()
        b += 100.0
        gm.backward(c.sum())
    close(a.grad, 1.0 / x0)


def test_modifying_after_backward_is_fine():
    x0 = _base()
    a = T(x0)
    gm = fg.GradManager().attach(a)
    with gm:
        b = a * 1.0
        c = b.log()
        gm.backward(c.sum())
    b += 1.0
    a += 1.0
    close(a.grad, 1.0 / x0)


def test_error_also_in_higher_order_backward():
    """The outer backward also checks versions of what it saved."""
    x = T([0.5, 1.5])
    outer, inner = fg.GradManager().attach(x), fg.GradManager().attach(x)
    with outer:
        with inner:
            inner.backward((x**3).sum())
        g = x.grad  # recorded by outer: 3 x^2
        h = g * 1.0
        k = h.exp()  # saves its output
        k += 1.0
        with pytest.raises(fg.InplaceError, match="exp"):
            outer.backward(k.sum())


# --------------------------------------------------------------------------------------
# differentiable in-place ops on tracked tensors
# --------------------------------------------------------------------------------------


def test_inplace_arithmetic_is_differentiable():
    a0, s0 = np.array([1.0, 2.0, -0.5]), np.array([3.0, 5.0, 0.7])
    a, s = T(a0), T(s0)
    gm = fg.GradManager().attach([a, s])
    with gm:
        b = a * 1.0
        b += s * a
        b -= s.tanh()
        b *= 3.0
        b /= s
        gm.backward((b * b).sum())

    def f(a, s):
        b = a + s * a
        b = b - np.tanh(s)
        b = b * 3.0
        b = b / s
        return np.sum(b * b)

    ea, es = numeric_grad(f, [a0, s0])
    close(a.grad, ea, rtol=1e-6, atol=1e-8)
    close(s.grad, es, rtol=1e-6, atol=1e-8)


def test_setitem_is_differentiable_for_the_target_and_the_value():
    a0, v0 = np.arange(1.0, 7.0).reshape(2, 3), np.array([0.5, -1.5])
    a, v = T(a0), T(v0)
    gm = fg.GradManager().attach([a, v])
    with gm:
        b = a * 2.0
        b[:, 1] = v * v
        b[0, 0] = 3.0
        gm.backward((b * b * b).sum())

    def f(a, v):
        b = a * 2.0
        b[:, 1] = v * v
        b[0, 0] = 3.0
        return np.sum(b**3)

    ea, ev = numeric_grad(f, [a0, v0])
    close(a.grad, ea, rtol=1e-6, atol=1e-7)
    close(v.grad, ev, rtol=1e-6, atol=1e-7)
    assert a.grad.numpy()[0, 0] == 0.0 and a.grad.numpy()[1, 1] == 0.0


def test_copy_into_is_differentiable_for_the_source_only():
    a0, s0 = np.array([1.0, 2.0]), np.array([0.3, -0.4])
    a, s = T(a0), T(s0)
    gm = fg.GradManager().attach([a, s])
    with gm:
        b = a * 2.0
        b.copy_(s.exp())
        gm.backward((b * a).sum())
    close(a.grad, np.exp(s0))  # only through the multiplication by a
    close(s.grad, np.exp(s0) * a0)


def test_fill_and_zero_cut_the_gradient_of_the_old_value():
    a = T([1.0, 2.0])
    gm = fg.GradManager().attach(a)
    with gm:
        b = a * 2.0
        b.zero_()
        c = a * 3.0
        c.fill_(2.0)
        assert b.requires_grad and c.requires_grad  # as PyTorch's: still on the tape
        gm.backward((b + c + a).sum())
    close(a.grad, [1.0, 1.0])
    # an op that saved the overwritten value for its backward refuses it, as PyTorch's does
    gm = fg.GradManager().attach(a)
    with gm:
        b = a.exp()
        b.zero_()
        with pytest.raises(fg.InplaceError, match="exp"):
            gm.backward((b + a).sum())


def test_inplace_on_attached_tensor_takes_gradient_wrt_snapshot():
    x0 = np.array([0.4, -0.9, 1.7])
    x = T(x0)
    gm = fg.GradManager().attach(x)
    with gm:
        x *= 2.0  # x = 2 x0
        x += T([1.0, 1.0, 1.0])  # x = 2 x0 + 1
        x[0] = x[1].exp()  # x[1] is a view: exp saves its own (fresh) output
        x /= x.detach() * 0.0 + 4.0
        y = (x.tanh() * x).sum()
        gm.backward(y)

    def f(a):
        b = 2 * a + 1
        b[0] = np.exp(b[1])
        b = b / 4.0
        return np.sum(np.tanh(b) * b)

    (e,) = numeric_grad(f, [x0])
    close(x.grad, e, rtol=1e-6, atol=1e-8)


# --------------------------------------------------------------------------------------
# detach
# --------------------------------------------------------------------------------------


def test_detach_stops_the_gradient():
    x0 = np.array([1.0, -2.0, 3.0])
    x = T(x0)
    gm = fg.GradManager().attach(x)
    with gm:
        y = (x * x.detach()).sum() + (x.detach().exp()).sum()
        gm.backward(y)
    close(x.grad, x0)  # not 2 x, and nothing from exp


def test_detach_only_path_leaves_grad_none():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x)
    with gm:
        gm.backward((x.detach() * 5.0).sum())
    assert x.grad is None


def test_detach_of_intermediate_in_second_order():
    """d/dx of (x^2).detach() * x^3 treats the first factor as constant at every order."""
    x0 = np.array([0.5, 2.0])
    x = T(x0)
    outer, inner = fg.GradManager().attach(x), fg.GradManager().attach(x)
    with outer:
        with inner:
            inner.backward(((x * x).detach() * x**3).sum())
        close(x.grad, x0**2 * 3 * x0**2)
        g = x.grad
        x.grad = None
        outer.backward(g)
    close(x.grad, x0**2 * 6 * x0)


def test_detach_has_the_same_values_and_shape():
    x = T([[1.0, 2.0], [3.0, 4.0]])
    d = x.detach()
    assert d is not x
    assert tuple(d.shape) == (2, 2) and d.dtype == x.dtype
    np.testing.assert_array_equal(d.numpy(), x.numpy())


def test_inplace_multiply_by_a_tracked_tensor_is_differentiable():
    a0, s0 = np.array([1.0, 2.0, -0.5]), np.array([3.0, 5.0, 0.7])
    a, s = T(a0), T(s0)
    gm = fg.GradManager().attach([a, s])
    with gm:
        b = a * 1.0
        b *= s  # nothing modifies a saved tensor after this op
        gm.backward((b * b).sum())
    close(a.grad, 2 * a0 * s0**2)
    close(s.grad, 2 * a0**2 * s0)


def test_inplace_multiply_of_attached_tensor_by_a_tracked_tensor():
    x0, s0 = np.array([1.0, 2.0]), np.array([3.0, -4.0])
    x, s = T(x0), T(s0)
    gm = fg.GradManager().attach([x, s])
    with gm:
        x *= s
        gm.backward((x * x * x).sum())
    close(x.grad, 3 * x0**2 * s0**3)
    close(s.grad, 3 * x0**3 * s0**2)
