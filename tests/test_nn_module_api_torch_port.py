"""Module API and containers (registration rules, attribute assignment, extra state,
reprs, Sequential / ModuleList / ParameterDict, Unflatten), each run on PyTorch and
ferrograd with the same assertions (found by porting the Module-API tests of PyTorch's
test_nn.py)."""

from __future__ import annotations

from collections import OrderedDict

import ferrograd as fg
import pytest

torch = pytest.importorskip("torch")

LIBS = pytest.mark.parametrize("L", [torch, fg], ids=["torch", "ferrograd"])


def _names(items) -> list[str]:
    return [n for n, _ in items]


# ------------------------------------------------------------------------- registration


@LIBS
def test_parameter_given_to_register_buffer_is_a_buffer(L):
    m = L.nn.Module()
    m.p = L.nn.Parameter(L.ones(1))
    m.register_buffer("nb", None)
    m.register_buffer("pb", L.nn.Parameter(L.ones(1)))
    assert _names(m.named_parameters()) == ["p"]
    assert _names(m.named_buffers()) == ["pb"]
    assert list(m.state_dict()) == ["p", "pb"]
    m.register_buffer("nb", L.ones(1))
    assert list(m.state_dict()) == ["p", "nb", "pb"]


@LIBS
def test_register_buffer_before_init_raises(L):
    class M(L.nn.Module):
        def __init__(self):
            self.register_buffer("b", L.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        M()


@LIBS
def test_assigning_a_non_module_to_a_module_slot_raises(L):
    m = L.nn.Linear(2, 2)
    m.add_module("sub", L.nn.ReLU())
    with pytest.raises(TypeError, match="sub"):
        m.sub = 3
    with pytest.raises(TypeError, match="sub"):
        m.sub = L.ones(1)
    assert isinstance(m.sub, L.nn.ReLU)
    m.sub = None  # None is allowed
    assert _names(m.named_children()) == []
    m.sub = L.nn.Tanh()
    assert _names(m.named_children()) == ["sub"]

    s = L.nn.Sequential(L.nn.ReLU())
    with pytest.raises(TypeError):
        setattr(s, "0", "not a module")


@LIBS
def test_set_submodule_with_a_non_module_raises_value_error(L):
    m = L.nn.Sequential(L.nn.ReLU())
    with pytest.raises(ValueError, match="not an nn.Module"):
        m.set_submodule("0", 3)
    assert isinstance(m[0], L.nn.ReLU)


# ------------------------------------------------------------------------- extra state


@LIBS
def test_extra_state_without_set_extra_state_is_an_unexpected_key(L):
    class SavesOnly(L.nn.Module):
        def get_extra_state(self):
            return 3

    sd = SavesOnly().state_dict()
    assert list(sd) == ["_extra_state"]
    with pytest.raises(RuntimeError, match="Unexpected key.*_extra_state"):
        SavesOnly().load_state_dict(sd)
    r = SavesOnly().load_state_dict(sd, strict=False)
    assert list(r.unexpected_keys) == ["_extra_state"]
    assert list(r.missing_keys) == []

    r = L.nn.Sequential(SavesOnly()).load_state_dict({"0._extra_state": 1}, strict=False)
    assert list(r.unexpected_keys) == ["0._extra_state"]


# -------------------------------------------------------------------------------- reprs


@LIBS
def test_multiline_extra_repr_is_indented(L):
    class E(L.nn.Module):
        def extra_repr(self):
            return "a=1\nb=2"

    class WithChild(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = L.nn.Linear(1, 1)

        def extra_repr(self):
            return "x=1"

    assert repr(E()) == "E(\n  a=1\n  b=2\n)"
    assert repr(WithChild()) == (
        "WithChild(\n  x=1\n  (lin): Linear(in_features=1, out_features=1, bias=True)\n)"
    )


@LIBS
def test_repr_shows_a_shared_module_under_each_name(L):
    relu = L.nn.ReLU()
    m = L.nn.Sequential(relu, relu)
    assert repr(m) == "Sequential(\n  (0): ReLU()\n  (1): ReLU()\n)"


@LIBS
def test_module_list_repr_groups_repeated_entries(L):
    ml = L.nn.ModuleList([L.nn.ReLU()] * 3 + [L.nn.Tanh(), L.nn.Linear(1, 1), L.nn.Linear(1, 1)])
    assert repr(ml) == (
        "ModuleList(\n  (0-2): 3 x ReLU()\n  (3): Tanh()\n"
        "  (4-5): 2 x Linear(in_features=1, out_features=1, bias=True)\n)"
    )
    assert repr(L.nn.ModuleList()) == "ModuleList()"
    nested = L.nn.ModuleList([L.nn.Sequential(L.nn.ReLU())])
    assert repr(nested) == "ModuleList(\n  (0): Sequential(\n    (0): ReLU()\n  )\n)"


@LIBS
def test_parameter_list_and_dict_reprs_list_their_entries(L):
    # (host tensors: a device tensor's repr names its device, in both libraries)
    pl = L.nn.ParameterList(
        [L.nn.Parameter(L.ones(2, 3, device="cpu")), L.ones(1, dtype=L.float64, device="cpu")]
        + [None, 3]
    )
    dt = "torch." if L is torch else ""
    assert repr(pl) == (
        "ParameterList(\n"
        f"    (0): Parameter containing: [{dt}float32 of size 2x3]\n"
        f"    (1): Parameter containing: [{dt}float64 of size 1]\n"
        "    (2): Object of type: NoneType\n"
        "    (3): Object of type: int\n)"
    )
    pd = L.nn.ParameterDict({"a": L.nn.Parameter(L.ones(2, 3, device="cpu")), "b": None})
    assert repr(pd) == (
        "ParameterDict(\n"
        "    (a): Parameter containing: [torch.FloatTensor of size 2x3]\n"
        "    (b): Object of type: NoneType\n)"
    )


# --------------------------------------------------------------------------- containers


@LIBS
def test_sequential_iadd_takes_only_a_sequential(L):
    s = L.nn.Sequential(L.nn.ReLU())
    with pytest.raises(ValueError, match="Sequential"):
        s += L.nn.Tanh()
    with pytest.raises(ValueError, match="Sequential"):
        s += [L.nn.Tanh()]
    assert len(s) == 1
    s += L.nn.Sequential(OrderedDict(t=L.nn.Tanh()))
    assert _names(s.named_children()) == ["0", "1"]


def test_module_list_insert_takes_only_modules():
    # (PyTorch's insert stores anything, and the list breaks later; ferrograd refuses it
    # as append does)
    ml = fg.nn.ModuleList([fg.nn.ReLU()])
    with pytest.raises(TypeError, match="int is not a Module"):
        ml.insert(0, 3)
    assert [type(m).__name__ for m in ml] == ["ReLU"]


@LIBS
def test_parameter_dict_keys_follow_parameter_name_rules(L):
    pd = L.nn.ParameterDict()
    with pytest.raises(KeyError):
        pd["a.b"] = L.ones(1)
    with pytest.raises(KeyError):
        pd[""] = L.ones(1)
    with pytest.raises(TypeError):
        pd[1] = L.ones(1)
    with pytest.raises(KeyError, match="already exists"):
        pd["keys"] = L.ones(1)
    if L is fg:  # (PyTorch keeps a refused key in its listing)
        assert len(pd) == 0
    pd = L.nn.ParameterDict()
    pd["n"] = None
    pd["w"] = L.ones(1)
    assert list(pd) == ["n", "w"]


@LIBS
def test_parameter_dict_missing_key_raises_key_and_attribute_error(L):
    pd = L.nn.ParameterDict({"a": L.ones(1)})
    # PyTorch raises AttributeError; ferrograd's error is also a KeyError
    with pytest.raises(AttributeError):
        pd["nope"]
    with pytest.raises(AttributeError):
        pd.pop("nope")
    assert list(pd) == ["a"]
    if L is fg:
        with pytest.raises(KeyError):
            pd["nope"]


@LIBS
def test_parameter_dict_or_with_a_dict_on_the_left(L):
    pd = L.nn.ParameterDict({"a": L.ones(1)})
    r = {"b": L.zeros(1)} | pd
    assert type(r) is dict
    assert list(r) == ["b", "a"]
    assert r["a"] is pd["a"]
    other = L.nn.ParameterDict({"q": L.ones(1)})
    same = other
    other |= pd
    assert other is same
    assert list(other) == ["q", "a"]


# ------------------------------------------------------------------------------ Unflatten


@LIBS
def test_unflatten_checks_unflattened_size(L):
    with pytest.raises(TypeError, match="tuple of ints"):
        L.nn.Unflatten(1, 4)
    with pytest.raises(TypeError, match="tuple of ints"):
        L.nn.Unflatten(1, "ab")
    with pytest.raises(TypeError, match="float"):
        L.nn.Unflatten(1, (2.0, 2))
    with pytest.raises(TypeError, match="float"):
        L.nn.Unflatten(1, [2, 2.0])
    out = L.nn.Unflatten(1, [2, -1])(L.ones(3, 4))
    assert list(out.shape) == [3, 2, 2]


@LIBS
def test_unflatten_keeps_the_size_as_given(L):
    assert repr(L.nn.Unflatten(1, [2, 3])) == "Unflatten(dim=1, unflattened_size=[2, 3])"
    assert repr(L.nn.Unflatten(1, (2, 3))) == "Unflatten(dim=1, unflattened_size=(2, 3))"


# ------------------------------------------------------------------ _apply, to, _modules


@LIBS
def test_apply_converts_parameters_in_place_and_buffers(L):
    lin = L.nn.Linear(2, 2)
    m = L.nn.Sequential(lin, lin, L.nn.BatchNorm1d(2))
    w = lin.weight
    m(L.ones(3, 2)).sum().backward()
    assert m._apply(lambda t: t.double()) is m
    assert lin.weight is w  # the same Parameter, as optimizers hold it
    assert lin.weight.dtype == L.float64
    assert lin.weight.grad.dtype == L.float64
    assert lin.weight.requires_grad and lin.weight.is_leaf
    assert m[2].running_mean.dtype == L.float64
    assert m[2].num_batches_tracked.dtype == L.float64  # (fn sees every tensor)


@LIBS
def test_apply_recurse_false_leaves_children(L):
    m = L.nn.Sequential(L.nn.Linear(2, 2))
    m.p = L.nn.Parameter(L.ones(1))
    m._apply(lambda t: t * 3, recurse=False)
    assert m.p.tolist() == [3.0]
    m._apply(lambda t: t.double(), recurse=False)
    assert m.p.dtype == L.float64
    assert m[0].weight.dtype == L.float32


@LIBS
def test_apply_in_place_op_invalidates_saved_tensors(L):
    m = L.nn.Linear(4, 3)
    product = m.weight.mul(m.weight)
    m._apply(lambda t: t.add_(1.0))
    with pytest.raises(RuntimeError, match="inplace"):
        product.backward(L.ones(3, 4))


@LIBS
def test_to_takes_a_tensor_only_first(L):
    net = L.nn.Sequential(L.nn.Linear(3, 3))
    with pytest.raises(TypeError):
        net.to("cpu", L.tensor(3.0))
    with pytest.raises(TypeError):
        net.to(L.float64, L.zeros(1))
    net.to(L.zeros(1, dtype=L.float64))
    assert net[0].weight.dtype == L.float64


@LIBS
def test_modules_mapping_of_a_plain_module(L):
    class M(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = L.nn.Linear(1, 1)
            self.b = L.nn.ReLU()
            self.w = L.nn.Parameter(L.ones(1))

    m = M()
    assert list(m._modules) == ["a", "b"]
    assert m._modules["a"] is m.a
    with pytest.raises(KeyError):
        m._modules["w"]
    # replacing children through the mapping, a common way to swap layers
    for name, child in list(m._modules.items()):
        if isinstance(child, L.nn.ReLU):
            m._modules[name] = L.nn.Tanh()
    assert isinstance(m.b, L.nn.Tanh)
    m._modules["c"] = L.nn.Sigmoid()
    del m._modules["a"]
    assert _names(m.named_children()) == ["b", "c"]


@LIBS
def test_repr_lists_a_child_registered_as_none(L):
    m = L.nn.Sequential(L.nn.ReLU())
    m.add_module("x", None)
    assert repr(m) == "Sequential(\n  (0): ReLU()\n  (x): None\n)"


# ---------------------------------------------------------------- slots and subclasses


@LIBS
def test_a_parameter_registered_as_none_takes_only_a_parameter(L):
    m = L.nn.Module()
    m.register_parameter("p", None)
    with pytest.raises(TypeError, match="'p'"):
        m.p = L.ones(1)
    with pytest.raises(TypeError, match="'p'"):
        m.p = 3
    assert m.p is None
    m.p = L.nn.Parameter(L.ones(1))
    assert _names(m.named_parameters()) == ["p"]


@LIBS
def test_module_dict_keys_must_be_strings(L):
    d = L.nn.ModuleDict()
    with pytest.raises(TypeError):
        d.update({1: L.nn.ReLU()})
    with pytest.raises(TypeError):
        L.nn.ModuleDict([(2, L.nn.ReLU())])
    assert list(d) == []


@LIBS
def test_slices_of_container_subclasses_keep_the_subclass(L):
    class MySeq(L.nn.Sequential):
        pass

    class MyList(L.nn.ModuleList):
        pass

    class MyParams(L.nn.ParameterList):
        pass

    s = MySeq(L.nn.ReLU(), L.nn.Tanh())
    ml = MyList([L.nn.ReLU(), L.nn.Tanh()])
    pl = MyParams([L.nn.Parameter(L.ones(1)), L.nn.Parameter(L.zeros(1))])
    assert type(s[1:]) is MySeq
    assert isinstance(s[1:][0], L.nn.Tanh)
    assert type(ml[:1]) is MyList
    assert type(pl[1:]) is MyParams
    assert pl[1:][0] is pl[1]


# ------------------------------------------------------------- PyTorch's module internals


@LIBS
def test_dir_lists_registered_names_and_module_tables(L):
    linear = L.nn.Linear(2, 2)
    linear._test_submodule = L.nn.Linear(2, 2)
    linear._test_parameter = L.nn.Parameter(L.ones(2, 2))
    linear.register_buffer("_test_buffer", L.ones(2, 2))
    keys = dir(linear)
    for k in ("_test_submodule", "_test_parameter", "_test_buffer", "weight", "forward"):
        assert k in keys
    for k in ("_parameters", "_buffers", "_modules", "_forward_hooks"):
        assert k in keys
    assert all(hasattr(linear, k) for k in keys)
    assert keys == sorted(keys)
    s = L.nn.Sequential(
        OrderedDict(a=L.nn.ReLU()),
    )
    s.append(L.nn.Tanh())
    assert "a" in dir(s)
    assert "1" not in dir(s)


@LIBS
def test_non_persistent_buffers_set(L):
    m = L.nn.Module()
    m.register_buffer("a", L.ones(1))
    m.register_buffer("b", L.ones(1), persistent=False)
    assert set(m._non_persistent_buffers_set) == {"b"}
    assert "b" in m._non_persistent_buffers_set
    assert "a" not in m._non_persistent_buffers_set
    m._non_persistent_buffers_set.add("a")
    assert list(m.state_dict()) == []
    m._non_persistent_buffers_set.discard("a")
    m._non_persistent_buffers_set.discard("b")
    assert list(m.state_dict()) == ["a", "b"]


@LIBS
def test_get_name_and_call_impl(L):
    m = L.nn.Linear(1, 1)
    assert m._get_name() == "Linear"
    calls = []
    m.register_forward_hook(lambda *a: calls.append(1))
    assert list(m._call_impl(L.ones(1, 1)).shape) == [1, 1]
    assert calls == [1]


@LIBS
def test_always_call_hooks_table_has_pytorchs_name(L):
    m = L.nn.Linear(1, 1)
    m.register_forward_hook(lambda *a: None, always_call=True)
    m.register_forward_hook(lambda *a: None)
    assert len(m._forward_hooks_always_called) == 1
    assert len(m._forward_hooks) == 2


@LIBS
def test_modules_mapping_mixing_attributes_and_add_module(L):
    class M(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = L.nn.Linear(1, 1)
            self.p = L.nn.Parameter(L.ones(1))
            self.add_module("b", L.nn.ReLU())
            self.c = L.nn.Linear(1, 1)
            self.add_module("n", None)

        def forward(self, x):
            return self.c(self.b(self.a(x)))

    m = M()
    assert list(m._modules) == ["a", "b", "c", "n"]
    assert _names(m.named_children()) == ["a", "b", "c"]
    assert _names(m.named_parameters()) == ["p", "a.weight", "a.bias", "c.weight", "c.bias"]
    assert list(m(L.ones(2, 1)).shape) == [2, 1]
    m.a = L.nn.Tanh()
    assert isinstance(m._modules["a"], L.nn.Tanh)
    del m.a
    assert list(m._modules) == ["b", "c", "n"]


@LIBS
def test_type_casts_every_parameter_and_buffer(L):
    m = L.nn.BatchNorm1d(2)
    w = m.weight
    assert m.type(L.float64) is m
    assert m.weight is w and m.weight.dtype == L.float64
    assert m.num_batches_tracked.dtype == L.float64  # (integer buffers too)
    m.type("torch.FloatTensor")
    assert m.num_batches_tracked.dtype == L.float32
    b = L.nn.Module()
    b.register_buffer("x", L.ones(2))
    b.type(L.int32)
    assert b.x.dtype == L.int32
    # .double() keeps integer buffers
    b.register_buffer("y", L.ones(2, dtype=L.int64))
    b.double()
    assert b.y.dtype == L.int64
    with pytest.raises(RuntimeError, match="floating point"):
        L.nn.Linear(1, 1).type(L.int32)


@LIBS
def test_to_and_float_go_through_an_overridden_apply(L):
    class WithCache(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = L.nn.Linear(2, 2)
            self.cache = L.ones(3)  # (no buffer: converted by _apply below)
            self.calls = 0

        def _apply(self, fn, recurse=True):
            self.calls += 1
            super()._apply(fn, recurse)
            self.cache = fn(self.cache)
            return self

        def forward(self, x):
            return self.lin(x)

    outer = L.nn.Sequential(WithCache(), L.nn.Linear(2, 2))
    w = outer[0].lin.weight
    outer(L.ones(1, 2)).sum().backward()
    outer.double()
    inner = outer[0]
    assert inner.calls == 1
    assert inner.cache.dtype == L.float64
    assert inner.lin.weight is w and w.dtype == L.float64 and w.grad.dtype == L.float64
    assert outer[1].weight.dtype == L.float64
    outer.to(L.float32)
    assert inner.cache.dtype == L.float32 and inner.calls == 2


@LIBS
def test_a_module_assigned_over_a_buffer_replaces_it(L):
    m = L.nn.Module()
    m.register_buffer("b", L.ones(1))
    m.b = L.nn.ReLU()
    assert _names(m.named_buffers()) == []
    assert _names(m.named_children()) == ["b"]
    assert list(m.state_dict()) == []
    # a parameter's slot still refuses a module
    m.p = L.nn.Parameter(L.ones(1))
    with pytest.raises(TypeError, match="'p'"):
        m.p = L.nn.ReLU()


@LIBS
def test_to_empty_then_reset_parameters(L):
    m = L.nn.Sequential(L.nn.Linear(4, 300), L.nn.BatchNorm1d(300))
    w = m[0].weight
    assert m.to_empty(device="cpu") is m
    assert m[0].weight is w and w.requires_grad
    assert list(w.shape) == [300, 4]
    assert m[1].num_batches_tracked.dtype == L.int64
    m[0].reset_parameters()
    assert float(w.abs().max()) <= 0.5 and float(w.abs().max()) > 0.4
    assert float(m[0].bias.abs().max()) <= 0.5


@LIBS
def test_reset_parameters_of_linear_bilinear_prelu(L):
    lin = L.nn.Linear(9, 200)
    bil = L.nn.Bilinear(4, 3, 50)
    prelu = L.nn.PReLU(3, init=0.1)
    with L.no_grad():
        for p in [*lin.parameters(), *bil.parameters(), prelu.weight]:
            p.fill_(7.0)
    lin.reset_parameters()
    bil.reset_parameters()
    prelu.reset_parameters()
    assert 0.3 < float(lin.weight.abs().max()) <= 1 / 3
    assert 0.3 < float(lin.bias.abs().max()) <= 1 / 3
    assert 0.4 < float(bil.weight.abs().max()) <= 0.5
    assert float(bil.bias.abs().max()) <= 0.5
    assert prelu.weight.tolist() == pytest.approx([0.1] * 3)


@LIBS
def test_module_class_flags_and_wrapped_call(L):
    m = L.nn.Linear(1, 1)
    assert L.nn.Module.call_super_init is False
    assert L.nn.Module.dump_patches is False
    assert list(m._wrapped_call_impl(L.ones(2, 1)).shape) == [2, 1]


@LIBS
def test_a_child_set_to_none_still_takes_only_a_module(L):
    m = L.nn.Module()
    m.s = L.nn.ReLU()
    m.s = None
    with pytest.raises(TypeError, match="'s'"):
        m.s = L.ones(1)
    assert m.s is None
    m.s = L.nn.Tanh()
    assert _names(m.named_children()) == ["s"]
    del m.s
    m.s = 3  # a plain attribute once deleted
    assert m.s == 3
