"""The task function every launcher calls: validate the job's config, then dry-run or run it."""

import sys

from omegaconf import DictConfig

from trinity.config import ConfigError, validate
from trinity.config.describe import describe
from trinity.config.runtime import check_runnable


def run(cfg: DictConfig) -> dict:
    """Validate `cfg` (exit 1 with every problem listed); print it on dry_run, else run the experiment
    (all stages) and return its final metrics."""
    try:
        validated = validate(cfg)
        if not validated.configs[0].dry_run:
            check_runnable(validated)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(1) from None
    if validated.configs[0].dry_run:
        print(describe(validated))
        return {"dry_run": True, "stages": len(validated.configs)}
    from trinity.orchestration.stages import run_experiment

    return run_experiment(validated)
