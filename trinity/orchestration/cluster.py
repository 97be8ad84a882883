"""Joining or starting the Ray cluster a run uses, and reserving each job's devices as one placement group.

A job's devices (engine replicas and trainer ranks) are reserved together, so concurrent sweep jobs
never deadlock holding half of what they need; a job whose reservation the cluster can never satisfy
fails at once, naming what it asked for and what the cluster has.
"""

import atexit
import logging
import os
import time
from typing import List, Optional

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group

from trinity.config.root import Config

logger = logging.getLogger(__name__)

# The actors' blocking ray.get calls are deliberate (one-time setup, weight swaps that must not
# interleave with generation); Ray's once-per-actor warning about them is noise in every run's log.
WORKER_ENV = {"TOKENIZERS_PARALLELISM": "false", "RAY_WARN_BLOCKING_GET_INSIDE_ASYNC": "0"}

# Ray's processes retry their local connections (the raylet to its own object store, a worker to its
# raylet) 10 times, 1000 ms apart. The raylet's first try races the store it has just started; losing
# it (one private cluster start in four to six here) cost ray.init a whole second: 2.5 -> 3.5 s.
# Retrying every 100 ms, 100 times, keeps Ray's 10 s before it gives up. Values already set win.
CONNECT_RETRY_ENV = {
    "RAY_raylet_client_connect_timeout_milliseconds": "100",
    "RAY_raylet_client_num_connect_attempts": "100",
}


def connect(config: Config) -> None:
    """ray.init once per process: a private local cluster sized by the config, or join the cluster
    `join_address` names."""
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # workers inherit the mode of the cluster they join
    cluster = config.cluster
    address = join_address(cluster.ray_address)
    if address is None:
        # A private cluster's workers inherit this process's environment, so the variables go there: a
        # job with a runtime_env cannot use the idle workers Ray prestarts, and every actor would start
        # a fresh interpreter (~0.8 s more to the first step on 2 cores).
        os.environ.update(WORKER_ENV)
        for key, value in CONNECT_RETRY_ENV.items():
            os.environ.setdefault(key, value)
        cuda = cluster.device_type == "cuda"
        node = start_private_cluster(
            num_cpus=(os.cpu_count() or 1) if cuda else cluster.total_gpu_num * cluster.cpu_threads_per_device,
            num_gpus=cluster.total_gpu_num if cuda else 0,
        )
        # Ray would announce it as "Connecting to existing Ray cluster": its INFO lines stay in its logs
        ray.init(address=node.address, log_to_driver=True, logging_level=logging.WARNING)
        logger.info(PRIVATE_CLUSTER_STARTED + " (%s)", node.address)
    else:
        ray.init(address=address, runtime_env={"env_vars": WORKER_ENV})


PRIVATE_CLUSTER_STARTED = "started a private Ray cluster"


def start_private_cluster(num_cpus: Optional[int], num_gpus: Optional[int]):
    """Start this process's own one-node Ray cluster of `num_cpus` CPUs and `num_gpus` GPUs (None: as many as
    this machine has); returns its Ray node (`.address` to join it, `.kill_all_processes` to stop it early).

    It is the cluster `ray.init(address="local", include_dashboard=False)` starts, less the autoscaler's
    monitor, which a fixed one-node cluster never uses (`ray start` leaves it out with `--no-monitor`): its
    process holds ~83 MB for the whole run, and at the end it ignores Ray's polite stop, so every shutdown
    waited a second before killing it. The cluster's processes are stopped when this process exits, and
    the kernel kills them if it dies."""
    from ray._private.node import Node
    from ray._private.parameter import RayParams

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # what ray.init sets for the clusters it starts
    system_config: dict = {}
    if os.environ.get("RAY_AUTH_MODE", "disabled") != "disabled":
        from ray._private.authentication.authentication_token_setup import ensure_token_if_auth_enabled

        ensure_token_if_auth_enabled(system_config, create_token_if_missing=True)
    params = RayParams(
        num_cpus=num_cpus, num_gpus=num_gpus, include_dashboard=False, no_monitor=True, _system_config=system_config
    )
    node = Node(params, head=True, shutdown_at_exit=False, spawn_reaper=True, ray_init_cluster=True)
    atexit.register(_stop, node)
    return node


def _stop(node) -> None:
    """Disconnect this process, then stop the cluster: Ray's own exit handler (registered when ray is imported,
    so it runs after this one) would otherwise wait ~5 s for a cluster already gone."""
    ray.shutdown()
    node.kill_all_processes(check_alive=False, allow_graceful=True)


def join_address(ray_address: str) -> Optional[str]:
    """The cluster `cluster.ray_address` asks to join, or None for a private local cluster.

    Left empty, it follows Ray's own convention: RAY_ADDRESS, when set, names the cluster to join. Ray
    sets it for the entrypoint of a `ray job submit`, so a job submitted to a cluster runs on that
    cluster instead of starting a private one beside it. An http(s) RAY_ADDRESS is a job server's
    address (what the `ray job` CLI reads), not a cluster a driver can join."""
    if ray_address == "local":
        return None
    if ray_address:
        return ray_address
    environment = os.environ.get("RAY_ADDRESS", "").strip()
    if environment.startswith(("http://", "https://")):
        logger.info("RAY_ADDRESS=%s is a job server, not a cluster to join: starting a private cluster", environment)
        return None
    if environment:
        logger.info(
            "joining the Ray cluster at RAY_ADDRESS=%s (set for `ray job submit` entrypoints; "
            "cluster.ray_address=local starts a private cluster instead)",
            environment,
        )
        return environment
    return None


def engine_bundle(config: Config, tensor_parallel_size: int) -> dict:
    if config.cluster.device_type == "cuda":
        return {"GPU": tensor_parallel_size, "CPU": 1}
    return {"CPU": config.cluster.cpu_threads_per_device * tensor_parallel_size}


def rank_bundle(config: Config) -> dict:
    if config.cluster.device_type == "cuda":
        return {"GPU": 1, "CPU": 1}
    return {"CPU": config.cluster.cpu_threads_per_device}


def reserve(config: Config, bundles: List[dict], progress_every_s: float = 30.0) -> Optional[PlacementGroup]:
    """One placement group holding all of a job's device bundles (None when it needs none). Waits while
    other jobs hold the devices; fails at once when the cluster as a whole is too small."""
    if not bundles:
        return None
    total = ray.cluster_resources()
    needed: dict = {}
    for bundle in bundles:
        for key, amount in bundle.items():
            needed[key] = needed.get(key, 0) + amount
    short = {key: amount for key, amount in needed.items() if total.get(key, 0) < amount}
    if short:
        have = {key: total.get(key, 0) for key in short}
        raise RuntimeError(
            f"job {config.ray_namespace!r} needs {short} but the Ray cluster has {have}; "
            "lower the engine count or add resources"
        )
    group = placement_group(bundles, strategy="PACK")
    started = time.monotonic()
    while True:
        # asks the GCS; `group.ready()` would run a task in the group, taking one of the workers Ray
        # prestarts for the job's actors (~0.17 s on a fresh cluster, against ~1 ms)
        if group.wait(progress_every_s):
            return group
        logger.info(
            "job %r waits for %s (held by other jobs) since %.0f s; available now: %s",
            config.ray_namespace,
            needed,
            time.monotonic() - started,
            ray.available_resources(),
        )


def release(group: Optional[PlacementGroup]) -> None:
    if group is not None:
        remove_placement_group(group)
