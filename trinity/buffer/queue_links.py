"""How a queue client reaches its queue: the job's queue actor, or the queue hosted in the client's own process.

colocate's device hosts its job's queue (`host_queue`, on the event loop that serves it): the explorer and
the trainer it also hosts hand experiences over as objects, with no queue actor (a ~125 MB process of its
own), no encoding and no Ray hop each way per step. Both links call the same `QueueStorage` methods, so
capacity, FIFO or replay, writer counting, end of stream and timeouts are the queue's, wherever it lives.
`link_to` picks: the hosted queue when this process holds one of that name, else the actor.
"""

import asyncio
import concurrent.futures
import copy
from typing import Any, List, Optional, Sequence, Tuple

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from trinity.buffer.errors import BufferStorageError, BufferTimeout
from trinity.buffer.experience import Experience
from trinity.buffer.queue_storage import QueueStorage, get_queue_actor, queue_actor_name, replay_settings
from trinity.config.buffer import ExperienceBufferConfig
from trinity.in_process import running_loop, serve, served

RPC_GRACE_S = 30.0  # extra client-side wait beyond the queue's own timeout, for a dead or stuck holder


def host_queue(buffer: ExperienceBufferConfig) -> QueueStorage:
    """This process's queue for `buffer`, created on the first call and served on the running event loop, under
    the name its queue actor would have."""
    name = queue_actor_name(buffer.name)
    if served(name) is None:
        serve(name, QueueStorage(buffer.name, buffer.capacity, replay_settings(buffer)))
    return served(name)[0]


def link_to(buffer: ExperienceBufferConfig, namespace: Optional[str] = None):
    """The queue this process hosts for `buffer`, else the job's queue actor (in `namespace`)."""
    hosted = served(queue_actor_name(buffer.name))
    return HostedLink(buffer.name, *hosted) if hosted else ActorLink(buffer, namespace)


class ActorLink:
    """The queue actor: experiences travel as `Experience.to_bytes()` (bench/buffer_queue.py measures it
    against pickled objects)."""

    def __init__(self, buffer: ExperienceBufferConfig, namespace: Optional[str]) -> None:
        self.name = buffer.name
        self._actor = get_queue_actor(buffer, namespace)

    def call(self, method: str, *args, timeout: float) -> Any:
        try:
            return ray.get(getattr(self._actor, method).remote(*args), timeout=timeout + RPC_GRACE_S)
        except GetTimeoutError as err:
            raise self._late(timeout) from err
        except RayActorError as err:
            raise BufferStorageError(f"buffer '{self.name}': actor {queue_actor_name(self.name)} died") from err

    async def call_async(self, method: str, *args, timeout: float) -> Any:
        try:
            return await asyncio.wait_for(getattr(self._actor, method).remote(*args), timeout + RPC_GRACE_S)
        except asyncio.TimeoutError as err:
            raise self._late(timeout) from err
        except RayActorError as err:
            raise BufferStorageError(f"buffer '{self.name}': actor {queue_actor_name(self.name)} died") from err

    def _late(self, timeout: float) -> BufferTimeout:
        return _no_answer(self.name, f"actor {queue_actor_name(self.name)}", timeout)

    @staticmethod
    def pack(experiences: Sequence[Experience]) -> List[Tuple[Any, int, int]]:
        return [(e.to_bytes(), e.model_version, int(e.info.get("use_count", 0))) for e in experiences]

    @staticmethod
    def unpack(payload: bytes) -> Experience:
        return Experience.from_bytes(payload)


class HostedLink:
    """The queue hosted in this process: its coroutines run on the loop that serves it. From that loop a
    client must use the async calls (a blocking one would wait on itself); from any other thread both work."""

    def __init__(self, name: str, storage: QueueStorage, loop: asyncio.AbstractEventLoop) -> None:
        self.name, self._storage, self._loop = name, storage, loop

    def call(self, method: str, *args, timeout: float) -> Any:
        function = getattr(self._storage, method)
        if not asyncio.iscoroutinefunction(function):
            return function(*args)
        if running_loop() is self._loop:
            raise RuntimeError(
                f"buffer '{self.name}': a blocking {method} on the event loop that serves the queue would wait "
                "on itself; call it from another thread or use the async call"
            )
        future = asyncio.run_coroutine_threadsafe(function(*args), self._loop)
        try:
            return future.result(timeout + RPC_GRACE_S)
        except concurrent.futures.TimeoutError as err:
            future.cancel()
            raise self._late(timeout) from err

    async def call_async(self, method: str, *args, timeout: float) -> Any:
        function = getattr(self._storage, method)
        if not asyncio.iscoroutinefunction(function):
            return function(*args)
        if running_loop() is self._loop:
            return await function(*args)  # the queue bounds its own waits
        try:
            future = asyncio.run_coroutine_threadsafe(function(*args), self._loop)
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout + RPC_GRACE_S)
        except asyncio.TimeoutError as err:
            raise self._late(timeout) from err

    def _late(self, timeout: float) -> BufferTimeout:
        return _no_answer(self.name, "the queue hosted in this process (its event loop blocked?)", timeout)

    @staticmethod
    def pack(experiences: Sequence[Experience]) -> List[Tuple[Any, int, int]]:
        return [(e, e.model_version, int(e.info.get("use_count", 0))) for e in experiences]

    @staticmethod
    def unpack(payload: Experience) -> Experience:
        """A copy with its own `info`: the reader writes the use count there, and a replay buffer serves the
        stored object again."""
        experience = copy.copy(payload)
        experience.info = dict(payload.info)
        return experience


def _no_answer(name: str, holder: str, timeout: float) -> BufferTimeout:
    return BufferTimeout(f"buffer '{name}': {holder} did not answer within {timeout + RPC_GRACE_S:g} s")
