"""The file (jsonl) buffer: appends, tails, resumes its cursor exactly, and reports corrupt data."""

import json
import multiprocessing

import pytest

from trinity.buffer.errors import BufferStorageError, BufferTimeout
from trinity.buffer.experience import Experience
from trinity.buffer.factory import make_reader, make_writer
from trinity.buffer.jsonl import JsonlReader, JsonlWriter
from trinity.config.buffer import ExperienceBufferConfig, StorageType


def exp(version: int, task: str = "t") -> Experience:
    return Experience(
        tokens=[7, 8, version], prompt_length=1, logprobs=[-0.5, -0.25], reward=1.0, model_version=version, task_id=task
    )


def file_buffer(tmp_path, timeout: float = 2.0) -> ExperienceBufferConfig:
    return ExperienceBufferConfig(
        name="exp_file",
        storage_type=StorageType.file,
        path=str(tmp_path / "sub" / "exp.jsonl"),
        max_read_timeout=timeout,
    )


def versions(experiences):
    return [e.model_version for e in experiences]


def test_round_trip_and_exact_resume(tmp_path):
    cfg = file_buffer(tmp_path)
    writer = make_writer(cfg)
    assert isinstance(writer, JsonlWriter)
    writer.write([exp(v) for v in range(10)])
    reader = make_reader(cfg, batch_size=4)
    first = reader.read()
    assert versions(first) == [0, 1, 2, 3]
    assert first[2].logprobs.tolist() == [-0.5, -0.25] and first[2].tokens.tolist() == [7, 8, 2]
    state = reader.state_dict()
    assert state["current_index"] == 4
    resumed = JsonlReader(cfg, batch_size=4)
    resumed.load_state_dict(json.loads(json.dumps(state)))
    assert versions(resumed.read()) == [4, 5, 6, 7]
    by_count = JsonlReader(cfg, batch_size=4)
    by_count.load_state_dict({"current_index": 4})  # the reference format: lines are counted
    assert versions(by_count.read()) == [4, 5, 6, 7]
    writer.write([exp(10), exp(11)])
    assert versions(resumed.read()) == [8, 9, 10, 11]
    writer.close()


def test_reader_waits_for_complete_lines_and_times_out_naming_the_buffer(tmp_path):
    cfg = file_buffer(tmp_path, timeout=0.2)
    reader = make_reader(cfg, batch_size=2)
    with pytest.raises(BufferTimeout, match=r"buffer 'exp_file': 0 of 2 experiences"):
        reader.read()  # the file does not exist yet
    writer = make_writer(cfg)
    writer.write([exp(1)])
    line = json.dumps(exp(2).to_dict())
    with open(cfg.path, "a") as f:
        f.write(line[:10])  # a writer caught mid-line
    with pytest.raises(BufferTimeout, match="1 of 2 experiences"):
        reader.read()
    with open(cfg.path, "a") as f:
        f.write(line[10:] + "\n")
    assert versions(reader.read()) == [1, 2]
    assert reader.state_dict() == {"current_index": 2, "byte_offset": (tmp_path / "sub" / "exp.jsonl").stat().st_size}


def test_min_model_version_passes_over_old_lines(tmp_path):
    cfg = file_buffer(tmp_path)
    make_writer(cfg).write([exp(v) for v in (0, 2, 1, 3, 4)])
    reader = make_reader(cfg, batch_size=2)
    assert versions(reader.read(min_model_version=2)) == [2, 3]
    assert reader.state_dict()["current_index"] == 4
    assert versions(reader.read(batch_size=1)) == [4]


def test_corrupt_line_and_bad_cursor_are_errors(tmp_path):
    cfg = file_buffer(tmp_path)
    make_writer(cfg).write([exp(0)])
    with open(cfg.path, "a") as f:
        f.write("{not json\n")
    reader = make_reader(cfg, batch_size=2)
    with pytest.raises(BufferStorageError, match="line 2 of .*exp.jsonl is corrupt"):
        reader.read()
    with pytest.raises(BufferStorageError, match="not a line start"):
        JsonlReader(cfg).load_state_dict({"current_index": 1, "byte_offset": 5})
    with pytest.raises(BufferStorageError, match="cursor is at line 9"):
        JsonlReader(cfg).load_state_dict({"current_index": 9})


def test_path_must_be_jsonl(tmp_path):
    with pytest.raises(ValueError, match="needs a .jsonl or .json path"):
        make_writer(ExperienceBufferConfig(name="x", storage_type=StorageType.file, path=str(tmp_path / "x.db")))


def _append(path: str, writer_id: int) -> None:
    writer = JsonlWriter(ExperienceBufferConfig(name="multi", storage_type=StorageType.file, path=path))
    for batch in range(20):
        writer.write([exp(batch, task=f"w{writer_id}") for _ in range(10)])


def test_concurrent_writer_processes_never_interleave_lines(tmp_path):
    path = str(tmp_path / "multi.jsonl")
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_append, args=(path, i)) for i in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    reader = JsonlReader(ExperienceBufferConfig(name="multi", storage_type=StorageType.file, path=path))
    everything = reader.read(batch_size=400)
    assert sorted(e.task_id for e in everything) == ["w0"] * 200 + ["w1"] * 200
    for writer_id in ("w0", "w1"):
        assert versions(e for e in everything if e.task_id == writer_id) == [b for b in range(20) for _ in range(10)]


def test_config_puts_the_file_under_the_job_dir(tmp_path):
    from trinity.buffer.factory import trainer_reader
    from trinity.config import compose, validate

    config = validate(
        compose([f"checkpoint_root_dir={tmp_path}", "stages=[]", "buffer=file", "buffer.train_batch_size=2"])
    )
    config = config.configs[0]
    buffer = config.buffer.trainer_input.experience_buffer
    assert buffer.path.startswith(str(tmp_path)) and buffer.path.endswith(".jsonl")
    make_writer(buffer).write([exp(1), exp(2)])
    assert versions(trainer_reader(config).read()) == [1, 2]
