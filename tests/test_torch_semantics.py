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
    with pytest.raises(ValueError, match="negative"):
        fg.tensor(a) ** fg.tensor([1, -1, 1])


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
