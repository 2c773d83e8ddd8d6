"""nn.Module bookkeeping (registration rules, containers, state-dict overrides), each
checked to behave the same on PyTorch and ferrograd (found by porting PyTorch's
test_nn.py)."""

from __future__ import annotations

import warnings
from collections import OrderedDict

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")

BACKENDS = ["torch", "ferrograd"]


@pytest.fixture(params=BACKENDS)
def lib(request: pytest.FixtureRequest):
    """``(tensor module, nn, functional, rnn utils)`` of one backend."""
    if request.param == "torch":
        import torch.nn.functional as tf
        import torch.nn.utils.rnn as trnn

        return torch, torch.nn, tf, trnn
    import ferrograd.nn.functional as ff
    import ferrograd.nn.utils.rnn as frnn

    return fg, fg.nn, ff, frnn


def _ones(t, *shape):
    return t.ones(shape) if t is fg else t.ones(*shape)


# ------------------------------------------------------------------ add_module over attributes


@pytest.mark.parametrize("fn", ["add_module", "register_module"])
def test_add_module_replaces_module_set_as_attribute(lib, fn) -> None:
    _, nn, _, _ = lib
    net = nn.Module()
    net.l = nn.Linear(1, 1)
    new = nn.Linear(2, 2)
    getattr(net, fn)("l", new)
    assert net.l is new
    assert len(list(net.parameters())) == 2
    assert len(list(net.children())) == 1
    assert list(net.state_dict()) == ["l.weight", "l.bias"]


def test_register_module_over_none_then_module(lib) -> None:
    _, nn, _, _ = lib
    m = nn.Module()
    m.a = None
    m.a = nn.Linear(2, 2)
    relu = nn.ReLU()
    m.register_module("a", relu)
    assert m.a is relu
    assert list(m.children()) == [relu]
    assert list(m.parameters()) == []


# ------------------------------------------------------------------------ name rules


@pytest.mark.parametrize("bad", ["", "a.b"])
def test_register_names_empty_or_dotted_raise_key_error(lib, bad) -> None:
    t, nn, _, _ = lib
    m = nn.Module()
    with pytest.raises(KeyError):
        m.register_parameter(bad, nn.Parameter(_ones(t, 1)))
    with pytest.raises(KeyError):
        m.register_buffer(bad, _ones(t, 1))
    with pytest.raises(KeyError):
        m.add_module(bad, nn.ReLU())


def test_register_names_not_str_raise_type_error(lib) -> None:
    t, nn, _, _ = lib
    m = nn.Module()
    with pytest.raises(TypeError, match="parameter name should be a string. Got int"):
        m.register_parameter(1, nn.Parameter(_ones(t, 1)))
    with pytest.raises(TypeError, match="buffer name should be a string. Got NoneType"):
        m.register_buffer(None, _ones(t, 1))
    with pytest.raises(TypeError, match="module name should be a string. Got int"):
        m.add_module(1, nn.ReLU())


def test_register_name_conflicts_raise_key_error(lib) -> None:
    t, nn, _, _ = lib
    m = nn.Module()
    m.attribute_name = 5
    with pytest.raises(KeyError):
        m.register_buffer("attribute_name", _ones(t, 2))
    with pytest.raises(KeyError):
        m.register_parameter("attribute_name", nn.Parameter(_ones(t, 2)))
    with pytest.raises(KeyError):
        m.add_module("attribute_name", nn.Module())
    with pytest.raises(KeyError):
        m.attribute_name = nn.Buffer(_ones(t, 2))
    del m.attribute_name
    m.register_buffer("attribute_name", _ones(t, 2))
    with pytest.raises(KeyError):
        m.register_parameter("attribute_name", nn.Parameter(_ones(t, 2)))
    with pytest.raises(KeyError):
        m.add_module("attribute_name", nn.Module())
    del m.attribute_name
    m.register_parameter("attribute_name", nn.Parameter(_ones(t, 2)))
    with pytest.raises(KeyError):
        m.register_buffer("attribute_name", _ones(t, 2))
    with pytest.raises(KeyError):
        m.add_module("attribute_name", nn.Module())
    # the same kind again replaces it
    p = nn.Parameter(_ones(t, 3))
    m.register_parameter("attribute_name", p)
    assert m.attribute_name is p
    del m.attribute_name
    m.add_module("attribute_name", nn.Module())
    with pytest.raises(KeyError):
        m.register_parameter("attribute_name", nn.Parameter(_ones(t, 2)))
    with pytest.raises(KeyError):
        m.register_buffer("training", _ones(t, 2))


def test_buffer_assignment_with_register_buffer_override_without_persistent(lib) -> None:
    t, nn, _, _ = lib

    class MyBadModule(nn.Linear):
        def __init__(self) -> None:
            super().__init__(2, 2)
            self.bar = nn.Buffer(_ones(t, 2, 2))

        def register_buffer(self, name, value) -> None:
            super().register_buffer(name, value, True)

    m = MyBadModule()
    assert m.bar is not None
    assert "bar" in m.state_dict()


# ------------------------------------------------------------------------ containers


def test_sequential_insert_negative_index_and_type(lib) -> None:
    _, nn, _, _ = lib
    a, b, c, m = nn.ReLU(), nn.Tanh(), nn.Sigmoid(), nn.Identity()
    s = nn.Sequential(a, b, c)
    assert list(s.insert(-2, m)) == [a, m, b, c]
    assert list(s._modules) == ["0", "1", "2", "3"]
    with pytest.raises(AssertionError):
        s.insert(1, [nn.ReLU()])
    with pytest.raises(IndexError):
        s.insert(-9, nn.ReLU())


def test_sequential_mul(lib) -> None:
    _, nn, _, _ = lib
    a, b = nn.ReLU(), nn.Tanh()
    s = nn.Sequential(a, b)
    assert list(s * 2) == [a, b, a, b]
    assert list(3 * s) == [a, b] * 3
    assert list(s) == [a, b]
    with pytest.raises(TypeError):
        s * 1.5
    with pytest.raises(ValueError, match="Non-positive"):
        s * 0
    s2 = s
    s *= 2
    assert s is s2
    assert list(s) == [a, b, a, b]
    assert list(s._modules) == ["0", "1", "2", "3"]


def test_parameter_dict_update_order_and_reversed(lib) -> None:
    t, nn, _, _ = lib

    def p():
        return nn.Parameter(_ones(t, 1))

    pd = nn.ParameterDict({"b": p(), "a": p()})
    assert list(pd) == ["a", "b"]  # a plain dict is taken in sorted order
    pd.update({"z": p(), "c": p()})
    assert list(pd) == ["a", "b", "c", "z"]
    pd.update(OrderedDict([("y", p()), ("x", p())]))
    assert list(pd) == ["a", "b", "c", "z", "y", "x"]
    pd.update([("e", p()), ("d", p())])
    assert list(pd)[-2:] == ["e", "d"]
    assert list(reversed(pd)) == list(pd)[::-1]
    with pytest.raises(ValueError):
        pd.update([("q", p(), 1)])


def test_parameter_list_add_parameter_raises(lib) -> None:
    t, nn, _, _ = lib
    pl = nn.ParameterList([nn.Parameter(_ones(t, 1))])
    with pytest.raises(TypeError):
        pl += nn.Parameter(_ones(t, 2))
    with pytest.raises(TypeError):
        pl.extend(nn.Parameter(_ones(t, 2)))
    pl += [nn.Parameter(_ones(t, 2))]
    assert len(pl) == 2


# ----------------------------------------------------------------- _parameters / _buffers


def test_parameters_and_buffers_dicts(lib) -> None:
    t, nn, _, _ = lib
    lin = nn.Linear(2, 3)
    assert list(lin._parameters) == ["weight", "bias"]
    assert lin._parameters["weight"] is lin.weight
    assert "weight" in lin._parameters
    assert nn.Linear(2, 3, bias=False)._parameters["bias"] is None
    bn = nn.BatchNorm1d(3)
    assert list(bn._buffers) == ["running_mean", "running_var", "num_batches_tracked"]
    assert "running_mean" in bn._buffers
    assert "weight" not in bn._buffers
    del bn._buffers["running_var"]
    assert [n for n, _ in bn.named_buffers()] == ["running_mean", "num_batches_tracked"]
    bn._buffers["extra"] = _ones(t, 3)
    assert bn.extra is bn._buffers["extra"]
    assert "extra" in bn.state_dict()
    w2 = nn.Parameter(_ones(t, 2))
    lin._parameters["w2"] = w2
    assert lin.w2 is w2
    assert [n for n, _ in lin.named_parameters()] == ["weight", "bias", "w2"]
    del lin._parameters["weight"]
    assert [n for n, _ in lin.named_parameters()] == ["bias", "w2"]
    with pytest.raises(KeyError):
        del lin._parameters["nothing"]
    pl = nn.ParameterList([nn.Parameter(_ones(t, 1))])
    assert list(pl._parameters) == ["0"]


# ---------------------------------------------------------------------------- state dicts


def _custom_state_module(nn, t):
    class CustomState(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.param = nn.Parameter(_ones(t, 1))
            self.sub = nn.Linear(5, 5)

        def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:
            destination[prefix + "serialized"] = self.param.data + 1

        def _load_from_state_dict(
            self,
            state_dict,
            prefix,
            local_metadata,
            strict,
            missing_keys,
            unexpected_keys,
            error_msgs,
        ):
            with torch.no_grad() if t is torch else fg.no_grad():
                self.param.copy_(state_dict[prefix + "serialized"] - 1)

    return CustomState


def test_custom_save_and_load_from_state_dict(lib) -> None:
    t, nn, _, _ = lib
    cls = _custom_state_module(nn, t)
    m = cls()
    sd = m.state_dict()
    assert list(sd) == ["serialized", "sub.weight", "sub.bias"]
    assert np.allclose(np.asarray(sd["serialized"].tolist()), [2.0])
    r = m.load_state_dict(
        {"serialized": t.tensor([3.0]), "sub.weight": _ones(t, 5, 5), "sub.bias": _ones(t, 5)}
    )
    assert str(r) == "<All keys matched successfully>"
    assert m.param.tolist() == [2.0]
    assert m.sub.bias.tolist() == [1.0] * 5
    outer = nn.Sequential(nn.Linear(1, 1), cls())
    assert list(outer.state_dict()) == [
        "0.weight",
        "0.bias",
        "1.serialized",
        "1.sub.weight",
        "1.sub.bias",
    ]
    outer.load_state_dict(outer.state_dict())
    with pytest.raises(RuntimeError):
        outer.load_state_dict({**outer.state_dict(), "1.sub.junk": _ones(t, 1)})


def test_custom_save_to_state_dict_calling_super(lib) -> None:
    t, nn, _, _ = lib

    class Extra(nn.Linear):
        def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:
            super()._save_to_state_dict(destination, prefix, keep_vars)
            destination[prefix + "scale"] = _ones(t, 1)

        def _load_from_state_dict(self, state_dict, prefix, *args) -> None:
            state_dict = {k: v for k, v in state_dict.items() if k != prefix + "scale"}
            super()._load_from_state_dict(state_dict, prefix, *args)

    m = nn.Sequential(Extra(2, 2))
    assert list(m.state_dict()) == ["0.weight", "0.bias", "0.scale"]
    sd = m.state_dict()
    sd["0.weight"] = _ones(t, 2, 2)
    assert str(m.load_state_dict(sd)) == "<All keys matched successfully>"
    assert m[0].weight.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    with pytest.raises(RuntimeError, match="size mismatch"):
        m.load_state_dict({**sd, "0.weight": _ones(t, 3, 2)})


def test_child_load_pre_hook_sees_only_its_keys(lib) -> None:
    _, nn, _, _ = lib
    model = nn.Sequential(*[nn.Sequential(nn.Linear(1, 1), nn.Linear(1, 1)) for _ in range(3)])
    seen = []

    def hook(module, state_dict, prefix, *rest) -> None:
        seen.append((prefix, sorted(state_dict)))

    model[1]._register_load_state_dict_pre_hook(hook, with_module=True)
    model.load_state_dict(model.state_dict())
    assert seen == [("1.", ["1.0.bias", "1.0.weight", "1.1.bias", "1.1.weight"])]


def test_child_load_pre_hook_may_rename_keys(lib) -> None:
    t, nn, _, _ = lib
    model = nn.Sequential(nn.Linear(1, 1), nn.Linear(1, 1))

    def hook(module, state_dict, prefix, *rest) -> None:
        if prefix + "old_weight" in state_dict:
            state_dict[prefix + "weight"] = state_dict.pop(prefix + "old_weight")

    model[1]._register_load_state_dict_pre_hook(hook, with_module=True)
    sd = model.state_dict()
    sd["1.old_weight"] = _ones(t, 1, 1) * 5
    del sd["1.weight"]
    model.load_state_dict(sd)
    assert model[1].weight.tolist() == [[5.0]]


def test_load_state_dict_result_repr(lib) -> None:
    _, nn, _, _ = lib
    m = nn.Linear(2, 2)
    assert str(m.load_state_dict(m.state_dict())) == "<All keys matched successfully>"
    r = m.load_state_dict({}, strict=False)
    assert sorted(r.missing_keys) == ["bias", "weight"]
    assert "missing_keys" in repr(r)


# -------------------------------------------------------------------------------- misc


def test_set_submodule_errors(lib) -> None:
    _, nn, _, _ = lib
    net = nn.Module()
    net.t = nn.Module()
    lin = nn.Linear(1, 2)
    with pytest.raises(ValueError):
        net.set_submodule("", lin)
    with pytest.raises(AttributeError):
        net.set_submodule("a.l", lin)
    net.foo = "bar"
    with pytest.raises(AttributeError):
        net.set_submodule("foo", lin)
    net.set_submodule("t", lin)
    assert net.t is lin


def test_module_to_bad_argument(lib) -> None:
    t, nn, _, _ = lib
    net = nn.Sequential(nn.Linear(3, 3))
    with pytest.raises(TypeError):
        net.to([])
    with pytest.raises(TypeError):
        net.to(t.long if t is torch else fg.int64)
    net.to("cpu")


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
def test_rnn_dropout_single_layer_warns(lib, cls) -> None:
    _, nn, _, _ = lib
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        getattr(nn, cls)(4, 6, num_layers=1, dropout=0.5)
    assert any("dropout" in str(x.message) for x in w)


def test_one_hot_errors(lib) -> None:
    t, _, f, _ = lib
    idx = t.tensor([3, 4, 1, 0])
    assert f.one_hot(idx, -1).tolist()[0] == [0, 0, 0, 1, 0]
    empty = t.zeros((4, 0), dtype=t.int64)
    assert tuple(f.one_hot(empty, 100).shape) == (4, 0, 100)
    with pytest.raises(RuntimeError, match="Can not infer total number of classes"):
        f.one_hot(empty)
    with pytest.raises(RuntimeError):
        f.one_hot(idx, 3)
    with pytest.raises(RuntimeError):
        f.one_hot(idx, -2)


def test_pack_padded_sequence_empty(lib) -> None:
    t, _, _, rnn = lib
    with pytest.raises(RuntimeError, match="empty tensor"):
        rnn.pack_padded_sequence(t.zeros((0, 0)), [])
    with pytest.raises(RuntimeError, match="empty tensor"):
        rnn.pack_padded_sequence(t.zeros((0, 1, 10)), [1], True)
