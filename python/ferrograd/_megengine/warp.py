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
    if kind in ("int8", "uint8", "int16", "int32", "int64"):
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


def _warp(
    op: str,
    inp: Tensor,
    mat: Tensor,
    rows: int,
    out_shape: Any,
    mat_idx: Any,
    format: str,
    border_mode: str,
    border_val: float,
    interp_mode: str,
    quantize: bool,
) -> Tensor:
    """Samples ``inp`` where ``mat`` (B, ``rows``, 3) sends each output pixel ``(w, h, 1)``
    (divided by the third row when ``rows`` is 3)."""
    img = inp if format == "NCHW" else inp.permute(0, 3, 1, 2)
    img, kind = _as_float(op, img)
    if mat.ndim != 3 or tuple(mat.shape[1:]) != (rows, 3):
        raise fg.ShapeError(f"{op}: mat must be (B, {rows}, 3), got {list(mat.shape)}")
    if mat_idx is not None:
        idx = mat_idx.tolist() if isinstance(mat_idx, Tensor) else list(mat_idx)
        img = fg.index_select(img, 0, fg.tensor(np.asarray(idx, dtype=np.int64), device=img.device))
    if img.shape[0] != mat.shape[0]:
        raise fg.ShapeError(
            f"{op}: {mat.shape[0]} matrices for {img.shape[0]} images"
            + (" (use mat_idx)" if rows == 3 else "")
        )
    oh, ow = _out_hw(op, out_shape)
    m = (mat if mat.dtype.kind == "f" else mat.astype("float32")).astype(img.dtype.name)
    gx, gy = _grid(img.shape[0], oh, ow, img)

    def row(i: int) -> Tensor:
        return (
            m[:, i, 0].reshape(-1, 1, 1) * gx
            + m[:, i, 1].reshape(-1, 1, 1) * gy
            + m[:, i, 2].reshape(-1, 1, 1)
        )

    sx, sy = row(0), row(1)
    if rows == 3:
        d = row(2)
        sx, sy = sx / d, sy / d
    out = _back(_sample(op, img, sx, sy, border_mode, border_val, interp_mode, quantize), kind)
    return out if format == "NCHW" else out.permute(0, 2, 3, 1)


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
    return _warp(
        "warp_perspective",
        inp,
        mat,
        3,
        out_shape,
        mat_idx,
        format,
        border_mode,
        border_val,
        interp_mode,
        False,
    )


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
    return _warp(
        "warp_affine",
        inp,
        mat,
        2,
        out_shape,
        None,
        format,
        border_mode,
        border_val,
        interp_mode,
        True,
    )


def _pair(v: Any) -> tuple[int, int]:
    if isinstance(v, int):
        return v, v
    a, b = (int(x) for x in v)
    return a, b


def roi_align(
    inp: Tensor,
    rois: Tensor,
    output_shape: Any,
    mode: str = "average",
    spatial_scale: float = 1.0,
    sample_points: Any = 2,
    aligned: bool = True,
) -> Tensor:
    """RoIAlign (Mask R-CNN): each ``(idx, x1, y1, x2, y2)`` box of ``rois`` (K, 5), scaled
    by ``spatial_scale`` (and shifted by half a pixel when ``aligned``), split into
    ``output_shape`` bins, each the average (or max) of ``sample_points`` bilinear samples per
    axis: (K, C, PH, PW). Differentiable in ``inp``; built from tensor ops, so it traces."""
    mode = mode.lower()
    if mode not in ("average", "max"):
        raise ValueError(f"roi_align: mode must be 'average' or 'max', got {mode!r}")
    if inp.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 5:
        raise fg.ShapeError(
            f"roi_align: inp must be (N, C, H, W) and rois (K, 5), got {list(inp.shape)} and "
            f"{list(rois.shape)}"
        )
    ph, pw = _pair(output_shape)
    gh, gw = _pair(sample_points)
    if gh <= 0 or gw <= 0:
        raise ValueError(
            "roi_align: sample_points must be positive here (adaptive 0 is not supported)"
        )
    x = inp if inp.dtype.kind == "f" else inp.astype("float32")
    n, c, h, w = x.shape
    k = rois.shape[0]
    r = rois.detach().astype(x.dtype.name)
    off = 0.5 if aligned else 0.0
    x1 = r[:, 1] * spatial_scale - off
    y1 = r[:, 2] * spatial_scale - off
    rw = r[:, 3] * spatial_scale - off - x1
    rh = r[:, 4] * spatial_scale - off - y1
    if not aligned:
        rw, rh = rw.clamp(min=1.0), rh.clamp(min=1.0)
    ty = np.repeat(np.arange(ph), gh) + np.tile((np.arange(gh) + 0.5) / gh, ph)
    tx = np.repeat(np.arange(pw), gw) + np.tile((np.arange(gw) + 0.5) / gw, pw)
    const = lambda a: fg.tensor(a, dtype=x.dtype.name, device=x.device)
    ys = y1.reshape(k, 1) + (rh / ph).reshape(k, 1) * const(ty).reshape(1, -1)
    xs = x1.reshape(k, 1) + (rw / pw).reshape(k, 1) * const(tx).reshape(1, -1)

    def axis(v: Tensor, size: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        valid = (v >= -1.0) & (v <= float(size))
        v = v.clamp(min=0.0)
        low = v.floor()
        edge = low >= float(size - 1)
        low = fg.where(edge, float(size - 1), low)
        high = fg.where(edge, float(size - 1), low + 1.0)
        v = fg.where(edge, low, v)
        frac = v - low
        return low.astype("int64"), high.astype("int64"), frac, valid

    y0, y1i, fy, vy = axis(ys, h)
    x0, x1i, fx, vx = axis(xs, w)
    b = r[:, 0].astype("int64")
    sel = fg.index_select(x.reshape(n, c, h * w), 0, b)  # (K, C, H*W)
    ny, nx = ys.shape[1], xs.shape[1]
    out = None
    for yi, wy in ((y0, 1.0 - fy), (y1i, fy)):
        for xi, wx in ((x0, 1.0 - fx), (x1i, fx)):
            idx = (yi.reshape(k, ny, 1) * w + xi.reshape(k, 1, nx)).reshape(k, 1, ny * nx)
            v = fg.gather(sel, 2, idx.broadcast_to(k, c, ny * nx)).reshape(k, c, ny, nx)
            term = v * (wy.reshape(k, 1, ny, 1) * wx.reshape(k, 1, 1, nx))
            out = term if out is None else out + term
    assert out is not None
    valid = (vy.reshape(k, 1, ny, 1) & vx.reshape(k, 1, 1, nx)).astype(x.dtype.name)
    out = (out * valid).reshape(k, c, ph, gh, pw, gw)
    if mode == "average":
        return out.mean(axis=(3, 5))
    return out.amax(axis=(3, 5))


def roi_pooling(
    inp: Tensor, rois: Tensor, output_shape: Any, mode: str = "max", scale: float = 1.0
) -> Tensor:
    """RoI pooling (Fast R-CNN): each ``(idx, x1, y1, x2, y2)`` box, scaled by ``scale`` and
    rounded to pixels, split into ``output_shape`` bins, each the max (or average) of its
    pixels (an empty bin gives 0): (K, C, PH, PW). Differentiable in ``inp``."""
    mode = mode.lower()
    if mode not in ("max", "average"):
        raise ValueError(f"roi_pooling: mode must be 'max' or 'average', got {mode!r}")
    ph, pw = _pair(output_shape)
    x = inp if inp.dtype.kind == "f" else inp.astype("float32")
    _, c, h, w = x.shape
    r = rois.detach().numpy().astype(np.float64)
    rows = []
    for box in r:
        img = x[int(box[0])]
        # (rounded half away from zero, as C's round)
        xs, ys, xe, ye = (int(np.floor(v * scale + 0.5)) for v in box[1:])
        bw, bh = max(xe - xs + 1, 1) / pw, max(ye - ys + 1, 1) / ph
        cells = []
        for i in range(ph):
            hs = min(max(int(np.floor(i * bh)) + ys, 0), h)
            he = min(max(int(np.ceil((i + 1) * bh)) + ys, 0), h)
            for j in range(pw):
                ws = min(max(int(np.floor(j * bw)) + xs, 0), w)
                we = min(max(int(np.ceil((j + 1) * bw)) + xs, 0), w)
                if he <= hs or we <= ws:
                    cells.append(fg.zeros(c, dtype=x.dtype.name, device=x.device))
                    continue
                region = img[:, hs:he, ws:we]
                cells.append(
                    region.amax(axis=(1, 2)) if mode == "max" else region.mean(axis=(1, 2))
                )
        rows.append(fg.stack(cells, 1).reshape(c, ph, pw))
    if not rows:
        return fg.zeros(0, c, ph, pw, dtype=x.dtype.name, device=x.device)
    return fg.stack(rows, 0)
