"""Resampling, padding, patch, shuffling, distance and normalization functionals from
PyTorch's nn tests (``interpolate`` and the ``Upsample`` layers, ``grid_sample`` and
``affine_grid``, ``pad``, ``fold``/``unfold``, ``pixel_shuffle``, ``ChannelShuffle``,
``cosine_similarity``, ``pairwise_distance``, ``pdist``, ``cdist``, ``normalize``,
``one_hot``, local response normalization, ``embedding``'s ``scale_grad_by_freq``): each
case runs on PyTorch and on ferrograd from the same float64 inputs and compares the values,
the gradients (and, where the gradient is the true one, central finite differences), or the
exception type of a refused argument."""

from __future__ import annotations

import math
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


# --------------------------------------------------------------- grid_sample, affine_grid


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample(mode: str, padding_mode: str, align_corners: bool) -> None:
    smooth = mode != "nearest"

    def fn(L: Any, F: Any, x: Any, g: Any) -> Any:
        return F.grid_sample(
            x, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners
        )

    grid = _RNG.uniform(-1.4, 1.4, size=(2, 3, 4, 2))
    _compare(fn, [_r(2, 2, 5, 6), grid], [True, smooth], fd=smooth)
    # far outside the input (reflection folds several times), and a one-pixel input
    far = _RNG.uniform(-5, 5, size=(1, 4, 4, 2))
    _compare(fn, [_r(1, 1, 3, 4), far], [True, smooth], fd=smooth)
    _compare(fn, [_r(1, 1, 1, 1), far], [True, smooth], fd=False)
    if mode != "bicubic":
        grid3 = _RNG.uniform(-1.4, 1.4, size=(2, 3, 2, 4, 3))
        _compare(fn, [_r(2, 2, 3, 4, 5), grid3], [True, smooth], fd=smooth)


@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_nearest_rounding(align_corners: bool) -> None:
    # grid points halfway between pixels round half to even, as PyTorch's
    grid = np.array([[[[-0.5, 0.0], [-1 / 3, 0.0], [1 / 3, 0.0], [0.2, 0.6]]]])
    _compare(
        lambda L, F, x, g: F.grid_sample(x, g, mode="nearest", align_corners=align_corners),
        [np.arange(12.0).reshape(1, 1, 3, 4), grid],
        [False, False],
    )


@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid(align_corners: bool) -> None:
    ac = align_corners
    _compare(lambda L, F, t: F.affine_grid(t, (2, 3, 4, 5), align_corners=ac), [_r(2, 2, 3)])
    _compare(lambda L, F, t: F.affine_grid(t, (2, 3, 4, 5, 3), align_corners=ac), [_r(2, 3, 4)])
    _compare(lambda L, F, t: F.affine_grid(t, [1, 1, 1, 5], align_corners=ac), [_r(1, 2, 3)])
    _compare(
        lambda L, F, t, x: F.grid_sample(
            x, F.affine_grid(t, (2, 3, 4, 5), align_corners=ac), align_corners=ac
        ),
        [_r(2, 2, 3), _r(2, 3, 6, 7)],
    )


@pytest.mark.parametrize(
    "fn",
    [
        lambda L, F: F.affine_grid(L.zeros(2, 3, 3), (2, 3, 4, 5), align_corners=False),
        lambda L, F: F.affine_grid(L.zeros(2, 2, 3), (2, 3, 4, 5, 6), align_corners=False),
        lambda L, F: F.affine_grid(L.zeros(2, 2, 3), (2, 3, 4), align_corners=False),
        lambda L, F: F.affine_grid(L.zeros(2, 2, 3), (3, 3, 4, 5), align_corners=False),
        lambda L, F: F.affine_grid(
            L.zeros(2, 2, 3, dtype=L.int64), (2, 3, 4, 5), align_corners=False
        ),
        lambda L, F: F.grid_sample(L.zeros(1, 1, 3, 3), L.zeros(1, 2, 2, 2), mode="foo"),
        lambda L, F: F.grid_sample(L.zeros(1, 1, 3, 3), L.zeros(1, 2, 2, 2), padding_mode="x"),
        lambda L, F: F.grid_sample(L.zeros(1, 1, 3, 3), L.zeros(1, 2, 2, 3)),
        lambda L, F: F.grid_sample(L.zeros(2, 1, 3, 3), L.zeros(1, 2, 2, 2)),
        lambda L, F: F.grid_sample(L.zeros(1, 1, 3, 3), L.zeros(1, 2, 2, 2, 3)),
        lambda L, F: F.grid_sample(L.zeros(1, 3, 3), L.zeros(1, 2, 2)),
        lambda L, F: F.grid_sample(L.zeros(1, 1, 0, 3), L.zeros(1, 2, 2, 2)),
        lambda L, F: F.grid_sample(
            L.zeros(1, 1, 3, 3, dtype=L.float64), L.zeros(1, 2, 2, 2, dtype=L.float32)
        ),
        lambda L, F: F.grid_sample(
            L.zeros(1, 1, 3, 3, dtype=L.int64), L.zeros(1, 2, 2, 2, dtype=L.int64)
        ),
    ],
)
def test_grid_sample_affine_grid_refuse(fn: Callable[[Any, Any], Any]) -> None:
    _same_error(fn)


def test_grid_sample_empty() -> None:
    f = lambda L, F, x, g: F.grid_sample(x, g, align_corners=False)
    _compare(f, [_r(1, 1, 3, 3), np.zeros((1, 0, 2, 2))], fd=False)
    _compare(f, [np.zeros((0, 1, 3, 3)), np.zeros((0, 2, 2, 2))], fd=False)


# ----------------------------------------------------------------------------------- pad

_PADS = [
    ((2, 3, 5), [(1, 2), (0, 0), (2, 0), (-1, 2), (-1, -1), (4, 4)]),
    ((1, 2, 4, 5), [(1, 2, 3, 0), (-1, 0, 2, -2), (3, 3, 3, 3)]),
    ((1, 2, 3, 4, 3), [(1, 0, 2, 1, 1, 2), (-1, 1, 0, 1, 2, -1)]),
    ((3, 5), [(1, 2), (2, 2)]),
    ((2, 4, 5), [(1, 2, 1, 2)]),
    ((2, 3, 4, 3), [(1, 0, 1, 1, 1, 2)]),
]


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize(
    "shape,pads", [(s, p) for s, ps in _PADS for p in ps], ids=lambda v: str(v)
)
def test_pad(mode: str, shape: tuple, pads: tuple) -> None:
    _compare(lambda L, F, x: F.pad(x, pads, mode=mode), [_r(*shape)])


def test_pad_layers_and_value() -> None:
    _compare(lambda L, F, x: F.pad(x, (1, 1), value=2.5), [_r(2, 3, 4)])
    _compare(lambda L, F, x: F.pad(x, (1, 1, 1, 1, 1, 1, 1, 1)), [_r(1, 2, 2, 2, 2, 2)])
    _compare(lambda L, F, x: F.pad(x, (1, 1), mode="reflect", value=0.0), [_r(2, 3, 4)])
    for make, shape in [
        (lambda L: L.nn.ConstantPad2d((1, 2, 0, 1), 3.5), (1, 2, 3, 3)),
        (lambda L: L.nn.ReflectionPad1d(2), (1, 2, 4)),
        (lambda L: L.nn.ReflectionPad2d((1, 2, 0, 2)), (1, 2, 3, 4)),
        (lambda L: L.nn.ReflectionPad3d(1), (1, 2, 3, 3, 2)),
        (lambda L: L.nn.ReplicationPad1d((3, 1)), (1, 2, 4)),
        (lambda L: L.nn.ReplicationPad2d(2), (2, 3, 3)),
        (lambda L: L.nn.ReplicationPad3d((1, 0, 2, 1, 0, 1)), (1, 1, 2, 3, 2)),
        (lambda L: L.nn.CircularPad1d(2), (1, 2, 4)),
        (lambda L: L.nn.CircularPad2d((1, 0, 2, 1)), (1, 2, 3, 4)),
        (lambda L: L.nn.CircularPad3d(1), (1, 1, 2, 3, 2)),
        (lambda L: L.nn.ZeroPad2d((1, 2, -1, 0)), (1, 2, 4, 3)),
    ]:
        _compare(lambda L, F, x, make=make: make(L)(x), [_r(*shape)])


@pytest.mark.parametrize(
    "fn",
    [
        lambda L, F: F.pad(L.zeros(1, 2, 3), (3, 0), mode="reflect"),
        lambda L, F: F.pad(L.zeros(1, 2, 3, 3), (1, 1, 3, 0), mode="reflect"),
        lambda L, F: F.pad(L.zeros(1, 2, 3), (4, 0), mode="circular"),
        lambda L, F: F.pad(L.zeros(1, 2, 3), (1, 0, 1)),
        lambda L, F: F.pad(L.zeros(1, 2, 3), (1, 0, 1, 1, 1, 1, 1, 1)),
        lambda L, F: F.pad(L.zeros(1, 2, 4, 5), (1, 1), mode="reflect"),
        lambda L, F: F.pad(L.zeros(1, 2, 3, 4, 3), (1, 1), mode="replicate"),
        lambda L, F: F.pad(L.zeros(2, 3, 3), (1, 1, 1, 1, 1, 1), mode="reflect"),
        lambda L, F: F.pad(L.zeros(3), (1, 1), mode="reflect"),
        lambda L, F: F.pad(L.zeros(1, 1, 1, 2, 2, 2), (1, 1), mode="circular"),
        lambda L, F: F.pad(L.zeros(1, 2, 3), (1, 1), mode="foo"),
        lambda L, F: F.pad(L.zeros(1, 2, 3), (1, 1), mode="reflect", value=1.0),
        lambda L, F: F.pad(L.zeros(1, 2, 3), (-2, -2)),
        lambda L, F: F.pad(L.zeros(1, 2, 0), (1, 1), mode="replicate"),
        lambda L, F: F.pad(L.zeros(1, 2, 5), (-3, -3), mode="circular"),
    ],
)
def test_pad_refuses(fn: Callable[[Any, Any], Any]) -> None:
    _same_error(fn)


# ------------------------------------------------------------------------ fold, unfold

_PATCHES: list[dict[str, Any]] = [
    {"kernel_size": 2},
    {"kernel_size": (2, 3), "stride": (1, 2)},
    {"kernel_size": 3, "padding": 1, "stride": 2},
    {"kernel_size": 2, "dilation": 2, "padding": (1, 0)},
]


@pytest.mark.parametrize("kw", _PATCHES, ids=str)
def test_fold_unfold(kw: dict) -> None:
    torch = _torch()
    k = kw["kernel_size"]
    kk = math.prod(k) if isinstance(k, tuple) else k * k
    blocks = torch.nn.functional.unfold(torch.zeros(1, 1, 5, 6), **kw).shape[-1]
    _compare(lambda L, F, x: F.unfold(x, **kw), [_r(2, 3, 5, 6)])
    _compare(lambda L, F, x: F.unfold(x, **kw), [_r(3, 5, 6)])
    _compare(lambda L, F, x: L.nn.Unfold(**kw)(x), [_r(1, 2, 5, 6)])
    _compare(lambda L, F, x: F.fold(x, (5, 6), **kw), [_r(2, 3 * kk, blocks)])
    _compare(lambda L, F, x: F.fold(x, (5, 6), **kw), [_r(3 * kk, blocks)])
    _compare(lambda L, F, x: L.nn.Fold((5, 6), **kw)(x), [_r(1, 2 * kk, blocks)])
    assert repr(fg.nn.Fold((5, 6), **kw)) == repr(torch.nn.Fold((5, 6), **kw))


@pytest.mark.parametrize(
    "fn",
    [
        lambda L, F: F.fold(L.zeros(1, 5, 9), (4, 4), 2),
        lambda L, F: F.fold(L.zeros(1, 4, 8), (4, 4), 2),
        lambda L, F: F.fold(L.zeros(1, 4, 9, 1), (4, 4), 2),
        lambda L, F: F.fold(L.zeros(1, 4, 9), (4, 4), 0),
        lambda L, F: F.fold(L.zeros(1, 4, 9), (4, 4), 2, stride=0),
        lambda L, F: F.fold(L.zeros(1, 4, 9), (4, 4), 2, padding=-1),
        lambda L, F: F.fold(L.zeros(1, 4, 9), (4, 4), 2, dilation=0),
        lambda L, F: F.fold(L.zeros(1, 4, 9), (4, 4, 4), 2),
        lambda L, F: F.fold(L.zeros(1, 4, 9), (1, 1), 2),
        lambda L, F: F.fold(L.zeros(1, 4, 9, dtype=L.int64), (4, 4), 2),
        lambda L, F: F.unfold(L.zeros(1, 1, 4, 4), (2, 2, 2)),
        lambda L, F: F.unfold(L.zeros(1, 1, 1, 4, 4), 2),
        lambda L, F: F.unfold(L.zeros(1, 1, 4, 4), 5),
        lambda L, F: F.unfold(L.zeros(1, 1, 4, 4), 2, stride=0),
        lambda L, F: F.unfold(L.zeros(1, 1, 4, 4), 2, padding=-1),
        lambda L, F: F.unfold(L.zeros(1, 1, 4, 4), 2, dilation=0),
        lambda L, F: F.unfold(L.zeros(1, 1, 4, 4, dtype=L.int64), 2),
    ],
)
def test_fold_unfold_refuse(fn: Callable[[Any, Any], Any]) -> None:
    _same_error(fn)


# ------------------------------------------------------ pixel shuffle, channel shuffle


@pytest.mark.parametrize(
    "shape,r", [((1, 8, 2, 3), 2), ((2, 3, 18, 2, 2), 3), ((27, 2, 3), 3), ((1, 4, 0, 3), 2)]
)
def test_pixel_shuffle(shape: tuple, r: int) -> None:
    # (an empty input is compared by value: PyTorch's backward of it fails a shape check)
    grads = [math.prod(shape) > 0]
    _compare(lambda L, F, x: F.pixel_shuffle(x, r), [_r(*shape)], grads)
    _compare(lambda L, F, x: L.nn.PixelShuffle(r)(x), [_r(*shape)], grads)
    if grads[0]:
        _compare(lambda L, F, x: F.pixel_unshuffle(F.pixel_shuffle(x, r), r), [_r(*shape)])
    else:
        # PyTorch's pixel_unshuffle returns an empty input with its shape unchanged; the
        # round trip gives back the input's shape
        x = fg.zeros(*shape)
        F = fg.nn.functional
        assert tuple(F.pixel_unshuffle(F.pixel_shuffle(x, r), r).shape) == shape


@pytest.mark.parametrize(
    "shape,r", [((1, 2, 4, 6), 2), ((2, 3, 2, 6, 3), 3), ((2, 6, 9), 3), ((1, 1, 2, 1, 4, 4), 2)]
)
def test_pixel_unshuffle(shape: tuple, r: int) -> None:
    _compare(lambda L, F, x: F.pixel_unshuffle(x, r), [_r(*shape)])
    _compare(lambda L, F, x: L.nn.PixelUnshuffle(r)(x), [_r(*shape)])


@pytest.mark.parametrize(
    "shape,groups", [((1, 4, 2, 2), 2), ((2, 6, 3), 3), ((2, 6, 1, 2, 2), 2), ((1, 9, 2, 2), 9)]
)
def test_channel_shuffle(shape: tuple, groups: int) -> None:
    _compare(lambda L, F, x: L.nn.ChannelShuffle(groups)(x), [_r(*shape)])
    _compare(lambda L, F, x: F.channel_shuffle(x, groups), [_r(*shape)])
    _compare(lambda L, F, x: L.channel_shuffle(x, groups), [_r(*shape)])


@pytest.mark.parametrize(
    "fn",
    [
        lambda L, F: F.pixel_shuffle(L.zeros(4, 4), 2),
        lambda L, F: F.pixel_shuffle(L.zeros(1, 5, 2, 2), 2),
        lambda L, F: F.pixel_shuffle(L.zeros(1, 4, 2, 2), 0),
        lambda L, F: F.pixel_unshuffle(L.zeros(4, 4), 2),
        lambda L, F: F.pixel_unshuffle(L.zeros(1, 1, 3, 4), 2),
        lambda L, F: F.pixel_unshuffle(L.zeros(1, 1, 4, 4), 0),
        lambda L, F: L.nn.ChannelShuffle(3)(L.zeros(1, 4, 2, 2)),
        lambda L, F: L.nn.ChannelShuffle(0)(L.zeros(1, 4, 2, 2)),
        lambda L, F: F.channel_shuffle(L.zeros(1, 4, 2, 2), -2),
    ],
)
def test_shuffles_refuse(fn: Callable[[Any, Any], Any]) -> None:
    _same_error(fn)


# ------------------------------------------------------------------------------ distances


@pytest.mark.parametrize(
    "s1,s2,dim",
    [
        ((3, 4), (3, 4), 1),
        ((3, 4), (3, 4), 0),
        ((2, 3, 4), (1, 3, 4), -1),
        ((4, 5), (5,), -1),
        ((2, 1, 3), (1, 4, 3), 2),
    ],
)
def test_cosine_similarity(s1: tuple, s2: tuple, dim: int) -> None:
    _compare(lambda L, F, a, b: F.cosine_similarity(a, b, dim=dim), [_r(*s1), _r(*s2)])
    _compare(lambda L, F, a, b: L.nn.CosineSimilarity(dim=dim, eps=1e-3)(a, b), [_r(*s1), _r(*s2)])


def test_cosine_similarity_edges() -> None:
    torch = _torch()
    f = lambda L, F, a, b: F.cosine_similarity(a, b, dim=0)
    # a zero vector: the norm is floored at eps and the gradients stay finite
    _compare(f, [_r(10), np.zeros(10)], fd=False)
    # a norm below eps: floored without a gradient of its own (PyTorch's, so not the
    # derivative of the value there)
    _compare(f, [_r(4) * 1e-9, _r(4)], fd=False)
    # norms past the float64 range: the quotient is 0, not inf - inf = nan
    _compare(f, [_r(3) * 1e200, _r(3) * 1e200], [False, False])
    # an integer input is promoted with the other one first (PyTorch #61454)
    for L in (torch, fg):
        x = L.tensor(12.0, dtype=L.float64)
        out = L.nn.functional.cosine_similarity(x.to(L.int8), x, dim=-1)
        assert float(out) == 1.0 and out.dtype == L.float64


@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, 0.5, 3.0, math.inf, -math.inf])
def test_pairwise_distance(p: float) -> None:
    fd = p != 0.0
    for s1, s2 in [((3, 4), (3, 4)), ((4,), (4,)), ((3, 4), (4,)), ((2, 3, 4), (3, 4))]:
        _compare(lambda L, F, a, b: F.pairwise_distance(a, b, p=p), [_r(*s1), _r(*s2)], fd=fd)
    _compare(
        lambda L, F, a, b: L.nn.PairwiseDistance(p=p, eps=1e-3, keepdim=True)(a, b),
        [_r(3, 4), _r(3, 4)],
        fd=fd,
    )


@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, 0.5, 1.5, math.inf])
def test_pdist(p: float) -> None:
    for shape in [(4, 3), (1, 3), (2, 1)]:
        _compare(lambda L, F, a: F.pdist(a, p=p), [_r(*shape)], fd=p != 0.0)
    for shape in [(0, 3), (3, 0)]:
        # (values only: PyTorch's pdist backward of an empty input can crash the process)
        _compare(lambda L, F, a: F.pdist(a, p=p), [_r(*shape)], [False])
    _compare(lambda L, F, a: L.pdist(a, p=p), [_r(4, 3)], fd=False)
    # equal rows: the gradient at a zero distance is 0, as PyTorch's
    _compare(lambda L, F, a: F.pdist(L.cat([a, a]), p=p), [_r(2, 3)], fd=False)


@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, 0.5, 3.0, math.inf])
def test_cdist(p: float) -> None:
    for s1, s2 in [
        ((4, 3), (5, 3)),
        ((2, 4, 3), (2, 5, 3)),
        ((2, 1, 4, 3), (3, 5, 3)),
        ((0, 3), (2, 3)),
        ((4, 0), (2, 0)),
    ]:
        _compare(lambda L, F, a, b: L.cdist(a, b, p=p), [_r(*s1), _r(*s2)], fd=p != 0.0)
    _compare(lambda L, F, a: L.cdist(a, a, p=p), [_r(4, 3)], fd=False)


@pytest.mark.parametrize(
    "fn",
    [
        lambda L, F: F.cosine_similarity(L.zeros(3, 4), L.zeros(3, 5)),
        lambda L, F: F.cosine_similarity(L.zeros(3, 4), L.zeros(3, 4), dim=2),
        lambda L, F: F.cosine_similarity(L.ones(3, 4, dtype=L.int64), L.ones(3, 4, dtype=L.int64)),
        lambda L, F: F.pairwise_distance(L.zeros(3, 4), L.zeros(3, 5)),
        lambda L, F: F.pdist(L.zeros(2, 3, 4)),
        lambda L, F: F.pdist(L.zeros(3)),
        lambda L, F: F.pdist(L.zeros(3, 4), p=-1.0),
        lambda L, F: L.cdist(L.zeros(3, 4), L.zeros(3, 5)),
        lambda L, F: L.cdist(L.zeros(3), L.zeros(3)),
        lambda L, F: L.cdist(L.zeros(3, 4), L.zeros(3, 4), p=-1),
        lambda L, F: L.cdist(L.zeros(2, 3, 4), L.zeros(3, 3, 4)),
        lambda L, F: L.cdist(L.zeros(3, 4), L.zeros(3, 4), compute_mode="foo"),
        lambda L, F: L.cdist(L.zeros(3, 4, dtype=L.float64), L.zeros(3, 4, dtype=L.float32)),
    ],
)
def test_distances_refuse(fn: Callable[[Any, Any], Any]) -> None:
    _same_error(fn)


# ------------------------------------------------------------------- normalize, one_hot


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 0.5, math.inf])
@pytest.mark.parametrize("dim", [1, 0, -1])
def test_normalize(p: float, dim: int) -> None:
    _compare(lambda L, F, x: F.normalize(x, p=p, dim=dim), [_r(3, 4)])


def test_normalize_edges() -> None:
    _compare(lambda L, F, x: F.normalize(x, dim=1), [np.zeros((2, 3))], fd=False)
    _compare(lambda L, F, x: F.normalize(x, dim=1, eps=0.5), [_r(2, 3) * 0.1])
    _compare(lambda L, F, x: F.normalize(x, dim=(1, 2)), [_r(2, 3, 4)])
    _compare(lambda L, F, x: F.normalize(x, dim=0), [np.array(3.0)])


def test_one_hot() -> None:
    torch = _torch()
    for arr, n in [([3, 4, 1, 0], -1), ([3, 4, 1, 0], 6), ([[0, 2], [1, 1]], -1), (4, 6)]:
        want = torch.nn.functional.one_hot(torch.tensor(arr), n)
        got = fg.nn.functional.one_hot(fg.tensor(arr), n)
        assert got.dtype == fg.int64
        np.testing.assert_array_equal(_np(got), want.numpy())
    empty = fg.nn.functional.one_hot(fg.zeros(0, dtype=fg.int64), 3)
    assert tuple(empty.shape) == (0, 3)


@pytest.mark.parametrize(
    "fn",
    [
        lambda L, F: F.one_hot(L.zeros(0, dtype=L.int64)),
        lambda L, F: F.one_hot(L.zeros(0, dtype=L.int64), 0),
        lambda L, F: F.one_hot(L.tensor([-1, 2])),
        lambda L, F: F.one_hot(L.tensor([3, 2]), 3),
        lambda L, F: F.one_hot(L.tensor([1.0, 2.0])),
        lambda L, F: F.one_hot(L.tensor([1, 2], dtype=L.int32)),
        lambda L, F: F.one_hot(L.tensor([1, 2], dtype=L.uint8)),
        lambda L, F: F.one_hot(L.tensor([1, 2]), -2),
    ],
)
def test_one_hot_refuses(fn: Callable[[Any, Any], Any]) -> None:
    _same_error(fn)


# -------------------------------------------------------------- local response norm


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("shape", [(2, 6, 4), (2, 6, 3, 3), (1, 7, 2, 3, 2)])
def test_local_response_norm(shape: tuple, size: int) -> None:
    _compare(
        lambda L, F, x: F.local_response_norm(x, size, alpha=0.1, beta=0.8, k=1.5), [_r(*shape)]
    )
    _compare(lambda L, F, x: L.nn.LocalResponseNorm(size)(x), [_r(*shape)])


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7])
def test_cross_map_lrn2d(size: int) -> None:
    torch = _torch()
    x = _r(2, 6, 2, 3)
    # PyTorch's forward adds channel 0's square to every later window; with channel 0
    # zero the windows agree, so the values can be compared directly
    x0 = x.copy()
    x0[:, 0] = 0.0

    def run(L: Any, a: np.ndarray) -> np.ndarray:
        return _np(L.nn.CrossMapLRN2d(size, alpha=0.1, beta=0.75, k=1.0)(L.tensor(a)))

    np.testing.assert_allclose(run(fg, x0), run(torch, x0), rtol=1e-12, atol=1e-14)
    # the window is |j - c| <= (size - 1) // 2 (a local_response_norm for odd sizes), and
    # the gradient is its derivative
    half = (size - 1) // 2
    sq = x**2
    total = np.stack([sq[:, max(0, c - half) : c + half + 1].sum(1) for c in range(6)], 1)
    np.testing.assert_allclose(run(fg, x), x * (1.0 + 0.1 / size * total) ** -0.75, rtol=1e-12)

    def fn(L: Any, F: Any, t: Any) -> Any:
        return L.nn.CrossMapLRN2d(size, alpha=0.1, beta=0.75, k=1.0)(t)

    _, (g,) = _run(fg, fn, [x], [True])
    np.testing.assert_allclose(g, _finite_diff(fn, [x], 0), rtol=1e-6, atol=1e-8)
    assert repr(fg.nn.CrossMapLRN2d(3)) == repr(torch.nn.CrossMapLRN2d(3))
    _same_error(lambda L, F: L.nn.CrossMapLRN2d(3)(L.zeros(2, 4, 3)))


# ------------------------------------------------------------ embedding scale_grad_by_freq


@pytest.mark.parametrize("padding_idx", [None, 2, -1])
@pytest.mark.parametrize("scale_grad_by_freq", [False, True])
def test_embedding_scale_grad_by_freq(scale_grad_by_freq: bool, padding_idx: Any) -> None:
    idx = np.array([[0, 2, 2, 4], [4, 4, 1, 2]])
    # (the gradient is scaled by the inverse count and zero at padding_idx: by design not
    # the derivative of the value, so it is compared with PyTorch's only)
    _compare(
        lambda L, F, w: F.embedding(
            L.tensor(idx), w, padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq
        ),
        [_r(5, 3)],
        fd=False,
    )

    def layer(L: Any, F: Any, w: Any) -> Any:
        m = L.nn.Embedding(
            5,
            3,
            padding_idx=padding_idx,
            scale_grad_by_freq=scale_grad_by_freq,
            dtype=L.float64,
        )
        with L.no_grad():
            m.weight.copy_(w)
        out = m(L.tensor(idx))
        (out * L.tensor(np.cos(np.arange(24.0)).reshape(2, 4, 3))).sum().backward()
        return m.weight.grad

    _compare(layer, [_r(5, 3)], [False])
    _compare(
        lambda L, F, w: F.embedding(L.tensor([1, 1, 3, 0]), w, scale_grad_by_freq=True),
        [_r(4, 2)],
        fd=False,
    )


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_nan_and_inf_grid(mode: str, padding_mode: str, align_corners: bool) -> None:
    # PyTorch documents NaN grid values as -1; reflecting an infinite one gives NaN, so it
    # lands there too, and border padding clamps an infinite one to the edge
    nan, inf = math.nan, math.inf
    grid = np.array(
        [[[[nan, 0.3], [0.2, nan], [inf, 0.3]]], [[[0.2, -inf], [-inf, inf], [nan, -inf]]]]
    )
    _compare(
        lambda L, F, x, g: F.grid_sample(
            x, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners
        ),
        [_r(2, 2, 3, 4), grid],
        # (values only: PyTorch's backward with such a grid reads outside the input)
        [False, False],
    )


@pytest.mark.parametrize(
    "shape,kw,dtype",
    [
        ((1, 2, 60), {"scale_factor": 5.2, "mode": "nearest"}, "float64"),
        ((1, 2, 37), {"scale_factor": 5.4, "mode": "nearest"}, "float32"),
        ((1, 2, 40), {"scale_factor": 4.9, "mode": "nearest-exact"}, "float64"),
        ((1, 2, 56), {"scale_factor": 0.39, "mode": "nearest-exact"}, "float64"),
        ((1, 2, 5, 5), {"scale_factor": 2.1, "mode": "nearest"}, "float64"),
        ((1, 2, 5, 6), {"scale_factor": 1.1, "mode": "nearest"}, "float32"),
        ((1, 2, 40, 26), {"size": (28, 88), "mode": "nearest"}, "float64"),
        ((1, 2, 18, 16), {"size": (56, 61), "mode": "nearest-exact"}, "float64"),
        ((1, 2, 7, 2), {"size": (74, 83), "mode": "nearest-exact"}, "float32"),
        ((1, 2, 22, 33), {"scale_factor": (1.0, 3.7), "mode": "nearest-exact"}, "float64"),
        ((1, 1, 5, 4, 3), {"scale_factor": 1.1, "mode": "nearest"}, "float64"),
    ],
)
def test_interpolate_nearest_index_rounding(shape: tuple, kw: dict, dtype: str) -> None:
    # PyTorch rounds the source position to float32 before flooring it, takes a float32
    # ratio (and copies or repeats a kept or doubled axis) for small 2-D outputs, and fuses
    # nearest-exact's multiply-add: positions a hair off an integer read the same element
    torch = _torch()
    x = _r(*shape)

    def run(L: Any) -> np.ndarray:
        t = L.tensor(x).to(getattr(L, dtype))
        return _np(L.nn.functional.interpolate(t, recompute_scale_factor=False, **kw))

    np.testing.assert_array_equal(run(fg), run(torch))


@pytest.mark.parametrize(
    "mode,shape,kw",
    [
        ("linear", (1, 2, 3), {"scale_factor": 1.063}),
        ("linear", (1, 2, 5), {"scale_factor": 1.15, "align_corners": True}),
        ("bilinear", (1, 2, 5, 6), {"scale_factor": (1.1, 1.5)}),
        ("trilinear", (1, 2, 5, 4, 3), {"scale_factor": (1.1, 1.5, 1.2)}),
        ("bilinear", (1, 2, 12, 5), {"scale_factor": (1.41, 1.1), "antialias": True}),
        ("bicubic", (1, 2, 9, 12), {"scale_factor": (1.09, 1.64), "antialias": True}),
        ("bicubic", (1, 2, 5, 6), {"scale_factor": (1.1, 1.5)}),
    ],
)
def test_interpolate_axis_keeping_its_length(mode: str, shape: tuple, kw: dict) -> None:
    # a scale_factor whose output length equals the input's copies that axis in PyTorch's
    # linear and antialiased kernels (bicubic without antialias still resamples it)
    def fn(L: Any, F: Any, x: Any) -> Any:
        return F.interpolate(x, mode=mode, recompute_scale_factor=False, **kw)

    x = _r(*shape)
    if not kw.get("antialias"):
        _compare(fn, [x])
        return
    # PyTorch's antialiased backward still resamples the kept axis (it is not its
    # forward's derivative there): the values are compared, the gradient with finite
    # differences
    _compare(fn, [x], [False])
    _, (g,) = _run(fg, fn, [x], [True])
    np.testing.assert_allclose(g, _finite_diff(fn, [x], 0), rtol=1e-6, atol=1e-7)
