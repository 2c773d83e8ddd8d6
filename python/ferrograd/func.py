"""PyTorch's ``torch.func`` (functorch) transforms on ferrograd's tape: ``grad``,
``grad_and_value``, ``vjp``, ``jvp``, ``jacrev``, ``jacfwd``, ``hessian``, ``vmap``,
``functional_call``, ``linearize`` and ``stack_module_state``. See
:mod:`ferrograd._functional_ad` for how each is computed."""

from __future__ import annotations

from ._functional_ad import (
    func_hessian as hessian,
)
from ._functional_ad import (
    func_jvp as jvp,
)
from ._functional_ad import (
    func_vjp as vjp,
)
from ._functional_ad import (
    functional_call,
    grad,
    grad_and_value,
    jacfwd,
    jacrev,
    linearize,
    stack_module_state,
    vmap,
)

__all__ = [
    "functional_call",
    "grad",
    "grad_and_value",
    "hessian",
    "jacfwd",
    "jacrev",
    "jvp",
    "linearize",
    "stack_module_state",
    "vjp",
    "vmap",
]
