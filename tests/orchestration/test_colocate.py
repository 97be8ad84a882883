"""mode=colocate end to end: one device process is the explorer's engine and the trainer's rank and holds the
explorer, the trainer and their experience queue; a run and a resume of it (the sweep test,
tests/orchestration/test_summary.py, runs colocated jobs)."""

import json
import subprocess
import sys
import time

import pytest
import ray

from tests.orchestration.conftest import actors_started_since, small_config
from trinity.job_layout import completed_steps
from trinity.monitor import read_scalars
from trinity.orchestration.job import JobError, run_job

COLOCATE = ["mode=colocate", "trainer.save_interval=2"]


def _versions(job_dir: str) -> list:
    """The model version each explore step rolled out with."""
    scalars = read_scalars(f"{job_dir}/monitor/tensorboard/explorer")
    return [int(value) for _, value in scalars["rollout/model_version"]]


def test_the_job_module_loads_no_torch():
    """The job starts every actor, colocate's device and the roles included, without importing torch."""
    code = "import sys\nimport trinity.orchestration.job\nassert 'torch' not in sys.modules, 'torch imported'\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def _run_in_fresh_task(config) -> tuple:
    """run_job as the launcher runs it, in a Ray task, on a worker of its own: (metrics, torch imported)."""

    def run(config) -> tuple:
        return run_job(config), "torch" in sys.modules

    fresh = {"env_vars": {"TRINITY_TEST_WORKER": str(time.time())}}  # a runtime env no worker has yet
    return ray.get(ray.remote(num_cpus=0, max_retries=0)(run).options(runtime_env=fresh).remote(config))


def test_colocate_runs_in_one_device_process_and_resumes_exactly(ray_cluster, tmp_path):
    since_ms = time.time() * 1000
    config = small_config(tmp_path, *COLOCATE, "buffer.total_steps=2")
    metrics, torch_in_job = _run_in_fresh_task(config)
    assert not torch_in_job, "the job's own process imported torch"
    assert metrics["trainer/step"] == 2 and metrics["explorer/step"] == 2 and metrics["explorer/model_version"] == 2
    started = actors_started_since(since_ms)
    assert started["trainer_rank_0"]["ActorClassName"] == "ColocatedDevice"
    assert not [name for name in started if name.startswith("explorer_engine")], started
    assert "explorer" not in started and "trainer" not in started, "the roles run inside the device process"
    assert not [name for name in started if name.startswith("queue-")], "the device hosts the experience queue"
    assert _versions(config.checkpoint_job_dir) == [0, 1], "synchronous: step s rolls out with version s-1"

    resumed = small_config(tmp_path, *COLOCATE, "buffer.total_steps=4")
    metrics = run_job(resumed)
    assert metrics["trainer/step"] == 4 and metrics["explorer/model_version"] == 4
    assert completed_steps(config.checkpoint_job_dir) == [2, 4]
    consumed = read_scalars(f"{config.checkpoint_job_dir}/monitor/tensorboard/trainer")["sample/explore_step"]
    assert [int(value) for _, value in consumed] == [1, 2, 3, 4], "each explore step trained once"
    assert _versions(config.checkpoint_job_dir) == [0, 1, 2, 3], "the resumed engine starts from step 2's weights"
    explorer = json.loads((tmp_path / "trinity" / "arithmetic" / "explorer_meta.json").read_text())
    assert explorer["taskset_states"][0]["current_index"] == 4 * 4


def test_a_role_the_device_cannot_build_fails_the_job_naming_it(ray_cluster, tmp_path):
    """The explorer's taskset disappears between validation and the run: the device's build of the explorer
    fails, the job stops at prepare naming the explorer and the cause, and leaves no actor behind."""
    config = small_config(tmp_path, *COLOCATE, "buffer.total_steps=1")
    config.data.builtin = None  # nothing regenerates it
    config.buffer.explorer_input.taskset.path = str(tmp_path / "deleted_train.jsonl")
    since_ms = time.time() * 1000
    with pytest.raises(JobError, match=r"prepare: the explorer of job .* failed: .*deleted_train"):
        run_job(config)
    started = actors_started_since(since_ms)
    assert started["trainer_rank_0"]["ActorClassName"] == "ColocatedDevice"
    assert not [name for name, actor in started.items() if actor["State"] != "DEAD"], started
