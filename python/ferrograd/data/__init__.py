"""MegEngine 1.x's ``megengine.data``: map-style and stream datasets, samplers that yield
batches of indices, a collator that stacks samples into numpy arrays, vision transforms
that work on HWC numpy images, and a DataLoader that ties them together.

This is the MegEngine spelling; ``ferrograd.utils.data`` is the PyTorch one. The two do not
mix: a MegEngine sampler yields whole batches of indices and the loader yields numpy batches,
not Tensors (convert with ``ferrograd.tensor`` where a Tensor is wanted)."""

from . import collator, dataloader, dataset, sampler, transform
from .collator import Collator
from .dataloader import DataLoader, get_worker_info
from .sampler import (
    Infinite,
    MapSampler,
    RandomSampler,
    ReplacementSampler,
    Sampler,
    SequentialSampler,
    StreamSampler,
)

__all__ = [
    "Collator",
    "DataLoader",
    "Infinite",
    "MapSampler",
    "RandomSampler",
    "ReplacementSampler",
    "Sampler",
    "SequentialSampler",
    "StreamSampler",
    "collator",
    "dataloader",
    "dataset",
    "get_worker_info",
    "sampler",
    "transform",
]
