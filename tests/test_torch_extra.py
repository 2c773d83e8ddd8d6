"""Tests for _torch_extra: PyTorch's functions written as compositions of ferrograd ops."""

from __future__ import annotations

import math

import ferrograd as fg
import numpy as np
import pytest
from conftest import check_grad

RNG = np.random.default_rng(1234)


def T(a, **kw):
    return fg.tensor(np.asarray(a), **kw)


def close(a, b, rtol=1e-10, atol=1e-12):
    a = a.numpy() if isinstance(a, fg.Tensor) else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)


def torch_grad(torch, fn, arrays, w):
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    y = fn(*ts)
    (y * torch.tensor(w)).sum().backward()
    return [t.grad.numpy() for t in ts]


def fg_grad(fn, arrays, w):
    xs = [fg.tensor(np.asarray(a, dtype=np.float64)) for a in arrays]
    key = fg.GradKey()
    for x in xs:
        key.attach(x)
    y = fn(*xs)
    key.backward((y * fg.tensor(w)).sum())
    return [x.grad.numpy() for x in xs]


def grads_match_torch(fn_fg, fn_t, arrays, rtol=1e-10, atol=1e-12):
    torch = pytest.importorskip("torch")
    out = fn_fg(*[fg.tensor(a) for a in arrays])
    w = RNG.uniform(0.5, 1.5, size=tuple(out.shape))
    for g, e in zip(fg_grad(fn_fg, arrays, w), torch_grad(torch, fn_t, arrays, w)):
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)


# ------------------------------------------------------------------- special functions

WIDE = np.concatenate(
    [
        np.linspace(-30.3, 30.7, 611),
        np.logspace(-8, 8, 97),
        1 + np.logspace(-9, -1, 9),
        2 - np.logspace(-9, -1, 9),
        [0.5, 1.5, 2.5, 12.5],
    ]
)


def _rel_close(a, b, rtol, atol):
    a, b = np.asarray(a), np.asarray(b)
    fin = np.isfinite(b)
    np.testing.assert_array_equal(np.isfinite(a), fin)
    np.testing.assert_allclose(a[fin], b[fin], rtol=rtol, atol=atol)


def test_lgamma_matches_torch_wide():
    torch = pytest.importorskip("torch")
    got = fg.lgamma(T(WIDE)).numpy()
    _rel_close(got, torch.lgamma(torch.tensor(WIDE)).numpy(), 1e-10, 1e-13)
    # the poles
    assert np.all(np.isinf(fg.lgamma(T([0.0, -1.0, -7.0])).numpy()))


def test_digamma_and_polygamma_match_torch():
    torch = pytest.importorskip("torch")
    x = WIDE[np.abs(WIDE - np.round(WIDE)) > 1e-6]
    _rel_close(fg.digamma(T(x)).numpy(), torch.digamma(torch.tensor(x)).numpy(), 1e-10, 1e-13)
    _rel_close(
        fg.polygamma(0, T(x)).numpy(), torch.polygamma(0, torch.tensor(x)).numpy(), 1e-10, 1e-13
    )
    # torch's own trigamma is good to ~5e-10 only
    _rel_close(
        fg.polygamma(1, T(x)).numpy(), torch.polygamma(1, torch.tensor(x)).numpy(), 2e-9, 1e-13
    )
    xp = x[x > 0.1]
    for n in (2, 3):
        _rel_close(
            fg.polygamma(n, T(xp)).numpy(),
            torch.polygamma(n, torch.tensor(xp)).numpy(),
            1e-9,
            1e-12,
        )
    d = fg.digamma(T([0.0, -0.0, -2.0])).numpy()
    assert d[0] == -np.inf and d[1] == np.inf and np.isnan(d[2])


def test_polygamma_against_mpmath():
    mpmath = pytest.importorskip("mpmath")
    x = np.array([-7.3, -2.5, -0.4, 0.2, 0.7, 1.46, 3.3, 11.0, 250.0])
    for n in (0, 1, 2, 3):
        got = fg.polygamma(n, T(x)).numpy()
        want = np.array([float(mpmath.psi(n, v)) for v in x])
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-14)


def test_erfinv_matches_torch():
    torch = pytest.importorskip("torch")
    y = np.concatenate(
        [
            np.linspace(-0.9999, 0.9999, 801),
            1 - np.logspace(-16, -1, 40),
            -1 + np.logspace(-16, -1, 40),
            [0.0, 0.5, -0.5],
        ]
    )
    _rel_close(fg.erfinv(T(y)).numpy(), torch.erfinv(torch.tensor(y)).numpy(), 1e-10, 1e-14)
    e = fg.erfinv(T([1.0, -1.0, 1.5, -2.0])).numpy()
    assert e[0] == np.inf and e[1] == -np.inf and np.isnan(e[2]) and np.isnan(e[3])
    # erf(erfinv(y)) == y
    close(fg.erf(fg.erfinv(T(y[:801]))), y[:801], rtol=1e-13, atol=1e-15)


def test_i0_matches_torch():
    torch = pytest.importorskip("torch")
    x = np.concatenate([np.linspace(-700, 700, 1401), np.linspace(-35, 35, 701), [0.0]])
    _rel_close(fg.i0(T(x)).numpy(), torch.i0(torch.tensor(x)).numpy(), 1e-10, 0)


def test_mvlgamma_matches_torch():
    torch = pytest.importorskip("torch")
    x = RNG.uniform(1.6, 20, size=(3, 4))
    for p in (1, 2, 3):
        close(fg.mvlgamma(T(x), p), torch.mvlgamma(torch.tensor(x), p))
    with pytest.raises(ValueError, match="mvlgamma"):
        fg.mvlgamma(T([0.5]), 3)
    with pytest.raises(ValueError, match="mvlgamma: p"):
        fg.mvlgamma(T([2.5]), 0)


def test_special_gradients_match_torch():
    torch = pytest.importorskip("torch")
    x = np.array([-3.7, -1.2, -0.3, 0.2, 0.9, 1.0001, 1.7, 2.0, 4.4, 13.0, 80.0])
    grads_match_torch(fg.lgamma, torch.lgamma, [x])
    grads_match_torch(fg.digamma, torch.digamma, [x], rtol=2e-9)
    grads_match_torch(lambda t: fg.polygamma(0, t), lambda t: torch.polygamma(0, t), [x], 2e-9)
    y = np.array([-0.999, -0.9, -0.4, 0.0, 0.3, 0.6, 0.99, 0.999999])
    grads_match_torch(fg.erfinv, torch.erfinv, [y])
    z = np.array([-40.0, -3.0, -0.1, 0.0, 0.5, 7.0, 31.0, 100.0])
    grads_match_torch(fg.i0, torch.i0, [z])
    w = np.array([[2.1, 3.5], [7.0, 1.9]])
    grads_match_torch(lambda t: fg.mvlgamma(t, 3), lambda t: torch.mvlgamma(t, 3), [w])


def test_special_gradient_identities():
    # d lgamma = digamma, d digamma = trigamma, d erfinv = sqrt(pi)/2 exp(erfinv^2)
    x = np.array([-2.3, -0.6, 0.3, 1.0, 1.5, 2.0, 6.0, 30.0])
    w = np.ones_like(x)
    close(fg_grad(fg.lgamma, [x], w)[0], fg.digamma(T(x)), 1e-12, 1e-13)
    close(fg_grad(fg.digamma, [x], w)[0], fg.polygamma(1, T(x)), 1e-11, 1e-13)
    y = np.array([-0.99, -0.5, 0.0, 0.2, 0.7, 0.9999])
    want = math.sqrt(math.pi) / 2 * np.exp(fg.erfinv(T(y)).numpy() ** 2)
    close(fg_grad(fg.erfinv, [y], np.ones_like(y))[0], want, 1e-12, 0)


def test_special_finite_differences():
    check_grad(fg.lgamma, [np.array([[-2.6, 0.3], [1.2, 7.5]])])
    check_grad(fg.digamma, [np.array([-1.4, 0.7, 3.0, 15.0])])
    check_grad(lambda t: fg.polygamma(1, t), [np.array([-0.3, 0.8, 4.0])], rtol=1e-4)
    check_grad(fg.erfinv, [np.array([-0.95, -0.2, 0.4, 0.8])])
    check_grad(fg.i0, [np.array([-2.0, 0.4, 5.0])])
    check_grad(fg.i0, [np.array([-33.0])], rtol=1e-6, atol=1e-3)
    check_grad(lambda t: fg.mvlgamma(t, 2), [np.array([1.3, 4.0])])


def test_special_noncontiguous_and_methods():
    torch = pytest.importorskip("torch")
    a = RNG.uniform(0.1, 5, size=(3, 4))
    x = T(a).T
    close(fg.lgamma(x), torch.lgamma(torch.tensor(a).T))
    close(x.digamma(), torch.digamma(torch.tensor(a).T), 1e-10, 1e-13)
    close(x.polygamma(1), torch.polygamma(1, torch.tensor(a).T), 2e-9)
    close((x / 6).erfinv(), torch.erfinv(torch.tensor(a).T / 6))
    close(x.i0(), torch.i0(torch.tensor(a).T))
    # integer input gives the default float dtype
    assert fg.lgamma(T([1, 2, 3])).dtype.kind == "f"


def test_special_bad_input():
    with pytest.raises(TypeError, match="lgamma: input"):
        fg.lgamma([1.0])
    with pytest.raises(TypeError, match="polygamma: n"):
        fg.polygamma(1.5, T([1.0]))
    with pytest.raises(ValueError, match="polygamma: n"):
        fg.polygamma(-1, T([1.0]))
    with pytest.raises(TypeError, match="erfinv: input"):
        fg.erfinv(0.5)


def test_special_in_trace():
    def f(x):
        return fg.lgamma(x) + fg.digamma(x) + fg.erfinv(x / 10) + fg.i0(x)

    x = T([0.3, 2.5, 7.0])
    g = fg.trace(f)
    close(g(x), f(x))
    x2 = T([1.3, 4.5, 9.0])
    close(g(x2), f(x2))


# ------------------------------------------------------------------------ shape functions


def test_broadcast_tensors():
    torch = pytest.importorskip("torch")
    a, b = RNG.normal(size=(3, 1)), RNG.normal(size=(4,))
    got = fg.broadcast_tensors(T(a), T(b))
    want = torch.broadcast_tensors(torch.tensor(a), torch.tensor(b))
    for g, w in zip(got, want):
        close(g, w)
    check_grad(lambda x, y: fg.broadcast_tensors(x, y)[0] * fg.broadcast_tensors(x, y)[1], [a, b])
    with pytest.raises(fg.ShapeError, match="broadcast_tensors"):
        fg.broadcast_tensors(T(np.zeros(3)), T(np.zeros(4)))


@pytest.mark.parametrize("offset,dim1,dim2", [(0, -2, -1), (1, 0, 2), (-2, 2, 0), (0, 1, 0)])
def test_diag_embed(offset, dim1, dim2):
    torch = pytest.importorskip("torch")
    a = RNG.normal(size=(2, 3))
    close(
        fg.diag_embed(T(a), offset, dim1, dim2),
        torch.diag_embed(torch.tensor(a), offset, dim1, dim2),
    )
    close(T(a).T.diag_embed(offset), torch.tensor(a).T.diag_embed(offset))
    grads_match_torch(
        lambda x: fg.diag_embed(x, offset, dim1, dim2),
        lambda x: torch.diag_embed(x, offset, dim1, dim2),
        [a],
    )


def test_diag_embed_bad_input():
    with pytest.raises(IndexError, match="diag_embed: dim1"):
        fg.diag_embed(T(np.zeros(3)), 0, 5, 0)
    with pytest.raises(ValueError, match="diag_embed: dim1 and dim2"):
        fg.diag_embed(T(np.zeros(3)), 0, 1, 1)
    with pytest.raises(fg.ShapeError, match="diag_embed"):
        fg.diag_embed(T(1.0))


def test_diagflat():
    torch = pytest.importorskip("torch")
    a = RNG.normal(size=(2, 2))
    for off in (0, 2, -1):
        close(fg.diagflat(T(a), off), torch.diagflat(torch.tensor(a), off))
    check_grad(lambda x: fg.diagflat(x, 1), [a])


def test_hsplit_vsplit_dsplit():
    torch = pytest.importorskip("torch")
    a = RNG.normal(size=(4, 6, 2))
    for fn, arg in (
        ("hsplit", 3),
        ("hsplit", [1, 4]),
        ("vsplit", 2),
        ("vsplit", [3]),
        ("dsplit", 2),
    ):
        got = getattr(fg, fn)(T(a), arg)
        want = getattr(torch, fn)(torch.tensor(a), arg)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            close(g, w)
    got = fg.hsplit(T(np.arange(6.0)), 2)
    assert [g.tolist() for g in got] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    with pytest.raises(ValueError, match="hsplit"):
        fg.hsplit(T(a), 4)
    with pytest.raises(fg.ShapeError, match="dsplit"):
        fg.dsplit(T(np.zeros((2, 2))), 1)
    with pytest.raises(TypeError, match="vsplit: indices_or_sections"):
        fg.vsplit(T(a), 1.5)


def test_vander():
    torch = pytest.importorskip("torch")
    a = np.array([0.0, 1.5, -2.0, 3.0])
    for n, inc in ((None, False), (3, True), (5, False), (0, False)):
        close(fg.vander(T(a), n, inc), torch.vander(torch.tensor(a), n, inc))
    close(fg.vander(T([1, 2, 3]), 3), torch.vander(torch.tensor([1, 2, 3]), 3))
    check_grad(lambda x: fg.vander(x, 4), [a])
    with pytest.raises(fg.ShapeError, match="vander"):
        fg.vander(T(np.zeros((2, 2))))


def test_combinations():
    torch = pytest.importorskip("torch")
    a = RNG.normal(size=4)
    for r, rep in ((2, False), (3, False), (2, True), (1, False), (5, False)):
        close(fg.combinations(T(a), r, rep), torch.combinations(torch.tensor(a), r, rep))
    check_grad(lambda x: fg.combinations(x, 2), [a])
    with pytest.raises(fg.ShapeError, match="combinations"):
        fg.combinations(T(np.zeros((2, 2))))
    with pytest.raises(ValueError, match="combinations: r"):
        fg.combinations(T(a), -1)


def test_unravel_index():
    torch = pytest.importorskip("torch")
    idx = np.array([[0, 5], [11, -1]])
    got = fg.unravel_index(T(idx), (3, 4))
    want = torch.unravel_index(torch.tensor(idx), (3, 4))
    for g, w in zip(got, want):
        assert g.tolist() == w.tolist()
    assert [t.tolist() for t in fg.unravel_index(7, (2, 4))] == [1, 3]
    with pytest.raises(IndexError, match="unravel_index"):
        fg.unravel_index(T([12]), (3, 4))
    with pytest.raises(TypeError, match="unravel_index"):
        fg.unravel_index(T([1.0]), (3, 4))


def test_chain_matmul_and_vdot():
    torch = pytest.importorskip("torch")
    a, b, c = RNG.normal(size=(2, 3)), RNG.normal(size=(3, 4)), RNG.normal(size=(4, 2))
    close(
        fg.chain_matmul(T(a), T(b), T(c)),
        torch.linalg.multi_dot([torch.tensor(m) for m in (a, b, c)]),
    )
    check_grad(fg.chain_matmul, [a, b, c])
    with pytest.raises(fg.ShapeError, match="chain_matmul"):
        fg.chain_matmul(T(a), T(a))
    u, v = RNG.normal(size=5), RNG.normal(size=5)
    close(fg.vdot(T(u), T(v)), torch.vdot(torch.tensor(u), torch.tensor(v)))
    check_grad(fg.vdot, [u, v])
    with pytest.raises(fg.ShapeError, match="vdot"):
        fg.vdot(T(u), T(v[:3]))


def test_matrix_exp():
    torch = pytest.importorskip("torch")
    for scale in (0.1, 1.0, 30.0):
        a = RNG.normal(size=(2, 4, 4)) * scale
        close(fg.matrix_exp(T(a)), torch.matrix_exp(torch.tensor(a)), 1e-10, 1e-12)
    a = RNG.normal(size=(3, 3))
    close(fg.matrix_exp(T(a).T), torch.matrix_exp(torch.tensor(a).T))
    close(T(a).matrix_exp(), torch.matrix_exp(torch.tensor(a)))
    grads_match_torch(fg.matrix_exp, torch.matrix_exp, [a * 2])
    check_grad(fg.matrix_exp, [a])
    with pytest.raises(fg.ShapeError, match="matrix_exp"):
        fg.matrix_exp(T(np.zeros((2, 3))))


def test_matrix_exp_in_trace():
    a = RNG.normal(size=(3, 3))
    g = fg.trace(fg.matrix_exp)
    close(g(T(a)), fg.matrix_exp(T(a)))
    close(g(T(a * 5)), fg.matrix_exp(T(a * 5)))


def test_cov_corrcoef():
    torch = pytest.importorskip("torch")
    x = RNG.normal(size=(3, 6))
    fw = np.array([1, 2, 1, 3, 1, 2])
    aw = RNG.uniform(0.2, 2.0, size=6)
    tx = torch.tensor(x)
    close(fg.cov(T(x)), torch.cov(tx))
    close(fg.cov(T(x), correction=0), torch.cov(tx, correction=0))
    close(fg.cov(T(x), fweights=T(fw)), torch.cov(tx, fweights=torch.tensor(fw)))
    close(
        fg.cov(T(x), fweights=T(fw), aweights=T(aw)),
        torch.cov(tx, fweights=torch.tensor(fw), aweights=torch.tensor(aw)),
    )
    close(fg.cov(T(x[0])), torch.cov(tx[0]))
    close(fg.cov(T(x.T).T), torch.cov(tx.T.T))
    close(fg.corrcoef(T(x)), torch.corrcoef(tx))
    close(T(x).corrcoef(), torch.corrcoef(tx))
    grads_match_torch(
        lambda t: fg.cov(t, aweights=fg.tensor(aw)),
        lambda t: torch.cov(t, aweights=torch.tensor(aw)),
        [x],
    )
    grads_match_torch(fg.corrcoef, torch.corrcoef, [x])
    check_grad(fg.cov, [x])
    check_grad(fg.corrcoef, [x])
    with pytest.raises(fg.ShapeError, match="cov: fweights"):
        fg.cov(T(x), fweights=T(fw[:3]))
    with pytest.raises(fg.DTypeError, match="cov: fweights"):
        fg.cov(T(x), fweights=T(aw))
    with pytest.raises(ValueError, match="cov: aweights"):
        fg.cov(T(x), aweights=T(-aw))
    with pytest.raises(fg.ShapeError, match="corrcoef"):
        fg.corrcoef(T(np.zeros((2, 2, 2))))


# ------------------------------------------------------------------------ reductions


def test_logcumsumexp():
    torch = pytest.importorskip("torch")
    a = RNG.normal(size=(3, 5)) * 10
    a[0, 0] = -1000.0
    for d in (0, 1, -1):
        close(fg.logcumsumexp(T(a), d), torch.logcumsumexp(torch.tensor(a), d))
    close(T(a).T.logcumsumexp(0), torch.logcumsumexp(torch.tensor(a).T, 0))
    b = np.array([-np.inf, 0.0, -np.inf, 2.0])
    close(fg.logcumsumexp(T(b), 0), torch.logcumsumexp(torch.tensor(b), 0))
    grads_match_torch(lambda t: fg.logcumsumexp(t, 1), lambda t: torch.logcumsumexp(t, 1), [a])
    check_grad(lambda t: fg.logcumsumexp(t, 0), [a / 10])
    with pytest.raises(IndexError, match="logcumsumexp"):
        fg.logcumsumexp(T(a), 2)


def test_mode():
    torch = pytest.importorskip("torch")
    a = np.array([[1.0, 2.0, 2.0, 3.0, 3.0, 1.0], [5.0, 4.0, 4.0, 5.0, 4.0, 0.0]])
    for d, kd in ((1, False), (0, True), (-1, True)):
        got = fg.mode(T(a), d, kd)
        want = torch.mode(torch.tensor(a), d, kd)
        close(got.values, want.values)
        close(got.indices, want.indices)
    got = T(a).T.mode(0)
    want = torch.tensor(a).T.mode(0)
    close(got.values, want.values)
    close(got.indices, want.indices)
    # ties make finite differences meaningless: the gradient goes to the returned index
    grads_match_torch(lambda t: fg.mode(t, 1).values, lambda t: torch.mode(t, 1).values, [a])
    with pytest.raises(IndexError, match="mode"):
        fg.mode(T(a), 3)


def test_nanmedian():
    torch = pytest.importorskip("torch")
    a = RNG.normal(size=(4, 5))
    a[0, 1] = a[2, 3] = a[2, 0] = np.nan
    a[3] = np.nan
    ta = torch.tensor(a)
    close(fg.nanmedian(T(a)), torch.nanmedian(ta))
    for d, kd in ((1, False), (0, True)):
        got = fg.nanmedian(T(a), d, kd)
        want = torch.nanmedian(ta, d, kd)
        close(got.values, want.values)
        fin = ~np.isnan(want.values.numpy())
        np.testing.assert_array_equal(got.indices.numpy()[fin], want.indices.numpy()[fin])
    close(T(a).T.nanmedian(1).values, torch.nanmedian(ta.T, 1).values)
    b = RNG.normal(size=(3, 4))
    check_grad(lambda t: fg.nanmedian(t, 1).values, [b])
    check_grad(fg.nanmedian, [b])


def test_trapezoid_family():
    torch = pytest.importorskip("torch")
    y = RNG.normal(size=(3, 5))
    x1 = np.sort(RNG.normal(size=5))
    xf = np.sort(RNG.normal(size=(3, 5)), axis=1)
    ty = torch.tensor(y)
    close(fg.trapezoid(T(y)), torch.trapezoid(ty))
    close(fg.trapezoid(T(y), dx=0.5, dim=0), torch.trapezoid(ty, dx=0.5, dim=0))
    close(fg.trapezoid(T(y), T(x1)), torch.trapezoid(ty, torch.tensor(x1)))
    close(fg.trapezoid(T(y), T(xf)), torch.trapezoid(ty, torch.tensor(xf)))
    close(fg.trapz(T(y), T(x1)), torch.trapz(ty, torch.tensor(x1)))
    close(fg.trapz(T(y), 0.3, dim=0), torch.trapz(ty, dx=0.3, dim=0))
    close(fg.cumulative_trapezoid(T(y)), torch.cumulative_trapezoid(ty))
    close(fg.cumulative_trapezoid(T(y), T(x1)), torch.cumulative_trapezoid(ty, torch.tensor(x1)))
    close(fg.trapezoid(T(y).T, dim=0), torch.trapezoid(ty.T, dim=0))
    grads_match_torch(fg.trapezoid, torch.trapezoid, [y, xf])
    check_grad(lambda a, b: fg.cumulative_trapezoid(a, b), [y, x1])
    with pytest.raises(fg.ShapeError, match="trapezoid: x"):
        fg.trapezoid(T(y), T(x1[:3]))
    with pytest.raises(TypeError, match="trapezoid: give x or dx"):
        fg.trapezoid(T(y), T(x1), dx=1.0)


# ------------------------------------------------------------------------ elementwise


def test_isin():
    torch = pytest.importorskip("torch")
    e = np.array([[1, 2, 3], [4, 5, 6]])
    t = np.array([2, 6, 9])
    assert fg.isin(T(e), T(t)).tolist() == torch.isin(torch.tensor(e), torch.tensor(t)).tolist()
    inv = fg.isin(T(e), T(t), invert=True).tolist()
    assert inv == torch.isin(torch.tensor(e), torch.tensor(t), invert=True).tolist()
    assert fg.isin(T(e).T, 5).tolist() == torch.isin(torch.tensor(e).T, 5).tolist()
    assert fg.isin(3, T(t)).tolist() is False
    assert fg.isin(T([1.0, np.nan]), T([np.nan, 1.0])).tolist() == [True, False]
    with pytest.raises(TypeError, match="isin"):
        fg.isin([1], [2])


def test_sgn_signbit_take_along_dim_repeat_interleave():
    torch = pytest.importorskip("torch")
    a = np.array([-1.5, 0.0, -0.0, 2.0])
    close(fg.sgn(T(a)), torch.sgn(torch.tensor(a)))
    assert fg.signbit(T(a)).tolist() == torch.signbit(torch.tensor(a)).tolist()
    x = RNG.normal(size=(3, 4))
    idx = np.argsort(x, axis=1)
    close(
        fg.take_along_dim(T(x), T(idx), 1),
        torch.take_along_dim(torch.tensor(x), torch.tensor(idx), 1),
    )
    close(
        fg.take_along_dim(T(x), T(np.array([0, 11]))),
        torch.take_along_dim(torch.tensor(x), torch.tensor([0, 11])),
    )
    check_grad(lambda t: fg.take_along_dim(t, fg.tensor(idx), 1), [x])
    with pytest.raises(IndexError, match="take_along_dim"):
        fg.take_along_dim(T(x), T(idx + 4), 1)
    with pytest.raises(TypeError, match="take_along_dim: indices"):
        fg.take_along_dim(T(x), T(x), 1)
    close(fg.repeat_interleave(T(x), 2, 0), torch.repeat_interleave(torch.tensor(x), 2, 0))
    assert (
        fg.repeat_interleave(T([1, 0, 2])).tolist()
        == torch.repeat_interleave(torch.tensor([1, 0, 2])).tolist()
    )
    with pytest.raises(ValueError, match="repeat_interleave"):
        fg.repeat_interleave(T([1.0, 2.0]))


def test_frexp_ldexp():
    torch = pytest.importorskip("torch")
    a = np.array([0.0, 1.0, -3.5, 1e-300, 7e200])
    m, e = T(a).frexp()
    tm, te = torch.frexp(torch.tensor(a))
    close(m, tm)
    assert e.tolist() == te.tolist() and e.dtype == fg.int32
    ex = np.array([1, -2, 3, 0, 4])
    close(T(a).ldexp(T(ex)), torch.ldexp(torch.tensor(a), torch.tensor(ex)))
    close(fg.ldexp(T(a), T(ex)), torch.ldexp(torch.tensor(a), torch.tensor(ex)))
    check_grad(fg.ldexp, [np.array([1.0, -2.0]), np.array([0.5, 2.0])])
    with pytest.raises(fg.DTypeError, match="frexp"):
        fg.frexp(T([1, 2]))


def test_gcd_lcm_bitwise():
    torch = pytest.importorskip("torch")
    a = np.array([[12, 0, 7], [9, 15, 4]])
    b = np.array([8, 5, 21])
    ta, tb = torch.tensor(a), torch.tensor(b)
    assert fg.gcd(T(a), T(b)).tolist() == torch.gcd(ta, tb).tolist()
    assert fg.lcm(T(a), T(b)).tolist() == torch.lcm(ta, tb).tolist()
    assert T(a).T.gcd(T(b[:2])).tolist() == torch.gcd(ta.T, tb[:2]).tolist()
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        assert getattr(fg, name)(T(a), T(b)).tolist() == getattr(torch, name)(ta, tb).tolist()
        p, q = np.array([True, False, True]), np.array([True, True, False])
        got = getattr(fg, name)(T(p), T(q))
        assert got.tolist() == getattr(torch, name)(torch.tensor(p), torch.tensor(q)).tolist()
    assert fg.bitwise_not(T(a)).tolist() == torch.bitwise_not(ta).tolist()
    assert fg.bitwise_not(T([True, False])).tolist() == [False, True]
    assert fg.bitwise_and(T(a), 6).tolist() == torch.bitwise_and(ta, 6).tolist()
    with pytest.raises(fg.DTypeError, match="gcd: input"):
        fg.gcd(T([1.0]), T([2]))
    with pytest.raises(fg.DTypeError, match="bitwise_xor"):
        fg.bitwise_xor(T([1.0]), T([2]))
    with pytest.raises(fg.DTypeError, match="bitwise_not"):
        fg.bitwise_not(T([1.0]))


def test_randint_like_logspace():
    torch = pytest.importorskip("torch")
    x = T(np.zeros((3, 4), dtype=np.int64))
    r = fg.randint_like(x, 5)
    assert r.shape == (3, 4) and r.dtype == fg.int64
    assert r.numpy().min() >= 0 and r.numpy().max() < 5
    r = fg.randint_like(T(np.zeros(50)), 2, 4)
    assert r.dtype == fg.float64 and set(np.unique(r.numpy())) <= {2.0, 3.0}
    with pytest.raises(ValueError, match="randint_like"):
        fg.randint_like(x, 3, 3)
    for args, kw in (
        ((0, 3, 7), {}),
        ((-2, 2, 5), {"base": 2.0}),
        ((1, 1, 1), {}),
        ((0, 1, 0), {}),
    ):
        close(
            fg.logspace(*args, dtype=fg.float64, **kw),
            torch.logspace(*args, dtype=torch.float64, **kw),
            1e-13,
        )
    assert fg.logspace(0, 2, 3).dtype == fg.get_default_dtype()
    with pytest.raises(ValueError, match="logspace: steps"):
        fg.logspace(0, 1, -1)


def test_dtype_promotion():
    torch = pytest.importorskip("torch")
    names = ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
    for a in names:
        for b in names:
            want = torch.promote_types(getattr(torch, a), getattr(torch, b))
            got = fg.promote_types(a, b)
            assert str(got) == str(want).replace("torch.", ""), (a, b)
            assert fg.can_cast(a, b) == torch.can_cast(getattr(torch, a), getattr(torch, b)), (a, b)
    assert fg.promote_types(fg.int32, fg.float32) == fg.float32
    cases = [
        (T(np.zeros(2, np.int32)), 1.0),
        (T(np.zeros(2, np.int32)), 1),
        (T(np.zeros(2, np.uint8)), T(np.int64(5))),
        (T(np.zeros(2, np.int32)), T(np.float64(5))),
        (T(np.float32(1)), T(np.zeros(2, np.float64))),
        (T(np.zeros(2, bool)), 3),
        (T(np.float16(1)), 2.5),
        (T(np.int32(1)), 2.5),
        (T(np.zeros(2, np.float16)), T(np.float64(1))),
    ]

    def to_t(v):
        return torch.tensor(v.numpy()) if isinstance(v, fg.Tensor) else v

    for a, b in cases:
        want = str(torch.result_type(to_t(a), to_t(b))).replace("torch.", "")
        assert str(fg.result_type(a, b)) == want, (a, b)
    assert fg.is_floating_point(T([1.0])) and not fg.is_floating_point(T([1]))
    with pytest.raises(TypeError, match="promote_types: type1"):
        fg.promote_types("nope", "int64")
    with pytest.raises(TypeError, match="result_type"):
        fg.result_type("x", T([1]))
    with pytest.raises(TypeError, match="is_floating_point"):
        fg.is_floating_point(1.0)


# ---------------------------------------------------------------------- scatter variants


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    torch = pytest.importorskip("torch")
    x = RNG.normal(size=(3, 4))
    src = RNG.normal(size=(3, 5))
    index = np.array([[0, 1, 0, 3, 1], [2, 2, 2, 0, 1], [3, 3, 0, 0, 0]])
    got = fg.scatter_reduce(T(x), 1, T(index), T(src), reduce, include_self=include_self)
    want = torch.scatter_reduce(
        torch.tensor(x),
        1,
        torch.tensor(index),
        torch.tensor(src),
        reduce,
        include_self=include_self,
    )
    close(got, want)
    grads_match_torch(
        lambda a, s: fg.scatter_reduce(
            a, 1, fg.tensor(index), s, reduce, include_self=include_self
        ),
        lambda a, s: torch.scatter_reduce(
            a, 1, torch.tensor(index), s, reduce, include_self=include_self
        ),
        [x, src],
    )
    if reduce not in ("amax", "amin"):
        check_grad(
            lambda a, s: fg.scatter_reduce(
                a, 1, fg.tensor(index), s, reduce, include_self=include_self
            ),
            [x, src],
        )


def test_scatter_reduce_ties_and_ints_and_noncontiguous():
    torch = pytest.importorskip("torch")
    x = np.array([1.0, 5.0, 2.0])
    src = np.array([5.0, 5.0, 1.0, 2.0])
    index = np.array([1, 1, 0, 2])
    for r in ("amax", "amin"):
        grads_match_torch(
            lambda a, s, r=r: fg.scatter_reduce(a, 0, fg.tensor(index), s, r),
            lambda a, s, r=r: torch.scatter_reduce(a, 0, torch.tensor(index), s, r),
            [x, src],
        )
    xi = np.array([[1, 2], [3, 4]])
    si = np.array([[5, 6], [7, 8]])
    ii = np.array([[0, 0], [1, 0]])
    for r in ("sum", "prod", "mean", "amax", "amin"):
        got = fg.scatter_reduce(T(xi), 0, T(ii), T(si), r)
        want = torch.scatter_reduce(torch.tensor(xi), 0, torch.tensor(ii), torch.tensor(si), r)
        assert got.tolist() == want.tolist(), r
    a = RNG.normal(size=(4, 3))
    got = fg.scatter_reduce(T(a).T, 0, T(ii), T(si * 1.0), "sum")
    want = torch.scatter_reduce(
        torch.tensor(a).T, 0, torch.tensor(ii), torch.tensor(si * 1.0), "sum"
    )
    close(got, want)
    close(
        T(a).T.scatter_reduce(0, T(ii), T(si * 1.0), "amax"),
        torch.tensor(a).T.scatter_reduce(0, torch.tensor(ii), torch.tensor(si * 1.0), "amax"),
    )


def test_scatter_reduce_bad_input():
    x = T(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="scatter_reduce: reduce"):
        fg.scatter_reduce(x, 0, T([[0]]), x, "max")
    with pytest.raises(IndexError, match="scatter_reduce"):
        fg.scatter_reduce(x, 0, T([[2]]), x, "sum")
    with pytest.raises(TypeError, match="scatter_reduce: index"):
        fg.scatter_reduce(x, 0, T([[0.0]]), x, "sum")
    with pytest.raises(fg.ShapeError, match="scatter_reduce"):
        fg.scatter_reduce(x, 0, T([0]), x, "sum")


def test_index_put():
    torch = pytest.importorskip("torch")
    x = RNG.normal(size=(4, 3))
    rows, cols = np.array([0, 2, 0]), np.array([1, 1, 1])
    v = np.array([10.0, 20.0, 30.0])
    tx = torch.tensor(x)
    close(
        fg.index_put(T(x), (T(rows), T(cols)), T(v), accumulate=True),
        torch.index_put(
            tx, (torch.tensor(rows), torch.tensor(cols)), torch.tensor(v), accumulate=True
        ),
    )
    got = fg.index_put(T(x), (T(np.array([3, 1])),), T(np.array([1.0, 2.0, 3.0])))
    want = torch.index_put(tx, (torch.tensor([3, 1]),), torch.tensor([1.0, 2.0, 3.0]).double())
    close(got, want)
    mask = x > 0
    close(
        fg.index_put(T(x), (T(mask),), T(0.5)),
        torch.index_put(tx, (torch.tensor(mask),), torch.tensor(0.5, dtype=torch.float64)),
    )
    y = T(x).T.clone()
    y.index_put_((T(np.array([0, 2])),), T(np.array(7.0)))
    ty = tx.T.clone()
    ty.index_put_((torch.tensor([0, 2]),), torch.tensor(7.0, dtype=torch.float64))
    close(y, ty)
    grads_match_torch(
        lambda a, b: fg.index_put(a, (fg.tensor(rows), fg.tensor(cols)), b, accumulate=True),
        lambda a, b: torch.index_put(
            a, (torch.tensor(rows), torch.tensor(cols)), b, accumulate=True
        ),
        [x, v],
    )
    check_grad(
        lambda a, b: fg.index_put(a, (fg.tensor(np.array([2, 0])),), b),
        [x, np.array([1.0, 2.0, 3.0])],
    )
    with pytest.raises(IndexError, match="index_put"):
        fg.index_put(T(x), (T(np.array([4])),), T(1.0))
    with pytest.raises(fg.ShapeError, match="index_put: values"):
        fg.index_put(T(x), (T(np.array([0, 1])),), T(np.zeros(4)))
    with pytest.raises(TypeError, match="index_put: indices"):
        fg.index_put(T(x), (T(np.array([0.0])),), T(1.0))


def test_select_slice_diagonal_scatter():
    torch = pytest.importorskip("torch")
    x = RNG.normal(size=(4, 5))
    tx = torch.tensor(x)
    s = RNG.normal(size=5)
    close(fg.select_scatter(T(x), T(s), 0, -1), torch.select_scatter(tx, torch.tensor(s), 0, -1))
    close(T(x).T.select_scatter(T(s[:4]), 0, 2), tx.T.select_scatter(torch.tensor(s[:4]), 0, 2))
    sl = RNG.normal(size=(4, 2))
    close(
        fg.slice_scatter(T(x), T(sl), 1, 1, 5, 2),
        torch.slice_scatter(tx, torch.tensor(sl), 1, 1, 5, 2),
    )
    close(fg.slice_scatter(T(x), T(x[:2]), 0, None, 2), torch.slice_scatter(tx, tx[:2], 0, None, 2))
    for off in (0, 1, -2):
        d = torch.diagonal(tx, off).numel()
        src = RNG.normal(size=d)
        close(
            fg.diagonal_scatter(T(x), T(src), off),
            torch.diagonal_scatter(tx, torch.tensor(src), off),
        )
    b = RNG.normal(size=(3, 2, 3))
    src = RNG.normal(size=(2, 3))
    close(
        fg.diagonal_scatter(T(b), T(src), 0, 2, 0),
        torch.diagonal_scatter(torch.tensor(b), torch.tensor(src), 0, 2, 0),
    )
    grads_match_torch(
        lambda a, c: fg.diagonal_scatter(a, c, 1),
        lambda a, c: torch.diagonal_scatter(a, c, 1),
        [x, s[:4]],
    )
    check_grad(lambda a, c: fg.select_scatter(a, c, 1, 3), [x, s[:4]])
    check_grad(lambda a, c: fg.slice_scatter(a, c, 1, 1, 5, 2), [x, sl])
    with pytest.raises(fg.ShapeError, match="select_scatter: src"):
        fg.select_scatter(T(x), T(s[:3]), 0, 0)
    with pytest.raises(IndexError, match="select_scatter: index"):
        fg.select_scatter(T(x), T(s), 0, 4)
    with pytest.raises(fg.ShapeError, match="slice_scatter: src"):
        fg.slice_scatter(T(x), T(sl), 1, 0, 5, 2)
    with pytest.raises(ValueError, match="slice_scatter: step"):
        fg.slice_scatter(T(x), T(sl), 1, 0, 5, 0)
    with pytest.raises(fg.ShapeError, match="diagonal_scatter: src"):
        fg.diagonal_scatter(T(x), T(s), 0)


# ------------------------------------------------------------------------ Tensor methods


def test_fill_diagonal_():
    torch = pytest.importorskip("torch")
    for shape, wrap in (
        ((3, 3), False),
        ((7, 3), False),
        ((7, 3), True),
        ((2, 5), False),
        ((3, 3, 3), False),
    ):
        a = RNG.normal(size=shape)
        x = T(a)
        assert x.fill_diagonal_(2.5, wrap) is x
        t = torch.tensor(a)
        t.fill_diagonal_(2.5, wrap)
        close(x, t)
    with pytest.raises(fg.ShapeError, match="fill_diagonal_"):
        T(np.zeros((2, 3, 4))).fill_diagonal_(1.0)


def test_storage_offset_data_ptr_mh():
    torch = pytest.importorskip("torch")
    a = np.arange(12.0).reshape(3, 4)
    x = T(a)
    t = torch.tensor(a)
    assert x.storage_offset() == 0
    assert x[1:, 2:].storage_offset() == t[1:, 2:].storage_offset() == 6
    assert x.T[2].storage_offset() == t.T[2].storage_offset()
    if x.device == "cpu":
        assert x[1:, 2:].data_ptr() == x.data_ptr() + 48
    assert isinstance(x.data_ptr(), int)
    close(x.mH, t.mH)
    close(x.H, t.H)
    b = RNG.normal(size=(2, 3, 4))
    close(T(b).mH, torch.tensor(b).mH)
    with pytest.raises(fg.ShapeError, match="H"):
        T(b).H  # noqa: B018


def test_bitwise_operators_and_methods_on_integer_tensors():
    a = np.array([5, 3, -8, 0], dtype=np.int64)
    b = np.array([3, 1, 7, -1], dtype=np.int64)
    x, y = fg.tensor(a), fg.tensor(b)
    np.testing.assert_array_equal((x & y).numpy(), a & b)
    np.testing.assert_array_equal((x | y).numpy(), a | b)
    np.testing.assert_array_equal((x ^ y).numpy(), a ^ b)
    np.testing.assert_array_equal((~x).numpy(), ~a)
    np.testing.assert_array_equal((x & 6).numpy(), a & 6)
    np.testing.assert_array_equal((6 | x).numpy(), 6 | a)
    np.testing.assert_array_equal(x.bitwise_xor(y).numpy(), a ^ b)
    np.testing.assert_array_equal(x.bitwise_not().numpy(), ~a)
    m = fg.tensor([True, False])
    np.testing.assert_array_equal((m & fg.tensor([True, True])).numpy(), [True, False])
    np.testing.assert_array_equal((~m).numpy(), [False, True])
    with pytest.raises(fg.DTypeError, match="__and__"):
        fg.tensor([1.0]) & fg.tensor([1.0])
