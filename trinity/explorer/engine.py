"""The rollout-engine interface every backend implements, and what an engine is built from.

`RolloutEngine` is what a workflow talks to: `generate` (n samples per prompt), tokenizer access
(`encode`, `decode`, `chat_prompt`), `update_weights` and `model_version`. `LocalEngine` is the
base of in-process backends: it fits prompts into the context budget and turns `generate` into
`generate_rows` (one response per row, each with its own token limit and deadline), which is also
what the engine actor calls when it merges concurrent requests into one batch. The transformers
backend is `trinity.explorer.hf_engine.HFEngine`; `trinity.explorer.backends` picks one per engine type.
"""

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from trinity.config.explorer import InferenceModelConfig
from trinity.config.lora import LoRAConfig
from trinity.config.model import BuiltModelConfig
from trinity.explorer.sampling import Sample, SamplingParams

Prompt = List[int]


class TaskTimeout(TimeoutError):
    """A generate call (or the task that made it) ran past its deadline."""


@dataclass
class EngineSpec:
    """Everything an engine (local or in an actor) is built from; picklable, torch-free."""

    model: InferenceModelConfig  # validated: sampling defaults and lengths are filled in
    device: str = "cpu"  # "cpu" or "cuda"
    built: Optional[BuiltModelConfig] = None  # write this model's directory first if needed (tiny, GGUF)
    trust_remote_code: bool = False
    enable_prompt_truncation: bool = True
    threads: int = 1  # CPU engines: Ray CPUs and torch threads (cluster.cpu_threads_per_device)
    lora: Optional[LoRAConfig] = None  # the policy's adapter: the engine serves it, weight updates carry it alone

    @property
    def model_path(self) -> str:
        return self.model.model_path

    def weights_path(self) -> str:
        """The directory (or hub name) to load, after building or converting the model there if it must be."""
        from trinity.model.load import resolve_model_path

        return resolve_model_path(self.built) if self.built is not None else self.model_path


def engine_specs(config) -> List[EngineSpec]:
    """One spec per served model of a validated Config: the rollout model first, then auxiliaries."""
    device = "cuda" if str(config.cluster.device_type) == "cuda" else "cpu"
    explorer, model = config.explorer, config.model
    specs = []
    for index, served in enumerate([explorer.rollout_model, *explorer.auxiliary_models]):
        is_built = index == 0 and isinstance(model, BuiltModelConfig) and served.model_path == model.model_path
        specs.append(
            EngineSpec(
                model=served,
                device=device,
                built=model if is_built else None,
                trust_remote_code=model.trust_remote_code,
                enable_prompt_truncation=model.enable_prompt_truncation,
                threads=config.cluster.cpu_threads_per_device,
                lora=model.lora_configs[0] if index == 0 and served.enable_lora else None,
            )
        )
    return specs


class TextCodec:
    """A tokenizer made safe to share between threads (fast tokenizers reject concurrent use).

    Holds what workflows need besides generation: encoding, decoding, chat formatting and the
    stop tokens. Engines and remote proxies both carry one, so workflows run unchanged on either.
    """

    def __init__(self, tokenizer, stop_token_ids: Sequence[int], enable_thinking: bool = False):
        self.tokenizer = tokenizer
        self.stop_token_ids = list(stop_token_ids)
        self.pad_token_id = tokenizer.pad_token_id
        self._template_kwargs = {"enable_thinking": enable_thinking} if enable_thinking else {}
        self._lock = threading.Lock()

    def encode(self, text: str) -> List[int]:
        with self._lock:
            return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        with self._lock:
            return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def chat_prompt(
        self, messages: List[Dict[str, Any]], add_generation_prompt: bool = True, tools: Optional[List[dict]] = None
    ) -> str:
        """The prompt text of a chat; `tools` (OpenAI function schemas) go to the template when given."""
        from trinity.model.load import apply_chat_template

        kwargs = {**self._template_kwargs, **({"tools": tools} if tools else {})}
        with self._lock:
            return apply_chat_template(self.tokenizer, messages, add_generation_prompt, **kwargs)


class RolloutEngine(ABC):
    """What workflows generate with. `defaults` are the engine's sampling defaults (from config)."""

    def __init__(self, spec: EngineSpec, codec: TextCodec):
        self.spec = spec
        self.codec = codec
        self.defaults = SamplingParams.from_engine(spec.model)

    @abstractmethod
    def generate(
        self, prompts: Sequence[Prompt], params: Optional[SamplingParams] = None, timeout: Optional[float] = None
    ) -> List[List[Sample]]:
        """`params.n` samples for each prompt (token ids), in prompt order. Raises TaskTimeout when
        `timeout` seconds pass before all are done, ValueError for a prompt that does not fit."""

    @abstractmethod
    def update_weights(self, named_tensors: Dict[str, Any], version: int) -> None:
        """Copy new weights (full-name -> CPU tensor, read-only is fine) into the model; then
        `model_version == version`."""

    @property
    @abstractmethod
    def model_version(self) -> int: ...

    @property
    def max_model_len(self) -> int:
        return self.spec.model.max_model_len

    @property
    def max_prompt_tokens(self) -> int:
        return self.spec.model.max_prompt_tokens

    def encode(self, text: str) -> List[int]:
        return self.codec.encode(text)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return self.codec.decode(ids, skip_special_tokens)

    def chat_prompt(self, messages: List[Dict[str, str]], add_generation_prompt: bool = True) -> str:
        return self.codec.chat_prompt(messages, add_generation_prompt)


class LocalEngine(RolloutEngine):
    """An in-process backend: implements `generate_rows`; prompts are fitted here."""

    @abstractmethod
    def generate_rows(
        self,
        rows: Sequence[Prompt],
        params: SamplingParams,
        max_tokens: Sequence[int],
        deadlines: Sequence[Optional[float]],
    ) -> List[Union[Sample, TaskTimeout]]:
        """One response per row (params.n is ignored), row i limited to max_tokens[i] tokens and to
        time.monotonic() deadline deadlines[i]; a row that ran out of time yields a TaskTimeout.
        Rows must already be fitted (`fit_prompt`)."""

    def fit_prompt(self, prompt: Prompt, max_tokens: int) -> Tuple[Prompt, int]:
        """The prompt cut to max_prompt_tokens (keeping its end) when truncation is enabled, and the
        token limit that keeps prompt + response within max_model_len."""
        prompt = [int(token) for token in prompt]
        if not prompt:
            raise ValueError("empty prompt: the model needs at least one token to condition on")
        if len(prompt) > self.max_prompt_tokens:
            if not self.spec.enable_prompt_truncation:
                raise ValueError(
                    f"prompt has {len(prompt)} tokens, more than max_prompt_tokens={self.max_prompt_tokens} "
                    "(model.enable_prompt_truncation is false)"
                )
            prompt = prompt[-self.max_prompt_tokens :]
        limit = min(max_tokens, self.max_model_len - len(prompt))
        if limit < 1:
            raise ValueError(f"prompt of {len(prompt)} tokens leaves no room within max_model_len={self.max_model_len}")
        return prompt, limit

    def generate(
        self, prompts: Sequence[Prompt], params: Optional[SamplingParams] = None, timeout: Optional[float] = None
    ) -> List[List[Sample]]:
        params = params or self.defaults
        deadline = None if timeout is None else time.monotonic() + timeout
        rows, limits = [], []
        for prompt in prompts:
            fitted, limit = self.fit_prompt(prompt, params.max_tokens)
            rows += [fitted] * params.n
            limits += [limit] * params.n
        results = self.generate_rows(rows, params, limits, [deadline] * len(rows))
        for result in results:
            if isinstance(result, TaskTimeout):
                raise result
        return [results[i * params.n : (i + 1) * params.n] for i in range(len(prompts))]
