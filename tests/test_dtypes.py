"""The storage dtypes float16, bfloat16, int32, int8 and uint8: conversions against numpy,
arithmetic that rounds once per op, PyTorch's type promotion, in-place rules, gradients in the
parameter's dtype, numpy interchange and the dtype shorthands."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

NARROW = ["float16", "bfloat16", "int32", "int8", "uint8"]
ALL = ["float32", "float64", "int64", "bool", *NARROW]


def _bf16_round(a: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (nearest, ties to even), as float32."""
    bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    out = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(a), np.float32(np.nan), out)


def _as_f32(t: fg.Tensor) -> np.ndarray:
    return t.astype("float32").numpy()


def _values(rng: np.random.Generator, n: int = 400) -> np.ndarray:
    v = np.concatenate(
        [
            rng.standard_normal(n) * 10.0 ** rng.integers(-8, 6, n),
            [0.0, -0.0, 65504.0, 65519.0, 65520.0, 1e6, -1e6, 6e-8, 3e-8, 1e-9, np.inf, -np.inf],
            [1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 2049.0, 2051.0],  # float16 ties
        ]
    )
    return v.astype(np.float32)


def test_float16_conversion_matches_numpy():
    v = _values(np.random.default_rng(0))
    t = fg.tensor(v).astype("float16")
    assert t.dtype == fg.float16
    with np.errstate(over="ignore"):
        want = v.astype(np.float16)
    np.testing.assert_array_equal(t.numpy(), want)
    np.testing.assert_array_equal(_as_f32(t), want.astype(np.float32))
    nan = fg.tensor([np.nan]).astype("float16").numpy()
    assert np.isnan(nan).all()


def test_bfloat16_conversion_rounds_to_nearest_even():
    v = _values(np.random.default_rng(1))
    v = np.concatenate([v, np.float32([1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 3.4e38])])
    t = fg.tensor(v).astype("bfloat16")
    assert t.dtype == fg.bfloat16 and t.dtype == "bfloat16"
    np.testing.assert_array_equal(_as_f32(t), _bf16_round(v))
    assert np.isnan(_as_f32(fg.tensor([np.nan]).astype("bfloat16"))).all()


@pytest.mark.parametrize("dt", ["int32", "int8", "uint8"])
def test_integer_conversions_wrap_as_numpy(dt):
    v = np.array([0, 1, -1, 127, 128, 255, 256, -129, 2**31 - 1, 2**31, -(2**31) - 1], np.int64)
    t = fg.tensor(v).astype(dt)
    assert t.dtype == np.dtype(dt)
    np.testing.assert_array_equal(t.numpy(), v.astype(dt))
    np.testing.assert_array_equal(t.astype("int64").numpy(), v.astype(dt).astype(np.int64))
    f = np.array([1.9, -1.9, 100.5, -3.0], np.float32)
    np.testing.assert_array_equal(fg.tensor(f).astype(dt).numpy(), f.astype(np.int64).astype(dt))
    assert fg.tensor([0, 3]).astype(dt).astype("bool").tolist() == [False, True]


@pytest.mark.parametrize("src", ALL)
@pytest.mark.parametrize("dst", ALL)
def test_every_cast_pair(src, dst):
    base = np.array([0.0, 1.0, 2.0, 3.0, 100.0, 5.0], np.float32)
    if src == "bool":
        base = (base > 1.5).astype(np.float32)
    t = fg.tensor(base).astype(src)
    out = t.astype(dst)
    assert out.dtype == dst
    want = base.astype(bool) if dst == "bool" else base
    np.testing.assert_array_equal(_as_f32(out), np.asarray(want, np.float32))
    # a strided view converts as its elements
    np.testing.assert_array_equal(_as_f32(t[::2].astype(dst)), np.asarray(want, np.float32)[::2])


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_arithmetic_rounds_once_per_op(dt):
    rng = np.random.default_rng(2)
    a32, b32 = rng.standard_normal((2, 64)).astype(np.float32)
    a, b = fg.tensor(a32).astype(dt), fg.tensor(b32).astype(dt)
    rnd = (lambda x: x.astype(np.float16).astype(np.float32)) if dt == "float16" else _bf16_round
    ar, br = rnd(a32), rnd(b32)
    for got, want in [
        (a * b, ar * br),
        (a + b, ar + br),
        (a / b, ar / br),
        (fg.exp(a), np.exp(ar)),
        (fg.tanh(a), np.tanh(ar)),
    ]:
        assert got.dtype == dt
        np.testing.assert_array_equal(_as_f32(got), rnd(want.astype(np.float32)))
    s = a.sum()
    assert s.dtype == dt
    np.testing.assert_allclose(float(s.item()), rnd(np.float32(ar.sum())), rtol=1e-2)


def test_narrow_integer_arithmetic_wraps():
    a = np.array([100, 120, -128, 5], np.int8)
    b = np.array([100, 10, -1, 3], np.int8)
    ta, tb = fg.tensor(a), fg.tensor(b)
    assert ta.dtype == fg.int8
    np.testing.assert_array_equal((ta + tb).numpy(), a + b)
    np.testing.assert_array_equal((ta * tb).numpy(), a * b)
    u = np.array([250, 3], np.uint8)
    np.testing.assert_array_equal(
        (fg.tensor(u) + fg.tensor(np.uint8([10, 1]))).numpy(), u + np.uint8([10, 1])
    )
    # sums of integers are int64, as PyTorch's
    s = fg.tensor(np.full(1000, 100, np.int8)).sum()
    assert s.dtype == fg.int64 and s.item() == 100000
    assert fg.tensor(np.int32([3, 9, 2])).max().item() == 9
    assert (ta > 0).dtype == fg.bool_


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        ("int8", "int32", "int32"),
        ("uint8", "int64", "int64"),
        ("int8", "uint8", "int32"),  # PyTorch: int16, which ferrograd lacks
        ("bool", "uint8", "uint8"),
        ("int32", "float16", "float16"),
        ("float16", "float32", "float32"),
        ("float16", "bfloat16", "float32"),
        ("bfloat16", "float64", "float64"),
        ("bool", "bfloat16", "bfloat16"),
    ],
)
def test_promotion_as_pytorch(a, b, want):
    x = fg.tensor([1, 0, 1]).astype(a)
    y = fg.tensor([1, 1, 0]).astype(b)
    assert (x + y).dtype == want
    assert (y * x).dtype == want
    assert fg.where(fg.tensor([True, False, True]), x, y).dtype == want


def test_scalars_do_not_widen_tensors():
    h = fg.tensor([1.0, 2.0]).astype("float16")
    assert (h * 2.5).dtype == fg.float16
    assert (h * fg.tensor(2.5).astype("float64")).dtype == fg.float16  # 0-d tensor
    i8 = fg.tensor([1, 2]).astype("int8")
    assert (i8 + 3).dtype == fg.int8
    assert (i8 * 0.5).dtype == fg.float32
    assert (i8 / i8).dtype == fg.float32


def test_torch_promotion_table():
    torch = pytest.importorskip("torch")
    names = ["float32", "float64", "int64", "bool", "float16", "bfloat16", "int32", "uint8"]
    for a in names:
        for b in names:
            if a == b == "bool":
                continue  # bool + bool: PyTorch's logical or; ferrograd's add has no bool kernel
            ta = torch.ones(2, dtype=getattr(torch, a if a != "bool" else "bool"))
            tb = torch.ones(2, dtype=getattr(torch, b if b != "bool" else "bool"))
            want = str((ta + tb).dtype).removeprefix("torch.")
            got = (fg.ones(2).astype(a) + fg.ones(2).astype(b)).dtype
            assert got == want, (a, b)


def test_in_place_rules():
    i = fg.tensor([1, 2, 3])
    with pytest.raises(fg.DTypeError, match="mul"):
        i *= 0.5
    assert i.tolist() == [1, 2, 3]  # unchanged
    b = fg.tensor(np.int8([120, 1]))
    b += 10
    assert b.dtype == fg.int8
    np.testing.assert_array_equal(b.numpy(), np.int8([120, 1]) + np.int8(10))
    h = fg.tensor([1.0, 2.0]).astype("float16")
    h += fg.tensor([0.1, 0.2])
    assert h.dtype == fg.float16
    np.testing.assert_array_equal(
        h.numpy(), np.float16(np.float32([1, 2]) + np.float32([0.1, 0.2]))
    )
    v = fg.zeros(4).astype("bfloat16")
    v[1:3] = 5.0
    assert _as_f32(v).tolist() == [0.0, 5.0, 5.0, 0.0]


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_gradients_of_half_parameters_are_half(dt):
    rng = np.random.default_rng(3)
    w32 = rng.standard_normal((4, 3)).astype(np.float32)
    x32 = rng.standard_normal((5, 4)).astype(np.float32)
    w = fg.tensor(w32).astype(dt)
    x = fg.tensor(x32).astype(dt)
    gm = fg.GradManager().attach([w])
    with gm:
        loss = fg.tanh(x @ w).sum()
        gm.backward(loss)
    assert loss.dtype == dt and w.grad.dtype == dt
    # the same step in float32 on the rounded values, within half precision
    w2, x2 = fg.tensor(_as_f32(w)), fg.tensor(_as_f32(x))
    gm2 = fg.GradManager().attach([w2])
    with gm2:
        gm2.backward(fg.tanh(x2 @ w2).sum())
    tol = 1e-2 if dt == "float16" else 6e-2
    np.testing.assert_allclose(_as_f32(w.grad), w2.grad.numpy(), rtol=tol, atol=tol)


def test_half_model_step_and_conv():
    x = fg.tensor(np.random.default_rng(4).standard_normal((2, 3, 6, 6)).astype(np.float16))
    w = fg.tensor(np.random.default_rng(5).standard_normal((4, 3, 3, 3)).astype(np.float16))
    gm = fg.GradManager().attach([w])
    with gm:
        y = fg.conv2d(x, w, padding=1)
        gm.backward(fg.relu(y).mean())
    assert y.dtype == fg.float16 and w.grad.dtype == fg.float16
    ref = fg.conv2d(x.float(), w.float(), padding=1).numpy()
    np.testing.assert_allclose(_as_f32(y), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dt", ["float16", "int32", "int8", "uint8"])
def test_numpy_round_trip_keeps_dtype(dt):
    a = np.arange(6).reshape(2, 3).astype(dt)
    t = fg.tensor(a)
    assert t.dtype == np.dtype(dt)
    out = t.numpy()
    assert out.dtype == np.dtype(dt)
    np.testing.assert_array_equal(out, a)
    np.testing.assert_array_equal(t.T.numpy(), a.T)
    assert t.tolist() == a.tolist()
    assert type(t[0, 1].item()) is (float if dt == "float16" else int)


def test_bfloat16_values_and_numpy():
    t = fg.tensor([1.0, 2.5, -3.0], dtype="bfloat16")
    assert t.dtype == "bfloat16"
    assert t.tolist() == [1.0, 2.5, -3.0]
    assert t[1].item() == 2.5
    assert fg.tensor(t).dtype == "bfloat16"
    assert fg.tensor(t, dtype="float32").tolist() == [1.0, 2.5, -3.0]
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        with pytest.raises(TypeError, match="bfloat16"):
            t.numpy()
    else:
        assert t.numpy().dtype.name == "bfloat16"
        assert fg.tensor(t.numpy()).dtype == "bfloat16"


def test_creation_with_narrow_dtypes():
    assert fg.zeros(2, 3, dtype="float16").numpy().dtype == np.float16
    np.testing.assert_array_equal(fg.full((3,), 7, dtype="int8").numpy(), np.int8([7, 7, 7]))
    np.testing.assert_array_equal(fg.full((2,), 300, dtype="uint8").numpy(), np.uint8([44, 44]))
    assert fg.ones(2, dtype="bfloat16").tolist() == [1.0, 1.0]


def test_to_and_shorthands():
    x = fg.tensor([1.5, -2.5])
    assert x.half().dtype == fg.float16
    assert x.bfloat16().dtype == "bfloat16"
    assert x.double().dtype == fg.float64
    assert x.long().tolist() == [1, -2]
    assert x.int().dtype == fg.int32
    assert x.bool().tolist() == [True, True]
    assert x.byte().dtype == fg.uint8 and x.char().dtype == fg.int8
    assert x.half().float().dtype == fg.float32
    assert x.to("float16").dtype == fg.float16
    assert x.to(fg.float64).dtype == fg.float64
    assert x.to(dtype="int8").dtype == fg.int8
    assert x.to(x.half()).dtype == fg.float16
    assert x.to(x.device, fg.float16).dtype == fg.float16
    c = x.to(x.device, copy=True)
    c.copy_(fg.zeros(2))
    assert x.tolist() == [1.5, -2.5]
    with pytest.raises(ValueError, match="device"):
        x.to("no-such-thing")
    with pytest.raises(TypeError, match="to"):
        x.to(3.5)
    # a dtype change is differentiable
    w = fg.tensor([1.0, 2.0])
    gm = fg.GradManager().attach([w])
    with gm:
        gm.backward((w.to("float64") * 3).sum())
    assert w.grad.dtype == fg.float32 and w.grad.tolist() == [3.0, 3.0]


def test_traced_step_on_half():
    w = fg.tensor([1.0, 2.0, 3.0]).astype("float16")

    @fg.trace
    def step(x):
        return (x * w).sum()

    x = fg.tensor([0.5, 0.25, 2.0]).astype("float16")
    eager = (x * w).sum()
    assert step(x).dtype == fg.float16
    assert step(x).item() == eager.item()
