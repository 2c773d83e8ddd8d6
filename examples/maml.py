"""MAML on sine-wave regression: an inner SGD step taken with ``create_graph=True``, so the
meta-gradient flows through the adapted weights (a second-order derivative).

    python examples/maml.py [--iterations 500]
"""

from __future__ import annotations

import argparse

import ferrograd as fg
import numpy as np


def task(rng: np.random.Generator):
    amp, phase = rng.uniform(0.1, 5.0), rng.uniform(0, np.pi)

    def sample(n: int):
        x = rng.uniform(-5, 5, size=(n, 1))
        return fg.tensor(x.astype("f4")), fg.tensor((amp * np.sin(x + phase)).astype("f4"))

    return sample


def forward(params, x):
    w1, b1, w2, b2, w3, b3 = params
    h = (x @ w1 + b1).relu()
    h = (h @ w2 + b2).relu()
    return h @ w3 + b3


def mse(pred, y):
    return ((pred - y) ** 2).mean()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--inner-lr", type=float, default=0.01)
    args = parser.parse_args()
    rng = np.random.default_rng(0)

    sizes = [(1, 40), (40, 40), (40, 1)]
    params = []
    for a, b in sizes:
        params.append(fg.nn.Parameter(rng.normal(0, np.sqrt(2 / a), (a, b)).astype("f4")))
        params.append(fg.nn.Parameter(np.zeros(b, "f4")))
    opt = fg.optim.Adam(params, lr=1e-3)
    meta = fg.GradManager().attach(params)

    for it in range(args.iterations):
        with meta:
            total = None
            for _ in range(args.tasks):
                sample = task(rng)
                xs, ys = sample(10)
                xq, yq = sample(10)
                with fg.GradManager().attach(params):
                    inner_loss = mse(forward(params, xs), ys)
                    grads = fg.grad(inner_loss, params, create_graph=True)
                adapted = [p - args.inner_lr * g for p, g in zip(params, grads)]
                q = mse(forward(adapted, xq), yq)
                total = q if total is None else total + q
            meta_loss = total / args.tasks
            meta.backward(meta_loss)
        opt.step()
        opt.zero_grad()
        if it % 100 == 0 or it == args.iterations - 1:
            print(f"iteration {it:4d}  post-adaptation query loss {meta_loss.item():.3f}")


if __name__ == "__main__":
    main()
