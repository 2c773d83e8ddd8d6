"""Mixed precision (fg.autocast / fg.amp.GradScaler) against PyTorch's: which ops run in
the low dtype, gradients of float32 parameters stay float32 and match torch's autocast
within bfloat16's precision, GradScaler's skip-and-adapt algorithm step for step."""

from __future__ import annotations

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest
import torch

DEV = str(fg.ones(1).device).partition(":")[0]  # the device the suite runs on


def _mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.LayerNorm(16), nn.Linear(16, 4))


def _copy(src, dst):
    for (_, a), (_, b) in zip(src.named_parameters(), dst.named_parameters()):
        with torch.no_grad():
            b.copy_(torch.tensor(a.detach().numpy()))


def test_products_run_in_the_autocast_dtype_and_losses_in_float32():
    x, w = fg.randn(3, 4), fg.randn(4, 2)
    with fg.autocast(DEV, dtype=fg.bfloat16):
        assert (x @ w).dtype == fg.bfloat16
        assert fg.matmul(x, w).dtype == fg.bfloat16
        assert F.linear(x, w.T).dtype == fg.bfloat16
        assert fg.bmm(x[None], w[None]).dtype == fg.bfloat16
        conv = fg.nn.Conv2d(1, 2, 3)
        assert conv(fg.randn(1, 1, 5, 5)).dtype == fg.bfloat16
        h = x @ w
        # softmax is on CUDA's float32 list and on none of the CPU's, as PyTorch's
        assert F.softmax(h, -1).dtype == (fg.float32 if DEV == "cuda" else fg.bfloat16)
        assert F.cross_entropy(h, fg.tensor([0, 1, 1])).dtype == fg.float32
        assert (h + fg.ones(2)).dtype == fg.float32  # type promotion
        with fg.autocast(DEV, enabled=False):
            assert (x @ w).dtype == fg.float32
        assert (x @ w).dtype == fg.bfloat16
        assert (x.double() @ w.double()).dtype == fg.float64  # as PyTorch: never lowered
        assert (fg.ones(2, 2, dtype=fg.int64) @ fg.ones(2, 2, dtype=fg.int64)).dtype == fg.int64
    assert (x @ w).dtype == fg.float32
    with fg.autocast(DEV, dtype=fg.float16):
        assert (x @ w).dtype == fg.float16
    other = "cuda" if DEV == "cpu" else "cpu"
    with fg.autocast(other):  # another device's region leaves these tensors alone
        assert (x @ w).dtype == fg.float32


def test_autocast_training_step_matches_torch_within_bfloat16_precision():
    fg.manual_seed(0)
    ours, theirs = _mlp(fg), _mlp(torch)
    _copy(ours, theirs)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(8, 6)).astype(np.float32), rng.integers(0, 4, 8)
    with fg.autocast(DEV, dtype=fg.bfloat16):
        loss = F.cross_entropy(ours(fg.tensor(x)), fg.tensor(y))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tloss = torch.nn.functional.cross_entropy(theirs(torch.tensor(x)), torch.tensor(y))
    assert loss.dtype == fg.float32
    assert abs(loss.item() - tloss.item()) < 2e-2 * max(1.0, abs(tloss.item()))
    loss.backward()
    tloss.backward()
    for (name, p), (_, t) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert p.grad.dtype == fg.float32, name
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=0.1, atol=3e-2)
    # and it is a mixed-precision result, not the float32 one
    full = F.cross_entropy(ours(fg.tensor(x)), fg.tensor(y)).item()
    assert loss.item() != full


def test_autocast_as_decorator_and_argument_errors():
    @fg.autocast(DEV, dtype=fg.bfloat16)
    def f(a, b):
        return a @ b

    assert f(fg.ones(2, 2), fg.ones(2, 2)).dtype == fg.bfloat16
    assert (fg.ones(2, 2) @ fg.ones(2, 2)).dtype == fg.float32
    with pytest.raises(ValueError, match="device_type"):
        fg.autocast("tpu")
    with pytest.warns(UserWarning, match="not supported"):  # PyTorch's: runs disabled
        fg.autocast("cpu", dtype=fg.float64)


def _scaler_run(lib, scaler, grads_seq):
    p = lib.nn.Parameter(lib.ones(3)) if lib is fg else torch.nn.Parameter(torch.ones(3))
    opt = (fg if lib is fg else torch).optim.SGD([p], lr=0.1)
    scales, values = [], []
    for g in grads_seq:
        opt.zero_grad()
        loss = (p * lib.tensor(np.asarray(g, dtype=np.float32))).sum()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        values.append(p.detach().numpy().copy())
    return scales, values


def test_grad_scaler_skips_non_finite_steps_and_adapts_like_torch():
    seq = [[1, 2, 3], [np.inf, 0, 0], [1, 1, 1], [1, 1, 1], [np.nan, 1, 1], [2, 2, 2], [1, 0, 1]]
    kw = {"init_scale": 8.0, "growth_interval": 2}
    ours = _scaler_run(fg, fg.amp.GradScaler("cpu", **kw), seq)
    theirs = _scaler_run(torch, torch.amp.GradScaler("cpu", **kw), seq)
    assert ours[0] == theirs[0]
    for a, b in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_grad_scaler_disabled_and_state_dict():
    s = fg.amp.GradScaler("cpu", enabled=False)
    loss = fg.tensor(2.0)
    assert s.scale(loss) is loss and s.get_scale() == 1.0 and s.state_dict() == {}
    s = fg.amp.GradScaler("cpu", init_scale=4.0)
    s2 = fg.amp.GradScaler("cpu")
    s2.load_state_dict(s.state_dict())
    assert s2.get_scale() == 4.0
    p = fg.nn.Parameter(fg.ones(2))
    opt = fg.optim.SGD([p], lr=0.1)
    s.scale((p * 2).sum()).backward()
    s.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        s.unscale_(opt)
    np.testing.assert_allclose(p.grad.numpy(), [2.0, 2.0])
    if not fg.cuda.is_available():
        with pytest.warns(UserWarning, match="CUDA is not available"):
            assert not fg.cuda.amp.GradScaler().is_enabled()
