"""``torch.backends.cuda``: ``matmul.allow_tf32`` and the attention switches are kept for
scripts that set them; ferrograd's CUDA products compute in float32 whatever they say."""

from __future__ import annotations


class _Matmul:
    allow_tf32 = False
    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True


matmul = _Matmul()


_sdp = {"flash": True, "mem_efficient": True, "math": True}


def flash_sdp_enabled() -> bool:
    return _sdp["flash"]


def enable_flash_sdp(enabled: bool) -> None:
    _sdp["flash"] = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    return _sdp["mem_efficient"]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    _sdp["mem_efficient"] = bool(enabled)


def math_sdp_enabled() -> bool:
    return _sdp["math"]


def enable_math_sdp(enabled: bool) -> None:
    _sdp["math"] = bool(enabled)


_sdp["cudnn"] = True


def cudnn_sdp_enabled() -> bool:
    return _sdp["cudnn"]


def enable_cudnn_sdp(enabled: bool) -> None:
    _sdp["cudnn"] = bool(enabled)


class _SdpFlags:
    """Sets the attention switches for a ``with`` block and restores them after (the
    switches are recorded only: ferrograd has one attention path)."""

    def __init__(self, flags: dict[str, bool]) -> None:
        self._flags = flags
        self._saved: list[dict[str, bool]] = []

    def __enter__(self) -> _SdpFlags:  # noqa: PYI034
        self._saved.append(dict(_sdp))
        _sdp.update(self._flags)
        return self

    def __exit__(self, *exc: object) -> None:
        _sdp.update(self._saved.pop())

    def __call__(self, fn: object) -> object:
        import functools

        @functools.wraps(fn)  # type: ignore[arg-type]
        def wrapped(*args: object, **kwargs: object) -> object:
            with _SdpFlags(self._flags):
                return fn(*args, **kwargs)  # type: ignore[operator]

        return wrapped


def sdp_kernel(
    enable_flash: bool = True,
    enable_math: bool = True,
    enable_mem_efficient: bool = True,
    enable_cudnn: bool = True,
) -> _SdpFlags:
    """PyTorch's deprecated context manager that picks the attention kernels; the switches
    are set for the block and restored after (ferrograd has one attention path, so they
    change nothing). Warns as PyTorch's (``FutureWarning``)."""
    import warnings

    warnings.warn(
        "`torch.backends.cuda.sdp_kernel()` is deprecated. In the future, this context "
        "manager will be removed. Please see `torch.nn.attention.sdpa_kernel()` for the new "
        "context manager, with updated signature.",
        FutureWarning,
        stacklevel=2,
    )
    return _SdpFlags(
        {
            "flash": bool(enable_flash),
            "math": bool(enable_math),
            "mem_efficient": bool(enable_mem_efficient),
            "cudnn": bool(enable_cudnn),
        }
    )
