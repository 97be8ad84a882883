"""The trainer -> explorers broadcast group and the bucketed broadcast of a state dict over it.

The group is its own process group, built on its own TCP store: it never touches the default group, so
it coexists with the trainer's FSDP group (and with an explorer's own groups). Same code on both
backends: nccl for CUDA tensors, gloo for CPU tensors.

A state dict is not broadcast tensor by tensor (per-call overhead dominates for many small tensors):
tensors are grouped by dtype into buckets of at most `bucket_bytes` (a larger tensor is a bucket of its
own, sent without a copy), each bucket is one broadcast of a flat buffer, and two buffers alternate so
the next bucket is packed (trainer) or in flight (explorer) while the current one is used. Every rank
derives the same plan from the same (name, dtype, shape) list.
"""

import datetime
import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Tuple

import torch
import torch.distributed as dist

from trinity.manager.errors import SyncError
from trinity.manager.group_spec import WeightSyncGroupSpec
from trinity.manager.packing import torch_dtype
from trinity.manager.published_weights import TensorMeta

STORE_PREFIX = "trinity_weight_sync"


@dataclass(frozen=True)
class BucketEntry:
    name: str
    shape: Tuple[int, ...]
    start: int  # element offset in the bucket
    numel: int


@dataclass(frozen=True)
class Bucket:
    dtype: torch.dtype
    entries: Tuple[BucketEntry, ...]
    numel: int

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize


def plan_buckets(meta: Tuple[TensorMeta, ...], bucket_bytes: int) -> List[Bucket]:
    """Per dtype (in order of first appearance): a tensor of at least bucket_bytes is a bucket of its own (sent
    from its own storage, no copy); smaller ones share buckets of up to bucket_bytes, in state-dict order."""
    by_dtype: Dict[str, List[TensorMeta]] = {}
    for entry in meta:
        by_dtype.setdefault(entry[1], []).append(entry)
    buckets = []
    for dtype_name, entries in by_dtype.items():
        dtype = torch_dtype(dtype_name)
        shared: List[BucketEntry] = []
        numel = 0
        for name, _, shape in entries:
            size = math.prod(int(dim) for dim in shape)
            if size * dtype.itemsize >= bucket_bytes:
                buckets.append(Bucket(dtype, (BucketEntry(name, tuple(shape), 0, size),), size))
                continue
            if shared and (numel + size) * dtype.itemsize > bucket_bytes:
                buckets.append(Bucket(dtype, tuple(shared), numel))
                shared, numel = [], 0
            shared.append(BucketEntry(name, tuple(shape), numel, size))
            numel += size
        if shared:
            buckets.append(Bucket(dtype, tuple(shared), numel))
    return buckets


class WeightBroadcastGroup:
    """One member's end of the group; construction blocks until every member has joined (or times out)."""

    def __init__(self, spec: WeightSyncGroupSpec, local_rank: int = 0, device: Optional[torch.device] = None):
        self.spec = spec
        self.rank = spec.rank(local_rank)
        self.plan = plan_buckets(spec.state_dict_meta, spec.bucket_bytes)
        timeout = datetime.timedelta(seconds=spec.timeout_s)
        self._tcp_store = dist.TCPStore(
            spec.master_address,
            spec.master_port,
            spec.world_size,
            is_master=self.rank == 0,
            timeout=timeout,
            wait_for_workers=False,
        )
        store = dist.PrefixStore(STORE_PREFIX, self._tcp_store)
        if spec.backend == "nccl":
            self.device = device or torch.device("cuda", torch.cuda.current_device())
            options = dist.ProcessGroupNCCL.Options()
            options._timeout = timeout
            self._backend = dist.ProcessGroupNCCL(store, self.rank, spec.world_size, options)
        elif spec.backend == "gloo":
            self.device = torch.device("cpu")
            self._backend = dist.ProcessGroupGloo(store, self.rank, spec.world_size, timeout)
        else:
            raise ValueError(f"unknown weight sync backend {spec.backend!r} (nccl or gloo)")
        # every member is here once this broadcast completes (and NCCL builds its communicator now, not mid-sync)
        self._broadcast(torch.zeros(1, device=self.device)).wait()
        self._buffers: List[Optional[torch.Tensor]] = [None, None]
        self._buffer_bytes = max((bucket.nbytes for bucket in self.plan), default=0)

    def _broadcast(self, tensor: torch.Tensor):
        return self._backend.broadcast(tensor, 0)

    def _buffer(self, slot: int, bucket: Bucket) -> torch.Tensor:
        """A flat view of `bucket.numel` elements of the bucket's dtype over the slot's reusable byte buffer."""
        if self._buffers[slot] is None:
            self._buffers[slot] = torch.empty(self._buffer_bytes, dtype=torch.uint8, device=self.device)
        return self._buffers[slot][: bucket.nbytes].view(bucket.dtype)

    def send(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Rank 0: broadcast every bucket of `state_dict` (which must match the group's meta)."""
        self._check_matches(state_dict)
        works: List = [None, None]
        held: List = [None, None]
        try:
            for index, bucket in enumerate(self.plan):
                slot = index % 2
                if works[slot] is not None:
                    works[slot].wait()
                if len(bucket.entries) == 1:
                    flat = state_dict[bucket.entries[0].name].detach().to(self.device).contiguous().view(-1)
                else:
                    flat = self._buffer(slot, bucket)
                    for entry in bucket.entries:
                        flat[entry.start : entry.start + entry.numel].copy_(state_dict[entry.name].detach().reshape(-1))
                held[slot] = flat
                works[slot] = self._broadcast(flat)
            for work in works:
                if work is not None:
                    work.wait()
        except RuntimeError as exc:
            raise SyncError(f"broadcast of version {version} from the trainer failed: {exc}") from exc

    def receive(self, load: Callable[[Dict[str, torch.Tensor], int], None], version: int) -> None:
        """Other ranks: receive every bucket and hand it to `load` (views of a reused buffer: copy them)."""
        if not self.plan:
            return
        try:
            works: List = [None, None]
            flats: List = [None, None]

            def post(index: int) -> None:
                slot = index % 2
                flats[slot] = self._buffer(slot, self.plan[index])
                works[slot] = self._broadcast(flats[slot])

            post(0)
            for index, bucket in enumerate(self.plan):
                slot = index % 2
                works[slot].wait()
                if index + 1 < len(self.plan):
                    post(index + 1)
                flat = flats[slot]
                load({e.name: flat[e.start : e.start + e.numel].view(e.shape) for e in bucket.entries}, version)
        except RuntimeError as exc:
            raise SyncError(
                f"receiving version {version} from the trainer failed at group rank {self.rank}: {exc}"
            ) from exc

    def _check_matches(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        expected = {name: (dtype, tuple(shape)) for name, dtype, shape in self.spec.state_dict_meta}
        actual = {name: (str(t.dtype), tuple(t.shape)) for name, t in state_dict.items()}
        if expected != actual:
            wrong = sorted(n for n in set(expected) | set(actual) if expected.get(n) != actual.get(n))
            raise ValueError(f"the state dict does not match the group's metadata at {wrong[:5]}")

    def close(self) -> None:
        shutdown = getattr(self._backend, "shutdown", None)
        if self.spec.backend == "nccl" and shutdown is not None:
            shutdown()
        self._backend = None
        self._tcp_store = None
