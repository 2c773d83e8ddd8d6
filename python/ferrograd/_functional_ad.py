"""Function transforms over ferrograd's tape: PyTorch's ``torch.autograd.functional``
(``vjp``, ``jvp``, ``jacobian``, ``hessian``, ``hvp``, ``vhp``), ``torch.autograd.gradcheck``
/ ``gradgradcheck``, and ``torch.func`` (``grad``, ``grad_and_value``, ``vjp``, ``jvp``,
``jacrev``, ``jacfwd``, ``hessian``, ``vmap``, ``functional_call``).

Everything is reverse mode on the same tape as ``Tensor.backward``: a forward-mode product
(``jvp``, ``jacfwd``) is the derivative of a vector-Jacobian product (the "double vjp"), so
its values equal PyTorch's forward mode; Jacobians are built one output row at a time.
``vmap`` maps the function over the batch axis one slice at a time and stacks the results
(correct for any function, including ``grad`` inside it: per-sample gradients; not
vectorized).

Like PyTorch's, ``torch.func`` results are plain tensors (no graph) unless an enclosing
transform is running or their graph reaches a tensor outside the transform that requires
grad (a requires-grad argument, a captured parameter): then the enclosing computation can
differentiate through them. Arguments, outputs and cotangents may be pytrees (tensors in
dicts, lists and tuples)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from . import _core
from ._core import Tensor

# ---------------------------------------------------------------------------------- helpers


def _tuple(op: str, name: str, x: Any) -> tuple[bool, tuple]:
    """``x`` as a tuple of tensors and whether it was given as a tuple."""
    if isinstance(x, Tensor):
        return False, (x,)
    if isinstance(x, (tuple, list)) and all(isinstance(t, Tensor) for t in x):
        return True, tuple(x)
    what = (
        f"The {name} given to {op}"
        if name in ("inputs", "v")
        else f"The outputs of the user-provided function given to {op}"
    )
    bad = type(x).__name__
    if isinstance(x, (tuple, list)):
        i = next(i for i, t in enumerate(x) if not isinstance(t, Tensor))
        bad = f"{type(x).__name__} whose item {i} is a {type(x[i]).__name__}"
    raise TypeError(
        f"{op}: {what} must be either a Tensor or a tuple of Tensors ({name} must be a Tensor "
        f"or a tuple of Tensors), got {bad}"
    )


def _grad_on(fn: Callable) -> Callable:
    """``fn`` runs with grad mode on (PyTorch's functional API differentiates also when
    called under ``no_grad``)."""
    import functools

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        from .autodiff import enable_grad

        with enable_grad():
            return fn(*args, **kwargs)

    return wrapped


def _check_strict(op: str, outs: tuple, strict: bool) -> None:
    if strict:
        for i, o in enumerate(outs):
            if not o.requires_grad:
                raise RuntimeError(
                    f"{op}: Output {i} of the user-provided function does not require "
                    "gradients. The outputs must be computed in a differentiable manner from "
                    "the input when running in strict mode."
                )


def _prepare(inputs: tuple, create_graph: bool) -> tuple:
    """Inputs that require grad: differentiable continuations of the originals when a graph
    is wanted and they are tracked, else fresh detached leaves."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t * 1)  # (a new node on the tape: gradients still reach the original)
        else:
            out.append(t.detach().requires_grad_(True))
    return tuple(out)


def _grads(
    outputs: tuple,
    inputs: tuple,
    grad_outputs: tuple,
    create_graph: bool,
    retain: bool = True,
    strict: Callable[[int], str] | None = None,
) -> tuple:
    """d(sum <outputs, grad_outputs>)/d inputs, zeros for inputs the outputs do not reach
    (with ``strict``, a RuntimeError with ``strict(i)`` for such an input ``i``)."""
    from .autograd import grad

    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        if strict is not None and inputs:
            raise RuntimeError(strict(0))
        return tuple(_core.zeros_like(x) for x in inputs)
    got = grad(
        [o for o, _ in pairs],
        list(inputs),
        grad_outputs=[g for _, g in pairs],
        retain_graph=retain or create_graph,
        create_graph=create_graph,
        allow_unused=True,
    )
    if strict is not None:
        for i, g in enumerate(got):
            if g is None:
                raise RuntimeError(strict(i))
    return tuple(_core.zeros_like(x) if g is None else g for g, x in zip(got, inputs))


def _strict_msg(op: str, text: str) -> Callable[[int], str]:
    return lambda i: f"{op}: " + text.format(i=i) + " This is not allowed in strict mode."


def _independent(op: str, strict: bool) -> Callable[[int], str] | None:
    text = "The output of the user-provided function is independent of input {i}."
    return _strict_msg(op, text) if strict else None


def _check_v(op: str, vs: tuple, refs: tuple, ref_tuple: bool, what: str) -> None:
    """``v`` must give one tensor of each shape of ``refs`` (PyTorch's RuntimeErrors)."""
    if len(vs) != len(refs):
        if not ref_tuple:
            raise RuntimeError(
                f"{op}: The given v should contain a single Tensor (one per {what}), got {len(vs)}"
            )
        raise RuntimeError(
            f"{op}: v is a tuple of invalid length: should be {len(refs)} but got {len(vs)}"
        )
    for k, (v, r) in enumerate(zip(vs, refs)):
        if tuple(v.shape) != tuple(r.shape):
            raise RuntimeError(
                f"{op}: v has invalid size: should be {_size(r)} but got {_size(v)} (entry {k} "
                f"of v, for the {what} of that shape)"
            )


def _size(t: Tensor) -> str:
    from ._torch_more import Size

    return repr(Size(t.shape))


def _check_graph_kept(op: str, gs: tuple, strict: bool, create_graph: bool) -> None:
    """With ``strict`` and ``create_graph``, every gradient must depend on the inputs."""
    if strict and create_graph:
        for i, g in enumerate(gs):
            if not g.requires_grad:
                raise RuntimeError(
                    f"{op}: The jacobian of the user-provided function is independent of input "
                    f"{i}. This is not allowed in strict mode when create_graph=True."
                )


def _check_grads_tracked(op: str, gs: tuple, strict: bool) -> None:
    if strict:
        for i, g in enumerate(gs):
            if not g.requires_grad:
                raise RuntimeError(
                    f"{op}: While computing the hessian, found that the jacobian of the "
                    f"user-provided function with respect to input {i} is independent of the "
                    "input. This is not allowed in strict mode."
                )


def _finish(ts: tuple, create_graph: bool) -> tuple:
    return ts if create_graph else tuple(t.detach() for t in ts)


def _call(op: str, func: Callable, inputs: tuple) -> tuple[bool, tuple]:
    out = func(*inputs)
    return _tuple(op, "the function's output", out)


def _ones_like_scalar(op: str, outs: tuple) -> tuple:
    for o in outs:
        if o.numel() != 1:
            raise RuntimeError(
                f"{op}: the function returns a tensor of shape {list(o.shape)}, not a single "
                "element: give v (The vector v can only be None if the user-provided function "
                "returns a single Tensor with a single element.)"
            )
    return tuple(_core.ones_like(o) for o in outs)


# ------------------------------------------------------------- torch.autograd.functional


@_grad_on
def vjp(
    func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False
) -> tuple[Any, Any]:
    """``(func(*inputs), v^T J)``: the vector-Jacobian product at ``inputs``."""
    in_tuple, xs = _tuple("vjp", "inputs", inputs)
    xs = _prepare(xs, create_graph)
    out_tuple, ys = _call("vjp", func, xs)
    _check_strict("vjp", ys, strict)
    if v is None:
        vs = _ones_like_scalar("vjp", ys)
    else:
        vs = _tuple("vjp", "v", v)[1]
        _check_v("vjp", vs, ys, out_tuple, "output")
    msg = (
        _strict_msg("vjp", "The output of the user-provided function is independent of input {i}.")
        if strict
        else None
    )
    g = _grads(ys, xs, vs, create_graph, strict=msg)
    _check_graph_kept("vjp", g, strict, create_graph)
    g = _finish(g, create_graph)
    ys = _finish(ys, create_graph)
    return (ys if out_tuple else ys[0]), (g if in_tuple else g[0])


@_grad_on
def jvp(
    func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False
) -> tuple[Any, Any]:
    """``(func(*inputs), J v)``: the Jacobian-vector product at ``inputs`` (the derivative
    of ``u -> u^T J`` along ``v``)."""
    _in_tuple, xs = _tuple("jvp", "inputs", inputs)
    if v is None:
        if any(x.numel() != 1 for x in xs):
            raise RuntimeError(
                "jvp: the inputs are not single elements: give v (The vector v can only be "
                "None if the input to the user-provided function is a single Tensor with a "
                "single element.)"
            )
        vs = tuple(_core.ones_like(x) for x in xs)
    else:
        vs = _tuple("jvp", "v", v)[1]
        _check_v("jvp", vs, xs, _in_tuple, "input")
    xs = _prepare(xs, create_graph)
    out_tuple, ys = _call("jvp", func, xs)
    _check_strict("jvp", ys, strict)
    us = tuple(_core.zeros_like(y).requires_grad_(True) for y in ys)
    msg1 = (
        _strict_msg("jvp", "The output of the user-provided function is independent of input {i}.")
        if strict
        else None
    )
    gx = _grads(ys, xs, us, True, strict=msg1)  # u^T J, linear in u
    msg2 = (
        _strict_msg(
            "jvp",
            "The gradient with respect to the input is independent of entry {i} in the "
            "grad_outputs when using the double backward trick to compute forward mode "
            "gradients.",
        )
        if strict
        else None
    )
    jv = _grads(gx, us, vs, create_graph, strict=msg2)
    _check_graph_kept("jvp", jv, strict, create_graph)
    return (_finish(ys, create_graph) if out_tuple else _finish(ys, create_graph)[0]), (
        _finish(jv, create_graph) if out_tuple else _finish(jv, create_graph)[0]
    )


@_grad_on
def jacobian(
    func: Callable,
    inputs: Any,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    strategy: str = "reverse-mode",
) -> Any:
    """The Jacobian of ``func`` at ``inputs``: for each output and input, a tensor of shape
    ``output.shape + input.shape`` (nested tuples as PyTorch's when either is a tuple)."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(
            f"jacobian: strategy must be 'reverse-mode' or 'forward-mode', got {strategy!r}"
        )
    if strategy == "forward-mode" and not vectorize:
        raise NotImplementedError(
            "jacobian: Computing Jacobian using forward-AD or forward-over-reverse Hessian is "
            "only implemented for `vectorize=True`."
        )
    if strict and vectorize:
        raise RuntimeError(
            "jacobian: `strict=True` and `vectorized=True` are not supported together. Please "
            "either set `strict=False` or `vectorize=False`."
        )
    in_tuple, xs = _tuple("jacobian", "inputs", inputs)
    xs = _prepare(xs, create_graph)
    out_tuple, ys = _call("jacobian", func, xs)
    _check_strict("jacobian", ys, strict)
    per_output = []
    for j_out, y in enumerate(ys):
        msg = (
            _strict_msg(
                "jacobian",
                f"Output {j_out} of the user-provided function is independent of input {{i}}.",
            )
            if strict
            else None
        )
        rows: list[list[Tensor]] = [[] for _ in xs]
        flat = y.reshape(-1)
        n = flat.numel()
        for i in range(n):
            seed = np.zeros(n, dtype=np.float64)
            seed[i] = 1.0
            s = _from_numpy(seed.reshape(y.shape), y)
            gs = _grads((y,), xs, (s,), create_graph, strict=msg)
            _check_graph_kept("jacobian", gs, strict, create_graph)
            for k, g in enumerate(gs):
                rows[k].append(g)
        blocks = []
        for k, x in enumerate(xs):
            if n:
                j = _core.stack(rows[k], 0).reshape(*y.shape, *x.shape)
            else:
                j = _core.zeros((*y.shape, *x.shape), dtype=x.dtype.name, device=x.device)
            if strategy == "forward-mode" and j.dtype != y.dtype and y.dtype.kind == "f":
                # (PyTorch's forward mode gives the output's dtype, reverse mode the input's)
                j = j.astype(y.dtype.name)
            blocks.append(j if create_graph else j.detach())
        per_output.append(tuple(blocks) if in_tuple else blocks[0])
    return tuple(per_output) if out_tuple else per_output[0]


def _from_numpy(a: np.ndarray, like: Tensor) -> Tensor:
    from ._tensor import tensor

    return tensor(a, device=like.device).astype(like.dtype.name)


@_grad_on
def hessian(
    func: Callable,
    inputs: Any,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    outer_jacobian_strategy: str = "reverse-mode",
) -> Any:
    """The Hessian of a function returning one element: ``jacobian`` of its gradient."""
    if outer_jacobian_strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(
            "hessian: outer_jacobian_strategy must be 'reverse-mode' or 'forward-mode', got "
            f"{outer_jacobian_strategy!r}"
        )
    if outer_jacobian_strategy == "forward-mode" and not vectorize:
        raise NotImplementedError(
            "hessian: Computing Jacobian using forward-AD or forward-over-reverse Hessian is "
            "only implemented for `vectorize=True`."
        )
    if strict and vectorize:
        raise RuntimeError(
            "hessian: `strict=True` and `vectorized=True` are not supported together. Please "
            "either set `strict=False` or `vectorize=False`."
        )
    in_tuple, xs = _tuple("hessian", "inputs", inputs)

    def gradient(*args: Tensor) -> Any:
        _, ys = _call("hessian", func, args)
        if len(ys) != 1:
            raise RuntimeError(
                f"hessian: The function given to hessian should return a single Tensor, got {len(ys)}"
            )
        if ys[0].numel() != 1:
            raise RuntimeError(
                "hessian: the function must return a single-element tensor (The Tensor returned "
                "by the function given to hessian should contain a single element)"
            )
        _check_strict("hessian", ys, strict)
        g = _grads(
            ys,
            args,
            (_core.ones_like(ys[0]),),
            True,
            strict=_strict_msg(
                "hessian",
                "While computing the hessian, found that the jacobian of the user-provided "
                "function with respect to input {i} is independent of the input.",
            )
            if strict
            else None,
        )
        _check_grads_tracked("hessian", g, strict)
        return g if in_tuple else g[0]

    return jacobian(gradient, xs if in_tuple else xs[0], create_graph=create_graph, strict=strict)


def _vhp(
    op: str, func: Callable, inputs: Any, v: Any, create_graph: bool, strict: bool
) -> tuple[Any, Any]:
    """``(func(*inputs), v^T H)`` for a function returning one element; ``op`` names the
    public function in errors."""
    in_tuple, xs = _tuple(op, "inputs", inputs)
    if v is None:
        if any(x.numel() != 1 for x in xs):
            raise RuntimeError(
                f"{op}: the inputs are not single elements: give v (The vector v can only be "
                "None if the input to the user-provided function is a single Tensor with a "
                "single element.)"
            )
        vs = tuple(_core.ones_like(x) for x in xs)
    else:
        vs = _tuple(op, "v", v)[1]
        _check_v(op, vs, xs, in_tuple, "input")
    xs = _prepare(xs, create_graph)
    _, ys = _call(op, func, xs)
    if len(ys) != 1:
        raise RuntimeError(
            f"{op}: The function given to {op} should return a single Tensor, got {len(ys)}"
        )
    if ys[0].numel() != 1:
        raise RuntimeError(
            f"{op}: the function must return a single-element tensor (The Tensor returned "
            f"by the function given to {op} should contain a single element)"
        )
    _check_strict(op, ys, strict)
    g = _grads(ys, xs, (_core.ones_like(ys[0]),), True, strict=_independent(op, strict))
    _check_grads_tracked(op, g, strict)
    msg = (
        _strict_msg(
            op,
            "The hessian of the user-provided function with respect to input {i} is "
            "independent of the input.",
        )
        if strict
        else None
    )
    hv = _grads(g, xs, vs, create_graph, strict=msg)
    y = ys[0] if create_graph else ys[0].detach()
    hv = _finish(hv, create_graph)
    return y, (hv if in_tuple else hv[0])


@_grad_on
def vhp(
    func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False
) -> tuple[Any, Any]:
    """``(func(*inputs), v^T H)`` for a function returning one element."""
    return _vhp("vhp", func, inputs, v, create_graph, strict)


@_grad_on
def hvp(
    func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False
) -> tuple[Any, Any]:
    """``(func(*inputs), H v)`` for a function returning one element (the Hessian is
    symmetric, so this is :func:`vhp`'s product); errors name ``hvp``."""
    return _vhp("hvp", func, inputs, v, create_graph, strict)


# ------------------------------------------------------------------------------ gradcheck


class GradcheckError(RuntimeError):
    """An analytical gradient that differs from its finite-difference estimate."""


def _gradcheck_args(inputs: Any) -> tuple:
    """``inputs`` as the positional arguments of the checked function (a tensor, or a tuple
    or list that may hold non-tensors too, passed through as they are)."""
    if isinstance(inputs, Tensor):
        return (inputs,)
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs)
    raise TypeError(
        "gradcheck: The inputs given to gradcheck must be either a Tensor or a tuple of "
        f"Tensors, got {type(inputs).__name__}"
    )


def _gradcheck_outputs(out: Any) -> tuple:
    """The tensors ``func`` returned (non-tensors in a returned tuple are ignored)."""
    if isinstance(out, Tensor):
        return (out,)
    if isinstance(out, (tuple, list)):
        return tuple(o for o in out if isinstance(o, Tensor))
    raise TypeError(
        "gradcheck: The outputs of the user-provided function given to gradcheck must be "
        f"either a Tensor or a tuple of Tensors, got {type(out).__name__}"
    )


def _as_f64(t: Tensor) -> np.ndarray:
    return np.asarray(t.detach().numpy()).astype(np.float64).ravel()


def _numerical_jacobian(func: Callable, args: tuple, xs: list, eps: float) -> list[list[Any]]:
    """Central differences, perturbing the given tensors themselves in place (PyTorch's: a
    function that reads a captured tensor instead of its argument sees the change too)."""
    from .autodiff import no_grad

    def outputs() -> list[np.ndarray]:
        # (recorded: the function may differentiate inside, as gradgradcheck's does)
        return [_as_f64(y) for y in _gradcheck_outputs(func(*args))]

    base = outputs()
    jac = [[np.zeros((y.size, x.numel())) for x in xs] for y in base]
    for k, x in enumerate(xs):
        flat = _as_f64(x).copy()
        for i in range(flat.size):
            for sign in (1.0, -1.0):
                f = flat.copy()
                f[i] += sign * eps
                with no_grad():
                    x.copy_(_from_numpy(f.reshape(x.shape), x))
                out = outputs()
                for j, o in enumerate(out):
                    jac[j][k][:, i] += sign * o / (2 * eps)
            with no_grad():
                x.copy_(_from_numpy(flat.reshape(x.shape), x))
    return jac


def _analytical_jacobian(
    func: Callable, args: tuple, xs: list, differentiable: list | None = None
) -> list[list[Any]]:
    """One backward per output element, through the given tensors themselves."""
    from .autodiff import enable_grad
    from .autograd import grad

    with enable_grad():
        ys = _gradcheck_outputs(func(*args))
    jac = [[np.zeros((y.numel(), x.numel())) for x in xs] for y in ys]
    if differentiable is not None:
        differentiable[:] = [bool(y.requires_grad) for y in ys]
    for j, y in enumerate(ys):
        if not y.requires_grad:
            continue
        n = y.numel()
        for i in range(n):
            seed = np.zeros(n, dtype=np.float64)
            seed[i] = 1.0
            got = grad(
                [y],
                list(xs),
                grad_outputs=[_from_numpy(seed.reshape(y.shape), y)],
                retain_graph=True,
                allow_unused=True,
            )
            for k, g in enumerate(got):
                if g is not None:
                    jac[j][k][i, :] = _as_f64(g)
    return jac


def gradcheck(
    func: Callable,
    inputs: Any,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_batched_forward_grad: bool = False,
    check_forward_ad: bool = False,
    check_backward_ad: bool = True,
    fast_mode: bool = False,
    masked: bool | None = None,
) -> bool:
    """Compares the Jacobian of ``func`` at ``inputs`` from backward passes with central
    finite differences (use float64 inputs). True when they agree to
    ``|analytical - numerical| <= atol + rtol * |numerical|``; else raises
    :class:`GradcheckError` (or returns False with ``raise_exception=False``). ``inputs``: a
    tensor, or a tuple or list of arguments (non-tensors are passed as they are); the tensors
    that require grad are the ones checked, perturbed in place for the finite differences.
    The backward runs twice: results that differ by more than ``nondet_tol`` fail (PyTorch's
    "Backward is not reentrant")."""
    args = _gradcheck_args(inputs)
    xs = [a for a in args if isinstance(a, Tensor) and a.requires_grad]
    if not xs:
        raise ValueError(
            "gradcheck: gradcheck expects at least one input tensor to require gradient, but "
            "none of them have requires_grad=True (at least one input must require grad)"
        )
    for x in xs:
        if x.dtype.name != "float64":
            import warnings

            warnings.warn(
                f"gradcheck: an input is {x.dtype}, not float64: finite differences will be "
                "inaccurate",
                stacklevel=2,
            )

    def fail(msg: str) -> bool:
        if raise_exception:
            raise GradcheckError(msg)
        return False

    differentiable: list = []
    analytical = _analytical_jacobian(func, args, xs, differentiable)  # [output][input]
    again = _analytical_jacobian(func, args, xs)
    for row, row2 in zip(analytical, again):
        for a, a2 in zip(row, row2):
            if a.shape != a2.shape or (a.size and np.abs(a - a2).max() > nondet_tol):
                return fail(
                    "gradcheck: Backward is not reentrant, i.e., running backward with same "
                    "input and grad_output multiple times gives different values, although "
                    "analytical gradient matches numerical gradient. The tolerance for "
                    f"nondeterminism was {nondet_tol}."
                )
    numerical = _numerical_jacobian(func, args, xs, eps)
    for j, row in enumerate(analytical):
        for k, a in enumerate(row):
            n = numerical[j][k]
            if not differentiable[j] and not np.allclose(n, 0.0, rtol=rtol, atol=atol):
                return fail(
                    f"gradcheck: Numerical gradient for function expected to be zero (output "
                    f"{j} does not require grad, but its finite differences with respect to "
                    f"input {k} are not zero):\n{n}"
                )
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                return fail(
                    f"gradcheck: Jacobian mismatch for output {j} with respect to input {k}:\n"
                    f"numerical:\n{n}\nanalytical:\n{a}"
                )
    return True


def gradgradcheck(
    func: Callable,
    inputs: Any,
    grad_outputs: Any = None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    gen_non_contig_grad_outputs: bool = False,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    **_: Any,
) -> bool:
    """:func:`gradcheck` of the vector-Jacobian product of ``func`` (second derivatives),
    with random ``grad_outputs`` when none are given. ``inputs`` as :func:`gradcheck`'s
    (non-tensors pass through)."""
    from .autodiff import enable_grad

    args = _gradcheck_args(inputs)
    pos = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
    with enable_grad():
        ys = _gradcheck_outputs(func(*args))
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        gos = tuple(_from_numpy(rng.standard_normal(y.shape), y).requires_grad_(True) for y in ys)
    else:
        gos = _tuple("gradgradcheck", "grad_outputs", grad_outputs)[1]
    n_args = len(args)

    def first_order(*a: Any) -> tuple:
        full, g = a[:n_args], a[n_args:]
        out = _gradcheck_outputs(func(*full))
        return _grads(out, tuple(full[i] for i in pos), g, True)

    return gradcheck(
        first_order,
        (*args, *gos),
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
        nondet_tol=nondet_tol,
    )


# ------------------------------------------------------------------------------ torch.func


class FuncTransformError(ValueError, RuntimeError):
    """Bad arguments to a ``torch.func`` transform: PyTorch raises RuntimeError, earlier
    ferrograd ValueError, so it is both."""


# How many differentiating transforms are running (per thread): a transform nested in another keeps the
# graph of its results (the enclosing one differentiates through them).
_depth = threading.local()


@contextlib.contextmanager
def _level() -> Iterator[list[Tensor]]:
    """Marks a running transform; yields the fresh leaves that it and the transforms nested
    in it create (the graph of its results may reach them: they are its own, not tensors
    that something outside differentiates)."""
    n = getattr(_depth, "n", 0)
    if n == 0:
        _depth.fresh = []
    _depth.n = n + 1
    try:
        yield _depth.fresh
    finally:
        _depth.n = n


def _fresh(t: Tensor) -> Tensor:
    """``t`` as a new leaf that requires grad, owned by the running transforms."""
    leaf = t.detach().requires_grad_(True)
    if getattr(_depth, "n", 0) > 0:
        _depth.fresh.append(leaf)
    return leaf


def _reaches_outside(t: Tensor, own: list[Tensor], seen: set) -> bool:
    """Whether the recorded graph of ``t`` reaches a leaf other than ``own`` (the fresh
    leaves of the transform): a requires-grad input or a captured parameter that the
    enclosing computation may differentiate. ``seen``: nodes already known not to."""
    if not t.requires_grad:
        return False
    fn = t.grad_fn
    if fn is None:
        return not any(t is o for o in own)
    stack = [fn._node]
    visited: list = []
    while stack:
        node = stack.pop()
        key = node.id()
        if key in seen:
            continue
        seen.add(key)
        visited.append(key)
        if node.is_leaf():
            if not any(node.is_variable(o) for o in own):
                for k in visited:  # (not fully explored: forget them)
                    seen.discard(k)
                return True
            continue
        for i in node.inputs():
            if i is not None:
                stack.append(i[0])
    return False


def _plain(tree: Any, own: list[Tensor]) -> Any:
    """A transform's results as PyTorch's: detached unless an enclosing transform is
    running or their graph reaches tensors outside the transform (so ``w = w - lr *
    grad(f)(w)`` loops do not grow a graph, while nested transforms and gradients to
    requires-grad inputs still work)."""
    if getattr(_depth, "n", 0) > 0:
        return tree
    seen: set = set()
    return _rebuild(
        tree, iter([t if _reaches_outside(t, own, seen) else t.detach() for t in _leaves(tree)])
    )


def _argnums(op: str, argnums: Any, n: int) -> tuple[bool, tuple[int, ...]]:
    def one(a: Any) -> int:
        if not isinstance(a, int) or isinstance(a, bool):
            raise FuncTransformError(
                f"{op}: argnums must be int or Tuple[int, ...], got: {type(a).__name__}"
            )
        if not -n <= a < n:
            raise FuncTransformError(
                f"{op}: Got argnum={a}, but only {n} positional inputs (argnums {a} is out of "
                f"range for {n} arguments)"
            )
        return a % n

    if isinstance(argnums, tuple):
        if not argnums:
            raise FuncTransformError(f"{op}: argnums must be non-empty")
        nums = tuple(one(a) for a in argnums)
        if len(set(nums)) != len(nums):
            raise FuncTransformError(f"{op}: argnums elements must be unique, got {argnums}")
        return True, nums
    if not isinstance(argnums, int) or isinstance(argnums, bool):
        raise FuncTransformError(
            f"{op}: argnums must be int or Tuple[int, ...], got: {type(argnums).__name__}"
        )
    return False, (one(argnums),)


def _leaves(tree: Any) -> list[Tensor]:
    """The tensors of a pytree (a tensor, or dicts, lists and tuples of them), in order."""
    if isinstance(tree, Tensor):
        return [tree]
    if isinstance(tree, dict):
        return [t for v in tree.values() for t in _leaves(v)]
    if isinstance(tree, (list, tuple)):
        return [t for v in tree for t in _leaves(v)]
    return []


def _rebuild(tree: Any, leaves: Iterator[Any]) -> Any:
    """``tree`` with its tensors replaced, in order, by ``leaves``."""
    if isinstance(tree, Tensor):
        return next(leaves)
    if isinstance(tree, dict):
        return type(tree)((k, _rebuild(v, leaves)) for k, v in tree.items())
    if isinstance(tree, (list, tuple)):
        items = [_rebuild(v, leaves) for v in tree]
        return type(tree)(items) if not hasattr(tree, "_fields") else type(tree)(*items)
    return tree


def _non_tensor_leaf(tree: Any) -> Any:
    """The first leaf of a pytree that is not a tensor (``_MISSING`` when all are)."""
    if isinstance(tree, Tensor):
        return _MISSING
    if isinstance(tree, dict):
        tree = list(tree.values())
    if isinstance(tree, (list, tuple)):
        for v in tree:
            bad = _non_tensor_leaf(v)
            if bad is not _MISSING:
                return bad
        return _MISSING
    return tree


def _check_tensors(op: str, what: str, tree: Any) -> None:
    bad = _non_tensor_leaf(tree)
    if bad is not _MISSING:
        raise FuncTransformError(
            f"{op}: Expected tensors, got unsupported type {type(bad)} (every leaf of {what} "
            "must be a Tensor)"
        )


def _tracked(t: Tensor) -> Tensor:
    # a new node on the tape (gradients of enclosing transforms still flow through)
    return t * 1 if t.requires_grad else _fresh(t)


def _track_args(op: str, args: tuple, nums: tuple) -> tuple[list, list[list[Tensor]]]:
    """``args`` with the tensors of the arguments ``nums`` replaced by fresh tracked ones."""
    out = list(args)
    groups: list[list[Tensor]] = []
    for i in nums:
        found = [_tracked(t) for t in _leaves(out[i])]
        if not found:
            raise TypeError(
                f"{op}: argument {i} must be a Tensor or a dict/list/tuple of Tensors, got "
                f"{type(out[i]).__name__}"
            )
        groups.append(found)
        out[i] = _rebuild(out[i], iter(found))
    return out, groups


def _captured(func: Callable) -> list[Tensor]:
    """The tensors ``func`` captures: its closure's and the globals its code names."""
    found = []
    for cell in getattr(func, "__closure__", None) or ():
        try:
            v = cell.cell_contents
        except ValueError:
            continue
        if isinstance(v, Tensor):
            found.append(v)
    code = getattr(func, "__code__", None)
    if code is not None:
        names = getattr(func, "__globals__", {})
        found += [names[n] for n in code.co_names if isinstance(names.get(n), Tensor)]
    return found


def _run(op: str, func: Callable, args: list, kwargs: dict) -> Any:
    """``func(*args, **kwargs)``, raising as PyTorch does where it wrote in place into a
    tensor it captures (its closure's or a global it names; a value computed from the
    transformed arguments would carry the transform's internal graph out of it). The write
    has happened when this raises."""
    caps = [(t, t._version) for t in _captured(func)]
    out = func(*args, **kwargs)
    for t, version in caps:
        if t._version != version:
            raise RuntimeError(
                f"{op}: During a grad (vjp, jvp, grad, etc) transform, the function provided "
                "attempted to call in-place operation that would mutate a captured Tensor "
                f"(shape {list(t.shape)}). This is not supported; pass that Tensor as an "
                "input, or write into a copy of it"
            )
    return out


def _split_aux(op: str, out: Any, has_aux: bool) -> tuple[Any, Any]:
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise FuncTransformError(
            f"{op}: output of function f should be a tuple: (output, aux) if has_aux is True"
        )
    _check_tensors(op, "aux", out[1])
    return out[0], out[1]


def grad_and_value(func: Callable, argnums: Any = 0, has_aux: bool = False) -> Callable:
    """``torch.func.grad_and_value``: a function returning ``(gradient, value)`` of ``func``
    (which returns one element, or ``(element, aux)`` with ``has_aux``) with respect to the
    arguments ``argnums`` (each a tensor or a dict/list/tuple of them)."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        many, nums = _argnums("grad", argnums, len(args))
        with _level() as fresh:
            full, groups = _track_args("grad", args, nums)
            out, aux = _split_aux("grad", _run("grad", func, full, kwargs), has_aux)
            if not isinstance(out, Tensor):
                raise RuntimeError(  # noqa: TRY004 (PyTorch's type)
                    "grad: Expected f(*args) to return a Tensor, got " + type(out).__name__
                )
            if out.ndim != 0:
                raise RuntimeError(
                    f"grad: Expected f(*args) to return a scalar Tensor, got tensor with "
                    f"{out.ndim} dims (shape {list(out.shape)}). Maybe you wanted to use the vjp "
                    "or jacrev APIs instead?"
                )
            own = [t for group in groups for t in group]
            gs = iter(_grads((out,), tuple(own), (_core.ones_like(out),), True))
            per_arg = tuple(_rebuild(full[i], gs) for i in nums)
        g = per_arg if many else per_arg[0]
        res = (g, (out, aux)) if has_aux else (g, out)
        return _plain(res, [*own, *fresh])

    return wrapper


def grad(func: Callable, argnums: Any = 0, has_aux: bool = False) -> Callable:
    """``torch.func.grad``: the gradient function of ``func`` (composable: ``grad(grad(f))``
    gives second derivatives; ``vmap(grad(f))`` per-sample gradients)."""
    gv = grad_and_value(func, argnums, has_aux)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        g, v = gv(*args, **kwargs)
        return (g, v[1]) if has_aux else g

    return wrapper


def func_vjp(func: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """``torch.func.vjp``: ``(func(*primals), vjp_fn)`` where ``vjp_fn(cotangents)`` (shaped
    as the output: a tensor or a dict/list/tuple of them) returns a tuple with one gradient
    per primal, shaped as that primal (``(output, vjp_fn, aux)`` with ``has_aux``)."""
    with _level() as fresh:
        full, groups = _track_args("vjp", primals, tuple(range(len(primals))))
        out, aux = _split_aux("vjp", _run("vjp", func, full, {}), has_aux)
    if out is None or (isinstance(out, (tuple, list, dict)) and not _leaves(out)):
        raise RuntimeError(
            f"vjp: Expected f to be a function that has non-empty output (got {type(out).__name__})"
        )
    if _non_tensor_leaf(out) is not _MISSING:
        raise RuntimeError(
            "vjp: expected f(*primals) to return only tensors, got unsupported type "
            f"{type(_non_tensor_leaf(out)).__name__}"
        )
    own = [t for group in groups for t in group]
    ys = tuple(_leaves(out))

    def vjp_fn(*cotangents: Any) -> tuple:
        ct = cotangents[0] if len(cotangents) == 1 else cotangents
        cs = tuple(_leaves(ct))
        if len(cs) != len(ys) or _non_tensor_leaf(ct) is not _MISSING:
            raise FuncTransformError(
                f"vjp: Expected pytree structure of cotangents to be the same as pytree "
                f"structure of outputs to the function: expected {len(ys)} tensors, got "
                f"{len(cs)}"
            )
        for y, c in zip(ys, cs):
            if tuple(y.shape) != tuple(c.shape):
                raise FuncTransformError(
                    f"vjp: Mismatch in shape: an output has shape {list(y.shape)} but its "
                    f"cotangent has shape {list(c.shape)}"
                )
        with _level() as fresh_now:
            gs = iter(_grads(ys, tuple(own), cs, True))
            res = tuple(_rebuild(full[i], gs) for i in range(len(primals)))
        return _plain(res, [*own, *fresh, *fresh_now])

    out_plain = _plain(out, [*own, *fresh])
    return (out_plain, vjp_fn, _plain(aux, [*own, *fresh])) if has_aux else (out_plain, vjp_fn)


def func_jvp(
    func: Callable, primals: Any, tangents: Any, *, strict: bool = False, has_aux: bool = False
) -> tuple:
    """``torch.func.jvp``: ``(func(*primals), J tangents)``; ``primals`` a tuple of
    arguments (tensors or dicts/lists/tuples of them), ``tangents`` shaped as it."""
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise FuncTransformError(
            "jvp(f, primals, tangents): Expected primals and tangents to be tuples, got "
            f"{type(primals).__name__} and {type(tangents).__name__}"
        )
    pl, tl = _leaves(primals), _leaves(tangents)
    if len(pl) != len(tl):
        raise FuncTransformError(
            "jvp(f, primals, tangents): Expected primals and tangents to have the same python "
            f"structure ({len(pl)} primal tensors, {len(tl)} tangents)"
        )
    for k, (p, t) in enumerate(zip(pl, tl)):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(
                f"jvp: tangent {k} has a different size ({list(t.shape)}) than its primal "
                f"({list(p.shape)})"
            )
    with _level() as fresh:
        full, groups = _track_args("jvp", primals, tuple(range(len(primals))))
        out, aux = _split_aux("jvp", _run("jvp", func, full, {}), has_aux)
        _check_tensors("jvp", "the function's output", out)
        xs = tuple(t for group in groups for t in group)
        ys = tuple(_leaves(out))
        us = tuple(_fresh(_core.zeros_like(y)) for y in ys)
        gx = _grads(ys, xs, us, True)  # u^T J, linear in u: its derivative along t is J t
        jv = _grads(gx, us, tuple(tl), True)
    own = [*xs, *us]
    res = (_plain(out, [*own, *fresh]), _plain(_rebuild(out, iter(jv)), [*own, *fresh]))
    return (*res, _plain(aux, [*own, *fresh])) if has_aux else res


def linearize(func: Callable, *primals: Any) -> tuple:
    """``torch.func.linearize``: ``(func(*primals), jvp_fn)`` where ``jvp_fn(*tangents)`` is
    the Jacobian-vector product at ``primals`` (recomputed per call)."""
    value = func_jvp(func, primals, _rebuild(primals, iter(_zeros_for(primals))))[0]

    def jvp_fn(*tangents: Any) -> Any:
        return func_jvp(func, primals, tangents)[1]

    return value, jvp_fn


def _zeros_for(tree: Any) -> list[Tensor]:
    return [_core.zeros_like(t) for t in _leaves(tree)]


def _jac_blocks(ys: tuple, xs: tuple) -> list[list[Tensor]]:
    """``[output][input]`` Jacobian blocks (``y.shape + x.shape``), one backward per output
    element, with a graph."""
    blocks = []
    for y in ys:
        n = y.numel()
        rows: list[list[Tensor]] = [[] for _ in xs]
        for i in range(n):
            seed = np.zeros(n, dtype=np.float64)
            seed[i] = 1.0
            gs = _grads((y,), xs, (_from_numpy(seed.reshape(y.shape), y),), True)
            for k, g in enumerate(gs):
                rows[k].append(g)
        per_in = []
        for k, x in enumerate(xs):
            if n:
                per_in.append(_core.stack(rows[k], 0).reshape(*y.shape, *x.shape))
            else:
                per_in.append(
                    _core.zeros((*y.shape, *x.shape), dtype=x.dtype.name, device=x.device)
                )
        blocks.append(per_in)
    return blocks


def jacrev(
    func: Callable, argnums: Any = 0, *, has_aux: bool = False, chunk_size: Any = None
) -> Callable:
    """``torch.func.jacrev``: the Jacobian function of ``func`` with respect to the
    arguments ``argnums``: for each output tensor (the output a tensor or a dict/list/tuple
    of them), the argument's structure of ``output.shape + tensor.shape`` blocks (a tuple of
    those with a tuple ``argnums``)."""
    op = "jacrev"

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        many, nums = _argnums(op, argnums, len(args))
        with _level() as fresh:
            full, groups = _track_args(op, args, nums)
            out, aux = _split_aux(op, _run(op, func, full, kwargs), has_aux)
            _check_tensors(op, "the function's output", out)
            own = [t for group in groups for t in group]
            blocks = _jac_blocks(tuple(_leaves(out)), tuple(own))
            per_out = []
            for row in blocks:
                it = iter(row)
                per_arg = tuple(_rebuild(full[i], it) for i in nums)
                per_out.append(per_arg if many else per_arg[0])
            jac = _rebuild(out, iter(per_out))
        res = (jac, aux) if has_aux else jac
        return _plain(res, [*own, *fresh])

    return wrapper


def jacfwd(
    func: Callable, argnums: Any = 0, has_aux: bool = False, *, randomness: str = "error"
) -> Callable:
    """``torch.func.jacfwd``: the same Jacobian as :func:`jacrev` (computed in reverse
    mode; the values are equal)."""
    if randomness not in ("error", "different", "same"):
        raise FuncTransformError(
            "jacfwd: Only allowed values for randomness are 'error', 'different', or 'same'. "
            f"Got {randomness}"
        )
    return jacrev(func, argnums, has_aux=has_aux)


def func_hessian(func: Callable, argnums: Any = 0) -> Callable:
    """``torch.func.hessian``: the Hessian function of ``func`` (one-element output)."""
    return jacfwd(jacrev(func, argnums), argnums)


def _leaf_dims(op: str, arg: Any, d: Any) -> list:
    """The mapped axis of each tensor of ``arg`` (``d``: an int or None for all of them, or
    a structure matching ``arg``'s), normalized and checked against each tensor's rank."""
    if d is None:
        return [None] * len(_leaves(arg))
    if isinstance(d, int) and not isinstance(d, bool):
        if not isinstance(arg, (Tensor, tuple, list, dict)):
            raise ValueError(  # noqa: TRY004 (PyTorch's type)
                f"{op}: Got in_dim={d} for an input but the input is of type {type(arg)}. We "
                "cannot vmap over non-Tensor arguments, please use None as the respective "
                "in_dim"
            )
        out = []
        for t in _leaves(arg):
            if not -max(t.ndim, 1) <= d < max(t.ndim, 1) or t.ndim == 0:
                raise ValueError(
                    f"{op}: Got in_dim={d} for some input, but that input is a Tensor of "
                    f"dimensionality {t.ndim} so expected in_dim to satisfy "
                    f"-{t.ndim} <= in_dim < {t.ndim}."
                )
            out.append(d % t.ndim)
        return out
    if isinstance(d, (tuple, list)) and isinstance(arg, (tuple, list)) and len(d) == len(arg):
        return [x for a, dd in zip(arg, d) for x in _leaf_dims(op, a, dd)]
    if isinstance(d, dict) and isinstance(arg, dict) and set(d) == set(arg):
        return [x for k in arg for x in _leaf_dims(op, arg[k], d[k])]
    raise ValueError(
        f"{op}: in_dims is not compatible with the structure of its input: got in_dims {d!r} "
        f"for an input of type {type(arg).__name__}"
    )


def _out_dims(od: Any, out: Any) -> list:
    """The output axis of each tensor of ``out`` (``od`` as :func:`_leaf_dims`'s)."""
    if od is None or (isinstance(od, int) and not isinstance(od, bool)):
        return [od] * len(_leaves(out))
    if isinstance(od, (tuple, list)) and isinstance(out, (tuple, list)) and len(od) == len(out):
        return [x for o, d in zip(out, od) for x in _out_dims(d, o)]
    if isinstance(od, dict) and isinstance(out, dict) and set(od) == set(out):
        return [x for k in out for x in _out_dims(od[k], out[k])]
    raise ValueError(
        f"vmap: out_dims is not compatible with the structure of the outputs: got out_dims "
        f"{od!r} for an output of type {type(out).__name__}"
    )


class _VmapRandomnessError(RuntimeError):
    pass


def vmap(
    func: Callable,
    in_dims: Any = 0,
    out_dims: Any = 0,
    randomness: str = "error",
    *,
    chunk_size: Any = None,
) -> Callable:
    """``torch.func.vmap``: ``func`` mapped over axis ``in_dims`` of its arguments (an int
    for all, or one entry per argument, ``None`` for an unmapped one, nested as the argument
    for a dict/list/tuple one), the results stacked along ``out_dims`` (``None``: an output
    that is the same for every sample, returned once). Keyword arguments pass through
    unmapped. Runs ``func`` once per slice (correct for any function, including ``grad``
    inside it; not vectorized). ``randomness``: ``"error"`` (random ops inside raise),
    ``"different"`` (each sample draws its own) or ``"same"`` (every sample draws the same
    values). An in-place write into an unmapped input raises after the first sample (each
    sample would write into it again; the input keeps that first write)."""
    op = "vmap"
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(
            "vmap: Only allowed values for randomness are 'error', 'different', or 'same'. "
            f"Got {randomness}"
        )

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from . import random as _random

        if isinstance(in_dims, (tuple, list)):
            if len(in_dims) != len(args):
                raise ValueError(
                    f"{op}: in_dims is not compatible with the structure of `inputs`: in_dims "
                    f"has {len(in_dims)} entries for {len(args)} positional arguments"
                )
            dims = [x for a, d in zip(args, in_dims) for x in _leaf_dims(op, a, d)]
        elif in_dims is None or (isinstance(in_dims, int) and not isinstance(in_dims, bool)):
            dims = [x for a in args for x in _leaf_dims(op, a, in_dims)]
        else:
            raise ValueError(
                f"{op}: expected in_dims to be int or a (potentially nested) tuple matching "
                f"the structure of inputs, got: {type(in_dims).__name__}"
            )
        leaves = _leaves(args)
        sizes = {t.shape[d] for t, d in zip(leaves, dims) if d is not None}
        if not sizes:
            raise ValueError(
                f"{op}: at least one Tensor must be mapped over (all in_dims are None or no "
                "input is a Tensor)"
            )
        if len(sizes) != 1:
            raise ValueError(
                f"{op}: Expected all tensors to have the same size in the mapped dimension, "
                f"got sizes {sorted(sizes)} for the mapped dimension"
            )
        n = sizes.pop()
        unmapped = [t for t, d in zip(leaves, dims) if d is None]
        versions = [t._version for t in unmapped]

        def call(i: int | None) -> Any:
            if i is None:  # a batch of 0: one call on zeros shaped as a sample
                sl = [
                    t
                    if d is None
                    else _core.zeros(
                        tuple(s for j, s in enumerate(t.shape) if j != d),
                        dtype=t.dtype.name,
                        device=t.device,
                    )
                    for t, d in zip(leaves, dims)
                ]
            else:
                sl = [t if d is None else t.select(d, i) for t, d in zip(leaves, dims)]
            out = func(*_rebuild(args, iter(sl)), **kwargs)
            for t, v in zip(unmapped, versions):
                if t._version != v:
                    raise RuntimeError(
                        f"{op}: an in-place operation wrote into an input that is not mapped "
                        f"(in_dim None, shape {list(t.shape)}): vmap runs the function once "
                        "per sample, so each sample would write into it again; map that input "
                        "too, or write into a copy"
                    )
            return out

        state = _random.get_rng_state() if randomness != "different" else None
        if n == 0:
            outs = [call(None)]
        else:
            outs = []
            for i in range(n):
                if randomness == "same":
                    _random.set_rng_state(state)
                outs.append(call(i))
        if randomness == "error" and _random.get_rng_state() != state:
            _random.set_rng_state(state)  # (as if nothing was drawn)
            raise _VmapRandomnessError(
                f"{op}: called random operation while in randomness error mode. Please either "
                "use the 'same' or 'different' randomness flags on vmap or perform the "
                "randomness operation out of vmap"
            )
        first = outs[0]
        bad = _non_tensor_leaf(first)
        if bad is not _MISSING:
            raise ValueError(
                f"{op}: the function must only return Tensors, got type {type(bad)}. Did you "
                "mean to set out_dims= to None for output?"
            )
        ods = _out_dims(out_dims, first)
        per_sample = [_leaves(o) for o in outs]
        stacked = []
        for k, od in enumerate(ods):
            items = [p[k] for p in per_sample]
            if od is None:
                if any(not bool((x == items[0]).all()) for x in items[1:]):
                    raise ValueError(
                        f"{op}: out_dims is None for output {k}, but it differs between "
                        "samples (it is batched)"
                    )
                stacked.append(items[0])
                continue
            rank = items[0].ndim + 1
            if not -rank <= od < rank:
                raise ValueError(
                    f"{op}: Dimension out of range: out_dims={od} for an output of rank {rank - 1}"
                )
            s = _core.stack(items, od % rank)
            stacked.append(s.narrow(od % rank, 0, 0) if n == 0 else s)
        return _rebuild(first, iter(stacked))

    return wrapper


def stack_module_state(models: Any) -> tuple[dict, dict]:
    """``torch.func.stack_module_state``: the parameters and buffers of same-class
    ``models`` stacked along a new first axis, as ``(params, buffers)`` dicts by name (the
    stacked parameters are new leaves that require grad as the originals do), for
    :func:`vmap` over :func:`functional_call` (model ensembling)."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if len({m.training for m in models}) != 1:
        raise RuntimeError(
            "stack_module_state: Expected all models to have the same training/eval mode."
        )
    if len({type(m) for m in models}) != 1:
        raise RuntimeError(
            "stack_module_state: Expected all models to be of the same class, got "
            f"{sorted({type(m).__name__ for m in models})}"
        )

    def stack(get: Callable, grad: bool) -> dict:
        per = [dict(get(m)) for m in models]
        out = {}
        for name, first in per[0].items():
            st = _core.stack([p[name].detach() for p in per], 0)
            out[name] = st.requires_grad_(bool(first.requires_grad)) if grad else st
        return out

    return stack(lambda m: m.named_parameters(), True), stack(lambda m: m.named_buffers(), False)


@contextlib.contextmanager
def _swapped(module: Any, values: dict) -> Iterator[None]:
    saved = []
    try:
        for name, value in values.items():
            owner_name, _, attr = name.rpartition(".")
            owner = module.get_submodule(owner_name) if owner_name else module
            d = owner.__dict__
            store = (
                d.get("_parameters") if attr not in d and attr in d.get("_parameters", {}) else None
            )
            old = store[attr] if store is not None else d.get(attr, _MISSING)
            saved.append((owner, attr, store, old))
            if store is not None:
                store[attr] = value
            else:
                object.__setattr__(owner, attr, value)
        yield
    finally:
        for owner, attr, store, old in reversed(saved):
            if store is not None:
                store[attr] = old
            elif old is _MISSING:
                owner.__dict__.pop(attr, None)
            else:
                object.__setattr__(owner, attr, old)


_MISSING = object()


def _state_names(module: Any) -> list[tuple[str, Any]]:
    """Every ``(name, tensor)`` of ``module``'s parameters and buffers, a tied tensor under
    each of its names."""
    out = []
    for get in ("named_parameters", "named_buffers"):
        method = getattr(module, get, None)
        if method is None:
            continue
        try:
            out.extend(method(remove_duplicate=False))
        except TypeError:
            out.extend(method())
    return out


def functional_call(
    module: Any,
    parameter_and_buffer_dicts: Any,
    args: Any = None,
    kwargs: dict | None = None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
) -> Any:
    """``torch.func.functional_call``: calls ``module`` with the given tensors in place of
    its parameters and buffers (by their ``named_parameters`` names), the module itself
    unchanged afterwards: gradients reach the given tensors. ``parameter_and_buffer_dicts``:
    a dict or a sequence of dicts (a name in two raises). With ``tie_weights`` (the default)
    a tensor given for one name of a tied parameter or buffer (one object under several
    names) replaces it under all its names. ``strict``: every parameter and buffer must be
    given, and no other name."""
    dicts = (
        [parameter_and_buffer_dicts]
        if isinstance(parameter_and_buffer_dicts, dict)
        else list(parameter_and_buffer_dicts)
    )
    values: dict = {}
    for d in dicts:
        both = sorted(set(values) & set(d))
        if both:
            raise ValueError(
                f"functional_call: {both} appeared in multiple dictionaries; behavior of "
                "functional call is ambiguous"
            )
        values.update(d)
    state = _state_names(module)
    if tie_weights:
        groups: dict[int, list[str]] = {}
        for name, t in state:
            groups.setdefault(id(t), []).append(name)
        for names in groups.values():
            given = [n for n in names if n in values]
            if len(names) < 2 or not given:
                continue
            if any(values[n] is not values[given[0]] for n in given[1:]):
                raise ValueError(
                    f"functional_call got multiple values for keys {given}, which are tied. "
                    "Consider using tie_weights=False"
                )
            for n in names:
                values.setdefault(n, values[given[0]])
    if strict:
        known = [n for n, _ in state]
        missing = [n for n in known if n not in values]
        extra = [n for n in values if n not in set(known)]
        if missing or extra:
            lines = []
            if missing:
                lines.append("Missing key(s): " + ", ".join(repr(n) for n in missing) + ".")
            if extra:
                lines.append("Unexpected key(s): " + ", ".join(repr(n) for n in extra) + ".")
            raise RuntimeError(
                f"Error(s) in reparametrizing for {type(module).__name__}:\n\t" + "\n\t".join(lines)
            )
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _swapped(module, values):
        return module(*args, **(kwargs or {}))
