"""The task function every launcher calls: run the job's validated config (dry-run or for real).

Under the trinity_ray launcher the config was validated once on the driver and is handed over
(`trinity.orchestration.handoff`); under any other launcher it is validated here."""

import sys

from hydra.errors import CompactHydraException
from omegaconf import DictConfig

from trinity.config import ConfigError, Validated
from trinity.config.describe import describe
from trinity.config.runtime import validate_to_run
from trinity.orchestration.handoff import handed


def run(cfg: DictConfig) -> dict:
    """Print the config on dry_run, else run the experiment (all stages) and return its final metrics.
    A config that was not handed over validated is validated first (exit 1 with every problem listed)."""
    validated = handed() or validate_or_exit(cfg)
    if validated.configs[0].dry_run:
        print(describe(validated))
        return {"dry_run": True, "stages": len(validated.configs)}
    from trinity.orchestration.failure import failure_block, ray_logs_dir, record_failure
    from trinity.orchestration.job import JobError
    from trinity.orchestration.job_lock import JobLockedError
    from trinity.orchestration.stages import run_experiment

    try:
        return run_experiment(validated)
    except JobLockedError as exc:
        raise RunRefused(str(exc)) from None
    except JobError as exc:
        block = failure_block(str(exc), exc.job_dir, record_failure(exc, exc.job_dir), ray_logs_dir())
        raise RunFailed(block) from None


class RunRefused(CompactHydraException):
    """A run that must not start (another run holds its job directory). Hydra prints a compact
    exception's message alone, without a traceback, and exits 1, also when it comes from a Ray task."""


class RunFailed(CompactHydraException):
    """A run that stopped for a diagnosed reason (a role failed, stalled or froze): its short block, printed
    without a traceback (that is in the job directory's failure.log)."""


def validate_or_exit(cfg: DictConfig) -> Validated:
    try:
        return validate_to_run(cfg)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(1) from None
