"""Layers, losses and optimizers as PyTorch's own test databases exercise them (module_db,
optim_db): the cases where ferrograd differed, each run on torch and ferrograd from the same
values (float64)."""

from __future__ import annotations

import warnings

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = fg.nn.functional
TF = torch.nn.functional


def both(a: np.ndarray, grad: bool = True):
    return (
        fg.tensor(a, dtype=fg.float64, requires_grad=grad),
        torch.tensor(a, dtype=torch.float64, requires_grad=grad),
    )


def close(f, t, tol=1e-10):
    np.testing.assert_allclose(f.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


def test_kl_div_with_targets_at_or_below_zero_gives_pytorchs_values_and_input_gradient():
    x = np.array([-1.0, -2.0, -0.5, -0.3])
    t = np.array([0.0, -1.0, 0.5, 0.2])
    (fx, tx), (ft, tt) = both(x), both(t)
    for reduction in ("none", "sum", "batchmean"):
        fy = F.kl_div(fx, ft, reduction=reduction)
        ty = TF.kl_div(tx, tt, reduction=reduction)
        np.testing.assert_array_equal(np.isnan(fy.detach().numpy()), np.isnan(ty.detach().numpy()))
    fy = fg.nn.KLDivLoss(reduction="none")(fx, ft)
    ty = torch.nn.KLDivLoss(reduction="none")(tx, tt)
    np.testing.assert_allclose(fy.detach().numpy(), ty.detach().numpy(), equal_nan=True)
    fy.backward(fg.ones(4, dtype=fg.float64))
    ty.backward(torch.ones(4, dtype=torch.float64))
    close(fx.grad, tx.grad)  # -target, no mask


def test_prelu_layer_keeps_a_0d_input_0d():
    m = fg.nn.PReLU()
    y = m(fg.tensor(-2.0))
    assert y.shape == () and y.item() == pytest.approx(-0.5)
    assert tuple(fg.nn.PReLU(3)(-fg.ones(2, 3, 4)).shape) == (2, 3, 4)


def test_conv3d_and_slices_of_an_empty_batch():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 2, 2, 2))
    fx, tx = both(np.zeros((0, 3, 5, 5, 5)))
    fw, tw = both(w)
    fy = F.conv3d(fx, fw, stride=(2, 1, 1), padding=1)
    ty = TF.conv3d(tx, tw, stride=(2, 1, 1), padding=1)
    assert tuple(fy.shape) == tuple(ty.shape)
    fy.sum().backward()
    ty.sum().backward()
    assert tuple(fx.grad.shape) == (0, 3, 5, 5, 5)
    close(fw.grad, tw.grad)
    e = fg.zeros((0, 3, 5))
    assert tuple(e[:, 1].shape) == (0, 5)
    assert e[:, 1:3, 2:].sum().item() == 0.0
    assert tuple(fg.nn.Conv3d(3, 2, 2)(fg.zeros(0, 3, 4, 4, 4)).shape) == (0, 2, 3, 3, 3)


def _lbfgs_run(lib, objective, **kw):
    w = lib.nn.Parameter(lib.tensor([1.0, 2.0], dtype=lib.float64))
    opt = lib.optim.LBFGS([w], line_search_fn="strong_wolfe", **kw)

    def closure():
        opt.zero_grad()
        loss = objective(lib, w)
        loss.backward()
        return loss

    for _ in range(3):
        opt.step(closure)
    return w.detach().numpy()


def test_lbfgs_strong_wolfe_on_a_flat_cubic_does_not_divide_by_zero():
    def linear(lib, w):
        return (w * lib.tensor([0.5, -1.0], dtype=lib.float64)).sum()

    out = _lbfgs_run(fg, linear)
    assert out.shape == (2,)

    def bowl(lib, w):
        return -((w - 3) ** 2).sum()

    np.testing.assert_allclose(
        _lbfgs_run(fg, bowl, maximize=True), _lbfgs_run(torch, bowl, maximize=True), rtol=1e-10
    )


@pytest.mark.parametrize("kind", ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm"])
def test_norm_layers_take_bias_false(kind):
    rng = np.random.default_rng(1)
    shape = {"BatchNorm1d": (4, 3), "BatchNorm2d": (4, 3, 2, 2), "BatchNorm3d": (2, 3, 2, 2, 2)}
    args = (1, 3) if kind == "GroupNorm" else (3,)
    x = rng.standard_normal(shape.get(kind, (4, 3, 5)))
    fm = getattr(fg.nn, kind)(*args, bias=False, dtype=fg.float64)
    tm = getattr(torch.nn, kind)(*args, bias=False, dtype=torch.float64)
    assert list(fm.state_dict()) == list(tm.state_dict())
    assert fm.bias is None and [n for n, _ in fm.named_parameters()] == ["weight"]
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(rng.standard_normal(3)))
    fm.load_state_dict({k: fg.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    (fx, tx) = both(x)
    fy, ty = fm(fx), tm(tx)
    close(fy, ty)
    fy.sum().backward()
    ty.sum().backward()
    close(fx.grad, tx.grad)
    close(fm.weight.grad, tm.weight.grad)


def test_layers_take_pytorchs_keyword_names_for_their_inputs():
    rng = np.random.default_rng(2)
    x, t = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    lin = fg.nn.Linear(3, 2, dtype=fg.float64)
    fx = fg.tensor(x)
    np.testing.assert_array_equal(lin(input=fx).numpy(), lin(fx).numpy())
    for name in ("MSELoss", "L1Loss", "SmoothL1Loss"):
        f, tm = getattr(fg.nn, name)(), getattr(torch.nn, name)()
        want = tm(input=torch.tensor(x), target=torch.tensor(t)).item()
        assert f(input=fg.tensor(x), target=fg.tensor(t)).item() == pytest.approx(want)
        assert f(fg.tensor(x), target=fg.tensor(t)).item() == pytest.approx(want)
    y = torch.tensor([1.0, -1.0, 1.0, 1.0])
    want = torch.nn.MarginRankingLoss()(
        input1=torch.tensor(x[:, 0]), input2=torch.tensor(x[:, 1]), target=y
    )
    got = fg.nn.MarginRankingLoss()(
        input1=fg.tensor(x[:, 0]), input2=fg.tensor(x[:, 1]), target=fg.tensor(y.numpy())
    )
    assert got.item() == pytest.approx(want.item())
    got = fg.nn.CosineSimilarity()(x1=fg.tensor(x), x2=fg.tensor(t)).numpy()
    want = torch.nn.CosineSimilarity()(x1=torch.tensor(x), x2=torch.tensor(t)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)
    with pytest.raises(TypeError):
        lin(inp=fx)

    class Mine(fg.nn.Module):  # a user's forward keeps Python's rules
        def forward(self, x):
            return x

    with pytest.raises(TypeError):
        Mine()(input=fx)


def test_losses_take_the_deprecated_size_average_and_reduce_keywords():
    cases = [
        ({"size_average": False}, "sum"),
        ({"reduce": False}, "none"),
        ({"size_average": True, "reduce": True}, "mean"),
        ({"size_average": None, "reduce": None, "reduction": "sum"}, "sum"),
    ]
    for name in ("MSELoss", "L1Loss", "CrossEntropyLoss", "NLLLoss", "KLDivLoss", "BCELoss"):
        for kw, want in cases:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                assert getattr(torch.nn, name)(**kw).reduction == want
                assert getattr(fg.nn, name)(**kw).reduction == want, (name, kw)


def test_hardtanh_min_value_and_max_value():
    with pytest.warns(FutureWarning):
        f = fg.nn.Hardtanh(min_value=-2.0, max_value=3.0)
    with pytest.warns(FutureWarning):
        t = torch.nn.Hardtanh(min_value=-2.0, max_value=3.0)
    x = np.array([-5.0, -1.0, 2.5, 7.0])
    np.testing.assert_array_equal(f(fg.tensor(x)).numpy(), t(torch.tensor(x)).numpy())


@pytest.mark.parametrize(
    "args", [(2, 2), (3, (2, 3, 2), (1, 2, 3)), (1.5, 3, 2, True), (2.0, (1, 2, 2))]
)
def test_lp_pool3d_matches_pytorch(args):
    x = np.random.default_rng(3).random((2, 3, 5, 6, 7))
    fx, tx = both(x)
    fy, ty = fg.nn.LPPool3d(*args)(fx), torch.nn.LPPool3d(*args)(tx)
    close(fy, ty)
    fy.sum().backward()
    ty.sum().backward()
    close(fx.grad, tx.grad)
    close(F.lp_pool3d(fx[0], *args), TF.lp_pool3d(tx[0], *args))


def test_nllloss2d_and_conv_transpose1d_padding_mode():
    assert issubclass(fg.nn.NLLLoss2d, fg.nn.NLLLoss)
    m = fg.nn.ConvTranspose1d(2, 3, 3, padding_mode="zeros")
    assert m.padding_mode == "zeros" and tuple(m(fg.ones(1, 2, 4)).shape) == (1, 3, 6)
    with pytest.raises(ValueError, match="padding_mode"):
        fg.nn.ConvTranspose1d(2, 3, 3, padding_mode="reflect")


def test_fractional_max_pool_takes_more_sample_rows_than_the_batch():
    rng = np.random.default_rng(4)
    x, s = rng.random((4, 5, 5, 5)), rng.random((2, 4, 3))
    got = F.fractional_max_pool3d(fg.tensor(x), 2, output_size=3, _random_samples=fg.tensor(s))
    want = TF.fractional_max_pool3d(
        torch.tensor(x), 2, output_size=3, _random_samples=torch.tensor(s)
    )
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    with pytest.raises(ValueError, match="_random_samples"):
        F.fractional_max_pool3d(fg.tensor(x), 2, output_size=3, _random_samples=fg.tensor(s[:, :3]))


def test_fused_and_foreach_together_are_refused():
    p = [fg.nn.Parameter(fg.ones(2))]
    for cls in (fg.optim.Adam, fg.optim.AdamW, fg.optim.SGD):
        with pytest.raises(RuntimeError, match="cannot be `True` together"):
            cls(p, lr=0.1, fused=True, foreach=True)


def _adafactor_run(lib, dtype, steps=6, **kw):
    rng = np.random.default_rng(0)
    ps = [
        lib.nn.Parameter(lib.tensor(rng.standard_normal(s), dtype=dtype))
        for s in [(4, 3), (3,), (2, 3, 5)]
    ]
    opt = lib.optim.Adafactor(ps, **kw)
    for _ in range(steps):
        opt.zero_grad()
        loss = sum((p * p).sum() * (j + 1) + p.sum() for j, p in enumerate(ps))
        loss.backward()
        opt.step()
    return [p.detach().numpy().copy() for p in ps], opt


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"lr": 0.1, "weight_decay": 0.1},
        {"eps": (1e-20, 1e-2), "d": 1.5, "beta2_decay": -0.5},
        {"maximize": True},
    ],
)
def test_adafactor_matches_pytorch(kw):
    got, fo = _adafactor_run(fg, fg.float64, **kw)
    want, to = _adafactor_run(torch, torch.float64, **kw)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    got32, _ = _adafactor_run(fg, fg.float32, **kw)
    want32, _ = _adafactor_run(torch, torch.float32, **kw)
    for a, b in zip(got32, want32):
        np.testing.assert_allclose(a, b, rtol=1e-5)
    fs, ts = fo.state_dict(), to.state_dict()
    assert fs["param_groups"][0].keys() == ts["param_groups"][0].keys()
    for i in range(3):
        assert fs["state"][i].keys() == ts["state"][i].keys()
        for k in ts["state"][i]:
            np.testing.assert_allclose(
                np.asarray(fs["state"][i][k].numpy(), dtype=np.float64),
                ts["state"][i][k].numpy().astype(np.float64),
                rtol=1e-12,
            )


def test_adafactor_arguments_and_traced_steps():
    p = [fg.nn.Parameter(fg.ones(2, 2))]
    for kw in ({"beta2_decay": 0.5}, {"eps": (-1.0, 1e-3)}, {"d": 0.5}, {"lr": -1.0}):
        with pytest.raises(ValueError):
            fg.optim.Adafactor(p, **kw)
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal((3, 4))
    x0 = rng.standard_normal((5, 3))
    results = []
    for traced in (False, True):
        w = fg.nn.Parameter(fg.tensor(w0))
        opt = fg.optim.Adafactor([w], lr=0.05, weight_decay=0.01)

        def step(x, w=w, opt=opt):
            opt.zero_grad()
            loss = ((x @ w) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        run = fg.trace(step) if traced else step
        x = fg.tensor(x0)
        for _ in range(4):
            run(x)
        if traced:
            assert run.cache_size == 1
        results.append(w.detach().numpy().copy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize(
    ("hw", "kw"),
    [
        ((17, 23), {"size": (5, 7)}),
        ((8, 9), {"size": (16, 20)}),
        ((32, 32), {"scale_factor": 0.3}),
        ((7, 7), {"size": (1, 2)}),
        ((12, 11), {"scale_factor": (0.5, 2.5)}),
        ((9, 10), {"size": (20, 3), "align_corners": True}),
        ((40, 30), {"scale_factor": 0.25, "recompute_scale_factor": True}),
    ],
)
def test_interpolate_antialias_matches_pytorch(mode, hw, kw):
    rng = np.random.default_rng(6)
    fx, tx = both(rng.standard_normal((2, 3, *hw)))
    fy = F.interpolate(fx, mode=mode, antialias=True, **kw)
    ty = TF.interpolate(tx, mode=mode, antialias=True, **kw)
    close(fy, ty, 1e-12)
    g = rng.standard_normal(tuple(ty.shape))
    fy.backward(fg.tensor(g))
    ty.backward(torch.tensor(g))
    close(fx.grad, tx.grad, 1e-12)


def test_interpolate_antialias_refuses_other_modes():
    with pytest.raises(ValueError, match="antialias"):
        F.interpolate(fg.ones(1, 1, 4), size=2, mode="linear", antialias=True)
    with pytest.raises(ValueError, match="antialias"):
        F.interpolate(fg.ones(1, 1, 4, 4), size=2, mode="nearest", antialias=True)


@pytest.mark.parametrize("alpha", [1.0, 0.5, 3.0])
def test_celu_values_and_gradient_at_zero_match_pytorch(alpha):
    x = np.array([0.0, -1.0, 1.0, 80.0, 1e-8, -1e-8, -0.3])
    fx, tx = both(x)
    fy, ty = F.celu(fx, alpha), TF.celu(tx, alpha)
    close(fy, ty, 1e-14)
    fy.sum().backward()
    ty.sum().backward()
    close(fx.grad, tx.grad, 1e-14)
    assert fx.grad.numpy()[0] == 1.0


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize(
    ("size", "theta"), [((2, 3, 4, 5, 6), (2, 3, 4)), ((2, 3, 1, 5, 2), (2, 3, 4))]
)
def test_affine_grid_of_volumes_matches_pytorch(size, theta, align_corners):
    rng = np.random.default_rng(7)
    fx, tx = both(rng.standard_normal(theta))
    fy = F.affine_grid(fx, size, align_corners=align_corners)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ty = TF.affine_grid(tx, size, align_corners=align_corners)
    close(fy, ty, 1e-13)
    g = rng.standard_normal(tuple(ty.shape))
    fy.backward(fg.tensor(g))
    ty.backward(torch.tensor(g))
    close(fx.grad, tx.grad, 1e-13)
    with pytest.raises(ValueError, match="affine_grid"):
        F.affine_grid(fx, size[:4])
