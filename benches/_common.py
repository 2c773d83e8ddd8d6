"""Shared helpers for the ferrograd benchmarks: thread setup, engine imports, timing, tables.

Only the standard library is imported at module level: thread counts must be placed in the
environment (``configure_threads``) before numpy, torch, jax or ferrograd are imported, because
their thread pools (OpenBLAS, rayon, Eigen) read it once, at load time.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from typing import Any, Callable

# --------------------------------------------------------------------------------------------
# threads


def configure_threads(n: int, device: str = "cpu") -> str:
    """Puts ``n`` threads in the environment of every engine; returns a description.

    * ferrograd: ``RAYON_NUM_THREADS`` (rayon's global pool is built on first use).
    * numpy: ``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` (BLAS pools;
      numpy's elementwise ufuncs are single-threaded whatever this says).
    * PyTorch: ``torch.set_num_threads(n)`` after import (see ``import_torch``).
    * JAX: XLA's CPU client has no "use exactly n threads" switch. With ``n == 1`` we set
      ``--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1``; with
      ``n < os.cpu_count()`` we set ``intra_op_parallelism_threads=n`` and, for every engine
      alike, pin the process to ``n`` CPUs with ``os.sched_setaffinity``; with
      ``n == os.cpu_count()`` (the default) nothing is needed, JAX uses every core.
    """
    ncpu = os.cpu_count() or 1
    if n < 1:
        raise SystemExit(f"--threads must be at least 1, got {n}")
    for var in (
        "RAYON_NUM_THREADS",
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS",
        "NUMEXPR_NUM_THREADS",
    ):
        os.environ[var] = str(n)
    flags = os.environ.get("XLA_FLAGS", "")
    notes = [f"{n} thread(s) for every engine"]
    if n == 1:
        flags += " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    elif n < ncpu:
        flags += f" intra_op_parallelism_threads={n}"
    if n < ncpu and hasattr(os, "sched_setaffinity"):
        try:
            cpus = sorted(os.sched_getaffinity(0))[:n]
            os.sched_setaffinity(0, cpus)
            notes.append(f"process pinned to CPUs {cpus}")
        except OSError as e:  # pragma: no cover - depends on the machine
            notes.append(f"could not pin CPUs ({e})")
    os.environ["XLA_FLAGS"] = flags.strip()
    if device == "cpu":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return "; ".join(notes)


# --------------------------------------------------------------------------------------------
# engines


class Engines:
    """The imported modules (None where missing) and their version strings."""

    def __init__(self) -> None:
        self.fg: Any = None
        self.np: Any = None
        self.torch: Any = None
        self.jax: Any = None
        self.jnp: Any = None
        self.versions: dict[str, str] = {}
        self.notes: list[str] = []


def import_engines(threads: int, want_torch: bool = True, want_jax: bool = True) -> Engines:
    """Imports numpy and ferrograd (required) and PyTorch and JAX (optional, a note each when
    missing). Call ``configure_threads`` first."""
    e = Engines()
    import numpy as np

    e.np = np
    e.versions["numpy"] = np.__version__
    try:
        import ferrograd as fg
    except ImportError as err:
        hint = ""
        if isinstance(err, ModuleNotFoundError) and err.name == "ferrograd":
            hint = (
                "; build and install it first: `pip install .` (or `maturin develop --release`) "
                "in the repository root"
            )
        raise SystemExit(f"cannot import ferrograd ({err}){hint}") from None
    e.fg = fg
    e.versions["ferrograd"] = getattr(fg, "__version__", "?")
    if want_torch:
        try:
            import torch

            torch.set_num_threads(threads)
            try:
                torch.set_num_interop_threads(1)
            except RuntimeError:
                pass
            e.torch = torch
            e.versions["torch"] = torch.__version__
        except ImportError:
            e.notes.append("PyTorch not installed: its columns are skipped")
    if want_jax:
        try:
            import jax
            import jax.numpy as jnp

            e.jax = jax
            e.jnp = jnp
            e.versions["jax"] = jax.__version__
            try:
                import jaxlib

                e.versions["jaxlib"] = jaxlib.__version__
            except ImportError:
                pass
        except ImportError:
            e.notes.append("JAX not installed: its columns are skipped")
    return e


def cpu_model() -> str:
    """The CPU's model name, with its family and model numbers where the name alone does not
    tell generations apart (a virtual machine's "AMD EPYC" is Zen 3 at family 25 model 1 and
    Zen 4 at family 25 model 17)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor's block is enough
                k, _, v = line.partition(":")
                fields.setdefault(k.strip().lower(), v.strip())
    except OSError:
        pass
    name = fields.get("model name")
    if not name:
        return platform.processor() or platform.machine()
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']} model {fields['model']})"
    return name


_ISA = (
    "sse2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "asimd",
    "sve",
)


def cpu_isa() -> str:
    """The vector instruction sets the CPU reports (Linux's /proc/cpuinfo flags), e.g.
    ``"sse2 avx avx2 fma avx512f avx512bw avx512vl"``: figures from CPUs with different sets are
    not comparable."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key = line.split(":", 1)[0].strip().lower()
                if key in ("flags", "features"):
                    have = set(line.split(":", 1)[1].split())
                    return " ".join(x for x in _ISA if x in have)
    except OSError:
        pass
    return platform.machine()


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def warn_if_busy_after(threads: int, meta: dict) -> None:
    """After a run: the 1-minute load average includes this run's own ``threads``; more than
    that (plus half a core per CPU of slack) means other processes competed for the CPUs."""
    load = load_average()
    if load is None:
        return
    meta["load_average_1min_end"] = load
    ncpu = os.cpu_count() or 1
    if load > min(threads, ncpu) + 0.5 * ncpu:
        print(
            f"WARNING: the 1-minute load average was {load:.2f} at the end of the run (this run "
            f"accounts for about {min(threads, ncpu)}): other processes competed for the CPUs "
            "and the timings above are unreliable. OpenMP-based engines (PyTorch) suffer most "
            "from that; rerun on an idle machine, or with --threads 1"
        )


def numpy_blas() -> str:
    """The BLAS numpy links (best effort; numpy.show_config's dict form)."""
    try:
        import numpy as np

        cfg = np.show_config(mode="dicts")
        blas = cfg.get("Build Dependencies", {}).get("blas", {})
        name = blas.get("name", "?")
        ver = blas.get("version", "")
        return f"{name} {ver}".strip()
    except Exception:  # noqa: BLE001 - purely informative
        return "?"


def print_header(
    title: str, eng: Engines, threads: int, thread_note: str, device: str, extra: dict | None = None
) -> dict:
    """Prints versions / machine / threads; returns them as a dict for the JSON file."""
    meta = {
        "title": title,
        "versions": dict(eng.versions),
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "cpu_isa": cpu_isa(),
        "cpu_count": os.cpu_count(),
        "threads": threads,
        "thread_setup": thread_note,
        "numpy_blas": numpy_blas(),
        "device": device,
        "rayon_num_threads": os.environ.get("RAYON_NUM_THREADS"),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    if extra:
        meta.update(extra)
    print(f"== {title}")
    print(
        "versions: "
        + ", ".join(f"{k} {v}" for k, v in eng.versions.items())
        + f", python {meta['python']}"
    )
    print(
        f"cpu: {meta['cpu']} ({meta['cpu_count']} logical CPUs; {meta['cpu_isa']}); "
        f"numpy BLAS: {meta['numpy_blas']}"
    )
    print(f"threads: {thread_note}; XLA_FLAGS={meta['xla_flags']!r}")
    print(f"device: {device}")
    load = load_average()
    if load is not None:
        meta["load_average_1min"] = load
        if load > 0.5 * (os.cpu_count() or 1):
            print(
                f"WARNING: the 1-minute load average is {load:.2f} before the run: other "
                "processes are using the CPUs, so timings will be noisy (compare medians "
                "with the best column, or rerun on an idle machine)"
            )
    for n in eng.notes:
        print(f"note: {n}")
    if extra:
        for k, v in extra.items():
            print(f"{k}: {v}")
    print()
    return meta


# --------------------------------------------------------------------------------------------
# timing


class Timing:
    """Wall-clock samples of one measured callable, in seconds."""

    def __init__(self, samples: list[float]) -> None:
        self.samples = samples

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)


def measure(
    fn: Callable[[], Any],
    warmup: int,
    repeats: int,
    sync: Callable[[Any], Any] | None = None,
    setup: Callable[[], Any] | None = None,
) -> Timing:
    """Runs ``fn`` ``warmup`` times untimed, then ``repeats`` times timed with
    ``time.perf_counter``. ``sync(result)`` runs inside the timed region (device sync, or
    JAX's ``block_until_ready``); ``setup()`` runs before each call, outside it."""
    for _ in range(warmup):
        if setup is not None:
            setup()
        r = fn()
        if sync is not None:
            sync(r)
    samples = []
    for _ in range(repeats):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        r = fn()
        if sync is not None:
            sync(r)
        samples.append(time.perf_counter() - t0)
        del r
    return Timing(samples)


# --------------------------------------------------------------------------------------------
# records and tables


def fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a >= 10:
        return f"{v:.2f}"
    if a >= 0.01:
        return f"{v:.3f}"
    return f"{v:.2e}"


def print_table(headers: list[str], rows: list[list[Any]], right: set | None = None) -> None:
    """A plain fixed-width table; columns listed in ``right`` (indices) are right-aligned."""
    right = right or set()
    cells = [[str(c) for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in cells:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))

    def line(r: list[str]) -> str:
        return "  ".join(
            c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(r)
        ).rstrip()

    print(line(headers))
    print(line(["-" * w for w in widths]))
    for r in cells:
        print(line(r))


def write_json(path: str, payload: dict) -> None:
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    with open(path, "w") as f:
        json.dump(payload, f, indent=2, default=str)
    print(f"wrote {path}")


def flush() -> None:
    sys.stdout.flush()
