"""More of PyTorch's functions (``remainder``, ``%``, ``//``, ``asinh``, ``logaddexp``,
``xlogy``, ``median``, ``quantile``, ``unbind``, ``kron``, ``tensordot``, ``searchsorted``,
...): values and gradients against PyTorch in float64, and against finite differences."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from conftest import check_grad

torch = pytest.importorskip("torch")
rng = np.random.default_rng(23)


def _both(a):
    return fg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _compare(f, *arrays, grad=True):
    """``f(lib, *tensors)`` in ferrograd and torch: the same values and (for the first
    output) the same gradients of a random weighting of it."""
    fs, ts = zip(*[_both(np.array(a, dtype=np.float64)) for a in arrays])
    fo, to = f(fg, *fs), f(torch, *ts)
    fo = fo if isinstance(fo, (tuple, list)) else (fo,)
    to = to if isinstance(to, (tuple, list)) else (to,)
    assert len(fo) == len(to)
    for a, b in zip(fo, to):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(
            np.asarray(a.detach().numpy(), dtype=np.float64),
            b.detach().numpy().astype(np.float64),
            rtol=1e-12,
            atol=1e-12,
        )
    if not grad:
        return
    w = rng.standard_normal(tuple(to[0].shape))
    (fo[0] * fg.tensor(w)).sum().backward()
    try:
        (to[0] * torch.tensor(w)).sum().backward()
    except RuntimeError as e:  # an older PyTorch without this derivative (aminmax before 2.1x)
        if "not implemented" not in str(e):
            raise
        pytest.skip(f"this PyTorch ({torch.__version__}) has no gradient to compare: {e}")
    for a, b in zip(fs, ts):
        ga = np.zeros(a.shape) if a.grad is None else a.grad.numpy()
        gb = np.zeros(tuple(b.shape)) if b.grad is None else b.grad.numpy()
        np.testing.assert_allclose(ga, gb, rtol=1e-11, atol=1e-12)


X = rng.standard_normal((3, 5)) * 3
Y = rng.uniform(0.5, 2.0, (3, 5)) * rng.choice([-1.0, 1.0], (3, 5))
P = rng.uniform(0.05, 0.95, (3, 5))

BINARY = {
    "remainder": (lambda m, a, b: m.remainder(a, b), X, Y),
    "fmod": (lambda m, a, b: m.fmod(a, b), X, Y),
    "mod_operator": (lambda m, a, b: a % b, X, Y),
    "rmod_number": (lambda m, a, b: 7.5 % b, X, Y),
    "div_floor": (lambda m, a, b: m.div(a, b, rounding_mode="floor").detach(), X, Y),
    "div_trunc": (lambda m, a, b: a.div(b, rounding_mode="trunc").detach(), X, Y),
    "true_divide": (lambda m, a, b: m.true_divide(a, b), X, Y),
    "logaddexp": (lambda m, a, b: m.logaddexp(a, b), X, Y),
    "logaddexp_big": (lambda m, a, b: m.logaddexp(a * 300, b), X, Y),
    "logaddexp2": (lambda m, a, b: m.logaddexp2(a, b), X, Y),
    "hypot": (lambda m, a, b: m.hypot(a, b), X, Y),
    "xlogy": (lambda m, a, b: m.xlogy(a, b.abs()), X, Y),
    "copysign": (lambda m, a, b: m.copysign(a, b), X, Y),
    "fmax": (lambda m, a, b: m.fmax(a, b), X, Y),
    "fmin": (lambda m, a, b: m.fmin(a, b), X, Y),
    "float_power": (lambda m, a, b: m.float_power(a.abs() + 0.1, b), X, Y),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_against_torch(name):
    f, a, b = BINARY[name]
    # (PyTorch has no gradient of a number % tensor in the tensor)
    _compare(f, a, b, grad=not name.startswith("div_") and name != "rmod_number")


UNARY = {
    "asinh": (lambda m, x: m.asinh(x), X),
    "asinh_method": (lambda m, x: x.arcsinh(), X),
    "acosh": (lambda m, x: m.acosh(x.abs() + 1.1), X),
    "atanh": (lambda m, x: m.atanh(x / 10), X),
    "frac": (lambda m, x: m.frac(x), X),
    "deg2rad": (lambda m, x: m.deg2rad(x), X),
    "rad2deg": (lambda m, x: m.rad2deg(x), X),
    "logit": (lambda m, x: m.logit(x), P),
    "logit_eps": (lambda m, x: m.logit(x, eps=0.2), P),
    "sinc": (lambda m, x: m.sinc(x), X),
    "diff": (lambda m, x: m.diff(x, dim=1), X),
    "diff_n2_prepend": (lambda m, x: m.diff(x, n=2, dim=0, prepend=x[:1] * 2), X),
    "rot90": (lambda m, x: m.rot90(x, 1, (0, 1)), X),
    "rot90_k3": (lambda m, x: m.rot90(x, -1, (1, 0)), X),
    "rot90_k2": (lambda m, x: m.rot90(x, 2), X),
    "fliplr": (lambda m, x: m.fliplr(x), X),
    "flipud": (lambda m, x: m.flipud(x), X),
    "unbind": (lambda m, x: m.unbind(x, 1), X),
    "unbind_method": (lambda m, x: x.unbind(), X),
    "median_all": (lambda m, x: m.median(x), X),
    "median_dim": (lambda m, x: m.median(x, 1), X),
    "median_dim_even": (lambda m, x: x[:, :4].median(dim=1, keepdim=True), X),
    "kthvalue": (lambda m, x: m.kthvalue(x, 2, 1), X),
    "kthvalue_keepdim": (lambda m, x: x.kthvalue(3, dim=0, keepdim=True), X),
    "quantile": (lambda m, x: m.quantile(x, 0.3), X),
    "quantile_dim": (lambda m, x: m.quantile(x, 0.75, dim=1, keepdim=True), X),
    "quantile_many": (
        lambda m, x: m.quantile(x, m.tensor([0.1, 0.5, 0.9], dtype=m.float64), dim=0),
        X,
    ),
    "quantile_lower": (lambda m, x: m.quantile(x, 0.4, dim=1, interpolation="lower"), X),
    "quantile_higher": (lambda m, x: m.quantile(x, 0.4, dim=1, interpolation="higher"), X),
    "quantile_midpoint": (
        lambda m, x: m.quantile(x, 0.4, dim=1, interpolation="midpoint"),
        X,
    ),
    "quantile_nearest": (lambda m, x: m.quantile(x, 0.4, dim=1, interpolation="nearest"), X),
    "std_mean": (lambda m, x: m.std_mean(x, dim=1), X),
    "var_mean": (lambda m, x: m.var_mean(x, dim=0, keepdim=True), X),
    "aminmax": (lambda m, x: tuple(m.aminmax(x, dim=1)), X),
    "cummax": (lambda m, x: m.cummax(x, 1), X),
    "cummin": (lambda m, x: m.cummin(x, 0), X),
    "nansum": (lambda m, x: m.nansum(x, 1), X),
    "nanmean": (lambda m, x: m.nanmean(x, dim=0), X),
    "kron": (lambda m, x: m.kron(x, x[:2, :3]), X),
    "kron_1d": (lambda m, x: m.kron(x[0], x[1]), X),
    "tensordot": (lambda m, x: m.tensordot(x, x.T, dims=1), X),
    "tensordot_lists": (lambda m, x: m.tensordot(x, x, dims=([0, 1], [0, 1])), X),
    "inner": (lambda m, x: m.inner(x, x), X),
    "take": (lambda m, x: m.take(x, m.tensor([[0, 7], [-1, 3]])), X),
    "block_diag": (lambda m, x: m.block_diag(x, x[0], x[:2, :2]), X),
    "column_stack": (lambda m, x: m.column_stack([x[0], x[1]]), X),
    "atleast_3d": (lambda m, x: m.atleast_3d(x), X),
    "trace": (lambda m, x: x[:, :3].trace(), X),
    "sum_dtype": (lambda m, x: x.sum(1, dtype=m.float64), X),
    "round_decimals": (lambda m, x: (x * 1, x.detach().round(decimals=2)), X),
    "where_method": (lambda m, x: x.where(x > 0, x * 2), X),
    "max_positional": (lambda m, x: x.max(1), X),
    "min_positional_keepdim": (lambda m, x: x.min(0, True), X),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_against_torch(name):
    f, a = UNARY[name]
    _compare(f, a)


@pytest.mark.parametrize(
    "f",
    [
        lambda x: fg.asinh(x),
        lambda x: fg.atanh(x * 0.3),
        lambda x: fg.sinc(x),
        lambda x: fg.logaddexp(x, x * 2),
        lambda x: fg.xlogy(x, x * x + 0.5),
        lambda x: fg.remainder(x, 0.7),
        lambda x: fg.quantile(x, 0.3, dim=0),
        lambda x: fg.median(x, 1).values,
        lambda x: fg.kron(x, x),
    ],
    ids=["asinh", "atanh", "sinc", "logaddexp", "xlogy", "remainder", "quantile", "median", "kron"],
)
def test_gradients_against_finite_differences(f):
    check_grad(f, [rng.standard_normal((3, 4))])


def test_removable_singularities_have_torchs_gradient():
    for name, f in [
        ("asinh", lambda m, x: m.asinh(x)),
        ("sinc", lambda m, x: m.sinc(x)),
        ("xlogy", lambda m, x: m.xlogy(x, x + 2)),
        ("xlogy_at_zero", lambda m, x: m.xlogy(x, x)),
    ]:
        a = fg.tensor([0.0, 1.0], dtype=fg.float64, requires_grad=True)
        b = torch.tensor([0.0, 1.0], dtype=torch.float64, requires_grad=True)
        f(fg, a).sum().backward()
        f(torch, b).sum().backward()
        if name == "xlogy_at_zero":  # PyTorch: NaN (0/0 in the y part); ours: the x part
            np.testing.assert_allclose(a.grad.numpy()[1], b.grad.numpy()[1])
            continue
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), err_msg=name)
        assert np.isfinite(a.grad.numpy()).all(), name


def test_integer_division_and_remainder_stay_exact_integers():
    a = np.array([7, -7, 7, -7, 2**62 + 1, 0], dtype=np.int64)
    b = np.array([2, 2, -2, -2, 3, 5], dtype=np.int64)
    fa, fb, ta, tb = fg.tensor(a), fg.tensor(b), torch.tensor(a), torch.tensor(b)
    for ours, theirs in [
        (fa // fb, ta // tb),
        (fa % fb, ta % tb),
        (fg.fmod(fa, fb), torch.fmod(ta, tb)),
        (fg.div(fa, fb, rounding_mode="trunc"), torch.div(ta, tb, rounding_mode="trunc")),
        (fg.floor_divide(fa, 2), torch.floor_divide(ta, 2)),
        (fa % 3, ta % 3),
        (10 // fb, 10 // tb),
    ]:
        assert ours.dtype == fg.int64
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    with pytest.raises(ZeroDivisionError, match="floor_divide"):
        fg.floor_divide(fa, fg.zeros(6, dtype=fg.int64))


def test_search_and_count_match_torch():
    seq = np.array([[1.0, 3.0, 5.0, 7.0], [2.0, 4.0, 6.0, 8.0]])
    vals = np.array([[3.0, 6.0, 9.0], [1.0, 4.0, 8.0]])
    for right in (False, True):
        np.testing.assert_array_equal(
            fg.searchsorted(fg.tensor(seq), fg.tensor(vals), right=right).numpy(),
            torch.searchsorted(torch.tensor(seq), torch.tensor(vals), right=right).numpy(),
        )
        np.testing.assert_array_equal(
            fg.bucketize(fg.tensor(vals), fg.tensor(seq[0]), right=right).numpy(),
            torch.bucketize(torch.tensor(vals), torch.tensor(seq[0]), right=right).numpy(),
        )
    assert fg.searchsorted(fg.tensor(seq[0]), fg.tensor(5.0), side="right").item() == 3
    counts = np.array([0, 3, 3, 1, 5])
    w = np.array([0.5, 1.0, 2.0, 0.25, 1.5])
    np.testing.assert_array_equal(
        fg.bincount(fg.tensor(counts), minlength=8).numpy(),
        torch.bincount(torch.tensor(counts), minlength=8).numpy(),
    )
    np.testing.assert_allclose(
        fg.bincount(fg.tensor(counts), fg.tensor(w)).numpy(),
        torch.bincount(torch.tensor(counts), torch.tensor(w)).numpy(),
    )
    np.testing.assert_allclose(
        fg.histc(fg.tensor(X), bins=7, min=-3, max=4).numpy(),
        torch.histc(torch.tensor(X), bins=7, min=-3, max=4).numpy(),
    )
    for f in ("tril_indices", "triu_indices"):
        for args in ((4, 3), (3, 5, 1), (4, 4, -1)):
            np.testing.assert_array_equal(
                getattr(fg, f)(*args).numpy(), getattr(torch, f)(*args).numpy()
            )


def test_pytorch_idioms_port_by_renaming():
    x = fg.tensor(X)
    _, predicted = x.max(1)  # the classic accuracy idiom
    np.testing.assert_array_equal(predicted.numpy(), X.argmax(1))
    # torch.max(out, 1): (values, indices), as torch's
    _, predicted = fg.max(x, 1)
    np.testing.assert_array_equal(predicted.numpy(), X.argmax(1))
    np.testing.assert_array_equal(fg.max(x, 1)[1].numpy(), X.argmax(1))
    np.testing.assert_array_equal(fg.min(x, 1).indices.numpy(), X.argmin(1))
    _, one = fg.max(x[:1], 1)
    assert one.tolist() == [X[0].argmax()]
    assert fg.functional.max(x, 1).shape == (3,)  # MegEngine's namespace keeps the values
    assert x.max(axis=1).shape == (3,)
    assert x.stride() == (5, 1) and x.T.stride() == (1, 5) and x.stride(0) == 5
    assert x.pin_memory() is x
    assert [t.shape for t in x.unbind(0)] == [(5,)] * 3
    q, k, v = fg.tensor(rng.standard_normal((3, 2, 4))).unbind(0)
    assert q.shape == k.shape == v.shape == (2, 4)
    assert fg.eq(x, x).all().item() and not fg.ne(x, x).any().item()
    assert (fg.gt(x, 0) == (x > 0)).all().item()
    assert fg.Size([3, 5]) == x.shape and fg.Size([3, 5]).numel() == 15
    np.testing.assert_array_equal(
        fg.cartesian_prod(fg.tensor([1, 2]), fg.tensor([3, 4])).numpy(),
        [[1, 3], [1, 4], [2, 3], [2, 4]],
    )


def test_bad_arguments_name_the_op():
    x = fg.tensor(X)
    with pytest.raises(ValueError, match="rounding_mode"):
        x.div(2, rounding_mode="round")
    with pytest.raises(IndexError, match="kthvalue"):
        fg.kthvalue(x, 6, 1)
    with pytest.raises(ValueError, match="quantile"):
        fg.quantile(x, 1.5)
    with pytest.raises(fg.ShapeError, match="tensordot"):
        fg.tensordot(x, x, dims=([0], [1]))
    with pytest.raises(IndexError, match="take"):
        fg.take(x, fg.tensor([15]))
    with pytest.raises(ValueError, match="bincount"):
        fg.bincount(fg.tensor([1, -1]))


M = rng.standard_normal((2, 3, 4))

LINALG = {
    "vector_norm": (lambda m, a: m.linalg.vector_norm(a), M),
    "vector_norm_dim": (lambda m, a: m.linalg.vector_norm(a, ord=3, dim=(0, 2)), M),
    "vector_norm_inf": (lambda m, a: m.linalg.vector_norm(a, ord=float("inf"), dim=1), M),
    "vector_norm_neg_inf": (lambda m, a: m.linalg.vector_norm(a, ord=-float("inf"), dim=1), M),
    "vector_norm_1_keepdim": (lambda m, a: m.linalg.vector_norm(a, 1, -1, True), M),
    "matrix_norm_fro": (lambda m, a: m.linalg.matrix_norm(a), M),
    "matrix_norm_1": (lambda m, a: m.linalg.matrix_norm(a, 1), M),
    "matrix_norm_neg1": (lambda m, a: m.linalg.matrix_norm(a, -1, dim=(0, 2)), M),
    "matrix_norm_inf": (lambda m, a: m.linalg.matrix_norm(a, float("inf"), keepdim=True), M),
    "matrix_norm_neg_inf": (lambda m, a: m.linalg.matrix_norm(a, -float("inf")), M),
    "norm_default": (lambda m, a: m.linalg.norm(a), M),
    "norm_dim": (lambda m, a: m.linalg.norm(a, dim=1), M),
    "norm_matrix_dims": (lambda m, a: m.linalg.norm(a, dim=(1, 2)), M),
    "norm_matrix_ord": (lambda m, a: m.linalg.norm(a[0], ord=1), M),
    "vecdot": (lambda m, a: m.linalg.vecdot(a, a * 2, dim=1), M),
    "cross": (lambda m, a: m.linalg.cross(a[:, :, :3], a[:, :, 1:]), M),
    "diagonal": (lambda m, a: m.linalg.diagonal(a, offset=1), M),
    "special_expit": (lambda m, a: m.special.expit(a), M),
    "special_xlog1py": (lambda m, a: m.special.xlog1py(a, a.abs()), M),
    "special_entr": (lambda m, a: m.special.entr(a.abs() + 0.1), M),
    "special_ndtr": (lambda m, a: m.special.ndtr(a), M),
    "special_logsumexp": (lambda m, a: m.special.logsumexp(a, 1), M),
    "special_log_softmax": (lambda m, a: m.special.log_softmax(a, 2), M),
    "trace_function": (lambda m, a: m.trace(a[0]), M),
}


@pytest.mark.parametrize("name", sorted(LINALG))
def test_linalg_and_special_against_torch(name):
    f, a = LINALG[name]
    _compare(f, a)


def test_linalg_refuses_what_it_cannot_compute():
    with pytest.raises(ValueError, match="matrix_norm"):
        fg.linalg.matrix_norm(fg.tensor(M), 3)
    with pytest.raises(fg.ShapeError, match="matrix_norm"):
        fg.linalg.matrix_norm(fg.tensor(M[0, 0]))
    np.testing.assert_array_equal(fg.special.entr(fg.tensor([-1.0, 0.0])).numpy(), [-np.inf, 0.0])


V4 = rng.standard_normal(4)
MORE_METHODS = {
    "mv": (lambda m, a, v: a[:, :4].mv(v), X, V4),
    "addmv": (lambda m, a, v: a[:, 0].addmv(a[:, :4], v, beta=0.5, alpha=2.0), X, V4),
    "addr": (lambda m, a, v: a[:, :4].addr(a[:, 0], v, alpha=3.0), X, V4),
    "addbmm": (
        lambda m, a, v: a[:2, :2].addbmm(a.reshape(3, 5, 1)[:, :2], a.reshape(3, 1, 5)[:, :, :2]),
        X,
        V4,
    ),
    "addmm_method": (lambda m, a, v: a[:, :3].addmm(a[:, :4], a[:, :4].T[:, :3]), X, V4),
    "ger": (lambda m, a, v: a[0].ger(v), X, V4),
    "dist": (lambda m, a, v: a[0, :4].dist(v, 3.0), X, V4),
    "tensor_split": (lambda m, a, v: a.tensor_split(3, dim=1), X, V4),
    "tensor_split_at": (lambda m, a, v: a.tensor_split([1, 4], dim=1), X, V4),
    "unfold": (lambda m, a, v: a.unfold(1, 2, 2), X, V4),
    "unfold_overlap": (lambda m, a, v: a.unfold(0, 2, 1), X, V4),
    "select": (lambda m, a, v: a.select(1, -2), X, V4),
    "index_copy": (
        lambda m, a, v: a.index_copy(1, m.tensor([3, 0]), a[:, 1:3] * 5),
        X,
        V4,
    ),
    "masked_scatter": (
        lambda m, a, v: a.masked_scatter(m.tensor(np.arange(15).reshape(3, 5) % 3 == 0), a * 2),
        X,
        V4,
    ),
    "sum_to_size": (lambda m, a, v: a.sum_to_size(1, 5), X, V4),
    "take_along_dim": (lambda m, a, v: a.take_along_dim(m.tensor([[0], [4], [2]]), dim=1), X, V4),
    "msort": (lambda m, a, v: a.msort(), X, V4),
    "ravel_moveaxis": (lambda m, a, v: a.reshape(3, 5, 1).moveaxis(0, 2).ravel(), X, V4),
}


@pytest.mark.parametrize("name", sorted(MORE_METHODS))
def test_more_methods_against_torch(name):
    f, a, v = MORE_METHODS[name]
    _compare(f, a, v)


def test_more_predicates_against_torch():
    a = np.array([-np.inf, -1.0, -0.0, 0.0, 2.0, np.inf, np.nan])
    fa, ta = fg.tensor(a), torch.tensor(a)
    for name in ("isposinf", "isneginf", "signbit", "isreal"):
        np.testing.assert_array_equal(
            getattr(fa, name)().numpy(), getattr(ta, name)().numpy(), err_msg=name
        )
    assert fa.equal(fa.clone()) is False  # NaN != NaN, as torch.equal
    assert fg.tensor([1, 2]).equal(fg.tensor([1, 2])) is True
    assert fg.tensor([0.0]).is_nonzero() is False and fg.tensor(3).is_nonzero() is True
    with pytest.raises(RuntimeError, match="is_nonzero"):
        fg.tensor([1, 2]).is_nonzero()
    assert fg.tensor(a, device="cpu").get_device() == -1 and not fa.is_complex()
    u = fg.tensor([1, 1, 2, 2, 2, 3, 1])
    tu = torch.tensor([1, 1, 2, 2, 2, 3, 1])
    for ours, theirs in zip(
        u.unique_consecutive(return_inverse=True, return_counts=True),
        tu.unique_consecutive(return_inverse=True, return_counts=True),
    ):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    np.testing.assert_array_equal(
        fg.tensor([[0, 1], [2, 0]]).argwhere().numpy(),
        torch.tensor([[0, 1], [2, 0]]).argwhere().numpy(),
    )
