"""The launcher's work: compose every job, validate all trinity jobs at once, then run them on Ray.

A batch of trinity dry runs stays in this process and never starts Ray.
Otherwise Ray is started (or joined, per `cluster.ray_address` of the first trinity job) and every
job of the batch runs as a Ray task, so sweep jobs run concurrently as far as the cluster's
resources allow (each job reserves its devices as one placement group). A job's task runs Hydra's
`run_job` with the driver's Hydra state, as Hydra's own ray launcher does, so `HydraConfig` and
custom resolvers work inside it. Jobs of a multi-job batch get the sweep overrides appended to their
`name`, so their job directories and Ray namespaces never collide. On Ctrl-C or failure, the
detached actors (Synchronizer, buffer queue) of every job are removed.
"""

import copy
import logging
import sys
from pathlib import Path
from typing import List, Sequence

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, run_job, setup_globals
from hydra.version import VersionBase
from omegaconf import DictConfig, open_dict

logger = logging.getLogger(__name__)


def launch(launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> List[JobReturn]:
    setup_globals()
    config = launcher.config
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    Path(str(config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
    varying = _varying_overrides(job_overrides)
    sweep_configs = [
        _sweep_config(launcher, overrides, initial_job_idx + index, varying)
        for index, overrides in enumerate(job_overrides)
    ]
    validated = _preflight(sweep_configs)
    if all(v is not None and v.configs[0].dry_run for v in validated):
        return [_run_here(launcher, sweep_config) for sweep_config in sweep_configs]
    return _run_on_ray(launcher, sweep_configs, [v for v in validated if v is not None])


def _varying_overrides(job_overrides: Sequence[Sequence[str]]) -> List[str]:
    """The override keys whose values differ between the jobs of a batch (what the sweep sweeps)."""
    if len(job_overrides) < 2:
        return []
    values: dict = {}
    for overrides in job_overrides:
        for override in overrides:
            key, _, value = override.partition("=")
            values.setdefault(key, set()).add(value)
    present = [set(o.partition("=")[0] for o in overrides) for overrides in job_overrides]
    return sorted(key for key, seen in values.items() if len(seen) > 1 or any(key not in p for p in present))


def _sweep_config(launcher, overrides: Sequence[str], idx: int, varying: List[str]) -> DictConfig:
    """The job's composed config; in a sweep, a trinity job's `name` gets the swept values appended
    (`arithmetic/algorithm=grpo`), so job directories and namespaces never collide."""
    from trinity.config import is_trinity_config

    sweep_config = launcher.hydra_context.config_loader.load_sweep_config(launcher.config, list(overrides))
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"job_id_for_{idx}"
        sweep_config.hydra.job.num = idx
        sweep_config.hydra.sweep.dir = str(launcher.config.hydra.sweep.dir)  # one sweep dir for all jobs
        if varying and is_trinity_config(_job_config(sweep_config)):
            swept = [o for o in overrides if o.partition("=")[0] in varying and not o.startswith("hydra")]
            suffix = ",".join(o.lstrip("+~") for o in swept).replace("/", "_") or str(idx)
            sweep_config.name = f"{sweep_config.name}/{suffix}"
    return sweep_config


def _job_config(sweep_config: DictConfig) -> DictConfig:
    """The config the task function will see: the sweep config without the hydra node."""
    job = copy.deepcopy(sweep_config)
    with open_dict(job):
        del job["hydra"]
    return job


def _preflight(sweep_configs: List[DictConfig]) -> list:
    """Validate every trinity job before any job starts; report all problems of all jobs, exit 1.
    Returns each job's Validated (None for a job that is not a trinity config)."""
    from trinity.config import ConfigError, is_trinity_config, validate
    from trinity.config.runtime import check_runnable

    failures, validated = [], []
    for sweep_config in sweep_configs:
        HydraConfig.instance().set_config(sweep_config)
        job = _job_config(sweep_config)
        if not is_trinity_config(job):
            validated.append(None)
            continue
        try:
            result = validate(job)
            if not result.configs[0].dry_run:
                check_runnable(result)
        except ConfigError as exc:
            overrides = " ".join(sweep_config.hydra.overrides.task) or "(no overrides)"
            failures.append(f"job {sweep_config.hydra.job.num} [{overrides}]:\n{exc}")
            continue
        renamed = [note.new for note in result.notes if note.key == "name"]
        if renamed:  # a fresh run got a timestamped name: the job itself must use the same one
            with open_dict(sweep_config):
                sweep_config.name = renamed[0]
        validated.append(result)
    if failures:
        print("\n\n".join(failures), file=sys.stderr)
        raise SystemExit(1)
    return validated


def _run_here(launcher, sweep_config: DictConfig) -> JobReturn:
    HydraConfig.instance().set_config(sweep_config)
    result = run_job(
        hydra_context=launcher.hydra_context,
        task_function=launcher.task_function,
        config=sweep_config,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )
    configure_log(launcher.config.hydra.hydra_logging, launcher.config.hydra.verbose)
    return result


def _run_remote(hydra_context, sweep_config: DictConfig, task_function, singleton_state, version_base) -> JobReturn:
    """A job inside a Ray task: restore the driver's Hydra state, then run it like any launcher.

    The version base is restored explicitly: a reused worker may hold another app's (importing an app
    module runs its @hydra.main), and it decides whether the job changes directory."""
    setup_globals()
    Singleton.set_state(singleton_state)
    VersionBase.instance().setbase(version_base)
    HydraConfig.instance().set_config(sweep_config)
    return run_job(
        hydra_context=hydra_context,
        task_function=task_function,
        config=sweep_config,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )


def _run_on_ray(launcher, sweep_configs: List[DictConfig], validated: list) -> List[JobReturn]:
    import ray

    from trinity.orchestration.cluster import connect

    if validated:
        connect(validated[0].configs[0])
    elif not ray.is_initialized():
        ray.init(address="local", include_dashboard=False)
    remote = ray.remote(num_cpus=0, max_retries=0)(_run_remote)
    state = Singleton.get_state()
    base = VersionBase.instance().getbase()
    refs = [remote.remote(launcher.hydra_context, c, launcher.task_function, state, base) for c in sweep_configs]
    try:
        return ray.get(refs)
    except BaseException:
        for ref in refs:
            ray.cancel(ref, force=True)
        raise
    finally:
        for result in validated:
            for config in result.configs:
                _remove_detached(config)
        configure_log(launcher.config.hydra.hydra_logging, launcher.config.hydra.verbose)


def _remove_detached(config) -> None:
    """The Synchronizer and the queue outlive the task that made them; remove any that is left."""
    import ray

    from trinity.buffer.queue_storage import queue_actor_name

    names = ["synchronizer", queue_actor_name(config.buffer.trainer_input.experience_buffer.name)]
    for name in names:
        try:
            ray.kill(ray.get_actor(name, namespace=config.ray_namespace))
        except ValueError:
            pass  # already gone: the job cleaned up after itself
