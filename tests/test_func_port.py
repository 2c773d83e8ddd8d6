"""torch.func / torch.autograd.functional behaviour ported from PyTorch's own tests: results
detached unless an enclosing computation differentiates them, pytree arguments and outputs,
vmap's options and errors, functional_call with tied weights (float64, against PyTorch)."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
A = RNG.standard_normal(3)
B = RNG.standard_normal(3)
M = RNG.standard_normal((8, 4))


def F(a, **kw):
    return fg.tensor(np.asarray(a, np.float64), **kw)


def T(a, **kw):
    return torch.tensor(np.asarray(a, np.float64), **kw)


def _same(a, b):
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
        return
    if isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for p, q in zip(a, b):
            _same(p, q)
        return
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------ results are plain tensors


def test_transform_results_carry_no_graph_when_nothing_outside_differentiates():
    for lib, mk in ((fg, F), (torch, T)):
        X = mk(M)

        def f(w, X=X, lib=lib):
            return ((X @ w - 1.0) ** 2).mean()

        w = mk(np.zeros(4))
        fn = lib.func
        g, v = fn.grad_and_value(f)(w)
        out, vjp_fn = fn.vjp(f, w)
        jv = fn.jvp(f, (w,), (mk(np.ones(4)),))
        res = [g, v, fn.grad(f)(w), out, vjp_fn(mk(1.0))[0], *jv, fn.jacrev(f)(w)]
        res += [fn.hessian(f)(w), fn.jacfwd(fn.jacrev(f))(w)]
        assert [r.requires_grad for r in res] == [False] * len(res), lib.__name__
        assert all(r.grad_fn is None for r in res)
        for _ in range(50):
            w = w - 0.1 * fn.grad(f)(w)
        assert not w.requires_grad


def test_grad_results_keep_graph_for_outer_differentiation():
    # a requires-grad input, a captured requires-grad tensor and MAML-style nesting
    res = {}
    for lib, mk in ((fg, F), (torch, T)):
        x = mk(A, requires_grad=True)
        c = mk(B, requires_grad=True)
        f = lambda y, c=c, lib=lib: (lib.sin(y) * c).sum()
        g = lib.func.grad(f)(x)
        assert g.requires_grad
        (g**2).sum().backward()
        inner = lib.func.grad(lambda y, c=c: ((y * c) ** 2).sum())
        h = lib.func.grad(lambda y, inner=inner: (y - 0.1 * inner(y)).pow(3).sum())(mk(A))
        res[lib] = (x.grad, c.grad, h)
    _same(res[fg], res[torch])


def test_nested_transforms_still_differentiate():
    res = {}
    for lib, mk in ((fg, F), (torch, T)):
        fn = lib.func
        f = lambda x, lib=lib: (lib.sin(x) * x**2).sum()
        x = mk(A)
        v = mk(B)
        res[lib] = (
            fn.grad(fn.grad(lambda s, f=f, x=x: f(x * s)))(mk(0.7)),
            fn.jacrev(fn.jacrev(f))(x),
            fn.jvp(fn.grad(f), (x,), (v,))[1],
            fn.vjp(fn.grad(f), x)[1](v)[0],
            fn.vmap(fn.grad(f))(mk(M[:, :3])),
        )
    _same(res[fg], res[torch])


# ------------------------------------------------------------------------------- pytrees


def test_jacobians_of_a_tuple_argument_have_its_structure():
    res = {}
    for lib, mk in ((fg, F), (torch, T)):
        fn = lib.func
        xy = (mk(A), mk(B))
        res[lib] = (
            fn.jacrev(lambda t: t[0] * t[1])(xy),
            fn.jacfwd(lambda t: t[0] * t[1])(xy),
            fn.hessian(lambda t: (t[0] * t[1] ** 2).sum())(xy),
            fn.jacrev(lambda d: {"o": d["a"] * 2, "p": (d["a"] * d["b"]).sum()})(
                {"a": mk(A), "b": mk(B)}
            ),
            fn.jacrev(lambda x, t: x * t[0] + t[1], argnums=(0, 1))(mk(A), xy),
        )
    assert isinstance(res[fg][0], tuple) and len(res[fg][0]) == 2
    _same(res[fg], res[torch])


def test_jacrev_with_respect_to_a_parameter_dict():
    res = {}
    for lib in (fg, torch):
        lib.manual_seed(0)
        m = lib.nn.Linear(3, 2).double()
        with lib.no_grad():
            m.weight.copy_(lib.tensor(M[:2, :3].copy()))
            m.bias.copy_(lib.tensor(A[:2].copy()))
        params = {k: v.detach() for k, v in m.named_parameters()}
        x = lib.tensor(M[2:5, :3].copy())
        res[lib] = lib.func.jacrev(
            lambda p, m=m, x=x, lib=lib: lib.func.functional_call(m, p, (x,))
        )(params)
    _same(res[fg], res[torch])


def test_vjp_and_jvp_take_pytree_primals_and_outputs():
    res = {}
    for lib, mk in ((fg, F), (torch, T)):
        fn = lib.func
        x = mk(A)
        out, f = fn.vjp(lambda x: {"a": x.sin(), "b": (x, x * x)}, x)
        res[lib] = (
            out,
            f({"a": mk(B), "b": (mk(B), mk(A))}),
            fn.vjp(lambda t: t[0] * t[1], (x, mk(B)))[1](mk(A)),
            fn.jvp(lambda t: t[0] * t[1], ((x, mk(B)),), ((mk(B), mk(A)),)),
            fn.linearize(lambda x: x.sin() * x, x)[0],
            fn.linearize(lambda x: x.sin() * x, x)[1](mk(B)),
        )
    _same(res[fg], res[torch])


# ---------------------------------------------------------------------------------- vmap


def test_vmap_options_match_torch():
    res = {}
    x, y = M[:3], M[3, :]
    for lib, mk in ((fg, F), (torch, T)):
        v = lib.func.vmap
        yy = mk(y)
        res[lib] = (
            v(lambda t, other: t * other)(mk(x), other=mk(y)),
            v(lambda t: t[0] * t[1], in_dims=((0, None),))((mk(x), mk(y))),
            v(lambda d: d["a"] + d["b"], in_dims=({"a": 0, "b": 1},))({"a": mk(x), "b": mk(x.T)}),
            v(lambda t: t * 2)(mk(np.ones((0, 3)))),
            v(lambda t, c=yy: (t, c), out_dims=(1, None))(mk(x)),
            v(lambda t: t * 2, in_dims=-1, out_dims=-1)(mk(x)),
        )
    assert tuple(res[fg][4][1].shape) == (4,)
    _same(res[fg], res[torch])


@pytest.mark.parametrize("lib", [fg, torch], ids=["ferrograd", "torch"])
def test_vmap_errors_as_torch(lib):
    v = lib.func.vmap
    x = lib.zeros(3)
    with pytest.raises(RuntimeError):
        v(lambda a, b: a.add_(b), in_dims=(None, 0))(x, lib.ones(2, 3))
    with pytest.raises(RuntimeError, match="randomness"):
        v(lambda t: t + lib.randn(()))(lib.zeros(3))
    with pytest.raises(ValueError, match="in_dim"):
        v(lambda t: t, in_dims=2)(lib.ones(3, 4))
    with pytest.raises(ValueError, match="must only return Tensors"):
        v(lambda t: 3)(lib.ones(3))
    with pytest.raises(RuntimeError, match="randomness"):
        v(lambda t: t, randomness="bogus")(lib.ones(3))


def test_vmap_randomness_same_and_different():
    fg.manual_seed(0)
    same = fg.func.vmap(lambda t: t * 0 + fg.rand(()), randomness="same")(fg.zeros(4))
    assert len(set(same.tolist())) == 1
    diff = fg.func.vmap(lambda t: t * 0 + fg.rand(()), randomness="different")(fg.zeros(4))
    assert len(set(diff.tolist())) == 4


def test_stack_module_state_ensembling_as_torch_tutorial():
    res = {}
    xs = RNG.standard_normal((5, 3))
    for lib in (fg, torch):
        lib.manual_seed(0)
        models = [lib.nn.Linear(3, 2).double() for _ in range(4)]
        with lib.no_grad():
            for i, m in enumerate(models):
                m.weight.copy_(lib.tensor(M[i : i + 2, :3].copy()))
                m.bias.copy_(lib.tensor(M[i + 4, :2].copy()))
        params, buffers = lib.func.stack_module_state(models)
        assert tuple(params["weight"].shape) == (4, 2, 3)
        assert params["weight"].requires_grad and params["weight"].is_leaf
        base = models[0]

        def fmodel(p, b, x, base=base, lib=lib):
            return lib.func.functional_call(base, (p, b), (x,))

        res[lib] = lib.func.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, lib.tensor(xs))
    _same(res[fg], res[torch])


# ----------------------------------------------------------------------- errors as torch's


@pytest.mark.parametrize("lib", [fg, torch], ids=["ferrograd", "torch"])
def test_func_argument_errors_are_runtime_errors(lib):
    x, y = lib.ones(()), lib.ones(())
    fn = lib.func
    with pytest.raises(RuntimeError):
        fn.grad(lib.mul, argnums=2)(x, y)
    with pytest.raises(RuntimeError, match="unique"):
        fn.grad(lib.mul, argnums=(0, 0))(x, y)
    with pytest.raises(RuntimeError, match="int or Tuple"):
        fn.grad(lib.mul, argnums=[0])(x, y)
    with pytest.raises(RuntimeError, match="same python structure"):
        fn.jvp(lib.sin, (x,), (x, x))
    with pytest.raises(RuntimeError, match="Expected tensors"):
        fn.grad(lambda x: (x.sum(), 1.0), has_aux=True)(x)


# ------------------------------------------------------------------------- functional_call


def _tied(lib):
    class Tied(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = lib.nn.Linear(2, 2, bias=False)
            self.b = lib.nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight
            self.register_buffer("buf", lib.ones(2, dtype=lib.float64))

        def forward(self, x):
            return self.a(x) + self.b(x) + self.buf

    return Tied().double()


def test_functional_call_replaces_tied_weights_under_every_name():
    res = {}
    for lib, mk in ((fg, F), (torch, T)):
        m = _tied(lib)
        x = mk([[1.0, 2.0]])
        e = mk(M[:2, :2])
        fc = lib.func.functional_call
        res[lib] = (
            fc(m, {"a.weight": e}, (x,)),
            fc(m, {"b.weight": e}, (x,)),
            fc(m, {"a.weight": e, "b.weight": e}, (x,)),
            fc(m, ({"a.weight": e}, {"buf": mk(B[:2])}), (x,), strict=True),
        )
        assert m.a.weight is m.b.weight
    _same(res[fg], res[torch])


@pytest.mark.parametrize("lib", [fg, torch], ids=["ferrograd", "torch"])
def test_functional_call_tie_and_strict_errors(lib):
    m = _tied(lib)
    x = lib.ones(1, 2, dtype=lib.float64)
    e = lib.eye(2, dtype=lib.float64)
    fc = lib.func.functional_call
    with pytest.raises(ValueError, match="tied"):
        fc(m, {"a.weight": e, "b.weight": 2 * e}, (x,))
    with pytest.raises(RuntimeError, match="Missing key.*'buf'"):
        fc(m, {"a.weight": e}, (x,), strict=True)
    with pytest.raises(RuntimeError, match="Missing key.*'b.weight'"):
        fc(m, {"a.weight": e, "buf": e[0]}, (x,), strict=True, tie_weights=False)
    with pytest.raises(RuntimeError, match="Unexpected key.*'zz'"):
        fc(m, {"a.weight": e, "buf": e[0], "zz": e}, (x,), strict=True)
    with pytest.raises(ValueError, match="multiple dictionaries"):
        fc(m, ({"a.weight": e}, {"a.weight": e}), (x,))
    # tie_weights=False: only the given name changes
    base = m(x)
    got = fc(m, {"a.weight": e}, (x,), tie_weights=False)
    want = x @ e.T + (base - x @ m.a.weight.T - m.buf) + m.buf
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)


# ------------------------------------------------------------ torch.autograd.functional


@pytest.mark.parametrize("lib", [fg, torch], ids=["ferrograd", "torch"])
def test_autograd_functional_strict_and_argument_errors(lib):
    AF = lib.autograd.functional
    inp = lib.ones(4, dtype=lib.float64)
    lin = lambda a: (3 * a).sum()
    with pytest.raises(RuntimeError, match="does not require gradients"):
        AF.jacobian(lambda a: a.detach(), inp, strict=True)
    with pytest.raises(RuntimeError, match="independent of input 1"):
        AF.jacobian(lambda a, b: a * 2, (inp, inp), strict=True)
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function"):
        AF.hessian(lin, inp, strict=True)
    with pytest.raises(RuntimeError, match="Output 1 .* independent of input 1"):
        AF.hessian(lambda a, b: (a.sin() * b).sum(), (inp, inp), strict=True)
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function"):
        AF.hvp(lin, inp, lib.ones(4, dtype=lib.float64), strict=True)
    with pytest.raises(RuntimeError, match="independent of input 0"):
        AF.vjp(lambda a: lib.ones(4, dtype=lib.float64).requires_grad_() * 2, inp, inp, strict=True)
    with pytest.raises(RuntimeError, match="should contain a single Tensor"):
        AF.jvp(lambda a: 3 * a, inp, (inp, inp))
    with pytest.raises(RuntimeError, match="invalid length"):
        AF.vjp(lambda a, b: (a, b), (inp, inp), (inp,))
    with pytest.raises(RuntimeError, match="v has invalid size"):
        AF.vjp(lambda a: a * 2, inp, lib.ones(3, dtype=lib.float64))
    with pytest.raises(NotImplementedError):
        AF.jacobian(lambda a: 2 * a, inp, strategy="forward-mode")
    with pytest.raises(RuntimeError, match="not supported together"):
        AF.jacobian(lambda a: 2 * a, inp, strict=True, vectorize=True)


def test_autograd_functional_strict_values_match_torch():
    res = {}
    for lib, mk in ((fg, F), (torch, T)):
        AF = lib.autograd.functional
        f = lambda a, b: (a.sin() * b**2 * a).sum()
        ab = (mk(A), mk(B))
        res[lib] = (
            AF.jacobian(lambda a: a.sin() * a, mk(A), strict=True),
            AF.hessian(f, ab, strict=True),
            AF.vjp(f, ab, strict=True),
            AF.jvp(lambda a: a.exp(), mk(A), mk(B), strict=True),
            AF.hvp(lambda a: (a**3).sum(), mk(A), mk(B), strict=True),
        )
    _same(res[fg], res[torch])


@pytest.mark.parametrize("lib", [fg, torch], ids=["ferrograd", "torch"])
def test_func_output_errors_as_torch(lib):
    x = lib.ones(3, dtype=lib.float64)
    fn = lib.func
    with pytest.raises(RuntimeError, match="scalar Tensor"):
        fn.grad(lambda t: t * 2)(x)
    with pytest.raises(RuntimeError, match="scalar Tensor"):
        fn.grad(lambda t: t.sum().reshape(1))(x)
    with pytest.raises(RuntimeError, match="should be a tuple"):
        fn.grad(lambda t: [t.sum(), t], has_aux=True)(x)
    with pytest.raises(RuntimeError, match="non-empty output"):
        fn.vjp(lambda t: None, x)
    with pytest.raises(RuntimeError, match="only tensors"):
        fn.vjp(lambda t: 1.0, x)
    with pytest.raises(RuntimeError, match="different size"):
        fn.jvp(lib.sin, (x,), (lib.ones(1, dtype=lib.float64),))
    with pytest.raises(ValueError, match="at least one Tensor"):
        fn.vmap(lambda a, b: a, in_dims=(None, None))(x, x)
    AF = lib.autograd.functional
    bar = lambda a: a.long().double().requires_grad_().clone().sum()
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function"):
        AF.hessian(bar, x, strict=True)
    with pytest.raises(RuntimeError, match="independent of input 0"):
        AF.vhp(bar, x, x, strict=True)
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function is indep"):
        AF.jvp(
            lambda a: a.clone(), x.requires_grad_(), x.detach() * 2, create_graph=True, strict=True
        )


def test_maml_meta_gradient_through_func_grad_matches_torch():
    res = {}
    xs, ys = M[:4, :3], M[4:8, 0]
    for lib in (fg, torch):
        w = lib.tensor(A.copy(), requires_grad=True)
        X, Y = lib.tensor(xs.copy()), lib.tensor(ys.copy())

        def loss(p, X=X, Y=Y, lib=lib):
            return ((lib.tanh(X @ p) - Y) ** 2).mean()

        adapted = w - 0.5 * lib.func.grad(loss)(w)
        adapted = adapted - 0.5 * lib.func.grad(loss)(adapted)
        loss(adapted).backward()
        inner = lib.func.grad(
            lambda p, lib=lib: lib.func.vmap(lib.func.grad(loss))(p.expand(2, 3)).sum()
        )(lib.tensor(B.copy()))
        res[lib] = (w.grad, inner)
    _same(res[fg], res[torch])
    # the meta-gradient against central differences
    eps = 1e-6

    def outer(p):
        X, Y = xs, ys

        def g(q):
            t = np.tanh(X @ q)
            return X.T @ (2 * (t - Y) * (1 - t**2)) / len(Y)

        q = p - 0.5 * g(p)
        q = q - 0.5 * g(q)
        return np.mean((np.tanh(X @ q) - Y) ** 2)

    fd = [(outer(A + eps * e) - outer(A - eps * e)) / (2 * eps) for e in np.eye(3)]
    np.testing.assert_allclose(res[fg][0].numpy(), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("lib", [fg, torch], ids=["ferrograd", "torch"])
def test_inplace_write_of_transformed_value_into_captured_tensor_raises(lib):
    x = lib.tensor(A.copy())
    captured = lib.zeros(3, dtype=lib.float64)

    def foo(t):
        captured.copy_(t)
        return (t * captured).sum()

    with pytest.raises(RuntimeError, match="mutate a captured Tensor"):
        lib.func.grad(foo)(x)
    with pytest.raises(RuntimeError, match="mutate a captured Tensor"):
        lib.func.jvp(foo, (x,), (lib.ones(3, dtype=lib.float64),))
    counter = lib.zeros(1, dtype=lib.float64)

    def bar(t):
        counter.add_(1)
        return (t * t).sum()

    with pytest.raises(RuntimeError, match="mutate a captured Tensor"):
        lib.func.grad(bar)(x)
    fresh = lambda t: (t * lib.zeros(3, dtype=lib.float64).add_(2)).sum()
    np.testing.assert_allclose(lib.func.grad(fresh)(x).numpy(), np.full(3, 2.0))


def test_results_of_transforms_over_nested_transforms_are_plain():
    # the inner transforms make their own leaves (jvp's, one for a constant argument): the
    # outer results still carry no graph, and their values match torch's
    res = {}
    for lib, mk in ((fg, F), (torch, T)):
        fn = lib.func
        x, v, c = mk(A), mk(np.ones(3)), mk(B)
        out = (
            fn.grad(lambda x, v=v, fn=fn: fn.jvp(lambda y: (y.sin() * y).sum(), (x,), (v,))[1])(x),
            fn.grad(lambda x, c=c, fn=fn: fn.grad(lambda k: (k * x).sum() * x.sum())(c).sum())(x),
            fn.jacrev(lambda x, fn=fn: fn.vjp(lambda y: y.sin(), x)[1](x)[0])(x),
            fn.grad(lambda x, c=c, fn=fn: (fn.grad(lambda k: (k**2 * x).sum())(c) * x).sum())(x),
        )
        assert [t.requires_grad for t in out] == [False] * 4, lib.__name__
        res[lib] = out
    _same(res[fg], res[torch])
