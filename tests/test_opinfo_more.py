"""More cases from a sweep of PyTorch's OpInfo samples: each runs the same inputs through
torch and ferrograd and compares values and float64 gradients (and, for the gradients, finite
differences)."""

import operator

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ferrograd as fg
import ferrograd.nn.functional as F
from conftest import numeric_grad
from test_opinfo_parity import F64, _fg, _np


def _close(a, b, rtol=1e-10, atol=1e-12):
    a, b = _np(a), _np(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, equal_nan=True)


def _check(tf, ff, inputs, rtol=1e-10, atol=1e-12, fd=True, fd_atol=1e-6):
    """``tf(*torch_inputs)`` vs ``ff(*fg_inputs)``: values, then the gradients of a weighted
    sum of the output (against torch's and, with ``fd``, finite differences)."""
    ts = [t.detach().clone().requires_grad_() for t in inputs]
    fs = [_fg(t, True) for t in inputs]
    to, fo = tf(*ts), ff(*fs)
    _close(to, fo, rtol, atol)
    assert fo.requires_grad
    w = torch.randn(to.shape, dtype=to.dtype, generator=torch.Generator().manual_seed(0))
    tg = torch.autograd.grad((to * w).sum(), ts, allow_unused=True)
    fgr = fg.autograd.grad((fo * _fg(w)).sum(), fs, allow_unused=True)
    for a, b, t in zip(tg, fgr, ts):
        a = torch.zeros_like(t) if a is None else a
        b = np.zeros(t.shape) if b is None else _np(b)
        _close(a, b, rtol, atol)
    if fd:
        wn = w.numpy()

        def f(*arrs):
            with fg.no_grad():
                out = ff(*[fg.tensor(a) for a in arrs])
            return float((_np(out) * wn).sum())

        num = numeric_grad(f, [t.detach().numpy() for t in inputs])
        for n, b, t in zip(num, fgr, ts):
            b = np.zeros(t.shape) if b is None else _np(b)
            np.testing.assert_allclose(b, n, rtol=1e-5, atol=fd_atol)


# ------------------------------------------------------------------------------ pinv


def _orth(n, seed):
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))
    return q


def _with_singular(m, n, s, seed=0):
    U, V = _orth(m, seed)[:, : len(s)], _orth(n, seed + 1)[:, : len(s)]
    return torch.tensor(U @ np.diag(s) @ V.T, dtype=F64)


@pytest.mark.parametrize(
    "A",
    [
        torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=F64),
        torch.eye(3, dtype=F64) * 2.0,
        _with_singular(3, 3, [2.0, 2.0, 1.0]),
        _with_singular(3, 5, [1.5, 1.5, 1.5]),
        _with_singular(5, 3, [3.0, 1.0, 1.0]),
        torch.randn(4, 4, dtype=F64, generator=torch.Generator().manual_seed(1)),
        torch.randn(2, 3, 5, dtype=F64, generator=torch.Generator().manual_seed(2)),
        torch.randn(2, 5, 3, dtype=F64, generator=torch.Generator().manual_seed(3)),
    ],
    ids=["perm", "scaled_eye", "rep_sq", "rep_wide", "rep_tall", "sq", "wide_b", "tall_b"],
)
def test_pinv_gradient_repeated_singular_values(A):
    _check(torch.linalg.pinv, fg.linalg.pinv, [A])


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3)])
def test_pinv_gradient_rank_deficient_rtol(shape):
    m, n = shape
    A = _with_singular(m, n, [2.0, 1.0, 1e-9], seed=4)
    _check(
        lambda a: torch.linalg.pinv(a, rtol=1e-6),
        lambda a: fg.linalg.pinv(a, rtol=1e-6),
        [A],
        fd=False,
    )
    # atol cut too
    _check(
        lambda a: torch.linalg.pinv(a, atol=0.5),
        lambda a: fg.linalg.pinv(a, atol=0.5),
        [A],
        fd=False,
    )


def test_pinv_hermitian_and_double_backward():
    A = _with_singular(3, 3, [2.0, 2.0, 1.0], seed=5)
    A = (A + A.T) / 2
    _check(
        lambda a: torch.linalg.pinv(a, hermitian=True),
        lambda a: fg.linalg.pinv(a, hermitian=True),
        [A],
        fd=False,  # reads one triangle: the gradient is torch's symmetric one
    )
    # second order against torch
    ta = A.clone().requires_grad_()
    (tg,) = torch.autograd.grad(torch.linalg.pinv(ta).sin().sum(), ta, create_graph=True)
    (tgg,) = torch.autograd.grad((tg * tg).sum(), ta)
    fa = _fg(A, True)
    (fgr,) = fg.autograd.grad(fg.linalg.pinv(fa).sin().sum(), fa, create_graph=True)
    (fgg,) = fg.autograd.grad((fgr * fgr).sum(), fa)
    _close(tg, fgr)
    _close(tgg, fgg, rtol=1e-8, atol=1e-10)


def test_pinv_empty():
    for shape in [(0, 3), (3, 0), (2, 0, 0)]:
        A = torch.zeros(shape, dtype=F64)
        _close(torch.linalg.pinv(A), fg.linalg.pinv(_fg(A)))


# ------------------------------------------------------------------ empty outputs on the graph


def test_pdist_fewer_than_two_rows_on_graph():
    x = torch.randn(1, 3, dtype=F64)
    _check(torch.nn.functional.pdist, F.pdist, [x], fd=False)
    # no rows: (torch's own backward crashes there, so against zeros)
    x0 = fg.zeros(0, 3, dtype="float64", requires_grad=True)
    out = F.pdist(x0)
    assert tuple(out.shape) == (0,) and out.requires_grad
    (g,) = fg.autograd.grad(out.sum(), x0)
    assert tuple(g.shape) == (0, 3)


@pytest.mark.parametrize("r,rep", [(3, False), (4, False), (3, True)])
def test_combinations_on_graph(r, rep):
    x = torch.randn(2, dtype=F64)
    _check(
        lambda a: torch.combinations(a, r, rep),
        lambda a: fg.combinations(a, r, rep),
        [x],
        fd=False,
    )


# -------------------------------------------------------------------------------- logit


@pytest.mark.parametrize("eps", [0.6, 0.5, 0.2, -0.1, None])
def test_logit_eps_order(eps):
    x = torch.tensor([0.05, 0.15, 0.3, 0.5, 0.65, 0.85, 0.95], dtype=F64)
    # (at eps = 0.5 the point 0.5 is the kink, where torch's gradient is one side's)
    _check(lambda a: torch.logit(a, eps), lambda a: fg.logit(a, eps), [x], fd=eps != 0.5)
    with_nan = torch.tensor([0.3, float("nan")], dtype=F64)
    _close(torch.logit(with_nan, eps), fg.logit(_fg(with_nan), eps))


# ----------------------------------------------------------------------------- max_unpool


@pytest.mark.parametrize(
    "nd,shape,k,out",
    [
        (1, (2, 3, 4), 2, (8,)),
        (2, (1, 2, 2, 2), 2, (4, 4)),
        (3, (1, 2, 2, 1, 2), 2, (4, 2, 4)),
    ],
)
def test_max_unpool_duplicate_indices(nd, shape, k, out):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # (torch's parallel kernel writes duplicates in any order)
    try:
        _unpool_cases(nd, shape, k, out)
    finally:
        torch.set_num_threads(threads)


def _unpool_cases(nd, shape, k, out):
    g = torch.Generator().manual_seed(nd)
    x = torch.randn(shape, dtype=F64, generator=g)
    total = int(np.prod(out))
    idx = torch.randint(0, 3, shape, generator=g) % total  # many duplicates
    tf = getattr(torch.nn.functional, f"max_unpool{nd}d")
    ff = getattr(F, f"max_unpool{nd}d")
    _check(
        lambda a: tf(a, idx, k, output_size=out),
        lambda a: ff(a, _fg(idx), k, output_size=out),
        [x],
        fd=False,  # the value at a duplicated position is one write's: not differentiable
    )
    # without duplicates the gradient is also the finite differences'
    perm = torch.randperm(total, generator=g)[: int(np.prod(shape[-nd:]))]
    idx = perm.reshape(shape[-nd:]).expand(shape).contiguous()
    _check(
        lambda a: tf(a, idx, k, output_size=out),
        lambda a: ff(a, _fg(idx), k, output_size=out),
        [x],
    )


# ------------------------------------------------------------------------------- bitwise


@pytest.mark.parametrize("name", ["__ror__", "__rxor__", "__rand__"])
def test_reflected_bitwise_int_tensors(name):
    a, b = torch.tensor([5, 3, -2]), torch.tensor([2, 4, 7])
    c = torch.tensor([True, False, True])
    for x, y in [(a, b), (a, c), (c, a), (c, c)]:
        t = getattr(x, name)(y)
        f = getattr(_fg(x), name)(_fg(y))
        assert str(f.dtype) == str(t.dtype).replace("torch.", "")
        np.testing.assert_array_equal(_np(f), t.numpy())
    op = {"__ror__": operator.or_, "__rxor__": operator.xor, "__rand__": operator.and_}[name]
    np.testing.assert_array_equal(_np(op(3, _fg(a))), op(3, a).numpy())
    np.testing.assert_array_equal(_np(op(_fg(b), _fg(a))), op(b, a).numpy())


# ------------------------------------------------------------------------------- softmin


def test_softmin_dtype():
    x = torch.tensor([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    for dim in (0, 1):
        t = torch.nn.functional.softmin(x, dim, dtype=F64)
        f = F.softmin(_fg(x), dim, dtype=fg.float64)
        assert str(f.dtype) == "float64"
        _close(t, f)
        _close(t, F.softmin(_fg(x), dim=dim, dtype="float64"))
    xd = x.double()
    _check(
        lambda a: torch.nn.functional.softmin(a.float(), 1, dtype=F64),
        lambda a: F.softmin(a.float(), 1, dtype=fg.float64),
        [xd],
        rtol=1e-6,
        atol=1e-7,
        fd=False,
    )


# ------------------------------------------------------------------ int ** negative int


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_int_pow_negative_exponents(dtype):
    # an integer number to integer tensor powers, negative ones included, as torch's kernel
    # (an integer tensor base still raises: tests/test_torch_semantics.py pins that)
    exp = torch.tensor([-1, -2, -3, 0, 1, 2], dtype=dtype)
    fe = _fg(exp)
    dt = str(dtype).replace("torch.", "")
    for base in (0, 1, -1, 2, -2, 3):
        for t, f in [(base**exp, base**fe), (torch.pow(base, exp), fg.pow(base, fe))]:
            assert str(f.dtype) == dt
            np.testing.assert_array_equal(_np(f), t.numpy())
    np.testing.assert_array_equal(_np(2 ** fg.tensor([-1, 2])), [0, 4])
    # float powers untouched
    _close(
        torch.tensor([2.0, 4.0]) ** torch.tensor([-1, 2]),
        fg.tensor([2.0, 4.0]) ** fg.tensor([-1, 2]),
    )
    _close(2.0 ** torch.tensor([-1, 2]), 2.0 ** fg.tensor([-1, 2]))


# ------------------------------------------------------------------------------- quantile


@pytest.mark.parametrize("dim", [0, -1, None])
@pytest.mark.parametrize("keepdim", [True, False])
def test_quantile_0d(dim, keepdim):
    x = torch.tensor(1.5, dtype=F64)
    for name in ("quantile", "nanquantile"):
        for q in (0.3, torch.tensor([0.25, 0.5], dtype=F64)):
            fq = _fg(q) if isinstance(q, torch.Tensor) else q
            _check(
                lambda a, n=name, q=q: getattr(torch, n)(a, q, dim=dim, keepdim=keepdim),
                lambda a, n=name, q=fq: getattr(fg, n)(a, q, dim=dim, keepdim=keepdim),
                [x],
            )


# ------------------------------------------------------------------------- small edges


def test_tensordot_size_one_contracted_dims_broadcast():
    a = torch.randn(1, 1, 1, dtype=F64)
    b = torch.randn(2, 1, 2, dtype=F64)
    _check(
        lambda x, y: torch.tensordot(x, y, dims=([0, 1], [2, 0])),
        lambda x, y: fg.tensordot(x, y, dims=([0, 1], [2, 0])),
        [a, b],
    )
    a, b = torch.randn(1, 3, dtype=F64), torch.randn(2, 3, dtype=F64)
    _check(
        lambda x, y: torch.tensordot(x, y, dims=([0, 1], [0, 1])),
        lambda x, y: fg.tensordot(x, y, dims=([0, 1], [0, 1])),
        [a, b],
    )
    with pytest.raises(fg.ShapeError):
        fg.tensordot(fg.ones(2, 3), fg.ones(3, 3), dims=([0, 1], [0, 1]))


@pytest.mark.parametrize("shape,ishape,dim", [((3,), (2, 0), 0), ((2, 3), (0, 5, 4), 1)])
def test_gather_empty_index_more_dims(shape, ishape, dim):
    x = torch.randn(shape, dtype=F64)
    idx = torch.zeros(ishape, dtype=torch.int64)
    _check(lambda a: torch.gather(a, dim, idx), lambda a: fg.gather(a, dim, _fg(idx)), [x])


def test_avg_pool2d_negative_divisor_override():
    x = torch.randn(1, 2, 4, 4, dtype=F64)
    for d in (-2, -3, 5):
        _check(
            lambda a, d=d: torch.nn.functional.avg_pool2d(a, 2, divisor_override=d),
            lambda a, d=d: F.avg_pool2d(a, 2, divisor_override=d),
            [x],
        )


@pytest.mark.parametrize("shape", [(0,), (0, 3)])
def test_batch_norm_empty_training(shape):
    x = torch.zeros(shape, dtype=F64)
    c = 0 if len(shape) == 1 else shape[1]
    _check(
        lambda a: torch.nn.functional.batch_norm(
            a, torch.zeros(c, dtype=F64), torch.ones(c, dtype=F64), training=True
        ),
        lambda a: F.batch_norm(
            a, fg.zeros(c, dtype="float64"), fg.ones(c, dtype="float64"), training=True
        ),
        [x],
    )
    with pytest.raises(ValueError):
        F.batch_norm(fg.zeros(1, 0), fg.zeros(0), fg.ones(0), training=True)


@pytest.mark.parametrize("eps", [-0.5, -0.01])
def test_layer_norm_negative_eps(eps):
    x = torch.tensor([[1.0, 2.0, 4.0], [0.0, 3.0, -1.0]], dtype=F64)
    w = torch.tensor([1.5, -1.0, 2.0], dtype=F64)
    b = torch.tensor([0.1, 0.2, -0.3], dtype=F64)
    _check(
        lambda a, ww, bb: torch.nn.functional.layer_norm(a, (3,), ww, bb, eps=eps),
        lambda a, ww, bb: F.layer_norm(a, (3,), ww, bb, eps=eps),
        [x, w, b],
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_margin_losses_0d(reduction):
    x = torch.tensor(1.15, dtype=F64)
    _check(
        lambda a: torch.nn.functional.multi_margin_loss(a, torch.tensor(0), reduction=reduction),
        lambda a: F.multi_margin_loss(a, fg.tensor(0), reduction=reduction),
        [x],
    )
    for t in (0, -1):
        _check(
            lambda a, t=t: torch.nn.functional.multilabel_margin_loss(
                a, torch.tensor(t), reduction=reduction
            ),
            lambda a, t=t: F.multilabel_margin_loss(a, fg.tensor(t), reduction=reduction),
            [x],
        )


def test_avg_pool3d_negative_divisor_and_lu_solve_of_an_empty_batch_as_torch():
    x = np.random.default_rng(0).random((1, 2, 2, 2, 2))
    for d in (-2, 3):
        got = fg.nn.functional.avg_pool3d(fg.tensor(x), 2, divisor_override=d)
        want = torch.nn.functional.avg_pool3d(torch.tensor(x), 2, divisor_override=d)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="divisor_override"):
        fg.nn.functional.avg_pool3d(fg.tensor(x), 2, divisor_override=0)
    got = fg.linalg.lu_solve(fg.zeros(0, 3, 3), fg.ones(0, 3, dtype=fg.int32), fg.zeros(0, 3, 2))
    assert tuple(got.shape) == (0, 3, 2)
