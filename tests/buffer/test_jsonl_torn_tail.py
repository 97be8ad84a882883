"""A JSONL writer killed mid-line leaves a torn last line: the next append and a reader mend it (loudly)
instead of gluing a new line onto it, and every complete row is still read exactly once."""

import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap

from trinity.buffer.experience import Experience
from trinity.buffer.jsonl import JsonlReader, JsonlWriter
from trinity.config.buffer import ExperienceBufferConfig, StorageType

# A writer process: three whole rows through JsonlWriter, then half a row under the writers' lock
# (as JsonlWriter.write holds it), then it waits to be killed with SIGKILL.
CHILD = textwrap.dedent(
    """
    import fcntl, json, os, sys, time
    from trinity.buffer.experience import Experience
    from trinity.buffer.jsonl import JsonlWriter
    from trinity.config.buffer import ExperienceBufferConfig, StorageType

    path = sys.argv[1]
    rows = [Experience(tokens=[1, 2, v], prompt_length=1, model_version=v) for v in range(4)]
    JsonlWriter(ExperienceBufferConfig(name="torn", storage_type=StorageType.file, path=path)).write(rows[:3])
    line = (json.dumps(rows[3].to_dict()) + "\\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, line[: len(line) // 2])
    print("mid-line", flush=True)
    time.sleep(600)
    """
)


def exp(version: int) -> Experience:
    return Experience(tokens=[1, 2, version], prompt_length=1, model_version=version)


def config(path) -> ExperienceBufferConfig:
    return ExperienceBufferConfig(name="torn", storage_type=StorageType.file, path=str(path), max_read_timeout=0.5)


def kill_writer_mid_line(path) -> int:
    """Run the writer process until it is mid-line, SIGKILL it; returns the file size it left."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "mid-line"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    return path.stat().st_size


def complete_size(path) -> int:
    data = path.read_bytes()
    return data.rfind(b"\n") + 1


def test_append_after_a_writer_killed_mid_line_mends_the_tail(tmp_path, caplog):
    path = tmp_path / "exp.jsonl"
    torn_size = kill_writer_mid_line(path)
    whole = complete_size(path)
    assert torn_size > whole  # the kill left half a line
    with caplog.at_level(logging.WARNING, logger="trinity.buffer.jsonl_tail"):
        writer = JsonlWriter(config(path))
        writer.write([exp(10), exp(11)])
        writer.close()
    message = caplog.text
    assert str(path) in message and f"byte offset {whole}" in message
    assert f"dropping {torn_size - whole} bytes" in message
    lines = path.read_bytes().splitlines()
    assert [json.loads(line)["model_version"] for line in lines] == [0, 1, 2, 10, 11]
    assert [e.model_version for e in JsonlReader(config(path)).read(batch_size=5)] == [0, 1, 2, 10, 11]


def test_reader_opened_after_the_kill_mends_the_tail_and_counts_rows_right(tmp_path, caplog):
    path = tmp_path / "exp.jsonl"
    torn_size = kill_writer_mid_line(path)
    whole = complete_size(path)
    with caplog.at_level(logging.WARNING, logger="trinity.buffer.jsonl_tail"):
        reader = JsonlReader(config(path))
    assert f"dropping {torn_size - whole} bytes" in caplog.text
    assert path.stat().st_size == whole
    assert [e.model_version for e in reader.read(batch_size=3)] == [0, 1, 2]
    JsonlWriter(config(path)).write([exp(3)])
    assert [e.model_version for e in reader.read(batch_size=1)] == [3]
    assert reader.state_dict() == {"current_index": 4, "byte_offset": path.stat().st_size}


def test_a_complete_last_line_without_newline_is_kept(tmp_path, caplog):
    path = tmp_path / "exp.jsonl"
    path.write_text(json.dumps(exp(0).to_dict()) + "\n" + json.dumps(exp(1).to_dict()))
    with caplog.at_level(logging.WARNING, logger="trinity.buffer.jsonl_tail"):
        JsonlWriter(config(path)).write([exp(2)])
    assert "had no newline" in caplog.text
    assert [e.model_version for e in JsonlReader(config(path)).read(batch_size=3)] == [0, 1, 2]


def test_a_line_being_written_under_the_lock_is_left_alone(tmp_path):
    """A reader opening the file while a live writer holds the lock mid-line must not cut that line."""
    path = tmp_path / "exp.jsonl"
    JsonlWriter(config(path)).write([exp(0)])
    line = (json.dumps(exp(1).to_dict()) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line[:10])
        reader = JsonlReader(config(path))
        size = path.stat().st_size
        assert size == complete_size(path) + 10
        os.write(fd, line[10:])
    finally:
        os.close(fd)
    assert [e.model_version for e in reader.read(batch_size=2)] == [0, 1]
