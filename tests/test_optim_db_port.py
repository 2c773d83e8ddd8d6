"""Optimizers as PyTorch's optim_db samples them (torch.testing._internal.common_optimizers)
and test_optim.py runs them: every CPU configuration of every optimizer ferrograd has, with
the implementation switches (foreach, fused, differentiable), runs the same trajectory on
torch and ferrograd from the same float64 weights (two parameter groups with different
learning rates, one parameter that never gets a gradient) and the parameters and the whole
state dict agree after every step; the error inputs raise torch's exception types; a
``differentiable=True`` step passes gradients to the old parameters, the gradients, the state
and a learning-rate tensor as torch's does; a group loaded from an older state dict gets
torch's values for the flags it lacks."""

from __future__ import annotations

import copy
import inspect
import warnings

import ferrograd as fg
import numpy as np
import pytest

RTOL, ATOL = 1e-10, 1e-12

# ---------------------------------------------------------------------------- the configs

# optim_db's CPU samples (optim_inputs_func_*); ("tensor", x) stands for torch.tensor(x), a
# float32 0-d tensor
_SAMPLES: dict[str, list[dict]] = {
    "Adadelta": [
        {},
        {"lr": 0.01},
        {"weight_decay": 0.1},
        {"maximize": True},
        {"weight_decay": 0.1, "maximize": True},
        {"rho": 0.95, "weight_decay": 0.9},
    ],
    "Adafactor": [
        {},
        {"weight_decay": 0.1, "lr": 0.01},
        {"weight_decay": 0.1, "maximize": True},
        {"beta2_decay": -1.0},
        {"d": 1.5},
    ],
    "Adagrad": [
        {},
        {"weight_decay": 0.1},
        {"weight_decay": 0.1, "maximize": True},
        {"lr": 0.1},
        {"initial_accumulator_value": 0.1, "weight_decay": 0.1},
        {"lr": 0.1, "lr_decay": 0.5, "weight_decay": 0.1},
        {"lr": ("tensor", 0.001)},
    ],
    "Adam": [
        {},
        {"lr": 0.01},
        {"weight_decay": 0.1},
        {"weight_decay": 0.1, "maximize": True},
        {"weight_decay": 0.1, "amsgrad": True},
    ],
    "Adamax": [
        {},
        {"lr": 0.1},
        {"weight_decay": 0.1},
        {"maximize": True},
        {"weight_decay": 0.1, "maximize": True},
    ],
    "ASGD": [
        {},
        {"lambd": 0.1},
        {"lr": 0.02},
        {"t0": 100},
        {"maximize": True},
        {"weight_decay": 0.1},
        {"weight_decay": 0.1, "maximize": True},
    ],
    "LBFGS": [
        {},
        {"lr": 0.01},
        {"lr": ("tensor", 0.001)},
        {"tolerance_grad": 1e-6},
        {"line_search_fn": "strong_wolfe"},
        {"maximize": True},
        {"maximize": True, "line_search_fn": "strong_wolfe"},
    ],
    "NAdam": [
        {},
        {"lr": 0.01},
        {"momentum_decay": 6e-3},
        {"weight_decay": 0.1},
        {"weight_decay": 0.1, "momentum_decay": 6e-3},
        {"weight_decay": 0.1, "momentum_decay": 6e-3, "decoupled_weight_decay": True},
        {"weight_decay": 0.1, "maximize": True},
    ],
    "RAdam": [
        {},
        {"lr": 2e-3},
        {"eps": 1e-6},
        {"weight_decay": 0.1},
        {"weight_decay": 0.1, "decoupled_weight_decay": True},
        {"weight_decay": 0.1, "maximize": True},
    ],
    "RMSprop": [
        {},
        {"lr": 1e-3},
        {"weight_decay": 0.1},
        {"maximize": True},
        {"weight_decay": 0.1, "centered": True},
        {"maximize": True, "weight_decay": 0.1},
        {"weight_decay": 0.1, "centered": True, "momentum": 0.1},
        {"weight_decay": 0.1, "centered": True, "momentum": 0.1, "maximize": True},
    ],
    "Rprop": [
        {},
        {"lr": 2e-4},
        {"etas": (0.5, 1.5)},
        {"step_sizes": (2e-6, 100)},
        {"maximize": True},
    ],
    "SGD": [
        {},
        {"lr": 1e-2},
        {"lr": ("tensor", 0.001)},
        {"weight_decay": 0.5},
        {"momentum": 0.9},
        {"weight_decay": 0.1, "maximize": True},
        {"momentum": 0.9, "dampening": 0.5},
        {"momentum": 0.9, "weight_decay": 0.1},
        {"momentum": 0.9, "nesterov": True, "weight_decay": 0.1},
    ],
}
_SAMPLES["AdamW"] = _SAMPLES["Adam"]

# the switches each optimizer takes (optim_db's supported_impls; fused on the CPU)
_IMPLS = {
    "Adadelta": ("foreach", "differentiable"),
    "Adafactor": ("foreach",),
    "Adagrad": ("foreach", "differentiable", "fused"),
    "Adam": ("foreach", "differentiable", "fused"),
    "AdamW": ("foreach", "differentiable", "fused"),
    "Adamax": ("foreach", "differentiable"),
    "ASGD": ("foreach", "differentiable"),
    "LBFGS": (),
    "NAdam": ("foreach", "differentiable"),
    "RAdam": ("foreach", "differentiable"),
    "RMSprop": ("foreach", "differentiable"),
    "Rprop": ("foreach", "differentiable"),
    "SGD": ("foreach", "differentiable", "fused"),
}


def _configs() -> list:
    """Each sample with every switch off, then with each one on (as torch's
    _get_optim_inputs_including_global_cliquey_kwargs)."""
    out = []
    for name, samples in _SAMPLES.items():
        impls = _IMPLS[name]
        for i, kw in enumerate(samples):
            base = {**kw, **{f: False for f in impls}}
            variants = [base] + [{**base, f: True} for f in impls]
            for v in variants:
                on = [f for f in impls if v[f]]
                out.append(pytest.param(name, v, id=f"{name}-{i}-{on[0] if on else 'plain'}"))
    return out


def _value(v, lib):
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "tensor":
        return lib.tensor(v[1])
    return v


# ------------------------------------------------------------------------- the problem

_rng = np.random.default_rng(0)
_X = _rng.normal(size=(5, 3))
_INIT = {
    "w1": _rng.normal(size=(4, 3)) * 0.5,
    "b1": _rng.normal(size=(4,)) * 0.1,
    "frozen": _rng.normal(size=(3,)),  # in the optimizer, never given a gradient
    "w2": _rng.normal(size=(2, 4)) * 0.5,
    "b2": _rng.normal(size=(2,)) * 0.1,
}


def _loss(lib, ps, sign):
    h = (lib.tensor(_X) @ ps["w1"].T + ps["b1"]).tanh()
    z = h @ ps["w2"].T + ps["b2"]
    return ((z * z).sum() * 0.5 + z.sin().sum()) * sign


def _setup(lib, name, kw, one_group):
    f64 = "float64" if lib is fg else lib.float64
    ps = {k: lib.tensor(v, dtype=f64, requires_grad=True) for k, v in _INIT.items()}
    if kw.get("differentiable"):
        # (a recorded step updates non-leaf parameters, as in torch's own tests)
        ps = {k: v * 1.0 for k, v in ps.items()}
        for v in ps.values():
            v.retain_grad()
    kw = {k: _value(v, lib) for k, v in kw.items()}
    cls = getattr(lib.optim, name)
    if one_group:
        groups = list(ps.values())
    else:
        lr = kw.get("lr", inspect.signature(cls).parameters["lr"].default)
        second = {"params": [ps["w2"], ps["b2"]], "lr": lr * 0.5}
        groups = [{"params": [ps["w1"], ps["b1"], ps["frozen"]]}, second]
    return ps, cls(groups, **kw)


def _known_representation(where: str) -> bool:
    """State entries whose representation differs from torch's on purpose (values agree):
    a tensor learning rate is kept as its number in the group, the step count is float64
    (torch: the default float dtype), and LBFGS keeps its scalars as Python floats."""
    return any(k in where for k in ("[lr]", "[step]", "[al]", "[ro]", "[t]", "[H_diag]"))


def _compare(t, f, where, rtol=RTOL):
    import torch

    if isinstance(t, (list, tuple)):
        assert isinstance(f, (list, tuple)) and len(t) == len(f), where
        for i, (a, b) in enumerate(zip(t, f)):
            _compare(a, b, f"{where}[{i}]", rtol)
        return
    if isinstance(t, torch.Tensor) or isinstance(f, fg.Tensor):
        a = t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
        b = f.detach().numpy() if isinstance(f, fg.Tensor) else np.asarray(f)
        if not _known_representation(where):
            assert isinstance(t, torch.Tensor) and isinstance(f, fg.Tensor), where
            assert str(t.dtype).removeprefix("torch.") == f.dtype.name, where
        if b.dtype == np.float32:
            # a float32 state entry (ASGD's eta and mu, NAdam's mu_product): to float32's
            # precision (torch's foreach ASGD rounds eta differently from its for-loop)
            rtol = 1e-6
        elif any(k in where for k in ("[al]", "[ro]", "[H_diag]")):
            # L-BFGS's two-loop coefficients, curvature reciprocals and scale: dot products
            # with cancellation, whose summation order differs
            rtol = 1e-7
        atol = ATOL if rtol == RTOL else 1e-8
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, err_msg=where)
        return
    if isinstance(t, float) and isinstance(f, float):
        np.testing.assert_allclose(f, t, rtol=RTOL, atol=ATOL, err_msg=where)
        return
    assert t == f, f"{where}: torch {t!r}, ferrograd {f!r}"
    if not _known_representation(where):
        assert type(t) is type(f), f"{where}: torch {type(t).__name__}, ferrograd {type(f)}"


def _compare_state_dicts(tsd, fsd, where, rtol=RTOL):
    assert sorted(tsd["state"]) == sorted(fsd["state"]), where
    for i, ts in tsd["state"].items():
        assert sorted(ts) == sorted(fsd["state"][i]), f"{where} state[{i}]"
        for k, v in ts.items():
            _compare(v, fsd["state"][i][k], f"{where} state[{i}][{k}]", rtol)
    assert len(tsd["param_groups"]) == len(fsd["param_groups"])
    for gi, (tg, fgp) in enumerate(zip(tsd["param_groups"], fsd["param_groups"])):
        assert sorted(tg) == sorted(fgp), f"{where} group {gi}"
        for k, v in tg.items():
            _compare(v, fgp[k], f"{where} group{gi}[{k}]")


def _run_both(name, kw, one_group, steps=6, rtol=RTOL):
    torch = pytest.importorskip("torch")
    # (maximizing: the loss is negated, so that both problems stay bounded)
    sign = -1.0 if kw.get("maximize") else 1.0
    runs = [(lib, *_setup(lib, name, kw, one_group)) for lib in (torch, fg)]
    for step in range(steps):
        for lib, ps, opt in runs:

            def closure(lib=lib, ps=ps, opt=opt):
                opt.zero_grad()
                loss = _loss(lib, ps, sign)
                loss.backward(retain_graph=bool(kw.get("differentiable")))
                return loss

            if name == "LBFGS":
                opt.step(closure)
            else:
                closure()
                opt.step()
        (_, tps, topt), (_, fps, fopt) = runs
        for k in _INIT:
            np.testing.assert_allclose(
                fps[k].detach().numpy(),
                tps[k].detach().numpy(),
                rtol=rtol,
                atol=ATOL if rtol == RTOL else 1e-8,
                err_msg=f"step {step}: parameter {k}",
            )
        _compare_state_dicts(topt.state_dict(), fopt.state_dict(), f"step {step}", rtol)


# torch's own differentiable steps of these fail when recorded over several steps (an
# in-place update of a tensor its previous step saved)
_TORCH_CANNOT = (
    {("Adamax", i) for i in range(5)}
    | {("RMSprop", i) for i in (4, 6, 7)}
    | {("Adam", 4), ("AdamW", 4)}
)


@pytest.mark.parametrize(("name", "kw"), _configs())
def test_optim_db_trajectory_and_state_dict_match_torch(name, kw, request):
    torch = pytest.importorskip("torch")
    index = int(request.node.callspec.id.split("-")[1])
    if kw.get("differentiable") and (name, index) in _TORCH_CANNOT:
        pytest.skip("torch's differentiable step of this configuration fails")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not kw.get("differentiable"):
            # (torch's foreach ASGD rounds its float32 eta differently from its for-loop,
            # which ferrograd's update is: the parameters then agree to float32's eta)
            rtol = 1e-6 if name == "ASGD" and kw.get("foreach") else RTOL
            _run_both(name, kw, one_group=name == "LBFGS", rtol=rtol)
            return
        # torch's differentiable Adam and NAdam compute the bias corrections (NAdam: the
        # momentum product) with its step tensor, in the default float dtype: compared in
        # float64, where both compute in float64
        old_t, old_f = torch.get_default_dtype(), fg.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        fg.set_default_dtype("float64")
        try:
            _run_both(name, kw, one_group=False)
        finally:
            torch.set_default_dtype(old_t)
            fg.set_default_dtype(old_f)


@pytest.mark.parametrize(
    "name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Rprop", "NAdam"]
)
def test_one_group_trajectory_matches_torch(name):
    _run_both(name, {}, one_group=True)


# --------------------------------------------------------------------- constructor defaults


@pytest.mark.parametrize("name", sorted(_SAMPLES))
def test_default_hyperparameters_are_torchs_values_and_types(name):
    """An optimizer's groups hold torch's default values with torch's types (``momentum``
    is the int 0, as printed and saved by torch)."""
    torch = pytest.importorskip("torch")
    t = inspect.signature(getattr(torch.optim, name)).parameters
    f = inspect.signature(getattr(fg.optim, name)).parameters
    for k, p in t.items():
        if k == "params":
            continue
        assert k in f, k
        d = f[k].default
        assert d == p.default and type(d) is type(p.default), (k, p.default, d)
        if isinstance(d, tuple):
            assert [type(x) for x in d] == [type(x) for x in p.default], k


# --------------------------------------------------------------------------- error inputs


def _param(lib):
    return lib.tensor(np.ones((1, 1)), requires_grad=True)


_ERRORS = [
    ("Adam", {"lr": 1e-2, "betas": (0.9, ("tensor", 0.99))}, ValueError, "both floats or both"),
    ("Adam", {"lr": 1e-2, "betas": (("tensor", 0.9), 0.99)}, ValueError, "both floats or both"),
    ("AdamW", {"lr": 1e-2, "betas": (0.9, ("tensor", 0.99))}, ValueError, "both floats or both"),
    ("Adam", {"lr": ("tensor", 0.001), "foreach": True}, ValueError, "lr as a Tensor"),
    ("AdamW", {"lr": ("tensor", 0.001), "foreach": True}, ValueError, "lr as a Tensor"),
    (
        "Adam",
        {"betas": (("tensor", 0.9), ("tensor", 0.99)), "foreach": True},
        ValueError,
        r"betas\[0\] as a Tensor",
    ),
    ("Adam", {"fused": True, "differentiable": True}, RuntimeError, "fused.*differentiable"),
    ("SGD", {"fused": True, "differentiable": True}, RuntimeError, "fused.*differentiable"),
]


@pytest.mark.parametrize(("name", "kw", "exc", "match"), _ERRORS)
def test_error_inputs_raise_torchs_exception(name, kw, exc, match):
    torch = pytest.importorskip("torch")
    for lib in (torch, fg):
        args = {
            k: tuple(_value(x, lib) for x in v) if k == "betas" else _value(v, lib)
            for k, v in kw.items()
        }
        with pytest.raises(exc, match=match):
            getattr(lib.optim, name)([_param(lib)], **args)


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop", "Rprop", "LBFGS", "Adafactor"])
def test_a_set_of_parameters_warns_as_torch(name):
    torch = pytest.importorskip("torch")
    for lib in (torch, fg):
        with pytest.warns(FutureWarning, match="ordered collections"):
            getattr(lib.optim, name)({_param(lib), _param(lib)})


@pytest.mark.parametrize("name", ["SGD", "Adam", "Adagrad", "ASGD"])
def test_a_learning_rate_tensor_must_have_one_element(name):
    torch = pytest.importorskip("torch")
    for lib in (torch, fg):
        with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
            getattr(lib.optim, name)([_param(lib)], lr=lib.tensor([1e-3, 1e-3]))


# ----------------------------------------------------------------- older state dicts


@pytest.mark.parametrize(
    ("name", "kw"),
    [
        ("SGD", {"maximize": True, "lr": 0.01}),
        ("SGD", {"momentum": 0.9, "nesterov": True}),
        ("Adam", {"maximize": True, "amsgrad": True, "weight_decay": 0.1}),
        ("AdamW", {"maximize": True}),
        ("RMSprop", {"maximize": True, "momentum": 0.5, "centered": True}),
        ("NAdam", {"weight_decay": 0.1, "decoupled_weight_decay": True}),
        ("RAdam", {"weight_decay": 0.1, "decoupled_weight_decay": True}),
        ("Rprop", {"maximize": True}),
        ("ASGD", {"maximize": True}),
        ("Adamax", {"maximize": True}),
    ],
)
def test_a_group_from_an_older_state_dict_gets_torchs_flags(name, kw):
    """A saved group without a newer flag (maximize, nesterov, amsgrad, centered, momentum,
    decoupled_weight_decay, ...) loads with torch's value for state dicts that predate the
    flag (False, or 0), not the value the loading optimizer was made with; AdamW stays
    decoupled. The steps after loading agree with torch's."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    w0, x0 = rng.normal(size=(3, 4)), rng.normal(size=4)
    out = []
    for lib in (torch, fg):
        w = lib.tensor(w0, requires_grad=True)
        opt = getattr(lib.optim, name)([w], **kw)

        def step(opt=opt, w=w, lib=lib):
            opt.zero_grad()
            ((w @ lib.tensor(x0)) ** 2).sum().backward()
            opt.step()

        for _ in range(3):
            step()
        sd = opt.state_dict()
        for g in sd["param_groups"]:
            for flag in (
                "maximize",
                "foreach",
                "differentiable",
                "capturable",
                "fused",
                "decoupled_weight_decay",
                "nesterov",
                "amsgrad",
                "centered",
            ):
                g.pop(flag, None)
            if name == "RMSprop":
                g.pop("momentum", None)
        opt.load_state_dict(sd)
        for _ in range(3):
            step()
        out.append((w.detach().numpy(), dict(opt.param_groups[0])))
    (tw, tg), (fw, fgp) = out
    np.testing.assert_allclose(fw, tw, rtol=RTOL, atol=ATOL)
    for k, v in tg.items():
        if k not in ("params", "lr"):
            assert fgp[k] == v, (k, v, fgp[k])


# ------------------------------------------------------------------ differentiable steps

_N = 6


def _diff_state(name, kw, rng):
    def r():
        return rng.uniform(0.1, 1.0, size=_N)

    if name == "SGD":
        return {"momentum_buffer": r()}
    if name in ("Adam", "AdamW"):
        st = {"step": 10.0, "exp_avg": r(), "exp_avg_sq": r()}
        if kw.get("amsgrad"):
            st["max_exp_avg_sq"] = r()
        return st
    return {
        "RMSprop": {
            "step": 0.0,
            "square_avg": r() + 1,
            "momentum_buffer": r(),
            "grad_avg": r() / 100,
        },
        "Adadelta": {"step": 10.0, "square_avg": r(), "acc_delta": r()},
        "Adagrad": {"step": 10.0, "sum": r()},
        "Adamax": {"step": 10.0, "exp_avg": r(), "exp_inf": r()},
        "ASGD": {"step": 10.0, "eta": 0.9, "mu": 1.0, "ax": r()},
        "Rprop": {"step": 10.0, "prev": r() - 0.5, "step_size": r()},
        "NAdam": {"step": 10.0, "exp_avg": r(), "exp_avg_sq": r(), "mu_product": 1.0},
        "RAdam": {"step": 10.0, "exp_avg": r(), "exp_avg_sq": r()},
    }[name]


_NOT_CONTINUOUS = ("step", "eta", "mu")


def _diff_step(lib, name, kw, p0, g0, st0, w, lr_grad):
    """torch's test/optim/test_optim.py _diff_fn: one step of an optimizer made with
    ``differentiable=True`` from a given state, then the gradient of a weighted sum of the
    new parameter and state with respect to everything that went in."""
    f64 = "float64" if lib is fg else lib.float64

    def leaf(a, grad=True):
        return lib.tensor(np.array(a, dtype=np.float64), dtype=f64, requires_grad=grad)

    p_in, g_in = leaf(p0), leaf(g0)
    st_in = {k: leaf(v, k not in _NOT_CONTINUOUS) for k, v in st0.items()}
    kw = dict(kw)
    lr_in = None
    if lr_grad:
        lr_in = kw["lr"] = leaf(kw["lr"])
    p = p_in * 1.0
    p.grad = g_in * 1.0
    opt = getattr(lib.optim, name)([p], differentiable=True, **kw)
    given = {}
    for k, v in st_in.items():
        given[k] = v * 1.0 if v.requires_grad else (v.clone() if lib is not fg else v.copy())
    opt.state[p].update(given)
    opt.step()
    outs = [p] + [v for v in opt.state[p].values() if isinstance(v, type(p)) and v.requires_grad]
    total = sum(
        (o * lib.tensor(w[: o.numel()].reshape(tuple(o.shape)), dtype=f64)).sum() for o in outs
    )
    total.backward()
    ins = [p_in, g_in] + [v for v in st_in.values() if v.requires_grad]
    ins += [lr_in] if lr_in is not None else []
    grads = [
        np.zeros(np.shape(t.detach().numpy())) if t.grad is None else t.grad.numpy() for t in ins
    ]
    return p.detach().numpy(), len(outs), grads


_DIFF_CASES = [
    ("SGD", {"lr": 0.9}),
    ("SGD", {"lr": 0.9, "momentum": 0.9, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.9, "momentum": 0.9, "nesterov": True, "maximize": True}),
    ("Adam", {"lr": 0.9, "amsgrad": True}),
    ("Adam", {"lr": 0.9, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.9, "weight_decay": 0.1, "maximize": True, "decoupled_weight_decay": True}),
    ("AdamW", {"lr": 0.9, "amsgrad": True}),
    ("AdamW", {"lr": 0.9, "weight_decay": 0.1}),
    (
        "RMSprop",
        {"lr": 0.9, "maximize": True, "momentum": 0.9, "centered": True, "weight_decay": 0.1},
    ),
    ("Adadelta", {"lr": 0.9, "weight_decay": 0.1}),
    ("Adagrad", {"lr": 0.9, "weight_decay": 0.1, "lr_decay": 0.1}),
    ("Adamax", {"lr": 0.9, "weight_decay": 0.1}),
    ("ASGD", {"lr": 0.9, "weight_decay": 0.1, "t0": 5}),
    ("Rprop", {"lr": 0.9}),
    ("NAdam", {"lr": 0.9, "decoupled_weight_decay": True, "weight_decay": 0.1}),
    ("RAdam", {"lr": 0.9, "weight_decay": 0.1, "decoupled_weight_decay": True}),
]


@pytest.mark.parametrize(("name", "kw"), _DIFF_CASES)
def test_differentiable_step_gradients_match_torch(name, kw):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(abs(hash((name, str(sorted(kw))))) % 2**32)
    st0 = _diff_state(name, kw, rng)
    p0, g0, w = rng.uniform(-1, 1, _N), rng.uniform(-1, 1, _N), rng.normal(size=_N)
    # (torch's SGD, Adam and AdamW take a learning-rate tensor that requires grad)
    for lr_grad in (False, True) if name in ("SGD", "Adam", "AdamW") else (False,):
        tp, tn, tg = _diff_step(torch, name, kw, p0, g0, st0, w, lr_grad)
        fp, fn, fgr = _diff_step(fg, name, kw, p0, g0, st0, w, lr_grad)
        np.testing.assert_allclose(fp, tp, rtol=RTOL, atol=ATOL)
        assert fn == tn
        for i, (a, b) in enumerate(zip(tg, fgr)):
            np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12, err_msg=f"input {i}")


def _two_steps_meta_loss(lib, name, hyper):
    """torch's _multistep_backprop_diff_hyperparams_fn: two steps whose gradients are
    recorded (create_graph), then the last loss's gradients with respect to the
    hyperparameters given as tensors that require grad (lr, weight_decay, betas)."""
    f64 = "float64" if lib is fg else lib.float64
    rng = np.random.default_rng(3)
    p0 = lib.tensor(rng.uniform(size=10), dtype=f64, requires_grad=True)

    def leaf(v):
        return lib.tensor(v, dtype=f64, requires_grad=True)

    kw = {k: tuple(map(leaf, v)) if k == "betas" else leaf(v) for k, v in hyper.items()}
    wrt = [t for v in kw.values() for t in (v if isinstance(v, tuple) else (v,))]
    p = p0 * 1.0
    opt = getattr(lib.optim, name)([p], differentiable=True, **kw)
    if name != "SGD":
        opt.state[p].update(
            {
                "step": lib.tensor(10.0, dtype=f64),
                "exp_avg": lib.tensor(rng.uniform(size=10), dtype=f64, requires_grad=True) * 1,
                "exp_avg_sq": lib.tensor(rng.uniform(size=10), dtype=f64, requires_grad=True) * 1,
            }
        )
    x, y = lib.tensor([1.0], dtype=f64), lib.tensor([2.0], dtype=f64)
    for _ in range(2):
        loss = ((x * p.sum() - y) ** 2).mean()
        loss.backward(inputs=(p,), create_graph=True)
        opt.step()
        opt.zero_grad()
    loss.backward(inputs=tuple(wrt))
    return [float(loss.item())] + [float(t.grad.item()) for t in wrt]


@pytest.mark.parametrize(
    ("name", "hyper"),
    [
        ("Adam", {"lr": 1e-3}),
        ("AdamW", {"lr": 1e-2}),
        ("SGD", {"lr": 1e-2}),
        # a tensor weight decay that requires grad (torch's
        # test_adam_differentiable_weight_decay), also with the learning rate
        ("Adam", {"weight_decay": 0.999}),
        ("Adam", {"lr": 1e-3, "weight_decay": 0.9}),
        ("AdamW", {"weight_decay": 0.5}),
        ("SGD", {"lr": 1e-2, "weight_decay": 0.3}),
        # tensor betas that require grad (test_adam_differentiable_betas)
        ("Adam", {"betas": (0.9, 0.999)}),
        ("Adam", {"lr": 1e-3, "betas": (0.9, 0.999)}),
    ],
)
def test_differentiable_hyperparameters_through_two_steps_match_torch(name, hyper):
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch's create_graph reference-cycle warning)
        t = _two_steps_meta_loss(torch, name, hyper)
    f = _two_steps_meta_loss(fg, name, hyper)
    np.testing.assert_allclose(f, t, rtol=1e-10)


def test_differentiable_momentum_step_matches_finite_differences():
    """From a fresh state (the first momentum buffer is the gradient itself), the
    derivative of the parameters after two SGD-with-momentum steps with respect to the
    starting parameters and the learning rate equals central finite differences. (torch
    detaches the first buffer from the gradient, which drops the first gradient's path.)"""
    rng = np.random.default_rng(7)
    p0, a = rng.normal(size=4), rng.normal(size=4)

    def run(p_np, lr_val, record):
        p_in = fg.tensor(p_np, requires_grad=True)
        lr = fg.tensor(lr_val, dtype="float64", requires_grad=record)
        p = p_in * 1.0
        opt = fg.optim.SGD([p], lr=lr, momentum=0.9, weight_decay=0.1, differentiable=True)
        for _ in range(2):
            opt.zero_grad()
            ((p * fg.tensor(a)).sin().sum()).backward(create_graph=True, inputs=(p,))
            opt.step()
        out = (p * p).sum()
        if record:
            out.backward(inputs=(p_in, lr))
            return p_in.grad.numpy(), float(lr.grad.item())
        return float(out.item())

    gp, glr = run(p0, 0.3, True)
    h = 1e-6
    fd_p = [
        (run(p0 + h * e, 0.3, False) - run(p0 - h * e, 0.3, False)) / (2 * h) for e in np.eye(4)
    ]
    fd_lr = (run(p0, 0.3 + h, False) - run(p0, 0.3 - h, False)) / (2 * h)
    np.testing.assert_allclose(gp, fd_p, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(glr, fd_lr, rtol=1e-6)


def test_differentiable_step_of_a_leaf_parameter_raises_as_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, fg):
        p = lib.tensor(np.ones(3), requires_grad=True)
        p.grad = lib.tensor(np.ones(3))
        opt = lib.optim.Adam([p], lr=0.1, differentiable=True)
        with pytest.raises(RuntimeError, match="leaf"):
            opt.step()


def test_a_state_dict_of_a_differentiable_step_is_detached_copies():
    p = fg.tensor(np.ones(3), requires_grad=True) * 1.0
    p.grad = fg.tensor(np.ones(3), requires_grad=True) * 1.0
    opt = fg.optim.Adam([p], lr=0.1, differentiable=True)
    opt.step()
    sd = copy.deepcopy(opt.state_dict())
    assert not sd["state"][0]["exp_avg"].requires_grad
    np.testing.assert_allclose(sd["state"][0]["exp_avg"].numpy(), 0.1)


# ------------------------------------------------------------------ positional arguments


@pytest.mark.parametrize(
    ("name", "args"),
    [
        # ASGD(params, lr, lambd, alpha, t0, weight_decay, foreach, maximize, ...): the
        # seventh value is foreach (it was taken as maximize)
        ("ASGD", (0.01, 1e-4, 0.75, 1e6, 0, True)),
        ("ASGD", (0.01, 1e-4, 0.75, 1e6, 0, False, True)),
        # RMSprop(params, lr, alpha, eps, weight_decay, momentum, centered, capturable,
        # foreach, maximize, differentiable)
        ("RMSprop", (0.01, 0.99, 1e-8, 0, 0, False, False, True, True)),
        ("Adagrad", (0.01, 0, 0, 0, 1e-10, True)),
        ("Adadelta", (1.0, 0.9, 1e-6, 0, True)),
        ("Adamax", (2e-3, (0.9, 0.999), 1e-8, 0, True)),
    ],
)
def test_positional_arguments_bind_as_torchs(name, args):
    torch = pytest.importorskip("torch")
    groups = []
    for lib in (torch, fg):
        opt = getattr(lib.optim, name)([_param(lib)], *args)
        groups.append({k: v for k, v in opt.param_groups[0].items() if k != "params"})
    assert groups[1] == groups[0]
    t = inspect.signature(getattr(torch.optim, name)).parameters
    f = inspect.signature(getattr(fg.optim, name)).parameters
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert [k for k, q in f.items() if q.kind == positional] == [
        k for k, q in t.items() if q.kind == positional
    ]


# ------------------------------------------------------- options given in a parameter group


def _group_options_run(lib, name, kw, steps):
    """test_optim.py's test_param_groups_lr: a configuration given as one group's options
    (switches and a tensor learning rate included), a tiny learning rate outside it, and a
    second group whose parameter gets random gradients but (almost) does not move."""
    rng = np.random.default_rng(11)
    w0, b0, x0 = rng.normal(size=(10, 5)), rng.normal(size=10), rng.normal(size=5)
    f64 = "float64" if lib is fg else lib.float64
    w, b = (lib.tensor(a, dtype=f64, requires_grad=True) for a in (w0, b0))
    other = lib.tensor(rng.normal(size=(2, 2)), dtype=f64, requires_grad=True)
    kw = {k: _value(v, lib) for k, v in kw.items()}
    kw.setdefault("lr", 1e-3)
    outer = {"lr": 1e-28, **({"step_sizes": (0, 50)} if name == "Rprop" else {})}
    opt = getattr(lib.optim, name)([{"params": [w, b], **kw}, {"params": [other]}], **outer)
    sign = -1.0 if kw.get("maximize") else 1.0
    for _ in range(steps):
        opt.zero_grad()
        loss = ((w @ lib.tensor(x0) + b) ** 2).sum() * sign
        loss.backward()
        other.grad = lib.tensor(rng.uniform(size=(2, 2)), dtype=f64)
        opt.step()
    return [t.detach().numpy() for t in (w, b, other)], opt.state_dict()


@pytest.mark.parametrize(
    ("name", "kw"),
    [c for c in _configs() if not c.values[1].get("differentiable") and c.values[0] != "LBFGS"],
)
def test_options_given_in_a_group_match_torch(name, kw):
    torch = pytest.importorskip("torch")
    if name == "Adagrad" and "initial_accumulator_value" in kw:
        # torch fills the accumulators with the constructor's value, not the group's
        pytest.skip("torch's Adagrad ignores a group's initial_accumulator_value")
    (tp, tsd), (fp, fsd) = (_group_options_run(lib, name, kw, 3) for lib in (torch, fg))
    # (torch's foreach ASGD rounds its float32 eta differently from its for-loop)
    rtol = 1e-6 if name == "ASGD" and kw.get("foreach") else RTOL
    for a, b in zip(tp, fp):
        np.testing.assert_allclose(b, a, rtol=rtol, atol=ATOL if rtol == RTOL else 1e-8)
    _compare_state_dicts(tsd, fsd, "after 3 steps", rtol)


# ------------------------------------------------------------------------ state reset


@pytest.mark.parametrize(
    ("name", "kw"),
    [
        ("SGD", {"momentum": 0.9, "dampening": 0.5}),
        ("Adam", {"amsgrad": True}),
        ("AdamW", {}),
        ("Adagrad", {"lr_decay": 0.1}),
        ("RMSprop", {"momentum": 0.5, "centered": True}),
        ("Adadelta", {}),
        ("Adamax", {}),
        ("NAdam", {}),
        ("RAdam", {}),
        ("Rprop", {}),
        ("ASGD", {"t0": 1}),
        ("Adafactor", {}),
    ],
)
@pytest.mark.parametrize("reset", ["defaultdict", "clear", "by hand"])
def test_a_reset_state_starts_afresh_as_torch(name, kw, reset):
    """Clearing the state (``opt.state.clear()``, ``opt.state = defaultdict(dict)``) makes
    the next step a first step, as in torch (it raised KeyError); a momentum buffer set by
    hand in an emptied SGD state is used as the buffer."""
    import collections

    torch = pytest.importorskip("torch")
    if reset == "by hand" and name != "SGD":
        pytest.skip("a state set by hand: SGD's momentum buffer")
    rng = np.random.default_rng(2)
    w0, grads = rng.normal(size=(3, 2)), rng.normal(size=(4, 3, 2))
    out = []
    for lib in (torch, fg):
        w = lib.tensor(w0, requires_grad=True)
        opt = getattr(lib.optim, name)([w], lr=0.1, **kw)
        for i, g in enumerate(grads):
            w.grad = lib.tensor(g)
            opt.step()
            if i == 1:
                if reset == "defaultdict":
                    opt.state = collections.defaultdict(dict)
                elif reset == "clear":
                    opt.state.clear()
                else:
                    opt.state[w] = {"momentum_buffer": lib.tensor(np.full((3, 2), 2.0))}
        out.append((w.detach().numpy(), opt.state_dict()))
    (tw, tsd), (fw, fsd) = out
    np.testing.assert_allclose(fw, tw, rtol=RTOL, atol=ATOL)
    _compare_state_dicts(tsd, fsd, f"{name} after a {reset} reset")


def test_lbfgs_group_from_an_older_state_dict_gets_torchs_flags():
    """LBFGS loads a group without ``maximize`` as not maximizing (torch's value for old
    groups), then continues as torch's on a bounded problem."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    w0, x0 = rng.normal(size=(4, 3)), rng.normal(size=3)
    out = []
    for lib in (torch, fg):
        w = lib.tensor(w0, requires_grad=True)
        opt = lib.optim.LBFGS([w], maximize=True, max_iter=5)

        def closure(sign, w=w, opt=opt, lib=lib):
            opt.zero_grad()
            loss = (((w @ lib.tensor(x0)) ** 2).sum() + 0.1 * (w * w).sum()) * sign
            loss.backward()
            return loss

        for _ in range(2):
            opt.step(lambda: closure(-1.0))
        sd = opt.state_dict()
        del sd["param_groups"][0]["maximize"]
        opt.load_state_dict(sd)
        assert opt.param_groups[0].get("maximize", False) is False
        for _ in range(2):
            opt.step(lambda: closure(1.0))
        out.append(w.detach().numpy())
    np.testing.assert_allclose(out[1], out[0], rtol=1e-8, atol=1e-9)
