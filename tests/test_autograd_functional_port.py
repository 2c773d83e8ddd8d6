"""PyTorch's ``test/autograd/test_functional.py`` (``torch.autograd.functional``: vjp, jvp,
jacobian, hessian, vhp, hvp) and the custom ``autograd.Function`` tests of
``test/test_autograd.py``, ported.

Each body runs on torch and on ferrograd from the same numpy data (``Env``); the ferrograd
run also compares the values it returns with torch's (float64 where gradients are checked,
with ``gradcheck``/``gradgradcheck`` against finite differences)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import ferrograd as fg
import numpy as np
import pytest

LIBS = ["torch", "ferrograd"]


class Env:
    """One library's spelling of what a ported test uses; random data comes from a seeded
    numpy generator, so torch and ferrograd see the same numbers."""

    def __init__(self, name: str, seed: int = 0) -> None:
        if name == "torch":
            self.lib: Any = pytest.importorskip("torch")
        else:
            self.lib = fg
        self.name = name
        self.F = self.lib.autograd.functional
        self.Function = self.lib.autograd.Function
        self.gradcheck = self.lib.autograd.gradcheck
        self.gradgradcheck = self.lib.autograd.gradgradcheck
        self.rng = np.random.default_rng(seed)
        self.double = self.lib.float64

    def _make(self, data: np.ndarray, dtype: Any, requires_grad: bool) -> Any:
        t = self.lib.tensor(data, dtype=self.lib.float32 if dtype is None else dtype)
        return t.requires_grad_() if requires_grad else t

    @staticmethod
    def _shape(shape: tuple) -> tuple:
        return tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], list) else shape

    def rand(self, *shape: Any, dtype: Any = None, requires_grad: bool = False) -> Any:
        return self._make(self.rng.random(self._shape(shape)), dtype, requires_grad)

    def randn(self, *shape: Any, dtype: Any = None, requires_grad: bool = False) -> Any:
        return self._make(self.rng.standard_normal(self._shape(shape)), dtype, requires_grad)

    def ones(self, *shape: Any, dtype: Any = None, requires_grad: bool = False) -> Any:
        return self._make(np.ones(self._shape(shape)), dtype, requires_grad)

    def zeros(self, *shape: Any, dtype: Any = None, requires_grad: bool = False) -> Any:
        return self._make(np.zeros(self._shape(shape)), dtype, requires_grad)

    def tensor(self, data: Any, dtype: Any = None, requires_grad: bool = False) -> Any:
        return self._make(np.asarray(data), dtype, requires_grad)

    def is_tensor(self, x: Any) -> bool:
        return isinstance(x, self.lib.Tensor)


def _flat(x: Any) -> list[np.ndarray]:
    if isinstance(x, (tuple, list)):
        return [a for item in x for a in _flat(item)]
    if hasattr(x, "detach"):
        return [np.asarray(x.detach().numpy(), dtype=np.float64)]
    return [np.asarray(x, dtype=np.float64)]


def run(lib: str, body: Callable[[Env], Any], rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Runs ``body`` on ``lib``; on ferrograd, compares what it returns with torch's run."""
    got = body(Env(lib))
    if lib == "torch" or got is None:
        return
    pytest.importorskip("torch")
    want = body(Env("torch"))
    g, w = _flat(got), _flat(want)
    assert len(g) == len(w)
    for a, b in zip(g, w):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def same_struct(e: Env, res: Any, base: Any) -> None:
    if e.is_tensor(base):
        assert e.is_tensor(res)
        assert tuple(res.shape) == tuple(base.shape)
    else:
        assert isinstance(base, tuple) and isinstance(res, tuple)
        assert len(res) == len(base)
        for r, b in zip(res, base):
            assert e.is_tensor(r) and e.is_tensor(b)
            assert tuple(r.shape) == tuple(b.shape)


def interleaved_struct(e: Env, res: Any, base1: Any, base2: Any) -> None:
    def sh(t: Any) -> tuple:
        return tuple(t.shape)

    t1, t2 = e.is_tensor(base1), e.is_tensor(base2)
    if t1 and t2:
        assert e.is_tensor(res) and sh(res) == sh(base1) + sh(base2)
    elif t2:
        assert isinstance(res, tuple) and len(res) == len(base1)
        for r, b1 in zip(res, base1):
            assert e.is_tensor(r) and sh(r) == sh(b1) + sh(base2)
    elif t1:
        assert isinstance(res, tuple) and len(res) == len(base2)
        for r, b2 in zip(res, base2):
            assert e.is_tensor(r) and sh(r) == sh(base1) + sh(b2)
    else:
        assert isinstance(res, tuple) and len(res) == len(base1)
        for r, b1 in zip(res, base1):
            assert isinstance(r, tuple) and len(r) == len(base2)
            for rr, b2 in zip(r, base2):
                assert e.is_tensor(rr) and sh(rr) == sh(b1) + sh(b2)


def zero(t: Any) -> bool:
    return float(t.detach().abs().sum()) == 0.0


def nonzero(t: Any) -> bool:
    return float(t.detach().abs().sum()) != 0.0


def narrow3(a: Any) -> Any:
    return 3 * a.narrow(0, 0, 3)


def with_str(a: Any) -> Any:
    return 3 * a.narrow(0, 0, 3), "bar"


def detached(a: Any) -> Any:
    return a.detach()


def disconnected(a: Any) -> Any:
    # requires grad, but is not connected to the input
    return a.long().float().requires_grad_().clone()


# --------------------------------------------------------------------------------- vjp / jvp


@pytest.mark.parametrize("lib", LIBS)
def test_vjp_err_check(lib):
    def body(e: Env) -> Any:
        inp, v = e.rand(4), e.ones(3)
        with pytest.raises(TypeError, match="The inputs given to vjp must be either a Tensor"):
            e.F.vjp(narrow3, (inp, 2), v)
        with pytest.raises(
            TypeError, match="The outputs of the user-provided function given to vjp must"
        ):
            e.F.vjp(with_str, inp, v)
        with pytest.raises(
            RuntimeError,
            match="The vector v can only be None if the user-provided function returns",
        ):
            e.F.vjp(narrow3, inp)
        with pytest.raises(RuntimeError, match="The given v should contain a single Tensor."):
            e.F.vjp(narrow3, inp, (e.lib.ones_like(inp), e.lib.ones_like(inp)))
        with pytest.raises(RuntimeError, match=r"v has invalid size: should be (torch\.)?Size"):
            e.F.vjp(narrow3, inp, v[:2])
        res = e.F.vjp(narrow3, inp, v)[1]
        same_struct(e, res, inp)
        return res

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_vjp_err_check_strict(lib):
    def body(e: Env) -> Any:
        inp, v = e.rand(4), e.rand(4)
        with pytest.raises(
            RuntimeError, match="Output 0 of the user-provided function does not require"
        ):
            e.F.vjp(detached, inp, v, strict=True)
        res = e.F.vjp(detached, inp, v, strict=False)
        same_struct(e, res[1], inp)
        assert zero(res[1])
        with pytest.raises(
            RuntimeError, match="The output of the user-provided function is independent of input 0"
        ):
            e.F.vjp(disconnected, inp, v, strict=True)
        res = e.F.vjp(disconnected, inp, v, strict=False)
        same_struct(e, res[1], inp)
        assert zero(res[1])

        inp.requires_grad_()
        with pytest.raises(
            RuntimeError, match="jacobian of the user-provided function is independent of input 0."
        ):
            e.F.vjp(lambda a: a.clone(), inp, v, create_graph=True, strict=True)
        res = e.F.vjp(lambda a: a.clone(), inp, v, create_graph=True, strict=False)
        same_struct(e, res[1], inp)
        np.testing.assert_allclose(res[1].detach().numpy(), v.numpy())
        return res

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_vjp_no_grad(lib):
    def body(e: Env) -> Any:
        inputs, v = e.rand(4, 4), e.ones(4)
        with e.lib.no_grad():
            res = e.F.vjp(lambda x: x.sum(dim=1), inputs, v)
        assert res[0].grad_fn is None and res[1].grad_fn is None
        assert nonzero(res[1])
        inputs.requires_grad_()
        v.requires_grad_()
        with e.lib.no_grad():
            res2 = e.F.vjp(lambda x: x.sum(dim=1), inputs, v, create_graph=True)
        assert res2[0].grad_fn is not None and res2[1].grad_fn is not None
        assert nonzero(res2[1])
        return res, res2

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_vjp_output(lib):
    def body(e: Env) -> Any:
        inputs, v = e.rand(4, 4), e.ones(4)
        res = e.F.vjp(lambda x: x.sum(dim=1), inputs, v)
        same_struct(e, res[1], inputs)
        assert res[0].grad_fn is None and res[1].grad_fn is None

        inputs2 = (e.rand(2), e.rand(2))
        out, vjp_val = e.F.vjp(lambda x, y: 2 * x + 3 * y, inputs2, e.ones(2))
        same_struct(e, vjp_val, inputs2)
        assert out.grad_fn is None
        assert vjp_val[0].grad_fn is None and vjp_val[1].grad_fn is None

        inputs3 = (e.rand(2), e.rand(2))
        v3 = (e.tensor([1.0, 0.0]), e.tensor([1.0, 0.0]))
        out3, vjp_val3 = e.F.vjp(lambda x, y: (2 * x + 3 * y, x + y), inputs3, v3)
        same_struct(e, vjp_val3, inputs3)
        assert all(t.grad_fn is None for t in (*out3, *vjp_val3))
        return res, out, vjp_val, out3, vjp_val3

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_vjp_scalar(lib):
    def body(e: Env) -> Any:
        inputs, v = e.rand(4, 4), e.ones([])
        res = e.F.vjp(lambda x: x.sum(), inputs, v)
        same_struct(e, res[0], v)
        same_struct(e, res[1], inputs)
        res2 = e.F.vjp(lambda x: x.sum(), inputs)
        same_struct(e, res2[0], v)
        same_struct(e, res2[1], inputs)

        inputs, v = e.rand([]), e.ones(4)
        res3 = e.F.vjp(lambda x: x.unsqueeze(0).repeat(4), inputs, v)
        same_struct(e, res3[0], v)
        same_struct(e, res3[1], inputs)
        return res, res2, res3

    run(lib, body)


def _adder_prod(x: Any, y: Any) -> Any:
    return 2 * x + 3 * y, x * y


@pytest.mark.parametrize("api", ["vjp", "jvp"])
@pytest.mark.parametrize("lib", LIBS)
def test_vjp_jvp_create_graph(lib, api):
    def body(e: Env) -> Any:
        fn = getattr(e.F, api)

        def reducer(x: Any) -> Any:
            return x.sum(dim=1)

        inputs = e.rand(2, 2, dtype=e.double).requires_grad_()
        v = e.ones(2, dtype=e.double) if api == "vjp" else e.ones(2, 2, dtype=e.double)
        v.requires_grad_()
        res = fn(reducer, inputs, v, create_graph=True)
        same_struct(e, res[1], inputs if api == "vjp" else res[0])
        assert res[0].grad_fn is not None and res[1].grad_fn is not None
        assert e.gradcheck(lambda inp, v: fn(reducer, inp, v, create_graph=True), (inputs, v))
        assert e.gradgradcheck(lambda inp, v: fn(reducer, inp, v, create_graph=True), (inputs, v))

        inputs2 = (
            e.rand(2, dtype=e.double, requires_grad=True),
            e.rand(2, dtype=e.double, requires_grad=True),
        )
        v2 = (
            e.tensor([1.0, 0.0], dtype=e.double, requires_grad=True),
            e.tensor([1.0, 0.0], dtype=e.double, requires_grad=True),
        )

        def second(*args: Any) -> Any:
            return fn(_adder_prod, args[:2], args[2:], create_graph=True)[1]

        assert e.gradcheck(second, inputs2 + v2)
        assert e.gradgradcheck(second, inputs2 + v2)

        def foo(*args: Any) -> Any:
            x, y = args[:2]
            x = x.cos()
            val, grad = fn(_adder_prod, (x, y), args[2:], create_graph=True)
            return val[0].exp() + val[1].exp() + grad[0].exp() + grad[1].exp() + x.exp() + y.exp()

        assert e.gradcheck(foo, inputs2 + v2)
        assert e.gradgradcheck(foo, inputs2 + v2)
        return res, second(*inputs2, *v2), foo(*inputs2, *v2)

    run(lib, body, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("lib", LIBS)
def test_jvp_err_check(lib):
    def body(e: Env) -> Any:
        inp, v = e.rand(4), e.rand(4)
        with pytest.raises(TypeError, match="The inputs given to jvp must be either a Tensor"):
            e.F.jvp(narrow3, (inp, 2), v)
        with pytest.raises(
            TypeError, match="The outputs of the user-provided function given to jvp must"
        ):
            e.F.jvp(with_str, inp, v)
        with pytest.raises(
            RuntimeError,
            match="The vector v can only be None if the input to the user-provided function",
        ):
            e.F.jvp(narrow3, inp)
        with pytest.raises(RuntimeError, match="The given v should contain a single Tensor."):
            e.F.jvp(narrow3, inp, (v, v))
        with pytest.raises(RuntimeError, match=r"v has invalid size: should be (torch\.)?Size"):
            e.F.jvp(narrow3, inp, v[:2])
        res = e.F.jvp(narrow3, inp, v)[1]
        same_struct(e, res, narrow3(inp))
        return res

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_jvp_err_check_strict(lib):
    def body(e: Env) -> Any:
        inp, v = e.rand(4), e.rand(4)
        with pytest.raises(
            RuntimeError, match="Output 0 of the user-provided function does not require"
        ):
            e.F.jvp(detached, inp, v, strict=True)
        res = e.F.jvp(detached, inp, v, strict=False)
        same_struct(e, res[1], res[0])
        assert zero(res[1])
        with pytest.raises(
            RuntimeError, match="The output of the user-provided function is independent of input 0"
        ):
            e.F.jvp(disconnected, inp, v, strict=True)
        res = e.F.jvp(disconnected, inp, v, strict=False)
        same_struct(e, res[1], res[0])
        assert zero(res[1])

        inp.requires_grad_()
        with pytest.raises(
            RuntimeError, match="jacobian of the user-provided function is independent of input 0."
        ):
            e.F.jvp(lambda a: a.clone(), inp, v, create_graph=True, strict=True)
        res = e.F.jvp(lambda a: a.clone(), inp, v, create_graph=True, strict=False)
        same_struct(e, res[1], inp)
        np.testing.assert_allclose(res[1].detach().numpy(), v.numpy())
        return res

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_jvp_no_grad(lib):
    def body(e: Env) -> Any:
        inputs, v = e.rand(4, 4), e.ones(4, 4)
        with e.lib.no_grad():
            res = e.F.jvp(lambda x: x.sum(dim=1), inputs, v)
        assert res[0].grad_fn is None and res[1].grad_fn is None
        assert nonzero(res[1])
        inputs.requires_grad_()
        v.requires_grad_()
        with e.lib.no_grad():
            res2 = e.F.jvp(lambda x: x.sum(dim=1), inputs, v, create_graph=True)
        assert res2[0].grad_fn is not None and res2[1].grad_fn is not None
        assert nonzero(res2[1])
        return res, res2

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_jvp_output(lib):
    def body(e: Env) -> Any:
        inputs, v = e.rand(4, 4), e.ones(4, 4)
        res = e.F.jvp(lambda x: x.sum(dim=1), inputs, v)
        same_struct(e, res[1], res[0])
        assert res[0].grad_fn is None and res[1].grad_fn is None

        inputs2 = (e.rand(2), e.rand(2))
        out, jvp_val = e.F.jvp(lambda x, y: 2 * x + 3 * y, inputs2, (e.ones(2), e.ones(2)))
        same_struct(e, jvp_val, out)
        assert out.grad_fn is None and jvp_val.grad_fn is None

        inputs3 = (e.rand(2), e.rand(2))
        v3 = (e.tensor([1.0, 0.0]), e.tensor([1.0, 0.0]))
        out3, jvp_val3 = e.F.jvp(lambda x, y: (2 * x + 3 * y, x + y), inputs3, v3)
        same_struct(e, jvp_val3, out3)
        assert all(t.grad_fn is None for t in (*out3, *jvp_val3))
        return res, out, jvp_val, out3, jvp_val3

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_jvp_scalar(lib):
    def body(e: Env) -> Any:
        inputs, v = e.rand(4, 4), e.ones(4, 4)
        res = e.F.jvp(lambda x: x.sum(), inputs, v)
        same_struct(e, res[0], e.zeros([]))
        same_struct(e, res[1], res[0])

        def expander(x: Any) -> Any:
            return x.unsqueeze(0).repeat(4)

        inputs, v = e.rand([]), e.ones([])
        res2 = e.F.jvp(expander, inputs, v)
        same_struct(e, res2[0], e.zeros(4))
        same_struct(e, res2[1], res2[0])
        res3 = e.F.jvp(expander, inputs)
        same_struct(e, res3[0], e.zeros(4))
        same_struct(e, res3[1], res3[0])
        return res, res2, res3

    run(lib, body)


# ---------------------------------------------------------------------------------- jacobian


@pytest.mark.parametrize("api", ["jacobian", "hessian"])
@pytest.mark.parametrize("lib", LIBS)
def test_vectorize_raises_no_warnings(lib, api):
    def body(e: Env) -> Any:
        x = e.randn(3)
        with warnings.catch_warnings(record=True) as wa:
            warnings.simplefilter("always")
            res = getattr(e.F, api)(lambda a: (a**2).sum(), x, vectorize=True)
        assert len(wa) == 0
        return res

    run(lib, body)


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("lib", LIBS)
def test_jacobian_err_check(lib, vectorize):
    def body(e: Env) -> Any:
        inp = e.rand(4)
        with pytest.raises(TypeError, match="The inputs given to jacobian must be either a Tensor"):
            e.F.jacobian(narrow3, (inp, 2), vectorize=vectorize)
        with pytest.raises(
            TypeError, match="The outputs of the user-provided function given to jacobian must"
        ):
            e.F.jacobian(with_str, inp, vectorize=vectorize)
        res = e.F.jacobian(narrow3, inp, vectorize=vectorize)
        interleaved_struct(e, res, narrow3(inp), inp)

        def foo(a: Any, b: Any) -> Any:
            return b, 3 * a.narrow(0, 0, 3)

        inp2 = (e.rand(4), e.rand(5))
        res2 = e.F.jacobian(foo, inp2, vectorize=vectorize)
        interleaved_struct(e, res2, foo(*inp2), inp2)
        return res, res2

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_jacobian_err_check_strict(lib):
    def body(e: Env) -> Any:
        inp = e.rand(4)
        with pytest.raises(
            RuntimeError, match="Output 0 of the user-provided function does not require"
        ):
            e.F.jacobian(detached, inp, strict=True)
        res = e.F.jacobian(detached, inp, strict=False)
        interleaved_struct(e, res, detached(inp), inp)
        assert zero(res)
        with pytest.raises(
            RuntimeError, match="Output 0 of the user-provided function is independent of input 0."
        ):
            e.F.jacobian(disconnected, inp, strict=True)
        res = e.F.jacobian(disconnected, inp, strict=False)
        interleaved_struct(e, res, inp, inp)
        assert zero(res)

        inp.requires_grad_()
        with pytest.raises(
            RuntimeError, match="jacobian of the user-provided function is independent of input 0."
        ):
            e.F.jacobian(lambda a: a.clone(), inp, create_graph=True, strict=True)
        res = e.F.jacobian(lambda a: a.clone(), inp, create_graph=True, strict=False)
        interleaved_struct(e, res, inp, inp)
        np.testing.assert_allclose(res.detach().numpy(), np.eye(4))
        return res

    run(lib, body)


@pytest.mark.parametrize("api", ["jacobian", "hessian"])
@pytest.mark.parametrize("lib", LIBS)
def test_strict_vectorize_not_supported_together(lib, api):
    e = Env(lib)
    with pytest.raises(RuntimeError, match="not supported together"):
        getattr(e.F, api)(lambda x: (x**3).sum(), e.rand(4), strict=True, vectorize=True)


@pytest.mark.parametrize("lib", LIBS)
def test_jacobian_no_grad(lib):
    def body(e: Env) -> Any:
        def exp_reducer(x: Any) -> Any:
            return x.exp().sum(dim=1)

        inputs = e.rand(4, 4)
        with e.lib.no_grad():
            res = e.F.jacobian(exp_reducer, inputs)
        assert res.grad_fn is None
        assert nonzero(res)
        with e.lib.no_grad():
            res2 = e.F.jacobian(exp_reducer, inputs, create_graph=True)
        assert res2.grad_fn is not None
        assert nonzero(res2)
        return res, res2

    run(lib, body)


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("lib", LIBS)
def test_jacobian_output(lib, vectorize):
    def body(e: Env) -> Any:
        def exp_reducer(x: Any) -> Any:
            return x.exp().sum(dim=1)

        inputs = e.rand(4, 4)
        res = e.F.jacobian(exp_reducer, inputs, vectorize=vectorize)
        interleaved_struct(e, res, exp_reducer(inputs), inputs)
        assert res.grad_fn is None

        inputs2 = e.rand(4)
        res2 = e.F.jacobian(lambda x: x.clone(), inputs2, vectorize=vectorize)
        interleaved_struct(e, res2, inputs2, inputs2)
        assert res2.grad_fn is None
        np.testing.assert_allclose(res2.numpy(), np.eye(4))

        def add_exp_reducer(x: Any, y: Any) -> Any:
            return (x + y.exp()).sum(dim=1)

        inputs3 = (e.rand(4, 4), e.rand(4, 4))
        res3 = e.F.jacobian(add_exp_reducer, inputs3, vectorize=vectorize)
        interleaved_struct(e, res3, add_exp_reducer(*inputs3), inputs3)
        assert res3[0].grad_fn is None and res3[1].grad_fn is None
        return res, res2, res3

    run(lib, body)


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("lib", LIBS)
def test_jacobian_scalar(lib, vectorize):
    def body(e: Env) -> Any:
        inputs = e.rand(4, 4)
        res = e.F.jacobian(lambda x: x.sum(), inputs, vectorize=vectorize)
        same_struct(e, res, inputs)
        inputs2 = e.rand([])
        res2 = e.F.jacobian(lambda x: x.unsqueeze(0).repeat(4), inputs2, vectorize=vectorize)
        same_struct(e, res2, e.zeros(4))
        return res, res2

    run(lib, body)


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("lib", LIBS)
def test_jacobian_create_graph(lib, vectorize):
    def body(e: Env) -> Any:
        def exp_reducer(x: Any) -> Any:
            return x.exp().sum(dim=1)

        inputs = e.rand(4, 4, dtype=e.double, requires_grad=True)
        res = e.F.jacobian(exp_reducer, inputs, create_graph=True, vectorize=vectorize)
        interleaved_struct(e, res, exp_reducer(inputs), inputs)
        assert res.grad_fn is not None

        def jac1(inp: Any) -> Any:
            return e.F.jacobian(exp_reducer, inp, create_graph=True, vectorize=vectorize)

        assert e.gradcheck(jac1, inputs)
        assert e.gradgradcheck(jac1, inputs)

        def add_exp_reducer(x: Any, y: Any) -> Any:
            return (x + y).exp().sum(dim=1)

        inputs2 = (
            e.rand(4, 4, dtype=e.double, requires_grad=True),
            e.rand(4, 4, dtype=e.double, requires_grad=True),
        )
        res2 = e.F.jacobian(add_exp_reducer, inputs2, create_graph=True, vectorize=vectorize)
        interleaved_struct(e, res2, add_exp_reducer(*inputs2), inputs2)
        assert res2[0].grad_fn is not None and res2[1].grad_fn is not None

        def jac2(*inp: Any) -> Any:
            return e.F.jacobian(add_exp_reducer, inp, create_graph=True, vectorize=vectorize)

        assert e.gradcheck(jac2, inputs2)
        assert e.gradgradcheck(jac2, inputs2)

        def foo(x: Any, y: Any) -> Any:
            x = x.cos()
            val, jac = e.F.jacobian(add_exp_reducer, (x, y), create_graph=True, vectorize=vectorize)
            r = val[0].exp().sum() + val[1].exp().sum() + jac[0].exp().sum()
            return r + jac[1].exp().sum() + x.exp().sum() + y.exp().sum()

        assert e.gradcheck(foo, inputs2)
        assert e.gradgradcheck(foo, inputs2)
        return res, res2, foo(*inputs2)

    run(lib, body, rtol=1e-10, atol=1e-12)


def _jacobian_vectorize_case(e: Env, case: str) -> tuple[Callable, Any, bool]:
    lib = e.lib
    if case == "simple":
        return (lambda x: 3 * x**2), e.randn(2, 3, 5), True
    if case == "multi_input":
        return (lambda x, y: (x.cos() * x) @ y.sin()), (e.randn(2, 3), e.randn(3, 5)), True
    if case == "multi_input_multi_output":
        return (
            (lambda x, y: ((x * x) @ y, x @ (x.sum(1) * y), y.sum())),
            (e.randn(5, 3), e.randn(3, 5)),
            True,
        )
    if case == "unrelated_outputs":
        return (lambda x, y: (x, y, x, y)), (e.randn(2), e.randn(3)), True
    if case == "zero_dim_output":
        return (lambda x, y: (x.sum(), y.sum(), x * y)), (e.randn(3), e.randn(3)), True
    if case == "zero_dim_input":
        return (lambda x: lib.stack([x, x, x])), e.randn([]), True
    if case == "zero_dim_mixed":
        return (lambda x, y: (y.sum(), x * y)), (e.randn([]), e.randn(1)), True
    # different dtypes: forward mode gives the output's dtype, reverse mode the input's
    return (lambda x, y: ((x * y).float(), (x * y).double())), (e.randn(3), e.randn(3)), False


@pytest.mark.parametrize(
    "case",
    [
        "simple",
        "multi_input",
        "multi_input_multi_output",
        "unrelated_outputs",
        "zero_dim_output",
        "zero_dim_input",
        "zero_dim_mixed",
        "different_dtype",
    ],
)
@pytest.mark.parametrize("lib", LIBS)
def test_jacobian_vectorize_correctness(lib, case):
    def body(e: Env) -> Any:
        f, inputs, forward = _jacobian_vectorize_case(e, case)
        expected = e.F.jacobian(f, inputs, vectorize=False)
        got = [e.F.jacobian(f, inputs, vectorize=True)]
        if forward:
            got.append(e.F.jacobian(f, inputs, strategy="forward-mode", vectorize=True))
        for r in got:
            for a, b in zip(_flat(r), _flat(expected)):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        return expected, got

    run(lib, body)


def _hessian_vectorize_case(e: Env, case: str) -> tuple[Callable, Any]:
    if case == "simple":
        return (lambda x: (3 * x**2).sum()), e.randn(2, 3, 5)
    if case == "multi_input":
        return (
            (lambda x, y, z: ((x.relu() * x) @ y.sin() @ z).sum()),
            (e.randn(2, 3), e.randn(3, 5), e.randn(5, 5)),
        )
    if case == "unrelated_one":
        return (lambda x, y: (x**2).sum()), (e.randn(2), e.randn(3))
    return (lambda x, y: e.ones([])), (e.randn(2), e.randn(3))


@pytest.mark.parametrize("case", ["simple", "multi_input", "unrelated_one", "unrelated_all"])
@pytest.mark.parametrize("lib", LIBS)
def test_hessian_vectorize_correctness(lib, case):
    def body(e: Env) -> Any:
        f, inputs = _hessian_vectorize_case(e, case)
        expected = e.F.hessian(f, inputs, vectorize=False)
        got = [
            e.F.hessian(f, inputs, vectorize=True),
            e.F.hessian(f, inputs, outer_jacobian_strategy="forward-mode", vectorize=True),
        ]
        for r in got:
            assert len(_flat(r)) == len(_flat(expected))
            for a, b in zip(_flat(r), _flat(expected)):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        return expected, got

    run(lib, body)


# ------------------------------------------------------------------------------- hessian


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("lib", LIBS)
def test_hessian_err_check(lib, vectorize):
    def body(e: Env) -> Any:
        def foo(a: Any) -> Any:
            return 3 * a.narrow(0, 0, 3).exp().sum()

        inp = e.rand(4)
        with pytest.raises(TypeError, match="The inputs given to hessian must be either a Tensor"):
            e.F.hessian(foo, (inp, 2), vectorize=vectorize)
        with pytest.raises(
            TypeError, match="The outputs of the user-provided function given to hessian must"
        ):
            e.F.hessian(with_str, inp, vectorize=vectorize)
        with pytest.raises(
            RuntimeError,
            match="The Tensor returned by the function given to hessian should contain a single",
        ):
            e.F.hessian(narrow3, inp, vectorize=vectorize)
        with pytest.raises(
            RuntimeError, match="The function given to hessian should return a single Tensor"
        ):
            e.F.hessian(lambda a: (narrow3(a), narrow3(a)), inp, vectorize=vectorize)
        res = e.F.hessian(foo, inp, vectorize=vectorize)
        interleaved_struct(e, res, inp, inp)

        def foo2(a: Any, b: Any) -> Any:
            return (3 * b.narrow(0, 0, 3) * a.narrow(0, 0, 3)).sum()

        inp2 = (e.rand(4), e.rand(5))
        res2 = e.F.hessian(foo2, inp2, vectorize=vectorize)
        interleaved_struct(e, res2, inp2, inp2)
        return res, res2

    run(lib, body)


def _linear_sum(a: Any) -> Any:
    return (3 * a).sum()


@pytest.mark.parametrize("api", ["hessian", "vhp", "hvp"])
@pytest.mark.parametrize("lib", LIBS)
def test_hessian_vhp_hvp_err_check_strict(lib, api):
    def body(e: Env) -> Any:
        inp, v = e.rand(4), e.rand(4)
        fn = getattr(e.F, api)
        args = (inp,) if api == "hessian" else (inp, v)

        def check(res: Any) -> None:
            if api == "hessian":
                interleaved_struct(e, res, inp, inp)
                assert zero(res)
            else:
                same_struct(e, res[1], inp)
                assert zero(res[1])

        with pytest.raises(
            RuntimeError, match="Output 0 of the user-provided function does not require"
        ):
            fn(lambda a: a.detach().sum(), *args, strict=True)
        check(fn(lambda a: a.detach().sum(), *args, strict=False))
        msg = (
            "jacobian of the user-provided function with respect to input 0"
            if api == "hessian"
            else "The output of the user-provided function is independent of input 0"
        )
        with pytest.raises(RuntimeError, match=msg):
            fn(lambda a: disconnected(a).sum(), *args, strict=True)
        check(fn(lambda a: disconnected(a).sum(), *args, strict=False))
        with pytest.raises(
            RuntimeError, match="jacobian of the user-provided function with respect to input 0 is"
        ):
            fn(_linear_sum, *args, strict=True)
        res = fn(_linear_sum, *args, strict=False)
        check(res)
        return res

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_hessian_no_grad(lib):
    def body(e: Env) -> Any:
        inputs = e.rand(2, 2)
        with e.lib.no_grad():
            res = e.F.hessian(lambda x: x.pow(3).sum(), inputs)
        assert all(res[i][j].grad_fn is None for i in range(2) for j in range(2))
        assert nonzero(res)
        with e.lib.no_grad():
            res2 = e.F.hessian(lambda x: x.pow(3).sum(), inputs, create_graph=True)
        assert all(res2[i][j].grad_fn is not None for i in range(2) for j in range(2))
        assert nonzero(res2)
        return res, res2

    run(lib, body)


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("lib", LIBS)
def test_hessian_output(lib, vectorize):
    def body(e: Env) -> Any:
        inputs = e.rand(2, 2)
        res = e.F.hessian(lambda x: x.pow(3).sum(), inputs, vectorize=vectorize)
        interleaved_struct(e, res, inputs, inputs)
        assert res.grad_fn is None

        inputs2 = (e.rand(2, 2), e.rand(2, 2))
        res2 = e.F.hessian(lambda x, y: (x + y).pow(3).sum(), inputs2, vectorize=vectorize)
        interleaved_struct(e, res2, inputs2, inputs2)
        assert all(res2[i][j].grad_fn is None for i in range(2) for j in range(2))
        return res, res2

    run(lib, body)


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("lib", LIBS)
def test_hessian_scalar(lib, vectorize):
    def body(e: Env) -> Any:
        inputs = e.rand(4, 4)
        res = e.F.hessian(lambda x: x.sum(), inputs, vectorize=vectorize)
        interleaved_struct(e, res, inputs, inputs)
        inputs2 = e.rand([])
        res2 = e.F.hessian(lambda x: x.sum(), inputs2, vectorize=vectorize)
        same_struct(e, res2, inputs2)
        res3 = e.F.hessian(lambda x: x.sum().view(1, 1, 1), inputs, vectorize=vectorize)
        interleaved_struct(e, res3, inputs, inputs)
        return res, res2, res3

    run(lib, body)


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("lib", LIBS)
def test_hessian_create_graph(lib, vectorize):
    def body(e: Env) -> Any:
        def pow_reducer(x: Any) -> Any:
            return x.pow(3).sum()

        inputs = e.rand(2, 2, dtype=e.double, requires_grad=True)
        res = e.F.hessian(pow_reducer, inputs, create_graph=True, vectorize=vectorize)
        interleaved_struct(e, res, inputs, inputs)
        assert res.grad_fn is not None

        def hes1(inp: Any) -> Any:
            return e.F.hessian(pow_reducer, inp, create_graph=True, vectorize=vectorize)

        assert e.gradcheck(hes1, inputs)
        assert e.gradgradcheck(hes1, inputs)

        def add_pow_reducer(x: Any, y: Any) -> Any:
            return (x + y).pow(3).sum()

        inputs2 = (
            e.rand(2, 2, dtype=e.double, requires_grad=True),
            e.rand(2, 2, dtype=e.double, requires_grad=True),
        )
        res2 = e.F.hessian(add_pow_reducer, inputs2, create_graph=True, vectorize=vectorize)
        interleaved_struct(e, res2, inputs2, inputs2)
        assert all(res2[i][j].grad_fn is not None for i in range(2) for j in range(2))

        def hes2(*inp: Any) -> Any:
            h = e.F.hessian(add_pow_reducer, inp, create_graph=True, vectorize=vectorize)
            return tuple(b for row in h for b in row)

        assert e.gradcheck(hes2, inputs2)
        assert e.gradgradcheck(hes2, inputs2)

        def foo(x: Any, y: Any) -> Any:
            x = x.cos()
            val, hess = e.F.hessian(add_pow_reducer, (x, y), create_graph=True, vectorize=vectorize)
            r = val[0].cos().sum() + val[1].cos().sum() + hess[0].cos().sum()
            return r + hess[1].cos().sum() + x.cos().sum() + y.cos().sum()

        assert e.gradcheck(foo, inputs2)
        assert e.gradgradcheck(foo, inputs2)
        return res, res2, foo(*inputs2)

    run(lib, body, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------------------ vhp / hvp


def _exp3(a: Any) -> Any:
    return 3 * a.narrow(0, 0, 3).exp().sum()


def _bar_exp(a: Any, b: Any) -> Any:
    return (a + 3 * b.narrow(0, 0, 3)).exp().sum()


@pytest.mark.parametrize("api", ["vhp", "hvp"])
@pytest.mark.parametrize("lib", LIBS)
def test_vhp_hvp_err_check(lib, api):
    def body(e: Env) -> Any:
        fn = getattr(e.F, api)
        inp, v = e.rand(4), e.rand(4)
        with pytest.raises(TypeError, match=f"The inputs given to {api} must be either a Tensor"):
            fn(_exp3, (inp, 2), v)
        with pytest.raises(
            TypeError, match=f"The outputs of the user-provided function given to {api} must"
        ):
            fn(with_str, inp, v)
        with pytest.raises(
            RuntimeError,
            match=f"The Tensor returned by the function given to {api} should contain a single",
        ):
            fn(narrow3, inp, v)
        with pytest.raises(RuntimeError, match="v has invalid size:"):
            fn(_exp3, inp, e.rand(5))
        with pytest.raises(
            TypeError, match=f"The v given to {api} must be either a Tensor or a tuple of Tensors"
        ):
            fn(_exp3, inp, (v, 2))
        res = fn(_exp3, inp, v)
        same_struct(e, res[1], inp)

        def foo(a: Any, b: Any) -> Any:
            return (3 * b.narrow(0, 0, 3) * a.narrow(0, 0, 3)).sum()

        inp2, v2 = (e.rand(4), e.rand(5)), (e.rand(4), e.rand(5))
        res2 = fn(foo, inp2, v2)
        same_struct(e, res2[1], inp2)
        return res, res2

    run(lib, body)


@pytest.mark.parametrize("api", ["vhp", "hvp"])
@pytest.mark.parametrize("lib", LIBS)
def test_vhp_hvp_no_grad(lib, api):
    def body(e: Env) -> Any:
        fn = getattr(e.F, api)
        inputs, v = e.rand(4, 4), e.ones(4, 4)
        with e.lib.no_grad():
            res = fn(lambda x: x.exp().sum(), inputs, v)
        assert res[0].grad_fn is None and res[1].grad_fn is None
        assert nonzero(res[1])
        with e.lib.no_grad():
            res2 = fn(lambda x: x.exp().sum(), inputs, v, create_graph=True)
        assert res2[0].grad_fn is not None and res2[1].grad_fn is not None
        assert nonzero(res2[1])
        return res, res2

    run(lib, body)


@pytest.mark.parametrize("api", ["vhp", "hvp"])
@pytest.mark.parametrize("lib", LIBS)
def test_vhp_hvp_output(lib, api):
    def body(e: Env) -> Any:
        fn = getattr(e.F, api)
        inputs, v = e.rand(4, 4), e.ones(4, 4)
        res = fn(_exp3, inputs, v)
        same_struct(e, res[1], inputs)
        assert res[0].grad_fn is None and res[1].grad_fn is None
        inputs2 = (e.rand(3), e.rand(4))
        out, val = fn(_bar_exp, inputs2, (e.ones(3), e.ones(4)))
        same_struct(e, val, inputs2)
        assert out.grad_fn is None and val[0].grad_fn is None and val[1].grad_fn is None
        return res, out, val

    run(lib, body)


@pytest.mark.parametrize("api", ["vhp", "hvp"])
@pytest.mark.parametrize("lib", LIBS)
def test_vhp_hvp_scalar(lib, api):
    def body(e: Env) -> Any:
        fn = getattr(e.F, api)
        inputs, v = e.rand(4, 4), e.ones(4, 4)
        res = fn(lambda x: x.exp().sum(), inputs, v)
        same_struct(e, res[1], inputs)
        inputs2, v2 = e.rand([]), e.rand([])
        res2 = fn(lambda x: x.exp().sum(), inputs2, v2)
        same_struct(e, res2[1], inputs2)
        res3 = fn(lambda x: x.exp().sum(), inputs2)
        same_struct(e, res3[1], inputs2)
        v4 = e.rand(4, 4)
        res4 = fn(lambda x: x.exp().sum().view(1, 1, 1), inputs, v4)
        same_struct(e, res4[1], inputs)
        return res, res2, res3, res4

    run(lib, body)


@pytest.mark.parametrize("api", ["vhp", "hvp"])
@pytest.mark.parametrize("lib", LIBS)
def test_vhp_hvp_create_graph(lib, api):
    def body(e: Env) -> Any:
        fn = getattr(e.F, api)
        inputs = e.rand(4, 4, dtype=e.double, requires_grad=True)
        v = e.ones(4, 4, dtype=e.double, requires_grad=True)
        res = fn(_exp3, inputs, v, create_graph=True)
        same_struct(e, res[1], inputs)
        assert res[0].grad_fn is not None and res[1].grad_fn is not None

        def first(inp: Any, v: Any) -> Any:
            return fn(_exp3, inp, v, create_graph=True)

        assert e.gradcheck(first, (inputs, v))
        assert e.gradgradcheck(first, (inputs, v))

        inputs2 = (
            e.rand(3, dtype=e.double, requires_grad=True),
            e.rand(4, dtype=e.double, requires_grad=True),
        )
        v2 = (
            e.ones(3, dtype=e.double, requires_grad=True),
            e.ones(4, dtype=e.double, requires_grad=True),
        )
        out, val = fn(_bar_exp, inputs2, v2, create_graph=True)
        same_struct(e, val, inputs2)
        assert out.grad_fn is not None and val[0].grad_fn is not None
        assert val[1].grad_fn is not None

        def second(*args: Any) -> Any:
            return fn(_bar_exp, args[:2], args[2:], create_graph=True)[1]

        assert e.gradcheck(second, inputs2 + v2)
        assert e.gradgradcheck(second, inputs2 + v2)

        def foo(*args: Any) -> Any:
            x, y = args[:2]
            x = x.cos()
            val, grad = fn(_bar_exp, (x, y), args[2:], create_graph=True)
            return val.cos() + grad[0].cos().sum() + grad[1].cos() + x.cos().sum() + y.cos()

        assert e.gradcheck(foo, inputs2 + v2)
        assert e.gradgradcheck(foo, inputs2 + v2)
        return res, out, val, foo(*inputs2, *v2)

    run(lib, body, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("lib", LIBS)
def test_jacobian_match_vjp_jvp(lib):
    def body(e: Env) -> Any:
        def foo(x: Any) -> Any:
            return x**3 + x.sum()

        inputs, v = e.rand(4), e.rand(4)
        jac = e.F.jacobian(foo, inputs)
        jvp = e.F.jvp(foo, inputs, v)[1]
        vjp = e.F.vjp(foo, inputs, v)[1]
        np.testing.assert_allclose(
            jvp.numpy(), e.lib.mm(jac, v.unsqueeze(1)).squeeze(1).numpy(), rtol=1e-6
        )
        np.testing.assert_allclose(
            vjp.numpy(), e.lib.mm(v.unsqueeze(0), jac).squeeze(0).numpy(), rtol=1e-6
        )
        return jac, jvp, vjp

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_hessian_match_vhp_hvp(lib):
    def body(e: Env) -> Any:
        inputs, v = e.rand(4), e.rand(4)
        hes = e.F.hessian(_exp3, inputs)
        hvp = e.F.hvp(_exp3, inputs, v)[1]
        vhp = e.F.vhp(_exp3, inputs, v)[1]
        np.testing.assert_allclose(
            hvp.numpy(), e.lib.mm(hes, v.unsqueeze(1)).squeeze(1).numpy(), rtol=1e-6
        )
        np.testing.assert_allclose(
            vhp.numpy(), e.lib.mm(v.unsqueeze(0), hes).squeeze(0).numpy(), rtol=1e-6
        )
        return hes, hvp, vhp

    run(lib, body)
