"""``optim.Muon`` against ``torch.optim.Muon``: trajectories from the same weights (its
Newton-Schulz step runs in bfloat16, rounded where PyTorch rounds), every option, the state
dict, bad arguments, and a traced step equal to the eager one."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest


def _trajectory(lib, w0, xs, **kw):
    w = lib.tensor(w0.copy(), requires_grad=True)
    opt = lib.optim.Muon([w], lr=0.02, **kw)
    out = []
    for x in xs:
        opt.zero_grad()
        loss = (lib.tensor(x) @ w.T).tanh().pow(2).sum()
        loss.backward()
        opt.step()
        out.append(np.asarray(w.detach().cpu().numpy()).copy())
    return out, opt


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(6, 4), (3, 7), (24, 40)])
@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"nesterov": False, "weight_decay": 0.0},
        {"adjust_lr_fn": "match_rms_adamw", "momentum": 0.9},
        {"adjust_lr_fn": "spectral_unclamped", "ns_steps": 3, "eps": 1e-3},
        {"ns_coefficients": (2.0, -1.5, 0.5)},
    ],
)
def test_muon_follows_torch(dtype, shape, kw):
    torch = pytest.importorskip("torch")
    if not hasattr(torch.optim, "Muon"):
        pytest.skip("this PyTorch has no Muon")
    rng = np.random.default_rng(sum(shape))
    w0 = rng.standard_normal(shape).astype(dtype)
    xs = [rng.standard_normal((5, shape[1])).astype(dtype) for _ in range(6)]
    ours, opt = _trajectory(fg, w0, xs, **kw)
    theirs, topt = _trajectory(torch, w0, xs, **kw)
    # The products round to bfloat16 as PyTorch's do, but float32 sums taken in another
    # order can round one entry the other way, and Newton-Schulz spreads that over the
    # matrix: steps agree to a small fraction of their size (each step moves an entry by
    # about lr * ratio), not bitwise.
    rows, cols = shape
    ratio = {
        None: max(1.0, rows / cols) ** 0.5,
        "match_rms_adamw": 0.2 * max(rows, cols) ** 0.5,
        "spectral_unclamped": (rows / cols) ** 0.5,
    }[kw.get("adjust_lr_fn")]
    for i, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(a, b, rtol=0, atol=0.02 * 0.02 * ratio * (i + 1))
    assert not np.allclose(ours[-1], w0)
    buf = np.asarray(opt.state_dict()["state"][0]["momentum_buffer"].cpu().numpy())
    tbuf = topt.state_dict()["state"][0]["momentum_buffer"].numpy()
    np.testing.assert_allclose(buf, tbuf, rtol=0, atol=1e-2 * np.abs(tbuf).max())
    assert set(opt.state_dict()["param_groups"][0]) == set(topt.state_dict()["param_groups"][0])


def test_muon_orthogonalizes_the_update():
    # one step from zero momentum with nesterov off: the update is NS(g), whose singular
    # values lie near 1 (0.5 to 1.5 for the default coefficients)
    rng = np.random.default_rng(3)
    w = fg.tensor(np.zeros((16, 8)), requires_grad=True)
    opt = fg.optim.Muon([w], lr=1.0, weight_decay=0.0, momentum=0.0, nesterov=False)
    w.grad = fg.tensor(rng.standard_normal((16, 8)) * 1e-3)
    opt.step()
    update = -w.detach().numpy() / np.sqrt(16 / 8)
    s = np.linalg.svd(update, compute_uv=False)
    assert 0.4 < s.min() and s.max() < 1.6


def test_muon_state_dict_round_trip_continues_the_same_trajectory():
    rng = np.random.default_rng(4)
    w0 = rng.standard_normal((5, 3))
    xs = [rng.standard_normal((4, 3)) for _ in range(6)]
    ref, _ = _trajectory(fg, w0, xs)
    w = fg.tensor(w0.copy(), requires_grad=True)
    opt = fg.optim.Muon([w], lr=0.02)
    for x in xs[:3]:
        opt.zero_grad()
        (fg.tensor(x) @ w.T).tanh().pow(2).sum().backward()
        opt.step()
    saved = opt.state_dict()
    w2 = fg.tensor(w.detach().numpy().copy(), requires_grad=True)
    opt2 = fg.optim.Muon([w2], lr=0.5)
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["lr"] == 0.02
    for x in xs[3:]:
        opt2.zero_grad()
        (fg.tensor(x) @ w2.T).tanh().pow(2).sum().backward()
        opt2.step()
    np.testing.assert_array_equal(w2.detach().numpy(), ref[-1])


def test_muon_traced_step_equals_eager():
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal((6, 4))
    xs = [rng.standard_normal((3, 4)) for _ in range(4)]
    ref, _ = _trajectory(fg, w0, xs)
    w = fg.tensor(w0.copy(), requires_grad=True)
    opt = fg.optim.Muon([w], lr=0.02)

    @fg.trace
    def step(x):
        opt.zero_grad()
        loss = (x @ w.T).tanh().pow(2).sum()
        loss.backward()
        opt.step()
        return loss

    for x, want in zip(xs, ref):
        step(fg.tensor(x))
        np.testing.assert_array_equal(w.detach().numpy(), want)
    assert step.cache_size == 1


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"lr": -1.0}, "lr|learning rate"),
        ({"momentum": -0.1}, "momentum"),
        ({"weight_decay": -0.1}, "weight_decay"),
        ({"adjust_lr_fn": "bogus"}, "adjust_lr_fn"),
        ({"ns_coefficients": (1.0, 2.0)}, "ns_coefficients"),
        ({"ns_steps": 100}, "ns_steps"),
    ],
)
def test_muon_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        fg.optim.Muon([fg.zeros(3, 2, requires_grad=True)], **kw)


def test_muon_refuses_parameters_that_are_not_matrices():
    with pytest.raises(ValueError, match="2D parameters"):
        fg.optim.Muon([fg.zeros(3, 2, requires_grad=True), fg.zeros(3, requires_grad=True)])
