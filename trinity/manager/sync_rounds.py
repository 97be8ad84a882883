"""The collective (nccl; gloo on CPU) half of the Synchronizer: forming the broadcast group of trainer
rank 0 and every explorer engine, and the handshake round before each broadcast, which happens only
once the trainer and every group explorer have arrived."""

import asyncio
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set

from trinity.manager.errors import SyncError
from trinity.manager.group_spec import DEFAULT_BUCKET_BYTES, WeightSyncGroupSpec
from trinity.manager.liveness import Role
from trinity.manager.status import RunningStatus
from trinity.manager.sync_waits import NEVER_SEEN, Peer, PeerWaits


@dataclass
class Round:
    """One collective handshake: the trainer and every group explorer must arrive before anyone broadcasts."""

    version: Optional[int] = None
    trainer_arrived: bool = False
    arrived: Set[str] = field(default_factory=set)
    outcome: Optional[str] = None  # "done" (broadcast now) or "skipped" (a side has stopped)
    error: Optional[SyncError] = None


@dataclass
class Group:
    explorers: List[str]
    pending: Set[str]
    failed: Dict[str, str] = field(default_factory=dict)


class CollectiveRounds(PeerWaits):
    """A mixin of the Synchronizer actor (it holds the lock, statuses and module watch these read)."""

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
                    missing=lambda: [Peer(f"explorer {self.config.explorer.name!r}", NEVER_SEEN)],
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
            self._group = Group(names, pending=set(names))
            for index, name in enumerate(names):
                member = spec.for_member(rank_offset=1 + index * ranks, ranks=ranks)
                asyncio.get_running_loop().create_task(self._follow_group_setup(self._group, name, member))
        return spec

    async def _follow_group_setup(self, group: Group, name: str, member: WeightSyncGroupSpec) -> None:
        try:
            # Deserializing the handle imports the Explorer class (and torch) into this process: only the
            # collective method ever needs to.
            await self._watch.get(name).actor_handle().setup_weight_sync_group.remote(member)
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

        def missing() -> List[Peer]:
            if not current.trainer_arrived:
                return [self._trainer_peer()]
            return [self._explorer_peer(n) for n in self._group.explorers if n not in current.arrived]

        return await self._await_round(
            current, waiter=f"explorer {name!r} in the sync handshake", missing=missing, explorer=name
        )

    async def _await_round(
        self, current: Round, waiter: str, missing: Callable[[], List[Peer]], explorer: Optional[str] = None
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

    def _settle(self, current: Round) -> bool:
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

    def _close_round(self, current: Round) -> None:
        if current.trainer_arrived:
            self.trainer_status = RunningStatus.RUNNING
        for name in current.arrived:
            if name in self._explorer_statuses:
                self._explorer_statuses[name] = RunningStatus.RUNNING
        if self._round is current:
            self._round = Round()
        self._ready_condition.notify_all()
