"""One run per job directory: an OS lock on `<dir>/.trinity.lock`, held open for the whole run.

Two runs writing one job directory would overwrite each other's checkpoints and interleave their
metrics, so a run takes this lock before it starts anything and a second run refuses with an error
naming the first (pid, host, start time, and the Ray driver behind it when the holder is a Ray task).

The lock is `fcntl.flock` on a file descriptor the run keeps open: the kernel releases it when the
process exits however it exits, kill -9 included, so a crashed run never leaves it stuck. The file's
contents (who holds it, as JSON) are only for the message; the lock itself is the flock. Never delete
the file by hand: a run that opens a new file of the same name would not see the old lock.

A Ray task whose driver was killed may live on for a few seconds before Ray reaps it, still holding
the lock; a run that finds the lock held by such an orphan (its recorded driver or holder process is
gone on this host) waits up to `ORPHAN_GRACE_S` for it to let go instead of refusing at once.

Limits, honestly: flock is reliable on a local filesystem. On NFS, Linux clients emulate flock with
whole-file POSIX locks that the server arbitrates, so runs on two hosts exclude each other too, but
a crashed client's lock lasts until the server's lease expires (about 90 s with NFSv4), and a mount
with `nolock` or `local_lock=flock|all` makes the lock local to each host: two hosts can then both
run. The orphan check only works for a holder on this host. A filesystem that refuses flock entirely
gets a warning in the log and the run proceeds unprotected.
"""

import datetime
import fcntl
import json
import logging
import os
import socket
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, Optional, Union

logger = logging.getLogger(__name__)

LOCK_FILE = ".trinity.lock"
ORPHAN_GRACE_S = 30.0  # how long a run waits for a dead run's leftover process to release the lock
TRANSIENT_S = 2.0  # how long a run retries a lock a read-only check may be holding for a moment

_HELD: Dict[str, list] = {}  # lock path -> [fd, thread id, depth]: nested takes in one thread are one take
_HELD_GUARD = threading.Lock()


class JobLockedError(RuntimeError):
    """Another run holds the job directory; the message names it and what to do."""


@dataclass(frozen=True)
class Holder:
    """Who holds a job directory's lock, as its file records it (fields are None when unrecorded)."""

    pid: Optional[int] = None
    host: Optional[str] = None
    started: Optional[str] = None
    driver_pid: Optional[int] = None
    driver_command: Optional[str] = None

    def describe(self) -> str:
        if self.pid is None:
            return "another run (it has not recorded its pid yet)"
        text = f"pid {self.pid} on host {self.host}"
        if self.driver_pid is not None:
            command = self.driver_command or "?"
            command = command if len(command) <= 100 else command[:99] + "…"
            text = f"pid {self.driver_pid} ({command}), through its Ray task pid {self.pid} on host {self.host}"
        return text + (f", running since {self.started}" if self.started else "")

    def orphaned(self) -> bool:
        """The recorded holder or its driver has exited on this host: what holds the lock is a leftover."""
        if self.host != socket.gethostname() or self.pid is None:
            return False
        return not _alive(self.pid) or (self.driver_pid is not None and not _alive(self.driver_pid))


def lock_path(directory: Union[str, Path]) -> Path:
    return Path(directory) / LOCK_FILE


def lock_holder(directory: Union[str, Path]) -> Optional[Holder]:
    """Who holds the directory's lock, or None when nobody does. Read-only: creates nothing, takes nothing
    for longer than the check (a shared lock, at once released)."""
    try:
        fd = os.open(lock_path(directory), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd)
        except OSError:
            return None  # a filesystem without flock: nothing can be known (see the module docstring)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def check_free(directory: Union[str, Path], grace_s: float = ORPHAN_GRACE_S) -> None:
    """Raise JobLockedError when another run holds the directory; a dead run's leftover gets `grace_s`."""
    holder = lock_holder(directory)
    deadline = time.monotonic() + grace_s
    if holder is not None and holder.orphaned():
        logger.warning("The run that held %s has exited; waiting up to %g s for it to let go.", directory, grace_s)
    while holder is not None and holder.orphaned() and time.monotonic() < deadline:
        time.sleep(0.2)
        holder = lock_holder(directory)
    if holder is not None:
        raise JobLockedError(refusal(directory, holder))


@contextmanager
def job_lock(directory: Union[str, Path], grace_s: float = ORPHAN_GRACE_S) -> Iterator[None]:
    """Hold the directory's lock for the block (creating the directory); JobLockedError when another run
    holds it. Taking it again in the same thread (the stage runner, then the job runner) is a no-op."""
    path = lock_path(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    key = os.path.realpath(path)
    with _HELD_GUARD:
        held = _HELD.get(key)
        if held is not None and held[1] == threading.get_ident():
            held[2] += 1
            nested = True
        else:
            nested = False
    if nested:
        try:
            yield
        finally:
            with _HELD_GUARD:
                _HELD[key][2] -= 1
        return
    fd = _acquire(path, grace_s)
    with _HELD_GUARD:
        _HELD[key] = [fd, threading.get_ident(), 1]
    try:
        yield
    finally:
        with _HELD_GUARD:
            del _HELD[key]
        _release(fd)


def refusal(directory: Union[str, Path], holder: Holder) -> str:
    return (
        f"job directory {directory} is in use by another run: {holder.describe()}.\n"
        "Two runs in one job directory would overwrite each other's checkpoints and interleave their "
        "metrics. Wait for that run to finish (or stop it), or give this run another name (name=...). "
        f"The lock ({lock_path(directory)}) is released when that process exits, even if it is killed."
    )


def _acquire(path: Path, grace_s: float) -> Optional[int]:
    """The open, exclusively locked fd (None on a filesystem without flock), with this run recorded."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    started, warned = time.monotonic(), False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            holder = _read_holder(fd)
        except OSError as exc:
            os.close(fd)
            logger.warning(
                "Cannot lock %s (%s): this filesystem does not support flock, so a second run in this job "
                "directory is NOT prevented.",
                path,
                exc.strerror or exc,
            )
            return None
        orphaned = holder.orphaned()
        if orphaned and not warned:
            logger.warning("The run that held %s has exited; waiting up to %g s for it to let go.", path, grace_s)
            warned = True
        if time.monotonic() - started >= (grace_s if orphaned else TRANSIENT_S):
            os.close(fd)
            raise JobLockedError(refusal(path.parent, holder))
        time.sleep(0.1)
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(_this_run()) + "\n").encode(), 0)
    os.fsync(fd)
    return fd


def _release(fd: Optional[int]) -> None:
    if fd is None:
        return
    try:
        os.ftruncate(fd, 0)  # the record of a finished run never names it as the holder of a later lock
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _read_holder(fd: int) -> Holder:
    try:
        record = json.loads(os.pread(fd, 65536, 0).decode() or "{}")
    except (ValueError, OSError):
        record = {}
    if not isinstance(record, dict):
        record = {}
    fields = ("pid", "host", "started", "driver_pid", "driver_command")
    return Holder(**{name: record.get(name) for name in fields})


def _this_run() -> dict:
    record = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    driver = _ray_driver()
    if driver is not None and driver[0] != os.getpid():
        record["driver_pid"], record["driver_command"] = driver
    return record


def _ray_driver() -> Optional[tuple]:
    """(pid, command) of the Ray driver whose task this process runs, when it runs one (best effort:
    the message is more useful with the `python -m trinity` pid than with a Ray worker's)."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    try:
        from ray._private.state import jobs

        job_id = ray.get_runtime_context().get_job_id()
        for job in jobs():
            if job.get("JobID") == job_id and job.get("DriverPid"):
                return int(job["DriverPid"]), str(job.get("Entrypoint") or "")[:300]
    except Exception as exc:  # noqa: BLE001 - the record is complete without the driver
        logger.debug("could not look up the Ray driver: %s", exc)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    return True
