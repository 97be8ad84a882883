"""Where a job and a tiny model live on disk, and what counts as a local path: one answer for all."""

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path

from trinity.config.model import TinyModelConfig


def job_dir_of(checkpoint_root_dir: str, project: str, group: str, name: str) -> Path:
    """<root>/<project>/[<group>/]<name> as an absolute path (relative roots are taken from the cwd)."""
    root = Path(os.path.abspath(os.path.expanduser(checkpoint_root_dir)))
    parts = [part for part in (project, group, name) if part]
    return root.joinpath(*parts)


def looks_like_path(value: str) -> bool:
    """A model name that is meant as a local directory (so it must exist) rather than a hub name."""
    return value.startswith(("/", "./", "../", "~"))


def tiny_model_dir(model: TinyModelConfig) -> str:
    """The build directory of a tiny model: one per distinct spec, under tiny.cache_dir."""
    spec = {key: str(value) for key, value in asdict(model.tiny).items() if key != "cache_dir"}
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]
    return os.path.join(os.path.expanduser(model.tiny.cache_dir), f"tiny-{model.tiny.architecture.value}-{digest}")
