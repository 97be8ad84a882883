"""The threads task attempts run on: started on demand, kept once idle, never waited for.

A workflow is blocking user code, so every running attempt has a thread of its own. Starting a thread per
attempt delayed a 16-task step's engine batch by ~2 ms on this 2-core machine (3.7 ms from the run's start
to the batch's start with reused threads, 6.0 ms with new ones); a thread that finished its attempt takes
the next one instead. An attempt the runner gave up on (past its deadline) keeps its thread until the
workflow returns, and the next attempts start new threads, so a stuck workflow never holds up others. The
threads are daemons: a workflow that never returns does not keep the process from exiting.
"""

import queue
import threading
from typing import Callable


class TaskThreads:
    def __init__(self) -> None:
        self._idle: queue.SimpleQueue[queue.SimpleQueue] = queue.SimpleQueue()  # inboxes of idle threads
        self._started = 0

    @property
    def started(self) -> int:
        """Threads started so far (the most attempts that ever ran at once, stuck ones included)."""
        return self._started

    def run(self, attempt: Callable[[], Callable[[], None]], label: str) -> None:
        """Run `attempt` on an idle thread, or on a new one when none is idle; the thread is named `label`
        meanwhile. `attempt` must not raise; it returns what hands its outcome over, which runs once the thread
        is idle again, so whoever sees the outcome and starts the next attempt finds this thread free."""
        try:
            inbox = self._idle.get_nowait()
        except queue.Empty:
            inbox = queue.SimpleQueue()
            self._started += 1
            threading.Thread(target=self._serve, args=(inbox,), name=label, daemon=True).start()
        inbox.put((attempt, label))

    def _serve(self, inbox: "queue.SimpleQueue") -> None:
        thread = threading.current_thread()
        while True:
            attempt, thread.name = inbox.get()
            hand_over = attempt()
            thread.name = "task-idle"
            self._idle.put(inbox)
            hand_over()
