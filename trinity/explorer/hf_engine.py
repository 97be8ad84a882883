"""The default rollout backend: transformers `generate` with KV cache, batched across prompts
(left padding), on CPU or CUDA.

Sampling is driven by our own logits-processor chain so the returned logprobs are exactly defined:
the first processor records log softmax(logits / T) of the raw model logits (T = 1 when greedy),
then min-tokens masking, repetition penalty, temperature, top-k and top-p shape the distribution,
and the last one draws the token with the engine's own seeded generator and leaves only it
selectable, so `generate` runs in greedy mode and never touches the global torch RNG (two engines
in one process sample independently and reproducibly). The model's shipped generation config is
replaced by a neutral one, so checkpoint defaults (a Qwen top_k=20, say) never change the
distribution behind the engine's back.
"""

import threading
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence, Union

import torch
from transformers import (
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
    MinNewTokensLengthLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
    StoppingCriteria,
    StoppingCriteriaList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from trinity.explorer.engine import EngineSpec, LocalEngine, Prompt, TaskTimeout, TextCodec
from trinity.explorer.sampling import Sample, SamplingParams
from trinity.model.load import load_causal_lm, load_tokenizer, resolve_model_path, stop_token_ids


class HFEngine(LocalEngine):
    def __init__(self, spec: EngineSpec):
        path = resolve_model_path(spec.tiny) if spec.tiny is not None else spec.model_path
        tokenizer = load_tokenizer(path, spec.trust_remote_code, spec.model.chat_template)
        super().__init__(spec, TextCodec(tokenizer, stop_token_ids(path, tokenizer), spec.model.enable_thinking))
        self.model = load_causal_lm(path, spec.model.dtype.value, spec.device, spec.trust_remote_code)
        self.model.requires_grad_(False)
        self.model.generation_config = GenerationConfig(
            eos_token_id=self.codec.stop_token_ids, pad_token_id=self.codec.pad_token_id
        )
        self.device = torch.device(spec.device)
        self._version = 0
        self._lock = threading.Lock()  # one generate or weight update at a time
        self._generator = torch.Generator(device=self.device).manual_seed(spec.model.seed)

    @property
    def model_version(self) -> int:
        return self._version

    # ---- generation ------------------------------------------------------------------------------

    def generate_rows(
        self,
        rows: Sequence[Prompt],
        params: SamplingParams,
        max_tokens: Sequence[int],
        deadlines: Sequence[Optional[float]],
    ) -> List[Union[Sample, TaskTimeout]]:
        if not rows:
            return []
        with self._lock, torch.inference_mode():
            version = self._version
            width = max(len(row) for row in rows)
            input_ids = torch.full((len(rows), width), self.codec.pad_token_id, dtype=torch.long)
            attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
            for index, row in enumerate(rows):
                input_ids[index, width - len(row) :] = torch.tensor(row)
                attention_mask[index, width - len(row) :] = 1
            recorder = _LogprobRecorder(params.temperature or 1.0)
            limits = _RowLimits(width, max_tokens, deadlines, self.device)
            sequences = self.model.generate(
                input_ids=input_ids.to(self.device),
                attention_mask=attention_mask.to(self.device),
                generation_config=self._generation_config(max(max_tokens)),
                logits_processor=LogitsProcessorList([recorder, *self._shaping(params, width)]),
                stopping_criteria=StoppingCriteriaList([limits]),
            )
            logprobs = recorder.finish(sequences).cpu()
            generated = sequences[:, width:].cpu()
        return [
            self._row_result(list(rows[i]), generated[i], logprobs[i], max_tokens[i], limits.expired.get(i), version)
            for i in range(len(rows))
        ]

    def _generation_config(self, max_new_tokens: int) -> GenerationConfig:
        """Greedy over the processed scores: when sampling, `_Sampler` has already chosen the token."""
        return GenerationConfig(
            max_new_tokens=max_new_tokens,
            do_sample=False,
            num_beams=1,
            use_cache=True,
            eos_token_id=self.codec.stop_token_ids,
            pad_token_id=self.codec.pad_token_id,
        )

    def _shaping(self, params: SamplingParams, width: int) -> List[LogitsProcessor]:
        """What turns the recorded distribution into the sampled one (after the recorder)."""
        chain: List[LogitsProcessor] = []
        if params.min_tokens:
            chain.append(MinNewTokensLengthLogitsProcessor(width, params.min_tokens, self.codec.stop_token_ids))
        if params.repetition_penalty != 1.0:
            chain.append(RepetitionPenaltyLogitsProcessor(params.repetition_penalty))
        if params.temperature:
            if params.temperature != 1.0:
                chain.append(TemperatureLogitsWarper(params.temperature))
            if params.top_k > 0:
                chain.append(TopKLogitsWarper(params.top_k))
            if params.top_p < 1.0:
                chain.append(TopPLogitsWarper(params.top_p))
            chain.append(_Sampler(self._generator))
        return chain

    def _row_result(self, prompt, generated, logprobs, limit, expired_at, version) -> Union[Sample, TaskTimeout]:
        """The row's sample: its tokens up to the first stop token or its limit. A row its deadline
        stopped first (after `expired_at` tokens, none a stop token) is a timeout: what follows is padding."""
        tokens = generated[:limit].tolist()
        stops = set(self.codec.stop_token_ids)
        end = next((i + 1 for i, token in enumerate(tokens) if token in stops), None)
        if expired_at is not None and (end is None or end > expired_at):
            return TaskTimeout(f"generation ran past its deadline after {expired_at} of {limit} tokens")
        response = tokens[:end] if end is not None else tokens
        return Sample(
            prompt_ids=prompt,
            response_ids=response,
            logprobs=logprobs[: len(response)].tolist(),
            finish_reason="stop" if end is not None else "length",
            text=self.codec.decode(response),
            model_version=version,
        )

    # ---- weights ---------------------------------------------------------------------------------

    def update_weights(self, named_tensors: Dict[str, Any], version: int) -> None:
        """Copy every given tensor into the parameter of that name (cast to its dtype and device).

        All names must be parameters of the model and every parameter must be covered (tied
        parameters count once), so a mismatched state dict fails before anything is copied.
        """
        params = dict(self.model.named_parameters(remove_duplicate=False))
        unknown = sorted(set(named_tensors) - set(params))
        if unknown:
            raise KeyError(f"{len(unknown)} names are not parameters of the model, e.g. {unknown[:3]}")
        covered = {id(params[name]) for name in named_tensors}
        missing = sorted(name for name, param in params.items() if id(param) not in covered)
        if missing:
            raise KeyError(f"{len(missing)} parameters have no new value, e.g. {missing[:3]}")
        with warnings.catch_warnings():  # zero-copy transports hand over read-only buffers; we only read them
            warnings.filterwarnings("ignore", message=".*not writable.*")
            tensors = {name: torch.as_tensor(value) for name, value in named_tensors.items()}
        wrong = [(n, tuple(t.shape), tuple(params[n].shape)) for n, t in tensors.items() if t.shape != params[n].shape]
        if wrong:
            raise ValueError(f"shape mismatch (name, given, expected): {wrong[:3]}")
        with self._lock, torch.no_grad():
            for name, tensor in tensors.items():
                params[name].copy_(tensor)
            self._version = version


class _LogprobRecorder(LogitsProcessor):
    """Records log softmax(raw logits / T) of each generated token.

    At step t the processor sees the token sampled at step t-1 as the last input id, so it keeps
    only the previous step's distribution; `finish` reads the final token's after generation.
    """

    def __init__(self, temperature: float):
        self.temperature = temperature
        self.steps: List[torch.Tensor] = []
        self._previous: Optional[torch.Tensor] = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self._previous is not None:
            self.steps.append(self._previous.gather(1, input_ids[:, -1:]).squeeze(1))
        self._previous = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def finish(self, sequences: torch.LongTensor) -> torch.Tensor:
        if self._previous is not None:
            self.steps.append(self._previous.gather(1, sequences[:, -1:]).squeeze(1))
        if not self.steps:
            return torch.zeros((sequences.shape[0], 0))
        return torch.stack(self.steps, dim=1)


class _Sampler(LogitsProcessor):
    """Draws each row's next token from softmax(scores) with the engine's generator and masks every
    other token, so the greedy step of `generate` takes the drawn one."""

    def __init__(self, generator: torch.Generator):
        self.generator = generator

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        tokens = torch.multinomial(torch.softmax(scores.float(), dim=-1), 1, generator=self.generator)
        return torch.full_like(scores, float("-inf")).scatter_(1, tokens, 0.0)


class _RowLimits(StoppingCriteria):
    """Per-row stop: the row's own token limit, or its deadline passing (`expired`: row -> tokens
    generated when its deadline stopped it short of its limit)."""

    def __init__(self, width: int, max_tokens: Sequence[int], deadlines: Sequence[Optional[float]], device):
        self.width = width
        self.max_tokens = list(max_tokens)
        self.limits = torch.tensor(self.max_tokens, device=device)
        self.deadlines = list(deadlines)
        self.expired: Dict[int, int] = {}

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs) -> torch.BoolTensor:
        generated = input_ids.shape[1] - self.width
        done = self.limits <= generated
        timed = [row for row, deadline in enumerate(self.deadlines) if deadline is not None]
        if timed:
            now = time.monotonic()
            for row in timed:
                if row not in self.expired and generated < self.max_tokens[row] and now >= self.deadlines[row]:
                    self.expired[row] = generated
            if self.expired:
                done[list(self.expired)] = True
        return done
