"""PyTorch's submodule paths of ``torch.nn.modules`` (``nn.modules.linear.Linear``,
``from torch.nn.modules.rnn import LSTM``): each is a module object listing the ``nn``
classes of that file, registered so ``import ferrograd.nn.modules.linear`` works too; and
``nn.modules.utils`` (``_pair``, ...: see :mod:`._modules_utils`); also PyTorch's private base
classes (``batchnorm._BatchNorm``, ``conv._ConvNd``, ``loss._Loss``, ...)."""

from __future__ import annotations

import sys
import types

_FILES = {
    "activation": "ReLU ReLU6 LeakyReLU PReLU RReLU ELU SELU CELU GELU SiLU Mish Sigmoid Tanh "
    "Hardtanh Hardsigmoid Hardswish Hardshrink Softshrink Tanhshrink Softplus Softsign "
    "Softmax Softmin LogSoftmax Softmax2d LogSigmoid Threshold GLU MultiheadAttention",
    "batchnorm": "BatchNorm1d BatchNorm2d BatchNorm3d SyncBatchNorm LazyBatchNorm1d "
    "LazyBatchNorm2d LazyBatchNorm3d",
    "container": "Sequential ModuleList ModuleDict ParameterList ParameterDict",
    "conv": "Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d LazyConv1d "
    "LazyConv2d LazyConv3d LazyConvTranspose1d LazyConvTranspose2d LazyConvTranspose3d",
    "dropout": "Dropout Dropout1d Dropout2d Dropout3d AlphaDropout FeatureAlphaDropout",
    "flatten": "Flatten Unflatten",
    "fold": "Fold Unfold",
    "instancenorm": "InstanceNorm1d InstanceNorm2d InstanceNorm3d LazyInstanceNorm1d "
    "LazyInstanceNorm2d LazyInstanceNorm3d",
    "linear": "Linear Bilinear Identity LazyLinear",
    "loss": "L1Loss MSELoss CrossEntropyLoss CTCLoss NLLLoss PoissonNLLLoss GaussianNLLLoss "
    "KLDivLoss BCELoss BCEWithLogitsLoss MarginRankingLoss HingeEmbeddingLoss "
    "MultiLabelMarginLoss HuberLoss SmoothL1Loss SoftMarginLoss MultiLabelSoftMarginLoss "
    "CosineEmbeddingLoss MultiMarginLoss TripletMarginLoss TripletMarginWithDistanceLoss",
    "normalization": "LayerNorm GroupNorm LocalResponseNorm CrossMapLRN2d RMSNorm",
    "padding": "ZeroPad1d ZeroPad2d ZeroPad3d ConstantPad1d ConstantPad2d ConstantPad3d "
    "ReflectionPad1d ReflectionPad2d ReflectionPad3d ReplicationPad1d ReplicationPad2d "
    "ReplicationPad3d CircularPad1d CircularPad2d CircularPad3d",
    "pixelshuffle": "PixelShuffle PixelUnshuffle",
    "pooling": "MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d "
    "AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d "
    "AdaptiveMaxPool3d LPPool1d LPPool2d MaxUnpool1d MaxUnpool2d",
    "rnn": "RNNBase RNNCellBase RNN LSTM GRU RNNCell LSTMCell GRUCell",
    "sparse": "Embedding EmbeddingBag",
    "transformer": "Transformer TransformerEncoder TransformerDecoder "
    "TransformerEncoderLayer TransformerDecoderLayer",
    "upsampling": "Upsample UpsamplingNearest2d UpsamplingBilinear2d",
    "distance": "PairwiseDistance CosineSimilarity",
    "channelshuffle": "ChannelShuffle",
    "adaptive": "AdaptiveLogSoftmaxWithLoss",
    "lazy": "",
}

# PyTorch's private base classes under their files' names, so that ``isinstance(m,
# nn.modules.batchnorm._BatchNorm)`` works (``_NormBase``: ferrograd's instance norms
# derive from ``_BatchNorm``, which thus stands for PyTorch's common base of both)
_PRIVATE = {
    "batchnorm": {"_BatchNorm": "modules._BatchNorm", "_NormBase": "modules._BatchNorm"},
    "conv": {"_ConvNd": "modules._ConvNd"},
    "loss": {"_Loss": "modules._Loss", "_WeightedLoss": "modules._WeightedLoss"},
    "instancenorm": {"_InstanceNorm": "extra._InstanceNorm"},
    "lazy": {"LazyModuleMixin": "more.LazyModuleMixin"},
    "linear": {"NonDynamicallyQuantizableLinear": "attention.NonDynamicallyQuantizableLinear"},
}


def install() -> None:
    from .. import nn
    from . import modules

    for file, names in _FILES.items():
        name = f"{modules.__name__}.{file}"
        m = sys.modules.get(name) or types.ModuleType(name)
        for cls in names.split():
            if hasattr(nn, cls):
                setattr(m, cls, getattr(nn, cls))
        m.Module = nn.Module  # type: ignore[attr-defined]
        for private, where in _PRIVATE.get(file, {}).items():
            source, _, cls_name = where.partition(".")
            setattr(m, private, getattr(getattr(nn, source), cls_name))
        setattr(modules, file, m)
        sys.modules[name] = m
    # torch.nn.modules.utils: _single, _pair, _triple, _quadruple, _ntuple, ...
    from . import _modules_utils

    modules.utils = _modules_utils  # type: ignore[attr-defined]
    sys.modules[f"{modules.__name__}.utils"] = _modules_utils
