"""What the example programs share: an optional progress bar and an optional plot, through
tqdm and matplotlib when they are installed (``pip install "ferrograd[examples]"``), never
needed to run."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Sequence


def progress(iterable: Sequence, enabled: bool, unit: str = "steps") -> Iterable:
    """tqdm when installed, else a plain line every tenth of the run."""
    if not enabled:
        return iterable
    try:
        from tqdm import tqdm

        return tqdm(iterable, file=sys.stdout, unit=unit.rstrip("s") or unit)
    except ImportError:
        return _plain_progress(iterable, unit)


def _plain_progress(iterable: Sequence, unit: str) -> Iterable:
    n = len(iterable)
    t0 = time.perf_counter()
    for k, i in enumerate(iterable):
        yield i
        if (k + 1) % max(1, n // 10) == 0 or k + 1 == n:
            rate = (k + 1) / max(time.perf_counter() - t0, 1e-9)
            print(f"[{k + 1}/{n}] {100 * (k + 1) // n}% {rate:.1f} {unit}/s", flush=True)


def write_plot(path: str, curves: dict[str, Sequence[float]], xlabel: str) -> None:
    """One panel per curve, written to ``path`` (a PNG); says so when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("--plot needs matplotlib (pip install matplotlib)")
        return
    fig, axes = plt.subplots(1, len(curves), figsize=(5 * len(curves), 3.5), squeeze=False)
    for ax, (name, ys) in zip(axes[0], curves.items()):
        ax.plot(range(1, len(ys) + 1), ys)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(name)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    print(f"wrote {path}")
