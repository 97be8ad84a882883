"""Where a run started from the page writes: the job dir of each of its stages, so the page can show
what they leave (metrics, summary.json, learning_curve.png).

Read from a fresh validation when the run starts, not from the page's evaluation: that one is cached
per override list, and a fresh run (continue_from_checkpoint=false) of a non-empty job dir is renamed
with the time of its validation. The renamed name is pinned on the run's command line, so the run
writes exactly the directories the page reads.
"""

import os
from dataclasses import dataclass
from typing import Optional, Tuple

from trinity.config import ConfigError, validate
from trinity.studio.evaluation import Evaluation, compose_locked
from trinity.studio.overrides import value_override


@dataclass(frozen=True)
class RunDirs:
    stage_dirs: Tuple[str, ...]  # in stage order (one for a run without stages)
    pinned: Tuple[str, ...]  # overrides the run's command needs to write there

    @property
    def job_dir(self) -> Optional[str]:
        """The directory below which every stage writes its event files."""
        if len(self.stage_dirs) > 1:
            return os.path.commonpath(self.stage_dirs)
        return self.stage_dirs[0] if self.stage_dirs else None


def run_dirs(evaluation: Evaluation) -> RunDirs:
    """The stage job dirs of a run of this (valid) evaluation's overrides, started now."""
    try:
        validated = validate(compose_locked(evaluation.overrides))
        configs, notes = validated.configs, validated.notes
    except ConfigError:  # the disk changed since the page was checked; the run will say how
        configs, notes = list(evaluation.configs), []
    pinned = tuple(value_override("name", note.new).text for note in notes if note.key == "name")
    return RunDirs(tuple(str(config.checkpoint_job_dir) for config in configs), pinned)
