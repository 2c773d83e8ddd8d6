"""Convolution, pooling, embedding and dropout behaviours from PyTorch's nn tests, each run
on PyTorch and on ferrograd from the same float64 inputs and compared."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest


def _torch():
    return pytest.importorskip("torch")


def _np(t) -> np.ndarray:
    return np.asarray(t.detach().numpy())


# ------------------------------------------------------------------------------ convolution


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_conv_same_padding_with_stride_raises_runtime_error(nd: int) -> None:
    torch = _torch()
    for lib in (torch, fg):
        x = lib.ones(1, 2, *([6] * nd), dtype=lib.float64)
        w = lib.ones(3, 2, *([3] * nd), dtype=lib.float64)
        conv = getattr(lib.nn.functional, f"conv{nd}d")
        with pytest.raises(RuntimeError, match="strided"):
            conv(x, w, stride=2, padding="same")
    # stride 1 still pads to the input's size
    y = getattr(fg.nn.functional, f"conv{nd}d")(
        fg.ones(1, 2, *([6] * nd), dtype=fg.float64),
        fg.ones(3, 2, *([3] * nd), dtype=fg.float64),
        padding="same",
    )
    assert list(y.shape) == [1, 3, *([6] * nd)]


# ---------------------------------------------------------------------------------- pooling


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_max_pool_window_of_only_neg_inf_next_to_padding(nd: int, ceil_mode: bool) -> None:
    torch = _torch()
    x = np.full((2, 1) + (4,) * nd, -np.inf)
    x.reshape(2, -1)[0, -1] = 1.0  # one finite value; the rest of the windows are all -inf
    results = []
    for lib in (torch, fg):
        t = lib.tensor(x, requires_grad=True)
        pool = getattr(lib.nn.functional, f"max_pool{nd}d")
        y, idx = pool(t, 3, 2, 1, ceil_mode=ceil_mode, return_indices=True)
        y.sum().backward()
        results.append((_np(y), _np(idx), _np(t.grad)))
    (ty, ti, tg), (fy, fi, fgrad) = results
    np.testing.assert_array_equal(fy, ty)
    np.testing.assert_array_equal(fi, ti)
    np.testing.assert_array_equal(fgrad, tg)
