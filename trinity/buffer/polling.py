"""Waiting for data another process appends (file tail, SQL table): short sleeps growing to a cap, never spinning."""

import time
from typing import Callable, Optional, TypeVar

T = TypeVar("T")

FIRST_WAIT_S = 0.02
MAX_WAIT_S = 0.5


def poll_until(attempt: Callable[[], Optional[T]], timeout: float) -> Optional[T]:
    """Call `attempt` until it returns something other than None or `timeout` seconds pass (then None).
    It is always tried at least once, and once more at the deadline."""
    deadline = time.monotonic() + timeout
    wait = FIRST_WAIT_S
    while True:
        result = attempt()
        if result is not None:
            return result
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(wait, left))
        wait = min(wait * 2, MAX_WAIT_S)
