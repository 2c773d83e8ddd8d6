"""Porting fixes in ``nn`` and ``optim`` found by comparing with PyTorch: gradient-norm
orders -inf and 0, ``Module.to`` refusing integer dtypes before changing anything, optimizer
state dicts with 0-d / Python / NumPy / torch ``step`` values, ``named_parameters()`` given to
optimizers, Adamax / NAdam / RAdam / ASGD inside ``fg.trace``, batch-norm checkpoints without
``num_batches_tracked`` and ``state_dict()._metadata``, PyTorch's private helpers and base
classes, ``Parameter(t)`` sharing memory, and ``fg.save`` keeping shared tensors shared."""

from __future__ import annotations

import importlib
import io
import math
from collections import OrderedDict

import ferrograd as fg
import numpy as np
import pytest


def _lib(name):
    return pytest.importorskip("torch") if name == "torch" else fg


def _np(t):
    return np.asarray(t.detach().cpu().numpy() if hasattr(t, "cpu") else t.detach().numpy())


# ------------------------------------------------------------------- 1. gradient norms

GRADS = ([0.5, 0.0, 3.0], [0.0, 0.0], [1.0, -2.0, 0.0, 4.0])


@pytest.mark.parametrize("norm_type", [0, 0.0, -math.inf, math.inf, -2.0, 1, 2, 3.5])
def test_get_total_norm_orders_match_torch(norm_type):
    torch = pytest.importorskip("torch")
    want = torch.nn.utils.get_total_norm(
        [torch.tensor(g, dtype=torch.float64) for g in GRADS], norm_type
    )
    got = fg.nn.utils.get_total_norm([fg.tensor(g, dtype="float64") for g in GRADS], norm_type)
    assert got.dtype == fg.float64 and got.shape == ()
    np.testing.assert_allclose(float(got.item()), float(want.item()), rtol=1e-12, atol=0)


@pytest.mark.parametrize("norm_type", [0, -math.inf, math.inf, 2.0])
@pytest.mark.parametrize("max_norm", [0.1, 10.0])
def test_clip_grad_norm_orders_scale_the_gradients_as_torch(norm_type, max_norm):
    out = {}
    for name in ("torch", "ferrograd"):
        L = _lib(name)
        ps = [L.tensor(g, dtype=L.float64, requires_grad=True) for g in GRADS]
        for p, g in zip(ps, GRADS):
            p.grad = L.tensor(g, dtype=L.float64)
        total = L.nn.utils.clip_grad_norm_(ps, max_norm=max_norm, norm_type=norm_type)
        out[name] = (float(total.item()), [_np(p.grad) for p in ps])
    assert out["ferrograd"][0] == pytest.approx(out["torch"][0], rel=1e-12)
    for a, b in zip(out["ferrograd"][1], out["torch"][1]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def test_the_minus_inf_norm_of_an_empty_tensor_raises():
    with pytest.raises(RuntimeError, match="-inf"):
        fg.nn.utils.get_total_norm([fg.ones(2), fg.zeros(0)], -math.inf)


# ------------------------------------------------------------- 2. Module.to(int dtype)


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_module_to_an_integer_dtype_raises_before_changing_anything(dtype):
    m = fg.nn.Sequential(fg.nn.Linear(3, 2), fg.nn.BatchNorm1d(2))
    w = m[0].weight
    before = {k: _np(v).copy() for k, v in m.state_dict().items()}
    for call in (
        lambda: m.to(getattr(fg, dtype)),
        lambda: m.to("cpu", getattr(fg, dtype)),
        lambda: m.to(dtype=getattr(fg, dtype)),
        lambda: m.type(getattr(fg, dtype)),
    ):
        with pytest.raises(TypeError, match=f"floating point or complex dtypes.*dtype={dtype}"):
            call()
    assert m[0].weight is w and w.dtype == fg.float32 and w.requires_grad
    assert m[1].num_batches_tracked.dtype == fg.int64
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(_np(v), before[k])
    m.to(fg.float64)  # still usable
    assert m[0].weight.dtype == fg.float64 and m(fg.ones(4, 3, dtype="float64")).shape == (4, 2)


def test_module_to_an_integer_dtype_raises_type_error_in_torch_too():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="floating point or complex dtypes"):
        torch.nn.Linear(2, 2).to(torch.int32)


# ----------------------------------------------------------- 3. step values in load


def _step_values():
    values = [3, 3.0, np.float64(3.0), np.int64(3), np.array(3.0), fg.tensor(3.0)]
    try:
        import torch

        values.append(torch.tensor(3.0))
    except ImportError:
        pass
    return values


OPTIMIZERS = {
    "SGD": lambda L, P: L.optim.SGD(P, lr=0.1, momentum=0.9),
    "Adam": lambda L, P: L.optim.Adam(P, lr=0.05),
    "AdamW": lambda L, P: L.optim.AdamW(P, lr=0.05),
    "Adam_amsgrad": lambda L, P: L.optim.Adam(P, lr=0.05, amsgrad=True),
    "RMSprop": lambda L, P: L.optim.RMSprop(P, lr=0.01, momentum=0.5, centered=True),
    "Adagrad": lambda L, P: L.optim.Adagrad(P, lr=0.1, lr_decay=0.01),
    "Adadelta": lambda L, P: L.optim.Adadelta(P, lr=0.5),
    "Adamax": lambda L, P: L.optim.Adamax(P, lr=0.05),
    "NAdam": lambda L, P: L.optim.NAdam(P, lr=0.05),
    "RAdam": lambda L, P: L.optim.RAdam(P, lr=0.05),
    "ASGD": lambda L, P: L.optim.ASGD(P, lr=0.05, t0=2),
    "Rprop": lambda L, P: L.optim.Rprop(P, lr=0.05),
}


def _loss(L, w, x):
    return (x @ w).tanh().pow(2).sum()


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_load_state_dict_takes_step_as_any_scalar(name):
    w = fg.tensor(np.linspace(-1, 1, 6).reshape(3, 2), requires_grad=True)
    opt = OPTIMIZERS[name](fg, [w])
    _loss(fg, w, fg.ones(4, 3, dtype="float64")).backward()
    opt.step()
    sd = opt.state_dict()
    if "step" not in sd["state"][0]:
        pytest.skip(f"{name} keeps no step count")
    for v in _step_values():
        sd["state"][0]["step"] = v
        opt.load_state_dict(sd)
        step = opt.state[w]["step"]
        assert step.shape == () and float(step.item()) == 3.0, type(v)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_resuming_from_a_torch_optimizer_state_trains_as_torch(name):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((3, 2))
    xs = [rng.standard_normal((4, 3)) for _ in range(6)]
    wt = torch.tensor(w0, requires_grad=True)
    ot = OPTIMIZERS[name](torch, [wt])
    for x in xs[:3]:
        ot.zero_grad()
        _loss(torch, wt, torch.tensor(x)).backward()
        ot.step()
    wf = fg.tensor(wt.detach().numpy(), requires_grad=True)
    of = OPTIMIZERS[name](fg, [wf])
    of.load_state_dict(ot.state_dict())  # torch tensors, 0-d steps
    for x in xs[3:]:
        ot.zero_grad()
        _loss(torch, wt, torch.tensor(x)).backward()
        ot.step()
        of.zero_grad()
        _loss(fg, wf, fg.tensor(x)).backward()
        of.step()
    np.testing.assert_allclose(wf.numpy(), wt.detach().numpy(), rtol=1e-12, atol=1e-13)


# ------------------------------------------------------------- 4. named_parameters()


def test_optimizers_take_named_parameters_as_torch():
    torch = pytest.importorskip("torch")
    out = {}
    for name in ("torch", "ferrograd"):
        L = _lib(name)
        L.manual_seed(0)
        m = L.nn.Sequential(L.nn.Linear(3, 2), L.nn.Linear(2, 1))
        opt = L.optim.AdamW(m.named_parameters(), lr=0.1)
        m(L.ones(2, 3)).sum().backward()
        opt.step()
        sd = opt.state_dict()
        groups = L.optim.SGD(
            [
                {"params": m[0].named_parameters()},
                {"params": m[1].named_parameters(), "lr": 0.5},
            ],
            lr=0.1,
        ).param_groups
        out[name] = (
            opt.param_groups[0]["param_names"],
            [type(p).__name__ for p in opt.param_groups[0]["params"]],
            sd["param_groups"][0]["param_names"],
            sd["param_groups"][0]["params"],
            sorted(sd["state"]),
            [g["param_names"] for g in groups],
            [len(g["params"]) for g in groups],
        )
    assert out["ferrograd"][0] == out["torch"][0] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert out["ferrograd"][1] == ["Parameter"] * 4
    assert out["ferrograd"][2:] == out["torch"][2:]
    del torch


def test_named_and_unnamed_parameter_groups_do_not_mix():
    m = fg.nn.Sequential(fg.nn.Linear(3, 2), fg.nn.Linear(2, 1))
    with pytest.raises(ValueError, match="with/without names"):
        fg.optim.SGD([{"params": m[0].named_parameters()}, {"params": m[1].parameters()}], lr=0.1)
    opt = fg.optim.SGD(m[0].named_parameters(), lr=0.1)
    with pytest.raises(ValueError, match="with/without names"):
        opt.add_param_group({"params": list(m[1].parameters())})
    with pytest.raises(ValueError, match="names are missing"):
        fg.optim.SGD([("w", m[0].weight), m[0].bias], lr=0.1)


def test_named_parameters_survive_a_state_dict_round_trip():
    m = fg.nn.Linear(3, 2)
    opt = fg.optim.Adam(m.named_parameters(), lr=0.1)
    m(fg.ones(2, 3)).sum().backward()
    opt.step()
    sd = opt.state_dict()
    opt2 = fg.optim.Adam(m.parameters(), lr=0.1)
    opt2.load_state_dict(sd)  # the saved names override, as PyTorch's
    assert opt2.param_groups[0]["param_names"] == ["weight", "bias"]


# ------------------------------------------------ 5. Adamax / NAdam / RAdam / ASGD traced

FAMILY = {
    "Adamax": lambda L, P: L.optim.Adamax(P, lr=0.05, weight_decay=1e-2),
    "NAdam": lambda L, P: L.optim.NAdam(P, lr=0.05, weight_decay=1e-2),
    "NAdam_decoupled": lambda L, P: L.optim.NAdam(
        P, lr=0.05, weight_decay=1e-2, decoupled_weight_decay=True
    ),
    "RAdam": lambda L, P: L.optim.RAdam(P, lr=0.05, weight_decay=1e-2),
    "RAdam_decoupled": lambda L, P: L.optim.RAdam(
        P, lr=0.05, weight_decay=1e-2, decoupled_weight_decay=True
    ),
    "ASGD": lambda L, P: L.optim.ASGD(P, lr=0.05, lambd=1e-2, t0=5, weight_decay=1e-3),
}


def _data(n):
    rng = np.random.default_rng(0)
    return rng.standard_normal((4, 3)), [rng.standard_normal((5, 4)) for _ in range(n)]


@pytest.mark.parametrize("name", sorted(FAMILY))
def test_adam_family_and_asgd_equal_torch_over_twenty_steps(name):
    torch = pytest.importorskip("torch")
    w0, xs = _data(20)
    wt = torch.tensor(w0, requires_grad=True)
    wf = fg.tensor(w0, requires_grad=True)
    ot, of = FAMILY[name](torch, [wt]), FAMILY[name](fg, [wf])
    for x in xs:
        ot.zero_grad()
        _loss(torch, wt, torch.tensor(x)).backward()
        ot.step()
        of.zero_grad()
        _loss(fg, wf, fg.tensor(x)).backward()
        of.step()
        np.testing.assert_allclose(wf.numpy(), wt.detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(FAMILY))
def test_adam_family_and_asgd_steps_trace_and_equal_eager(name):
    w0, xs = _data(5)

    def make():
        w = fg.tensor(w0, requires_grad=True)
        opt = FAMILY[name](fg, [w])
        gm = fg.GradManager().attach([w])

        def step(x):
            with gm:
                loss = _loss(fg, w, x)
                gm.backward(loss)
            opt.step()
            opt.zero_grad()
            return loss

        return w, opt, step

    we, oe, eager = make()
    wt, ot, step = make()
    traced = fg.trace(step)
    for x in xs:
        le, lt = eager(fg.tensor(x)), traced(fg.tensor(x))
        assert lt.numpy().tobytes() == le.numpy().tobytes()
    assert wt.numpy().tobytes() == we.numpy().tobytes()
    assert traced.cache_size == 1
    for k, v in oe.state[we].items():
        np.testing.assert_array_equal(ot.state[wt][k].numpy(), v.numpy())


# ---------------------------------------- 6. num_batches_tracked and state_dict metadata


def test_state_dict_carries_torch_metadata():
    torch = pytest.importorskip("torch")
    out = {}
    for name in ("torch", "ferrograd"):
        L = _lib(name)
        m = L.nn.Sequential(L.nn.Linear(2, 2), L.nn.Sequential(L.nn.BatchNorm1d(2)))
        sd = m.state_dict()
        out[name] = (type(sd).__name__, {k: dict(v) for k, v in sd._metadata.items()})
    assert out["ferrograd"] == out["torch"]
    assert out["ferrograd"][1]["1.0"] == {"version": 2}
    del torch


def test_batchnorm_loads_old_checkpoints_without_num_batches_tracked():
    m = fg.nn.Sequential(fg.nn.Linear(2, 2), fg.nn.BatchNorm1d(2))
    m[1].num_batches_tracked.fill_(5)
    sd = m.state_dict()
    # a dict without _metadata: PyTorch's rule for old checkpoints, the key may be missing
    old = {k: v for k, v in sd.items() if "num_batches" not in k}
    r = m.load_state_dict(old)
    assert r.missing_keys == [] and r.unexpected_keys == []
    assert int(m[1].num_batches_tracked.item()) == 5  # kept
    # metadata of version 1 (an old checkpoint) too
    v1 = OrderedDict(old)
    v1._metadata = {"": {"version": 1}, "1": {"version": 1}}
    assert m.load_state_dict(v1).missing_keys == []
    # metadata saying version 2: the key is required
    v2 = OrderedDict(old)
    v2._metadata = sd._metadata
    with pytest.raises(RuntimeError, match="num_batches_tracked"):
        m.load_state_dict(v2)
    assert m.load_state_dict(v2, strict=False).missing_keys == ["1.num_batches_tracked"]


def test_deleting_num_batches_tracked_from_a_fresh_state_dict_is_refused_as_torch():
    torch = pytest.importorskip("torch")
    for L in (torch, fg):
        bn = L.nn.BatchNorm1d(2)
        sd = bn.state_dict()
        del sd["num_batches_tracked"]
        with pytest.raises(RuntimeError, match="num_batches_tracked"):
            bn.load_state_dict(sd)


# --------------------------------------------------------------------- 7. missing APIs


def test_init_private_fan_helpers_match_torch():
    torch = pytest.importorskip("torch")
    for shape in [(4, 3), (8, 2, 3, 3), (5, 6, 2)]:
        assert fg.nn.init._calculate_fan_in_and_fan_out(
            fg.zeros(*shape)
        ) == torch.nn.init._calculate_fan_in_and_fan_out(torch.zeros(*shape))
        for mode in ("fan_in", "fan_out", "FAN_IN"):
            assert fg.nn.init._calculate_correct_fan(
                fg.zeros(*shape), mode
            ) == torch.nn.init._calculate_correct_fan(torch.zeros(*shape), mode)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        fg.nn.init._calculate_fan_in_and_fan_out(fg.zeros(3))
    with pytest.raises(ValueError, match="fan_avg"):
        fg.nn.init._calculate_correct_fan(fg.zeros(3, 3), "fan_avg")


def test_no_grad_trunc_normal_fills_within_bounds():
    w = fg.zeros(200, 50, requires_grad=True)
    out = fg.nn.init._no_grad_trunc_normal_(w, 0.0, 1.0, -0.5, 0.5)
    assert out is w and w.requires_grad and w.grad_fn is None
    a = w.numpy()
    assert a.min() >= -0.5 and a.max() <= 0.5 and a.std() > 0.2


def test_parameters_vector_round_trip_in_its_module_path():
    from ferrograd.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters

    assert parameters_to_vector is fg.nn.utils.parameters_to_vector
    m = fg.nn.Linear(3, 2)
    v = parameters_to_vector(m.parameters())
    assert v.shape == (8,)
    vector_to_parameters(v * 2, m.parameters())
    np.testing.assert_allclose(parameters_to_vector(m.parameters()).numpy(), v.numpy() * 2)
    with pytest.raises(TypeError, match="vec"):
        vector_to_parameters([1.0] * 8, m.parameters())


def test_stateless_functional_call_warns_and_calls():
    from ferrograd.nn.utils.stateless import functional_call

    m = fg.nn.Linear(2, 2)
    w = fg.zeros(2, 2, requires_grad=True)
    with pytest.warns(FutureWarning, match="functional_call"):
        y = functional_call(m, {"weight": w}, (fg.ones(1, 2),))
    np.testing.assert_allclose(y.numpy(), m.bias.detach().numpy()[None])
    y.sum().backward()
    assert w.grad is not None and m.weight.grad is None


def test_fusion_module_path_fuses_as_torch():
    torch = pytest.importorskip("torch")
    from ferrograd.nn.utils.fusion import fuse_conv_bn_eval, fuse_linear_bn_eval

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 5))
    conv, bn = fg.nn.Conv2d(3, 4, 3).double(), fg.nn.BatchNorm2d(4).double()
    bn.running_mean.copy_(fg.tensor(rng.standard_normal(4)))
    bn.running_var.copy_(fg.tensor(rng.random(4) + 0.5))
    conv.eval(), bn.eval()
    fused = fuse_conv_bn_eval(conv, bn)
    np.testing.assert_allclose(
        fused(fg.tensor(x)).detach().numpy(), bn(conv(fg.tensor(x))).detach().numpy(), atol=1e-12
    )
    lin, bn1 = fg.nn.Linear(3, 4).double().eval(), fg.nn.BatchNorm1d(4).double().eval()
    x1 = fg.tensor(rng.standard_normal((5, 3)))
    np.testing.assert_allclose(
        fuse_linear_bn_eval(lin, bn1)(x1).detach().numpy(),
        bn1(lin(x1)).detach().numpy(),
        atol=1e-12,
    )
    assert callable(torch.nn.utils.fusion.fuse_conv_bn_weights)
    from ferrograd.nn.utils.fusion import fuse_conv_bn_weights  # noqa: F401


def test_global_full_backward_hooks_run_as_torch():
    torch = pytest.importorskip("torch")
    out = {}
    for name in ("torch", "ferrograd"):
        L = _lib(name)
        mm = importlib.import_module(f"{name}.nn.modules.module")
        seen = []
        h = mm.register_module_full_backward_hook(
            lambda m, gi, go, seen=seen: seen.append(
                (type(m).__name__, [None if g is None else tuple(g.shape) for g in gi])
            )
        )
        hp = mm.register_module_full_backward_pre_hook(
            lambda m, go, seen=seen: seen.append(("pre", type(m).__name__))
        )
        m = L.nn.Sequential(L.nn.Linear(3, 2), L.nn.Tanh())
        x = L.ones(4, 3, requires_grad=True)
        m(x).sum().backward()
        h.remove()
        hp.remove()
        n = len(seen)
        m(x).sum().backward()
        assert len(seen) == n  # removed
        out[name] = seen
    assert out["ferrograd"] == out["torch"]
    del torch


def test_global_full_backward_hook_can_replace_grad_input():
    from ferrograd.nn.modules.module import register_module_full_backward_hook

    m = fg.nn.Linear(2, 2)
    x = fg.ones(1, 2, requires_grad=True)
    with register_module_full_backward_hook(lambda mod, gi, go: tuple(g * 0 for g in gi)):
        m(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((1, 2)))


@pytest.mark.parametrize(("strategy", "epochs"), [("cos", 5), ("linear", 3), ("cos", 0)])
def test_swalr_matches_torch(strategy, epochs):
    torch = pytest.importorskip("torch")
    out = {}
    for name in ("torch", "ferrograd"):
        L = _lib(name)
        o = L.optim.SGD(
            [
                {"params": [L.nn.Parameter(L.ones(2))]},
                {"params": [L.nn.Parameter(L.ones(1))], "lr": 0.5},
            ],
            lr=1.0,
        )
        s = L.optim.swa_utils.SWALR(
            o, swa_lr=[0.05, 0.01], anneal_epochs=epochs, anneal_strategy=strategy
        )
        lrs = []
        for _ in range(7):
            o.step()
            s.step()
            lrs.append([g["lr"] for g in o.param_groups])
        state = s.state_dict()
        out[name] = (lrs, sorted(state), s.get_last_lr())
    np.testing.assert_allclose(out["ferrograd"][0], out["torch"][0], rtol=1e-14)
    assert out["ferrograd"][1:] == out["torch"][1:]
    del torch


def test_swalr_state_dict_round_trip_and_checks():
    o = fg.optim.SGD([fg.nn.Parameter(fg.ones(2))], lr=1.0)
    s = fg.optim.swa_utils.SWALR(o, swa_lr=0.1, anneal_epochs=4, anneal_strategy="linear")
    s.step()
    s2 = fg.optim.swa_utils.SWALR(o, swa_lr=0.1, anneal_epochs=4)
    s2.load_state_dict(s.state_dict())
    assert s2.anneal_func(0.5) == 0.5  # linear again
    with pytest.raises(ValueError, match="anneal_strategy"):
        fg.optim.swa_utils.SWALR(o, swa_lr=0.1, anneal_strategy="exp")
    with pytest.raises(ValueError, match="anneal_epochs"):
        fg.optim.swa_utils.SWALR(o, swa_lr=0.1, anneal_epochs=-1)
    with pytest.raises(ValueError, match="swa_lr"):
        fg.optim.swa_utils.SWALR(o, swa_lr=[0.1, 0.2])


def test_private_base_classes_import_and_isinstance_as_torch():
    from ferrograd.nn.modules.batchnorm import _BatchNorm, _NormBase
    from ferrograd.nn.modules.conv import _ConvNd
    from ferrograd.nn.modules.loss import _Loss, _WeightedLoss

    nn = fg.nn
    for cls in (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm):
        assert issubclass(cls, _BatchNorm) and issubclass(cls, _NormBase)
    convs = "Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d"
    for name in convs.split():
        assert issubclass(getattr(nn, name), _ConvNd), name
        assert issubclass(getattr(nn, "Lazy" + name), _ConvNd), name
    for name in ("MSELoss", "L1Loss", "HuberLoss", "CTCLoss", "BCELoss", "TripletMarginLoss"):
        assert issubclass(getattr(nn, name), _Loss), name
    assert issubclass(nn.CrossEntropyLoss, _WeightedLoss)
    assert isinstance(nn.BatchNorm2d(3), _BatchNorm) and isinstance(nn.Conv2d(1, 1, 1), _ConvNd)
    m = nn.ConvTranspose3d(3, 4, 2, stride=2)
    assert m(fg.ones(1, 3, 2, 2, 2)).shape == (1, 4, 4, 4, 4)
    lazy = nn.LazyConvTranspose3d(4, 2)
    assert lazy(fg.ones(1, 3, 2, 2, 2)).shape == (1, 4, 3, 3, 3)
    assert type(lazy) is nn.ConvTranspose3d


# ------------------------------------------------------------- 8. Parameter(t) aliases


def test_parameter_of_a_tensor_shares_its_memory_as_torch():
    torch = pytest.importorskip("torch")
    for L in (torch, fg):
        t = L.ones(2, 3)
        p = L.nn.Parameter(t)
        t.add_(1.0)
        assert float(p.detach().sum()) == 12.0
        with L.no_grad():
            p.mul_(3.0)
        assert float(t.sum()) == 36.0
        assert p.requires_grad and p.is_leaf and not t.requires_grad
    # a view's memory too; requires_grad=False; asked conversions copy
    base = fg.arange(12.0).reshape(3, 4)
    p = fg.nn.Parameter(base.T[1:], requires_grad=False)
    base.add_(100.0)
    assert not p.requires_grad and float(p[0, 0]) == 101.0
    c = fg.nn.Parameter(fg.ones(2), dtype=fg.float64)
    assert c.dtype == fg.float64
    # a non-leaf tensor: the parameter is a detached leaf
    x = fg.ones(2, requires_grad=True)
    q = fg.nn.Parameter(x * 2)
    (q * q).sum().backward()
    assert q.grad is not None and x.grad is None


# ------------------------------------------------------------- 9. save / load sharing


def test_save_load_keeps_shared_tensors_shared():
    a = fg.arange(12.0).reshape(3, 4)
    m = fg.nn.Linear(2, 2)
    obj = {"w": a, "tied": a, "l": [a], "p": m.weight, "p2": m.weight, "sd": m.state_dict()}
    buf = io.BytesIO()
    fg.save(obj, buf)
    buf.seek(0)
    r = fg.load(buf)
    assert r["w"] is r["tied"] is r["l"][0]
    assert r["p"] is r["p2"] and type(r["p"]).__name__ == "Parameter" and r["p"].requires_grad
    # a state dict's detached tensors over the same memory: separate objects, shared memory
    assert r["sd"]["weight"] is not r["p"]
    r["sd"]["weight"].add_(1.0)
    np.testing.assert_array_equal(r["p"].detach().numpy(), r["sd"]["weight"].numpy())
    np.testing.assert_array_equal(r["p"].detach().numpy(), m.weight.detach().numpy() + 1.0)
    r["w"][0, 0] = 100.0
    assert float(r["tied"][0, 0]) == 100.0


def test_save_load_keeps_tied_module_weights_tied():
    class Tied(fg.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = fg.nn.Linear(2, 2), fg.nn.Linear(2, 2)
            self.b.weight = self.a.weight

    buf = io.BytesIO()
    fg.save(Tied().state_dict(), buf)
    buf.seek(0)
    sd = fg.load(buf)
    sd["a.weight"].fill_(7.0)
    assert float(sd["b.weight"].sum()) == 28.0
    m = Tied()
    m.load_state_dict(sd)
    assert m.b.weight is m.a.weight and float(m.a.weight.sum()) == 28.0


def test_save_load_dicts_with_tuple_none_and_bool_keys():
    obj = {(1, 2): fg.ones(1), None: fg.zeros(1), 3.5: "x", True: 1, (1, ("a", None)): [1]}
    buf = io.BytesIO()
    fg.save(obj, buf)
    buf.seek(0)
    r = fg.load(buf)
    assert list(r) == list(obj)
    assert r[1, ("a", None)] == [1] and r[3.5] == "x" and r[True] == 1
    np.testing.assert_array_equal(r[None].numpy(), [0.0])
    with pytest.raises(TypeError, match="dict keys"):
        fg.save({frozenset([1]): 1}, io.BytesIO())


@pytest.mark.parametrize("separate", [False, True])
def test_multi_head_attention_forward_matches_torch(separate):
    # CLIP's AttentionPool2d calls it with separate q/k/v weights and concatenated biases
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    L, S, N, E, h = 5, 6, 3, 8, 2
    arrays = {
        "q": rng.standard_normal((L, N, E)),
        "k": rng.standard_normal((S, N, E)),
        "v": rng.standard_normal((S, N, E)),
        "w": rng.standard_normal((3 * E, E)),
        "b": rng.standard_normal(3 * E),
        "wo": rng.standard_normal((E, E)),
        "bo": rng.standard_normal(E),
    }
    mask = rng.random((N, S)) < 0.3
    mask[:, 0] = False
    results = []
    for lib, make in ((torch, torch.tensor), (fg, fg.tensor)):
        t = {name: make(a, requires_grad=True) for name, a in arrays.items()}
        w = t["w"]
        extra = (
            {
                "use_separate_proj_weight": True,
                "q_proj_weight": w[:E],
                "k_proj_weight": w[E : 2 * E],
                "v_proj_weight": w[2 * E :],
            }
            if separate
            else {}
        )
        out, weights = lib.nn.functional.multi_head_attention_forward(
            t["q"],
            t["k"],
            t["v"],
            E,
            h,
            None if separate else w,
            t["b"],
            None,
            None,
            False,
            0.0,
            t["wo"],
            t["bo"],
            training=False,
            key_padding_mask=make(mask),
            **extra,
        )
        ((out**2).sum() + (weights * 3).sum()).backward()
        results.append((out, weights, [t[n].grad for n in ("q", "k", "w", "b", "wo")]))
    (to, tw, tg), (fo, fw, fgr) = results
    np.testing.assert_allclose(fo.numpy(), to.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fw.numpy(), tw.detach().numpy(), rtol=1e-10, atol=1e-12)
    for a, b in zip(fgr, tg):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-10)
