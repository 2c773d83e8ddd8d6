"""``torch.optim.optimizer``'s public names: the :class:`Optimizer` base class and the
hooks that run around every optimizer's ``step``."""

from . import Optimizer, register_optimizer_step_post_hook, register_optimizer_step_pre_hook

__all__ = ["Optimizer", "register_optimizer_step_post_hook", "register_optimizer_step_pre_hook"]
