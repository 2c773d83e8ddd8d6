"""PyTorch's names on ferrograd (``mm``, ``einsum``, ``sort``, ``topk``, ``cdist``, in-place
methods, ``new_zeros``, ...): values and gradients against PyTorch in float64, so a PyTorch
program ports by renaming."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")
rng = np.random.default_rng(11)


def _both(a):
    return fg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _compare(f, *arrays, grad=True, grad_rtol=1e-11, **kw):
    fs, ts = zip(*[_both(np.array(a, dtype=np.float64)) for a in arrays])
    fo, to = f(fg, *fs, **kw), f(torch, *ts, **kw)
    fo = fo if isinstance(fo, (tuple, list)) else (fo,)
    to = to if isinstance(to, (tuple, list)) else (to,)
    for a, b in zip(fo, to):
        np.testing.assert_allclose(
            np.asarray(a.detach().numpy()), b.detach().numpy(), rtol=1e-12, atol=1e-12
        )
    if not grad:
        return
    w = rng.standard_normal(tuple(to[0].shape))
    (fo[0] * fg.tensor(w)).sum().backward()
    (to[0] * torch.tensor(w)).sum().backward()
    for a, b in zip(fs, ts):
        ga = np.zeros(a.shape) if a.grad is None else a.grad.numpy()
        gb = np.zeros(tuple(b.shape)) if b.grad is None else b.grad.numpy()
        np.testing.assert_allclose(ga, gb, rtol=grad_rtol, atol=1e-12)


A = rng.standard_normal((3, 4))
B = rng.standard_normal((4, 5))
C = rng.standard_normal((3, 5))
BA = rng.standard_normal((2, 3, 4))
BB = rng.standard_normal((2, 4, 5))
V3 = rng.standard_normal((4, 3))
V = rng.standard_normal(4)


@pytest.mark.parametrize(
    "name,f,arrays",
    [
        ("mm", lambda L, a, b: L.mm(a, b), (A, B)),
        ("bmm", lambda L, a, b: L.bmm(a, b), (BA, BB)),
        ("addmm", lambda L, c, a, b: L.addmm(c, a, b, beta=0.5, alpha=2.0), (C, A, B)),
        ("baddbmm", lambda L, a, b: L.baddbmm(L.bmm(a, b), a, b, alpha=0.3), (BA, BB)),
        ("dot", lambda L, a, b: L.dot(a, b), (V, V[::-1].copy())),
        ("outer", lambda L, a, b: L.outer(a, b), (V, V[:3].copy())),
        ("t", lambda L, a: L.t(a), (A,)),
        ("einsum_matmul", lambda L, a, b: L.einsum("ij,jk->ik", a, b), (A, B)),
        ("einsum_batch", lambda L, a, b: L.einsum("bij,bjk->bki", a, b), (BA, BB)),
        (
            "einsum_attention",
            lambda L, a, b: L.einsum("bqd,bkd->bqk", a, b),
            (BA, BA[:, ::-1].copy()),
        ),
        ("einsum_reduce", lambda L, a: L.einsum("bij->j", a), (BA,)),
        ("einsum_implicit", lambda L, a, b: L.einsum("ij,jk", a, b), (A, B)),
        ("einsum_outer", lambda L, a, b: L.einsum("i,j->ij", a, b), (V, V[:2].copy())),
        ("einsum_three", lambda L, a, b, c: L.einsum("ij,jk,ik->i", a, b, c), (A, B, C)),
        ("einsum_trace_free", lambda L, a: L.einsum("ij->ji", a), (A,)),
        ("sort", lambda L, a: L.sort(a, dim=1), (A,)),
        ("sort_desc", lambda L, a: L.sort(a, dim=0, descending=True), (A,)),
        ("topk", lambda L, a: L.topk(a, 2, dim=1), (A,)),
        ("topk_smallest", lambda L, a: L.topk(a, 3, dim=0, largest=False), (A,)),
        ("amax", lambda L, a: L.amax(a, dim=(0, 2)), (BA,)),
        ("amin", lambda L, a: L.amin(a, dim=1, keepdim=True), (BA,)),
        ("clamp_min", lambda L, a: L.clamp_min(a, 0.1), (A,)),
        ("movedim", lambda L, a: L.movedim(a, 0, 2), (BA,)),
        ("swapaxes", lambda L, a: L.swapaxes(a, 0, 2), (BA,)),
        ("hstack", lambda L, a, b: L.hstack([a, b]), (A, C)),
        ("vstack", lambda L, a, b: L.vstack([a, b]), (V, V[::-1].copy())),
        ("diagonal", lambda L, a: L.diagonal(a, 1), (A,)),
        ("diagonal_3d", lambda L, a: L.diagonal(a, -1, 1, 2), (BA,)),
        ("diag_make", lambda L, a: L.diag(a, 1), (V,)),
        ("diag_take", lambda L, a: L.diag(a), (A,)),
        ("cross", lambda L, a, b: L.cross(a, b, dim=1), (V3, V3[::-1].copy())),
        ("cdist", lambda L, a, b: L.cdist(a, b), (A, C[:, :4].copy() + 1)),
        ("lerp", lambda L, a, b: L.lerp(a, b, 0.3), (A, A[::-1].copy())),
        ("addcmul", lambda L, a, b, c: L.addcmul(a, b, c, value=0.5), (A, A, A[::-1].copy())),
        ("addcdiv", lambda L, a, b, c: L.addcdiv(a, b, c + 3, value=0.5), (A, A, A * A)),
        ("meshgrid_ij", lambda L, a, b: L.meshgrid(a, b, indexing="ij"), (V, V[:3].copy())),
        ("meshgrid_xy", lambda L, a, b: L.meshgrid(a, b, indexing="xy"), (V, V[:3].copy())),
        ("repeat_interleave", lambda L, a: a.repeat_interleave(2, dim=1), (A,)),
        ("index_select", lambda L, a: a.index_select(1, L.tensor([2, 0, 2])), (A,)),
        ("reshape_as", lambda L, a, b: a.reshape_as(b), (A, B.T[:3].copy().reshape(4, 3))),
    ],
)
def test_values_and_gradients_match_torch(name, f, arrays):
    _compare(f, *arrays)


def test_non_differentiable_helpers_match_torch():
    x = np.array([[0.0, 1.5, np.nan], [np.inf, -2.0, 0.0]])
    f, t = fg.tensor(x), torch.tensor(x)
    for name in ("nonzero", "count_nonzero"):
        np.testing.assert_array_equal(getattr(fg, name)(f).numpy(), getattr(torch, name)(t).numpy())
    np.testing.assert_array_equal(fg.nan_to_num(f).numpy(), torch.nan_to_num(t).numpy())
    np.testing.assert_array_equal(
        fg.nan_to_num(f, nan=1.0, posinf=9.0).numpy(),
        torch.nan_to_num(t, nan=1.0, posinf=9.0).numpy(),
    )
    a = fg.tensor([1.0, 1.0 + 1e-9, 2.0])
    b = fg.tensor([1.0, 1.0, 2.1])
    np.testing.assert_array_equal(fg.isclose(a, b).numpy(), [True, True, False])
    assert fg.allclose(a, a) and not fg.allclose(a, b)
    u, inv, cnt = fg.unique(fg.tensor([3, 1, 3, 2]), return_inverse=True, return_counts=True)
    tu, tinv, tcnt = torch.unique(
        torch.tensor([3, 1, 3, 2]), return_inverse=True, return_counts=True
    )
    for p, q in ((u, tu), (inv, tinv), (cnt, tcnt)):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    i = fg.argsort(fg.tensor([[3.0, 1.0, 2.0]]), dim=1, descending=True)
    np.testing.assert_array_equal(i.numpy(), [[0, 2, 1]])
    assert fg.numel(fg.ones(2, 3)) == 6


def test_inplace_and_new_methods_match_torch():
    for lib in (fg, torch):
        x = lib.tensor(A.copy())
        x.add_(lib.tensor(B[:3, :4].copy()), alpha=2.0).mul_(0.5).sub_(1.0).div_(3.0)
        x.clamp_(-0.3, 0.4).abs_().sqrt_().neg_().exp_().pow_(2.0).tanh_()
        x.lerp_(lib.tensor(A.copy()), 0.25).addcmul_(x, x, value=0.1)
        if lib is fg:
            got = x.numpy().copy()
        else:
            np.testing.assert_allclose(got, x.numpy(), rtol=1e-14)
    x = fg.tensor(A, dtype="float32")
    z = x.new_zeros(2, 3)
    assert z.shape == (2, 3) and z.dtype == fg.float32 and float(z.sum()) == 0
    assert x.new_ones((2,)).numpy().tolist() == [1.0, 1.0]
    assert x.new_full((2,), 7).numpy().tolist() == [7.0, 7.0]
    assert x.new_tensor([1, 2]).dtype == fg.float32
    assert x.new_zeros(3, requires_grad=True).requires_grad
    assert x.type() == "torch.FloatTensor" and x.type(fg.float64).dtype == fg.float64
    assert x.type("torch.LongTensor").dtype == fg.int64
    assert x.is_floating_point() and not fg.ones(2, dtype="int64").is_floating_point()
    assert x.element_size() == 4 and x.itemsize == 4 and x.nbytes == 48 and x.ndimension() == 2


def test_inplace_method_on_a_computed_tensor_is_differentiated():
    x = fg.ones(3, requires_grad=True)
    h = x * 2
    h.mul_(3.0)  # a computed tensor: recorded, the gradient goes through
    h.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 6.0, 6.0])


def test_bad_input_errors_name_the_op():
    with pytest.raises(fg.ShapeError, match="mm: input must be 2-D"):
        fg.mm(fg.ones(3), fg.ones(3, 2))
    with pytest.raises(fg.ShapeError, match="bmm: batch sizes differ"):
        fg.bmm(fg.ones(2, 3, 4), fg.ones(3, 4, 5))
    with pytest.raises(ValueError, match="einsum: the equation has 2 operands"):
        fg.einsum("ij,jk->ik", fg.ones(2, 2))
    with pytest.raises(fg.ShapeError, match="einsum: subscripts 'ijk'"):
        fg.einsum("ijk->i", fg.ones(2, 2))
    with pytest.raises(ValueError, match="topk: k"):
        fg.topk(fg.ones(3), 4)
    with pytest.raises(fg.ShapeError, match="cross: dim"):
        fg.cross(fg.ones(2, 4), fg.ones(2, 4), dim=1)


X4 = rng.standard_normal((2, 3, 4))
Y4 = rng.standard_normal((2, 3, 4))
SIGN = np.where(rng.standard_normal((2, 3)) > 0, 1.0, -1.0)


def _F(name, *args, **kw):
    return lambda L, *xs: getattr(L.nn.functional, name)(*xs, *args, **kw)


@pytest.mark.parametrize(
    "name,f,arrays",
    [
        ("softmin", _F("softmin", dim=1), (X4,)),
        ("hardsigmoid", _F("hardsigmoid"), (X4 * 4,)),
        ("hardswish", _F("hardswish"), (X4 * 4,)),
        ("mish", _F("mish"), (X4,)),
        ("celu", _F("celu", alpha=0.7), (X4,)),
        ("softsign", _F("softsign"), (X4,)),
        ("tanhshrink", _F("tanhshrink"), (X4,)),
        ("glu", _F("glu", dim=-1), (X4,)),
        ("cosine_similarity", _F("cosine_similarity", dim=-1), (X4, Y4)),
        ("pairwise_distance", _F("pairwise_distance"), (X4, Y4)),
        ("rms_norm", lambda L, x, w: L.nn.functional.rms_norm(x, [4], w, eps=1e-5), (X4, Y4[0, 0])),
        ("max_pool1d", _F("max_pool1d", 2, 1, 1), (X4,)),
        ("avg_pool1d", _F("avg_pool1d", 3, 1, 1), (X4,)),
        ("adaptive_avg_pool1d", _F("adaptive_avg_pool1d", 3), (X4,)),
        (
            "margin_ranking_loss",
            lambda L, a, b: L.nn.functional.margin_ranking_loss(a, b, L.tensor(SIGN), margin=0.2),
            (X4[:, :, 0].copy(), Y4[:, :, 0].copy()),
        ),
        (
            "hinge_embedding_loss",
            lambda L, a: L.nn.functional.hinge_embedding_loss(a, L.tensor(SIGN), margin=0.5),
            (X4[:, :, 0].copy(),),
        ),
        (
            "soft_margin_loss",
            lambda L, a: L.nn.functional.soft_margin_loss(a, L.tensor(SIGN)),
            (X4[:, :, 0].copy(),),
        ),
        (
            "cosine_embedding_loss",
            lambda L, a, b: L.nn.functional.cosine_embedding_loss(
                a, b, L.tensor(SIGN[0]), margin=0.1, reduction="sum"
            ),
            (X4[0], Y4[0]),
        ),
        ("triplet_margin_loss", _F("triplet_margin_loss", margin=0.5), (X4[0], Y4[0], X4[1])),
        (
            "gaussian_nll_loss",
            lambda L, x, t, v: L.nn.functional.gaussian_nll_loss(x, t, v.exp(), full=True),
            (X4, Y4, X4 * 0.1),
        ),
        (
            "poisson_nll_loss",
            lambda L, x, t: L.nn.functional.poisson_nll_loss(x, t.exp(), full=True),
            (X4, Y4 * 2),
        ),
    ],
)
def test_functional_values_and_gradients_match_torch(name, f, arrays):
    # (PyTorch's hardsigmoid and celu backward kernels use float32 constants: 3e-8 off in
    # float64; ours agree with finite differences to 1e-10)
    _compare(f, *arrays, grad_rtol=1e-7 if name in ("hardsigmoid", "celu") else 1e-11)


@pytest.mark.parametrize("name", ["hardsigmoid", "celu"])
def test_functional_gradients_match_finite_differences(name):
    f = {
        "hardsigmoid": fg.nn.functional.hardsigmoid,
        "celu": lambda x: fg.nn.functional.celu(x, alpha=0.7),
    }[name]
    a = np.array([-0.3, 0.2, 1.1, -1.7, 2.5])
    x = fg.tensor(a).requires_grad_()
    f(x).sum().backward()
    eps = 1e-6
    fd = [
        (f(fg.tensor(a + eps * e)).sum().item() - f(fg.tensor(a - eps * e)).sum().item())
        / (2 * eps)
        for e in np.eye(len(a))
    ]
    np.testing.assert_allclose(x.grad.numpy(), fd, rtol=1e-8, atol=1e-9)


def test_dropout2d_drops_whole_channels():
    fg.manual_seed(0)
    x = fg.ones(8, 16, 3, 3, dtype="float64")
    y = fg.nn.functional.dropout2d(x, 0.5).numpy()
    per_channel = y.reshape(8, 16, 9)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2.0).all(-1))
    assert 0.2 < (per_channel[:, :, 0] == 0).mean() < 0.8
    assert fg.nn.functional.dropout2d(x, 0.5, training=False) is x


def test_data_attribute_dtype_aliases_and_small_helpers():
    p = fg.nn.Parameter(fg.ones(3))
    p.data -= 0.5  # the classic hand-written update
    np.testing.assert_array_equal(p.numpy(), [0.5, 0.5, 0.5])
    p.data.mul_(2.0)
    np.testing.assert_array_equal(p.numpy(), [1.0, 1.0, 1.0])
    # PyTorch's: the object now holds the new data, of any dtype and shape, and stays a leaf
    # that requires grad
    p.data = fg.zeros(3, dtype=fg.float64)
    assert p.dtype == fg.float64 and p.numpy().tolist() == [0.0, 0.0, 0.0]
    p.data = fg.ones(4)
    assert p.shape == (4,) and p.requires_grad and p.is_leaf
    (p * 3.0).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), [3.0] * 4)
    p.grad = None
    y = (p.data * 2.0).sum()
    assert not y.requires_grad  # .data is off the tape
    assert (fg.float, fg.double, fg.half, fg.long, fg.int, fg.bool) == (
        fg.float32,
        fg.float64,
        fg.float16,
        fg.int64,
        fg.int32,
        fg.bool_,
    )
    assert (
        fg.ones(2).to(fg.double).dtype == torch.float64
        or fg.ones(2).to(fg.double).dtype == fg.float64
    )
    assert fg.is_tensor(p) and not fg.is_tensor(np.ones(2))
    assert not fg.ones(1, device="cpu").is_cuda
    assert fg.from_numpy(np.arange(3)).dtype == fg.int64
    t = fg.ones(2)
    assert fg.as_tensor(t) is t and fg.as_tensor(t, dtype=fg.float64).dtype == fg.float64
    x = fg.ones(3, requires_grad=True)
    (fg.clone(x) * 2.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_set_default_dtype_reaches_tensors_factories_and_layers():
    assert fg.get_default_dtype() == fg.float32
    fg.set_default_dtype(fg.float64)
    try:
        assert fg.get_default_dtype() == fg.float64
        made = [
            fg.tensor([1.0, 2.0]),
            fg.tensor(3.5),
            fg.zeros(2),
            fg.ones(2, 2),
            fg.empty(3),
            fg.full((2,), 1.5),
            fg.rand(2),
            fg.randn(2),
            fg.arange(0.0, 1.0, 0.5),
            fg.linspace(0, 1, 3),
            fg.eye(2),
            fg.nn.Linear(2, 3).weight,
            fg.nn.LayerNorm(3).weight,
        ]
        assert all(t.dtype == fg.float64 for t in made), [t.dtype for t in made]
        assert fg.tensor([1, 2]).dtype == fg.int64 and fg.full((1,), 2).dtype == fg.int64
        assert fg.tensor(np.ones(2, np.float32)).dtype == fg.float32  # numpy keeps its dtype
        with pytest.raises(TypeError, match="floating-point"):
            fg.set_default_dtype(fg.int64)
    finally:
        fg.set_default_dtype(fg.float32)
    assert fg.tensor([1.0]).dtype == fg.float32 and fg.zeros(1).dtype == fg.float32


def test_inplace_scatter_index_methods_and_random_fills_match_torch():
    a = np.arange(12.0).reshape(3, 4)
    got = []
    for lib in (fg, torch):
        x = lib.tensor(a.copy())
        x.scatter_(1, lib.tensor([[0], [1], [2]]), lib.tensor(np.full((3, 1), -1.0)))
        x.index_fill_(0, lib.tensor([2]), 7.0)
        x.index_add_(1, lib.tensor([3, 3]), lib.tensor(np.ones((3, 2))), alpha=2.0)
        x.scatter_add_(0, lib.tensor([[1, 0, 0, 0]]), lib.tensor(np.full((1, 4), 5.0)))
        got.append(x.numpy().copy())
    np.testing.assert_array_equal(got[0], got[1])
    _compare(lambda L, x: x.index_fill(1, L.tensor([0, 2]), -3.0), a)
    fg.manual_seed(0)
    assert float(fg.zeros(50, dtype=fg.float64).exponential_(2.0).min()) > 0
    r = fg.zeros(50, dtype="int64").random_(2, 5).numpy()
    assert r.min() >= 2 and r.max() < 5
    assert float(fg.zeros(50).log_normal_().min()) > 0


@pytest.mark.parametrize(
    "eq,shapes",
    [
        ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
        ("...ij,...jk", [(1, 3, 4), (6, 4, 5)]),
        ("bi...,bj...->bij...", [(2, 3, 4), (2, 5, 4)]),
        ("ii->i", [(3, 3)]),
        ("ii", [(3, 3)]),
        ("...ii->...i", [(2, 3, 3)]),
        ("i...->...", [(3, 2, 2)]),
        ("ij,j...->i...", [(3, 4), (4,)]),
        ("bii,bjk->bijk", [(2, 3, 3), (2, 2, 2)]),
        ("...,...->...", [(3,), (2, 3)]),
        ("iij,kk->j", [(2, 2, 3), (4, 4)]),
    ],
)
def test_einsum_ellipsis_and_diagonals(eq, shapes):
    arrays = [rng.standard_normal(s) for s in shapes]
    _compare(lambda m, *xs: m.einsum(eq, *xs), *arrays)


def test_sort_orders_nan_inf_and_ties_as_pytorch_on_any_device():
    torch = pytest.importorskip("torch")
    nan, inf = float("nan"), float("inf")
    a = np.array(
        [[inf, nan, 1.0, -inf, 1.0, nan, -0.0, 0.0], [2.0, 2.0, 2.0, -1.0, inf, inf, nan, 3.0]]
    )
    for desc in (False, True):
        for dim in (0, 1, -1):
            v, i = fg.sort(fg.tensor(a), dim=dim, descending=desc)
            tv, ti = torch.sort(torch.tensor(a), dim=dim, descending=desc, stable=True)
            np.testing.assert_array_equal(i.numpy(), ti.numpy())
            np.testing.assert_array_equal(v.numpy(), tv.numpy())
            assert str(i.device) == str(fg.tensor(a).device)
    big = np.array([2**62 + 1, 2**62, -5, 2**62 + 3], dtype=np.int64)
    np.testing.assert_array_equal(
        fg.argsort(fg.tensor(big)).numpy(), np.argsort(big, kind="stable")
    )
    f32 = a.astype(np.float32).T  # a non-contiguous view
    np.testing.assert_array_equal(
        fg.topk(fg.tensor(f32), 3, dim=0).indices.numpy(),
        torch.topk(torch.tensor(f32), 3, dim=0).indices.numpy(),
    )
