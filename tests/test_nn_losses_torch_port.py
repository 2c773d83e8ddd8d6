"""Loss-function behaviours from PyTorch's nn tests (values, float64 gradients, broadcasting,
reductions and refused arguments), each run on PyTorch and on ferrograd from the same
inputs and compared."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import ferrograd as fg
import numpy as np
import pytest


def _torch():
    return pytest.importorskip("torch")


def _np(t: Any) -> np.ndarray:
    return np.asarray(t.detach().numpy())


def _run(lib: Any, fn: Callable[..., Any], arrays: list[Any], grads: list[bool], kw: dict):
    """``fn(F)(*arrays, **kw)`` on ``lib``: the loss, and the gradients of a fixed weighted
    sum of it with respect to the arrays marked in ``grads``."""
    ts = []
    for a, g in zip(arrays, grads):
        t = lib.tensor(a)
        if g:
            t.requires_grad_(True)
        ts.append(t)
    kw = {k: lib.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(lib.nn.functional)(*ts, **kw)
    w = np.cos(np.arange(max(1, int(np.prod(out.shape))))).reshape(tuple(out.shape))
    (out * lib.tensor(w)).sum().backward()
    return _np(out), [_np(t.grad) if g else None for t, g in zip(ts, grads)]


def _finite_diff(fn: Callable[..., Any], arrays: list[Any], i: int, kw: dict) -> np.ndarray:
    """Central differences of the same weighted sum with respect to ``arrays[i]``."""
    F = fg.nn.functional

    def f(a: np.ndarray) -> float:
        args = [fg.tensor(a if j == i else x) for j, x in enumerate(arrays)]
        kw2 = {k: fg.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = _np(fn(F)(*args, **kw2))
        w = np.cos(np.arange(max(1, out.size))).reshape(out.shape)
        return float((out * w).sum())

    x = np.array(arrays[i], dtype=np.float64)
    g = np.zeros_like(x)
    h = 1e-6
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        g[idx] = (f(xp) - f(xm)) / (2 * h)
    return g


def _compare(fn: Callable[..., Any], arrays: list[Any], grads: list[bool], kw: dict) -> None:
    torch = _torch()
    want, want_g = _run(torch, fn, arrays, grads, kw)
    got, got_g = _run(fg, fn, arrays, grads, kw)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-12)
    for i, (a, b) in enumerate(zip(got_g, want_g)):
        if b is None:
            continue
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-10, err_msg=f"gradient {i}")
        np.testing.assert_allclose(
            a, _finite_diff(fn, arrays, i, kw), rtol=1e-5, atol=1e-7, err_msg=f"fd {i}"
        )


_R = np.random.RandomState(0)
_X = _R.randn(5, 4)
_T = np.array([1, 0, 3, 3, 2])
_P = np.abs(_R.randn(5, 4))
_P /= _P.sum(1, keepdims=True)
_W = np.abs(_R.randn(4)) + 0.1
_X4 = _R.randn(2, 4, 3, 2)
_T4 = _R.randint(0, 4, (2, 3, 2))
_A, _B = _R.randn(5, 4), _R.randn(5, 4)
_PR = 1 / (1 + np.exp(-_R.randn(4, 3)))
_Y = _R.rand(4, 3)
_LG = _R.randn(4, 3) * 3
_Y6 = np.sign(_R.randn(6))
_XM = _R.randn(3, 5)
_MU, _YT, _VAR = _R.randn(4, 3), _R.randn(4, 3), np.abs(_R.randn(4, 3)) + 0.1

_CASES: list[tuple[str, Callable[..., Any], list[Any], list[bool], dict]] = []
for _red in ("mean", "sum", "none"):
    _CASES += [
        (f"ce-{_red}", lambda F: F.cross_entropy, [_X, _T], [True, False], {}),
        (
            f"ce-weight-ignore-smooth-{_red}",
            lambda F: F.cross_entropy,
            [_X, np.array([1, -100, 3, 1, 2])],
            [True, False],
            {"weight": _W, "label_smoothing": 0.2},
        ),
        (
            f"ce-probs-weight-smooth-{_red}",
            lambda F: F.cross_entropy,
            [_X, _P],
            [True, True],
            {"weight": _W, "label_smoothing": 0.3},
        ),
        (
            f"ce-4d-smooth-{_red}",
            lambda F: F.cross_entropy,
            [_X4, _T4],
            [True, False],
            {"weight": _W, "label_smoothing": 0.1, "ignore_index": 2},
        ),
        (
            f"nll-weight-ignore-{_red}",
            lambda F: F.nll_loss,
            [np.log(_P), _T],
            [True, False],
            {"weight": _W, "ignore_index": 3},
        ),
        (f"bce-weight-{_red}", lambda F: F.binary_cross_entropy, [_PR, _Y], [True, True], {}),
        (
            f"bce-logits-pos-weight-{_red}",
            lambda F: F.binary_cross_entropy_with_logits,
            [_LG, _Y],
            [True, True],
            {"pos_weight": np.array([0.5, 2.0, 3.0]), "weight": np.array([[1.0], [2], [3], [4]])},
        ),
        (f"kl-{_red}", lambda F: F.kl_div, [np.log(_PR), _Y], [True, True], {}),
        (
            f"kl-log-target-{_red}",
            lambda F: F.kl_div,
            [np.log(_PR), np.log(_Y)],
            [True, True],
            {"log_target": True},
        ),
        (
            f"smooth-l1-beta0-{_red}",
            lambda F: F.smooth_l1_loss,
            [_A, _B],
            [True, True],
            {"beta": 0.0},
        ),
        (f"smooth-l1-{_red}", lambda F: F.smooth_l1_loss, [_A, _B], [True, True], {"beta": 0.7}),
        (f"huber-{_red}", lambda F: F.huber_loss, [_A, _B], [True, True], {"delta": 0.7}),
        (f"l1-broadcast-{_red}", lambda F: F.l1_loss, [_A, _B[:1]], [True, True], {}),
        (f"mse-broadcast-{_red}", lambda F: F.mse_loss, [_A[:, :1], _B], [True, True], {}),
        (
            f"margin-ranking-{_red}",
            lambda F: F.margin_ranking_loss,
            [_A[:, 0], _B[:, 0], _Y6[:5]],
            [True, True, False],
            {"margin": 0.3},
        ),
        (
            f"hinge-{_red}",
            lambda F: F.hinge_embedding_loss,
            [_A[0], np.array([1.0, -1, -1, 1])],
            [True, False],
            {"margin": 0.5},
        ),
        (
            f"cosine-embedding-{_red}",
            lambda F: F.cosine_embedding_loss,
            [_A, _B, _Y6[:5]],
            [True, True, False],
            {"margin": 0.2},
        ),
        (
            f"multilabel-margin-{_red}",
            lambda F: F.multilabel_margin_loss,
            [_XM, np.array([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 1, 2, 3, 4]])],
            [True, False],
            {},
        ),
        (
            f"multilabel-soft-margin-{_red}",
            lambda F: F.multilabel_soft_margin_loss,
            [_XM, (_XM > 0).astype(np.float64)],
            [True, False],
            {"weight": np.arange(1.0, 6.0)},
        ),
        (
            f"multi-margin-p2-{_red}",
            lambda F: F.multi_margin_loss,
            [_XM, np.array([1, 4, 0])],
            [True, False],
            {"p": 2, "margin": 0.7, "weight": np.arange(1.0, 6.0)},
        ),
        (f"soft-margin-{_red}", lambda F: F.soft_margin_loss, [_A, np.sign(_B)], [True, False], {}),
        (
            f"triplet-swap-{_red}",
            lambda F: F.triplet_margin_loss,
            [_A, _B, _X],
            [True, True, True],
            {"p": 3.0, "swap": True, "margin": 0.7},
        ),
        (
            f"triplet-distance-{_red}",
            lambda F: F.triplet_margin_with_distance_loss,
            [_A, _B, _X],
            [True, True, True],
            {"swap": True},
        ),
        (
            f"poisson-full-{_red}",
            lambda F: F.poisson_nll_loss,
            [_A, np.array([[2.0, 3, 4, 5]] * 5)],
            [True, False],
            {"full": True},
        ),
        (
            f"gaussian-var-column-{_red}",
            lambda F: F.gaussian_nll_loss,
            [_MU, _YT, _VAR[:, :1]],
            [True, True, True],
            {"full": True, "eps": 0.2},
        ),
    ]
for _c in _CASES:
    _c[4]["reduction"] = _c[0].rsplit("-", 1)[1]


@pytest.mark.parametrize("case", _CASES, ids=[c[0] for c in _CASES])
def test_loss_values_and_float64_gradients_match_pytorch(case: Any) -> None:
    """The port's sweep: every loss, with its options and each reduction, gives PyTorch's
    value and gradients (also checked against central differences)."""
    _, fn, arrays, grads, kw = case
    _compare(fn, arrays, grads, kw)


# ------------------------------------------------------------------- refused arguments


def _raises_like_torch(
    fn: Callable[[Any], Any], exc: type[BaseException], match: str | None = None
) -> None:
    torch = _torch()
    for lib in (torch, fg):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(exc, match=match):
                fn(lib)


def _t(lib: Any, a: Any) -> Any:
    return lib.tensor(np.asarray(a))


@pytest.mark.parametrize("shape", [(2,), (3, 1)])
@pytest.mark.parametrize("op", ["nll_loss", "cross_entropy"])
def test_class_weight_of_wrong_shape_raises_runtime_error(op: str, shape: tuple) -> None:
    # ferrograd read the (3, 1) weight by broadcasting and the (2,) one out of bounds
    _raises_like_torch(
        lambda L: getattr(L.nn.functional, op)(
            _t(L, _X[:, :3]), _t(L, [0, 1, 2, 1, 0]), weight=_t(L, np.ones(shape))
        ),
        RuntimeError,
        "defined either for all 3 classes or no classes",
    )


def test_nll_loss_of_a_0d_input_raises_value_error() -> None:
    _raises_like_torch(lambda L: L.nn.functional.nll_loss(_t(L, 1.0), _t(L, 0)), ValueError)


def test_nll_loss_of_one_sample_with_two_targets_raises_value_error() -> None:
    _raises_like_torch(lambda L: L.nn.functional.nll_loss(_t(L, _X[0]), _t(L, [1, 2])), ValueError)


def test_cross_entropy_refuses_ignore_index_with_probability_targets() -> None:
    # ferrograd ignored ignore_index silently
    _raises_like_torch(
        lambda L: L.nn.functional.cross_entropy(_t(L, _X), _t(L, _P), ignore_index=1),
        RuntimeError,
        "ignore_index .*not supported for floating point target",
    )
    # the default -100 is fine
    _compare(lambda F: F.cross_entropy, [_X, _P], [True, True], {"ignore_index": -100})


def test_label_smoothing_above_one_raises_runtime_error() -> None:
    _raises_like_torch(
        lambda L: L.nn.functional.cross_entropy(_t(L, _X), _t(L, _T), label_smoothing=1.5),
        RuntimeError,
    )


@pytest.mark.parametrize("delta", [0.0, -1.0])
def test_huber_loss_refuses_non_positive_delta(delta: float) -> None:
    # ferrograd returned 0 and -0.5
    _raises_like_torch(
        lambda L: L.nn.functional.huber_loss(_t(L, _A), _t(L, _B), delta=delta),
        RuntimeError,
        "huber_loss does not support non-positive values for delta",
    )
    _raises_like_torch(lambda L: L.nn.HuberLoss(delta=delta)(_t(L, _A), _t(L, _B)), RuntimeError)


def test_binary_cross_entropy_out_of_range_raises_runtime_error() -> None:
    for bad in (1.5, float("nan")):
        _raises_like_torch(
            lambda L, bad=bad: L.nn.functional.binary_cross_entropy(
                _t(L, [0.5, bad]), _t(L, [0.0, 1.0])
            ),
            RuntimeError,
        )


def test_kl_div_mean_reduction_warns_as_pytorch() -> None:
    torch = _torch()
    for lib in (torch, fg):
        with pytest.warns(UserWarning, match="batchmean"):
            lib.nn.functional.kl_div(_t(lib, np.log(_PR)), _t(lib, _Y))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            lib.nn.functional.kl_div(_t(lib, np.log(_PR)), _t(lib, _Y), reduction="batchmean")


def test_margin_ranking_loss_refuses_inputs_of_different_ranks() -> None:
    # ferrograd broadcast a (3,) input against a (2, 3) one
    _raises_like_torch(
        lambda L: L.nn.functional.margin_ranking_loss(
            _t(L, _A[:2, :3]), _t(L, _B[0, :3]), _t(L, np.ones(3))
        ),
        RuntimeError,
    )


@pytest.mark.parametrize(
    "shapes",
    [((3,), (3,), (1,)), ((2, 3, 4), (2, 3, 4), (2,)), ((2, 3, 4), (2, 3, 4), (2, 3))],
)
def test_cosine_embedding_loss_refuses_mismatched_target_rank(shapes: tuple) -> None:
    # ferrograd paired a 1-element target with 1-D inputs and took 3-D inputs
    s1, s2, st = shapes
    _raises_like_torch(
        lambda L: L.nn.functional.cosine_embedding_loss(
            _t(L, np.ones(s1)), _t(L, np.ones(s2)), _t(L, np.ones(st))
        ),
        RuntimeError,
    )


@pytest.mark.parametrize("op", ["triplet_margin_loss", "triplet_margin_with_distance_loss"])
def test_triplet_losses_refuse_bad_margin_and_ranks(op: str) -> None:
    a, p, n = _A, _B, _X
    _raises_like_torch(
        lambda L: getattr(L.nn.functional, op)(_t(L, a), _t(L, p), _t(L, n), margin=0.0),
        ValueError,
        "margin must be greater than 0",
    )
    _raises_like_torch(
        lambda L: getattr(L.nn.functional, op)(_t(L, a), _t(L, p[0]), _t(L, n)), RuntimeError
    )


@pytest.mark.parametrize("var_shape", [(5,), (2, 5), (1, 5, 1)])
def test_gaussian_nll_loss_refuses_var_of_incorrect_size(var_shape: tuple) -> None:
    # ferrograd broadcast (5,) and (1, 5, 1) variances silently
    shape = (3, 5) if len(var_shape) < 3 else (3, 5, 2)
    _raises_like_torch(
        lambda L: L.nn.functional.gaussian_nll_loss(
            _t(L, np.zeros(shape)), _t(L, np.ones(shape)), _t(L, np.ones(var_shape))
        ),
        ValueError,
        "var is of incorrect size",
    )


def test_gaussian_nll_loss_refuses_negative_var() -> None:
    _raises_like_torch(
        lambda L: L.nn.functional.gaussian_nll_loss(
            _t(L, np.zeros(3)), _t(L, np.ones(3)), _t(L, [1.0, -1.0, 1.0])
        ),
        ValueError,
        "var has negative entry",
    )


@pytest.mark.parametrize("var_shape", [(3, 5), (3,), (3, 1), (1, 5), ()])
def test_gaussian_nll_loss_accepted_var_shapes_match_pytorch(var_shape: tuple) -> None:
    mu, y = _R.randn(3, 5), _R.randn(3, 5)
    var = np.abs(_R.randn(*var_shape)) + 0.5
    if var_shape == ():
        _compare(
            lambda F: lambda a, b, **k: F.gaussian_nll_loss(a, b, float(var), **k),
            [mu, y],
            [True, True],
            {},
        )
    else:
        _compare(lambda F: F.gaussian_nll_loss, [mu, y, var], [True, True, True], {})


def test_multi_margin_loss_refuses_bad_targets_and_weights() -> None:
    F_args = [
        ([1, 5, 0], {}),  # a class out of range (an IndexError naming take_along_axis before)
        ([1, 4, 0], {"weight": np.ones(4)}),  # a weight per class of 4, not 5
        ([[1], [4], [0]], {}),  # a 2-D target (taken before)
    ]
    for target, kw in F_args:
        _raises_like_torch(
            lambda L, target=target, kw=kw: L.nn.functional.multi_margin_loss(
                _t(L, _XM), _t(L, target), **{k: _t(L, v) for k, v in kw.items()}
            ),
            RuntimeError,
        )
    # float targets were cast to class indices
    _raises_like_torch(
        lambda L: L.nn.functional.multi_margin_loss(_t(L, _XM), _t(L, [1.0, 4.0, 0.0])),
        RuntimeError,
    )


@pytest.mark.parametrize("x_shape,t_shape", [((), ()), ((), (1,)), ((5,), ()), ((5,), (1,))])
def test_multi_margin_loss_unreduced_shape_of_one_sample(x_shape: tuple, t_shape: tuple) -> None:
    # a 1-element target keeps its axis in PyTorch's unreduced loss (ferrograd dropped it)
    torch = _torch()
    x = _XM[0, : (x_shape[0] if x_shape else 1)].reshape(x_shape)
    t = np.zeros(t_shape, dtype=np.int64)
    want = torch.nn.functional.multi_margin_loss(_t(torch, x), _t(torch, t), reduction="none")
    got = fg.nn.functional.multi_margin_loss(_t(fg, x), _t(fg, t), reduction="none")
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(_np(got), _np(want), rtol=1e-12)


def test_multilabel_margin_loss_target_out_of_range_raises_runtime_error() -> None:
    _raises_like_torch(
        lambda L: L.nn.functional.multilabel_margin_loss(_t(L, _XM), _t(L, np.full((3, 5), 7))),
        RuntimeError,
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda F, L: F.cross_entropy(_t(L, _X), _t(L, _T), reduction="bogus"),
        lambda F, L: F.nll_loss(_t(L, _X), _t(L, _T), reduction="bogus"),
        lambda F, L: F.kl_div(_t(L, _X), _t(L, _X), reduction="bogus"),
        lambda F, L: F.multi_margin_loss(_t(L, _X), _t(L, _T), reduction="bogus"),
        lambda F, L: F.multilabel_margin_loss(
            _t(L, _X), _t(L, np.zeros((5, 4), int)), reduction="bogus"
        ),
        lambda F, L: F.gaussian_nll_loss(_t(L, _X), _t(L, _X), _t(L, _P), reduction="bogus"),
        lambda F, L: F.triplet_margin_loss(_t(L, _A), _t(L, _B), _t(L, _X), reduction="bogus"),
        lambda F, L: F.poisson_nll_loss(_t(L, _A), _t(L, _P), reduction="bogus"),
    ],
)
def test_invalid_reduction_strings_raise_value_error(call: Any) -> None:
    _raises_like_torch(lambda L: call(L.nn.functional, L), ValueError)


@pytest.mark.parametrize("op", ["nll_loss", "cross_entropy"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_byte_class_targets_match_long_ones(op: str, reduction: str) -> None:
    # cross_entropy's fused path refused uint8 labels ("labels must be int64")
    def fn(F: Any) -> Any:
        return lambda x, t, **k: getattr(F, op)(x, t, **k)

    _compare(fn, [_X, _T.astype(np.uint8)], [True, False], {"reduction": reduction})
    got = _np(getattr(fg.nn.functional, op)(fg.tensor(_X), fg.tensor(_T.astype(np.uint8))))
    want = _np(getattr(fg.nn.functional, op)(fg.tensor(_X), fg.tensor(_T)))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_multilabel_soft_margin_loss_promotes_a_wider_float_target() -> None:
    # the float64 target was cast down to the float32 input's dtype (a float32 loss)
    torch = _torch()
    x = _XM.astype(np.float32)
    y = (_XM > 0.3) * 0.9 + 0.05
    outs = []
    for lib in (torch, fg):
        out = lib.nn.functional.multilabel_soft_margin_loss(_t(lib, x), _t(lib, y))
        assert str(out.dtype).endswith("float64")
        outs.append(_np(out))
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-6)
