"""colocate mode's one device process: the explorer's rollout engine and the trainer's only rank in one actor.

The job starts it (as an engine, named like the trainer's rank 0) and builds the explorer and the trainer in
it too (`host_role`; the job calls them through `HostedRole`), so a colocated job has one process that
imports torch, not three, and no process boundary between a role and its device. The explorer uses it as
its engine and the trainer makes it its rank (`start_rank`), through its own actor handle, as in mode
both, except that the explorer's tasks call the engine in process (`engine_links`) and both roles share an
experience queue hosted here (`queue_links`), not a queue actor. Generation batches and every rank call
run on the engine's one worker thread, so rollout and training take turns, each with all of the device's
threads, and never interleave inside a batch or an update. A weight sync announces the version
(`InEngineWeights`): no object store, no file, no second process. The engine copies the rank's weights
when the explorer pulls them, at the explorer's own sync points, so a rollout step never mixes versions
and the versions each step rolls out with are those of mode both; a version the rank would change before
the pull (off-policy) is copied aside first, so a synchronous run copies its weights once per sync.

Importing this module loads no torch (the device process does, as it starts): the job imports it and
starts the device first, so the slowest actor to load is not held up by the job's own imports.
"""

import asyncio
import functools
from types import SimpleNamespace
from typing import Any, Callable, Dict, Optional, Tuple

from trinity.config.buffer import StorageType
from trinity.config.root import Config
from trinity.config.topology import colocated_device_name, rank_name_prefix
from trinity.explorer.engine import EngineSpec
from trinity.explorer.engine_actor import EngineActor, start_engines
from trinity.in_process import serve
from trinity.manager.errors import SyncError
from trinity.manager.published_weights import InEngineWeights
from trinity.orchestration.roles import ROLE_METHODS, build_role


def start_colocated_device(config: Config, group: Any) -> Any:
    """Start the job's device process on bundle 0 of its reservation, named as the trainer's rank 0
    (`colocated_device_name`); returns it at once, while it loads (`engine_actor.wait_started`)."""
    prefix = rank_name_prefix(config)
    [device] = start_engines(config, prefix, config.ray_namespace, placement=(group, 0), actor_class=ColocatedDevice)
    return device


class HostedRole:
    """The job's handle to the explorer or trainer built inside the device: `role.prepare.remote()` calls
    that role's `prepare` there, as on a role actor (`roles.ROLE_METHODS`). It is no actor of its own: the
    job removes it by killing the device."""

    def __init__(self, device: Any, role: str):
        self.device, self.role = device, role

    def __getattr__(self, method: str) -> Any:
        if method.startswith("_") or method not in ROLE_METHODS[self.role]:
            raise AttributeError(f"the {self.role} has no method {method!r}")
        return SimpleNamespace(remote=functools.partial(self.device.call_role.remote, self.role, method))


def host_role(device: Any, role: str, config: Config, placement: Tuple[Any, int], **role_args: Any) -> HostedRole:
    """Have the device build `role` ("explorer" or "trainer") once it has loaded; returns the role's handle
    at once (a failed build surfaces at the role's first call). `role_args`: as `roles.build_role`'s."""
    device.host_role.remote(role, config, placement, **role_args)
    return HostedRole(device, role)


# What the trainer controller calls on a rank; each runs on the device's worker thread.
RANK_METHODS = (
    "train_step",
    "reference_logprobs",
    "teacher_logprobs",
    "critic_values",
    "weights_meta",
    "save_checkpoint",
    "load_checkpoint",
    "save_critic",
    "load_critic",
    "shutdown",
)
# of those, the ones after which the rank may no longer hold the weights it last published
CHANGES_WEIGHTS = ("train_step", "load_checkpoint", "shutdown")


class ColocatedDevice(EngineActor):
    def __init__(self, spec: EngineSpec):
        super().__init__(spec)
        self.rank = None  # the FSDPWorker, once the trainer made this its rank (`start_rank`)
        # (weights, version) published and not yet pulled; weights None while the rank still holds them unchanged
        self.staged: Optional[Tuple[Optional[Dict[str, Any]], int]] = None
        self.roles: Dict[str, asyncio.Future] = {}  # "explorer"/"trainer" -> the role object, once built

    def _role(self, role: str) -> asyncio.Future:
        return self.roles.setdefault(role, asyncio.get_running_loop().create_future())

    async def host_role(self, role: str, config: Config, placement: Tuple[Any, int], **role_args: Any) -> None:
        """Build the explorer or the trainer here. Its constructor waits on other actors, so it runs on a
        thread of its own; its failure is kept for the role's first call (`call_role`). First, on this
        actor's event loop, the device offers itself to the roles' in-process calls (`in_process.serve`) and
        hosts a queue experience buffer: both roles' clients find it (`queue_links.link_to`), and the job
        starts no queue actor."""
        from trinity.buffer.queue_links import host_queue

        serve(colocated_device_name(config), self)
        buffer = config.buffer.trainer_input.experience_buffer
        if buffer.storage_type == StorageType.queue:
            host_queue(buffer)
        built = self._role(role)
        try:
            built.set_result(await asyncio.to_thread(build_role, role, config, placement, **role_args))
        except Exception as exc:  # noqa: BLE001 - raised again by every call to the role
            built.set_exception(exc)

    async def call_role(self, role: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """The hosted role's `method`, on this actor's event loop, as the role's own actor would run it."""
        return await getattr(await self._role(role), method)(*args, **kwargs)

    async def start_rank(self, config: Config, master_address: str, master_port: int, total_steps: int) -> None:
        """Become the trainer's rank 0 of 1 (the trainer calls it once it knows how many steps it takes)."""
        from trinity.trainer.fsdp_worker import FSDPWorker

        self.rank = await self._on_device(FSDPWorker, config, 0, 1, master_address, master_port, total_steps)

    async def publish_weights(self, synchronizer: Any, step: int) -> Optional[int]:
        """Announce the rank's weights as version `step` (replacing an unpulled older version). They are copied
        only if the rank changes them before the engine takes them (`_keep_published`): in a synchronous run
        the engine takes them first, straight from the rank."""

        def stage() -> InEngineWeights:
            self.staged = (None, step)
            return InEngineWeights(tuple(self.rank.weights_meta()))

        published = await self._on_device(stage)
        await synchronizer.set_model_state_dict.remote(published, step)
        return step

    async def load_published(self, published: Any, version: int) -> int:
        """The explorer's pull: the engine takes the newest version published here (never an older one)."""
        if not isinstance(published, InEngineWeights):
            return await super().load_published(published, version)

        def take() -> int:  # on the device thread, where the rank's updates run: nothing changes meanwhile
            if self.staged is not None and self.staged[1] >= version:
                state, staged_version = self.staged
                self.staged = None
                self.engine.update_weights(self.rank.full_state_dict() if state is None else state, staged_version)
            return self.engine.model_version

        held = await self._on_device(take)
        if held < version:
            raise SyncError(f"version {version} was announced but the colocated engine holds version {held}")
        return held

    def _keep_published(self, method: Callable, *args: Any) -> Any:
        """Run a rank method that changes its weights, copying a published version the engine has not taken yet."""
        if self.staged is not None and self.staged[0] is None:
            state, version = self.rank.full_state_dict(), self.staged[1]
            self.staged = ({name: tensor.detach().clone() for name, tensor in state.items()}, version)
        return method(*args)

    async def _on_device(self, method: Callable, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._worker, functools.partial(method, *args))


def _rank_method(name: str) -> Callable:
    async def on_device(self: ColocatedDevice, *args: Any) -> Any:
        if name in CHANGES_WEIGHTS:
            return await self._on_device(self._keep_published, getattr(self.rank, name), *args)
        return await self._on_device(getattr(self.rank, name), *args)

    on_device.__name__, on_device.__doc__ = name, f"FSDPWorker.{name}, on the device's worker thread."
    return on_device


for _name in RANK_METHODS:
    setattr(ColocatedDevice, _name, _rank_method(_name))
