"""Which actors keep the Synchronizer alive, and whether each one still lives.

Every registered module (explorer, trainer, or a driver's guard) is watched by one asyncio task that
keeps exactly one ping (`__ray_ready__`, which every Ray actor has) in flight at a time: a ping that
fails with an actor error means the module is dead; a ping that is merely slow means the module is
busy (a sync actor in a long training step answers only afterwards) and counts as alive. Nothing is
cancelled and pings never pile up.

A *guard* is a tiny actor owned by a driver that created the Synchronizer before any explorer or
trainer existed: it keeps the Synchronizer alive while the driver lives and no module has joined yet,
and dies with the driver if the launcher crashes, so no orphan is left behind. Once a real module has
joined, guards no longer count.
"""

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

import ray
from ray.exceptions import RayActorError

logger = logging.getLogger(__name__)

LIVENESS_INTERVAL_S = 0.5  # pause between two pings of one module
JOIN_PING_TIMEOUT_S = 2.0  # how long a join waits for a fresh ping before taking a busy module as alive


class Role:
    TRAINER = "trainer"
    EXPLORER = "explorer"
    GUARD = "guard"
    OTHER = "module"


@dataclass
class Module:
    name: str
    role: str
    handle: Any
    alive: bool = True
    task: Optional[asyncio.Task] = None

    @property
    def actor_id(self) -> str:
        return actor_id_of(self.handle)


def actor_id_of(handle: Any) -> str:
    return handle._actor_id.hex()  # ActorHandle has no public id accessor


class ModuleWatch:
    """Registered modules by name; calls `on_change()` (synchronously, in the event loop) when one dies."""

    def __init__(self, on_change: Callable[[Module], Any]):
        self.modules: Dict[str, Module] = {}
        self._on_change = on_change
        self._had_real_module = False

    def add(self, name: str, role: str, handle: Any) -> Optional[Module]:
        """Register (or re-register) a module; returns the module it replaces under that name, if another actor."""
        current = self.modules.get(name)
        if current is not None and current.actor_id == actor_id_of(handle):
            return None
        if current is not None and current.task is not None:
            current.task.cancel()
        module = Module(name, role, handle)
        self.modules[name] = module
        if role != Role.GUARD:
            self._had_real_module = True
        module.task = asyncio.get_running_loop().create_task(self._watch(module))
        return current

    def get(self, name: str) -> Optional[Module]:
        return self.modules.get(name)

    def alive(self, role: Optional[str] = None) -> List[Module]:
        return [m for m in self.modules.values() if m.alive and (role is None or m.role == role)]

    def should_exit(self) -> bool:
        """True when nothing is left to serve: every real module died (or, before any joined, every guard)."""
        counted = [m for m in self.modules.values() if m.role != Role.GUARD or not self._had_real_module]
        return bool(counted) and not any(m.alive for m in counted)

    async def check_now(self, exclude: Optional[str] = None) -> None:
        """Ping every module (but `exclude`, an actor id) now, before a newcomer trusts this Synchronizer's state."""
        modules = [m for m in self.alive() if m.actor_id != exclude]
        results = await asyncio.gather(*(self._ping(m, JOIN_PING_TIMEOUT_S) for m in modules))
        for module, dead in zip(modules, results, strict=True):
            if dead:
                self._mark_dead(module)

    async def _ping(self, module: Module, timeout: float) -> bool:
        """True when the module is dead; a slow answer means busy, i.e. alive."""
        try:
            await asyncio.wait_for(asyncio.shield(module.handle.__ray_ready__.remote()), timeout)
        except asyncio.TimeoutError:
            return False
        except RayActorError:
            return True
        return False

    async def _watch(self, module: Module) -> None:
        while module.alive:
            try:
                await module.handle.__ray_ready__.remote()
            except RayActorError:
                self._mark_dead(module)
                return
            except ray.exceptions.RayError as exc:  # the ping itself failed for another reason: keep watching
                logger.warning("ping of %s failed: %s", module.name, exc)
            await asyncio.sleep(LIVENESS_INTERVAL_S)

    def _mark_dead(self, module: Module) -> None:
        if not module.alive:
            return
        module.alive = False
        logger.warning("%s %r is gone.", module.role, module.name)
        self._on_change(module)

    def close(self) -> None:
        for module in self.modules.values():
            if module.task is not None:
                module.task.cancel()
