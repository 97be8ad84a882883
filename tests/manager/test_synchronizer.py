"""The Synchronizer actor on a real local Ray cluster, driven by real (torch-free) module actors: versions and
statuses under concurrent explorers, the collective handshake, shard counting, errors that name the missing
peer, and the actor's lifetime (exit after its modules, stale actors of crashed runs replaced).
Weight transport with real tensors is in test_weight_sync.py."""

import pickle
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import ray
import torch

from tests.manager.light_actors import Module, start
from trinity.job_layout import actor_dir
from trinity.manager import RunningStatus, SyncError, Synchronizer
from trinity.manager.checkpoint_shards import write_shard
from trinity.manager.status import SYNCHRONIZER_NAME

pytestmark = pytest.mark.usefixtures("ray_cluster")


def eventually(check, what: str, limit_s: float = 30.0):
    """Poll `check()` until it is truthy: a guard against hangs, not a timing assertion."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def counts(sync) -> dict:
    return {str(status): n for status, n in ray.get(sync.get_explorer_status_counts.remote()).items() if n}


def exists(namespace: str) -> bool:
    try:
        ray.get_actor(SYNCHRONIZER_NAME, namespace=namespace)
        return True
    except ValueError:
        return False


def handle(config):
    return Synchronizer.get_actor(namespace=config.ray_namespace)


POOL = ("trainer", "explorer", "explorer_0", "explorer_1", "explorer_a")


@pytest.fixture(scope="module")
def pool(ray_cluster):
    """Module actors started once and reconnected to each test's job (tests that kill a module start their own)."""
    modules = {name: Module.options(name=name, namespace="synchronizer-pool").remote() for name in POOL}
    ray.get([module.__ray_ready__.remote() for module in modules.values()])
    return modules


@pytest.fixture
def join(pool):
    """join(config, *names): connect pooled modules to the job; its Synchronizer is removed after the test."""
    namespaces = []

    def connect(config, *names):
        namespaces.append(config.ray_namespace)
        for name in names:  # one by one: the order of registration is part of some tests
            ray.get(pool[name].connect.remote(config))
        return [pool[name] for name in names]

    yield connect
    for namespace in namespaces:
        try:
            ray.kill(Synchronizer.get_actor(namespace=namespace))
        except ValueError:
            pass


# ---- versions and statuses -----------------------------------------------------------------------


def test_versions_and_status_counts_with_concurrent_explorers(make_config, join):
    config = make_config("memory")
    trainer, *explorers = join(config, "trainer", "explorer_0", "explorer_1")
    sync = handle(config)
    ray.get(
        [
            e.call.remote("set_explorer_status", RunningStatus.RUNNING, None, e_name)
            for e, e_name in zip(explorers, ["explorer_0", "explorer_1"], strict=True)
        ]
    )
    ray.get(trainer.call.remote("set_trainer_status", RunningStatus.RUNNING))
    assert counts(sync) == {"running": 2}
    loops = [e.wait_versions.remote(4) for e in explorers]
    for step in range(1, 5):
        eventually(lambda: counts(sync) == {"waiting_sync": 2}, "both explorers blocked waiting for newer weights")
        assert ray.get(sync.explorer_requires_sync.remote())
        ray.get(trainer.call.remote("set_model_state_dict", {"weights of step": step}, step))
    assert ray.get(loops) == [[1, 2, 3, 4], [1, 2, 3, 4]]
    assert counts(sync) == {"running": 2}
    assert ray.get(sync.get_model_state_dict.remote()) == ({"weights of step": 4}, 4)

    ray.get(explorers[0].call.remote("set_explorer_status", RunningStatus.STOPPED, RunningStatus.RUNNING, "explorer_0"))
    assert counts(sync) == {"running": 1, "stopped": 1}
    with pytest.raises(ValueError, match="'explorer_0' is stopped, not running"):
        ray.get(sync.set_explorer_status.remote(RunningStatus.RUNNING, RunningStatus.RUNNING, "explorer_0"))


def test_pull_returns_at_once_when_newer_no_wait_stopped_or_nothing_new(make_config, join):
    config = make_config("memory")
    trainer, explorer = join(config, "trainer", "explorer")
    sync = handle(config)
    ray.get(trainer.call.remote("set_trainer_status", RunningStatus.RUNNING))
    assert ray.get(explorer.call.remote("wait_new_model_state_dict", -1)) == 0  # base model, at once
    assert ray.get(explorer.call.remote("wait_new_model_state_dict", 0, True)) == 0  # no_wait
    # explorer-driven style: the trainer says it has nothing new, which releases the waiting explorer
    waiting = explorer.call.remote("wait_new_model_state_dict", 0)
    eventually(lambda: counts(sync) == {"waiting_sync": 1}, "explorer waiting")
    ray.get(trainer.call.remote("notify_no_new_model_state_dict"))
    assert ray.get(waiting) == 0
    # a trainer that stops releases it too
    waiting = explorer.call.remote("wait_new_model_state_dict", 0)
    eventually(lambda: counts(sync) == {"waiting_sync": 1}, "explorer waiting")
    ray.get(trainer.call.remote("set_trainer_status", RunningStatus.STOPPED))
    assert ray.get(waiting) == 0
    assert counts(sync) == {"running": 1}


def test_a_trainer_has_finished_once_it_reports_stopped_not_before_it_starts(make_config, join):
    config = make_config("memory")
    trainer, _ = join(config, "trainer", "explorer")
    sync = handle(config)
    assert ray.get(sync.get_trainer_status.remote()) == RunningStatus.STOPPED  # the status before any report
    assert not ray.get(sync.trainer_finished.remote())
    ray.get(trainer.call.remote("set_trainer_status", RunningStatus.RUNNING))
    assert not ray.get(sync.trainer_finished.remote())
    ray.get(trainer.call.remote("set_trainer_status", RunningStatus.STOPPED))
    assert ray.get(sync.trainer_finished.remote())


# ---- collective handshake ------------------------------------------------------------------------


def test_nccl_group_setup_assigns_rank_offsets_and_handshake_releases_all(make_config, join):
    config = make_config("nccl", 30)
    trainer, *explorers = join(config, "trainer", "explorer_0", "explorer_1")
    spec = ray.get(
        trainer.call.remote(
            "setup_weight_sync_group",
            "10.0.0.1",
            1234,
            [("w", "torch.float32", [2])],
            "gloo",
            4096,
            ["explorer_0", "explorer_1"],
        )
    )
    assert (spec.world_size, spec.rank_offset, spec.state_dict_meta) == (3, 0, (("w", "torch.float32", (2,)),))
    specs = eventually(
        lambda: (
            [s for e in explorers for s in ray.get(e.specs.remote())][1:]
            and [ray.get(e.specs.remote())[0] for e in explorers]
        ),
        "both explorers asked to join",
    )
    assert [(s.rank_offset, s.ranks, s.world_size, s.master_port) for s in specs] == [(1, 1, 3, 1234), (2, 1, 3, 1234)]

    sync = handle(config)
    waiting = [e.handshake.remote() for e in explorers]
    eventually(lambda: counts(sync) == {"waiting_sync": 2}, "explorers at the handshake")
    assert ray.get(trainer.call.remote("ready_to_nccl_sync", "trainer", 6)) == 6
    assert ray.get(waiting) == [6, 6]
    assert ray.get(sync.get_latest_model_version.remote()) == 6
    assert counts(sync) == {"running": 2} and ray.get(sync.get_trainer_status.remote()) == RunningStatus.RUNNING

    # the trainer arrives first this time
    trainer_side = trainer.call.remote("ready_to_nccl_sync", "trainer", 7)
    eventually(lambda: ray.get(sync.trainer_requires_sync.remote()), "trainer at the handshake")
    assert ray.get([e.handshake.remote() for e in explorers]) == [7, 7] and ray.get(trainer_side) == 7

    # an explorer that stopped ends the round without a broadcast: None on both sides
    ray.get(sync.set_explorer_status.remote(RunningStatus.STOPPED, None, "explorer_1"))
    waiting = explorers[0].handshake.remote()
    assert ray.get(trainer.call.remote("ready_to_nccl_sync", "trainer", 8)) is None
    assert ray.get(waiting) is None


def test_nccl_handshake_timeout_names_the_explorer_that_did_not_arrive(make_config, join):
    config = make_config("nccl", 3.0)
    trainer, *explorers = join(config, "trainer", "explorer_0", "explorer_1")
    ray.get(
        trainer.call.remote("setup_weight_sync_group", "10.0.0.1", 1234, [], "gloo", 4096, ["explorer_0", "explorer_1"])
    )
    sync = handle(config)
    ray.get(explorers[1].call.remote("set_explorer_status", RunningStatus.RUNNING, None, "explorer_1"))
    trainer_side = trainer.call.remote("ready_to_nccl_sync", "trainer", 3)
    eventually(lambda: ray.get(sync.trainer_requires_sync.remote()), "trainer at the handshake")
    arrived = explorers[0].handshake.remote()  # explorer_1 never comes
    with pytest.raises(SyncError) as info:
        ray.get(trainer_side)
    assert info.value.peer == "explorer 'explorer_1'" and info.value.state == "running"
    assert "the trainer (step 3) in the sync handshake timed out after" in str(info.value)
    assert "explorer 'explorer_1' (last seen: running) did not arrive" in str(info.value)
    # the explorer that did arrive is released with the same culprit
    assert "abandoned" in ray.get(arrived) and "explorer 'explorer_1' (last seen: running)" in ray.get(arrived)
    assert counts(sync) == {"running": 2} and ray.get(sync.get_latest_model_version.remote()) == 0


def test_explorer_handshake_timeout_names_the_trainer(make_config, join):
    config = make_config("nccl", 1.0)
    (explorer,) = join(config, "explorer")
    result = ray.get(explorer.handshake.remote())
    assert result.startswith("SyncError") and "trainer (last seen: never registered) did not arrive" in result


# ---- checkpoint shard counting -------------------------------------------------------------------


def test_checkpoint_publishes_when_the_last_of_world_size_shards_is_reported(make_config, join):
    config = make_config("checkpoint", 30)
    trainer, explorer = join(config, "trainer", "explorer")
    sync = handle(config)
    ray.get(trainer.call.remote("set_trainer_status", RunningStatus.RUNNING))
    ray.get(explorer.call.remote("wait_new_model_state_dict", -1))
    full = torch.arange(10, dtype=torch.float32).reshape(5, 2)
    directory = actor_dir(config.checkpoint_job_dir, 3)
    waiting = explorer.call.remote("wait_new_model_state_dict", 0)
    write_shard(directory, 0, 2, {"w": (full[:3], full.shape, 0)})
    assert ray.get(trainer.call.remote("set_model_state_dict_with_step_num", 3, 2)) == 3
    assert ray.get(sync.get_latest_model_version.remote()) == 0  # 1 of 2 shards: not yet
    write_shard(directory, 1, 2, {"w": (full[3:], full.shape, 3)})
    assert ray.get(trainer.call.remote("set_model_state_dict_with_step_num", 3, 2)) == 3
    assert ray.get(waiting) == 3
    published, version = ray.get(sync.get_model_state_dict.remote())
    assert version == 3 and published.directory == str(directory) and published.world_size == 2
    assert ray.get(sync.get_state_dict_meta.remote()) == [("w", "torch.float32", (5, 2))]

    # a report whose shards do not add up is refused with the reason
    write_shard(actor_dir(config.checkpoint_job_dir, 4), 0, 2, {"w": (full[:2], full.shape, 0)})
    write_shard(actor_dir(config.checkpoint_job_dir, 4), 1, 2, {"w": (full[3:], full.shape, 3)})
    ray.get(trainer.call.remote("set_model_state_dict_with_step_num", 4, 2))
    with pytest.raises(SyncError, match="weights of step 4 cannot be published: .*'w' has a gap at row 2"):
        ray.get(trainer.call.remote("set_model_state_dict_with_step_num", 4, 2))
    assert ray.get(sync.get_latest_model_version.remote()) == 3


def test_superseded_sync_dumps_are_removed_but_full_checkpoints_kept(make_config, join):
    config = make_config("checkpoint", 30)
    (trainer,) = join(config, "trainer")
    job = config.checkpoint_job_dir
    for step in (1, 2, 3, 4, 5):
        write_shard(actor_dir(job, step), 0, 1, {"w": torch.full((4, 2), float(step))})
    (actor_dir(job, 1) / "dcp").mkdir()  # other checkpoint content next to the shards stays
    (actor_dir(job, 2).parent / ".full_checkpoint").touch()  # the trainer's flag of a full checkpoint

    def shards(step):
        return len(list(actor_dir(job, step).glob("*.safetensors"))) if actor_dir(job, step).exists() else 0

    for step in (1, 2, 3, 4):
        assert ray.get(trainer.call.remote("set_model_state_dict_with_step_num", step, 1)) == step
    # the current and the previous version stay (an explorer may still be opening it); older dumps go
    assert [p.name for p in actor_dir(job, 1).iterdir()] == ["dcp"]
    assert (shards(2), shards(3), shards(4)) == (1, 1, 1)  # 2 is a full checkpoint: it keeps its weights
    ray.get(trainer.call.remote("set_model_state_dict_with_step_num", 5, 1))
    assert not actor_dir(job, 3).parent.exists()  # an emptied step directory goes too
    assert (shards(2), shards(4), shards(5)) == (1, 1, 1)


# ---- errors naming the missing peer --------------------------------------------------------------


def test_timeout_names_the_trainer_that_never_arrived(make_config, join):
    config = make_config("memory", 1.0)
    (explorer,) = join(config, "explorer_a")
    with pytest.raises(SyncError) as info:
        ray.get(explorer.call.remote("wait_new_model_state_dict", 0, False, "explorer_a"))
    error = info.value
    assert (error.peer, error.state) == ("trainer", "never registered") and error.waited_s >= 1.0
    assert "explorer 'explorer_a' (at version 0) waiting for newer weights timed out after" in str(error)
    assert counts(handle(config)) == {"running": 1}  # a failed wait does not leave the explorer counted as waiting


def test_dead_trainer_fails_the_wait_at_once_with_its_last_status(make_config, join):
    config = make_config("memory", 300)
    trainer = start(config, "trainer")
    (explorer,) = join(config, "explorer")
    sync = handle(config)
    ray.get(trainer.call.remote("set_trainer_status", RunningStatus.REQUIRE_SYNC))
    waiting = explorer.call.remote("wait_new_model_state_dict", 0)
    eventually(lambda: counts(sync) == {"waiting_sync": 1}, "explorer waiting")
    ray.kill(trainer)
    with pytest.raises(SyncError) as info:
        ray.get(waiting)
    assert (info.value.peer, info.value.state) == ("trainer", "require_sync")
    assert "trainer (last seen: require_sync) died while explorer 'explorer'" in str(info.value)
    assert info.value.waited_s < 300  # it failed when the trainer died, not at sync_timeout


def test_dead_explorer_fails_the_trainer_handshake_at_once(make_config, join):
    config = make_config("nccl", 300)
    (trainer,) = join(config, "trainer")
    explorer = start(config, "explorer")
    ray.get(trainer.call.remote("setup_weight_sync_group", "10.0.0.1", 1234, [], "gloo", 4096, ["explorer"]))
    ray.get(explorer.call.remote("set_explorer_status", RunningStatus.RUNNING))
    handshake = trainer.call.remote("ready_to_nccl_sync", "trainer", 1)
    eventually(lambda: ray.get(handle(config).trainer_requires_sync.remote()), "trainer waiting")
    ray.kill(explorer)
    with pytest.raises(SyncError) as info:
        ray.get(handshake)
    assert (info.value.peer, info.value.state) == ("explorer 'explorer'", "running")
    assert "died while the trainer (step 1)" in str(info.value)


# ---- lifetime ------------------------------------------------------------------------------------


def test_lives_while_a_module_lives_and_exits_after_the_last(make_config):
    config = make_config("memory", 300)
    trainer, explorer = start(config, "trainer"), start(config, "explorer")
    before = handle(config)
    ray.get(trainer.call.remote("set_trainer_status", RunningStatus.RUNNING))
    waiting = explorer.call.remote("wait_new_model_state_dict", 0)
    ray.kill(trainer)
    with pytest.raises(SyncError):
        ray.get(waiting)  # proves the Synchronizer has seen the trainer die ...
    assert handle(config)._actor_id == before._actor_id  # ... and still serves the explorer
    assert ray.get(explorer.call.remote("get_latest_model_version")) == 0
    ray.kill(explorer)
    eventually(lambda: not exists(config.ray_namespace), "the Synchronizer exits after its last module")


def test_driver_created_synchronizer_waits_for_modules_then_follows_them(make_config):
    config = make_config("memory")
    sync = Synchronizer.get_actor(config)  # from this driver, as the job launcher does
    for _ in range(3):  # several liveness rounds with no module registered: it stays
        time.sleep(0.5)
        assert ray.get(sync.get_latest_model_version.remote()) == 0
    assert Synchronizer.get_actor(config)._actor_id == sync._actor_id  # get-if-exists
    explorer = start(config, "explorer")
    ray.get(explorer.call.remote("set_explorer_status", RunningStatus.RUNNING))
    assert counts(sync) == {"running": 1}
    ray.kill(explorer)
    eventually(lambda: not exists(config.ray_namespace), "exit once its only module died")


def test_stale_synchronizer_of_a_crashed_run_is_replaced(make_config):
    config = make_config("memory")
    trainer = start(config, "trainer")
    ray.get(trainer.call.remote("set_trainer_status", RunningStatus.RUNNING))
    ray.get(trainer.call.remote("set_model_state_dict", {"old": 5}, 5))
    old = handle(config)
    ray.kill(trainer)  # the run crashes; its Synchronizer may still be there when the next run starts
    eventually(lambda: _dead(trainer), "the old trainer is dead")
    trainer = start(config, "trainer")
    new = handle(config)
    assert new._actor_id != old._actor_id
    assert ray.get(new.get_model_state_dict.remote()) == (None, 0)
    assert ray.get(new.get_trainer_status.remote()) == RunningStatus.STOPPED


def test_synchronizer_of_a_killed_launcher_is_not_reused(make_config, tmp_path, ray_cluster):
    config = make_config("memory")
    config_file = tmp_path / "config.pkl"
    config_file.write_bytes(pickle.dumps(config))
    launcher = textwrap.dedent(f"""
        import pickle, sys, time, ray
        from trinity.manager import Synchronizer
        ray.init(address={ray_cluster!r}, log_to_driver=False)
        config = pickle.loads(open({str(config_file)!r}, "rb").read())
        sync = Synchronizer.get_actor(config)
        ray.get(sync.set_model_state_dict.remote({{"old": 9}}, 9))
        print("ready", flush=True)
        time.sleep(600)
    """)
    process = subprocess.Popen([sys.executable, "-c", launcher], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "ready"
        old = handle(config)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    # its guard dies with the launcher, and with it the orphaned Synchronizer (nothing else kept it)
    eventually(lambda: not exists(config.ray_namespace), "the orphan exits after its launcher was killed")
    fresh = Synchronizer.get_actor(config)
    assert fresh._actor_id != old._actor_id
    assert ray.get(fresh.get_latest_model_version.remote()) == 0


def test_a_live_synchronizer_with_another_sync_method_is_not_joined(make_config, join):
    config = make_config("memory")
    join(config, "trainer")
    other = make_config("checkpoint")
    other.ray_namespace = config.ray_namespace
    with pytest.raises(SyncError, match="sync_method: running 'memory', new 'checkpoint'"):
        Synchronizer.get_actor(other)


def test_get_actor_without_config_names_the_namespace():
    with pytest.raises(ValueError, match="no Synchronizer in Ray namespace 'nowhere'"):
        Synchronizer.get_actor(namespace="nowhere")


def _dead(actor) -> bool:
    try:
        ray.get(actor.__ray_ready__.remote(), timeout=5)
        return False
    except ray.exceptions.RayActorError:
        return True


def test_a_joining_module_does_not_load_its_class_into_the_synchronizer(make_config):
    """Modules join by actor id (a handle would make Ray import the module's class, torch included, into
    the Synchronizer: ~350 MB and seconds of CPU per job); it still sees the module die."""
    from tests.manager.torch_module import TorchModule

    config = make_config()
    trainer = TorchModule.options(name=config.trainer.name, namespace=config.ray_namespace).remote(config)
    assert ray.get(trainer.version.remote()) == 0
    sync = handle(config)
    assert not ray.get(sync.__ray_call__.remote(lambda self: "torch" in sys.modules))
    ray.kill(trainer)
    eventually(lambda: not exists(config.ray_namespace), "the Synchronizer exits after its only module")
