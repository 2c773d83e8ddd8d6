"""CUDA devices: availability, synchronisation and the memory cache.

The engine loads the CUDA driver, NVRTC and cuBLAS at run time, so ferrograd installs and
imports where no CUDA exists. NVRTC and cuBLAS installed from PyPI (``nvidia-cuda-nvrtc``,
``nvidia-cublas``) are found automatically.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import types
from typing import Any, Self

from . import _core

_LIBS = ("nvrtc", "nvrtc-builtins", "cublasLt", "cublas")

# what a failed device allocation raises (also a RuntimeError and a MemoryError), as
# torch.cuda.OutOfMemoryError
OutOfMemoryError = _core.OutOfMemoryError


def _driver_present() -> bool:
    """Whether the NVIDIA driver library loads (without it no GPU can be used, and the
    libraries below would only slow the import down: cuBLAS alone is hundreds of MB)."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def _preload_pypi_libraries(force: bool = False) -> None:
    """Loads NVIDIA libraries installed as Python packages, so the engine finds them by name:
    where a driver is present, or where FERROGRAD_PRELOAD_CUDA_LIBS=1 asks for them (NVRTC
    compiles kernels without a GPU: `compile_kernels` passes ``force``)."""
    if not (force or _driver_present() or os.environ.get("FERROGRAD_PRELOAD_CUDA_LIBS") == "1"):
        return
    for entry in sys.path:
        for sub in ("cu13", "cu12", "cuda_nvrtc", "cublas"):
            lib_dir = os.path.join(entry, "nvidia", sub, "lib")
            if not os.path.isdir(lib_dir):
                continue
            for name in _LIBS:
                for path in sorted(glob.glob(os.path.join(lib_dir, f"lib{name}.so.*"))):
                    try:
                        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                        break
                    except OSError:
                        continue


_preload_pypi_libraries()


def is_available() -> bool:
    """Whether a CUDA device can be used."""
    return _core._cuda_is_available()


def device_count() -> int:
    """How many CUDA devices the driver reports (0 without a driver)."""
    return _core._cuda_device_count()


def _ordinal(device: str | int | None) -> int:
    if device is None:
        return 0
    if isinstance(device, int):
        return device
    text = str(device)
    if text == "cuda":
        return 0
    if text.startswith("cuda:"):
        return int(text[5:])
    raise ValueError(f"not a CUDA device: {device!r}")


def synchronize(device: str | int | None = None) -> None:
    """Waits until the device has finished all queued work."""
    _core._cuda_synchronize(_ordinal(device))


def empty_cache(device: str | int | None = None) -> None:
    """Returns cached, unused device memory to the driver. Does nothing for a device that was
    never used, so it is safe to call where there is no CUDA."""
    _core._cuda_empty_cache(_ordinal(device))


def compile_kernels(arch: str = "sm_90") -> int:
    """Compiles every kernel with NVRTC for ``arch`` (needs NVRTC, not a GPU); returns the
    size of the PTX produced. Raises ``DeviceError`` when NVRTC cannot be loaded."""
    _preload_pypi_libraries(force=True)
    return _core._cuda_compile_kernels(arch)


# ------------------------------------------------------------- PyTorch's torch.cuda names


def current_device() -> int:
    """The index of the current CUDA device (ferrograd uses device 0 unless a tensor names
    another)."""
    return 0


def memory_allocated(device: str | int | None = None) -> int:
    """Bytes of device memory held by live tensors (the engine's count)."""
    return int(_core.memory_stats(f"cuda:{_ordinal(device)}")["live_bytes"])


def max_memory_allocated(device: str | int | None = None) -> int:
    """The peak of :func:`memory_allocated` since the start or
    :func:`reset_peak_memory_stats`."""
    return int(_core.memory_stats(f"cuda:{_ordinal(device)}")["peak_bytes"])


def reset_peak_memory_stats(device: str | int | None = None) -> None:
    _core.reset_peak_memory_stats(f"cuda:{_ordinal(device)}")


def manual_seed(seed: int) -> None:
    """Reseeds the random streams of CUDA devices only (``fg.manual_seed`` reseeds every
    device's)."""
    from . import random

    random._seed_devices("cuda", seed)


def manual_seed_all(seed: int) -> None:
    """As :func:`manual_seed` (every CUDA device)."""
    manual_seed(seed)


def seed_all() -> None:
    """Reseeds the CUDA streams from the operating system's entropy."""
    import numpy as np

    manual_seed(int(np.random.SeedSequence().entropy) % 2**63)


def _make_amp() -> types.ModuleType:
    """``torch.cuda.amp`` (a submodule, so ``from ferrograd.cuda.amp import autocast``
    works): ``autocast(enabled=True, dtype=float16, cache_enabled=True)``, ``GradScaler``,
    ``custom_fwd`` / ``custom_bwd`` for the CUDA device (see :mod:`ferrograd.amp`)."""
    from . import amp as _amp

    mod = types.ModuleType(f"{__name__}.amp", _make_amp.__doc__)

    class autocast(_amp.autocast):
        """``torch.cuda.amp.autocast``: :class:`ferrograd.amp.autocast` for ``"cuda"``."""

        def __init__(
            self, enabled: bool = True, dtype: object = "float16", cache_enabled: bool = True
        ) -> None:
            super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    class GradScaler(_amp.GradScaler):
        """``torch.cuda.amp.GradScaler``: :class:`ferrograd.amp.GradScaler` for ``"cuda"``."""

        def __init__(
            self,
            init_scale: float = 2.0**16,
            growth_factor: float = 2.0,
            backoff_factor: float = 0.5,
            growth_interval: int = 2000,
            enabled: bool = True,
        ) -> None:
            super().__init__(
                "cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled
            )

    def custom_fwd(fwd: Any = None, *, cast_inputs: Any = None) -> Any:
        """``torch.cuda.amp.custom_fwd``: :func:`ferrograd.amp.custom_fwd` for ``"cuda"``."""
        return _amp.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)

    def custom_bwd(bwd: Any = None) -> Any:
        """``torch.cuda.amp.custom_bwd``: :func:`ferrograd.amp.custom_bwd` for ``"cuda"``."""
        return _amp.custom_bwd(bwd, device_type="cuda")

    for obj in (autocast, GradScaler, custom_fwd, custom_bwd):
        obj.__module__ = mod.__name__
        obj.__qualname__ = obj.__name__
        setattr(mod, obj.__name__, obj)
    mod.__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd"]  # type: ignore[attr-defined]
    sys.modules[mod.__name__] = mod
    return mod


amp = _make_amp()


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether CUDA tensors can be bfloat16 (ferrograd stores and computes them on every
    CUDA device it runs on)."""
    return is_available()


def set_device(device: object) -> None:
    """Makes ``device`` (an index, ``"cuda:N"`` or a device) the current one. ferrograd uses
    one GPU per process (``cuda:0``); any other index is refused."""
    index = device if isinstance(device, int) else getattr(device, "index", None)
    if index is None and isinstance(device, str):
        index = int(device.split(":")[1]) if ":" in device else 0
    index = 0 if index is None else int(index)
    if index < 0 or index >= max(device_count(), 1):
        raise ValueError(
            f"set_device: device {index} does not exist ({device_count()} CUDA device(s))"
        )


class _CudaDeviceProperties:
    """What :func:`get_device_properties` returns (PyTorch's ``_CudaDeviceProperties``
    fields that programs read)."""

    def __init__(
        self, name: str, total_memory: int, major: int, minor: int, multi_processor_count: int
    ) -> None:
        self.name = name
        self.total_memory = total_memory
        self.major = major
        self.minor = minor
        self.multi_processor_count = multi_processor_count
        self.is_integrated = 0
        self.is_multi_gpu_board = 0

    def __repr__(self) -> str:
        return (
            f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
            f"total_memory={self.total_memory // (1024 * 1024)}MB, "
            f"multi_processor_count={self.multi_processor_count})"
        )


def _driver_properties(index: int) -> _CudaDeviceProperties | None:
    """The device's name, memory, compute capability and SM count from the CUDA driver, or
    None where the driver library does not load."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    from ._core import DeviceError

    def check(rc: int, what: str) -> None:
        if rc != 0:
            raise DeviceError(f"get_device_properties: {what} failed (CUDA error {rc})")

    check(lib.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(lib.cuDeviceGet(ctypes.byref(dev), index), f"cuDeviceGet({index})")
    name = ctypes.create_string_buffer(256)
    check(lib.cuDeviceGetName(name, 256, dev), "cuDeviceGetName")
    mem = ctypes.c_size_t()
    check(lib.cuDeviceTotalMem_v2(ctypes.byref(mem), dev), "cuDeviceTotalMem")

    def attribute(code: int) -> int:
        v = ctypes.c_int()
        check(lib.cuDeviceGetAttribute(ctypes.byref(v), code, dev), "cuDeviceGetAttribute")
        return int(v.value)

    # CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16, COMPUTE_CAPABILITY_MAJOR/MINOR = 75/76
    return _CudaDeviceProperties(
        name.value.decode(errors="replace"), int(mem.value), attribute(75), attribute(76),
        attribute(16),
    )  # fmt: skip


def get_device_properties(device: object = None) -> _CudaDeviceProperties:
    """PyTorch's ``torch.cuda.get_device_properties``: ``name``, ``total_memory`` (bytes),
    ``major``/``minor`` (compute capability) and ``multi_processor_count`` of a CUDA
    device. Raises ``DeviceError`` (a ``RuntimeError``) where there is no such device."""
    from ._core import DeviceError

    index = getattr(device, "index", None) if not isinstance(device, (str, int)) else None
    index = _ordinal(device if isinstance(device, (str, int)) or device is None else index)
    count = device_count() if is_available() else 0
    if count == 0:
        raise DeviceError(
            "get_device_properties: no CUDA device is available (no NVIDIA driver or GPU)"
        )
    if not 0 <= index < count:
        raise DeviceError(
            f"get_device_properties: invalid device index {index} ({count} CUDA device(s))"
        )
    props = _driver_properties(index)
    if props is None:
        # the engine's host-memory CUDA emulator (a testing build): no driver to ask
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        props = _CudaDeviceProperties("ferrograd CUDA emulator", int(total), 0, 0, 1)
    return props


def get_device_name(device: object = None) -> str:
    """The CUDA device's name (see :func:`get_device_properties`)."""
    return get_device_properties(device).name


def get_device_capability(device: object = None) -> tuple[int, int]:
    """The CUDA device's compute capability ``(major, minor)``."""
    p = get_device_properties(device)
    return (p.major, p.minor)


# ------------------------------------------------------ initialisation and random states


def is_initialized() -> bool:
    """PyTorch's ``torch.cuda.is_initialized()``: ferrograd sets CUDA up when it finds a
    device, so this is :func:`is_available` (False where there is no CUDA)."""
    return is_available()


_TYPED = {
    "FloatTensor": "float32",
    "DoubleTensor": "float64",
    "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16",
    "LongTensor": "int64",
    "IntTensor": "int32",
    "ShortTensor": "int16",
    "CharTensor": "int8",
    "ByteTensor": "uint8",
    "BoolTensor": "bool",
}


def __getattr__(name: str) -> Any:
    # ``torch.cuda._initialized`` (a module attribute there): read when asked
    if name == "_initialized":
        return is_initialized()
    if name in _TYPED:  # torch.cuda.FloatTensor and its kin: typed tensors on CUDA
        from ._porting import _typed

        cls = _typed(name, _TYPED[name], "cuda")
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _stream_name(device: object) -> str:
    """The random stream's name of a CUDA device given as an index, a name or a device."""
    if device is not None and not isinstance(device, (str, int)):
        index = getattr(device, "index", None)
        device = str(device) if index is None else int(index)
    return f"cuda:{_ordinal(device)}"


def get_rng_state(device: object = "cuda") -> Any:
    """The state of ``device``'s random stream (``torch.cuda.get_rng_state``) as a uint8
    tensor on the CPU; give it to :func:`set_rng_state` to draw the same numbers again."""
    import json

    import numpy as np

    from . import random
    from ._tensor import tensor

    blob = json.dumps(random._device_state(_stream_name(device))).encode()
    return tensor(np.frombuffer(blob, dtype=np.uint8).copy(), dtype="uint8")


def set_rng_state(new_state: Any, device: object = "cuda") -> None:
    """Restores a state from :func:`get_rng_state` to ``device``'s random stream."""
    import json

    import numpy as np

    from . import random

    arr = np.asarray(new_state.numpy() if hasattr(new_state, "numpy") else new_state)
    try:
        state = json.loads(arr.astype(np.uint8).tobytes().decode())
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"cuda.set_rng_state: not a state from get_rng_state ({e})") from None
    random._set_device_state(_stream_name(device), state)


def get_rng_state_all() -> list:
    """:func:`get_rng_state` of every CUDA device."""
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states: Any) -> None:
    """:func:`set_rng_state` for each CUDA device in turn."""
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


# ------------------------------------------------------------------ streams and events
#
# Each device runs its work on one stream, in the order it was queued. PyTorch's stream
# objects are kept so that programs using them run unchanged: work issued "on" another
# stream goes to that one stream (ordered more strictly than asked, never less), and an
# event marks the point in it where it is recorded.


class Stream:
    """A handle on a device's stream (``torch.cuda.Stream``). Every handle of one device
    names the same stream: ferrograd orders all of a device's work on it."""

    def __init__(self, device: object = None, priority: int = 0, **kwargs: Any) -> None:
        self.device_index = _device_index(device)
        self.priority = int(priority)

    @property
    def device(self) -> Any:
        from . import device as _device

        return _device(f"cuda:{self.device_index}")

    def synchronize(self) -> None:
        """Waits until the stream's queued work has finished."""
        synchronize(self.device_index)

    def query(self) -> bool:
        """Whether the queued work has finished (it has, once this returns: it waits)."""
        self.synchronize()
        return True

    def wait_stream(self, stream: Stream) -> None:
        """Orders later work after ``stream``'s: already so (one stream per device)."""

    def wait_event(self, event: Event) -> None:
        """Orders later work after ``event``: already so (one stream per device)."""

    def record_event(self, event: Event | None = None) -> Event:
        """Records ``event`` (a new one when None) at this point of the stream."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other.device_index == self.device_index

    def __hash__(self) -> int:
        return hash(("cuda-stream", self.device_index))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __repr__(self) -> str:
        return f"<ferrograd.cuda.Stream device=cuda:{self.device_index}>"


def _device_index(device: object) -> int:
    if device is None:
        return current_device()
    index = getattr(device, "index", device)
    if index is None:
        return current_device()
    return _ordinal(index if isinstance(index, int) else str(index))


class Event:
    """A point in a device's stream (``torch.cuda.Event``): ``record()`` marks it (waiting
    for the work queued before it), ``elapsed_time(end)`` is the time between two recorded
    events in milliseconds (with ``enable_timing=True``)."""

    def __init__(
        self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> None:
        self.enable_timing = bool(enable_timing)
        self._at: float | None = None
        self._device: int | None = None

    def record(self, stream: Stream | None = None) -> None:
        import time

        index = current_device() if stream is None else stream.device_index
        synchronize(index)
        self._device, self._at = index, time.perf_counter()

    def wait(self, stream: Stream | None = None) -> None:
        """Orders ``stream``'s later work after this event: already so."""

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        """Waits for the work before the recorded point (done when it was recorded)."""

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds from this event to ``end_event`` (both recorded, with timing)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("elapsed_time: both events must be created with enable_timing=True")
        if self._at is None or end_event._at is None:
            raise RuntimeError("elapsed_time: both events must be recorded first")
        return (end_event._at - self._at) * 1000.0

    def __repr__(self) -> str:
        state = "recorded" if self._at is not None else "not recorded"
        return f"<ferrograd.cuda.Event {state}>"


def current_stream(device: object = None) -> Stream:
    """The stream work on ``device`` runs on."""
    return Stream(device)


def default_stream(device: object = None) -> Stream:
    """The stream work on ``device`` runs on (its only one)."""
    return Stream(device)


class StreamContext:
    """``with torch.cuda.stream(s):``: work inside runs on ``s``'s device stream."""

    def __init__(self, stream: Stream | None) -> None:
        self.stream = stream

    def __enter__(self) -> Stream | None:
        return self.stream

    def __exit__(self, *exc: object) -> None:
        return None


def stream(stream: Stream | None) -> StreamContext:
    """A context in which work runs on ``stream`` (see :class:`StreamContext`)."""
    return StreamContext(stream)


def set_stream(stream: Stream) -> None:
    """Makes ``stream`` current (every stream of a device is its one stream)."""


class device:  # (PyTorch's name, lower case)
    """``with torch.cuda.device(i):`` makes device ``i`` current inside (ferrograd uses one
    device per process: ``i`` must name it, or be None or -1, which change nothing)."""

    def __init__(self, device: object) -> None:
        index = getattr(device, "index", device)
        self.idx = (
            -1 if index is None else int(_ordinal(index) if not isinstance(index, int) else index)
        )
        if self.idx >= 0:
            set_device(self.idx)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def initial_seed() -> int:
    """The seed the CUDA random streams were last seeded with."""
    from . import initial_seed as _initial_seed

    return _initial_seed()
