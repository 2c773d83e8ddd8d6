"""Complex numbers as pairs of real tensors: ``fg.polar``, ``fg.complex``,
``fg.view_as_complex`` and ``fg.view_as_real`` give a :class:`ComplexTensor` (real and
imaginary parts as two float tensors of one shape) with the arithmetic rotary position
embeddings use (LLaMA's ``view_as_real(view_as_complex(x) * freqs_cis)``): products, sums,
``conj``, ``abs``, ``angle``, reshaping and indexing. Gradients flow through the parts, so
a model using them trains as it does with PyTorch. The engine has no complex dtype:
``fg.tensor`` of Python complex numbers and complex kernels (FFT, complex matmul) are not
provided."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _core
from ._core import Tensor

_builtin_complex = complex


class _ComplexDType:
    def __init__(self, name: str, real: str) -> None:
        self.name, self.real = name, real
        self.kind = "c"
        self.is_complex = True
        self.is_floating_point = False

    def __repr__(self) -> str:
        return f"ferrograd.{self.name}"

    def __str__(self) -> str:
        return self.name

    def __eq__(self, other: object) -> bool:
        return other is self or (isinstance(other, str) and other == self.name)

    def __hash__(self) -> int:
        return hash(self.name)


complex64 = _ComplexDType("complex64", "float32")
complex128 = _ComplexDType("complex128", "float64")


def _part(x: Any, like: Tensor) -> Tensor:
    if isinstance(x, Tensor):
        return x
    return _core.full((), float(x), dtype=like.dtype.name, device=like.device)


class ComplexTensor:
    """A complex tensor held as its real and imaginary parts (two float tensors)."""

    __slots__ = ("imag", "real")

    def __init__(self, real: Tensor, imag: Tensor) -> None:
        if tuple(real.shape) != tuple(imag.shape):
            import numpy as np

            shape = np.broadcast_shapes(tuple(real.shape), tuple(imag.shape))
            real, imag = real.broadcast_to(*shape), imag.broadcast_to(*shape)
        self.real, self.imag = real, imag

    # ------------------------------------------------------------------------ attributes
    @property
    def shape(self) -> tuple:
        return tuple(self.real.shape)

    @property
    def ndim(self) -> int:
        return self.real.ndim

    @property
    def dtype(self) -> _ComplexDType:
        return complex128 if self.real.dtype.name == "float64" else complex64

    @property
    def device(self) -> Any:
        return self.real.device

    @property
    def requires_grad(self) -> bool:
        return bool(self.real.requires_grad or self.imag.requires_grad)

    def dim(self) -> int:
        return self.real.ndim

    def numel(self) -> int:
        return self.real.numel()

    def size(self, dim: int | None = None) -> Any:
        return self.real.size(dim) if dim is not None else self.real.size()

    def is_complex(self) -> bool:
        return True

    def __len__(self) -> int:
        return len(self.real)

    def __repr__(self) -> str:
        return f"ComplexTensor(real={self.real!r}, imag={self.imag!r})"

    # --------------------------------------------------------------------- arithmetic
    def _split(self, other: Any) -> tuple[Any, Any]:
        if isinstance(other, ComplexTensor):
            return other.real, other.imag
        if isinstance(other, _builtin_complex):
            return other.real, other.imag
        return other, None

    def __mul__(self, other: Any) -> ComplexTensor:
        a, b = self.real, self.imag
        c, d = self._split(other)
        if d is None:
            return ComplexTensor(a * c, b * c)
        return ComplexTensor(a * c - b * d, a * d + b * c)

    __rmul__ = __mul__

    def __add__(self, other: Any) -> ComplexTensor:
        c, d = self._split(other)
        return ComplexTensor(self.real + c, self.imag if d is None else self.imag + d)

    __radd__ = __add__

    def __sub__(self, other: Any) -> ComplexTensor:
        c, d = self._split(other)
        return ComplexTensor(self.real - c, self.imag if d is None else self.imag - d)

    def __rsub__(self, other: Any) -> ComplexTensor:
        return (-self) + other

    def __neg__(self) -> ComplexTensor:
        return ComplexTensor(-self.real, -self.imag)

    def __truediv__(self, other: Any) -> ComplexTensor:
        c, d = self._split(other)
        if d is None:
            return ComplexTensor(self.real / c, self.imag / c)
        den = c * c + d * d
        return ComplexTensor(
            (self.real * c + self.imag * d) / den, (self.imag * c - self.real * d) / den
        )

    def conj(self) -> ComplexTensor:
        return ComplexTensor(self.real, -self.imag)

    def abs(self) -> Tensor:
        return (self.real * self.real + self.imag * self.imag).sqrt()

    def angle(self) -> Tensor:
        return _atan2(self.imag, self.real)

    def exp(self) -> ComplexTensor:
        m = self.real.exp()
        return ComplexTensor(m * self.imag.cos(), m * self.imag.sin())

    def sum(self, *args: Any, **kwargs: Any) -> ComplexTensor:
        return ComplexTensor(self.real.sum(*args, **kwargs), self.imag.sum(*args, **kwargs))

    def mean(self, *args: Any, **kwargs: Any) -> ComplexTensor:
        return ComplexTensor(self.real.mean(*args, **kwargs), self.imag.mean(*args, **kwargs))

    # ------------------------------------------------------------------------ movement
    def _both(self, name: str, *args: Any, **kwargs: Any) -> ComplexTensor:
        return ComplexTensor(
            getattr(self.real, name)(*args, **kwargs), getattr(self.imag, name)(*args, **kwargs)
        )

    def view(self, *shape: Any) -> ComplexTensor:
        return self._both("reshape", *shape)

    def reshape(self, *shape: Any) -> ComplexTensor:
        return self._both("reshape", *shape)

    def flatten(self, *args: Any, **kwargs: Any) -> ComplexTensor:
        return self._both("flatten", *args, **kwargs)

    def unsqueeze(self, dim: int) -> ComplexTensor:
        return self._both("unsqueeze", dim)

    def squeeze(self, *args: Any) -> ComplexTensor:
        return self._both("squeeze", *args)

    def permute(self, *dims: Any) -> ComplexTensor:
        return self._both("permute", *dims)

    def transpose(self, *dims: Any) -> ComplexTensor:
        return self._both("transpose", *dims)

    def expand(self, *sizes: Any) -> ComplexTensor:
        return self._both("expand", *sizes)

    def contiguous(self) -> ComplexTensor:
        return self

    def clone(self) -> ComplexTensor:
        return self._both("clone")

    def detach(self) -> ComplexTensor:
        return self._both("detach")

    def to(self, *args: Any, **kwargs: Any) -> ComplexTensor:
        dt = kwargs.pop("dtype", None)
        rest = []
        for a in args:
            if isinstance(a, _ComplexDType):
                dt = a
            else:
                rest.append(a)
        out = self._both("to", *rest, **kwargs) if rest or kwargs else self
        if isinstance(dt, _ComplexDType):
            out = ComplexTensor(out.real.astype(dt.real), out.imag.astype(dt.real))
        return out

    def cpu(self) -> ComplexTensor:
        return self.to("cpu")

    def __getitem__(self, key: Any) -> ComplexTensor:
        return ComplexTensor(self.real[key], self.imag[key])

    def numpy(self) -> Any:
        re, im = self.real.detach().numpy(), self.imag.detach().numpy()
        # the parts set directly: re + 1j * im would turn an infinite im into a NaN real
        # part (1j * inf is nan + inf j)
        out = np.empty(re.shape, dtype=np.complex128 if re.dtype == np.float64 else np.complex64)
        out.real, out.imag = re, im
        return out


def _atan2(y: Tensor, x: Tensor) -> Tensor:
    import ferrograd as fg

    return fg.atan2(y, x)


def polar(abs: Tensor, angle: Tensor) -> ComplexTensor:
    """``abs * (cos(angle) + i sin(angle))``."""
    return ComplexTensor(abs * angle.cos(), abs * angle.sin())


def complex(real: Tensor, imag: Tensor) -> ComplexTensor:
    """The complex tensor ``real + i imag``."""
    return ComplexTensor(real, imag)


def view_as_complex(input: Tensor) -> ComplexTensor:
    """A ``(..., 2)`` float tensor as a complex tensor of shape ``(...)`` (pairs of real
    and imaginary parts)."""
    if not isinstance(input, Tensor) or input.ndim == 0 or input.shape[-1] != 2:
        shape = list(input.shape) if isinstance(input, Tensor) else type(input).__name__
        raise _core.ShapeError(
            f"view_as_complex: input must be a tensor whose last axis has size 2, got {shape}"
        )
    if input.dtype.kind != "f":
        raise _core.DTypeError(f"view_as_complex: input must be a float tensor, got {input.dtype}")
    return ComplexTensor(input[..., 0], input[..., 1])


def view_as_real(input: Any) -> Tensor:
    """A complex tensor as the float tensor ``(..., 2)`` of its real and imaginary parts."""
    if isinstance(input, ComplexTensor):
        return _core.stack([input.real, input.imag], -1)
    raise TypeError(f"view_as_real: expected a complex tensor, got {type(input).__name__}")


def is_complex(input: Any) -> bool:
    """Whether ``input`` is a complex tensor."""
    return isinstance(input, ComplexTensor)


cfloat = complex64
cdouble = complex128

__all__ = [
    "ComplexTensor",
    "cdouble",
    "cfloat",
    "complex",
    "complex64",
    "complex128",
    "is_complex",
    "polar",
    "view_as_complex",
    "view_as_real",
]
