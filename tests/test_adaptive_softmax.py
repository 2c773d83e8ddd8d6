"""``nn.AdaptiveLogSoftmaxWithLoss`` against PyTorch's: state dicts both ways, forward's
output and loss (batched and unbatched), ``log_prob``, ``predict``, the gradients of the
loss wrt the input and every parameter, and the argument checks."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")

# PyTorch warns when it initialises the zero-width projections (in_features // div_value**k == 0)
pytestmark = pytest.mark.filterwarnings("ignore:Initializing zero-element tensors")

RTOL = 1e-10
ATOL = 1e-12

# (in_features, n_classes, cutoffs, div_value)
CONFIGS = [
    (8, 10, [3, 6], 4.0),
    (16, 20, [5], 2.0),
    (12, 30, [4, 10, 20], 2.0),
    (8, 10, [1, 2, 3], 4.0),  # zero-width projections (8 // 64 == 0)
    (6, 7, [6], 1.5),
]


def _pair(cfg, head_bias, seed=0):
    in_features, n_classes, cutoffs, div_value = cfg
    torch.manual_seed(seed)
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(
        in_features, n_classes, cutoffs, div_value=div_value, head_bias=head_bias
    ).double()
    # random weights of some scale, so the argmax of predict leaves the shortlist too
    with torch.no_grad():
        for p in tm.parameters():
            p.normal_(0, 1.0)
    fm = fg.nn.AdaptiveLogSoftmaxWithLoss(
        in_features,
        n_classes,
        cutoffs,
        div_value=div_value,
        head_bias=head_bias,
        dtype=fg.float64,
    )
    assert list(fm.state_dict().keys()) == list(tm.state_dict().keys())
    fm.load_state_dict({k: fg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return tm, fm


def _close(a, b, rtol=RTOL):
    if a is None:  # a parameter torch's loss does not reach: no gradient, or zeros
        assert b is None or not np.any(b.numpy())
        return
    a = np.asarray(a.detach().numpy() if hasattr(a, "detach") else a)
    b = np.asarray(b.numpy() if hasattr(b, "numpy") else b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(b, a, rtol=rtol, atol=ATOL)


def _targets(rng, n, n_classes, cutoffs):
    """Targets covering the shortlist and every cluster (then shuffled)."""
    edges = [0, *cutoffs, n_classes]
    picks = [rng.integers(lo, hi) for lo, hi in zip(edges[:-1], edges[1:])]
    rest = rng.integers(0, n_classes, max(n - len(picks), 0))
    t = np.concatenate([np.array(picks, dtype=np.int64), rest])[:n]
    return rng.permutation(t)


@pytest.mark.parametrize("head_bias", [False, True])
@pytest.mark.parametrize("cfg", CONFIGS)
def test_forward_backward_matches_torch(cfg, head_bias):
    tm, fm = _pair(cfg, head_bias)
    in_features, n_classes, cutoffs, _ = cfg
    rng = np.random.default_rng(1)
    x = rng.standard_normal((9, in_features))
    t = _targets(rng, 9, n_classes, cutoffs)

    tx = torch.tensor(x, requires_grad=True)
    tout = tm(tx, torch.tensor(t))
    tout.loss.backward()

    fx = fg.tensor(x, requires_grad=True)
    fout = fm(fx, fg.tensor(t))
    assert type(fout).__name__ == "_ASMoutput"
    assert fout._fields == ("output", "loss")
    _close(tout.output, fout.output)
    _close(tout.loss, fout.loss)
    out, loss = fout
    assert out is fout.output and loss is fout.loss
    fout.loss.backward()

    _close(tx.grad, fx.grad)
    fparams = dict(fm.named_parameters())
    for name, p in tm.named_parameters():
        _close(p.grad, fparams[name].grad)


@pytest.mark.parametrize("head_bias", [False, True])
@pytest.mark.parametrize("cfg", CONFIGS)
def test_log_prob_and_predict_match_torch(cfg, head_bias):
    tm, fm = _pair(cfg, head_bias, seed=3)
    in_features = cfg[0]
    x = np.random.default_rng(2).standard_normal((40, in_features)) * 2

    tlp = tm.log_prob(torch.tensor(x))
    flp = fm.log_prob(fg.tensor(x))
    _close(tlp, flp)
    np.testing.assert_allclose(np.exp(flp.numpy()).sum(1), 1.0, rtol=1e-12)

    tp = tm.predict(torch.tensor(x))
    fp = fm.predict(fg.tensor(x))
    np.testing.assert_array_equal(fp.numpy(), tp.numpy())
    assert str(fp.dtype) == "int64"
    # both the "all in the shortlist" and "all in clusters" paths, too
    for rows in (tp.numpy() < fm.shortlist_size, tp.numpy() >= fm.shortlist_size):
        if rows.any():
            sub = x[rows]
            np.testing.assert_array_equal(
                fm.predict(fg.tensor(sub)).numpy(), tm.predict(torch.tensor(sub)).numpy()
            )


def test_log_prob_gradients_match_torch():
    tm, fm = _pair(CONFIGS[2], True, seed=5)
    x = np.random.default_rng(4).standard_normal((6, 12))
    w = np.random.default_rng(5).standard_normal((6, 30))
    tx = torch.tensor(x, requires_grad=True)
    (tm.log_prob(tx) * torch.tensor(w)).sum().backward()
    fx = fg.tensor(x, requires_grad=True)
    (fm.log_prob(fx) * fg.tensor(w)).sum().backward()
    _close(tx.grad, fx.grad)
    fparams = dict(fm.named_parameters())
    for name, p in tm.named_parameters():
        _close(p.grad, fparams[name].grad)


@pytest.mark.parametrize("head_bias", [False, True])
def test_unbatched_matches_torch(head_bias):
    tm, fm = _pair(CONFIGS[0], head_bias)
    x = np.random.default_rng(6).standard_normal(8)
    for target in (1, 4, 9):
        tm.zero_grad()
        fm.zero_grad()
        tx = torch.tensor(x, requires_grad=True)
        tout = tm(tx, torch.tensor(target))
        tout.loss.backward()
        fx = fg.tensor(x, requires_grad=True)
        fout = fm(fx, fg.tensor(np.array(target)))
        assert fout.output.shape == () and fout.loss.shape == ()
        _close(tout.output, fout.output)
        _close(tout.loss, fout.loss)
        fout.loss.backward()
        _close(tx.grad, fx.grad)
        fparams = dict(fm.named_parameters())
        for name, p in tm.named_parameters():
            _close(p.grad, fparams[name].grad)


def test_batch_of_one_and_shortlist_only():
    tm, fm = _pair(CONFIGS[1], False)
    x = np.random.default_rng(7).standard_normal((1, 16))
    for t in ([3], [17]):
        tout = tm(torch.tensor(x), torch.tensor(t))
        fout = fm(fg.tensor(x), fg.tensor(np.array(t)))
        assert fout.output.shape == (1,)
        _close(tout.output, fout.output)
        _close(tout.loss, fout.loss)
    x = np.random.default_rng(8).standard_normal((5, 16))
    t = np.array([0, 1, 2, 3, 4])
    _close(tm(torch.tensor(x), torch.tensor(t)).loss, fm(fg.tensor(x), fg.tensor(t)).loss)


def test_state_dict_loads_into_torch():
    in_features, n_classes, cutoffs, div_value = CONFIGS[2]
    fm = fg.nn.AdaptiveLogSoftmaxWithLoss(
        in_features, n_classes, cutoffs, div_value=div_value, head_bias=True, dtype=fg.float64
    )
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(
        in_features, n_classes, cutoffs, div_value=div_value, head_bias=True
    ).double()
    sd = {k: torch.from_numpy(np.array(v.numpy())) for k, v in fm.state_dict().items()}
    tm.load_state_dict(sd)  # strict: same names and shapes
    x = np.random.default_rng(9).standard_normal((7, in_features))
    _close(tm.log_prob(torch.tensor(x)), fm.log_prob(fg.tensor(x)))


def test_attributes_and_structure():
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, (3, 6), head_bias=True)
    fm = fg.nn.AdaptiveLogSoftmaxWithLoss(8, 10, (3, 6), head_bias=True)
    for name in (
        "in_features",
        "n_classes",
        "cutoffs",
        "div_value",
        "head_bias",
        "shortlist_size",
        "n_clusters",
        "head_size",
    ):
        assert getattr(fm, name) == getattr(tm, name), name
    assert isinstance(fm.head, fg.nn.Linear)
    assert isinstance(fm.tail, fg.nn.ModuleList)
    assert all(isinstance(s, fg.nn.Sequential) for s in fm.tail)
    assert {k: tuple(v.shape) for k, v in fm.state_dict().items()} == {
        k: tuple(v.shape) for k, v in tm.state_dict().items()
    }
    assert repr(fm) == repr(tm)
    from ferrograd.nn.modules.adaptive import AdaptiveLogSoftmaxWithLoss

    assert AdaptiveLogSoftmaxWithLoss is fg.nn.AdaptiveLogSoftmaxWithLoss
    before = {k: np.array(v.numpy()) for k, v in fm.state_dict().items()}
    fm.reset_parameters()
    after = fm.state_dict()
    assert any(not np.array_equal(before[k], after[k].numpy()) for k in before if before[k].size)
    for k, v in after.items():
        fan_in = 8 if k.startswith("head") or k.endswith(".0.weight") else 2
        assert np.all(np.abs(v.numpy()) <= 1 / np.sqrt(fan_in) + 1e-7), k


@pytest.mark.parametrize(
    "args",
    [
        (8, 10, []),
        (8, 10, [3, 3]),
        (8, 10, [0, 3]),
        (8, 10, [-1, 3]),
        (8, 10, [3, 10]),
        (8, 10, [5, 3]),
        (8, 10, [2.5]),
        (8, 10, [3], 0.0),
        (-1, 10, [3]),
        (8, 10, 5),
    ],
)
def test_constructor_errors_match_torch(args):
    with pytest.raises(Exception) as texc:
        torch.nn.AdaptiveLogSoftmaxWithLoss(*args)
    with pytest.raises(texc.type) as fexc:
        fg.nn.AdaptiveLogSoftmaxWithLoss(*args)
    if texc.type is ValueError:
        assert str(fexc.value) == str(texc.value)


def _forward_error_cases():
    x2 = np.zeros((4, 8))
    return [
        (x2, np.array([0, 1, 2])),  # batch sizes differ
        (np.zeros((4, 2, 8)), np.array([0, 1, 2, 3])),  # 1D target, 3D input
        (x2, np.array(1)),  # 0D target, 2D input
        (x2, np.zeros((4, 1), dtype=np.int64)),  # multi-target
        (x2, np.array([0, 1, 10, 2])),  # target too large
        (x2, np.array([0, -1, 3, 2])),  # negative target
    ]


@pytest.mark.parametrize("case", range(len(_forward_error_cases())))
def test_forward_errors_match_torch(case):
    x, t = _forward_error_cases()[case]
    tm, fm = _pair(CONFIGS[0], False)
    with pytest.raises(RuntimeError) as texc:
        tm(torch.tensor(x), torch.tensor(t))
    with pytest.raises(RuntimeError) as fexc:
        fm(fg.tensor(x), fg.tensor(t))
    assert str(fexc.value).replace("torch.Size", "") == str(texc.value).replace("torch.Size", "")


def test_log_prob_and_predict_1d_input_errors():
    tm, fm = _pair(CONFIGS[0], False)
    x = np.zeros(8)
    for meth in ("log_prob", "predict"):
        with pytest.raises(IndexError):
            getattr(tm, meth)(torch.tensor(x))
        with pytest.raises(IndexError):
            getattr(fm, meth)(fg.tensor(x))
