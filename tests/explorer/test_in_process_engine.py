"""The runner against an engine actor in its own process, as colocate's device hosts the explorer: the actor
object runs on an event loop of this process (`in_process.serve`), and tasks call it without Ray."""

import asyncio
import threading
import time

import pytest
import torch

from tests.explorer.conftest import addition_tasks
from trinity.explorer.engine import TaskTimeout
from trinity.explorer.engine_actor import EngineActor, RemoteEngine
from trinity.explorer.engine_links import in_process_engine
from trinity.explorer.runner import TaskRunner
from trinity.explorer.sampling import SamplingParams
from trinity.in_process import serve


@pytest.fixture(scope="module")
def served(spec):
    """An EngineActor object served on a loop thread of this process, as the name `device`."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="device-loop", daemon=True)
    thread.start()
    threads = torch.get_num_threads()
    actor = EngineActor(spec)  # sets the device's thread count, as in its own process

    async def register():
        serve("device", actor)

    asyncio.run_coroutine_threadsafe(register(), loop).result(30)
    yield actor, loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)
    torch.set_num_threads(threads)


def stats(served):
    actor, loop = served
    return asyncio.run_coroutine_threadsafe(actor.stats(), loop).result(30)


def test_a_wave_of_tasks_is_one_batch_of_the_in_process_engine(spec, served):
    assert in_process_engine("elsewhere") is None, "only a served engine has an in-process link"
    tasks = addition_tasks([(i, i) for i in range(4)], repeat_times=4, rollout_args={"max_tokens": 6})
    before = stats(served)
    result = TaskRunner([in_process_engine("device")], spec, runner_per_model=4, gather_s=30.0).run(tasks, "3")
    assert result.failures == [] and len(result.experiences) == 16
    assert {exp.group_id for exp in result.experiences} == {f"3/t{i}" for i in range(4)}
    assert all(exp.response_length <= 6 and len(exp.logprobs) == exp.response_length for exp in result.experiences)
    after = stats(served)
    assert after["requests"] - before["requests"] == 4 and after["rows"] - before["rows"] == 16
    assert after["batches"] - before["batches"] == 1, "the runner's announcement reached the engine before its tasks"


def test_in_process_calls_keep_deadlines_and_errors_and_refuse_the_engines_own_loop(spec, served):
    runner = TaskRunner([in_process_engine("device")], spec)
    engine = RemoteEngine(in_process_engine("device"), spec, runner.codec, deadline=time.monotonic() + 120)
    prompt = engine.encode("40+2=")
    (samples,) = engine.generate([prompt], SamplingParams(n=2, max_tokens=3, min_tokens=3))
    assert [len(sample.response_ids) for sample in samples] == [3, 3]
    assert engine.model_version == 0
    with pytest.raises(ValueError, match="empty prompt"):  # the engine's own exception, not a wrapper
        engine.generate([[]])
    with pytest.raises(TaskTimeout, match="ran out"):
        RemoteEngine(in_process_engine("device"), spec, runner.codec, deadline=time.monotonic()).generate([prompt])
    slow = RemoteEngine(in_process_engine("device"), spec, runner.codec, time.monotonic() + 120)
    with pytest.raises(TaskTimeout, match="did not answer generate within 0.0 s"):
        slow.link.call("generate", [prompt], SamplingParams(n=8, max_tokens=60, min_tokens=60), 60, timeout=0.001)
    actor, loop = served

    async def on_the_engines_loop():
        return engine.model_version

    with pytest.raises(RuntimeError, match="called on its own event loop"):
        asyncio.run_coroutine_threadsafe(on_the_engines_loop(), loop).result(30)
