"""Whether a rerun has anything left to do, read from the files a run commits last.

Rerunning a finished job should say so and stop, not start Ray and every actor to find nothing to do.
"Complete" is decided per mode against the *current* config (buffer.total_steps may grow on resume,
and then the run is not complete), only from files written crash-consistently:

- train / both: the "latest" pointer, the last write of a checkpoint's commit (after its completion
  flag and trainer metas, see `trinity.manager.state_actor`), names step N, the trainer meta of that
  checkpoint records N, and N reaches the train steps the config plans (buffer.total_steps, or what
  the data yields over buffer.total_epochs). A run stopped mid-way has a pointer short of that.
- explore: the explorer meta (written atomically after every step) records the planned explore steps.
- bench: never complete: benchmarking re-evaluates the checkpoints, nothing of it resumes.
- several stages: the stage file names the last stage (recorded when it started; a stage starts only
  after every earlier one returned) and that stage is complete.

Only with continue_from_checkpoint=true and, for the trainer, resume_mode=auto: otherwise a rerun
does not resume from this directory. A progress file that cannot be read means "not complete": the
run then starts and reports that file with its own clear error.
"""

import json
import logging
from pathlib import Path
from typing import Optional

from trinity.config.quota import planned_train_steps as planned_steps_of
from trinity.config.root import Config, Mode
from trinity.config.topology import TRAINER_MODES
from trinity.config.trainer import ResumeMode
from trinity.config.validate import Validated
from trinity.job_layout import CheckpointError, latest_step, step_dir
from trinity.manager.errors import StateError
from trinity.manager.state_actor import CHECKPOINT_META
from trinity.manager.state_manager import STAGE_FILE, StateManager

logger = logging.getLogger(__name__)

ALREADY_COMPLETE = "already_complete"  # the metric a run that had nothing to do returns


def completion_message(validated: Validated) -> Optional[str]:
    """What to tell the user when the experiment has nothing left to do; None when a run would do work."""
    configs = validated.configs
    if not configs[0].continue_from_checkpoint:
        return None
    try:
        if len(configs) == 1:
            detail = stage_done(configs[0])
            label = f"job {configs[0].name}"
        else:
            detail = _stages_done(validated)
            label = f"experiment {configs[0].name.rsplit('/', 1)[0]}"
    except (CheckpointError, StateError, OSError, ValueError) as exc:
        logger.info("Cannot tell whether the run is complete (%s): running it.", exc)
        return None
    if detail is None:
        return None
    return (
        f"{label} is already complete ({detail}); nothing to do — set continue_from_checkpoint=false "
        "(or another name) to run it again"
    )


def _stages_done(validated: Validated) -> Optional[str]:
    configs = validated.configs
    experiment_dir = Path(configs[0].checkpoint_job_dir).parent
    if not (experiment_dir / STAGE_FILE).exists():
        return None
    if StateManager(str(experiment_dir)).load_stage().get("latest_stage") != len(configs) - 1:
        return None
    last = stage_done(configs[-1])
    return None if last is None else f"all {len(configs)} stages; the last, {configs[-1].name}: {last}"


def stage_done(config: Config) -> Optional[str]:
    """For one job directory: a description of its finished progress, or None when work is left."""
    if config.mode in TRAINER_MODES:
        return _trainer_done(config)
    if config.mode == Mode.explore:
        return _explorer_done(config)
    return None


def _trainer_done(config: Config) -> Optional[str]:
    job_dir = config.checkpoint_job_dir
    if config.trainer.resume_mode != ResumeMode.auto:
        return None
    step = latest_step(job_dir)
    if step is None or _checkpoint_step(config, step) != step:
        return None
    total = planned_train_steps(config)
    if step < total:
        return None
    return f"trained {step}/{total} steps, last checkpoint {step_dir(job_dir, step).name} in {job_dir}"


def _checkpoint_step(config: Config, step: int) -> Optional[int]:
    """The step the checkpoint's own trainer meta records (else the job-level meta's), read-only."""
    path = step_dir(config.checkpoint_job_dir, step) / CHECKPOINT_META
    if not path.exists():
        path = Path(config.checkpoint_job_dir) / f"{config.trainer.name}_meta.json"
    if not path.exists():
        return None
    meta = json.loads(path.read_text(encoding="utf-8"))
    return meta.get("latest_iteration") if isinstance(meta, dict) else None


def _explorer_done(config: Config) -> Optional[str]:
    job_dir = config.checkpoint_job_dir
    if not Path(job_dir).is_dir():
        return None
    files = StateManager(job_dir, explorer_name=config.explorer.name)
    step = files.load_explorer().get("latest_iteration")
    total = planned_explore_steps(config)
    if step is None or step < total:
        return None
    return f"explored {step}/{total} steps, progress in {files.explorer_state_path}"


def planned_explore_steps(config: Config) -> int:
    """Explore steps the run takes: what the train taskset serves (`trinity.buffer.cursor.BatchCursor`)."""
    buffer = config.buffer
    if buffer.total_steps:
        return buffer.total_steps
    from trinity.buffer.taskset import train_taskset_reader

    return len(train_taskset_reader(config)) * buffer.total_epochs // buffer.batch_size


def planned_train_steps(config: Config) -> int:
    """Train steps the run takes, as the trainer plans them (`trinity.trainer.trainer.planned_train_steps`,
    which needs a built sample strategy; a test keeps the two equal)."""
    buffer, algorithm = config.buffer, config.algorithm
    if algorithm.trains_from_dataset:
        if buffer.total_steps:
            return buffer.total_steps
        from trinity.buffer.hf_data import load_local_dataset

        data = buffer.trainer_input.experience_buffer
        rows = len(load_local_dataset(data.path, data.split, data.subset_name, f"dataset '{data.name}'"))
        return max(1, rows * buffer.total_epochs // (buffer.train_batch_size // algorithm.rows_per_example))
    return planned_steps_of(config, planned_explore_steps(config))
