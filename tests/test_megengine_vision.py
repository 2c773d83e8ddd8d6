"""MegEngine's image warps (functional.vision.remap / warp_affine / warp_perspective):
values from MegEngine's documented examples, OpenCV's border modes against numpy's padding,
and gradients in float64 against finite differences."""

import ferrograd as fg
import ferrograd.functional as F
import numpy as np
import pytest

SHIFT = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0], [0.0, 0.0, 1.0]], dtype=np.float32)


@pytest.mark.parametrize("dt", [np.float32, np.int8, np.uint8, np.float16])
def test_warp_perspective_translation(dt):
    x = fg.tensor(np.arange(16, dtype=dt).reshape(1, 1, 4, 4))
    out = F.vision.warp_perspective(x, fg.tensor(SHIFT.reshape(1, 3, 3)), (2, 2))
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(out.numpy(), np.array([[[[5, 6], [9, 10]]]], dtype=dt))


def test_warp_perspective_mat_idx_picks_the_image_of_each_matrix():
    x = fg.tensor(np.arange(32, dtype=np.float32).reshape(2, 1, 4, 4))
    m = fg.tensor(np.stack([SHIFT] * 4))
    out = F.vision.warp_perspective(x, m, (2, 2), mat_idx=[0, 1, 1, 0]).numpy()
    np.testing.assert_array_equal(out[:, 0, 0, 0], [5, 21, 21, 5])


def test_remap_example():
    inp = fg.tensor(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4))
    m = np.array([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [0.0, 1.0]]], dtype=np.float32)
    out = F.vision.remap(inp, fg.tensor(m.reshape(1, 2, 2, 2)))
    np.testing.assert_array_equal(out.numpy(), [[[[1.0, 4.0], [4.0, 4.0]]]])


def test_warp_affine_wrap_uses_fixed_point_weights():
    x = fg.tensor(np.arange(27, dtype=np.float32).reshape(1, 3, 3, 3))
    mat = [[[1.26666667, 0.6, -83.33333333], [-0.33333333, 1, 66.66666667]]]
    out = F.vision.warp_affine(x, fg.tensor(mat), (2, 2), border_mode="wrap")
    expect = [
        [
            [[7.875, 8.875, 9.875], [8.90625, 9.90625, 10.90625]],
            [[18.75, 19.75, 20.75], [14.90625, 15.90625, 16.90625]],
        ]
    ]
    np.testing.assert_allclose(out.numpy(), expect, atol=1e-5)


@pytest.mark.parametrize(
    ("mode", "pad"),
    [("replicate", "edge"), ("reflect", "symmetric"), ("reflect_101", "reflect"), ("wrap", "wrap")],
)
def test_border_modes_match_opencvs_definitions(mode, pad):
    rng = np.random.default_rng(0)
    img = rng.standard_normal((1, 1, 5, 6))
    ys, xs = np.meshgrid(np.arange(-4, 9), np.arange(-5, 11), indexing="ij")
    m = np.stack([xs, ys], -1)[None].astype(np.float64)
    out = F.vision.remap(fg.tensor(img), fg.tensor(m), border_mode=mode, interp_mode="nearest")
    padded = np.pad(img[0, 0], ((4, 4), (5, 5)), mode=pad)
    np.testing.assert_array_equal(out.numpy()[0, 0], padded)


def test_constant_border_takes_the_border_value():
    img = fg.ones(1, 1, 3, 3)
    m = fg.tensor(np.array([[[[-1.0, 0.0], [1.0, 1.0]]]], dtype=np.float32))
    out = F.vision.remap(img, m, border_mode="constant", scalar=7.0, interp_mode="nearest")
    np.testing.assert_array_equal(out.numpy(), [[[[7.0, 1.0]]]])


@pytest.mark.parametrize("border", ["replicate", "constant"])
def test_warp_perspective_gradients_match_finite_differences(border):
    rng = np.random.default_rng(1)
    img = fg.tensor(rng.standard_normal((1, 2, 5, 5)), requires_grad=True)
    mat = np.array([[[0.9, 0.1, 0.37], [-0.05, 1.1, 0.21], [0.01, 0.02, 1.0]]])
    m = fg.tensor(mat, requires_grad=True)

    def f(img, m):
        return F.vision.warp_perspective(img, m, (4, 4), border_mode=border)

    assert fg.autograd.gradcheck(f, (img, m))


def test_warp_affine_and_perspective_gradients_agree():
    x = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)
    dy = fg.tensor(np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3))
    xa, xp = fg.tensor(x), fg.tensor(x)
    ma = fg.tensor(np.array([[[0.5, 0, 0], [0, 0.5, 0]]], dtype=np.float32))
    mp = fg.tensor(np.array([[[0.5, 0, 0], [0, 0.5, 0], [0, 0, 1]]], dtype=np.float32))
    gm = fg.GradManager().attach([xa, ma, xp, mp])
    with gm:
        ya = F.warp_affine(xa, ma, (3, 3), format="NCHW")
        yp = F.warp_perspective(xp, mp, (3, 3))
        gm.backward([ya, yp], [dy, dy])
    np.testing.assert_allclose(xa.grad.numpy(), xp.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ma.grad.numpy(), mp.grad.numpy()[:, :2], rtol=1e-5, atol=1e-5)


def _bilinear_ref(img, y, x):
    """Detectron2's RoIAlign bilinear sample of one (C, H, W) image (scalar loops)."""
    _, h, w = img.shape
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return np.zeros(img.shape[0])
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(np.floor(y)), int(np.floor(x))
    if y0 >= h - 1:
        y0 = y1 = h - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= w - 1:
        x0 = x1 = w - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = y - y0, x - x0
    return (
        (1 - ly) * (1 - lx) * img[:, y0, x0]
        + (1 - ly) * lx * img[:, y0, x1]
        + ly * (1 - lx) * img[:, y1, x0]
        + ly * lx * img[:, y1, x1]
    )


def _roi_align_ref(inp, rois, ph, pw, scale, samples, aligned, mode):
    out = np.zeros((len(rois), inp.shape[1], ph, pw))
    off = 0.5 if aligned else 0.0
    for k, (b, x1, y1, x2, y2) in enumerate(rois):
        sx, sy = x1 * scale - off, y1 * scale - off
        rw, rh = x2 * scale - off - sx, y2 * scale - off - sy
        if not aligned:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / ph, rw / pw
        for i in range(ph):
            for j in range(pw):
                vals = [
                    _bilinear_ref(
                        inp[int(b)],
                        sy + i * bh + (iy + 0.5) * bh / samples,
                        sx + j * bw + (ix + 0.5) * bw / samples,
                    )
                    for iy in range(samples)
                    for ix in range(samples)
                ]
                out[k, :, i, j] = np.mean(vals, 0) if mode == "average" else np.max(vals, 0)
    return out


@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("mode", ["average", "max"])
def test_roi_align_matches_a_loop_reference(aligned, mode):
    rng = np.random.default_rng(2)
    inp = rng.standard_normal((2, 3, 12, 10))
    rois = np.array(
        [[0, 1.0, 2.0, 30.0, 40.0], [1, -6.0, 3.0, 20.0, 60.0], [1, 10.0, 10.0, 11.0, 12.0]]
    )
    got = F.vision.roi_align(
        fg.tensor(inp), fg.tensor(rois), (3, 4), mode, 0.25, 2, aligned
    ).numpy()
    np.testing.assert_allclose(
        got, _roi_align_ref(inp, rois, 3, 4, 0.25, 2, aligned, mode), atol=1e-12
    )


def test_roi_align_gradient_and_empty_inputs():
    rng = np.random.default_rng(3)
    inp = fg.tensor(rng.standard_normal((1, 2, 6, 6)), requires_grad=True)
    rois = fg.tensor(np.array([[0, 0.3, 0.7, 17.1, 13.9]]))
    assert fg.autograd.gradcheck(
        lambda x: F.vision.roi_align(x, rois, (2, 2), spatial_scale=0.25), (inp,)
    )
    empty = F.vision.roi_align(fg.randn(2, 3, 8, 8), fg.zeros(0, 5), (7, 7), spatial_scale=0.25)
    assert empty.shape == (0, 3, 7, 7)
    assert F.vision.roi_align(fg.randn(2, 0, 8, 8), fg.rand(4, 5), (7, 7)).shape == (4, 0, 7, 7)


def test_roi_pooling_takes_the_max_of_each_bin():
    inp = fg.tensor(np.arange(64, dtype=np.float64).reshape(1, 1, 8, 8), requires_grad=True)
    rois = fg.tensor(np.array([[0, 0.0, 0.0, 7.0, 7.0]]))
    out = F.vision.roi_pooling(inp, rois, (2, 2), scale=1.0)
    np.testing.assert_array_equal(out.numpy(), [[[[27.0, 31.0], [59.0, 63.0]]]])
    out.sum().backward()
    assert inp.grad.numpy().sum() == 4.0
