"""Convolution, pooling, embedding and dropout behaviours from PyTorch's nn tests, each run
on PyTorch and on ferrograd from the same float64 inputs and compared."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest


def _torch():
    return pytest.importorskip("torch")


def _np(t) -> np.ndarray:
    return np.asarray(t.detach().numpy())


# ------------------------------------------------------------------------------ convolution


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_conv_same_padding_with_stride_raises_runtime_error(nd: int) -> None:
    torch = _torch()
    for lib in (torch, fg):
        x = lib.ones(1, 2, *([6] * nd), dtype=lib.float64)
        w = lib.ones(3, 2, *([3] * nd), dtype=lib.float64)
        conv = getattr(lib.nn.functional, f"conv{nd}d")
        with pytest.raises(RuntimeError, match="strided"):
            conv(x, w, stride=2, padding="same")
    # stride 1 still pads to the input's size
    y = getattr(fg.nn.functional, f"conv{nd}d")(
        fg.ones(1, 2, *([6] * nd), dtype=fg.float64),
        fg.ones(3, 2, *([3] * nd), dtype=fg.float64),
        padding="same",
    )
    assert list(y.shape) == [1, 3, *([6] * nd)]


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("name", ["stride", "padding", "dilation"])
def test_conv_argument_of_wrong_length_raises(nd: int, transposed: bool, name: str) -> None:
    torch = _torch()
    op = ("conv_transpose" if transposed else "conv") + f"{nd}d"
    for lib in (torch, fg):
        x = lib.ones(1, 2, *([6] * nd), dtype=lib.float64)
        w = lib.ones(2, 2, *([3] * nd), dtype=lib.float64)
        with pytest.raises(RuntimeError, match=f"{name}"):
            getattr(lib.nn.functional, op)(x, w, **{name: (1,) * (nd + 1)})


@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("transposed", [False, True])
def test_conv_one_entry_lists_apply_to_every_axis(nd: int, transposed: bool) -> None:
    torch = _torch()
    op = ("conv_transpose" if transposed else "conv") + f"{nd}d"
    x0 = np.sin(np.arange(2 * 7**nd)).reshape((1, 2) + (7,) * nd)
    w0 = np.cos(np.arange(4 * 3**nd)).reshape((2, 2) + (3,) * nd)
    results = []
    for lib in (torch, fg):
        x = lib.tensor(x0, requires_grad=True)
        w = lib.tensor(w0, requires_grad=True)
        y = getattr(lib.nn.functional, op)(x, w, stride=[2], padding=(1,), dilation=[2])
        (y * y).sum().backward()
        results.append((_np(y), _np(x.grad), _np(w.grad)))
    for f, t in zip(results[1], results[0]):
        np.testing.assert_allclose(f, t, rtol=1e-10)


def test_conv1d_two_entry_padding_is_not_read_as_its_first() -> None:
    # (0, 1) used to pad by 0: the second entry was dropped without a word
    x = fg.ones(1, 1, 5, dtype=fg.float64)
    w = fg.ones(1, 1, 3, dtype=fg.float64)
    with pytest.raises(RuntimeError, match="padding"):
        fg.nn.functional.conv1d(x, w, padding=(0, 1))


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_conv_transpose_output_too_small_raises(nd: int) -> None:
    torch = _torch()
    for lib in (torch, fg):
        x = lib.ones(1, 2, *([4] * nd), dtype=lib.float64)
        w = lib.ones(2, 2, *([1] * nd), dtype=lib.float64)
        with pytest.raises(RuntimeError, match="(?i)too small"):
            getattr(lib.nn.functional, f"conv_transpose{nd}d")(x, w, padding=3)


# ---------------------------------------------------------------------------------- pooling


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_max_pool_window_of_only_neg_inf_next_to_padding(nd: int, ceil_mode: bool) -> None:
    torch = _torch()
    x = np.full((2, 1) + (4,) * nd, -np.inf)
    x.reshape(2, -1)[0, -1] = 1.0  # one finite value; the rest of the windows are all -inf
    results = []
    for lib in (torch, fg):
        t = lib.tensor(x, requires_grad=True)
        pool = getattr(lib.nn.functional, f"max_pool{nd}d")
        y, idx = pool(t, 3, 2, 1, ceil_mode=ceil_mode, return_indices=True)
        y.sum().backward()
        results.append((_np(y), _np(idx), _np(t.grad)))
    (ty, ti, tg), (fy, fi, fgrad) = results
    np.testing.assert_array_equal(fy, ty)
    np.testing.assert_array_equal(fi, ti)
    np.testing.assert_array_equal(fgrad, tg)


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("norm_type", [2.0, 3.0, 1.5])
def test_lp_pool_all_zero_window_has_zero_gradient(nd: int, norm_type: float) -> None:
    torch = _torch()
    x = np.maximum(np.sin(np.arange(2 * 3 * 6**nd)).reshape((2, 3) + (6,) * nd), 0.0)
    x[..., :2] = 0.0  # windows of only zeros, as after a ReLU
    results = []
    for lib in (torch, fg):
        t = lib.tensor(x, requires_grad=True)
        y = getattr(lib.nn.functional, f"lp_pool{nd}d")(t, norm_type, 2)
        (y * lib.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)))).sum().backward()
        results.append((_np(y), _np(t.grad)))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-10)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-10, atol=1e-12)
    assert np.isfinite(results[1][1]).all()


def test_lp_pool_gradient_matches_finite_differences_next_to_zero_windows() -> None:
    x = np.abs(np.sin(np.arange(32.0))).reshape(1, 2, 4, 4) + 0.1
    x[0, 0, :2, :2] = 0.0

    def f(v: np.ndarray) -> float:
        return float(fg.nn.functional.lp_pool2d(fg.tensor(v), 2.0, 2).sum())

    t = fg.tensor(x, requires_grad=True)
    fg.nn.functional.lp_pool2d(t, 2.0, 2).sum().backward()
    g = _np(t.grad)
    # the norm has no derivative at 0: PyTorch's choice there is 0
    np.testing.assert_array_equal(g[x == 0.0], 0.0)
    eps = 1e-6
    for i in np.ndindex(x.shape):
        if x[i] == 0.0:
            continue
        d = np.zeros_like(x)
        d[i] = eps
        np.testing.assert_allclose(g[i], (f(x + d) - f(x - d)) / (2 * eps), rtol=1e-6)


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("norm_type", [float("inf"), -float("inf")])
def test_lp_pool_infinite_norm_type(nd: int, norm_type: float) -> None:
    torch = _torch()
    x = np.sin(np.arange(2 * 3 * 5**nd)).reshape((2, 3) + (5,) * nd)
    results = []
    for lib in (torch, fg):
        t = lib.tensor(x, requires_grad=True)
        pool = getattr(lib.nn, f"LPPool{nd}d")(norm_type, 2, ceil_mode=True)
        y = pool(t)
        (y * y).sum().backward()
        results.append((_np(y), _np(t.grad)))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-12)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-12)


@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize(
    "shape,output_size",
    [((0, 2), 3), ((2, 3), "zero_first"), ((3,), "zero_last")],
    ids=["empty_batch", "zero_output", "unbatched_zero_output"],
)
def test_fractional_max_pool_empty_batch_or_output(nd: int, shape: tuple, output_size) -> None:
    torch = _torch()
    full = shape + (6,) * nd
    if output_size == "zero_first":
        output_size = (0,) + (1,) * (nd - 1)
    elif output_size == "zero_last":
        output_size = (1,) * (nd - 1) + (0,)
    results = []
    for lib in (torch, fg):
        x = lib.ones(*full, dtype=lib.float64, requires_grad=True)
        pool = getattr(lib.nn, f"FractionalMaxPool{nd}d")(2, output_size, return_indices=True)
        y, idx = pool(x)
        y.sum().backward()
        results.append((list(y.shape), list(idx.shape), str(idx.dtype).split(".")[-1], _np(x.grad)))
    assert results[1][:3] == results[0][:3]
    np.testing.assert_array_equal(results[1][3], results[0][3])


# -------------------------------------------------------------------------------- embedding


def test_embedding_padding_idx_out_of_range_raises() -> None:
    torch = _torch()
    for lib in (torch, fg):
        w = lib.ones(10, 3, dtype=lib.float64)
        i = lib.tensor([[1, 2]])
        for bad in (10, -11):
            with pytest.raises(AssertionError):
                lib.nn.functional.embedding(i, w, padding_idx=bad)
        # the ends of the range are fine
        lib.nn.functional.embedding(i, w, padding_idx=9)
        lib.nn.functional.embedding(i, w, padding_idx=-10)


_BAG_IDS = [1, 2, 1, 5, 1, 3, 2, 9]


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_embedding_bag_max_norm_renormalises_weight_in_place(mode: str, norm_type: float) -> None:
    torch = _torch()
    w0 = np.random.default_rng(0).standard_normal((10, 4)) * 3
    results = []
    for lib in (torch, fg):
        w = lib.tensor(w0.copy(), requires_grad=True)
        out = lib.nn.functional.embedding_bag(
            lib.tensor(_BAG_IDS),
            w,
            lib.tensor([0, 4]),
            max_norm=1.5,
            norm_type=norm_type,
            mode=mode,
            padding_idx=5,
        )
        (out * lib.tensor(np.arange(8.0).reshape(2, 4))).sum().backward()
        results.append((_np(out), _np(w), _np(w.grad)))
    for f, t in zip(results[1], results[0]):
        np.testing.assert_allclose(f, t, rtol=1e-8, atol=1e-12)
    # rows the input never picks are left as they were
    np.testing.assert_array_equal(results[1][1][[0, 4, 6, 7, 8]], w0[[0, 4, 6, 7, 8]])


def test_embedding_bag_module_max_norm_and_scale_grad_by_freq() -> None:
    torch = _torch()
    w0 = np.random.default_rng(1).standard_normal((10, 4)) * 2
    results = []
    for lib in (torch, fg):
        bag = lib.nn.EmbeddingBag(
            10, 4, mode="mean", max_norm=1.0, scale_grad_by_freq=True
        ).double()
        with lib.no_grad():
            bag.weight.copy_(lib.tensor(w0))
        out = bag(lib.tensor([[1, 2, 3], [3, 4, 4]]))
        out.sum().backward()
        results.append((_np(out), _np(bag.weight), _np(bag.weight.grad)))
    for f, t in zip(results[1], results[0]):
        np.testing.assert_allclose(f, t, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("mode", ["sum", "mean"])
@pytest.mark.parametrize("two_d", [False, True])
def test_embedding_bag_scale_grad_by_freq(mode: str, two_d: bool) -> None:
    torch = _torch()
    w0 = np.random.default_rng(2).standard_normal((10, 4))
    psw0 = np.random.default_rng(3).standard_normal(8)
    results = []
    for lib in (torch, fg):
        w = lib.tensor(w0, requires_grad=True)
        ids = lib.tensor(_BAG_IDS)
        kw: dict = {"mode": mode, "scale_grad_by_freq": True, "padding_idx": 5}
        if two_d:
            out = lib.nn.functional.embedding_bag(ids.reshape(2, 4), w, **kw)
        else:
            out = lib.nn.functional.embedding_bag(ids, w, lib.tensor([0, 3]), **kw)
        loss = (out * lib.tensor(np.linspace(-1, 2, 8).reshape(2, 4))).sum()
        if mode == "sum":
            psw = lib.tensor(psw0, requires_grad=True)
            off = None if two_d else lib.tensor([0, 3])
            o2 = lib.nn.functional.embedding_bag(
                ids.reshape(2, 4) if two_d else ids,
                w,
                off,
                mode="sum",
                scale_grad_by_freq=True,
                per_sample_weights=psw.reshape(2, 4) if two_d else psw,
            )
            loss = loss + (o2 * o2).sum()
        loss.backward()
        results.append((_np(out), _np(w.grad)))
    for f, t in zip(results[1], results[0]):
        np.testing.assert_allclose(f, t, rtol=1e-8, atol=1e-12)


def test_embedding_bag_scale_grad_by_freq_refuses_max_mode() -> None:
    torch = _torch()
    for lib in (torch, fg):
        with pytest.raises(ValueError, match="max"):
            lib.nn.functional.embedding_bag(
                lib.tensor([[1, 2]]),
                lib.ones(4, 2, dtype=lib.float64),
                mode="max",
                scale_grad_by_freq=True,
            )


# ---------------------------------------------------------------------------------- dropout


@pytest.mark.parametrize("p", [0.3, 1.0])
def test_alpha_dropout_inplace_writes_into_input(p: float) -> None:
    torch = _torch()
    results = []
    for lib in (torch, fg):
        lib.manual_seed(0)
        x = lib.tensor(np.linspace(-2, 2, 20000), requires_grad=True)
        h = x * 1.0
        out = lib.nn.functional.alpha_dropout(h, p, True, inplace=True)
        assert out is h
        out.sum().backward()
        g = _np(x.grad)
        kept = g != 0
        # the kept entries share one scale; the dropped ones get no gradient
        scales = np.unique(np.round(g[kept], 12))
        results.append((scales, round(kept.mean(), 1), float(np.round(_np(h).std(), 1))))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-10)
    assert results[1][1:] == results[0][1:]


def test_channel_shuffle_module_repr_and_checks() -> None:
    torch = _torch()
    assert repr(fg.nn.ChannelShuffle(3)) == repr(torch.nn.ChannelShuffle(3))
    x0 = np.arange(2 * 6 * 3.0).reshape(2, 6, 3)
    for lib in (torch, fg):
        with pytest.raises(RuntimeError):
            lib.nn.ChannelShuffle(2)(lib.tensor(x0[:, :, 0]))  # fewer than 3 axes
        with pytest.raises(RuntimeError):
            lib.nn.functional.channel_shuffle(lib.tensor(x0), 0)
    outs = [_np(lib.native_channel_shuffle(lib.tensor(x0), 3)) for lib in (torch, fg)]
    np.testing.assert_array_equal(outs[1], outs[0])


@pytest.mark.parametrize("pad", [0, 1, 2])
def test_conv_tbc(pad: int) -> None:
    torch = _torch()
    x0 = np.sin(np.arange(7 * 2 * 4.0)).reshape(7, 2, 4)
    w0 = np.cos(np.arange(3 * 4 * 5.0)).reshape(3, 4, 5)
    b0 = np.linspace(-1, 1, 5)
    results = []
    for lib in (torch, fg):
        x, w, b = (lib.tensor(v, requires_grad=True) for v in (x0, w0, b0))
        y = lib.conv_tbc(x, w, b, pad)
        (y * y).sum().backward()
        results.append((_np(y), _np(x.grad), _np(w.grad), _np(b.grad)))
    for f, t in zip(results[1], results[0]):
        np.testing.assert_allclose(f, t, rtol=1e-10)


def test_dropout_of_int_tensor() -> None:
    torch = _torch()
    for lib in (torch, fg):
        x = lib.ones(2, 3, 4, 5, dtype=lib.int64)
        f = lib.nn.functional.dropout
        with pytest.raises(RuntimeError):
            f(x, 0.5, True)  # the kept entries' 1 / (1 - p) scale is no int
        # nothing to scale: p = 0, p = 1 and evaluation keep the dtype
        assert f(x, 0.0, True).dtype == lib.int64
        assert int(f(x, 1.0, True).abs().sum()) == 0
        assert f(x, 0.5, False) is x


# ------------------------------------------------------------------------- module attributes


@pytest.mark.parametrize(
    "name,args,kwargs",
    [
        ("AvgPool1d", (3,), {}),
        ("AvgPool1d", (3, 2, 1), {}),
        ("MaxUnpool1d", (2,), {}),
        ("MaxUnpool2d", (2,), {"stride": (1, 2), "padding": 1}),
        ("Embedding", (10, 3), {"scale_grad_by_freq": True, "sparse": True, "norm_type": 1.0}),
        ("EmbeddingBag", (10, 3), {"max_norm": 1.0, "scale_grad_by_freq": True}),
        ("EmbeddingBag", (10, 3), {"mode": "max", "norm_type": 3.0, "padding_idx": 2}),
        ("AlphaDropout", (0.3,), {}),
    ],
)
def test_layer_repr_and_stored_arguments(name: str, args: tuple, kwargs: dict) -> None:
    torch = _torch()
    t = getattr(torch.nn, name)(*args, **kwargs)
    f = getattr(fg.nn, name)(*args, **kwargs)
    assert repr(f) == repr(t)
    for attr in ("kernel_size", "stride", "padding"):
        if hasattr(t, attr):
            assert getattr(f, attr) == getattr(t, attr)


# ------------------------------------------------------------------------------- nn.grad


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("wrt", ["input", "weight"])
def test_nn_grad_conv_input_and_weight(nd: int, wrt: str) -> None:
    torch = _torch()
    rng = np.random.default_rng(nd)
    x0 = rng.standard_normal((2, 4) + (5,) * nd)
    w0 = rng.standard_normal((6, 2) + (3,) * nd)
    args = (2, 1, 1, 2)  # stride, padding, dilation, groups
    results = []
    for lib in (torch, fg):
        conv = getattr(lib.nn.functional, f"conv{nd}d")
        y = conv(lib.tensor(x0), lib.tensor(w0), None, *args)
        go = lib.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)), requires_grad=True)
        if wrt == "input":
            other = lib.tensor(w0, requires_grad=True)
            g = getattr(lib.nn.grad, f"conv{nd}d_input")(list(x0.shape), other, go, *args)
        else:
            other = lib.tensor(x0, requires_grad=True)
            g = getattr(lib.nn.grad, f"conv{nd}d_weight")(other, list(w0.shape), go, *args)
        (g * g).sum().backward()  # the result is differentiable in both arguments
        results.append((_np(g), _np(other.grad), _np(go.grad)))
    for f, t in zip(results[1], results[0]):
        np.testing.assert_allclose(f, t, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"groups": 0}, "groups"),
        ({"groups": -1}, "groups"),
        ({"dilation": 0}, "dilation"),
        ({"padding": -1}, "padding"),
    ],
)
def test_conv_bad_groups_dilation_padding_raise_runtime_error(
    nd: int, transposed: bool, kwargs: dict, message: str
) -> None:
    torch = _torch()
    op = ("conv_transpose" if transposed else "conv") + f"{nd}d"
    for lib in (torch, fg):
        x = lib.ones(1, 2, *([6] * nd), dtype=lib.float64)
        w = lib.ones(2, 2, *([3] * nd), dtype=lib.float64)
        with pytest.raises(RuntimeError, match=message):
            getattr(lib.nn.functional, op)(x, w, **kwargs)


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("padding_mode", ["zeros", "reflect"])
def test_conv_forward_with_a_transformed_weight(nd: int, padding_mode: str) -> None:
    # weight-standardised convolutions override forward and call _conv_forward
    torch = _torch()
    x0 = np.sin(np.arange(2 * 4 * 5**nd)).reshape((2, 4) + (5,) * nd)
    results = []
    for lib in (torch, fg):
        conv = getattr(lib.nn, f"Conv{nd}d")(
            4, 6, 3, padding=1, groups=2, padding_mode=padding_mode
        ).double()
        with lib.no_grad():
            conv.weight.copy_(lib.tensor(np.linspace(-1, 1, conv.weight.numel()).reshape(
                tuple(conv.weight.shape)
            )))  # fmt: skip
            conv.bias.fill_(0.1)
        x = lib.tensor(x0, requires_grad=True)
        w = conv.weight
        dims = tuple(range(1, nd + 2))
        w_std = (w - w.mean(dims, keepdim=True)) / (w.var(dims, keepdim=True) + 1e-5).sqrt()
        y = conv._conv_forward(x, w_std, conv.bias)
        (y * y).sum().backward()
        results.append((_np(y), _np(x.grad), _np(conv.weight.grad), _np(conv.bias.grad)))
    for f, t in zip(results[1], results[0]):
        np.testing.assert_allclose(f, t, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_conv_layers_store_per_axis_tuples(nd: int) -> None:
    torch = _torch()
    for name, kwargs in (
        (f"Conv{nd}d", {"stride": 2, "padding": 1, "dilation": 2}),
        (f"Conv{nd}d", {"padding": "same"}),
        (f"ConvTranspose{nd}d", {"stride": 2, "padding": 1, "output_padding": 1}),
    ):
        t = getattr(torch.nn, name)(4, 6, 3, **kwargs)
        f = getattr(fg.nn, name)(4, 6, 3, **kwargs)
        for attr in ("kernel_size", "stride", "padding", "dilation", "output_padding"):
            assert getattr(f, attr) == getattr(t, attr), (name, attr)
        assert f.transposed == t.transposed
        assert repr(f) == repr(t)


@pytest.mark.parametrize(
    "name,args",
    [
        ("Conv1d", (16, 64, 5)),
        ("Conv2d", (8, 64, 3)),
        ("Conv3d", (4, 64, 3)),
        ("ConvTranspose1d", (8, 64, 3)),
        ("ConvTranspose2d", (8, 64, 3)),
        ("ConvTranspose3d", (4, 64, 3)),
    ],
)
def test_conv_reset_parameters_redraws_pytorch_bounds(name: str, args: tuple) -> None:
    torch = _torch()
    stats = []
    for lib in (torch, fg):
        layer = getattr(lib.nn, name)(*args)
        with lib.no_grad():
            layer.weight.fill_(7.0)
            layer.bias.fill_(7.0)
        layer.reset_parameters()
        w, b = _np(layer.weight), _np(layer.bias)
        stats.append((np.abs(w).max(), w.std(), np.abs(b).max()))
    (tw, ts, tb), (fw, fs, fb) = stats
    bound = tw  # the largest of thousands of uniform draws: within 2% of the bound
    assert fw <= bound * 1.02 and fw >= bound * 0.98
    assert abs(fs - ts) < 0.05 * ts
    assert fb <= bound * 1.02 and fb > 0.5 * tb


@pytest.mark.parametrize("name", ["Embedding", "EmbeddingBag"])
def test_embedding_reset_parameters(name: str) -> None:
    torch = _torch()
    for lib in (torch, fg):
        layer = getattr(lib.nn, name)(2000, 8, padding_idx=3)
        with lib.no_grad():
            layer.weight.fill_(5.0)
        layer.reset_parameters()
        w = _np(layer.weight)
        assert abs(w.std() - 1.0) < 0.05 and abs(w.mean()) < 0.05
        np.testing.assert_array_equal(w[3], 0.0)
