"""Float64 finite-difference gradient checks of every differentiable ferrograd op.

Every check goes through ``conftest.check_grad``: the analytic gradient comes from a
GradKey backward of ``sum(fn(*xs) * w)`` with a fixed random weight ``w``, the expected
gradient from central differences of the same forward. Inputs are drawn away from kinks
(abs, relu at 0; ties of max/min/maximum/minimum) by at least 0.05, far more than the
finite-difference step of 1e-6.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from conftest import analytic_grad, check_grad, numeric_grad, weights_for
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

EXAMPLES = settings(max_examples=25, deadline=None)
FEW = settings(max_examples=12, deadline=None)

# Shapes have at least one dimension: 0-d inputs are covered separately (see
# test_zero_dim_input_grad) because fg.tensor does not keep 0-d data 0-d.
shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)
seeds = st.integers(0, 2**31 - 1)
pairs = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=4)
triples = hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, max_side=4)


# --------------------------------------------------------------------------------------
# input generators
# --------------------------------------------------------------------------------------


def uniform(rng, shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float64)


def away_from_zero(rng, shape, lo=0.1, hi=2.0):
    return rng.uniform(lo, hi, size=shape) * rng.choice([-1.0, 1.0], size=shape)


def distinct(rng, *shape_list, spacing=0.25):
    """Arrays whose values are all pairwise distinct (by at least spacing - 0.1)."""
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shape_list]
    n = sum(sizes)
    vals = (rng.permutation(n) - n / 2.0) * spacing + rng.uniform(-0.05, 0.05, size=n)
    out, start = [], 0
    for s, k in zip(shape_list, sizes):
        out.append(vals[start : start + k].reshape(s).astype(np.float64))
        start += k
    return out


@st.composite
def shape_and_axis(draw, min_dims=1, max_dims=3):
    """A shape and an ``axis`` argument: None, an int (maybe negative) or a tuple."""
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=1, max_side=4))
    nd = len(shape)
    axis = draw(
        st.one_of(
            st.none(),
            st.integers(-nd, nd - 1),
            hnp.valid_tuple_axes(nd, min_size=1),
        )
    )
    return shape, axis


# --------------------------------------------------------------------------------------
# elementwise unary
# --------------------------------------------------------------------------------------

UNARY = {
    "neg": (fg.neg, uniform),
    "neg_op": (lambda x: -x, uniform),
    "exp": (fg.exp, uniform),
    "exp_method": (lambda x: x.exp(), uniform),
    "log": (fg.log, lambda r, s: uniform(r, s, 0.2, 3.0)),
    "log_method": (lambda x: x.log(), lambda r, s: uniform(r, s, 0.2, 3.0)),
    "sqrt": (fg.sqrt, lambda r, s: uniform(r, s, 0.2, 3.0)),
    "sqrt_method": (lambda x: x.sqrt(), lambda r, s: uniform(r, s, 0.2, 3.0)),
    "abs": (fg.abs, away_from_zero),
    "abs_builtin": (abs, away_from_zero),
    "tanh": (fg.tanh, uniform),
    "tanh_method": (lambda x: x.tanh(), uniform),
    "sigmoid": (fg.sigmoid, lambda r, s: uniform(r, s, -4.0, 4.0)),
    "sigmoid_method": (lambda x: x.sigmoid(), uniform),
    "relu": (fg.relu, away_from_zero),
    "relu_method": (lambda x: x.relu(), away_from_zero),
    "sin": (fg.sin, uniform),
    "cos_method": (lambda x: x.cos(), uniform),
    "tan": (fg.tan, lambda r, s: uniform(r, s, -1.2, 1.2)),
    "asin": (fg.asin, lambda r, s: uniform(r, s, -0.9, 0.9)),
    "acos_method": (lambda x: x.acos(), lambda r, s: uniform(r, s, -0.9, 0.9)),
    "atan": (fg.atan, uniform),
    "sinh": (fg.sinh, uniform),
    "cosh_method": (lambda x: x.cosh(), uniform),
    "erf": (fg.erf, uniform),
    "erfc_method": (lambda x: x.erfc(), uniform),
    "expm1": (fg.expm1, uniform),
    "exp2_method": (lambda x: x.exp2(), uniform),
    "log2": (fg.log2, lambda r, s: uniform(r, s, 0.2, 3.0)),
    "log10_method": (lambda x: x.log10(), lambda r, s: uniform(r, s, 0.2, 3.0)),
    "rsqrt": (fg.rsqrt, lambda r, s: uniform(r, s, 0.2, 3.0)),
    "reciprocal_method": (lambda x: x.reciprocal(), away_from_zero),
    "square": (fg.square, uniform),
    "softplus": (fg.softplus, lambda r, s: uniform(r, s, -5.0, 5.0)),
    "silu_method": (lambda x: x.silu(), lambda r, s: uniform(r, s, -5.0, 5.0)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@EXAMPLES
@given(shape=shapes, seed=seeds)
def test_unary(name, shape, seed):
    fn, gen = UNARY[name]
    rng = np.random.default_rng(seed)
    check_grad(fn, [gen(rng, shape)], seed=seed)


# --------------------------------------------------------------------------------------
# elementwise binary, with broadcasting
# --------------------------------------------------------------------------------------


def _gen_plain(rng, sa, sb):
    return uniform(rng, sa), uniform(rng, sb)


def _gen_div(rng, sa, sb):
    return uniform(rng, sa), away_from_zero(rng, sb, 0.3, 2.0)


def _gen_pow(rng, sa, sb):
    return uniform(rng, sa, 0.3, 2.5), uniform(rng, sb, -2.0, 2.0)


def _gen_distinct(rng, sa, sb):
    return tuple(distinct(rng, sa, sb))


BINARY = {
    "add": (fg.add, _gen_plain),
    "add_op": (lambda a, b: a + b, _gen_plain),
    "sub": (fg.sub, _gen_plain),
    "sub_op": (lambda a, b: a - b, _gen_plain),
    "mul": (fg.mul, _gen_plain),
    "mul_op": (lambda a, b: a * b, _gen_plain),
    "div": (fg.div, _gen_div),
    "div_op": (lambda a, b: a / b, _gen_div),
    "pow": (fg.pow, _gen_pow),
    "pow_op": (lambda a, b: a**b, _gen_pow),
    "pow_method": (lambda a, b: a.pow(b), _gen_pow),
    "maximum": (fg.maximum, _gen_distinct),
    "maximum_method": (lambda a, b: a.maximum(b), _gen_distinct),
    "minimum": (fg.minimum, _gen_distinct),
    "minimum_method": (lambda a, b: a.minimum(b), _gen_distinct),
    "atan2": (fg.atan2, _gen_div),
    "atan2_method": (lambda a, b: a.atan2(b), _gen_div),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@EXAMPLES
@given(shapes=pairs, seed=seeds)
def test_binary_broadcast(name, shapes, seed):
    fn, gen = BINARY[name]
    sa, sb = shapes.input_shapes
    rng = np.random.default_rng(seed)
    a, b = gen(rng, sa, sb)
    ga, gb = check_grad(fn, [a, b], seed=seed)
    assert ga.shape == sa and gb.shape == sb


@pytest.mark.parametrize("exponent", [2, 3, 1, 0, -1, -2, 2.0, 0.5, 1.5, -1.5, -0.5, 3.7], ids=repr)
@FEW
@given(shape=shapes, seed=seeds)
def test_pow_scalar_exponent(exponent, shape, seed):
    rng = np.random.default_rng(seed)
    if isinstance(exponent, int):
        # integer exponents are defined for negative bases too
        x = away_from_zero(rng, shape, 0.3, 2.0)
    else:
        x = uniform(rng, shape, 0.3, 2.5)
    check_grad(lambda t: t**exponent, [x], seed=seed)
    check_grad(lambda t: fg.pow(t, exponent), [x], seed=seed + 1)
    check_grad(lambda t: t.pow(exponent), [x], seed=seed + 2)


SCALAR_MIX = {
    "2.0*x": (lambda x: 2.0 * x, uniform),
    "x*3": (lambda x: x * 3, uniform),
    "1-x": (lambda x: 1 - x, uniform),
    "x-1.5": (lambda x: x - 1.5, uniform),
    "0.5+x": (lambda x: 0.5 + x, uniform),
    "x/2": (lambda x: x / 2, uniform),
    "3/x": (lambda x: 3 / x, lambda r, s: away_from_zero(r, s, 0.3, 2.0)),
    "2**x": (lambda x: 2**x, uniform),
    "2.5**x": (lambda x: 2.5**x, uniform),
    "np.float64(2)*x": (lambda x: np.float64(2.0) * x, uniform),
}


@pytest.mark.parametrize("name", sorted(SCALAR_MIX))
@FEW
@given(shape=shapes, seed=seeds)
def test_python_scalar_mixing(name, shape, seed):
    fn, gen = SCALAR_MIX[name]
    rng = np.random.default_rng(seed)
    check_grad(fn, [gen(rng, shape)], seed=seed)


@EXAMPLES
@given(shapes=triples, seed=seeds)
def test_where_grad_wrt_both_branches(shapes, seed):
    sc, sa, sb = shapes.input_shapes
    rng = np.random.default_rng(seed)
    cond = rng.random(sc) < 0.5
    a, b = uniform(rng, sa), uniform(rng, sb)
    c = fg.tensor(cond)
    assert c.dtype == fg.bool_
    ga, gb = check_grad(lambda x, y: fg.where(c, x, y), [a, b], seed=seed)
    # independent closed form: the weight routed through the broadcast condition
    out_shape = shapes.result_shape
    w = weights_for(out_shape, seed)
    cb = np.broadcast_to(cond, out_shape)

    def unbroadcast(g, shape):
        while g.ndim > len(shape):
            g = g.sum(axis=0)
        for i, n in enumerate(shape):
            if n == 1 and g.shape[i] != 1:
                g = g.sum(axis=i, keepdims=True)
        return g

    np.testing.assert_allclose(ga, unbroadcast(np.where(cb, w, 0.0), sa), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gb, unbroadcast(np.where(cb, 0.0, w), sb), rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------
# reductions
# --------------------------------------------------------------------------------------

REDUCE = {
    "sum": (fg.sum, lambda x, **kw: x.sum(**kw), uniform),
    "mean": (fg.mean, lambda x, **kw: x.mean(**kw), uniform),
    "max": (fg.max, lambda x, **kw: x.max(**kw), lambda r, s: distinct(r, s)[0]),
    "min": (fg.min, lambda x, **kw: x.min(**kw), lambda r, s: distinct(r, s)[0]),
}


@pytest.mark.parametrize("name", sorted(REDUCE))
@EXAMPLES
@given(sa=shape_and_axis(), keepdims=st.booleans(), seed=seeds, method=st.booleans())
def test_reduce(name, sa, keepdims, seed, method):
    shape, axis = sa
    fn, meth, gen = REDUCE[name]
    rng = np.random.default_rng(seed)
    x = gen(rng, shape)
    if method:
        f = lambda t: meth(t, axis=axis, keepdims=keepdims)
    else:
        f = lambda t: fn(t, axis=axis, keepdims=keepdims)
    check_grad(f, [x], seed=seed)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
def test_reduce_default_is_full(name):
    rng = np.random.default_rng(3)
    x = distinct(rng, (3, 4))[0]
    check_grad(lambda t: getattr(t, name)(), [x])
    check_grad(lambda t: getattr(fg, name)(t), [x], seed=1)


# --------------------------------------------------------------------------------------
# matmul
# --------------------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((3,), (3,)),  # 1-D x 1-D -> 0-d
    ((3,), (3, 4)),  # 1-D x 2-D
    ((2, 3), (3,)),  # 2-D x 1-D
    ((2, 3), (3, 4)),  # 2-D x 2-D
    ((1, 1), (1, 1)),
    ((5, 1), (1, 4)),  # outer product shaped
    ((2, 2, 3), (2, 3, 4)),  # batched 3-D x 3-D
    ((2, 1, 3, 4), (5, 4, 2)),  # batch broadcasting
    ((1, 3, 4), (2, 4, 2)),  # broadcast batch of size 1
    ((2, 3, 4), (4, 5)),  # 3-D x 2-D
    ((3, 4), (2, 4, 5)),  # 2-D x 3-D
    ((3,), (2, 3, 4)),  # 1-D x batched
    ((2, 3, 4), (4,)),  # batched x 1-D
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=str)
@pytest.mark.parametrize("form", ["fn", "op", "method"])
def test_matmul(sa, sb, form):
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    a, b = uniform(rng, sa), uniform(rng, sb)
    fn = {"fn": fg.matmul, "op": lambda x, y: x @ y, "method": lambda x, y: x.matmul(y)}[form]
    y = fn(fg.tensor(a), fg.tensor(b))
    assert y.shape == np.matmul(a, b).shape
    check_grad(fn, [a, b])


@EXAMPLES
@given(
    shapes=hnp.mutually_broadcastable_shapes(signature=np.matmul.signature, max_dims=2, max_side=4),
    seed=seeds,
)
def test_matmul_signature(shapes, seed):
    sa, sb = shapes.input_shapes
    rng = np.random.default_rng(seed)
    a, b = uniform(rng, sa), uniform(rng, sb)
    check_grad(fg.matmul, [a, b], seed=seed)


def test_matmul_of_transposed_views():
    rng = np.random.default_rng(4)
    a, b = uniform(rng, (4, 3)), uniform(rng, (5, 4))
    check_grad(lambda x, y: x.T @ y.T, [a, b])
    check_grad(lambda x, y: x.transpose() @ y[::2].T, [a, b])


# --------------------------------------------------------------------------------------
# movement ops
# --------------------------------------------------------------------------------------

RESHAPES = [
    ((2, 3, 4), (4, 6)),
    ((2, 3, 4), (-1,)),
    ((2, 3, 4), (3, -1)),
    ((6,), (2, 1, 3)),
    ((2, 3), (3, 2)),
    ((1, 4), (4,)),
    ((4,), (1, 4, 1)),
]


@pytest.mark.parametrize("src,dst", RESHAPES, ids=str)
def test_reshape(src, dst):
    rng = np.random.default_rng(5)
    x = uniform(rng, src)
    check_grad(lambda t: t.reshape(*dst), [x])
    check_grad(lambda t: t.reshape(dst), [x], seed=1)
    check_grad(lambda t: fg.reshape(t, *dst), [x], seed=2)


def test_reshape_of_non_contiguous_views():
    rng = np.random.default_rng(6)
    x = uniform(rng, (3, 4, 2))
    check_grad(lambda t: t.transpose(2, 0, 1).reshape(2, 12), [x])
    check_grad(lambda t: t[:, ::2].reshape(-1), [x], seed=1)
    check_grad(lambda t: t[::-1].permute(1, 0, 2).reshape(4, 6), [x], seed=2)
    check_grad(lambda t: t.flatten(), [x], seed=3)
    check_grad(lambda t: t.T.flatten(), [x], seed=4)


@EXAMPLES
@given(data=st.data(), shape=shapes, seed=seeds)
def test_permute_transpose(data, shape, seed):
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    rng = np.random.default_rng(seed)
    x = uniform(rng, shape)
    check_grad(lambda t: t.permute(*perm), [x], seed=seed)
    check_grad(lambda t: fg.permute(t, *perm), [x], seed=seed + 1)
    check_grad(lambda t: fg.transpose(t, *perm), [x], seed=seed + 2)
    check_grad(lambda t: t.transpose(), [x], seed=seed + 3)
    check_grad(lambda t: t.T, [x], seed=seed + 4)
    if len(shape) >= 3:
        # two ints on a tensor of 3+ dims swap those axes (on 2-D they are a permutation)
        i, j = data.draw(st.integers(0, len(shape) - 1)), data.draw(st.integers(-len(shape), -1))
        assert fg.tensor(x).transpose(i, j).shape == np.swapaxes(x, i, j).shape
        check_grad(lambda t: t.transpose(i, j), [x], seed=seed + 5)


@st.composite
def broadcast_pair(draw):
    """(src, dst) with src broadcastable to dst by numpy's rules."""
    dst = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))
    keep = draw(st.integers(1, len(dst)))
    src = list(dst[len(dst) - keep :])
    for i in range(len(src)):
        if draw(st.booleans()):
            src[i] = 1
    return tuple(src), dst


@EXAMPLES
@given(pair=broadcast_pair(), seed=seeds)
def test_broadcast_to(pair, seed):
    src, dst = pair
    rng = np.random.default_rng(seed)
    x = uniform(rng, src)
    (g,) = check_grad(lambda t: t.broadcast_to(*dst), [x], seed=seed)
    # closed form: the weight summed over the broadcast axes
    w = weights_for(dst, seed)
    lead = len(dst) - len(src)
    expected = w.sum(axis=tuple(range(lead))) if lead else w
    expected = expected.sum(axis=tuple(i for i, n in enumerate(src) if n == 1), keepdims=True)
    np.testing.assert_allclose(g, expected, rtol=1e-12, atol=1e-12)
    check_grad(lambda t: fg.broadcast_to(t, dst), [x], seed=seed + 1)


@EXAMPLES
@given(shape=shapes, data=st.data(), seed=seeds)
def test_expand_dims(shape, data, seed):
    nd = len(shape)
    axis = data.draw(st.integers(-nd - 1, nd))
    rng = np.random.default_rng(seed)
    x = uniform(rng, shape)
    y = fg.tensor(x).expand_dims(axis)
    assert y.shape == np.expand_dims(x, axis).shape
    check_grad(lambda t: t.expand_dims(axis), [x], seed=seed)
    check_grad(lambda t: fg.expand_dims(t, axis), [x], seed=seed + 1)


@st.composite
def squeezable(draw):
    shape = list(draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=3)))
    ones = [i for i, n in enumerate(shape) if n == 1]
    if not ones:
        pos = draw(st.integers(0, len(shape)))
        shape.insert(pos, 1)
        ones = [i for i, n in enumerate(shape) if n == 1]
    which = draw(
        st.one_of(
            st.none(), st.sampled_from(ones), st.sampled_from(ones).map(lambda i: i - len(shape))
        )
    )
    return tuple(shape), which


@EXAMPLES
@given(sq=squeezable(), seed=seeds)
def test_squeeze(sq, seed):
    shape, axis = sq
    rng = np.random.default_rng(seed)
    x = uniform(rng, shape)
    y = fg.tensor(x).squeeze(axis)
    assert y.shape == np.squeeze(x, axis).shape
    check_grad(lambda t: t.squeeze(axis), [x], seed=seed)
    check_grad(lambda t: fg.squeeze(t, axis), [x], seed=seed + 1)


# --------------------------------------------------------------------------------------
# indexing
# --------------------------------------------------------------------------------------

INDEXES = {
    "int": lambda t: t[1],
    "neg_int": lambda t: t[-1],
    "range": lambda t: t[1:3],
    "step": lambda t: t[::2],
    "neg_step": lambda t: t[::-1],
    "neg_step2": lambda t: t[3:0:-2, ::-1],
    "mixed": lambda t: t[1:, ::2, -1],
    "ellipsis": lambda t: t[..., 0],
    "ellipsis_mid": lambda t: t[0, ..., 1:],
    "none": lambda t: t[None],
    "none_mid": lambda t: t[:, None, 2],
    "all_ints": lambda t: t[1, 2, 0],
    "list": lambda t: t[[0, 2]],
    "list_repeat": lambda t: t[[3, 0, 3, 3]],
    "tensor_idx": lambda t: t[fg.tensor([0, 2])],
    "list_axis1": lambda t: t[:, [4, 0, 1, 4]],
    "list_after_slice": lambda t: t[::-1, :, [2, 0]],
    "list_with_int": lambda t: t[1, [0, 2, 2]],
    "empty_slice": lambda t: t[2:2],
}


@pytest.mark.parametrize("name", sorted(INDEXES))
def test_indexing(name):
    rng = np.random.default_rng(7)
    x = uniform(rng, (4, 5, 3))
    check_grad(INDEXES[name], [x])


@EXAMPLES
@given(
    data=st.data(),
    shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5),
    seed=seeds,
)
def test_basic_indices(data, shape, seed):
    idx = data.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    rng = np.random.default_rng(seed)
    x = uniform(rng, shape)
    y = fg.tensor(x)[idx]
    assert y.shape == x[idx].shape, f"index {idx!r}"
    check_grad(lambda t: t[idx], [x], seed=seed)


# --------------------------------------------------------------------------------------
# concat / stack
# --------------------------------------------------------------------------------------


@EXAMPLES
@given(data=st.data(), shape=shapes, n=st.integers(1, 3), seed=seeds)
def test_concat(data, shape, n, seed):
    nd = len(shape)
    axis = data.draw(st.integers(-nd, nd - 1))
    ax = axis % nd
    sizes = data.draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    rng = np.random.default_rng(seed)
    arrays = [uniform(rng, shape[:ax] + (k,) + shape[ax + 1 :]) for k in sizes]
    check_grad(lambda *ts: fg.concat(list(ts), axis=axis), arrays, seed=seed)
    check_grad(lambda *ts: fg.concat(tuple(ts), axis), arrays, seed=seed + 1)


@EXAMPLES
@given(data=st.data(), shape=shapes, n=st.integers(1, 3), seed=seeds)
def test_stack(data, shape, n, seed):
    nd = len(shape)
    axis = data.draw(st.integers(-nd - 1, nd))
    rng = np.random.default_rng(seed)
    arrays = [uniform(rng, shape) for _ in range(n)]
    y = fg.stack([fg.tensor(a) for a in arrays], axis=axis)
    assert y.shape == np.stack(arrays, axis=axis).shape
    check_grad(lambda *ts: fg.stack(list(ts), axis=axis), arrays, seed=seed)


def test_concat_default_axis_and_repeated_input():
    rng = np.random.default_rng(8)
    a, b = uniform(rng, (2, 3)), uniform(rng, (1, 3))
    check_grad(lambda x, y: fg.concat([x, y, x]), [a, b])
    check_grad(lambda x, y: fg.stack([x, x * y]), [a, np.broadcast_to(b, (2, 3)).copy()], seed=1)


# --------------------------------------------------------------------------------------
# softmax / log_softmax / cross_entropy
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@EXAMPLES
@given(data=st.data(), shape=shapes, seed=seeds, method=st.booleans())
def test_softmax(name, data, shape, seed, method):
    nd = len(shape)
    axis = data.draw(st.integers(-nd, nd - 1))
    rng = np.random.default_rng(seed)
    x = uniform(rng, shape, -3.0, 3.0)
    if method:
        f = lambda t: getattr(t, name)(axis)
    else:
        f = lambda t: getattr(fg, name)(t, axis=axis)
    check_grad(f, [x], seed=seed)


def test_softmax_default_axis_and_large_logits():
    rng = np.random.default_rng(9)
    x = uniform(rng, (3, 4), -3.0, 3.0) + 500.0  # stable implementations subtract the max
    check_grad(fg.softmax, [x])
    check_grad(fg.log_softmax, [x], seed=1)
    check_grad(lambda t: t.softmax(), [x], seed=2)


@EXAMPLES
@given(n=st.integers(1, 5), c=st.integers(1, 5), seed=seeds)
def test_cross_entropy(n, c, seed):
    rng = np.random.default_rng(seed)
    logits = uniform(rng, (n, c), -3.0, 3.0)
    labels = rng.integers(0, c, size=n).astype(np.int64)
    lab = fg.tensor(labels)
    assert lab.dtype == fg.int64
    (g,) = check_grad(lambda t: fg.cross_entropy(t, lab), [logits], seed=seed)
    # closed form: (softmax - onehot) / N, times the (scalar) weight
    w = float(weights_for((), seed))
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    onehot = np.eye(c)[labels]
    np.testing.assert_allclose(g, w * (p - onehot) / n, rtol=1e-10, atol=1e-12)


def test_cross_entropy_nd_logits():
    rng = np.random.default_rng(16)
    logits = uniform(rng, (2, 3, 4))
    labels = fg.tensor(rng.integers(0, 3, size=(2, 4)))
    check_grad(lambda t: fg.cross_entropy(t, labels), [logits])


# --------------------------------------------------------------------------------------
# graph structure: reuse, broadcasting sum-back, composites
# --------------------------------------------------------------------------------------


def test_tensor_used_twice_gets_both_contributions():
    x = np.array([-1.5, 0.5, 2.0, 3.0])
    xt = fg.tensor(x)
    key = fg.GradKey()
    key.attach(xt)
    key.backward((xt * xt).sum())
    np.testing.assert_allclose(xt.grad.numpy(), 2 * x, rtol=1e-15)
    check_grad(lambda t: t * t, [x])
    check_grad(lambda t: t * t * t + t.exp() * t - t, [x], seed=1)
    check_grad(lambda t: fg.add(t, t), [x], seed=2)


def test_diamond_graph():
    rng = np.random.default_rng(10)
    x = uniform(rng, (3, 4))

    def f(t):
        h = t * 2.0 + 1.0  # h feeds three branches that meet again
        return h.tanh() * h.sigmoid() + h.sum(axis=0)

    check_grad(f, [x])


def test_broadcast_gradients_are_summed_to_input_shape():
    a = np.arange(3.0).reshape(3, 1) + 1.0
    b = np.array([0.5, -1.0, 2.0, 3.0])
    at, bt = fg.tensor(a), fg.tensor(b)
    key = fg.GradKey()
    key.attach(at)
    key.attach(bt)
    key.backward((at * bt).sum())
    assert at.grad.shape == (3, 1) and bt.grad.shape == (4,)
    np.testing.assert_allclose(at.grad.numpy(), np.full((3, 1), b.sum()), rtol=1e-14)
    np.testing.assert_allclose(bt.grad.numpy(), np.full(4, a.sum()), rtol=1e-14)

    # a size-1 axis that is not a leading axis, against a 3-D partner
    c = np.array([[[1.0], [2.0]]])  # (1, 2, 1)
    d = np.ones((3, 2, 5))
    ct, dt = fg.tensor(c), fg.tensor(d)
    key = fg.GradKey()
    key.attach(ct)
    key.attach(dt)
    key.backward((ct + dt).sum())
    np.testing.assert_allclose(ct.grad.numpy(), np.full((1, 2, 1), 15.0))
    np.testing.assert_allclose(dt.grad.numpy(), np.ones((3, 2, 5)))


def test_mlp_composite():
    rng = np.random.default_rng(11)
    x = uniform(rng, (4, 3))
    w1, b1 = uniform(rng, (3, 5)), uniform(rng, (5,))
    w2, b2 = uniform(rng, (5, 3)), uniform(rng, (3,))
    labels = fg.tensor(np.array([0, 2, 1, 2]))

    def net(x, w1, b1, w2, b2):
        h = (x @ w1 + b1).tanh()
        return fg.cross_entropy(h @ w2 + b2, labels)

    check_grad(net, [x, w1, b1, w2, b2])


def test_backward_with_explicit_dy_matches_weighted_sum():
    rng = np.random.default_rng(12)
    x = uniform(rng, (2, 3))
    dy = uniform(rng, (2, 3))
    xt = fg.tensor(x)
    key = fg.GradKey()
    key.attach(xt)
    key.backward(xt.tanh(), fg.tensor(dy))
    np.testing.assert_allclose(xt.grad.numpy(), dy * (1 - np.tanh(x) ** 2), rtol=1e-12)


def test_backward_on_multiple_outputs():
    rng = np.random.default_rng(13)
    x = uniform(rng, (3,))
    xt = fg.tensor(x)
    key = fg.GradKey()
    key.attach(xt)
    y1 = (xt * xt).sum()
    y2 = xt.exp()
    dy2 = np.array([1.0, -2.0, 0.5])
    key.backward([y1, y2], [None, fg.tensor(dy2)])
    np.testing.assert_allclose(xt.grad.numpy(), 2 * x + dy2 * np.exp(x), rtol=1e-12)


def test_grad_is_added_into_existing_grad():
    x = np.array([1.0, 2.0, 3.0])
    xt = fg.tensor(x)
    xt.grad = fg.tensor(np.array([10.0, 20.0, 30.0]))
    key = fg.GradKey()
    key.attach(xt)
    key.backward((xt * xt).sum())
    np.testing.assert_allclose(xt.grad.numpy(), [12.0, 24.0, 36.0])


def test_callback_sees_final_grad_and_can_replace_it():
    x = np.array([1.0, -2.0])
    xt = fg.tensor(x)
    seen = []

    def cb(t, g):
        seen.append(g.numpy().copy())
        return g * 3.0

    key = fg.GradKey()
    key.attach(xt, cb)
    y = xt * xt + xt  # two contributions: the callback must see their sum, once
    key.backward(y.sum())
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], 2 * x + 1)
    np.testing.assert_allclose(xt.grad.numpy(), 3 * (2 * x + 1))


def test_unattached_and_detached_inputs_get_no_grad():
    a, b = fg.tensor(np.array([1.0, 2.0])), fg.tensor(np.array([3.0, 4.0]))
    key = fg.GradKey()
    key.attach(a)
    key.backward((a * b + a.detach() * 5.0).sum())
    assert b.grad is None
    np.testing.assert_allclose(a.grad.numpy(), [3.0, 4.0])


def test_check_grad_detects_a_wrong_gradient():
    # t.detach() * t has true derivative 2t, but only one path is taped, so ferrograd
    # (correctly) reports t: check_grad must flag the difference
    x = np.array([0.5, -1.0, 2.0])
    with pytest.raises(AssertionError):
        check_grad(lambda t: t.detach() * t, [x])


def test_numeric_grad_helper_itself():
    # sanity of the reference: d/dx sum(x^3 * w) = 3 x^2 w
    x = np.array([[1.0, -2.0], [0.5, 3.0]])
    w = np.array([[1.0, 2.0], [-1.0, 0.5]])
    (g,) = numeric_grad(lambda a: float(np.sum(a**3 * w)), [x])
    np.testing.assert_allclose(g, 3 * x**2 * w, rtol=1e-7)


# --------------------------------------------------------------------------------------
# float32: same gradients as float64, to float32 precision
# --------------------------------------------------------------------------------------

F32_CASES = {
    "mul_bcast": (lambda a, b: a * b, [(3, 1), (4,)]),
    "div": (lambda a, b: a / (b * b + 1.0), [(2, 3), (2, 3)]),
    "exp_log": (lambda a, b: (a.exp() + b * b + 1.0).log(), [(5,), (5,)]),
    "matmul": (lambda a, b: a @ b, [(2, 3, 4), (4, 2)]),
    "softmax": (lambda a, b: a.softmax(axis=0) * b, [(3, 4), (3, 4)]),
    "log_softmax": (lambda a, b: (a + b).log_softmax(), [(3, 4), (4,)]),
    "reduce": (lambda a, b: a.mean(axis=1) + b.sum(axis=0), [(3, 4), (4, 3)]),
    "tanh_sigmoid": (lambda a, b: a.tanh() * b.sigmoid(), [(6,), (6,)]),
    "index_concat": (lambda a, b: fg.concat([a[::-1], b[[0, 0]]]), [(3, 2), (2, 2)]),
    "pow_sqrt": (lambda a, b: (a * a + 1.0).sqrt() ** 1.5 + b**2, [(4,), (4,)]),
}


@pytest.mark.parametrize("name", sorted(F32_CASES))
def test_float32_matches_float64(name):
    fn, shape_list = F32_CASES[name]
    rng = np.random.default_rng(14)
    arrays = [uniform(rng, s, -1.5, 1.5) for s in shape_list]
    # the float64 gradients are themselves checked against finite differences
    g64 = check_grad(fn, arrays)
    y64 = fn(*[fg.tensor(a) for a in arrays])
    w = weights_for(tuple(y64.shape), 0)
    g32, y32 = analytic_grad(fn, arrays, w, dtype=np.float32)
    assert y32.dtype == fg.float32
    np.testing.assert_allclose(y32.numpy(), y64.numpy(), rtol=1e-4, atol=1e-5)
    for g, ref, a in zip(g32, g64, arrays):
        assert g is not None
        assert g.dtype == fg.float32
        assert tuple(g.shape) == a.shape
        np.testing.assert_allclose(g.numpy(), ref, rtol=1e-3, atol=1e-4)


def test_cross_entropy_float32():
    rng = np.random.default_rng(15)
    logits = uniform(rng, (4, 3))
    labels = fg.tensor(np.array([2, 0, 1, 1]))
    f = lambda t: fg.cross_entropy(t, labels)
    (g64,) = check_grad(f, [logits])
    (g32,), _ = analytic_grad(f, [logits], weights_for((), 0), dtype=np.float32)
    assert g32 is not None and g32.dtype == fg.float32
    np.testing.assert_allclose(g32.numpy(), g64, rtol=1e-3, atol=1e-5)


# --------------------------------------------------------------------------------------
# 0-d inputs
# --------------------------------------------------------------------------------------


def test_zero_dim_input_grad():
    x = np.array(0.7)
    check_grad(lambda t: t.exp() * t, [x])
