"""Writer and reader of the queue buffer (see queue_storage.py for the actor).

Experiences travel as `Experience.to_bytes()` (bench/buffer_queue.py measures it against pickled objects).
The use count lives in the actor and is written into `info["use_count"]` when an experience is read.
Resume: the reader's `state_dict()` is `{"current_index": <experiences read>}`, kept so the trainer's
counters continue, but a queue's contents live in memory: a new job starts with an empty queue.
"""

import asyncio
from typing import Any, Dict, List, Optional, Sequence

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from trinity.buffer.base import ExperienceReader, ExperienceWriter
from trinity.buffer.errors import BufferClosed, BufferStorageError, BufferTimeout
from trinity.buffer.experience import Experience
from trinity.buffer.queue_storage import CLOSED, TIMEOUT, get_queue_actor, queue_actor_name
from trinity.config.buffer import ExperienceBufferConfig

RPC_GRACE_S = 30.0  # extra client-side wait beyond the actor's own timeout, for a dead or stuck actor


class _QueueClient:
    def __init__(self, buffer: ExperienceBufferConfig, namespace: Optional[str] = None) -> None:
        self.name = buffer.name
        self.capacity = buffer.capacity
        self.timeout = float(buffer.max_read_timeout)
        self._actor = get_queue_actor(buffer, namespace)

    def _call(self, method: str, *args, timeout: float):
        try:
            return ray.get(getattr(self._actor, method).remote(*args), timeout=timeout + RPC_GRACE_S)
        except GetTimeoutError as err:
            raise BufferTimeout(
                f"buffer '{self.name}': actor {queue_actor_name(self.name)} did not answer "
                f"within {timeout + RPC_GRACE_S:g} s"
            ) from err
        except RayActorError as err:
            raise BufferStorageError(f"buffer '{self.name}': actor {queue_actor_name(self.name)} died") from err

    async def _call_async(self, method: str, *args, timeout: float):
        try:
            return await asyncio.wait_for(getattr(self._actor, method).remote(*args), timeout + RPC_GRACE_S)
        except asyncio.TimeoutError as err:
            raise BufferTimeout(
                f"buffer '{self.name}': actor {queue_actor_name(self.name)} did not answer "
                f"within {timeout + RPC_GRACE_S:g} s"
            ) from err
        except RayActorError as err:
            raise BufferStorageError(f"buffer '{self.name}': actor {queue_actor_name(self.name)} died") from err

    def describe(self) -> Dict[str, Any]:
        """Size, writer count, closed flag and counters (written, served, stale_dropped, evicted, refused, reused)."""
        return self._call("describe", timeout=0)


class QueueWriter(_QueueClient, ExperienceWriter):
    """Waits up to `max_read_timeout` for room when the (FIFO) queue is full."""

    def write(self, experiences: Sequence[Experience]) -> None:
        self._check(*self._call("put_batch", _encode(experiences), self.timeout, timeout=self.timeout), experiences)

    async def write_async(self, experiences: Sequence[Experience]) -> None:
        result = await self._call_async("put_batch", _encode(experiences), self.timeout, timeout=self.timeout)
        self._check(*result, experiences)

    def acquire(self) -> None:
        self._call("acquire", timeout=0)

    def release(self) -> None:
        self._call("release", timeout=0)

    def _check(self, status: str, written: int, experiences: Sequence[Experience]) -> None:
        if status == TIMEOUT:
            raise BufferTimeout(
                f"buffer '{self.name}' is full: wrote {written} of {len(experiences)} experiences in "
                f"{self.timeout:g} s; is the trainer reading it?"
            )
        if status == CLOSED:
            raise BufferClosed(
                f"buffer '{self.name}' is closed (its last writer released it); wrote {written} of "
                f"{len(experiences)} experiences. Call acquire() before writing."
            )


class QueueReader(_QueueClient, ExperienceReader):
    def __init__(
        self, buffer: ExperienceBufferConfig, batch_size: Optional[int] = None, namespace: Optional[str] = None
    ) -> None:
        super().__init__(buffer, namespace)
        self.batch_size = batch_size
        self.current_index = 0

    def read(
        self, batch_size: Optional[int] = None, timeout: Optional[float] = None, min_model_version: int = 0
    ) -> List[Experience]:
        size, wait = self._size(batch_size), self.timeout if timeout is None else timeout
        return self._decode(*self._call("get_batch", size, wait, min_model_version, timeout=wait), size, wait)

    async def read_async(
        self, batch_size: Optional[int] = None, timeout: Optional[float] = None, min_model_version: int = 0
    ) -> List[Experience]:
        size, wait = self._size(batch_size), self.timeout if timeout is None else timeout
        result = await self._call_async("get_batch", size, wait, min_model_version, timeout=wait)
        return self._decode(*result, size, wait)

    def state_dict(self) -> dict:
        return {"current_index": self.current_index}

    def load_state_dict(self, state: dict) -> None:
        self.current_index = int(state.get("current_index", 0))

    def _size(self, batch_size: Optional[int]) -> int:
        size = super()._size(batch_size)
        if size > self.capacity:
            raise ValueError(
                f"buffer '{self.name}': a batch of {size} can never fill a queue of capacity {self.capacity}"
            )
        return size

    def _decode(self, status: str, result: Any, size: int, wait: float) -> List[Experience]:
        if status == TIMEOUT:
            raise BufferTimeout(
                f"buffer '{self.name}': {result} of {size} experiences arrived within {wait:g} s; "
                "is the explorer writing to it?"
            )
        if status == CLOSED:
            raise BufferClosed(f"buffer '{self.name}' is closed and drained: its last writer released it")
        experiences = []
        for payload, use_count in result:
            experience = Experience.from_bytes(payload)
            experience.info["use_count"] = use_count
            experiences.append(experience)
        self.current_index += len(experiences)
        return experiences


def _encode(experiences: Sequence[Experience]) -> list:
    return [(e.to_bytes(), e.model_version, int(e.info.get("use_count", 0))) for e in experiences]
