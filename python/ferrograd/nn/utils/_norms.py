"""Weight and spectral normalisation by forward pre-hooks, conv/linear + batch norm fusion,
``skip_init`` and the deprecated ``clip_grad_norm``, as PyTorch's ``torch.nn.utils``."""

from __future__ import annotations

import copy
import inspect
import warnings
from typing import Any

from ... import _core
from ..._core import AxisError, Tensor
from ..._tensor import tensor
from ...autodiff import no_grad
from ...random import _numpy_rng
from .._errors import ArgumentAssertionError, ArgumentTypeRuntimeError, ShapeAssertionError

__all__ = [
    "clip_grad_norm",
    "fuse_conv_bn_eval",
    "fuse_conv_bn_weights",
    "fuse_linear_bn_eval",
    "fuse_linear_bn_weights",
    "remove_spectral_norm",
    "remove_weight_norm",
    "skip_init",
    "spectral_norm",
    "weight_norm",
]


def _param_cls() -> Any:
    from ..modules import Parameter

    return Parameter


def _take_param(module: Any, name: str, op: str) -> Tensor:
    """Removes the parameter ``name`` from ``module`` and returns it."""
    d = module.__dict__
    params = d.get("_parameters")
    if params is not None and name in params:
        return params.pop(name)
    w = d.get(name)
    if not isinstance(w, _param_cls()):
        raise ValueError(f"{op}: {type(module).__name__} has no parameter {name!r}")  # noqa: TRY004 (a missing parameter, as PyTorch)
    del d[name]
    return w


def _check_dim(op: str, dim: Any, ndim: int, name: str, stop: int) -> None:
    """``dim`` must be an int in ``[-ndim, stop)``: ``TypeError`` otherwise, ``AxisError`` (an
    ``IndexError``, PyTorch's type for a dimension out of range) when out of range."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{op}: dim must be an int or None, got {type(dim).__name__}")
    if not -ndim <= dim < stop:
        raise AxisError(f"{op}: dim {dim} is out of range for a {ndim}-D {name!r}")


def _hooks(module: Any) -> dict:
    return module.__dict__.get("_forward_pre_hooks", {})


def _norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """The 2-norm of ``v`` over every axis but ``dim`` (kept, size 1 elsewhere); over all of
    ``v`` (0-d) when ``dim`` is -1."""
    if dim == -1:
        return (v * v).sum().sqrt()
    axes = [a for a in range(v.ndim) if a != dim]
    if not axes:  # a 1-D v: the norm of each entry alone
        return v.abs()
    return (v * v).sum(axes, keepdims=True).sqrt()


class _WeightNorm:
    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, dim

    def compute_weight(self, module: Any) -> Tensor:
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return v * (g / _norm_except_dim(v, self.dim))

    def __call__(self, module: Any, inputs: Any) -> None:
        object.__setattr__(module, self.name, self.compute_weight(module))


def weight_norm(module: Any, name: str = "weight", dim: int | None = 0) -> Any:
    """Reparametrises ``module.<name>`` as ``g * v / ||v||``: parameters ``<name>_g`` (the
    norms over every axis but ``dim``) and ``<name>_v`` (the direction) replace it, and a
    forward pre-hook recomputes the weight before each call. ``dim=None`` (or -1) takes one
    norm of the whole tensor. Returns ``module``."""
    op = "weight_norm"
    warnings.warn(
        "nn.utils.weight_norm is deprecated in favor of nn.utils.parametrizations.weight_norm",
        FutureWarning,
        stacklevel=2,
    )
    for hook in _hooks(module).values():
        if isinstance(hook, _WeightNorm) and hook.name == name:
            raise RuntimeError(f"{op}: {name!r} of {type(module).__name__} is already normalised")
    w = getattr(module, name, None)
    if not isinstance(w, Tensor):
        raise ValueError(f"{op}: {type(module).__name__} has no parameter {name!r}")  # noqa: TRY004 (a missing parameter, as PyTorch)
    if dim is None:
        dim = -1
    _check_dim(op, dim, w.ndim, name, max(w.ndim, 1))
    if dim < -1:
        dim += w.ndim
    fn = _WeightNorm(name, dim)
    w = _take_param(module, name, op)
    P = _param_cls()
    with no_grad():
        g = _norm_except_dim(w.detach(), dim).copy()
        v = w.detach().copy()
    module.register_parameter(name + "_g", P(g))
    module.register_parameter(name + "_v", P(v))
    fn(module, ())
    module.register_forward_pre_hook(fn)
    return module


def _find_hook(module: Any, cls: type, name: str, op: str) -> int:
    for key, hook in _hooks(module).items():
        if isinstance(hook, cls) and hook.name == name:
            return key
    raise ValueError(f"{op}: no {op.split('_', 1)[1]} of {name!r} found in {type(module).__name__}")


def remove_weight_norm(module: Any, name: str = "weight") -> Any:
    """Undoes :func:`weight_norm`: ``<name>`` becomes a plain parameter again, holding the
    current normalised weight. Returns ``module``."""
    key = _find_hook(module, _WeightNorm, name, "remove_weight_norm")
    fn = _hooks(module).pop(key)
    with no_grad():
        w = fn.compute_weight(module).detach().copy()
    _take_param(module, name + "_g", "remove_weight_norm")
    _take_param(module, name + "_v", "remove_weight_norm")
    module.__dict__.pop(name, None)
    module.register_parameter(name, _param_cls()(w))
    return module


def _l2_normalize(x: Tensor, eps: float) -> Tensor:
    return x / ((x * x).sum().sqrt()).clamp(min=eps)


class _SpectralNorm:
    def __init__(self, name: str, n_power_iterations: int, dim: int, eps: float) -> None:
        self.name, self.n_power_iterations, self.dim, self.eps = name, n_power_iterations, dim, eps

    def matrix(self, w: Tensor) -> Tensor:
        if self.dim != 0:
            order = [self.dim] + [a for a in range(w.ndim) if a != self.dim]
            w = w.permute(*order)
        return w.reshape(w.shape[0], -1)

    def compute_weight(self, module: Any, do_power_iteration: bool) -> Tensor:
        w = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        m = self.matrix(w)
        if do_power_iteration and self.n_power_iterations > 0:
            with no_grad():
                md = m.detach()
                nu, nv = u, v
                for _ in range(self.n_power_iterations):
                    nv = _l2_normalize(_core.matmul(nu.reshape(1, -1), md).reshape(-1), self.eps)
                    nu = _l2_normalize(_core.matmul(md, nv.reshape(-1, 1)).reshape(-1), self.eps)
                u.copy_(nu)  # the buffers are updated in place, as PyTorch's
                v.copy_(nv)
            u, v = u.detach().copy(), v.detach().copy()
        sigma = (u * _core.matmul(m, v.reshape(-1, 1)).reshape(-1)).sum()
        return w / sigma

    def __call__(self, module: Any, inputs: Any) -> None:
        object.__setattr__(module, self.name, self.compute_weight(module, module.training))


def _default_spectral_dim(module: Any) -> int:
    """1 for a transposed convolution (whose weight has the output channels second), else 0."""
    from ..extra import ConvTranspose1d
    from ..modules import ConvTranspose2d
    from ..volumetric import ConvTranspose3d

    return 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0


def spectral_norm(
    module: Any,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Any:
    """Divides ``module.<name>`` by its largest singular value (of the weight as a matrix with
    axis ``dim`` first), estimated by power iteration: the parameter becomes ``<name>_orig``,
    the singular vector estimates are the buffers ``<name>_u`` and ``<name>_v`` (drawn from
    ``fg.manual_seed``'s stream), and a forward pre-hook runs ``n_power_iterations`` steps
    in training mode (none in eval mode) and recomputes the weight. ``dim`` defaults to 1
    for transposed convolutions, 0 otherwise. Returns ``module``."""
    op = "spectral_norm"
    for hook in _hooks(module).values():
        if isinstance(hook, _SpectralNorm) and hook.name == name:
            raise RuntimeError(f"{op}: {name!r} of {type(module).__name__} is already normalised")
    if isinstance(n_power_iterations, bool) or not isinstance(n_power_iterations, int):
        raise TypeError(f"{op}: n_power_iterations must be an int, got {n_power_iterations!r}")
    if n_power_iterations <= 0:
        raise ValueError(f"{op}: n_power_iterations must be positive, got {n_power_iterations}")
    w = getattr(module, name, None)
    if not isinstance(w, Tensor):
        raise ValueError(f"{op}: {type(module).__name__} has no parameter {name!r}")  # noqa: TRY004 (a missing parameter, as PyTorch)
    if dim is None:
        dim = _default_spectral_dim(module)
    _check_dim(op, dim, w.ndim, name, w.ndim)
    dim %= w.ndim
    fn = _SpectralNorm(name, n_power_iterations, dim, float(eps))
    w = _take_param(module, name, op)
    h, wd = fn.matrix(w).shape
    rng = _numpy_rng(w.device)
    with no_grad():
        u = _l2_normalize(tensor(rng.standard_normal(h), device=w.device).astype(w.dtype.name), eps)
        v = _l2_normalize(
            tensor(rng.standard_normal(wd), device=w.device).astype(w.dtype.name), eps
        )
    module.register_parameter(name + "_orig", w)
    object.__setattr__(module, name, w.detach())
    module.register_buffer(name + "_u", u.copy())
    module.register_buffer(name + "_v", v.copy())
    module.register_forward_pre_hook(fn)
    return module


def remove_spectral_norm(module: Any, name: str = "weight") -> Any:
    """Undoes :func:`spectral_norm`: ``<name>`` becomes a plain parameter holding the
    current normalised weight (no further power iteration). Returns ``module``."""
    key = _find_hook(module, _SpectralNorm, name, "remove_spectral_norm")
    fn = _hooks(module).pop(key)
    with no_grad():
        w = fn.compute_weight(module, False).detach().copy()
    _take_param(module, name + "_orig", "remove_spectral_norm")
    for suffix in ("_u", "_v"):
        module.__dict__.get("_buffer_names", {}).pop(name + suffix, None)
        module.__dict__.pop(name + suffix, None)
    module.__dict__.pop(name, None)
    module.register_parameter(name, _param_cls()(w))
    return module


# ------------------------------------------------------------------------------ fusion


def fuse_conv_bn_weights(
    conv_w: Tensor,
    conv_b: Tensor | None,
    bn_rm: Tensor,
    bn_rv: Tensor,
    bn_eps: float,
    bn_w: Tensor | None,
    bn_b: Tensor | None,
    transpose: bool = False,
) -> tuple[Any, Any]:
    """The weight and bias of one convolution equal to ``conv`` followed by an eval-mode
    batch norm (running statistics ``bn_rm``, ``bn_rv``), as Parameters."""
    P = _param_cls()
    with no_grad():
        c = bn_rm.shape[0]
        dt, dev = conv_w.dtype.name, conv_w.device
        if conv_b is None:
            conv_b = _core.zeros((c,), dtype=dt, device=dev)
        if bn_w is None:
            bn_w = _core.ones((c,), dtype=dt, device=dev)
        if bn_b is None:
            bn_b = _core.zeros((c,), dtype=dt, device=dev)
        scale = (bn_rv + bn_eps).rsqrt() * bn_w
        shape = [1, -1] if transpose else [-1, 1]
        shape += [1] * (conv_w.ndim - 2)
        w = conv_w * scale.reshape(*shape).astype(dt)
        b = (conv_b - bn_rm) * scale + bn_b
    return P(w.astype(dt)), P(b.astype(conv_b.dtype.name))


def fuse_conv_bn_eval(conv: Any, bn: Any, transpose: bool = False) -> Any:
    """A copy of ``conv`` with an eval-mode ``bn`` folded into its weight and bias; both
    modules must be in eval mode."""
    if conv.training or bn.training:
        raise ArgumentAssertionError("fuse_conv_bn_eval: conv and bn must both be in eval mode")
    if bn.running_mean is None:
        raise ArgumentAssertionError("fuse_conv_bn_eval: bn must track running statistics")
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight,
        fused.bias,
        bn.running_mean,
        bn.running_var,
        bn.eps,
        bn.weight,
        bn.bias,
        transpose,
    )
    return fused


def fuse_linear_bn_weights(
    linear_w: Tensor,
    linear_b: Tensor | None,
    bn_rm: Tensor,
    bn_rv: Tensor,
    bn_eps: float,
    bn_w: Tensor | None,
    bn_b: Tensor | None,
) -> tuple[Any, Any]:
    """The weight and bias of one linear layer equal to ``linear`` followed by an eval-mode
    batch norm, as Parameters."""
    P = _param_cls()
    with no_grad():
        c = bn_rm.shape[0]
        dt, dev = linear_w.dtype.name, linear_w.device
        if linear_b is None:
            linear_b = _core.zeros((c,), dtype=dt, device=dev)
        if bn_w is None:
            bn_w = _core.ones((c,), dtype=dt, device=dev)
        if bn_b is None:
            bn_b = _core.zeros((c,), dtype=dt, device=dev)
        scale = (bn_rv + bn_eps).rsqrt() * bn_w
        w = linear_w * scale.reshape(-1, 1)
        b = (linear_b - bn_rm) * scale + bn_b
    return P(w.astype(dt)), P(b.astype(dt))


def fuse_linear_bn_eval(linear: Any, bn: Any) -> Any:
    """A copy of ``linear`` with an eval-mode ``bn`` (over its outputs) folded in."""
    if linear.training or bn.training:
        raise ArgumentAssertionError("fuse_linear_bn_eval: linear and bn must both be in eval mode")
    if bn.running_mean is None:
        raise ArgumentAssertionError("fuse_linear_bn_eval: bn must track running statistics")
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise ShapeAssertionError(
            f"fuse_linear_bn_eval: linear's out_features ({linear.out_features}) must equal "
            f"bn's num_features ({bn.num_features}) or bn's num_features must be 1"
        )
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias
    )
    return fused


def skip_init(module_cls: Any, *args: Any, **kwargs: Any) -> Any:
    """``module_cls(*args, **kwargs)``, whose parameters are to be overwritten: PyTorch skips
    their initialisation; ferrograd runs it (the values are unspecified either way).
    ``module_cls`` must be a Module subclass taking a ``device`` argument (RuntimeError
    otherwise, as PyTorch)."""
    from ...module import Module

    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise ArgumentTypeRuntimeError(
            f"skip_init: module_cls must be a Module subclass, got {module_cls!r}"
        )
    # PyTorch builds the module through its ``device`` argument (on the meta device) and
    # refuses a class without one: refused here too, so code that runs here runs there
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError(
            f"skip_init: {module_cls.__name__} must take a 'device' argument in its constructor"
        )
    return module_cls(*args, **kwargs)


def clip_grad_norm(
    parameters: Any,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: Any = None,
) -> Tensor:
    """Deprecated: :func:`clip_grad_norm_`."""
    from . import clip_grad_norm_

    warnings.warn(
        "nn.utils.clip_grad_norm is deprecated; use nn.utils.clip_grad_norm_",
        FutureWarning,
        stacklevel=2,
    )
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)
