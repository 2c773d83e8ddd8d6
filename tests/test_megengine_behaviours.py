"""Behaviours that MegEngine's own autodiff tests check, written against ferrograd: cos and
its second derivative through nested managers, bilinear downsampling's gradient, pixel
shuffle on more than 4 axes, one-hot indexing, boolean and multi-array indexing, dropout,
and the narrow dtypes."""

from __future__ import annotations

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest


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


def test_sin_first_and_second_derivative():
    a = np.random.default_rng(5).uniform(-3, 3, 10).astype("f4")
    x = fg.tensor(a)
    np.testing.assert_allclose(grad_of(fg.sin, x), np.cos(a), rtol=1e-6, atol=1e-7)
    x = fg.tensor(a)
    outer, inner = fg.GradManager().attach([x]), fg.GradManager().attach([x])
    with outer:
        with inner:
            inner.backward(fg.sin(x), fg.ones_like(x))
        dx = x.grad
        x.grad = None
        outer.backward(dx, fg.ones_like(dx))
    np.testing.assert_allclose(x.grad.numpy(), -np.sin(a), rtol=1e-5, atol=1e-6)


def test_batch_norm_training_gradient_and_running_statistics():
    # MegEngine's BatchNorm2d test: batch statistics per channel, running statistics with
    # momentum (MegEngine's momentum 0.9 is PyTorch's 0.1), the closed-form input gradient
    rng = np.random.default_rng(6)
    a = rng.standard_normal((4, 3, 2, 5)).astype("f4")
    dy = rng.standard_normal(a.shape).astype("f4")
    mean = a.mean((0, 2, 3), keepdims=True)
    var = a.var((0, 2, 3), keepdims=True)
    inv = 1 / np.sqrt(var + 1e-5)
    xhat = (a - mean) * inv
    x = fg.tensor(a)
    rm, rv = fg.zeros(3), fg.ones(3)
    gm = fg.GradManager().attach([x])
    with gm:
        y = F.batch_norm(x, rm, rv, training=True, momentum=0.1)
        gm.backward(y, fg.tensor(dy))
    np.testing.assert_allclose(y.numpy(), xhat, rtol=1e-4, atol=1e-5)
    m = a.size // 3
    dx = (
        inv
        / m
        * (
            m * dy
            - dy.sum((0, 2, 3), keepdims=True)
            - xhat * (dy * xhat).sum((0, 2, 3), keepdims=True)
        )
    )
    np.testing.assert_allclose(x.grad.numpy(), dx, rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(rm.numpy(), 0.1 * mean.reshape(3), rtol=1e-5, atol=1e-7)
    unbiased = var.reshape(3) * m / (m - 1)
    np.testing.assert_allclose(rv.numpy(), 0.9 + 0.1 * unbiased, rtol=1e-5)
    # eval mode normalises with the running statistics: the gradient is dy / sqrt(rv + eps)
    x.grad = None
    g = grad_of(lambda t: F.batch_norm(t, rm, rv, training=False), x)
    np.testing.assert_allclose(
        g, np.broadcast_to(1 / np.sqrt(rv.numpy() + 1e-5)[:, None, None], a.shape), rtol=1e-6
    )


def test_int8_storage_casts_arithmetic_and_indices():
    a = np.array([100, -7, 3, -128], np.int8)
    t = fg.tensor(a)
    assert t.dtype == fg.int8
    np.testing.assert_array_equal((t + t).numpy(), a + a)  # wraps around as numpy
    assert (t + t).dtype == np.int8
    assert (t * fg.tensor(np.float32(1.5))).dtype == np.float32  # int with float: the float
    f = fg.tensor(np.array([-2.7, 2.7, 127.9], "f4"))
    np.testing.assert_array_equal(f.astype("int8").numpy(), [-2, 2, 127])  # toward zero
    np.testing.assert_array_equal(t.astype("float32").numpy(), a.astype("f4"))
    # int8 indices pick rows and send the gradient back to them
    w = fg.tensor(np.arange(12.0, dtype="f4").reshape(4, 3))
    idx = fg.tensor(np.array([3, -1, 0], np.int8))
    np.testing.assert_array_equal(w[idx].numpy(), np.arange(12.0).reshape(4, 3)[[3, -1, 0]])
    g = grad_of(lambda t: t[idx] * 2, w)
    np.testing.assert_array_equal(g, [[2, 2, 2], [0, 0, 0], [0, 0, 0], [4, 4, 4]])
    # an int8 mask-like factor: the gradient is the factor
    x = fg.tensor(np.array([1.0, 2.0, 3.0], "f4"))
    np.testing.assert_array_equal(
        grad_of(lambda t: t * fg.tensor(np.array([1, 0, -1], np.int8)), x), [1, 0, -1]
    )


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "bool"])
def test_attaching_a_tensor_that_is_not_float_raises_megengines_assertion(dtype):
    gm = fg.GradManager()
    x = fg.tensor([1], dtype=dtype)
    with pytest.raises(AssertionError):
        gm.attach([x])
    with pytest.raises(fg.DTypeError, match="attach: only float"):
        gm.attach(x)
    gm.attach(fg.tensor([1.0], dtype="float16"))  # float16 can be attached


def test_functional_cross_takes_two_vectors():
    import ferrograd.functional as MF

    a, b = np.array([1.0, 2.0], "f4"), np.array([4.0, 5.0, 6.0], "f4")
    out = MF.cross(fg.tensor(a), fg.tensor(b)).numpy()
    np.testing.assert_allclose(out, np.cross(np.append(a, 0), b), rtol=1e-6)


def _ctc_reference(pred, label, blank):
    """MegEngine's naive CTC negative log-likelihood of one sequence of probabilities."""
    ext = np.full(2 * len(label) + 1, blank)
    ext[1::2] = label
    alpha = np.full(len(ext), -np.inf)
    alpha[:2] = np.log(pred[0, ext[:2]])
    for t in range(1, len(pred)):
        new = alpha.copy()
        new[1:] = np.logaddexp(new[1:], alpha[:-1])
        skip = np.r_[False, False, ext[2:] != ext[:-2]]
        new[skip] = np.logaddexp(new[skip], alpha[:-2][skip[2:]])
        alpha = new + np.log(pred[t, ext])
    return -np.logaddexp(alpha[-1], alpha[-2])


def test_functional_ctc_loss_megengine_signature_on_probabilities():
    import ferrograd.functional as MF

    rng = np.random.default_rng(0)
    T, N, C = 12, 2, 5
    pred = rng.random((T, N, C)).astype("f4")
    pred /= pred.sum(-1, keepdims=True)
    lengths = np.array([3, 4], "i4")
    label = np.array([1, 2, 3, 4, 1, 2, 2], "i4")
    per = [
        _ctc_reference(pred[:, 0], label[:3], 0),
        _ctc_reference(pred[:, 1], label[3:], 0),
    ]
    args = (fg.tensor(pred), fg.tensor(np.full(N, T, "i4")), fg.tensor(label))
    for reduction, want in [
        ("none", per),
        ("sum", sum(per)),
        ("mean", np.mean(np.array(per) / lengths)),
    ]:
        got = MF.nn.ctc_loss(*args, fg.tensor(lengths), blank=0, reduction=reduction)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)


def test_functional_sliding_window_and_transpose():
    import itertools

    import ferrograd.functional as MF

    N, C, H, W = 2, 3, 7, 8
    (ph, pw), (sh, sw), (wh, ww), (dh, dw) = (1, 2), (2, 1), (3, 2), (1, 3)
    inp = np.random.default_rng(0).normal(size=(N, C, H, W)).astype("f4")
    pad = np.pad(inp, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh, ow = (H + 2 * ph - (wh - 1) * dh - 1) // sh + 1, (W + 2 * pw - (ww - 1) * dw - 1) // sw + 1
    want = np.empty((N, C, oh, ow, wh, ww), "f4")
    for i, j in itertools.product(range(oh), range(ow)):
        ih, iw = i * sh, j * sw
        want[:, :, i, j] = pad[
            :, :, ih : ih + (wh - 1) * dh + 1 : dh, iw : iw + (ww - 1) * dw + 1 : dw
        ]
    kw = {"padding": (ph, pw), "stride": (sh, sw), "dilation": (dh, dw)}
    out = MF.sliding_window(fg.tensor(inp), (wh, ww), **kw)
    np.testing.assert_array_equal(out.numpy(), want)
    # the transpose scatters (adds) every window back: its image of the windows of ones
    back = MF.sliding_window_transpose(fg.ones(want.shape), (H, W), (wh, ww), **kw).numpy()
    counts = np.zeros((H + 2 * ph, W + 2 * pw), "f4")
    for i, j, a, b in itertools.product(range(oh), range(ow), range(wh), range(ww)):
        counts[i * sh + a * dh, j * sw + b * dw] += 1
    np.testing.assert_allclose(back, np.broadcast_to(counts[ph : ph + H, pw : pw + W], back.shape))


@pytest.mark.parametrize("groups", [1, 2])
def test_functional_local_conv2d(groups):
    import itertools

    import ferrograd.functional as MF
    import ferrograd.module as M

    rng = np.random.default_rng(groups)
    n, ic, oc, hw = 2, 4, 8, 10
    data = rng.random((n, ic, hw, hw)).astype("f4")
    weight = rng.random((groups, hw, hw, ic // groups, 3, 3, oc // groups)).astype("f4")
    pad = np.pad(data, ((0, 0), (0, 0), (1, 1), (1, 1)))
    icg, ocg = ic // groups, oc // groups
    want = np.zeros((n, oc, hw, hw), "f4")
    for b, o, i, j in itertools.product(range(n), range(oc), range(hw), range(hw)):
        g = o // ocg
        patch = pad[b, g * icg : (g + 1) * icg, i : i + 3, j : j + 3]
        want[b, o, i, j] = np.sum(patch * weight[g, i, j, :, :, :, o % ocg])
    out = MF.local_conv2d(fg.tensor(data), fg.tensor(weight), None, stride=1, padding=1)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5)
    m = M.LocalConv2d(ic, oc, hw, hw, 3, padding=1, groups=groups)
    assert m.weight.shape == weight.shape
    with fg.no_grad():
        m.weight[...] = fg.tensor(weight)
    np.testing.assert_allclose(m(fg.tensor(data)).numpy(), want, rtol=1e-5)


def test_vision_cvt_color_to_gray():
    import ferrograd.functional as MF

    inp = np.random.default_rng(0).normal(size=(3, 3, 3, 3)).astype("f4")
    for mode, w in [("RGB2GRAY", [0.299, 0.587, 0.114]), ("BGR2GRAY", [0.114, 0.587, 0.299])]:
        out = MF.vision.cvt_color(fg.tensor(inp), mode=mode).numpy()
        np.testing.assert_allclose(out, np.expand_dims(inp @ np.array(w), 3), atol=1e-5)
