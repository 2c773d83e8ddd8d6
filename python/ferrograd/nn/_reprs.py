"""PyTorch's one-line descriptions (``extra_repr``) of the common layers, so ``print(model)``
reads as it does with PyTorch: ``Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2),
padding=(1, 1))``, ``Dropout(p=0.1, inplace=False)``, ..."""

from __future__ import annotations

from typing import Any

from . import modules as _m


def _t(v: Any, n: int) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def _conv(self: Any) -> str:
    n = len(self.kernel_size)
    s = f"{self.in_channels}, {self.out_channels}, kernel_size={tuple(self.kernel_size)}"
    s += f", stride={_t(self.stride, n)}"
    if isinstance(self.padding, str):
        s += f", padding={self.padding}"
    elif _t(self.padding, n) != (0,) * n:
        s += f", padding={_t(self.padding, n)}"
    if _t(self.dilation, n) != (1,) * n:
        s += f", dilation={_t(self.dilation, n)}"
    op = getattr(self, "output_padding", 0)
    if _t(op, n) != (0,) * n:
        s += f", output_padding={_t(op, n)}"
    if self.groups != 1:
        s += f", groups={self.groups}"
    if self.bias is None:
        s += ", bias=False"
    if getattr(self, "padding_mode", "zeros") != "zeros":
        s += f", padding_mode={self.padding_mode}"
    return s


def _max_pool(self: Any) -> str:
    stride = self.kernel_size if self.stride is None else self.stride
    return (
        f"kernel_size={self.kernel_size}, stride={stride}, padding={self.padding}, "
        f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
    )


def _avg_pool(self: Any) -> str:
    stride = self.kernel_size if self.stride is None else self.stride
    return f"kernel_size={self.kernel_size}, stride={stride}, padding={self.padding}"


def _norm_layer(self: Any) -> str:
    return (
        f"{tuple(self.normalized_shape)}, eps={self.eps}, "
        f"elementwise_affine={getattr(self, 'weight', None) is not None}, "
        f"bias={getattr(self, 'bias', None) is not None}"
    )


def _batch_norm(self: Any) -> str:
    return (
        f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
        f"affine={self.affine}, bias={getattr(self, 'bias', None) is not None}, "
        f"track_running_stats={self.track_running_stats}"
    )


def _embedding(self: Any) -> str:
    s = f"{self.num_embeddings}, {self.embedding_dim}"
    if getattr(self, "padding_idx", None) is not None:
        s += f", padding_idx={self.padding_idx}"
    if getattr(self, "max_norm", None) is not None:
        s += f", max_norm={self.max_norm}"
    if getattr(self, "norm_type", 2) != 2:
        s += f", norm_type={self.norm_type}"
    if getattr(self, "scale_grad_by_freq", False):
        s += f", scale_grad_by_freq={self.scale_grad_by_freq}"
    if getattr(self, "sparse", False):
        s += ", sparse=True"
    return s


def _fields(*names: str) -> Any:
    def extra_repr(self: Any) -> str:
        return ", ".join(f"{n}={getattr(self, n)!r}" for n in names if hasattr(self, n))

    return extra_repr


def _upsample(self: Any) -> str:
    sf = self.scale_factor
    if sf is not None:
        head = "scale_factor=" + repr(
            tuple(float(v) for v in sf) if isinstance(sf, (list, tuple)) else float(sf)
        )
    else:
        head = "size=" + repr(self.size)
    return f"{head}, mode={self.mode!r}"


def _inplace_flag(base: Any) -> Any:
    """PyTorch's activations: ``inplace=True`` shown only when set."""

    def extra_repr(self: Any) -> str:
        head = base(self) if base is not None else ""
        if getattr(self, "inplace", False):
            return f"{head}, inplace=True" if head else "inplace=True"
        return head

    return extra_repr


def install() -> None:
    from ferrograd import nn

    table: dict[str, Any] = {
        "Conv1d": _conv,
        "Conv2d": _conv,
        "Conv3d": _conv,
        "ConvTranspose1d": _conv,
        "ConvTranspose2d": _conv,
        "ConvTranspose3d": _conv,
        "MaxPool1d": _max_pool,
        "MaxPool2d": _max_pool,
        "MaxPool3d": _max_pool,
        "AvgPool1d": _avg_pool,
        "AvgPool2d": _avg_pool,
        "AvgPool3d": _avg_pool,
        "LayerNorm": _norm_layer,
        "RMSNorm": lambda self: (
            f"{tuple(self.normalized_shape)}, eps={self.eps}, "
            f"elementwise_affine={getattr(self, 'weight', None) is not None}"
        ),
        "LocalResponseNorm": lambda self: (
            f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
        ),
        "InstanceNorm1d": _batch_norm,
        "InstanceNorm2d": _batch_norm,
        "InstanceNorm3d": _batch_norm,
        "BatchNorm1d": _batch_norm,
        "BatchNorm2d": _batch_norm,
        "BatchNorm3d": _batch_norm,
        "Embedding": _embedding,
        "AdaptiveAvgPool1d": _fields("output_size"),
        "AdaptiveAvgPool2d": _fields("output_size"),
        "AdaptiveAvgPool3d": _fields("output_size"),
        "AdaptiveMaxPool1d": _fields("output_size"),
        "AdaptiveMaxPool2d": _fields("output_size"),
        "AdaptiveMaxPool3d": _fields("output_size"),
        "Dropout": _fields("p", "inplace"),
        "Dropout1d": _fields("p", "inplace"),
        "Dropout2d": _fields("p", "inplace"),
        "Dropout3d": _fields("p", "inplace"),
        "AlphaDropout": _fields("p", "inplace"),
        "GELU": _fields("approximate"),
        "LeakyReLU": _inplace_flag(_fields("negative_slope")),
        "ELU": _inplace_flag(_fields("alpha")),
        "CELU": _inplace_flag(_fields("alpha")),
        "Hardtanh": _inplace_flag(_fields("min_val", "max_val")),
        "Upsample": _upsample,
        "ReLU": _inplace_flag(None),
        "ReLU6": _inplace_flag(None),
        "SiLU": _inplace_flag(None),
        "SELU": _inplace_flag(None),
        "Mish": _inplace_flag(None),
        "Hardswish": lambda self: "",
        "Hardsigmoid": lambda self: "",
        "Softmax": _fields("dim"),
        "LogSoftmax": _fields("dim"),
        "Softmin": _fields("dim"),
        "Flatten": _fields("start_dim", "end_dim"),
        "Unflatten": _fields("dim", "unflattened_size"),
        "GroupNorm": lambda self: (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
            f"affine={getattr(self, 'weight', None) is not None}, "
            f"bias={getattr(self, 'bias', None) is not None}"
        ),
        "PReLU": _fields("num_parameters"),
        "PixelShuffle": _fields("upscale_factor"),
        "Hardshrink": lambda self: f"{self.lambd}",
        "Softshrink": lambda self: f"{self.lambd}",
        "CosineSimilarity": lambda self: "",
        "PairwiseDistance": lambda self: "",
    }
    for name, fn in table.items():
        cls = getattr(nn, name, None)
        if isinstance(cls, type) and issubclass(cls, _m.Module):
            own = cls.__dict__.get("extra_repr")
            if own is None or getattr(own, "_generic", False):
                cls.extra_repr = fn  # type: ignore[attr-defined]
