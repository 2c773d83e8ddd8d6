"""Parity with PyTorch of resampling and orthogonality helpers: ``F.interpolate`` in
``mode="area"`` (1-D/2-D/3-D), ``F.grid_sample`` (bicubic on 4-D, bilinear/nearest on 5-D),
``nn.utils.parametrizations.orthogonal`` and ``nn.init.trunc_normal_`` with a generator.
Values and gradients (w.r.t. every float input) on identical float64 inputs, plus central
finite differences of the ferrograd gradients for a few cases."""

from __future__ import annotations

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest
from ferrograd.nn.utils import parametrizations as FP


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _np(t):
    return np.asarray(t.detach().numpy())


def _grad(t, like):
    g = t.grad
    return np.zeros(like.shape) if g is None else np.asarray(g.numpy())


def _compare(torch, fn_t, fn_f, *arrays, seed=0, atol=1e-10):
    """Values of ``fn(*arrays)`` and the gradients of a random projection of the output
    w.r.t. every input, torch against ferrograd."""
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    fs = [fg.tensor(a, requires_grad=True) for a in arrays]
    yt, yf = fn_t(*ts), fn_f(*fs)
    assert tuple(yt.shape) == tuple(yf.shape)
    np.testing.assert_allclose(_np(yf), _np(yt), atol=atol, rtol=1e-9)
    w = np.random.default_rng(seed).standard_normal(tuple(yt.shape))
    (yt * torch.tensor(w)).sum().backward()
    (yf * fg.tensor(w)).sum().backward()
    for a, t, f in zip(arrays, ts, fs):
        assert (f.grad is None) == (t.grad is None)
        np.testing.assert_allclose(_grad(f, a), _grad(t, a), atol=1e-9, rtol=1e-8)


def _finite_diff(fn, arrays, index, w, eps=1e-6, n=6, seed=1):
    """A few entries of d(sum(w * fn))/d(arrays[index]) by central differences, with the
    ferrograd gradient."""
    ins = [fg.tensor(a, requires_grad=True) for a in arrays]
    (fn(*ins) * fg.tensor(w)).sum().backward()
    g = _grad(ins[index], arrays[index]).reshape(-1)
    rng = np.random.default_rng(seed)
    for j in rng.choice(arrays[index].size, size=min(n, arrays[index].size), replace=False):
        vals = []
        for s in (eps, -eps):
            moved = [a.copy() for a in arrays]
            moved[index].reshape(-1)[j] += s
            vals.append(float((_np(fn(*[fg.tensor(a) for a in moved])) * w).sum()))
        np.testing.assert_allclose(g[j], (vals[0] - vals[1]) / (2 * eps), atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------- interpolate, area

AREA_CASES = [
    ((2, 3, 7), {"size": 3}),
    ((2, 3, 7), {"size": (4,)}),
    ((2, 3, 7), {"scale_factor": 0.5}),
    ((2, 3, 7), {"scale_factor": 1.6}),
    ((2, 3, 5, 7), {"size": (3, 4)}),
    ((2, 3, 5, 7), {"size": 9}),
    ((2, 3, 5, 7), {"scale_factor": 0.5}),
    ((2, 3, 5, 7), {"scale_factor": (0.6, 1.7)}),
    ((2, 3, 5, 7), {"scale_factor": 0.5, "recompute_scale_factor": True}),
    ((2, 3, 5, 6, 7), {"size": (3, 4, 2)}),
    ((2, 3, 5, 6, 7), {"size": (7, 9, 10)}),
    ((1, 2, 4, 6, 8), {"size": 2}),
    ((2, 3, 5, 6, 7), {"scale_factor": 0.5}),
    ((2, 3, 5, 6, 7), {"scale_factor": (0.5, 1.5, 0.7)}),
    ((2, 3, 5, 6, 7), {"scale_factor": 0.4, "recompute_scale_factor": True}),
]


@pytest.mark.parametrize(("shape", "kw"), AREA_CASES)
def test_interpolate_area_matches_torch(torch, shape, kw):
    x = np.random.default_rng(0).standard_normal(shape)
    _compare(
        torch,
        lambda t: torch.nn.functional.interpolate(t, mode="area", **kw),
        lambda t: F.interpolate(t, mode="area", **kw),
        x,
    )


def test_interpolate_area_5d_finite_differences():
    x = np.random.default_rng(2).standard_normal((1, 2, 5, 4, 3))
    w = np.random.default_rng(3).standard_normal((1, 2, 3, 3, 2))
    _finite_diff(lambda t: F.interpolate(t, size=(3, 3, 2), mode="area"), [x], 0, w)


# ----------------------------------------------------------------------------- grid_sample

PADS = ["zeros", "border", "reflection"]


@pytest.mark.parametrize("padding_mode", PADS)
@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("spread", [1.1, 2.6])
def test_grid_sample_bicubic_matches_torch(torch, padding_mode, align_corners, spread):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 5, 6))
    g = rng.uniform(-spread, spread, (2, 4, 7, 2))
    kw = {"mode": "bicubic", "padding_mode": padding_mode, "align_corners": align_corners}
    _compare(
        torch,
        lambda a, b: torch.nn.functional.grid_sample(a, b, **kw),
        lambda a, b: F.grid_sample(a, b, **kw),
        x,
        g,
    )


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", PADS)
@pytest.mark.parametrize("align_corners", [True, False])
def test_grid_sample_5d_matches_torch(torch, mode, padding_mode, align_corners):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 4, 5, 6))
    g = rng.uniform(-1.4, 1.4, (2, 3, 4, 5, 3))
    kw = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}
    _compare(
        torch,
        lambda a, b: torch.nn.functional.grid_sample(a, b, **kw),
        lambda a, b: F.grid_sample(a, b, **kw),
        x,
        g,
    )


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_4d_still_matches_torch(torch, mode):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 5, 7))
    g = rng.uniform(-1.2, 1.2, (2, 4, 5, 2))
    for pm in PADS:
        kw = {"mode": mode, "padding_mode": pm, "align_corners": False}
        _compare(
            torch,
            lambda a, b, kw=kw: torch.nn.functional.grid_sample(a, b, **kw),
            lambda a, b, kw=kw: F.grid_sample(a, b, **kw),
            x,
            g,
        )


@pytest.mark.parametrize(
    ("mode", "shape", "gshape"),
    [("bicubic", (1, 2, 4, 5), (1, 3, 3, 2)), ("bilinear", (1, 2, 3, 4, 5), (1, 2, 2, 3, 3))],
)
def test_grid_sample_finite_differences(mode, shape, gshape):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape)
    g = rng.uniform(-0.9, 0.9, gshape)
    w = rng.standard_normal((shape[0], shape[1], *gshape[1:-1]))

    def fn(a, b):
        return F.grid_sample(a, b, mode=mode, padding_mode="reflection", align_corners=False)

    _finite_diff(fn, [x, g], 0, w)
    _finite_diff(fn, [x, g], 1, w)


def test_grid_sample_bad_inputs():
    # (bicubic on a 5-D input is tricubic, as PyTorch 2.x documents it)
    x5 = fg.tensor(np.zeros((1, 1, 2, 2, 2)))
    with pytest.raises(Exception):  # noqa: B017 (a grid of the wrong rank)
        F.grid_sample(x5, fg.tensor(np.zeros((1, 1, 1, 2))))


# ---------------------------------------------------------------------------- orthogonal

MAPS = [None, "matrix_exp", "cayley", "householder"]


def _linears(torch, w):
    lt = torch.nn.Linear(w.shape[1], w.shape[0]).double()
    lf = fg.nn.Linear(w.shape[1], w.shape[0]).to(dtype="float64")
    with torch.no_grad():
        lt.weight.copy_(torch.tensor(w))
    with fg.no_grad():
        lf.weight.copy_(fg.tensor(w).astype(lf.weight.dtype.name))
    return lt, lf


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
@pytest.mark.parametrize("orthogonal_map", MAPS)
@pytest.mark.parametrize("use_trivialization", [True, False])
def test_orthogonal_matches_torch(torch, shape, orthogonal_map, use_trivialization):
    rng = np.random.default_rng(8)
    w = rng.standard_normal(shape)
    lt, lf = _linears(torch, w)
    square = shape[0] == shape[1]
    exp_like = orthogonal_map in ("matrix_exp", "cayley") or (orthogonal_map is None and square)
    torch.nn.utils.parametrizations.orthogonal(
        lt, "weight", orthogonal_map, use_trivialization=use_trivialization
    )
    FP.orthogonal(lf, "weight", orthogonal_map, use_trivialization=use_trivialization)
    pt, pf = lt.parametrizations.weight, lf.parametrizations.weight
    # forward values at registration (independent of the random completion of the base)
    np.testing.assert_allclose(_np(lf.weight), _np(lt.weight), atol=1e-8)
    np.testing.assert_allclose(_np(pf.original), _np(pt.original), atol=1e-8)
    wf = _np(lf.weight)
    k = min(shape)
    gram = wf.T @ wf if shape[0] >= shape[1] else wf @ wf.T
    np.testing.assert_allclose(gram, np.eye(k), atol=1e-6)
    if use_trivialization:
        assert tuple(pf[0].base.shape) == tuple(pt[0].base.shape)
        with fg.no_grad():  # the same completion of a non-square base
            pf[0].base.copy_(fg.tensor(_np(pt[0].base)))
    # a training step away from the start: values and gradients
    step = rng.standard_normal(shape) * 0.3
    with torch.no_grad():
        pt.original.add_(torch.tensor(step))
    with fg.no_grad():
        pf.original.copy_(fg.tensor(_np(pf.original) + step).astype(pf.original.dtype.name))
    np.testing.assert_allclose(_np(lf.weight), _np(lt.weight), atol=1e-8)
    g = rng.standard_normal(shape)
    (lt.weight * torch.tensor(g)).sum().backward()
    (lf.weight * fg.tensor(g)).sum().backward()
    np.testing.assert_allclose(
        np.asarray(pf.original.grad.numpy()), pt.original.grad.numpy(), atol=1e-8
    )
    # assigning a weight (right_inverse)
    w2 = rng.standard_normal(shape)
    if exp_like and not use_trivialization:
        # (these maps cannot be inverted; registering keeps the weight as the original)
        with pytest.raises(NotImplementedError), torch.no_grad():
            lt.weight = torch.tensor(w2)
        with pytest.raises(NotImplementedError):
            lf.weight = fg.tensor(w2)
        return
    with torch.no_grad():
        lt.weight = torch.tensor(w2)
    lf.weight = fg.tensor(w2)
    np.testing.assert_allclose(_np(lf.weight), _np(lt.weight), atol=1e-8)
    np.testing.assert_allclose(_np(pf.original), _np(pt.original), atol=1e-8)


@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
def test_orthogonal_batched_matches_torch(torch, orthogonal_map):
    rng = np.random.default_rng(9)
    w = rng.standard_normal((2, 4, 4))
    mt = torch.nn.Module()
    mt.register_parameter("weight", torch.nn.Parameter(torch.tensor(w)))
    mf = fg.nn.Module()
    mf.register_parameter("weight", fg.nn.Parameter(fg.tensor(w)))
    torch.nn.utils.parametrizations.orthogonal(mt, "weight", orthogonal_map)
    FP.orthogonal(mf, "weight", orthogonal_map)
    np.testing.assert_allclose(_np(mf.weight), _np(mt.weight), atol=1e-8)
    step = rng.standard_normal(w.shape) * 0.3
    with torch.no_grad():
        mt.parametrizations.weight.original.add_(torch.tensor(step))
    with fg.no_grad():
        o = mf.parametrizations.weight.original
        o.copy_(fg.tensor(_np(o) + step))
    (mt.weight**2 * torch.tensor(step)).sum().backward()
    (mf.weight**2 * fg.tensor(step)).sum().backward()
    np.testing.assert_allclose(_np(mf.weight), _np(mt.weight), atol=1e-8)
    np.testing.assert_allclose(
        np.asarray(mf.parametrizations.weight.original.grad.numpy()),
        mt.parametrizations.weight.original.grad.numpy(),
        atol=1e-8,
    )


@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
def test_orthogonal_finite_differences(orthogonal_map):
    rng = np.random.default_rng(10)
    shape = (4, 3)
    base = np.linalg.qr(rng.standard_normal((4, 4)))[0]
    x0 = rng.standard_normal(shape) * 0.3 - np.eye(*shape)
    w = rng.standard_normal(shape)
    lin = fg.nn.Linear(3, 4).to(dtype="float64")
    FP.orthogonal(lin, "weight", orthogonal_map)
    orth = lin.parametrizations.weight[0]
    with fg.no_grad():
        orth.base.copy_(fg.tensor(base))
    _finite_diff(lambda x: orth(x), [x0], 0, w)


def test_orthogonal_bad_arguments(torch):
    for mod, P in (
        (torch.nn.Linear(3, 3), torch.nn.utils.parametrizations),
        (fg.nn.Linear(3, 3), FP),
    ):
        with pytest.raises(ValueError, match="orthogonal_map"):
            P.orthogonal(mod, "weight", "qr")
        with pytest.raises(ValueError, match="matrix"):
            P.orthogonal(mod, "bias")


# ------------------------------------------------------------------- trunc_normal_ generator


def test_trunc_normal_generator():
    fg.manual_seed(0)
    ref = fg.randn(4).numpy()
    fg.manual_seed(0)
    outs = []
    for _ in range(2):
        gen = fg.Generator().manual_seed(123)
        t = fg.zeros(200, dtype="float64")
        fg.nn.init.trunc_normal_(t, mean=0.5, std=2.0, a=-1.0, b=1.5, generator=gen)
        outs.append(t.numpy())
    np.testing.assert_array_equal(outs[0], outs[1])
    assert outs[0].min() >= -1.0
    assert outs[0].max() <= 1.5
    assert len(np.unique(outs[0])) == 200
    # the global stream was not consumed
    np.testing.assert_array_equal(fg.randn(4).numpy(), ref)
    other = fg.zeros(200, dtype="float64")
    fg.nn.init.trunc_normal_(other, 0.5, 2.0, -1.0, 1.5, generator=fg.Generator().manual_seed(7))
    assert not np.array_equal(other.numpy(), outs[0])


def test_trunc_normal_generator_torch_semantics(torch):
    # torch: the same contract (same seed, same values; the global stream untouched)
    torch.manual_seed(0)
    ref = torch.randn(4)
    torch.manual_seed(0)
    a = torch.nn.init.trunc_normal_(
        torch.empty(50), 0.0, 1.0, -0.5, 0.5, generator=torch.Generator().manual_seed(3)
    )
    b = torch.nn.init.trunc_normal_(
        torch.empty(50), 0.0, 1.0, -0.5, 0.5, generator=torch.Generator().manual_seed(3)
    )
    assert torch.equal(a, b)
    assert torch.equal(torch.randn(4), ref)
    fa = fg.nn.init.trunc_normal_(
        fg.zeros(50), 0.0, 1.0, -0.5, 0.5, generator=fg.Generator().manual_seed(3)
    )
    assert float(fa.abs().max().item()) <= 0.5


@pytest.mark.parametrize("orthogonal_map", MAPS)
def test_orthogonal_trains_and_keys_match_torch(torch, orthogonal_map):
    lt = torch.nn.Linear(3, 6)
    torch.nn.utils.parametrizations.orthogonal(lt, "weight", orthogonal_map)
    lf = fg.nn.Linear(3, 6)
    FP.orthogonal(lf, "weight", orthogonal_map)
    assert sorted(lf.state_dict()) == sorted(lt.state_dict())
    opt = fg.optim.SGD(lf.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        (lf(fg.randn(5, 3)) ** 2).sum().backward()
        opt.step()
    w = _np(lf.weight).astype(np.float64)
    np.testing.assert_allclose(w.T @ w, np.eye(3), atol=1e-5)
