"""Experiences -> one padded tensor batch, the layout trainer and advantage functions compute on.

Prompts are left-padded to the longest prompt P and responses right-padded to the longest response
R, so every response starts at column P of `input_ids` [B, P+R] and every per-token tensor is
[B, R], aligned with the response tokens. The logits that predict response token j sit at column
P + j - 1 of the model output.
"""

from typing import Dict, List

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
    prompt_len = max(e.prompt_length for e in experiences)
    response_len = max(e.response_length for e in experiences)
    input_ids = torch.full((size, prompt_len + response_len), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((size, prompt_len + response_len), dtype=torch.long)
    response_mask = torch.zeros((size, response_len), dtype=torch.bool)
    for row, exp in enumerate(experiences):
        start = prompt_len - exp.prompt_length
        end = prompt_len + exp.response_length
        input_ids[row, start:end] = exp.tokens
        attention_mask[row, start:end] = 1
        response_mask[row, : exp.response_length] = exp.mask()
    position_ids = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)
    groups: Dict[str, int] = {}
    batch: Batch = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": position_ids,
        "response_mask": response_mask,
        "group_ids": torch.tensor([groups.setdefault(e.group_id, len(groups)) for e in experiences]),
        "model_versions": torch.tensor([e.model_version for e in experiences], dtype=torch.long),
        "run_ids": torch.tensor([e.run_id for e in experiences], dtype=torch.long),
        "step_ids": torch.tensor([e.step for e in experiences], dtype=torch.long),
        "expert_mask": torch.tensor([bool(e.info.get("is_expert", False)) for e in experiences]),
    }
    for name, key in (("logprobs", "old_logprobs"), ("advantages", "advantages"), ("returns", "returns"),
                      ("teacher_logprobs", "teacher_logprobs")):  # fmt: skip
        if all(getattr(e, name) is not None for e in experiences):
            batch[key] = _pad_right([getattr(e, name) for e in experiences], response_len)
    if all(e.reward is not None for e in experiences):
        rewards = torch.tensor([float(e.reward) for e in experiences])
        token_level = torch.zeros((size, response_len))
        last = torch.tensor([max(e.response_length - 1, 0) for e in experiences])
        token_level[torch.arange(size), last] = rewards
        batch["rewards"] = rewards
        batch["token_level_rewards"] = token_level
    return batch


def _pad_right(values: List[torch.Tensor], length: int) -> torch.Tensor:
    out = torch.zeros((len(values), length), dtype=values[0].dtype)
    for row, value in enumerate(values):
        out[row, : len(value)] = value
    return out
