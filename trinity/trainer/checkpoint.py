"""Which checkpoint the trainer resumes from, and which it prunes (the layout is `trinity.job_layout`)."""

import shutil
from pathlib import Path
from typing import List, Optional

from trinity.config.trainer import ResumeMode, TrainerConfig
from trinity.job_layout import FULL_FLAG, CheckpointError, actor_dir, completed_steps, critic_dir, latest_step, step_dir
from trinity.manager.state_actor import CHECKPOINT_META


def resume_dir(trainer: TrainerConfig, job_dir: str, continue_from_checkpoint: bool) -> Optional[Path]:
    """The actor directory to resume from, per trainer.resume_mode (None: start from the base model)."""
    if trainer.resume_mode == ResumeMode.disable or not continue_from_checkpoint:
        return None
    if trainer.resume_mode == ResumeMode.resume_path:
        path = Path(trainer.resume_from_path).expanduser()
        actor = path / "actor" if (path / "actor").is_dir() else path
        if not (actor / "dcp").is_dir():
            raise CheckpointError(f"trainer.resume_from_path {path} holds no training checkpoint (no actor/dcp)")
        return actor
    step = latest_step(job_dir)
    return None if step is None else actor_dir(job_dir, step)


def prune(job_dir: str, keep: Optional[int]) -> List[int]:
    """Delete all but the newest `keep` complete checkpoints; returns the steps removed."""
    if not keep:
        return []
    removed = completed_steps(job_dir)[:-keep]
    for step in removed:
        (step_dir(job_dir, step) / FULL_FLAG).unlink(missing_ok=True)  # first: never a flagged partial checkpoint
        shutil.rmtree(actor_dir(job_dir, step), ignore_errors=True)
        shutil.rmtree(critic_dir(job_dir, step), ignore_errors=True)  # useless without its actor
        (step_dir(job_dir, step) / CHECKPOINT_META).unlink(missing_ok=True)
        if not any(step_dir(job_dir, step).iterdir()):
            step_dir(job_dir, step).rmdir()
    return removed


def prune_critic(job_dir: str, keep: Optional[int]) -> List[int]:
    """Delete the critic of all but the newest `keep` complete checkpoints; returns the steps cleared."""
    if not keep:
        return []
    removed = [step for step in completed_steps(job_dir)[:-keep] if critic_dir(job_dir, step).is_dir()]
    for step in removed:
        shutil.rmtree(critic_dir(job_dir, step))
    return removed
