"""Edge cases where ferrograd diverged from PyTorch: each runs the same inputs through torch
and ferrograd and compares values, dtypes, shapes and float64 gradients (errors where torch
raises). Tests that take the ``torch`` fixture skip without torch; the others (fixed
values, finite differences) run anyway."""

import math

import ferrograd as fg
import numpy as np
import pytest

F = fg.nn.functional


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _fg(t, rg=False):
    return fg.tensor(t.detach().numpy(), requires_grad=rg)


def _np(x):
    if hasattr(x, "detach"):
        x = x.detach()
    return np.asarray(x.numpy())


def _dt(x):
    return str(x.dtype).replace("torch.", "")


def _same(t, f, rtol=1e-12, atol=0.0):
    """Same shape, dtype and values (NaN equal to NaN)."""
    assert tuple(f.shape) == tuple(t.shape), (tuple(f.shape), tuple(t.shape))
    assert _dt(f) == _dt(t), (_dt(f), _dt(t))
    a, b = _np(t), _np(f)
    if a.dtype.kind in "biu":
        assert b.tolist() == a.tolist()
    else:
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, equal_nan=True)


def _check(torch, tf, ff, inputs, rtol=1e-12, atol=0.0):
    """``tf(*torch_inputs)`` vs ``ff(*fg_inputs)``: values, then the float64 gradients of a
    weighted sum of the output in every input."""
    ts = [t.detach().clone().requires_grad_() for t in inputs]
    fs = [_fg(t, True) for t in inputs]
    to, fo = tf(*ts), ff(*fs)
    _same(to, fo, rtol, atol)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(to.shape, dtype=to.dtype, generator=g)
    tg = torch.autograd.grad((to * w).sum(), ts, allow_unused=True)
    fgr = fg.autograd.grad((fo * _fg(w)).sum(), fs, allow_unused=True)
    for a, b in zip(tg, fgr):
        if a is None:
            assert b is None or not np.any(_np(b))
            continue
        assert b is not None
        _same(a, b, rtol, atol)


def _raises_like(torch, tf, ff, types=(RuntimeError, IndexError, ValueError, TypeError)):
    """Both raise; ferrograd's exception is of the type torch's is (or, where torch raises
    RuntimeError, a RuntimeError subclass such as ShapeError / DTypeError)."""
    with pytest.raises(Exception) as te:
        tf()
    with pytest.raises(types) as fe:
        ff()
    assert isinstance(fe.value, type(te.value)), (type(te.value), type(fe.value), fe.value)


def _fd_grad(fn, x, eps=1e-6):
    """Central differences of the scalar ``fn(x)`` (numpy float64 in, float out)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (fn(xp) - fn(xm)) / (2 * eps)
    return g


def _fd_check(ff, x, w, atol=1e-6):
    """ferrograd's gradient of ``sum(ff(x) * w)`` against central differences."""
    xf = fg.tensor(x, requires_grad=True)
    (g,) = fg.autograd.grad((ff(xf) * fg.tensor(w)).sum(), [xf])

    def value(a):
        return float((ff(fg.tensor(a)) * fg.tensor(w)).sum().item())

    np.testing.assert_allclose(g.numpy(), _fd_grad(value, x), atol=atol)


F64 = "float64"

# ------------------------------------------------------------- 1. 0-d inputs and indices


_SCALAR_OPS = {
    "gather": lambda L, x, d, i, s: L.gather(x, d, i),
    "index_select": lambda L, x, d, i, s: L.index_select(x, d, i),
    "scatter": lambda L, x, d, i, s: L.scatter(x, d, i, s),
    "scatter_value": lambda L, x, d, i, s: L.scatter(x, d, i, 5.5),
    "scatter_add": lambda L, x, d, i, s: L.scatter_add(x, d, i, s),
    "index_add": lambda L, x, d, i, s: L.index_add(x, d, i, s, alpha=2),
    "index_copy": lambda L, x, d, i, s: L.index_copy(x, d, i, s),
    "index_fill": lambda L, x, d, i, s: L.index_fill(x, d, i, -1.5),
}


@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("name", sorted(_SCALAR_OPS))
def test_scalar_self_and_index(torch, name, dim):
    op = _SCALAR_OPS[name]
    x = torch.tensor(3.0, dtype=torch.float64)
    s = torch.tensor(-2.0, dtype=torch.float64)
    for idx in (torch.tensor(0), torch.tensor([0])):
        _check(
            torch,
            lambda a, b, i=idx: op(torch, a, dim, i, b),
            lambda a, b, i=idx: op(fg, a, dim, _fg(i), b),
            [x, s],
        )


def test_scalar_index_into_vector(torch):
    torch.manual_seed(0)
    v = torch.randn(4, dtype=torch.float64)
    m = torch.randn(2, 3, dtype=torch.float64)
    i = torch.tensor(2)
    cases = [
        (lambda L, a, b, ii: L.gather(a, 0, ii), [v, v]),
        (lambda L, a, b, ii: L.index_select(a, 0, ii), [v, v]),
        (lambda L, a, b, ii: L.index_select(a, 1, ii), [m, m]),
        (lambda L, a, b, ii: L.scatter(a, 0, ii, b), [v, v[:1].reshape(())]),
        (lambda L, a, b, ii: L.scatter_add(a, 0, ii, b), [v, v[:1].reshape(())]),
        (lambda L, a, b, ii: L.index_copy(a, 0, ii, b), [v, v[:1].reshape(())]),
        (lambda L, a, b, ii: L.index_copy(a, 0, ii, b), [v, v[:1]]),
        (lambda L, a, b, ii: L.index_add(a, 0, ii, b), [v, v[:1]]),
        (lambda L, a, b, ii: L.index_add(a, 1, ii, b), [m, m[:, :1]]),
        (lambda L, a, b, ii: L.index_copy(a, 1, ii, b), [m, m[:, :1]]),
        (lambda L, a, b, ii: L.index_fill(a, 1, ii, 7.0), [m, m]),
    ]
    for op, inputs in cases:
        _check(
            torch,
            lambda a, b, op=op: op(torch, a, b, i),
            lambda a, b, op=op: op(fg, a, b, _fg(i)),
            inputs,
        )


def test_scalar_methods_and_inplace(torch):
    x = torch.tensor(3.0, dtype=torch.float64)
    s = torch.tensor(-2.0, dtype=torch.float64)
    i = torch.tensor(0)
    for name, args in (
        ("gather", (0, i)),
        ("index_select", (0, i)),
        ("scatter_", (0, i, 2.5)),
        ("scatter_add_", (0, i, s)),
        ("index_add_", (0, i, s)),
        ("index_copy_", (0, i, s)),
        ("index_fill_", (0, i, 2.5)),
    ):
        t = getattr(x.clone(), name)(*args)
        fargs = [_fg(a) if hasattr(a, "detach") else a for a in args]
        f = getattr(_fg(x), name)(*fargs)
        _same(t, f)


def test_scatter_reduce_scalar(torch):
    x = torch.tensor(3.0, dtype=torch.float64)
    s = torch.tensor([5.0, 2.0], dtype=torch.float64)
    for red in ("sum", "prod", "amax", "mean"):
        for inc in (True, False):
            _check(
                torch,
                lambda a, b, r=red, c=inc: torch.scatter_reduce(
                    a, 0, torch.tensor([0, 0]), b, r, include_self=c
                ),
                lambda a, b, r=red, c=inc: fg.scatter_reduce(
                    a, 0, fg.tensor([0, 0]), b, r, include_self=c
                ),
                [x, s],
            )


def test_scalar_index_errors(torch):
    s = torch.tensor(3.0, dtype=torch.float64)
    m = torch.zeros(2, 3, dtype=torch.float64)
    t = torch.tensor
    cases = [
        (lambda L, T: L.gather(T(s), 1, T(t(0)))),  # dim out of range
        (lambda L, T: L.gather(T(s), 0, T(t([[0]])))),  # index of more dims
        (lambda L, T: L.gather(T(m), 0, T(t(0)))),  # 0-d index into a matrix
        (lambda L, T: L.index_select(T(s), 0, T(t([0, 0])))),  # two values into a scalar
        (lambda L, T: L.index_select(T(s), 0, T(t([[0]])))),  # not a vector
        (lambda L, T: L.index_add(T(s), 0, T(t(0)), T(t([1.0], dtype=torch.float64)))),
        (lambda L, T: L.index_add(T(s), 0, T(t([0, 0])), T(t(1.0, dtype=torch.float64)))),
        (lambda L, T: L.index_copy(T(s), 0, T(t([0, 0])), T(t(1.0, dtype=torch.float64)))),
        (lambda L, T: L.index_copy(T(s), 0, T(t(1)), T(t(1.0, dtype=torch.float64)))),
        (lambda L, T: L.index_fill(T(s), 0, T(t(1)), 1.0)),
        (lambda L, T: L.scatter(T(s), 0, T(t(1)), 1.0)),
        (lambda L, T: L.scatter_add(T(m), 0, T(t(1)), T(t(1.0, dtype=torch.float64)))),
    ]
    for case in cases:
        _raises_like(torch, lambda c=case: c(torch, lambda a: a), lambda c=case: c(fg, _fg))


def test_scalar_index_values_without_torch():
    x = fg.tensor(3.0, dtype=F64, requires_grad=True)
    s = fg.tensor(-2.0, dtype=F64, requires_grad=True)
    i = fg.tensor(0)
    out = [
        fg.gather(x, 0, i),
        fg.gather(x, -1, fg.tensor([0, 0])),
        fg.index_select(x, 0, fg.tensor([0])),
        fg.scatter(x, 0, i, s),
        fg.scatter_add(x, 0, i, s),
        fg.index_add(x, 0, i, s, alpha=3),
        fg.index_copy(x, 0, i, s),
        fg.index_fill(x, 0, i, 9.0),
    ]
    assert [tuple(o.shape) for o in out] == [(), (2,), (), (), (), (), (), ()]
    assert [o.tolist() for o in out] == [3.0, [3.0, 3.0], 3.0, -2.0, 1.0, -3.0, -2.0, 9.0]
    gx, gs = fg.autograd.grad(sum(o.sum() for o in out), [x, s])
    # x: gather (1 + 2) + index_select + scatter_add + index_add = 6; s: 1 + 1 + 3 + 1
    assert gx.item() == 6.0 and gs.item() == 6.0


# ------------------------------------------------------- 2. unique_consecutive with dim


def test_unique_consecutive_dim(torch):
    x = torch.tensor(
        [[1, 1, 2, 2, 3, 1], [1, 1, 2, 2, 3, 1], [0, 0, 5, 5, 3, 1], [1, 1, 2, 2, 3, 1]]
    )
    for d in (0, 1, -1, -2):
        for ri in (False, True):
            for rc in (False, True):
                t = torch.unique_consecutive(x, return_inverse=ri, return_counts=rc, dim=d)
                f = fg.unique_consecutive(_fg(x), return_inverse=ri, return_counts=rc, dim=d)
                t, f = (t, f) if isinstance(t, tuple) else ((t,), (f,))
                assert len(t) == len(f)
                for a, b in zip(t, f):
                    _same(a, b)
    y = torch.tensor([[1.0, float("nan")], [1.0, float("nan")], [2.0, 0.0]], dtype=torch.float64)
    t = torch.unique_consecutive(y, return_counts=True, return_inverse=True, dim=0)
    f = _fg(y).unique_consecutive(return_counts=True, return_inverse=True, dim=0)
    for a, b in zip(t, f):
        _same(a, b)
    z = torch.zeros(2, 0, 3)
    for a, b in zip(
        torch.unique_consecutive(z, dim=1, return_inverse=True, return_counts=True),
        fg.unique_consecutive(_fg(z), dim=1, return_inverse=True, return_counts=True),
    ):
        _same(a, b)
    _raises_like(
        torch,
        lambda: torch.unique_consecutive(torch.tensor(1.0), dim=0),
        lambda: fg.unique_consecutive(fg.tensor(1.0), dim=0),
    )
    _raises_like(
        torch,
        lambda: torch.unique_consecutive(z, dim=0),
        lambda: fg.unique_consecutive(_fg(z), dim=0),
    )


# ------------------------------------------------------------ 3. narrow with tensor start


def test_narrow_tensor_start(torch):
    torch.manual_seed(0)
    x = torch.randn(3, 6, dtype=torch.float64)
    for st in (torch.tensor(1), torch.tensor(-4), torch.tensor(2, dtype=torch.int32)):
        _check(
            torch,
            lambda a, s=st: torch.narrow(a, 1, s, 3),
            lambda a, s=st: fg.narrow(a, 1, _fg(s), 3),
            [x],
        )
        _check(
            torch, lambda a, s=st: a.narrow(-1, s, 2), lambda a, s=st: a.narrow(-1, _fg(s), 2), [x]
        )
    for bad in (torch.tensor(1.0), torch.tensor([1]), torch.tensor(True)):
        _raises_like(
            torch,
            lambda b=bad: torch.narrow(x, 1, b, 2),
            lambda b=bad: fg.narrow(_fg(x), 1, _fg(b), 2),
        )


def test_narrow_tensor_start_without_torch():
    x = fg.arange(12.0).reshape(3, 4)
    assert x.narrow(1, fg.tensor(-3), 2).tolist() == [[1.0, 2.0], [5.0, 6.0], [9.0, 10.0]]
    with pytest.raises(RuntimeError):
        x.narrow(1, fg.tensor(1.0), 2)


# ----------------------------------------------------------------- 4. linear, 1-D weight


@pytest.mark.parametrize(
    "xs,ws,bs",
    [
        ((3,), (3,), None),
        ((3,), (3,), ()),
        ((2, 3), (3,), None),
        ((5, 2, 3), (3,), None),
        ((5, 2, 3), (3,), ()),
        ((4, 5, 2, 3), (3,), ()),
        ((3,), (4, 3), None),
        ((3,), (4, 3), (4,)),
        ((3,), (4, 3), ()),
        ((0, 3), (3,), None),
    ],
)
def test_linear_vector_weight_and_input(torch, xs, ws, bs):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(xs, dtype=torch.float64, generator=g)
    w = torch.randn(ws, dtype=torch.float64, generator=g)
    if bs is None:
        _check(torch, torch.nn.functional.linear, F.linear, [x, w])
    else:
        b = torch.randn(bs, dtype=torch.float64, generator=g)
        _check(torch, torch.nn.functional.linear, F.linear, [x, w, b])


def test_linear_vector_weight_errors(torch):
    for xs, bs in (((2, 3), ()), ((2, 3), (2,)), ((3,), (1,)), ((5, 2, 3), (2,))):
        x, w, b = torch.randn(xs), torch.randn(3), torch.randn(bs)
        _raises_like(
            torch,
            lambda x=x, w=w, b=b: torch.nn.functional.linear(x, w, b),
            lambda x=x, w=w, b=b: F.linear(_fg(x), _fg(w), _fg(b)),
        )


def test_linear_vector_weight_fd():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((4, 3)), rng.standard_normal(3)
    _fd_check(lambda a: F.linear(a, fg.tensor(w)), x, rng.standard_normal(4))
    _fd_check(lambda b: F.linear(fg.tensor(x), b), w, rng.standard_normal(4))


# ------------------------------------------------------------------- 5. nuclear norm


@pytest.mark.parametrize("shape", [(3, 4), (4, 3), (2, 3, 4), (2, 2, 3, 3)])
def test_nuclear_norm(torch, shape):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(shape, dtype=torch.float64, generator=g)
    cases = [
        (
            lambda a: torch.linalg.matrix_norm(a, "nuc"),
            lambda a: fg.linalg.matrix_norm(a, "nuc"),
        ),
        (
            lambda a: torch.linalg.matrix_norm(a, "nuc", dim=(0, -1), keepdim=True),
            lambda a: fg.linalg.matrix_norm(a, "nuc", dim=(0, -1), keepdim=True),
        ),
        (
            lambda a: torch.norm(a, p="nuc", dim=(-2, -1)),
            lambda a: fg.norm(a, p="nuc", dim=(-2, -1)),
        ),
        (
            lambda a: torch.norm(a, p="nuc", dim=(-1, 0), keepdim=True),
            lambda a: fg.norm(a, p="nuc", dim=(-1, 0), keepdim=True),
        ),
        (lambda a: a.norm(p="nuc", dim=[0, 1]), lambda a: a.norm(p="nuc", dim=[0, 1])),
        (
            lambda a: torch.linalg.norm(a, "nuc", dim=(-2, -1)),
            lambda a: fg.linalg.norm(a, "nuc", dim=(-2, -1)),
        ),
    ]
    if len(shape) == 2:
        cases.append((lambda a: torch.norm(a, p="nuc"), lambda a: fg.norm(a, p="nuc")))
    for tf, ff in cases:
        _check(torch, tf, ff, [x], rtol=1e-10, atol=1e-12)


def test_nuclear_norm_errors(torch):
    x = torch.randn(2, 3, 4)
    for tf, ff in (
        (lambda L, a: L.norm(a, p="nuc"), None),  # 3-D, no dim
        (lambda L, a: L.norm(a[0, 0], p="nuc"), None),  # 1-D
        (lambda L, a: L.norm(a[0], p="nuc", dim=0), None),  # one dim
    ):
        _raises_like(torch, lambda tf=tf: tf(torch, x), lambda tf=tf: tf(fg, _fg(x)))


def test_nuclear_norm_fd():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4))
    _fd_check(lambda a: fg.norm(a, p="nuc", dim=(1, 2)), x, rng.standard_normal(2))
    _fd_check(lambda a: fg.linalg.matrix_norm(a, "nuc", dim=(0, 2)), x, rng.standard_normal(3))


# ------------------------------------------------------- 6. pools with one-entry lists


_POOL_ARGS = [
    {"kernel_size": [3]},
    {"kernel_size": [3], "stride": [2]},
    {"kernel_size": [3], "stride": [2], "padding": [1]},
    {"kernel_size": 3, "padding": [1]},
    {"kernel_size": (3,), "stride": (1,), "padding": (1,)},
    {"kernel_size": [2, 3], "padding": [1]},
    {"kernel_size": [3], "stride": [2, 1], "padding": [1, 0]},
    {"kernel_size": 3, "stride": []},
    {"kernel_size": [3], "stride": [2], "padding": [1], "ceil_mode": True},
]


@pytest.mark.parametrize("kw", _POOL_ARGS)
@pytest.mark.parametrize("batched", [True, False])
def test_pool2d_one_entry_lists(torch, kw, batched):
    g = torch.Generator().manual_seed(4)
    x = torch.randn((2, 3, 7, 8) if batched else (3, 7, 8), dtype=torch.float64, generator=g)
    TF = torch.nn.functional
    _check(torch, lambda a: TF.avg_pool2d(a, **kw), lambda a: F.avg_pool2d(a, **kw), [x])
    _check(
        torch,
        lambda a: TF.avg_pool2d(a, count_include_pad=False, **kw),
        lambda a: F.avg_pool2d(a, count_include_pad=False, **kw),
        [x],
    )
    _check(torch, lambda a: TF.max_pool2d(a, **kw), lambda a: F.max_pool2d(a, **kw), [x])
    _check(
        torch,
        lambda a: TF.max_pool2d(a, return_indices=True, **kw)[0],
        lambda a: F.max_pool2d(a, return_indices=True, **kw)[0],
        [x],
    )


def test_pool2d_modules_and_dilation_lists(torch):
    x = torch.randn(2, 3, 7, 8, dtype=torch.float64)
    _check(
        torch,
        lambda a: torch.nn.MaxPool2d([3], stride=[2], padding=[1], dilation=[2])(a),
        lambda a: fg.nn.MaxPool2d([3], stride=[2], padding=[1], dilation=[2])(a),
        [x],
    )
    _check(
        torch,
        lambda a: torch.nn.AvgPool2d([3], stride=[2], padding=[1])(a),
        lambda a: fg.nn.AvgPool2d([3], stride=[2], padding=[1])(a),
        [x],
    )
    for kw in ({"kernel_size": [3, 3, 3]}, {"kernel_size": 3, "padding": [1, 1, 1]}):
        for name in ("avg_pool2d", "max_pool2d"):
            _raises_like(
                torch,
                lambda n=name, k=kw: getattr(torch.nn.functional, n)(x, **k),
                lambda n=name, k=kw: getattr(F, n)(_fg(x), **k),
            )


def test_pool2d_one_entry_lists_without_torch():
    x = fg.arange(16.0).reshape(1, 1, 4, 4)
    assert F.avg_pool2d(x, [2]).tolist() == [[[[2.5, 4.5], [10.5, 12.5]]]]
    assert F.max_pool2d(x, [3], stride=[1], padding=[1]).shape == (1, 1, 4, 4)


# ------------------------------------------------------------- 7. masked_scatter


@pytest.mark.parametrize(
    "xs,ms",
    [
        ((3, 4), (3, 4)),
        ((3, 4), (4,)),
        ((3, 4), (3, 1)),
        ((4,), (3, 4)),
        ((3, 1), (3, 4)),
        ((3, 1), (1, 4)),
        ((), (3,)),
        ((3,), ()),
        ((4,), (2, 3, 4)),
    ],
)
def test_masked_scatter_broadcasts(torch, xs, ms):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(xs, dtype=torch.float64, generator=g)
    mask = torch.rand(ms, generator=g) > 0.4
    src = torch.randn(30, dtype=torch.float64, generator=g)
    _check(
        torch,
        lambda a, s: torch.masked_scatter(a, mask, s),
        lambda a, s: fg.masked_scatter(a, _fg(mask), s),
        [x, src],
    )
    _check(
        torch,
        lambda a, s: a.masked_scatter(mask, s.reshape(5, 6)),
        lambda a, s: a.masked_scatter(_fg(mask), s.reshape(5, 6)),
        [x, src],
    )


@pytest.mark.filterwarnings("ignore:masked_scatter_ received a mask with dtype torch.uint8")
def test_masked_scatter_errors(torch):
    x = torch.randn(3, 4)
    cases = [
        lambda L, T: L.masked_scatter(T(x), T(torch.ones(2, 4, dtype=torch.bool)), T(x)),
        lambda L, T: L.masked_scatter(T(x), T(torch.ones(3, 4, dtype=torch.uint8)), T(x)),
        lambda L, T: L.masked_scatter(T(x), T(torch.ones(4, dtype=torch.bool)), T(x.double())),
        lambda L, T: L.masked_scatter(T(x), T(torch.ones(4, dtype=torch.bool)), T(x[0])),
        lambda L, T: T(x[0]).clone().masked_scatter_(T(torch.ones(3, 4, dtype=torch.bool)), T(x)),
    ]
    for case in cases:
        _raises_like(torch, lambda c=case: c(torch, lambda a: a), lambda c=case: c(fg, _fg))
    t = x.clone().masked_scatter_(torch.tensor([True, False, True, False]), x.reshape(-1))
    f = _fg(x).masked_scatter_(fg.tensor([True, False, True, False]), _fg(x).reshape(-1))
    _same(t, f)


def test_masked_scatter_fd():
    rng = np.random.default_rng(6)
    m = fg.tensor(np.array([[True, False, True, True]]))
    src = rng.standard_normal(12)
    w = rng.standard_normal((3, 4))
    _fd_check(lambda a: fg.masked_scatter(a, m, fg.tensor(src)), rng.standard_normal((3, 1)), w)
    _fd_check(lambda s: fg.masked_scatter(fg.zeros(3, 1, dtype=F64), m, s), src, w)


# ----------------------------------------------------------------- 8. prod of bools


def test_prod_bool_and_int_dtypes(torch):
    b = torch.tensor([[True, False, True], [True, True, True]])
    i8 = torch.tensor([[1, 2, 3], [4, 5, 100]], dtype=torch.int8)
    fl = torch.tensor([[0.5, 2.0, 3.0], [4.0, 0.0, 6.0]], dtype=torch.float64)
    for x in (b, i8, fl):
        for dt in (None, "bool", "int32", "uint8", "int8", "int64", "float32"):
            kw = {} if dt is None else {"dtype": getattr(torch, dt)}
            fkw = {} if dt is None else {"dtype": getattr(fg, dt)}
            for dkw in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}):
                _same(torch.prod(x, **dkw, **kw), fg.prod(_fg(x), **dkw, **fkw))
                _same(x.prod(**dkw, **kw), _fg(x).prod(**dkw, **fkw))
    e = torch.zeros(0, dtype=torch.bool)
    _same(torch.prod(e), fg.prod(_fg(e)))
    _same(torch.prod(e, dtype=torch.bool), fg.prod(_fg(e), dtype=fg.bool))
    _same(torch.prod(torch.tensor(True)), fg.prod(fg.tensor(True)))


def test_sum_with_narrow_dtype(torch):
    x = torch.tensor([[1, 2, 3], [4, 5, 100]], dtype=torch.int8)
    for name in ("sum", "nansum"):
        for dt in ("bool", "int32", "uint8", "int8"):
            t = getattr(torch, name)(x, 1, dtype=getattr(torch, dt))
            _same(t, getattr(fg, name)(_fg(x), 1, dtype=getattr(fg, dt)))
            _same(t, getattr(_fg(x), name)(1, dtype=getattr(fg, dt)))


def test_prod_bool_without_torch():
    b = fg.tensor([[True, False], [True, True]])
    assert fg.prod(b).dtype == fg.int64
    out = fg.prod(b, 1, dtype=fg.bool)
    assert out.dtype == fg.bool and out.tolist() == [False, True]
    assert b.prod(dtype=fg.bool).tolist() is False


# -------------------------------------------- 9. addmm family with integer tensors


_ADDMM = {
    "addmm": lambda L, c, k: (c(2, 4, k), c(2, 3, k), c(3, 4, k)),
    "baddbmm": lambda L, c, k: (c(5, 2, 4, k), c(5, 2, 3, k), c(5, 3, 4, k)),
    "addbmm": lambda L, c, k: (c(2, 4, k), c(5, 2, 3, k), c(5, 3, 4, k)),
    "addmv": lambda L, c, k: (c(2, k), c(2, 3, k), c(3, k)),
}
_SCALARS = [(1, 1), (2, 3), (1.5, 1), (1, 0.5), (2.7, -2.7), (-1, 1), (True, False), (0, 1),
            (1, 0.0), (1 + 0j, 2), (300, 1), (-256, 1), (1 + 1j, 1), (float("nan"), 1)]  # fmt: skip


@pytest.mark.parametrize("op", sorted(_ADDMM))
def test_addmm_family_integer_tensors(torch, op):
    g = torch.Generator().manual_seed(7)

    def make(*shape_dt):
        *shape, dt = shape_dt
        return torch.randint(-3, 4, shape, generator=g).to(dt)

    for dt in (torch.int64, torch.int32, torch.uint8, torch.int8, torch.float64):
        a, b, c = _ADDMM[op](torch, make, dt)
        for alpha, beta in _SCALARS:

            def tf(a=a, b=b, c=c, alpha=alpha, beta=beta):
                return getattr(torch, op)(a, b, c, alpha=alpha, beta=beta)

            def ff(a=a, b=b, c=c, alpha=alpha, beta=beta):
                return getattr(fg, op)(_fg(a), _fg(b), _fg(c), alpha=alpha, beta=beta)

            try:
                t = tf()
            except RuntimeError:
                with pytest.raises(RuntimeError):
                    ff()
                continue
            tol = 1e-12 if dt == torch.float64 else 0.0  # (float sums in another order)
            _same(t, ff(), atol=tol)
            _same(
                getattr(a, op)(b, c, alpha=alpha, beta=beta),
                getattr(_fg(a), op)(_fg(b), _fg(c), alpha=alpha, beta=beta),
                atol=tol,
            )


def test_addmm_family_dtype_errors(torch):
    a, b = torch.ones(2, 2, dtype=torch.int64), torch.ones(2, 2, dtype=torch.float64)
    bb = torch.ones(2, 2, dtype=torch.bool)
    for op, args in (
        ("addmm", (b, a, a)),
        ("addmm", (a, b, b)),
        ("addmm", (a.int(), a, a)),
        ("addmm", (bb, bb, bb)),
        ("baddbmm", (b[None], a[None], a[None])),
        ("addbmm", (a, b[None], b[None])),
        ("addmv", (b[0], a, a[0])),
    ):
        _raises_like(
            torch,
            lambda o=op, x=args: getattr(torch, o)(*x),
            lambda o=op, x=args: getattr(fg, o)(*[_fg(t) for t in x]),
            (RuntimeError,),
        )


def test_addr_scalar_rules(torch):
    i = torch.tensor([[1, 2], [3, 4]])
    v = torch.tensor([1, -2])
    f = i.double()
    b = i > 2
    for x, v1, alpha, beta in (
        (i, v, 2, 3),
        (i, v, 1.5, 1),  # float alpha with int tensors: refused
        (i, v, 1, 0.5),
        (f, v.double(), True, 1),  # bool alpha with a float result: refused
        (f, v.double(), 1.5, 0.5),
        (i, v.double(), 1.5, 2),  # promoted to float
        (b, v > 0, 3, 0),
        (b, v > 0, 1.0, 1),
    ):

        def tf(x=x, v1=v1, alpha=alpha, beta=beta):
            return torch.addr(x, v1, v1, alpha=alpha, beta=beta)

        def ff(x=x, v1=v1, alpha=alpha, beta=beta):
            return fg.addr(_fg(x), _fg(v1), _fg(v1), alpha=alpha, beta=beta)

        try:
            t = tf()
        except RuntimeError:
            with pytest.raises(RuntimeError):
                ff()
            continue
        _same(t, ff())


def test_addmm_float_grads(torch):
    g = torch.Generator().manual_seed(8)
    c = torch.randn(2, 4, dtype=torch.float64, generator=g)
    m1 = torch.randn(2, 3, dtype=torch.float64, generator=g)
    m2 = torch.randn(3, 4, dtype=torch.float64, generator=g)
    _check(
        torch,
        lambda x, y, z: torch.addmm(x, y, z, alpha=True, beta=-2),
        lambda x, y, z: fg.addmm(x, y, z, alpha=True, beta=-2),
        [c, m1, m2],
    )
    _check(
        torch,
        lambda x, y, z: torch.addbmm(x, y[None], z[None], alpha=0.5, beta=2.0),
        lambda x, y, z: fg.addbmm(x, y[None], z[None], alpha=0.5, beta=2.0),
        [c, m1, m2],
    )


def test_addmm_integer_without_torch():
    a = fg.tensor([[1, 2], [3, 4]], dtype="int32")
    out = fg.addmm(a, a, a, alpha=1.9, beta=-2.5)  # alpha 1, beta -2 (truncated)
    assert out.dtype == fg.int32
    assert out.tolist() == [[5, 6], [9, 14]]
    with pytest.raises(RuntimeError):
        fg.addmm(a, a, a, alpha=2**40)
    with pytest.raises(RuntimeError):
        fg.addmm(a.astype("float32"), a, a)


# ------------------------------------------------------------- 10. integer linspace


def test_linspace_int_sweep(torch):
    for dt in ("int64", "int32", "int8"):
        for start in range(-10, 11):
            for end in range(-10, 31):
                for steps in range(26):
                    t = torch.linspace(start, end, steps, dtype=getattr(torch, dt))
                    f = fg.linspace(start, end, steps, dtype=getattr(fg, dt))
                    assert f.dtype == getattr(fg, dt)
                    assert f.tolist() == t.tolist(), (dt, start, end, steps)


def test_linspace_int_float_bounds_and_large(torch):
    rng = np.random.default_rng(9)
    cases = [
        (float(s), float(e), int(n))
        for s, e, n in zip(
            rng.uniform(-20, 20, 300).round(1),
            rng.uniform(-20, 40, 300).round(1),
            rng.integers(0, 40, 300),
        )
    ]
    cases += [(0, 1000, 3001), (-7, 13, 1000), (3, -500, 777), (-(10**9), 10**9, 4097)]
    for s, e, n in cases:
        t = torch.linspace(s, e, n, dtype=torch.int64)
        assert fg.linspace(s, e, n, dtype=fg.int64).tolist() == t.tolist(), (s, e, n)
    for s, e, n in ((-3, 5, 4), (-255, 3, 5), (0, 255, 4)):
        t = torch.linspace(s, e, n, dtype=torch.uint8)
        f = fg.linspace(s, e, n, dtype=fg.uint8)
        _same(t, f)
    for s, e, dt in ((0, 300, "int8"), (-256, 3, "uint8"), (-3.5, 5, "uint8"), (0, 1e20, "int64")):
        _raises_like(
            torch,
            lambda s=s, e=e, dt=dt: torch.linspace(s, e, 4, dtype=getattr(torch, dt)),
            lambda s=s, e=e, dt=dt: fg.linspace(s, e, 4, dtype=getattr(fg, dt)),
            (RuntimeError,),
        )
    with pytest.raises(NotImplementedError):
        torch.linspace(0, 5, 3, dtype=torch.bool)
    with pytest.raises(NotImplementedError):
        fg.linspace(0, 5, 3, dtype=fg.bool)


def test_linspace_int_without_torch():
    # torch's values: its double linspace (fused multiply-adds) truncated toward zero
    assert fg.linspace(-10, 2, 10, dtype=fg.int64).tolist() == [
        -10, -8, -7, -6, -4, -3, -1, 0, 0, 2,
    ]  # fmt: skip
    assert fg.linspace(-3, 5, 4, dtype=fg.uint8).tolist() == [253, 170, 87, 5]
    assert math.isclose(fg.linspace(0.0, 1.0, 3).tolist()[1], 0.5)
