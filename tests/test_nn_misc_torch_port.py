"""Layers and ``nn.utils`` from PyTorch's nn tests that the other ports leave out: Bilinear,
the Upsample modules, the shuffles, Fold/Unfold, Flatten/Unflatten, the small activations,
AdaptiveLogSoftmaxWithLoss, the padding modules, gradient clipping, parameters as a vector,
batch-norm fusion, functional_call and skip_init. Each case runs the same code on PyTorch
and on ferrograd from identical float64 values and compares the outputs, the gradients and,
where both refuse, that ferrograd's exception is an instance of PyTorch's type."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ferrograd as fg
import numpy as np
import pytest

# the deprecated torch.nn.utils.stateless.functional_call is compared too
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

CASES: dict[str, Callable[[Any], Any]] = {}

# PyTorch computes these gradients with float32 constants even in float64 (hardswish's and
# hardsigmoid's 1/6 and 1/2, CELU's 1/alpha): ferrograd's exact values differ by ~1e-8
LOOSE = {"hardswish_hardsigmoid", "hardswish_inplace_grad", "elu_family", "elu_family_inplace"}


def case(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
    CASES[f.__name__] = f
    return f


def npy(t: Any) -> Any:
    if isinstance(t, (list, tuple)):
        return [npy(x) for x in t]
    if hasattr(t, "detach"):
        return np.asarray(t.detach().numpy())
    return t


def _run(lib: Any, f: Callable[[Any], Any]) -> tuple[str, Any]:
    try:
        return "ok", npy(f(lib))
    except Exception as e:  # noqa: BLE001
        return "exc", e


def _assert_same(t: Any, g: Any, rtol: float, where: str = "") -> None:
    if isinstance(t, list):
        assert isinstance(g, list) and len(g) == len(t), (where, t, g)
        for i, (a, b) in enumerate(zip(t, g)):
            _assert_same(a, b, rtol, f"{where}[{i}]")
    elif isinstance(t, np.ndarray) or isinstance(g, np.ndarray):
        a, b = np.asarray(t), np.asarray(g)
        assert a.shape == b.shape and a.dtype.kind == b.dtype.kind, (where, a, b)
        np.testing.assert_allclose(b, a, rtol=rtol, atol=1e-10, err_msg=where)
    else:
        assert t == g, (where, t, g)


# ------------------- Bilinear, Identity, Upsample, shuffles, Fold, Flatten, activations
def rnd(*shape, seed=0):
    return np.random.RandomState(seed).standard_normal(shape)


def T(lib, a, rg=False):
    return lib.tensor(a, dtype=lib.float64, requires_grad=rg)


def copy_params(lib, m, src):
    # src: dict name->ndarray
    with lib.no_grad():
        for n, p in m.named_parameters():
            p.copy_(lib.tensor(src[n], dtype=lib.float64))


def grads(m):
    return [p.grad for _, p in m.named_parameters()]


@case
def bilinear(lib):
    m = lib.nn.Bilinear(3, 4, 5).double()
    copy_params(lib, m, {"weight": rnd(5, 3, 4), "bias": rnd(5, seed=1)})
    a = T(lib, rnd(6, 3, seed=2), True)
    b = T(lib, rnd(6, 4, seed=3), True)
    y = m(a, b)
    (y * y).sum().backward()
    return [y, a.grad, b.grad] + grads(m)


@case
def bilinear_nobias_batchdims(lib):
    m = lib.nn.Bilinear(3, 4, 5, bias=False).double()
    copy_params(lib, m, {"weight": rnd(5, 3, 4)})
    a = T(lib, rnd(2, 6, 3, seed=2), True)
    b = T(lib, rnd(2, 6, 4, seed=3), True)
    y = m(a, b)
    (y * y).sum().backward()
    return [y, a.grad, b.grad, m.bias is None] + grads(m)


@case
def bilinear_noncontig(lib):
    m = lib.nn.Bilinear(5, 5, 3).double()
    copy_params(lib, m, {"weight": rnd(3, 5, 5), "bias": rnd(3, seed=1)})
    a = T(lib, rnd(5, 4, seed=2)).t()
    b = T(lib, rnd(5, 4, seed=3)).t()
    return m(a, b)


@case
def bilinear_shape_error(lib):
    m = lib.nn.Bilinear(3, 4, 5)
    return m(lib.ones(2, 3), lib.ones(3, 4))


@case
def bilinear_feature_error(lib):
    m = lib.nn.Bilinear(3, 4, 5)
    return m(lib.ones(2, 4), lib.ones(2, 4))


@case
def bilinear_repr(lib):
    return repr(lib.nn.Bilinear(3, 4, 5, bias=False))


@case
def bilinear_0d_batch(lib):
    m = lib.nn.Bilinear(3, 4, 5).double()
    copy_params(lib, m, {"weight": rnd(5, 3, 4), "bias": rnd(5, seed=1)})
    return m(T(lib, rnd(3)), T(lib, rnd(4)))


@case
def identity_args(lib):
    m = lib.nn.Identity(54, unused_argument1=0.1, unused_argument2=False)
    x = lib.randn(3, 4)
    return [m(x) is x, repr(m)]


@case
def upsample_nearest_module(lib):
    m = lib.nn.Upsample(scale_factor=2, mode="nearest")
    x = T(lib, rnd(1, 2, 3, 3), True)
    y = m(x)
    (y * y).sum().backward()
    return [y, x.grad, repr(m)]


@case
def upsample_size(lib):
    m = lib.nn.Upsample(size=(5, 7), mode="bilinear")
    x = T(lib, rnd(1, 2, 3, 3), True)
    y = m(x)
    (y * y).sum().backward()
    return [y, x.grad, repr(m), m.align_corners]


@case
def upsample_bilinear_ac(lib):
    m = lib.nn.Upsample(scale_factor=(2, 1.5), mode="bilinear", align_corners=True)
    x = T(lib, rnd(1, 2, 3, 4), True)
    y = m(x)
    (y * y).sum().backward()
    return [y, x.grad, repr(m)]


@case
def upsample_linear1d(lib):
    m = lib.nn.Upsample(scale_factor=3, mode="linear")
    x = T(lib, rnd(1, 2, 4), True)
    y = m(x)
    (y * y).sum().backward()
    return [y, x.grad]


@case
def upsample_trilinear(lib):
    m = lib.nn.Upsample(scale_factor=2, mode="trilinear", align_corners=False)
    x = T(lib, rnd(1, 1, 2, 3, 2), True)
    y = m(x)
    (y * y).sum().backward()
    return [y, x.grad]


@case
def upsample_bicubic(lib):
    m = lib.nn.Upsample(scale_factor=2, mode="bicubic")
    x = T(lib, rnd(1, 1, 3, 3), True)
    y = m(x)
    (y * y).sum().backward()
    return [y, x.grad]


@case
def upsampling_nearest2d(lib):
    m = lib.nn.UpsamplingNearest2d(scale_factor=2)
    x = T(lib, rnd(1, 2, 3, 3), True)
    y = m(x)
    (y * y).sum().backward()
    return [y, x.grad, repr(m)]


@case
def upsampling_nearest2d_size(lib):
    m = lib.nn.UpsamplingNearest2d(size=(4, 5))
    return m(T(lib, rnd(1, 2, 3, 3)))


@case
def upsampling_bilinear2d(lib):
    m = lib.nn.UpsamplingBilinear2d(scale_factor=2)
    x = T(lib, rnd(1, 2, 3, 3), True)
    y = m(x)
    (y * y).sum().backward()
    return [y, x.grad, repr(m), m.align_corners]


@case
def upsampling_bilinear2d_size(lib):
    m = lib.nn.UpsamplingBilinear2d(size=(5, 4))
    return m(T(lib, rnd(1, 2, 3, 3)))


@case
def upsample_recompute(lib):
    m = lib.nn.Upsample(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True)
    return m(T(lib, rnd(1, 1, 3, 3)))


@case
def upsample_nearest_exact(lib):
    m = lib.nn.Upsample(scale_factor=1.5, mode="nearest-exact")
    return m(T(lib, rnd(1, 1, 4, 4)))


@case
def upsample_both_error(lib):
    return lib.nn.Upsample(size=4, scale_factor=2)(lib.ones(1, 1, 2, 2))


@case
def upsample_no_size_error(lib):
    return lib.nn.Upsample()(lib.ones(1, 1, 2, 2))


@case
def pixel_shuffle(lib):
    m = lib.nn.PixelShuffle(2)
    u = lib.nn.PixelUnshuffle(2)
    x = T(lib, rnd(2, 8, 3, 4), True)
    y = m(x)
    z = u(y)
    (y * T(lib, rnd(2, 2, 6, 8, seed=1))).sum().backward()
    return [y, z, x.grad, repr(m), repr(u)]


@case
def pixel_shuffle_batch(lib):
    m = lib.nn.PixelShuffle(3)
    return m(T(lib, rnd(2, 2, 9, 2, 2)))


@case
def pixel_shuffle_bad_channels(lib):
    return lib.nn.PixelShuffle(2)(lib.ones(1, 3, 2, 2))


@case
def pixel_unshuffle_bad_hw(lib):
    return lib.nn.PixelUnshuffle(2)(lib.ones(1, 1, 3, 4))


@case
def pixel_shuffle_1d_err(lib):
    return lib.nn.PixelShuffle(2)(lib.ones(4, 2))


@case
def channel_shuffle(lib):
    m = lib.nn.ChannelShuffle(3)
    x = T(lib, rnd(2, 6, 2, 2), True)
    y = m(x)
    (y * T(lib, rnd(2, 6, 2, 2, seed=4))).sum().backward()
    return [y, x.grad, repr(m)]


@case
def channel_shuffle_3d(lib):
    return lib.nn.ChannelShuffle(2)(T(lib, rnd(1, 4, 3)))


@case
def channel_shuffle_bad(lib):
    return lib.nn.ChannelShuffle(4)(lib.ones(1, 6, 2, 2))


@case
def fold_unfold_module(lib):
    unf = lib.nn.Unfold(kernel_size=(2, 3), dilation=1, padding=1, stride=2)
    x = T(lib, rnd(2, 3, 5, 6), True)
    cols = unf(x)
    fold = lib.nn.Fold(output_size=(5, 6), kernel_size=(2, 3), padding=1, stride=2)
    y = fold(cols)
    (y * y).sum().backward()
    return [cols, y, x.grad, repr(unf), repr(fold)]


@case
def fold_unbatched(lib):
    fold = lib.nn.Fold(output_size=(3, 3), kernel_size=2)
    return fold(T(lib, rnd(12, 4)))


@case
def fold_bad(lib):
    fold = lib.nn.Fold(output_size=(3, 3), kernel_size=2)
    return fold(lib.ones(1, 13, 4))


@case
def unfold_3d_input_err(lib):
    return lib.nn.Unfold(2)(lib.ones(1, 1, 2, 2, 2))


@case
def flatten(lib):
    x = T(lib, rnd(2, 3, 4, 5), True)
    a = lib.nn.Flatten()(x)
    b = lib.nn.Flatten(0, -1)(x)
    c = lib.nn.Flatten(1, 2)(x)
    (a.sum() + (b * b).sum() + c.sum()).backward()
    return [a, b, c, x.grad, repr(lib.nn.Flatten(1, 2))]


@case
def flatten_0d(lib):
    return lib.nn.Flatten(0)(lib.tensor(3.0, dtype=lib.float64))


@case
def unflatten(lib):
    x = T(lib, rnd(2, 12), True)
    a = lib.nn.Unflatten(1, (3, 4))(x)
    b = lib.nn.Unflatten(-1, [2, -1])(x)
    (a.sum() * 2 + (b * b).sum()).backward()
    return [a, b, x.grad, repr(lib.nn.Unflatten(1, (3, 4)))]


@case
def unflatten_bad_size(lib):
    return lib.nn.Unflatten(1, (5, 4))(lib.ones(2, 12))


@case
def unflatten_bad_type(lib):
    return lib.nn.Unflatten(1, 12)


@case
def unflatten_named_bad(lib):
    return lib.nn.Unflatten("features", (("C", 2), ("H", 3)))


@case
def unflatten_tuple_list(lib):
    return lib.nn.Unflatten(1, [2, "a"])


@case
def cosine_similarity_module(lib):
    m = lib.nn.CosineSimilarity(dim=1, eps=1e-6)
    a = T(lib, rnd(4, 5), True)
    b = T(lib, rnd(4, 5, seed=1), True)
    y = m(a, b)
    (y * y).sum().backward()
    return [y, a.grad, b.grad, repr(m)]


@case
def cosine_similarity_bcast(lib):
    m = lib.nn.CosineSimilarity(dim=-1)
    a = T(lib, rnd(4, 1, 5), True)
    b = T(lib, rnd(3, 5, seed=1), True)
    y = m(a, b)
    y.sum().backward()
    return [y, a.grad, b.grad]


@case
def cosine_zero(lib):
    a = lib.zeros(2, 3, dtype=lib.float64, requires_grad=True)
    b = T(lib, rnd(2, 3), True)
    y = lib.nn.CosineSimilarity()(a, b)
    y.sum().backward()
    return [y, a.grad, b.grad]


@case
def pairwise_distance_module(lib):
    out = []
    for p in (1, 2, 3.5, float("inf")):
        m = lib.nn.PairwiseDistance(p=p, eps=1e-6, keepdim=(p == 2))
        a = T(lib, rnd(4, 5), True)
        b = T(lib, rnd(4, 5, seed=1), True)
        y = m(a, b)
        (y * y).sum().backward()
        out += [y, a.grad, b.grad]
    out.append(repr(lib.nn.PairwiseDistance()))
    return out


@case
def pairwise_1d(lib):
    return lib.nn.PairwiseDistance()(T(lib, rnd(5)), T(lib, rnd(5, seed=1)))


@case
def softmax2d(lib):
    m = lib.nn.Softmax2d()
    x = T(lib, rnd(2, 3, 4, 5), True)
    y = m(x)
    (y * T(lib, rnd(2, 3, 4, 5, seed=2))).sum().backward()
    x3 = T(lib, rnd(3, 4, 5))
    return [y, x.grad, m(x3)]


@case
def softmax2d_bad(lib):
    return lib.nn.Softmax2d()(lib.ones(3, 4))


@case
def softmin(lib):
    m = lib.nn.Softmin(dim=1)
    x = T(lib, rnd(3, 4), True)
    y = m(x)
    (y * T(lib, rnd(3, 4, seed=2))).sum().backward()
    return [y, x.grad, repr(m)]


@case
def logsigmoid(lib):
    m = lib.nn.LogSigmoid()
    x = T(lib, rnd(3, 4) * 30, True)
    y = m(x)
    y.sum().backward()
    return [y, x.grad]


@case
def logsigmoid_extreme(lib):
    x = lib.tensor([-1000.0, -50.0, 0.0, 50.0, 1000.0], dtype=lib.float64, requires_grad=True)
    y = lib.nn.LogSigmoid()(x)
    y.sum().backward()
    return [y, x.grad]


@case
def shrinks(lib):
    x = lib.tensor([-2.0, -0.5, -0.3, 0.0, 0.3, 0.5, 2.0], dtype=lib.float64, requires_grad=True)
    a = lib.nn.Hardshrink(0.5)(x)
    b = lib.nn.Softshrink(0.5)(x)
    c = lib.nn.Tanhshrink()(x)
    (a * 1 + b * 2 + c * 3).sum().backward()
    return [a, b, c, x.grad, repr(lib.nn.Hardshrink()), repr(lib.nn.Softshrink(0.3))]


@case
def softshrink_negative_lambda(lib):
    return lib.nn.Softshrink(-0.5)(lib.ones(3))


@case
def threshold(lib):
    x = T(lib, rnd(10), True)
    y = lib.nn.Threshold(0.1, 20)(x)
    (y * y).sum().backward()
    return [y, x.grad, repr(lib.nn.Threshold(0.1, 20, inplace=True))]


@case
def threshold_inplace(lib):
    x = T(lib, rnd(10))
    y = lib.nn.Threshold(0.1, 20, inplace=True)(x)
    return [y, x, y is x]


@case
def threshold_inplace_grad(lib):
    a = T(lib, rnd(10), True)
    x = a * 2
    y = lib.nn.Threshold(0.1, -3.0, inplace=True)(x)
    (y * y).sum().backward()
    return [y, a.grad]


@case
def threshold_int(lib):
    x = lib.tensor([-3, 0, 2, 5])
    return lib.nn.Threshold(1, 42)(x)


@case
def threshold_nan(lib):
    x = lib.tensor([float("nan"), 1.0, -1.0], dtype=lib.float64)
    return lib.nn.Threshold(0.5, 9.0)(x)


@case
def glu(lib):
    m = lib.nn.GLU(dim=1)
    x = T(lib, rnd(3, 6, 2), True)
    y = m(x)
    (y * y).sum().backward()
    return [y, x.grad, repr(m), lib.nn.GLU()(T(lib, rnd(2, 4)))]


@case
def glu_odd(lib):
    return lib.nn.GLU()(lib.ones(2, 5))


@case
def glu_0d(lib):
    return lib.nn.GLU()(lib.tensor(1.0))


@case
def mish(lib):
    x = T(lib, rnd(20) * 10, True)
    y = lib.nn.Mish()(x)
    y.sum().backward()
    return [y, x.grad]


@case
def mish_inplace(lib):
    x = T(lib, rnd(5))
    y = lib.nn.Mish(inplace=True)(x)
    return [y, x, y is x]


@case
def hardswish_hardsigmoid(lib):
    x = lib.tensor(
        [-4.0, -3.0, -2.0, 0.0, 1.0, 2.9, 3.0, 3.5], dtype=lib.float64, requires_grad=True
    )
    a = lib.nn.Hardswish()(x)
    b = lib.nn.Hardsigmoid()(x)
    (a + b * 2).sum().backward()
    return [a, b, x.grad]


@case
def hardswish_inplace(lib):
    x = T(lib, rnd(8) * 4)
    y = lib.nn.Hardswish(inplace=True)(x)
    x2 = T(lib, rnd(8) * 4)
    y2 = lib.nn.Hardsigmoid(inplace=True)(x2)
    return [y, x, y is x, y2, x2, y2 is x2]


@case
def hardswish_inplace_grad(lib):
    a = T(lib, rnd(8) * 4, True)
    x = a * 1.5
    y = lib.nn.Hardswish(inplace=True)(x)
    y.sum().backward()
    b = T(lib, rnd(8) * 4, True)
    x2 = b * 1.5
    y2 = lib.nn.Hardsigmoid(inplace=True)(x2)
    y2.sum().backward()
    return [y, a.grad, y2, b.grad]


@case
def rrelu_eval(lib):
    m = lib.nn.RReLU(0.1, 0.3).eval()
    x = T(lib, rnd(10), True)
    y = m(x)
    y.sum().backward()
    return [y, x.grad, repr(m)]


@case
def rrelu_train_range(lib):
    m = lib.nn.RReLU(0.1, 0.3)
    x = -lib.ones(1000, dtype=lib.float64)
    y = m(x)
    r = -y
    return [bool((r >= 0.1).all()), bool((r <= 0.3).all()), bool(r.std() > 0.01)]


@case
def rrelu_train_grad(lib):
    m = lib.nn.RReLU(0.1, 0.3)
    x = T(lib, rnd(100), True)
    y = m(x)
    y.sum().backward()
    g = x.grad
    yy = y.detach()
    # grad equals y/x elementwise
    return [bool(np.allclose(npy(g), npy(yy) / npy(x)))]


@case
def rrelu_inplace(lib):
    x = T(lib, rnd(10))
    y = lib.nn.RReLU(0.1, 0.3, inplace=True).eval()(x)
    return [y, x, y is x]


@case
def rrelu_bad_bounds(lib):
    return lib.nn.functional.rrelu(lib.ones(3), 0.5, 0.1, training=True)


@case
def elu_family(lib):
    out = []
    for m in (lib.nn.ELU(alpha=1.3), lib.nn.CELU(alpha=0.7), lib.nn.SELU()):
        x = T(lib, rnd(10), True)
        y = m(x)
        (y * y).sum().backward()
        out += [y, x.grad, repr(m)]
    return out


@case
def elu_family_inplace(lib):
    out = []
    for ctor in (
        lambda: lib.nn.ELU(alpha=1.3, inplace=True),
        lambda: lib.nn.CELU(alpha=0.7, inplace=True),
        lambda: lib.nn.SELU(inplace=True),
    ):
        a = T(lib, rnd(10), True)
        x = a * 1.0
        y = ctor()(x)
        (y * y).sum().backward()
        out += [y, x, a.grad, repr(ctor())]
    return out


@case
def elu_inplace_leaf_error(lib):
    x = T(lib, rnd(10), True)
    return lib.nn.ELU(inplace=True)(x)


@case
def celu_zero_alpha(lib):
    return lib.nn.functional.celu(lib.ones(3), alpha=0.0)


# ------------------------------------------ AdaptiveLogSoftmaxWithLoss, padding modules


def asm_build(lib, head_bias=False, div_value=4.0):
    m = lib.nn.AdaptiveLogSoftmaxWithLoss(
        8, 10, [4, 8], div_value=div_value, head_bias=head_bias
    ).double()
    src = {}
    for i, (n, p) in enumerate(m.named_parameters()):
        src[n] = rnd(*p.shape, seed=10 + i) * 0.5
    copy_params(lib, m, src)
    return m


@case
def asm_names(lib):
    m = lib.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4, 8], div_value=2.0, head_bias=True)
    return [[n for n, _ in m.named_parameters()], [tuple(p.shape) for p in m.parameters()]]


@case
def asm_forward(lib):
    m = asm_build(lib)
    x = T(lib, rnd(6, 8), True)
    tgt = lib.tensor([0, 3, 4, 7, 8, 9])
    out = m(x, tgt)
    out.loss.backward()
    return [out.output, out.loss, x.grad] + grads(m)


@case
def asm_forward_head_bias(lib):
    m = asm_build(lib, head_bias=True)
    x = T(lib, rnd(6, 8), True)
    tgt = lib.tensor([0, 3, 4, 7, 8, 9])
    out = m(x, tgt)
    out.loss.backward()
    return [out.output, out.loss, x.grad] + grads(m)


@case
def asm_log_prob_predict(lib):
    m = asm_build(lib)
    x = T(lib, rnd(5, 8))
    lp = m.log_prob(x)
    return [lp, lp.exp().sum(1), m.predict(x), lp.argmax(1)]


@case
def asm_predict_head_only(lib):
    # inputs whose argmax lies in the shortlist
    m = lib.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4, 8], div_value=2.0)
    with lib.no_grad():
        m.head.weight.zero_()
        m.head.weight[:, 0:2].fill_(0)
        for i in range(4):
            m.head.weight[i, i] = 10.0
    x = lib.eye(8)[:4].double()
    m = m.double()
    return [m.predict(x)]


@case
def asm_unbatched(lib):
    m = asm_build(lib)
    x = T(lib, rnd(8))
    out = m(x, lib.tensor(5))
    return [out.output, out.loss, m.log_prob(x), m.predict(x)]


@case
def asm_cutoff_unsorted(lib):
    return lib.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [10, 5])


@case
def asm_cutoff_dup(lib):
    return lib.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [5, 5, 10])


@case
def asm_cutoff_too_big(lib):
    return lib.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [5, 20])


@case
def asm_cutoff_zero(lib):
    return lib.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [0, 10])


@case
def asm_cutoff_float(lib):
    return lib.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [5.5, 10])


@case
def asm_target_oob(lib):
    m = lib.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4, 8])
    return m(lib.randn(3, 8), lib.tensor([0, 10, 2]))


@case
def asm_target_neg(lib):
    m = lib.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4, 8])
    return m(lib.randn(3, 8), lib.tensor([0, -1, 2]))


@case
def asm_batch_mismatch(lib):
    m = lib.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4, 8])
    return m(lib.randn(3, 8), lib.tensor([0, 1]))


@case
def asm_3d_input(lib):
    m = lib.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4, 8])
    return m(lib.randn(2, 3, 8), lib.tensor([[0, 1, 2], [1, 2, 3]]))


@case
def asm_log_prob_bad(lib):
    m = lib.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4, 8])
    return m.log_prob(lib.randn(3, 7))


@case
def asm_repr(lib):
    return repr(lib.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4, 8]))


PADS = ["ZeroPad", "ConstantPad", "ReflectionPad", "ReplicationPad", "CircularPad"]


def mkpad(lib, kind, nd, p):
    cls = getattr(lib.nn, f"{kind}{nd}d")
    return cls(p, 1.5) if kind == "ConstantPad" else cls(p)


for kind in PADS:
    for nd in (1, 2, 3):

        def f(lib, kind=kind, nd=nd):
            p = tuple([1, 2, 2, 0, 1, 1][: 2 * nd])
            m = mkpad(lib, kind, nd, p)
            x = T(lib, rnd(2, 3, *([4] * nd)), True)
            y = m(x)
            (y * T(lib, rnd(*y.shape, seed=5))).sum().backward()
            x2 = T(lib, rnd(3, *([4] * nd)))
            return [y, x.grad, m(x2), repr(m), mkpad(lib, kind, nd, 1)(x2)]

        f.__name__ = f"pad_{kind}{nd}d"
        case(f)

        def g(lib, kind=kind, nd=nd):
            m = mkpad(lib, kind, nd, 5)
            return m(lib.ones(1, 2, *([3] * nd), dtype=lib.float64))

        g.__name__ = f"pad_toolarge_{kind}{nd}d"
        case(g)

        def h2(lib, kind=kind, nd=nd):
            p = tuple([-1, 2, 1, -1, 0, 1][: 2 * nd])
            m = mkpad(lib, kind, nd, p)
            x = T(lib, rnd(1, 2, *([4] * nd)), True)
            y = m(x)
            (y * y).sum().backward()
            return [y, x.grad]

        h2.__name__ = f"pad_negative_{kind}{nd}d"
        case(h2)

        def w(lib, kind=kind, nd=nd):
            m = mkpad(lib, kind, nd, 1)
            return m(lib.ones(*([3] * nd), dtype=lib.float64))

        w.__name__ = f"pad_wrongdim_{kind}{nd}d"
        case(w)


@case
def zeropad_repr(lib):
    return [
        repr(lib.nn.ZeroPad2d((1, 2, 3, 4))),
        repr(lib.nn.ConstantPad1d(2, 3.5)),
        repr(lib.nn.ZeroPad1d(2)),
    ]


# ------------------- parameter vectors, gradient clipping, batch-norm fusion, skip_init
U = lambda lib: lib.nn.utils


def small_net(lib):
    net = lib.nn.Sequential(
        lib.nn.Linear(4, 3), lib.nn.ReLU(), lib.nn.Linear(3, 2, bias=False)
    ).double()
    src = {n: rnd(*p.shape, seed=i) for i, (n, p) in enumerate(net.named_parameters())}
    copy_params(lib, net, src)
    return net


@case
def p2v(lib):
    net = small_net(lib)
    v = U(lib).parameters_to_vector(net.parameters())
    return [v, v.shape[0]]


@case
def v2p(lib):
    net = small_net(lib)
    v = lib.arange(21, dtype=lib.float64)
    U(lib).vector_to_parameters(v, net.parameters())
    return [p for p in net.parameters()] + [U(lib).parameters_to_vector(net.parameters())]


@case
def v2p_grad(lib):
    net = small_net(lib)
    v = T(lib, rnd(21), True)
    U(lib).vector_to_parameters(v, net.parameters())
    return [net[0].weight.requires_grad, type(net[0].weight).__name__]


@case
def v2p_notensor(lib):
    net = small_net(lib)
    U(lib).vector_to_parameters([1.0] * 23, net.parameters())


@case
def p2v_too_short(lib):
    net = small_net(lib)
    U(lib).vector_to_parameters(lib.zeros(10, dtype=lib.float64), net.parameters())


@case
def p2v_grad_flows(lib):
    a = T(lib, rnd(2, 3), True)
    b = T(lib, rnd(4), True)
    v = U(lib).parameters_to_vector([a, b])
    (v * v).sum().backward()
    return [v, a.grad, b.grad]


def with_grads(lib, scale=1.0):
    ps = [lib.nn.Parameter(T(lib, rnd(3, 4, seed=1))), lib.nn.Parameter(T(lib, rnd(5, seed=2)))]
    ps[0].grad = T(lib, rnd(3, 4, seed=3) * scale)
    ps[1].grad = T(lib, rnd(5, seed=4) * scale)
    return ps


for nt in (0.5, 1, 2, 3.0, float("inf"), "inf"):
    for foreach in (None, False, True):

        def f(lib, nt=nt, foreach=foreach):
            ps = with_grads(lib)
            n = U(lib).clip_grad_norm_(ps, max_norm=1.5, norm_type=nt, foreach=foreach)
            return [n, n.dtype == lib.float64, ps[0].grad, ps[1].grad]

        f.__name__ = f"clipnorm_{nt}_{foreach}"
        case(f)


@case
def clipnorm_no_clip_when_small(lib):
    ps = with_grads(lib, 1e-3)
    n = U(lib).clip_grad_norm_(ps, 10.0)
    return [n, ps[0].grad, ps[1].grad]


@case
def clipnorm_single_tensor(lib):
    p = lib.nn.Parameter(T(lib, rnd(3)))
    p.grad = T(lib, rnd(3, seed=3))
    n = U(lib).clip_grad_norm_(p, 0.5)
    return [n, p.grad]


@case
def clipnorm_empty(lib):
    n = U(lib).clip_grad_norm_([], 1.0)
    return [n, n.shape]


@case
def clipnorm_nograd(lib):
    p = lib.nn.Parameter(T(lib, rnd(3)))
    n = U(lib).clip_grad_norm_([p], 1.0)
    return [n, p.grad is None]


@case
def clipnorm_nonfinite_error(lib):
    ps = with_grads(lib)
    with lib.no_grad():
        ps[0].grad[0, 0] = float("nan")
    U(lib).clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)


@case
def clipnorm_inf_error(lib):
    ps = with_grads(lib)
    with lib.no_grad():
        ps[1].grad[2] = float("inf")
    U(lib).clip_grad_norm_(ps, 1.0, norm_type="inf", error_if_nonfinite=True)


@case
def clipnorm_nonfinite_noerror(lib):
    ps = with_grads(lib)
    with lib.no_grad():
        ps[1].grad[2] = float("inf")
    n = U(lib).clip_grad_norm_(ps, 1.0, error_if_nonfinite=False)
    return [n, ps[0].grad, ps[1].grad]


@case
def clipnorm_generator(lib):
    ps = with_grads(lib)
    n = U(lib).clip_grad_norm_((p for p in ps), 1.0)
    return [n, ps[0].grad]


@case
def clipnorm_tensor_maxnorm(lib):
    ps = with_grads(lib)
    n = U(lib).clip_grad_norm_(ps, lib.tensor(1.0, dtype=lib.float64))
    return [n, ps[0].grad]


@case
def clipnorm_mixed_dtype(lib):
    p1 = lib.nn.Parameter(lib.ones(3))
    p1.grad = lib.full((3,), 2.0)
    p2 = lib.nn.Parameter(lib.ones(3, dtype=lib.float64))
    p2.grad = lib.full((3,), 2.0, dtype=lib.float64)
    n = U(lib).clip_grad_norm_([p1, p2], 1.0)
    return [n, str(n.dtype).split(".")[-1], p1.grad, p2.grad]


@case
def clipnorm_float32_result_dtype(lib):
    p = lib.nn.Parameter(lib.ones(3))
    p.grad = lib.full((3,), 2.0)
    n = U(lib).clip_grad_norm_([p], 1.0)
    return [str(n.dtype).split(".")[-1], n.requires_grad]


@case
def clipnorm_deprecated(lib):
    ps = with_grads(lib)
    n = U(lib).clip_grad_norm(ps, 1.0)
    return [n, ps[0].grad]


@case
def clipvalue(lib):
    ps = with_grads(lib)
    r = U(lib).clip_grad_value_(ps, 0.7)
    return [r is None, ps[0].grad, ps[1].grad]


@case
def clipvalue_foreach(lib):
    ps = with_grads(lib)
    U(lib).clip_grad_value_(ps, 0.7, foreach=True)
    return [ps[0].grad, ps[1].grad]


@case
def clipvalue_single(lib):
    p = lib.nn.Parameter(T(lib, rnd(3)))
    p.grad = T(lib, rnd(3, seed=3))
    U(lib).clip_grad_value_(p, 0.5)
    return [p.grad]


@case
def total_norm(lib):
    ps = with_grads(lib)
    gs = [p.grad for p in ps]
    out = []
    for nt in (1, 2.0, 3, float("inf")):
        out.append(U(lib).get_total_norm(gs, nt))
    out.append(U(lib).get_total_norm([], 2))
    return out


@case
def total_norm_nonfinite(lib):
    g = lib.tensor([1.0, float("nan")], dtype=lib.float64)
    U(lib).get_total_norm([g], error_if_nonfinite=True)


@case
def clip_with_norm(lib):
    ps = with_grads(lib)
    tn = U(lib).get_total_norm([p.grad for p in ps])
    r = U(lib).clip_grads_with_norm_(ps, 1.2, tn)
    return [r is None, tn, ps[0].grad, ps[1].grad]


@case
def clip_with_norm_foreach(lib):
    ps = with_grads(lib)
    U(lib).clip_grads_with_norm_(ps, 1.2, lib.tensor(3.0, dtype=lib.float64), foreach=True)
    return [ps[0].grad, ps[1].grad]


@case
def clip_with_norm_small(lib):
    ps = with_grads(lib)
    U(lib).clip_grads_with_norm_(ps, 10.0, lib.tensor(3.0, dtype=lib.float64))
    return [ps[0].grad]


@case
def clipnorm_retains_grad_identity(lib):
    ps = with_grads(lib)
    g0 = ps[0].grad
    U(lib).clip_grad_norm_(ps, 0.1)
    return [ps[0].grad is g0]


def conv_bn(lib, transpose=False, bias=True):
    conv = (lib.nn.ConvTranspose2d if transpose else lib.nn.Conv2d)(2, 3, 3, bias=bias).double()
    bn = lib.nn.BatchNorm2d(3).double()
    copy_params(
        lib, conv, {n: rnd(*p.shape, seed=i) for i, (n, p) in enumerate(conv.named_parameters())}
    )
    with lib.no_grad():
        bn.weight.copy_(T(lib, rnd(3, seed=7)))
        bn.bias.copy_(T(lib, rnd(3, seed=8)))
        bn.running_mean.copy_(T(lib, rnd(3, seed=9)))
        bn.running_var.copy_(T(lib, np.abs(rnd(3, seed=10)) + 0.5))
    return conv.eval(), bn.eval()


for tr in (False, True):
    for b in (False, True):

        def f(lib, tr=tr, b=b):
            conv, bn = conv_bn(lib, tr, b)
            x = T(lib, rnd(2, 2, 5, 5, seed=11))
            ref = bn(conv(x))
            fused = U(lib).fuse_conv_bn_eval(conv, bn, transpose=tr)
            y = fused(x)
            return [
                ref,
                y,
                fused.bias is not None,
                fused.weight.requires_grad,
                conv.weight.shape == fused.weight.shape,
                type(fused).__name__,
                fused is conv,
            ]

        f.__name__ = f"fuse_conv_bn_{tr}_{b}"
        case(f)


@case
def fuse_conv_bn_training_error(lib):
    conv, bn = conv_bn(lib)
    conv.train()
    U(lib).fuse_conv_bn_eval(conv, bn)


@case
def fuse_conv_bn_weights(lib):
    conv, bn = conv_bn(lib)
    w, b = U(lib).fuse_conv_bn_weights(
        conv.weight, conv.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias
    )
    return [w, b, type(w).__name__]


@case
def fuse_conv_bn_weights_none(lib):
    conv, bn = conv_bn(lib)
    w, b = U(lib).fuse_conv_bn_weights(
        conv.weight, None, bn.running_mean, bn.running_var, bn.eps, None, None
    )
    return [w, b]


def lin_bn(lib, bias=True, nbn=3):
    lin = lib.nn.Linear(4, 3, bias=bias).double()
    bn = lib.nn.BatchNorm1d(nbn).double()
    copy_params(
        lib, lin, {n: rnd(*p.shape, seed=i) for i, (n, p) in enumerate(lin.named_parameters())}
    )
    with lib.no_grad():
        bn.weight.copy_(T(lib, rnd(nbn, seed=7)))
        bn.bias.copy_(T(lib, rnd(nbn, seed=8)))
        bn.running_mean.copy_(T(lib, rnd(nbn, seed=9)))
        bn.running_var.copy_(T(lib, np.abs(rnd(nbn, seed=10)) + 0.5))
    return lin.eval(), bn.eval()


for b in (False, True):

    def f(lib, b=b):
        lin, bn = lin_bn(lib, b)
        x = T(lib, rnd(5, 4, seed=11))
        fused = U(lib).fuse_linear_bn_eval(lin, bn)
        return [bn(lin(x)), fused(x), fused is lin]

    f.__name__ = f"fuse_linear_bn_{b}"
    case(f)


@case
def fuse_linear_bn_bcast(lib):
    lin, bn = lin_bn(lib, True, 1)
    x = T(lib, rnd(5, 4, seed=11))
    fused = U(lib).fuse_linear_bn_eval(lin, bn)
    return [fused(x)]


@case
def fuse_linear_bn_bad(lib):
    lin, bn = lin_bn(lib, True, 2)
    U(lib).fuse_linear_bn_eval(lin, bn)


@case
def fuse_linear_bn_training(lib):
    lin, bn = lin_bn(lib)
    bn.train()
    U(lib).fuse_linear_bn_eval(lin, bn)


@case
def fuse_linear_bn_weights(lib):
    lin, bn = lin_bn(lib)
    w, b = U(lib).fuse_linear_bn_weights(
        lin.weight, lin.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias
    )
    return [w, b, type(w).__name__]


@case
def skip_init(lib):
    m = U(lib).skip_init(lib.nn.Linear, 5, 1, device="cpu", dtype=lib.float64)
    return [
        tuple(m.weight.shape),
        str(m.weight.dtype).split(".")[-1],
        type(m).__name__,
        m.bias.shape[0],
    ]


@case
def skip_init_kwargs(lib):
    m = U(lib).skip_init(lib.nn.Linear, in_features=5, out_features=2, bias=False)
    return [tuple(m.weight.shape), m.bias is None]


@case
def skip_init_bad(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()

    U(lib).skip_init(M)


@case
def skip_init_not_module(lib):
    U(lib).skip_init(int)


@case
def convert_mf(lib):
    m = lib.nn.Sequential(lib.nn.Conv2d(3, 4, 3), lib.nn.ReLU(), lib.nn.Conv2d(4, 2, 1)).double()
    w0 = m[0].weight.detach().clone()
    r = U(lib).convert_conv2d_weight_memory_format(m, lib.channels_last)
    x = T(lib, rnd(1, 3, 5, 5))
    return [
        m(x).shape,
        r is m,
        lib.equal(m[0].weight, w0),
        m[0].weight.is_contiguous(memory_format=lib.channels_last),
    ]


@case
def convert_mf3d(lib):
    m = lib.nn.Conv3d(3, 4, 1)
    r = U(lib).convert_conv3d_weight_memory_format(m, lib.channels_last_3d)
    return [r is m, tuple(m.weight.shape)]


# ---------------------------------------------------------------------- functional_call
def FC(lib):
    return lib.func.functional_call


def SFC(lib):
    return lib.nn.utils.stateless.functional_call


def lin(lib):
    m = lib.nn.Linear(3, 2).double()
    copy_params(lib, m, {"weight": rnd(2, 3), "bias": rnd(2, seed=1)})
    return m


for which in ("func", "stateless"):
    get = FC if which == "func" else SFC

    def f(lib, get=get):
        m = lin(lib)
        w = T(lib, rnd(2, 3, seed=5), True)
        x = T(lib, rnd(4, 3, seed=6))
        y = get(lib)(m, {"weight": w}, (x,))
        y.sum().backward()
        return [y, w.grad, m.weight, m.weight.grad is None, type(m.weight).__name__]

    f.__name__ = f"fc_basic_{which}"
    case(f)

    def g(lib, get=get):
        m = lin(lib)
        x = T(lib, rnd(4, 3, seed=6))
        y = get(lib)(
            m,
            {"weight": lib.zeros(2, 3, dtype=lib.float64), "bias": lib.ones(2, dtype=lib.float64)},
            x,
        )
        return [y, m(x)]

    g.__name__ = f"fc_single_arg_{which}"
    case(g)

    def h2(lib, get=get):
        m = lin(lib)
        get(lib)(
            m,
            {"wieght": lib.zeros(2, 3, dtype=lib.float64)},
            (lib.ones(1, 3, dtype=lib.float64),),
            strict=True,
        )

    h2.__name__ = f"fc_strict_unexpected_{which}"
    case(h2)

    def h3(lib, get=get):
        m = lin(lib)
        get(lib)(
            m,
            {"weight": lib.zeros(2, 3, dtype=lib.float64)},
            (lib.ones(1, 3, dtype=lib.float64),),
            strict=True,
        )

    h3.__name__ = f"fc_strict_missing_{which}"
    case(h3)

    def h4(lib, get=get):
        m = lin(lib)
        return get(lib)(
            m, {"wieght": lib.zeros(2, 3, dtype=lib.float64)}, (lib.ones(1, 3, dtype=lib.float64),)
        )

    h4.__name__ = f"fc_nonstrict_unexpected_{which}"
    case(h4)

    def tied(lib, get=get, tie=True):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = lib.nn.Linear(3, 3, bias=False).double()
                self.b = lib.nn.Linear(3, 3, bias=False).double()
                self.b.weight = self.a.weight
                self.register_buffer("buf", lib.ones(3, dtype=lib.float64))

            def forward(self, x):
                return self.b(self.a(x)) + self.buf

        m = M()
        with lib.no_grad():
            m.a.weight.copy_(T(lib, rnd(3, 3)))
        w = T(lib, rnd(3, 3, seed=2), True)
        x = T(lib, rnd(2, 3, seed=3))
        kw = {} if tie else {"tie_weights": False}
        y = get(lib)(m, {"a.weight": w, "buf": lib.zeros(3, dtype=lib.float64)}, (x,), **kw)
        y.sum().backward()
        return [y, w.grad, m(x), m.buf]

    tied.__name__ = f"fc_tied_{which}"
    case(tied)

    def untied(lib, get=get, tied=tied):
        return tied(lib, get, False)

    untied.__name__ = f"fc_untied_{which}"
    case(untied)

    def tied_conflict(lib, get=get):
        m = lib.nn.Sequential(
            lib.nn.Linear(3, 3, bias=False), lib.nn.Linear(3, 3, bias=False)
        ).double()
        m[1].weight = m[0].weight
        get(lib)(
            m,
            {
                "0.weight": lib.zeros(3, 3, dtype=lib.float64),
                "1.weight": lib.ones(3, 3, dtype=lib.float64),
            },
            (lib.ones(1, 3, dtype=lib.float64),),
        )

    tied_conflict.__name__ = f"fc_tied_conflict_{which}"
    case(tied_conflict)

    def tied_same(lib, get=get):
        m = lib.nn.Sequential(
            lib.nn.Linear(3, 3, bias=False), lib.nn.Linear(3, 3, bias=False)
        ).double()
        m[1].weight = m[0].weight
        z = lib.full((3, 3), 0.5, dtype=lib.float64)
        return get(lib)(m, {"0.weight": z, "1.weight": z}, (lib.ones(1, 3, dtype=lib.float64),))

    tied_same.__name__ = f"fc_tied_same_{which}"
    case(tied_same)

    def kwargs(lib, get=get):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.l = lib.nn.Linear(3, 3).double()

            def forward(self, x, scale=1.0):
                return self.l(x) * scale

        m = M()
        return get(lib)(
            m,
            {"l.bias": lib.ones(3, dtype=lib.float64), "l.weight": lib.eye(3, dtype=lib.float64)},
            (lib.ones(1, 3, dtype=lib.float64),),
            {"scale": 3.0},
        )

    kwargs.__name__ = f"fc_kwargs_{which}"
    case(kwargs)

    def multi(lib, get=get):
        m = lin(lib)
        return get(lib)(
            m,
            (
                {"weight": lib.zeros(2, 3, dtype=lib.float64)},
                {"bias": lib.ones(2, dtype=lib.float64)},
            ),
            (lib.ones(1, 3, dtype=lib.float64),),
        )

    multi.__name__ = f"fc_tuple_of_dicts_{which}"
    if which == "func":
        case(multi)

    def multi_dup(lib, get=get):
        m = lin(lib)
        return get(lib)(
            m,
            (
                {"weight": lib.zeros(2, 3, dtype=lib.float64)},
                {"weight": lib.ones(2, 3, dtype=lib.float64)},
            ),
            (lib.ones(1, 3, dtype=lib.float64),),
        )

    multi_dup.__name__ = f"fc_tuple_dup_{which}"
    if which == "func":
        case(multi_dup)

    def restores_on_error(lib, get=get):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.l = lib.nn.Linear(3, 3).double()

            def forward(self, x):
                raise KeyError("boom")

        m = M()
        w0 = m.l.weight
        try:
            get(lib)(
                m,
                {"l.weight": lib.zeros(3, 3, dtype=lib.float64)},
                (lib.ones(1, 3, dtype=lib.float64),),
            )
        except KeyError:
            pass
        return [m.l.weight is w0]

    restores_on_error.__name__ = f"fc_restore_{which}"
    case(restores_on_error)

    def bn_buffers(lib, get=get):
        m = lib.nn.BatchNorm1d(3).double()
        rm = lib.zeros(3, dtype=lib.float64)
        rv = lib.ones(3, dtype=lib.float64)
        nb = lib.tensor(0)
        x = T(lib, rnd(4, 3))
        y = get(lib)(m, {"running_mean": rm, "running_var": rv, "num_batches_tracked": nb}, (x,))
        return [y, rm, rv, m.running_mean, nb]

    bn_buffers.__name__ = f"fc_bn_buffers_{which}"
    case(bn_buffers)

    def reparam(lib, get=get):
        m = lin(lib)
        lib.nn.utils.parametrize.register_parametrization(m, "weight", Sym(lib)())
        m2 = m
        w = T(lib, rnd(2, 3, seed=5))
        return [
            get(lib)(
                m2, {"parametrizations.weight.original": w}, (lib.ones(1, 3, dtype=lib.float64),)
            )
        ]

    reparam.__name__ = f"fc_parametrized_{which}"
    case(reparam)

    def strict_buf(lib, get=get):
        m = lib.nn.BatchNorm1d(3).double()
        get(lib)(
            m,
            {"weight": lib.ones(3, dtype=lib.float64), "bias": lib.ones(3, dtype=lib.float64)},
            (lib.ones(2, 3, dtype=lib.float64),),
            strict=True,
        )

    strict_buf.__name__ = f"fc_strict_buffers_missing_{which}"
    case(strict_buf)


def Sym(lib):
    class S(lib.nn.Module):
        def forward(self, w):
            return w * 2

    return S


@case
def fc_vmap_grad(lib):
    m = lin(lib)
    params = {k: v.detach() for k, v in m.named_parameters()}
    x = T(lib, rnd(4, 3, seed=6))

    def loss(p, xi):
        return lib.func.functional_call(m, p, (xi.unsqueeze(0),)).sum()

    g = lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0))(params, x)
    return [g["weight"], g["bias"]]


# ---------------------------- Unflatten's argument checks, in-place and double backward
for i, (dim, us) in enumerate(
    [
        (1, (2, 2, 2.0)),
        ("features", [["A", 2], ["B", 2]]),
        ("features", [("A", 2), ("B", 2)]),
        ("features", (["A", 2], ["B", 2])),
        ("features", ({"A": 2}, {"B": 2})),
        (1, [2, 2.0]),
    ]
):

    def f(lib, dim=dim, us=us):
        lib.nn.Unflatten(dim=dim, unflattened_size=us)

    f.__name__ = f"unflatten_invalid_{i}"
    case(f)


@case
def unflatten_named_ok(lib):
    m = lib.nn.Unflatten("features", (("C", 2), ("H", 3)))
    return [repr(m), m.dim, m.unflattened_size]


@case
def elu_inplace_on_view(lib):
    v = T(lib, np.array([1.0, -1.0, 1.0, -1.0]), True)

    def func(root):
        x = root.clone()
        view = x.narrow(0, 1, 2)
        res = lib.nn.functional.elu(view, inplace=True)
        assert res is view
        return x

    y = func(v)
    (y * T(lib, np.array([1.0, 2.0, 3.0, 4.0]))).sum().backward()
    return [y, v.grad]


@case
def elu_inplace_gradgrad(lib):
    v = T(lib, rnd(8), True)

    def func(root):
        x = root.clone()
        return lib.nn.functional.elu(x, inplace=True)

    y = func(v)
    (g,) = lib.autograd.grad(y.sum() ** 2, v, create_graph=True)
    (g2,) = lib.autograd.grad(g.sum(), v)
    return [y, g, g2]


@case
def celu_inplace_gradgrad(lib):
    v = T(lib, rnd(8), True)
    y = lib.nn.functional.celu(v * 1.0, alpha=0.5, inplace=True)
    (g,) = lib.autograd.grad((y**2).sum(), v, create_graph=True)
    (g2,) = lib.autograd.grad(g.sum(), v)
    return [np.round(npy(g), 6), np.round(npy(g2), 6)]


@case
def selu_gradgrad(lib):
    v = T(lib, rnd(8), True)
    y = lib.nn.SELU()(v)
    (g,) = lib.autograd.grad((y**2).sum(), v, create_graph=True)
    (g2,) = lib.autograd.grad(g.sum(), v)
    return [g, g2]


@case
def hardswish_grad_corner(lib):
    x = lib.tensor([-3.0, 3.0], dtype=lib.float64, requires_grad=True)
    y = lib.nn.functional.hardswish(x)
    y.sum().backward()
    return [y, np.round(npy(x.grad), 6)]


@case
def hardsigmoid_grad_corner(lib):
    x = lib.tensor([-3.0, 3.0], dtype=lib.float64, requires_grad=True)
    y = lib.nn.functional.hardsigmoid(x)
    y.sum().backward()
    return [y, x.grad]


@case
def hardshrink_grad_corner(lib):
    x = lib.tensor([-0.5, 0.5], dtype=lib.float64, requires_grad=True)
    y = lib.nn.functional.hardshrink(x, 0.5)
    y.sum().backward()
    z = lib.tensor([-0.5, 0.5], dtype=lib.float64, requires_grad=True)
    w = lib.nn.functional.softshrink(z, 0.5)
    w.sum().backward()
    return [y, x.grad, w, z.grad]


@case
def threshold_grad_corner(lib):
    x = lib.tensor([0.1, 0.2, 0.0], dtype=lib.float64, requires_grad=True)
    y = lib.nn.functional.threshold(x, 0.1, 5.0)
    y.sum().backward()
    return [y, x.grad]


@case
def mish_gradgrad(lib):
    v = T(lib, rnd(8) * 3, True)
    y = lib.nn.Mish()(v)
    (g,) = lib.autograd.grad((y**2).sum(), v, create_graph=True)
    (g2,) = lib.autograd.grad(g.sum(), v)
    return [g, g2]


@case
def logsigmoid_gradgrad(lib):
    v = T(lib, rnd(8) * 3, True)
    y = lib.nn.LogSigmoid()(v)
    (g,) = lib.autograd.grad((y**2).sum(), v, create_graph=True)
    (g2,) = lib.autograd.grad(g.sum(), v)
    return [g, g2]


@case
def glu_gradgrad(lib):
    v = T(lib, rnd(3, 4), True)
    y = lib.nn.GLU()(v)
    (g,) = lib.autograd.grad((y**2).sum(), v, create_graph=True)
    (g2,) = lib.autograd.grad(g.sum(), v)
    return [g, g2]


@case
def tanhshrink_gradgrad(lib):
    v = T(lib, rnd(8), True)
    y = lib.nn.Tanhshrink()(v)
    (g,) = lib.autograd.grad((y**3).sum(), v, create_graph=True)
    (g2,) = lib.autograd.grad(g.sum(), v)
    return [g, g2]


@case
def softmin_dim_none(lib):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = lib.nn.Softmin()
        return [m(T(lib, rnd(3, 4))), m(T(lib, rnd(2, 3, 4)))]


@case
def bilinear_gradgrad(lib):
    m = lib.nn.Bilinear(2, 3, 2).double()
    copy_params(lib, m, {"weight": rnd(2, 2, 3), "bias": rnd(2, seed=1)})
    a = T(lib, rnd(4, 2, seed=2), True)
    b = T(lib, rnd(4, 3, seed=3), True)
    y = m(a, b)
    ga, gb = lib.autograd.grad((y**2).sum(), (a, b), create_graph=True)
    (ga.sum() + (gb**2).sum()).backward()
    return [ga, gb, a.grad, b.grad, m.weight.grad, m.bias.grad]


@case
def pixel_shuffle_0_batch(lib):
    return lib.nn.PixelShuffle(2)(lib.ones(0, 4, 2, 2)).shape


@case
def upsample_nearest_3d_module(lib):
    x = T(lib, rnd(1, 1, 2, 2, 2), True)
    y = lib.nn.Upsample(scale_factor=(1, 2, 3))(x)
    (y * y).sum().backward()
    return [y, x.grad]


@case
def upsample_float_size_err(lib):
    return lib.nn.Upsample(size=4.5)(lib.ones(1, 1, 2))


@case
def fold_repr(lib):
    return [
        repr(lib.nn.Fold((4, 5), 2, dilation=1, padding=0, stride=1)),
        repr(lib.nn.Unfold(3, stride=2)),
    ]


@case
def adaptive_asm_div_value(lib):
    m = lib.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [5, 10], div_value=2.0)
    return [tuple(p.shape) for p in m.parameters()]


@case
def threshold_inplace_view(lib):
    v = T(lib, rnd(6), True)
    x = v.clone()
    view = x[1:4]
    r = lib.nn.functional.threshold_(view, 0.0, -1.0)
    (x * T(lib, np.arange(6.0))).sum().backward()
    return [x, v.grad, r is view]


# -------------------------------------------------------------------------- regressions
@case
def clipvalue_in_place(lib):
    ps = with_grads(lib)
    g0 = ps[0].grad
    U(lib).clip_grad_value_(ps, 0.5)
    return [ps[0].grad is g0, g0]


@case
def clip_with_norm_in_place(lib):
    ps = with_grads(lib)
    g0 = ps[1].grad
    U(lib).clip_grads_with_norm_(ps, 0.5, lib.tensor(4.0, dtype=lib.float64))
    return [ps[1].grad is g0, g0]


@case
def total_norm_mixed_dtype(lib):
    a = lib.full((3,), 1.1, dtype=lib.float32)
    b = lib.full((2,), 2.3, dtype=lib.float64)
    n = U(lib).get_total_norm([a, b])
    return [n, str(n.dtype).split(".")[-1]]


@case
def zeropad_refuses_value(lib):
    return lib.nn.ZeroPad2d(1, 5.0)


@case
def reflectionpad_refuses_value(lib):
    return lib.nn.ReflectionPad1d(1, 5.0)


@case
def constantpad_needs_value(lib):
    return lib.nn.ConstantPad1d(1)


@case
def threshold_int_inplace(lib):
    x = lib.tensor([-2, -1, 0, 3])
    y = lib.nn.Threshold(-1.5, -7.7, inplace=True)(x)
    return [y, x, y is x, str(y.dtype).split(".")[-1]]


@case
def skip_init_instance(lib):
    U(lib).skip_init(lib.nn.Linear(3, 2))


@case
def interpolate_float_size(lib):
    return lib.nn.functional.interpolate(lib.ones(1, 1, 2, 2), size=(3.0, 4))


# --------------------------------------------------------- shuffles, shapes, more activations
for i, g in enumerate([0, -1]):

    def f(lib, g=g):
        return lib.nn.ChannelShuffle(g)(lib.ones(1, 4, 2, 2))

    f.__name__ = f"chshuf_bad_{i}"
    case(f)

    def f2(lib, g=g):
        return lib.nn.functional.pixel_shuffle(lib.ones(1, 4, 2, 2), g)

    f2.__name__ = f"pxshuf_bad_{i}"
    case(f2)

    def f3(lib, g=g):
        return lib.nn.functional.pixel_unshuffle(lib.ones(1, 4, 2, 2), g)

    f3.__name__ = f"pxunshuf_bad_{i}"
    case(f3)


@case
def chshuf_functional(lib):
    return [
        lib.nn.functional.channel_shuffle(T(lib, rnd(1, 6, 2)), 2),
        lib.native_channel_shuffle(T(lib, rnd(1, 6, 2)), 3),
    ]


@case
def chshuf_2d_err(lib):
    return lib.nn.ChannelShuffle(2)(lib.ones(2, 4))


@case
def pixel_shuffle_nhwc(lib):
    x = T(lib, rnd(2, 8, 3, 4)).permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    return [lib.nn.PixelShuffle(2)(x), lib.nn.PixelUnshuffle(1)(x)]


@case
def flatten_neg(lib):
    x = T(lib, rnd(2, 3, 4))
    return [lib.nn.Flatten(-2, -1)(x), lib.nn.Flatten(1, 1)(x)]


@case
def flatten_bad(lib):
    return lib.nn.Flatten(2, 1)(lib.ones(2, 3, 4))


@case
def unflatten_neg_dim(lib):
    return lib.nn.Unflatten(-2, (2, 2))(T(lib, rnd(3, 4, 5)))


@case
def unflatten_two_minus_one(lib):
    return lib.nn.Unflatten(1, (-1, -1))(lib.ones(2, 4))


@case
def softmax2d_5d(lib):
    return lib.nn.Softmax2d()(lib.ones(1, 2, 3, 4, 5))


@case
def asm_predict_cluster(lib):
    m = lib.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 10, 15], div_value=2.0).double()
    rng = np.random.RandomState(0)
    with lib.no_grad():
        for p in m.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape))))
    x = lib.tensor(rng.standard_normal((64, 16)))
    return [m.predict(x), m.log_prob(x)]


@case
def asm_shape_info(lib):
    m = lib.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 10, 15], div_value=2.0)
    return [
        m.shortlist_size,
        m.n_clusters,
        m.head_size,
        m.cutoffs,
        len(m.tail),
        [tuple(p.shape) for p in m.tail.parameters()],
    ]


@case
def identity_grad(lib):
    x = T(lib, rnd(3), True)
    lib.nn.Identity(1, 2, a=3)(x).sum().backward()
    return x.grad


@case
def mish_inplace_leaf(lib):
    return lib.nn.Mish(inplace=True)(T(lib, rnd(3), True))


@case
def hardswish_inplace_leaf(lib):
    return lib.nn.Hardswish(inplace=True)(T(lib, rnd(3), True))


@case
def threshold_inplace_leaf(lib):
    return lib.nn.Threshold(0.1, 2.0, inplace=True)(T(lib, rnd(3), True))


@case
def rrelu_eval_inplace_grad(lib):
    a = T(lib, rnd(6), True)
    x = a * 1.0
    y = lib.nn.RReLU(0.1, 0.3, inplace=True).eval()(x)
    (y * y).sum().backward()
    return [y, a.grad]


@case
def glu_neg_dim(lib):
    x = T(lib, rnd(2, 3, 4), True)
    y = lib.nn.GLU(-1)(x)
    y.sum().backward()
    return [y, x.grad]


@case
def softmin_neg_dim_grad(lib):
    x = T(lib, rnd(2, 3, 4), True)
    y = lib.nn.Softmin(-2)(x)
    (y * y).sum().backward()
    return [y, x.grad]


@case
def logsigmoid_f32(lib):
    x = lib.tensor([-100.0, -10.0, 0.0, 10.0, 100.0], dtype=lib.float32)
    return lib.nn.LogSigmoid()(x)


@case
def cos_eps_tiny(lib):
    a = lib.tensor([[1e-9, 0.0]], dtype=lib.float64)
    b = lib.tensor([[1.0, 0.0]], dtype=lib.float64)
    return lib.nn.CosineSimilarity(eps=1e-8)(a, b)


@case
def pdist_eps(lib):
    a = T(lib, rnd(3, 4), True)
    y = lib.nn.PairwiseDistance(eps=0.5)(a, a)
    y.sum().backward()
    return [y, a.grad]


@case
def pdist_shape_err(lib):
    return lib.nn.PairwiseDistance()(lib.ones(3, 4), lib.ones(3, 5))


@case
def bilinear_int_input(lib):
    return lib.nn.Bilinear(2, 2, 1)(
        lib.ones(1, 2, dtype=lib.int64), lib.ones(1, 2, dtype=lib.int64)
    )


@case
def bilinear_dtype_mismatch(lib):
    return lib.nn.Bilinear(2, 2, 1)(lib.ones(1, 2, dtype=lib.float64), lib.ones(1, 2))


@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch(name: str) -> None:
    torch = pytest.importorskip("torch")
    f = CASES[name]
    t, g = _run(torch, f), _run(fg, f)
    if t[0] == "exc":
        assert g[0] == "exc", f"torch raised {t[1]!r}, ferrograd returned {g[1]!r}"
        assert isinstance(g[1], type(t[1])), f"torch raised {t[1]!r}, ferrograd {g[1]!r}"
    else:
        assert g[0] == "ok", f"ferrograd raised {g[1]!r}"
        _assert_same(t[1], g[1], 1e-6 if name in LOOSE else 1e-8)


# ------------------------------------------------------------------ finite differences


def _fd_cases() -> dict[str, tuple[Callable[[], Any], list[tuple[int, ...]]]]:
    nn = fg.nn
    return {
        "Bilinear": (lambda: nn.Bilinear(2, 3, 2).double(), [(3, 2), (3, 3)]),
        "Mish": (nn.Mish, [(7,)]),
        "LogSigmoid": (nn.LogSigmoid, [(7,)]),
        "Softshrink": (lambda: nn.Softshrink(0.3), [(7,)]),
        "Tanhshrink": (nn.Tanhshrink, [(7,)]),
        "GLU": (lambda: nn.GLU(1), [(2, 4, 3)]),
        "Softmin": (lambda: nn.Softmin(1), [(2, 5)]),
        "Softmax2d": (nn.Softmax2d, [(2, 3, 2, 2)]),
        "CosineSimilarity": (nn.CosineSimilarity, [(3, 4), (3, 4)]),
        "PairwiseDistance": (lambda: nn.PairwiseDistance(3.0), [(3, 4), (3, 4)]),
        "ELU": (lambda: nn.ELU(0.7), [(7,)]),
        "CELU": (lambda: nn.CELU(0.7), [(7,)]),
        "SELU": (nn.SELU, [(7,)]),
        "Hardswish": (nn.Hardswish, [(7,)]),
        "ReflectionPad2d": (lambda: nn.ReflectionPad2d((1, 2, 0, 1)), [(1, 2, 3, 4)]),
        "ReplicationPad3d": (lambda: nn.ReplicationPad3d(1), [(1, 1, 2, 2, 3)]),
        "CircularPad1d": (lambda: nn.CircularPad1d((2, 1)), [(2, 3, 4)]),
        "UpsampleBicubic": (lambda: nn.Upsample(scale_factor=1.5, mode="bicubic"), [(1, 1, 3, 3)]),
        "UpsamplingBilinear2d": (lambda: nn.UpsamplingBilinear2d(scale_factor=2), [(1, 2, 2, 3)]),
        "Fold": (lambda: nn.Fold((3, 4), 2), [(1, 4, 6)]),
        "PixelShuffle": (lambda: nn.PixelShuffle(2), [(1, 4, 2, 3)]),
    }


@pytest.mark.parametrize("name", list(_fd_cases()))
def test_gradients_match_finite_differences(name: str) -> None:
    ctor, shapes = _fd_cases()[name]
    m = ctor()
    rng = np.random.default_rng(3)
    # away from the kinks of the piecewise activations (|x| = 0.3, x = 0, x = +-3)
    xs = [
        fg.tensor(rng.uniform(0.4, 2.5, s) * rng.choice([-1.0, 1.0], s), requires_grad=True)
        for s in shapes
    ]
    assert fg.autograd.gradcheck(lambda *a: m(*a), tuple(xs))
    assert fg.autograd.gradgradcheck(lambda *a: m(*a), tuple(xs))


def test_adaptive_log_softmax_loss_gradient_matches_finite_differences() -> None:
    m = fg.nn.AdaptiveLogSoftmaxWithLoss(6, 9, [3, 6], div_value=2.0).double()
    x = fg.tensor(np.random.default_rng(0).standard_normal((5, 6)), requires_grad=True)
    target = fg.tensor([0, 2, 4, 7, 8])
    assert fg.autograd.gradcheck(lambda a: m(a, target).loss, (x,))


# ------------------------------------------------------------ deliberate differences


def test_elu_in_place_with_negative_alpha_backward_is_the_out_of_place_gradient() -> None:
    # PyTorch refuses this backward (it rebuilds the gradient from the output, which a
    # negative alpha makes ambiguous); ferrograd's gradient is that of the out-of-place elu
    torch = pytest.importorskip("torch")
    x0 = np.random.default_rng(1).standard_normal(8)
    a = fg.tensor(x0, requires_grad=True)
    fg.nn.functional.elu_(a * 1.0, alpha=-2.0).sum().backward()
    t = torch.tensor(x0, requires_grad=True)
    torch.nn.functional.elu(t, alpha=-2.0).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-12)


def test_padding_of_the_wrong_length_is_refused_at_construction() -> None:
    # PyTorch takes it and fails at the first call; ferrograd says so at once
    with pytest.raises(ValueError, match=r"ReflectionPad2d: padding must be an int or 4 ints"):
        fg.nn.ReflectionPad2d((1, 2, 3))
