"""PyTorch's ``torch.version``: ``__version__`` (ferrograd's own version, not PyTorch's),
``cuda`` (the CUDA version of the NVIDIA driver, as ``"12.4"``, or None where no driver
loads, as CPU-only PyTorch's None), ``debug``, ``git_version``, and ``hip`` / ``rocm`` /
``xpu`` (None: ferrograd runs on the CPU and CUDA only)."""

from __future__ import annotations

import ctypes

from ._core import __version__

__all__ = ["__version__", "cuda", "debug", "git_version", "hip"]

debug = False
git_version = "Unknown"
hip = None
rocm = None
xpu = None


def _driver_cuda_version() -> str | None:
    """``major.minor`` of the CUDA version the driver supports (cuDriverGetVersion), or
    None without a driver. ferrograd loads CUDA at run time, so this stands for the CUDA
    PyTorch was built with. (``ferrograd.cuda`` has loaded the driver library already where
    there is one, so this costs nothing at import.)"""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    v = ctypes.c_int()
    if lib.cuDriverGetVersion(ctypes.byref(v)) != 0 or v.value <= 0:
        return None
    return f"{v.value // 1000}.{v.value % 1000 // 10}"


cuda = _driver_cuda_version()
