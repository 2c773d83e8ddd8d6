"""PyTorch's keyword spellings for functions and methods whose engine signatures name their
arguments differently (``x.squeeze(dim=0)``, ``x.transpose(dim0=, dim1=)``,
``torch.add(x, y, alpha=2)``, ``torch.zeros(size=(2,))``, ``x.sum(dtype=...)``): each
wrapper turns those keywords into the engine's arguments and calls it; calls without
keywords go straight through."""

from __future__ import annotations

import functools
from typing import Any, Callable

from ._core import Tensor


def _positional(fn: Callable[..., Any], names: tuple[str, ...], method: bool) -> Any:
    """``fn`` accepting its leading arguments ``names`` by keyword too (PyTorch's names)."""
    first = 1 if method else 0

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if kwargs:
            args = list(args)
            for i, name in enumerate(names):
                if name in kwargs and len(args) == i + first:
                    args.append(kwargs.pop(name))
        return fn(*args, **kwargs)

    return wrapped


def _renamed(fn: Callable[..., Any], renames: dict[str, str]) -> Any:
    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if kwargs:
            for a, b in renames.items():
                if a in kwargs:
                    kwargs[b] = kwargs.pop(a)
        return fn(*args, **kwargs)

    return wrapped


def _alpha(fn: Callable[..., Any], method: bool) -> Any:
    """``add(input, other, alpha=a)``: ``input + a * other`` (PyTorch's); as a method also
    the old order ``x.add(alpha, other)`` (deprecated in PyTorch, still accepted there)."""

    subtract = fn.__name__ != "add"

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if method and len(args) == 3:
            from ._torch_misc import _alpha_first

            args = _alpha_first(fn.__name__, args)
        alpha = 1
        if kwargs:
            args = list(args)
            for i, name in enumerate(("input", "other")[1 if method else 0 :]):
                if name in kwargs and len(args) == i + (1 if method else 0):
                    args.append(kwargs.pop(name))
            alpha = kwargs.pop("alpha", 1)
        if len(args) >= 2 and (subtract or type(alpha) is not int or alpha != 1):
            args = list(args)
            args[1] = scale_by_alpha(fn.__name__, args[0], args[1], alpha)
        return fn(*args, **kwargs)

    return wrapped


def scale_by_alpha(op: str, input: Any, other: Any, alpha: Any) -> Any:
    """``alpha * other`` for ``op(input, other, alpha=alpha)``, checked as PyTorch checks
    it against the dtype the op computes in: a float alpha needs a float or complex result,
    a complex one a complex result, a bool one a bool result (where any alpha is a logical
    and: ``add(a, b, alpha=0)`` of bools is ``a``). Subtraction with a bool tensor is refused
    (``~`` or ``logical_xor`` is meant)."""
    from ._core import DTypeError
    from ._torch_extra import result_type

    kind = _dtype_kind(result_type(input, other))
    if op in ("sub", "subtract", "rsub", "sub_") and (_is_bool(input) or _is_bool(other)):
        raise NotImplementedError(
            f"{op}: subtraction with a bool tensor is not supported; to invert a mask use ~ "
            f"or logical_not(), for the difference of two masks ^ or logical_xor()"
        )
    if isinstance(alpha, bool) and kind != "b":
        raise DTypeError(f"{op}: a bool alpha ({alpha}) is only supported for bool results")
    if isinstance(alpha, complex) and kind != "c":
        raise DTypeError(
            f"{op}: alpha must not be a complex number ({alpha}) for non-complex inputs"
        )
    if isinstance(alpha, float) and kind not in "fc":
        raise DTypeError(
            f"{op}: alpha must not be a floating point number ({alpha}) for integral inputs"
        )
    if type(alpha) is not bool and alpha == 1:
        return other
    if kind == "b":
        return other if alpha else other & False
    return other * alpha


def _is_bool(x: Any) -> bool:
    return isinstance(x, Tensor) and x.dtype.kind == "b"


def _dtype_kind(dtype: Any) -> str:
    import ferrograd as fg

    return fg.dtype(dtype).kind if not hasattr(dtype, "kind") else dtype.kind


def _sized(fn: Callable[..., Any]) -> Any:
    """``zeros(size=(2, 3))`` as ``zeros(2, 3)``."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if "size" in kwargs and not args:
            size = kwargs.pop("size")
            args = tuple(size) if isinstance(size, (list, tuple)) else (size,)
        return fn(*args, **kwargs)

    return wrapped


def _with_dtype(fn: Callable[..., Any], method: bool) -> Any:
    """``sum(x, dtype=d)``: ``x`` cast to ``d`` first and the result of dtype ``d``
    (PyTorch's: ``prod(bools, dtype=bool)`` is bool, ``sum(x, dtype=int32)`` int32; an
    int64 result cast down wraps as the narrower dtype's arithmetic would)."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        dtype = kwargs.pop("dtype", None) if kwargs else None
        if kwargs and not method and "input" in kwargs and not args:
            args = (kwargs.pop("input"),)
        if dtype is not None and args and isinstance(args[0], Tensor):
            from ._tensor import _dtype_name

            name = _dtype_name(dtype)
            out = fn(args[0].astype(name), *args[1:], **kwargs)
            if isinstance(out, Tensor) and out.dtype.name != name:
                out = out.astype(name)
            return out
        return fn(*args, **kwargs)

    return wrapped


def _dropping(fn: Callable[..., Any], names: tuple[str, ...]) -> Any:
    """``fn`` ignoring keywords that only choose a layout (``memory_format``)."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        for n in names:
            kwargs.pop(n, None)
        return fn(*args, **kwargs)

    return wrapped


def _round(fn: Callable[..., Any]) -> Any:
    """``round(x, decimals=d)`` as ``x.round(decimals=d)``."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if kwargs:
            x = args[0] if args else kwargs.pop("input")
            return x.round(**kwargs)
        return fn(*args)

    return wrapped


def install() -> None:
    import ferrograd as fg

    def fn(name: str, wrap: Callable[[Any], Any]) -> None:
        f = getattr(fg, name, None)
        if callable(f):
            setattr(fg, name, wrap(f))

    def method(name: str, wrap: Callable[[Any], Any]) -> None:
        f = getattr(Tensor, name, None)
        if callable(f):
            setattr(Tensor, name, wrap(f))

    fn("squeeze", lambda f: _renamed(_positional(f, ("input",), False), {"dim": "axis"}))
    method("squeeze", lambda f: _renamed(f, {"dim": "axis"}))
    # MegEngine's Tensor.flatten(start_axis, end_axis)
    method("flatten", lambda f: _renamed(f, {"start_axis": "start_dim", "end_axis": "end_dim"}))
    for name in ("transpose", "swapaxes", "swapdims"):
        fn(name, lambda f: _positional(f, ("input", "dim0", "dim1"), False))
        method(name, lambda f: _positional(f, ("dim0", "dim1"), True))
    fn("permute", lambda f: _positional(f, ("input", "dims"), False))
    method("permute", lambda f: _positional(f, ("dims",), True))
    fn("reshape", lambda f: _positional(f, ("input", "shape"), False))
    method("reshape", lambda f: _positional(f, ("shape",), True))
    method("view", lambda f: _positional(f, ("size",), True))
    method("expand", lambda f: _positional(f, ("size",), True))
    for name in ("matmul", "mm", "bmm", "mul", "multiply", "div", "divide", "true_divide"):
        fn(name, lambda f: _positional(f, ("input", "other"), False))
    for name in ("matmul", "mm", "bmm", "mul", "multiply"):
        method(name, lambda f: _positional(f, ("other",), True))
    fn("pow", lambda f: _positional(f, ("input", "exponent"), False))
    method("pow", lambda f: _positional(f, ("exponent",), True))
    for name in ("add", "sub", "subtract"):
        fn(name, lambda f: _alpha(f, False))
        method(name, lambda f: _alpha(f, True))
    for name in ("zeros", "ones", "empty", "rand", "randn"):
        fn(name, _sized)
    for name in ("sum", "mean", "prod", "cumsum", "cumprod", "nansum", "nanmean"):
        fn(name, lambda f: _with_dtype(f, False))
    fn("round", _round)
    fn("clone", lambda f: _dropping(f, ("memory_format",)))
    method("clone", lambda f: _dropping(f, ("memory_format",)))


# functions whose result PyTorch casts into ``out=`` where the cast is safe
_OUT_CASTING = (
    "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide",
    "floor_divide", "remainder", "fmod", "pow", "atan2", "maximum", "minimum", "fmax",
    "fmin", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
    "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor", "sqrt", "exp", "log",
    "sin", "cos", "tanh", "sigmoid", "abs", "floor", "ceil", "trunc", "xlogy", "addcdiv",
    "addcmul", "exp2", "log2", "log10", "expm1", "log1p", "rsqrt", "square", "reciprocal",
    "sinh", "cosh", "tan", "asin", "acos", "atan", "erf", "lgamma", "digamma", "logit",
    "logaddexp", "hypot", "copysign", "outer", "kron", "addr", "std", "var", "diff",
    "polygamma", "mvlgamma", "lerp", "asinh", "acosh", "atanh", "arcsinh", "arccosh",
    "arctanh", "arcsin", "arccos", "arctan", "erfc", "erfinv", "i0", "sinc", "deg2rad",
    "rad2deg", "angle",
)  # fmt: skip
# reductions whose ``out=`` dtype is the dtype they compute in (``sum(x, out=i64)``), and
# ``eye``, which builds the identity in ``out``'s dtype
_OUT_DTYPE = ("sum", "prod", "mean", "nansum", "nanmean", "cumsum", "cumprod", "eye")
# functions whose ``out=`` must have the result's dtype
_OUT_STRICT = (
    "neg", "amax", "amin", "argmax", "argmin", "logsumexp", "all", "any", "max", "min",
    "sort", "kthvalue", "cummax", "cummin", "concat", "concatenate", "topk", "msort",
    "mode", "median", "nanmedian", "float_power", "heaviside", "matmul", "mm", "bmm", "mv",
    "dot", "vdot", "inner", "addmm", "addmv", "addbmm", "baddbmm", "where", "sign", "sgn",
    "negative", "frac", "round", "nan_to_num", "clamp", "tril", "triu", "cross", "signbit",
    "isposinf", "isneginf", "fix",
    "index_select", "gather", "masked_select", "take_along_dim", "norm", "logcumsumexp",
    "renorm", "histc", "bucketize", "searchsorted", "take", "index_add", "index_copy",
    "index_reduce", "scatter", "scatter_add", "scatter_reduce", "aminmax", "quantile",
    "nanquantile", "histogram", "chain_matmul", "cholesky_inverse", "cholesky_solve",
    "lu_unpack", "inverse", "qr", "svd", "slogdet", "triangular_solve",
    "lu_solve", "nuclear_norm", "geqrf", "orgqr", "tensordot",
)  # fmt: skip
# joins written into ``out=`` as ``cat``'s (cast where the kind is kept, else a DTypeError)
_OUT_JOIN = ("hstack", "vstack", "dstack", "column_stack", "row_stack")
# ``fg.linalg`` functions given ``out=`` (the result's dtype, as _OUT_STRICT)
_LINALG_OUT = (
    "inv", "solve", "det", "cholesky", "matrix_power", "pinv", "svdvals", "matrix_norm",
    "vector_norm", "norm", "cond", "multi_dot", "solve_triangular", "vecdot",
    "tensorinv", "tensorsolve", "householder_product", "matrix_rank", "slogdet", "eigh",
    "eigvalsh", "qr", "svd", "inv_ex", "cholesky_ex", "solve_ex", "lu", "lu_factor",
    "lu_factor_ex", "lu_solve",
)  # fmt: skip


def _with_out(fn: Callable[..., Any], name: str) -> Any:
    """``fn(..., out=t)`` as PyTorch's: the result written into ``t`` (resized to it)."""

    @functools.wraps(fn)
    def wrapped(*args: Any, out: Any = None, **kwargs: Any) -> Any:
        if out is None:
            return fn(*args, **kwargs)
        from ._ops import _write_out

        if isinstance(out, (tuple, list)):
            res = fn(*args, **kwargs)
            if not isinstance(res, tuple) or len(res) != len(out):
                raise TypeError(f"{name}: out must be a single Tensor here")
            for o, r in zip(out, res):
                _write_out(name, o, r)
            return type(res)(*out) if hasattr(res, "_fields") else tuple(out)
        if not isinstance(out, Tensor):
            raise TypeError(f"{name}: out must be a Tensor, got {type(out).__name__}")
        if name in _OUT_DTYPE and kwargs.get("dtype") is None:
            kwargs["dtype"] = out.dtype
        res = fn(*args, **kwargs)
        if name in _OUT_JOIN:
            from ._ops import _cast_for_out

            res = _cast_for_out(name, out, res)
        if isinstance(res, Tensor) and res.dtype != out.dtype and name in _OUT_CASTING:
            import ferrograd as fg

            if not fg.can_cast(res.dtype, out.dtype):
                raise RuntimeError(
                    f"{name}: result type {res.dtype} can't be cast to the desired output type "
                    f"{out.dtype}"
                )
            res = res.to(out.dtype)
        return _write_out(name, out, res)

    return wrapped


def install_out() -> None:
    """``out=`` on the functions above that do not take it themselves."""
    import inspect

    import ferrograd as fg

    for name in _OUT_CASTING + _OUT_DTYPE + _OUT_STRICT + _OUT_JOIN:
        f = getattr(fg, name, None)
        if not callable(f):
            continue
        try:
            if "out" in inspect.signature(f).parameters:
                continue
        except (TypeError, ValueError):
            continue
        setattr(fg, name, _with_out(f, name))
    for name in _LINALG_OUT:
        f = getattr(fg.linalg, name, None)
        if callable(f) and "out" not in inspect.signature(f).parameters:
            setattr(fg.linalg, name, _with_out(f, f"linalg.{name}"))


# reductions where PyTorch reads an empty ``dim`` (``()`` or ``[]``) as every dim
_EMPTY_DIM_IS_ALL = (
    "sum",
    "mean",
    "nansum",
    "nanmean",
    "var",
    "std",
    "var_mean",
    "std_mean",
    "logsumexp",
    "count_nonzero",
    "amax",
    "amin",
)


def _empty_dim_is_all(fn: Callable[..., Any], name: str, pos: int = 1) -> Any:
    """``fn`` with ``dim=()`` / ``dim=[]`` reducing over every dim, as PyTorch's reductions
    do (the engine reads an empty axis list as no reduction at all, which would silently
    return the input unreduced), the engine's bare ValueError for a dim named twice raised
    as a ShapeError (a RuntimeError, as PyTorch's), and ``mean`` of an integer tensor
    refused with a DTypeError that is also the NotImplementedError PyTorch raises."""

    def empty(d: Any) -> bool:
        return isinstance(d, (tuple, list)) and len(d) == 0

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        # only PyTorch's spellings (positional or dim=): the engine's own axis=() keeps
        # meaning no reduction, which the package's internals rely on
        if len(args) > pos and empty(args[pos]):
            args = (*args[:pos], None, *args[pos + 1 :])
        elif kwargs and empty(kwargs.get("dim")):
            kwargs["dim"] = None
        try:
            return fn(*args, **kwargs)
        except ValueError as e:
            if type(e) is not ValueError:
                raise
            from ._core import ShapeError

            raise ShapeError(f"{name}: {str(e).split(': ', 1)[-1]}") from None
        except TypeError as e:
            from ._core import DTypeError

            if type(e) is not DTypeError or name != "mean":
                raise
            from .nn._errors import UnsupportedDTypeError

            raise UnsupportedDTypeError(str(e)) from None

    return wrapped


def install_empty_dims() -> None:
    """PyTorch's reading of an empty ``dim`` on the package's reductions and their methods,
    and on ``norm`` / ``linalg.vector_norm`` (whose ``dim`` comes third)."""
    import ferrograd as fg

    for name in _EMPTY_DIM_IS_ALL:
        for owner in (fg, Tensor):
            f = getattr(owner, name, None)
            if callable(f):
                setattr(owner, name, _empty_dim_is_all(f, name))
    for owner in (fg, Tensor):
        for name in ("norm",):
            f = getattr(owner, name, None)
            if callable(f):
                setattr(owner, name, _empty_dim_is_all(f, name, 2))
    f = getattr(fg.linalg, "vector_norm", None)
    if callable(f):
        fg.linalg.vector_norm = _empty_dim_is_all(f, "vector_norm", 2)
