"""Top-up reads: an explore step that leaves the trainer's batch short explores more tasks, within a bound.

Why: the trainer reads fixed batches of rows from the experience buffer, but rollouts go missing
legitimately: a task that fails after its retries yields nothing, and a group filter (GRPO's
`std_threshold`, DAPO's dynamic sampling) drops whole groups. Left alone, the trainer waits for a batch
that never fills while the explorer waits for weights the trainer cannot produce, until a sync timeout
blames the trainer. So the explorer counts what it wrote (`trinity.config.quota`) and, while a step
leaves the trainer's stream short of what is due after it, reads the next tasks of the taskset as part
of the same step.

Why top up rather than let the trainer take a smaller batch: train_batch_size is a hyperparameter (the
loss scale, the micro-batch plan and the mix strategy's expert share depend on it), DAPO fills its
batches by design, and the trainer's planned steps, the sync schedule and the deadlock rule in
validation all count full batches.

What stays consistent: a top-up read belongs to the step it tops up. The step number, the experiences'
batch id, the metrics' x-axis and the place in the sync schedule (sync_offset, sync_interval) are those
of the step; only the taskset cursor moves further, and it is saved with the step (StateManager
`commit_explorer`, `experiences_written` beside the cursor) once the step's experiences are written, so
a rerun after a crash re-explores at most that step, from the cursor before it. Each experience also
carries the cursor after its step (`info["taskset_index"]`), which the trainer's sample strategy keeps:
an explorer whose queue died with the last run resumes right after the newest step the trainer consumed.

The bound: `explorer.max_extra_explore_steps` extra reads per step. A step still short after them stops
the run with `ExploreStarved`, which names the cause: groups filtered by which threshold, or failed tasks
and the last error. A step that yields nothing because every task of two reads in a row failed stops it
at once: one such read of a few tasks can be bad luck when only some inputs break a reward function, two
with nothing succeeding mean a broken workflow or reward function, which more reads would not mend.
"""

import statistics
from dataclasses import dataclass, field
from typing import Dict, List

from trinity.buffer.experience import Experience
from trinity.explorer.runner import RunResult, TaskFailure, step_metrics


class ExploreStarved(RuntimeError):
    """The explorer cannot fill the trainer's batches; the message says why and what to change."""


@dataclass
class StepTally:
    """What the reads of one explore step gave: its metrics, and the causes an error names."""

    reads: int = 0
    tasks: int = 0
    failures: List[TaskFailure] = field(default_factory=list)
    retries: float = 0.0
    run_s: float = 0.0
    groups: int = 0
    filtered: int = 0
    produced: List[Experience] = field(default_factory=list)  # before any group filter
    kept: List[Experience] = field(default_factory=list)  # what goes to the buffer
    advantage: Dict[str, List[float]] = field(default_factory=dict)

    def add(self, result: RunResult, tasks: int, kept: List[Experience], advantage: Dict[str, float]) -> None:
        self.reads += 1
        self.tasks += tasks
        self.failures += result.failures
        self.retries += result.metrics.get("task_retries", 0.0)
        self.run_s += result.metrics.get("time/run_s", 0.0)
        self.groups += len({exp.group_id for exp in result.experiences})
        self.filtered += int(advantage.get("filtered_count", 0))
        self.produced += result.experiences
        self.kept += kept
        for key, value in advantage.items():
            self.advantage.setdefault(key, []).append(value)

    def metrics(self) -> Dict[str, float]:
        """The step's rollout metrics over all its reads, advantage metrics (counts summed), top-up counts."""
        rollout = step_metrics(self.produced, self.tasks, len(self.failures), int(self.retries), self.run_s)
        metrics = {f"rollout/{key}": value for key, value in rollout.items()}
        for key, values in self.advantage.items():
            total = key.endswith("_count")
            metrics[f"advantage/{key}"] = sum(values) if total else statistics.fmean(values)
        metrics["explore/extra_steps"] = float(self.reads - 1)
        metrics["explore/experiences_written"] = float(len(self.kept))
        return metrics

    def nothing_but_failures(self) -> bool:
        """Every task of at least two reads failed: the step yields nothing and more reads will not help."""
        return self.reads >= 2 and not self.produced and len(self.failures) == self.tasks

    def causes(self, filter_rule: str, repeat_times: int) -> str:
        """Why experiences went missing, worst first."""
        found = []
        if self.groups and self.filtered == self.groups:
            found.append(
                f"all {self.groups} groups filtered by {filter_rule} for {self.reads} steps: "
                "no group passes; lower the threshold or check the reward function"
            )
        elif self.filtered:
            found.append(
                f"{self.filtered} of {self.groups} groups filtered by {filter_rule}: too few "
                "groups pass; lower the threshold or raise explorer.max_extra_explore_steps"
            )
        if self.failures:
            found.append(f"{len(self.failures)} of {self.tasks} tasks failed (last error: {self.failures[-1].error})")
        expected = (self.tasks - len(self.failures)) * repeat_times
        if not found and len(self.produced) < expected:
            found.append(f"the workflows returned {len(self.produced)} experiences where {expected} were expected")
        return "; ".join(found) or "no experiences were dropped"


def every_task_failed(explorer: str, step: int, tally: StepTally) -> ExploreStarved:
    """A step whose every task failed (see nothing_but_failures): the workflow or reward function is broken."""
    last = tally.failures[-1]
    fix = "raise explorer.max_timeout or check the engines" if last.timed_out else "fix the workflow or reward function"
    return ExploreStarved(
        f"explorer {explorer!r}: all {tally.tasks} tasks of explore step {step} ({tally.reads} explore steps) failed "
        f"after {last.attempts} attempt(s) each (last error: {last.error}); {fix}"
    )


def still_short(explorer: str, step: int, missing: int, tally: StepTally, limit: int, why: str) -> ExploreStarved:
    """A step that stayed short of the trainer's batch after `limit` extra reads."""
    return ExploreStarved(
        f"explorer {explorer!r}: explore step {step} left the trainer's batch {missing} experience(s) short after "
        f"{tally.reads - 1} extra explore steps (explorer.max_extra_explore_steps={limit}): {why}"
    )
