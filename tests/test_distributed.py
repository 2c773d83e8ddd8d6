"""Data-parallel training over MPI: ranks started by ``mpiexec`` (2, and 3 oversubscribed) run
the scenarios of tests/mpi_worker.py; the helpers that need no MPI are tested in process."""

from __future__ import annotations

import os
import subprocess
import sys

import ferrograd as fg
import ferrograd.distributed as dist
import numpy as np
import pytest
from mpi_helpers import ROOT, launch, needs_mpi, on_cpu

WORKER = os.path.join(ROOT, "tests", "mpi_worker.py")


@on_cpu
@needs_mpi
def test_two_ranks_gradients_parameters_unused_and_overlap():
    # gradients equal one process's on the concatenated batch (MLP and CNN, float64, 1e-12),
    # parameters identical over 5 steps, unused parameters, overlap of allreduce and backward,
    # a traced step
    rc, out, _ = launch(
        WORKER,
        2,
        "collectives",
        "mlp",
        "cnn",
        "steps",
        "unused",
        "overlap",
        "traced",
        "traced_collectives",
    )
    assert rc == 0 and "ok" in out, out


@on_cpu
@needs_mpi
def test_distributed_data_parallel_two_ranks():
    rc, out, _ = launch(WORKER, 2, "ddp")
    assert rc == 0 and "ok" in out, out


@on_cpu
@needs_mpi
def test_distributed_data_parallel_overlaps_backward():
    # gradients equal one process's on the concatenated batch (float64, 1e-12); the first
    # bucket's allreduce starts before the last parameter's gradient is accumulated (>= 4
    # buckets); parameters unused on a rank or on all; a GradManager backward leaves it idle
    rc, out, _ = launch(WORKER, 2, "ddp_overlap", "ddp")
    assert rc == 0 and "ok" in out, out


@on_cpu
@needs_mpi
def test_three_ranks_oversubscribed():
    rc, out, _ = launch(
        WORKER, 3, "collectives", "mlp", "cnn", "steps", "unused", "traced", "traced_collectives"
    )
    assert rc == 0 and "ok" in out, out


@on_cpu
@needs_mpi
def test_a_failing_rank_ends_the_job():
    rc, out, _ = launch(WORKER, 2, "raises", timeout=60)
    assert rc != 0
    assert "rank 1 fails on purpose" in out


@on_cpu
@needs_mpi
def test_train_digits_distributed_matches_one_process():
    example = os.path.join(ROOT, "examples", "train_digits.py")
    rc, out, _ = launch(example, 2, "--distributed", "--epochs", "3")
    assert rc == 0, out
    assert "identical weights on every rank: True" in out
    single = subprocess.run(
        [sys.executable, example, "--epochs", "3"],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(fg.__file__))),
    ).stdout
    # the same global batches, so (up to float32 rounding of the sums) the same loss curve
    losses = [float(line.split()[-1]) for line in out.splitlines() if "train loss" in line]
    want = [float(line.split()[-1]) for line in single.splitlines() if "train loss" in line]
    assert len(losses) == len(want) and np.allclose(losses, want, atol=2e-4), (out, single)


# -- no MPI needed ------------------------------------------------------------------------------


def test_collectives_need_init_process_group():
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.all_reduce(fg.ones(2))
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.get_rank()


def test_init_process_group_rejects_unknown_backends():
    with pytest.raises(ValueError, match="backend"):
        dist.init_process_group("ucc")
    # without the NCCL library, or without a CUDA device, the NCCL backend is refused
    # before anything is joined
    if not (dist.is_nccl_available() and fg.cuda.is_available()):
        with pytest.raises(RuntimeError, match="NCCL"):
            dist.init_process_group("nccl")
    assert not dist.is_initialized()


def test_nccl_library_loads_from_the_pip_package_without_a_gpu():
    # nvidia-nccl-cu13 ships libnccl.so.2, a name cudarc's loader never tries: the package
    # finds it on sys.path and loads it by path; the version and a unique id need no GPU
    from ferrograd import _core

    path = dist._nccl_library()
    if path is None:
        pytest.skip("nvidia-nccl-cu13 is not installed")
    assert dist.is_nccl_available()
    assert os.path.basename(path).startswith("libnccl.so")
    version = _core._nccl_load(path)
    assert version >= 21800  # major * 10000 + minor * 100 + patch
    uid = _core._nccl_unique_id()
    assert isinstance(uid, bytes) and len(uid) == 128
    assert uid != _core._nccl_unique_id()
    with pytest.raises(ValueError, match="128 bytes"):
        _core._NcclComm(b"short", 1, 0, 0)
    if not fg.cuda.is_available() or fg.cuda.device_count() == 0:
        return
    if "emulator" in fg.cuda.get_device_name(0):
        # the host-memory CUDA emulator has no device memory NCCL could address
        with pytest.raises(fg.DeviceError, match="emulator"):
            _core._NcclComm(uid, 1, 0, 0)
        return
    # a world of one on the first device: every collective is the identity (sum, max) or
    # the value itself
    comm = _core._NcclComm(uid, 1, 0, 0)
    t = fg.arange(6.0, device="cuda").reshape(2, 3)
    comm.all_reduce(t, "sum")
    comm.broadcast(t, 0)
    out = fg.zeros(6, device="cuda")
    comm.all_gather(t.reshape(6), out)
    assert out.numpy().tolist() == list(range(6))
    with pytest.raises(ValueError):
        comm.all_reduce(fg.ones(2), "sum")  # a CPU tensor: not this communicator's device


def test_make_allreduce_cb_arguments():
    with pytest.raises(ValueError, match="reduce"):
        dist.make_allreduce_cb("max")
    with pytest.raises(ValueError, match="bucket_mb"):
        dist.make_allreduce_cb(bucket_mb=0)
    cb = dist.make_allreduce_cb()
    with pytest.raises(RuntimeError, match="GradManager.backward"):
        cb(fg.ones(2), fg.ones(2))


@pytest.mark.parametrize("n", [0, 1, 7, 10, 11])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_shard_is_distributed_sampler(n, world):
    torch = pytest.importorskip("torch")
    from torch.utils.data.distributed import DistributedSampler

    data = list(range(n))
    for rank in range(world):
        want = list(DistributedSampler(data, num_replicas=world, rank=rank, shuffle=False))
        assert dist.shard(n, rank=rank, world_size=world) == want
    del torch


def test_shard_shuffles_the_same_way_on_every_rank():
    parts = [dist.shard(10, rank=r, world_size=3, shuffle=True, seed=5, epoch=2) for r in range(3)]
    assert all(len(p) == 4 for p in parts)
    assert set().union(*map(set, parts)) == set(range(10))
    again = [dist.shard(10, rank=r, world_size=3, shuffle=True, seed=5, epoch=2) for r in range(3)]
    assert parts == again
    other_epoch = [
        dist.shard(10, rank=r, world_size=3, shuffle=True, seed=5, epoch=3) for r in range(3)
    ]
    assert other_epoch != parts
    with pytest.raises(ValueError, match="rank"):
        dist.shard(10, rank=3, world_size=3)
