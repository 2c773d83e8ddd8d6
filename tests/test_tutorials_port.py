"""Programs from the official PyTorch tutorials, run on PyTorch and on ferrograd from the same
data and compared: the tensor tutorial's ``torch.matmul(a, b, out=c)`` / ``torch.mul(..., out=)``
(``out=`` on the matmul family and the remaining elementwise and indexing functions, with
PyTorch's dtype rules); the leaf / non-leaf tutorial's warning on reading ``.grad`` of a
computed tensor that does not retain it; the text classification tutorial's
``nn.EmbeddingBag`` refusing bad offsets and ``per_sample_weights`` with PyTorch's exception
types; the spatial transformer tutorial's ``F.affine_grid`` / ``F.grid_sample`` without
``align_corners`` (False, with PyTorch's warning)."""

from __future__ import annotations

import warnings

import ferrograd as fg
import numpy as np
import pytest


def _lib(name):
    return pytest.importorskip("torch") if name == "torch" else fg


def _np(t):
    return np.asarray(t.detach().cpu().numpy() if hasattr(t, "cpu") else t.detach().numpy())


# ----------------------------------------------------------- 1. tensor tutorial, out=


def _tensor_tutorial(L):
    tensor = L.ones(4, 4, dtype=L.float64)
    tensor[:, 1] = 0
    y1 = tensor @ tensor.T
    y2 = tensor.matmul(tensor.T)
    y3 = L.rand_like(y1)
    r3 = L.matmul(tensor, tensor.T, out=y3)
    z1 = tensor * tensor
    z3 = L.rand_like(tensor)
    r4 = L.mul(tensor, tensor, out=z3)
    return [r3 is y3, r4 is z3, _np(y1), _np(y2), _np(y3), _np(z1), _np(z3)]


def test_tensor_tutorial_matmul_and_mul_into_out_match_torch():
    mine, theirs = _tensor_tutorial(fg), _tensor_tutorial(_lib("torch"))
    assert mine[:2] == theirs[:2] == [True, True]
    for a, b in zip(mine[2:], theirs[2:]):
        np.testing.assert_array_equal(a, b)


_A = np.random.default_rng(0).uniform(0.1, 0.9, (3, 3))
_V = _A[0].copy()
_B3 = np.stack([_A, _A[::-1]])
_OUT_CALLS = {
    "matmul": lambda L: (L.tensor(_A), L.tensor(_A.T)),
    "mm": lambda L: (L.tensor(_A), L.tensor(_A.T)),
    "bmm": lambda L: (L.tensor(_B3), L.tensor(_B3)),
    "mv": lambda L: (L.tensor(_A), L.tensor(_V)),
    "dot": lambda L: (L.tensor(_V), L.tensor(_V)),
    "addmm": lambda L: (L.tensor(_A), L.tensor(_A), L.tensor(_A)),
    "baddbmm": lambda L: (L.tensor(_B3), L.tensor(_B3), L.tensor(_B3)),
    "where": lambda L: (L.tensor(_A) > 0.5, L.tensor(_A), L.tensor(-_A)),
    "outer": lambda L: (L.tensor(_V), L.tensor(_V)),
    "log1p": lambda L: (L.tensor(_A),),
    "rsqrt": lambda L: (L.tensor(_A),),
    "sign": lambda L: (L.tensor(_A - 0.5),),
    "tril": lambda L: (L.tensor(_A),),
    "gather": lambda L: (L.tensor(_A), 1, L.tensor([[0], [2], [1]])),
    "index_select": lambda L: (L.tensor(_A), 0, L.tensor([2, 0])),
    "hypot": lambda L: (L.tensor(_A), L.tensor(_A.T)),
    "lerp": lambda L: (L.tensor(_A), L.tensor(-_A), 0.3),
    "vstack": lambda L: ([L.tensor(_A), L.tensor(_V[None])],),
    "eye": lambda L: (3,),
    "histc": lambda L: (L.tensor(_A), 4),
    "bucketize": lambda L: (L.tensor(_A), L.tensor([0.2, 0.5])),
    "searchsorted": lambda L: (L.tensor([0.2, 0.5]), L.tensor(_A)),
}


def _out_call(L, name, dtype):
    out = L.empty(0, dtype=getattr(L, dtype))
    try:
        res = getattr(L, name)(*_OUT_CALLS[name](L), out=out)
    except (RuntimeError, TypeError) as e:
        return ("raises", e)
    return ("ok", res is out, str(out.dtype).replace("torch.", ""), _np(out))


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
@pytest.mark.parametrize("name", sorted(_OUT_CALLS))
def test_out_keyword_writes_or_refuses_as_torch(name, dtype):
    # the matmul family, where/sign/tril/gather/index_select want out of the result's
    # dtype; the elementwise ones cast into a float out of another width, never into int
    mine = _out_call(fg, name, dtype)
    theirs = _out_call(_lib("torch"), name, dtype)
    assert mine[0] == theirs[0], (mine, theirs)
    if mine[0] == "raises":
        assert isinstance(mine[1], type(theirs[1])) and name in str(mine[1])
    else:
        assert mine[1:3] == theirs[1:3]
        np.testing.assert_allclose(mine[3], theirs[3], rtol=1e-6)


def test_out_keyword_refuses_inputs_that_require_grad():
    w = fg.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        fg.matmul(w, w, out=fg.empty(2, 2))
    with fg.no_grad():
        assert fg.matmul(w, w, out=fg.empty(2, 2)).tolist() == [[2.0, 2.0], [2.0, 2.0]]


# ------------------------------------------------- 2. leaf vs non-leaf tensors, .grad


def _leaf_tutorial(L):
    F = L.nn.functional
    x = L.ones(1, 3, dtype=L.float64)
    W = L.ones(3, 2, dtype=L.float64, requires_grad=True)
    b = L.ones(1, 2, dtype=L.float64, requires_grad=True)
    y = L.ones(1, 2, dtype=L.float64)
    seen = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        z = (x @ W) + b
        loss = F.mse_loss(F.relu(z), y)
        loss.backward()
        seen.append([len(caught), x.grad is None, len(caught), W.grad is None, len(caught)])
        seen.append([z.grad is None, len(caught)])  # the warning: z is computed
        z = (x @ W) + b
        y_pred = F.relu(z)
        loss = F.mse_loss(y_pred, y)
        z.retain_grad()
        y_pred.retain_grad()
        loss.retain_grad()
        W.grad = None
        b.grad = None
        loss.backward()
        grads = [_np(t.grad) for t in (W, b, z, y_pred, loss)]
        seen.append([len(caught), z.retains_grad, W.retains_grad])
        h = W * 3
        (h * b).sum().backward(inputs=[h])  # backward's own read of h.grad: no warning
        seen.append([len(caught), _np(h.grad).tolist()])
    msgs = [str(w.message) for w in caught]
    return seen, grads, [w.category for w in caught], msgs


def test_reading_grad_of_a_computed_tensor_warns_as_torch():
    mine, theirs = _leaf_tutorial(fg), _leaf_tutorial(_lib("torch"))
    assert (
        mine[0]
        == theirs[0]
        == [
            [0, True, 0, False, 0],
            [True, 1],
            [1, True, False],
            [1, [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]],
        ]
    )
    for a, b in zip(mine[1], theirs[1]):
        np.testing.assert_array_equal(a, b)
    assert mine[2] == theirs[2] == [UserWarning]
    assert "not a leaf" in mine[3][0] and "retain_grad" in mine[3][0]
    # no warning where nothing was computed for backward(), nor for a GradManager's tensors
    w = fg.ones(2, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with fg.no_grad():
            assert (w * 2).grad is None
        assert fg.ones(2).grad is None and fg.nn.Parameter(fg.ones(2)).grad is None
        gm = fg.autodiff.GradManager()
        with gm:
            gm.attach([w])
            h = w * 2
            gm.backward(h.sum())
        assert w.grad.tolist() == [2.0, 2.0]


# ------------------------------------------- 3. text classification, nn.EmbeddingBag


_BAG_CALLS = {
    "per_sample_weights with mode mean": lambda L, e: e["mean"](
        L.tensor([1, 2, 3]), L.tensor([0, 2]), per_sample_weights=L.tensor([1.0, 2.0, 3.0])
    ),
    "per_sample_weights with mode max": lambda L, e: e["max"](
        L.tensor([1, 2, 3]), L.tensor([0, 2]), per_sample_weights=L.tensor([1.0, 2.0, 3.0])
    ),
    "offsets[0] not 0": lambda L, e: e["sum"](L.tensor([1, 2, 3]), L.tensor([1, 2])),
    "offsets past the input": lambda L, e: e["sum"](L.tensor([1, 2, 3]), L.tensor([0, 5])),
}


@pytest.mark.parametrize("case", sorted(_BAG_CALLS))
def test_embedding_bag_refuses_bad_bags_with_torchs_exception_type(case):
    torch = _lib("torch")
    raised = {}
    for L in (torch, fg):
        bags = {m: L.nn.EmbeddingBag(10, 3, mode=m) for m in ("sum", "mean", "max")}
        with pytest.raises(Exception) as info:
            _BAG_CALLS[case](L, bags)
        raised[L.__name__] = info.value
    assert isinstance(raised["ferrograd"], type(raised["torch"]))
    assert "embedding_bag" in str(raised["ferrograd"])


# ----------------------------------------- 4. spatial transformer, align_corners unset


def _stn_sampling(L, **kw):
    F = L.nn.functional
    theta = L.tensor([[[0.9, 0.2, 0.1], [-0.1, 1.1, 0.0]]], dtype=L.float64)
    x = L.tensor(np.arange(30.0).reshape(1, 1, 5, 6), requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grid = F.affine_grid(theta, x.size(), **kw)
        y = F.grid_sample(x, grid, **kw)
    (y * y).sum().backward()
    return _np(y), _np(x.grad), [(w.category, "align_corners" in str(w.message)) for w in caught]


def test_stn_sampling_without_align_corners_warns_and_means_false_as_torch():
    torch = _lib("torch")
    for kw in ({}, {"align_corners": False}, {"align_corners": True}):
        mine, theirs = _stn_sampling(fg, **kw), _stn_sampling(torch, **kw)
        np.testing.assert_allclose(mine[0], theirs[0], rtol=1e-12)
        np.testing.assert_allclose(mine[1], theirs[1], rtol=1e-12)
        assert mine[2] == theirs[2] == ([(UserWarning, True)] * 2 if not kw else [])
