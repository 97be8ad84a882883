"""Which actors keep the Synchronizer alive, and whether each one still lives.

Every registered module (explorer, trainer, or a driver's guard) is known by its actor id and watched
by one asyncio task that reads its state from Ray's actor table (GCS) every LIVENESS_INTERVAL_S: DEAD
(or gone from the table) means the module is dead; a busy module is ALIVE however long its current
call takes. The Synchronizer keeps the modules' handles pickled: deserializing an actor handle makes
Ray import the actor's class, which would load the explorer's and trainer's torch stack into this small
coordinating process (about 350 MB and 2.5 CPU-seconds per job); only the collective method calls an
explorer and unpickles its handle.

A *guard* is an actor owned by a driver (or a job's task) that created the Synchronizer before any
explorer or trainer existed: a tiny one made for the purpose, or one the caller owns anyway (a job's
StateManager). It keeps the Synchronizer alive while its owner lives and no module has joined yet, and
dies with its owner if the launcher crashes, so no orphan is left behind. Once a real module has
joined, guards no longer count.
"""

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

import ray

logger = logging.getLogger(__name__)

LIVENESS_INTERVAL_S = 0.5  # pause between two reads of one module's state


class Role:
    TRAINER = "trainer"
    EXPLORER = "explorer"
    GUARD = "guard"
    OTHER = "module"


@dataclass
class Module:
    """A registered actor. Liveness needs only `actor_id`; the collective method calls the explorer, through
    `handle`, which a module that joins by itself sends pickled (deserialized only on that first call)."""

    name: str
    role: str
    actor_id: str  # hex
    handle: Any = None
    pickled_handle: Optional[bytes] = None
    alive: bool = True
    task: Optional[asyncio.Task] = None

    def actor_handle(self) -> Any:
        if self.handle is None:
            self.handle = ray.cloudpickle.loads(self.pickled_handle)
        return self.handle


def actor_id_of(handle: Any) -> str:
    return handle._actor_id.hex()  # ActorHandle has no public id accessor


async def is_dead(actor_id: str) -> bool:
    """Whether Ray's actor table records this actor as dead (or no longer knows it)."""
    from ray._private.state import state  # the actor table without the dashboard's state API

    info = await asyncio.to_thread(state.actor_table, actor_id)
    return info.get("State", "DEAD") == "DEAD"


class ModuleWatch:
    """Registered modules by name; calls `on_change()` (synchronously, in the event loop) when one dies."""

    def __init__(self, on_change: Callable[[Module], Any]):
        self.modules: Dict[str, Module] = {}
        self._on_change = on_change
        self._had_real_module = False

    def add(self, module: Module) -> Optional[Module]:
        """Register (or re-register) a module; returns the module it replaces under that name, if another actor."""
        current = self.modules.get(module.name)
        if current is not None and current.actor_id == module.actor_id:
            return None
        if current is not None and current.task is not None:
            current.task.cancel()
        self.modules[module.name] = module
        if module.role != Role.GUARD:
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
        """Read every module's state (but `exclude`'s, an actor id) now, before a newcomer trusts this
        Synchronizer's state."""
        modules = [m for m in self.alive() if m.actor_id != exclude]
        results = await asyncio.gather(*(is_dead(m.actor_id) for m in modules))
        for module, dead in zip(modules, results, strict=True):
            if dead:
                self._mark_dead(module)

    async def _watch(self, module: Module) -> None:
        while module.alive:
            try:
                if await is_dead(module.actor_id):
                    self._mark_dead(module)
                    return
            except Exception as exc:  # the table could not be read this time (GCS busy): keep watching
                logger.warning("reading the state of %s failed: %s", module.name, exc)
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
