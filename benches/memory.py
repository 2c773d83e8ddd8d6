#!/usr/bin/env python3
"""Activation memory and step time of a deep MLP under ferrograd's recomputation modes, against
PyTorch in the same run.

    python benches/memory.py [--quick] [--depth 48] [--width 1024] [--batch 256]
                             [--act gelu|tanh] [--depths 12,48,192] [--scaling-width N]
                             [--threads N] [--json out.json]

Model: ``depth`` layers ``h = act(h @ W + b)`` of width ``width`` on a float32 batch, loss
``h.mean()``; one step is forward + backward (no optimizer). ``gelu`` is the tanh
approximation written out as ops, ``0.5*x*(1+tanh(0.7978845608*(x+0.044715*x**3)))``, in both
engines (not torch's fused F.gelu), so both record the same op graph.

Modes:
  ferrograd default   fg.GradManager()
  ferrograd auto      fg.GradManager(recompute="auto")   (automatic backward mirroring)
  ferrograd ckpt      fg.checkpoint_sequential(layers, round(sqrt(depth)), x)
  ferrograd traced    the default step under fg.trace (graph mode: fused, planned)
  ferrograd tr-auto   fg.trace(step, mirror="auto")  (mirroring decided on the whole graph)
  torch default       eager autograd
  torch ckpt          torch.utils.checkpoint.checkpoint_sequential(..., use_reentrant=False)

Memory (all in MiB = 2**20 bytes, all deltas over what was live just before the step, so the
weights and the input are not counted; gradients of the weights are):
  act    bytes live at the end of forward (what the tape keeps for backward, plus the output)
  peak   highest bytes live at any point of the step (forward, backward, gradients)
ferrograd: fg.memory_stats() / fg.reset_peak_memory_stats(), the engine's own counters.
PyTorch: one extra step under torch.profiler with profile_memory=True; its CPU "[memory]"
events carry the allocator's running "Total Allocated", whose maximum (and value at a marker
placed at the end of forward) minus its value at the start gives the same two deltas. Timed
steps run without the profiler.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
import tempfile
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C

MiB = 2.0**20
GELU_C = 0.7978845608


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="fewer repeats; depth-scaling table at depths 16,36,64 and width 512",
    )
    p.add_argument("--depth", type=int, default=48, help="depth of the main table (48)")
    p.add_argument("--width", type=int, default=1024, help="width of the main table (1024)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--act", choices=("gelu", "tanh"), default="gelu")
    p.add_argument(
        "--depths",
        default=None,
        help="depths of the scaling table (default 12,48,192; quick 16,36,64); 'none' skips it",
    )
    p.add_argument(
        "--scaling-width",
        type=int,
        default=None,
        help="width of the scaling table (default 1024; quick 512)",
    )
    p.add_argument(
        "--segments",
        type=int,
        default=None,
        help="checkpoint segments (default round(sqrt(depth)) for each depth)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="timed steps per mode in the main table (default 5; quick 2)",
    )
    p.add_argument(
        "--scaling-repeats",
        type=int,
        default=3,
        help="timed steps per mode and depth in the scaling table (default 3)",
    )
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument(
        "--json",
        metavar="PATH",
        default=None,
        help="write the records to PATH (default: ferrograd-memory[-quick].json in "
        "the system temp directory)",
    )
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch")
    return p.parse_args(argv)


# --------------------------------------------------------------------------------------------
# models


def make_weights(np: Any, depth: int, width: int, seed: int = 0) -> list[tuple]:
    rng = np.random.default_rng(seed)
    bound = 1.0 / math.sqrt(width)
    return [
        (
            rng.uniform(-bound, bound, (width, width)).astype(np.float32),
            rng.uniform(-bound, bound, (width,)).astype(np.float32),
        )
        for _ in range(depth)
    ]


def segments_for(depth: int, override: int | None) -> int:
    return override or max(1, round(math.sqrt(depth)))


class FgModel:
    def __init__(self, fg: Any, weights: list[tuple], x0: Any, act: str) -> None:
        self.fg = fg
        self.params = []
        for w, b in weights:
            self.params += [fg.tensor(w), fg.tensor(b)]
        self.x = fg.tensor(x0)
        self.act = act
        self.layers = [
            self._layer(self.params[2 * i], self.params[2 * i + 1]) for i in range(len(weights))
        ]

    def _layer(self, w: Any, b: Any) -> Callable[[Any], Any]:
        if self.act == "tanh":
            return lambda h: (h @ w + b).tanh()

        def gelu_layer(h: Any) -> Any:
            z = h @ w + b
            return 0.5 * z * (1.0 + (GELU_C * (z + 0.044715 * z**3)).tanh())

        return gelu_layer

    def step(self, mode: str, segments: int, probe: dict | None = None) -> None:
        fg = self.fg
        if mode in ("traced", "tr-auto") or mode.startswith("budget"):
            self.traced(mode)(self.x)
            if probe is not None:
                # a traced step cannot be stopped between forward and backward: the plan says
                # what forward keeps for backward
                probe["fwd_live"] = None
            return
        gm = fg.GradManager(recompute="auto" if mode == "auto" else None).attach(self.params)
        with gm:
            if mode == "ckpt":
                h = fg.checkpoint_sequential(self.layers, segments, self.x)
            else:
                h = self.x
                for layer in self.layers:
                    h = layer(h)
            loss = h.mean()
            del h
            if probe is not None:
                probe["fwd_live"] = fg.memory_stats()["live_bytes"]
            gm.backward(loss)
        del loss

    def traced(self, mode: str, budget: int | None = None) -> Any:
        """The traced default step for ``mode`` (made on first use): ``traced``,
        ``tr-auto`` (mirror="auto") or ``budget...`` (memory_budget=budget)."""
        cache = self.__dict__.setdefault("_traced", {})
        if mode not in cache:
            fg = self.fg
            gm = fg.GradManager().attach(self.params)

            def step(x: Any) -> Any:
                with gm:
                    h = x
                    for layer in self.layers:
                        h = layer(h)
                    loss = h.mean()
                    gm.backward(loss)
                return loss

            opts: dict = {}
            if mode == "tr-auto":
                opts["mirror"] = "auto"
            if mode.startswith("budget"):
                opts["memory_budget"] = budget
            cache[mode] = fg.trace(step, **opts)
        return cache[mode]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def grad_bytes(self) -> int:
        return sum(4 * p.size for p in self.params)

    def measure_memory(self, mode: str, segments: int) -> tuple[int, int]:
        """(act, peak) bytes over the live bytes before the step."""
        fg = self.fg
        self.zero_grad()
        gc.collect()
        before = fg.memory_stats()["live_bytes"]
        fg.reset_peak_memory_stats()
        probe: dict = {}
        self.step(mode, segments, probe)
        peak = fg.memory_stats()["peak_bytes"]
        self.zero_grad()
        if probe["fwd_live"] is None:
            return self.traced(mode).memory_report()["saved_bytes"], peak - before
        return probe["fwd_live"] - before, peak - before

    def time_step(self, mode: str, segments: int) -> float:
        self.zero_grad()
        gc.collect()
        t0 = time.perf_counter()
        self.step(mode, segments)
        t = time.perf_counter() - t0
        self.zero_grad()
        return t


class TorchModel:
    def __init__(self, torch: Any, weights: list[tuple], x0: Any, act: str) -> None:
        self.torch = torch
        self.params = []
        for w, b in weights:
            self.params += [
                torch.from_numpy(w.copy()).requires_grad_(True),
                torch.from_numpy(b.copy()).requires_grad_(True),
            ]
        self.x = torch.from_numpy(x0.copy())
        self.act = act
        self.layers = [
            self._layer(self.params[2 * i], self.params[2 * i + 1]) for i in range(len(weights))
        ]

    def _layer(self, w: Any, b: Any) -> Callable[[Any], Any]:
        if self.act == "tanh":
            return lambda h: (h @ w + b).tanh()

        def gelu_layer(h: Any) -> Any:
            z = h @ w + b
            return 0.5 * z * (1.0 + (GELU_C * (z + 0.044715 * z**3)).tanh())

        return gelu_layer

    def step(self, mode: str, segments: int, marker: bool = False) -> None:
        torch = self.torch
        if mode == "ckpt":
            from torch.utils.checkpoint import checkpoint_sequential

            h = checkpoint_sequential(self.layers, segments, self.x, use_reentrant=False)
        else:
            h = self.x
            for layer in self.layers:
                h = layer(h)
        loss = h.mean()
        del h
        if marker:
            with torch.profiler.record_function("FERRO_FWD_END"):
                pass
        loss.backward()
        del loss

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def measure_memory(self, mode: str, segments: int) -> tuple[int, int]:
        """(act, peak) bytes over the allocator total at the start of the step, from the
        profiler's CPU memory events."""
        torch = self.torch
        self.zero_grad()
        gc.collect()
        acts = [torch.profiler.ProfilerActivity.CPU]
        with torch.profiler.profile(activities=acts, profile_memory=True) as prof:
            # a 1-element allocation marks the starting total
            torch.empty(1)
            self.step(mode, segments, marker=True)
        self.zero_grad()
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            prof.export_chrome_trace(path)
            with open(path) as f:
                events = json.load(f)["traceEvents"]
        finally:
            os.unlink(path)
        mem = sorted(
            (
                e
                for e in events
                if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type", 0) == 0
            ),
            key=lambda e: e["ts"],
        )
        marks = [e["ts"] for e in events if e.get("name") == "FERRO_FWD_END"]
        if not mem or not marks:
            raise RuntimeError("torch profiler reported no CPU memory events")
        first = mem[0]["args"]
        base = first["Total Allocated"] - first["Bytes"]
        peak = max(e["args"]["Total Allocated"] for e in mem)
        at_fwd = [e["args"]["Total Allocated"] for e in mem if e["ts"] <= marks[0]]
        act = (at_fwd[-1] if at_fwd else base) - base
        return act, peak - base

    def time_step(self, mode: str, segments: int) -> float:
        self.zero_grad()
        gc.collect()
        t0 = time.perf_counter()
        self.step(mode, segments)
        t = time.perf_counter() - t0
        self.zero_grad()
        return t


MODES = (
    ("ferrograd", "default"),
    ("ferrograd", "auto"),
    ("ferrograd", "ckpt"),
    ("ferrograd", "traced"),
    ("ferrograd", "tr-auto"),
    ("torch", "default"),
    ("torch", "ckpt"),
)


def run_config(
    eng: C.Engines,
    depth: int,
    width: int,
    batch: int,
    act: str,
    segments: int,
    warmup: int,
    repeats: int,
    with_torch: bool,
) -> list[dict]:
    """Every mode at one (depth, width): memory from one step, time as the median of
    ``repeats`` steps after ``warmup``."""
    np = eng.np
    weights = make_weights(np, depth, width)
    x0 = np.random.default_rng(1).standard_normal((batch, width)).astype(np.float32)
    out = []
    models: dict[str, Any] = {}
    try:
        models["ferrograd"] = FgModel(eng.fg, weights, x0, act)
        if with_torch:
            models["torch"] = TorchModel(eng.torch, weights, x0, act)
        del weights
        for engine, mode in MODES:
            if engine not in models:
                continue
            m = models[engine]
            time.sleep(0.25)  # let the other engine's spinning thread pool go idle
            gc.disable()
            try:
                for _ in range(warmup):
                    m.time_step(mode, segments)
                times = [m.time_step(mode, segments) for _ in range(repeats)]
            finally:
                gc.enable()
            act_b, peak_b = m.measure_memory(mode, segments)
            times.sort()
            out.append(
                {
                    "engine": engine,
                    "mode": mode,
                    "depth": depth,
                    "width": width,
                    "batch": batch,
                    "act": act,
                    "segments": segments if mode == "ckpt" else None,
                    "act_bytes": act_b,
                    "peak_bytes": peak_b,
                    "param_grad_bytes": 4 * depth * (width * width + width),
                    "step_s": times[len(times) // 2]
                    if len(times) % 2
                    else 0.5 * (times[len(times) // 2 - 1] + times[len(times) // 2]),
                    "step_min_s": times[0],
                    "repeats": repeats,
                }
            )
            print(
                f"  depth {depth:4d} width {width:5d} {engine:9s} {mode:8s} "
                f"act {act_b / MiB:9.1f} MiB  peak {peak_b / MiB:9.1f} MiB  "
                f"step {1e3 * out[-1]['step_s']:9.1f} ms"
            )
            C.flush()
    finally:
        models.clear()
        gc.collect()
    return out


def run_budgets(
    eng: C.Engines, depth: int, width: int, batch: int, act: str, repeats: int
) -> list[dict]:
    """The traced step under ``memory_budget`` at three levels between its plain plan and its
    mirror="auto" plan: measured peak (everything the step holds, weights included, as the
    budget counts it) against the budget, and step time."""
    np = eng.np
    fg = eng.fg
    weights = make_weights(np, depth, width)
    x0 = np.random.default_rng(1).standard_normal((batch, width)).astype(np.float32)
    m = FgModel(fg, weights, x0, act)
    del weights
    plans = {}
    for mode in ("traced", "tr-auto"):
        m.zero_grad()
        m.traced(mode)(m.x)
        plans[mode] = m.traced(mode).memory_report()["planned_peak_bytes"]
    full, floor = plans["traced"], plans["tr-auto"]
    # three levels, falling, between the plain plan and the mirrored one
    budgets = [int(floor + (full - floor) * f) for f in (0.75, 0.5, 0.1)]
    print(
        f"[budget] traced step, depth {depth}, width {width}: planned peak {full / MiB:.1f} MiB "
        f"plain, {floor / MiB:.1f} MiB with mirror=auto; budgets count everything the step "
        "holds (weights, input, gradients, activations)"
    )
    rows = []
    for i, budget in enumerate(budgets):
        mode = f"budget{i}"
        f = m.traced(mode, budget)
        m.zero_grad()
        try:
            f(m.x)
        except ValueError as e:
            print(f"  budget {budget / MiB:.1f} MiB: {e}")
            continue
        held = f.memory_report()["held_bytes"]
        gc.disable()
        try:
            times = [m.time_step(mode, 0) for _ in range(repeats + 1)][1:]
        finally:
            gc.enable()
        m.zero_grad()
        gc.collect()
        before = fg.memory_stats()["live_bytes"]
        fg.reset_peak_memory_stats()
        f(m.x)
        measured = fg.memory_stats()["peak_bytes"] - before + held
        m.zero_grad()
        r = f.memory_report()
        rows.append(
            {
                "budget_bytes": budget,
                "planned_peak_bytes": r["planned_peak_bytes"],
                "measured_peak_bytes": measured,
                "recomputed_nodes": r["recomputed_nodes"],
                "step_s": sorted(times)[len(times) // 2],
            }
        )
    C.print_table(
        ["budget MiB", "planned MiB", "measured MiB", "measured/budget", "recomputed", "step ms"],
        [
            [
                f"{r['budget_bytes'] / MiB:.1f}",
                f"{r['planned_peak_bytes'] / MiB:.1f}",
                f"{r['measured_peak_bytes'] / MiB:.1f}",
                C.fmt(r["measured_peak_bytes"] / r["budget_bytes"]),
                str(r["recomputed_nodes"]),
                f"{1e3 * r['step_s']:.1f}",
            ]
            for r in rows
        ],
        right={0, 1, 2, 3, 4, 5},
    )
    within = all(r["measured_peak_bytes"] <= 1.1 * r["budget_bytes"] for r in rows)
    peaks = [r["measured_peak_bytes"] for r in rows]
    monotone = all(a >= b for a, b in zip(peaks, peaks[1:]))
    print(
        f"measured peak within +10% of each budget: {'yes' if within else 'NO'}; "
        f"monotone as the budget falls: {'yes' if monotone else 'NO'}"
    )
    return rows


def loglog_slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of log(y) against log(x)."""
    xs = [math.log(x) for x, _ in points]
    ys = [math.log(y) for _, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else float("nan")


def label(r: dict) -> str:
    if r["mode"] == "ckpt":
        return f"ckpt ({r['segments']} seg)"
    return r["mode"]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    thread_note = C.configure_threads(args.threads, "cpu")
    eng = C.import_engines(args.threads, want_torch=not args.no_torch, want_jax=False)
    with_torch = eng.torch is not None
    if args.depths is None:
        depths = [16, 36, 64] if args.quick else [12, 48, 192]
    elif args.depths.lower() == "none":
        depths = []
    else:
        depths = [int(d) for d in args.depths.split(",") if d.strip()]
    sw = args.scaling_width or (512 if args.quick else 1024)
    repeats = args.repeats or (2 if args.quick else 5)
    meta = C.print_header(
        "ferrograd activation memory (benches/memory.py)",
        eng,
        args.threads,
        thread_note,
        "cpu",
        {
            "model": f"depth {args.depth} x width {args.width}, batch {args.batch}, "
            f"float32, act {args.act}, loss h.mean(); step = forward + backward",
            "mode": "quick" if args.quick else "full",
        },
    )
    start = time.perf_counter()

    # ---- main table
    seg = segments_for(args.depth, args.segments)
    print(
        f"[main] depth {args.depth}, width {args.width}: memory from one step, time = median "
        f"of {repeats} steps after 1 warm-up"
    )
    main_rows = run_config(
        eng, args.depth, args.width, args.batch, args.act, seg, 1, repeats, with_torch
    )
    ref = next(r for r in main_rows if r["engine"] == "ferrograd" and r["mode"] == "default")
    tref = next((r for r in main_rows if r["engine"] == "torch" and r["mode"] == "default"), None)
    print()
    print(
        f"== main table: depth {args.depth}, width {args.width}, batch {args.batch}, "
        f"{args.act}; MiB over live-before-step (weights and input not counted; the "
        f"{ref['param_grad_bytes'] / MiB:.0f} MiB of weight gradients are)"
    )
    rows = []
    for r in main_rows:
        rows.append(
            [
                r["engine"],
                label(r),
                f"{r['act_bytes'] / MiB:.1f}",
                f"{r['peak_bytes'] / MiB:.1f}",
                f"{1e3 * r['step_s']:.1f}",
                f"{1e3 * r['step_min_s']:.1f}",
                C.fmt(r["act_bytes"] / ref["act_bytes"]) if ref["act_bytes"] else "-",
                C.fmt(r["peak_bytes"] / ref["peak_bytes"]) if ref["peak_bytes"] else "-",
                C.fmt(r["step_s"] / ref["step_s"]),
            ]
        )
        r["act_vs_fg_default"] = r["act_bytes"] / ref["act_bytes"] if ref["act_bytes"] else None
        r["peak_vs_fg_default"] = r["peak_bytes"] / ref["peak_bytes"] if ref["peak_bytes"] else None
        r["time_vs_fg_default"] = r["step_s"] / ref["step_s"]
    C.print_table(
        [
            "engine",
            "mode",
            "act MiB",
            "peak MiB",
            "step ms",
            "best ms",
            "act/fg def",
            "peak/fg def",
            "time/fg def",
        ],
        rows,
        right={2, 3, 4, 5, 6, 7, 8},
    )
    if tref is not None:
        print(
            f"ferrograd default / torch default: act {ref['act_bytes'] / tref['act_bytes']:.2f}"
            f"x, peak {ref['peak_bytes'] / tref['peak_bytes']:.2f}x, "
            f"time {ref['step_s'] / tref['step_s']:.2f}x"
        )
        fck = next(r for r in main_rows if r["engine"] == "ferrograd" and r["mode"] == "ckpt")
        tck = next(r for r in main_rows if r["engine"] == "torch" and r["mode"] == "ckpt")
        print(
            f"ferrograd ckpt / torch ckpt:       act {fck['act_bytes'] / tck['act_bytes']:.2f}"
            f"x, peak {fck['peak_bytes'] / tck['peak_bytes']:.2f}x, "
            f"time {fck['step_s'] / tck['step_s']:.2f}x"
        )
        n = args.depth
        fl = -(-n // seg)
        tl = n // seg
        print(
            f"note: with {seg} segments ferrograd checkpoints chunks of ceil({n}/{seg}) = {fl} "
            f"layers and runs the last {n - fl * (-(-n // fl) - 1)} normally; torch checkpoints "
            f"{seg - 1} chunks of {n}//{seg} = {tl} and runs the last {n - tl * (seg - 1)} "
            "normally, so its act is higher by design"
        )
    tra = next((r for r in main_rows if r["mode"] == "tr-auto"), None)
    if tra is not None:
        peak_cut = 1 - tra["peak_bytes"] / ref["peak_bytes"]
        slower = tra["step_s"] / ref["step_s"] - 1
        print(
            f'traced mirror="auto" vs eager default: peak {100 * peak_cut:.0f}% lower '
            f"(target >= 40%: {'met' if peak_cut >= 0.4 else 'missed'}), step time "
            f"{100 * slower:+.0f}% (target <= +10%: {'met' if slower <= 0.10 else 'missed'})"
        )
    print()
    C.flush()

    # ---- memory budgets
    budget_rows = run_budgets(eng, args.depth, args.width, args.batch, args.act, repeats)
    print()
    C.flush()

    # ---- depth scaling
    scale_rows: list[dict] = []
    if depths:
        print(
            f"[scaling] depths {', '.join(map(str, depths))} at width {sw}"
            + (f" (reduced from {args.width} to keep the run short)" if sw != args.width else "")
            + f"; memory from one step, time = median of {args.scaling_repeats} steps after 1 "
            "warm-up"
        )
        for d in depths:
            scale_rows += run_config(
                eng,
                d,
                sw,
                args.batch,
                args.act,
                segments_for(d, args.segments),
                1,
                args.scaling_repeats,
                with_torch,
            )
        print()
        print(
            f"== activation memory vs depth (width {sw}, batch {args.batch}, {args.act}): "
            "act = MiB live at the end of forward; peak includes the weight gradients, "
            "which grow linearly with depth in every mode"
        )
        hdr = ["depth"]
        keys = [
            (e, m) for e, m in MODES if any(r["engine"] == e and r["mode"] == m for r in scale_rows)
        ]
        for e, m in keys:
            hdr.append(f"{'fg' if e == 'ferrograd' else e} {m} act")
        for e, m in keys:
            hdr.append(f"{'fg' if e == 'ferrograd' else e} {m} peak")
        hdr.append("grads")
        rows = []
        for d in depths:
            rs = {(r["engine"], r["mode"]): r for r in scale_rows if r["depth"] == d}
            row = [str(d)]
            row += [f"{rs[k]['act_bytes'] / MiB:.1f}" for k in keys]
            row += [f"{rs[k]['peak_bytes'] / MiB:.1f}" for k in keys]
            row.append(f"{4 * d * (sw * sw + sw) / MiB:.1f}")
            rows.append(row)
        if len(depths) >= 2:
            row = ["slope"]
            for field in ("act_bytes", "peak_bytes"):
                for k in keys:
                    pts = [
                        (
                            d,
                            next(
                                r
                                for r in scale_rows
                                if (r["engine"], r["mode"]) == k and r["depth"] == d
                            )[field],
                        )
                        for d in depths
                    ]
                    row.append(C.fmt(loglog_slope(pts)) if all(v > 0 for _, v in pts) else "-")
            row.append("1.00")
            rows.append(row)
        C.print_table(hdr, rows, right=set(range(1, len(hdr))))
        print(
            "slope = least-squares slope of log(MiB) against log(depth): 1 is linear in "
            "depth, 0.5 is sqrt(depth) (expected for act under ckpt with sqrt(depth) "
            "segments)"
        )
        print()
        print(f"step time (ms) vs depth, median of {args.scaling_repeats} steps:")
        hdr = ["depth"] + [f"{'fg' if e == 'ferrograd' else e} {m}" for e, m in keys]
        rows = []
        for d in depths:
            rs = {(r["engine"], r["mode"]): r for r in scale_rows if r["depth"] == d}
            rows.append([str(d)] + [f"{1e3 * rs[k]['step_s']:.0f}" for k in keys])
        C.print_table(hdr, rows, right=set(range(1, len(hdr))))
        print()

    total = time.perf_counter() - start
    print(f"total time {total:.1f} s")
    C.warn_if_busy_after(args.threads, meta)
    meta.update(
        {
            "total_seconds": total,
            "scaling_width": sw,
            "depths": depths,
            "memory_units": "bytes over live-before-step",
        }
    )
    meta["budgets"] = budget_rows
    path = args.json or os.path.join(
        tempfile.gettempdir(),
        "ferrograd-memory-quick.json" if args.quick else "ferrograd-memory.json",
    )
    C.write_json(path, {"meta": meta, "main": main_rows, "scaling": scale_rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
