"""The console progress bar of a running job: train (or explore) steps, with the latest reward and version.

On a terminal it redraws in place; otherwise (a log file, CI, a pipe) every redraw would be a new line,
so it prints a plain line at most every `LINE_INTERVAL_S` seconds, and a last one when it closes.
"""

import math
import sys
import time
from typing import Dict, Optional

from tqdm import tqdm

LINE_INTERVAL_S = 30.0


class ProgressBar:
    def __init__(self, name: str, stream=None, line_interval_s: float = LINE_INTERVAL_S):
        self.name = name
        self.stream = stream or sys.stdout
        self.in_place = self.stream.isatty()
        self.line_interval_s = line_interval_s
        self.bar = (
            tqdm(desc=name, unit="step", file=self.stream, dynamic_ncols=True, mininterval=1.0)
            if self.in_place
            else None
        )
        self.shown: Optional[Dict] = None
        self.state: Dict[str, object] = {"n": 0, "total": None, "postfix": {}}
        self.printed_at: Optional[float] = None
        self.printed_state: Optional[Dict] = None

    def update(self, progress: Dict[str, Dict[str, float]]) -> None:
        """Show the roles' latest progress (`{"trainer": {...}, "explorer": {...}}`) when it changed."""
        if progress == self.shown:
            return
        self.shown = progress
        trainer, explorer = progress.get("trainer", {}), progress.get("explorer", {})
        if trainer:
            self.state["total"], self.state["n"] = int(trainer["total_steps"]), int(trainer["train_step"])
        elif explorer:
            self.state["n"] = int(explorer["explore_step"])
        postfix = {}
        if explorer:
            postfix["version"] = int(explorer["model_version"])
            if not math.isnan(explorer["reward"]):
                postfix["reward"] = f"{explorer['reward']:.3f}"
        self.state["postfix"] = postfix
        if self.bar is not None:
            self.bar.total, self.bar.n = self.state["total"], self.state["n"]
            self.bar.set_postfix(postfix, refresh=False)
            self.bar.refresh()
        elif self.printed_at is None or time.monotonic() - self.printed_at >= self.line_interval_s:
            self._print_line()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.shown is not None and self.printed_state != self.state:
            self._print_line()

    def _print_line(self) -> None:
        total = self.state["total"]
        steps = f"{self.state['n']}/{total}" if total else str(self.state["n"])
        extra = "".join(f", {key} {value}" for key, value in self.state["postfix"].items())
        print(f"{self.name}: step {steps}{extra}", file=self.stream, flush=True)
        self.printed_at, self.printed_state = time.monotonic(), {**self.state, "postfix": dict(self.state["postfix"])}
