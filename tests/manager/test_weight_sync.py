"""Each sync method moves real tensors between real processes, and the receiver ends up with exactly the sender's
weights: memory (object store), checkpoint (safetensors shards, including real FSDP2 shards of two ranks) and
nccl (a gloo broadcast group here, same code as nccl) with two explorers. Plus the shard format and the bucket
plan on their own."""

import json
import struct
import time

import pytest
import ray
import torch

from tests.manager import light_actors
from tests.manager.actors import (
    ExplorerActor,
    ShardedTrainerRank,
    TrainerActor,
    build_model,
    explorer_config,
    ready,
    same_weights,
)
from trinity.job_layout import actor_dir
from trinity.manager import RunningStatus, SyncError, Synchronizer
from trinity.manager.checkpoint_shards import (
    ShardError,
    read_full_state_dict,
    read_shard_index,
    remove_shards,
    shard_file_name,
    write_shard,
)
from trinity.manager.collective import plan_buckets
from trinity.manager.packing import pack_state_dict, unpack_state_dict
from trinity.manager.weight_sync import _free_port, state_dict_meta


def eventually(check, what: str, limit_s: float = 30.0):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def counts(sync) -> dict:
    return {str(status): n for status, n in ray.get(sync.get_explorer_status_counts.remote()).items() if n}


POOL = {"trainer": TrainerActor, "explorer_0": ExplorerActor, "explorer_1": ExplorerActor}


def _start(name: str):
    return POOL[name].options(name=name, namespace="weight-sync-pool").remote()


@pytest.fixture(scope="module")
def pool(ray_cluster):
    """One trainer and two explorer processes (torch imported once), reconnected to a fresh job per test."""
    actors = {name: _start(name) for name in POOL}
    ready(*actors.values())
    return actors


@pytest.fixture
def job(pool, make_config):
    """Connect the pool to a new job of the given method; its Synchronizer is removed afterwards.
    A pool actor that a test killed is started again."""
    configs = []

    def connect(method: str, timeout: float = 60, explorers=("explorer_0", "explorer_1")):
        for name, actor in list(pool.items()):
            try:
                ray.get(actor.__ray_ready__.remote())
            except ray.exceptions.RayActorError:
                pool[name] = ready(_start(name))
        config = make_config(method, timeout)
        configs.append(config)
        ray.get(pool["trainer"].connect.remote(config))
        ray.get([pool[name].connect.remote(explorer_config(config, name)) for name in explorers])
        sync = Synchronizer.get_actor(namespace=config.ray_namespace)
        ray.get(sync.set_trainer_status.remote(RunningStatus.RUNNING))
        return config, sync, pool["trainer"], [pool[name] for name in explorers]

    yield connect
    for config in configs:
        try:
            ray.kill(Synchronizer.get_actor(namespace=config.ray_namespace))
        except ValueError:
            pass


# ---- memory ---------------------------------------------------------------------------------------


def test_memory_every_explorer_holds_every_version_exactly(job):
    config, sync, trainer, explorers = job("memory")
    assert ray.get([e.pull.remote() for e in explorers]) == [0, 0]  # -1 -> the base model, nothing loaded
    pulls = [e.pull_until.remote(3) for e in explorers]
    for step in range(1, 4):
        eventually(lambda: counts(sync) == {"waiting_sync": 2}, "both explorers waiting")
        ray.get(trainer.publish_memory.remote(step))
    for seen in ray.get(pulls):
        assert seen == [(1, True), (2, True), (3, True)]
    version, state, loads = ray.get(explorers[0].state.remote())
    assert version == 3 and loads == 3 and same_weights(state, 3)
    assert state["embed.weight"].dtype == torch.bfloat16 and state["temperature"].shape == ()
    assert ray.get(explorers[0].pull.remote(wait=False)) == 3  # nothing newer: no load
    assert ray.get(explorers[0].state.remote())[2] == 3


# ---- checkpoint -----------------------------------------------------------------------------------


def test_checkpoint_single_rank_and_latest(job):
    config, sync, trainer, explorers = job("checkpoint", explorers=("explorer_0",))
    explorer = explorers[0]
    assert ray.get(explorer.pull.remote()) == 0
    waiting = explorer.pull.remote()
    assert ray.get(trainer.publish_checkpoint.remote(2)) == 2
    assert ray.get(waiting) == 2
    assert same_weights(ray.get(explorer.state.remote())[1], 2)
    ray.get(trainer.publish_checkpoint.remote(5))
    # without a step, the latest complete checkpoint is (re)published: the bench path
    assert ray.get(sync.set_model_state_dict_with_step_num.remote()) == 5
    assert ray.get(explorer.pull.remote()) == 5 and same_weights(ray.get(explorer.state.remote())[1], 5)
    # files of the newest version that vanish (not superseded by a newer one) are an error that says so
    ray.get(trainer.publish_checkpoint.remote(6))
    remove_shards(actor_dir(config.checkpoint_job_dir, 6))
    with pytest.raises(SyncError, match="the weights of version 6 cannot be read: .*missing"):
        ray.get(explorer.pull.remote())
    assert ray.get(explorer.state.remote())[0] == 5


def test_checkpoint_merges_real_fsdp2_shards_of_two_ranks(job):
    config, sync, _, explorers = job("checkpoint", explorers=("explorer_0",))
    explorer = explorers[0]
    ray.get(explorer.connect.remote(explorer_config(config, "explorer_0"), torch.float32))
    port = _free_port()
    ranks = [ShardedTrainerRank.remote(config, rank, 2, port) for rank in range(2)]
    assert ray.get(explorer.pull.remote()) == 0
    waiting = explorer.pull.remote()
    layouts = ray.get([rank.publish.remote(4) for rank in ranks])
    # the shards really are partial: uneven rows of proj.weight, and an empty slice of the 1-row scale
    assert layouts[0]["proj.weight"] == ((17, 16), 0) and layouts[1]["proj.weight"] == ((16, 16), 17)
    assert layouts[0]["scale"] == ((1,), 0) and layouts[1]["scale"] == ((0,), 1)
    assert ray.get(waiting) == 4
    assert same_weights(ray.get(explorer.state.remote())[1], 4, embed_dtype=torch.float32)
    meta = ray.get(sync.get_state_dict_meta.remote())
    assert [name for name, _, _ in meta] == list(build_model(0).state_dict())  # the trainer's order
    for rank in ranks:
        ray.kill(rank)


# ---- nccl (gloo on CPU) ---------------------------------------------------------------------------


def test_nccl_broadcast_in_buckets_to_two_explorers(job):
    config, sync, trainer, explorers = job("nccl")
    bucket_bytes = 1024
    assert ray.get(trainer.setup_nccl.remote(["explorer_0", "explorer_1"], bucket_bytes)) == 3
    buckets = plan_buckets(tuple(state_dict_meta(build_model(0).state_dict())), bucket_bytes)
    assert 1 < len(buckets) < len(build_model(0).state_dict())  # small tensors share a bucket
    for step in (1, 2):  # explorers arrive first, then the trainer first
        if step == 1:
            receiving = [e.nccl_sync.remote() for e in explorers]
            eventually(lambda: counts(sync) == {"waiting_sync": 2}, "explorers at the handshake")
            assert ray.get(trainer.publish_nccl.remote(step)) == step
        else:
            sending = trainer.publish_nccl.remote(step)
            eventually(lambda: ray.get(sync.trainer_requires_sync.remote()), "trainer at the handshake")
            receiving = [e.nccl_sync.remote() for e in explorers]
            assert ray.get(sending) == step
        assert ray.get(receiving) == [step, step]
        for explorer in explorers:
            version, state, loads = ray.get(explorer.state.remote())
            assert version == step and same_weights(state, step) and loads == step * len(buckets)
    assert ray.get(sync.get_latest_model_version.remote()) == 2
    # a stopped trainer ends the next handshake without a broadcast
    ray.get(trainer.set_status.remote(RunningStatus.STOPPED))
    assert ray.get([e.nccl_sync.remote() for e in explorers]) == [None, None]


def test_nccl_group_names_the_explorer_whose_join_failed(job, make_config):
    config, sync, trainer, _ = job("nccl", 120, explorers=())
    broken = light_actors.start(config, "explorer_x", fail_group_setup="no device for engine rank")
    with pytest.raises(SyncError) as info:
        ray.get(trainer.setup_nccl.remote(["explorer_x"], 1024))
    assert info.value.peer == "explorer 'explorer_x'" and "no device for engine rank" in str(info.value)
    assert info.value.waited_s < 120  # reported when the join failed, not at sync_timeout
    ray.kill(broken)


def test_memory_weights_outlive_the_trainer_that_published_them(job):
    # (last of the Ray tests of this module: it kills the pooled trainer, which `job` would then restart)
    config, sync, trainer, explorers = job("memory", explorers=("explorer_0",))
    ray.get(trainer.publish_memory.remote(7))
    ray.get(trainer.set_status.remote(RunningStatus.STOPPED))  # hands the object over to the Synchronizer
    ray.kill(trainer)
    assert ray.get(explorers[0].pull.remote()) == 7
    assert same_weights(ray.get(explorers[0].state.remote())[1], 7)


# ---- the pieces on their own ----------------------------------------------------------------------


def test_shards_round_trip_any_dtype_slice_and_scalar(tmp_path):
    weight = torch.randn(7, 3).to(torch.bfloat16)
    rows = torch.arange(5, dtype=torch.int64)
    write_shard(
        tmp_path, 0, 3, {"w": (weight[:4], weight.shape, 0), "r": (rows, rows.shape, 0), "t": torch.tensor(2.5)}
    )
    write_shard(tmp_path, 1, 3, {"w": (weight[4:], weight.shape, 4), "r": (rows, rows.shape, 0)})
    write_shard(tmp_path, 2, 3, {"w": (weight[7:], weight.shape, 7)})  # an empty slice (uneven split)
    merged = read_full_state_dict(tmp_path)
    assert torch.equal(merged["w"], weight) and merged["w"].dtype == torch.bfloat16
    assert torch.equal(merged["r"], rows) and merged["t"].item() == 2.5 and merged["t"].shape == ()
    index = read_shard_index(tmp_path)
    assert index.world_size == 3 and index.meta[0] == ("w", "torch.bfloat16", (7, 3))
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize(
    "pieces, problem",
    [
        ([(0, 3), (4, 3)], "'w' has a gap at row 3"),
        ([(0, 4), (3, 4)], "'w' has an overlap at row 3"),
        ([(0, 3), (3, 3)], "'w' has rows 0..6 of 7"),
    ],
)
def test_shards_that_do_not_tile_are_refused(tmp_path, pieces, problem):
    weight = torch.randn(7, 2)
    for rank, (start, rows) in enumerate(pieces):
        write_shard(tmp_path, rank, 2, {"w": (weight[start : start + rows], weight.shape, start)})
    with pytest.raises(ShardError, match=problem.replace("(", r"\(").replace(".", r"\.")):
        read_full_state_dict(tmp_path)


def test_shard_directory_problems_are_named(tmp_path):
    with pytest.raises(ShardError, match="no shard files"):
        read_shard_index(tmp_path)
    write_shard(tmp_path, 0, 2, {"w": torch.zeros(2, 2)[:1].clone().expand(1, 2).contiguous()}, durable=True)
    with pytest.raises(ShardError, match=r"ranks \[1\] of world size 2 are missing"):
        read_shard_index(tmp_path)
    (tmp_path / shard_file_name(1, 2)).write_bytes(struct.pack("<Q", 5) + b"{oops")
    with pytest.raises(ShardError, match="unreadable safetensors header"):
        read_shard_index(tmp_path)
    header = json.dumps({"w": {"dtype": "F32", "shape": [1, 2], "data_offsets": [0, 8]}}).encode()
    (tmp_path / shard_file_name(1, 2)).write_bytes(struct.pack("<Q", len(header)) + header + bytes(8))
    with pytest.raises(ShardError, match="not a trinity weight shard"):
        read_shard_index(tmp_path)
    with pytest.raises(ValueError, match="not a dim-0 slice"):
        write_shard(tmp_path, 0, 2, {"w": (torch.zeros(2, 3), (2, 4), 0)})


def test_packing_is_a_view_and_round_trips_every_dtype():
    state = {
        "bf16": torch.randn(4, 3).to(torch.bfloat16),
        "f32": torch.randn(5),
        "i64": torch.arange(6),
        "bool": torch.tensor([True, False]),
        "scalar": torch.tensor(3.0),
        "empty": torch.zeros(0, 4),
    }
    packed = pack_state_dict(state)
    assert packed.buffers[1].ctypes.data == state["f32"].data_ptr()  # no copy on the sender
    restored = unpack_state_dict(packed)
    assert all(torch.equal(restored[k], v) and restored[k].dtype == v.dtype for k, v in state.items())


def test_bucket_plan_groups_by_dtype_and_keeps_big_tensors_alone():
    meta = (
        ("a", "torch.float32", (2,)),
        ("b", "torch.bfloat16", (3,)),
        ("c", "torch.float32", (100,)),
        ("d", "torch.float32", (1,)),
        ("e", "torch.float32", (1,)),
    )
    plan = plan_buckets(meta, bucket_bytes=64)
    assert [[e.name for e in bucket.entries] for bucket in plan] == [["c"], ["a", "d", "e"], ["b"]]
    assert [bucket.nbytes for bucket in plan] == [400, 16, 6]
    assert [e.start for e in plan[1].entries] == [0, 2, 3]  # element offsets inside the shared buffer
