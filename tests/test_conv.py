"""conv2d, max_pool2d and avg_pool2d: values against a direct numpy reference and gradients
against finite differences in float64 (including second order through nested managers)."""

import ferrograd as fg
import numpy as np
import pytest
from conftest import check_grad, conv2d_reference


def conv_ref(x, w, b, stride, padding, dilation, groups):
    return conv2d_reference(x, w, b, stride, padding, dilation, groups)


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
    w = fg.tensor(np.zeros((4, 3, 3, 3), "f4"))
    with pytest.raises(TypeError, match=r"conv2d.*float64"):
        fg.conv2d(x, w, fg.tensor(np.zeros(4, "f8")))
    with pytest.raises(ValueError, match=r"conv2d.*\[4\]"):
        fg.conv2d(x, w, fg.tensor(np.zeros(3, "f4")))
    with pytest.raises(ValueError, match="max_pool2d"):
        fg.max_pool2d(fg.tensor(np.zeros((3, 5, 5), "f4")), 2)


def _hvp_numeric(f, arrays, vs, eps=1e-5):
    """Finite differences of the gradient along the direction ``vs``: H @ v per input."""

    def grads_at(arrs):
        ts = [fg.tensor(a) for a in arrs]
        gm = fg.GradManager().attach(ts)
        with gm:
            gm.backward(f(*ts))
        return [t.grad.numpy() for t in ts]

    plus = grads_at([a + eps * v for a, v in zip(arrays, vs)])
    minus = grads_at([a - eps * v for a, v in zip(arrays, vs)])
    return [(p - m) / (2 * eps) for p, m in zip(plus, minus)]


@pytest.mark.parametrize("case", CASES + [{"stride": 1, "padding": 0, "dilation": 1, "groups": 3}])
def test_conv2d_hessian_vector_products_match_finite_differences(case):
    # second order through the convolution's input- and weight-gradient ops (every input of
    # each gets a gradient: x, w and the incoming gradient)
    rng = np.random.default_rng(5)
    g = case["groups"]
    c, o = 2 * g, 3 * g
    kh, kw = (1, 1) if g == 3 else (3, 2)
    x = rng.normal(size=(2, c, 6, 5))
    w = rng.normal(size=(o, c // g, kh, kw))
    b = rng.normal(size=o)

    def f(x_, w_, b_):
        y = fg.conv2d(x_, w_, b_, **case)
        return (y.tanh() * y).sum()

    vs = [rng.normal(size=a.shape) for a in (x, w, b)]
    _, hv = fg.hvp(f, [fg.tensor(a) for a in (x, w, b)], [fg.tensor(v) for v in vs])
    for got, want in zip(hv, _hvp_numeric(f, [x, w, b], vs)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def test_max_pool_hessian_vector_product_matches_finite_differences():
    rng = np.random.default_rng(6)
    x = rng.permutation(2 * 3 * 6 * 7).reshape(2, 3, 6, 7) / 10.0

    def f(x_):
        y = fg.max_pool2d(x_, 2)
        return (y * y * y).sum()

    v = rng.normal(size=x.shape)
    _, hv = fg.hvp(f, fg.tensor(x), fg.tensor(v))
    np.testing.assert_allclose(hv.numpy(), _hvp_numeric(f, [x], [v])[0], rtol=1e-6, atol=1e-6)


def pool_grad_ref(x, gy, k=2):
    """The gradient of k x k, stride-k max pooling: each window's gradient at its first
    maximum in row-major order, a NaN counting as the maximum."""
    n, c, h, w = x.shape
    oh, ow = h // k, w // k
    gx = np.zeros_like(x)
    for idx in np.ndindex(n, c, oh, ow):
        a, b, i, j = idx
        win = x[a, b, i * k : i * k + k, j * k : j * k + k].reshape(-1)
        nan = np.flatnonzero(np.isnan(win))
        p = nan[0] if nan.size else int(np.argmax(win))
        gx[a, b, i * k + p // k, j * k + p % k] += gy[idx]
    return gx


@pytest.mark.parametrize("dtype", ["f4", "f8"])
def test_max_pool_gradient_ties_nan_and_odd_sizes(dtype):
    rng = np.random.default_rng(7)
    # small integers: many ties inside windows; odd sizes leave a row and a column uncovered
    x = rng.integers(0, 3, size=(2, 3, 7, 9)).astype(dtype)
    x[0, 0, 0, 0] = -0.0
    x[0, 0, 0, 1] = 0.0
    x[1, 2, 3, 3] = np.nan
    x[1, 2, 2, 2] = np.nan
    gy = rng.normal(size=(2, 3, 3, 4)).astype(dtype)
    t = fg.tensor(x)
    gm = fg.GradManager().attach(t)
    with gm:
        y = fg.max_pool2d(t, 2)
        gm.backward(y, fg.tensor(gy))
    ref_y = x[:, :, :6, :8].reshape(2, 3, 3, 2, 4, 2).max(axis=(3, 5))
    np.testing.assert_array_equal(y.numpy(), ref_y)
    np.testing.assert_array_equal(t.grad.numpy(), pool_grad_ref(x, gy))


def test_conv2d_float32_matches_float64_on_strided_views_and_one_image():
    rng = np.random.default_rng(8)
    base = rng.normal(size=(1, 5, 9, 4))
    x = base.transpose(0, 1, 3, 2)
    w = rng.normal(size=(7, 5, 3, 3))
    want = conv_ref(np.ascontiguousarray(x), w, None, (1, 1), (1, 1), (1, 1), 1)
    for dtype, tol in (("f8", 1e-12), ("f4", 1e-4)):
        xt = fg.tensor(base.astype(dtype)).permute(0, 1, 3, 2)  # a non-contiguous view
        y = fg.conv2d(xt, fg.tensor(w.astype(dtype)), padding=1).numpy()
        np.testing.assert_allclose(y, want, rtol=tol, atol=tol)
    # a 1x1 convolution reads the image itself as its columns
    w1 = rng.normal(size=(3, 5, 1, 1))
    y = fg.conv2d(fg.tensor(np.ascontiguousarray(x)), fg.tensor(w1)).numpy()
    np.testing.assert_allclose(y, np.einsum("nchw,oc->nohw", x, w1[:, :, 0, 0]), rtol=1e-12)


def pool_ref(x, k, s, p, d, reduce, pad_value, count_include_pad=True):
    """Direct pooling: every window of the padded input (padding reads ``pad_value``)."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])), constant_values=pad_value)
    inside = np.pad(np.ones((h, w)), ((p[0], p[0]), (p[1], p[1])))
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            rows = slice(i * s[0], i * s[0] + d[0] * (k[0] - 1) + 1, d[0])
            cols = slice(j * s[1], j * s[1] + d[1] * (k[1] - 1) + 1, d[1])
            win = xp[:, :, rows, cols]
            if reduce == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            elif count_include_pad:
                out[:, :, i, j] = win.mean(axis=(2, 3))
            else:
                out[:, :, i, j] = win.sum(axis=(2, 3)) / inside[rows, cols].sum()
    return out


def test_max_pool_dilation_matches_reference_and_finite_differences():
    rng = np.random.default_rng(9)
    x = rng.permutation(2 * 3 * 9 * 8).reshape(2, 3, 9, 8) / 10.0
    kw = {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 1), "dilation": (2, 3)}
    y = fg.max_pool2d(fg.tensor(x), **kw).numpy()
    want = pool_ref(x, (3, 2), (2, 1), (1, 1), (2, 3), "max", -np.inf)
    np.testing.assert_array_equal(y, want)
    check_grad(lambda t: fg.max_pool2d(t, **kw), [x])
    with pytest.raises(ValueError, match="max_pool2d"):
        fg.max_pool2d(fg.tensor(x), 2, padding=2)  # more than half the kernel


@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool_count_include_pad(count_include_pad):
    rng = np.random.default_rng(10)
    x = rng.normal(size=(2, 3, 7, 6))
    kw = {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": count_include_pad}
    y = fg.avg_pool2d(fg.tensor(x), **kw).numpy()
    want = pool_ref(x, (3, 3), (2, 2), (1, 1), (1, 1), "avg", 0.0, count_include_pad)
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
    check_grad(lambda t: fg.avg_pool2d(t, **kw), [x])
    m = fg.nn.AvgPool2d(3, 2, 1, count_include_pad=count_include_pad)
    np.testing.assert_allclose(m(fg.tensor(x)).numpy(), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kernel,dilation", [((3, 3), (1, 1)), ((2, 4), (1, 1)), ((3, 2), (2, 3))])
def test_conv2d_padding_same_and_valid(kernel, dilation):
    rng = np.random.default_rng(11)
    x = rng.normal(size=(2, 4, 7, 6))
    w = rng.normal(size=(6, 2, *kernel))
    b = rng.normal(size=6)
    y = fg.conv2d(
        fg.tensor(x), fg.tensor(w), fg.tensor(b), padding="same", dilation=dilation, groups=2
    )
    # PyTorch's rule: total padding d*(k-1) per axis, the odd one extra at the bottom/right
    tot = [d * (k - 1) for k, d in zip(kernel, dilation)]
    xp = np.pad(
        x,
        ((0, 0), (0, 0), (tot[0] // 2, tot[0] - tot[0] // 2), (tot[1] // 2, tot[1] - tot[1] // 2)),
    )
    want = conv_ref(xp, w, b, (1, 1), (0, 0), dilation, 2)
    assert y.shape == (2, 6, 7, 6)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-12, atol=1e-12)
    check_grad(
        lambda x_, w_: fg.conv2d(x_, w_, padding="same", dilation=dilation, groups=2), [x, w]
    )
    valid = fg.conv2d(fg.tensor(x), fg.tensor(w), padding="valid", dilation=dilation, groups=2)
    np.testing.assert_allclose(
        valid.numpy(), conv_ref(x, w, None, (1, 1), (0, 0), dilation, 2), rtol=1e-12, atol=1e-12
    )
    with pytest.raises(ValueError, match="strided"):
        fg.conv2d(fg.tensor(x), fg.tensor(w), padding="same", stride=2, groups=2)
    with pytest.raises(ValueError, match="conv2d"):
        fg.conv2d(fg.tensor(x), fg.tensor(w), padding="full", groups=2)


def torch_pool_ref(x, k, s, p, reduce, ceil_mode, count_include_pad=True, divisor=None):
    """PyTorch's pooling rules written out: output size with ceil_mode, windows clipped to
    the padded input, then to the input (max ignores what lies outside)."""
    n, c, h, w = x.shape

    def out_size(size, kk, ss, pp):
        o = (size + 2 * pp - kk + ((ss - 1) if ceil_mode else 0)) // ss + 1
        if ceil_mode and (o - 1) * ss >= size + pp:
            o -= 1
        return o

    oh, ow = out_size(h, k[0], s[0], p[0]), out_size(w, k[1], s[1], p[1])
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * s[0] - p[0], j * s[1] - p[1]
            h1, w1 = min(h0 + k[0], h + p[0]), min(w0 + k[1], w + p[1])
            pool_size = (h1 - h0) * (w1 - w0)
            a0, b0, a1, b1 = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            win = x[:, :, a0:a1, b0:b1]
            if reduce == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                div = divisor or (pool_size if count_include_pad else (a1 - a0) * (b1 - b0))
                out[:, :, i, j] = win.sum(axis=(2, 3)) / div
    return out


@pytest.mark.parametrize("shape", [(2, 3, 7, 9), (1, 2, 8, 5)])
def test_pools_ceil_mode_and_divisor_override(shape):
    rng = np.random.default_rng(12)
    x = rng.permutation(int(np.prod(shape))).reshape(shape) / 10.0
    for k, s, p in (((2, 2), (2, 2), (0, 0)), ((3, 2), (2, 3), (1, 1))):
        y = fg.max_pool2d(fg.tensor(x), k, s, p, ceil_mode=True)
        np.testing.assert_array_equal(y.numpy(), torch_pool_ref(x, k, s, p, "max", True))
        check_grad(lambda t, k=k, s=s, p=p: fg.max_pool2d(t, k, s, p, ceil_mode=True), [x])
        for cip in (True, False):
            a = fg.avg_pool2d(fg.tensor(x), k, s, p, ceil_mode=True, count_include_pad=cip)
            want = torch_pool_ref(x, k, s, p, "avg", True, cip)
            np.testing.assert_allclose(a.numpy(), want, rtol=1e-12, atol=1e-12)
        d = fg.avg_pool2d(fg.tensor(x), k, s, p, divisor_override=5)
        want = torch_pool_ref(x, k, s, p, "avg", False, divisor=5)
        np.testing.assert_allclose(d.numpy(), want, rtol=1e-12, atol=1e-12)
        check_grad(
            lambda t, k=k, s=s, p=p: fg.avg_pool2d(
                t, k, s, p, ceil_mode=True, count_include_pad=False
            ),
            [x],
        )
    m = fg.nn.MaxPool2d(2, ceil_mode=True)
    assert m(fg.tensor(x)).shape[2:] == (-(-shape[2] // 2), -(-shape[3] // 2))
    with pytest.raises(ValueError, match="avg_pool2d"):
        fg.avg_pool2d(fg.tensor(x), 2, divisor_override=0)


@pytest.mark.parametrize(
    "case", CASES + [{"stride": (3, 2), "padding": (2, 0), "dilation": (2, 3), "groups": 1}]
)
def test_conv2d_input_gradient_is_the_same_every_run_and_on_every_device(case):
    # the input gradient sums the windows over each input position (fold) in a fixed order,
    # not with atomics: two runs agree to the bit (the devices' matrix products differ in
    # rounding, so the CPU is a reference to float32 accuracy)
    rng = np.random.default_rng(5)
    c, o = 4, 6
    x = rng.normal(size=(2, c, 9, 8)).astype(np.float32)
    w = rng.normal(size=(o, c // case["groups"], 3, 3)).astype(np.float32)

    def input_grad(device):
        xt = fg.tensor(x, device=device)
        gm = fg.GradManager().attach([xt])
        with gm:
            y = fg.conv2d(xt, fg.tensor(w, device=device), **case)
            gm.backward((y * y).sum())
        return xt.grad.numpy()

    first = input_grad(None)
    np.testing.assert_array_equal(first, input_grad(None))
    np.testing.assert_allclose(first, input_grad("cpu"), rtol=1e-4, atol=1e-4)
