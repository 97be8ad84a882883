"""What every experience writer and reader offers, so explorer and trainer code does not care about the storage.

Readers keep a cursor: `state_dict()` is saved by the trainer (StateManager `sample_strategy_state`) and
`load_state_dict()` puts a fresh reader where the old one stopped. Each storage documents how exact that is.
"""

import asyncio
from typing import Iterator, List, Optional, Sequence

from trinity.buffer.errors import BufferExhausted
from trinity.buffer.experience import Experience


class ExperienceWriter:
    """Appends experiences to a buffer. `acquire`/`release` count writers where the storage can close."""

    name: str

    def write(self, experiences: Sequence[Experience]) -> None:
        raise NotImplementedError

    async def write_async(self, experiences: Sequence[Experience]) -> None:
        await asyncio.to_thread(self.write, experiences)

    def keep_first(self, rows: int) -> int:
        """Drop every row after the first `rows` (a resumed explorer's committed count: the rest belong to a
        step it will explore again); returns how many were dropped. A queue's rows die with its run: 0."""
        return 0

    def acquire(self) -> None:
        """Register as a writer (queue: keeps it open). File and SQL storages have no end of stream."""

    def release(self) -> None:
        """Unregister; on a queue the last release closes it."""

    def close(self) -> None:
        """Free local resources (file handles, connections); does not release."""


class ExperienceReader:
    """Hands out batches of experiences in order and can say where it stands."""

    name: str
    batch_size: Optional[int] = None

    def read(
        self, batch_size: Optional[int] = None, timeout: Optional[float] = None, min_model_version: int = 0
    ) -> List[Experience]:
        """Exactly `batch_size` experiences (default: the reader's), or raise BufferTimeout / BufferExhausted.

        Only at the end of a queue's stream can a batch be shorter."""
        raise NotImplementedError

    async def read_async(
        self, batch_size: Optional[int] = None, timeout: Optional[float] = None, min_model_version: int = 0
    ) -> List[Experience]:
        return await asyncio.to_thread(self.read, batch_size, timeout, min_model_version)

    def state_dict(self) -> dict:
        raise NotImplementedError

    def load_state_dict(self, state: dict) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Free local resources."""

    def __iter__(self) -> Iterator[List[Experience]]:
        while True:
            try:
                yield self.read()
            except BufferExhausted:
                return

    def _size(self, batch_size: Optional[int]) -> int:
        size = self.batch_size if batch_size is None else batch_size
        if size is None or size < 1:
            raise ValueError(f"buffer '{self.name}': batch_size must be a positive int, got {size!r}")
        return size
