"""Writer and reader of the queue buffer (see queue_storage.py for the queue, queue_links.py for where it lives:
the job's queue actor, or colocate's device process, which hosts it beside the explorer and trainer).

The use count lives in the queue and is written into `info["use_count"]` when an experience is read.
Resume: the reader's `state_dict()` is `{"current_index": <experiences read>}`, kept so the trainer's
counters continue, but a queue's contents live in memory: a new job starts with an empty queue.
"""

from typing import Any, Dict, List, Optional, Sequence

from trinity.buffer.base import ExperienceReader, ExperienceWriter
from trinity.buffer.errors import BufferClosed, BufferTimeout
from trinity.buffer.experience import Experience
from trinity.buffer.queue_links import link_to
from trinity.buffer.queue_storage import CLOSED, TIMEOUT
from trinity.config.buffer import ExperienceBufferConfig


class _QueueClient:
    def __init__(self, buffer: ExperienceBufferConfig, namespace: Optional[str] = None) -> None:
        self.name = buffer.name
        self.capacity = buffer.capacity
        self.timeout = float(buffer.max_read_timeout)
        self._link = link_to(buffer, namespace)

    def describe(self) -> Dict[str, Any]:
        """Size, writer count, closed flag and counters (written, served, stale_dropped, evicted, refused, reused)."""
        return self._link.call("describe", timeout=0)


class QueueWriter(_QueueClient, ExperienceWriter):
    """Waits up to `max_read_timeout` for room when the (FIFO) queue is full."""

    def write(self, experiences: Sequence[Experience]) -> None:
        result = self._link.call("put_batch", self._link.pack(experiences), self.timeout, timeout=self.timeout)
        self._check(*result, experiences)

    async def write_async(self, experiences: Sequence[Experience]) -> None:
        result = await self._link.call_async(
            "put_batch", self._link.pack(experiences), self.timeout, timeout=self.timeout
        )
        self._check(*result, experiences)

    def acquire(self) -> None:
        self._link.call("acquire", timeout=0)

    def release(self) -> None:
        self._link.call("release", timeout=0)

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
        return self._decode(*self._link.call("get_batch", size, wait, min_model_version, timeout=wait), size, wait)

    async def read_async(
        self, batch_size: Optional[int] = None, timeout: Optional[float] = None, min_model_version: int = 0
    ) -> List[Experience]:
        size, wait = self._size(batch_size), self.timeout if timeout is None else timeout
        result = await self._link.call_async("get_batch", size, wait, min_model_version, timeout=wait)
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
            experience = self._link.unpack(payload)
            experience.info["use_count"] = use_count
            experiences.append(experience)
        self.current_index += len(experiences)
        return experiences
