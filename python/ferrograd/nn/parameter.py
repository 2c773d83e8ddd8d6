"""``torch.nn.parameter``'s names: :class:`Parameter`, :class:`Buffer` and the lazy layers'
:class:`UninitializedParameter` / :class:`UninitializedBuffer`."""

from .modules import Parameter
from .more import Buffer, UninitializedBuffer, UninitializedParameter, is_lazy

__all__ = ["Buffer", "Parameter", "UninitializedBuffer", "UninitializedParameter", "is_lazy"]
