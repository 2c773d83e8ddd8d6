"""Resampling, padding, patch, shuffling, distance and normalization functionals from
PyTorch's nn tests (``interpolate`` and the ``Upsample`` layers, ``grid_sample`` and
``affine_grid``, ``pad``, ``fold``/``unfold``, ``pixel_shuffle``, ``ChannelShuffle``,
``cosine_similarity``, ``pairwise_distance``, ``pdist``, ``cdist``, ``normalize``,
``one_hot``, local response normalization, ``embedding``'s ``scale_grad_by_freq``): each
case runs on PyTorch and on ferrograd from the same float64 inputs and compares the values,
the gradients (and, where the gradient is the true one, central finite differences), or the
exception type of a refused argument."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import ferrograd as fg
import numpy as np
import pytest

_RNG = np.random.default_rng(20240607)


def _torch():
    return pytest.importorskip("torch")


def _r(*shape: int) -> np.ndarray:
    return _RNG.standard_normal(shape)


def _np(t: Any) -> np.ndarray:
    return np.asarray(t.detach().numpy())


def _run(lib: Any, fn: Callable[..., Any], arrays: list[np.ndarray], grads: list[bool]):
    """``fn(lib, F, *tensors)``: its value, and the gradients of a fixed weighted sum of it
    with respect to the arrays marked in ``grads``."""
    ts = []
    for a, g in zip(arrays, grads):
        t = lib.tensor(a)
        if g:
            t.requires_grad_(True)
        ts.append(t)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(lib, lib.nn.functional, *ts)
    gs: list[Any] = [None] * len(ts)
    if any(grads):
        w = np.cos(np.arange(int(np.prod(out.shape)))).reshape(tuple(out.shape))
        (out * lib.tensor(w)).sum().backward()
        gs = [
            (_np(t.grad) if t.grad is not None else np.zeros_like(a)) if g else None
            for t, g, a in zip(ts, grads, arrays)
        ]
    return _np(out), gs


def _finite_diff(fn: Callable[..., Any], arrays: list[np.ndarray], i: int) -> np.ndarray:
    """Central differences of the same weighted sum with respect to ``arrays[i]``."""

    def f(a: np.ndarray) -> float:
        args = [fg.tensor(a if j == i else x) for j, x in enumerate(arrays)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = _np(fn(fg, fg.nn.functional, *args))
        w = np.cos(np.arange(out.size)).reshape(out.shape)
        return float((out * w).sum())

    x = np.array(arrays[i], dtype=np.float64)
    g = np.zeros_like(x)
    h = 1e-6
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        g[idx] = (f(xp) - f(xm)) / (2 * h)
    return g


def _compare(
    fn: Callable[..., Any],
    arrays: list[np.ndarray],
    grads: list[bool] | None = None,
    fd: bool = True,
) -> None:
    """Same value and gradients as PyTorch; with ``fd`` the gradients also match finite
    differences of the value."""
    torch = _torch()
    if grads is None:
        grads = [np.asarray(a).dtype.kind == "f" for a in arrays]
    want, want_g = _run(torch, fn, arrays, grads)
    got, got_g = _run(fg, fn, arrays, grads)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10)
    for i, (a, b) in enumerate(zip(got_g, want_g)):
        if b is None:
            continue
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9, err_msg=f"gradient {i}")
        if fd:
            np.testing.assert_allclose(
                a, _finite_diff(fn, arrays, i), rtol=1e-5, atol=1e-6, err_msg=f"fd {i}"
            )


def _same_error(fn: Callable[[Any, Any], Any]) -> None:
    """``fn(lib, F)`` raises on both libraries, ferrograd's exception an instance of
    PyTorch's type."""
    torch = _torch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception) as want:
            fn(torch, torch.nn.functional)
        with pytest.raises(type(want.value)):
            fn(fg, fg.nn.functional)


# ------------------------------------------------------------------------- interpolate

_SIZES: list[dict[str, Any]] = [
    {"size": 4},
    {"scale_factor": 2},
    {"size": 11},
    {"scale_factor": 0.5},
    {"scale_factor": 1.7},
    {"scale_factor": 0.6},
    {"size": 3},
    {"scale_factor": 2.3, "recompute_scale_factor": True},
]


@pytest.mark.parametrize("kw", _SIZES, ids=str)
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("shape", [(2, 3, 7), (1, 2, 5, 6), (1, 1, 3, 4, 5)])
def test_interpolate_nearest(shape: tuple, mode: str, kw: dict) -> None:
    _compare(lambda L, F, x: F.interpolate(x, mode=mode, **kw), [_r(*shape)])


@pytest.mark.parametrize("kw", [*_SIZES, {"size": 1}], ids=str)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize(
    "mode,shape",
    [
        ("linear", (2, 3, 7)),
        ("bilinear", (1, 2, 5, 6)),
        ("bicubic", (1, 2, 5, 6)),
        ("trilinear", (1, 1, 3, 4, 5)),
    ],
)
def test_interpolate_linear_modes(mode: str, shape: tuple, align_corners: bool, kw: dict) -> None:
    _compare(
        lambda L, F, x: F.interpolate(x, mode=mode, align_corners=align_corners, **kw),
        [_r(*shape)],
    )


@pytest.mark.parametrize("kw", [{"size": 4}, {"scale_factor": 0.5}, {"scale_factor": 0.6}])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_interpolate_antialias(mode: str, align_corners: bool, kw: dict) -> None:
    _compare(
        lambda L, F, x: F.interpolate(
            x, mode=mode, align_corners=align_corners, antialias=True, **kw
        ),
        [_r(1, 2, 9, 8)],
    )


@pytest.mark.parametrize(
    "kw", [{"size": 4}, {"scale_factor": 2}, {"scale_factor": 0.5}, {"scale_factor": 1.7}], ids=str
)
@pytest.mark.parametrize("shape", [(2, 3, 7), (1, 2, 5, 6), (1, 1, 3, 4, 5)])
def test_interpolate_area(shape: tuple, kw: dict) -> None:
    _compare(lambda L, F, x: F.interpolate(x, mode="area", **kw), [_r(*shape)])


@pytest.mark.parametrize(
    "mode,shape,scale",
    [
        ("nearest", (1, 2, 5, 6), (2.0, 0.5)),
        ("bilinear", (1, 2, 5, 6), (1.5, 0.4)),
        ("trilinear", (1, 1, 3, 4, 5), (1.5, 0.4, 2.2)),
        ("area", (1, 2, 5, 6), (0.5, 1.5)),
    ],
)
def test_interpolate_scale_factor_tuple(mode: str, shape: tuple, scale: tuple) -> None:
    _compare(lambda L, F, x: F.interpolate(x, scale_factor=scale, mode=mode), [_r(*shape)])


def test_interpolate_known_values() -> None:
    # PyTorch's bicubic 2x2 -> 4x4 and 0.5 bilinear shrink checks, and nearest 20 -> 11
    _compare(
        lambda L, F, x: F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=False),
        [np.arange(4.0).reshape(1, 1, 2, 2)],
    )
    _compare(
        lambda L, F, x: L.nn.Upsample(scale_factor=0.5, mode="bilinear")(x),
        [np.arange(1.0, 5.0).reshape(1, 1, 2, 2)],
    )
    _compare(
        lambda L, F, x: F.interpolate(x, size=11, mode="nearest-exact"),
        [np.arange(20.0).reshape(1, 1, 20)],
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda L: L.nn.UpsamplingNearest2d(scale_factor=2),
        lambda L: L.nn.UpsamplingNearest2d(size=(5, 4)),
        lambda L: L.nn.UpsamplingBilinear2d(scale_factor=2),
        lambda L: L.nn.UpsamplingBilinear2d(size=(5, 4)),
        lambda L: L.nn.Upsample(scale_factor=(2, 3), mode="bicubic", align_corners=True),
    ],
)
def test_upsampling_layers(make: Callable[[Any], Any]) -> None:
    _compare(lambda L, F, x: make(L)(x), [_r(1, 2, 3, 3)])
    torch = _torch()
    want, got = make(torch), make(fg)
    assert repr(got) == repr(want)
    assert isinstance(got, fg.nn.Upsample)
    assert (got.mode, got.align_corners, got.scale_factor, got.size) == (
        want.mode,
        want.align_corners,
        want.scale_factor,
        want.size,
    )


@pytest.mark.parametrize(
    "fn",
    [
        lambda L, F: F.interpolate(L.zeros(1, 2, 3), size=4, mode="bilinear"),
        lambda L, F: F.interpolate(L.zeros(1, 2, 3, 3), size=4, mode="linear"),
        lambda L, F: F.interpolate(L.zeros(1, 2, 3, 3), size=4, mode="trilinear"),
        lambda L, F: F.interpolate(L.zeros(2, 3), size=4),
        lambda L, F: F.interpolate(L.zeros(1, 1, 1, 1, 1, 3), size=4),
        lambda L, F: F.interpolate(L.zeros(1, 2, 3), size=4, mode="foo"),
        lambda L, F: F.interpolate(L.zeros(1, 2, 3), size=4, scale_factor=2),
        lambda L, F: F.interpolate(L.zeros(1, 2, 3)),
        lambda L, F: F.interpolate(L.zeros(1, 2, 3), size=4, align_corners=False),
        lambda L, F: F.interpolate(L.zeros(1, 2, 3), size=4, mode="area", align_corners=True),
        lambda L, F: F.interpolate(L.zeros(1, 2, 3, 3), size=(4, 4, 4)),
        lambda L, F: F.interpolate(L.zeros(1, 2, 3, 3), scale_factor=(2, 2, 2)),
        lambda L, F: F.interpolate(L.zeros(1, 2, 3), size=4, recompute_scale_factor=True),
        lambda L, F: F.interpolate(L.zeros(1, 2, 3, 3), scale_factor=-1e20),
        lambda L, F: F.interpolate(L.zeros(1, 2, 3), size=0),
        lambda L, F: F.interpolate(L.zeros(1, 2, 3), scale_factor=0.1),
        lambda L, F: F.interpolate(L.zeros(1, 2, 3), size=4, mode="linear", antialias=True),
        lambda L, F: F.interpolate(L.arange(6).reshape(1, 2, 3), size=4),
        lambda L, F: F.interpolate(L.arange(6).reshape(1, 1, 2, 3), size=4, mode="bilinear"),
        lambda L, F: F.interpolate(L.zeros(1, 0, 3, 3), size=4),
        lambda L, F: F.interpolate(L.zeros(1, 1, 0, 3), size=4),
    ],
)
def test_interpolate_refuses(fn: Callable[[Any, Any], Any]) -> None:
    _same_error(fn)


def test_interpolate_empty_batch() -> None:
    _compare(
        lambda L, F, x: F.interpolate(x, size=4, mode="bilinear"),
        [np.zeros((0, 2, 3, 3))],
        fd=False,
    )
    torch = _torch()
    out = torch.nn.functional.interpolate(torch.zeros(1, 0, 3, 3), size=4, mode="area")
    assert fg.nn.functional.interpolate(fg.zeros(1, 0, 3, 3), size=4, mode="area").shape == (
        tuple(out.shape)
    )


def test_interpolate_nearest_3d_gradient_with_float_scale() -> None:
    # PyTorch's upsample_nearest3d backward with a non-integer scale_factor (not recomputed)
    # disagrees with its own forward; ferrograd's gradient is the forward's derivative
    def fn(L: Any, F: Any, x: Any) -> Any:
        return F.interpolate(x, mode="nearest", scale_factor=2.3, recompute_scale_factor=False)

    x = _r(1, 1, 3, 4, 5)
    torch = _torch()
    want, _ = _run(torch, fn, [x], [False])
    got, (g,) = _run(fg, fn, [x], [True])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(g, _finite_diff(fn, [x], 0), rtol=1e-6, atol=1e-7)


def test_interpolate_antialias_to_width_one() -> None:
    # PyTorch's antialias kernel returns a constant (or zeros) when the output width is 1;
    # ferrograd resizes each axis on its own, so the result is the transpose of resizing the
    # transposed input, which PyTorch gets right
    torch = _torch()
    x = np.arange(22.0).reshape(1, 1, 2, 11)

    def run(L: Any, a: np.ndarray, size: tuple) -> np.ndarray:
        out = L.nn.functional.interpolate(
            L.tensor(a), size=size, mode="bicubic", antialias=True, align_corners=False
        )
        return _np(out)

    want = run(torch, x.transpose(0, 1, 3, 2).copy(), (1, 5)).transpose(0, 1, 3, 2)
    np.testing.assert_allclose(run(fg, x, (5, 1)), want, rtol=1e-10)
