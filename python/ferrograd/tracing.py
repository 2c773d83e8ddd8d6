"""Graph mode: ``fg.trace`` turns a training step into a graph that runs whole in Rust.

The first call of a traced function for a signature runs it as usual (so it is a real step)
while every op also becomes a node of a graph; ``backward`` inside it is the graph gradient
pass. The graph is then cleaned up (common subexpressions, dead code), optionally mirrored
(recomputation in backward) or fitted to a memory budget, fused (elementwise chains run as one
loop) and planned (buffers reused, updates in place). Later calls with the same signature run
the planned graph without Python, apart from GradManager callbacks, which run at their point
of every step.

As with ``jax.jit``: Python code in the function (prints, appending to a list, reading a
clock, numpy randomness) runs once, when the function is traced; its effect is not repeated
by later calls. Values computed inside cannot be read there (``.item()``, ``.numpy()``,
``float()``, ``bool()``, ``if`` on a tensor raise :class:`TraceError`); return them and read
them after the call.
"""

from __future__ import annotations

import functools
import math
import operator
import warnings
from collections import OrderedDict
from typing import Any, Callable

from . import _core
from ._core import Graph, Tensor, TraceError

__all__ = ["Graph", "TraceError", "TraceWarning", "TracedFunction", "trace"]

# constants of at least this many elements made inside a traced function are warned about
_BIG_CONSTANT = 64


class TraceWarning(UserWarning):
    """Something a traced function does that later calls will not repeat as written (data
    built from Python values inside it is fixed at trace time)."""


Policy = Callable[[str], bool]


class _Leaf:
    """Where a tensor sat in a nested argument or result structure."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


def _flatten(obj: Any, tensors: list[Tensor]) -> Any:
    """``obj`` with each Tensor replaced by a _Leaf (its index in ``tensors``, appended)."""
    if isinstance(obj, Tensor):
        tensors.append(obj)
        return _Leaf(len(tensors) - 1)
    if isinstance(obj, (list, tuple)):
        items = [_flatten(o, tensors) for o in obj]
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple
            return type(obj)(*items)
        return type(obj)(items)
    if isinstance(obj, dict):
        return {k: _flatten(v, tensors) for k, v in obj.items()}
    return obj


def _unflatten(tree: Any, tensors: list[Tensor]) -> Any:
    if isinstance(tree, _Leaf):
        return tensors[tree.index]
    if isinstance(tree, (list, tuple)):
        items = [_unflatten(o, tensors) for o in tree]
        if isinstance(tree, tuple) and hasattr(tree, "_fields"):
            return type(tree)(*items)
        return type(tree)(items)
    if isinstance(tree, dict):
        return {k: _unflatten(v, tensors) for k, v in tree.items()}
    return tree


def _signature(tree: Any, tensors: list[Tensor]) -> Any:
    """A hashable key: the structure, tensors by shape, dtype and device, the rest by value."""
    if isinstance(tree, _Leaf):
        return tensors[tree.index]._spec
    if isinstance(tree, (list, tuple)):
        return (type(tree).__name__, tuple(_signature(o, tensors) for o in tree))
    if isinstance(tree, dict):
        return ("dict", tuple((k, _signature(v, tensors)) for k, v in tree.items()))
    try:
        hash(tree)
    except TypeError:
        raise TypeError(
            f"trace: an argument of type {type(tree).__name__} is neither a Tensor nor "
            "hashable; traced functions take Tensors (and lists, tuples, dicts of them) and "
            "hashable values (numbers, strings), which are part of the cache key"
        ) from None
    return ("V", type(tree).__name__, tree)


# how deep the search for the places a captured tensor is read from goes (a global or closure
# variable, then attributes and items of what it holds: `model.blocks[3].attn.qkv.weight` is
# ten steps through the modules' dicts), and how many objects it looks at in all (breadth first)
_GUARD_DEPTH = 24
_GUARD_VISITS = 20000
_NOT_SEARCHED = (type(None), bool, int, float, complex, str, bytes, type, type(len))

# how an object is reached from the one holding it
_CELL, _ITEM, _ATTR = 0, 1, 2


class _Guards:
    """What a graph assumed of the Python objects around it, re-checked before each run.

    ``links``: every step on the paths by which the function reads its captured tensors (a
    global or closure variable, or the bound ``self``, then attributes and items: a module,
    its dict of submodules, a parameter) as ``(how, holder, key, object)``, each step once. A
    later call re-reads each: another object anywhere on a path (``model.head =
    Linear(...)``, a parameter list rebuilt) means the function must be traced again.
    ``data``: each captured tensor object with the data it had (``w.data = ...`` and
    ``model.double()`` keep the object and change its data). ``modules``: every ``nn.Module``
    the search met, with its ``training`` flag (``eval()`` changes what dropout and batch norm
    do, so it traces again too). ``scalars``: the Python numbers (and strings, ``None``, tuples
    of them) of those modules' attributes and of optimizer parameter groups, which a trace
    reads as constants (``Dropout.p``, momentum, betas, weight decay: a scheduler that cycles
    momentum, or code that changes ``p``, makes the function trace again instead of running
    the old values; the learning rate is a tensor the graph reads, so it changes freely)."""

    __slots__ = ("data", "links", "modules", "scalars")

    def __init__(
        self, links: list[tuple], data: list[tuple], modules: list[tuple], scalars: list[tuple]
    ) -> None:
        self.links = links
        self.data = data
        self.modules = modules
        self.scalars = scalars

    def hold(self) -> bool:
        for m, training in self.modules:
            if m.training is not training:
                return False
        for d, keys, values in self.scalars:
            for k, v in zip(keys, values):
                now = d.get(k, _MISSING)
                if now is not v and (type(now) is not type(v) or now != v):
                    return False
        for how, holder, key, obj in self.links:
            try:
                if how == _ATTR:
                    now = getattr(holder, key)
                elif how == _ITEM:
                    now = holder[key]
                else:
                    now = holder.cell_contents
            except (KeyError, IndexError, AttributeError, ValueError, TypeError):
                return False
            if now is not obj:
                return False
        for tensor, data in self.data:
            if tensor._data_key != data:
                return False
        return True


_SCALAR_TYPES = (int, float, bool, str, type(None))
# parameter-group entries the graph does not read as constants: the tensors, the learning rate
# (a tensor the step reads: it changes freely) and what only schedulers read
_GROUP_SKIP = frozenset(("params", "lr", "initial_lr"))


def _is_scalar(v: Any) -> bool:
    if isinstance(v, tuple):
        return len(v) <= 8 and all(isinstance(x, _SCALAR_TYPES) for x in v)
    return isinstance(v, _SCALAR_TYPES)


_MISSING = object()


def _scalars_of(holder: Any) -> tuple:
    """The Python scalars a trace may have read from a module's attributes or an optimizer's
    parameter group: ``(mapping, keys, values)``, the mapping re-read on every check (the
    group itself, or the module's ``__dict__``)."""
    if isinstance(holder, dict):
        d, skip = holder, _GROUP_SKIP
    else:
        d, skip = vars(holder), frozenset(("training",))
    items = [(k, v) for k, v in d.items() if k not in skip and _is_scalar(v)]
    return (d, tuple(k for k, _ in items), tuple(v for _, v in items))


def _guards(fn: Callable[..., Any], wanted: set) -> _Guards:
    """Where ``fn`` finds the captured tensors (``wanted``: their ``_data_key``s), searched
    breadth first from its globals, closure variables and bound ``self``."""
    from .nn import Module
    from .optim import _Group

    links: dict[tuple, tuple] = {}
    data: dict[int, tuple] = {}
    modules: list[tuple] = []
    scalars: list[tuple] = []
    seen: set[int] = set()
    # (object, step): `step` is (how, holder, key, object, the holder's step) or None
    frontier: list[tuple] = []
    target = getattr(fn, "__func__", fn)
    code = getattr(target, "__code__", None)
    if code is not None:
        glb = getattr(target, "__globals__", {})
        for name in code.co_names:
            if name in glb:
                frontier.append((glb[name], (_ITEM, glb, name, glb[name], None)))
        for name, cell in zip(code.co_freevars, getattr(target, "__closure__", None) or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            frontier.append((value, (_CELL, cell, name, value, None)))
    # default arguments (``def step(x, model=model)``) hold what the function reads too
    defaults = getattr(target, "__defaults__", None) or ()
    for i, value in enumerate(defaults):
        frontier.append((value, (_ITEM, defaults, i, value, None)))
    kwdefaults = getattr(target, "__kwdefaults__", None) or {}
    for name, value in kwdefaults.items():
        frontier.append((value, (_ITEM, kwdefaults, name, value, None)))
    bound = getattr(fn, "__self__", None)
    if bound is not None:
        frontier.append((bound, (_ATTR, fn, "__self__", bound, None)))
    visits = 0
    for depth in range(_GUARD_DEPTH + 1):
        nxt: list[tuple] = []
        for obj, step in frontier:
            if isinstance(obj, Tensor):
                if obj._data_key in wanted:
                    data.setdefault(id(obj), (obj, obj._data_key))
                    while step is not None:
                        how, holder, key, child, up = step
                        links.setdefault((how, id(holder), key), (how, holder, key, child))
                        step = up
                continue
            if depth == _GUARD_DEPTH or isinstance(obj, _NOT_SEARCHED) or id(obj) in seen:
                continue
            if callable(obj) and not hasattr(obj, "__dict__"):
                continue
            seen.add(id(obj))
            if isinstance(obj, Module):
                modules.append((obj, obj.training))
                scalars.append(_scalars_of(obj))
            elif isinstance(obj, _Group):
                scalars.append(_scalars_of(obj))
            visits += 1
            if visits > _GUARD_VISITS:
                break
            if isinstance(obj, (list, tuple)):
                for i, v in enumerate(obj[:1024]):
                    nxt.append((v, (_ITEM, obj, i, v, step)))
            elif isinstance(obj, dict):
                for k, v in list(obj.items())[:1024]:
                    nxt.append((v, (_ITEM, obj, k, v, step)))
            elif hasattr(obj, "__dict__") and not isinstance(obj, type(functools)):
                try:
                    attrs = vars(obj)
                except TypeError:
                    continue
                for k, v in list(attrs.items())[:1024]:
                    nxt.append((v, (_ATTR, obj, k, v, step)))
        frontier = nxt
        if not frontier or visits > _GUARD_VISITS:
            break
    return _Guards(list(links.values()), list(data.values()), modules, scalars)


def _sharing(tensors: list[Tensor]) -> tuple | None:
    """How the tensor arguments share memory, part of the cache key: None when no two do,
    else for each the index of the first one that is the same tensor object and of the first
    one over the same storage. A graph traced for distinct arguments would run a write into
    one without the other seeing it, and one traced for a tensor passed twice would add the
    gradients of both places into one ``.grad``."""
    if len(tensors) < 2:
        return None
    storages = [t._data_key[0] for t in tensors]
    if len(set(storages)) == len(storages):
        return None
    objects = [id(t) for t in tensors]
    return tuple((objects.index(o), storages.index(s)) for o, s in zip(objects, storages))


# graphs kept per signature (the newest; an older one is traced again if it is needed again)
_VARIANTS = 4


class _Entry:
    __slots__ = ("exe", "guards", "out_tree", "unpack")

    def __init__(self, exe: Any, out_tree: Any, guards: _Guards) -> None:
        self.exe = exe
        self.out_tree = out_tree
        self.guards = guards
        # the results from the output list, quickly for the common shapes
        if isinstance(out_tree, _Leaf):
            self.unpack: Callable[[list], Any] = lambda outs: outs[0]
        elif type(out_tree) is tuple and all(
            isinstance(o, _Leaf) and o.index == i for i, o in enumerate(out_tree)
        ):
            self.unpack = tuple
        else:
            self.unpack = lambda outs: _unflatten(out_tree, outs)


def _check_options(mirror: Any, memory_budget: Any) -> int | None:
    """Refuses bad options; returns the budget as a Python int (a numpy integer is one too)."""
    if mirror is not None and mirror != "auto" and not callable(mirror):
        raise ValueError(
            f'trace: mirror must be None, "auto" or a callable policy(op_name) -> bool, '
            f"got {mirror!r}"
        )
    if memory_budget is None:
        return None
    try:
        if isinstance(memory_budget, bool):
            raise TypeError
        budget = operator.index(memory_budget)
    except TypeError:
        raise TypeError(
            f"trace: memory_budget must be a number of bytes (int), got "
            f"{type(memory_budget).__name__}"
        ) from None
    if budget <= 0:
        raise ValueError(f"trace: memory_budget must be positive, got {budget}")
    return budget


class TracedFunction:
    """A function traced into a graph per signature (see :func:`trace`)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        mirror: str | Policy | None = None,
        memory_budget: int | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"trace: expected a callable, got {type(fn).__name__}")
        self._fn = fn
        self.mirror = mirror
        self.memory_budget = _check_options(mirror, memory_budget)
        # per signature, the graphs traced for it, newest first: a few variants, one per state
        # of what the guards check (gradient accumulation alternates between `.grad` None and
        # set, a module between train and eval)
        self._cache: OrderedDict[Any, list[_Entry]] = OrderedDict()
        self._last: _Entry | None = None
        functools.update_wrapper(self, fn)

    @property
    def cache_size(self) -> int:
        """How many signatures have a graph."""
        return len(self._cache)

    @property
    def graph(self) -> Graph:
        """The graph of the most recent call (after the passes)."""
        return self._entry("graph").exe.graph

    def memory_report(self) -> dict:
        """The memory plan of the most recent call's graph: ``planned_peak_bytes`` (what the
        step holds at its peak: captured tensors, inputs, grads and values),
        ``unplanned_peak_bytes`` (the same run op by op without fusion or in-place outputs),
        ``saved_bytes`` (forward values kept for backward), ``recomputed_nodes`` (mirrored),
        ``buffers`` / ``buffer_bytes`` (buffers the values occupy, reused by size), and more."""
        return dict(self._entry("memory_report").exe.memory_report())

    def _entry(self, what: str) -> _Entry:
        if self._last is None:
            raise RuntimeError(
                f"{what}: {getattr(self, '__name__', 'the function')} has not been called yet; "
                "the graph is made by its first call"
            )
        return self._last

    def clear_cache(self) -> None:
        """Drops every graph (the next call traces again)."""
        self._cache.clear()
        self._last = None

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        # a traced method: bind like a function
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs and not _core._tracing():
            # the common case, kept short: tensors only, a graph for them that can run
            try:
                key: Any = tuple([a._spec for a in args])
                if len(args) > 1 and len({a._data_key[0] for a in args}) < len(args):
                    key = None  # arguments sharing memory: keyed by how they share it
            except AttributeError:
                key = None
            if key is not None:
                for entry in self._cache.get(key, ()):
                    if entry.guards.hold():
                        outs = entry.exe.try_run(args)
                        if outs is not None:
                            self._last = entry
                            return entry.unpack(outs)
        return self._call(args, kwargs)

    def _call(self, args: tuple, kwargs: dict) -> Any:
        if _core._tracing():
            # inside another traced function: its ops are part of that trace
            return self._fn(*args, **kwargs)
        tensors: list[Tensor] = []
        tree = _flatten((args, kwargs), tensors)
        # a recording GradManager outside wants this call on its tape: run it eagerly
        if _core._keys_recording() or (tensors and _core._any_recorded(tensors)):
            return self._fn(*args, **kwargs)
        if not kwargs and all(type(a) is Tensor or isinstance(a, Tensor) for a in args):
            key: Any = tuple([a._spec for a in args])
        else:
            key = _signature(tree, tensors)
        shared = _sharing(tensors)
        if shared is not None:
            key = (key, shared)
        variants = self._cache.get(key, [])
        for entry in variants:
            if entry.exe.guard_failure(tensors) is None and entry.guards.hold():
                self._cache.move_to_end(key)
                self._last = entry
                return entry.unpack(entry.exe.run(tensors))
        result, entry = self._trace(tree, tensors)
        self._cache[key] = [entry, *variants[: _VARIANTS - 1]]
        self._cache.move_to_end(key)
        self._last = entry
        return result

    def _trace(self, tree: Any, tensors: list[Tensor]) -> tuple[Any, _Entry]:
        # the traced random generator of each device the step may draw on exists before the
        # trace starts (it is captured, not made inside)
        from . import random as _random
        from .optim import _remake_moved_states

        for name in {str(t.device) for t in tensors} | {str(_core.get_default_device())}:
            _random._ensure_counter(name)
        # (so are the optimizer states of parameters moved since they were made)
        _remake_moved_states()
        # with a memory budget the graph may turn out not to fit any plan: the trace keeps
        # what it changes in parameters, optimizer state, buffers and arguments (and their
        # `.grad`), and puts it back before refusing, so the failed call leaves them as they were
        undo = self.memory_budget is not None
        _core._trace_keep_undo(undo)
        try:
            handles = _core._trace_begin(tensors)
            # a tensor passed twice is one tensor inside too (`x is y`, one `.grad`), as in
            # eager mode; the graph's other input for it goes unread
            first: dict[int, Tensor] = {}
            handles = [first.setdefault(id(t), h) for t, h in zip(tensors, handles)]
            try:
                args, kwargs = _unflatten(tree, handles)
                result = self._fn(*args, **kwargs)
            except BaseException:
                _core._trace_abort()
                raise
            outs: list[Tensor] = []
            out_tree = _flatten(result, outs)
            graph = _core._trace_end(outs)
            try:
                exe = _core._compile(graph, self.mirror, self.memory_budget)
            except ValueError:
                if undo:
                    _core._trace_undo()
                raise
        finally:
            _core._trace_keep_undo(False)
        big = [s for s in graph.constant_shapes() if math.prod(s) >= _BIG_CONSTANT]
        if big:
            warnings.warn(
                f"trace: {getattr(self._fn, '__qualname__', 'the function')} builds "
                f"{len(big)} tensor(s) from Python data inside it (shape {list(big[0])} ...): "
                "their values at trace time are fixed into every later call; pass data that "
                "changes as an argument",
                TraceWarning,
                stacklevel=3,
            )
        wanted = {t._data_key for t in exe.captures()}
        return result, _Entry(exe, out_tree, _guards(self._fn, wanted))

    def __repr__(self) -> str:
        name = getattr(self._fn, "__qualname__", repr(self._fn))
        return f"TracedFunction({name}, cache_size={self.cache_size})"


def trace(
    fn: Callable[..., Any] | None = None,
    *,
    mirror: str | Policy | None = None,
    memory_budget: int | None = None,
    symbolic: bool = True,
    capture_as_const: bool = False,
) -> Any:
    """Traces ``fn`` into a graph run whole in Rust (``@fg.trace`` or
    ``@fg.trace(mirror="auto")``).

    The cache key is the signature: shapes, dtypes and devices of the tensor arguments (also
    inside lists, tuples and dicts) and which of them share memory (the same tensor passed
    twice), the other arguments by value. A new signature traces again. Tensors the function reads without receiving them (parameters, optimizer state)
    are captured by reference and updated in place by every call. Where the function finds
    them (a global or closure variable, and attributes or items of what those hold, such as
    ``model.fc.weight``) is guarded: a call that finds another tensor there (one of another
    shape, say) traces again. ``GradManager.backward``,
    ``fg.grad`` and ``fg.vjp`` inside build the gradient graph (callbacks run at their point
    of every step).

    As with ``jax.jit``, Python code in the function (a print, appending to a list, a numpy
    random draw) runs once, when a signature is traced, not on later calls; values computed
    inside cannot be read there (``.item()``, ``if`` on a tensor: :class:`TraceError`).

    ``mirror``: ``"auto"`` recomputes cheap forward values in backward where that lowers the
    memory held (never raising the planned peak), or a ``policy(op_name) -> bool`` says which
    ops may be recomputed. ``memory_budget``: plan the step to hold at most this many bytes at
    once (everything it holds: parameters, optimizer state, inputs, activations), recomputing
    the least that gets there; below what any plan reaches, the first call raises
    ``ValueError`` naming the smallest feasible budget.

    Given a matrix instead of a function, ``fg.trace(m)`` is PyTorch's ``torch.trace``: the
    sum of its main diagonal.

    MegEngine's ``symbolic`` and ``capture_as_const`` are accepted: the traced graph is
    always symbolic (run whole by the engine), and captured tensors are always read by
    reference (so parameters keep training).
    """
    if isinstance(fn, Tensor):
        return fn.trace()
    _check_options(mirror, memory_budget)
    if fn is None:
        return lambda f: TracedFunction(f, mirror=mirror, memory_budget=memory_budget)
    return TracedFunction(fn, mirror=mirror, memory_budget=memory_budget)
