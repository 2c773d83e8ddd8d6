"""Binary ops' values, dtypes and errors as PyTorch's (its type-promotion and binary-ufunc
tests): in-place augmented assignments, exact float division remainders, in-place results
that cannot be cast into the tensor, and the dtype of a number raised to a tensor power."""

from __future__ import annotations

import itertools
import operator
from typing import Any

import ferrograd as fg
import numpy as np
import pytest


def _torch() -> Any:
    return pytest.importorskip("torch")


def _np(t: Any) -> np.ndarray:
    return np.asarray(t.detach().double().numpy() if hasattr(t, "double") else t.numpy())


def _same(fg_out: Any, torch_out: Any) -> None:
    a = np.asarray(fg_out.astype("float64").numpy())
    b = torch_out.detach().double().numpy()
    np.testing.assert_array_equal(a, b)
    assert fg_out.dtype.name == str(torch_out.dtype).replace("torch.", "")


# ------------------------------------------------------------- augmented assignment


@pytest.mark.parametrize(
    ("op", "other", "dtype"),
    [
        (operator.ifloordiv, 2, "float32"),
        (operator.imod, 4, "float32"),
        (operator.ipow, 2, "float32"),
        (operator.ifloordiv, 2, "int64"),
        (operator.imod, 4, "int64"),
        (operator.ipow, 2, "int64"),
        (operator.iand, 5, "int64"),
        (operator.ior, 2, "int64"),
        (operator.ixor, 3, "int64"),
        (operator.ilshift, 1, "int64"),
        (operator.irshift, 1, "int64"),
    ],
)
def test_augmented_assignment_writes_in_place(op: Any, other: int, dtype: str) -> None:
    torch = _torch()
    results = []
    for lib in (fg, torch):
        t = lib.tensor([7, 9, -3]).to(getattr(lib, dtype))
        view = t[1:]
        assert op(t, other) is t  # ``t op= other`` keeps the object and writes into it
        results.append((t, view))
    _same(results[0][0], results[1][0])
    _same(results[0][1], results[1][1])


@pytest.mark.parametrize("op", [operator.ifloordiv, operator.imod, operator.ipow])
def test_augmented_assignment_refuses_a_float_result_in_an_int_tensor(op: Any) -> None:
    torch = _torch()
    for lib in (fg, torch):
        t = lib.tensor([7, 9])
        with pytest.raises(RuntimeError, match="can't be cast"):
            op(t, 2.5)
        assert t.tolist() == [7, 9]


def test_augmented_pow_keeps_the_gradient() -> None:
    x = fg.tensor([1.5, -2.0, 3.0], dtype="float64", requires_grad=True)
    y = x * 1
    y **= 3
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * x.detach().numpy() ** 2)


# ------------------------------------------------------------- in-place dtype rule


@pytest.mark.parametrize(
    "call",
    [
        lambda t, lib: t.pow_(2.5),
        lambda t, lib: t.clamp_(2.5),
        lambda t, lib: t.clamp_(max=2.5),
        lambda t, lib: t.lerp_(lib.tensor([1.0, 1.0]), 2.5),
        lambda t, lib: t.sqrt_(),
        lambda t, lib: t.exp_(),
        lambda t, lib: t.addcmul_(lib.tensor([1.0, 1.0]), lib.tensor([1.0, 1.0])),
        lambda t, lib: t.remainder_(2.5),
        lambda t, lib: t.floor_divide_(2.5),
    ],
)
def test_in_place_op_refuses_a_result_an_int_tensor_cannot_hold(call: Any) -> None:
    torch = _torch()
    for lib in (fg, torch):
        t = lib.tensor([7, -7], dtype=lib.int32)
        with pytest.raises(RuntimeError):
            call(t, lib)
        assert t.tolist() == [7, -7]


def test_in_place_op_still_casts_within_a_kind() -> None:
    t = fg.tensor([7, -7], dtype="int32")
    t.pow_(2)
    assert t.tolist() == [49, 49] and t.dtype == "int32"
    f = fg.tensor([1.5, 2.5], dtype="float32")
    f.clamp_(fg.tensor([2.0, 2.0], dtype="float64"))
    assert f.tolist() == [2.0, 2.5] and f.dtype == "float32"


# ------------------------------------------------------------- exact float division


def _division_ops(lib: Any) -> list:
    return [
        lib.remainder,
        lib.fmod,
        lambda a, b: a % b,
        lambda a, b: a // b,
        lambda a, b: lib.floor_divide(a, b),
        lambda a, b: lib.div(a, b, rounding_mode="floor"),
        lambda a, b: lib.div(a, b, rounding_mode="trunc"),
    ]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_float_division_remainders_match_torch_bit_for_bit(dtype: str) -> None:
    torch = _torch()
    rng = np.random.default_rng(0)
    a = rng.standard_normal(3000) * rng.choice([1.0, 1e3, 1e6], 3000)
    b = rng.standard_normal(3000) * rng.choice([0.01, 1.0, 100.0], 3000)
    a[:6] = [np.inf, -np.inf, 0.0, -0.0, 5.0, -5.0]
    b[4:6] = 0.0
    ta = torch.tensor(a).to(getattr(torch, dtype))
    tb = torch.tensor(b).to(getattr(torch, dtype))
    fa = fg.tensor(ta.double().numpy(), dtype=dtype)
    fb = fg.tensor(tb.double().numpy(), dtype=dtype)
    for f_op, t_op in zip(_division_ops(fg), _division_ops(torch)):
        want = t_op(ta, tb).double().numpy()
        got = f_op(fa, fb).astype("float64").numpy()
        np.testing.assert_array_equal(got, want)
        signed = ~np.isnan(want)  # (zeros' signs too; a NaN's sign is not specified)
        np.testing.assert_array_equal(np.signbit(got)[signed], np.signbit(want)[signed])


def test_large_dividend_remainder_against_a_number() -> None:
    torch = _torch()
    for f_op, t_op in zip(_division_ops(fg), _division_ops(torch)):
        _same(
            f_op(fg.tensor([1e9, 1e8, 3e5, -1e9]), 3.14159),
            t_op(torch.tensor([1e9, 1e8, 3e5, -1e9]), 3.14159),
        )
    _same(fg.tensor(7.5) % fg.tensor([2.0, -2.0]), torch.tensor(7.5) % torch.tensor([2.0, -2.0]))


@pytest.mark.parametrize("name", ["remainder", "fmod"])
def test_remainder_gradients_match_torch(name: str) -> None:
    torch = _torch()
    a = np.array([[5.5, -7.25, 3.0], [1e3, -2.5, 0.7]])
    b = np.array([2.0, -3.0, 0.5])
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    fa, fb = fg.tensor(a, requires_grad=True), fg.tensor(b, requires_grad=True)
    (getattr(torch, name)(ta, tb) ** 2).sum().backward()
    (getattr(fg, name)(fa, fb) ** 2).sum().backward()
    np.testing.assert_allclose(fa.grad.numpy(), ta.grad.numpy())
    np.testing.assert_allclose(fb.grad.numpy(), tb.grad.numpy())


@pytest.mark.parametrize("name", ["remainder", "fmod"])
def test_remainder_gradients_match_finite_differences(name: str) -> None:
    a = fg.tensor([[5.5, -7.25, 3.1], [10.3, -2.5, 0.7]], dtype="float64", requires_grad=True)
    b = fg.tensor([2.0, -3.0, 0.45], dtype="float64", requires_grad=True)
    assert fg.autograd.gradcheck(lambda x, y: getattr(fg, name)(x, y) * x, (a, b))


# ------------------------------------------------------------- number ** tensor


def test_pow_of_an_int_number_to_an_int_tensor_keeps_the_tensor_dtype() -> None:
    torch = _torch()
    for base in (2, -2, 2.5):
        for dtype in ("uint8", "int32", "float32"):
            _same(
                fg.pow(base, fg.tensor([3, 17]).to(getattr(fg, dtype))),
                torch.pow(base, torch.tensor([3, 17]).to(getattr(torch, dtype))),
            )
    out = fg.zeros(2, dtype="int64")
    fg.pow(2, fg.tensor([3, 17], dtype="uint8"), out=out)
    assert out.tolist() == [8, 0]


# ------------------------------------------------------------- add/sub alpha


def _alpha_cases(lib: Any) -> dict:
    b = lib.tensor([True, False])
    i = lib.tensor([1, 2], dtype=lib.int32)
    f = lib.tensor([1.0, 2.0])
    return {
        "bools alpha=0": lambda: lib.add(b, b, alpha=0),
        "bools alpha=2": lambda: lib.add(b, b, alpha=2),
        "bools alpha=True": lambda: lib.add(b, b, alpha=True),
        "bools alpha=0.5": lambda: lib.add(b, b, alpha=0.5),
        "bool + int alpha=0": lambda: lib.add(b, 1, alpha=0),
        "bool add_ alpha=0": lambda: b.clone().add_(b, alpha=0),
        "ints alpha=1.1": lambda: lib.add(i, i, alpha=1.1),
        "ints alpha=2.0": lambda: lib.add(i, i, alpha=2.0),
        "int - int alpha=1.5": lambda: lib.sub(i, i, alpha=1.5),
        "int add_ alpha=1.5": lambda: i.clone().add_(i, alpha=1.5),
        "int + number alpha=1.5": lambda: lib.add(i, 2, alpha=1.5),
        "int + float alpha=1.5": lambda: lib.add(i, f, alpha=1.5),
        "int + 1.5 alpha=2": lambda: lib.add(i, 1.5, alpha=2),
        "ints alpha=True": lambda: lib.add(i, i, alpha=True),
        "floats alpha=True": lambda: lib.add(f, f, alpha=True),
        "floats alpha=1j": lambda: lib.add(f, f, alpha=1j),
        "int method alpha=3": lambda: i.add(i, alpha=3),
        "bool - bool": lambda: lib.sub(b, b),
        "float - bool": lambda: lib.sub(f, b),
        "bool sub_": lambda: b.clone().sub_(b),
        "rsub of bool": lambda: lib.rsub(b, 1),
        "rsub alpha=2": lambda: lib.rsub(f, 1, alpha=2),
    }


@pytest.mark.parametrize("case", list(_alpha_cases(fg)))
def test_add_sub_alpha_follows_torch(case: str) -> None:
    torch = _torch()
    try:
        want = _alpha_cases(torch)[case]()
    except RuntimeError as e:
        with pytest.raises(type(e) if isinstance(e, NotImplementedError) else RuntimeError):
            _alpha_cases(fg)[case]()
        return
    _same(_alpha_cases(fg)[case](), want)


# ------------------------------------------------------------- refused promotions


def _refusal_cases(lib: Any) -> dict:
    d = lib.zeros(2, 3, dtype=lib.float64)
    f = lib.ones(2, 3)
    i = lib.ones(2, 1, dtype=lib.int32)

    def put(key: Any, value: Any) -> Any:
        x = d.clone()
        x[key] = value
        return x

    return {
        "lerp f64 f32": lambda: lib.lerp(d, f, 0.5),
        "lerp f32 f64": lambda: lib.lerp(f, d, 0.5),
        "lerp 0-d f64 weight": lambda: lib.lerp(f, f, lib.tensor(0.5, dtype=lib.float64)),
        "lerp int": lambda: lib.lerp(i, i, 0.5),
        "heaviside f32 f64": lambda: lib.heaviside(f, d),
        "heaviside int f32": lambda: lib.heaviside(i, f),
        "heaviside int int": lambda: lib.heaviside(i, i),
        "index int32 into f64": lambda: put((slice(None), [1]), i),
        "slice int32 into f64": lambda: put((slice(None), slice(1, 2)), i),
        "index f32 into f64": lambda: put([0], f[:1]),
        "mask f32 into f64": lambda: put(d == 0, f.reshape(-1)),
        "mask 0-d int into f64": lambda: put(d == 0, lib.tensor(1)),
        "index number into f64": lambda: put([0], 5),
        "index_put f32 into f64": lambda: lib.index_put(d, (lib.tensor([0]),), lib.ones(3)),
        "index_put_ f64": lambda: d.clone().index_put_((lib.tensor([0]),), lib.ones(3).double()),
    }


@pytest.mark.parametrize("case", list(_refusal_cases(fg)))
def test_promotions_torch_refuses_are_refused(case: str) -> None:
    torch = _torch()
    try:
        want = _refusal_cases(torch)[case]()
    except RuntimeError:
        with pytest.raises(RuntimeError):
            _refusal_cases(fg)[case]()
        return
    _same(_refusal_cases(fg)[case](), want)


def test_bfloat16_setitem_of_numbers() -> None:
    torch = _torch()
    results = []
    for lib in (fg, torch):
        x = lib.zeros(3, dtype=lib.bfloat16)
        x[0] = 1.0
        x[x == 0] = 5
        x[[1]] = 2.5
        results.append(x)
    _same(*results)


# ------------------------------------------------------------- out= and number calls


def _out_cases(lib: Any) -> dict:
    f = lib.tensor([2.0, 3.0])
    f64 = lib.float64

    def empty(n: Any, dtype: Any = None) -> Any:
        return lib.empty(n, dtype=dtype or lib.float32)

    return {
        "float_power out f64": lambda: lib.float_power(f, 2, out=empty(2, f64)),
        "float_power out f32": lambda: lib.float_power(f, 2, out=empty(2)),
        "xlogy out": lambda: lib.xlogy(f, f, out=empty(2)),
        "xlogy out f64": lambda: lib.xlogy(f, f, out=empty(2, f64)),
        "xlogy out int": lambda: lib.xlogy(f, f, out=empty(2, lib.int64)),
        "heaviside out": lambda: lib.heaviside(f, f, out=empty(2)),
        "heaviside out f64": lambda: lib.heaviside(f, f, out=empty(2, f64)),
        "addcdiv out f64": lambda: lib.addcdiv(f, f, f, out=empty(2, f64)),
        "addcmul out": lambda: lib.addcmul(f, f, f, out=empty(2)),
        "cat out f64": lambda: lib.cat([f, f], out=empty(4, f64)),
        "cat out f16": lambda: lib.cat([f, f], out=empty(4, lib.float16)),
        "cat out int": lambda: lib.cat([f, f], out=empty(4, lib.int64)),
        "stack out f64": lambda: lib.stack([f, f], out=empty((2, 2), f64)),
        "ldexp_": lambda: f.clone().ldexp_(lib.tensor([1, 2])),
        "nextafter_": lambda: f.clone().nextafter_(lib.tensor([3.0, 0.0])),
        "nextafter method": lambda: f.nextafter(lib.tensor([3.0, 0.0])),
        "div(1.5, 0.5)": lambda: lib.div(1.5, 0.5),
        "div(7, 2, floor)": lambda: lib.div(7, 2, rounding_mode="floor"),
        "true_divide(3, 2)": lambda: lib.true_divide(3, 2),
        "floor_divide(7, 2)": lambda: lib.floor_divide(7, 2),
        "floor_divide(7.5, 2)": lambda: lib.floor_divide(7.5, 2),
        "logspace(False, True, 3)": lambda: lib.logspace(False, True, 3),
    }


@pytest.mark.parametrize("case", list(_out_cases(fg)))
def test_out_and_number_calls_follow_torch(case: str) -> None:
    torch = _torch()
    try:
        want = _out_cases(torch)[case]()
    except (RuntimeError, TypeError) as e:
        with pytest.raises(RuntimeError if isinstance(e, RuntimeError) else TypeError):
            _out_cases(fg)[case]()
        return
    got = _out_cases(fg)[case]()
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.astype("float64").numpy(), want.double().numpy(), rtol=1e-6)
    assert got.dtype.name == str(want.dtype).replace("torch.", "")


# ------------------------------------------------------------- exception types


@pytest.mark.parametrize(
    "call",
    [
        lambda lib, i: i // lib.tensor([0, 1]),
        lambda lib, i: i % lib.tensor([0, 1]),
        lambda lib, i: lib.fmod(i, lib.tensor([0, 1])),
        lambda lib, i: lib.remainder(i, 0),
        lambda lib, i: lib.pow(i, -2),
        lambda lib, i: i**-1,
        lambda lib, i: i.pow_(-2),
    ],
)
def test_integer_arithmetic_errors_are_runtime_errors(call: Any) -> None:
    torch = _torch()
    for lib in (torch, fg):
        with pytest.raises(RuntimeError):
            call(lib, lib.tensor([1, 2]))
    with pytest.raises(ZeroDivisionError):  # (also Python's own exception for it)
        fg.tensor([1]) // 0
    with pytest.raises(ValueError):
        fg.tensor([1]) ** -1


# ------------------------------------------------------------- float_power, xlogy, addcmul


@pytest.mark.parametrize(
    ("base", "exponent"),
    [(([2, 3], "uint8"), -2), (([2, 3], "int8"), -2.8), (2, ([0, 2], "uint8"))],
)
def test_float_power_takes_a_number_as_float64(base: Any, exponent: Any) -> None:
    torch = _torch()

    def make(lib: Any, v: Any) -> Any:
        return lib.tensor(v[0], dtype=getattr(lib, v[1])) if isinstance(v, tuple) else v

    _same(
        fg.float_power(make(fg, base), make(fg, exponent)),
        torch.float_power(make(torch, base), make(torch, exponent)),
    )


def test_float_power_in_place_needs_a_float64_tensor() -> None:
    torch = _torch()
    for lib in (fg, torch):
        with pytest.raises(RuntimeError, match="operation's result requires dtype"):
            lib.tensor([2.0, 3.0]).float_power_(2)
    x = fg.tensor([2.0, 3.0], dtype="float64")
    x.float_power_(2)
    assert x.tolist() == [4.0, 9.0]


def test_xlogy_of_zero_is_zero_for_negative_other() -> None:
    torch = _torch()
    y = [-1.0, 0.0, 1.0, 2.0, float("inf"), -float("inf"), float("nan")]
    _same(fg.xlogy(fg.zeros(7), fg.tensor(y)), torch.xlogy(torch.zeros(7), torch.tensor(y)))


def test_addcmul_value_tensor() -> None:
    torch = _torch()
    for lib in (fg, torch):
        y = lib.tensor(3.0)
        assert float(y.addcmul(y, y, value=lib.tensor(2.0))) == 21.0
        with pytest.raises(TypeError):
            y.addcmul(y, y, value=lib.tensor(2.0, requires_grad=True))
        with pytest.raises(TypeError):
            lib.addcdiv(y, y, y, value=lib.tensor([2.0]))


@pytest.mark.parametrize("op", ["cat", "stack"])
def test_cat_and_stack_promote_every_dtype_of_the_sequence(op):
    # the running result was a 0-d stand-in, which ranks below the tensors as a scalar does:
    # cat([float16, float64, float32]) gave float32, [float16, float32, float16] float16
    torch = pytest.importorskip("torch")
    names = ["float16", "bfloat16", "float32", "float64", "int64", "uint8", "bool"]
    for combo in itertools.product(names, repeat=3):
        got = getattr(fg, op)([fg.ones(2, dtype=getattr(fg, d)) for d in combo])
        want = getattr(torch, op)([torch.ones(2, dtype=getattr(torch, d)) for d in combo])
        assert got.dtype.name == str(want.dtype).removeprefix("torch."), combo
