"""Sharded model/optimizer state in a checkpoint directory (torch.distributed.checkpoint under `dcp/`)."""

from pathlib import Path
from typing import List

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException  # a BaseException, not an Exception
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from trinity.trainer.damaged_checkpoint import checkpoint_error


def _wanted(model: torch.nn.Module, optimizer: torch.optim.Optimizer, contents: List[str]):
    """(the parts to write or read, the full current state)."""
    current = dict(zip(("model", "optimizer"), get_state_dict(model, optimizer), strict=True))
    return {key: value for key, value in current.items() if key in contents}, current


def save_sharded(directory: Path, model, optimizer, contents: List[str]) -> None:
    """Every rank writes its shards of what `contents` names (model, optimizer)."""
    state, _ = _wanted(model, optimizer, contents)
    if state:
        dcp.save(state, checkpoint_id=str(directory / "dcp"))


def load_sharded(directory: Path, model, optimizer, contents: List[str]) -> None:
    """Restore the model and/or optimizer shards that `contents` names, in place."""
    state, current = _wanted(model, optimizer, contents)
    if not state:
        return
    try:
        dcp.load(state, checkpoint_id=str(directory / "dcp"))
    except (Exception, CheckpointException) as exc:  # damaged: name the file and step, not DCP's rank summary
        raise checkpoint_error(directory / "dcp", exc) from None
    current.update(state)
    set_state_dict(model, optimizer, model_state_dict=current["model"], optim_state_dict=current["optimizer"])


def extra_state_path(directory: Path, rank: int, world_size: int) -> Path:
    return directory / f"extra_state_world_size_{world_size}_rank_{rank}.pt"


def load_extra_state(directory: Path, rank: int, world_size: int) -> dict:
    """This rank's extra state (step, LR schedule, RNG) of a checkpoint; a damaged file is named."""
    path = extra_state_path(directory, rank, world_size)
    try:
        return torch.load(path, weights_only=False)
    except Exception as exc:
        raise checkpoint_error(path, exc) from None
