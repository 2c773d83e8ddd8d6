"""PyTorch's scatter/gather tests (test_scatter_gather.py and the scatter, gather, index_*,
masked_*, take and put tests of test_torch.py), CPU float32/float64/integer parts, run on
ferrograd and torch side by side; and scatter_reduce / index_reduce inside traced training
steps."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

pytestmark = [
    pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta"),
    pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter"),
]


def _step(lib, w0, p0, op, lr=0.1):
    """A training step over parameters ``w`` (the input) and ``p`` (scaling the source): the
    scatter ``op(lib, w, idx, v * p)`` squared and summed, then SGD."""
    w = lib.tensor(w0.copy(), requires_grad=True)
    p = lib.tensor(p0.copy(), requires_grad=True)
    opt = lib.optim.SGD([w, p], lr=lr)

    def step(idx, v):
        out = op(lib, w, idx, v * p)
        loss = (out * out).sum() + out.sum()
        opt.zero_grad()
        loss.backward()
        grads = (w.grad * 1.0, p.grad * 1.0)
        opt.step()
        return loss, grads

    return (w, p), step


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _run_three(op, idx_calls, v_calls, w0, p0):
    torch = pytest.importorskip("torch")
    (fw, fp), fstep = _step(fg, w0, p0, op)
    (ew, ep), estep = _step(fg, w0, p0, op)
    (tw, tp), tstep = _step(torch, w0, p0, op)
    traced = fg.trace(fstep)
    for ia, va in zip(idx_calls, v_calls):
        got, fgrads = traced(fg.tensor(ia), fg.tensor(va))
        eager, egrads = estep(fg.tensor(ia), fg.tensor(va))
        want, tgrads = tstep(torch.tensor(ia), torch.tensor(va))
        np.testing.assert_allclose(got.item(), eager.item(), rtol=1e-13)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-10)
        for a, b, c in zip(fgrads, egrads, tgrads):
            np.testing.assert_allclose(_np(a), _np(b), rtol=1e-13, atol=1e-15)
            np.testing.assert_allclose(_np(a), _np(c), rtol=1e-10, atol=1e-12)
    for a, b, c in ((fw, ew, tw), (fp, ep, tp)):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(_np(a), _np(c), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["amax", "amin", "prod", "mean"])
def test_scatter_reduce_in_a_traced_training_step_reads_each_calls_index_and_src(
    reduce, include_self
):
    rng = np.random.default_rng(1)
    w0, p0 = rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    idx_calls = [rng.integers(0, 4, (5, 3)) for _ in range(3)]
    v_calls = [rng.standard_normal((5, 3)) for _ in range(3)]
    v_calls[2][1, 1] = 0.0  # a zero factor (prod's gradient rule for zeros)

    def op(lib, w, idx, src):
        return lib.scatter_reduce(w, 0, idx, src, reduce, include_self=include_self)

    _run_three(op, idx_calls, v_calls, w0, p0)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["amax", "amin", "prod", "mean"])
def test_index_reduce_in_a_traced_training_step_reads_each_calls_index_and_source(
    reduce, include_self
):
    rng = np.random.default_rng(2)
    w0, p0 = rng.standard_normal((3, 4)), rng.standard_normal((3, 5))
    idx_calls = [np.array([0, 2, 2, 1, 0]), np.array([3, 3, 3, 0, 1]), np.array([1, 0, 2, 3, 1])]
    v_calls = [rng.standard_normal((3, 5)) for _ in range(3)]

    def op(lib, w, idx, src):
        return (w * 1.0).index_reduce(1, idx, src, reduce, include_self=include_self)

    _run_three(op, idx_calls, v_calls, w0, p0)


@pytest.mark.parametrize("reduce", ["amax", "prod"])
def test_a_traced_scatter_reduce_checks_the_indices_of_every_call(reduce):
    @fg.trace
    def f(x, idx, s):
        return fg.scatter_reduce(x, 0, idx, s, reduce)

    x = fg.ones(3, 2, dtype="float64")
    s = fg.ones(1, 2, dtype="float64")
    f(x, fg.tensor(np.array([[0, 1]])), s)
    for bad in ([[0, 3]], [[-1, 0]]):
        with pytest.raises(RuntimeError, match="out of bounds"):
            f(x, fg.tensor(np.array(bad)), s)


def test_a_traced_integer_scatter_reduce_prod_reads_each_calls_values():
    @fg.trace
    def f(x, idx, s):
        return fg.scatter_reduce(x, 1, idx, s, "prod", include_self=False)

    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    for _ in range(3):
        xa = rng.integers(-3, 4, (2, 4))
        ia, sa = rng.integers(0, 4, (2, 3)), rng.integers(-3, 4, (2, 3))
        got = f(fg.tensor(xa), fg.tensor(ia), fg.tensor(sa))
        want = torch.tensor(xa).scatter_reduce(
            1, torch.tensor(ia), torch.tensor(sa), "prod", include_self=False
        )
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def _both(fn):
    """``fn(lib)`` run on torch and on ferrograd, as numpy arrays."""
    torch = pytest.importorskip("torch")
    return fn(torch).detach().numpy(), fn(fg).detach().numpy()


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    ("reduce", "values"),
    [
        ("amax", [1, np.nan, -np.inf, -np.inf, 2, np.inf]),
        ("amin", [1, np.nan, -2, -np.inf, np.inf, np.inf]),
    ],
)
def test_scatter_reduce_amax_amin_keep_infinities_and_nans_in_their_own_slot(
    reduce, values, dtype, include_self
):
    def run(lib):
        x = lib.zeros(3, dtype=getattr(lib, dtype))
        src = lib.tensor(np.array(values, dtype=dtype))
        idx = lib.tensor([0, 0, 1, 1, 2, 2])
        return x.scatter_reduce_(0, idx, src, reduce, include_self=include_self)

    want, got = _both(run)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_scatter_reduce_amax_amin_gradient_with_infinite_entries(reduce, include_self):
    torch = pytest.importorskip("torch")
    xa = np.array([0.5, -1.0, 2.0])
    sa = np.array([1.0, np.inf, -np.inf, 3.0, -2.0, 0.25])
    idx = [0, 0, 1, 1, 2, 2]
    w = np.array([1.0, -2.0, 3.0])

    def run(lib):
        x = lib.tensor(xa.copy(), requires_grad=True)
        s = lib.tensor(sa.copy(), requires_grad=True)
        out = x.scatter_reduce(0, lib.tensor(idx), s, reduce, include_self=include_self)
        finite = lib.where(out.isfinite(), out, lib.zeros_like(out))
        (finite * lib.tensor(w)).sum().backward()
        return out.detach().numpy(), x.grad.numpy(), s.grad.numpy()

    for a, b in zip(run(fg), run(torch)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
@pytest.mark.parametrize(
    "call",
    [
        lambda x, i, s: x.scatter(0, i, s),
        lambda x, i, s: x.scatter_(0, i, s),
        lambda x, i, s: x.scatter(0, i, s, reduce="multiply"),
        lambda x, i, s: x.scatter_add(0, i, s),
        lambda x, i, s: x.scatter_add_(0, i, s),
        lambda x, i, s: x.scatter_reduce(0, i, s, "prod"),
        lambda x, i, s: x.scatter_reduce_(0, i, s, "amax", include_self=False),
        lambda x, i, s: x.scatter_reduce(0, i, s, "mean"),
    ],
)
def test_an_empty_index_of_any_shape_leaves_the_input_unchanged(call, dtype):
    rng = np.random.default_rng(4)
    xa = (rng.standard_normal((2, 2)) * 5).astype(dtype)
    sa = (rng.standard_normal((2, 2)) * 5).astype(dtype)

    def run(lib):
        idx = lib.tensor(np.zeros((0,), np.int64))
        return call(lib.tensor(xa), idx, lib.tensor(sa))

    want, got = _both(run)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_an_empty_index_keeps_the_gradient_of_the_input():
    x = fg.tensor(np.arange(4.0).reshape(2, 2), requires_grad=True)
    out = x.scatter_reduce(
        0, fg.tensor(np.zeros((0,), np.int64)), fg.ones(2, 2, dtype="float64"), "amax"
    )
    (out * 3.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 2), 3.0))


@pytest.mark.parametrize(
    "call",
    [
        lambda x, i, s: x.scatter(0, i, s),
        lambda x, i, s: x.scatter_(0, i, s),
        lambda x, i, s: x.scatter(0, i, s, reduce="add"),
        lambda x, i, s: x.scatter_add(0, i, s),
        lambda x, i, s: x.scatter_reduce(0, i, s, "sum"),
        lambda x, i, s: x.scatter_reduce(0, i, s, "amax"),
    ],
)
@pytest.mark.parametrize("src_dtype", ["float32", "bool", "int64"])
def test_scatter_refuses_a_src_of_another_dtype_as_torch(call, src_dtype):
    torch = pytest.importorskip("torch")
    xa = np.zeros((3, 4))
    ia = np.array([[0, 1, 2, 0]])
    sa = np.ones((1, 4), dtype=src_dtype)
    with pytest.raises(RuntimeError):
        call(torch.tensor(xa), torch.tensor(ia), torch.tensor(sa))
    with pytest.raises(RuntimeError, match="dtype"):
        call(fg.tensor(xa), fg.tensor(ia), fg.tensor(sa))


def test_scatter_reduce_refuses_a_float_index_with_torchs_error_type():
    torch = pytest.importorskip("torch")
    for lib in (torch, fg):
        x, s = lib.zeros(3, 4, dtype=lib.float64), lib.ones(2, 4, dtype=lib.float64)
        idx = lib.tensor(np.zeros((2, 4)))
        with pytest.raises(RuntimeError):
            x.scatter_reduce(0, idx, s, "sum")


@pytest.mark.parametrize("src_is_tensor", [True, False])
def test_scatter_multiply_traces_and_reads_each_calls_index(src_is_tensor):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)

    def call(lib, x, i, s):
        return x.scatter(0, i, s if src_is_tensor else 1.5, reduce="multiply")

    traced = fg.trace(lambda x, i, s: call(fg, x, i, s))
    for _ in range(3):
        xa, sa = rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
        ia = rng.integers(0, 4, (5, 3))
        got = traced(fg.tensor(xa), fg.tensor(ia), fg.tensor(sa)).numpy()
        want = call(torch, torch.tensor(xa), torch.tensor(ia), torch.tensor(sa)).numpy()
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(
            call(fg, fg.tensor(xa), fg.tensor(ia), fg.tensor(sa)).numpy(), want
        )


def test_scatter_multiply_gradient_in_a_traced_step_matches_finite_differences():
    # (PyTorch has no derivative for scatter with reduce="multiply")
    rng = np.random.default_rng(6)
    xa, sa = rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    xa[1, 1] = 0.0
    w = rng.standard_normal((4, 3))
    x = fg.tensor(xa.copy(), requires_grad=True)
    s = fg.tensor(sa.copy(), requires_grad=True)

    @fg.trace
    def step(i):
        x.grad = s.grad = None
        (x.scatter(0, i, s, reduce="multiply") * fg.tensor(w)).sum().backward()
        return x.grad * 1.0, s.grad * 1.0

    for _ in range(2):
        ia = rng.integers(0, 4, (5, 3))

        def f(xv, sv, ia=ia):
            out = fg.tensor(xv).scatter(0, fg.tensor(ia), fg.tensor(sv), reduce="multiply")
            return (out.numpy() * w).sum()

        gx, gs = step(fg.tensor(ia))
        for arr, grad, k in ((xa, gx.numpy(), 0), (sa, gs.numpy(), 1)):
            num = np.zeros_like(arr)
            for pos in np.ndindex(arr.shape):
                up, dn = arr.copy(), arr.copy()
                up[pos] += 1e-6
                dn[pos] -= 1e-6
                num[pos] = (
                    f(*((up, sa) if k == 0 else (xa, up))) - f(*((dn, sa) if k == 0 else (xa, dn)))
                ) / 2e-6
            np.testing.assert_allclose(grad, num, rtol=1e-6, atol=1e-8)


_SOURCE_CALLS = {
    "index_add": lambda lib, x, s: x.index_add(0, lib.tensor([0, 2]), s),
    "index_add_": lambda lib, x, s: x.index_add_(0, lib.tensor([0, 2]), s),
    "index_copy": lambda lib, x, s: x.index_copy(0, lib.tensor([0, 2]), s),
    "index_reduce": lambda lib, x, s: x.index_reduce(0, lib.tensor([0, 2]), s, "amax"),
    "put": lambda lib, x, s: x.put(lib.tensor([0, 5]), s[0, :2]),
    "put_": lambda lib, x, s: x.put_(lib.tensor([0, 5]), s[0, :2], accumulate=True),
}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("src_dtype", ["float32", "int64", "bool"])
@pytest.mark.parametrize("name", sorted(_SOURCE_CALLS))
def test_index_ops_refuse_a_source_of_another_dtype_as_torch(name, src_dtype):
    torch = pytest.importorskip("torch")
    call = _SOURCE_CALLS[name]
    xa, sa = np.zeros((3, 4)), np.ones((2, 4), dtype=src_dtype)
    with pytest.raises(RuntimeError):
        call(torch, torch.tensor(xa), torch.tensor(sa))
    with pytest.raises(RuntimeError, match="dtype"):
        call(fg, fg.tensor(xa), fg.tensor(sa))


_INDEX_CALLS = {
    "gather": lambda lib, x, i: lib.gather(x, 0, i.reshape(1, 2)),
    "scatter": lambda lib, x, i: x.scatter(0, i.reshape(1, 2), 1.0),
    "scatter_add": lambda lib, x, i: x.scatter_add(0, i.reshape(1, 2), x[:1, :2]),
    "scatter_reduce": lambda lib, x, i: x.scatter_reduce(0, i.reshape(1, 2), x[:1, :2], "amax"),
    "index_select": lambda lib, x, i: x.index_select(0, i),
    "index_add": lambda lib, x, i: x.index_add(0, i, x[:2]),
    "index_reduce": lambda lib, x, i: x.index_reduce(0, i, x[:2], "prod"),
}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("index_dtype", ["int16", "int8", "uint8"])
@pytest.mark.parametrize("name", sorted(_INDEX_CALLS))
def test_gathers_and_scatters_refuse_a_narrow_integer_index_as_torch(name, index_dtype):
    torch = pytest.importorskip("torch")
    call = _INDEX_CALLS[name]
    xa, ia = np.arange(12.0).reshape(3, 4), np.array([0, 2], dtype=index_dtype)
    with pytest.raises(RuntimeError):
        call(torch, torch.tensor(xa), torch.tensor(ia))
    with pytest.raises(RuntimeError, match="int64 or int32|int32/int64"):
        call(fg, fg.tensor(xa), fg.tensor(ia))
    # int32 is taken, as in torch
    want = call(torch, torch.tensor(xa), torch.tensor(ia.astype(np.int32))).numpy()
    got = call(fg, fg.tensor(xa), fg.tensor(ia.astype(np.int32))).numpy()
    np.testing.assert_array_equal(got, want)


def test_index_add_refuses_a_fractional_alpha_for_integer_tensors():
    # PyTorch truncates alpha to an integer here (1.5 adds the source once) while its add
    # refuses a float alpha for integer tensors; ferrograd refused nothing and added
    # trunc(1.5 * source)
    torch = pytest.importorskip("torch")
    x, s = np.zeros(2, np.int64), np.array([3, -3])
    with pytest.raises(RuntimeError, match="alpha"):
        fg.tensor(x).index_add(0, fg.tensor([0, 1]), fg.tensor(s), alpha=1.5)
    want = torch.tensor(x).index_add(0, torch.tensor([0, 1]), torch.tensor(s), alpha=2.0)
    got = fg.tensor(x).index_add(0, fg.tensor([0, 1]), fg.tensor(s), alpha=2.0)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
