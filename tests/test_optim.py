"""Optimizers and schedules: PyTorch's formulas (compared with torch.optim in float64 when
installed, and with hand-written references otherwise), parameter groups, state dicts,
argument checks."""

from __future__ import annotations

import math

import ferrograd as fg
import numpy as np
import pytest

OPTIMIZERS = {
    "SGD": {},
    "SGD_momentum": {"momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01},
    "SGD_nesterov": {"momentum": 0.8, "nesterov": True},
    "Adam": {"weight_decay": 0.01},
    "Adam_amsgrad": {"amsgrad": True, "betas": (0.8, 0.9)},
    "AdamW": {},
    "RMSprop": {"weight_decay": 0.01},
    "RMSprop_centered_momentum": {"centered": True, "momentum": 0.5},
    "Adagrad": {"lr_decay": 0.01, "initial_accumulator_value": 0.1},
    "Adadelta": {"weight_decay": 0.01},
    "Adamax": {"weight_decay": 0.01},
    "NAdam": {"weight_decay": 0.01},
    "NAdam_decoupled": {"weight_decay": 0.1, "decoupled_weight_decay": True},
    "RAdam": {"weight_decay": 0.01},
    "RAdam_decoupled": {"weight_decay": 0.1, "decoupled_weight_decay": True, "betas": (0.9, 0.9)},
}


def _grads(step, shapes):
    rng = np.random.default_rng(100 + step)
    return [rng.normal(size=s) for s in shapes]


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_matches_torch_optim(name):
    torch = pytest.importorskip("torch")
    cls = name.split("_")[0]
    kw = dict(OPTIMIZERS[name])
    kw["lr"] = 0.05
    rng = np.random.default_rng(0)
    init = [rng.normal(size=(3, 4)), rng.normal(size=(4,))]
    fps = [fg.nn.Parameter(fg.tensor(a)) for a in init]
    tps = [torch.tensor(a, requires_grad=True) for a in init]
    fopt = getattr(fg.optim, cls)(fps, **kw)
    topt = getattr(torch.optim, cls)(tps, **kw)
    for step in range(6):
        gs = _grads(step, [a.shape for a in init])
        for p, t, g in zip(fps, tps, gs):
            p.grad = fg.tensor(g)
            t.grad = torch.tensor(g)
        if step == 3:  # a parameter without a gradient is skipped
            fps[1].grad = None
            tps[1].grad = None
        fopt.step()
        topt.step()
        for p, t in zip(fps, tps):
            np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_sgd_reference_without_torch():
    p = fg.nn.Parameter(fg.tensor([1.0, -2.0], dtype="float64"))
    opt = fg.optim.SGD([p], lr=0.1, momentum=0.9, dampening=0.5)
    buf = None
    expect = np.array([1.0, -2.0])
    for step in range(3):
        g = np.array([0.5, 1.5]) * (step + 1)
        p.grad = fg.tensor(g)
        opt.step()
        buf = g if buf is None else 0.9 * buf + 0.5 * g
        expect = expect - 0.1 * buf
        np.testing.assert_allclose(p.numpy(), expect, rtol=1e-14)


def test_param_groups_and_add_param_group():
    a = fg.nn.Parameter(fg.ones(2, dtype="float64"))
    b = fg.nn.Parameter(fg.ones(2, dtype="float64"))
    c = fg.nn.Parameter(fg.ones(2, dtype="float64"))
    opt = fg.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    opt.add_param_group({"params": c, "lr": 0.0})  # lr 0 is allowed
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5, 0.0]
    for p in (a, b, c):
        p.grad = fg.ones(2, dtype="float64")
    opt.step()
    assert a.numpy()[0] == pytest.approx(0.9)
    assert b.numpy()[0] == pytest.approx(0.5)
    assert c.numpy()[0] == 1.0
    opt.param_groups[1]["lr"] = 0.25  # as a scheduler does
    opt.step()
    assert b.numpy()[0] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    opt.zero_grad()
    assert a.grad is None


def test_adamw_decay_groups_like_gpt():
    w = fg.nn.Parameter(fg.ones(3, dtype="float64"))
    bias = fg.nn.Parameter(fg.ones(3, dtype="float64"))
    opt = fg.optim.AdamW(
        [{"params": [w], "weight_decay": 0.1}, {"params": [bias], "weight_decay": 0.0}],
        lr=0.01,
    )
    w.grad = fg.zeros(3, dtype="float64")
    bias.grad = fg.zeros(3, dtype="float64")
    opt.step()
    assert w.numpy()[0] == pytest.approx(1 - 0.01 * 0.1)
    assert bias.numpy()[0] == 1.0


def test_state_dict_roundtrip_continues_identically():
    rng = np.random.default_rng(1)
    init = rng.normal(size=(5,))

    def run(split):
        p = fg.nn.Parameter(fg.tensor(init))
        opt = fg.optim.Adam([p], lr=0.1)
        for step in range(6):
            if step == split:
                sd = opt.state_dict()
                p2 = fg.nn.Parameter(fg.tensor(p.numpy()))
                opt = fg.optim.Adam([p2], lr=0.5)  # hyperparameters come back too
                opt.load_state_dict(sd)
                p = p2
            p.grad = fg.tensor(_grads(step, [(5,)])[0])
            opt.step()
        return p.numpy(), opt

    a, _ = run(None)
    b, opt = run(3)
    np.testing.assert_array_equal(a, b)
    assert opt.param_groups[0]["lr"] == 0.1
    assert set(opt.state_dict()["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}


def test_argument_checks():
    p = [fg.nn.Parameter(fg.ones(2))]
    with pytest.raises(ValueError, match="betas"):
        fg.optim.Adam(p, betas=(1.0, 0.999))
    with pytest.raises(ValueError, match="eps"):
        fg.optim.Adam(p, eps=0.0)
    with pytest.raises(ValueError, match="learning rate"):
        fg.optim.SGD(p, lr=-1.0)
    with pytest.raises(ValueError, match="Nesterov"):
        fg.optim.SGD(p, lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        fg.optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="int64"):
        fg.optim.SGD([fg.tensor([1, 2])], lr=0.1)


SCHEDULES = {
    "StepLR": ({"step_size": 3, "gamma": 0.5}, {}),
    "MultiStepLR": ({"milestones": [2, 5], "gamma": 0.1}, {}),
    "ExponentialLR": ({"gamma": 0.9}, {}),
    "CosineAnnealingLR": ({"T_max": 6, "eta_min": 0.01}, {}),
    "LambdaLR": ({"lr_lambda": lambda e: 1.0 / (e + 1)}, {}),
    "LinearLR": ({"start_factor": 0.25, "total_iters": 4}, {}),
    "OneCycleLR": ({"max_lr": 1.0, "total_steps": 12}, {"momentum": 0.9}),
    "OneCycleLR_adam": ({"max_lr": 0.1, "total_steps": 12, "anneal_strategy": "linear"}, None),
    "MultiplicativeLR": ({"lr_lambda": lambda e: 0.9 if e % 2 else 0.95}, {}),
    "ConstantLR": ({"factor": 0.5, "total_iters": 3}, {}),
    "PolynomialLR": ({"total_iters": 6, "power": 2.0}, {}),
    "CosineAnnealingWarmRestarts": ({"T_0": 3, "T_mult": 2, "eta_min": 0.001}, {}),
    "CosineAnnealingWarmRestarts_one": ({"T_0": 4}, {}),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedules_match_torch(name):
    torch = pytest.importorskip("torch")
    cls = name.split("_")[0]
    kw, okw = SCHEDULES[name]
    adam = okw is None
    fopt = (fg.optim.Adam if adam else fg.optim.SGD)(
        [fg.nn.Parameter(fg.ones(1))], lr=0.1, **(okw or {})
    )
    topt = (torch.optim.Adam if adam else torch.optim.SGD)(
        [torch.ones(1, requires_grad=True)], lr=0.1, **(okw or {})
    )
    fs = getattr(fg.optim.lr_scheduler, cls)(fopt, **kw)
    ts = getattr(torch.optim.lr_scheduler, cls)(topt, **kw)
    for _ in range(11 if cls != "CosineAnnealingWarmRestarts" else 25):
        assert fs.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)
        fg_m = fopt.param_groups[0].get("betas", (fopt.param_groups[0].get("momentum"),))[0]
        t_m = topt.param_groups[0].get("betas", (topt.param_groups[0].get("momentum"),))[0]
        assert fg_m == pytest.approx(t_m, rel=1e-12)
        fopt.step()
        topt.step()
        fs.step()
        ts.step()


def test_warm_restarts_with_fractional_epochs_and_chained_match_torch():
    torch = pytest.importorskip("torch")
    fopt = fg.optim.SGD([fg.nn.Parameter(fg.ones(1))], lr=0.1)
    topt = torch.optim.SGD([torch.ones(1, requires_grad=True)], lr=0.1)
    fs = fg.optim.lr_scheduler.CosineAnnealingWarmRestarts(fopt, 2, 3, 0.01)
    ts = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(topt, 2, 3, 0.01)
    for epoch in (0.5, 1.25, 2.0, 3.7, 9.1, 20.0):
        fs.step(epoch)
        ts.step(epoch)
        assert fs.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)
    libs = []
    for lib, opt in ((fg, fg.optim.SGD), (torch, torch.optim.SGD)):
        p = lib.ones(1, requires_grad=True) if lib is torch else fg.nn.Parameter(fg.ones(1))
        o = opt([p], lr=1.0)
        sch = lib.optim.lr_scheduler
        chained = sch.ChainedScheduler(
            [sch.ConstantLR(o, factor=0.5, total_iters=2), sch.ExponentialLR(o, gamma=0.9)]
        )
        lrs = []
        for _ in range(5):
            o.step()
            chained.step()
            lrs.append(chained.get_last_lr()[0])
        libs.append(lrs)
    assert libs[0] == pytest.approx(libs[1], rel=1e-12)


def test_sequential_and_plateau_match_torch():
    torch = pytest.importorskip("torch")
    fopt = fg.optim.SGD([fg.nn.Parameter(fg.ones(1))], lr=1.0)
    topt = torch.optim.SGD([torch.ones(1, requires_grad=True)], lr=1.0)
    L = fg.optim.lr_scheduler
    T = torch.optim.lr_scheduler
    fs = L.SequentialLR(
        fopt, [L.LinearLR(fopt, 0.1, total_iters=3), L.CosineAnnealingLR(fopt, 5)], [3]
    )
    ts = T.SequentialLR(
        topt, [T.LinearLR(topt, 0.1, total_iters=3), T.CosineAnnealingLR(topt, 5)], [3]
    )
    for _ in range(8):
        assert fs.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)
        fopt.step()
        topt.step()
        fs.step()
        ts.step()
    fp = L.ReduceLROnPlateau(fopt, patience=1, factor=0.5)
    tp = T.ReduceLROnPlateau(topt, patience=1, factor=0.5)
    for m in [1.0, 0.9, 0.95, 0.96, 0.97, 0.5, 0.6, 0.7, 0.8]:
        fp.step(m)
        tp.step(m)
        assert fopt.param_groups[0]["lr"] == pytest.approx(topt.param_groups[0]["lr"])


def test_step_lr_reference_without_torch():
    opt = fg.optim.SGD([fg.nn.Parameter(fg.ones(1))], lr=1.0)
    s = fg.optim.lr_scheduler.StepLR(opt, 2, 0.5)
    lrs = []
    for _ in range(5):
        lrs.append(opt.lr)
        s.step()
    assert lrs == [1.0, 1.0, 0.5, 0.5, 0.25]
    c = fg.optim.lr_scheduler.CosineAnnealingLR(
        fg.optim.SGD([fg.nn.Parameter(fg.ones(1))], lr=1.0), T_max=4
    )
    c.step()
    assert c.get_last_lr()[0] == pytest.approx((1 + math.cos(math.pi / 4)) / 2)


def test_scheduled_lr_reaches_a_traced_step():
    p = fg.nn.Parameter(fg.ones(2, dtype="float64"))
    opt = fg.optim.SGD([p], lr=1.0)
    sched = fg.optim.lr_scheduler.StepLR(opt, 1, 0.5)
    gm = fg.GradManager().attach([p])

    @fg.trace
    def step():
        with gm:
            gm.backward(p.sum())
        opt.step()
        opt.zero_grad()

    values = []
    for _ in range(3):
        step()
        values.append(float(p.numpy()[0]))
        sched.step()
    np.testing.assert_allclose(values, [0.0, -0.5, -0.75])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "make",
    [
        lambda ps: fg.optim.SGD(ps, lr=0.1),
        lambda ps: fg.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01),
        lambda ps: fg.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, maximize=True),
        lambda ps: fg.optim.Adam(ps, lr=0.01, weight_decay=0.1, amsgrad=True),
        lambda ps: fg.optim.AdamW(ps, lr=0.01, betas=(0.8, 0.95), maximize=True),
        lambda ps: fg.optim.RMSprop(ps, lr=0.01, weight_decay=0.1),
        lambda ps: fg.optim.RMSprop(ps, lr=0.01, alpha=0.9, momentum=0.5, centered=True),
        lambda ps: fg.optim.RMSprop(ps, lr=0.01, momentum=0.7),
        lambda ps: fg.optim.RMSprop(ps, lr=0.01, centered=True, maximize=True),
        lambda ps: fg.optim.Adagrad(
            ps, lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.2
        ),
        lambda ps: fg.optim.Adadelta(ps, lr=0.5, rho=0.8, weight_decay=0.1),
    ],
    ids=[
        "sgd",
        "sgd-momentum-dampening-wd",
        "sgd-nesterov-maximize",
        "adam-amsgrad-wd",
        "adamw",
        "rmsprop-wd",
        "rmsprop-centered-momentum",
        "rmsprop-momentum",
        "rmsprop-centered-maximize",
        "adagrad",
        "adadelta",
    ],
)
@pytest.mark.parametrize("shape", [(5, 7), (400, 401)])  # (the second in parallel pieces)
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_fused_update_equals_the_composed_one(make, dtype, shape, device):
    # a contiguous parameter takes the one-pass update (a Rust loop on the CPU; on CUDA one
    # kernel reading the learning rate and step count on the device), a transposed view of
    # the same values the composed tensor ops: six steps agree bit for bit (the kernel rounds
    # every product and sum as the separate ops do)
    if device == "cuda" and not fg.cuda.is_available():
        pytest.skip("needs a CUDA device (or the emulator)")
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shape).astype(dtype)
    fused = fg.tensor(a, device=device)
    composed = fg.tensor(np.ascontiguousarray(a.T), device=device).T
    assert composed.is_contiguous() is False
    assert fg._core._optim_fusable([fused, fused * 1], True)
    opts = [make([fused]), make([composed])]
    for _ in range(6):
        g = rng.standard_normal(shape).astype(dtype)
        for p, opt in zip((fused, composed), opts):
            p.grad = fg.tensor(g, device=device)
            opt.step()
    np.testing.assert_array_equal(fused.numpy(), composed.numpy())


@pytest.mark.skipif(not fg.cuda.is_available(), reason="needs a CUDA device (or the emulator)")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "kind, states, hyper, make",
    [
        (
            "sgd",
            ["buf"],
            {"lr": 0.1, "momentum": 0.9, "dampening": 0.3, "weight_decay": 0.01, "nesterov": 0.0},
            lambda ps: fg.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01),
        ),
        (
            "sgd",
            ["buf"],
            {"lr": 0.1, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.0, "nesterov": 1.0},
            lambda ps: fg.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
        ),
        (
            "adam",
            ["m", "v", "vmax"],
            {
                "lr": 0.01,
                "beta1": 0.9,
                "beta2": 0.999,
                "eps": 1e-8,
                "weight_decay": 0.1,
                "decoupled": 0.0,
            },
            lambda ps: fg.optim.Adam(ps, lr=0.01, weight_decay=0.1, amsgrad=True),
        ),
        (
            "adam",
            ["m", "v", None],
            {
                "lr": 0.01,
                "beta1": 0.8,
                "beta2": 0.95,
                "eps": 1e-8,
                "weight_decay": 0.01,
                "decoupled": 1.0,
            },
            lambda ps: fg.optim.AdamW(ps, lr=0.01, betas=(0.8, 0.95)),
        ),
        (
            "rmsprop",
            ["sq", "buf", "ga"],
            {
                "lr": 0.01,
                "alpha": 0.9,
                "eps": 1e-8,
                "weight_decay": 0.1,
                "momentum": 0.5,
                "centered": 1.0,
            },
            lambda ps: fg.optim.RMSprop(
                ps, lr=0.01, alpha=0.9, momentum=0.5, centered=True, weight_decay=0.1
            ),
        ),
        (
            "adagrad",
            ["sum"],
            {"lr": 0.1, "eps": 1e-10, "weight_decay": 0.1},
            lambda ps: fg.optim.Adagrad(ps, lr=0.1, weight_decay=0.1),
        ),
        (
            "adadelta",
            ["sq", "acc"],
            {"lr": 0.5, "rho": 0.8, "eps": 1e-6, "weight_decay": 0.1},
            lambda ps: fg.optim.Adadelta(ps, lr=0.5, rho=0.8, weight_decay=0.1),
        ),
    ],
    ids=[
        "sgd-dampening-wd",
        "sgd-nesterov",
        "adam-amsgrad-wd",
        "adamw",
        "rmsprop",
        "adagrad",
        "adadelta",
    ],
)
def test_fused_cuda_update_equals_the_composed_cuda_update(kind, states, hyper, make, dtype):
    # the fused step on a CUDA tensor given its numbers from the host (as the Rust crate's
    # step functions take them) gives what the composed optimizer gives on the same device
    # (a transposed view: not fused), bit for bit
    rng = np.random.default_rng(4)
    shape = (300, 7)
    a = rng.standard_normal(shape).astype(dtype)
    fused = fg.tensor(a, device="cuda")
    ref = fg.tensor(np.ascontiguousarray(a.T), device="cuda").T
    assert not fg._core._optim_fusable([fused, fused * 1])  # not without device scalars
    opt = make([ref])
    st = {n: fg.zeros(shape, dtype=dtype, device="cuda") for n in states if n}
    if kind == "adagrad":
        st["sum"] = fg.zeros(shape, dtype=dtype, device="cuda")
    for t in range(1, 7):
        g = rng.standard_normal(shape).astype(dtype)
        ref.grad = fg.tensor(g, device="cuda")
        opt.step()
        h = dict(hyper)
        if kind == "adam":  # as the optimizer computes them, from its step tensor
            step = fg.tensor(float(t), dtype="float64", device="cuda")
            h["bias_correction1"] = float((1.0 - h["beta1"] ** step).item())
            h["bias_correction2_sqrt"] = float((1.0 - h["beta2"] ** step).sqrt().item())
        if kind == "sgd":
            h["first"] = float(t == 1)
        fg._core._optim_step(
            kind, fused, fg.tensor(g, device="cuda"), [st[n] if n else None for n in states], h
        )
    assert str(fused.device).startswith("cuda")
    np.testing.assert_array_equal(fused.numpy(), ref.numpy())


@pytest.mark.skipif(not fg.cuda.is_available(), reason="needs a CUDA device (or the emulator)")
def test_a_cuda_update_whose_step_count_was_put_on_the_cpu_still_steps_right():
    # the fused CUDA update reads the step count on the device; a state replaced by hand with
    # a CPU scalar takes the composed form instead of failing
    rng = np.random.default_rng(8)
    a, g = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    ps = [fg.tensor(a, device="cuda") for _ in range(2)]
    opts = [fg.optim.Adam([p], lr=0.1) for p in ps]
    for _ in range(2):
        for p, opt in zip(ps, opts):
            p.grad = fg.tensor(g, device="cuda")
            opt.step()
        opts[1].state[ps[1]]["step"] = fg.tensor(float(opts[1].t), dtype="float64")
    np.testing.assert_allclose(ps[1].numpy(), ps[0].numpy(), rtol=1e-12, atol=0)
    assert opts[1].t == opts[0].t == 2
