"""How weights travel from the trainer to the explorers: one sender and one receiver per sync method.

Model-agnostic: the trainer hands over a state dict (name -> tensor) and its step (the new version);
the explorer gives a callback `load(named_tensors, version)` that copies tensors into its model. The
tensors `load` receives are read-only views (shared memory, a mapped file, or a reused broadcast
buffer): copy them, do not keep them. `load` may be called more than once per version with disjoint
subsets (nccl calls it once per bucket). Version 0 is the base model and is never loaded. Handles:
`synchronizer = Synchronizer.get_actor(config)` in the explorer/trainer actor (registers it), or
`Synchronizer.get_actor(namespace=config.ray_namespace)` in helper processes (trainer ranks > 0, engines).

memory (trainer rank 0 holds a full CPU state dict; same-node explorers read it without a copy)
    trainer rank 0:  publish_memory(synchronizer, state_dict, step)
                     at the end: synchronizer.set_trainer_status(STOPPED) (the Synchronizer then takes the
                     last weights over; an object in Ray's store dies with the process that put it)
    explorer:        version = await pull_weights(synchronizer, version, loading(load), explorer_name)

checkpoint (every trainer rank writes its own dim-0 shard; safetensors under
<checkpoint_job_dir>/global_step_N/actor; the last of world_size reports publishes N, no polling)
    trainer rank r:  publish_checkpoint_shard(synchronizer, job_dir, step, r, world_size, shard)
                     shard = {name: dim0_shard(tensor)} (FSDP2 DTensors or plain tensors)
    explorer:        version = await pull_weights(synchronizer, version, loading(load), explorer_name)
    The shards of a superseded version are deleted unless global_step_N holds `.full_checkpoint`.

nccl (a broadcast group of trainer rank 0 and every explorer engine rank; gloo on CPU, same code)
    trainer rank 0, once:  sender = NcclSender(synchronizer, state_dict_meta(state_dict), device)
                           sender.setup()    # the explorers must have registered (get_actor) before
    explorer actor:        must have a method setup_weight_sync_group(spec): the Synchronizer calls it
                           during sender.setup(). It has `spec.ranks` engine ranks (explorer.rollout_model
                           .engine_num * tensor_parallel_size), starting at `spec.rank_offset`; each engine
                           rank i joins, concurrently, with receiver = NcclReceiver(spec, local_rank=i).
                           The method returns once all have joined (a failure is reported to the trainer
                           by the explorer's name at once).
    every sync, trainer:   version = sender.publish(state_dict, step)             # None: explorers stopped
    every sync, explorer:  version = nccl_handshake(synchronizer, explorer_name)  # None: trainer stopped
                           if version is not None: receiver.receive(load, version) on every engine rank
                           (a one-rank explorer calls receiver.sync(synchronizer, explorer_name, load))
    Both sides call at the same sync points; several explorers may be in the group, and every one of
    them must arrive for a broadcast to happen. Each wait is bounded by synchronizer.sync_timeout and
    ends in a SyncError naming who did not arrive.

`pull_weights` is a coroutine (await it in async actors; `asyncio.run` it elsewhere); everything else
here blocks the calling thread.
"""

import socket
import threading
import time
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional

import ray
import torch
from ray.exceptions import ObjectLostError, OwnerDiedError

from trinity.job_layout import actor_dir
from trinity.manager.checkpoint_shards import ShardError, ShardInput, read_full_state_dict, write_shard
from trinity.manager.collective import WeightBroadcastGroup
from trinity.manager.errors import SyncError
from trinity.manager.group_spec import WeightSyncGroupSpec
from trinity.manager.packing import pack_state_dict, tensor_meta, unpack_state_dict
from trinity.manager.published_weights import CheckpointWeights, ObjectStoreWeights, TensorMeta

Load = Callable[[Dict[str, torch.Tensor], int], None]
LoadPublished = Callable[[Any, int], Awaitable[None]]  # (published descriptor, version)
SUPERSEDED_RETRIES = 3  # a pull re-reads the newest version this often when the one it read was replaced


def state_dict_meta(state_dict: Mapping[str, torch.Tensor]) -> List[TensorMeta]:
    """(name, dtype, shape) of every entry: what the nccl group needs to know up front."""
    return list(tensor_meta(state_dict))


# ---- memory ---------------------------------------------------------------------------------------


def publish_memory(synchronizer: Any, state_dict: Mapping[str, torch.Tensor], step: int) -> None:
    """Trainer rank 0: put the full state dict into the object store once and publish it as version `step`.
    The Synchronizer takes the object over when the trainer reports STOPPED, so it outlives the trainer."""
    packed = pack_state_dict(state_dict)
    ref = ray.put(packed)
    ray.get(synchronizer.set_model_state_dict.remote(ObjectStoreWeights(ref, packed.meta, "trainer"), step))


# ---- checkpoint -----------------------------------------------------------------------------------


def publish_checkpoint_shard(
    synchronizer: Any, job_dir: str, step: int, rank: int, world_size: int, shard: Mapping[str, ShardInput]
) -> int:
    """Trainer rank `rank`: write its shard of step `step` and report it; returns the step."""
    write_shard(actor_dir(job_dir, step), rank, world_size, shard)
    return ray.get(synchronizer.set_model_state_dict_with_step_num.remote(step, world_size))


# ---- pulling (memory and checkpoint) --------------------------------------------------------------


async def pull_weights(
    synchronizer: Any,
    current_version: int,
    load_published: LoadPublished,
    explorer_name: Optional[str] = None,
    wait: bool = True,
) -> int:
    """Explorer: wait (unless `wait=False`) for a version newer than `current_version`, hand its published
    descriptor to `load_published` (which materializes it where the model lives), and return the version
    now held (`current_version` when nothing newer came). The one pull protocol of memory and checkpoint
    sync, for the explorer's engines and for any other receiver (`loading(load)` adapts a tensor loader)."""
    newest = await synchronizer.wait_new_model_state_dict.remote(current_version, not wait, explorer_name)
    if newest <= current_version:
        return current_version
    attempt = 0
    while True:  # ends: the last allowed attempt loads or raises
        published, version = await synchronizer.get_model_state_dict.remote()
        if not await _superseded_while_loading(published, version, current_version, load_published, attempt):
            return max(version, current_version)
        attempt += 1


def loading(load: Load) -> LoadPublished:
    """A `load_published` that materializes the weights in this process and hands the tensors to `load`."""

    async def load_published(published: Any, version: int) -> None:
        load(materialize(published, version), version)

    return load_published


async def _superseded_while_loading(
    published: Any, version: int, current_version: int, load_published: LoadPublished, attempt: int
) -> bool:
    """Load `version` if it is newer; True when its checkpoint files were removed because a newer version
    replaced it in the meantime (then the caller loads that one instead)."""
    if version <= current_version:
        return False
    if published is None:
        if version == 0:
            return False  # the base model: already loaded
        raise SyncError(f"version {version} was announced without weights (the nccl method broadcasts them)")
    try:
        await load_published(published, version)
    except (FileNotFoundError, ShardError) as exc:
        if isinstance(published, CheckpointWeights) and attempt < SUPERSEDED_RETRIES:
            return True
        raise SyncError(f"the weights of version {version} cannot be read: {exc}") from exc
    return False


def materialize(published: Any, version: int) -> Dict[str, torch.Tensor]:
    """The tensors behind a published descriptor (views, no copy where possible)."""
    if isinstance(published, ObjectStoreWeights):
        try:
            return unpack_state_dict(ray.get(published.ref))
        except (OwnerDiedError, ObjectLostError) as exc:
            raise SyncError(
                f"the weights of version {version} were lost with their owner ({published.owner}), which exited "
                "before reporting STOPPED",
                peer=published.owner,
                state="dead",
            ) from exc
    if isinstance(published, CheckpointWeights):
        return read_full_state_dict(published.directory, published.world_size)
    if isinstance(published, dict):
        return published
    raise TypeError(f"cannot load published weights of type {type(published).__name__}")


# ---- nccl (gloo on CPU) ---------------------------------------------------------------------------


class NcclSender:
    """Trainer rank 0's end of the broadcast group."""

    def __init__(
        self,
        synchronizer: Any,
        state_dict_meta: List[TensorMeta],
        device: Optional[torch.device] = None,
        bucket_bytes: Optional[int] = None,
        explorer_names: Optional[List[str]] = None,
    ):
        self.synchronizer = synchronizer
        self.meta = [(name, dtype, tuple(shape)) for name, dtype, shape in state_dict_meta]
        self.device = torch.device(device or "cpu")
        self.bucket_bytes = bucket_bytes
        self.explorer_names = explorer_names
        self.group: Optional[WeightBroadcastGroup] = None

    def setup(self, master_address: Optional[str] = None, master_port: Optional[int] = None) -> WeightSyncGroupSpec:
        """Form the group: the Synchronizer asks every explorer to join, then this rank joins as rank 0.
        An explorer whose join fails is named at once; one that never joins, at the timeout."""
        address = master_address or ray.util.get_node_ip_address()
        port = master_port or _free_port()
        backend = "nccl" if self.device.type == "cuda" else "gloo"
        spec = ray.get(
            self.synchronizer.setup_weight_sync_group.remote(
                address, port, self.meta, backend, self.bucket_bytes, self.explorer_names
            )
        )
        self.group = _join_watched(spec, self.device, self.synchronizer)
        return spec

    def publish(self, state_dict: Mapping[str, torch.Tensor], step: int) -> Optional[int]:
        """Handshake, then broadcast `state_dict` as version `step`; None when the explorers have stopped."""
        if self.group is None:
            raise RuntimeError("NcclSender.setup() must run before publish()")
        version = ray.get(self.synchronizer.ready_to_nccl_sync.remote("trainer", step))
        if version is None:
            return None
        self.group.send(state_dict, version)
        return version

    def close(self) -> None:
        if self.group is not None:
            self.group.close()
            self.group = None


class NcclReceiver:
    """One explorer engine rank's end of the broadcast group; construction joins it (blocking)."""

    def __init__(self, spec: WeightSyncGroupSpec, local_rank: int = 0, device: Optional[torch.device] = None):
        self.group = WeightBroadcastGroup(spec, local_rank, device)

    def receive(self, load: Load, version: int) -> None:
        self.group.receive(load, version)

    def sync(self, synchronizer: Any, explorer_name: Optional[str], load: Load) -> Optional[int]:
        """Handshake and receive, for an explorer with a single engine rank."""
        version = nccl_handshake(synchronizer, explorer_name)
        if version is not None:
            self.receive(load, version)
        return version

    def close(self) -> None:
        self.group.close()


def nccl_handshake(synchronizer: Any, explorer_name: Optional[str] = None) -> Optional[int]:
    """Explorer: wait for the trainer's matching call; the version to receive, or None if it has stopped."""
    return ray.get(synchronizer.ready_to_nccl_sync.remote("explorer", None, explorer_name))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def _join_watched(spec: WeightSyncGroupSpec, device: torch.device, synchronizer: Any) -> WeightBroadcastGroup:
    """Join as rank 0 in a thread (it blocks until all members arrive) while asking the Synchronizer whether an
    explorer's join has failed, so a broken explorer is reported by name at once instead of at the timeout."""
    outcome: Dict[str, Any] = {}

    def join() -> None:
        try:
            outcome["group"] = WeightBroadcastGroup(spec, 0, device)
        except Exception as exc:  # reported below with the explorers that did not join
            outcome["error"] = exc

    start = time.monotonic()
    thread = threading.Thread(target=join, name="weight-sync-join", daemon=True)
    thread.start()
    while True:
        thread.join(0.25)
        if not thread.is_alive():
            break
        status = ray.get(synchronizer.get_weight_sync_group_status.remote())
        if status["failed"]:
            raise _group_error(status, time.monotonic() - start)
    if "error" in outcome:
        status = ray.get(synchronizer.get_weight_sync_group_status.remote())
        raise _group_error(status, time.monotonic() - start) from outcome["error"]
    return outcome["group"]


def _group_error(status: Dict[str, Any], waited: float) -> SyncError:
    if status["failed"]:
        name, error = sorted(status["failed"].items())[0]
        failed = "; ".join(f"explorer {n!r}: {e}" for n, e in sorted(status["failed"].items()))
        return SyncError(
            f"the weight sync group did not form: {failed}", peer=f"explorer {name!r}", state=error, waited_s=waited
        )
    pending = status["pending"] or status["explorers"]
    who = ", ".join(f"explorer {n!r}" for n in pending) or "no explorer"
    return SyncError(
        f"the weight sync group did not form within {waited:.1f} s (synchronizer.sync_timeout): {who} did not join",
        peer=f"explorer {pending[0]!r}" if pending else None,
        state="joining",
        waited_s=waited,
    )
