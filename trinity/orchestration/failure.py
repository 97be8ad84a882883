"""A run that stops for a diagnosed reason (`JobError`: a role failed, stalled or froze) ends with a short
block on the console: which role, the cause's message, the job directory and where the logs are. The full
traceback (the driver's and the actor's, as Ray chained them) goes to a file in the job directory, so the
cause is the first thing a reader sees and nothing is lost."""

import re
import traceback
from pathlib import Path
from typing import Optional

FAILURE_LOG = "failure.log"
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # Ray colours the actor's name in the traceback it chains


def record_failure(exc: BaseException, job_dir: str) -> Optional[Path]:
    """Write `exc`'s whole traceback to `<job_dir>/failure.log`; None when the directory is not writable."""
    path = Path(job_dir) / FAILURE_LOG
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_COLOUR.sub("", "".join(traceback.format_exception(exc))))
    except OSError:
        return None
    return path


def ray_logs_dir() -> Optional[str]:
    """The Ray session's log directory of this driver (every actor's stdout and stderr), if Ray ran here."""
    try:
        import ray

        return ray._private.worker._global_node.get_logs_dir_path()
    except Exception:  # noqa: BLE001 - no Ray node in this process, or an API Ray moved: the block omits it
        return None


def failure_block(message: str, job_dir: str, traceback_path: Optional[Path], ray_logs: Optional[str]) -> str:
    lines = ["the run failed", f"  cause:     {message}", f"  job dir:   {job_dir}"]
    if traceback_path is not None:
        lines.append(f"  traceback: {traceback_path}")
    if ray_logs is not None:
        lines.append(f"  Ray logs:  {ray_logs} (each actor's output)")
    return "\n".join(lines)
