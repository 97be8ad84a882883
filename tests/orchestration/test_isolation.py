"""Jobs sharing one Ray cluster keep to their own namespaces; a missing peer ends a sync wait by name; a job
that fails while it starts leaves no actor behind."""

import threading
import time

import pytest
import ray

from tests.orchestration.conftest import small_config, wait_for
from tests.orchestration.test_modes import SFT
from trinity.explorer.explorer import Explorer
from trinity.job_layout import completed_steps
from trinity.manager import SyncError, Synchronizer
from trinity.manager.state_actor import create_state_actor
from trinity.orchestration import job
from trinity.orchestration.job import run_job


def test_two_experiments_in_one_cluster_do_not_see_each_other(ray_cluster, tmp_path):
    configs = [small_config(tmp_path, *SFT, f"name={name}", "cluster.cpu_devices_per_node=1") for name in "ab"]
    seen = []
    threads = [threading.Thread(target=run_job, args=(config,)) for config in configs]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        seen.append(ray.util.list_named_actors(all_namespaces=True))
        time.sleep(0.5)
    namespaces = {config.ray_namespace for config in configs}

    def names(snapshot, namespace):
        return sorted(a["name"] for a in snapshot if a["namespace"] == namespace)

    # ray.kill is asynchronous, so a job's actors may vanish in any order at its end: "both running" means
    # both Synchronizers are up, and no snapshot may ever hold a second one (or a second trainer)
    both_running = [s for s in seen if all("synchronizer" in names(s, ns) for ns in namespaces)]
    assert both_running, "the two jobs never ran at the same time"
    for snapshot in seen:
        for namespace in namespaces:
            held = names(snapshot, namespace)
            assert held.count("synchronizer") <= 1 and held.count("trainer") <= 1, (namespace, held)
    for config in configs:
        assert completed_steps(config.checkpoint_job_dir) == [1, 2, 3]


def test_sync_timeout_names_the_missing_trainer(ray_cluster, tmp_path):
    config = small_config(tmp_path, "synchronizer.sync_timeout=5", "buffer.total_steps=3")
    from trinity.data.arithmetic import ensure_dataset

    ensure_dataset(config.data.dir, config.data.arithmetic)
    synchronizer = Synchronizer.get_actor(config)
    state = create_state_actor(config)
    explorer = ray.remote(Explorer).options(name="explorer", namespace=config.ray_namespace, num_cpus=0).remote(config)
    try:
        ray.get(explorer.prepare.remote())
        started = time.monotonic()
        with pytest.raises(ray.exceptions.RayTaskError) as info:
            ray.get(explorer.explore.remote(), timeout=120)
        waited = time.monotonic() - started
        cause = info.value.as_instanceof_cause()
        assert isinstance(cause, SyncError), cause
        assert "trainer" in str(cause) and "5" in str(cause)
        assert waited < 5 + 60, "the error came long after the timeout"
    finally:
        ray.kill(explorer)
        ray.kill(synchronizer)
        ray.kill(state)


@pytest.mark.parametrize("mode", ["both", "colocate"])
def test_a_job_that_fails_while_starting_leaves_no_actor(ray_cluster, tmp_path, monkeypatch, mode):
    """Starting the explorer and trainer fails after the device, queue, StateManager and Synchronizer started."""
    config = small_config(tmp_path, f"mode={mode}", "buffer.total_steps=1")

    def broken_start(*args):
        raise ImportError("the role classes are broken")

    monkeypatch.setattr(job, "_start_roles", broken_start)
    with pytest.raises(ImportError, match="role classes are broken"):
        run_job(config)

    def left():
        return [
            a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == config.ray_namespace
        ]

    wait_for(lambda: not left(), 30, "the failed job's actors to go")
