"""What a rollout engine is asked for (SamplingParams) and what it returns per response (Sample).

Plain data, torch-free: these cross Ray boundaries between workflow runners and engine actors.
"""

import dataclasses
from dataclasses import dataclass
from typing import Any, List, Mapping

from trinity.config.explorer import InferenceModelConfig

FINISH_REASONS = ("stop", "length")


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. temperature 0 means greedy; top_k -1 and top_p 1 disable truncation."""

    n: int = 1  # responses per prompt
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int = 16  # most generated tokens per response (the stop token counts)
    min_tokens: int = 0  # stop tokens are suppressed until this many tokens were generated
    repetition_penalty: float = 1.0

    def __post_init__(self) -> None:
        rules = [
            (self.n >= 1, "n must be >= 1"),
            (self.temperature >= 0, "temperature must be >= 0"),
            (0 < self.top_p <= 1, "top_p must be in (0, 1]"),
            (self.top_k == -1 or self.top_k >= 1, "top_k must be -1 (off) or >= 1"),
            (self.max_tokens >= 1, "max_tokens must be >= 1"),
            (0 <= self.min_tokens, "min_tokens must be >= 0"),
            (self.repetition_penalty > 0, "repetition_penalty must be > 0"),
        ]
        broken = [rule for ok, rule in rules if not ok]
        if broken:
            raise ValueError(f"invalid sampling parameters {self}: {'; '.join(broken)}")

    @classmethod
    def from_engine(cls, model: InferenceModelConfig) -> "SamplingParams":
        """The engine's defaults (validation filled them from the model section)."""
        return cls(
            temperature=model.temperature,
            top_p=model.top_p,
            top_k=model.top_k,
            max_tokens=model.max_response_tokens,
            min_tokens=model.min_response_tokens,
            repetition_penalty=model.repetition_penalty,
        )

    def updated(self, args: Mapping[str, Any]) -> "SamplingParams":
        """These params with a taskset's rollout_args applied (None values keep the default).

        `logprobs` (extra top-k logprobs per token) is accepted only as 0: the sampled token's
        logprob is always returned, and no engine here returns alternatives yet.
        """
        args = {key: value for key, value in args.items() if value is not None}
        extra = args.pop("logprobs", 0)
        if extra:
            raise ValueError(f"rollout_args.logprobs={extra}: extra top-k logprobs are not supported")
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(args) - known)
        if unknown:
            raise ValueError(f"unknown rollout args {unknown}; known: {sorted(known)}")
        return dataclasses.replace(self, **args)


@dataclass
class Sample:
    """One response. `logprobs[i]` is log softmax(logits / T)[response_ids[i]] under the weights that
    sampled it, before repetition penalty, min-tokens masking and top-k/top-p truncation (T = 1 when
    greedy), which is what the trainer recomputes at the same temperature."""

    prompt_ids: List[int]  # the prompt as the model saw it (after any truncation)
    response_ids: List[int]  # generated tokens, including the stop token when finish_reason is "stop"
    logprobs: List[float]
    finish_reason: str  # "stop": a stop token was generated; "length": max_tokens or the context ran out
    text: str  # response decoded without special tokens
    model_version: int  # version of the weights that generated it
