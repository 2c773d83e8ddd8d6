"""3-D convolutions and pools (``(N, C, D, H, W)``): values and gradients against PyTorch
in float64."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")
F, T = fg.nn.functional, None
RNG = np.random.default_rng(0)


def _compare(fn_fg, fn_torch, *arrays):
    fa = [fg.tensor(a, requires_grad=True) for a in arrays]
    ta = [torch.tensor(a, requires_grad=True) for a in arrays]
    fy, ty = fn_fg(*fa), fn_torch(*ta)
    assert tuple(fy.shape) == tuple(ty.shape)
    g = RNG.standard_normal(tuple(ty.shape))
    (fy * fg.tensor(g)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(fy.numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-11)
    for a, b in zip(fa, ta):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-11)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"stride": 2},
        {"stride": (2, 1, 2), "padding": (1, 0, 2), "dilation": (2, 1, 1), "groups": 2},
        {"padding": "same"},
    ],
)
def test_conv3d(kw):
    x = RNG.standard_normal((2, 4, 5, 6, 7))
    w = RNG.standard_normal((6, 4 // kw.get("groups", 1), 3, 2, 3))
    b = RNG.standard_normal(6)
    tf = torch.nn.functional
    _compare(lambda *a: F.conv3d(*a, **kw), lambda *a: tf.conv3d(*a, **kw), x, w, b)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"stride": 2},
        {
            "stride": (2, 1, 3),
            "padding": (1, 0, 1),
            "output_padding": (1, 0, 2),
            "dilation": (1, 2, 1),
        },
        {"groups": 2, "stride": 2},
    ],
)
def test_conv_transpose3d(kw):
    x = RNG.standard_normal((2, 4, 3, 4, 3))
    w = RNG.standard_normal((4, 3, 3, 2, 3))
    tf = torch.nn.functional
    _compare(
        lambda *a: F.conv_transpose3d(*a, **kw), lambda *a: tf.conv_transpose3d(*a, **kw), x, w
    )


POOLS = [
    {"kernel_size": 2},
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": (3, 2, 2), "stride": (2, 1, 2), "padding": (1, 1, 0), "ceil_mode": True},
]


@pytest.mark.parametrize(
    "kw",
    [
        *POOLS,
        {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
        {"kernel_size": 3, "stride": 2, "padding": 1, "divisor_override": 5},
    ],
)
def test_avg_pool3d(kw):
    x = RNG.integers(0, 3, (2, 3, 6, 7, 5)).astype(np.float64)
    tf = torch.nn.functional
    _compare(lambda a: F.avg_pool3d(a, **kw), lambda a: tf.avg_pool3d(a, **kw), x)


@pytest.mark.parametrize("kw", [*POOLS, {"kernel_size": 3, "dilation": (1, 2, 1)}])
def test_max_pool3d_sends_ties_to_the_first_maximum(kw):
    x = RNG.integers(0, 3, (2, 3, 6, 7, 5)).astype(np.float64)  # many ties
    tf = torch.nn.functional
    _compare(lambda a: F.max_pool3d(a, **kw), lambda a: tf.max_pool3d(a, **kw), x)


@pytest.mark.parametrize("out", [(3, 2, 4), (1, 1, 1), (4, None, 3)])
def test_adaptive_pools_3d(out):
    x = RNG.integers(0, 3, (2, 3, 6, 7, 5)).astype(np.float64)
    tf = torch.nn.functional
    _compare(lambda a: F.adaptive_avg_pool3d(a, out), lambda a: tf.adaptive_avg_pool3d(a, out), x)
    _compare(lambda a: F.adaptive_max_pool3d(a, out), lambda a: tf.adaptive_max_pool3d(a, out), x)


def test_modules_hold_torch_shaped_weights_and_load_torch_state():
    tm = torch.nn.Sequential(
        torch.nn.Conv3d(2, 4, 3, padding=1),
        torch.nn.BatchNorm3d(4),
        torch.nn.ReLU(),
        torch.nn.MaxPool3d(2),
        torch.nn.ConvTranspose3d(4, 2, 2, stride=2),
        torch.nn.AdaptiveAvgPool3d(1),
    ).double()
    fm = fg.nn.Sequential(
        fg.nn.Conv3d(2, 4, 3, padding=1),
        fg.nn.BatchNorm3d(4),
        fg.nn.ReLU(),
        fg.nn.MaxPool3d(2),
        fg.nn.ConvTranspose3d(4, 2, 2, stride=2),
        fg.nn.AdaptiveAvgPool3d(1),
    ).double()
    fm.load_state_dict({k: fg.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    x = RNG.standard_normal((2, 2, 4, 6, 4))
    np.testing.assert_allclose(
        fm(fg.tensor(x)).numpy(), tm(torch.tensor(x)).detach().numpy(), rtol=1e-10
    )
    np.testing.assert_allclose(fm[1].running_mean.numpy(), tm[1].running_mean.numpy(), rtol=1e-10)


def test_bad_input_names_the_op():
    with pytest.raises(fg.ShapeError, match="conv3d"):
        F.conv3d(fg.zeros(2, 3, 3), fg.zeros(1, 2, 1, 1, 1))
    with pytest.raises(fg.ShapeError, match="max_pool3d"):
        F.max_pool3d(fg.zeros(2, 3, 3), 2)
