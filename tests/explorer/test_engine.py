"""The transformers rollout engine: shapes, logprobs of the sampling policy, stops, weights, budgets."""

import dataclasses

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from tests.explorer.conftest import assert_well_formed, base_state, forward_logprobs, read_only, stop_first_state
from trinity.explorer.backends import create_engine
from trinity.explorer.engine import TaskTimeout
from trinity.explorer.sampling import SamplingParams
from trinity.model.tiny import ensure_tiny_model


def test_n_samples_per_prompt_with_consistent_fields(engine):
    prompts = [engine.encode("12+7="), engine.encode("3-1=")]
    groups = engine.generate(prompts, SamplingParams(n=3, max_tokens=6))
    assert [len(group) for group in groups] == [3, 3]
    stops = set(engine.codec.stop_token_ids)
    assert_well_formed(engine, prompts, groups, stops, max_tokens=6)


@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, -1, 1.0), (0.7, 5, 0.9), (0.0, -1, 1.0)])
def test_logprobs_are_log_softmax_of_logits_over_temperature(engine, temperature, top_k, top_p):
    """Batched, left-padded, KV-cached sampling reports what a fresh forward pass computes."""
    prompts = [engine.encode("7*8="), engine.encode("100-42=")]  # different lengths: left padding
    params = SamplingParams(n=2, temperature=temperature, top_k=top_k, top_p=top_p, max_tokens=12)
    for group in engine.generate(prompts, params):
        for sample in group:
            expected = forward_logprobs(engine.model, sample.prompt_ids, sample.response_ids, temperature or 1.0)
            assert torch.allclose(torch.tensor(sample.logprobs), expected, atol=1e-4)


def test_truncation_shapes_what_is_sampled(engine):
    prompt = [engine.encode("5+5=")]
    greedy = engine.generate(prompt, SamplingParams(temperature=0, max_tokens=10))[0][0]
    top1 = engine.generate(prompt, SamplingParams(n=4, temperature=1.0, top_k=1, max_tokens=10))[0]
    assert all(sample.response_ids == greedy.response_ids for sample in top1)
    # the reported logprob is the untruncated one: below 0 although top-1 sampling is certain
    assert max(top1[0].logprobs) < 0


def test_sampling_is_seeded(spec, engine):
    other = create_engine(spec)
    fresh = create_engine(spec)
    prompt = [engine.encode("1+2=")]
    params = SamplingParams(n=4, max_tokens=8)
    assert [s.response_ids for s in other.generate(prompt, params)[0]] == [
        s.response_ids for s in fresh.generate(prompt, params)[0]
    ]


def test_update_weights_makes_outputs_follow_the_new_weights(spec, tmp_path):
    engine = create_engine(spec)
    other_dir = ensure_tiny_model(
        dataclasses.replace(
            spec.built, model_path="", tiny=dataclasses.replace(spec.built.tiny, seed=1, cache_dir=str(tmp_path))
        )
    )
    new = load_file(other_dir / "model.safetensors")
    reference = create_engine(
        dataclasses.replace(spec, built=None, model=dataclasses.replace(spec.model, model_path=str(other_dir)))
    )
    prompt = [engine.encode("12+34=")]
    greedy = SamplingParams(temperature=0, max_tokens=16)
    before = engine.generate(prompt, greedy)[0][0]

    engine.update_weights(read_only(new), version=3)

    after = engine.generate(prompt, greedy)[0][0]
    expected = reference.generate(prompt, greedy)[0][0]
    assert engine.model_version == 3 and after.model_version == 3
    assert after.response_ids == expected.response_ids != before.response_ids
    assert torch.allclose(torch.tensor(after.logprobs), torch.tensor(expected.logprobs), atol=1e-5)


def test_update_weights_rejects_mismatched_state_without_changing_anything(spec):
    engine = create_engine(spec)
    state = base_state(engine)
    original = base_state(engine)
    name = "lm_head.weight"
    with pytest.raises(KeyError, match="not parameters"):
        engine.update_weights({**state, "extra.weight": torch.zeros(1)}, version=1)
    with pytest.raises(KeyError, match="no new value"):
        engine.update_weights({k: v for k, v in state.items() if k != name}, version=1)
    with pytest.raises(ValueError, match="shape"):
        engine.update_weights({**{k: v + 1 for k, v in state.items()}, name: torch.zeros(3, 3)}, version=1)
    assert engine.model_version == 0
    assert all(torch.equal(original[k], v) for k, v in engine.model.state_dict().items())


def test_stop_tokens_end_responses_and_min_tokens_delays_them(spec):
    engine = create_engine(spec)
    eos = engine.codec.tokenizer.eos_token_id
    prompt = engine.encode("2+2=")
    engine.update_weights(stop_first_state(engine, prompt, eos), version=1)
    (sample,) = engine.generate([prompt], SamplingParams(temperature=0, max_tokens=8))[0]
    assert sample.finish_reason == "stop" and sample.response_ids == [eos] and sample.text == ""
    for sample in engine.generate([prompt], SamplingParams(n=3, min_tokens=3, max_tokens=8))[0]:
        assert len(sample.response_ids) >= 4 or sample.finish_reason == "length"
        assert eos not in sample.response_ids[:3]
        expected = forward_logprobs(engine.model, prompt, sample.response_ids)
        assert torch.allclose(torch.tensor(sample.logprobs), expected, atol=1e-4)  # min_tokens mask not in logprobs


def test_prompts_are_fitted_into_the_context_budget(spec, engine):
    long_prompt = engine.encode("1+" * 60 + "1=")
    assert len(long_prompt) > engine.max_prompt_tokens
    (sample,) = engine.generate([long_prompt], SamplingParams(max_tokens=4))[0]
    assert sample.prompt_ids == long_prompt[-engine.max_prompt_tokens :]
    assert len(sample.prompt_ids) + len(sample.response_ids) <= engine.max_model_len
    _, limit = engine.fit_prompt(long_prompt, max_tokens=1000)
    assert limit == engine.max_model_len - engine.max_prompt_tokens

    strict = create_engine(dataclasses.replace(spec, enable_prompt_truncation=False))
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        strict.generate([long_prompt])
    with pytest.raises(ValueError, match="empty prompt"):
        strict.generate([[]])


def test_a_passed_deadline_raises_task_timeout(engine):
    with pytest.raises(TaskTimeout):
        engine.generate([engine.encode("9+9=")], SamplingParams(n=2, max_tokens=30, min_tokens=30), timeout=0.0)


def test_per_row_limits_in_one_batch(engine):
    rows = [engine.encode("1+1="), engine.encode("22+22=")]
    params = SamplingParams(max_tokens=9, min_tokens=9)
    samples = engine.generate_rows(rows, params, max_tokens=[3, 9], deadlines=[None, None])
    assert [len(s.response_ids) for s in samples] == [3, 9]
    assert [s.finish_reason for s in samples] == ["length", "length"]


def test_rows_that_end_leave_the_batch(spec):
    """After a row's last token the model computes only the rows still generating, and what those
    generate is what they generate alone."""
    engine = create_engine(spec)
    rows = [engine.encode("1+1="), engine.encode("22+22="), engine.encode("3+4=")]
    greedy = SamplingParams(temperature=0.0, max_tokens=8, min_tokens=8)
    batch_sizes = []
    hook = engine.model.register_forward_pre_hook(
        lambda _module, _args, kwargs: batch_sizes.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    try:
        together = engine.generate_rows(rows, greedy, max_tokens=[2, 8, 5], deadlines=[None] * 3)
    finally:
        hook.remove()
    assert batch_sizes == [3, 3, 2, 2, 2, 1, 1, 1]  # the prompt, then one forward per further token
    alone = engine.generate_rows(rows[1:2], greedy, max_tokens=[8], deadlines=[None])
    assert together[1].response_ids == alone[0].response_ids
    assert torch.allclose(torch.tensor(together[1].logprobs), torch.tensor(alone[0].logprobs), atol=1e-4)


def test_a_prompt_sampled_n_times_is_computed_once_and_its_rows_still_sample_apart(spec):
    """The first forward runs each distinct prompt once; every row then draws its own tokens, and each
    reports the logprobs a fresh forward pass of its own sequence computes."""
    engine = create_engine(spec)
    prompts = [engine.encode("12+7="), engine.encode("3-1=")]
    batch_sizes = []
    hook = engine.model.register_forward_pre_hook(
        lambda _module, _args, kwargs: batch_sizes.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    try:
        groups = engine.generate(prompts, SamplingParams(n=6, temperature=1.0, max_tokens=6, min_tokens=6))
    finally:
        hook.remove()
    assert batch_sizes == [2, 12, 12, 12, 12, 12]  # the two prompts, then every row
    assert len({tuple(sample.response_ids) for group in groups for sample in group}) > 2
    for group in groups:
        for sample in group:
            expected = forward_logprobs(engine.model, sample.prompt_ids, sample.response_ids, 1.0)
            assert torch.allclose(torch.tensor(sample.logprobs), expected, atol=1e-4)


def test_rollout_args_override_engine_defaults(engine):
    params = engine.defaults.updated({"temperature": 0.5, "max_tokens": 7, "top_p": None, "logprobs": 0, "n": 4})
    assert (params.temperature, params.max_tokens, params.n) == (0.5, 7, 4)
    assert params.top_p == engine.defaults.top_p
    with pytest.raises(ValueError, match="unknown rollout args"):
        engine.defaults.updated({"temprature": 1.0})
    with pytest.raises(ValueError, match="logprobs"):
        engine.defaults.updated({"logprobs": 5})
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0)


def test_chat_prompts_use_the_template(engine):
    text = engine.chat_prompt([{"role": "user", "content": "2+2="}])
    assert text == "<|im_start|>user\n2+2=<|im_end|>\n<|im_start|>assistant\n"
    assert engine.decode(engine.encode(text), skip_special_tokens=False) == text
    assert np.isin(engine.codec.stop_token_ids, engine.encode("<|endoftext|><|im_end|>")).all()


def test_a_model_without_a_pad_token_pads_with_its_eos(spec, tmp_path):
    """Llama-style checkpoints ship no pad token: batches of different prompt lengths still sample what a
    fresh unpadded forward pass computes."""
    import json
    import shutil

    directory = tmp_path / "no-pad"
    shutil.copytree(spec.weights_path(), directory)
    for name in ("tokenizer_config.json", "special_tokens_map.json", "config.json", "generation_config.json"):
        if (directory / name).exists():
            settings = json.loads((directory / name).read_text())
            for key in ("pad_token", "pad_token_id"):
                settings.pop(key, None)
            (directory / name).write_text(json.dumps(settings))
    engine = create_engine(
        dataclasses.replace(spec, built=None, model=dataclasses.replace(spec.model, model_path=str(directory)))
    )
    assert engine.codec.pad_token_id == engine.codec.tokenizer.eos_token_id is not None
    prompts = [engine.encode("7*8="), engine.encode("100-42=")]
    for group in engine.generate(prompts, SamplingParams(n=2, temperature=1.0, max_tokens=12)):
        for sample in group:
            expected = forward_logprobs(engine.model, sample.prompt_ids, sample.response_ids)
            assert torch.allclose(torch.tensor(sample.logprobs), expected, atol=1e-4)
