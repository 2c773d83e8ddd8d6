"""The storage dtypes float16, bfloat16, int32, int16, int8 and uint8: conversions against numpy,
arithmetic that rounds once per op, PyTorch's type promotion, in-place rules, gradients in the
parameter's dtype, numpy interchange and the dtype shorthands."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

NARROW = ["float16", "bfloat16", "int32", "int16", "int8", "uint8"]
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


@pytest.mark.parametrize("dt", ["int32", "int16", "int8", "uint8"])
def test_integer_conversions_wrap_as_numpy(dt):
    v = np.array(
        [0, 1, -1, 127, 128, 255, 256, -129, 32767, 32768, -32769, 65536, 2**31 - 1, 2**31,
         -(2**31) - 1],
        np.int64,
    )  # fmt: skip
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
        ("int8", "uint8", "int16"),
        ("int16", "uint8", "int16"),
        ("int16", "int8", "int16"),
        ("int16", "int32", "int32"),
        ("int16", "float16", "float16"),
        ("bool", "int16", "int16"),
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
    names = [
        "float32",
        "float64",
        "int64",
        "bool",
        "float16",
        "bfloat16",
        "int32",
        "int16",
        "int8",
        "uint8",
    ]
    for a in names:
        for b in names:
            if a == b == "bool":
                continue  # bool + bool: PyTorch's logical or; ferrograd's add has no bool kernel
            ta = torch.ones(2, dtype=getattr(torch, a if a != "bool" else "bool"))
            tb = torch.ones(2, dtype=getattr(torch, b if b != "bool" else "bool"))
            want = str((ta + tb).dtype).removeprefix("torch.")
            got = (fg.ones(2).astype(a) + fg.ones(2).astype(b)).dtype
            assert got == want, (a, b)
            assert fg.promote_types(a, b) == want, (a, b)
            assert want == str(torch.promote_types(ta.dtype, tb.dtype)).removeprefix("torch.")


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


@pytest.mark.parametrize("dt", ["float16", "int32", "int16", "int8", "uint8"])
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
    # a value the dtype cannot hold is refused, as by PyTorch (and numpy 2); -1 wraps
    with pytest.raises(RuntimeError, match="full: value 300 .*uint8"):
        fg.full((2,), 300, dtype="uint8")
    np.testing.assert_array_equal(fg.full((2,), -1, dtype="uint8").numpy(), np.uint8([255, 255]))
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
    assert x.short().dtype == fg.int16 and x.short().tolist() == [1, -2]
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


# ------------------------------------------------------------------------------ int16


def test_int16_dtype_names_and_repr():
    assert fg.int16 == np.dtype("int16") and fg.short == fg.int16
    assert "int16" in fg.__all__
    t = fg.tensor([1, -2, 3], dtype=fg.int16)
    assert t.dtype == fg.int16 and str(t.dtype) == "int16" and t.dtype.name == "int16"
    assert fg.tensor([1], dtype="int16").dtype == fg.int16
    assert fg.tensor([1], dtype="short").dtype == fg.int16
    assert fg.tensor([1], dtype=np.int16).dtype == fg.int16
    assert "int16" in repr(t)
    assert t.element_size() == 2 and t.dtype.itemsize == 2
    assert fg.zeros(2, 3, dtype="int16").numpy().dtype == np.int16
    with pytest.raises(RuntimeError, match="int16 without overflow"):
        fg.full((2,), 70000, dtype="int16")
    np.testing.assert_array_equal(fg.full((2,), -32768, dtype="int16").numpy(), [-32768] * 2)
    assert fg.iinfo(fg.int16).bits == 16
    assert (fg.iinfo(fg.int16).min, fg.iinfo(fg.int16).max) == (-32768, 32767)
    assert fg.tensor([1]).type("torch.ShortTensor").dtype == fg.int16
    assert fg.tensor([1]).short().type() == "torch.ShortTensor"


def test_int16_item_and_tolist():
    t = fg.tensor(np.int16([-32768, 32767, 5]))
    assert t.dtype == fg.int16
    assert t.tolist() == [-32768, 32767, 5]
    v = t[1].item()
    assert type(v) is int and v == 32767
    assert int(t[0]) == -32768 and float(t[2]) == 5.0


def test_int16_from_numpy_and_torch_keeps_dtype():
    torch = pytest.importorskip("torch")
    a = np.arange(-3, 3, dtype=np.int16).reshape(2, 3)
    assert fg.tensor(a).dtype == fg.int16
    assert fg.from_numpy(a).dtype == fg.int16
    assert fg.tensor(a[:, ::2]).dtype == fg.int16
    assert fg.tensor([np.int16(3), np.int16(4)]).dtype == fg.int16
    assert fg.tensor([np.int8(3), np.uint8(4)]).dtype == fg.int16  # torch's promotion
    tt = torch.tensor([[1, -2], [300, 4]], dtype=torch.int16)
    t = fg.tensor(tt)
    assert t.dtype == fg.int16 and t.tolist() == tt.tolist()
    assert fg.tensor(tt, dtype=fg.float32).tolist() == [[1.0, -2.0], [300.0, 4.0]]


def test_int16_numpy_memory_is_shared():
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    t = fg.from_numpy(a)
    if str(t.device) == "cpu":
        assert fg._core._host_memory(t)[0] == a.ctypes.data
        a[0, 0] = 99
        assert t[0, 0].item() == 99
    t = fg.tensor(np.int16([7, -8, 9]), device="cpu")
    view = np.asarray(t)
    assert view.dtype == np.int16 and view.tolist() == [7, -8, 9]
    assert view.ctypes.data == fg._core._host_memory(t)[0]
    assert t.numpy().dtype == np.int16


def test_int16_dlpack_both_ways():
    torch = pytest.importorskip("torch")
    x = fg.tensor(np.int16([[1, -2], [3, 32767]]), device="cpu")
    back = torch.from_dlpack(x)
    assert back.dtype == torch.int16 and back.tolist() == x.tolist()
    assert back.data_ptr() == fg._core._host_memory(x)[0]
    a = np.from_dlpack(x)
    assert a.dtype == np.int16 and a.tolist() == x.tolist()
    src = torch.tensor([5, -6, 7], dtype=torch.int16)
    z = fg.from_dlpack(src)
    assert z.dtype == fg.int16 and z.tolist() == [5, -6, 7]
    assert fg._core._host_memory(z)[0] == src.data_ptr()


def test_int16_arithmetic_wraps_as_torch():
    torch = pytest.importorskip("torch")
    a = [32767, -32768, 200, -5, 1000]
    b = [1, -1, 300, 7, -33]
    ta, tb = torch.tensor(a, dtype=torch.int16), torch.tensor(b, dtype=torch.int16)
    fa, fb = fg.tensor(a, dtype=fg.int16), fg.tensor(b, dtype=fg.int16)
    for got, want in [
        (fa + fb, ta + tb),
        (fa - fb, ta - tb),
        (fa * fb, ta * tb),
        (-fa, -ta),
        (fa + 1, ta + 1),
        (fa * 3, ta * 3),
        (fa // fb, ta // tb),
        (fa % fb, ta % tb),
        (abs(fa), abs(ta)),
        (fa / fb, ta / tb),
        (fa * 0.5, ta * 0.5),
        (fa + 40000, ta + 40000),
    ]:
        assert str(got.dtype) == str(want.dtype).removeprefix("torch."), (got.dtype, want.dtype)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    assert (fg.tensor([32767], dtype="int16") + 1).tolist() == [-32768]
    # reductions of int16 are int64, as torch's
    big = fg.full((1000,), 30000, dtype="int16")
    s = big.sum()
    assert s.dtype == fg.int64 and s.item() == 30_000_000
    assert fa.max().item() == 32767 and fa.min().item() == -32768
    assert fa.max().dtype == fg.int16
    assert fa.argmax().item() == 0
    # comparisons give bool
    for got, want in [(fa > fb, ta > tb), (fa == fb, ta == tb), (fa <= 200, ta <= 200)]:
        assert got.dtype == fg.bool_ and got.tolist() == want.tolist()


def test_int16_with_python_scalars_and_other_dtypes():
    x = fg.tensor([1, 2], dtype="int16")
    assert (x + 3).dtype == fg.int16
    assert (3 * x).dtype == fg.int16
    assert (x + True).dtype == fg.int16
    assert (x + 1.5).dtype == fg.float32
    assert (x / 2).dtype == fg.float32
    assert (x + fg.tensor(5)).dtype == fg.int16  # a 0-d int64 tensor
    assert (x + fg.tensor([5, 6])).dtype == fg.int64
    assert (x + fg.tensor([5, 6], dtype="uint8")).dtype == fg.int16
    assert (x + fg.tensor([5, 6], dtype="int8")).dtype == fg.int16
    assert (fg.tensor([1, 2], dtype="int8") + fg.tensor([1, 2], dtype="uint8")).dtype == fg.int16
    assert fg.result_type(x, 2.0) == fg.float32


@pytest.mark.parametrize("src", ["float32", "float64", "float16", "bfloat16"])
def test_float_to_int16_truncates_as_torch(src):
    torch = pytest.importorskip("torch")
    v = [1.9, -1.9, 0.5, -0.5, 100.7, -300.2, 32000.0, -32000.0, 0.0]
    want = torch.tensor(v, dtype=getattr(torch, src)).to(torch.int16)
    got = fg.tensor(v, dtype=src).to(fg.int16)
    assert got.dtype == fg.int16 and got.tolist() == want.tolist()
    back = got.to(src)
    assert str(back.dtype) == src
    assert back.float().tolist() == want.to(getattr(torch, src)).float().tolist()


def test_int16_in_place_ops():
    x = fg.tensor([32760, -5, 3], dtype="int16")
    x += 10
    assert x.dtype == fg.int16 and x.tolist() == [-32766, 5, 13]
    x *= fg.tensor([2, 2, 2], dtype="int8")
    assert x.dtype == fg.int16 and x.tolist() == [4, 10, 26]
    with pytest.raises(fg.DTypeError, match="mul"):
        x *= 0.5
    x[1] = 70000
    assert x.tolist() == [4, 4464, 26]
    x[0:2] = fg.tensor([7, 8])
    assert x.tolist() == [7, 8, 26]
    x.copy_(fg.tensor([1.9, -2.9, 3.0]))
    assert x.dtype == fg.int16 and x.tolist() == [1, -2, 3]
    x.fill_(-4)
    assert x.tolist() == [-4, -4, -4]
    y = fg.zeros(3)
    y += fg.tensor([1, 2, 3], dtype="int16")
    assert y.dtype == fg.float32 and y.tolist() == [1.0, 2.0, 3.0]


def test_indexing_with_int16_indices():
    a = fg.tensor(np.arange(12.0).reshape(4, 3))
    idx = fg.tensor([3, -1, 0], dtype="int16")
    np.testing.assert_array_equal(a[idx].numpy(), np.arange(12.0).reshape(4, 3)[[3, -1, 0]])
    np.testing.assert_array_equal(
        a[np.int16([1, 2])].numpy(), np.arange(12.0).reshape(4, 3)[[1, 2]]
    )
    t = fg.tensor(np.arange(5), dtype="int16")
    assert t[fg.tensor([4, 0])].tolist() == [4, 0]
    assert t[t > 2].dtype == fg.int16 and t[t > 2].tolist() == [3, 4]
    assert t[1:4].tolist() == [1, 2, 3] and t[::2].dtype == fg.int16
    t[fg.tensor([0, 1], dtype="int16")] = 9
    assert t.tolist() == [9, 9, 2, 3, 4]
    assert fg.gather(a, 0, fg.tensor([[1, 2, 3]], dtype="int64")).shape == (1, 3)


def test_int16_shape_ops_and_where():
    t = fg.tensor(np.arange(6, dtype=np.int16).reshape(2, 3))
    assert t.T.dtype == fg.int16 and t.T.tolist() == [[0, 3], [1, 4], [2, 5]]
    assert t.reshape(3, 2).dtype == fg.int16
    assert fg.concat([t, t]).dtype == fg.int16
    w = fg.where(t > 2, t, fg.zeros_like(t))
    assert w.dtype == fg.int16 and w.tolist() == [[0, 0, 0], [3, 4, 5]]
    assert fg.zeros_like(t).dtype == fg.int16


def test_int16_save_load_round_trip(tmp_path):
    x = fg.tensor(np.int16([[-32768, 1], [2, 32767]]))
    path = tmp_path / "i16.safetensors"
    fg.save({"x": x, "view": x.T}, path)
    back = fg.load(path)
    assert back["x"].dtype == fg.int16 and back["x"].tolist() == x.tolist()
    assert back["view"].dtype == fg.int16 and back["view"].tolist() == x.T.tolist()
    st = pytest.importorskip("safetensors.numpy")
    arrays = st.load_file(str(path))
    assert arrays["x"].dtype == np.int16
    st.save_file({"a": np.int16([1, -2])}, str(tmp_path / "o.safetensors"))
    other = fg.load(tmp_path / "o.safetensors")
    assert other["a"].dtype == fg.int16 and other["a"].tolist() == [1, -2]


def test_int16_torch_save_files(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "s.pt"
    torch.save({"s": torch.tensor([300, -2], dtype=torch.int16)}, path)
    out = fg.load(path)
    assert out["s"].dtype == fg.int16 and out["s"].tolist() == [300, -2]


def test_int16_make_tensor():
    t = fg.testing.make_tensor((50,), dtype=fg.int16, device=fg.get_default_device())
    assert t.dtype == fg.int16 and t.shape == (50,)


@pytest.mark.parametrize("half", ["bfloat16", "float16"])
@pytest.mark.parametrize("src", ["float32", "float64", "int64"])
def test_conversions_to_half_types_round_as_pytorch(half, src):
    """Round to nearest even, through float32 as PyTorch's conversions go: values just above a
    halfway point (bfloat16 0x3f808001 is 1.0078125, not 1.0) and random ones, bit for bit."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    if src == "int64":
        x = rng.integers(-(2**40), 2**40, 20000)
    else:
        bits = np.array([0x3F808001, 0x3F808006, 0x40008001, 0x3F808000, 0x3F818000], np.uint32)
        x = np.concatenate([bits.view(np.float32), rng.standard_normal(20000).astype(np.float32)])
        x = np.concatenate([x, x * 1e3, x * 1e-6]).astype(src)
        if src == "float64":
            x = x + rng.standard_normal(x.size) * np.abs(x) * 1e-9
    ours = fg.tensor(x).astype(half).astype("float32").numpy()
    want = torch.tensor(x).to(getattr(torch, half)).float().numpy()
    np.testing.assert_array_equal(ours, want)
    if src == "int64":
        return
    filled = fg.full((3,), float(x[0]), dtype=half).astype("float32").numpy()
    np.testing.assert_array_equal(
        filled, torch.full((3,), float(x[0]), dtype=getattr(torch, half)).float().numpy()
    )


@pytest.mark.parametrize(
    "dtype,value",
    [
        ("uint8", -255),
        ("uint8", -256),
        ("uint8", 256),
        ("int8", -128),
        ("int8", -129),
        ("int8", 127.9),
        ("int8", 128.0),
        ("int8", -128.5),
        ("uint8", -1.5),
        ("int16", 32768),
        ("int32", 2**31 - 1),
        ("int32", 2**31),
        ("float16", 70000),
        ("bfloat16", 1e39),
        ("float32", 3.5e38),
        ("float32", float("inf")),
        ("bool", 7),
    ],
)
def test_full_and_fill_refuse_values_the_dtype_cannot_hold_as_torch(dtype, value):
    torch = pytest.importorskip("torch")
    td = getattr(torch, dtype)
    try:
        want = torch.full((2,), value, dtype=td).tolist()
    except RuntimeError:
        want = None
    for make in (
        lambda: fg.full((2,), value, dtype=dtype),
        lambda: fg.zeros(2, dtype=dtype).fill_(value),
        lambda: fg.full_like(fg.zeros(2, dtype=dtype), value),
    ):
        if want is None:
            with pytest.raises(RuntimeError, match="without overflow"):
                make()
        else:
            assert make().tolist() == want
    # the tensor is left as it was after a refused fill_
    t = fg.ones(2, dtype=dtype)
    if want is None:
        with pytest.raises(RuntimeError):
            t.fill_(value)
        assert t.tolist() == fg.ones(2, dtype=dtype).tolist()
