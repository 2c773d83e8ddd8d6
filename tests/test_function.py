"""Custom grad rules: ferrograd.Function subclasses and the builtin-op rule registry
(register_grad_rule / unregister_grad_rule, declining at run time).

Gradients are checked against closed forms or central finite differences of numpy code.
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


def grads_of(fn, *arrays):
    """Attaches float64 tensors of ``arrays`` to a fresh GradManager, backpropagates
    ``fn(*tensors)`` (a scalar) and returns the tensors (with their .grad)."""
    xs = [T(a) for a in arrays]
    gm = fg.GradManager().attach(xs)
    with gm:
        gm.backward(fn(*xs))
    return xs


# --------------------------------------------------------------------------------------
# Functions
# --------------------------------------------------------------------------------------


class Sigmoid(fg.Function):
    """sigmoid with a hand-written backward built from ferrograd ops."""

    def forward(self, x):
        self.y = T(1.0 / (1.0 + np.exp(-x.numpy())))
        return self.y

    def backward(self, g):
        return g * self.y * (1.0 - self.y)


class Square(fg.Function):
    def forward(self, x):
        self.x = x
        return x * x

    def backward(self, g):
        return g * 2.0 * self.x


class Cube(fg.Function):
    """x^3 whose backward itself uses a Function (Square)."""

    def forward(self, x):
        self.x = x
        return x * x * x

    def backward(self, g):
        return Square()(self.x) * 3.0 * g


def test_function_gradient_matches_finite_differences():
    x0 = np.array([[0.3, -1.2, 2.0], [0.0, 0.7, -0.4]])
    w0 = np.array([[1.0, 2.0, -1.0], [0.5, -3.0, 4.0]])
    (x,) = grads_of(lambda x: (Sigmoid()(x * 2.0) * T(w0)).sum() ** 2, x0)

    def f(a):
        return np.sum(1.0 / (1.0 + np.exp(-2.0 * a)) * w0) ** 2

    (expected,) = numeric_grad(f, [x0])
    close(x.grad, expected, rtol=1e-6, atol=1e-8)


def test_function_output_value_is_forward_result():
    x = T([0.0, 1.0])
    y = Sigmoid()(x)
    assert isinstance(y, fg.Tensor)
    np.testing.assert_allclose(y.numpy(), 1.0 / (1.0 + np.exp(-np.array([0.0, 1.0]))))


def test_backward_rule_replaces_autodiff_of_forward():
    """forward computes x*x, backward claims 7*g: the gradient is 7, not 2x."""

    class Lie(fg.Function):
        def forward(self, x):
            return x * x

        def backward(self, g):
            return g * 7.0

    (x,) = grads_of(lambda x: Lie()(x).sum(), [1.0, 2.0, 3.0])
    close(x.grad, [7.0, 7.0, 7.0])


def test_forward_runs_untracked():
    """In-place changes to a forward intermediate that autodiff would have saved do not
    raise: nothing inside forward is recorded."""

    class Scratch(fg.Function):
        def forward(self, x):
            h = x * 1.0
            out = h.log()  # log saves h
            h += 5.0  # would make a recorded log's backward raise
            return out

        def backward(self, g):
            return g * 3.0

    (x,) = grads_of(lambda x: Scratch()(x).sum(), [1.0, 2.0])
    close(x.grad, [3.0, 3.0])


def test_forward_untracked_with_nested_managers():
    outer_calls = []

    class Scratch(fg.Function):
        def forward(self, x):
            h = x * 1.0
            out = h.exp()
            out *= 2.0
            return out

        def backward(self, g):
            outer_calls.append(1)
            return g * 0.5

    x = T([1.0, 2.0])
    o, i = fg.GradManager().attach(x), fg.GradManager().attach(x)
    with o:
        with i:
            i.backward(Scratch()(x).sum())
        close(x.grad, [0.5, 0.5])
        o.backward(x.grad)  # 0.5 * g with g = ones: a constant, second derivative 0
    close(x.grad, [0.5, 0.5])
    assert outer_calls == [1]


def test_multiple_outputs_and_none_for_outputs_without_gradient():
    seen = []

    class SumProd(fg.Function):
        def forward(self, a, b):
            self.a, self.b = a, b
            return a + b, a * b

        def backward(self, g_sum, g_prod):
            seen.append((g_sum is None, g_prod is None))
            ga = gb = None
            if g_sum is not None:
                ga, gb = g_sum, g_sum
            if g_prod is not None:
                ga = g_prod * self.b if ga is None else ga + g_prod * self.b
                gb = g_prod * self.a if gb is None else gb + g_prod * self.a
            return ga, gb

    a0, b0 = np.array([1.0, 2.0]), np.array([3.0, 5.0])
    a, b = grads_of(lambda a, b: SumProd()(a, b)[1].sum(), a0, b0)
    assert seen == [(True, False)]
    close(a.grad, b0)
    close(b.grad, a0)

    seen.clear()
    a, b = grads_of(lambda a, b: SumProd()(a, b)[0].sum() * 2.0, a0, b0)
    assert seen == [(False, True)]
    close(a.grad, [2.0, 2.0])
    close(b.grad, [2.0, 2.0])

    seen.clear()
    w = np.array([0.5, -1.5])

    def both(a, b):
        s, p = SumProd()(a, b)
        return (s * s).sum() + (p * T(w)).sum()

    a, b = grads_of(both, a0, b0)
    assert seen == [(False, False)]
    close(a.grad, 2 * (a0 + b0) + w * b0)
    close(b.grad, 2 * (a0 + b0) + w * a0)


def test_multiple_outputs_returns_a_tuple():
    class Split(fg.Function):
        def forward(self, x):
            return x * 2.0, x * 3.0

        def backward(self, g1, g2):
            return (g1 if g1 is not None else 0.0) + (g2 if g2 is not None else 0.0)

    out = Split()(T([1.0]))
    assert isinstance(out, tuple) and len(out) == 2
    np.testing.assert_allclose(out[0].numpy(), [2.0])
    np.testing.assert_allclose(out[1].numpy(), [3.0])


def test_backward_may_return_a_tensor_or_a_one_tuple_for_one_input():
    class AsTuple(fg.Function):
        def forward(self, x):
            return x * 2.0

        def backward(self, g):
            return (g * 2.0,)

    class AsTensor(fg.Function):
        def forward(self, x):
            return x * 2.0

        def backward(self, g):
            return g * 2.0

    for F in (AsTuple, AsTensor):
        (x,) = grads_of(lambda x, F=F: (F()(x) * T([1.0, 3.0])).sum(), [1.0, 1.0])
        close(x.grad, [2.0, 6.0])


def test_none_for_an_input_without_gradient():
    class OnlyFirst(fg.Function):
        def forward(self, a, b):
            return a * b

        def backward(self, g):
            return g * 4.0, None

    a, b = grads_of(lambda a, b: OnlyFirst()(a, b).sum(), [1.0, 2.0], [3.0, 4.0])
    close(a.grad, [4.0, 4.0])
    assert b.grad is None

    class NoneAtAll(fg.Function):
        def forward(self, a):
            return a * 2.0

        def backward(self, g):
            return None

    (a,) = grads_of(lambda a: NoneAtAll()(a).sum() + (a * 5.0).sum(), [1.0, 2.0])
    close(a.grad, [5.0, 5.0])


@pytest.mark.parametrize(
    "result",
    [
        lambda g: (g,),  # too few
        lambda g: (g, g, g),  # too many
        lambda g: g,  # a single tensor for two inputs
        lambda g: (),
    ],
    ids=["too-few", "too-many", "single-for-two", "empty"],
)
def test_wrong_number_of_gradients_raises_value_error(result):
    class Bad(fg.Function):
        def forward(self, a, b):
            return a * b

        def backward(self, g):
            return result(g)

    a, b = T([1.0, 2.0]), T([3.0, 4.0])
    gm = fg.GradManager().attach([a, b])
    with gm:
        y = Bad()(a, b).sum()
        with pytest.raises(ValueError):
            gm.backward(y)
        assert not gm.is_recording
    assert a.grad is None and b.grad is None


@pytest.mark.parametrize(
    "bad",
    [lambda g: (g, 1.0), lambda g: (np.ones(2), g), lambda g: (g, [1.0, 1.0]), lambda g: ("x", g)],
    ids=["float", "ndarray", "list", "str"],
)
def test_non_tensor_gradient_raises_type_error(bad):
    class Bad(fg.Function):
        def forward(self, a, b):
            return a * b

        def backward(self, g):
            return bad(g)

    a, b = T([1.0, 2.0]), T([3.0, 4.0])
    gm = fg.GradManager().attach([a, b])
    with gm:
        y = Bad()(a, b).sum()
        with pytest.raises(TypeError):
            gm.backward(y)
    assert not gm.is_recording


@pytest.mark.parametrize("bad", [1.0, 3, np.array([1.0, 2.0]), [1.0, 2.0], None])
def test_non_tensor_input_raises_type_error(bad):
    called = []

    class F(fg.Function):
        def forward(self, a, b):
            called.append(1)
            return a

        def backward(self, g):
            return g, g

    with pytest.raises(TypeError):
        F()(T([1.0, 2.0]), bad)
    with pytest.raises(TypeError):
        F()(bad, T([1.0, 2.0]))
    assert called == []


def test_straight_through_estimator():
    class RoundSTE(fg.Function):
        def forward(self, x):
            return T(np.round(x.numpy()))

        def backward(self, g):
            return g  # identity: the rounding is invisible to the gradient

    x0 = np.array([0.2, 0.7, -1.4, 2.6])
    w0 = np.array([1.0, -2.0, 3.0, 0.5])
    x = T(x0)
    gm = fg.GradManager().attach(x)
    with gm:
        q = RoundSTE()(x * 2.0)
        np.testing.assert_allclose(q.numpy(), np.round(2.0 * x0))
        loss = (q * T(w0)).sum()
        gm.backward(loss)
    assert loss.item() == pytest.approx(float(np.sum(np.round(2 * x0) * w0)))
    close(x.grad, 2.0 * w0)  # finite differences would give 0: the STE is used as is


def test_function_composes_with_builtin_ops():
    x0 = np.array([0.4, -0.8, 1.3])
    w0 = np.array([0.7, -1.1, 0.2])

    def fn(x, w):
        return ((Square()(x.tanh() * w) + x).exp() * w).sum()

    x, w = grads_of(fn, x0, w0)

    def f(a, b):
        return np.sum(np.exp((np.tanh(a) * b) ** 2 + a) * b)

    ex, ew = numeric_grad(f, [x0, w0])
    close(x.grad, ex, rtol=1e-6, atol=1e-8)
    close(w.grad, ew, rtol=1e-6, atol=1e-8)


def test_function_output_used_twice_gets_the_summed_gradient():
    calls = []

    class Id(fg.Function):
        def forward(self, x):
            return x * 1.0

        def backward(self, g):
            calls.append(g.numpy().copy())
            return g

    def fn(x):
        h = Id()(x)
        return (h * h).sum() + (h * 3.0).sum()

    (x,) = grads_of(fn, [1.0, 2.0])
    assert len(calls) == 1
    np.testing.assert_allclose(calls[0], [2.0 + 3.0, 4.0 + 3.0])
    close(x.grad, [5.0, 7.0])


def test_function_backward_using_functions_is_differentiated_again():
    x0 = np.array([0.5, -1.0, 2.0])
    x = T(x0)
    outer, inner = fg.GradManager().attach(x), fg.GradManager().attach(x)
    with outer:
        with inner:
            inner.backward(Cube()(x).sum())
        close(x.grad, 3.0 * x0**2)
        g1 = x.grad
        x.grad = None
        outer.backward(g1)
    close(x.grad, 6.0 * x0)


def test_third_derivative_through_functions():
    x0 = np.array([0.5, -1.0, 2.0])
    x = T(x0)
    gms = [fg.GradManager().attach(x) for _ in range(3)]
    with gms[0]:
        with gms[1]:
            with gms[2]:
                gms[2].backward(Cube()(x).sum())
            g1 = x.grad
            x.grad = None
            gms[1].backward(g1)
        close(x.grad, 6.0 * x0)
        g2 = x.grad
        x.grad = None
        gms[0].backward(g2)
    close(x.grad, [6.0, 6.0, 6.0])


def test_function_instances_are_independent():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x)
    with gm:
        a = Square()(x)
        b = Square()(x * 3.0)
        gm.backward((a + b).sum())
    close(x.grad, 2.0 * np.array([1.0, 2.0]) + 18.0 * np.array([1.0, 2.0]))


# --------------------------------------------------------------------------------------
# the builtin-op rule registry
# --------------------------------------------------------------------------------------


@pytest.fixture
def registry():
    """Registers rules through the fixture and always unregisters them."""
    names = []

    def register(op, rule):
        fg.register_grad_rule(op, rule)
        names.append(op)
        return rule

    try:
        yield register
    finally:
        for op in names:
            fg.unregister_grad_rule(op)


def exp_grad(x0):
    (x,) = grads_of(lambda x: x.exp().sum(), x0)
    return x.grad.numpy()


def test_registered_rule_replaces_the_builtin_rule(registry):
    seen = []

    def rule(inputs, output):
        seen.append(([i.numpy().copy() for i in inputs], output.numpy().copy()))
        return lambda g: (g * 100.0,)

    registry("exp", rule)
    x0 = np.array([0.0, 1.0])
    np.testing.assert_allclose(exp_grad(x0), [100.0, 100.0])
    assert len(seen) == 1
    (inputs, output) = seen[0]
    assert len(inputs) == 1
    np.testing.assert_allclose(inputs[0], x0)
    np.testing.assert_allclose(output, np.exp(x0))


def test_rule_for_a_binary_op_gets_both_inputs(registry):
    def rule(inputs, output):
        _a, b = inputs
        return lambda g: (g * 2.0, g * b * 10.0)

    registry("mul", rule)
    a, b = grads_of(lambda a, b: (a * b).sum(), [1.0, 2.0], [3.0, 4.0])
    close(a.grad, [2.0, 2.0])
    close(b.grad, [30.0, 40.0])


def test_correct_registered_rule_matches_finite_differences(registry):
    def matmul_rule(inputs, output):
        a, b = inputs
        return lambda g: (g @ b.T, a.T @ g)

    registry("matmul", matmul_rule)
    rng = np.random.default_rng(5)
    a0, b0 = rng.normal(size=(3, 4)), rng.normal(size=(4, 2))
    a, b = grads_of(lambda a, b: ((a @ b).tanh() ** 2).sum(), a0, b0)
    ea, eb = numeric_grad(lambda p, q: np.sum(np.tanh(p @ q) ** 2), [a0, b0])
    close(a.grad, ea, rtol=1e-6, atol=1e-8)
    close(b.grad, eb, rtol=1e-6, atol=1e-8)


def test_rule_declining_with_none_falls_back_to_builtin(registry):
    registry("exp", lambda inputs, output: None)
    x0 = np.array([0.0, 1.0, -0.5])
    np.testing.assert_allclose(exp_grad(x0), np.exp(x0))


def test_rule_declining_with_fallback_exception(registry):
    def rule(inputs, output):
        raise fg.GradRuleFallback()

    registry("exp", rule)
    x0 = np.array([0.0, 1.0, -0.5])
    np.testing.assert_allclose(exp_grad(x0), np.exp(x0))


def test_rule_declines_at_run_time(registry):
    """The rule takes over for small inputs and declines for large ones, within one graph."""

    def rule(inputs, output):
        (x,) = inputs
        if float(x.numpy().max()) > 10.0:
            return None
        return lambda g: (g * -1.0,)

    registry("exp", rule)
    small, big = np.array([0.5, 1.0]), np.array([11.0, 12.0])
    s, b = grads_of(lambda s, b: s.exp().sum() + b.exp().sum(), small, big)
    close(s.grad, [-1.0, -1.0])
    close(b.grad, np.exp(big))


def test_unregister_restores_the_builtin_rule():
    fg.register_grad_rule("exp", lambda inputs, output: lambda g: (g * 0.0,))
    try:
        np.testing.assert_allclose(exp_grad(np.array([1.0])), [0.0])
    finally:
        assert fg.unregister_grad_rule("exp") is True
    assert fg.unregister_grad_rule("exp") is False
    np.testing.assert_allclose(exp_grad(np.array([1.0])), np.exp([1.0]))


def test_registering_for_an_unknown_op_raises():
    with pytest.raises(ValueError):
        fg.register_grad_rule("no_such_op", lambda i, o: None)


def test_rule_names_are_the_listed_builtin_ops():
    names = set(fg._core.OP_NAMES)
    for op in [
        "add",
        "sub",
        "mul",
        "div",
        "pow",
        "exp",
        "log",
        "tanh",
        "sigmoid",
        "relu",
        "matmul",
        "sum",
        "mean",
    ]:
        assert op in names


def test_registered_rule_is_differentiated_again(registry):
    def tanh_rule(inputs, output):
        return lambda g: (g * (1.0 - output * output),)

    registry("tanh", tanh_rule)
    x0 = np.array([0.5, -1.0, 2.0])
    x = T(x0)
    outer, inner = fg.GradManager().attach(x), fg.GradManager().attach(x)
    with outer:
        with inner:
            inner.backward(x.tanh().sum())
        t = np.tanh(x0)
        close(x.grad, 1.0 - t * t)
        g1 = x.grad
        x.grad = None
        outer.backward(g1)
    close(x.grad, -2.0 * t * (1.0 - t * t))
