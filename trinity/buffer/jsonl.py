"""The file buffer: one `Experience.to_dict()` JSON object per line, appended by any number of writers.

Writers append whole batches under an exclusive `flock`, so lines from several processes never
interleave; a torn last line left by a writer killed mid-write is mended first (see jsonl_tail.py),
by every writer before it appends and by a reader when it opens the file. The reader tails the file,
using only complete lines. Its cursor,
`{"current_index": <lines passed>, "byte_offset": <where the next line starts>}`, resumes exactly;
a state holding only `current_index` (the reference format) is resumed by counting lines. A file has
no end of stream: a read that finds too few lines raises BufferTimeout.
"""

import fcntl
import json
import os
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from trinity.buffer.base import ExperienceReader, ExperienceWriter
from trinity.buffer.errors import BufferStorageError, BufferTimeout
from trinity.buffer.experience import Experience
from trinity.buffer.jsonl_tail import mend_tail, mend_tail_if_idle
from trinity.buffer.polling import poll_until
from trinity.config.buffer import ExperienceBufferConfig

SUFFIXES = (".jsonl", ".json")


def _path(buffer: ExperienceBufferConfig) -> Path:
    if not buffer.path or not buffer.path.endswith(SUFFIXES):
        raise ValueError(f"buffer '{buffer.name}': a file buffer needs a .jsonl or .json path, got {buffer.path!r}")
    return Path(buffer.path).expanduser()


class JsonlWriter(ExperienceWriter):
    def __init__(self, buffer: ExperienceBufferConfig) -> None:
        self.name = buffer.name
        self.path = _path(buffer)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: Optional[int] = None

    def write(self, experiences: Sequence[Experience]) -> None:
        data = "".join(json.dumps(e.to_dict()) + "\n" for e in experiences).encode()
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)  # read: to mend a tail
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            mend_tail(self._fd, self.path, f"buffer '{self.name}'")
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def keep_first(self, rows: int) -> int:
        if not self.path.exists():
            return 0
        fd = os.open(self.path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            mend_tail(fd, self.path, f"buffer '{self.name}'")
            offset, lines = _offset_of_line(fd, rows)
            if lines <= rows:
                return 0
            os.ftruncate(fd, offset)
            os.fsync(fd)
            return lines - rows
        finally:
            os.close(fd)  # closing releases the lock

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _offset_of_line(fd: int, line: int, chunk: int = 1 << 20) -> Tuple[int, int]:
    """(byte offset where line `line` (0-based) starts, or the file's size; total complete lines)."""
    os.lseek(fd, 0, os.SEEK_SET)
    position, lines, offset = 0, 0, (0 if line == 0 else None)
    while True:
        data = os.read(fd, chunk)
        if not data:
            return (position if offset is None else offset), lines
        start = 0
        while True:
            newline = data.find(b"\n", start)
            if newline < 0:
                break
            lines += 1
            if lines == line and offset is None:
                offset = position + newline + 1
            start = newline + 1
        position += len(data)


class JsonlReader(ExperienceReader):
    def __init__(self, buffer: ExperienceBufferConfig, batch_size: Optional[int] = None) -> None:
        self.name = buffer.name
        self.path = _path(buffer)
        self.batch_size = batch_size
        self.timeout = float(buffer.max_read_timeout)
        self.current_index = 0  # lines passed (served or skipped as too old)
        self.byte_offset = 0
        self._pending: List[Tuple[Optional[Experience], int]] = []  # parsed, not yet served: (exp, end offset)
        self._scan_offset = 0
        mend_tail_if_idle(self.path, f"buffer '{self.name}'")

    def read(
        self, batch_size: Optional[int] = None, timeout: Optional[float] = None, min_model_version: int = 0
    ) -> List[Experience]:
        size, wait = self._size(batch_size), self.timeout if timeout is None else timeout
        batch = poll_until(lambda: self._take(size, min_model_version), wait)
        if batch is None:
            found = sum(1 for exp, _ in self._pending if exp and exp.model_version >= min_model_version)
            raise BufferTimeout(
                f"buffer '{self.name}': {found} of {size} experiences (model_version >= {min_model_version}) "
                f"appeared in {self.path} within {wait:g} s; is the explorer writing to it?"
            )
        return batch

    def state_dict(self) -> dict:
        return {"current_index": self.current_index, "byte_offset": self.byte_offset}

    def load_state_dict(self, state: dict) -> None:
        index = int(state.get("current_index", 0))
        offset = state.get("byte_offset")
        if offset is None:
            offset = self._offset_after_lines(index)
        else:
            self._check_offset(int(offset))
        self.current_index, self.byte_offset = index, int(offset)
        self._pending, self._scan_offset = [], self.byte_offset

    def _take(self, size: int, min_model_version: int) -> Optional[List[Experience]]:
        self._scan()
        eligible = 0
        for count, (exp, _) in enumerate(self._pending, start=1):
            if exp is not None and exp.model_version >= min_model_version:
                eligible += 1
                if eligible == size:
                    taken, self._pending = self._pending[:count], self._pending[count:]
                    self.current_index += count
                    self.byte_offset = taken[-1][1]
                    return [e for e, _ in taken if e is not None and e.model_version >= min_model_version]
        return None

    def _scan(self) -> None:
        """Parse the complete lines appended since the last scan."""
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            f.seek(self._scan_offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        offset, line_no = self._scan_offset, self.current_index + len(self._pending)
        for line in data[:end].splitlines(keepends=True):
            offset += len(line)
            line_no += 1
            self._pending.append((self._parse(line, line_no) if line.strip() else None, offset))
        self._scan_offset = offset

    def _parse(self, line: bytes, line_no: int) -> Experience:
        try:
            return Experience.from_dict(json.loads(line))
        except (ValueError, TypeError) as err:
            raise BufferStorageError(f"buffer '{self.name}': line {line_no} of {self.path} is corrupt: {err}") from err

    def _offset_after_lines(self, lines: int) -> int:
        if lines == 0:
            return 0
        if self.path.exists():
            offset = 0
            with open(self.path, "rb") as f:
                for count, line in enumerate(f, start=1):
                    if not line.endswith(b"\n"):
                        break
                    offset += len(line)
                    if count == lines:
                        return offset
        raise BufferStorageError(
            f"buffer '{self.name}': the saved cursor is at line {lines}, but {self.path} has fewer complete lines"
        )

    def _check_offset(self, offset: int) -> None:
        size = self.path.stat().st_size if self.path.exists() else 0
        ok = offset == 0 or offset <= size
        if ok and offset:
            with open(self.path, "rb") as f:
                f.seek(offset - 1)
                ok = f.read(1) == b"\n"
        if not ok:
            raise BufferStorageError(
                f"buffer '{self.name}': the saved cursor (byte {offset}) is not a line start of {self.path} "
                f"({size} bytes); the file was replaced or truncated"
            )
