"""Module hooks (forward, backward, global, registration, state-dict), each run on PyTorch
and ferrograd and compared (found by porting PyTorch's test_module_hooks.py,
test_load_state_dict.py, test_lazy_modules.py and test_init.py)."""

from __future__ import annotations

import importlib
import warnings

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")

LIBS = pytest.mark.parametrize("L", [torch, fg], ids=["torch", "ferrograd"])


def _module_mod(L):
    """``<lib>.nn.modules.module``, where the global hooks live."""
    return importlib.import_module(L.__name__ + ".nn.modules.module")


def _np(t) -> np.ndarray:
    return np.asarray(t.detach().numpy())


def _clear_global_hooks() -> None:
    for L in (torch, fg):
        M = _module_mod(L)
        for name in dir(M):
            table = getattr(M, name)
            if name.startswith("_global_") and isinstance(table, dict):
                table.clear()
    # PyTorch remembers which kind of global backward hook it last took
    _module_mod(torch)._global_is_full_backward_hook = None


@pytest.fixture(autouse=True)
def _no_global_hooks():
    """Each test starts and ends with no global hook registered."""
    _clear_global_hooks()
    yield
    _clear_global_hooks()


# ---------------------------------------------------------------------- backward hooks


@LIBS
def test_backward_hook_wrong_count_names_got_and_expected(L) -> None:
    module = L.nn.Sigmoid()
    x = L.randn(5, 5, requires_grad=True)
    M = _module_mod(L)
    cases = [
        (module.register_full_backward_hook, lambda m, gi, go: gi[:-1], 0),
        (module.register_full_backward_hook, lambda m, gi, go: (*gi, L.randn(2, 2)), 2),
        (module.register_full_backward_pre_hook, lambda m, go: (), 0),
        (module.register_full_backward_pre_hook, lambda m, go: (*go, L.randn(2, 2)), 2),
    ]
    for register, hook, got in cases:
        with register(hook), pytest.raises(RuntimeError, match=f"got {got}, but expected 1"):
            module(x).sum().backward()
    with (
        M.register_module_backward_hook(lambda m, gi, go: gi[:-1]),
        pytest.raises(RuntimeError, match="got 0, but expected 1"),
    ):
        fresh = L.nn.Sigmoid()
        fresh(x).sum().backward()


@LIBS
def test_backward_hook_grad_input_has_one_entry_per_argument(L) -> None:
    class Mod(L.nn.Module):
        def forward(self, flag, t, u):
            return t.clone(), flag, u * 2

    seen = []
    mod = Mod()
    mod.register_full_backward_hook(lambda m, gi, go: seen.append((gi, go)))
    mod.register_full_backward_pre_hook(lambda m, go: seen.append(go))
    t = L.rand(2, requires_grad=True)
    out, _, _ = mod(True, t, L.rand(2))
    out.sum().backward()
    go_pre, (gi, go) = seen
    assert len(go_pre) == 3 and go_pre[1] is None and go_pre[2] is None
    # (PyTorch passes zeros for `u`, a tensor that needs no gradient; ferrograd None)
    assert len(gi) == 3 and gi[0] is None
    np.testing.assert_allclose(_np(gi[1]), 1.0)
    assert len(go) == 3 and go[1] is None
    np.testing.assert_allclose(_np(go[0]), 1.0)


@LIBS
def test_backward_hook_without_input_gradients_may_not_return_gradients(L) -> None:
    mod = L.nn.Linear(2, 3)
    inp = L.rand(1, 2)
    ret = {"value": None}
    calls = []

    def hook(m, gi, go):
        calls.append(gi)
        assert all(g is None for g in gi)
        assert tuple(go[0].shape) == (1, 3)
        return ret["value"]

    mod.register_full_backward_hook(hook)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mod(inp).sum().backward()
        ret["value"] = (None,)
        mod(inp).sum().backward()
        assert len(calls) == 2
        ret["value"] = inp
        with pytest.raises(RuntimeError, match="where no input requires gradient"):
            mod(inp).sum().backward()


@LIBS
def test_backward_hooks_skip_a_dict_output_with_a_warning(L) -> None:
    class Mod(L.nn.Module):
        def forward(self, d):
            return {"x": L.nn.functional.softmax(d["x"], dim=0)}

    fired = []
    m = Mod()
    m.register_full_backward_pre_hook(lambda *a: fired.append("pre"))
    m.register_full_backward_hook(lambda *a: fired.append("full"))
    x = L.ones(2, requires_grad=True, dtype=L.float64)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m({"x": x})["x"][0].backward()
    assert fired == []
    assert any("should be a Tensor or a tuple of Tensors" in str(r.message) for r in w)
    np.testing.assert_allclose(_np(x.grad), [0.25, -0.25], rtol=1e-12, atol=1e-15)


@LIBS
def test_global_backward_hook_counts_and_scales_gradients(L) -> None:
    M = _module_mod(L)
    mods = [L.nn.Sigmoid() for _ in range(3)]
    x = L.randn(5, 5, requires_grad=True, dtype=L.float64)
    two = L.ones(5, 5, dtype=L.float64) * 2
    count = [0]

    def hook(inc):
        def h(m, gi, go):
            assert isinstance(m, L.nn.Sigmoid) and isinstance(gi, tuple)
            np.testing.assert_allclose(_np(go[0]), 2.0)
            count[0] += inc
            return tuple(g * 2 for g in gi)

        return h

    h1 = M.register_module_backward_hook(hook(1))
    outs = [m(x) for m in mods]
    outs[0].backward(two, retain_graph=True)
    outs[1].backward(two)
    outs[2].backward(two)
    assert count[0] == 3
    h2 = M.register_module_backward_hook(hook(2))
    x.grad = None
    mods[0](x).backward(two)
    assert count[0] == 6
    s = L.sigmoid(x)
    np.testing.assert_allclose(_np(x.grad), _np(s * (1 - s) * 2 * 4), rtol=1e-12)
    h2.remove()
    mods[1](x).backward(two)
    assert count[0] == 7
    h1.remove()
    mods[2](x).backward(two)
    assert count[0] == 7


@LIBS
def test_global_hooks_run_before_local_ones(L) -> None:
    M = _module_mod(L)
    module = L.nn.Sigmoid()
    order = []

    def rec(tag, ret):
        def h(*a):
            order.append(tag)
            return a[ret]

        return h

    M.register_module_forward_pre_hook(rec("global pre", 1))
    module.register_forward_pre_hook(rec("local pre", 1))
    M.register_module_forward_hook(rec("global fwd", 2))
    module.register_forward_hook(rec("local fwd", 2))
    M.register_module_backward_hook(rec("global bwd", 1))
    module.register_backward_hook(rec("local bwd", 1))
    module(L.randn(5, 5, requires_grad=True)).backward(L.ones(5, 5))
    assert order == [
        "global pre",
        "local pre",
        "global fwd",
        "local fwd",
        "global bwd",
        "local bwd",
    ]


@LIBS
def test_global_forward_hook_with_kwargs_and_always_call(L) -> None:
    M = _module_mod(L)
    seen = []

    class Mod(L.nn.Module):
        def forward(self, x, scale=1.0):
            if scale < 0:
                raise ValueError("negative scale")
            return x * scale

    m = Mod()
    x = L.ones(2, dtype=L.float64)
    with M.register_module_forward_hook(
        lambda mod, args, kwargs, out: seen.append(dict(kwargs)) or out + kwargs["scale"],
        with_kwargs=True,
    ):
        np.testing.assert_array_equal(_np(m(x, scale=3.0)), 6.0)
    assert seen == [{"scale": 3.0}]
    with (
        M.register_module_forward_hook(lambda mod, args, out: seen.append(out), always_call=True),
        pytest.raises(ValueError, match="negative scale"),
    ):
        m(x, scale=-1.0)
    assert seen[-1] is None


# ------------------------------------------------------------------------ hook tables


@LIBS
def test_hook_removed_while_running_leaves_its_table_empty(L) -> None:
    module = L.nn.Sigmoid()

    def remover(i):
        def h(*a):
            handles[i].remove()

        return h

    handles = [module.register_forward_pre_hook(remover(0))]
    handles.append(module.register_forward_pre_hook(remover(1)))
    assert len(handles[0].hooks_dict_ref()) == 2
    x = L.randn(2, 2)
    np.testing.assert_allclose(_np(module(x)), _np(L.sigmoid(x)))
    assert handles[0].hooks_dict_ref() is module._forward_pre_hooks
    assert len(handles[1].hooks_dict_ref()) == 0


@LIBS
def test_hook_tables_are_attributes_of_a_fresh_module(L) -> None:
    m = L.nn.Linear(2, 2)
    for name in (
        "_forward_hooks",
        "_forward_pre_hooks",
        "_backward_hooks",
        "_backward_pre_hooks",
        "_state_dict_hooks",
        "_state_dict_pre_hooks",
        "_load_state_dict_pre_hooks",
        "_load_state_dict_post_hooks",
        "_forward_hooks_with_kwargs",
        "_forward_pre_hooks_with_kwargs",
    ):
        assert len(getattr(m, name)) == 0, name
    table = m._forward_hooks
    m.register_forward_hook(lambda *a: None)
    h = m.register_forward_hook(lambda *a: None, prepend=True)
    assert m._forward_hooks is table and next(iter(table)) == h.id
    m._forward_hooks.clear()
    m(L.ones(1, 2))
    m.register_load_state_dict_post_hook(lambda *a: None)
    assert len(m._load_state_dict_post_hooks) == 1


@LIBS
def test_strict_load_error_lists_missing_and_unexpected_keys(L) -> None:
    class Post(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.foo = L.nn.Parameter(L.rand(3))

    def post(module, keys):
        keys.missing_keys.append("foo")
        keys.unexpected_keys.append("bar")

    nested = Post()
    wrapped = L.nn.ModuleList([nested])
    nested.register_load_state_dict_post_hook(post)
    with pytest.raises(
        RuntimeError, match='for ModuleList:\n\tMissing key.*"foo".*\n\tUnexp.*"bar"'
    ):
        wrapped.load_state_dict(wrapped.state_dict(), strict=True)


# ------------------------------------------------------------------- registration hooks


def _basic_net(L):
    nn = L.nn

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.Parameter(L.zeros(3, 5))
            self.register_buffer("b", L.zeros(1, 3))
            self.keep = nn.Buffer(L.zeros(2))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = Layer()
            self.register_parameter("q", nn.Parameter(L.zeros(2)))
            self.add_module("l2", Layer())

    n = Net()
    return nn.Sequential(n, n)


@pytest.mark.parametrize("returns", [True, False])
@pytest.mark.parametrize("kind", ["buffer", "module", "parameter"])
@LIBS
def test_module_registration_hooks(L, kind: str, returns: bool) -> None:
    M = _module_mod(L)
    names = []

    def hook(module, name, value):
        value.registered = True
        names.append(name)
        if returns:
            return value

    handle = getattr(M, f"register_module_{kind}_registration_hook")(hook)
    try:
        s = _basic_net(L)
    finally:
        handle.remove()
    items = {"buffer": s.buffers, "module": s.modules, "parameter": s.parameters}[kind]()
    for x in items:
        if x is not s:
            assert getattr(x, "registered", False)
    expected = {
        "buffer": ["b", "keep", "b", "keep"],
        "module": ["l1", "l2", "0", "1"],
        "parameter": ["p", "q", "p"],
    }[kind]
    assert names == expected
    _basic_net(L)
    assert len(names) == len(expected)


@LIBS
def test_registration_hook_replaces_the_value(L) -> None:
    M = _module_mod(L)
    with M.register_module_parameter_registration_hook(
        lambda m, name, p: L.nn.Parameter(p.detach() + 1)
    ):
        lin = L.nn.Linear(2, 2, bias=False)
        lin.extra = L.nn.Parameter(L.zeros(2))
    np.testing.assert_allclose(_np(lin.extra), 1.0)
    assert len(list(lin.parameters())) == 2


# ----------------------------------------------------------------------- load_state_dict


@LIBS
def test_load_state_dict_rejects_a_non_mapping(L) -> None:
    for bad in ["", 2]:
        with pytest.raises(TypeError, match="Expected state_dict to be dict-like, got"):
            L.nn.Module().load_state_dict(bad)


@LIBS
def test_failed_load_still_loads_every_matching_key(L) -> None:
    m = L.nn.Sequential(L.nn.Linear(2, 2), L.nn.Linear(2, 3))
    sd = {
        "0.weight": L.ones(2, 2),
        "0.bias": L.ones(2),
        "1.weight": L.ones(5, 5),
        "1.bias": L.ones(3),
        "zz": L.ones(1),
    }
    with pytest.raises(
        RuntimeError,
        match=r'Sequential:\n\tUnexpected key\(s\) in state_dict: "zz". \n\tsize mismatch for '
        r"1.weight: copying a param with shape .*\[5, 5\].* from checkpoint, the shape in "
        r"current model is .*\[3, 2\]",
    ):
        m.load_state_dict(sd)
    for name in ("0.weight", "0.bias", "1.bias"):
        np.testing.assert_array_equal(_np(m.get_parameter(name)), 1.0)
    assert not np.all(_np(m[1].weight) == 1.0)
    sd.pop("zz")
    with pytest.raises(RuntimeError, match="size mismatch for 1.weight"):
        m.load_state_dict(sd, strict=False)


@pytest.mark.parametrize("keep_vars", [True, False])
@LIBS
def test_load_with_assign_takes_the_checkpoint_tensors(L, keep_vars: bool) -> None:
    src = L.nn.Sequential(L.nn.Linear(3, 4), L.nn.BatchNorm1d(4))
    src[0].weight.requires_grad_(False)
    sd = src.state_dict(keep_vars=keep_vars)
    dst = L.nn.Sequential(L.nn.Linear(3, 4), L.nn.BatchNorm1d(4))
    before = dst.state_dict(keep_vars=True)
    dst.load_state_dict(sd, assign=True)
    after = dst.state_dict(keep_vars=True)
    for k, v in sd.items():
        assert (after[k] is v) == (keep_vars or k.startswith("1.running") or k.endswith("tracked"))
        np.testing.assert_array_equal(_np(after[k]), _np(v))
        if k.endswith(("weight", "bias")):
            assert isinstance(after[k], L.nn.Parameter)
            assert after[k].requires_grad == before[k].requires_grad
    # the module and the checkpoint share memory
    with L.no_grad():
        dst[0].bias.add_(1.0)
    np.testing.assert_array_equal(_np(sd["0.bias"]), _np(dst[0].bias))


@LIBS
def test_load_with_assign_keeps_the_checkpoint_dtype_and_trains(L) -> None:
    L.manual_seed(0)
    net = L.nn.Sequential(L.nn.Linear(3, 5), L.nn.BatchNorm1d(5))
    sd = {k: v.double() if v.is_floating_point() else v for k, v in net.state_dict().items()}
    net.double()
    net2 = L.nn.Sequential(L.nn.Linear(3, 5), L.nn.BatchNorm1d(5))
    net2.load_state_dict(sd, assign=True)
    assert net2[0].weight.dtype == L.float64 and net2[1].running_mean.dtype == L.float64
    assert net2[0].weight.requires_grad
    opts = [L.optim.Adam(n.parameters(), lr=0.1) for n in (net, net2)]
    x = L.randn(4, 3, dtype=L.float64)
    for _ in range(3):
        for n, opt in zip((net, net2), opts):
            opt.zero_grad()
            n(x).pow(2).sum().backward()
            opt.step()
    for k, v in net.state_dict().items():
        np.testing.assert_allclose(_np(net2.state_dict()[k]), _np(v), rtol=1e-12)


# ------------------------------------------------------------------------- lazy modules


@pytest.mark.parametrize(
    ("name", "shape"),
    [("Linear", (5, 5)), ("Conv2d", (2, 16, 8, 6)), ("ConvTranspose1d", (2, 16, 9))],
)
@LIBS
def test_pickled_lazy_layer_stays_lazy_until_it_runs(L, name: str, shape: tuple) -> None:
    import pickle

    lazy_cls, cls = getattr(L.nn, "Lazy" + name), getattr(L.nn, name)
    args = (10,) if name == "Linear" else (8, 2)
    m = pickle.loads(pickle.dumps(lazy_cls(*args)))
    assert isinstance(m, lazy_cls)
    assert isinstance(m.weight, L.nn.parameter.UninitializedParameter)
    assert isinstance(m.bias, L.nn.parameter.UninitializedParameter)
    m(L.ones(*shape))
    n = pickle.loads(pickle.dumps(m))
    assert isinstance(n, cls) and not isinstance(n, lazy_cls)
    assert not isinstance(n.weight, L.nn.parameter.UninitializedParameter)
    np.testing.assert_array_equal(_np(n.weight), _np(m.weight))


@LIBS
def test_deep_copied_lazy_layer_stays_lazy(L) -> None:
    import copy

    m = copy.deepcopy(L.nn.LazyLinear(3, dtype=L.float64))
    assert isinstance(m.weight, L.nn.parameter.UninitializedParameter)
    assert isinstance(m.bias, L.nn.parameter.UninitializedParameter)
    m(L.ones(2, 4, dtype=L.float64))
    assert isinstance(m, L.nn.Linear) and tuple(m.weight.shape) == (3, 4)
    assert m.weight.dtype == L.float64 and m.bias.dtype == L.float64


@pytest.mark.parametrize(
    ("lazy", "sized"),
    [
        (lambda nn: nn.LazyLinear(10), lambda nn: nn.Linear(5, 10)),
        (lambda nn: nn.LazyConv1d(32, 2), lambda nn: nn.Conv1d(16, 32, 2)),
        (lambda nn: nn.LazyBatchNorm2d(), lambda nn: nn.BatchNorm2d(10)),
    ],
)
@LIBS
def test_state_of_an_unrun_lazy_layer_does_not_load_into_a_sized_one(L, lazy, sized) -> None:
    sd = lazy(L.nn).state_dict()
    assert isinstance(sd["weight"], L.nn.parameter.UninitializedParameter)
    with pytest.raises(RuntimeError, match="shape of an uninitialized"):
        sized(L.nn).load_state_dict(sd)


@pytest.mark.parametrize("name", ["BatchNorm1d", "BatchNorm2d", "InstanceNorm1d"])
@LIBS
def test_lazy_norm_takes_its_input_by_keyword(L, name: str) -> None:
    shape = (4, 3, 6) if name.endswith("1d") else (4, 3, 6, 5)
    x = L.arange(float(np.prod(shape)), dtype=L.float64).reshape(shape).sin()
    lazy = getattr(L.nn, "Lazy" + name)(dtype=L.float64)
    plain = getattr(L.nn, name)(3, dtype=L.float64)
    np.testing.assert_allclose(_np(lazy(input=x)), _np(plain(input=x)), rtol=1e-12)
    assert isinstance(lazy, getattr(L.nn, name))


def _user_lazy_module(L):
    """A lazy module of the user's own: ``LazyModuleMixin`` before ``nn.Module``."""

    class LazyScale(L.nn.modules.lazy.LazyModuleMixin, L.nn.Module):
        cls_to_become = None

        def __init__(self):
            super().__init__()
            self.scale = L.nn.parameter.UninitializedParameter()
            self.shift = L.nn.parameter.UninitializedBuffer()

        def initialize_parameters(self, x):
            if self.has_uninitialized_params():
                with L.no_grad():
                    self.scale.materialize(x.shape[-1:])
                    self.shift.materialize(x.shape[-1:])
                    self.scale.fill_(2.0)
                    self.shift.fill_(0.5)

        def forward(self, x):
            return x * self.scale + self.shift

    return LazyScale


@LIBS
def test_user_lazy_module_sizes_itself_on_its_first_call(L) -> None:
    LazyScale = _user_lazy_module(L)
    m = LazyScale()
    assert m.has_uninitialized_params()
    assert isinstance(m.state_dict()["shift"], L.nn.parameter.UninitializedBuffer)
    with pytest.raises(RuntimeError, match="share memory on an uninitialized"):
        m.share_memory()
    x = L.arange(6, dtype=L.float64).reshape(2, 3).requires_grad_()
    m.double()
    pre = m.register_forward_pre_hook(lambda mod, args: (args[0] + 1,))
    out = m(x)
    pre.remove()
    assert not m.has_uninitialized_params()
    assert type(m.scale) is L.nn.Parameter and m.scale.dtype == L.float64
    assert dict(m.named_buffers()).keys() == {"shift"}
    np.testing.assert_allclose(_np(out), (_np(x) + 1) * 2 + 0.5)
    out.sum().backward()
    np.testing.assert_allclose(_np(m.scale.grad), (_np(x) + 1).sum(0))
    np.testing.assert_allclose(_np(x.grad), 2.0)
    # the initialising hook is gone: a second call does not re-initialise
    with L.no_grad():
        m.scale.fill_(3.0)
    np.testing.assert_allclose(_np(m(x)), _np(x) * 3 + 0.5)


@LIBS
def test_user_lazy_module_is_sized_by_a_state_dict(L) -> None:
    LazyScale = _user_lazy_module(L)
    src = LazyScale()
    src(L.ones(2, 4))
    dst = LazyScale()
    dst.load_state_dict(src.state_dict())
    assert tuple(dst.scale.shape) == (4,)
    np.testing.assert_array_equal(_np(dst.scale), 2.0)
    np.testing.assert_array_equal(_np(dst.shift), 0.5)
    unrun = LazyScale()
    unrun.load_state_dict(LazyScale().state_dict())
    assert unrun.has_uninitialized_params()
    with pytest.raises(RuntimeError, match="shape of an uninitialized"):
        src.load_state_dict(LazyScale().state_dict())
