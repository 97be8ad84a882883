"""The task runner on a real local Ray cluster with one engine actor: experiences, metrics, failures."""

import dataclasses
import statistics
import threading
import time

import pytest
import ray
import torch
from safetensors.torch import load_file

from tests.conftest import local_cluster
from tests.explorer.plugins import CountingWorkflow
from trinity.explorer.engine import TaskTimeout
from trinity.explorer.engine_actor import RemoteEngine, create_engines
from trinity.explorer.runner import TaskRunner
from trinity.explorer.sampling import SamplingParams
from trinity.model.tiny import ensure_tiny_model

PLUGINS = "tests.explorer.plugins"


@pytest.fixture(scope="module")
def engines(config):
    with local_cluster():
        yield create_engines(config, ready_timeout=300)


def tasks(count, **fields):
    return [
        {
            "task_id": f"t{i}",
            "question": f"{i}+{i}=",
            "answer": str(2 * i),
            "repeat_times": 4,
            "rollout_args": {"max_tokens": 6},
            **fields,
        }
        for i in range(count)
    ]


def runner(config, engines, spec, **options):
    settings = {"runner_per_model": 2, "max_retry_times": 1, "max_timeout": 60.0, **options}
    return TaskRunner(engines, spec, **settings)


def test_one_engine_actor_turns_a_batch_into_experiences(config, engines):
    assert len(engines) == config.explorer.rollout_model.engine_num == 1
    result = TaskRunner.from_config(config, engines).run(tasks(4), batch_id="7")
    assert result.failures == []
    assert len(result.experiences) == 16
    groups = {}
    for exp in result.experiences:
        assert exp.batch_id == "7" and exp.response_length <= 6 and len(exp.logprobs) == exp.response_length
        groups.setdefault(exp.group_id, []).append(exp.run_id)
    assert groups == {f"7/t{i}": [0, 1, 2, 3] for i in range(4)}
    rewards = [exp.reward for exp in result.experiences]
    metrics = result.metrics
    assert metrics["reward/mean"] == pytest.approx(statistics.fmean(rewards))
    assert metrics["reward/std"] == pytest.approx(statistics.pstdev(rewards))
    assert metrics["accuracy/mean"] == pytest.approx(
        statistics.fmean(e.metrics["accuracy"] for e in result.experiences)
    )
    lengths = [e.response_length for e in result.experiences]
    assert metrics["response_length/mean"] == pytest.approx(statistics.fmean(lengths))
    assert metrics["response_length/max"] == max(lengths)
    assert (metrics["tasks"], metrics["tasks_failed"], metrics["experiences"]) == (4, 0, 16)
    assert metrics["time/run_s"] > 0 and 0 < metrics["time/reward_s"]


def test_failing_reward_and_workflow_become_recorded_failures(config, engines, spec):
    batch = tasks(2)
    batch += tasks(1, task_id="bad_reward", reward_fn=f"{PLUGINS}.failing_reward")
    batch += tasks(1, task_id="bad_workflow", workflow=f"{PLUGINS}.FailingWorkflow")
    batch += [{"task_id": "malformed", "question": "1+1=", "anwser": "2"}]
    result = runner(config, engines, spec).run(batch)
    failures = {failure.task_id: failure for failure in result.failures}
    assert set(failures) == {"bad_reward", "bad_workflow", "malformed"}
    assert failures["bad_reward"].attempts == 2 and "reward exploded" in failures["bad_reward"].error
    assert failures["bad_workflow"].attempts == 2 and "workflow exploded" in failures["bad_workflow"].error
    assert failures["malformed"].attempts == 0 and "unknown keys" in failures["malformed"].error
    assert not any(failure.timed_out for failure in result.failures)
    assert {exp.task_id for exp in result.experiences} == {"t0", "t1"}
    assert (result.metrics["tasks_failed"], result.metrics["task_retries"]) == (3, 2)


def test_a_retry_recovers_a_task_that_failed_once(config, engines, spec):
    CountingWorkflow.attempts.clear()
    result = runner(config, engines, spec).run(tasks(3, workflow=f"{PLUGINS}.CountingWorkflow"))
    assert result.failures == [] and len(result.experiences) == 12
    assert CountingWorkflow.attempts == {"t0": 2, "t1": 2, "t2": 2}
    assert result.metrics["task_retries"] == 3


def test_timed_out_tasks_are_retried_then_recorded_without_stalling_the_step(config, engines, spec):
    batch = tasks(1)
    batch += tasks(1, task_id="hangs", workflow=f"{PLUGINS}.SleepingWorkflow", workflow_args={"seconds": 120})
    batch += tasks(1, task_id="endless", workflow=f"{PLUGINS}.EndlessWorkflow")
    result = runner(config, engines, spec, max_timeout=1.0).run(batch)
    failures = {failure.task_id: failure for failure in result.failures}
    assert set(failures) == {"hangs", "endless"}
    assert all(failure.timed_out and failure.attempts == 2 for failure in failures.values())
    assert "TaskTimeout" in failures["endless"].error
    assert {exp.task_id for exp in result.experiences} == {"t0"}
    # the engine is free again afterwards
    assert len(runner(config, engines, spec).run(tasks(1)).experiences) == 4


def test_attempts_reuse_the_threads_of_finished_ones_but_not_of_stuck_ones(config, engines, spec):
    reusing = runner(config, engines, spec, max_timeout=1.0, max_retry_times=0)  # 2 attempts at a time
    stuck = tasks(1, task_id="hangs", workflow=f"{PLUGINS}.SleepingWorkflow", workflow_args={"seconds": 120})
    assert [failure.task_id for failure in reusing.run(tasks(1) + stuck).failures] == ["hangs"]
    assert reusing.threads.started == 2
    result = reusing.run(tasks(2))  # t0's thread is idle again, the stuck one is not
    assert result.failures == [] and len(result.experiences) == 8
    assert reusing.threads.started == 3
    result = reusing.run(tasks(4))
    assert result.failures == [] and len(result.experiences) == 16
    assert reusing.threads.started == 3, "4 attempts, 2 at a time, on the 2 idle threads"


@pytest.fixture(scope="module")
def codec(spec, engines):
    return TaskRunner(engines, spec).codec


def test_concurrent_requests_are_merged_and_keep_their_own_limits(spec, engines, codec):
    proxy = RemoteEngine(engines[0], spec, codec, deadline=time.monotonic() + 120)
    prompt = proxy.encode("40+2=")
    before = ray.get(engines[0].stats.remote(), timeout=60)
    blocker = engines[0].generate.remote([prompt], SamplingParams(n=8, max_tokens=60, min_tokens=60), 60)
    # equal settings but max_tokens: requests arriving while the engine is busy share one batch
    refs = {
        tokens: engines[0].generate.remote([prompt], SamplingParams(n=2, max_tokens=tokens, min_tokens=13), 60)
        for tokens in (3, 5, 8, 13)
    }
    for tokens, ref in refs.items():
        (group,) = ray.get(ref, timeout=60)
        assert [len(sample.response_ids) for sample in group] == [tokens, tokens]
        assert all(sample.finish_reason == "length" for sample in group)
    assert all(len(sample.response_ids) == 60 for sample in ray.get(blocker, timeout=60)[0])
    after = ray.get(engines[0].stats.remote(), timeout=60)
    assert after["requests"] - before["requests"] == 5 and after["rows"] - before["rows"] == 16
    assert after["batches"] - before["batches"] <= 3
    with pytest.raises(ValueError, match="empty prompt"):  # a bad request fails alone, with its reason
        proxy.generate([[]], timeout=60)
    expired = RemoteEngine(engines[0], spec, codec, deadline=time.monotonic())
    with pytest.raises(TaskTimeout, match="ran out"):
        expired.generate([prompt])


def test_an_announced_wave_is_one_batch(spec, engines, codec):
    """`expect` holds the next batch until the wave's requests are in, or until its time is up."""
    prompt = RemoteEngine(engines[0], spec, codec, time.monotonic() + 60).encode("40+2=")
    params = SamplingParams(n=2, max_tokens=4)
    before = ray.get(engines[0].stats.remote(), timeout=60)
    engines[0].expect.remote(2, 300.0)
    first = engines[0].generate.remote([prompt], params, 60)
    ready, _ = ray.wait([first], timeout=2.0)
    assert not ready, "the first request of the wave ran without waiting for the second"
    second = engines[0].generate.remote([prompt], params, 60)
    assert [len(group) for (group,) in ray.get([first, second], timeout=60)] == [2, 2]
    after = ray.get(engines[0].stats.remote(), timeout=60)
    assert (after["requests"] - before["requests"], after["batches"] - before["batches"]) == (2, 1)
    # a wave member that never asks holds the others only until the announced time is up
    engines[0].expect.remote(2, 0.2)
    (group,) = ray.get(engines[0].generate.remote([prompt], params, 60), timeout=60)
    assert len(group) == 2


def test_a_runner_announces_its_wave(config, engines, spec):
    """Four tasks started together: their four requests are one batch (given all the time they need)."""
    before = ray.get(engines[0].stats.remote(), timeout=60)
    result = runner(config, engines, spec, runner_per_model=4, gather_s=300.0).run(tasks(4))
    after = ray.get(engines[0].stats.remote(), timeout=60)
    assert len(result.experiences) == 16 and not result.failures
    assert (after["requests"] - before["requests"], after["batches"] - before["batches"]) == (4, 1)


def test_workflow_threads_share_one_proxy_safely(spec, engines, codec):
    proxy = RemoteEngine(engines[0], spec, codec, deadline=time.monotonic() + 120)
    results, errors = {}, []

    def call(index):
        try:
            prompt = proxy.encode(f"{index}*{index}=")
            results[index] = proxy.generate([prompt], SamplingParams(max_tokens=4, min_tokens=4), timeout=60)
        except Exception as exc:  # noqa: BLE001 - collected for the assert
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(index,)) for index in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors and sorted(results) == list(range(6))
    assert all(len(groups[0][0].response_ids) == 4 for groups in results.values())


def test_weights_pushed_to_the_actor_change_its_outputs(spec, engines, codec, tmp_path):
    other = ensure_tiny_model(
        dataclasses.replace(
            spec.built, model_path="", tiny=dataclasses.replace(spec.built.tiny, seed=2, cache_dir=str(tmp_path))
        )
    )
    proxy = RemoteEngine(engines[0], spec, codec, deadline=time.monotonic() + 120)
    prompt = [proxy.encode("8*8=")]
    greedy = SamplingParams(temperature=0, max_tokens=10)
    before = proxy.generate(prompt, greedy, timeout=60)[0][0]
    original = {name: tensor.numpy() for name, tensor in load_file(spec.model_path + "/model.safetensors").items()}
    ray.get(engines[0].update_weights.remote(load_file(other / "model.safetensors"), 5), timeout=60)
    try:
        after = proxy.generate(prompt, greedy, timeout=60)[0][0]
        assert proxy.model_version == 5 and after.model_version == 5
        assert after.response_ids != before.response_ids
        from trinity.model.load import load_causal_lm

        reference = load_causal_lm(str(other))
        with torch.no_grad():
            expected = reference.generate(
                torch.tensor(prompt), max_new_tokens=10, do_sample=False, attention_mask=torch.ones(1, len(prompt[0]))
            )[0, len(prompt[0]) :].tolist()
        assert after.response_ids == expected[: len(after.response_ids)]
    finally:
        ray.get(engines[0].update_weights.remote(original, 0), timeout=60)
    assert proxy.generate(prompt, greedy, timeout=60)[0][0].response_ids == before.response_ids
