"""Forward values of ferrograd ops against numpy, dtype rules and conversions."""

from __future__ import annotations

import gc
import math

import ferrograd as fg
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

EXAMPLES = settings(max_examples=25, deadline=None)

FLOATS = [np.float32, np.float64]
NUMERIC = [np.float32, np.float64, np.int64]
ALL = [np.float32, np.float64, np.int64, np.bool_]

shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)
pairs = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=4)
seeds = st.integers(0, 2**31 - 1)


def tol(dtype):
    return (
        {"rtol": 1e-5, "atol": 1e-6}
        if np.dtype(dtype) == np.float32
        else {"rtol": 1e-12, "atol": 1e-12}
    )


def make(rng, shape, dtype, lo=-3.0, hi=3.0):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype == np.int64:
        return rng.integers(-5, 6, size=shape).astype(np.int64)
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def assert_same(t, expected, **kw):
    """t (a Tensor) has expected's shape and dtype and (close) values."""
    expected = np.asarray(expected)
    assert isinstance(t, fg.Tensor)
    assert t.shape == expected.shape, f"shape {t.shape} != {expected.shape}"
    assert t.dtype == expected.dtype, f"dtype {t.dtype} != {expected.dtype}"
    got = t.numpy()
    assert isinstance(got, np.ndarray)
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(got, expected, **(kw or tol(expected.dtype)))
    else:
        np.testing.assert_array_equal(got, expected)


# --------------------------------------------------------------------------------------
# fg.tensor dtype rules and conversions
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data,dtype",
    [
        (np.array([1.0, 2.0]), np.float64),
        (np.array([1.0, 2.0], dtype=np.float32), np.float32),
        (np.array([1.0, 2.0], dtype=np.float16), np.float16),
        ([1.0, 2.5], np.float32),
        ([[1.0], [2.5]], np.float32),
        ([1, 2.5], np.float32),
        ([1, 2, 3], np.int64),
        (np.array([1, 2], dtype=np.int32), np.int32),
        (np.array([1, 2], dtype=np.int16), np.int16),
        (np.array([1, 2], dtype=np.uint8), np.uint8),
        (np.array([1, 2], dtype=np.uint16), np.int64),
        (np.array([1, 2], dtype=np.int64), np.int64),
        ([True, False], np.bool_),
        (np.array([True, False]), np.bool_),
    ],
    ids=lambda v: getattr(v, "__name__", None) or repr(v)[:30],
)
def test_tensor_default_dtype(data, dtype):
    t = fg.tensor(data)
    assert t.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(t.numpy(), np.asarray(data).astype(dtype))
    assert t.shape == np.asarray(data).shape


def test_dtype_objects_equal_numpy_dtypes_and_carry_torch_attributes():
    assert fg.float32 == np.dtype("float32")
    assert fg.float64 == np.dtype("float64")
    assert fg.int64 == np.dtype("int64")
    assert fg.bool_ == np.dtype("bool")
    assert np.dtype("float32") == fg.float32 and fg.float32 != fg.float64
    assert fg.float32 == "float32" and fg.float32 == np.float32 and fg.float32 != None
    assert {np.dtype("int64"): 1}[fg.int64] == 1 and {fg.int64: 1}[np.dtype("int64")] == 1
    t = fg.tensor([1.0])
    assert t.dtype is fg.float32 and isinstance(t.dtype, fg.dtype)
    assert np.zeros(2, dtype=t.dtype).dtype == np.float32
    assert np.arange(3).astype(fg.int8).dtype == np.int8
    assert t.dtype.kind == "f" and t.dtype.itemsize == 4 and t.dtype.type is np.float32
    torch = pytest.importorskip("torch")
    for name in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16",
                 "int8", "uint8", "bool"):  # fmt: skip
        ours, theirs = getattr(fg, name), getattr(torch, name)
        assert ours.is_floating_point == theirs.is_floating_point, name
        assert ours.is_signed == theirs.is_signed, name
        assert ours.is_complex == theirs.is_complex, name
        assert ours.itemsize == theirs.itemsize, name
    import pickle

    assert pickle.loads(pickle.dumps(fg.bfloat16)) is fg.bfloat16


@pytest.mark.parametrize(
    "spec,expected",
    [
        (fg.float64, np.float64),
        ("float64", np.float64),
        (np.float64, np.float64),
        (fg.float32, np.float32),
        ("float32", np.float32),
        (fg.int64, np.int64),
        ("int64", np.int64),
        (fg.bool_, np.bool_),
        ("bool", np.bool_),
    ],
    ids=repr,
)
def test_tensor_dtype_argument(spec, expected):
    t = fg.tensor([0.0, 1.0, 2.0], dtype=spec)
    assert t.dtype == np.dtype(expected)
    np.testing.assert_array_equal(t.numpy(), np.array([0.0, 1.0, 2.0]).astype(expected))


def test_tensor_dtype_argument_on_numpy_and_tensor_input():
    a = np.array([1.5, -2.25])
    assert fg.tensor(a, dtype=fg.float32).dtype == fg.float32
    t = fg.tensor(a)
    t32 = fg.tensor(t, dtype="float32")
    assert t32.dtype == fg.float32 and t.dtype == fg.float64
    np.testing.assert_array_equal(t32.numpy(), a.astype(np.float32))
    assert fg.Tensor([1.0, 2.0]).dtype == fg.float32
    assert fg.tensor([1.0], device="cpu").device == "cpu"


def test_tensor_float64_keeps_precision():
    v = 1.0 + 2.0**-40  # not representable in float32
    t = fg.tensor(np.array([v]))
    assert t.numpy()[0] == v
    assert fg.tensor([v]).numpy()[0] == np.float32(v)


@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(1,), (5,), (2, 3), (2, 0, 3), (1, 2, 3, 2)], ids=str)
def test_numpy_round_trip(dtype, shape):
    rng = np.random.default_rng(0)
    a = make(rng, shape, dtype)
    t = fg.tensor(a)
    assert t.dtype == np.dtype(dtype)
    assert t.shape == shape and t.ndim == len(shape) and t.size == a.size
    back = t.numpy()
    assert back.dtype == a.dtype and back.shape == a.shape
    np.testing.assert_array_equal(back, a)
    np.testing.assert_array_equal(np.asarray(t), a)
    assert t.tolist() == a.tolist()
    # fg.tensor copies: changing the caller's array afterwards does not change the tensor
    if a.size:
        a_orig = a.copy()
        a[(0,) * a.ndim] = (
            ~a_orig[(0,) * a.ndim] if dtype is np.bool_ else a_orig[(0,) * a.ndim] + 1
        )
        np.testing.assert_array_equal(t.numpy(), a_orig)


@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
def test_round_trip_of_non_contiguous_numpy(dtype):
    rng = np.random.default_rng(1)
    a = make(rng, (4, 6), dtype)
    for view in (a.T, a[::2, ::-3], a[:, 1]):
        np.testing.assert_array_equal(fg.tensor(view).numpy(), view)


@pytest.mark.parametrize("data", [3.0, 7, True, np.float64(2.5), np.array(1.5)], ids=repr)
def test_tensor_from_scalar_is_0d(data):
    t = fg.tensor(data)
    assert t.shape == ()
    assert t.ndim == 0


def test_zero_dim_results_of_ops():
    x = fg.tensor(np.array([1.0, 2.0, 4.0]))
    s = x.sum()
    assert s.shape == () and s.ndim == 0 and s.size == 1
    assert s.item() == 7.0
    assert s.tolist() == 7.0
    assert float(s) == 7.0
    m = x @ x
    assert m.shape == () and m.item() == 21.0
    assert x[1].shape == ()


def test_item_types():
    v = fg.tensor(np.array([[2.5]])).item()
    assert type(v) is float and v == 2.5
    v = fg.tensor([2.5]).item()
    assert type(v) is float and v == 2.5
    v = fg.tensor([[7]]).item()
    assert type(v) is int and v == 7
    big = 2**53 + 1  # not exact in a float64
    v = fg.tensor([big]).item()
    assert type(v) is int and v == big
    v = fg.tensor([True]).item()
    assert type(v) is bool and v is True
    assert int(fg.tensor([-3])) == -3
    assert bool(fg.tensor([0.0])) is False


def test_item_of_many_elements_raises():
    with pytest.raises((ValueError, RuntimeError)):
        fg.tensor([1.0, 2.0]).item()
    with pytest.raises(ValueError):
        bool(fg.tensor([1.0, 2.0]))


def test_len_and_properties():
    x = fg.tensor(np.zeros((4, 2, 3)))
    assert len(x) == 4
    assert x.shape == (4, 2, 3) and isinstance(x.shape, tuple)
    assert x.ndim == 3 and x.size == 24 and x.device == fg.get_default_device()
    assert fg.tensor([1.0], device="cpu").device == "cpu"
    assert len(fg.tensor([1, 2])) == 2
    with pytest.raises(TypeError):
        len(x.sum())


@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
def test_repr_and_str(dtype):
    rng = np.random.default_rng(2)
    for shape in [(3,), (2, 3), (2, 0), (20, 20)]:
        t = fg.tensor(make(rng, shape, dtype))
        r, s = repr(t), str(t)
        assert isinstance(r, str) and r.startswith("Tensor(") and np.dtype(dtype).name in r
        assert isinstance(s, str) and s
    assert "1.5" in repr(fg.tensor([1.5, 2.0]))
    assert repr(fg.tensor([1.0]).sum())  # 0-d


# --------------------------------------------------------------------------------------
# elementwise
# --------------------------------------------------------------------------------------

UNARY = {
    "neg": (fg.neg, np.negative, NUMERIC, None),
    "abs": (fg.abs, np.abs, NUMERIC, None),
    "relu": (fg.relu, lambda a: np.maximum(a, np.zeros((), a.dtype)), NUMERIC, None),
    "exp": (fg.exp, np.exp, FLOATS, None),
    "log": (fg.log, np.log, FLOATS, (0.1, 5.0)),
    "sqrt": (fg.sqrt, np.sqrt, FLOATS, (0.0, 5.0)),
    "tanh": (fg.tanh, np.tanh, FLOATS, None),
    "sigmoid": (
        fg.sigmoid,
        lambda a: (1 / (1 + np.exp(-a))).astype(a.dtype),
        FLOATS,
        (-10.0, 10.0),
    ),
    "sin": (fg.sin, np.sin, FLOATS, None),
    "cos": (fg.cos, np.cos, FLOATS, None),
    "tan": (fg.tan, np.tan, FLOATS, (-1.4, 1.4)),
    "asin": (fg.asin, np.arcsin, FLOATS, (-1.0, 1.0)),
    "acos": (fg.acos, np.arccos, FLOATS, (-1.0, 1.0)),
    "atan": (fg.atan, np.arctan, FLOATS, (-20.0, 20.0)),
    "sinh": (fg.sinh, np.sinh, FLOATS, None),
    "cosh": (fg.cosh, np.cosh, FLOATS, None),
    "erf": (fg.erf, lambda a: _torch_ref("erf", a), FLOATS, (-4.0, 4.0)),
    "erfc": (fg.erfc, lambda a: _torch_ref("erfc", a), FLOATS, (-4.0, 8.0)),
    "expm1": (fg.expm1, np.expm1, FLOATS, None),
    "exp2": (fg.exp2, np.exp2, FLOATS, None),
    "log2": (fg.log2, np.log2, FLOATS, (0.1, 5.0)),
    "log10": (fg.log10, np.log10, FLOATS, (0.1, 5.0)),
    "rsqrt": (fg.rsqrt, lambda a: 1 / np.sqrt(a), FLOATS, (0.1, 5.0)),
    "reciprocal": (fg.reciprocal, np.reciprocal, FLOATS, (0.2, 5.0)),
    "square": (fg.square, np.square, NUMERIC, None),
    "softplus": (
        fg.softplus,
        lambda a: np.where(a > 20, a, np.log1p(np.exp(np.minimum(a, 20)))).astype(a.dtype),
        FLOATS,
        (-30.0, 30.0),
    ),
    "silu": (fg.silu, lambda a: (a / (1 + np.exp(-a))).astype(a.dtype), FLOATS, (-10.0, 10.0)),
    "floor": (fg.floor, np.floor, NUMERIC, (-5.0, 5.0)),
    "ceil": (fg.ceil, np.ceil, NUMERIC, (-5.0, 5.0)),
    "round": (fg.round, np.round, NUMERIC, (-5.0, 5.0)),
    "trunc": (fg.trunc, np.trunc, NUMERIC, (-5.0, 5.0)),
}


def _torch_ref(name, a):
    torch = pytest.importorskip("torch")
    return getattr(torch, name)(torch.from_numpy(np.ascontiguousarray(a))).numpy()


def test_round_halves_to_even_and_integer_rounding_keeps_the_dtype():
    a = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999])
    for dt in FLOATS:
        np.testing.assert_array_equal(fg.tensor(a.astype(dt)).round().numpy(), np.round(a))
    i = fg.tensor([3, -2, 7])
    for name in ("floor", "ceil", "round", "trunc"):
        out = getattr(fg, name)(i)
        assert out.dtype == fg.int64
        np.testing.assert_array_equal(out.numpy(), [3, -2, 7])


def test_atan2_matches_numpy_with_broadcasting_and_signed_zeros():
    y = np.array([[0.0, -0.0, 1.0, -1.0, 0.0]])
    x = np.array([[1.0], [-1.0], [0.0]])
    for dt in FLOATS:
        got = fg.atan2(fg.tensor(y.astype(dt)), fg.tensor(x.astype(dt))).numpy()
        np.testing.assert_allclose(got, np.arctan2(y, x).astype(dt), **tol(dt))
        assert np.array_equal(np.signbit(got), np.signbit(np.arctan2(y, x)))


UNARY_CASES = [(n, d) for n, (_, _, ds, _) in sorted(UNARY.items()) for d in ds]


@pytest.mark.parametrize("name,dtype", UNARY_CASES, ids=lambda v: getattr(v, "__name__", v))
@EXAMPLES
@given(shape=shapes, seed=seeds)
def test_unary_forward(name, dtype, shape, seed):
    f, ref, _, dom = UNARY[name]
    rng = np.random.default_rng(seed)
    a = make(rng, shape, dtype, *(dom or (-3.0, 3.0)))
    x = fg.tensor(a)
    assert_same(f(x), ref(a))
    assert_same(getattr(x, name)(), ref(a))


def test_unary_operators():
    a = np.array([[-1.5, 0.0], [2.0, -3.25]])
    x = fg.tensor(a)
    assert_same(-x, -a)
    assert_same(abs(x), np.abs(a))
    assert_same(+x, a)


def test_unary_special_values():
    a = np.array([0.0, -0.0, np.inf, -np.inf, 1e-300])
    x = fg.tensor(a)
    np.testing.assert_array_equal(fg.exp(x).numpy(), np.exp(a))
    np.testing.assert_array_equal(fg.tanh(x).numpy(), np.tanh(a))
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(
            fg.log(fg.tensor(np.array([0.0, 1.0]))).numpy(), [-np.inf, 0.0]
        )
    assert np.isnan(fg.sqrt(fg.tensor(np.array([-1.0]))).numpy()[0])
    s = fg.sigmoid(fg.tensor(np.array([-800.0, 800.0]))).numpy()
    np.testing.assert_array_equal(s, [0.0, 1.0])  # no nan from overflow


def test_float32_tanh_is_within_two_ulp_everywhere():
    # dense over the range where tanh is not yet +-1, plus the special values; the float32
    # kernel is a polynomial / exp formula of its own, so check it against float64
    a = np.concatenate(
        [
            np.linspace(-12.0, 12.0, 400_001),
            np.geomspace(1e-38, 1.0, 2_001),
            -np.geomspace(1e-38, 1.0, 2_001),
            [0.0, -0.0, np.inf, -np.inf, 1e30, -1e30, np.nan],
        ]
    ).astype(np.float32)
    got = fg.tensor(a).tanh().numpy()
    want = np.tanh(a.astype(np.float64))
    finite = ~np.isnan(a)
    ulp = np.spacing(np.abs(want[finite]).astype(np.float32)).astype(np.float64)
    err = np.abs(got[finite].astype(np.float64) - want[finite]) / ulp
    assert err.max() <= 2.0, f"max error {err.max():.2f} ulp at x={a[finite][err.argmax()]}"
    assert np.isnan(got[-1])
    assert np.array_equal(np.signbit(got[finite]), np.signbit(want[finite]))  # -0.0 stays -0.0


BINARY = {
    "add": (fg.add, np.add, lambda a, b: a + b, NUMERIC),
    "sub": (fg.sub, np.subtract, lambda a, b: a - b, NUMERIC),
    "mul": (fg.mul, np.multiply, lambda a, b: a * b, NUMERIC),
    "div": (fg.div, np.divide, lambda a, b: a / b, FLOATS),
    "pow": (fg.pow, np.power, lambda a, b: a**b, FLOATS),
    "maximum": (fg.maximum, np.maximum, lambda a, b: a.maximum(b), NUMERIC),
    "minimum": (fg.minimum, np.minimum, lambda a, b: a.minimum(b), NUMERIC),
    "mul_reversed": (lambda a, b: fg.mul(b, a), lambda a, b: b * a, lambda a, b: b * a, NUMERIC),
}
BINARY_CASES = [(n, d) for n, (_, _, _, ds) in sorted(BINARY.items()) for d in ds]


@pytest.mark.parametrize("name,dtype", BINARY_CASES, ids=lambda v: getattr(v, "__name__", v))
@EXAMPLES
@given(sh=pairs, seed=seeds)
def test_binary_forward(name, dtype, sh, seed):
    f, ref, op, _ = BINARY[name]
    sa, sb = sh.input_shapes
    rng = np.random.default_rng(seed)
    if name == "pow":
        a, b = make(rng, sa, dtype, 0.1, 3.0), make(rng, sb, dtype, -2.0, 2.0)
    elif name == "div":
        b = make(rng, sb, dtype, 0.2, 3.0) * rng.choice([-1, 1], size=sb).astype(dtype)
        a = make(rng, sa, dtype)
    else:
        a, b = make(rng, sa, dtype), make(rng, sb, dtype)
    expected = np.asarray(ref(a, b))
    assert expected.shape == sh.result_shape
    x, y = fg.tensor(a), fg.tensor(b)
    assert_same(f(x, y), expected)
    assert_same(op(x, y), expected)


COMPARE = {
    "equal": (fg.eq, np.equal, lambda a, b: a == b),
    "not_equal": (fg.not_equal, np.not_equal, lambda a, b: a != b),
    "less": (fg.less, np.less, lambda a, b: a < b),
    "less_equal": (fg.less_equal, np.less_equal, lambda a, b: a <= b),
    "greater": (fg.greater, np.greater, lambda a, b: a > b),
    "greater_equal": (fg.greater_equal, np.greater_equal, lambda a, b: a >= b),
}


@pytest.mark.parametrize("name", sorted(COMPARE))
@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
@EXAMPLES
@given(sh=pairs, seed=seeds)
def test_comparisons_return_bool(name, dtype, sh, seed):
    f, ref, op = COMPARE[name]
    sa, sb = sh.input_shapes
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        # few distinct values so that == and <= have ties to get right
        a = rng.integers(-2, 3, size=sa).astype(dtype)
        b = rng.integers(-2, 3, size=sb).astype(dtype)
    else:
        a, b = make(rng, sa, dtype), make(rng, sb, dtype)
    expected = ref(a, b)
    assert expected.dtype == np.bool_
    x, y = fg.tensor(a), fg.tensor(b)
    assert_same(f(x, y), expected)
    assert_same(op(x, y), expected)


def test_comparisons_with_python_scalars():
    a = np.array([-1.0, 0.0, 0.5, 2.0], dtype=np.float32)
    x = fg.tensor(a)
    assert_same(x > 0, a > 0)
    assert_same(x <= 0.5, a <= 0.5)
    assert_same(x == 2, a == 2)
    assert_same(x != 0.0, a != 0)
    assert_same(0 < x, 0 < a)
    i = fg.tensor(np.array([1, 5, -3]))
    assert_same(i >= 1, np.array([1, 5, -3]) >= 1)


def test_nan_comparisons():
    a = np.array([np.nan, 1.0, np.nan])
    b = np.array([np.nan, np.nan, 2.0])
    x, y = fg.tensor(a), fg.tensor(b)
    for f, ref, _ in COMPARE.values():
        assert_same(f(x, y), ref(a, b))


@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
@EXAMPLES
@given(
    sh=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=1, max_dims=3, max_side=4),
    seed=seeds,
)
def test_where_forward(dtype, sh, seed):
    sc, sa, sb = sh.input_shapes
    rng = np.random.default_rng(seed)
    c = rng.random(sc) < 0.5
    a, b = make(rng, sa, dtype), make(rng, sb, dtype)
    assert_same(fg.where(fg.tensor(c), fg.tensor(a), fg.tensor(b)), np.where(c, a, b))


def test_where_with_scalar_branches_and_comparison_condition():
    a = np.array([[-1.0, 2.0], [3.0, -4.0]])
    x = fg.tensor(a)
    assert_same(fg.where(x > 0, x, 0.0), np.where(a > 0, a, 0.0))
    assert_same(fg.where(x > 0, 1.0, x), np.where(a > 0, 1.0, a))


# --------------------------------------------------------------------------------------
# scalar mixing keeps the tensor's dtype
# --------------------------------------------------------------------------------------

SCALAR_MIX = {
    "2.0*x": (lambda x: 2.0 * x, lambda a: 2.0 * a),
    "x*2": (lambda x: x * 2, lambda a: a * 2),
    "1-x": (lambda x: 1 - x, lambda a: 1 - a),
    "x-0.5": (lambda x: x - 0.5, lambda a: a - 0.5),
    "x+1": (lambda x: x + 1, lambda a: a + 1),
    "x**2": (lambda x: x**2, lambda a: a**2),
    "x**0.5": (lambda x: abs(x) ** 0.5, lambda a: np.abs(a) ** 0.5),
    "x**-1": (lambda x: x**-1, lambda a: a**-1.0),
    "2**x": (lambda x: 2**x, lambda a: 2.0**a),
    "x/2": (lambda x: x / 2, lambda a: a / 2),
    "3/x": (lambda x: 3 / x, lambda a: 3 / a),
    "np.float64(2)*x": (lambda x: np.float64(2.0) * x, lambda a: (2.0 * a).astype(a.dtype)),
}


@pytest.mark.parametrize("name", sorted(SCALAR_MIX))
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_scalar_mixing_keeps_dtype(name, dtype):
    f, ref = SCALAR_MIX[name]
    a = np.array([[0.5, -1.25, 2.0], [3.0, -0.75, 1.5]], dtype=dtype)
    expected = np.asarray(ref(a)).astype(dtype)
    out = f(fg.tensor(a))
    assert out.dtype == np.dtype(dtype), f"{name}: {out.dtype}"
    assert_same(out, expected)


def test_scalar_mixing_int64():
    a = np.array([1, -2, 3])
    x = fg.tensor(a)
    assert_same(2 * x, 2 * a)
    assert_same(1 - x, 1 - a)
    assert_same(x + 10, a + 10)
    assert_same(x * True, a * 1)


def test_scalar_mixing_float32_does_not_upcast_large_python_floats():
    a = np.array([1.0, 2.0], dtype=np.float32)
    out = fg.tensor(a) * 0.1
    assert out.dtype == fg.float32
    np.testing.assert_array_equal(out.numpy(), a * np.float32(0.1))


# --------------------------------------------------------------------------------------
# reductions
# --------------------------------------------------------------------------------------


@st.composite
def shape_and_axis(draw):
    shape = draw(shapes)
    nd = len(shape)
    axis = draw(st.one_of(st.none(), st.integers(-nd, nd - 1), hnp.valid_tuple_axes(nd)))
    return shape, axis


REDUCE = {
    "sum": (np.sum, NUMERIC),
    "mean": (np.mean, FLOATS),
    "max": (np.max, NUMERIC),
    "min": (np.min, NUMERIC),
}
REDUCE_CASES = [(n, d) for n, (_, ds) in sorted(REDUCE.items()) for d in ds]


@pytest.mark.parametrize("name,dtype", REDUCE_CASES, ids=lambda v: getattr(v, "__name__", v))
@EXAMPLES
@given(sa=shape_and_axis(), keepdims=st.booleans(), seed=seeds)
def test_reduce_forward(name, dtype, sa, keepdims, seed):
    shape, axis = sa
    ref, _ = REDUCE[name]
    rng = np.random.default_rng(seed)
    a = make(rng, shape, dtype)
    expected = np.asarray(ref(a, axis=axis, keepdims=keepdims)).astype(dtype)
    x = fg.tensor(a)
    kw = {"rtol": 1e-5, "atol": 1e-5} if np.dtype(dtype) == np.float32 else {}
    assert_same(getattr(fg, name)(x, axis=axis, keepdims=keepdims), expected, **kw)
    assert_same(getattr(x, name)(axis=axis, keepdims=keepdims), expected, **kw)
    got = getattr(x, name)(axis, keepdims)
    if axis == () and name in ("sum", "mean"):
        # PyTorch's positional dim: an empty one reduces every axis (numpy's axis=(),
        # given as axis=, reduces none)
        expected = np.asarray(ref(a, axis=None, keepdims=keepdims)).astype(dtype)
    if name in ("max", "min") and isinstance(axis, int):
        # PyTorch's x.max(1): (values, indices)
        got, idx = got
        pick = np.argmax if name == "max" else np.argmin
        assert_same(idx, pick(a, axis=axis, keepdims=keepdims))
    assert_same(got, expected, **kw)


def test_reduce_over_empty_axis():
    a = np.zeros((0, 3))
    x = fg.tensor(a)
    assert_same(x.sum(axis=0), a.sum(axis=0))
    assert_same(x.sum(), np.float64(0.0).reshape(()))
    with pytest.raises((ValueError, RuntimeError)):
        x.max(axis=0)


def test_sum_of_many_elements():
    rng = np.random.default_rng(11)
    a = rng.uniform(0.0, 1.0, size=100_000)
    np.testing.assert_allclose(fg.tensor(a).sum().item(), a.sum(), rtol=1e-12)
    np.testing.assert_allclose(fg.tensor(a).mean().item(), a.mean(), rtol=1e-12)
    # float32 accumulation may be sequential (relative error up to ~n * eps); a wrong
    # kernel (dropped chunk, double-counted tail) is off by far more than 1e-3
    a32 = a.astype(np.float32)
    np.testing.assert_allclose(fg.tensor(a32).sum().item(), a.sum(), rtol=1e-3)
    b = a.reshape(100, 1000)
    np.testing.assert_allclose(fg.tensor(b).sum(axis=1).numpy(), b.sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(fg.tensor(b).sum(axis=0).numpy(), b.sum(axis=0), rtol=1e-12)
    # rows of a large buffer are reduced in parallel: every row, every kind, odd row length
    c = rng.normal(size=(701, 1003))
    for name in ("sum", "mean", "max", "min"):
        got = getattr(fg.tensor(c), name)(axis=1).numpy()
        np.testing.assert_allclose(got, getattr(c, name)(axis=1), rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------
# softmax, log_softmax, cross_entropy
# --------------------------------------------------------------------------------------


def np_log_softmax(a, axis):
    m = a.max(axis=axis, keepdims=True)
    return a - m - np.log(np.exp(a - m).sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@EXAMPLES
@given(shape=shapes, data=st.data(), seed=seeds)
def test_softmax_forward(dtype, shape, data, seed):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(seed)
    a = make(rng, shape, dtype, -5.0, 5.0)
    ls = np_log_softmax(a.astype(np.float64), axis)
    x = fg.tensor(a)
    assert_same(x.softmax(axis), np.exp(ls).astype(dtype))
    assert_same(fg.softmax(x, axis=axis), np.exp(ls).astype(dtype))
    assert_same(x.log_softmax(axis), ls.astype(dtype))
    assert_same(fg.log_softmax(x, axis=axis), ls.astype(dtype))


def test_softmax_is_stable_for_large_logits():
    a = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1001.0, -999.0]])
    x = fg.tensor(a)
    assert_same(x.softmax(), np.exp(np_log_softmax(a, -1)))
    assert_same(x.log_softmax(), np_log_softmax(a, -1))
    assert_same(fg.softmax(x.astype(fg.float32)), np.exp(np_log_softmax(a, -1)).astype(np.float32))


@pytest.mark.parametrize("cols", [7, 8, 37, 64, 515])
def test_float32_softmax_and_cross_entropy_rows_against_float64(cols):
    # rows long enough for the vector kernels (and their tails), with a NaN in the middle of
    # one row, -inf entries, and logits far below the row's maximum (exp underflows to 0)
    rng = np.random.default_rng(cols)
    a = rng.uniform(-30, 30, size=(6, cols))
    a[1, cols // 2] = np.nan
    a[2, ::3] = -np.inf
    a[3, 1:] = -200.0
    a[4, :] = -np.inf
    a[4, cols - 1] = 5.0
    ls = np_log_softmax(a, -1)
    x = fg.tensor(a.astype(np.float32))
    np.testing.assert_allclose(x.softmax(-1).numpy(), np.exp(ls), rtol=2e-6, atol=1e-7)
    got = x.log_softmax(-1).numpy()
    finite = np.isfinite(ls)
    np.testing.assert_allclose(got[finite], ls[finite], rtol=2e-6, atol=2e-5)
    assert np.isnan(got[1]).all() and np.isnan(x.softmax(-1).numpy()[1]).all()
    assert (got[~finite & ~np.isnan(ls)] == -np.inf).all()
    # cross-entropy of the rows without NaN, and its gradient against float64
    keep = [0, 2, 3, 4, 5]
    labels = np.array([r % cols for r in range(len(keep))])
    labels[1] = 1  # a finite logit of row 2 (every third is -inf)
    labels[3] = cols - 1  # row 4's only finite logit
    xs = fg.tensor(a[keep].astype(np.float32))
    gm = fg.GradManager().attach([xs])
    with gm:
        loss = fg.cross_entropy(xs, fg.tensor(labels))
        gm.backward(loss)
    lk = ls[keep]
    ref = -lk[np.arange(len(keep)), labels].mean()
    np.testing.assert_allclose(float(loss.numpy()), ref, rtol=2e-6)
    onehot = np.eye(cols)[labels]
    np.testing.assert_allclose(
        xs.grad.numpy(), (np.exp(lk) - onehot) / len(keep), rtol=2e-5, atol=1e-8
    )


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@EXAMPLES
@given(n=st.integers(1, 6), c=st.integers(1, 6), seed=seeds)
def test_cross_entropy_forward(dtype, n, c, seed):
    rng = np.random.default_rng(seed)
    logits = make(rng, (n, c), dtype, -4.0, 4.0)
    labels = rng.integers(0, c, size=n)
    ls = np_log_softmax(logits.astype(np.float64), 1)
    expected = np.asarray(-ls[np.arange(n), labels].mean(), dtype=dtype)
    out = fg.cross_entropy(fg.tensor(logits), fg.tensor(labels))
    assert_same(out, expected)


def test_cross_entropy_classes_on_axis_1_of_nd_logits():
    rng = np.random.default_rng(12)
    logits = rng.normal(size=(2, 3, 4))
    labels = rng.integers(0, 3, size=(2, 4))
    ls = np_log_softmax(logits, 1)
    expected = -np.take_along_axis(ls, labels[:, None, :], 1).mean()
    out = fg.cross_entropy(fg.tensor(logits), fg.tensor(labels))
    assert_same(out, np.asarray(expected))


def test_cross_entropy_large_logits():
    logits = np.array([[1000.0, 0.0], [0.0, 1000.0]])
    out = fg.cross_entropy(fg.tensor(logits), fg.tensor([1, 1]))
    assert math.isfinite(out.item())
    np.testing.assert_allclose(out.item(), 500.0, rtol=1e-12)


# --------------------------------------------------------------------------------------
# matmul
# --------------------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((3,), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3,)),
    ((2, 3), (3, 4)),
    ((2, 2, 3), (2, 3, 4)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((3,), (2, 3, 4)),
    ((2, 3, 4), (4,)),
    ((2, 0), (0, 3)),
    ((0, 3), (3, 2)),
    ((17, 33), (33, 9)),
]


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=str)
def test_matmul_forward(sa, sb, dtype):
    rng = np.random.default_rng(3)
    a, b = make(rng, sa, dtype), make(rng, sb, dtype)
    expected = np.matmul(a, b)
    x, y = fg.tensor(a), fg.tensor(b)
    kw = {"rtol": 1e-5, "atol": 1e-4} if np.dtype(dtype) == np.float32 else {}
    assert_same(x @ y, expected, **kw)
    assert_same(fg.matmul(x, y), expected, **kw)
    assert_same(x.matmul(y), expected, **kw)


@EXAMPLES
@given(
    sh=hnp.mutually_broadcastable_shapes(signature=np.matmul.signature, max_dims=2, max_side=4),
    seed=seeds,
)
def test_matmul_forward_signature(sh, seed):
    sa, sb = sh.input_shapes
    rng = np.random.default_rng(seed)
    a, b = make(rng, sa, np.float64), make(rng, sb, np.float64)
    assert_same(fg.tensor(a) @ fg.tensor(b), np.matmul(a, b))


def test_matmul_of_views():
    rng = np.random.default_rng(4)
    a = make(rng, (4, 6), np.float64)
    x = fg.tensor(a)
    assert_same(x.T @ x, a.T @ a)
    assert_same(x[::2, ::-1] @ x[1::2].T, a[::2, ::-1] @ a[1::2].T)
    assert_same(fg.broadcast_to(x[0], (3, 6)) @ x.T, np.broadcast_to(a[0], (3, 6)) @ a.T)


# --------------------------------------------------------------------------------------
# movement ops and views
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
def test_reshape_values(dtype):
    rng = np.random.default_rng(5)
    a = make(rng, (2, 3, 4), dtype)
    x = fg.tensor(a)
    for shape in [(24,), (4, 6), (2, 12), (3, -1), (-1, 2, 2), (1, 24, 1)]:
        assert_same(x.reshape(*shape), a.reshape(shape))
        assert_same(x.reshape(shape), a.reshape(shape))
        assert_same(fg.reshape(x, *shape), a.reshape(shape))
    assert_same(x.flatten(), a.flatten())
    # reshape of non-contiguous views must follow logical (row-major) order
    assert_same(x.transpose(2, 0, 1).reshape(4, 6), a.transpose(2, 0, 1).reshape(4, 6))
    assert_same(x[:, ::-1, 1:3].reshape(-1), a[:, ::-1, 1:3].reshape(-1))
    assert_same(x.T.flatten(), a.T.flatten())
    assert_same(
        fg.broadcast_to(x[:, :1], (2, 3, 4)).reshape(6, 4),
        np.broadcast_to(a[:, :1], (2, 3, 4)).reshape(6, 4),
    )


@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
def test_transpose_permute_values(dtype):
    rng = np.random.default_rng(6)
    a = make(rng, (2, 3, 4), dtype)
    x = fg.tensor(a)
    assert_same(x.T, a.T)
    assert_same(x.transpose(), a.transpose())
    assert_same(fg.transpose(x), a.transpose())
    assert_same(x.transpose(0, 2), np.swapaxes(a, 0, 2))
    assert_same(x.transpose(-1, 1), np.swapaxes(a, -1, 1))
    for perm in [(0, 1, 2), (1, 2, 0), (2, 0, 1), (0, 2, 1), (-1, 0, 1)]:
        assert_same(x.permute(*perm), a.transpose(perm))
        assert_same(x.transpose(*perm), a.transpose(perm))
        assert_same(fg.permute(x, *perm), a.transpose(perm))
    m = fg.tensor(a[0])
    assert_same(m.T, a[0].T)
    assert_same(m.transpose(1, 0), a[0].T)
    assert_same(m.T.T, a[0])


@EXAMPLES
@given(shape=shapes, data=st.data(), seed=seeds)
def test_permute_random(shape, data, seed):
    perm = data.draw(st.permutations(range(len(shape))))
    a = make(np.random.default_rng(seed), shape, np.float64)
    assert_same(fg.tensor(a).permute(*perm), a.transpose(perm))


@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
def test_broadcast_expand_squeeze_values(dtype):
    rng = np.random.default_rng(7)
    a = make(rng, (3, 1), dtype)
    x = fg.tensor(a)
    assert_same(x.broadcast_to(2, 3, 4), np.broadcast_to(a, (2, 3, 4)))
    assert_same(fg.broadcast_to(x, (3, 5)), np.broadcast_to(a, (3, 5)))
    assert_same(x.broadcast_to(3, 1), a)
    for ax in [0, 1, 2, -1, -3]:
        assert_same(x.expand_dims(ax), np.expand_dims(a, ax))
        assert_same(fg.expand_dims(x, ax), np.expand_dims(a, ax))
    b = make(rng, (1, 3, 1, 2), dtype)
    y = fg.tensor(b)
    assert_same(y.squeeze(), np.squeeze(b))
    assert_same(y.squeeze(0), np.squeeze(b, 0))
    assert_same(y.squeeze(-2), np.squeeze(b, -2))
    assert_same(y.squeeze((0, 2)), np.squeeze(b, (0, 2)))
    assert_same(fg.squeeze(y, axis=2), np.squeeze(b, 2))
    # broadcast of a transposed view
    c = make(rng, (2, 3), dtype)
    assert_same(fg.tensor(c).T.broadcast_to(4, 3, 2), np.broadcast_to(c.T, (4, 3, 2)))
    assert_same(x.T.broadcast_to(2, 1, 3), np.broadcast_to(a.T, (2, 1, 3)))


@pytest.fixture
def no_gc():
    """Memory counters are global: collect garbage first and keep the collector from
    freeing unrelated tensors in the middle of a measurement."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_views_share_storage(no_gc):
    x = fg.tensor(np.arange(24.0).reshape(2, 3, 4))
    before = fg.memory_stats()
    views = [
        x.reshape(6, 4),
        x.transpose(),
        x.permute(1, 0, 2),
        x[:, ::2],
        x[::-1, 1],
        x[None],
        x[..., 1],
        x.expand_dims(0),
        x.squeeze(),
        fg.broadcast_to(x, (5, 2, 3, 4)),
        x.detach(),
    ]
    after = fg.memory_stats()
    assert after["live_buffers"] == before["live_buffers"]
    assert after["live_bytes"] == before["live_bytes"]
    c = x.copy()
    assert fg.memory_stats()["live_buffers"] == before["live_buffers"] + 1
    np.testing.assert_array_equal(c.numpy(), x.numpy())
    del views, c


def test_memory_stats_track_allocation_and_release(no_gc):
    fg.reset_peak_memory_stats()
    s0 = fg.memory_stats()
    assert set(s0) >= {"live_bytes", "peak_bytes", "live_buffers", "live_tensors"}
    t = fg.zeros(1000, dtype=fg.float64)
    s1 = fg.memory_stats()
    assert s1["live_bytes"] - s0["live_bytes"] == 8000
    assert s1["live_buffers"] == s0["live_buffers"] + 1
    assert s1["peak_bytes"] >= s1["live_bytes"]
    del t
    s2 = fg.memory_stats()
    assert s2["live_bytes"] == s0["live_bytes"]
    assert s2["live_buffers"] == s0["live_buffers"]
    assert s2["peak_bytes"] >= s0["live_bytes"] + 8000
    fg.reset_peak_memory_stats()
    assert fg.memory_stats()["peak_bytes"] == s2["live_bytes"]


# --------------------------------------------------------------------------------------
# indexing
# --------------------------------------------------------------------------------------

INDEXES = [
    1,
    -1,
    slice(1, 3),
    slice(None, None, 2),
    slice(None, None, -1),
    (slice(3, 0, -2), slice(None, None, -1)),
    (slice(1, None), slice(None, None, 2), -1),
    (Ellipsis, 0),
    (0, Ellipsis, slice(1, None)),
    None,
    (slice(None), None, 2),
    (1, 2, 0),
    (slice(2, 2),),
    (slice(-100, 100),),
]


@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("idx", INDEXES, ids=repr)
def test_basic_indexing_values(idx, dtype):
    a = make(np.random.default_rng(8), (4, 5, 3), dtype)
    assert_same(fg.tensor(a)[idx], a[idx])


@pytest.mark.parametrize(
    "make_idx,np_idx",
    [
        (lambda: [0, 2], [0, 2]),
        (lambda: [3, 0, 3, 3], [3, 0, 3, 3]),
        (lambda: [-1, 0], [-1, 0]),
        (lambda: fg.tensor([0, 2]), [0, 2]),
        (lambda: np.array([2, 1]), [2, 1]),
        (lambda: (slice(None), [4, 0, 1, 4]), (slice(None), [4, 0, 1, 4])),
        (
            lambda: (slice(None, None, -1), slice(None), [2, 0]),
            (slice(None, None, -1), slice(None), [2, 0]),
        ),
        (lambda: (1, [0, 2, 2]), (1, [0, 2, 2])),
        (lambda: (Ellipsis, [1]), (Ellipsis, [1])),
    ],
    ids=lambda v: repr(v) if not callable(v) else "",
)
@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
def test_integer_array_indexing_values(make_idx, np_idx, dtype):
    a = make(np.random.default_rng(9), (4, 5, 3), dtype)
    assert_same(fg.tensor(a)[make_idx()], a[np_idx])


@EXAMPLES
@given(
    data=st.data(),
    shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5),
    seed=seeds,
)
def test_basic_indices_random(data, shape, seed):
    idx = data.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    a = make(np.random.default_rng(seed), shape, np.float64)
    x = fg.tensor(a)
    assert_same(x[idx], a[idx])
    # chained indexing of a view
    if a[idx].ndim >= 1 and a[idx].shape[0] > 0:
        assert_same(x[idx][::-1], a[idx][::-1])


# --------------------------------------------------------------------------------------
# concat / stack / constructors / casts
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
def test_concat_stack_values(dtype):
    rng = np.random.default_rng(10)
    a, b, c = make(rng, (2, 3), dtype), make(rng, (1, 3), dtype), make(rng, (2, 2), dtype)
    x, y, z = fg.tensor(a), fg.tensor(b), fg.tensor(c)
    assert_same(fg.concat([x, y]), np.concatenate([a, b]))
    assert_same(fg.concat((x, y, x), axis=0), np.concatenate([a, b, a]))
    assert_same(fg.concat([x, z], axis=1), np.concatenate([a, c], axis=1))
    assert_same(fg.concat([x, z], axis=-1), np.concatenate([a, c], axis=-1))
    assert_same(fg.concat([x]), a)
    assert_same(fg.concat([x.T, z.T]), np.concatenate([a.T, c.T]))
    for ax in [0, 1, 2, -1, -3]:
        assert_same(fg.stack([x, x[::-1]], axis=ax), np.stack([a, a[::-1]], axis=ax))
    assert_same(fg.stack([x, x, x]), np.stack([a, a, a]))


@pytest.mark.parametrize("dtype", [None, fg.float32, fg.float64, fg.int64, fg.bool_], ids=repr)
def test_constructors(dtype):
    exp_dtype = np.dtype(dtype) if dtype is not None else np.dtype(np.float32)
    assert_same(fg.zeros(2, 3, dtype=dtype), np.zeros((2, 3), exp_dtype))
    assert_same(fg.zeros((2, 3), dtype=dtype), np.zeros((2, 3), exp_dtype))
    assert_same(fg.ones(4, dtype=dtype), np.ones(4, exp_dtype))
    assert_same(fg.ones((1, 2, 1), dtype=dtype), np.ones((1, 2, 1), exp_dtype))
    # an int fill with no dtype gives int64, as torch.full
    full_dtype = exp_dtype if dtype is not None else np.dtype(np.int64)
    assert_same(fg.full((2, 2), 1, dtype=dtype), np.full((2, 2), 1, full_dtype))
    base = fg.tensor(np.arange(6).reshape(2, 3)).astype(exp_dtype)
    assert_same(fg.zeros_like(base), np.zeros((2, 3), exp_dtype))
    assert_same(fg.ones_like(base), np.ones((2, 3), exp_dtype))


def test_full_values():
    assert_same(fg.full((2, 3), 7.5), np.full((2, 3), 7.5, np.float32))
    assert_same(fg.full((2,), -3, dtype=fg.int64), np.array([-3, -3]))
    assert_same(fg.full((3,), 0.1, dtype=fg.float64), np.full(3, 0.1))


CASTS = [(s, d) for s in ALL for d in ALL]


@pytest.mark.parametrize("src,dst", CASTS, ids=lambda d: np.dtype(d).name)
def test_astype(src, dst):
    a = np.array([[0, 1, -2], [3, 0, 5]]).astype(src)
    if np.dtype(src).kind == "f":
        a = np.array([[0.0, 1.75, -2.5], [3.25, -0.0, 5.9]], dtype=src)
    out = fg.tensor(a).astype(dst)
    assert_same(out, a.astype(dst))
    assert_same(fg.tensor(a).astype(np.dtype(dst).name), a.astype(dst))


def test_detach_and_copy_values():
    a = np.array([1.0, 2.0, 3.0])
    x = fg.tensor(a)
    assert_same(x.detach(), a)
    assert_same(x.copy(), a)
    assert_same(x[::-1].copy(), a[::-1])


def test_numpy_scalars_and_arrays_interoperate():
    a = np.array([1.0, 2.0])
    x = fg.tensor(a)
    out = np.float64(3.0) * x
    assert isinstance(out, fg.Tensor)
    assert_same(out, 3.0 * a)
    out = x + np.array([10.0, 20.0])
    assert isinstance(out, fg.Tensor)
    assert_same(out, a + [10.0, 20.0])


@pytest.mark.parametrize(
    "shape,axes",
    [
        ((256, 1024), (0,)),
        ((3, 300, 700), (1,)),
        ((40, 30, 700), (0, 1)),
        ((5, 7, 9), (0,)),
        ((2, 3, 4, 5), (1, 2)),
        ((4, 1, 6), (1,)),
    ],
    ids=str,
)
@pytest.mark.parametrize("kind", ["sum", "mean", "max", "min"])
def test_reductions_over_leading_and_middle_axes_match_numpy(shape, axes, kind):
    # contiguous input reduced over a block of axes that leaves the innermost one (the
    # column-sum path, parallel for large inputs), with NaNs propagated by max/min
    x = np.random.default_rng(0).standard_normal(shape)
    x.flat[7] = np.nan if kind in ("max", "min") else x.flat[7]
    for dtype in (np.float64, np.float32):
        a = x.astype(dtype)
        got = getattr(fg.tensor(a), kind)(axis=axes).numpy()
        want = getattr(np, kind)(a, axis=axes)
        # float32 sums carry rounding of the order of eps * (the sum of magnitudes): the
        # devices add in different orders
        count = int(np.prod([shape[i] for i in axes]))
        atol = 1e-6 * count if dtype == np.float32 and kind == "sum" else tol(dtype)["atol"]
        np.testing.assert_allclose(got, want, rtol=tol(dtype)["rtol"], atol=atol)
    if kind != "mean":
        i = np.nan_to_num(x * 100).astype(np.int64)
        got = getattr(fg.tensor(i), kind)(axis=axes).numpy()
        np.testing.assert_array_equal(got, getattr(np, kind)(i, axis=axes))


@pytest.mark.parametrize(
    "shape,axes",
    [
        ((64, 16, 28, 28), (0, 2)),
        ((64, 16, 28, 28), (1, 3)),
        ((64, 16, 28, 28), (0, 2, 3)),
        ((8, 9, 10, 11, 12), (0, 2, 4)),
        ((8, 9, 10, 11, 12), (1, 3)),
        ((8, 9, 10, 11, 12), (0, 1, 3, 4)),
        ((3, 4, 5, 6), (0, 3)),
    ],
    ids=str,
)
@pytest.mark.parametrize("kind", ["sum", "mean", "max", "min"])
def test_reductions_over_separate_blocks_of_axes_match_numpy(shape, axes, kind):
    # reduced axes with kept axes between them (NCHW over N and H): reduced one block at a
    # time, each pass parallel for large inputs; NaNs propagate through every pass, and a
    # permuted (non-contiguous) view reduces the same
    x = np.random.default_rng(1).standard_normal(shape)
    if kind in ("max", "min"):
        x.flat[x.size // 3] = np.nan
    count = int(np.prod([shape[i] for i in axes]))
    for dtype in (np.float64, np.float32):
        a = x.astype(dtype)
        want = getattr(np, kind)(a.astype(np.float64), axis=axes)
        atol = 2e-6 * count**0.5 * 4 if dtype == np.float32 else tol(dtype)["atol"]
        got = getattr(fg.tensor(a), kind)(axis=axes).numpy()
        np.testing.assert_allclose(got, want, rtol=tol(dtype)["rtol"], atol=atol)
    perm = tuple(reversed(range(len(shape))))
    t = fg.tensor(x).permute(*perm)
    paxes = tuple(sorted(perm.index(a) for a in axes))
    want = getattr(np, kind)(x.transpose(perm), axis=paxes)
    np.testing.assert_allclose(getattr(t, kind)(axis=paxes).numpy(), want, rtol=1e-12, atol=1e-12)
    if kind != "mean":
        i = np.nan_to_num(x * 100).astype(np.int64)
        got = getattr(fg.tensor(i), kind)(axis=axes).numpy()
        np.testing.assert_array_equal(got, getattr(np, kind)(i, axis=axes))


def test_take_along_axis_index_select_and_scatter_add_match_numpy():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4, 5))
    idx = rng.integers(-4, 4, (3, 2, 5))
    got = fg.take_along_axis(fg.tensor(x), fg.tensor(idx), 1).numpy()
    np.testing.assert_array_equal(got, np.take_along_axis(x, idx % 4, 1))
    sel = np.array([2, 0, 2])
    got = fg.index_select(fg.tensor(x), 2, fg.tensor(sel)).numpy()
    np.testing.assert_array_equal(got, x[:, :, sel])
    src = rng.standard_normal((3, 2, 5))
    want = np.zeros((3, 4, 5))
    np.add.at(want, (np.arange(3)[:, None, None], idx % 4, np.arange(5)[None, None, :]), src)
    got = fg._core._scatter_add(fg.tensor(src), fg.tensor(idx), 1, (3, 4, 5)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    with pytest.raises(IndexError, match="take_along_axis: index 4 is out of bounds"):
        fg.take_along_axis(fg.tensor(x), fg.tensor(np.full((3, 1, 5), 4)), 1)
    with pytest.raises(fg.ShapeError, match="scatter_add"):
        fg._core._scatter_add(fg.tensor(src), fg.tensor(idx[:, :1]), 1, (3, 4, 5))


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize(
    "shapes", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (2, 4, 5))], ids=str
)
def test_matmul_transpose_a_and_b_are_views_with_the_product_of_the_transposes(ta, tb, shapes):
    rng = np.random.default_rng(1)
    sa, sb = shapes
    # the operands as stored: transposed on their last two axes where the flag says so
    a = rng.standard_normal(sa[:-2] + sa[-2:][::-1] if ta and len(sa) > 1 else sa)
    b = rng.standard_normal(sb[:-2] + sb[-2:][::-1] if tb and len(sb) > 1 else sb)
    ra = np.swapaxes(a, -1, -2) if ta and a.ndim > 1 else a
    rb = np.swapaxes(b, -1, -2) if tb and b.ndim > 1 else b
    want = ra @ rb
    x, y = fg.tensor(a), fg.tensor(b)
    np.testing.assert_allclose(
        fg.matmul(x, y, transpose_a=ta, transpose_b=tb).numpy(), want, rtol=1e-12
    )
    np.testing.assert_allclose(
        x.matmul(y, transpose_a=ta, transpose_b=tb).numpy(), want, rtol=1e-12
    )
    key = fg.GradKey()
    key.attach(x)
    key.attach(y)
    key.backward(fg.matmul(x, y, transpose_a=ta, transpose_b=tb).sum())
    ga = np.ones(want.shape) @ np.swapaxes(rb, -1, -2) if rb.ndim > 1 else None
    if ga is not None and ra.ndim > 1:
        ga = ga.reshape((-1,) + ra.shape[-2:]).sum(0) if ga.ndim > ra.ndim else ga
        ga = np.swapaxes(ga, -1, -2) if ta else ga
        np.testing.assert_allclose(x.grad.numpy(), ga, rtol=1e-12)
    assert x.grad.shape == x.shape and y.grad.shape == y.shape


def test_float_only_ops_take_integer_and_bool_inputs_as_float32():
    i = np.array([0, 1, 2])
    for name, ref in (("exp", np.exp), ("sin", np.sin), ("sqrt", np.sqrt), ("erf", None)):
        out = getattr(fg, name)(fg.tensor(i))
        assert out.dtype == fg.float32
        if ref is not None:
            np.testing.assert_allclose(out.numpy(), ref(i.astype(np.float32)), rtol=1e-6)
    assert fg.tensor([True, False]).exp().dtype == fg.float32
    np.testing.assert_allclose(
        fg.atan2(fg.tensor([1, 0]), fg.tensor([1, 1])).numpy(), [np.pi / 4, 0]
    )
    # ops with an integer kernel keep int64
    assert fg.tensor([-1, 2]).abs().dtype == fg.int64


def test_gradients_through_promotion_come_back_in_each_inputs_dtype():
    w = fg.tensor(np.array([1.0, 2.0], dtype=np.float32))
    x = fg.tensor(np.array([0.5, 0.25]))  # float64
    gm = fg.GradManager().attach([w, x])
    with gm:
        y = w * x + w
        assert y.dtype == fg.float64
        gm.backward(y.sum())
    assert w.grad.dtype == fg.float32 and x.grad.dtype == fg.float64
    np.testing.assert_allclose(w.grad.numpy(), [1.5, 1.25])
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 2.0])


@pytest.mark.parametrize("cols", [1, 255, 1023, 1024, 1025, 3 * 1024 + 7])
def test_row_reductions_of_every_width_match_numpy(cols):
    # widths below, at and past the ones a thread's unrolled loop covers, on the test device
    r = np.random.default_rng(cols)
    a = r.normal(size=(5, cols))
    a[1, cols // 2] = np.inf
    a[2, cols - 1] = -np.inf
    a[3, 0] = np.nan
    t = fg.tensor(a)
    np.testing.assert_allclose(t.sum(axis=1).numpy()[[0, 4]], a.sum(axis=1)[[0, 4]], rtol=1e-12)
    np.testing.assert_array_equal(t.max(axis=1).numpy(), a.max(axis=1))
    np.testing.assert_array_equal(t.min(axis=1).numpy(), a.min(axis=1))
    f = fg.tensor(a[[0, 4]].astype(np.float32))
    np.testing.assert_allclose(f.sum(axis=1).numpy(), a[[0, 4]].sum(axis=1), rtol=1e-5)
