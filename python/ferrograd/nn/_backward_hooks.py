"""Module backward hooks (PyTorch's ``register_full_backward_hook`` and
``register_full_backward_pre_hook``): the module's tensor inputs and outputs pass through
identity functions whose backward sees the gradients, so ``hook(module, grad_input,
grad_output)`` runs once the gradients of the module's inputs are computed, and
``pre_hook(module, grad_output)`` before the module's own backward; each may return
replacements."""

from __future__ import annotations

import warnings
from typing import Any

from .._core import Tensor


def _function() -> Any:
    from ..autograd import Function

    return Function


class _State:
    """One module call: which positional inputs and outputs went through the identities
    (``in_idx`` is ``None`` when no input needs a gradient), how many there were, and the
    gradients of the outputs once the output identity's backward has run."""

    __slots__ = ("grad_output", "in_idx", "module", "n_args", "n_outs", "out_idx")

    def __init__(self, module: Any, in_idx: list[int] | None, n_args: int) -> None:
        self.module = module
        self.in_idx = in_idx
        self.n_args = n_args
        self.out_idx: list[int] = []
        self.n_outs = 0
        self.grad_output: tuple | None = None


def _pack(idx: list[int], grads: tuple, n: int) -> tuple:
    """``grads`` placed at positions ``idx`` of an ``n``-tuple, ``None`` elsewhere (the
    gradient of a non-tensor argument, or of one that needs none)."""
    out: list = [None] * n
    for i, g in zip(idx, grads):
        out[i] = g
    return tuple(out)


def _run_full_hooks(state: _State, grads: tuple) -> tuple:
    from .modules import _global_backward_hooks

    if state.grad_output is None:
        # the gradient reached the inputs without passing through the outputs (the
        # output was not a tensor or a tuple of them, or a second backward): no hooks
        return grads
    d = state.module.__dict__
    # the global hooks (register_module_full_backward_hook) first, as PyTorch's
    hooks = [*_global_backward_hooks.values(), *d.get("_backward_hooks", {}).values()]
    idx = state.in_idx or []
    grad_input = _pack(idx, grads, state.n_args)
    for hook in hooks:
        r = hook(state.module, grad_input, state.grad_output)
        if r is None:
            continue
        r = tuple(r) if isinstance(r, (tuple, list)) else (r,)
        if len(r) != len(grad_input):
            raise RuntimeError(
                f"{type(state.module).__name__}: backward hook returned an invalid number of "
                f"grad_input, got {len(r)}, but expected {len(grad_input)}"
            )
        grad_input = r
    state.grad_output = None
    return tuple(grad_input[i] for i in idx)


def _run_hooks_without_inputs(state: _State) -> None:
    """No input needed a gradient: the full hooks see ``None`` for every input, once the
    output gradients are known; they may not replace those ``None`` values."""
    from .modules import _global_backward_hooks

    d = state.module.__dict__
    hooks = [*_global_backward_hooks.values(), *d.get("_backward_hooks", {}).values()]
    grad_input = (None,) * state.n_args
    for hook in hooks:
        r = hook(state.module, grad_input, state.grad_output)
        if r is not None and not (isinstance(r, tuple) and all(g is None for g in r)):
            raise RuntimeError(
                f"{type(state.module).__name__}: a backward hook for a module where no input "
                "requires gradient must return None (or None for every gradient), got "
                f"{type(r).__name__}"
            )
    state.grad_output = None


def _classes() -> tuple[Any, Any]:
    global _IN, _OUT
    if _IN is None:
        Function = _function()

        class BackwardHookFunctionIn(Function):
            @staticmethod
            def forward(ctx: Any, state: _State, *xs: Tensor) -> Any:
                ctx.state = state
                return tuple(x.reshape(x.shape) for x in xs)

            @staticmethod
            def backward(ctx: Any, *grads: Any) -> Any:
                return (None, *_run_full_hooks(ctx.state, tuple(grads)))

        class BackwardHookFunctionOut(Function):
            @staticmethod
            def forward(ctx: Any, state: _State, *ys: Tensor) -> Any:
                ctx.state = state
                ctx.set_materialize_grads(False)
                return tuple(y.reshape(y.shape) for y in ys)

            @staticmethod
            def backward(ctx: Any, *grads: Any) -> Any:
                from .modules import _global_backward_pre_hooks

                state = ctx.state
                d = state.module.__dict__
                pre = [
                    *_global_backward_pre_hooks.values(),
                    *d.get("_backward_pre_hooks", {}).values(),
                ]
                grad_output = _pack(state.out_idx, grads, state.n_outs)
                for hook in pre:
                    r = hook(state.module, grad_output)
                    if r is None:
                        continue
                    r = tuple(r) if isinstance(r, (tuple, list)) else (r,)
                    if len(r) != len(grad_output):
                        raise RuntimeError(
                            f"{type(state.module).__name__}: backward pre hook returned an "
                            f"invalid number of grad_output, got {len(r)}, but expected "
                            f"{len(grad_output)}"
                        )
                    grad_output = r
                state.grad_output = grad_output
                if state.in_idx is None:  # no input needs a gradient: the hooks run now
                    _run_hooks_without_inputs(state)
                return (None, *(grad_output[i] for i in state.out_idx))

        _IN, _OUT = BackwardHookFunctionIn, BackwardHookFunctionOut
    return _IN, _OUT


_IN: Any = None
_OUT: Any = None


def wrap_inputs(module: Any, args: tuple) -> tuple[tuple, _State]:
    """``args`` with the tensors that require grad passed through the input identity."""
    fn_in, _ = _classes()
    idx = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
    state = _State(module, idx or None, len(args))
    if not idx:
        return args, state
    outs = fn_in.apply(state, *(args[i] for i in idx))
    outs = outs if isinstance(outs, tuple) else (outs,)
    new = list(args)
    for i, o in zip(idx, outs):
        new[i] = o
    return tuple(new), state


def wrap_outputs(state: _State, out: Any) -> Any:
    """``out`` (a tensor or a tuple/list of them) passed through the output identity. Other
    outputs (a dict) get no backward hooks, with PyTorch's warning."""
    _, fn_out = _classes()
    if isinstance(out, Tensor):
        if not out.requires_grad:
            return out
        state.out_idx, state.n_outs = [0], 1
        r = fn_out.apply(state, out)
        return r[0] if isinstance(r, tuple) else r
    if isinstance(out, (tuple, list)):
        idx = [i for i, o in enumerate(out) if isinstance(o, Tensor) and o.requires_grad]
        if not idx:
            return out
        state.out_idx, state.n_outs = idx, len(out)
        r = fn_out.apply(state, *(out[i] for i in idx))
        r = r if isinstance(r, tuple) else (r,)
        new = list(out)
        for i, o in zip(idx, r):
            new[i] = o
        return type(out)(new) if not hasattr(out, "_fields") else type(out)(*new)
    warnings.warn(
        f"{type(state.module).__name__}: for backward hooks to be called, module output should "
        f"be a Tensor or a tuple of Tensors but received {type(out)}",
        stacklevel=3,
    )
    return out
