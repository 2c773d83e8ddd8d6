"""The seeded random number generator behind ``fg.rand``, ``fg.randn``, dropout and
``nn.init``: one stream per device, all reseeded by :func:`manual_seed`, reproducible for a
given seed (the same seed gives the same numbers on every run and machine).

``rand``, ``randn``, ``rand_like``, ``randn_like``, ``bernoulli``, ``multinomial`` and
dropout (without a ``generator=``) draw from a counter-based generator per device (the
engine's ``random`` op, keyed by a counter tensor that each draw advances), eagerly and inside
``fg.trace`` alike: a traced step draws, on each run, the numbers the same step draws eagerly
from the same state (so traced and eager training with dropout agree after the same
:func:`manual_seed`). Other draws (``randint``, ``randperm``, initialisers) use a numpy PCG64
stream per device, and raise ``TraceError`` inside a trace.

MegEngine's ``megengine.random`` (:class:`RNG` and the functions ``uniform``, ``normal``,
``gamma``, ``beta``, ``poisson``, ``exponential``, ``multinomial``, ``permutation``,
``shuffle``, ``seed``) is spelled here too; all of it also works inside a trace."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = [
    "RNG",
    "Generator",
    "beta",
    "default_generator",
    "exponential",
    "fork_rng",
    "gamma",
    "get_rng_state",
    "initial_seed",
    "manual_seed",
    "multinomial",
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


def _categories(w: Any, num_samples: int, replacement: bool, draw: Any) -> Any:
    """Category indices drawn ``num_samples`` times from each row of the float64 weights
    ``w`` (2-D, rows of non-negative weights, not read on the host), with tensor ops only,
    so the draw also runs inside ``fg.trace``; ``draw(shape)`` gives uniform ``[0, 1)``
    float64 numbers. Returns int64 indices of shape ``(rows, num_samples)``."""
    import ferrograd as fg

    rows, k = w.shape
    if replacement:
        # inverse CDF: the index is how many cumulative weights lie at or below u * total
        cdf = fg.cumsum(w, dim=-1)
        total = cdf[:, k - 1 :]
        v = draw((rows, num_samples)) * total
        count = (cdf.reshape(rows, 1, k) <= v.reshape(rows, num_samples, 1)).sum(-1)
        # u * total can round up to total: stay on the last positive category
        last = (cdf < total).sum(-1, keepdim=True)
        return fg.minimum(count, last).astype("int64")
    # exponential races: the num_samples smallest of E / w (E ~ Exp(1)) are a draw without
    # replacement with probabilities proportional to w
    e = -fg.log1p(-draw((rows, k)))
    keys = fg.where(w > 0, e / w, fg.full_like(w, float("inf")))
    return fg.argsort(keys, dim=-1, stable=True)[:, :num_samples].astype("int64")


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
    nor advance the global stream of :func:`manual_seed`. Seeded with ``n``, it draws the
    same numbers as the global stream after ``fg.manual_seed(n)`` (as PyTorch's do).

    ``Generator(device="cpu")``; ``g.manual_seed(n)`` (returns ``g``), ``g.seed()``,
    ``g.initial_seed()``, ``g.get_state()`` / ``g.set_state(state)`` (a uint8 tensor).
    Draws inside ``fg.trace`` raise ``TraceError`` (they would be frozen into the graph)."""

    _DEFAULT_SEED = 67280421310721  # torch.Generator's initial seed

    def __init__(self, device: object = "cpu") -> None:
        self._device = str(device if device is not None else "cpu")
        self._seed = self._DEFAULT_SEED
        self._reset()

    def _reset(self) -> None:
        # the streams of a thread that draws apart from the global ones, made from the seed
        # exactly as the global streams are made from manual_seed's
        self._own = _ThreadStreams(self._seed)

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

        own = self._own
        blob = json.dumps(
            {
                "seed": str(self._seed),
                "counters": {k: str(v) for k, v in own.counters.items()},
                "streams": {k: _jsonable(g.bit_generator.state) for k, g in own.streams.items()},
            }
        ).encode()
        return tensor(np.frombuffer(blob, dtype=np.uint8).copy(), dtype="uint8")

    def set_state(self, new_state: object) -> Generator:
        import json

        try:
            arr = np.asarray(new_state.numpy() if hasattr(new_state, "numpy") else new_state)
            d = json.loads(arr.astype(np.uint8).tobytes().decode())
            own = _ThreadStreams(int(d["seed"]))
            own.counters = {k: int(v) for k, v in d["counters"].items()}
            for k, st in d["streams"].items():
                g = np.random.Generator(np.random.PCG64())
                g.bit_generator.state = _from_jsonable(st)
                own.streams[k] = g
        except (KeyError, TypeError, ValueError, UnicodeDecodeError, AttributeError) as e:
            raise ValueError(
                f"Generator.set_state: not a state from Generator.get_state ({e})"
            ) from None
        self._seed = own.seed
        self._own = own
        return self

    def _check_untraced(self) -> None:
        from . import _core

        if _core._tracing():
            raise _core.TraceError(
                "a draw from an fg.Generator cannot run inside fg.trace: it would become a "
                "constant of the graph; draw it outside the traced step"
            )

    def _stream(self, device: object = None) -> np.random.Generator:
        """The numpy stream for draws on ``device`` (the generator's own by default)."""
        self._check_untraced()
        return self._own.stream(_stream_key(device if device is not None else self._device))

    def _draw(self, shape: tuple, device: object, dtype: str, normal: bool) -> object:
        """Uniform or normal numbers from the counter-based generator, as the global stream
        draws them (one counter step per draw)."""
        from . import _core
        from ._tensor import tensor

        self._check_untraced()
        name = _stream_key(device if device is not None else self._device)
        wide = dtype if dtype in ("float32", "float64") else "float32"
        key = tensor(np.array(self._own.take_counter(name), dtype=np.int64), device=name)
        out = _core._random(key, list(shape), wide, 0, normal)
        return out if wide == dtype else out.astype(dtype)

    def __repr__(self) -> str:
        return f"<ferrograd.Generator device={self.device} seed={self._seed}>"


def _jsonable(state: dict) -> dict:
    """A numpy bit generator's state with its big integers as strings (JSON)."""
    return {
        k: _jsonable(v) if isinstance(v, dict) else (str(v) if isinstance(v, int) else v)
        for k, v in state.items()
    }


def _from_jsonable(state: dict) -> dict:
    return {
        k: _from_jsonable(v)
        if isinstance(v, dict)
        else (int(v) if isinstance(v, str) and v.isdigit() else v)
        for k, v in state.items()
    }


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

    def _stream(self, device: object = None) -> np.random.Generator:
        return _numpy_rng("cpu" if device is None else device)

    def _draw(self, shape: tuple, device: object, dtype: str, normal: bool) -> object:
        return _traced_draw(shape, device, dtype, normal)

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
        return generator._stream(device)
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


def _size(size: object) -> tuple:
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)):
        return (int(size),)
    return tuple(int(s) for s in size)  # type: ignore[union-attr]


# rounds of candidates a traced rejection sampler draws at once: a graph has a fixed number of
# ops, so it cannot loop until every element is accepted. Each round accepts an element with
# probability >= 0.95 (gamma) or >= 0.85 (Poisson, mean >= 10), so after these many rounds
# one is still unaccepted with probability < 1e-20; such an element is NaN, never a wrong
# number.
_GAMMA_ROUNDS = 16
_POISSON_ROUNDS = 24
# terms of the inverted CDF of a traced Poisson draw of mean < 10 (the mass beyond is < 1e-30)
_POISSON_TERMS = 64


def _full_shape(op: str, size: object, params: list) -> tuple:
    """``size`` followed by the broadcast shape of the parameters (MegEngine's rule)."""
    shapes = [tuple(p.shape) for p in params]
    try:
        tail = np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(
            f"random.{op}: parameters of shapes {', '.join(map(str, shapes))} do not broadcast"
        ) from None
    return _size(size) + tuple(tail)


def _check_size(op: str, size: object) -> None:
    shape = _size(size)
    if any(s < 0 for s in shape):
        raise ValueError(f"random.{op}: size must not be negative, got {shape}")


class RNG:
    """MegEngine's ``megengine.random.RNG``: a random stream of its own, for ``uniform``,
    ``normal``, ``gamma``, ``beta``, ``poisson``, ``exponential``, ``multinomial``,
    ``permutation`` and ``shuffle``. ``RNG(seed=n)`` neither reads nor advances the global
    stream, and two instances of one seed draw the same numbers; ``RNG()`` (no seed) is the
    global stream of :func:`seed` / :func:`manual_seed`, which the module's functions of the
    same names use. ``device`` places the draws (default: the default device).

    Draws come from a counter-based generator (see the module's text) and, eagerly, from a
    numpy stream for gamma, beta and Poisson numbers; all of them work inside ``fg.trace``
    (``jit.trace``), where each run of the traced step draws new numbers."""

    def __init__(self, seed: int | None = None, device: object = None) -> None:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise TypeError(f"RNG: seed must be an int or None, got {seed!r}")
        self._seed = None if seed is None else int(seed) % 2**64
        self._device = None if device is None else str(device)
        self._counter: Any = None
        self._np: np.random.Generator | None = None
        if self._seed is not None:
            from . import _core
            from ._tensor import tensor

            if self._device is None:
                self._device = str(_core.get_default_device())
            ss = np.random.SeedSequence([self._seed, *b"megengine.random.RNG"])
            start, stream = ss.generate_state(2, np.uint64)
            # made here, outside any trace, so traced steps capture it and advance it in place
            self._counter = tensor(
                np.array(int(start >> np.uint64(12)), dtype=np.int64), device=self._device
            )
            self._np = np.random.Generator(np.random.PCG64(int(stream)))

    def __repr__(self) -> str:
        seed = "global" if self._seed is None else self._seed
        return f"<ferrograd.random.RNG seed={seed} device={self._where()}>"

    # --------------------------------------------------------------------- the streams

    def _where(self) -> str:
        from . import _core

        return _stream_key(self._device if self._device is not None else _core.get_default_device())

    def _draw(self, shape: tuple, normal: bool, dtype: str = "float32") -> Any:
        """Uniform ``[0, 1)`` or standard normal numbers from the counter-based generator;
        one counter step per draw, eagerly or inside a trace."""
        from . import _core

        if self._counter is None:
            return _traced_draw(shape, self._where(), dtype, normal)
        c = self._counter
        if _core._tracing():
            out = _core._random(c, list(shape), dtype, 0, normal)
            c += 1  # in place: the graph advances it on every run
            return out
        value = int(c.item())
        out = _core._random(_scalar_counter(value, c), list(shape), dtype, 0, normal)
        c.copy_(np.array(value + 1, dtype=np.int64))
        return out

    def _numpy(self) -> np.random.Generator:
        return self._np if self._np is not None else _numpy_rng(self._where())

    def _param(self, op: str, name: str, value: object) -> Any:
        """A distribution's parameter as a float64 tensor on the stream's device; a number
        must be positive (a tensor's values are not read: that would stop a trace)."""
        import ferrograd as fg

        if isinstance(value, fg.Tensor):
            if value.dtype.name not in ("float16", "bfloat16", "float32", "float64") and not (
                value.dtype.name.startswith(("int", "uint"))
            ):
                raise TypeError(
                    f"random.{op}: {name} must be a number or a real tensor, got dtype "
                    f"{value.dtype.name}"
                )
            return value.astype("float64")
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"random.{op}: {name} must be a number or a tensor, got {value!r}")
        if not float(value) > 0:
            raise ValueError(f"random.{op}: {name} must be positive, got {value}")
        return fg.tensor(np.array(float(value)), device=self._where())

    def _host(self, arr: object) -> Any:
        import ferrograd as fg

        return fg.tensor(np.asarray(arr, dtype=np.float32), device=self._where())

    # ----------------------------------------------------------------- distributions

    def uniform(self, low: float = 0, high: float = 1, size: object = None) -> Any:
        """float32 draws from ``[low, high)`` of shape ``size`` (None: ``(1,)``)."""
        if not float(low) < float(high):
            raise ValueError(f"random.uniform: low must be below high, got {low} and {high}")
        _check_size("uniform", size)
        shape = (1,) if size is None else _size(size)
        return self._draw(shape, False) * (float(high) - float(low)) + float(low)

    def normal(self, mean: float = 0, std: float = 1, size: object = None) -> Any:
        """float32 draws of ``N(mean, std^2)`` of shape ``size`` (None: ``(1,)``)."""
        _check_size("normal", size)
        shape = (1,) if size is None else _size(size)
        return self._draw(shape, True) * float(std) + float(mean)

    def gamma(self, shape: object, scale: object = 1, size: object = None) -> Any:
        """float32 draws of Gamma(``shape``, ``scale``) (mean ``shape * scale``), of shape
        ``size + broadcast(shape, scale).shape``."""
        from . import _core

        k, theta = self._param("gamma", "shape", shape), self._param("gamma", "scale", scale)
        _check_size("gamma", size)
        full = _full_shape("gamma", size, [k, theta])
        if not _core._tracing():
            return self._host(self._numpy().gamma(k.numpy(), theta.numpy(), size=full))
        return (self._log_gamma(k, full).exp() * theta).astype("float32")

    def beta(self, alpha: object, beta: object, size: object = None) -> Any:
        """float32 draws of Beta(``alpha``, ``beta``), of shape
        ``size + broadcast(alpha, beta).shape``."""
        import ferrograd as fg

        from . import _core

        a, b = self._param("beta", "alpha", alpha), self._param("beta", "beta", beta)
        _check_size("beta", size)
        full = _full_shape("beta", size, [a, b])
        if not _core._tracing():
            return self._host(self._numpy().beta(a.numpy(), b.numpy(), size=full))
        # X / (X + Y) for X ~ Gamma(a), Y ~ Gamma(b), from the logs (no 0 / 0 for small a, b)
        return fg.sigmoid(self._log_gamma(a, full) - self._log_gamma(b, full)).astype("float32")

    def poisson(self, lam: object, size: object = None) -> Any:
        """float32 counts drawn from Poisson(``lam``), of shape ``size + lam.shape``."""
        from . import _core

        m = self._param("poisson", "lam", lam)
        _check_size("poisson", size)
        full = _full_shape("poisson", size, [m])
        if not _core._tracing():
            return self._host(self._numpy().poisson(m.numpy(), size=full))
        return self._traced_poisson(m, full).astype("float32")

    def exponential(self, rate: object = 1.0, size: object = None) -> Any:
        """float32 draws of Exponential(``rate``) (mean ``1 / rate``), of shape
        ``size + rate.shape``: ``-log(1 - u) / rate`` of uniform ``u``."""
        import ferrograd as fg

        r = self._param("exponential", "rate", rate)
        _check_size("exponential", size)
        full = _full_shape("exponential", size, [r])
        u = self._draw(full, False, "float64")
        return (-fg.log1p(-u) / r).astype("float32")

    def multinomial(self, input: Any, num_samples: int, replacement: bool = False) -> Any:
        """int32 category indices drawn ``num_samples`` times from each row of the
        non-negative weights ``input`` (1-D or 2-D float; rows need not sum to 1), with or
        without replacement: shape ``(num_samples,)`` or ``(rows, num_samples)``."""
        import ferrograd as fg

        from . import _core

        op = "random.multinomial"
        if not isinstance(input, fg.Tensor):
            raise TypeError(f"{op}: input must be a Tensor, got {type(input).__name__}")
        if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)):
            raise TypeError(f"{op}: num_samples must be an int, got {num_samples!r}")
        if num_samples <= 0:
            raise ValueError(f"{op}: num_samples must be positive, got {num_samples}")
        if input.ndim not in (1, 2):
            raise ValueError(f"{op}: input must be 1-D or 2-D, got shape {tuple(input.shape)}")
        if input.shape[-1] == 0:
            raise ValueError(f"{op}: input has no categories (shape {tuple(input.shape)})")
        if input.dtype.name not in ("float16", "bfloat16", "float32", "float64"):
            raise TypeError(f"{op}: input must be a float tensor, got dtype {input.dtype.name}")
        k = input.shape[-1]
        if not replacement and num_samples > k:
            raise ValueError(
                f"{op}: num_samples ({num_samples}) exceeds the {k} categories, without replacement"
            )
        w = input.reshape(1, k) if input.ndim == 1 else input
        w = w.astype("float64")
        if not _core._tracing() and w.numel() > 0:
            host = w.numpy()
            if not np.isfinite(host).all() or (host < 0).any():
                raise ValueError(f"{op}: weights must be finite and non-negative")
            positive = (host > 0).sum(axis=-1)
            if (positive == 0).any():
                raise ValueError(f"{op}: every row of weights needs a positive weight")
            if not replacement and (positive < num_samples).any():
                raise ValueError(
                    f"{op}: a row has fewer positive weights ({int(positive.min())}) than "
                    f"num_samples ({num_samples}), without replacement"
                )
        draw = lambda shape: self._draw(shape, False, "float64")
        out = _categories(w, num_samples, replacement, draw).astype("int32")
        return out.reshape(num_samples) if input.ndim == 1 else out

    def permutation(self, n: object, *, dtype: str = "int32") -> Any:
        """A random permutation of ``range(n)`` (of ``dtype``) for an int ``n``; for a
        tensor ``n``, a copy with its rows (first axis) in random order (a 0-d tensor gives
        shape ``(1,)``)."""
        import ferrograd as fg

        if isinstance(n, fg.Tensor):
            return self._shuffled("permutation", n)
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise TypeError(f"random.permutation: n must be an int or a Tensor, got {n!r}")
        if n < 0:
            raise ValueError(f"random.permutation: n must not be negative, got {n}")
        return self._order(int(n)).astype(dtype)  # type: ignore[call-overload]

    def shuffle(self, inp: Any) -> None:
        """Puts the rows (first axis) of ``inp`` in random order, in place."""
        import ferrograd as fg

        if not isinstance(inp, fg.Tensor):
            raise TypeError(f"random.shuffle: inp must be a Tensor, got {type(inp).__name__}")
        if inp.ndim == 0 or inp.numel() == 0:
            raise ValueError(
                f"random.shuffle: inp needs at least one element along a first axis, got shape "
                f"{tuple(inp.shape)}"
            )
        inp.copy_(self._shuffled("shuffle", inp))

    def _order(self, n: int) -> Any:
        """A random order of ``range(n)`` (int64): the ranks of ``n`` uniform draws."""
        import ferrograd as fg

        return fg.argsort(self._draw((n,), False, "float64"), stable=True)

    def _shuffled(self, op: str, x: Any) -> Any:
        if x.ndim == 0:
            x = x.reshape(1)
        return x[self._order(x.shape[0])]

    # --------------------------------------------------- samplers made of traced ops

    def _log_gamma(self, k: Any, full: tuple) -> Any:
        """The logs of Gamma(``k``, 1) draws of shape ``full``, made of a fixed number of
        ops (for ``fg.trace``): Marsaglia and Tsang's squeeze method on ``_GAMMA_ROUNDS``
        candidates per element, the first accepted one kept; a shape below 1 draws
        Gamma(k + 1) and multiplies by ``u ** (1 / k)``."""
        import ferrograd as fg

        k = fg.broadcast_to(k, full)
        small = k < 1
        d = fg.where(small, k + 1, k) - 1.0 / 3.0
        c = 1.0 / fg.sqrt(9.0 * d)
        shape = (_GAMMA_ROUNDS, *full)
        x = self._draw(shape, True, "float64")
        u = self._draw(shape, False, "float64")
        v = (1.0 + c * x) ** 3
        logv = fg.log(fg.where(v > 0, v, fg.ones_like(v)))
        ok = (v > 0) & (fg.log1p(-u) < 0.5 * x * x + d - d * v + d * logv)
        first = ok.astype("int32").argmax(0, keepdim=True)
        logg = fg.gather(fg.log(d) + logv, 0, first).reshape(full)
        logg = fg.where(ok.any(0), logg, fg.full_like(logg, float("nan")))
        boost = fg.log1p(-self._draw(full, False, "float64")) / k
        return fg.where(small, logg + boost, logg)

    def _traced_poisson(self, lam: Any, full: tuple) -> Any:
        """Poisson(``lam``) counts of shape ``full`` made of a fixed number of ops: a mean
        below 10 inverts the CDF over its first ``_POISSON_TERMS`` terms; a larger one uses
        Hoermann's transformed rejection (PTRS) on ``_POISSON_ROUNDS`` candidates."""
        import ferrograd as fg

        lam = fg.broadcast_to(lam, full)
        small = lam < 10
        # inversion: count the terms whose cumulative mass lies below u
        ls = fg.where(small, lam, fg.zeros_like(lam))
        u = self._draw(full, False, "float64")
        pmf = fg.exp(-ls)
        cdf = pmf
        count = (cdf <= u).astype("float64")
        for i in range(1, _POISSON_TERMS):
            pmf = pmf * ls / i
            cdf = cdf + pmf
            count = count + (cdf <= u).astype("float64")
        # transformed rejection for a mean of 10 or more
        lb = fg.where(small, fg.full_like(lam, 10.0), lam)
        slam = fg.sqrt(lb)
        b = 0.931 + 2.53 * slam
        a = -0.059 + 0.02483 * b
        inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
        vr = 0.9277 - 3.6224 / (b - 2)
        shape = (_POISSON_ROUNDS, *full)
        uu = self._draw(shape, False, "float64") - 0.5
        vv = self._draw(shape, False, "float64")
        us = 0.5 - uu.abs()
        safe_us = fg.where(us > 0, us, fg.ones_like(us))
        kk = fg.floor((2 * a / safe_us + b) * uu + lb + 0.43)
        kk = fg.where(us > 0, kk, fg.full_like(kk, -1.0))
        kpos = fg.where(kk >= 0, kk, fg.zeros_like(kk))
        quick = (us >= 0.07) & (vv <= vr)
        squeeze_out = (kk < 0) | ((us < 0.013) & (vv > us))
        lhs = fg.log(vv) + fg.log(inv_alpha) - fg.log(a / (safe_us * safe_us) + b)
        rhs = -lb + kpos * fg.log(lb) - fg.lgamma(kpos + 1)
        ok = (kk >= 0) & (quick | (~squeeze_out & (lhs <= rhs)))
        first = ok.astype("int32").argmax(0, keepdim=True)
        big = fg.gather(kk, 0, first).reshape(full)
        big = fg.where(ok.any(0), big, fg.full_like(big, float("nan")))
        return fg.where(small, count, big)


_global = RNG()


def seed(seed: int | None = None) -> int:
    """MegEngine's ``random.seed(seed)``: :func:`manual_seed`; without a seed, PyTorch's
    ``torch.random.seed()``: a fresh nondeterministic seed, set and returned. It also makes
    the default device's counter-based generator, so later draws of the module's functions
    work inside ``jit.trace`` even where none was drawn eagerly first."""
    from . import _core

    if seed is None:
        seed = int(np.random.SeedSequence().entropy % (2**63))
    manual_seed(int(seed))
    if not _core._tracing():
        _ensure_counter(_stream_key(_core.get_default_device()))
    return int(seed)


def uniform(low: float = 0, high: float = 1, size: object = None) -> Any:
    """MegEngine's ``random.uniform`` on the global stream (see :meth:`RNG.uniform`)."""
    return _global.uniform(low, high, size)


def normal(mean: float = 0, std: float = 1, size: object = None) -> Any:
    """MegEngine's ``random.normal`` on the global stream (see :meth:`RNG.normal`)."""
    return _global.normal(mean, std, size)


def gamma(shape: object, scale: object = 1, size: object = None) -> Any:
    """MegEngine's ``random.gamma`` on the global stream (see :meth:`RNG.gamma`)."""
    return _global.gamma(shape, scale, size)


def beta(alpha: object, beta: object, size: object = None) -> Any:
    """MegEngine's ``random.beta`` on the global stream (see :meth:`RNG.beta`)."""
    return _global.beta(alpha, beta, size)


def poisson(lam: object, size: object = None) -> Any:
    """MegEngine's ``random.poisson`` on the global stream (see :meth:`RNG.poisson`)."""
    return _global.poisson(lam, size)


def exponential(rate: object = 1.0, size: object = None) -> Any:
    """MegEngine's ``random.exponential`` on the global stream (see
    :meth:`RNG.exponential`)."""
    return _global.exponential(rate, size)


def multinomial(input: Any, num_samples: int, replacement: bool = False) -> Any:
    """MegEngine's ``random.multinomial`` on the global stream (see
    :meth:`RNG.multinomial`)."""
    return _global.multinomial(input, num_samples, replacement)


def permutation(n: object, *, dtype: str = "int32") -> Any:
    """MegEngine's ``random.permutation`` on the global stream (see
    :meth:`RNG.permutation`)."""
    return _global.permutation(n, dtype=dtype)


def shuffle(inp: Any) -> None:
    """MegEngine's ``random.shuffle`` on the global stream: the rows of ``inp`` in random
    order, in place."""
    _global.shuffle(inp)
