"""PyTorch's normalization-layer checks (test_nn.py, test/nn/) run on ferrograd and on
torch from the same float64 weights: outputs, first and second order gradients, running
statistics, error cases and the module helpers."""

from __future__ import annotations

import warnings
from typing import Any

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)

# (class name, constructor args, constructor keywords, input shape)
CASES: list[tuple[str, tuple, dict, tuple]] = [
    ("BatchNorm1d", (3,), {}, (4, 3)),
    ("BatchNorm1d", (3,), {"momentum": None}, (4, 3, 5)),
    ("BatchNorm2d", (3,), {"momentum": 0.3, "eps": 1e-3}, (3, 3, 4, 2)),
    ("BatchNorm2d", (3,), {"track_running_stats": False}, (3, 3, 2, 2)),
    ("BatchNorm2d", (3,), {"affine": False}, (3, 3, 2, 2)),
    ("BatchNorm3d", (3,), {"bias": False}, (2, 3, 2, 3, 2)),
    ("InstanceNorm1d", (3,), {"affine": True, "track_running_stats": True}, (2, 3, 5)),
    ("InstanceNorm1d", (3,), {"affine": True}, (3, 5)),
    ("InstanceNorm2d", (3,), {"track_running_stats": True, "momentum": 0.2}, (2, 3, 4, 3)),
    ("InstanceNorm3d", (3,), {"affine": True}, (3, 2, 3, 2)),
    ("LayerNorm", ((3, 5),), {}, (2, 3, 5)),
    ("LayerNorm", (5,), {"bias": False, "eps": 1e-2}, (2, 3, 5)),
    ("LayerNorm", ([5],), {"elementwise_affine": False}, (2, 3, 5)),
    ("GroupNorm", (2, 4), {}, (3, 4, 5)),
    ("GroupNorm", (4, 4), {"affine": False, "eps": 1e-3}, (3, 4, 2, 3)),
    ("LocalResponseNorm", (), {"size": 3, "alpha": 1e-2, "beta": 0.5, "k": 2.0}, (2, 6, 3, 3)),
    ("LocalResponseNorm", (), {"size": 5}, (2, 6, 7)),
    ("RMSNorm", ((3, 5),), {}, (2, 3, 5)),
    ("RMSNorm", (5,), {"eps": 1e-2}, (2, 3, 5)),
    ("RMSNorm", (5,), {"elementwise_affine": False}, (2, 3, 5)),
]


def _pair(name: str, args: tuple, kw: dict) -> tuple[Any, Any]:
    dt = {} if name == "LocalResponseNorm" else {"dtype": torch.float64}
    tm = getattr(torch.nn, name)(*args, **kw, **dt)
    with torch.no_grad():
        for p in tm.parameters():
            p.copy_(torch.tensor(RNG.standard_normal(tuple(p.shape))))
    fm = getattr(fg.nn, name)(*args, **kw, **({"dtype": "float64"} if dt else {}))
    fm.load_state_dict({k: fg.tensor(v.numpy().copy()) for k, v in tm.state_dict().items()})
    return tm, fm


def _close(a: Any, b: Any) -> None:
    np.testing.assert_allclose(b.numpy(), a.detach().numpy(), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[2]}-{len(c[3])}d")
def test_layer_matches_torch(case: tuple) -> None:
    """Forward, input and parameter gradients, second-order gradients (training, where
    they depend on the input) and buffers after every step, in train() then eval()."""
    name, args, kw, shape = case
    tm, fm = _pair(name, args, kw)
    for mode in ("train", "eval", "train"):
        getattr(tm, mode)()
        getattr(fm, mode)()
        for _ in range(2):
            xv = RNG.standard_normal(shape) * 2 + 0.5
            gv = RNG.standard_normal(shape)
            xt = torch.tensor(xv, requires_grad=True)
            xf = fg.tensor(xv, requires_grad=True)
            yt, yf = tm(xt), fm(xf)
            _close(yt, yf)
            ts, fs = [xt, *tm.parameters()], [xf, *fm.parameters()]
            gt = torch.autograd.grad((yt * torch.tensor(gv)).sum(), ts, create_graph=True)
            gf = fg.autograd.grad((yf * fg.tensor(gv)).sum(), fs, create_graph=True)
            for a, b in zip(gt, gf):
                _close(a, b)
            if gf[0].requires_grad and gf[0].grad_fn is not None:
                st = sum((g * g * g).sum() for g in gt)
                sf = gf[0].pow(3).sum()
                for g in gf[1:]:
                    sf = sf + g.pow(3).sum()
                ht = torch.autograd.grad(st, ts, allow_unused=True)
                hf = fg.autograd.grad(sf, fs, allow_unused=True)
                for t, a, b in zip(ts, ht, hf):
                    a = torch.zeros_like(t) if a is None else a
                    b = fg.zeros(tuple(t.shape), dtype="float64") if b is None else b
                    _close(a, b)
            fsd = fm.state_dict()
            for k, v in tm.state_dict().items():
                _close(v, fsd[k])


@pytest.mark.parametrize("case", CASES[::2], ids=lambda c: f"{c[0]}-{len(c[3])}d")
def test_layer_gradients_match_finite_differences(case: tuple) -> None:
    """Gradients w.r.t. the input and every parameter entry against central differences of
    the float64 loss (the running statistics put back before each evaluation)."""
    name, args, kw, shape = case
    _, fm = _pair(name, args, kw)
    xv = RNG.standard_normal(shape)
    gv = RNG.standard_normal(shape)
    params = [k for k, _ in fm.named_parameters()]
    for mode in ("train", "eval"):
        getattr(fm, mode)()
        state = {k: v.numpy().copy() for k, v in fm.state_dict().items()}

        def loss(x: np.ndarray, st: dict, base: dict = state) -> float:
            fm.load_state_dict({k: fg.tensor(st.get(k, v)) for k, v in base.items()})
            with fg.no_grad():
                return float((fm(fg.tensor(x)) * fg.tensor(gv)).sum().item())

        x = fg.tensor(xv, requires_grad=True)
        fm.load_state_dict({k: fg.tensor(v) for k, v in state.items()})
        fm.zero_grad()
        (fm(x) * fg.tensor(gv)).sum().backward()
        got = {"": x.grad.numpy()}
        got.update({k: p.grad.numpy() for k, p in fm.named_parameters()})
        h = 1e-6
        for key in ["", *params]:
            base = xv if key == "" else state[key]
            num = np.zeros_like(base)
            for i in np.ndindex(*base.shape):
                e = np.zeros_like(base)
                e[i] = h
                if key == "":
                    num[i] = (loss(xv + e, {}) - loss(xv - e, {})) / (2 * h)
                else:
                    num[i] = (loss(xv, {key: base + e}) - loss(xv, {key: base - e})) / (2 * h)
            np.testing.assert_allclose(got[key], num, rtol=1e-5, atol=1e-7, err_msg=key)


@pytest.mark.parametrize("lib", ["torch", "fg"])
@pytest.mark.parametrize("shape", [(1, 3, 1), (2, 3, 1), (3, 1)])
def test_instance_norm_single_spatial_element_in_training_raises(lib: str, shape: tuple) -> None:
    m = (torch if lib == "torch" else fg).nn.InstanceNorm1d(3)
    x = torch.ones(shape) if lib == "torch" else fg.ones(shape)
    with pytest.raises(ValueError, match="(?i)more than 1 spatial element"):
        m(x)
    m.eval()  # without running statistics eval() still normalises with the input's
    with pytest.raises(ValueError, match="(?i)more than 1 spatial element"):
        m(x)
    m = (torch if lib == "torch" else fg).nn.InstanceNorm1d(3, track_running_stats=True).eval()
    assert tuple(m(x).shape) == shape


def test_instance_norm_single_spatial_element_functional_raises() -> None:
    with pytest.raises(ValueError, match="instance_norm: .*1 spatial element"):
        fg.nn.functional.instance_norm(fg.ones((2, 3, 1, 1)))
    r = fg.nn.functional.instance_norm(
        fg.ones((2, 3, 1)), fg.zeros(3), fg.ones(3), use_input_stats=False
    )
    np.testing.assert_allclose(r.numpy(), np.ones((2, 3, 1)) / np.sqrt(1 + 1e-5))


@pytest.mark.parametrize("which", ["mean", "var"])
def test_batch_norm_one_running_statistic_in_training_raises(which: str) -> None:
    xv = RNG.standard_normal((4, 3))
    for lib in (torch, fg):
        rm = lib.zeros(3) if which == "mean" else None
        rv = lib.ones(3) if which == "var" else None
        with pytest.raises(ValueError, match="both be None or neither be None"):
            lib.nn.functional.batch_norm(lib.tensor(xv), rm, rv, training=True)
    # nothing was updated
    rm = fg.zeros(3)
    with pytest.raises(ValueError):
        fg.nn.functional.batch_norm(fg.tensor(xv), rm, None, training=True)
    assert not rm.numpy().any()


@pytest.mark.parametrize("arg", ["weight", "bias"])
def test_group_norm_affine_shape_mismatch_names_argument(arg: str) -> None:
    for lib in (torch, fg):
        kw = {arg: lib.ones(4)}
        with pytest.raises(RuntimeError, match=arg):
            lib.nn.functional.group_norm(lib.ones(2, 6, 3), 2, **kw)
    with pytest.raises(fg.ShapeError, match=r"group_norm: weight .*\[2, 6, 3\].*\[4\]"):
        fg.nn.GroupNorm(2, 4)(fg.ones(2, 6, 3))


@pytest.mark.parametrize("shape", [(1, 4), (1, 4, 1), (1, 4, 1, 1)])
def test_group_norm_one_value_per_group_raises(shape: tuple) -> None:
    for lib in (torch, fg):
        m = lib.nn.GroupNorm(4, 4).eval()
        with pytest.raises(ValueError, match="more than 1 value per channel"):
            m(lib.ones(*shape))
        # two samples, or two channels a group: normalised as usual
        _ = lib.nn.GroupNorm(4, 4)(lib.ones(2, *shape[1:]))
        _ = lib.nn.GroupNorm(2, 4)(lib.ones(*shape))


def test_normalize_out() -> None:
    xv = RNG.standard_normal((4, 3, 5))
    ot, of = torch.zeros(4, 3, 5, dtype=torch.float64), fg.zeros((4, 3, 5), dtype="float64")
    rt = torch.nn.functional.normalize(torch.tensor(xv), p=3, dim=2, out=ot)
    rf = fg.nn.functional.normalize(fg.tensor(xv), p=3, dim=2, out=of)
    assert rf is of and rt is ot
    _close(ot, of)


def test_convert_sync_batchnorm() -> None:
    xv = RNG.standard_normal((2, 3, 2, 2)).astype(np.float32)
    for lib in (torch, fg):
        nn = lib.nn
        m = nn.Sequential(
            nn.Conv2d(3, 3, 1),
            nn.BatchNorm2d(3, momentum=0.2),
            nn.Sequential(nn.BatchNorm1d(3, affine=False), nn.InstanceNorm1d(3)),
        )
        m[1](lib.tensor(xv))
        m[2][0].eval()
        old = m[1]
        s = nn.SyncBatchNorm.convert_sync_batchnorm(m)
        assert s is m
        assert type(s[1]) is nn.SyncBatchNorm and type(s[2][0]) is nn.SyncBatchNorm
        assert type(s[2][1]) is nn.InstanceNorm1d and type(s[0]) is nn.Conv2d
        assert s[1].momentum == 0.2 and s[1].weight is old.weight
        assert s[1].running_mean is old.running_mean
        assert int(s[1].num_batches_tracked.item()) == 1
        assert s[2][0].weight is None and not s[2][0].training and s[1].training
        assert (
            sorted(s.state_dict()) == sorted(k for k in m.state_dict())
            and "1.running_var" in s.state_dict()
        )
        one = nn.BatchNorm1d(4, bias=False)
        new = nn.SyncBatchNorm.convert_sync_batchnorm(one)
        assert type(new) is nn.SyncBatchNorm and new.bias is None and new.weight is one.weight


@pytest.mark.parametrize(
    "make",
    [
        lambda nn: nn.InstanceNorm2d(3),
        lambda nn: nn.InstanceNorm1d(3, affine=True, track_running_stats=True),
        lambda nn: nn.RMSNorm(4),
        lambda nn: nn.RMSNorm((2, 4), eps=1e-3, elementwise_affine=False),
        lambda nn: nn.LocalResponseNorm(3),
        lambda nn: nn.LocalResponseNorm(2, alpha=0.5, beta=1.0, k=3.0),
    ],
)
def test_repr_matches_torch(make: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert repr(make(fg.nn)) == repr(make(torch.nn))


@pytest.mark.parametrize("shape", [(0, 3, 2), (2, 3, 0), (0, 3, 0)])
def test_instance_norm_empty_input(shape: tuple) -> None:
    """An empty input comes back empty with zero gradients; the running statistics are left
    as they are (PyTorch leaves them for an empty spatial size too; with an empty batch it
    sets them to nan, which ferrograd does not copy)."""
    xt = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
    yt = torch.nn.functional.instance_norm(xt)
    yt.sum().backward()
    xf = fg.zeros(shape, dtype="float64", requires_grad=True)
    w = fg.ones(3, dtype="float64", requires_grad=True)
    rm, rv = fg.zeros(3, dtype="float64"), fg.ones(3, dtype="float64")
    yf = fg.nn.functional.instance_norm(xf, rm, rv, w)
    yf.sum().backward()
    assert tuple(yf.shape) == tuple(yt.shape) == shape
    _close(xt.grad, xf.grad)
    np.testing.assert_array_equal(w.grad.numpy(), np.zeros(3))
    np.testing.assert_array_equal(rm.numpy(), np.zeros(3))
    np.testing.assert_array_equal(rv.numpy(), np.ones(3))


@pytest.mark.parametrize(
    "make",
    [
        lambda nn: nn.BatchNorm1d(3, momentum=None),
        lambda nn: nn.InstanceNorm1d(3, affine=True, track_running_stats=True),
        lambda nn: nn.LayerNorm(3),
        lambda nn: nn.GroupNorm(1, 3),
        lambda nn: nn.RMSNorm(3),
    ],
)
def test_reset_parameters_and_flags(make: Any) -> None:
    """After training steps and changed weights, reset_parameters gives the initial layer
    back (running statistics included); the constructor flags are attributes."""
    xv = RNG.standard_normal((3, 4, 3, 5))
    out = []
    for lib in (torch, fg):
        m = make(lib.nn)
        kind = type(m).__name__
        for i in range(2):
            x = lib.tensor(
                xv[i, :, :, 0]
                if kind == "BatchNorm1d"
                else xv[i].transpose(0, 2, 1).copy()
                if kind in ("LayerNorm", "RMSNorm")
                else xv[i]
            )
            m(x.float())
        with torch.no_grad() if lib is torch else fg.no_grad():
            for p in m.parameters():
                p.add_(2.0)
        before = {k: v.numpy().copy() for k, v in m.state_dict().items()}
        m.reset_parameters()
        after = {k: v.numpy().copy() for k, v in m.state_dict().items()}
        flags = {
            k: getattr(m, k)
            for k in ("affine", "elementwise_affine", "track_running_stats")
            if hasattr(make(torch.nn), k)
        }
        out.append((before, after, flags))
    (tb, ta, tf), (fb, fa, ff) = out
    assert tf == ff
    for k in tb:
        np.testing.assert_allclose(fb[k], tb[k], rtol=1e-5)
        np.testing.assert_array_equal(fa[k], ta[k])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_rms_norm_half_precision_computes_in_float32(dtype: str) -> None:
    """Small float16 values square into float16's subnormal range; PyTorch normalises in
    float32 (with float32's epsilon by default) and rounds once."""
    xv = np.concatenate([np.full((2, 4), 1e-3), RNG.standard_normal((2, 4)) * 1e-2], axis=0).astype(
        np.float32
    )
    wv = RNG.standard_normal(4).astype(np.float32)
    for w in (None, wv):
        yt = torch.nn.functional.rms_norm(
            torch.tensor(xv).to(getattr(torch, dtype)),
            (4,),
            None if w is None else torch.tensor(w).to(getattr(torch, dtype)),
        )
        yf = fg.nn.functional.rms_norm(
            fg.tensor(xv).astype(dtype), (4,), None if w is None else fg.tensor(w).astype(dtype)
        )
        assert yf.dtype.name == dtype
        np.testing.assert_allclose(
            yf.astype("float32").numpy(), yt.float().numpy(), rtol=1e-2, atol=1e-3
        )


@pytest.mark.parametrize(
    ("call", "arg"),
    [
        (lambda F, lib, x: F.layer_norm(x, (5,), lib.ones(4)), "weight"),
        (lambda F, lib, x: F.layer_norm(x, (5,), None, lib.ones(4)), "bias"),
        (lambda F, lib, x: F.layer_norm(x, (3, 5), lib.ones(15)), "weight"),
        (lambda F, lib, x: F.rms_norm(x, (5,), lib.ones(4)), "weight"),
        (lambda F, lib, x: F.instance_norm(x, weight=lib.ones(4)), "weight"),
        (lambda F, lib, x: F.instance_norm(x, lib.zeros(4), lib.ones(4)), "running_mean"),
    ],
)
def test_affine_and_statistics_shape_mismatch_names_argument(call: Any, arg: str) -> None:
    xv = RNG.standard_normal((4, 3, 5))
    for lib in (torch, fg):
        with pytest.raises(RuntimeError, match=arg):
            call(lib.nn.functional, lib, lib.tensor(xv, dtype=lib.float32))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_instance_norm_half_precision_large_values(dtype: str) -> None:
    """Values near 300 have a variance above float16's largest value: PyTorch normalises in
    float32 and rounds once; the running statistics keep the module's dtype."""
    xv = (RNG.standard_normal((2, 4, 6)) * 300 + 300).astype(np.float32)
    tdt = getattr(torch, dtype)
    tm = torch.nn.InstanceNorm1d(4, affine=True, track_running_stats=True).to(tdt)
    fm = fg.nn.InstanceNorm1d(4, affine=True, track_running_stats=True).to(dtype)
    yt = tm(torch.tensor(xv).to(tdt)).detach()
    yf = fm(fg.tensor(xv).astype(dtype))
    assert yf.dtype.name == dtype and fm.running_var.dtype.name == dtype
    tol = 1e-2 if dtype == "float16" else 4e-2  # a few units in the last place
    np.testing.assert_allclose(yf.astype("float32").numpy(), yt.float().numpy(), atol=tol)
    np.testing.assert_allclose(
        fm.running_var.astype("float32").numpy(),
        tm.running_var.float().numpy(),
        rtol=2e-3 if dtype == "float16" else 1e-2,
    )
