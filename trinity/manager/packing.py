"""A state dict as raw byte views, the form in which it crosses Ray's object store without extra copies.

Ray serialises numpy arrays out of band: `ray.put` copies their bytes once into shared memory and
`ray.get` on the same node maps them back without a copy. Torch tensors pickled the default way are
copied several times (about 0.15 GB/s end to end here). So each tensor is viewed, not copied, as a flat
uint8 numpy array (any dtype, bfloat16 included, which numpy lacks), and rebuilt on the other side as
a tensor over the same bytes. The receiver's tensors are read-only views of shared memory: copy them
into the model, never write into them.
"""

import warnings
from dataclasses import dataclass
from typing import Dict, Mapping, Tuple

import numpy as np
import torch

from trinity.manager.published_weights import TensorMeta

_DTYPES = {str(dtype): dtype for dtype in vars(torch).values() if isinstance(dtype, torch.dtype)}


@dataclass(frozen=True)
class PackedStateDict:
    meta: Tuple[TensorMeta, ...]
    buffers: Tuple[np.ndarray, ...]  # one flat uint8 view per entry of meta


def torch_dtype(name: str) -> torch.dtype:
    """'torch.float32' -> torch.float32."""
    try:
        return _DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown torch dtype {name!r}") from None


def tensor_meta(state_dict: Mapping[str, torch.Tensor]) -> Tuple[TensorMeta, ...]:
    return tuple((name, str(tensor.dtype), tuple(tensor.shape)) for name, tensor in state_dict.items())


def meta_bytes(meta) -> int:
    """Bytes of the tensors that `tensor_meta` describes: what a weight sync of them moves."""
    total = 0
    for _, dtype, shape in meta:
        count = 1
        for size in shape:
            count *= size
        total += count * getattr(torch, dtype.removeprefix("torch.")).itemsize
    return total


def pack_state_dict(state_dict: Mapping[str, torch.Tensor]) -> PackedStateDict:
    """Byte views of CPU tensors (contiguous ones are not copied; others are made contiguous once)."""
    buffers = []
    for name, tensor in state_dict.items():
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"state dict entry {name!r} is a {type(tensor).__name__}, expected a tensor")
        flat = tensor.detach().cpu().contiguous().reshape(-1)
        buffers.append(flat.view(torch.uint8).numpy())
    return PackedStateDict(tensor_meta(state_dict), tuple(buffers))


def unpack_state_dict(packed: PackedStateDict) -> Dict[str, torch.Tensor]:
    """Tensors over the packed bytes (no copy). They are read-only when the bytes come from the object store."""
    out = {}
    with warnings.catch_warnings():
        # torch warns that the arrays are not writable; that is the point: they are shared memory
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        for (name, dtype, shape), buffer in zip(packed.meta, packed.buffers, strict=True):
            if buffer.size == 0:  # no bytes to view; torch cannot reinterpret an empty array's dtype
                out[name] = torch.empty(shape, dtype=torch_dtype(dtype))
            else:
                out[name] = torch.from_numpy(buffer).view(torch_dtype(dtype)).reshape(shape)
    return out
