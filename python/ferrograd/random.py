"""The seeded random number generator behind ``fg.rand``, ``fg.randn``, dropout and
``nn.init``: one stream per device, all reseeded by :func:`manual_seed`, reproducible for a
given seed (the same seed gives the same numbers on every run and machine).

``rand``, ``randn``, ``rand_like``, ``randn_like``, ``bernoulli`` and dropout (without a
``generator=``) draw from a counter-based generator per device (the engine's ``random`` op,
keyed by a counter tensor that each draw advances), eagerly and inside ``fg.trace`` alike: a
traced step draws, on each run, the numbers the same step draws eagerly from the same state
(so traced and eager training with dropout agree after the same :func:`manual_seed`). Other
draws (``randint``, ``randperm``, ``multinomial``, initialisers) use a numpy PCG64 stream per
device, and raise ``TraceError`` inside a trace."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = [
    "Generator",
    "beta",
    "default_generator",
    "fork_rng",
    "gamma",
    "get_rng_state",
    "initial_seed",
    "manual_seed",
    "normal",
    "permutation",
    "poisson",
    "seed",
    "set_rng_state",
    "shuffle",
    "uniform",
]

_seed = 0
_streams: dict[str, np.random.Generator] = {}
# the traced generator's counter of each device (int64 scalars made outside any trace, which
# traced steps capture by reference and advance in place)
_counters: dict = {}
# seeds given to one kind of device only (fg.cuda.manual_seed): kind -> seed
_device_seeds: dict[str, int] = {}


class _ThreadStreams:
    """The random state of one thread that draws apart from the global streams (a
    ``DataLoader`` worker thread, as PyTorch's worker processes each have their own
    generator): a seed, a numpy stream per device and the counter value of each device's
    counter-based generator, all made from the seed on first use. While a thread has one,
    its draws (``rand``, ``randn``, dropout, ``randint``, ...), :func:`manual_seed`,
    :func:`initial_seed`, :func:`get_rng_state` and :func:`set_rng_state` use it, so the
    thread neither reads nor advances the global streams and its numbers do not depend on
    what other threads draw."""

    def __init__(self, seed: int) -> None:
        self.seed = int(seed) % 2**64
        self.streams: dict[str, np.random.Generator] = {}
        self.counters: dict[str, int] = {}

    def stream(self, name: str) -> np.random.Generator:
        g = self.streams.get(name)
        if g is None:
            seq = np.random.SeedSequence([self.seed, *name.encode()])
            g = self.streams[name] = np.random.Generator(np.random.PCG64(seq))
        return g

    def take_counter(self, name: str) -> int:
        value = self.counters.get(name)
        if value is None:
            value = _counter_start(name, self.seed)
        self.counters[name] = value + 1
        return value


_thread = threading.local()


def _thread_streams() -> _ThreadStreams | None:
    """The calling thread's own random state, None where it draws from the global streams."""
    return getattr(_thread, "streams", None)


def _set_thread_streams(streams: _ThreadStreams | None) -> None:
    """Gives the calling thread its own random state (None: the global streams again)."""
    _thread.streams = streams


def _seed_for(name: str) -> int:
    kind = name.partition(":")[0]
    return _device_seeds.get(kind, _seed)


def _counter_start(name: str, seed: int | None = None) -> int:
    """The counter's value after :func:`manual_seed` (52 bits: exact through float)."""
    seed = _seed_for(name) if seed is None else seed
    ss = np.random.SeedSequence([seed, *name.encode(), 0x7472616365])
    return int(ss.generate_state(1, np.uint64)[0] >> np.uint64(12))


def _ensure_counter(name: str) -> None:
    from . import _core
    from ._tensor import tensor

    if name not in _counters and not _core._tracing():
        _counters[name] = tensor(np.array(_counter_start(name), dtype=np.int64), device=name)


def _stream_key(device: object) -> str:
    """The name of a device's streams: ``"cuda"`` is ``"cuda:0"`` (one generator, as
    PyTorch's)."""
    name = str(device)
    return "cuda:0" if name == "cuda" else name


# each device's counter value as the last eager draw left it, with the counter's version then
# (any other write, a traced step's or manual_seed's, changes the version: read it again)
_mirror: dict[str, tuple[int, int]] = {}


def _counter_value(name: str, counter: Any) -> int:
    m = _mirror.get(name)
    if m is not None and m[1] == counter._version:
        return m[0]
    return int(counter.item())


def _scalar_counter(value: int, like: Any) -> Any:
    from ._tensor import tensor

    return tensor(np.array(value, dtype=np.int64), device=like.device)


def _traced_draw(shape: tuple, device: object, dtype: str, normal: bool) -> object:
    """Uniform or normal numbers in ``dtype`` (a float dtype) from the device's counter-based
    generator, eagerly or inside ``fg.trace`` (see the module's text): each draw reads the
    counter and advances it by one, so a traced step replays the eager sequence."""
    from . import _core

    name = _stream_key(device if device is not None else _core.get_default_device())
    own = _thread_streams()
    if own is not None and not _core._tracing():
        wide = dtype if dtype in ("float32", "float64") else "float32"
        from ._tensor import tensor

        key = tensor(np.array(own.take_counter(name), dtype=np.int64), device=name)
        out = _core._random(key, list(shape), wide, 0, normal)
        return out if wide == dtype else out.astype(dtype)
    counter = _counters.get(name)
    if counter is None:
        if _core._tracing():
            raise _core.TraceError(
                f"random numbers on {name} cannot be drawn inside fg.trace: draw one on that "
                "device outside the trace first (its generator is made there)"
            )
        _ensure_counter(name)
        counter = _counters[name]
    wide = dtype if dtype in ("float32", "float64") else "float32"
    if _core._tracing():
        out = _core._random(counter, list(shape), wide, 0, normal)
        counter += 1  # in place: the graph advances it on every run
    else:
        # eagerly by value, so the draw is not an op that reads the counter (a checkpointed
        # segment rewinds the counter to redraw its numbers; it must not see it as an input
        # changed under it)
        value = _counter_value(name, counter)
        out = _core._random(_scalar_counter(value, counter), list(shape), wide, 0, normal)
        counter.copy_(np.array(value + 1, dtype=np.int64))
        _mirror[name] = (value + 1, counter._version)
    return out if wide == dtype else out.astype(dtype)


def manual_seed(seed: int) -> Generator:
    """Reseeds every device's stream (as ``torch.manual_seed``); returns
    :data:`default_generator`."""
    global _seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"manual_seed: seed must be an int, got {seed!r}")
    if _thread_streams() is not None:
        _set_thread_streams(_ThreadStreams(int(seed)))  # this thread's own streams only
        return default_generator
    _seed = int(seed) % 2**64
    _device_seeds.clear()
    _streams.clear()
    for name, c in _counters.items():
        # in place: traced steps hold these tensors
        c.copy_(np.array(_counter_start(name), dtype=np.int64))
    return default_generator


def _seed_devices(kind: str, seed: int) -> None:
    """Reseeds the streams of every device of ``kind`` ("cuda") only."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"manual_seed: seed must be an int, got {seed!r}")
    _device_seeds[kind] = int(seed) % 2**64
    for name in list(_streams):
        if name.partition(":")[0] == kind:
            del _streams[name]
    for name, c in _counters.items():
        if name.partition(":")[0] == kind:
            c.copy_(np.array(_counter_start(name), dtype=np.int64))


def initial_seed() -> int:
    """The seed last given to :func:`manual_seed` (0 before any call); in a thread with its
    own streams (a DataLoader worker), that thread's seed."""
    own = _thread_streams()
    return own.seed if own is not None else _seed


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
    name = _stream_key(device if device is not None else _core.get_default_device())
    own = _thread_streams()
    if own is not None:
        return own.stream(name)
    _ensure_counter(name)
    g = _streams.get(name)
    if g is None:
        seq = np.random.SeedSequence([_seed_for(name), *name.encode()])
        g = np.random.Generator(np.random.PCG64(seq))
        _streams[name] = g
    return g


def get_rng_state() -> dict:
    """The state of every device's stream and the seed, as plain data (ints as strings, so
    it fits a checkpoint's JSON): give it to :func:`set_rng_state` to continue the same
    draws, for instance when resuming training."""
    own = _thread_streams()
    if own is not None:
        return {
            "seed": str(own.seed),
            "streams": {name: _stream_state(g) for name, g in own.streams.items()},
            "counters": {name: str(v) for name, v in own.counters.items()},
            "device_seeds": {},
        }
    out: dict = {"seed": str(_seed), "streams": {}}
    for name, g in _streams.items():
        out["streams"][name] = _stream_state(g)
    out["counters"] = {name: str(int(c.item())) for name, c in _counters.items()}
    out["device_seeds"] = {k: str(v) for k, v in _device_seeds.items()}
    return out


def set_rng_state(state: dict) -> None:
    """Restores what :func:`get_rng_state` returned."""
    global _seed
    try:
        seed = int(state["seed"])
        streams = {}
        for name, s in state["streams"].items():
            streams[name] = _stream_from(s)
        counters = {name: int(v) for name, v in state.get("counters", {}).items()}
        device_seeds = {k: int(v) for k, v in state.get("device_seeds", {}).items()}
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"set_rng_state: not a state from get_rng_state ({e})") from None
    if _thread_streams() is not None:
        own = _ThreadStreams(seed)
        own.streams.update(streams)
        own.counters.update(counters)
        _set_thread_streams(own)
        return
    _seed = seed
    _streams.clear()
    _streams.update(streams)
    _device_seeds.clear()
    _device_seeds.update(device_seeds)
    for name, v in counters.items():
        _ensure_counter(name)
        _counters[name].copy_(np.array(v, dtype=np.int64))


def _stream_state(g: np.random.Generator) -> dict:
    st = g.bit_generator.state
    return {
        "state": str(st["state"]["state"]),
        "inc": str(st["state"]["inc"]),
        "has_uint32": int(st["has_uint32"]),
        "uinteger": int(st["uinteger"]),
    }


def _stream_from(s: dict) -> np.random.Generator:
    bg = np.random.PCG64()
    bg.state = {
        "bit_generator": "PCG64",
        "state": {"state": int(s["state"]), "inc": int(s["inc"])},
        "has_uint32": int(s["has_uint32"]),
        "uinteger": int(s["uinteger"]),
    }
    return np.random.Generator(bg)


def _device_state(name: str) -> dict:
    """The state of one device's stream and traced counter (None: not made yet, so it
    starts from the seed when first used), as plain data (``fg.cuda.get_rng_state``)."""
    g = _streams.get(name)
    c = _counters.get(name)
    return {
        "stream": None if g is None else _stream_state(g),
        "counter": None if c is None else str(int(c.item())),
    }


def _set_device_state(name: str, state: dict) -> None:
    """Restores what :func:`_device_state` returned to the device ``name``."""
    try:
        stream = state["stream"]
        g = None if stream is None else _stream_from(stream)
        counter = state["counter"]
        counter = None if counter is None else int(counter)
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"set_rng_state: not a state from get_rng_state ({e})") from None
    if g is None:
        _streams.pop(name, None)
    else:
        _streams[name] = g
    if counter is not None:
        _ensure_counter(name)
        _counters[name].copy_(np.array(counter, dtype=np.int64))


@contextlib.contextmanager
def fork_rng(
    devices: Any = None,
    enabled: bool = True,
    _caller: str = "fork_rng",
    _devices_kw: str = "devices",
    device_type: str | None = None,
) -> Iterator[None]:
    """PyTorch's ``torch.random.fork_rng``: on exit the random streams are back where they
    were on entry, whatever was drawn or seeded inside. The CPU's stream (and the seed) is
    always restored; the streams of ``devices`` (indices of ``device_type``, ``"cuda"`` by
    default) too, every device's when ``devices`` is None. ``enabled=False`` restores
    nothing."""
    if not enabled or device_type == "meta":
        yield
        return
    if _thread_streams() is not None:  # a thread with its own streams forks those
        state = get_rng_state()
        try:
            yield
        finally:
            set_rng_state(state)
        return
    kind = str(device_type or "cuda").partition(":")[0]
    if devices is None:
        chosen = None
    else:
        from .cuda import _ordinal

        chosen = set()
        for d in devices:
            if not isinstance(d, (int, str, np.integer)):
                index = getattr(d, "index", None)
                d = str(d) if index is None else int(index)
            chosen.add(int(d) if isinstance(d, np.integer) else _ordinal(d))

    def forked(name: str) -> bool:
        dev, _, index = name.partition(":")
        if dev == "cpu" or chosen is None:
            return True
        return dev == kind and int(index or 0) in chosen

    seed, device_seeds = _seed, dict(_device_seeds)
    streams = {n: g.bit_generator.state for n, g in _streams.items() if forked(n)}
    counters = {n: int(c.item()) for n, c in _counters.items() if forked(n)}
    try:
        yield
    finally:
        _restore_forked(seed, device_seeds if chosen is None else None, streams, counters, forked)


def _restore_forked(
    seed: int, device_seeds: dict | None, streams: dict, counters: dict, forked: Any
) -> None:
    global _seed
    _seed = seed
    if device_seeds is not None:
        _device_seeds.clear()
        _device_seeds.update(device_seeds)
    for name in [n for n in _streams if forked(n) and n not in streams]:
        del _streams[name]  # made inside: it starts afresh from the seed
    for name, st in streams.items():
        g = _streams.get(name)
        if g is None:
            g = _streams[name] = np.random.Generator(np.random.PCG64())
        g.bit_generator.state = st
    for name, value in counters.items():
        _counters[name].copy_(np.array(value, dtype=np.int64))


class Generator:
    """An independent random stream (``torch.Generator``): give it as ``generator=`` to
    ``rand``, ``randn``, ``randint``, ``randperm``, ``normal``, ``bernoulli``,
    ``multinomial``, the in-place fills (``uniform_``, ``normal_``, ...), ``nn.init`` and
    ``utils.data`` (``random_split``, samplers, ``DataLoader``) so those draws neither use
    nor advance the global stream of :func:`manual_seed`.

    ``Generator(device="cpu")``; ``g.manual_seed(n)`` (returns ``g``), ``g.seed()``,
    ``g.initial_seed()``, ``g.get_state()`` / ``g.set_state(state)`` (a uint8 tensor).
    Draws inside ``fg.trace`` raise ``TraceError`` (they would be frozen into the graph)."""

    _DEFAULT_SEED = 67280421310721  # torch.Generator's initial seed

    def __init__(self, device: object = "cpu") -> None:
        self._device = str(device if device is not None else "cpu")
        self._seed = self._DEFAULT_SEED
        self._reset()

    def _reset(self) -> None:
        seq = np.random.SeedSequence([self._seed, *b"fg.Generator"])
        self._np = np.random.Generator(np.random.PCG64(seq))

    @property
    def device(self) -> object:
        from ._torch_compat import device as _device_type

        return _device_type(self._device)

    def manual_seed(self, seed: int) -> Generator:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"Generator.manual_seed: seed must be an int, got {seed!r}")
        self._seed = int(seed) % 2**64
        self._reset()
        return self

    def seed(self) -> int:
        """Reseeds from the operating system's entropy; returns the new seed."""
        s = int(np.random.SeedSequence().entropy) % 2**63
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> object:
        import json

        from ._tensor import tensor

        st = self._np.bit_generator.state
        blob = json.dumps(
            {
                "seed": str(self._seed),
                "state": str(st["state"]["state"]),
                "inc": str(st["state"]["inc"]),
                "has_uint32": int(st["has_uint32"]),
                "uinteger": int(st["uinteger"]),
            }
        ).encode()
        return tensor(np.frombuffer(blob, dtype=np.uint8).copy(), dtype="uint8")

    def set_state(self, new_state: object) -> Generator:
        import json

        try:
            arr = np.asarray(new_state.numpy() if hasattr(new_state, "numpy") else new_state)
            d = json.loads(arr.astype(np.uint8).tobytes().decode())
            bg = np.random.PCG64()
            bg.state = {
                "bit_generator": "PCG64",
                "state": {"state": int(d["state"]), "inc": int(d["inc"])},
                "has_uint32": int(d["has_uint32"]),
                "uinteger": int(d["uinteger"]),
            }
            seed = int(d["seed"])
        except (KeyError, TypeError, ValueError, UnicodeDecodeError, AttributeError) as e:
            raise ValueError(
                f"Generator.set_state: not a state from Generator.get_state ({e})"
            ) from None
        self._seed = seed
        self._np = np.random.Generator(bg)
        return self

    def _stream(self) -> np.random.Generator:
        from . import _core

        if _core._tracing():
            raise _core.TraceError(
                "a draw from an fg.Generator cannot run inside fg.trace: it would become a "
                "constant of the graph; draw it outside the traced step"
            )
        return self._np

    def __repr__(self) -> str:
        return f"<ferrograd.Generator device={self.device} seed={self._seed}>"


class _DefaultGenerator(Generator):
    """``fg.default_generator``: the global stream of :func:`manual_seed`, as a Generator."""

    def __init__(self) -> None:
        self._device = "cpu"

    def manual_seed(self, seed: int) -> Generator:
        manual_seed(seed)
        return self

    def initial_seed(self) -> int:
        return initial_seed()

    def get_state(self) -> object:
        import json

        from ._tensor import tensor

        blob = json.dumps(get_rng_state()).encode()
        return tensor(np.frombuffer(blob, dtype=np.uint8).copy(), dtype="uint8")

    def set_state(self, new_state: object) -> Generator:
        import json

        arr = np.asarray(new_state.numpy() if hasattr(new_state, "numpy") else new_state)
        try:
            state = json.loads(arr.astype(np.uint8).tobytes().decode())
        except (ValueError, UnicodeDecodeError) as e:
            raise ValueError(f"Generator.set_state: not a state from get_state ({e})") from None
        set_rng_state(state)
        return self

    def _stream(self) -> np.random.Generator:
        return _numpy_rng("cpu")

    def __repr__(self) -> str:
        return "<ferrograd.default_generator (the stream of fg.manual_seed)>"


default_generator = _DefaultGenerator()


def _global_stream(generator: object) -> bool:
    """Whether a draw given ``generator=`` uses the global streams (None or
    :data:`default_generator`)."""
    return generator is None or generator is default_generator


def _rng_for(op: str, generator: object, device: object = None) -> np.random.Generator:
    """The stream a draw of ``op`` uses: ``generator``'s (an :class:`Generator` or a numpy
    Generator) or, when it is None, the device's global stream."""
    if generator is None:
        return _numpy_rng(device)
    if isinstance(generator, Generator):
        return generator._stream()
    if isinstance(generator, np.random.Generator):
        return generator
    raise TypeError(
        f"{op}: generator must be an fg.Generator (or a numpy Generator), got "
        f"{type(generator).__name__}"
    )


def _capture_streams() -> dict:
    """The exact position of every device's streams and counters (cheap: no serialization),
    for :func:`_restore_streams` (checkpointed segments redraw the same numbers when rerun)."""
    if _thread_streams() is not None:
        return {_OWN: get_rng_state()}
    out: dict = {name: g.bit_generator.state for name, g in _streams.items()}
    out[_COUNTERS] = {name: c.clone() for name, c in _counters.items()}
    return out


_COUNTERS = "counters of the counter-based generators"
_OWN = "the state of a thread with its own streams"


def _restore_streams(captured: dict) -> None:
    if _OWN in captured:
        set_rng_state(captured[_OWN])
        return
    captured = dict(captured)
    for name, value in captured.pop(_COUNTERS, {}).items():
        c = _counters.get(name)
        if c is not None:
            c.copy_(value)
    for name in list(_streams):
        if name not in captured:
            del _streams[name]  # made after the capture: it starts afresh from the seed
    for name, st in captured.items():
        g = _streams.get(name)
        if g is None:
            g = np.random.Generator(np.random.PCG64())
            _streams[name] = g
        g.bit_generator.state = st


# ----------------------------------------------------------------- MegEngine's spellings
# (``megengine.random``: functions of a size, the same seeded streams)


def seed(seed: int | None = None) -> int:
    """MegEngine's ``random.seed(seed)``: :func:`manual_seed`; without a seed, PyTorch's
    ``torch.random.seed()``: a fresh nondeterministic seed, set and returned."""
    if seed is None:
        seed = int(np.random.SeedSequence().entropy % (2**63))
    manual_seed(int(seed))
    return int(seed)


def _size(size: object) -> tuple:
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)):
        return (int(size),)
    return tuple(int(s) for s in size)  # type: ignore[union-attr]


def normal(mean: float = 0.0, std: float = 1.0, size: object = None) -> object:
    """MegEngine's ``random.normal``: float32 draws of ``N(mean, std^2)`` of shape ``size``."""
    import ferrograd as fg

    return fg.randn(*_size(size)) * float(std) + float(mean)


def uniform(low: float = 0.0, high: float = 1.0, size: object = None) -> object:
    """MegEngine's ``random.uniform``: float32 draws from ``[low, high)`` of shape ``size``."""
    import ferrograd as fg

    return fg.rand(*_size(size)) * (float(high) - float(low)) + float(low)


def _host_draw(name: str, size: object, draw: object) -> object:
    import ferrograd as fg

    arr = draw(_numpy_rng(), _size(size))  # type: ignore[operator]
    return fg.tensor(np.asarray(arr, dtype=np.float32))


def gamma(shape: object, scale: object = 1, size: object = None) -> object:
    """MegEngine's ``random.gamma`` (float32)."""
    s, c = np.asarray(_value(shape)), np.asarray(_value(scale))
    full = _size(size) + np.broadcast_shapes(s.shape, c.shape)
    return _host_draw("gamma", None, lambda r, _: r.gamma(s, c, size=full))


def beta(alpha: object, beta: object, size: object = None) -> object:
    """MegEngine's ``random.beta`` (float32)."""
    a, b = np.asarray(_value(alpha)), np.asarray(_value(beta))
    full = _size(size) + np.broadcast_shapes(a.shape, b.shape)
    return _host_draw("beta", None, lambda r, _: r.beta(a, b, size=full))


def poisson(lam: object, size: object = None) -> object:
    """MegEngine's ``random.poisson`` (float32 counts)."""
    lm = np.asarray(_value(lam))
    full = _size(size) + lm.shape
    return _host_draw("poisson", None, lambda r, _: r.poisson(lm, size=full))


def permutation(n: object, *, dtype: str = "int32") -> object:
    """MegEngine's ``random.permutation``: a permutation of ``range(n)`` (of ``dtype``), or
    of the rows of a tensor ``n``."""
    import ferrograd as fg

    if isinstance(n, fg.Tensor):
        return n[fg.randperm(n.shape[0])]
    return fg.randperm(int(n)).astype(dtype)  # type: ignore[call-overload]


def shuffle(inp: object) -> None:
    """MegEngine's ``random.shuffle``: permutes the rows of ``inp`` in place."""
    import ferrograd as fg

    inp.copy_(inp[fg.randperm(inp.shape[0])])  # type: ignore[union-attr]


def _value(x: object) -> object:
    import ferrograd as fg

    return x.numpy() if isinstance(x, fg.Tensor) else x
