"""Mend the torn last line a JSONL writer killed mid-write leaves behind.

Without this, the next append is glued onto the torn bytes and the reader later stops at that line
("line N is corrupt"). Every writer appends under an exclusive `flock`, so whoever holds the lock and
still finds a last line without its newline knows that line's writer is dead: a tail that parses as
a JSON object only lost its newline and gets one back; anything else is cut off at the last complete
line, loudly, naming the file, the byte offset and the bytes dropped.
"""

import fcntl
import json
import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)

CHUNK = 1 << 16


def mend_tail(fd: int, path: Path, owner: str) -> None:
    """Mend the tail of the file open as `fd` (writable; the caller holds its exclusive flock)."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    start = _last_line_start(fd, size)
    tail = os.pread(fd, size - start, start)
    if _is_json_object(tail):
        os.lseek(fd, 0, os.SEEK_END)
        os.write(fd, b"\n")
        logger.warning(
            "%s: the last line of %s (from byte %d) had no newline, though complete; added one", owner, path, start
        )
        return
    os.ftruncate(fd, start)
    os.fsync(fd)
    logger.warning(
        "%s: %s ended in a torn line (a writer died mid-write): truncated at byte offset %d, dropping %d bytes; "
        "every complete line before it is kept",
        owner,
        path,
        start,
        size - start,
    )


def mend_tail_if_idle(path: Path, owner: str) -> None:
    """Mend `path` unless a writer holds its lock right now (then the tail is a line being written)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return
    except PermissionError:
        logger.info("%s: %s is read-only here; its last line is not checked for tears", owner, path)
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        mend_tail(fd, path, owner)
    finally:
        os.close(fd)  # closing releases the lock


def _last_line_start(fd: int, size: int) -> int:
    """The offset just after the last newline (0 when there is none), read backwards in chunks."""
    end = size
    while end > 0:
        begin = max(0, end - CHUNK)
        found = os.pread(fd, end - begin, begin).rfind(b"\n")
        if found >= 0:
            return begin + found + 1
        end = begin
    return 0


def _is_json_object(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data), dict)
    except ValueError:  # includes UnicodeDecodeError
        return False
