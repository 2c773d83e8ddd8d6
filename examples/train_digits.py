"""Train a small MLP on the 8x8 digits shipped in examples/data, with ferrograd.

    python examples/train_digits.py [--epochs 30]

Prints the training loss per epoch (it falls) and the held-out accuracy.
"""

from __future__ import annotations

import argparse
import gzip
import os
import time

import numpy as np

import ferrograd as fg

HERE = os.path.dirname(os.path.abspath(__file__))


def load_digits():
    with gzip.open(os.path.join(HERE, "data", "digits.csv.gz"), "rt") as f:
        data = np.loadtxt(f, delimiter=",")
    x = (data[:, :64] / 16.0).astype(np.float32)
    y = data[:, 64].astype(np.int64)
    return x, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    x, y = load_digits()
    order = rng.permutation(len(x))
    x, y = x[order], y[order]
    x_train, y_train, x_test, y_test = x[:1500], y[:1500], x[1500:], y[1500:]

    def init(fan_in: int, fan_out: int) -> fg.Tensor:
        bound = np.sqrt(6.0 / (fan_in + fan_out))
        return fg.tensor(rng.uniform(-bound, bound, (fan_in, fan_out)).astype(np.float32))

    params = {
        "w1": init(64, 128),
        "b1": fg.zeros(128),
        "w2": init(128, 10),
        "b2": fg.zeros(10),
    }

    def forward(p, xb):
        h = fg.relu(xb @ p["w1"] + p["b1"])
        return h @ p["w2"] + p["b2"]

    start = time.perf_counter()
    for epoch in range(args.epochs):
        perm = rng.permutation(len(x_train))
        total, batches = 0.0, 0
        for i in range(0, len(perm), args.batch):
            idx = perm[i : i + args.batch]
            xb, yb = fg.tensor(x_train[idx]), fg.tensor(y_train[idx])
            key = fg.GradKey("step")
            for t in params.values():
                key.attach(t)
            loss = fg.cross_entropy(forward(params, xb), yb)
            key.backward(loss)
            params = {k: t - args.lr * t.grad for k, t in params.items()}
            total += loss.item()
            batches += 1
        if epoch % 5 == 0 or epoch == args.epochs - 1:
            print(f"epoch {epoch:3d}  train loss {total / batches:.4f}")

    logits = forward(params, fg.tensor(x_test)).numpy()
    accuracy = float((logits.argmax(axis=1) == y_test).mean())
    elapsed = time.perf_counter() - start
    print(f"test accuracy {accuracy:.3f} on {len(y_test)} held-out digits ({elapsed:.1f} s)")


if __name__ == "__main__":
    main()
