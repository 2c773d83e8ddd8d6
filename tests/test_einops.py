"""einops' functions on ferrograd tensors (a backend registered at import), as vit-pytorch
and mamba-minimal use them: shapes, values and gradients against numpy."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

einops = pytest.importorskip("einops")


def test_rearrange_repeat_reduce_and_einsum():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 8, 8))
    x = fg.tensor(a, requires_grad=True)
    p = einops.rearrange(x, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=4, p2=4)
    want = a.reshape(2, 3, 2, 4, 2, 4).transpose(0, 2, 4, 3, 5, 1).reshape(2, 4, 48)
    np.testing.assert_array_equal(p.numpy(), want)
    cls = einops.repeat(fg.tensor(np.arange(5.0)).reshape(1, 1, 5), "1 1 d -> b 1 d", b=3)
    np.testing.assert_array_equal(cls.numpy(), np.broadcast_to(np.arange(5.0), (3, 1, 5)))
    r = einops.reduce(x, "b c h w -> b c", "max")
    np.testing.assert_array_equal(r.numpy(), a.max((2, 3)))
    w = rng.standard_normal((48, 6))
    e = einops.einsum(p, fg.tensor(w), "b n d, d k -> b n k")
    np.testing.assert_allclose(e.numpy(), want @ w, rtol=1e-12)
    (e.sum() + r.sum()).backward()
    assert x.grad is not None and x.grad.shape == a.shape
    g = np.ones((2, 4, 6)) @ w.T  # the einsum's gradient, back through the rearrange
    g = g.reshape(2, 2, 2, 4, 4, 3).transpose(0, 5, 1, 3, 2, 4).reshape(2, 3, 8, 8)
    np.testing.assert_allclose(x.grad.numpy() - g, (a == a.max((2, 3), keepdims=True)) * 1.0)
