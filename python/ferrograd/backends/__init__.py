"""``torch.backends``' switches, so scripts that set them run unchanged: ``cudnn``
(ferrograd has no cuDNN: ``is_available()`` is False; ``benchmark``, ``deterministic``,
``enabled``, ``allow_tf32`` are kept but change nothing: convolutions are ferrograd's own
kernels, deterministic on every device), ``mps`` (no Apple GPU backend: ``is_available()`` is
False), ``cuda.matmul.allow_tf32`` (kept; CUDA products compute in float32) and ``mkldnn``."""

from __future__ import annotations

from . import cuda, cudnn, mkldnn, mps

__all__ = ["cuda", "cudnn", "mkldnn", "mps"]
