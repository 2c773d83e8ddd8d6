"""ferrograd: a reverse-mode automatic differentiation engine with a Rust core.

>>> import ferrograd as fg
>>> x = fg.tensor([1.0, 2.0, 3.0])
>>> key = fg.GradKey()
>>> key.attach(x)
>>> y = (x * x).sum()
>>> key.backward(y)
>>> x.grad.numpy().tolist()
[2.0, 4.0, 6.0]
"""

import threading as _threading

from . import _core

if _threading.current_thread() is _threading.main_thread():
    # large CPU ops called from the main thread run their first part on it instead of waiting
    # for the worker pool to wake, do it and wake this thread again
    _core._join_pool_here()

from . import _blas as _blas  # numpy's OpenBLAS for large CPU products (see _blas)
from . import _core, cuda, distributed, nn, optim, random
from . import _indexing as _indexing  # advanced indexing on Tensor (installed on import)
from . import _torch_compat as _torch_compat  # PyTorch's names (installs Tensor methods)
from . import autograd as autograd
from . import func as func
from . import linalg as linalg
from . import special as special
from . import testing as testing  # torch.testing: assert_close, make_tensor
from . import utils as utils
from . import version as version  # torch.version: __version__, cuda, debug, git_version
from ._core import *  # the engine's ops: the names of _core.__all__
from ._core import __version__
from ._decomp import TORCH_NAMES as _decomp_names
from ._elementwise import *  # clamp, isnan, logical ops (see _elementwise.__all__)
from ._elementwise import __all__ as _elementwise_all
from ._ops import *  # ops written in Python (see _ops.__all__)
from ._ops import __all__ as _ops_all
from ._tensor import (
    bfloat16,
    bool_,
    dtype,
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    set_default_dtype,
    tensor,
    uint8,
)
from ._torch_compat import *  # mm, einsum, sort, topk, ... (see _torch_compat.__all__)
from ._torch_compat import __all__ as _torch_compat_all
from ._torch_extra import *  # more torch.* names (see _torch_extra.__all__)
from ._torch_extra import __all__ as _torch_extra_all
from ._torch_more import *  # remainder, median, unbind, ... (see _torch_more.__all__)
from ._torch_more import __all__ as _torch_more_all
from .autodiff import (
    Function,
    GradManager,
    GradManagerGroup,
    GradRuleFallback,
    checkpoint,
    checkpoint_sequential,
    enable_grad,
    grad,
    hvp,
    inference_mode,
    is_grad_enabled,
    jvp,
    no_grad,
    register_grad_rule,
    set_grad_enabled,
    unregister_grad_rule,
    vjp,
)
from .random import Generator, default_generator, initial_seed, manual_seed

random._ensure_counter("cpu")  # the CPU's traced generator exists before any trace
# PyTorch's process-level names (typed tensors, fg.compile, thread settings, ...)
from . import accelerator as accelerator
from . import backends as backends
from . import distributions as distributions
from ._porting import *
from ._porting import __all__ as _porting_all
from .serialization import load, save
from .tracing import TracedFunction, TraceWarning, trace

# the engine's ops are re-exported by name from the op tables (_core.__all__); these are the
# package's own
__all__ = [
    "Function",
    "Generator",
    "GradManager",
    "GradManagerGroup",
    "GradRuleFallback",
    "TraceWarning",
    "TracedFunction",
    "__version__",
    "autograd",
    "bfloat16",
    "bool_",
    "checkpoint",
    "checkpoint_sequential",
    "cuda",
    "default_generator",
    "distributed",
    "distributions",
    "dtype",
    "enable_grad",
    "float16",
    "float32",
    "float64",
    "get_default_dtype",
    "grad",
    "hvp",
    "inference_mode",
    "initial_seed",
    "int8",
    "int16",
    "int32",
    "int64",
    "is_grad_enabled",
    "jvp",
    "linalg",
    "load",
    "manual_seed",
    "nn",
    "no_grad",
    "optim",
    "random",
    "register_grad_rule",
    "save",
    "set_default_dtype",
    "set_grad_enabled",
    "special",
    "tensor",
    "trace",
    "uint8",
    "unregister_grad_rule",
    "utils",
    "vjp",
]
__all__ += [name for name in _core.__all__ if name not in __all__]
__all__ += [name for name in _ops_all if name not in __all__]
__all__ += [name for name in _torch_compat_all if name not in __all__]
__all__ += [name for name in _elementwise_all if name not in __all__]
__all__ += [name for name in _torch_more_all if name not in __all__]
globals().update(_decomp_names)  # inverse, det, slogdet, svd, qr, cholesky, ... as torch.*
__all__ += [name for name in _decomp_names if name not in __all__]
__all__ += [name for name in _torch_extra_all if name not in __all__]
__all__ += [name for name in _porting_all if name not in __all__]
__all__ += ["accelerator", "backends"]

# PyTorch's dtype aliases (module attributes, not in __all__: they would shadow builtins)
float = float32
double = float64
half = float16
long = int64
int = int32
short = int16
bool = bool_

# mixed precision: autocast wraps the products and the float32 ops (after everything above)
from . import amp as amp
from . import cpu as cpu
from . import xpu as xpu  # torch.xpu / torch.mps: not available

mps = xpu
from .amp import autocast as autocast
from .amp import (
    clear_autocast_cache,
    get_autocast_cpu_dtype,
    get_autocast_dtype,
    is_autocast_available,
    is_autocast_cache_enabled,
    is_autocast_cpu_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)

amp._install()

from . import _torch_keywords

_torch_keywords.install()

from . import _torch_inplace
from . import fx as fx  # torch.fx.wrap at a model file's top level (torchvision's Swin)
from . import hub as hub
from . import logger as logger  # megengine.logger.get_logger() in training scripts
from . import onnx as onnx  # torch.onnx.is_in_onnx_export() in model code

_torch_inplace.install()

from . import _torch_misc

_torch_misc.install()

from . import _torch_shape_api

_torch_shape_api.install()

from . import _torch_storage

_torch_storage.install()

# PyTorch's other spellings: in-place function forms, method aliases, torch.range, predicates
from . import _torch_aliases
from ._torch_aliases import *  # (its range shadows the builtin here, as torch.range does)
from ._torch_aliases import __all__ as _aliases_all

_aliases_all = _aliases_all + _torch_aliases.install(globals())
__all__ += [name for name in _aliases_all if name not in __all__]
from .amp import GradScaler as GradScaler  # torch.GradScaler

__all__ += ["GradScaler", "OutOfMemoryError"]

# MegEngine's name for it
is_cuda_available = cuda.is_available


def ger(input, vec2):
    """PyTorch's deprecated name of :func:`outer`: the outer product of two 1-D tensors."""
    return outer(input, vec2)  # (from _torch_compat)


__all__ += ["ger", "version"]
__all__ += ["amp", "autocast", "cpu"]
__all__ += [
    "clear_autocast_cache",
    "get_autocast_cpu_dtype",
    "get_autocast_dtype",
    "is_autocast_available",
    "is_autocast_cache_enabled",
    "is_autocast_cpu_enabled",
    "is_autocast_enabled",
    "set_autocast_cache_enabled",
    "set_autocast_dtype",
    "set_autocast_enabled",
]

# complex numbers as pairs of real tensors (polar, view_as_complex, view_as_real)
from ._complex import *
from ._complex import __all__ as _complex_all

__all__ += [name for name in _complex_all if name not in __all__]

# MegEngine's module names: functional, module, optimizer, jit
from . import functional as functional
from . import jit as jit
from . import module as module
from . import optimizer as optimizer
from .nn import Parameter as Parameter  # MegEngine's megengine.Parameter

__all__ += ["Parameter", "functional", "jit", "module", "optimizer"]


def _register_einops() -> None:
    # einops' functions take ferrograd tensors when einops is installed (a few ms to import)
    import importlib.util

    if importlib.util.find_spec("einops") is not None:
        from ._einops import register

        register()


_register_einops()
del _register_einops


def _install_lu() -> None:
    from . import _lu

    _lu.install()


_install_lu()
del _install_lu

_torch_keywords.install_empty_dims()
_torch_keywords.install_out()
