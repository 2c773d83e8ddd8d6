"""MegEngine's image warps (``functional.vision.remap``, ``warp_affine``,
``warp_perspective``): bilinear or nearest sampling at pixel coordinates with OpenCV's border
modes, built from recorded ops (a flat gather of the four taps and their weights), so the
gradient reaches the image and the coordinates (hence the matrices)."""

from __future__ import annotations

from typing import Any

import numpy as np

import ferrograd as fg

from .._core import Tensor

_BORDERS = ("replicate", "constant", "reflect", "reflect_101", "wrap")


def _fold(i: np.ndarray, n: int, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """Integer taps ``i`` folded into ``[0, n)`` by ``mode``, and where they are inside (for
    ``constant``, taps outside take the border value)."""
    inside = (i >= 0) & (i < n)
    if mode == "replicate" or n == 1:
        return np.clip(i, 0, n - 1), inside
    if mode == "constant":
        return np.clip(i, 0, n - 1), inside
    if mode == "wrap":
        return np.mod(i, n), inside
    # reflect (fedcba|abcdefgh|hgfedcb) and reflect_101 (gfedcb|abcdefgh|gfedcba)
    period = 2 * n if mode == "reflect" else 2 * n - 2
    j = np.mod(i, period)
    if mode == "reflect":
        j = np.where(j >= n, period - 1 - j, j)
    else:
        j = np.where(j >= n, period - j, j)
    return j, inside


def _sample(
    op: str,
    img: Tensor,
    x: Tensor,
    y: Tensor,
    border_mode: str,
    border_val: float,
    interp_mode: str,
    quantize: bool = False,
) -> Tensor:
    """``img`` (N, C, H, W) sampled at pixel coordinates ``x``, ``y`` (N, OH, OW):
    (N, C, OH, OW)."""
    if border_mode not in _BORDERS:
        raise ValueError(f"{op}: border_mode must be one of {_BORDERS}, got {border_mode!r}")
    if interp_mode not in ("linear", "nearest"):
        raise ValueError(f"{op}: interp_mode must be 'linear' or 'nearest', got {interp_mode!r}")
    n, c, h, w = img.shape
    dtype = img.dtype.name
    flat = img.reshape(n, c, h * w)
    xs, ys = x.detach().numpy().astype(np.float64), y.detach().numpy().astype(np.float64)
    if interp_mode == "nearest":
        taps = [(np.floor(xs + 0.5).astype(np.int64), np.floor(ys + 0.5).astype(np.int64), None)]
    else:
        x0, y0 = np.floor(xs), np.floor(ys)
        fx = x - fg.tensor(x0, dtype=x.dtype.name, device=x.device)
        fy = y - fg.tensor(y0, dtype=y.dtype.name, device=y.device)
        if quantize:
            # OpenCV's fixed-point weights (1/32 steps); the gradient is the continuous one
            fx = fx + ((fx * 32.0).detach().round() / 32.0 - fx).detach()
            fy = fy + ((fy * 32.0).detach().round() / 32.0 - fy).detach()
        x0i, y0i = x0.astype(np.int64), y0.astype(np.int64)
        taps = [
            (x0i, y0i, (1 - fx) * (1 - fy)),
            (x0i + 1, y0i, fx * (1 - fy)),
            (x0i, y0i + 1, (1 - fx) * fy),
            (x0i + 1, y0i + 1, fx * fy),
        ]
    out = None
    batch = np.arange(n).reshape(n, 1, 1) * 0  # shape helper
    for xi, yi, wgt in taps:
        xf, xin = _fold(xi, w, border_mode)
        yf, yin = _fold(yi, h, border_mode)
        idx = (yf * w + xf).reshape(n, -1) + batch.reshape(n, 1)
        index = fg.tensor(idx.reshape(n, 1, -1).repeat(c, axis=1), dtype="int64", device=img.device)
        v = fg.gather(flat, 2, index).reshape(n, c, *xs.shape[1:])
        if border_mode == "constant":
            keep = fg.tensor((xin & yin).reshape(n, 1, *xs.shape[1:]), device=img.device)
            v = fg.where(keep, v, fg.full((), float(border_val), dtype=v.dtype.name))
        term = v if wgt is None else v * wgt.astype(v.dtype.name).unsqueeze(1)
        out = term if out is None else out + term
    assert out is not None
    return out if out.dtype.name == dtype else out.astype(dtype)


def _as_float(op: str, img: Tensor) -> tuple[Tensor, str]:
    if not isinstance(img, Tensor):
        raise TypeError(f"{op}: inp must be a Tensor, got {type(img).__name__}")
    kind = img.dtype.name
    return (img if img.dtype.kind == "f" else img.astype("float32")), kind


def _back(out: Tensor, kind: str) -> Tensor:
    if out.dtype.name == kind:
        return out
    if kind in ("int8", "uint8", "int32", "int64"):
        info = np.iinfo(np.dtype(kind))
        return out.round().clamp(float(info.min), float(info.max)).astype(kind)
    return out.astype(kind)


def _out_hw(op: str, out_shape: Any) -> tuple[int, int]:
    if isinstance(out_shape, Tensor):
        out_shape = out_shape.tolist()
    if isinstance(out_shape, int):
        return out_shape, out_shape
    oh, ow = (int(v) for v in out_shape)
    return oh, ow


def remap(
    inp: Tensor,
    map_xy: Tensor,
    border_mode: str = "replicate",
    scalar: float = 0.0,
    interp_mode: str = "linear",
) -> Tensor:
    """``out[n, c, h, w] = inp[n, c, map_xy[n, h, w, 1], map_xy[n, h, w, 0]]`` (pixel
    coordinates, interpolated): MegEngine's ``remap``."""
    img, kind = _as_float("remap", inp)
    if map_xy.ndim != 4 or map_xy.shape[-1] != 2 or map_xy.shape[0] != img.shape[0]:
        raise fg.ShapeError(
            f"remap: map_xy must be (N, OH, OW, 2) with N = {img.shape[0]}, got "
            f"{list(map_xy.shape)}"
        )
    m = map_xy if map_xy.dtype.kind == "f" else map_xy.astype("float32")
    out = _sample("remap", img, m[..., 0], m[..., 1], border_mode, scalar, interp_mode)
    return _back(out, kind)


def _grid(n: int, oh: int, ow: int, like: Tensor) -> tuple[Tensor, Tensor]:
    gy, gx = np.meshgrid(
        np.arange(oh, dtype=np.float64), np.arange(ow, dtype=np.float64), indexing="ij"
    )
    t = lambda a: fg.tensor(
        np.broadcast_to(a, (n, oh, ow)).copy(), dtype=like.dtype.name, device=like.device
    )
    return t(gx), t(gy)


def warp_perspective(
    inp: Tensor,
    mat: Tensor,
    out_shape: Any,
    mat_idx: Any = None,
    border_mode: str = "replicate",
    border_val: float = 0.0,
    format: str = "NCHW",
    interp_mode: str = "linear",
) -> Tensor:
    """``out(n, c, h, w) = inp(n, c, (M00 w + M01 h + M02) / d, (M10 w + M11 h + M12) / d)``
    with ``d = M20 w + M21 h + M22`` (``mat`` (B, 3, 3); ``mat_idx`` picks each matrix's
    image): MegEngine's ``warp_perspective``, differentiable in ``inp`` and ``mat``."""
    img = inp if format == "NCHW" else inp.permute(0, 3, 1, 2)
    img, kind = _as_float("warp_perspective", img)
    if mat.ndim != 3 or tuple(mat.shape[1:]) != (3, 3):
        raise fg.ShapeError(f"warp_perspective: mat must be (B, 3, 3), got {list(mat.shape)}")
    if mat_idx is not None:
        idx = mat_idx.tolist() if isinstance(mat_idx, Tensor) else list(mat_idx)
        img = fg.index_select(img, 0, fg.tensor(np.asarray(idx, dtype=np.int64), device=img.device))
    if img.shape[0] != mat.shape[0]:
        raise fg.ShapeError(
            f"warp_perspective: {mat.shape[0]} matrices for {img.shape[0]} images (use mat_idx)"
        )
    oh, ow = _out_hw("warp_perspective", out_shape)
    m = (mat if mat.dtype.kind == "f" else mat.astype("float32")).astype(img.dtype.name)
    gx, gy = _grid(img.shape[0], oh, ow, img)
    e = lambda i, j: m[:, i, j].reshape(-1, 1, 1)
    d = e(2, 0) * gx + e(2, 1) * gy + e(2, 2)
    sx = (e(0, 0) * gx + e(0, 1) * gy + e(0, 2)) / d
    sy = (e(1, 0) * gx + e(1, 1) * gy + e(1, 2)) / d
    out = _sample("warp_perspective", img, sx, sy, border_mode, border_val, interp_mode)
    out = _back(out, kind)
    return out if format == "NCHW" else out.permute(0, 2, 3, 1)


def warp_affine(
    inp: Tensor,
    mat: Tensor,
    out_shape: Any,
    border_mode: str = "replicate",
    border_val: float = 0.0,
    format: str = "NHWC",
    interp_mode: str = "linear",
) -> Tensor:
    """``out(n, h, w) = inp(n, M10 w + M11 h + M12, M00 w + M01 h + M02)`` (``mat``
    (N, 2, 3); interpolation weights in OpenCV's 1/32 steps): MegEngine's ``warp_affine``."""
    img = inp if format == "NCHW" else inp.permute(0, 3, 1, 2)
    img, kind = _as_float("warp_affine", img)
    if mat.ndim != 3 or tuple(mat.shape[1:]) != (2, 3) or mat.shape[0] != img.shape[0]:
        raise fg.ShapeError(
            f"warp_affine: mat must be (N, 2, 3) with N = {img.shape[0]}, got {list(mat.shape)}"
        )
    oh, ow = _out_hw("warp_affine", out_shape)
    m = (mat if mat.dtype.kind == "f" else mat.astype("float32")).astype(img.dtype.name)
    gx, gy = _grid(img.shape[0], oh, ow, img)
    e = lambda i, j: m[:, i, j].reshape(-1, 1, 1)
    sx = e(0, 0) * gx + e(0, 1) * gy + e(0, 2)
    sy = e(1, 0) * gx + e(1, 1) * gy + e(1, 2)
    out = _sample("warp_affine", img, sx, sy, border_mode, border_val, interp_mode, quantize=True)
    out = _back(out, kind)
    return out if format == "NCHW" else out.permute(0, 2, 3, 1)
