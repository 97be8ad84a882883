"""The explorer and trainer as Ray actors that a process can start without importing them.

`ray.remote(Explorer)` needs the class, and importing it loads torch: ~1 CPU-second and ~190 MB in the
job's process, held for the whole run, and taken from the actors loading beside it on a small machine.
`ExplorerRole` and `TrainerRole` name their role's class by module path (`ROLE_CLASSES`) and build it in
their own process (`build_role`); each method of theirs is the role's method of that name (`ROLE_METHODS`;
a test keeps the lists equal to the classes' public methods). A handle to one unpickles without torch too,
so the Synchronizer, which keeps the roles' handles, stays small whichever it calls. colocate builds both
roles inside its device process instead (`colocated.HostedRole`).
"""

import importlib
from typing import Any, Callable, Dict, Optional, Tuple

ROLE_METHODS = {
    "explorer": (
        "is_alive",
        "progress",
        "process_ids",
        "final_metrics",
        "prepare",
        "explore",
        "explore_step",
        "evaluate",
        "benchmark",
        "sync_weight",
        "setup_weight_sync_group",
        "shutdown",
    ),
    "trainer": (
        "is_alive",
        "progress",
        "process_ids",
        "final_metrics",
        "prepare",
        "train",
        "train_step",
        "sync_weight",
        "save_checkpoint",
        "shutdown",
    ),
}
ROLE_CLASSES = {"explorer": "trinity.explorer.explorer:Explorer", "trainer": "trinity.trainer.trainer:Trainer"}


def build_role(role: str, config: Any, placement: Optional[Tuple[Any, int]] = None, **role_args: Any) -> Any:
    """The role's object (an Explorer or a Trainer), built in the calling process; `role_args` go to its
    constructor (the explorer's `train_table`)."""
    module, name = ROLE_CLASSES[role].split(":")
    return getattr(importlib.import_module(module), name)(config, placement, **role_args)


class _Role:
    """An actor holding one role object; `ROLE` names which."""

    ROLE = ""

    def __init__(self, config: Any, placement: Optional[Tuple[Any, int]] = None, **role_args: Any):
        self.role = build_role(self.ROLE, config, placement, **role_args)


class ExplorerRole(_Role):
    ROLE = "explorer"


class TrainerRole(_Role):
    ROLE = "trainer"


ROLE_ACTORS: Dict[str, type] = {"explorer": ExplorerRole, "trainer": TrainerRole}


def _forwarded(name: str) -> Callable:
    async def method(self: _Role, *args: Any, **kwargs: Any) -> Any:
        return await getattr(self.role, name)(*args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"The role's own `{name}`."
    return method


for _role, _methods in ROLE_METHODS.items():
    for _name in _methods:
        setattr(ROLE_ACTORS[_role], _name, _forwarded(_name))
