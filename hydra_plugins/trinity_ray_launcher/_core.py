"""The launcher's work: compose every job, validate all trinity jobs at once, then run each job."""

import copy
import sys
from pathlib import Path
from typing import List, Sequence

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, configure_log, run_job, setup_globals
from omegaconf import DictConfig, open_dict


def launch(launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> List[JobReturn]:
    setup_globals()
    config = launcher.config
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    Path(str(config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
    sweep_configs = [
        _sweep_config(launcher, overrides, initial_job_idx + index) for index, overrides in enumerate(job_overrides)
    ]
    _preflight(sweep_configs)
    returns = []
    for sweep_config in sweep_configs:
        HydraConfig.instance().set_config(sweep_config)
        returns.append(
            run_job(
                hydra_context=launcher.hydra_context,
                task_function=launcher.task_function,
                config=sweep_config,
                job_dir_key="hydra.sweep.dir",
                job_subdir_key="hydra.sweep.subdir",
            )
        )
        configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    return returns


def _sweep_config(launcher, overrides: Sequence[str], idx: int) -> DictConfig:
    sweep_config = launcher.hydra_context.config_loader.load_sweep_config(launcher.config, list(overrides))
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"job_id_for_{idx}"
        sweep_config.hydra.job.num = idx
    return sweep_config


def _job_config(sweep_config: DictConfig) -> DictConfig:
    """The config the task function will see: the sweep config without the hydra node."""
    job = copy.deepcopy(sweep_config)
    with open_dict(job):
        del job["hydra"]
    return job


def _preflight(sweep_configs: List[DictConfig]) -> None:
    """Validate every trinity job before any job starts; report all problems of all jobs, exit 1."""
    from trinity.config import ConfigError, is_trinity_config, validate

    failures = []
    for sweep_config in sweep_configs:
        HydraConfig.instance().set_config(sweep_config)
        job = _job_config(sweep_config)
        if not is_trinity_config(job):
            continue
        try:
            validate(job)
        except ConfigError as exc:
            overrides = " ".join(sweep_config.hydra.overrides.task) or "(no overrides)"
            failures.append(f"job {sweep_config.hydra.job.num} [{overrides}]:\n{exc}")
    if failures:
        print("\n\n".join(failures), file=sys.stderr)
        raise SystemExit(1)
