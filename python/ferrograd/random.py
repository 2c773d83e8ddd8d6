"""The seeded random number generator behind ``fg.rand``, ``fg.randn``, dropout and
``nn.init``: one stream per device, all reseeded by :func:`manual_seed`, reproducible for a
given seed (the same seed gives the same numbers on every run and machine)."""

from __future__ import annotations

import numpy as np

__all__ = ["get_rng_state", "initial_seed", "manual_seed", "set_rng_state"]

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

    if _core._tracing():
        # a draw made while tracing would be frozen into the graph and replayed unchanged
        raise _core.TraceError(
            "random numbers (rand, randn, dropout, ...) cannot be drawn inside fg.trace yet: "
            "the draw would become a constant of the graph and repeat on every call; run this "
            "step without fg.trace, or with dropout off (p=0 or eval mode)"
        )
    name = str(device) if device is not None else str(_core.get_default_device())
    g = _streams.get(name)
    if g is None:
        g = np.random.Generator(np.random.PCG64(np.random.SeedSequence([_seed, *name.encode()])))
        _streams[name] = g
    return g


def get_rng_state() -> dict:
    """The state of every device's stream and the seed, as plain data (ints as strings, so
    it fits a checkpoint's JSON): give it to :func:`set_rng_state` to continue the same
    draws, for instance when resuming training."""
    out: dict = {"seed": str(_seed), "streams": {}}
    for name, g in _streams.items():
        st = g.bit_generator.state
        out["streams"][name] = {
            "state": str(st["state"]["state"]),
            "inc": str(st["state"]["inc"]),
            "has_uint32": int(st["has_uint32"]),
            "uinteger": int(st["uinteger"]),
        }
    return out


def set_rng_state(state: dict) -> None:
    """Restores what :func:`get_rng_state` returned."""
    global _seed
    try:
        _seed = int(state["seed"])
        streams = {}
        for name, s in state["streams"].items():
            bg = np.random.PCG64()
            bg.state = {
                "bit_generator": "PCG64",
                "state": {"state": int(s["state"]), "inc": int(s["inc"])},
                "has_uint32": int(s["has_uint32"]),
                "uinteger": int(s["uinteger"]),
            }
            streams[name] = np.random.Generator(bg)
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"set_rng_state: not a state from get_rng_state ({e})") from None
    _streams.clear()
    _streams.update(streams)
