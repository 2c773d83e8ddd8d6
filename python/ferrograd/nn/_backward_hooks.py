"""Module backward hooks (PyTorch's ``register_full_backward_hook`` and
``register_full_backward_pre_hook``): the module's tensor inputs and outputs pass through
identity functions whose backward sees the gradients, so ``hook(module, grad_input,
grad_output)`` runs once the gradients of the module's inputs are computed, and
``pre_hook(module, grad_output)`` before the module's own backward; each may return
replacements."""

from __future__ import annotations

from typing import Any

from .._core import Tensor


def _function() -> Any:
    from ..autograd import Function

    return Function


class _State:
    __slots__ = ("grad_output", "module", "n_inputs")

    def __init__(self, module: Any, n_inputs: int) -> None:
        self.module = module
        self.n_inputs = n_inputs
        self.grad_output: tuple | None = None


def _run_full_hooks(state: _State, grad_input: tuple) -> tuple:
    from .modules import _global_backward_hooks

    d = state.module.__dict__
    # the global hooks (register_module_full_backward_hook) first, as PyTorch's
    hooks = [*_global_backward_hooks.values(), *d.get("_backward_hooks", {}).values()]
    for hook in hooks:
        r = hook(state.module, grad_input, state.grad_output)
        if r is not None:
            r = tuple(r) if isinstance(r, (tuple, list)) else (r,)
            if len(r) != len(grad_input):
                raise RuntimeError(
                    f"backward hook returned {len(r)} gradients for {len(grad_input)} inputs"
                )
            grad_input = r
    return grad_input


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
                for hook in pre:
                    r = hook(state.module, tuple(grads))
                    if r is not None:
                        grads = tuple(r) if isinstance(r, (tuple, list)) else (r,)
                state.grad_output = tuple(grads)
                if state.n_inputs == 0:  # no input needs a gradient: the hooks run now
                    _run_full_hooks(state, (None,))
                return (None, *grads)

        _IN, _OUT = BackwardHookFunctionIn, BackwardHookFunctionOut
    return _IN, _OUT


_IN: Any = None
_OUT: Any = None


def wrap_inputs(module: Any, args: tuple) -> tuple[tuple, _State]:
    """``args`` with the tensors that require grad passed through the input identity."""
    fn_in, _ = _classes()
    idx = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
    state = _State(module, len(idx))
    if not idx:
        return args, state
    outs = fn_in.apply(state, *(args[i] for i in idx))
    outs = outs if isinstance(outs, tuple) else (outs,)
    new = list(args)
    for i, o in zip(idx, outs):
        new[i] = o
    return tuple(new), state


def wrap_outputs(state: _State, out: Any) -> Any:
    """``out`` (a tensor or a tuple/list of them) passed through the output identity."""
    _, fn_out = _classes()
    if isinstance(out, Tensor):
        if not out.requires_grad:
            return out
        r = fn_out.apply(state, out)
        return r[0] if isinstance(r, tuple) else r
    if isinstance(out, (tuple, list)):
        idx = [i for i, o in enumerate(out) if isinstance(o, Tensor) and o.requires_grad]
        if not idx:
            return out
        r = fn_out.apply(state, *(out[i] for i in idx))
        r = r if isinstance(r, tuple) else (r,)
        new = list(out)
        for i, o in zip(idx, r):
            new[i] = o
        return type(out)(new) if not hasattr(out, "_fields") else type(out)(*new)
    return out
