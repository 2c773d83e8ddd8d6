"""Which results alias their input, as in PyTorch: ``diagonal``, ``unfold`` and ``as_strided``
are views (writes through them reach the base, their gradients and in-place writes through
them differentiate), a 0-d integer tensor indexes as an integer (a view) while a boolean
scalar is an advanced index (a copy), uint8 masks select as bool masks; and the layout
details ``ravel``, ``flatten``, ``is_contiguous`` and ``expand`` report. Each case runs the
same code on torch and ferrograd; gradients are float64, checked against torch and finite
differences."""

import warnings

import ferrograd as fg
import numpy as np
import pytest


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(params=["torch", "ferrograd"])
def lib(request, torch):
    return torch if request.param == "torch" else fg


def both(torch, f):
    """``f(torch)`` and ``f(fg)``, each as numpy (tuples element by element)."""

    def host(r):
        if isinstance(r, tuple):
            return tuple(host(v) for v in r)
        if hasattr(r, "detach"):
            return np.asarray(r.detach().numpy())
        return r

    return host(f(torch)), host(f(fg))


def assert_same(torch, f):
    want, got = both(torch, f)
    if isinstance(want, tuple):
        assert len(want) == len(got)
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def check_grad(torch, a, f):
    """``f(L, x)`` (a scalar) differentiated at ``a`` (float64) by torch, by ferrograd and by
    central differences (on ferrograd): all three agree."""
    grads = []
    for L in (torch, fg):
        x = L.tensor(a, requires_grad=True)
        f(L, x).backward()
        grads.append(np.asarray(x.grad.numpy()))
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-10, atol=1e-12)
    eps = 1e-6
    fd = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        up, down = a.copy(), a.copy()
        up[i] += eps
        down[i] -= eps
        with fg.no_grad():
            fd[i] = (f(fg, fg.tensor(up)).item() - f(fg, fg.tensor(down)).item()) / (2 * eps)
    np.testing.assert_allclose(grads[1], fd, rtol=1e-6, atol=1e-6)


RNG = np.random.default_rng(0)
M = RNG.standard_normal((4, 5))
B = RNG.standard_normal((2, 3, 4))


# ---------------------------------------------------------------------------------- diagonal


@pytest.mark.parametrize(
    ("shape", "args"),
    [
        ((4, 5), ()),
        ((4, 5), (1,)),
        ((4, 5), (-2,)),
        ((4, 5), (7,)),
        ((4, 5), (0, 1, 0)),
        ((2, 3, 4), (0, 0, 2)),
        ((2, 3, 4), (1, -1, 1)),
        ((2, 3, 4), (-1, 2, 0)),
    ],
)
def test_diagonal_values_and_strides(torch, shape, args):
    a = np.arange(float(np.prod(shape))).reshape(shape)

    def f(L):
        d = L.tensor(a).diagonal(*args)
        return d, tuple(d.stride()), d.storage_offset()

    (wv, ws, wo), (gv, gs, go) = both(torch, f)
    np.testing.assert_array_equal(gv, wv)
    assert (gs, go) == (ws, wo)
    # the function form is the same view
    np.testing.assert_array_equal(fg.diagonal(fg.tensor(a), *args).numpy(), wv)


def test_writes_through_a_diagonal_reach_the_base(torch):
    def fill(L):
        t = L.zeros(3, 3)
        t.diagonal().fill_(1.0)
        return t

    def copy(L):
        t = L.ones(3, 3)
        L.diagonal(t).copy_(L.tensor([7.0, 8.0, 9.0]))
        return t

    def setitem(L):
        t = L.ones(5, 5)
        v = t.diagonal()
        v[0] = 0
        return t

    def add(L):
        t = L.zeros(2, 3, 4)
        t.diagonal(1, 1, 2).add_(0.5)
        return t

    def operator(L):
        t = L.zeros(3, 4)
        d = t.diagonal(-1)
        d += 2.0
        return t

    def base_to_view(L):
        t = L.zeros(3, 3)
        d = t.diagonal()
        t.add_(1.0)
        return d

    for f in (fill, copy, setitem, add, operator, base_to_view):
        assert_same(torch, f)


def test_diag_of_a_matrix_is_a_copy_and_fill_diagonal_still_works(torch):
    def diag(L):
        t = L.zeros(3, 3)
        L.diag(t).fill_(1.0)
        return t

    def fill_diagonal(L):
        t = L.zeros(4, 3)
        t.fill_diagonal_(2.0)
        u = L.zeros(7, 3)
        u.fill_diagonal_(5.0, wrap=True)
        return t, u

    assert_same(torch, diag)
    assert_same(torch, fill_diagonal)


@pytest.mark.parametrize(
    ("a", "f"),
    [
        (M, lambda L, x: (x.diagonal() ** 2).sum()),
        (M, lambda L, x: (x.diagonal(1) * L.tensor([1.0, 2.0, 3.0, 4.0])).sum()),
        (M.T.copy(), lambda L, x: (x.t().diagonal(-1) ** 3).sum()),
        (B, lambda L, x: (L.diagonal(x, 0, 0, 2).sin()).sum()),
        (B, lambda L, x: (x.diagonal(1, -1, 1) ** 2).sum()),
    ],
)
def test_diagonal_gradient(torch, a, f):
    check_grad(torch, a, f)


def in_place_through_diagonal(L, x):
    y = x.clone()
    y.diagonal().mul_(2)
    return y.sum()


def in_place_through_diagonal_nonlinear(L, x):
    y = x * 1.0
    d = y.diagonal(1)
    d.mul_(x[:4, 0])  # the superdiagonal times the first column, in place
    return (y * y.sin()).sum()


def base_write_seen_by_diagonal(L, x):
    y = x.clone()
    d = y.diagonal()
    y.mul_(3.0)
    return (d**2).sum()


def diagonal_written_then_base_read(L, x):
    y = x.clone()
    y.diagonal().copy_(x[0, :4] ** 2)
    return (y * L.tensor(M)).sum()


@pytest.mark.parametrize(
    "f",
    [
        in_place_through_diagonal,
        in_place_through_diagonal_nonlinear,
        base_write_seen_by_diagonal,
        diagonal_written_then_base_read,
    ],
)
def test_gradient_through_in_place_writes_into_a_diagonal(torch, f):
    check_grad(torch, M, f)


def test_diagonal_second_derivative(torch):
    out = []
    for L in (torch, fg):
        x = L.tensor(M, requires_grad=True)
        (g,) = L.autograd.grad((x.diagonal() ** 3).sum(), x, create_graph=True)
        (h,) = L.autograd.grad((g * L.tensor(M)).sum(), x)
        out.append(h.detach().numpy())
    np.testing.assert_allclose(out[1], out[0], rtol=1e-12)


# ------------------------------------------------------------------------------------ unfold


@pytest.mark.parametrize(
    ("shape", "args"),
    [((10,), (0, 3, 2)), ((4, 5), (1, 2, 1)), ((4, 5), (0, 4, 3)), ((2, 3, 4), (-1, 2, 2))],
)
def test_unfold_values_and_strides(torch, shape, args):
    a = np.arange(float(np.prod(shape))).reshape(shape)

    def f(L):
        u = L.tensor(a).unfold(*args)
        return u, tuple(u.stride())

    (wv, ws), (gv, gs) = both(torch, f)
    np.testing.assert_array_equal(gv, wv)
    assert gs == ws


def test_unfold_is_a_view_and_takes_a_0d_tensor(torch):
    def write(L):
        t = L.ones(10)
        v = t.unfold(0, 3, 2)
        v[1, 0] = 0
        v[3].mul_(4.0)
        return t

    def base_to_view(L):
        t = L.arange(6.0)
        v = t.unfold(0, 2, 2)
        t.mul_(-1.0)
        return v

    assert_same(torch, write)
    assert_same(torch, base_to_view)
    assert_same(torch, lambda L: L.tensor(0.5).unfold(0, 1, 1))


@pytest.mark.parametrize(
    ("a", "f"),
    [
        (RNG.standard_normal(9), lambda L, x: (x.unfold(0, 3, 2) ** 2).sum()),
        (RNG.standard_normal(7), lambda L, x: (x.unfold(0, 4, 1).cos()).sum()),
        (M, lambda L, x: (x.unfold(1, 2, 2) * x.unfold(1, 2, 2).exp()).sum()),
        (M, lambda L, x: (x.t().unfold(1, 3, 1) ** 2).sum()),
    ],
)
def test_unfold_gradient_adds_overlapping_windows(torch, a, f):
    check_grad(torch, a, f)


def test_gradient_through_an_in_place_write_into_unfold(torch):
    def f(L, x):
        y = x.clone()
        y.unfold(0, 2, 3).mul_(3.0)
        return (y**2).sum()

    check_grad(torch, RNG.standard_normal(8), f)


# -------------------------------------------------------------------------------- as_strided


def test_as_strided_is_a_view(torch):
    def write(L):
        t = L.ones(5, 5)
        v = t.as_strided((25,), (1,))
        v[6] = 0
        return t

    def offset(L):
        t = L.zeros(12)
        t.as_strided((3, 2), (4, 1), 1).fill_(1.0)
        return t

    def non_contiguous(L):
        return L.arange(5.0).expand(5, 5).as_strided([5, 5], [0, 1], 0)

    def outside_a_slice(L):
        return L.arange(12.0).view(6, 2)[3:].as_strided([3, 2], [2, 1], 0)

    for f in (write, offset, non_contiguous, outside_a_slice):
        assert_same(torch, f)
    for L in (torch, fg):
        with pytest.raises(RuntimeError):
            L.ones(2).as_strided((3,), (1,))


@pytest.mark.parametrize(
    ("a", "f"),
    [
        (np.arange(12.0), lambda L, x: (x.as_strided((4, 4), (2, 1), 1) ** 2).sum()),
        (M, lambda L, x: (x.as_strided((3, 3), (5, 1)) * L.tensor(M[:3, :3])).sum()),
        (M, lambda L, x: (x.t().as_strided((2, 2), (1, 5), 1) ** 3).sum()),
    ],
)
def test_as_strided_gradient(torch, a, f):
    check_grad(torch, a, f)


# ---------------------------------------------------------------------------------- indexing


def test_0d_integer_tensor_index_is_a_view(torch):
    def fill(L):
        a = L.zeros(2, 3)
        a[L.tensor(1)].fill_(5.0)
        return a

    def chained(L):
        a = L.zeros(2, 3)
        a[L.tensor(1)][0] = 7.0
        return a

    def in_tuple(L):
        a = L.zeros(2, 3)
        a[0, L.tensor(2)].fill_(3.0)
        return a

    def assign(L):
        a = L.zeros(3)
        a[L.tensor(1)] = 5.0
        return a

    for f in (fill, chained, in_tuple, assign):
        assert_same(torch, f)


def test_boolean_scalar_index_is_a_copy(torch):
    def true(L):
        a = L.zeros(2, 3)
        v = a[True]
        v.fill_(5.0)
        return a, v

    def false(L):
        a = L.zeros(2, 3)
        v = a[False]
        return a, L.tensor(list(v.shape))

    def with_int(L):
        a = L.zeros(2, 3)
        v = a[True, 0]
        v.fill_(1.0)
        return a, v

    def assign(L):
        a = L.zeros(2, 3)
        a[True] = 4.0
        return a

    for f in (true, false, with_int, assign):
        assert_same(torch, f)


def test_uint8_masks_select_as_bool_masks(torch):
    m5 = np.array([1, 0, 1, 1, 0], dtype=np.uint8)
    m4 = np.array([1, 0, 1, 0], dtype=np.uint8)

    def get(L):
        return L.arange(105.0).reshape(5, 7, 3)[L.tensor(m5)]

    def put(L):
        x = L.arange(0.0, 16).view(4, 4)
        x[L.tensor(m4)] = L.tensor([3.0, 4, 5, 6])
        return x

    def scalar(L):
        return L.tensor(list(L.zeros(2, 3)[L.tensor(1, dtype=L.uint8)].shape))

    for f, warns in ((get, True), (put, True), (scalar, False)):
        assert_same(torch, f)
        for L in (torch, fg):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                f(L)
            assert any(issubclass(w.category, UserWarning) for w in caught) == warns


# ------------------------------------------------------------------------------ layout facts


def test_ravel_of_a_non_contiguous_tensor_is_a_contiguous_copy(torch):
    def f(L):
        base = L.ones(10)
        r = base[::2].ravel()
        r[0] = -1
        c = L.ones(4)
        rc = c.ravel()
        rc[1] = 3
        return r.is_contiguous(), tuple(r.stride()), base, c

    want, got = both(torch, f)
    assert want[:2] == got[:2]
    np.testing.assert_array_equal(got[2], want[2])
    np.testing.assert_array_equal(got[3], want[3])


def test_flatten_of_one_axis_is_the_tensor_itself(lib):
    t = lib.ones(2, 2)
    assert t.flatten(1, 1) is t
    assert t.flatten(0, 0) is t
    assert tuple(t.flatten().shape) == (4,)


def test_empty_tensors_are_contiguous(lib):
    assert lib.zeros(2, 0, 4).is_contiguous()
    v = lib.zeros(2, 3, 4, 5)[:, :, :, 1][:, 1:1, :]
    assert tuple(v.stride()) == (60, 20, 5)
    assert v.is_contiguous()


def test_expand_strides(torch):
    cases = [
        lambda L: L.zeros(5).expand(1, 1, 5),
        lambda L: L.zeros(3).expand(2, 1, 3),
        lambda L: L.zeros(3, 1).expand(1, 3, 1),
        lambda L: L.zeros(3, 1).expand(2, 3, 4),
        lambda L: L.tensor(1.0).expand(1, 1),
        lambda L: L.zeros(5).unsqueeze(0).unsqueeze(1),
    ]
    for f in cases:
        assert tuple(f(fg).stride()) == tuple(f(torch).stride())
