"""Corner cases where ferrograd must give PyTorch's values and gradients: zero spread in
std, degenerate variance, NaN extrema, copysign at zero, 0-d tensors with dim 0/-1, integer
powers of integer tensors, repeated scatter targets, 0-d random draws."""

from __future__ import annotations

import math

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")


def _both(xs, fn, dtype="float64"):
    a = fg.tensor(np.asarray(xs, dtype=dtype), requires_grad=True)
    b = torch.tensor(np.asarray(xs, dtype=dtype), requires_grad=True)
    ya, yb = fn(fg, a), fn(torch, b)
    ya.sum().backward()
    yb.sum().backward()
    return ya, yb, a.grad.numpy(), b.grad.numpy()


@pytest.mark.parametrize(
    ("xs", "fn"),
    [
        ([3.0, 3.0, 3.0], lambda m, x: x.std()),
        ([[1.0], [2.0]], lambda m, x: x.std(dim=1, correction=0)),
        ([[1.0, 1.0], [2.0, 5.0]], lambda m, x: x.std(dim=1)),
        ([1.0, 2.0], lambda m, x: x.var(dim=0, correction=5)),
        ([1.0, float("nan"), 3.0], lambda m, x: x.max()),
        ([1.0, float("nan"), 3.0], lambda m, x: x.min()),
        ([[1.0, float("nan")], [4.0, 2.0]], lambda m, x: x.max(1).values),
        (
            [0.0, -0.0, 2.0, -3.0, 1.5],
            lambda m, x: m.copysign(x, m.tensor([-1.0, 1, -1, 2, -0.0], dtype=m.float64)),
        ),
    ],
)
def test_values_and_gradients_equal_torch(xs, fn):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about the degenerate variance
        ya, yb, ga, gb = _both(xs, fn)
    np.testing.assert_allclose(ya.numpy(), yb.detach().numpy(), rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(ga, gb, rtol=1e-12, equal_nan=True)


def test_copysign_keeps_negative_zero():
    out = fg.copysign(fg.tensor([0.0, -0.0, 1.0]), fg.tensor([-1.0, 1.0, -0.0])).numpy()
    np.testing.assert_array_equal(np.signbit(out), [True, False, True])


def test_std_mean_and_var_mean_honour_axis():
    x = np.arange(12.0).reshape(3, 4)
    s, m = fg.std_mean(fg.tensor(x), axis=1)
    np.testing.assert_allclose(s.numpy(), x.std(1, ddof=1))
    np.testing.assert_allclose(m.numpy(), x.mean(1))
    v, m = fg.var_mean(fg.tensor(x), 0, keepdim=True)
    assert m.shape == (1, 4)
    np.testing.assert_allclose(v.numpy(), x.var(0, ddof=1, keepdims=True))


@pytest.mark.parametrize(
    "expr",
    [
        "x.sum(0)",
        "x.mean(-1)",
        "x.softmax(-1)",
        "x.log_softmax(0)",
        "x.squeeze(0)",
        "x.amax(0)",
        "x.transpose(0, -1)",
        "x.flip(0)",
        "x.prod(0)",
        "x.logsumexp(0)",
    ],
)
def test_a_0d_tensor_takes_dim_0_and_minus_1(expr):
    env = {"x": fg.tensor(2.0)}
    tenv = {"x": torch.tensor(2.0)}
    got, want = eval(expr, env), eval(expr, tenv)
    assert got.shape == ()
    np.testing.assert_allclose(got.numpy(), want.numpy())


def test_an_axis_out_of_range_is_an_index_error_and_a_value_error():
    for fn in (
        lambda: fg.ones(2, 3).sum(2),
        lambda: fg.tensor(1.0).sum(1),
        lambda: fg.ones(2).softmax(3),
    ):
        with pytest.raises(IndexError, match="axis"):
            fn()
        with pytest.raises(ValueError, match="axis"):
            fn()
    assert issubclass(fg.AxisError, IndexError) and issubclass(fg.AxisError, ValueError)


def test_integer_powers_of_integer_tensors_stay_integer():
    a, b = [2, 3, -2], [3, 2, 5]
    for got, want in [
        (fg.tensor(a) ** fg.tensor(b), torch.tensor(a) ** torch.tensor(b)),
        (fg.pow(fg.tensor(a), fg.tensor(b)), torch.pow(torch.tensor(a), torch.tensor(b))),
        (2 ** fg.tensor(b), 2 ** torch.tensor(b)),
        (fg.tensor(11) ** fg.tensor(7), torch.tensor(11) ** torch.tensor(7)),
        (
            fg.tensor([2], dtype="int32") ** fg.tensor(3, dtype="int32"),
            torch.tensor([2], dtype=torch.int32) ** torch.tensor(3, dtype=torch.int32),
        ),
    ]:
        assert got.dtype.name == str(want.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert (2.0 ** fg.tensor(b)).dtype.kind == "f"
    # negative integer powers as torch's integer kernel: 1, +-1 by parity, else 0
    bases, exps = [2, 1, -1, -1, 0, -3, 5], [-1, -2, -1, -2, -1, -3, 0]
    got = fg.tensor(bases) ** fg.tensor(exps)
    want = torch.tensor(bases) ** torch.tensor(exps)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got.dtype.name == "int64"


def test_scatter_to_a_repeated_target_keeps_the_last_write():
    rng = np.random.default_rng(0)
    x, i, s = rng.standard_normal((3, 5)), rng.integers(0, 3, (4, 5)), rng.standard_normal((4, 5))
    got = fg.tensor(x).scatter(0, fg.tensor(i), fg.tensor(s)).numpy()
    want = torch.tensor(x).scatter(0, torch.tensor(i), torch.tensor(s)).numpy()
    np.testing.assert_array_equal(got, want)


def test_draws_and_saved_arrays_of_no_axes_are_0d(tmp_path):
    assert fg.randn().shape == ()
    assert fg.rand(()).shape == ()
    assert fg.randint(0, 5, ()).shape == ()
    assert fg.distributions.Normal(0.0, 1.0).sample().shape == ()
    p = tmp_path / "a.fg"
    fg.save({"x": np.array(2.5)}, p)
    back = fg.load(p, weights_only=False)["x"]
    assert np.shape(back) == () and math.isclose(float(back), 2.5)


def test_equal_is_one_bool_and_eq_is_elementwise():
    a = fg.ones(2, 2)
    assert fg.equal(a, a) is True
    assert fg.equal(a, fg.ones(3)) is False
    assert fg.equal(fg.tensor([float("nan")]), fg.tensor([float("nan")])) is False
    assert fg.eq(a, a).dtype.name == "bool" and fg.eq(a, a).shape == (2, 2)


def test_memory_formats_are_accepted_and_change_nothing():
    x = fg.ones(1, 2, 3, 3)
    assert fg.channels_last is not fg.contiguous_format
    y = x.to(memory_format=fg.channels_last)
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    assert x.contiguous(memory_format=fg.channels_last) is x
    assert x.is_contiguous(memory_format=fg.channels_last)
    m = fg.nn.Conv2d(2, 2, 1).to(memory_format=fg.channels_last)
    assert m(x).shape == (1, 2, 3, 3)


def test_nonzero_of_a_0d_tensor():
    for v in (5, 0):
        got, want = fg.tensor(v).nonzero(), torch.tensor(v).nonzero()
        assert got.shape == tuple(want.shape)
        (gt,), (wt,) = fg.tensor(v).nonzero(as_tuple=True), torch.tensor(v).nonzero(as_tuple=True)
        np.testing.assert_array_equal(gt.numpy(), wt.numpy())


def test_amax_amin_take_axis():
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(fg.tensor(x).amax(axis=1).numpy(), x.max(1))
    assert fg.amin(fg.tensor(x), axis=0, keepdims=True).shape == (1, 3)


def test_batch_norm_stops_tracking_when_switched_off_after_construction():
    for lib in (fg, torch):
        bn = lib.nn.BatchNorm2d(3)
        bn.track_running_stats = False
        bn(lib.tensor(np.random.default_rng(0).standard_normal((4, 3, 2, 2)), dtype=lib.float32))
        np.testing.assert_array_equal(bn.running_var.numpy(), np.ones(3, np.float32))
    fbn = fg.nn.BatchNorm2d(3).eval()
    fbn.track_running_stats = False
    x = np.full((1, 3, 1, 1), 2.0, np.float32)
    np.testing.assert_allclose(  # eval mode still uses the (kept) running statistics
        fbn(fg.tensor(x)).numpy().ravel(), 2.0 / np.sqrt(1 + 1e-5), rtol=1e-6
    )


def test_load_accepts_mmap(tmp_path):
    p = tmp_path / "w.pt"
    fg.save({"w": fg.ones(2)}, p)
    np.testing.assert_array_equal(fg.load(p, mmap=True, weights_only=True)["w"].numpy(), [1, 1])


@pytest.mark.parametrize(
    "expr",
    [
        "m.tensor(a) << m.tensor(b)",
        "m.tensor(a) >> m.tensor(b)",
        "m.tensor(a) << 2",
        "3 << m.tensor(b)",
        "m.bitwise_right_shift(m.tensor(a, dtype=m.int32), 1)",
        "m.bitwise_left_shift(m.tensor(a), m.tensor(b))",
    ],
)
def test_integer_shifts(expr):
    a, b = [1, -5, 7, 100], [1, 1, 3, 2]
    got, want = eval(expr, {"m": fg, "a": a, "b": b}), eval(expr, {"m": torch, "a": a, "b": b})
    assert got.dtype.name == str(want.dtype).removeprefix("torch.")
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    x = fg.tensor([1, 2])
    x <<= 1
    np.testing.assert_array_equal(x.numpy(), [2, 4])
    with pytest.raises(TypeError, match="integer"):
        fg.tensor([1.0]) << 1


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad", [(3, -3, 0, -3), (-1, 2, 2, -1), (2, -1, 0, 0)])
def test_pad_with_negative_amounts_crops_as_torch(mode, pad):
    x = np.random.default_rng(0).standard_normal((1, 1, 5, 6))
    fx, tx = fg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    fy = fg.nn.functional.pad(fx, pad, mode=mode)
    ty = torch.nn.functional.pad(tx, pad, mode=mode)
    np.testing.assert_array_equal(fy.numpy(), ty.detach().numpy())
    (fy * fy).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy())


def test_einsum_promotes_split_takes_split_size_and_attention_groups_heads():
    y = fg.einsum("bld,dn->bldn", fg.ones(1, 2, 3, dtype=fg.float64), fg.ones(3, 4))
    assert y.dtype.name == "float64"
    assert [t.shape for t in fg.ones(2, 6).split(split_size=[2, 4], dim=-1)] == [(2, 2), (2, 4)]
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal(s) for s in ((2, 8, 5, 4), (2, 2, 5, 4), (2, 2, 5, 4)))
    got = fg.nn.functional.scaled_dot_product_attention(
        fg.tensor(q), fg.tensor(k), fg.tensor(v), is_causal=True, enable_gqa=True
    )
    want = torch.nn.functional.scaled_dot_product_attention(
        torch.tensor(q), torch.tensor(k), torch.tensor(v), is_causal=True, enable_gqa=True
    )
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10)


def test_stack_and_cat_promote_mixed_dtypes():
    for fn in ("stack", "cat"):
        got = getattr(fg, fn)([fg.tensor([1, 2]), fg.tensor([1.5, 2.5])])
        want = getattr(torch, fn)([torch.tensor([1, 2]), torch.tensor([1.5, 2.5])])
        assert got.dtype.name == "float32" and want.dtype == torch.float32
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert fg.stack([fg.ones(2)] * 3, dim=1).shape == (2, 3)
    assert fg.stack([fg.ones(2)] * 3, axis=-1).shape == (2, 3)
