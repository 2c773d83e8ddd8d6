"""The seeded random number generator behind ``fg.rand``, ``fg.randn``, dropout and
``nn.init``: one stream per device, all reseeded by :func:`manual_seed`, reproducible for a
given seed (the same seed gives the same numbers on every run and machine)."""

from __future__ import annotations

import numpy as np

__all__ = ["initial_seed", "manual_seed"]

_seed = 0
_streams: dict[str, np.random.Generator] = {}


def manual_seed(seed: int) -> None:
    """Reseeds every device's stream (as ``torch.manual_seed``)."""
    global _seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"manual_seed: seed must be an int, got {seed!r}")
    _seed = int(seed) % 2**64
    _streams.clear()


def initial_seed() -> int:
    """The seed last given to :func:`manual_seed` (0 before any call)."""
    return _seed


def _numpy_rng(device: object = None) -> np.random.Generator:
    """The stream of ``device`` (``None``: the default device): a numpy PCG64 generator
    seeded from the global seed and the device's name, so streams differ between devices and
    each is reproducible."""
    from . import _core

    name = str(device) if device is not None else str(_core.get_default_device())
    g = _streams.get(name)
    if g is None:
        g = np.random.Generator(np.random.PCG64(np.random.SeedSequence([_seed, *name.encode()])))
        _streams[name] = g
    return g
