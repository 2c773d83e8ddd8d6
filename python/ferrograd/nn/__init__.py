"""Neural-network building blocks: layers (:mod:`.modules`), their functions
(:mod:`.functional`), initialisations (:mod:`.init`) and utilities (:mod:`.utils`)."""

from . import functional, grad, init, parallel, parameter, utils  # noqa: F401
from ._ctc import CTCLoss
from .adaptive import AdaptiveLogSoftmaxWithLoss
from .extra import *
from .extra import __all__ as _extra_all
from .linear_ce import LinearCrossEntropyLoss, LinearCrossEntropyOptions, linear_cross_entropy
from .modules import *
from .modules import __all__ as _modules_all
from .more import *
from .more import __all__ as _more_all
from .transformer import *
from .transformer import __all__ as _transformer_all
from .volumetric import *
from .volumetric import __all__ as _volumetric_all

__all__ = [  # noqa: PLE0604
    "functional",
    "grad",
    "init",
    "parallel",
    "utils",
    "CTCLoss",
    "AdaptiveLogSoftmaxWithLoss",
    "LinearCrossEntropyLoss",
    "LinearCrossEntropyOptions",
    *_modules_all,
    *_extra_all,
    *_transformer_all,
    *_more_all,
    *_volumetric_all,
]

# F.linear_cross_entropy (defined with its module, which is built on F.linear and
# F.cross_entropy)
functional.linear_cross_entropy = linear_cross_entropy
functional.__all__.append("linear_cross_entropy")


def _legacy_loss_arguments() -> None:
    """Loss modules take PyTorch's deprecated ``size_average=`` / ``reduce=`` too."""
    import functools

    from .functional import _legacy_reduction
    from .modules import _Loss

    def wrap(init: object) -> object:
        @functools.wraps(init)
        def __init__(self, *args, size_average=None, reduce=None, **kwargs):
            if size_average is not None or reduce is not None:
                kwargs["reduction"] = _legacy_reduction(size_average, reduce)
            init(self, *args, **kwargs)

        return __init__

    for name in __all__:
        cls = globals().get(name)
        if isinstance(cls, type) and issubclass(cls, _Loss) and "__init__" in cls.__dict__:
            cls.__init__ = wrap(cls.__dict__["__init__"])
    if "__init__" in _Loss.__dict__:
        _Loss.__init__ = wrap(_Loss.__dict__["__init__"])


_legacy_loss_arguments()


def _install_reprs() -> None:
    from ._reprs import install

    install()


_install_reprs()


def _install_module_paths() -> None:
    from ._module_paths import install

    install()


_install_module_paths()
