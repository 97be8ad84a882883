"""The weight-shard format of the checkpoint sync method: one safetensors file per trainer rank.

`<dir>/model_world_size_<W>_rank_<r>.safetensors` holds, for every parameter, rank r's slice along
dim 0 (FSDP2 shards parameters by rows), and in the file's metadata the full shape and the row offset
of that slice. Merging places each slice at its offset, so shards of any even or uneven dim-0 split
merge without knowing how they were cut. A slice whose shape is the full shape is a complete copy
(world_size 1, or a replicated parameter); a rank may omit a parameter it holds no rows of.

    write_shard(directory, rank, world_size, {name: (local_tensor, full_shape, row_offset)})
    write_shard(directory, 0, 1, {name: tensor})              # full tensors
    read_full_state_dict(directory) -> {name: tensor}
    read_shard_index(directory) -> ShardIndex                 # headers only, no torch, checks the layout

A shard is written to a temp file and renamed, so a reader never sees half a file. Full tensors read
back are memory-mapped views of the file (no copy until used).
"""

import json
import os
import re
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from trinity.atomic_file import fsync_directory
from trinity.safetensors_dtypes import TAG_TO_TORCH_NAME

FORMAT = "trinity-weight-shard/1"
METADATA_KEY = "trinity_shard"
SHARD_FILE = re.compile(r"^model_world_size_(\d+)_rank_(\d+)\.safetensors$")


ShardInput = Union[Any, Tuple[Any, Sequence[int], int]]  # a full tensor, or (local slice, full shape, row offset)


class ShardError(ValueError):
    """A shard directory whose files do not add up to one state dict (missing rank, gap, overlap, mismatch)."""


def shard_file_name(rank: int, world_size: int) -> str:
    return f"model_world_size_{world_size}_rank_{rank}.safetensors"


def write_shard(
    directory: Union[str, Path],
    rank: int,
    world_size: int,
    tensors: Mapping[str, ShardInput],
    durable: bool = False,
) -> Path:
    """Write rank's slices; `durable=True` also fsyncs (needed for checkpoints that must survive a power loss,
    not for sync-only dumps that are superseded within a step)."""
    import torch
    from safetensors.torch import save_file

    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside world_size {world_size}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    local, layout = {}, {}
    for name, value in tensors.items():
        tensor, full_shape, offset = value if isinstance(value, tuple) else (value, tuple(value.shape), 0)
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name!r} is a {type(tensor).__name__}, expected a tensor")
        full_shape = [int(size) for size in full_shape]
        _check_slice(name, tuple(tensor.shape), full_shape, int(offset))
        local[name] = tensor.detach().cpu().contiguous()
        layout[name] = {"shape": full_shape, "offset": int(offset)}
    metadata = {METADATA_KEY: json.dumps({"format": FORMAT, "rank": rank, "world_size": world_size, "params": layout})}
    path = directory / shard_file_name(rank, world_size)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        save_file(local, tmp, metadata=metadata)
        if durable:
            with open(tmp, "rb") as handle:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        fsync_directory(directory)
    return path


def _check_slice(name: str, local_shape: Tuple[int, ...], full_shape: List[int], offset: int) -> None:
    if list(local_shape) == full_shape and offset == 0:
        return
    if not local_shape or list(local_shape[1:]) != full_shape[1:]:
        raise ValueError(f"{name!r}: a slice of shape {list(local_shape)} is not a dim-0 slice of {full_shape}")
    if offset < 0 or offset + local_shape[0] > full_shape[0]:
        raise ValueError(f"{name!r}: rows {offset}..{offset + local_shape[0]} fall outside {full_shape[0]} rows")


def dim0_shard(tensor: Any) -> Tuple[Any, Tuple[int, ...], int]:
    """(local slice, full shape, row offset) of a DTensor sharded on dim 0 (FSDP2), or of a plain tensor."""
    from torch.distributed.tensor import DTensor

    if not isinstance(tensor, DTensor):
        return tensor, tuple(tensor.shape), 0
    chunks = tensor.__create_chunk_list__()
    if len(chunks) != 1 or any(chunks[0].offsets[1:]):
        raise ValueError(f"only dim-0 sharded DTensors are supported, got placements {tensor.placements}")
    return tensor.to_local(), tuple(tensor.shape), int(chunks[0].offsets[0]) if tensor.dim() else 0


def remove_shards(directory: Union[str, Path]) -> None:
    """Delete the weight shards of a directory (and the directory, and its parent, if that leaves them empty).
    Readers that have already opened a shard keep reading it: an unlinked file lives until it is closed."""
    directory = Path(directory)
    for path in directory.glob("model_world_size_*_rank_*.safetensors"):
        path.unlink(missing_ok=True)
    for folder in (directory, directory.parent):
        try:
            folder.rmdir()
        except OSError:  # not empty (other checkpoint content), or already gone
            return


# ---- reading -------------------------------------------------------------------------------------


@dataclass
class Piece:
    file: str
    rows: int  # rows of this slice (dim 0), or -1 for a complete copy
    offset: int


@dataclass
class ParamLayout:
    dtype: str
    shape: Tuple[int, ...]
    pieces: List[Piece] = field(default_factory=list)


@dataclass
class ShardIndex:
    directory: str
    world_size: int
    params: Dict[str, ParamLayout]

    @property
    def meta(self) -> Tuple[Tuple[str, str, Tuple[int, ...]], ...]:
        return tuple((name, layout.dtype, layout.shape) for name, layout in self.params.items())


def read_header(path: Union[str, Path]) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """(tensor entries, string metadata) of a safetensors file, read without loading any tensor."""
    with open(path, "rb") as handle:
        prefix = handle.read(8)
        if len(prefix) != 8:
            raise ShardError(f"{path}: too short for a safetensors file")
        (size,) = struct.unpack("<Q", prefix)
        if size > 100 * 2**20:
            raise ShardError(f"{path}: header of {size} bytes is not plausible")
        try:
            header = json.loads(handle.read(size))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ShardError(f"{path}: unreadable safetensors header ({exc})") from None
    metadata = header.pop("__metadata__", None) or {}
    return header, metadata


def shard_world_sizes(directory: Union[str, Path]) -> List[int]:
    """World sizes for which the directory holds shard files."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted({int(match.group(1)) for match in map(SHARD_FILE.match, names) if match})


def read_shard_index(directory: Union[str, Path], world_size: Optional[int] = None) -> ShardIndex:
    """Check that the shards of `directory` form one complete state dict and describe where each row lives."""
    directory = Path(directory)
    sizes = shard_world_sizes(directory)
    if world_size is None:
        if len(sizes) != 1:
            found = "no shard files" if not sizes else f"shards of world sizes {sizes}"
            raise ShardError(f"{directory}: expected shards of one world size, found {found}")
        world_size = sizes[0]
    missing = [rank for rank in range(world_size) if not (directory / shard_file_name(rank, world_size)).is_file()]
    if missing:
        raise ShardError(f"{directory}: shards of ranks {missing} of world size {world_size} are missing")
    params: Dict[str, ParamLayout] = {}
    for rank in range(world_size):
        path = directory / shard_file_name(rank, world_size)
        entries, metadata = read_header(path)
        layout = _shard_layout(path, metadata, rank, world_size)
        if set(entries) != set(layout):
            odd = sorted(set(entries) ^ set(layout))
            raise ShardError(f"{path}: tensors and layout metadata disagree about {odd[:5]}")
        for name in layout:  # the writer's order, i.e. the state dict's
            entry = entries[name]
            dtype = TAG_TO_TORCH_NAME.get(entry["dtype"])
            if dtype is None:
                raise ShardError(f"{path}: tensor {name!r} has unsupported dtype {entry['dtype']}")
            shape, offset = tuple(layout[name]["shape"]), int(layout[name]["offset"])
            local = tuple(entry["shape"])
            param = params.setdefault(name, ParamLayout(dtype, shape))
            if (param.dtype, param.shape) != (dtype, shape):
                raise ShardError(
                    f"{path}: {name!r} is {dtype} {list(shape)} here "
                    f"but {param.dtype} {list(param.shape)} in another shard"
                )
            complete = local == shape and offset == 0
            param.pieces.append(Piece(str(path), -1 if complete else local[0], offset))
    for name, param in params.items():
        _check_tiling(directory, name, param)
    return ShardIndex(str(directory), world_size, params)


def _shard_layout(path: Path, metadata: Dict[str, str], rank: int, world_size: int) -> Dict[str, Any]:
    try:
        info = json.loads(metadata[METADATA_KEY])
    except (KeyError, json.JSONDecodeError):
        raise ShardError(f"{path}: not a trinity weight shard (no {METADATA_KEY!r} metadata)") from None
    if info.get("format") != FORMAT:
        raise ShardError(f"{path}: shard format {info.get('format')!r}, expected {FORMAT!r}")
    if (info.get("rank"), info.get("world_size")) != (rank, world_size):
        raise ShardError(f"{path}: says rank {info.get('rank')} of {info.get('world_size')}, its name says otherwise")
    return info["params"]


def _check_tiling(directory: Path, name: str, param: ParamLayout) -> None:
    """Either a complete copy, or slices that cover every row exactly once (empty slices are ignored)."""
    param.pieces = [piece for piece in param.pieces if piece.rows != 0] or param.pieces[:1]
    complete = [piece for piece in param.pieces if piece.rows < 0]
    if complete:
        if len(complete) != len(param.pieces):
            raise ShardError(f"{directory}: {name!r} is stored both whole and as slices")
        del param.pieces[1:]  # replicas are identical; read one
        return
    param.pieces.sort(key=lambda piece: piece.offset)
    row = 0
    for piece in param.pieces:
        if piece.offset != row:
            kind = "an overlap" if piece.offset < row else "a gap"
            raise ShardError(f"{directory}: {name!r} has {kind} at row {min(row, piece.offset)}")
        row += piece.rows
    if row != param.shape[0]:
        raise ShardError(f"{directory}: {name!r} has rows 0..{row} of {param.shape[0]}")


def read_full_state_dict(directory: Union[str, Path], world_size: Optional[int] = None) -> Dict[str, Any]:
    """Full tensors by name: memory-mapped views for complete copies, merged tensors for sliced ones."""
    return read_indexed_state_dict(read_shard_index(directory, world_size))


def read_indexed_state_dict(index: ShardIndex) -> Dict[str, Any]:
    import torch
    from safetensors import safe_open

    from trinity.manager.packing import torch_dtype

    handles: Dict[str, Any] = {}

    def tensor(piece: Piece, name: str):
        if piece.file not in handles:
            handles[piece.file] = safe_open(piece.file, framework="pt")
        return handles[piece.file].get_tensor(name)

    out = {}
    for name, param in index.params.items():
        if len(param.pieces) == 1 and param.pieces[0].rows < 0:
            out[name] = tensor(param.pieces[0], name)
            continue
        full = torch.empty(param.shape, dtype=torch_dtype(param.dtype))
        for piece in param.pieces:
            if piece.rows:
                full[piece.offset : piece.offset + piece.rows].copy_(tensor(piece, name))
        out[name] = full
    return out
