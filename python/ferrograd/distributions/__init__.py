"""Probability distributions with PyTorch's ``torch.distributions`` API: ``sample``,
``rsample`` (reparameterized, differentiable), ``log_prob``, ``entropy``, ``cdf``, moments,
``kl_divergence`` and argument validation, built from ferrograd's differentiable ops so
gradients reach the parameters (policy gradients through ``Categorical.log_prob``, VAEs
through ``Normal.rsample`` and ``kl_divergence``).

Draws come from ``fg.manual_seed``'s generator. ``Gamma``, ``Beta``, ``Dirichlet``,
``Poisson`` and ``Binomial`` sample with the host generator and have no ``rsample``."""

from __future__ import annotations

from . import constraints, transforms
from .distribution import Distribution
from .families import (
    Bernoulli,
    Beta,
    Binomial,
    Categorical,
    Dirichlet,
    Exponential,
    Gamma,
    Geometric,
    Independent,
    Laplace,
    LogNormal,
    MultivariateNormal,
    Normal,
    OneHotCategorical,
    Poisson,
    Uniform,
)
from .kl import kl_divergence, register_kl
from .transforms import (
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    SigmoidTransform,
    TanhTransform,
    Transform,
    TransformedDistribution,
)

__all__ = [
    "AffineTransform",
    "Bernoulli",
    "Beta",
    "Binomial",
    "Categorical",
    "ComposeTransform",
    "Dirichlet",
    "Distribution",
    "ExpTransform",
    "Exponential",
    "Gamma",
    "Geometric",
    "Independent",
    "Laplace",
    "LogNormal",
    "MultivariateNormal",
    "Normal",
    "OneHotCategorical",
    "Poisson",
    "SigmoidTransform",
    "TanhTransform",
    "Transform",
    "TransformedDistribution",
    "Uniform",
    "constraints",
    "kl_divergence",
    "register_kl",
    "transforms",
]
