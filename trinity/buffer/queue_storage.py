"""The queue buffer: a named async Ray actor holding experiences in memory between explorer and trainer.

Capacity counts experiences. In FIFO mode a writer waits for room; with the replay buffer the lowest
priority is evicted instead and served experiences come back after `reuse_cooldown_time`. Writers are
reference counted: when the last one releases, the queue closes and a drained reader gets end of stream
(`acquire` reopens it). Methods return a status instead of raising, so callers raise errors in their
own words and Ray never has to carry exception objects.
"""

import asyncio
from typing import Any, Dict, List, Optional, Tuple

import ray

from trinity.buffer.pools import Entry, FifoPool, PriorityPool
from trinity.buffer.priority import make_priority_fn
from trinity.config.buffer import ExperienceBufferConfig

OK, CLOSED, TIMEOUT = "ok", "closed", "timeout"
ACTOR_START_TIMEOUT_S = 120


class QueueStorage:
    def __init__(self, name: str, capacity: int, replay: Optional[Dict[str, Any]] = None) -> None:
        self.name = name
        self.capacity = capacity
        self.replay = replay
        if replay:
            self._pool = PriorityPool(capacity, make_priority_fn(replay["priority_fn"], replay["priority_fn_args"]))
            self._cooldown = replay["reuse_cooldown_time"]
        else:
            self._pool = FifoPool()
            self._cooldown = None
        self._cond = asyncio.Condition()
        self._writers = 0
        self._closed = False
        self._reuse_tasks: set = set()
        self.stats = {"written": 0, "served": 0, "stale_dropped": 0, "evicted": 0, "refused": 0, "reused": 0}

    def settings(self) -> Dict[str, Any]:
        """What a second client compares against its own config before sharing this queue."""
        return {"capacity": self.capacity, "replay": self.replay}

    def describe(self) -> Dict[str, Any]:
        return {"size": len(self._pool), "writers": self._writers, "closed": self._closed, **self.stats}

    async def acquire(self) -> int:
        async with self._cond:
            self._writers += 1
            self._closed = False
            return self._writers

    async def release(self) -> int:
        async with self._cond:
            self._writers = max(self._writers - 1, 0)
            if self._writers == 0:
                self._closed = True
                for task in self._reuse_tasks:
                    task.cancel()
                self._cond.notify_all()
            return self._writers

    async def put_batch(self, items: List[Tuple[Any, int, int]], timeout: float) -> Tuple[str, int]:
        """items: (payload, model_version, use_count). Returns (status, how many were stored)."""
        deadline = asyncio.get_running_loop().time() + timeout
        written = 0
        async with self._cond:
            for payload, model_version, use_count in items:
                if self._closed:
                    return CLOSED, written
                if isinstance(self._pool, FifoPool) and len(self._pool) >= self.capacity:
                    remaining = deadline - asyncio.get_running_loop().time()
                    try:
                        await asyncio.wait_for(self._cond.wait_for(self._has_room), max(remaining, 0))
                    except asyncio.TimeoutError:
                        return TIMEOUT, written
                    if self._closed:
                        return CLOSED, written
                self._push(Entry(payload, model_version, use_count))
                written += 1
                self.stats["written"] += 1
                self._cond.notify_all()
        return OK, written

    async def get_batch(self, count: int, timeout: float, min_model_version: int = 0) -> Tuple[str, Any]:
        """(ok, [(payload, use_count)]) with `count` items, fewer only once closed; (closed, []) when
        closed and drained; (timeout, how many were available). A timeout consumes nothing."""

        def ready() -> bool:
            self.stats["stale_dropped"] += self._pool.drop_older_than(min_model_version)
            return self._closed or len(self._pool) >= count

        async with self._cond:
            try:
                await asyncio.wait_for(self._cond.wait_for(ready), timeout)
            except asyncio.TimeoutError:
                return TIMEOUT, len(self._pool)
            taken = self._pool.pop(min(count, len(self._pool)))
            if not taken:
                return CLOSED, []
            for entry in taken:
                entry.use_count += 1
                if self._cooldown is not None and not self._closed:
                    task = asyncio.get_running_loop().create_task(self._reuse_later(entry))
                    self._reuse_tasks.add(task)
                    task.add_done_callback(self._reuse_tasks.discard)
            self.stats["served"] += len(taken)
            self._cond.notify_all()
            return OK, [(entry.payload, entry.use_count) for entry in taken]

    def _has_room(self) -> bool:
        return self._closed or len(self._pool) < self.capacity

    def _push(self, entry: Entry) -> bool:
        """False when the pool refused the entry (too low a priority, or retired by the priority function)."""
        out = self._pool.push(entry)
        if out is entry:
            self.stats["refused"] += 1
        elif out is not None:
            self.stats["evicted"] += 1
        return out is not entry

    async def _reuse_later(self, entry: Entry) -> None:
        await asyncio.sleep(self._cooldown)
        async with self._cond:
            if self._closed:
                return
            if self._push(entry):
                self.stats["reused"] += 1
                self._cond.notify_all()


def queue_actor_name(name: str) -> str:
    return f"queue-{name}"


def replay_settings(buffer: ExperienceBufferConfig) -> Optional[Dict[str, Any]]:
    replay = buffer.replay_buffer
    if not replay.enable:
        return None
    return {
        "priority_fn": str(replay.priority_fn),
        "priority_fn_args": dict(replay.priority_fn_args),
        "reuse_cooldown_time": replay.reuse_cooldown_time,
    }


def start_queue_actor(buffer: ExperienceBufferConfig, namespace: Optional[str] = None):
    """The buffer's queue actor, submitted (created unless it exists): its process starts while the caller
    goes on. The job starts it beside its other actors; `get_queue_actor` waits for it."""
    options = {
        "name": queue_actor_name(buffer.name),
        "get_if_exists": True,
        "lifetime": "detached",
        "num_cpus": 0,
        "max_concurrency": 1000,
    }
    if namespace:
        options["namespace"] = namespace
    return ray.remote(QueueStorage).options(**options).remote(buffer.name, buffer.capacity, replay_settings(buffer))


def get_queue_actor(buffer: ExperienceBufferConfig, namespace: Optional[str] = None):
    """The job's queue actor, created on first use. It is detached, so it does not die with whichever
    client happened to create it; the job ends it with `destroy_queue`. A second client with other
    settings is an error, not a silent share."""
    name = buffer.name
    actor = start_queue_actor(buffer, namespace)
    try:
        existing = ray.get(actor.settings.remote(), timeout=ACTOR_START_TIMEOUT_S)
    except ray.exceptions.GetTimeoutError as err:
        raise TimeoutError(
            f"buffer '{name}': queue actor {queue_actor_name(name)} did not start in {ACTOR_START_TIMEOUT_S} s"
        ) from err
    wanted = {"capacity": buffer.capacity, "replay": replay_settings(buffer)}
    if existing != wanted:
        raise ValueError(
            f"buffer '{name}': queue actor {queue_actor_name(name)} already exists with {existing}, "
            f"but this client was configured with {wanted}"
        )
    return actor


def destroy_queue(name: str, namespace: Optional[str] = None) -> bool:
    """End the job's queue actor (its contents are lost); False when there was none."""
    try:
        actor = ray.get_actor(queue_actor_name(name), namespace=namespace)
    except ValueError:
        return False
    ray.kill(actor)
    return True
