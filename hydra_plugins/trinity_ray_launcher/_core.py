"""The launcher's work: compose every job, validate all trinity jobs at once, then run them on Ray.

A batch of trinity dry runs stays in this process and never starts Ray, and so does a batch that has
nothing to do: a job whose directory another run holds exits 1 naming it, and a batch whose jobs are
all complete says so and exits 0 (`trinity.orchestration.run_gate`). A batch of one trinity job runs in
this process too, starting (or joining) Ray itself.
Otherwise Ray is started (or joined, per `cluster.ray_address` of the first trinity job) and every
job of the batch runs as a Ray task, so sweep jobs run concurrently as far as the cluster's
resources allow (each job reserves its devices as one placement group). A job's task runs Hydra's
`run_job` with the driver's Hydra state, as Hydra's own ray launcher does, so `HydraConfig` and
custom resolvers work inside it, and the job's config as validated here is handed to it
(`trinity.orchestration.handoff`), so each job is validated exactly once. Jobs of a multi-job batch
get the sweep overrides appended to their `name`, so their job directories and Ray namespaces never
collide. On Ctrl-C or failure the jobs' tasks are cancelled, and each job removes its own actors.
"""

import copy
import logging
import sys
from pathlib import Path
from typing import List, Optional, Sequence

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, run_job, setup_globals
from hydra.version import VersionBase
from omegaconf import DictConfig, open_dict

logger = logging.getLogger(__name__)

CANCEL_GRACE_S = 60.0  # how long a cancelled job may take to remove its actors before its task is killed


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
        return [_run_here(launcher, c, v) for c, v in zip(sweep_configs, validated, strict=True)]
    finished = _already_complete(sweep_configs, validated)
    if finished is not None:
        return finished
    if len(validated) == 1 and validated[0] is not None:
        return [_run_one_here(launcher, sweep_configs[0], validated[0])]
    return _run_on_ray(launcher, sweep_configs, validated)


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

    sweep_config = launcher.composed.pop(tuple(overrides), None)  # composed by the sweeper to check the batch
    if sweep_config is None:
        sweep_config = launcher.compose_job(launcher.config, list(overrides))
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
    """Validate every trinity job, once, before any job starts; report all problems of all jobs, exit 1.
    Returns each job's Validated (None for a job that is not a trinity config): it is handed to the job."""
    from trinity.config import ConfigError, is_trinity_config
    from trinity.config.runtime import validate_to_run

    failures, validated = [], []
    for sweep_config in sweep_configs:
        HydraConfig.instance().set_config(sweep_config)
        job = _job_config(sweep_config)
        if not is_trinity_config(job):
            validated.append(None)
            continue
        try:
            validated.append(validate_to_run(job))
        except ConfigError as exc:
            overrides = " ".join(sweep_config.hydra.overrides.task) or "(no overrides)"
            failures.append(f"job {sweep_config.hydra.job.num} [{overrides}]:\n{exc}")
    if failures:
        print("\n\n".join(failures), file=sys.stderr)
        raise SystemExit(1)
    return validated


def _already_complete(sweep_configs: List[DictConfig], validated: list) -> Optional[List[JobReturn]]:
    """Before Ray starts: exit 1 when another run holds a job's directory; when every job of the batch
    is already complete, say so and return without starting Ray (None: the batch has work to do)."""
    from trinity.orchestration.completion import ALREADY_COMPLETE
    from trinity.orchestration.job_lock import JobLockedError
    from trinity.orchestration.run_gate import check_before_start

    try:
        messages = check_before_start(validated)
    except JobLockedError as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(1) from None
    if any(v is None or m is None for v, m in zip(validated, messages, strict=True)):
        return None
    for message in messages:
        print(message)
    done = {ALREADY_COMPLETE: 1.0}
    return [
        JobReturn(list(c.hydra.overrides.task), _job_config(c), c, status=JobStatus.COMPLETED, _return_value=done)
        for c in sweep_configs
    ]


def _run_here(launcher, sweep_config: DictConfig, validated) -> JobReturn:
    from trinity.orchestration.handoff import handed_over

    HydraConfig.instance().set_config(sweep_config)
    with handed_over(validated):
        result = run_job(
            hydra_context=launcher.hydra_context,
            task_function=launcher.task_function,
            config=sweep_config,
            job_dir_key="hydra.sweep.dir",
            job_subdir_key="hydra.sweep.subdir",
        )
    configure_log(launcher.config.hydra.hydra_logging, launcher.config.hydra.verbose)
    return result


def _run_one_here(launcher, sweep_config: DictConfig, validated) -> JobReturn:
    """A batch of one trinity job runs in this process: a Ray task would isolate it from nothing and cost a
    worker process (~150 MB, held for the run) and its start (~1 s before the job's first actor starts).
    The job starts Ray itself; on Ctrl-C it removes its actors on the way out."""
    try:
        result = _run_here(launcher, sweep_config, validated)
    except KeyboardInterrupt:
        print("interrupted: stopped; a rerun resumes from the last checkpoint", file=sys.stderr)
        raise SystemExit(130) from None
    _report(launcher, [result], [validated])
    return result


def _run_remote(hydra_context, sweep_config: DictConfig, task_function, singleton_state, version_base, validated):
    """A job inside a Ray task: restore the driver's Hydra state, then run it like any launcher, with
    the job's config as the driver validated it handed over (None for a config that is not trinity's).
    A generator task: it yields the job's console output and progress to the driver as they happen
    (`trinity.reporting.console`), then its JobReturn.

    The version base is restored explicitly: a reused worker may hold another app's (importing an app
    module runs its @hydra.main), and it decides whether the job changes directory."""
    from trinity.orchestration.handoff import handed_over
    from trinity.reporting.console import relayed

    setup_globals()
    Singleton.set_state(singleton_state)
    VersionBase.instance().setbase(version_base)
    HydraConfig.instance().set_config(sweep_config)

    def run() -> JobReturn:
        with handed_over(validated):
            return run_job(
                hydra_context=hydra_context,
                task_function=task_function,
                config=sweep_config,
                job_dir_key="hydra.sweep.dir",
                job_subdir_key="hydra.sweep.subdir",
            )

    yield from relayed(run)


def _run_on_ray(launcher, sweep_configs: List[DictConfig], validated: list) -> List[JobReturn]:
    import ray

    from trinity.orchestration.cluster import connect, start_private_cluster
    from trinity.reporting.console import drive

    trinity_jobs = [v for v in validated if v is not None]
    if trinity_jobs:
        connect(trinity_jobs[0].configs[0])
    elif not ray.is_initialized():  # another app's jobs (Hydra's launcher suites): the machine's resources
        ray.init(address=start_private_cluster(num_cpus=None, num_gpus=None).address, logging_level=logging.WARNING)
    remote = ray.remote(num_cpus=0, max_retries=0)(_run_remote)
    state = Singleton.get_state()
    base = VersionBase.instance().getbase()
    jobs = [
        remote.remote(launcher.hydra_context, c, launcher.task_function, state, base, v)
        for c, v in zip(sweep_configs, validated, strict=True)
    ]
    try:
        results = drive(jobs, [v.configs[0].name if v is not None else f"job {i}" for i, v in enumerate(validated)])
    except KeyboardInterrupt:
        print("interrupted: stopping the jobs (each removes its actors) ...", file=sys.stderr, flush=True)
        _cancel(jobs)
        print("interrupted: stopped; a rerun resumes from the last checkpoint", file=sys.stderr)
        raise SystemExit(130) from None
    except BaseException:
        _cancel(jobs)
        raise
    finally:
        configure_log(launcher.config.hydra.hydra_logging, launcher.config.hydra.verbose)
    _report(launcher, results, validated)
    return results


def _report(launcher, results: List[JobReturn], validated: list) -> None:
    """Print the end-of-run tables here, on the driver, from the summaries the completed trinity jobs
    wrote; a batch of several jobs is compared as a sweep (files in the sweep dir). A failed job's error
    is Hydra's to raise."""
    from trinity.reporting.report import report

    finished = [v for r, v in zip(results, validated, strict=True) if v is not None and r.status == JobStatus.COMPLETED]
    if finished:
        sweep = sum(v is not None for v in validated) > 1
        report(finished, str(launcher.config.hydra.sweep.dir) if sweep else None)


def _cancel(jobs: list, grace_s: float = CANCEL_GRACE_S) -> None:
    """Stop the jobs' tasks so that each cleans up after itself: a plain cancel interrupts a task, whose
    job then removes its actors; a task still running after `grace_s` is killed (its non-detached
    actors die with it, the detached Synchronizer exits once its modules are gone)."""
    import ray

    for job in jobs:
        ray.cancel(job)
    ends = {job.completed(): job for job in jobs}
    _, running = ray.wait(list(ends), num_returns=len(ends), timeout=grace_s)
    for end in running:
        logger.warning("a job did not stop within %g s of its cancellation: killing its task", grace_s)
        ray.cancel(ends[end], force=True)
