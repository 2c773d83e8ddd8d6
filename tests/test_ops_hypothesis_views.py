"""Issue 15's acceptance on non-contiguous inputs: every listed op, forward against numpy (or
PyTorch where numpy lacks it) on hypothesis-drawn shapes with broadcasting, each input held
by a tensor whose memory is a transposed/permuted copy, a strided or negatively strided slice
of a bigger tensor or a broadcast (stride-0) expansion; gradients against central finite
differences in float64, taken with respect to the *storage* the view was cut from, so the
backward of the view and of the op are both checked. With FERROGRAD_TEST_DEVICE=cuda every
tensor lands on the emulated CUDA device (tests/conftest.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest
from conftest import TEST_DEVICE, check_grad
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

torch = pytest.importorskip("torch")
TF = torch.nn.functional

FAST = settings(max_examples=20, deadline=None)
FEW = settings(max_examples=12, deadline=None)
FWD = {"rtol": 1e-10, "atol": 1e-12}  # float64 forward against numpy/PyTorch
FD = {"rtol": 1e-5, "atol": 1e-6}  # analytic gradient against central differences

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3)
nd_shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3)
pairs = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3)
triples = hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, max_side=3)

# ------------------------------------------------------------------------------------ layouts


def _c(a: Any) -> np.ndarray:
    """A C-contiguous copy (``np.ascontiguousarray`` would turn a 0-d array into 1-d)."""
    return np.array(a, order="C", copy=True)


LAYOUTS = ("contig", "perm", "step", "flip", "bcast")


def uniform(lo=-3.0, hi=3.0):
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def ints(lo, hi):
    return lambda rng, shape: rng.integers(lo, hi, shape).astype(np.int64)


def bools(p=0.5):
    return lambda rng, shape: rng.random(shape) < p


def specials(rng, shape):
    return rng.choice(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.0, 1e308]), shape)


@dataclass
class View:
    """Values of ``shape`` stored as ``base`` (a contiguous numpy array) and reached through
    the view ``how``: ``perm`` (a permutation of the axes), ``step`` (``base[1::2]`` along
    ``axis``), ``flip`` (``base[::-1]`` along ``axis``), ``bcast`` (``base`` has length 1 at
    ``axis``, broadcast to ``shape``) or ``contig`` (``base`` itself)."""

    how: str
    shape: tuple
    axis: int | None
    perm: tuple | None
    base: np.ndarray

    def apply(self, x: Any) -> Any:
        """The view of ``x`` (a numpy array or a ferrograd tensor shaped like ``base``)."""
        if self.how == "perm":
            return x.transpose(self.perm) if isinstance(x, np.ndarray) else x.permute(*self.perm)
        if self.how in ("step", "flip"):
            s = slice(1, None, 2) if self.how == "step" else slice(None, None, -1)
            return x[(slice(None),) * self.axis + (s,)]
        if self.how == "bcast":
            if isinstance(x, np.ndarray):
                return np.broadcast_to(x, self.shape)
            return x.broadcast_to(self.shape)
        return x

    @property
    def a(self) -> np.ndarray:
        """The values, as a contiguous numpy array."""
        return _c(self.apply(self.base))

    def t(self) -> fg.Tensor:
        """A ferrograd tensor holding :attr:`a` whose memory is laid out as ``how`` says."""
        t = self.apply(fg.tensor(self.base))
        assert t.shape == self.shape
        assert str(t.device).split(":")[0] == TEST_DEVICE  # FERROGRAD_TEST_DEVICE's device
        assert t.is_contiguous() == (self.how == "contig"), (self.how, self.shape)
        return t

    def torch(self) -> Any:
        return torch.from_numpy(self.a)


def _base_shape(how, shape, axis, perm):
    if how == "perm":
        inv = np.argsort(perm)
        return tuple(shape[i] for i in inv)
    if how == "step":
        return tuple(2 * s + 1 if d == axis else s for d, s in enumerate(shape))
    if how == "bcast":
        return tuple(1 if d == axis else s for d, s in enumerate(shape))
    return tuple(shape)


@st.composite
def views(draw, shape, fill=None, layouts=LAYOUTS, salt=0):
    """A :class:`View` of ``shape``, non-contiguous unless the layout is ``contig`` (the
    layout falls back to ``step`` or ``contig`` where ``shape`` cannot have it). ``salt``
    tells apart the values of several inputs drawn with the same seed (no ties)."""
    shape = tuple(shape)
    fill = fill or uniform()
    how = draw(st.sampled_from(layouts))
    big = [d for d, s in enumerate(shape) if s >= 2]
    perm = axis = None
    if how == "perm":
        perm = tuple(draw(st.permutations(range(len(shape)))))
        kept = [perm[d] for d in big]  # the storage axes behind the non-1 axes
        if kept == sorted(kept):  # ... in storage order: still contiguous
            perm = tuple(reversed(range(len(shape))))
            if len(big) < 2:
                how = "step"
    if how != "contig" and not big:
        how = "contig"  # every axis has length 1 (or 0-d): nothing to lay out
    if how in ("step", "flip", "bcast"):
        axis = draw(st.sampled_from(big))
    if how != "perm":
        perm = None
    rng = np.random.default_rng([draw(st.integers(0, 2**32 - 1)), salt])
    base = _c(fill(rng, _base_shape(how, shape, axis, perm)))
    return View(how, shape, axis, perm, base)


def ts(vs):
    return [v.t() for v in vs]


def grad_check(fn: Callable, vs: list[View], **kw) -> None:
    """Finite differences of ``fn`` applied to the views, with respect to their storage."""
    check_grad(
        lambda *bs: fn(*[v.apply(b) for v, b in zip(vs, bs)]), [v.base for v in vs], **{**FD, **kw}
    )


def same(got: Any, want: Any, **kw) -> None:
    """``got`` (a tensor) has ``want``'s shape, dtype and values (float64 round-off)."""
    want = np.asarray(want)
    assert isinstance(got, fg.Tensor), type(got)
    assert tuple(got.shape) == want.shape, f"shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got.numpy(), want, **(kw or FWD))
    else:
        np.testing.assert_array_equal(got.numpy(), want)


def tref(f):
    """A numpy reference computed by PyTorch on CPU in the input's dtype."""
    return lambda *arrays: f(*[torch.from_numpy(_c(a)) for a in arrays]).numpy()


def test_views_strategy_really_lays_tensors_out():
    # every layout of a (3, 2) array: values as numpy's, memory as the name says
    a = np.arange(6.0).reshape(3, 2)
    cases = [
        View("contig", (3, 2), None, None, a),
        View("perm", (3, 2), None, (1, 0), a.T.copy()),
        View("step", (3, 2), 0, None, np.arange(14.0).reshape(7, 2)),
        View("flip", (3, 2), 1, None, a[:, ::-1].copy()),
        View("bcast", (3, 2), 0, None, a[:1].copy()),
    ]
    want = [a, a, np.arange(14.0).reshape(7, 2)[1::2], a, np.broadcast_to(a[:1], (3, 2))]
    for v, w in zip(cases, want):
        np.testing.assert_array_equal(v.t().numpy(), w)
        np.testing.assert_array_equal(v.a, w)
    with pytest.raises(AssertionError):  # a contiguous tensor does not pass as a view
        View("flip", (1, 2), 0, None, a[:1].copy()).t()  # flipping a length-1 axis


# -------------------------------------------------------------------------------- elementwise


@dataclass
class Op:
    fn: Callable
    ref: Callable
    fill: Callable = uniform()
    grad: bool = True
    dtypes: tuple = (np.float64,)


def _sigmoid(a):
    return 1 / (1 + np.exp(-a))


UNARY = {
    "neg": Op(fg.neg, np.negative, dtypes=(np.float64, np.int64)),
    "abs": Op(fg.abs, np.abs, dtypes=(np.float64, np.int64)),
    "relu": Op(fg.relu, lambda a: np.maximum(a, 0)),
    "exp": Op(fg.exp, np.exp),
    "log": Op(fg.log, np.log, uniform(0.1, 5.0)),
    "log1p": Op(fg.log1p, np.log1p, uniform(-0.9, 4.0)),
    "log1p_method": Op(lambda x: x.log1p(), np.log1p, uniform(-0.9, 4.0)),
    "sqrt": Op(fg.sqrt, np.sqrt, uniform(0.1, 5.0)),
    "tanh": Op(fg.tanh, np.tanh),
    "sigmoid": Op(fg.sigmoid, _sigmoid),
    "sin": Op(fg.sin, np.sin),
    "cos": Op(fg.cos, np.cos),
    "tan": Op(fg.tan, np.tan, uniform(-1.4, 1.4)),
    "asin": Op(fg.asin, np.arcsin, uniform(-0.95, 0.95)),
    "acos": Op(fg.acos, np.arccos, uniform(-0.95, 0.95)),
    "atan": Op(fg.atan, np.arctan),
    "sinh": Op(fg.sinh, np.sinh),
    "cosh": Op(fg.cosh, np.cosh),
    "erf": Op(fg.erf, tref(torch.erf)),
    "erfc": Op(fg.erfc, tref(torch.erfc)),
    "expm1": Op(fg.expm1, np.expm1),
    "exp2": Op(fg.exp2, np.exp2),
    "log2": Op(fg.log2, np.log2, uniform(0.1, 5.0)),
    "log10": Op(fg.log10, np.log10, uniform(0.1, 5.0)),
    "rsqrt": Op(fg.rsqrt, lambda a: 1 / np.sqrt(a), uniform(0.1, 5.0)),
    "reciprocal": Op(fg.reciprocal, np.reciprocal, uniform(0.3, 3.0)),
    "square": Op(fg.square, np.square, dtypes=(np.float64, np.int64)),
    "softplus": Op(fg.softplus, tref(TF.softplus), uniform(-25.0, 25.0)),
    "silu": Op(fg.silu, lambda a: a * _sigmoid(a)),
    "floor": Op(fg.floor, np.floor, dtypes=(np.float64, np.int64)),
    "ceil": Op(fg.ceil, np.ceil),
    "round": Op(fg.round, np.round),
    "trunc": Op(fg.trunc, np.trunc),
    "sign": Op(fg.sign, np.sign, dtypes=(np.float64, np.int64)),
    "sign_zeros": Op(lambda x: x.sign(), np.sign, ints(-2, 3), grad=False),
    "gelu": Op(F.gelu, tref(TF.gelu), uniform(-5.0, 5.0)),
    "gelu_tanh": Op(
        lambda x: F.gelu(x, approximate="tanh"),
        tref(lambda t: TF.gelu(t, approximate="tanh")),
        uniform(-5.0, 5.0),
    ),
    "leaky_relu": Op(lambda x: F.leaky_relu(x, 0.2), tref(lambda t: TF.leaky_relu(t, 0.2))),
    "elu": Op(lambda x: F.elu(x, 1.3), tref(lambda t: TF.elu(t, 1.3))),
    "hardtanh": Op(lambda x: F.hardtanh(x, -1.5, 0.7), tref(lambda t: TF.hardtanh(t, -1.5, 0.7))),
    "clamp": Op(lambda x: fg.clamp(x, -1.0, 0.5), lambda a: np.clip(a, -1.0, 0.5)),
    "clamp_method_min": Op(lambda x: x.clamp(min=-0.5), lambda a: np.clip(a, -0.5, None)),
    "clip_max": Op(lambda x: fg.clip(x, max=1.0), lambda a: np.clip(a, None, 1.0)),
    "clip_method_int": Op(
        lambda x: x.clip(-1, 2), lambda a: np.clip(a, -1, 2), ints(-4, 5), dtypes=(np.int64,)
    ),
    "isnan": Op(fg.isnan, np.isnan, specials, grad=False),
    "isinf": Op(fg.isinf, np.isinf, specials, grad=False),
    "isfinite": Op(fg.isfinite, np.isfinite, specials, grad=False),
    "isnan_method": Op(lambda x: x.isnan(), np.isnan, specials, grad=False),
    "isfinite_int": Op(fg.isfinite, np.isfinite, ints(-3, 3), grad=False, dtypes=(np.int64,)),
    "logical_not": Op(fg.logical_not, np.logical_not, ints(-1, 2), grad=False),
    "logical_not_bool": Op(fg.logical_not, np.logical_not, bools(), grad=False, dtypes=(np.bool_,)),
}
UNARY_CASES = [(n, np.dtype(d).name) for n, op in sorted(UNARY.items()) for d in op.dtypes]


@pytest.mark.parametrize("name,dtype", UNARY_CASES)
@FAST
@given(shape=shapes, data=st.data())
def test_unary_on_views(name, dtype, shape, data):
    op = UNARY[name]
    fill = op.fill
    if dtype == "int64" and not name.endswith("_int"):
        fill = ints(-5, 6)
    v = data.draw(views(shape, lambda rng, s: fill(rng, s).astype(dtype)))
    with np.errstate(all="ignore"):
        want = op.ref(v.a)
    same(op.fn(v.t()), want)
    if op.grad and dtype == "float64":
        grad_check(op.fn, [v])


def _div_fill(rng, shape):
    return rng.uniform(0.3, 3.0, shape) * rng.choice([-1.0, 1.0], shape)


# name: (fg function, reference, fill of each input, gradient?)
BINARY = {
    "add": (fg.add, np.add, (uniform(), uniform()), True),
    "sub": (lambda a, b: a - b, np.subtract, (uniform(), uniform()), True),
    "mul": (fg.mul, np.multiply, (uniform(), uniform()), True),
    "div": (lambda a, b: a / b, np.divide, (uniform(), _div_fill), True),
    "pow": (fg.pow, np.power, (uniform(0.2, 3.0), uniform(-2.0, 2.0)), True),
    "maximum": (fg.maximum, np.maximum, (uniform(), uniform()), True),
    "minimum": (lambda a, b: a.minimum(b), np.minimum, (uniform(), uniform()), True),
    "atan2": (fg.atan2, np.arctan2, (uniform(), _div_fill), True),
    "atan2_method": (lambda a, b: a.atan2(b), np.arctan2, (_div_fill, uniform()), True),
    "clamp_tensor_bounds": (
        lambda x, lo: fg.clamp(x, lo, 1.0),
        lambda a, lo: np.minimum(np.maximum(a, lo), 1.0),
        (uniform(), uniform(-2.0, 0.0)),
        True,
    ),
    "equal": (fg.eq, np.equal, (ints(-1, 2), ints(-1, 2)), False),
    "less": (lambda a, b: a < b, np.less, (ints(-1, 2), ints(-1, 2)), False),
    "greater_equal": (fg.greater_equal, np.greater_equal, (ints(-1, 2), ints(-1, 2)), False),
    "logical_and": (fg.logical_and, np.logical_and, (ints(-1, 2), ints(-1, 2)), False),
    "logical_or": (fg.logical_or, np.logical_or, (ints(-1, 2), bools()), False),
    "logical_and_bool": (fg.logical_and, np.logical_and, (bools(), bools()), False),
    "logical_or_int_bool": (
        fg.logical_or,
        np.logical_or,
        (lambda r, s: ints(-1, 2)(r, s), bools()),
        False,
    ),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@FAST
@given(sh=pairs, data=st.data())
def test_binary_on_broadcast_views(name, sh, data):
    fn, ref, fills, grad = BINARY[name]
    vs = [data.draw(views(s, f, salt=i)) for i, (s, f) in enumerate(zip(sh.input_shapes, fills))]
    want = ref(*[v.a for v in vs])
    assert np.shape(want) == sh.result_shape
    same(fn(*ts(vs)), want)
    if grad:
        grad_check(fn, vs)


@FAST
@given(sh=triples, data=st.data())
def test_clamp_and_where_with_three_broadcast_views(sh, data):
    x, lo, hi = (data.draw(views(s, salt=i)) for i, s in enumerate(sh.input_shapes))
    want = np.minimum(np.maximum(x.a, lo.a), hi.a)  # PyTorch's clamp: max wins over min
    same(fg.clamp(x.t(), lo.t(), hi.t()), want)
    same(x.t().clip(lo.t(), hi.t()), want)
    grad_check(lambda x, lo, hi: fg.clamp(x, lo, hi), [x, lo, hi])
    c = data.draw(views(sh.input_shapes[0], bools(), salt=3))
    same(fg.where(c.t(), lo.t(), hi.t()), np.where(c.a, lo.a, hi.a))
    grad_check(lambda a, b: fg.where(c.t(), a, b), [lo, hi])


# --------------------------------------------------------------------------------- reductions


def _norm_ref(a, p, axis, keep):
    ab = np.abs(a)
    if p in (2, "fro"):
        return np.sqrt((a * a).sum(axis, keepdims=keep))
    if p == math.inf:
        return ab.max(axis, keepdims=keep)
    if p == -math.inf:
        return ab.min(axis, keepdims=keep)
    if p == 0:
        return (a != 0).sum(axis, keepdims=keep).astype(a.dtype)
    return (ab**p).sum(axis, keepdims=keep) ** (1.0 / p)


def _var_ref(a, axis, keep, c, sqrt=False):
    with np.errstate(all="ignore"):
        n = a.size if axis is None else int(np.prod([a.shape[d] for d in np.atleast_1d(axis)]))
        m = a.mean(axis, keepdims=True)
        v = ((a - m) ** 2).sum(axis, keepdims=keep) / max(n - c, 0)
    return np.sqrt(v) if sqrt else v


def _reduced_count(shape, axis):
    return int(
        np.prod([shape[d] for d in (range(len(shape)) if axis is None else np.atleast_1d(axis))])
    )


@dataclass
class Red:
    fn: Callable  # (x, axis, keepdims, extra) -> Tensor
    ref: Callable  # (a, axis, keepdims, extra) -> array
    extra: Any = None  # a strategy for one more argument
    fill: Callable = uniform()
    grad: bool = True
    axes: str = "tuple"  # "tuple": None, an int or a tuple; "int": None or an int; "dim": an int
    dtypes: tuple = (np.float64,)


def SIGNED(rng, s):
    """Magnitudes in [0.5, 1.5], random signs: no zeros, tame products."""
    return rng.uniform(0.5, 1.5, s) * rng.choice([-1.0, 1.0], s)


def ZEROS(rng, s):
    """-1, 0 and 1: ties (for argmax/argmin) and zeros (for any/all)."""
    return rng.integers(-1, 2, s).astype(np.float64)


REDUCE = {
    "sum": Red(
        lambda x, ax, k, _: fg.sum(x, axis=ax, keepdims=k),
        lambda a, ax, k, _: a.sum(ax, keepdims=k),
        dtypes=(np.float64, np.int64),
    ),
    "mean": Red(lambda x, ax, k, _: x.mean(ax, k), lambda a, ax, k, _: a.mean(ax, keepdims=k)),
    "max": Red(
        lambda x, ax, k, _: fg.max(x, axis=ax, keepdims=k),
        lambda a, ax, k, _: a.max(ax, keepdims=k),
        dtypes=(np.float64, np.int64),
    ),
    "min": Red(
        lambda x, ax, k, _: x.min(axis=ax, keepdims=k), lambda a, ax, k, _: a.min(ax, keepdims=k)
    ),
    "prod": Red(
        lambda x, ax, k, _: x.prod(ax, k),
        lambda a, ax, k, _: a.prod(ax, keepdims=k),
        fill=SIGNED,
        dtypes=(np.float64, np.int64),
    ),
    "prod_with_zeros": Red(
        lambda x, ax, k, _: fg.prod(x, dim=ax, keepdim=k),
        lambda a, ax, k, _: a.prod(ax, keepdims=k),
        fill=lambda rng, s: rng.choice([0.0, 0.5, -1.5, 2.0], s),
    ),
    "var": Red(
        lambda x, ax, k, c: x.var(ax, keepdim=k, correction=c),
        lambda a, ax, k, c: _var_ref(a, ax, k, c),
        st.integers(0, 2),
    ),
    "std": Red(
        lambda x, ax, k, c: fg.std(x, dim=ax, keepdim=k, correction=c),
        lambda a, ax, k, c: _var_ref(a, ax, k, c, sqrt=True),
        st.integers(0, 2),
    ),
    "var_unbiased_flag": Red(
        lambda x, ax, k, u: x.var(ax, u, k),
        lambda a, ax, k, u: _var_ref(a, ax, k, int(u)),
        st.booleans(),
    ),
    "norm": Red(
        lambda x, ax, k, p: x.norm(p, ax, k),
        lambda a, ax, k, p: _norm_ref(a, p, ax, k),
        st.sampled_from([2, "fro", 1, 3, 0.5, math.inf, -math.inf, 0]),
    ),
    "logsumexp": Red(
        lambda x, ax, k, _: x.logsumexp(ax, k),
        lambda a, ax, k, _: np.log(np.exp(a).sum(ax, keepdims=k)),
        fill=uniform(-30.0, 30.0),
    ),
    "argmax": Red(
        lambda x, ax, k, _: x.argmax(ax, k),
        lambda a, ax, k, _: np.argmax(a, ax, keepdims=k),
        fill=ZEROS,
        grad=False,
        axes="int",
        dtypes=(np.float64, np.int64),
    ),
    "argmin": Red(
        lambda x, ax, k, _: fg.argmin(x, ax, keepdim=k),
        lambda a, ax, k, _: np.argmin(a, ax, keepdims=k),
        fill=ZEROS,
        grad=False,
        axes="int",
    ),
    "any": Red(
        lambda x, ax, k, _: x.any(ax, k),
        lambda a, ax, k, _: np.any(a, ax, keepdims=k),
        fill=lambda rng, s: rng.random(s) < 0.2,
        grad=False,
        dtypes=(np.bool_, np.float64),
    ),
    "all": Red(
        lambda x, ax, k, _: fg.all(x, ax, k),
        lambda a, ax, k, _: np.all(a, ax, keepdims=k),
        fill=lambda rng, s: rng.random(s) < 0.8,
        grad=False,
        dtypes=(np.bool_, np.int64),
    ),
    "cumsum": Red(
        lambda x, ax, k, _: x.cumsum(ax),
        lambda a, ax, k, _: np.cumsum(a, ax),
        axes="dim",
        dtypes=(np.float64, np.int64, np.bool_),
    ),
    "cumprod": Red(
        lambda x, ax, k, _: fg.cumprod(x, dim=ax),
        lambda a, ax, k, _: np.cumprod(a, ax),
        fill=lambda rng, s: rng.choice([0.0, 0.5, -1.5, 2.0], s),
        axes="dim",
        dtypes=(np.float64, np.int64),
    ),
}
REDUCE_CASES = [(n, np.dtype(d).name) for n, r in sorted(REDUCE.items()) for d in r.dtypes]


def _cast_fill(fill, dtype):
    if dtype == "bool":
        return lambda rng, s: fill(rng, s) != 0
    if dtype == "int64":
        return lambda rng, s: rng.integers(-3, 4, s).astype(np.int64)
    return fill


@pytest.mark.parametrize("name,dtype", REDUCE_CASES)
@FAST
@given(shape=nd_shapes, keep=st.booleans(), data=st.data())
def test_reduction_on_views_with_tuple_axes(name, dtype, shape, keep, data):
    r = REDUCE[name]
    nd = len(shape)
    axes = [st.integers(-nd, nd - 1)]
    if r.axes != "dim":
        axes.append(st.none())
    if r.axes == "tuple":
        axes.append(hnp.valid_tuple_axes(nd, min_size=1))
    ax = data.draw(st.one_of(*axes))
    extra = data.draw(r.extra) if r.extra is not None else None
    v = data.draw(views(shape, _cast_fill(r.fill, dtype)))
    want = np.asarray(r.ref(v.a, ax, keep, extra))
    if dtype in ("bool", "int64") and name in ("sum", "prod", "cumsum", "cumprod"):
        want = want.astype(np.int64)  # integers and bools add up in int64
    same(r.fn(v.t(), ax, keep, extra), want)
    if not (r.grad and dtype == "float64"):
        return
    if name in ("var", "std", "var_unbiased_flag"):
        c = int(extra) if extra is not None else 1
        if _reduced_count(shape, ax) - c <= 0:
            return  # no degrees of freedom: inf/NaN
        if name == "std" and np.any(_var_ref(v.a, ax, True, c) < 1e-6):
            return  # sqrt's kink at 0 (one value per group)
    grad_check(lambda x: r.fn(x, ax, keep, extra), [v])


@FAST
@given(shape=nd_shapes, keep=st.booleans(), data=st.data())
def test_max_min_with_dim_give_values_and_indices_on_views(shape, keep, data):
    d = data.draw(st.integers(-len(shape), len(shape) - 1))
    v = data.draw(views(shape, ZEROS))  # ties: the first index, as numpy's argmax
    for name, pick in (("max", np.argmax), ("min", np.argmin)):
        values, indices = getattr(v.t(), name)(dim=d, keepdim=keep)
        same(values, getattr(v.a, name)(d, keepdims=keep))
        same(indices, pick(v.a, d, keepdims=keep))
    w = data.draw(views(shape, salt=1))
    grad_check(lambda x: x.max(dim=d, keepdim=keep).values, [w])
    grad_check(lambda x: x.min(d)[0], [w])


# ------------------------------------------------------------------- movement and indexing


def _tref(f):
    """A reference by PyTorch: ``f(*tensors)`` on the values of numpy arrays."""

    def ref(*arrays):
        out = f(*[torch.from_numpy(_c(a)) for a in arrays])
        if isinstance(out, (tuple, list)):
            return [o.numpy() for o in out]
        return out.numpy()

    return ref


def _joined(out: Any) -> fg.Tensor:
    """A tuple of tensors as one (each part scaled differently, so a mix-up shows)."""
    if isinstance(out, (tuple, list)):
        return fg.concat([p.reshape(-1) * (i + 1.0) for i, p in enumerate(out)], 0)
    return out


def _index_view(draw, shape, lo, hi, salt=5):
    return draw(views(shape, ints(lo, hi), salt=salt))


def _mv_flatten(draw, shape):
    nd = len(shape)
    s = draw(st.integers(0, nd - 1))
    e = draw(st.integers(s, nd - 1))
    e = draw(st.sampled_from([e, e - nd]))
    want = shape[:s] + (-1,) + shape[e % nd + 1 :]
    return (lambda x: x.flatten(s, e)), (lambda a: a.reshape(want)), []


def _mv_flatten_fn(draw, shape):
    return (
        (lambda x: fg.flatten(x, 1 % len(shape))),
        (lambda a: a.reshape(shape[: 1 % len(shape)] + (-1,))),
        [],
    )


def _mv_unflatten(draw, shape):
    d = draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[d]
    f = draw(st.sampled_from([k for k in range(1, n + 1) if n % k == 0]))
    sizes = draw(st.sampled_from([(f, n // f), (f, -1), (-1, 1, f)]))
    want = list(shape)
    want[d % len(shape) : d % len(shape) + 1] = [n // f if k == -1 else k for k in sizes]
    return (lambda x: x.unflatten(d, sizes)), (lambda a: a.reshape(want)), []


def _mv_view(draw, shape):
    n = int(np.prod(shape))
    target = draw(st.sampled_from([(-1,), (n,), (shape[-1], -1), (1, -1, 1), (-1, shape[0])]))
    # (a layout that needs a copy raises, as PyTorch's view: made contiguous first here;
    # tests/test_torch_parity.py checks the error)
    return (
        (lambda x: (x if x.is_contiguous() else x.contiguous()).view(*target)),
        (lambda a: a.reshape(target)),
        [],
    )


def _mv_contiguous(draw, shape):
    def fn(x):
        y = x.contiguous()
        assert y.is_contiguous()
        return y

    return fn, (lambda a: a), []


def _mv_split(draw, shape):
    d = draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[d]
    if draw(st.booleans()):
        arg = draw(st.integers(1, n + 1))
    else:
        cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
        arg = list(np.diff([0, *cuts, n]))
        arg = [int(k) for k in arg]
    return (lambda x: x.split(arg, d)), _tref(lambda t: t.split(arg, d)), []


def _mv_chunk(draw, shape):
    d = draw(st.integers(-len(shape), len(shape) - 1))
    k = draw(st.integers(1, 4))
    return (lambda x: fg.chunk(x, k, d)), _tref(lambda t: t.chunk(k, d)), []


def _mv_repeat(draw, shape):
    reps = draw(st.lists(st.integers(1, 2), min_size=len(shape), max_size=len(shape) + 1))
    return (lambda x: x.repeat(*reps)), (lambda a: np.tile(a, reps)), []


def _mv_tile(draw, shape):
    reps = draw(st.lists(st.integers(0, 2), max_size=len(shape) + 1))
    return (lambda x: fg.tile(x, reps)), (lambda a: np.tile(a, reps)), []


def _mv_flip(draw, shape):
    nd = len(shape)
    dims = draw(st.lists(st.integers(0, nd - 1), unique=True, max_size=nd))
    dims = [draw(st.sampled_from([d, d - nd])) for d in dims]
    return (lambda x: x.flip(dims)), (lambda a: np.flip(a, tuple(dims))), []


def _mv_roll(draw, shape):
    nd = len(shape)
    if draw(st.booleans()):
        s = draw(st.integers(-7, 7))
        return (lambda x: fg.roll(x, s)), (lambda a: np.roll(a, s)), []
    dims = draw(st.lists(st.integers(-nd, nd - 1), min_size=1, max_size=3))
    shifts = draw(st.lists(st.integers(-4, 4), min_size=len(dims), max_size=len(dims)))
    return (
        (lambda x: x.roll(tuple(shifts), tuple(dims))),
        (lambda a: np.roll(a, shifts, dims)),
        [],
    )


def _mv_narrow(draw, shape):
    d = draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[d]
    start = draw(st.integers(0, n))
    length = draw(st.integers(0, n - start))
    start = draw(st.sampled_from([start, start - n] if start < n else [start]))
    key = (slice(None),) * (d % len(shape)) + (slice(start % n if start < 0 else start, None),)

    def ref(a):
        return a[key][(slice(None),) * (d % len(shape)) + (slice(0, length),)]

    return (lambda x: x.narrow(d, start, length)), ref, []


def _mv_gather(draw, shape):
    nd = len(shape)
    d = draw(st.integers(-nd, nd - 1))
    ishape = tuple(
        draw(st.integers(1, 3)) if e == d % nd else draw(st.integers(1, s))
        for e, s in enumerate(shape)
    )
    idx = _index_view(draw, ishape, 0, shape[d])
    it = idx.t()
    fn = draw(st.sampled_from(["method", "function"]))
    if fn == "method":
        return (lambda x: x.gather(d, it)), _tref(lambda t: t.gather(d, idx.torch())), []
    return (lambda x: fg.gather(x, d, it)), _tref(lambda t: torch.gather(t, d, idx.torch())), []


def _mv_take_along_axis(draw, shape):
    nd = len(shape)
    d = draw(st.integers(-nd, nd - 1))
    ishape = tuple(draw(st.integers(1, 3)) if e == d % nd else s for e, s in enumerate(shape))
    idx = _index_view(draw, ishape, -shape[d], shape[d])  # negative ones count from the end
    it = idx.t()
    return (
        (lambda x: fg.take_along_axis(x, it, d)),
        (lambda a: np.take_along_axis(a, idx.a, d)),
        [],
    )


def _mv_index_select(draw, shape):
    nd = len(shape)
    d = draw(st.integers(-nd, nd - 1))
    idx = _index_view(draw, (draw(st.integers(0, 4)),), 0, shape[d])
    it = idx.t()
    return (lambda x: fg.index_select(x, d, it)), (lambda a: np.take(a, idx.a, d)), []


def _unique_index(draw, ishape, d, n):
    """An int64 index of ``ishape`` whose entries along ``d`` are distinct (in ``[0, n)``)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    moved = np.moveaxis(np.empty(ishape, np.int64), d, -1)
    for pos in np.ndindex(moved.shape[:-1]):
        moved[pos] = rng.permutation(n)[: moved.shape[-1]]
    return _c(np.moveaxis(moved, -1, d))


def _mv_scatter(draw, shape):
    nd = len(shape)
    d = draw(st.integers(-nd, nd - 1)) % nd
    ishape = tuple(draw(st.integers(1, s)) for s in shape)
    idx = _unique_index(draw, ishape, d, shape[d])
    it = fg.tensor(idx)
    if draw(st.booleans()):
        val = draw(st.sampled_from([2.5, -1.0]))
        return (
            (lambda x: x.scatter(d, it, value=val)),
            _tref(lambda t: t.scatter(d, torch.from_numpy(idx), val)),
            [],
        )
    sshape = tuple(s + draw(st.integers(0, 1)) for s in ishape)  # src may be larger
    src = draw(views(sshape, salt=1))
    return (
        (lambda x, s: fg.scatter(x, d, it, s)),
        _tref(lambda t, s: t.scatter(d, torch.from_numpy(idx), s)),
        [src],
    )


def _mv_scatter_add(draw, shape):
    nd = len(shape)
    d = draw(st.integers(-nd, nd - 1))
    ishape = tuple(
        draw(st.integers(1, 4)) if e == d % nd else draw(st.integers(1, s))
        for e, s in enumerate(shape)
    )
    idx = _index_view(draw, ishape, 0, shape[d])
    src = draw(views(ishape, salt=1))
    it = idx.t()
    return (
        (lambda x, s: x.scatter_add(d, it, s)),
        _tref(lambda t, s: t.scatter_add(d, idx.torch(), s)),
        [src],
    )


def _mv_index_add(draw, shape):
    nd = len(shape)
    d = draw(st.integers(-nd, nd - 1))
    idx = _index_view(draw, (draw(st.integers(1, 4)),), 0, shape[d])
    sshape = tuple(idx.shape[0] if e == d % nd else s for e, s in enumerate(shape))
    src = draw(views(sshape, salt=1))
    alpha = draw(st.sampled_from([1, 0.5]))
    it = idx.t()
    return (
        (lambda x, s: fg.index_add(x, d, it, s, alpha=alpha)),
        _tref(lambda t, s: t.index_add(d, idx.torch(), s, alpha=alpha)),
        [src],
    )


def _mask_shape(draw, shape):
    """A shape that broadcasts to ``shape`` (leading axes dropped, some lengths 1)."""
    lead = draw(st.integers(0, len(shape)))
    return tuple(draw(st.sampled_from([1, s])) for s in shape[lead:])


def _mv_masked_fill(draw, shape):
    m = draw(views(_mask_shape(draw, shape), bools(), salt=2))
    mt = m.t()
    val = draw(st.sampled_from([0.0, -1.5, 7.0]))
    return (lambda x: x.masked_fill(mt, val)), (lambda a: np.where(m.a, val, a)), []


def _mv_masked_select(draw, shape):
    m = draw(views(_mask_shape(draw, shape), bools(), salt=2))
    mt = m.t()
    bm = np.broadcast_to(m.a, shape)
    return (lambda x: fg.masked_select(x, mt)), (lambda a: a[bm]), []


def _np_pad(a, pads, mode, value=0.0):
    """PyTorch's pad (last axis first; negative constant pads crop) with numpy."""
    nd = a.ndim
    width = [(0, 0)] * nd
    for i in range(len(pads) // 2):
        d = nd - 1 - i
        lo, hi = pads[2 * i], pads[2 * i + 1]
        a = a[(slice(None),) * d + (slice(max(-lo, 0), a.shape[d] - max(-hi, 0)),)]
        width[d] = (max(lo, 0), max(hi, 0))
    if mode == "constant":
        return np.pad(a, width, constant_values=value)
    return np.pad(a, width, mode=mode)


def _mv_pad(draw, shape):
    k = draw(st.integers(1, min(len(shape), 3)))
    mode = draw(st.sampled_from(["constant", "reflect"]))
    pads = []
    for i in range(k):
        n = shape[len(shape) - 1 - i]
        if mode == "reflect":
            pads += [draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))]
        else:
            lo = draw(st.integers(-1 if n >= 2 else 0, 2))
            pads += [lo, draw(st.integers(-1 if n + min(lo, 0) >= 2 else 0, 2))]
    value = draw(st.sampled_from([0.0, 1.25]))
    if mode == "reflect":
        return (lambda x: fg.pad(x, pads, mode="reflect")), (lambda a: _np_pad(a, pads, mode)), []
    return (
        (lambda x: F.pad(x, pads, "constant", value)),
        (lambda a: _np_pad(a, pads, mode, value)),
        [],
    )


MOVES = {
    "flatten": _mv_flatten,
    "flatten_function": _mv_flatten_fn,
    "unflatten": _mv_unflatten,
    "view": _mv_view,
    "contiguous": _mv_contiguous,
    "split": _mv_split,
    "chunk": _mv_chunk,
    "repeat": _mv_repeat,
    "tile": _mv_tile,
    "flip": _mv_flip,
    "roll": _mv_roll,
    "narrow": _mv_narrow,
    "gather": _mv_gather,
    "take_along_axis": _mv_take_along_axis,
    "index_select": _mv_index_select,
    "scatter": _mv_scatter,
    "scatter_add": _mv_scatter_add,
    "index_add": _mv_index_add,
    "masked_fill": _mv_masked_fill,
    "masked_select": _mv_masked_select,
    "pad": _mv_pad,
}


@pytest.mark.parametrize("name", sorted(MOVES))
@FAST
@given(shape=nd_shapes, data=st.data())
def test_movement_and_indexing_on_views(name, shape, data):
    x = data.draw(views(shape))
    fn, ref, extra = MOVES[name](data.draw, shape)
    vs = [x, *extra]
    got, want = fn(*ts(vs)), ref(*[v.a for v in vs])
    if isinstance(want, list):
        assert isinstance(got, tuple) and len(got) == len(want), (len(got), len(want))
        for g, w in zip(got, want):
            same(g, w)
    else:
        same(got, want)
    grad_check(lambda *t: _joined(fn(*t)), vs)


@FAST
@given(shape=shapes, data=st.data())
def test_one_hot_of_index_views(shape, data):
    n = data.draw(st.integers(1, 4))
    idx = _index_view(data.draw, shape, 0, n)
    same(fg.one_hot(idx.t(), n), np.eye(n, dtype=np.int64)[idx.a])
    same(F.one_hot(idx.t()), np.eye(idx.a.max() + 1, dtype=np.int64)[idx.a])


def test_take_along_axis_broadcasts_length_1_index_axes_as_numpy():
    # numpy (and torch.take_along_dim) broadcast the index's length-1 axes against the input
    a = np.arange(6.0).reshape(3, 2)
    idx = np.array([[1]])
    got = fg.take_along_axis(fg.tensor(a), fg.tensor(idx), 0)
    np.testing.assert_array_equal(got.numpy(), np.take_along_axis(a, idx, 0))  # [[2., 3.]]


# ------------------------------------------------------------------------------ nn functions


@FEW
@given(shape=nd_shapes, p=st.sampled_from([0.25, 0.5]), seed=st.integers(0, 99), data=st.data())
def test_dropout_on_views_with_a_seeded_mask(shape, p, seed, data):
    v = data.draw(views(shape, SIGNED))  # no zeros: a zero output is a dropped entry

    def drop(x):
        fg.manual_seed(seed)
        return F.dropout(x, p)

    out = drop(v.t()).numpy()
    keep = out != 0
    np.testing.assert_allclose(out, np.where(keep, v.a / (1 - p), 0.0), **FWD)
    # the mask comes from the seed and the shape, not from the memory layout
    np.testing.assert_array_equal(drop(fg.tensor(v.a)).numpy(), out)
    grad_check(drop, [v])  # the gradient is the (seeded) mask / (1 - p)
    for off in (F.dropout(v.t(), 0.0), F.dropout(v.t(), p, training=False)):
        same(off, v.a)
    grad_check(lambda x: F.dropout(x, 0.0) * 1.0, [v])


def test_dropout_drops_the_right_fraction_of_a_view():
    fg.manual_seed(3)
    x = fg.ones(80, 101, dtype="float64")[:, 1::2].T  # (50, 80), non-contiguous
    assert not x.is_contiguous()
    out = F.dropout(x, 0.3).numpy()
    assert set(np.unique(out)) == {0.0, 1 / 0.7}
    assert abs((out == 0).mean() - 0.3) < 4 * math.sqrt(0.3 * 0.7 / out.size)


@FEW
@given(
    n=st.integers(1, 3),
    c=st.integers(1, 3),
    spatial=st.lists(st.integers(1, 3), max_size=2),
    training=st.booleans(),
    affine=st.booleans(),
    data=st.data(),
)
def test_batch_norm_running_stats_and_eval_on_views(n, c, spatial, training, affine, data):
    if training and n * int(np.prod(spatial)) < 2:
        n = 2  # training needs more than one value per channel
    shape = (n, c, *spatial)
    x = data.draw(views(shape))
    w, b = (data.draw(views((c,), salt=i)) for i in (1, 2))
    written = ("contig", "step", "flip")  # not a broadcast: written in place
    rm = data.draw(views((c,), layouts=written, salt=3))
    rv = data.draw(views((c,), uniform(0.5, 2.0), layouts=written, salt=4))
    wb = [w, b] if affine else []
    mom, eps = 0.3, 1e-3
    rm_t, rv_t = rm.t(), rv.t()  # running stats: views too, updated in place
    got = F.batch_norm(x.t(), rm_t, rv_t, *ts(wb), training=training, momentum=mom, eps=eps)
    rm_T, rv_T = rm.torch(), rv.torch()
    want = TF.batch_norm(
        x.torch(), rm_T, rv_T, *[v.torch() for v in wb], training=training, momentum=mom, eps=eps
    )
    same(got, want.numpy())
    np.testing.assert_allclose(rm_t.numpy(), rm_T.numpy(), **FWD)
    np.testing.assert_allclose(rv_t.numpy(), rv_T.numpy(), **FWD)
    if training:
        grad_check(
            lambda x, *wb: F.batch_norm(
                x, fg.tensor(rm.a), fg.tensor(rv.a), *wb, training=True, momentum=mom, eps=eps
            ),
            [x, *wb],
        )
    else:  # eval: differentiable in the running statistics as well
        grad_check(
            lambda x, m, v, *wb: F.batch_norm(x, m, v, *wb, training=False, eps=eps),
            [x, rm, rv, *wb],
        )


@FEW
@given(
    batch=hnp.array_shapes(min_dims=0, max_dims=2, max_side=2),
    lse=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3)),
    mask=st.sampled_from(["none", "bool", "float", "causal"]),
    scale=st.sampled_from([None, 0.7]),
    kv_batch_1=st.booleans(),
    data=st.data(),
)
def test_scaled_dot_product_attention_masks_on_views(batch, lse, mask, scale, kv_batch_1, data):
    L, S, E, Ev = lse
    kvb = tuple(1 for _ in batch) if kv_batch_1 else batch  # key/value broadcast over batch
    q = data.draw(views((*batch, L, E)))
    k = data.draw(views((*kvb, S, E), salt=1))
    v = data.draw(views((*kvb, S, Ev), salt=2))
    mshape = data.draw(st.sampled_from([(L, S), (1, S), (*batch, L, S)]))
    vs, kw, tkw = [q, k, v], {"scale": scale}, {"scale": scale}
    if mask == "causal":
        kw["is_causal"] = tkw["is_causal"] = True
    elif mask == "bool":
        m = data.draw(views(mshape, bools(0.7), salt=3))
        kw["attn_mask"], tkw["attn_mask"] = m.t(), m.torch()
    elif mask == "float":
        vs.append(data.draw(views(mshape, salt=3)))

    def attn(q, k, v, m=None):
        return F.scaled_dot_product_attention(
            q, k, v, **({} if m is None else {"attn_mask": m}), **kw
        )

    ts_ = [t.torch() for t in vs]
    if mask == "float":
        tkw["attn_mask"] = ts_.pop()
    want = TF.scaled_dot_product_attention(*ts_, **tkw).numpy()
    same(attn(*ts(vs)), want)  # rows with every key masked give 0, as PyTorch
    grad_check(attn, vs)


@FEW
@given(
    n=st.integers(1, 4),
    c=st.integers(1, 4),
    extra=st.lists(st.integers(1, 2), max_size=1),
    ignore=st.sampled_from([-100, 0, 1]),
    weighted=st.booleans(),
    reduction=st.sampled_from(["mean", "sum", "none"]),
    smoothing=st.sampled_from([0.0, 0.2]),
    data=st.data(),
)
def test_nll_loss_and_cross_entropy_ignore_index_on_views(
    n, c, extra, ignore, weighted, reduction, smoothing, data
):
    x = data.draw(views((n, c, *extra)))
    t = data.draw(views((n, *extra), ints(0, c), salt=1))
    ws = [data.draw(views((c,), uniform(0.2, 2.0), salt=2))] if weighted else []
    tt, tT = t.t(), torch.from_numpy(t.a)
    kw = {"ignore_index": ignore, "reduction": reduction}
    for name, fgf, tf, skw in (
        ("nll_loss", F.nll_loss, TF.nll_loss, {}),
        ("cross_entropy", F.cross_entropy, TF.cross_entropy, {"label_smoothing": smoothing}),
    ):
        want = tf(x.torch(), tT, *[w.torch() for w in ws], **kw, **skw).numpy()
        same(fgf(x.t(), tt, *ts(ws), **kw, **skw), want, err_msg=name, **FWD)
        if reduction != "mean" or (t.a != ignore).any():  # all ignored: 0/0
            grad_check(lambda x, *w, f=fgf, k=skw: f(x, tt, *w, **kw, **k), [x, *ws])


def _nn_linear(draw):
    batch = draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
    i, o = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    vs = [draw(views((*batch, i))), draw(views((o, i), salt=1))]
    if draw(st.booleans()):
        vs.append(draw(views((o,), salt=2)))
    return vs, F.linear, TF.linear


def _nn_layer_norm(draw):
    shape = draw(nd_shapes)
    k = draw(st.integers(1, len(shape)))
    norm = shape[len(shape) - k :]
    vs = [draw(views(shape))]
    affine = draw(st.sampled_from([0, 1, 2]))  # neither, weight, weight and bias
    vs += [draw(views(norm, salt=i)) for i in range(1, affine + 1)]
    return (
        vs,
        (lambda x, *wb: F.layer_norm(x, norm, *wb)),
        (lambda x, *wb: TF.layer_norm(x, norm, *wb)),
    )


def _nn_group_norm(draw):
    g, m = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    n, sp = draw(st.integers(1, 2)), draw(st.lists(st.integers(1, 3), max_size=2))
    if m * int(np.prod(sp)) < 2:
        sp = [2]
    vs = [draw(views((n, g * m, *sp)))]
    if draw(st.booleans()):
        vs += [draw(views((g * m,), salt=1)), draw(views((g * m,), salt=2))]
    return vs, (lambda x, *wb: F.group_norm(x, g, *wb)), (lambda x, *wb: TF.group_norm(x, g, *wb))


def _nn_embedding(draw):
    n, d = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    idx = _index_view(draw, draw(shapes), 0, n)
    it = idx.t()
    return (
        [draw(views((n, d)))],
        (lambda w: F.embedding(it, w)),
        (lambda w: TF.embedding(idx.torch(), w)),
    )


def _pairwise_loss(fgf, tf, kw=None):
    def setup(draw):
        fills = (uniform(), uniform())
        shape = draw(shapes)
        x, y = (draw(views(shape, f, salt=i)) for i, f in enumerate(fills))
        k = {"reduction": draw(st.sampled_from(["mean", "sum", "none"]))}
        k.update({n: draw(s) for n, s in (kw or {}).items()})
        return [x, y], (lambda a, b: fgf(a, b, **k)), (lambda a, b: tf(a, b, **k))

    return setup


def _nn_bce(draw):
    shape = draw(shapes)
    x = draw(views(shape, uniform(0.05, 0.95)))
    y = draw(views(shape, uniform(0.0, 1.0), salt=1))
    red = draw(st.sampled_from(["mean", "sum", "none"]))
    vs = [x]
    if draw(st.booleans()):
        vs.append(draw(views(shape[len(shape) - 1 :], uniform(0.2, 2.0), salt=2)))  # weight
    yt, yT = y.t(), y.torch()
    return (
        vs,
        (lambda x, *w: F.binary_cross_entropy(x, yt, *w, reduction=red)),
        (lambda x, *w: TF.binary_cross_entropy(x, yT, *w, reduction=red)),
    )


def _nn_bce_logits(draw):
    shape = draw(shapes)
    x, y = draw(views(shape)), draw(views(shape, uniform(0.0, 1.0), salt=1))
    red = draw(st.sampled_from(["mean", "sum", "none"]))
    pw = [draw(views(shape[len(shape) - 1 :], uniform(0.2, 2.0), salt=2))]
    if draw(st.booleans()):
        return (
            [x, y, *pw],
            lambda x, y, p: F.binary_cross_entropy_with_logits(x, y, reduction=red, pos_weight=p),
            lambda x, y, p: TF.binary_cross_entropy_with_logits(x, y, reduction=red, pos_weight=p),
        )
    return (
        [x, y],
        lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction=red),
        lambda x, y: TF.binary_cross_entropy_with_logits(x, y, reduction=red),
    )


def _nn_kl_div(draw):
    shape = draw(nd_shapes)
    log_target = draw(st.booleans())
    x = draw(views(shape, uniform(-3.0, -0.1)))
    y = draw(views(shape, uniform(-3.0, -0.1) if log_target else uniform(0.05, 1.0), salt=1))
    kw = {
        "reduction": draw(st.sampled_from(["batchmean", "sum", "none"])),
        "log_target": log_target,
    }
    return [x, y], (lambda a, b: F.kl_div(a, b, **kw)), (lambda a, b: TF.kl_div(a, b, **kw))


def _nn_adaptive_avg_pool2d(draw):
    lead = draw(st.lists(st.integers(1, 2), min_size=1, max_size=2))
    h, w = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    out = (draw(st.integers(1, h + 1)), draw(st.sampled_from([draw(st.integers(1, w + 1)), None])))
    return (
        [draw(views((*lead, h, w)))],
        (lambda x: F.adaptive_avg_pool2d(x, out)),
        (lambda x: TF.adaptive_avg_pool2d(x, out)),
    )


def _nn_interpolate(draw):
    mode = draw(st.sampled_from(["nearest", "bilinear"]))
    sp = draw(st.lists(st.integers(1, 3), min_size=2 if mode == "bilinear" else 1, max_size=2))
    x = draw(views((draw(st.integers(1, 2)), draw(st.integers(1, 2)), *sp)))
    if draw(st.booleans()):
        kw = {"size": tuple(draw(st.integers(1, 5)) for _ in sp)}
    else:
        scales = [2, 1.5] + ([0.5] if min(sp) >= 2 else [])  # no empty output
        kw = {"scale_factor": draw(st.sampled_from(scales))}
    if mode == "bilinear":
        kw["align_corners"] = draw(st.booleans())
    return (
        [x],
        (lambda x: F.interpolate(x, mode=mode, **kw)),
        (lambda x: TF.interpolate(x, mode=mode, **kw)),
    )


def _nn_pixel_shuffle(draw):
    r = draw(st.integers(1, 2))
    lead = draw(st.lists(st.integers(1, 2), max_size=2))
    shape = (
        *lead,
        draw(st.integers(1, 2)) * r * r,
        draw(st.integers(1, 3)),
        draw(st.integers(1, 3)),
    )
    return (
        [draw(views(shape))],
        (lambda x: F.pixel_shuffle(x, r)),
        (lambda x: TF.pixel_shuffle(x, r)),
    )


NN = {
    "linear": _nn_linear,
    "layer_norm": _nn_layer_norm,
    "group_norm": _nn_group_norm,
    "embedding": _nn_embedding,
    "mse_loss": _pairwise_loss(F.mse_loss, TF.mse_loss),
    "l1_loss": _pairwise_loss(F.l1_loss, TF.l1_loss),
    "smooth_l1_loss": _pairwise_loss(
        F.smooth_l1_loss, TF.smooth_l1_loss, kw={"beta": st.sampled_from([1.0, 0.5])}
    ),
    "binary_cross_entropy": _nn_bce,
    "binary_cross_entropy_with_logits": _nn_bce_logits,
    "kl_div": _nn_kl_div,
    "adaptive_avg_pool2d": _nn_adaptive_avg_pool2d,
    "interpolate": _nn_interpolate,
    "pixel_shuffle": _nn_pixel_shuffle,
}


@pytest.mark.parametrize("name", sorted(NN))
@FEW
@given(data=st.data())
def test_nn_functions_on_views_against_torch(name, data):
    vs, fgf, tf = NN[name](data.draw)
    same(fgf(*ts(vs)), tf(*[v.torch() for v in vs]).numpy())
    grad_check(fgf, vs)


# --------------------------------------------------------------------- matmul's transposes


@FAST
@given(
    batch=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=2),
    mkn=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3)),
    ta=st.booleans(),
    tb=st.booleans(),
    data=st.data(),
)
def test_matmul_transpose_flags_on_views(batch, mkn, ta, tb, data):
    m, k, n = mkn
    ba, bb = batch.input_shapes
    x = data.draw(views((*ba, *((k, m) if ta else (m, k)))))
    y = data.draw(views((*bb, *((n, k) if tb else (k, n))), salt=1))
    xa, ya = (np.swapaxes(x.a, -1, -2) if ta else x.a), (np.swapaxes(y.a, -1, -2) if tb else y.a)
    want = np.matmul(xa, ya)
    kw = {"transpose_a": ta, "transpose_b": tb}
    same(fg.matmul(x.t(), y.t(), **kw), want)
    same(x.t().matmul(y.t(), **kw), want)
    grad_check(lambda a, b: fg.matmul(a, b, **kw), [x, y])  # both inputs' gradients


# ------------------------------------------------------------------------ advanced indexing


@st.composite
def index_keys(draw, shape):
    """A numpy key for ``shape``: ints, slices (negative steps too), ``None``, ``...``,
    Python ``True``/``False``, integer arrays of 1 to 3 axes broadcast together (negative
    entries too; int64, int32 or int8; each as a numpy array, a list or a ferrograd tensor
    that is itself a non-contiguous view) and boolean masks over one or two axes. Returns (numpy's key,
    ferrograd's key)."""
    nd = len(shape)
    kinds, used = [], 0  # (kind, how many axes it indexes)
    for _ in range(draw(st.integers(1, nd + 2))):
        names = [k for k, _ in kinds]
        options = ["none", "true"] + (["ellipsis"] if "ellipsis" not in names else [])
        if used < nd:
            options += ["int", "slice"] + (["array", "array"] if "mask" not in names else [])
            if "mask" not in names and "array" not in names:
                options.append("mask")
        kind = draw(st.sampled_from(options))
        width = {"int": 1, "slice": 1, "array": 1}.get(kind, 0)
        if kind == "mask":
            width = draw(st.integers(1, min(2, nd - used)))
        kinds.append((kind, width))
        used += width
    names = [k for k, _ in kinds]
    if "array" not in names and "mask" not in names and draw(st.booleans()):
        kinds.append(("false", 0))  # a 0-d False broadcasts with no other index array
    # the axes each item indexes: from the front before `...`, from the back after it
    dims, at = [], 0
    split = names.index("ellipsis") if "ellipsis" in names else len(kinds)
    for k, w in kinds[:split]:
        dims.append(list(range(at, at + w)))
        at += w
    at = nd
    for k, w in reversed(kinds[split:]):
        dims.insert(split, list(range(at - w, at)))
        at -= w
    bshape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3))
    key_np, key_fg = [], []
    for (kind, _), ds in zip(kinds, dims):
        n = shape[ds[0]] if ds else 0
        if kind == "int":
            v = draw(st.integers(-n, n - 1))
            key_np.append(v)
            key_fg.append(v)
        elif kind == "slice":
            ends = st.one_of(st.none(), st.integers(-n - 1, n + 1))
            v = slice(draw(ends), draw(ends), draw(st.sampled_from([None, 1, 2, -1, -2])))
            key_np.append(v)
            key_fg.append(v)
        elif kind == "array":
            lead = draw(st.integers(0, len(bshape) - 1))
            ashape = tuple(draw(st.sampled_from([1, s])) for s in bshape[lead:])
            dt = draw(st.sampled_from([np.int64, np.int64, np.int32, np.int8]))
            iv = draw(
                views(ashape, lambda rng, s, n=n, dt=dt: ints(-n, n)(rng, s).astype(dt), salt=7)
            )
            key_np.append(iv.a)
            form = draw(st.sampled_from(["tensor", "numpy", "list"]))
            key_fg.append(
                iv.t() if form == "tensor" else iv.a if form == "numpy" else iv.a.tolist()
            )
        elif kind == "mask":
            mv = draw(views(tuple(shape[d] for d in ds), bools(), salt=8))
            key_np.append(mv.a)
            key_fg.append(mv.t() if draw(st.booleans()) else mv.a)
        else:
            v = {"none": None, "ellipsis": Ellipsis, "true": True, "false": False}[kind]
            key_np.append(v)
            key_fg.append(v)
    if len(key_np) == 1 and draw(st.booleans()):
        return key_np[0], key_fg[0]  # a bare key, not a 1-tuple
    return tuple(key_np), tuple(key_fg)


@settings(max_examples=60, deadline=None)
@given(shape=nd_shapes, data=st.data())
def test_getitem_with_drawn_keys_on_views(shape, data):
    v = data.draw(views(shape))
    key_np, key_fg = data.draw(index_keys(shape))
    want = v.a[key_np]
    same(v.t()[key_fg], want)
    if want.size:
        grad_check(lambda x: x[key_fg] * 1.5, [v])


@settings(max_examples=40, deadline=None)
@given(shape=nd_shapes, data=st.data())
def test_setitem_with_drawn_keys_on_views(shape, data):
    written = ("contig", "perm", "step", "flip")  # a broadcast view cannot be written
    v = data.draw(views(shape, layouts=written))
    key_np, key_fg = data.draw(index_keys(shape))
    target = v.a[key_np].shape
    vshape = target[data.draw(st.integers(0, len(target))) :]
    val = data.draw(views(tuple(data.draw(st.sampled_from([1, s])) for s in vshape), salt=9))
    # numpy writes through its view into the storage; so must ferrograd
    base_np = v.base.copy()
    v.apply(base_np)[key_np] = val.a
    base = fg.tensor(v.base)
    t = v.apply(base)
    t[key_fg] = val.t()
    same(t, v.apply(base_np))
    same(base, base_np)
    # gradients: to the value (where its entries land last, as numpy's writes) and to the
    # entries left alone
    x = data.draw(views(shape, salt=10))

    def write(x, val):
        y = x * 1.0
        y[key_fg] = val * 2.0
        return y

    grad_check(write, [x, val])


@pytest.mark.parametrize(
    "key",
    [True, False, (True, 0), (..., False), (None, True, slice(1, None)), (0, True, ..., True)],
    ids=repr,
)
def test_python_bool_keys_as_numpy(key):
    a = np.arange(24.0).reshape(2, 3, 4)
    v = View("perm", (2, 3, 4), None, (2, 0, 1), _c(a.transpose(1, 2, 0)))
    same(v.t()[key], a[key])
    b = a.copy()
    b[key] = -1.0
    t = v.t().contiguous()
    t[key] = -1.0
    same(t, b)
    if a[key].size:
        grad_check(lambda x: x[key] * 2.0, [v])


@pytest.mark.parametrize("form", ["tensor", "numpy"])
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_one_index_array_of_any_int_dtype(dtype, form):
    # numpy takes an index array of any integer dtype (MegEngine's indices are int32)
    a = np.arange(12.0).reshape(4, 3)
    i = np.array([3, -1, 0, 3], dtype)
    key = fg.tensor(i) if form == "tensor" else i
    v = View("step", (4, 3), 1, None, np.arange(28.0).reshape(4, 7))
    same(v.t()[key], v.a[i])
    same(fg.tensor(a)[key], a[i])
    grad_check(lambda x: x[key] * 1.5, [v])
    b = a.copy()
    b[i] = -1.0
    t = fg.tensor(a)
    t[key] = -1.0
    same(t, b)
