#!/usr/bin/env python3
"""ferrograd against PyTorch, JAX and numpy, on the same shapes, dtypes, threads and warm-up.

    python benches/run.py [--quick] [--device cpu|cuda] [--threads N] [--json out.json]
                          [--only W1,W3]

Workloads (see benches/README.md for what each number means):

  W1 dispatch   1,000 tiny ops (16-element float32 add, mul, tanh cycling) under a tape:
                microseconds per op for forward+record and for backward
  W2 MLP step   784-1024-1024-10, batch 256, float32: forward, cross-entropy, backward, SGD
  W3 conv step  small CNN on 64 x 1x28x28: conv-relu-pool x2, linear, cross-entropy, SGD
  W4 bandwidth  elementwise add of two 32M-element float32 tensors, and a row sum of an
                (8192, 4096) float32 tensor, in GB/s
  W5 GEMM       float32 1024^3 and 4096^3 matmul, and x @ W.T of a Linear layer (8 and 256 rows), in GFLOP/s

Every engine is timed with time.perf_counter around the call (plus a device sync where the
engine is asynchronous), after warm-up calls, over several repeats; the table reports the
median and the best (minimum-time) repeat. The ratio column is ferrograd's value divided by the
peer's in the metric's own unit; the "ferrograd is" column turns it into "x slower/faster".
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import tempfile
import time
import traceback
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C

WORKLOADS = ("W1", "W2", "W3", "W4", "W5")


def settle() -> None:
    """Collects garbage and pauses briefly before each timed block, so that a thread pool the
    previous engine left spinning (OpenBLAS, OpenMP, Eigen) has gone to sleep."""
    gc.collect()
    time.sleep(0.25)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="fewer repeats and smaller W4/W5 sizes (finishes in under two minutes)",
    )
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="threads for every engine (default: os.cpu_count())",
    )
    p.add_argument(
        "--json",
        metavar="PATH",
        default=None,
        help="write the records to PATH (default: ferrograd-bench[-quick].json in "
        "the system temp directory)",
    )
    p.add_argument("--only", default=None, help="comma-separated subset of workloads, e.g. W1,W4")
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch")
    p.add_argument("--no-jax", action="store_true", help="skip JAX")
    return p.parse_args(argv)


# --------------------------------------------------------------------------------------------
# the run context


class Bench:
    """Engines, device, repeat policy and the records collected so far."""

    def __init__(self, args: argparse.Namespace, eng: C.Engines) -> None:
        self.args = args
        self.eng = eng
        self.device = args.device
        self.quick = args.quick
        self.records: list[dict] = []
        self.torch_dev: str | None = None
        self.jax_ok = eng.jax is not None
        self.np = eng.np
        self.fg = eng.fg
        # seconds of timed work to aim for per (engine, metric); repeats are clamped below
        self.target_s = 1.0 if self.quick else 4.0
        self.min_repeats = 5 if self.quick else 10
        self.max_repeats = 30 if self.quick else 100

    # ---- ferrograd on the chosen device
    def fgt(self, arr: Any) -> Any:
        if self.device == "cpu":
            return self.fg.tensor(arr)
        return self.fg.tensor(arr, device=self.device)

    def fg_sync(self, t: Any) -> None:
        """ferrograd runs CPU ops synchronously. On an accelerator: ``fg.cuda.synchronize()``
        where the build has it, else read one value of the result back."""
        if self.device == "cpu" or t is None:
            return
        sync = getattr(getattr(self.fg, "cuda", None), "synchronize", None)
        if sync is not None:
            sync()
            return
        if isinstance(t, (tuple, list)):
            t = t[-1]
        if t.size == 1:
            t.item()
        else:
            t.reshape(-1)[0].item()

    # ---- torch on the chosen device
    def tt(self, arr: Any, requires_grad: bool = False) -> Any:
        torch = self.eng.torch
        t = torch.from_numpy(arr.copy()).to(self.torch_dev)
        if requires_grad:
            t.requires_grad_(True)
        return t

    def torch_sync(self, _r: Any = None) -> None:
        if self.torch_dev == "cuda":
            self.eng.torch.cuda.synchronize()

    # ---- jax
    def jax_put(self, arr: Any) -> Any:
        return self.eng.jax.device_put(arr)

    def jax_sync(self, r: Any) -> None:
        self.eng.jax.block_until_ready(r)

    # ---- timing
    def time(
        self,
        fn: Callable[[], Any],
        sync: Callable[[Any], Any] | None = None,
        warmup: int = 2,
        max_repeats: int | None = None,
    ) -> C.Timing:
        """Warm-up calls, then enough repeats to fill about ``target_s`` seconds (at least
        ``min_repeats``, at most ``max_repeats``); garbage collection is off while timing."""
        settle()
        gc.disable()
        try:
            est = None
            for _ in range(max(1, warmup)):
                t0 = time.perf_counter()
                r = fn()
                if sync is not None:
                    sync(r)
                est = time.perf_counter() - t0
                del r
            hi = max_repeats or self.max_repeats
            n = int(self.target_s / max(est or 1e-9, 1e-9))
            n = max(min(self.min_repeats, hi), min(hi, n))
            return C.measure(fn, 0, n, sync=sync)
        finally:
            gc.enable()

    # ---- records
    def add(
        self,
        workload: str,
        metric: str,
        engine: str,
        median: float,
        best: float,
        unit: str,
        higher_is_better: bool,
        samples: int,
        note: str = "",
    ) -> None:
        self.records.append(
            {
                "workload": workload,
                "metric": metric,
                "engine": engine,
                "value": median,
                "best": best,
                "unit": unit,
                "higher_is_better": higher_is_better,
                "repeats": samples,
                "device": self.device,
                "note": note,
            }
        )

    def add_time(
        self,
        workload: str,
        metric: str,
        engine: str,
        t: C.Timing,
        unit: str,
        scale: float,
        note: str = "",
    ) -> None:
        """A lower-is-better time metric: seconds times ``scale`` (1e3 for ms, 1e6 / n for
        microseconds per op)."""
        self.add(
            workload,
            metric,
            engine,
            t.median * scale,
            t.min * scale,
            unit,
            False,
            len(t.samples),
            note,
        )

    def add_rate(
        self,
        workload: str,
        metric: str,
        engine: str,
        t: C.Timing,
        unit: str,
        work: float,
        note: str = "",
    ) -> None:
        """A higher-is-better throughput: ``work`` units per second (best = at min time)."""
        self.add(
            workload,
            metric,
            engine,
            work / t.median,
            work / t.min,
            unit,
            True,
            len(t.samples),
            note,
        )

    def skip(self, workload: str, engine: str, why: str) -> None:
        print(f"  [{workload}] {engine}: skipped: {why}")
        self.records.append(
            {
                "workload": workload,
                "metric": None,
                "engine": engine,
                "value": None,
                "unit": None,
                "skipped": why,
                "device": self.device,
            }
        )


def finish_ratios(records: list[dict]) -> None:
    """ratio_vs_ferrograd = ferrograd value / this value (same metric and unit);
    ferrograd_slowdown = ferrograd time / this engine's time (> 1: ferrograd is slower)."""
    fg_vals = {
        (r["workload"], r["metric"]): r["value"]
        for r in records
        if r["engine"] == "ferrograd" and r.get("value") is not None
    }
    for r in records:
        v = r.get("value")
        ref = fg_vals.get((r["workload"], r["metric"]))
        if v is None or ref is None or v == 0 or ref == 0:
            r["ratio_vs_ferrograd"] = None
            r["ferrograd_slowdown"] = None
            continue
        ratio = ref / v
        r["ratio_vs_ferrograd"] = ratio
        r["ferrograd_slowdown"] = (1 / ratio) if r["higher_is_better"] else ratio


def traced_summary(
    b: Bench,
    workload: str,
    eager_metrics: list[tuple[str, ...]] | None = None,
    targets: dict[str, float] | None = None,
) -> None:
    """Prints (and records) the traced step against ferrograd eager and each peer: traced time
    / peer time, with the issue's target where there is one (``targets[engine]``: the highest
    ratio that meets it). ``eager_metrics``: the eager metrics whose sum is the traced one's
    counterpart (W1 times forward and backward separately)."""
    recs = [r for r in b.records if r["workload"] == workload and r.get("value") is not None]
    traced = [r for r in recs if r["engine"] == "ferrograd (traced)"]
    for tr in traced:
        peers: dict[str, float] = {}
        for r in recs:
            if r is tr or r["engine"] == "ferrograd (traced)":
                continue
            if eager_metrics:
                for group in eager_metrics:
                    if r["metric"] == group[0]:
                        total = sum(
                            x["value"]
                            for x in recs
                            if x["engine"] == r["engine"] and x["metric"] in group
                        )
                        peers[r["engine"]] = total
            elif r["metric"] == tr["metric"]:
                peers[r["engine"]] = r["value"]
        for engine, v in peers.items():
            ratio = tr["value"] / v
            target = (targets or {}).get(engine)
            met = (
                ""
                if target is None
                else (" (target met)" if ratio <= target else " (target missed)")
            )
            goal = "" if target is None else f", target <= {target:.3g}"
            print(
                f"  {workload} traced / {engine}: {ratio:.3f} "
                f"({C.fmt(tr['value'])} vs {C.fmt(v)} {tr['unit']}{goal}){met}"
            )
            tr.setdefault("traced_ratios", {})[engine] = ratio
    if traced:
        print()
        C.flush()


def verdict(slowdown: float | None) -> str:
    if slowdown is None:
        return "-"
    if slowdown >= 1:
        return f"{slowdown:.2f}x slower"
    return f"{1 / slowdown:.2f}x faster"


def print_records(records: list[dict], workload: str) -> None:
    rows = []
    for r in records:
        if r["workload"] != workload or r.get("value") is None:
            continue
        is_fg = r["engine"].startswith("ferrograd")
        rows.append(
            [
                r["metric"],
                r["engine"],
                C.fmt(r["value"]),
                C.fmt(r["best"]),
                r["unit"],
                "-" if is_fg else C.fmt(r.get("ratio_vs_ferrograd")),
                "" if is_fg else verdict(r.get("ferrograd_slowdown")),
                r.get("note", ""),
            ]
        )
    if rows:
        C.print_table(
            ["metric", "engine", "median", "best", "unit", "fg/peer", "ferrograd is", "note"],
            rows,
            right={2, 3, 5},
        )
    print()
    C.flush()


# --------------------------------------------------------------------------------------------
# W1: dispatch overhead


def w1_dispatch(b: Bench) -> None:
    W = "W1"
    np = b.np
    n_ops = 1000
    rng = np.random.default_rng(0)
    x0 = rng.uniform(-1, 1, 16).astype(np.float32)
    ca0 = rng.uniform(-0.1, 0.1, 16).astype(np.float32)
    cm0 = rng.uniform(0.8, 1.2, 16).astype(np.float32)
    print(
        f"[W1] dispatch: chain of {n_ops} ops (add, mul, tanh cycling) on 16-element "
        "float32 tensors, forward+record then backward"
    )
    C.flush()

    def run_pair(
        name: str,
        fwd: Callable[[], Any],
        bwd: Callable[[Any], Any],
        sync_f: Callable[[Any], Any],
        sync_b: Callable[[Any], Any],
        reset: Callable[[], None],
        note: str = "",
    ) -> None:
        """Times forward (record included) and backward of the same chain separately."""
        warm = 2 if b.quick else 3
        settle()
        gc.disable()
        try:
            for _ in range(warm):
                reset()
                st = fwd()
                sync_b(bwd(st))
                del st
            t0 = time.perf_counter()
            reset()
            st = fwd()
            sync_b(bwd(st))
            del st
            est = time.perf_counter() - t0
            n = max(b.min_repeats, min(b.max_repeats, int(b.target_s / max(est, 1e-9))))
            f_s, b_s = [], []
            for _ in range(n):
                reset()
                t0 = time.perf_counter()
                st = fwd()
                sync_f(st)
                t1 = time.perf_counter()
                out = bwd(st)
                sync_b(out)
                t2 = time.perf_counter()
                f_s.append(t1 - t0)
                b_s.append(t2 - t1)
                del st, out
        finally:
            gc.enable()
        scale = 1e6 / n_ops
        b.add_time(W, "fwd+record", name, C.Timing(f_s), "us/op", scale, note)
        b.add_time(W, "backward", name, C.Timing(b_s), "us/op", scale, note)

    # ferrograd: a GradKey (tape) tracks x; every op records a GradFn
    fg = b.fg
    x = b.fgt(x0)
    ca, cm = b.fgt(ca0), b.fgt(cm0)

    def fg_fwd() -> Any:
        k = fg.GradKey()
        k.attach(x)
        h = x
        for i in range(n_ops):
            r = i % 3
            if r == 0:
                h = h + ca
            elif r == 1:
                h = h * cm
            else:
                h = h.tanh()
        return k, h

    def fg_bwd(st: Any) -> Any:
        k, h = st
        k.backward(h)  # dy defaults to ones
        return x.grad

    def fg_reset() -> None:
        x.grad = None

    run_pair("ferrograd", fg_fwd, fg_bwd, lambda st: b.fg_sync(st[1]), b.fg_sync, fg_reset)

    # the same chain and its gradient traced (fg.trace): the graph runs whole in Rust, the
    # chain fused into one loop over the data
    def fg_chain(h: Any) -> Any:
        for i in range(n_ops):
            r = i % 3
            if r == 0:
                h = h + ca
            elif r == 1:
                h = h * cm
            else:
                h = h.tanh()
        return h

    @fg.trace
    def fg_traced(xx: Any) -> Any:
        h = fg_chain(xx)
        return h, fg.grad(h, xx)

    t = b.time(lambda: fg_traced(x), sync=lambda r: b.fg_sync(r[1]), warmup=3)
    b.add_time(W, "fwd+bwd", "ferrograd (traced)", t, "us/op", 1e6 / n_ops, "fg.trace")

    if b.eng.torch is not None:
        torch = b.eng.torch
        tx = b.tt(x0, requires_grad=True)
        tca, tcm = b.tt(ca0), b.tt(cm0)
        ones = torch.ones_like(tx)

        def t_fwd() -> Any:
            h = tx
            for i in range(n_ops):
                r = i % 3
                if r == 0:
                    h = h + tca
                elif r == 1:
                    h = h * tcm
                else:
                    h = h.tanh()
            return h

        def t_bwd(h: Any) -> Any:
            h.backward(ones)
            return tx.grad

        def t_reset() -> None:
            tx.grad = None

        run_pair("torch", t_fwd, t_bwd, b.torch_sync, b.torch_sync, t_reset)

    if b.jax_ok:
        jax, jnp = b.eng.jax, b.eng.jnp
        jx, jca, jcm = b.jax_put(x0), b.jax_put(ca0), b.jax_put(cm0)
        jones = jnp.ones_like(jx)

        def chain(h: Any) -> Any:
            for i in range(n_ops):
                r = i % 3
                if r == 0:
                    h = h + jca
                elif r == 1:
                    h = h * jcm
                else:
                    h = jnp.tanh(h)
            return h

        def j_fwd() -> Any:
            return jax.vjp(chain, jx)  # eager: op by op, no jit

        def j_bwd(st: Any) -> Any:
            return st[1](jones)

        run_pair(
            "jax (eager)",
            j_fwd,
            j_bwd,
            lambda st: jax.block_until_ready(st[0]),
            jax.block_until_ready,
            lambda: None,
            note="jax.vjp op-by-op; eager is not JAX's fast path",
        )

    finish_ratios(b.records)
    print_records(b.records, W)
    traced_summary(b, W, [("fwd+record", "backward")], targets={"ferrograd": 1 / 20})


# --------------------------------------------------------------------------------------------
# W2: MLP training step


def _init(rng: Any, fan_in: int, shape: tuple) -> Any:
    bound = 1.0 / math.sqrt(fan_in)
    return rng.uniform(-bound, bound, shape).astype("float32")


def w2_mlp(b: Bench) -> None:
    # the CPU target is at batch 256; a GPU's at 256 and 4096
    for batch in (256,) if b.device == "cpu" else (256, 4096):
        w2_batch(b, batch, "step" if batch == 256 else f"step b{batch}")
    finish_ratios(b.records)
    print_records(b.records, "W2")
    traced_summary(b, "W2", targets={"torch": 0.9, "jax (jit)": 0.9})


def w2_batch(b: Bench, batch: int, metric: str) -> None:
    W = "W2"
    np = b.np
    sizes, lr = (784, 1024, 1024, 10), 0.01
    rng = np.random.default_rng(1)
    params0 = []
    for i in range(3):
        params0.append(_init(rng, sizes[i], (sizes[i], sizes[i + 1])))
        params0.append(_init(rng, sizes[i], (sizes[i + 1],)))
    x0 = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y0 = rng.integers(0, sizes[-1], batch).astype(np.int64)
    flops = 6 * batch * sum(sizes[i] * sizes[i + 1] for i in range(3))
    print(
        f"[W2] MLP step {'-'.join(map(str, sizes))}, batch {batch}, float32, relu: forward, "
        f"cross-entropy, backward, SGD (~{flops / 1e9:.2f} GFLOP of matmul per step)"
    )
    C.flush()

    fg = b.fg
    ps = [b.fgt(p) for p in params0]
    xb, yb = b.fgt(x0), b.fgt(y0)
    gm = fg.GradManager().attach(ps)

    def fg_step() -> Any:
        w1, b1, w2, b2, w3, b3 = ps
        with gm:
            h = (xb @ w1 + b1).relu()
            h = (h @ w2 + b2).relu()
            loss = fg.cross_entropy(h @ w3 + b3, yb)
            gm.backward(loss)
        with fg.no_grad():
            for p in ps:
                p -= lr * p.grad
                p.grad = None
        return loss

    t = b.time(fg_step, sync=lambda loss: loss.item(), warmup=3)
    b.add_time(W, metric, "ferrograd", t, "ms", 1e3)

    # the same step traced: fg.trace records it once, then runs the graph in Rust
    tps_fg = [b.fgt(p) for p in params0]
    gm_t = fg.GradManager().attach(tps_fg)
    opt_t = fg.optim.SGD(tps_fg, lr=lr)

    @fg.trace
    def fg_traced(xx: Any, yy: Any) -> Any:
        w1, b1, w2, b2, w3, b3 = tps_fg
        with gm_t:
            h = (xx @ w1 + b1).relu()
            h = (h @ w2 + b2).relu()
            loss = fg.cross_entropy(h @ w3 + b3, yy)
            gm_t.backward(loss)
        opt_t.step()
        opt_t.zero_grad()
        return loss

    t = b.time(lambda: fg_traced(xb, yb), sync=lambda loss: loss.item(), warmup=3)
    b.add_time(W, metric, "ferrograd (traced)", t, "ms", 1e3, "fg.trace")

    if b.eng.torch is not None:
        torch = b.eng.torch
        F = torch.nn.functional
        tps = [b.tt(p, requires_grad=True) for p in params0]
        tx, ty = b.tt(x0), b.tt(y0)

        def t_step() -> Any:
            w1, b1, w2, b2, w3, b3 = tps
            h = torch.relu(tx @ w1 + b1)
            h = torch.relu(h @ w2 + b2)
            loss = F.cross_entropy(h @ w3 + b3, ty)
            loss.backward()
            with torch.no_grad():
                for p in tps:
                    p -= lr * p.grad
                    p.grad = None
            return loss

        t = b.time(t_step, sync=lambda loss: loss.item(), warmup=3)
        b.add_time(W, metric, "torch", t, "ms", 1e3, "eager")

    if b.jax_ok:
        jax, jnp = b.eng.jax, b.eng.jnp

        def loss_fn(params: list, x: Any, y: Any) -> Any:
            w1, b1, w2, b2, w3, b3 = params
            h = jax.nn.relu(x @ w1 + b1)
            h = jax.nn.relu(h @ w2 + b2)
            logp = jax.nn.log_softmax(h @ w3 + b3, axis=-1)
            return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

        def step(params: list, x: Any, y: Any) -> tuple:
            loss, g = jax.value_and_grad(loss_fn)(params, x, y)
            return [p - lr * gi for p, gi in zip(params, g)], loss

        jx, jy = b.jax_put(x0), b.jax_put(y0.astype(np.int32))
        for name, fn, note in (
            ("jax (jit)", jax.jit(step, donate_argnums=0), "whole step under jax.jit"),
            ("jax (eager)", step, "op by op, not JAX's fast path"),
        ):
            state = {"p": [b.jax_put(p) for p in params0]}

            def j_step(fn: Callable = fn, state: dict = state) -> Any:
                state["p"], loss = fn(state["p"], jx, jy)
                return state["p"], loss

            t = b.time(j_step, sync=b.jax_sync, warmup=3)
            b.add_time(W, metric, name, t, "ms", 1e3, note)


# --------------------------------------------------------------------------------------------
# W3: small CNN training step


def w3_conv(b: Bench) -> None:
    W = "W3"
    np = b.np
    fg = b.fg
    batch, lr = 64, 0.01
    print(
        f"[W3] conv step: conv3x3(1->16,pad1)+relu+maxpool2, conv3x3(16->32,pad1)+relu+"
        f"maxpool2, linear(1568->10), batch {batch} of 1x28x28, float32, cross-entropy, "
        "backward, SGD"
    )
    C.flush()
    rng = np.random.default_rng(2)
    params0 = [
        _init(rng, 9, (16, 1, 3, 3)),
        _init(rng, 9, (16,)),
        _init(rng, 144, (32, 16, 3, 3)),
        _init(rng, 144, (32,)),
        _init(rng, 1568, (1568, 10)),
        _init(rng, 1568, (10,)),
    ]
    x0 = rng.standard_normal((batch, 1, 28, 28)).astype(np.float32)
    y0 = rng.integers(0, 10, batch).astype(np.int64)

    if not all(hasattr(fg, n) for n in ("conv2d", "max_pool2d")):
        b.skip(W, "ferrograd", "ferrograd has no conv2d")
    else:
        ps = [b.fgt(p) for p in params0]
        xb, yb = b.fgt(x0), b.fgt(y0)
        gm = fg.GradManager().attach(ps)

        def fg_step() -> Any:
            c1w, c1b, c2w, c2b, lw, lb = ps
            with gm:
                h = fg.max_pool2d(fg.conv2d(xb, c1w, bias=c1b, padding=1).relu(), 2)
                h = fg.max_pool2d(fg.conv2d(h, c2w, bias=c2b, padding=1).relu(), 2)
                loss = fg.cross_entropy(h.reshape(batch, 32 * 7 * 7) @ lw + lb, yb)
                gm.backward(loss)
            with fg.no_grad():
                for p in ps:
                    p -= lr * p.grad
                    p.grad = None
            return loss

        try:
            t = b.time(fg_step, sync=lambda loss: loss.item(), warmup=3)
            b.add_time(W, "step", "ferrograd", t, "ms", 1e3)
        except Exception as e:  # noqa: BLE001 - report and keep the run going
            b.skip(W, "ferrograd", f"{type(e).__name__}: {e}")

        tps_fg = [b.fgt(p) for p in params0]
        gm_t = fg.GradManager().attach(tps_fg)
        opt_t = fg.optim.SGD(tps_fg, lr=lr)

        @fg.trace
        def fg_traced(xx: Any, yy: Any) -> Any:
            c1w, c1b, c2w, c2b, lw, lb = tps_fg
            with gm_t:
                h = fg.max_pool2d(fg.conv2d(xx, c1w, bias=c1b, padding=1).relu(), 2)
                h = fg.max_pool2d(fg.conv2d(h, c2w, bias=c2b, padding=1).relu(), 2)
                loss = fg.cross_entropy(h.reshape(batch, 32 * 7 * 7) @ lw + lb, yy)
                gm_t.backward(loss)
            opt_t.step()
            opt_t.zero_grad()
            return loss

        try:
            t = b.time(lambda: fg_traced(xb, yb), sync=lambda loss: loss.item(), warmup=3)
            b.add_time(W, "step", "ferrograd (traced)", t, "ms", 1e3, "fg.trace")
        except Exception as e:  # noqa: BLE001 - report and keep the run going
            b.skip(W, "ferrograd (traced)", f"{type(e).__name__}: {e}")

    if b.eng.torch is not None:
        torch = b.eng.torch
        F = torch.nn.functional
        tps = [b.tt(p, requires_grad=True) for p in params0]
        tx, ty = b.tt(x0), b.tt(y0)

        def t_step() -> Any:
            c1w, c1b, c2w, c2b, lw, lb = tps
            h = F.max_pool2d(torch.relu(F.conv2d(tx, c1w, c1b, padding=1)), 2)
            h = F.max_pool2d(torch.relu(F.conv2d(h, c2w, c2b, padding=1)), 2)
            loss = F.cross_entropy(h.reshape(batch, 32 * 7 * 7) @ lw + lb, ty)
            loss.backward()
            with torch.no_grad():
                for p in tps:
                    p -= lr * p.grad
                    p.grad = None
            return loss

        t = b.time(t_step, sync=lambda loss: loss.item(), warmup=3)
        b.add_time(W, "step", "torch", t, "ms", 1e3, "eager")

    if b.jax_ok:
        jax, jnp = b.eng.jax, b.eng.jnp
        lax = jax.lax
        dn = ("NCHW", "OIHW", "NCHW")

        def pool(h: Any) -> Any:
            return lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

        def loss_fn(params: list, x: Any, y: Any) -> Any:
            c1w, c1b, c2w, c2b, lw, lb = params
            h = lax.conv_general_dilated(x, c1w, (1, 1), ((1, 1), (1, 1)), dimension_numbers=dn)
            h = pool(jax.nn.relu(h + c1b[None, :, None, None]))
            h = lax.conv_general_dilated(h, c2w, (1, 1), ((1, 1), (1, 1)), dimension_numbers=dn)
            h = pool(jax.nn.relu(h + c2b[None, :, None, None]))
            logp = jax.nn.log_softmax(h.reshape(batch, 32 * 7 * 7) @ lw + lb, axis=-1)
            return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

        def step(params: list, x: Any, y: Any) -> tuple:
            loss, g = jax.value_and_grad(loss_fn)(params, x, y)
            return [p - lr * gi for p, gi in zip(params, g)], loss

        jx, jy = b.jax_put(x0), b.jax_put(y0.astype(np.int32))
        state = {"p": [b.jax_put(p) for p in params0]}
        jstep = jax.jit(step, donate_argnums=0)

        def j_step() -> Any:
            state["p"], loss = jstep(state["p"], jx, jy)
            return state["p"], loss

        t = b.time(j_step, sync=b.jax_sync, warmup=3)
        b.add_time(W, "step", "jax (jit)", t, "ms", 1e3, "whole step under jax.jit")

    finish_ratios(b.records)
    print_records(b.records, W)
    traced_summary(b, W, targets={"torch": 0.8})


# --------------------------------------------------------------------------------------------
# W4: memory bandwidth


def w4_bandwidth(b: Bench) -> None:
    W = "W4"
    np = b.np
    n = (8 if b.quick else 32) * 2**20
    cols = 4096
    rows = n // cols
    rng = np.random.default_rng(3)
    a0 = rng.standard_normal(n, dtype=np.float32)
    b0 = rng.standard_normal(n, dtype=np.float32)
    m0 = rng.standard_normal((rows, cols), dtype=np.float32)
    add_bytes = 3 * 4 * n  # read a, read b, write out
    sum_bytes = 4 * n + 4 * rows
    gb = 1e9
    print(
        f"[W4] bandwidth: c = a + b on {n // 2**20}M float32 elements "
        f"({add_bytes / gb:.2f} GB moved), a += b in place, and m.sum(axis=-1) on "
        f"({rows}, {cols}) float32 ({sum_bytes / gb:.3f} GB read); GB/s = bytes / median time"
    )
    C.flush()
    note_np = "numpy ufuncs are single-threaded"

    # ferrograd
    fa, fb, fm = b.fgt(a0), b.fgt(b0), b.fgt(m0)
    fi = b.fgt(a0)

    def fg_iadd() -> Any:
        nonlocal fi
        fi += fb
        return fi

    for metric, fn, nbytes in (
        ("add", lambda: fa + fb, add_bytes),
        ("add in-place", fg_iadd, add_bytes),
        ("row sum", lambda: fm.sum(axis=-1), sum_bytes),
    ):
        t = b.time(fn, sync=b.fg_sync, warmup=2)
        b.add_rate(W, metric, "ferrograd", t, "GB/s", nbytes / gb)
    # on a GPU the target is a share of the device-to-device copy bandwidth (read + write)
    copy_bytes = 2 * a0.nbytes
    if b.device != "cpu":
        t = b.time(lambda: fa.copy(), sync=b.fg_sync, warmup=2)
        b.add_rate(W, "copy d2d", "ferrograd", t, "GB/s", copy_bytes / gb, "copy kernel")

    if b.device == "cpu":
        na, nb, nm, ni = a0, b0, m0, a0.copy()
        for metric, fn, nbytes in (
            ("add", lambda: na + nb, add_bytes),
            ("add in-place", lambda: np.add(ni, nb, out=ni), add_bytes),
            ("row sum", lambda: nm.sum(axis=-1), sum_bytes),
        ):
            t = b.time(fn, warmup=2)
            b.add_rate(W, metric, "numpy", t, "GB/s", nbytes / gb, note_np)
    else:
        b.skip(W, "numpy", "numpy is CPU only")

    if b.eng.torch is not None:
        ta, tb, tm, ti = b.tt(a0), b.tt(b0), b.tt(m0), b.tt(a0)
        for metric, fn, nbytes in (
            ("add", lambda: ta + tb, add_bytes),
            ("add in-place", lambda: ti.add_(tb), add_bytes),
            ("row sum", lambda: tm.sum(dim=-1), sum_bytes),
        ):
            t = b.time(fn, sync=b.torch_sync, warmup=2)
            b.add_rate(W, metric, "torch", t, "GB/s", nbytes / gb)
        if b.device != "cpu":
            tdst = b.eng.torch.empty_like(ta)
            t = b.time(lambda: tdst.copy_(ta), sync=b.torch_sync, warmup=2)
            b.add_rate(W, "copy d2d", "torch", t, "GB/s", copy_bytes / gb, "memcpy d2d")

    finish_ratios(b.records)
    print_records(b.records, W)
    if b.device != "cpu":
        rates = {
            (r["engine"], r["metric"]): r["value"]
            for r in b.records
            if r["workload"] == W and r.get("value") is not None
        }
        ref_engine = "torch" if ("torch", "copy d2d") in rates else "ferrograd"
        ref = rates.get((ref_engine, "copy d2d"))
        for metric in ("add", "add in-place", "row sum"):
            got = rates.get(("ferrograd", metric))
            if ref and got:
                ok = got >= 0.8 * ref
                print(
                    f"  target ferrograd >= 80% of the d2d copy bandwidth ({ref_engine}, "
                    f"{ref:.0f} GB/s), {metric}: {100 * got / ref:.0f}% -> "
                    f"{'met' if ok else 'NOT met'}"
                )
    for r in b.records:
        if (
            r["workload"] == W
            and r["engine"] == "numpy"
            and r.get("ratio_vs_ferrograd") is not None
        ):
            ok = r["ratio_vs_ferrograd"] >= 0.8
            print(
                f"  target ferrograd >= 80% of numpy GB/s, {r['metric']}: "
                f"{100 * r['ratio_vs_ferrograd']:.0f}% -> {'met' if ok else 'NOT met'}"
            )
    print()


# --------------------------------------------------------------------------------------------
# W5: GEMM


def w5_gemm(b: Bench) -> None:
    W = "W5"
    np = b.np
    sizes = (1024, 2048) if b.quick else (1024, 4096)
    print(
        f"[W5] GEMM: float32 square matmul of sizes {', '.join(map(str, sizes))}, and "
        "x @ W.T as a Linear layer computes it; GFLOP/s = 2*m*n*k / median time"
    )
    C.flush()
    rng = np.random.default_rng(4)
    for s in sizes:
        a0 = rng.standard_normal((s, s), dtype=np.float32)
        b0 = rng.standard_normal((s, s), dtype=np.float32)
        work = 2 * s**3 / 1e9
        metric = f"matmul {s}^3"
        cap = 10 if s >= 4096 else None
        fa, fb = b.fgt(a0), b.fgt(b0)
        t = b.time(lambda x=fa, y=fb: x @ y, sync=b.fg_sync, warmup=1, max_repeats=cap)
        b.add_rate(W, metric, "ferrograd", t, "GFLOP/s", work)
        if b.device == "cpu":
            t = b.time(lambda x=a0, y=b0: x @ y, warmup=1, max_repeats=cap)
            b.add_rate(W, metric, "numpy", t, "GFLOP/s", work, C.numpy_blas())
        if b.eng.torch is not None:
            ta, tb = b.tt(a0), b.tt(b0)
            t = b.time(lambda x=ta, y=tb: x @ y, sync=b.torch_sync, warmup=1, max_repeats=cap)
            b.add_rate(W, metric, "torch", t, "GFLOP/s", work)
    # a Linear layer's products: x @ W^T with W stored (out, in), as nn.Linear keeps it, for
    # a small batch (8 rows) and the MLP step's batch (256 rows)
    for m, k, n in ((8, 1024, 1024), (256, 1024, 1024)):
        x0 = rng.standard_normal((m, k), dtype=np.float32)
        w0 = rng.standard_normal((n, k), dtype=np.float32)
        work = 2 * m * n * k / 1e9
        metric = f"x @ W.T {m}x{k}x{n}"
        fx, fw = b.fgt(x0), b.fgt(w0)
        t = b.time(lambda x=fx, w=fw: x @ w.T, sync=b.fg_sync, warmup=1)
        b.add_rate(W, metric, "ferrograd", t, "GFLOP/s", work)
        if b.device == "cpu":
            t = b.time(lambda x=x0, w=w0: x @ w.T, warmup=1)
            b.add_rate(W, metric, "numpy", t, "GFLOP/s", work, C.numpy_blas())
        if b.eng.torch is not None:
            tx, tw = b.tt(x0), b.tt(w0)
            t = b.time(lambda x=tx, w=tw: x @ w.T, sync=b.torch_sync, warmup=1)
            b.add_rate(W, metric, "torch", t, "GFLOP/s", work)
    finish_ratios(b.records)
    print_records(b.records, W)


# --------------------------------------------------------------------------------------------


def check_device(b: Bench) -> bool:
    """False (after a note) when ferrograd cannot use the requested device."""
    if b.device == "cpu":
        return True
    fg_cuda = getattr(b.fg, "cuda", None)
    try:
        available = fg_cuda.is_available() if hasattr(fg_cuda, "is_available") else None
    except Exception:  # noqa: BLE001 - an older build: fall back to creating a tensor
        available = None
    if available is False:
        print(
            f"note: ferrograd reports no usable {b.device} device (fg.cuda.is_available() is "
            "False); nothing to compare, exiting"
        )
        return False
    try:
        t = b.fg.tensor(b.np.zeros(4, dtype=b.np.float32), device=b.device)
        b.fg_sync(t + t)
    except Exception as e:  # noqa: BLE001 - any failure means "no such backend"
        print(
            f"note: ferrograd has no {b.device} backend in this build "
            f"({type(e).__name__}: {e}); nothing to compare, exiting"
        )
        return False
    torch = b.eng.torch
    if torch is not None and not torch.cuda.is_available():
        print("note: this PyTorch has no CUDA; PyTorch is skipped")
        b.eng.torch = None
    if b.jax_ok:
        try:
            b.eng.jax.devices("gpu")
        except RuntimeError:
            print("note: this JAX has no GPU backend; JAX is skipped")
            b.jax_ok = False
    return True


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    thread_note = C.configure_threads(args.threads, args.device)
    eng = C.import_engines(args.threads, want_torch=not args.no_torch, want_jax=not args.no_jax)
    only = (
        WORKLOADS
        if args.only is None
        else tuple(w.strip().upper() for w in args.only.split(",") if w.strip())
    )
    for w in only:
        if w not in WORKLOADS:
            raise SystemExit(f"--only: unknown workload {w!r}; expected some of {WORKLOADS}")

    b = Bench(args, eng)
    if not check_device(b):
        return 0
    b.torch_dev = args.device if eng.torch is not None else None
    meta = C.print_header(
        "ferrograd benchmarks (benches/run.py)",
        eng,
        args.threads,
        thread_note,
        args.device,
        {"mode": "quick" if args.quick else "full"},
    )

    start = time.perf_counter()
    fns = {"W1": w1_dispatch, "W2": w2_mlp, "W3": w3_conv, "W4": w4_bandwidth, "W5": w5_gemm}
    for w in only:
        t0 = time.perf_counter()
        try:
            fns[w](b)
        except Exception as e:  # noqa: BLE001 - report, keep the other workloads running
            traceback.print_exc()
            b.skip(w, "all", f"failed: {type(e).__name__}: {e}")
        print(f"  ({w} took {time.perf_counter() - t0:.1f} s)\n")
    total = time.perf_counter() - start

    finish_ratios(b.records)
    print("== summary: ferrograd against each peer (median; > 2x slower is flagged)")
    rows = []
    for r in b.records:
        if r.get("value") is None or r["engine"].startswith("ferrograd"):
            continue
        sd = r.get("ferrograd_slowdown")
        rows.append(
            [
                r["workload"],
                r["metric"],
                r["engine"],
                C.fmt(r.get("ratio_vs_ferrograd")),
                r["unit"],
                verdict(sd),
                "<-- slow" if sd is not None and sd > 2 else "",
            ]
        )
    if rows:
        C.print_table(
            ["workload", "metric", "peer", "fg/peer", "unit", "ferrograd is", ""], rows, right={3}
        )
    skipped = [r for r in b.records if r.get("skipped")]
    for r in skipped:
        print(f"skipped: {r['workload']} {r['engine']}: {r['skipped']}")
    traced = [r for r in b.records if r.get("traced_ratios")]
    if traced:
        print(
            "== traced steps (fg.trace): traced time / each engine's time (< 1: traced is faster)"
        )
        C.print_table(
            ["workload", "metric", "vs", "traced/other"],
            [
                [r["workload"], r["metric"], eng_name, C.fmt(ratio)]
                for r in traced
                for eng_name, ratio in r["traced_ratios"].items()
            ],
            right={3},
        )
    if eng.jax is not None and ("W1" in only or "W2" in only):
        print("note: JAX rows marked eager run op by op; JAX's intended fast path is jax.jit")
    print(f"total time {total:.1f} s")
    C.warn_if_busy_after(args.threads, meta)

    path = args.json or os.path.join(
        tempfile.gettempdir(),
        "ferrograd-bench-quick.json" if args.quick else "ferrograd-bench.json",
    )
    meta["total_seconds"] = total
    C.write_json(path, {"meta": meta, "records": b.records})
    return 0


if __name__ == "__main__":
    sys.exit(main())
