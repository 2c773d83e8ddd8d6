"""MegEngine's data transforms. A transform maps one sample (a tuple) to a new one;
``apply_batch`` maps a list of samples. Vision transforms work on HWC numpy images and
know, through ``order``, which field of the sample is the image (default: the first,
``("image",)``); fields whose names end in ``category`` or ``info`` pass through, as do
fields beyond ``order``. Besides "image" they handle "coords" (N, 2) x-y points, "boxes"
(N, 4) xyxy boxes and "mask" (H, W, 1) maps."""

from __future__ import annotations

import collections.abc
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

INTER_NEAREST = 0
INTER_LINEAR = 1


class Transform(ABC):
    """Base of all transforms: subclasses define ``apply(sample)``."""

    def apply_batch(self, inputs: Sequence[Any]) -> tuple:
        """Apply the transform to every sample of a batch."""
        return tuple(self.apply(x) for x in inputs)

    @abstractmethod
    def apply(self, input: Any) -> Any:
        pass

    def __repr__(self) -> str:
        return type(self).__name__


class PseudoTransform(Transform):
    """The identity: the DataLoader's default transform."""

    def apply(self, input: Any) -> Any:
        return input


def _image_shape(op: str, image: Any) -> tuple[int, int]:
    shape = np.shape(image)
    if len(shape) != 3:
        raise ValueError(f"{op}: expected an HWC image with 3 dimensions, got shape {shape}")
    return shape[0], shape[1]


class VisionTransform(Transform):
    """Base of the vision transforms: ``apply`` sends each field of the sample to the
    ``_apply_<kind>`` method its name in ``order`` selects. Subclasses define
    ``_apply_image`` and, where it makes sense, ``_apply_coords`` and ``_apply_mask``."""

    def __init__(self, order: Sequence[str] | None = None) -> None:
        super().__init__()
        if order is None:
            order = ("image",)
        elif isinstance(order, str) or not isinstance(order, collections.abc.Sequence):
            raise ValueError(f"{type(self).__name__}: order should be a sequence, got {order!r}")
        for k in order:
            if k == "batch":
                raise ValueError(f"{type(self).__name__}: {k!r} is not a valid data type")
            if k.endswith(("category", "info")):
                continue
            if self._get_apply(k) is None:
                raise NotImplementedError(
                    f"{type(self).__name__}: data type {k!r} is not supported"
                )
        self.order = tuple(order)

    def apply(self, input: Any) -> Any:
        if not isinstance(input, tuple):
            input = (input,)
        out = []
        for i, value in enumerate(input):
            fn = self._get_apply(self.order[i]) if i < len(self.order) else None
            out.append(value if fn is None else fn(value))
        return out[0] if len(out) == 1 else tuple(out)

    def _get_apply(self, key: str) -> Any:
        return getattr(self, f"_apply_{key}", None)

    def _get_image(self, input: Any) -> np.ndarray:
        if not isinstance(input, tuple):
            input = (input,)
        return input[self.order.index("image")]

    def _apply_image(self, image: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} does not transform images")

    def _apply_coords(self, coords: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} does not transform coords")

    def _apply_boxes(self, boxes: np.ndarray) -> np.ndarray:
        # The four corners of each box go through _apply_coords; the result is their
        # bounding box, so flips and crops keep boxes in xyxy form.
        b = np.asarray(boxes).reshape(-1, 4)
        corners = b[:, [0, 1, 2, 1, 0, 3, 2, 3]].reshape(-1, 2).copy()
        corners = self._apply_coords(corners).reshape(-1, 4, 2)
        return np.concatenate((corners.min(axis=1), corners.max(axis=1)), axis=1)

    def _apply_mask(self, mask: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} does not transform masks")


class ToMode(VisionTransform):
    """HWC image (and mask) to CHW, the layout convolution layers take."""

    def __init__(self, mode: str = "CHW", *, order: Sequence[str] | None = None) -> None:
        super().__init__(order)
        if mode != "CHW":
            raise ValueError(f"ToMode: unsupported mode {mode!r}; only 'CHW' is supported")
        self.mode = mode

    def _apply_image(self, image: np.ndarray) -> np.ndarray:
        _image_shape("ToMode", image)
        return np.ascontiguousarray(np.moveaxis(image, 2, 0))

    def _apply_coords(self, coords: np.ndarray) -> np.ndarray:
        return coords

    def _apply_mask(self, mask: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.moveaxis(mask, 2, 0))


class Compose(VisionTransform):
    """Applies ``transforms`` one after another (all sharing this ``order``).

    ``shuffle_indices``: groups of 1-based positions whose transforms run in a random
    order per sample. ``batch_compose=True`` applies each transform to the whole batch
    before the next (cannot be combined with shuffling)."""

    def __init__(
        self,
        transforms: Sequence[VisionTransform] = (),
        batch_compose: bool = False,
        shuffle_indices: Sequence[Sequence[int]] | None = None,
        *,
        order: Sequence[str] | None = None,
    ) -> None:
        super().__init__(order)
        self.transforms = list(transforms)
        self._set_order()
        if batch_compose and shuffle_indices is not None:
            raise ValueError("Compose: shuffle_indices cannot be used with batch_compose=True")
        self.batch_compose = batch_compose
        self.shuffle_indices = (
            None
            if shuffle_indices is None
            else [tuple(i - 1 for i in group) for group in shuffle_indices]
        )

    def _set_order(self) -> None:
        for t in self.transforms:
            t.order = self.order
            if isinstance(t, Compose):
                t._set_order()

    def apply_batch(self, inputs: Sequence[Any]) -> Any:
        if self.batch_compose:
            for t in self.transforms:
                inputs = t.apply_batch(inputs)
            return inputs
        return super().apply_batch(inputs)

    def apply(self, input: Any) -> Any:
        for t in self._ordered():
            input = t.apply(input)
        return input

    def _ordered(self) -> list:
        if self.shuffle_indices is None:
            return self.transforms
        pos = list(range(len(self.transforms)))
        for group in self.shuffle_indices:
            for src, dst in zip(group, np.random.permutation(group).tolist()):
                pos[src] = dst
        return [self.transforms[i] for i in pos]


def _pad_sizes(op: str, size: Any) -> tuple[int, int, int, int]:
    if isinstance(size, (int, np.integer)):
        return (int(size),) * 4  # type: ignore[return-value]
    if isinstance(size, collections.abc.Sequence) and len(size) == 2:
        return (0, int(size[0]), 0, int(size[1]))
    if isinstance(size, collections.abc.Sequence) and len(size) == 4:
        return tuple(int(s) for s in size)  # type: ignore[return-value]
    raise ValueError(
        f"{op}: size should be an int, (bottom, right) or (top, bottom, left, right), got {size!r}"
    )


def _pad(image: np.ndarray, size: tuple[int, int, int, int], value: Any) -> np.ndarray:
    top, bottom, left, right = size
    if np.asarray(value).dtype.kind == "f":
        image = image.astype(np.float32)
    h, w, c = image.shape
    out = np.empty((h + top + bottom, w + left + right, c), dtype=image.dtype)
    fill = np.asarray(value, dtype=image.dtype).reshape(-1)
    out[...] = fill[:c] if fill.size >= c else fill[0]
    out[top : top + h, left : left + w] = image
    return out


class Pad(VisionTransform):
    """Pads the image with ``value`` (a float value makes the image float32) and the mask
    with ``mask_value``; ``size`` as int (all sides), (bottom, right) or
    (top, bottom, left, right)."""

    def __init__(
        self,
        size: Any = 0,
        value: Any = 0,
        mask_value: int = 0,
        *,
        order: Sequence[str] | None = None,
    ) -> None:
        super().__init__(order)
        self.size = _pad_sizes("Pad", size)
        self.value = value
        if not isinstance(mask_value, int):
            raise ValueError(f"Pad: mask_value should be an int, got {mask_value!r}")  # noqa: TRY004 (as MegEngine)
        self.mask_value = mask_value

    def _apply_image(self, image: np.ndarray) -> np.ndarray:
        _image_shape("Pad", image)
        return _pad(image, self.size, self.value)

    def _apply_coords(self, coords: np.ndarray) -> np.ndarray:
        coords = np.array(coords)
        coords[:, 0] += self.size[2]
        coords[:, 1] += self.size[0]
        return coords

    def _apply_mask(self, mask: np.ndarray) -> np.ndarray:
        return _pad(mask, self.size, self.mask_value)


def _resize(image: np.ndarray, th: int, tw: int, interpolation: Any) -> np.ndarray:
    """Resize an HWC array to (th, tw) with pixel centres aligned (the convention of
    OpenCV's resize): nearest picks floor(dst * scale), linear blends the two source
    pixels around (dst + 0.5) * scale - 0.5; integer images are rounded back."""
    h, w = image.shape[:2]
    if interpolation in (INTER_NEAREST, "nearest"):
        ys = np.minimum((np.arange(th) * (h / th)).astype(np.int64), h - 1)
        xs = np.minimum((np.arange(tw) * (w / tw)).astype(np.int64), w - 1)
        return image[ys][:, xs]
    if interpolation not in (INTER_LINEAR, "linear", "bilinear"):
        raise ValueError(
            f"Resize: unsupported interpolation {interpolation!r}; use nearest (0) or linear (1)"
        )

    def axis(n_out: int, n_in: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        src = np.clip((np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5, 0, n_in - 1)
        lo = np.floor(src).astype(np.int64)
        hi = np.minimum(lo + 1, n_in - 1)
        return lo, hi, (src - lo)

    y0, y1, fy = axis(th, h)
    x0, x1, fx = axis(tw, w)
    img = image.astype(np.float64)
    fx = fx[None, :, None]
    top = img[y0][:, x0] * (1 - fx) + img[y0][:, x1] * fx
    bot = img[y1][:, x0] * (1 - fx) + img[y1][:, x1] * fx
    out = top * (1 - fy[:, None, None]) + bot * fy[:, None, None]
    if image.dtype.kind in "iu":
        info = np.iinfo(image.dtype)
        return np.clip(np.rint(out), info.min, info.max).astype(image.dtype)
    return out.astype(image.dtype)


class Resize(VisionTransform):
    """Resizes to ``output_size``: (height, width), or an int for the shorter side (the
    longer one keeps the aspect ratio). Masks always use nearest interpolation."""

    def __init__(
        self,
        output_size: Any,
        interpolation: Any = INTER_LINEAR,
        *,
        order: Sequence[str] | None = None,
    ) -> None:
        super().__init__(order)
        self.output_size = output_size
        self.interpolation = interpolation

    def apply(self, input: Any) -> Any:
        self._shape_info = self._get_shape(self._get_image(input))
        return super().apply(input)

    def _get_shape(self, image: np.ndarray) -> tuple[int, int, int, int]:
        h, w = _image_shape("Resize", image)
        size = self.output_size
        if isinstance(size, (int, np.integer)):
            if min(h, w) == size:
                return h, w, h, w
            if h < w:
                return h, w, int(size), int(size * w / h)
            return h, w, int(size * h / w), int(size)
        return (h, w, int(size[0]), int(size[1]))

    def _apply_image(self, image: np.ndarray) -> np.ndarray:
        h, w, th, tw = self._shape_info
        return image if (h, w) == (th, tw) else _resize(image, th, tw, self.interpolation)

    def _apply_coords(self, coords: np.ndarray) -> np.ndarray:
        h, w, th, tw = self._shape_info
        coords = np.array(coords)
        coords[:, 0] = coords[:, 0] * (tw / w)
        coords[:, 1] = coords[:, 1] * (th / h)
        return coords

    def _apply_mask(self, mask: np.ndarray) -> np.ndarray:
        h, w, th, tw = self._shape_info
        return mask if (h, w) == (th, tw) else _resize(mask, th, tw, INTER_NEAREST)


def _pair(size: Any) -> tuple[int, int]:
    if isinstance(size, (int, np.integer)):
        return int(size), int(size)
    return int(size[0]), int(size[1])


class CenterCrop(VisionTransform):
    """Crops an (height, width) window (an int: a square) from the centre."""

    def __init__(self, output_size: Any, *, order: Sequence[str] | None = None) -> None:
        super().__init__(order)
        self.output_size = _pair(output_size)

    def apply(self, input: Any) -> Any:
        th, tw = self.output_size
        h, w = _image_shape("CenterCrop", self._get_image(input))
        if th > h or tw > w:
            raise ValueError(
                f"CenterCrop: output size {(th, tw)} is bigger than the image size {(h, w)}"
            )
        self._x = round((w - tw) / 2.0)
        self._y = round((h - th) / 2.0)
        return super().apply(input)

    def _apply_image(self, image: np.ndarray) -> np.ndarray:
        th, tw = self.output_size
        return image[self._y : self._y + th, self._x : self._x + tw]

    def _apply_coords(self, coords: np.ndarray) -> np.ndarray:
        coords = np.array(coords)
        coords[:, 0] -= self._x
        coords[:, 1] -= self._y
        return coords

    _apply_mask = _apply_image


class RandomCrop(VisionTransform):
    """Pads by ``padding_size`` (as ``Pad``), then crops an ``output_size`` window at a
    random position; an image still smaller than the window is padded up to it."""

    def __init__(
        self,
        output_size: Any,
        padding_size: Any = 0,
        padding_value: Any = (0, 0, 0),
        padding_maskvalue: int = 0,
        *,
        order: Sequence[str] | None = None,
    ) -> None:
        super().__init__(order)
        self.output_size = _pair(output_size)
        self.pad = Pad(padding_size, padding_value, order=self.order)
        self.padding_value = padding_value
        self.padding_maskvalue = padding_maskvalue

    def apply(self, input: Any) -> Any:
        self.pad.order = self.order
        input = self.pad.apply(input)
        self._h, self._w = _image_shape("RandomCrop", self._get_image(input))
        th, tw = self.output_size
        self._x = np.random.randint(0, max(0, self._w - tw) + 1)
        self._y = np.random.randint(0, max(0, self._h - th) + 1)
        return super().apply(input)

    def _crop(self, image: np.ndarray, value: Any) -> np.ndarray:
        th, tw = self.output_size
        extra = (0, max(th - self._h, 0), 0, max(tw - self._w, 0))
        if any(extra):
            image = _pad(image, extra, value)
        return image[self._y : self._y + th, self._x : self._x + tw]

    def _apply_image(self, image: np.ndarray) -> np.ndarray:
        return self._crop(image, self.padding_value)

    def _apply_coords(self, coords: np.ndarray) -> np.ndarray:
        coords = np.array(coords)
        coords[:, 0] -= self._x
        coords[:, 1] -= self._y
        return coords

    def _apply_mask(self, mask: np.ndarray) -> np.ndarray:
        return self._crop(mask, self.padding_maskvalue)


class RandomHorizontalFlip(VisionTransform):
    """Mirrors left-right with probability ``prob`` (one draw per sample)."""

    def __init__(self, prob: float = 0.5, *, order: Sequence[str] | None = None) -> None:
        super().__init__(order)
        self.prob = prob

    def apply(self, input: Any) -> Any:
        self._flipped = np.random.random() < self.prob
        self._w = _image_shape("RandomHorizontalFlip", self._get_image(input))[1]
        return super().apply(input)

    def _apply_image(self, image: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(image[:, ::-1]) if self._flipped else image

    def _apply_coords(self, coords: np.ndarray) -> np.ndarray:
        if self._flipped:
            coords = np.array(coords)
            coords[:, 0] = self._w - coords[:, 0]
        return coords

    _apply_mask = _apply_image


class RandomVerticalFlip(VisionTransform):
    """Mirrors top-bottom with probability ``prob`` (one draw per sample)."""

    def __init__(self, prob: float = 0.5, *, order: Sequence[str] | None = None) -> None:
        super().__init__(order)
        self.prob = prob

    def apply(self, input: Any) -> Any:
        self._flipped = np.random.random() < self.prob
        self._h = _image_shape("RandomVerticalFlip", self._get_image(input))[0]
        return super().apply(input)

    def _apply_image(self, image: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(image[::-1]) if self._flipped else image

    def _apply_coords(self, coords: np.ndarray) -> np.ndarray:
        if self._flipped:
            coords = np.array(coords)
            coords[:, 1] = self._h - coords[:, 1]
        return coords

    _apply_mask = _apply_image


class RandomResizedCrop(VisionTransform):
    """Crops a random window, then resizes it to ``output_size`` ((height, width), or an int
    for a square): the window covers a fraction of the image area drawn uniformly from
    ``scale_range`` and has a width/height ratio drawn log-uniformly from ``ratio_range``.
    After 10 draws that do not fit, it takes the centred window of the whole image clamped
    to ``ratio_range``. Masks are resized with nearest interpolation."""

    def __init__(
        self,
        output_size: Any,
        scale_range: Sequence[float] = (0.08, 1.0),
        ratio_range: Sequence[float] = (3.0 / 4, 4.0 / 3),
        interpolation: Any = INTER_LINEAR,
        *,
        order: Sequence[str] | None = None,
    ) -> None:
        super().__init__(order)
        if scale_range[0] > scale_range[1]:
            raise ValueError(
                f"RandomResizedCrop: scale_range should be (min, max), got {tuple(scale_range)}"
            )
        if ratio_range[0] > ratio_range[1] or ratio_range[0] <= 0:
            raise ValueError(
                "RandomResizedCrop: ratio_range should be (min, max) of positive ratios, got "
                f"{tuple(ratio_range)}"
            )
        self.output_size = _pair(output_size)
        self.scale_range = tuple(scale_range)
        self.ratio_range = tuple(ratio_range)
        self.interpolation = interpolation

    def apply(self, input: Any) -> Any:
        self._window = self._draw(*_image_shape("RandomResizedCrop", self._get_image(input)))
        return super().apply(input)

    def _draw(self, height: int, width: int, attempts: int = 10) -> tuple[int, int, int, int]:
        area = height * width
        lo, hi = np.log(self.ratio_range[0]), np.log(self.ratio_range[1])
        for _ in range(attempts):
            target = float(np.random.uniform(*self.scale_range)) * area
            ratio = float(np.exp(np.random.uniform(lo, hi)))
            w = round(math.sqrt(target * ratio))
            h = round(math.sqrt(target / ratio))
            if 0 < w <= width and 0 < h <= height:
                return (
                    np.random.randint(0, width - w + 1),
                    np.random.randint(0, height - h + 1),
                    w,
                    h,
                )
        w, h = width, height
        if width / height < self.ratio_range[0]:
            h = round(width / self.ratio_range[0])
        elif width / height > self.ratio_range[1]:
            w = round(height * self.ratio_range[1])
        return (width - w) // 2, (height - h) // 2, w, h

    def _apply_image(self, image: np.ndarray) -> np.ndarray:
        x, y, w, h = self._window
        return _resize(image[y : y + h, x : x + w], *self.output_size, self.interpolation)

    def _apply_coords(self, coords: np.ndarray) -> np.ndarray:
        x, y, w, h = self._window
        coords = np.array(coords)
        coords[:, 0] = (coords[:, 0] - x) * (self.output_size[1] / w)
        coords[:, 1] = (coords[:, 1] - y) * (self.output_size[0] / h)
        return coords

    def _apply_mask(self, mask: np.ndarray) -> np.ndarray:
        x, y, w, h = self._window
        return _resize(mask[y : y + h, x : x + w], *self.output_size, INTER_NEAREST)


def _gray(image: np.ndarray) -> np.ndarray:
    """The (H, W, 1) luma of a BGR image (OpenCV's weights 0.114, 0.587, 0.299)."""
    return image[..., :3] @ np.array([0.114, 0.587, 0.299], dtype=np.float32)[:, None]


class _ColorTransform(VisionTransform):
    """Blends the image with a reference (``_reference``) by a factor drawn uniformly from
    ``[max(0, 1 - value), 1 + value]``, in float32, clipped to [0, 255] and cast back."""

    def __init__(self, value: float, *, order: Sequence[str] | None = None) -> None:
        super().__init__(order)
        if value < 0:
            raise ValueError(f"{type(self).__name__}: value should be non-negative, got {value}")
        self.value = value

    def _reference(self, image: np.ndarray) -> Any:
        return 0.0

    def _apply_image(self, image: np.ndarray) -> np.ndarray:
        if self.value == 0:
            return image
        img = image.astype(np.float32)
        alpha = np.float32(np.random.uniform(max(0.0, 1 - self.value), 1 + self.value))
        out = img * alpha + self._reference(img) * (1 - alpha)
        return out.clip(0, 255).astype(image.dtype)

    def _apply_coords(self, coords: np.ndarray) -> np.ndarray:
        return coords

    def _apply_mask(self, mask: np.ndarray) -> np.ndarray:
        return mask


class BrightnessTransform(_ColorTransform):
    """Scales the image by a random factor in ``[max(0, 1 - value), 1 + value]``."""


class ContrastTransform(_ColorTransform):
    """Moves the image towards or away from its mean gray level by a random factor."""

    def _reference(self, image: np.ndarray) -> Any:
        return _gray(image).mean()


class SaturationTransform(_ColorTransform):
    """Moves each pixel towards or away from its own gray level by a random factor."""

    def _reference(self, image: np.ndarray) -> Any:
        return _gray(image)


class ColorJitter(VisionTransform):
    """Brightness, contrast and saturation jitter (each skipped when 0), applied in a
    random order per sample. Hue jitter needs an HSV conversion this package does not
    have: a non-zero ``hue`` raises ``NotImplementedError``."""

    def __init__(
        self,
        brightness: float = 0,
        contrast: float = 0,
        saturation: float = 0,
        hue: float = 0,
        *,
        order: Sequence[str] | None = None,
    ) -> None:
        super().__init__(order)
        if hue != 0:
            raise NotImplementedError(f"ColorJitter: hue jitter is not supported (hue={hue})")
        parts: list[VisionTransform] = []
        if brightness != 0:
            parts.append(BrightnessTransform(brightness))
        if contrast != 0:
            parts.append(ContrastTransform(contrast))
        if saturation != 0:
            parts.append(SaturationTransform(saturation))
        self.transforms = Compose(
            parts, shuffle_indices=[tuple(range(1, len(parts) + 1))], order=order
        )

    def apply(self, input: Any) -> Any:
        self.transforms.order = self.order
        self.transforms._set_order()
        return self.transforms.apply(input)


class Normalize(VisionTransform):
    """``(image - mean) / std`` per channel (last axis), computed in float32."""

    def __init__(
        self, mean: Any = 0.0, std: Any = 1.0, *, order: Sequence[str] | None = None
    ) -> None:
        super().__init__(order)
        self.mean = np.array(mean, dtype=np.float32)
        self.std = np.array(std, dtype=np.float32)

    def _apply_image(self, image: np.ndarray) -> np.ndarray:
        return (image - self.mean) / self.std

    def _apply_coords(self, coords: np.ndarray) -> np.ndarray:
        return coords

    def _apply_mask(self, mask: np.ndarray) -> np.ndarray:
        return mask


__all__ = [
    "BrightnessTransform",
    "CenterCrop",
    "ColorJitter",
    "Compose",
    "ContrastTransform",
    "Normalize",
    "Pad",
    "PseudoTransform",
    "RandomCrop",
    "RandomHorizontalFlip",
    "RandomResizedCrop",
    "RandomVerticalFlip",
    "Resize",
    "SaturationTransform",
    "ToMode",
    "Transform",
    "VisionTransform",
]
