"""The HF engine serves the policy's LoRA adapter: a new adapter is the base model itself, an update carries the
adapter's weights only, and afterwards greedy outputs and logprobs are those of the merged model (base + adapter)."""

import dataclasses

import pytest
import torch

from tests.explorer.conftest import read_only
from trinity.config.explorer import Dtype
from trinity.config.lora import LoRAConfig
from trinity.explorer.backends import create_engine
from trinity.explorer.sampling import SamplingParams
from trinity.model.load import load_causal_lm
from trinity.model.lora import adapter_names, add_adapter, write_adapter_dir

LORA = LoRAConfig(name="default", lora_rank=4, lora_alpha=8, is_dummy=True)
PROMPTS = ["12+34=", "7+8=", "40+2=", "3+3="]
GREEDY = SamplingParams(temperature=0, max_tokens=12)


def trained_adapter(spec, seed: int):
    """Adapter weights that change the model (lora_B drawn, as training would make it), and the merged model."""
    wrapped = add_adapter(load_causal_lm(spec.weights_path()), LORA, trainable=True)
    generator = torch.Generator().manual_seed(seed)
    names = adapter_names(wrapped, LORA)
    with torch.no_grad():
        for name, param in wrapped.named_parameters():
            if name in names and ".lora_B." in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.3)
    adapter = {name: param.detach().clone() for name, param in wrapped.named_parameters() if name in names}
    return adapter, wrapped.merge_and_unload()


def greedy_with(model, prompt, steps: int):
    """Greedy tokens and their logprobs from plain forward passes of `model` (the reference decode)."""
    tokens, logprobs = [], []
    with torch.no_grad():
        for _ in range(steps):
            logits = model(torch.tensor([prompt + tokens])).logits[0, -1].float()
            token = int(logits.argmax())
            logprobs.append(float(torch.log_softmax(logits, dim=-1)[token]))
            tokens.append(token)
    return tokens, logprobs


@pytest.fixture(scope="module", params=[True, False], ids=["merged", "unmerged"])
def lora_spec(spec, request):
    """The tiny model's spec in float32 with a new adapter, merged into the base weights or served by PEFT."""
    model = dataclasses.replace(spec.model, dtype=Dtype.float32, merge_lora=request.param)
    return dataclasses.replace(spec, model=model, lora=LORA)


def test_updates_carry_the_adapter_and_outputs_are_the_merged_model_s(lora_spec):
    engine = create_engine(lora_spec)
    base = create_engine(dataclasses.replace(lora_spec, lora=None))
    prompts = [engine.encode(text) for text in PROMPTS]
    assert [s[0].response_ids for s in engine.generate(prompts, GREEDY)] == [
        s[0].response_ids for s in base.generate(prompts, GREEDY)
    ], "a new adapter (lora_B zero) is the base model"

    for version, seed in ((1, 0), (2, 1)):
        adapter, merged = trained_adapter(lora_spec, seed)
        engine.update_weights(read_only(adapter), version=version)
        assert engine.model_version == version
        changed = 0
        for prompt, (sample,) in zip(prompts, engine.generate(prompts, GREEDY), strict=True):
            tokens, logprobs = greedy_with(merged, prompt, len(sample.response_ids))
            assert sample.response_ids == tokens and sample.model_version == version
            # float32 on both sides; the engine's batched, cached decode differs from plain forwards by rounding
            assert torch.allclose(torch.tensor(sample.logprobs), torch.tensor(logprobs), atol=1e-4)
            changed += tokens != base.generate([prompt], GREEDY)[0][0].response_ids
        assert changed, "the adapter changed the outputs"


def test_an_update_must_cover_the_adapter_exactly(lora_spec):
    engine = create_engine(lora_spec)
    adapter, _ = trained_adapter(lora_spec, 0)
    one = next(iter(adapter))
    with pytest.raises(KeyError, match="no new value"):
        engine.update_weights({k: v for k, v in adapter.items() if k != one}, version=1)
    with pytest.raises(KeyError, match="not parameters"):
        engine.update_weights({**adapter, "base_model.model.lm_head.weight": torch.zeros(1)}, version=1)
    assert engine.model_version == 0


def test_an_adapter_directory_is_served_from_version_0(lora_spec, tmp_path):
    adapter, merged = trained_adapter(lora_spec, 2)
    write_adapter_dir(tmp_path, adapter, LORA)
    engine = create_engine(dataclasses.replace(lora_spec, lora=dataclasses.replace(LORA, path=str(tmp_path))))
    prompt = engine.encode(PROMPTS[0])
    (sample,) = engine.generate([prompt], GREEDY)[0]
    tokens, logprobs = greedy_with(merged, prompt, len(sample.response_ids))
    assert sample.response_ids == tokens and sample.model_version == 0
    assert torch.allclose(torch.tensor(sample.logprobs), torch.tensor(logprobs), atol=1e-4)
