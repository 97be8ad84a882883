"""A stand-in trainer or explorer that does not import torch (it starts in a fraction of a second): it registers
with the Synchronizer like the real modules do and calls the Synchronizer from inside its own process."""

from typing import List, Optional

import ray

from trinity.manager import SyncError, Synchronizer


@ray.remote(num_cpus=0, max_concurrency=4)
class Module:
    def __init__(self, config=None, fail_group_setup: Optional[str] = None):
        self.name = ray.get_runtime_context().get_actor_name()
        if config is not None:
            self.connect(config, fail_group_setup)

    def connect(self, config, fail_group_setup: Optional[str] = None) -> None:
        """Join the job of `config` (the process is reused across jobs)."""
        self.sync = Synchronizer.get_actor(
            config if self.name == config.trainer.name else as_explorer(config, self.name)
        )
        self.fail_group_setup = fail_group_setup
        self.group_specs: List = []

    def call(self, method: str, *args, **kwargs):
        return ray.get(getattr(self.sync, method).remote(*args, **kwargs))

    def wait_versions(self, last_version: int) -> List[int]:
        """Explorer loop: wait for every newer version until last_version; the versions seen."""
        seen, version = [], 0
        while version < last_version:
            version = ray.get(self.sync.wait_new_model_state_dict.remote(version, False, self.name))
            seen.append(version)
        return seen

    def handshake(self) -> Optional[int]:
        try:
            return ray.get(self.sync.ready_to_nccl_sync.remote("explorer", None, self.name))
        except SyncError as exc:
            return f"SyncError: {exc}"

    def setup_weight_sync_group(self, spec) -> None:
        if self.fail_group_setup:
            raise RuntimeError(self.fail_group_setup)
        self.group_specs.append(spec)

    def specs(self) -> List:
        return self.group_specs


def start(config, name: str, **kwargs):
    """A new module named `name` in the job's namespace; any name but the trainer's makes it an explorer."""
    module = Module.options(name=name, namespace=config.ray_namespace).remote(config, **kwargs)
    ray.get(module.__ray_ready__.remote())
    return module


def as_explorer(config, name: str):
    """The job as explorer `name` sees it (its own explorer.name)."""
    import copy

    other = copy.deepcopy(config)
    other.explorer.name = name
    return other
