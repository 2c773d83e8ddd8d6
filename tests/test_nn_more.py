"""Max pooling with indices and unpooling, RReLU, LPPool, EmbeddingBag, Dropout3d,
FeatureAlphaDropout, MultiLabelMarginLoss, TripletMarginWithDistanceLoss, LazyLinear,
SyncBatchNorm, channel_shuffle and nn.utils' weight/spectral norm and fusion: values and
gradients against PyTorch (float64) and against finite differences."""

from __future__ import annotations

import warnings

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest
from conftest import check_grad, weights_for

nn = fg.nn
RNG = np.random.default_rng(1234)


def _check_grad_on_cpu(fn, arrays, **kw):
    """Finite differences on the CPU: the comparison with torch above runs on the test device
    once, while hundreds of finite-difference forwards would take minutes on the emulated GPU."""
    prev = str(fg.get_default_device())
    fg.set_default_device("cpu")
    try:
        return check_grad(fn, arrays, **kw)
    finally:
        fg.set_default_device(prev)


def _randn(*shape):
    return RNG.standard_normal(shape)


def _distinct(*shape):
    """Values with no ties (max pooling's gradient is then defined)."""
    n = int(np.prod(shape))
    return (RNG.permutation(n).astype(np.float64) / n - 0.5).reshape(shape) + 0.01 * _randn(*shape)


def _torch_grads(torch, fn, arrays, seed=0):
    """The gradients of ``sum(fn(*xs) * w)`` from torch, ``w`` as check_grad's."""
    xs = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    y = fn(*xs)
    w = torch.tensor(weights_for(tuple(y.shape), seed))
    (y * w).sum().backward()
    return [x.grad.numpy() for x in xs]


def _close(a, b, tol=1e-10):
    a = a.numpy() if hasattr(a, "numpy") and not isinstance(a, np.ndarray) else a
    b = b.detach().numpy() if hasattr(b, "detach") else b
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# ------------------------------------------------------------------- pooling with indices

POOL_CASES = [
    ((1, 2, 7, 8), 3, 2, 1, 1, False),
    ((1, 2, 7, 8), 3, 2, 1, 2, True),
    ((2, 5, 6), (2, 3), None, (1, 1), 1, True),
    ((1, 2, 4, 4), 2, None, 0, 1, False),
]


@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool2d_indices_vs_torch(case):
    torch = pytest.importorskip("torch")
    shape, k, s, p, d, c = case
    x = _distinct(*shape)
    y, i = F.max_pool2d(fg.tensor(x), k, s, p, d, c, return_indices=True)
    ty, ti = torch.nn.functional.max_pool2d(torch.tensor(x), k, s, p, d, c, return_indices=True)
    _close(y, ty)
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    assert i.dtype == fg.int64
    _, i2 = F.max_pool2d_with_indices(fg.tensor(x), k, s, p, d, c)
    np.testing.assert_array_equal(i2.numpy(), ti.numpy())
    _close(F.max_pool2d(fg.tensor(x), k, s, p, d, c), ty)
    m = nn.MaxPool2d(k, s, p, d, return_indices=True, ceil_mode=c)
    np.testing.assert_array_equal(m(fg.tensor(x))[1].numpy(), ti.numpy())

    def fn(t):
        return F.max_pool2d(t, k, s, p, d, c, return_indices=True)[0]

    g = _check_grad_on_cpu(fn, [x])
    tg = _torch_grads(torch, lambda t: torch.nn.functional.max_pool2d(t, k, s, p, d, c), [x])
    _close(g[0], tg[0])


def test_max_pool1d_indices_and_unpool1d_vs_torch():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    x = _distinct(2, 3, 11)
    y, i = F.max_pool1d(fg.tensor(x), 3, 2, 1, return_indices=True)
    ty, ti = tf.max_pool1d(torch.tensor(x), 3, 2, 1, return_indices=True)
    _close(y, ty)
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    np.testing.assert_array_equal(
        F.max_pool1d_with_indices(fg.tensor(x), 3, 2, 1)[1].numpy(), ti.numpy()
    )
    np.testing.assert_array_equal(
        nn.MaxPool1d(3, 2, 1, return_indices=True)(fg.tensor(x))[1].numpy(), ti.numpy()
    )
    for size in (None, [11], (2, 3, 11)):
        u = F.max_unpool1d(y, i, 3, 2, 1, output_size=size)
        tu = tf.max_unpool1d(ty, ti, 3, 2, 1, output_size=size)
        _close(u, tu)
        _close(nn.MaxUnpool1d(3, 2, 1)(y, i, size), tu)
    # non-overlapping windows: unpooling is differentiable in its values
    y, i = F.max_pool1d(fg.tensor(x), 2, return_indices=True)
    ty, ti = tf.max_pool1d(torch.tensor(x), 2, return_indices=True)
    g = check_grad(lambda t: F.max_unpool1d(t, i, 2), [y.numpy()])
    tg = _torch_grads(torch, lambda t: tf.max_unpool1d(t, ti, 2), [ty.numpy()])
    _close(g[0], tg[0])


def test_max_unpool2d_vs_torch():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    x = _distinct(2, 3, 8, 9)
    y, i = F.max_pool2d(fg.tensor(x), 2, return_indices=True)
    ty, ti = tf.max_pool2d(torch.tensor(x), 2, return_indices=True)
    for size in ((8, 9), (2, 3, 8, 9)):
        _close(
            F.max_unpool2d(y, i, 2, output_size=size), tf.max_unpool2d(ty, ti, 2, output_size=size)
        )
        _close(nn.MaxUnpool2d(2)(y, i, size), tf.max_unpool2d(ty, ti, 2, output_size=size))
    g = check_grad(lambda t: F.max_unpool2d(t, i, 2, output_size=(8, 9)), [y.numpy()])
    tg = _torch_grads(torch, lambda t: tf.max_unpool2d(t, ti, 2, output_size=(8, 9)), [ty.numpy()])
    _close(g[0], tg[0])
    # overlapping windows (3, stride 2, padding 1) round trip
    y, i = F.max_pool2d(fg.tensor(x), 3, 2, 1, return_indices=True)
    ty, ti = tf.max_pool2d(torch.tensor(x), 3, 2, 1, return_indices=True)
    _close(F.max_unpool2d(y, i, 3, 2, 1, (8, 9)), tf.max_unpool2d(ty, ti, 3, 2, 1, (8, 9)))
    # unbatched
    _close(
        F.max_unpool2d(y[0], i[0], 3, 2, 1, (8, 9)), tf.max_unpool2d(ty[0], ti[0], 3, 2, 1, (8, 9))
    )


def test_max_unpool_finite_differences():
    x = _distinct(1, 2, 4, 6)
    y, i = F.max_pool2d(fg.tensor(x), 2, return_indices=True)
    check_grad(lambda t: F.max_unpool2d(t, i, 2), [y.numpy()])


@pytest.mark.parametrize("size", [(3, 4), (2, 5), (7, 9), (4, None)])
def test_adaptive_max_pool2d_indices_vs_torch(size):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    x = _distinct(1, 2, 7, 9)
    y, i = F.adaptive_max_pool2d(fg.tensor(x), size, return_indices=True)
    ty, ti = tf.adaptive_max_pool2d(torch.tensor(x), size, return_indices=True)
    _close(y, ty)
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    g = _check_grad_on_cpu(lambda t: F.adaptive_max_pool2d(t, size, True)[0], [x])
    tg = _torch_grads(torch, lambda t: tf.adaptive_max_pool2d(t, size), [x])
    _close(g[0], tg[0])
    y1, i1 = F.adaptive_max_pool1d(fg.tensor(x[0]), 4, return_indices=True)
    ty1, ti1 = tf.adaptive_max_pool1d(torch.tensor(x[0]), 4, return_indices=True)
    _close(y1, ty1)
    np.testing.assert_array_equal(i1.numpy(), ti1.numpy())


def test_pool_bad_input():
    x = fg.tensor(_randn(1, 2, 5, 5))
    with pytest.raises(ValueError, match="max_pool2d: padding"):
        F.max_pool2d(x, 2, 1, 2, return_indices=True)
    with pytest.raises(fg.ShapeError, match="max_pool2d"):
        F.max_pool2d(fg.tensor(_randn(5, 5)), 2, return_indices=True)
    with pytest.raises(TypeError, match="max_pool2d: input"):
        F.max_pool2d(np.zeros((1, 1, 4, 4)), 2, return_indices=True)
    y, i = F.max_pool2d(x, 2, return_indices=True)
    with pytest.raises(IndexError, match="max_unpool2d: indices"):
        F.max_unpool2d(y, i + 100, 2)
    with pytest.raises(ValueError, match="max_unpool2d: output_size"):
        F.max_unpool2d(y, i, 2, output_size=(9, 9))
    with pytest.raises(fg.ShapeError, match="max_unpool2d: indices"):
        F.max_unpool2d(y, i[..., :1], 2)
    with pytest.raises(fg.DTypeError, match="max_unpool2d: indices"):
        F.max_unpool2d(y, y, 2)


# ---------------------------------------------------------------------------------- RReLU


def test_rrelu_eval_vs_torch_and_grad():
    torch = pytest.importorskip("torch")
    x = _randn(4, 5)
    _close(F.rrelu(fg.tensor(x)), torch.nn.functional.rrelu(torch.tensor(x)))
    m = nn.RReLU(0.1, 0.3).eval()
    _close(m(fg.tensor(x)), torch.nn.RReLU(0.1, 0.3).eval()(torch.tensor(x)))
    g = check_grad(lambda t: F.rrelu(t, 0.2, 0.4), [x])
    _close(g[0], _torch_grads(torch, lambda t: torch.nn.functional.rrelu(t, 0.2, 0.4), [x])[0])


def test_rrelu_training_statistics_and_seed():
    x = fg.tensor(-np.ones((200, 50)))
    fg.manual_seed(7)
    a = F.rrelu(x, 0.1, 0.3, training=True).numpy()
    fg.manual_seed(7)
    b = nn.RReLU(0.1, 0.3)(x).numpy()
    np.testing.assert_array_equal(a, b)
    slopes = -a
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3
    assert abs(slopes.mean() - 0.2) < 0.005
    assert np.unique(slopes).size > 1000
    pos = fg.tensor(np.ones((3, 3)))
    np.testing.assert_array_equal(F.rrelu(pos, training=True).numpy(), np.ones((3, 3)))
    y = fg.tensor(-np.ones(4))
    F.rrelu_(y)
    np.testing.assert_allclose(y.numpy(), -np.full(4, (1 / 8 + 1 / 3) / 2))
    with pytest.raises(ValueError, match="rrelu: lower"):
        F.rrelu(x, 0.5, 0.1)


def test_rrelu_training_gradient_uses_the_drawn_slopes():
    x = _randn(3, 4)

    def fn(t):
        fg.manual_seed(11)
        return F.rrelu(t, training=True)

    check_grad(fn, [x])


# --------------------------------------------------------------------------------- LPPool


@pytest.mark.parametrize("p", [1.0, 2.0, 3.5])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_lp_pool_vs_torch(p, ceil_mode):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    x = RNG.uniform(0.2, 1.5, (2, 3, 7, 8))
    _close(
        F.lp_pool2d(fg.tensor(x), p, 3, 2, ceil_mode),
        tf.lp_pool2d(torch.tensor(x), p, 3, 2, ceil_mode),
    )
    _close(nn.LPPool2d(p, (2, 3))(fg.tensor(x)), torch.nn.LPPool2d(p, (2, 3))(torch.tensor(x)))
    x1 = x[0]
    _close(
        F.lp_pool1d(fg.tensor(x1), p, 3, 2, ceil_mode),
        tf.lp_pool1d(torch.tensor(x1), p, 3, 2, ceil_mode),
    )
    _close(nn.LPPool1d(p, 2)(fg.tensor(x1)), torch.nn.LPPool1d(p, 2)(torch.tensor(x1)))
    g = _check_grad_on_cpu(lambda t: F.lp_pool2d(t, p, 3, 2, ceil_mode), [x])
    _close(g[0], _torch_grads(torch, lambda t: tf.lp_pool2d(t, p, 3, 2, ceil_mode), [x])[0], 1e-9)


def test_lp_pool_finite_differences_and_errors():
    x = RNG.uniform(0.2, 1.5, (1, 2, 5))
    check_grad(lambda t: F.lp_pool1d(t, 2.0, 2), [x])
    with pytest.raises(fg.ShapeError, match="lp_pool2d"):
        F.lp_pool2d(fg.tensor(_randn(4, 4)), 2, 2)
    with pytest.raises(ValueError, match="lp_pool2d: norm_type"):
        F.lp_pool2d(fg.tensor(_randn(1, 4, 4)), 0, 2)


# --------------------------------------------------------------------------- EmbeddingBag

BAG_INPUT = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0, 0])
BAG_OFFSETS = np.array([0, 2, 2, 6])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 4, 0])
@pytest.mark.parametrize("last", [False, True])
def test_embedding_bag_vs_torch(mode, padding_idx, last):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    w = _distinct(10, 4)
    off = np.append(BAG_OFFSETS, BAG_INPUT.size) if last else BAG_OFFSETS
    args = {"mode": mode, "padding_idx": padding_idx, "include_last_offset": last}
    y = F.embedding_bag(fg.tensor(BAG_INPUT), fg.tensor(w), fg.tensor(off), **args)
    ty = tf.embedding_bag(torch.tensor(BAG_INPUT), torch.tensor(w), torch.tensor(off), **args)
    _close(y, ty)

    def fn(t):
        return F.embedding_bag(fg.tensor(BAG_INPUT), t, fg.tensor(off), **args)

    g = check_grad(fn, [w])
    tg = _torch_grads(
        torch,
        lambda t: tf.embedding_bag(torch.tensor(BAG_INPUT), t, torch.tensor(off), **args),
        [w],
    )
    _close(g[0], tg[0])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_vs_torch(mode):
    torch = pytest.importorskip("torch")
    w = _distinct(10, 3)
    idx = BAG_INPUT.reshape(2, 5)
    _close(
        F.embedding_bag(fg.tensor(idx), fg.tensor(w), mode=mode),
        torch.nn.functional.embedding_bag(torch.tensor(idx), torch.tensor(w), mode=mode),
    )


def test_embedding_bag_per_sample_weights_vs_torch():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    w, psw = _randn(10, 4), _randn(10)
    i, o = fg.tensor(BAG_INPUT), fg.tensor(BAG_OFFSETS)
    ti, to = torch.tensor(BAG_INPUT), torch.tensor(BAG_OFFSETS)

    def fn(a, b):
        return F.embedding_bag(i, a, o, mode="sum", per_sample_weights=b)

    g = check_grad(fn, [w, psw])
    tg = _torch_grads(
        torch, lambda a, b: tf.embedding_bag(ti, a, to, mode="sum", per_sample_weights=b), [w, psw]
    )
    _close(
        fn(fg.tensor(w), fg.tensor(psw)),
        tf.embedding_bag(ti, torch.tensor(w), to, mode="sum", per_sample_weights=torch.tensor(psw)),
    )
    _close(g[0], tg[0])
    _close(g[1], tg[1])


def test_embedding_bag_module_state_dict_vs_torch():
    torch = pytest.importorskip("torch")
    for kw in ({}, {"mode": "max", "padding_idx": 2}, {"mode": "sum", "include_last_offset": True}):
        m = nn.EmbeddingBag(10, 4, dtype="float64", **kw)
        tm = torch.nn.EmbeddingBag(10, 4, **kw).double()
        assert list(m.state_dict()) == list(tm.state_dict())
        m.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
        off = np.append(BAG_OFFSETS, 10) if kw.get("include_last_offset") else BAG_OFFSETS
        _close(
            m(fg.tensor(BAG_INPUT), fg.tensor(off)), tm(torch.tensor(BAG_INPUT), torch.tensor(off))
        )
    m = nn.EmbeddingBag(5, 3, padding_idx=1)
    np.testing.assert_array_equal(m.weight.numpy()[1], 0.0)
    pre = nn.EmbeddingBag.from_pretrained(fg.tensor(_randn(5, 3)), mode="sum")
    assert pre.weight.shape == (5, 3) and pre.mode == "sum"


def test_embedding_bag_bad_input():
    w, i = fg.tensor(_randn(10, 4)), fg.tensor(BAG_INPUT)
    with pytest.raises(ValueError, match="embedding_bag: offsets is required"):
        F.embedding_bag(i, w)
    with pytest.raises(ValueError, match="embedding_bag: offsets\\[0\\]"):
        F.embedding_bag(i, w, fg.tensor(np.array([1, 3])))
    with pytest.raises(ValueError, match="embedding_bag: per_sample_weights"):
        F.embedding_bag(
            i, w, fg.tensor(BAG_OFFSETS), mode="mean", per_sample_weights=fg.tensor(_randn(10))
        )
    with pytest.raises(ValueError, match="embedding_bag: mode"):
        F.embedding_bag(i, w, fg.tensor(BAG_OFFSETS), mode="median")
    with pytest.raises(IndexError, match="embedding_bag: indices"):
        F.embedding_bag(i + 10, w, fg.tensor(BAG_OFFSETS))
    with pytest.raises(fg.DTypeError, match="embedding_bag: input"):
        F.embedding_bag(w, w, fg.tensor(BAG_OFFSETS))
    with pytest.raises(ValueError, match="embedding_bag: with include_last_offset"):
        F.embedding_bag(i, w, fg.tensor(BAG_OFFSETS), include_last_offset=True)


# ---------------------------------------------------------------------- dropout variants


def test_dropout3d_statistics_and_seed():
    x = fg.tensor(np.ones((60, 50, 2, 3, 2)))
    fg.manual_seed(5)
    a = F.dropout3d(x, 0.3).numpy()
    fg.manual_seed(5)
    b = nn.Dropout3d(0.3)(x).numpy()
    np.testing.assert_array_equal(a, b)
    per_channel = a.reshape(60, 50, -1)
    assert np.all(per_channel.min(-1) == per_channel.max(-1))  # whole channels
    assert set(np.unique(a)) <= {0.0, 1.0 / 0.7}
    assert abs((a == 0).mean() - 0.3) < 0.03
    np.testing.assert_array_equal(nn.Dropout3d(0.3).eval()(x).numpy(), x.numpy())
    np.testing.assert_array_equal(F.dropout3d(x[0], 0.3, training=False).numpy(), x.numpy()[0])
    assert F.dropout3d(x[0], 0.5).shape == (50, 2, 3, 2)
    with pytest.warns(UserWarning, match="dropout3d"):  # (torch 2.x: warns, then runs)
        assert F.dropout3d(fg.tensor(np.ones((2, 3, 4)))).shape == (2, 3, 4)
    with pytest.raises(ValueError, match="Dropout3d: p"):
        nn.Dropout3d(1.5)


def test_dropout3d_gradient():
    x = _randn(2, 3, 2, 2, 2)

    def fn(t):
        fg.manual_seed(3)
        return F.dropout3d(t, 0.4)

    check_grad(fn, [x])


def test_feature_alpha_dropout_statistics():
    x = fg.tensor(RNG.standard_normal((400, 60, 4)))
    fg.manual_seed(9)
    a = F.feature_alpha_dropout(x, 0.3, training=True).numpy()
    fg.manual_seed(9)
    b = nn.FeatureAlphaDropout(0.3)(x).numpy()
    np.testing.assert_array_equal(a, b)
    assert abs(a.mean()) < 0.02 and abs(a.std() - 1.0) < 0.02
    # a dropped channel is constant
    const = np.ptp(a, axis=-1) == 0
    assert abs(const.mean() - 0.3) < 0.02
    np.testing.assert_array_equal(nn.FeatureAlphaDropout(0.3).eval()(x).numpy(), x.numpy())
    np.testing.assert_array_equal(F.feature_alpha_dropout(x, 0.3).numpy(), x.numpy())


def test_feature_alpha_dropout_gradient():
    def fn(t):
        fg.manual_seed(4)
        return F.feature_alpha_dropout(t, 0.5, True)

    check_grad(fn, [_randn(3, 4, 2)])


# --------------------------------------------------------------------------------- losses


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss_vs_torch(reduction):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    x = _randn(3, 5)
    t = np.array([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 1, 1, 1, 1]])
    tt = torch.tensor(t)
    _close(
        F.multilabel_margin_loss(fg.tensor(x), fg.tensor(t), reduction),
        tf.multilabel_margin_loss(torch.tensor(x), tt, reduction=reduction),
    )
    _close(
        nn.MultiLabelMarginLoss(reduction=reduction)(fg.tensor(x), fg.tensor(t)),
        torch.nn.MultiLabelMarginLoss(reduction=reduction)(torch.tensor(x), tt),
    )
    g = check_grad(lambda a: F.multilabel_margin_loss(a, fg.tensor(t), reduction), [x])
    tg = _torch_grads(torch, lambda a: tf.multilabel_margin_loss(a, tt, reduction=reduction), [x])
    _close(g[0], tg[0])
    _close(
        F.multilabel_margin_loss(fg.tensor(x[0]), fg.tensor(t[0])),
        tf.multilabel_margin_loss(torch.tensor(x[0]), tt[0]),
    )


def test_multilabel_margin_loss_errors():
    x = fg.tensor(_randn(2, 3))
    with pytest.raises(IndexError, match="multilabel_margin_loss"):
        F.multilabel_margin_loss(x, fg.tensor(np.array([[3, -1, 0], [0, 1, 2]])))
    with pytest.raises(fg.ShapeError, match="multilabel_margin_loss"):
        F.multilabel_margin_loss(x, fg.tensor(np.array([0, 1])))
    with pytest.raises(fg.DTypeError, match="multilabel_margin_loss: target"):
        F.multilabel_margin_loss(x, x)


@pytest.mark.parametrize("swap", [False, True])
def test_triplet_margin_with_distance_loss_vs_torch(swap):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    a, p, n = _randn(4, 6), _randn(4, 6), _randn(4, 6)
    _close(
        F.triplet_margin_with_distance_loss(fg.tensor(a), fg.tensor(p), fg.tensor(n), swap=swap),
        tf.triplet_margin_with_distance_loss(*map(torch.tensor, (a, p, n)), swap=swap),
    )

    def cos(x, y):
        return 1.0 - F.cosine_similarity(x, y, 1)

    def tcos(x, y):
        return 1.0 - tf.cosine_similarity(x, y, 1)

    m = nn.TripletMarginWithDistanceLoss(
        distance_function=cos, margin=0.5, swap=swap, reduction="none"
    )
    tm = torch.nn.TripletMarginWithDistanceLoss(
        distance_function=tcos, margin=0.5, swap=swap, reduction="none"
    )
    _close(m(*map(fg.tensor, (a, p, n))), tm(*map(torch.tensor, (a, p, n))))
    g = check_grad(
        lambda x, y, z: F.triplet_margin_with_distance_loss(x, y, z, swap=swap, reduction="sum"),
        [a, p, n],
    )
    tg = _torch_grads(
        torch,
        lambda x, y, z: tf.triplet_margin_with_distance_loss(x, y, z, swap=swap, reduction="sum"),
        [a, p, n],
    )
    for u, v in zip(g, tg):
        _close(u, v)
    with pytest.raises(ValueError, match="margin"):
        F.triplet_margin_with_distance_loss(fg.tensor(a), fg.tensor(p), fg.tensor(n), margin=0.0)


# ------------------------------------------------------------- LazyLinear, SyncBatchNorm


def test_lazy_linear_vs_torch():
    torch = pytest.importorskip("torch")
    m = nn.LazyLinear(3, dtype="float64")
    tm = torch.nn.LazyLinear(3, dtype=torch.float64)
    x = _randn(2, 5)
    y = m(fg.tensor(x))
    tm(torch.tensor(x))
    assert y.shape == (2, 3)
    assert isinstance(m, nn.Linear) and m.in_features == 5
    assert m.weight.shape == (3, 5) and m.bias.shape == (3,)
    assert list(m.state_dict()) == list(tm.state_dict())
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    _close(m(fg.tensor(x)), tm(torch.tensor(x)))
    bound = 1 / np.sqrt(5)
    assert nn.LazyLinear(4, dtype="float64")(fg.tensor(x)).shape[-1] == 4
    m2 = nn.LazyLinear(8, bias=False)
    m2(fg.tensor(_randn(3, 5).astype(np.float32)))
    assert m2.bias is None and np.abs(m2.weight.numpy()).max() <= bound
    # loading a state dict sizes an unused LazyLinear
    m3 = nn.LazyLinear(3, dtype="float64")
    m3.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    _close(m3(fg.tensor(x)), tm(torch.tensor(x)))


def test_lazy_linear_gradient():
    w = _randn(3, 4)

    def fn(x):
        m = nn.LazyLinear(3, bias=False, dtype="float64")
        m(x.detach())
        del m.weight  # (a parameter slot takes only a Parameter, as in PyTorch)
        m.weight = fg.tensor(w)
        return m(x)

    check_grad(fn, [_randn(2, 4)])


def test_sync_batch_norm_matches_batch_norm():
    torch = pytest.importorskip("torch")
    x = _randn(4, 3, 5)
    m, tm = nn.SyncBatchNorm(3).double(), torch.nn.BatchNorm1d(3).double()
    assert list(m.state_dict()) == list(tm.state_dict())
    _close(m(fg.tensor(x)), tm(torch.tensor(x)))
    _close(m.running_var, tm.running_var)
    m.eval()
    tm.eval()
    _close(m(fg.tensor(x)), tm(torch.tensor(x)))


def test_channel_shuffle_vs_torch():
    torch = pytest.importorskip("torch")
    x = _randn(2, 6, 3, 2)
    _close(
        F.channel_shuffle(fg.tensor(x), 3), torch.nn.functional.channel_shuffle(torch.tensor(x), 3)
    )
    _close(nn.ChannelShuffle(2)(fg.tensor(x)), torch.nn.ChannelShuffle(2)(torch.tensor(x)))
    check_grad(lambda t: F.channel_shuffle(t, 2), [x])
    with pytest.raises(fg.ShapeError, match="channel_shuffle"):
        F.channel_shuffle(fg.tensor(x), 4)
    with pytest.raises(ValueError, match="channel_shuffle: groups"):
        F.channel_shuffle(fg.tensor(x), 0)


# ------------------------------------------------------------------------------ nn.utils


def _copy_torch_state(m, tm):
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_vs_torch(dim):
    torch = pytest.importorskip("torch")
    tm = torch.nn.utils.weight_norm(torch.nn.Conv2d(3, 4, 3).double(), dim=dim)
    m = nn.utils.weight_norm(nn.Conv2d(3, 4, 3).double(), dim=dim)
    assert list(m.state_dict()) == list(tm.state_dict())
    assert m.weight_g.shape == tuple(tm.weight_g.shape)
    _copy_torch_state(m, tm)
    x = _randn(2, 3, 6, 6)
    _close(m(fg.tensor(x)), tm(torch.tensor(x)))
    # gradients reach weight_g and weight_v
    tx = torch.tensor(x)
    w = weights_for(tuple(tm(tx).shape))
    (tm(tx) * torch.tensor(w)).sum().backward()
    y = m(fg.tensor(x))
    (y * fg.tensor(w)).sum().backward()
    _close(m.weight_g.grad, tm.weight_g.grad, 1e-9)
    _close(m.weight_v.grad, tm.weight_v.grad, 1e-9)
    nn.utils.remove_weight_norm(m)
    torch.nn.utils.remove_weight_norm(tm)
    assert sorted(m.state_dict()) == sorted(tm.state_dict())
    _close(m.weight, tm.weight)
    with pytest.raises(ValueError, match="weight_norm"):
        nn.utils.remove_weight_norm(m)


def test_weight_norm_finite_differences():
    x = _randn(2, 3)

    def fn(g, v):
        m = nn.utils.weight_norm(nn.Linear(3, 2, bias=False).double())
        m.__dict__["weight_g"] = g  # the tracked inputs themselves
        m.__dict__["weight_v"] = v
        return m(fg.tensor(x))

    check_grad(lambda g, v: fn(g, v), [RNG.uniform(0.5, 1.5, (2, 1)), _randn(2, 3)])


def test_spectral_norm_vs_torch():
    torch = pytest.importorskip("torch")
    tm = torch.nn.utils.spectral_norm(torch.nn.Linear(5, 4).double(), n_power_iterations=2)
    m = nn.utils.spectral_norm(nn.Linear(5, 4).double(), n_power_iterations=2)
    assert list(m.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in m.named_buffers()] == [n for n, _ in tm.named_buffers()]
    _copy_torch_state(m, tm)
    x = _randn(3, 5)
    for _ in range(2):  # training mode: power iterations update u and v
        _close(m(fg.tensor(x)), tm(torch.tensor(x)))
        _close(m.weight_u, tm.weight_u)
        _close(m.weight_v, tm.weight_v)
    m.eval()
    tm.eval()
    u = m.weight_u.numpy().copy()
    _close(m(fg.tensor(x)), tm(torch.tensor(x)))
    np.testing.assert_array_equal(m.weight_u.numpy(), u)
    # gradient of weight_orig in eval mode (u, v fixed)
    tx = torch.tensor(x)
    w = weights_for((3, 4))
    (tm(tx) * torch.tensor(w)).sum().backward()
    (m(fg.tensor(x)) * fg.tensor(w)).sum().backward()
    _close(m.weight_orig.grad, tm.weight_orig.grad, 1e-9)
    nn.utils.remove_spectral_norm(m)
    torch.nn.utils.remove_spectral_norm(tm)
    assert sorted(m.state_dict()) == sorted(tm.state_dict())
    _close(m.weight, tm.weight)


def test_spectral_norm_conv_transpose_dim_and_sigma():
    torch = pytest.importorskip("torch")
    tm = torch.nn.utils.spectral_norm(torch.nn.ConvTranspose2d(3, 5, 2).double())
    m = nn.utils.spectral_norm(nn.ConvTranspose2d(3, 5, 2).double())
    assert m.weight_u.shape == tuple(tm.weight_u.shape) and m.weight_v.shape == tuple(
        tm.weight_v.shape
    )
    _copy_torch_state(m, tm)
    x = _randn(1, 3, 4, 4)
    _close(m(fg.tensor(x)), tm(torch.tensor(x)))
    # many iterations: the normalised weight has spectral norm 1
    lin = nn.utils.spectral_norm(nn.Linear(6, 4).double(), n_power_iterations=50)
    lin(fg.tensor(_randn(1, 6)))
    assert abs(np.linalg.norm(lin.weight.numpy(), 2) - 1.0) < 1e-6


def test_spectral_norm_finite_differences():
    x = _randn(2, 4)
    base = nn.utils.spectral_norm(nn.Linear(4, 3, bias=False).double()).eval()

    def fn(w):
        base.__dict__["weight_orig"] = w
        return base(fg.tensor(x))

    check_grad(fn, [_randn(3, 4)])


def test_norm_hooks_bad_input():
    with pytest.raises(ValueError, match="weight_norm"):
        nn.utils.weight_norm(nn.Linear(2, 2), name="nothing")
    with pytest.raises(ValueError, match="spectral_norm: n_power_iterations"):
        nn.utils.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)
    with pytest.raises(ValueError, match="remove_spectral_norm"):
        nn.utils.remove_spectral_norm(nn.Linear(2, 2))
    m = nn.utils.weight_norm(nn.Linear(2, 2))
    with pytest.raises(RuntimeError, match="already"):
        nn.utils.weight_norm(m)


def test_fuse_conv_bn_vs_torch():
    torch = pytest.importorskip("torch")
    for transpose in (False, True):
        cls, tcls = (
            (nn.ConvTranspose2d, torch.nn.ConvTranspose2d)
            if transpose
            else (nn.Conv2d, torch.nn.Conv2d)
        )
        tconv, tbn = tcls(3, 4, 3).double().eval(), torch.nn.BatchNorm2d(4).double()
        tbn.running_mean.copy_(torch.tensor(_randn(4)))
        tbn.running_var.copy_(torch.tensor(RNG.uniform(0.5, 2, 4)))
        tbn.weight.data.copy_(torch.tensor(_randn(4)))
        tbn.bias.data.copy_(torch.tensor(_randn(4)))
        tbn.eval()
        conv, bn = cls(3, 4, 3).double().eval(), nn.BatchNorm2d(4).double().eval()
        _copy_torch_state(conv, tconv)
        _copy_torch_state(bn, tbn)
        fused = nn.utils.fuse_conv_bn_eval(conv, bn, transpose)
        tfused = torch.nn.utils.fuse_conv_bn_eval(tconv, tbn, transpose)
        x = _randn(2, 3, 5, 5)
        _close(fused(fg.tensor(x)), tfused(torch.tensor(x)))
        _close(fused(fg.tensor(x)), bn(conv(fg.tensor(x))))
        _close(fused.weight, tfused.weight)
        assert isinstance(fused.weight, nn.Parameter)
    with pytest.raises(ValueError, match="eval mode"):
        nn.utils.fuse_conv_bn_eval(nn.Conv2d(1, 1, 1), nn.BatchNorm2d(1))


def test_fuse_linear_bn_vs_torch():
    torch = pytest.importorskip("torch")
    tlin, tbn = torch.nn.Linear(3, 4).double().eval(), torch.nn.BatchNorm1d(4).double()
    tbn.running_mean.copy_(torch.tensor(_randn(4)))
    tbn.running_var.copy_(torch.tensor(RNG.uniform(0.5, 2, 4)))
    tbn.eval()
    lin, bn = nn.Linear(3, 4).double().eval(), nn.BatchNorm1d(4).double().eval()
    _copy_torch_state(lin, tlin)
    _copy_torch_state(bn, tbn)
    x = _randn(5, 3)
    fused = nn.utils.fuse_linear_bn_eval(lin, bn)
    _close(fused(fg.tensor(x)), torch.nn.utils.fuse_linear_bn_eval(tlin, tbn)(torch.tensor(x)))
    w, b = nn.utils.fuse_linear_bn_weights(
        lin.weight, lin.bias, bn.running_mean, bn.running_var, 1e-5, bn.weight, bn.bias
    )
    tw, tb = torch.nn.utils.fuse_linear_bn_weights(
        tlin.weight, tlin.bias, tbn.running_mean, tbn.running_var, 1e-5, tbn.weight, tbn.bias
    )
    _close(w, tw)
    _close(b, tb)
    with pytest.raises(fg.ShapeError, match="fuse_linear_bn_eval"):
        nn.utils.fuse_linear_bn_eval(nn.Linear(3, 2).eval(), nn.BatchNorm1d(4).eval())


def test_skip_init_and_clip_grad_norm():
    m = nn.utils.skip_init(nn.Linear, 3, 2)
    assert isinstance(m, nn.Linear) and m.weight.shape == (2, 3)
    with pytest.raises(TypeError, match="skip_init"):
        nn.utils.skip_init(nn.Linear(3, 2))
    p = nn.Parameter(fg.tensor(np.ones(4)))
    p.grad = fg.tensor(np.full(4, 3.0))
    with pytest.warns(FutureWarning, match="clip_grad_norm_"):
        total = nn.utils.clip_grad_norm(p, 1.0)
    assert abs(float(total.item()) - 6.0) < 1e-12
    assert abs(np.linalg.norm(p.grad.numpy()) - 1.0) < 1e-5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.utils.clip_grad_norm_(p, 1.0)


@pytest.mark.parametrize(
    ("shape", "out"), [((1, 1, 4, 4), 2), ((2, 3, 7, 5), (3, 2)), ((3, 7, 5), (4, 3))]
)
def test_adaptive_max_pool_sends_a_tied_windows_gradient_to_its_first_maximum(shape, out):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).integers(0, 3, shape).astype(np.float64)  # many ties
    fx, tx = fg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    fy = fg.nn.functional.adaptive_max_pool2d(fx, out)
    ty = torch.nn.functional.adaptive_max_pool2d(tx, out)
    g = np.random.default_rng(1).standard_normal(tuple(ty.shape))
    (fy * fg.tensor(g)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    np.testing.assert_array_equal(fy.numpy(), ty.detach().numpy())
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_multi_head_attention_forward_with_an_output_projection_of_another_width():
    """CLIP's AttentionPool2d projects the attention output from 16 to 8 features."""
    torch = pytest.importorskip("torch")
    r = np.random.RandomState(0)
    x = r.rand(5, 2, 16)
    w = [r.rand(16, 16) for _ in range(3)]
    ob, ow = r.rand(8), r.rand(8, 16)
    outs = []
    for lib in (torch, fg):
        t = lib.tensor
        o, _ = lib.nn.functional.multi_head_attention_forward(
            t(x[:1]), t(x), t(x), 16, 2, None, t(np.zeros(48)), None, None, False, 0.0,
            t(ow), t(ob), training=False, need_weights=False, use_separate_proj_weight=True,
            q_proj_weight=t(w[0]), k_proj_weight=t(w[1]), v_proj_weight=t(w[2]),
        )  # fmt: skip
        outs.append(np.asarray(o.detach().numpy()))
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-10)
