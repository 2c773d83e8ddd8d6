"""Training-loop autodiff on top of the engine's GradKey: GradManager, custom Functions,
grad rule overrides and a functional layer (grad, vjp, jvp, hvp)."""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

if TYPE_CHECKING:  # annotations only: the package needs nothing beyond numpy at run time
    from typing_extensions import Self

from . import _core
from ._core import DeviceError, DTypeError, GradError, GradKey, ShapeError, Tensor

TensorOrList = Union[Tensor, Sequence[Tensor]]
Callback = Callable[[Tensor, Tensor], Optional[Tensor]]


class GradRuleFallback(Exception):
    """Raised by a registered grad rule to use the builtin rule for this call."""


def register_grad_rule(op_name: str, rule: Callable[..., Any]) -> Callable[..., Any]:
    """Registers ``rule(inputs, output)`` as the grad rule of the builtin op ``op_name``.

    ``rule`` returns ``backward(*output_grads) -> input grads``, or None (or raises
    :class:`GradRuleFallback`) to decline for this call, in which case the builtin rule is used.
    Returns ``rule``, so it can be used as a decorator factory's result.
    """
    _core.register_grad_rule(op_name, rule)
    return rule


def unregister_grad_rule(op_name: str) -> bool:
    """Removes a rule registered for ``op_name``; returns whether there was one."""
    return _core.unregister_grad_rule(op_name)


class no_grad:
    """Context manager (and decorator, ``@no_grad()`` or ``@no_grad``) in which no GradKey
    records."""

    def __new__(cls, orig_func: Callable[..., Any] | None = None) -> Any:
        self = super().__new__(cls)
        if orig_func is not None:
            if not callable(orig_func):
                raise TypeError(f"no_grad: expected a function, got {type(orig_func).__name__}")
            return self(orig_func)
        return self

    def __enter__(self) -> Self:
        self.__dict__.setdefault("_depths", []).append(_core._ceiling_depth())
        _core._push_ceiling(0)
        return self

    def __exit__(self, *exc: object) -> None:
        # (the mode found on entry comes back, also after a plain set_grad_enabled inside)
        _core._truncate_ceiling(self.__dict__["_depths"].pop())

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        return _wrap_in(no_grad, fn)


def _wrap_in(ctx: Callable[[], Any], fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run inside ``ctx()``; a generator function's body runs inside it at every step
    (not only while the generator is made), as PyTorch's decorators."""
    import functools
    import inspect

    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def gen(*args: Any, **kwargs: Any) -> Any:
            with ctx():
                it = fn(*args, **kwargs)
                value = next(it, _DONE)
            while value is not _DONE:
                sent = yield value
                with ctx():
                    try:
                        value = it.send(sent)
                    except StopIteration:
                        return

        return gen

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with ctx():
            return fn(*args, **kwargs)

    return wrapped


_DONE = object()


def _as_list(name: str, x: Any) -> list[Tensor]:
    if isinstance(x, Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        for i, t in enumerate(x):
            if not isinstance(t, Tensor):
                raise TypeError(f"{name}: element {i} is a {type(t).__name__}, expected a Tensor")
        return list(x)
    raise TypeError(f"{name}: expected a Tensor or a list of Tensors, got {type(x).__name__}")


def _callable_name(f: Any) -> str:
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)


def _check_callback_grad(cb: Any, tensor: Tensor, g: Any) -> None:
    """Raises unless ``g``, returned by the callback ``cb``, can be ``tensor``'s gradient."""
    name = _callable_name(cb)
    if not isinstance(g, Tensor):
        raise TypeError(
            f"GradManager callback {name!r} returned a {type(g).__name__}; expected a Tensor "
            "or None"
        )
    if g.dtype != tensor.dtype:
        raise DTypeError(
            f"GradManager callback {name!r} returned a {g.dtype} gradient for a {tensor.dtype} "
            f"tensor of shape {list(tensor.shape)}; return a gradient of the tensor's dtype"
        )
    if g.shape != tensor.shape:
        raise ShapeError(
            f"GradManager callback {name!r} returned a gradient of shape {list(g.shape)} for a "
            f"tensor of shape {list(tensor.shape)}"
        )
    if g.device != tensor.device:
        raise DeviceError(
            f"GradManager callback {name!r} returned a gradient on {g.device} for a tensor on "
            f"{tensor.device}"
        )


# GradManagers that hold a recording, so that fg.grad can tell the one whose recording it
# consumed (its message on a later backward then says so)
_recording_managers: weakref.WeakSet[GradManager] = weakref.WeakSet()


class _Entry:
    __slots__ = ("callbacks", "ref", "suspended")

    def __init__(self, tensor: Tensor, callbacks: list[Callback]) -> None:
        self.ref = weakref.ref(tensor)
        self.callbacks = callbacks
        # the tensor also requires grad (PyTorch's API): while this manager records, ops
        # record it here only, and `backward()` takes it back when the recording ends
        self.suspended = False


class _AttachDTypeError(DTypeError, AssertionError):
    """Attaching a tensor that is not float: a ``DTypeError``, and the ``AssertionError``
    MegEngine's ``GradManager.attach`` raises."""


class GradManager:
    """Computes gradients of attached tensors for the computation recorded between
    :meth:`record` and :meth:`backward` (or inside ``with gm:``).

    Attached tensors are held by weak reference. When a tensor's gradient is final its
    callbacks run in order as ``grad = cb(tensor, grad)`` (before the rest of backward), and the
    last result is added into ``tensor.grad``. Managers nest: inside ``with outer:`` and
    ``with inner:``, ``inner.backward`` is recorded by ``outer``, which gives higher-order
    gradients.
    """

    def __init__(self, recompute: str | Callable[[str], bool] | None = None) -> None:
        if recompute is not None and recompute != "auto" and not callable(recompute):
            raise ValueError(
                f'GradManager: recompute must be None, "auto" or a callable, got {recompute!r}'
            )
        self._entries: list[_Entry] = []
        self._key: GradKey | None = None
        self._recording = False
        # what used up the last recording (for the message of a later backward)
        self._consumed_by: str | None = None
        self.recompute = recompute

    # -- attach -------------------------------------------------------------------------
    def attach(
        self,
        tensors: TensorOrList,
        callbacks: None | Callback | Sequence[Callback] = None,
    ) -> GradManager:
        """Attaches a tensor or a list of tensors, with optional callbacks; returns self.
        Attaching a tensor again appends its new callbacks."""
        ts = _as_list("attach", tensors)
        if callbacks is None:
            cbs: list[Callback] = []
        elif callable(callbacks):
            cbs = [callbacks]
        else:
            cbs = list(callbacks)
        for cb in cbs:
            if not callable(cb):
                raise TypeError(f"attach: callbacks must be callable, got {type(cb).__name__}")
        for t in ts:
            if t.dtype.kind != "f":
                raise _AttachDTypeError(
                    f"attach: only float tensors can be differentiated, got a {t.dtype} tensor "
                    f"of shape {list(t.shape)}"
                )
        self._entries = [e for e in self._entries if e.ref() is not None]
        for t in ts:
            entry = next((e for e in self._entries if e.ref() is t), None)
            if entry is None:
                entry = _Entry(t, list(cbs))
                self._entries.append(entry)
                if self._recording:
                    self._attach_to_key(entry, t)
            else:
                entry.callbacks.extend(cbs)
        return self

    def attached_tensors(self) -> list[Tensor]:
        """The live attached tensors, in attach order."""
        live = [e.ref() for e in self._entries]
        return [t for t in live if t is not None]

    def _attach_to_key(self, entry: _Entry, tensor: Tensor) -> None:
        assert self._key is not None
        # a tensor that also requires grad: the manager records it alone while it records
        # (no double recording), and its hooks (register_hook) act on this backward too
        if not entry.suspended:
            entry.suspended = _autograd.suspend(tensor)
        for hook in _autograd.hooks.get(id(tensor), ()):
            self._key._attach(tensor, hook, False)
        self._key._attach(tensor, self._callback(entry), False)

    @staticmethod
    def _callback(entry: _Entry) -> Callable[[Tensor, Tensor], None]:
        def on_final(_snapshot: Tensor, grad: Tensor) -> None:
            tensor = entry.ref()
            if tensor is None:
                return
            g: Tensor | None = grad
            traced = _core._tracing()
            for cb in entry.callbacks:
                if traced and hasattr(cb, "_traced_grad"):
                    # the distributed allreduce: one node after backward reduces all of them
                    cb._traced_grad(tensor, g)
                    return
                if traced:
                    # a node of the graph: the callback runs at this point of every step
                    g = _core._trace_call(_callable_name(cb), lambda gg, cb=cb: cb(tensor, gg), [g])
                else:
                    g = cb(tensor, g)
                if g is None:
                    return
                _check_callback_grad(cb, tensor, g)
            if _stored_grad(tensor) is None:
                # .grad is the user's to write in place (scaler.unscale_, p.grad *= c): a
                # broadcast view (the gradient of x.sum()) becomes its own contiguous copy
                tensor.grad = g if traced or g.is_contiguous() else g.contiguous()
            else:
                tensor.grad = tensor.grad + g
            return

        return on_final

    # -- recording ----------------------------------------------------------------------
    @property
    def is_recording(self) -> bool:
        """Whether the manager holds a recording that backward can still use."""
        return self._recording and self._key is not None and not self._key.is_finished

    def record(self, _sibling_of: GradKey | None = None) -> None:
        """Starts recording. Tensors attached so far are snapshotted now; tensors attached
        while recording, when they are attached."""
        if self._recording:
            raise RuntimeError("GradManager.record: already recording; call release() first")
        self._key = GradKey("GradManager", sibling_of=_sibling_of, recompute=self.recompute)
        self._recording = True
        self._consumed_by = None
        _recording_managers.add(self)
        for entry in self._entries:
            t = entry.ref()
            if t is not None:
                self._attach_to_key(entry, t)

    def saved_tensors_report(self) -> list[dict]:
        """What each op recorded so far keeps for backward: a list of
        ``{"op": name, "saved": [(shape, dtype, bytes), ...], "bytes": total}`` in recording
        order (mirrored values, recomputed in backward, are not listed)."""
        if self._key is None:
            return []
        return [
            {"op": op, "saved": list(saved), "bytes": sum(b for _, _, b in saved)}
            for op, saved in self._key.saved_tensors_report()
        ]

    def release(self) -> None:
        """Stops recording and drops the recorded computation. Safe to call twice."""
        key, self._key = self._key, None
        self._recording = False
        _recording_managers.discard(self)
        if key is not None:
            key.finish()
        for entry in self._entries:
            if entry.suspended:
                entry.suspended = False
                t = entry.ref()
                if t is not None:
                    _autograd.resume(t)

    def backward(self, y: TensorOrList | None = None, dy: TensorOrList | None = None) -> None:
        """Backpropagates from ``y`` (a tensor or list) with ``dy`` (ones when omitted) into
        the attached tensors' ``.grad``, then releases the recording (also when it raises)."""
        if not self.is_recording:
            if self._recording:  # the key was finished by something else
                consumer = self._consumed_by or "a GradKey call on it (grad, backward, finish)"
            else:
                consumer = self._consumed_by
            self.release()
            if consumer is None:
                reason = "call it inside `with gm:` or between gm.record() and gm.backward()"
            else:
                reason = (
                    f"the recording was already consumed by {consumer}; a recording serves one "
                    "backward, start a new one (a new `with gm:` block or gm.record()) for the next"
                )
            raise GradError(f"GradManager.backward: no computation history; {reason}")
        try:
            if y is None:
                return
            ys = _as_list("backward", y)
            if dy is None:
                dys = None
            elif isinstance(dy, (list, tuple)):
                dys = list(dy)
            else:
                dys = [dy]
            if dys is not None:
                # MegEngine's: a number, or a gradient that broadcasts to its output's shape
                dys = [_broadcast_dy(t, g) for t, g in zip(ys, dys)] + dys[len(ys) :]
            hooks = self._backward_hooks()
            for cb, tensors in hooks:
                cb._backward_begin(tensors)
            try:
                self._key.backward(ys, dys)
            except BaseException:
                for cb, _ in hooks:
                    cb._backward_abort()
                raise
            for cb, _ in hooks:
                cb._backward_end()
        finally:
            self.release()
            self._consumed_by = "an earlier GradManager.backward"

    def __enter__(self) -> Self:
        self.record()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self._consumed_by = None

    def _backward_hooks(self) -> list[tuple[Any, list[Tensor]]]:
        """Callbacks that act around the whole backward (the distributed allreduce), each with
        the live tensors it is attached to, in attach order."""
        hooks: dict[int, tuple[Any, list[Tensor]]] = {}
        for entry in self._entries:
            t = entry.ref()
            if t is None:
                continue
            for cb in entry.callbacks:
                if hasattr(cb, "_backward_begin"):
                    hooks.setdefault(id(cb), (cb, []))[1].append(t)
        return list(hooks.values())

    def __or__(self, other: GradManager) -> GradManagerGroup:
        return GradManagerGroup([self]) | other

    def __repr__(self) -> str:
        state = "recording" if self._recording else "idle"
        return f"GradManager({len(self.attached_tensors())} attached, {state})"


class GradManagerGroup:
    """Several managers recording at one level (``gm1 | gm2``): neither sees the other's
    backward."""

    def __init__(self, managers: Sequence[GradManager]) -> None:
        self.managers = list(managers)

    def __or__(self, other: GradManager | GradManagerGroup) -> GradManagerGroup:
        more = other.managers if isinstance(other, GradManagerGroup) else [other]
        return GradManagerGroup(self.managers + more)

    def record(self) -> None:
        first: GradKey | None = None
        started = []
        try:
            for gm in self.managers:
                gm.record(_sibling_of=first)
                started.append(gm)
                if first is None:
                    first = gm._key
        except BaseException:
            for gm in started:
                gm.release()
            raise

    def release(self) -> None:
        for gm in self.managers:
            gm.release()

    def __enter__(self) -> Self:
        self.record()
        return self

    def __exit__(self, *exc: object) -> None:
        for gm in self.managers:
            gm.__exit__(*exc)


class Function:
    """A custom op: ``forward(*tensors)`` runs untracked and ``backward(*output_grads)``
    replaces autodiff of it.

    ``backward`` receives ``None`` for outputs that got no gradient and returns a Tensor, a
    tuple with one entry per input, or ``None`` entries for inputs without a gradient. What it
    returns is used as is (a straight-through estimator works). Inputs must be Tensors.
    """

    def forward(self, *inputs: Tensor) -> Tensor | tuple[Tensor, ...]:
        raise NotImplementedError

    def backward(self, *output_grads: Tensor | None) -> Any:
        raise NotImplementedError

    def __call__(self, *inputs: Tensor) -> Tensor | tuple[Tensor, ...]:
        name = type(self).__name__
        for i, x in enumerate(inputs):
            if not isinstance(x, Tensor):
                raise TypeError(
                    f"op {name}: expect type Tensor as inputs, got a {type(x).__name__} for "
                    f"input {i}; pass non-tensor arguments to the Function's constructor"
                )
        level = _core._tracking_level(list(inputs)) if inputs else None
        if level is not None:
            _core._push_ceiling(level)
        try:
            result = self.forward(*inputs)
        finally:
            if level is not None:
                _core._pop_ceiling()
        single = isinstance(result, Tensor)
        outs = (result,) if single else tuple(result)
        for i, o in enumerate(outs):
            if not isinstance(o, Tensor):
                raise TypeError(
                    f"{name}.forward returned a {type(o).__name__} as output {i}; expected Tensors"
                )
        if _core._tracing():
            # in a trace, the gradient pass calls backward here instead of differentiating
            # forward's ops
            n_in = len(inputs)

            def rule(grads: list[Tensor | None]) -> list[Tensor | None]:
                r = self.backward(*grads)
                rs = list(r) if isinstance(r, (tuple, list)) else [r]
                if len(rs) != n_in:
                    raise ValueError(
                        f"{name}.backward returned {len(rs)} gradients for {n_in} inputs"
                    )
                return rs

            outs = tuple(_core._trace_custom(name, list(inputs), list(outs), rule))
            return outs[0] if single else outs
        # fresh handles: the outputs' tape state must be this op's alone
        outs = tuple(o.detach() for o in outs)
        _core._record_function(self, list(inputs), list(outs), name)
        return outs[0] if single else outs


# -- functional layer ------------------------------------------------------------------------


def grad(
    y: TensorOrList,
    xs: TensorOrList,
    dy: TensorOrList | None = None,
    create_graph: bool = False,
) -> Tensor | list[Tensor]:
    """Gradients of ``y`` with respect to ``xs``, returned instead of added into ``.grad``.

    Uses the innermost recording GradKey (or GradManager) that tracks ``y``; that recording is
    consumed. ``xs`` must be attached to it or computed from tensors it tracks. With
    ``create_graph=True``, enclosing managers record the computation, so the result can be
    differentiated again (gradient penalties, MAML); on tensors that require grad (PyTorch
    style) the same tape records it and keeps the forward, as ``torch.autograd.grad`` does.
    Gradients that no path reaches are zeros.
    """
    ys = _as_list("grad", y)
    single = isinstance(xs, Tensor)
    x_list = _as_list("grad", xs)
    if _core._tracing():
        # inside a traced function: the graph gradient pass (always differentiable again)
        if dy is None:
            dys = [_core.ones_like(t) for t in ys]
        elif isinstance(dy, (list, tuple)):
            dys = list(dy)
        else:
            dys = [dy]
        found = _core._trace_gradients(ys, dys, x_list)
        gs = [g if g is not None else _core.zeros_like(x) for g, x in zip(found, x_list)]
        return gs[0] if single else gs
    keys = [k for t in ys for k in _core._tracking_keys(t)]
    if not keys:
        raise _core.GradError(
            "grad: y does not depend on any tensor attached to a recording GradManager or "
            "GradKey; attach xs and compute y inside `with gm:`"
        )
    key = max(keys, key=lambda k: k.level)
    if dy is None:
        dys = None
    elif isinstance(dy, (list, tuple)):
        dys = list(dy)
    else:
        dys = [dy]
    live = [gm for gm in _recording_managers if gm.is_recording]
    try:
        gs = key.grad(ys, dys, x_list, create_graph)
    finally:
        for gm in live:
            if not gm.is_recording:
                gm._consumed_by = "fg.grad"
        if key == _autograd.key and key.is_finished:
            _autograd.renew()  # tensors that require grad go on recording
    return gs[0] if single else gs


def _tuple(name: str, xs: Any) -> tuple[Tensor, ...]:
    return tuple(_as_list(name, xs))


def vjp(f: Callable[..., Any], *primals: Tensor) -> tuple[Any, Callable[..., tuple[Tensor, ...]]]:
    """``(f(*primals), vjp_fn)`` where ``vjp_fn(*cotangents)`` returns the vector-Jacobian
    products, one per primal (as in JAX). ``vjp_fn`` may be called more than once."""
    for i, p in enumerate(primals):
        if not isinstance(p, Tensor):
            raise TypeError(f"vjp: primal {i} is a {type(p).__name__}, expected a Tensor")
    out = f(*primals)

    def vjp_fn(*cotangents: Tensor) -> tuple[Tensor, ...]:
        key = GradKey("vjp")
        for p in primals:
            key._attach(p, None, False)
        o = f(*primals)
        outs = _tuple("vjp", o)
        if len(cotangents) != len(outs):
            key.finish()
            raise ValueError(f"vjp: got {len(cotangents)} cotangents for {len(outs)} outputs")
        return tuple(key.grad(list(outs), list(cotangents), list(primals), True))

    return out, vjp_fn


def jvp(
    f: Callable[..., Any], primals: Sequence[Tensor], tangents: Sequence[Tensor]
) -> tuple[Any, Any]:
    """``(f(*primals), J @ tangents)``: the Jacobian-vector product, computed by reverse mode
    twice (the vjp is linear in its cotangent, so differentiating it gives J v)."""
    ps = _tuple("jvp", primals)
    vs = _tuple("jvp", tangents)
    if len(ps) != len(vs):
        raise ValueError(f"jvp: got {len(vs)} tangents for {len(ps)} primals")
    for p, v in zip(ps, vs):
        if tuple(p.shape) != tuple(v.shape):
            raise _core.ShapeError(
                f"jvp: tangent of shape {list(v.shape)} for a primal of shape {list(p.shape)}"
            )
    outer = GradKey("jvp-cotangent")
    inner = GradKey("jvp-primal")
    for p in ps:
        inner._attach(p, None, False)
    out = f(*ps)
    outs = _tuple("jvp", out)
    us = [_core.zeros_like(o) for o in outs]
    for u in us:
        outer._attach(u, None, False)
    vjps = inner.grad(list(outs), us, list(ps), True)
    jv = outer.grad(vjps, list(vs), us, True)
    return out, (jv[0] if isinstance(out, Tensor) else tuple(jv))


def hvp(
    f: Callable[..., Tensor], primals: TensorOrList, tangents: TensorOrList
) -> tuple[Tensor, Any]:
    """``(f(*primals), H @ tangents)`` for a scalar ``f``: the Hessian-vector product, by
    differentiating ``<grad f, v>`` (reverse over reverse)."""
    single = isinstance(primals, Tensor)
    ps = _tuple("hvp", primals)
    vs = _tuple("hvp", tangents)
    if len(ps) != len(vs):
        raise ValueError(f"hvp: got {len(vs)} tangents for {len(ps)} primals")
    outer = GradKey("hvp-outer")
    inner = GradKey("hvp-inner")
    for p in ps:
        outer._attach(p, None, False)
        inner._attach(p, None, False)
    y = f(*ps)
    if not isinstance(y, Tensor) or y.size != 1:
        outer.finish()
        inner.finish()
        raise ValueError("hvp: f must return a one-element Tensor")
    gs = inner.grad([y], None, list(ps), True)
    dot = None
    for g, v in zip(gs, vs):
        term = (g * v).sum()
        dot = term if dot is None else dot + term
    hv = outer.grad([dot], None, list(ps), False)
    return y, (hv[0] if single else tuple(hv))


# -- recomputation ---------------------------------------------------------------------------


_recompute = threading.local()


def _recomputing() -> bool:
    """Whether a checkpointed segment is being recomputed in this thread (in backward)."""
    return getattr(_recompute, "depth", 0) > 0


def _in_checkpoint_forward() -> bool:
    """Whether a checkpointed function is running its forward in this thread (nothing
    records there: it cannot differentiate inside itself)."""
    return getattr(_recompute, "forward", 0) > 0


def checkpoint(fn: Callable[..., Any], *args: Any, preserve_rng_state: bool = True) -> Any:
    """Runs ``fn(*args)`` keeping only its inputs for backward; ``fn`` is rerun there.

    Gradients reach the tensor arguments and every tracked tensor ``fn`` reads (layer weights
    it closes over), exactly as without checkpointing. ``fn`` must return a Tensor or a tuple
    of Tensors and must not modify its inputs in place. With ``preserve_rng_state`` (the
    default, as PyTorch's) the rerun draws the same random numbers as the first run (the
    same dropout masks) from ``fg.manual_seed``'s streams, and leaves them where they were.
    The rerun also runs under the autocast setting of the first run. A checkpoint met while
    an enclosing segment is being recomputed just runs ``fn``: that recomputation is
    recorded in full and freed after its backward, so nesting costs no gradient.
    """
    from . import amp as _amp
    from . import random as _random

    if not _core._grad_enabled() or _recomputing():
        return fn(*args)  # nothing records, or the enclosing recomputation records it all
    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    tensors = [args[i] for i in positions]
    shape: dict = {}
    keep_rng = preserve_rng_state and not _core._tracing()
    first_streams = _random._capture_streams() if keep_rng else None
    first_autocast = _amp._capture()
    runs = [0]
    blocked = [False]

    def segment(*ts: Tensor) -> tuple[Tensor, ...]:
        call_args = list(args)
        for i, t in zip(positions, ts):
            call_args[i] = t
        runs[0] += 1
        if runs[0] > 1:
            now = _random._capture_streams() if keep_rng else None
            if keep_rng:
                _random._restore_streams(first_streams)
            _recompute.depth = getattr(_recompute, "depth", 0) + 1
            try:
                with _amp._replay(first_autocast):
                    out = fn(*call_args)
            finally:
                _recompute.depth -= 1
                if keep_rng:
                    _random._restore_streams(now)
        elif _core._grad_enabled():
            out = fn(*call_args)  # run as it is: no key records anything it reads
        else:
            # the checkpoint's forward run, with every key kept from recording
            blocked[0] = True
            _recompute.forward = getattr(_recompute, "forward", 0) + 1
            try:
                out = fn(*call_args)
            finally:
                _recompute.forward -= 1
        single = isinstance(out, Tensor)
        outs = (out,) if single else out
        if not isinstance(outs, (tuple, list)) or not all(isinstance(o, Tensor) for o in outs):
            raise TypeError(
                f"checkpoint: the function must return a Tensor or a tuple of Tensors, "
                f"got {type(out).__name__}"
            )
        if runs[0] == 1 and blocked[0]:
            for o in outs:
                if o.requires_grad and not o.is_leaf and not any(o is t for t in ts):
                    # recorded despite the checkpoint's block: the function lifted it
                    # itself, and the checkpoint op would cut that record off
                    raise RuntimeError(
                        "checkpoint: the function computed an output with gradients "
                        "enabled inside it (enable_grad, or autograd.grad with "
                        "create_graph=True); checkpointing cannot differentiate through "
                        "that: call the function without checkpoint"
                    )
        shape.setdefault("single", single)
        # an argument returned as it is was read by no op of the segment: an alias of it
        # is, so its gradient passes through the checkpoint like any other output's
        return tuple(o.view(o.shape) if any(o is t for t in ts) else o for o in outs)

    outs = _core._checkpoint(segment, tensors)
    return outs[0] if shape.get("single") else tuple(outs)


def checkpoint_sequential(
    layers: Sequence[Callable[[Tensor], Tensor]], segments: int, x: Tensor
) -> Tensor:
    """Runs ``layers`` in order, split into ``segments`` checkpointed chunks (the last chunk
    runs normally, its activations are needed at once). About ``sqrt(len(layers))`` segments
    gives activation memory that grows like the square root of depth."""
    layers = list(layers)
    if segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be at least 1, got {segments}")
    n = len(layers)
    size = max(1, -(-n // segments))
    chunks = [layers[i : i + size] for i in range(0, n, size)]

    def run(chunk: list) -> Callable[[Tensor], Tensor]:
        def f(h: Tensor) -> Tensor:
            for layer in chunk:
                h = layer(h)
            return h

        return f

    for chunk in chunks[:-1]:
        x = checkpoint(run(chunk), x)
    return run(chunks[-1])(x) if chunks else x


# ------------------------------------------------------------------------------------------
# PyTorch's entry points on the same tape: requires_grad, Tensor.backward, grad_fn, is_leaf
# ------------------------------------------------------------------------------------------
#
# One GradKey (the "autograd" key) serves PyTorch's API. A tensor that requires grad is
# attached to it, so every op on it is recorded there, and ``loss.backward()`` runs that key's
# backward, adding into the ``.grad`` of every tensor attached to it. Then the key is finished
# (its saved tensors freed, as PyTorch frees the graph) and a new one takes the live leaves,
# unless ``retain_graph=True``. Parameters require grad from birth, as in PyTorch, except
# those attached to a GradManager: a GradManager takes them over (MegEngine's API stays the
# primary one; its keys record, the autograd key does not, so nothing is recorded twice).


# PyTorch's node names for the ops ferrograd records (several torch ops record as one of
# ours: a view, unsqueeze and squeeze are a reshape, t/transpose a permute)
_TORCH_NODE_NAMES = {
    "mul": "MulBackward0",
    "add": "AddBackward0",
    "sub": "SubBackward0",
    "div": "DivBackward0",
    "sum": "SumBackward0",
    "mean": "MeanBackward0",
    "pow": "PowBackward0",
    "square": "PowBackward0",
    "reshape": "ViewBackward0",
    "broadcast_to": "ExpandBackward0",
    "permute": "PermuteBackward0",
    "copy": "CloneBackward0",
    "getitem": "SelectBackward0",
    "matmul": "MmBackward0",
    "concat": "CatBackward0",
    "astype": "ToCopyBackward0",
    "max": "MaxBackward1",
    "min": "MinBackward1",
    "log1p": "Log1PBackward0",
    "layer_norm": "NativeLayerNormBackward0",
    "softmax_cross_entropy": "NllLossBackward0",
    "gelu": "GeluBackward0",
    "relu": "ReluBackward0",
    "where": "WhereBackward0",
    "gather": "GatherBackward0",
}


def _torch_node_name(op: str) -> str:
    """PyTorch's class name for the node of ``op``: the table's, a custom Function's class
    name + ``Backward``, else the op in CamelCase + ``Backward0``."""
    name = _TORCH_NODE_NAMES.get(op)
    if name is not None:
        return name
    if op[:1].isupper():
        return f"{op}Backward"  # a custom Function (PyTorch's FBackward)
    return "".join(p[:1].upper() + p[1:] for p in op.split("_") if p) + "Backward0"


class _GradFnName(str):
    """A str that is also callable: ``grad_fn.name`` and PyTorch's ``grad_fn.name()`` are
    both PyTorch's node name (``"MulBackward0"``); ``grad_fn.op`` is ferrograd's op name."""

    def __call__(self) -> str:
        return str(self)


class _GradFnInfo:
    """What ``Tensor.grad_fn`` gives for a computed tensor: a node of the recorded graph, as
    PyTorch's (its class is named as PyTorch's node class: ``type(y.grad_fn).__name__ ==
    "MulBackward0"``). ``name()`` (and ``name``) is PyTorch's node name, ``op`` the name of
    ferrograd's recorded op (``"mul"``), ``next_functions`` the nodes of its inputs as ``(node, index)``
    pairs (an ``AccumulateGrad`` node, with ``variable``, for a leaf that requires grad;
    ``(None, 0)`` for an input that does not). One object per node while it is referenced:
    ``y.grad_fn is y.grad_fn``."""

    __slots__ = ("__weakref__", "_node", "metadata", "name", "op")

    def __init__(self, op: str, node: Any = None) -> None:
        self.op = op
        self.name = _GradFnName(type(self).__name__ if node is not None else _torch_node_name(op))
        self._node = node
        self.metadata: dict = {}

    @property
    def next_functions(self) -> tuple:
        if self._node is None:
            return ()
        return tuple(
            (None, 0) if i is None else (_node_object(i[0]), i[1]) for i in self._node.inputs()
        )

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object at {id(self):#x}>"


class AccumulateGrad(_GradFnInfo):
    """The node a leaf's gradient reaches ``.grad`` through (PyTorch's ``AccumulateGrad``):
    ``variable`` is the leaf; ``name()`` is PyTorch's, ``"torch::autograd::AccumulateGrad"``."""

    __slots__ = ()

    def __init__(self, op: str, node: Any = None) -> None:
        super().__init__(op, node)
        self.name = _GradFnName("torch::autograd::AccumulateGrad")

    @property
    def variable(self) -> Any:
        node = self._node
        for t in _autograd.live_leaves():
            if node.is_variable(t):
                return t
        return node.variable()

    @property
    def next_functions(self) -> tuple:
        return ()


_node_classes: dict[str, type] = {}
_node_objects: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _node_object(node: Any) -> _GradFnInfo:
    """The one Python object for a graph node while it is referenced."""
    key = node.id()
    obj = _node_objects.get(key)
    if obj is not None and obj._node is not None:
        return obj
    if node.is_leaf():
        obj = AccumulateGrad("AccumulateGrad", node)
    else:
        op = node.name()
        tname = _torch_node_name(op)
        cls = _node_classes.get(tname)
        if cls is None:
            cls = _node_classes[tname] = type(tname, (_GradFnInfo,), {"__slots__": ()})
        obj = cls(op, node)
    _node_objects[key] = obj
    return obj


class _Autograd:
    def __init__(self) -> None:
        self.key: GradKey | None = None
        self.leaves: dict[int, weakref.ref] = {}
        # hooks registered on leaves (a new key attaches them again)
        self.hooks: dict[int, list[Any]] = {}
        # roots of recent backward calls: a second backward from one gets PyTorch's message
        self.consumed: list[weakref.ref] = []
        # leaves a recording GradManager records alone for now (see suspend)
        self.suspended: dict[int, weakref.ref] = {}

    def live_leaves(self) -> list[Tensor]:
        out = []
        for i, r in list(self.leaves.items()):
            t = r()
            if t is None:
                del self.leaves[i]
            else:
                out.append(t)
        return out

    def current(self) -> GradKey:
        if self.key is None or self.key.is_finished:
            self.key = GradKey("autograd", _ambient=True)
            for t in self.live_leaves():
                self.key.attach(t)
                for hook in self.hooks.get(id(t), ()):
                    self.key._attach(t, hook, True)
        return self.key

    def consume(self, roots: list[Tensor]) -> None:
        """A backward from ``roots`` freed the recording: a second one gets PyTorch's
        message, and a new key records from now on."""
        self.consumed = [r for r in self.consumed[-7:] if r() is not None]
        self.consumed.extend(weakref.ref(r) for r in roots)
        self.renew()

    def renew(self) -> None:
        old, self.key = self.key, None
        if old is not None and not old.is_finished:
            old.finish()
        if self.leaves:
            self.current()

    def add(self, t: Tensor) -> None:
        if id(t) in self.leaves and self.leaves[id(t)]() is t:
            return
        i = id(t)
        self.leaves[i] = weakref.ref(t, lambda _r, i=i: self._gone(i))
        self.current().attach(t)

    def _gone(self, i: int) -> None:
        self.leaves.pop(i, None)
        self.hooks.pop(i, None)

    def remove(self, t: Tensor) -> None:
        """``t`` stops requiring grad: graphs already built from it still backpropagate (to
        everything else; ``t`` gets no gradient, as PyTorch's), ops from now on do not
        record it. The object goes on as a handle the key does not track, with its
        ``.grad``."""
        if self.leaves.pop(id(t), None) is None:
            return
        self.hooks.pop(id(t), None)
        if self.key is not None and not self.key.is_finished:
            self.key._stop_delivering(t)

    def suspend(self, t: Tensor) -> bool:
        """A GradManager records the leaf ``t``: ops stop recording it here (no double
        recording) until :meth:`resume`; its hooks stay. Whether ``t`` was a leaf here."""
        if not self.is_leaf_tensor(t):
            return False
        del self.leaves[id(t)]
        self.suspended[id(t)] = weakref.ref(t)
        if self.key is not None and not self.key.is_finished:
            self.key._stop_delivering(t)
        return True

    def resume(self, t: Tensor) -> None:
        """``t`` requires grad here again (its GradManager stopped recording)."""
        i = id(t)
        r = self.suspended.pop(i, None)
        if r is None or r() is not t or self.is_leaf_tensor(t):
            return
        if getattr(t, "__dict__", {}).get("_requires_grad") is False:
            return  # requires_grad_(False) meanwhile
        self.leaves[i] = weakref.ref(t, lambda _r, i=i: self._gone(i))
        if self.key is None or self.key.is_finished:
            self.current()  # a new key attaches every leaf with its hooks
            return
        self.key.attach(t)
        for hook in self.hooks.get(i, ()):
            self.key._attach(t, hook, True)

    def tracks(self, t: Tensor) -> bool:
        return self.key is not None and not self.key.is_finished and self.key.is_attached_to(t)

    def is_leaf_tensor(self, t: Tensor) -> bool:
        r = self.leaves.get(id(t))
        return r is not None and r() is t


_autograd = _Autograd()


def _requires_grad(self: Tensor) -> bool:
    if _autograd.is_leaf_tensor(self):
        return True
    flag = getattr(self, "__dict__", {}).get("_requires_grad")
    if flag:
        return True
    # computed from tracked tensors: by backward()'s key or a recording GradManager's (also
    # a leaf made not to require grad that an in-place op then wrote a tracked value into,
    # as PyTorch's: it has a grad_fn and passes gradients on)
    computed = _autograd.tracks(self) or _core._any_recorded([self])
    if flag is False and computed:
        return not _is_leaf(self)
    return computed


def _requires_grad_(self: Tensor, requires_grad: bool = True) -> Tensor:
    """Makes this (leaf) tensor require grad, or not: its gradient is added into ``.grad``
    by ``backward()`` of anything computed from it. Returns self."""
    requires_grad = bool(requires_grad)
    if requires_grad:
        if self.dtype.kind != "f":
            raise RuntimeError(
                f"requires_grad_: only tensors of floating point dtype can require gradients, "
                f"got {self.dtype}"
            )
        if _autograd.tracks(self) and not _autograd.is_leaf_tensor(self):
            return self  # a computed tensor: it already requires grad
        _autograd.add(self)
    else:
        if _autograd.tracks(self) and not _autograd.is_leaf_tensor(self):
            raise RuntimeError(
                "requires_grad_: you can only change requires_grad flags of leaf tensors "
                "(use detach() for a computed one)"
            )
        _autograd.remove(self)
    if hasattr(self, "__dict__"):
        self.__dict__["_requires_grad"] = requires_grad
    return self


def _set_requires_grad(self: Tensor, value: bool) -> None:
    """``t.requires_grad = value``: only a leaf's flag can be set, even to what it already
    is (PyTorch's; ``requires_grad_(True)`` on a computed tensor is the no-op)."""
    if _autograd.tracks(self) and not _autograd.is_leaf_tensor(self):
        raise RuntimeError(
            "requires_grad: you can only change requires_grad flags of leaf tensors (use "
            f"detach() for a computed one; this one has shape {list(self.shape)})"
        )
    _requires_grad_(self, value)


def _is_leaf(self: Tensor) -> bool:
    """True unless this tensor was computed by ops recorded for ``backward()``."""
    return not _autograd.tracks(self) or _autograd.key._is_leaf_of(self)


def _grad_fn(self: Tensor) -> Any:
    """The op that computed this tensor (an object with ``name``), None for a leaf or a
    tensor that does not require grad."""
    if not _autograd.tracks(self):
        return None
    node = _autograd.key._producer_node(self)
    return None if node is None else _node_object(node)


class RemovableHandle:
    """What ``Tensor.register_hook`` returns: ``remove()`` stops the hook (a second call
    does nothing); as a context manager the hook is removed when the block ends."""

    def __init__(self, hook: _TensorHook) -> None:
        self._hook = hook

    def remove(self) -> None:
        self._hook.active = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


class _TensorHook:
    """A ``register_hook`` hook as a key callback: ``hook(grad)`` may return a new gradient,
    which replaces it (in ``.grad`` and in what flows on to earlier ops)."""

    def __init__(self, hook: Callable[[Tensor], Any]) -> None:
        self.hook = hook
        self.active = True
        self.__qualname__ = _callable_name(hook)

    def __call__(self, _tensor: Tensor, grad: Tensor) -> Any:
        return self.hook(grad) if self.active else None


def _register_hook(self: Tensor, hook: Callable[[Tensor], Any]) -> RemovableHandle:
    """Registers ``hook(grad) -> Tensor or None``, called with this tensor's gradient each
    time a backward computes it; a returned tensor replaces the gradient (PyTorch's
    ``Tensor.register_hook``). Returns a handle whose ``remove()`` stops it."""
    if not callable(hook):
        raise TypeError(f"register_hook: hook must be callable, got {type(hook).__name__}")
    # recording GradManagers that computed this tensor or have it attached: their backward
    # calls the hook too (as loss.backward() does)
    managers = [
        gm._key
        for gm in list(_recording_managers)
        if gm.is_recording
        and gm._key is not None
        and (gm._key._producer_node(self) is not None or gm._key.is_attached_to(self))
    ]
    if not (_requires_grad(self) or managers):
        raise RuntimeError(
            "register_hook: cannot register a hook on a tensor that doesn't require gradient "
            f"(shape {list(self.shape)})"
        )
    cb = _TensorHook(hook)
    key = _autograd.current()
    leaf = _autograd.is_leaf_tensor(self)
    # a leaf keeps its gradient in .grad as before; a computed tensor's hook only sees it
    if _requires_grad(self):
        key._attach(self, cb, leaf)
    if leaf:
        _autograd.hooks.setdefault(id(self), []).append(cb)
    for k in managers:
        if k is not key:
            k._attach(self, cb, False)
    return RemovableHandle(cb)


class _PostAccumulateGradHook:
    """A ``register_post_accumulate_grad_hook`` hook as the engine calls it (no arguments,
    once the tensor's gradient has been added into ``.grad``): ``hook(tensor)`` with the
    tensor it was registered on, held weakly; what it returns is ignored."""

    def __init__(self, tensor: Tensor, hook: Callable[[Tensor], Any]) -> None:
        self.ref = weakref.ref(tensor)
        self.hook = hook
        self.active = True
        self.__qualname__ = _callable_name(hook)

    def __call__(self) -> None:
        t = self.ref()
        if self.active and t is not None:
            self.hook(t)


class _PostAccumulateGradHookHandle:
    """What ``Tensor.register_post_accumulate_grad_hook`` returns: ``remove()`` stops the
    hook (also inside a backward: a hook removed by an earlier one does not run)."""

    def __init__(
        self, hook: _PostAccumulateGradHook, hook_id: int, finalizer: weakref.finalize
    ) -> None:
        self._hook = hook
        self._id = hook_id
        self._finalizer = finalizer

    def remove(self) -> None:
        self._hook.active = False
        self._finalizer.detach()
        GradKey._remove_post_accumulate_grad_hook(self._id)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def _register_post_accumulate_grad_hook(
    self: Tensor, hook: Callable[[Tensor], Any]
) -> _PostAccumulateGradHookHandle:
    """Registers ``hook(tensor)``, called with this leaf tensor itself each time a backward
    has added its gradient into ``.grad`` (so ``tensor.grad`` is the accumulated value), as
    soon as that gradient is final, before the rest of backward (PyTorch's
    ``Tensor.register_post_accumulate_grad_hook``; a ``GradManager`` backward runs it too for
    an attached tensor). Hooks run in registration order; what they return is ignored. Returns
    a handle whose ``remove()`` stops it. ``backward(inputs=...)`` runs those of its inputs
    once their ``.grad`` is written; ``fg.autograd.grad`` and traced backward run none."""
    op = "register_post_accumulate_grad_hook"
    if not callable(hook):
        raise TypeError(f"{op}: hook must be callable, got {type(hook).__name__}")
    if not isinstance(self, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(self).__name__}")
    # a tensor attached to a recording GradManager counts as requiring grad there
    managers = [
        gm._key
        for gm in list(_recording_managers)
        if gm.is_recording and gm._key is not None and gm._key.is_attached_to(self)
    ]
    if not (_requires_grad(self) or managers):
        raise RuntimeError(
            f"{op}: cannot register a hook on a tensor that doesn't require gradient "
            f"(shape {list(self.shape)})"
        )
    if not _is_leaf(self) or any(not k._is_leaf_of(self) for k in managers):
        raise RuntimeError(
            f"{op}: post accumulate grad hooks cannot be registered on non-leaf tensors "
            f"(a tensor of shape {list(self.shape)} computed by an op); register it on the "
            "leaf the gradient accumulates into, or use register_hook"
        )
    cb = _PostAccumulateGradHook(self, hook)
    hook_id = GradKey._register_post_accumulate_grad_hook(self, cb)
    # (the engine keeps the hook with the tensor's .grad, which keys may hold a little longer)
    finalizer = weakref.finalize(self, GradKey._remove_post_accumulate_grad_hook, hook_id)
    return _PostAccumulateGradHookHandle(cb, hook_id, finalizer)


def _retain_grad(self: Tensor) -> None:
    """Makes ``backward`` fill ``.grad`` of this computed tensor too (a leaf that requires
    grad always gets it), as PyTorch's ``Tensor.retain_grad``."""
    if not _requires_grad(self):
        raise RuntimeError(
            "retain_grad: can't retain_grad on a tensor that has requires_grad=False "
            f"(shape {list(self.shape)})"
        )
    if _autograd.is_leaf_tensor(self) or _retains_grad(self):
        return
    _autograd.current()._attach(self, None, True)


# the engine's own ``.grad`` getter, once ``Tensor.grad`` is wrapped to warn (see below)
_grad_slot: Any = None


def _stored_grad(t: Tensor) -> Any:
    """``t.grad`` as stored, without the warning for reading it on a computed tensor: the
    library's own reads (``backward(inputs=...)`` adding into a computed input's ``.grad``)
    are not the user's mistake."""
    return t.grad if _grad_slot is None else _grad_slot.__get__(t)


def _warn_unretained_grad(self: Tensor) -> None:
    """Warns, as PyTorch does, when the empty ``.grad`` of a computed tensor is read:
    ``backward()`` leaves it None unless :meth:`retain_grad` was called first, which is
    usually a mistake for the leaf it came from or a missing ``retain_grad``."""
    if not _autograd.tracks(self) or _autograd.key._is_leaf_of(self) or _retains_grad(self):
        return
    import warnings

    # (the opening is PyTorch's, so that warning filters written for it match)
    warnings.warn(
        "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed: it "
        "was computed by an op, and backward() does not fill it. Call .retain_grad() on it "
        "before backward() to keep its gradient, or read .grad of the leaf tensor it was "
        "computed from.",
        UserWarning,
        stacklevel=3,
    )


def _retains_grad(self: Tensor) -> bool:
    """Whether :meth:`retain_grad` was called on this (computed) tensor."""
    if not _autograd.tracks(self) or _autograd.is_leaf_tensor(self):
        return False
    key = _autograd.key
    return key is not None and not key._is_leaf_of(self) and key._accumulates_into(self)


def _backward(
    self: Tensor,
    gradient: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Any = None,
) -> None:
    """Computes the gradient of this tensor with respect to every tensor that requires grad
    and adds it into their ``.grad`` (PyTorch's ``Tensor.backward``). A non-scalar needs
    ``gradient``. The recorded graph is freed unless ``retain_graph=True``. With
    ``create_graph=True`` (which retains the graph unless ``retain_graph=False`` is given)
    the backward is recorded too, so the gradients written to ``.grad`` require grad and can
    be differentiated again. ``inputs`` (a tensor or a sequence of them, leaves or computed):
    only their ``.grad`` is written; one that the gradient does not reach keeps its
    ``.grad``."""
    _run_backward("backward", [self], [gradient], retain_graph, create_graph, inputs)


def _seed_gradients(roots: list[Tensor], gradients: list[Any]) -> list[Tensor] | None:
    """The gradients backward starts from: None for all ones, else one tensor per root (ones
    where not given, a number filled out, a tensor of another dtype cast to the root's, as
    PyTorch does)."""
    if all(g is None for g in gradients):
        return None
    return [
        _core.ones_like(r)
        if g is None
        else (g if g.dtype == r.dtype else g.astype(r.dtype.name))
        if isinstance(g, Tensor)
        else _core.full(r.shape, g, dtype=r.dtype.name, device=r.device)
        for r, g in zip(roots, gradients)
    ]


def _run_backward(
    op: str,
    roots: list[Tensor],
    gradients: list[Any],
    retain_graph: bool | None,
    create_graph: bool,
    inputs: Any,
) -> None:
    create_graph = bool(create_graph)
    retain = create_graph if retain_graph is None else bool(retain_graph)
    if create_graph and not retain:
        retain = True  # (the recorded backward needs the forward's records)
    if inputs is not None:
        xs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
        if not xs:
            raise RuntimeError(f"{op}: the inputs argument cannot be empty")
        if not all(isinstance(x, Tensor) for x in xs):
            raise TypeError(f"{op}: inputs must be a tensor or a non-empty sequence of tensors")
    if _core._tracing():
        _traced_backward(op, roots, gradients, xs if inputs is not None else None)
        return
    for i, (root, gradient) in enumerate(zip(roots, gradients)):
        if not _autograd.tracks(root):
            if any(r() is root for r in _autograd.consumed):
                raise RuntimeError(
                    f"{op}: trying to backward through the graph a second time (the saved "
                    "tensors were freed by the first backward). Specify retain_graph=True the "
                    "first time to backward twice"
                )
            raise RuntimeError(
                f"{op}: element {i} of tensors does not require grad and does not have a "
                f"grad_fn (shape {list(root.shape)}): make a leaf require grad first "
                "(x.requires_grad_() or nn.Parameter), or use a GradManager if its tensors are "
                "attached to one"
            )
        if gradient is None and root.numel() != 1:
            raise RuntimeError(
                f"{op}: grad can be implicitly created only for scalar outputs, got shape "
                f"{list(root.shape)}; pass gradient="
            )
    key = _autograd.key
    assert key is not None
    dys = _seed_gradients(roots, gradients)

    def consumed() -> None:
        # (the autograd key frees only what a backward reached and goes on recording)
        if key.is_finished:
            _autograd.consume(roots)

    if inputs is not None:
        for i, x in enumerate(xs):
            if not _autograd.tracks(x):
                raise RuntimeError(
                    f"{op}: inputs[{i}] (shape {list(x.shape)}) does not require grad"
                )
        try:
            with _backward_mode(create_graph, retain):
                found = key._grad_reached(roots, dys, xs, retain, create_graph)
        finally:
            consumed()
        with enable_grad() if create_graph else no_grad():
            for x, g in zip(xs, found):
                if g is not None:
                    old = _stored_grad(x)
                    if old is None:
                        # (a copy: the gradient may be the seed or another input's too)
                        x.grad = g.clone()
                    elif create_graph or old.requires_grad:
                        x.grad = old + g
                    else:
                        old.add_(g)  # PyTorch's: in place, a reference to .grad sees it
                    if _is_leaf(x):
                        GradKey._run_post_accumulate_grad_hooks(x)
        if _anomaly["on"]:
            _check_anomaly(op, xs, found)
        return
    before = _anomaly_snapshot(_autograd.live_leaves()) if _anomaly["on"] else None
    try:
        with _backward_mode(create_graph, retain):
            key.backward(roots, dys, retain_graph=retain, create_graph=create_graph)
    finally:
        consumed()
    if before is not None:
        leaves = _autograd.live_leaves()
        _check_anomaly(op, leaves, [_added_grad(t, before.get(id(t))) for t in leaves])
    for listener in list(_after_backward):
        listener._after_backward()


def _traced_backward(
    op: str, roots: list[Tensor], gradients: list[Any], inputs: list[Tensor] | None
) -> None:
    """``loss.backward()`` inside ``fg.trace``: the graph gradient pass from ``roots`` to the
    tensors that require grad (or ``inputs``), added into their ``.grad`` as in eager mode."""
    from ._tensor import tensor

    xs = inputs if inputs is not None else _autograd.live_leaves()
    if not xs:
        raise _core.TraceError(
            f"{op} inside fg.trace: no tensor requires grad (make the parameters require grad, "
            "e.g. nn.Parameter, or attach them to a GradManager and call gm.backward)"
        )
    dys = []
    for root, g in zip(roots, gradients):
        if g is None:
            if root.numel() != 1:
                raise RuntimeError(
                    f"{op}: grad can be implicitly created only for scalar outputs, got shape "
                    f"{list(root.shape)}; pass gradient="
                )
            dys.append(_core.ones_like(root))
        else:
            dys.append(g if isinstance(g, Tensor) else tensor(g, dtype=root.dtype.name))
    found = _core._trace_gradients(roots, dys, xs)
    for x, g in zip(xs, found):
        if g is not None:
            x.grad = g if x.grad is None else x.grad + g


def _broadcast_dy(y: Any, dy: Any) -> Any:
    """``dy`` as ``y``'s gradient seed: a Python number filled to ``y``'s shape, a tensor
    broadcast to it (as MegEngine's GradManager does); anything else unchanged (the key
    reports it)."""
    if not isinstance(y, Tensor):
        return dy
    if isinstance(dy, (int, float)) and not isinstance(dy, bool):
        return _core.full(tuple(y.shape), float(dy), dtype=y.dtype.name, device=y.device)
    if isinstance(dy, Tensor) and tuple(dy.shape) != tuple(y.shape):
        try:
            return dy.broadcast_to(*y.shape)
        except (ValueError, RuntimeError):
            return dy
    return dy


# objects told when a Tensor.backward() has filled .grad (DistributedDataParallel's reducer)
_after_backward: weakref.WeakSet = weakref.WeakSet()

# PyTorch-style backward runs in progress on this thread, innermost last: whether each
# records its computation (create_graph); a custom Function's backward runs with grad mode
# set to that, as PyTorch's engine does
_backward_modes = threading.local()


@contextlib.contextmanager
def _backward_mode(create_graph: bool, retain_graph: bool = True) -> Iterator[None]:
    stack = getattr(_backward_modes, "stack", None)
    if stack is None:
        stack = _backward_modes.stack = []
    stack.append((bool(create_graph), bool(retain_graph)))
    try:
        yield
    finally:
        stack.pop()


def _current_backward_mode() -> bool | None:
    """``create_graph`` of the innermost PyTorch-style backward running on this thread, or
    None outside one."""
    stack = getattr(_backward_modes, "stack", None)
    return stack[-1][0] if stack else None


def _current_backward_retains() -> bool:
    """Whether the innermost PyTorch-style backward on this thread keeps the graph
    (``retain_graph``); True outside one."""
    stack = getattr(_backward_modes, "stack", None)
    return stack[-1][1] if stack else True


# anomaly detection (torch.autograd.set_detect_anomaly): after each backward, a NaN in a
# gradient it produced raises instead of reaching the optimizer
# "on": gradients are checked for NaN (anomaly mode with check_nan); "enabled" and
# "check_nan" are the two settings torch.is_anomaly_enabled / is_anomaly_check_nan_enabled report
_anomaly = {"on": False, "enabled": False, "check_nan": True}


def _set_anomaly(enabled: bool, check_nan: bool) -> None:
    """Anomaly mode's settings (see ``autograd.set_detect_anomaly``)."""
    _anomaly["enabled"] = bool(enabled)
    _anomaly["check_nan"] = bool(check_nan)
    _anomaly["on"] = bool(enabled) and bool(check_nan)


def _nan_mask(g: Tensor) -> Any:
    """Where a floating gradient is NaN (None for another dtype)."""
    import numpy as np

    return np.isnan(g.detach().numpy()) if g.dtype.kind == "f" else None


def _anomaly_snapshot(leaves: list[Tensor]) -> dict[int, tuple]:
    """Per leaf with a ``.grad`` before a backward in anomaly mode: the gradient object, its
    version and where it is already NaN, so that only what the backward adds is checked."""
    out = {}
    for t in leaves:
        g = _stored_grad(t)
        if g is not None:
            mask = _nan_mask(g)
            out[id(t)] = (g, g._version, mask if mask is not None and mask.any() else None)
    return out


def _added_grad(t: Tensor, before: tuple | None) -> Any:
    """``t``'s gradient if the backward changed it (None if not), as a NaN mask with the
    entries that were NaN before it cleared."""
    g = _stored_grad(t)
    if g is None:
        return None
    if before is not None and before[0] is g and before[1] == g._version:
        return None
    mask = _nan_mask(g)
    old = None if before is None else before[2]
    if mask is not None and old is not None and old.shape == mask.shape:
        mask = mask & ~old
    return mask


def _check_anomaly(op: str, leaves: list[Tensor], grads: list[Any]) -> None:
    """Anomaly mode: raises if a gradient this backward produced (a tensor, or a NaN mask
    from :func:`_added_grad`) has a NaN; a NaN that was in ``.grad`` before is not its."""
    for t, g in zip(leaves, grads):
        if isinstance(g, Tensor):
            g = _nan_mask(g)
        if g is not None and bool(g.any()):
            raise RuntimeError(
                f"{op}: anomaly detection found NaN in the gradient of a tensor of shape "
                f"{list(t.shape)} ({t.dtype}); run the forward with finite inputs, or look for "
                "0/0, log of negatives and sqrt at 0 on the way"
            )


def _detach_(self: Tensor) -> Tensor:
    """Makes this tensor a leaf that does not require grad (in place, as PyTorch's). A view
    cannot be detached in place (it would cut its base's graph too): ``RuntimeError``."""
    if self._is_view():
        raise RuntimeError(
            f"detach_: can't detach a view (of shape {list(self.shape)}) in place; use "
            "detach() instead"
        )
    if _autograd.is_leaf_tensor(self):
        _requires_grad_(self, False)
    elif _autograd.tracks(self):
        _autograd.key._forget(self)
    return self


class enable_grad:
    """Context manager (and decorator, with or without parentheses) that lets keys record
    again inside ``no_grad``."""

    def __new__(cls, orig_func: Callable[..., Any] | None = None) -> Any:
        self = super().__new__(cls)
        if orig_func is not None:
            if not callable(orig_func):
                raise TypeError(f"enable_grad: expected a function, got {type(orig_func).__name__}")
            return self(orig_func)
        return self

    def __enter__(self) -> Self:
        self.__dict__.setdefault("_depths", []).append(_core._ceiling_depth())
        _core._push_enable()
        return self

    def __exit__(self, *exc: object) -> None:
        _core._truncate_ceiling(self.__dict__["_depths"].pop())

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        return _wrap_in(enable_grad, fn)


class set_grad_enabled:
    """``set_grad_enabled(False)`` is :class:`no_grad`, ``(True)`` :class:`enable_grad`;
    a context manager, or a plain call for the rest of the thread's work."""

    def __init__(self, mode: bool) -> None:
        # PyTorch's: the mode is set now (a plain call keeps it); leaving a ``with`` block
        # restores the mode from before this call, whatever was set inside
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled: mode must be a bool, got {type(mode).__name__}")
        self._mode = mode
        self._depth = _core._ceiling_depth()
        if self._mode != _core._grad_enabled():
            if self._mode:
                _core._push_enable()
            else:
                _core._push_ceiling(0)
        self._entered = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._entered:
            self._entered = False
            _core._truncate_ceiling(self._depth)

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """As a decorator (``@set_grad_enabled(False)``): the mode applies while ``fn`` runs
        only (the setting made when this object was created is undone)."""
        self.__exit__()
        mode = self._mode
        return _wrap_in(lambda: enable_grad() if mode else no_grad(), fn)


def is_inference_mode_enabled() -> bool:
    """Whether an :class:`inference_mode` block is active (``torch.is_inference_mode_enabled``)."""
    return inference_mode._depth > 0


def is_grad_enabled() -> bool:
    """Whether ops on tensors that require grad are recorded here (False inside
    :class:`no_grad`), as ``torch.is_grad_enabled``."""
    return _core._grad_enabled()


class inference_mode:
    """PyTorch's ``inference_mode``: :class:`no_grad` when ``mode`` is true (the default),
    nothing otherwise; a context manager and a decorator."""

    def __new__(cls, mode: Any = True) -> Any:
        self = super().__new__(cls)
        if callable(mode) and not isinstance(mode, bool):  # @inference_mode without ()
            self._mode = True
            return self(mode)
        return self

    def __init__(self, mode: bool = True) -> None:
        self._mode = bool(mode)

    _depth = 0

    def __enter__(self) -> Self:
        if self._mode:
            self.__dict__.setdefault("_depths", []).append(_core._ceiling_depth())
            _core._push_ceiling(0)
            inference_mode._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        if self._mode:
            _core._truncate_ceiling(self.__dict__["_depths"].pop())
            inference_mode._depth -= 1

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        mode = self._mode
        return _wrap_in(lambda: inference_mode(mode), fn)


_rust_copy_ = Tensor.copy_


def _copy_(self: Tensor, src: Any, non_blocking: bool = False) -> Tensor:
    """Copies ``src`` (broadcast, cast to this dtype) into this tensor, in place; returns
    self. ``non_blocking`` is accepted as PyTorch's (copies here complete at once). A leaf
    that requires grad copied in is recorded through a clone, so this tensor becomes a
    computed one (PyTorch's CopyBackwards), not a second handle on that leaf."""
    if (
        _autograd.leaves
        and isinstance(src, Tensor)
        and src is not self
        and _autograd.is_leaf_tensor(src)
        and _core._grad_enabled()
    ):
        src = src.clone()
    return _rust_copy_(self, src)


def _install_torch_autograd() -> None:
    Tensor.copy_ = _copy_
    Tensor.requires_grad = property(_requires_grad, _set_requires_grad)
    Tensor.requires_grad_ = _requires_grad_
    Tensor.is_leaf = property(_is_leaf)
    Tensor.grad_fn = property(_grad_fn)
    Tensor.backward = _backward
    Tensor.detach_ = _detach_
    Tensor.register_hook = _register_hook
    Tensor.register_post_accumulate_grad_hook = _register_post_accumulate_grad_hook
    Tensor.retain_grad = _retain_grad
    Tensor.retains_grad = property(_retains_grad)


_install_torch_autograd()
