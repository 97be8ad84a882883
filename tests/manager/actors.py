"""Small real actors that play trainer and explorers around a real Synchronizer, each holding a real torch model.

Version v of the weights is `build_model(v)` (seeded), so any process can tell whether the weights it
holds are exactly those of version v.
"""

import asyncio
import copy
from typing import Dict, List, Optional

import ray
import torch
from torch import nn

from trinity.manager import Synchronizer
from trinity.manager.checkpoint_shards import dim0_shard
from trinity.manager.weight_sync import (
    NcclReceiver,
    NcclSender,
    loading,
    publish_checkpoint_shard,
    publish_memory,
    pull_weights,
    state_dict_meta,
)


class TinyNet(nn.Module):
    """Mixed dtypes, an uneven row count (33) for a 2-way split, a 1-row parameter and a 0-dim buffer."""

    def __init__(self, embed_dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        self.embed = nn.Embedding(50, 16).to(embed_dtype)
        self.proj = nn.Linear(16, 33)
        self.scale = nn.Parameter(torch.ones(1))
        self.register_buffer("steps", torch.zeros(3, dtype=torch.int64))
        self.register_buffer("temperature", torch.tensor(0.5))


def build_model(version: int, embed_dtype: torch.dtype = torch.bfloat16) -> TinyNet:
    torch.manual_seed(version)
    model = TinyNet(embed_dtype)
    with torch.no_grad():
        model.scale.fill_(1.0 + version)
        model.steps.fill_(version)
        model.temperature.fill_(0.5 + version)
    return model


def same_weights(state: Dict[str, torch.Tensor], version: int, embed_dtype: torch.dtype = torch.bfloat16) -> bool:
    expected = build_model(version, embed_dtype).state_dict()
    return state.keys() == expected.keys() and all(torch.equal(state[k], expected[k]) for k in expected)


def copy_into(model: nn.Module, named: Dict[str, torch.Tensor]) -> None:
    target = model.state_dict()
    with torch.no_grad():
        for name, tensor in named.items():
            target[name].copy_(tensor)


@ray.remote(num_cpus=0)
class TrainerActor:
    """Trainer rank 0 of a one-rank trainer."""

    def __init__(self, config=None):
        torch.set_num_threads(1)
        if config is not None:
            self.connect(config)

    def connect(self, config) -> None:
        """Join the job of `config` (a fresh Synchronizer per test; the process is reused)."""
        self.config = config
        self.sync = Synchronizer.get_actor(config)
        self.sender: Optional[NcclSender] = None

    def set_status(self, status):
        ray.get(self.sync.set_trainer_status.remote(status))

    def publish_memory(self, step: int) -> None:
        publish_memory(self.sync, build_model(step).state_dict(), step)

    def publish_checkpoint(self, step: int) -> int:
        shard = build_model(step).state_dict()
        return publish_checkpoint_shard(self.sync, self.config.checkpoint_job_dir, step, 0, 1, shard)

    def setup_nccl(self, explorer_names: List[str], bucket_bytes: int) -> int:
        meta = state_dict_meta(build_model(0).state_dict())
        self.sender = NcclSender(self.sync, meta, bucket_bytes=bucket_bytes, explorer_names=explorer_names)
        return self.sender.setup().world_size

    def publish_nccl(self, step: int) -> Optional[int]:
        return self.sender.publish(build_model(step).state_dict(), step)


def _init_default_group(rank: int, world_size: int, port: int) -> None:
    # module level on purpose: cloudpickle would drag torch.distributed.config along with a method that
    # both imports torch.distributed and reads an attribute named `config`
    import datetime

    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=60)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size, timeout=timeout
    )


@ray.remote(num_cpus=0)
class ShardedTrainerRank:
    """One rank of a 2-rank FSDP2 trainer (gloo default group) that writes its real DTensor shards."""

    def __init__(self, config, rank: int, world_size: int, port: int):
        torch.set_num_threads(1)
        self.config, self.rank, self.world_size = config, rank, world_size
        _init_default_group(rank, world_size, port)
        self.sync = Synchronizer.get_actor(namespace=config.ray_namespace)

    def publish(self, step: int) -> Dict[str, tuple]:
        from torch.distributed.fsdp import fully_shard

        model = build_model(step, embed_dtype=torch.float32)
        fully_shard(model)
        shard = {name: dim0_shard(tensor) for name, tensor in model.state_dict().items()}
        publish_checkpoint_shard(self.sync, self.config.checkpoint_job_dir, step, self.rank, self.world_size, shard)
        return {name: (tuple(local.shape), offset) for name, (local, _, offset) in shard.items()}


@ray.remote(num_cpus=0)
class ExplorerActor:
    """An explorer with one engine rank; `config.explorer.name` is its actor name."""

    def __init__(self, config=None, embed_dtype: torch.dtype = torch.bfloat16):
        torch.set_num_threads(1)
        if config is not None:
            self.connect(config, embed_dtype)

    def connect(self, config, embed_dtype: torch.dtype = torch.bfloat16) -> None:
        """Join the job of `config` with the base model (version 0) loaded and no version pulled yet."""
        self.name = config.explorer.name
        self.sync = Synchronizer.get_actor(config)
        self.embed_dtype = embed_dtype
        self.model = build_model(0, embed_dtype)
        self.version = -1
        self.receiver: Optional[NcclReceiver] = None
        self.loads = 0

    def load(self, named: Dict[str, torch.Tensor], version: int) -> None:
        copy_into(self.model, named)
        self.loads += 1

    def set_status(self, status, old_status=None):
        ray.get(self.sync.set_explorer_status.remote(status, old_status, self.name))

    def pull(self, wait: bool = True) -> int:
        self.version = asyncio.run(pull_weights(self.sync, self.version, loading(self.load), self.name, wait=wait))
        return self.version

    def pull_until(self, last_version: int) -> List[tuple]:
        """Pull every new version up to last_version; (version, weights equal build_model(version)) per pull."""
        seen = []
        while self.version < last_version:
            version = self.pull()
            seen.append((version, same_weights(self.model.state_dict(), version, self.embed_dtype)))
        return seen

    def state(self):
        return self.version, copy.deepcopy(self.model.state_dict()), self.loads

    def setup_weight_sync_group(self, spec) -> None:
        self.receiver = NcclReceiver(spec)

    def nccl_sync(self) -> Optional[int]:
        version = self.receiver.sync(self.sync, self.name, self.load)
        if version is not None:
            self.version = version
        return version


def ready(*actors):
    """Wait until the actors' constructors have run (creation is asynchronous)."""
    ray.get([actor.__ray_ready__.remote() for actor in actors])
    return actors[0] if len(actors) == 1 else actors


def explorer_config(config, name: str):
    """The same job seen by another explorer (its own explorer.name)."""
    other = copy.deepcopy(config)
    other.explorer.name = name
    return other
