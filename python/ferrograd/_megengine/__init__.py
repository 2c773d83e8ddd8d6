"""Implementations behind the MegEngine spellings (``ferrograd.functional``,
``ferrograd.module``, ``ferrograd.optimizer``): MegEngine 1.x argument names, defaults and
conventions written over the package's own ops. Private; import the public namespaces."""
