#!/usr/bin/env python3
"""One optimizer step over a model-sized set of parameters, ferrograd against PyTorch in one
run.

    python benches/optim.py [--device cpu|cuda] [--threads N] [--repeats R]
                            [--params 8388608] [--tensors 8]

Each optimizer steps ``--params`` float32 parameters split into ``--tensors`` tensors, each
with a gradient set once. ferrograd updates a parameter and its state in one fused pass in
Rust (on CUDA: one kernel per parameter); PyTorch runs its default implementation
(``foreach``). With ``--device cuda`` each step ends with a device sync; ``--tensors 200``
shows the per-tensor cost (a model of many small tensors). Times are milliseconds per step
(median and best of the repeats); the ratio is ferrograd's median over PyTorch's (below 1:
ferrograd is faster). The CPU model and its instruction sets are printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C

CASES = [
    ("SGD", {"lr": 0.01, "momentum": 0.9}),
    ("Adam", {"lr": 1e-3}),
    ("AdamW", {"lr": 1e-3, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 1e-3}),
    ("RMSprop", {"lr": 1e-3, "momentum": 0.9, "centered": True}),
    ("Adagrad", {"lr": 1e-2}),
    ("Adadelta", {"lr": 1.0}),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--params", type=int, default=1 << 23)
    ap.add_argument("--tensors", type=int, default=8)
    args = ap.parse_args()
    note = C.configure_threads(args.threads)
    eng = C.import_engines(args.threads, want_jax=False)
    np, fg, torch = eng.np, eng.fg, eng.torch
    dev = args.device
    if dev == "cuda" and torch is not None and not torch.cuda.is_available():
        print("note: this PyTorch has no CUDA: ferrograd only")
        torch = None
    C.print_header(
        "Optimizer step",
        eng,
        args.threads,
        note,
        dev,
        {"parameters": f"{args.params} float32 in {args.tensors} tensors"},
    )
    rng = np.random.default_rng(0)
    n = args.params // args.tensors
    data = [rng.standard_normal(n).astype(np.float32) for _ in range(args.tensors)]
    grads = [rng.standard_normal(n).astype(np.float32) * 0.01 for _ in range(args.tensors)]

    def fg_step(name, kw):
        ps = [fg.nn.Parameter(fg.tensor(a, device=dev)) for a in data]
        for p, g in zip(ps, grads):
            p.grad = fg.tensor(g, device=dev)
        opt = getattr(fg.optim, name)(ps, **kw)
        if dev == "cpu":
            return opt.step

        def step():
            opt.step()
            fg.cuda.synchronize()

        return step

    def torch_step(name, kw):
        ps = [torch.nn.Parameter(torch.tensor(a, device=dev)) for a in data]
        for p, g in zip(ps, grads):
            p.grad = torch.tensor(g, device=dev)
        opt = getattr(torch.optim, name)(ps, **kw)
        if dev == "cpu":
            return opt.step

        def step():
            opt.step()
            torch.cuda.synchronize()

        return step

    head = f"{'optimizer':<38} {'ferrograd ms':>13} {'best':>8} {'torch ms':>9} {'best':>8} {'ratio':>7}"
    print(head)
    for name, kw in CASES:
        label = name + ("(" + ", ".join(f"{k}={v}" for k, v in kw.items() if k != "lr") + ")")
        tf = C.measure(fg_step(name, kw), args.warmup, args.repeats)
        tt = C.measure(torch_step(name, kw), args.warmup, args.repeats) if torch else None
        ratio = tf.median / tt.median if tt else None
        print(
            f"{label:<38} {tf.median * 1e3:>13.2f} {tf.min * 1e3:>8.2f} "
            f"{(tt.median * 1e3 if tt else float('nan')):>9.2f} "
            f"{(tt.min * 1e3 if tt else float('nan')):>8.2f} {C.fmt(ratio):>7}"
        )
        C.flush()


if __name__ == "__main__":
    main()
