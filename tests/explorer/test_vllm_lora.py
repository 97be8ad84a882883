"""The vLLM engine serves the policy's LoRA adapter as the HF engine does: a new adapter is the base model, and each
weight update (the adapter's weights alone, PEFT-wrapped names) is what the engine then answers with, merged into the
base weights (the default) or through vLLM's LoRA layers.

Tolerance, measured on this CPU in float32: vLLM's logprobs with an adapter differ from a plain forward pass of the
PEFT-wrapped HF model by at most ~1e-6 (a few float32 ulps: vLLM's CPU kernels and torch sum the base and low-rank
products in other orders); LOGPROB_ATOL allows 10x that. Greedy tokens must be the HF model's, token for token: the
seeded adapters below leave no step of these prompts near a tie, so an exact match is a stable requirement.
"""

import dataclasses
import os

import pytest
import torch

from tests.conftest import needs_vllm, validated
from tests.explorer.conftest import forward_logprobs, read_only
from trinity.explorer.backends import create_engine
from trinity.explorer.engine import engine_specs
from trinity.explorer.hf_engine import HFEngine
from trinity.explorer.sampling import SamplingParams
from trinity.model.lora import adapter_names, write_adapter_dir

LOGPROB_ATOL = 1e-5
PROMPTS = ["12+7=", "3-1=", "7*8=", "100-42=", "5+5=", "hello world"]
GREEDY = SamplingParams(temperature=0, max_tokens=16)


@pytest.fixture(scope="module", params=[True, False], ids=["merged", "unmerged"])
def spec(tmp_path_factory, request):
    """The rollout engine's spec: the tiny model in float32 with a new rank-8 adapter, engine_type=vllm, the adapter
    merged or not."""
    root = tmp_path_factory.mktemp("lora")
    config = validated(
        f"checkpoint_root_dir={root}",
        f"model.tiny.cache_dir={root / 'models'}",
        "model.lora_configs=[{lora_rank: 8}]",
        "explorer.rollout_model.engine_type=vllm",
        "explorer.rollout_model.dtype=float32",
        f"explorer.rollout_model.merge_lora={request.param}",
    ).configs[0]
    return engine_specs(config)[0]


@pytest.fixture(scope="module")
def engine(spec):
    """One vLLM engine for the module (each test moves its version on)."""
    return create_engine(spec)


@pytest.fixture(scope="module")
def hf(spec):
    """The HF engine of the same spec, unmerged: the PEFT-wrapped model, the reference."""
    return HFEngine(dataclasses.replace(spec, model=dataclasses.replace(spec.model, merge_lora=False)))


def random_adapter(hf, seed: int) -> dict:
    """Adapter weights (wrapped names) of the HF engine's adapter with every lora_B drawn at random (std 0.1, enough
    to change greedy outputs of the tiny model) and lora_A perturbed, so two seeds give two different models."""
    generator = torch.Generator().manual_seed(seed)
    weights = {}
    for name, param in hf.model.named_parameters():
        if name in adapter_names(hf.model, hf.spec.lora):
            noise = torch.randn(param.shape, generator=generator)
            weights[name] = noise * 0.1 if ".lora_B." in name else param.detach() + noise * 0.02
    return weights


def greedy(engine, prompts):
    return [group[0] for group in engine.generate(prompts, GREEDY)]


def assert_serves(engine, hf, prompts, version: int) -> list:
    """The vLLM engine's greedy samples are the HF engine's tokens, with logprobs of a plain HF forward pass."""
    ours, theirs = greedy(engine, prompts), greedy(hf, prompts)
    assert [s.response_ids for s in ours] == [s.response_ids for s in theirs]
    assert {s.model_version for s in ours} == {version}
    worst = 0.0
    for sample in ours:
        expected = forward_logprobs(hf.model, sample.prompt_ids, sample.response_ids)
        worst = max(worst, float((torch.tensor(sample.logprobs) - expected).abs().max()))
    assert worst < LOGPROB_ATOL, worst
    return ours


@needs_vllm
def test_engine_arguments_serve_one_adapter_unmerged(engine, spec):
    config = engine.llm.llm_engine.vllm_config.lora_config
    if spec.model.merge_lora:
        assert config is None, "a merged adapter needs no LoRA layers"
        return
    assert (config.max_loras, config.max_lora_rank, config.lora_dtype) == (1, 8, torch.float32)
    assert spec.lora.is_dummy and engine._lora_request is None  # a new adapter: version 0 is the base


@needs_vllm
def test_adapter_updates_are_served_in_place_and_match_the_hf_model(engine, hf):
    prompts = [engine.encode(text) for text in PROMPTS]
    base = assert_serves(engine, hf, prompts, version=0)  # lora_B = 0: both are the base model

    first = random_adapter(hf, seed=1)
    engine.update_weights(read_only(first), version=1)
    hf.update_weights(first, version=1)
    assert engine.model_version == 1
    one = assert_serves(engine, hf, prompts, version=1)
    assert [s.response_ids for s in one] != [s.response_ids for s in base]
    served = engine._lora_request
    if served is not None:  # unmerged: the version's adapter directory, loaded in the one LoRA slot
        assert not served.load_inplace and os.listdir(engine._scratch.name) == [os.path.basename(served.lora_path)]

    second = random_adapter(hf, seed=2)
    engine.update_weights(second, version=2)
    hf.update_weights(second, version=2)
    two = assert_serves(engine, hf, prompts, version=2)
    assert [s.response_ids for s in two] != [s.response_ids for s in one]
    if served is not None:
        assert engine._lora_request.lora_int_id == served.lora_int_id  # the same slot, reloaded
        assert os.listdir(engine._scratch.name) == [os.path.basename(engine._lora_request.lora_path)]  # v1's removed


@needs_vllm
def test_update_weights_rejects_anything_but_exactly_the_adapter(engine, hf):
    weights = random_adapter(hf, seed=3)
    version, name = engine.model_version, next(iter(sorted(weights)))
    with pytest.raises(KeyError, match="not parameters"):
        engine.update_weights({**weights, "lm_head.weight": torch.zeros(1)}, version=99)
    with pytest.raises(KeyError, match="no new value"):
        engine.update_weights({k: v for k, v in weights.items() if k != name}, version=99)
    with pytest.raises(ValueError, match="shape"):
        engine.update_weights({**weights, name: torch.zeros(3, 3)}, version=99)
    assert engine.model_version == version


@pytest.fixture(scope="module")
def started(spec, hf, tmp_path_factory):
    """A second engine whose `lora.path` is an adapter directory (of random weights, returned too)."""
    directory = tmp_path_factory.mktemp("adapter")
    weights = random_adapter(hf, seed=4)
    write_adapter_dir(directory, weights, spec.lora)
    lora = dataclasses.replace(spec.lora, path=str(directory), is_dummy=False)
    return create_engine(dataclasses.replace(spec, lora=lora)), weights


@needs_vllm
def test_an_adapter_directory_is_served_from_version_0(started, hf):
    engine, weights = started
    hf.update_weights(weights, version=0)
    if not engine.spec.model.merge_lora:
        assert engine._lora_request.lora_path == engine.spec.lora.path
    prompts = [engine.encode(text) for text in PROMPTS]
    served = assert_serves(engine, hf, prompts, version=0)
    with hf.model.disable_adapter():
        base = greedy(hf, prompts)
    assert [s.response_ids for s in served] != [s.response_ids for s in base]
