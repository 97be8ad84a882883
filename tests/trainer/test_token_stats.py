"""Token logprobs and entropy: chunked and checkpointed forms equal the plain formula, values and grads."""

import math

import pytest
import torch

from trinity.trainer.token_stats import CHUNK_POSITIONS, token_logprobs


def reference(logits, tokens):
    """log p(token) and -sum p log p, position by position, written from the definitions."""
    rows, length, _ = logits.shape
    logprob = torch.zeros(rows, length, dtype=torch.float64)
    entropy = torch.zeros(rows, length, dtype=torch.float64)
    for b in range(rows):
        for t in range(length):
            z = logits[b, t].double().tolist()
            top = max(z)
            norm = top + math.log(sum(math.exp(v - top) for v in z))
            logprob[b, t] = z[tokens[b, t]] - norm
            entropy[b, t] = -sum(math.exp(v - norm) * (v - norm) for v in z)
    return logprob, entropy


@pytest.mark.parametrize("chunked, recompute", [(False, False), (True, False), (True, True)])
def test_values_and_gradients_match_the_formula(chunked, recompute):
    gen = torch.Generator().manual_seed(0)
    length = CHUNK_POSITIONS * 2 + 17  # several chunks and a ragged last one
    logits = (torch.randn(2, length, 11, generator=gen) * 3).requires_grad_(True)
    tokens = torch.randint(0, 11, (2, length), generator=gen)
    logprob, entropy = token_logprobs(logits, tokens, True, chunked, recompute)
    want_logprob, want_entropy = reference(logits.detach(), tokens)
    assert torch.allclose(logprob.double(), want_logprob, atol=1e-5)
    assert torch.allclose(entropy.double(), want_entropy, atol=1e-5)
    (logprob.sum() + 0.5 * entropy.sum()).backward()
    plain = logits.detach().clone().requires_grad_(True)
    log_softmax = torch.log_softmax(plain, -1)
    picked = log_softmax.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    (picked.sum() + 0.5 * (-(log_softmax.exp() * log_softmax).sum(-1)).sum()).backward()
    assert torch.allclose(logits.grad, plain.grad, atol=1e-5)


def test_without_entropy_returns_none():
    logits, tokens = torch.randn(1, 5, 7), torch.randint(0, 7, (1, 5))
    assert token_logprobs(logits, tokens, False, chunked=True)[1] is None
