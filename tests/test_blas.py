"""Large matrix products on the CPU: numpy's OpenBLAS (where the engine uses it) and the `gemm`
crate give numpy's values for every operand layout BLAS can read and for those it cannot."""

import os
import subprocess
import sys

import ferrograd as fg
import numpy as np
import pytest

rng = np.random.default_rng(11)


def _views(a):
    """a, its transpose's transpose through a copy, a column-major copy, a view with a
    leading dimension larger than its width, and a view with no unit stride."""
    wide = np.zeros((a.shape[0], a.shape[1] + 7), a.dtype)
    wide[:, : a.shape[1]] = a
    fwide = fg.tensor(wide, device="cpu")[:, : a.shape[1]]
    col = fg.tensor(np.ascontiguousarray(a.T), device="cpu").T
    every_other = fg.tensor(np.repeat(a, 2, axis=1), device="cpu")[:, ::2]
    return {"row": fg.tensor(a, device="cpu"), "col": col, "ld": fwide, "strided": every_other}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("la", ["row", "col", "ld", "strided"])
@pytest.mark.parametrize("lb", ["row", "col", "ld"])
def test_large_products_match_numpy_for_every_layout(dtype, la, lb):
    m, k, n = 520, 401, 333  # above the size that goes to BLAS (2^26 multiply-adds)
    a = rng.normal(size=(m, k)).astype(dtype)
    b = rng.normal(size=(k, n)).astype(dtype)
    got = (_views(a)[la] @ _views(b)[lb]).numpy()
    want = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-4 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_products_with_a_unit_dimension_and_gradients():
    a = rng.normal(size=(1, 300))
    b = rng.normal(size=(300, 400))
    x, w = fg.tensor(a, device="cpu"), fg.tensor(b, device="cpu")
    gm = fg.GradManager().attach([x, w])
    with gm:
        gm.backward((x @ w).sum())
    np.testing.assert_allclose((x @ w).numpy(), a @ b, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), np.ones((1, 400)) @ b.T, rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), a.T @ np.ones((1, 400)), rtol=1e-12)


def test_both_backends_agree():
    # the same products with the choice forced each way, in fresh processes
    code = (
        "import ferrograd as fg, numpy as np; r = np.random.default_rng(3); "
        "a = r.normal(size=(450, 400)); b = r.normal(size=(400, 380)); "
        "t = fg.tensor(a, device='cpu'); u = fg.tensor(b, device='cpu'); "
        "print(repr(float(np.abs((t @ u).numpy() - a @ b).max())), repr(float((t.T.T @ u).sum().item())),"
        " fg._blas.blas_info()['in_use'])"
    )
    out = {}
    for choice in ("gemm", "openblas"):
        env = dict(os.environ, FERROGRAD_BLAS=choice, FERROGRAD_TEST_DEVICE="cpu")
        r = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
        )
        assert r.returncode == 0, r.stderr
        err, total, used = r.stdout.split()
        assert float(err) < 1e-11
        out[choice] = (float(total), used)
    assert out["gemm"][1] == "False"
    if out["openblas"][1] == "True":  # numpy bundles OpenBLAS on this platform
        assert out["openblas"][0] == pytest.approx(out["gemm"][0], rel=1e-12)


def test_transposed_weight_product_large_enough_for_blas():
    # a Linear layer's x @ W.T with W's columns 4 KiB apart, large enough (2^28
    # multiply-adds) to go to the loaded BLAS, which reads the transposed operand in place
    code = (
        "import ferrograd as fg, numpy as np; r = np.random.default_rng(5); "
        "x = r.normal(size=(256, 1024)).astype(np.float32); "
        "w = r.normal(size=(1024, 1024)).astype(np.float32); "
        "got = (fg.tensor(x, device='cpu') @ fg.tensor(w, device='cpu').T).numpy(); "
        "want = x.astype(np.float64) @ w.T.astype(np.float64); "
        "print(repr(float(np.abs(got - want).max() / np.abs(want).max())))"
    )
    for choice in ("gemm", "openblas"):
        env = dict(os.environ, FERROGRAD_BLAS=choice, FERROGRAD_TEST_DEVICE="cpu")
        r = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
        )
        assert r.returncode == 0, r.stderr
        assert float(r.stdout) < 1e-5, (choice, r.stdout)
