"""fg.nn.functional: gradients against finite differences in float64 (no PyTorch needed) and
values and gradients against torch.nn.functional where PyTorch is installed."""

from __future__ import annotations

import math

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest
from conftest import check_grad


def rnd(*shape, seed=0, lo=-2.0, hi=2.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def labels(n, c, seed=0):
    return fg.tensor(np.random.default_rng(seed).integers(0, c, n))


# every case: name -> (fg function of float64 tensors, torch function or None, input arrays)
CASES = {
    "gelu": (F.gelu, lambda t, x: t.nn.functional.gelu(x), [rnd(3, 4)]),
    "gelu_tanh": (
        lambda x: F.gelu(x, approximate="tanh"),
        lambda t, x: t.nn.functional.gelu(x, approximate="tanh"),
        [rnd(3, 4)],
    ),
    "leaky_relu": (
        lambda x: F.leaky_relu(x, 0.2),
        lambda t, x: t.nn.functional.leaky_relu(x, 0.2),
        [rnd(3, 4)],
    ),
    "elu": (lambda x: F.elu(x, 0.7), lambda t, x: t.nn.functional.elu(x, 0.7), [rnd(3, 4)]),
    "hardtanh": (
        lambda x: F.hardtanh(x, -0.5, 1.5),
        lambda t, x: t.nn.functional.hardtanh(x, -0.5, 1.5),
        [rnd(3, 4)],
    ),
    "softplus_beta": (
        lambda x: F.softplus(x, beta=2.0, threshold=3.0),
        lambda t, x: t.nn.functional.softplus(x, beta=2.0, threshold=3.0),
        [rnd(3, 4)],
    ),
    "logsigmoid": (F.logsigmoid, lambda t, x: t.nn.functional.logsigmoid(x), [rnd(3, 4)]),
    "linear": (
        F.linear,
        lambda t, x, w, b: t.nn.functional.linear(x, w, b),
        [rnd(2, 3, 4), rnd(5, 4, seed=1), rnd(5, seed=2)],
    ),
    "layer_norm": (
        lambda x, w, b: F.layer_norm(x, (4,), w, b),
        lambda t, x, w, b: t.nn.functional.layer_norm(x, (4,), w, b),
        [rnd(2, 3, 4), rnd(4, seed=1), rnd(4, seed=2)],
    ),
    "layer_norm_2d": (
        lambda x: F.layer_norm(x, (3, 4)),
        lambda t, x: t.nn.functional.layer_norm(x, (3, 4)),
        [rnd(2, 3, 4)],
    ),
    "group_norm": (
        lambda x, w, b: F.group_norm(x, 2, w, b),
        lambda t, x, w, b: t.nn.functional.group_norm(x, 2, w, b),
        [rnd(2, 4, 3, 2), rnd(4, seed=1), rnd(4, seed=2)],
    ),
    "batch_norm_train": (
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        lambda t, x, w, b: t.nn.functional.batch_norm(x, None, None, w, b, training=True),
        [rnd(4, 3, 2, 2), rnd(3, seed=1), rnd(3, seed=2)],
    ),
    "sdpa": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
        lambda t, q, k, v: t.nn.functional.scaled_dot_product_attention(q, k, v),
        [rnd(2, 3, 4), rnd(2, 5, 4, seed=1), rnd(2, 5, 3, seed=2)],
    ),
    "sdpa_causal": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        lambda t, q, k, v: t.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
        [rnd(2, 4, 4), rnd(2, 4, 4, seed=1), rnd(2, 4, 3, seed=2)],
    ),
    "mse": (
        F.mse_loss,
        lambda t, x, y: t.nn.functional.mse_loss(x, y),
        [rnd(3, 4), rnd(3, 4, seed=1)],
    ),
    "l1_sum": (
        lambda x, y: F.l1_loss(x, y, reduction="sum"),
        lambda t, x, y: t.nn.functional.l1_loss(x, y, reduction="sum"),
        [rnd(3, 4), rnd(3, 4, seed=1)],
    ),
    "smooth_l1": (
        lambda x, y: F.smooth_l1_loss(x, y, beta=0.5),
        lambda t, x, y: t.nn.functional.smooth_l1_loss(x, y, beta=0.5),
        [rnd(3, 4), rnd(3, 4, seed=1)],
    ),
    "huber": (
        lambda x, y: F.huber_loss(x, y, delta=0.7, reduction="none"),
        lambda t, x, y: t.nn.functional.huber_loss(x, y, delta=0.7, reduction="none"),
        [rnd(3, 4), rnd(3, 4, seed=1)],
    ),
    "bce": (
        lambda p: F.binary_cross_entropy(p, fg.tensor(rnd(3, 4, seed=5, lo=0, hi=1))),
        lambda t, p: t.nn.functional.binary_cross_entropy(
            p, t.tensor(rnd(3, 4, seed=5, lo=0, hi=1))
        ),
        [rnd(3, 4, lo=0.05, hi=0.95)],
    ),
    "bce_logits": (
        lambda x, pw: F.binary_cross_entropy_with_logits(
            x, fg.tensor(rnd(3, 4, seed=5, lo=0, hi=1)), pos_weight=pw
        ),
        lambda t, x, pw: t.nn.functional.binary_cross_entropy_with_logits(
            x, t.tensor(rnd(3, 4, seed=5, lo=0, hi=1)), pos_weight=pw
        ),
        [rnd(3, 4), rnd(4, seed=3, lo=0.5, hi=2)],
    ),
    "kl_div": (
        lambda x: F.kl_div(
            x, fg.tensor(np.array([[0.2, 0.0, 0.8], [0.5, 0.25, 0.25]])), reduction="batchmean"
        ),
        lambda t, x: t.nn.functional.kl_div(
            x, t.tensor(np.array([[0.2, 0.0, 0.8], [0.5, 0.25, 0.25]])), reduction="batchmean"
        ),
        [rnd(2, 3)],
    ),
    "nll": (
        lambda x: F.nll_loss(x, fg.tensor([0, 2, 1, 2])),
        lambda t, x: t.nn.functional.nll_loss(x, t.tensor([0, 2, 1, 2])),
        [rnd(4, 3)],
    ),
    "cross_entropy_fused": (
        lambda x: F.cross_entropy(x, fg.tensor([0, 2, 1, 2])),
        lambda t, x: t.nn.functional.cross_entropy(x, t.tensor([0, 2, 1, 2])),
        [rnd(4, 3)],
    ),
    "cross_entropy_ignore_smooth": (
        lambda x: F.cross_entropy(x, fg.tensor([0, -100, 1, 2]), label_smoothing=0.1),
        lambda t, x: t.nn.functional.cross_entropy(
            x, t.tensor([0, -100, 1, 2]), label_smoothing=0.1
        ),
        [rnd(4, 3)],
    ),
    "cross_entropy_weight_smooth": (
        lambda x, w: F.cross_entropy(
            x, fg.tensor([0, 3, 1, 2]), weight=w, ignore_index=3, label_smoothing=0.2
        ),
        lambda t, x, w: t.nn.functional.cross_entropy(
            x, t.tensor([0, 3, 1, 2]), weight=w, ignore_index=3, label_smoothing=0.2
        ),
        [rnd(4, 4), rnd(4, seed=4, lo=0.5, hi=2)],
    ),
    "cross_entropy_spatial_sum": (
        lambda x: F.cross_entropy(x, fg.tensor([[0, 2], [1, 1]]), reduction="sum"),
        lambda t, x: t.nn.functional.cross_entropy(x, t.tensor([[0, 2], [1, 1]]), reduction="sum"),
        [rnd(2, 3, 2)],
    ),
    "cross_entropy_probs": (
        lambda x: F.cross_entropy(
            x, fg.tensor(np.array([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])), label_smoothing=0.1
        ),
        lambda t, x: t.nn.functional.cross_entropy(
            x, t.tensor(np.array([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])), label_smoothing=0.1
        ),
        [rnd(2, 3)],
    ),
    "adaptive_avg_pool2d": (
        lambda x: F.adaptive_avg_pool2d(x, (2, 3)),
        lambda t, x: t.nn.functional.adaptive_avg_pool2d(x, (2, 3)),
        [rnd(1, 2, 5, 7)],
    ),
    "adaptive_avg_pool2d_even": (
        lambda x: F.adaptive_avg_pool2d(x, 2),
        lambda t, x: t.nn.functional.adaptive_avg_pool2d(x, 2),
        [rnd(2, 2, 4, 4)],
    ),
    "interpolate_nearest": (
        lambda x: F.interpolate(x, size=(5, 3)),
        lambda t, x: t.nn.functional.interpolate(x, size=(5, 3)),
        [rnd(1, 2, 3, 4)],
    ),
    "interpolate_nearest_scale": (
        lambda x: F.interpolate(x, scale_factor=2),
        lambda t, x: t.nn.functional.interpolate(x, scale_factor=2),
        [rnd(1, 2, 3, 2)],
    ),
    "interpolate_bilinear": (
        lambda x: F.interpolate(x, size=(5, 6), mode="bilinear"),
        lambda t, x: t.nn.functional.interpolate(x, size=(5, 6), mode="bilinear"),
        [rnd(1, 2, 3, 4)],
    ),
    "interpolate_bilinear_corners": (
        lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True),
        lambda t, x: t.nn.functional.interpolate(
            x, scale_factor=2, mode="bilinear", align_corners=True
        ),
        [rnd(1, 1, 3, 3)],
    ),
    "interpolate_linear": (
        lambda x: F.interpolate(x, size=7, mode="linear"),
        lambda t, x: t.nn.functional.interpolate(x, size=7, mode="linear"),
        [rnd(2, 2, 4)],
    ),
    "pixel_shuffle": (
        lambda x: F.pixel_shuffle(x, 2),
        lambda t, x: t.nn.functional.pixel_shuffle(x, 2),
        [rnd(1, 8, 2, 3)],
    ),
    "pixel_unshuffle": (
        lambda x: F.pixel_unshuffle(x, 2),
        lambda t, x: t.nn.functional.pixel_unshuffle(x, 2),
        [rnd(1, 2, 4, 6)],
    ),
    "conv1d": (
        lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1),
        lambda t, x, w, b: t.nn.functional.conv1d(x, w, b, stride=2, padding=1),
        [rnd(2, 3, 7), rnd(4, 3, 3, seed=1), rnd(4, seed=2)],
    ),
    "conv_transpose2d": (
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
        lambda t, x, w, b: t.nn.functional.conv_transpose2d(
            x, w, b, stride=2, padding=1, output_padding=1
        ),
        [rnd(1, 2, 3, 3), rnd(2, 3, 3, 3, seed=1), rnd(3, seed=2)],
    ),
    "conv_transpose2d_groups_dilation": (
        lambda x, w: F.conv_transpose2d(x, w, groups=2, dilation=2),
        lambda t, x, w: t.nn.functional.conv_transpose2d(x, w, groups=2, dilation=2),
        [rnd(1, 4, 3, 2), rnd(4, 1, 2, 2, seed=1)],
    ),
    "embedding_padding": (
        lambda w: F.embedding(fg.tensor([[0, 2], [1, 2]]), w, padding_idx=2),
        lambda t, w: t.nn.functional.embedding(t.tensor([[0, 2], [1, 2]]), w, padding_idx=2),
        [rnd(3, 4)],
    ),
    "embedding": (
        lambda w: F.embedding(fg.tensor([[0, 2], [1, 2]]), w),
        lambda t, w: t.nn.functional.embedding(t.tensor([[0, 2], [1, 2]]), w),
        [rnd(3, 4)],
    ),
    "pad_reflect": (
        lambda x: F.pad(x, (2, 1, 1, 1), mode="reflect"),
        lambda t, x: t.nn.functional.pad(x, (2, 1, 1, 1), mode="reflect"),
        [rnd(1, 2, 3, 4)],
    ),
    "normalize": (F.normalize, lambda t, x: t.nn.functional.normalize(x), [rnd(3, 4)]),
}


# inputs PyTorch does not differentiate (it raises when they require grad)
TORCH_CONSTANT = {"bce_logits": {1}, "cross_entropy_weight_smooth": {1}}
# the padding row of an embedding gets no gradient by design (as PyTorch), so finite
# differences do not apply; the comparison with PyTorch covers it
NOT_FD = {"embedding_padding"}


@pytest.mark.parametrize("name", sorted(set(CASES) - NOT_FD))
def test_grad_finite_differences(name):
    fn, _, arrays = CASES[name]
    check_grad(fn, arrays)


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_torch(name):
    torch = pytest.importorskip("torch")
    fn, tfn, arrays = CASES[name]
    xs = [fg.tensor(a) for a in arrays]
    const = TORCH_CONSTANT.get(name, set())
    ts = [torch.tensor(a, requires_grad=i not in const) for i, a in enumerate(arrays)]
    y = fn(*xs)
    ty = tfn(torch, *ts)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    w = np.random.default_rng(9).uniform(0.5, 1.5, tuple(y.shape))
    key = fg.GradKey()
    xs = [fg.tensor(a) for a in arrays]
    for x in xs:
        key.attach(x)
    key.backward((fn(*xs) * fg.tensor(w)).sum())
    (ty * torch.tensor(w)).sum().backward()
    for i, (x, t) in enumerate(zip(xs, ts)):
        if i in const:
            continue
        expect = t.grad.numpy() if t.grad is not None else np.zeros(t.shape)
        got = x.grad.numpy() if x.grad is not None else np.zeros(x.shape)
        np.testing.assert_allclose(got, expect, rtol=1e-10, atol=1e-12)


def test_batch_norm_running_stats_and_eval():
    x = rnd(8, 3, 2, 2)
    rm, rv = fg.zeros(3, dtype="float64"), fg.ones(3, dtype="float64")
    F.batch_norm(fg.tensor(x), rm, rv, training=True, momentum=0.1)
    mean = x.mean(axis=(0, 2, 3))
    var = x.var(axis=(0, 2, 3), ddof=1)
    np.testing.assert_allclose(rm.numpy(), 0.1 * mean)
    np.testing.assert_allclose(rv.numpy(), 0.9 + 0.1 * var)
    y = F.batch_norm(fg.tensor(x), rm, rv, training=False).numpy()
    expect = (x - rm.numpy()[:, None, None]) / np.sqrt(rv.numpy()[:, None, None] + 1e-5)
    np.testing.assert_allclose(y, expect)


def test_dropout_statistics_and_modes():
    fg.manual_seed(3)
    x = fg.ones(20000)
    y = F.dropout(x, 0.25).numpy()
    assert set(np.unique(y)) == {0.0, np.float32(1 / 0.75)}
    assert abs((y == 0).mean() - 0.25) < 0.02
    assert F.dropout(x, 0.25, training=False) is x
    assert F.dropout(x, 1.0).numpy().max() == 0
    fg.manual_seed(3)
    np.testing.assert_array_equal(F.dropout(x, 0.25).numpy(), y)  # reproducible
    # the gradient is the same mask, scaled
    key = fg.GradKey()
    z = fg.ones(1000, dtype="float64")
    key.attach(z)
    out = F.dropout(z, 0.5)
    key.backward(out.sum())
    np.testing.assert_array_equal(z.grad.numpy(), out.numpy())
    with pytest.raises(ValueError, match="dropout: p"):
        F.dropout(x, 1.5)


def test_sdpa_masks_and_gelu_reference():
    q, k, v = (fg.tensor(rnd(1, 3, 2, seed=s)) for s in range(3))
    mask = fg.tensor(np.array([[True, False, True], [True, True, False], [False, True, True]]))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).numpy()
    s = q.numpy() @ k.numpy().transpose(0, 2, 1) / math.sqrt(2)
    s = np.where(mask.numpy(), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(out, p @ v.numpy(), rtol=1e-12)
    x = rnd(50)
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(
        F.gelu(fg.tensor(x)).numpy(), x * 0.5 * (1 + erf(x / math.sqrt(2))), rtol=1e-12
    )


def test_cross_entropy_matches_fused_and_bad_input():
    x = fg.tensor(rnd(5, 4))
    y = labels(5, 4)
    fused = fg.cross_entropy(x, y).item()
    manual = F.nll_loss(x.log_softmax(1), y).item()
    assert fused == pytest.approx(manual, rel=1e-12)
    with pytest.raises(fg.ShapeError, match="cross_entropy"):
        F.cross_entropy(x, fg.tensor([0, 1]))
    with pytest.raises(IndexError, match="nll_loss: target 7"):
        F.nll_loss(x, fg.tensor([0, 1, 7, 0, 0]))
    with pytest.raises(ValueError, match="reduction"):
        F.mse_loss(x, x, reduction="avg")
    with pytest.raises(fg.ShapeError, match="linear"):
        F.linear(x, fg.zeros(3, 3, dtype="float64"))
    with pytest.raises(ValueError, match="interpolate"):
        F.interpolate(fg.zeros(1, 1, 2, 2), size=3, scale_factor=2)


def test_layer_norm_fused_float32_and_second_order_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    # float32 rows of 512 (the fused kernel's accumulation) against torch
    x = rng.standard_normal((6, 7, 512)).astype(np.float32) * 3 + 1
    w, b = rng.standard_normal(512).astype(np.float32), rng.standard_normal(512).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    X, W, B = (fg.tensor(a) for a in (x, w, b))
    gm = fg.GradManager().attach([X, W, B])
    with gm:
        y = F.layer_norm(X, (512,), W, B)
        gm.backward(y, fg.tensor(g))
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    yt = torch.nn.functional.layer_norm(xt, (512,), wt, bt)
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), atol=2e-5)
    for mine, theirs in ((X, xt), (W, wt), (B, bt)):
        np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=1e-4, atol=2e-4)
    # a gradient of a gradient through layer_norm (nested managers), float64
    x = rng.standard_normal((3, 4, 5))
    w, b, g = rng.standard_normal((4, 5)), rng.standard_normal((4, 5)), rng.standard_normal(x.shape)
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    yt = torch.nn.functional.layer_norm(xt, (4, 5), wt, bt)
    (gxt,) = torch.autograd.grad(yt, xt, torch.tensor(g), create_graph=True)
    (gxt**2).sum().backward()
    X, W, B = (fg.tensor(a) for a in (x, w, b))
    outer, inner = fg.GradManager().attach([X, W]), fg.GradManager().attach([X])
    with outer:
        with inner:
            inner.backward(F.layer_norm(X, (4, 5), W, B), fg.tensor(g))
        gx, X.grad = X.grad, None
        outer.backward((gx**2).sum())
    np.testing.assert_allclose(gx.numpy(), gxt.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(X.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(W.grad.numpy(), wt.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
@pytest.mark.parametrize("shape", [(3, 13), (600, 517)])
def test_layer_norm_affine_forms_and_views_against_torch(affine, shape):
    # the fused op with and without its affine part, on a transposed (non-contiguous) input,
    # rows whose length is not a multiple of the vector width, and (600 x 517) enough rows
    # for the threaded path; float64 against torch
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    cols = shape[1]
    x = rng.standard_normal(shape[::-1]) * 2 + 0.5
    w, b = rng.standard_normal(cols), rng.standard_normal(cols)
    g = rng.standard_normal(shape)
    X = fg.tensor(x)
    W = fg.tensor(w) if affine in ("both", "weight") else None
    B = fg.tensor(b) if affine in ("both", "bias") else None
    params = [t for t in (X, W, B) if t is not None]
    gm = fg.GradManager().attach(params)
    with gm:
        y = F.layer_norm(X.T, (cols,), W, B)
        gm.backward(y, fg.tensor(g))
    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(w, requires_grad=True) if W is not None else None
    bt = torch.tensor(b, requires_grad=True) if B is not None else None
    yt = torch.nn.functional.layer_norm(xt.T, (cols,), wt, bt)
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
    for mine, theirs in zip(params, [t for t in (xt, wt, bt) if t is not None]):
        assert mine.grad is not None and mine.grad.shape == tuple(theirs.shape)
        np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=1e-9, atol=1e-10)


def test_layer_norm_weight_dtype_mismatch_and_frozen_affine():
    x = fg.tensor(np.ones((2, 4), np.float32))
    with pytest.raises(fg.DTypeError, match="layer_norm"):
        fg._core._layer_norm(x, fg.ones(4, dtype="float64"), fg.zeros(4), 1e-5)
    with pytest.raises(fg.ShapeError, match="weight"):
        fg._core._layer_norm(x, fg.ones(5), fg.zeros(4), 1e-5)
    # weight and bias that need no gradient (frozen): only the input's gradient arrives
    rng = np.random.default_rng(2)
    X = fg.tensor(rng.standard_normal((5, 6)))
    W, B = fg.tensor(rng.standard_normal(6)), fg.tensor(rng.standard_normal(6))
    gm = fg.GradManager().attach([X])
    with gm:
        gm.backward(F.layer_norm(X, (6,), W, B).sum())
    assert W.grad is None and B.grad is None
    gx = X.grad.numpy()
    X.grad = None
    gm = fg.GradManager().attach([X, W, B])
    with gm:
        gm.backward(F.layer_norm(X, (6,), W, B).sum())
    np.testing.assert_array_equal(gx, X.grad.numpy())
    np.testing.assert_allclose(B.grad.numpy(), np.full(6, 5.0))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "L,S,E,Ev", [(150, 130, 16, 24), (70, 200, 8, 8), (5, 3, 4, 2), (1, 1, 3, 3)]
)
def test_fused_attention_against_torch(L, S, E, Ev, causal):
    # the fused op (blocks of 64 query rows, causal blocks reading only the keys they may
    # see), with L != S either way, on (2, 3) heads, and key as a transposed view; float64
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(L + S)
    q, v = rng.standard_normal((2, 3, L, E)), rng.standard_normal((2, 3, S, Ev))
    kt = rng.standard_normal((2, 3, E, S))
    g = rng.standard_normal((2, 3, L, Ev))
    Q, KT, V = fg.tensor(q), fg.tensor(kt), fg.tensor(v)
    gm = fg.GradManager().attach([Q, KT, V])
    with gm:
        y = F.scaled_dot_product_attention(Q, KT.transpose(-1, -2), V, is_causal=causal)
        gm.backward(y, fg.tensor(g))
    qt, ktt, vt = (torch.tensor(a, requires_grad=True) for a in (q, kt, v))
    yt = torch.nn.functional.scaled_dot_product_attention(
        qt, ktt.transpose(-1, -2), vt, is_causal=causal
    )
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
    for mine, theirs in ((Q, qt), (KT, ktt), (V, vt)):
        np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=1e-9, atol=1e-11)


def test_fused_attention_float32_scale_and_second_order_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    q, k, v = (rng.standard_normal((4, 96, 32)).astype(np.float32) for _ in range(3))
    g = rng.standard_normal((4, 96, 32)).astype(np.float32)
    Q, K, V = (fg.tensor(a) for a in (q, k, v))
    gm = fg.GradManager().attach([Q, K, V])
    with gm:
        y = F.scaled_dot_product_attention(Q, K, V, is_causal=True, scale=0.3)
        gm.backward(y, fg.tensor(g))
    qt, kt, vt = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    yt = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=True, scale=0.3)
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    for mine, theirs in ((Q, qt), (K, kt), (V, vt)):
        np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=1e-3, atol=1e-4)
    # a gradient of a gradient through the fused op (nested managers), float64
    q, k, v = (rng.standard_normal((2, 5, 4)) for _ in range(3))
    g = rng.standard_normal((2, 5, 4))
    qt, kt, vt = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    # (torch's fused CPU kernel has no double backward: its math form)
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    scores = (qt @ kt.transpose(-1, -2) / 2.0).masked_fill(~mask, float("-inf"))
    yt = scores.softmax(-1) @ vt
    gqt, gkt = torch.autograd.grad(yt, (qt, kt), torch.tensor(g), create_graph=True)
    ((gqt**2).sum() + (gkt * vt).sum()).backward()
    Q, K, V = (fg.tensor(a) for a in (q, k, v))
    outer, inner = fg.GradManager().attach([Q, K, V]), fg.GradManager().attach([Q, K])
    with outer:
        with inner:
            inner.backward(F.scaled_dot_product_attention(Q, K, V, is_causal=True), fg.tensor(g))
        gq, gk = Q.grad, K.grad
        Q.grad = K.grad = None
        outer.backward((gq**2).sum() + (gk * V).sum())
    np.testing.assert_allclose(gq.numpy(), gqt.detach().numpy(), rtol=1e-10, atol=1e-12)
    for mine, theirs in ((Q, qt), (K, kt), (V, vt)):
        np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=1e-9, atol=1e-11)


def test_fused_attention_bad_shapes_raise():
    q = fg.zeros(2, 4, 8)
    with pytest.raises(fg.ShapeError, match="scaled_dot_product_attention"):
        fg._core._attention(q, fg.zeros(3, 4, 8), fg.zeros(3, 4, 8), 1.0, False)
    with pytest.raises(fg.ShapeError, match="scaled_dot_product_attention"):
        fg._core._attention(q, fg.zeros(2, 4, 7), fg.zeros(2, 4, 8), 1.0, False)
    with pytest.raises(fg.DTypeError, match="scaled_dot_product_attention"):
        fg._core._attention(q, fg.zeros(2, 4, 8, dtype="float64"), fg.zeros(2, 4, 8), 1.0, False)
    # broadcast leading axes take the composed path and still work
    y = F.scaled_dot_product_attention(q, fg.zeros(1, 4, 8), fg.zeros(1, 4, 8))
    assert y.shape == (2, 4, 8)


def test_cross_entropy_fused_float32_and_second_order_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((300, 37)) * 4).astype(np.float32)
    y = rng.integers(0, 37, 300)
    X = fg.tensor(x)
    gm = fg.GradManager().attach([X])
    with gm:
        loss = F.cross_entropy(X, fg.tensor(y))
        gm.backward(loss * 3.0)
    xt = torch.tensor(x, requires_grad=True)
    lt = torch.nn.functional.cross_entropy(xt, torch.tensor(y))
    (lt * 3.0).backward()
    assert abs(loss.item() - lt.item()) < 1e-5
    np.testing.assert_allclose(X.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-7)
    # the gradient of a gradient (nested managers), float64
    x, y = rng.standard_normal((5, 4)), rng.integers(0, 4, 5)
    xt = torch.tensor(x, requires_grad=True)
    (gt,) = torch.autograd.grad(
        torch.nn.functional.cross_entropy(xt, torch.tensor(y)), xt, create_graph=True
    )
    (gt**3).sum().backward()
    X = fg.tensor(x)
    outer, inner = fg.GradManager().attach([X]), fg.GradManager().attach([X])
    with outer:
        with inner:
            inner.backward(F.cross_entropy(X, fg.tensor(y)))
        g, X.grad = X.grad, None
        outer.backward((g**3).sum())
    np.testing.assert_allclose(g.numpy(), gt.detach().numpy(), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(X.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-14)
