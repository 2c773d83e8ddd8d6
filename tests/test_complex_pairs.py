"""Complex tensors as pairs of real tensors: LLaMA's rotary embedding
(``view_as_real(view_as_complex(x) * polar(1, freqs))``) and complex arithmetic, values and
gradients against PyTorch."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")


def _rope(lib, xq_np, dim=8, end=6):
    freqs = 1.0 / (10000.0 ** (lib.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = lib.arange(end, device=freqs.device)
    freqs_cis = lib.polar(lib.ones_like(lib.outer(t, freqs).float()), lib.outer(t, freqs).float())
    xq = lib.tensor(xq_np, requires_grad=True)
    xq_ = lib.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    shape = [d if i in (1, xq_.ndim - 1) else 1 for i, d in enumerate(xq_.shape)]
    out = lib.view_as_real(xq_ * freqs_cis[:end].view(*shape)).flatten(3).type_as(xq)
    (out * out.detach().cos()).sum().backward()
    return out.detach().numpy(), xq.grad.numpy(), str(freqs_cis.dtype)


def test_llama_rotary_embedding_equals_torch():
    x = np.random.default_rng(0).standard_normal((2, 6, 3, 8)).astype(np.float32)
    (fo, fgr, fdt), (to, tgr, tdt) = _rope(fg, x), _rope(torch, x)
    np.testing.assert_allclose(fo, to, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fgr, tgr, rtol=1e-5, atol=1e-6)
    assert fdt == tdt.removeprefix("torch.") == "complex64"


def test_complex_arithmetic():
    re, im = np.array([1.0, -2.0, 0.5]), np.array([3.0, 4.0, -1.0])
    c = fg.complex(fg.tensor(re), fg.tensor(im))
    z = re + 1j * im
    for got, want in [
        (c * c.conj(), z * z.conj()),
        (c * c, z * z),
        (c / (c + 1.0), z / (z + 1.0)),
        (c - 2.0, z - 2.0),
        (c.exp(), np.exp(z)),
    ]:
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(c.abs().numpy(), np.abs(z), rtol=1e-12)
    np.testing.assert_allclose(c.angle().numpy(), np.angle(z), rtol=1e-12)
    assert fg.is_complex(c) and not fg.is_complex(fg.tensor(re))
    assert c.dtype == fg.complex128 and c.shape == (3,)
    np.testing.assert_array_equal(fg.view_as_real(c).numpy(), np.stack([re, im], -1))
    with pytest.raises(fg.ShapeError, match="view_as_complex"):
        fg.view_as_complex(fg.zeros(3, 3))
