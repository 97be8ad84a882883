"""The console progress bar of a running job: train (or explore) steps, with the latest reward and version."""

import math
import sys
from typing import Dict

from tqdm import tqdm

from trinity.config.root import Config


class ProgressBar:
    def __init__(self, config: Config):
        self.bar = tqdm(desc=config.name, unit="step", file=sys.stdout, dynamic_ncols=True, mininterval=1.0)
        self.shown = None

    def update(self, progress: Dict[str, Dict[str, float]]) -> None:
        """Redraw when something changed (outside a terminal every redraw is a new log line)."""
        if progress == self.shown:
            return
        self.shown = progress
        trainer, explorer = progress.get("trainer", {}), progress.get("explorer", {})
        if trainer:
            self.bar.total = trainer["total_steps"]
            self.bar.n = trainer["train_step"]
        elif explorer:
            self.bar.n = explorer["explore_step"]
        postfix = {}
        if explorer:
            postfix["version"] = explorer["model_version"]
            if not math.isnan(explorer["reward"]):
                postfix["reward"] = f"{explorer['reward']:.3f}"
        self.bar.set_postfix(postfix, refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()
