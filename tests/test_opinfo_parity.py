"""Cases from a sweep of PyTorch's OpInfo database: each runs the same inputs through torch
and ferrograd and compares values and float64 gradients."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ferrograd as fg

F64 = torch.float64


def _fg(t, rg=False):
    return fg.tensor(t.detach().numpy(), requires_grad=rg)


def _np(x):
    if isinstance(x, torch.Tensor):
        return x.detach().numpy()
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


def _close(a, b, rtol=1e-12, atol=0.0):
    a, b = _np(a), _np(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, equal_nan=True)


def _check(tf, ff, inputs, rtol=1e-12, atol=0.0, weight_seed=0):
    """``tf(*torch_inputs)`` vs ``ff(*fg_inputs)``: values, then the gradients of a weighted
    sum of the output in every input."""
    ts = [t.detach().clone().requires_grad_() for t in inputs]
    fs = [_fg(t, True) for t in inputs]
    to, fo = tf(*ts), ff(*fs)
    _close(to, fo, rtol, atol)
    g = torch.Generator().manual_seed(weight_seed)
    w = torch.randn(to.shape, dtype=to.dtype, generator=g)
    tg = torch.autograd.grad((to * w).sum(), ts)
    fgr = fg.autograd.grad((fo * _fg(w)).sum(), fs)
    for a, b in zip(tg, fgr):
        assert b is not None
        _close(a, b, rtol, atol)


# ---------------------------------------------------------------- 1. cosine_similarity


def test_cosine_similarity_broadcasting_inputs():
    torch.manual_seed(0)
    x1 = torch.randn(1, 2, 3, dtype=F64)
    x2 = torch.randn(2, 1, 3, dtype=F64)
    _check(
        lambda a, b: torch.nn.functional.cosine_similarity(a, b, dim=-2),
        lambda a, b: fg.nn.functional.cosine_similarity(a, b, dim=-2),
        [x1, x2],
        atol=1e-12,
    )


# ---------------------------------------------------------------------------- 2. hypot


def test_hypot_no_overflow_or_underflow():
    for dt in (torch.float32, F64):
        a = torch.tensor([1e38, 3e38, 1e-30, 0.0, -4.0], dtype=dt)
        b = torch.tensor([1e38, 1.0, 1e-30, 0.0, 3.0], dtype=dt)
        _close(torch.hypot(a, b), fg.hypot(_fg(a), _fg(b)), rtol=1e-6 if dt != F64 else 1e-12)
    a = torch.tensor([1e300, 1e-200, -1e300], dtype=F64)
    _close(torch.hypot(a, a), fg.hypot(_fg(a), _fg(a)))


def test_hypot_grad_large_and_small():
    a = torch.tensor([1e300, 1e-200, 3.0, -2.0], dtype=F64)
    b = torch.tensor([2e300, 3e-200, -4.0, 0.5], dtype=F64)
    _check(torch.hypot, fg.hypot, [a, b])


# ------------------------------------------------------------------- 3. scatter_reduce


def test_scatter_reduce_prod_int_exclude_self():
    inp = torch.tensor([[1, 2], [3, 4]])
    idx = torch.tensor([[0, 0], [1, 1]])
    src = torch.tensor([[5, 6], [7, 8]])
    t = torch.scatter_reduce(inp, 1, idx, src, "prod", include_self=False)
    f = fg.scatter_reduce(_fg(inp), 1, _fg(idx), _fg(src), "prod", include_self=False)
    assert f.dtype == fg.int64
    assert f.tolist() == t.tolist()


def test_scatter_reduce_prod_float_exact_and_grad():
    torch.manual_seed(0)
    inp = torch.randn(3, 4, dtype=F64)
    src = torch.randn(3, 6, dtype=F64)
    idx = torch.randint(0, 4, (3, 6))
    for include_self in (True, False):
        _check(
            lambda x, s, inc=include_self: torch.scatter_reduce(
                x, 1, idx, s, "prod", include_self=inc
            ),
            lambda x, s, inc=include_self: fg.scatter_reduce(
                x, 1, _fg(idx), s, "prod", include_self=inc
            ),
            [inp, src],
        )
    inp = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=F64)
    idx = torch.tensor([[0, 0], [1, 1]])
    src = torch.tensor([[5.0, 6.0], [7.0, 8.0]], dtype=F64)
    t = torch.scatter_reduce(inp, 1, idx, src, "prod", include_self=False)
    f = fg.scatter_reduce(_fg(inp), 1, _fg(idx), _fg(src), "prod", include_self=False)
    assert f.numpy().tolist() == t.tolist()


def test_scatter_reduce_prod_grad_with_zeros():
    x = torch.tensor([[0.0, 2.0, 0.0, 3.0]], dtype=F64)
    s = torch.tensor([[0.0, 4.0, 5.0, 0.0, 0.0, 7.0]], dtype=F64)
    idx = torch.tensor([[0, 0, 1, 2, 3, 3]])
    for include_self in (True, False):
        _check(
            lambda a, b, inc=include_self: torch.scatter_reduce(
                a, 1, idx, b, "prod", include_self=inc
            ),
            lambda a, b, inc=include_self: fg.scatter_reduce(
                a, 1, _fg(idx), b, "prod", include_self=inc
            ),
            [x, s],
        )


def test_scatter_reduce_amax_amin_int_stay_int():
    inp = torch.tensor([[1, 2], [3, 4]])
    idx = torch.tensor([[0, 0], [1, 1]])
    src = torch.tensor([[5, 6], [7, 8]])
    for red in ("amax", "amin"):
        for inc in (True, False):
            t = torch.scatter_reduce(inp, 1, idx, src, red, include_self=inc)
            f = fg.scatter_reduce(_fg(inp), 1, _fg(idx), _fg(src), red, include_self=inc)
            assert f.dtype == fg.int64
            assert f.tolist() == t.tolist()


# ---------------------------------------------------------------- 4. arange / linspace


def test_arange_int_dtype():
    cases = [(-0.9, 2.1, 2.0), (0.5, 7.9, 0.7), (-3.2, 4.5, 1.1), (5.5, -2.2, -1.3), (1, 10, 2.5)]
    for args in cases:
        for dt in ("int64", "int32"):
            t = torch.arange(*args, dtype=getattr(torch, dt))
            f = fg.arange(*args, dtype=getattr(fg, dt))
            assert f.tolist() == t.tolist(), args


def test_linspace_int_dtype():
    cases = [(4.3, -3, 8), (0, 10, 7), (-5, 5, 20), (0.5, 9.7, 13), (-2.7, 3.9, 5), (2.5, 9, 1)]
    for args in cases:
        t = torch.linspace(*args, dtype=torch.int64)
        f = fg.linspace(*args, dtype=fg.int64)
        assert f.tolist() == t.tolist(), args


# --------------------------------------------------------------- 5. hinge_embedding_loss


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_hinge_embedding_loss_targets_not_pm1(reduction):
    x = torch.tensor([0.3, 0.2, 0.1, -0.4, 2.0], dtype=F64)
    y = torch.tensor([1.0, -1.0, 0.5, -0.7, 0.0], dtype=F64)
    _check(
        lambda a: torch.nn.functional.hinge_embedding_loss(a, y, reduction=reduction),
        lambda a: fg.nn.functional.hinge_embedding_loss(a, _fg(y), reduction=reduction),
        [x],
    )


# ----------------------------------------------------------------- 6. silent None grads


def test_index_fill_tensor_value_grad():
    torch.manual_seed(0)
    a = torch.randn(3, 3, dtype=F64)
    v = torch.tensor(2.0, dtype=F64)
    ii = torch.tensor([0, 2])
    _check(
        lambda x, val: torch.index_fill(x, 1, ii, val),
        lambda x, val: fg.index_fill(x, 1, _fg(ii), val),
        [a, v],
    )


def test_quantile_grad_wrt_tensor_q():
    torch.manual_seed(0)
    a = torch.randn(5, dtype=F64)
    q = torch.tensor([0.3, 0.7, 0.5, 1.0], dtype=F64)
    _check(torch.quantile, fg.quantile, [a, q])
    b = torch.randn(4, 6, dtype=F64)
    _check(
        lambda x, qq: torch.quantile(x, qq, dim=1, keepdim=True),
        lambda x, qq: fg.quantile(x, qq, dim=1, keepdim=True),
        [b, torch.tensor(0.35, dtype=F64)],
    )


# ------------------------------------------------------------- 7. vector_norm ord < 1


@pytest.mark.parametrize("p", [0.5, 0.3, -1.0, -0.5])
def test_vector_norm_small_ord_grad_at_zero(p):
    for x in ([0.0, 1.5, -2.0], [0.0, 0.0, 0.0], [0.0, 0.0, 2.0]):
        t = torch.tensor(x, dtype=F64)
        _check(
            lambda a: torch.linalg.vector_norm(a, p),
            lambda a: fg.linalg.vector_norm(a, p),
            [t],
        )
        _check(lambda a: torch.linalg.norm(a, p), lambda a: fg.linalg.norm(a, p), [t])


def test_vector_norm_ord0_on_graph():
    x = torch.tensor([0.0, 1.5, -2.0], dtype=F64, requires_grad=True)
    xf = _fg(x, True)
    out = fg.linalg.vector_norm(xf, 0)
    assert out.requires_grad == torch.linalg.vector_norm(x, 0).requires_grad
    assert out.item() == 2.0
    (g,) = fg.autograd.grad(out, [xf])
    assert g.tolist() == [0.0, 0.0, 0.0]


# ---------------------------------------------------------- 8. outputs on the graph


@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_div_rounding_mode_zero_grad(mode):
    torch.manual_seed(0)
    a = torch.randn(4, dtype=F64) * 3
    b = torch.rand(4, dtype=F64) + 0.5
    _check(
        lambda x, y: torch.div(x, y, rounding_mode=mode),
        lambda x, y: fg.div(x, y, rounding_mode=mode),
        [a, b],
    )


def test_frexp_mantissa_grad():
    a = torch.tensor([0.3, -5.0, 1024.5, 1.0, 0.0], dtype=F64)
    _check(lambda x: torch.frexp(x)[0], lambda x: fg.frexp(x)[0], [a])
    t = torch.frexp(a)
    assert fg.frexp(_fg(a))[1].tolist() == t[1].tolist()


def test_nextafter_on_graph():
    a = torch.tensor([1.0, 0.0], dtype=F64, requires_grad=True)
    b = torch.tensor([2.0, -1.0], dtype=F64)
    af = _fg(a, True)
    t, f = torch.nextafter(a, b), fg.nextafter(af, _fg(b))
    assert f.requires_grad == t.requires_grad
    _close(t, f, rtol=0)


def test_prod_empty_grad():
    a = torch.randn(4, dtype=F64)
    _check(lambda x: torch.prod(x[:0]), lambda x: fg.prod(x[:0]), [a])


def test_matrix_power_zero_grad():
    torch.manual_seed(0)
    M = torch.randn(2, 3, 3, dtype=F64)
    _check(lambda x: torch.linalg.matrix_power(x, 0), lambda x: fg.linalg.matrix_power(x, 0), [M])


@pytest.mark.parametrize("shape", [(2, 5), (3, 3, 4)])
def test_qr_wide_grad(shape):
    torch.manual_seed(0)
    A = torch.randn(*shape, dtype=F64)
    for k in (0, 1):
        _check(
            lambda x, k=k: torch.linalg.qr(x)[k],
            lambda x, k=k: fg.linalg.qr(x)[k],
            [A],
            rtol=1e-9,
            atol=1e-12,
        )


# ------------------------------------------------------------- 9. pinv(hermitian=True)


def test_pinv_hermitian_reads_lower_triangle():
    torch.manual_seed(0)
    B = torch.randn(2, 4, 4, dtype=F64)
    _check(
        lambda x: torch.linalg.pinv(x, hermitian=True),
        lambda x: fg.linalg.pinv(x, hermitian=True),
        [B],
        rtol=1e-9,
        atol=1e-11,
    )


# ------------------------------------------------------------- 10. dtypes and shapes


def test_int_dtype_kept_relu6_hardtanh_addmv_addr():
    v = torch.tensor([-5, -1, 0, 3, 7])
    for tf, ff in (
        (torch.nn.functional.relu6, fg.nn.functional.relu6),
        (
            lambda x: torch.nn.functional.hardtanh(x, -1.7, 2.9),
            lambda x: fg.nn.functional.hardtanh(x, -1.7, 2.9),
        ),
    ):
        t, f = tf(v), ff(_fg(v))
        assert f.dtype == fg.int64 and f.tolist() == t.tolist()
    b, m, w = torch.tensor([3, 4]), torch.tensor([[1, 2], [3, 4]]), torch.tensor([1, 1])
    t = torch.addmv(b, m, w, beta=2.7, alpha=1.9)
    f = fg.addmv(_fg(b), _fg(m), _fg(w), beta=2.7, alpha=1.9)
    assert f.dtype == fg.int64 and f.tolist() == t.tolist()
    B = torch.tensor([[[1, 2], [3, -1]], [[0, 2], [1, 1]]])
    C = torch.tensor([[1, 1], [2, 0]])
    t = torch.addbmm(C, B, B, beta=0.2, alpha=1.6)
    f = fg.addbmm(_fg(C), _fg(B), _fg(B), beta=0.2, alpha=1.6)
    assert f.dtype == fg.int64 and f.tolist() == t.tolist()
    x = torch.tensor([[True, False], [False, False]])
    y1, y2 = torch.tensor([True, False]), torch.tensor([False, True])
    for beta, alpha in ((3, 2), (0, 2), (1, 0)):
        t = torch.addr(x, y1, y2, beta=beta, alpha=alpha)
        f = fg.addr(_fg(x), _fg(y1), _fg(y2), beta=beta, alpha=alpha)
        assert f.dtype == fg.bool and f.tolist() == t.tolist()


def test_bincount_weight_dtypes():
    i = torch.tensor([0, 1, 1])
    for w in (
        torch.tensor([2, 3, 4]),
        torch.tensor([0.5, 1.0, 2.0]),
        torch.tensor([1.0], dtype=F64),
    ):
        w = w if w.numel() == 3 else w.expand(3)
        t = torch.bincount(i, w)
        f = fg.bincount(_fg(i), _fg(w))
        assert str(f.dtype) == str(t.dtype).replace("torch.", "")
        _close(t, f)


def test_shapes_cov_corrcoef_nll_prelu_diff():
    torch.manual_seed(0)
    x = torch.randn(1, 4, dtype=F64)
    _check(torch.cov, fg.cov, [x])
    _close(torch.corrcoef(x), fg.corrcoef(_fg(x)))
    inp = torch.randn(3, dtype=F64)
    tgt = torch.tensor(1)
    _check(
        lambda a: torch.nn.functional.nll_loss(a, tgt, reduction="none"),
        lambda a: fg.nn.functional.nll_loss(a, _fg(tgt), reduction="none"),
        [inp],
    )
    _check(
        torch.nn.functional.prelu,
        fg.nn.functional.prelu,
        [torch.tensor(-1.5, dtype=F64), torch.tensor([0.25], dtype=F64)],
    )
    a, p = torch.randn(5, 5, dtype=F64), torch.randn(1, 5, dtype=F64)
    _check(lambda u: torch.diff(u, 0, 0, p), lambda u: fg.diff(u, 0, 0, _fg(p)), [a])
