#!/usr/bin/env python3
"""Where the time of one tiny op goes, ferrograd against PyTorch on the same device.

    python benches/dispatch.py [--device cpu|cuda] [--n 2000]

Each row times a loop of N ops on 16-element float32 tensors (median of several repeats, the
device synchronised once at the end of each repeat) and reports microseconds per op:

  view          x.reshape(4, 4): dispatch only, no kernel, no allocation
  add_ (in place) x.add_(y): one kernel, no allocation
  add           x + y: allocation, one kernel, the result freed on the next iteration
  add recorded  x + y with x tracked by a tape (GradKey / requires_grad): the above plus
                the record of the op
  tanh          x.tanh(): a unary kernel with allocation
  sum           x.sum(): a reduction to a scalar

The differences between rows separate the costs: add - add_ is allocation and freeing,
add_ - view is the kernel launch, add recorded - add is the tape.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C


def per_op_us(fn: Callable[[int], Any], sync: Callable[[], None], n: int, repeats: int) -> float:
    fn(max(n // 10, 10))
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(n)
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6 / n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=7)
    a = p.parse_args()
    import ferrograd as fg
    import numpy as np

    print(f"cpu: {C.cpu_model()} ({C.cpu_isa()})")
    dev = a.device
    x0 = np.linspace(-1, 1, 16, dtype=np.float32)
    rows: list[tuple[str, str, float]] = []

    def fg_sync() -> None:
        if dev == "cuda":
            fg.cuda.synchronize()

    x = fg.tensor(x0, device=dev)
    y = fg.tensor(x0 * 0.5, device=dev)

    def fg_view(n: int) -> None:
        for _ in range(n):
            x.reshape(4, 4)

    def fg_add_(n: int) -> None:
        z = x.copy()
        for _ in range(n):
            z.add_(y)

    def fg_add(n: int) -> None:
        for _ in range(n):
            x + y

    def fg_rec(n: int) -> None:
        k = fg.GradKey()
        xr = x.copy()
        k.attach(xr)
        for _ in range(n):
            xr + y

    def fg_tanh(n: int) -> None:
        for _ in range(n):
            x.tanh()

    def fg_sum(n: int) -> None:
        for _ in range(n):
            x.sum()

    cases = [
        ("view", fg_view),
        ("add_ (in place)", fg_add_),
        ("add", fg_add),
        ("add recorded", fg_rec),
        ("tanh", fg_tanh),
        ("sum", fg_sum),
    ]
    for name, fn in cases:
        rows.append((name, "ferrograd", per_op_us(fn, fg_sync, a.n, a.repeats)))

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and (dev == "cpu" or torch.cuda.is_available()):
        tdev = "cuda" if dev == "cuda" else "cpu"
        tx = torch.tensor(x0, device=tdev)
        ty = torch.tensor(x0 * 0.5, device=tdev)

        def t_sync() -> None:
            if dev == "cuda":
                torch.cuda.synchronize()

        def t_view(n: int) -> None:
            for _ in range(n):
                tx.reshape(4, 4)

        def t_add_(n: int) -> None:
            z = tx.clone()
            for _ in range(n):
                z.add_(ty)

        def t_add(n: int) -> None:
            for _ in range(n):
                tx + ty

        def t_rec(n: int) -> None:
            xr = tx.clone().requires_grad_(True)
            for _ in range(n):
                xr + ty

        def t_tanh(n: int) -> None:
            for _ in range(n):
                tx.tanh()

        def t_sum(n: int) -> None:
            for _ in range(n):
                tx.sum()

        tcases = [t_view, t_add_, t_add, t_rec, t_tanh, t_sum]
        for (name, _), fn in zip(cases, tcases):
            rows.append((name, "torch", per_op_us(fn, t_sync, a.n, a.repeats)))

    print(f"device: {dev}; {a.n} ops per repeat, median of {a.repeats}; 16-element float32")
    by = {(m, e): v for m, e, v in rows}
    print(f"{'op':<16} {'ferrograd':>10} {'torch':>10} {'fg/torch':>9}  (us/op)")
    for name, _ in cases:
        f = by[(name, "ferrograd")]
        t = by.get((name, "torch"))
        ratio = f"{f / t:9.3f}" if t else f"{'-':>9}"
        print(f"{name:<16} {f:10.3f} {t if t else float('nan'):10.3f} {ratio}")


if __name__ == "__main__":
    main()
