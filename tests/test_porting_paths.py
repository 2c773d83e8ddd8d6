"""What PyTorch programs import or call besides ops and layers, found porting public programs:
ParameterList / ParameterDict holding None, ``ger``, dotted import paths (``cuda.amp``,
``autograd.function``, ``utils.checkpoint.get_device_states``, ``random.fork_rng``,
``version``, ``nn.modules.utils``, ``testing``) and einops' layers in ferrograd Modules."""

import importlib
import warnings

import ferrograd as fg
import numpy as np
import pytest
from conftest import TEST_DEVICE
from ferrograd import nn


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


# ------------------------------------------------------- ParameterList / ParameterDict


def test_parameterlist_keeps_none(torch):
    for L in (torch, fg):
        pl = L.nn.ParameterList()
        pl.append(None)
        pl.append(L.nn.Parameter(L.ones(2)))
        assert pl[0] is None and len(pl) == 2
        assert list(pl.state_dict()) == ["1"]
        assert [n for n, _ in pl.named_parameters()] == ["1"]
        pl2 = L.nn.ParameterList([None, L.ones(3)])
        assert pl2[0] is None and isinstance(pl2[1], L.nn.Parameter)
        assert [p.shape[0] for p in pl2.parameters()] == [3]


def test_parameterdict_keeps_none(torch):
    for L in (torch, fg):
        pd = L.nn.ParameterDict({"a": None, "b": L.ones(1)})
        assert pd["a"] is None and isinstance(pd["b"], L.nn.Parameter)
        assert list(pd.state_dict()) == ["b"] and len(pd) == 2
        assert [n for n, _ in pd.named_parameters()] == ["b"]


def test_parameterlist_none_in_model_loads_torch_state_dict(torch):
    # Transformer-XL's out_projs: [None, Parameter] (the None layer projects nothing)
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.out_projs = nn.ParameterList()
            self.out_projs.append(None)
            self.out_projs.append(nn.Parameter(fg.zeros(2, 3)))

    class THead(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.out_projs = torch.nn.ParameterList()
            self.out_projs.append(None)
            self.out_projs.append(torch.nn.Parameter(torch.ones(2, 3)))

    sd = {k: v.detach().numpy() for k, v in THead().state_dict().items()}
    h = Head()
    assert list(h.state_dict()) == list(sd) == ["out_projs.1"]
    h.load_state_dict({k: fg.tensor(v) for k, v in sd.items()})
    assert h.out_projs[0] is None
    np.testing.assert_array_equal(h.out_projs[1].detach().numpy(), np.ones((2, 3)))


def test_parameterlist_wraps_tensors_only():
    pl = nn.ParameterList([fg.zeros(2)])
    pl[0] = fg.ones(2)
    assert isinstance(pl[0], nn.Parameter) and pl[0].requires_grad
    p = nn.Parameter(fg.ones(1))
    pl.append(p)
    assert pl[1] is p
    pl[0] = None
    assert pl[0] is None and len(list(pl.parameters())) == 1


# ------------------------------------------------------------------------------- ger


def test_ger_matches_torch(torch):
    a, b = np.arange(3.0), np.array([1.0, 2.0])
    got = fg.ger(fg.tensor(a), fg.tensor(b))
    want = torch.ger(torch.tensor(a), torch.tensor(b))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert "ger" in fg.__all__


def test_ger_gradient():
    x = fg.arange(3.0).requires_grad_()
    fg.ger(x, fg.tensor([1.0, 2.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0, 3.0])


# ---------------------------------------------------------------------- import paths


def test_cuda_amp_is_a_submodule():
    from ferrograd.cuda.amp import GradScaler, autocast, custom_bwd, custom_fwd

    mod = importlib.import_module("ferrograd.cuda.amp")
    assert fg.cuda.amp is mod and mod.autocast is autocast
    with autocast(enabled=False) as ctx:
        assert isinstance(ctx, fg.amp.autocast) and ctx.device_type == "cuda"

    @autocast(enabled=False)
    def f(x):
        return x * 2

    assert f(fg.ones(1)).item() == 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert isinstance(GradScaler(enabled=False), fg.amp.GradScaler)
    assert callable(custom_fwd(lambda x: x)) and callable(custom_bwd(lambda x: x))
    # the names that existed before are still there
    for name in ("is_available", "device_count", "synchronize", "manual_seed", "set_device"):
        assert callable(getattr(fg.cuda, name))


def test_autograd_function_module(torch):
    from ferrograd.autograd.function import Function, FunctionCtx, once_differentiable

    assert Function is fg.autograd.Function and FunctionCtx is fg.autograd.FunctionCtx
    assert fg.autograd.function.once_differentiable is once_differentiable
    for name in ("Function", "FunctionCtx", "InplaceFunction", "once_differentiable"):
        assert hasattr(torch.autograd.function, name)
        assert hasattr(fg.autograd.function, name)

    class Double(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            return g * 2

    x = fg.ones(2).requires_grad_()
    Double.apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def test_cuda_initialized(torch):
    assert isinstance(fg.cuda.is_initialized(), bool)
    assert fg.cuda._initialized == fg.cuda.is_initialized()
    assert isinstance(torch.cuda._initialized, bool)
    with pytest.raises(AttributeError):
        _ = fg.cuda.no_such_name


def test_version_module(torch):
    import ferrograd.version as v

    assert fg.version is v and v.__version__ == fg.__version__
    assert v.debug is False and isinstance(v.git_version, str)
    assert v.cuda is None or v.cuda.count(".") == 1
    for name in ("__version__", "cuda", "debug", "git_version", "hip"):
        assert hasattr(torch.version, name) and hasattr(v, name)


def test_nn_modules_utils_matches_torch(torch):
    from ferrograd.nn.modules import utils as fu
    from ferrograd.nn.modules.utils import _ntuple, _pair, _quadruple, _single, _triple
    from torch.nn.modules import utils as tu

    assert fg.nn.modules.utils is fu
    for v in (3, (1, 2), [4, 5, 6]):
        for name in ("_single", "_pair", "_triple", "_quadruple"):
            assert getattr(fu, name)(v) == getattr(tu, name)(v)
    assert (_single(1), _pair(1), _triple(1), _quadruple(1)) == ((1,), (1, 1), (1, 1, 1), (1,) * 4)
    assert _ntuple(5, "_five")(0) == (0,) * 5 and _ntuple(5, "_five").__name__ == "_five"
    assert fu._reverse_repeat_tuple((1, 2), 2) == tu._reverse_repeat_tuple((1, 2), 2)
    assert fu._list_with_default([None, 3], [8, 9, 10]) == tu._list_with_default(
        [None, 3], [8, 9, 10]
    )
    sd = {"module.a": 1, "b": 2}
    fu.consume_prefix_in_state_dict_if_present(sd, "module.")
    assert sd == {"b": 2, "a": 1}


# ----------------------------------------------------------- random states, fork_rng


@pytest.mark.skipif(TEST_DEVICE != "cpu", reason="random streams of CPU tensors")
def test_fork_rng_restores_the_cpu_stream(torch):
    for L in (torch, fg):
        L.manual_seed(0)
        L.rand(3)
        with L.random.fork_rng():
            inside = L.rand(3)
            L.manual_seed(5)
            L.rand(2)
        after = L.rand(3)
        L.manual_seed(0)
        L.rand(3)
        expected = L.rand(3)
        assert bool((after == expected).all()) and bool((inside == expected).all())
        assert L.initial_seed() == 0
        with L.random.fork_rng(devices=[], enabled=False):
            a = L.rand(1)
        assert not bool((L.rand(1) == a).all())
        with L.random.fork_rng(devices=[]):
            a = L.rand(1)
        assert bool((L.rand(1) == a).all())


def test_fork_rng_restores_exceptions_too():
    fg.manual_seed(1)
    with pytest.raises(RuntimeError), fg.random.fork_rng():
        fg.rand(5)
        raise RuntimeError("boom")
    a = fg.rand(2)
    fg.manual_seed(1)
    np.testing.assert_array_equal(a.numpy(), fg.rand(2).numpy())


@pytest.mark.skipif(TEST_DEVICE != "cpu", reason="device states of CPU tensors")
def test_get_device_states_of_cpu_tensors(torch):
    from ferrograd.utils.checkpoint import get_device_states, set_device_states

    assert torch.utils.checkpoint.get_device_states(torch.ones(1), [torch.ones(2)]) == ([], [])
    assert get_device_states(fg.ones(1), [fg.ones(2)], {"k": 3}) == ([], [])
    set_device_states([], [])


@pytest.mark.skipif(not fg.cuda.is_available(), reason="needs a CUDA device")
def test_device_states_round_trip():
    from ferrograd.utils.checkpoint import get_device_states, set_device_states

    fg.manual_seed(0)
    x = fg.randn(3, device="cuda")
    ids, states = get_device_states(x, [fg.ones(1, device="cpu")], {"k": x})
    assert ids == [0, 0] and len(states) == 2
    a = fg.randn(3, device="cuda")
    set_device_states(ids[:1], states[:1])
    b = fg.randn(3, device="cuda:0")  # "cuda" and "cuda:0" share one stream
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    state = fg.cuda.get_rng_state()
    a = fg.randn(2, device="cuda")
    fg.cuda.set_rng_state(state)
    np.testing.assert_array_equal(a.numpy(), fg.randn(2, device="cuda").numpy())
    with fg.random.fork_rng(devices=[0]):
        a = fg.randn(2, device="cuda")
    np.testing.assert_array_equal(a.numpy(), fg.randn(2, device="cuda").numpy())


# -------------------------------------------------------------------------- testing


def _outcome(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        text = str(e).replace("torch.Size([", "(").replace("])", ",)").replace("torch.", "")
        return f"{type(e).__name__}: {text}"
    return "ok"


def _assert_close_cases(L):
    T, ac = L.tensor, L.testing.assert_close
    return [
        lambda: ac(T([1.0, 2.0, 3.0]), T([1.0, 2.5, 3.0])),
        lambda: ac(T([[1.0, 2.0], [3.0, 4.0]]), T([[1.0, 2.0], [3.0, 5.0]])),
        lambda: ac(T([1.0, 2.0]), T([1.0, 2.0], dtype=L.float64)),
        lambda: ac(T([1.0, 2.0]), T([1.0, 2.0], dtype=L.float64), check_dtype=False),
        lambda: ac(T([1.0, 2.0]), T([1.0, 2.1], dtype=L.float64), check_dtype=False),
        lambda: ac(T([1, 2]), T([1, 3])),
        lambda: ac(T([True, False]), T([True, True])),
        lambda: ac(T([1.0, 2.0], dtype=L.float16), T([1.0, 2.01], dtype=L.float16)),
        lambda: ac(1.0, 1.5),
        lambda: ac(1, 1.0),
        lambda: ac(1, 1.0, check_dtype=False),
        lambda: ac(1, 2),
        lambda: ac(True, False),
        lambda: ac(1 + 1j, 1 + 2j),
        lambda: ac(None, None),
        lambda: ac(None, 1),
        lambda: ac([T(1.0), T(2.0)], [T(1.0), T(3.0)]),
        lambda: ac({"a": [T(1.0)]}, {"a": [T(2.0)]}),
        lambda: ac({"a": T(1.0)}, {"b": T(1.0)}),
        lambda: ac((1.0, 2.0), [1.0, 2.0]),
        lambda: ac([1, 2], [1, 2, 3]),
        lambda: ac(T(1), T(2)),
        lambda: ac(T([float("nan")]), T([float("nan")])),
        lambda: ac(T([float("nan")]), T([float("nan")]), equal_nan=True),
        lambda: ac(T([1.0, float("nan")]), T([1.0, 2.0])),
        lambda: ac(T([float("inf")]), T([float("inf")])),
        lambda: ac(T([1.0]), T([float("inf")])),
        lambda: ac(T([0.0]), T([1e-6])),
        lambda: ac(T([1.0]), T([1.1]), rtol=0.2),
        lambda: ac(T([0.0, 2.0]), T([1.0, 2.0]), rtol=0, atol=0),
        lambda: ac(T([1, 5]), T([1, 2]), rtol=0, atol=3),
        lambda: ac(T([1.0]), T([2.0]), msg="custom"),
        lambda: ac(T([1.0]), T([2.0]), msg=lambda m: "pre " + m),
        lambda: ac(T([1.0, 2.0]).requires_grad_(), T([1.0, 2.0])),
        lambda: ac(L.zeros(0), L.zeros(0)),
        lambda: ac(np.array([[1.0, 2.0]], np.float32), np.array([[1.0, 3.0]], np.float32)),
        lambda: ac("a", "a"),
    ]


def test_assert_close_matches_torch(torch):
    got = [_outcome(c) for c in _assert_close_cases(fg)]
    want = [_outcome(c) for c in _assert_close_cases(torch)]
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"case {i}"


def test_assert_close_errors_that_name_types():
    with pytest.raises(TypeError, match="No comparison pair"):
        fg.testing.assert_close(fg.tensor(1.0), 1.0)
    with pytest.raises(ValueError, match="Both 'rtol' and 'atol'"):
        fg.testing.assert_close(fg.ones(1), fg.ones(1), rtol=0.1)
    with pytest.raises(AssertionError, match="attribute 'shape'"):
        fg.testing.assert_close(fg.ones(2), fg.ones(3))


def test_make_tensor(torch):
    from ferrograd.testing import make_tensor

    fg.manual_seed(0)
    cases = [
        (fg.float32, (), -9, 9),
        (fg.float64, (), -9, 9),
        (fg.float16, (), -9, 9),
        (fg.bfloat16, (), -9, 9),
        (fg.int64, (), -9, 9),
        (fg.int8, (), -9, 9),
        (fg.uint8, (), 0, 9),
        (fg.bool_, (), 0, 1),
        (fg.float32, (0.5, 1.5), 0.5, 1.5),
        (fg.int32, (-2, 2), -2, 1),
    ]
    for dtype, bounds, lo, hi in cases:
        kw = dict(zip(("low", "high"), bounds))
        t = make_tensor(4, 5, dtype=dtype, device="cpu", **kw)
        assert t.shape == (4, 5) and t.dtype == dtype and str(t.device) == "cpu"
        v = t.float().numpy()
        assert v.min() >= lo and v.max() <= hi
    t = make_tensor((2, 3), dtype=fg.float32, device="cpu", requires_grad=True)
    assert t.shape == (2, 3) and t.requires_grad
    assert not make_tensor([3], dtype=fg.float32, device="cpu").requires_grad
    z = make_tensor(50, dtype=fg.int32, device="cpu", low=-1, high=1, exclude_zero=True)
    assert (z.numpy() != 0).all()
    with pytest.raises(ValueError, match="requires_grad"):
        make_tensor(2, dtype=fg.int64, device="cpu", requires_grad=True)
    with pytest.raises(ValueError, match="must be less than"):
        make_tensor(2, dtype=fg.int64, device="cpu", low=3, high=1)
    # PyTorch raises the same
    with pytest.raises(ValueError, match="requires_grad"):
        torch.testing.make_tensor(2, dtype=torch.int64, device="cpu", requires_grad=True)


# --------------------------------------------------------------------- einops layers


@pytest.fixture
def einops_layers_torch():
    pytest.importorskip("einops")
    pytest.importorskip("torch")
    return importlib.import_module("einops.layers.torch")


def test_einops_torch_layers_in_ferrograd_modules(torch, einops_layers_torch):
    Rearrange, Reduce = einops_layers_torch.Rearrange, einops_layers_torch.Reduce
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 4)).astype(np.float32)
    tm = torch.nn.Sequential(Rearrange("b c h w -> b (h w) c"), Reduce("b n c -> b c", "mean"))
    fm = nn.Sequential(Rearrange("b c h w -> b (h w) c"), Reduce("b n c -> b c", "mean"))
    np.testing.assert_allclose(
        fm(fg.tensor(x)).numpy(), tm(torch.tensor(x)).numpy(), rtol=1e-6, atol=1e-6
    )
    assert isinstance(fm[0], nn.Module) and repr(fm[0]) == repr(tm[0])
    assert list(fm.state_dict()) == list(tm.state_dict()) == []

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.to_tokens = Rearrange("b c h w -> b (h w) c")
            self.layers = nn.ModuleList([Reduce("b n c -> b c", "max")])
            self.add_module("head", nn.Linear(3, 2))

        def forward(self, x):
            return self.head(self.layers[0](self.to_tokens(x)))

    net = Net()
    assert [n for n, _ in net.named_children()] == ["to_tokens", "layers", "head"]
    y = net(fg.tensor(x).requires_grad_())
    y.sum().backward()
    assert y.shape == (2, 2) and net.head.weight.grad is not None


def test_einops_layers_ferrograd_module():
    pytest.importorskip("einops")
    from einops.layers.ferrograd import EinMix, Rearrange, Reduce

    assert Rearrange("b c -> c b")(fg.ones(2, 3)).shape == (3, 2)
    assert Reduce("b c -> b", "sum")(fg.ones(2, 3)).numpy().tolist() == [3.0, 3.0]
    mix = EinMix("b t c -> b t d", weight_shape="c d", bias_shape="d", c=3, d=5)
    assert mix(fg.ones(2, 4, 3)).shape == (2, 4, 5)
    assert sorted(n for n, _ in mix.named_parameters()) == ["bias", "weight"]


def test_einops_torch_einmix_is_copied(torch, einops_layers_torch):
    torch.manual_seed(0)
    tm = einops_layers_torch.EinMix("b t c -> b t d", weight_shape="c d", bias_shape="d", c=3, d=5)
    fm = nn.Sequential(tm)
    assert type(fm[0]).__module__ == "einops.layers.ferrograd"
    x = np.random.default_rng(1).standard_normal((2, 4, 3)).astype(np.float32)
    np.testing.assert_allclose(
        fm(fg.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy(), atol=1e-6
    )
    assert list(fm.state_dict()) == list(torch.nn.Sequential(tm).state_dict())
