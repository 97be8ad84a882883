"""Sharded model/optimizer state in a checkpoint directory (torch.distributed.checkpoint under `dcp/`).

With `adapter_only` (LoRA) the frozen base is neither written nor read: it is the model the run started from."""

from pathlib import Path
from typing import List

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException  # a BaseException, not an Exception
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict

from trinity.trainer.damaged_checkpoint import checkpoint_error


def _wanted(model: torch.nn.Module, optimizer: torch.optim.Optimizer, contents: List[str], options: StateDictOptions):
    """(the parts to write or read, the full current state)."""
    current = dict(zip(("model", "optimizer"), get_state_dict(model, optimizer, options=options), strict=True))
    if options.ignore_frozen_params:  # torch keeps a tied alias of a frozen matrix (a tied output head): drop it
        trainable = {name for name, param in model.named_parameters() if param.requires_grad}
        current["model"] = {name: value for name, value in current["model"].items() if name in trainable}
    return {key: value for key, value in current.items() if key in contents}, current


def save_sharded(directory: Path, model, optimizer, contents: List[str], adapter_only: bool = False) -> None:
    """Every rank writes its shards of what `contents` names (model, optimizer)."""
    state, _ = _wanted(model, optimizer, contents, StateDictOptions(ignore_frozen_params=adapter_only))
    if state:
        dcp.save(state, checkpoint_id=str(directory / "dcp"))


def load_sharded(directory: Path, model, optimizer, contents: List[str], adapter_only: bool = False) -> None:
    """Restore the model and/or optimizer shards that `contents` names, in place."""
    options = StateDictOptions(ignore_frozen_params=adapter_only, strict=not adapter_only)
    state, current = _wanted(model, optimizer, contents, options)
    if not state:
        return
    try:
        dcp.load(state, checkpoint_id=str(directory / "dcp"))
    except (Exception, CheckpointException) as exc:  # damaged: name the file and step, not DCP's rank summary
        raise checkpoint_error(directory / "dcp", exc) from None
    current.update(state)
    set_state_dict(
        model, optimizer, model_state_dict=current["model"], optim_state_dict=current["optimizer"], options=options
    )


def extra_state_path(directory: Path, rank: int, world_size: int) -> Path:
    return directory / f"extra_state_world_size_{world_size}_rank_{rank}.pt"


def load_extra_state(directory: Path, rank: int, world_size: int) -> dict:
    """This rank's extra state (step, LR schedule, RNG) of a checkpoint; a damaged file is named."""
    path = extra_state_path(directory, rank, world_size)
    try:
        return torch.load(path, weights_only=False)
    except Exception as exc:
        raise checkpoint_error(path, exc) from None
