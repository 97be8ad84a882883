"""The Synchronizer: one async Ray actor per job that tells explorers when newer trainer weights exist.

It coordinates and never carries the weights itself (see `published_weights`): the trainer publishes
a version (its step; 0 is the base model), explorers wait for a version newer than theirs, and for the
collective method both sides meet in a handshake before broadcasting directly to each other.

Status bookkeeping: one trainer status, one status per explorer *name* (so errors can say which one is
missing); `explorer_status_counts` is derived from those. Every wait is bounded by
`synchronizer.sync_timeout` and ends in a `SyncError` that names the missing peer, its last status and
the seconds waited; a peer found dead ends the wait at once.

Lifetime: the named, detached actor `synchronizer` of the job's Ray namespace is created by whoever
calls `get_actor(config)` first (the launcher's driver, an explorer or the trainer) and exits once
every registered module is gone (see `liveness`). Stale actors: before a newcomer trusts an existing
actor, the actor pings all its modules; if the run it served is over (every module dead) it answers
"stale" and the newcomer kills it and creates a fresh one, so no state of a crashed run is reused.
A live actor whose sync method or job directory differs from the newcomer's is an error, not a join.
"""

import asyncio
import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import ray
from ray.exceptions import RayActorError

from trinity.job_layout import FULL_FLAG, actor_dir
from trinity.manager.checkpoint_shards import (
    ShardError,
    read_shard_index,
    remove_shards,
    shard_world_sizes,
)
from trinity.manager.errors import SyncError
from trinity.manager.group_spec import DEFAULT_BUCKET_BYTES, WeightSyncGroupSpec
from trinity.manager.liveness import Module, ModuleWatch, Role, actor_id_of
from trinity.manager.published_weights import CheckpointWeights, ObjectStoreWeights, state_dict_meta
from trinity.manager.status import SYNCHRONIZER_NAME, RunningStatus

logger = logging.getLogger(__name__)

JOINED, STALE = "joined", "stale"
KEPT_CHECKPOINT_VERSIONS = 2
NEVER_SEEN = "never registered"


@dataclass
class _Peer:
    """Someone a waiter waits for, as an error message names them."""

    label: str  # "trainer" or "explorer 'NAME'"
    state: str  # its last status, or NEVER_SEEN
    dead: bool = False


@dataclass
class _Round:
    """One collective handshake: the trainer and every group explorer must arrive before anyone broadcasts."""

    version: Optional[int] = None
    trainer_arrived: bool = False
    arrived: Set[str] = field(default_factory=set)
    outcome: Optional[str] = None  # "done" (broadcast now) or "skipped" (a side has stopped)
    error: Optional[SyncError] = None


@dataclass
class _Group:
    explorers: List[str]
    pending: Set[str]
    failed: Dict[str, str] = field(default_factory=dict)


def _sync_config_fingerprint(config: Any) -> Dict[str, str]:
    """What two modules must agree on to share one Synchronizer."""
    return {"sync_method": str(config.synchronizer.sync_method), "checkpoint_job_dir": str(config.checkpoint_job_dir)}


class Synchronizer:
    """Weight versions and sync statuses shared by one trainer and one or more explorers."""

    def __init__(self, config: Any, module_ref: Any = None, module_name: Optional[str] = None, module_role=None):
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
        self._round = _Round()
        self._group: Optional[_Group] = None
        self._published_dumps: List[str] = []  # shard directories of recently published checkpoint versions
        self._fingerprint = _sync_config_fingerprint(config)
        self._closing = False
        self._watch = ModuleWatch(self._on_module_gone)
        if module_ref is not None:
            self._register(
                module_ref, module_name or f"module {actor_id_of(module_ref)[:8]}", module_role or Role.OTHER
            )

    # ---- lifetime ----------------------------------------------------------------------------------

    @classmethod
    def get_actor(cls, config: Any = None, namespace: Optional[str] = None):
        """The job's Synchronizer handle. With a config: create it if needed (replacing a stale one) and
        register the caller (an actor, or the calling driver through a guard). Without: look it up."""
        if config is None:
            try:
                return ray.get_actor(SYNCHRONIZER_NAME, namespace=namespace)
            except ValueError:
                raise ValueError(
                    f"no Synchronizer in Ray namespace {namespace!r}; it is created by get_actor(config) "
                    "from the launcher, the explorer or the trainer"
                ) from None
        module, name, role = _calling_module(config)
        fingerprint = _sync_config_fingerprint(config)
        for _ in range(3):
            handle = (
                _remote_class()
                .options(
                    name=SYNCHRONIZER_NAME,
                    namespace=config.ray_namespace,
                    get_if_exists=True,
                    lifetime="detached",
                    num_cpus=0,
                )
                .remote(config, module, name, role)
            )
            try:
                verdict = ray.get(handle.join.remote(module, name, role, fingerprint))
            except RayActorError:
                verdict = STALE  # it exited between lookup and join
            if verdict == JOINED:
                return handle
            logger.warning(
                "Replacing the stale Synchronizer of namespace %r (its run has ended).", config.ray_namespace
            )
            _kill_and_wait(handle, config.ray_namespace)
        raise SyncError(f"could not obtain a live Synchronizer in namespace {config.ray_namespace!r}")

    async def join(self, module_ref: Any, name: str, role: str, fingerprint: Dict[str, str]) -> str:
        """Register a newcomer unless this actor belongs to a run that is over (then answer STALE)."""
        if self._closing:
            return STALE
        await self._watch.check_now(exclude=actor_id_of(module_ref))
        if self._watch.should_exit():
            self._closing = True
            return STALE
        if fingerprint != self._fingerprint:
            differing = ", ".join(f"{k}: running {self._fingerprint[k]!r}, new {fingerprint[k]!r}" for k in fingerprint)
            raise SyncError(
                f"{role} {name!r} cannot join the live Synchronizer of namespace {self.config.ray_namespace!r} "
                f"({differing}); use another name/namespace or stop the running job"
            )
        await self.add_module(module_ref, name, role)
        return JOINED

    async def add_module(self, module_ref: Any, name: Optional[str] = None, role: Optional[str] = None) -> None:
        """Track an actor that keeps this Synchronizer alive (idempotent)."""
        async with self._ready_condition:
            self._register(module_ref, name or f"module {actor_id_of(module_ref)[:8]}", role or Role.OTHER)
            self._ready_condition.notify_all()

    def _register(self, module_ref: Any, name: str, role: str) -> None:
        replaced = self._watch.add(name, role, module_ref)
        if replaced is not None:
            logger.warning("%s %r re-registered from a new actor; its previous state is dropped.", role, name)
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
        steps = sorted(
            (int(p.name.split("_")[-1]) for p in job_dir.glob("global_step_*") if p.name.split("_")[-1].isdigit()),
            reverse=True,
        )
        for step in steps:
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

    # ---- collective method: nccl (gloo on CPU) -----------------------------------------------------

    async def setup_weight_sync_group(
        self,
        master_address: str,
        master_port: int,
        state_dict_meta: Optional[List] = None,
        backend: Optional[str] = None,
        bucket_bytes: Optional[int] = None,
        explorer_names: Optional[List[str]] = None,
    ) -> WeightSyncGroupSpec:
        """Called by trainer rank 0: assign group ranks to the explorers and ask each to join (without waiting
        for them: the group forms only once rank 0 joins too). Returns rank 0's spec."""
        timeout = float(self.config.synchronizer.sync_timeout)
        async with self._ready_condition:
            if explorer_names is None:
                await self._wait_until(
                    lambda: bool(self._watch.alive(Role.EXPLORER)),
                    waiter="the trainer setting up the weight sync group",
                    missing=lambda: [_Peer(f"explorer {self.config.explorer.name!r}", NEVER_SEEN)],
                )
                names = sorted(m.name for m in self._watch.alive(Role.EXPLORER))
            else:
                names = list(explorer_names)
                await self._wait_until(
                    lambda: all(self._explorer_alive(n) for n in names),
                    waiter="the trainer setting up the weight sync group",
                    missing=lambda: [self._explorer_peer(n) for n in names if not self._explorer_alive(n)],
                )
            rollout = self.config.explorer.rollout_model
            ranks = rollout.engine_num * rollout.tensor_parallel_size
            if backend is None:
                backend = "nccl" if str(self.config.cluster.device_type) == "cuda" else "gloo"
            if bucket_bytes is None:
                bucket_bytes = DEFAULT_BUCKET_BYTES[backend]
            spec = WeightSyncGroupSpec(
                master_address=master_address,
                master_port=int(master_port),
                world_size=1 + ranks * len(names),
                rank_offset=0,
                ranks=1,
                backend=backend,
                state_dict_meta=tuple((name, dtype, tuple(shape)) for name, dtype, shape in state_dict_meta or ()),
                bucket_bytes=int(bucket_bytes),
                timeout_s=timeout,
            )
            self._group = _Group(names, pending=set(names))
            for index, name in enumerate(names):
                member = spec.for_member(rank_offset=1 + index * ranks, ranks=ranks)
                ref = self._watch.get(name).handle.setup_weight_sync_group.remote(member)
                asyncio.get_running_loop().create_task(self._follow_group_setup(self._group, name, ref))
        return spec

    async def _follow_group_setup(self, group: _Group, name: str, ref: Any) -> None:
        try:
            await ref
        except Exception as exc:  # any failure of the explorer's join is reported to the trainer by name
            cause = getattr(exc, "cause", None) or exc  # the explorer's own exception inside Ray's wrapper
            group.failed[name] = f"{type(cause).__name__}: {cause}".splitlines()[0]
        async with self._ready_condition:
            group.pending.discard(name)
            self._ready_condition.notify_all()

    def get_weight_sync_group_status(self) -> Dict[str, Any]:
        """Explorers still joining and those whose join failed (with the error), for the trainer's join wait."""
        if self._group is None:
            return {"explorers": [], "pending": [], "failed": {}}
        group = self._group
        return {"explorers": list(group.explorers), "pending": sorted(group.pending), "failed": dict(group.failed)}

    async def ready_to_nccl_sync(
        self, module: str, trainer_step: Optional[int] = None, explorer_name: Optional[str] = None
    ) -> Optional[int]:
        """The handshake before a broadcast. Returns the version to broadcast once the trainer and every group
        explorer have arrived; None when the other side has stopped (no broadcast this time)."""
        async with self._ready_condition:
            if module == "trainer":
                return await self._trainer_handshake(trainer_step)
            if module == "explorer":
                return await self._explorer_handshake(explorer_name or self.config.explorer.name)
        raise ValueError(f"module must be 'trainer' or 'explorer', got {module!r}")

    async def _trainer_handshake(self, step: Optional[int]) -> Optional[int]:
        if self._group is None:
            raise SyncError("the trainer called ready_to_nccl_sync before setup_weight_sync_group")
        if step is None:
            raise ValueError("the trainer's ready_to_nccl_sync needs its trainer_step")
        current = self._round
        current.trainer_arrived, current.version = True, step
        self.trainer_status = RunningStatus.WAITING_SYNC
        self._trainer_seen = True
        self._ready_condition.notify_all()
        return await self._await_round(
            current,
            waiter=f"the trainer (step {step}) in the sync handshake",
            missing=lambda: [self._explorer_peer(n) for n in self._group.explorers if n not in current.arrived],
        )

    async def _explorer_handshake(self, name: str) -> Optional[int]:
        if self._group is not None and name not in self._group.explorers:
            raise SyncError(f"explorer {name!r} is not in the weight sync group ({', '.join(self._group.explorers)})")
        current = self._round
        current.arrived.add(name)
        self._explorer_statuses[name] = RunningStatus.WAITING_SYNC
        self._ready_condition.notify_all()

        def missing() -> List[_Peer]:
            if not current.trainer_arrived:
                return [self._trainer_peer()]
            return [self._explorer_peer(n) for n in self._group.explorers if n not in current.arrived]

        return await self._await_round(
            current, waiter=f"explorer {name!r} in the sync handshake", missing=missing, explorer=name
        )

    async def _await_round(
        self, current: _Round, waiter: str, missing: Callable[[], List[_Peer]], explorer: Optional[str] = None
    ) -> Optional[int]:
        try:
            await self._wait_until(lambda: self._settle(current), waiter=waiter, missing=missing)
        except SyncError as exc:
            if current.error is None and current.outcome is None:
                current.error = exc
                self._close_round(current)
            raise
        if current.error is not None:
            cause = current.error
            raise SyncError(
                f"{waiter}: the round was abandoned because {cause}", cause.peer, cause.state, cause.waited_s
            ) from None
        return current.version if current.outcome == "done" else None

    def _settle(self, current: _Round) -> bool:
        """Decide a round once possible (called by every waiter under the lock); True when decided."""
        if current.outcome is not None or current.error is not None:
            return True
        group = self._group
        if group is not None and current.trainer_arrived and set(group.explorers) <= current.arrived:
            current.outcome = "done"
            self.model_version = current.version
        elif (not current.trainer_arrived and self._trainer_finished()) or (
            group is not None
            and any(
                self._explorer_statuses.get(n) == RunningStatus.STOPPED
                for n in group.explorers
                if n not in current.arrived
            )
        ):
            current.outcome = "skipped"
        else:
            return False
        self._close_round(current)
        return True

    def _close_round(self, current: _Round) -> None:
        if current.trainer_arrived:
            self.trainer_status = RunningStatus.RUNNING
        for name in current.arrived:
            if name in self._explorer_statuses:
                self._explorer_statuses[name] = RunningStatus.RUNNING
        if self._round is current:
            self._round = _Round()
        self._ready_condition.notify_all()

    # ---- waiting -----------------------------------------------------------------------------------

    async def _wait_until(self, done: Callable[[], bool], waiter: str, missing: Callable[[], List[_Peer]]) -> None:
        """Wait (holding the condition) until done(); SyncError at once if a missing peer is dead, or at timeout."""
        timeout = float(self.config.synchronizer.sync_timeout)
        start = time.monotonic()
        while not done():
            waited = time.monotonic() - start
            peers = missing()
            dead = [peer for peer in peers if peer.dead]
            if dead:
                raise _peer_error(waiter, dead, waited, died=True)
            if waited >= timeout:
                raise _peer_error(waiter, peers, waited, died=False)
            try:
                await asyncio.wait_for(self._ready_condition.wait(), timeout - waited)
            except asyncio.TimeoutError:
                pass

    def _trainer_finished(self) -> bool:
        return self._trainer_seen and self.trainer_status == RunningStatus.STOPPED

    def _trainer_peer(self) -> _Peer:
        module = next((m for m in self._watch.modules.values() if m.role == Role.TRAINER), None)
        if self._trainer_seen:
            state = str(self.trainer_status)
        else:
            state = NEVER_SEEN if module is None else "registered, no status reported yet"
        return _Peer("trainer", state, dead=module is not None and not module.alive)

    def _explorer_alive(self, name: str) -> bool:
        module = self._watch.get(name)
        return module is not None and module.alive and module.role == Role.EXPLORER

    def _explorer_peer(self, name: str) -> _Peer:
        module = self._watch.get(name)
        dead = module is not None and not module.alive
        state = self._explorer_statuses.get(name) or self._last_seen.get(name) or NEVER_SEEN
        return _Peer(f"explorer {name!r}", str(state), dead=dead)


def _discard_sync_dump(directory: Path) -> None:
    """Remove the weight shards of a superseded version unless its step is a full checkpoint (bench mode and
    resumed runs load those): sync-only dumps would otherwise fill the disk, one state dict per sync."""
    if not (directory.parent / FULL_FLAG).exists():
        remove_shards(directory)


def _peer_error(waiter: str, peers: List[_Peer], waited: float, died: bool) -> SyncError:
    who = ", ".join(f"{peer.label} (last seen: {peer.state})" for peer in peers) or "nobody"
    if died:
        message = f"{who} died while {waiter}; waited {waited:.1f} s"
    else:
        message = f"{waiter} timed out after {waited:.1f} s (synchronizer.sync_timeout): {who} did not arrive"
    first = peers[0] if peers else _Peer("unknown", "unknown")
    return SyncError(message, peer=first.label, state=first.state, waited_s=round(waited, 3))


# ---- creating and finding the actor --------------------------------------------------------------

_REMOTE_CLASS = None
_DRIVER_GUARDS: Dict[str, Any] = {}


def _remote_class():
    global _REMOTE_CLASS
    if _REMOTE_CLASS is None:
        _REMOTE_CLASS = ray.remote(Synchronizer)
    return _REMOTE_CLASS


class _DriverGuard:
    """Lives as long as the driver that created it (it is not detached); see `liveness`."""


def _calling_module(config: Any) -> Tuple[Any, str, str]:
    """(handle, name, role) of the caller: its own actor, or a guard actor for a driver."""
    context = ray.get_runtime_context()
    if context.get_actor_id() is not None:
        name = context.get_actor_name() or f"actor {context.get_actor_id()[:8]}"
        if name == config.trainer.name:
            role = Role.TRAINER
        elif name == config.explorer.name:
            role = Role.EXPLORER
        else:
            role = Role.OTHER
        return context.current_actor, name, role
    job = context.get_job_id()
    key = f"{context.get_session_name()}/{job}"  # job ids restart in every new cluster
    if key not in _DRIVER_GUARDS:
        _DRIVER_GUARDS[key] = ray.remote(num_cpus=0)(_DriverGuard).remote()
    return _DRIVER_GUARDS[key], f"driver {job}", Role.GUARD


def _kill_and_wait(handle: Any, namespace: str, timeout_s: float = 30.0) -> None:
    """Kill a stale Synchronizer and wait until its name is free (get_if_exists would return it again)."""
    stale_id = actor_id_of(handle)
    ray.kill(handle, no_restart=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if actor_id_of(ray.get_actor(SYNCHRONIZER_NAME, namespace=namespace)) != stale_id:
                return
        except ValueError:
            return
        time.sleep(0.05)
    raise SyncError(f"the stale Synchronizer of namespace {namespace!r} did not go away within {timeout_s:.0f} s")
