"""Exception classes that are both what PyTorch raises and what ferrograd raised before, so
code written against either catches them."""

from __future__ import annotations

from .._core import DTypeError, ShapeError


class ArgumentAssertionError(AssertionError, ValueError):
    """A constructor argument PyTorch refuses with an ``assert`` (``AssertionError``);
    ferrograd's older ``ValueError`` still catches it."""


class IndexRuntimeError(IndexError, RuntimeError):
    """An index out of range where PyTorch raises ``RuntimeError``; ferrograd's older
    ``IndexError`` still catches it."""


class IndexTypeError(IndexError, TypeError):
    """An index of the wrong dtype (a float index tensor) where PyTorch raises
    ``IndexError``; ferrograd's older ``TypeError`` still catches it."""


class ArgumentRuntimeError(ValueError, RuntimeError):
    """A bad argument value where PyTorch raises ``RuntimeError``; ferrograd's older
    ``ValueError`` still catches it."""


class ArgumentTypeRuntimeError(TypeError, RuntimeError):
    """An argument of the wrong kind where PyTorch raises ``RuntimeError``; ferrograd's
    older ``TypeError`` still catches it."""


class IndexValueError(IndexError, ShapeError):  # type: ignore[misc]
    """An empty dimension reduced (``argmax`` of an empty tensor, ...) where PyTorch raises
    ``IndexError``; ferrograd's older ``ValueError`` (a ``ShapeError``, so also a
    ``RuntimeError``) still catches it."""


class UnsupportedDTypeError(DTypeError, NotImplementedError):  # type: ignore[misc]
    """A dtype an op does not compute in (``var`` of integers, ...), where PyTorch raises
    ``NotImplementedError``; ferrograd's older ``DTypeError`` still catches it."""


class UnsupportedValueError(NotImplementedError, ValueError):
    """An argument combination PyTorch has not implemented (``NotImplementedError``);
    ferrograd's older ``ValueError`` still catches it."""


class ShapeAssertionError(ShapeError, AssertionError):  # type: ignore[misc]
    """A shape PyTorch refuses with an ``assert`` (``AssertionError``: the inputs and masks
    of ``MultiheadAttention``); ferrograd's older ``ShapeError`` still catches it."""


class DTypeAssertionError(DTypeError, AssertionError):  # type: ignore[misc]
    """A dtype PyTorch refuses with an ``assert`` (an integer attention mask); ferrograd's
    older ``TypeError`` (a ``DTypeError``) still catches it."""


class DTypeValueError(DTypeError, ValueError):  # type: ignore[misc]
    """A dtype PyTorch refuses with ``ValueError`` (a recurrent layer's input that does not
    match its weights); ferrograd's older ``DTypeError`` still catches it."""


class ShapeNotImplementedError(ShapeError, NotImplementedError):  # type: ignore[misc]
    """A rank an op has no kernel for (``interpolate``'s ``bilinear`` on a 3-D input, ...),
    where PyTorch raises ``NotImplementedError``; ferrograd's older ``ShapeError`` still
    catches it."""


def require_float_fill(op: str, t: object) -> None:
    """A continuous random fill (``normal_``, ``uniform_``, the initialisers built on them)
    of an integer or bool tensor raises, as PyTorch's does, instead of writing truncated
    samples."""
    dt = t.dtype  # type: ignore[attr-defined]
    if not (dt.is_floating_point or dt.is_complex):
        raise UnsupportedDTypeError(
            f"{op}: fills with samples of a continuous distribution, which need a floating "
            f"point tensor, got {dt}"
        )
