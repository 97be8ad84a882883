"""Running each distinct prompt once gives the logits and gradients of a full pass, on the tiny model."""

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from tests.trainer.conftest import experiences, trainer_config
from trinity.buffer.batch import collate
from trinity.config.lora import LoRAConfig
from trinity.model.load import load_causal_lm, resolve_model_path
from trinity.model.lora import adapter_names, add_adapter
from trinity.trainer.shared_prompt import distinct_prompts, response_logits, shares_prompts


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return resolve_model_path(trainer_config(tmp_path_factory.mktemp("tiny")).model)


def _logits_and_grads(model, micro, response_len, share):
    model.zero_grad(set_to_none=True)
    logits = response_logits(model, micro, response_len, share)
    logits.float().log_softmax(-1).mean().backward()
    return logits.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def _full_and_shared(model, batch):
    """(logits, grads) of the full pass, then of the shared-prompt pass, over a collated batch."""
    micro = {key: batch[key] for key in ("input_ids", "attention_mask", "position_ids")}
    response_len = batch["response_mask"].shape[1]
    return [_logits_and_grads(model, micro, response_len, share=share) for share in (False, True)]


@pytest.mark.parametrize("shared_prompts", [True, False])
def test_shared_pass_matches_the_full_pass(model_path, shared_prompts):
    model = load_causal_lm(model_path).train()
    batch = collate(experiences(12, 60, seed=5, group=4, shared_prompts=shared_prompts), pad_token_id=0)
    response_len = batch["response_mask"].shape[1]
    assert shares_prompts(model)
    (full_logits, full_grads), (shared_logits, shared_grads) = _full_and_shared(model, batch)
    assert full_logits.shape == shared_logits.shape == (12, response_len, model.config.vocab_size)
    assert (full_logits - shared_logits).abs().max() < 1e-4
    for name, grad in full_grads.items():
        assert torch.allclose(grad, shared_grads[name], atol=1e-5), name


def test_a_lora_wrapped_model_shares_prompts_and_matches_its_full_pass(model_path):
    """PEFT's wrapper hides the base model's `logits_to_keep` from its own signature: judged by its base, a
    LoRA policy keeps the shared pass (and the full pass computes logits at the response positions only)."""
    lora = LoRAConfig(name="default", lora_rank=4, lora_alpha=8)
    model = add_adapter(load_causal_lm(model_path), lora, trainable=True).train()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if ".lora_B." in name:
                param.normal_(std=0.1)
    batch = collate(experiences(8, 60, seed=6, group=4, shared_prompts=True), pad_token_id=0)
    assert shares_prompts(model)
    (full_logits, full_grads), (shared_logits, shared_grads) = _full_and_shared(model, batch)
    assert (full_logits - shared_logits).abs().max() < 1e-4
    for name in adapter_names(model, lora):
        assert torch.allclose(full_grads[name], shared_grads[name], atol=1e-5), name


def test_distinct_prompts_groups_rows_by_their_prompt_columns():
    ids = torch.tensor([[0, 5, 6, 1], [0, 5, 6, 2], [7, 5, 6, 3], [0, 5, 6, 4]])
    mask = torch.tensor([[0, 1, 1, 1], [0, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]])
    first, owner = distinct_prompts(ids, mask, prompt_len=3)
    # rows 0 and 1 share prompt and mask; row 3 has row 0's tokens but another mask
    assert owner[0] == owner[1] and len(set(owner.tolist())) == 3
    assert sorted(first.tolist()) == [0, 2, 3]
    assert all(int(owner[first[number]]) == number for number in range(len(first)))


def test_models_without_a_plain_cache_take_the_full_pass(model_path):
    model = load_causal_lm(model_path).train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    assert not shares_prompts(model), "gradient checkpointing turns the cache off"
    windowed = Qwen2Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        use_sliding_window=True,
        sliding_window=4,
        max_window_layers=0,
    )
    assert not shares_prompts(Qwen2ForCausalLM(windowed))


class _WithoutLogitsToKeep(torch.nn.Module):
    """A causal LM whose forward cannot limit its logits (as some remote-code models)."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.config = inner, inner.config

    def forward(self, input_ids, attention_mask, position_ids, use_cache=False):
        return self.inner(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids)


def test_a_forward_without_logits_to_keep_gets_the_full_logits_cut(model_path):
    model = load_causal_lm(model_path)
    batch = collate(experiences(6, 60, seed=2, group=3, shared_prompts=True), pad_token_id=0)
    micro = {key: batch[key] for key in ("input_ids", "attention_mask", "position_ids")}
    response_len = batch["response_mask"].shape[1]
    plain = _WithoutLogitsToKeep(model)
    assert not shares_prompts(plain)
    with torch.no_grad():
        expected = response_logits(model, micro, response_len, share=True)
        got = response_logits(plain, micro, response_len, share=False)
    assert got.shape == expected.shape and (got - expected).abs().max() < 1e-4
