"""nn.Module's registration rules, hooks and containers, each checked on PyTorch too (the
same assertions run for both libraries)."""

from __future__ import annotations

import copy

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")
LIBS = [pytest.param(fg, id="ferrograd"), pytest.param(torch, id="torch")]


@pytest.mark.parametrize("T", LIBS)
def test_state_dict_order_own_parameters_then_buffers_then_children(T):
    class M(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.child = T.nn.Linear(1, 1)
            self.w = T.nn.Parameter(T.zeros(1))
            self.register_buffer("buf", T.zeros(1))

    assert list(M().state_dict()) == ["w", "buf", "child.weight", "child.bias"]


@pytest.mark.parametrize("T", LIBS)
def test_registration_rules(T):
    m = T.nn.Linear(2, 2)
    with pytest.raises(TypeError):
        m.weight = T.ones(2, 2)  # a parameter slot takes a Parameter or None
    m.register_buffer("b", T.zeros(1))
    with pytest.raises(TypeError):
        m.b = 5
    m.b = T.nn.Parameter(T.ones(1))  # a Parameter given to a buffer's name becomes one
    assert "b" in dict(m.named_parameters()) and "b" not in dict(m.named_buffers())
    m.register_buffer("c", T.zeros(1))
    del m.c
    m.c = T.ones(2)  # after del, a plain attribute
    assert "c" not in m.state_dict()
    with pytest.raises(TypeError):
        T.nn.ModuleList().append(3)
    with pytest.raises(KeyError):
        m.add_module("a.b", T.nn.ReLU())
    with pytest.raises(AttributeError):
        m.get_submodule("weight")
    with pytest.raises(ValueError):
        m.train("yes")
    with pytest.raises(RuntimeError):
        T.nn.Parameter(T.tensor([1, 2]))

    class Early(T.nn.Module):
        def __init__(self):
            self.w = T.nn.Parameter(T.zeros(1))
            super().__init__()

    with pytest.raises(AttributeError):
        Early()


@pytest.mark.parametrize("T", LIBS)
def test_shared_submodules_listed_twice_without_deduplication(T):
    lin = T.nn.Linear(1, 1)
    m = T.nn.Module()
    m.a = lin
    m.b = lin
    assert [n for n, _ in m.named_parameters()] == ["a.weight", "a.bias"]
    assert [n for n, _ in m.named_parameters(remove_duplicate=False)] == [
        "a.weight",
        "a.bias",
        "b.weight",
        "b.bias",
    ]


@pytest.mark.parametrize("T", LIBS)
def test_zero_grad_in_place_deepcopy_without_grad_and_get_buffer(T):
    m = T.nn.Linear(2, 1)
    m(T.ones(1, 2)).sum().backward()
    g = m.weight.grad
    m.zero_grad(set_to_none=False)
    # in place: the gradient taken before sees the zeros
    assert float(g.abs().sum()) == 0.0 and float(m.weight.grad.abs().sum()) == 0.0
    m(T.ones(1, 2)).sum().backward()
    assert copy.deepcopy(m).weight.grad is None
    bn = T.nn.Sequential(T.nn.BatchNorm1d(2))
    assert bn.get_buffer("0.running_mean").shape == (2,)


@pytest.mark.parametrize("T", LIBS)
def test_forward_hooks_with_kwargs_prepend_always_call_and_context_manager(T):
    calls = []

    class Add(T.nn.Module):
        def forward(self, x, *, bias=0.0):
            if bias == "boom":
                raise ValueError("boom")
            return x + bias

    m = Add()
    m.register_forward_hook(lambda mod, a, out: calls.append("second"))
    m.register_forward_hook(lambda mod, a, out: calls.append("first"), prepend=True)

    def pre(mod, args, kwargs):
        return args, {**kwargs, "bias": 10.0}

    m.register_forward_pre_hook(pre, with_kwargs=True)
    m.register_forward_hook(
        lambda mod, a, kw, out: calls.append(("kw", kw["bias"])), with_kwargs=True
    )
    out = m(T.ones(1), bias=1.0)
    assert float(out[0]) == 11.0
    assert calls == ["first", "second", ("kw", 10.0)]
    calls.clear()
    m2 = Add()
    m2.register_forward_hook(lambda mod, a, out: calls.append(out), always_call=True)
    with pytest.raises(ValueError, match="boom"):
        m2(T.ones(1), bias="boom")
    assert calls == [None]
    calls.clear()
    m3 = Add()
    with m3.register_forward_hook(lambda mod, a, out: calls.append(1)):
        m3(T.ones(1))
    m3(T.ones(1))
    assert calls == [1]


@pytest.mark.parametrize("T", LIBS)
def test_container_operations(T):
    nn = T.nn
    s = nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Sigmoid())
    del s[1]
    assert [type(m).__name__ for m in s] == ["ReLU", "Sigmoid"] and list(s._modules) == ["0", "1"]
    s.insert(1, nn.Tanh())
    s.extend([nn.Identity()])
    assert type(s.pop(3)).__name__ == "Identity" and len(s) == 3
    s[0] = nn.GELU()
    assert type(s[0]).__name__ == "GELU" and len(s + nn.Sequential(nn.ReLU())) == 4
    ml = nn.ModuleList([nn.ReLU(), nn.Tanh()])
    ml += [nn.Sigmoid()]
    del ml[0]
    assert [type(m).__name__ for m in ml] == ["Tanh", "Sigmoid"]
    assert type(ml.pop(0)).__name__ == "Tanh" and len(ml) == 1
    md = nn.ModuleDict({"a": nn.ReLU()})
    md.update(nn.ModuleDict({"b": nn.Tanh()}))
    assert type(md.pop("a")).__name__ == "ReLU" and list(md.keys()) == ["b"]
    pl = nn.ParameterList([nn.Parameter(T.ones(1)) for _ in range(3)])
    assert isinstance(pl[0:2], nn.ParameterList) and len(pl[0:2]) == 2
    pd = nn.ParameterDict({"x": nn.Parameter(T.ones(1))})
    assert pd.get("y") is None and "x" in pd
    pd.update({"y": nn.Parameter(T.zeros(1))})
    assert sorted(pd.keys()) == ["x", "y"]
    assert isinstance(pd.pop("x"), nn.Parameter) and list(pd.keys()) == ["y"]


def test_global_forward_hooks_see_every_module_call():
    seen = []
    h = fg.nn.modules.module.register_module_forward_hook(
        lambda mod, args, out: seen.append(type(mod).__name__)
    )
    try:
        fg.nn.Sequential(fg.nn.Linear(2, 2), fg.nn.ReLU())(fg.ones(1, 2))
    finally:
        h.remove()
    assert seen == ["Linear", "ReLU", "Sequential"]
    fg.nn.ReLU()(fg.ones(1))
    assert len(seen) == 3
    np.testing.assert_array_equal(fg.nn.ReLU()(fg.tensor([-1.0])).numpy(), [0.0])


@pytest.mark.parametrize("T", LIBS)
def test_full_backward_hooks_see_and_replace_gradients(T):
    import warnings

    lin = T.nn.Linear(3, 2)
    lin.load_state_dict(
        {"weight": T.tensor(np.arange(6.0).reshape(2, 3) / 10), "bias": T.tensor([0.1, -0.2])}
    )
    log = []

    def rounded(gs):
        return [
            None if g is None else np.round(g.numpy().astype(np.float64), 4).tolist() for g in gs
        ]

    lin.register_full_backward_pre_hook(lambda m, go: log.append(("pre", rounded(go))))
    h = lin.register_full_backward_hook(
        lambda m, gi, go: log.append(("full", rounded(gi), rounded(go)))
    )
    x = T.tensor(np.ones((1, 3)), requires_grad=True, dtype=T.float32)
    (lin(x) * T.tensor([[1.0, 2.0]])).sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that no input needs a gradient
        lin(T.ones(1, 3)).sum().backward()
    assert log == [
        ("pre", [[[1.0, 2.0]]]),
        ("full", [[[0.6, 0.9, 1.2]]], [[[1.0, 2.0]]]),
        ("pre", [[[1.0, 1.0]]]),
        ("full", [None], [[[1.0, 1.0]]]),
    ]
    h.remove()
    lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0,))
    x2 = T.tensor(np.ones((1, 3)), requires_grad=True, dtype=T.float32)
    lin(x2).sum().backward()
    np.testing.assert_array_equal(x2.grad.numpy(), np.zeros((1, 3)))


@pytest.mark.parametrize("T", LIBS)
def test_state_dict_hooks_and_extra_state(T):
    seen = []

    class WithExtra(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = T.nn.Linear(1, 1)
            self.step = 3

        def get_extra_state(self):
            return {"step": self.step}

        def set_extra_state(self, state):
            self.step = state["step"]

    m = WithExtra()
    m.lin.register_state_dict_pre_hook(lambda mod, prefix, keep_vars: seen.append(("pre", prefix)))

    def post(mod, sd, prefix, meta):
        seen.append(("post", prefix))
        sd[prefix + "note"] = 1

    m.lin.register_state_dict_post_hook(post)
    sd = m.state_dict()
    assert sd["_extra_state"] == {"step": 3} and sd["lin.note"] == 1
    assert seen == [("pre", "lin."), ("post", "lin.")]

    def rename(mod, state_dict, prefix, meta, strict, missing, unexpected, errors):
        if prefix + "old_weight" in state_dict:
            state_dict[prefix + "weight"] = state_dict.pop(prefix + "old_weight")

    m2 = WithExtra()
    m2.lin.register_load_state_dict_pre_hook(rename)
    post_seen = []
    m2.register_load_state_dict_post_hook(
        lambda mod, keys: post_seen.append(list(keys.missing_keys))
    )
    sd = {"lin.old_weight": T.ones(1, 1), "lin.bias": T.zeros(1), "_extra_state": {"step": 7}}
    m2.load_state_dict(sd)
    assert m2.step == 7 and float(m2.lin.weight.sum()) == 1.0 and post_seen == [[]]


@pytest.mark.parametrize("T", LIBS)
@pytest.mark.parametrize("name", ["SGD", "Adam", "LBFGS"])
def test_optimizer_step_hooks_run_once_around_each_step(T, name):
    p = T.nn.Parameter(T.ones(2))
    opt = getattr(T.optim, name)([p], lr=0.1)
    seen = []
    h = opt.register_step_pre_hook(lambda o, a, kw: seen.append(("pre", float(p.detach()[0]))))
    opt.register_step_post_hook(lambda o, a, kw: seen.append(("post", float(p.detach()[0]))))

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    closure()
    opt.step(closure)
    assert [k for k, _ in seen] == ["pre", "post"] and seen[0][1] == 1.0 and seen[1][1] < 1.0
    h.remove()
    seen.clear()
    closure()
    opt.step(closure)
    assert [k for k, _ in seen] == ["post"]


def test_a_module_in_a_list_and_added_by_name_is_named_once():
    # pyGAT: self.attentions = [Layer() ...] plus add_module(f"attention_{i}", layer)
    def build(lib):
        class GAT(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.attentions = [lib.nn.Linear(2, 3) for _ in range(2)]
                for i, a in enumerate(self.attentions):
                    self.add_module(f"attention_{i}", a)
                self.out = lib.nn.Linear(3, 1)

        return GAT()

    want, got = build(torch), build(fg)
    assert list(got.state_dict()) == list(want.state_dict())
    assert [n for n, _ in got.named_children()] == [n for n, _ in want.named_children()]
    assert len(list(got.parameters())) == len(list(want.parameters()))
    got.load_state_dict({k: fg.tensor(v.numpy()) for k, v in want.state_dict().items()})
