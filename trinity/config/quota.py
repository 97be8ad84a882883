"""What the explorer owes the trainer: the batch arithmetic both sides agree on.

An explore step reads `batch_size` tasks and, with nothing dropped, writes E = batch_size x repeat_times
experiences; a train step reads R rollout rows from the experience buffer (train_batch_size, less the
expert rows of the mix strategy). The step counters, the sync schedule (sync_offset, sync_interval),
the trainer's planned steps and the deadlock rule in validation all assume E per explore step. The
trainer plans to read all of them, R per step: ceil(explore steps x E / R) train steps, so a mix run
takes more train steps than explore steps.

Rollouts go missing legitimately (a task that fails after its retries, a group dropped by a std
filter), so the explorer counts what it wrote instead of assuming it: after explore step n the
trainer's stream must hold every train batch the drop-free schedule has filled by then,
`due(n) = floor(n * E / R) * R` rows. A step that leaves it short explores more tasks first (see
trinity.explorer.top_up). Counting whole train batches, not n * E, tops up only when a batch the
trainer is about to read would otherwise stay incomplete. Pure arithmetic on the config, shared by
validation, explorer and trainer.
"""

import math
from dataclasses import dataclass
from typing import Optional

from trinity.config.root import Config


def expert_rows(train_batch_size: int, expert_data_ratio: float) -> int:
    """Rows of each mix batch taken from the expert dataset, not from the explorer's experiences."""
    return math.ceil(expert_data_ratio * train_batch_size)


def rollout_rows_per_train_step(config: Config) -> int:
    """R: experience-buffer rows one train step reads."""
    size = config.buffer.train_batch_size
    algorithm = config.algorithm
    if algorithm.sample_strategy == "mix":
        return size - expert_rows(size, algorithm.sample_strategy_args.get("expert_data_ratio", 0.5))
    return size


def planned_train_steps(config: Config, explore_steps: int) -> int:
    """Train steps that read every experience of `explore_steps` full explore steps, R at a time (the last
    batch may be short). Counted in R, not train_batch_size: a trainer that planned with the whole batch
    while its expert rows come from elsewhere would stop with experiences unread, and an explorer writing
    to a full queue would wait for it forever."""
    quota = Quota.of(config)
    return max(1, math.ceil(explore_steps * quota.per_explore_step / quota.per_train_step))


@dataclass(frozen=True)
class Quota:
    """`due(n)`: rows the trainer's stream must hold after explore step n (see the module docstring)."""

    per_explore_step: int  # E
    per_train_step: int  # R

    @classmethod
    def of(cls, config: Config) -> "Quota":
        per_step = config.buffer.batch_size * config.algorithm.repeat_times
        return cls(per_step, max(1, rollout_rows_per_train_step(config)))

    def due(self, step: int) -> int:
        return step * self.per_explore_step // self.per_train_step * self.per_train_step

    def start(self, step: int, written: Optional[int]) -> int:
        """Rows in the stream when resuming at `step`: as recorded, else what a drop-free run wrote."""
        return step * self.per_explore_step if written is None else written
