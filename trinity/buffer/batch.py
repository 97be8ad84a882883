"""Experiences -> one padded tensor batch, the layout trainer and advantage functions compute on.

Prompts are left-padded to the longest prompt P and responses right-padded to the longest response
R, so every response starts at column P of `input_ids` [B, P+R] and every per-token tensor is
[B, R], aligned with the response tokens. The logits that predict response token j sit at column
P + j - 1 of the model output.
"""

from typing import Dict, List, Sequence

import torch

from trinity.buffer.experience import Experience

Batch = Dict[str, torch.Tensor]


def collate(experiences: List[Experience], pad_token_id: int) -> Batch:
    """Keys always present: input_ids, attention_mask, position_ids [B, P+R]; response_mask [B, R]
    (trained tokens); group_ids, model_versions, run_ids, step_ids [B] (long; run_ids tell a task's
    responses apart, step_ids the turns of one multi-step run); expert_mask [B] (bool).
    Present when every experience has them: old_logprobs, advantages, returns, teacher_logprobs
    [B, R]; rewards [B] and token_level_rewards [B, R] (the reward on the last response token)."""
    if not experiences:
        raise ValueError("cannot collate an empty list of experiences")
    size = len(experiences)
    prompt_lengths = torch.tensor([e.prompt_length for e in experiences])
    response_lengths = torch.tensor([e.response_length for e in experiences])
    prompt_len, response_len = int(prompt_lengths.max()), int(response_lengths.max())
    columns = torch.arange(prompt_len + response_len)
    tokens = (columns >= (prompt_len - prompt_lengths)[:, None]) & (columns < (prompt_len + response_lengths)[:, None])
    responses = torch.arange(response_len) < response_lengths[:, None]
    attention_mask = tokens.long()
    groups: Dict[str, int] = {}
    batch: Batch = {
        "input_ids": _rows([e.tokens for e in experiences], tokens, pad_token_id),
        "attention_mask": attention_mask,
        "position_ids": (attention_mask.cumsum(dim=1) - 1).clamp(min=0),
        "response_mask": responses,
        "group_ids": torch.tensor([groups.setdefault(e.group_id, len(groups)) for e in experiences]),
        "model_versions": torch.tensor([e.model_version for e in experiences], dtype=torch.long),
        "run_ids": torch.tensor([e.run_id for e in experiences], dtype=torch.long),
        "step_ids": torch.tensor([e.step for e in experiences], dtype=torch.long),
        "expert_mask": torch.tensor([bool(e.info.get("is_expert", False)) for e in experiences]),
    }
    if any(e.action_mask is not None for e in experiences):
        batch["response_mask"] = _rows([e.mask() for e in experiences], responses, False)
    for name, key in (
        ("logprobs", "old_logprobs"),
        ("advantages", "advantages"),
        ("returns", "returns"),
        ("teacher_logprobs", "teacher_logprobs"),
    ):
        values = [getattr(e, name) for e in experiences]
        if all(value is not None for value in values):
            batch[key] = _rows(values, responses, 0)
    if all(e.reward is not None for e in experiences):
        rewards = torch.tensor([float(e.reward) for e in experiences])
        token_level = torch.zeros((size, response_len))
        token_level[torch.arange(size), (response_lengths - 1).clamp(min=0)] = rewards
        batch["rewards"] = rewards
        batch["token_level_rewards"] = token_level
    return batch


def _rows(values: Sequence[torch.Tensor], within: torch.Tensor, fill) -> torch.Tensor:
    """`within`'s shape, `fill` where it is False and the values one row after the other where it is True: one
    copy for the whole batch (a copy per row cost ~3x as much on a 128-row step). The ops here run on the
    caller's thread alone; one that splits its work (`repeat_interleave` does) starts torch threads for the
    calling thread, and in colocate's device those compete with the device's own for every later update."""
    flat = torch.cat(list(values))
    return torch.full(within.shape, fill, dtype=flat.dtype).masked_scatter_(within, flat)
