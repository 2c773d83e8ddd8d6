"""Neural-network building blocks: layers (:mod:`.modules`), their functions
(:mod:`.functional`), initialisations (:mod:`.init`) and utilities (:mod:`.utils`)."""

from . import functional, init, utils
from .modules import *
from .modules import __all__ as _modules_all

__all__ = ["functional", "init", "utils", *_modules_all]  # noqa: PLE0604
