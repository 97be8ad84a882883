"""The driver owns the console: what a job running in a Ray task prints reaches the user without Ray's
`(_run_remote pid=…)` prefix, and its progress bar is drawn by the driver.

Job side (`relayed`): the job runs in a thread of its Ray task, a generator task; whatever that thread
writes to stdout/stderr (its log lines, prints) and its progress (`progress_view`) become events the
task yields to the driver as they happen, and the job's result is the last event. Other threads of the
task (Ray's own) write as before. A cancelled task interrupts the job thread, so the job still cleans up.
Driver side (`drive`): waits on every job's generator, prints their lines and draws one progress bar per
running job (`progress.ProgressBar`), and returns each job's result.
Run outside a relay (a test, another launcher), `progress_view` draws the bar in the job's own process.
"""

import ctypes
import io
import queue
import sys
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from trinity.reporting.progress import ProgressBar

Event = Tuple[str, Any]  # ("out" | "err", line), ("progress", (name, {role: progress})), ("alive", None), ("result", x)
POLL_S = 0.5  # how often the task checks for a cancellation while the job runs
HEARTBEAT_S = 5.0  # a relaying task says it is alive at least this often, so the driver can tell a frozen one
SILENCE_S = 120.0  # the driver's bound on a task that sends nothing (frozen, or its node unreachable)
JOIN_GRACE_S = 60.0  # how long an interrupted job may take to clean up

_events: Optional["queue.SimpleQueue[Event]"] = None  # set while this process's job is relayed


class _RelayedProgress:
    def __init__(self, name: str):
        self.name = name

    def update(self, progress: Dict[str, Dict[str, float]]) -> None:
        _events.put(("progress", (self.name, progress)))

    def close(self) -> None:
        pass


def progress_view(name: str):
    """The job's progress bar: drawn by the driver when relayed, else here."""
    return _RelayedProgress(name) if _events is not None else ProgressBar(name)


class _JobStream(io.TextIOBase):
    """stdout/stderr for the job thread: its complete lines become events; other threads write through."""

    def __init__(self, original, kind: str, events: "queue.SimpleQueue[Event]", thread_id: Callable[[], int]):
        self.original, self.kind, self.events, self.thread_id = original, kind, events, thread_id
        self.pending = ""

    def write(self, text: str) -> int:
        if threading.get_ident() != self.thread_id():
            return self.original.write(text)
        lines = (self.pending + text).split("\n")
        self.pending = lines.pop()
        for line in lines:
            self.events.put((self.kind, line.split("\r")[-1]))
        return len(text)

    def flush(self) -> None:
        if threading.get_ident() != self.thread_id():
            self.original.flush()

    def finish(self) -> None:
        if self.pending:
            self.events.put((self.kind, self.pending))
            self.pending = ""

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.original.fileno()


def relayed(run: Callable[[], Any]) -> Iterator[Event]:
    """Run `run()` in a thread and yield its output and progress as events, then ("result", its value)."""
    global _events
    events: queue.SimpleQueue[Event] = queue.SimpleQueue()
    outcome: Dict[str, Any] = {}
    thread = threading.Thread(target=_capture, args=(run, outcome, events), name="trinity-job", daemon=True)
    streams = [
        _JobStream(sys.stdout, "out", events, lambda: thread.ident),
        _JobStream(sys.stderr, "err", events, lambda: thread.ident),
    ]
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = streams
    _events = events
    try:
        thread.start()
        sent = time.monotonic()
        while True:
            try:
                event = events.get(timeout=POLL_S)
            except queue.Empty:
                if time.monotonic() - sent >= HEARTBEAT_S:
                    sent = time.monotonic()
                    yield ("alive", None)
                continue
            if event[0] == "done":
                break
            sent = time.monotonic()
            yield event
        for stream in streams:
            stream.finish()
        while not events.empty():
            yield events.get()
    except BaseException:  # cancelled (or the driver went away): stop the job, let it clean up
        _interrupt(thread)
        thread.join(JOIN_GRACE_S)
        raise
    finally:
        sys.stdout, sys.stderr = saved
        _events = None
    if "error" in outcome:
        raise outcome["error"]
    yield ("result", outcome["value"])


def _capture(run: Callable[[], Any], outcome: Dict[str, Any], events: "queue.SimpleQueue[Event]") -> None:
    try:
        outcome["value"] = run()
    except BaseException as exc:  # noqa: BLE001 - handed to the relaying generator, which raises it
        outcome["error"] = exc
    finally:
        events.put(("done", None))


def _interrupt(thread: threading.Thread) -> None:
    """Raise KeyboardInterrupt in the job thread (what Ray's cancel does to a task's own thread)."""
    if thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(KeyboardInterrupt))


class JobSilent(RuntimeError):
    """A job's Ray task sent nothing, not even its heartbeat, for longer than the driver waits."""


def drive(
    generators: List[Any], names: Optional[List[str]] = None, wait_s: float = 1.0, silence_s: float = SILENCE_S
) -> List[Any]:
    """Driver: follow every job's generator to its end; print lines, draw bars; return the results in order.
    A job's failure is raised as soon as its generator reports it; a job whose task sends nothing for
    `silence_s` (it relays a heartbeat every HEARTBEAT_S) is raised as JobSilent, naming it."""
    import ray

    results: List[Any] = [None] * len(generators)
    bars: Dict[int, ProgressBar] = {}
    pending = dict(enumerate(generators))
    heard = {index: time.monotonic() for index in pending}
    try:
        while pending:
            ready, _ = ray.wait(list(pending.values()), num_returns=1, timeout=wait_s)
            _check_silence(heard, pending, silence_s, names or [f"job {i}" for i in range(len(generators))])
            for generator in ready:
                index = next(i for i, g in pending.items() if g is generator)
                heard[index] = time.monotonic()
                try:
                    kind, payload = ray.get(next(generator))
                except StopIteration:
                    del pending[index]
                    _close(bars, index)
                    continue
                if kind == "alive":
                    continue
                if kind == "result":
                    results[index] = payload
                    _close(bars, index)
                elif kind == "progress":
                    name, progress = payload
                    if index in bars and bars[index].name != name:  # the next stage of the job
                        _close(bars, index)
                    bars.setdefault(index, ProgressBar(name)).update(progress)
                else:
                    _print(kind, payload, bars)
    finally:
        for index in list(bars):
            _close(bars, index)
    return results


def _check_silence(heard: Dict[int, float], pending: Dict[int, Any], silence_s: float, names: List[str]) -> None:
    now = time.monotonic()
    silent = [names[index] for index in sorted(pending) if now - heard[index] > silence_s]
    if silent:
        raise JobSilent(
            f"{', '.join(silent)} sent nothing for {silence_s:g} s, not even the heartbeat their Ray task relays every "
            f"{HEARTBEAT_S:g} s: the task's process is frozen or its node unreachable"
        )


def _close(bars: Dict[int, ProgressBar], index: int) -> None:
    bar = bars.pop(index, None)
    if bar is not None:
        bar.close()


def _print(kind: str, line: str, bars: Dict[int, ProgressBar]) -> None:
    stream = sys.stdout if kind == "out" else sys.stderr
    live = [bar.bar for bar in bars.values() if bar.bar is not None]
    if live:
        from tqdm import tqdm

        tqdm.write(line, file=stream)
    else:
        print(line, file=stream, flush=True)
