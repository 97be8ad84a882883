"""Why a checkpoint failed to load, in words a user can act on.

torch.distributed.checkpoint reports a truncated shard as "CheckpointException ranks:dict_keys([0])"
over a zip-reader error, naming neither the file nor the step. The DCP `.metadata` records where every
tensor lies (file, offset, length), so comparing it with the files on disk names the missing or short
file; the step comes from the `global_step_N` directory, and the fix points at an earlier checkpoint.
"""

from collections import defaultdict
from pathlib import Path
from typing import Dict, List

from trinity.job_layout import STEP_DIR, CheckpointError, completed_steps


def checkpoint_error(path: Path, exc: BaseException) -> CheckpointError:
    """A CheckpointError for `path` (a `dcp/` directory or a file of an actor/critic checkpoint) that
    failed to load with `exc`: names the damaged file, the step and what to do."""
    damage = _dcp_damage(path) if path.name == "dcp" else []
    what = "; ".join(damage) if damage else f"{path} cannot be read ({_root_cause(exc)})"
    return CheckpointError(f"the checkpoint of {_step_label(path)} cannot be loaded: {what}; {_fix(path)}")


def _dcp_damage(directory: Path) -> List[str]:
    """Missing or short shard files of a DCP directory, judged against its `.metadata`."""
    from torch.distributed.checkpoint import FileSystemReader

    if not directory.is_dir():
        return [f"{directory} does not exist"]
    try:
        metadata = FileSystemReader(str(directory)).read_metadata()
    except Exception as exc:  # noqa: BLE001 - any failure here means the metadata file itself is damaged
        return [f"{directory / '.metadata'} cannot be read ({_root_cause(exc)})"]
    needed: Dict[str, int] = defaultdict(int)
    for info in (metadata.storage_data or {}).values():
        needed[info.relative_path] = max(needed[info.relative_path], info.offset + info.length)
    damage = []
    for name, size in sorted(needed.items()):
        path = directory / name
        if not path.exists():
            damage.append(f"{path} is missing")
        elif path.stat().st_size < size:
            damage.append(f"{path} is truncated ({path.stat().st_size} bytes; its .metadata expects {size})")
    return damage


def _step_dir(path: Path) -> Path:
    for parent in path.parents:
        if STEP_DIR.match(parent.name):
            return parent
    return path.parent


def _step_label(path: Path) -> str:
    match = STEP_DIR.match(_step_dir(path).name)
    return f"step {match.group(1)} ({_step_dir(path)})" if match else str(path)


def _fix(path: Path) -> str:
    step_dir = _step_dir(path)
    match = STEP_DIR.match(step_dir.name)
    earlier = [s for s in completed_steps(step_dir.parent) if match and s < int(match.group(1))]
    if earlier:
        return (
            "restore the file, or resume from an earlier checkpoint: trainer.resume_mode=resume_path "
            f"trainer.resume_from_path={step_dir.parent / f'global_step_{earlier[-1]}'}"
        )
    return "restore the file, or start the job afresh (continue_from_checkpoint=false)"


def _root_cause(exc: BaseException) -> str:
    """The innermost error's first line (DCP wraps each rank's failure in a CheckpointException)."""
    failures = getattr(exc, "failures", None)
    if isinstance(failures, dict) and failures:
        inner = next(iter(failures.values()))
        exc = inner[0] if isinstance(inner, tuple) else inner
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
