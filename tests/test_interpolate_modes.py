"""interpolate's bicubic (4-D) and trilinear/nearest (5-D) modes against PyTorch."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")

CASES = [
    ((2, 3, 5, 7), "bicubic", {"size": (9, 4)}),
    ((2, 3, 5, 7), "bicubic", {"scale_factor": 2.5}),
    ((1, 2, 4, 6), "bicubic", {"scale_factor": (0.5, 1.7)}),
    ((2, 2, 3, 4, 5), "trilinear", {"size": (5, 3, 7)}),
    ((2, 2, 3, 4, 5), "trilinear", {"scale_factor": 2}),
]


@pytest.mark.parametrize(("shape", "mode", "kw"), CASES)
@pytest.mark.parametrize("align_corners", [None, True, False])
def test_values_and_gradients_equal_torch(shape, mode, kw, align_corners):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.interpolate(tx, mode=mode, align_corners=align_corners, **kw)
    g = rng.standard_normal(tuple(ty.shape))
    (ty * torch.tensor(g)).sum().backward()
    fx = fg.tensor(x, requires_grad=True)
    fy = fg.nn.functional.interpolate(fx, mode=mode, align_corners=align_corners, **kw)
    assert tuple(fy.shape) == tuple(ty.shape)
    (fy * fg.tensor(g)).sum().backward()
    np.testing.assert_allclose(fy.numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_nearest_on_volumes_and_upsample_module():
    x = np.random.default_rng(1).standard_normal((1, 2, 2, 3, 4)).astype(np.float32)
    fy = fg.nn.Upsample(scale_factor=2, mode="nearest")(fg.tensor(x))
    ty = torch.nn.Upsample(scale_factor=2, mode="nearest")(torch.tensor(x))
    np.testing.assert_array_equal(fy.numpy(), ty.numpy())
    xi = np.random.default_rng(2).standard_normal((1, 1, 4, 4)).astype(np.float32)
    fb = fg.nn.Upsample(size=(7, 5), mode="bicubic", align_corners=True)(fg.tensor(xi))
    tb = torch.nn.Upsample(size=(7, 5), mode="bicubic", align_corners=True)(torch.tensor(xi))
    np.testing.assert_allclose(fb.numpy(), tb.numpy(), rtol=1e-5, atol=1e-6)


def test_a_mode_that_does_not_fit_the_input_is_refused():
    with pytest.raises(fg.ShapeError, match="bicubic"):
        fg.nn.functional.interpolate(fg.zeros(1, 1, 4), scale_factor=2, mode="bicubic")
    with pytest.raises(ValueError, match="mode"):
        fg.nn.functional.interpolate(fg.zeros(1, 1, 4, 4), scale_factor=2, mode="cubic")
