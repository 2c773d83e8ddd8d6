"""PyTorch's learning-rate scheduler tests (test/optim/test_lrscheduler.py), each run on
torch and on ferrograd side by side: rates in float64 to 1e-12, warnings, exception types
and state dicts."""

from __future__ import annotations

import copy
import pickle
import types
import warnings

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")


def _num(x):
    if hasattr(x, "item"):
        return float(x.item())
    if isinstance(x, (list, tuple)):
        return [_num(y) for y in x]
    return x


def _same(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _outcome(lib, body):
    try:
        return ("ok", _num(body(lib)))
    except Exception as e:  # noqa: BLE001 (the exception type is part of what is compared)
        return ("raised", type(e).__name__)


def _check_both(body):
    """Runs ``body(lib)`` on torch and on ferrograd and asserts the same outcome."""
    t, f = _outcome(torch, body), _outcome(fg, body)
    assert _same(t, f), f"torch: {t}\nferrograd: {f}"
    return f


def _opt(lib, momentum=0.0):
    """PyTorch's test setup: two groups, rates 0.05 and 0.5."""
    c1, c2 = lib.nn.Conv2d(1, 1, 1), lib.nn.Conv2d(1, 1, 1)
    groups = [{"params": c1.parameters()}, {"params": c2.parameters(), "lr": 0.5}]
    return lib.optim.SGD(groups, lr=0.05, momentum=momentum)


def _lrs(opt):
    return [_num(g["lr"]) for g in opt.param_groups]


def _warned(fn):
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        fn()
    return [str(w.message)[:50] for w in ws]


_SCHEDS = {
    "step": lambda S, o: S.StepLR(o, gamma=0.1, step_size=3),
    "multistep": lambda S, o: S.MultiStepLR(o, gamma=0.1, milestones=[2, 5, 9]),
    "constant": lambda S, o: S.ConstantLR(o, factor=0.5, total_iters=5),
    "linear": lambda S, o: S.LinearLR(o, start_factor=0.25, end_factor=0.6, total_iters=4),
    "exp": lambda S, o: S.ExponentialLR(o, gamma=0.9),
    "poly": lambda S, o: S.PolynomialLR(o, power=0.9, total_iters=5),
    "cos": lambda S, o: S.CosineAnnealingLR(o, T_max=3, eta_min=0.01),
    "lambda": lambda S, o: S.LambdaLR(o, [lambda e: 0.9**e, lambda e: 0.8**e]),
    "mult": lambda S, o: S.MultiplicativeLR(o, [lambda e: 0.9, lambda e: 0.8]),
    "cyclic": lambda S, o: S.CyclicLR(o, base_lr=1, max_lr=5, step_size_up=4),
}


@pytest.mark.parametrize("name", sorted(_SCHEDS))
def test_step_with_epoch_warns_deprecation_and_uses_the_closed_form(name):
    # PyTorch: step(epoch) warns EPOCH_DEPRECATION_WARNING each call and sets the closed
    # form (MultiplicativeLR, which has none, multiplies again; it kept the rate)
    def body(lib):
        opt = _opt(lib, momentum=0.9)
        s = _SCHEDS[name](lib.optim.lr_scheduler, opt)
        rec = []
        for e in [*range(12), 2, 2, 7]:
            opt.step()
            rec.append([*_lrs(opt), len(_warned(lambda e=e: s.step(e)))])
        return rec

    rec = _check_both(body)[1]
    assert all(r[-1] == 1 for r in rec)


def test_epoch_deprecation_message_is_torchs():
    assert fg.optim.lr_scheduler.EPOCH_DEPRECATION_WARNING == (
        torch.optim.lr_scheduler.EPOCH_DEPRECATION_WARNING
    )


def test_scheduler_stepped_before_the_optimizer_warns_once():
    def body(lib):
        opt = _opt(lib)
        S = lib.optim.lr_scheduler
        made = _warned(lambda: S.StepLR(opt, gamma=0.1, step_size=3))
        s = S.StepLR(opt, gamma=0.1, step_size=3)

        def old_order():
            for _ in range(5):
                s.step()
                opt.step()

        return [made, _warned(old_order), _lrs(opt)]

    made, old, _ = _check_both(body)[1]
    assert made == [] and len(old) == 1 and old[0].startswith("Detected call of `lr_scheduler")


def test_new_order_is_silent_and_an_overridden_optimizer_step_warns():
    def body(lib):
        opt = _opt(lib)
        s = lib.optim.lr_scheduler.StepLR(opt, gamma=0.1, step_size=3)

        def new_order():
            for _ in range(35):
                opt.step()
                s.step()

        quiet = _warned(new_order)
        opt2 = _opt(lib)
        s2 = lib.optim.lr_scheduler.StepLR(opt2, gamma=0.1, step_size=3)
        inner = opt2.step
        opt2.step = types.MethodType(lambda o, *a, **k: inner(*a, **k), opt2)

        def overridden():
            for _ in range(3):
                opt2.step()
                s2.step()

        return [quiet, _warned(overridden), _lrs(opt)]

    quiet, over, _ = _check_both(body)[1]
    assert quiet == [] and len(over) == 1 and "overridden" in over[0]


@pytest.mark.parametrize("name", ["step", "multistep", "exp", "cos", "linear", "poly"])
def test_get_lr_is_the_chainable_form_and_warns_outside_step(name):
    # PyTorch's get_lr() is the step-to-step form (what step() applies next), with a
    # warning pointing at get_last_lr(); ferrograd returned the closed form, silently
    def body(lib):
        opt = _opt(lib)
        s = _SCHEDS[name](lib.optim.lr_scheduler, opt)
        for _ in range(3):
            opt.step()
            s.step()
        out = []
        ws = _warned(lambda: out.append(s.get_lr()))
        return [out, ws]

    _check_both(body)


def test_a_subclass_overriding_get_lr_is_what_step_applies():
    def body(lib):
        class Halving(lib.optim.lr_scheduler.StepLR):
            def get_lr(self):
                lrs = [g["lr"] for g in self.optimizer.param_groups]
                return lrs if self._is_initial else [0.5 * lr for lr in lrs]

        opt = _opt(lib)
        s = Halving(opt, 2)
        rec = []
        for _ in range(5):
            opt.step()
            s.step()
            rec.append(_lrs(opt))
        return rec

    _check_both(body)


def test_multiplicative_lr_needs_callables():
    opt = _opt(fg)
    with pytest.raises(TypeError, match="lr_lambda should be a function"):
        fg.optim.lr_scheduler.MultiplicativeLR(opt, 0.95)
    with pytest.raises(TypeError, match="lr_lambda should be a function"):
        fg.optim.lr_scheduler.MultiplicativeLR(opt, [0.95, 0.9])


def test_cosine_then_cyclic_on_one_optimizer():
    # a CyclicLR made later must not overwrite the groups' initial_lr that the cosine
    # schedule anneals from (PyTorch issue 21965)
    def body(lib):
        m = lib.nn.Linear(2, 1)
        opt = lib.optim.SGD(m.parameters(), lr=0.5)
        S = lib.optim.lr_scheduler
        s1 = S.CosineAnnealingLR(opt, T_max=20, eta_min=0.1)
        s2 = S.CyclicLR(opt, base_lr=0.1, max_lr=0.3, step_size_up=1, step_size_down=3)
        rec = []
        for i in range(40):
            opt.step()
            (s1 if i <= s1.T_max else s2).step()
            rec.append(_lrs(opt) + [_num(opt.param_groups[0]["initial_lr"])])
        return rec

    rec = _check_both(body)[1]
    assert rec[0][0] > 0.49


def test_warm_restarts_wrap_a_t_cur_set_past_the_period():
    def body(lib):
        opt = _opt(lib)
        s = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=4)
        out = []
        for e in [7, 8, 9]:
            s.T_cur = e
            s.step()
            out.append([s.T_cur, s.T_i, *_lrs(opt)])
        return out

    out = _check_both(body)[1]
    assert [o[0] for o in out] == [0, 1, 2]


def test_reduce_lr_on_plateau_is_a_scheduler_with_torchs_state_and_epoch_form():
    def body(lib):
        opt = _opt(lib)
        S = lib.optim.lr_scheduler
        s = S.ReduceLROnPlateau(opt, mode="max", factor=0.5, patience=1)
        out = [isinstance(s, S.LRScheduler), s.get_last_lr(), s.last_epoch]
        out.append(_warned(lambda: s.step(1.0, 5)))
        out.append(s.last_epoch)
        for m in [0.5, 0.4, 0.3, 0.2]:
            s.step(m)
            out.append(_lrs(opt) + [s.num_bad_epochs, s.best, s.mode_worse])
        state = s.state_dict()
        c = S.ReduceLROnPlateau(opt, mode="min", factor=0.1, patience=9)
        c.load_state_dict(state)
        out.append(sorted(state))
        out.append([c.mode, c.mode_worse, c.best, c.patience])
        return out

    _check_both(body)


@pytest.mark.parametrize("min_lr", ["scalar", "list"])
def test_reduce_lr_on_plateau_after_add_param_group(min_lr):
    def body(lib):
        opt = _opt(lib)
        for g in opt.param_groups:
            g["lr"] = 0.5
        s = lib.optim.lr_scheduler.ReduceLROnPlateau(
            opt,
            threshold=0.1,
            patience=5,
            cooldown=5,
            min_lr=0 if min_lr == "scalar" else [1e-5, 1e-4],
        )
        rec = []
        for e, m in enumerate([1] * 7 + [0.6] + [0.5] * 12):
            if e == 8:
                p = lib.nn.Parameter(lib.zeros(2, 3))
                opt.add_param_group({"params": [p], "lr": 0.05})
            opt.step()
            s.step(m)
            rec.append(_lrs(opt))
        return rec

    # a scalar min_lr covers the new group (its rate is reduced too); a list of the old
    # length raises RuntimeError, as PyTorch
    out = _check_both(body)
    assert out[0] == ("ok" if min_lr == "scalar" else "raised")


def test_reduce_lr_on_plateau_argument_checks():
    def body(lib):
        S, opt, out = lib.optim.lr_scheduler, _opt(lib), []
        for kw in [{"factor": 1.0}, {"mode": "x"}, {"threshold_mode": "x"}, {"min_lr": [1, 2, 3]}]:
            out.append(_outcome(lib, lambda lib, kw=kw: S.ReduceLROnPlateau(opt, **kw) and 0))
        out.append(_outcome(lib, lambda lib: S.ReduceLROnPlateau(object()) and 0))
        return out

    _check_both(body)


def test_sequential_lr_runs_a_chained_scheduler():
    def body(lib):
        S, opt = lib.optim.lr_scheduler, _opt(lib)
        chained = S.ChainedScheduler(
            [S.LinearLR(opt, start_factor=0.1, total_iters=5), S.ConstantLR(opt, factor=0.1)]
        )
        s = S.SequentialLR(opt, [chained, S.ConstantLR(opt, factor=0.5)], milestones=[5])
        rec = [_lrs(opt)]
        for _ in range(10):
            opt.step()
            s.step()
            rec.append(_lrs(opt) + s.get_last_lr())
        return rec

    _check_both(body)


def test_chained_scheduler_is_a_scheduler_and_saves_its_last_rates():
    def body(lib):
        S, opt = lib.optim.lr_scheduler, _opt(lib)
        c = S.ChainedScheduler([S.ConstantLR(opt, factor=0.1), S.ExponentialLR(opt, gamma=0.8)])
        for _ in range(3):
            opt.step()
            c.step()
        state = c.state_dict()
        return [isinstance(c, S.LRScheduler), sorted(state), state["_last_lr"]]

    _check_both(body)


_BAD = [
    lambda S, o: S.OneCycleLR(o, max_lr=1e-3, total_steps=10, pct_start=1.1),
    lambda S, o: S.OneCycleLR(o, max_lr=1e-3, total_steps=2.5),
    lambda S, o: S.OneCycleLR(o, max_lr=[1e-3], total_steps=10),
    lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=2, eta_min="a"),
    lambda S, o: S.SequentialLR(o, [S.StepLR(o, 2), S.ReduceLROnPlateau(o)], [1]),
    lambda S, o: S.SequentialLR(o, [S.StepLR(o, 2), object()], [1]),
    lambda S, o: S.ChainedScheduler([S.StepLR(o, 2), S.ReduceLROnPlateau(o)]),
    lambda S, o: S.ChainedScheduler([S.StepLR(o, 2), object()]),
]


@pytest.mark.parametrize("i", range(len(_BAD)))
def test_constructor_checks_raise_torchs_exception_types(i):
    def body(lib):
        _BAD[i](lib.optim.lr_scheduler, _opt(lib))

    assert _check_both(body)[0] == "raised"


def test_cyclic_lr_state_dict_keeps_a_callable_objects_attributes():
    class ScaleFn:
        def __init__(self, x):
            self.x = x

        def __call__(self, _):
            return self.x

    def body(lib):
        S = lib.optim.lr_scheduler
        opt = lib.optim.Adam(lib.nn.Linear(2, 2).parameters())
        built_in = S.CyclicLR(opt, base_lr=1, max_lr=5, cycle_momentum=False).state_dict()
        pickle.dumps(built_in)
        state = S.CyclicLR(
            opt, base_lr=1, max_lr=5, cycle_momentum=False, scale_fn=ScaleFn(0.25)
        ).state_dict()
        pickle.dumps(state)
        target = ScaleFn(0.5)
        r = S.CyclicLR(opt, base_lr=1, max_lr=5, cycle_momentum=False, scale_fn=target)
        r.load_state_dict(state)
        return ["_scale_fn_ref" in built_in, built_in["_scale_fn_custom"], target.x]

    assert _check_both(body)[1] == [False, None, 0.25]


def test_one_cycle_state_dict_names_and_its_last_linear_step_on_adam():
    # stepping exactly total_steps times (one step per batch) runs the linear anneal one
    # step past its end: PyTorch sets that (negative) rate; ferrograd refused it
    def body(lib):
        c1, c2 = lib.nn.Conv2d(1, 1, 1), lib.nn.Conv2d(1, 1, 1)
        groups = [{"params": c1.parameters()}, {"params": c2.parameters(), "lr": 0.5}]
        opt = lib.optim.Adam(groups, lr=0.05)
        s = lib.optim.lr_scheduler.OneCycleLR(
            opt,
            max_lr=25,
            final_div_factor=2,
            base_momentum=1,
            max_momentum=22,
            total_steps=10,
            anneal_strategy="linear",
        )
        rec = [sorted(s.state_dict())]
        for _ in range(10):
            rec.append(_lrs(opt) + [g["betas"][0] for g in opt.param_groups])
            opt.step()
            s.step()
        rec.append(_lrs(opt))
        return rec

    _check_both(body)


def test_an_optimizer_with_a_scheduler_pickles_and_copies():
    m = fg.nn.Linear(2, 2)
    opt = fg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    s = fg.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
    m(fg.randn(3, 2)).sum().backward()
    opt.step()
    s.step()
    for other in (pickle.loads(pickle.dumps(opt)), copy.deepcopy(opt)):
        assert other.param_groups[0]["lr"] == 0.05
        other.param_groups[0]["lr"] = 0.2
        assert other.param_groups[0]["lr"] == 0.2
        assert opt.param_groups[0]["lr"] == 0.05


def test_update_bn_recomputes_batch_norms_only():
    # an instance norm tracking running statistics keeps them, as in PyTorch (ferrograd
    # reset and recomputed them too)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((5, 2, 7)) for _ in range(4)]

    def body(lib):
        n = lib.nn
        m = n.Sequential(
            n.Conv1d(2, 4, 3), n.InstanceNorm1d(4, track_running_stats=True), n.BatchNorm1d(4)
        ).double()
        with torch.no_grad(), fg.no_grad():
            for p in m.parameters():
                p.copy_(lib.tensor(np.linspace(-1, 1, p.numel()).reshape(tuple(p.shape))))
        m(lib.tensor(xs[0]) * 3)
        m.eval()
        lib.optim.swa_utils.update_bn([(lib.tensor(x), 0) for x in xs], m)
        stats = [m[1].running_mean, m[1].running_var, m[2].running_mean, m[2].running_var]
        return [s.detach().numpy().tolist() for s in stats] + [m.training, m[2].momentum]

    _check_both(body)


def test_averaged_model_with_both_averaging_functions_raises_assertion_error():
    def body(lib):
        S = lib.optim.swa_utils
        S.AveragedModel(
            lib.nn.Linear(2, 2), avg_fn=S.get_swa_avg_fn(), multi_avg_fn=S.get_swa_multi_avg_fn()
        )

    assert _check_both(body) == ("raised", "AssertionError")


# ---------------------------------------------------------------- optimizer API (test_optim)

_W = np.arange(6.0).reshape(2, 3) / 7 - 0.3


def _param(lib):
    return lib.nn.Parameter(lib.tensor(_W.copy()))


def _backward(p, k=1.0):
    (p * p * k).sum().backward()


def test_optimizer_state_dict_hooks():
    def body(lib):
        p, log = _param(lib), []
        o = lib.optim.Adam([p], lr=0.1)
        o.register_state_dict_pre_hook(lambda opt: log.append("pre"))
        o.register_state_dict_pre_hook(lambda opt: log.append("pre first"), prepend=True)

        def post(opt, sd):
            log.append("post")
            sd["param_groups"][0]["extra"] = 1
            return sd

        o.register_state_dict_post_hook(post)
        _backward(p)
        o.step()
        sd = o.state_dict()
        log.append(sd["param_groups"][0]["extra"])

        def load_pre(opt, sd):
            log.append("load pre")
            return dict(sd, param_groups=[dict(g, lr=0.5) for g in sd["param_groups"]])

        o.register_load_state_dict_pre_hook(load_pre)
        h = o.register_load_state_dict_post_hook(lambda opt: log.append(opt.param_groups[0]["lr"]))
        o.load_state_dict(sd)
        h.remove()
        o.load_state_dict(sd)
        return log

    _check_both(body)


def test_step_hooks_get_the_optimizer_in_args_and_a_bad_pre_hook_result_raises():
    def body(lib):
        p, log = _param(lib), []
        o = lib.optim.SGD([p], lr=0.1)
        h = o.register_step_pre_hook(lambda opt, a, k: log.append(("pre", a[0] is opt, sorted(k))))
        o.register_step_post_hook(lambda opt, a, k: log.append(("post", len(a), sorted(k))))
        _backward(p)
        o.step()
        o.step(closure=lambda: 1.0)
        h.remove()
        o.register_step_pre_hook(lambda opt, a, k: 5)
        log.append(_outcome(lib, lambda lib: o.step()))
        return log

    _check_both(body)


def test_global_optimizer_step_hooks():
    def body(lib):
        mod = __import__(f"{lib.__name__}.optim.optimizer", fromlist=["x"])
        p, log = _param(lib), []
        o = lib.optim.SGD([p], lr=0.1)
        h1 = mod.register_optimizer_step_pre_hook(lambda opt, a, k: log.append("global pre"))
        h2 = mod.register_optimizer_step_post_hook(lambda opt, a, k: log.append("global post"))
        o.register_step_pre_hook(lambda opt, a, k: log.append("pre"))
        o.register_step_post_hook(lambda opt, a, k: log.append("post"))
        try:
            _backward(p)
            o.step()
        finally:
            h1.remove()
            h2.remove()
        o.step()
        return log

    _check_both(body)


def test_add_param_group_rejects_non_leaf_tensors_and_warns_on_duplicates():
    def non_leaf(lib):
        p = _param(lib)
        lib.optim.SGD([p], lr=0.1).add_param_group({"params": [p * 2]})

    assert _check_both(non_leaf) == ("raised", "ValueError")

    def duplicate(lib):
        p, q = _param(lib), _param(lib)
        o = lib.optim.SGD([p], lr=0.1)
        ws = _warned(lambda: o.add_param_group({"params": [q, q]}))
        return [len(ws), len(o.param_groups[1]["params"])]

    assert _check_both(duplicate)[1] == [1, 2]


def test_zero_grad_without_set_to_none_zeroes_the_same_tensor():
    def body(lib):
        p = _param(lib)
        o = lib.optim.SGD([p], lr=0.1)
        _backward(p)
        g = p.grad
        o.zero_grad(set_to_none=False)
        return [p.grad is g, g.detach().numpy().tolist()]

    assert _check_both(body)[1][0] is True


def test_load_state_dict_takes_the_saved_groups_and_maps_saved_ids_in_order():
    def body(lib):
        a, b = _param(lib), _param(lib)
        o = lib.optim.SGD([a, b], lr=0.1, momentum=0.9)
        _backward(a)
        _backward(b, 3.0)
        o.step()
        sd = o.state_dict()
        # ids need not be 0..n-1: they map onto the parameters in group order
        sd = {
            "state": {10 + k: v for k, v in sd["state"].items()},
            "param_groups": [
                dict(g, params=[10 + i for i in g["params"]]) for g in sd["param_groups"]
            ],
        }
        c, d = _param(lib), _param(lib)
        o2 = lib.optim.SGD([c, d], lr=0.5, momentum=0.9)
        lib.optim.lr_scheduler.StepLR(o2, 2)  # adds initial_lr, which the saved groups lack
        o2.load_state_dict(sd)
        sd["param_groups"][0]["lr"] = 9.0  # the optimizer keeps its own copy
        _backward(c)
        _backward(d, 3.0)
        o2.step()
        return [
            sorted(o2.param_groups[0]),
            o2.param_groups[0]["lr"],
            c.detach().numpy().tolist(),
            d.detach().numpy().tolist(),
        ]

    _check_both(body)


def test_a_scheduler_leaves_no_reference_cycle_through_the_optimizer():
    import gc
    import weakref

    def body(lib):
        def run():
            p = lib.nn.Parameter(lib.zeros(10))
            opt = lib.optim.SGD([p], lr=0.5)
            s = lib.optim.lr_scheduler.LambdaLR(opt, lambda e: 1.0)
            opt.step()
            s.step()
            return weakref.ref(opt), weakref.ref(s)

        gc.disable()
        try:
            refs = run()
            return [r() is None for r in refs]
        finally:
            gc.enable()

    assert _check_both(body)[1] == [True, True]


def test_one_cycle_loads_a_legacy_state_dict_with_its_anneal_function():
    def body(lib):
        S = lib.optim.lr_scheduler
        opt = _opt(lib, momentum=0.9)
        s = S.OneCycleLR(
            opt, max_lr=25, final_div_factor=2, base_momentum=1, max_momentum=22, total_steps=10
        )
        del s._anneal_func_type
        state = s.state_dict()
        state["anneal_func"] = S.OneCycleLR._annealing_cos
        s.load_state_dict(state)
        rec = ["anneal_func_type" in state]
        for _ in range(9):
            opt.step()
            s.step()
            rec.append(_lrs(opt) + [g["momentum"] for g in opt.param_groups])
        return rec

    _check_both(body)


def test_scheduler_helpers_pytorch_exposes():
    S = fg.optim.lr_scheduler
    opt = _opt(fg)
    seq = S.SequentialLR(opt, [S.ConstantLR(opt), S.ExponentialLR(opt, 0.5)], milestones=[2])
    before = [s.last_epoch for s in seq._schedulers]
    seq.recursive_undo()
    assert [s.last_epoch for s in seq._schedulers] == [e - 1 for e in before]
    assert S.CyclicLR._triangular2_scale_fn(3) == 0.25
    assert S.CyclicLR._exp_range_scale_fn(0.5, 2) == 0.25
    assert S.OneCycleLR._annealing_linear(1.0, 3.0, 0.5) == 2.0


def test_warm_restarts_refuse_a_group_added_after_them():
    # PyTorch raises ValueError (one base rate short); ferrograd left the new group alone
    def body(lib):
        opt = _opt(lib)
        s = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3)
        opt.step()
        s.step()
        opt.add_param_group({"params": [lib.nn.Parameter(lib.zeros(2))], "lr": 0.3})
        opt.step()
        s.step()

    assert _check_both(body) == ("raised", "ValueError")


def test_swalr_copies_a_tensor_swa_lr_and_warns_on_direct_get_lr():
    # a tensor swa_lr changed in place afterwards must not move the schedule (PyTorch
    # clones it; ferrograd kept the tensor, so the rates followed its changes)
    def body(lib):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.zeros(1))], lr=0.1)
        swa_lr = lib.tensor(0.05, dtype=lib.float64)
        s = lib.optim.swa_utils.SWALR(opt, swa_lr=swa_lr, anneal_epochs=3)
        rec = []
        for _ in range(4):
            swa_lr.mul_(0.5)
            opt.step()
            s.step()
            rec.append([_num(opt.param_groups[0]["swa_lr"]), *_lrs(opt)])
        rec.append(len(_warned(s.get_lr)))
        return rec

    _check_both(body)


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop"])
def test_a_torch_state_dict_with_tensor_learning_rates_loads(name):
    # PyTorch keeps a tensor lr in the group (and its state dict): loading it raised
    # TypeError "learning rate must be a number"
    kw = {"SGD": {"momentum": 0.9}, "Adam": {"amsgrad": True}, "RMSprop": {"centered": True}}[name]
    tp = torch.nn.Parameter(torch.tensor(_W.copy()))
    to = getattr(torch.optim, name)([tp], lr=torch.tensor(0.01, dtype=torch.float64), **kw)
    fp = fg.nn.Parameter(fg.tensor(_W.copy()))
    fo = getattr(fg.optim, name)([fp], lr=0.5, **kw)
    for i in range(5):
        if i == 2:
            with fg.no_grad():
                fp.copy_(fg.tensor(tp.detach().numpy()))
            fo.load_state_dict(to.state_dict())
        to.zero_grad()
        _backward(tp, 1 + i)
        to.step()
        if i >= 2:
            fo.zero_grad()
            _backward(fp, 1 + i)
            fo.step()
    assert fo.param_groups[0]["lr"] == 0.01
    np.testing.assert_allclose(fp.detach().numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("lib", [torch, fg], ids=["torch", "ferrograd"])
def test_resuming_without_initial_lr_raises_key_error_with_torchs_message(lib):
    opt = lib.optim.SGD([lib.nn.Parameter(lib.zeros(2))], lr=0.1)
    pattern = (
        r"param 'initial_lr' is not specified in param_groups\[0\] when resuming scheduler "
        r"with last_epoch >= 0"
    )
    with pytest.raises(KeyError, match=pattern):
        lib.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.1, last_epoch=1)
