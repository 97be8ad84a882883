"""The queue buffer hosted in the process that uses it, as colocate's device hosts its job's queue: served on
an event loop of this process (`host_queue`), reached through the same writer and reader as the actor
(`make_writer`/`make_reader`), from other threads and from coroutines on that loop. No Ray."""

import asyncio
import threading

import pytest

from trinity.buffer.errors import BufferClosed, BufferTimeout
from trinity.buffer.experience import Experience
from trinity.buffer.factory import make_reader, make_writer
from trinity.buffer.queue_links import HostedLink, host_queue
from trinity.config.buffer import ExperienceBufferConfig, ReplayBufferConfig


@pytest.fixture
def loop():
    """The hosting process's event loop, on a thread of its own (as an async actor's)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="host-loop", daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)


def on(loop, coroutine):
    return asyncio.run_coroutine_threadsafe(coroutine, loop).result(60)


def hosted(loop, name: str, capacity: int = 100, timeout: float = 5.0, **replay) -> ExperienceBufferConfig:
    replay_buffer = ReplayBufferConfig(**replay) if replay else ReplayBufferConfig()
    buffer = ExperienceBufferConfig(name=name, capacity=capacity, max_read_timeout=timeout, replay_buffer=replay_buffer)

    async def host():
        host_queue(buffer)

    on(loop, host())
    return buffer


def exp(version: int, reward: float = 0.0) -> Experience:
    return Experience(
        tokens=[1, 2, version + 3], prompt_length=2, logprobs=[-0.1], reward=reward, model_version=version
    )


def test_objects_pass_in_order_and_the_last_release_ends_the_stream(loop):
    buffer = hosted(loop, "hosted-fifo")
    writer, reader = make_writer(buffer), make_reader(buffer, batch_size=3)
    assert isinstance(writer._link, HostedLink) and isinstance(reader._link, HostedLink), "no queue actor"
    writer.acquire()
    written = [exp(v, reward=v / 10) for v in range(4)]
    writer.write(written)
    first = reader.read()
    assert [e.model_version for e in first] == [0, 1, 2] and first[0].info["use_count"] == 1
    assert first[0] is not written[0] and first[0].tokens is written[0].tokens, "a copy of the record, not of its data"
    assert "use_count" not in written[0].info, "the writer's object is left as it was"
    writer.release()
    assert [e.model_version for e in reader.read()] == [3], "a closed queue still serves what it holds"
    with pytest.raises(BufferClosed, match="closed and drained"):
        reader.read()
    assert reader.state_dict() == {"current_index": 4}


def test_coroutines_on_the_hosting_loop_use_the_async_calls(loop):
    buffer = hosted(loop, "hosted-async")
    writer, reader = make_writer(buffer), make_reader(buffer, batch_size=2)

    async def explorer_and_trainer():
        read = asyncio.ensure_future(reader.read_async())  # waits for the write below
        await writer.write_async([exp(1), exp(2)])
        return [e.model_version for e in await read]

    assert on(loop, explorer_and_trainer()) == [1, 2]

    async def blocking_release():
        writer.release()

    with pytest.raises(RuntimeError, match="blocking release on the event loop that serves the queue"):
        on(loop, blocking_release())

    async def release_from_a_thread():  # what the explorer does at its end
        await asyncio.to_thread(writer.release)
        return writer.describe()

    assert on(loop, release_from_a_thread())["closed"]


def test_capacity_and_read_timeouts_are_the_queues(loop):
    buffer = hosted(loop, "hosted-full", capacity=2, timeout=0.3)
    writer, reader = make_writer(buffer), make_reader(buffer, batch_size=2)
    writer.acquire()
    writer.write([exp(0), exp(1)])
    with pytest.raises(BufferTimeout, match="buffer 'hosted-full' is full: wrote 0 of 1"):
        writer.write([exp(2)])
    assert [e.model_version for e in reader.read()] == [0, 1]
    with pytest.raises(BufferTimeout, match="0 of 2 experiences arrived within 0.3 s"):
        reader.read()


def test_replay_serves_the_stored_record_again_with_its_own_use_count(loop):
    buffer = hosted(loop, "hosted-replay", capacity=4, priority_fn="linear_decay", reuse_cooldown_time=0.0, enable=True)
    writer, reader = make_writer(buffer), make_reader(buffer, batch_size=1)
    writer.acquire()
    writer.write([exp(5)])
    first = reader.read()[0]
    first.info["seen_by_trainer"] = True
    again = reader.read()[0]
    assert (first.info["use_count"], again.info["use_count"]) == (1, 2)
    assert "seen_by_trainer" not in again.info, "each read gets its own info"
