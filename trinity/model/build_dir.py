"""Writing a model directory once, atomically, however many processes ask for it at the same time.

The directory is written into a temporary sibling, fsynced, then renamed onto the target, so a reader
never sees half a model. Builders of the same target take turns on an exclusive lock beside it: the
first builds, the others find the finished directory when the lock is theirs (a 20-s GGUF conversion
is not repeated by every actor of a run). A crashed builder leaves only its temporary sibling behind.
"""

import fcntl
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from trinity.atomic_file import fsync_directory


def build_once(target: Path, write: Callable[[Path], None]) -> Path:
    """`target`, written by `write(staging_dir)` first unless it exists already."""
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also when this process dies
        if not target.exists():
            _build(target, write)
    return target


def _build(target: Path, write: Callable[[Path], None]) -> None:
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.building-", dir=target.parent))
    try:
        write(staging)
        _fsync_tree(staging)
        os.rename(staging, target)
        fsync_directory(target.parent)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _fsync_tree(directory: Path) -> None:
    """fsync every file, and give the tree the modes of files made normally (temporary ones are private)."""
    umask = os.umask(0)
    os.umask(umask)
    for path in directory.iterdir():
        if path.is_file():
            os.chmod(path, 0o666 & ~umask)
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
    os.chmod(directory, 0o777 & ~umask)
    fsync_directory(directory)
