"""Per-token logprobs and entropy from response logits, optionally in chunks of positions.

Chunking (`trainer.actor.entropy_from_logits_with_chunking`) bounds the float32 [rows, chunk, vocab]
temporaries of log-softmax to one chunk at a time, which is what dominates memory with large
vocabularies in no-grad passes; `entropy_checkpointing` recomputes each chunk's entropy in backward
instead of keeping its softmax for it.
"""

from typing import Optional, Tuple

import torch
from torch.utils.checkpoint import checkpoint

CHUNK_POSITIONS = 128  # response positions per chunk when chunking


def at_response_positions(per_position: torch.Tensor, response_len: int) -> torch.Tensor:
    """[B, T, ...] outputs of a causal model -> the R = response_len positions that predict (or value)
    the response tokens: position t - 1 for response token t."""
    prompt_len = per_position.shape[1] - response_len
    return per_position[:, prompt_len - 1 : prompt_len - 1 + response_len]


def entropy_of(logits: torch.Tensor) -> torch.Tensor:
    """H = logsumexp(z) - sum(softmax(z) * z) over the last dim."""
    return torch.logsumexp(logits, dim=-1) - (torch.softmax(logits, dim=-1) * logits).sum(-1)


def token_logprobs(
    logits: torch.Tensor, tokens: torch.Tensor, with_entropy: bool, chunked: bool = False, recompute: bool = False
) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """([B, R] logprob of each token, [B, R] entropy or None) from [B, R, V] float logits."""
    step = CHUNK_POSITIONS if chunked else max(1, logits.shape[1])
    logprobs, entropies = [], []
    for start in range(0, logits.shape[1], step):
        piece = logits[:, start : start + step]
        picked = piece.gather(-1, tokens[:, start : start + step].unsqueeze(-1)).squeeze(-1)
        logprobs.append(picked - torch.logsumexp(piece, dim=-1))
        if with_entropy:
            use_checkpoint = recompute and piece.requires_grad
            entropies.append(
                checkpoint(entropy_of, piece, use_reentrant=False) if use_checkpoint else entropy_of(piece)
            )
    return torch.cat(logprobs, dim=1), (torch.cat(entropies, dim=1) if with_entropy else None)
