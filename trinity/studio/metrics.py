"""The latest value of every scalar a run wrote to TensorBoard event files under its job directory."""

from pathlib import Path
from typing import Dict, Tuple


def latest_scalars(job_dir: str) -> Dict[str, Tuple[int, float]]:
    """tag -> (step, value) of the newest event per tag, across all event files below `job_dir`."""
    root = Path(job_dir)
    if not root.is_dir():
        return {}
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    newest: Dict[str, Tuple[float, int, float]] = {}
    for events in sorted(root.rglob("events.out.tfevents.*")):
        accumulator = EventAccumulator(str(events), size_guidance={"scalars": 0})
        accumulator.Reload()
        for tag in accumulator.Tags().get("scalars", []):
            last = accumulator.Scalars(tag)[-1]
            if tag not in newest or last.wall_time >= newest[tag][0]:
                newest[tag] = (last.wall_time, last.step, last.value)
    return {tag: (step, value) for tag, (_, step, value) in sorted(newest.items())}
