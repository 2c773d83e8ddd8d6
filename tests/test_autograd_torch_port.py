"""Autograd behaviours found by porting PyTorch's test_autograd.py: each case runs the same
assertions against torch and ferrograd (gradient aliasing and accumulation, grad mode
contexts, the functional API under no_grad, reentrant backward in hooks, gradcheck,
grad_fn introspection, error wording)."""

import re

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")

LIBS = [pytest.param(torch, id="torch"), pytest.param(fg, id="ferrograd")]


def vals(t):
    return np.asarray(t.detach().numpy()).tolist()


@pytest.fixture(autouse=True)
def _grad_mode_restored():
    yield
    torch.set_grad_enabled(True)
    fg.set_grad_enabled(True)


# ------------------------------------------------------------ A1/A2: .grad and its aliases


@pytest.mark.parametrize("L", LIBS)
def test_seed_gradient_is_not_stolen_by_grad(L):
    g = L.ones(3)
    x = L.zeros(3, requires_grad=True)
    y = x + 2
    for _ in range(3):
        y.backward(g, retain_graph=True)
    assert vals(x.grad) == [3.0, 3.0, 3.0]
    assert vals(g) == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("L", LIBS)
def test_mutating_the_seed_after_backward_leaves_grad(L):
    x = L.zeros(3, requires_grad=True)
    g = L.ones(3)
    x.backward(g)
    with L.no_grad():
        g.add_(5)
    assert vals(x.grad) == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("L", LIBS)
def test_identity_function_and_hook_tensors_are_copied_into_grad(L):
    class Id(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g

    x = L.zeros(3, requires_grad=True)
    g = L.ones(3)
    Id.apply(x).backward(g)
    with L.no_grad():
        g.mul_(100)
    assert vals(x.grad) == [1.0, 1.0, 1.0]

    w = L.zeros(3, requires_grad=True)
    h = L.ones(3)
    w.register_hook(lambda _g: h)
    w.sum().backward()
    w.sum().backward()
    assert vals(w.grad) == [2.0, 2.0, 2.0]
    assert vals(h) == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("L", LIBS)
def test_function_returning_one_gradient_for_two_leaves(L):
    class MyFunc(L.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, g):
            return g, g

    a = L.zeros(3, requires_grad=True)
    b = L.zeros(3, requires_grad=True)
    out = MyFunc.apply(a, b)
    (out * L.tensor([1.0, 2.0, 3.0])).sum().backward()
    (a * 10).sum().backward()
    assert vals(a.grad) == [11.0, 12.0, 13.0]
    assert vals(b.grad) == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("L", LIBS)
def test_assigned_grad_is_accumulated_in_place(L):
    p = L.tensor([1.5, 1.5]).requires_grad_()
    g0 = L.tensor([1.5, 1.5])
    p.grad = g0
    p.backward(L.tensor([1.5, 1.5]))
    assert p.grad is g0
    assert vals(g0) == [3.0, 3.0]


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
@pytest.mark.parametrize("L", LIBS)
def test_create_graph_accumulates_out_of_place(L):
    x = L.ones(2, requires_grad=True)
    y = x + 2
    y.backward(L.ones(2), retain_graph=True)
    old = x.grad
    y.backward(L.ones(2), create_graph=True)
    assert vals(old) == [1.0, 1.0]
    assert vals(x.grad) == [2.0, 2.0]
    assert old is not x.grad


@pytest.mark.parametrize("L", LIBS)
def test_grad_manager_style_accumulation_does_not_alias(L):
    # (the optimizer-facing path: two parameters that got one gradient tensor stay apart)
    class Dup(L.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * 1 + b * 1

        @staticmethod
        def backward(ctx, g):
            return g, g

    p = L.zeros(3, requires_grad=True)
    q = L.zeros(3, requires_grad=True)
    Dup.apply(p, q).sum().backward()
    with L.no_grad():
        p.grad.mul_(5)
    assert vals(q.grad) == [1.0, 1.0, 1.0]


def test_grad_manager_does_not_keep_the_seed():
    w = fg.zeros(3)
    gm = fg.autodiff.GradManager().attach([w])
    dy = fg.ones(3)
    with gm:
        gm.backward(w * 1, dy)
    dy.add_(5)
    assert vals(w.grad) == [1.0, 1.0, 1.0]


# --------------------------------------------------------------------- A3/A6: grad mode


@pytest.mark.parametrize("L", LIBS)
def test_set_grad_enabled_call_inside_with_block(L):
    with L.set_grad_enabled(False):
        L.set_grad_enabled(True)
        assert L.is_grad_enabled()
    assert L.is_grad_enabled()
    with L.no_grad():
        L.set_grad_enabled(True)
    assert L.is_grad_enabled()
    L.set_grad_enabled(False)
    with L.set_grad_enabled(True):
        assert L.is_grad_enabled()
    assert not L.is_grad_enabled()
    L.set_grad_enabled(True)


@pytest.mark.parametrize("L", LIBS)
def test_grad_mode_decorators_on_generators(L):
    @L.enable_grad()
    def gen_on():
        for _ in range(2):
            yield L.is_grad_enabled()

    @L.no_grad()
    def gen_off():
        for _ in range(2):
            yield L.is_grad_enabled()

    with L.no_grad():
        inside, outside = [], []
        for v in gen_on():
            inside.append(v)
            outside.append(L.is_grad_enabled())
    assert inside == [True, True] and outside == [False, False]
    assert list(gen_off()) == [False, False]
    assert L.is_grad_enabled()


@pytest.mark.parametrize("L", LIBS)
def test_once_differentiable_backward_runs_without_grad(L):
    seen = []

    class F(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        @L.autograd.function.once_differentiable
        def backward(ctx, g):
            seen.append(L.is_grad_enabled())
            return g * 2

    x = L.ones(2, requires_grad=True)
    F.apply(x).sum().backward(create_graph=True)
    assert seen == [False]
    assert vals(x.grad) == [2.0, 2.0]


# ---------------------------------------------------------- A4: functional API in no_grad


@pytest.mark.parametrize("L", LIBS)
def test_functional_api_under_no_grad(L):
    F = L.autograd.functional
    with L.no_grad():
        _, g = F.vjp(lambda t: t.sum(dim=1), L.ones(2, 2), L.ones(2))
        _, jv = F.jvp(lambda t: t.sum(dim=1), L.ones(2, 2), L.ones(2, 2))
        jac = F.jacobian(lambda t: t * 3, L.ones(2))
        hes = F.hessian(lambda t: (t**3).sum(), L.ones(2))
        _, hv = F.hvp(lambda t: (t**3).sum(), L.ones(2), L.ones(2))
        _, vh = F.vhp(lambda t: (t**3).sum(), L.ones(2), L.ones(2))
        out, _ = F.vjp(lambda t: t * t, L.ones(2), L.ones(2), create_graph=True)
        assert not L.is_grad_enabled()
    assert vals(g) == [[1.0, 1.0], [1.0, 1.0]]
    assert vals(jv) == [2.0, 2.0]
    assert vals(jac) == [[3.0, 0.0], [0.0, 3.0]]
    assert vals(hes) == [[6.0, 0.0], [0.0, 6.0]]
    assert vals(hv) == [6.0, 6.0] and vals(vh) == [6.0, 6.0]
    assert out.grad_fn is not None


@pytest.mark.parametrize("L", LIBS)
def test_functional_api_error_wording(L):
    F = L.autograd.functional
    for fn in ("vjp", "jvp", "hessian", "vhp"):
        with pytest.raises(TypeError, match=f"The inputs given to {fn} must be either a Tensor"):
            getattr(F, fn)(lambda t: t.sum(), (L.ones(2), 3))
    with pytest.raises(
        RuntimeError, match="Output 0 of the user-provided function does not require gradients."
    ):
        F.vjp(lambda a: a.detach(), L.rand(4), L.rand(4), strict=True)


# ---------------------------------------------------------- A5: hooks and reentrant backward


@pytest.mark.parametrize("L", LIBS)
@pytest.mark.parametrize("remove", [False, True])
def test_reentrant_backward_in_a_hook(L, remove):
    param = L.ones(3, requires_grad=True)
    handle = []

    def hook(grad):
        if remove:
            handle[0].remove()
        with L.enable_grad():
            g = grad.detach().requires_grad_()
            ((g * 2) + 5).sum().backward()
        return g.grad + grad

    tmp = param * param
    handle.append(tmp.register_hook(hook))
    tmp.sum().backward()
    assert vals(param.grad) == [6.0, 6.0, 6.0]


@pytest.mark.parametrize("L", LIBS)
def test_independent_backward_inside_a_hook(L):
    x = L.ones(2, requires_grad=True)
    inner = []

    def hook(grad):
        with L.enable_grad():
            g = L.ones(2, requires_grad=True)
            (g * 3).sum().backward()
            inner.append(vals(g.grad))
        return grad

    y = x * 2
    y.register_hook(hook)
    y.sum().backward()
    assert inner == [[3.0, 3.0]]
    assert vals(x.grad) == [2.0, 2.0]


# ------------------------------------------------------------------------- A7: gradcheck


@pytest.mark.parametrize("L", LIBS)
def test_gradcheck_function_reading_a_captured_tensor(L):
    x = L.rand(3, dtype=L.float64, requires_grad=True)
    assert L.autograd.gradcheck(lambda a: x * 2, (x,))


@pytest.mark.parametrize("L", LIBS)
def test_gradcheck_non_tensor_and_empty_inputs(L):
    x = L.rand(3, 3, dtype=L.float64, requires_grad=True)

    def f(x, up):
        y = x @ x.mT + L.eye(3, dtype=L.float64)
        return y.T if up else y

    assert L.autograd.gradcheck(f, [x, True])
    a = L.randn(0, 5, dtype=L.float64, requires_grad=True)
    b = L.randn(5, 5, dtype=L.float64, requires_grad=True)
    assert L.autograd.gradcheck(lambda a, b: L.cat((a, b)), (a, b))


@pytest.mark.parametrize("L", LIBS)
def test_gradcheck_nondeterministic_backward(L):
    class F(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g * (1 + L.rand_like(g) * 1e-6)

    x = L.randn(3, dtype=L.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="Backward is not reentrant"):
        L.autograd.gradcheck(F.apply, (x,))
    assert L.autograd.gradcheck(F.apply, (x,), nondet_tol=1e-5)


# ------------------------------------------------------------------ B: grad_fn as PyTorch's


@pytest.mark.parametrize("L", LIBS)
def test_grad_fn_names(L):
    x = L.randn(2, 3, requires_grad=True)
    cases = {
        "MulBackward0": lambda: x * 2,
        "AddBackward0": lambda: x + 1,
        "SumBackward0": lambda: x.sum(),
        "MeanBackward0": lambda: x.mean(),
        "PowBackward0": lambda: x**2,
        "ViewBackward0": lambda: x.view(6),
        "ExpandBackward0": lambda: x.expand(4, 2, 3),
        "MmBackward0": lambda: x @ L.ones(3, 2),
        "CloneBackward0": lambda: x.clone(),
        "ExpBackward0": lambda: x.exp(),
    }
    for name, f in cases.items():
        y = f()
        assert y.grad_fn.name() == name
        assert type(y.grad_fn).__name__ == name
        assert y.grad_fn is y.grad_fn
        assert {y.grad_fn: 1}[y.grad_fn] == 1
    assert x.grad_fn is None


@pytest.mark.parametrize("L", LIBS)
def test_custom_function_node_name(L):
    class MyFn(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g

    y = MyFn.apply(L.rand(3, requires_grad=True))
    assert type(y.grad_fn).__name__ == "MyFnBackward"
    assert y.grad_fn.name() == "MyFnBackward"


@pytest.mark.parametrize("L", LIBS)
def test_next_functions(L):
    x = L.randn(5, 5, requires_grad=True)
    y = L.randn(5, 5, requires_grad=True)
    a = x + y
    nf = a.grad_fn.next_functions
    assert len(nf) == 2 and nf[0][1] == 0 and nf[1][1] == 0
    assert type(nf[0][0]).__name__ == "AccumulateGrad"
    assert nf[0][0].variable is x and nf[1][0].variable is y
    b = a + 5
    nf = b.grad_fn.next_functions
    assert len(nf) == 2
    assert nf[0][0] is a.grad_fn
    assert nf[1][0] is None
    c = a * L.randn(5, 5)
    assert c.grad_fn.next_functions[1] == (None, 0)


def test_grad_fn_name_attribute_and_op():
    y = fg.ones(2, requires_grad=True) * 2
    assert y.grad_fn.name == "MulBackward0" == y.grad_fn.name()
    assert y.grad_fn.op == "mul"


# ---------------------------------------------------------------------- D: error wording


@pytest.mark.parametrize("L", LIBS)
def test_error_wording(L):
    a = L.ones(3, requires_grad=True)
    b = a * a
    c = b.sum()
    c.backward()
    with pytest.raises(RuntimeError, match="Specify retain_graph=True"):
        c.backward()

    x = L.ones(1, requires_grad=True)
    z = L.ones(1, requires_grad=True)
    with pytest.raises(RuntimeError, match="Set allow_unused=True"):
        L.autograd.grad((x * 2).sum(), [x, z])

    w = L.ones(5, requires_grad=True)
    v = w.clone()
    out = v**2
    with L.no_grad():
        v.add_(1)
    with pytest.raises(
        RuntimeError,
        match="one of the variables needed for gradient computation has been modified by an "
        "inplace operation",
    ):
        out.sum().backward()

    leaf = L.ones(3, requires_grad=True)
    with pytest.raises(
        RuntimeError,
        match=re.escape(
            "a leaf Variable that requires grad is being used in an in-place operation."
        ),
    ):
        leaf += 1

    m = L.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        L.autograd.grad((m * 2,), (m,), (L.ones(2),))


@pytest.mark.parametrize("L", LIBS)
def test_invalid_gradient_shape_from_a_function(L):
    class MyFunction(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return L.randn(10, dtype=g.dtype)

    x = L.randn(5, 5, requires_grad=True)
    with pytest.raises(RuntimeError, match="expected shape"):
        MyFunction.apply(x).sum().backward()


@pytest.mark.parametrize("L", LIBS)
def test_anomaly_mode_names_the_function_returning_nan(L):
    class MyFunc(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")

    x = L.randn(4, requires_grad=True)
    with pytest.warns(UserWarning) if L is torch else _nothing(), L.autograd.detect_anomaly():
        out = MyFunc.apply(x)
        with pytest.raises(
            RuntimeError,
            match="Function 'MyFuncBackward' returned nan values in its 0th output.",
        ):
            out.sum().backward()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("L", LIBS)
def test_gradgradcheck_non_tensor_inputs_and_nondet_tol(L):
    x = L.rand(3, 3, dtype=L.float64, requires_grad=True)

    def f(x, scale):
        return (x * x).sum(1) * scale

    assert L.autograd.gradgradcheck(f, [x, 2.0])

    class NonDet(L.autograd.Function):
        @staticmethod
        def forward(ctx, x, jitter):
            ctx.jitter = jitter
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return NonDet.apply(g, ctx.jitter) * (1 + L.rand_like(g) * ctx.jitter), None

    assert L.autograd.gradgradcheck(lambda a: NonDet.apply(a, 1e-12), x, nondet_tol=1e-5)


@pytest.mark.parametrize("L", LIBS)
def test_gradcheck_output_that_does_not_require_grad(L):
    x = L.rand(3, dtype=L.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="Numerical gradient for function expected to be zero"):
        L.autograd.gradcheck(lambda a: a.detach() * 2, (x,))


@pytest.mark.parametrize("L", LIBS)
def test_backward_inputs_does_not_alias_the_seed(L):
    x = L.zeros(3, requires_grad=True)
    g = L.ones(3)
    y = x + 2
    y.backward(g, inputs=[x], retain_graph=True)
    first = x.grad
    y.backward(g, inputs=[x])
    assert vals(g) == [1.0, 1.0, 1.0]
    assert vals(x.grad) == [2.0, 2.0, 2.0]
    assert first is x.grad


@pytest.mark.parametrize("seed_dtype", ["float64", "int64", "float16"])
def test_backward_casts_a_gradient_of_another_dtype_to_the_output_dtype(seed_dtype):
    # PyTorch casts the seed gradient to the output's dtype, for backward and autograd.grad
    out = {}
    for T in (torch, fg):
        x = T.tensor([1.0, 2.0, 3.0]).requires_grad_()
        (x * x).backward(T.tensor([1, 2, 3], dtype=getattr(T, seed_dtype)))
        w = T.tensor([1.0, 2.0]).requires_grad_()
        (g,) = T.autograd.grad(w * 3, w, T.tensor([2, 1], dtype=getattr(T, seed_dtype)))
        out[T.__name__] = (vals(x.grad), str(x.grad.dtype).split(".")[-1], vals(g))
    assert out["ferrograd"] == out["torch"]
