"""A small character-level GPT trained on the Python standard library's own source files
(every Python installation has them: no download).

    python examples/char_gpt.py [--steps 300] [--device cuda] [--trace]
                                [--stop 150 --save ck.safetensors] [--resume ck.safetensors]
                                [--plot loss.png] [--progress]

The model is PyTorch's usual GPT, written with ferrograd's PyTorch-style API: token and
position ``nn.Embedding``, pre-norm blocks (``nn.LayerNorm``, causal
``F.scaled_dot_product_attention``, ``nn.GELU`` MLP, ``nn.Dropout``), a head tied to the
token embedding; ``optim.AdamW`` with weight decay on matrices only, a warm-up plus cosine
schedule (``lr_scheduler.LambdaLR``), ``nn.utils.clip_grad_norm_``. Prints the training and
validation loss (it falls from ln(vocab) ~ 4.5) and a sample of generated text. ``--save`` and
``--resume`` continue the same loss curve (model, optimizer, schedule and data position).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
from ferrograd import nn

# the examples' shared helpers beside this file (also when run through runpy or from elsewhere)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _cli import progress, write_plot


def corpus(max_chars: int) -> str:
    """Text from the standard library's ``.py`` files, in a fixed order."""
    root = os.path.dirname(os.__file__)
    parts: list[str] = []
    total = 0
    for name in sorted(os.listdir(root)):
        if not name.endswith(".py"):
            continue
        try:
            with open(os.path.join(root, name), encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        parts.append(text)
        total += len(text)
        if total >= max_chars:
            break
    text = "".join(parts)[:max_chars]
    if not text:
        raise SystemExit(f"no Python sources found in {root}")
    return text


class Block(nn.Module):
    def __init__(self, d: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: fg.Tensor) -> fg.Tensor:
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.reshape(b, t, h, d // h).permute(0, 2, 1, 3) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.permute(0, 2, 1, 3).reshape(b, t, d)
        x = x + self.drop(self.proj(y))
        return x + self.drop(self.mlp(self.ln2(x)))


class GPT(nn.Module):
    def __init__(
        self, vocab: int, ctx: int, d: int, layers: int, heads: int, dropout: float
    ) -> None:
        super().__init__()
        self.ctx = ctx
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(d, heads, dropout) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied: the same (vocab, d) layout
        # positions 0..ctx-1, made once (moved by .to() with the model)
        self.register_buffer("pos", fg.arange(ctx), persistent=False)
        for name, p in self.named_parameters():
            if p.ndim == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx: fg.Tensor) -> fg.Tensor:
        t = idx.shape[1]
        x = self.drop(self.wte(idx) + self.wpe(self.pos[:t]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--ctx", type=int, default=64)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--chars", type=int, default=400_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--trace", action="store_true", help="trace the training step (fg.trace)")
    ap.add_argument("--save", help="write a checkpoint here at the end")
    ap.add_argument(
        "--stop", type=int, help="stop after this many of the --steps (then --save, --resume)"
    )
    ap.add_argument("--resume", help="continue from this checkpoint")
    ap.add_argument("--plot", help="write the loss curve to this PNG (needs matplotlib)")
    ap.add_argument("--sample", type=int, default=200, help="characters to generate at the end")
    ap.add_argument("--verbose", action="store_true", help="print the losses of every step")
    ap.add_argument("--progress", action="store_true", help="a progress bar (tqdm if installed)")
    args = ap.parse_args()

    fg.manual_seed(args.seed)
    text = corpus(args.chars)
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = np.array([stoi[c] for c in text], dtype=np.int64)
    split = int(0.9 * len(data))
    train, val = data[:split], data[split:]
    vocab = len(chars)
    print(f"corpus: {len(text):,} characters of the standard library, vocabulary {vocab}")

    model = GPT(vocab, args.ctx, args.width, args.layers, args.heads, args.dropout)
    model.to(args.device)
    decay = [p for _, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for _, p in model.named_parameters() if p.ndim < 2]
    opt = fg.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr,
        betas=(0.9, 0.95),
    )
    warmup = max(1, args.steps // 10)

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        pct = (step - warmup) / max(1, args.steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(pct, 1.0)))

    sched = fg.optim.lr_scheduler.LambdaLR(opt, schedule)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params:,} parameters, {args.layers} layers, width {args.width}")

    rng = np.random.default_rng(args.seed)
    start, history = 0, []
    if args.resume:
        ck = fg.load(args.resume, map_location=args.device)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        sched.load_state_dict(ck["sched"])
        start, history = ck["step"], ck["history"]
        rng.bit_generator.state = _rng_state(ck["rng"])
        fg.random.set_rng_state(ck["fg_rng"])  # the dropout masks continue too
        print(f"resumed at step {start}")

    gm = fg.GradManager().attach(model.parameters())

    def batch(src: np.ndarray, g: np.random.Generator) -> tuple[fg.Tensor, fg.Tensor]:
        ix = g.integers(0, len(src) - args.ctx - 1, args.batch)
        x = np.stack([src[i : i + args.ctx] for i in ix])
        y = np.stack([src[i + 1 : i + args.ctx + 1] for i in ix])
        return fg.tensor(x, device=args.device), fg.tensor(y, device=args.device)

    # the validation loss is measured on the same held-out batches every time, drawn once from
    # a generator of their own (so measuring it never moves the training batches' stream)
    val_rng = np.random.default_rng([args.seed, 1])
    val_batches = [batch(val, val_rng) for _ in range(4)]

    def val_loss() -> float:
        model.eval()
        with fg.no_grad():
            total = sum(
                float(F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1)).item())
                for x, y in val_batches
            )
        model.train()
        return total / len(val_batches)

    def step(x: fg.Tensor, y: fg.Tensor) -> fg.Tensor:
        with gm:
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
            gm.backward(loss)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        return loss

    if args.trace:
        # (dropout inside the traced step draws a fresh mask on every run)
        step = fg.trace(step)

    t0 = time.perf_counter()
    model.train()
    stop = args.steps if args.stop is None else min(args.stop, args.steps)
    for i in progress(range(start, stop), args.progress):
        loss = step(*batch(train, rng))
        sched.step()
        history.append(float(loss.item()))
        if i % max(1, args.steps // 10) == 0 or i == stop - 1 or args.verbose:
            vl = val_loss()
            print(
                f"step {i:5d}  train loss {history[-1]:.3f}  val loss {vl:.3f}  "
                f"lr {sched.get_last_lr()[0]:.2e}"
            )
    dt = time.perf_counter() - t0
    done = stop - start
    if done > 0:
        print(f"{done} steps in {dt:.1f} s ({1e3 * dt / done:.1f} ms per step)")

    if args.save:
        fg.save(
            {
                "model": model.state_dict(),
                "opt": opt.state_dict(),
                "sched": sched.state_dict(),
                "step": stop,
                "history": history,
                "rng": _rng_json(rng.bit_generator.state),
                "fg_rng": fg.random.get_rng_state(),
            },
            args.save,
        )
        print(f"saved {args.save}")

    if args.sample > 0:
        model.eval()
        idx = [stoi["\n"]] if "\n" in stoi else [0]
        with fg.no_grad():
            for _ in range(args.sample):
                ctx = fg.tensor([idx[-args.ctx :]], device=args.device)
                probs = F.softmax(model(ctx)[0, -1] / 0.8, -1)
                idx.append(int(fg.multinomial(probs.to("cpu"), 1).item()))
        print("sample:\n" + "".join(chars[i] for i in idx))

    if args.plot:
        write_plot(args.plot, {"training loss": history}, "step")


def _rng_json(state: dict) -> dict:
    """numpy's generator state with its big ints as strings (checkpoint metadata is JSON)."""
    s = state["state"]
    return {
        "bit_generator": state["bit_generator"],
        "state": str(s["state"]),
        "inc": str(s["inc"]),
        "has_uint32": state["has_uint32"],
        "uinteger": state["uinteger"],
    }


def _rng_state(j: dict) -> dict:
    return {
        "bit_generator": j["bit_generator"],
        "state": {"state": int(j["state"]), "inc": int(j["inc"])},
        "has_uint32": j["has_uint32"],
        "uinteger": j["uinteger"],
    }


if __name__ == "__main__":
    main()
