"""PyTorch's ``torch.nn.utils.fusion``: folding an eval-mode batch norm into the preceding
convolution or linear layer (the functions live in :mod:`._norms`)."""

from ._norms import (
    fuse_conv_bn_eval,
    fuse_conv_bn_weights,
    fuse_linear_bn_eval,
    fuse_linear_bn_weights,
)

__all__ = [
    "fuse_conv_bn_eval",
    "fuse_conv_bn_weights",
    "fuse_linear_bn_eval",
    "fuse_linear_bn_weights",
]
