"""The workflow contract: one task + an engine -> scored experiences.

A workflow is a class constructed with `(task, engine, reward_fn)` whose `run()` returns a list of
`Experience`. It talks to the engine only through the `RolloutEngine` interface, so it runs the same
on a local engine and on an engine actor's proxy. A user plug-in subclasses `Workflow` and is
selected by its dotted path (`buffer.explorer_input.default_workflow_type=my_pkg.MyWorkflow`).
`self.auxiliary_engines` holds one engine per served auxiliary model (`explorer.auxiliary_models`,
e.g. a judge), in config order; they keep their own weights.
"""

import math
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from trinity.buffer.experience import Experience
from trinity.explorer.engine import RolloutEngine
from trinity.explorer.sampling import Sample, SamplingParams
from trinity.explorer.task import RolloutTask

RewardFn = Callable[..., Any]
REWARD_SECONDS = "reward_seconds"  # per-experience metric: time in the reward function (see step_metrics)


class Workflow:
    def __init__(self, task: RolloutTask, engine: RolloutEngine, reward_fn: RewardFn):
        self.task = task
        self.engine = engine
        self.reward_fn = reward_fn
        self.auxiliary_engines: List[RolloutEngine] = []  # set by the runner

    def run(self) -> List[Experience]:
        raise NotImplementedError(f"{type(self).__name__} must implement run()")

    # ---- helpers for subclasses ------------------------------------------------------------------

    def sampling_params(self) -> SamplingParams:
        """The engine defaults with the task's rollout args; n is the task's repeat_times."""
        return self.engine.defaults.updated({**self.task.rollout_args, "n": self.task.repeat_times})

    def prompt_ids(self) -> List[int]:
        """Plaintext questions are used as they are; chats go through the chat template."""
        if self.task.is_chat:
            return self.engine.encode(self.engine.chat_prompt(self.task.messages()))
        return self.engine.encode(self.task.question)

    def score(self, response_text: str) -> Tuple[float, Dict[str, float]]:
        """(reward, metrics) from the reward function, timed; a malformed result is an error, not a zero."""
        started = time.perf_counter()
        result = self.reward_fn(response_text, self.task.answer, **self.task.reward_fn_args)
        seconds = time.perf_counter() - started
        if isinstance(result, dict):
            if "reward" not in result:
                raise ValueError(f"reward function returned {sorted(result)} without a 'reward' key")
            values = {key: float(value) for key, value in result.items()}
        elif isinstance(result, (int, float)) and not isinstance(result, bool):
            values = {"reward": float(result)}
        else:
            raise TypeError(f"reward function returned {type(result).__name__}; expected a float or a dict")
        bad = [key for key, value in values.items() if not math.isfinite(value)]
        if bad:
            raise ValueError(f"reward function returned non-finite {bad}")
        reward = values.pop("reward")
        values[REWARD_SECONDS] = seconds
        return reward, values

    def experience(
        self,
        tokens: Sequence[int],
        prompt_length: int,
        logprobs: Sequence[float],
        reward: float,
        run_id: int,
        model_version: int,
        metrics: Dict[str, float],
        action_mask: Optional[Sequence[bool]] = None,
        info: Optional[Dict[str, Any]] = None,
        prompt_text: Optional[str] = None,
        response_text: Optional[str] = None,
    ) -> Experience:
        """The texts are decoded from the tokens unless given (a caller that has them saves the decoding)."""
        response_length = len(tokens) - prompt_length
        mask = [True] * response_length if action_mask is None else list(action_mask)
        return Experience(
            tokens=list(tokens),
            prompt_length=prompt_length,
            logprobs=list(logprobs),
            action_mask=mask,
            reward=reward,
            model_version=model_version,
            batch_id=self.task.batch_id,
            task_id=self.task.task_id,
            run_id=run_id,
            info=dict(info or {}),
            metrics={**metrics, "response_length": float(sum(mask))},
            prompt_text=(
                self.engine.decode(tokens[:prompt_length], skip_special_tokens=False)
                if prompt_text is None
                else prompt_text
            ),
            response_text=self.engine.decode(tokens[prompt_length:]) if response_text is None else response_text,
        )

    def sample_experiences(self, samples: Sequence[Sample]) -> List[Experience]:
        """One single-turn experience per sample of one prompt (run ids in order); the prompt is decoded once."""
        if not samples:
            return []
        prompt_text = self.engine.decode(samples[0].prompt_ids, skip_special_tokens=False)
        return [self.sample_experience(sample, run_id, prompt_text) for run_id, sample in enumerate(samples)]

    def sample_experience(self, sample: Sample, run_id: int, prompt_text: Optional[str] = None) -> Experience:
        """A single-turn experience: the sample scored by the reward function. Its response text is the
        sample's (the engine decoded it already); its prompt text is `prompt_text` when given."""
        reward, metrics = self.score(sample.text)
        return self.experience(
            tokens=sample.prompt_ids + sample.response_ids,
            prompt_length=len(sample.prompt_ids),
            logprobs=sample.logprobs,
            reward=reward,
            run_id=run_id,
            model_version=sample.model_version,
            metrics=metrics,
            info={"finish_reason": sample.finish_reason},
            prompt_text=prompt_text,
            response_text=sample.text,
        )
