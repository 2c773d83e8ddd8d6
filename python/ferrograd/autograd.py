"""PyTorch's ``torch.autograd`` functions on ferrograd's tape: ``grad`` and ``backward`` over
tensors that require grad (``requires_grad_()``, ``nn.Parameter``), with ``retain_graph``,
``create_graph`` for second and higher order, ``allow_unused`` and ``inputs``.

They work on the tape behind ``Tensor.backward``, and on the innermost recording
``GradManager`` when the outputs were computed inside one (``fg.grad`` is MegEngine's
spelling of the same thing)."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from . import _core
from ._core import Tensor
from .autodiff import Function as _EngineFunction
from .autodiff import (
    _as_list,
    _autograd,
    _backward_mode,
    _current_backward_mode,
    _current_backward_retains,
    _in_checkpoint_forward,
    _run_backward,
    _seed_gradients,
    enable_grad,
    inference_mode,
    no_grad,
    set_grad_enabled,
)

__all__ = [
    "Function",
    "FunctionCtx",
    "Variable",
    "backward",
    "detect_anomaly",
    "enable_grad",
    "grad",
    "inference_mode",
    "is_anomaly_enabled",
    "no_grad",
    "set_detect_anomaly",
    "set_grad_enabled",
]


def _seeds(op: str, outs: list[Tensor], grad_outputs: Any) -> list[Any]:
    if grad_outputs is None:
        return [None] * len(outs)
    gs = [grad_outputs] if isinstance(grad_outputs, Tensor) else list(grad_outputs)
    if len(gs) != len(outs):
        raise ValueError(f"{op}: got {len(gs)} gradients for {len(outs)} tensors")
    return gs


def _sequence(x: Any) -> Any:
    """Any iterable of tensors (``params.values()``, a generator) as a list, as PyTorch
    takes them; a tensor or a list as it is."""
    if isinstance(x, (Tensor, list, tuple)) or not hasattr(x, "__iter__"):
        return x
    return list(x)


def grad(
    outputs: Tensor | Sequence[Tensor],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool | None = None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
    only_inputs: bool = True,
) -> tuple[Tensor | None, ...]:
    """The gradients of ``outputs`` with respect to ``inputs``, as a tuple, without touching
    ``.grad`` (``torch.autograd.grad``). A non-scalar output needs its ``grad_outputs``.
    The graph is freed unless ``retain_graph`` (default: ``create_graph``). With
    ``create_graph=True`` the gradient computation is recorded, so the results require grad
    and can be differentiated again (gradient penalties, Hessian-vector products). An input
    that the outputs do not depend on is an error unless ``allow_unused=True`` (then its
    gradient is None, or zeros with ``materialize_grads=True``). With
    ``is_grads_batched=True`` the first dimension of every ``grad_outputs`` tensor is a batch
    of seeds: each input's result stacks the gradients for the batch's seeds."""
    outs = _as_list("autograd.grad", _sequence(outputs))
    ins = _as_list("autograd.grad", _sequence(inputs))
    if not ins:
        raise RuntimeError("autograd.grad: the inputs argument cannot be empty")
    if not outs:
        raise ValueError("autograd.grad: outputs must not be empty")
    if is_grads_batched:
        return _batched_grad(
            outs, ins, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads
        )
    if materialize_grads and allow_unused is False:
        raise ValueError("autograd.grad: materialize_grads=True needs allow_unused to be True")
    allow_unused = bool(allow_unused) or materialize_grads
    seeds = _seeds("autograd.grad", outs, grad_outputs)
    if _core._tracing():
        from .autodiff import grad as _graph_grad

        dys = [_core.ones_like(o) if g is None else g for o, g in zip(outs, seeds)]
        return tuple(_graph_grad(outs, ins, dys, create_graph=True))
    keys = [k for t in outs for k in _core._tracking_keys(t)]
    if not keys:
        if _in_checkpoint_forward():
            raise RuntimeError(
                "autograd.grad: called inside a checkpointed function, whose forward run "
                "records nothing: differentiate outside the checkpoint, or call the "
                "function without checkpoint"
            )
        raise RuntimeError(
            "autograd.grad: element 0 of tensors does not require grad and does not have a "
            "grad_fn: make a leaf require grad first (x.requires_grad_() or nn.Parameter)"
        )
    key = max(keys, key=lambda k: k.level)
    for i, (o, g) in enumerate(zip(outs, seeds)):
        if g is None and o.numel() != 1:
            raise RuntimeError(
                f"autograd.grad: grad can be implicitly created only for scalar outputs, "
                f"output {i} has shape {list(o.shape)}; pass grad_outputs="
            )
    for i, x in enumerate(ins):
        if not key.is_attached_to(x) and not _core._tracking_keys(x):
            raise RuntimeError(
                f"autograd.grad: inputs[{i}] (shape {list(x.shape)}) does not require grad"
            )
    dys = _seed_gradients(outs, seeds)
    ambient = key == _autograd.key
    create_graph = bool(create_graph)
    if retain_graph is None:
        retain_graph = create_graph and ambient
    try:
        with _backward_mode(create_graph, bool(retain_graph)):
            found = key._grad_reached(outs, dys, ins, bool(retain_graph), create_graph)
    finally:
        if ambient and key.is_finished:
            _autograd.consume(outs)
    result: list[Tensor | None] = []
    for i, (x, g) in enumerate(zip(ins, found)):
        if g is None:
            if not allow_unused:
                raise RuntimeError(
                    f"autograd.grad: inputs[{i}] (shape {list(x.shape)}) appears to not have "
                    "been used in the graph. Set allow_unused=True if this is the desired "
                    "behavior"
                )
            if materialize_grads:
                with no_grad():
                    g = _core.zeros_like(x)
        result.append(g)
    return tuple(result)


def _batched_grad(
    outs: list[Tensor],
    ins: list[Tensor],
    grad_outputs: Any,
    retain_graph: bool | None,
    create_graph: bool,
    allow_unused: bool | None,
    materialize_grads: bool,
) -> tuple[Tensor | None, ...]:
    """``grad(..., is_grads_batched=True)``: one backward per seed of the batch (the graph
    kept until the last), each input's gradients stacked along a new first dimension."""
    from ._ops import stack

    seeds = _seeds("autograd.grad", outs, grad_outputs)
    batch = None
    for i, (o, g) in enumerate(zip(outs, seeds)):
        if not isinstance(g, Tensor) or tuple(g.shape[1:]) != tuple(o.shape) or g.ndim < 1:
            got = "None" if g is None else f"shape {list(getattr(g, 'shape', ()))}"
            raise RuntimeError(
                f"autograd.grad: with is_grads_batched=True, grad_outputs[{i}] must be a "
                f"tensor whose shape is a batch size followed by output {i}'s shape "
                f"{list(o.shape)}, got {got}"
            )
        if batch is None:
            batch = g.shape[0]
        elif g.shape[0] != batch:
            raise RuntimeError(
                f"autograd.grad: with is_grads_batched=True, every grad_outputs tensor needs "
                f"the same batch size: grad_outputs[0] has {batch}, grad_outputs[{i}] "
                f"{g.shape[0]}"
            )
    if not batch:
        raise RuntimeError("autograd.grad: is_grads_batched=True needs a batch of at least 1")
    keep = bool(create_graph) if retain_graph is None else bool(retain_graph)
    found: list[list[Tensor | None]] = []
    for b in range(batch):
        found.append(
            list(
                grad(
                    outs,
                    ins,
                    [g[b] for g in seeds],
                    retain_graph=True if b < batch - 1 else keep,
                    create_graph=create_graph,
                    allow_unused=bool(allow_unused) or materialize_grads,
                )
            )
        )
    result: list[Tensor | None] = []
    for j, x in enumerate(ins):
        gs = [f[j] for f in found]
        if any(g is None for g in gs):
            if not materialize_grads:
                result.append(None)
                continue
            with no_grad():
                zeros = _core.zeros_like(x)
            gs = [zeros if g is None else g for g in gs]
        result.append(stack(gs))
    return tuple(result)


def backward(
    tensors: Tensor | Sequence[Tensor],
    grad_tensors: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Any = None,
) -> None:
    """Adds the gradients of ``tensors`` (seeded with ``grad_tensors``) into ``.grad`` of
    every tensor that requires grad, or of ``inputs`` only (``torch.autograd.backward``);
    ``Tensor.backward`` for several tensors at once."""
    roots = _as_list("autograd.backward", tensors)
    if not roots:
        raise ValueError("autograd.backward: tensors must not be empty")
    seeds = _seeds("autograd.backward", roots, grad_tensors)
    _run_backward("autograd.backward", roots, seeds, retain_graph, create_graph, inputs)


def Variable(data: Any, requires_grad: bool = False, volatile: bool = False) -> Tensor:
    """PyTorch's legacy ``Variable(t)``: the same data as a tensor (a view sharing memory,
    detached from any recording), requiring grad when asked."""
    from ._tensor import tensor

    t = data.detach() if isinstance(data, Tensor) else tensor(data)
    if requires_grad:
        t.requires_grad_(True)
    return t


def is_anomaly_enabled() -> bool:
    from .autodiff import _anomaly

    return _anomaly["enabled"]


class set_detect_anomaly:
    """Turns anomaly detection on or off (a plain call, or a context manager restoring the
    previous mode): after each ``backward`` / ``autograd.grad`` a NaN in a gradient it
    produced raises ``RuntimeError`` naming the tensor's shape, instead of reaching the
    optimizer. (PyTorch names the backward function that made it; ferrograd checks the
    results.)"""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        from .autodiff import _anomaly, _set_anomaly

        self._prev = (_anomaly["enabled"], _anomaly["check_nan"])
        _set_anomaly(mode, check_nan)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        from .autodiff import _set_anomaly

        _set_anomaly(*self._prev)


class detect_anomaly(set_detect_anomaly):
    """Context manager with anomaly detection on (see :class:`set_detect_anomaly`)."""

    def __init__(self, check_nan: bool = True) -> None:
        super().__init__(True, check_nan)


# ------------------------------------------------------------- PyTorch's autograd.Function


class FunctionCtx:
    """The ``ctx`` of a PyTorch-style :class:`Function`: ``save_for_backward`` /
    ``saved_tensors``, ``needs_input_grad``, ``set_materialize_grads``, and any attribute
    ``forward`` stores for ``backward``."""

    def __init__(self) -> None:
        self._saved: tuple = ()
        # forward's own output objects -> the outputs apply() returned (on the tape)
        self._outputs: dict[int, Tensor] = {}
        self.needs_input_grad: tuple = ()
        self.materialize_grads = True
        self.non_differentiable: tuple = ()
        self.dirty: tuple = ()
        # the saved tensors' versions when apply() returned (None: not yet)
        self._versions: tuple | None = None
        # a backward that did not retain the graph has run: the saved tensors are gone
        self._freed = False

    def save_for_backward(self, *tensors: Any) -> None:
        self._saved = tuple(tensors)
        self._versions = None

    def _stamp(self) -> None:
        self._versions = tuple(t._version if isinstance(t, Tensor) else None for t in self._saved)

    @property
    def saved_tensors(self) -> tuple:
        """What ``save_for_backward`` kept; a saved output of ``forward`` comes back as the
        output ``apply`` returned (on the tape), so a backward that uses it is
        differentiated through the function again (double backward), as PyTorch's. A saved
        tensor changed in place after ``apply`` returned raises (its gradient would be
        computed from the new values)."""
        if self._freed:
            raise RuntimeError(
                "saved_tensors: Trying to backward through the graph a second time (or "
                "directly access saved tensors after they have already been freed): a "
                "backward without retain_graph=True already ran through this Function; "
                "specify retain_graph=True the first time to backward twice"
            )
        if self._versions is not None:
            for i, (t, v) in enumerate(zip(self._saved, self._versions)):
                if v is not None and t._version != v:
                    raise RuntimeError(
                        f"saved_tensors: saved tensor {i} (shape {list(t.shape)}) was modified "
                        f"in place after it was saved (saved at version {v}, now at version "
                        f"{t._version}); clone it before changing it, or change it after "
                        "backward (one of the variables needed for gradient computation has "
                        "been modified by an inplace operation)"
                    )
        return tuple(self._outputs.get(id(t), t) for t in self._saved)

    def _free(self) -> None:
        """A backward that does not retain the graph ran: the saved tensors are released."""
        if any(isinstance(t, Tensor) for t in self._saved):
            self._freed = True
            self._saved, self._versions, self._outputs = (), None, {}

    @saved_tensors.setter
    def saved_tensors(self, value: tuple) -> None:
        self._saved = tuple(value)
        self._versions = None

    @property
    def saved_variables(self) -> tuple:
        """Deprecated spelling of :attr:`saved_tensors` (warns, as PyTorch's)."""
        import warnings

        warnings.warn(
            "'saved_variables' is deprecated; use 'saved_tensors'", DeprecationWarning, stacklevel=2
        )
        return self.saved_tensors

    def mark_non_differentiable(self, *outputs: Tensor) -> None:
        """These outputs get no gradient: ``apply`` returns them not requiring grad."""
        self.non_differentiable = tuple(outputs)

    def mark_dirty(self, *tensors: Tensor) -> None:
        """These inputs were changed in place by ``forward`` (and returned): ``apply``
        returns the input objects themselves, now standing for the function's outputs."""
        self.dirty = tuple(tensors)

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)


class Function:
    """PyTorch's ``torch.autograd.Function``: subclass it with static ``forward(ctx, *args)``
    and ``backward(ctx, *grad_outputs)`` (or ``forward(*args)`` plus
    ``setup_context(ctx, inputs, output)``), and call ``MyFn.apply(*args)``. ``backward``
    returns one gradient per argument of ``forward`` (``None`` for non-tensors and inputs
    without a gradient); outputs that got no gradient come as zeros unless
    ``ctx.set_materialize_grads(False)``. It runs on the same tape as every op, with
    ``loss.backward()``, GradManagers and inside ``fg.trace``. (``fg.Function`` is
    MegEngine's form of the same thing.)"""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        import warnings

        warnings.warn(
            f"{type(self).__name__} should not be instantiated: a Function's methods are "
            f"static, call {type(self).__name__}.apply(...)",
            DeprecationWarning,
            stacklevel=2,
        )

    @staticmethod
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "Function.forward must be overridden (You must implement the forward function for "
            "custom autograd.Function.)"
        )

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        raise NotImplementedError(
            "Function.backward must be overridden (You must implement either the backward or "
            "vjp method for your custom autograd.Function to use it with backward mode AD.)"
        )

    # PyTorch's other name for backward: a subclass may define vjp instead (not both)
    vjp = backward

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
        raise NotImplementedError

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"{type(self).__name__}: Legacy autograd function with non-static forward method is "
            "deprecated: make forward and backward static methods and call "
            f"{type(self).__name__}.apply(...) instead of an instance"
        )

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        from . import _core as core

        ctx = FunctionCtx()
        separate_setup = _overrides_setup_context(cls)
        if separate_setup:
            # forward's defaults are bound, so setup_context sees every argument (PyTorch's)
            import inspect

            bound = inspect.signature(cls.forward).bind(*args, **kwargs)
            bound.apply_defaults()
            args, kwargs = bound.args, bound.kwargs
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.needs_input_grad = tuple(
            isinstance(a, Tensor)
            and (bool(a.requires_grad) or core._tracking_level([a]) is not None)
            for a in args
        )
        if not positions:
            # no tensor argument: nothing to differentiate
            return (
                cls.forward(*args, **kwargs)
                if separate_setup
                else cls.forward(ctx, *args, **kwargs)
            )
        op = _node_class(cls)(cls, ctx, args, kwargs, positions, separate_setup)
        result = op(*[args[i] for i in positions])
        raw_outs, returned, at = op.raw_outs, op.returned, op.at
        recorded = (result,) if isinstance(result, Tensor) else tuple(result)
        # a tensor forward returned twice comes back as one object, as PyTorch's (the
        # second output's gradient is then zeros, or None without materialize_grads)
        first: dict[int, Tensor] = {}
        recorded = tuple(first.setdefault(id(raw), rec) for raw, rec in zip(raw_outs, recorded))
        if len(first) < len(raw_outs):
            result = recorded
        ctx._outputs = first
        if not (ctx.dirty or ctx.non_differentiable):
            ctx._stamp()
            return _with_non_tensors(result, returned[0], at)
        dirty = {id(t) for t in ctx.dirty}
        frozen = {id(t) for t in ctx.non_differentiable}
        final = []
        for raw, rec in zip(raw_outs, recorded):
            if id(raw) in dirty:
                # the input object itself now stands for the output (PyTorch's mark_dirty):
                # recorded as a write of the output into it, so a tensor it views follows
                raw.copy_(rec)
                rec = raw
            if id(raw) in frozen:
                rec = rec.detach()
            final.append(rec)
        ctx._stamp()
        return _with_non_tensors(
            final[0] if isinstance(result, Tensor) else tuple(final), returned[0], at
        )


def _user_backward(cls: type) -> Any:
    """The backward rule ``cls`` defines: its ``backward`` or its ``vjp`` (one of them)."""
    base = Function.__dict__["backward"].__func__
    own_backward = getattr(cls.backward, "__func__", cls.backward) is not base
    own_vjp = getattr(cls.vjp, "__func__", cls.vjp) is not base
    if own_backward and own_vjp:
        raise RuntimeError(
            f"{cls.__name__}: Implementing both 'backward' and 'vjp' for a custom Function is "
            "not allowed; define only one of them"
        )
    return cls.vjp if own_vjp else cls.backward


def _overrides_setup_context(cls: type) -> bool:
    own = getattr(cls.setup_context, "__func__", cls.setup_context)
    return own is not Function.__dict__["setup_context"].__func__


_node_classes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _node_class(cls: type) -> type:
    """The engine op class that records ``cls.apply`` calls (one per Function class, named
    after it, so that grad_fn is ``<Name>Backward``)."""
    node = _node_classes.get(cls)
    if node is None:
        node = type(cls.__name__, (_FunctionNode,), {"__qualname__": cls.__name__})
        _node_classes[cls] = node
    return node


class _FunctionNode(_EngineFunction):
    """One call of a PyTorch-style :class:`Function`: runs its ``forward`` on the engine's
    custom-op path and its ``backward`` when the tape reaches it."""

    def __init__(
        self,
        outer: type,
        ctx: Any,
        args: tuple,
        kwargs: dict,
        positions: list,
        separate_setup: bool,
    ) -> None:
        self.outer, self.ctx, self.args, self.kwargs = outer, ctx, args, kwargs
        self.positions, self.separate_setup = positions, separate_setup
        self.shapes: list = []
        self.raw_outs: list = []
        # forward's outputs as returned (a tensor, or a tuple that may hold non-tensors,
        # which pass through untouched and get None as gradient) and where its tensors are
        self.returned: list = []
        self.at: list = []

    def forward(self, *tensors: Tensor) -> Any:
        outer, ctx, name = self.outer, self.ctx, self.outer.__name__
        full = list(self.args)
        for i, t in zip(self.positions, tensors):
            full[i] = t
        self.in_dtypes = [t.dtype for t in tensors]
        self.in_shapes = [tuple(t.shape) for t in tensors]
        # (under no_grad as PyTorch's: is_grad_enabled() is False in forward; nothing in it
        # is recorded either way)
        with no_grad():
            if self.separate_setup:
                out = outer.forward(*full, **self.kwargs)
                outer.setup_context(ctx, tuple(full), out)
            else:
                out = outer.forward(ctx, *full, **self.kwargs)
        outs = (out,) if isinstance(out, Tensor) else tuple(out)
        at = self.at
        at.extend(i for i, o in enumerate(outs) if isinstance(o, Tensor))
        self.returned.append(out)
        if not isinstance(out, Tensor):
            if not at:
                raise TypeError(
                    f"{name}.forward returned no tensor (got "
                    f"{type(out).__name__}); a Function needs at least one tensor output"
                )
            outs = tuple(outs[i] for i in at)
        for d in ctx.dirty:
            if not any(d is o for o in outs):
                # (its recorded history would not follow the in-place change: a later use
                # would get the gradient of the value before it)
                raise RuntimeError(
                    f"{name}: Some elements marked as dirty during the forward method were not "
                    "returned as output; an input modified in place (mark_dirty) must be "
                    "returned by forward"
                )
            if isinstance(d, Tensor) and d.requires_grad and d.is_leaf:
                raise RuntimeError(
                    f"{name}: a leaf Variable that requires grad is being used in an "
                    "in-place operation (mark_dirty)"
                )
        # (dtypes kept as they are; their names are read only if a gradient is missing)
        self.shapes.extend((o.shape, o.dtype, o.device) for o in outs)
        self.raw_outs.extend(outs)
        return out if isinstance(out, Tensor) else outs

    def backward(self, *grads: Tensor | None) -> Any:
        from . import _core as core

        outer, ctx, name, args = self.outer, self.ctx, self.outer.__name__, self.args
        if ctx.materialize_grads:
            # (PyTorch's private ctx._materialize_non_diff_grads = False leaves the outputs
            # marked non-differentiable at None)
            frozen = (
                set()
                if getattr(ctx, "_materialize_non_diff_grads", True)
                else {id(t) for t in ctx.non_differentiable}
            )
            grads = tuple(
                g
                if g is not None or id(raw) in frozen
                else core.zeros(sh, dtype=dt.name, device=dev)
                for g, (sh, dt, dev), raw in zip(grads, self.shapes, self.raw_outs)
            )
        returned = self.returned
        if not isinstance(returned[0], Tensor):
            full: list = [None] * len(returned[0])
            for i, g in zip(self.at, grads):
                full[i] = g
            grads = tuple(full)
        user_backward = _user_backward(outer)
        mode = _current_backward_mode()
        if mode is None:
            r = user_backward(ctx, *grads)
        else:
            # grad mode is on in backward only when it is recorded (create_graph), as PyTorch's
            with set_grad_enabled(mode):
                r = user_backward(ctx, *grads)
            if not _current_backward_retains():
                ctx._free()  # (as PyTorch's)
        rs = tuple(r) if isinstance(r, (tuple, list)) else (r,)
        if _anomaly_on():
            _check_nan_grads(f"{name}Backward", rs)
        if len(rs) < len(args) or any(g is not None for g in rs[len(args) :]):
            # (trailing Nones past the arguments are allowed, as PyTorch's)
            raise RuntimeError(
                f"{name}.backward returned an incorrect number of gradients (expected "
                f"{len(args)}, one per argument of forward, got {len(rs)})"
            )
        out = []
        for i, dt, shape in zip(self.positions, self.in_dtypes, self.in_shapes):
            g = rs[i]
            if isinstance(g, Tensor):
                # as PyTorch's engine: a floating gradient of another precision is cast to
                # the input's (a float32 backward for a float64 input), and one of a shape the
                # input broadcasts to is summed down to the input's shape
                if g.dtype != dt and g.dtype.kind == dt.kind == "f":
                    g = g.astype(dt.name)
                if tuple(g.shape) != shape and _broadcasts_to(shape, tuple(g.shape)):
                    g = g.sum_to_size(*shape) if shape else g.sum()
            out.append(g)
        return tuple(out)


def _broadcasts_to(shape: tuple, target: tuple) -> bool:
    """Whether a tensor of ``shape`` broadcasts to ``target`` (without adding size)."""
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(reversed(shape), reversed(target)))


def _anomaly_on() -> bool:
    from .autodiff import _anomaly

    return bool(_anomaly["on"])


def _check_nan_grads(node: str, grads: tuple) -> None:
    """Anomaly mode: a custom Function's backward that returned NaN raises at once, naming
    it, as PyTorch's."""
    import numpy as np

    for i, g in enumerate(grads):
        if (
            isinstance(g, Tensor)
            and g.dtype.kind in "fc"
            and bool(np.isnan(np.asarray(g.detach().numpy())).any())
        ):
            raise RuntimeError(f"Function '{node}' returned nan values in its {i}th output.")


def _with_non_tensors(result: Any, returned: Any, at: list) -> Any:
    """``apply``'s result: the recorded tensors put back where ``forward`` returned them,
    between its non-tensor outputs."""
    if isinstance(returned, Tensor):
        return result
    full = list(returned)
    for i, t in zip(at, (result,) if isinstance(result, Tensor) else result):
        full[i] = t
    return tuple(full)


def once_differentiable(fn: Any) -> Any:
    """PyTorch's decorator for a ``backward`` that is not itself differentiable: it runs
    under ``no_grad`` (also in a ``create_graph=True`` backward), so its results are not
    recorded. In a ``create_graph=True`` backward its gradients still depend on what it read
    (the incoming gradients, the saved tensors): they come out tied to those by a node that
    raises when differentiated, as PyTorch's, instead of silently dropping that term from a
    second derivative."""
    import functools

    from .autodiff import no_grad

    @functools.wraps(fn)
    def wrapped(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        with no_grad():
            result = fn(ctx, *args, **kwargs)
        if _current_backward_mode() is False:
            return result  # a plain backward records nothing
        saved = getattr(ctx, "saved_tensors", ()) if isinstance(ctx, FunctionCtx) else ()
        read = [t for t in (*args, *saved) if isinstance(t, Tensor) and t.requires_grad]
        if not read:
            return result
        many = isinstance(result, (tuple, list))
        rs = list(result) if many else [result]
        at = [i for i, r in enumerate(rs) if isinstance(r, Tensor)]
        if not at:
            return result
        tied = _OnceDifferentiable(fn.__qualname__, [rs[i] for i in at])(*read)
        for i, t in zip(at, tied):
            rs[i] = t
        return tuple(rs) if many else rs[0]

    return wrapped


class _OnceDifferentiable(_EngineFunction):
    """The gradients a ``once_differentiable`` backward returned, as outputs of the tensors
    it read. Recorded only where the tape records a backward (``create_graph=True``); its
    own backward raises."""

    def __init__(self, name: str, results: list) -> None:
        self.name, self.results = name, results

    def forward(self, *read: Tensor) -> Any:
        return tuple(self.results)

    def backward(self, *grads: Any) -> Any:
        raise RuntimeError(
            f"{self.name}: trying to differentiate twice a function that was marked with "
            "@once_differentiable"
        )


class InplaceFunction(Function):
    """PyTorch's ``autograd.function.InplaceFunction``: a :class:`Function` whose
    constructor takes ``inplace`` (a flag its ``forward`` may read)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace


def _install_function() -> None:
    # torch.autograd.function as a submodule, so `from ferrograd.autograd.function import
    # Function` works (and `ferrograd.autograd.function.Function` as an attribute)
    import sys
    import types

    mod = types.ModuleType(
        f"{__name__}.function",
        "PyTorch's torch.autograd.function: Function, FunctionCtx, InplaceFunction, "
        "once_differentiable.",
    )
    mod.Function = Function  # type: ignore[attr-defined]
    mod.FunctionCtx = FunctionCtx  # type: ignore[attr-defined]
    mod.InplaceFunction = InplaceFunction  # type: ignore[attr-defined]
    mod.once_differentiable = once_differentiable  # type: ignore[attr-defined]
    mod.__all__ = ["Function", "FunctionCtx", "InplaceFunction", "once_differentiable"]  # type: ignore[attr-defined]
    sys.modules[mod.__name__] = mod
    globals()["function"] = mod


_install_function()


def _install_grad_mode() -> None:
    # torch.autograd.grad_mode and .anomaly_mode: where programs import the context managers
    # from (`from torch.autograd.grad_mode import no_grad`)
    import sys
    import types

    for sub, names in (
        ("grad_mode", ("no_grad", "enable_grad", "set_grad_enabled", "inference_mode")),
        ("anomaly_mode", ("detect_anomaly", "set_detect_anomaly")),
    ):
        mod = types.ModuleType(f"{__name__}.{sub}", f"PyTorch's torch.autograd.{sub}.")
        for name in names:
            setattr(mod, name, globals()[name])
        mod.__all__ = list(names)  # type: ignore[attr-defined]
        sys.modules[mod.__name__] = mod
        globals()[sub] = mod


_install_grad_mode()


def _install_functional() -> None:
    # torch.autograd.functional (a submodule here too, so `from
    # ferrograd.autograd.functional import jacobian` works) and gradcheck/gradgradcheck
    import sys
    import types

    from . import _functional_ad as ad

    mod = types.ModuleType(
        f"{__name__}.functional",
        "PyTorch's torch.autograd.functional: vjp, jvp, jacobian, hessian, hvp, vhp.",
    )
    for name in ("vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"):
        setattr(mod, name, getattr(ad, name))
    mod.__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]  # type: ignore[attr-defined]
    sys.modules[mod.__name__] = mod
    g = globals()
    g["functional"] = mod
    g["gradcheck"] = ad.gradcheck
    g["gradgradcheck"] = ad.gradgradcheck
    g["GradcheckError"] = ad.GradcheckError
    __all__.extend(["GradcheckError", "functional", "gradcheck", "gradgradcheck"])


_install_functional()
