"""Parity with PyTorch's own ``test/nn`` suite: each test runs the same assertions on torch
and ferrograd (errors, shapes, values and, for new differentiable ops, float64 gradients)."""

import warnings

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")

LIBS = [pytest.param(torch, id="torch"), pytest.param(fg, id="ferrograd")]


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


@pytest.mark.parametrize("L", LIBS)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("bad", [-1, 11])
def test_embedding_bag_refuses_out_of_range_indices(L, mode, bad):
    w = L.arange(20.0).reshape(10, 2)
    with pytest.raises(RuntimeError):
        L.nn.functional.embedding_bag(L.tensor([[bad, 1]]), w, mode=mode)


@pytest.mark.parametrize("L", LIBS)
def test_embedding_bag_padding_idx_and_per_sample_weight_dtype(L):
    F = L.nn.functional
    with pytest.raises(RuntimeError, match="padding_idx"):
        F.embedding_bag(L.tensor([[0, 1]]), L.ones(4, 3), padding_idx=5)
    with pytest.raises(AssertionError):
        L.nn.EmbeddingBag(4, 3, padding_idx=5)
    with pytest.raises(AssertionError):
        L.nn.Embedding(10, 20, padding_idx=25)
    with pytest.raises(AssertionError):
        L.nn.MultiheadAttention(7, 2)
    bag = L.nn.EmbeddingBag(4, 3, mode="sum")
    with pytest.raises(RuntimeError):
        bag(L.tensor([[0, 1]]), per_sample_weights=L.ones(1, 2, dtype=L.float64))


def test_constructor_assertions_stay_value_errors():
    for make in (
        lambda: fg.nn.Embedding(10, 2, padding_idx=25),
        lambda: fg.nn.MultiheadAttention(7, 2),
    ):
        with pytest.raises(ValueError):
            make()


@pytest.mark.parametrize("L", LIBS)
def test_embedding_from_pretrained_shares_storage(L):
    a = L.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    L.nn.Embedding.from_pretrained(a, max_norm=2.0, norm_type=0.5)(L.tensor([0, 1]))
    np.testing.assert_allclose(
        _np(a).ravel(), [0.116, 0.233, 0.349, 0.179, 0.224, 0.268], atol=1e-3
    )
    b = L.zeros(2, 3)
    e = L.nn.EmbeddingBag.from_pretrained(b)
    with L.no_grad():
        b[0, 0] = 5
    assert e.weight[0, 0].item() == 5.0


@pytest.mark.parametrize("L", LIBS)
def test_adaptive_pool_huge_output_raises_without_hanging(L):
    with pytest.raises(RuntimeError):
        L.nn.AdaptiveMaxPool1d(0x3FFFFFFFFFFFFFFF)(L.empty([2, 2, 2]))


@pytest.mark.parametrize("L", LIBS)
@pytest.mark.parametrize(
    "call",
    [
        lambda F, x: F.max_pool2d(x, 2),
        lambda F, x: F.avg_pool2d(x, 2),
        lambda F, x: F.adaptive_max_pool2d(x, 3),
        lambda F, x: F.max_pool2d(x, 2, return_indices=True),
    ],
)
def test_pool_zero_channel_input_raises(L, call):
    with pytest.raises(RuntimeError):
        call(L.nn.functional, L.randn(1, 0, 10, 8))
    out = call(L.nn.functional, L.randn(0, 2, 10, 8))  # an empty batch is fine
    assert (out[0] if isinstance(out, tuple) else out).shape[0] == 0


@pytest.mark.parametrize("L", LIBS)
def test_pool_and_conv_argument_errors_are_runtime_errors(L):
    F = L.nn.functional
    x = L.randn(1, 4, 8, 10)
    with pytest.raises(RuntimeError, match="stride"):
        F.max_pool2d(x, 2, stride=0)
    with pytest.raises(RuntimeError, match="stride"):
        F.avg_pool2d(x, 2, stride=-1)
    with pytest.raises(RuntimeError, match="pad"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match="invalid max index"):
        L.nn.MaxUnpool2d(2)(L.ones(1, 4, 4, 5), L.full((1, 4, 4, 5), -1, dtype=L.int64))
    with pytest.raises(RuntimeError, match="non-positive stride"):
        L.nn.Conv1d(3, 6, 3, stride=-1)(L.randn(1, 3, 4))
    with pytest.raises(RuntimeError, match="non-positive stride"):
        L.nn.Conv2d(3, 6, 4, stride=0)(L.randn(1, 3, 4, 4))
    with pytest.raises(RuntimeError, match="beta"):
        F.smooth_l1_loss(L.ones(2), L.zeros(2), beta=-1.0)


def test_runtime_errors_stay_what_ferrograd_raised_before():
    F = fg.nn.functional
    with pytest.raises(ValueError):
        F.max_pool2d(fg.randn(1, 1, 4, 4), 2, stride=0)
    with pytest.raises(ValueError):
        F.adaptive_avg_pool2d(fg.randn(1, 1, 4, 4), 0)
    with pytest.raises(IndexError):
        F.max_unpool2d(fg.ones(1, 1, 2, 2), fg.full((1, 1, 2, 2), -1, dtype="int64"), 2)
    with pytest.raises(IndexError):
        F.embedding_bag(fg.tensor([[11, 1]]), fg.ones(10, 2))
    with pytest.raises(ValueError):
        F.smooth_l1_loss(fg.ones(2), fg.zeros(2), beta=-1.0)


@pytest.mark.parametrize("L", LIBS)
def test_conv_constructor_padding_checks(L):
    with pytest.raises(ValueError, match="Invalid padding string"):
        L.nn.Conv1d(3, 33, 10, padding="foo")
    with pytest.raises(ValueError, match="strided"):
        L.nn.Conv2d(3, 33, 10, padding="same", stride=2)


@pytest.mark.parametrize("L", LIBS)
def test_conv_transpose_output_size(L):
    assert tuple(
        L.nn.ConvTranspose3d(2, 2, 2)(L.rand(1, 2, 1, 1, 1), output_size=(1, 2, 2, 2, 2)).shape
    ) == (1, 2, 2, 2, 2)
    assert tuple(
        L.nn.ConvTranspose1d(2, 2, 3, stride=2)(L.rand(1, 2, 4), output_size=[10]).shape
    ) == (1, 2, 10)


@pytest.mark.parametrize("L", LIBS)
def test_dropout_probability_and_rank_checks(L):
    nn = L.nn
    for cls in (nn.Dropout1d, nn.Dropout2d, nn.Dropout3d):
        for p in (-0.1, 1.1):
            with pytest.raises(ValueError, match="dropout probability"):
                cls(p)
    with pytest.warns(UserWarning, match="Received a 5-D input to dropout2d"):
        assert tuple(nn.Dropout2d(0.5)(L.rand(1, 2, 2, 2, 2)).shape) == (1, 2, 2, 2, 2)
    with pytest.warns(UserWarning, match="Received a 6-D input to dropout3d"):
        assert tuple(nn.Dropout3d(0.5)(L.rand(1, 2, 2, 2, 2, 2)).shape) == (1, 2, 2, 2, 2, 2)
    with pytest.warns(UserWarning, match="Received a 3-D input to dropout3d"):
        y = nn.Dropout3d(0.5)(L.ones(4, 50, 3))
    y = _np(y)
    assert set(np.unique(y)) <= {0.0, 2.0} and all(len(set(r.ravel())) == 1 for r in y[0])


@pytest.mark.parametrize("L", LIBS)
def test_init_gain_warnings_and_sparse(L):
    init = L.nn.init
    for bad in (True, [1]):
        with pytest.raises(ValueError, match="not a valid number"):
            init.calculate_gain("leaky_relu", bad)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        init.kaiming_uniform_(L.empty(0, 1))
        init.normal(L.randn(3, 3))
    assert [c.category for c in w] == [UserWarning, FutureWarning]
    t = init.sparse_(L.zeros(6, 4), 0.5)
    assert tuple(t.shape) == (6, 4)
    assert ((_np(t) == 0).sum(0) >= 3).all()


@pytest.mark.parametrize("L", LIBS)
def test_max_unpool_zero_batch_and_int_max_pool(L):
    assert tuple(
        L.nn.MaxUnpool1d(2)(L.randn(0, 10, 5), L.zeros(0, 10, 5, dtype=L.int64)).shape
    ) == (0, 10, 10)
    assert tuple(
        L.nn.MaxUnpool2d(2)(L.randn(0, 10, 5, 5), L.zeros(0, 10, 5, 5, dtype=L.int64)).shape
    ) == (0, 10, 10, 10)
    x = L.tensor([[[[-1, -2], [-3, -4]]]], dtype=L.int32)
    y = L.nn.functional.max_pool2d(x, 2, 2, 1, 2, True)
    assert y.dtype == L.int32 and y.tolist() == [[[[-4, -4], [-4, -4]]]]


@pytest.mark.parametrize("L", LIBS)
def test_rnn_utils_unpack_and_packed_casts(L):
    rnn = L.nn.utils.rnn
    out = rnn.unpack_sequence(rnn.pack_sequence([L.tensor([1, 2]), L.tensor([3])]))
    assert [o.tolist() for o in out] == [[1, 2], [3]]
    p = rnn.pack_sequence([L.tensor([1.0, 2]), L.tensor([3.0])])
    assert p.double().data.dtype == L.float64
    assert p.double().float().data.dtype == L.float32


def test_sdpa_kernel_and_backend_switches():
    from ferrograd.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention import SDPBackend as TB
    from torch.nn.attention import sdpa_kernel as tk

    assert [b.name for b in SDPBackend] == [b.name for b in TB.__members__.values()]
    q = np.random.default_rng(0).standard_normal((1, 2, 4, 8))
    with tk([TB.MATH]):
        ref = torch.nn.functional.scaled_dot_product_attention(*[torch.tensor(q)] * 3).numpy()
    with sdpa_kernel([SDPBackend.MATH]):
        assert not fg.backends.cuda.flash_sdp_enabled() and fg.backends.cuda.math_sdp_enabled()
        out = fg.nn.functional.scaled_dot_product_attention(*[fg.tensor(q)] * 3).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-10)
    assert fg.backends.cuda.flash_sdp_enabled()
    with pytest.warns(FutureWarning), fg.backends.cuda.sdp_kernel(enable_flash=False):
        assert not fg.backends.cuda.flash_sdp_enabled()
    assert fg.backends.cuda.flash_sdp_enabled()


def test_cuda_device_properties():
    if fg.cuda.is_available():
        p = fg.cuda.get_device_properties(0)
        assert isinstance(p.name, str) and p.total_memory > 0 and p.multi_processor_count > 0
        assert fg.cuda.get_device_name(0) == p.name
    else:
        with pytest.raises(RuntimeError):
            fg.cuda.get_device_properties(0)


# ------------------------------------------------- new differentiable pools, float64 grads


def _grad_parity(tf, ff, shape, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    tx, fx = torch.tensor(a, requires_grad=True), fg.tensor(a, requires_grad=True)
    ty, fy = tf(tx), ff(fx)
    if isinstance(ty, tuple):
        np.testing.assert_array_equal(_np(fy[1]), ty[1].numpy())
        ty, fy = ty[0], fy[0]
    np.testing.assert_allclose(_np(fy), ty.detach().numpy(), rtol=1e-12)
    g = rng.standard_normal(tuple(ty.shape))
    (ty * torch.tensor(g)).sum().backward()
    (fy * fg.tensor(g)).sum().backward()
    np.testing.assert_allclose(_np(fx.grad), tx.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize(
    "args", [((2,), {}), ((3, 2, 1), {"ceil_mode": True}), (((2, 3, 2),), {"dilation": (1, 2, 1)})]
)
def test_max_pool3d_indices_values_and_gradients(args):
    pos, kw = args
    _grad_parity(
        lambda x: torch.nn.functional.max_pool3d(x, *pos, return_indices=True, **kw),
        lambda x: fg.nn.functional.max_pool3d(x, *pos, return_indices=True, **kw),
        (2, 3, 5, 6, 7),
    )


def test_adaptive_max_pool3d_indices_and_unpool3d():
    _grad_parity(
        lambda x: torch.nn.functional.adaptive_max_pool3d(x, (2, 3, 4), return_indices=True),
        lambda x: fg.nn.functional.adaptive_max_pool3d(x, (2, 3, 4), return_indices=True),
        (2, 3, 5, 6, 7),
    )
    _grad_parity(
        lambda x: torch.nn.MaxUnpool3d(2)(
            *torch.nn.functional.max_pool3d(x, 2, return_indices=True)
        ),
        lambda x: fg.nn.MaxUnpool3d(2)(*fg.nn.functional.max_pool3d(x, 2, return_indices=True)),
        (2, 3, 4, 4, 6),
    )
    assert repr(fg.nn.MaxUnpool3d(2)) == repr(torch.nn.MaxUnpool3d(2))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fractional_max_pool2d_matches_torch(dtype):
    s = np.random.default_rng(1).random((2, 3, 2))
    kw = {"output_size": (4, 3), "return_indices": True}
    if dtype == "float32":
        a = np.random.default_rng(2).standard_normal((2, 3, 9, 11)).astype(np.float32)
        ty = torch.nn.functional.fractional_max_pool2d(
            torch.tensor(a), (2, 3), _random_samples=torch.tensor(s, dtype=torch.float32), **kw
        )
        fy = fg.nn.functional.fractional_max_pool2d(
            fg.tensor(a), (2, 3), _random_samples=fg.tensor(s.astype(np.float32)), **kw
        )
        np.testing.assert_array_equal(_np(fy[1]), ty[1].numpy())
        return
    _grad_parity(
        lambda x: torch.nn.functional.fractional_max_pool2d(
            x, (2, 3), _random_samples=torch.tensor(s), **kw
        ),
        lambda x: fg.nn.functional.fractional_max_pool2d(
            x, (2, 3), _random_samples=fg.tensor(s), **kw
        ),
        (2, 3, 9, 11),
    )


def test_fractional_max_pool3d_modules_match_torch():
    s = np.random.default_rng(3).random((2, 3, 3))
    tm = torch.nn.FractionalMaxPool3d(
        2, output_ratio=0.5, return_indices=True, _random_samples=torch.tensor(s)
    )
    fm = fg.nn.FractionalMaxPool3d(
        2, output_ratio=0.5, return_indices=True, _random_samples=fg.tensor(s)
    )
    _grad_parity(tm, fm, (2, 3, 7, 9, 8))
    assert repr(fm) == repr(tm)
    for L in (torch, fg):
        with pytest.raises(ValueError):
            L.nn.FractionalMaxPool2d(2)
        with pytest.raises(ValueError):
            L.nn.FractionalMaxPool2d(2, output_ratio=1.5)
        y = L.nn.FractionalMaxPool2d(2, output_size=3)(L.randn(1, 2, 7, 7))
        assert tuple(y.shape) == (1, 2, 3, 3)


def test_lazy_layers_hold_uninitialized_parameters_until_their_first_input():
    for lib in (torch, fg):
        lin, bn = lib.nn.LazyLinear(3), lib.nn.LazyBatchNorm1d()
        P = lib.nn.parameter
        assert isinstance(lin.weight, P.UninitializedParameter) and P.is_lazy(lin.bias)
        assert isinstance(bn.running_mean, P.UninitializedBuffer)
        assert lin.has_uninitialized_params()
        lin(lib.ones(2, 5))
        bn(lib.ones(4, 6))
        assert not isinstance(lin.weight, P.UninitializedParameter)
        assert isinstance(lin.weight, lib.nn.Parameter) and tuple(lin.weight.shape) == (3, 5)
        assert not isinstance(bn.running_mean, P.UninitializedBuffer)
        assert tuple(bn.running_mean.shape) == (6,)


def test_unfold_and_group_norm_take_an_empty_batch():
    for lib in (torch, fg):
        F = lib.nn.functional
        assert tuple(F.unfold(lib.ones(0, 2, 4, 4), 2).shape) == (0, 8, 9)
        assert tuple(F.group_norm(lib.ones(0, 4, 3), 2).shape) == (0, 4, 3)
