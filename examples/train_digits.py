"""Train a small MLP on the 8x8 digits shipped in examples/data, with ferrograd.

    python examples/train_digits.py [--epochs 30] [--device cuda] [--trace]
    mpiexec -n 2 python -m mpi4py examples/train_digits.py --distributed

Prints the training loss per epoch (it falls) and the held-out accuracy. With --trace the
training step is traced (``fg.trace``): its first call for each batch shape records the graph
and later calls run it whole in Rust. With --distributed, under ``mpiexec``, every rank trains
on its shard of each batch and the gradients are averaged over the ranks inside backward
(``fg.distributed.make_allreduce_cb``), so the ranks keep identical weights.
"""

from __future__ import annotations

import argparse
import gzip
import os
import time

import ferrograd as fg
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def load_digits():
    with gzip.open(os.path.join(HERE, "data", "digits.csv.gz"), "rt") as f:
        data = np.loadtxt(f, delimiter=",")
    x = (data[:, :64] / 16.0).astype(np.float32)
    y = data[:, 64].astype(np.int64)
    return x, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help='"cpu", "cuda" or "cuda:N"')
    parser.add_argument(
        "--trace", action="store_true", help="trace the training step into a graph (fg.trace)"
    )
    parser.add_argument(
        "--distributed",
        action="store_true",
        help="data-parallel over the MPI ranks started by mpiexec (pip install ferrograd[mpi])",
    )
    args = parser.parse_args()
    rank, world = 0, 1
    if args.distributed:
        fg.distributed.init_process_group("mpi")
        rank, world = fg.distributed.get_rank(), fg.distributed.get_world_size()
    say = print if rank == 0 else (lambda *a, **k: None)

    rng = np.random.default_rng(args.seed)
    x, y = load_digits()
    order = rng.permutation(len(x))
    x, y = x[order], y[order]
    x_train, y_train, x_test, y_test = x[:1500], y[:1500], x[1500:], y[1500:]

    model = fg.nn.Sequential(
        fg.nn.Linear(64, 128, rng=rng),
        fg.nn.ReLU(),
        fg.nn.Linear(128, 10, rng=rng),
    ).to(args.device)
    opt = fg.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    if args.distributed:
        fg.distributed.broadcast_parameters(model)  # the same start on every rank
        gm = fg.GradManager().attach(
            model.parameters(), callbacks=fg.distributed.make_allreduce_cb("mean")
        )
    else:
        gm = fg.GradManager().attach(model.parameters())

    def step(xb, yb):
        with gm:
            loss = fg.cross_entropy(model(xb), yb)
            gm.backward(loss)
        opt.step()
        opt.zero_grad()
        return loss

    if args.trace:
        # one graph per batch shape (the last batch of an epoch is smaller)
        step = fg.trace(step)

    start = time.perf_counter()
    for epoch in range(args.epochs):
        # the same permutation on every rank (one seed); each rank takes its part of a batch
        perm = rng.permutation(len(x_train))
        total, batches = 0.0, 0
        for i in range(0, len(perm), args.batch):
            idx = perm[i : i + args.batch]
            if args.distributed:
                idx = idx[fg.distributed.shard(len(idx), rank, world)]
            xb = fg.tensor(x_train[idx], device=args.device)
            yb = fg.tensor(y_train[idx], device=args.device)
            loss = step(xb, yb)
            total += loss.item()
            batches += 1
        if args.distributed:  # the mean over the ranks
            mean = fg.tensor([total / batches])
            fg.distributed.all_reduce(mean, "mean")
            total, batches = mean.item(), 1
        if epoch % 5 == 0 or epoch == args.epochs - 1:
            say(f"epoch {epoch:3d}  train loss {total / batches:.4f}")

    logits = model(fg.tensor(x_test, device=args.device)).numpy()
    accuracy = float((logits.argmax(axis=1) == y_test).mean())
    elapsed = time.perf_counter() - start
    say(f"test accuracy {accuracy:.3f} on {len(y_test)} held-out digits ({elapsed:.1f} s)")
    if args.distributed:
        # every rank holds the same weights: compare a checksum of them
        sums = fg.distributed.all_gather(fg.tensor([float(p.sum()) for p in model.parameters()]))
        same = all(np.array_equal(s.numpy(), sums[0].numpy()) for s in sums)
        say(f"{world} ranks, identical weights on every rank: {same}")
        fg.distributed.destroy_process_group()
    if args.trace:
        report = step.memory_report()
        say(
            f"traced: {step.cache_size} graphs, {len(step.graph)} nodes, "
            f"{report['fused_nodes']} ops in {report['fused_chains']} fused chains, "
            f"planned peak {report['planned_peak_bytes'] / 2**20:.2f} MiB"
        )


if __name__ == "__main__":
    main()
