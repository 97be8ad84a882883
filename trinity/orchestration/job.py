"""Running one validated (stage) config in its mode, from any process: a launcher's job, a sweep task, a test.

Per job (the launcher runs this in one Ray task per job): generate the built-in dataset if the config
asks for one; join or start Ray; on a cluster of several nodes, check that every node sees the job dir
(`shared_root`); reserve the job's devices as one placement group; start the job's actors, the slowest
to load first (colocate's device process), then the queue actor (colocate's device hosts its queue
instead), the StateManager (the single writer of the job's progress files) and the Synchronizer, then
the explorer and trainer: each takes seconds to import and load, and does so while the next starts;
all are named in the job's own Ray namespace; prepare them; run; collect their final metrics; and
remove every actor of the job — also when it fails or is interrupted. This is the one owner of a
job's cleanup.
"""

import importlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Tuple

import ray

from trinity.buffer.queue_storage import destroy_queue, start_queue_actor
from trinity.buffer.taskset import read_train_table
from trinity.config.buffer import ExperienceBufferConfig, StorageType
from trinity.config.data import BuiltinDataset
from trinity.config.root import Config, Mode
from trinity.config.topology import EXPLORER_MODES, TRAINER_MODES, colocated_device_name, served_engines
from trinity.explorer.engine_actor import wait_started
from trinity.logs import apply_log_level
from trinity.manager import Synchronizer
from trinity.manager.state_actor import start_state_actor, wait_state_actor
from trinity.orchestration.cluster import connect, engine_bundle, rank_bundle, release, reserve
from trinity.orchestration.colocated import host_role, start_colocated_device
from trinity.orchestration.job_lock import job_lock
from trinity.orchestration.probe import ANSWER_SECONDS, unresponsive_actors
from trinity.orchestration.roles import ROLE_ACTORS
from trinity.orchestration.shared_root import check_shared_root
from trinity.placement import in_bundle
from trinity.reporting.console import progress_view

logger = logging.getLogger(__name__)


class JobError(RuntimeError):
    """A job's explorer or trainer failed or stalled; the message names which and why. `frozen` holds the
    roles that stopped answering: cleanup kills them without waiting for a graceful shutdown. `job_dir` is
    the failed job's directory, set on the way out of `run_job`."""

    def __init__(self, message: str, frozen: Tuple[str, ...] = ()):
        super().__init__(message)
        self.frozen = frozen
        self.job_dir: Optional[str] = None


def prepare_data(config: Config) -> None:
    """Generate the built-in dataset (idempotent) before anything reads it."""
    if config.data.builtin is not None:  # trinity.data.<name>.ensure_dataset with config.data.<name>
        name = BuiltinDataset(config.data.builtin).value
        generator = importlib.import_module(f"trinity.data.{name}")
        generator.ensure_dataset(config.data.dir, getattr(config.data, name))


def engine_bundles(config: Config) -> List[dict]:
    """The explorer's devices: rollout engine replicas, then those of each served auxiliary model."""
    if config.mode not in EXPLORER_MODES:
        return []
    models = [model for _, model in served_engines(config)]
    return [engine_bundle(config, model.tensor_parallel_size) for model in models for _ in range(model.engine_num)]


def job_bundles(config: Config) -> List[dict]:
    """The devices the mode uses: the explorer's engines first, then trainer ranks."""
    bundles = engine_bundles(config)
    if config.mode in TRAINER_MODES and config.mode != Mode.colocate:  # colocate: the rank shares the engine's
        bundles += [rank_bundle(config)] * config.cluster.trainer_gpu_num
    return bundles


def run_job(config: Config) -> Dict[str, float]:
    """Run `config` to the end; returns the final metrics of its trainer and explorer. The job directory
    is held for the run (`job_lock`): a second run of the same job refuses before it starts anything."""
    try:
        with job_lock(config.checkpoint_job_dir):
            return _run_held(config)
    except JobError as exc:
        exc.job_dir = config.checkpoint_job_dir
        raise


def _run_held(config: Config) -> Dict[str, float]:
    apply_log_level(config)
    prepare_data(config)
    connect(config)
    check_shared_root(config)  # on several nodes: each must see the job dir, or the job stops here
    group = reserve(config, job_bundles(config))
    actors: Dict[str, object] = {}  # the explorer and trainer
    keepers: List[object] = []  # the job's other actors
    frozen: Tuple[str, ...] = ()
    try:
        _start_actors(config, group, actors, keepers)
        return _run_roles(config, actors)
    except JobError as exc:
        frozen = exc.frozen
        raise
    finally:
        _cleanup(config, actors, keepers, frozen)
        release(group)


def _start_actors(config: Config, group, actors: Dict[str, object], keepers: List[object]) -> None:
    """Start the job's actors, the slowest to load first: each loads in its own process while the next
    starts. Colocate's device (torch, the model, the engine) goes first; then the queue actor (not in
    colocate: the device hosts the queue), the StateManager (which also stands in for this process at
    the Synchronizer: it lives exactly as long as the job) and the Synchronizer; then the explorer and
    trainer (`roles`: this process never imports torch; colocate's device builds them once it has
    loaded). Returns once the StateManager is up and colocate's device has loaded."""
    device = None
    if config.mode == Mode.colocate:
        device = start_colocated_device(config, group)
        keepers.append(device)
    buffer = _queue_actor_buffer(config)
    if buffer is not None:
        destroy_queue(buffer.name, config.ray_namespace)  # a crashed run's leftovers are never reused
        start_queue_actor(buffer, config.ray_namespace)
    state = start_state_actor(config)
    keepers.append(state)
    with ThreadPoolExecutor(max_workers=1) as background:  # the Synchronizer starts while the StateManager does
        synchronizer = background.submit(Synchronizer.get_actor, config, guard=state)
        try:
            wait_state_actor(state, config)
        finally:  # kept even if the wait fails: the detached Synchronizer would outlive the job
            keepers.append(synchronizer.result())
    _start_roles(config, group, actors, device, _read_train_table(config, group))
    if device is not None:
        wait_started([device], config)


def _queue_actor_buffer(config: Config) -> Optional[ExperienceBufferConfig]:
    """The experience buffer whose queue actor the job runs: a queue's, except in colocate, whose device
    hosts the queue beside both roles (`ColocatedDevice.host_role`)."""
    buffer = config.buffer.trainer_input.experience_buffer
    return buffer if buffer.storage_type == StorageType.queue and config.mode != Mode.colocate else None


def _read_train_table(config: Config, group) -> Optional[object]:
    """Start reading the explorer's train taskset in a process of its own (`read_train_table`) on the node of
    the first engine (or colocate's device), while the explorer's process loads torch and the model; the
    reference, or None when the mode has no explorer."""
    if config.mode not in EXPLORER_MODES:
        return None
    return ray.remote(read_train_table).options(num_cpus=0, max_retries=0, **in_bundle(group, 0)).remote(config)


def _start_roles(config: Config, group, actors: Dict[str, object], device=None, train_table=None) -> None:
    """Start the mode's explorer and trainer at once (each spends seconds importing and loading); colocate
    builds them inside its `device` process instead. `train_table`: the explorer's taskset read ahead."""
    placements = {"explorer": (group, 0), "trainer": (group, len(engine_bundles(config)))}
    role_args = {"explorer": {"train_table": [train_table]}, "trainer": {}}  # a list: handed over unresolved
    names = _role_names(config)
    for role, modes in (("explorer", EXPLORER_MODES), ("trainer", TRAINER_MODES)):
        if config.mode not in modes:
            continue
        if device is not None:
            actors[role] = host_role(device, role, config, placements[role], **role_args[role])
            continue
        actors[role] = (
            ray.remote(ROLE_ACTORS[role])
            .options(name=names[role], namespace=config.ray_namespace, num_cpus=0)
            .remote(config, placements[role], **role_args[role])
        )


def _run_roles(config: Config, actors: Dict[str, object]) -> Dict[str, float]:
    _await_all({role: actor.prepare.remote() for role, actor in actors.items()}, config, "prepare")
    if config.mode == Mode.bench:
        runs = {"explorer": actors["explorer"].benchmark.remote()}
    else:
        runs = {
            role: getattr(actor, "explore" if role == "explorer" else "train").remote()
            for role, actor in actors.items()
        }
    _await_all(runs, config, "run", actors)
    metrics: Dict[str, float] = {}
    for role, actor in actors.items():
        metrics.update(_answer(actor.final_metrics, role, config, "final metrics"))
    return metrics


def _role_names(config: Config) -> Dict[str, str]:
    """The actor name of each role (a frozen one is found by it); bench mode's explorer is `benchmark`."""
    explorer = "benchmark" if config.mode == Mode.bench else config.explorer.name
    return {"explorer": explorer, "trainer": config.trainer.name}


def _answer(method, role: str, config: Config, what: str):
    """A call to one of the job's actors, bounded by sync_timeout: a frozen actor is named, not waited on."""
    timeout = config.synchronizer.sync_timeout
    try:
        return ray.get(method.remote(), timeout=timeout)
    except ray.exceptions.GetTimeoutError:
        if config.mode == Mode.colocate:  # both roles and the engine live in the one device process
            raise JobError(
                f"the device process {colocated_device_name(config)!r} of job {config.ray_namespace!r} (it hosts "
                f"the explorer, the trainer and the rollout engine) did not answer the {role}'s {what} call for "
                f"{timeout:g} s (synchronizer.sync_timeout): it is alive but not responding (frozen or overloaded)",
                frozen=tuple(_role_names(config)),
            ) from None
        raise JobError(
            f"the {role} of job {config.ray_namespace!r} did not answer a {what} call for {timeout:g} s "
            "(synchronizer.sync_timeout): it is alive but not responding (frozen or overloaded)",
            frozen=(role,),
        ) from None


def _await_all(refs: Dict[str, object], config: Config, phase: str, actors: Optional[Dict] = None) -> None:
    """Wait for every role; the first failure (or a role that stops making progress for sync_timeout
    seconds) ends the job with an error naming the role. While running, a progress bar shows the steps."""
    pending = dict(refs)
    last_progress: Dict[str, object] = {}
    quiet_since = time.monotonic()
    timeout = config.synchronizer.sync_timeout
    bar = progress_view(config.name) if actors else None
    try:
        _wait_loop(pending, config, phase, actors, bar, last_progress, quiet_since, timeout)
        if bar is not None:  # the final counts: the loop stops polling a role once it has returned
            bar.update({role: _answer(actor.progress, role, config, "progress") for role, actor in actors.items()})
    finally:
        if bar is not None:
            bar.close()


def _wait_loop(pending, config, phase, actors, bar, last_progress, quiet_since, timeout) -> None:
    while pending:
        done, _ = ray.wait(list(pending.values()), num_returns=1, timeout=min(timeout, 2.0))
        for ref in done:
            role = next(r for r, v in pending.items() if v == ref)
            del pending[role]
            try:
                ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - reported with the role that raised it
                # the actor's own exception, without Ray's traceback (HYDRA_FULL_ERROR=1 shows the chain)
                cause = exc.cause if isinstance(exc, ray.exceptions.RayTaskError) and exc.cause else exc
                who, frozen = _frozen(config, actors)  # a wait that timed out names whom it waited on
                raise JobError(
                    f"{phase}: the {role} of job {config.ray_namespace!r} failed: {type(cause).__name__}: {cause}{who}",
                    frozen,
                ) from exc
            quiet_since = time.monotonic()
        if done or not pending:
            continue
        progress = (
            {role: _answer(actors[role].progress, role, config, "progress") for role in pending} if actors else {}
        )
        if bar is not None:
            bar.update(progress)
        if progress != last_progress:
            last_progress, quiet_since = progress, time.monotonic()
        elif time.monotonic() - quiet_since > timeout:
            roles = ", ".join(f"{role} (last at {state})" for role, state in progress.items()) or ", ".join(pending)
            who, frozen = _frozen(config, actors)
            raise JobError(
                f"{phase}: {roles} of job {config.ray_namespace!r} made no progress for {timeout:g} s "
                f"(synchronizer.sync_timeout){who}",
                frozen,
            )


def _frozen(config: Config, actors: Optional[Dict[str, object]]) -> Tuple[str, Tuple[str, ...]]:
    """(the message's clause naming the job's actors that do not answer, or "", the roles whose actor, or
    one of its engines or ranks (named `<role's actor name>_...`), is among them)."""
    silent = unresponsive_actors(config.ray_namespace)
    if not silent:
        return "", ()
    names = _role_names(config)

    def owns(role: str, name: str) -> bool:
        if config.mode == Mode.colocate and name == colocated_device_name(config):
            return True  # the device hosts both roles
        return name == names.get(role) or name.startswith(f"{names.get(role)}_")

    roles = tuple(role for role in actors or {} if any(owns(role, name) for name in silent))
    return f"; not answering within {ANSWER_SECONDS:g} s (frozen or busy): {', '.join(silent)}", roles


def _cleanup(config: Config, actors: Dict[str, object], keepers: List[object], frozen: Tuple[str, ...]) -> None:
    """Remove the job's actors: explorer and trainer (their engines and ranks die with them; a frozen one
    is killed at once; colocate's die with the device, one of the keepers), the queue and the Synchronizer
    (detached: they would otherwise outlive the job), the StateManager."""
    hosted = config.mode == Mode.colocate
    for role, actor in actors.items():
        if role not in frozen:
            try:
                ray.get(actor.shutdown.remote(), timeout=min(60.0, config.synchronizer.sync_timeout))
            except Exception as exc:  # noqa: BLE001 - cleanup goes on; the actor is killed below
                logger.warning("shutdown of the %s failed: %s", role, exc)
        if not hosted:
            ray.kill(actor)
    buffer = _queue_actor_buffer(config)
    if buffer is not None:
        destroy_queue(buffer.name, config.ray_namespace)
    for keeper in keepers:
        ray.kill(keeper)
