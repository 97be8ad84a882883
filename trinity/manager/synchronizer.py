"""The Synchronizer: one async Ray actor per job that tells explorers when newer trainer weights exist.

It coordinates and never carries the weights itself (see `published_weights`): the trainer publishes
a version (its step; 0 is the base model), explorers wait for a version newer than theirs, and for the
collective method both sides meet in a handshake before broadcasting directly to each other.

Status bookkeeping: one trainer status, one status per explorer *name* (so errors can say which one is
missing); `explorer_status_counts` is derived from those. Every wait is bounded by
`synchronizer.sync_timeout` and ends in a `SyncError` that names the missing peer, its last status and
the seconds waited; a peer found dead ends the wait at once.

Lifetime: the named, detached actor `synchronizer` of the job's Ray namespace is created by whoever
calls `get_actor(config)` first (the job runner, before the StateManager actor, the trainer and the
explorer; a trainer or explorer started on its own creates it too) and exits once
every registered module is gone (see `liveness`). Stale actors: before a newcomer trusts an existing
actor, the actor checks all its modules; if the run it served is over (every module dead) it answers
"stale" and the newcomer kills it and creates a fresh one, so no state of a crashed run is reused.
A live actor whose sync method or job directory differs from the newcomer's is an error, not a join.
Creating and finding it: `sync_lookup`; the collective handshake: `sync_rounds`; bounded waits:
`sync_waits` (mixins of this class, so the actor is one object with one lock).
"""

import asyncio
import logging
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import ray
from ray.exceptions import RayActorError

from trinity.job_layout import FULL_FLAG, actor_dir, steps_on_disk
from trinity.manager.checkpoint_shards import (
    ShardError,
    read_shard_index,
    remove_shards,
    shard_world_sizes,
)
from trinity.manager.errors import SyncError
from trinity.manager.liveness import Module, ModuleWatch, Role, actor_id_of
from trinity.manager.published_weights import CheckpointWeights, ObjectStoreWeights, state_dict_meta
from trinity.manager.status import SYNCHRONIZER_NAME, RunningStatus
from trinity.manager.sync_lookup import calling_module, kill_and_wait, remote_class
from trinity.manager.sync_rounds import CollectiveRounds, Group, Round
from trinity.manager.sync_waits import NEVER_SEEN

logger = logging.getLogger(__name__)

JOINED, STALE = "joined", "stale"
KEPT_CHECKPOINT_VERSIONS = 2


def _sync_config_fingerprint(config: Any) -> Dict[str, str]:
    """What two modules must agree on to share one Synchronizer."""
    return {"sync_method": str(config.synchronizer.sync_method), "checkpoint_job_dir": str(config.checkpoint_job_dir)}


def _handle_module(handle: Any, name: Optional[str] = None, role: Optional[str] = None) -> Module:
    actor_id = actor_id_of(handle)
    return Module(name or f"module {actor_id[:8]}", role or Role.OTHER, actor_id, handle=handle)


class Synchronizer(CollectiveRounds):
    """Weight versions and sync statuses shared by one trainer and one or more explorers."""

    def __init__(self, config: Any, module_ref: Any = None):
        self.config = config
        self.trainer_status = RunningStatus.STOPPED
        self._explorer_statuses: Dict[str, RunningStatus] = {}
        self._ready_condition = asyncio.Condition()
        self.model_state_dict: Any = None
        self.model_version = 0
        self.checkpoint_shard_counter: Dict[int, int] = defaultdict(int)
        self._trainer_seen = False  # has the trainer reported a status yet (registration alone does not count)
        self._last_seen: Dict[str, str] = {}  # explorer name -> status when it left
        self._no_new_model_epoch = 0
        self._round = Round()
        self._group: Optional[Group] = None
        self._published_dumps: List[str] = []  # shard directories of recently published checkpoint versions
        self._fingerprint = _sync_config_fingerprint(config)
        self._closing = False
        self._watch = ModuleWatch(self._on_module_gone)
        if module_ref is not None:
            self._register(_handle_module(module_ref))

    # ---- lifetime ----------------------------------------------------------------------------------

    @classmethod
    def get_actor(
        cls, config: Any = None, namespace: Optional[str] = None, guard: Any = None, module_name: Optional[str] = None
    ):
        """The job's Synchronizer handle. With a config: create it if needed (replacing a stale one) and
        register the caller (an actor, under `module_name` or its actor's name; or the calling driver through
        a guard: `guard`, an actor that lives exactly as long as the caller, or else a new one). Without:
        look it up. An explorer or trainer registers under its own name, which also holds when it runs inside
        another actor (colocate's device process)."""
        if config is None:
            try:
                return ray.get_actor(SYNCHRONIZER_NAME, namespace=namespace)
            except ValueError:
                raise ValueError(
                    f"no Synchronizer in Ray namespace {namespace!r}; it is created by get_actor(config) "
                    "from the job runner, the explorer or the trainer"
                ) from None
        module = calling_module(config, guard, module_name)
        fingerprint = _sync_config_fingerprint(config)
        for _ in range(3):
            handle = (
                remote_class(cls)
                .options(
                    name=SYNCHRONIZER_NAME,
                    namespace=config.ray_namespace,
                    get_if_exists=True,
                    lifetime="detached",
                    num_cpus=0,
                )
                .remote(config)
            )
            try:
                verdict = ray.get(handle.join.remote(module, fingerprint))
            except RayActorError:
                verdict = STALE  # it exited between lookup and join
            if verdict == JOINED:
                return handle
            logger.warning(
                "Replacing the stale Synchronizer of namespace %r (its run has ended).", config.ray_namespace
            )
            kill_and_wait(handle, config.ray_namespace)
        raise SyncError(f"could not obtain a live Synchronizer in namespace {config.ray_namespace!r}")

    async def join(self, module: Module, fingerprint: Dict[str, str]) -> str:
        """Register a newcomer unless this actor belongs to a run that is over (then answer STALE). The
        newcomer comes as a `Module` (id, name, namespace), not a handle: see `liveness`."""
        if self._closing:
            return STALE
        await self._watch.check_now(exclude=module.actor_id)
        if self._watch.should_exit():
            self._closing = True
            return STALE
        if fingerprint != self._fingerprint:
            differing = ", ".join(f"{k}: running {self._fingerprint[k]!r}, new {fingerprint[k]!r}" for k in fingerprint)
            raise SyncError(
                f"{module.role} {module.name!r} cannot join the live Synchronizer of namespace "
                f"{self.config.ray_namespace!r} ({differing}); use another name/namespace or stop the running job"
            )
        async with self._ready_condition:
            self._register(module)
            self._ready_condition.notify_all()
        return JOINED

    async def add_module(self, module_ref: Any, name: Optional[str] = None, role: Optional[str] = None) -> None:
        """Track an actor (by its handle) that keeps this Synchronizer alive (idempotent)."""
        async with self._ready_condition:
            self._register(_handle_module(module_ref, name, role))
            self._ready_condition.notify_all()

    def _register(self, module: Module) -> None:
        replaced = self._watch.add(module)
        if replaced is not None:
            logger.warning(
                "%s %r re-registered from a new actor; its previous state is dropped.", module.role, module.name
            )
            self._forget(replaced)

    def _forget(self, module: Module) -> None:
        """Drop the sync state of a module that is gone or was replaced."""
        if module.role == Role.TRAINER:
            self.trainer_status = RunningStatus.STOPPED
            self._trainer_seen = False
        elif module.role == Role.EXPLORER and module.name in self._explorer_statuses:
            self._last_seen[module.name] = str(self._explorer_statuses.pop(module.name))

    def _on_module_gone(self, module: Module) -> None:
        asyncio.get_running_loop().create_task(self._module_gone(module))

    async def _module_gone(self, module: Module) -> None:
        async with self._ready_condition:
            if module.role == Role.EXPLORER and module.name in self._explorer_statuses:
                self._last_seen[module.name] = str(self._explorer_statuses.pop(module.name))
            self._ready_condition.notify_all()
        if self._watch.should_exit() and not self._closing:
            self._closing = True
            logger.info("Every module of namespace %r is gone; Synchronizer stopped.", self.config.ray_namespace)
            self._watch.close()
            ray.kill(ray.get_runtime_context().current_actor, no_restart=True)

    # ---- statuses ----------------------------------------------------------------------------------

    @property
    def explorer_status_counts(self) -> Dict[RunningStatus, int]:
        counts = {status: 0 for status in RunningStatus}
        for status in self._explorer_statuses.values():
            counts[status] += 1
        return counts

    async def set_trainer_status(self, status: RunningStatus) -> None:
        status = RunningStatus(status)
        if status == RunningStatus.STOPPED:
            await self._adopt_published_weights()
        async with self._ready_condition:
            self.trainer_status = status
            self._trainer_seen = True
            self._ready_condition.notify_all()

    def get_trainer_status(self) -> RunningStatus:
        return self.trainer_status

    def trainer_finished(self) -> bool:
        """The trainer has run and stopped (not merely not started yet): it reads and publishes nothing more, so
        an explorer waiting on it would wait for a peer that is done, not frozen."""
        return self._trainer_finished()

    def trainer_requires_sync(self) -> bool:
        return self.trainer_status in (RunningStatus.REQUIRE_SYNC, RunningStatus.WAITING_SYNC)

    async def set_explorer_status(
        self, status: RunningStatus, old_status: Optional[RunningStatus] = None, explorer_name: Optional[str] = None
    ) -> None:
        """Set one explorer's status; with `old_status`, only if it is currently in that status."""
        name = explorer_name or self.config.explorer.name
        async with self._ready_condition:
            current = self._explorer_statuses.get(name)
            if old_status is not None and current != RunningStatus(old_status):
                raise ValueError(f"explorer {name!r} is {current or NEVER_SEEN}, not {RunningStatus(old_status)}")
            self._explorer_statuses[name] = RunningStatus(status)
            self._ready_condition.notify_all()

    def get_explorer_status_counts(self) -> Dict[RunningStatus, int]:
        return self.explorer_status_counts

    def get_explorer_statuses(self) -> Dict[str, RunningStatus]:
        return dict(self._explorer_statuses)

    def explorer_requires_sync(self) -> bool:
        counts = self.explorer_status_counts
        return counts[RunningStatus.REQUIRE_SYNC] + counts[RunningStatus.WAITING_SYNC] > 0

    # ---- weights -----------------------------------------------------------------------------------

    async def set_model_state_dict(self, model_state_dict: Any, trainer_step: int) -> None:
        """Publish version `trainer_step`; `model_state_dict` is a descriptor from `weight_sync` (or a dict)."""
        async with self._ready_condition:
            if trainer_step < self.model_version:
                logger.warning(
                    "Version goes back from %d to %d (a resumed trainer?).", self.model_version, trainer_step
                )
            self.model_state_dict = model_state_dict
            self.model_version = trainer_step
            self._ready_condition.notify_all()

    def get_model_state_dict(self) -> Tuple[Any, int]:
        return self.model_state_dict, self.model_version

    async def get_state_dict_meta(self) -> Optional[List[Tuple[str, str, Tuple[int, ...]]]]:
        return state_dict_meta(self.model_state_dict)

    async def get_latest_model_version(self) -> int:
        return self.model_version

    async def set_model_state_dict_with_step_num(
        self, step_num: Optional[int] = None, world_size: Optional[int] = None
    ) -> int:
        """Checkpoint method: rank r reports its shard of step N; the last of `world_size` reports publishes N.
        Without `world_size` it publishes step N (or, with no step, the latest complete one) at once."""
        if world_size is not None:
            if step_num is None:
                raise ValueError("world_size needs a step_num")
            count = self.checkpoint_shard_counter[step_num] + 1
            self.checkpoint_shard_counter[step_num] = count
            logger.info("Step %d: %d of %d weight shards written.", step_num, count, world_size)
            if count < world_size:
                return step_num
            del self.checkpoint_shard_counter[step_num]
        if step_num is None:
            step_num = await asyncio.to_thread(self._latest_complete_step)
        directory = self._actor_dir(step_num)
        if step_num != self.model_version or self.model_state_dict is None:
            version_before = self.model_version
            try:
                index = await asyncio.to_thread(read_shard_index, directory, world_size)
            except ShardError as exc:
                raise SyncError(f"weights of step {step_num} cannot be published: {exc}") from None
            if version_before != self.model_version and self.model_version > step_num:
                return step_num  # a newer step was published while this one was being checked
            await self.set_model_state_dict(CheckpointWeights(str(directory), index.world_size, index.meta), step_num)
            await self._retire_checkpoint_dumps(str(directory))
        return step_num

    async def _retire_checkpoint_dumps(self, newest: str) -> None:
        """Keep the shards of the last KEPT_CHECKPOINT_VERSIONS published versions (an explorer may still be
        opening the previous one); older sync-only dumps are deleted, full checkpoints are kept."""
        if newest in self._published_dumps:
            self._published_dumps.remove(newest)
        self._published_dumps.append(newest)
        while len(self._published_dumps) > KEPT_CHECKPOINT_VERSIONS:
            await asyncio.to_thread(_discard_sync_dump, Path(self._published_dumps.pop(0)))

    def _actor_dir(self, step: int) -> Path:
        return actor_dir(self.config.checkpoint_job_dir, step)

    def _latest_complete_step(self) -> int:
        job_dir = Path(self.config.checkpoint_job_dir)
        for step in reversed(steps_on_disk(job_dir)):
            if len(shard_world_sizes(self._actor_dir(step))) == 1:
                try:
                    read_shard_index(self._actor_dir(step))
                    return step
                except ShardError:
                    continue
        raise FileNotFoundError(f"no global_step_N/actor with a complete set of weight shards under {job_dir}")

    async def _adopt_published_weights(self) -> None:
        """Before the trainer stops, take ownership of the weights it put in the object store: an object dies
        with its owner, and explorers may pull the last version after the trainer has exited."""
        published = self.model_state_dict
        if isinstance(published, ObjectStoreWeights) and published.owner != "synchronizer":
            try:
                packed = await published.ref
            except ray.exceptions.RayError as exc:  # already lost (the caller is not the trainer that owned it)
                logger.warning("The weights of version %d are lost: %s", self.model_version, exc)
                return
            adopted = ObjectStoreWeights(ray.put(packed), published.meta, "synchronizer")
            async with self._ready_condition:
                if self.model_state_dict is published:
                    self.model_state_dict = adopted

    # ---- pull methods: memory and checkpoint -------------------------------------------------------

    async def wait_new_model_state_dict(
        self, current_version: int, no_wait: bool = False, explorer_name: Optional[str] = None
    ) -> int:
        """Return the latest version once it is newer than `current_version` (or at once with `no_wait`).
        Also returns, possibly unchanged, when the trainer has stopped or said it has nothing new."""
        name = explorer_name or self.config.explorer.name
        async with self._ready_condition:
            self._explorer_statuses[name] = RunningStatus.REQUIRE_SYNC
            self._ready_condition.notify_all()
            try:
                if self.model_version <= current_version and not no_wait:
                    epoch = self._no_new_model_epoch
                    self._explorer_statuses[name] = RunningStatus.WAITING_SYNC
                    await self._wait_until(
                        lambda: (
                            self.model_version > current_version
                            or self._no_new_model_epoch != epoch
                            or self._trainer_finished()
                        ),
                        waiter=f"explorer {name!r} (at version {current_version}) waiting for newer weights",
                        missing=lambda: [self._trainer_peer()],
                    )
            finally:
                if name in self._explorer_statuses:
                    self._explorer_statuses[name] = RunningStatus.RUNNING
                self._ready_condition.notify_all()
            return self.model_version

    async def notify_no_new_model_state_dict(self) -> None:
        """Trainer (explorer-driven style): nothing new yet; release waiting explorers."""
        async with self._ready_condition:
            self._no_new_model_epoch += 1
            self._ready_condition.notify_all()


def _discard_sync_dump(directory: Path) -> None:
    """Remove the weight shards of a superseded version unless its step is a full checkpoint (bench mode and
    resumed runs load those): sync-only dumps would otherwise fill the disk, one state dict per sync."""
    if not (directory.parent / FULL_FLAG).exists():
        remove_shards(directory)
