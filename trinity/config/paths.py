"""Where a job lives on disk: one function, so validation, the launcher and the StateManager agree."""

import os
from pathlib import Path


def job_dir_of(checkpoint_root_dir: str, project: str, group: str, name: str) -> Path:
    """<root>/<project>/[<group>/]<name> as an absolute path (relative roots are taken from the cwd)."""
    root = Path(os.path.abspath(os.path.expanduser(checkpoint_root_dir)))
    parts = [part for part in (project, group, name) if part]
    return root.joinpath(*parts)
