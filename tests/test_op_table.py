"""The op table as a whole: every op the engine has is either checked against float64 finite
differences here (one row per op, the engine's internal ops through the higher derivatives
that use them) or declared non-differentiable, with a gradient through it refused; the
bindings and stubs generated from the op tables are complete and in step."""

from __future__ import annotations

from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest
from conftest import TEST_DEVICE, check_grad
from ferrograd import _core, _stubs


def first_derivative(f, wrt=0):
    """``x -> d sum(f(*xs)) / d xs[wrt]``, taken by a key of its own with ``create_graph``, so
    that an outer key differentiates the rules ``f``'s backward ran."""

    def g(*xs):
        key = fg.GradKey("inner")
        for x in xs:
            key._attach(x, None, False)
        y = f(*xs)
        return key.grad([(y * y).sum()], None, [xs[wrt]], True)[0]

    return g


def other_device(x):
    return "cuda" if x.device == "cpu" else "cpu"


def setitem(a, b):
    y = a * 1.0
    y[1:, ::2] = b
    return y


rng = np.random.default_rng(0)


def uniform(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape)


def away(*shape):
    return uniform(*shape, lo=0.2, hi=2.0) * rng.choice([-1.0, 1.0], size=shape)


def distinct(*shape):
    n = int(np.prod(shape))
    return ((rng.permutation(n) - n / 2.0) * 0.3 + rng.uniform(-0.05, 0.05, n)).reshape(shape)


def positive(*shape):
    return uniform(*shape, lo=0.3, hi=2.0)


SCALE = uniform(4, 1, 1)
IMAGE = (1, 2, 4, 4)
WEIGHT = (2, 2, 2, 2)

# op name -> (function of float64 tensors, input arrays, finite-difference step)
ROWS = {
    "neg": (lambda x: -x, [uniform(3, 2)], 1e-6),
    "exp": (lambda x: x.exp(), [uniform(3, 2)], 1e-6),
    "log": (lambda x: x.log(), [positive(3, 2)], 1e-6),
    "log1p": (lambda x: x.log1p(), [uniform(3, 2, lo=-0.7, hi=2.0)], 1e-6),
    "sqrt": (lambda x: x.sqrt(), [positive(3, 2)], 1e-6),
    "abs": (lambda x: x.abs(), [away(3, 2)], 1e-6),
    # piecewise constant: a zero gradient away from the jumps, as PyTorch
    "sign": (lambda x: x.sign() * x, [away(3, 2)], 1e-6),
    "floor": (lambda x: x.floor() * x, [uniform(3, 2, lo=0.1, hi=0.9)], 1e-6),
    "ceil": (lambda x: x.ceil() * x, [uniform(3, 2, lo=0.1, hi=0.9)], 1e-6),
    "round": (lambda x: x.round() * x, [uniform(3, 2, lo=0.6, hi=1.4)], 1e-6),
    "trunc": (lambda x: x.trunc() * x, [uniform(3, 2, lo=1.1, hi=1.9)], 1e-6),
    "tanh": (lambda x: x.tanh(), [uniform(3, 2)], 1e-6),
    "sin": (lambda x: x.sin(), [uniform(3, 2)], 1e-6),
    "cos": (lambda x: x.cos(), [uniform(3, 2)], 1e-6),
    "tan": (lambda x: x.tan(), [uniform(3, 2, lo=-1.2, hi=1.2)], 1e-6),
    "asin": (lambda x: x.asin(), [uniform(3, 2, lo=-0.9, hi=0.9)], 1e-6),
    "acos": (lambda x: x.acos(), [uniform(3, 2, lo=-0.9, hi=0.9)], 1e-6),
    "atan": (lambda x: x.atan(), [uniform(3, 2)], 1e-6),
    "sinh": (lambda x: x.sinh(), [uniform(3, 2)], 1e-6),
    "cosh": (lambda x: x.cosh(), [uniform(3, 2)], 1e-6),
    "erf": (lambda x: x.erf(), [uniform(3, 2)], 1e-6),
    "erfc": (lambda x: x.erfc(), [uniform(3, 2)], 1e-6),
    "expm1": (lambda x: x.expm1(), [uniform(3, 2)], 1e-6),
    "exp2": (lambda x: x.exp2(), [uniform(3, 2)], 1e-6),
    "log2": (lambda x: x.log2(), [uniform(3, 2, lo=0.2, hi=3.0)], 1e-6),
    "log10": (lambda x: x.log10(), [uniform(3, 2, lo=0.2, hi=3.0)], 1e-6),
    "rsqrt": (lambda x: x.rsqrt(), [uniform(3, 2, lo=0.2, hi=3.0)], 1e-6),
    "reciprocal": (lambda x: x.reciprocal(), [uniform(3, 2, lo=0.3, hi=3.0)], 1e-6),
    "square": (lambda x: x.square(), [uniform(3, 2)], 1e-6),
    "softplus": (lambda x: x.softplus(), [uniform(3, 2, lo=-5.0, hi=5.0)], 1e-6),
    "silu": (lambda x: x.silu(), [uniform(3, 2, lo=-5.0, hi=5.0)], 1e-6),
    "gelu": (lambda x: x.gelu(), [uniform(3, 2, lo=-5.0, hi=5.0)], 1e-6),
    "gelu_slope": (lambda x: x.gelu_slope(), [uniform(3, 2, lo=-5.0, hi=5.0)], 1e-6),
    "atan2": (lambda a, b: fg.atan2(a, b), [uniform(2, 3), uniform(3, lo=0.5, hi=2.0)], 1e-6),
    # quotients kept between integers (2.06 to 2.9 in size), away from the jumps
    "fmod": (
        lambda a, b: fg.fmod(a, b),
        [np.array([[2.3, -2.5, 2.8], [-2.2, 2.6, -2.9]]), np.array([1.01, -1.005, 1.015])],
        1e-6,
    ),
    "remainder": (
        lambda a, b: a % b,
        [np.array([[2.3, -2.5, 2.8], [-2.2, 2.6, -2.9]]), np.array([1.01, -1.005, 1.015])],
        1e-6,
    ),
    "sigmoid": (lambda x: x.sigmoid(), [uniform(3, 2)], 1e-6),
    "relu": (lambda x: x.relu(), [away(3, 2)], 1e-6),
    "add": (lambda a, b: a + b, [uniform(3, 2), uniform(2)], 1e-6),
    "sub": (lambda a, b: a - b, [uniform(3, 2), uniform(3, 1)], 1e-6),
    "mul": (lambda a, b: a * b, [uniform(3, 2), uniform(2)], 1e-6),
    "div": (lambda a, b: a / b, [uniform(3, 2), away(2)], 1e-6),
    "pow": (lambda a, b: a**b + a**2.5, [positive(3, 2), uniform(3, 2)], 1e-6),
    "maximum": (lambda a, b: fg.maximum(a, b), distinct(2, 3, 2), 1e-6),
    "minimum": (lambda a, b: fg.minimum(a, b), distinct(2, 3, 2), 1e-6),
    "tanh_grad": (first_derivative(lambda x: x.tanh()), [uniform(3, 2)], 1e-6),
    "sigmoid_grad": (first_derivative(lambda x: x.sigmoid()), [uniform(3, 2)], 1e-6),
    "relu_grad": (first_derivative(lambda x: x.relu() * x), [away(3, 2)], 1e-6),
    "where": (lambda a, b: fg.where(a > b, a * 2.0, b), list(distinct(2, 3, 2)), 1e-6),
    # a float32 round trip: linear, so a coarse step is exact up to float32 rounding
    "astype": (lambda x: x.astype("float32").astype("float64") * 3.0, [uniform(3, 2)], 1e-2),
    "copy": (lambda x: x.copy() * x, [uniform(3, 2)], 1e-6),
    "sum": (lambda x: x.sum(axis=1) * x.sum(), [uniform(3, 2)], 1e-6),
    "mean": (lambda x: x.mean(axis=0, keepdims=True) * x, [uniform(3, 2)], 1e-6),
    "max": (lambda x: x.max(axis=1), [distinct(3, 4)], 1e-6),
    "min": (lambda x: x.min(axis=0), [distinct(3, 4)], 1e-6),
    "softmax": (lambda x: x.softmax(axis=0), [uniform(3, 4)], 1e-6),
    "log_softmax": (lambda x: x.log_softmax(axis=1), [uniform(3, 4)], 1e-6),
    # (cubed: the rows of a normalisation sum to 0, so its plain sum has no gradient)
    "layer_norm": (lambda x: fg.nn.functional.layer_norm(x, (4,)) ** 3, [uniform(3, 4)], 1e-6),
    "softmax_cross_entropy": (
        lambda x: fg.cross_entropy(x, fg.tensor([2, 0, 3], device=x.device)) * x,
        [uniform(3, 4)],
        1e-6,
    ),
    "matmul": (lambda a, b: a @ b, [uniform(2, 3, 4), uniform(4, 2)], 1e-6),
    "scaled_dot_product_attention": (
        lambda q, k, v: fg.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
        [uniform(2, 3, 4), uniform(2, 5, 4), uniform(2, 5, 3)],
        1e-6,
    ),
    "to": (lambda x: x.to(other_device(x)).exp().to(x.device) * x, [uniform(3, 2)], 1e-6),
    "reshape": (lambda x: x.T.reshape(6, 1) * 2.0, [uniform(3, 2)], 1e-6),
    "permute": (lambda x: x.permute(2, 0, 1).exp(), [uniform(2, 3, 2)], 1e-6),
    "broadcast_to": (lambda x: x.broadcast_to(4, 3, 2) * SCALE, [uniform(3, 1)], 1e-6),
    "getitem": (lambda x: x[1:, ::-2] * 2.0, [uniform(3, 4)], 1e-6),
    "getitem_grad": (first_derivative(lambda x: x[1:, ::2] * x[1:, ::2]), [uniform(3, 4)], 1e-6),
    "diagonal": (lambda x: x.diagonal(1) ** 2, [uniform(3, 4)], 1e-6),
    "unfold_view": (lambda x: x.unfold(1, 2, 1) ** 2, [uniform(3, 4)], 1e-6),
    "as_strided": (lambda x: x.as_strided((3, 2), (2, 1), 1) ** 2, [uniform(3, 4)], 1e-6),
    "setitem": (setitem, [uniform(3, 4), uniform(2, 2)], 1e-6),
    "concat": (lambda a, b: fg.concat([a, b * 2.0], axis=1), [uniform(2, 3), uniform(2, 1)], 1e-6),
    "gather": (lambda x: x[[2, 0, 2]] * 3.0, [uniform(3, 2)], 1e-6),
    "scatter_add": (first_derivative(lambda x: x[[2, 0, 2]] * x[[1, 1, 0]]), [uniform(3, 2)], 1e-6),
    "unfold": (lambda x: fg.avg_pool2d(x, 2, stride=1), [uniform(*IMAGE)], 1e-6),
    "fold": (
        first_derivative(lambda x: fg.avg_pool2d(x, 2, stride=1) * x[..., :3, :3]),
        [uniform(*IMAGE)],
        1e-6,
    ),
    "conv2d": (lambda x, w: fg.conv2d(x, w, padding=1), [uniform(*IMAGE), uniform(*WEIGHT)], 1e-6),
    "conv2d_input_grad": (
        first_derivative(lambda x, w: fg.conv2d(x, w, padding=1), wrt=0),
        [uniform(*IMAGE), uniform(*WEIGHT)],
        1e-6,
    ),
    "conv2d_weight_grad": (
        first_derivative(lambda x, w: fg.conv2d(x, w, padding=1), wrt=1),
        [uniform(*IMAGE), uniform(*WEIGHT)],
        1e-6,
    ),
    "max_pool2d": (lambda x: fg.max_pool2d(x, 2), [distinct(*IMAGE)], 1e-6),
    "max_pool2d_grad": (first_derivative(lambda x: fg.max_pool2d(x, 2)), [distinct(*IMAGE)], 1e-6),
}

# ops without a gradient, and how each is refused or cannot be reached
NON_DIFFERENTIABLE = {
    "equal": "bool result",
    "not_equal": "bool result",
    "less": "bool result",
    "less_equal": "bool result",
    "greater": "bool result",
    "greater_equal": "bool result",
    "pool_argmax": "int64 result",
    "argsort": "int64 result (the sorted values are a gather, which has its rows)",
    "softmax_cross_entropy_grad": "softmax_cross_entropy's first-order kernel; a recorded "
    "backward (higher order) writes the same formula with differentiable ops",
    "layer_norm_grad": "layer_norm's first-order kernel; where that backward is itself recorded "
    "(higher order), layer_norm's rule writes the same formula with differentiable ops",
    "scaled_dot_product_attention_grad": "attention's first-order kernel; a recorded backward "
    "(higher order) writes the same formulas with differentiable ops",
    "random": "random numbers: no input they depend on smoothly (the counter is an int64)",
}


def test_every_op_has_a_gradient_check_row_or_is_declared_non_differentiable():
    table = dict(_core._OP_GRADIENTS)
    assert set(table) == set(_core.OP_NAMES)
    for name, differentiable in table.items():
        if differentiable:
            assert name in ROWS, f"{name} has no gradient-check row in tests/test_op_table.py"
            assert name not in NON_DIFFERENTIABLE
        else:
            assert name in NON_DIFFERENTIABLE, f"{name} is not declared non-differentiable here"
    assert set(ROWS) <= set(table), f"rows for unknown ops: {set(ROWS) - set(table)}"
    assert set(NON_DIFFERENTIABLE) <= set(table)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_gradient_row(name):
    fn, arrays, eps = ROWS[name]
    if name == "to" and not fg.cuda.is_available():
        pytest.skip("a second device is needed to move a tensor")
    rtol, atol = (1e-4, 1e-5) if eps > 1e-6 else (1e-5, 1e-6)
    check_grad(fn, arrays, rtol=rtol, atol=atol, eps=eps)


@pytest.mark.skipif(TEST_DEVICE != "cpu", reason="on other devices some ops are compositions")
@pytest.mark.parametrize("name", sorted(ROWS))
def test_gradient_row_records_its_op(name):
    fn, arrays, _ = ROWS[name]
    if name == "to" and not fg.cuda.is_available():
        pytest.skip("a second device is needed to move a tensor")
    xs = [fg.tensor(a) for a in arrays]
    key = fg.GradKey("which ops")
    for x in xs:
        key.attach(x)
    y = fn(*xs)  # kept alive: the tape holds recorded ops only while their outputs live
    recorded = {op for op, _ in key.saved_tensors_report()}
    del y
    key.finish()
    assert name in recorded, f"the row for {name} records only {sorted(recorded)}"


def test_a_gradient_through_each_float_non_differentiable_op_is_refused():
    for name, why in NON_DIFFERENTIABLE.items():
        if not why.startswith("float"):
            continue
        x = fg.tensor([0.5, -1.5], dtype="float64")
        gm = fg.GradManager().attach(x)
        with gm:
            y = getattr(fg, name)(x) * x
            with pytest.raises(fg.GradError, match=name):
                gm.backward(y.sum())


def test_every_table_op_is_a_method_and_a_function():
    assert _core._OP_TABLE
    for family, name, method in _core._OP_TABLE:
        assert callable(getattr(fg, name)), name
        assert callable(getattr(fg.Tensor, method)), method
        assert name in fg.__all__


def test_the_stubs_are_generated_from_the_op_tables():
    stub = Path(__file__).resolve().parents[1] / "python" / "ferrograd" / "_core.pyi"
    text = stub.read_text()
    assert _stubs.render(text) == text, "run `python -m ferrograd._stubs --write`"
