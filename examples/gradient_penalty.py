"""WGAN-GP on a 2-D ring of Gaussians: the critic's loss includes the gradient penalty
``(||d critic(x_hat) / d x_hat|| - 1)^2``, a second-order term differentiated through
nested GradManagers.

    python examples/gradient_penalty.py [--steps 300]
"""

from __future__ import annotations

import argparse

import ferrograd as fg
import numpy as np


def ring(rng: np.random.Generator, n: int) -> np.ndarray:
    centers = np.stack([np.cos(np.arange(8) * np.pi / 4), np.sin(np.arange(8) * np.pi / 4)], 1)
    return (centers[rng.integers(0, 8, n)] * 2 + 0.05 * rng.normal(size=(n, 2))).astype("f4")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--gp", type=float, default=10.0)
    args = parser.parse_args()
    rng = np.random.default_rng(0)

    critic = fg.nn.mlp([2, 64, 64, 1], activation=fg.nn.Tanh, rng=rng)
    gen = fg.nn.mlp([4, 64, 64, 2], activation=fg.nn.Tanh, rng=rng)
    c_opt = fg.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.5, 0.9))
    g_opt = fg.optim.Adam(gen.parameters(), lr=1e-3, betas=(0.5, 0.9))
    gm_c = fg.GradManager().attach(critic.parameters())
    gm_g = fg.GradManager().attach(gen.parameters())

    for step in range(args.steps):
        for _ in range(5):
            real = fg.tensor(ring(rng, args.batch))
            fake = gen(fg.tensor(rng.normal(size=(args.batch, 4)).astype("f4"))).detach()
            eps = fg.tensor(rng.uniform(size=(args.batch, 1)).astype("f4"))
            x_hat = (eps * real + (1 - eps) * fake).detach()
            with gm_c:
                # the inner manager differentiates the critic w.r.t. its input; the outer one
                # records that backward, so the penalty's gradient reaches the weights
                with fg.GradManager().attach(x_hat):
                    d_hat = critic(x_hat).sum()
                    g = fg.grad(d_hat, x_hat, create_graph=True)
                norm = ((g * g).sum(axis=1) + 1e-12).sqrt()
                penalty = ((norm - 1.0) ** 2).mean()
                wdist = critic(real).mean() - critic(fake).mean()
                loss = -wdist + args.gp * penalty
                gm_c.backward(loss)
            c_opt.step()
            c_opt.zero_grad()
        with gm_g:
            fake = gen(fg.tensor(rng.normal(size=(args.batch, 4)).astype("f4")))
            g_loss = -critic(fake).mean()
            gm_g.backward(g_loss)
        g_opt.step()
        g_opt.zero_grad()
        critic.zero_grad()
        if step % 50 == 0 or step == args.steps - 1:
            print(
                f"step {step:4d}  wasserstein estimate {wdist.item():.3f}  "
                f"penalty {penalty.item():.4f}  mean |grad| {norm.mean().item():.3f}"
            )


if __name__ == "__main__":
    main()
