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
