"""LBFGS and ASGD: iterates compared with torch.optim in float64 (when torch is installed) on a
least-squares problem, the Rosenbrock function and a small MLP with a cross-entropy loss;
convergence without torch; state dicts; argument checks."""

from __future__ import annotations

import inspect
import math

import ferrograd as fg
import numpy as np
import pytest

TOL = {"rtol": 1e-10, "atol": 1e-10}


# ----------------------------------------------------------------------------- problems


def _problem(name: str):
    """``(loss(lib, params), [initial arrays])``; ``lib`` is ferrograd or torch, and the same
    expression runs in both."""
    rng = np.random.default_rng(0)
    if name == "lstsq":
        a, b = rng.normal(size=(30, 6)), rng.normal(size=30)

        def f(lib, ps):
            x, c = ps
            return ((lib.tensor(a) @ x + c - lib.tensor(b)) ** 2).mean()

        return f, [rng.normal(size=6), rng.normal(size=())]
    if name == "rosenbrock":

        def f(lib, ps):
            (x,) = ps
            return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()

        return f, [np.array([-1.2, 1.0, -0.5, 0.8])]
    if name == "mlp":
        x = rng.normal(size=(32, 4))
        onehot = np.eye(3)[rng.integers(0, 3, size=32)]

        def f(lib, ps):
            w1, b1, w2, b2 = ps
            z = (lib.tensor(x) @ w1 + b1).tanh() @ w2 + b2
            # cross entropy of the logits z against the labels, and a little weight decay
            # (which keeps the weights from growing without bound: a well-conditioned problem)
            ce = (lib.logsumexp(z, 1) - (z * lib.tensor(onehot)).sum(1)).mean()
            return ce + 0.01 * ((w1**2).sum() + (w2**2).sum())

        init = [rng.normal(size=(4, 8)) * 0.5, np.zeros(8), rng.normal(size=(8, 3)) * 0.5]
        return f, init + [np.zeros(3)]
    raise AssertionError(name)


def _fg_params(init):
    return [fg.tensor(a, dtype="float64", requires_grad=True) for a in init]


def _closure(lib, f, opt, ps):
    def closure():
        opt.zero_grad()
        loss = f(lib, ps)
        loss.backward()
        return loss

    return closure


def _assert_params(fps, tps, what=""):
    for i, (p, t) in enumerate(zip(fps, tps)):
        np.testing.assert_allclose(
            p.numpy(), t.detach().numpy(), **TOL, err_msg=f"{what} parameter {i}"
        )


def _torch_params(torch, init):
    return [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in init]


# ------------------------------------------------------------------------- LBFGS vs torch

LBFGS_CONFIGS = {
    "fixed_step": {"max_iter": 5},
    "strong_wolfe": {"max_iter": 5, "line_search_fn": "strong_wolfe"},
    "wolfe_history2": {"max_iter": 4, "history_size": 2, "line_search_fn": "strong_wolfe"},
    "fixed_history3": {"max_iter": 6, "history_size": 3, "lr": 0.5},
    "wolfe_max_eval": {
        "max_iter": 8,
        "max_eval": 10,
        "history_size": 4,
        "line_search_fn": "strong_wolfe",
    },
}


@pytest.mark.parametrize("config", sorted(LBFGS_CONFIGS))
@pytest.mark.parametrize("problem", ["lstsq", "rosenbrock", "mlp"])
def test_lbfgs_matches_torch(problem, config):
    torch = pytest.importorskip("torch")
    kw = LBFGS_CONFIGS[config]
    f, init = _problem(problem)
    fps, tps = _fg_params(init), _torch_params(torch, init)
    fopt, topt = fg.optim.LBFGS(fps, **kw), torch.optim.LBFGS(tps, **kw)
    for step in range(3):
        lf = fopt.step(_closure(fg, f, fopt, fps))
        lt = topt.step(_closure(torch, f, topt, tps))
        assert float(lf.item()) == pytest.approx(float(lt.item()), rel=1e-10, abs=1e-12)
        _assert_params(fps, tps, f"step {step}:")
        sf, st = fopt.state[fps[0]], topt.state[tps[0]]
        # the same iterations and closure calls: the stopping rules agree
        assert (sf["func_evals"], sf["n_iter"]) == (st["func_evals"], st["n_iter"])
        assert len(sf["old_dirs"]) == len(st["old_dirs"])
    assert sf["n_iter"] > 3


def test_lbfgs_converges_like_torch_on_least_squares():
    # enough iterations to stop on tolerance_grad / tolerance_change (the same rule fires)
    torch = pytest.importorskip("torch")
    f, init = _problem("lstsq")
    for kw in ({"line_search_fn": "strong_wolfe"}, {"tolerance_change": 1e-5}):
        fps, tps = _fg_params(init), _torch_params(torch, init)
        fopt, topt = fg.optim.LBFGS(fps, **kw), torch.optim.LBFGS(tps, **kw)
        for _ in range(3):
            fopt.step(_closure(fg, f, fopt, fps))
            topt.step(_closure(torch, f, topt, tps))
            _assert_params(fps, tps, str(kw))
            sf, st = fopt.state[fps[0]], topt.state[tps[0]]
            assert (sf["func_evals"], sf["n_iter"]) == (st["func_evals"], st["n_iter"])
        assert sf["n_iter"] < 60  # it stopped early (20 iterations a step otherwise)


@pytest.mark.parametrize("fn", ["pseudo_huber", "logcosh"])
def test_lbfgs_line_search_zoom_matches_torch(fn):
    # a first trial step far too long (lr=100) on losses a cubic models badly: the zoom
    # phase and its safeguard against trials next to the bracket's ends both run
    torch = pytest.importorskip("torch")

    def f(lib, ps):
        (x,) = ps
        if fn == "logcosh":
            return (x * 3).cosh().log().sum()
        return ((x**2 + 0.01) ** 0.5).sum()

    init = [np.random.default_rng(1).normal(size=3) * 2]
    kw = {"max_iter": 6, "history_size": 3, "lr": 100, "line_search_fn": "strong_wolfe"}
    fps, tps = _fg_params(init), _torch_params(torch, init)
    fopt, topt = fg.optim.LBFGS(fps, **kw), torch.optim.LBFGS(tps, **kw)
    for _ in range(3):
        fopt.step(_closure(fg, f, fopt, fps))
        topt.step(_closure(torch, f, topt, tps))
        _assert_params(fps, tps)
        sf, st = fopt.state[fps[0]], topt.state[tps[0]]
        assert (sf["func_evals"], sf["n_iter"]) == (st["func_evals"], st["n_iter"])


def test_lbfgs_maximize_matches_torch():
    torch = pytest.importorskip("torch")
    f, init = _problem("lstsq")

    def g(lib, ps):
        return -f(lib, ps)

    if "maximize" not in inspect.signature(torch.optim.LBFGS).parameters:
        pytest.skip(f"this PyTorch ({torch.__version__}) has no LBFGS(maximize=)")
    kw = {"max_iter": 4, "line_search_fn": "strong_wolfe", "maximize": True}
    fps, tps = _fg_params(init), _torch_params(torch, init)
    fopt, topt = fg.optim.LBFGS(fps, **kw), torch.optim.LBFGS(tps, **kw)
    for _ in range(2):
        fopt.step(_closure(fg, g, fopt, fps))
        topt.step(_closure(torch, g, topt, tps))
        _assert_params(fps, tps)


def test_lbfgs_state_dict_layout_matches_torch():
    torch = pytest.importorskip("torch")
    f, init = _problem("mlp")
    kw = {"max_iter": 4, "history_size": 3, "line_search_fn": "strong_wolfe"}
    fps, tps = _fg_params(init), _torch_params(torch, init)
    fopt, topt = fg.optim.LBFGS(fps, **kw), torch.optim.LBFGS(tps, **kw)
    for _ in range(2):
        fopt.step(_closure(fg, f, fopt, fps))
        topt.step(_closure(torch, f, topt, tps))
    fsd, tsd = fopt.state_dict(), topt.state_dict()
    assert list(fsd["state"]) == list(tsd["state"]) == [0]
    fs, ts = fsd["state"][0], tsd["state"][0]
    assert sorted(fs) == sorted(ts)
    for k in ("d", "prev_flat_grad"):
        np.testing.assert_allclose(fs[k].numpy(), ts[k].numpy(), **TOL, err_msg=k)
    for k in ("old_dirs", "old_stps"):
        assert len(fs[k]) == len(ts[k]) == 3
        for a, b in zip(fs[k], ts[k]):
            np.testing.assert_allclose(a.numpy(), b.numpy(), **TOL, err_msg=k)
    np.testing.assert_allclose(fs["ro"], [float(r) for r in ts["ro"]], rtol=1e-9)
    assert len(fs["al"]) == len(ts["al"])
    for k in ("t", "H_diag", "prev_loss"):
        assert fs[k] == pytest.approx(float(ts[k]), rel=1e-9), k
    for k in ("func_evals", "n_iter"):
        assert fs[k] == ts[k]
    tg = {k: v for k, v in tsd["param_groups"][0].items()}
    fg_group = dict(fsd["param_groups"][0])
    if "maximize" not in tg:  # added to PyTorch's LBFGS after 2.11
        assert fg_group.pop("maximize") is False
    assert fg_group == tg


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_state_dict_round_trip(line_search_fn):
    f, init = _problem("rosenbrock")
    kw = {"max_iter": 4, "history_size": 3, "line_search_fn": line_search_fn, "lr": 0.5}
    ps = _fg_params(init)
    opt = fg.optim.LBFGS(ps, **kw)
    assert opt.state_dict()["state"] == {}
    for _ in range(2):
        opt.step(_closure(fg, f, opt, ps))
    sd = opt.state_dict()
    ps2 = [fg.tensor(p.numpy(), dtype="float64", requires_grad=True) for p in ps]
    opt2 = fg.optim.LBFGS(ps2, lr=9.0)  # hyperparameters come from the state dict
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.5 and opt2.param_groups[0]["history_size"] == 3
    # the saved copy is not aliased to the live state
    before = sd["state"][0]["d"].numpy().copy()
    for _ in range(2):
        l1 = opt.step(_closure(fg, f, opt, ps))
        l2 = opt2.step(_closure(fg, f, opt2, ps2))
        assert l1.item() == l2.item()
        for a, b in zip(ps, ps2):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(sd["state"][0]["d"].numpy(), before)
    assert opt.state[ps[0]]["n_iter"] == opt2.state[ps2[0]]["n_iter"]
    # without the state, the run differs (the history matters)
    ps3 = [fg.tensor(p.numpy(), dtype="float64", requires_grad=True) for p in ps]
    opt3 = fg.optim.LBFGS(ps3, **kw)
    opt3.step(_closure(fg, f, opt3, ps3))
    opt.step(_closure(fg, f, opt, ps))
    assert not np.array_equal(ps3[0].numpy(), ps[0].numpy())


def test_lbfgs_state_dict_through_save_and_load(tmp_path):
    f, init = _problem("lstsq")
    ps = _fg_params(init)
    opt = fg.optim.LBFGS(ps, max_iter=3, line_search_fn="strong_wolfe")
    opt.step(_closure(fg, f, opt, ps))
    opt.step(_closure(fg, f, opt, ps))
    path = str(tmp_path / "lbfgs.safetensors")
    fg.save(opt.state_dict(), path)
    ps2 = [fg.tensor(p.numpy(), dtype="float64", requires_grad=True) for p in ps]
    opt2 = fg.optim.LBFGS(ps2, max_iter=3, line_search_fn="strong_wolfe")
    opt2.load_state_dict(fg.load(path))
    opt.step(_closure(fg, f, opt, ps))
    opt2.step(_closure(fg, f, opt2, ps2))
    for a, b in zip(ps, ps2):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


# --------------------------------------------------------------------- LBFGS without torch


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_minimizes_convex_quadratic(line_search_fn):
    rng = np.random.default_rng(3)
    m = rng.normal(size=(8, 8))
    q = m @ m.T + 8 * np.eye(8)  # symmetric positive definite
    b = rng.normal(size=8)
    x_star = np.linalg.solve(q, b)
    qt, bt = fg.tensor(q), fg.tensor(b)
    x = fg.tensor(np.zeros(8), dtype="float64", requires_grad=True)
    opt = fg.optim.LBFGS(
        [x],
        max_iter=100,
        line_search_fn=line_search_fn,
        tolerance_grad=1e-12,
        tolerance_change=1e-20,
    )

    def closure():
        opt.zero_grad()
        loss = 0.5 * (x * (qt @ x)).sum() - (bt * x).sum()
        loss.backward()
        return loss

    for _ in range(5):
        opt.step(closure)
    np.testing.assert_allclose(x.numpy(), x_star, atol=1e-8, rtol=0)


def test_lbfgs_with_grad_manager_closure():
    # the MegEngine-style closure: record with a GradManager, backward into .grad
    a = np.array([[3.0, 1.0], [1.0, 2.0]])
    b = np.array([1.0, -1.0])
    w = fg.tensor(np.array([5.0, 5.0]), dtype="float64")
    at, bt = fg.tensor(a), fg.tensor(b)
    gm = fg.GradManager().attach([w])
    opt = fg.optim.LBFGS([w], line_search_fn="strong_wolfe")
    calls = []

    def closure():
        opt.zero_grad()
        with gm:
            loss = 0.5 * (w * (at @ w)).sum() - (bt * w).sum()
            gm.backward(loss)
        calls.append(loss.item())
        return loss

    first = opt.step(closure)
    assert first.item() == calls[0]
    assert len(calls) == opt.state[w]["func_evals"] <= 25
    np.testing.assert_allclose(w.numpy(), np.linalg.solve(a, b), atol=1e-8)


def test_lbfgs_stops_at_a_stationary_point_and_on_max_eval():
    x = fg.tensor(np.array([1.0, 1.0]), dtype="float64", requires_grad=True)
    opt = fg.optim.LBFGS([x])
    calls = []

    def closure():
        opt.zero_grad()
        loss = ((x - 1.0) ** 2).sum()
        loss.backward()
        calls.append(1)
        return loss

    opt.step(closure)
    assert len(calls) == 1 and opt.state[x]["n_iter"] == 0  # the gradient is already 0
    np.testing.assert_array_equal(x.numpy(), [1.0, 1.0])
    f, init = _problem("rosenbrock")
    ps = _fg_params(init)
    opt = fg.optim.LBFGS(ps, max_iter=50, max_eval=7, line_search_fn="strong_wolfe")
    opt.step(_closure(fg, f, opt, ps))
    assert opt.state[ps[0]]["func_evals"] <= 7 + 1


def test_lbfgs_parameter_without_grad_and_returned_loss():
    x = fg.tensor(np.array([2.0, -1.0]), dtype="float64", requires_grad=True)
    unused = fg.tensor(np.array([7.0]), dtype="float64", requires_grad=True)
    opt = fg.optim.LBFGS([x, unused], line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = (x**2).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert isinstance(loss, fg.Tensor) and loss.item() == 5.0
    np.testing.assert_allclose(x.numpy(), [0.0, 0.0], atol=1e-8)
    np.testing.assert_array_equal(unused.numpy(), [7.0])


# --------------------------------------------------------------------------- ASGD vs torch

ASGD_CONFIGS = {
    "default": {},
    "weight_decay": {"weight_decay": 0.05, "lambd": 1e-3},
    "averaging": {"t0": 2.0, "alpha": 0.5, "weight_decay": 0.01},
    "maximize": {"maximize": True, "weight_decay": 0.1, "t0": 3},
}
ASGD_LR = {"lstsq": 0.05, "rosenbrock": 1e-3, "mlp": 0.5}


@pytest.mark.parametrize("config", sorted(ASGD_CONFIGS))
@pytest.mark.parametrize("problem", ["lstsq", "rosenbrock", "mlp"])
def test_asgd_matches_torch(problem, config):
    torch = pytest.importorskip("torch")
    kw = dict(ASGD_CONFIGS[config], lr=ASGD_LR[problem])
    f, init = _problem(problem)
    sign = -1.0 if kw.get("maximize") else 1.0
    fps, tps = _fg_params(init), _torch_params(torch, init)
    fopt, topt = fg.optim.ASGD(fps, **kw), torch.optim.ASGD(tps, foreach=False, **kw)
    for step in range(8):
        for lib, opt, ps in ((fg, fopt, fps), (torch, topt, tps)):
            opt.zero_grad()
            (sign * f(lib, ps)).backward()
            opt.step()
        _assert_params(fps, tps, f"step {step}:")
    for p, t in zip(fps, tps):
        sf, st = fopt.state[p], topt.state[t]
        assert sorted(sf) == sorted(st)
        np.testing.assert_allclose(sf["ax"].numpy(), st["ax"].numpy(), **TOL)
        for k in ("step", "eta", "mu"):
            assert sf[k].item() == st[k].item(), k
            assert sf[k].dtype.name == str(st[k].dtype).replace("torch.", ""), k
    assert sorted(fopt.state_dict()["param_groups"][0]) == sorted(
        topt.state_dict()["param_groups"][0]
    )


def test_asgd_reference_without_torch():
    lr, lambd, alpha, t0, wd = 0.1, 0.01, 0.75, 2.0, 0.1
    p = fg.nn.Parameter(fg.tensor([1.0, -2.0], dtype="float64"))
    opt = fg.optim.ASGD([p], lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=wd)
    # eta and mu are kept in the default float dtype (float32), as PyTorch's
    f32 = np.float32 if fg.get_default_dtype() == fg.float32 else np.float64
    x, ax, eta, mu = np.array([1.0, -2.0]), np.zeros(2), float(f32(lr)), 1.0
    for step in range(1, 6):
        g = np.array([0.5, 1.5]) * step
        p.grad = fg.tensor(g)
        opt.step()
        g = g + wd * x
        x = x * (1 - lambd * eta) - eta * g
        ax = x.copy() if mu == 1 else ax + (x - ax) * mu
        eta = float(f32(lr / (1 + lambd * lr * step) ** alpha))
        mu = float(f32(1 / max(1, step - t0)))
        np.testing.assert_allclose(p.numpy(), x, rtol=1e-14)
        np.testing.assert_allclose(opt.state[p]["ax"].numpy(), ax, rtol=1e-14)
        assert opt.state[p]["eta"].item() == eta and opt.state[p]["mu"].item() == mu


def test_asgd_state_dict_round_trip():
    f, init = _problem("mlp")
    kw = {"lr": 0.3, "t0": 1, "weight_decay": 0.01}
    ps = _fg_params(init)
    opt = fg.optim.ASGD(ps, **kw)

    def step(opt, ps):
        opt.zero_grad()
        f(fg, ps).backward()
        opt.step()

    for _ in range(3):
        step(opt, ps)
    sd = opt.state_dict()
    assert sorted(sd["state"][0]) == ["ax", "eta", "mu", "step"]
    ps2 = [fg.tensor(p.numpy(), dtype="float64", requires_grad=True) for p in ps]
    opt2 = fg.optim.ASGD(ps2, lr=1.0)
    opt2.load_state_dict(sd)
    for _ in range(3):
        step(opt, ps)
        step(opt2, ps2)
    for a, b in zip(ps, ps2):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for a, b in zip(ps, ps2):
        for k in ("ax", "eta", "mu", "step"):
            np.testing.assert_array_equal(opt.state[a][k].numpy(), opt2.state[b][k].numpy())


def test_asgd_eta_starts_at_the_first_steps_lr():
    # PyTorch makes the state at the first step: a learning rate set before it is used
    p = fg.nn.Parameter(fg.tensor([1.0], dtype="float64"))
    opt = fg.optim.ASGD([p], lr=0.5, lambd=0.0)
    opt.lr = 0.25
    p.grad = fg.tensor([1.0], dtype="float64")
    opt.step()
    np.testing.assert_allclose(p.numpy(), [0.75], rtol=1e-15)


# --------------------------------------------------------------------------- bad arguments


def _x():
    return fg.tensor(np.zeros(2), dtype="float64", requires_grad=True)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"lr": -1.0}, "learning rate"),
        ({"max_iter": 0}, "LBFGS: max_iter must be a positive integer, got 0"),
        ({"max_iter": 2.5}, "LBFGS: max_iter"),
        ({"max_eval": 0}, "LBFGS: max_eval must be a positive integer, got 0"),
        ({"history_size": 0}, "LBFGS: history_size must be a positive integer, got 0"),
        ({"tolerance_grad": -1e-3}, "LBFGS: tolerance_grad must be non-negative, got -0.001"),
        ({"tolerance_change": -1.0}, "LBFGS: tolerance_change must be non-negative"),
        ({"line_search_fn": "armijo"}, "LBFGS: line_search_fn must be None or 'strong_wolfe'"),
    ],
)
def test_lbfgs_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        fg.optim.LBFGS([_x()], **kw)


def test_lbfgs_misuse():
    with pytest.raises(ValueError, match="LBFGS doesn't support per-parameter options"):
        fg.optim.LBFGS([{"params": [_x()]}, {"params": [_x()], "lr": 0.1}])
    opt = fg.optim.LBFGS([_x()])
    with pytest.raises(ValueError, match="parameter groups"):
        opt.add_param_group({"params": [_x()]})
    with pytest.raises(TypeError, match="LBFGS.step: a closure"):
        opt.step()
    with pytest.raises(TypeError, match="LBFGS.step: the closure must return the loss"):
        opt.step(lambda: None)
    with pytest.raises(ValueError, match="LBFGS: optimizer got an empty parameter list"):
        fg.optim.LBFGS([])
    with pytest.raises(TypeError, match="LBFGS: parameter 0"):
        fg.optim.LBFGS([fg.tensor([1, 2])])
    with pytest.raises(ValueError, match="LBFGS.load_state_dict"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0, 1]}]})
    bad = {"state": {0: {"d": fg.zeros(5, dtype="float64")}}, "param_groups": [{"params": [0]}]}
    with pytest.raises(ValueError, match=r"LBFGS.load_state_dict: state 'd' has shape \[5\]"):
        opt.load_state_dict(bad)


@pytest.mark.parametrize(
    "kw, exc, match",
    [
        ({"lr": -0.1}, ValueError, "learning rate"),
        ({"lambd": -1e-4}, ValueError, "ASGD: lambd must be non-negative, got -0.0001"),
        ({"alpha": -0.5}, ValueError, "ASGD: alpha must be non-negative, got -0.5"),
        ({"weight_decay": -1.0}, ValueError, "ASGD: weight_decay must be non-negative"),
        ({"t0": math.nan}, ValueError, "ASGD: t0"),
        ({"t0": "1e6"}, TypeError, "ASGD: t0 must be a number, got str"),
    ],
)
def test_asgd_bad_arguments(kw, exc, match):
    with pytest.raises(exc, match=match):
        fg.optim.ASGD([_x()], **kw)
