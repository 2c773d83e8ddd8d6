"""torch.autograd.functional, gradcheck/gradgradcheck and torch.func transforms against
PyTorch's (float64)."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.autograd.functional as TF
import torch.func as tfunc
from ferrograd.autograd.functional import hessian, hvp, jacobian, jvp, vhp, vjp

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4))
W = RNG.standard_normal((4, 2))
V = RNG.standard_normal(3)


def _same(a, b):
    if isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b)
        for p, q in zip(a, b):
            _same(p, q)
        return
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)


def _mlp(lib):
    return lambda x, w: (lib.tanh(x @ w) ** 2).sum(-1)


def _scalar(lib):
    return lambda x: (x.sin() * x.exp()).sum()


def F(a):
    return fg.tensor(a)


def T(a):
    return torch.tensor(a)


def test_autograd_functional_matches_torch():
    _same(jacobian(_mlp(fg), (F(X), F(W))), TF.jacobian(_mlp(torch), (T(X), T(W))))
    _same(jacobian(_scalar(fg), F(X)), TF.jacobian(_scalar(torch), T(X)))
    _same(hessian(_scalar(fg), F(X)), TF.hessian(_scalar(torch), T(X)))

    def pair(a, b):
        return (a * b).sin().sum()

    _same(hessian(pair, (F(X), F(X))), TF.hessian(pair, (T(X), T(X))))
    _same(vjp(_mlp(fg), (F(X), F(W)), F(V)), TF.vjp(_mlp(torch), (T(X), T(W)), T(V)))
    _same(
        jvp(_mlp(fg), (F(X), F(W)), (F(X), F(W))),
        TF.jvp(_mlp(torch), (T(X), T(W)), (T(X), T(W))),
    )
    _same(hvp(_scalar(fg), F(X), F(X)), TF.hvp(_scalar(torch), T(X), T(X)))
    _same(vhp(_scalar(fg), F(X), F(X)), TF.vhp(_scalar(torch), T(X), T(X)))
    with pytest.raises(RuntimeError, match="give v"):
        vjp(_mlp(fg), (F(X), F(W)))


def test_func_transforms_match_torch():
    _same(fg.func.grad(_scalar(fg))(F(X)), tfunc.grad(_scalar(torch))(T(X)))

    def prod(a, b):
        return (a * b).sum() ** 2

    _same(
        fg.func.grad(prod, argnums=(0, 1))(F(X), F(X)),
        tfunc.grad(prod, argnums=(0, 1))(T(X), T(X)),
    )

    def cube(a):
        return (a**3).sum()

    _same(fg.func.vmap(fg.func.grad(cube))(F(X)), tfunc.vmap(tfunc.grad(cube))(T(X)))
    _same(fg.func.jacrev(lambda a: a.sin())(F(X[0])), tfunc.jacrev(lambda a: a.sin())(T(X[0])))

    def mul(a, b):
        return a * b

    _same(
        fg.func.jacfwd(mul, argnums=1)(F(X[0]), F(X[1])),
        tfunc.jacfwd(mul, argnums=1)(T(X[0]), T(X[1])),
    )

    def sinx(a):
        return (a.sin() * a).sum()

    _same(fg.func.hessian(sinx)(F(X[0])), tfunc.hessian(sinx)(T(X[0])))
    _same(
        fg.func.jvp(lambda a: a.exp(), (F(X),), (F(X),)),
        tfunc.jvp(lambda a: a.exp(), (T(X),), (T(X),)),
    )
    _out, fn = fg.func.vjp(lambda a: a.exp() * 2, F(X))
    _tout, tfn = tfunc.vjp(lambda a: a.exp() * 2, T(X))
    _same(fn(F(X)), tfn(T(X)))

    def quartic(a):
        return (a**4).sum()

    x = np.array(1.5)
    _same(fg.func.grad(fg.func.grad(quartic))(F(x)), tfunc.grad(tfunc.grad(quartic))(T(x)))


def test_functional_call_and_per_sample_gradients():
    m = fg.nn.Linear(4, 2, dtype="float64")
    tm = torch.nn.Linear(4, 2).double()
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()})
    before = m.weight.numpy().copy()
    params = {k: v.detach() for k, v in m.named_parameters()}
    tparams = {k: v.detach() for k, v in tm.named_parameters()}

    def loss(lib, mod):
        def f(p, xb):
            return (lib.func.functional_call(mod, p, (xb.unsqueeze(0),)) ** 2).sum()

        return f

    per_sample = fg.func.vmap(fg.func.grad(loss(fg, m)), in_dims=(None, 0))(params, F(X))
    want = tfunc.vmap(tfunc.grad(loss(torch, tm)), in_dims=(None, 0))(tparams, T(X))
    for k in want:
        _same(per_sample[k], want[k])
    np.testing.assert_array_equal(m.weight.numpy(), before)  # the module is unchanged
    ones = {"weight": fg.ones(2, 4, dtype="float64"), "bias": fg.zeros(2, dtype="float64")}
    np.testing.assert_allclose(
        fg.func.functional_call(m, ones, (F(X),)).numpy(), X.sum(1, keepdims=True) * [1, 1]
    )


def test_gradcheck_accepts_right_gradients_and_catches_wrong_ones():
    a = fg.tensor(X, requires_grad=True)
    b = fg.tensor(X[::-1].copy(), requires_grad=True)
    assert fg.autograd.gradcheck(lambda p, q: (p * q).sin(), (a, b))
    assert fg.autograd.gradgradcheck(lambda p: (p**3).sin(), (a,))

    class Wrong(fg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x  # should be 2 x

    with pytest.raises(fg.autograd.GradcheckError, match="mismatch"):
        fg.autograd.gradcheck(Wrong.apply, (a,))
    assert fg.autograd.gradcheck(Wrong.apply, (a,), raise_exception=False) is False
