"""What the Synchronizer holds as "the latest weights": a small descriptor, never the tensors themselves.

The Synchronizer only coordinates; the bytes travel trainer -> explorer directly. So `model_state_dict`
is one of:
- `ObjectStoreWeights` (memory method): an ObjectRef to the packed state dict in Ray's object store,
  put there once by trainer rank 0 and read zero-copy by every explorer;
- `CheckpointWeights` (checkpoint method): a directory of safetensors shards whose layout the
  Synchronizer has checked; each explorer maps the files and copies what it needs;
- `InEngineWeights` (memory method in colocate): the trainer rank already copied the weights into the engine
  of its own process; the descriptor only carries their names and shapes;
- a plain dict name -> tensor (anything else a caller hands to `set_model_state_dict`), passed on as is.

This module must not import torch: the Synchronizer actor stays light.
"""

from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

# (name, dtype as str(torch dtype), shape): the same triple the original system uses
TensorMeta = Tuple[str, str, Tuple[int, ...]]


@dataclass(frozen=True)
class ObjectStoreWeights:
    ref: Any  # ray.ObjectRef of a PackedStateDict; nested in this object so Ray never resolves it on the way
    meta: Tuple[TensorMeta, ...]
    owner: str  # who created the object ("trainer" or "synchronizer"); the object dies with its owner


@dataclass(frozen=True)
class CheckpointWeights:
    directory: str
    world_size: int
    meta: Tuple[TensorMeta, ...]


@dataclass(frozen=True)
class InEngineWeights:
    meta: Tuple[TensorMeta, ...]


def state_dict_meta(published: Any) -> Optional[List[TensorMeta]]:
    """Names, dtypes and shapes of whatever the Synchronizer holds; None when it holds nothing."""
    if published is None:
        return None
    if isinstance(published, (ObjectStoreWeights, CheckpointWeights, InEngineWeights)):
        return list(published.meta)
    if isinstance(published, dict):
        return [(name, str(tensor.dtype), tuple(tensor.shape)) for name, tensor in published.items()]
    raise TypeError(f"no tensor metadata for a published {type(published).__name__}")
