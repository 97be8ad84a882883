"""What one member needs to join the trainer -> explorers broadcast group (torch-free, so the Synchronizer
can build it). Group rank 0 is trainer rank 0; explorer k's engine ranks are rank_offset .. rank_offset+ranks-1."""

from dataclasses import dataclass, replace
from typing import Tuple

from trinity.manager.published_weights import TensorMeta

# Tensors at least this large are broadcast on their own; smaller ones are coalesced up to it. On CUDA a
# coalescing copy runs at HBM speed and saves per-call latency, so buckets are large; on CPU (gloo) the copy
# costs as much as the transfer, so only small tensors are coalesced.
DEFAULT_BUCKET_BYTES = {"nccl": 256 * 2**20, "gloo": 2**20}


@dataclass(frozen=True)
class WeightSyncGroupSpec:
    master_address: str
    master_port: int
    world_size: int
    rank_offset: int  # first group rank of this member
    ranks: int  # group ranks this member contributes
    backend: str  # "nccl" (CUDA tensors) or "gloo" (CPU tensors); one backend for the whole group
    state_dict_meta: Tuple[TensorMeta, ...]  # what every broadcast carries, in order
    bucket_bytes: int  # the broadcast is cut into buckets of at most this many bytes (per dtype)
    timeout_s: float

    def rank(self, local_rank: int = 0) -> int:
        if not 0 <= local_rank < self.ranks:
            raise ValueError(f"local rank {local_rank} outside the {self.ranks} ranks of this member")
        return self.rank_offset + local_rank

    def for_member(self, rank_offset: int, ranks: int) -> "WeightSyncGroupSpec":
        return replace(self, rank_offset=rank_offset, ranks=ranks)
