"""trainer.resume_mode at run time, against a job directory a real run left (checkpoints at steps 1-3):
resume_path continues from the step it names (trainer and explorer together), disable starts afresh in
a new timestamped directory (as continue_from_checkpoint=false does) and leaves the old one alone, a bad
resume path is refused before Ray starts, and a truncated checkpoint shard is an error naming the file
and the step whose advice (resume from the previous checkpoint) works."""

import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import problems, run_cli
from tests.orchestration.conftest import SMALL, small_config
from trinity.config import compose, validate
from trinity.job_layout import completed_steps, latest_step
from trinity.monitor import read_scalars
from trinity.orchestration.cluster import PRIVATE_CLUSTER_STARTED
from trinity.orchestration.job import JobError, run_job
from trinity.orchestration.stages import run_experiment

RUN = ["buffer.total_steps=3", "trainer.save_interval=1"]


@pytest.fixture(scope="module")
def finished(ray_cluster, tmp_path_factory) -> Path:
    """A finished 3-step run that checkpointed every step; tests work on copies of its directory."""
    root = tmp_path_factory.mktemp("finished")
    config = small_config(root, *RUN)
    assert run_job(config)["trainer/step"] == 3
    return root


def copy_of(finished: Path, tmp_path: Path) -> Path:
    shutil.copytree(finished, tmp_path, dirs_exist_ok=True)
    return tmp_path / "trinity" / "arithmetic"


def trained_since(job: Path, since: float) -> list:
    """Train steps (re)logged after `since` (wall time)."""
    scalars = read_scalars(str(job / "monitor" / "tensorboard" / "trainer"), wall_time=True)
    return [step for step, wall, _ in scalars["actor/pg_loss"] if wall >= since]


def test_resume_path_continues_from_the_step_it_names(finished, tmp_path):
    job = copy_of(finished, tmp_path)
    started = time.time()
    config = small_config(
        tmp_path, *RUN, "trainer.resume_mode=resume_path", f"trainer.resume_from_path={job}/global_step_1"
    )
    metrics = run_job(config)
    assert metrics["trainer/step"] == 3 and trained_since(job, started) == [2, 3]
    consumed = [
        int(v) for _, v in read_scalars(str(job / "monitor" / "tensorboard" / "trainer"))["sample/explore_step"]
    ]
    assert consumed == [1, 2, 3], consumed  # the explorer rolled back with the trainer: steps 2, 3 re-explored
    explorer = read_scalars(str(job / "monitor" / "tensorboard" / "explorer"), wall_time=True)
    assert [(s, int(v)) for s, w, v in explorer["rollout/model_version"] if w >= started] == [(2, 1), (3, 2)]
    assert latest_step(str(job)) == 3 and completed_steps(str(job)) == [1, 2, 3]


def test_disable_starts_afresh_in_a_new_directory(finished, tmp_path):
    old = copy_of(finished, tmp_path)
    pointer = (old / "latest_checkpointed_iteration.txt").stat().st_mtime_ns
    validated = validate(compose([f"checkpoint_root_dir={tmp_path}", *SMALL, *RUN, "trainer.resume_mode=disable"]))
    config = validated.configs[0]
    assert config.name.startswith("arithmetic_") and Path(config.checkpoint_job_dir) != old
    assert any("resume_mode=disable" in str(note) for note in validated.notes)
    started = time.time()
    assert run_experiment(validated)["trainer/step"] == 3
    fresh = Path(config.checkpoint_job_dir)
    assert trained_since(fresh, started) == [1, 2, 3] and completed_steps(str(fresh)) == [1, 2, 3]
    assert (old / "latest_checkpointed_iteration.txt").stat().st_mtime_ns == pointer  # untouched
    assert not trained_since(old, started)


def test_a_resume_path_that_is_no_checkpoint_is_refused_before_ray(tmp_path):
    (tmp_path / "global_step_5").mkdir()
    found = problems("trainer.resume_mode=resume_path", f"trainer.resume_from_path={tmp_path}/global_step_5")
    problem = found["trainer.resume_from_path"]
    assert "no training checkpoint" in problem.rule and problem.fix and problem.value == f"{tmp_path}/global_step_5"
    result = run_cli(
        f"checkpoint_root_dir={tmp_path}",
        "stages=[]",
        "trainer.resume_mode=resume_path",
        f"trainer.resume_from_path={tmp_path}/nowhere/global_step_2",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert f"trainer.resume_from_path = '{tmp_path}/nowhere/global_step_2': does not exist" in result.stderr
    assert PRIVATE_CLUSTER_STARTED not in result.stderr


def test_a_truncated_shard_names_its_file_and_step(finished, tmp_path):
    job = copy_of(finished, tmp_path)
    shard = job / "global_step_3" / "actor" / "dcp" / "__0_0.distcp"
    size = shard.stat().st_size
    with open(shard, "r+b") as handle:
        handle.truncate(size // 2)
    with pytest.raises(JobError) as failure:
        run_job(small_config(tmp_path, "buffer.total_steps=4", "trainer.save_interval=1"))
    message = str(failure.value)
    assert f"{shard} is truncated ({size // 2} bytes; its .metadata expects {size})" in message
    assert "the checkpoint of step 3" in message
    advice = f"trainer.resume_mode=resume_path trainer.resume_from_path={job / 'global_step_2'}"
    assert advice in message and "CheckpointException" not in message

    started = time.time()  # the advice works: resume from step 2, train 3 and 4 (rewriting the damaged step)
    config = small_config(tmp_path, "buffer.total_steps=4", "trainer.save_interval=1", *advice.split())
    assert run_job(config)["trainer/step"] == 4
    assert trained_since(job, started) == [3, 4] and latest_step(str(job)) == 4
