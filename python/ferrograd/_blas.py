"""Finds the OpenBLAS that numpy's wheels bundle and hands it to the engine, which uses it for
large float matrix products on CPUs where it measured faster than the `gemm` crate (those
without AVX-512; ``FERROGRAD_BLAS=gemm`` or ``=openblas`` overrides the choice)."""

from __future__ import annotations

import glob
import os

from . import _core

_INFO = {"library": None, "in_use": False}


def _numpy_openblas() -> str | None:
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy is a dependency
        return None
    site = os.path.dirname(os.path.dirname(os.path.abspath(numpy.__file__)))
    for pattern in ("numpy.libs/libscipy_openblas64_*.so*", "numpy/.dylibs/libscipy_openblas64_*"):
        found = sorted(glob.glob(os.path.join(site, pattern)))
        if found:
            return found[0]
    return None


def _load() -> None:
    if os.environ.get("FERROGRAD_BLAS") == "gemm":
        return
    path = _numpy_openblas()
    if path is None:
        return
    loaded, in_use = _core._set_blas_library(path)
    if loaded:
        _INFO.update(library=path, in_use=in_use)


def blas_info() -> dict:
    """The OpenBLAS loaded for large products (None when none) and whether this CPU uses it."""
    return dict(_INFO)


_load()
