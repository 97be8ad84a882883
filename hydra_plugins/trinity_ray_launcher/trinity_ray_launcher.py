"""The module Hydra scans at every start: only the launcher class and its config node.

The work (and every heavy import) lives in `_core`, which Hydra's scan skips.
"""

from dataclasses import dataclass
from typing import Optional, Sequence

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


@dataclass
class TrinityRayLauncherConf:
    _target_: str = "hydra_plugins.trinity_ray_launcher.trinity_ray_launcher.TrinityRayLauncher"


ConfigStore.instance().store(
    group="hydra/launcher", name="trinity_ray", node=TrinityRayLauncherConf, provider="trinity"
)


class TrinityRayLauncher(Launcher):
    """Validates every trinity job of a batch before any of them starts, then runs them."""

    def __init__(self) -> None:
        self.config: Optional[DictConfig] = None
        self.hydra_context: Optional[HydraContext] = None
        self.task_function: Optional[TaskFunction] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from hydra_plugins.trinity_ray_launcher import _core

        return _core.launch(self, job_overrides, initial_job_idx)
