"""MegEngine's ``megengine.module`` spelling of :mod:`ferrograd.nn` (``Module``,
``Linear``, ``Conv2d``, ...), with MegEngine 1.x's classes where they differ from
PyTorch's: ``BatchNorm1d``/``BatchNorm2d``/``SyncBatchNorm`` (momentum 0.9 weighing the old
running value, ``freeze``, ``(1, C, 1, 1)`` parameters), ``AvgPool2d`` (``mode``, padding
not counted by default), ``Dropout(drop_prob)``, ``Softmax(axis)``, ``Conv1d``/``Conv2d``/``Conv3d``/
``ConvTranspose2d``/``ConvTranspose3d``/``Linear`` (``conv_mode``, ``compute_mode``;
``dilation`` before ``groups`` in the transposed ones), ``LayerNorm``/
``GroupNorm`` (``affine``), ``InstanceNorm``, ``PReLU``, ``Elemwise``; ``module.init`` has
MegEngine's initialisers (``fill_``, ``calculate_fan_in_and_fan_out``, ``msra_uniform_``,
...)."""

from __future__ import annotations

from ._megengine import module as _mge
from .nn import *
from .nn import __all__ as _nn_all

# MegEngine's classes, replacing nn's of the same name
AvgPool2d = _mge.AvgPool2d
BatchNorm1d = _mge.BatchNorm1d
BatchNorm2d = _mge.BatchNorm2d
Conv1d = _mge.Conv1d
Conv2d = _mge.Conv2d
Conv3d = _mge.Conv3d
ConvTranspose2d = _mge.ConvTranspose2d
ConvTranspose3d = _mge.ConvTranspose3d
Dropout = _mge.Dropout
Elemwise = _mge.Elemwise
GroupNorm = _mge.GroupNorm
InstanceNorm = _mge.InstanceNorm
LayerNorm = _mge.LayerNorm
Linear = _mge.Linear
LocalConv2d = _mge.LocalConv2d
PReLU = _mge.PReLU
Softmax = _mge.Softmax
SyncBatchNorm = _mge.SyncBatchNorm

init = _mge.make_init(f"{__name__}.init")

__all__ = ["Elemwise", "InstanceNorm", "LocalConv2d"]
__all__ += [name for name in _nn_all if name not in __all__]
