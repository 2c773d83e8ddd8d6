"""Mixed precision on the CPU against PyTorch: float16/bfloat16 norms and normalisations
accumulate in float32, CPU autocast follows PyTorch's CPU op lists, mixed-dtype products
raise, GradScaler's checks and the autocast state functions."""

from __future__ import annotations

import warnings

import ferrograd as fg
import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _on_the_cpu():
    """These compare CPU behaviour with PyTorch's CPU: tensors are made on the CPU even
    when the suite runs with another default device."""
    prev = fg.get_default_device()
    fg.set_default_device("cpu")
    yield
    fg.set_default_device(prev)


def _np(t):
    return t.detach().float().numpy() if hasattr(t, "float") else t.astype("float32").numpy()


# ------------------------------------------------------------------ half norms in float32


def test_float16_norms_accumulate_in_float32_as_torch():
    torch = pytest.importorskip("torch")
    a = (np.random.default_rng(2).normal(size=(4, 2000)) * 3 + 10).astype(np.float32)
    outs = {}
    for m in (fg, torch):
        e = m.tensor(a).to(m.float16)  # squares summed past float16's 65504
        F = m.nn.functional
        outs[m] = [
            e.norm(),
            m.linalg.vector_norm(e[0]),
            m.linalg.matrix_norm(e),
            F.normalize(e, dim=-1)[0, 0],
            F.cosine_similarity(e, e, dim=-1)[0],
            m.dist(e[0], m.zeros_like(e[0])),
            e.norm(3, dim=1),
        ]
    for ours, theirs in zip(outs[fg], outs[torch]):
        assert ours.dtype.name == str(theirs.dtype).replace("torch.", "")
        np.testing.assert_array_equal(_np(ours), _np(theirs))


def test_half_norm_gradient_is_finite_and_matches_torch():
    torch = pytest.importorskip("torch")
    a = (np.random.default_rng(0).normal(size=(3, 200)) * 40).astype(np.float32)
    grads = []
    for m in (fg, torch):
        x = m.tensor(a).to(m.float16)
        x.requires_grad_(True)
        x.norm(dim=1).sum().backward()
        assert x.grad.dtype == m.float16
        grads.append(_np(x.grad))
    assert np.isfinite(grads[0]).all()
    np.testing.assert_allclose(grads[0], grads[1], rtol=2e-3, atol=1e-5)
    # the float64 gradient it upcasts to, against finite differences
    x0 = np.random.default_rng(1).normal(size=(5,))
    x = fg.tensor(x0, requires_grad=True)
    x.norm().backward()
    h = 1e-6
    fd = [
        (np.linalg.norm(x0 + h * np.eye(5)[i]) - np.linalg.norm(x0 - h * np.eye(5)[i])) / (2 * h)
        for i in range(5)
    ]
    np.testing.assert_allclose(x.grad.numpy(), fd, rtol=1e-6)


def test_half_var_std_and_normalisations_past_float16_range_match_torch():
    torch = pytest.importorskip("torch")
    a = (np.random.RandomState(0).randn(8, 4, 16) * 300 + 1000).astype(np.float32)
    res = {}
    for m in (fg, torch):
        x = m.tensor(a).to(m.float16)
        F = m.nn.functional
        w = m.ones(4)  # float32 weights: the output keeps the input's dtype, as torch's
        res[m] = [
            F.batch_norm(x, m.zeros(4), m.ones(4), w, w * 0, training=True),
            F.batch_norm(x, None, None, training=True),
            F.layer_norm(x, (16,)),
            F.layer_norm(x, (16,), m.ones(16), m.zeros(16)),
            F.group_norm(x, 2, w, w * 0),
            x.std(),
            x.std(dim=2),
            (x * 0.5).var(dim=2),  # squared deviations past 65504, the variance not
        ]
    for ours, theirs in zip(res[fg], res[torch]):
        assert ours.dtype == fg.float16
        o, t = _np(ours), _np(theirs)
        assert np.isfinite(o).all()
        np.testing.assert_allclose(o, t, rtol=2e-3, atol=2e-3)


def test_bfloat16_layer_norm_and_norm_as_accurate_as_torch():
    torch = pytest.importorskip("torch")
    a = (np.random.RandomState(0).randn(10, 100) * 3 + 10).astype(np.float32)
    v = (np.random.RandomState(3).randn(5000) * 3 + 10).astype(np.float32)
    out = {}
    for m in (fg, torch):
        ln = m.nn.functional.layer_norm(m.tensor(a).to(m.bfloat16), (100,))
        out[m] = (_np(ln), m.tensor(v).to(m.bfloat16).norm().item())
    np.testing.assert_array_equal(out[fg][0], out[torch][0])
    assert out[fg][1] == out[torch][1]


# ------------------------------------------------------------------------ CPU autocast


def _dtypes(outs):
    return [str(o.dtype).replace("torch.", "") for o in outs]


def test_cpu_autocast_leaves_softmax_and_normalisations_in_the_input_dtype():
    torch = pytest.importorskip("torch")
    got = {}
    for m in (fg, torch):
        F = m.nn.functional
        x, w = m.randn(4, 8), m.randn(8, 8)
        with m.autocast("cpu", dtype=m.bfloat16):
            h = F.linear(x, w)
            got[m] = _dtypes(
                [
                    F.softmax(h, -1),
                    F.log_softmax(h, -1),
                    m.nn.LayerNorm(8)(h),
                    F.group_norm(h, 2),
                    m.logsumexp(h, -1),
                    F.softplus(h),
                ]
            )
    assert got[fg] == got[torch] == ["bfloat16"] * 6


def test_cpu_autocast_float32_list_and_promotion_as_torch():
    torch = pytest.importorskip("torch")
    got = {}
    for m in (fg, torch):
        F = m.nn.functional
        x = m.rand(4, 4).to(m.bfloat16)
        v = m.rand(1, 1, 4, 4, 4).to(m.bfloat16)
        with m.autocast("cpu", dtype=m.bfloat16):
            got[m] = _dtypes(
                [
                    m.prod(x),
                    m.trace(x),
                    m.cdist(x, x),
                    m.quantile(x.flatten(), 0.5),
                    F.avg_pool3d(v, 2),
                    F.max_pool3d(v, 2),
                    F.adaptive_avg_pool3d(v, 2),
                    F.pad(x[None], (1, 1), mode="reflect"),
                    F.pad(x[None], (1, 1), mode="replicate"),
                    F.pad(x[None], (1, 1)),  # constant padding: on no list
                    F.hinge_embedding_loss(x, m.ones_like(x)),
                    F.poisson_nll_loss(x, x),
                    F.multi_margin_loss(x, m.tensor([0, 1, 2, 3])),
                    F.mse_loss(x, x),
                    m.linalg.inv(x + 4 * m.eye(4)),
                    m.index_copy(x, 0, m.tensor([0]), m.rand(1, 4)),
                    m.cat([x, m.rand(1, 4)]),
                ]
            )
    assert got[fg] == got[torch]
    assert got[fg][9] == "bfloat16"


def _torch_may_lack_bf16_lstm(m, run):
    """``run()``; skips when it is torch's and its oneDNN build has no bfloat16 LSTM for this
    CPU (it raises on CPUs without AVX-512 BF16)."""
    try:
        return run()
    except RuntimeError as e:
        if m is fg or "primitive descriptor" not in str(e):
            raise
        pytest.skip(f"torch cannot run a bfloat16 LSTM on this CPU: {str(e)[:80]}")


def test_cpu_autocast_lower_precision_list_as_torch():
    torch = pytest.importorskip("torch")
    got = {}
    for m in (fg, torch):
        m.manual_seed(0)
        x, s = m.randn(1, 2, 5, 5, 5), m.randn(2, 5, 8)
        with m.autocast("cpu", dtype=m.bfloat16):
            lstm = m.nn.LSTM(8, 6, batch_first=True)
            out, (h, c) = _torch_may_lack_bf16_lstm(m, lambda: lstm(s))  # noqa: B023
            got[m] = _dtypes(
                [
                    m.nn.Conv3d(2, 3, 3)(x),
                    out,
                    h,
                    c,
                    m.nn.RNN(8, 6)(s)[0],
                    m.nn.GRU(8, 6)(s)[0],  # not on the list
                    m.linalg.vecdot(s, s),
                    m.nn.functional.conv_transpose3d(x, m.randn(2, 2, 2, 2, 2)),
                    m.mv(s[0], s[0, 0]),  # not on the CPU's list
                ]
            )
    assert got[fg] == got[torch]


def test_lstm_in_cpu_autocast_close_to_torch():
    torch = pytest.importorskip("torch")
    fg.manual_seed(0)
    ours = fg.nn.LSTM(8, 6, batch_first=True)
    theirs = torch.nn.LSTM(8, 6, batch_first=True)
    with torch.no_grad():
        for (_, a), (_, b) in zip(ours.named_parameters(), theirs.named_parameters()):
            b.copy_(torch.tensor(a.detach().numpy()))
    s = np.random.default_rng(0).normal(size=(2, 5, 8)).astype(np.float32)
    with fg.autocast("cpu"):
        o = ours(fg.tensor(s))[0]
    with torch.autocast("cpu"):
        t = _torch_may_lack_bf16_lstm(torch, lambda: theirs(torch.tensor(s)))[0]
    assert o.dtype == fg.bfloat16
    np.testing.assert_allclose(_np(o), _np(t), atol=3e-2)


def test_autocast_never_lowers_float64():
    torch = pytest.importorskip("torch")
    got = {}
    for m in (fg, torch):
        x = m.ones(2, 3, dtype=m.float64) / 3
        w = m.ones(4, 3, dtype=m.float64)
        with m.autocast("cpu", dtype=m.bfloat16):
            y = m.nn.functional.linear(x, w)
            z = x @ w.T
        got[m] = (
            str(y.dtype).replace("torch.", ""),
            str(z.dtype).replace("torch.", ""),
            y[0, 0].item(),
        )
    assert got[fg] == got[torch]
    assert got[fg][0] == "float64"


def test_autocast_unsupported_dtype_warns_and_runs_disabled():
    torch = pytest.importorskip("torch")
    for m in (fg, torch):
        for dt in (m.float32, m.float64):
            with pytest.warns(UserWarning):
                ctx = m.autocast("cpu", dtype=dt)
            with ctx:
                assert not m.is_autocast_enabled("cpu")
                assert (m.ones(2, 2) @ m.ones(2, 2)).dtype == m.float32


# ------------------------------------------------------------------ mixed-dtype products


@pytest.mark.parametrize(
    "case", ["bf16@f32", "f16@bf16", "linear", "linear_bias", "mm", "bmm", "rmatmul"]
)
def test_mixed_float_dtype_products_raise_as_torch(case):
    torch = pytest.importorskip("torch")
    for m in (fg, torch):
        a = m.ones(2, 3).to(m.bfloat16)
        b = m.full((3, 2), 1 / 3)
        f = {
            "bf16@f32": lambda m, a, b: a @ b,
            "f16@bf16": lambda m, a, b: (a.to(m.float16) * 3000) @ (b.to(m.bfloat16) * 3000),
            "linear": lambda m, a, b: m.nn.functional.linear(a, b.t()),
            "linear_bias": lambda m, a, b: m.nn.functional.linear(
                a, b.t().to(m.bfloat16), m.ones(2)
            ),
            "mm": lambda m, a, b: m.mm(a, b),
            "bmm": lambda m, a, b: m.bmm(a[None], b[None]),
            "rmatmul": lambda m, a, b: b.t().__rmatmul__(a.t()),
        }[case]
        with pytest.raises(RuntimeError):
            f(m, a, b)
    # the same products inside autocast are cast first and run
    with fg.autocast("cpu"):
        assert (fg.ones(2, 3).to(fg.float16) @ fg.ones(3, 2)).dtype == fg.bfloat16


def test_mixed_dtype_product_error_names_op_and_dtypes():
    with pytest.raises(fg.DTypeError, match=r"matmul: .*same dtype.*bfloat16 != float32"):
        fg.ones(2, 3).to(fg.bfloat16) @ fg.ones(3, 2)


# --------------------------------------------------------------------------- GradScaler


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_grad_scaler_scales_half_loss_in_float32(dt):
    torch = pytest.importorskip("torch")
    got = []
    for m in (fg, torch):
        sc = m.amp.GradScaler("cpu", init_scale=2.0**15)
        s = sc.scale(m.tensor(2.5).to(getattr(m, dt)))
        got.append((str(s.dtype).replace("torch.", ""), s.item()))
    assert got[0] == got[1] == ("float32", 81920.0)


def test_grad_scaler_scale_accepts_any_iterable():
    torch = pytest.importorskip("torch")
    for m in (fg, torch):
        sc = m.amp.GradScaler("cpu", init_scale=4.0)
        out = sc.scale(iter([m.tensor(1.0), m.tensor(2.0)]))
        assert [t.item() for t in out] == [4.0, 8.0]
        assert [t.item() for t in sc.scale((m.tensor(1.0),))] == [4.0]


def test_grad_scaler_growth_saturates_in_float32():
    torch = pytest.importorskip("torch")
    scales = []
    for m in (fg, torch):
        p = m.nn.Parameter(m.ones(2))
        opt = m.optim.SGD([p], lr=0.1)
        sc = m.amp.GradScaler("cpu", init_scale=2.0**127, growth_interval=1)
        sc.scale(m.tensor(1.0))
        p.grad = m.ones(2)
        sc.step(opt)
        sc.update()
        scales.append(sc.get_scale())
    assert scales[0] == scales[1] == 2.0**127


def test_grad_scaler_misuse_raises_as_torch():
    torch = pytest.importorskip("torch")
    for m in (fg, torch):
        with pytest.raises(AssertionError):
            m.amp.GradScaler("cpu").update()
        sc = m.amp.GradScaler("cpu")
        sc.scale(m.tensor(1.0))
        with pytest.raises(AssertionError):
            sc.update()  # no step or unscale_ recorded an inf check
        p = m.nn.Parameter(m.ones(2))
        opt = m.optim.SGD([p], lr=0.1)
        p.grad = m.ones(2)
        sc.step(opt)
        with pytest.raises(RuntimeError, match="step"):
            sc.step(opt)
        sc.update()
        h = m.nn.Parameter(m.ones(2, dtype=m.float16))
        h.grad = m.ones(2, dtype=m.float16)
        with pytest.raises(ValueError, match="FP16"):
            sc.unscale_(m.optim.SGD([h], lr=0.1))


# ------------------------------------------------------------------ autocast state API


def test_top_level_autocast_state_functions_as_torch():
    torch = pytest.importorskip("torch")
    for m in (fg, torch):
        assert str(m.get_autocast_dtype("cpu")).endswith("bfloat16")
        assert not m.is_autocast_enabled("cpu")
        assert not m.is_autocast_cpu_enabled()
        assert str(m.get_autocast_cpu_dtype()).endswith("bfloat16")
        assert m.is_autocast_cache_enabled()
        m.clear_autocast_cache()
        with m.autocast("cpu", dtype=m.float16):
            assert m.is_autocast_enabled("cpu") and m.is_autocast_cpu_enabled()
            assert str(m.get_autocast_dtype("cpu")).endswith("float16")
            m.set_autocast_enabled("cpu", False)
            assert not m.is_autocast_enabled("cpu")
            assert (m.ones(2, 2) @ m.ones(2, 2)).dtype == m.float32
            m.set_autocast_enabled("cpu", True)
            assert (m.ones(2, 2) @ m.ones(2, 2)).dtype == m.float16
        assert not m.is_autocast_enabled("cpu")
        with m.autocast("cpu", dtype=m.float16, enabled=False):
            assert str(m.get_autocast_dtype("cpu")).endswith("float16")
        assert str(m.get_autocast_dtype("cpu")).endswith("bfloat16")


def test_cpu_amp_namespace_as_torch():
    torch = pytest.importorskip("torch")
    for m in (fg, torch):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sc = m.cpu.amp.GradScaler(init_scale=8.0)
            ctx = m.cpu.amp.autocast()
        assert type(sc).__name__ == "GradScaler" and sc.get_scale() == 8.0
        with ctx:
            assert (m.ones(2, 2) @ m.ones(2, 2)).dtype == m.bfloat16
