"""Every local path of a job leaves the driver absolute: actors on other nodes (or in other working
directories) do not share the driver's working directory, so a relative taskset, model or buffer path
would name another file there, or none. Hub and dataset names, which are not local paths, stay as given."""

import os
import re
from pathlib import Path
from typing import Optional

from trinity.config.errors import Report
from trinity.config.paths import looks_like_path
from trinity.config.root import Config
from trinity.config.rules.data_files import is_local

SQLITE_RELATIVE = re.compile(r"^(sqlite(?:\+\w+)?:///)(?!/)(.+)$")  # sqlite:///rel.db; sqlite:////abs.db is absolute


def absolute_local_paths(config: Config, report: Report) -> None:
    model = config.model
    model.model_path = _model(model.model_path)
    model.critic_model_path = _model(model.critic_model_path)
    model.chat_template_path = _file(model.chat_template_path)
    for served in [config.explorer.rollout_model, *config.explorer.auxiliary_models]:
        served.model_path = _model(served.model_path)
    inputs, trainer_input = config.buffer.explorer_input, config.buffer.trainer_input
    for taskset in [inputs.taskset, *inputs.eval_tasksets]:
        taskset.path = _data(taskset.path)
    for buffer in [trainer_input.experience_buffer, *trainer_input.auxiliary_buffers.values()]:
        buffer.path = _data(buffer.path)


def _absolute(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def _model(path: Optional[str]) -> Optional[str]:
    """A model directory (by its look, or because it exists here); a hub name is left alone."""
    if path and (looks_like_path(path) or Path(path).expanduser().exists()):
        return _absolute(path)
    return path


def _file(path: Optional[str]) -> Optional[str]:
    return _absolute(path) if path else path


def _data(path: Optional[str]) -> Optional[str]:
    """A data file or directory, or an SQLite URL with a relative database file; other URLs and dataset
    names are left alone."""
    if not path:
        return path
    sqlite = SQLITE_RELATIVE.match(path)
    if sqlite:
        return sqlite.group(1) + _absolute(sqlite.group(2))
    if "://" in path:
        return path
    return _absolute(path) if is_local(path) else path
