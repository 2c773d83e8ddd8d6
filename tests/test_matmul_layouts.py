"""Matrix products and copies over the layouts their kernels treat apart: a column-major
right operand (a Linear weight used as ``W^T``) with few rows on the left (dot products),
with columns a multiple of 4 KiB apart (copied to rows first), or neither (``gemm`` as is);
and copies of transposed views (tiled). Each is checked against numpy in float64 and
float32, and the gradients of ``x @ W.T`` against numpy's."""

import ferrograd as fg
import numpy as np
import pytest


def _rand(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    "m,k,n",
    [
        (1, 64, 48),
        (2, 1024, 64),
        (3, 17, 33),
        (5, 1000, 20),
        (8, 512, 1024),
        (16, 1024, 40),
        (17, 1024, 32),
        (64, 1024, 48),
        (65, 512, 17),
        (40, 100, 30),
    ],
)
def test_product_with_transposed_weight(dtype: str, m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(m * 1000 + k + n)
    a, w = _rand(rng, (m, k), dtype), _rand(rng, (n, k), dtype)
    got = (fg.tensor(a) @ fg.tensor(w).T).numpy()
    want = a.astype(np.float64) @ w.astype(np.float64).T
    tol = 1e-12 if dtype == "float64" else 2e-4
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.sqrt(k))


@pytest.mark.parametrize("m", [2, 7, 16, 100])
def test_product_operand_views(m: int) -> None:
    # rows of a taken with a step, b a transposed slice of a wider matrix, and a batch of
    # products whose right operand is one transposed matrix broadcast over the batch
    rng = np.random.default_rng(m)
    big_a, big_w = rng.standard_normal((2 * m, 1030)), rng.standard_normal((70, 1024 + 3))
    a, w = big_a[::2, 3:1027], big_w[5:69, 1:1025]
    got = (fg.tensor(big_a)[::2, 3:1027] @ fg.tensor(big_w)[5:69, 1:1025].T).numpy()
    np.testing.assert_allclose(got, a @ w.T, rtol=1e-12, atol=1e-11)
    x = rng.standard_normal((3, m, 1024))
    wt = rng.standard_normal((32, 1024))
    got = (fg.tensor(x) @ fg.tensor(wt).T).numpy()
    np.testing.assert_allclose(got, x @ wt.T, rtol=1e-12, atol=1e-11)
    # the batch does not merge into the rows (a permuted stack): products one by one
    xp = rng.standard_normal((m, 3, 1024))
    got = (fg.tensor(xp).transpose(0, 1) @ fg.tensor(wt).T).numpy()
    np.testing.assert_allclose(got, xp.transpose(1, 0, 2) @ wt.T, rtol=1e-12, atol=1e-11)
    xs = rng.standard_normal((3, m, 1024))
    ws = rng.standard_normal((3, 32, 1024))
    got = (fg.tensor(xs) @ fg.tensor(ws).transpose(1, 2)).numpy()
    np.testing.assert_allclose(got, xs @ ws.transpose(0, 2, 1), rtol=1e-12, atol=1e-11)


@pytest.mark.parametrize("m", [4, 256])
def test_linear_gradients_through_transposed_weight(m: int) -> None:
    rng = np.random.default_rng(7)
    x0, w0 = rng.standard_normal((m, 1024)), rng.standard_normal((1024, 1024)) / 32
    g0 = rng.standard_normal((m, 1024))
    x, w = fg.tensor(x0, requires_grad=True), fg.tensor(w0, requires_grad=True)
    y = x @ w.T
    y.backward(fg.tensor(g0))
    np.testing.assert_allclose(y.numpy(), x0 @ w0.T, rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(x.grad.numpy(), g0 @ w0, rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(w.grad.numpy(), g0.T @ x0, rtol=1e-12, atol=1e-11)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool", "float16", "uint8"])
@pytest.mark.parametrize(
    "shape,perm",
    [
        ((1024, 1024), (1, 0)),
        ((70, 9), (1, 0)),
        ((3, 130, 65), (0, 2, 1)),
        ((130, 3, 65), (2, 1, 0)),
        ((5, 64, 4, 33), (0, 3, 2, 1)),
    ],
)
def test_contiguous_copy_of_transposed_view(dtype: str, shape: tuple, perm: tuple) -> None:
    rng = np.random.default_rng(len(shape))
    src = (rng.standard_normal(shape) * 50).astype(dtype)
    t = fg.tensor(src).permute(*perm)
    got = t.contiguous()
    assert got.is_contiguous()
    np.testing.assert_array_equal(got.numpy(), src.transpose(perm))
    # a view of a view: a column slice with a step, then transposed
    sl = fg.tensor(src)[..., ::3].permute(*perm).contiguous().numpy()
    np.testing.assert_array_equal(sl, src[..., ::3].transpose(perm))
