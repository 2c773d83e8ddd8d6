#!/usr/bin/env python3
"""The transformer's NN ops, forward + backward, ferrograd against PyTorch in one run.

    python benches/nn_ops.py [--device cpu|cuda] [--threads N] [--repeats R]
                             [--batch 32 --seq 256 --width 512]

  layer_norm      F.layer_norm over the last axis of (batch, seq, width), weight and bias;
                  backward from a fixed upstream gradient into input, weight and bias
  softmax_ce      F.cross_entropy of (batch * seq, width) logits against int64 labels
                  (mean); backward into the logits
  attention       F.scaled_dot_product_attention, causal, (batch, width / 64 heads, seq, 64);
                  backward from a fixed upstream gradient into q, k and v

Times are milliseconds per forward+backward (median and best of the repeats); the ratio is
ferrograd's median over PyTorch's (below 1: ferrograd is faster). The CPU model and its
instruction sets are printed with the figures: compare only runs on the same machine. With
`--device cuda` both engines run on the GPU and each repeat ends with a device sync.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C


def cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    keep = ["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16"]
                    return " ".join(k for k in keep if k in flags) or "(none of avx2/avx512)"
    except OSError:
        pass
    return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--width", type=int, default=512)
    args = ap.parse_args()
    note = C.configure_threads(args.threads)
    eng = C.import_engines(args.threads, want_jax=False)
    np = eng.np
    fg = eng.fg
    torch = eng.torch
    if args.device == "cuda" and torch is not None and not torch.cuda.is_available():
        print("note: this PyTorch has no CUDA: ferrograd only")
        torch = None
    F = fg.nn.functional
    C.print_header(
        "NN ops, forward + backward",
        eng,
        args.threads,
        note,
        args.device,
        {"instruction sets": cpu_flags(), "shape": f"{args.batch}x{args.seq}x{args.width}"},
    )
    B, S, W = args.batch, args.seq, args.width
    H = max(1, W // 64)
    rng = np.random.default_rng(0)
    f32 = np.float32

    def arr(*shape):
        return rng.standard_normal(shape).astype(f32)

    x, dy, w, b = arr(B, S, W), arr(B, S, W), arr(W), arr(W)
    logits, labels = arr(B * S, W), rng.integers(0, W, B * S)
    q, k, v, do = (arr(B, H, S, W // H) for _ in range(4))
    dev = args.device

    def fgt(a):
        return fg.tensor(a, device=dev)

    def tht(a, grad=False):
        return torch.tensor(a, device=dev).requires_grad_(grad)

    def fg_sync():
        if dev == "cuda":
            fg.cuda.synchronize()

    def torch_sync():
        if dev == "cuda":
            torch.cuda.synchronize()

    def fg_case(name):
        if name == "layer_norm":
            xs = [fgt(a) for a in (x, w, b)]
            up = fgt(dy)

            def run():
                key = fg.GradKey()
                for t in xs:
                    key.attach(t)
                y = F.layer_norm(xs[0], (W,), xs[1], xs[2])
                key.backward(y, up)
                for t in xs:
                    t.grad = None
                fg_sync()

        elif name == "softmax_ce":
            xs = [fgt(logits)]
            lab = fgt(labels)

            def run():
                key = fg.GradKey()
                key.attach(xs[0])
                key.backward(F.cross_entropy(xs[0], lab))
                xs[0].grad = None
                fg_sync()

        else:
            xs = [fgt(a) for a in (q, k, v)]
            up = fgt(do)

            def run():
                key = fg.GradKey()
                for t in xs:
                    key.attach(t)
                y = F.scaled_dot_product_attention(*xs, is_causal=True)
                key.backward(y, up)
                for t in xs:
                    t.grad = None
                fg_sync()

        return run

    def torch_case(name):
        T = torch.nn.functional
        if name == "layer_norm":
            xs = [tht(a, True) for a in (x, w, b)]
            up = tht(dy)

            def run():
                T.layer_norm(xs[0], (W,), xs[1], xs[2]).backward(up)
                for t in xs:
                    t.grad = None
                torch_sync()

        elif name == "softmax_ce":
            xs = [tht(logits, True)]
            lab = tht(labels)

            def run():
                T.cross_entropy(xs[0], lab).backward()
                xs[0].grad = None
                torch_sync()

        else:
            xs = [tht(a, True) for a in (q, k, v)]
            up = tht(do)

            def run():
                T.scaled_dot_product_attention(*xs, is_causal=True).backward(up)
                for t in xs:
                    t.grad = None
                torch_sync()

        return run

    print(f"{'op':<12} {'ferrograd ms':>14} {'best':>8} {'torch ms':>10} {'best':>8} {'ratio':>7}")
    for name in ("layer_norm", "softmax_ce", "attention"):
        tf = C.measure(fg_case(name), args.warmup, args.repeats)
        tt = C.measure(torch_case(name), args.warmup, args.repeats) if torch else None
        ratio = tf.median / tt.median if tt else None
        print(
            f"{name:<12} {tf.median * 1e3:>14.2f} {tf.min * 1e3:>8.2f} "
            f"{(tt.median * 1e3 if tt else float('nan')):>10.2f} "
            f"{(tt.min * 1e3 if tt else float('nan')):>8.2f} {C.fmt(ratio):>7}"
        )


if __name__ == "__main__":
    main()
