"""The sql buffer through SQLAlchemy on a real SQLite file, also written from another process (a Ray actor)."""

import pytest
import ray
from sqlalchemy import create_engine, text

from trinity.buffer.errors import BufferStorageError, BufferTimeout
from trinity.buffer.experience import Experience
from trinity.buffer.factory import make_reader, make_writer
from trinity.buffer.sql_engine import with_retries
from trinity.buffer.sql_io import SqlReader, SqlWriter
from trinity.config.buffer import ExperienceBufferConfig, StorageType


def exp(version: int, run: int = 0) -> Experience:
    return Experience(
        tokens=[4, 5, 6, version],
        prompt_length=2,
        logprobs=[-1.0, -2.0],
        reward=0.5,
        model_version=version,
        task_id=f"task{version}",
        run_id=run,
        info={"source": "test"},
    )


def sql_buffer(tmp_path, timeout: float = 5.0, name: str = "exp_table") -> ExperienceBufferConfig:
    url = f"sqlite:///{tmp_path / 'db' / 'buffer.db'}"
    return ExperienceBufferConfig(
        name=name, storage_type=StorageType.sql, path=url, max_read_timeout=timeout, max_retry_interval=0.01
    )


def versions(experiences):
    return [e.model_version for e in experiences]


def test_round_trip_columns_and_exact_resume(tmp_path):
    cfg = sql_buffer(tmp_path)
    writer = make_writer(cfg)
    assert isinstance(writer, SqlWriter)
    writer.write([exp(v, run=v % 2) for v in range(10)])
    reader = make_reader(cfg, batch_size=3)
    first = reader.read()
    assert versions(first) == [0, 1, 2] and first[1].info == {"source": "test"} and first[1].run_id == 1
    assert first[2].logprobs.tolist() == [-1.0, -2.0]
    state = reader.state_dict()
    assert state == {"current_index": 3, "last_id": 3}
    resumed = SqlReader(cfg, batch_size=3)
    resumed.load_state_dict(state)
    assert versions(resumed.read()) == [3, 4, 5]
    by_count = SqlReader(cfg, batch_size=3)
    by_count.load_state_dict({"current_index": 3})  # the reference format: rows are counted
    assert versions(by_count.read()) == [3, 4, 5]
    with create_engine(cfg.path).connect() as conn:
        rows = conn.execute(text("SELECT task_id, run_id, model_version, reward, consumed FROM exp_table ORDER BY id"))
        rows = rows.all()
    assert rows[0] == ("task0", 0, 0, 0.5, 1) and rows[4] == ("task4", 0, 4, 0.5, 2) and rows[9][-1] == 0
    with pytest.raises(BufferStorageError, match="cursor is at row 11, but table exp_table .* has only 10 rows"):
        SqlReader(cfg).load_state_dict({"current_index": 11})


def test_short_table_times_out_naming_the_buffer_and_consumes_nothing(tmp_path):
    cfg = sql_buffer(tmp_path, timeout=0.2)
    writer, reader = make_writer(cfg), make_reader(cfg, batch_size=3)
    writer.write([exp(0), exp(1)])
    with pytest.raises(BufferTimeout, match=r"buffer 'exp_table': 2 of 3 experiences .* within 0.2 s"):
        reader.read()
    assert reader.state_dict() == {"current_index": 0, "last_id": 0}
    assert versions(reader.read(batch_size=2)) == [0, 1]


def test_min_model_version_passes_over_old_rows(tmp_path):
    cfg = sql_buffer(tmp_path)
    make_writer(cfg).write([exp(v) for v in (0, 2, 1, 3, 4)])
    reader = make_reader(cfg, batch_size=2)
    assert versions(reader.read(min_model_version=2)) == [2, 3]
    assert versions(reader.read(batch_size=1)) == [4]


def test_bad_urls_are_refused(tmp_path):
    with pytest.raises(ValueError, match="in-memory SQLite"):
        make_writer(ExperienceBufferConfig(name="m", storage_type=StorageType.sql, path="sqlite://"))


def test_retries_end_in_an_error_that_says_how_often():
    engine = create_engine("sqlite://")
    calls = []

    def query_missing_table():
        calls.append(1)
        with engine.connect() as conn:
            conn.execute(text("SELECT * FROM nowhere"))

    with pytest.raises(BufferStorageError, match="select failed after 3 attempts"):
        with_retries(query_missing_table, "select", times=2, interval=0.0)
    assert len(calls) == 3

    def flaky():
        if len(calls) < 5:
            query_missing_table()
        return "done"

    assert with_retries(flaky, "select", times=3, interval=0.0) == "done"


@ray.remote(num_cpus=0)
class RemoteWriter:
    """The explorer's side: a writer in another process."""

    def __init__(self, cfg: ExperienceBufferConfig) -> None:
        self.writer = make_writer(cfg)

    def write(self, first: int, count: int) -> int:
        for version in range(first, first + count):
            self.writer.write([exp(version)])
        return count


def test_writer_in_a_ray_actor_and_reader_here_share_the_file(tmp_path, ray_cluster):
    cfg = sql_buffer(tmp_path, timeout=60)
    remote = RemoteWriter.remote(cfg)
    pending = remote.write.remote(0, 20)
    reader = make_reader(cfg, batch_size=5)
    got = []
    for _ in range(4):
        got += versions(reader.read())
    assert ray.get(pending, timeout=60) == 20
    assert got == list(range(20))
    ray.get(remote.write.remote(20, 5), timeout=60)
    assert versions(reader.read()) == list(range(20, 25))


def test_config_puts_the_database_under_the_job_dir(tmp_path):
    from trinity.buffer.factory import trainer_reader
    from trinity.config import compose, validate

    config = validate(
        compose([f"checkpoint_root_dir={tmp_path}", "stages=[]", "buffer=sql", "buffer.train_batch_size=2"])
    )
    config = config.configs[0]
    buffer = config.buffer.trainer_input.experience_buffer
    assert buffer.path == f"sqlite:///{config.checkpoint_job_dir}/buffer/experience_buffer.db"
    make_writer(buffer).write([exp(1), exp(2)])
    reader = trainer_reader(config)
    assert isinstance(reader, SqlReader) and versions(reader.read()) == [1, 2]
