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


# ------------------------------------------------------------------- custom autograd.Function


def _once(e: Env) -> Callable:
    return e.lib.autograd.function.once_differentiable


def _scaled_sum_function(e: Env, once: bool) -> type:
    """``t1 + s * t2 + t1 * t2`` with a hand-written backward (PyTorch's test_function)."""

    def backward(ctx: Any, g: Any) -> Any:
        if once:
            assert not e.lib.is_grad_enabled()
        t1, t2 = ctx.saved_tensors
        assert e.is_tensor(t1) and e.is_tensor(t2) and e.is_tensor(g)
        return g + g * t2, None, g * ctx.pyscalar + g * t1

    def forward(ctx: Any, t1: Any, pyscalar: Any, t2: Any) -> Any:
        ctx.pyscalar = pyscalar
        ctx.save_for_backward(t1, t2)
        return t1 + pyscalar * t2 + t1 * t2

    return type(
        "MyFunction",
        (e.Function,),
        {
            "forward": staticmethod(forward),
            "backward": staticmethod(_once(e)(backward) if once else backward),
        },
    )


@pytest.mark.parametrize("once", [False, True])
@pytest.mark.parametrize("lib", LIBS)
def test_function_create_graph_backward(lib, once):
    def body(e: Env) -> Any:
        fn = _scaled_sum_function(e, once)
        x = e.randn(5, 5, dtype=e.double, requires_grad=True)
        y = e.randn(5, 5, dtype=e.double, requires_grad=True)
        go = e.ones([], dtype=e.double, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's note on create_graph into .grad
            fn.apply(x, 2, y).sum().backward(go, create_graph=True)
        np.testing.assert_allclose(x.grad.detach().numpy(), y.detach().numpy() + 1)
        np.testing.assert_allclose(y.grad.detach().numpy(), x.detach().numpy() + 2)
        assert x.grad.grad_fn is not None and y.grad.grad_fn is not None
        if once:
            # differentiating a once_differentiable backward again is an error, not a
            # second derivative that silently lacks its terms
            with pytest.raises(RuntimeError, match="differentiate twice a function that was"):
                (x.grad * y).sum().backward()
            # (torch has by then added into y.grad what its engine reached first; here a
            # backward that fails changes no .grad)
            return x.grad
        (g,) = e.lib.autograd.grad((x.grad * y).sum(), go)
        return x.grad, y.grad, g

    run(lib, body, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("lib", LIBS)
def test_function_returns_input(lib):
    def body(e: Env) -> Any:
        class MyFunction(e.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                return x

            @staticmethod
            def backward(ctx: Any, grad: Any) -> Any:
                return grad * 2

        out = []
        for shape in [(1,), ()]:
            v = e.ones(*shape, requires_grad=True)
            MyFunction.apply(v).backward()
            np.testing.assert_allclose(v.grad.numpy(), np.full(shape, 2.0))
            with e.lib.no_grad():
                v.grad.zero_()
            MyFunction.apply(v.clone()).backward()
            np.testing.assert_allclose(v.grad.numpy(), np.full(shape, 2.0))
            out.append(v.grad)
        return out

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_function_returns_undefined_tensor(lib):
    def body(e: Env) -> Any:
        class MyFunction(e.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                return x * 2

            @staticmethod
            def backward(ctx: Any, grad: Any) -> Any:
                return None

        x = e.ones(1, requires_grad=True)
        MyFunction.apply(x).backward()
        assert x.grad is None
        MyFunction.apply(x**2).backward()
        assert x.grad is None
        MyFunction.apply(x).sum().backward()
        assert x.grad is None
        assert e.lib.autograd.grad(MyFunction.apply(x), x, allow_unused=True)[0] is None

    run(lib, body)


@pytest.mark.parametrize("materialize", [True, False])
@pytest.mark.parametrize("lib", LIBS)
def test_function_materialize_grads(lib, materialize):
    def body(e: Env) -> Any:
        seen = []

        class MyFunction(e.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                ctx.set_materialize_grads(materialize)
                return x.clone(), x.clone()

            @staticmethod
            def backward(ctx: Any, g0: Any, g1: Any) -> Any:
                seen.append(g1)
                return g0 if g1 is None else g0 + g1

        a = e.tensor([1.0, 2.0], requires_grad=True)
        MyFunction.apply(a)[0].sum().backward()
        if materialize:
            np.testing.assert_array_equal(seen[0].numpy(), [0.0, 0.0])
        else:
            assert seen == [None]
        return a.grad

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_function_set_materialize_non_diff_grads(lib):
    # PyTorch's private switch: an output marked non-differentiable gets None, not zeros
    def body(e: Env) -> Any:
        class Func(e.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                out0, out1 = x.clone(), x.clone()
                ctx.mark_non_differentiable(out1)
                ctx._materialize_non_diff_grads = False
                return out0, out1

            @staticmethod
            def backward(ctx: Any, g0: Any, g1: Any) -> Any:
                assert g1 is None
                return g0

        a = e.tensor(1.0, requires_grad=True)
        Func.apply(a)[0].backward()
        return a.grad

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_function_instance_is_deprecated_and_not_callable(lib):
    e = Env(lib)

    class Id(e.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g

    with pytest.warns(DeprecationWarning, match="should not be instantiated"):
        f = Id()
    assert isinstance(f, Id)
    with pytest.raises(RuntimeError, match="non-static forward method is deprecated"):
        f(e.zeros(1, requires_grad=True))
    assert Id.apply(e.zeros(1, requires_grad=True)).grad_fn.name() == "IdBackward"


@pytest.mark.parametrize("lib", LIBS)
def test_function_saved_variables_is_deprecated(lib):
    e = Env(lib)

    class MyFunction(e.Function):
        @staticmethod
        def forward(ctx: Any, t1: Any, t2: Any) -> Any:
            ctx.save_for_backward(t1, t2)
            return t1 + t2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            v1, v2 = ctx.saved_variables
            return g * (v1 is not None), g * (v2 is not None)

    x, y = e.randn(3, 3, requires_grad=True), e.randn(3, 3, requires_grad=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        MyFunction.apply(x, y).sum().backward()
    assert any("saved_variables" in str(m.message) and "deprecated" in str(m.message) for m in w)
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((3, 3)))


@pytest.mark.parametrize("lib", LIBS)
def test_function_backward_error_propagates(lib):
    e = Env(lib)

    class SimulateBackwardError(e.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x.clone()

        @staticmethod
        @_once(e)
        def backward(ctx: Any, g: Any) -> Any:
            raise ValueError("Simulate error on backward pass")

    t1, t2 = e.rand(3, 3, requires_grad=True), e.rand(3, 3, requires_grad=True)
    t3 = SimulateBackwardError.apply((t1 + t2) * (t1 + t2))
    with pytest.raises(ValueError, match="Simulate error on backward pass"):
        t3.sum().backward()


@pytest.mark.parametrize("lib", LIBS)
def test_function_non_tensor_inputs_outputs(lib):
    def body(e: Env) -> Any:
        class MyFunction(e.Function):
            @staticmethod
            def forward(ctx: Any, t1: Any, t2: Any, scale: Any, t3: Any) -> Any:
                t4 = t1 + t2 * t3
                t5 = t1 * t2 + t3
                t4 *= scale
                t5 *= scale
                ctx.scale = scale
                ctx.save_for_backward(t1, t2, t3)
                return scale, t4, None, True, t5, "bar", t1

            @staticmethod
            @_once(e)
            def backward(ctx: Any, *grads: Any) -> Any:
                assert len(grads) == 7
                assert all(grads[i] is None for i in (0, 2, 3, 5))
                s = ctx.scale
                v1, v2, v3 = ctx.saved_tensors
                return (
                    grads[1] * s + grads[4] * v2 * s + grads[6],
                    grads[1] * v3 * s + grads[4] * v1 * s,
                    None,
                    grads[1] * v2 * s + grads[4] * s,
                )

        t1 = e.rand(10, dtype=e.double, requires_grad=True)
        t2 = e.rand(10, dtype=e.double, requires_grad=True)
        t3 = e.rand(10, dtype=e.double)
        res = MyFunction.apply(t1, t2, 3, t3)
        assert res[0] == 3 and res[2] is None and res[3] is True and res[5] == "bar"
        e.lib.autograd.backward([res[1].sum(), res[4].sum(), res[6].sum()])
        assert t1.grad is not None and t2.grad is not None and t3.grad is None

        def foo(t1: Any, t2: Any, t3: Any) -> Any:
            r = MyFunction.apply(t1, t2, 3, t3)
            return r[1], r[4], r[6]

        assert e.gradcheck(foo, (t1, t2, t3))
        return res[1], res[4], res[6], t1.grad, t2.grad

    run(lib, body, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("lib", LIBS)
def test_function_without_tensors(lib):
    e = Env(lib)

    class MyFunction(e.Function):
        @staticmethod
        def forward(ctx: Any, t1: Any, t2: Any, scale: Any, t3: Any) -> Any:
            t4 = (t1 + t2 * t3) * scale
            t5 = (t1 * t2 + t3) * scale
            return scale, t4, None, True, t5, "bar", t1

        @staticmethod
        def backward(ctx: Any, *args: Any) -> Any:
            return args[0], args[1], None, args[2]

    t1, t2, t3, scale = 0.25, 0.5, 0.75, 4
    res = MyFunction.apply(t1, t2, scale, t3)
    assert res == (scale, (t1 + t2 * t3) * scale, None, True, (t1 * t2 + t3) * scale, "bar", t1)


@pytest.mark.parametrize("lib", LIBS)
def test_function_gradient_of_wrong_shape(lib):
    e = Env(lib)

    class MyFunction(e.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return e.randn(10)

    x = e.randn(5, 5, requires_grad=True)
    with pytest.raises(RuntimeError, match="expected shape"):
        MyFunction.apply(x).sum().backward()


@pytest.mark.parametrize("lib", LIBS)
def test_function_gradient_of_a_broadcast_shape_is_summed(lib):
    # a gradient the input's shape broadcasts to is reduced to it, as PyTorch's engine does
    def body(e: Env) -> Any:
        class MyFunction(e.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                return x * 2

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                return e.lib.stack([g, 3 * g]).reshape(2, 1, 3)

        x = e.randn(1, 3, dtype=e.double, requires_grad=True)
        MyFunction.apply(x).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.full((1, 3), 4.0))
        return x.grad

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_function_gradient_of_another_float_dtype_is_cast(lib):
    def body(e: Env) -> Any:
        class MyFunction(e.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                (x,) = ctx.saved_tensors
                return (2 * x * g).float()

        x = e.tensor([1.5, -2.0], dtype=e.double, requires_grad=True)
        MyFunction.apply(x).sum().backward()
        assert x.grad.dtype == e.double
        np.testing.assert_array_equal(x.grad.numpy(), [3.0, -4.0])
        return x.grad

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_function_wrong_number_of_gradients(lib):
    e = Env(lib)

    class TooMany(e.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 1

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g, g

    class TooFew(e.Function):
        @staticmethod
        def forward(ctx: Any, a: Any, b: Any) -> Any:
            return a * b

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g

    class TrailingNones(e.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g, None, None

    x = e.randn(5, 5, requires_grad=True)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        TooMany.apply(x).sum().backward()
    # (too few used to leave the second input silently without a gradient)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        TooFew.apply(x, e.randn(5, 5, requires_grad=True)).sum().backward()
    x.grad = None
    TrailingNones.apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((5, 5)))


@pytest.mark.parametrize("lib", LIBS)
def test_function_mark_non_differentiable(lib):
    def body(e: Env) -> Any:
        class Mask(e.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                out = x > 0
                ctx.mark_non_differentiable(out)
                return out

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                return (g * 0).to(e.double)

        class Mixed(e.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                a, b = x + 1, x + 2
                ctx.mark_non_differentiable(a)
                return a, b

            @staticmethod
            def backward(ctx: Any, ga: Any, gb: Any) -> Any:
                assert bool((ga == 0).all()) and bool((gb == 1).all())
                return gb

        class NoneBack(e.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                out = x.clone()
                ctx.mark_non_differentiable(out)
                return out

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                return None

        x = e.randn(5, 5, dtype=e.double, requires_grad=True)
        mask = Mask.apply(x)
        assert not mask.requires_grad
        x.masked_fill(mask, 0).sum().backward()
        g1 = x.grad
        x2 = e.randn(5, 5, dtype=e.double, requires_grad=True)
        a, b = Mixed.apply(x2)
        assert not a.requires_grad and b.requires_grad
        b.sum().backward()
        x3 = e.randn(5, 5, dtype=e.double, requires_grad=True)
        r = NoneBack.apply(x3 * x3)
        (r * x3).sum().backward()
        return g1, x2.grad, x3.grad

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_function_returning_one_tensor_twice(lib):
    def body(e: Env) -> Any:
        class DoubleDuplicate(e.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                out = x * 2
                return out, out

            @staticmethod
            def backward(ctx: Any, g1: Any, g2: Any) -> Any:
                return g1 * 2 + g2 * 2

        class DoubleInplace(e.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                x.mul_(2)
                ctx.mark_dirty(x)
                return x, x

            @staticmethod
            def backward(ctx: Any, g1: Any, g2: Any) -> Any:
                return g1 * 2 + g2 * 2

        def fn(x: Any) -> Any:
            a, b = DoubleDuplicate.apply(x)
            assert a is b
            return a + b

        def inplace_fn(x: Any) -> Any:
            a, b = DoubleInplace.apply(x.clone())
            assert a is b
            return a + b

        x = e.randn(5, 5, dtype=e.double, requires_grad=True)
        for f in (fn, inplace_fn):
            assert e.gradcheck(f, [x])
            assert e.gradgradcheck(f, [x])
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            DoubleInplace.apply(x)
        return e.lib.autograd.grad(fn(x).sum(), x)

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_function_saved_tensors_double_backward(lib):
    def body(e: Env) -> Any:
        def mult1(x: Any) -> Any:
            return x.prod(dim=-1).prod(dim=-1)

        class Mult(e.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                y = mult1(x)
                ctx.save_for_backward(x, y)
                return y

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                x, y = ctx.saved_tensors
                return (g * y)[:, None, None] / x

        class Double(e.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                y = x**2
                ctx.save_for_backward(x, y)
                return y

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                x, _ = ctx.saved_tensors
                return g * 2 * x

        class Double2(Double):
            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                x, y = ctx.saved_tensors
                return g * 2 * y / x

        def repeated(x: Any, y: Any) -> Any:
            (gy,) = e.lib.autograd.grad(y[0], x, create_graph=True)
            (g1,) = e.lib.autograd.grad(gy[0, 0, 0], x, retain_graph=True)
            (gy,) = e.lib.autograd.grad(y[0], x, create_graph=True)
            (g2,) = e.lib.autograd.grad(gy[0, 0, 0], x, retain_graph=True)
            np.testing.assert_array_equal(g1.numpy(), g2.numpy())
            return g1

        x = e.ones(2, 4, 4, dtype=e.double, requires_grad=True)
        out = [repeated(x, mult1(x)), repeated(x, Mult.apply(x))]
        np.testing.assert_allclose(out[0].numpy(), out[1].numpy())
        s = e.tensor(2.0, dtype=e.double, requires_grad=True)
        for f in (Double.apply, Double2.apply):
            assert e.gradcheck(f, s) and e.gradgradcheck(f, s)
            y = f(s)
            out.append(e.lib.autograd.grad(y, s, create_graph=True)[0])
            e.lib.autograd.grad(y, s)
        return out

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_function_returning_its_input_leaf(lib):
    def body(e: Env) -> Any:
        class Identity(e.Function):
            @staticmethod
            def forward(ctx: Any, a: Any, b: Any) -> Any:
                return a, a + b

            @staticmethod
            def backward(ctx: Any, ga: Any, gb: Any) -> Any:
                return ga + gb, gb

        called = []

        def hook(g: Any) -> None:
            called.append(1)
            np.testing.assert_array_equal(g.numpy(), np.ones((5, 5)))

        x, y = e.randn(5, 5, requires_grad=True), e.randn(5, 5, requires_grad=True)
        q, p = Identity.apply(x, y)
        q.register_hook(hook)
        (q + p + x).sum().backward()
        assert called
        np.testing.assert_array_equal(x.grad.numpy(), np.full((5, 5), 3.0))
        np.testing.assert_array_equal(y.grad.numpy(), np.ones((5, 5)))

        class Inplace(e.lib.autograd.function.InplaceFunction):
            @staticmethod
            def forward(ctx: Any, a: Any, b: Any) -> Any:
                ctx.mark_dirty(a)
                return a.add_(b), b + 2

            @staticmethod
            def backward(ctx: Any, ga: Any, gb: Any) -> Any:
                return ga, ga + gb

        x2, y2 = e.randn(5, 5), e.randn(5, 5, requires_grad=True)
        q2, _ = Inplace.apply(x2, y2)
        assert q2 is x2 and q2.requires_grad
        q2.sum().backward()
        np.testing.assert_array_equal(y2.grad.numpy(), np.ones((5, 5)))
        return x.grad, y.grad, q2

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_function_grad_modes(lib):
    e = Env(lib)
    seen = []

    class MyFunction(e.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            seen.append(e.lib.is_grad_enabled())
            return x + 1

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g

    x = e.randn(5, requires_grad=True)
    y = MyFunction.apply(x)
    # forward runs with grad mode off; under no_grad the result is not recorded
    assert seen == [False] and y.requires_grad
    with e.lib.no_grad():
        z = MyFunction.apply(x)
    assert x.requires_grad and not z.requires_grad and z.grad_fn is None


@pytest.mark.parametrize("lib", LIBS)
def test_function_saved_none_and_non_differentiable_dependency(lib):
    def body(e: Env) -> Any:
        class MyFn(e.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                ctx.save_for_backward(None, x, None)
                return x * x

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                n1, x, n2 = ctx.saved_tensors
                assert n1 is None and n2 is None
                return 2 * x * g

        class F1(e.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                out = x * 0 + 5
                ctx.mark_non_differentiable(out)
                return x, out

            @staticmethod
            def backward(ctx: Any, g: Any, ignored: Any) -> Any:
                return g

        class F2(e.Function):
            @staticmethod
            def forward(ctx: Any, x: Any, ignored: Any) -> Any:
                return x

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                return g, None

        x = e.randn(5, 5, requires_grad=True)
        MyFn.apply(x).sum().backward()
        x2 = e.randn(5, requires_grad=True)
        a, b = F1.apply(x2)
        b = b + 1
        assert a.requires_grad and not b.requires_grad
        c = F2.apply(a, b)
        c.backward(e.ones(5))
        np.testing.assert_array_equal(x2.grad.numpy(), np.ones(5))
        return x.grad

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_function_needs_input_grad_and_none_gradient(lib):
    def body(e: Env) -> Any:
        class NoneGradient(e.Function):
            @staticmethod
            def forward(ctx: Any, x: Any, y: Any) -> Any:
                assert ctx.needs_input_grad[0] and not ctx.needs_input_grad[1]
                return x, y

            @staticmethod
            def backward(ctx: Any, gx: Any, gy: Any) -> Any:
                return gx, None

        called = []
        x, y = e.randn(5, 5, requires_grad=True), e.randn(5, 5)
        rx, ry = NoneGradient.apply(x, y)
        rx.register_hook(lambda g: called.append(g is not None))
        (rx + ry).sum().backward()
        assert called == [True]
        return x.grad

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_function_deep_chain(lib):
    e = Env(lib)

    class MyOp(e.Function):
        @staticmethod
        def forward(ctx: Any, a: Any, b: Any) -> Any:
            return a + b

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g, g

    x = e.randn(1, requires_grad=True)
    y = x.clone()
    for _ in range(2000):
        y = MyOp.apply(y, y)
    del y


# ------------------------------------------------------------- setup_context-style Functions


@pytest.mark.parametrize("kind", ["staticmethod", "classmethod"])
@pytest.mark.parametrize("lib", LIBS)
def test_setup_context_sees_forward_defaults(lib, kind):
    def body(e: Env) -> Any:
        wrap = staticmethod if kind == "staticmethod" else classmethod

        def forward_s(x: Any, y: Any = 3) -> Any:
            return e.lib.pow(x, y)

        def forward_c(cls: Any, x: Any, y: Any = 3) -> Any:
            return e.lib.pow(x, y)

        def setup_s(ctx: Any, inputs: tuple, output: Any) -> None:
            x, y = inputs
            ctx.save_for_backward(x)
            ctx.y = y

        def setup_c(cls: Any, ctx: Any, inputs: tuple, output: Any) -> None:
            setup_s(ctx, inputs, output)

        def backward_s(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return g * ctx.y * e.lib.pow(x, ctx.y - 1), None

        def backward_c(cls: Any, ctx: Any, g: Any) -> Any:
            return backward_s(ctx, g)

        static = kind == "staticmethod"
        Pow = type(
            "PowFunction",
            (e.Function,),
            {
                "forward": wrap(forward_s if static else forward_c),
                "setup_context": wrap(setup_s if static else setup_c),
                "backward": wrap(backward_s if static else backward_c),
            },
        )
        x = e.tensor(2.0, requires_grad=True)
        y1 = Pow.apply(x)
        (g1,) = e.lib.autograd.grad(y1, x)
        y2 = Pow.apply(x, 2)
        (g2,) = e.lib.autograd.grad(y2, x)
        np.testing.assert_allclose([float(y1), float(g1), float(y2), float(g2)], [8, 12, 4, 4])
        return y1, g1, y2, g2

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_setup_context_saves_inputs_outputs_and_marks(lib):
    def body(e: Env) -> Any:
        seen = {}

        class Mul(e.Function):
            @staticmethod
            def forward(a: Any, b: Any, scale: float) -> Any:
                return a * b * scale

            @staticmethod
            def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
                a, b, scale = inputs
                seen["needs"] = tuple(ctx.needs_input_grad)
                ctx.save_for_backward(a, b)
                ctx.scale = scale

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                a, b = ctx.saved_tensors
                ga = g * b * ctx.scale if ctx.needs_input_grad[0] else None
                gb = g * a * ctx.scale if ctx.needs_input_grad[1] else None
                return ga, gb, None

        class SqAndSign(e.Function):
            @staticmethod
            def forward(x: Any) -> Any:
                return x * x, x > 0

            @staticmethod
            def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
                ctx.mark_non_differentiable(output[1])
                ctx.save_for_backward(inputs[0])

            @staticmethod
            def backward(ctx: Any, gy: Any, gm: Any) -> Any:
                (x,) = ctx.saved_tensors
                return 2 * x * gy

        class Exp(e.Function):
            @staticmethod
            def forward(x: Any) -> Any:
                return x.exp()

            @staticmethod
            def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
                ctx.save_for_backward(output)

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                (y,) = ctx.saved_tensors
                return g * y

        a, b = e.tensor([1.0, 2.0], requires_grad=True), e.tensor([3.0, 4.0])
        Mul.apply(a, b, 2.0).sum().backward()
        assert seen["needs"] == (True, False, False) and b.grad is None
        x = e.tensor([-1.0, 2.0], dtype=e.double, requires_grad=True)
        y, m = SqAndSign.apply(x)
        assert y.requires_grad and not m.requires_grad
        assert e.gradgradcheck(lambda t: SqAndSign.apply(t)[0], x)
        z = e.tensor([0.5, 1.0], dtype=e.double, requires_grad=True)
        (g,) = e.lib.autograd.grad(Exp.apply(z).sum(), z, create_graph=True)
        (gg,) = e.lib.autograd.grad(g.sum(), z)
        assert e.gradcheck(Exp.apply, z) and e.gradgradcheck(Exp.apply, z)
        return a.grad, y, g, gg

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_function_missing_forward_or_backward(lib):
    e = Env(lib)

    class NoBackward(e.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 2

    class NoForward(e.Function):
        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g

    x = e.ones(2, requires_grad=True)
    with pytest.raises(NotImplementedError, match="You must implement either the backward"):
        NoBackward.apply(x).sum().backward()
    with pytest.raises(NotImplementedError, match="You must implement the forward function"):
        NoForward.apply(x)


@pytest.mark.parametrize("what", ["input", "input_no_grad", "output"])
@pytest.mark.parametrize("lib", LIBS)
def test_function_saved_tensor_modified_in_place_raises(lib, what):
    # (the backward used to read the new values: a silently wrong gradient)
    e = Env(lib)

    class Sq(e.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return 2 * x * g

    class Exp(e.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (y,) = ctx.saved_tensors
            return g * y

    w = e.tensor([1.0, 2.0], requires_grad=True)
    if what == "output":
        y = Exp.apply(w)
        y.mul_(2)
    else:
        x = w * 1
        y = Sq.apply(x)
        if what == "input":
            x.add_(10)
        else:
            with e.lib.no_grad():
                x.add_(10)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    assert w.grad is None


@pytest.mark.parametrize("lib", LIBS)
def test_jacobian_dtype_per_strategy(lib):
    # reverse mode gives the input's dtype, forward mode the output's (both libraries)
    def body(e: Env) -> Any:
        def f(x: Any, y: Any) -> Any:
            return (x * y).float(), (x * y).double()

        x, y = e.randn(3, dtype=e.double), e.randn(3, dtype=e.double)
        rev = e.F.jacobian(f, (x, y), vectorize=True)
        fwd = e.F.jacobian(f, (x, y), vectorize=True, strategy="forward-mode")
        assert [b.dtype for row in rev for b in row] == [e.double] * 4
        assert [b.dtype for row in fwd for b in row] == [e.lib.float32] * 2 + [e.double] * 2
        return rev, fwd

    run(lib, body)


@pytest.mark.parametrize("lib", LIBS)
def test_hessian_unknown_outer_strategy_raises(lib):
    # (torch's check is an assert; ferrograd raises ValueError, as for jacobian's strategy)
    e = Env(lib)
    with pytest.raises(AssertionError if lib == "torch" else ValueError, match="forward-mode"):
        e.F.hessian(lambda a: a.sum(), e.rand(3), outer_jacobian_strategy="foo")


@pytest.mark.parametrize("lib", LIBS)
def test_function_backward_grad_mode_follows_create_graph(lib):
    e = Env(lib)
    seen = []

    class Sq(e.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            seen.append(e.lib.is_grad_enabled())
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = e.tensor([1.0, 2.0], requires_grad=True)
    Sq.apply(x).sum().backward()
    e.lib.autograd.grad(Sq.apply(x).sum(), x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Sq.apply(x).sum().backward(create_graph=True)
    e.lib.autograd.grad(Sq.apply(x).sum(), x, create_graph=True)
    with e.lib.no_grad():
        y = x * 1
    assert seen == [False, False, True, True] and not y.requires_grad


@pytest.mark.parametrize("lib", LIBS)
def test_function_vjp_is_another_name_for_backward(lib):
    e = Env(lib)

    class ByVjp(e.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 2

        @staticmethod
        def vjp(ctx: Any, g: Any) -> Any:
            return g * 5

    class Both(ByVjp):
        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g

    x = e.ones(2, requires_grad=True)
    ByVjp.apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 5.0])
    with pytest.raises(RuntimeError, match="Implementing both 'backward' and 'vjp'"):
        Both.apply(x).sum().backward()


@pytest.mark.parametrize("lib", LIBS)
def test_function_dirty_input_must_be_returned(lib):
    # (ferrograd returned normally: the changed input kept the history of its old value, so
    # a later use of it got the wrong gradient)
    e = Env(lib)

    class F(e.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            x.mul_(2)
            ctx.mark_dirty(x)
            return x * 1

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g

    w = e.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="marked as dirty during the forward method were not"):
        F.apply(w.clone())


@pytest.mark.parametrize("lib", LIBS)
def test_function_saved_tensors_are_gone_after_a_backward_without_retain_graph(lib):
    e = Env(lib)

    class Sq(e.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = e.ones(2, requires_grad=True)
    y = Sq.apply(x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 4.0])
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
    z = Sq.apply(x).sum()
    e.lib.autograd.grad(z, x)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        e.lib.autograd.grad(z, x)
