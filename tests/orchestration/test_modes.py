"""Each mode end to end on the tiny model: train (sft), both (grpo), explore and bench from checkpoints."""

import json
import time

import ray

from tests.orchestration.conftest import actors_started_since, small_config
from trinity.job_layout import completed_steps
from trinity.monitor import read_scalars
from trinity.orchestration.job import run_job

SFT = [
    "algorithm=sft",
    "buffer.total_steps=3",
    "buffer.train_batch_size=8",
    "trainer.save_interval=1",
    "buffer.trainer_input.experience_buffer.path=${data.dir}/sft.jsonl",
    "buffer.trainer_input.experience_buffer.format.prompt_type=plaintext",
    "buffer.trainer_input.experience_buffer.format.prompt_key=question",
    "buffer.trainer_input.experience_buffer.format.response_key=answer",
]


def test_train_mode_sft_then_explore_and_bench_from_its_checkpoints(ray_cluster, tmp_path):
    sft = small_config(tmp_path, *SFT, "name=shared")
    metrics = run_job(sft)
    assert metrics["trainer/step"] == 3
    assert completed_steps(sft.checkpoint_job_dir) == [1, 2, 3]
    losses = [v for _, v in read_scalars(f"{sft.checkpoint_job_dir}/monitor")["actor/sft_loss"]]
    assert len(losses) == 3 and losses[-1] < losses[0]

    # an explorer in mode explore in the same job directory picks up the latest checkpoint's weights
    explore = small_config(
        tmp_path, "mode=explore", "name=shared", "buffer.total_steps=2", "synchronizer.sync_interval=1"
    )
    assert explore.synchronizer.sync_method == "checkpoint"
    metrics = run_job(explore)
    assert metrics["explorer/step"] == 2 and metrics["explorer/model_version"] == 3

    bench = small_config(tmp_path, "mode=bench", "name=shared")
    run_job(bench)
    table = json.loads((tmp_path / "trinity" / "shared" / "bench_results.json").read_text())
    assert sorted(int(step) for step in table) == [1, 2, 3]
    assert all("eval/arithmetic_test/reward/mean" in metrics for metrics in table.values())
    assert not ray.util.list_named_actors(all_namespaces=True), "the jobs left actors behind"


def test_both_mode_grpo_with_off_policy_offset(ray_cluster, tmp_path):
    config = small_config(tmp_path, "buffer.total_steps=3", "synchronizer.sync_offset=1", "trainer.save_interval=0")
    since_ms = time.time() * 1000
    metrics = run_job(config)
    assert metrics["trainer/step"] == 3 and metrics["explorer/step"] == 3
    scalars = read_scalars(f"{config.checkpoint_job_dir}/monitor/tensorboard/trainer")
    lags = [v for _, v in scalars["sample/version_lag_max"]]
    assert lags[1:] == [1.0, 1.0], lags  # one-step off-policy: step s trains on version s-2 experiences
    started = {name: actor["StartTime"] for name, actor in actors_started_since(since_ms).items()}
    # the job's bookkeeping actors exist before the roles that look them up by name
    assert max(started["synchronizer"], started["state_manager"]) <= min(started["explorer"], started["trainer"])
