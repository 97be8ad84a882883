"""How the trainer draws each train batch from its buffers (`algorithm.sample_strategy`).

`sample(step)` returns (experiences, metrics) and raises `BufferExhausted` when the data has ended;
`state_dict()` / `load_state_dict()` carry the buffer cursors through the StateManager, so a resumed
trainer reads exactly where it stopped. The state also records `explore_step`, the newest explore step
the trainer has consumed, and `taskset_index`, the explorer's taskset cursor after it: after a crash, an
explorer whose experiences lived only in a queue restarts from there, so no task is trained twice or skipped.
"""

from typing import Dict, List, Optional, Tuple

import torch

from trinity.buffer.experience import Experience
from trinity.buffer.factory import make_dataset_reader, make_reader, trainer_reader
from trinity.config.algorithm import DataSchema
from trinity.config.functions import SAMPLE_STRATEGY
from trinity.config.quota import expert_rows
from trinity.config.root import Config


def newest_explore_step(experiences: List[Experience], current: int) -> int:
    """The newest explore step (batch id) among `experiences`; dataset rows carry none."""
    steps = [int(e.batch_id) for e in experiences if str(e.batch_id).isdigit()]
    return max([current, *steps])


def newest_taskset_index(experiences: List[Experience], current: Optional[int]) -> Optional[int]:
    """The explorer's taskset cursor after the newest explore step among `experiences` (None if untold).

    A step may read more than `batch_size` tasks (top-ups for dropped rollouts), so the cursor is not
    step x batch_size: each experience carries it (`info["taskset_index"]`) for a queue resume."""
    indexes = [int(e.info["taskset_index"]) for e in experiences if "taskset_index" in e.info]
    known = [index for index in (current, *indexes) if index is not None]
    return max(known) if known else None


def version_metrics(experiences: List[Experience], step: int) -> Dict[str, float]:
    """Model versions of the batch and their lag behind the trainer (how off-policy it is)."""
    versions = torch.tensor([e.model_version for e in experiences], dtype=torch.float32)
    return {
        "sample/model_version_min": float(versions.min()),
        "sample/model_version_max": float(versions.max()),
        "sample/model_version_mean": float(versions.mean()),
        "sample/version_lag_max": float(step - versions.min()),
        "sample/version_lag_mean": float(step - versions.mean()),
    }


@SAMPLE_STRATEGY.implements("default")
class DefaultStrategy:
    """train_batch_size experiences from the experience buffer (or the sft/dpo dataset)."""

    def __init__(self, config: Config, tokenizer, **args):
        self.reader = trainer_reader(config, tokenizer)
        self.batch_size = config.buffer.train_batch_size
        self.explore_step = 0
        self.taskset_index: Optional[int] = None

    def min_model_version(self, step: int) -> int:
        return 0

    async def sample(self, step: int) -> Tuple[List[Experience], Dict[str, float]]:
        experiences = await self.reader.read_async(self.batch_size, min_model_version=self.min_model_version(step))
        self.explore_step = newest_explore_step(experiences, self.explore_step)
        self.taskset_index = newest_taskset_index(experiences, self.taskset_index)
        return experiences, {**version_metrics(experiences, step), "sample/explore_step": float(self.explore_step)}

    def state_dict(self) -> dict:
        return {**self.reader.state_dict(), "explore_step": self.explore_step, "taskset_index": self.taskset_index}

    def load_state_dict(self, state: dict) -> None:
        state = dict(state)
        self.explore_step = state.pop("explore_step", 0)
        self.taskset_index = state.pop("taskset_index", None)
        self.reader.load_state_dict(state)


SAMPLE_STRATEGY.implements("warmup")(DefaultStrategy)


@SAMPLE_STRATEGY.implements("staleness_control")
class StalenessControlStrategy(DefaultStrategy):
    """default, skipping experiences more than max_staleness model versions behind the trainer."""

    def __init__(self, config: Config, tokenizer, max_staleness=None):
        super().__init__(config, tokenizer)
        self.max_staleness = max_staleness

    def min_model_version(self, step: int) -> int:
        return 0 if self.max_staleness is None else max(step - self.max_staleness, 0)


@SAMPLE_STRATEGY.implements("mix")
class MixStrategy:
    """ceil(expert_data_ratio * bs) expert SFT rows plus the rest from the experience buffer."""

    def __init__(self, config: Config, tokenizer, expert_data_ratio: float, sft_dataset_name: str):
        size = config.buffer.train_batch_size
        self.expert_size = expert_rows(size, expert_data_ratio)
        self.usual_size = size - self.expert_size
        experience_buffer = config.buffer.trainer_input.experience_buffer
        self.usual = make_reader(experience_buffer, self.usual_size, config.ray_namespace)
        self.explore_step = 0
        self.taskset_index: Optional[int] = None
        self.expert = make_dataset_reader(
            config.buffer.trainer_input.auxiliary_buffers[sft_dataset_name],
            DataSchema.sft,
            tokenizer,
            self.expert_size,
            total_epochs=10**9,  # expert data is recycled for as long as exploration goes on
            max_prompt_tokens=config.model.max_prompt_tokens,
            max_model_len=config.model.max_model_len,
        )

    async def sample(self, step: int) -> Tuple[List[Experience], Dict[str, float]]:
        usual = await self.usual.read_async(self.usual_size) if self.usual_size else []
        expert = await self.expert.read_async(self.expert_size) if self.expert_size else []
        self.explore_step = newest_explore_step(usual, self.explore_step)
        self.taskset_index = newest_taskset_index(usual, self.taskset_index)
        for exp in expert:
            exp.info["is_expert"] = True
            exp.reward = 0.0
            exp.logprobs = torch.zeros(exp.response_length)
            exp.advantages = torch.zeros(exp.response_length)
        metrics = version_metrics(usual, step) if usual else {}
        metrics["sample/expert_rows"] = float(len(expert))
        return usual + expert, metrics

    def state_dict(self) -> dict:
        return {
            "usual_buffer": self.usual.state_dict(),
            "expert_buffer": self.expert.state_dict(),
            "explore_step": self.explore_step,
            "taskset_index": self.taskset_index,
        }

    def load_state_dict(self, state: dict) -> None:
        self.explore_step = state.get("explore_step", 0)
        self.taskset_index = state.get("taskset_index")
        self.usual.load_state_dict(state.get("usual_buffer", {}))
        self.expert.load_state_dict(state.get("expert_buffer", {}))
