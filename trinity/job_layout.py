"""The job directory's on-disk layout: step directories, the completion flag and the "latest" pointer.

`<job_dir>/global_step_N/actor/` holds the sharded training state (`dcp/`, per-rank
`extra_state_*.pt`), the HF export (`huggingface/`) and the weight shards published for checkpoint
sync; `global_step_N/critic/` holds the PPO critic's training state. A `.full_checkpoint` flag marks a
complete training checkpoint (directories written only for weight sync have none). The newest
complete one is named in `<job_dir>/latest_checkpointed_iteration.txt`. Trainer, explorer,
Synchronizer and orchestration all read this one description.
"""

import re
from pathlib import Path
from typing import List, Optional, Union

from trinity.atomic_file import atomic_write_text

LATEST = "latest_checkpointed_iteration.txt"
FULL_FLAG = ".full_checkpoint"
STEP_DIR = re.compile(r"^global_step_(\d+)$")


class CheckpointError(RuntimeError):
    """A checkpoint that should be there is missing or unreadable."""


def step_dir(job_dir: Union[str, Path], step: int) -> Path:
    return Path(job_dir) / f"global_step_{step}"


def actor_dir(job_dir: Union[str, Path], step: int) -> Path:
    """The actor's training state, HF export and published weight shards of step N."""
    return step_dir(job_dir, step) / "actor"


def critic_dir(job_dir: str, step: int) -> Path:
    return step_dir(job_dir, step) / "critic"


def flag_complete(job_dir: Union[str, Path], step: int) -> None:
    """Flag global_step_N as a full training checkpoint (its files are all written)."""
    (step_dir(job_dir, step) / FULL_FLAG).touch()


def point_latest(job_dir: Union[str, Path], step: int) -> None:
    """Name step N as the checkpoint to resume from: the last write of a checkpoint's commit."""
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


def steps_on_disk(job_dir: Union[str, Path]) -> List[int]:
    """Every step that has a directory (complete checkpoint or weights published for sync), ascending."""
    root = Path(job_dir)
    if not root.is_dir():
        return []
    return sorted(int(m.group(1)) for p in root.iterdir() if (m := STEP_DIR.match(p.name)))


def completed_steps(job_dir: Union[str, Path]) -> List[int]:
    """The steps whose directory holds a complete training checkpoint, ascending."""
    return [step for step in steps_on_disk(job_dir) if (step_dir(job_dir, step) / FULL_FLAG).exists()]
