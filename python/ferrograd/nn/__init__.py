"""Neural-network building blocks: layers (:mod:`.modules`), their functions
(:mod:`.functional`), initialisations (:mod:`.init`) and utilities (:mod:`.utils`)."""

from . import functional, init, utils
from .extra import *
from .extra import __all__ as _extra_all
from .modules import *
from .modules import __all__ as _modules_all
from .more import *
from .more import __all__ as _more_all
from .transformer import *
from .transformer import __all__ as _transformer_all

__all__ = [  # noqa: PLE0604
    "functional",
    "init",
    "utils",
    *_modules_all,
    *_extra_all,
    *_transformer_all,
    *_more_all,
]
