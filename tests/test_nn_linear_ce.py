"""``nn.LinearCrossEntropyLoss`` and ``F.linear_cross_entropy`` against PyTorch's: losses and
float64 gradients from the same weights, K-dimensional outputs, class weights,
ignore_index, label smoothing, probability targets, and the argument checks."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest


def _torch():
    torch = pytest.importorskip("torch")
    if not hasattr(torch.nn, "LinearCrossEntropyLoss"):
        pytest.skip("this PyTorch has no LinearCrossEntropyLoss")
    return torch


@pytest.mark.parametrize(
    "out_features, bias, kw",
    [
        ((), False, {}),
        ((3,), True, {"reduction": "none"}),
        ((2, 2), False, {"reduction": "sum"}),
        ((), True, {"ignore_index": 1, "label_smoothing": 0.1}),
        ((), False, {"weight": True}),
    ],
)
def test_module_matches_torch(out_features, bias, kw):
    torch = _torch()
    rng = np.random.default_rng(len(out_features) + 3 * bias)
    x0 = rng.standard_normal((4, 5))
    t0 = rng.integers(0, 6, (4, *out_features))
    cw = np.arange(1.0, 7.0)
    got = []
    for lib in (torch, fg):
        args = dict(kw)
        if args.get("weight"):
            args["weight"] = lib.tensor(cw)
        m = lib.nn.LinearCrossEntropyLoss(
            5, 6, out_features=out_features, bias=bias, dtype=lib.float64, **args
        )
        if lib is torch:
            state = {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}
        else:
            m.load_state_dict({k: fg.tensor(v) for k, v in state.items()})
        x = lib.tensor(x0, requires_grad=True)
        loss = m(x, lib.tensor(t0))
        loss.sum().backward()
        grads = [x.grad.numpy()] + [p.grad.numpy() for p in m.linear.parameters()]
        got.append([np.asarray(loss.detach().numpy())] + grads)
    for a, b in zip(*got):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)


def test_functional_with_probability_targets_and_unbatched_input_matches_torch():
    torch = _torch()
    rng = np.random.default_rng(7)
    w0, b0 = rng.standard_normal((4, 3)), rng.standard_normal(4)
    x0 = rng.standard_normal((2, 3))
    p0 = rng.dirichlet(np.ones(4), size=2)
    for x_, t_ in ((x0, p0), (x0[0], p0[0]), (x0, np.array([3, 0]))):
        res = []
        for lib in (torch, fg):
            w = lib.tensor(w0, requires_grad=True)
            out = lib.nn.functional.linear_cross_entropy(
                lib.tensor(x_), w, lib.tensor(t_), linear_bias=lib.tensor(b0)
            )
            out.backward()
            res.append((float(out.detach()), w.grad.numpy()))
        assert res[1][0] == pytest.approx(res[0][0], rel=1e-12)
        np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-12, atol=1e-14)


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(8)
    x = fg.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    w = fg.tensor(rng.standard_normal((5, 2, 4)), requires_grad=True)
    b = fg.tensor(rng.standard_normal((5, 2)), requires_grad=True)
    t = fg.tensor(rng.integers(0, 5, (3, 2)))

    def f(x, w, b):
        return fg.nn.functional.linear_cross_entropy(
            x, w, t, linear_bias=b, label_smoothing=0.2, reduction="sum"
        )

    assert fg.autograd.gradcheck(f, (x, w, b))


def test_options_are_accepted_and_the_result_is_the_reference_one():
    rng = np.random.default_rng(9)
    x, w = fg.tensor(rng.standard_normal((6, 3))), fg.tensor(rng.standard_normal((4, 3)))
    t = fg.tensor(rng.integers(0, 4, 6))
    F = fg.nn.functional
    opts = fg.nn.LinearCrossEntropyOptions(batch_chunk_size=2)
    assert float(F.linear_cross_entropy(x, w, t, options=opts)) == float(
        F.linear_cross_entropy(x, w, t)
    )
    with pytest.raises(ValueError, match="batch_chunk_size"):
        fg.nn.LinearCrossEntropyOptions(batch_chunk_size=0)
    with pytest.raises(TypeError, match="options"):
        F.linear_cross_entropy(x, w, t, options={"batch_chunk_size": 2})


def test_bad_arguments():
    with pytest.raises(RuntimeError, match="weight shape"):
        fg.nn.LinearCrossEntropyLoss(3, 4, weight=fg.ones(3))
    with pytest.raises(RuntimeError, match="label_smoothing"):
        fg.nn.LinearCrossEntropyLoss(3, 4, label_smoothing=1.5)
    F = fg.nn.functional
    with pytest.raises(ValueError, match="in_features"):
        F.linear_cross_entropy(fg.ones(2, 3), fg.ones(4, 5), fg.tensor([0, 1]))
