"""The default rollout backend: transformers models with KV cache, batched across prompts (left padding),
on CPU or CUDA, through our own decode loop (`decode_loop`: finished rows leave the batch).

Sampling is driven by our own processor chain so the returned logprobs are exactly defined: each step
records log softmax(logits / T) of the raw model logits (T = 1 when greedy), then min-tokens masking,
repetition penalty, temperature, top-k and top-p shape the distribution, and the last processor draws
the token with the engine's own seeded generator, never the global torch RNG (two engines in one
process sample independently and reproducibly). The checkpoint's generation config is never read, so
its defaults (a Qwen top_k=20, say) never change the distribution behind the engine's back.

With LoRA, weight updates carry the adapter's weights alone. With `merge_lora` (the default) each version is
merged into the base weights of the modules it targets (`trinity.model.lora_merge`) and copied into the plain
model; unmerged, the model is wrapped with the adapter (PEFT) and the update copies the adapter's weights.
"""

import threading
import warnings
from typing import Any, Dict, List, Optional, Sequence, Union

import torch
from transformers import (
    LogitsProcessor,
    MinNewTokensLengthLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from trinity.explorer.decode_loop import decode
from trinity.explorer.engine import EngineSpec, LocalEngine, Prompt, TaskTimeout, TextCodec
from trinity.explorer.sampling import Sample, SamplingParams
from trinity.model.load import load_causal_lm, load_tokenizer, stop_token_ids
from trinity.model.lora import adapter_names, adapter_shapes, add_adapter, read_adapter_dir
from trinity.model.lora_merge import MergedLoRA


class HFEngine(LocalEngine):
    def __init__(self, spec: EngineSpec):
        path = spec.weights_path()
        tokenizer = load_tokenizer(path, spec.trust_remote_code, spec.model.chat_template)
        super().__init__(spec, TextCodec(tokenizer, stop_token_ids(path, tokenizer), spec.model.enable_thinking))
        self.model = load_causal_lm(path, spec.model.dtype.value, spec.device, spec.trust_remote_code)
        self._merged: Optional[MergedLoRA] = None
        self._adapter: Dict[str, tuple] = {}  # with a merged adapter: name -> shape of each adapter weight
        if spec.lora is not None and spec.model.merge_lora:
            self._adapter = adapter_shapes(path, spec.lora, spec.trust_remote_code)
            self._merged = MergedLoRA(path, spec.lora, self._adapter)
        elif spec.lora is not None:
            self.model = add_adapter(self.model, spec.lora, trainable=False)
        self.model.requires_grad_(False)
        if self._merged is not None and spec.lora.path:
            self._copy(self._merged.weights(read_adapter_dir(spec.lora.path), "float32"))
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
            decoded = decode(
                self.model,
                input_ids.to(self.device),
                attention_mask.to(self.device),
                max_tokens,
                deadlines,
                self.codec.stop_token_ids,
                self._shaping(params, width),
                params.temperature or 1.0,
            )
        return [
            self._row_result(list(row), tokens, logprobs, i in decoded.expired, version)
            for i, (row, tokens, logprobs) in enumerate(zip(rows, decoded.tokens, decoded.logprobs, strict=True))
        ]

    def _shaping(self, params: SamplingParams, width: int) -> List[LogitsProcessor]:
        """What turns the raw logits into the scores the next token is taken by (its logprob is recorded
        from the raw logits, before these)."""
        chain: List[LogitsProcessor] = []
        if params.min_tokens:
            chain.append(
                MinNewTokensLengthLogitsProcessor(width, params.min_tokens, self.codec.stop_token_ids, self.device)
            )
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

    def _row_result(self, prompt, tokens, logprobs, expired, version) -> Union[Sample, TaskTimeout]:
        """The row's sample; a row its deadline stopped before a stop token or its limit is a timeout."""
        if expired:
            return TaskTimeout(f"generation ran past its deadline after {len(tokens)} tokens")
        stopped = bool(tokens) and tokens[-1] in self.codec.stop_token_ids
        return Sample(
            prompt_ids=prompt,
            response_ids=tokens,
            logprobs=logprobs,
            finish_reason="stop" if stopped else "length",
            text=self.codec.decode(tokens),
            model_version=version,
        )

    # ---- weights ---------------------------------------------------------------------------------

    def update_weights(self, named_tensors: Dict[str, Any], version: int) -> None:
        """Copy every given tensor into the parameter of that name (cast to its dtype and device).

        All names must be parameters of the model and every parameter must be covered (tied
        parameters count once), so a mismatched state dict fails before anything is copied. With LoRA
        the names are the adapter's (the base never changes; merged, the adapter's target modules do).
        """
        params = dict(self.model.named_parameters(remove_duplicate=False))
        if self._merged is not None:
            params = {name: torch.empty(shape, device="meta") for name, shape in self._adapter.items()}
        elif self.spec.lora is not None:
            params = {name: params[name] for name in adapter_names(self.model, self.spec.lora)}
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
        if self._merged is not None:  # the modules it targets, merged: copied as a full update's tensors are
            tensors = self._merged.weights(tensors, "float32")
        with self._lock:
            self._copy(tensors)
            self._version = version

    def _copy(self, weights: Dict[str, torch.Tensor]) -> None:
        """Copy each tensor into the model's parameter (or stored buffer) of that name, cast to its dtype and device."""
        targets = {**dict(self.model.named_buffers()), **dict(self.model.named_parameters(remove_duplicate=False))}
        with torch.no_grad():
            for name, tensor in weights.items():
                targets[name].copy_(tensor)


class _Sampler(LogitsProcessor):
    """Draws each row's next token from softmax(scores) with the engine's generator and masks every
    other token, so the decode loop's best-scoring token is the drawn one."""

    def __init__(self, generator: torch.Generator):
        self.generator = generator

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        tokens = torch.multinomial(torch.softmax(scores.float(), dim=-1), 1, generator=self.generator)
        return torch.full_like(scores, float("-inf")).scatter_(1, tokens, 0.0)
