"""Audit of the Python binding layer: gradient dtypes are never cast silently, in-place ops
whose operand aliases the destination differentiate correctly, bools are not ints, Python
scalars and array-likes convert exactly (or raise), and every error names the op, the
argument and the offending value.

Expected values are numpy's (computed in the test) or written out from numpy / PyTorch
semantics."""

from __future__ import annotations

import array

import ferrograd as fg
import numpy as np
import pytest

HAS_GPU = fg.cuda.is_available()


def T(a) -> fg.Tensor:
    return fg.tensor(np.asarray(a, dtype=np.float64))


def close(t, expected, rtol=1e-7, atol=1e-9):
    assert t is not None, "expected a gradient, got None"
    np.testing.assert_allclose(t.numpy(), expected, rtol=rtol, atol=atol)


def shape_in(msg: str, shape) -> bool:
    shape = tuple(shape)
    return str(list(shape)) in msg or str(shape) in msg


def raises(exc, fn, *words):
    """fn() raises exc whose message contains every word; returns the message."""
    with pytest.raises(exc) as info:
        fn()
    msg = str(info.value)
    for w in words:
        assert str(w) in msg, f"message does not mention {w!r}: {msg!r}"
    return msg


def x4():
    return T(np.arange(32.0).reshape(1, 2, 4, 4))


# ======================================================================================
# 1. gradient dtypes are never cast silently
# ======================================================================================


class HalfPrecisionGrad(fg.Function):
    """Returns a gradient of `self.dtype` whatever the input's dtype."""

    def __init__(self, dtype):
        self.dtype = dtype

    def forward(self, x):
        return x * 2.0

    def backward(self, g):
        return (g * 2.0).astype(self.dtype)


@pytest.mark.parametrize("wrong", ["float32", "int64", "bool"])
def test_function_backward_of_another_dtype_raises_dtype_error(wrong):
    x = T([1.0, 2.0])
    key = fg.GradKey()
    key.attach(x)
    y = HalfPrecisionGrad(wrong)(x)
    raises(fg.DTypeError, lambda: key.backward(y.sum()), "HalfPrecisionGrad", "float64", wrong)
    assert x.grad is None


def test_function_backward_float64_grad_for_float32_input_raises():
    x = fg.tensor(np.array([1.0, 2.0], dtype=np.float32))
    key = fg.GradKey()
    key.attach(x)
    y = HalfPrecisionGrad("float64")(x)
    raises(fg.DTypeError, lambda: key.backward(y.sum()), "HalfPrecisionGrad", "float32", "float64")


def test_function_backward_of_the_right_dtype_still_works():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x)
    with gm:
        gm.backward(HalfPrecisionGrad("float64")(x).sum())
    close(x.grad, [2.0, 2.0])


@pytest.mark.parametrize("wrong", ["float32", "int64", "bool"])
def test_registered_rule_of_another_dtype_raises_dtype_error(wrong):
    def rule(inputs, output):
        return lambda g: (g * output).astype(wrong)

    fg.register_grad_rule("exp", rule)
    try:
        x = T([0.5, 1.5])
        key = fg.GradKey()
        key.attach(x)
        y = fg.exp(x).sum()
        raises(fg.DTypeError, lambda: key.backward(y), "exp", "float64", wrong)
    finally:
        fg.unregister_grad_rule("exp")
    assert x.grad is None


def test_grad_manager_callback_of_another_dtype_raises_dtype_error():
    def to_float32(t, g):
        return g.astype("float32")

    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x, callbacks=[to_float32])
    with gm:
        y = (x * x).sum()
        raises(fg.DTypeError, lambda: gm.backward(y), "to_float32", "float64", "float32")
    assert x.grad is None


def test_grad_manager_callback_of_another_shape_raises_shape_error():
    def summed(t, g):
        return g.sum()

    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x, callbacks=summed)
    with gm:
        y = (x * x).sum()
        msg = raises(fg.ShapeError, lambda: gm.backward(y), "summed")
    assert shape_in(msg, (2,)) and shape_in(msg, ()), msg
    assert x.grad is None


def test_grad_key_callback_error_names_the_callback():
    def halve(t, g):
        return g.astype("float32")

    x = T([1.0, 2.0])
    key = fg.GradKey()
    key.attach(x, halve)
    raises(fg.DTypeError, lambda: key.backward((x * x).sum()), "halve", "float64", "float32")


def test_grad_setter_rejects_another_dtype():
    x = T([1.0, 2.0])
    g = fg.tensor(np.array([1.0, 1.0], dtype=np.float32))

    def assign():
        x.grad = g

    raises(fg.DTypeError, assign, "grad", "float64", "float32")
    assert x.grad is None


def test_grad_setter_rejects_another_shape_with_shape_error():
    x = T([1.0, 2.0])

    def assign():
        x.grad = T([1.0, 2.0, 3.0])

    msg = raises(fg.ShapeError, assign, "grad")
    assert shape_in(msg, (2,)) and shape_in(msg, (3,)), msg


@pytest.mark.skipif(not HAS_GPU, reason="needs a second device")
def test_grad_setter_rejects_another_device():
    x = T([1.0, 2.0])
    other = "cpu" if x.device != "cpu" else "cuda"

    def assign():
        x.grad = T([1.0, 1.0]).to(other)

    raises(fg.DeviceError, assign, "grad", x.device, other.split(":")[0])
    assert x.grad is None


def test_grad_setter_accepts_the_same_dtype_shape_and_device():
    x = T([1.0, 2.0])
    x.grad = T([3.0, 4.0])
    close(x.grad, [3.0, 4.0])
    x.grad = None
    assert x.grad is None


# ======================================================================================
# 2. in-place ops whose operand shares the destination's storage
# ======================================================================================


def test_imul_by_itself_on_a_tracked_tensor():
    xs = np.array([1.0, 2.0, -3.0])
    x = T(xs)
    key = fg.GradKey()
    key.attach(x)
    y = x * x
    y *= y
    close(y, xs**4)
    key.backward(y.sum())
    close(x.grad, 4 * xs**3)


def test_imul_by_itself_under_a_grad_manager():
    xs = np.array([0.5, 1.5])
    x = T(xs)
    gm = fg.GradManager().attach(x)
    with gm:
        y = x * x
        y *= y
        gm.backward(y.sum())
    close(x.grad, 4 * xs**3)


def test_idiv_by_itself_on_a_tracked_tensor():
    xs = np.array([1.0, 2.0, 3.0])
    x = T(xs)
    key = fg.GradKey()
    key.attach(x)
    y = x * x + 1.0
    y /= y
    close(y, np.ones(3))
    key.backward((y * T([1.0, 2.0, 3.0])).sum())
    close(x.grad, np.zeros(3))


def test_imul_by_a_reversed_view_of_itself():
    xs = np.array([1.0, 2.0, 3.0, 4.0])
    x = T(xs)
    key = fg.GradKey()
    key.attach(x)
    y = x * x
    y *= y[::-1]
    # y_i = x_i^2 x_{n-1-i}^2, so d(sum y)/dx_j = 2 * 2 x_j x_{n-1-j}^2
    close(y, xs**2 * xs[::-1] ** 2)
    key.backward(y.sum())
    close(x.grad, 4 * xs * xs[::-1] ** 2)


def test_imul_by_a_detached_alias_of_itself():
    xs = np.array([1.0, 2.0])
    x = T(xs)
    key = fg.GradKey()
    key.attach(x)
    y = x * x
    y *= y.detach()  # a constant equal to x^2: d(x^2 * c)/dx = 2 x c
    key.backward(y.sum())
    close(x.grad, 2 * xs * xs**2)


def test_iadd_by_itself_on_a_tracked_tensor():
    xs = np.array([1.0, 2.0])
    x = T(xs)
    key = fg.GradKey()
    key.attach(x)
    y = x * x
    y += y
    key.backward(y.sum())
    close(x.grad, 4 * xs)


# ======================================================================================
# 3. Python bools are not ints
# ======================================================================================

BOOL_KEYS = [
    True,
    False,
    (True, 0),
    (0, True),
    (Ellipsis, True),
    (slice(None), True),
    (True, slice(None), None),
    (True, True),
    (True, False),
    (0, slice(None), True),
    (None, True),
    (0, None, True),
    (True, None, 0),
    (Ellipsis, True, 0),
    (1, True, 2),
    (slice(None), 0, True),
    (True, 0, slice(None), 1),
    (0, Ellipsis, 1, True),
    (slice(1, None), False, 0),
]


@pytest.mark.parametrize("key", BOOL_KEYS, ids=repr)
def test_bool_index_behaves_as_numpy(key):
    a = np.arange(24.0).reshape(2, 3, 4)
    x = T(a)
    got = x[key]
    expected = a[key]
    assert got.shape == expected.shape, (key, got.shape, expected.shape)
    np.testing.assert_array_equal(got.numpy(), expected)


def test_numpy_bool_index_behaves_as_numpy():
    a = np.arange(6.0).reshape(2, 3)
    x = T(a)
    assert x[np.True_].shape == (1, 2, 3)
    assert x[np.False_, 0].shape == (0, 3)


def test_bool_index_shapes_spelled_out():
    x = T(np.arange(6.0).reshape(2, 3))
    assert x[True].shape == (1, 2, 3)
    assert x[False].shape == (0, 2, 3)
    assert x[True, 0].shape == (1, 3)
    assert x[..., True].shape == (2, 3, 1)


def test_bool_index_is_differentiable():
    a = np.arange(6.0).reshape(2, 3)
    x = T(a)
    key = fg.GradKey()
    key.attach(x)
    w = np.arange(1.0, 7.0).reshape(1, 2, 3)
    key.backward((x[True] * T(w)).sum())
    close(x.grad, w[0])


def test_a_float_index_names_the_value():
    x = T([1.0, 2.0])
    raises(IndexError, lambda: x[1.5], "getitem", "1.5")


def test_bool_with_an_array_index_is_numpys():
    a = np.arange(6.0).reshape(2, 3)
    x = T(a)
    np.testing.assert_array_equal(x[True, fg.tensor([0, 1])].numpy(), a[True, [0, 1]])


def test_setitem_true_writes_everything_and_false_writes_nothing():
    a = np.zeros((2, 3))
    x = T(a)
    x[True] = 5.0
    a[True] = 5.0
    np.testing.assert_array_equal(x.numpy(), a)
    x[True] = T(np.arange(6.0).reshape(1, 2, 3))
    a[True] = np.arange(6.0).reshape(1, 2, 3)
    np.testing.assert_array_equal(x.numpy(), a)
    v0 = x._version
    x[False] = -1.0
    a[False] = -1.0
    np.testing.assert_array_equal(x.numpy(), a)
    assert x._version == v0
    x[True, 0] = T([7.0, 8.0, 9.0])
    a[True, 0] = [7.0, 8.0, 9.0]
    np.testing.assert_array_equal(x.numpy(), a)


def test_setitem_false_still_checks_the_value_shape():
    x = T(np.zeros((2, 3)))
    with pytest.raises(ValueError):
        x[False] = T(np.ones(5))


def test_setitem_with_bool_on_a_tracked_tensor_is_differentiable():
    x = T([1.0, 2.0, 3.0])
    v = T([[10.0, 20.0, 30.0]])
    key = fg.GradKey()
    key.attach(x)
    key.attach(v)
    y = x * 1.0
    y[True] = v * 2.0
    key.backward((y * T([1.0, 2.0, 3.0])).sum())
    close(v.grad, [[2.0, 4.0, 6.0]])
    close(x.grad, [0.0, 0.0, 0.0])


def _x():
    return T(np.arange(6.0).reshape(2, 3))


BOOL_AS_INT = {
    "sum(axis=True)": (lambda: _x().sum(axis=True), "sum", "axis"),
    "fg.sum(axis=[0, True])": (lambda: fg.sum(_x(), axis=[0, True]), "sum", "axis"),
    "mean(axis=np.True_)": (lambda: _x().mean(axis=np.True_), "mean", "axis"),
    "softmax(True)": (lambda: _x().softmax(True), "softmax", "axis"),
    "fg.softmax(axis=True)": (lambda: fg.softmax(_x(), axis=True), "softmax", "axis"),
    "log_softmax(False)": (lambda: _x().log_softmax(False), "log_softmax", "axis"),
    "expand_dims(False)": (lambda: _x().expand_dims(False), "expand_dims", "axis"),
    "fg.expand_dims(True)": (lambda: fg.expand_dims(_x(), True), "expand_dims", "axis"),
    "squeeze(True)": (lambda: _x().squeeze(True), "squeeze", "axis"),
    "zeros(True)": (lambda: fg.zeros(True), "zeros", "shape"),
    "ones(2, True)": (lambda: fg.ones(2, True), "ones", "shape"),
    "zeros((2, True))": (lambda: fg.zeros((2, True)), "zeros", "shape"),
    "full((True,), 1.0)": (lambda: fg.full((True,), 1.0), "full", "shape"),
    "reshape(True, 6)": (lambda: _x().reshape(True, 6), "reshape", "shape"),
    "reshape((6, True))": (lambda: _x().reshape((6, True)), "reshape", "shape"),
    "fg.reshape(True, 6)": (lambda: fg.reshape(_x(), True, 6), "reshape", "shape"),
    "transpose(True, 0)": (lambda: _x().transpose(True, 0), "transpose", "axes"),
    "permute(1, True)": (lambda: _x().permute(1, True), "permute", "axes"),
    "broadcast_to(True, 2, 3)": (lambda: _x().broadcast_to(True, 2, 3), "broadcast_to", "shape"),
    "concat(axis=True)": (lambda: fg.concat([_x(), _x()], axis=True), "concat", "axis"),
    "stack(axis=False)": (lambda: fg.stack([_x(), _x()], axis=False), "stack", "axis"),
    "conv2d(stride=True)": (
        lambda: fg.conv2d(x4(), T(np.ones((1, 2, 2, 2))), stride=True),
        "conv2d",
        "stride",
    ),
    "conv2d(groups=True)": (
        lambda: fg.conv2d(x4(), T(np.ones((2, 1, 2, 2))), groups=True),
        "conv2d",
        "groups",
    ),
    "max_pool2d(True)": (lambda: fg.max_pool2d(x4(), True), "max_pool2d", "kernel_size"),
    "avg_pool2d(divisor_override=True)": (
        lambda: fg.avg_pool2d(x4(), 2, divisor_override=True),
        "avg_pool2d",
        "divisor_override",
    ),
}


@pytest.mark.parametrize("case", sorted(BOOL_AS_INT))
def test_bool_where_an_int_is_expected_raises_type_error(case):
    fn, op, name = BOOL_AS_INT[case]
    msg = raises(TypeError, fn, op, name)
    assert msg.startswith(op), msg


def test_numpy_ints_still_work_as_axes_and_sizes():
    x = _x()
    close(x.sum(axis=np.int64(1)), [3.0, 12.0])
    assert fg.zeros(np.int32(2), 3).shape == (2, 3)
    assert x.reshape(np.int64(3), 2).shape == (3, 2)
    assert x.sum(keepdims=np.True_).shape == (1, 1)


# ======================================================================================
# 4. scalars and data conversion
# ======================================================================================


def test_int_of_an_int64_tensor_is_exact():
    big = 2**62 + 1
    t = fg.tensor(big)
    assert t.dtype == fg.int64
    assert int(t) == big
    assert t.item() == big
    assert int(fg.tensor(-(2**63))) == -(2**63)
    assert float(t) == float(big)
    assert bool(fg.tensor(0)) is False and bool(t) is True
    assert int(fg.tensor([big])) == big


def test_int_of_a_float_tensor_truncates_as_python():
    assert int(T(2.7)) == 2
    assert int(T(-2.7)) == -2
    assert int(T(1e20)) == int(1e20)
    assert int(fg.tensor(True)) == 1
    with pytest.raises(ValueError):
        int(T(float("nan")))
    with pytest.raises(OverflowError):
        int(T(float("inf")))


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 2**70])
def test_tensor_of_an_int_beyond_int64_raises_overflow_error(value):
    raises(OverflowError, lambda: fg.tensor(value), "tensor", value)
    raises(OverflowError, lambda: fg.tensor([1, value]), "tensor", value)
    raises(OverflowError, lambda: fg.tensor(value, dtype="int64"), "tensor", value)


def test_tensor_of_uint64_data_beyond_int64_raises_overflow_error():
    raises(
        OverflowError,
        lambda: fg.tensor(np.array([1, 2**63], dtype=np.uint64)),
        "tensor",
        2**63,
    )
    assert fg.tensor(np.array([1, 2], dtype=np.uint64)).tolist() == [1, 2]


def test_tensor_of_a_big_int_as_float_works():
    assert fg.tensor(2**70, dtype="float64").item() == float(2**70)
    assert fg.tensor([2**63, 1], dtype="float32").dtype == fg.float32
    mixed = fg.tensor([1.5, 2**70])  # floats and a big int: float data (PyTorch: float32)
    assert mixed.dtype == fg.float32
    assert mixed.tolist() == [1.5, float(np.float32(2.0**70))]


def test_int_operand_beyond_int64_raises_overflow_error_naming_the_op():
    xi = fg.tensor([1, 2, 3])
    raises(OverflowError, lambda: xi + 2**70, "add", 2**70)
    raises(OverflowError, lambda: 2**70 * xi, "mul", 2**70)
    raises(OverflowError, lambda: fg.sub(xi, -(2**64)), "sub", -(2**64))
    raises(OverflowError, lambda: xi.fill_(2**70), "fill_", 2**70)
    raises(OverflowError, lambda: fg.full((2,), 2**70, dtype="int64"), "full", 2**70)


def test_int_operand_beyond_int64_converts_for_float_tensors():
    x = T([1.0, 2.0])
    close(x + 2**70, [1.0 + 2.0**70, 2.0 + 2.0**70])
    x.fill_(2**70)
    close(x, [2.0**70, 2.0**70])
    assert fg.full((2,), 2**70, dtype="float64").tolist() == [2.0**70, 2.0**70]


def test_int_operands_and_fill_values_are_exact():
    big = 2**62 + 1
    assert fg.full((2,), big, dtype="int64").tolist() == [big, big]
    xi = fg.tensor([0, 0])
    xi.fill_(big)
    assert xi.tolist() == [big, big]
    assert (fg.tensor([1]) + big).tolist() == [big + 1]


def test_iterating_a_0d_tensor_raises_type_error():
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        list(fg.tensor(1.0))
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(fg.tensor(1.0))


def test_iterating_yields_the_rows_as_tensors():
    a = np.arange(6.0).reshape(2, 3)
    rows = list(T(a))
    assert len(rows) == 2
    for r, e in zip(rows, a):
        assert isinstance(r, fg.Tensor)
        np.testing.assert_array_equal(r.numpy(), e)
    items = list(T([1.0, 2.0]))
    assert [i.shape for i in items] == [(), ()]
    assert list(T(np.zeros((0, 3)))) == []


def test_iteration_is_differentiable():
    x = T([1.0, 2.0, 3.0])
    key = fg.GradKey()
    key.attach(x)
    total = None
    for i, r in enumerate(x):
        term = r * float(i + 1)
        total = term if total is None else total + term
    key.backward(total)
    close(x.grad, [1.0, 2.0, 3.0])


BAD_DATA = {
    "None as float64": (lambda: fg.tensor(None, dtype="float64")),
    "None": (lambda: fg.tensor(None)),
    "str as bool": (lambda: fg.tensor("abc", dtype="bool")),
    "str": (lambda: fg.tensor("abc")),
    "bytes as int64": (lambda: fg.tensor(b"ab", dtype="int64")),
    "complex as float64": (lambda: fg.tensor(1 + 2j, dtype="float64")),
    "complex array": (lambda: fg.tensor(np.array([1 + 2j]))),
    "list with None": (lambda: fg.tensor([1.0, None], dtype="float64")),
    "object array": (lambda: fg.tensor(np.array([1, "a"], dtype=object), dtype="float64")),
    "datetime": (lambda: fg.tensor(np.array(["2020-01-01"], dtype="datetime64[D]"), dtype="int64")),
    "timedelta": (lambda: fg.tensor(np.array([1], dtype="timedelta64[s]"), dtype="int64")),
    "void": (lambda: fg.tensor(np.zeros(2, dtype="V8"), dtype="float64")),
    "unicode array": (lambda: fg.tensor(np.array(["1.5"]), dtype="float64")),
}


@pytest.mark.parametrize("case", sorted(BAD_DATA))
def test_non_numeric_data_raises_type_error(case):
    msg = raises(TypeError, BAD_DATA[case], "tensor")
    assert msg.startswith("tensor"), msg


class ArrayLike:
    """Exposes its data only through ``__array__`` (as torch tensors and pandas series do)."""

    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return self.a if dtype is None else self.a.astype(dtype)


def test_array_like_keeps_its_dtype():
    t = fg.tensor(ArrayLike(np.array([1.0, 2.0], dtype=np.float64)))
    assert t.dtype == fg.float64
    assert t.tolist() == [1.0, 2.0]
    assert fg.tensor(ArrayLike(np.array([1.0], dtype=np.float32))).dtype == fg.float32
    assert fg.tensor(ArrayLike(np.array([1], dtype=np.int32))).dtype == fg.int32
    assert fg.tensor(ArrayLike(np.array([1], dtype=np.int16))).dtype == fg.int16
    assert fg.tensor(ArrayLike(np.array([1], dtype=np.uint16))).dtype == fg.int64
    assert fg.tensor(ArrayLike(np.array([1.0]))).dtype == fg.float64


def test_buffer_protocol_keeps_its_dtype():
    assert fg.tensor(memoryview(np.array([1.0, 2.0]))).dtype == fg.float64
    t = fg.tensor(array.array("d", [1.0, 2.5]))
    assert t.dtype == fg.float64 and t.tolist() == [1.0, 2.5]
    assert fg.tensor(array.array("f", [1.0])).dtype == fg.float32
    assert fg.tensor(array.array("q", [3])).dtype == fg.int64


def test_python_floats_still_default_to_float32():
    assert fg.tensor(1.5).dtype == fg.float32
    assert fg.tensor([1.0, 2.0]).dtype == fg.float32
    assert fg.tensor(((1.0,), (2.0,))).dtype == fg.float32
    assert fg.tensor([1, 2]).dtype == fg.int64
    assert fg.tensor([True]).dtype == fg.bool_


def test_array_like_operand_keeps_its_dtype():
    x = T([1.0, 2.0])
    y = x + ArrayLike(np.array([0.1, 0.2]))
    assert y.dtype == fg.float64
    close(y, [1.1, 2.2])


# ======================================================================================
# 5. errors name the op, the argument and the value
# ======================================================================================


def test_ragged_data_operand_names_the_op_and_argument():
    x = _x()
    msg = raises(TypeError, lambda: fg.add(x, [[1, 2], [3]]), "'b'")
    assert msg.startswith("add:"), msg
    msg = raises(TypeError, lambda: x * [[1, 2], [3]], "'other'")
    assert msg.startswith("mul:"), msg


def test_non_numeric_operands_name_the_op_argument_and_value():
    x = _x()
    # an operator defers to the other operand (NotImplemented, so a user class's __radd__
    # runs), and Python's error names the operator and both types, as with PyTorch
    raises(TypeError, lambda: x + "abc", "unsupported operand", "+", "'str'")
    raises(TypeError, lambda: x * None, "unsupported operand", "*", "'NoneType'")
    msg = raises(TypeError, lambda: fg.add(x, "abc"), "'abc'")
    assert msg.startswith("add:"), msg
    msg = raises(TypeError, lambda: fg.mul(x, None), "'b'", "None")
    assert msg.startswith("mul:"), msg
    msg = raises(TypeError, lambda: fg.exp("abc"), "'x'", "'abc'")
    assert msg.startswith("exp:"), msg
    msg = raises(TypeError, lambda: fg.where(x > 1.0, x, "q"), "'b'", "'q'")
    assert msg.startswith("where:"), msg


def test_keepdims_must_be_a_bool():
    x = _x()
    with pytest.raises(TypeError) as info:
        x.sum(keepdims=1)
    assert str(info.value) == "sum: keepdims must be True or False, got 1"
    raises(TypeError, lambda: fg.mean(x, keepdims="yes"), "mean", "keepdims", "'yes'")
    raises(TypeError, lambda: x.max(keepdims=None), "max", "keepdims", "None")


ARG_ERRORS = {
    "softmax(axis=None)": (lambda: _x().softmax(axis=None), TypeError, "softmax", "axis", "None"),
    "fg.softmax(axis='a')": (
        lambda: fg.softmax(_x(), axis="a"),
        TypeError,
        "softmax",
        "axis",
        "'a'",
    ),
    "log_softmax(1.0)": (
        lambda: fg.log_softmax(_x(), 1.0),
        TypeError,
        "log_softmax",
        "axis",
        "1.0",
    ),
    "sum(axis='a')": (lambda: _x().sum(axis="a"), TypeError, "sum", "axis", "'a'"),
    "sum(axis=1.0)": (lambda: _x().sum(axis=1.0), TypeError, "sum", "axis", "1.0"),
    "avg_pool2d(divisor_override=-1)": (
        lambda: fg.avg_pool2d(x4(), 2, divisor_override=-1),
        ValueError,
        "avg_pool2d",
        "divisor_override",
        "-1",
    ),
    "avg_pool2d(divisor_override=0)": (
        lambda: fg.avg_pool2d(x4(), 2, divisor_override=0),
        ValueError,
        "avg_pool2d",
        "divisor_override",
        "0",
    ),
    "avg_pool2d(ceil_mode=1)": (
        lambda: fg.avg_pool2d(x4(), 2, ceil_mode=1),
        TypeError,
        "avg_pool2d",
        "ceil_mode",
        "1",
    ),
    "conv2d(groups=-1)": (
        lambda: fg.conv2d(x4(), T(np.ones((1, 2, 2, 2))), groups=-1),
        ValueError,
        "conv2d",
        "groups",
        "-1",
    ),
    "conv2d(groups=0)": (
        lambda: fg.conv2d(x4(), T(np.ones((1, 2, 2, 2))), groups=0),
        ValueError,
        "conv2d",
        "groups",
        "0",
    ),
    "conv2d(stride='a')": (
        lambda: fg.conv2d(x4(), T(np.ones((1, 2, 2, 2))), stride="a"),
        TypeError,
        "conv2d",
        "stride",
        "'a'",
    ),
    "conv2d(padding=-1)": (
        lambda: fg.conv2d(x4(), T(np.ones((1, 2, 2, 2))), padding=-1),
        ValueError,
        "conv2d",
        "padding",
        "-1",
    ),
    "concat(axis=1.5)": (
        lambda: fg.concat([_x(), _x()], axis=1.5),
        TypeError,
        "concat",
        "axis",
        "1.5",
    ),
    "expand_dims('a')": (lambda: _x().expand_dims("a"), TypeError, "expand_dims", "axis", "'a'"),
    "max_pool2d(kernel_size=-1)": (
        lambda: fg.max_pool2d(x4(), kernel_size=-1),
        ValueError,
        "max_pool2d",
        "kernel_size",
        "-1",
    ),
    "max_pool2d(kernel_size=(2, 'a'))": (
        lambda: fg.max_pool2d(x4(), kernel_size=(2, "a")),
        TypeError,
        "max_pool2d",
        "kernel_size",
        "'a'",
    ),
    "max_pool2d(ceil_mode='no')": (
        lambda: fg.max_pool2d(x4(), 2, ceil_mode="no"),
        TypeError,
        "max_pool2d",
        "ceil_mode",
        "'no'",
    ),
    "zeros(2.5)": (lambda: fg.zeros(2.5), TypeError, "zeros", "shape", "2.5"),
    "zeros(-1)": (lambda: fg.zeros(-1), ValueError, "zeros", "shape", "-1"),
    "full((2,), 'a')": (lambda: fg.full((2,), "a"), TypeError, "full", "value", "'a'"),
    "reshape('a')": (lambda: _x().reshape("a"), TypeError, "reshape", "shape", "'a'"),
    "broadcast_to(-2, 3)": (
        lambda: _x().broadcast_to(-2, 3),
        ValueError,
        "broadcast_to",
        "shape",
        "-2",
    ),
}


@pytest.mark.parametrize("case", sorted(ARG_ERRORS))
def test_argument_errors_name_the_op_argument_and_value(case):
    fn, exc, op, name, value = ARG_ERRORS[case]
    msg = raises(exc, fn, op, name, value)
    assert msg.startswith(op), msg


def test_valid_arguments_still_work():
    x = _x()
    assert x.softmax().shape == (2, 3)
    assert fg.softmax(x, axis=0).shape == (2, 3)
    assert x.sum(axis=1, keepdims=True).shape == (2, 1)
    assert fg.sum(x, axis=(0, 1), keepdims=False).shape == ()
    assert fg.avg_pool2d(x4(), 2, divisor_override=2).shape == (1, 2, 2, 2)
    assert fg.avg_pool2d(x4(), (2, 2), stride=2, ceil_mode=False).shape == (1, 2, 2, 2)
    assert fg.max_pool2d(x4(), kernel_size=2, ceil_mode=True).shape == (1, 2, 2, 2)
    assert fg.conv2d(x4(), T(np.ones((2, 1, 2, 2))), groups=2).shape == (1, 2, 3, 3)
    assert fg.concat([x, x], axis=1).shape == (2, 6)
    assert fg.full((2,), 1.5).tolist() == [1.5, 1.5]
    assert fg.full((2,), True, dtype="bool").tolist() == [True, True]
    assert fg.zeros().shape == ()
    assert x.expand_dims(-1).shape == (2, 3, 1)


def test_second_backward_in_one_recording_names_the_earlier_backward():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x)
    with gm:
        gm.backward((x * x).sum())
        msg = raises(fg.GradError, lambda: gm.backward((x * x).sum()), "GradManager.backward")
        assert "fg.grad" not in msg and "inside `with gm:`" not in msg, msg
    close(x.grad, [2.0, 4.0])


def test_backward_after_fg_grad_names_fg_grad():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x)
    with gm:
        y = (x * x).sum()
        g = fg.grad(y, x)
        msg = raises(fg.GradError, lambda: gm.backward(y), "fg.grad")
        assert "earlier GradManager.backward" not in msg, msg
    close(g, [2.0, 4.0])


def test_backward_outside_a_recording_says_to_record():
    x = T([1.0, 2.0])
    gm = fg.GradManager().attach(x)
    with gm:
        y = (x * x).sum()
    raises(fg.GradError, lambda: gm.backward(y), "with gm:")


def test_grad_key_arguments_name_the_argument_and_value():
    msg = raises(TypeError, lambda: fg.GradKey(name=3), "name", "3")
    assert msg.startswith("GradKey"), msg
    msg = raises(TypeError, lambda: fg.GradKey(sibling_of="k"), "sibling_of", "'k'")
    assert msg.startswith("GradKey"), msg
    key = fg.GradKey(name="outer")
    assert fg.GradKey(sibling_of=key).level == key.level
    with pytest.raises(TypeError, match="create_graph must be True or False, got 1"):
        key.grad([T(1.0)], None, [T(1.0)], 1)
    key.finish()
