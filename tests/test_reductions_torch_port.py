"""Cases from PyTorch's test_reductions.py where ferrograd differed: the same code run on
PyTorch and on ferrograd, values, shapes, dtypes and float64 gradients compared."""

import ferrograd as fg
import numpy as np
import pytest

NAN = float("nan")


def _np(t):
    return np.asarray(t.detach().numpy())


def _both(fn):
    """``fn`` run on torch and on ferrograd, as lists of numpy arrays."""
    torch = pytest.importorskip("torch")
    out = []
    for lib in (torch, fg):
        r = fn(lib)
        rs = list(r) if isinstance(r, tuple) else [r]
        out.append([(str(t.dtype).split(".")[-1], _np(t)) for t in rs])
    return out


def _assert_same(fn, rtol=1e-7):
    want, got = _both(fn)
    assert len(want) == len(got)
    for (wd, w), (gd, g) in zip(want, got):
        assert wd == gd
        assert w.shape == g.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-12, equal_nan=True)


A = np.arange(24.0).reshape(2, 3, 4) / 7 - 1.5
AN = np.array([[1.0, NAN, 3.0, 3.0], [2.0, 2.0, -1.0, NAN], [5.0, 5.0, 5.0, 0.0]])


@pytest.mark.parametrize("name", ["sum", "mean", "nansum", "nanmean", "var", "std"])
@pytest.mark.parametrize("dim", [(), []])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("method", [False, True])
def test_empty_dim_reduces_everything(name, dim, keepdim, method):
    # an empty dim list means every dim (it used to return the input unreduced)
    def fn(lib):
        x = lib.tensor(A)
        if method:
            return getattr(x, name)(dim, keepdim=keepdim)
        return getattr(lib, name)(x, dim=dim, keepdim=keepdim)

    _assert_same(fn)


@pytest.mark.parametrize("name", ["var_mean", "std_mean"])
def test_empty_dim_var_mean(name):
    _assert_same(lambda lib: getattr(lib, name)(lib.tensor(A), dim=(), keepdim=True))
    _assert_same(lambda lib: getattr(lib, name)(lib.tensor(A), [], correction=0))


def test_empty_dim_count_nonzero_and_vector_norm():
    x = np.array([[0.0, 1.0, 2.0], [3.0, 0.0, -4.0]])
    _assert_same(lambda lib: lib.count_nonzero(lib.tensor(x), dim=()))
    _assert_same(lambda lib: lib.tensor(x).count_nonzero([]))
    _assert_same(lambda lib: lib.linalg.vector_norm(lib.tensor(x), dim=()))
    _assert_same(lambda lib: lib.linalg.vector_norm(lib.tensor(x), 1, []))
    _assert_same(lambda lib: lib.linalg.vector_norm(lib.tensor(x), 3, (), True))


def test_empty_dim_gradient():
    # compared with PyTorch's dim=None gradient: PyTorch's own var/std backward with an
    # empty dim divides by zero (its forward reduces everything, its backward nothing)
    torch = pytest.importorskip("torch")
    x = fg.tensor(A, requires_grad=True)
    (fg.sum(x, dim=()) * 2 + x.var(()) + fg.amax(x, dim=[]) + x.std([], correction=0)).backward()
    t = torch.tensor(A, requires_grad=True)
    (torch.sum(t) * 2 + t.var() + torch.amax(t) + t.std(correction=0)).backward()
    np.testing.assert_allclose(_np(x.grad), _np(t.grad), rtol=1e-10)
    eps = 1e-6
    fd = np.zeros_like(A)
    for i in np.ndindex(*A.shape):
        hi, lo = A.copy(), A.copy()
        hi[i] += eps
        lo[i] -= eps
        fd[i] = (hi.var(ddof=1) - lo.var(ddof=1)) / (2 * eps)
    x = fg.tensor(A, requires_grad=True)
    fg.var(x, dim=[]).backward()
    np.testing.assert_allclose(_np(x.grad), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "name, dtype",
    [("nansum", d) for d in ("float32", "float64", "int64", "int8", "bool")]
    + [("nanmean", d) for d in ("float32", "float64")],
)
def test_nan_reductions_keepdim_without_dim(name, dtype):
    # keepdim=True over all dims keeps every dim as size 1 (it used to give a 0-d result)
    def fn(lib):
        x = lib.tensor(AN if dtype.startswith("float") else np.nan_to_num(AN))
        x = x.to(getattr(lib, dtype))
        return getattr(lib, name)(x, keepdim=True), getattr(x, name)(keepdim=True)

    _assert_same(fn)


def _grad(lib, a, f):
    x = lib.tensor(a, dtype=lib.float64, requires_grad=True)
    y = f(lib, x)
    (y * 1.3).backward()
    return _np(x.grad)


@pytest.mark.parametrize(
    "a",
    [
        np.array([[1.0, 4.0, 3.0, 3.0], [2.0, 2.0, -1.0, 7.0], [5.0, 5.0, 5.0, 0.0]]),
        np.array([[1.0, NAN, 3.0, 3.0], [2.0, 2.0, -1.0, NAN], [5.0, 5.0, 5.0, 0.0]]),
        np.array([[3.0, 3.0], [3.0, NAN]]),
    ],
)
def test_nanmedian_all_gradient_shared_by_ties(a):
    # the gradient of the median of all entries is split evenly among the entries equal to
    # it, as PyTorch's and as median()'s (it all went to one of them)
    torch = pytest.importorskip("torch")

    def f(lib, x):
        return lib.nanmedian(x)

    want, got = _grad(torch, a, f), _grad(fg, a, f)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert float(fg.nanmedian(fg.tensor(a))) == float(torch.nanmedian(torch.tensor(a)))


@pytest.mark.parametrize("args", [(5, 1, 1), (3, 3, 3), (4, -2.0, -2.0), (2, 7.5, 7.5)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_histc_equal_min_max_uses_data_range(args, dtype):
    # min == max (any value, not only 0) means the data's own range, as PyTorch's
    h = np.array([1.0, 2.0, 1.0, 2.5, -3.0, 7.0, 10.0])
    _assert_same(lambda lib: lib.histc(lib.tensor(h).to(getattr(lib, dtype)), *args))
    _assert_same(lambda lib: lib.tensor(h).to(getattr(lib, dtype)).histc(*args))


def test_histc_constant_data_equal_min_max():
    _assert_same(lambda lib: lib.histc(lib.tensor([2.0, 2.0]), 3, 5, 5))
    _assert_same(lambda lib: lib.histc(lib.zeros(0), 2, 1, 1))


@pytest.mark.parametrize(
    "name, method",
    [("sum", False), ("mean", False), ("amax", False), ("amin", False), ("amax", True)],
)
def test_repeated_dim_is_runtime_error(name, method):
    # PyTorch raises a RuntimeError for a dim named twice (a bare ValueError before)
    torch = pytest.importorskip("torch")
    for lib in (torch, fg):
        x = lib.ones(2, 3)
        with pytest.raises(RuntimeError, match="1"):
            getattr(x, name)((1, -1)) if method else getattr(lib, name)(x, (1, -1))


def test_aminmax_out():
    def fn(lib):
        lo, hi = lib.empty(0, dtype=lib.float64), lib.empty(0, dtype=lib.float64)
        r = lib.aminmax(lib.tensor(A), dim=1, keepdim=True, out=(lo, hi))
        assert r[0] is lo and r[1] is hi
        return lo, hi

    _assert_same(fn)


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("dim", [None, 1])
@pytest.mark.parametrize("q", [0.5, [0.25, 0.5, 0.9]])
def test_quantile_nan_row_gradient_goes_to_the_nan(interpolation, dim, q):
    # a row holding a NaN has quantile NaN, taken from that entry, which gets the gradient
    # as in PyTorch (it got none)
    torch = pytest.importorskip("torch")
    a = np.array([[1.0, NAN, 2.5, 4.0, 0.5], [3.0, 1.5, 2.0, 0.0, 7.0]])
    grads = []
    for lib in (torch, fg):
        t = lib.tensor(a, requires_grad=True)
        r = lib.quantile(t, lib.tensor(q, dtype=lib.float64), dim=dim, interpolation=interpolation)
        r.sum().backward()
        grads.append(_np(t.grad))
        assert np.isnan(_np(r)).sum() == (r.numel() if dim is None else r.numel() // 2)
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)


@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
def test_quantile_out(name):
    def fn(lib):
        x = lib.tensor(A)
        out = lib.empty(0, dtype=lib.float64)
        r = getattr(lib, name)(x, lib.tensor([0.2, 0.7], dtype=lib.float64), 1, out=out)
        assert r is out
        return out

    _assert_same(fn)
    torch = pytest.importorskip("torch")
    for lib in (torch, fg):
        with pytest.raises(RuntimeError, match="dtype"):
            getattr(lib, name)(lib.tensor([1.0]), 0.5, out=lib.empty([], dtype=lib.int32))


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
def test_nanmean_integer_message(dtype):
    # the message PyTorch's own tests match on
    torch = pytest.importorskip("torch")
    for lib in (torch, fg):
        with pytest.raises(
            RuntimeError,
            match=r"nanmean\(\): expected input to have floating point or complex dtype but got",
        ):
            lib.nanmean(lib.zeros(3, 4, dtype=getattr(lib, dtype)))


@pytest.mark.parametrize("name", ["amax", "amin"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_amax_amin_over_empty_dim_is_index_error(name, keepdim):
    # PyTorch raises IndexError for a max/min over a size-0 dim (a ShapeError before);
    # the other dims of an empty tensor still reduce to an empty result
    torch = pytest.importorskip("torch")
    for lib in (torch, fg):
        x = lib.zeros(2, 0, 4)
        with pytest.raises(IndexError, match="Expected reduction dim"):
            getattr(lib, name)(x, dim=1, keepdim=keepdim)
        with pytest.raises(IndexError, match="Expected reduction dim"):
            getattr(x, name)((0, 1), keepdim)
    _assert_same(lambda lib: getattr(lib, name)(lib.zeros(2, 0, 4), dim=-1, keepdim=keepdim))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("which", ["min", "max"])
def test_histc_at_the_ends_of_the_dtype(dtype, which):
    # PyTorch's own check: every entry is counted (numpy's binning raised ValueError)
    torch = pytest.importorskip("torch")
    v = getattr(np.finfo(dtype), which)
    for lib in (torch, fg):
        h = lib.histc(lib.full((3,), float(v), dtype=getattr(lib, dtype)), bins=4)
        assert float(h.sum()) == 3.0
    h = fg.histc(fg.tensor(np.array([np.finfo(dtype).min, 0, np.finfo(dtype).max], dtype)), 4)
    np.testing.assert_array_equal(_np(h), [1, 0, 1, 1])


@pytest.mark.parametrize("shape", [(), (0,), (1,), (3, 5), (2, 3, 5)])
@pytest.mark.parametrize("bins", [1, 3, 7])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("density", [False, True])
def test_histogram(shape, bins, weighted, density):
    # torch.histogram did not exist (AttributeError)
    rng = np.random.default_rng(sum(shape) * 10 + bins)
    v = rng.uniform(-9, 9, shape).astype(np.float32)
    w = rng.uniform(0, 9, shape).astype(np.float32)
    edges = np.sort(rng.uniform(-9, 9, bins + 1)).astype(np.float32)

    def run(lib, b, **kw):
        return lib.histogram(
            lib.tensor(v), b, weight=lib.tensor(w) if weighted else None, density=density, **kw
        )

    # float32 edges and weighted sums as PyTorch's up to rounding (its own test's tolerance)
    _assert_same(lambda lib: run(lib, bins), 1e-5)
    _assert_same(lambda lib: run(lib, bins, range=(-3.0, 4.0)), 1e-5)
    _assert_same(lambda lib: run(lib, bins, range=(2.0, 2.0)), 1e-5)
    _assert_same(lambda lib: run(lib, lib.tensor(edges)), 1e-5)


def test_histogram_method_out_and_corner_cases():
    def out(lib):
        h, e = lib.empty(0), lib.empty(0)
        r = lib.histogram(lib.tensor([1.0, 2.0, 2.5, 3.0]), 3, out=(h, e))
        assert r[0] is h and r[1] is e
        return h, e

    _assert_same(out, 1e-6)
    _assert_same(lambda lib: lib.tensor([1.0, 2.0]).histogram(2))
    _assert_same(lambda lib: lib.histogram(lib.tensor([]), 3))
    _assert_same(lambda lib: lib.histogram(lib.tensor([2.0, 2.0]), 3))
    _assert_same(lambda lib: lib.histogram(lib.tensor([1.0, NAN, 3.0]), 2, range=(0.0, 4.0)))
    _assert_same(
        lambda lib: lib.histogram(lib.tensor([[1.0, 2.0], [3, 4]]), lib.tensor([0.0, 2, 5]))
    )
    _assert_same(
        lambda lib: lib.histogram(lib.tensor([1.0, 2, 3]), 2, weight=lib.zeros(3), density=True)
    )
    r = fg.histogram(fg.tensor([1.0, 2.0]), 2)
    assert r.hist is r[0] and r.bin_edges is r[1]


@pytest.mark.parametrize(
    "call, exc",
    [
        (lambda lib: lib.histogram(lib.tensor(1, dtype=lib.int32), 1), NotImplementedError),
        (
            lambda lib: lib.histogram(lib.tensor(1.0), lib.tensor([0.0, 1.0], dtype=lib.float64)),
            RuntimeError,
        ),
        (
            lambda lib: lib.histogram(
                lib.tensor([1.0]), 1, weight=lib.tensor([1.0], dtype=lib.float64)
            ),
            RuntimeError,
        ),
        (lambda lib: lib.histogram(lib.ones(2, 2), lib.ones(2, 2)), RuntimeError),
        (lambda lib: lib.histogram(lib.ones(0), lib.ones(0)), RuntimeError),
        (lambda lib: lib.histogram(lib.tensor(1.0), -1), RuntimeError),
        (lambda lib: lib.histogram(lib.ones(2, 2), 1, weight=lib.ones(1)), RuntimeError),
        (lambda lib: lib.histogram(lib.tensor(1.0), 2, range=(1.0, 0.0)), RuntimeError),
        (lambda lib: lib.histogram(lib.tensor([NAN]), 2), RuntimeError),
        (lambda lib: lib.histogram(lib.tensor([1.0, float("inf")]), 2), RuntimeError),
        (
            lambda lib: lib.histogram(lib.tensor(1.0), lib.tensor([0.0, 1.0]), range=(0, 1)),
            TypeError,
        ),
    ],
)
def test_histogram_errors(call, exc):
    torch = pytest.importorskip("torch")
    for lib in (torch, fg):
        with pytest.raises(exc):
            call(lib)


@pytest.mark.parametrize(
    "shape", [(1, 5), (3, 5), (1, 5, 1), (2, 3, 5), (7, 7, 3), (7, 0, 3), (5, 0)]
)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("density", [False, True])
def test_histogramdd(shape, weighted, density):
    # torch.histogramdd did not exist (AttributeError)
    rng = np.random.default_rng(sum(shape) + 7 * weighted)
    v = rng.uniform(-9, 9, shape).astype(np.float32)
    w = rng.uniform(0, 9, shape[:-1]).astype(np.float32)
    d = shape[-1]
    counts = [int(c) for c in rng.integers(1, 5, d)]
    spans = [sorted(rng.uniform(-9, 9, 2)) for _ in range(d)]
    flat = [float(e) for s in spans for e in s]
    edges = [np.sort(rng.uniform(-9, 9, c + 1)).astype(np.float32) for c in counts]

    def run(lib, bins, **kw):
        r = lib.histogramdd(
            lib.tensor(v), bins, weight=lib.tensor(w) if weighted else None, density=density, **kw
        )
        return (r.hist, *r.bin_edges)

    _assert_same(lambda lib: run(lib, 3), 1e-5)
    _assert_same(lambda lib: run(lib, counts), 1e-5)
    _assert_same(lambda lib: run(lib, counts, range=flat), 1e-5)
    _assert_same(lambda lib: run(lib, counts, range=[flat[i - i % 2] for i in range(2 * d)]), 1e-5)
    if d:
        _assert_same(lambda lib: run(lib, [lib.tensor(e) for e in edges]), 1e-5)


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: lib.histogramdd(lib.tensor([1.0, 2.0]), 2),
        lambda lib: lib.histogramdd(lib.ones(3, 2), [2]),
        lambda lib: lib.histogramdd(lib.ones(3, 2), 2, range=[0.0, 1.0]),
        lambda lib: lib.histogramdd(lib.ones(3, 2), 2, range=[1.0, 0.0, 0.0, 1.0]),
        lambda lib: lib.histogramdd(lib.ones(3, 2), 2, weight=lib.ones(2)),
        lambda lib: lib.histogramdd(lib.ones(3, 2), -1),
    ],
)
def test_histogramdd_errors(call):
    torch = pytest.importorskip("torch")
    for lib in (torch, fg):
        with pytest.raises(RuntimeError):
            call(lib)


@pytest.mark.parametrize(
    "call",
    [
        lambda lib, x: lib.var(x),
        lambda lib, x: x.std(0),
        lambda lib, x: lib.var_mean(x, 1),
        lambda lib, x: lib.std_mean(x),
        lambda lib, x: lib.linalg.vector_norm(x),
        lambda lib, x: lib.norm(x, dim=1),
        lambda lib, x: lib.nanmean(x),
        lambda lib, x: lib.mean(x),
        lambda lib, x: x.mean(1, keepdim=True),
        lambda lib, x: lib.mean(x.float(), dtype=lib.int64),
    ],
)
@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
def test_float_only_reductions_raise_not_implemented(call, dtype):
    # PyTorch raises NotImplementedError for these dtypes (a DTypeError alone before; it
    # is still one)
    torch = pytest.importorskip("torch")
    for lib in (torch, fg):
        x = lib.ones(2, 3, dtype=getattr(lib, dtype))
        with pytest.raises(NotImplementedError):
            call(lib, x)
    with pytest.raises(fg.DTypeError):
        call(fg, fg.ones(2, 3, dtype=getattr(fg, dtype)))


def test_empty_dim_leaves_all_any_and_axis_alone():
    # all/any read an empty dim as no reduction in PyTorch; the engine's axis=() keeps its
    # meaning (no reduction) for the package's internals
    _assert_same(lambda lib: (lib.all(lib.tensor(A), dim=()), lib.any(lib.tensor(A), dim=[])))
    x = fg.tensor(A)
    assert tuple(x.sum(axis=()).shape) == x.shape


def test_weight_norm_of_a_vector_is_entrywise():
    # the norm over every dim but dim 0 of a 1-D parameter is each entry's magnitude
    torch = pytest.importorskip("torch")
    out = []
    for lib in (torch, fg):
        m = lib.nn.Linear(3, 2)
        with lib.no_grad():
            m.bias.copy_(lib.tensor([3.0, -4.0]))
        with pytest.warns(FutureWarning) if lib is torch else _nullcontext():
            lib.nn.utils.weight_norm(m, "bias", dim=0)
        out.append((_np(m.bias_g), _np(m.bias_v)))
    np.testing.assert_allclose(out[1][0], out[0][0])
    np.testing.assert_allclose(out[1][1], out[0][1])


def _nullcontext():
    import contextlib

    return contextlib.nullcontext()


@pytest.mark.parametrize("ord", [-1, -0.5, -2.5])
@pytest.mark.parametrize("shape, dim", [((0,), None), ((2, 0), 1), ((0, 3), None), ((2, 0), -1)])
def test_negative_norm_over_empty_dim_raises(ord, shape, dim):
    # no identity for a negative-order norm of no entries: PyTorch raises (inf before)
    torch = pytest.importorskip("torch")
    for lib in (torch, fg):
        with pytest.raises(RuntimeError, match="norm"):
            lib.linalg.vector_norm(lib.zeros(shape), ord, dim)
        with pytest.raises(RuntimeError, match="norm"):
            lib.norm(lib.zeros(shape), ord, dim)
    # over a non-empty dim of an empty tensor the result is just empty
    _assert_same(lambda lib: lib.linalg.vector_norm(lib.zeros(2, 0), ord, 0))


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_other_keyword(name):
    # max(x, other=y) is PyTorch's elementwise form (TypeError before)
    b = A[::-1].copy()
    _assert_same(lambda lib: getattr(lib, name)(lib.tensor(A), other=lib.tensor(b)))
    _assert_same(lambda lib: getattr(lib.tensor(A), name)(other=lib.tensor(b)))


_LCSE_CASES = {
    "finite": np.array([[0.3, -1.2, 2.5, 0.0, 1.1], [4.0, -3.0, 0.5, 0.5, -0.25]]),
    "infinite": np.array([[-np.inf, -np.inf, 1.0, 2.0, -np.inf], [0.0, -np.inf, np.inf, 1.0, 2.0]]),
    "large": np.array([[300.0, -250.0, 120.0, 310.0], [-400.0, -410.0, 5.0, -1.0]]),
    "nan": np.array([[1.0, NAN, 2.0, 3.0], [0.0, 1.0, 2.0, 3.0]]),
}


@pytest.mark.parametrize("case", list(_LCSE_CASES))
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_logcumsumexp_gradient(case, dim):
    # an entry of -inf gets gradient 0 even where a +inf follows it in the line (it got
    # NaN: the scan's own gradient carried the +inf's NaN over to it)
    a = _LCSE_CASES[case]

    def fn(lib):
        x = lib.tensor(a, requires_grad=True)
        r = lib.logcumsumexp(x, dim)
        w = lib.tensor(np.cos(np.arange(r.numel())).reshape(tuple(r.shape)))
        (r * w).sum().backward()
        return r, x.grad

    _assert_same(fn, 1e-10)


@pytest.mark.parametrize("case", ["finite", "large"])
@pytest.mark.parametrize("dim", [0, 1])
def test_logcumsumexp_second_derivative(case, dim):
    a = _LCSE_CASES[case]

    def fn(lib):
        x = lib.tensor(a, requires_grad=True)
        r = lib.logcumsumexp(x, dim)
        w = lib.tensor(np.cos(np.arange(r.numel())).reshape(tuple(r.shape)))
        (g,) = lib.autograd.grad((r * w).sum(), x, create_graph=True)
        (g2,) = lib.autograd.grad((g * g * w).sum(), x)
        return g, g2

    _assert_same(fn, 1e-9)
    # and against finite differences of the first derivative
    x = fg.tensor(a, requires_grad=True)
    w = fg.tensor(np.cos(np.arange(a.size)).reshape(a.shape))

    def first(v):
        t = fg.tensor(v, requires_grad=True)
        (g,) = fg.autograd.grad((fg.logcumsumexp(t, dim) * w).sum(), t)
        return _np(g)

    (g,) = fg.autograd.grad((fg.logcumsumexp(x, dim) * w).sum(), x, create_graph=True)
    (hv,) = fg.autograd.grad((g * w).sum(), x)
    eps = 1e-6
    u = np.cos(np.arange(a.size)).reshape(a.shape)
    fd = np.zeros_like(a)
    for i in np.ndindex(*a.shape):
        hi, lo = a.copy(), a.copy()
        hi[i] += eps
        lo[i] -= eps
        fd[i] = ((first(hi) - first(lo)) * u).sum() / (2 * eps)
    np.testing.assert_allclose(_np(hv), fd, rtol=1e-5, atol=1e-7)


def test_logcumsumexp_traced_matches_eager():
    a = _LCSE_CASES["infinite"]

    def step(x):
        (g,) = fg.autograd.grad((fg.logcumsumexp(x, 1) * 1.5).sum(), [x])
        return g

    eager = _np(step(fg.tensor(a, requires_grad=True)))
    traced = fg.trace(step)
    traced(fg.tensor(a, requires_grad=True))
    np.testing.assert_array_equal(_np(traced(fg.tensor(a, requires_grad=True))), eager)


def test_empty_dim_norm():
    # norm(x, p, dim=()) is the norm of every entry, as PyTorch's (each entry's |x| before)
    x = np.array([[0.0, 1.0, 2.0], [3.0, 0.0, -4.0]])
    _assert_same(lambda lib: lib.norm(lib.tensor(x), dim=()))
    _assert_same(lambda lib: lib.norm(lib.tensor(x), 1, []))
    _assert_same(lambda lib: lib.tensor(x).norm(3, (), True))
    _assert_same(lambda lib: lib.tensor(x).norm(dim=[]))
