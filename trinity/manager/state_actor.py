"""The job's StateManager actor: the single writer of the job directory's progress files.

The job runner creates it (named `state_manager` in the job's Ray namespace) right after the
Synchronizer and before any trainer or explorer; both report their progress to it and it commits it.
One writer means one order: a trainer checkpoint is committed as (1) the trainer meta inside the
checkpoint's own step directory, (2) the completion flag, (3) the job-level trainer meta, and (4) the
"latest" pointer last — so the pointer never names a step whose meta is missing, and on resume the
meta that belongs to the pointed-to checkpoint is always at hand: a job-level meta that disagrees with
it (a crash between (3) and (4) of an earlier commit, or a hand-edited file) is repaired from the
checkpoint's copy and said so in the log; a checkpoint with neither is an error naming both files.
The seed's `StateManager` class does the file work and stays usable directly (stage progress of a
multi-stage run is recorded with it by the stage runner, above any single job).
"""

import json
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional

import ray

from trinity.atomic_file import atomic_write_text
from trinity.job_layout import STEP_DIR, actor_dir, flag_complete, latest_step, point_latest, step_dir
from trinity.manager.errors import StateError
from trinity.manager.state_manager import TRAINER_FIELDS, StateManager, field_problem

logger = logging.getLogger(__name__)

STATE_MANAGER_NAME = "state_manager"
CHECKPOINT_META = "trainer_meta.json"  # the trainer meta of one checkpoint, inside global_step_N/


class StateManagerActor:
    """Wraps a `StateManager` for one job directory; every method is one ordered, atomic commit or read."""

    def __init__(self, job_dir: str, trainer_name: str, explorer_name: str):
        self.job_dir = job_dir
        self.files = StateManager(job_dir, trainer_name=trainer_name, explorer_name=explorer_name)

    # ---- explorer ----------------------------------------------------------------------------------

    def load_explorer(self) -> dict:
        return self.files.load_explorer()

    def commit_explorer(self, step: int, taskset_states: List[Dict], model_version: int) -> None:
        self.files.save_explorer(step, taskset_states, model_version=model_version)

    # ---- trainer -----------------------------------------------------------------------------------

    def load_trainer(self, checkpoint: Optional[str] = None) -> dict:
        """The trainer meta of the job, as of its latest complete checkpoint (cross-checked, see above); with
        `checkpoint` (a global_step_N directory, see `resume_checkpoint`), the meta that checkpoint holds."""
        if checkpoint is not None:
            return self._meta_of(Path(checkpoint))
        step = latest_step(self.job_dir)
        meta = self.files.load_trainer()
        if step is None:
            return meta
        saved = self._checkpoint_meta(step)
        if saved is None:
            if meta.get("latest_iteration") != step:
                raise StateError(
                    str(self.files.trainer_state_path),
                    f"records step {meta.get('latest_iteration')} but the latest checkpoint is step {step} "
                    f"({step_dir(self.job_dir, step)}), which holds no {CHECKPOINT_META} to repair it from; "
                    "restore the meta file of that step, or start a new job",
                )
            return meta
        if meta != saved:
            logger.warning(
                "%s records step %s; the latest checkpoint is step %d: repaired from %s.",
                self.files.trainer_state_path,
                meta.get("latest_iteration"),
                step,
                step_dir(self.job_dir, step),
            )
            self.files.save_trainer(step, saved["sample_strategy_state"], saved.get("model_version"))
        return saved

    def commit_checkpoint(self, step: int, sample_strategy_state: dict, model_version: int) -> None:
        """Commit a trainer checkpoint whose files are written: meta beside it, flag, job meta, pointer."""
        if not actor_dir(self.job_dir, step).is_dir():
            raise StateError(str(actor_dir(self.job_dir, step)), "does not exist: the checkpoint was not written")
        meta = {"latest_iteration": step, "sample_strategy_state": dict(sample_strategy_state)}
        meta["model_version"] = model_version
        atomic_write_text(step_dir(self.job_dir, step) / CHECKPOINT_META, json.dumps(meta, indent=2) + "\n")
        flag_complete(self.job_dir, step)
        self.files.save_trainer(step, sample_strategy_state, model_version=model_version)
        point_latest(self.job_dir, step)

    def _meta_of(self, directory: Path) -> dict:
        """The trainer meta of a checkpoint named by trainer.resume_from_path (this job's or another's); one
        saved without a meta resumes at its step with a fresh buffer cursor."""
        match = STEP_DIR.match(directory.name)
        if match is None:
            raise StateError(str(directory), "is not a global_step_N checkpoint directory")
        step = int(match.group(1))
        meta = self._checkpoint_meta(step, directory / CHECKPOINT_META)
        if meta is None:
            logger.warning(
                "%s has no %s: resuming at step %d with a fresh buffer cursor.", directory, CHECKPOINT_META, step
            )
            return {"latest_iteration": step, "sample_strategy_state": {}}
        return meta

    def _checkpoint_meta(self, step: int, path: Optional[Path] = None) -> Optional[dict]:
        path = path or step_dir(self.job_dir, step) / CHECKPOINT_META
        if not path.exists():
            return None
        try:
            meta = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise StateError(str(path), f"is not valid JSON ({exc.msg} at line {exc.lineno})") from None
        problem = field_problem(meta, TRAINER_FIELDS) if isinstance(meta, dict) else "is not a JSON object"
        if problem:
            raise StateError(str(path), problem)
        if meta["latest_iteration"] != step:
            raise StateError(str(path), f"records step {meta['latest_iteration']} inside the directory of step {step}")
        return meta


def create_state_actor(config: Any, start_timeout_s: float = 120.0):
    """The job's StateManager actor, started (created by the job runner; get-if-exists, so a second call
    joins it). Returns once it is alive, so the trainer and explorer created next always find it."""
    handle = start_state_actor(config)
    wait_state_actor(handle, config, start_timeout_s)
    return handle


def start_state_actor(config: Any):
    """The job's StateManager actor, submitted: its process starts while the caller goes on (its name is
    registered at once, so `state_actor` finds it). `wait_state_actor` is the bounded wait for it."""
    return (
        ray.remote(StateManagerActor)
        .options(name=STATE_MANAGER_NAME, namespace=config.ray_namespace, get_if_exists=True, num_cpus=0)
        .remote(config.checkpoint_job_dir, config.trainer.name, config.explorer.name)
    )


def wait_state_actor(handle: Any, config: Any, start_timeout_s: float = 120.0) -> None:
    """Until the StateManager actor is alive; killed and a TimeoutError after `start_timeout_s`."""
    try:
        ray.get(handle.__ray_ready__.remote(), timeout=start_timeout_s)
    except ray.exceptions.GetTimeoutError:
        ray.kill(handle)
        raise TimeoutError(
            f"the StateManager actor of job {config.ray_namespace!r} did not start in {start_timeout_s:g} s"
        ) from None


def resume_checkpoint(config: Any) -> Optional[str]:
    """The checkpoint directory (global_step_N) the trainer resumes from when trainer.resume_mode=resume_path,
    else None (the job's own latest). The trainer and explorer both ask the StateManager actor for its meta
    with it, so they agree on the step they continue from."""
    trainer = config.trainer
    if str(trainer.resume_mode) != "resume_path":
        return None
    path = Path(trainer.resume_from_path).expanduser()
    return str(path.parent if path.name == "actor" else path)


def state_actor(config: Any):
    """The job's StateManager actor, for the trainer and explorer (which never create it)."""
    try:
        return ray.get_actor(STATE_MANAGER_NAME, namespace=config.ray_namespace)
    except ValueError:
        raise StateError(
            config.checkpoint_job_dir,
            f"has no StateManager actor in Ray namespace {config.ray_namespace!r}: the job runner "
            "(trinity.orchestration.job.run_job) creates it before the trainer and explorer",
        ) from None
