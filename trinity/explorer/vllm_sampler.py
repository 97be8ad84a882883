"""The one change the vLLM backend makes inside vLLM: its sampler reports the project's logprobs.

`Sample.logprobs[i]` is log softmax(logits / T)[token] of the raw model logits at the sampling
temperature T (T = 1 when greedy), before repetition penalty, min-tokens masking and top-k/top-p.
vLLM's `logprobs_mode` offers neither exactly: `raw_logprobs` is log softmax(logits) (T = 1 always),
`processed_logprobs` is taken after penalties, min-tokens masking, temperature *and* top-k/top-p.
So the engine runs with `raw_logprobs` and this module swaps the class of each worker's sampler for
a subclass whose raw logprobs divide the logits by the row's temperature first (a greedy row, T < vLLM's
1e-5, keeps T = 1). Sampling itself is untouched. It relies on vLLM's `Sampler.forward` computing
raw logprobs through `self.compute_logprobs(logits)` from the unprocessed logits; the version the
extra pins is the one tests/explorer/test_vllm_engine.py proves it on (against a plain forward pass).

Imports vLLM: import it only after the engine set vLLM's environment (trinity.explorer.vllm_engine).
"""

from typing import Any, Optional

import torch
from vllm.v1.sample.sampler import Sampler

GREEDY_BELOW = 1e-5  # vLLM treats temperatures below this as greedy (vllm.v1.sample.sampler._SAMPLING_EPS)


class TemperedRawLogprobsSampler(Sampler):
    """vLLM's sampler, with raw logprobs taken at each row's sampling temperature."""

    _temperature: Optional[torch.Tensor] = None  # per row, set only while `forward` runs

    def forward(self, logits: torch.Tensor, sampling_metadata: Any, *args: Any, **kwargs: Any):
        self._temperature = None if sampling_metadata.all_greedy else sampling_metadata.temperature
        try:
            return super().forward(logits, sampling_metadata, *args, **kwargs)
        finally:
            self._temperature = None

    def compute_logprobs(self, logits: torch.Tensor) -> torch.Tensor:
        logits = logits.to(torch.float32)
        if self._temperature is not None:
            temperature = self._temperature.to(torch.float32)
            temperature = torch.where(temperature < GREEDY_BELOW, torch.ones_like(temperature), temperature)
            logits = logits / temperature.unsqueeze(1)
        return logits.log_softmax(dim=-1)


def install(worker: Any) -> str:
    """Run on every vLLM worker (`LLM.collective_rpc(install)`): swap its sampler's class in place."""
    sampler = worker.model_runner.sampler
    if isinstance(sampler, TemperedRawLogprobsSampler):
        return type(sampler).__name__
    if type(sampler) is not Sampler:
        raise RuntimeError(f"unexpected vLLM sampler {type(sampler).__qualname__}: logprobs would not be tempered")
    if sampler.logprobs_mode != "raw_logprobs":
        raise RuntimeError(f"the engine must run with logprobs_mode=raw_logprobs, not {sampler.logprobs_mode}")
    sampler.__class__ = TemperedRawLogprobsSampler
    return type(sampler).__name__
