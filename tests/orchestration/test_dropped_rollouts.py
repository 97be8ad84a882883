"""Dropped rollouts never deadlock (issue 12): a step left short of the trainer's batch by failed tasks or
filtered groups explores more tasks, and when that cannot help the run stops with an error that names the
explorer and the cause, never a sync timeout that blames the trainer."""

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.orchestration.conftest import small_config
from trinity.monitor import read_scalars
from trinity.orchestration.job import JobError, run_job

PLUGINS = "tests.explorer.plugins"
FILTER = "+algorithm.advantage_fn_args.std_threshold=0.0"
REWARD = "buffer.explorer_input.default_reward_fn_type"


def test_the_repro_ends_with_the_filter_named(tmp_path):
    """The issue's repro (every group of the base model's rollouts is flat), on the CLI: a short block names
    the cause, the job dir and the logs; the traceback is in the job dir. It runs first in this module, with
    its own Ray, before the module's in-process cluster starts."""
    result = run_cli(
        f"checkpoint_root_dir={tmp_path}",
        "stages=[]",
        "buffer.batch_size=4",
        "algorithm.repeat_times=4",
        FILTER,
        "synchronizer.sync_timeout=600",
        "explorer.max_extra_explore_steps=2",
        "explorer.eval_on_startup=false",
        timeout=900,
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert "the explorer of job" in result.stderr and "explore step 1 left the trainer's batch" in result.stderr
    filtered = "groups filtered by std_threshold=0.0 (groups whose rewards do not vary) for 3 steps: no group passes"
    assert filtered in result.stderr
    assert "timed out" not in result.stderr and "SyncError" not in result.stderr
    job = tmp_path / "trinity" / "arithmetic"
    assert "Traceback" not in result.stderr and f"job dir:   {job}" in result.stderr
    assert len(result.stderr.strip().splitlines()) < 15, result.stderr
    assert f"traceback: {job / 'failure.log'}" in result.stderr and "Ray logs:" in result.stderr
    logged = (job / "failure.log").read_text()
    assert "Traceback" in logged and "ExploreStarved" in logged and "trinity/explorer" in logged, "the actor's frames"
    assert "\x1b[" not in logged, "plain text, no terminal colours"


@pytest.mark.parametrize(
    "drop",
    [[FILTER, f"{REWARD}={PLUGINS}.flat_for_even_answers"], [f"{REWARD}={PLUGINS}.raises_for_even_answers"]],
    ids=["groups-filtered", "tasks-failed"],
)
def test_short_steps_are_topped_up_and_every_step_trains(ray_cluster, tmp_path, drop):
    config = small_config(
        tmp_path, "buffer.total_steps=3", "trainer.save_interval=0", "explorer.max_retry_times=0", *drop
    )
    metrics = run_job(config)
    assert metrics["trainer/step"] == 3 and metrics["explorer/step"] == 3
    job = Path(config.checkpoint_job_dir)
    explorer = read_scalars(str(job / "monitor" / "tensorboard" / "explorer"))
    extra = [value for _, value in explorer["explore/extra_steps"]]
    written = [value for _, value in explorer["explore/experiences_written"]]
    assert len(extra) == 3 and sum(extra) > 0, extra  # about half of each read is dropped
    assert sum(written) >= 3 * 16, written
    dropped = explorer["advantage/filtered_count" if FILTER in drop else "rollout/tasks_failed"]
    assert sum(value for _, value in dropped) > 0
    sizes = [value for _, value in read_scalars(str(job / "monitor" / "tensorboard" / "trainer"))["batch/size"]]
    assert sizes == [16.0, 16.0, 16.0], sizes  # every train batch full
    taskset = json.loads((job / "explorer_meta.json").read_text())["taskset_states"][0]
    assert taskset == {"current_index": 4 * (3 + int(sum(extra))), "experiences_written": int(sum(written))}


def test_a_reward_function_that_always_raises_ends_the_run_naming_the_failures(ray_cluster, tmp_path):
    config = small_config(
        tmp_path, "buffer.total_steps=3", f"{REWARD}={PLUGINS}.failing_reward", "explorer.max_retry_times=1"
    )
    with pytest.raises(JobError) as info:
        run_job(config)
    message = str(info.value)
    assert "the explorer of job" in message and "all 8 tasks of explore step 1 (2 explore steps) failed" in message
    assert "after 2 attempt(s) each (last error: RuntimeError: reward exploded)" in message
    meta = json.loads((Path(config.checkpoint_job_dir) / "explorer_meta.json").read_text())
    assert meta["latest_iteration"] == 0, meta  # the failed step is not recorded: a rerun explores it again
    assert meta["taskset_states"] == [{"current_index": 0, "experiences_written": 0}]


def test_a_rerun_continues_the_count_of_rows_written(ray_cluster, tmp_path):
    """File buffer: the rows written so far are saved with each step, so a rerun that extends the run owes
    the trainer exactly the batches it has not trained, and no step is explored or written twice."""
    common = ["buffer=file", "trainer.save_interval=1", FILTER, f"{REWARD}={PLUGINS}.flat_for_even_answers"]
    run_job(small_config(tmp_path, *common, "buffer.total_steps=2"))
    again = small_config(tmp_path, *common, "buffer.total_steps=3")
    assert run_job(again)["trainer/step"] == 3
    job = Path(again.checkpoint_job_dir)
    explorer = read_scalars(str(job / "monitor" / "tensorboard" / "explorer"))
    assert [step for step, _ in explorer["explore/experiences_written"]] == [1, 2, 3]
    written = sum(value for _, value in explorer["explore/experiences_written"])
    extra = sum(value for _, value in explorer["explore/extra_steps"])
    sizes = [value for _, value in read_scalars(str(job / "monitor" / "tensorboard" / "trainer"))["batch/size"]]
    assert sizes == [16.0, 16.0, 16.0], sizes
    taskset = json.loads((job / "explorer_meta.json").read_text())["taskset_states"][0]
    assert taskset == {"current_index": 4 * (3 + int(extra)), "experiences_written": int(written)}
    rows = Path(again.buffer.trainer_input.experience_buffer.path).read_text().splitlines()
    assert len(rows) == written and sorted({json.loads(row)["batch_id"] for row in rows}) == ["1", "2", "3"]
