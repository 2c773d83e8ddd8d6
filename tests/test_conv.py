"""conv2d, max_pool2d and avg_pool2d: values against a direct numpy reference and gradients
against finite differences in float64 (including second order through nested managers)."""

import ferrograd as fg
import numpy as np
import pytest
from conftest import check_grad


def conv_ref(x, w, b, stride, padding, dilation, groups):
    n, _c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(oh):
            for j in range(ow):
                patch = xp[
                    :,
                    g * cg : (g + 1) * cg,
                    i * sh : i * sh + dh * kh : dh,
                    j * sw : j * sw + dw * kw : dw,
                ]
                out[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3))
    if b is not None:
        out += b[None, :, None, None]
    return out


CASES = [
    {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1},
    {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 1), "groups": 1},
    {"stride": (1, 2), "padding": (2, 1), "dilation": (2, 1), "groups": 2},
]


@pytest.mark.parametrize("case", CASES)
def test_conv2d_matches_reference_and_finite_differences(case):
    rng = np.random.default_rng(1)
    c, o, g = 4, 6, case["groups"]
    x = rng.normal(size=(2, c, 6, 5))
    w = rng.normal(size=(o, c // g, 3, 2))
    b = rng.normal(size=o)
    y = fg.conv2d(fg.tensor(x), fg.tensor(w), fg.tensor(b), **case).numpy()
    np.testing.assert_allclose(y, conv_ref(x, w, b, **case), rtol=1e-12, atol=1e-12)
    check_grad(lambda x_, w_, b_: fg.conv2d(x_, w_, b_, **case), [x, w, b])


@pytest.mark.parametrize("padding", [0, 1])
def test_pools_gradients(padding):
    rng = np.random.default_rng(2)
    # distinct values so max has a unique winner per window
    x = rng.permutation(2 * 3 * 7 * 6).reshape(2, 3, 7, 6) / 10.0
    check_grad(lambda t: fg.max_pool2d(t, 3, 2, padding), [x])
    check_grad(lambda t: fg.avg_pool2d(t, (3, 2), (2, 1), padding), [x])


def test_max_pool_matches_numpy():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 3, 8, 8))
    y = fg.max_pool2d(fg.tensor(x), 2).numpy()
    np.testing.assert_array_equal(y, x.reshape(2, 3, 4, 2, 4, 2).max(axis=(3, 5)))
    a = fg.avg_pool2d(fg.tensor(x), 2).numpy()
    np.testing.assert_allclose(a, x.reshape(2, 3, 4, 2, 4, 2).mean(axis=(3, 5)), rtol=1e-12)


def test_conv2d_second_derivative_through_nested_managers():
    rng = np.random.default_rng(4)
    x0 = rng.normal(size=(1, 2, 5, 5))
    w0 = rng.normal(size=(3, 2, 3, 3))

    def grad_w_sum(xv):
        x = fg.tensor(xv)
        w = fg.tensor(w0)
        gm = fg.GradManager().attach(w)
        with gm:
            y = fg.conv2d(x, w, padding=1).tanh()
            gm.backward((y * y).sum())
        return float(w.grad.numpy().sum())

    x = fg.tensor(x0)
    w = fg.tensor(w0)
    outer = fg.GradManager().attach(x)
    inner = fg.GradManager().attach(w)
    with outer:
        with inner:
            y = fg.conv2d(x, w, padding=1).tanh()
            inner.backward((y * y).sum())
        outer.backward(w.grad.sum())
    eps = 1e-6
    expected = np.zeros_like(x0)
    for idx in np.ndindex(*x0.shape):
        p, m = x0.copy(), x0.copy()
        p[idx] += eps
        m[idx] -= eps
        expected[idx] = (grad_w_sum(p) - grad_w_sum(m)) / (2 * eps)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_conv2d_bad_input():
    x = fg.tensor(np.zeros((1, 3, 5, 5), "f4"))
    with pytest.raises(ValueError, match="conv2d"):
        fg.conv2d(x, fg.tensor(np.zeros((4, 2, 3, 3), "f4")))
    with pytest.raises(TypeError, match="conv2d"):
        fg.conv2d(x, fg.tensor(np.zeros((4, 3, 3, 3), "f8")))
    with pytest.raises(ValueError, match="conv2d"):
        fg.conv2d(x, fg.tensor(np.zeros((4, 3, 7, 7), "f4")))
    with pytest.raises(ValueError, match="max_pool2d"):
        fg.max_pool2d(fg.tensor(np.zeros((3, 5, 5), "f4")), 2)
