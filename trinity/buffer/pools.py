"""The in-memory orderings a queue buffer keeps: FIFO, or by replay priority with eviction of the lowest.

Payloads are opaque (the serialized experience); the pool only needs each one's model version and use count.
"""

import bisect
import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Deque, List, Optional, Tuple

from trinity.buffer.priority import PriorityFunction


@dataclass
class Entry:
    payload: Any
    model_version: int
    use_count: int = 0


class FifoPool:
    def __init__(self) -> None:
        self._entries: Deque[Entry] = deque()

    def __len__(self) -> int:
        return len(self._entries)

    def push(self, entry: Entry) -> Optional[Entry]:
        """Returns the entry that left the pool because of this push (never, for FIFO)."""
        self._entries.append(entry)
        return None

    def drop_older_than(self, min_model_version: int) -> int:
        if min_model_version <= 0:
            return 0
        kept = deque(e for e in self._entries if e.model_version >= min_model_version)
        dropped = len(self._entries) - len(kept)
        self._entries = kept
        return dropped

    def pop(self, count: int) -> List[Entry]:
        return [self._entries.popleft() for _ in range(count)]


@dataclass(order=True)
class _Ranked:
    key: Tuple[float, int]
    entry: Entry = field(compare=False)


class PriorityPool:
    """Highest priority first, FIFO among equal priorities. When full, the lowest entry makes room,
    unless the newcomer ranks even lower; the priority function may also refuse an entry outright."""

    def __init__(self, capacity: int, priority_fn: PriorityFunction) -> None:
        self.capacity = capacity
        self._priority_fn = priority_fn
        self._ranked: List[_Ranked] = []  # ascending; the last element is served next
        self._order = itertools.count()

    def __len__(self) -> int:
        return len(self._ranked)

    def push(self, entry: Entry) -> Optional[Entry]:
        """Returns the entry that did not stay: the refused or too-low newcomer, or the evicted lowest."""
        priority, keep = self._priority_fn(entry.model_version, entry.use_count)
        if not keep:
            return entry
        ranked = _Ranked((priority, -next(self._order)), entry)
        out = None
        if len(self._ranked) >= self.capacity:
            if priority < self._ranked[0].key[0]:
                return entry
            out = self._ranked.pop(0).entry
        bisect.insort(self._ranked, ranked)
        return out

    def drop_older_than(self, min_model_version: int) -> int:
        if min_model_version <= 0:
            return 0
        kept = [r for r in self._ranked if r.entry.model_version >= min_model_version]
        dropped = len(self._ranked) - len(kept)
        self._ranked = kept
        return dropped

    def pop(self, count: int) -> List[Entry]:
        return [self._ranked.pop().entry for _ in range(count)]
