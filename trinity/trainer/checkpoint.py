"""Where checkpoints live in a job directory, which one to resume from, and which to prune.

Layout: `<job_dir>/global_step_N/actor/` holds the sharded training state (`dcp/`, per-rank
`extra_state_*.pt`) and the HF export (`huggingface/`); `global_step_N/critic/` holds the PPO
critic's training state the same way. A `.full_checkpoint` flag marks a complete training
checkpoint (directories written only for weight sync have none). The newest complete one is named
in `<job_dir>/latest_checkpointed_iteration.txt`, written atomically after the checkpoint.
"""

import re
import shutil
from pathlib import Path
from typing import List, Optional

from trinity.atomic_file import atomic_write_text
from trinity.config.trainer import ResumeMode, TrainerConfig

LATEST = "latest_checkpointed_iteration.txt"
FULL_FLAG = ".full_checkpoint"
STEP_DIR = re.compile(r"^global_step_(\d+)$")


class CheckpointError(RuntimeError):
    """A checkpoint that should be there is missing or unreadable."""


def step_dir(job_dir: str, step: int) -> Path:
    return Path(job_dir) / f"global_step_{step}"


def actor_dir(job_dir: str, step: int) -> Path:
    return step_dir(job_dir, step) / "actor"


def critic_dir(job_dir: str, step: int) -> Path:
    return step_dir(job_dir, step) / "critic"


def mark_complete(job_dir: str, step: int) -> None:
    """Flag global_step_N as a full checkpoint and make it the latest."""
    (step_dir(job_dir, step) / FULL_FLAG).touch()
    atomic_write_text(Path(job_dir) / LATEST, f"{step}\n")


def latest_step(job_dir: str) -> Optional[int]:
    """The newest complete checkpoint's step, or None for a fresh job; a corrupt tracker is an error."""
    path = Path(job_dir) / LATEST
    if not path.exists():
        return None
    text = path.read_text().strip()
    if not text.isdigit():
        raise CheckpointError(f"{path} holds {text!r}, not a step number; fix or remove it to start fresh")
    step = int(text)
    if not (step_dir(job_dir, step) / FULL_FLAG).exists():
        raise CheckpointError(f"{path} names step {step}, but {step_dir(job_dir, step)} is not a complete checkpoint")
    return step


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


def completed_steps(job_dir: str) -> List[int]:
    root = Path(job_dir)
    if not root.is_dir():
        return []
    steps = [int(m.group(1)) for p in root.iterdir() if (m := STEP_DIR.match(p.name)) and (p / FULL_FLAG).exists()]
    return sorted(steps)


def prune(job_dir: str, keep: Optional[int]) -> List[int]:
    """Delete all but the newest `keep` complete checkpoints; returns the steps removed."""
    if not keep:
        return []
    removed = completed_steps(job_dir)[:-keep]
    for step in removed:
        shutil.rmtree(actor_dir(job_dir, step), ignore_errors=True)
        shutil.rmtree(critic_dir(job_dir, step), ignore_errors=True)  # useless without its actor
        (step_dir(job_dir, step) / FULL_FLAG).unlink(missing_ok=True)
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
