"""A small ResNet with batch normalisation on the 8x8 digits shipped in examples/data,
written as a PyTorch program (``loss.backward()``, ``optim.SGD`` with momentum and weight
decay, ``lr_scheduler.OneCycleLR``), with train and eval modes.

    python examples/resnet_digits.py [--epochs 8] [--device cuda] [--progress] [--plot out.png]
                                     [--stop 4 --save ck.safetensors] [--resume ck.safetensors]

Prints the training loss per epoch (it falls) and the held-out accuracy in eval mode (running
batch-norm statistics), about 97-99% after a few epochs. ``--stop``/``--save`` and
``--resume`` continue the same run (model, batch-norm statistics, optimizer, schedule and
the curves so far): the epochs after the resume print what one uninterrupted run prints.
"""

from __future__ import annotations

import argparse
import gzip
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

HERE = os.path.dirname(os.path.abspath(__file__))


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    with gzip.open(os.path.join(HERE, "data", "digits.csv.gz"), "rt") as f:
        data = np.loadtxt(f, delimiter=",")
    x = (data[:, :64] / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    return x, data[:, 64].astype(np.int64)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: fg.Tensor) -> fg.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, width: int = 16, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()
        )
        self.layers = nn.Sequential(
            BasicBlock(width, width, 1),
            BasicBlock(width, 2 * width, 2),
            BasicBlock(2 * width, 2 * width, 1),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2 * width, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: fg.Tensor) -> fg.Tensor:
        return self.fc(self.pool(self.layers(self.stem(x))).flatten(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--save", help="write a checkpoint here at the end")
    ap.add_argument(
        "--stop", type=int, help="stop after this many of the --epochs (then --save, --resume)"
    )
    ap.add_argument("--resume", help="continue from this checkpoint (made with the same --epochs)")
    ap.add_argument("--progress", action="store_true", help="a progress bar (tqdm if installed)")
    ap.add_argument(
        "--plot", help="write loss and accuracy per epoch to this PNG (needs matplotlib)"
    )
    args = ap.parse_args()

    fg.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    x, y = load_digits()
    order = rng.permutation(len(x))
    n_test = len(x) // 5
    test, train = order[:n_test], order[n_test:]
    model = ResNet().to(args.device)
    opt = fg.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    steps = args.epochs * -(-len(train) // args.batch)
    sched = fg.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=steps)
    start = 0
    history: dict[str, list[float]] = {"training loss": [], "held-out accuracy": []}
    if args.resume:
        ck = fg.load(args.resume, map_location=args.device)
        planned = int(ck.get("epochs", ck["epoch"]))
        if planned != args.epochs:
            # the one-cycle schedule spans the planned epochs: another count is another run
            sys.exit(
                f"--resume: {args.resume} is a run of --epochs {planned} (its learning-rate "
                f"schedule spans them); resume it with --epochs {planned}"
            )
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        sched.load_state_dict(ck["sched"])
        start = int(ck["epoch"])
        for k, v in ck.get("history", {}).items():
            history[k] = list(v)
        print(f"resumed after epoch {start}")

    def evaluate() -> float:
        model.eval()
        correct = 0
        with fg.no_grad():
            for i in range(0, n_test, 256):
                idx = test[i : i + 256]
                logits = model(fg.tensor(x[idx], device=args.device))
                correct += int((logits.argmax(1).numpy() == y[idx]).sum())
        model.train()
        return correct / n_test

    print(f"ResNet: {sum(p.numel() for p in model.parameters()):,} parameters")
    stop = args.epochs if args.stop is None else min(args.stop, args.epochs)
    for epoch in range(start, stop):
        t0 = time.perf_counter()
        perm = np.random.default_rng(args.seed + epoch).permutation(train)
        total, batches = 0.0, 0
        for i in progress(range(0, len(perm), args.batch), args.progress, "batches"):
            idx = perm[i : i + args.batch]
            if len(idx) < 2:
                continue  # batch norm needs more than one sample per channel
            xb = fg.tensor(x[idx], device=args.device)
            yb = fg.tensor(y[idx], device=args.device)
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item()
            batches += 1
        accuracy = evaluate()
        history["training loss"].append(total / batches)
        history["held-out accuracy"].append(accuracy)
        print(
            f"epoch {epoch + 1}: loss {total / batches:.4f}, held-out accuracy "
            f"{accuracy:.3f} ({time.perf_counter() - t0:.1f} s)"
        )
    if args.save:
        fg.save(
            {
                "model": model.state_dict(),
                "opt": opt.state_dict(),
                "sched": sched.state_dict(),
                "epoch": max(stop, start),
                "epochs": args.epochs,
                "history": history,
            },
            args.save,
        )
        print(f"saved {args.save}")
    if args.plot:
        write_plot(args.plot, history, "epoch")


if __name__ == "__main__":
    main()
