"""Before a run starts anything: one run per job directory, and nothing to do for a finished one.

Two callers, one rule. The launcher checks on the driver, before Ray starts (`check_before_start`):
a job whose directory another run holds is refused at once, and a batch whose jobs are all complete
is reported without starting Ray. The job itself (`exclusive_run`, in `run_experiment`, which a
launcher's Ray task, a test or any other caller runs) takes the lock for real, on the machine where
the job runs, and re-checks completion under it. The launcher only looks (it never holds the lock):
the job's Ray task is another process, which would otherwise be refused by its own driver's lock.
A second run that starts within the launcher's check-to-take window is refused by the job's take.
"""

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List, Optional

from trinity.config.validate import Validated
from trinity.orchestration.completion import completion_message
from trinity.orchestration.job_lock import JobLockedError, check_free, job_lock


def run_dir(validated: Validated) -> Path:
    """The directory one run owns: the job directory, or for several stages the experiment directory
    that holds them (and the stage file)."""
    configs = validated.configs
    job_dir = Path(configs[0].checkpoint_job_dir)
    return job_dir if len(configs) == 1 else job_dir.parent


def check_before_start(batch: List[Optional[Validated]]) -> List[Optional[str]]:
    """For the launcher, per job (None for a job that is not trinity's): the "already complete" message,
    or None when it has work. Raises JobLockedError naming every job whose directory is in use."""
    refusals = []
    for validated in batch:
        if validated is None:
            continue
        try:
            check_free(run_dir(validated))
        except JobLockedError as exc:
            refusals.append(str(exc))
    if refusals:
        raise JobLockedError("\n\n".join(refusals))
    return [None if validated is None else completion_message(validated) for validated in batch]


@contextmanager
def exclusive_run(validated: Validated) -> Iterator[Optional[str]]:
    """Hold the run's directory for the block; yields the "already complete" message (None: there is
    work to do). JobLockedError when another run holds it."""
    with job_lock(run_dir(validated)):
        yield completion_message(validated)
