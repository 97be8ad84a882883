"""The queue buffer on a real local Ray cluster: FIFO order, capacity, end of stream, timeouts, replay."""

import asyncio
import time

import pytest
import ray

from trinity.buffer.errors import BufferClosed, BufferTimeout
from trinity.buffer.experience import Experience
from trinity.buffer.factory import make_reader, make_writer
from trinity.buffer.queue_storage import queue_actor_name
from trinity.config.buffer import ExperienceBufferConfig, ReplayBufferConfig

pytestmark = pytest.mark.usefixtures("ray_cluster")


def exp(version: int, reward: float = 0.0) -> Experience:
    return Experience(
        tokens=[1, 2, version + 3], prompt_length=2, logprobs=[-0.1], reward=reward, model_version=version
    )


def queue(name: str, capacity: int = 100, timeout: float = 5.0, **replay) -> ExperienceBufferConfig:
    return ExperienceBufferConfig(
        name=name,
        capacity=capacity,
        max_read_timeout=timeout,
        replay_buffer=ReplayBufferConfig(**replay) if replay else ReplayBufferConfig(),
    )


def versions(experiences):
    return [e.model_version for e in experiences]


def wait_size(writer, size: int) -> None:
    """Reuse re-inserts asynchronously; wait (bounded) until the queue holds `size` experiences."""
    for _ in range(1000):
        if writer.describe()["size"] == size:
            return
        time.sleep(0.01)
    raise AssertionError(f"queue never reached size {size}: {writer.describe()}")


def test_fifo_round_trip_and_a_new_reader_continues():
    cfg = queue("fifo")
    writer, reader = make_writer(cfg), make_reader(cfg, batch_size=3)
    writer.write([exp(v, reward=v / 10) for v in range(8)])
    first = reader.read()
    assert versions(first) == [0, 1, 2] and first[1].reward == pytest.approx(0.1)
    assert first[0].tokens.tolist() == [1, 2, 3] and first[0].info["use_count"] == 1
    state = reader.state_dict()
    assert state == {"current_index": 3}
    resumed = make_reader(cfg, batch_size=3)
    resumed.load_state_dict(state)
    assert versions(resumed.read()) == [3, 4, 5] and resumed.state_dict() == {"current_index": 6}
    assert versions(reader.read(batch_size=2)) == [6, 7]


def test_actor_is_named_in_the_given_namespace_and_settings_must_agree():
    cfg = queue("named", capacity=7)
    make_writer(cfg, namespace="job-a")
    actor = ray.get_actor(queue_actor_name("named"), namespace="job-a")
    assert ray.get(actor.settings.remote())["capacity"] == 7
    with pytest.raises(ValueError, match="queue-named already exists"):
        make_reader(queue("named", capacity=8), namespace="job-a")
    make_reader(queue("named", capacity=8), namespace="job-b")  # another job, another queue


def test_full_queue_blocks_writers_until_a_read_makes_room():
    cfg = queue("capacity", capacity=4, timeout=0.3)
    writer, reader = make_writer(cfg), make_reader(cfg, batch_size=2)
    writer.write([exp(v) for v in range(4)])
    with pytest.raises(BufferTimeout, match="buffer 'capacity' is full: wrote 0 of 1"):
        writer.write([exp(9)])
    with pytest.raises(ValueError, match="a batch of 5 can never fill a queue of capacity 4"):
        reader.read(batch_size=5)
    actor = ray.get_actor(queue_actor_name("capacity"))
    pending = actor.put_batch.remote([(exp(4).to_bytes(), 4, 0), (exp(5).to_bytes(), 5, 0)], 30.0)
    done, _ = ray.wait([pending], timeout=0.5)
    assert not done  # the writer is blocked while the queue is full
    assert versions(reader.read()) == [0, 1]
    assert ray.get(pending, timeout=30) == ("ok", 2)
    assert versions(reader.read(batch_size=4)) == [2, 3, 4, 5]


def test_read_timeout_names_the_buffer_and_what_arrived_and_consumes_nothing():
    cfg = queue("starved")
    writer, reader = make_writer(cfg), make_reader(cfg, batch_size=4)
    writer.write([exp(0), exp(1)])
    with pytest.raises(BufferTimeout, match=r"buffer 'starved': 2 of 4 experiences arrived within 0.2 s"):
        reader.read(timeout=0.2)
    assert versions(reader.read(batch_size=2)) == [0, 1]


def test_last_release_closes_the_stream_after_the_reader_drains_it():
    cfg = queue("closing", timeout=0.2)
    explorer_a, explorer_b, reader = make_writer(cfg), make_writer(cfg), make_reader(cfg, batch_size=3)
    explorer_a.acquire()
    explorer_b.acquire()
    explorer_a.write([exp(0), exp(1)])
    explorer_a.release()
    with pytest.raises(BufferTimeout):  # one writer is still there
        reader.read()
    explorer_b.write([exp(2), exp(3)])
    explorer_b.release()
    assert versions(reader.read()) == [0, 1, 2]
    assert versions(reader.read()) == [3]  # the stream's short last batch
    with pytest.raises(BufferClosed, match="buffer 'closing' is closed and drained"):
        reader.read()
    assert list(reader) == []  # iteration ends cleanly
    with pytest.raises(BufferClosed, match="Call acquire"):
        explorer_a.write([exp(4)])
    explorer_a.acquire()  # a new writer reopens it
    explorer_a.write([exp(5)])
    assert versions(reader.read(batch_size=1)) == [5]


def test_stale_experiences_are_dropped_by_min_model_version():
    cfg = queue("stale")
    writer, reader = make_writer(cfg), make_reader(cfg, batch_size=2)
    writer.write([exp(v) for v in (0, 3, 1, 4, 5)])
    assert versions(reader.read(min_model_version=3)) == [3, 4]
    assert writer.describe()["stale_dropped"] == 2


def test_async_write_and_read():
    cfg = queue("async")

    async def roundtrip():
        writer, reader = make_writer(cfg), make_reader(cfg, batch_size=2)
        await writer.write_async([exp(1), exp(2)])
        return await reader.read_async()

    assert versions(asyncio.run(roundtrip())) == [1, 2]


def test_replay_keeps_the_highest_priorities_and_evicts_the_lowest():
    """Reference queue test: capacity 8, linear_decay(0.6), versions 0..11 -> 11..4, each used once."""
    cfg = queue("replay", capacity=8, timeout=0.3, enable=True, priority_fn_args={"decay": 0.6})
    writer, reader = make_writer(cfg), make_reader(cfg, batch_size=8)
    writer.acquire()
    for version in range(12):
        writer.write([exp(version)])
    assert writer.describe()["size"] == 8 and writer.describe()["evicted"] == 4
    batch = reader.read()
    assert versions(batch) == [11, 10, 9, 8, 7, 6, 5, 4]
    assert [e.info["use_count"] for e in batch] == [1] * 8
    with pytest.raises(BufferTimeout):  # no reuse without a cooldown
        reader.read(batch_size=1)
    writer.release()
    with pytest.raises(BufferClosed):
        reader.read(batch_size=1)


def test_replay_refuses_a_newcomer_below_the_lowest_when_full():
    cfg = queue("refuse", capacity=2, enable=True)
    writer, reader = make_writer(cfg), make_reader(cfg, batch_size=2)
    writer.write([exp(5), exp(6), exp(1)])
    assert versions(reader.read()) == [6, 5]


def test_reuse_reorders_by_decayed_priority():
    """linear_decay(2): priority = version - 2 * use_count; a used experience comes back at once (cooldown 0)."""
    cfg = queue("reuse", enable=True, reuse_cooldown_time=0.0, priority_fn_args={"decay": 2.0})
    writer, reader = make_writer(cfg), make_reader(cfg, batch_size=1)
    writer.write([exp(1), exp(2), exp(3)])
    served = []
    for _ in range(5):
        served.append([(e.model_version, e.info["use_count"]) for e in reader.read()][0])
        wait_size(writer, 3)
    # priorities: v3: 3 -> 1 -> -1; v2: 2 -> 0; v1: 1 -> -1 (ties: the earlier insertion first)
    assert served == [(3, 1), (2, 1), (1, 1), (3, 2), (2, 2)]


def test_use_count_limit_retires_experiences():
    cfg = queue(
        "limit",
        timeout=0.2,
        enable=True,
        priority_fn="decay_limit_randomization",
        reuse_cooldown_time=0.0,
        priority_fn_args={"decay": 1.0, "use_count_limit": 2, "sigma": 0.0},
    )
    writer, reader = make_writer(cfg), make_reader(cfg, batch_size=1)
    writer.write([exp(5)])
    assert reader.read()[0].info["use_count"] == 1
    wait_size(writer, 1)
    assert reader.read()[0].info["use_count"] == 2
    with pytest.raises(BufferTimeout):  # used twice: retired
        reader.read()
    assert writer.describe()["reused"] == 1


def test_cooldown_delays_reuse():
    cfg = queue("cooldown", timeout=30, enable=True, reuse_cooldown_time=2.0)
    writer, reader = make_writer(cfg), make_reader(cfg, batch_size=1)
    writer.write([exp(2)])
    reader.read()
    with pytest.raises(BufferTimeout):  # back only after 2 s
        reader.read(timeout=0.1)
    again = reader.read()
    assert versions(again) == [2] and again[0].info["use_count"] == 2


def test_trainer_reader_of_a_config_shares_the_jobs_queue(tmp_path):
    from trinity.buffer.factory import trainer_reader
    from trinity.buffer.queue_io import QueueReader
    from trinity.buffer.queue_storage import destroy_queue
    from trinity.config import compose, validate

    config = validate(compose([f"checkpoint_root_dir={tmp_path}", "stages=[]", "buffer.train_batch_size=2"])).configs[0]
    buffer = config.buffer.trainer_input.experience_buffer
    reader = trainer_reader(config)
    assert isinstance(reader, QueueReader) and reader.batch_size == 2
    make_writer(buffer, namespace=config.ray_namespace).write([exp(3), exp(4)])
    assert versions(reader.read()) == [3, 4]
    assert destroy_queue(buffer.name, config.ray_namespace)
    assert not destroy_queue(buffer.name, config.ray_namespace)
