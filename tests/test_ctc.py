"""CTC loss (``ctc_loss`` / ``CTCLoss``) against PyTorch's, values and gradients, plus
finite differences and argument checks."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.nn._ctc import CTCLoss, ctc_loss

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # pragma: no cover - torch is optional here
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")

REDUCTIONS = ("none", "sum", "mean")


# ----------------------------------------------------------------------------- helpers


def _log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def _min_frames(target: np.ndarray) -> int:
    """The fewest frames that can emit ``target``: one per label, plus a blank between
    each pair of equal neighbours."""
    return len(target) + int((target[1:] == target[:-1]).sum()) if len(target) else 0


def _case(seed, T=12, N=4, C=6, S=5, blank=0, min_in=None, repeats=False):
    """Random log-probs (T, N, C), padded targets (N, S) avoiding ``blank``, and lengths
    for which an alignment exists."""
    rng = np.random.default_rng(seed)
    lp = _log_softmax(rng.standard_normal((T, N, C)) * 2)
    labels = [c for c in range(C) if c != blank]
    if repeats:
        tg = rng.choice(labels[:2], size=(N, S))
    else:
        tg = rng.choice(labels, size=(N, S))
    tl = rng.integers(0, S + 1, N)
    tl[0] = S
    need = np.array([_min_frames(tg[b, : tl[b]]) for b in range(N)])
    lo = need if min_in is None else np.maximum(need, min_in)
    il = np.array([rng.integers(lo[b], T + 1) for b in range(N)])
    il[-1] = T
    return lp, tg, il, tl


def _ours(lp, tg, il, tl, dtype="float64", concat=False, weights=None, **kw):
    x = fg.tensor(lp.astype(dtype), requires_grad=True)
    if concat:
        tg = np.concatenate([tg[b, : tl[b]] for b in range(len(tl))]).astype(np.int64)
    loss = ctc_loss(x, fg.tensor(tg), fg.tensor(il), fg.tensor(tl), **kw)
    out = loss if weights is None or loss.ndim == 0 else loss * fg.tensor(weights.astype(dtype))
    out.sum().backward()
    return loss.numpy(), x.grad.numpy()


def _torch(lp, tg, il, tl, dtype="float64", concat=False, weights=None, **kw):
    x = torch.tensor(lp.astype(dtype), requires_grad=True)
    if concat:
        tg = np.concatenate([tg[b, : tl[b]] for b in range(len(tl))]).astype(np.int64)
    loss = TF.ctc_loss(x, torch.tensor(tg), torch.tensor(il), torch.tensor(tl), **kw)
    w = None if weights is None else torch.tensor(weights.astype(dtype))
    out = loss if w is None or loss.ndim == 0 else loss * w
    out.sum().backward()
    return loss.detach().numpy(), x.grad.numpy()


def _compare(lp, tg, il, tl, rtol=1e-9, atol=1e-12, dtype="float64", **kw):
    lo, go = _ours(lp, tg, il, tl, dtype=dtype, **kw)
    lt, gt = _torch(lp, tg, il, tl, dtype=dtype, **kw)
    assert lo.shape == lt.shape
    assert lo.dtype == lt.dtype
    np.testing.assert_allclose(lo, lt, rtol=rtol, atol=atol)
    np.testing.assert_allclose(go, gt, rtol=rtol, atol=atol)
    return lo, go


# --------------------------------------------------------------------- against PyTorch


@needs_torch
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("concat", [False, True])
def test_random_cases_float64_match_torch(seed, reduction, concat):
    lp, tg, il, tl = _case(seed, T=10 + seed, N=3 + seed % 3, C=5 + seed % 4, S=4)
    weights = np.random.default_rng(seed + 100).uniform(0.5, 2.0, len(tl))
    _compare(lp, tg, il, tl, reduction=reduction, concat=concat, weights=weights)


@needs_torch
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_float32_matches_torch(seed, reduction):
    lp, tg, il, tl = _case(seed, T=15, N=4, C=7, S=5)
    lo, go = _compare(lp, tg, il, tl, rtol=2e-5, atol=1e-5, dtype="float32", reduction=reduction)
    assert lo.dtype == np.float32 and go.dtype == np.float32


@needs_torch
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_repeated_labels(seed, reduction):
    lp, tg, il, tl = _case(seed, T=14, N=4, C=5, S=5, repeats=True)
    assert any(_min_frames(tg[b, : tl[b]]) > tl[b] for b in range(len(tl)))
    _compare(lp, tg, il, tl, reduction=reduction)


@needs_torch
def test_repeated_labels_tight_input_length():
    # "1 1" needs at least 3 frames (1 blank 1); exactly 3 is one path, 2 is impossible
    lp = _log_softmax(np.random.default_rng(0).standard_normal((4, 3, 3)))
    tg = np.array([[1, 1], [1, 1], [1, 2]])
    lo, _ = _compare(
        lp, tg, np.array([3, 2, 2]), np.array([2, 2, 2]), reduction="none", zero_infinity=True
    )
    assert lo[1] == 0.0 and np.isfinite(lo).all()
    lo, _ = _ours(lp, tg, np.array([3, 2, 2]), np.array([2, 2, 2]), reduction="none")
    assert np.isinf(lo[1]) and np.isfinite(lo[[0, 2]]).all()


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_target_length_zero(reduction):
    lp, tg, il, _ = _case(3, T=8, N=4, C=5, S=3)
    tl = np.array([0, 2, 0, 3])
    _compare(lp, tg, il, tl, reduction=reduction)
    _compare(lp, tg, il, tl, reduction=reduction, concat=True)
    tl0 = np.zeros(4, dtype=np.int64)
    _compare(lp, tg[:, :0], il, tl0, reduction=reduction)  # padded targets of width 0
    _compare(lp, tg, il, tl0, reduction=reduction, concat=True)  # empty 1-D targets


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_input_length_zero(reduction):
    lp, tg, _, _ = _case(4, T=6, N=3, C=4, S=2)
    il, tl = np.array([0, 6, 0]), np.array([0, 2, 1])
    lo, go = _ours(lp, tg, il, tl, reduction="none", zero_infinity=True)
    lt, gt = _torch(lp, tg, il, tl, reduction="none", zero_infinity=True)
    np.testing.assert_allclose(lo, lt, rtol=1e-12)
    np.testing.assert_allclose(go, gt, rtol=1e-9, atol=1e-12)
    _compare(lp, tg, il, tl, reduction=reduction, zero_infinity=True)


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_impossible_alignment_zero_infinity(reduction):
    lp, tg, il, tl = _case(5, T=10, N=4, C=6, S=4)
    il = il.copy()
    il[1] = max(tl[1] - 1, 0)  # too short for its target
    tl = tl.copy()
    tl[1] = max(tl[1], 2)
    il[1] = 1
    lo, go = _compare(lp, tg, il, tl, reduction=reduction, zero_infinity=True)
    assert np.isfinite(lo).all()
    assert (go[:, 1] == 0).all()  # the infinite sample contributes nothing
    assert (go[: il[0], 0] != 0).any()
    if reduction == "none":
        assert lo[1] == 0.0


@needs_torch
def test_impossible_alignment_without_zero_infinity():
    lp, tg, il, tl = _case(6, T=10, N=3, C=6, S=4)
    tl = np.array([4, 3, 2])
    il = np.array([10, 2, 9])
    for reduction in REDUCTIONS:
        lo, go = _ours(lp, tg, il, tl, reduction=reduction)
        lt, gt = _torch(lp, tg, il, tl, reduction=reduction)
        np.testing.assert_allclose(lo, lt, rtol=1e-9)  # inf where torch's is
        assert np.isinf(lo).any()
        # as PyTorch: NaN gradients over the frames of the infinite sample, the rest exact
        np.testing.assert_array_equal(np.isnan(go), np.isnan(gt))
        assert np.isnan(go[:2, 1]).all() and not np.isnan(go[2:, 1]).any()
        np.testing.assert_allclose(go[:, [0, 2]], gt[:, [0, 2]], rtol=1e-9, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_unbatched(reduction):
    lp, tg, il, tl = _case(7, T=9, N=1, C=5, S=3)
    lp2, t = lp[:, 0], tg[0, : tl[0]]
    x = fg.tensor(lp2, requires_grad=True)
    xt = torch.tensor(lp2, requires_grad=True)
    for ours_len, torch_len in (
        (
            (fg.tensor(int(il[0])), fg.tensor(int(tl[0]))),
            (torch.tensor(int(il[0])), torch.tensor(int(tl[0]))),
        ),
        (([int(il[0])], [int(tl[0])]), ([int(il[0])], [int(tl[0])])),
    ):
        x.grad, xt.grad = None, None
        lo = ctc_loss(x, fg.tensor(t), *ours_len, reduction=reduction)
        lt = TF.ctc_loss(xt, torch.tensor(t), *torch_len, reduction=reduction)
        assert tuple(lo.shape) == tuple(lt.shape) == ()
        np.testing.assert_allclose(lo.numpy(), lt.detach().numpy(), rtol=1e-12)
        lo.backward()
        lt.backward()
        assert tuple(x.grad.shape) == (9, 5)
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-12)
    # a (1, S) padded target row too, as PyTorch
    lo = ctc_loss(
        fg.tensor(lp2), fg.tensor(tg[:1]), [int(il[0])], [int(tl[0])], reduction=reduction
    )
    lt = TF.ctc_loss(
        torch.tensor(lp2), torch.tensor(tg[:1]), [int(il[0])], [int(tl[0])], reduction=reduction
    )
    np.testing.assert_allclose(lo.numpy(), lt.numpy(), rtol=1e-12)


@needs_torch
@pytest.mark.parametrize("blank", [2, 5])
def test_nonzero_blank(blank):
    lp, tg, il, tl = _case(8, T=12, N=3, C=6, S=4, blank=blank)
    for reduction in REDUCTIONS:
        _compare(lp, tg, il, tl, reduction=reduction, blank=blank)
        _compare(lp, tg, il, tl, reduction=reduction, blank=blank, concat=True)


@needs_torch
def test_target_equal_to_blank_and_padding_values():
    # PyTorch computes with a label equal to blank; entries past target_lengths are never read
    lp, tg, il, tl = _case(9, T=10, N=3, C=5, S=3)
    tg = tg.copy()
    tg[0, 1] = 0
    tl = np.array([3, 1, 2])
    _compare(lp, tg, il, tl, reduction="none")
    padded = tg.copy()
    padded[1, 1:] = -1
    padded[2, 2:] = 99
    lo, go = _ours(lp, padded, il, tl, reduction="none")
    lt, gt = _torch(lp, tg, il, tl, reduction="none")
    np.testing.assert_allclose(lo, lt, rtol=1e-12)
    np.testing.assert_allclose(go, gt, rtol=1e-9, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("seed", range(3))
def test_unnormalised_log_probs_match_torch(seed):
    # PyTorch's gradient is exp(log_probs) - posterior whether or not log_probs is normalised
    rng = np.random.default_rng(seed)
    _, tg, il, tl = _case(seed, T=9, N=3, C=5, S=3)
    lp = rng.standard_normal((9, 3, 5)) - 1.0
    for reduction in REDUCTIONS:
        _compare(lp, tg, il, tl, reduction=reduction)


@needs_torch
def test_length_arguments_in_every_form():
    lp, tg, il, tl = _case(10, T=8, N=3, C=5, S=3)
    want = TF.ctc_loss(
        torch.tensor(lp), torch.tensor(tg), torch.tensor(il), torch.tensor(tl)
    ).item()
    forms = [
        (fg.tensor(il), fg.tensor(tl)),
        (fg.tensor(il.astype(np.int32)), fg.tensor(tl.astype(np.int32))),
        (tuple(int(v) for v in il), tuple(int(v) for v in tl)),
        ([int(v) for v in il], [int(v) for v in tl]),
        (il, tl),
    ]
    for a, b in forms:
        got = ctc_loss(fg.tensor(lp), fg.tensor(tg.astype(np.int32)), a, b).item()
        assert got == pytest.approx(want, rel=1e-12)


@needs_torch
def test_module_matches_functional():
    lp, tg, il, tl = _case(11, T=10, N=3, C=6, S=4)
    for kw in (
        {},
        {"reduction": "sum"},
        {"reduction": "none", "zero_infinity": True},
        {"blank": 0},
    ):
        m = CTCLoss(**kw)
        assert isinstance(m, fg.nn.Module)
        got = m(fg.tensor(lp), fg.tensor(tg), fg.tensor(il), fg.tensor(tl)).numpy()
        want = torch.nn.CTCLoss(**kw)(
            torch.tensor(lp), torch.tensor(tg), torch.tensor(il), torch.tensor(tl)
        ).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12)
    m = CTCLoss()
    assert (m.blank, m.reduction, m.zero_infinity) == (0, "mean", False)
    with pytest.raises(ValueError):
        CTCLoss(reduction="avg")


@needs_torch
def test_log_inf_entries_give_finite_gradients():
    # a class of probability 0 (log-prob -inf): the loss is PyTorch's; the gradient there is
    # 0 (PyTorch's is NaN at exactly those entries), elsewhere PyTorch's
    lp, tg, il, tl = _case(12, T=8, N=2, C=5, S=2)
    lp = lp.copy()
    lp[2, 0, 4] = -np.inf
    lo, go = _ours(lp, tg, il, tl, reduction="sum")
    lt, gt = _torch(lp, tg, il, tl, reduction="sum")
    np.testing.assert_allclose(lo, lt, rtol=1e-12)
    ok = ~np.isnan(gt)
    assert ok.sum() == gt.size - 1 and go[2, 0, 4] == 0.0 and np.isfinite(go).all()
    np.testing.assert_allclose(go[ok], gt[ok], rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------------- finite differences


def _fd(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_finite_differences_through_log_softmax(reduction):
    # through a log_softmax PyTorch's gradient and autograd's of the formula coincide
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((5, 2, 4))
    tg, il, tl = np.array([[1, 1], [2, 3]]), [5, 4], [2, 2]

    def f(z):
        lp = fg.tensor(z).log_softmax(2)
        return float(ctc_loss(lp, fg.tensor(tg), il, tl, reduction=reduction).sum().item())

    z = fg.tensor(logits, requires_grad=True)
    ctc_loss(z.log_softmax(2), fg.tensor(tg), il, tl, reduction=reduction).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), _fd(f, logits), rtol=1e-6, atol=1e-8)


def test_gradient_is_exp_minus_posterior():
    # w.r.t. log_probs directly: finite differences of the formula give -posterior; the
    # returned gradient (PyTorch's) adds exp(log_probs) over each sample's frames
    rng = np.random.default_rng(1)
    lp = _log_softmax(rng.standard_normal((4, 2, 3)))
    tg, il, tl = np.array([[1, 2], [2, 2]]), [4, 3], [2, 1]

    def f(z):
        return float(ctc_loss(fg.tensor(z), fg.tensor(tg), il, tl, reduction="sum").item())

    x = fg.tensor(lp, requires_grad=True)
    ctc_loss(x, fg.tensor(tg), il, tl, reduction="sum").backward()
    frames = (np.arange(4)[:, None] < np.array(il)[None, :])[:, :, None]
    np.testing.assert_allclose(
        x.grad.numpy() - np.exp(lp) * frames, _fd(f, lp), rtol=1e-6, atol=1e-8
    )
    # over the classes the gradient sums to 0 within each input length, and is 0 after
    g = x.grad.numpy()
    np.testing.assert_allclose(g.sum(2)[frames[:, :, 0]], 0.0, atol=1e-12)
    assert (g[3, 1] == 0).all()


def test_known_value_single_path():
    # T = 1, target "1": the only path emits 1 at frame 0
    lp = np.log(np.array([[[0.2, 0.5, 0.3]]]))
    got = ctc_loss(fg.tensor(lp), fg.tensor([[1]]), [1], [1], reduction="none").numpy()
    np.testing.assert_allclose(got, [-np.log(0.5)], rtol=1e-12)
    # empty target: every frame blank
    lp = np.log(np.full((3, 1, 2), 0.5))
    got = ctc_loss(fg.tensor(lp), fg.tensor(np.zeros((1, 0), np.int64)), [3], [0], reduction="sum")
    assert got.item() == pytest.approx(3 * np.log(2), rel=1e-12)


def test_float32_dtype_and_no_grad():
    lp, tg, il, tl = _case(13, T=6, N=2, C=4, S=2)
    out = ctc_loss(fg.tensor(lp.astype(np.float32)), fg.tensor(tg), il, tl)
    assert out.dtype == np.float32 and out.ndim == 0
    with fg.no_grad():
        out = ctc_loss(fg.tensor(lp, requires_grad=True), fg.tensor(tg), il, tl, reduction="none")
    assert out.shape == (2,) and np.isfinite(out.numpy()).all()


# ---------------------------------------------------------------------------- errors


def _err(exc, match, *args, **kw):
    with pytest.raises(exc, match=match) as info:
        ctc_loss(*args, **kw)
    assert "ctc_loss" in str(info.value)
    return info.value


def test_errors():
    lp = fg.tensor(_log_softmax(np.random.default_rng(0).standard_normal((5, 2, 4))))
    tg = fg.tensor([[1, 2], [3, 3]])
    il, tl = [5, 5], [2, 1]
    # log_probs
    _err(ValueError, "log_probs", fg.tensor(np.zeros(5)), tg, il, tl)
    _err(ValueError, "log_probs", fg.tensor(np.zeros((1, 5, 2, 4))), tg, il, tl)
    _err(ValueError, "log_probs", fg.tensor(np.zeros((0, 2, 4))), tg, [0, 0], [0, 0])
    _err(TypeError, "log_probs", fg.tensor(np.zeros((5, 2, 4), np.int64)), tg, il, tl)
    _err(TypeError, "log_probs", np.zeros((5, 2, 4)), tg, il, tl)
    # blank
    for blank in (-1, 4):
        e = _err(ValueError, "blank", lp, tg, il, tl, blank=blank)
        assert isinstance(e, RuntimeError)
    # lengths
    e = _err(ValueError, "input_lengths", lp, tg, [6, 5], tl)
    assert isinstance(e, RuntimeError)
    _err(ValueError, "input_lengths", lp, tg, [-1, 5], tl)
    _err(ValueError, "target_lengths", lp, tg, il, [-1, 1])
    _err(ValueError, "input_lengths", lp, tg, [5], tl)
    _err(ValueError, "target_lengths", lp, tg, il, [2, 1, 1])
    _err(TypeError, "input_lengths", lp, tg, fg.tensor([5.0, 5.0]), tl)
    _err(TypeError, "target_lengths", lp, tg, il, [2.5, 1])
    # targets
    e = _err(ValueError, "targets", lp, tg, il, [3, 1])  # longer than the padded width
    assert isinstance(e, RuntimeError)
    _err(ValueError, "targets", lp, fg.tensor([[1, 2]]), il, tl)  # one row for two samples
    _err(ValueError, "targets", lp, fg.tensor([1, 2, 3, 1]), il, tl)  # 1-D: 4 != 3
    _err(ValueError, "targets", lp, fg.tensor([1, 2]), il, tl)
    _err(ValueError, "targets", lp, fg.tensor(np.ones((2, 2, 2), np.int64)), il, tl)
    _err(ValueError, "targets", lp, fg.tensor([[1, 7], [3, 3]]), il, tl)  # label >= C
    _err(ValueError, "targets", lp, fg.tensor([[1, -1], [3, 3]]), il, tl)
    # reduction
    _err(ValueError, "reduction", lp, tg, il, tl, reduction="avg")
    # unbatched: 1-D targets are the concatenation of one target, as PyTorch
    _err(ValueError, "targets", fg.tensor(np.zeros((5, 4))), fg.tensor([1, 2, 3]), [5], [2])


@needs_torch
def test_last_label_equal_to_blank():
    # PyTorch computes a target ending in the blank's label (its docs forbid it): the loss
    # is PyTorch's; at each such sample's last frame PyTorch's backward overwrites instead of
    # adding one term, so there the gradient here is the exact one (finite differences)
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((5, 2, 3))
    lp = _log_softmax(logits)
    tg, il, tl = np.array([[2, 0], [1, 2]]), np.array([5, 4]), np.array([2, 2])
    lo, go = _ours(lp, tg, il, tl, reduction="sum")
    lt, gt = _torch(lp, tg, il, tl, reduction="sum")
    np.testing.assert_allclose(lo, lt, rtol=1e-12)
    keep = np.ones(go.shape, bool)
    keep[4, 0] = False
    np.testing.assert_allclose(go[keep], gt[keep], rtol=1e-9, atol=1e-12)
    assert not np.allclose(go[4, 0], gt[4, 0])

    def f(z):
        x = fg.tensor(z).log_softmax(2)
        return float(ctc_loss(x, fg.tensor(tg), il, tl, reduction="sum").item())

    z = fg.tensor(logits, requires_grad=True)
    ctc_loss(z.log_softmax(2), fg.tensor(tg), il, tl, reduction="sum").backward()
    np.testing.assert_allclose(z.grad.numpy(), _fd(f, logits), rtol=1e-6, atol=1e-8)


def test_traced_matches_eager():
    rng = np.random.default_rng(4)
    lp = _log_softmax(rng.standard_normal((6, 2, 4)))
    tg = [[1, 2], [3, 3]]

    @fg.trace
    def step(x, il, zero_infinity):
        x = x.detach().requires_grad_()
        loss = ctc_loss(x, tg, il, [2, 2], reduction="none", zero_infinity=zero_infinity)
        (g,) = fg.grad(loss.sum(), [x])
        return loss, g

    for il in ([6, 6], [6, 1]):
        for zi in (False, True):
            x = fg.tensor(lp, requires_grad=True)
            want = ctc_loss(x, tg, il, [2, 2], reduction="none", zero_infinity=zi)
            want.sum().backward()
            for _ in range(2):  # the trace, then the replayed graph
                loss, g = step(fg.tensor(lp), il, zi)
                np.testing.assert_allclose(loss.numpy(), want.numpy(), rtol=1e-12)
                np.testing.assert_allclose(g.numpy(), x.grad.numpy(), rtol=1e-12, atol=1e-15)
