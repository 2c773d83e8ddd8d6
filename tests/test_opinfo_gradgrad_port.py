"""Cases from a sweep of PyTorch's OpInfo database for second-order gradients and its less
common sample inputs: each runs the same float64 inputs through torch and ferrograd and
compares values, gradients and gradients of gradients."""

import numpy as np
import pytest
from conftest import numeric_grad

torch = pytest.importorskip("torch")

import ferrograd as fg


def _fg(t, rg=False):
    return fg.tensor(t.detach().numpy(), requires_grad=rg)


def _close(a, b, rtol=1e-10, atol=0.0):
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, fg.Tensor) else np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, equal_nan=True)


def _gradgrad(tf, ff, inputs, rtol=1e-9, atol=0.0, seed=0):
    """Values, first-order gradients of a weighted sum of the output, and the gradients of
    a weighted sum of those first-order gradients (``create_graph=True`` on both sides)."""
    rng = np.random.default_rng(seed)
    ts = [t.detach().clone().requires_grad_() for t in inputs]
    fs = [_fg(t, True) for t in inputs]
    to, fo = tf(*ts), ff(*fs)
    _close(to, fo, rtol, atol)
    w = rng.standard_normal(tuple(to.shape))
    tg = torch.autograd.grad((to * torch.from_numpy(w)).sum(), ts, create_graph=True)
    fgr = fg.autograd.grad((fo * fg.tensor(w)).sum(), fs, create_graph=True)
    for a, b in zip(tg, fgr):
        _close(a, b, rtol, atol)
    vs = [rng.standard_normal(tuple(a.shape)) for a in tg]
    tl = sum((a * torch.from_numpy(v)).sum() for a, v in zip(tg, vs))
    fl = sum((b * fg.tensor(v)).sum() for b, v in zip(fgr, vs))
    # a gradient that does not depend on the inputs may have no graph: its gradients are 0
    if not tl.requires_grad and not fl.requires_grad:
        return fgr, None
    tgg = torch.autograd.grad(tl, ts, allow_unused=True, materialize_grads=True)
    if fl.requires_grad:
        fgg = fg.autograd.grad(fl, fs, allow_unused=True, materialize_grads=True)
    else:
        fgg = [fg.zeros_like(x) for x in fs]
    for a, b in zip(tgg, fgg):
        _close(a, b, rtol, atol)
    return fgr, fgg


def _grad_fd(ff, x):
    """The first-order gradient of ``ff(x).sum()`` as a numpy array, and its central finite
    difference."""
    xf = fg.tensor(x, requires_grad=True)
    (g,) = fg.autograd.grad(ff(xf).sum(), [xf])
    (num,) = numeric_grad(lambda a: ff(fg.tensor(a, requires_grad=True)).sum().item(), [x])
    return g.numpy(), num


# --------------------------------------------------------------- 1. erfinv / ndtri


@pytest.mark.parametrize(
    "name,lo,hi",
    [("erfinv", -0.97, 0.97), ("special.ndtri", 0.02, 0.98)],
)
def test_inverse_special_functions_second_and_third_order(name, lo, hi):
    # the last Newton step used to carry the gradient from a detached guess, which gives the
    # right first derivative but the second derivative of the step (0 in erfinv's centre)
    tf = torch.erfinv if name == "erfinv" else torch.special.ndtri
    ff = fg.erfinv if name == "erfinv" else fg.special.ndtri
    y = torch.tensor(np.linspace(lo, hi, 23), dtype=torch.float64)
    _gradgrad(tf, ff, [y])
    # third order too
    t = y.clone().requires_grad_()
    f = _fg(y, True)
    tg = t
    fgv = f
    to, fo = tf(t), ff(f)
    for _ in range(3):
        (tg,) = torch.autograd.grad(to.sum(), t, create_graph=True)
        (fgv,) = fg.autograd.grad(fo.sum(), f, create_graph=True)
        to, fo = tg, fgv
    _close(tg, fgv, rtol=1e-9)
    # the second derivative against finite differences of the first
    g, num = _grad_fd(lambda a: fg.autograd.grad(ff(a).sum(), a, create_graph=True)[0], y.numpy())
    np.testing.assert_allclose(g, num, rtol=1e-5)


def test_erfinv_gradient_at_the_edges():
    y = torch.tensor([-1.0, -0.0, 0.0, 1.0, 1.5, float("nan")], dtype=torch.float64)
    t = y.clone().requires_grad_()
    f = _fg(y, True)
    to, fo = torch.erfinv(t), fg.erfinv(f)
    _close(to, fo)
    assert np.array_equal(np.signbit(to.detach().numpy()), np.signbit(fo.numpy()))
    _close(torch.autograd.grad(to.sum(), t)[0], fg.autograd.grad(fo.sum(), f)[0])


# ------------------------------------------------------------------- 2. nanquantile


def test_nanquantile_gradient_in_q():
    # a tensor q is differentiable with linear interpolation (as in quantile); nanquantile
    # gave it no gradient. Rows with different counts of NaN have different slopes in q.
    x = torch.tensor(
        [[-4.8, 1.5, float("nan"), 0.25, 3.0], [2.0, float("nan"), -1.0, float("nan"), 7.5]],
        dtype=torch.float64,
    )
    q = torch.tensor([0.2318, 0.0788, 0.7], dtype=torch.float64)
    for dim in (1, None):
        _gradgrad(
            lambda a, b, d=dim: torch.nanquantile(a, b, dim=d),
            lambda a, b, d=dim: fg.nanquantile(a, b, dim=d),
            [x, q],
            rtol=1e-12,
        )
    (num,) = numeric_grad(
        lambda qq: fg.nanquantile(_fg(x), fg.tensor(qq), dim=1).sum().item(), [q.numpy()]
    )
    qf = _fg(q, True)
    (g,) = fg.autograd.grad(fg.nanquantile(_fg(x), qf, dim=1).sum(), [qf])
    np.testing.assert_allclose(g.numpy(), num, rtol=1e-7)


# -------------------------------------------------------------------- 3. linspace


def test_linspace_tensor_bounds_in_double():
    # a float32 0-d tensor bound was spaced in float32, then cast: points off by 1e-8
    for start, end in [(torch.tensor(-2.0), -3), (torch.tensor(1.1), torch.tensor(2))]:
        for dt in (torch.float64, torch.float32):
            t = torch.linspace(start, end, 50, dtype=dt)
            f = fg.linspace(
                _fg(start),
                _fg(end) if isinstance(end, torch.Tensor) else end,
                50,
                dtype=getattr(fg, str(dt).split(".")[1]),
            )
            assert str(f.dtype) == str(t.dtype).split(".")[1]
            _close(t, f, rtol=1e-13 if dt == torch.float64 else 1e-6)
    with pytest.raises(RuntimeError, match="0-dimensional"):
        torch.linspace(torch.tensor([1.0]), 2.0, 3)
    with pytest.raises(RuntimeError, match="0-dimensional"):
        fg.linspace(fg.tensor([1.0]), 2.0, 3)


# ------------------------------------------------------------------- 4. nextafter


def test_nextafter_gradient_passes_to_input():
    # PyTorch's rule: the gradient goes to input unchanged (summed over broadcasting) and
    # other gets zero; it raised NotImplementedError
    a = torch.tensor([[1.0, -2.5, 0.0]], dtype=torch.float64)
    b = torch.tensor([[3.0], [-1.0]], dtype=torch.float64)
    fgr, _ = _gradgrad(torch.nextafter, fg.nextafter, [a, b], rtol=0)
    assert float(fgr[1].abs().sum()) == 0.0
    af = _fg(a, True)
    (g,) = fg.autograd.grad(fg.nextafter(af, _fg(b)).sum(), [af])
    assert g.tolist() == [[2.0, 2.0, 2.0]]


def test_nextafter_gradient_is_zero_where_the_arguments_are_equal():
    # PyTorch's result is other itself where input == other: no gradient to input there
    # (NaN compares unequal, so it passes)
    nan, inf = float("nan"), float("inf")
    a = torch.tensor([nan, 1.0, inf, inf, 0.0, 0.0, 1.0], dtype=torch.float64)
    b = torch.tensor([1.0, nan, inf, 1.0, -0.0, 0.0, 2.0], dtype=torch.float64)
    t = [x.clone().requires_grad_() for x in (a, b)]
    f = [_fg(x, True) for x in (a, b)]
    tg = torch.autograd.grad(torch.nextafter(*t).sum(), t)
    fgr = fg.autograd.grad(fg.nextafter(*f).sum(), f)
    for x, y in zip(tg, fgr):
        assert y.tolist() == x.tolist()
    # broadcast: the ties of each row
    a2 = torch.tensor([[1.0], [2.0]], dtype=torch.float64, requires_grad=True)
    b2 = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    af = _fg(a2, True)
    (tg,) = torch.autograd.grad(torch.nextafter(a2, b2).sum(), [a2])
    (fgr,) = fg.autograd.grad(fg.nextafter(af, _fg(b2)).sum(), [af])
    assert fgr.tolist() == tg.tolist() == [[2.0], [2.0]]


# -------------------------------------------------------------- 5. Frobenius norm


@pytest.mark.parametrize("fn", ["norm", "matrix_norm"])
def test_frobenius_norm_gradient_at_zero(fn):
    # sqrt(sum(A^2)) gave 0 * inf = NaN at a zero matrix; PyTorch's subgradient there is 0,
    # as for the vector 2-norm
    tf = getattr(torch.linalg, fn)
    ff = getattr(fg.linalg, fn)
    for A in (torch.zeros(5, 5, dtype=torch.float64), torch.zeros(2, 3, 4, dtype=torch.float64)):
        t = A.clone().requires_grad_()
        f = _fg(A, True)
        kw = {"dim": (0, 2)} if A.ndim == 3 else {}
        to, fo = tf(t, "fro", **kw), ff(f, "fro", **kw)
        _close(to, fo)
        _close(torch.autograd.grad(to.sum(), t)[0], fg.autograd.grad(fo.sum(), f)[0])
    # away from zero: values, gradients and second order as before
    B = torch.tensor([[0.0, 0.0], [1e-3, -2.0]], dtype=torch.float64)
    _gradgrad(lambda x: tf(x, "fro"), lambda x: ff(x, "fro"), [B], rtol=1e-12)
    g, num = _grad_fd(lambda x: ff(x, "fro"), B.numpy())
    np.testing.assert_allclose(g, num, rtol=1e-7, atol=1e-9)


# ------------------------------------------------------------------------ 6. lstsq


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("shape", [(4, 3), (2, 4, 3), (2, 3, 4)])
def test_lstsq_fields_follow_the_driver(driver, shape):
    # residuals were filled for gelsy (PyTorch's CPU default) and never with their own
    # shape for the others; rank was a value for gels; singular_values were always empty
    rng = np.random.default_rng(0)
    A = torch.from_numpy(rng.standard_normal(shape))
    B = torch.from_numpy(rng.standard_normal((*shape[:-1], 2)))
    fa, fb = _fg(A), _fg(B)
    # no driver: gelsy on the CPU, gels on CUDA (PyTorch's defaults there)
    same = driver or ("gelsy" if str(fa.device) == "cpu" else "gels")
    t = torch.linalg.lstsq(A, B, driver=same)
    f = fg.linalg.lstsq(fa, fb, driver=driver)
    for a, b in zip(t, f):
        assert str(b.dtype) == str(a.dtype).split(".")[1]
        _close(a, b, rtol=1e-9, atol=1e-12)

    # gradients of the solution and the residuals
    def loss(lib):
        def f(a, b):
            r = lib.linalg.lstsq(a, b, driver=same if lib is torch else driver)
            return r.solution.sum() + r.residuals.sum()

        return f

    _gradgrad(loss(torch), loss(fg), [A, B], rtol=1e-8, atol=1e-10)


def test_lstsq_rank_deficient_and_bad_driver():
    rng = np.random.default_rng(1)
    A = torch.from_numpy(rng.standard_normal((2, 5, 3)))
    A[1, :, 2] = A[1, :, 1]
    B = torch.from_numpy(rng.standard_normal((2, 5, 2)))
    for driver in ("gelsy", "gelsd"):
        t = torch.linalg.lstsq(A, B, driver=driver)
        f = fg.linalg.lstsq(_fg(A), _fg(B), driver=driver)
        assert f.rank.tolist() == t.rank.tolist() == [3, 2]
        assert tuple(f.residuals.shape) == tuple(t.residuals.shape) == (0,)
    with pytest.raises(RuntimeError, match="driver"):
        torch.linalg.lstsq(A, B, driver="qr")
    with pytest.raises(RuntimeError, match="driver"):
        fg.linalg.lstsq(_fg(A), _fg(B), driver="qr")


# ------------------------------------------------------------ 7. empty batches, tolerances


def test_searchsorted_and_lu_solve_with_empty_rows():
    # reshape(-1, 0) of an empty batch is ambiguous: both raised ValueError
    for s_shape, v_shape in [((0, 0), (0, 0)), ((0, 3), (0, 2)), ((2, 0), (2, 3))]:
        s, v = torch.zeros(s_shape, dtype=torch.float64), torch.zeros(v_shape, dtype=torch.float64)
        for right in (False, True):
            t = torch.searchsorted(s, v, right=right)
            f = fg.searchsorted(_fg(s), _fg(v), right=right)
            assert tuple(f.shape) == tuple(t.shape) and f.tolist() == t.tolist()
    for batch in ((), (2,)):
        LU = torch.zeros(*batch, 0, 0, dtype=torch.float64)
        piv = torch.zeros(*batch, 0, dtype=torch.int32)
        B = torch.zeros(*batch, 0, 4, dtype=torch.float64)
        t = torch.linalg.lu_solve(LU, piv, B, adjoint=True)
        f = fg.linalg.lu_solve(_fg(LU), _fg(piv), _fg(B), adjoint=True)
        assert tuple(f.shape) == tuple(t.shape)
        assert tuple(fg.lu_unpack(_fg(LU), _fg(piv))[0].shape) == tuple(
            torch.lu_unpack(LU, piv)[0].shape
        )


@pytest.mark.parametrize("fn", ["lu_factor", "lu_factor_ex", "lu"])
def test_lu_of_an_empty_batch_is_on_the_graph(fn):
    # the factors of an empty batch were constants: differentiating them raised
    A = torch.zeros(0, 3, 5, dtype=torch.float64)
    t = A.clone().requires_grad_()
    f = _fg(A, True)
    to, fo = getattr(torch.linalg, fn)(t), getattr(fg.linalg, fn)(f)
    idx = 1 if fn == "lu" else 0  # (lu's P has no gradient)
    assert fo[idx].requires_grad == to[idx].requires_grad
    (tg,) = torch.autograd.grad(to[idx].sum(), t)
    (fgr,) = fg.autograd.grad(fo[idx].sum(), f)
    assert tuple(fgr.shape) == tuple(tg.shape) == (0, 3, 5)


def test_matrix_rank_tensor_tolerances():
    # tensor atol/rtol (broadcast against the batch) raised: only numbers were read
    rng = np.random.default_rng(0)
    A = rng.standard_normal((3, 4, 5))
    A[1] *= 1e-3
    tA, fA = torch.from_numpy(A), fg.tensor(A)
    cases = [
        {"atol": [0.0, 0.1, 0.5]},
        {"rtol": [0.0, 0.1, 1e-20]},
        {"atol": 0.0, "rtol": [[0.9], [0.1]]},
        {"atol": [-1.0, 0.0, 2.0]},
        {"atol": 2.0, "rtol": 0.5},
    ]
    for kw in cases:
        tk = {k: torch.tensor(v, dtype=torch.float64) for k, v in kw.items()}
        fk = {k: fg.tensor(np.asarray(v, dtype=np.float64)) for k, v in kw.items()}
        t, f = torch.linalg.matrix_rank(tA, **tk), fg.linalg.matrix_rank(fA, **fk)
        assert str(f.dtype) == "int64" and f.tolist() == t.tolist(), kw
    empty = torch.zeros(0, 5, 5, dtype=torch.float64)
    t = torch.linalg.matrix_rank(empty, rtol=torch.zeros(0, dtype=torch.float64))
    f = fg.linalg.matrix_rank(_fg(empty), rtol=fg.zeros(0, dtype=fg.float64))
    assert tuple(f.shape) == tuple(t.shape) == (0,)


# -------------------------------------------------------------------------- 8. histc


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_histc_entries_on_bin_edges(dtype):
    # PyTorch bins an entry as trunc((x - min) * bins / (max - min)); comparing with the
    # edges put 5e-6 of [0, 1e-5] in 1000 bins into bin 500 instead of 499
    x = torch.tensor([0.0, 5e-6, 1e-5, 1.2e-5, float("nan")], dtype=dtype)
    t = torch.histc(x, bins=1000, min=0.0, max=1e-5)
    f = fg.histc(_fg(x), bins=1000, min=0.0, max=1e-5)
    assert f.numpy().tolist() == t.tolist()
    rng = np.random.default_rng(0)
    for bins, lo, hi in [(7, -3.3, 4.0), (1000, 1e-7, 0.1), (3, 0.0, 1.0)]:
        edges = np.linspace(lo, hi, bins + 1)
        a = np.concatenate([rng.uniform(lo - 0.5, hi + 0.5, 40), edges])
        x = torch.tensor(a, dtype=dtype)
        t = torch.histc(x, bins=bins, min=lo, max=hi)
        f = fg.histc(_fg(x), bins=bins, min=lo, max=hi)
        assert f.numpy().tolist() == t.tolist()


# ----------------------------------------------------------------------- 9. gradient


def test_gradient_spacing_none_is_unit_steps():
    # spacing=None (PyTorch's default in its signature) raised TypeError
    x = torch.tensor([[1.0, 4.0, 2.0, 7.0], [0.5, 3.0, 9.0, -1.0]], dtype=torch.float64)
    for kw in ({"dim": None, "spacing": None}, {"spacing": None, "dim": 1, "edge_order": 2}):
        t = torch.gradient(x, **kw)
        f = fg.gradient(_fg(x), **kw)
        assert len(f) == len(t)
        for a, b in zip(t, f):
            _close(a, b, rtol=0)


# --------------------------------------------------------------------------- 10. fill


def test_fill_result_is_on_the_input_graph():
    # fill's result did not depend on input: differentiating it in input raised; PyTorch's
    # gives input a zero gradient (and the value tensor the sum)
    x = torch.tensor([1.0, float("nan"), -3.0], dtype=torch.float64)
    v = torch.tensor(2.0, dtype=torch.float64)
    fgr, _ = _gradgrad(torch.fill, fg.fill, [x, v], rtol=0)
    assert fgr[0].tolist() == [0.0, 0.0, 0.0]
    _gradgrad(lambda a: torch.fill(a, 2.5), lambda a: fg.fill(a, 2.5), [x], rtol=0)
    vf = _fg(v, True)
    (g,) = fg.autograd.grad(fg.fill(_fg(x), vf).sum(), [vf])
    (num,) = numeric_grad(lambda vv: fg.fill(_fg(x), fg.tensor(vv)).sum().item(), [v.numpy()])
    np.testing.assert_allclose(g.numpy(), num, rtol=1e-8)


# ------------------------------------------------------------- 11. tricubic grid_sample


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_bicubic_on_volumes(padding_mode, align_corners):
    # bicubic on a 5-D input (tricubic: the cubic kernel over all three axes) raised
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((2, 2, 3, 4, 5)))
    g = torch.from_numpy(rng.uniform(-1.3, 1.3, (2, 2, 3, 2, 3)))

    def run(lib):
        return lambda a, b: lib.nn.functional.grid_sample(
            a, b, mode="bicubic", padding_mode=padding_mode, align_corners=align_corners
        )

    _gradgrad(run(torch), run(fg), [x, g], rtol=1e-10, atol=1e-12)
    if padding_mode == "zeros":
        w = fg.tensor(rng.standard_normal((2, 2, 2, 3, 2)))

        def loss(a, b):
            return (run(fg)(fg.tensor(a), fg.tensor(b)) * w).sum().item()

        xf, gf = _fg(x, True), _fg(g, True)
        grads = fg.autograd.grad((run(fg)(xf, gf) * w).sum(), [xf, gf])
        nums = numeric_grad(loss, [x.numpy(), g.numpy()])
        for a, b in zip(grads, nums):
            np.testing.assert_allclose(a.numpy(), b, rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------------- 12. logaddexp


@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
def test_logaddexp_second_derivative_at_ties(name):
    # max(a, b) + log1p(exp(-|a - b|)) gave second derivative 0 where a == b (1/4 there):
    # max and abs are only piecewise smooth
    a = torch.tensor([0.0, 0.0, 1.0, -3.5, 2.0, 0.25], dtype=torch.float64)
    b = torch.tensor([0.0, -0.0, 1.0, -3.5, -1.0, 7.0], dtype=torch.float64)
    tf, ff = getattr(torch, name), getattr(fg, name)
    _gradgrad(tf, ff, [a, b], rtol=1e-12, atol=1e-15)
    g, num = _grad_fd(
        lambda x: fg.autograd.grad(ff(x, _fg(b)).sum(), x, create_graph=True)[0], a.numpy()
    )
    np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-9)


def test_logaddexp_gradient_at_infinities():
    # PyTorch's g / (1 + exp(b - a)): 1 and 0 against -inf, NaN for the same infinity twice
    inf = float("inf")
    a = torch.tensor([inf, inf, -inf, 1.0, -inf], dtype=torch.float64)
    b = torch.tensor([inf, -inf, -inf, inf, 2.0], dtype=torch.float64)
    t = [x.clone().requires_grad_() for x in (a, b)]
    f = [_fg(x, True) for x in (a, b)]
    to, fo = torch.logaddexp(*t), fg.logaddexp(*f)
    _close(to, fo)
    for x, y in zip(torch.autograd.grad(to.sum(), t), fg.autograd.grad(fo.sum(), f)):
        _close(x, y)


# ------------------------------------------------------------- 13. complex with infinities


def test_complex_numpy_keeps_infinite_parts():
    # re + 1j * im made the real part NaN wherever im was infinite (1j * inf = nan + inf j)
    inf, nan = float("inf"), float("nan")
    re = torch.tensor([inf, -inf, 1.0, nan, 0.0], dtype=torch.float64)
    im = torch.tensor([inf, inf, -inf, inf, -0.0], dtype=torch.float64)
    t = torch.complex(re, im).numpy()
    f = fg.complex(_fg(re), _fg(im)).numpy()
    assert f.dtype == t.dtype
    np.testing.assert_array_equal(f.real, t.real)
    np.testing.assert_array_equal(f.imag, t.imag)
    assert np.array_equal(np.signbit(f.imag), np.signbit(t.imag))
    p = fg.polar(fg.tensor(np.array([inf, 2.0])), fg.tensor(np.array([0.0, 1.0]))).numpy()
    q = torch.polar(
        torch.tensor([inf, 2.0], dtype=torch.float64), torch.tensor([0.0, 1.0], dtype=torch.float64)
    ).numpy()
    np.testing.assert_array_equal(p, q)


# ----------------------------------------------------------------------- 14. copysign


def test_copysign_result_is_on_the_graph_of_other():
    # only other requiring grad: the result was off the graph and differentiating it raised;
    # PyTorch's gives other a zero gradient
    a = torch.tensor([[1.0, -2.0, 0.0]], dtype=torch.float64)
    b = torch.tensor([[-1.0], [3.0]], dtype=torch.float64)
    bt = b.clone().requires_grad_()
    bf = _fg(b, True)
    to, fo = torch.copysign(a, bt), fg.copysign(_fg(a), bf)
    _close(to, fo, rtol=0)
    assert fo.requires_grad
    (tg,) = torch.autograd.grad(to.sum(), bt)
    (fgr,) = fg.autograd.grad(fo.sum(), bf)
    assert fgr.tolist() == tg.tolist()
    # both requiring grad: input's gradient is the sign factor, as before (away from an
    # input of 0, where PyTorch's second order is 0 / 0)
    a2 = torch.tensor([[1.0, -2.0, 0.5]], dtype=torch.float64)
    _gradgrad(torch.copysign, fg.copysign, [a2, b], rtol=0)
    w = fg.tensor(np.array([[1.0], [3.0]]))
    x0 = a2.numpy()
    (num,) = numeric_grad(lambda x: (fg.copysign(fg.tensor(x), _fg(b)) * w).sum().item(), [x0])
    xf = fg.tensor(x0, requires_grad=True)
    (g,) = fg.autograd.grad((fg.copysign(xf, _fg(b)) * w).sum(), [xf])
    np.testing.assert_allclose(g.numpy(), num, rtol=1e-8)


def test_xlog1py_is_zero_where_input_is_zero_below_minus_one_and_hinge_loss_keeps_inf():
    # xlog1py(0, -2) gave NaN (log1p's NaN times 0), torch 0; an infinite input made
    # hinge_embedding_loss NaN (x * 0 as its zero), torch inf
    x = torch.tensor([0.0, 0.0, 0.0, 1.0, 0.0, 2.0], dtype=torch.float64, requires_grad=True)
    y = torch.tensor(
        [-1.0, np.inf, np.nan, -1.0, -2.0, 0.5], dtype=torch.float64, requires_grad=True
    )
    fx, fy = _fg(x, True), _fg(y, True)
    want = torch.special.xlog1py(x, y)
    got = fg.special.xlog1py(fx, fy)
    np.testing.assert_array_equal(got.numpy(), want.detach().numpy())
    tw = torch.autograd.grad(want[[1, 4, 5]].sum(), [x])[0]
    fw = fg.autograd.grad(got[[1, 4, 5]].sum(), [fx])[0]
    np.testing.assert_allclose(fw.numpy()[[4, 5]], tw.numpy()[[4, 5]])
    a = [np.inf, -np.inf, 1.0, np.nan, -np.inf, np.inf]
    t = [1.0, 1.0, -1.0, 1.0, -1.0, -1.0]
    for red in ("none", "sum"):
        want = torch.nn.functional.hinge_embedding_loss(
            torch.tensor(a, dtype=torch.float64),
            torch.tensor(t, dtype=torch.float64),
            reduction=red,
        )
        got = fg.nn.functional.hinge_embedding_loss(
            fg.tensor(a, dtype=fg.float64), fg.tensor(t, dtype=fg.float64), reduction=red
        )
        np.testing.assert_array_equal(got.numpy(), want.numpy())
