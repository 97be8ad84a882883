"""The module Hydra scans at every start: only the launcher class and its config node.

The work (and every heavy import) lives in `_core`, which Hydra's scan skips.
"""

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

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
        self.composed: Dict[Tuple[str, ...], DictConfig] = {}  # job overrides -> config the sweeper composed
        self.compose_job: Optional[Callable[[DictConfig, List[str]], DictConfig]] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        """Also keeps what Hydra's sweeper composes to check that each job of a batch composes (and then drops):
        `launch` takes it instead of composing the job again (~0.2 s a job, before anything starts)."""
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function
        loader = hydra_context.config_loader
        self.compose_job = compose = loader.load_sweep_config

        def keeping(master_config: DictConfig, sweep_overrides: List[str]) -> DictConfig:
            composed = compose(master_config, sweep_overrides)
            if master_config is config:
                self.composed[tuple(sweep_overrides)] = composed
            return composed

        loader.load_sweep_config = keeping

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from hydra_plugins.trinity_ray_launcher import _core

        return _core.launch(self, job_overrides, initial_job_idx)
