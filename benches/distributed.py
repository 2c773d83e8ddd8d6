#!/usr/bin/env python3
"""Data-parallel training over MPI: ferrograd.distributed against raw mpi4py and
torch.distributed (gloo), in one run, as ratios.

    python benches/distributed.py [--quick] [--json out.json]

Starts the ranks itself (``mpiexec -n 2`` and ``-n 1``, one thread per rank) and prints:

* allreduce   algorithm bandwidth (bytes of the buffer / time of one in-place sum-allreduce,
              float32, 2 ranks) at 1, 16 and 100 MB: ferrograd's ``all_reduce`` on a tensor,
              mpi4py's ``Allreduce`` on a numpy array (the floor: ferrograd's overhead over MPI
              is the ratio), torch.distributed with gloo on a torch tensor when torch is there.
* exposed     an MLP with 11 MB of float32 gradients, 64 samples per rank: forward+backward
              with ``make_allreduce_cb("mean")`` minus without, as a share of backward's time
              (the communication that overlapping did not hide).
* scaling     a whole training step (forward, backward with the allreduce callback, SGD) with
              64 samples per rank: samples per second with 2 ranks x 1 thread over 1 rank x 1
              thread.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import _common as C


def _env() -> dict:
    env = dict(os.environ)
    env.update(
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMPI_MCA_btl="^ofi",
        PRTE_MCA_rmaps_default_mapping_policy=":oversubscribe",
    )
    for var in ("RAYON_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    return env


def _mpiexec() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.path.exists(here) else "mpiexec"


def launch(n: int, part: str, quick: bool) -> dict:
    cmd = [_mpiexec(), "-n", str(n), sys.executable, "-m", "mpi4py", __file__, "--part", part]
    if quick:
        cmd.append("--quick")
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=900, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")
    line = [x for x in done.stdout.splitlines() if x.startswith("{")][-1]
    return json.loads(line)


# -- the ranks' side ---------------------------------------------------------------------------


def median_times(fns: list, comm, reps: int, warmup: int = 3) -> list[float]:
    """Median seconds of each callable, run in turn (so drifts of the machine hit all of
    them alike); each rep starts after a barrier, and the slowest rank's median counts."""
    from mpi4py import MPI

    for _ in range(warmup):
        for fn in fns:
            fn()
    ts: list[list[float]] = [[] for _ in fns]
    for _ in range(reps):
        for fn, t in zip(fns, ts):
            comm.Barrier()
            t0 = time.perf_counter()
            fn()
            t.append(time.perf_counter() - t0)
    return [comm.allreduce(sorted(t)[len(t) // 2], op=MPI.MAX) for t in ts]


def part_allreduce(quick: bool) -> dict:
    import ferrograd as fg
    import ferrograd.distributed as dist
    import numpy as np
    from mpi4py import MPI

    dist.init_process_group()
    comm = MPI.COMM_WORLD
    torch = None
    try:
        import torch
        import torch.distributed as tdist

        port = comm.bcast(29500 + (os.getpid() % 1000) if comm.rank == 0 else None)
        tdist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=comm.rank, world_size=comm.size
        )
        torch.set_num_threads(1)
    except Exception as e:  # noqa: BLE001 - torch is optional here
        torch = None
        note = f"torch.distributed unavailable: {e}"
    else:
        note = f"torch {torch.__version__} gloo"
    rows = []
    if torch is not None:  # gloo's threads idle from here on
        tdist.barrier()
    for mb in (1, 16, 100):
        n = mb * 2**20 // 4
        reps = 5 if quick else (20 if mb < 100 else 8)
        a = np.ones(n, np.float32)
        t = fg.ones(n, dtype=fg.float32)
        # ferrograd and mpi4py in turn; gloo's own threads would disturb them, so apart
        t_fg, t_mpi = median_times(
            [
                lambda t=t: dist.all_reduce(t),
                lambda a=a: comm.Allreduce(MPI.IN_PLACE, a, op=MPI.SUM),
            ],
            comm,
            reps,
        )
        t_torch = None
        if torch is not None:
            tt = torch.ones(n, dtype=torch.float32)
            (t_torch,) = median_times([lambda tt=tt: tdist.all_reduce(tt)], comm, reps)
        rows.append({"mb": mb, "ferrograd_s": t_fg, "mpi4py_s": t_mpi, "torch_gloo_s": t_torch})
    if torch is not None:
        tdist.destroy_process_group()
    dist.destroy_process_group()
    return {"rows": rows, "note": note, "mpi": MPI.Get_library_version().splitlines()[0]}


def _mlp(fg):
    return fg.nn.Sequential(
        fg.nn.Linear(784, 1024),
        fg.nn.ReLU(),
        fg.nn.Linear(1024, 1024),
        fg.nn.ReLU(),
        fg.nn.Linear(1024, 1024),
        fg.nn.ReLU(),
        fg.nn.Linear(1024, 10),
    )


def part_step(quick: bool) -> dict:
    import ferrograd as fg
    import ferrograd.distributed as dist
    import numpy as np
    from mpi4py import MPI

    dist.init_process_group()
    comm = MPI.COMM_WORLD
    fg.manual_seed(0)
    model = _mlp(fg)
    dist.broadcast_parameters(model)
    params = list(model.parameters())
    grad_mb = sum(p.numel() for p in params) * 4 / 2**20
    rng = np.random.default_rng(comm.rank)
    per = 64
    x = fg.tensor(rng.standard_normal((per, 784)).astype(np.float32))
    y = fg.tensor(rng.integers(0, 10, per))
    plain = fg.GradManager().attach(params)
    reduced = fg.GradManager().attach(params, callbacks=dist.make_allreduce_cb("mean"))
    opt = fg.optim.SGD(params, lr=0.01, momentum=0.9)
    reps = 5 if quick else 30

    def forward():
        fg.nn.functional.cross_entropy(model(x), y)

    def fwd_bwd(gm):
        def run():
            with gm:
                gm.backward(fg.nn.functional.cross_entropy(model(x), y))
            for p in params:
                p.grad = None

        return run

    def train_step():
        with reduced:
            reduced.backward(fg.nn.functional.cross_entropy(model(x), y))
        opt.step()
        opt.zero_grad()

    out = {"grad_mb": grad_mb, "per_rank_batch": per, "ranks": comm.size}
    (out["forward_s"], out["fwd_bwd_plain_s"], out["fwd_bwd_allreduce_s"], out["train_step_s"]) = (
        median_times([forward, fwd_bwd(plain), fwd_bwd(reduced), train_step], comm, reps)
    )
    dist.destroy_process_group()
    return out


# -- the driver --------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--part", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.part:
        result = {"allreduce": part_allreduce, "step": part_step}[args.part](args.quick)
        from mpi4py import MPI

        if MPI.COMM_WORLD.rank == 0:
            print(json.dumps(result), flush=True)
        return

    isa = C.cpu_isa()
    print("== data-parallel training over MPI (benches/distributed.py)")
    print(f"cpu: {C.cpu_model()} ({os.cpu_count()} logical CPUs; {isa})")
    print("threads: 1 per rank (RAYON/OMP/OPENBLAS_NUM_THREADS=1)\n")
    ar = launch(2, "allreduce", args.quick)
    print(f"allreduce, 2 ranks, float32 sum in place ({ar['mpi']}; {ar['note']})")
    rows = []
    for r in ar["rows"]:
        gb = r["mb"] * 2**20 / 1e9
        bw = {k: (gb / v if v else None) for k, v in r.items() if k.endswith("_s")}
        rows.append(
            [
                f"{r['mb']} MB",
                C.fmt(bw["ferrograd_s"]),
                C.fmt(bw["mpi4py_s"]),
                C.fmt(bw["torch_gloo_s"]),
                f"{r['ferrograd_s'] / r['mpi4py_s']:.3f}x",
                f"{r['ferrograd_s'] / r['torch_gloo_s']:.3f}x" if r["torch_gloo_s"] else "-",
            ]
        )
    C.print_table(
        [
            "size",
            "ferrograd GB/s",
            "mpi4py GB/s",
            "torch gloo GB/s",
            "time / mpi4py",
            "time / gloo",
        ],
        rows,
    )
    two = launch(2, "step", args.quick)
    one = launch(1, "step", args.quick)
    backward = two["fwd_bwd_plain_s"] - two["forward_s"]
    exposed = two["fwd_bwd_allreduce_s"] - two["fwd_bwd_plain_s"]
    print(
        f"\nexposed communication: MLP 784-1024-1024-1024-10, {two['grad_mb']:.1f} MB of "
        f"gradients, {two['per_rank_batch']} samples per rank, 2 ranks"
    )
    print(
        f"  forward {two['forward_s'] * 1e3:.2f} ms, forward+backward {two['fwd_bwd_plain_s'] * 1e3:.2f}"
        f" ms, with allreduce {two['fwd_bwd_allreduce_s'] * 1e3:.2f} ms: exposed "
        f"{exposed * 1e3:.2f} ms = {exposed / backward:.1%} of backward (target <= 10%)"
    )
    sps1 = one["per_rank_batch"] / one["train_step_s"]
    sps2 = 2 * two["per_rank_batch"] / two["train_step_s"]
    print(
        f"scaling: train step 1 rank {one['train_step_s'] * 1e3:.2f} ms ({sps1:.0f} samples/s), "
        f"2 ranks {two['train_step_s'] * 1e3:.2f} ms ({sps2:.0f} samples/s): {sps2 / sps1:.2f}x "
        "(target >= 1.8x)"
    )
    if args.json:
        C.write_json(
            args.json,
            {
                "cpu": C.cpu_model(),
                "isa": isa,
                "allreduce": ar,
                "step_2_ranks": two,
                "step_1_rank": one,
            },
        )


if __name__ == "__main__":
    main()
