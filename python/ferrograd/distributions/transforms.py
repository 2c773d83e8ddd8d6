"""Bijective transforms of random variables and ``TransformedDistribution`` (PyTorch's
names): ``ExpTransform``, ``AffineTransform``, ``SigmoidTransform``, ``TanhTransform``,
``ComposeTransform``. ``log_abs_det_jacobian(x, y)`` is differentiable; with
``cache_size=1`` a transform remembers its last ``(x, y)`` so ``inv(y)`` of a sample it made
returns that ``x`` exactly (no ``atanh`` of values rounded to 1)."""

from __future__ import annotations

import math
from typing import Any

from .._core import Tensor
from ..autodiff import no_grad
from . import constraints
from .distribution import Distribution, _fg, _finfo, _sum_rightmost

__all__ = [
    "AffineTransform",
    "ComposeTransform",
    "ExpTransform",
    "SigmoidTransform",
    "TanhTransform",
    "Transform",
    "TransformedDistribution",
]


class Transform:
    """``y = t(x)``; ``t.inv(y)``; ``t.log_abs_det_jacobian(x, y)``."""

    bijective = True
    event_dim = 0
    sign = 1
    domain: Any = constraints.real
    codomain: Any = constraints.real

    def __init__(self, cache_size: int = 0) -> None:
        if cache_size not in (0, 1):
            raise ValueError(f"{type(self).__name__}: cache_size must be 0 or 1, got {cache_size}")
        self._cache_size = cache_size
        self._cached: tuple | None = None

    def __call__(self, x: Tensor) -> Tensor:
        y = self._call(x)
        if self._cache_size:
            self._cached = (x, y)
        return y

    def _inverse_of(self, y: Tensor) -> Tensor:
        if self._cached is not None and self._cached[1] is y:
            return self._cached[0]
        x = self._inverse(y)
        if self._cache_size:
            self._cached = (x, y)
        return x

    @property
    def inv(self) -> Transform:
        return _Inverse(self)

    def _call(self, x: Tensor) -> Tensor:
        raise NotImplementedError

    def _inverse(self, y: Tensor) -> Tensor:
        raise NotImplementedError

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        raise NotImplementedError

    def _params(self) -> tuple:
        """What two transforms of the same class must agree on to be equal."""
        return ()

    def __eq__(self, other: object) -> bool:
        """Same class and equal parameters (tensors equal everywhere), as PyTorch's."""
        if type(self) is not type(other):
            return False
        assert isinstance(other, Transform)
        mine, theirs = self._params(), other._params()
        return len(mine) == len(theirs) and all(map(_same_param, mine, theirs))

    __hash__ = None  # type: ignore[assignment]  (equality by value, as PyTorch's)

    def forward_shape(self, shape: Any) -> tuple:
        """The shape of ``t(x)`` for ``x`` of ``shape`` (the same, unless overridden)."""
        return tuple(shape)

    def inverse_shape(self, shape: Any) -> tuple:
        """The shape of ``t.inv(y)`` for ``y`` of ``shape``."""
        return tuple(shape)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _same_param(a: Any, b: Any) -> bool:
    if isinstance(a, Transform) or isinstance(b, Transform):
        return a == b
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        try:
            return bool((a == b).all().item())
        except (ValueError, RuntimeError):  # shapes that do not broadcast
            return False
    return bool(a == b)


class _Inverse(Transform):
    def __init__(self, base: Transform) -> None:
        super().__init__(0)
        self._base = base
        self.event_dim = base.event_dim
        self.domain, self.codomain = base.codomain, base.domain

    def _call(self, y: Tensor) -> Tensor:
        return self._base._inverse_of(y)

    def _inverse(self, x: Tensor) -> Tensor:
        return self._base(x)

    @property
    def inv(self) -> Transform:
        return self._base

    @property
    def sign(self) -> Any:  # type: ignore[override]
        return self._base.sign

    def _params(self) -> tuple:
        return (self._base,)

    def forward_shape(self, shape: Any) -> tuple:
        return self._base.inverse_shape(shape)

    def inverse_shape(self, shape: Any) -> tuple:
        return self._base.forward_shape(shape)

    def log_abs_det_jacobian(self, y: Tensor, x: Tensor) -> Tensor:
        return -self._base.log_abs_det_jacobian(x, y)


class ExpTransform(Transform):
    codomain = constraints.positive

    def _call(self, x: Tensor) -> Tensor:
        return x.exp()

    def _inverse(self, y: Tensor) -> Tensor:
        return y.log()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return x


class SigmoidTransform(Transform):
    codomain = constraints.unit_interval

    def _call(self, x: Tensor) -> Tensor:
        eps = _finfo(x.dtype).eps
        return x.sigmoid().clamp(min=eps, max=1 - eps)

    def _inverse(self, y: Tensor) -> Tensor:
        eps = _finfo(y.dtype).eps
        y = y.clamp(min=eps, max=1 - eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        sp = _fg().nn.functional.softplus
        return -sp(-x) - sp(x)


class TanhTransform(Transform):
    codomain = constraints.interval(-1.0, 1.0)

    def _call(self, x: Tensor) -> Tensor:
        return x.tanh()

    def _inverse(self, y: Tensor) -> Tensor:
        return _fg().atanh(y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        # log(1 - tanh(x)^2), written to stay finite for large |x| (PyTorch's formula)
        return 2.0 * (math.log(2.0) - x - _fg().nn.functional.softplus(-2.0 * x))


class AffineTransform(Transform):
    """``y = loc + scale * x`` (``event_dim`` rightmost axes form one event)."""

    def __init__(self, loc: Any, scale: Any, event_dim: int = 0, cache_size: int = 0) -> None:
        super().__init__(cache_size)
        self.loc, self.scale, self.event_dim = loc, scale, event_dim
        # an event of ``event_dim`` axes maps to an event of as many axes
        space = (
            constraints.independent(constraints.real, event_dim) if event_dim else constraints.real
        )
        self.domain = self.codomain = space

    def _params(self) -> tuple:
        return (self.loc, self.scale)

    @property
    def sign(self) -> Any:  # type: ignore[override]
        """The sign of ``scale`` (elementwise for a tensor): whether ``y`` rises with ``x``."""
        if isinstance(self.scale, Tensor):
            return self.scale.sign()
        return 1 if self.scale > 0 else -1 if self.scale < 0 else 0

    def _call(self, x: Tensor) -> Tensor:
        return self.loc + self.scale * x

    def _inverse(self, y: Tensor) -> Tensor:
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        fg = _fg()
        scale = self.scale
        if isinstance(scale, Tensor):
            result = (
                scale.abs().log().expand(*x.shape) if scale.shape != x.shape else scale.abs().log()
            )
        else:
            result = fg.full(x.shape, math.log(abs(scale)), dtype=x.dtype, device=x.device)
        return _sum_rightmost(result, self.event_dim)


class ComposeTransform(Transform):
    """``parts`` applied in order."""

    def __init__(self, parts: list, cache_size: int = 0) -> None:
        super().__init__(cache_size)
        self.parts = list(parts)
        self.event_dim = max((p.event_dim for p in self.parts), default=0)
        if self.parts:
            # the first part's domain and the last part's codomain, widened to whole events
            # of the composition
            dom, cod = self.parts[0].domain, self.parts[-1].codomain
            if self.event_dim > dom.event_dim:
                dom = constraints.independent(dom, self.event_dim - dom.event_dim)
            if self.event_dim > cod.event_dim:
                cod = constraints.independent(cod, self.event_dim - cod.event_dim)
            self.domain, self.codomain = dom, cod

    def _params(self) -> tuple:
        return tuple(self.parts)

    @property
    def sign(self) -> Any:  # type: ignore[override]
        """The product of the parts' signs."""
        out: Any = 1
        for p in self.parts:
            out = out * p.sign
        return out

    def forward_shape(self, shape: Any) -> tuple:
        shape = tuple(shape)
        for p in self.parts:
            shape = p.forward_shape(shape)
        return shape

    def inverse_shape(self, shape: Any) -> tuple:
        shape = tuple(shape)
        for p in reversed(self.parts):
            shape = p.inverse_shape(shape)
        return shape

    def _call(self, x: Tensor) -> Tensor:
        for p in self.parts:
            x = p(x)
        return x

    def _inverse(self, y: Tensor) -> Tensor:
        for p in reversed(self.parts):
            y = p.inv(y)
        return y

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        total = None
        for p in self.parts:
            nxt = p(x)
            term = _sum_rightmost(p.log_abs_det_jacobian(x, nxt), self.event_dim - p.event_dim)
            total = term if total is None else total + term
            x = nxt
        return total if total is not None else x * 0


class TransformedDistribution(Distribution):
    """``base_distribution`` pushed through ``transforms`` (one or a list, applied in
    order): ``sample``/``rsample`` transform the base's draws; ``log_prob(y)`` is the base's
    log-density at the pre-image minus the log-Jacobians."""

    arg_constraints: dict = {}  # noqa: RUF012

    def __init__(
        self, base_distribution: Distribution, transforms: Any, validate_args: bool | None = None
    ) -> None:
        self.base_dist = base_distribution
        self.transforms = (
            list(transforms) if isinstance(transforms, (list, tuple)) else [transforms]
        )
        for t in self.transforms:
            if not isinstance(t, Transform):
                raise TypeError(f"TransformedDistribution: {t!r} is not a Transform")
        whole = ComposeTransform(self.transforms)
        base_shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        dom_dim, cod_dim = whole.domain.event_dim, whole.codomain.event_dim
        if len(base_shape) < dom_dim:
            raise ValueError(
                f"TransformedDistribution: the base distribution's shape {base_shape} has fewer "
                f"than the {dom_dim} event dimensions the transforms take"
            )
        # base batch axes that the transforms treat as one event become event axes
        folded = dom_dim - len(base_distribution.event_shape)
        if folded > 0:
            from .families import Independent

            self.base_dist = Independent(base_distribution, folded, validate_args=False)
        shape = whole.forward_shape(base_shape)
        event_dim = cod_dim + max(len(self.base_dist.event_shape) - dom_dim, 0)
        cut = len(shape) - event_dim
        super().__init__(shape[:cut], shape[cut:], False)
        if validate_args is not None:
            self._validate_args = validate_args

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        """The base distribution expanded to ``batch_shape`` plus the base's batch axes
        that the transforms fold into events; the same transforms."""
        batch_shape = tuple(int(b) for b in batch_shape)
        folded = tuple(self.base_dist.batch_shape)[len(self.batch_shape) :]
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.base_dist = self.base_dist.expand(batch_shape + folded)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        return self.base_dist.has_rsample

    @property
    def support(self) -> Any:
        if not self.transforms:
            return self.base_dist.support
        out = self.transforms[-1].codomain
        extra = len(self.event_shape) - out.event_dim
        return constraints.independent(out, extra) if extra > 0 else out

    def sample(self, sample_shape: Any = ()) -> Tensor:
        # (no gradient reaches learnable transforms from a sample, as PyTorch's)
        with no_grad():
            x = self.base_dist.sample(sample_shape)
            for t in self.transforms:
                x = t(x)
        return x

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        x = self.base_dist.rsample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return x

    def log_prob(self, value: Tensor) -> Tensor:
        event_dim = len(self.event_shape)
        lp: Any = 0.0
        y = value
        for t in reversed(self.transforms):
            x = t._inverse_of(y)
            lp = lp - _sum_rightmost(t.log_abs_det_jacobian(x, y), event_dim - t.event_dim)
            y = x
        return lp + _sum_rightmost(
            self.base_dist.log_prob(y), event_dim - len(self.base_dist.event_shape)
        )

    def __repr__(self) -> str:
        return f"TransformedDistribution({self.base_dist!r}, {self.transforms!r})"


def __getattr__(name: str) -> Any:
    # the transforms defined with the families that need them, under this module's name too
    if name in ("AbsTransform", "PowerTransform", "StickBreakingTransform"):
        from . import more

        return getattr(more, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
