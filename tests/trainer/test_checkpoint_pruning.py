"""trainer.max_actor_ckpt_to_keep / max_critic_ckpt_to_keep on a real PPO run that saves every step: only the
newest checkpoints stay (the critic's retention is separate), the "latest" pointer names a kept one,
and a rerun with more steps resumes from it and keeps pruning."""

from pathlib import Path

from tests.orchestration.conftest import small_config
from trinity.job_layout import completed_steps, critic_dir, latest_step, step_dir, steps_on_disk
from trinity.monitor import read_scalars
from trinity.orchestration.job import run_job

KEEP = [
    "algorithm=ppo",
    "trainer.save_interval=1",
    "trainer.max_actor_ckpt_to_keep=2",
    "trainer.max_critic_ckpt_to_keep=1",
]


def test_only_the_newest_checkpoints_are_kept_and_resume_works(ray_cluster, tmp_path):
    config = small_config(tmp_path, *KEEP, "buffer.total_steps=4")
    job = config.checkpoint_job_dir
    assert run_job(config)["trainer/step"] == 4
    assert steps_on_disk(job) == completed_steps(job) == [3, 4], sorted(p.name for p in Path(job).iterdir())
    assert latest_step(job) == 4
    assert [critic_dir(job, s).is_dir() for s in (3, 4)] == [False, True]  # one critic kept, two actors
    for step in (3, 4):
        assert (step_dir(job, step) / "actor" / "dcp" / ".metadata").exists()

    more = small_config(tmp_path, *KEEP, "buffer.total_steps=5")
    assert run_job(more)["trainer/step"] == 5
    assert steps_on_disk(job) == completed_steps(job) == [4, 5] and latest_step(job) == 5
    consumed = [int(v) for _, v in read_scalars(f"{job}/monitor/tensorboard/trainer")["sample/explore_step"]]
    assert consumed == [1, 2, 3, 4, 5], consumed  # step 5 resumed from step 4, nothing retrained or skipped
