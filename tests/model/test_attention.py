"""trinity's attention computes what SDPA computes, on both of its paths, and loaded models run with it."""

import copy

import pytest
import torch
from transformers import DynamicCache

from trinity.model import attention
from trinity.model.load import load_causal_lm

torch.set_num_threads(1)


class _Layer(torch.nn.Module):
    """What the attention function reads from a model's attention layer."""

    def __init__(self, groups: int):
        super().__init__()
        self.num_key_value_groups, self.is_causal = groups, True


def _sdpa(query, key, value, mask, is_causal):
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, is_causal=is_causal, enable_gqa=True
    ).transpose(1, 2)


@pytest.mark.parametrize("keys", [6, attention.SHORT_KEYS + 10])  # the plain products, then SDPA
@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("groups", [1, 2])
def test_both_paths_match_sdpa(keys, masked, groups):
    generator = torch.Generator().manual_seed(keys)
    query = torch.randn(3, 4, keys, 8, generator=generator)
    key, value = torch.randn(2, 3, 4 // groups, keys, 8, generator=generator)
    mask = None
    if masked:  # left padding of two tokens in row 0, causal everywhere
        mask = torch.ones(keys, keys, dtype=torch.bool).tril().repeat(3, 1, 1, 1)
        mask[0, :, :, :2] = False
        mask[0, :, :2, 0] = True  # the padding rows attend somewhere, as transformers' masks let them
    out, weights = attention.attention(_Layer(groups), query, key, value, mask)
    assert weights is None
    torch.testing.assert_close(out, _sdpa(query, key, value, mask, is_causal=not masked), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("width", [1, 5, attention.SOFTMAX_VECTOR - 1, attention.SOFTMAX_VECTOR, 40])
def test_the_padded_softmax_is_softmax(width):
    scores = torch.randn(3, 2, 4, width, generator=torch.Generator().manual_seed(width), requires_grad=True)
    scores.data[0, 0, 0] = torch.finfo(torch.float32).min  # a fully masked row, as a padding token's
    upstream = torch.randn(3, 2, 4, width)
    ours = attention._softmax(scores)
    (ours * upstream).sum().backward()
    our_grad, scores.grad = scores.grad, None
    theirs = torch.softmax(scores, dim=-1)
    (theirs * upstream).sum().backward()
    torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(our_grad, scores.grad)


@pytest.fixture(scope="module")
def models(tiny_dir):
    """A tiny model loaded the trinity way, and an SDPA copy of it."""
    ours = load_causal_lm(str(tiny_dir))
    plain = copy.deepcopy(ours)
    plain.set_attn_implementation("sdpa")
    return ours, plain


def test_loaded_models_run_trinity_attention(models):
    assert models[0].config._attn_implementation == attention.NAME


@pytest.mark.parametrize("length", [12, attention.SHORT_KEYS + 20])
def test_a_padded_batch_gets_sdpas_logits_and_gradients(models, length):
    ids = torch.randint(3, 90, (4, length), generator=torch.Generator().manual_seed(length))
    mask = torch.ones_like(ids)
    mask[:2, :5] = 0
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    results = []
    for model in copy.deepcopy(models):
        model.train()
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
        logits[mask.bool()].logsumexp(-1).sum().backward()
        results.append((logits.detach(), [p.grad for p in model.parameters()]))
    (ours, our_grads), (plain, plain_grads) = results
    torch.testing.assert_close(ours[mask.bool()], plain[mask.bool()], atol=1e-5, rtol=1e-5)
    for mine, theirs in zip(our_grads, plain_grads, strict=True):
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-4)


def test_decoding_from_a_cache_gets_sdpas_logits(models):
    ids = torch.randint(3, 90, (3, 7), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[0, :3] = 0
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    step = torch.randint(3, 90, (3, 1), generator=torch.Generator().manual_seed(1))
    logits = []
    with torch.no_grad():
        for model in models:
            cache = DynamicCache(config=model.config)
            model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True)
            extended = torch.cat([mask, torch.ones_like(step)], 1)
            output = model(
                input_ids=step,
                attention_mask=extended,
                position_ids=positions[:, -1:] + 1,
                past_key_values=cache,
                use_cache=True,
            )
            logits.append(output.logits)
    torch.testing.assert_close(logits[0], logits[1], atol=1e-5, rtol=1e-5)


def test_a_model_without_attention_functions_keeps_its_own():
    from transformers import PretrainedConfig, PreTrainedModel

    class OwnAttention(PreTrainedModel):
        config_class = PretrainedConfig

    model = OwnAttention(PretrainedConfig())
    before = model.config._attn_implementation
    attention.use_for(model)
    assert not OwnAttention.is_backend_compatible() and model.config._attn_implementation == before
