"""Behaviours that MegEngine's own autodiff tests check, written against ferrograd: cos and
its second derivative through nested managers, bilinear downsampling's gradient, pixel
shuffle on more than 4 axes, one-hot indexing, boolean and multi-array indexing, dropout,
and the narrow dtypes."""

from __future__ import annotations

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np


def grad_of(f, x):
    x.grad = None
    gm = fg.GradManager().attach([x])
    with gm:
        y = f(x)
        gm.backward(y, fg.ones_like(y))
    return x.grad.numpy()


def test_cos_first_and_second_derivative():
    a = np.random.default_rng(0).random(10).astype("f4")
    x = fg.tensor(a)
    np.testing.assert_allclose(grad_of(fg.cos, x), -np.sin(a), rtol=1e-6)
    x = fg.tensor(a)
    outer, inner = fg.GradManager().attach([x]), fg.GradManager().attach([x])
    with outer:
        with inner:
            inner.backward(fg.cos(x), fg.ones_like(x))
        dx = x.grad
        x.grad = None
        outer.backward(dx, fg.ones_like(dx))
    np.testing.assert_allclose(x.grad.numpy(), -np.cos(a), rtol=1e-5)


def test_bilinear_downsampling_spreads_a_quarter():
    x = fg.tensor(np.random.default_rng(1).random((3, 3, 32, 32)).astype("f4"))
    g = grad_of(lambda t: F.interpolate(t, size=(16, 16), mode="bilinear"), x)
    np.testing.assert_array_equal(g, np.full(x.shape, 0.25, "f4"))


def test_pixel_shuffle_with_extra_leading_axes():
    a = np.random.default_rng(2).random((2, 3, 16, 3, 4)).astype("f4")
    x = fg.tensor(a)
    assert F.pixel_shuffle(x, 2).shape == (2, 3, 4, 6, 8)
    np.testing.assert_allclose(grad_of(lambda t: F.pixel_shuffle(t, 2) ** 2, x), 2 * a)


def test_one_hot_indexing_and_boolean_keys():
    x = fg.tensor(np.array([[1.0, 2.0]], "f4"))
    g = grad_of(lambda t: fg.take_along_axis(t, fg.tensor([[0]]), -1), x)
    np.testing.assert_array_equal(g, [[1, 0]])
    x = fg.tensor(np.random.default_rng(3).random((3, 2)).astype("f4"))
    np.testing.assert_array_equal(
        grad_of(lambda t: (t * 1)[True, 0:1], x), [[1, 1], [0, 0], [0, 0]]
    )
    np.testing.assert_array_equal(grad_of(lambda t: (t * 1)[False, 0:1], x), np.zeros((3, 2)))
    x = fg.tensor(np.random.default_rng(4).random((3, 3)).astype("f4"))
    g = grad_of(lambda t: (t * 1)[[0, 0, 2, 1], [2, 2, 1, 0]], x)
    np.testing.assert_array_equal(g, [[0, 0, 2], [1, 0, 0], [0, 1, 0]])
    mask = fg.tensor(np.array([[True, False, True], [False, False, True], [True, True, False]]))
    np.testing.assert_array_equal(grad_of(lambda t: t[mask] * 3, x), 3 * mask.numpy())


def test_dropout_gradient_is_its_mask():
    fg.manual_seed(7)
    x = fg.ones(1000)
    g = grad_of(lambda t: F.dropout(t, 0.3), x)
    assert set(np.unique(g)) == {0.0, np.float32(1 / 0.7)}


def test_narrow_dtypes_flow_through_gradients():
    for dtype in ("float16", "bfloat16"):
        x = fg.tensor(np.array([0.5, -1.0, 2.0], "f4")).astype(dtype)
        g = grad_of(lambda t: t * t, x)
        np.testing.assert_allclose(g, [1.0, -2.0, 4.0])
    idx = fg.tensor(np.array([2, 0], "int32"))
    w = fg.tensor(np.arange(6.0, dtype="f4").reshape(3, 2))
    g = grad_of(lambda t: F.embedding(idx, t), w)
    np.testing.assert_array_equal(g, [[1, 1], [0, 0], [1, 1]])
    u8 = fg.tensor(np.array([1, 0, 1], "uint8"))
    x = fg.tensor(np.array([1.0, 2.0, 3.0], "f4"))
    np.testing.assert_array_equal(grad_of(lambda t: t * u8, x), [1, 0, 1])
